/* test_restore.c: restore in place, to other snapshots, and from manifests (store and snapshot directory). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

TestSuite(restore, .init = sh_setup, .fini = sh_teardown);

Test(restore, restore_puts_back_state_the_calls_changed)
{
	struct vmm_sandbox *sb = sh_sandbox(0);

	cr_assert_eq(vmm_sandbox_restore(sb), VMM_E_NO_SNAPSHOT);
	cr_assert_eq(sh_call_i(sb, "counter_next", 0, 0), 1);
	cr_assert_eq(sh_snap(sb, NULL), 0);
	cr_assert_eq(sh_call_i(sb, "counter_next", 0, 0), 2);
	cr_assert_eq(sh_call_i(sb, "counter_next", 0, 0), 3);
	cr_assert_eq(vmm_sandbox_restore(sb), 0);
	cr_assert_eq(vmm_sandbox_check(sb, NULL), 0);
	cr_assert_eq(sh_call_i(sb, "counter_next", 0, 0), 2);
	cr_assert_eq(vmm_sandbox_restore(sb), 0);
	cr_assert_eq(sh_call_i(sb, "counter_next", 0, 0), 2);
	vmm_sandbox_free(sb);
}

Test(restore, host_and_guest_writes_are_both_undone)
{
	struct vmm_sandbox *sb = sh_sandbox(8 << 20);
	uint8_t *mem;
	uint64_t size;

	vmm_sandbox_memory(sb, &mem, &size);
	cr_assert_eq(sh_snap(sb, NULL), 0);
	sh_call_i(sb, "touch_pages", 1, 300);
	sh_echo(sb, "a string the host writes into the input buffer");
	memset(mem + size - 3 * 4096, 0xab, 4096);  /* a host write outside any call */
	cr_assert_neq(vmm_sandbox_check(sb, NULL), 0);
	cr_assert_eq(vmm_sandbox_restore(sb), 0);
	uint64_t bad = 0;
	cr_assert_eq(vmm_sandbox_check(sb, &bad), 0, "page %llu differs", (unsigned long long)bad);
	sh_echo(sb, "after");
	vmm_sandbox_free(sb);
}

/* Each round writes a page no round wrote before (on the process backend a
 * hole in the memfd until then: found by its data, not by a write-protect
 * marker), and each restore puts all of memory back. */
Test(restore, pages_that_first_get_data_between_restores_are_put_back_each_time)
{
	struct vmm_sandbox *sb = sh_sandbox(8 << 20);
	uint8_t *mem;
	uint64_t size;

	vmm_sandbox_memory(sb, &mem, &size);
	cr_assert_eq(sh_snap(sb, NULL), 0);
	for (unsigned r = 0; r < 4; r++) {
		memset(mem + size - (8 + 2 * r) * 4096, 0xcd, 4096);
		if (r % 2)
			sh_call_i(sb, "touch_pages", 1, 300);
		cr_assert_neq(vmm_sandbox_check(sb, NULL), 0, "round %u: the write went unseen", r);
		cr_assert_eq(vmm_sandbox_restore(sb), 0);
		uint64_t bad = 0;
		cr_assert_eq(vmm_sandbox_check(sb, &bad), 0, "round %u: page %llu differs", r, (unsigned long long)bad);
	}
	vmm_sandbox_free(sb);
}

Test(restore, a_poisoned_sandbox_is_usable_after_restore)
{
	struct vmm_sandbox *sb = sh_sandbox(0);
	struct vmm_result r = { 0 };

	cr_assert_eq(sh_snap(sb, NULL), 0);
	cr_assert_eq(vmm_sandbox_call(sb, "null_write", NULL, 0, &r), VMM_E_GUEST_FAULT);
	cr_assert(vmm_sandbox_poisoned(sb));
	cr_assert_eq(vmm_sandbox_restore(sb), 0);
	cr_assert(!vmm_sandbox_poisoned(sb));
	sh_echo(sb, "healed");
	cr_assert_eq(sh_call_i(sb, "counter_next", 0, 0), 1);
	vmm_sandbox_free(sb);
}

