/* proc.c: the process backend: guest code in a child process behind a seccomp filter, exits handed over in shared memory. */
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/close_range.h>
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vmm/proc/proc_abi.h"
#include "store/sys.h"
#include "vmm/snap_int.h"

/*
 * How it works (docs/vmm.md, "The process backend"):
 * - Guest memory is a memfd mapped MAP_SHARED twice: at sb->mem in the host
 *   and at the guest addresses themselves in the child, with the user-mode
 *   protections the guest's page tables give (so the same ELF runs
 *   unchanged, and the host reads and writes guest memory directly).
 * - The child is a small program of its own (proc_child.c, proc_stub.S),
 *   started from a memfd: it holds nothing of the host. One thread per
 *   process starts every child (spawner()), so a child dies with the
 *   process (PR_SET_PDEATHSIG) and not with the thread that made its
 *   sandbox. The host signals and waits for it through its pidfd: a host
 *   that reaps it first (waitpid(-1), SIGCHLD ignored) can neither make a
 *   signal reach another process nor hide how it ended (the pidfd keeps
 *   its exit status, child_end_status()).
 *   Every guest exit is a signal (a store to the unmapped
 *   hypercall page, a CPU exception, a system call refused by the seccomp
 *   filter, a kick) taken on the stub's signal stack: the stub copies the
 *   registers to the control page and stops itself (SIGSTOP).
 *   The host, waiting in waitid(WSTOPPED), works only on a stopped child;
 *   it answers by writing registers back and resuming it (SIGCONT), and
 *   the stub returns from the signal into the guest. No ptrace stop is
 *   involved, so any host thread can drive any sandbox.
 * - The seccomp filter allows system calls only from the stub's two
 *   `syscall` instructions (its stop, and `sys` for the rest), and from
 *   there only the few the stub needs, with the arguments it passes: none
 *   maps, unmaps or protects memory (the protections are applied before
 *   the filter, from the control page). What follows the stop trusts no
 *   register, so a guest that stops itself there resumes as the host says
 *   (resume()).
 * - Besides guest memory the child can write only the control pages and
 *   its signal stack, both in the memfd past guest memory: a restore
 *   rewrites both, and the stub loads what a signal frame does not hold
 *   (fs base the thread block's, gs base 0). docs/security.md, "process backend".
 */

/* ucontext gregs indices (sys/ucontext.h REG_*). */
enum { G_R8, G_R9, G_R10, G_R11, G_R12, G_R13, G_R14, G_R15, G_RDI, G_RSI, G_RBP, G_RBX, G_RDX, G_RAX, G_RCX,
       G_RSP, G_RIP, G_EFL, G_CSGSFS, G_ERR, G_TRAPNO, G_OLDMASK, G_CR2 };
/* vmm_vcpu_state.gpr order: rax rbx rcx rdx rsi rdi rsp rbp r8..r15. */
static const unsigned gpr_to_greg[16] = { G_RAX, G_RBX, G_RCX, G_RDX, G_RSI, G_RDI, G_RSP, G_RBP,
					  G_R8, G_R9, G_R10, G_R11, G_R12, G_R13, G_R14, G_R15 };
/* x86 register numbers (ModRM reg field) to gregs indices. */
static const unsigned x86reg_to_greg[16] = { G_RAX, G_RCX, G_RDX, G_RBX, G_RSP, G_RBP, G_RSI, G_RDI,
					     G_R8, G_R9, G_R10, G_R11, G_R12, G_R13, G_R14, G_R15 };

/* RFLAGS bits a guest can own (status flags, TF, DF, AC); the rest are fixed. */
#define RFLAGS_GUEST 0x40dd5ull
#define RFLAGS_BASE 0x3002ull  /* bit 1 and IOPL 3, as vmm_x86_initial_state sets */

/* A kicked child must report within this long, else it is killed. */
#define HALT_WAIT_NS (1000ull * 1000 * 1000)
/* The child's first report (it is ready) must come within this long. */
#define SPAWN_WAIT_NS (5000ull * 1000 * 1000)

struct vmm_proc {
	pid_t pid;
	int pidfd;         /* the child's, from its clone (-1: none, or reaped) */
	int memfd;
	uint8_t *ctl;      /* host mapping of the control pages, then the signal stack (PROC_SHARED_SIZE) */
	uint8_t *alt;      /* = ctl + PROC_CTL_SIZE: the signal stack */
	bool running;      /* the guest was resumed and has not reported */
	bool dead;
	int end_signal;    /* what ended the child: wait status (exit code << 8, or signal | 0x80 if it dumped) */
	/* The signal stack as the first report left it, before any guest code
	 * ran: a restore puts it back. The stub is stopped in the same place at
	 * every report (SS_AUTODISARM: the frame is always at the stack's top),
	 * so its live part, [tmpl_off, PROC_ALT_SIZE), is this image (tmpl
	 * holds that part only: TMPL(p, off) is the byte at offset off). The
	 * pages below it are never touched unless the guest writes there, so
	 * the memfd holds none of them (pages_zero). */
	uint8_t *tmpl;
	uint32_t tmpl_off; /* where the stub's stack begins (the return address its calls push, below the frame) */
	uint64_t uc;       /* the frame's ucontext (PROC_ALT_LO + ...): every report has it */
	uint32_t fp_off, xsize; /* the frame's XSAVE image: offset in the stack, size */
	uint32_t fsgs;     /* FSGS_HAVE if the child may write fs/gs base */
	uint64_t host_pid; /* the stub's parent as it saw it */
	int maps;          /* /proc/PID/maps, taken before the child became non-dumpable; -1 none */
	char *maps_base;   /* what it read once the child was locked down (NULL: unknown) */
	uint64_t cr2;      /* of the last page fault */
	/* Written pages (wp.c): the host's mapping and the child's are
	 * tracked; `written` gathers what scans found until a reset. Without
	 * tracking (older kernels) every page with data may differ (all). */
	int uffd;          /* the host mapping's tracking; -1 none */
	int uffd_child;    /* the child's (its fd 4, taken with pidfd_getfd); -1 none */
	int pm_self, pm_child; /* /proc/self/pagemap, /proc/PID/pagemap */
	bool tracked;      /* both mappings are tracked */
	bool all;          /* every page with data may differ from the snapshot */
	uint64_t *written; /* bitmap of guest pages */
	uint64_t *known;   /* bitmap: pages of the memfd that held data and are protected */
	struct vmm_runs fresh; /* pages found with data since: protect at the next reset */
	/* The memfd's st_blocks when `known` last covered all its data (-1:
	 * unknown). Pages get data only by allocation, which grows it, and
	 * lose it only by a punched hole, which resets this to -1: while it is
	 * unchanged no page has got data, and data_protect need not walk the
	 * data extents (two lseeks each, every reset). */
	blkcnt_t data_blocks;
	uint64_t pages;
	/* Shared runs (share_setup): pages of the snapshot the guest cannot
	 * write (its page tables give no write, or nothing below the boot
	 * info), mapped read-only from the snapshot's layer file in the host's
	 * mapping and the child's instead of copied into the memfd (a hole
	 * there): one copy in the page cache for every sandbox of the
	 * snapshot, as on KVM. Sorted by guest page. */
	struct sh_run {
		uint64_t gpage, npages, lpage;
		unsigned prot;  /* the child's PROT_*; 0: not mapped in the child (below the boot info) */
	} *sh;
	size_t nsh;
	int shfd;          /* the layer file they come from (a duplicate of the snapshot's descriptor); -1 none */
	uint64_t *shared;  /* bitmap of the shared runs' pages; NULL: none */
};

/* The sandbox's process-backend state (its backend-private pointer). */
static inline struct vmm_proc *proc_of(const struct vmm_sandbox *sb)
{
	return sb->priv;
}

/* The first report's signal stack byte at offset off (>= tmpl_off). */
#define TMPL(p, off) ((p)->tmpl + ((off) - (p)->tmpl_off))

static _Atomic uint32_t *ctl_state(struct vmm_proc *p)
{
	return (_Atomic uint32_t *)(void *)(p->ctl + CTL_STATE);
}

