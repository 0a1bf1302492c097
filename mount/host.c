/* host.c: the host the command's sandboxes share, configured from the environment and the policy file. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

int cli_policy_path(char *buf, size_t len, bool *named)
{
	const char *env = getenv("STRATA_POLICY"), *x = getenv("XDG_CONFIG_HOME"), *h = getenv("HOME");
	int n;

	*named = env && *env;
	if (*named)
		n = snprintf(buf, len, "%s", env);
	else if (x && *x)
		n = snprintf(buf, len, "%s/strata/policy", x);
	else if (h && *h)
		n = snprintf(buf, len, "%s/.config/strata/policy", h);
	else
		return -ENOENT;
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int cli_policy_load(struct vmm_policy *p, char *why, size_t whylen)
{
	char path[4096];
	bool named;
	int rc;

	vmm_policy_defaults(p);
	if (cli_policy_path(path, sizeof(path), &named) < 0)
		return 0;
	/* The default location may hold nothing; a file named by
	 * $STRATA_POLICY must be there. */
	if (!named && access(path, F_OK) < 0 && errno == ENOENT)
		return 0;
	if ((rc = vmm_policy_read(path, p, why, whylen)) < 0 && named && rc == -ENOENT)
		snprintf(why, whylen, "STRATA_POLICY names %s, which does not exist", path);
	return rc;
}

/* The host's reset policy: the file cli_policy_path names if it exists (one
 * $STRATA_POLICY names must), else the defaults. Reports; an exit status. */
static int host_policy(const struct cli *cli)
{
	char path[4096];
	bool named;
	int rc;

	if (cli_policy_path(path, sizeof(path), &named) < 0)
		return CLI_OK;
	if (!named && access(path, F_OK) < 0 && errno == ENOENT)
		return CLI_OK;
	if ((rc = strata_host_set_policy(cli->host, path)) == 0)
		return CLI_OK;
	if (named && rc == -ENOENT)
		cli_err(cli, "reset policy: STRATA_POLICY names %s, which does not exist (run 'strata calibrate' to "
			"write a new one)", path);
	else
		cli_err(cli, "reset policy: %s (run 'strata calibrate' to write a new one)", strata_errmsg());
	return CLI_FAIL;
}

int cli_host_open(struct cli *cli)
{
	int status;

	if (cli->host)
		return CLI_OK;
	if (strata_host_new(&cli->host) < 0) {
		cli_err(cli, "%s", strata_errmsg());
		return CLI_FAIL;
	}
	const char *cache = getenv("STRATA_VM_CACHE");
	if (cache && *cache) {
		unsigned long long n;
		if (!cli_parse_u64(cache, &n) || n > VMM_HOST_SHELLS_MAX) {
			cli_err(cli, "STRATA_VM_CACHE wants a number of idle VMs from 0 to %u, not '%s'",
				VMM_HOST_SHELLS_MAX, cache);
			return CLI_USAGE;
		}
		strata_host_set_cache(cli->host, (unsigned)n, n < VMM_HOST_WARM_MAX ? (unsigned)n : VMM_HOST_WARM_MAX);
	}
	const char *debug = getenv("STRATA_SNAP_DEBUG");
	strata_host_set_debug(cli->host, debug && strcmp(debug, "1") == 0);
	if ((status = host_policy(cli)) != CLI_OK)
		return status;
	if (cli_host_fns_register(cli->host) < 0) {
		cli_err(cli, "cannot register host functions: %s", strata_errmsg());
		return CLI_FAIL;
	}
	/* auto fell back: say so once per command, and how to choose the
	 * process backend outright (which says nothing). On a terminal, or
	 * with -v: what a script captures of stderr stays as it was. */
	if (cli->backend == STRATA_BACKEND_AUTO && (cli->verbose || isatty(STDERR_FILENO)) &&
	    strata_host_backend(cli->host) == STRATA_BACKEND_PROCESS && strata_backend_check(STRATA_BACKEND_KVM) < 0)
		fprintf(stderr, "strata: note: sandboxes run on the process backend, KVM cannot be used here (%s); "
			"--backend process or STRATA_BACKEND=process chooses it without this note\n", strata_errmsg());
	return CLI_OK;
}

