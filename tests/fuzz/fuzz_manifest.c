/* fuzz_manifest.c: fuzz target 1, the manifest: parse, then encode -> parse -> encode gives the same bytes and id. */
#include <string.h>

#include "store/store.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct st_manifest *m = NULL, *again = NULL;
	char why[ST_WHY_LEN] = "", *text = NULL, *text2 = NULL;
	size_t len = 0, len2 = 0;
	st_id id, id2;

	if (st_manifest_parse((const char *)data, size, &m, why, sizeof(why)) < 0) {
		FUZZ_CHECK(why[0], "a refusal says why");
		return 0;
	}
	FUZZ_CHECK(st_manifest_validate(m, why, sizeof(why)) == 0, "parsed but not valid: %s", why);
	FUZZ_CHECK(st_manifest_encode(m, &text, &len, why, sizeof(why)) == 0, "parsed but not encodable: %s", why);
	FUZZ_CHECK(len <= ST_MANIFEST_MAX_BYTES, "encoding of %zu bytes passes the cap", len);
	FUZZ_CHECK(st_manifest_parse(text, len, &again, why, sizeof(why)) == 0, "canonical text refused: %s", why);
	FUZZ_CHECK(st_manifest_encode(again, &text2, &len2, why, sizeof(why)) == 0, "re-encode: %s", why);
	FUZZ_CHECK(len == len2 && memcmp(text, text2, len) == 0, "encode -> parse -> encode changed the bytes");
	FUZZ_CHECK(st_manifest_id(m, &id, why, sizeof(why)) == 0 && st_manifest_id(again, &id2, why, sizeof(why)) == 0,
		   "id: %s", why);
	FUZZ_CHECK(st_id_equal(&id, &id2), "the id changed across a round trip");
	/* The canonical text's hash is the id. */
	st_id h;
	st_id_hash(text, len, &h);
	FUZZ_CHECK(st_id_equal(&h, &id), "the id is not the hash of the canonical encoding");
	free(text);
	free(text2);
	st_manifest_free(again);
	st_manifest_free(m);
	return 0;
}
