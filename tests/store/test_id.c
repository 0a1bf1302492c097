/* test_id.c: ids, hashing and the name rule. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "store/store.h"

Test(id, parse_format_round_trip)
{
	st_id id, back;
	char hex[ST_ID_HEX_LEN + 1];

	for (int i = 0; i < 100; i++) {
		char buf[64];
		snprintf(buf, sizeof(buf), "content %d", i);
		st_id_hash(buf, strlen(buf), &id);
		st_id_format(&id, hex);
		cr_assert_eq(strlen(hex), 32);
		cr_assert_eq(st_id_parse(hex, &back), 0);
		cr_assert(st_id_equal(&id, &back));
	}
}

Test(id, hash_is_canonical_big_endian_xxh3_128)
{
	const char *msg = "strata";
	XXH128_hash_t h = XXH3_128bits(msg, strlen(msg));
	st_id id;

	st_id_hash(msg, strlen(msg), &id);
	/* Canonical form: high 64 bits first, each big-endian. */
	for (int i = 0; i < 8; i++) {
		cr_assert_eq(id.b[i], (uint8_t)(h.high64 >> (56 - 8 * i)));
		cr_assert_eq(id.b[8 + i], (uint8_t)(h.low64 >> (56 - 8 * i)));
	}
}

Test(id, parse_rejects_bad_hex)
{
	static const char *const bad[] = {
		"",
		"0123456789abcdef0123456789abcde",   /* 31 */
		"0123456789abcdef0123456789abcdef0", /* 33 */
		"0123456789ABCDEF0123456789abcdef",  /* uppercase */
		"0123456789abcdef0123456789abcdeg",  /* not hex */
		"0123456789abcdef 123456789abcdef",  /* space */
		"../../../../../../../../etc/pass",  /* path */
	};
	st_id id;

	memset(&id, 0x5a, sizeof(id));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(st_id_parse(bad[i], &id), ST_EBADID, "accepted '%s'", bad[i]);
	cr_assert_eq(st_id_parse(NULL, &id), ST_EBADID);
	for (size_t i = 0; i < sizeof(id.b); i++)
		cr_assert_eq(id.b[i], 0x5a, "out-parameter written on failure");
}

Test(id, streaming_equals_one_shot)
{
	static uint8_t buf[1 << 20];
	struct st_hasher *h;
	st_id a, b;

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 31 + (i >> 9));
	st_id_hash(buf, sizeof(buf), &a);
	cr_assert_eq(st_hasher_new(&h), 0);
	for (size_t off = 0, step = 1; off < sizeof(buf); off += step, step = step * 3 + 7) {
		size_t n = step < sizeof(buf) - off ? step : sizeof(buf) - off;
		st_hasher_update(h, buf + off, n);
	}
	st_hasher_final(h, &b);
	cr_assert(st_id_equal(&a, &b));
	st_hasher_reset(h);
	st_hasher_final(h, &b);
	st_id_hash("", 0, &a);
	cr_assert(st_id_equal(&a, &b), "reset returns to the empty digest");
	st_hasher_free(h);
}

Test(id, name_rule)
{
	static const char *const good[] = { "a", "web-1", "_x", "A.b_c-d", "0", "a..b" };
	static const char *const bad[] = { "", ".", "..", ".hidden", "-x", "a/b", "/", "../x", "a b", "é" };
	char longname[ST_NAME_MAX + 2];

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		cr_assert(st_name_valid(good[i]), "rejected '%s'", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert(!st_name_valid(bad[i]), "accepted '%s'", bad[i]);
	memset(longname, 'a', sizeof(longname));
	longname[ST_NAME_MAX] = '\0';
	cr_assert(st_name_valid(longname), "128 chars is allowed");
	longname[ST_NAME_MAX] = 'a';
	longname[ST_NAME_MAX + 1] = '\0';
	cr_assert(!st_name_valid(longname), "129 chars is not");
	cr_assert(!st_name_valid(NULL));
}

Test(id, strerror_covers_codes)
{
	int codes[] = { ST_ECORRUPT, ST_EFORMAT, ST_EVERSION, ST_ELAYOUT, ST_ENOTSTORE, ST_EBADNAME, ST_EBADID,
			ST_EREADONLY, -ENOENT };
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		const char *m = st_strerror(codes[i]);
		cr_assert(m && *m && strcmp(m, "unknown error") != 0);
	}
}
