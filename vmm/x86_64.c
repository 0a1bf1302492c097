/* x86_64.c: long-mode setup: page tables, GDT, TSS, IDT and control registers (the only file with their bits). */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "vmm/vmm_int.h"

/* Paging-structure entry bits, SDM Vol. 3A 4.5 (Tables 4-15 to 4-20). */
#define PTE_P (1ull << 0)     /* present */
#define PTE_RW (1ull << 1)    /* writable */
#define PTE_US (1ull << 2)    /* user (CPL 3) may access */
#define PTE_A (1ull << 5)     /* accessed: preset so the CPU never writes the table */
#define PTE_D (1ull << 6)     /* dirty (leaf entries): preset likewise */
#define PTE_PS (1ull << 7)    /* in a PDE: maps a 2 MiB page */
#define PTE_NX (1ull << 63)   /* execute-disable (needs EFER.NXE) */

/* CR0, SDM Vol. 3A 2.5. */
#define CR0_PE (1ull << 0)    /* protected mode */
#define CR0_MP (1ull << 1)    /* monitor coprocessor: WAIT honours TS (SSE needs MP=1, EM=0) */
#define CR0_ET (1ull << 4)
#define CR0_NE (1ull << 5)    /* native x87 error reporting */
#define CR0_WP (1ull << 16)   /* supervisor honours read-only pages */
#define CR0_PG (1ull << 31)
/* CR4, SDM Vol. 3A 2.5. */
#define CR4_PAE (1ull << 5)
#define CR4_OSFXSR (1ull << 9)      /* FXSAVE/FXRSTOR and SSE enabled */
#define CR4_OSXMMEXCPT (1ull << 10) /* SIMD FP exceptions as #XM */
/* IA32_EFER, SDM Vol. 3A 2.2.1. */
#define EFER_LME (1ull << 8)
#define EFER_LMA (1ull << 10)
#define EFER_NXE (1ull << 11)
/* RFLAGS, SDM Vol. 1 3.4.3: bit 1 is reserved as 1; IOPL 3 lets CPL 3 use `out`. */
#define RFLAGS_FIXED (1ull << 1)
#define RFLAGS_IOPL3 (3ull << 12)
/* What CPL 3 may set itself (POPF, SAHF, STD, STAC-free AC, CPUID's ID
 * probe; IF with IOPL 3): CF PF AF ZF SF TF IF DF OF NT AC ID. RF, VM,
 * VIF, VIP and the reserved bits it cannot. */
#define RFLAGS_USER 0x244fd5ull
/* IA32_APIC_BASE as KVM resets it (SDM Vol. 3A 11.4.4): base 0xfee00000,
 * BSP (bit 8), xAPIC enabled (bit 11). */
#define APIC_BASE_RESET 0xfee00900ull
/* XCR0 at reset (SDM Vol. 1 13.3): x87 only; CPL 3 cannot run XSETBV. */
#define XCR0_RESET 1ull
/* MXCSR bits 16-31 are reserved (SDM Vol. 1 10.2.3); DAZ (bit 6) exists on
 * every x86-64 CPU. */
#define MXCSR_RESERVED 0xffff0000u

/* GDT selectors (index << 3 | RPL), SDM Vol. 3A 3.4.2. */
#define SEL_KCODE 0x08
#define SEL_KDATA 0x10
#define SEL_UDATA 0x1b  /* index 3, RPL 3 */
#define SEL_UCODE 0x23  /* index 4, RPL 3 */
#define SEL_TSS 0x28    /* index 5, 16-byte system descriptor */

/* Segment descriptor types, SDM Vol. 3A 3.4.5.1 (accessed bit preset). */
#define TYPE_CODE_XRA 0xb
#define TYPE_DATA_RWA 0x3
#define TYPE_TSS64_AVAIL 0x9   /* SDM Vol. 3A 3.5, Table 3-2 */
#define TYPE_TSS64_BUSY 0xb
#define TYPE_INTR_GATE 0xe     /* 64-bit interrupt gate, SDM Vol. 3A 6.14.1 */

