/* test_memsnap.c: in-memory snapshots (vmm/memsnap.c) on each backend: every restore gives back the point exactly, memory, vCPU and the child, whatever ran since. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/store.h"
#include "tests/snap/helpers.h"

/*
 * A restore point and what it must give back, recorded independently of
 * the snapshot: a copy of all guest memory, and the vCPU state a capture
 * into the store records at that moment (its manifest's vcpu text). Each
 * restore is compared with both, and runs the debug check too
 * (vmm_sandbox_check: memory against the snapshot's own layers, the
 * vCPU's whole vector state on KVM, the child's control pages, signal
 * stack and mappings on the process backend).
 */
struct point {
	struct vmm_memsnap *snap;
	uint8_t *mem;
	uint64_t size;
	char *vcpu;
};

/* The vCPU state a capture of sb records now (a capture without rebase
 * changes nothing the guest sees; a snapshot taken later drops it). */
static char *vcpu_now(struct vmm_sandbox *sb)
{
	struct st_manifest *m = NULL;
	int rc = vmm_sandbox_capture(sb, sh_store, &m);

	cr_assert_eq(rc, 0, "capture: %s", vmm_strerror(rc));
	char *v = strdup(m->vcpu);
	st_manifest_free(m);
	return v;
}

static void point_take(struct vmm_sandbox *sb, struct point *p)
{
	uint8_t *mem;
	int rc = vmm_sandbox_snapshot_mem(sb, &p->snap);

	cr_assert_eq(rc, 0, "snapshot_mem: %s", vmm_strerror(rc));
	vmm_sandbox_memory(sb, &mem, &p->size);
	p->mem = malloc(p->size);
	cr_assert(p->mem);
	memcpy(p->mem, mem, p->size);
	p->vcpu = vcpu_now(sb);
}

static void point_free(struct point *p)
{
	vmm_memsnap_free(p->snap);
	free(p->mem);
	free(p->vcpu);
	memset(p, 0, sizeof(*p));
}

/* sb is exactly at p: memory byte for byte, the vCPU, the debug check. */
static void point_is(struct vmm_sandbox *sb, const struct point *p, const char *what)
{
	uint8_t *mem;
	uint64_t size, gpage = 0;
	int rc = vmm_sandbox_check(sb, &gpage);

	cr_assert_eq(rc, 0, "%s: the debug check: %s (page %llu)", what, vmm_sandbox_error(sb)->message,
		     (unsigned long long)gpage);
	vmm_sandbox_memory(sb, &mem, &size);
	cr_assert_eq(size, p->size);
	for (uint64_t pg = 0; pg < size / 4096; pg++)
		cr_assert(memcmp(mem + pg * 4096, p->mem + pg * 4096, 4096) == 0,
			  "%s: guest page %llu differs from the point", what, (unsigned long long)pg);
	char *v = vcpu_now(sb);
	cr_assert_str_eq(v, p->vcpu, "%s: the vCPU differs from the point", what);
	free(v);
}

static void point_restore(struct vmm_sandbox *sb, const struct point *p, const char *what)
{
	int rc = vmm_sandbox_restore_mem(sb, p->snap);

	cr_assert_eq(rc, 0, "%s: restore_mem: %s: %s", what, vmm_strerror(rc), vmm_sandbox_error(sb)->message);
	point_is(sb, p, what);
}

static int host_add(void *ctx, const struct vmm_value *a, size_t n, struct vmm_value *ret)
{
	(void)ctx;
	(void)n;
	ret->type = VMM_I64;
	ret->i64 = a[0].i64 + a[1].i64;
	return 0;
}

/* A simpleguest sandbox (no store snapshot: its first point is built from
 * the ELF's memory), checking every restore. */
static struct vmm_sandbox *simple_new(uint64_t heap)
{
	struct vmm_sandbox *sb = sh_sandbox(heap);

	vmm_sandbox_set_debug(sb, true);
	return sb;
}

TestSuite(memsnap, .init = sh_setup, .fini = sh_teardown);

