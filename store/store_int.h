/* store_int.h: declarations shared inside store/ only. */
#ifndef STRATA_STORE_STORE_INT_H
#define STRATA_STORE_STORE_INT_H

#include <stdarg.h>

#include "store/error.h"
#include "store/store.h"
#include "store/sys.h"

struct st_store {
	char *path;          /* absolute */
	int dirfd;           /* O_PATH | O_DIRECTORY */
	int blobs_fd;        /* STORE/blobs, O_PATH | O_DIRECTORY */
	int tmp_fd;          /* STORE/tmp, O_PATH | O_DIRECTORY (-1 if read-only) */
	unsigned flags;      /* ST_OPEN_* */
	enum st_sync config_sync; /* recorded in STORE/format */
	enum st_sync sync;        /* effective for this handle */
	bool shared;              /* recorded in STORE/format: group-readable */
	gid_t group;              /* that group, when shared */
};


/* Map a write-side errno from the filesystem to ST_EREADONLY where it means
 * "this store cannot be written" (EROFS, EACCES, EPERM). */
int st_write_err(int rc);


/* Return true if all len bytes are zero. */
bool st_is_zero(const void *buf, size_t len);


/* XXH3-64 of len bytes of buf: a memo key, never an id (id.c, where XXH3 is
 * compiled in: no process maps libxxhash). Never fails. */
uint64_t st_hash64(const void *buf, size_t len);

/* XXH3-128 built for AVX2 (hash_avx2.c); id.c calls these only when the
 * CPU supports AVX2. state is an XXH3_state_t. Results equal the generic
 * code's bit for bit. */
void st_hash_avx2(const void *buf, size_t len, st_id *out);
void st_hash_avx2_update(void *state, const void *buf, size_t len);

#endif
