/* tests/api: every call of libstrata's public API (strata.h, linked as the shared library) on the backend of this run, with its error paths and messages. */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <strata.h>

#include "tests/harness/harness.h"

static char guest[4096], tmp[4096];
static int backend = STRATA_BACKEND_AUTO;

/* The run's backend (STRATA_TEST_BACKEND, as tests/meson.build registers
 * the suite per backend): where it cannot run here the whole program
 * skips, saying why, unless the harness's own probe ran a guest. */
__attribute__((constructor)) static void backend_from_env(void)
{
	const char *b = getenv("STRATA_TEST_BACKEND"), *build = getenv("STRATA_BUILD");
	strata_host *h;
	char hwhy[512];

	snprintf(guest, sizeof(guest), "%s/vmm/guest/simpleguest.elf", build ? build : ".");
	backend = b && strcmp(b, "kvm") == 0 ? STRATA_BACKEND_KVM
		  : b && strcmp(b, "process") == 0 ? STRATA_BACKEND_PROCESS : STRATA_BACKEND_AUTO;
	if (backend != STRATA_BACKEND_KVM || strata_host_new(&h) < 0)
		return;
	if (strata_host_set_backend(h, STRATA_BACKEND_KVM) < 0) {
		char msg[1024];
		snprintf(msg, sizeof(msg), "%s", strata_errmsg());
		if (harness_has("KVM", hwhy, sizeof(hwhy)) == 1) {
			printf("Bail out! strata_host_set_backend(KVM) failed (%s), but the harness ran a guest: %s\n", msg,
			       hwhy);
			fflush(stdout);
			_exit(1);
		}
		printf("1..0 # SKIP /dev/kvm is missing or unusable: %s; the harness agrees: %s "
		       "(the process backend's run covers this suite)\n", msg, hwhy);
		fflush(stdout);
		_exit(0);
	}
	strata_host_free(h);
}

/* A host on the run's backend. */
static strata_host *host(void)
{
	strata_host *h = NULL;

	cr_assert_eq(strata_host_new(&h), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_host_set_backend(h, backend), 0, "%s", strata_errmsg());
	return h;
}

static strata_sandbox *sandbox(strata_host *h)
{
	strata_sandbox *sb = NULL;

	cr_assert_eq(strata_sandbox_new(h, guest, &sb), 0, "%s: %s", guest, strata_errmsg());
	return sb;
}

static int64_t call_i(strata_sandbox *sb, const char *fn, size_t n, int64_t a, int64_t b)
{
	struct strata_value v[2] = { { .type = STRATA_I64, .i64 = a }, { .type = STRATA_I64, .i64 = b } };
	struct strata_result r = { 0 };

	cr_assert_eq(strata_sandbox_call(sb, fn, v, n, 0, &r), 0, "%s: %s", fn, strata_errmsg());
	cr_assert_eq(r.type, STRATA_I64);
	return r.i64;
}

static const char *tmpdir(void)
{
	snprintf(tmp, sizeof(tmp), "/tmp/strata-api.XXXXXX");
	cr_assert_not_null(mkdtemp(tmp));
	return tmp;
}

static strata_store *store(const char *name)
{
	char path[4200];
	strata_store *st = NULL;

	snprintf(path, sizeof(path), "%s/%s", tmp[0] ? tmp : tmpdir(), name);
	cr_assert_eq(strata_store_open(path, STRATA_STORE_CREATE, &st), 0, "%s", strata_errmsg());
	return st;
}

static void cleanup(void)
{
	char cmd[4200];

	if (tmp[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
		cr_assert_eq(system(cmd), 0);
		tmp[0] = '\0';
	}
}

TestSuite(api, .fini = cleanup, .timeout = 120);

Test(api, version_and_strerror)
{
	int ma = -1, mi = -1, pa = -1;

	cr_assert_str_eq(strata_version(&ma, &mi, &pa), "1.0.0");
	cr_assert_eq(ma, STRATA_VERSION_MAJOR);
	cr_assert_eq(mi, STRATA_VERSION_MINOR);
	cr_assert_eq(pa, STRATA_VERSION_PATCH);
	cr_assert_eq(STRATA_VERSION_NUMBER, 0x010000);
	cr_assert_str_eq(strata_version(NULL, NULL, NULL), "1.0.0");
	/* Every code strata.h declares has words of its own, no "Unknown
	 * error": read from the header itself, so a code added there is checked. */
	char path[4096], line[512], name[128];
	const char *src = getenv("STRATA_SRC");
	snprintf(path, sizeof(path), "%s/mount/api/strata.h", src ? src : ".");
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "%s", path);
	int codes[128];
	size_t n = 0;
	while (fgets(line, sizeof(line), f)) {
		int code;
		if (sscanf(line, " STRATA_E_%127[A-Z_] = %d,", name, &code) != 2)
			continue;
		cr_assert_lt(n, sizeof(codes) / sizeof(codes[0]));
		const char *w = strata_strerror(code);
		cr_assert(w && *w && !strstr(w, "Unknown error") && !strstr(w, "does not name") && !strstr(w, "not linked"),
			  "STRATA_E_%s (%d): '%s'", name, code, w ? w : "NULL");
		for (size_t j = 0; j < n; j++)
			cr_assert(codes[j] != code && strcmp(w, strata_strerror(codes[j])) != 0,
				  "STRATA_E_%s (%d) shares its value or words with %d", name, code, codes[j]);
		codes[n++] = code;
	}
	fclose(f);
	cr_assert_geq(n, 60, "only %zu codes read from %s", n, path);
	cr_assert_str_eq(strata_strerror(-ENOENT), strerror(ENOENT));
}

struct elsewhere {
	strata_host *h;
	char msg[256];
};

static void *fail_elsewhere(void *arg)
{
	struct elsewhere *e = arg;
	strata_sandbox *sb;
	char *msg = e->msg;

	/* A thread's own message: empty until one of its calls fails. */
	snprintf(msg, 256, "%s|", strata_errmsg());
	if (strata_sandbox_new(e->h, "/nonexistent/other.elf", &sb) == 0)
		return NULL;
	snprintf(msg + strlen(msg), 256 - strlen(msg), "%s", strata_errmsg());
	return NULL;
}

Test(api, errmsg_is_per_thread)
{
	strata_host *h = host();
	strata_sandbox *sb = (strata_sandbox *)&sb;
	struct elsewhere e = { h, "" };
	pthread_t t;

	cr_assert_eq(strata_sandbox_new(h, "/nonexistent/guest.elf", &sb), -ENOENT);
	cr_assert_eq(sb, (strata_sandbox *)&sb, "*out written on failure");
	cr_assert(strstr(strata_errmsg(), "/nonexistent/guest.elf"), "%s", strata_errmsg());
	pthread_create(&t, NULL, fail_elsewhere, &e);
	pthread_join(t, NULL);
	cr_assert(strncmp(e.msg, "|", 1) == 0 && strstr(e.msg, "other.elf"), "the other thread's messages: '%s'", e.msg);
	/* This thread's message stays its own. */
	cr_assert(strstr(strata_errmsg(), "/nonexistent/guest.elf") && !strstr(strata_errmsg(), "other.elf"), "%s",
		  strata_errmsg());
	/* A call that succeeds leaves it as it was. */
	cr_assert_eq(strata_host_set_timeout(h, 0), 0);
	cr_assert(strstr(strata_errmsg(), "/nonexistent/guest.elf"));
	cr_assert_eq(strata_host_free(h), 0);
}

Test(api, host_settings)
{
	strata_host *h = host();

	cr_assert_eq(strata_host_set_backend(h, 7), -EINVAL);
	cr_assert(strstr(strata_errmsg(), "backend 7"), "%s", strata_errmsg());
	int b = strata_host_backend(h);
	cr_assert(b == STRATA_BACKEND_KVM || b == STRATA_BACKEND_PROCESS, "%d", b);
	if (backend != STRATA_BACKEND_AUTO)
		cr_assert_eq(b, backend);
	cr_assert_eq(strata_host_set_cache(h, 2000, 1), STRATA_E_BAD_CONFIG);
	cr_assert(strstr(strata_errmsg(), "2000 shells"), "%s", strata_errmsg());
	cr_assert_eq(strata_host_set_cache(h, 0, 0), 0);
	strata_sandbox *sb = sandbox(h);
	cr_assert_eq(strata_sandbox_backend(sb), b);
	cr_assert_eq(strata_host_free(h), -EBUSY);
	cr_assert(strstr(strata_errmsg(), "1 sandbox"), "%s", strata_errmsg());
	strata_sandbox_free(sb);
	cr_assert_eq(strata_host_free(h), 0);
	cr_assert_eq(strata_host_free(NULL), 0);
}

/* The strata command's words for the backends, both ways; a parsed word
 * is what the host's setter takes, and a sandbox says its own word. */
Test(api, backend_words)
{
	static const struct { const char *word; int value; } words[] = {
		{ "auto", STRATA_BACKEND_AUTO }, { "kvm", STRATA_BACKEND_KVM }, { "process", STRATA_BACKEND_PROCESS },
	};
	int b = 99;

	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		cr_assert_str_eq(strata_backend_name(words[i].value), words[i].word);
		cr_assert_eq(strata_backend_parse(words[i].word, &b), 0, "%s: %s", words[i].word, strata_errmsg());
		cr_assert_eq(b, words[i].value);
	}
	cr_assert_null(strata_backend_name(3));
	cr_assert_null(strata_backend_name(-1));
	b = 99;
	cr_assert_eq(strata_backend_parse("qemu", &b), -EINVAL);
	cr_assert(strstr(strata_errmsg(), "'qemu'") && strstr(strata_errmsg(), "auto, kvm or process"), "%s",
		  strata_errmsg());
	cr_assert_eq(strata_backend_parse("KVM", &b), -EINVAL, "the words are lowercase, as the command's");
	cr_assert_eq(strata_backend_parse("", &b), -EINVAL);
	cr_assert_eq(strata_backend_parse(NULL, &b), -EINVAL);
	cr_assert_eq(b, 99, "untouched on failure");
	cr_assert_eq(strata_backend_parse("auto", NULL), -EINVAL);
	/* The run's backend by its word, as a host program given it would. */
	strata_host *h = NULL;
	cr_assert_eq(strata_host_new(&h), 0);
	cr_assert_eq(strata_backend_parse(strata_backend_name(backend), &b), 0);
	cr_assert_eq(strata_host_set_backend(h, b), 0, "%s", strata_errmsg());
	strata_sandbox *sb = sandbox(h);
	cr_assert_str_eq(strata_backend_name(strata_sandbox_backend(sb)), strata_backend_name(strata_host_backend(h)));
	if (backend != STRATA_BACKEND_AUTO)
		cr_assert_str_eq(strata_backend_name(strata_sandbox_backend(sb)), strata_backend_name(backend));
	strata_sandbox_free(sb);
	cr_assert_eq(strata_host_free(h), 0);
}

Test(api, sizes_are_checked_at_making)
{
	strata_host *h = host();
	strata_sandbox *sb = NULL;

	cr_assert_eq(strata_host_set_sizes(h, 1ull << 40, 0, 0, 0), 0);
	cr_assert_eq(strata_sandbox_new(h, guest, &sb), STRATA_E_BAD_CONFIG);
	cr_assert_null(sb);
	cr_assert(strata_errmsg()[0]);
	cr_assert_eq(strata_host_set_sizes(h, 256 << 10, 0, 0, 0), 0);
	sb = sandbox(h);
	strata_sandbox_free(sb);
	strata_host_free(h);
}

Test(api, sandbox_from_elf_bytes)
{
	strata_host *h = host();
	strata_sandbox *sb = NULL;
	static char buf[8 << 20];
	int fd = open(guest, O_RDONLY);
	cr_assert_geq(fd, 0);
	ssize_t n = read(fd, buf, sizeof(buf));
	close(fd);
	cr_assert_gt(n, 0);
	cr_assert_eq(strata_sandbox_new_mem(h, "not an elf", 10, &sb), STRATA_E_BAD_ELF);
	cr_assert(strata_errmsg()[0]);
	cr_assert_eq(strata_sandbox_new_mem(h, NULL, 0, &sb), -EINVAL);
	cr_assert_eq(strata_sandbox_new_mem(h, buf, (size_t)n, &sb), 0, "%s", strata_errmsg());
	cr_assert_eq(call_i(sb, "add_local", 2, 2, 3), 5);
	strata_sandbox_free(sb);
	strata_host_free(h);
}

Test(api, calls_and_their_errors)
{
	strata_host *h = host();
	strata_sandbox *sb = sandbox(h);
	struct strata_value s = { .type = STRATA_STR, .data = "hello", .len = 5 };
	struct strata_value b = { .type = STRATA_BYTES, .data = "\0\1\2", .len = 3 };
	struct strata_value neg = { .type = STRATA_I64, .i64 = -1 };
	struct strata_result r = { 0 };

	cr_assert_eq(strata_sandbox_call(sb, "echo", &s, 1, 0, &r), 0, "%s", strata_errmsg());
	cr_assert_eq(r.type, STRATA_STR);
	cr_assert_str_eq(r.data, "hello");
	strata_result_clear(&r);
	cr_assert_null(r.data);
	cr_assert_eq(strata_sandbox_call(sb, "echo_bytes", &b, 1, 0, &r), 0, "%s", strata_errmsg());
	cr_assert_eq(r.len, 3);
	cr_assert_eq(memcmp(r.data, "\0\1\2", 3), 0);
	strata_result_clear(&r);
	strata_result_clear(NULL);
	cr_assert_eq(strata_sandbox_call(sb, "no_such_function", NULL, 0, 0, &r), STRATA_E_NO_FUNCTION);
	cr_assert(strstr(strata_errmsg(), "no_such_function"), "%s", strata_errmsg());
	cr_assert_eq(strata_sandbox_call(sb, "echo", &neg, 1, 0, &r), STRATA_E_BAD_ARGS);
	cr_assert(strstr(strata_errmsg(), "echo"), "%s", strata_errmsg());
	cr_assert_eq(strata_sandbox_call(sb, "fail_if_negative", &neg, 1, 0, &r), STRATA_E_GUEST_ERROR);
	cr_assert(strlen(strata_errmsg()) > strlen("fail_if_negative: "), "%s", strata_errmsg());
	cr_assert_eq(strata_sandbox_call(sb, NULL, NULL, 0, 0, &r), -EINVAL);
	/* A timeout poisons; a sandbox made from an ELF has no snapshot to go back to. */
	cr_assert_eq(strata_sandbox_call(sb, "spin", NULL, 0, 50 * 1000 * 1000, &r), STRATA_E_TIMEOUT);
	cr_assert(strstr(strata_errmsg(), "spin"), "%s", strata_errmsg());
	cr_assert_eq(strata_sandbox_call(sb, "add_local", &neg, 0, 0, &r), STRATA_E_POISONED);
	cr_assert_eq(strata_sandbox_restore(sb), STRATA_E_NO_SNAPSHOT);
	cr_assert(strstr(strata_errmsg(), "no snapshot"), "%s", strata_errmsg());
	strata_sandbox_free(sb);
	strata_host_free(h);
}

Test(api, host_timeout_is_the_default)
{
	strata_host *h = host();
	struct strata_result r = { 0 };

	cr_assert_eq(strata_host_set_timeout(h, 50 * 1000 * 1000), 0);
	strata_sandbox *sb = sandbox(h);
	cr_assert_eq(strata_sandbox_call(sb, "spin", NULL, 0, 0, &r), STRATA_E_TIMEOUT);
	strata_sandbox_free(sb);
	strata_host_free(h);
}

struct logged {
	char line[256];
	int level;
};

static void on_log(void *ctx, int level, const char *msg, size_t len)
{
	struct logged *l = ctx;

	snprintf(l->line, sizeof(l->line), "%.*s", (int)len, msg);
	l->level = level;
}

Test(api, guest_log)
{
	strata_host *h = host();
	struct logged l = { "", -1 };
	struct strata_value s = { .type = STRATA_STR, .data = "from the guest", .len = 14 };
	struct strata_result r = { 0 };

	cr_assert_eq(strata_host_set_log(h, on_log, &l), 0);
	strata_sandbox *sb = sandbox(h);
	cr_assert_eq(strata_sandbox_call(sb, "log_msg", &s, 1, 0, &r), 0, "%s", strata_errmsg());
	cr_assert_str_eq(l.line, "from the guest");
	cr_assert_eq(l.level, 2);
	strata_sandbox_free(sb);
	strata_host_free(h);
}

static int host_add(void *ctx, const struct strata_value *args, size_t nargs, struct strata_value *ret)
{
	int *calls = ctx;

	(*calls)++;
	ret->type = STRATA_I64;
	ret->i64 = args[0].i64 + args[1].i64 + (nargs == 2 ? 0 : 1000);
	return 0;
}

static int host_add_times10(void *ctx, const struct strata_value *args, size_t nargs, struct strata_value *ret)
{
	(void)ctx;
	(void)nargs;
	ret->type = STRATA_I64;
	ret->i64 = 10 * (args[0].i64 + args[1].i64);
	return 0;
}

