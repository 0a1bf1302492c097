/* test_private.c: a host program restoring lazy snapshots through libstrata's private server (fs/fs.h),
 * against the real registry and proxy tests/e2e/private.sh starts, on a real FUSE mount, on both backends. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fs/fs.h"
#include "index/index.h"
#include "store/store.h"
#include "tests/kvm_check.h"
#include "vmm/vmm.h"

/* One lazy store and what a host program keeps for it. */
struct lazy {
	char dir[512];
	struct st_store *store;
	struct ix *ix;
	struct st_manifest *m;
	struct fs_private *priv;
	struct vmm_host *host;
};

static const char *env(const char *name)
{
	const char *v = getenv(name);

	cr_assert(v && *v, "%s is set by tests/e2e/private.sh", name);
	return v;
}

static void setmode(const char *mode)
{
	FILE *f = fopen(env("STRATA_PRIVATE_MODE"), "w");

	cr_assert(f);
	fprintf(f, "%s\n", mode);
	fclose(f);
}

/* Range requests the proxy logged since the log was cleared (clear: 1). */
static unsigned ranges(bool clear)
{
	char path[600], line[1024];
	unsigned n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s.log", env("STRATA_PRIVATE_MODE"));
	if (clear) {
		f = fopen(path, "w");
		if (f)
			fclose(f);
		return 0;
	}
	if (!(f = fopen(path, "r")))
		return 0;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, " bytes=") != NULL;
	fclose(f);
	return n;
}

/* Range requests the proxy logged twice for the same bytes. */
static unsigned ranges_repeated(void)
{
	char path[600], line[1024], seen[256][64];
	unsigned n = 0, dup = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s.log", env("STRATA_PRIVATE_MODE"));
	if (!(f = fopen(path, "r")))
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *b = strstr(line, " bytes=");
		if (!b)
			continue;
		b[strcspn(b, "\n")] = '\0';
		for (unsigned i = 0; i < n; i++)
			dup += strcmp(seen[i], b + 1) == 0;
		if (n < 256)
			snprintf(seen[n++], sizeof(seen[0]), "%s", b + 1);
	}
	fclose(f);
	return dup;
}

static int sh(const char *cmd)
{
	int st = system(cmd);

	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* `strata pull --lazy` into a fresh store, then open it as a host program does. */
static void lazy_open(struct lazy *lz, const char *name, unsigned threads)
{
	char cmd[8192];
	struct ix_txn *t;
	st_id id;
	struct vmm_error err;

	memset(lz, 0, sizeof(*lz));
	snprintf(lz->dir, sizeof(lz->dir), "%s/%s", env("STRATA_PRIVATE_DIR"), name);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' && mkdir -p '%s' && '%s' --store '%s' init >/dev/null && "
		 "'%s' --store '%s' pull --lazy --insecure --tag big '%s' >/dev/null 2>&1",
		 lz->dir, lz->dir, env("STRATA_BIN"), lz->dir, env("STRATA_BIN"), lz->dir, env("STRATA_PRIVATE_REF"));
	cr_assert_eq(sh(cmd), 0, "%s", cmd);
	cr_assert_eq(st_store_open(lz->dir, 0, &lz->store), 0);
	cr_assert_eq(ix_open(lz->store, NULL, &lz->ix), 0);
	cr_assert_eq(ix_txn_begin(lz->ix, &t), 0);
	cr_assert_eq(ix_resolve(t, "big", &id), 0);
	cr_assert_eq(ix_snap_get(t, &id, &lz->m), 0);
	ix_txn_end(t);
	cr_assert(!st_blob_has(lz->store, &lz->m->layers[0].id), "the layer is lazy: no blob");
	struct fs_private_config pc = { .store = lz->store, .threads = threads };
	cr_assert_eq(fs_private_new(&pc, &lz->priv), 0);
	cr_assert_eq(vmm_host_new(NULL, &lz->host, &err), 0, "%s", err.message);
}

/* The same store opened again without asserting (in a forked child:
 * LMDB handles do not cross fork). */