/* 64-bit TSS field offsets, SDM Vol. 3A 8.7 (Figure 8-11). */
#define TSS_RSP0 4
#define TSS_IST1 36
#define TSS_IST2 44
#define TSS_IOMAP 102
#define TSS_SIZE 104
/* I/O permission bitmap right after the TSS (SDM Vol. 1 19.5.2): one bit per
 * port, 0 = allowed, covering ports up to STRATA's hypercall ports plus the
 * required all-ones trailing byte. Used when IOPL alone does not let CPL 3
 * do port I/O (kvm_pvm ignores RFLAGS.IOPL for the guest's CPL 3). */
#define IOMAP_PORTS 0x518
#define IOMAP_BYTES (IOMAP_PORTS / 8 + 1)
#define TSS_LIMIT (TSS_SIZE + IOMAP_BYTES - 1)

static void put64(uint8_t *mem, uint64_t gpa, uint64_t v)
{
	memcpy(mem + gpa, &v, 8);
}

/* A code/data descriptor (SDM Vol. 3A 3.4.5): flat, 4 GiB limit, G=1. */
static uint64_t seg_desc(unsigned type, unsigned dpl, bool code64)
{
	uint64_t d = 0;

	d |= 0xffffull;                     /* limit 15:0 */
	d |= (uint64_t)type << 40;
	d |= 1ull << 44;                    /* S: code/data */
	d |= (uint64_t)dpl << 45;
	d |= 1ull << 47;                    /* P */
	d |= 0xfull << 48;                  /* limit 19:16 */
	if (code64)
		d |= 1ull << 53;            /* L: 64-bit code */
	else
		d |= 1ull << 54;            /* D/B: 32-bit data */
	d |= 1ull << 55;                    /* G */
	return d;
}

static uint64_t pte_bits(uint8_t perm)
{
	uint64_t e = PTE_P | PTE_A | PTE_D;

	if (perm & VMM_PERM_W)
		e |= PTE_RW;
	if (perm & VMM_PERM_USER)
		e |= PTE_US;
	if (!(perm & VMM_PERM_X))
		e |= PTE_NX;
	return e;
}

void vmm_x86_supervisor_perms(const struct vmm_layout *l, uint8_t *perms)
{
	perms[l->gdt / VMM_PAGE] = VMM_PERM_R | VMM_PERM_W;  /* GDT and TSS */
	perms[l->idt / VMM_PAGE] = VMM_PERM_R;
	perms[l->isr / VMM_PAGE] = VMM_PERM_R | VMM_PERM_X;
	perms[(l->ist1_top - VMM_PAGE) / VMM_PAGE] = VMM_PERM_R | VMM_PERM_W;
	perms[(l->ist2_top - VMM_PAGE) / VMM_PAGE] = VMM_PERM_R | VMM_PERM_W;
}

unsigned vmm_x86_user_leaf_perm(uint64_t pte, uint64_t va)
{
	const uint64_t fixed = (va & ~(VMM_PAGE - 1)) | PTE_P | PTE_US | PTE_A | PTE_D;

	if ((pte & ~(PTE_RW | PTE_NX)) != fixed)
		return VMM_PERM_NONE;
	return VMM_PERM_R | VMM_PERM_USER | ((pte & PTE_RW) ? VMM_PERM_W : 0u) | ((pte & PTE_NX) ? 0u : VMM_PERM_X);
}

/* Does the CPU push an error code for this exception (SDM Vol. 3A 6.15)? */
static bool has_error_code(unsigned v)
{
	return v == 8 || (v >= 10 && v <= 14) || v == 17 || v == 21 || v == 29 || v == 30;
}

/*
 * The host's exception stub for vector v, STRATA_ISR_STRIDE bytes (SDM
 * Vol. 2 for each encoding). Like the SDK's stubs it reports the frame
 * { vector, error_code, CPU frame } on the exception stack with one `out`
 * and never returns; the host never resumes a faulted guest:
 *   6a 00          push $0          (only where the CPU pushed no error code)
 *   6a vv          push $v
 *   48 89 e0       mov %rsp, %rax
 *   66 ba pp pp    mov $STRATA_PORT_EXCEPTION, %dx
 *   ef             out %eax, %dx
 *   f4             hlt
 *   eb fd          jmp back to the hlt
 */