static uint64_t *ctl_gregs(struct vmm_proc *p)
{
	return (uint64_t *)(void *)(p->ctl + CTL_GREGS);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The child is gone (reaped, or not ours to wait for any more). */
static void child_gone(struct vmm_proc *p)
{
	p->dead = true;
	p->running = false;
	p->pid = -1;  /* reaped: the number may name another process soon */
	if (p->pidfd >= 0)
		st_sys_close(p->pidfd);
	p->pidfd = -1;
}

/*
 * How a child that is gone ended when the host reaped it before us (a
 * waitpid(-1) of its own, or SIGCHLD set to SIG_IGN): its pidfd keeps the
 * wait status (PIDFD_GET_INFO with PIDFD_INFO_EXIT, Linux 6.15). -1 where
 * the kernel cannot say.
 */
#define PIDFD_INFO_EXIT_ (1ull << 3)
struct pidfd_info_ {  /* <linux/pidfd.h>'s struct pidfd_info, its first version (64 bytes) */
	uint64_t mask;
	uint64_t cgroupid;
	uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
	int32_t exit_code;
};
#define PIDFD_GET_INFO_ _IOWR(0xFF, 11, struct pidfd_info_)

static int child_end_status(const struct vmm_proc *p)
{
	struct pidfd_info_ info = { .mask = PIDFD_INFO_EXIT_ };

	if (p->pidfd < 0 || ioctl(p->pidfd, PIDFD_GET_INFO_, &info) < 0 || !(info.mask & PIDFD_INFO_EXIT_))
		return -1;
	return info.exit_code;
}

/* Signal the child through its pidfd: if the host reaped it, its number
 * may name another process by now. Async-signal-safe. */
static void child_signal(const struct vmm_proc *p, int sig)
{
	if (p->pidfd >= 0)
		syscall(SYS_pidfd_send_signal, p->pidfd, sig, NULL, 0);
	else
		kill(p->pid, sig);
}

/* Record how the child ended (si from waitid). */
static void child_ended(struct vmm_proc *p, const siginfo_t *si)
{
	p->end_signal = si->si_code == CLD_EXITED ? (si->si_status & 0xff) << 8
		        : (si->si_status & 0x7f) | (si->si_code == CLD_DUMPED ? 0x80 : 0);
	child_gone(p);
}

/* waitid for the child, through its pidfd. */
static int child_wait(struct vmm_proc *p, siginfo_t *si, int flags)
{
	return p->pidfd >= 0 ? waitid(P_PIDFD, (id_t)p->pidfd, si, flags | __WALL)
			     : waitid(P_PID, (id_t)p->pid, si, flags | __WALL);
}

/*
 * Resume the stopped child. Where the stub goes on from its stop depends
 * on no register but on the control page's words, written here before
 * every SIGCONT: its pids, the stack it resumes on and the frame it
 * returns through (the first report's, at the signal stack's top). A
 * guest that stopped itself at the stub's stop site resumes in the stub
 * too, and returns into what the host chose (proc_stub.S).
 */
static void resume(struct vmm_proc *p)
{
	if (p->uc) {
		uint64_t pid = (uint64_t)p->pid, sp = p->uc - 8;
		memcpy(p->ctl + CTL_HOSTPID, &p->host_pid, 8);
		memcpy(p->ctl + CTL_PID, &pid, 8);
		memcpy(p->ctl + CTL_UC, &p->uc, 8);
		memcpy(p->ctl + CTL_SP, &sp, 8);
	}
	child_signal(p, SIGCONT);
}

/*
 * Wait until the child has stopped itself to report (state HOST). The host
 * reads and writes guest memory only while the child is stopped: nothing
 * of the guest can run meanwhile, whatever it wrote in the control page.
 * 1: stopped and reporting; 0: a signal interrupted the wait (a kick, a
 * timer), or with nohang nothing yet; <0: the child is gone.
 */
static int wait_stop(struct vmm_proc *p, bool nohang)
{
	for (;;) {
		siginfo_t si;
		memset(&si, 0, sizeof(si));
		if (child_wait(p, &si, WSTOPPED | WEXITED | (nohang ? WNOHANG : 0)) < 0) {
			if (errno == EINTR)
				return 0;
			int rc = -errno;
			if (rc == -ECHILD) {
				/* Reaped by the host: how it ended is the pidfd's to say. */
				p->end_signal = child_end_status(p);
				rc = -ESRCH;
			}
			child_gone(p);
			return rc;
		}
		if (si.si_pid == 0)
			return 0;  /* WNOHANG: still running */
		if (si.si_code == CLD_STOPPED || si.si_code == CLD_TRAPPED) {
			if (atomic_load_explicit(ctl_state(p), memory_order_acquire) == STATE_HOST)
				return 1;
			resume(p);  /* stopped by someone else: nothing to report */
			continue;
		}
		if (si.si_code == CLD_CONTINUED)
			continue;
		child_ended(p, &si);
		return -ESRCH;
	}
}

static void proc_kill(struct vmm_proc *p)
{
	if (p->pid <= 0)
		return;
	siginfo_t si;

	child_signal(p, SIGKILL);
	while (child_wait(p, &si, WEXITED) < 0 && errno == EINTR)
		;
	child_gone(p);
}

/* Tell the stopped child what to do next (state `to`) and resume it. */
static void hand_over(struct vmm_proc *p, uint32_t to)
{
	atomic_store_explicit(ctl_state(p), to, memory_order_release);
	resume(p);
}

/* Wait for a report at most total_ns (polling: waitid has no timeout); 1, 0 or <0.
 * The naps start at 20 us and double up to 200 us: a report comes within
 * a millisecond or so (a new child's start: exec of a small static
 * program), and a fixed 200 us nap overshot it by 100 us on average, on
 * the path of every spawn, a process's first sandbox's included. */
static int wait_stop_for(struct vmm_proc *p, uint64_t total_ns)
{
	uint64_t end = now_ns() + total_ns;
	long nap = 20000;
	int rc;

	while ((rc = wait_stop(p, true)) == 0) {
		if (now_ns() >= end)
			return 0;
		struct timespec ts = { .tv_nsec = nap };
		nanosleep(&ts, NULL);
		nap = nap < 100000 ? nap * 2 : 200000;
	}
	return rc;
}

/* ---- the child program (proc_child.c, embedded by meson) ---- */

extern const unsigned char vmm_proc_child_elf[];
extern const size_t vmm_proc_child_elf_len;

static int child_fd = -1;  /* guarded by child_lock; set once, then only read */
static int child_cwd = -1; /* guarded by child_lock: a directory removed once opened; -1: "/" */
static pthread_mutex_t child_lock = PTHREAD_MUTEX_INITIALIZER;

/* The child's working directory: one that no longer exists (made, opened
 * and removed at once), so nothing can ever be created in it, a core file
 * included. Made in /dev/shm where that is a directory that can be
 * written: tmpfs makes and removes one in microseconds, where /tmp on
 * ext4 took 0.15-0.5 ms of a process's first process-backend sandbox (its
 * search for a free inode passes over every recently deleted one, and
 * every process's first sandbox leaves one). Else /tmp; without either the
 * child runs in / (it cannot create files anyway: no system call to do
 * so, no core dump). */
static int cwd_make(void)
{
	static const char *const places[] = { "/dev/shm/strata-proc-cwd-XXXXXX", "/tmp/strata-proc-cwd-XXXXXX" };
	int rc = -ENOENT;

	for (size_t i = 0; i < sizeof(places) / sizeof(places[0]); i++) {
		char path[sizeof("/dev/shm/strata-proc-cwd-XXXXXX")];
		snprintf(path, sizeof(path), "%s", places[i]);
		/* A fresh name (mkdtemp fails rather than take a directory that
		 * exists: another user's, made in advance, would be writable). */
		if (!mkdtemp(path)) {
			rc = -errno;
			continue;
		}
		int fd = st_sys_openat(AT_FDCWD, path, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0);
		st_sys_unlinkat(AT_FDCWD, path, AT_REMOVEDIR);
		if (fd >= 0)
			return fd;
		rc = fd;
	}
	return rc;
}

/* The child program as a sealed memfd, written once per process; a failed
 * load (no memory, no descriptors) is tried again by the next spawn. */
static int child_load(void)
{
	int fd, rc = 0;

	pthread_mutex_lock(&child_lock);
	if (child_fd >= 0)
		goto out_unlock;
	if ((fd = st_sys_memfd_create("strata-proc-child", MFD_ALLOW_SEALING)) < 0) {
		rc = fd;
		goto out_unlock;
	}
	rc = st_sys_write_all(fd, vmm_proc_child_elf, vmm_proc_child_elf_len);
	if (rc == 0)
		rc = st_sys_add_seals(fd, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	if (rc < 0) {
		st_sys_close(fd);
	} else {
		child_fd = fd;
		int cwd = cwd_make();
		child_cwd = cwd >= 0 ? cwd : -1;
	}
out_unlock:
	pthread_mutex_unlock(&child_lock);
	return rc;
}

int vmm_proc_probe(char *why, size_t whylen)
{
	/* Loading the child program is the memfd_create this backend needs.
	 * Only a kernel without memfd_create rules the backend out: running
	 * short of descriptors or memory is not "cannot run here" (the load
	 * is tried again when a sandbox starts, and its error reported then). */
	int rc = child_load();

	if (rc == -ENOSYS) {
		snprintf(why, whylen, "the kernel has no memfd_create");
		return rc;
	}
	if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0) {
		snprintf(why, whylen, "the kernel has no seccomp filters");
		return -ENOSYS;
	}
	return 0;
}

int vmm_process_check(struct vmm_error *err)
{
	char why[160];

	if (vmm_proc_probe(why, sizeof(why)) < 0)
		return vmm_fail(err, VMM_E_NO_BACKEND, "%s", why);
	return 0;
}

/*
 * Starting children. Every child is cloned by one thread of the process,
 * started at the first spawn and never ended, with every signal blocked:
 * a child's PR_SET_PDEATHSIG fires when the thread that cloned it ends, and
 * that thread ends only with the process (exit, exec, any fatal signal,
 * SIGKILL included). A sandbox thus outlives the host thread that made it,
 * and its child still dies with the host. The clone gives the child's
 * pidfd (CLONE_PIDFD), which every later signal and wait goes through.
 * (An exit signal other than SIGCHLD would not help: exec resets it.)
 */
struct spawn_req {
	/* in */
	const char *mem_path;  /* guest memory, as /proc/HOST/fd/N */
	const char *sh_path;   /* the shared runs' file, as /proc/HOST/fd/N (opened read-only); NULL: none */
	const char *path;
	char *const *argv;
	/* out */
	pid_t pid;
	int pidfd;
	int rc;
	int child_errno;       /* written by the child before it exits, if exec failed */
	bool done;
	struct spawn_req *next;
};

static pthread_mutex_t spawn_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t spawn_cond = PTHREAD_COND_INITIALIZER; /* spawn_lock: a request queued, or one done */
static struct spawn_req *spawn_queue;                      /* spawn_lock */
static bool spawner_up;                                    /* spawn_lock: the spawner thread runs in this process */
static pthread_once_t spawn_once = PTHREAD_ONCE_INIT;
/* The cloned child's stack until it execs (CLONE_VFORK: the spawner waits,
 * so one is enough); used only by the spawner thread. */
static uint8_t spawn_stack[64 * 1024] __attribute__((aligned(64)));

/* The kernel's struct sigaction for rt_sigaction. */
struct k_sigaction {
	void *handler;
	unsigned long flags;
	void *restorer;
	uint64_t mask;
};

/*
 * The child, between clone and exec: it shares the spawner's memory
 * (CLONE_VM) and, until its first call below, its descriptor table
 * (CLONE_FILES), so it makes raw system calls only, writes nothing but
 * req->child_errno and closes nothing of the host's. Every signal to its
 * default, in the removed directory, a table of its own with nothing in
 * it (CLOSE_RANGE_UNSHARE from 0 copies no descriptor: the table is as
 * small as a new process's, where a copy of the host's is as large as the
 * host's, thousands with a thousand sandboxes, and exec keeps it), guest
 * memory opened again as fd 3, no stdio, then exec with every signal
 * unblocked (the spawner had all blocked).
 */
__attribute__((no_sanitize("address", "undefined"))) static int spawn_child(void *arg)
{
	struct spawn_req *req = arg;
	const struct k_sigaction dfl = { 0 };
	const uint64_t none = 0;
	char *const envp[] = { NULL };
	long rc;

	for (int sig = 1; sig <= 64; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof(uint64_t));
	if (child_cwd >= 0)
		rc = syscall(SYS_fchdir, child_cwd);
	else
		rc = syscall(SYS_chdir, "/");
	if (rc == 0)
		rc = syscall(SYS_close_range, 0u, ~0u, CLOSE_RANGE_UNSHARE);
	/* Its own table from here: the lowest free descriptor is 0. */
	if (rc == 0 && (rc = syscall(SYS_openat, AT_FDCWD, req->mem_path, O_RDWR, 0)) == 0)
		rc = syscall(SYS_dup3, 0, 3, 0);
	if (rc == 3 && req->sh_path) {
		/* Read-only: no mapping of it can ever be made writable. */
		syscall(SYS_close, 0);
		if ((rc = syscall(SYS_openat, AT_FDCWD, req->sh_path, O_RDONLY, 0)) == 0)
			rc = syscall(SYS_dup3, 0, PROC_SHARED_FD, 0) == PROC_SHARED_FD ? 3 : -1;
		else if (rc > 0)
			rc = 0;
	}
	if (rc == 3) {
		syscall(SYS_close, 0);
		syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, sizeof(uint64_t));
		syscall(SYS_execve, req->path, req->argv, envp);
	} else if (rc >= 0) {
		errno = EBADF;  /* the table was not empty */
	}
	req->child_errno = errno ? errno : EINVAL;
	syscall(SYS_exit_group, 127);
	return 0;
}