Test(api, host_functions_live_on_the_host_and_stay)
{
	strata_host *h = host();
	int calls = 0;
	char id[STRATA_ID_LEN + 1];

	cr_assert_eq(strata_host_register(h, "", "i(ii)", host_add, &calls), -EINVAL);
	cr_assert(strstr(strata_errmsg(), "name"), "%s", strata_errmsg());
	cr_assert_eq(strata_host_register(h, "host_add", "i(ii", host_add, &calls), -EINVAL);
	cr_assert(strstr(strata_errmsg(), "i(ii"), "%s", strata_errmsg());
	cr_assert_eq(strata_host_register(h, "host_add", "i(iiiiiiiii)", host_add, &calls), -EINVAL);
	cr_assert_eq(strata_host_register(h, "host_add", "i(ii)", NULL, &calls), -EINVAL);
	cr_assert_eq(strata_host_register(h, "host_add", "i(ii)", host_add, &calls), 0, "%s", strata_errmsg());
	strata_sandbox *sb = sandbox(h);
	cr_assert_eq(call_i(sb, "add", 2, 1, 41), 42);
	cr_assert_eq(calls, 1);
	/* Captured, restored, opened again from the store: still there. */
	strata_store *st = store("store");
	cr_assert_eq(strata_sandbox_capture(sb, st, "point", 0, id), 0, "%s", strata_errmsg());
	cr_assert_eq(call_i(sb, "add", 2, 2, 3), 5);
	cr_assert_eq(strata_sandbox_restore(sb), 0, "%s", strata_errmsg());
	cr_assert_eq(call_i(sb, "add", 2, 4, 5), 9);
	strata_sandbox *again = NULL;
	cr_assert_eq(strata_sandbox_open_store(h, st, "point", &again), 0, "%s", strata_errmsg());
	cr_assert_eq(call_i(again, "add", 2, 6, 7), 13);
	cr_assert_eq(calls, 4);
	/* A sandbox's own registration wins over the host's, and stays across a restore. */
	cr_assert_eq(strata_sandbox_register(again, "host_add", "i(ii)", host_add_times10, NULL), 0);
	cr_assert_eq(strata_sandbox_register(again, "host_add", "x()", host_add_times10, NULL), -EINVAL);
	cr_assert_eq(call_i(again, "add", 2, 1, 2), 30);
	cr_assert_eq(strata_sandbox_restore(again), 0, "%s", strata_errmsg());
	cr_assert_eq(call_i(again, "add", 2, 1, 2), 30);
	cr_assert_eq(call_i(sb, "add", 2, 1, 2), 3);
	strata_sandbox_free(again);
	strata_sandbox_free(sb);
	strata_store_close(st);
	cr_assert_eq(strata_host_free(h), 0);
}

struct killer {
	strata_sandbox *sb;
	int rc;
};

static void *kill_soon(void *arg)
{
	struct killer *k = arg;

	for (int i = 0; i < 200 && k->rc != 1; i++) {
		usleep(10 * 1000);
		k->rc = strata_sandbox_kill(k->sb);
	}
	return NULL;
}

Test(api, kill_from_another_thread)
{
	strata_host *h = host();
	strata_sandbox *sb = sandbox(h);
	struct strata_result r = { 0 };
	struct killer k = { sb, 0 };
	pthread_t t;

	cr_assert_eq(strata_sandbox_kill(sb), 0);
	pthread_create(&t, NULL, kill_soon, &k);
	cr_assert_eq(strata_sandbox_call(sb, "spin", NULL, 0, 10ull * 1000 * 1000 * 1000, &r), STRATA_E_CANCELLED,
		     "%s", strata_errmsg());
	pthread_join(t, NULL);
	cr_assert_eq(k.rc, 1);
	strata_sandbox_free(sb);
	strata_host_free(h);
}

static int count_snap(void *ctx, const char *id)
{
	(void)id;
	++*(int *)ctx;
	return 0;
}

static int find_tag(void *ctx, const char *name, const char *id)
{
	char *want = ctx;

	if (strcmp(name, "one") == 0)
		snprintf(want, STRATA_ID_LEN + 1, "%s", id);
	return 0;
}

Test(api, capture_in_one_call_then_restore_goes_there)
{
	strata_host *h = host();
	strata_sandbox *sb = sandbox(h);
	strata_store *st = store("store");
	char id[STRATA_ID_LEN + 1], id2[STRATA_ID_LEN + 1], seen[STRATA_ID_LEN + 1] = "", res[STRATA_ID_LEN + 1];

	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 1);
	cr_assert_eq(strata_sandbox_capture(sb, st, "one", 0, id), 0, "%s", strata_errmsg());
	cr_assert_eq(strlen(id), STRATA_ID_LEN);
	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 2);
	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 3);
	cr_assert_eq(strata_sandbox_restore(sb), 0, "%s", strata_errmsg());
	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 2);
	/* An incremental capture on top, the tag refused, then moved. */
	cr_assert_eq(strata_sandbox_capture(sb, st, "one", 0, id2), STRATA_E_EXISTS);
	cr_assert(strstr(strata_errmsg(), "STRATA_TAG_FORCE"), "%s", strata_errmsg());
	cr_assert_eq(strata_sandbox_capture(sb, st, "bad/name", 0, id2), STRATA_E_BAD_NAME);
	cr_assert_eq(strata_sandbox_capture(sb, st, "one", 7, id2), -EINVAL);
	cr_assert_eq(strata_sandbox_capture(sb, st, "two", 0, id2), 0, "%s", strata_errmsg());
	cr_assert_str_neq(id, id2);
	cr_assert_eq(strata_sandbox_restore(sb), 0);
	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 3);
	cr_assert_eq(strata_sandbox_capture(sb, st, NULL, 0, NULL), 0, "%s", strata_errmsg());
	int n = 0;
	cr_assert_eq(strata_store_snapshots(st, count_snap, &n), 3);
	cr_assert_eq(n, 3);
	cr_assert_eq(strata_store_tags(st, find_tag, seen), 2);
	cr_assert_str_eq(seen, id);
	cr_assert_eq(strata_store_resolve(st, "two", res), 0);
	cr_assert_str_eq(res, id2);
	/* A poisoned sandbox cannot be captured: nothing is committed. */
	struct strata_result r = { 0 };
	cr_assert_eq(strata_sandbox_call(sb, "null_write", NULL, 0, 0, &r), STRATA_E_GUEST_FAULT);
	cr_assert_lt(strata_sandbox_capture(sb, st, "three", 0, id2), 0);
	cr_assert(strata_errmsg()[0]);
	cr_assert_eq(strata_store_resolve(st, "three", res), STRATA_E_NOT_FOUND);
	cr_assert(strstr(strata_errmsg(), "three"), "%s", strata_errmsg());
	/* restore mends the poison: back to the last capture. */
	cr_assert_eq(strata_sandbox_restore(sb), 0, "%s", strata_errmsg());
	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 4);
	strata_sandbox_free(sb);
	strata_store_close(st);
	strata_host_free(h);
}

/* In-memory snapshots: taken, restored in any order, refused across
 * sandboxes and for a pool's, outliving their sandbox, host functions
 * kept, and a capture on top storing every page. */
Test(api, in_memory_snapshots)
{
	strata_host *h = host();
	int calls = 0;

	cr_assert_eq(strata_host_register(h, "host_add", "i(ii)", host_add, &calls), 0, "%s", strata_errmsg());
	strata_sandbox *sb = sandbox(h), *other = sandbox(h);
	strata_snapshot *a = NULL, *b = NULL, *o = NULL;

	cr_assert_eq(strata_sandbox_snapshot(sb, NULL), -EINVAL);
	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 1);
	cr_assert_eq(strata_sandbox_snapshot(sb, &a), 0, "%s", strata_errmsg());
	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 2);
	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 3);
	cr_assert_eq(strata_sandbox_snapshot(sb, &b), 0, "%s", strata_errmsg());
	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 4);
	/* A restore goes back to the newest snapshot taken. */
	cr_assert_eq(strata_sandbox_restore(sb), 0, "%s", strata_errmsg());
	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 4);
	/* Back to the older one, then the newer, then the older again. */
	cr_assert_eq(strata_sandbox_restore_to(sb, a), 0, "%s", strata_errmsg());
	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 2);
	cr_assert_eq(strata_sandbox_restore_to(sb, b), 0, "%s", strata_errmsg());
	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 4);
	cr_assert_eq(strata_sandbox_restore_to(sb, a), 0, "%s", strata_errmsg());
	/* restore_to makes it the sandbox's snapshot: a plain restore comes back here. */
	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 2);
	cr_assert_eq(strata_sandbox_restore(sb), 0, "%s", strata_errmsg());
	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 2);
	/* Host functions stay across them. */
	cr_assert_eq(call_i(sb, "add", 2, 20, 22), 42);
	cr_assert_eq(calls, 1);
	/* A poisoned sandbox cannot be snapshotted, and restore_to mends it. */
	struct strata_result r = { 0 };
	cr_assert_eq(strata_sandbox_call(sb, "null_write", NULL, 0, 0, &r), STRATA_E_GUEST_FAULT);
	cr_assert_eq(strata_sandbox_snapshot(sb, &o), STRATA_E_POISONED);
	cr_assert_null(o);
	cr_assert_eq(strata_sandbox_restore_to(sb, b), 0, "%s", strata_errmsg());
	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 4);
	/* Another sandbox's snapshot is refused, and names why. */
	cr_assert_eq(strata_sandbox_snapshot(other, &o), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_sandbox_restore_to(sb, o), STRATA_E_FOREIGN);
	cr_assert(strstr(strata_errmsg(), "another sandbox"), "%s", strata_errmsg());
	cr_assert_eq(strata_sandbox_restore_to(sb, NULL), -EINVAL);
	/* A capture on top of an in-memory snapshot stores every page: the
	 * store's snapshot opens on its own and goes on from there. */
	strata_store *st = store("store");
	char id[STRATA_ID_LEN + 1];
	cr_assert_eq(strata_sandbox_restore_to(sb, a), 0);
	cr_assert_eq(strata_sandbox_capture(sb, st, "from-memory", 0, id), 0, "%s", strata_errmsg());
	strata_sandbox *again = NULL;
	cr_assert_eq(strata_sandbox_open_store(h, st, "from-memory", &again), 0, "%s", strata_errmsg());
	cr_assert_eq(call_i(again, "counter_next", 0, 0, 0), 2);
	strata_sandbox_free(again);
	/* A snapshot outlives its sandbox (it can only be freed then). */
	strata_sandbox_free(sb);
	strata_sandbox_free(other);
	strata_snapshot_free(a);
	strata_snapshot_free(b);
	strata_snapshot_free(o);
	strata_snapshot_free(NULL);
	strata_store_close(st);
	cr_assert_eq(strata_host_free(h), 0);
}

static void on_problem(void *ctx, const char *id, const char *what)
{
	(void)id;
	(void)what;
	++*(int *)ctx;
}

Test(api, store_calls)
{
	strata_host *h = host();
	strata_sandbox *sb = sandbox(h);
	strata_store *st = store("store"), *ro = NULL, *bad = NULL;
	char id[STRATA_ID_LEN + 1], res[STRATA_ID_LEN + 1], path[4300];
	uint64_t freed = 1;

	cr_assert_eq(strata_sandbox_capture(sb, st, "a", 0, id), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_store_tag(st, "a", "b", 0), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_store_resolve(st, "b", res), 0);
	cr_assert_str_eq(res, id);
	cr_assert_eq(strata_store_tag(st, "nothing", "c", 0), STRATA_E_NOT_FOUND);
	cr_assert_eq(strata_store_tag(st, "a", "bad name", 0), STRATA_E_BAD_NAME);
	char prefix[8];
	snprintf(prefix, sizeof(prefix), "%.6s", id);
	cr_assert_eq(strata_store_resolve(st, prefix, res), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_store_untag(st, "nope", 0), STRATA_E_NOT_FOUND);
	cr_assert(strstr(strata_errmsg(), "nope"), "%s", strata_errmsg());
	cr_assert_eq(strata_store_untag(st, "b", 0), 0);
	cr_assert_eq(strata_store_verify(st, 0, NULL, NULL), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_store_verify(st, STRATA_VERIFY_HASH, NULL, NULL), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_store_gc(st, 0, &freed), 0, "%s", strata_errmsg());
	cr_assert_eq(freed, 0);
	/* Prune the only tag: the snapshot goes, gc frees its layer. */
	cr_assert_eq(strata_store_untag(st, "a", STRATA_TAG_PRUNE), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_store_resolve(st, id, res), STRATA_E_NOT_FOUND);
	cr_assert_eq(strata_store_gc(st, 0, &freed), 0, "%s", strata_errmsg());
	cr_assert_gt(freed, 0);
	/* The sandbox's snapshot went with it: a capture on top needs its layer. */
	cr_assert_eq(strata_sandbox_capture(sb, st, "c", 0, id), STRATA_E_MISSING);
	cr_assert(strstr(strata_errmsg(), "lacks a layer"), "%s", strata_errmsg());
	strata_sandbox_free(sb);
	sb = sandbox(h);
	/* A layer rotted on disk: verify counts it and names it. */
	cr_assert_eq(strata_sandbox_capture(sb, st, "c", STRATA_TAG_FORCE, id), 0, "%s", strata_errmsg());
	/* (no sandbox, warm ones included, may map the blob cut short) */
	strata_sandbox_free(sb);
	cr_assert_eq(strata_host_free(h), 0);
	snprintf(path, sizeof(path), "find '%s/store/blobs' -type f -size +0 | head -1 | xargs -r truncate -s 4096",
		 tmp);
	cr_assert_eq(system(path), 0);
	int problems = 0;
	cr_assert_gt(strata_store_verify(st, 0, on_problem, &problems), 0);
	cr_assert_gt(problems, 0);
	/* Opening. */
	snprintf(path, sizeof(path), "%s/absent", tmp);
	cr_assert_eq(strata_store_open(path, 0, &bad), -ENOENT);
	cr_assert(strstr(strata_errmsg(), "absent"), "%s", strata_errmsg());
	snprintf(path, sizeof(path), "%s/notstore", tmp);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/notstore/file", tmp);
	close(open(path, O_CREAT | O_WRONLY, 0600));
	snprintf(path, sizeof(path), "%s/notstore", tmp);
	cr_assert_eq(strata_store_open(path, 0, &bad), STRATA_E_NOT_STORE);
	cr_assert_eq(strata_store_open(path, STRATA_STORE_CREATE, &bad), STRATA_E_NOT_STORE);
	cr_assert_eq(strata_store_open(path, STRATA_STORE_CREATE | STRATA_STORE_RDONLY, &bad), -EINVAL);
	cr_assert_null(bad);
	snprintf(path, sizeof(path), "%s/store", tmp);
	cr_assert_eq(strata_store_open(path, STRATA_STORE_RDONLY, &ro), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_store_tag(ro, "c", "d", 0), STRATA_E_READ_ONLY);
	strata_store_close(ro);
	strata_store_close(NULL);
	strata_store_close(st);
}

/* Export tag `tag` of the store with the strata command into dir. */
static void export(const char *tag, const char *dir)
{
	char cmd[8400];
	const char *bin = getenv("STRATA_BIN");

	cr_assert_not_null(bin, "STRATA_BIN is not set");
	snprintf(cmd, sizeof(cmd), "'%s' --store '%s/store' export %s '%s' >/dev/null", bin, tmp, tag, dir);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

Test(api, sandbox_and_pool_from_a_snapshot_directory)
{
	strata_host *h = host();
	strata_sandbox *sb = sandbox(h), *a, *b, *c;
	strata_store *st = store("store");
	strata_pool *p = NULL;
	char dir[4200];

	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 1);
	cr_assert_eq(strata_sandbox_capture(sb, st, "snap", 0, NULL), 0, "%s", strata_errmsg());
	snprintf(dir, sizeof(dir), "%s/dir", tmp);
	export("snap", dir);
	cr_assert_eq(strata_sandbox_open_dir(h, "/nonexistent/dir", 0, &a), -ENOENT);
	cr_assert(strstr(strata_errmsg(), "/nonexistent/dir"), "%s", strata_errmsg());
	cr_assert_eq(strata_sandbox_open_dir(h, dir, 0x80, &a), -EINVAL);
	cr_assert_eq(strata_sandbox_open_dir(h, dir, STRATA_DIR_VERIFY, &a), 0, "%s", strata_errmsg());
	cr_assert_eq(call_i(a, "counter_next", 0, 0, 0), 2);
	cr_assert_eq(strata_sandbox_restore(a), 0);
	cr_assert_eq(call_i(a, "counter_next", 0, 0, 0), 2);
	strata_sandbox_free(a);
	/* A pool of two: a third get waits, then says -EAGAIN. */
	cr_assert_eq(strata_pool_open_dir(h, dir, 0, 0, &p), -EINVAL);
	cr_assert_eq(strata_pool_open_dir(h, dir, 0, 2, &p), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_pool_get(p, 0, &a), 0);
	strata_snapshot *ps = NULL;
	cr_assert_eq(strata_sandbox_snapshot(a, &ps), -EINVAL);
	cr_assert(strstr(strata_errmsg(), "pool"), "%s", strata_errmsg());
	cr_assert_eq(strata_pool_get(p, 0, &b), 0);
	cr_assert_neq(a, b);
	cr_assert_eq(strata_pool_get(p, 1000 * 1000, &c), -EAGAIN);
	cr_assert(strstr(strata_errmsg(), "2 sandboxes"), "%s", strata_errmsg());
	cr_assert_eq(call_i(a, "counter_next", 0, 0, 0), 2);
	cr_assert_eq(call_i(a, "counter_next", 0, 0, 0), 3);
	cr_assert_eq(strata_pool_put(p, sb), -EINVAL);
	cr_assert_eq(strata_pool_free(p), -EBUSY);
	cr_assert_eq(strata_pool_put(p, a), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_pool_put(p, a), -EINVAL);
	cr_assert_eq(strata_pool_get(p, 0, &c), 0);
	cr_assert_eq(call_i(c, "counter_next", 0, 0, 0), 2);
	cr_assert_eq(strata_pool_put(p, c), 0);
	cr_assert_eq(strata_pool_put(p, b), 0);
	cr_assert_eq(strata_host_free(h), -EBUSY);
	cr_assert_eq(strata_pool_free(p), 0);
	strata_sandbox_free(sb);
	strata_store_close(st);
	cr_assert_eq(strata_host_free(h), 0);
}

