/* fuzz_manifest.c: fuzz target 1, the manifest: parse, then encode -> parse -> encode gives the same bytes and id; a delta is applied to a fixed parent. */
#include <string.h>

#include "store/store.h"
#include "tests/fuzz/fuzz.h"

/*
 * The parent every delta input is applied to: 16 pages, pages 0-3 in a
 * 4-page layer, 8-9 in a 2-page layer (corpus/manifest/delta* are deltas
 * of it). Its id is the input's own `parent`, so every input reaches the
 * decoder's layer, override and rebuild checks, not only the parent check.
 */
static struct st_manifest *fixed_parent(void)
{
	static struct st_layer_ref layers[2];
	static struct st_range ranges[2];
	static struct st_manifest m;

	memset(layers[0].id.b, 0x11, 16);
	layers[0].pages = 4;
	memset(layers[1].id.b, 0x22, 16);
	layers[1].pages = 2;
	ranges[0] = (struct st_range){ 0, 4, 0, 0 };
	ranges[1] = (struct st_range){ 8, 2, 1, 0 };
	m = (struct st_manifest){ .version = 2, .mem_size = 16 * ST_PAGE_SIZE, .nlayers = 2, .layers = layers,
				  .nranges = 2, .ranges = ranges, .created = 1764590400000000000ll, .abi_version = 3 };
	return &m;
}

static void delta_input(const uint8_t *data, size_t size)
{
	struct st_manifest *c = NULL, *p = fixed_parent();
	char why[ST_WHY_LEN] = "", *full = NULL, *again = NULL;
	size_t flen = 0, alen = 0;
	st_id id, parent, got, h;

	if (st_manifest_delta_peek((const char *)data, size, &id, &parent, why, sizeof(why)) < 0)
		return;
	if (st_manifest_delta_apply(p, &parent, (const char *)data, size, &c, &got, why, sizeof(why)) < 0) {
		FUZZ_CHECK(why[0], "a refused delta says why");
		return;
	}
	/* Accepted: it rebuilt a valid manifest whose full encoding hashes to
	 * the id it claims, and it is the one delta of that pair. */
	FUZZ_CHECK(st_id_equal(&got, &id), "the rebuilt id is not the claimed one");
	FUZZ_CHECK(st_manifest_encode(c, &full, &flen, why, sizeof(why)) == 0, "rebuilt but not encodable: %s", why);
	st_id_hash(full, flen, &h);
	FUZZ_CHECK(st_id_equal(&h, &id), "the claimed id is not the hash of the full encoding");
	FUZZ_CHECK(st_manifest_delta_encode(p, &parent, c, &id, &again, &alen, why, sizeof(why)) == 0, "re-encode: %s",
		   why);
	FUZZ_CHECK(alen == size && memcmp(again, data, size) == 0, "an accepted delta is not its canonical encoding");
	free(again);
	free(full);
	st_manifest_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct st_manifest *m = NULL, *again = NULL;
	char why[ST_WHY_LEN] = "", *text = NULL, *text2 = NULL;
	size_t len = 0, len2 = 0;
	st_id id, id2;

	delta_input(data, size);
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
