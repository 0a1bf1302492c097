/* test_capture.c: capture is incremental, holds only non-zero pages, rebases, compacts, and fails cleanly. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "store/sys.h"

TestSuite(capture, .init = sh_setup, .fini = sh_teardown);

static uint64_t layer_pages(const struct st_manifest *m, uint32_t i)
{
	return m->layers[i].pages;
}

Test(capture, first_snapshot_holds_only_nonzero_pages)
{
	struct vmm_sandbox *sb = sh_sandbox(8 << 20);
	struct st_manifest *m = NULL;
	uint8_t *mem;
	uint64_t size, nonzero = 0;

	vmm_sandbox_memory(sb, &mem, &size);
	cr_assert_eq(vmm_sandbox_capture(sb, sh_store, &m), 0);
	for (uint64_t p = 0; p < size / 4096; p++) {
		static const uint8_t zero[4096];
		nonzero += memcmp(mem + p * 4096, zero, 4096) != 0;
	}
	cr_assert_eq(m->nlayers, 1);
	cr_assert_eq(layer_pages(m, 0), nonzero, "layer %llu pages, memory has %llu non-zero",
		     (unsigned long long)layer_pages(m, 0), (unsigned long long)nonzero);
	cr_assert(!m->has_parent);
	cr_assert_eq(m->mem_size, size);
	cr_assert_not_null(m->vcpu);
	cr_assert_not_null(m->guest);
	cr_assert_lt(nonzero, 64, "a fresh 8 MiB guest should hold a few dozen pages");
	st_manifest_free(m);
	vmm_sandbox_free(sb);
}

Test(capture, second_capture_is_incremental_and_names_its_parent)
{
	struct vmm_sandbox *sb = sh_sandbox(8 << 20);
	struct st_manifest *m1 = NULL, *m2 = NULL;
	st_id id1;

	cr_assert_eq(sh_snap(sb, &m1), 0);
	cr_assert_eq(st_manifest_id(m1, &id1, NULL, 0), 0);
	cr_assert_eq(sh_call_i(sb, "touch_pages", 1, 10), 10);
	cr_assert_eq(vmm_sandbox_capture(sb, sh_store, &m2), 0);
	cr_assert(m2->has_parent);
	cr_assert(st_id_equal(&m2->parent, &id1));
	cr_assert_eq(m2->nlayers, 2, "parent's layer plus one new");
	/* 10 heap pages, plus stack, frames and globals the call wrote */
	cr_assert_geq(layer_pages(m2, 1), 10);
	cr_assert_lt(layer_pages(m2, 1), 24, "new layer has %llu pages", (unsigned long long)layer_pages(m2, 1));
	st_manifest_free(m1);
	st_manifest_free(m2);
	vmm_sandbox_free(sb);
}

Test(capture, rebase_refuses_a_manifest_that_is_not_the_pending_capture)
{
	struct vmm_sandbox *sb = sh_sandbox(0);
	struct st_manifest *m1 = NULL, *m2 = NULL;
	st_id id1, id2;

	cr_assert_eq(vmm_sandbox_capture(sb, sh_store, &m1), 0);
	cr_assert_eq(st_manifest_id(m1, &id1, NULL, 0), 0);
	sh_call_i(sb, "counter_next", 0, 0);
	cr_assert_eq(vmm_sandbox_capture(sb, sh_store, &m2), 0);
	cr_assert_eq(st_manifest_id(m2, &id2, NULL, 0), 0);
	cr_assert_eq(vmm_sandbox_rebase(sb, m1, &id1), VMM_E_STALE);
	cr_assert_eq(vmm_sandbox_rebase(sb, m2, &id2), 0);
	st_manifest_free(m1);
	st_manifest_free(m2);
	vmm_sandbox_free(sb);
}

Test(capture, too_many_ranges_compacts_below_the_cap)
{
	struct vmm_sandbox *sb = sh_sandbox(8 << 20);
	struct st_manifest *m = NULL;

	cr_assert_eq(sh_snap(sb, NULL), 0);
	uint8_t *mem;
	uint64_t size;
	vmm_sandbox_memory(sb, &mem, &size);
	/* host writes to every other heap page: hundreds of one-page ranges */
	for (int gen = 0; gen < 3; gen++) {
		for (uint64_t p = 0; p < 300; p++)
			mem[size - (2 * p + 1 + (uint64_t)gen) * 4096] = (uint8_t)(gen + 1);
		cr_assert_eq(sh_snap(sb, &m), 0);
		cr_assert_leq(m->nranges, 64, "ranges %llu over the cap", (unsigned long long)m->nranges);
		st_manifest_free(m);
		m = NULL;
	}
	struct vmm_snap_stats st;
	vmm_sandbox_snap_stats(sb, &st);
	cr_assert_eq(st.compactions, 3);
	/* the flat layer holds exactly what memory holds */
	mem[size - 4096] = 99;
	cr_assert_eq(vmm_sandbox_restore(sb), 0);
	cr_assert_eq(vmm_sandbox_check(sb, NULL), 0);
	vmm_sandbox_free(sb);
}