Test(memsnap, a_restore_gives_back_the_point_exactly)
{
	struct vmm_sandbox *sb = simple_new(0);
	struct point a;

	for (int i = 0; i < 3; i++)
		sh_call_i(sb, "counter_next", 0, 0);
	sh_call_i(sb, "touch_pages", 1, 10);
	point_take(sb, &a);
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 5; i++)
			sh_call_i(sb, "counter_next", 0, 0);
		struct vmm_value v[3] = { { .type = VMM_I64, .i64 = 20 }, { .type = VMM_I64, .i64 = 3 },
					  { .type = VMM_I64, .i64 = round + 1 } };
		struct vmm_result r = { 0 };
		cr_assert_eq(vmm_sandbox_call(sb, "fill_pages", v, 3, &r), 0);
		point_restore(sb, &a, "after calls");
		cr_assert_eq(sh_call_i(sb, "counter_next", 0, 0), 4, "round %d", round);
		/* vmm_sandbox_restore goes back to the same point: it is current */
		cr_assert_eq(vmm_sandbox_restore(sb), 0, "%s", vmm_sandbox_error(sb)->message);
		point_is(sb, &a, "a plain restore");
	}
	point_free(&a);
	vmm_sandbox_free(sb);
}

/* A, run, B, run, restore A, B, A: each exactly; then six points, more
 * than the sandbox keeps ready, restored in a scrambled order. */
Test(memsnap, a_chain_of_points_restores_each_exactly)
{
	struct vmm_sandbox *sb = simple_new(4 << 20);
	struct point p[6];

	point_take(sb, &p[0]);
	sh_call_i(sb, "counter_next", 0, 0);
	sh_call_i(sb, "touch_pages", 1, 40);
	point_take(sb, &p[1]);
	sh_call_i(sb, "touch_pages", 1, 80);
	sh_echo(sb, "between");
	point_restore(sb, &p[0], "A after B");
	cr_assert_eq(sh_call_i(sb, "counter_next", 0, 0), 1);
	point_restore(sb, &p[1], "B after A");
	cr_assert_eq(sh_call_i(sb, "counter_next", 0, 0), 2);
	point_restore(sb, &p[0], "A after B again");
	cr_assert_eq(sh_call_i(sb, "counter_next", 0, 0), 1);
	/* Points 2..5 on top of 0: each writes other pages. */
	point_restore(sb, &p[0], "A");
	for (int k = 2; k < 6; k++) {
		struct vmm_value v[3] = { { .type = VMM_I64, .i64 = 7 }, { .type = VMM_I64, .i64 = 10 * k },
					  { .type = VMM_I64, .i64 = k } };
		struct vmm_result r = { 0 };
		sh_call_i(sb, "counter_next", 0, 0);
		cr_assert_eq(vmm_sandbox_call(sb, "fill_pages", v, 3, &r), 0);
		point_take(sb, &p[k]);
	}
	static const int order[] = { 2, 5, 0, 3, 1, 4, 4, 2, 0, 5, 1, 3 };
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		char what[32];
		snprintf(what, sizeof(what), "point %d (step %zu)", order[i], i);
		sh_call_i(sb, "touch_pages", 1, 5 + (int64_t)i);
		point_restore(sb, &p[order[i]], what);
	}
	for (int k = 0; k < 6; k++)
		point_free(&p[k]);
	vmm_sandbox_free(sb);
}

/* Between the snapshot and its restore the guest overwrites every page it
 * may write and the host every page of guest memory (page tables, stubs
 * and boot info included). */
