/* fuzz_chunks.c: fuzz target 8, a layer's chunk index as a registry serves it: a parse that succeeds encodes back to the same bytes. */
#include <stdlib.h>
#include <string.h>

#include "index/lazy.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ix_chunks *c = NULL;
	char why[ST_WHY_LEN] = "";
	uint8_t *buf = NULL;
	size_t len = 0;

	if (ix_chunks_parse(data, size, &c, why, sizeof(why)) < 0) {
		FUZZ_CHECK(why[0], "a refused chunk index says why");
		return 0;
	}
	FUZZ_CHECK(c->n == (c->size + c->chunk_size - 1) / c->chunk_size, "%llu chunks for %llu bytes",
		   (unsigned long long)c->n, (unsigned long long)c->size);
	FUZZ_CHECK(ix_chunk_len(c, c->n - 1) > 0 && ix_chunk_len(c, c->n - 1) <= c->chunk_size, "a bad last chunk");
	FUZZ_CHECK(ix_chunks_encode(c, &buf, &len) == 0, "parsed but not encodable");
	FUZZ_CHECK(len == size && memcmp(buf, data, size) == 0, "parse -> encode changed the bytes");
	free(buf);
	ix_chunks_free(c);
	return 0;
}