Test(api, pool_from_a_store_with_host_functions)
{
	strata_host *h = host();
	strata_sandbox *sb, *a;
	strata_store *st = store("store");
	strata_pool *p = NULL;
	int calls = 0;
	struct strata_result r = { 0 };

	cr_assert_eq(strata_host_register(h, "host_add", "i(ii)", host_add, &calls), 0);
	sb = sandbox(h);
	cr_assert_eq(strata_sandbox_capture(sb, st, "snap", 0, NULL), 0, "%s", strata_errmsg());
	strata_sandbox_free(sb);
	cr_assert_eq(strata_pool_open_store(h, st, "absent", 1, &p), STRATA_E_NOT_FOUND);
	cr_assert_eq(strata_pool_open_store(h, st, "snap", 1, &p), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_pool_get(p, 0, &a), 0);
	cr_assert_eq(call_i(a, "add", 2, 20, 22), 42);
	cr_assert_eq(strata_sandbox_capture(a, st, "from_pool", 0, NULL), -EINVAL);
	cr_assert(strstr(strata_errmsg(), "pool's"), "%s", strata_errmsg());
	/* A sandbox poisoned and given back comes out usable again. */
	cr_assert_eq(strata_sandbox_call(a, "null_write", NULL, 0, 0, &r), STRATA_E_GUEST_FAULT);
	strata_sandbox_free(a); /* a pool's: nothing happens */
	cr_assert_eq(strata_pool_put(p, a), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_pool_get(p, 0, &a), 0);
	cr_assert_eq(call_i(a, "add", 2, 1, 1), 2);
	cr_assert_eq(calls, 2);
	cr_assert_eq(strata_pool_put(p, a), 0);
	cr_assert_eq(strata_pool_free(p), 0);
	cr_assert_eq(strata_pool_free(NULL), 0);
	strata_store_close(st);
	cr_assert_eq(strata_host_free(h), 0);
}

Test(api, open_store_errors)
{
	strata_host *h = host();
	strata_store *st = store("store");
	strata_sandbox *sb = NULL;

	cr_assert_eq(strata_sandbox_open_store(h, st, "absent", &sb), STRATA_E_NOT_FOUND);
	cr_assert(strstr(strata_errmsg(), "absent"), "%s", strata_errmsg());
	cr_assert_eq(strata_sandbox_open_store(h, st, "bad name!", &sb), STRATA_E_BAD_NAME);
	cr_assert_null(sb);
	strata_store_close(st);
	strata_host_free(h);
}

Test(api, registry_settings_and_unreachable_registries)
{
	strata_host *h = host();
	strata_store *st = store("store");
	strata_registry *reg = NULL;
	strata_sandbox *sb = NULL;
	char id[STRATA_ID_LEN + 1];

	cr_assert_eq(strata_registry_new(&reg), 0);
	cr_assert_eq(strata_registry_set_credentials(reg, "user", NULL), -EINVAL);
	cr_assert(strstr(strata_errmsg(), "without a password"), "%s", strata_errmsg());
	cr_assert_eq(strata_registry_set_credentials(reg, "user", "secret"), 0);
	cr_assert_eq(strata_registry_set_credentials(reg, NULL, NULL), 0);
	cr_assert_eq(strata_registry_set_tls(reg, "/nonexistent/ca.pem", 1), 0);
	cr_assert_eq(strata_registry_set_tls(reg, NULL, 1), 0);
	cr_assert_eq(strata_registry_set_plain_http(reg, 1), 0);
	cr_assert_eq(strata_registry_set_timeout(reg, 5), 0);
	cr_assert_eq(strata_store_pull(st, reg, "not a reference", NULL, 0, id), STRATA_E_BAD_REF);
	cr_assert(strstr(strata_errmsg(), "not a reference"), "%s", strata_errmsg());
	/* Port 1 on loopback: nothing listens. */
	cr_assert_eq(strata_store_pull(st, reg, "127.0.0.1:1/none/img:v1", NULL, 0, id), STRATA_E_NET);
	cr_assert(strstr(strata_errmsg(), "127.0.0.1:1"), "%s", strata_errmsg());
	cr_assert_eq(strata_sandbox_pull(h, st, reg, "127.0.0.1:1/none/img:v1", 0, &sb), STRATA_E_NET);
	cr_assert_null(sb);
	cr_assert_eq(strata_store_pull(st, reg, "127.0.0.1:1/none/img:v1", "bad tag", 0, id), STRATA_E_BAD_NAME);
	sb = sandbox(h);
	cr_assert_eq(strata_sandbox_capture(sb, st, "snap", 0, NULL), 0);
	cr_assert_eq(strata_store_push(st, reg, "absent", "127.0.0.1:1/none/img:v1"), STRATA_E_NOT_FOUND);
	cr_assert_eq(strata_store_push(st, reg, "snap", "127.0.0.1:1/none/img:v1"), STRATA_E_NET);
	cr_assert(strata_errmsg()[0]);
	cr_assert_eq(strata_store_push(st, reg, "snap", "nothing"), STRATA_E_BAD_REF);
	strata_sandbox_free(sb);
	strata_registry_free(reg);
	strata_registry_free(NULL);
	strata_store_close(st);
	strata_host_free(h);
}

extern char **environ;

/* Debian's docker-registry on a free loopback port (its files in the test's
 * directory): its pid, the port in *port; 0 (and the test skipped) where
 * it is not installed. */
static pid_t registry_start(int *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	char yml[4300], dir[4300];
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (system("command -v docker-registry >/dev/null") != 0)
		cr_skip_test("docker-registry is missing (Debian's docker-registry; .ci/deps installs it)");
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*port = ntohs(a.sin_port);
	close(fd);
	snprintf(dir, sizeof(dir), "%s/registry", tmp);
	snprintf(yml, sizeof(yml), "%s/registry.yml", tmp);
	FILE *f = fopen(yml, "w");
	cr_assert_not_null(f);
	fprintf(f, "version: 0.1\nlog: {level: error}\nstorage: {filesystem: {rootdirectory: %s}}\n"
		   "http: {addr: 127.0.0.1:%d}\n", dir, *port);
	fclose(f);
	pid_t pid;
	char *argv[] = { "docker-registry", "serve", yml, NULL }, log[4300];
	posix_spawn_file_actions_t fa;
	snprintf(log, sizeof(log), "%s/registry.log", tmp);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0600);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	cr_assert_eq(posix_spawnp(&pid, "docker-registry", &fa, NULL, argv, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	for (int i = 0; i < 200; i++) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		a.sin_port = htons((uint16_t)*port);
		int up = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
		close(fd);
		if (up)
			return pid;
		usleep(50 * 1000);
	}
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	cr_assert_fail("docker-registry did not listen on 127.0.0.1:%d", *port);
	return 0;
}

/* A loopback registry's settings, and snapshot "v1" of st (a counter at 1,
 * captured from sb) pushed to 127.0.0.1:port/api/REPO:v1 (ref). */
static strata_registry *push_counter(strata_sandbox *sb, strata_store *st, int port, const char *repo,
				     char id[STRATA_ID_LEN + 1], char *ref, size_t reflen)
{
	strata_registry *reg = NULL;

	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 1);
	cr_assert_eq(strata_sandbox_capture(sb, st, "v1", 0, id), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_registry_new(&reg), 0);
	cr_assert_eq(strata_registry_set_plain_http(reg, 1), 0);
	cr_assert_eq(strata_registry_set_timeout(reg, 60), 0);
	snprintf(ref, reflen, "127.0.0.1:%d/api/%s:v1", port, repo);
	cr_assert_eq(strata_store_push(st, reg, "v1", ref), 0, "%s", strata_errmsg());
	return reg;
}

/* Regular files under DIR/blobs (a store's blobs and their lazy partial files). */
static int blob_files(const char *store)
{
	char cmd[4400], buf[32] = "";
	FILE *f;

	snprintf(cmd, sizeof(cmd), "find '%s/%s/blobs' -type f -size +0 | wc -l", tmp, store);
	cr_assert_not_null(f = popen(cmd, "r"));
	cr_assert_not_null(fgets(buf, sizeof(buf), f));
	pclose(f);
	return atoi(buf);
}

/* A lazy layer's check: sound, its strings readable during the call. */
static int on_lazy_layer(void *ctx, const struct strata_layer_check *c)
{
	cr_assert_eq(c->kind, STRATA_LAYER_CHECKED, "no bad chunk in a fresh pull");
	cr_assert_eq(c->status, 0, "layer %s: %s", c->layer, strata_strerror(c->status));
	if (!c->lazy)
		return 0;
	cr_assert_gt(c->chunks, 0);
	cr_assert_leq(c->present, c->chunks);
	cr_assert_eq(c->bad, 0);
	cr_assert_gt(strlen(c->origin), 0);
	cr_assert(strstr(c->source, c->origin), "source %s, origin %s", c->source, c->origin);
	cr_assert(c->chunk_index[0] == '\0' || strncmp(c->chunk_index, "sha256:", 7) == 0, "%s", c->chunk_index);
	++*(int *)ctx;
	return 0;
}

/* A lazy pull: the metadata only, the sandbox at once, its pages fetched
 * through the store's private mount as the guest touches them. */
Test(api, a_lazy_snapshot_from_a_registry)
{
	strata_host *h = host();
	strata_store *st = store("store"), *whole = store("whole"), *lz = store("lazy");
	strata_sandbox *sb = sandbox(h), *pulled = NULL, *again = NULL;
	char id[STRATA_ID_LEN + 1], got[STRATA_ID_LEN + 1], ref[128];
	int port;
	pid_t pid = registry_start(&port);

	strata_registry *reg = push_counter(sb, st, port, "lazy", id, ref, sizeof(ref));
	cr_assert_eq(strata_store_pull(whole, reg, ref, NULL, 0, got), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_sandbox_pull(h, lz, reg, ref, 7, &pulled), -EINVAL);
	cr_assert_eq(strata_sandbox_pull(h, lz, reg, ref, STRATA_PULL_LAZY, &pulled), 0, "%s", strata_errmsg());
	/* Recorded, not fetched: the lazy store holds fewer blob files than
	 * the whole pull's (its layers are not there). */
	cr_assert_eq(strata_store_resolve(lz, id, got), 0, "%s", strata_errmsg());
	int lazy_files = blob_files("lazy"), whole_files = blob_files("whole");
	cr_assert_lt(lazy_files, whole_files, "lazy %d, whole %d blob files", lazy_files, whole_files);
	/* What of it is lazy, and from where. */
	uint64_t nlazy = 0, chunks = 0, present = UINT64_MAX;
	char origin[STRATA_ORIGIN_LEN + 1];
	cr_assert_eq(strata_store_snapshot_info(lz, id, STRATA_SNAPSHOT_LAZY_LAYERS, &nlazy), 0, "%s", strata_errmsg());
	cr_assert_geq(nlazy, 1);
	cr_assert_eq(strata_store_snapshot_info(lz, id, STRATA_SNAPSHOT_LAZY_CHUNKS, &chunks), 0, "%s", strata_errmsg());
	cr_assert_geq(chunks, nlazy);
	cr_assert_eq(strata_store_snapshot_info(lz, id, STRATA_SNAPSHOT_LAZY_PRESENT, &present), 0, "%s", strata_errmsg());
	cr_assert_leq(present, chunks);
	cr_assert_eq(strata_store_lazy_origin(lz, id, origin, sizeof(origin)), 0, "%s", strata_errmsg());
	cr_assert(strstr(ref, origin) == ref, "origin %s of %s", origin, ref);
	cr_assert_eq(strata_store_lazy_origin(lz, id, origin, 4), -ERANGE);
	cr_assert_eq(strata_store_snapshot_info(whole, id, STRATA_SNAPSHOT_LAZY_LAYERS, &nlazy), 0, "%s", strata_errmsg());
	cr_assert_eq(nlazy, 0, "the whole pull has no lazy layer");
	cr_assert_eq(strata_store_lazy_origin(whole, id, origin, sizeof(origin)), STRATA_E_NOT_FOUND);
	/* Verified as lazy: its present chunks against its chunk index. */
	int lazy_seen = 0;
	cr_assert_geq(strata_store_verify_snapshot(lz, id, on_lazy_layer, &lazy_seen), 1, "%s", strata_errmsg());
	cr_assert_geq(lazy_seen, 1, "its lazy layers are checked as lazy");
	/* The guest's pages come through the private mount: it goes on from the capture. */
	cr_assert_eq(call_i(pulled, "counter_next", 0, 0, 0), 2);
	cr_assert_eq(strata_sandbox_restore(pulled), 0, "%s", strata_errmsg());
	cr_assert_eq(call_i(pulled, "counter_next", 0, 0, 0), 2);
	/* The store serves its lazy layers once: a second sandbox and a pool reuse it. */
	cr_assert_eq(strata_store_set_registry(lz, reg), -EBUSY);
	cr_assert(strstr(strata_errmsg(), "first lazy open"), "%s", strata_errmsg());
	cr_assert_eq(strata_sandbox_open_store(h, lz, id, &again), 0, "%s", strata_errmsg());
	cr_assert_eq(call_i(again, "counter_next", 0, 0, 0), 2);
	strata_pool *p = NULL;
	strata_sandbox *ps = NULL;
	cr_assert_eq(strata_pool_open_store(h, lz, id, 2, &p), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_pool_get(p, 0, &ps), 0, "%s", strata_errmsg());
	cr_assert_eq(call_i(ps, "counter_next", 0, 0, 0), 2);
	cr_assert_eq(strata_pool_put(p, ps), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_pool_free(p), 0);
	strata_sandbox_free(again);
	strata_sandbox_free(pulled);
	/* A lazy snapshot cannot be exported before its layers are complete;
	 * strata_store_complete fetches the rest, then it can. */
	strata_store *lz2 = store("lazy2");
	cr_assert_eq(strata_store_pull(lz2, reg, ref, NULL, STRATA_PULL_LAZY, got), 0, "%s", strata_errmsg());
	char edir[4300];
	snprintf(edir, sizeof(edir), "%s/lazy-export", tmp);
	cr_assert_eq(strata_store_export(lz, id, edir), -ENOENT, "%s", strata_errmsg());
	cr_assert_eq(access(edir, F_OK), -1, "a failed export leaves nothing");
	cr_assert_eq(strata_store_complete(NULL, reg, id), -EINVAL);
	cr_assert_eq(strata_store_complete(lz, reg, "nope"), STRATA_E_NOT_FOUND);
	cr_assert_eq(strata_store_complete(lz, reg, id), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_store_snapshot_info(lz, id, STRATA_SNAPSHOT_LAZY_LAYERS, &nlazy), 0, "%s", strata_errmsg());
	cr_assert_eq(nlazy, 0, "complete: no layer is lazy any more");
	cr_assert_eq(strata_store_complete(lz, reg, id), 0, "nothing lazy: 0 at once (%s)", strata_errmsg());
	cr_assert_eq(strata_store_export(lz, id, edir), 0, "%s", strata_errmsg());
	/* Pulled again without STRATA_PULL_LAZY: completed, and whole. */
	cr_assert_eq(strata_store_pull(lz, reg, ref, NULL, 0, got), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_store_verify(lz, STRATA_VERIFY_HASH, NULL, NULL), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_store_snapshot_info(lz, id, STRATA_SNAPSHOT_LAZY_LAYERS, &nlazy), 0, "%s", strata_errmsg());
	cr_assert_eq(nlazy, 0, "completed: no layer is lazy any more");
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	/* The registry gone: completing fails saying why, and stays lazy. */
	cr_assert_lt(strata_store_complete(lz2, reg, id), 0);
	cr_assert(strstr(strata_errmsg(), "could not be fetched"), "%s", strata_errmsg());
	cr_assert_eq(strata_store_snapshot_info(lz2, id, STRATA_SNAPSHOT_LAZY_LAYERS, &nlazy), 0, "%s", strata_errmsg());
	cr_assert_geq(nlazy, 1);
	strata_store_close(lz2);
	strata_sandbox_free(sb);
	strata_registry_free(reg);
	strata_store_close(lz);
	strata_store_close(whole);
	strata_store_close(st);
	strata_host_free(h);
}

/* Every blob file of the registry's storage, each byte inverted: the
 * registry then serves bytes that match no digest (it does not check what
 * it serves). What the lazy store needs of the manifest is in it already. */
static void registry_corrupt(void)
{
	char cmd[4400], path[4400];
	FILE *f;
	int files = 0;

	snprintf(cmd, sizeof(cmd), "find '%s/registry' -path '*/blobs/*' -name data -type f", tmp);
	cr_assert_not_null(f = popen(cmd, "r"));
	while (fgets(path, sizeof(path), f)) {
		path[strcspn(path, "\n")] = '\0';
		int fd = open(path, O_RDWR);
		cr_assert_geq(fd, 0, "%s", path);
		unsigned char buf[65536];
		ssize_t n;
		off_t at = 0;
		while ((n = pread(fd, buf, sizeof(buf), at)) > 0) {
			for (ssize_t i = 0; i < n; i++)
				buf[i] = (unsigned char)~buf[i];
			cr_assert_eq(pwrite(fd, buf, (size_t)n, at), n);
			at += n;
		}
		close(fd);
		files++;
	}
	pclose(f);
	cr_assert_gt(files, 0, "no blob in %s/registry", tmp);
}

/* What the child below reads in its SIGBUS handler. */
static strata_store *bus_store;
static int bus_fd = -1;

/* A host's SIGBUS handler as docs/library.md shows it: the reasons, then
 * _exit (returning would run the faulting access again). */
static void on_bus(int sig)
{
	static char why[STRATA_LAZY_ERRMSG_SIZE];
	int n = strata_store_lazy_errmsg(bus_store, why, sizeof(why));

	(void)sig;
	if (n > 0)
		(void)!write(bus_fd, why, (size_t)n);
	_exit(n > 0 ? 10 : 11);
}

