/* proc_child.c: the process backend's child program (freestanding, exec'd from memory): maps guest memory, arms the stub, locks itself down. */
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/ioctl.h>
#include <linux/seccomp.h>
#include <linux/userfaultfd.h>
#include <stddef.h>
#include <stdint.h>

#include "vmm/abi.h"
#include "vmm/proc/proc_abi.h"

/*
 * Built without libc and linked at PROC_BASE (vmm/meson.build): the host
 * starts it with posix_spawn on a memfd holding this program, guest memory
 * as fd 3, the snapshot's file for its shared runs as fd 5 (if any, read-only;
 * closed once mapped), nothing else open, an empty environment, argv[1] = the guest
 * memory size and argv[2] = the host's pid, in a directory that no longer
 * exists. A new program has none of the host's memory, so there is
 * nothing to unmap, and exec costs far less than copying the host's page
 * tables with fork (docs/vmm.md).
 *
 * Once locked down (stub_lock) the child is not a general-purpose process:
 * no capability, no core dump, an address-space limit near its memory, no
 * stack but the signal stack, no data of its own, and a filter that lets
 * the stub stop itself, return from its handler, see its parent, make
 * itself non-dumpable and exit: no call that maps, unmaps or protects
 * memory.
 */

#define NR_mmap 9
#define NR_mprotect 10
#define NR_munmap 11
#define NR_rt_sigaction 13
#define NR_rt_sigprocmask 14
#define NR_rt_sigreturn 15
#define NR_ioctl 16
#define NR_madvise 28
#define NR_dup2 33
#define NR_getppid 110
#define NR_sigaltstack 131
#define NR_prctl 157
#define NR_getpid 39
#define NR_tgkill 234
#define NR_exit_group 231
#define NR_seccomp 317
#define NR_userfaultfd 323
#define NR_close 3
#define NR_capset 126
#define NR_setrlimit 160
#define NR_arch_prctl 158
#define ARCH_SET_FS 0x1002

#define PROT_NONE 0
#define PROT_READ 1
#define PROT_WRITE 2
#define MAP_SHARED 0x01
#define MAP_PRIVATE 0x02
#define MAP_FIXED 0x10
#define MAP_ANONYMOUS 0x20
#define MAP_FIXED_NOREPLACE 0x100000
#define SA_SIGINFO 4
#define SA_ONSTACK 0x08000000
#define SA_RESTORER 0x04000000
#define SIG_SETMASK 2
#define PR_SET_NO_NEW_PRIVS 38
#define PR_SET_PDEATHSIG 1
#define PR_SET_DUMPABLE 4
#define PR_CAPBSET_DROP 24
#define PR_SET_SECUREBITS 28
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#define SS_AUTODISARM (1u << 31)
#define RLIMIT_CORE_ 4
#define RLIMIT_MEMLOCK_ 8
#define RLIMIT_AS_ 9
#define AT_HWCAP2 26
#define HWCAP2_FSGSBASE (1 << 1)
#define EPERM_ 1
#define EINVAL_ 22
/* Every securebit and its lock: no root magic, no ambient raise (linux/securebits.h). */
#define SECUREBITS_ALL_LOCKED 0xef
#define SIGKILL_ 9
#define O_CLOEXEC 02000000
#define UFFD_USER_MODE_ONLY 1
#define UFFD_WP_FEATURES ((1 << 12) | (1 << 13) | (1 << 15)) /* WP_HUGETLBFS_SHMEM, WP_UNPOPULATED, WP_ASYNC */

enum { SIGSTOP_ = 19, SIGILL_ = 4, SIGTRAP_ = 5, SIGBUS_ = 7, SIGFPE_ = 8, SIGUSR1_ = 10, SIGSEGV_ = 11, SIGSYS_ = 31 };

/* One static program: every symbol is local, reached RIP-relative (no GOT). */
#pragma GCC visibility push(hidden)
extern const char vmm_proc_stub_handler[], vmm_proc_stub_restorer[], vmm_proc_stub_sys_ret[], vmm_proc_stub_stop_ret[];
uint64_t stub_main(const uint64_t *sp);
void stub_lock(uint64_t mem_size);

