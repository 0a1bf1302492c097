/* test_manifest_fuzz.c: thousands of mutated manifests: each parses to a valid manifest or fails with a reason. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

#define A "00112233445566778899aabbccddeeff"
#define B "ffeeddccbbaa99887766554433221100"

static const char seed[] =
	"{\"abi_version\":3,\"created\":1700000000000000000,\"guest\":{\"entry\":4096,\"name\":\"echo\"},"
	"\"labels\":{\"app\":\"web\",\"team\":\"x\"},"
	"\"layers\":[{\"id\":\"" A "\",\"pages\":4},{\"id\":\"" B "\",\"pages\":2}],"
	"\"mem_size\":65536,\"parent\":\"" B "\","
	"\"ranges\":[[0,2,0,0],[4,2,1,0],[8,2,0,2]],"
	"\"vcpu\":{\"rip\":1,\"rsp\":2},\"version\":1}";

/* Bytes a mutation draws from: JSON structure, digits, signs, big numbers. */
static const char alphabet[] = "{}[]:,\"0123456789-+.eE abcdefxyz\\\n\t\x01\xff";

static uint64_t rng = 0x243F6A8885A308D3ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* One to four edits: replace, insert or delete a byte, or splice a token. */
static size_t mutate(char *buf, size_t len, size_t cap)
{
	static const char *const tokens[] = { "18446744073709551615", "-1", "1e999", "null", "[]", "{}",
					      "\"" A "\"", "9223372036854775807", "0.5", "true" };
	unsigned edits = 1 + next() % 4;

	for (unsigned e = 0; e < edits; e++) {
		size_t at = len ? next() % len : 0;
		switch (next() % 4) {
		case 0:
			if (len)
				buf[at] = alphabet[next() % (sizeof(alphabet) - 1)];
			break;
		case 1:
			if (len + 1 < cap) {
				memmove(buf + at + 1, buf + at, len - at);
				buf[at] = alphabet[next() % (sizeof(alphabet) - 1)];
				len++;
			}
			break;
		case 2:
			if (len) {
				memmove(buf + at, buf + at + 1, len - at - 1);
				len--;
			}
			break;
		default: {
			const char *t = tokens[next() % (sizeof(tokens) / sizeof(tokens[0]))];
			size_t tl = strlen(t);
			if (len + tl < cap) {
				memmove(buf + at + tl, buf + at, len - at);
				memcpy(buf + at, t, tl);
				len += tl;
			}
		}
		}
	}
	return len;
}

Test(manifest_fuzz, every_mutation_parses_validly_or_fails_with_a_reason)
{
	enum { ROUNDS = 20000, CAP = 4096 };
	char *buf = malloc(CAP);
	unsigned accepted = 0;

	cr_assert_not_null(buf);
	for (unsigned r = 0; r < ROUNDS; r++) {
		size_t len = sizeof(seed) - 1;
		memcpy(buf, seed, len);
		len = mutate(buf, len, CAP);
		struct st_manifest *m = NULL;
		char why[ST_WHY_LEN] = "";
		int rc = st_manifest_parse(buf, len, &m, why, sizeof(why));
		if (rc < 0) {
			cr_assert_null(m, "round %u: a failed parse leaves no manifest", r);
			cr_assert(why[0], "round %u: error %d (%s) without a reason", r, rc, st_strerror(rc));
			continue;
		}
		/* Accepted: it must be valid, and its canonical form must parse
		 * back to the same id (the id is stable). */
		accepted++;
		cr_assert_eq(st_manifest_validate(m, why, sizeof(why)), 0, "round %u: accepted but invalid: %s", r, why);
		char *json;
		size_t jl;
		st_id id1, id2;
		cr_assert_eq(st_manifest_encode(m, &json, &jl, why, sizeof(why)), 0, "round %u: %s", r, why);
		char *ref = th_reference_encode(m);
		cr_assert_str_eq(json, ref, "round %u: the encoder and jansson disagree", r);
		free(ref);
		cr_assert_eq(st_manifest_id(m, &id1, NULL, 0), 0);
		struct st_manifest *m2 = NULL;
		cr_assert_eq(st_manifest_parse(json, jl, &m2, why, sizeof(why)), 0, "round %u: canonical form: %s", r,
			     why);
		cr_assert_eq(st_manifest_id(m2, &id2, NULL, 0), 0);
		cr_assert(st_id_equal(&id1, &id2), "round %u: the id changed through the canonical form", r);
		free(json);
		st_manifest_free(m2);
		st_manifest_free(m);
	}
	cr_log_info("%u of %u mutations accepted", accepted, (unsigned)ROUNDS);
	free(buf);
}