/* Clone one child for req (on the spawner thread). */
static void spawn_one(struct spawn_req *req)
{
	siginfo_t si;
	int pidfd = -1;

	req->child_errno = 0;
	pid_t pid = clone(spawn_child, spawn_stack + sizeof(spawn_stack),
			  CLONE_VM | CLONE_VFORK | CLONE_FILES | CLONE_PIDFD | SIGCHLD, req, &pidfd);
	if (pid < 0) {
		req->rc = -errno;
		return;
	}
	if (pidfd < 0) {
		/* A kernel without CLONE_PIDFD (older than 5.2) ignored the flag. */
		kill(pid, SIGKILL);
		waitid(P_PID, (id_t)pid, &si, WEXITED | __WALL);
		req->rc = -ENOSYS;
		return;
	}
	if (req->child_errno) {
		/* The child is gone already: it failed before exec. */
		waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED | __WALL);
		st_sys_close(pidfd);
		req->rc = -req->child_errno;
		return;
	}
	req->pid = pid;
	req->pidfd = pidfd;
	req->rc = 0;
}

static void *spawner(void *arg)
{
	sigset_t chld;

	(void)arg;
	/* Every stop of a child (each guest exit) notifies its parent, this
	 * thread, with SIGCHLD. Blocked here, that signal is queued for the
	 * process and wakes another thread to discard it, one signal delivery
	 * per exit (calls with restores went bimodal on the process backend,
	 * half the runs twice as slow); unblocked, a SIGCHLD the host leaves
	 * at its default is dropped when sent, as for a child of the caller's
	 * own thread. A host's SIGCHLD handler may thus run on this thread. */
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	pthread_sigmask(SIG_UNBLOCK, &chld, NULL);
	pthread_mutex_lock(&spawn_lock);
	for (;;) {
		while (!spawn_queue)
			pthread_cond_wait(&spawn_cond, &spawn_lock);
		struct spawn_req *req = spawn_queue;
		spawn_queue = req->next;
		pthread_mutex_unlock(&spawn_lock);
		spawn_one(req);
		pthread_mutex_lock(&spawn_lock);
		req->done = true;
		pthread_cond_broadcast(&spawn_cond);
	}
	return NULL;
}

/* A forked child of the host has no spawner thread (only the forking
 * thread is copied): its first spawn starts its own. */
static void spawn_prepare(void)
{
	pthread_mutex_lock(&spawn_lock);
}

static void spawn_parent(void)
{
	pthread_mutex_unlock(&spawn_lock);
}

static void spawn_child_after_fork(void)
{
	spawner_up = false;
	spawn_queue = NULL;  /* the parent's requests are the parent's */
	pthread_mutex_unlock(&spawn_lock);
}

static void spawn_atfork(void)
{
	pthread_atfork(spawn_prepare, spawn_parent, spawn_child_after_fork);
}

/* Queue req for the spawner (started if need be) and wait until it is done. */
static int spawn_request(struct spawn_req *req)
{
	int rc = 0;

	pthread_once(&spawn_once, spawn_atfork);
	pthread_mutex_lock(&spawn_lock);
	if (!spawner_up) {
		pthread_attr_t at;
		pthread_t t;
		sigset_t all, old;
		sigfillset(&all);
		/* It takes none of the host's signals: created with all blocked. */
		pthread_sigmask(SIG_SETMASK, &all, &old);
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		rc = -pthread_create(&t, &at, spawner, NULL);
		pthread_attr_destroy(&at);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		spawner_up = rc == 0;
	}
	if (rc == 0) {
		req->done = false;
		req->next = NULL;
		struct spawn_req **tail = &spawn_queue;
		while (*tail)
			tail = &(*tail)->next;
		*tail = req;
		pthread_cond_broadcast(&spawn_cond);
		while (!req->done)
			pthread_cond_wait(&spawn_cond, &spawn_lock);
		rc = req->rc;
	}
	pthread_mutex_unlock(&spawn_lock);
	return rc;
}

/* Start the child program with guest memory as fd 3, nothing else open,
 * no environment, in a removed directory, every signal at its default and
 * unblocked; *pidfd is its pidfd. */
static int child_spawn(int memfd, int shfd, uint64_t mem_size, pid_t *pid, int *pidfd)
{
	char path[64], size[32], mem_path[64], sh_path[64];
	char host[32];
	char *argv[] = { "strata-guest", size, host, NULL };
	int rc;

	if ((rc = child_load()) < 0)
		return rc;
	/* The host's own descriptors, by path: the child execs its program and opens
	 * guest memory once its table is its own (and empty). */
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)getpid(), child_fd);
	snprintf(size, sizeof(size), "%llu", (unsigned long long)mem_size);
	snprintf(host, sizeof(host), "%d", (int)getpid());
	snprintf(mem_path, sizeof(mem_path), "/proc/%d/fd/%d", (int)getpid(), memfd);
	snprintf(sh_path, sizeof(sh_path), "/proc/%d/fd/%d", (int)getpid(), shfd);
	struct spawn_req req = { .mem_path = mem_path, .sh_path = shfd >= 0 ? sh_path : NULL, .path = path, .argv = argv,
				 .pid = -1, .pidfd = -1 };
	if ((rc = spawn_request(&req)) < 0)
		return rc;
	/* The child starts where the spawner thread ran. Every guest exit is
	 * a round trip with the thread that drives it: on the other CPU each
	 * costs two wake-up interrupts (expensive in a VM), and the scheduler
	 * does not always bring the pair together (calls with restores went
	 * bimodal, half the runs twice as slow). Move it to the caller's CPU
	 * once, then give it back every CPU it may use: it stays there until
	 * the scheduler has a reason to move it. Best effort. */
	cpu_set_t allowed, here;
	int cpu = sched_getcpu();
	if (cpu >= 0 && sched_getaffinity(req.pid, sizeof(allowed), &allowed) == 0 && CPU_ISSET(cpu, &allowed)) {
		CPU_ZERO(&here);
		CPU_SET(cpu, &here);
		if (sched_setaffinity(req.pid, sizeof(here), &here) == 0)
			sched_setaffinity(req.pid, sizeof(allowed), &allowed);
	}
	*pid = req.pid;
	*pidfd = req.pidfd;
	return 0;
}

/* ---- the backend ---- */

static void share_setup(struct vmm_sandbox *sb);

static int proc_mem_new(struct vmm_sandbox *sb, bool *ready)
{
	struct vmm_proc *p = st_sys_calloc(1, sizeof(*p));
	int rc;

	if (!p)
		return -ENOMEM;
	p->pid = -1;
	p->pidfd = -1;
	p->uffd = p->uffd_child = p->pm_self = p->pm_child = -1;
	p->shfd = -1;
	if ((p->memfd = st_sys_memfd_create("strata-guest", 0)) < 0) {
		rc = p->memfd;
		goto out_free;
	}
	/* Guest memory at offset 0 (offset = guest address), control pages after it. */
	if ((rc = st_sys_ftruncate(p->memfd, (off_t)(sb->mem_size + PROC_SHARED_SIZE))) < 0)
		goto out_close;
	sb->mem = st_sys_mmap(NULL, sb->mem_size, PROT_READ | PROT_WRITE, MAP_SHARED, p->memfd, 0, &rc);
	if (!sb->mem)
		goto out_close;
	p->ctl = st_sys_mmap(NULL, PROC_SHARED_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, p->memfd, (off_t)sb->mem_size,
			     &rc);
	if (!p->ctl)
		goto out_unmap;
	p->alt = p->ctl + PROC_CTL_SIZE;
	p->maps = -1;
	sb->priv = p;
	*ready = false;
	return 0;
out_unmap:
	st_sys_munmap(sb->mem, sb->mem_size);
	sb->mem = NULL;
out_close:
	st_sys_close(p->memfd);
out_free:
	free(p);
	return rc;
}

/* One more run in the control page (proc_abi.h, CTL_RUNS). */
static int ctl_run_add(struct vmm_proc *p, uint64_t va, uint64_t len, uint64_t word)
{
	uint64_t run[3] = { va, len, word };
	uint32_t n;

	memcpy(&n, p->ctl + CTL_NOPS, 4);
	if (n >= CTL_RUNS_MAX)
		return -E2BIG;
	memcpy(p->ctl + CTL_RUNS + (size_t)n * CTL_RUN_SIZE, run, sizeof(run));
	n++;
	memcpy(p->ctl + CTL_NOPS, &n, 4);
	return 0;
}

/* The protection runs go into the control page: the child applies them
 * before its filter, which then allows no memory call at all. */
static int map_run(void *ctx, uint64_t va, uint64_t len, unsigned perm)
{
	struct vmm_proc *p = ctx;
	if (perm == VMM_PERM_NONE)
		return 0;
	return ctl_run_add(p, va, len, ((perm & VMM_PERM_R) ? PROT_READ : 0) | ((perm & VMM_PERM_W) ? PROT_WRITE : 0) |
					       ((perm & VMM_PERM_X) ? PROT_EXEC : 0));
}

