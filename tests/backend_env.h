/* backend_env.h: suites that run sandboxes run once per backend (STRATA_TEST_BACKEND) and policy (STRATA_POLICY); include once per test program. */
#ifndef STRATA_TESTS_BACKEND_ENV_H
#define STRATA_TESTS_BACKEND_ENV_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests/harness/harness.h"
#include "vmm/vmm.h"
#include "vmm/vmm_int.h"  /* vmm_host_default_set */

/* The backend this run of the suite asked for (AUTO: none); hosts a test
 * makes take it (vmm_host_config.backend) as the default host does. */
static enum vmm_backend_kind test_backend = VMM_BACKEND_AUTO;

/*
 * meson registers the suite once per backend with STRATA_TEST_BACKEND set;
 * the default host (every sandbox that names no host) then runs there. The
 * kvm run on a machine without KVM skips the whole program, saying why.
 */
__attribute__((constructor)) static void test_backend_from_env(void)
{
	const char *b = getenv("STRATA_TEST_BACKEND"), *pol = getenv("STRATA_POLICY");

	if (b && *b && vmm_backend_parse(b, &test_backend) < 0)
		test_backend = VMM_BACKEND_AUTO;
	/* Whether KVM is there is not strata's to say alone: where strata's
	 * check calls it unusable (the kvm run would skip, the automatic one
	 * would fall back to the process backend) but the harness's own probe
	 * ran a guest, the program fails before its first case. */
	if (test_backend != VMM_BACKEND_PROCESS && vmm_backend_resolve(NULL, VMM_BACKEND_AUTO) != VMM_BACKEND_KVM) {
		char hwhy[512];
		struct vmm_error kerr = { 0 };
		if (vmm_kvm_check(&kerr) == 0 || !kerr.message[0])
			snprintf(kerr.message, sizeof(kerr.message), "the automatic backend choice is not kvm");
		if (harness_has("KVM", hwhy, sizeof(hwhy)) == 1) {
			printf("Bail out! strata says KVM is unusable (%s), but the harness's own check ran a guest: %s\n",
			       kerr.message, hwhy);
			fflush(stdout);
			_exit(1);
		}
		if (test_backend == VMM_BACKEND_KVM) {
			printf("1..0 # SKIP /dev/kvm is missing or unusable: %s; the harness agrees: %s "
			       "(the process backend's run covers this suite)\n", kerr.message, hwhy);
			fflush(stdout);
			_exit(0);
		}
	}
	/* The host every sandbox of the program uses unless it names another:
	 * the default limits, this run's backend, and the policy file the
	 * suite is registered with (the fallback runs force pagemap-read by
	 * one). */
	struct vmm_host_config hc;
	struct vmm_policy policy;
	struct vmm_host *host;
	char why[512];
	vmm_host_config_defaults(&hc);
	hc.backend = test_backend;
	if (pol && *pol) {
		if (vmm_policy_read(pol, &policy, why, sizeof(why)) < 0) {
			printf("Bail out! %s\n", why);
			fflush(stdout);
			_exit(1);
		}
		hc.policy = &policy;
	}
	if (vmm_host_new(&hc, &host, NULL) == 0)
		vmm_host_default_set(host);
}

#endif