static void isr_stub(uint8_t *p, unsigned v)
{
	const uint8_t report[] = {
		0x6a, (uint8_t)v,
		0x48, 0x89, 0xe0,
		0x66, 0xba, STRATA_PORT_EXCEPTION_NUM & 0xff, STRATA_PORT_EXCEPTION_NUM >> 8,
		0xef,
		0xf4,
		0xeb, 0xfd,
	};
	size_t n = 0;

	_Static_assert(2 + sizeof(report) <= STRATA_ISR_STRIDE, "a stub fits its slot");
	memset(p, 0xcc, STRATA_ISR_STRIDE);  /* int3 padding: never reached */
	if (!has_error_code(v)) {
		p[n++] = 0x6a;
		p[n++] = 0x00;
	}
	memcpy(p + n, report, sizeof(report));
}

void vmm_x86_build(uint8_t *mem, const struct vmm_layout *l, const uint8_t *perms)
{
	/* Upper levels allow everything; leaves decide (SDM Vol. 3A 4.6). */
	const uint64_t table = PTE_P | PTE_RW | PTE_US | PTE_A;

	_Static_assert(STRATA_ISR_COUNT * STRATA_ISR_STRIDE <= VMM_PAGE, "the stubs fit their page");
	_Static_assert(STRATA_ISR_COUNT <= 0x80, "push imm8 sign-extends the vector");
	put64(mem, l->pml4, l->pdpt | table);
	for (unsigned i = 0; i < l->n_pd; i++)
		put64(mem, l->pdpt + 8ull * i, (l->pd + VMM_PAGE * i) | table);
	/* The low area in 4 KiB pages (guards, supervisor pages, image, stack). */
	for (unsigned i = 0; i < l->n_pt; i++)
		put64(mem, l->pd + 8ull * i, (l->pt + VMM_PAGE * i) | table);
	for (uint64_t p = 0; p < l->low_end / VMM_PAGE; p++)
		if (perms[p] != VMM_PERM_NONE)
			put64(mem, l->pt + 8 * p, (p * VMM_PAGE) | pte_bits(perms[p]));
	/* Buffers and heap in 2 MiB pages: user, writable, not executable.
	 * One PDE per 2 MiB keeps creation O(1) pages in the heap size. */
	for (uint64_t a = l->low_end; a < l->mem_size; a += VMM_HUGE) {
		uint64_t pde = a / VMM_HUGE;
		put64(mem, l->pd + 8 * pde, a | pte_bits(VMM_PERM_R | VMM_PERM_W | VMM_PERM_USER) | PTE_PS);
	}

	/* GDT: null, kernel code, kernel data, user data, user code, TSS. */
	put64(mem, l->gdt + 0x08, seg_desc(TYPE_CODE_XRA, 0, true));
	put64(mem, l->gdt + 0x10, seg_desc(TYPE_DATA_RWA, 0, false));
	put64(mem, l->gdt + 0x18, seg_desc(TYPE_DATA_RWA, 3, false));
	put64(mem, l->gdt + 0x20, seg_desc(TYPE_CODE_XRA, 3, true));
	/* 64-bit TSS descriptor, 16 bytes (SDM Vol. 3A 8.2.3, Figure 8-4). */
	uint64_t t = l->tss, lim = TSS_LIMIT;
	uint64_t lo = (lim & 0xffff) | ((t & 0xffffff) << 16) | ((uint64_t)TYPE_TSS64_BUSY << 40) |
		      (1ull << 47) | (((lim >> 16) & 0xf) << 48) | (((t >> 24) & 0xff) << 56);
	put64(mem, l->gdt + SEL_TSS, lo);
	put64(mem, l->gdt + SEL_TSS + 8, t >> 32);
	/* TSS: RSP0 for faults from CPL 3; IST1 for every exception so a fault
	 * at CPL 0 still gets a good stack; IST2 for #DF. */
	put64(mem, l->tss + TSS_RSP0, l->ist1_top);
	put64(mem, l->tss + TSS_IST1, l->ist1_top);
	put64(mem, l->tss + TSS_IST2, l->ist2_top);
	uint16_t iomap = TSS_SIZE;
	memcpy(mem + l->tss + TSS_IOMAP, &iomap, 2);
	memset(mem + l->tss + TSS_SIZE, 0xff, IOMAP_BYTES);
	for (unsigned port = STRATA_PORT_RETURN; port <= STRATA_PORT_READY; port++)
		mem[l->tss + TSS_SIZE + port / 8] &= (uint8_t)~(1u << (port % 8));

	/* The hypercall page: user-writable, backed by no memory (MMIO). */
	put64(mem, l->pt + 8 * (STRATA_HC_VA / VMM_PAGE),
	      STRATA_HC_GPA | pte_bits(VMM_PERM_R | VMM_PERM_W | VMM_PERM_USER));

	/* The exception stubs, and every IDT gate 0-31 pointing at them; the
	 * rest not present (#GP for `int n`, the only way to reach them). */
	for (unsigned v = 0; v < STRATA_ISR_COUNT; v++) {
		uint64_t off = l->isr + (uint64_t)v * STRATA_ISR_STRIDE;
		isr_stub(mem + off, v);
		unsigned ist = v == VMM_X86_VEC_DF ? 2 : 1;
		unsigned dpl = v == 3 ? 3 : 0;  /* int3 allowed from CPL 3: a #BP report; any other `int n` is #GP */
		uint64_t g0 = (off & 0xffff) | ((uint64_t)SEL_KCODE << 16) | ((uint64_t)ist << 32) |
			      ((uint64_t)TYPE_INTR_GATE << 40) | ((uint64_t)dpl << 45) | (1ull << 47) |
			      (((off >> 16) & 0xffff) << 48);
		put64(mem, l->idt + 16ull * v, g0);
		put64(mem, l->idt + 16ull * v + 8, off >> 32);
	}
}