Test(memsnap, a_guest_and_host_that_write_everywhere_leave_nothing)
{
	struct vmm_sandbox *sb = NULL;
	struct vmm_error err;
	struct point a;
	uint8_t *mem;
	uint64_t size;

	cr_assert_eq(vmm_sandbox_new(HOSTILEGUEST, NULL, &sb, &err), 0, "%s", err.message);
	vmm_sandbox_set_debug(sb, true);
	cr_assert_eq(sh_call_i(sb, "memory_next", 0, 0), 1);
	point_take(sb, &a);
	vmm_sandbox_memory(sb, &mem, &size);
	for (int64_t seed = 1; seed <= 3; seed++) {
		int64_t pages = sh_call_i(sb, "scribble_all", 1, seed);
		cr_assert_gt(pages, 16, "the guest wrote %lld pages", (long long)pages);
		point_restore(sb, &a, "after the guest wrote everywhere");
		cr_assert_eq(sh_call_i(sb, "memory_next", 0, 0), 2);
		sh_call_i(sb, "scribble_all", 1, seed + 10);
		for (uint64_t off = 0; off < size; off += 4096)
			mem[off + (uint64_t)seed * 8] ^= 0xa5;
		point_restore(sb, &a, "after the guest and the host wrote everywhere");
		cr_assert_eq(sh_call_i(sb, "memory_next", 0, 0), 2);
		point_restore(sb, &a, "after one call");
	}
	point_free(&a);
	vmm_sandbox_free(sb);
}

/* A channel is refused where the guest faulted, the process backend's
 * filter ended its child, or the guest gave up with a reason (a vector
 * extension it does not have). */
static bool refused(int rc, const struct vmm_error *e)
{
	(void)e;
	return rc == VMM_E_GUEST_ERROR || rc == VMM_E_GUEST_FAULT || rc == VMM_E_SHUTDOWN;
}

/* Every channel of the hostile guest (its functions named *_next: each
 * reads the state it hides, adds one and returns it) after a restore to an
 * in-memory snapshot taken before it ran: 1, or refused. */
Test(memsnap, no_hostile_channel_survives_a_restore)
{
	struct vmm_sandbox *sb = NULL;
	struct vmm_error err;
	char survived[1024] = "";
	unsigned tried = 0;

	cr_assert_eq(vmm_sandbox_new(HOSTILEGUEST, NULL, &sb, &err), 0, "%s", err.message);
	unsigned nfn = vmm_sandbox_function_count(sb);
	vmm_sandbox_free(sb);
	for (unsigned i = 0; i < nfn; i++) {
		const char *name;
		const struct vmm_signature *sig;
		cr_assert_eq(vmm_sandbox_new(HOSTILEGUEST, NULL, &sb, &err), 0, "%s", err.message);
		vmm_sandbox_set_debug(sb, true);
		cr_assert_eq(vmm_sandbox_function(sb, i, &name, &sig), 0);
		size_t len = strlen(name);
		if (len < 5 || strcmp(name + len - 5, "_next") != 0 || sig->nparams != 0) {
			vmm_sandbox_free(sb);
			continue;
		}
		struct point a;
		point_take(sb, &a);
		tried++;
		for (int round = 0; round < 3; round++) {
			sh_channel_call(sb, name, refused);
			sh_channel_call(sb, name, refused);
			int rc = vmm_sandbox_restore_mem(sb, a.snap);
			if (rc == VMM_E_LEAK) {
				cr_log_error("restore after %s: %s", name, vmm_sandbox_error(sb)->message);
				strncat(survived, " ", sizeof(survived) - strlen(survived) - 1);
				strncat(survived, name, sizeof(survived) - strlen(survived) - 1);
				break;
			}
			cr_assert_eq(rc, 0, "after %s: %s", name, vmm_sandbox_error(sb)->message);
			int64_t v = sh_channel_call(sb, name, refused);
			if (v != 0 && v != 1) {
				cr_log_error("%s after a restore returned %lld", name, (long long)v);
				strncat(survived, " ", sizeof(survived) - strlen(survived) - 1);
				strncat(survived, name, sizeof(survived) - strlen(survived) - 1);
				break;
			}
			cr_assert_eq(vmm_sandbox_restore_mem(sb, a.snap), 0, "%s", vmm_sandbox_error(sb)->message);
			point_is(sb, &a, name);
		}
		point_free(&a);
		vmm_sandbox_free(sb);
	}
	cr_assert_geq(tried, 20, "only %u channels found", tried);
	cr_assert_eq(survived[0], 0, "state survived through:%s", survived);
}

