/* hostile_cpl0.c: CPL 0 channels: the hostile guest with its own exception stubs (hostile_cpl0.S) tries to run them at CPL 0 (tests/snap/test_hostile_cpl0.c). */
#include <stdint.h>

#include "include/strata_guest.h"

/*
 * cpl0_next(way, op) traps from CPL 3 in the way `way` names and returns
 * what the guest's own stub computed at CPL 0 for `op` (hostile_cpl0.S:
 * 0 the DR0 counter, 1 the KERNEL_GS_BASE counter, 2 CR0). A host that owns
 * every CPL 0 instruction never lets the stub run: the call ends in a guest
 * fault instead. Ways: the vector each raises on a CPU that delivers it,
 * and 0x100 + n for `int $n` (a DPL 0 gate: #GP).
 */
#define TRAP(insn)                                                                                     \
	__asm__ volatile("leaq 1f(%%rip), %%r10\n\t" insn "\n1:"                                       \
			 : "=a"(r)                                                                     \
			 : "0"(0), "r"(op_reg)                                                         \
			 : "rcx", "rdx", "r10", "memory", "cc")

STRATA_FUNCTION(cpl0_next, "i(ii)")
{
	int64_t way = strata_arg_i64(c, 0), r = -1;
	register int64_t op_reg __asm__("r11") = strata_arg_i64(c, 1);

	switch (way) {
	case 0: TRAP("xorl %%edx, %%edx\n\txorl %%ecx, %%ecx\n\tdivl %%ecx"); break; /* #DE */
	case 1: TRAP(".byte 0xf1"); break;                                        /* icebp: #DB */
	case 3: TRAP("int3"); break;                                              /* #BP, DPL 3 gate */
	case 6: TRAP("ud2"); break;                                               /* #UD */
	case 13: TRAP("hlt"); break;                                              /* #GP: privileged */
	case 14: TRAP("movl 0x8, %%ecx"); break;                                  /* #PF: the null page */
	case 0x100 + 1: TRAP("int $0x01"); break;
	case 0x100 + 4: TRAP("int $0x04"); break;
	case 0x100 + 14: TRAP("int $0x0e"); break;
	case 0x100 + 0x20: TRAP("int $0x20"); break;
	case 0x100 + 0x80: TRAP("int $0x80"); break;
	default: return strata_fail(c, "no way %lld", (long long)way);
	}
	return strata_ret_i64(c, r);
}

/* The pages strata builds below the image, from CPL 3: a store to one
 * (page tables, descriptors, stubs, exception stacks, boot info) or a
 * jump into the stub page must fault, never return. */
STRATA_FUNCTION(cpl3_poke, "i(i)")
{
	volatile uint8_t *p = (volatile uint8_t *)(uintptr_t)strata_arg_i64(c, 0);

	*p = 1;
	return strata_ret_i64(c, 1);
}

STRATA_FUNCTION(cpl3_jump, "i(i)")
{
	void (*f)(void) = (void (*)(void))(uintptr_t)strata_arg_i64(c, 0);

	f();
	return strata_ret_i64(c, 1);
}
