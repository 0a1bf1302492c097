/* fuzz_oci.c: fuzz target 7, OCI inputs (a snapshot's OCI manifest, a layout's index.json): a parse that succeeds encodes to bytes that parse back to the same encoding. */
#include <stdlib.h>
#include <string.h>

#include "store/store.h"
#include "tests/fuzz/fuzz.h"

static void manifest_round_trip(const uint8_t *data, size_t size)
{
	struct st_oci_manifest *om = NULL, *again = NULL;
	char why[ST_WHY_LEN] = "", *text = NULL, *text2 = NULL;
	size_t len = 0, len2 = 0;

	if (st_oci_manifest_parse((const char *)data, size, &om, why, sizeof(why)) < 0) {
		FUZZ_CHECK(why[0], "a refused OCI manifest says why");
		return;
	}
	FUZZ_CHECK(om->nlayers <= ST_MANIFEST_MAX_LAYERS, "%u layers passed the cap", om->nlayers);
	FUZZ_CHECK(st_oci_manifest_encode(om, &text, &len) == 0, "parsed but not encodable");
	FUZZ_CHECK(st_oci_manifest_parse(text, len, &again, why, sizeof(why)) == 0, "own encoding refused: %s", why);
	FUZZ_CHECK(again->nlayers == om->nlayers && again->has_subject == om->has_subject, "the round trip changed it");
	FUZZ_CHECK(memcmp(&again->config, &om->config, sizeof(om->config)) == 0, "the config descriptor changed");
	FUZZ_CHECK(st_oci_manifest_encode(again, &text2, &len2) == 0, "re-encode failed");
	FUZZ_CHECK(len == len2 && memcmp(text, text2, len) == 0, "encode -> parse -> encode changed the bytes");
	free(text);
	free(text2);
	st_oci_manifest_free(again);
	st_oci_manifest_free(om);
}

static void index_round_trip(const uint8_t *data, size_t size)
{
	struct st_oci_ref *refs = NULL, *again = NULL;
	size_t n = 0, n2 = 0, len = 0, len2 = 0;
	char why[ST_WHY_LEN] = "", *text = NULL, *text2 = NULL;

	if (st_oci_index_parse((const char *)data, size, &refs, &n, why, sizeof(why)) < 0) {
		FUZZ_CHECK(why[0], "a refused index.json says why");
		return;
	}
	FUZZ_CHECK(st_oci_index_encode(refs, n, &text, &len) == 0, "parsed but not encodable");
	FUZZ_CHECK(st_oci_index_parse(text, len, &again, &n2, why, sizeof(why)) == 0, "own encoding refused: %s", why);
	FUZZ_CHECK(n2 == n, "%zu entries became %zu", n, n2);
	FUZZ_CHECK(st_oci_index_encode(again, n2, &text2, &len2) == 0, "re-encode failed");
	FUZZ_CHECK(len == len2 && memcmp(text, text2, len) == 0, "encode -> parse -> encode changed the bytes");
	free(text);
	free(text2);
	st_oci_refs_free(again, n2);
	st_oci_refs_free(refs, n);
}

/* Every input is tried as both: the parsers must refuse what is not theirs. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	manifest_round_trip(data, size);
	index_round_trip(data, size);
	return 0;
}
