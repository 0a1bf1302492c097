/* test_policy.c: the reset-policy file (reader and writer), vmm_strerror's words and a host's limits, without KVM. */
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

/* vmm_strerror (st_strerror under the vmm's name) names its own codes and
 * the store's: a capture into a read-only store once printed "Unknown error
 * 1007". tests/errors walks every module's codes. */
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
