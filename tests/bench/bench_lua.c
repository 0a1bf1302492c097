/* bench_lua.c: `strata bench lua`: one small Lua request served three ways (restore + eval from a snapshot of the loaded program, on KVM and the process backend; fork + exec of Debian's lua5.4; a fresh Lua state in this process), and what a loaded Lua costs in layers and PSS. */
#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "index/index.h"
#include "store/store.h"
#include "vmm/vmm.h"

extern char **environ;

/* The request: app.lua's handle() formats and sorts a few values (tests/lua/app.lua). */
#define LUA_REQUEST "return handle('pear=3 apple=12 fig=3 kiwi=7 plum=1')"

static char *app_text(void)
{
	static char path[PATH_MAX];
	const char *src = getenv("STRATA_SRC");
	FILE *f;
	char *buf = NULL;
	long n;

	snprintf(path, sizeof(path), "%s/tests/lua/app.lua", src ? src : STRATA_SOURCE_ROOT);
	if (!(f = fopen(path, "re")))
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (buf = calloc(1, (size_t)n + 1)) && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

static const char *lua_elf_path(void)
{
	static char path[PATH_MAX];
	const char *g = bench_guest_path();
	const char *slash = strrchr(g, '/');

	/* simpleguest.elf's directory is vmm/guest/; lua.elf is in its lua/. */
	snprintf(path, sizeof(path), "%.*s/lua/lua.elf", slash ? (int)(slash - g) : 1, slash ? g : ".");
	return path;
}

static int call_str(struct vmm_sandbox *sb, const char *fn, const char *arg)
{
	struct vmm_value a = { .type = VMM_STR, .data = arg, .len = strlen(arg) };
	struct vmm_result r = { 0 };
	int rc = vmm_sandbox_call(sb, fn, &a, 1, &r);

	if (rc == 0)
		vmm_result_clear(&r);
	return rc;
}

/* A store holding a snapshot of lua.elf with app.lua loaded. */
struct luasnap {
	char dir[PATH_MAX], store[PATH_MAX + 16];
	struct st_store *st;
	struct ix *ix;
	struct st_manifest *m;
	enum vmm_backend_kind backend;
	struct vmm_sandbox *sb;  /* the sandbox a case serves from */
};

static void luasnap_free(void *state)
{
	struct luasnap *s = state;

	if (!s)
		return;
	vmm_sandbox_free(s->sb);
	st_manifest_free(s->m);
	ix_close(s->ix);
	st_store_close(s->st);
	if (s->dir[0])
		bench_rm_rf(s->dir);
	free(s);
}

static int luasnap_new(enum vmm_backend_kind backend, struct luasnap **out)
{
	struct luasnap *s = calloc(1, sizeof(*s));
	struct vmm_config cfg = { .backend = backend, .host = bench_host() };
	struct vmm_sandbox *sb = NULL;
	char *app = app_text();
	st_id id;
	int rc = -ENOMEM;

	if (!s || !app)
		goto fail;
	s->backend = backend;
	if ((rc = bench_tmpdir("strata-bench-lua", s->dir, sizeof(s->dir))) < 0)
		goto fail;
	snprintf(s->store, sizeof(s->store), "%s/store", s->dir);
	if ((rc = st_store_init(s->store, NULL)) < 0 || (rc = st_store_open(s->store, 0, &s->st)) < 0 ||
	    (rc = ix_open(s->st, NULL, &s->ix)) < 0)
		goto fail;
	if ((rc = vmm_sandbox_new(lua_elf_path(), &cfg, &sb, NULL)) < 0 || (rc = call_str(sb, "load", app)) < 0 ||
	    (rc = vmm_sandbox_capture(sb, s->st, &s->m)) < 0 || (rc = ix_snap_commit(s->ix, s->m, "lua", 0, &id)) < 0)
		goto fail;
	vmm_sandbox_free(sb);
	free(app);
	*out = s;
	return 0;
fail:
	vmm_sandbox_free(sb);
	free(app);
	luasnap_free(s);
	return rc;
}

/* (1) restore in place to the loaded program's snapshot, then eval the request. */
static int restore_eval_setup(void **state, const void *arg)
{
	struct luasnap *s;
	struct vmm_config cfg = { .backend = *(const enum vmm_backend_kind *)arg, .host = bench_host() };
	int rc = luasnap_new(cfg.backend, &s);

	if (rc < 0)
		return rc;
	if ((rc = vmm_sandbox_from_snapshot(s->m, vmm_layer_open_store, s->st, &cfg, &s->sb, NULL)) < 0 ||
	    (rc = call_str(s->sb, "eval", LUA_REQUEST)) < 0) {
		luasnap_free(s);
		return rc;
	}
	*state = s;
	return 0;
}

static int restore_eval_iter(void *state, struct bench_timer *t)
{
	struct luasnap *s = state;
	int rc = vmm_sandbox_restore(s->sb);

	return rc < 0 ? rc : call_str(s->sb, "eval", LUA_REQUEST);
}

/* (1b) a new sandbox from the snapshot in the store, its first eval. */
static int first_eval_iter(void *state, struct bench_timer *t)
{
	struct luasnap *s = state;
	struct vmm_config cfg = { .backend = s->backend, .host = bench_host() };
	struct vmm_sandbox *sb = NULL;
	int rc = vmm_sandbox_from_snapshot(s->m, vmm_layer_open_store, s->st, &cfg, &sb, NULL);

	if (rc == 0)
		rc = call_str(sb, "eval", LUA_REQUEST);
	bench_timer_stop(t);
	vmm_sandbox_free(sb);
	return rc;
}

/* (2) fork + exec of Debian's lua5.4 with the program and the request (the code starts with a
 * newline: lua5.4 takes an -e argument that starts with "-" for an option). */
struct forkexec {
	char *code;
};

static int forkexec_setup(void **state, const void *arg)
{
	struct forkexec *f = calloc(1, sizeof(*f));
	char *app = app_text();

	if (!f || !app || !bench_have("lua5.4")) {
		free(f);
		free(app);
		return -ENOENT;
	}
	if (asprintf(&f->code, "\n%s\nio.write((function() %s end)())", app, LUA_REQUEST) < 0) {
		free(f);
		free(app);
		return -ENOMEM;
	}
	free(app);
	*state = f;
	return 0;
}

static int forkexec_iter(void *state, struct bench_timer *t)
{
	struct forkexec *f = state;
	char *argv[] = { "lua5.4", "-e", f->code, NULL };
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int st, rc;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	rc = posix_spawnp(&pid, "lua5.4", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0)
		return -rc;
	if (waitpid(pid, &st, 0) < 0)
		return -errno;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -ECHILD;
}

static void forkexec_free(void *state)
{
	struct forkexec *f = state;

	if (f)
		free(f->code);
	free(f);
}

/* (3) luaL_newstate + luaL_openlibs + the program + the request, here (no isolation). */
static int newstate_setup(void **state, const void *arg)
{
	char *app = app_text();

	if (!app)
		return -ENOENT;
	*state = app;
	return 0;
}

static int newstate_iter(void *state, struct bench_timer *t)
{
	lua_State *L = luaL_newstate();
	int rc = -ENOMEM;

	if (!L)
		return rc;
	luaL_openlibs(L);
	if (luaL_dostring(L, state) == LUA_OK && luaL_dostring(L, LUA_REQUEST) == LUA_OK && lua_isstring(L, -1))
		rc = 0;
	lua_close(L);
	return rc;
}

/* What one request makes a restore put back: the pages the restore before
 * each eval rewrote (Lua's allocator and collector, its C stack, the call's
 * buffers), averaged over 50 requests. */
static void lua_pages_per_request(struct bench *b, enum vmm_backend_kind backend, const char *prefix)
{
	enum { REQUESTS = 50 };
	char name[128];
	void *state = NULL;
	struct vmm_snap_stats st0, st1;

	snprintf(name, sizeof(name), "lua/%spages_rewritten_per_request", prefix);
	if (!bench_selected(b, name) || restore_eval_setup(&state, &backend) < 0)
		return;
	struct luasnap *s = state;
	vmm_sandbox_snap_stats(s->sb, &st0);
	for (int i = 0; i < REQUESTS; i++)
		if (vmm_sandbox_restore(s->sb) < 0 || call_str(s->sb, "eval", LUA_REQUEST) < 0)
			goto out;
	vmm_sandbox_snap_stats(s->sb, &st1);
	bench_note(b, name, (double)(st1.pages_rewritten - st0.pages_rewritten) / REQUESTS, "pages");
out:
	luasnap_free(s);
}

/* The snapshot's layers, and the PSS each of n sandboxes from it adds once
 * it has served one request. */
static void lua_density(struct bench *b, enum vmm_backend_kind backend, const char *prefix, unsigned n)
{
	char name[128];
	struct luasnap *s = NULL;
	struct vmm_sandbox **sb = calloc(n, sizeof(*sb));
	struct vmm_config cfg = { .backend = backend, .host = bench_host() };
	struct rlimit rl;
	unsigned made = 0;

	snprintf(name, sizeof(name), "lua/%sdensity/%u/pss_per_sandbox", prefix, n);
	if (!sb || !bench_selected(b, name) || luasnap_new(backend, &s) < 0)
		goto out;
	uint64_t pages = 0;
	for (uint32_t i = 0; i < s->m->nlayers; i++)
		pages += s->m->layers[i].pages;
	snprintf(name, sizeof(name), "lua/%ssnapshot_layers", prefix);
	bench_note(b, name, (double)pages * 4096 / 1024.0, "KiB");
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	unsigned long long before = bench_pss_kib();
	for (made = 0; made < n; made++)
		if (vmm_sandbox_from_snapshot(s->m, vmm_layer_open_store, s->st, &cfg, &sb[made], NULL) < 0 ||
		    call_str(sb[made], "eval", LUA_REQUEST) < 0) {
			vmm_sandbox_free(sb[made]);
			break;
		}
	unsigned long long after = bench_pss_kib();
	if (made < n) {
		fprintf(stderr, "bench: %s: only %u of %u sandboxes could be made\n", name, made, n);
		snprintf(name, sizeof(name), "lua/%sdensity/%u/sandboxes_made", prefix, n);
		bench_note(b, name, made, "sandboxes");
	}
	if (made) {
		snprintf(name, sizeof(name), "lua/%sdensity/%u/pss_per_sandbox", prefix, n);
		bench_note(b, name, (double)(after - before) / made, "KiB (one request served)");
	}
out:
	for (unsigned i = 0; i < made; i++)
		vmm_sandbox_free(sb[i]);
	free(sb);
	luasnap_free(s);
}

void bench_lua(struct bench *b)
{
	static const enum vmm_backend_kind kvm = VMM_BACKEND_KVM, process = VMM_BACKEND_PROCESS;
	bool have_kvm = vmm_kvm_check(NULL) == 0;

	if (have_kvm) {
		bench_run(b, &(struct bench_case){ .name = "lua/restore_eval", .floor = "floor/kvm_run_roundtrip",
			.setup = restore_eval_setup, .iter = restore_eval_iter, .teardown = luasnap_free, .arg = &kvm });
		bench_run(b, &(struct bench_case){ .name = "lua/first_eval_from_store",
			.floor = "floor/kvm_run_roundtrip", .setup = restore_eval_setup, .iter = first_eval_iter,
			.teardown = luasnap_free, .arg = &kvm });
	} else {
		fprintf(stderr, "bench: lua/restore_eval: skipped (no KVM here)\n");
	}
	bench_run(b, &(struct bench_case){ .name = "lua/process/restore_eval", .floor = BENCH_FLOOR_PROCESS,
		.setup = restore_eval_setup, .iter = restore_eval_iter, .teardown = luasnap_free, .arg = &process });
	bench_run(b, &(struct bench_case){ .name = "lua/process/first_eval_from_store", .floor = BENCH_FLOOR_PROCESS,
		.setup = restore_eval_setup, .iter = first_eval_iter, .teardown = luasnap_free, .arg = &process });
	bench_run(b, &(struct bench_case){ .name = "lua/fork_exec_lua5.4", .setup = forkexec_setup,
		.iter = forkexec_iter, .teardown = forkexec_free, .iters = bench_quick(b) ? 20 : 200 });
	bench_run(b, &(struct bench_case){ .name = "lua/host_newstate", .setup = newstate_setup,
		.iter = newstate_iter, .teardown = free });
	if (have_kvm)
		lua_pages_per_request(b, VMM_BACKEND_KVM, "");
	lua_pages_per_request(b, VMM_BACKEND_PROCESS, "process/");
	unsigned n = bench_quick(b) ? 100 : 1000;
	if (have_kvm)
		lua_density(b, VMM_BACKEND_KVM, "", n);
	lua_density(b, VMM_BACKEND_PROCESS, "process/", n);
}