/* The page tables' user protections, for the child to apply as it starts. */
static int proc_map(struct vmm_sandbox *sb)
{
	struct vmm_proc *p = proc_of(sb);
	/* Pages below the boot info are supervisor-only (page tables, GDT,
	 * IDT, exception stacks): never reachable from CPL 3, never mapped. */
	const uint64_t lo = STRATA_BOOT_INFO_GPA;

	memset(p->ctl + CTL_NOPS, 0, 4);
	int rc = vmm_x86_user_runs(sb->mem, sb->mem_size, sb->layout.pml4, lo, sb->mem_size, map_run, p);
	/* Then the shared runs, which the child maps over the protected
	 * memory once its writes are tracked. */
	for (size_t i = 0; rc == 0 && i < p->nsh; i++) {
		const struct sh_run *r = &p->sh[i];
		if (r->prot)
			rc = ctl_run_add(p, r->gpage * VMM_PAGE, r->npages * VMM_PAGE,
					 r->prot | RUN_SHARED | (r->lpage * VMM_PAGE));
	}
	return rc;
}

/* Every run of the memfd that holds data (the rest reads as zero). */
static int data_runs(struct vmm_sandbox *sb, struct vmm_runs *out)
{
	struct vmm_proc *p = proc_of(sb);
	off_t end = (off_t)sb->mem_size, at = 0;
	int rc;

	while (at < end) {
		/* ENXIO: no data past `at`; any other failure is an error, never
		 * "no more data" (that would leave written pages unrestored). */
		off_t d = st_sys_lseek(p->memfd, at, SEEK_DATA);
		if (d == -ENXIO || d >= end)
			break;
		if (d < 0)
			return (int)d;
		off_t h = st_sys_lseek(p->memfd, d, SEEK_HOLE);
		if (h < 0)
			return (int)h;
		if (h > end)
			h = end;
		uint64_t g0 = (uint64_t)d / VMM_PAGE, g1 = vmm_round_up((uint64_t)h, VMM_PAGE) / VMM_PAGE;
		if ((rc = vmm_runs_add(out, g0, g1 - g0)) < 0)
			return rc;
		at = h;
	}
	return 0;
}

static bool bit(const uint64_t *b, uint64_t g)
{
	return (b[g / 64] >> (g % 64)) & 1;
}

static void bit_set(uint64_t *b, uint64_t g)
{
	b[g / 64] |= 1ull << (g % 64);
}

/* Protect pages [g0, g0 + n) in both mappings (the child's from the boot
 * info up: nothing below it is mapped there). */
static int protect(struct vmm_sandbox *sb, uint64_t g0, uint64_t n)
{
	struct vmm_proc *p = proc_of(sb);
	uint64_t lo = STRATA_BOOT_INFO_GPA / VMM_PAGE, c0 = g0 < lo ? lo : g0;
	int rc = vmm_wp_protect(p->uffd, (uint64_t)(uintptr_t)(sb->mem + g0 * VMM_PAGE), n * VMM_PAGE);

	if (rc == 0 && c0 < g0 + n)
		rc = vmm_wp_protect(p->uffd_child, c0 * VMM_PAGE, (g0 + n - c0) * VMM_PAGE);
	return rc;
}

/*
 * Pages of the memfd that hold data and were not known: they got it since
 * the last look (a first touch leaves no write-protect marker behind, so
 * no scan reports it). Adds them to `written` and to `fresh` (protected
 * at the next reset) and makes them known; with all, protects every data
 * page now instead. Costs in proportion to the memfd's data extents.
 */
static int data_protect(struct vmm_sandbox *sb, bool all)
{
	struct vmm_proc *p = proc_of(sb);
	struct vmm_runs runs = { 0 };
	struct stat st;
	/* Taken before the walk: a page that got data after it makes the
	 * next look walk again. */
	blkcnt_t blocks = st_sys_fstat(p->memfd, &st) == 0 ? st.st_blocks : -1;

	if (!all && blocks >= 0 && blocks == p->data_blocks)
		return 0;
	int rc = data_runs(sb, &runs);

	for (size_t i = 0; rc == 0 && i < runs.n; i++) {
		uint64_t g = runs.v[i].gpage, end = g + runs.v[i].npages;
		if (all) {
			rc = protect(sb, g, end - g);
			for (; g < end; g++)
				bit_set(p->known, g);
			continue;
		}
		for (; rc == 0 && g < end; g++) {
			if (bit(p->known, g))
				continue;
			bit_set(p->known, g);
			bit_set(p->written, g);
			rc = vmm_runs_add(&p->fresh, g, 1);
		}
	}
	vmm_runs_free(&runs);
	p->data_blocks = rc == 0 ? blocks : -1;
	return rc;
}

/* A /proc/PID/maps of the child, whole, as a new string (the caller frees it). */
static int maps_read(int fd, char **out)
{
	size_t cap = 4096, n = 0;
	char *b = NULL;

	for (;;) {
		char *nb = st_sys_realloc(b, cap + 1);
		if (!nb) {
			free(b);
			return -ENOMEM;
		}
		b = nb;
		ssize_t r = st_sys_pread(fd, b + n, cap - n, (off_t)n);
		if (r < 0) {
			free(b);
			return (int)r;
		}
		n += (size_t)r;
		if (r == 0 || n < cap)
			break;
		cap *= 2;
	}
	b[n] = 0;
	/* Kept for the sandbox's life (maps_base): no bigger than it is (a
	 * failed shrink keeps the buffer as it was). */
	char *fit = n + 1 < cap + 1 ? st_sys_realloc(b, n + 1) : NULL;
	*out = fit ? fit : b;
	return 0;
}

/* Start the child on guest memory as it is: fork, wait for its stub,
 * give it the page tables' protections. */
static int proc_spawn(struct vmm_sandbox *sb, struct vmm_error *err)
{
	struct vmm_proc *p = proc_of(sb);
	char path[64], how[64];
	pid_t pid;
	int rc;

	/* Zero, as holes: a page the child and the stub never touch (the
	 * control page's second half, the signal stack below the frame) is
	 * never allocated. */
	if ((rc = st_sys_punch_hole(p->memfd, (off_t)sb->mem_size, PROC_SHARED_SIZE)) < 0)
		return vmm_fail(err, rc, "cannot clear the guest process's control pages: %s", strerror(-rc));
	atomic_store(ctl_state(p), STATE_GUEST);
	p->uc = 0;  /* known at its first report */
	p->dead = false;
	p->running = false;
	if ((rc = proc_map(sb)) < 0)
		return vmm_fail(err, rc == -E2BIG ? VMM_E_BAD_CONFIG : rc,
				"cannot map guest memory in the guest's process: %s",
				rc == -E2BIG ? "its page tables give more protection runs than the control page holds"
					     : strerror(-rc));
	if ((rc = child_spawn(p->memfd, p->nsh ? p->shfd : -1, sb->mem_size, &pid, &p->pidfd)) < 0)
		return vmm_fail(err, rc, "cannot start the guest's process: %s", strerror(-rc));
	p->pid = pid;
	/* The child reports once it is locked down. */
	rc = wait_stop_for(p, SPAWN_WAIT_NS);
	if (rc <= 0) {
		if (rc < 0)
			return vmm_fail(err, VMM_E_NO_BACKEND,
					"the process backend's child %s while starting (the kvm backend, --backend kvm, "
					"needs no child)",
					vmm_proc_end_str(p->end_signal, how, sizeof(how)));
		proc_kill(p);
		return vmm_fail(err, VMM_E_NO_BACKEND, "the process backend's child did not start within %llu s",
				(unsigned long long)(SPAWN_WAIT_NS / 1000000000ull));
	}
	uint64_t rip = ctl_gregs(p)[G_RIP], uc, fp;
	uint32_t xsize = 0;
	int32_t signo;
	memcpy(&signo, p->ctl + CTL_SI, 4);
	memcpy(&uc, p->ctl + CTL_UC, 8);
	memcpy(&p->fsgs, p->ctl + CTL_FSGS, 4);
	memcpy(&p->host_pid, p->ctl + CTL_HOSTPID, 8);
	/* The frame: its ucontext and XSAVE image inside the signal stack,
	 * the stub's calls push their return address just below the frame. */
	bool frame_ok = uc >= PROC_ALT_LO + 16 && uc + UC_FPREGS + 8 <= PROC_END;
	if (frame_ok) {
		memcpy(&fp, p->alt + (uc - PROC_ALT_LO) + UC_FPREGS, 8);
		frame_ok = fp >= uc && fp % 64 == 0 && fp + 576 <= PROC_END;
		if (frame_ok)
			memcpy(&xsize, p->alt + (fp - PROC_ALT_LO) + 480, 4); /* fpx_sw_bytes.xstate_size */
		frame_ok = frame_ok && xsize >= 576 && fp + xsize + 4 <= PROC_END;
	}
	/* The frame's siginfo, right after its ucontext: what the stub copied. */
	const uint64_t si = uc + UC_SIZE;
	frame_ok = frame_ok && si + 48 <= fp && memcmp(p->alt + (si - PROC_ALT_LO), p->ctl + CTL_SI, 48) == 0;
	if (signo != SIGILL || rip < PROC_CODE || rip >= PROC_CTL || !frame_ok) {
		proc_kill(p);
		return vmm_fail(err, VMM_E_NO_BACKEND, "the process backend's child reported from an unexpected place");
	}
	p->uc = uc;
	p->fp_off = (uint32_t)(fp - PROC_ALT_LO);
	p->xsize = xsize;
	p->tmpl_off = (uint32_t)(uc - PROC_ALT_LO - 16);
	free(p->tmpl);
	if (!(p->tmpl = st_sys_malloc(PROC_ALT_SIZE - p->tmpl_off))) {
		proc_kill(p);
		return vmm_fail(err, -ENOMEM, "out of memory");
	}
	memcpy(p->tmpl, p->alt + p->tmpl_off, PROC_ALT_SIZE - p->tmpl_off);
	/* Its signal number 0 (none the stub reports): if a guest that
	 * stopped itself had a signal delivered on the way (a kick racing its
	 * stop), it resumes in the stub's handler on this image, which then
	 * reports a bad report, not the first report's signal. */
	memset(TMPL(p, si - PROC_ALT_LO), 0, 4);
	uint32_t wp;
	memcpy(&wp, p->ctl + CTL_WP, 4);
	if (p->pm_child >= 0)
		st_sys_close(p->pm_child);
	if (p->uffd_child >= 0)
		st_sys_close(p->uffd_child);
	if (p->maps >= 0)
		st_sys_close(p->maps);
	p->pm_child = p->uffd_child = p->maps = -1;
	/* What needs the child dumpable (a host without CAP_SYS_PTRACE may
	 * open these only then), before it becomes not dumpable. */
	snprintf(path, sizeof(path), "/proc/%d/pagemap", (int)pid);
	if ((p->pm_child = st_sys_openat(AT_FDCWD, path, O_RDONLY, 0)) < 0)
		p->pm_child = -1;
	/* Two handles on its maps: one read once it is locked down (the
	 * mappings the check compares against), then closed; one kept unread
	 * for the check, so that no sandbox holds the kernel's buffer for a
	 * read (a page) unless it is checked. */
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	if ((p->maps = st_sys_openat(AT_FDCWD, path, O_RDONLY, 0)) < 0)
		p->maps = -1;
	int maps_base = p->maps >= 0 ? st_sys_openat(AT_FDCWD, path, O_RDONLY, 0) : -1;
	if (wp && p->uffd >= 0) {
		/* The child's userfaultfd: the host protects its pages directly. */
		p->uffd_child = (int)syscall(SYS_pidfd_getfd, p->pidfd, 4, 0);
	}
	int64_t locked = -1;
	hand_over(p, STATE_LOCK);
	while ((rc = wait_stop(p, false)) == 0)
		;
	if (rc > 0)
		memcpy(&locked, p->ctl + CTL_RESULT, 8);
	if (locked != 0) {
		if (maps_base >= 0)
			st_sys_close(maps_base);
		proc_kill(p);
		return vmm_fail(err, VMM_E_NO_BACKEND, "the process backend's child could not be made non-dumpable");
	}
	/* The child's mappings as the guest finds them: no call may change
	 * them from here on (vmm_sandbox_check compares). */
	free(p->maps_base);
	p->maps_base = NULL;
	if (maps_base >= 0) {
		if (maps_read(maps_base, &p->maps_base) < 0)
			p->maps_base = NULL;
		st_sys_close(maps_base);
	}
	p->tracked = p->uffd >= 0 && p->pm_self >= 0 && p->pm_child >= 0 && p->uffd_child >= 0;
	/* Every page with data is protected in both mappings from here on; a
	 * page that gets data later is found by the next scan (data_fresh). */
	memset(p->known, 0, (p->pages / 64 + 1) * sizeof(*p->known));
	p->data_blocks = -1;
	vmm_runs_clear(&p->fresh);
	if (p->tracked && (rc = data_protect(sb, true)) < 0)
		p->tracked = false;
	return 0;
}