/* In a child (the rule: a fork makes its own host and store): open the
 * lazy snapshot v1 of store `path` on the run's backend, call counter_next.
 * The page that cannot be had meets the host as SIGBUS (exit 10: the
 * handler read the reasons; 11: it read none), or as a failed open or
 * call (then the reasons are read the same way: 20, or 21 without any;
 * 30: the call worked). *text gets what the child read. */
static int child_meets_lazy_page(const char *path, char *text, size_t len)
{
	int pfd[2], status;
	pid_t pid;

	cr_assert_eq(pipe(pfd), 0);
	fflush(NULL);
	if ((pid = fork()) == 0) {
		strata_host *h = NULL;
		strata_registry *reg = NULL;
		strata_sandbox *sb = NULL;
		struct strata_result r = { 0 };
		static char why[STRATA_LAZY_ERRMSG_SIZE];
		struct sigaction sa = { .sa_handler = on_bus };

		close(pfd[0]);
		bus_fd = pfd[1];
		if (strata_host_new(&h) < 0 || strata_host_set_backend(h, backend) < 0 ||
		    strata_store_open(path, 0, &bus_store) < 0 || strata_registry_new(&reg) < 0 ||
		    strata_registry_set_plain_http(reg, 1) < 0 || strata_store_set_registry(bus_store, reg) < 0)
			_exit(40);
		sigemptyset(&sa.sa_mask);
		sigaction(SIGBUS, &sa, NULL);
		if (strata_sandbox_open_store(h, bus_store, "v1", &sb) == 0 &&
		    strata_sandbox_call(sb, "counter_next", NULL, 0, 0, &r) == 0)
			_exit(30);
		int n = strata_store_lazy_errmsg(bus_store, why, sizeof(why));
		if (n > 0)
			(void)!write(pfd[1], why, (size_t)n);
		_exit(n > 0 ? 20 : 21);
	}
	close(pfd[1]);
	size_t got = 0;
	ssize_t n;
	while (got + 1 < len && (n = read(pfd[0], text + got, len - 1 - got)) > 0)
		got += (size_t)n;
	text[got] = '\0';
	close(pfd[0]);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* A lazy snapshot whose registry serves corrupt bytes, then none: the page
 * the host touches raises SIGBUS, and strata_store_lazy_errmsg, called in
 * the handler, says why. */
Test(api, a_lazy_page_that_cannot_be_had_is_explained_in_a_sigbus_handler)
{
	strata_host *h = host();
	strata_store *st = store("store"), *lz = store("lazy");
	strata_sandbox *sb = sandbox(h);
	char id[STRATA_ID_LEN + 1], ref[128], path[4200], text[STRATA_LAZY_ERRMSG_SIZE + 1];
	static char why[STRATA_LAZY_ERRMSG_SIZE];
	int port;
	pid_t pid = registry_start(&port);

	strata_registry *reg = push_counter(sb, st, port, "gone", id, ref, sizeof(ref));
	cr_assert_eq(strata_store_pull(lz, reg, ref, "v1", STRATA_PULL_LAZY, NULL), 0, "%s", strata_errmsg());
	/* A store that never served a lazy layer has no reason; bad arguments. */
	why[0] = 'x';
	cr_assert_eq(strata_store_lazy_errmsg(lz, why, sizeof(why)), 0);
	cr_assert_str_eq(why, "");
	cr_assert_eq(strata_store_lazy_errmsg(NULL, why, sizeof(why)), -EINVAL);
	cr_assert_eq(strata_store_lazy_errmsg(lz, NULL, 1), -EINVAL);
	cr_assert_eq(strata_store_lazy_errmsg(lz, why, 0), -EINVAL);
	strata_store_close(lz);
	snprintf(path, sizeof(path), "%s/lazy", tmp);

	registry_corrupt();
	int rc = child_meets_lazy_page(path, text, sizeof(text));
	cr_assert_eq(rc, 10, "the SIGBUS handler read the reasons (exit %d): %s", rc, text);
	cr_assert(strstr(text, "does not match the chunk index: refused"), "%s", text);
	char from[64];
	snprintf(from, sizeof(from), "from 127.0.0.1:%d/api/gone", port);
	cr_assert(strstr(text, from), "naming the registry (%s): %s", from, text);

	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	rc = child_meets_lazy_page(path, text, sizeof(text));
	cr_assert_eq(rc, 10, "the SIGBUS handler read the reasons (exit %d): %s", rc, text);
	cr_assert(strstr(text, "gave up after the retries") && strstr(text, from), "%s", text);
	cr_assert(!strstr(text, "refused"), "the child's own store's reasons only: %s", text);

	strata_sandbox_free(sb);
	strata_registry_free(reg);
	strata_store_close(st);
	strata_host_free(h);
}

struct creds_seen {
	int calls;
	char host[64];
	bool refuse;
};

static int creds_cb(void *ctx, const char *host, char **user, char **pass, char *why, size_t whylen)
{
	struct creds_seen *s = ctx;

	s->calls++;
	snprintf(s->host, sizeof(s->host), "%s", host);
	if (s->refuse) {
		snprintf(why, whylen, "no credentials for this test");
		return STRATA_E_AUTH;
	}
	*user = *pass = NULL;  /* anonymous */
	return 0;
}

Test(api, push_pull_and_a_sandbox_from_a_registry)
{
	strata_host *h = host();
	strata_store *st = store("store"), *other = store("other"), *third = store("third");
	strata_sandbox *sb = sandbox(h), *pulled = NULL;
	char id[STRATA_ID_LEN + 1], got[STRATA_ID_LEN + 1], ref[128];
	int port;
	pid_t pid = registry_start(&port);

	strata_registry *reg = push_counter(sb, st, port, "counter", id, ref, sizeof(ref));
	/* Pulled into another store, tagged: the same snapshot id. */
	cr_assert_eq(strata_store_pull(other, reg, ref, "mine", 0, got), 0, "%s", strata_errmsg());
	cr_assert_str_eq(got, id);
	cr_assert_eq(strata_store_pull(other, reg, ref, "mine", 0, got), 0, "pulling again: %s", strata_errmsg());
	cr_assert_eq(strata_store_verify(other, STRATA_VERIFY_HASH, NULL, NULL), 0);
	/* Pull then restore in one call: the counter goes on from the capture. */
	cr_assert_eq(strata_sandbox_pull(h, third, reg, ref, 0, &pulled), 0, "%s", strata_errmsg());
	cr_assert_eq(call_i(pulled, "counter_next", 0, 0, 0), 2);
	cr_assert_eq(strata_store_resolve(third, id, got), 0, "%s", strata_errmsg());
	/* Credentials asked per registry: the callback's answer, or its refusal with its words. */
	struct creds_seen seen = { 0 };
	const char *const certs[] = { "/nonexistent/certs.d", NULL };
	cr_assert_eq(strata_registry_set_certs_dirs(reg, certs), 0);
	cr_assert_eq(strata_registry_set_credentials_fn(reg, creds_cb, &seen), 0);
	cr_assert_eq(strata_store_pull(other, reg, ref, "mine", 0, got), 0, "%s", strata_errmsg());
	cr_assert_geq(seen.calls, 1);
	char host[64];
	snprintf(host, sizeof(host), "127.0.0.1:%d", port);
	cr_assert_str_eq(seen.host, host);
	seen.refuse = true;
	cr_assert_eq(strata_store_pull(other, reg, ref, "mine", 0, got), STRATA_E_AUTH, "%s", strata_errmsg());
	cr_assert_eq(strata_registry_set_credentials_fn(reg, NULL, NULL), 0);
	snprintf(ref, sizeof(ref), "127.0.0.1:%d/api/absent:v1", port);
	cr_assert_eq(strata_store_pull(other, reg, ref, NULL, 0, got), STRATA_E_REMOTE_MISSING);
	cr_assert(strstr(strata_errmsg(), "absent"), "%s", strata_errmsg());
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	strata_sandbox_free(pulled);
	strata_sandbox_free(sb);
	strata_registry_free(reg);
	strata_store_close(third);
	strata_store_close(other);
	strata_store_close(st);
	strata_host_free(h);
}

/* What a progress callback saw of one transfer. */
struct xfer_seen {
	int begins, ends, skips, manifests, bytes;
	int bad_size, bad_digest;
	uint64_t moved;
};

static void xfer_cb(void *ctx, const struct strata_xfer_event *ev)
{
	struct xfer_seen *x = ctx;

	if (ev->size < sizeof(*ev))
		x->bad_size++;
	if (ev->kind != STRATA_XFER_BYTES && (!ev->digest || strncmp(ev->digest, "sha256:", 7) != 0 ||
					      strlen(ev->digest) != STRATA_DIGEST_LEN))
		x->bad_digest++;
	switch (ev->kind) {
	case STRATA_XFER_BEGIN: x->begins++; break;
	case STRATA_XFER_BYTES: x->bytes++; break;
	case STRATA_XFER_END: x->ends++; x->moved += ev->total; break;
	case STRATA_XFER_SKIP: x->skips++; break;
	case STRATA_XFER_MANIFEST: x->manifests++; break;
	}
}

static uint64_t xfer_info(strata_store *st, int what)
{
	uint64_t v = UINT64_MAX;

	cr_assert_eq(strata_store_info(st, what, &v), 0, "%d: %s", what, strata_errmsg());
	return v;
}

/* What strata push and strata pull show of a transfer: its events, its
 * figures on the wire and the manifest's digest. */
Test(api, a_transfer_reports_its_progress_figures_and_digest)
{
	strata_host *h = host();
	strata_store *st = store("store"), *other = store("other");
	strata_sandbox *sb = sandbox(h);
	char id[STRATA_ID_LEN + 1], got[STRATA_ID_LEN + 1], ref[128], dg[STRATA_DIGEST_LEN + 1];
	struct xfer_seen up = { 0 }, down = { 0 }, again = { 0 };
	strata_registry *reg = NULL;
	int port;
	pid_t pid = registry_start(&port);

	cr_assert_eq(strata_store_push_digest(st, dg), STRATA_E_NOT_FOUND);
	cr_assert_eq(xfer_info(st, STRATA_STORE_INFO_XFER_WIRE_REQUESTS), 0);
	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 1);
	cr_assert_eq(strata_sandbox_capture(sb, st, "v1", 0, id), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_registry_new(&reg), 0);
	cr_assert_eq(strata_registry_set_plain_http(reg, 1), 0);
	cr_assert_eq(strata_registry_set_timeout(reg, 60), 0);
	cr_assert_eq(strata_registry_set_progress(reg, xfer_cb, &up), 0);
	snprintf(ref, sizeof(ref), "127.0.0.1:%d/api/progress:v1", port);
	cr_assert_eq(strata_store_push(st, reg, "v1", ref), 0, "%s", strata_errmsg());
	cr_assert_gt(up.begins, 0);
	cr_assert_eq(up.ends, up.begins, "every blob begun ends: %d %d", up.begins, up.ends);
	cr_assert_eq(up.manifests, 1);
	cr_assert_eq(up.bad_size + up.bad_digest, 0);
	cr_assert_eq(xfer_info(st, STRATA_STORE_INFO_XFER_SNAPSHOTS), 1);
	/* Blobs and their bytes (a chunk index is counted apart, in BYTES_CHUNK_INDEX). */
	uint64_t moved = xfer_info(st, STRATA_STORE_INFO_XFER_BLOBS_MOVED);
	cr_assert(moved > 0 && moved <= (uint64_t)up.ends, "%" PRIu64 " of %d", moved, up.ends);
	cr_assert_leq(xfer_info(st, STRATA_STORE_INFO_XFER_BYTES_MOVED), up.moved);
	cr_assert_gt(xfer_info(st, STRATA_STORE_INFO_XFER_BYTES_MOVED), 0);
	cr_assert_gt(xfer_info(st, STRATA_STORE_INFO_XFER_WIRE_UP), up.moved);
	cr_assert_gt(xfer_info(st, STRATA_STORE_INFO_XFER_WIRE_REQUESTS), (uint64_t)up.ends);
	cr_assert_eq(xfer_info(st, STRATA_STORE_INFO_XFER_WIRE_MOUNTS), 0);
	cr_assert_eq(strata_store_push_digest(st, dg), 0, "%s", strata_errmsg());
	cr_assert_eq(strlen(dg), STRATA_DIGEST_LEN);
	/* Pushed again: every blob skipped, the same manifest. */
	char dg2[STRATA_DIGEST_LEN + 1];
	cr_assert_eq(strata_registry_set_progress(reg, xfer_cb, &again), 0);
	cr_assert_eq(strata_store_push(st, reg, "v1", ref), 0, "%s", strata_errmsg());
	cr_assert_eq(again.ends, 0);
	cr_assert_eq(again.skips, up.begins);
	cr_assert_geq(xfer_info(st, STRATA_STORE_INFO_XFER_BLOBS_SKIPPED), moved);
	cr_assert_eq(xfer_info(st, STRATA_STORE_INFO_XFER_BLOBS_MOVED), 0);
	cr_assert_eq(strata_store_push_digest(st, dg2), 0);
	cr_assert_str_eq(dg2, dg);
	/* Pulled: the manifest read, each blob fetched with its events. */
	cr_assert_eq(strata_registry_set_progress(reg, xfer_cb, &down), 0);
	cr_assert_eq(strata_store_pull(other, reg, ref, "mine", STRATA_PULL_KEEP_PARTIAL, got), 0, "%s",
		     strata_errmsg());
	cr_assert_str_eq(got, id);
	cr_assert_gt(down.ends, 0);
	cr_assert_geq(down.manifests, 1);
	cr_assert_eq(down.bad_size + down.bad_digest, 0);
	cr_assert_gt(xfer_info(other, STRATA_STORE_INFO_XFER_BLOBS_MOVED), 0);
	cr_assert_leq(xfer_info(other, STRATA_STORE_INFO_XFER_BLOBS_MOVED), (uint64_t)down.ends);
	cr_assert_eq(xfer_info(other, STRATA_STORE_INFO_XFER_EXISTED), 0);
	cr_assert_gt(xfer_info(other, STRATA_STORE_INFO_XFER_WIRE_DOWN), xfer_info(other, STRATA_STORE_INFO_XFER_BYTES_MOVED));
	cr_assert_eq(xfer_info(other, STRATA_STORE_INFO_XFER_WS_FOUND), 0, "no working set was recorded");
	cr_assert_eq(strata_registry_set_progress(reg, NULL, NULL), 0);
	cr_assert_eq(strata_store_pull(other, reg, ref, "mine", 0, got), 0, "%s", strata_errmsg());
	cr_assert_eq(xfer_info(other, STRATA_STORE_INFO_XFER_EXISTED), 1);
	cr_assert_eq(strata_store_pull(other, reg, ref, NULL, 1u << 30, got), -EINVAL);
	uint64_t v = 7;
	cr_assert_eq(strata_store_info(other, STRATA_STORE_INFO_GROUP + 1, &v), -EINVAL);
	cr_assert_eq(v, 7);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	strata_sandbox_free(sb);
	strata_registry_free(reg);
	strata_store_close(other);
	strata_store_close(st);
	strata_host_free(h);
}

/* A push mounts a blob from the repository strata_registry_set_mount_from
 * names instead of uploading it (a host the store has no origins for). */
Test(api, a_push_mounts_blobs_from_another_repository)
{
	strata_host *h = host();
	strata_store *st = store("store"), *a = store("a"), *b = store("b");
	strata_sandbox *sb = sandbox(h);
	char id[STRATA_ID_LEN + 1], ref[128], to[128];
	int port;
	pid_t pid = registry_start(&port);

	strata_registry *reg = push_counter(sb, st, port, "origin", id, ref, sizeof(ref));
	cr_assert_eq(strata_store_pull(a, reg, ref, "v1", 0, NULL), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_store_pull(b, reg, ref, "v1", 0, NULL), 0, "%s", strata_errmsg());
	/* The same registry by another name: no origin of a's applies. */
	snprintf(to, sizeof(to), "localhost:%d/api/plain:v1", port);
	cr_assert_eq(strata_store_push(a, reg, "v1", to), 0, "%s", strata_errmsg());
	cr_assert_eq(xfer_info(a, STRATA_STORE_INFO_XFER_WIRE_MOUNTS), 0);
	uint64_t uploaded = xfer_info(a, STRATA_STORE_INFO_XFER_BLOBS_MOVED);
	cr_assert_gt(uploaded, 0);
	cr_assert_eq(strata_registry_set_mount_from(reg, "api/origin"), 0);
	snprintf(to, sizeof(to), "localhost:%d/api/mounted:v1", port);
	cr_assert_eq(strata_store_push(b, reg, "v1", to), 0, "%s", strata_errmsg());
	cr_assert_geq(xfer_info(b, STRATA_STORE_INFO_XFER_WIRE_MOUNTS), uploaded, "every blob mounted: %" PRIu64 " of %" PRIu64,
		      xfer_info(b, STRATA_STORE_INFO_XFER_WIRE_MOUNTS), uploaded);
	cr_assert_eq(xfer_info(b, STRATA_STORE_INFO_XFER_BLOBS_MOVED), 0, "none uploaded");
	cr_assert_eq(strata_registry_set_mount_from(reg, NULL), 0);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	strata_sandbox_free(sb);
	strata_registry_free(reg);
	strata_store_close(b);
	strata_store_close(a);
	strata_store_close(st);
	strata_host_free(h);
}

/* The working-set record goes with a push and comes with a pull; a lazy
 * pull with STRATA_PULL_PREFETCH fetches its pages at once. */
