/* test_threads.c: sandboxes outlive the thread that made them; a host that ignores SIGCHLD or reaps with waitpid(-1) gets every report right; a host killed with -9 leaves no child. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "tests/kvm_check.h"

TestSuite(vmm_threads, .init = kvm_require, .timeout = 120);

static const char *hostile_path(void)
{
	static char buf[4096];
	const char *build = getenv("STRATA_BUILD");

	snprintf(buf, sizeof(buf), "%s/vmm/guest/hostileguest.elf", build ? build : ".");
	return buf;
}

static bool on_process(struct vmm_sandbox *sb)
{
	return vmm_sandbox_backend(sb) == VMM_BACKEND_PROCESS;
}

/* ---- made on a thread that has ended ---- */

struct maker {
	const char *elf;
	struct vmm_sandbox *sb;
	int rc;
	char why[VMM_MESSAGE_MAX];
};

/* Make a sandbox and return: the thread ends with it made. */
static void *make_and_end(void *arg)
{
	struct maker *m = arg;
	struct vmm_error err = { 0 };

	m->rc = vmm_sandbox_new(m->elf, NULL, &m->sb, &err);
	snprintf(m->why, sizeof(m->why), "%s", err.message);
	return NULL;
}

static struct vmm_sandbox *made_on_ended_thread(const char *elf)
{
	struct maker m = { .elf = elf };
	pthread_t t;

	cr_assert_eq(pthread_create(&t, NULL, make_and_end, &m), 0);
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert_eq(m.rc, 0, "making the sandbox on a thread: %d (%s): %s", m.rc, vmm_strerror(m.rc), m.why);
	return m.sb;
}

static int64_t counter_next(struct vmm_sandbox *sb, int *rc)
{
	struct vmm_result res = { 0 };

	*rc = vmm_sandbox_call(sb, "counter_next", NULL, 0, &res);
	return res.i64;
}

struct caller {
	struct vmm_sandbox *sb;
	int rc;
	int64_t got;
};

static void *call_once(void *arg)
{
	struct caller *c = arg;

	c->got = counter_next(c->sb, &c->rc);
	return NULL;
}

Test(vmm_threads, a_sandbox_made_on_a_thread_that_ended_answers_the_main_thread_and_another)
{
	struct vmm_sandbox *sb = made_on_ended_thread(guest_path());
	struct caller c = { .sb = sb };
	pthread_t t;
	int rc;

	/* The thread that made it is gone: the main thread calls it... */
	int64_t first = counter_next(sb, &rc);
	cr_assert_eq(rc, 0, "call from the main thread: %s: %s", vmm_strerror(rc), vmm_sandbox_error(sb)->message);
	cr_assert_eq(first, 1);
	/* ...and so does a thread that did not exist when it was made,
	 * seeing the state the main thread's call left. */
	cr_assert_eq(pthread_create(&t, NULL, call_once, &c), 0);
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert_eq(c.rc, 0, "call from another thread: %s: %s", vmm_strerror(c.rc), vmm_sandbox_error(sb)->message);
	cr_assert_eq(c.got, 2);
	cr_assert(!vmm_sandbox_poisoned(sb));
	cr_assert_eq(counter_next(sb, &rc), 3);
	cr_assert_eq(rc, 0);
	vmm_sandbox_free(sb);
}

/* ---- a host that reaps children its own way ---- */

struct spinner {
	struct vmm_sandbox *sb;
	atomic_int started;
	int rc;
};

static void *spin_call(void *arg)
{
	struct spinner *s = arg;
	struct vmm_result res = { 0 };

	atomic_store(&s->started, 1);
	s->rc = vmm_sandbox_call(s->sb, "spin", NULL, 0, &res);
	return NULL;
}

/* A guest crash names its real cause; a kill ends a running call; on the
 * process backend a child that ends itself is named with its exit code,
 * and a restore after it starts a new one. */
