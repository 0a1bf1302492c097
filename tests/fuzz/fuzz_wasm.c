/* fuzz_wasm.c: fuzz target 10, a WebAssembly module as strata wasm build reads it: a refusal says why, glue is written only for what parsed. */
#include <string.h>

#include "tests/fuzz/fuzz.h"
/* The glue writer is the CLI's (mount/), which has no library: compiled in. */
#include "mount/wasm_glue.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char why[512] = "";
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len), *notes = fopen("/dev/null", "w");

	if (!out || !notes) {
		if (out)
			fclose(out);
		if (notes)
			fclose(notes);
		free(text);
		return 0;
	}
	int rc = wasm_glue_write(data, size, NULL, 0, 0, out, notes, why, sizeof(why));
	fclose(out);
	fclose(notes);
	if (rc < 0)
		FUZZ_CHECK(why[0], "a refusal without a reason");
	else
		FUZZ_CHECK(len && strstr(text, "void strata_init(void)"), "accepted, but the glue has no strata_init");
	free(text);
	return 0;
}
