/* test_backends.c: a snapshot captured on one backend restores and continues on the other (same manifest, layers, vCPU state). */
#include <criterion/criterion.h>

#include "helpers.h"
#include "tests/kvm_check.h"

TestSuite(backends, .init = sh_setup, .fini = sh_teardown);

static struct vmm_sandbox *on(enum vmm_backend_kind kind, const struct st_manifest *m)
{
	struct vmm_config cfg = { .backend = kind };
	struct vmm_sandbox *sb = NULL;
	struct vmm_error err;
	int rc = m ? vmm_sandbox_from_snapshot(m, vmm_layer_open_store, sh_store, &cfg, &sb, &err)
		   : vmm_sandbox_new(SIMPLEGUEST, &cfg, &sb, &err);

	cr_assert_eq(rc, 0, "%s sandbox: %s", vmm_backend_name(kind), err.message);
	cr_assert_eq(vmm_sandbox_backend(sb), kind);
	return sb;
}

static void both_ways(enum vmm_backend_kind a, enum vmm_backend_kind b)
{
	struct st_manifest *m1 = NULL, *m2 = NULL;
	struct vmm_sandbox *x = on(a, NULL);

	/* State in registers, stack, static data and heap. */
	sh_call_i(x, "counter_next", 0, 0);
	sh_call_i(x, "counter_next", 0, 0);
	cr_assert_eq(sh_call_i(x, "touch_pages", 1, 7), 7);
	sh_echo(x, "before the move");
	cr_assert_eq(sh_snap(x, &m1), 0);

	struct vmm_sandbox *y = on(b, m1);
	cr_assert_eq(sh_call_i(y, "counter_next", 0, 0), 3, "%s -> %s", vmm_backend_name(a), vmm_backend_name(b));
	sh_echo(y, "after the move");
	cr_assert_eq(vmm_sandbox_restore(y), 0);
	cr_assert_eq(vmm_sandbox_check(y, NULL), 0, "memory equals the snapshot after a restore");
	cr_assert_eq(sh_call_i(y, "counter_next", 0, 0), 3);
	/* And back: captured on b, incremental on m1, restored on a. */
	cr_assert_eq(sh_call_i(y, "counter_next", 0, 0), 4);
	cr_assert_eq(sh_snap(y, &m2), 0);
	cr_assert(m2->has_parent);
	struct vmm_sandbox *z = on(a, m2);
	cr_assert_eq(sh_call_i(z, "counter_next", 0, 0), 5);
	cr_assert_eq(sh_call_i(z, "touch_pages", 1, 3), 3);
	vmm_sandbox_free(z);
	vmm_sandbox_free(y);
	vmm_sandbox_free(x);
	st_manifest_free(m2);
	st_manifest_free(m1);
}

/* Both directions need both backends: the kvm one where /dev/kvm works. */
static void kvm_or_skip(void)
{
	struct vmm_config probe = { .backend = VMM_BACKEND_KVM };
	struct vmm_sandbox *sb = NULL;
	struct vmm_error err;

	if (vmm_sandbox_new(SIMPLEGUEST, &probe, &sb, &err) == VMM_E_NO_BACKEND)
		kvm_skip_or_fail(err.message);
	vmm_sandbox_free(sb);
}

Test(backends, a_snapshot_moves_from_kvm_to_process_and_back)
{
	kvm_or_skip();
	both_ways(VMM_BACKEND_KVM, VMM_BACKEND_PROCESS);
}

Test(backends, a_snapshot_moves_from_process_to_kvm_and_back)
{
	kvm_or_skip();
	both_ways(VMM_BACKEND_PROCESS, VMM_BACKEND_KVM);
}

/* A pool made with a host runs on the host's backend (vmm_host_config.backend):
 * one snapshot, a pool on each backend, side by side in one process. */
Test(backends, a_pool_runs_on_its_hosts_backend)
{
	static const enum vmm_backend_kind kinds[] = { VMM_BACKEND_KVM, VMM_BACKEND_PROCESS };
	struct st_manifest *m = NULL;
	struct vmm_sandbox *x;

	kvm_require_always();
	x = on(VMM_BACKEND_PROCESS, NULL);
	sh_call_i(x, "counter_next", 0, 0);
	cr_assert_eq(sh_snap(x, &m), 0);
	vmm_sandbox_free(x);
	for (unsigned k = 0; k < 2; k++) {
		struct vmm_host_config hc;
		struct vmm_host *h;
		struct vmm_pool *p;
		struct vmm_error err;
		vmm_host_config_defaults(&hc);
		hc.backend = kinds[k];
		cr_assert_eq(vmm_host_new(&hc, &h, &err), 0, "%s", err.message);
		struct vmm_config cfg = { .host = h };
		cr_assert_eq(vmm_pool_new(m, vmm_layer_open_store, sh_store, &cfg, 2, &p, &err), 0, "%s", err.message);
		for (unsigned i = 0; i < 2; i++) {
			cr_assert_eq(vmm_sandbox_backend(vmm_pool_at(p, i)), kinds[k], "pool sandbox %u on %s", i,
				     vmm_backend_name(kinds[k]));
			cr_assert_eq(sh_call_i(vmm_pool_at(p, i), "counter_next", 0, 0), 2);
		}
		vmm_pool_free(p);
		cr_assert_eq(vmm_host_free(h), 0);
	}
	st_manifest_free(m);
}