Test(api, a_lazy_pull_fetches_the_recorded_working_set_ahead)
{
	strata_host *h = host();
	strata_store *st = store("store"), *lz = store("lazy"), *pre = store("pre");
	strata_sandbox *sb = sandbox(h), *again = NULL, *pulled = NULL;
	char id[STRATA_ID_LEN + 1], got[STRATA_ID_LEN + 1], record[STRATA_ID_LEN + 1], ref[128];
	strata_registry *reg = NULL;
	int port;
	pid_t pid = registry_start(&port);

	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 1);
	cr_assert_eq(strata_sandbox_capture(sb, st, "v1", 0, id), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_host_set_cache(h, 8, 0), 0);
	cr_assert_eq(strata_sandbox_open_store(h, st, "v1", &again), 0, "%s", strata_errmsg());
	cr_assert_eq(call_i(again, "counter_next", 0, 0, 0), 2);
	int rc = strata_sandbox_record_working_set(again, st, record);
	if (rc == STRATA_E_NO_PAGEMAP)
		cr_skip_test("no working set here: %s", strata_errmsg());
	cr_assert_eq(rc, 0, "%s", strata_errmsg());
	cr_assert_eq(strata_registry_new(&reg), 0);
	cr_assert_eq(strata_registry_set_plain_http(reg, 1), 0);
	cr_assert_eq(strata_registry_set_timeout(reg, 60), 0);
	snprintf(ref, sizeof(ref), "127.0.0.1:%d/api/ws:v1", port);
	cr_assert_eq(strata_store_push(st, reg, "v1", ref), 0, "%s", strata_errmsg());
	cr_assert_eq(xfer_info(st, STRATA_STORE_INFO_XFER_WS_FOUND), 1);
	cr_assert_gt(xfer_info(st, STRATA_STORE_INFO_XFER_WS_BYTES), 0);
	/* A lazy pull takes the record; without the flag it fetches no page. */
	cr_assert_eq(strata_store_pull(lz, reg, ref, NULL, STRATA_PULL_LAZY, got), 0, "%s", strata_errmsg());
	cr_assert_str_eq(got, id);
	cr_assert_eq(xfer_info(lz, STRATA_STORE_INFO_XFER_WS_FOUND), 1);
	cr_assert_gt(xfer_info(lz, STRATA_STORE_INFO_XFER_LAYERS_LAZY), 0);
	cr_assert_eq(xfer_info(lz, STRATA_STORE_INFO_XFER_PREFETCH_REQUESTS), 0);
	cr_assert_eq(strata_store_pull(pre, reg, ref, NULL, STRATA_PULL_LAZY | STRATA_PULL_PREFETCH, got), 0, "%s",
		     strata_errmsg());
	cr_assert_eq(xfer_info(pre, STRATA_STORE_INFO_XFER_WS_FOUND), 1);
	cr_assert_gt(xfer_info(pre, STRATA_STORE_INFO_XFER_PREFETCH_WS_BYTES), 0);
	cr_assert_gt(xfer_info(pre, STRATA_STORE_INFO_XFER_PREFETCH_REQUESTS), 0);
	cr_assert_gt(xfer_info(pre, STRATA_STORE_INFO_XFER_PREFETCH_BYTES), 0);
	cr_assert_gt(xfer_info(pre, STRATA_STORE_INFO_XFER_PREFETCH_JOBS), 0);
	/* The prefetched snapshot runs on from the capture. */
	cr_assert_eq(strata_store_set_registry(pre, reg), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_sandbox_open_store(h, pre, id, &pulled), 0, "%s", strata_errmsg());
	cr_assert_eq(call_i(pulled, "counter_next", 0, 0, 0), 2);
	strata_sandbox_free(pulled);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	strata_sandbox_free(again);
	strata_sandbox_free(sb);
	strata_registry_free(reg);
	strata_store_close(pre);
	strata_store_close(lz);
	strata_store_close(st);
	strata_host_free(h);
}

/* A reference split as a push or pull reads it, and the push settings
 * that refuse what they cannot send. */
Test(api, references_and_push_settings_are_checked)
{
	struct strata_reference r;
	strata_registry *reg = NULL;

	cr_assert_eq(strata_reference_parse("127.0.0.1:5000/app/web:v1", &r), 0, "%s", strata_errmsg());
	cr_assert_str_eq(r.host, "127.0.0.1:5000");
	cr_assert_str_eq(r.repository, "app/web");
	cr_assert_str_eq(r.tag, "v1");
	cr_assert_null(r.digest);
	cr_assert_eq(strata_reference_parse("localhost/app", &r), 0);
	cr_assert_str_eq(r.tag, "latest");
	char dg[128];
	snprintf(dg, sizeof(dg), "example.org/a@sha256:%064d", 0);
	cr_assert_eq(strata_reference_parse(dg, &r), 0, "%s", strata_errmsg());
	cr_assert_null(r.tag);
	cr_assert(r.digest && strncmp(r.digest, "sha256:", 7) == 0);
	r.host = "untouched";
	cr_assert_eq(strata_reference_parse("docker://example.org/a:b", &r), STRATA_E_BAD_REF);
	cr_assert(strstr(strata_errmsg(), "docker://"), "%s", strata_errmsg());
	cr_assert_str_eq(r.host, "untouched");
	cr_assert_eq(strata_reference_host_valid("127.0.0.1:5000"), 1);
	cr_assert_eq(strata_reference_host_valid("localhost"), 1);
	cr_assert_eq(strata_reference_host_valid("nodots"), 0);
	cr_assert_eq(strata_reference_host_valid("a.b:port"), 0);
	cr_assert_eq(strata_reference_host_valid(NULL), 0);
	cr_assert_eq(strata_registry_new(&reg), 0);
	cr_assert_eq(strata_registry_set_chunk_size(reg, 0), 0);
	cr_assert_eq(strata_registry_set_chunk_size(reg, STRATA_CHUNK_MIN), 0);
	cr_assert_eq(strata_registry_set_chunk_size(reg, STRATA_CHUNK_MAX), 0);
	cr_assert_eq(strata_registry_set_chunk_size(reg, 65537), -EINVAL);
	cr_assert_eq(strata_registry_set_chunk_size(reg, STRATA_CHUNK_MIN / 2), -EINVAL);
	cr_assert_eq(strata_registry_set_chunk_size(reg, STRATA_CHUNK_MAX * 2), -EINVAL);
	const char *good[] = { "a=b", "org.opencontainers.image.source=https://x", NULL };
	const char *bad[] = { "a=b", "=v", NULL }, *bare[] = { "novalue", NULL };
	cr_assert_eq(strata_registry_set_annotations(reg, good), 0);
	cr_assert_eq(strata_registry_set_annotations(reg, bad), -EINVAL);
	cr_assert(strstr(strata_errmsg(), "=v"), "%s", strata_errmsg());
	cr_assert_eq(strata_registry_set_annotations(reg, bare), -EINVAL);
	cr_assert_eq(strata_registry_set_annotations(reg, NULL), 0);
	cr_assert_eq(strata_registry_set_whole_configs(reg, 1), 0);
	cr_assert_eq(strata_registry_set_cert_dir(reg, "/nonexistent"), 0);
	cr_assert_eq(strata_registry_set_cert_dir(reg, NULL), 0);
	cr_assert_eq(strata_registry_set_warning_fn(reg, NULL, NULL), 0);
	strata_registry_free(reg);
}

/* Where a snapshot came from, and a failed transfer's cause on its own. */
Test(api, a_pulled_snapshot_knows_its_origin_and_a_failure_its_cause)
{
	strata_host *h = host();
	strata_store *st = store("store"), *other = store("other");
	strata_sandbox *sb = sandbox(h);
	char id[STRATA_ID_LEN + 1], got[STRATA_ID_LEN + 1], ref[128], origin[STRATA_ORIGIN_LEN + 1], want[128];
	int port;
	pid_t pid = registry_start(&port);

	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 1);
	cr_assert_eq(strata_sandbox_capture(sb, st, "v1", 0, id), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_store_origin(st, "v1", origin, sizeof(origin)), STRATA_E_NOT_FOUND, "made here");
	cr_assert_eq(strata_store_origin(st, "nosuch", origin, sizeof(origin)), STRATA_E_NOT_FOUND);
	strata_registry *reg = NULL;
	cr_assert_eq(strata_registry_new(&reg), 0);
	cr_assert_eq(strata_registry_set_plain_http(reg, 1), 0);
	cr_assert_eq(strata_registry_set_timeout(reg, 60), 0);
	const char *ann[] = { "org.example.note=hello", NULL };
	cr_assert_eq(strata_registry_set_annotations(reg, ann), 0);
	cr_assert_eq(strata_registry_set_chunk_size(reg, 8192), 0);
	snprintf(ref, sizeof(ref), "127.0.0.1:%d/api/origin:v1", port);
	cr_assert_eq(strata_store_push(st, reg, "v1", ref), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_store_pull(other, reg, ref, "mine", 0, got), 0, "%s", strata_errmsg());
	snprintf(want, sizeof(want), "127.0.0.1:%d/api/origin", port);
	cr_assert_eq(strata_store_origin(other, "mine", origin, sizeof(origin)), 0, "%s", strata_errmsg());
	cr_assert_str_eq(origin, want);
	cr_assert_eq(strata_store_origin(other, "mine", origin, 4), -ERANGE);
	/* A missing repository: the registry's words on their own. */
	snprintf(ref, sizeof(ref), "127.0.0.1:%d/api/absent:v1", port);
	cr_assert_eq(strata_store_pull(other, reg, ref, NULL, 0, got), STRATA_E_REMOTE_MISSING);
	cr_assert_neq(strata_errdetail()[0], '\0');
	cr_assert(strstr(strata_errmsg(), strata_errdetail()), "%s | %s", strata_errmsg(), strata_errdetail());
	cr_assert_eq(strata_store_origin(other, "nosuch", origin, sizeof(origin)), STRATA_E_NOT_FOUND);
	cr_assert_str_eq(strata_errdetail(), "", "another failing call empties it");
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	strata_sandbox_free(sb);
	strata_registry_free(reg);
	strata_store_close(other);
	strata_store_close(st);
	strata_host_free(h);
}

/* ==== what the strata command needs of the API (its run and pool are built on it) ==== */

static int count_fns(void *ctx, const char *name, const char *sig)
{
	int *n = ctx;

	(*n)++;
	if (strcmp(name, "echo") == 0)
		cr_assert_str_eq(sig, "s(s)");
	return 0;
}

static int stop_at_first(void *ctx, const char *name, const char *sig)
{
	(void)ctx;
	(void)name;
	(void)sig;
	return 7;
}

Test(api, guest_functions_are_listed_with_their_signatures)
{
	strata_host *h = host();
	strata_sandbox *sb = sandbox(h);
	char sig[STRATA_SIG_LEN];
	int n = 0;

	int count = strata_sandbox_functions(sb, count_fns, &n);
	cr_assert_gt(count, 5, "%d", count);
	cr_assert_eq(count, n);
	cr_assert_eq(strata_sandbox_functions(sb, stop_at_first, NULL), 7);
	cr_assert_eq(strata_sandbox_functions(sb, NULL, NULL), -EINVAL);
	cr_assert_eq(strata_sandbox_signature(sb, "add_local", sig), 0, "%s", strata_errmsg());
	cr_assert_str_eq(sig, "i(ii)");
	cr_assert_eq(strata_sandbox_signature(sb, "counter_next", sig), 0);
	cr_assert_str_eq(sig, "i()");
	cr_assert_eq(strata_sandbox_signature(sb, "nope", sig), STRATA_E_NO_FUNCTION);
	cr_assert(strstr(strata_errmsg(), "'nope'"), "%s", strata_errmsg());
	strata_sandbox_free(sb);
	strata_host_free(h);
}

Test(api, a_guest_fault_is_in_fields_and_a_core_file)
{
	strata_host *h = host();
	strata_sandbox *sb = sandbox(h);
	struct strata_value nine = { .type = STRATA_I64, .i64 = 9 };
	struct strata_result r = { 0 };
	uint64_t v = 1, rip = 0;
	char core[4200], magic[4] = "";

	cr_assert_eq(strata_sandbox_info(sb, STRATA_INFO_ERROR, &v), 0);
	cr_assert_eq(v, 0, "no call failed yet");
	cr_assert_eq(strata_sandbox_call(sb, "null_write", NULL, 0, 0, &r), STRATA_E_GUEST_FAULT, "%s", strata_errmsg());
	cr_assert_eq(strata_sandbox_info(sb, STRATA_INFO_ERROR, &v), 0);
	cr_assert_eq((int)(int64_t)v, STRATA_E_GUEST_FAULT);
	cr_assert_eq(strata_sandbox_info(sb, STRATA_INFO_FAULT_VECTOR, &v), 0);
	cr_assert_eq(v, 14, "a page fault is vector 14, not %llu", (unsigned long long)v);
	cr_assert_eq(strata_sandbox_info(sb, STRATA_INFO_FAULT_ADDRESS, &v), 0);
	cr_assert_eq(v, 0, "null_write writes address 0");
	cr_assert_eq(strata_sandbox_info(sb, STRATA_INFO_FAULT_RIP, &rip), 0);
	cr_assert_neq(rip, 0);
	char hex[32];
	snprintf(hex, sizeof(hex), "rip 0x%llx", (unsigned long long)rip);
	cr_assert(strstr(strata_errmsg(), hex), "the message's rip is the field's: %s, %s", strata_errmsg(), hex);
	cr_assert_eq(strata_sandbox_info(sb, 9999, &v), -EINVAL);
	/* The core of the poisoned sandbox: an ELF file gdb reads. */
	snprintf(core, sizeof(core), "%s/core", tmp[0] ? tmp : tmpdir());
	cr_assert_eq(strata_sandbox_core(sb, core), 0, "%s", strata_errmsg());
	FILE *f = fopen(core, "rb");
	cr_assert_not_null(f);
	cr_assert_eq(fread(magic, 1, 4, f), 4);
	fclose(f);
	cr_assert_eq(memcmp(magic, "\177ELF", 4), 0);
	cr_assert_lt(strata_sandbox_core(sb, "/nonexistent/dir/core"), 0);
	cr_assert(strstr(strata_errmsg(), "/nonexistent/dir/core"), "%s", strata_errmsg());
	strata_sandbox_free(sb);
	/* An abort's code. */
	sb = sandbox(h);
	cr_assert_eq(strata_sandbox_call(sb, "do_abort", &nine, 1, 0, &r), STRATA_E_ABORT);
	cr_assert_eq(strata_sandbox_info(sb, STRATA_INFO_ABORT_CODE, &v), 0);
	cr_assert_eq((int64_t)v, 9);
	strata_sandbox_free(sb);
	strata_host_free(h);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

Test(api, host_policy_debug_cache_and_backend_checks)
{
	strata_host *h = host();
	strata_sandbox *sb;
	char good[4200], bad[4200];
	uint64_t v = 0;

	snprintf(good, sizeof(good), "%s/policy", tmpdir());
	snprintf(bad, sizeof(bad), "%s/bad", tmp);
	write_file(good, "reset = drop\nkeep_restores = 3\n");
	write_file(bad, "reset = sometimes\n");
	cr_assert_eq(strata_host_set_policy(h, "/nonexistent/policy"), -ENOENT);
	cr_assert(strstr(strata_errmsg(), "/nonexistent/policy"), "%s", strata_errmsg());
	cr_assert_eq(strata_host_set_policy(h, bad), STRATA_E_BAD_POLICY);
	cr_assert(strstr(strata_errmsg(), bad) && strstr(strata_errmsg(), "line 1"), "%s", strata_errmsg());
	cr_assert_eq(strata_host_set_cache(h, 3, 2), 0);
	cr_assert_eq(strata_host_set_policy(h, good), 0, "%s", strata_errmsg());
	/* The new policy keeps the cache limits. */
	cr_assert_eq(strata_host_info(h, STRATA_HOST_INFO_SHELLS_MAX, &v), 0);
	cr_assert_eq(v, 3);
	cr_assert_eq(strata_host_info(h, STRATA_HOST_INFO_WARM_MAX, &v), 0);
	cr_assert_eq(v, 2);
	cr_assert_eq(strata_host_info(h, 9999, &v), -EINVAL);
	cr_assert_eq(strata_host_set_debug(h, 1), 0);
	sb = sandbox(h);
	cr_assert_eq(strata_host_info(h, STRATA_HOST_INFO_SANDBOXES, &v), 0);
	cr_assert_eq(v, 1);
	cr_assert_eq(strata_host_set_policy(h, NULL), -EBUSY);
	/* Debug mode: a restore that finds nothing wrong succeeds (the check ran: it counts). */
	strata_store *st = store("store");
	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 1);
	cr_assert_eq(strata_sandbox_capture(sb, st, NULL, 0, NULL), 0, "%s", strata_errmsg());
	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 2);
	cr_assert_eq(strata_sandbox_restore(sb), 0, "%s", strata_errmsg());
	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 2);
	cr_assert_eq(strata_sandbox_info(sb, STRATA_INFO_RESTORES, &v), 0);
	cr_assert_geq(v, 1);
	cr_assert_eq(strata_sandbox_info(sb, STRATA_INFO_CAPTURES, &v), 0);
	cr_assert_eq(v, 1);
	strata_sandbox_free(sb);
	strata_store_close(st);
	cr_assert_eq(strata_host_set_policy(h, NULL), 0, "%s", strata_errmsg());
	/* The run's backend runs here; a number that is none is refused. */
	cr_assert_eq(strata_backend_check(strata_host_backend(h)), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_backend_check(STRATA_BACKEND_AUTO), -EINVAL);
	cr_assert_eq(strata_backend_check(77), -EINVAL);
	cr_assert_eq(strata_host_free(h), 0);
}

