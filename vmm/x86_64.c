/* x86_64.c: long-mode setup: page tables, GDT, TSS, IDT and control registers (the only file with their bits). */
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

void vmm_x86_build(uint8_t *mem, const struct vmm_layout *l, const uint8_t *perms,
		   uint64_t isr_base, uint32_t isr_stride)
{
	/* Upper levels allow everything; leaves decide (SDM Vol. 3A 4.6). */
	const uint64_t table = PTE_P | PTE_RW | PTE_US | PTE_A;

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

	/* IDT: vectors 0-31 to the guest's stubs; the rest not present (#NP). */
	for (unsigned v = 0; v < STRATA_ISR_COUNT && isr_base; v++) {
		uint64_t off = isr_base + (uint64_t)v * isr_stride;
		unsigned ist = v == VMM_X86_VEC_DF ? 2 : 1;
		unsigned dpl = v == 3 ? 3 : 0;  /* int3 allowed from CPL 3 */
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
	/* FXSAVE image at reset values: FCW 0x37f, MXCSR 0x1f80 (SDM Vol. 1 10.5.1). */
	uint16_t fcw = 0x37f;
	uint32_t mxcsr = 0x1f80;
	memcpy(st->fxsave + 0, &fcw, 2);
	memcpy(st->fxsave + 24, &mxcsr, 4);
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
