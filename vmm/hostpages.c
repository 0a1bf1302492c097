/* hostpages.c: the pages below the image that strata builds itself (page tables, GDT/TSS, IDT, exception stubs and stacks, boot info): written for a new guest, required exactly so in every snapshot. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/sys.h"
#include "vmm/snap_int.h"

void vmm_perms_set(uint8_t *perms, uint64_t lo, uint64_t hi, uint8_t perm)
{
	for (uint64_t p = lo / VMM_PAGE; p < vmm_round_up(hi, VMM_PAGE) / VMM_PAGE; p++)
		perms[p] |= perm;
}

void vmm_host_pages_build(uint8_t *mem, const struct vmm_layout *l, uint8_t *perms, uint64_t canary)
{
	vmm_x86_supervisor_perms(l, perms);
	vmm_perms_set(perms, l->boot_info, l->boot_info + VMM_PAGE, VMM_PERM_R | VMM_PERM_USER);
	vmm_perms_set(perms, l->stack_lo, l->stack_hi, VMM_PERM_R | VMM_PERM_W | VMM_PERM_USER);
	vmm_x86_build(mem, l, perms);
	struct strata_boot_info bi = {
		.magic = STRATA_BOOT_MAGIC, .abi_version = STRATA_ABI_VERSION,
		.in_addr = l->in_addr, .in_size = l->in_size,
		.out_addr = l->out_addr, .out_size = l->out_size,
		.heap_addr = l->heap_addr, .heap_size = l->heap_size,
		.stack_lo = l->stack_lo, .stack_hi = l->stack_hi,
		.mem_size = l->mem_size,
	};
	memcpy(mem + l->boot_info, &bi, sizeof(bi));
	struct strata_tls tls = { .self = STRATA_TLS_GPA, .canary = canary & ~0xffull };
	memcpy(mem + STRATA_TLS_GPA, &tls, sizeof(tls));
}

/* What page p of the host pages is for, in words. */
static const char *role(const struct vmm_layout *l, uint64_t p)
{
	uint64_t a = p * VMM_PAGE;

	if (a >= l->pml4 && a < l->pt + (uint64_t)VMM_PAGE * 8)
		return "page-table";
	if (a == l->gdt)
		return "GDT/TSS";
	if (a == l->idt)
		return "IDT";
	if (a == l->isr)
		return "exception-stub";
	if (a == l->ist1_top - VMM_PAGE || a == l->ist2_top - VMM_PAGE)
		return "exception-stack";
	if (a == l->boot_info)
		return "boot-info";
	return "unused (all-zero)";
}

int vmm_host_pages_check(const struct vmm_layout *l, const uint8_t *(*page)(void *ctx, uint64_t p), void *ctx,
			 char *why, size_t whylen)
{
	const uint64_t n = l->boot_info / VMM_PAGE + 1;
	uint8_t *want = st_sys_calloc(n, VMM_PAGE);
	uint8_t *perms = st_sys_calloc(l->low_end / VMM_PAGE, 1);
	int rc = 0;

	if (!want || !perms) {
		rc = -ENOMEM;
		goto out_free;
	}
	/* The image's pages get what its segments asked for; the ELF is not
	 * kept, so each one's user leaf is taken from the snapshot's page
	 * table, if it is one strata writes (anything else builds as not
	 * present, and differs below). */
	for (uint64_t p = l->image_lo / VMM_PAGE; p < l->image_hi / VMM_PAGE; p++) {
		uint64_t at = l->pt + 8 * p, e = 0;
		const uint8_t *src = page(ctx, at / VMM_PAGE);
		if (src)
			memcpy(&e, src + at % VMM_PAGE, 8);
		perms[p] = (uint8_t)vmm_x86_user_leaf_perm(e, p * VMM_PAGE);
	}
	/* The canary is the snapshot's (any value with its low byte 0): the
	 * rest of the boot-info page is strata's. */
	uint64_t canary = 0;
	const uint8_t *bp = page(ctx, l->boot_info / VMM_PAGE);
	if (bp)
		memcpy(&canary, bp + (STRATA_TLS_GPA - l->boot_info) + offsetof(struct strata_tls, canary), 8);
	vmm_host_pages_build(want, l, perms, canary);
	for (uint64_t p = 0; p < n; p++) {
		const uint8_t *src = page(ctx, p), *w = want + p * VMM_PAGE;
		if (src ? memcmp(src, w, VMM_PAGE) == 0 : vmm_page_is_zero(w))
			continue;
		if (why)
			snprintf(why, whylen,
				 "its %s page at %#llx is not the one strata builds (only strata's code runs at CPL 0, "
				 "and a snapshot's supervisor pages must be strata's own)",
				 role(l, p), (unsigned long long)(p * VMM_PAGE));
		rc = VMM_E_BAD_SNAPSHOT;
		break;
	}
out_free:
	free(perms);
	free(want);
	return rc;
}