Test(api, snapshot_ids_working_sets_and_what_a_store_lacks)
{
	strata_host *h = host();
	strata_sandbox *sb = sandbox(h), *again = NULL;
	strata_store *st = store("store"), *other = store("other");
	char id[STRATA_ID_LEN + 1], sid[STRATA_ID_LEN + 1], record[STRATA_ID_LEN + 1] = "", dir[4200];
	uint64_t v = 1;

	cr_assert_eq(strata_sandbox_snapshot_id(sb, sid), STRATA_E_NO_SNAPSHOT);
	cr_assert_eq(strata_sandbox_info(sb, STRATA_INFO_LAYERS, &v), 0);
	cr_assert_eq(v, 0, "a sandbox from an ELF was opened from no snapshot");
	cr_assert_eq(strata_sandbox_record_working_set(sb, st, record), STRATA_E_NO_SNAPSHOT);
	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 1);
	cr_assert_eq(strata_sandbox_capture(sb, st, "ws", 0, id), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_sandbox_snapshot_id(sb, sid), 0);
	cr_assert_str_eq(sid, id);
	/* A start's working set: no warm sandbox, whose mappings are an earlier user's. */
	cr_assert_eq(strata_host_set_cache(h, 8, 0), 0);
	cr_assert_eq(strata_sandbox_open_store(h, st, "ws", &again), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_sandbox_info(again, STRATA_INFO_LAYERS, &v), 0);
	cr_assert_geq(v, 1);
	cr_assert_eq(strata_sandbox_info(again, STRATA_INFO_LAYER_PAGES, &v), 0);
	cr_assert_gt(v, 0);
	cr_assert_eq(strata_sandbox_info(again, STRATA_INFO_LAZY, &v), 0);
	cr_assert_eq(v, 0);
	cr_assert_eq(strata_sandbox_info(again, STRATA_INFO_ON_MOUNT, &v), 0);
	cr_assert_eq(v, 0);
	cr_assert_eq(call_i(again, "counter_next", 0, 0, 0), 2);
	cr_assert_eq(strata_sandbox_record_working_set(again, other, record), STRATA_E_NOT_FOUND);
	cr_assert(strstr(strata_errmsg(), id), "%s", strata_errmsg());
	int rc = strata_sandbox_record_working_set(again, st, record);
	if (rc == STRATA_E_NO_PAGEMAP) {
		cr_log_warn("no working set here: %s", strata_errmsg());
	} else {
		cr_assert_eq(rc, 0, "%s", strata_errmsg());
		cr_assert_eq(strlen(record), STRATA_ID_LEN);
		cr_assert_eq(strata_sandbox_info(again, STRATA_INFO_WS_PAGES, &v), 0);
		cr_assert_gt(v, 0);
		cr_assert_eq(strata_sandbox_info(again, STRATA_INFO_WS_BYTES, &v), 0);
		cr_assert_gt(v, 0);
		cr_assert_eq(strata_sandbox_info(again, STRATA_INFO_WS_LAYERS, &v), 0);
		cr_assert_geq(v, 1);
	}
	strata_sandbox_free(again);
	/* A directory's layers: in the store it came from, not in another. */
	snprintf(dir, sizeof(dir), "%s/dir", tmp);
	export("ws", dir);
	cr_assert_eq(strata_store_lacks(st, dir), 0, "%s", strata_errmsg());
	cr_assert_geq(strata_store_lacks(other, dir), 1);
	cr_assert_eq(strata_store_lacks(st, "/nonexistent/dir"), -ENOENT);
	cr_assert_eq(strata_sandbox_open_dir(h, dir, STRATA_DIR_VIA_FUSE, &again), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_sandbox_info(again, STRATA_INFO_LAYERS, &v), 0);
	cr_assert_geq(v, 1);
	cr_assert_eq(strata_sandbox_info(again, STRATA_INFO_ON_MOUNT, &v), 0);
	cr_assert_eq(v, 0, "a plain directory is on no mount");
	strata_sandbox_free(again);
	cr_assert_eq(strata_tag_valid("web-1.2_x"), 1);
	cr_assert_eq(strata_tag_valid("-x"), 0);
	cr_assert_eq(strata_tag_valid("a/b"), 0);
	cr_assert_eq(strata_tag_valid(""), 0);
	cr_assert_eq(strata_tag_valid(NULL), 0);
	strata_sandbox_free(sb);
	strata_store_close(st);
	strata_store_close(other);
	strata_host_free(h);
}

Test(api, a_clone_is_another_sandbox_of_the_same_snapshot)
{
	strata_host *h = host();
	strata_sandbox *sb = sandbox(h), *a = NULL, *b = NULL, *c = NULL, *d = NULL;
	strata_store *st = store("store");
	strata_pool *p = NULL;
	char dir[4200];

	cr_assert_eq(strata_sandbox_clone(sb, &a), STRATA_E_NO_SNAPSHOT, "a sandbox from an ELF has none");
	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 1);
	cr_assert_eq(strata_sandbox_capture(sb, st, "c", 0, NULL), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_sandbox_clone(sb, &a), STRATA_E_NO_SNAPSHOT, "nor after a capture");
	cr_assert_eq(strata_sandbox_open_store(h, st, "c", &a), 0, "%s", strata_errmsg());
	cr_assert_eq(call_i(a, "counter_next", 0, 0, 0), 2);
	cr_assert_eq(call_i(a, "counter_next", 0, 0, 0), 3);
	/* Of the snapshot, not of what a did since; and it outlives a. */
	cr_assert_eq(strata_sandbox_clone(a, &b), 0, "%s", strata_errmsg());
	strata_sandbox_free(a);
	cr_assert_eq(call_i(b, "counter_next", 0, 0, 0), 2);
	cr_assert_eq(strata_sandbox_clone(b, &c), 0, "%s", strata_errmsg());
	cr_assert_eq(call_i(c, "counter_next", 0, 0, 0), 2);
	cr_assert_eq(strata_sandbox_restore(c), 0);
	cr_assert_eq(call_i(c, "counter_next", 0, 0, 0), 2);
	strata_sandbox_free(b);
	strata_sandbox_free(c);
	/* Of a directory: opened again with the same flags. */
	snprintf(dir, sizeof(dir), "%s/dir", tmp);
	export("c", dir);
	cr_assert_eq(strata_sandbox_open_dir(h, dir, STRATA_DIR_VERIFY, &a), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_sandbox_clone(a, &d), 0, "%s", strata_errmsg());
	cr_assert_eq(call_i(d, "counter_next", 0, 0, 0), 2);
	strata_sandbox_free(a);
	strata_sandbox_free(d);
	/* A pool's sandbox is the pool's: get another. */
	cr_assert_eq(strata_pool_open_store(h, st, "c", 1, &p), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_pool_get(p, 0, &a), 0);
	cr_assert_eq(strata_sandbox_clone(a, &b), STRATA_E_NO_SNAPSHOT);
	cr_assert(strstr(strata_errmsg(), "pool"), "%s", strata_errmsg());
	cr_assert_eq(strata_pool_put(p, a), 0);
	cr_assert_eq(strata_pool_free(p), 0);
	strata_sandbox_free(sb);
	strata_store_close(st);
	cr_assert_eq(strata_host_free(h), 0);
}

Test(api, a_tag_renamed_and_a_snapshot_deleted_with_its_tags)
{
	strata_host *h = host();
	strata_sandbox *sb = sandbox(h);
	strata_store *st = store("store");
	char id[STRATA_ID_LEN + 1], got[STRATA_ID_LEN + 1], other[STRATA_ID_LEN + 1];

	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 1);
	cr_assert_eq(strata_sandbox_capture(sb, st, "a", 0, id), 0, "%s", strata_errmsg());
	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 2);
	cr_assert_eq(strata_sandbox_capture(sb, st, "b", 0, other), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_store_tag(st, id, "c", 0), 0);
	/* Renamed at once; onto another snapshot's tag only with the flag. */
	cr_assert_eq(strata_store_rename_tag(st, "a", "b", 0), STRATA_E_EXISTS);
	cr_assert_eq(strata_store_resolve(st, "a", got), 0);
	cr_assert_eq(strata_store_rename_tag(st, "a", "a2", 0), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_store_resolve(st, "a", got), STRATA_E_NOT_FOUND);
	cr_assert_eq(strata_store_resolve(st, "a2", got), 0);
	cr_assert_str_eq(got, id);
	cr_assert_eq(strata_store_rename_tag(st, "nope", "x", 0), STRATA_E_NOT_FOUND);
	cr_assert_eq(strata_store_rename_tag(st, "a2", "bad/name", 0), STRATA_E_BAD_NAME);
	cr_assert_eq(strata_store_rename_tag(st, "a2", "x", 0x80), -EINVAL);
	/* Deleted by id: every tag naming it goes, the other snapshot stays. */
	cr_assert_eq(strata_store_delete(st, "a2"), STRATA_E_BAD_ID);
	cr_assert_eq(strata_store_delete(st, id), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_store_resolve(st, "a2", got), STRATA_E_NOT_FOUND);
	cr_assert_eq(strata_store_resolve(st, "c", got), STRATA_E_NOT_FOUND);
	cr_assert_eq(strata_store_resolve(st, "b", got), 0);
	cr_assert_eq(strata_store_delete(st, id), STRATA_E_NOT_FOUND);
	cr_assert(strstr(strata_errmsg(), id), "%s", strata_errmsg());
	strata_sandbox_free(sb);
	strata_store_close(st);
	strata_host_free(h);
}

Test(api, gc_counts_what_it_removed_and_kept)
{
	strata_host *h = host();
	strata_sandbox *sb = sandbox(h);
	strata_store *st = store("store");
	uint64_t v = 1, freed = 0;

	cr_assert_eq(strata_store_info(st, STRATA_STORE_INFO_GC_BLOBS_REMOVED, &v), 0);
	cr_assert_eq(v, 0, "no gc yet");
	cr_assert_eq(strata_store_info(st, 9999, &v), -EINVAL);
	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 1);
	cr_assert_eq(strata_sandbox_capture(sb, st, "keep", 0, NULL), 0, "%s", strata_errmsg());
	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 2);
	cr_assert_eq(strata_sandbox_capture(sb, st, "drop", 0, NULL), 0, "%s", strata_errmsg());
	strata_sandbox_free(sb);
	cr_assert_eq(strata_store_untag(st, "drop", STRATA_TAG_PRUNE), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_store_gc(st, 0, &freed), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_store_info(st, STRATA_STORE_INFO_GC_BLOBS_REMOVED, &v), 0);
	cr_assert_geq(v, 1, "the dropped snapshot's layer");
	cr_assert_eq(strata_store_info(st, STRATA_STORE_INFO_GC_BYTES_REMOVED, &v), 0);
	cr_assert_eq(v, freed);
	cr_assert_eq(strata_store_info(st, STRATA_STORE_INFO_GC_BLOBS_IN_USE, &v), 0);
	cr_assert_geq(v, 1, "the kept snapshot's layer");
	strata_store_close(st);
	strata_host_free(h);
}

/* sh -c cmd (printf-style), asserted to succeed. */
static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
	char cmd[16384];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

static uint64_t info(strata_store *st, int what)
{
	uint64_t v = UINT64_MAX;

	cr_assert_eq(strata_store_info(st, what, &v), 0, "info %d: %s", what, strata_errmsg());
	return v;
}

static int nsnapshots(strata_store *st)
{
	int n = 0;

	cr_assert_geq(strata_store_snapshots(st, count_snap, &n), 0, "%s", strata_errmsg());
	return n;
}

/* Hostile copies of a snapshot directory: what the shell command spoil
 * does to a copy, and the code refusing it (0: any). The first three keep
 * a manifest that reads. */
static const struct {
	const char *name, *spoil;
	int want;
} hostile[] = {
	{ "flipped", "f=$(ls layers/* | head -1) && printf X | dd of=$f bs=1 seek=100 conv=notrunc 2>/dev/null",
	  STRATA_E_CORRUPT },
	{ "short", "f=$(ls layers/* | head -1) && truncate -s 4096 $f", 0 },
	{ "nolayer", "rm -f layers/*", -ENOENT },
	{ "garbage", "echo '{\"format\": 99' > manifest.json", 0 },
	{ "linked", "mv layers real && ln -s real layers", 0 },
	{ "fifo", "rm manifest.json && mkfifo manifest.json", 0 },
	{ "renamed", "f=$(ls layers/* | head -1) && mv $f layers/00000000000000000000000000000000", 0 },
};

/* A hostile copy of good: refused, saying why, and the store unchanged;
 * strata_errdetail's words of the refusal go to refused_why. */
static char refused_why[1024];
static void import_refused(strata_store *st, const char *good, const char *name, const char *spoil, int want)
{
	char dir[4400];
	int before = nsnapshots(st);

	snprintf(dir, sizeof(dir), "%s/%s", tmp, name);
	sh("cp -r '%s' '%s' && cd '%s' && %s", good, dir, dir, spoil);
	int rc = strata_store_import(st, dir, "hostile", 0, NULL);
	snprintf(refused_why, sizeof(refused_why), "%s", strata_errdetail());
	cr_assert_lt(rc, 0, "%s: imported", name);
	if (want)
		cr_assert_eq(rc, want, "%s: %s", name, strata_errmsg());
	cr_assert(strstr(strata_errmsg(), dir), "%s: %s", name, strata_errmsg());
	cr_assert_eq(nsnapshots(st), before, "%s: a snapshot was committed", name);
	cr_assert_eq(strata_store_resolve(st, "hostile", (char[STRATA_ID_LEN + 1]){ 0 }), STRATA_E_NOT_FOUND);
	cr_assert_eq(info(st, STRATA_STORE_INFO_IMPORT_SNAPSHOTS), 0, "%s", name);
}

Test(api, import_checks_a_directory_and_counts_what_it_stored)
{
	strata_host *h = host();
	strata_sandbox *sb = sandbox(h);
	strata_store *st = store("store"), *to, *ro;
	char id[STRATA_ID_LEN + 1], got[STRATA_ID_LEN + 1], dir[4300], oci[4300], path[4300];

	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 1);
	cr_assert_eq(strata_sandbox_capture(sb, st, "snap", 0, id), 0, "%s", strata_errmsg());
	snprintf(dir, sizeof(dir), "%s/dir", tmp);
	export("snap", dir);
	snprintf(oci, sizeof(oci), "%s/oci", tmp);
	sh("'%s' --store '%s/store' export --oci '%s' snap >/dev/null 2>&1", getenv("STRATA_BIN"), tmp, oci);
	to = store("to");
	cr_assert_eq(info(to, STRATA_STORE_INFO_IMPORT_SNAPSHOTS), 0, "no import yet");
	/* Bad arguments change nothing. */
	cr_assert_eq(strata_store_import(to, NULL, NULL, 0, id), -EINVAL);
	cr_assert_eq(strata_store_import(to, dir, NULL, 0x80, id), -EINVAL);
	cr_assert_eq(strata_store_import(to, dir, "bad name", 0, id), STRATA_E_BAD_NAME);
	snprintf(path, sizeof(path), "%s/absent", tmp);
	cr_assert_eq(strata_store_import(to, path, NULL, 0, got), -ENOENT);
	cr_assert(strstr(strata_errmsg(), "absent"), "%s", strata_errmsg());
	cr_assert_eq(nsnapshots(to), 0);
	/* A directory: its snapshot with its id, every layer new. */
	cr_assert_eq(strata_store_import(to, dir, "t", 0, got), 0, "%s", strata_errmsg());
	cr_assert_str_eq(got, id);
	cr_assert_eq(strata_store_resolve(to, "t", got), 0);
	cr_assert_str_eq(got, id);
	cr_assert_eq(info(to, STRATA_STORE_INFO_IMPORT_OCI), 0);
	cr_assert_eq(info(to, STRATA_STORE_INFO_IMPORT_SNAPSHOTS), 1);
	uint64_t layers = info(to, STRATA_STORE_INFO_IMPORT_LAYERS);
	cr_assert_geq(layers, 1);
	cr_assert_eq(info(to, STRATA_STORE_INFO_IMPORT_BLOBS_ADDED), layers);
	cr_assert_eq(info(to, STRATA_STORE_INFO_IMPORT_BLOBS_PRESENT), 0);
	cr_assert_gt(info(to, STRATA_STORE_INFO_IMPORT_BYTES_ADDED), 0);
	cr_assert_eq(info(to, STRATA_STORE_INFO_IMPORT_EXISTED), 0);
	/* Again: it was there, nothing stored twice. */
	cr_assert_eq(strata_store_import(to, dir, NULL, 0, NULL), 0, "%s", strata_errmsg());
	cr_assert_eq(info(to, STRATA_STORE_INFO_IMPORT_EXISTED), 1);
	cr_assert_eq(info(to, STRATA_STORE_INFO_IMPORT_BLOBS_ADDED), 0);
	cr_assert_eq(info(to, STRATA_STORE_INFO_IMPORT_BLOBS_PRESENT), layers);
	cr_assert_eq(info(to, STRATA_STORE_INFO_IMPORT_LAYERS_HEALED), 0);
	/* A tag naming another snapshot moves only with STRATA_TAG_FORCE. */
	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 2);
	cr_assert_eq(strata_sandbox_capture(sb, to, "other", 0, NULL), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_store_import(to, dir, "other", 0, NULL), STRATA_E_EXISTS);
	cr_assert(strstr(strata_errmsg(), "other"), "%s", strata_errmsg());
	cr_assert_eq(strata_store_import(to, dir, "other", STRATA_TAG_FORCE, NULL), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_store_resolve(to, "other", got), 0);
	cr_assert_str_eq(got, id);
	/* A lost layer blob is healed from the directory. */
	strata_sandbox_free(sb);
	cr_assert_eq(strata_host_free(h), 0);
	sh("rm -f '%s/to/blobs/'*/'%s'* 2>/dev/null; ls '%s/dir/layers' | while read l; do "
	   "find '%s/to/blobs' -name \"$l*\" -delete; done", tmp, id, tmp, tmp);
	cr_assert_eq(strata_store_import(to, dir, NULL, 0, NULL), 0, "%s", strata_errmsg());
	cr_assert_eq(info(to, STRATA_STORE_INFO_IMPORT_LAYERS_HEALED), layers);
	cr_assert_eq(strata_store_verify(to, STRATA_VERIFY_HASH, NULL, NULL), 0, "%s", strata_errmsg());
	/* An OCI image layout. */
	strata_store *o2 = store("o2");
	cr_assert_eq(strata_store_import(o2, oci, "from-oci", 0, got), 0, "%s", strata_errmsg());
	cr_assert_str_eq(got, id);
	cr_assert_eq(info(o2, STRATA_STORE_INFO_IMPORT_OCI), 1);
	cr_assert_eq(info(o2, STRATA_STORE_INFO_IMPORT_SNAPSHOTS), 1);
	cr_assert_geq(info(o2, STRATA_STORE_INFO_IMPORT_BLOBS_ADDED), layers);
	strata_store_close(o2);
	/* Hostile directories: the checks hold through the API. */
	strata_store *h2 = store("hostile");
	for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
		import_refused(h2, dir, hostile[i].name, hostile[i].spoil, hostile[i].want);
		cr_assert_neq(refused_why[0], '\0', "%s: the cause is in strata_errdetail", hostile[i].name);
	}
	cr_assert_eq(nsnapshots(h2), 0);
	strata_store_close(h2);
	/* Read-only. */
	snprintf(path, sizeof(path), "%s/ro", tmp);
	strata_store_close(store("ro"));
	cr_assert_eq(strata_store_open(path, STRATA_STORE_RDONLY, &ro), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_store_import(ro, dir, NULL, 0, NULL), STRATA_E_READ_ONLY, "%s", strata_errmsg());
	strata_store_close(ro);
	strata_store_close(to);
	strata_store_close(st);
}