static int lazy_reopen(struct lazy *lz, const char *dir)
{
	struct ix_txn *t;
	struct vmm_error err;
	st_id id;
	int rc;

	memset(lz, 0, sizeof(*lz));
	snprintf(lz->dir, sizeof(lz->dir), "%s", dir);
	if ((rc = st_store_open(dir, 0, &lz->store)) < 0 || (rc = ix_open(lz->store, NULL, &lz->ix)) < 0 ||
	    (rc = ix_txn_begin(lz->ix, &t)) < 0)
		return rc;
	if ((rc = ix_resolve(t, "big", &id)) == 0)
		rc = ix_snap_get(t, &id, &lz->m);
	ix_txn_end(t);
	struct fs_private_config pc = { .store = lz->store };
	if (rc < 0 || (rc = fs_private_new(&pc, &lz->priv)) < 0 || (rc = vmm_host_new(NULL, &lz->host, &err)) < 0)
		return rc;
	return 0;
}

static void lazy_close(struct lazy *lz)
{
	fs_private_free(lz->priv);
	vmm_host_free(lz->host);
	st_manifest_free(lz->m);
	ix_close(lz->ix);
	st_store_close(lz->store);
}

static int restore(struct lazy *lz, enum vmm_backend_kind be, struct vmm_sandbox **sb, struct vmm_error *err)
{
	struct vmm_config cfg = { .host = lz->host, .backend = be };

	return vmm_sandbox_from_snapshot(lz->m, fs_private_layer_open, lz->priv, &cfg, sb, err);
}

static long long call(struct vmm_sandbox *sb, const char *fn, long long arg, int *rc)
{
	struct vmm_value a = { .type = VMM_I64, .i64 = arg };
	struct vmm_result res = { 0 };
	long long v;

	*rc = vmm_sandbox_call(sb, fn, arg >= 0 ? &a : NULL, arg >= 0 ? 1 : 0, &res);
	v = res.i64;
	vmm_result_clear(&res);
	return v;
}

/* Lines of /proc/self/mountinfo naming the store: a detached mount has none. */
static int mounts_of(const char *store)
{
	char line[4096];
	int n = 0;
	FILE *f = fopen("/proc/self/mountinfo", "r");

	cr_assert(f);
	while (fgets(line, sizeof(line), f))
		n += strstr(line, store) != NULL || strstr(line, "strata-lazy") != NULL;
	fclose(f);
	return n;
}

/* Descriptors of /dev/fuse process pid has open (0: this one). */
static int fuse_fds(pid_t tid)
{
	char dir[64], p[400], target[256];
	struct dirent *e;
	int n = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", tid ? (int)tid : (int)getpid());
	if (!(d = opendir(dir)))
		return -1;
	while ((e = readdir(d))) {
		ssize_t k;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		if ((k = readlink(p, target, sizeof(target) - 1)) > 0) {
			target[k] = '\0';
			n += strcmp(target, "/dev/fuse") == 0;
		}
	}
	closedir(d);
	return n;
}

static int threads_now(void)
{
	char line[256];
	int n = -1;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "Threads:", 8) == 0)
			n = atoi(line + 8);
	if (f)
		fclose(f);
	return n;
}

static void init(void)
{
	setmode("pass");
	ranges(true);
}

TestSuite(private, .init = init, .timeout = 240);

/* The restore and a call on one backend: the layer comes through the mount. */
static void restore_and_call(enum vmm_backend_kind be)
{
	struct lazy lz;
	struct vmm_sandbox *sb = NULL;
	struct vmm_error err;
	int rc;

	lazy_open(&lz, be == VMM_BACKEND_KVM ? "kvm" : "proc", 0);
	cr_assert_eq(fs_private_root(lz.priv), -1, "nothing is mounted before a lazy layer is opened");
	cr_assert_eq(restore(&lz, be, &sb, &err), 0, "restore: %s", err.message);
	cr_assert_geq(fs_private_root(lz.priv), 0, "the first lazy layer started the server");
	cr_assert_eq(call(sb, "counter_next", -1, &rc), 1);
	cr_assert_eq(rc, 0, "%s", vmm_sandbox_error(sb)->message);
	cr_assert_gt(ranges(false), 0, "the layer's chunks came by Range requests");
	cr_assert_eq(mounts_of(lz.dir), 0, "the private mount has no mount point");
	cr_assert_eq(fuse_fds(0), 0, "the device is not in the caller's descriptors (the helper has it)");
	char why[1024];
	cr_assert_eq(fs_private_why(lz.priv, why, sizeof(why)), 0, "no reason recorded: %s", why);
	vmm_sandbox_free(sb);
	vmm_host_free(lz.host);
	lz.host = NULL;
	fs_private_stop(lz.priv);
	cr_assert_eq(fs_private_root(lz.priv), -1, "stopped");
	lazy_close(&lz);
}

