/* index_int.h: not installed: shared by index/, index/dist/ and the index tests: LMDB handles, records, the write loop. */
#ifndef STRATA_INDEX_INDEX_INT_H
#define STRATA_INDEX_INDEX_INT_H

#include <lmdb.h>
#include <pthread.h>

#include "store/error.h"
#include "store/sys.h"
#include "index/index.h"
#include "index/dist/dist.h"

struct ix {
	struct st_store *s;
	MDB_env *env;
	MDB_dbi blobs, snaps, tags, children, meta;
	MDB_dbi sha256;   /* XXH3-128 id -> sha256 (sha256.c); valid iff has_sha256 */
	bool has_sha256;  /* false only in a read-only index written before it existed */
	MDB_dbi lazy;     /* layer id -> lazy record (lazy.c); valid iff has_lazy */
	bool has_lazy;
	MDB_dbi ws;       /* snapshot id -> working-set blob (workingset.c); valid iff has_ws */
	bool has_ws;      /* as has_sha256 */
	bool rdonly;
	uint8_t uuid[16];
	/* Readers and writers of this process hold it shared; growing the map
	 * (mdb_env_set_mapsize, which remaps) holds it exclusive, because LMDB
	 * requires that no transaction of this process is active then. */
	pthread_rwlock_t resize;
	/* The last full manifest a commit wrote or a delta was rebuilt into
	 * (snap.c), so the next checkpoint of a chain does not rebuild its
	 * parent: cache_id's manifest (a fact about ids, never stale) and the
	 * deltas its record needed then (an upper bound: records only ever go
	 * from delta to full). All three guarded by cache_lock. */
	pthread_mutex_t cache_lock;
	bool cache_has;
	st_id cache_id;
	struct st_manifest *cache_m;
	unsigned cache_depth;
};

/* Bytes a read transaction hands out that are not LMDB's (a manifest
 * rebuilt from a delta): freed by ix_txn_end. */
struct ix_owned {
	struct ix_owned *next;
	size_t len;
	char bytes[];
};