static long sys6(long nr, long a, long b, long c, long d, long e, long f)
{
	register long r10 __asm__("r10") = d, r8 __asm__("r8") = e, r9 __asm__("r9") = f;
	long ret;

	__asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

static long sys3(long nr, long a, long b, long c)
{
	return sys6(nr, a, b, c, 0, 0, 0);
}

static uint64_t parse_u64(const char *s)
{
	uint64_t v = 0;

	for (; *s >= '0' && *s <= '9'; s++)
		v = v * 10 + (uint64_t)(*s - '0');
	return v;
}

__attribute__((noreturn)) static void fail(int code)
{
	for (;;)
		sys3(NR_exit_group, code, 0, 0);
}

/* The compiler may call these for struct copies; there is no libc. */
void *memset(void *d, int c, size_t n);
void *memcpy(void *d, const void *s, size_t n);
void *memset(void *d, int c, size_t n)
{
	volatile uint8_t *b = d;

	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)c;
	return d;
}

void *memcpy(void *d, const void *s, size_t n)
{
	volatile uint8_t *b = d;
	const uint8_t *a = s;

	for (size_t i = 0; i < n; i++)
		b[i] = a[i];
	return d;
}

static void zero(void *p, size_t n)
{
	volatile uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		b[i] = 0;
}

struct kernel_sigaction {
	uint64_t handler, flags, restorer, mask;
};

/*
 * The filter: x86-64 system calls from the stub's two `syscall`
 * instructions, and only these, each with the arguments the stub passes:
 * from its stop, tgkill(self, self, SIGSTOP) alone; from `sys`,
 * rt_sigreturn, getppid, exit_group, prctl(PR_SET_DUMPABLE, 0) and
 * arch_prctl(ARCH_SET_FS, STRATA_TLS_GPA) (the thread block put back at a
 * restore where user code cannot write fs base; no other address). The
 * stop has its own site because what follows it trusts no register (the
 * host says where to resume, proc_stub.S): a guest that stops itself there
 * resumes as the host says, not in its own code. Anything else from the
 * stub kills the child (the guest can jump there with any registers);
 * anything from elsewhere (the guest) raises SIGSYS, which the host
 * reports as the #UD (or #GP for `int $0x80`) the guest would get on KVM.
 * No memory call is left: the host's protections are applied before the
 * filter (stub_main), so no mapping can escape write tracking, expose the
 * page tables, make the stub writable or grow the child.
 */
#define FILTER_MAX 40
static unsigned filter_build(struct sock_filter *f, uint32_t pid)
{
	static const uint32_t allowed[] = { NR_rt_sigreturn, NR_getppid, NR_exit_group };
	const uint64_t site = (uint64_t)(uintptr_t)vmm_proc_stub_sys_ret;
	const uint64_t stop = (uint64_t)(uintptr_t)vmm_proc_stub_stop_ret;
	const unsigned na = sizeof(allowed) / sizeof(allowed[0]);
	/* 0-7: arch, ip, sys's nr; 8..: allowed; pr: prctl's 5; ap: arch_prctl's 7; tg: the stop's 8. */
	const unsigned pr = 8 + na, ap = pr + 5, tg = ap + 7, kill = tg + 8, trap = kill + 1, allow = trap + 1;
	unsigned k = 0;
#define LD(field) (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)(field))
#define JEQ(v, yes, no) (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (v), (uint8_t)((yes) - k - 1), (uint8_t)((no) - k - 1))

	_Static_assert(FILTER_MAX >= 8 + 3 + 5 + 7 + 8 + 3, "the filter fits");
	f[k++] = LD(offsetof(struct seccomp_data, arch));
	f[k] = JEQ(AUDIT_ARCH_X86_64, k + 1, trap), k++;
	/* Both sites are in the child's code, just above PROC_BASE: one high half. */
	f[k++] = LD(offsetof(struct seccomp_data, instruction_pointer) + 4);
	f[k] = JEQ((uint32_t)(site >> 32), k + 1, trap), k++;
	f[k++] = LD(offsetof(struct seccomp_data, instruction_pointer));
	f[k] = JEQ((uint32_t)stop, tg, k + 1), k++;
	f[k] = JEQ((uint32_t)site, k + 1, trap), k++;
	f[k++] = LD(offsetof(struct seccomp_data, nr));
	for (unsigned i = 0; i < na; i++, k++)
		f[k] = JEQ(allowed[i], allow, k + 1);
	/* pr (= k): prctl(PR_SET_DUMPABLE, 0) only (the kernel refuses any value but
	 * 0 and 1 in the whole 64 bits, so the low half decides). */
	f[k] = JEQ(NR_prctl, k + 1, ap), k++;
	f[k++] = LD(offsetof(struct seccomp_data, args[0]));
	f[k] = JEQ(PR_SET_DUMPABLE, k + 1, kill), k++;
	f[k++] = LD(offsetof(struct seccomp_data, args[1]));
	f[k] = JEQ(0, allow, kill), k++;
	/* ap (= k): arch_prctl(ARCH_SET_FS, STRATA_TLS_GPA) only, all 64 bits of
	 * the address (the kernel takes the option as an int: its low half). */
	f[k] = JEQ(NR_arch_prctl, k + 1, kill), k++;
	f[k++] = LD(offsetof(struct seccomp_data, args[0]));
	f[k] = JEQ(ARCH_SET_FS, k + 1, kill), k++;
	f[k++] = LD(offsetof(struct seccomp_data, args[1]));
	f[k] = JEQ((uint32_t)STRATA_TLS_GPA, k + 1, kill), k++;
	f[k++] = LD(offsetof(struct seccomp_data, args[1]) + 4);
	f[k] = JEQ((uint32_t)((uint64_t)STRATA_TLS_GPA >> 32), allow, kill), k++;
	/* tg: the stub stops itself; nothing else may be signalled. */
	f[k++] = LD(offsetof(struct seccomp_data, nr));
	f[k] = JEQ(NR_tgkill, k + 1, kill), k++;
	f[k++] = LD(offsetof(struct seccomp_data, args[0]));
	f[k] = JEQ(pid, k + 1, kill), k++;
	f[k++] = LD(offsetof(struct seccomp_data, args[1]));
	f[k] = JEQ(pid, k + 1, kill), k++;
	f[k++] = LD(offsetof(struct seccomp_data, args[2]));
	f[k] = JEQ(SIGSTOP_, allow, kill), k++;
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
#undef LD
#undef JEQ
	return k;
}