Test(memsnap, a_snapshot_of_another_sandbox_is_refused)
{
	struct vmm_sandbox *a = simple_new(0), *b = simple_new(0);
	struct vmm_memsnap *sa = NULL, *sb_snap = NULL;

	cr_assert_eq(sh_call_i(a, "counter_next", 0, 0), 1);
	cr_assert_eq(vmm_sandbox_snapshot_mem(a, &sa), 0);
	cr_assert_eq(sh_call_i(b, "counter_next", 0, 0), 1);
	cr_assert_eq(vmm_sandbox_restore_mem(b, sa), VMM_E_FOREIGN, "a sandbox that took none");
	cr_assert(strstr(vmm_sandbox_error(b)->message, "another sandbox"), "%s", vmm_sandbox_error(b)->message);
	cr_assert_str_eq(vmm_strerror(VMM_E_FOREIGN), "the in-memory snapshot belongs to another sandbox");
	cr_assert_eq(sh_call_i(b, "counter_next", 0, 0), 2, "nothing changed");
	cr_assert_eq(vmm_sandbox_snapshot_mem(b, &sb_snap), 0);
	cr_assert_eq(vmm_sandbox_restore_mem(b, sa), VMM_E_FOREIGN, "a sandbox with points of its own");
	cr_assert_eq(vmm_sandbox_restore_mem(a, sb_snap), VMM_E_FOREIGN);
	cr_assert_eq(sh_call_i(b, "counter_next", 0, 0), 3);
	cr_assert_eq(vmm_sandbox_restore_mem(b, sb_snap), 0);
	cr_assert_eq(sh_call_i(b, "counter_next", 0, 0), 3);
	cr_assert_eq(vmm_sandbox_restore_mem(a, sa), 0);
	cr_assert_eq(sh_call_i(a, "counter_next", 0, 0), 2);
	cr_assert_eq(vmm_sandbox_restore_mem(NULL, sa), -EINVAL);
	cr_assert_eq(vmm_sandbox_restore_mem(a, NULL), -EINVAL);
	cr_assert_eq(vmm_sandbox_snapshot_mem(a, NULL), -EINVAL);
	vmm_memsnap_free(sa);
	vmm_memsnap_free(sb_snap);
	vmm_sandbox_free(a);
	vmm_sandbox_free(b);
}

/* A sandbox a host kept warm is a new life: the points its last user took
 * are refused (its next user must not get them back). */
Test(memsnap, the_points_of_a_warm_sandbox_s_last_user_are_refused)
{
	struct vmm_host *host = sh_debug_host(2, 0);
	struct vmm_config cfg = { .host = host };
	struct vmm_sandbox *sb = NULL, *again = NULL;
	struct st_manifest *m = NULL;
	struct vmm_memsnap *old = NULL;
	struct vmm_error err;

	cr_assert_eq(vmm_sandbox_new(SIMPLEGUEST, &cfg, &sb, &err), 0, "%s", err.message);
	cr_assert_eq(sh_snap(sb, &m), 0);
	vmm_sandbox_free(sb);
	cr_assert_eq(vmm_sandbox_from_snapshot(m, vmm_layer_open_store, sh_store, &cfg, &sb, &err), 0, "%s",
		     err.message);
	cr_assert_eq(sh_call_i(sb, "counter_next", 0, 0), 1);
	cr_assert_eq(vmm_sandbox_snapshot_mem(sb, &old), 0);
	/* Back on the store's snapshot, so the host may keep it. */
	cr_assert_eq(vmm_sandbox_restore_to(sb, m, vmm_layer_open_store, sh_store), 0, "%s",
		     vmm_sandbox_error(sb)->message);
	struct vmm_sandbox *was = sb;
	vmm_sandbox_free(sb);
	struct vmm_host_stats hs;
	vmm_host_stats(host, &hs);
	cr_assert_eq(hs.warm, 1, "kept warm");
	cr_assert_eq(vmm_sandbox_from_snapshot(m, vmm_layer_open_store, sh_store, &cfg, &again, &err), 0, "%s",
		     err.message);
	cr_assert_eq(again, was, "the warm one");
	cr_assert_eq(vmm_sandbox_restore_mem(again, old), VMM_E_FOREIGN);
	cr_assert_eq(sh_call_i(again, "counter_next", 0, 0), 1, "still the store's snapshot");
	vmm_memsnap_free(old);
	/* One on an in-memory snapshot is not kept: no manifest asks for it. */
	cr_assert_eq(vmm_sandbox_snapshot_mem(again, &old), 0);
	vmm_sandbox_free(again);
	vmm_host_stats(host, &hs);
	cr_assert_eq(hs.warm, 0);
	vmm_memsnap_free(old);
	st_manifest_free(m);
	cr_assert_eq(vmm_host_free(host), 0);
}