static int proc_start(struct vmm_sandbox *sb, bool ready, struct vmm_error *err)
{
	struct vmm_proc *p = proc_of(sb);
	const struct vmm_snap *s = sb->snap;

	(void)ready;
	p->pages = sb->mem_size / VMM_PAGE;
	p->written = st_sys_calloc(p->pages / 64 + 1, sizeof(*p->written));
	p->known = st_sys_calloc(p->pages / 64 + 1, sizeof(*p->known));
	if (!p->written || !p->known)
		return vmm_fail(err, -ENOMEM, "out of memory");
	/* Memory as it is now is what a fresh sandbox's first capture
	 * compares (all of it), or exactly its snapshot (restored from one). */
	p->all = !(s && s->have_vcpu);
	if (vmm_wp_track((uint64_t)(uintptr_t)sb->mem, sb->mem_size, &p->uffd) < 0)
		p->uffd = -1;
	p->pm_self = p->uffd >= 0 ? st_sys_openat(AT_FDCWD, "/proc/self/pagemap", O_RDONLY, 0) : -1;
	if (p->pm_self < 0)
		p->pm_self = -1;
	if (!p->all)
		share_setup(sb);
	return proc_spawn(sb, err);
}


static void proc_destroy(struct vmm_sandbox *sb)
{
	struct vmm_proc *p = proc_of(sb);

	if (p) {
		proc_kill(p);
		if (p->ctl)
			st_sys_munmap(p->ctl, PROC_SHARED_SIZE);
		if (p->maps >= 0)
			st_sys_close(p->maps);
		free(p->maps_base);
		st_sys_close(p->memfd);
		if (p->uffd >= 0)
			st_sys_close(p->uffd);
		if (p->pm_self >= 0)
			st_sys_close(p->pm_self);
		if (p->pm_child >= 0)
			st_sys_close(p->pm_child);
		if (p->uffd_child >= 0)
			st_sys_close(p->uffd_child);
		free(p->written);
		free(p->known);
		free(p->tmpl);
		vmm_runs_free(&p->fresh);
		free(p->sh);
		free(p->shared);
		if (p->shfd >= 0)
			st_sys_close(p->shfd);
		free(p);
		sb->priv = NULL;
	}
	if (sb->mem)
		st_sys_munmap(sb->mem, sb->mem_size);
	sb->mem = NULL;
}

static bool proc_live(const struct vmm_sandbox *sb)
{
	const struct vmm_proc *p = proc_of(sb);

	return p && p->pid > 0 && !p->dead;
}

/*
 * Zero [at, at + len) of the host's mapping of the memfd's shared pages
 * without allocating the pages that are holes (a shared memfd page is
 * allocated even when only read): whole pages are cleared only where the
 * memfd has data (SEEK_DATA: swapped-out pages count), the partial last
 * page always. The stub and the kernel touch only the top of the signal
 * stack and the control page's first words; only a guest writes
 * anywhere else.
 */
static void pages_zero(struct vmm_sandbox *sb, uint8_t *at, size_t len)
{
	struct vmm_proc *p = proc_of(sb);
	off_t base = (off_t)sb->mem_size + (at - p->ctl), end = base + (off_t)(len / VMM_PAGE * VMM_PAGE);

	for (off_t o = base; o < end;) {
		off_t d = st_sys_lseek(p->memfd, o, SEEK_DATA), h;
		if (d == -ENXIO || d >= end)
			break;
		h = d < 0 ? end : st_sys_lseek(p->memfd, d, SEEK_HOLE);
		if (d < 0 || h < 0 || h > end)
			h = end;  /* unknown: clear it all */
		if (d < 0)
			d = o;
		memset(at + (d - base), 0, (size_t)(h - d));
		o = h;
	}
	memset(at + (end - base), 0, len - (size_t)(end - base));
}

/*
 * Everything of the child the guest could write, but guest memory, as it
 * was before any guest code ran: the control pages (only what the stub
 * reads, from the host's own copy) and the signal stack (its image from
 * the first report, with an XSAVE image that loads x87 and SSE from the
 * state the caller writes next and every other component in its initial
 * state). fs base is loaded as the thread block's (STRATA_TLS_GPA) and gs
 * base as 0 on the next resume, where user code can write them at all
 * (elsewhere the child set fs base once, before its filter, and nothing
 * can change it). Called only
 * on a stopped child.
 */
static void child_reset(struct vmm_sandbox *sb)
{
	struct vmm_proc *p = proc_of(sb);
	uint8_t *fp = p->alt + p->fp_off;
	uint64_t xstate_bv = 3;

	pages_zero(sb, p->ctl, PROC_CTL_SIZE);
	uint32_t fsgs = (p->fsgs ? FSGS_HAVE : 0) | FSGS_LOAD;
	uint64_t pid = (uint64_t)p->pid;
	memcpy(p->ctl + CTL_FSGS, &fsgs, 4);
	memcpy(p->ctl + CTL_FSBASE, &(uint64_t){ STRATA_TLS_GPA }, 8);
	memcpy(p->ctl + CTL_HOSTPID, &p->host_pid, 8);
	memcpy(p->ctl + CTL_PID, &pid, 8);
	memcpy(p->ctl + CTL_UC, &p->uc, 8);
	uint64_t sp = p->uc - 8;
	memcpy(p->ctl + CTL_SP, &sp, 8);
	/* The first report's registers (the segment selectors are the
	 * kernel's) and FXSAVE image (MXCSR_MASK and the software bytes too):
	 * the caller writes the guest's registers over them. */
	memcpy(p->ctl + CTL_GREGS, TMPL(p, p->uc - PROC_ALT_LO) + UC_GREGS, NGREGS * 8);
	memcpy(p->ctl + CTL_FX, TMPL(p, p->fp_off), 512);
	pages_zero(sb, p->alt, p->tmpl_off);
	memcpy(p->alt + p->tmpl_off, p->tmpl, PROC_ALT_SIZE - p->tmpl_off);
	/* The XSAVE header (SDM Vol. 1 13.4.2): XSTATE_BV x87|SSE, XCOMP_BV 0
	 * (the standard form a signal frame uses); no other component's data. */
	memset(fp + 512, 0, p->xsize - 512);
	memcpy(fp + 512, &xstate_bv, 8);
}

static int proc_set_state(struct vmm_sandbox *sb, const struct vmm_vcpu_state *st)
{
	struct vmm_proc *p = proc_of(sb);
	uint64_t *g = ctl_gregs(p);

	/* fs base: the thread block, which the child loads (a restore's
	 * state was checked against it). */
	if (st->version != VMM_VCPU_STATE_VERSION || st->fs.base != STRATA_TLS_GPA)
		return -EINVAL;
	if (p->running)
		return VMM_E_BUSY;
	if (p->dead || p->pid <= 0) {
		/* A child that had to be killed (it ignored a kick) is replaced;
		 * what it wrote since the last scan is unknown: compare all. */
		int rc;
		proc_kill(p);
		p->all = true;
		if ((rc = proc_spawn(sb, NULL)) < 0)
			return rc;
		g = ctl_gregs(p);
	}
	child_reset(sb);
	/* Registers and flags map one to one; segments, descriptor tables
	 * and control registers are the host-built ones on both backends and
	 * have no counterpart in a process (docs/vmm.md). */
	for (unsigned i = 0; i < 16; i++)
		g[gpr_to_greg[i]] = st->gpr[i];
	g[G_RIP] = st->rip;
	g[G_EFL] = (st->rflags & RFLAGS_GUEST) | 0x2;
	/* x87, MXCSR and XMM0-15 (FXSAVE bytes 0-415 but MXCSR_MASK, which is the CPU's). */
	uint8_t *fx = p->ctl + CTL_FX;
	memcpy(fx, st->fxsave, 28);
	memcpy(fx + 32, st->fxsave + 32, 416 - 32);
	p->cr2 = st->cr2;
	return 0;
}

