/* test_descriptions.c: the manifest's vCPU state and guest description JSON (vmm/vcpu.c), without KVM. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmm/snap_int.h"

Test(descriptions, vcpu_state_round_trips_through_json)
{
	struct vmm_vcpu_state a, b;
	char *json = NULL;

	memset(&a, 0, sizeof(a));
	a.version = VMM_VCPU_STATE_VERSION;
	for (int i = 0; i < 16; i++)
		a.gpr[i] = 0xfedcba9876543210ull ^ (uint64_t)i;  /* past 2^53 */
	a.rip = 0x401000;
	a.rflags = 0x3002;
	a.cs = (struct vmm_segment){ .base = 0, .limit = 0xffffffff, .selector = 0x23, .type = 11, .present = 1,
				     .dpl = 3, .s = 1, .l = 1, .g = 1 };
	a.tr = (struct vmm_segment){ .base = 0xf080, .limit = 0xe7, .selector = 0x28, .type = 11, .present = 1 };
	a.gdt = (struct vmm_dtable){ 0xf000, 0x37 };
	a.cr0 = 0x80010033;
	a.cr3 = 0x1000;
	a.efer = 0xd00;
	a.apic_base = 0xfee00900;
	a.xcr0 = 3;
	for (int i = 0; i < 512; i++)
		a.fxsave[i] = (uint8_t)(i * 7);
	cr_assert_eq(vmm_vcpu_to_json(&a, &json), 0);
	cr_assert_eq(vmm_vcpu_from_json(json, &b, NULL, 0), 0);
	cr_assert_eq(memcmp(&a, &b, sizeof(a)), 0);
	char why[256];
	/* What strtoull and sscanf would have let through is refused: signs,
	 * spaces, a second prefix, in a register or the FXSAVE image. */
	static const char *const bad_hex[] = { "0x-1", "0x 1", "0x+1", "0x0x1", "0x", "0x1g", "0x11111111111111111" };
	char *rip = strstr(json, "\"rip\":\"");
	char *fx = strstr(json, "\"fxsave\":\"");
	cr_assert(rip && fx);
	for (size_t i = 0; i < sizeof(bad_hex) / sizeof(bad_hex[0]); i++) {
		char *end = strchr(rip + 7, '"'), *edited = NULL;
		cr_assert(asprintf(&edited, "%.*s%s%s", (int)(rip + 7 - json), json, bad_hex[i], end) > 0);
		cr_assert_eq(vmm_vcpu_from_json(edited, &b, why, sizeof(why)), VMM_E_BAD_SNAPSHOT, "rip %s", bad_hex[i]);
		free(edited);
	}
	static const char *const bad_byte[] = { " f", "+f", "-1", "0x", "g0" };
	for (size_t i = 0; i < sizeof(bad_byte) / sizeof(bad_byte[0]); i++) {
		char *edited = strdup(json);
		memcpy(edited + (fx - json) + 10 + 2 * 100, bad_byte[i], 2);
		cr_assert_eq(vmm_vcpu_from_json(edited, &b, why, sizeof(why)), VMM_E_BAD_SNAPSHOT, "byte '%s'", bad_byte[i]);
		free(edited);
	}
	/* a truncated FXSAVE image is refused */
	fx[20] = '"';
	cr_assert_eq(vmm_vcpu_from_json(json, &b, why, sizeof(why)), VMM_E_BAD_SNAPSHOT);
	free(json);
	cr_assert_eq(vmm_vcpu_from_json("{\"version\":1}", &b, why, sizeof(why)), VMM_E_BAD_SNAPSHOT);
	cr_assert_eq(vmm_vcpu_from_json("not json", &b, why, sizeof(why)), VMM_E_BAD_SNAPSHOT);
}

Test(descriptions, guest_description_from_another_abi_is_refused)
{
	struct vmm_layout l;
	struct vmm_fn *fns = NULL;
	unsigned n;
	char why[256];

	cr_assert_eq(vmm_guest_from_json("{\"abi_version\":99,\"layout\":{},\"functions\":[]}", &l, &fns, &n, why,
					 sizeof(why)), VMM_E_BAD_SNAPSHOT);
	cr_assert(strstr(why, "ABI version 99"), "%s", why);
	cr_assert_eq(vmm_guest_from_json("{\"abi_version\":1,\"layout\":{\"pml4\":1}}", &l, &fns, &n, why,
					 sizeof(why)), VMM_E_BAD_SNAPSHOT);
	cr_assert_null(fns);
}

/* Regression: without abi_version the message printed a value never
 * written (a stack address under ASan), and -O3 warned of it. */
Test(descriptions, guest_description_without_an_abi_version_says_so)
{
	struct vmm_layout l;
	struct vmm_fn *fns = NULL;
	unsigned n;
	char why[256];

	memset(why, 0, sizeof(why));
	cr_assert_eq(vmm_guest_from_json("{\"layout\":{},\"functions\":[]}", &l, &fns, &n, why, sizeof(why)),
		     VMM_E_BAD_SNAPSHOT);
	cr_assert(strstr(why, "no valid abi_version"), "%s", why);
	cr_assert_eq(vmm_guest_from_json("{\"abi_version\":-1}", &l, &fns, &n, why, sizeof(why)), VMM_E_BAD_SNAPSHOT);
	cr_assert(strstr(why, "no valid abi_version"), "%s", why);
}
