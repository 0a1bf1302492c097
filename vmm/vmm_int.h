/* vmm_int.h: declarations shared inside vmm/ (KVM boundary, x86 setup, ELF, layout, sandbox). */
#ifndef STRATA_VMM_INT_H
#define STRATA_VMM_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "vmm/abi.h"
#include "vmm/vmm.h"

#define VMM_PAGE 4096ull
#define VMM_HUGE (2ull << 20)

static inline uint64_t vmm_round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

/* ---- vCPU state: a plain, serialisable struct (no KVM types) ---- */

struct vmm_segment {
	uint64_t base;
	uint32_t limit;
	uint16_t selector;
	uint8_t type, present, dpl, db, s, l, g, avl, unusable;
};

struct vmm_dtable {
	uint64_t base;
	uint16_t limit;
};

/* Everything KVM needs to resume the vCPU where it stopped. A snapshot
 * holds it as its manifest's "vcpu" object, field by field (vcpu.c), with
 * `version`: a manifest of another version is refused. */
#define VMM_VCPU_STATE_VERSION 1u
struct vmm_vcpu_state {
	uint32_t version;
	uint32_t reserved;
	/* rax rbx rcx rdx rsi rdi rsp rbp r8..r15 */
	uint64_t gpr[16];
	uint64_t rip, rflags;
	struct vmm_segment cs, ds, es, fs, gs, ss, tr, ldt;
	struct vmm_dtable gdt, idt;
	uint64_t cr0, cr2, cr3, cr4, cr8, efer, apic_base;
	/* x87/SSE state in FXSAVE layout (SDM Vol. 1 10.5.1) */
	uint8_t fxsave[512];
	uint64_t xcr0;       /* 0: leave as KVM set it */
};

/* ---- KVM boundary (kvm.c): the only file issuing KVM ioctls ---- */

struct kvm_run;
struct vmm_kvm {
	int vm_fd;
	int vcpu_fd;
	struct kvm_run *run;
	size_t run_size;
	void *xsave;  /* KVM_GET/SET_XSAVE buffer (NULL: KVM has neither) */
	bool mapped;  /* a layer file or a fresh range was mapped into guest memory */
};

/* Exit of one KVM_RUN, decoded. */
enum vmm_exit_kind {
	VMM_EXIT_IO_OUT,     /* port, value (size 4 only; other sizes are IO_BAD) */
	VMM_EXIT_IO_BAD,     /* `in`, or an `out` that is not 32-bit, or a string op */
	VMM_EXIT_MMIO,       /* access to an address with no memory: addr */
	VMM_EXIT_HLT,
	VMM_EXIT_SHUTDOWN,   /* triple fault */
	VMM_EXIT_INTR,       /* KVM_RUN returned EINTR (signal / immediate_exit) */
	VMM_EXIT_INTERNAL,   /* KVM internal error: reason = suberror */
	VMM_EXIT_EXCEPTION,  /* CPU exception reported by the backend: vector, error_code, rip, addr (CR2) */
	VMM_EXIT_DEAD,       /* the process backend's child is gone: reason = its wait status (vmm_proc_end_str) */
	VMM_EXIT_OTHER,      /* anything else: reason */
	VMM_EXIT_BAD_REPORT, /* the process backend's child reported what its stub never does: reason = the signal */
};
struct vmm_exit {
	enum vmm_exit_kind kind;
	uint16_t port;
	uint32_t value;
	uint64_t addr;
	uint32_t len;        /* MMIO */
	bool is_write;       /* MMIO */
	uint32_t reason;
	uint32_t vector;     /* EXCEPTION */
	uint64_t error_code; /* EXCEPTION */
	uint64_t rip;        /* EXCEPTION */
};

/*
 * What the process found when it looked for KVM (kvm.c gathers, probe.c
 * judges: the judging is pure, so every case is testable on any machine).
 */