static void crash_kill_and_exit_reports(void)
{
	struct vmm_result res = { 0 };
	struct vmm_error err = { 0 };
	int rc;

	struct vmm_sandbox *sb = guest_new(NULL);
	cr_assert_eq(counter_next(sb, &rc), 1);
	cr_assert_eq(rc, 0, "%s", vmm_sandbox_error(sb)->message);
	rc = vmm_sandbox_call(sb, "null_write", NULL, 0, &res);
	cr_assert_eq(rc, VMM_E_GUEST_FAULT, "null_write: %d (%s): %s", rc, vmm_strerror(rc),
		     vmm_sandbox_error(sb)->message);
	cr_assert_eq(vmm_sandbox_error(sb)->vector, 14, "%s", vmm_sandbox_error(sb)->message);
	cr_assert_eq(vmm_sandbox_error(sb)->fault_addr, 0);
	vmm_sandbox_free(sb);

	struct spinner s = { .sb = guest_new(NULL) };
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, spin_call, &s), 0);
	while (!atomic_load(&s.started))
		;
	while (vmm_sandbox_kill(s.sb) == 0)
		;
	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert_eq(s.rc, VMM_E_CANCELLED, "killed call: %d (%s): %s", s.rc, vmm_strerror(s.rc),
		     vmm_sandbox_error(s.sb)->message);
	vmm_sandbox_free(s.sb);

	sb = NULL;
	rc = vmm_sandbox_new(hostile_path(), NULL, &sb, &err);
	cr_assert_eq(rc, 0, "hostile guest: %s", err.message);
	if (on_process(sb)) {
		rc = vmm_sandbox_call(sb, "exit_77", NULL, 0, &res);
		const char *msg = vmm_sandbox_error(sb)->message;
		cr_assert_lt(rc, 0);
		cr_assert(strstr(msg, "exited with code 77"), "the child's end is misreported: %s", msg);
	}
	vmm_sandbox_free(sb);
}

Test(vmm_threads, a_host_that_ignores_sigchld_still_gets_every_report)
{
	cr_assert_neq(signal(SIGCHLD, SIG_IGN), SIG_ERR);
	for (int round = 0; round < 3; round++)
		crash_kill_and_exit_reports();
	/* Made on a thread that ended, too. */
	struct vmm_sandbox *sb = made_on_ended_thread(guest_path());
	int rc;
	cr_assert_eq(counter_next(sb, &rc), 1);
	cr_assert_eq(rc, 0, "%s", vmm_sandbox_error(sb)->message);
	vmm_sandbox_free(sb);
}

/* What a server's reaper does: waitpid(-1) for any child, forever. */
static atomic_int reaped;

static void *reaper(void *arg)
{
	(void)arg;
	for (;;) {
		int st;
		pid_t pid = waitpid(-1, &st, 0);
		if (pid > 0)
			atomic_fetch_add(&reaped, 1);
		else if (errno == ECHILD)
			usleep(1000);  /* none to wait for: look again (waitpid is a cancellation point) */
	}
	return NULL;
}

Test(vmm_threads, a_host_thread_in_waitpid_any_leaves_every_report_right)
{
	pthread_t t;

	cr_assert_eq(pthread_create(&t, NULL, reaper, NULL), 0);
	for (int round = 0; round < 3; round++)
		crash_kill_and_exit_reports();
	struct vmm_sandbox *sb = made_on_ended_thread(guest_path());
	int rc;
	cr_assert_eq(counter_next(sb, &rc), 1);
	cr_assert_eq(rc, 0, "%s", vmm_sandbox_error(sb)->message);
	vmm_sandbox_free(sb);
	cr_assert_eq(pthread_cancel(t), 0);
	cr_assert_eq(pthread_join(t, NULL), 0);
	/* It may have reaped children of the backend's (their reports above
	 * are right all the same); say how many. */
	cr_log_info("the host's waitpid(-1) reaped %d of the backend's children", atomic_load(&reaped));
}

/* ---- a host killed with -9 ---- */

/* The host: two sandboxes (one made on a thread that ended), each called
 * from the main thread; then it says "ready" with its children's pids and
 * waits to be killed. Any failure is written to the pipe instead. */
