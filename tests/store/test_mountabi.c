/* test_mountabi.c: the user.strata.restore answer's encoder and decoder (store/mountabi.h). */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "store/mountabi.h"

static const char manifest[] = "{\"version\":2}\n";

/* Encode manifest and paths into buf (size 0: measure only). */
static int encode(char *buf, size_t size, const char *const *paths, unsigned n)
{
	struct st_restore_enc e;

	st_restore_enc_begin(&e, buf, size, manifest, strlen(manifest));
	for (unsigned i = 0; i < n; i++)
		st_restore_enc_layer(&e, ST_RESTORE_BLOB, paths[i]);
	return st_restore_enc_end(&e);
}

Test(mountabi, an_answer_decodes_to_what_was_encoded)
{
	const char *paths[] = { "/s/blobs/ab/abcd", "/s/blobs/01/0123" };
	struct st_restore_answer a;
	struct st_restore_layer l;
	char buf[256];

	int n = encode(NULL, 0, paths, 2);
	cr_assert_gt(n, 0);
	cr_assert_eq(encode(buf, (size_t)n - 1, paths, 2), -ERANGE, "getxattr's size rule");
	cr_assert_eq(encode(buf, sizeof(buf), paths, 2), n);
	cr_assert_eq(memcmp(buf, "1\0{", 3), 0, "the version comes first");
	cr_assert_eq(st_restore_decode(buf, (size_t)n, &a), 0);
	cr_assert_eq(a.version, ST_RESTORE_VERSION);
	cr_assert_eq(a.manifest_len, strlen(manifest));
	cr_assert_eq(memcmp(a.manifest, manifest, a.manifest_len), 0);
	cr_assert_eq(a.nlayers, 2);
	for (unsigned i = 0; i < 2; i++) {
		cr_assert(st_restore_answer_next(&a, &l));
		cr_assert_eq(l.kind, ST_RESTORE_BLOB);
		cr_assert_eq(l.len, strlen(paths[i]));
		cr_assert_str_eq(l.payload, paths[i]);
	}
	cr_assert_not(st_restore_answer_next(&a, &l));
}

Test(mountabi, an_answer_past_the_xattr_limit_is_too_big)
{
	static char big[ST_XATTR_VALUE_MAX];
	const char *p = big;

	memset(big, 'x', sizeof(big) - 1);
	cr_assert_eq(encode(NULL, 0, &p, 1), -E2BIG);
}

Test(mountabi, a_kind_the_reader_does_not_know_is_passed_on_not_refused)
{
	static const char v[] = "1\0{}\0zwhat\0b/p\0";
	struct st_restore_answer a;
	struct st_restore_layer l;

	cr_assert_eq(st_restore_decode(v, sizeof(v) - 1, &a), 0);
	cr_assert_eq(a.nlayers, 2);
	cr_assert(st_restore_answer_next(&a, &l));
	cr_assert_eq(l.kind, 'z');
	cr_assert_str_eq(l.payload, "what");
}

Test(mountabi, malformed_answers_are_refused)
{
	static const struct {
		const char *v;
		size_t n;
		const char *why;
	} bad[] = {
		{ "{}\0b/p\0", 7, "no version (the unversioned form)" },
		{ "2\0{}\0b/p\0", 9, "a version this code does not read" },
		{ "10\0{}\0", 6, "a longer version" },
		{ "1", 1, "no NUL after the version" },
		{ "1\0{}", 4, "no NUL after the manifest" },
		{ "1\0{}\0b/p", 8, "an entry without its NUL" },
		{ "1\0{}\0\0", 6, "an empty entry" },
		{ "", 0, "nothing" },
	};
	struct st_restore_answer a;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(st_restore_decode(bad[i].v, bad[i].n, &a), ST_EFORMAT, "%s", bad[i].why);
}
