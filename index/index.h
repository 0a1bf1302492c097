/* index.h: the store's LMDB index: snapshots, tags, blob refcounts, lineage, gc and fsck. */
#ifndef STRATA_INDEX_INDEX_H
#define STRATA_INDEX_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/*
 * One LMDB environment at STORE/index/ with the named databases
 *   blobs     id(16) -> { size u64le, refs u64le }  refs = snapshots naming it
 *   snapshots id(16) -> canonical manifest JSON     id = XXH3-128 of the value
 *   tags      name   -> id(16)
 *   children  parent id(16) -> child id(16)         (dupsort)
 *   meta      "version" u32le, "uuid" 16 bytes, "generation" u64le
 * (docs/formats.md, "index records"). Every change is one short write
 * transaction and bumps the generation, so a reader (the FUSE daemon) can
 * tell its caches are stale by comparing ix_generation() values.
 *
 * Caveats:
 * - Processes: several may use one store at once (LMDB's multi-process
 *   model): the map grows on demand and every process follows, stale reader
 *   slots are cleared at open.
 * - Threads: within a process one struct ix may be shared by threads. A
 *   struct ix_txn belongs to the thread that began it; do not start a write
 *   operation on a thread that holds an open ix_txn (LMDB allows one
 *   transaction per thread).
 * - Fork: never use a struct ix across fork(): open a new one in the child
 *   (LMDB's locks and map do not survive it).
 * - Signals: none installed or sent. The registry client
 *   (index/dist/dist.h) tells libcurl not to use signals (CURLOPT_NOSIGNAL);
 *   SIGPIPE is the caller's to ignore if it writes to registries over
 *   plain sockets.
 * - Caches: the LMDB map (64 MiB at first, grown on demand, address space
 *   only), LMDB's reader table, and one snapshot manifest (the last one a
 *   commit wrote or a read rebuilt from a manifest delta: a copy, as large
 *   as that manifest, so the next checkpoint of a chain does not rebuild
 *   its parent; kept by id, so never stale; freed by ix_close); nothing
 *   else is kept between calls.
 * - Lifetimes: the store must outlive the index; pointers a read
 *   transaction hands out (ix_snap_get_raw) live until ix_txn_end.
 * - Errors: each write is one transaction: on failure nothing of it is
 *   committed (calls that also write blob files say what they remove).
 *   Out-parameters are written only on success. Nothing here prints, logs,
 *   exits or reads environment variables. Besides the codes each call
 *   names, any write may fail with ST_EREADONLY (index opened read-only,
 *   or EROFS/EACCES/EPERM), -ENOSPC (the map cannot grow: disk full),
 *   IX_ECORRUPT, IX_EBUSY, IX_ELMDB or -ENOMEM, and any read (a call taking
 *   a struct ix_txn, or beginning one) with IX_ECORRUPT or -ENOMEM; a call
 *   that takes a struct ix_txn needs it open (ix_txn_begin, not yet ended).
 */

#define IX_FORMAT_VERSION 2     /* written: snapshot records may be manifest deltas */
#define IX_FORMAT_VERSION_MIN 1 /* read: a version 1 index (records all whole) becomes version 2 at its
				 * first writable open, so no strata that cannot read a delta ever sees one */
/* A snapshot whose parent is in the index is stored as a manifest delta
 * (docs/formats.md, "Manifest deltas") unless its parent's record already
 * needs this many deltas to rebuild: then in full, so rebuilding any
 * snapshot reads at most IX_DELTA_DEPTH_MAX + 1 records. A record that
 * would need more (a cycle, or an index strata did not write) is
 * IX_ECORRUPT. Index format 2: an older strata refuses the whole index
 * (IX_EVERSION, nothing touched) rather than take a delta record for a
 * damaged one. */
#define IX_DELTA_DEPTH_MAX 32u