static int proc_get_state(struct vmm_sandbox *sb, struct vmm_vcpu_state *st)
{
	struct vmm_proc *p = proc_of(sb);
	const uint64_t *g = ctl_gregs(p);

	if (p->running)
		return VMM_E_BUSY;
	/* Segments and control registers: the host-built long mode at CPL 3,
	 * exactly what KVM holds for a guest running there. */
	vmm_x86_initial_state(&sb->layout, 3, g[G_RIP], g[G_RSP], st);
	for (unsigned i = 0; i < 16; i++)
		st->gpr[i] = g[gpr_to_greg[i]];
	st->rflags = (g[G_EFL] & RFLAGS_GUEST) | RFLAGS_BASE;
	st->cr2 = p->cr2;
	memset(st->fxsave, 0, sizeof(st->fxsave));
	memcpy(st->fxsave, p->ctl + CTL_FX, 28);
	memcpy(st->fxsave + 32, p->ctl + CTL_FX + 32, 416 - 32);
	return 0;
}

static int proc_get_cr2(struct vmm_sandbox *sb, uint64_t *cr2)
{
	*cr2 = proc_of(sb)->cr2;
	return 0;
}

/*
 * Decode the store that faulted on the hypercall page: `mov r, m` (opcode
 * 0x89, any addressing form). *size 0 if it is anything else.
 */
static void decode_store(const uint8_t *b, size_t avail, unsigned *len, unsigned *size, unsigned *reg)
{
	unsigned i = 0, rex = 0;
	bool o16 = false;

	*size = 0;
	for (; i < avail && i < 4; i++) {
		if (b[i] == 0x66)
			o16 = true;
		else if (b[i] != 0x67 && b[i] != 0x2e && b[i] != 0x3e && b[i] != 0x26 && b[i] != 0x36)
			break;
	}
	if (i < avail && (b[i] & 0xf0) == 0x40)
		rex = b[i++];
	if (i + 2 > avail || b[i] != 0x89)
		return;
	uint8_t modrm = b[i + 1];
	unsigned mod = modrm >> 6, rm = modrm & 7;
	i += 2;
	if (mod == 3)
		return;
	unsigned disp = mod == 1 ? 1 : mod == 2 ? 4 : 0;
	if (rm == 4) {
		if (i >= avail)
			return;
		if (mod == 0 && (b[i] & 7) == 5)
			disp = 4;
		i++;
	} else if (mod == 0 && rm == 5) {
		disp = 4;
	}
	if (i + disp > avail)
		return;
	*len = i + disp;
	*reg = ((modrm >> 3) & 7) | ((rex & 4) ? 8u : 0u);
	*size = (rex & 8) ? 8 : o16 ? 2 : 4;
}

/* Turn the child's report into an exit. *again: nothing for the VMM (a stale kick). */
static void report_decode(struct vmm_sandbox *sb, struct vmm_exit *ex, bool *again)
{
	struct vmm_proc *p = proc_of(sb);
	uint64_t *g = ctl_gregs(p);
	int32_t signo, code;
	uint32_t arch;
	uint64_t rip = g[G_RIP], trapno = g[G_TRAPNO], err = g[G_ERR], cr2 = g[G_CR2];

	uint64_t uc;

	memcpy(&signo, p->ctl + CTL_SI, 4);
	memcpy(&code, p->ctl + CTL_SI + 8, 4);
	memcpy(&arch, p->ctl + CTL_SI + 28, 4);
	memcpy(&uc, p->ctl + CTL_UC, 8);
	*again = false;
	memset(ex, 0, sizeof(*ex));
	if (uc != p->uc) {
		/* Every genuine report has its frame at the stack's top. */
		ex->kind = VMM_EXIT_BAD_REPORT;
		ex->reason = (uint32_t)signo;
		return;
	}
	switch (signo) {
	case SIGUSR1:
		*again = true;  /* a kick: the guest was only interrupted */
		ex->kind = VMM_EXIT_INTR;
		return;
	case SIGSYS:
		/* A `syscall` the filter refused: KVM's guest (EFER.SCE clear)
		 * gets #UD there; `int $0x80` hits a not-present IDT vector: #GP. */
		ex->kind = VMM_EXIT_EXCEPTION;
		ex->rip = rip - 2;
		if (arch == AUDIT_ARCH_X86_64) {
			ex->vector = VMM_X86_VEC_UD;
		} else {
			ex->vector = VMM_X86_VEC_GP;
			ex->error_code = 0x80 * 8 + 2;
		}
		return;
	case SIGSEGV: case SIGBUS: case SIGFPE: case SIGILL: case SIGTRAP:
		break;
	default:
		/* The stub reports only the signals it handles: the guest wrote
		 * this report itself. */
		ex->kind = VMM_EXIT_BAD_REPORT;
		ex->reason = (uint32_t)signo;
		return;
	}
	(void)code;
	if (trapno == VMM_X86_VEC_PF && cr2 >= STRATA_HC_VA && cr2 < STRATA_HC_VA + VMM_PAGE) {
		/* A store into the hypercall page: KVM's MMIO exit. */
		unsigned len = 0, size = 0, reg = 0;
		const uint8_t *ins = rip < sb->mem_size - 16 ? sb->mem + rip : NULL;
		if (ins)
			decode_store(ins, 15, &len, &size, &reg);
		ex->addr = STRATA_HC_GPA + (cr2 - STRATA_HC_VA);
		ex->is_write = (err & 2) != 0;
		ex->len = ex->is_write ? size : 0;
		if (ex->is_write && size == 4 && (cr2 & 3) == 0) {
			ex->kind = VMM_EXIT_IO_OUT;
			ex->port = (uint16_t)(STRATA_HC_PORT_BASE + (cr2 - STRATA_HC_VA) / 4);
			ex->value = (uint32_t)g[x86reg_to_greg[reg]];
			g[G_RIP] = rip + len;  /* the guest resumes after the store */
			return;
		}
		ex->kind = VMM_EXIT_MMIO;
		return;
	}
	ex->kind = VMM_EXIT_EXCEPTION;
	ex->vector = (uint32_t)trapno;
	ex->error_code = err;
	ex->rip = rip;
	if (trapno == VMM_X86_VEC_PF) {
		ex->addr = cr2;
		p->cr2 = cr2;
	}
}

static int proc_run(struct vmm_sandbox *sb, struct vmm_exit *ex)
{
	struct vmm_proc *p = proc_of(sb);
	bool kicked;

	memset(ex, 0, sizeof(*ex));
	if (p->dead) {
		ex->kind = VMM_EXIT_DEAD;
		ex->reason = (uint32_t)p->end_signal;
		return 0;
	}
	if (!p->running) {
		p->running = true;
		hand_over(p, STATE_GUEST);
	}
	/* A kill whose kick landed before the guest was resumed (it saw
	 * running false) must still stop it: the request is sticky. */
	if (atomic_load(&sb->kill_pending))
		child_signal(p, SIGUSR1);
	int rc = wait_stop(p, false);
	if (rc == 0 || rc < 0) {
		ex->kind = rc == 0 ? VMM_EXIT_INTR : VMM_EXIT_DEAD;
		ex->reason = (uint32_t)p->end_signal;
		return 0;
	}
	p->running = false;
	/* A kick's report is an interruption: the loop decides (kill,
	 * timeout, or go on; a stale kick just resumes the guest). */
	report_decode(sb, ex, &kicked);
	if (ex->kind == VMM_EXIT_BAD_REPORT)
		proc_kill(p);  /* it is not in the stub: replaced at the next restore */
	return 0;
}

static void proc_kick(struct vmm_sandbox *sb, bool on)
{
	struct vmm_proc *p = proc_of(sb);

	/* The kick signal interrupts the host's wait; this stops the guest
	 * too, so a kick that lands just before the wait is not lost.
	 * Async-signal-safe (kill). */
	if (on && p && p->pid > 0 && p->running && !p->dead)
		child_signal(p, SIGUSR1);
}

static void proc_halt(struct vmm_sandbox *sb)
{
	struct vmm_proc *p = proc_of(sb);

	if (!p || !p->running || p->dead)
		return;
	child_signal(p, SIGUSR1);
	if (wait_stop_for(p, HALT_WAIT_NS) == 1) {
		p->running = false;
		return;
	}
	proc_kill(p);
}

static int written_add(void *ctx, uint64_t lo, uint64_t hi)
{
	struct vmm_proc *p = proc_of((struct vmm_sandbox *)ctx);
	uint64_t base = (uint64_t)(uintptr_t)((struct vmm_sandbox *)ctx)->mem;

	/* Host addresses (the host mapping) or guest addresses (the child's). */
	if (lo >= base && hi <= base + p->pages * VMM_PAGE) {
		lo -= base;
		hi -= base;
	}
	for (uint64_t g = lo / VMM_PAGE; g < hi / VMM_PAGE && g < p->pages; g++)
		p->written[g / 64] |= 1ull << (g % 64);
	return 0;
}


/* ---- shared runs: one copy of the snapshot's read-only pages ---- */

struct sh_collect {
	struct vmm_sandbox *sb;
	const struct vmm_snap *s;
	int layer;         /* the one layer shared runs come from (the first found); -1 none yet */
	struct sh_run *v;
	size_t n, cap;
	bool exec_ok;      /* the layer's file may be mapped executable (not on a noexec mount) */
};

/* Add [g, g + n) with the child's protection prot, where the snapshot's
 * layer holds it: each piece from the chosen layer becomes a shared run. */
static int sh_add(struct sh_collect *c, uint64_t g, uint64_t n, unsigned prot)
{
	const struct vmm_snap *s = c->s;

	for (size_t i = 0; i < s->nsegs && n; i++) {
		const struct vmm_seg *sg = &s->segs[i];
		if (sg->gpage + sg->npages <= g)
			continue;
		if (sg->gpage >= g + n)
			break;
		uint64_t lo = sg->gpage > g ? sg->gpage : g, hi = sg->gpage + sg->npages < g + n ? sg->gpage + sg->npages : g + n;
		if (sg->layer < 0 || s->layers[sg->layer].fd < 0 || s->layers[sg->layer].on_fuse)
			continue;  /* a hole reads as zero anyway; a lazy layer's pages are copied in */
		if (c->layer < 0)
			c->layer = sg->layer;
		if (sg->layer != c->layer || ((prot & PROT_EXEC) && !c->exec_ok))
			continue;
		uint64_t lpage = sg->lpage + (lo - sg->gpage);
		if (c->n && c->v[c->n - 1].gpage + c->v[c->n - 1].npages == lo && c->v[c->n - 1].prot == prot &&
		    c->v[c->n - 1].lpage + c->v[c->n - 1].npages == lpage) {
			c->v[c->n - 1].npages += hi - lo;
			continue;
		}
		if (c->n == c->cap) {
			size_t cap = c->cap ? 2 * c->cap : 16;
			struct sh_run *nv = st_sys_realloc(c->v, cap * sizeof(*nv));
			if (!nv)
				return -ENOMEM;
			c->v = nv;
			c->cap = cap;
		}
		c->v[c->n++] = (struct sh_run){ lo, hi - lo, lpage, prot };
	}
	return 0;
}