Test(restore, a_refused_restore_to_leaves_a_poisoned_sandbox_poisoned)
{
	struct vmm_sandbox *sb = sh_sandbox(0);
	struct vmm_result r = { 0 };
	struct st_manifest *m = NULL, *bad = NULL;

	cr_assert_eq(sh_snap(sb, &m), 0);
	cr_assert_eq(vmm_sandbox_call(sb, "null_write", NULL, 0, &r), VMM_E_GUEST_FAULT);
	cr_assert(vmm_sandbox_poisoned(sb));
	/* A manifest whose vCPU state does not parse: refused before anything
	 * changes, so the faulted guest must not run. */
	cr_assert_eq(st_manifest_dup(m, &bad), 0);
	free(bad->vcpu);
	bad->vcpu = strdup("{}");
	cr_assert_lt(vmm_sandbox_restore_to(sb, bad, vmm_layer_open_store, sh_store), 0);
	cr_assert(vmm_sandbox_poisoned(sb), "a refused restore cleared the poison");
	cr_assert_eq(vmm_sandbox_call(sb, "counter_next", NULL, 0, &r), VMM_E_POISONED);
	/* A restore that succeeds still heals it. */
	cr_assert_eq(vmm_sandbox_restore(sb), 0);
	cr_assert_eq(sh_call_i(sb, "counter_next", 0, 0), 1);
	st_manifest_free(bad);
	st_manifest_free(m);
	vmm_sandbox_free(sb);
}

Test(restore, from_the_store_continues_where_the_snapshot_was)
{
	struct vmm_sandbox *sb = sh_sandbox(8 << 20), *sb2 = NULL;
	struct st_manifest *m = NULL;
	struct vmm_error err;

	sh_call_i(sb, "counter_next", 0, 0);
	sh_call_i(sb, "counter_next", 0, 0);
	cr_assert_eq(sh_snap(sb, &m), 0);
	int rc = vmm_sandbox_from_snapshot(m, vmm_layer_open_store, sh_store, NULL, &sb2, &err);
	cr_assert_eq(rc, 0, "%s", err.message);
	cr_assert_eq(sh_call_i(sb2, "counter_next", 0, 0), 3);
	sh_echo(sb2, "restored");
	cr_assert_eq(vmm_sandbox_restore(sb2), 0);
	cr_assert_eq(sh_call_i(sb2, "counter_next", 0, 0), 3);
	/* and a capture of the restored sandbox is incremental on m */
	struct st_manifest *m2 = NULL;
	sh_call_i(sb2, "counter_next", 0, 0);
	cr_assert_eq(vmm_sandbox_capture(sb2, sh_store, &m2), 0);
	cr_assert(m2->has_parent);
	cr_assert_lt(m2->layers[m2->nlayers - 1].pages, 16);
	st_manifest_free(m2);
	st_manifest_free(m);
	vmm_sandbox_free(sb2);
	vmm_sandbox_free(sb);
}

