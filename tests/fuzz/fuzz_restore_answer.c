/* fuzz_restore_answer.c: fuzz target 6, the user.strata.restore answer and the mountinfo table that says whose it is. */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "store/store.h"
#include "tests/fuzz/fuzz.h"
#include "vmm/vmm_int.h"

#define STORE "/var/lib/strata/store"

/*
 * The input is an answer as a mount gives it (manifest text, NUL, one
 * NUL-ended blob path per layer), checked against a mount of STORE; the
 * same bytes are then read as a mountinfo table. An accepted answer names
 * exactly STORE's blob of every layer and nothing else.
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct st_manifest *m = NULL;
	const char *buf = (const char *)data;
	char *copy = malloc(size ? size : 1);

	if (!copy)
		return 0;
	memcpy(copy, data, size); /* exact size: ASan sees any read past it */
	int rc = vmm_restore_answer_parse(copy, size, STORE, &m);
	FUZZ_CHECK(rc == 0 || rc == 1 || rc == -ENOMEM, "rc %d", rc);
	if (rc == 1) {
		const char *p = (const char *)memchr(buf, '\0', size) + 1;
		for (uint32_t i = 0; i < m->nlayers; i++) {
			char want[PATH_MAX];
			FUZZ_CHECK(st_blob_path_at(STORE, &m->layers[i].id, want, sizeof(want)) == 0, "path");
			FUZZ_CHECK(strncmp(p, want, (size_t)(buf + size - p)) == 0 && strlen(p) == strlen(want),
				   "layer %u: accepted path is not the store's blob", i);
			p += strlen(p) + 1;
		}
		FUZZ_CHECK(p == buf + size, "bytes after the last path were accepted");
		st_manifest_free(m);
	}
	/* The same bytes as /proc/self/mountinfo: an answer is a strata store's
	 * absolute path for a line whose device, fstype and source say so. */
	char store[256];
	for (unsigned minor = 0; minor < 4; minor++) {
		memset(store, 0x5a, sizeof(store));
		int found = vmm_mountinfo_store(copy, size, 0, 40 + minor, store, sizeof(store));
		FUZZ_CHECK(found == 0 || found == 1, "found %d", found);
		if (found)
			FUZZ_CHECK(store[0] == '/' && memchr(store, '\0', sizeof(store)), "store is not an absolute path");
	}
	free(copy);
	return 0;
}
