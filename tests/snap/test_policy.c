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

/* The one writer and the one reader of the format agree; what the writer
 * refuses leaves no file; a failed read leaves the caller's policy as it was. */
Test(policy, what_the_writer_writes_the_reader_reads_back)
{
	char dir[] = "/tmp/strata-policy-w-XXXXXX", path[64], why[256];
	struct vmm_policy p, q, keep;
	struct vmm_policy_note notes[2] = { { "rewrite_16_pages_us", 12.5 }, { "map_range_us", 0.74 } };

	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/policy", dir);
	vmm_policy_defaults(&p);
	p.mode = VMM_RESET_DROP;
	p.keep_restores = 9;
	p.idle_cap = 77;
	p.range_cap = 123;
	p.dirty = VMM_DIRTY_READ;
	cr_assert_eq(vmm_policy_write(path, &p, notes, 2, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(vmm_policy_read(path, &q, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(q.mode, p.mode);
	cr_assert_eq(q.keep_restores, 9);
	cr_assert_eq(q.idle_cap, 77);
	cr_assert_eq(q.range_cap, 123);
	cr_assert_eq(q.dirty, VMM_DIRTY_READ);
	cr_assert_str_eq(q.source, path);
	unlink(path);
	/* Refused: a bad note name, a value out of range; no file, no temporary. */
	struct vmm_policy_note bad = { "has space", 1 };
	cr_assert_eq(vmm_policy_write(path, &p, &bad, 1, why, sizeof(why)), -EINVAL);
	p.keep_restores = 0;
	cr_assert_eq(vmm_policy_write(path, &p, NULL, 0, why, sizeof(why)), -EINVAL);
	cr_assert(strstr(why, "keep_restores"), "%s", why);
	cr_assert_neq(access(path, F_OK), 0);
	char tmp[80];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	cr_assert_neq(access(tmp, F_OK), 0);
	/* A malformed file: the caller's policy is untouched. */
	const char *f = write_tmp("reset = drop\nkeep_restores = many\n");
	memset(&keep, 0x5a, sizeof(keep));
	q = keep;
	cr_assert_eq(vmm_policy_read(f, &q, why, sizeof(why)), VMM_E_BAD_POLICY);
	cr_assert(strstr(why, f) && strstr(why, "line 2"), "%s", why);
	cr_assert(memcmp(&q, &keep, sizeof(q)) == 0, "a failed read changed the policy");
	unlink(f);
	rmdir(dir);
}

/* vmm_strerror names its own codes and hands every other to the store's
 * chain: a capture into a read-only store once printed "Unknown error 1007". */
Test(policy, vmm_strerror_falls_back_to_the_store)
{
	cr_assert_str_eq(vmm_strerror(ST_EREADONLY), st_strerror(ST_EREADONLY));
	cr_assert(strstr(vmm_strerror(ST_EREADONLY), "read-only"), "%s", vmm_strerror(ST_EREADONLY));
	cr_assert_str_eq(vmm_strerror(ST_ECORRUPT), st_strerror(ST_ECORRUPT));
	cr_assert_str_eq(vmm_strerror(-ENOENT), strerror(ENOENT));
	cr_assert(strstr(vmm_strerror(VMM_E_BAD_POLICY), "policy"));
	cr_assert(strstr(vmm_strerror(VMM_E_STALE), "pending capture"));
	for (int c = -1299; c <= -1200; c++)
		cr_assert(!strstr(vmm_strerror(c), "Unknown error"), "code %d", c);
}

/* A host's limits and policy are checked before anything is made. */
Test(policy, a_host_refuses_limits_and_policies_out_of_range)
{
	struct vmm_host_config c;
	struct vmm_policy bad;
	struct vmm_error err;
	struct vmm_host *h = NULL;

	vmm_host_config_defaults(&c);
	c.shells = VMM_HOST_SHELLS_MAX + 1;
	cr_assert_eq(vmm_host_new(&c, &h, &err), VMM_E_BAD_CONFIG);
	cr_assert(strstr(err.message, "shells"), "%s", err.message);
	vmm_host_config_defaults(&c);
	c.warm = VMM_HOST_WARM_MAX + 1;
	cr_assert_eq(vmm_host_new(&c, &h, &err), VMM_E_BAD_CONFIG);
	vmm_policy_defaults(&bad);
	bad.range_cap = 0;
	vmm_host_config_defaults(&c);
	c.policy = &bad;
	cr_assert_eq(vmm_host_new(&c, &h, &err), VMM_E_BAD_CONFIG);
	cr_assert(strstr(err.message, "range_cap"), "%s", err.message);
	cr_assert_null(h, "nothing made");
	cr_assert_eq(vmm_host_new(NULL, &h, &err), 0, "%s", err.message);
	struct vmm_host_stats st;
	vmm_host_stats(h, &st);
	cr_assert_eq(st.shells_max, 8);
	cr_assert_eq(st.warm_max, 8);
	cr_assert_eq(st.sandboxes, 0);
	cr_assert_eq(vmm_host_free(h), 0);
	cr_assert_eq(vmm_host_free(NULL), 0);
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