Test(memsnap, host_functions_stay_registered)
{
	static const struct vmm_signature add = { .ret = VMM_I64, .nparams = 2, .params = { VMM_I64, VMM_I64 } };
	struct vmm_sandbox *sb = simple_new(0);
	struct vmm_memsnap *a = NULL, *b = NULL;
	struct vmm_result r = { 0 };
	struct vmm_error err;

	cr_assert_eq(vmm_sandbox_register(sb, "host_add", &add, host_add, NULL, &err), 0, "%s", err.message);
	cr_assert_eq(vmm_sandbox_snapshot_mem(sb, &a), 0);
	sh_echo(sb, "x");
	cr_assert_eq(vmm_sandbox_snapshot_mem(sb, &b), 0);
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(vmm_sandbox_restore_mem(sb, i % 2 ? a : b), 0);
		struct vmm_value v[2] = { { .type = VMM_I64, .i64 = 40 }, { .type = VMM_I64, .i64 = i } };
		cr_assert_eq(vmm_sandbox_call(sb, "add", v, 2, &r), 0, "%s", vmm_sandbox_error(sb)->message);
		cr_assert_eq(r.i64, 40 + i);
	}
	vmm_memsnap_free(a);
	vmm_memsnap_free(b);
	vmm_sandbox_free(sb);
}

/* The snapshot a sandbox runs on stays valid when its caller lets go, and
 * a snapshot outlives its sandbox. */
Test(memsnap, points_outlive_their_references_and_their_sandbox)
{
	struct vmm_sandbox *sb = simple_new(1 << 20);
	struct point a;

	sh_call_i(sb, "touch_pages", 1, 30);
	point_take(sb, &a);
	struct vmm_memsnap *extra = vmm_memsnap_ref(a.snap);
	vmm_memsnap_free(a.snap);
	a.snap = extra;
	cr_assert_eq(vmm_memsnap_pages(a.snap) >= 30, true, "%llu pages", (unsigned long long)vmm_memsnap_pages(a.snap));
	struct vmm_memsnap *keep = vmm_memsnap_ref(a.snap);
	vmm_memsnap_free(a.snap);
	a.snap = NULL;
	for (int i = 0; i < 3; i++) {
		sh_call_i(sb, "touch_pages", 1, 60);
		cr_assert_eq(vmm_sandbox_restore(sb), 0, "%s", vmm_sandbox_error(sb)->message);
		point_is(sb, &a, "a restore after the last reference went");
	}
	/* kept past the sandbox */
	a.snap = keep;
	cr_assert_eq(vmm_sandbox_restore_mem(sb, keep), 0);
	vmm_sandbox_free(sb);
	cr_assert_geq(vmm_memsnap_pages(keep), 30);
	point_free(&a);
	vmm_memsnap_free(NULL);
}

/* A restore puts back the pages written since, not the whole memory, and
 * a snapshot of an unchanged sandbox holds nothing new. */
