/* test_registry_ref.c: registry references parsed into host, repository, tag and digest, each a string the parsed struct holds (or the static default tag). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "index/registry.h"

/* The parser works on a copy of its own and moves it into *out: every
 * string must read right from *out, not from the parser's stack. */
Test(registry_ref, a_reference_without_tag_or_digest_means_latest)
{
	struct ix_registry_ref r;

	cr_assert_eq(ix_registry_ref_parse("localhost:5000/team/app", &r), 0);
	cr_assert_str_eq(r.host, "localhost:5000");
	cr_assert_str_eq(r.repo, "team/app");
	cr_assert_not_null(r.tag);
	cr_assert_str_eq(r.tag, "latest");
	cr_assert_null(r.digest);
}

Test(registry_ref, tag_and_digest_point_into_the_parsed_struct)
{
	static const char dg[] = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	char s[256];
	struct ix_registry_ref r;

	cr_assert_eq(ix_registry_ref_parse("registry.example.com/a/b:v1.2", &r), 0);
	cr_assert_str_eq(r.host, "registry.example.com");
	cr_assert_str_eq(r.repo, "a/b");
	cr_assert_str_eq(r.tag, "v1.2");
	cr_assert_null(r.digest);
	cr_assert(r.tag >= r.buf && r.tag < r.buf + sizeof(r.buf));
	cr_assert(r.repo >= r.buf && r.repo < r.buf + sizeof(r.buf));
	snprintf(s, sizeof(s), "localhost/x@%s", dg);
	cr_assert_eq(ix_registry_ref_parse(s, &r), 0);
	cr_assert_null(r.tag);
	cr_assert_str_eq(r.digest, dg);
	cr_assert(r.digest >= r.buf && r.digest < r.buf + sizeof(r.buf));
}

Test(registry_ref, malformed_references_are_refused_and_leave_the_struct_alone)
{
	struct ix_registry_ref r;

	memset(&r, 0x5a, sizeof(r));
	cr_assert_eq(ix_registry_ref_parse("app", &r), IX_EREF);
	cr_assert_eq(ix_registry_ref_parse("nohost/app", &r), IX_EREF);
	cr_assert_eq(ix_registry_ref_parse("localhost/App", &r), IX_EREF);
	cr_assert_eq(ix_registry_ref_parse("localhost/app@sha256:12", &r), IX_EREF);
	cr_assert_eq(ix_registry_ref_parse(NULL, &r), IX_EREF);
	cr_assert_eq((unsigned char)r.buf[0], 0x5a);
}
