/* test_backend.c: choosing a backend: names, what a sandbox reports, each host's own, refusals that name the other backend. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "helpers.h"
#include "tests/kvm_check.h"

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
	enum vmm_backend_kind want = vmm_backend_resolve(NULL, VMM_BACKEND_AUTO);

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

/* The default backend is the host's: two hosts of one process, each
 * naming its own, run their sandboxes there; a sandbox's own
 * vmm_config.backend still wins; the default host is not touched. */
Test(vmm_backend, two_hosts_in_one_process_run_on_their_own_backends)
{
	kvm_require_always();
	enum vmm_backend_kind before = vmm_backend_resolve(NULL, VMM_BACKEND_AUTO);
	struct vmm_host_config hc;
	struct vmm_host *kvm, *proc;
	struct vmm_error err;

	vmm_host_config_defaults(&hc);
	hc.backend = VMM_BACKEND_KVM;
	cr_assert_eq(vmm_host_new(&hc, &kvm, &err), 0, "%s", err.message);
	hc.backend = VMM_BACKEND_PROCESS;
	cr_assert_eq(vmm_host_new(&hc, &proc, &err), 0, "%s", err.message);
	cr_assert_eq(vmm_backend_resolve(kvm, VMM_BACKEND_AUTO), VMM_BACKEND_KVM);
	cr_assert_eq(vmm_backend_resolve(proc, VMM_BACKEND_AUTO), VMM_BACKEND_PROCESS);
	cr_assert_eq(vmm_backend_resolve(proc, VMM_BACKEND_KVM), VMM_BACKEND_KVM);

	struct vmm_config ck = { .host = kvm }, cp = { .host = proc },
			  cp_kvm = { .host = proc, .backend = VMM_BACKEND_KVM };
	struct vmm_sandbox *a = guest_new(&ck), *b = guest_new(&cp), *c = guest_new(&cp_kvm);
	cr_assert_eq(vmm_sandbox_backend(a), VMM_BACKEND_KVM);
	cr_assert_eq(vmm_sandbox_backend(b), VMM_BACKEND_PROCESS);
	cr_assert_eq(vmm_sandbox_backend(c), VMM_BACKEND_KVM, "the sandbox's own config wins over its host's");
	struct vmm_sandbox *all[] = { a, b, c };
	for (unsigned i = 0; i < 3; i++) {
		struct vmm_result res;
		cr_assert_eq(call_i64(all[i], "add", 40, 2, 2, &res), 0, "%s", vmm_sandbox_error(all[i])->message);
		cr_assert_eq(res.i64, 42);
		vmm_sandbox_free(all[i]);
	}
	cr_assert_eq(vmm_backend_resolve(NULL, VMM_BACKEND_AUTO), before, "other hosts leave the default as it was");
	cr_assert_eq(vmm_host_free(kvm), 0);
	cr_assert_eq(vmm_host_free(proc), 0);
}

Test(vmm_backend, a_host_refuses_an_unknown_backend)
{
	struct vmm_host_config hc;
	struct vmm_host *h = (struct vmm_host *)&hc;
	struct vmm_error err;

	vmm_host_config_defaults(&hc);
	hc.backend = (enum vmm_backend_kind)7;
	cr_assert_eq(vmm_host_new(&hc, &h, &err), VMM_E_BAD_CONFIG);
	cr_assert_eq(h, (struct vmm_host *)&hc, "*out untouched");
	cr_assert(strstr(err.message, "backend"), "%s", err.message);
}