struct ix_txn {
	struct ix *ix;
	MDB_txn *txn;
	struct ix_owned *owned;
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

/* The full manifest of a snapshot in txn: its record parsed, or (a delta
 * record) rebuilt from its parent's, recursively, each step checked by
 * st_manifest_delta_apply (the result hashes to its id). IX_ENOTFOUND;
 * IX_ECORRUPT (a record that does not parse, a delta naming a parent not
 * in the index, a delta that does not rebuild its id, more than
 * IX_DELTA_DEPTH_MAX deltas: a cycle cannot be longer); -ENOMEM.
 * ix_snap_load_why says which, and *depth (may be NULL) gets the deltas
 * applied. */
int ix_snap_load(struct ix *ix, MDB_txn *txn, const st_id *id, struct st_manifest **out);
int ix_snap_load_why(struct ix *ix, MDB_txn *txn, const st_id *id, struct st_manifest **out, unsigned *depth,
		     char *why, size_t whylen);
/* ix_snap_load_why that rebuilds id's own record even when the cache
 * holds its manifest (fsck). */
int ix_snap_load_check(struct ix *ix, MDB_txn *txn, const st_id *id, struct st_manifest **out, char *why,
		       size_t whylen);
/* True if a snapshot record or OCI config is, by its canonical form, a
 * manifest delta (docs/formats.md): a dispatch only, the text is then
 * checked in full. */
bool ix_snap_text_is_delta(const void *p, size_t len);
/* The record as stored (a full manifest or a delta) into *v; IX_ENOTFOUND. */
int ix_snap_rec_get(struct ix *ix, MDB_txn *txn, const st_id *id, MDB_val *v);
/* Delete a snapshot inside a write txn (refcounts, children, tags). */
int ix_snap_del_txn(struct ix *ix, MDB_txn *txn, const st_id *id);

/* Delete snapshot id's working-set link inside a write txn, releasing its blob. */
int ix_ws_del_txn(struct ix *ix, MDB_txn *txn, const st_id *id);
/* wslink.c: link snapshot snap to its record blob (size bytes), replacing an older link. */
int ix_ws_link(struct ix *ix, const st_id *snap, const st_id *blob, uint64_t size);

/* ---- refs.c: what snapshot records reference, shared by fsck.c and repair.c ---- */

/* (key, value) pairs of ids, sortable: a layer reference (blob, snapshot,
 * n = the layer's bytes) or a children edge (parent, child). */
struct ix_pair {
	st_id a, b;
	uint64_t n;
};
struct ix_pairs {
	struct ix_pair *v;
	size_t n, cap;
};
int ix_pairs_add(struct ix_pairs *p, const st_id *a, const st_id *b, uint64_t n);
/* Sort by (a, b). */
void ix_pairs_sort(struct ix_pairs *p);
int ix_pair_cmp(const void *x, const void *y);

/* Check one snapshot record (key k, value v): 0 and *m (caller frees) if it
 * is named by its hash and parses; else IX_ECORRUPT with why filled. */
int ix_snap_rec_check(struct ix *ix, MDB_txn *txn, const MDB_val *k, const MDB_val *v, st_id *id,
		      struct st_manifest **m, char *why, size_t whylen);
/* Add m's distinct layers to refs (layer, id, bytes) and its parent edge to edges. */
int ix_refs_add(struct ix_pairs *refs, struct ix_pairs *edges, const st_id *id,
		const struct st_manifest *m);

/* Add a reference (blob, snapshot, blob bytes) for each working-set link
 * whose snapshot is in txn's snapshots; *dangling (may be NULL) counts the
 * links whose snapshot is not. */
int ix_ws_refs_add(struct ix *ix, MDB_txn *txn, struct ix_pairs *refs, uint64_t *dangling);
/* Remove the links whose snapshot is gone; *removed gets how many. */
int ix_ws_dangling_del(struct ix *ix, MDB_txn *txn, uint64_t *removed);

/* A snapshot record saved to lost+found, which the repair txn may remove
 * if the record is still byte for byte what was saved. */
struct ix_saved_rec {
	uint8_t key[511];  /* LMDB's largest key */
	size_t klen;
	st_id vhash;       /* XXH3-128 of the saved value */
	char name[96];     /* its file name in lost+found */
};
/* What the repair txn did to one record. */
struct ix_fix {
	enum ix_problem_kind kind;
	st_id id;
	char tag[ST_NAME_MAX + 1];
	char detail[160];  /* the problem, as a check would put it */
	char action[160];
};
struct ix_fixes {
	struct ix_fix *v;
	size_t n, cap;
};

/* Rename blob id's file to STORE/lost+found/<hex>.<unix-time>[.<n>] and
 * fsync both directories; name gets "lost+found/<file>". -ENOENT if the
 * blob file is not there. */
int ix_lf_blob_move(struct ix *ix, const st_id *id, char *name, size_t len);
/* Write a snapshot record's raw value to STORE/lost+found/<key-hex>.record
 * (or .record.<n> if taken), durable before returning. */
int ix_lf_rec_save(struct ix *ix, const MDB_val *k, const MDB_val *v, struct ix_saved_rec *out);
/* The repair write transaction (see ix_fsck). fixes is reset and filled
 * with what was changed (the caller frees fixes->v). */
int ix_repair_index(struct ix *ix, const struct ix_saved_rec *saved, size_t nsaved, struct ix_fixes *fixes);

/* An import or pull that failed: delete the blobs it added that no snapshot
 * references by now (one write txn; best effort, gc reclaims leftovers). */
void ix_blobs_rollback(struct ix *ix, const st_id *ids, size_t n);
/* sha256.c: record n (id, sha256) pairs in one transaction (ST_EREADONLY without the table). */
int ix_sha256_put(struct ix *ix, const st_id *ids, const uint8_t (*shas)[ST_SHA256_LEN], size_t n);

/* ---- lazy layers (lazy.c) ---- */

struct ix_chunks;
/* What a lazy record was recorded from: the registry repository
 * ("host[:port]/repo") and transport, the layer's sha256 in the OCI
 * manifest, that manifest's sha256 and the sha256 of the chunk index it
 * listed for the layer. */
struct ix_lazy_source {
	const char *origin;
	bool insecure;
	const uint8_t *layer_sha, *manifest_sha, *chunks_sha;
};
/* A lazy record's value (malloc'd). */
int ix_lazy_rec_encode(const struct ix_chunks *c, const struct ix_lazy_source *from, uint8_t **buf, size_t *len);
/* True if txn holds a lazy record for layer; *size (may be NULL) gets its size. */
bool ix_lazy_rec_has(struct ix *ix, MDB_txn *txn, const st_id *layer, uint64_t *size);
/* Whether layer's lazy record may stand in for a pull from want (NULL: a
 * source with no origin, an OCI layout): IX_LAZY_NONE (no record),
 * IX_LAZY_SAME (recorded from that same origin and transport with the
 * same layer sha256 and chunk index), IX_LAZY_OTHER (anything else: a
 * pull must fetch and verify the layer itself). lazy.c says why. */
enum { IX_LAZY_NONE, IX_LAZY_SAME, IX_LAZY_OTHER };
int ix_lazy_rec_match(struct ix *ix, MDB_txn *txn, const st_id *layer, const struct ix_lazy_source *want);
/* One line for fsck: where layer's lazy record came from, how many of its
 * chunks are here, and that its bytes are not yet checked against its id.
 * IX_ENOTFOUND: no record. */
int ix_lazy_rec_describe(struct ix *ix, MDB_txn *txn, const st_id *layer, char *buf, size_t len);
/* ix_lazy_check (lazy.h) in txn; with drop, each bad chunk's mark is
 * cleared before bad sees it (the store must be writable). */
struct ix_lazy_bad;
struct ix_lazy_check;
int ix_lazy_rec_check(struct ix *ix, MDB_txn *txn, const st_id *layer, bool drop,
		      int (*bad)(void *ctx, const struct ix_lazy_bad *b), void *ctx, struct ix_lazy_check *out);
/* Create STORE/lazy/<id>.part (sparse, size bytes) and .map (nchunks zero
 * bytes), replacing leftovers; durable per the store's policy. */
int ix_lazy_files_make(struct ix *ix, const st_id *layer, uint64_t size, uint64_t nchunks);
/* Remove them (best effort). */
void ix_lazy_files_del(struct ix *ix, const st_id *layer);
/* gc: drop lazy records (and files) of layers no snapshot references, and
 * lazy files no record names, last touched before cutoff_ns. */
int ix_lazy_gc(struct ix *ix, int64_t cutoff_ns, uint64_t *removed);
/* A lazy record to put with a chain commit. */
struct ix_lazy_put {
	st_id layer;
	uint8_t *val;
	size_t len;
};
/* ix_snap_commit_chain that also puts recs (layers without a blob file,
 * which then count as present) in the same transaction. */
int ix_snap_commit_chain_lazy(struct ix *ix, const struct st_manifest *const *ms, size_t n, const char *tag,
			      unsigned flags, st_id *out_top, const struct ix_lazy_put *recs, size_t nrecs);

/* A snapshot's canonical manifest bytes staged in a file (a pull's chain):
 * len bytes at off, which hash to id. */
struct ix_stage_link {
	st_id id;
	uint64_t off;
	size_t len;
};
/* Link l's bytes from the stage fd, malloc'd and NUL-terminated, into
 * *out. -ENOMEM, -errno, ST_ECORRUPT (the stage is shorter). */
int ix_stage_read(int fd, const struct ix_stage_link *l, char **out);
/* Commit a chain staged in fd: links[n-1] (the oldest) first, links[0]
 * (with tag) last. Each manifest is read back, checked against its id and
 * parsed inside the transaction, one at a time, and each transaction takes
 * as many links (oldest first, at least one) as IX_CHAIN_TXN_BYTES of
 * manifests allow, recs (lazy records) in the first: memory holds one link
 * and one transaction's pages, not the chain. A chain over the budget is
 * thus committed in several transactions, each leaving a consistent store
 * (every snapshot's parent before it): a failure after the first leaves the
 * older links committed, untagged, and *recs_committed true (the records'
 * files are theirs); a retried pull resumes above them. The tag is checked
 * before the first (IX_EEXIST). Errors as ix_snap_commit_chain_lazy,
 * ST_ECORRUPT (staged bytes changed), the read's. (index/snap.c) */
#define IX_CHAIN_TXN_BYTES (4u << 20)
int ix_snap_commit_chain_staged(struct ix *ix, int fd, const struct ix_stage_link *links, size_t n, const char *tag,
				unsigned flags, st_id *out_top, const struct ix_lazy_put *recs, size_t nrecs,
				bool *recs_committed);
/* Drop layer's lazy record and files (its blob is in the store now: the
 * record is stale). Best effort. (index/lazy.c) */
void ix_lazy_rec_drop(struct ix *ix, const st_id *layer);
/* A lazy record as read from the index (index/lazy.c), for the fetching
 * half (index/dist/lazy_fetch.c). */
struct ix_lazy_rec {
	struct ix_chunks *c;
	uint8_t sha[ST_SHA256_LEN];
	uint8_t manifest_sha[ST_SHA256_LEN], chunks_sha[ST_SHA256_LEN];
	bool has_source;  /* version 2: the two digests above are known */
	char origin[IX_ORIGIN_MAX + 1];
	bool insecure;
};
/* Decode layer's record value into *out (out->c is the caller's:
 * ix_chunks_free). IX_ECORRUPT for a damaged one, or one of another layer. */
int ix_lazy_rec_decode(const st_id *layer, const void *val, size_t len, struct ix_lazy_rec *out);
/* Open STORE/lazy/<id>.<ext> ("part", "map") with flags (O_CLOEXEC and
 * O_NOFOLLOW added; a file it creates gets the store's mode) into *out. */
int ix_lazy_file_open(struct st_store *s, const st_id *id, const char *ext, int flags, int *out);
/* Delete layer's lazy record in one write transaction: ix_write's result
 * (IX_NOCHANGE when there was none). Its files stay. */
int ix_lazy_rec_del(struct ix *ix, const st_id *layer);
/* pwrite len bytes at off, whole (EINTR retried): 0 or -errno. */
int ix_pwrite_all(int fd, const void *buf, size_t len, uint64_t off);

/* ix_snap_commit for a chain, oldest first, in one write transaction: all
 * of ms[0..n) are published or none; tag (may be NULL) names ms[n-1], whose
 * id goes to *out_top (may be NULL). Snapshots already present count as
 * done. Errors as ix_snap_commit, -EINVAL for n == 0. (index/snap.c) */
int ix_snap_commit_chain(struct ix *ix, const struct st_manifest *const *ms, size_t n, const char *tag,
			 unsigned flags, st_id *out_top);

/*
 * Beside a blob's sha256 (ix_sha256_get), the registry repository
 * ("host/repo", at most IX_ORIGIN_MAX bytes) it was last pushed to or
 * pulled from, so a push to another repository of that registry can mount
 * it instead of sending it. get: IX_ENOTFOUND when none (buf gets a
 * NUL-terminated copy; -ENAMETOOLONG if len is too small). put: records
 * origin for each of ids whose sha256 is recorded, in one transaction
 * (nothing on a read-only index). (index/sha256.c, used by index/dist/registry.c)
 */
int ix_origin_get(struct ix *ix, const st_id *id, char *buf, size_t len);
int ix_origin_put(struct ix *ix, const st_id *ids, size_t n, const char *origin);

#endif