static int first_child(void *ctx, const char *id)
{
	snprintf(ctx, STRATA_ID_LEN + 1, "%s", id);
	return 7;
}

Test(api, a_snapshot_tells_its_figures_parent_and_children)
{
	strata_host *h = host();
	strata_sandbox *sb = sandbox(h);
	strata_store *st = store("store");
	char a[STRATA_ID_LEN + 1], b[STRATA_ID_LEN + 1], got[STRATA_ID_LEN + 1] = "", buf[64];
	uint64_t v = 12345;

	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 1);
	cr_assert_eq(strata_sandbox_capture(sb, st, "a", 0, a), 0, "%s", strata_errmsg());
	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 2);
	cr_assert_eq(strata_sandbox_capture(sb, st, "b", 0, b), 0, "%s", strata_errmsg());
	strata_sandbox_free(sb);
	cr_assert_eq(strata_store_snapshot_info(st, "a", STRATA_SNAPSHOT_MEMORY, &v), 0, "%s", strata_errmsg());
	cr_assert_gt(v, 0);
	cr_assert_eq(v % 4096, 0);
	uint64_t stored, unique, layers, created, has_parent;
	cr_assert_eq(strata_store_snapshot_info(st, "b", STRATA_SNAPSHOT_STORED, &stored), 0);
	cr_assert_eq(strata_store_snapshot_info(st, "b", STRATA_SNAPSHOT_UNIQUE, &unique), 0);
	cr_assert_gt(stored, 0);
	cr_assert_leq(unique, stored);
	cr_assert_eq(strata_store_snapshot_info(st, "b", STRATA_SNAPSHOT_LAYERS, &layers), 0);
	cr_assert_geq(layers, 2, "b lists a's layer and its own");
	cr_assert_eq(strata_store_snapshot_info(st, "b", STRATA_SNAPSHOT_CREATED, &created), 0);
	cr_assert_gt(created, 1000000000ull * 1600000000ull, "a capture time in ns");
	cr_assert_eq(strata_store_snapshot_info(st, "b", STRATA_SNAPSHOT_LAZY_LAYERS, &v), 0);
	cr_assert_eq(v, 0);
	/* b was made from a. */
	cr_assert_eq(strata_store_snapshot_info(st, "a", STRATA_SNAPSHOT_HAS_PARENT, &has_parent), 0);
	cr_assert_eq(has_parent, 0);
	cr_assert_eq(strata_store_parent(st, "a", got), STRATA_E_NOT_FOUND);
	cr_assert(strstr(strata_errmsg(), "no parent"), "%s", strata_errmsg());
	cr_assert_eq(strata_store_snapshot_info(st, "b", STRATA_SNAPSHOT_HAS_PARENT, &has_parent), 0);
	cr_assert_eq(has_parent, 1);
	cr_assert_eq(strata_store_parent(st, "b", got), 0, "%s", strata_errmsg());
	cr_assert_str_eq(got, a);
	int n = 0;
	cr_assert_eq(strata_store_children(st, "a", count_snap, &n), 1, "%s", strata_errmsg());
	cr_assert_eq(n, 1);
	cr_assert_eq(strata_store_children(st, "a", first_child, got), 7, "the callback's return stops the walk");
	cr_assert_str_eq(got, b);
	cr_assert_eq(strata_store_children(st, "b", count_snap, &n), 0);
	/* Bad input: *value untouched. */
	v = 12345;
	cr_assert_eq(strata_store_snapshot_info(st, "a", 0, &v), -EINVAL);
	cr_assert_eq(strata_store_snapshot_info(st, "a", 999, &v), -EINVAL);
	cr_assert(strstr(strata_errmsg(), "999"), "%s", strata_errmsg());
	cr_assert_eq(strata_store_snapshot_info(st, "nope", STRATA_SNAPSHOT_MEMORY, &v), STRATA_E_NOT_FOUND);
	cr_assert(strstr(strata_errmsg(), "nope"), "%s", strata_errmsg());
	cr_assert_eq(strata_store_snapshot_info(st, NULL, STRATA_SNAPSHOT_MEMORY, &v), -EINVAL);
	cr_assert_eq(v, 12345);
	cr_assert_eq(strata_store_parent(st, "nope", got), STRATA_E_NOT_FOUND);
	cr_assert_eq(strata_store_children(st, "nope", count_snap, &n), STRATA_E_NOT_FOUND);
	cr_assert_eq(strata_store_children(st, "a", NULL, NULL), -EINVAL);
	cr_assert_eq(strata_store_lazy_origin(st, "a", NULL, 0), -EINVAL);
	cr_assert_eq(strata_store_lazy_origin(st, "a", buf, sizeof(buf)), STRATA_E_NOT_FOUND);
	cr_assert(strstr(strata_errmsg(), "no lazy layer"), "%s", strata_errmsg());
	/* A parent removed: b still names it; resolving its id says it is gone. */
	cr_assert_eq(strata_store_delete(st, a), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_store_parent(st, "b", got), 0, "%s", strata_errmsg());
	cr_assert_str_eq(got, a);
	cr_assert_eq(strata_store_resolve(st, got, buf), STRATA_E_NOT_FOUND);
	strata_store_close(st);
	cr_assert_eq(strata_host_free(h), 0);
}

/* Snapshot a, then b made from it, in st (their ids into a and b); no
 * sandbox or host is left. */
static void a_then_b(strata_store *st, char a[STRATA_ID_LEN + 1], char b[STRATA_ID_LEN + 1])
{
	strata_host *h = host();
	strata_sandbox *sb = sandbox(h);

	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 1);
	cr_assert_eq(strata_sandbox_capture(sb, st, "a", 0, a), 0, "%s", strata_errmsg());
	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 2);
	cr_assert_eq(strata_sandbox_capture(sb, st, "b", 0, b), 0, "%s", strata_errmsg());
	strata_sandbox_free(sb);
	cr_assert_eq(strata_host_free(h), 0);
}

static void count_event(void *ctx, const struct strata_xfer_event *ev)
{
	cr_assert_geq(ev->size, sizeof(*ev));
	++*(int *)ctx;
}

Test(api, export_writes_a_directory_or_an_oci_layout_that_import_reads)
{
	strata_store *st = store("store"), *back;
	strata_registry *reg;
	char a[STRATA_ID_LEN + 1], b[STRATA_ID_LEN + 1], got[STRATA_ID_LEN + 1], dir[4300], oci[4300], path[4300];
	uint64_t v = 0;
	int events = 0;

	a_then_b(st, a, b);
	snprintf(dir, sizeof(dir), "%s/dir", tmp);
	snprintf(oci, sizeof(oci), "%s/oci", tmp);
	/* A snapshot directory. */
	cr_assert_eq(strata_store_export(st, "a", NULL), -EINVAL);
	cr_assert_eq(strata_store_export(st, "nope", dir), STRATA_E_NOT_FOUND);
	cr_assert(strstr(strata_errmsg(), "nope"), "%s", strata_errmsg());
	snprintf(path, sizeof(path), "%s/absent/dir", tmp);
	cr_assert_eq(strata_store_export(st, "a", path), -ENOENT);
	cr_assert(strstr(strata_errmsg(), path), "%s", strata_errmsg());
	cr_assert_eq(strata_store_export(st, "b", dir), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_store_export(st, "a", dir), -EEXIST);
	cr_assert(strstr(strata_errmsg(), "already exists"), "%s", strata_errmsg());
	back = store("back");
	cr_assert_eq(strata_store_import(back, dir, NULL, 0, got), 0, "%s", strata_errmsg());
	cr_assert_str_eq(got, b);
	strata_store_close(back);
	/* An OCI layout of one snapshot (and its parent), with progress. */
	cr_assert_eq(strata_registry_new(&reg), 0);
	cr_assert_eq(strata_registry_set_progress(reg, count_event, &events), 0);
	const char *refs[] = { "b", NULL };
	cr_assert_eq(strata_store_export_oci(st, reg, NULL, refs, 1), -EINVAL);
	cr_assert_eq(strata_store_export_oci(st, reg, oci, NULL, 1), -EINVAL);
	cr_assert_eq(strata_store_export_oci(st, reg, oci, refs + 1, 1), -EINVAL);
	const char *nope[] = { "nope" };
	cr_assert_eq(strata_store_export_oci(st, reg, oci, nope, 1), STRATA_E_NOT_FOUND, "%s", strata_errmsg());
	cr_assert_eq(access(oci, F_OK), -1, "a failed export leaves nothing");
	cr_assert_eq(strata_store_export_oci(st, reg, oci, refs, 1), 0, "%s", strata_errmsg());
	cr_assert_gt(events, 0);
	cr_assert_eq(strata_store_info(st, STRATA_STORE_INFO_XFER_SNAPSHOTS, &v), 0);
	cr_assert_eq(v, 2, "b and its parent a");
	cr_assert_eq(strata_store_info(st, STRATA_STORE_INFO_XFER_BLOBS_MOVED, &v), 0);
	cr_assert_gt(v, 0);
	cr_assert_eq(strata_store_export_oci(st, reg, oci, refs, 1), -EEXIST);
	back = store("back-oci");
	cr_assert_eq(strata_store_import(back, oci, NULL, 0, got), 0, "%s", strata_errmsg());
	cr_assert_str_eq(got, b);
	cr_assert_eq(strata_store_resolve(back, a, got), 0, "the parent came along: %s", strata_errmsg());
	strata_store_close(back);
	/* Every tagged one, whole configs, no settings. */
	snprintf(path, sizeof(path), "%s/oci-all", tmp);
	cr_assert_eq(strata_store_export_oci(st, NULL, path, NULL, 0), 0, "%s", strata_errmsg());
	snprintf(path, sizeof(path), "%s/oci-whole", tmp);
	cr_assert_eq(strata_registry_set_whole_configs(reg, 1), 0);
	cr_assert_eq(strata_store_export_oci(st, reg, path, refs, 1), 0, "%s", strata_errmsg());
	back = store("back-whole");
	cr_assert_eq(strata_store_import(back, path, "w", 0, got), 0, "%s", strata_errmsg());
	cr_assert_str_eq(got, b);
	strata_store_close(back);
	strata_registry_free(reg);
	strata_store_close(st);
}

struct seen {
	int errors, notes, checked, bad_layers, kinds;
	char last[STRATA_ID_LEN + 1];
};

static int on_check(void *ctx, const struct strata_problem *p)
{
	struct seen *s = ctx;

	cr_assert_geq(p->size, sizeof(*p));
	cr_assert_eq(strlen(p->id), STRATA_ID_LEN);
	cr_assert_not_null(p->detail);
	cr_assert(p->kind >= STRATA_PROBLEM_MISSING && p->kind <= STRATA_PROBLEM_CHUNK, "kind %d", p->kind);
	s->kinds |= 1 << p->kind;
	if (p->error)
		s->errors++;
	else
		s->notes++;
	return 0;
}

static int on_layer(void *ctx, const struct strata_layer_check *c)
{
	struct seen *s = ctx;

	cr_assert_geq(c->size, sizeof(*c));
	cr_assert_eq(c->kind, STRATA_LAYER_CHECKED);
	cr_assert_eq(c->lazy, 0);
	s->checked++;
	if (c->status < 0) {
		s->bad_layers++;
		snprintf(s->last, sizeof(s->last), "%s", c->layer);
	}
	return 0;
}

static int stop_layer(void *ctx, const struct strata_layer_check *c)
{
	(void)ctx;
	(void)c;
	return 9;
}

Test(api, checks_name_each_problem_of_a_store_a_snapshot_and_a_directory)
{
	strata_store *st = store("store");
	char a[STRATA_ID_LEN + 1], b[STRATA_ID_LEN + 1], dir[4300], bad[4300];
	uint64_t v = 0;
	uint32_t layers = 0;

	a_then_b(st, a, b);
	snprintf(dir, sizeof(dir), "%s/dir", tmp);
	export("b", dir);
	/* Sound: no error, the figures counted. */
	struct seen s = { 0 };
	cr_assert_eq(strata_store_check(st, STRATA_VERIFY_HASH, on_check, &s), 0, "%s", strata_errmsg());
	cr_assert_eq(s.errors, 0);
	cr_assert_eq(strata_store_info(st, STRATA_STORE_INFO_CHECK_SNAPSHOTS, &v), 0);
	cr_assert_eq(v, 2);
	cr_assert_eq(strata_store_info(st, STRATA_STORE_INFO_CHECK_BLOBS, &v), 0);
	cr_assert_geq(v, 2);
	cr_assert_eq(strata_store_info(st, STRATA_STORE_INFO_CHECK_BYTES_HASHED, &v), 0);
	cr_assert_gt(v, 0);
	cr_assert_eq(strata_store_info(st, STRATA_STORE_INFO_CHECK_ERRORS, &v), 0);
	cr_assert_eq(v, 0);
	cr_assert_eq(strata_store_check(st, 0x80, NULL, NULL), -EINVAL);
	cr_assert_eq(strata_store_check(NULL, 0, NULL, NULL), -EINVAL);
	cr_assert_eq(strata_store_verify_snapshot(st, "b", on_layer, &s), 2, "b's 2 layers: %s",
		     strata_errmsg());
	cr_assert_eq(s.checked, 2);
	cr_assert_eq(s.bad_layers, 0);
	cr_assert_eq(strata_store_verify_snapshot(st, "b", NULL, NULL), 2);
	cr_assert_eq(strata_store_verify_snapshot(st, "b", stop_layer, NULL), 9, "the callback's return stops it");
	cr_assert_eq(strata_store_verify_snapshot(st, "nope", on_layer, &s), STRATA_E_NOT_FOUND);
	cr_assert_eq(strata_store_verify_snapshot(NULL, "b", on_layer, &s), -EINVAL);
	cr_assert_eq(strata_dir_verify(dir, &layers), 2, "%s", strata_errmsg());
	cr_assert_eq(layers, 2);
	cr_assert_eq(strata_dir_verify(NULL, &layers), -EINVAL);
	snprintf(bad, sizeof(bad), "%s/absent", tmp);
	cr_assert_eq(strata_dir_verify(bad, NULL), -ENOENT);
	/* Hostile directories: each refused, the file and rule named. */
	for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
		snprintf(bad, sizeof(bad), "%s/bad-%s", tmp, hostile[i].name);
		sh("cp -r '%s' '%s' && cd '%s' && %s", dir, bad, bad, hostile[i].spoil);
		layers = 77;
		int rc = strata_dir_verify(bad, &layers);
		cr_assert_lt(rc, 0, "%s passed", hostile[i].name);
		if (hostile[i].want)
			cr_assert_eq(rc, hostile[i].want, "%s: %s", hostile[i].name, strata_errmsg());
		cr_assert(strstr(strata_errmsg(), bad), "%s: %s", hostile[i].name, strata_errmsg());
		cr_assert_neq(strata_errdetail()[0], '\0', "%s: the rule in strata_errdetail", hostile[i].name);
		if (i < 3)
			cr_assert_eq(layers, 2, "%s: the manifest was read", hostile[i].name);
	}
	/* A layer rotted in the store: the store check and the snapshot's both name it. */
	sh("f=$(find '%s/store/blobs' -type f -size +4096c | head -1) && printf X | dd of=$f bs=1 seek=100 "
	   "conv=notrunc 2>/dev/null", tmp);
	memset(&s, 0, sizeof(s));
	cr_assert_gt(strata_store_check(st, STRATA_VERIFY_HASH, on_check, &s), 0, "%s", strata_errmsg());
	cr_assert_gt(s.errors, 0);
	cr_assert(s.kinds & (1 << STRATA_PROBLEM_CORRUPT), "kinds 0x%x", s.kinds);
	cr_assert_eq(strata_store_info(st, STRATA_STORE_INFO_CHECK_ERRORS, &v), 0);
	cr_assert_eq(v, (uint64_t)s.errors);
	cr_assert_eq(strata_store_check(st, 0, NULL, NULL), 0, "without hashing, sizes agree");
	int bad_layers = 0;
	memset(&s, 0, sizeof(s));
	cr_assert_eq(strata_store_verify_snapshot(st, "a", on_layer, &s), 1);
	bad_layers += s.bad_layers;
	cr_assert_eq(strata_store_verify_snapshot(st, "b", on_layer, &s), 2);
	bad_layers += s.bad_layers;
	cr_assert_geq(bad_layers, 1);
	strata_store_close(st);
}