static int sh_collect_run(void *ctx, uint64_t va, uint64_t len, unsigned perm)
{
	unsigned prot = ((perm & VMM_PERM_R) ? PROT_READ : 0) | ((perm & VMM_PERM_X) ? PROT_EXEC : 0);

	if (perm == VMM_PERM_NONE || (perm & VMM_PERM_W) || !(perm & VMM_PERM_R))
		return 0;
	return sh_add(ctx, va / VMM_PAGE, len / VMM_PAGE, prot);
}

/*
 * A sandbox restored from a snapshot: map the pages the guest cannot write
 * (read-only or executable in its page tables, and everything below the
 * boot info, which only the host reads) from the layer's file, read-only,
 * over the host's mapping, and free their copies in the memfd; the child
 * maps the same runs (proc_map). Nothing writes them: the guest faults,
 * the host never writes guest memory below the boot info or where the
 * guest cannot (a restore writes only pages that differ, and these never
 * do). Best effort: whatever cannot be shared stays copied.
 */
static void share_setup(struct vmm_sandbox *sb)
{
	struct vmm_proc *p = proc_of(sb);
	struct sh_collect c = { .sb = sb, .s = sb->snap, .layer = -1 };
	int rc;

	if (!c.s || !c.s->m || !c.s->segs || !c.s->layers)
		return;
	/* Probe with any one layer's file: a mount may refuse executable maps. */
	for (uint32_t i = 0; i < c.s->m->nlayers && !c.exec_ok; i++) {
		if (c.s->layers[i].fd < 0 || !c.s->layers[i].pages)
			continue;
		void *t = st_sys_mmap(NULL, VMM_PAGE, PROT_READ | PROT_EXEC, MAP_SHARED, c.s->layers[i].fd, 0, &rc);
		if (t) {
			c.exec_ok = true;
			st_sys_munmap(t, VMM_PAGE);
		}
		break;
	}
	rc = sh_add(&c, 0, STRATA_BOOT_INFO_GPA / VMM_PAGE, 0);
	if (rc == 0)
		rc = vmm_x86_user_runs(sb->mem, sb->mem_size, sb->layout.pml4, STRATA_BOOT_INFO_GPA, sb->mem_size,
				       sh_collect_run, &c);
	if (rc < 0 || !c.n || !(p->shared = st_sys_calloc(p->pages / 64 + 1, sizeof(*p->shared))) ||
	    (p->shfd = st_sys_dup(c.s->layers[c.layer].fd)) < 0) {
		p->shfd = -1;
		free(p->shared);
		p->shared = NULL;
		free(c.v);
		return;
	}
	size_t k = 0;
	for (size_t i = 0; i < c.n; i++) {
		const struct sh_run *r = &c.v[i];
		void *at = sb->mem + r->gpage * VMM_PAGE;
		if (st_sys_mmap(at, r->npages * VMM_PAGE, PROT_READ, MAP_SHARED | MAP_FIXED, p->shfd,
				(off_t)(r->lpage * VMM_PAGE), &rc) != at)
			break;  /* nothing replaced there (MAP_FIXED fails before it unmaps) */
		st_sys_punch_hole(p->memfd, (off_t)(r->gpage * VMM_PAGE), (off_t)(r->npages * VMM_PAGE));
		for (uint64_t g = r->gpage; g < r->gpage + r->npages; g++)
			bit_set(p->shared, g);
		c.v[k++] = *r;
	}
	p->sh = c.v;
	p->nsh = k;
	p->data_blocks = -1;
}

/*
 * Copy the shared runs back into the memfd and map it again in their place
 * in the host (tracked again): a remap is about to write some of them (a
 * restore to another snapshot). The child's mappings are fixed once it is
 * locked down: it is ended, and the next restore starts a new one without
 * shared runs.
 */
static int share_drop(struct vmm_sandbox *sb)
{
	struct vmm_proc *p = proc_of(sb);
	int rc = 0;

	for (size_t i = 0; i < p->nsh; i++) {
		const struct sh_run *r = &p->sh[i];
		uint8_t *at = sb->mem + r->gpage * VMM_PAGE;
		size_t len = r->npages * VMM_PAGE;
		/* Through the shared mapping into the memfd's file, then the
		 * memfd mapped over it. */
		if ((rc = st_sys_pwrite_all(p->memfd, at, len, (off_t)(r->gpage * VMM_PAGE))) < 0 ||
		    st_sys_mmap(at, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, p->memfd,
				(off_t)(r->gpage * VMM_PAGE), &rc) != (void *)at)
			return rc < 0 ? rc : -EIO;
		if (p->uffd >= 0 && vmm_wp_register(p->uffd, (uint64_t)(uintptr_t)at, len) < 0)
			p->tracked = false;
	}
	proc_kill(p);
	p->all = true;
	free(p->sh);
	p->sh = NULL;
	p->nsh = 0;
	free(p->shared);
	p->shared = NULL;
	if (p->shfd >= 0)
		st_sys_close(p->shfd);
	p->shfd = -1;
	p->data_blocks = -1;
	return 0;
}

static int proc_get_state(struct vmm_sandbox *sb, struct vmm_vcpu_state *st);

/* The host is to write anywhere in guest memory: no shared runs from here
 * on. A child stopped between calls is replaced by one that maps guest
 * memory alone, with the registers it had. */
static int proc_mem_own(struct vmm_sandbox *sb)
{
	struct vmm_proc *p = proc_of(sb);
	struct vmm_vcpu_state st;
	int rc;

	if (!p || !p->nsh)
		return 0;
	bool carry = proc_live(sb) && !p->running && proc_get_state(sb, &st) == 0;
	if ((rc = share_drop(sb)) < 0)
		return rc;
	if (carry && (rc = proc_set_state(sb, &st)) < 0)  /* starts the new child */
		return rc;
	return 0;
}

/* vmm_wp_scan over [lo, hi) (guest pages) but the shared runs (never
 * tracked: a mapping that may never be written cannot be), at base. */
static int scan_unshared(struct vmm_sandbox *sb, int pm, uint64_t base, uint64_t lo, uint64_t hi, unsigned *ioctls)
{
	struct vmm_proc *p = proc_of(sb);
	uint64_t at = lo;
	int rc;

	for (size_t i = 0; i <= p->nsh; i++) {
		uint64_t end = i < p->nsh ? p->sh[i].gpage : hi, next = i < p->nsh ? end + p->sh[i].npages : hi;
		if (end > hi)
			end = hi;
		if (end > at && (rc = vmm_wp_scan(pm, base + at * VMM_PAGE, base + end * VMM_PAGE, written_add, sb,
						  ioctls)) < 0)
			return rc;
		if (next > at)
			at = next;
	}
	return 0;
}

static int proc_dirty_scan(struct vmm_sandbox *sb, struct vmm_runs *out, unsigned *ioctls)
{
	struct vmm_proc *p = proc_of(sb);
	int rc;

	vmm_runs_clear(out);
	/* A policy that rules PAGEMAP_SCAN out (as kernels before 6.7 do) rules
	 * write tracking out too: compare every page with data. */
	if (sb->snap && sb->snap->policy.dirty == VMM_DIRTY_READ)
		p->tracked = false;
	if (p->tracked) {
		/* Both scans, always: each also protects what it reports again. */
		rc = scan_unshared(sb, p->pm_child, 0, STRATA_BOOT_INFO_GPA / VMM_PAGE, p->pages, ioctls);
		if (rc == 0)
			rc = scan_unshared(sb, p->pm_self, (uint64_t)(uintptr_t)sb->mem, 0, p->pages, ioctls);
		if (rc == 0)
			rc = data_protect(sb, false);
		if (rc < 0)
			p->tracked = false;
	}
	if (!p->tracked || p->all) {
		/* Whatever has data; written pages are among them. */
		return data_runs(sb, out);
	}
	for (uint64_t w = 0; w < p->pages / 64 + 1; w++) {
		if (!p->written[w])
			continue;
		for (unsigned b = 0; b < 64; b++)
			if ((p->written[w] >> b) & 1 && (rc = vmm_runs_add(out, w * 64 + b, 1)) < 0)
				return rc;
	}
	return 0;
}

static void proc_dirty_clear(struct vmm_sandbox *sb)
{
	struct vmm_proc *p = proc_of(sb);

	/* Pages that got data since: from now on their writes are tracked. */
	for (size_t i = 0; p->tracked && i < p->fresh.n; i++)
		if (protect(sb, p->fresh.v[i].gpage, p->fresh.v[i].npages) < 0)
			p->tracked = false;
	vmm_runs_clear(&p->fresh);
	memset(p->written, 0, (p->pages / 64 + 1) * sizeof(*p->written));
	p->all = !p->tracked;
}

/* The host's mapping holds every page with data (restore copies the layers
 * in), so only the child's page tables say what the guest touched: its
 * mapping is guest memory at the guest addresses themselves. */
static int proc_touched_scan(struct vmm_sandbox *sb, struct vmm_runs *out)
{
	struct vmm_proc *p = proc_of(sb);
	char path[64];
	int fd, m, rc;

	if (p->dead || p->pid <= 0)
		return -ESRCH;
	if ((m = vmm_dirty_resolve(VMM_DIRTY_AUTO, NULL)) < 0)
		return m;
	/* The handle taken while the child was dumpable (pread only: sharing
	 * it with the write scans is safe); a new open needs CAP_SYS_PTRACE. */
	if (p->pm_child < 0 || (fd = st_sys_dup(p->pm_child)) < 0) {
		snprintf(path, sizeof(path), "/proc/%d/pagemap", (int)p->pid);
		if ((fd = st_sys_openat(AT_FDCWD, path, O_RDONLY, 0)) < 0)
			return fd;
	}
	if (m == VMM_DIRTY_SCAN && !vmm_dirty_scan_works(fd))
		m = VMM_DIRTY_READ;
	rc = vmm_touched_scan_fd(fd, (enum vmm_dirty_mech)m, 0, sb->mem_size, out);
	st_sys_close(fd);
	return rc;
}

