/* test_property.c: thousands of restores of random write patterns under the debug check, and deep chains. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

TestSuite(property, .init = sh_setup, .fini = sh_teardown);

static uint64_t rnd(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

Test(property, random_writes_never_survive_a_restore)
{
	struct vmm_sandbox *sb = sh_sandbox(8 << 20);
	struct st_manifest *ms[3] = { 0 };
	uint8_t *mem;
	uint64_t size, seed = 0x9e3779b97f4a7c15ull;
	int64_t expect[3];

	vmm_sandbox_memory(sb, &mem, &size);
	for (int k = 0; k < 3; k++) {
		expect[k] = sh_call_i(sb, "counter_next", 0, 0) + 1;
		sh_call_i(sb, "touch_pages", 1, 20 * (k + 1));
		cr_assert_eq(sh_snap(sb, &ms[k]), 0);
	}
	vmm_sandbox_set_debug(sb, true);
	int cur = 2;
	for (int i = 0; i < 2000; i++) {
		uint64_t r = rnd(&seed);
		bool heavy = (i / 100) % 2 == 0 && r % 10 == 0;
		sh_call_i(sb, "touch_pages", 1, (int64_t)(heavy ? 1000 + r % 1000 : r % 8));
		/* host writes anywhere in the guest-visible memory */
		for (unsigned h = 0; h < r % 4; h++) {
			uint64_t p = 256 + rnd(&seed) % (size / 4096 - 256);
			mem[p * 4096 + rnd(&seed) % 4096] ^= (uint8_t)(1 + rnd(&seed) % 255);
		}
		int rc;
		if (r % 5 == 0) {
			cur = (int)(rnd(&seed) % 3);
			rc = vmm_sandbox_restore_to(sb, ms[cur], vmm_layer_open_store, sh_store);
		} else {
			rc = vmm_sandbox_restore(sb);
		}
		cr_assert_eq(rc, 0, "restore %d: %s", i, vmm_strerror(rc));
		if (i % 50 == 0)
			cr_assert_eq(sh_call_i(sb, "counter_next", 0, 0), expect[cur]);
	}
	for (int k = 0; k < 3; k++)
		st_manifest_free(ms[k]);
	vmm_sandbox_free(sb);
}

Test(property, a_chain_of_100_generations_stays_restorable)
{
	struct vmm_sandbox *sb = sh_sandbox(8 << 20), *sb2 = NULL;
	struct st_manifest *m = NULL, *first = NULL;
	struct vmm_error err;

	vmm_sandbox_set_debug(sb, true);
	for (int g = 0; g < 100; g++) {
		sh_call_i(sb, "counter_next", 0, 0);
		sh_call_i(sb, "touch_pages", 1, 1 + (g * 13) % 200);
		st_manifest_free(m);
		m = NULL;
		cr_assert_eq(sh_snap(sb, &m), 0, "generation %d", g);
		if (g == 0)
			cr_assert_eq(st_manifest_dup(m, &first), 0);
		sh_call_i(sb, "touch_pages", 1, 3);
		cr_assert_eq(vmm_sandbox_restore(sb), 0);
	}
	cr_assert_leq(m->nranges, 64);
	cr_assert_eq(vmm_sandbox_from_snapshot(m, vmm_layer_open_store, sh_store, NULL, &sb2, &err), 0, "%s",
		     err.message);
	vmm_sandbox_set_debug(sb2, true);
	cr_assert_eq(vmm_sandbox_check(sb2, NULL), 0);
	cr_assert_eq(sh_call_i(sb2, "counter_next", 0, 0), 101);
	/* and back to the first generation in place */
	cr_assert_eq(vmm_sandbox_restore_to(sb2, first, vmm_layer_open_store, sh_store), 0);
	cr_assert_eq(sh_call_i(sb2, "counter_next", 0, 0), 2);
	st_manifest_free(first);
	st_manifest_free(m);
	vmm_sandbox_free(sb2);
	vmm_sandbox_free(sb);
}