Test(restore, from_a_snapshot_directory)
{
	struct vmm_sandbox *sb = sh_sandbox(0), *sb2 = NULL;
	struct st_manifest *m = NULL, *m2 = NULL;
	struct vmm_error err;
	char dir[300], why[256];

	sh_call_i(sb, "counter_next", 0, 0);
	cr_assert_eq(sh_snap(sb, &m), 0);
	snprintf(dir, sizeof(dir), "%s/exported", sh_dir);
	cr_assert_eq(st_snapdir_export(sh_store, m, dir, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(st_snapdir_read(dir, &m2, why, sizeof(why)), 0, "%s", why);
	int rc = vmm_sandbox_from_snapshot(m2, vmm_layer_open_dir, dir, NULL, &sb2, &err);
	cr_assert_eq(rc, 0, "%s", err.message);
	cr_assert_eq(sh_call_i(sb2, "counter_next", 0, 0), 2);
	st_manifest_free(m);
	st_manifest_free(m2);
	vmm_sandbox_free(sb2);
	vmm_sandbox_free(sb);
}

Test(restore, inconsistent_manifests_are_refused_with_a_reason)
{
	struct vmm_sandbox *sb = sh_sandbox(0), *sb2 = NULL;
	struct st_manifest *m = NULL, *bad = NULL;
	struct vmm_error err;

	cr_assert_eq(sh_snap(sb, &m), 0);
	/* wrong ABI version */
	cr_assert_eq(st_manifest_dup(m, &bad), 0);
	bad->abi_version = 99;
	cr_assert_eq(vmm_sandbox_from_snapshot(bad, vmm_layer_open_store, sh_store, NULL, &sb2, &err), VMM_E_ABI);
	cr_assert(strstr(err.message, "ABI version 99"), "%s", err.message);
	st_manifest_free(bad);
	/* memory size that does not match the guest layout */
	cr_assert_eq(st_manifest_dup(m, &bad), 0);
	bad->mem_size += 1 << 21;
	cr_assert_eq(vmm_sandbox_from_snapshot(bad, vmm_layer_open_store, sh_store, NULL, &sb2, &err),
		     VMM_E_BAD_SNAPSHOT);
	cr_assert(strstr(err.message, "memory"), "%s", err.message);
	st_manifest_free(bad);
	/* a missing layer */
	cr_assert_eq(st_manifest_dup(m, &bad), 0);
	bad->layers[0].id.b[0] ^= 1;
	cr_assert_eq(vmm_sandbox_from_snapshot(bad, vmm_layer_open_store, sh_store, NULL, &sb2, &err),
		     VMM_E_BAD_SNAPSHOT);
	cr_assert(strstr(err.message, "missing"), "%s", err.message);
	st_manifest_free(bad);
	/* a layer of the wrong length */
	cr_assert_eq(st_manifest_dup(m, &bad), 0);
	bad->layers[0].pages += 1;
	cr_assert_eq(vmm_sandbox_from_snapshot(bad, vmm_layer_open_store, sh_store, NULL, &sb2, &err),
		     VMM_E_BAD_SNAPSHOT);
	cr_assert(strstr(err.message, "bytes"), "%s", err.message);
	st_manifest_free(bad);
	/* no vCPU state */
	cr_assert_eq(st_manifest_dup(m, &bad), 0);
	free(bad->vcpu);
	bad->vcpu = NULL;
	cr_assert_eq(vmm_sandbox_from_snapshot(bad, vmm_layer_open_store, sh_store, NULL, &sb2, &err),
		     VMM_E_BAD_SNAPSHOT);
	st_manifest_free(bad);
	/* configuration asking for another heap */
	struct vmm_config cfg = { .heap_size = 64 << 20 };
	cr_assert_eq(vmm_sandbox_from_snapshot(m, vmm_layer_open_store, sh_store, &cfg, &sb2, &err),
		     VMM_E_BAD_SNAPSHOT);
	cr_assert_null(sb2);
	st_manifest_free(m);
	vmm_sandbox_free(sb);
}

Test(restore, alternating_between_two_snapshots_remaps_only_what_differs)
{
	struct vmm_sandbox *sb = sh_sandbox(8 << 20);
	struct st_manifest *a = NULL, *b = NULL;

	sh_call_i(sb, "counter_next", 0, 0);
	cr_assert_eq(sh_snap(sb, &a), 0);
	sh_call_i(sb, "counter_next", 0, 0);
	sh_call_i(sb, "touch_pages", 1, 50);
	cr_assert_eq(sh_snap(sb, &b), 0);
	vmm_sandbox_set_debug(sb, true);
	for (int i = 0; i < 20; i++) {
		cr_assert_eq(vmm_sandbox_restore_to(sb, a, vmm_layer_open_store, sh_store), 0);
		cr_assert_eq(sh_call_i(sb, "counter_next", 0, 0), 2);
		sh_call_i(sb, "touch_pages", 1, (i * 7) % 100);
		cr_assert_eq(vmm_sandbox_restore_to(sb, b, vmm_layer_open_store, sh_store), 0);
		cr_assert_eq(sh_call_i(sb, "counter_next", 0, 0), 3);
	}
	struct vmm_snap_stats st;
	vmm_sandbox_snap_stats(sb, &st);
	/* each switch maps the few ranges that differ, not the whole memory */
	cr_assert_lt(st.maps, 20 * 2 * 8, "maps %llu", (unsigned long long)st.maps);
	st_manifest_free(a);
	st_manifest_free(b);
	vmm_sandbox_free(sb);
}

/* Jumping across the tree: six snapshots (counter 1..6) visited in a
 * scrambled order, more than the VMM_SNAP_ALTS kept ready, so some visits
 * hit a kept snapshot and some evict one. Every restore must equal its
 * snapshot exactly (debug check) and continue its counter. */
Test(restore, jumping_among_more_snapshots_than_are_kept_stays_exact)
{
	enum { N = 6 };
	struct vmm_sandbox *sb = sh_sandbox(0);
	struct st_manifest *m[N];
	static const int order[] = { 0, 5, 1, 4, 2, 3, 0, 1, 5, 5, 2, 4, 3, 0, 4, 1, 2, 5, 3, 0 };

	vmm_sandbox_set_debug(sb, true);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(sh_call_i(sb, "counter_next", 0, 0), i + 1);
		cr_assert_eq(sh_snap(sb, &m[i]), 0);
	}
	for (size_t k = 0; k < sizeof(order) / sizeof(order[0]); k++) {
		int i = order[k];
		cr_assert_eq(vmm_sandbox_restore_to(sb, m[i], vmm_layer_open_store, sh_store), 0,
			     "visit %zu (snapshot %d): %s", k, i, vmm_sandbox_error(sb)->message);
		uint64_t gpage = 0;
		cr_assert_eq(vmm_sandbox_check(sb, &gpage), 0, "visit %zu: page %llu differs", k,
			     (unsigned long long)gpage);
		cr_assert_eq(sh_call_i(sb, "touch_pages", 1, 3), 3);
		cr_assert_eq(sh_call_i(sb, "counter_next", 0, 0), i + 2, "visit %zu continues snapshot %d", k, i);
	}
	for (int i = 0; i < N; i++)
		st_manifest_free(m[i]);
	vmm_sandbox_free(sb);
}
