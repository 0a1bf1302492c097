/* test_policy.c: the policy file parser and the manifest's vcpu/guest JSON, without KVM. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmm/snap_int.h"

static const char *write_tmp(const char *text)
{
	static char path[64];
	snprintf(path, sizeof(path), "/tmp/strata-policy-XXXXXX");
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

Test(policy, file_overrides_defaults_and_junk_is_refused_with_the_line)
{
	struct vmm_policy p;
	char why[256];
	const char *f = write_tmp("# comment\nreset = drop\nkeep_restores = 4\nrange_cap = 99\nmeasured_x = 1.5\n");

	cr_assert_eq(vmm_policy_read(f, &p, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(p.mode, VMM_RESET_DROP);
	cr_assert_eq(p.keep_restores, 4);
	cr_assert_eq(p.range_cap, 99);
	cr_assert_eq(p.idle_cap, 1024, "unset keys keep their defaults");
	cr_assert_str_eq(p.source, f);
	unlink(f);
	f = write_tmp("reset = rewrite\nrange_cap = 0\n");
	cr_assert_eq(vmm_policy_read(f, &p, why, sizeof(why)), VMM_E_BAD_POLICY);
	cr_assert(strstr(why, "line 2"), "%s", why);
	unlink(f);
	f = write_tmp("colour = blue\n");
	cr_assert_eq(vmm_policy_read(f, &p, why, sizeof(why)), VMM_E_BAD_POLICY);
	unlink(f);
	cr_assert_eq(vmm_policy_read("/nonexistent/policy", &p, why, sizeof(why)), -ENOENT);
}

/* A line of n bytes: prefix, then padding, then suffix (and a newline). */
static char *long_line(const char *prefix, const char *suffix, size_t n)
{
	char *s = malloc(n + 2);
	size_t pl = strlen(prefix), sl = strlen(suffix);

	cr_assert(s && n > pl + sl);
	memcpy(s, prefix, pl);
	memset(s + pl, 'x', n - pl - sl);
	memcpy(s + n - sl, suffix, sl);
	s[n] = '\n';
	s[n + 1] = '\0';
	return s;
}

/* Regression: lines were read in 512-byte pieces, so a long comment ending
 * in "reset = drop" switched the reset mode, and a valid long x- line got
 * the whole file refused. */
Test(policy, long_lines_are_read_whole)
{
	struct vmm_policy p;
	char why[256];
	/* 511 bytes of comment, then the setting: the old reader's second piece. */
	char *text = long_line("# ", "reset = drop", 511 + strlen("reset = drop"));
	const char *f = write_tmp(text);

	cr_assert_eq(vmm_policy_read(f, &p, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(p.mode, VMM_RESET_REWRITE, "a comment's tail is not a setting");
	unlink(f);
	free(text);
	text = long_line("x-note = ", "end", 5000);
	f = write_tmp(text);
	cr_assert_eq(vmm_policy_read(f, &p, why, sizeof(why)), 0, "a long x- line is valid: %s", why);
	unlink(f);
	free(text);
	/* A long line that is wrong is refused by its number. */
	text = long_line("reset = ", "drop", 600);
	char *two = malloc(strlen(text) + 16);
	cr_assert_not_null(two);
	snprintf(two, strlen(text) + 16, "# ok\n%s", text);
	f = write_tmp(two);
	cr_assert_eq(vmm_policy_read(f, &p, why, sizeof(why)), VMM_E_BAD_POLICY);
	cr_assert(strstr(why, "line 2"), "%s", why);
	unlink(f);
	free(two);
	free(text);
}

Test(policy, vcpu_state_round_trips_through_json)
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

Test(policy, guest_description_from_another_abi_is_refused)
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
Test(policy, guest_description_without_an_abi_version_says_so)
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