/* Register the guest range for write tracking (Linux 6.7: asynchronous
 * write-protect). The userfaultfd stays open as fd 4: the host takes a
 * copy (pidfd_getfd) to protect pages and scans /proc/PID/pagemap. */
static void track(uint64_t lo, uint64_t len)
{
	long fd = sys3(NR_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY, 0, 0);
	struct uffdio_api api;
	struct uffdio_register reg;

	if (fd < 0)
		return;
	zero(&api, sizeof(api));
	zero(&reg, sizeof(reg));
	api.api = UFFD_API;
	api.features = UFFD_WP_FEATURES;
	reg.range.start = lo;
	reg.range.len = len;
	reg.mode = UFFDIO_REGISTER_MODE_WP;
	if (sys3(NR_ioctl, fd, (long)UFFDIO_API, (long)&api) < 0 || sys3(NR_ioctl, fd, (long)UFFDIO_REGISTER, (long)&reg) < 0) {
		sys3(NR_close, fd, 0, 0);
		return;
	}
	if (fd != 4) {
		if (sys3(NR_dup2, fd, 4, 0) != 4)
			return;
		sys3(NR_close, fd, 0, 0);
	}
	*(volatile uint32_t *)(PROC_CTL + CTL_WP) = 1;
}

/* The host's protections for guest memory (vmm_x86_user_runs: the page
 * tables' user permissions), from the control page; each inside [lo, end).
 * The first pass applies the protections; the second (shared) maps the
 * shared runs, read-only, over guest memory from the snapshot's file (fd
 * PROC_SHARED_FD), once write tracking is registered: a mapping that can
 * never be writable cannot be registered, and is never written. */
