/* fuzz_restore_answer.c: fuzz target 6, the user.strata.restore answer and the mountinfo table that says whose it is. */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "store/mountabi.h"
#include "store/store.h"
#include "tests/fuzz/fuzz.h"

#define STORE "/var/lib/strata/store"

/*
 * The input is an answer as a mount gives it (store/mountabi.h: version,
 * manifest text, one entry per layer), checked against a mount of STORE;
 * the same bytes are then read as a mountinfo table. An accepted answer
 * names exactly STORE's blob of every layer (or, for a lazy layer, the
 * directory's own file) and nothing else.
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct st_restore_answer a;
	struct st_restore_layer l;
	struct st_manifest *m = NULL;
	char *copy = malloc(size ? size : 1);

	if (!copy)
		return 0;
	memcpy(copy, data, size); /* exact size: ASan sees any read past it */
	int rc = st_restore_answer_read(copy, size, STORE, NULL, &m);
	FUZZ_CHECK(rc == 0 || rc == 1 || rc == -ENOMEM, "rc %d", rc);
	if (rc == 1) {
		FUZZ_CHECK(st_restore_decode(copy, size, &a) == 0, "an accepted answer does not decode");
		FUZZ_CHECK(a.nlayers == m->nlayers, "%u entries for %u layers", a.nlayers, m->nlayers);
		for (uint32_t i = 0; st_restore_answer_next(&a, &l); i++) {
			char want[PATH_MAX];
			FUZZ_CHECK(st_blob_path_at(STORE, &m->layers[i].id, want, sizeof(want)) == 0, "path");
			FUZZ_CHECK((l.kind == ST_RESTORE_BLOB && strcmp(l.payload, want) == 0) ||
					   (l.kind == ST_RESTORE_FILE && l.len == 0),
				   "layer %u: accepted entry is neither the store's blob nor the directory's file", i);
		}
		st_manifest_free(m);
	}
	/* The same bytes as /proc/self/mountinfo: an answer is a strata store's
	 * absolute path for a line whose device, fstype and source say so. */
	char store[256];
	for (unsigned minor = 0; minor < 4; minor++) {
		memset(store, 0x5a, sizeof(store));
		int found = st_mountinfo_store(copy, size, 0, 40 + minor, store, sizeof(store));
		FUZZ_CHECK(found == 0 || found == 1, "found %d", found);
		if (found)
			FUZZ_CHECK(store[0] == '/' && memchr(store, '\0', sizeof(store)), "store is not an absolute path");
	}
	free(copy);
	return 0;
}