void cli_host_close(struct cli *cli)
{
	/* -EBUSY only if a command kept a sandbox to the end: the process
	 * exits anyway. */
	if (strata_host_free(cli->host) == 0)
		cli->host = NULL;
}

/*
 * A command built with AddressSanitizer tears its host down itself: its leak
 * check at exit must see every sandbox freed, and its stack bookkeeping
 * knows nothing of a helper's.
 */
#if defined(__SANITIZE_ADDRESS__)
#define CLI_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CLI_SANITIZED 1
#endif
#endif
#ifndef CLI_SANITIZED
#define CLI_SANITIZED 0
#endif

/* The helper's stack: it makes three system calls. */
static char leave_stack[16384] __attribute__((aligned(64)));

/*
 * The helper of cli_host_leave: it holds a copy of the command's descriptors
 * and shares its memory, so neither is torn down when the command exits; it
 * waits for the end of the pipe's write end, which only the command holds,
 * and exits, and the kernel tears down what it held: VMs and vCPUs, guest
 * memory, the process backend's children. Every signal is blocked (the
 * command blocked them around the clone); it touches nothing of the
 * command's memory but its own stack.
 */
static int leave_helper(void *arg)
{
	const int *fds = arg;
	char c;

	close(fds[1]);
	/* What the command's caller may wait on to see it end. */
	close(STDIN_FILENO);
	close(STDOUT_FILENO);
	close(STDERR_FILENO);
	while (read(fds[0], &c, 1) < 0 && errno == EINTR)
		;
	_exit(0);
}

/*
 * Whether an orphan of this process will be reaped: PID 1 of its PID
 * namespace (where an orphan goes when no child subreaper is above it) is
 * one of the init programs that reap every orphan. A container's first
 * process is often the application itself, which never waits for children
 * it did not start: each helper would stay a zombie holding a PID, and a
 * platform that runs the command again and again would run out of PIDs
 * (its cgroup's pids.max). There the command waits, as with
 * STRATA_EXIT_WAIT=1.
 */
static bool orphans_reaped(void)
{
	static const char *const inits[] = { "systemd", "init", "tini", "docker-init", "dumb-init",
					     "catatonit", "s6-svscan", "runit", "openrc-init", NULL };
	char comm[32] = "";
	FILE *f = fopen("/proc/1/comm", "re");

	if (!f)
		return false;
	if (!fgets(comm, sizeof(comm), f))
		comm[0] = '\0';
	fclose(f);
	comm[strcspn(comm, "\n")] = '\0';
	for (size_t i = 0; inits[i]; i++)
		if (strcmp(comm, inits[i]) == 0)
			return true;
	return false;
}

void cli_host_leave(struct cli *cli)
{
	static int fds[2];
	const char *wait = getenv("STRATA_EXIT_WAIT");
	sigset_t all, old;

	if (!cli->host)
		return;
	/* PID 1's exit ends every process of its namespace first: nothing to
	 * gain. STRATA_EXIT_WAIT=0 leaves the teardown to a helper whoever PID
	 * 1 is (the caller reaps orphans itself: a child subreaper). */
	bool fast = wait && strcmp(wait, "0") == 0 ? true : !(wait && strcmp(wait, "1") == 0) && orphans_reaped();
	if (CLI_SANITIZED || !fast || getpid() == 1) {
		cli_host_close(cli);
		return;
	}
	if (pipe2(fds, O_CLOEXEC) < 0) {
		cli_host_close(cli);
		return;
	}
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid_t pid = clone(leave_helper, leave_stack + sizeof(leave_stack), CLONE_VM | SIGCHLD, fds);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	close(fds[0]);
	if (pid < 0) {
		close(fds[1]);
		cli_host_close(cli);
	}
	/* else fds[1] stays open until the command exits: the helper's signal. */
}
