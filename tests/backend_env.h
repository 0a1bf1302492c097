/* backend_env.h: suites that run sandboxes run once per backend: STRATA_TEST_BACKEND picks it (include once per test program). */
#ifndef STRATA_TESTS_BACKEND_ENV_H
#define STRATA_TESTS_BACKEND_ENV_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "vmm/vmm.h"

/*
 * meson registers the suite once per backend with STRATA_TEST_BACKEND set;
 * every sandbox created with the default (AUTO) backend then uses it. The
 * kvm run on a machine without KVM skips the whole program, saying why.
 */
__attribute__((constructor)) static void test_backend_from_env(void)
{
	const char *b = getenv("STRATA_TEST_BACKEND");
	enum vmm_backend_kind k;

	if (!b || !*b || vmm_backend_parse(b, &k) < 0)
		return;
	if (k == VMM_BACKEND_KVM && vmm_backend_resolve(VMM_BACKEND_AUTO) != VMM_BACKEND_KVM) {
		printf("1..0 # SKIP /dev/kvm is missing or unusable (the process backend's run covers this suite)\n");
		fflush(stdout);
		_exit(0);
	}
	vmm_backend_default_set(k);
}

#endif
