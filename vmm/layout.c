/* layout.c: where everything lives in guest memory (docs/vmm.md has the map). */
#include <string.h>

#include "vmm/vmm_int.h"

/* The limits are vmm_int.h's VMM_LOW_MAX, VMM_REGION_MAX, VMM_MEM_MAX. */
int vmm_layout_compute(const struct vmm_config *cfg, uint64_t image_lo, uint64_t image_hi,
		       struct vmm_layout *out)
{
	struct vmm_layout l = { 0 };
	uint64_t heap = cfg && cfg->heap_size ? cfg->heap_size : VMM_DEFAULT_HEAP;
	uint64_t stack = cfg && cfg->stack_size ? cfg->stack_size : VMM_DEFAULT_STACK;
	uint64_t in = cfg && cfg->input_size ? cfg->input_size : VMM_DEFAULT_IO;
	uint64_t outsz = cfg && cfg->output_size ? cfg->output_size : VMM_DEFAULT_IO;

	if (heap > VMM_REGION_MAX || stack > VMM_LOW_MAX || in > VMM_REGION_MAX || outsz > VMM_REGION_MAX)
		return VMM_E_BAD_CONFIG;
	if (in < sizeof(struct strata_call_frame) || outsz < sizeof(struct strata_result_frame))
		return VMM_E_BAD_CONFIG;
	if (image_lo < STRATA_IMAGE_BASE || image_hi <= image_lo || image_hi > VMM_LOW_MAX)
		return VMM_E_BAD_ELF;

	l.pml4 = 0x1000;
	l.pdpt = 0x2000;
	l.pd = 0x3000;      /* 4 pages: up to 4 GiB */
	l.pt = 0x7000;      /* 8 pages: the low 16 MiB */
	l.gdt = 0xf000;
	l.tss = l.gdt + 0x80;
	l.idt = 0x10000;
	l.isr = 0x11000;    /* the host's exception stubs; below the IST1 stack, read-only: still a guard for it */
	/* 0x12000 IST1 stack, 0x13000 guard, 0x14000 IST2 stack */
	l.ist1_top = 0x13000;
	l.ist2_top = 0x15000;
	l.boot_info = STRATA_BOOT_INFO_GPA;
	l.image_lo = image_lo & ~(VMM_PAGE - 1);
	l.image_hi = vmm_round_up(image_hi, VMM_PAGE);
	l.stack_guard = l.image_hi;
	l.stack_lo = l.stack_guard + VMM_PAGE;
	l.stack_hi = l.stack_lo + vmm_round_up(stack, VMM_PAGE);
	l.low_end = vmm_round_up(l.stack_hi, VMM_HUGE);
	if (l.low_end > VMM_LOW_MAX)
		return VMM_E_BAD_CONFIG;
	l.n_pt = (unsigned)(l.low_end / VMM_HUGE);

	l.in_addr = l.low_end;
	l.in_size = in;
	l.in_span = vmm_round_up(in, VMM_HUGE);
	l.out_addr = l.in_addr + l.in_span;
	l.out_size = outsz;
	l.out_span = vmm_round_up(outsz, VMM_HUGE);
	l.heap_addr = l.out_addr + l.out_span;
	l.heap_size = vmm_round_up(heap, 16);
	l.heap_span = vmm_round_up(heap, VMM_HUGE);
	l.mem_size = l.heap_addr + l.heap_span;
	if (l.mem_size > VMM_MEM_MAX)
		return VMM_E_BAD_CONFIG;
	l.n_pd = (unsigned)((l.mem_size + (1ull << 30) - 1) >> 30);
	*out = l;
	return 0;
}

int vmm_layout_same(const struct vmm_layout *in, struct vmm_layout *out)
{
	struct vmm_config cfg = { .heap_size = in->heap_size, .stack_size = in->stack_hi - in->stack_lo,
				  .input_size = in->in_size, .output_size = in->out_size };
	struct vmm_layout c, d = *in;

	/* 0 would mean "the default" to vmm_layout_compute: never in a layout. */
	if (in->stack_hi <= in->stack_lo || !in->heap_size || !in->in_size || !in->out_size ||
	    vmm_layout_compute(&cfg, in->image_lo, in->image_hi, &c) < 0)
		return VMM_E_BAD_SNAPSHOT;
	d.isr = c.isr;  /* not in a description: fixed */
	if (memcmp(&c, &d, sizeof(c)) != 0)
		return VMM_E_BAD_SNAPSHOT;
	*out = c;
	return 0;
}