struct vmm_kvm_facts {
	int open_errno;          /* 0: /dev/kvm opened */
	int api_version;         /* KVM_GET_API_VERSION, or -errno if it failed */
	int run_size;            /* KVM_GET_VCPU_MMAP_SIZE, or -errno */
	bool sync_regs;          /* KVM_CAP_SYNC_REGS covers registers and sregs */
	bool mod_kvm;            /* /sys/module/kvm exists */
	char vendor[16];         /* kvm_intel, kvm_amd or kvm_pvm if loaded, else "" */
	bool cpu_virt;           /* the CPU advertises vmx or svm */
	char dev_group[32];      /* group owning /dev/kvm, "" if unknown */
	unsigned dev_mode;       /* its permission bits */
	char kernel[65];         /* uname -r */
};
/* 0 if f describes a usable KVM; else a VMM_E_* code with err's message. */
int vmm_kvm_diagnose(const struct vmm_kvm_facts *f, struct vmm_error *err);
/* Parse "M.m..." into *major, *minor; false if it does not start so. */
bool vmm_kernel_version(const char *release, unsigned *major, unsigned *minor);
/* After vmm_kvm_open failed with rc: fill err with the probe's reason (or
 * the VM-creation errno) and return rc. */
int vmm_kvm_open_failed(int rc, struct vmm_error *err);

int vmm_kvm_open(struct vmm_kvm *k);
/* vmm_backend_kvm.prepare: /dev/kvm opened and settled on a thread of its
 * own (what vmm_kvm_check and vmm_kvm_open do first), once per process. */
void vmm_kvm_prepare(void);
void vmm_kvm_close(struct vmm_kvm *k);
/* Make a VM that ran another guest ready for a new one (kvm.c). */
int vmm_kvm_recycle(struct vmm_kvm *k);

/* No error: the fields zeroed and the message empty, without writing all
 * of its VMM_MESSAGE_MAX bytes (each call and restore clears it). */
static inline void vmm_error_clear(struct vmm_error *err)
{
	memset(err, 0, offsetof(struct vmm_error, message));
	err->message[0] = 0;
}

