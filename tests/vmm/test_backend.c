/* test_backend.c: choosing a backend: names, what a sandbox reports, refusals that name the other backend. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "helpers.h"

Test(vmm_backend, names_round_trip_and_junk_is_refused)
{
	static const enum vmm_backend_kind all[] = { VMM_BACKEND_AUTO, VMM_BACKEND_KVM, VMM_BACKEND_PROCESS };
	enum vmm_backend_kind k;

	for (unsigned i = 0; i < 3; i++) {
		cr_assert_eq(vmm_backend_parse(vmm_backend_name(all[i]), &k), 0);
		cr_assert_eq(k, all[i]);
	}
	cr_assert_eq(vmm_backend_parse("qemu", &k), -EINVAL);
	cr_assert_eq(vmm_backend_parse("", &k), -EINVAL);
	cr_assert_eq(vmm_backend_parse(NULL, &k), -EINVAL);
}

Test(vmm_backend, a_sandbox_names_the_backend_it_runs_on)
{
	struct vmm_sandbox *sb = guest_new(NULL);
	enum vmm_backend_kind want = vmm_backend_resolve(VMM_BACKEND_AUTO);

	cr_assert_neq(want, VMM_BACKEND_AUTO);
	cr_assert_eq(vmm_sandbox_backend(sb), want);
	vmm_sandbox_free(sb);
	/* Asked for by name, the process backend runs anywhere. */
	struct vmm_config cfg = { .backend = VMM_BACKEND_PROCESS };
	sb = guest_new(&cfg);
	cr_assert_eq(vmm_sandbox_backend(sb), VMM_BACKEND_PROCESS);
	struct vmm_result res;
	cr_assert_eq(call_i64(sb, "add", 40, 2, 2, &res), 0, "%s", vmm_sandbox_error(sb)->message);
	cr_assert_eq(res.i64, 42);
	vmm_sandbox_free(sb);
}

Test(vmm_backend, many_process_sandboxes_live_side_by_side)
{
	struct vmm_config cfg = { .backend = VMM_BACKEND_PROCESS };
	struct vmm_sandbox *sb[8];
	struct vmm_result res;

	for (unsigned i = 0; i < 8; i++)
		sb[i] = guest_new(&cfg);
	for (unsigned round = 0; round < 3; round++)
		for (unsigned i = 0; i < 8; i++) {
			cr_assert_eq(vmm_sandbox_call(sb[i], "counter_next", NULL, 0, &res), 0);
			cr_assert_eq(res.i64, round + 1);
		}
	for (unsigned i = 0; i < 8; i++)
		vmm_sandbox_free(sb[i]);
}

Test(vmm_backend, a_process_sandbox_refuses_snapshots_and_names_kvm)
{
	struct vmm_config cfg = { .backend = VMM_BACKEND_PROCESS };
	struct vmm_sandbox *sb = guest_new(&cfg);

	cr_assert_eq(vmm_sandbox_restore(sb), VMM_E_NO_SNAPSHOT);
	struct vmm_result res;
	cr_assert_eq(call_i64(sb, "add", 1, 2, 2, &res), 0);
	vmm_sandbox_free(sb);
}