/* A chain of small captures past the range cap rewrites its own recent
 * ranges, never the memory an older layer already holds: every capture's
 * new layer stays a small fraction of a large run written once at the
 * start (a compaction into one flat layer of all memory would rewrite it). */
Test(capture, compaction_rewrites_recent_small_ranges_not_old_memory)
{
	struct vmm_sandbox *sb = sh_sandbox(8 << 20);
	struct st_manifest *m = NULL;
	uint8_t *mem;
	uint64_t size, big = 1024;

	vmm_sandbox_memory(sb, &mem, &size);
	/* 4 MiB written once, at the top of the heap */
	for (uint64_t p = 1; p <= big; p++)
		mem[size - p * 4096] = 0x5a;
	cr_assert_eq(sh_snap(sb, NULL), 0);
	uint64_t compactions = 0;
	for (uint64_t gen = 0; gen < 200; gen++) {
		/* one page each, every other page below the large run */
		mem[size - (big + 2 + 2 * gen) * 4096] = (uint8_t)(gen + 1);
		cr_assert_eq(sh_snap(sb, &m), 0);
		cr_assert_leq(m->nranges, 64, "ranges %llu over the cap", (unsigned long long)m->nranges);
		uint64_t added = m->layers[m->nlayers - 1].pages;
		cr_assert_lt(added, big / 4, "generation %llu's layer has %llu pages: older memory rewritten",
			     (unsigned long long)gen, (unsigned long long)added);
		st_manifest_free(m);
		m = NULL;
	}
	struct vmm_snap_stats st;
	vmm_sandbox_snap_stats(sb, &st);
	compactions = st.compactions;
	cr_assert_geq(compactions, 1, "200 separate one-page ranges are past the cap");
	mem[size - 4096] = 99;
	cr_assert_eq(vmm_sandbox_restore(sb), 0);
	cr_assert_eq(vmm_sandbox_check(sb, NULL), 0);
	cr_assert_eq(mem[size - 4096], 0x5a);
	cr_assert_eq(mem[size - (big + 2 + 2 * 199) * 4096], 200);
	vmm_sandbox_free(sb);
}

Test(capture, failing_layer_write_leaves_no_snapshot_and_the_sandbox_usable)
{
	struct vmm_sandbox *sb = sh_sandbox(8 << 20);
	struct st_manifest *m = NULL;
	int fails = 0;

	cr_assert_eq(sh_snap(sb, NULL), 0);
	for (uint64_t step = 1; step < 40; step++) {
		sh_call_i(sb, "touch_pages", 1, 8);
		st_sys_fault_set(step, ENOSPC);
		int rc = vmm_sandbox_capture(sb, sh_store, &m);
		bool fired = st_sys_fault_fired();
		st_sys_fault_set(0, 0);
		if (!fired) {
			cr_assert_eq(rc, 0);
			st_manifest_free(m);
			m = NULL;
			break;
		}
		if (rc == 0 && vmm_sandbox_backend(sb) == VMM_BACKEND_PROCESS) {
			/* A step the process backend degrades around: its write
			 * tracking could not grow a list, so it stops tracking
			 * and the capture takes every page with data (vmm/proc.c).
			 * The snapshot is whole: a sandbox made from it runs. */
			struct vmm_sandbox *again = NULL;
			struct vmm_error err;
			cr_assert_eq(vmm_sandbox_from_snapshot(m, vmm_layer_open_store, sh_store, NULL, &again, &err), 0,
				     "%s", err.message);
			sh_echo(again, "from the degraded capture");
			vmm_sandbox_free(again);
			st_manifest_free(m);
			m = NULL;
			continue;
		}
		cr_assert_lt(rc, 0, "step %llu fired but capture succeeded", (unsigned long long)step);
		fails++;
		/* the sandbox still runs on its old snapshot */
		cr_assert_eq(vmm_sandbox_restore(sb), 0);
		cr_assert_eq(vmm_sandbox_check(sb, NULL), 0);
		sh_echo(sb, "still alive");
	}
	cr_assert_gt(fails, 2);
	vmm_sandbox_free(sb);
}