/* Errors: -errno or one of these (range -1100..-1199, with the registry's
 * codes at -1150 and lazy layers' at -1160: index/dist/dist.h);
 * st_strerror names every code strata returns. A write on an index opened
 * read-only (or on a read-only filesystem) -> ST_EREADONLY. */
enum {
	IX_ENOTFOUND = -1100,  /* no such snapshot, tag or record */
	IX_EEXIST = -1101,     /* the tag already names another snapshot */
	IX_EMISSING = -1102,   /* a referenced blob file is missing or has the wrong size */
	IX_EVERSION = -1103,   /* the index was written by an unknown format version */
	IX_ECORRUPT = -1104,   /* an index record is damaged or LMDB reports corruption */
	IX_EBUSY = -1105,      /* too many readers / resources busy */
	IX_ELMDB = -1106,      /* any other LMDB failure */
	IX_EAMBIGUOUS = -1107, /* an id prefix matches more than one snapshot */
};

/* st_strerror under the index's name. */
const char *ix_strerror(int err);

struct ix;      /* an open index (opaque) */
struct ix_txn;  /* a read transaction: a consistent view until ix_txn_end */

/* ix_open options; NULL means the defaults. */
struct ix_opts {
	unsigned flags;        /* IX_OPEN_* */
	uint64_t map_initial;  /* initial map size in bytes (0: default 64 MiB) */
};
enum {
	IX_OPEN_RDONLY = 1u << 0,  /* read-only (also chosen if the store is read-only) */
	IX_OPEN_NOSYNC = 1u << 1,  /* commits survive kill -9 but not power loss */
};

/*
 * Open (creating on first use) the index of an open store into *out. The
 * store must outlive the index. Sync follows the store's policy
 * (ST_SYNC_NONE -> no fsync at commit) unless IX_OPEN_NOSYNC forces it off.
 * A store that cannot be written gives a read-only index (never an error).
 * Errors: IX_EVERSION, IX_ECORRUPT, -ENOENT (a read-only store whose index
 * was never created), -ENAMETOOLONG, -EACCES, -ENOSPC, -ENOMEM: *out
 * untouched, nothing left open. STORE/index/ and LMDB's two files may
 * have been created by then (an empty environment, which the next open
 * sets up).
 */
int ix_open(struct st_store *s, const struct ix_opts *opts, struct ix **out);
/* Close; accepts NULL. All of this index's read txns must have ended and
 * no other thread may be using it. */
void ix_close(struct ix *ix);
/* The store's uuid (16 bytes), fixed when the index was created. Never fails. */
void ix_uuid(const struct ix *ix, uint8_t uuid[16]);

/* Begin a read transaction (a snapshot of the index) into *out; end it
 * with ix_txn_end on the same thread, which must not write meanwhile.
 * IX_EBUSY (LMDB's reader table is full), -ENOMEM, IX_ECORRUPT: *out untouched. */
int ix_txn_begin(struct ix *ix, struct ix_txn **out);
/* End a read transaction; accepts NULL. Pointers it returned become invalid. */
void ix_txn_end(struct ix_txn *t);

/* The change counter into *out: bumped by every committed change (0 in a
 * new index). ix_generation reads it in a transaction of its own.
 * IX_ECORRUPT (a damaged record), ix_txn_begin's errors; *out untouched. */
int ix_generation(struct ix *ix, uint64_t *out);
int ix_txn_generation(struct ix_txn *t, uint64_t *out);

/* ---- snapshots ---- */

enum {
	IX_TAG_FORCE = 1u << 0,  /* move the tag if it names another snapshot */
};

