/* bench_start.c: whole processes timed from spawn to exit: the strata command's own start beside a libc-only program and lua5.4 -e. */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/bench/bench.h"

extern char **environ;

#define FLOOR_LIBC "start/floor/libc_process"
#define FLOOR_LUA "start/floor/lua5.4_e"

struct proc_case {
	char *argv[12];
	char bufs[3][4096];
};

/* argv run quietly (bench_run_quiet): 0 if it exited 0. */
static int spawn_wait(char *const argv[])
{
	int rc = bench_run_quiet(argv);

	return rc == 0 ? 0 : rc < 0 ? rc : -ECHILD;
}

static int proc_setup(void **state, const void *arg)
{
	/* the argument is the argv, checked once untimed: a command that fails is reported, not timed */
	int rc = spawn_wait((char *const *)arg);

	*state = (void *)arg;
	return rc;
}

static int proc_iter(void *state, struct bench_timer *t)
{
	return spawn_wait(state);
}

static void proc_teardown(void *state)
{
}

static void run_proc(struct bench *b, const char *name, const char *floor, char **argv)
{
	bench_run(b, &(struct bench_case){ .name = name, .floor = floor, .setup = proc_setup, .iter = proc_iter,
					   .teardown = proc_teardown, .arg = argv, .warmup = 3, .iters = 20 });
}

/* strata-bench-true, built beside strata-bench */
static int true_path(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);
	char *slash;

	if (n <= 0)
		return -errno;
	buf[n] = 0;
	if (!(slash = strrchr(buf, '/')) || (size_t)(slash - buf) + sizeof("/strata-bench-true") > len)
		return -ENAMETOOLONG;
	strcpy(slash, "/strata-bench-true");
	return access(buf, X_OK) == 0 ? 0 : -errno;
}

/* An exported snapshot of simpleguest after one counter_next, in dir/snap. */
static int make_snapdir(const char *dir)
{
	char store[4200], snap[4200];
	char *s = (char *)bench_strata_path(), *g = (char *)bench_guest_path();
	int rc;

	snprintf(store, sizeof(store), "%s/store", dir);
	snprintf(snap, sizeof(snap), "%s/snap", dir);
	char *init[] = { s, "--store", store, "init", NULL };
	char *run[] = { s, "--store", store, "run", g, "--call", "counter_next", "--snapshot", "s", NULL };
	char *exp[] = { s, "--store", store, "export", "s", snap, NULL };
	if ((rc = spawn_wait(init)) < 0 || (rc = spawn_wait(run)) < 0 || (rc = spawn_wait(exp)) < 0)
		return rc;
	return 0;
}

/*
 * start/: what a user waits for before a command does anything (issue 26 §7).
 * Each case is a whole process, spawn to exit, beside its floor in the same
 * run: `strata --version` beside a C program linked only against libc, and
 * `strata run DIR --call counter_next` from an exported snapshot (one restore
 * and one call) beside `lua5.4 -e` of a one-line script, where lua5.4 is
 * installed. Goals (goals[] in bench.c, docs/benchmarks.md): 1.5x and 3x.
 */
void bench_start(struct bench *b)
{
	static char t[4096], snap[4200], dir[4096];
	static char *true_argv[2], *lua_argv[4], *version_argv[3], *run_argv[2][8];
	const char *s = bench_strata_path();
	const char *run_floor = FLOOR_LIBC;
	int rc;

	if ((rc = true_path(t, sizeof(t))) < 0) {
		fprintf(stderr, "start: strata-bench-true: %s\n", strerror(-rc));
		return;
	}
	true_argv[0] = t;
	run_proc(b, FLOOR_LIBC, NULL, true_argv);
	version_argv[0] = (char *)s;
	version_argv[1] = "--version";
	run_proc(b, "start/strata_version", FLOOR_LIBC, version_argv);
	if (access("/usr/bin/lua5.4", X_OK) == 0) {
		lua_argv[0] = "/usr/bin/lua5.4";
		lua_argv[1] = "-e";
		lua_argv[2] = "local n = 0; n = n + 1";
		run_proc(b, FLOOR_LUA, FLOOR_LIBC, lua_argv);
		run_floor = FLOOR_LUA;
	} else {
		bench_note(b, "start/skipped_no_lua5.4", 1, "");
	}
	if (!bench_selected_under(b, "start/strata_run_call/"))
		return;
	if ((rc = bench_tmpdir("strata-bench-start", dir, sizeof(dir))) < 0 || (rc = make_snapdir(dir)) < 0) {
		fprintf(stderr, "start: an exported snapshot: %s\n", strerror(-rc));
		goto out;
	}
	snprintf(snap, sizeof(snap), "%s/snap", dir);
	static const char *const backends[] = { "kvm", "process" };
	for (int i = 0; i < 2; i++) {
		char name[64];

		if (i == 0 && access("/dev/kvm", R_OK | W_OK) != 0) {
			bench_note(b, "start/strata_run_call/kvm/skipped_no_kvm", 1, "");
			continue;
		}
		char **a = run_argv[i];
		a[0] = (char *)s, a[1] = "--backend", a[2] = (char *)backends[i], a[3] = "run", a[4] = snap;
		a[5] = "--call", a[6] = "counter_next", a[7] = NULL;
		snprintf(name, sizeof(name), "start/strata_run_call/%s", backends[i]);
		run_proc(b, name, run_floor, a);
	}
out:
	bench_rm_rf(dir);
}
