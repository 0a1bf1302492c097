/* test_hostile.c: the hostile guest (vmm/guest/hostileguest.c) on each backend: no channel keeps state across a restore in place, a new sandbox from the warm list or a pool. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "helpers.h"

/* A hostile-guest sandbox, captured once (its snapshot is the state every
 * later call must start from). */
static struct vmm_sandbox *hostile_new(void)
{
	struct vmm_sandbox *sb = NULL;
	struct vmm_error err;

	cr_assert_eq(vmm_sandbox_new(HOSTILEGUEST, NULL, &sb, &err), 0, "sandbox: %s", err.message);
	cr_assert_eq(sh_snap(sb, NULL), 0);
	return sb;
}

Test(hostile, the_memory_counter_is_reset_by_a_restore, .init = sh_setup, .fini = sh_teardown)
{
	struct vmm_sandbox *sb = hostile_new();

	for (int round = 0; round < 3; round++) {
		int64_t v = sh_call_i(sb, "memory_next", 0, 0);
		cr_assert_eq(v, 1, "round %d: the counter kept its value across a restore (%lld)", round, (long long)v);
		cr_assert_eq(vmm_sandbox_restore(sb), 0, "%s", vmm_sandbox_error(sb)->message);
	}
	vmm_sandbox_free(sb);
}