/*
 * Publish a snapshot in one write transaction: its layer blobs must already
 * be durable in the store (checked inside the transaction: each file exists
 * with the size the manifest says, else IX_EMISSING); each layer's refcount
 * grows by one, the parent's children list gains it, the generation is
 * bumped and, if tag is not NULL, the tag is set (IX_EEXIST if it names
 * another snapshot and flags lacks IX_TAG_FORCE; then nothing is committed).
 * Committing a snapshot that already exists only sets the tag (idempotent).
 * The manifest is validated and stored in canonical form, as a delta of
 * its parent's when the parent is in the index and the delta is the
 * shorter (IX_DELTA_DEPTH_MAX); *out_id (may be NULL) gets its id, the hash
 * of its full canonical encoding either way. Errors also: ST_EFORMAT/ST_ELAYOUT/ST_EVERSION (m),
 * ST_EBADNAME (tag or a label), and the write errors above; on any error
 * nothing is committed (no refcount, child link or tag changes).
 */
int ix_snap_commit(struct ix *ix, const struct st_manifest *m, const char *tag,
		   unsigned flags, st_id *out_id);

/* True if the snapshot exists in t's view (false on any error). */
bool ix_snap_has(struct ix_txn *t, const st_id *id);
/* Parse a snapshot's manifest into *out (rebuilt from its parent's when
 * stored as a delta); the caller frees it with st_manifest_free.
 * IX_ENOTFOUND, IX_ECORRUPT (a record that does not parse, or a delta that
 * does not rebuild its id), -ENOMEM: *out untouched. */
int ix_snap_get(struct ix_txn *t, const st_id *id, struct st_manifest **out);
/* The canonical manifest bytes (no trailing newline) into *buf, *len,
 * rebuilt when the record is a delta; valid until the txn ends. manifest.json on disk is these bytes
 * plus "\n". IX_ENOTFOUND: *buf, *len untouched. */
int ix_snap_get_raw(struct ix_txn *t, const st_id *id, const void **buf, size_t *len);

/* What `strata ls` shows about a snapshot. */
struct ix_snap_info {
	st_id id;
	bool has_parent;
	st_id parent;
	uint64_t mem_size;      /* guest memory size in bytes */
	int64_t created;        /* unix ns */
	uint32_t nlayers;
	uint64_t stored_bytes;  /* sum of its layers' sizes */
	uint64_t unique_bytes;  /* bytes of layers no other snapshot uses (freed by rm + gc) */
	uint64_t manifest_len;  /* canonical manifest length (manifest.json is one more) */
};
/* Fill *out for snapshot id in t's view. IX_ENOTFOUND, IX_ECORRUPT, -ENOMEM:
 * *out untouched. */
int ix_snap_info(struct ix_txn *t, const st_id *id, struct ix_snap_info *out);

/*
 * Delete a snapshot and every tag naming it, in one write transaction:
 * layer refcounts drop by one (blob files stay until ix_gc), it leaves its
 * parent's children list. Its own children keep working: every manifest
 * lists all the layers it needs. IX_ENOTFOUND if absent, IX_ECORRUPT (a
 * damaged record), the write errors: nothing changed.
 */
int ix_snap_del(struct ix *ix, const st_id *id);

/* Call cb for every snapshot id in t's view (sorted); a non-zero return
 * stops and is returned. 0 after the last; IX_ECORRUPT (a malformed key). */
int ix_snap_foreach(struct ix_txn *t, int (*cb)(const st_id *id, void *ctx), void *ctx);
/* Call cb for every child of parent (sorted; none: 0 without a call), as
 * ix_snap_foreach. */
int ix_children_foreach(struct ix_txn *t, const st_id *parent,
			int (*cb)(const st_id *child, void *ctx), void *ctx);

/* ---- tags ---- */

/* Look up a tag into *out. IX_ENOTFOUND, ST_EBADNAME, IX_ECORRUPT: *out untouched. */
int ix_tag_get(struct ix_txn *t, const char *name, st_id *out);
/* Point a tag at an existing snapshot (IX_ENOTFOUND if it does not exist;
 * IX_EEXIST if the tag names another one and flags lacks IX_TAG_FORCE;
 * ST_EBADNAME; the write errors): on failure the tag is as it was. */