/* What a repair and the walks after it saw. */
struct repaired {
	int errors, acted, lost_found, lacking, exposed, fixed;
	uint32_t missing, nlayers;
	char lacking_id[STRATA_ID_LEN + 1];
	char path[256];
	uint32_t mode, want;
};

static int on_repair(void *ctx, const struct strata_problem *p)
{
	struct repaired *r = ctx;

	cr_assert_geq(p->size, offsetof(struct strata_problem, action) + sizeof(p->action),
		      "the library's problem has the action field");
	if (p->error)
		r->errors++;
	if (p->action) {
		r->acted++;
		if (strstr(p->action, "lost+found/"))
			r->lost_found++;
	}
	return 0;
}

static int on_lacking(void *ctx, const char *id, uint32_t missing, uint32_t nlayers)
{
	struct repaired *r = ctx;

	cr_assert_eq(strlen(id), STRATA_ID_LEN);
	r->lacking++;
	r->missing = missing;
	r->nlayers = nlayers;
	memcpy(r->lacking_id, id, STRATA_ID_LEN + 1);
	return 0;
}

static int on_exposed(void *ctx, const struct strata_exposed *e)
{
	struct repaired *r = ctx;

	cr_assert_geq(e->size, sizeof(*e));
	r->exposed++;
	r->fixed += e->fixed;
	snprintf(r->path, sizeof(r->path), "%s", e->path);
	r->mode = e->mode;
	r->want = e->want;
	return 0;
}

static int stop_lacking(void *ctx, const char *id, uint32_t missing, uint32_t nlayers)
{
	(void)ctx, (void)id, (void)missing, (void)nlayers;
	return 6;
}

static int stop_exposed(void *ctx, const struct strata_exposed *e)
{
	(void)ctx, (void)e;
	return 5;
}

static uint64_t check_info(strata_store *st, int what)
{
	uint64_t v = 77;

	cr_assert_eq(strata_store_info(st, what, &v), 0, "%s", strata_errmsg());
	return v;
}

Test(api, a_repair_says_what_it_did_then_lists_what_lacks_layers_and_who_can_read)
{
	strata_store *st = store("store"), *ro = NULL;
	char a[STRATA_ID_LEN + 1], b[STRATA_ID_LEN + 1], path[4300];
	struct repaired r = { 0 };

	a_then_b(st, a, b);
	snprintf(path, sizeof(path), "%s/store", tmp);
	cr_assert_eq(strata_store_open(path, STRATA_STORE_RDONLY, &ro), 0, "%s", strata_errmsg());
	/* A sound store: nothing to repair, nothing lacking, nothing exposed. */
	cr_assert_eq(strata_store_check(st, STRATA_VERIFY_HASH | STRATA_CHECK_REPAIR, on_repair, &r), 0, "%s",
		     strata_errmsg());
	cr_assert_eq(r.errors + r.acted, 0);
	cr_assert_eq(check_info(st, STRATA_STORE_INFO_CHECK_REPAIRED), 0);
	cr_assert_eq(check_info(st, STRATA_STORE_INFO_CHECK_REMAINING), 0);
	cr_assert_eq(strata_store_lacking(st, on_lacking, &r), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_store_exposed(st, 0, on_exposed, &r), 0, "%s", strata_errmsg());
	cr_assert_eq(r.lacking + r.exposed, 0);
	cr_assert_eq(check_info(st, STRATA_STORE_INFO_SHARED), 0);
	cr_assert_eq(check_info(st, STRATA_STORE_INFO_GROUP), 0);
	/* Bad arguments: refused, nothing done. */
	cr_assert_eq(strata_store_check(st, STRATA_CHECK_REPAIR | 0x80, on_repair, &r), -EINVAL);
	cr_assert_eq(strata_store_verify(st, STRATA_CHECK_REPAIR, NULL, NULL), -EINVAL, "verify changes nothing");
	cr_assert_eq(strata_store_lacking(NULL, on_lacking, &r), -EINVAL);
	cr_assert_eq(strata_store_exposed(NULL, 0, on_exposed, &r), -EINVAL);
	cr_assert_eq(strata_store_exposed(st, 0x80, on_exposed, &r), -EINVAL);
	cr_assert_eq(strata_store_info(st, STRATA_STORE_INFO_GROUP + 1, &(uint64_t){ 0 }), -EINVAL);

	/* A blob readable by others: found, then fixed; a read-only store refuses the fix. */
	sh("f=$(find '%s/store/blobs' -type f | head -1) && chmod 0644 $f", tmp);
	cr_assert_eq(strata_store_exposed(st, 0, on_exposed, &r), 1, "%s", strata_errmsg());
	cr_assert(strncmp(r.path, "blobs/", 6) == 0, "path %s", r.path);
	cr_assert_eq(r.mode, 0644);
	cr_assert_eq(r.want & 077, 0, "want %04o", r.want);
	cr_assert_eq(r.fixed, 0);
	cr_assert_eq(strata_store_exposed(st, STRATA_EXPOSED_DIRS, NULL, NULL), 0, "a file is not a directory");
	cr_assert_eq(strata_store_exposed(st, 0, stop_exposed, NULL), 5, "the callback's return stops it");
	cr_assert_eq(strata_store_exposed(ro, STRATA_EXPOSED_FIX, on_exposed, &r), STRATA_E_READ_ONLY);
	cr_assert_eq(strata_store_exposed(st, 0, NULL, NULL), 1, "the read-only store changed nothing");
	memset(&r, 0, sizeof(r));
	cr_assert_eq(strata_store_exposed(st, STRATA_EXPOSED_FIX, on_exposed, &r), 1, "%s", strata_errmsg());
	cr_assert_eq(r.fixed, 1);
	cr_assert_eq(strata_store_exposed(st, 0, NULL, NULL), 0, "fixed");

	/* A rotten layer: the check names it with no action; a read-only store
	 * refuses the repair; the repair moves it to lost+found, counts it,
	 * and the snapshots needing it now lack a layer. */
	sh("f=$(find '%s/store/blobs' -type f -size +4096c | head -1) && chmod u+w $f && printf X | dd of=$f bs=1 "
	   "seek=100 conv=notrunc 2>/dev/null", tmp);
	memset(&r, 0, sizeof(r));
	cr_assert_gt(strata_store_check(st, STRATA_VERIFY_HASH, on_repair, &r), 0);
	cr_assert_gt(r.errors, 0);
	cr_assert_eq(r.acted, 0, "no action without STRATA_CHECK_REPAIR");
	cr_assert_eq(strata_store_check(ro, STRATA_VERIFY_HASH | STRATA_CHECK_REPAIR, on_repair, &r),
		     STRATA_E_READ_ONLY);
	memset(&r, 0, sizeof(r));
	int left = strata_store_check(st, STRATA_VERIFY_HASH | STRATA_CHECK_REPAIR, on_repair, &r);
	cr_assert_gt(left, 0, "the layer is missing now: %s", strata_errmsg());
	cr_assert_geq(r.lost_found, 1, "the corrupt blob moved to lost+found");
	cr_assert_eq(check_info(st, STRATA_STORE_INFO_CHECK_REPAIRED), (uint64_t)r.acted);
	cr_assert_eq(check_info(st, STRATA_STORE_INFO_CHECK_REMAINING), (uint64_t)left);
	cr_assert_geq(check_info(st, STRATA_STORE_INFO_CHECK_ERRORS), (uint64_t)r.errors);
	int n = strata_store_lacking(st, on_lacking, &r);
	cr_assert_geq(n, 1, "%s", strata_errmsg());
	cr_assert_eq(r.lacking, n);
	cr_assert(r.missing >= 1 && r.missing <= r.nlayers, "%u of %u", r.missing, r.nlayers);
	cr_assert(!strcmp(r.lacking_id, a) || !strcmp(r.lacking_id, b), "%s", r.lacking_id);
	cr_assert_eq(strata_store_lacking(st, NULL, NULL), n);
	cr_assert_eq(strata_store_lacking(st, stop_lacking, NULL), 6, "the callback's return stops it");
	cr_assert_eq(strata_store_lacking(ro, NULL, NULL), n, "a read-only store lists them too");
	strata_store_close(ro);
	strata_store_close(st);
}

Test(api, a_store_is_created_with_its_options_once)
{
	struct strata_store_options o = { .size = sizeof(o) };
	char path[4300], other[4300], cmd[9000];
	strata_store *st;

	snprintf(path, sizeof(path), "%s/made", tmpdir());
	cr_assert_eq(strata_store_create(NULL, NULL), -EINVAL);
	o.sync = 7;
	cr_assert_eq(strata_store_create(path, &o), -EINVAL);
	cr_assert(strstr(strata_errmsg(), "STRATA_SYNC"), "%s", strata_errmsg());
	o = (struct strata_store_options){ .size = 4 };
	cr_assert_eq(strata_store_create(path, &o), -EINVAL, "a size too small for the fields");
	cr_assert_eq(access(path, F_OK), -1, "nothing made");
	/* No fsync, recorded in the store; again: nothing changes. */
	o = (struct strata_store_options){ .size = sizeof(o), .sync = STRATA_SYNC_NONE };
	cr_assert_eq(strata_store_create(path, &o), 0, "%s", strata_errmsg());
	snprintf(cmd, sizeof(cmd), "grep -qx 'sync none' '%s/format'", path);
	cr_assert_eq(system(cmd), 0, "the policy is recorded");
	cr_assert_eq(strata_store_create(path, NULL), 0, "%s", strata_errmsg());
	cr_assert_eq(system(cmd), 0, "an existing store keeps its policy");
	cr_assert_eq(strata_store_open(path, 0, &st), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_store_path(st)[0], '/');
	cr_assert(strstr(strata_store_path(st), "/made"), "%s", strata_store_path(st));
	strata_store_close(st);
	/* Shared with a group: a private store is not made shared. */
	o = (struct strata_store_options){ .size = sizeof(o), .shared = 1, .group = (uint32_t)getgid() };
	cr_assert_eq(strata_store_create(path, &o), -EEXIST, "%s", strata_errmsg());
	snprintf(other, sizeof(other), "%s/shared", tmp);
	cr_assert_eq(strata_store_create(other, &o), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_store_create(other, &o), 0, "the same options again: nothing changes");
	cr_assert_eq(strata_store_create(other, NULL), 0, "no options: it is left as it is");
	/* A directory with other things in it is no store. */
	snprintf(other, sizeof(other), "%s/busy", tmp);
	mkdir(other, 0700);
	snprintf(cmd, sizeof(cmd), "%s/file", other);
	close(open(cmd, O_CREAT | O_WRONLY, 0600));
	cr_assert_eq(strata_store_create(other, NULL), STRATA_E_NOT_STORE);
	snprintf(other, sizeof(other), "%s/no/parent", tmp);
	cr_assert_eq(strata_store_create(other, NULL), -ENOENT, "%s", strata_errmsg());
}

struct layers_seen {
	int n, lazy;
	uint64_t pages;
	char keys[256];
};

static int on_layer_info(void *ctx, const struct strata_layer *l)
{
	struct layers_seen *s = ctx;

	cr_assert_geq(l->size, sizeof(*l));
	cr_assert_eq(strlen(l->id), STRATA_ID_LEN);
	cr_assert_not_null(l->origin);
	s->n++;
	s->lazy += l->lazy;
	s->pages += l->pages;
	return 0;
}

static int on_label(void *ctx, const char *key, const char *value)
{
	struct layers_seen *s = ctx;
	size_t n = strlen(s->keys);

	snprintf(s->keys + n, sizeof(s->keys) - n, "%s=%s;", key, value);
	s->n++;
	return 0;
}

static int stop_label(void *ctx, const char *key, const char *value)
{
	(void)ctx;
	(void)key;
	(void)value;
	return 5;
}

Test(api, a_snapshot_is_described_by_its_manifest_layers_labels_and_working_set)
{
	strata_store *st = store("store");
	char a[STRATA_ID_LEN + 1], b[STRATA_ID_LEN + 1], got[STRATA_ID_LEN + 1], dir[4300], small[16];
	uint64_t v = 0, len = 0, pages = 0;

	a_then_b(st, a, b);
	/* The manifest, as stored: its length, then its bytes. */
	cr_assert_eq(strata_store_snapshot_info(st, "b", STRATA_SNAPSHOT_MANIFEST_BYTES, &len), 0, "%s", strata_errmsg());
	cr_assert_gt(len, 0);
	char *m = malloc(len + 1);
	cr_assert_eq(strata_store_manifest(st, "b", m, len), -ERANGE, "no room for the NUL");
	cr_assert_eq(strata_store_manifest(st, "b", small, sizeof(small)), -ERANGE);
	cr_assert_eq(strata_store_manifest(st, "b", m, len + 1), (int)len, "%s", strata_errmsg());
	cr_assert_eq(strlen(m), len);
	cr_assert_eq(m[0], '{');
	cr_assert(strstr(m, a), "b's manifest names its parent a: %s", m);
	free(m);
	cr_assert_eq(strata_store_manifest(st, "nope", small, sizeof(small)), STRATA_E_NOT_FOUND);
	cr_assert_eq(strata_store_manifest(st, "b", NULL, 0), -EINVAL);
	/* Its layers; its ranges use some of their pages (a child supersedes some of its parent's). */
	struct layers_seen ls = { 0 };
	cr_assert_eq(strata_store_layers(st, "b", on_layer_info, &ls), 2, "%s", strata_errmsg());
	cr_assert_eq(ls.n, 2);
	cr_assert_eq(ls.lazy, 0);
	cr_assert_eq(strata_store_snapshot_info(st, "b", STRATA_SNAPSHOT_PAGES_PRESENT, &pages), 0);
	cr_assert_leq(pages, ls.pages, "ranges hold %" PRIu64 " pages, layers %" PRIu64, pages, ls.pages);
	cr_assert_gt(pages, 0);
	cr_assert_eq(strata_store_snapshot_info(st, "b", STRATA_SNAPSHOT_RANGES, &v), 0);
	cr_assert_geq(v, 1);
	cr_assert_eq(strata_store_snapshot_info(st, "b", STRATA_SNAPSHOT_ABI, &v), 0);
	cr_assert_gt(v, 0, "a VMM snapshot has its guest's ABI version");
	cr_assert_eq(strata_store_layers(st, "b", NULL, NULL), -EINVAL);
	cr_assert_eq(strata_store_layers(st, "nope", on_layer_info, &ls), STRATA_E_NOT_FOUND);
	/* No labels, no working set. */
	memset(&ls, 0, sizeof(ls));
	cr_assert_eq(strata_store_labels(st, "b", on_label, &ls), 0);
	cr_assert_eq(strata_store_working_set(st, "b", got), STRATA_E_NOT_FOUND);
	cr_assert(strstr(strata_errmsg(), "no working-set record"), "%s", strata_errmsg());
	cr_assert_eq(strata_store_snapshot_info(st, "b", STRATA_SNAPSHOT_WS_PAGES, &v), STRATA_E_NOT_FOUND);
	cr_assert_eq(strata_store_working_set(st, "b", NULL), -EINVAL);
	/* Labels as a copy's manifest gives them, control bytes and all (the
	 * caller escapes them). */
	snprintf(dir, sizeof(dir), "%s/dir", tmp);
	export("b", dir);
	sh("cd '%s' && jq -c '.labels = {\"who\": \"a\\u001bred\", \"x\": \"1\"}' manifest.json > m && mv m manifest.json",
	   dir);
	cr_assert_eq(strata_store_import(st, dir, "labelled", 0, got), 0, "%s", strata_errmsg());
	cr_assert_eq(strata_store_labels(st, "labelled", on_label, &ls), 2, "%s", strata_errmsg());
	cr_assert_str_eq(ls.keys, "who=a\x1bred;x=1;");
	cr_assert_eq(strata_store_labels(st, "labelled", stop_label, NULL), 5, "the callback's return stops the walk");
	cr_assert_eq(strata_store_labels(st, "labelled", NULL, NULL), -EINVAL);
	/* A working set recorded: its record and figures. */
	strata_host *h = host();
	strata_sandbox *sb = NULL;
	char rec[STRATA_ID_LEN + 1];
	cr_assert_eq(strata_sandbox_open_store(h, st, "b", &sb), 0, "%s", strata_errmsg());
	cr_assert_eq(call_i(sb, "counter_next", 0, 0, 0), 3);
	int wrc = strata_sandbox_record_working_set(sb, st, rec);
	strata_sandbox_free(sb);
	cr_assert_eq(strata_host_free(h), 0);
	if (wrc == STRATA_E_NO_PAGEMAP) {
		strata_store_close(st);
		cr_skip_test("the kernel cannot say which pages were touched: %s", strata_errmsg());
	}
	cr_assert_eq(wrc, 0, "%s", strata_errmsg());
	cr_assert_eq(strata_store_working_set(st, "b", got), 0, "%s", strata_errmsg());
	cr_assert_str_eq(got, rec);
	cr_assert_eq(strata_store_snapshot_info(st, "b", STRATA_SNAPSHOT_WS_PAGES, &v), 0, "%s", strata_errmsg());
	cr_assert_gt(v, 0);
	cr_assert_eq(strata_store_snapshot_info(st, "b", STRATA_SNAPSHOT_WS_RUNS, &v), 0);
	cr_assert_gt(v, 0);
	cr_assert_eq(strata_store_snapshot_info(st, "b", STRATA_SNAPSHOT_WS_LAYERS, &v), 0);
	cr_assert_geq(v, 1);
	/* Its record's blob gone: unreadable, saying why. */
	sh("find '%s/store/blobs' -name '%s*' -delete", tmp, rec);
	int rc = strata_store_working_set(st, "b", got);
	cr_assert_lt(rc, 0);
	cr_assert_neq(rc, STRATA_E_NOT_FOUND, "a record that cannot be read is not 'none'");
	cr_assert(strstr(strata_errmsg(), "cannot be read"), "%s", strata_errmsg());
	strata_store_close(st);
}