Test(memsnap, a_restore_costs_what_was_written_since)
{
	struct vmm_sandbox *sb = simple_new(16 << 20);
	struct vmm_memsnap *a = NULL, *b = NULL;
	struct vmm_snap_stats before, after;

	sh_call_i(sb, "touch_pages", 1, 2000);
	cr_assert_eq(vmm_sandbox_snapshot_mem(sb, &a), 0);
	cr_assert_geq(vmm_memsnap_pages(a), 2000);
	cr_assert_eq(vmm_sandbox_snapshot_mem(sb, &b), 0);
	cr_assert_eq(vmm_memsnap_pages(b), vmm_memsnap_pages(a), "nothing changed: no pages of its own");
	for (int i = 0; i < 3; i++) {
		sh_echo(sb, "light");
		vmm_sandbox_snap_stats(sb, &before);
		cr_assert_eq(vmm_sandbox_restore_mem(sb, b), 0);
		vmm_sandbox_snap_stats(sb, &after);
		uint64_t scanned = after.pages_scanned - before.pages_scanned;
		cr_assert_leq(scanned, 64, "restore %d looked at %llu pages after one echo", i, (unsigned long long)scanned);
	}
	/* back to a: the same content, a switch that maps nothing of its own */
	cr_assert_eq(vmm_sandbox_restore_mem(sb, a), 0);
	cr_assert_eq(sh_call_i(sb, "counter_next", 0, 0), 1);
	vmm_memsnap_free(a);
	vmm_memsnap_free(b);
	vmm_sandbox_free(sb);
}

/* A poisoned sandbox is not snapshotted; a restore makes it usable. */
Test(memsnap, a_poisoned_sandbox_is_restored_not_snapshotted)
{
	struct vmm_sandbox *sb = simple_new(0);
	struct vmm_memsnap *a = NULL, *b = NULL;
	struct vmm_result r = { 0 };

	sh_call_i(sb, "counter_next", 0, 0);
	cr_assert_eq(vmm_sandbox_snapshot_mem(sb, &a), 0);
	cr_assert_lt(vmm_sandbox_call(sb, "null_write", NULL, 0, &r), 0);
	cr_assert(vmm_sandbox_poisoned(sb));
	cr_assert_eq(vmm_sandbox_snapshot_mem(sb, &b), VMM_E_POISONED);
	cr_assert_null(b);
	cr_assert_eq(vmm_sandbox_restore_mem(sb, a), 0, "%s", vmm_sandbox_error(sb)->message);
	cr_assert(!vmm_sandbox_poisoned(sb));
	cr_assert_eq(sh_call_i(sb, "counter_next", 0, 0), 2);
	vmm_memsnap_free(a);
	vmm_sandbox_free(sb);
}

/* A capture into the store of a sandbox on an in-memory snapshot stores
 * every page it maps: the manifest stands on its own, and its parent is
 * the store snapshot the in-memory one was taken on. */