int ix_tag_set(struct ix *ix, const char *name, const st_id *id, unsigned flags);
enum {
	IX_TAG_PRUNE = 1u << 1,  /* ix_tag_del: also delete the snapshot if no other tag names it */
};
/* Remove a tag (IX_ENOTFOUND, ST_EBADNAME). With IX_TAG_PRUNE the snapshot
 * goes too, in the same transaction, when no other tag names it (what
 * `strata rm NAME` and `rm -r` on a mount do); *pruned (may be NULL) says
 * whether it did. On failure the tag and the snapshot stay. */
int ix_tag_del(struct ix *ix, const char *name, unsigned flags, bool *pruned);
/* Rename a tag atomically (IX_ENOTFOUND; IX_EEXIST if `to` names another
 * snapshot and flags lacks IX_TAG_FORCE; ST_EBADNAME): on failure both
 * names are as they were. */
int ix_tag_rename(struct ix *ix, const char *from, const char *to, unsigned flags);
/* Call cb for every tag in name order; a non-zero return stops and is
 * returned. IX_ECORRUPT (a malformed record). */
int ix_tag_foreach(struct ix_txn *t, int (*cb)(const char *name, const st_id *id, void *ctx),
		   void *ctx);
/* Resolve "32-hex id of an existing snapshot", "tag name", or a unique
 * prefix of an id (at least IX_ID_PREFIX_MIN hex digits, when no tag has that
 * name) to a snapshot id. A full id wins over a tag spelled the same, a tag
 * over a prefix. IX_ENOTFOUND, IX_EAMBIGUOUS, ST_EBADNAME (neither an id,
 * a prefix nor a valid tag), IX_ECORRUPT: *out untouched. */
#define IX_ID_PREFIX_MIN 6
int ix_resolve(struct ix_txn *t, const char *ref, st_id *out);

/* ---- snapshot directories ---- */

struct ix_import_stats {
	uint32_t layers;         /* layers in the manifest */
	uint32_t layers_added;   /* layers that were not in the store */
	uint64_t bytes_read;     /* layer bytes hashed */
	uint64_t bytes_added;    /* bytes newly stored */
	bool existed;            /* the snapshot was already in the store */
	uint32_t layers_healed;  /* existed, but these layers' blob files were missing: stored from dir */
};
/*
 * Import a snapshot directory (DIR/manifest.json + DIR/layers/<id>): the
 * manifest is parsed and validated, every layer is present with the size the
 * manifest says and is re-hashed against its name while it is stored
 * (existing blobs are not stored twice), then one transaction commits it
 * (and tag). On any failure nothing becomes visible and the blobs this call
 * added are removed again. Importing a snapshot the index already holds
 * verifies the whole directory, then heals: each layer whose blob file is
 * missing from the store (e.g. moved to lost+found by a repair) is stored
 * from dir (stats->layers_healed); otherwise nothing changes (it may still
 * move the tag). why (may be NULL, 256 bytes) gets the store's explanation
 * for ST_EFORMAT. stats may be NULL.
 * Errors: ST_EREADONLY, ST_EBADNAME (tag), st_snapdir_read's (-ENOENT: no
 * manifest.json), -ENOENT (a missing layer), ST_ELAYOUT (a layer of the
 * wrong size), ST_ECORRUPT (bytes that do not hash to the name), IX_EEXIST
 * (tag names another snapshot), -ENOSPC, -EIO, the write errors; why says
 * which. Blobs this call added are removed again, unless a snapshot
 * committed meanwhile references them (best effort: one it cannot remove
 * is an orphan gc reclaims). For a snapshot the index already holds, the
 * layers healed before a failure stay (the index references them already).
 */
int ix_import_dir(struct ix *ix, const char *dir, const char *tag, unsigned flags,
		  st_id *out_id, struct ix_import_stats *stats, char *why, size_t whylen);
/* Export a snapshot (tag, id or prefix: ix_resolve) as a snapshot
 * directory at dir, which must not exist yet (written in a temp dir beside
 * it, then renamed: st_snapdir_export, with its errors and its guarantee
 * that a failure leaves nothing behind). ix_resolve's errors. */