static void flat(struct vmm_segment *s, uint16_t sel, unsigned type, unsigned dpl, bool code)
{
	memset(s, 0, sizeof(*s));
	s->base = 0;
	s->limit = 0xffffffff;
	s->selector = sel;
	s->type = (uint8_t)type;
	s->present = 1;
	s->dpl = (uint8_t)dpl;
	s->s = 1;
	s->g = 1;
	s->l = code;
	s->db = !code;
}

void vmm_x86_initial_state(const struct vmm_layout *l, unsigned cpl, uint64_t entry, uint64_t rsp,
			   struct vmm_vcpu_state *st)
{
	memset(st, 0, sizeof(*st));
	st->version = VMM_VCPU_STATE_VERSION;
	bool user = cpl == 3;
	flat(&st->cs, user ? SEL_UCODE : SEL_KCODE, TYPE_CODE_XRA, cpl, true);
	flat(&st->ss, user ? SEL_UDATA : SEL_KDATA, TYPE_DATA_RWA, cpl, false);
	st->ds = st->es = st->fs = st->gs = st->ss;
	st->fs.base = STRATA_TLS_GPA;  /* the thread block: the stack protector's canary at %fs:0x28 */
	st->tr = (struct vmm_segment){ .base = l->tss, .limit = TSS_LIMIT, .selector = SEL_TSS,
				       .type = TYPE_TSS64_BUSY, .present = 1 };
	st->ldt = (struct vmm_segment){ .limit = 0xffff, .type = 2, .present = 1 };
	st->gdt = (struct vmm_dtable){ .base = l->gdt, .limit = 0x37 };
	st->idt = (struct vmm_dtable){ .base = l->idt, .limit = 256 * 16 - 1 };
	st->cr0 = CR0_PE | CR0_MP | CR0_ET | CR0_NE | CR0_WP | CR0_PG;
	st->cr3 = l->pml4;
	st->cr4 = CR4_PAE | CR4_OSFXSR | CR4_OSXMMEXCPT;
	st->efer = EFER_LME | EFER_LMA | EFER_NXE;
	st->rip = entry;
	st->gpr[6] = rsp;
	st->rflags = RFLAGS_FIXED | RFLAGS_IOPL3;
	st->apic_base = APIC_BASE_RESET;  /* set, so a restore may stage every special register */
	st->xcr0 = 0;                      /* KVM's reset value (XCR0_RESET) stays: no ioctl */
	/* FXSAVE image at reset values: FCW 0x37f, MXCSR 0x1f80 (SDM Vol. 1 10.5.1). */
	uint16_t fcw = 0x37f;
	uint32_t mxcsr = 0x1f80;
	memcpy(st->fxsave + 0, &fcw, 2);
	memcpy(st->fxsave + 24, &mxcsr, 4);
}