Test(memsnap, a_capture_on_an_in_memory_snapshot_stands_alone)
{
	struct vmm_sandbox *sb = simple_new(1 << 20), *other = NULL;
	struct st_manifest *base = NULL, *m = NULL;
	st_id base_id, id;
	struct point a;

	sh_call_i(sb, "counter_next", 0, 0);
	cr_assert_eq(sh_snap(sb, &base), 0);
	cr_assert(vmm_sandbox_snapshot_id(sb, &base_id));
	sh_call_i(sb, "counter_next", 0, 0);
	sh_call_i(sb, "touch_pages", 1, 25);
	point_take(sb, &a);
	cr_assert(!vmm_sandbox_snapshot_id(sb, &id), "an in-memory snapshot has no store id");
	sh_call_i(sb, "touch_pages", 1, 70);
	point_restore(sb, &a, "a");
	cr_assert_eq(vmm_sandbox_capture(sb, sh_store, &m), 0);
	cr_assert(m->has_parent && st_id_equal(&m->parent, &base_id), "the parent is the store snapshot");
	for (uint32_t i = 0; i < m->nlayers; i++) {
		int fd = -1;
		cr_assert_eq(st_blob_open(sh_store, &m->layers[i].id, &fd), 0, "layer %u is in the store", i);
		close(fd);
	}
	cr_assert_eq(st_manifest_id(m, &id, NULL, 0), 0);
	cr_assert_eq(vmm_sandbox_rebase(sb, m, &id), 0);
	cr_assert(vmm_sandbox_snapshot_id(sb, &base_id) && st_id_equal(&base_id, &id));
	other = sh_from_snapshot_checked(m, NULL);
	uint8_t *mem;
	uint64_t size;
	vmm_sandbox_memory(other, &mem, &size);
	cr_assert_eq(size, a.size);
	for (uint64_t pg = 0; pg < size / 4096; pg++)
		cr_assert(memcmp(mem + pg * 4096, a.mem + pg * 4096, 4096) == 0, "page %llu", (unsigned long long)pg);
	cr_assert_eq(sh_call_i(other, "counter_next", 0, 0), 3);
	/* and the sandbox on it can still go back to the in-memory point */
	sh_call_i(sb, "touch_pages", 1, 5);
	point_restore(sb, &a, "a after the capture");
	vmm_sandbox_free(other);
	st_manifest_free(base);
	st_manifest_free(m);
	point_free(&a);
	vmm_sandbox_free(sb);
}

/* Past range_cap ranges a snapshot is compacted into one flat memfd layer,
 * and still restores exactly. */
Test(memsnap, a_compacted_point_restores_exactly)
{
	struct vmm_sandbox *sb = simple_new(4 << 20);
	struct vmm_snap_stats st;
	struct vmm_value v[2] = { { .type = VMM_I64, .i64 = 200 }, { .type = VMM_I64, .i64 = 2 } };
	struct vmm_result r = { 0 };
	struct point a, b;

	point_take(sb, &a);
	cr_assert_eq(vmm_sandbox_call(sb, "touch_strided", v, 2, &r), 0, "%s", vmm_sandbox_error(sb)->message);
	point_take(sb, &b);
	vmm_sandbox_snap_stats(sb, &st);
	cr_assert_geq(st.compactions, 1, "200 separate runs are past the default range cap");
	sh_call_i(sb, "touch_pages", 1, 300);
	point_restore(sb, &b, "the compacted point");
	point_restore(sb, &a, "the one before");
	point_restore(sb, &b, "the compacted point again");
	point_free(&a);
	point_free(&b);
	vmm_sandbox_free(sb);
}

/* A pool's sandbox put back goes to the pool's snapshot, not to an
 * in-memory one its user took. */
Test(memsnap, a_pool_sandbox_goes_back_to_the_pool_s_snapshot)
{
	struct vmm_sandbox *sb = simple_new(0), *got = NULL;
	struct st_manifest *m = NULL;
	struct vmm_memsnap *snap = NULL;
	struct vmm_pool *pool = NULL;
	struct vmm_error err;

	cr_assert_eq(sh_snap(sb, &m), 0);
	vmm_sandbox_free(sb);
	cr_assert_eq(vmm_pool_new(m, vmm_layer_open_store, sh_store, NULL, 1, &pool, &err), 0, "%s", err.message);
	cr_assert_eq(vmm_pool_get(pool, &got), 0);
	cr_assert_eq(sh_call_i(got, "counter_next", 0, 0), 1);
	cr_assert_eq(vmm_sandbox_snapshot_mem(got, &snap), 0);
	cr_assert_eq(sh_call_i(got, "counter_next", 0, 0), 2);
	cr_assert_eq(vmm_pool_put(pool, got), 0);
	cr_assert_eq(vmm_pool_get(pool, &got), 0);
	cr_assert_eq(sh_call_i(got, "counter_next", 0, 0), 1, "the pool's snapshot, not the user's point");
	cr_assert_eq(vmm_pool_put(pool, got), 0);
	vmm_memsnap_free(snap);
	vmm_pool_free(pool);
	st_manifest_free(m);
}
