/* hostileguest.c: a guest that tries to keep state across a restore or reach past its memory, one function per channel (tests/snap/test_hostile*.c, tests/e2e/hostile.sh). */
#include <stdbool.h>
#include <stdint.h>

#include "include/strata_guest.h"

/*
 * Each channel function follows one convention: it reads the state it
 * hides, adds one, writes it back and returns the new value. A restore
 * that gives back nothing but the snapshot makes every such call after a
 * restore return 1 (or fail with a reason, where the channel is closed by
 * refusing the operation outright); 2 means state survived.
 *
 * The vector-register channels live in hostile_vec.c.
 */

/* The control case: a counter in guest memory, which a restore resets. */
static int64_t memory_counter;

STRATA_FUNCTION(memory_next, "i()")
{
	return strata_ret_i64(c, ++memory_counter);
}

/*
 * Every page the guest may write, overwritten with a sequence from seed:
 * its own data (a 64 KiB array and the counter above), the stack below
 * this frame, the input buffer, the output buffer past the result frame's
 * header, the whole heap (its allocator's state too: the next call that
 * allocates is undefined until a restore). In-memory snapshot tests run
 * it between a snapshot and its restore. Returns the pages written.
 */
static uint64_t scribble_data[16 * 512];

static int64_t scribble(uint64_t lo, uint64_t hi, uint64_t *x)
{
	lo = (lo + 7) & ~7ull;
	for (volatile uint64_t *w = (volatile uint64_t *)(uintptr_t)lo; (uint64_t)(uintptr_t)w + 8 <= hi; w++) {
		*x ^= *x << 13;
		*x ^= *x >> 7;
		*x ^= *x << 17;
		*w = *x;
	}
	return hi > lo ? (int64_t)((hi - lo + 4095) / 4096) : 0;
}

STRATA_FUNCTION(scribble_all, "i(i)")
{
	uint64_t x = (uint64_t)strata_arg_i64(c, 0) * 0x9E3779B97F4A7C15ull | 1, sp;
	const struct strata_boot_info *bi = strata_boot_info();
	int64_t pages = 0;

	__asm__ volatile("mov %%rsp, %0" : "=r"(sp));
	pages += scribble((uint64_t)(uintptr_t)scribble_data, (uint64_t)(uintptr_t)(scribble_data + 16 * 512), &x);
	memory_counter = (int64_t)x;
	pages += scribble(bi->stack_lo, sp - 512, &x);
	pages += scribble(bi->in_addr, bi->in_addr + bi->in_size, &x);
	pages += scribble(bi->out_addr + 256, bi->out_addr + bi->out_size, &x);
	pages += scribble(bi->heap_addr, bi->heap_addr + bi->heap_size, &x);
	return strata_ret_i64(c, pages);
}

/*
 * Probes of a recycled VM shell (tests/snap/test_hostile.c): what the
 * guest itself sees through its page tables, not the host's view of its
 * memory. find_word(lo, hi, nw) returns the first 8-byte-aligned address
 * of [lo, hi) holding ~nw, or 0 (the complement: the argument itself, in
 * the input buffer, is not the word sought); poke(addr) stores a byte at
 * addr and returns 1, unless the store faults.
 */
STRATA_FUNCTION(find_word, "i(iii)")
{
	uint64_t lo = ((uint64_t)strata_arg_i64(c, 0) + 7) & ~7ull, hi = (uint64_t)strata_arg_i64(c, 1);
	uint64_t w = ~(uint64_t)strata_arg_i64(c, 2);

	for (uint64_t a = lo; a + 8 <= hi; a += 8)
		if (*(const volatile uint64_t *)(uintptr_t)a == w)
			return strata_ret_i64(c, (int64_t)a);
	return strata_ret_i64(c, 0);
}

STRATA_FUNCTION(poke, "i(i)")
{
	*(volatile uint8_t *)(uintptr_t)strata_arg_i64(c, 0) = 1;
	return strata_ret_i64(c, 1);
}

/*
 * The process backend's channels. There the guest runs inside a child
 * process whose own program, control pages and stacks sit at PROC_BASE
 * (vmm/proc/proc_abi.h), and whose one allowed `syscall` instruction is the
 * stub's. On KVM nothing is mapped there: each of these functions faults
 * on its first access (a guest fault, which closes the channel too).
 */