/* Fill *err (if not NULL) with code and a formatted message; returns code. */
int vmm_fail(struct vmm_error *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- the host (host.c creates it; shell.c and warm.c keep its caches) ---- */

/* An idle VM shell: a VM and vCPU whose one memory slot covers a wiped
 * guest range of mem_size bytes. */
struct vmm_shell {
	struct vmm_kvm kvm;
	uint8_t *mem;
	uint64_t mem_size;
};

/*
 * Which lock guards what: each field names its lock; "fixed" fields are
 * set by vmm_host_new and only read afterwards. Neither lock is held while
 * the other is taken, nor across a call that may block on the kernel for
 * long (wiping a range, destroying a sandbox happen outside them).
 */
struct vmm_host {
	pthread_mutex_t shell_lock;
	unsigned shell_max;                             /* shell_lock */
	unsigned nshells;                               /* shell_lock */
	struct vmm_shell shells[VMM_HOST_SHELLS_MAX];   /* shell_lock; [0] kept longest */
	pthread_mutex_t warm_lock;
	unsigned warm_max;                              /* warm_lock */
	unsigned nwarm;                                 /* warm_lock */
	struct vmm_sandbox *warm[VMM_HOST_WARM_MAX];    /* warm_lock; [0] kept longest */
	struct vmm_policy policy;                       /* fixed */
	bool debug;                                     /* fixed */
	enum vmm_backend_kind backend;                  /* fixed */
	struct st_snapcache *snapcache;                 /* fixed pointer; the cache locks itself */
	atomic_uint sandboxes;                          /* atomic: sandboxes held by callers */
};

/*
 * Idle VM shells (shell.c): kept when a healthy sandbox is freed so the
 * host's next sandbox of that size skips VM creation and slot registration.
 * The range is wiped before it is kept: its first keep bytes (a multiple of
 * the page size; 0 where layer files are mapped in them) zeroed in place
 * with KVM's mappings of them dropped, the rest replaced by one anonymous
 * MAP_FIXED. take: 1 and the shell's parts on a hit, 0 on a miss (or no
 * host). give: true if kept (the caller owns nothing then). trim: keep at
 * most max.
 */
int vmm_shell_take(struct vmm_host *h, uint64_t mem_size, struct vmm_kvm *kvm, uint8_t **mem);
bool vmm_shell_give(struct vmm_host *h, struct vmm_kvm *kvm, uint8_t *mem, uint64_t mem_size, uint64_t keep);
void vmm_shell_trim(struct vmm_host *h, unsigned max);
/* Make h the host of sandboxes whose vmm_config.host is NULL (NULL: none,
 * as at start); vmm_host_free of it unsets it. Not while sandboxes are
 * being made. Not in the installed header: strata's own test and bench
 * programs set it; a host program passes its host in vmm_config. */
void vmm_host_default_set(struct vmm_host *h);
/* cfg's host, else the process default (host_default.c); NULL: none. */
struct vmm_host *vmm_host_resolve(const struct vmm_config *cfg);
/* Free a sandbox for good (vmm_sandbox_free first offers it to warm.c). */
void vmm_sandbox_destroy(struct vmm_sandbox *sb);
/* The caller holds sb from now on / no longer (vmm_host_stats' count, and
 * vmm_host_free's -EBUSY). Idempotent each. */
static inline void vmm_sandbox_held(struct vmm_sandbox *sb);
static inline void vmm_sandbox_unheld(struct vmm_sandbox *sb);
int vmm_kvm_set_memory(struct vmm_kvm *k, uint64_t gpa, void *host, uint64_t size);
int vmm_kvm_run(struct vmm_kvm *k, struct vmm_exit *exit);
int vmm_kvm_get_state(struct vmm_kvm *k, struct vmm_vcpu_state *st);
int vmm_kvm_set_state(struct vmm_kvm *k, const struct vmm_vcpu_state *st);
/* Restore fast path: registers via kvm_run's sync area (loaded by the next
 * KVM_RUN, no ioctl), FPU by one ioctl; vmm_kvm_get_state sees the staged
 * values until then. */
int vmm_kvm_stage_state(struct vmm_kvm *k, const struct vmm_vcpu_state *st);
int vmm_kvm_get_cr2(struct vmm_kvm *k, uint64_t *cr2);
/* Does the vCPU's whole XSAVE image (KVM_GET_XSAVE) equal the one a
 * restore loads for the FXSAVE image fx (x87/SSE from fx, every other
 * component initial)? 0, VMM_E_LEAK with why naming the first differing
 * byte, or -errno. */
int vmm_kvm_check_vector_state(struct vmm_kvm *k, const uint8_t fx[512], char *why, size_t whylen);
/* kvm_run->immediate_exit; safe from a signal handler. */
void vmm_kvm_set_immediate_exit(struct vmm_kvm *k, bool on);

/* ---- memory layout (layout.c): pure arithmetic, testable without KVM ---- */

/* Limits. The low area (image and stack) is 4 KiB-paged through at most 8
 * page tables (16 MiB); one region (heap, input, output) is at most 2 GiB;
 * guest addresses must fit the 32-bit hypercall register (4 GiB). */
#define VMM_LOW_MAX (16ull << 20)
#define VMM_REGION_MAX (2ull << 30)
#define VMM_MEM_MAX (4ull << 30)

struct vmm_layout {
	uint64_t pml4, pdpt, pd, pt;    /* page-table pages */
	unsigned n_pd, n_pt;
	uint64_t gdt, tss, idt;
	uint64_t isr;                   /* the host's exception stubs (one page, supervisor R-X) */
	uint64_t ist1_top, ist2_top;
	uint64_t boot_info;
	uint64_t image_lo, image_hi;    /* page-aligned extent of the ELF segments */
	uint64_t stack_guard, stack_lo, stack_hi;
	uint64_t low_end;               /* end of the 4 KiB-paged area (2 MiB aligned) */
	uint64_t in_addr, in_size, in_span;
	uint64_t out_addr, out_size, out_span;
	uint64_t heap_addr, heap_size, heap_span;
	uint64_t mem_size;
};

int vmm_layout_compute(const struct vmm_config *cfg, uint64_t image_lo, uint64_t image_hi,
		       struct vmm_layout *out);
/* Is `in` (a snapshot's description of its layout) exactly what
 * vmm_layout_compute gives for its own sizes and image extent? 0 and *out
 * that layout (with the fields a description does not carry), or
 * VMM_E_BAD_SNAPSHOT. A description cannot move the page tables, GDT, IDT
 * or stubs anywhere strata does not put them. */
int vmm_layout_same(const struct vmm_layout *in, struct vmm_layout *out);

/* ---- x86-64 setup (x86_64.c): the only file knowing CR/EFER/PTE/GDT bits ---- */

/* Per-page permission of the low area while building page tables. */
enum vmm_perm {
	VMM_PERM_NONE = 0,        /* not present */
	VMM_PERM_R = 1,
	VMM_PERM_W = 2,
	VMM_PERM_X = 4,
	VMM_PERM_USER = 8,
};

/* Mark the supervisor pages of l in perms (one enum vmm_perm set per 4 KiB
 * page of [0, l->low_end)): GDT/TSS and the exception stacks R-W, the IDT
 * R, the exception stubs R-X; none of them USER. */
void vmm_x86_supervisor_perms(const struct vmm_layout *l, uint8_t *perms);
/* Write page tables, GDT, TSS, IDT and the exception stubs into `mem`
 * (guest memory, or any buffer of at least l->boot_info bytes: nothing is
 * written at or above it) for `l`. perms gives one enum vmm_perm set per
 * 4 KiB page of [0, l->low_end). Every IDT gate points at the host's stubs
 * at l->isr, whatever the guest ships: only strata's code runs at CPL 0. */
void vmm_x86_build(uint8_t *mem, const struct vmm_layout *l, const uint8_t *perms);
/* The enum vmm_perm set for which vmm_x86_build writes exactly `pte` as the
 * leaf of page va (VMM_PERM_USER among them), or VMM_PERM_NONE if it never
 * writes that entry there (not identity, not user, other bits). */
unsigned vmm_x86_user_leaf_perm(uint64_t pte, uint64_t va);
/* Initial vCPU state: long mode at `cpl` (3 for guests; 0 only for the
 * floor benchmark) at `entry` with stack `rsp`, fs base the thread block
 * (STRATA_TLS_GPA). */
void vmm_x86_initial_state(const struct vmm_layout *l, unsigned cpl, uint64_t entry, uint64_t rsp,
			   struct vmm_vcpu_state *st);
/* The vCPU state strata runs for the user-mode state of `in` (general
 * registers, rip, the flags CPL 3 may own, gs base, x87/SSE): the
 * privileged parts (segments, fs base, descriptor tables, CR0/2/3/4/8, EFER,
 * APIC base, XCR0, IOPL) are built from layout l, never taken from `in`.
 * in and out may be the same. */
void vmm_x86_user_state(const struct vmm_layout *l, const struct vmm_vcpu_state *in, struct vmm_vcpu_state *out);
/* Is st (from an untrusted manifest) a state strata itself could have
 * written for layout l: privileged parts exactly as vmm_x86_initial_state
 * builds them (APIC base also 0 and XCR0 also 1, IOPL also 0, as earlier
 * versions and KVM report them), fs base the thread block's, rflags only
 * with flags CPL 3 may set, rip and gs base canonical, MXCSR without reserved bits, FXSAVE's MXCSR_MASK
 * and bytes 416-511 zero? 0 and *out (may be NULL) as vmm_x86_user_state
 * builds it, or VMM_E_BAD_SNAPSHOT with why naming the field. */
int vmm_x86_state_check(const struct vmm_layout *l, const struct vmm_vcpu_state *st, struct vmm_vcpu_state *out,
			char *why, size_t whylen);
/* The first register of live (as a backend reads it back) that differs
 * from snap (a snapshot's state), named (in buf where a name is built), or
 * NULL: every modelled register, fs/gs base and the FXSAVE image's x87 and
 * SSE bytes; IOPL, and APIC base and XCR0 where either side is 0 (a
 * backend without them), are not compared. */
const char *vmm_x86_state_differs(const struct vmm_vcpu_state *live, const struct vmm_vcpu_state *snap, char *buf,
				  size_t len);
/* Vector numbers the host's exception stubs report. */
#define VMM_X86_VEC_DE 0u   /* divide error */
#define VMM_X86_VEC_UD 6u   /* invalid opcode */
#define VMM_X86_VEC_DF 8u   /* double fault */
#define VMM_X86_VEC_GP 13u  /* general protection */
#define VMM_X86_VEC_PF 14u  /* page fault */
const char *vmm_x86_vector_name(unsigned vector);
/* Walk the page tables at cr3 in mem over [lo, hi) and call cb for each run
 * of pages with the same user-mode permission (enum vmm_perm R/W/X; NONE
 * for pages CPL 3 cannot reach or that map another frame). The process
 * backend gives its child the same protections with them. */
int vmm_x86_user_runs(const uint8_t *mem, uint64_t mem_size, uint64_t cr3, uint64_t lo, uint64_t hi,
		      int (*cb)(void *ctx, uint64_t va, uint64_t len, unsigned perm), void *ctx);

/* ---- the pages strata builds below the image (hostpages.c) ---- */

/* perms[p] |= perm for every page p of [lo, hi). */
void vmm_perms_set(uint8_t *perms, uint64_t lo, uint64_t hi, uint8_t perm);
/* Write every page below the image for l into mem (guest memory, or a
 * buffer of at least l->boot_info + VMM_PAGE bytes): page tables, GDT/TSS,
 * IDT, the exception stubs, the boot info and the thread block beside it
 * (struct strata_tls, canary's low byte cleared). perms (one per page of
 * [0, l->low_end)) holds the image's pages; this adds the supervisor
 * pages, the boot info and the stack. */
void vmm_host_pages_build(uint8_t *mem, const struct vmm_layout *l, uint8_t *perms, uint64_t canary);
/* Are a snapshot's pages [0, l->boot_info] exactly what
 * vmm_host_pages_build writes for l (the image's leaf entries as the
 * snapshot's page table has them, if they are ones strata writes, and the
 * canary the snapshot's thread block holds)? page(ctx,
 * p) gives the snapshot's page p (NULL: all zero). 0, VMM_E_BAD_SNAPSHOT
 * with why naming the first page that differs, or -ENOMEM. */
int vmm_host_pages_check(const struct vmm_layout *l, const uint8_t *(*page)(void *ctx, uint64_t p), void *ctx,
			 char *why, size_t whylen);

/* ---- ELF loading (elf.c) ---- */

struct vmm_elf_segment {
	uint64_t vaddr, memsz, filesz, offset;
	uint32_t flags;  /* enum vmm_perm R/W/X */
};
#define VMM_ELF_MAX_SEGMENTS 16
struct vmm_elf {
	uint64_t entry;
	uint64_t lo, hi;  /* page-aligned extent of PT_LOAD segments */
	unsigned nseg;
	struct vmm_elf_segment seg[VMM_ELF_MAX_SEGMENTS];
	struct strata_note note;
	/* What the guest asks for (STRATA_NOTE_MEM_TYPE; have_mem false: no
	 * such note, mem all 0): heap at most VMM_REGION_MAX, stack at most
	 * VMM_LOW_MAX; whether they fit with the rest is the layout's to say. */
	struct strata_mem_note mem;
	bool have_mem;
	const uint8_t *data;
	size_t size;
};

/* Validate an ELF image (bytes owned by the caller) and describe it. */
int vmm_elf_parse(const void *data, size_t size, struct vmm_elf *out, char *why, size_t why_len);

/* ---- guest memory access (mem.c): the one checked translator ---- */

/* Host pointer for guest range [gpa, gpa+len), or NULL unless the whole
 * range lies in [lo, hi) (overflow-safe). Guest-supplied addresses are
 * checked against the guest-visible range [image_lo, mem_size), which keeps
 * page tables, GDT, IDT and boot info out of reach. */
void *vmm_mem_translate(uint8_t *mem, uint64_t lo, uint64_t hi, uint64_t gpa, uint64_t len);

/* ---- the sandbox ---- */

struct vmm_fn {
	char name[STRATA_NAME_MAX];
	char sig[STRATA_SIG_MAX];      /* as the guest published it (the manifest keeps it) */
	struct vmm_signature type;     /* sig, parsed */
};

struct vmm_host_fn {
	char *name;
	struct vmm_signature sig;
	vmm_host_fn_cb cb;
	void *ctx;
};

struct vmm_backend;
struct vmm_sandbox {
	struct vmm_config cfg;
	const struct vmm_backend *be;  /* where the guest runs (backend.h) */
	/* The backend's own state, which only its room reads (struct vmm_kvm
	 * in vmm/kvm/, struct vmm_proc in vmm/proc/): NULL until be->mem_new,
	 * NULL again after be->destroy. */
	void *priv;
	struct vmm_layout layout;
	uint8_t *mem;             /* one host range = one KVM slot at GPA 0 */
	uint64_t mem_size;
	struct vmm_fn *fns;
	unsigned nfns;
	uint32_t fn_table_gpa;    /* where the guest's function table lives (for restore) */
	struct vmm_host_fn *hfns;
	size_t nhfns, hfns_cap;
	uint64_t seq;
	bool poisoned;
	struct vmm_error err;     /* last error */
	/* The vCPU as the guest left it at its last exception in this call
	 * (rip, rsp, rflags, cs, ss from the exception frame; vmm_sandbox_core). */
	struct vmm_vcpu_state fault_state;
	bool fault_state_ok;
	/* kill/timeout */
	pthread_mutex_t lock;
	bool in_call;
	pthread_t thread;
	atomic_bool kill_pending;
	struct vmm_snap *snap;     /* snapshot state (vmm/snap_int.h), NULL until first used */
	bool held;                 /* counted in cfg.host->sandboxes */
	/* Made by vmm_sandbox_from_snapshot with no restore or capture since:
	 * its mapped pages are what a start from the snapshot touched. */
	bool ws_fresh;
};

static inline void vmm_sandbox_held(struct vmm_sandbox *sb)
{
	if (sb->cfg.host && !sb->held) {
		atomic_fetch_add(&sb->cfg.host->sandboxes, 1);
		sb->held = true;
	}
}

static inline void vmm_sandbox_unheld(struct vmm_sandbox *sb)
{
	if (sb->held) {
		atomic_fetch_sub(&sb->cfg.host->sandboxes, 1);
		sb->held = false;
	}
}

/* Does cfg agree with a snapshot's layout (heap, input, output sizes)? */
bool vmm_sandbox_cfg_fits(const struct vmm_layout *l, const struct vmm_config *cfg);
/* sb->cfg from cfg (may be NULL) and sb->layout's sizes. */
void vmm_sandbox_cfg_apply(struct vmm_sandbox *sb, const struct vmm_config *cfg);

/* Snapshot state teardown (reset.c); accepts NULL. */
struct vmm_snap;
void vmm_snap_free(struct vmm_snap *s);

/* ---- running the vCPU (run.c) ---- */

/* Host pointer for guest-supplied [gpa, gpa+len) in the guest-visible range. */
void *vmm_run_guest_ptr(struct vmm_sandbox *sb, uint64_t gpa, uint64_t len);
/* Copy a NUL-terminated guest string of < cap bytes; its length or <0. */
int vmm_run_guest_str(struct vmm_sandbox *sb, uint64_t gpa, char *buf, size_t cap);
/* Record an error in sb->err (poisoning the sandbox for guest errors); returns code. */
int vmm_run_fail(struct vmm_sandbox *sb, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Report CPU exception `vector` (error code, rip, CR2 for #PF) as the
 * sandbox's error: a stack overflow on the guard page, else a guest fault. */
int vmm_run_exception(struct vmm_sandbox *sb, uint64_t vector, uint64_t error_code, uint64_t rip, uint64_t cr2);
/* Run the vCPU until the guest does `out` to `port` (READY or RETURN),
 * serving host calls and logs on the way; *value gets the `out` value. */
int vmm_run_until(struct vmm_sandbox *sb, uint16_t port, uint64_t timeout_ns, uint32_t *value);

/* (Re)read the guest's function table at table_gpa (READY's value; kept in
 * sb->fn_table_gpa so a restored sandbox can reread it from its memory). */
int vmm_sandbox_load_functions(struct vmm_sandbox *sb, uint32_t table_gpa);

/* Parse a guest's published signature "r(aa..)" (letters v i b s, the
 * guest ABI's text) into *out; false if malformed. */
bool vmm_sig_parse(const char *sig, struct vmm_signature *out);

#include "vmm/backend.h"

#endif
