/* fuzz_workingset.c: fuzz target 9, a working-set record (pulled from a registry, so untrusted): a parse that succeeds encodes back to the same bytes, and refusals say why. */
#include <stdlib.h>
#include <string.h>

#include "store/store.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct st_ws *ws = NULL;
	char why[ST_WHY_LEN] = "";
	void *buf = NULL;
	size_t len = 0;
	uint64_t pages = 0;

	if (st_ws_parse(data, size, &ws, why, sizeof(why)) < 0) {
		FUZZ_CHECK(why[0], "a refused record says why");
		return 0;
	}
	FUZZ_CHECK(ws->nlayers <= ST_WS_MAX_LAYERS && ws->nruns <= ST_WS_MAX_RUNS, "over the limits");
	for (uint64_t r = 0; r < ws->nruns; r++)
		pages += ws->runs[r].npages;
	FUZZ_CHECK(pages == ws->pages, "the page total was not checked");
	/* The format has one spelling per record: the bytes come back as they were. */
	FUZZ_CHECK(st_ws_encode(ws, &buf, &len, why, sizeof(why)) == 0, "parsed but not encodable: %s", why);
	FUZZ_CHECK(len == size && memcmp(buf, data, size) == 0, "parse -> encode changed the bytes");
	free(buf);
	st_ws_free(ws);
	return 0;
}