static void protect_runs(uint64_t lo, uint64_t end, int shared)
{
	uint32_t n = *(volatile uint32_t *)(PROC_CTL + CTL_NOPS);

	if (n > CTL_RUNS_MAX)
		fail(130);
	for (uint32_t i = 0; i < n; i++) {
		const volatile uint64_t *r = (const volatile uint64_t *)(PROC_CTL + CTL_RUNS + (uint64_t)i * CTL_RUN_SIZE);
		uint64_t va = r[0], len = r[1], prot = r[2] & 7, flags = r[2] & ((1ull << RUN_OFF_SHIFT) - 1);
		if (va < lo || va > end || len > end - va || (flags & ~(uint64_t)(7 | RUN_SHARED)))
			fail(130);
		if (!(flags & RUN_SHARED)) {
			if (!shared && sys3(NR_mprotect, (long)va, (long)len, (long)prot) < 0)
				fail(130);
			continue;
		}
		if (!shared)
			continue;
		/* Never writable: the file is open read-only (the kernel refuses
		 * PROT_WRITE on it, and mprotect to it later). */
		if ((prot & PROT_WRITE) || sys6(NR_mmap, (long)va, (long)len, (long)prot, MAP_SHARED | MAP_FIXED,
						PROC_SHARED_FD, (long)((r[2] >> RUN_OFF_SHIFT) << RUN_OFF_SHIFT)) != (long)va)
			fail(135);
	}
	if (shared)
		*(volatile uint32_t *)(PROC_CTL + CTL_NOPS) = 0;
}

/* The value of auxv entry `type` after the initial stack's envp (0 if none). */
static uint64_t auxv_get(const uint64_t *sp, uint64_t type)
{
	const uint64_t *p = sp + 1 + sp[0] + 1;  /* argc, argv[argc], NULL */

	while (*p)
		p++;  /* envp */
	for (p++; p[0]; p += 2)
		if (p[0] == type)
			return p[1];
	return 0;
}

struct rlimit_ {
	uint64_t cur, max;
};

static void limit(int res, uint64_t v)
{
	struct rlimit_ r = { v, v };

	if (sys3(NR_setrlimit, res, (long)&r, 0) < 0)
		fail(131);
}

/* Every capability gone, for good: securebits locked (no root magic),
 * the bounding and ambient sets emptied where the child may (a host
 * without CAP_SETPCAP has nothing to drop there), then the three sets. */
static void caps_drop(void)
{
	struct {
		uint32_t version;
		int pid;
	} hdr = { 0x20080522, 0 };  /* _LINUX_CAPABILITY_VERSION_3 */
	struct {
		uint32_t effective, permitted, inheritable;
	} data[2];

	long r = sys3(NR_prctl, PR_SET_SECUREBITS, SECUREBITS_ALL_LOCKED, 0);
	if (r < 0 && r != -EPERM_)
		fail(132);
	for (long cap = 0; cap < 64; cap++)
		if (sys3(NR_prctl, PR_CAPBSET_DROP, cap, 0) == -EINVAL_)
			break;
	sys6(NR_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0, 0);
	zero(data, sizeof(data));
	if (sys3(NR_capset, (long)&hdr, (long)data, 0) < 0)
		fail(132);
}