/* Shared memory cannot map a layer copy-on-write: copy its pages in (or
 * punch a hole, which reads as zero in both mappings). */
static int proc_map_pages(struct vmm_sandbox *sb, uint64_t gpage, uint64_t n, int fd, uint64_t lpage, bool random)
{
	struct vmm_proc *p = proc_of(sb);
	uint8_t *dst = sb->mem + gpage * VMM_PAGE;
	uint64_t len = n * VMM_PAGE, done = 0;

	(void)random; /* the pages are copied, not mapped */
	for (uint64_t g = gpage; p->shared && g < gpage + n && g < p->pages; g++) {
		int rc = bit(p->shared, g) ? share_drop(sb) : 0;
		if (rc < 0)
			return rc;
	}
	if (fd < 0) {
		/* A hole again: if it gets data later, that is new (data_protect). */
		for (uint64_t g = gpage; p->known && g < gpage + n && g < p->pages; g++)
			p->known[g / 64] &= ~(1ull << (g % 64));
		p->data_blocks = -1;
		return st_sys_punch_hole(p->memfd, (off_t)(gpage * VMM_PAGE), (off_t)len);
	}
	/* Into the memfd through its file, not through the host's mapping of
	 * it: the host's page tables get no entry (and no table) for pages
	 * only the guest uses (docs/restore-from-path.md, "Density"), and the host mapping's
	 * write tracking sees no write of its own. A layer whose file cannot
	 * be spliced from is read into the mapping. */
	off_t in = (off_t)(lpage * VMM_PAGE);
	off_t at = st_sys_lseek(p->memfd, (off_t)(gpage * VMM_PAGE), SEEK_SET);
	if (at < 0)
		return (int)at;
	while (done < len) {
		ssize_t r = st_sys_sendfile(p->memfd, fd, &in, len - done);
		if (r == -EINVAL && done == 0)
			break;
		if (r <= 0)
			return r < 0 ? (int)r : -EIO;
		done += (uint64_t)r;
	}
	while (done < len) {
		ssize_t r = st_sys_pread(fd, dst + done, len - done, (off_t)(lpage * VMM_PAGE + done));
		if (r <= 0)
			return r < 0 ? (int)r : -EIO;
		done += (uint64_t)r;
	}
	return 0;
}

/* pread of the memfd: a hole reads as zero and stays a hole. */
static const uint8_t *proc_page_read(struct vmm_sandbox *sb, uint64_t gpage, uint8_t *buf)
{
	const struct vmm_proc *p = proc_of(sb);

	if (p->shared && gpage < p->pages && bit(p->shared, gpage))
		return sb->mem + gpage * VMM_PAGE;  /* a hole in the memfd: the snapshot's file holds it */
	ssize_t r = st_sys_pread(proc_of(sb)->memfd, buf, VMM_PAGE, (off_t)(gpage * VMM_PAGE));

	return r == (ssize_t)VMM_PAGE ? buf : NULL;
}

static bool all_zero(const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return false;
	return true;
}

/*
 * The debugging check's part for the child (vmm_sandbox_check): after a
 * restore, everything of it the guest can reach is what the snapshot
 * gives. Its mappings are those it had once locked down, and the only
 * writable ones are guest memory, the control pages and the signal stack;
 * the control pages hold the snapshot's registers and FXSAVE bytes, the
 * pids, frame and stack addresses, the thread block's fs base and gs base 0
 * to load, and nothing else; the
 * signal stack is zero below the stopped stub and its first report's image
 * above, with an XSAVE header that loads x87/SSE only. 0 or VMM_E_LEAK
 * with what differs in why.
 */
static int proc_check(struct vmm_sandbox *sb, const struct vmm_vcpu_state *want, char *why, size_t len)
{
	struct vmm_proc *p = proc_of(sb);
	const uint64_t *g = ctl_gregs(p);
	const uint8_t *fx = p->ctl + CTL_FX, *fp = p->alt + p->fp_off;
	struct stat st;
	char *maps = NULL;
	int rc;

	if (!proc_live(sb))
		return 0;  /* replaced, as new, at the next run */
	if (p->maps < 0 || !p->maps_base) {
		snprintf(why, len, "the child's mappings cannot be read");
		return VMM_E_LEAK;
	}
	if ((rc = maps_read(p->maps, &maps)) < 0)
		return rc;
	if ((rc = st_sys_fstat(p->memfd, &st)) < 0)
		goto out_free;
	rc = VMM_E_LEAK;
	if (strcmp(maps, p->maps_base) != 0) {
		snprintf(why, len, "the child's mappings changed since it started");
		goto out_free;
	}
	for (char *line = maps, *next; line && *line; line = next) {
		unsigned long long lo, hi, off, ino;
		char perms[8];
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		if (sscanf(line, "%llx-%llx %7s %llx %*s %llu", &lo, &hi, perms, &off, &ino) != 5)
			continue;
		if (perms[1] != 'w')
			continue;
		bool ours = ino == (unsigned long long)st.st_ino;
		bool guest = ours && lo >= STRATA_BOOT_INFO_GPA && hi <= sb->mem_size && off == lo;
		bool ctl = ours && lo == PROC_CTL && hi == PROC_CTL + PROC_CTL_SIZE && off == sb->mem_size;
		bool alt = ours && lo == PROC_ALT_LO && hi == PROC_END && off == sb->mem_size + PROC_CTL_SIZE;
		if (!guest && !ctl && !alt) {
			snprintf(why, len, "the child can write %s", line);
			goto out_free;
		}
	}
	bool regs = (g[G_EFL] & ~(uint64_t)0x2) == (want->rflags & RFLAGS_GUEST) && g[G_RIP] == want->rip &&
		    memcmp(fx, want->fxsave, 28) == 0 && memcmp(fx + 32, want->fxsave + 32, 416 - 32) == 0;
	for (unsigned i = 0; i < 16; i++)
		regs = regs && g[gpr_to_greg[i]] == want->gpr[i];
	if (!regs) {
		snprintf(why, len, "the registers the child resumes with are not the snapshot's");
		goto out_free;
	}
	uint32_t fsgs;
	uint64_t w[6];
	memcpy(&fsgs, p->ctl + CTL_FSGS, 4);
	memcpy(w, p->ctl + CTL_HOSTPID, sizeof(w));
	if (fsgs != ((p->fsgs ? FSGS_HAVE : 0u) | FSGS_LOAD) || w[0] != p->host_pid || w[1] != (uint64_t)p->pid ||
	    w[2] != STRATA_TLS_GPA || w[3] != 0 || w[4] != p->uc || w[5] != 0 ||
	    memcmp(p->ctl + CTL_SP, &(uint64_t){ p->uc - 8 }, 8) != 0) {
		snprintf(why, len, "the control page's words (pids, frame and stack, fs/gs base to load) are not what a restore gives");
		goto out_free;
	}
	if (!all_zero(p->ctl + CTL_NOPS, CTL_FSGS - CTL_NOPS) ||
	    !all_zero(p->ctl + CTL_SI, CTL_FX - CTL_SI) || !all_zero(p->ctl + CTL_RUNS, PROC_CTL_SIZE - CTL_RUNS) ||
	    memcmp(fx + 416, TMPL(p, p->fp_off) + 416, 96) != 0 || memcmp(fx + 28, TMPL(p, p->fp_off) + 28, 4) != 0) {
		snprintf(why, len, "a control page byte the stub does not read is not zero");
		goto out_free;
	}
	uint64_t bv;
	memcpy(&bv, fp + 512, 8);
	if (!all_zero(p->alt, p->tmpl_off) ||
	    memcmp(p->alt + p->tmpl_off, p->tmpl, p->fp_off - p->tmpl_off) != 0 ||
	    memcmp(fp, TMPL(p, p->fp_off), 512) != 0 || bv != 3 || !all_zero(fp + 520, p->xsize - 520) ||
	    memcmp(fp + p->xsize, TMPL(p, p->fp_off) + p->xsize, PROC_ALT_SIZE - p->fp_off - p->xsize) != 0) {
		snprintf(why, len, "the signal stack is not as the child started (or its XSAVE image loads more than x87/SSE)");
		goto out_free;
	}
	rc = 0;
out_free:
	free(maps);
	return rc;
}

const struct vmm_backend vmm_backend_process = {
	.kind = VMM_BACKEND_PROCESS,
	.name = "process",
	.check = vmm_process_check,
	.hint = "the kvm backend, --backend kvm, may",
	.auto_hint = "and /dev/kvm, for the kvm backend, is missing",
	.mem_new = proc_mem_new,
	.start = proc_start,
	.destroy = proc_destroy,
	.live = proc_live,
	.set_state = proc_set_state,
	.stage_state = proc_set_state,
	.get_state = proc_get_state,
	.get_cr2 = proc_get_cr2,
	.run = proc_run,
	.kick = proc_kick,
	.halt = proc_halt,
	.dirty_scan = proc_dirty_scan,
	.touched_scan = proc_touched_scan,
	.dirty_clear = proc_dirty_clear,
	.map_pages = proc_map_pages,
	.page_read = proc_page_read,
	.mem_own = proc_mem_own,
	.check_state = proc_check,
	.private_pages = false,
};

const char *vmm_proc_end_str(int status, char *buf, size_t len)
{
	if (status < 0)
		snprintf(buf, len, "ended, reaped by another waiter of the host (its waitpid(-1), or SIGCHLD ignored) "
			 "on a kernel that keeps no exit status for strata (Linux 6.15 does)");
	else if (status >> 8)
		snprintf(buf, len, "exited with code %d", status >> 8);
	else if (status & 0x7f)
		snprintf(buf, len, "was killed by signal %d (SIG%s)%s", status & 0x7f,
			 sigabbrev_np(status & 0x7f) ? sigabbrev_np(status & 0x7f) : "?", (status & 0x80) ? ", core dumped" : "");
	else
		snprintf(buf, len, "exited with code 0");
	return buf;
}