static void host_main(int out)
{
	struct vmm_sandbox *a = NULL, *b = NULL;
	struct maker m = { .elf = guest_path() };
	struct vmm_error err = { 0 };
	char line[512];
	pthread_t t;
	int rc = 0;

	if (vmm_sandbox_new(guest_path(), NULL, &a, &err) < 0) {
		dprintf(out, "fail making a sandbox: %s\n", err.message);
		_exit(1);
	}
	if (pthread_create(&t, NULL, make_and_end, &m) != 0 || pthread_join(t, NULL) != 0 || m.rc < 0) {
		dprintf(out, "fail making a sandbox on a thread: %s\n", m.why);
		_exit(1);
	}
	b = m.sb;
	if (counter_next(a, &rc) != 1 || rc < 0 || counter_next(b, &rc) != 1 || rc < 0) {
		dprintf(out, "fail calling: %s / %s\n", vmm_sandbox_error(a)->message, vmm_sandbox_error(b)->message);
		_exit(1);
	}
	/* Its children, as the kernel lists them per thread. */
	int n = snprintf(line, sizeof(line), "ready %d", on_process(a) ? 1 : 0);
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	while (d && (de = readdir(d))) {
		char path[300], buf[256];
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/children", de->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		size_t got = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[got] = 0;
		for (char *p = strtok(buf, " \n"); p && n < (int)sizeof(line) - 16; p = strtok(NULL, " \n"))
			n += snprintf(line + n, sizeof(line) - (size_t)n, " %s", p);
	}
	if (d)
		closedir(d);
	dprintf(out, "%s\n", line);
	for (;;)
		pause();
}

Test(vmm_threads, a_host_killed_with_sigkill_leaves_no_child_behind)
{
	int fds[2];
	char buf[512] = "";

	char path[64];
	snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)gettid());
	if (access(path, R_OK) != 0)
		cr_skip_test("the kernel lists no children per thread (%s: %s): the host could not name its own", path,
			     strerror(errno));
	/* Orphans come to this process, which can then wait for them. */
	cr_assert_eq(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
	cr_assert_eq(pipe(fds), 0);
	pid_t host = fork();
	cr_assert_geq(host, 0);
	if (host == 0) {
		close(fds[0]);
		host_main(fds[1]);
	}
	close(fds[1]);
	FILE *f = fdopen(fds[0], "r");
	bool got = f && fgets(buf, sizeof(buf), f);
	if (f)
		fclose(f);
	kill(host, SIGKILL);
	int st;
	cr_assert_eq(waitpid(host, &st, 0), host);
	cr_assert(got && strncmp(buf, "ready ", 6) == 0, "the host did not get ready: %s", buf);
	/* Its children: each must end (killed), not stay behind stopped. */
	pid_t kids[16];
	int nkids = 0, process = 0, off = 0, k;
	sscanf(buf + 6, "%d%n", &process, &off);
	for (const char *p = buf + 6 + off; nkids < 16 && sscanf(p, "%d%n", &kids[nkids], &k) == 1; p += k)
		nkids++;
	if (process)
		cr_assert_geq(nkids, 2, "the process backend's host listed %d children: %s", nkids, buf);
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < nkids; i++) {
		siginfo_t si;
		for (;;) {
			memset(&si, 0, sizeof(si));
			int rc = waitid(P_PID, (id_t)kids[i], &si, WEXITED | WNOHANG | __WALL);
			if (rc == 0 && si.si_pid == kids[i])
				break;
			struct timespec now;
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (rc < 0 || now.tv_sec - t0.tv_sec > 10) {
				for (int j = i; j < nkids; j++)
					kill(kids[j], SIGKILL);
				cr_assert_fail("child %d of the killed host %s", (int)kids[i],
					       rc < 0 ? "was not ours to wait for" : "is still there after 10 s");
			}
			usleep(2000);
		}
		cr_assert_eq(si.si_code, CLD_KILLED, "child %d ended with code %d status %d", (int)kids[i], si.si_code,
			     si.si_status);
		cr_assert_eq(si.si_status, SIGKILL);
	}
}
