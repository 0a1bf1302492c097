/* index_int.h: declarations shared by the index's files (LMDB handles, records, the write loop). */
#ifndef STRATA_INDEX_INDEX_INT_H
#define STRATA_INDEX_INDEX_INT_H

#include <lmdb.h>
#include <pthread.h>

#include "index/index.h"

struct ix {
	struct st_store *s;
	MDB_env *env;
	MDB_dbi blobs, snaps, tags, children, meta;
	bool rdonly;
	uint8_t uuid[16];
	/* Readers and writers of this process hold it shared; growing the map
	 * (mdb_env_set_mapsize, which remaps) holds it exclusive, because LMDB
	 * requires that no transaction of this process is active then. */
	pthread_rwlock_t resize;
};

struct ix_txn {
	struct ix *ix;
	MDB_txn *txn;
};

/* A blob record: blobs[id] (docs/formats.md "index records"). */
struct ix_blob_rec {
	uint64_t size;
	uint64_t refs;
};
#define IX_BLOB_REC_LEN 16

/* One write operation: runs inside a write transaction and returns 0 to
 * commit (the generation is bumped), IX_NOCHANGE to end the transaction
 * without changes, or an error (raw MDB_* codes allowed: MDB_MAP_FULL makes
 * ix_write grow the map and run fn again, so fn must not keep state across
 * runs except what it recomputes). */
#define IX_NOCHANGE 1
typedef int (*ix_write_fn)(struct ix *ix, MDB_txn *txn, void *ctx);
int ix_write(struct ix *ix, ix_write_fn fn, void *ctx);

/* LMDB's return value as ours: positive errno -> -errno; MDB_* kept. */
static inline int ix_mdb(int rc)
{
	return rc > 0 ? -rc : rc;
}
/* Any remaining MDB_* code -> IX_* code; others unchanged. */
int ix_err(int rc);

static inline MDB_val ix_val(const void *p, size_t len)
{
	MDB_val v = { .mv_size = len, .mv_data = (void *)p };
	return v;
}

int ix_blob_rec_get(struct ix *ix, MDB_txn *txn, const st_id *id, struct ix_blob_rec *out);
int ix_blob_rec_put(struct ix *ix, MDB_txn *txn, const st_id *id, const struct ix_blob_rec *r);

/* Parse the stored manifest of a snapshot in txn. IX_ENOTFOUND, IX_ECORRUPT. */
int ix_snap_load(struct ix *ix, MDB_txn *txn, const st_id *id, struct st_manifest **out);
/* Delete a snapshot inside a write txn (refcounts, children, tags). */
int ix_snap_del_txn(struct ix *ix, MDB_txn *txn, const st_id *id);

#endif