Test(private, kvm_restore_and_call)
{
	kvm_require_always();
	restore_and_call(VMM_BACKEND_KVM);
}

Test(private, process_restore_and_call)
{
	restore_and_call(VMM_BACKEND_PROCESS);
}

/* Two sandboxes, one server; stop and start again; a second store beside it. */
Test(private, reuse_restart_and_two_stores)
{
	struct lazy a, b;
	struct vmm_sandbox *s1 = NULL, *s2 = NULL, *s3 = NULL;
	struct vmm_error err;
	int rc;

	lazy_open(&a, "reuse-a", 2);
	cr_assert_eq(restore(&a, VMM_BACKEND_AUTO, &s1, &err), 0, "%s", err.message);
	cr_assert_eq(call(s1, "counter_next", -1, &rc), 1);
	int root = fs_private_root(a.priv), threads = threads_now();
	cr_assert_eq(restore(&a, VMM_BACKEND_AUTO, &s2, &err), 0, "%s", err.message);
	cr_assert_eq(fs_private_root(a.priv), root, "the second open reuses the mount");
	cr_assert_eq(threads_now(), threads, "... and starts no thread here");
	cr_assert_eq(call(s2, "counter_next", -1, &rc), 1);
	cr_assert_gt(ranges(false), 0);
	cr_assert_eq(ranges_repeated(), 0, "no chunk fetched twice: the second sandbox read what the first fetched");
	/* A second store, its own server, at the same time. */
	lazy_open(&b, "reuse-b", 0);
	cr_assert_eq(restore(&b, VMM_BACKEND_AUTO, &s3, &err), 0, "%s", err.message);
	cr_assert_neq(fs_private_root(b.priv), fs_private_root(a.priv));
	cr_assert_eq(call(s3, "counter_next", -1, &rc), 1);
	vmm_sandbox_free(s3);
	vmm_sandbox_free(s1);
	vmm_sandbox_free(s2);
	/* Stop, then a new open starts it again. */
	fs_private_stop(a.priv);
	cr_assert_eq(fs_private_root(a.priv), -1);
	cr_assert_eq(restore(&a, VMM_BACKEND_AUTO, &s1, &err), 0, "%s", err.message);
	cr_assert_geq(fs_private_root(a.priv), 0);
	cr_assert_eq(call(s1, "counter_next", -1, &rc), 1);
	vmm_sandbox_free(s1);
	lazy_close(&b);
	lazy_close(&a);
}

static bool why_has(struct fs_private *p, const char *what, char *why, size_t len)
{
	fs_private_why(p, why, len);
	return strstr(why, what) != NULL;
}

/* The registry goes away mid-run: the next page the guest needs cannot be
 * had; the call fails in bounded time and the library says why. */
Test(private, kvm_registry_gone_mid_run)
{
	struct lazy lz;
	struct vmm_sandbox *sb = NULL;
	struct vmm_error err;
	char why[4096];
	int rc;

	kvm_require_always();
	lazy_open(&lz, "gone", 0);
	cr_assert_eq(restore(&lz, VMM_BACKEND_KVM, &sb, &err), 0, "%s", err.message);
	cr_assert_eq(call(sb, "counter_next", -1, &rc), 1);
	setmode("offline");
	time_t t0 = time(NULL);
	call(sb, "touch_pages", 8000, &rc);
	cr_assert_lt(rc, 0, "a call touching pages the registry no longer serves fails");
	cr_assert_lt(time(NULL) - t0, 60, "in bounded time");
	cr_assert(why_has(lz.priv, "gave up after the retries", why, sizeof(why)), "the reason: %s", why);
	cr_assert(why_has(lz.priv, "lazy/guest", why, sizeof(why)), "naming the registry: %s", why);
	vmm_sandbox_free(sb);
	lazy_close(&lz);
}

