/* kvm_check.h: the one check every test that needs KVM makes: skip, with the reason, where KVM is unusable. */
#ifndef STRATA_TESTS_KVM_CHECK_H
#define STRATA_TESTS_KVM_CHECK_H

#include <criterion/criterion.h>

#include "tests/harness/harness.h"
#include "vmm/vmm.h"

/* Skip for want of KVM, unless the harness's own probe (no strata code)
 * ran a guest here: then strata's check is wrong and the test fails. */
static inline void kvm_skip_or_fail(const char *message)
{
	char why[512];

	if (harness_has("KVM", why, sizeof(why)) == 1)
		cr_assert_fail("strata says KVM is unusable (%s), but the harness's own check ran a guest: %s", message, why);
	cr_skip_test("needs KVM: %s (the harness agrees: %s)", message, why);
}

/* Use as a suite's or a test's .init, or call first in a test body. The
 * reason is vmm_kvm_check's message: what is missing and what to do.
 * Sandboxes that will run on the process backend (the default host's
 * backend in the suite's run for it, or any run where KVM is missing and
 * none was asked for) need no KVM. */
static inline void kvm_require(void)
{
	struct vmm_error err;

	if (vmm_backend_resolve(NULL, VMM_BACKEND_AUTO) == VMM_BACKEND_PROCESS)
		return;
	if (vmm_kvm_check(&err) < 0)
		kvm_skip_or_fail(err.message);
}

/* For a test that names the kvm backend itself (whatever backend its
 * suite runs on): skip, with the reason, where KVM is unusable. */
static inline void kvm_require_always(void)
{
	struct vmm_error err;

	if (vmm_kvm_check(&err) < 0)
		kvm_skip_or_fail(err.message);
}

#endif