int ix_export(struct ix *ix, const char *ref, const char *dir);

/* ---- working sets (index/workingset.c; docs/workingset.md) ---- */

/*
 * A snapshot's working-set record (store.h, st_ws) is a blob of its own,
 * linked from the snapshot in the `workingsets` database (snapshot id ->
 * blob id, bytes). The link does not change the snapshot or its id; the
 * blob's refcount counts it, so gc keeps the record while the snapshot
 * lives, and deleting the snapshot releases it. One record per snapshot.
 *
 * put: parse buf and check it against the snapshot (ST_EFORMAT,
 * ST_EVERSION, ST_ELAYOUT; why says which rule), store it as a blob
 * (durable per the store's policy) and link it in one write transaction,
 * replacing an earlier record. IX_ENOTFOUND if the snapshot is not in the
 * index; ST_EREADONLY. *out (may be NULL) gets the blob id.
 * A put that fails after storing the blob (the link's transaction) leaves
 * it unreferenced: gc reclaims it; the earlier record, if any, stays linked.
 * get: the linked blob and its bytes (either may be NULL); IX_ENOTFOUND.
 * load: get, read, parse and check the record (IX_EMISSING if its blob
 * file is gone; ST_EFORMAT, ST_EVERSION, ST_ELAYOUT with why); *out is the
 * caller's (st_ws_free); blob may be NULL.
 * Every out-parameter is written only on success.
 */
int ix_ws_put(struct ix *ix, const st_id *snap, const void *buf, size_t len, st_id *out, char *why, size_t whylen);
int ix_ws_get(struct ix_txn *t, const st_id *snap, st_id *blob, uint64_t *size);
int ix_ws_load(struct ix *ix, const st_id *snap, struct st_ws **out, st_id *blob, char *why, size_t whylen);

/* ---- garbage collection and checks ---- */

struct ix_gc_stats {
	uint64_t blobs_removed, bytes_removed;
	uint64_t blobs_young;     /* unreferenced but inside the grace period: kept */
	uint64_t blobs_in_use;    /* referenced by a snapshot: kept */
	uint64_t tmp_removed;     /* stale staging files removed */
	uint64_t lazy_removed;    /* lazy layers no snapshot uses (records, files) removed */
};
/*
 * Remove blob files no snapshot references and whose mtime is older than
 * grace_s seconds (so blobs an import is still staging survive), and staging
 * files older than grace_s. Each check-and-unlink runs inside a write
 * transaction, so it serialises with commits. Then lazy layers no snapshot
 * uses (their records and chunk files) go. stats may be NULL.
 * Errors: ST_EREADONLY, st_tmp_sweep's and st_blob_foreach's, the write
 * errors; on failure what it removed before stays removed (it was garbage)
 * and *stats is untouched.
 */
int ix_gc(struct ix *ix, unsigned grace_s, struct ix_gc_stats *stats);