#include "vmm/proc/proc_abi.h"

/* Linux x86-64 system call numbers and flags (uapi asm/unistd_64.h, mman). */
#define NR_mmap 9
#define NR_mprotect 10
#define NR_madvise 28
#define NR_getpid 39
#define PROT_R 1
#define PROT_W 2
#define PROT_X 4
#define MAP_SHARED_ 0x01
#define MAP_PRIVATE_ 0x02
#define MAP_ANON_ 0x20
#define MAP_NORESERVE_ 0x4000
#define MAP_LOCKED_ 0x2000
#define MAP_FIXED_NOREPLACE_ 0x100000
#define MADV_REMOVE_ 9
#define MADV_HWPOISON_ 100
#define MADV_SOFT_OFFLINE_ 101
#define EEXIST_ 17
#define EPERM_ 1
#define GUEST_MEMFD 3 /* guest memory, as the child has it open */

/*
 * The stub's `syscall; ret`, found as an attacker would: by scanning the
 * child program's code for it. The stub's restorer follows it (`mov
 * $15, %eax`: rt_sigreturn), which tells it from any other `syscall`
 * the compiler emitted before a `ret`. 0 if not found.
 */
static uint64_t sys_site(void)
{
	static const uint8_t sig[] = { 0x0f, 0x05, 0xc3, 0xb8, 0x0f, 0x00, 0x00, 0x00 };
	const volatile uint8_t *p = (const volatile uint8_t *)(uintptr_t)(PROC_CODE + 0x1000);

	for (uint64_t i = 0; i + sizeof(sig) < 0x1000; i++) {
		unsigned k = 0;
		while (k < sizeof(sig) && p[i + k] == sig[k])
			k++;
		if (k == sizeof(sig))
			return (uint64_t)(uintptr_t)(p + i);
	}
	return 0;
}