/* The process backend copies the layer at restore: there the registry
 * going away fails the restore (the copy meets the page as SIGBUS, or as
 * an error), and the library says why. */
static struct fs_private *g_priv;
static const char *g_want;

static void bus_why(int sig)
{
	static char buf[4096];

	(void)sig;
	fs_private_why(g_priv, buf, sizeof(buf));
	_exit(strstr(buf, g_want) ? 10 : 11);
}

/* In a child (a page that cannot be had may meet the host as SIGBUS, as
 * the CLI's guard catches it): restore on be and call fn(arg); exit 10 if
 * the library's reasons then say want, whichever way it failed. */
static int child_fails_saying(const char *dir, enum vmm_backend_kind be, const char *fn, long long arg,
			      const char *want)
{
	int status;
	pid_t pid;

	fflush(NULL);
	if ((pid = fork()) == 0) {
		struct vmm_sandbox *sb = NULL;
		struct vmm_error err;
		struct lazy c;
		static char why[4096];
		int rc;
		if (lazy_reopen(&c, dir) < 0)
			_exit(12);
		g_priv = c.priv;
		g_want = want;
		signal(SIGBUS, bus_why);
		if (restore(&c, be, &sb, &err) == 0)
			call(sb, fn, arg, &rc);
		fs_private_why(c.priv, why, sizeof(why));
		_exit(strstr(why, want) ? 10 : 13);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

Test(private, process_registry_gone_at_restore)
{
	struct lazy lz;

	lazy_open(&lz, "gone-proc", 0);
	setmode("offline");
	cr_assert_eq(child_fails_saying(lz.dir, VMM_BACKEND_PROCESS, "counter_next", -1, "gave up after the retries"), 10,
		     "the restore failed and the library gave the reason");
	lazy_close(&lz);
}

/* A chunk the registry corrupts is refused, and the reason names it. */
Test(private, refused_chunk_reason)
{
	struct lazy lz;

	lazy_open(&lz, "corrupt", 0);
	setmode("corrupt");
	cr_assert_eq(child_fails_saying(lz.dir, vmm_backend_resolve(NULL, VMM_BACKEND_AUTO), "touch_pages", 8000,
					"does not match the chunk index: refused"), 10,
		     "the library names the refused chunk");
	lazy_close(&lz);
}

/* kill -9 of a host program while its sandbox waits on a page the server
 * is fetching: the process ends (the device closes with the serving
 * threads' table) and leaves no mount behind. */
Test(private, kill9_mid_fetch)
{
	struct lazy lz;
	int status, pfd[2];
	pid_t pid;

	lazy_open(&lz, "kill", 0);
	setmode("delay 3000");
	cr_assert_eq(pipe(pfd), 0);
	fflush(NULL);
	if ((pid = fork()) == 0) {
		struct vmm_sandbox *sb = NULL;
		struct vmm_error err;
		struct lazy c;
		close(pfd[0]);
		/* Started, then the restore waits on its first chunk for 3 s. */
		if (lazy_reopen(&c, lz.dir) == 0 && fs_private_start(c.priv) == 0 && write(pfd[1], "s", 1) == 1)
			restore(&c, VMM_BACKEND_AUTO, &sb, &err);
		_exit(0);
	}
	close(pfd[1]);
	char c;
	cr_assert_eq(read(pfd[0], &c, 1), 1, "the child started its server");
	close(pfd[0]);
	usleep(1000 * 1000); /* it is in the restore, waiting on the registry */
	cr_assert_eq(kill(pid, SIGKILL), 0);
	time_t t0 = time(NULL);
	pid_t w = 0;
	while (time(NULL) - t0 < 20 && (w = waitpid(pid, &status, WNOHANG)) == 0)
		usleep(50 * 1000);
	cr_assert_eq(w, pid, "the killed host program ended (not stuck on its own server)");
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	cr_assert_eq(mounts_of(lz.dir), 0, "no mount left behind");
	setmode("pass");
	lazy_close(&lz);
}