enum ix_problem_kind {
	IX_PROBLEM_MISSING,      /* a referenced blob file does not exist */
	IX_PROBLEM_SIZE,         /* a blob file's size differs from its record */
	IX_PROBLEM_CORRUPT,      /* a blob's bytes do not hash to its name */
	IX_PROBLEM_REFCOUNT,     /* a blob record's refcount differs from the snapshots */
	IX_PROBLEM_SNAPSHOT,     /* a snapshot record is unreadable or not named by its hash */
	IX_PROBLEM_TAG,          /* a tag names a snapshot that does not exist */
	IX_PROBLEM_CHILDREN,     /* the children lists disagree with the parents */
	IX_PROBLEM_ORPHAN,       /* a blob file no snapshot references (not an error: gc reclaims it) */
	IX_PROBLEM_WORKINGSET,   /* a working-set link names a snapshot that does not exist */
	IX_PROBLEM_LAZY,         /* a lazy layer (not an error): its chunks were checked only against the
				  * chunk index it came with, its bytes not yet against its id */
	IX_PROBLEM_CHUNK,        /* a present chunk of a lazy layer does not match its chunk index */
};
struct ix_problem {
	enum ix_problem_kind kind;
	bool error;          /* false for orphans: the store is still consistent */
	st_id id;            /* the blob or snapshot concerned */
	const char *tag;     /* IX_PROBLEM_TAG: the tag name */
	const char *detail;  /* plain words, e.g. "refcount 2, referenced by 1 snapshot" */
	const char *action;  /* IX_FSCK_REPAIR: what was done, e.g. "moved to lost+found/<hex>.<time>",
			      * "refcount set to 1", "tag removed"; NULL if nothing was (or could be) */
};
struct ix_fsck_stats {
	uint64_t snapshots, blobs, blob_files, bytes_hashed;
	uint64_t lazy;             /* referenced layers that are lazy (no blob file yet, by design; their
				    * bytes not yet checked against their ids): one IX_PROBLEM_LAZY each */
	uint64_t lazy_chunks;      /* IX_FSCK_HASH: their present chunks, re-hashed against their chunk indexes */
	uint64_t errors, orphans;  /* found (before any repair) */
	uint64_t repaired;         /* IX_FSCK_REPAIR: problems an action was taken on */
	uint64_t remaining;        /* errors a check finds after the repair (= the return value) */
};
enum {
	IX_FSCK_HASH = 1u << 0,    /* re-hash every blob file (finds IX_PROBLEM_CORRUPT) */
	IX_FSCK_REPAIR = 1u << 1,  /* repair what can be repaired without losing anything */
};
/*
 * Check the index against the blob files: every record is readable, every
 * referenced blob exists with its size (and hash, with IX_FSCK_HASH),
 * refcounts and children lists match the snapshots, tags name snapshots, and
 * list orphan blob files. cb (may be NULL) sees each problem; returns the
 * number of errors (>= 0) or a negative error code. stats may be NULL.
 *
 * With IX_FSCK_REPAIR (index opened read-write, else ST_EREADONLY), after
 * the check and before cb sees anything:
 *   - blob files that do not hash to their name (or have the wrong size
 *     and do not hash to it) are renamed to STORE/lost+found/<hex>.<unix-time>
 *     and the directories fsync'd; the layer then counts as missing;
 *   - damaged snapshot records are written to STORE/lost+found/<key-hex>.record
 *     (fsync'd);
 *   - then one write transaction re-checks the index and removes the saved
 *     records, rewrites blob records and children lists from the readable
 *     snapshots, and removes tags naming no snapshot or breaking the name rule.
 * Nothing is deleted: bytes leave the index or blobs/ only for lost+found.
 * A failure or kill at any step leaves a store this check finds no worse.
 * Missing layers cannot be repaired here (ix_snap_lacking_foreach lists the
 * snapshots; ix_import_dir of a copy heals them). cb then sees each problem
 * found with its action; the return value (and stats->remaining) is the
 * number of errors a check (without hashing) finds afterwards.
 * Errors (< 0): ST_EREADONLY (IX_FSCK_REPAIR on a read-only index),
 * cb's non-zero return, -ENOMEM, IX_EBUSY, -errno reading blobs/; a repair
 * that fails part way keeps what it did (each step leaves a consistent
 * store, as above).
 */
int ix_fsck(struct ix *ix, unsigned flags,
	    int (*cb)(const struct ix_problem *p, void *ctx), void *ctx,
	    struct ix_fsck_stats *stats);

/* Call cb for every readable snapshot some of whose layers have no blob
 * file of the right size in the store: missing of its nlayers layers. A
 * non-zero return from cb stops and is returned; IX_ECORRUPT, -ENOMEM.
 * Changes nothing. */
int ix_snap_lacking_foreach(struct ix *ix,
			    int (*cb)(const st_id *id, uint32_t missing, uint32_t nlayers, void *ctx),
			    void *ctx);

#endif