/* Does a 64-bit linear address sign-extend bit 47 (SDM Vol. 1 3.3.7.1)? */
static bool canonical(uint64_t a)
{
	return (uint64_t)((int64_t)(a << 16) >> 16) == a;
}

void vmm_x86_user_state(const struct vmm_layout *l, const struct vmm_vcpu_state *in, struct vmm_vcpu_state *out)
{
	struct vmm_vcpu_state st;

	vmm_x86_initial_state(l, 3, in->rip, in->gpr[6], &st);
	memcpy(st.gpr, in->gpr, sizeof(st.gpr));
	st.rflags = (in->rflags & RFLAGS_USER) | RFLAGS_FIXED | RFLAGS_IOPL3;
	st.gs.base = in->gs.base;  /* fs base stays the thread block's, whatever the vCPU held */
	memcpy(st.fxsave, in->fxsave, 416);
	memset(st.fxsave + 28, 0, 4);
	*out = st;
}

/* The first field of segment a that differs from b ("base" only if
 * with_base), or NULL. */
static const char *seg_differs(const struct vmm_segment *a, const struct vmm_segment *b, bool with_base)
{
	if (with_base && a->base != b->base)
		return "base";
	if (a->limit != b->limit)
		return "limit";
	if (a->selector != b->selector)
		return "selector";
	static const struct {
		const char *name;
		size_t off;
	} bytes[] = {
#define F(x) { #x, offsetof(struct vmm_segment, x) }
		F(type), F(present), F(dpl), F(db), F(s), F(l), F(g), F(avl), F(unusable),
#undef F
	};
	for (size_t i = 0; i < sizeof(bytes) / sizeof(bytes[0]); i++)
		if (((const uint8_t *)a)[bytes[i].off] != ((const uint8_t *)b)[bytes[i].off])
			return bytes[i].name;
	return NULL;
}

