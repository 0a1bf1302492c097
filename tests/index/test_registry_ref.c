/* test_registry_ref.c: registry references parsed into host, repository, tag and digest, each a string the parsed struct holds (or the static default tag). */
#include <criterion/criterion.h>
#include <errno.h>
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

/* The providers (index/dist/auth.c) through the one interface: explicit
 * credentials for every host; auth files in order, the first with the
 * host answering, missing ones skipped; an explicit file that must exist;
 * a helper that cannot be run named with its file. */
static int ask(const struct ix_auth *a, const char *host, char **u, char **p, char *why, size_t whylen)
{
	*u = *p = NULL;
	why[0] = '\0';
	return a->get(a->ctx, host, u, p, why, whylen);
}

Test(registry_ref, explicit_credentials_answer_every_host)
{
	struct ix_auth_provider pv;
	char why[256], *u, *p;

	ix_auth_creds(&pv, "bob", "pw:x");
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(ask(&pv.auth, i ? "other.example" : "h.example:5000", &u, &p, why, sizeof(why)), 0);
		cr_assert_str_eq(u, "bob");
		cr_assert_str_eq(p, "pw:x");
		free(u);
		free(p);
	}
	ix_auth_creds(&pv, NULL, NULL);
	cr_assert_eq(ask(&pv.auth, "h.example", &u, &p, why, sizeof(why)), 0);
	cr_assert_null(u);
	cr_assert_null(p);
}

Test(registry_ref, auth_files_are_read_in_order_and_the_first_with_the_host_answers)
{
	struct ix_auth_provider pv;
	char a[64], b[64], why[256], *u, *p;

	auth_file(a, sizeof(a), "{\"auths\":{\"other.example\":{\"auth\":\"YTpi\"}}}");
	auth_file(b, sizeof(b), "{\"auths\":{\"h.example\":{\"username\":\"alice\",\"password\":\"s\"}}}");
	const char *files[] = { "/nonexistent/strata-auth.json", a, b };
	ix_auth_files(&pv, files, 3, false, NULL);
	cr_assert_eq(ask(&pv.auth, "h.example", &u, &p, why, sizeof(why)), 0, "%s", why);
	cr_assert_str_eq(u, "alice");
	free(u);
	free(p);
	cr_assert_eq(ask(&pv.auth, "other.example", &u, &p, why, sizeof(why)), 0, "%s", why);
	cr_assert_str_eq(u, "a");
	free(u);
	free(p);
	/* No file has the host: nothing, not an error. */
	cr_assert_eq(ask(&pv.auth, "third.example", &u, &p, why, sizeof(why)), 0);
	cr_assert_null(u);
	/* An explicit file is the only one read, and must exist. */
	ix_auth_files(&pv, files + 2, 1, true, NULL);
	cr_assert_eq(ask(&pv.auth, "other.example", &u, &p, why, sizeof(why)), 0);
	cr_assert_null(u);
	ix_auth_files(&pv, files, 1, true, NULL);
	cr_assert_eq(ask(&pv.auth, "h.example", &u, &p, why, sizeof(why)), -ENOENT);
	cr_assert(strstr(why, "the auth file /nonexistent/strata-auth.json does not exist"), "%s", why);
	unlink(a);
	unlink(b);
}

Test(registry_ref, a_helper_that_cannot_be_run_is_named_with_its_file)
{
	struct ix_auth_provider pv;
	char a[64], why[256], *u, *p;

	auth_file(a, sizeof(a), "{\"credHelpers\":{\"h.example\":\"strata-no-such-helper\"}}");
	const char *files[] = { a };
	ix_auth_files(&pv, files, 1, false, NULL);
	cr_assert_eq(ask(&pv.auth, "h.example", &u, &p, why, sizeof(why)), IX_EAUTH);
	cr_assert(strstr(why, "docker-credential-strata-no-such-helper (named in "), "%s", why);
	cr_assert(strstr(why, "cannot be run") && strstr(why, "not on PATH"), "%s", why);
	cr_assert_null(u);
	unlink(a);
}