uint64_t stub_main(const uint64_t *sp)
{
	uint64_t mem_size = sp[0] >= 3 ? parse_u64((const char *)sp[2]) : 0;
	uint64_t host = sp[0] >= 3 ? parse_u64((const char *)sp[3]) : 0;

	if (mem_size <= STRATA_BOOT_INFO_GPA || mem_size > (4ull << 30) || mem_size % 4096)
		fail(120);
	/* Die with the host thread that cloned us, the host's spawner, which
	 * ends only with the host process (a stopped child would otherwise
	 * outlive a host that never freed it); it may be gone already. */
	if (sys3(NR_prctl, PR_SET_PDEATHSIG, SIGKILL_, 0) < 0 || (uint64_t)sys3(NR_getppid, 0, 0, 0) != host)
		fail(121);
	/* No core, even before the lock: it would hold guest memory. */
	limit(RLIMIT_CORE_, 0);
	/* Control pages and the signal stack, both shared with the host, which
	 * rewrites them on every restore. */
	if (sys6(NR_mmap, (long)PROC_CTL, PROC_CTL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, 3,
		 (long)mem_size) != (long)PROC_CTL)
		fail(123);
	if (sys6(NR_mmap, (long)PROC_ALT_LO, PROC_ALT_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, 3,
		 (long)(mem_size + PROC_CTL_SIZE)) != (long)PROC_ALT_LO)
		fail(124);
	*(volatile uint64_t *)(PROC_CTL + CTL_HOSTPID) = (uint64_t)sys3(NR_getppid, 0, 0, 0);
	*(volatile uint64_t *)(PROC_CTL + CTL_PID) = (uint64_t)sys3(NR_getpid, 0, 0, 0);
	*(volatile uint32_t *)(PROC_CTL + CTL_FSGS) = (auxv_get(sp, AT_HWCAP2) & HWCAP2_FSGSBASE) ? FSGS_HAVE : 0;
	/* Guest memory at the guest addresses, with the protections the host
	 * wrote into the control page. Pages below the boot info are
	 * supervisor-only (page tables, GDT, IDT, exception stacks): CPL 3
	 * never reaches them, so they are not mapped. */
	const uint64_t lo = STRATA_BOOT_INFO_GPA;
	if (sys6(NR_mmap, (long)lo, (long)(mem_size - lo), PROT_NONE, MAP_SHARED | MAP_FIXED, 3, (long)lo) != (long)lo)
		fail(129);
	protect_runs(lo, mem_size, 0);
	track(lo, mem_size - lo);
	protect_runs(lo, mem_size, 1);
	sys3(NR_close, PROC_SHARED_FD, 0, 0);  /* the shared runs' file, if any: nothing maps again */
	/* fs base: the thread block in the boot-info page (the stack
	 * protector's canary at %fs:0x28), set here, before the filter, which
	 * refuses arch_prctl. Where AT_HWCAP2 has FSGSBASE, user code can
	 * write fs base itself, and the stub loads this value again at every
	 * restore (wrfsbase); elsewhere nothing can change it. This code is
	 * built without the stack protector: it reads nothing at fs. */
	if (sys3(NR_arch_prctl, ARCH_SET_FS, STRATA_TLS_GPA, 0) < 0)
		fail(134);
	/* Signals disarm the stack while they run on it (SS_AUTODISARM): every
	 * report's frame is at its top, wherever the guest's stack pointer is. */
	struct {
		uint64_t sp;
		uint32_t flags;
		int pad;
		uint64_t size;
	} ss = { PROC_ALT_LO, SS_AUTODISARM, 0, PROC_ALT_SIZE };
	if (sys3(NR_sigaltstack, (long)&ss, 0, 0) < 0)
		fail(125);
	static const int sigs[] = { SIGSEGV_, SIGBUS_, SIGFPE_, SIGILL_, SIGTRAP_, SIGSYS_, SIGUSR1_ };
	for (unsigned i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		struct kernel_sigaction ka = { (uint64_t)(uintptr_t)vmm_proc_stub_handler, SA_SIGINFO | SA_ONSTACK | SA_RESTORER,
					       (uint64_t)(uintptr_t)vmm_proc_stub_restorer, ~0ull };
		if (sys6(NR_rt_sigaction, sigs[i], (long)&ka, 0, 8, 0, 0) < 0)
			fail(126);
	}
	return mem_size;
}

/*
 * On the signal stack (proc_stub.S moved there): unmap the kernel's startup
 * stack and the vDSO, bound the child, drop every
 * capability and install the filter. Signals are unblocked last: none can
 * come before the host has seen the first report.
 */
void stub_lock(uint64_t mem_size)
{
	struct sock_filter filter[FILTER_MAX];

	/* Everything above the signal stack is the kernel's: the startup
	 * stack (argv, envp and auxv, read by now) and the vDSO with its data
	 * pages, which nothing here calls (every handler has its restorer).
	 * One call unmaps them all: fewer mappings, and the top-level page
	 * table's entry for the top of user space is never filled (the
	 * child's page tables cover guest memory and PROC_BASE only). */
	if (sys3(NR_munmap, (long)PROC_END, (long)(PROC_TASK_TOP - PROC_END), 0) < 0)
		fail(133);
	/* The address space it has (guest memory and these pages), and no
	 * more: nothing may map more anyway, and nothing locks memory. */
	limit(RLIMIT_AS_, mem_size + (1ull << 20));
	limit(RLIMIT_MEMLOCK_, 0);
	caps_drop();
	uint64_t none = 0;
	if (sys6(NR_rt_sigprocmask, SIG_SETMASK, (long)&none, 0, 8, 0, 0) < 0)
		fail(127);
	struct sock_fprog prog = { .len = (unsigned short)filter_build(filter, (uint32_t)*(volatile uint64_t *)(PROC_CTL + CTL_PID)),
				   .filter = filter };
	if (sys6(NR_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0, 0) < 0 ||
	    sys3(NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, (long)&prog) < 0)
		fail(128);
	/* From here only the stub's `syscall` works; the caller reports ready. */
}
