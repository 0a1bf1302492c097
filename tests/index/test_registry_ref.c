/* test_registry_ref.c: registry references parsed into host, repository, tag and digest, each a string the parsed struct holds (or the static default tag). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "index/dist/dist.h"

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

/* An auth file holding text; its path in path (the caller unlinks it). */
static void auth_file(char *path, size_t len, const char *text)
{
	snprintf(path, len, "/tmp/strata-test-auth.XXXXXX");
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

/* "auth" is base64 of user:password, padded as docker writes it or not
 * as other writers do; a password may hold ':' and any byte. */
Test(registry_ref, auth_entries_decode_with_or_without_padding)
{
	static const struct {
		const char *auth, *user, *pass;
	} cases[] = {
		{ "Ym9iOnB3", "bob", "pw" },                 /* no padding needed */
		{ "YWxpY2U6c2VjcmV0", "alice", "secret" },   /* none needed either */
		{ "YTpi", "a", "b" },
		{ "YWI6Y2Q6ZQ==", "ab", "cd:e" },            /* padded, ':' in the password */
		{ "YWI6Y2Q6ZQ", "ab", "cd:e" },              /* the same unpadded */
		{ "dTrDqQ=", "u", "\xc3\xa9" },              /* one '=' of two, UTF-8 */
	};
	char path[64], text[256], *u = NULL, *p = NULL;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(text, sizeof(text), "{\"auths\":{\"h.example:5000\":{\"auth\":\"%s\"}}}", cases[i].auth);
		auth_file(path, sizeof(path), text);
		int rc = ix_registry_auth_lookup(path, "h.example:5000", &u, &p, NULL, NULL, 0);
		unlink(path);
		cr_assert_eq(rc, 0, "%s", cases[i].auth);
		cr_assert_str_eq(u, cases[i].user, "%s", cases[i].auth);
		cr_assert_str_eq(p, cases[i].pass, "%s", cases[i].auth);
		free(u);
		free(p);
	}
}

Test(registry_ref, auth_entries_that_are_not_base64_of_user_colon_password_are_refused)
{
	static const char *bad[] = { "Ym9i", "not base64!", "Ym9iOnB3===", "A" };
	char path[64], text[256], why[256], *u = NULL, *p = NULL;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), "{\"auths\":{\"h.example\":{\"auth\":\"%s\"}}}", bad[i]);
		auth_file(path, sizeof(path), text);
		int rc = ix_registry_auth_lookup(path, "h.example", &u, &p, NULL, why, sizeof(why));
		unlink(path);
		cr_assert_eq(rc, ST_EFORMAT, "%s", bad[i]);
		cr_assert(strstr(why, "not base64 of user:password"), "%s: %s", bad[i], why);
	}
}

/* What users type for other tools' transports, or a scheme, never reaches
 * the network as a host name. */
Test(registry_ref, hosts_are_host_and_numeric_port)
{
	static const char *bad[] = { "oci:/tmp/x:tag", "a:/b", "abc:def/x:y", "docker://127.0.0.1:5000/a/b",
				     "http://localhost:5000/a", "host:0/a", "host:65536/a", "host:123456/a", "-h.example/a",
				     "h-.example/a", "a..b/c", "[::1/a", "[]:5000/a", "h_x.example/a", ":5000/a" };
	static const char *good[] = { "localhost/a", "127.0.0.1:5000/a", "reg.example.com/a/b:v1", "[::1]:5000/a",
				      "my-reg.example:443/a", "localhost:1/a" };
	struct ix_registry_ref r;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(ix_registry_ref_parse(bad[i], &r), IX_EREF, "%s", bad[i]);
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		cr_assert_eq(ix_registry_ref_parse(good[i], &r), 0, "%s", good[i]);
}