static int refuse(char *why, size_t whylen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int refuse(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	if (why) {
		va_start(ap, fmt);
		vsnprintf(why, whylen, fmt, ap);
		va_end(ap);
	}
	return VMM_E_BAD_SNAPSHOT;
}

int vmm_x86_state_check(const struct vmm_layout *l, const struct vmm_vcpu_state *st, struct vmm_vcpu_state *out,
			char *why, size_t whylen)
{
	struct vmm_vcpu_state want;
	const char *f;

	vmm_x86_initial_state(l, 3, st->rip, st->gpr[6], &want);
	/* Segments: the host's flat CPL 3 long mode; fs base is the thread
	 * block's (STRATA_TLS_GPA, in the read-only boot-info page), and gs may
	 * have any canonical base (WRGSBASE where the CPU lets CPL 3 run it). */
	if (st->fs.base != want.fs.base)
		return refuse(why, whylen,
			      "vCPU state: fs.base %#llx is not the thread block strata sets (%#llx, the stack protector's canary)",
			      (unsigned long long)st->fs.base, (unsigned long long)want.fs.base);
	static const struct {
		const char *name;
		size_t off;
		bool user_base;
	} segs[] = {
#define S(x, b) { #x, offsetof(struct vmm_vcpu_state, x), b }
		S(cs, false), S(ss, false), S(ds, false), S(es, false), S(fs, false), S(gs, true), S(tr, false),
		S(ldt, false),
#undef S
	};
	for (size_t i = 0; i < sizeof(segs) / sizeof(segs[0]); i++) {
		const struct vmm_segment *a = (const void *)((const uint8_t *)st + segs[i].off);
		const struct vmm_segment *b = (const void *)((const uint8_t *)&want + segs[i].off);
		if ((f = seg_differs(a, b, !segs[i].user_base)))
			return refuse(why, whylen, "vCPU state: segment %s.%s differs from what strata sets up (CPL 3 long mode)",
				      segs[i].name, f);
		if (segs[i].user_base && !canonical(a->base))
			return refuse(why, whylen, "vCPU state: segment %s.base %#llx is not a canonical address", segs[i].name,
				      (unsigned long long)a->base);
	}
	if (st->gdt.base != want.gdt.base || st->gdt.limit != want.gdt.limit)
		return refuse(why, whylen, "vCPU state: gdt differs from the guest layout's");
	if (st->idt.base != want.idt.base || st->idt.limit != want.idt.limit)
		return refuse(why, whylen, "vCPU state: idt differs from the guest layout's");
	static const struct {
		const char *name;
		size_t off;
		uint64_t also;  /* another value strata writes for it (KVM's reports, earlier versions) */
	} regs[] = {
#define R(x, a) { #x, offsetof(struct vmm_vcpu_state, x), a }
		R(cr0, 0), R(cr2, 0), R(cr3, 0), R(cr4, 0), R(cr8, 0), R(efer, 0),
		R(apic_base, 0), R(xcr0, XCR0_RESET),
#undef R
	};
	for (size_t i = 0; i < sizeof(regs) / sizeof(regs[0]); i++) {
		uint64_t a, b;
		memcpy(&a, (const uint8_t *)st + regs[i].off, 8);
		memcpy(&b, (const uint8_t *)&want + regs[i].off, 8);
		if (a != b && a != regs[i].also)
			return refuse(why, whylen, "vCPU state: %s is %#llx; strata sets %#llx", regs[i].name,
				      (unsigned long long)a, (unsigned long long)b);
	}
	/* IOPL 3 as strata sets it, or 0 as kvm_pvm reports it. */
	uint64_t iopl = st->rflags & RFLAGS_IOPL3;
	if (!(st->rflags & RFLAGS_FIXED) || (st->rflags & ~(RFLAGS_USER | RFLAGS_FIXED | RFLAGS_IOPL3)) ||
	    (iopl != 0 && iopl != RFLAGS_IOPL3))
		return refuse(why, whylen, "vCPU state: rflags %#llx sets bits a guest at CPL 3 cannot",
			      (unsigned long long)st->rflags);
	if (!canonical(st->rip))
		return refuse(why, whylen, "vCPU state: rip %#llx is not a canonical address", (unsigned long long)st->rip);
	uint32_t mxcsr;
	memcpy(&mxcsr, st->fxsave + 24, 4);
	if (mxcsr & MXCSR_RESERVED)
		return refuse(why, whylen, "vCPU state: MXCSR %#x sets reserved bits", mxcsr);
	for (size_t i = 28; i < 512; i++) {
		if (i == 32)
			i = 416;
		if (st->fxsave[i])
			return refuse(why, whylen, "vCPU state: FXSAVE byte %zu is not zero (%s)", i,
				      i < 32 ? "MXCSR_MASK is the CPU's" : "reserved and software bytes");
	}
	if (out)
		vmm_x86_user_state(l, st, out);
	return 0;
}

const char *vmm_x86_state_differs(const struct vmm_vcpu_state *live, const struct vmm_vcpu_state *snap, char *buf,
				  size_t len)
{
	static const char *const gpr[16] = { "rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rsp", "rbp",
					     "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15" };
	const char *f;

	for (unsigned i = 0; i < 16; i++)
		if (live->gpr[i] != snap->gpr[i])
			return gpr[i];
	if (live->rip != snap->rip)
		return "rip";
	/* IOPL: kvm_pvm reports 0 whatever was loaded. */
	if ((live->rflags ^ snap->rflags) & ~RFLAGS_IOPL3)
		return "rflags";
	static const struct {
		const char *name;
		size_t off;
	} segs[] = {
#define S(x) { #x, offsetof(struct vmm_vcpu_state, x) }
		S(cs), S(ss), S(ds), S(es), S(fs), S(gs), S(tr), S(ldt),
#undef S
	};
	for (size_t i = 0; i < sizeof(segs) / sizeof(segs[0]); i++)
		if ((f = seg_differs((const void *)((const uint8_t *)live + segs[i].off),
				     (const void *)((const uint8_t *)snap + segs[i].off), true))) {
			snprintf(buf, len, "%s.%s", segs[i].name, f);
			return buf;
		}
	if (live->gdt.base != snap->gdt.base || live->gdt.limit != snap->gdt.limit)
		return "gdt";
	if (live->idt.base != snap->idt.base || live->idt.limit != snap->idt.limit)
		return "idt";
	static const struct {
		const char *name;
		size_t off;
	} regs[] = {
#define R(x) { #x, offsetof(struct vmm_vcpu_state, x) }
		R(cr0), R(cr2), R(cr3), R(cr4), R(cr8), R(efer), R(apic_base), R(xcr0),
#undef R
	};
	for (size_t i = 0; i < sizeof(regs) / sizeof(regs[0]); i++) {
		uint64_t a, b;
		memcpy(&a, (const uint8_t *)live + regs[i].off, 8);
		memcpy(&b, (const uint8_t *)snap + regs[i].off, 8);
		if (a != b && a && b)  /* 0: a backend without the register */
			return regs[i].name;
	}
	for (size_t i = 0; i < 416; i++) {
		if (i == 28)
			i = 32;  /* MXCSR_MASK: the CPU's */
		if (live->fxsave[i] != snap->fxsave[i]) {
			snprintf(buf, len, "FXSAVE byte %zu", i);
			return buf;
		}
	}
	return NULL;
}

const char *vmm_x86_vector_name(unsigned v)
{
	/* SDM Vol. 3A 6.15, Table 6-1. */
	static const char *const names[32] = {
		"divide error (#DE)", "debug (#DB)", "NMI", "breakpoint (#BP)",
		"overflow (#OF)", "bound range (#BR)", "invalid opcode (#UD)",
		"device not available (#NM)", "double fault (#DF)", "coprocessor segment overrun",
		"invalid TSS (#TS)", "segment not present (#NP)", "stack fault (#SS)",
		"general protection (#GP)", "page fault (#PF)", "reserved (15)",
		"x87 floating-point error (#MF)", "alignment check (#AC)", "machine check (#MC)",
		"SIMD floating-point (#XM)", "virtualization (#VE)", "control protection (#CP)",
	};
	if (v < 32 && names[v])
		return names[v];
	return "reserved exception";
}

/* The user-mode permission (enum vmm_perm R/W/X, or NONE) the page tables in
 * mem give virtual page va: an identity-mapped, present, user leaf. A page
 * that maps any other frame (the hypercall page) counts as NONE. */
static unsigned user_perm(const uint8_t *mem, uint64_t mem_size, uint64_t cr3, uint64_t va, uint64_t *span)
{
	uint64_t table = cr3 & 0x000ffffffffff000ull;
	static const unsigned shift[4] = { 39, 30, 21, 12 };
	uint64_t e = 0;

	*span = VMM_PAGE;
	for (unsigned lvl = 0; lvl < 4; lvl++) {
		uint64_t at = table + 8 * ((va >> shift[lvl]) & 511);
		if (at + 8 > mem_size)
			return VMM_PERM_NONE;
		memcpy(&e, mem + at, 8);
		if (!(e & PTE_P) || !(e & PTE_US))
			return VMM_PERM_NONE;
		uint64_t frame = e & 0x000ffffffffff000ull;
		if (lvl == 2 && (e & PTE_PS)) {
			*span = VMM_HUGE - (va & (VMM_HUGE - 1));
			if ((frame & ~(VMM_HUGE - 1)) != (va & ~(VMM_HUGE - 1)))
				return VMM_PERM_NONE;
			break;
		}
		if (lvl == 3 && frame != (va & ~(VMM_PAGE - 1)))
			return VMM_PERM_NONE;
		table = frame;
	}
	/* Upper levels allow everything (vmm_x86_build); the leaf decides. */
	return VMM_PERM_R | ((e & PTE_RW) ? VMM_PERM_W : 0u) | ((e & PTE_NX) ? 0u : VMM_PERM_X);
}

int vmm_x86_user_runs(const uint8_t *mem, uint64_t mem_size, uint64_t cr3, uint64_t lo, uint64_t hi,
		      int (*cb)(void *ctx, uint64_t va, uint64_t len, unsigned perm), void *ctx)
{
	uint64_t run_va = lo, span;
	unsigned run_perm = lo < hi ? user_perm(mem, mem_size, cr3, lo, &span) : 0;
	int rc;

	for (uint64_t va = lo; va < hi;) {
		unsigned perm = user_perm(mem, mem_size, cr3, va, &span);
		if (perm != run_perm) {
			if ((rc = cb(ctx, run_va, va - run_va, run_perm)) < 0)
				return rc;
			run_va = va;
			run_perm = perm;
		}
		va += span;
	}
	return lo < hi ? cb(ctx, run_va, hi - run_va, run_perm) : 0;
}