/* A system call through the stub's site, with any arguments. */
static long stub_sys(long nr, long a, long b, long c, long d, long e, long f)
{
	uint64_t site = sys_site();
	register long r10 __asm__("r10") = d, r8 __asm__("r8") = e, r9 __asm__("r9") = f;
	long ret;

	if (!site)
		return -38; /* ENOSYS: nothing to jump to */
	__asm__ volatile("call *%[site]"
			 : "=a"(ret)
			 : [site] "r"(site), "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

/* A counter in a word of the child's own memory at `addr`. */
static int64_t word_next(uint64_t addr)
{
	volatile int64_t *w = (volatile int64_t *)(uintptr_t)addr;

	return ++*w;
}

/* A plain store to the signal stack the stub's reports run on (its low end,
 * below any signal frame). */
STRATA_FUNCTION(altstack_next, "i()")
{
	return strata_ret_i64(c, word_next(PROC_ALT_LO + 512));
}

/* A plain store to the stub's main stack, past the words it keeps there. */
STRATA_FUNCTION(stack_next, "i()")
{
	return strata_ret_i64(c, word_next(PROC_STACK_LO + 4096));
}

/* A store to an unused word at the end of the control pages. */
STRATA_FUNCTION(ctl_next, "i()")
{
	return strata_ret_i64(c, word_next(PROC_CTL + PROC_CTL_SIZE - 8));
}

/* The child program's own data: its first page past the code (.bss). */
STRATA_FUNCTION(child_data_next, "i()")
{
	return strata_ret_i64(c, word_next(PROC_CODE + 0x3ff8));
}

/* The fs and gs bases (wrfsbase/wrgsbase, where the kernel enables them);
 * fs base counts from the thread block the host points it at. */
STRATA_FUNCTION(fsbase_next, "i()")
{
	uint64_t v;

	__asm__ volatile("rdfsbase %0" : "=r"(v));
	v++;
	__asm__ volatile("wrfsbase %0" : : "r"(v));
	return strata_ret_i64(c, (int64_t)(v - STRATA_TLS_GPA));
}

/*
 * The thread block (tests/snap/test_hostile.c: fs base and canary after a
 * restore are the snapshot's). Read through fs on both backends: the word
 * at %fs:0 is the block's own address, %fs:0x28 the canary.
 */
STRATA_FUNCTION(fs_self, "i()")
{
	uint64_t v;

	__asm__ volatile("movq %%fs:0, %0" : "=r"(v));
	return strata_ret_i64(c, (int64_t)v);
}

STRATA_FUNCTION(fs_canary, "i()")
{
	uint64_t v;

	__asm__ volatile("movq %%fs:0x28, %0" : "=r"(v));
	return strata_ret_i64(c, (int64_t)v);
}

/* fs base moved outside guest memory (the child's control pages), where
 * user code may write it (wrfsbase; #UD on KVM and without FSGSBASE). */
STRATA_FUNCTION(fsbase_far, "i()")
{
	uint64_t v = PROC_CTL;

	__asm__ volatile("wrfsbase %0" : : "r"(v));
	return strata_ret_i64(c, 1);
}

/* A null selector loaded into fs: at CPL 3 on both backends; on Intel CPUs
 * it clears fs base too. */
STRATA_FUNCTION(fs_selector_null, "i()")
{
	__asm__ volatile("movl %0, %%fs" : : "r"(0) : "memory");
	return strata_ret_i64(c, 1);
}

STRATA_FUNCTION(gsbase_next, "i()")
{
	uint64_t v;

	__asm__ volatile("rdgsbase %0" : "=r"(v));
	v++;
	__asm__ volatile("wrgsbase %0" : : "r"(v));
	return strata_ret_i64(c, (int64_t)v);
}

/* A call that the stub's filter refused comes back as this failure. */
static int refused(struct strata_call *c, const char *what, long rc)
{
	return strata_fail(c, "%s: %ld", what, rc);
}

/*
 * A second mapping of guest memory (the memory fd, offset = guest address)
 * over a page that holds data, written through that mapping: no write
 * tracking is registered on it. Word 0 keeps the page's data; word 1 is
 * the counter.
 */
static volatile int64_t alias_page[512] __attribute__((aligned(4096))) = { 1 };

STRATA_FUNCTION(memfd_alias_next, "i()")
{
	const long at = 0x500000000;
	long r = stub_sys(NR_mmap, at, 4096, PROT_R | PROT_W, MAP_SHARED_ | MAP_FIXED_NOREPLACE_, GUEST_MEMFD,
			  (long)(uintptr_t)alias_page);

	if (r != at && r != -EEXIST_)
		return refused(c, "mmap of the memory fd", r);
	volatile int64_t *alias = (volatile int64_t *)(uintptr_t)at;
	return strata_ret_i64(c, ++alias[1]);
}

/*
 * A hole punched in guest memory (MADV_REMOVE): the page reads as zero in
 * both mappings. 2 if a page the snapshot holds non-zero was found as a
 * hole (a previous life's madvise survived), else punch it and say 1.
 */
static volatile int64_t remove_page[512] __attribute__((aligned(4096))) = { 1 };

STRATA_FUNCTION(madv_remove_next, "i()")
{
	if (remove_page[0] == 0)
		return strata_ret_i64(c, 2);
	long r = stub_sys(NR_madvise, (long)(uintptr_t)remove_page, 4096, MADV_REMOVE_, 0, 0, 0);
	if (r != 0)
		return refused(c, "madvise(MADV_REMOVE)", r);
	return strata_ret_i64(c, 1);
}

/*
 * The stub's code page made writable and executable, a routine written
 * into its unused tail (`mov $n, %eax; ret`) and called: n counts lives.
 */
STRATA_FUNCTION(stub_code_next, "i()")
{
	uint64_t site = sys_site();

	if (!site)
		return strata_fail(c, "no stub found");
	uint64_t page = site & ~0xfffull;
	volatile uint8_t *code = (volatile uint8_t *)(uintptr_t)(page + 0xf00);
	int64_t n = 0;
	if (code[0] == 0xb8 && code[5] == 0xc3)
		n = ((int64_t (*)(void))(uintptr_t)code)();
	long r = stub_sys(NR_mprotect, (long)page, 4096, PROT_R | PROT_W | PROT_X, 0, 0, 0);
	if (r != 0)
		return refused(c, "mprotect of the stub's code", r);
	n++;
	code[0] = 0xb8;
	code[1] = (uint8_t)n;
	code[2] = (uint8_t)(n >> 8);
	code[3] = (uint8_t)(n >> 16);
	code[4] = (uint8_t)(n >> 24);
	code[5] = 0xc3;
	return strata_ret_i64(c, ((int64_t (*)(void))(uintptr_t)code)());
}

/* Anonymous memory of its own at a fixed address: the counter lives in its
 * first word; `extra` flags (MAP_LOCKED) and `len` bytes (its last page is
 * touched too, so the whole span counts). */
static int anon_next(struct strata_call *c, long at, long len, long extra)
{
	long r = stub_sys(NR_mmap, at, len, PROT_R | PROT_W, MAP_PRIVATE_ | MAP_ANON_ | MAP_NORESERVE_ | MAP_FIXED_NOREPLACE_ | extra,
			  -1, 0);

	if (r != at && r != -EEXIST_)
		return refused(c, "mmap", r);
	volatile int64_t *w = (volatile int64_t *)(uintptr_t)at;
	((volatile int64_t *)(uintptr_t)(at + len - 8))[0] = 1;
	return strata_ret_i64(c, ++w[0]);
}

/* 1 GiB of the child's address space, where guest memory is a few MiB. */
STRATA_FUNCTION(mmap_1g_next, "i()")
{
	return anon_next(c, 0x200000000, 1l << 30, 0);
}

/* Locked memory (MAP_LOCKED: CAP_IPC_LOCK or RLIMIT_MEMLOCK). */
STRATA_FUNCTION(mlock_next, "i()")
{
	return anon_next(c, 0x300000000, 4096, MAP_LOCKED_);
}

/*
 * MADV_HWPOISON and MADV_SOFT_OFFLINE reach the kernel's memory-failure
 * code only with CAP_SYS_ADMIN: asked of an address with nothing mapped
 * (so nothing is poisoned), a child without it gets EPERM (1); with it,
 * the kernel goes on and fails to find a page (2).
 */
static int poison_try(struct strata_call *c, int advice)
{
	long r = stub_sys(NR_madvise, 0x400000000, 4096, advice, 0, 0, 0);

	if (r == -EPERM_)
		return strata_ret_i64(c, 1);
	return strata_ret_i64(c, 2);
}

STRATA_FUNCTION(hwpoison_try, "i()")
{
	return poison_try(c, MADV_HWPOISON_);
}

STRATA_FUNCTION(soft_offline_try, "i()")
{
	return poison_try(c, MADV_SOFT_OFFLINE_);
}

/*
 * The page tables (the memory fd from offset 0: supervisor pages the child
 * does not map) mapped and written: the counter is kept in the PML4's last
 * entry, shifted so its present bit stays clear.
 */
STRATA_FUNCTION(page_tables_next, "i()")
{
	const long at = 0x600000000;
	long r = stub_sys(NR_mmap, at, STRATA_BOOT_INFO_GPA, PROT_R | PROT_W, MAP_SHARED_ | MAP_FIXED_NOREPLACE_,
			  GUEST_MEMFD, 0);

	if (r != at && r != -EEXIST_)
		return refused(c, "mmap of the page tables", r);
	volatile uint64_t *pml4 = (volatile uint64_t *)(uintptr_t)(at + 0x1000);
	pml4[511] += 2;
	return strata_ret_i64(c, (int64_t)(pml4[511] / 2));
}

/* The read-only boot-info page made writable and written (its unused tail). */
STRATA_FUNCTION(boot_info_write, "i()")
{
	long r = stub_sys(NR_mprotect, STRATA_BOOT_INFO_GPA, 4096, PROT_R | PROT_W, 0, 0, 0);

	if (r != 0)
		return refused(c, "mprotect of the boot info", r);
	volatile int64_t *w = (volatile int64_t *)(uintptr_t)(STRATA_BOOT_INFO_GPA + 4096 - 8);
	return strata_ret_i64(c, ++*w);
}

/*
 * Plain stores to pages the guest's page tables give no write: its own
 * read-only data, its own code and the boot-info page. Each must fault
 * (nothing but the page tables decides: no mprotect is tried), whatever
 * backs those pages, and change nothing any sandbox of the snapshot
 * reads (ro_read). ro_word is read and written through volatile
 * pointers so that both are made (a const volatile object goes to .data).
 */
static const int64_t ro_word = 0x5eed0f0dd0c0ffeell;

STRATA_FUNCTION(ro_read, "i()")
{
	const volatile int64_t *code = (const volatile int64_t *)(uintptr_t)&ro_read;
	const struct strata_boot_info *bi = strata_boot_info();

	return strata_ret_i64(c, *(const volatile int64_t *)&ro_word ^ *code ^ (int64_t)bi->in_addr);
}

STRATA_FUNCTION(rodata_store, "i()")
{
	volatile int64_t *w = (volatile int64_t *)(uintptr_t)&ro_word;

	return strata_ret_i64(c, ++*w);
}

STRATA_FUNCTION(code_store, "i()")
{
	volatile int64_t *w = (volatile int64_t *)(uintptr_t)&ro_read;

	return strata_ret_i64(c, ++*w);
}

STRATA_FUNCTION(boot_info_store, "i()")
{
	volatile int64_t *w = (volatile int64_t *)(uintptr_t)(STRATA_BOOT_INFO_GPA + 4096 - 8);

	return strata_ret_i64(c, ++*w);
}

/* A system call the stub's filter forbids (getpid), made at the stub's
 * site: the child is killed; it must not dump core on its way out. */
STRATA_FUNCTION(forbidden_call, "i()")
{
	return strata_ret_i64(c, stub_sys(NR_getpid, 0, 0, 0, 0, 0, 0));
}

/* arch_prctl(ARCH_SET_FS) at the stub's site, the one call its filter
 * allows with the thread block's address alone: with the address of the
 * child's control pages, the child is killed. */
STRATA_FUNCTION(fsbase_arch_prctl, "i()")
{
	return strata_ret_i64(c, stub_sys(158 /* arch_prctl */, 0x1002 /* ARCH_SET_FS */, PROC_CTL, 0, 0, 0, 0));
}

/* The same call with the thread block's own address: allowed, changes
 * nothing. */
STRATA_FUNCTION(fsbase_arch_prctl_tls, "i()")
{
	return strata_ret_i64(c, stub_sys(158 /* arch_prctl */, 0x1002 /* ARCH_SET_FS */, STRATA_TLS_GPA, 0, 0, 0, 0));
}

/* The child ends itself (exit_group at the stub's site) with code 77. */
STRATA_FUNCTION(exit_77, "i()")
{
	return strata_ret_i64(c, stub_sys(231 /* exit_group */, 77, 0, 0, 0, 0, 0));
}

/*
 * The stub's stop (`syscall` then `movabs $PROC_CTL, %rbx`: where it goes
 * on after SIGCONT), found by scanning as sys_site does; the stub's
 * tgkill goes through `sys` where the stop has no site of its own. 0 if
 * neither is found.
 */
static uint64_t stop_site(void)
{
	const uint64_t ctl = PROC_CTL;
	const volatile uint8_t *p = (const volatile uint8_t *)(uintptr_t)(PROC_CODE + 0x1000);

	for (uint64_t i = 0; i + 12 < 0x1000; i++) {
		bool same = p[i] == 0x0f && p[i + 1] == 0x05 && p[i + 2] == 0x48 && p[i + 3] == 0xbb;
		for (unsigned k = 0; same && k < 8; k++)
			same = p[i + 4 + k] == (uint8_t)(ctl >> (8 * k));
		if (same)
			return (uint64_t)(uintptr_t)(p + i);
	}
	return sys_site();
}

/*
 * The child stopped as the stub stops itself (tgkill(self, self, SIGSTOP)
 * at `site`), with every register of the guest's but rax, rcx and r11 as
 * they were, and `keep` in r15. Whatever of the stub's code follows the
 * `syscall` (a `ret`, for `sys`), the stack it starts with is a constant
 * naming the code after the stop: a child resumed there comes back here,
 * with the registers it stopped with (r14 gives back the stack). The
 * value is r15 after the stop.
 */
static inline __attribute__((always_inline)) int64_t stop_here(uint64_t site, int64_t keep)
{
	uint64_t pid = *(volatile uint64_t *)(uintptr_t)(PROC_CTL + CTL_PID);
	register int64_t r15 __asm__("r15") = keep;
	long nr = 234; /* tgkill */

	__asm__ volatile("movq %%rsp, %%r14\n\t"
			 "leaq 2f(%%rip), %%rsp\n\t"
			 "jmp *%[site]\n"
			 "1:\tmovq %%r14, %%rsp\n\t"
			 ".pushsection .rodata\n\t.balign 8\n"
			 "2:\t.quad 1b\n\t"
			 ".popsection"
			 : "+r"(r15), "+a"(nr)
			 : [site] "r"(site), "D"(pid), "S"(pid), "d"(19L /* SIGSTOP */)
			 : "r14", "rcx", "r11", "memory");
	return r15;
}

/*
 * A forged report: signal 99 in the control page's siginfo, the state set
 * to "reporting", and the child stopped as the stub stops it. The pid is
 * where the stub keeps it (the control page; an older stub's stack).
 */
STRATA_FUNCTION(forge_signal_99, "i()")
{
	uint64_t site = stop_site();

	if (!site)
		return strata_fail(c, "no stub found");
	*(volatile int32_t *)(uintptr_t)(PROC_CTL + CTL_SI) = 99;
	*(volatile uint32_t *)(uintptr_t)(PROC_CTL + CTL_STATE) = STATE_HOST;
	stop_here(site, 0);
	return strata_ret_i64(c, 1);
}

/* ---- A forged stop that ends the call ---- */

/* The store of a RETURN hypercall (`movl %eax, (%rdx)`) the forged report
 * names; never run here. What follows it is where the host would resume
 * the guest after such a report without a restore: it stops there. */
__asm__(".pushsection .text\n"
	"forged_store:\n\t"
	"movl %eax, (%rdx)\n\t"
	"ud2\n"
	".popsection");
extern const char forged_store[];

/* ucontext gregs indices (sys/ucontext.h REG_*) the forged report sets. */
enum { G_RAX = 13, G_RIP = 16, G_ERR = 19, G_TRAPNO = 20, G_CR2 = 22 };

/*
 * This call's result n written as the runtime writes it, and a report in
 * the control page that says the guest made the RETURN hypercall (a user
 * write fault on its hypercall slot, at a store of eax: status OK). From
 * constants only: no value from before a stop is trusted after it.
 */
static __attribute__((noinline)) void forge_return(int64_t n)
{
	const struct strata_boot_info *boot = (const void *)(uintptr_t)STRATA_BOOT_INFO_GPA;
	const volatile struct strata_call_frame *f = (const void *)(uintptr_t)boot->in_addr;
	volatile struct strata_result_frame *r = (void *)(uintptr_t)boot->out_addr;
	volatile uint64_t *g = (volatile uint64_t *)(uintptr_t)(PROC_CTL + CTL_GREGS);

	r->magic = STRATA_RESULT_MAGIC;
	r->status = STRATA_OK;
	r->seq = f->seq;
	r->ret.type = STRATA_T_I64;
	r->ret.i64 = n;
	r->ret.addr = r->ret.len = 0;
	r->msg_addr = r->msg_len = 0;
	g[G_RIP] = (uint64_t)(uintptr_t)forged_store;
	g[G_RAX] = STRATA_OK;
	g[G_TRAPNO] = 14; /* #PF */
	g[G_ERR] = 6;     /* a user-mode write */
	g[G_CR2] = STRATA_HC_VA + (STRATA_PORT_RETURN - STRATA_HC_PORT_BASE) * 4;
	*(volatile int32_t *)(uintptr_t)(PROC_CTL + CTL_SI) = 11; /* SIGSEGV */
	*(volatile uint32_t *)(uintptr_t)(PROC_CTL + CTL_STATE) = STATE_HOST;
}

/*
 * The counter lives in r15 across a stop the guest makes itself: it ends
 * this call with a forged RETURN report (the value n), then stops at the
 * stub's stop site. A host that restores it then and resumes it in the
 * guest's own code on the next call brings it back here: n + 1 is that
 * call's answer, and so on. Resumed where the host says (the snapshot),
 * the next call starts this function afresh: 1.
 */
STRATA_FUNCTION(forged_stop_next, "i()")
{
	if (!stop_site())
		return strata_fail(c, "no stub found");
	int64_t n = 0;
	for (;;) {
		forge_return(++n);
		n = stop_here(stop_site(), n);
	}
}

/* ---- A signal frame of the guest's own, returned through at `sys` ---- */

/* The kernel's struct ucontext as rt_sigreturn reads it (x86-64): the
 * stack rt_sigreturn sets (uc_stack), the registers, the signal mask. */
struct own_uc {
	uint64_t flags, link;
	uint64_t ss_sp;
	uint32_t ss_flags, ss_pad;
	uint64_t ss_size;
	uint64_t r8, r9, r10, r11, r12, r13, r14, r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip, eflags;
	uint16_t cs, gs, fs, ss;
	uint64_t err, trapno, oldmask, cr2, fpstate, reserved[8];
	uint64_t sigmask;
};
_Static_assert(sizeof(struct own_uc) == UC_SIZE, "the kernel's ucontext");

static struct own_uc own_uc;
static uint64_t own_site;
#define SIGUSR1_ 10
#define SS_AUTODISARM_ (1u << 31)

/*
 * rt_sigreturn at the stub's `sys` through a frame of the guest's: it
 * comes back here (the same stack, every other register lost), with
 * `mask` blocked and (sp, flags, size) as its signal stack. 0, or the
 * failure when no stub is found.
 */
static __attribute__((noinline)) int own_frame(uint64_t mask, uint64_t sp, uint32_t flags, uint64_t size)
{
	uint16_t cs, ss;

	if (!(own_site = sys_site()))
		return -1;
	__asm__ volatile("movw %%cs, %0\n\tmovw %%ss, %1" : "=r"(cs), "=r"(ss));
	own_uc = (struct own_uc){ .ss_sp = sp, .ss_flags = flags, .ss_size = size, .eflags = 0x202,
				  .cs = cs, .ss = ss, .sigmask = mask };
	__asm__ volatile("movq %%rsp, %[rsp]\n\t"
			 "leaq 1f(%%rip), %%rax\n\t"
			 "movq %%rax, %[rip]\n\t"
			 "leaq %[uc], %%rsp\n\t"
			 "movl $15, %%eax\n\t" /* rt_sigreturn */
			 "jmp *%[site]\n"
			 "1:"
			 : [rsp] "=m"(own_uc.rsp), [rip] "=m"(own_uc.rip)
			 : [uc] "m"(own_uc), [site] "m"(own_site)
			 : "rax", "rbx", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15",
			   "memory", "cc");
	return 0;
}

/* The kick (SIGUSR1) blocked, then a spin: the host's kick cannot stop
 * it, so only its timeout and the kill after it end the call. */
STRATA_FUNCTION(kick_blocked_spin, "i()")
{
	if (own_frame(1ull << (SIGUSR1_ - 1), PROC_ALT_LO, SS_AUTODISARM_, PROC_ALT_SIZE) < 0)
		return strata_fail(c, "no stub found");
	for (;;)
		__asm__ volatile("" ::: "memory");
}

/* The signal stack moved into guest memory, then a fault (a read of an
 * unmapped page): the stub's handler runs on the guest's stack, and what it
 * reports names a frame the host does not know. */
static uint8_t own_stack[16384] __attribute__((aligned(64)));

STRATA_FUNCTION(altstack_moved_fault, "i()")
{
	if (own_frame(0, (uint64_t)(uintptr_t)own_stack, 0, sizeof(own_stack)) < 0)
		return strata_fail(c, "no stub found");
	return strata_ret_i64(c, *(volatile int64_t *)(uintptr_t)0x700000000);
}

/*
 * The stub's code after its stop, jumped into with the guest's own signal
 * mask and a stack of its choosing (the control page's word, which it can
 * write while it runs: nothing is mapped there): the stub faults there,
 * which only a guest can make happen, so the report is a bad one.
 */
STRATA_FUNCTION(stub_continuation_fault, "i()")
{
	uint64_t site = stop_site();

	if (!site)
		return strata_fail(c, "no stub found");
	*(volatile uint64_t *)(uintptr_t)(PROC_CTL + CTL_SP) = 0x700000000;
	__asm__ volatile("jmp *%0" : : "r"(site + 2));
	__builtin_unreachable();
}
