/* store.h: strata's content-addressed blob store, ids, manifests and snapshot directories. */
#ifndef STRATA_STORE_STORE_H
#define STRATA_STORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Caveats (docs/formats.md describes the bytes on disk):
 * - Threads: a struct st_store may be used by several threads at once (reads
 *   and puts); a blob writer, a hasher, a SHA-256 state and a manifest belong
 *   to one thread at a time. A struct st_snapcache is thread safe (one lock
 *   per cache inside); a struct st_snapdir may be read by several threads at
 *   once (st_snapdir_manifest, st_snapdir_layer_dup) and is closed by one
 *   when no other uses it.
 * - Fork: every descriptor the store opens is O_CLOEXEC. A forked child may
 *   use handles it inherited only if no other thread of the parent was
 *   inside a store call at the fork (a lock held then stays held in the
 *   child); otherwise it opens its own.
 * - Signals: the store installs no handler and sends none. It maps files to
 *   read them (st_hash_fd, st_blob_verify, st_snapdir_verify,
 *   st_ingest_file, st_snapdir_open with ST_SNAPDIR_VERIFY): a file another
 *   process truncates meanwhile raises SIGBUS in the caller. strata's own
 *   blobs are read-only (0400, shared 0440) and never truncated; st_snapdir_open copies
 *   other people's files before anyone maps them.
 * - Caches: a store handle keeps only its directory descriptors. Everything
 *   else kept is in a struct st_snapcache the caller creates with its limits
 *   and frees (parsed manifests; private copies of layers, as sealed memfds
 *   holding up to copy_bytes of memory; the last "is this a strata mount"
 *   answer, with /proc/self/mountinfo open). Process-wide state: the
 *   fault-injection counters of store/sys.h (tests arm them) and which XXH3
 *   code the CPU runs (AVX2 or not, decided once).
 * - Lifetimes: a store must outlive its blob writers (and an index opened
 *   on it); a st_snapcache must outlive the st_snapdir_open calls using it,
 *   not the handles or descriptors they returned; a st_snapdir's manifest
 *   lives as long as the handle. st_strerror and st_store_path strings are
 *   static / as long as the handle.
 * - Errors: every function that can fail returns int: >= 0 on success,
 *   -errno or one of the ST_E* codes below on failure; st_strerror() names
 *   both. Out-parameters are written only on success, and a failed call
 *   leaves nothing behind that it made (each call says what, if anything,
 *   it keeps). Functions taking `char *why, size_t whylen` write a one-line
 *   reason there (why may be NULL); it never contains a newline.
 * - Nothing here prints, logs, exits or reads environment variables.
 */

#define ST_PAGE_SIZE 4096u
#define ST_MANIFEST_VERSION 2u  /* manifest.json "version" this code writes */
#define ST_MANIFEST_VERSION_MIN 1u /* the oldest it reads: 1 has `created` as an integer */
#define ST_MANIFEST_DELTA_VERSION 3u /* a manifest delta's "version": read with its parent (st_manifest_delta_*) */
#define ST_STORE_VERSION 1u     /* STORE/format version this code writes and reads */
#define ST_ID_HEX_LEN 32        /* an id's text form, without the terminating NUL */
#define ST_NAME_MAX 128         /* longest tag / label key */
#define ST_WHY_LEN 256          /* a good size for why buffers */

/* Error codes: the store's range is ST_E_LAST..ST_E_FIRST. */
#define ST_E_FIRST (-1000)
#define ST_E_LAST (-1099)
enum {
	ST_ECORRUPT = -1000,  /* bytes do not hash to their name / size is wrong */
	ST_EFORMAT = -1001,   /* malformed manifest or store file (why says where) */
	ST_EVERSION = -1002,  /* unknown manifest or store format version */
	ST_ELAYOUT = -1003,   /* ranges out of bounds, overlapping, unsorted; layer too short */
	ST_ENOTSTORE = -1004, /* directory is not a strata store */
	ST_EBADNAME = -1005,  /* tag or label name breaks the name rule */
	ST_EBADID = -1006,    /* text is not a 32-char lowercase hex id */
	ST_EREADONLY = -1007, /* store opened read-only, or its filesystem refuses writes */
};

/* Message for any code strata returns: -errno (strerror's words), the
 * store's codes above and those of every other module of the library (the
 * index -1100..-1199, the vmm -1200..-1299, fs -1300..-1399; docs/library.md
 * has the table). ix_strerror, vmm_strerror and fs_strerror are the same
 * function. Never fails, never NULL; static storage. */
const char *st_strerror(int err);

/* ------------------------------------------------------------------ ids */

/* A blob or snapshot id: XXH3-128 in canonical big-endian byte order. */
typedef struct {
	uint8_t b[16];
} st_id;

/* Hash len bytes of buf (NULL allowed when len is 0) into *out. Never fails. */
void st_id_hash(const void *buf, size_t len, st_id *out);

/* Parse exactly 32 lowercase hex chars (NUL-terminated) into *out.
 * Anything else (NULL, uppercase, short, long, non-hex) -> ST_EBADID,
 * *out untouched. */
int st_id_parse(const char *hex, st_id *out);
/* Parse exactly 32 lowercase hex chars from a buffer that need not be
 * NUL-terminated (len must be 32). -> ST_EBADID, *out untouched. */
int st_id_parse_n(const char *hex, size_t len, st_id *out);

/* Write the 32-char lowercase hex form and a NUL into out. Never fails. */
void st_id_format(const st_id *id, char out[ST_ID_HEX_LEN + 1]);

/* The same 16 bytes. Never fails. */
bool st_id_equal(const st_id *a, const st_id *b);
/* memcmp order (< 0, 0, > 0), for sorting and binary search. Never fails. */
int st_id_cmp(const st_id *a, const st_id *b);

/* Streaming XXH3-128 (same result as st_id_hash over the concatenation). */
struct st_hasher;
/* Allocate a hasher in its initial state into *out. -ENOMEM, *out untouched. */
int st_hasher_new(struct st_hasher **out);
/* Back to the initial state (h from st_hasher_new). Never fails. */
void st_hasher_reset(struct st_hasher *h);
/* Hash len more bytes of buf. Never fails. */
void st_hasher_update(struct st_hasher *h, const void *buf, size_t len);
/* Digest of everything so far into *out; the hasher may keep being
 * updated. Never fails. */
void st_hasher_final(const struct st_hasher *h, st_id *out);
/* Free; accepts NULL. */
void st_hasher_free(struct st_hasher *h);

/* Tag and label-key rule: [A-Za-z0-9_][A-Za-z0-9._-]{0,127}. Rejects NULL,
 * "/", "..", leading "." or "-", empty and over-long names. Never fails. */
bool st_name_valid(const char *name);

/* ---------------------------------------------------------------- store */

struct st_store; /* an open store (opaque) */

/*
 * Sync policy (docs/sync.md has what survives what, and the measured cost):
 * - ST_SYNC_FULL: a put fsyncs the blob file before publishing it and the
 *   blob directory after; survives kill -9 and power loss once it returns.
 * - ST_SYNC_NONE: no fsync; a returned put survives kill -9 (the page cache
 *   holds it) but not power loss.
 * ST_SYNC_DEFAULT means "whatever the store's config says" (st_store_init
 * records FULL unless told otherwise).
 */
enum st_sync {
	ST_SYNC_DEFAULT = 0,
	ST_SYNC_FULL = 1,
	ST_SYNC_NONE = 2,
};

/* Parse a policy's name ("full", "none") into *out. Anything else (NULL,
 * "default") -> -EINVAL, *out untouched. */
int st_sync_parse(const char *name, enum st_sync *out);

struct st_store_opts {
	enum st_sync sync; /* policy recorded in STORE/format (DEFAULT -> FULL) */
	bool shared;       /* a group-shared store (recorded in STORE/format) */
	gid_t group;       /* its group, when shared: the caller must be in it (or root) */
};

/*
 * Create a store at dir (created if missing; its parent must exist): blobs/,
 * tmp/, then the STORE/format file (written to a temporary, synced and
 * renamed: a directory is a store once that file is there). opts may be
 * NULL. The store is private to its owner (dir and its directories 0700,
 * files 0400/0600, whatever the umask), or with opts->shared readable by
 * opts->group and nobody else (dir chowned to the group, directories
 * 02750, files 0440/0640; st_store_perm). Idempotent: an existing store is
 * left as is (its recorded sync policy and modes are not changed; a blobs/
 * or tmp/ it lost is made again).
 * Errors: ST_ENOTSTORE (a directory that is neither empty nor a store; the
 * empty blobs/ and tmp/ a killed init leaves count as empty), ST_EVERSION
 * or ST_EFORMAT (an existing store's format file is newer or damaged),
 * -EEXIST (opts->shared, or its group, differs from what an existing store
 * records), -EINVAL (opts->sync not a policy), -EPERM (dir cannot be given
 * to opts->group: the caller is not in it), ST_EREADONLY (EROFS, EACCES,
 * EPERM of any other step),
 * -ENOSPC, -EIO, other -errno. On failure before the format file is in
 * place, what this call made is removed again (dir itself, if it made it):
 * the directory is as it was. A failed sync once it is in place (of dir or
 * its parent) is reported and leaves a complete store (a retry returns 0).
 */
int st_store_init(const char *dir, const struct st_store_opts *opts);

enum {
	ST_OPEN_RDONLY = 1u << 0, /* never write; writes return ST_EREADONLY */
};

/*
 * Open an existing store (flags: ST_OPEN_*) into *out; it holds three
 * directory descriptors and nothing else. dir may be relative;
 * st_store_path returns the absolute form. Errors: -ENOENT / -ENOTDIR (no
 * such directory), ST_ENOTSTORE (no format file, no blobs/, or no tmp/ when
 * opened read-write), ST_EVERSION (unknown version), ST_EFORMAT (bad format
 * file), -ENOMEM, other -errno; *out untouched and nothing left open.
 * Opening read-write a store the process cannot write (read-only fs,
 * permissions) succeeds, but every write then fails with ST_EREADONLY.
 * The handle may be used from several threads for reads and puts at once.
 */
int st_store_open(const char *dir, unsigned flags, struct st_store **out);
/* Close the directory descriptors and free; accepts NULL. Its blob writers
 * and any index opened on it must be gone first. */
void st_store_close(struct st_store *s);
/* Override the sync policy for this handle only (DEFAULT: back to the
 * format file's); puts after it follow the new one. Never fails; not
 * while another thread puts on the handle. */
void st_store_set_sync(struct st_store *s, enum st_sync sync);
/* Effective policy of this handle (never DEFAULT). Never fails. */
enum st_sync st_store_sync(const struct st_store *s);
/* Absolute path of the store directory. Lives as long as the handle. */
const char *st_store_path(const struct st_store *s);
/* O_PATH|O_DIRECTORY fd of the store directory, owned by the handle (do
 * not close it). Never fails. */
int st_store_dirfd(const struct st_store *s);
/* True if opened with ST_OPEN_RDONLY. Never fails. */
bool st_store_rdonly(const struct st_store *s);

/* ---------------------------------------------------------- who reads it */

/*
 * A layer is a sandbox's memory, so a store is readable by its owner only,
 * or by one group when initialised shared (docs/security.md, "Who can read a
 * store"). Every file and directory strata creates, in the store or for it
 * (exports, OCI layouts, the mount's log), gets one of these modes exactly,
 * set with fchmod after creation so that no umask changes it. Group members
 * of a shared store read; they never write, except the LMDB lock file,
 * which every LMDB reader writes its reader slot into.
 */
enum st_perm {
	ST_PERM_DIR,     /* a directory: 0700; shared 02750 (new entries get the group) */
	ST_PERM_STAGING, /* STORE/tmp/, puts in progress: 0700; shared 02700 */
	ST_PERM_RO,      /* a finished file (blob, format, export): 0400; shared 0440 */
	ST_PERM_RW,      /* a file strata keeps writing (lazy part, index, log): 0600; shared 0640 */
	ST_PERM_LOCK,    /* the LMDB lock file: 0600; shared 0660 */
};
/* The mode of kind in this store. Never fails. */
mode_t st_store_perm(const struct st_store *s, enum st_perm kind);
/* True if the store was initialised shared; *group (may be NULL) is its
 * group. Never fails. */
bool st_store_shared(const struct st_store *s, gid_t *group);
/*
 * Create directory name in dirfd with mode st_store_perm(s, kind) exactly
 * (kind: ST_PERM_DIR or ST_PERM_STAGING), given to the store's group when
 * shared (for directories outside the store: exports, OCI layouts; inside
 * it the set-group-id parent already does that). Returns 0 when made,
 * -EEXIST (left as it is), other -errno; a directory made but not given its
 * mode is removed again.
 */
int st_store_mkdirat(const struct st_store *s, int dirfd, const char *name, enum st_perm kind);
/* fchmod fd (a file this call's caller just created) to st_store_perm(s,
 * kind). 0 or -errno. */
int st_store_fchmod(const struct st_store *s, int fd, enum st_perm kind);

/* A path in the store that others than the store's readers may read
 * (st_store_perm_check). */
struct st_exposed {
	const char *path; /* relative to the store directory ("." for itself) */
	mode_t mode;      /* its permission bits (07777) as found */
	mode_t want;      /* with the bits the store does not grant removed */
	bool dir;
	bool fixed;       /* ST_PERM_CHECK_FIX: now set to want */
};
enum {
	ST_PERM_CHECK_DIRS = 1u << 0, /* only the directories (and STORE/format): cheap, for doctor */
	ST_PERM_CHECK_FIX = 1u << 1,  /* chmod each exposed path to want (fsck --repair) */
};
/*
 * Walk the store (symlinks are not followed) and call fn once per file or
 * directory that grants more than the store's mode allows: for a private
 * store any group or other bit; for a shared one any other bit, group write
 * (the LMDB lock file excepted), or group bits while owned by another group.
 * fn returning nonzero stops the walk with that value; a subdirectory the
 * caller may not read (EACCES) is skipped. Returns 0, fn's value, or -errno
 * (the store's directory cannot be read, a stat failed). *count (may be NULL)
 * gets the number of exposed paths found.
 */
int st_store_perm_check(struct st_store *s, unsigned flags, int (*fn)(const struct st_exposed *e, void *ctx),
			void *ctx, uint64_t *count);

/* ---------------------------------------------------------------- blobs */

/*
 * Streaming put. new() creates a temp file in STORE/tmp/; write() appends
 * and hashes; commit() finishes:
 *   - if expect is non-NULL and the hash differs: ST_ECORRUPT, nothing kept;
 *   - if a blob with this id exists: dedup (*dedup = true), bytes dropped;
 *   - else fsync per policy, chmod 0400 (0440 shared), link into blobs/ab/<id>, fsync the
 *     directory per policy, remove the temp name.
 * commit() and abort() always free the writer (also on failure); after any
 * failed write() the only valid calls are abort() or commit() (which then
 * fails). No failure leaves a partial blob published; temp files are
 * removed on every path except a crash (st_tmp_sweep removes those).
 * id and dedup may be NULL. A writer belongs to one thread at a time.
 */
struct st_blob_writer;
/* A writer on s (open read-write) with an empty temp file in STORE/tmp/.
 * ST_EREADONLY (handle read-only, or EROFS/EACCES/EPERM), -ENOMEM, -ENOSPC,
 * other -errno: *out untouched, no temp file left. */
int st_blob_writer_new(struct st_store *s, struct st_blob_writer **out);
/* Append len bytes (buffered; large writes go straight to the file) and
 * hash them. ST_EREADONLY, -ENOSPC, -EIO, -ENOMEM: the writer is failed
 * (every later write returns the same code; commit fails with it too). */
int st_blob_writer_write(struct st_blob_writer *w, const void *buf, size_t len);
/* Bytes written so far (including a resumed writer's earlier bytes). Never fails. */
uint64_t st_blob_writer_size(const struct st_blob_writer *w);
/* The id of the bytes written so far; the writer may keep being written
 * (the mount checks a file at each close without finishing it). Never fails. */
void st_blob_writer_digest(const struct st_blob_writer *w, st_id *out);
/* Finish as above. Errors: the writer's write error, ST_ECORRUPT (expect
 * differs), ST_EREADONLY, -ENOSPC, -EIO, other -errno: nothing published,
 * the temp file removed. One exception: with ST_SYNC_FULL, a failed fsync
 * of the blob's directory after the name is linked is returned with the
 * blob published and whole (it may not survive power loss; *id is not
 * written, so do not reference it from a durable index). */
int st_blob_writer_commit(struct st_blob_writer *w, const st_id *expect, st_id *id, bool *dedup);
/* Remove the temp file and free the writer; accepts NULL. Never fails. */
void st_blob_writer_abort(struct st_blob_writer *w);

/*
 * A put that survives interruption: its bytes live in STORE/tmp/part.<name>
 * (name: st_name_valid, e.g. a digest's hex) until commit publishes them
 * or abort removes them. Bytes already there from an earlier suspended
 * writer are hashed again (and handed to prefix(ctx, ...) when not NULL,
 * so a caller can feed its own digest) and st_blob_writer_size says how
 * many; writes continue after them. Only one writer holds a name at a time
 * (another -> -EBUSY). suspend() flushes, closes and keeps the file (on a
 * write error it removes it: what is on disk may differ from what was
 * hashed), and frees the writer. st_tmp_sweep removes parts left longer
 * than its grace period.
 * resume: ST_EREADONLY, -EINVAL (name breaks the rule or is too long),
 * -EBUSY (another writer holds the name), -ENOMEM, -errno reading the part:
 * *out untouched, the part file's bytes kept as they were (prefix may have
 * seen some; an empty part may have been made, which st_tmp_sweep removes). suspend: 0, or the write error (the part is removed: the
 * next resume starts from nothing); the writer is freed either way.
 */
int st_blob_writer_resume(struct st_store *s, const char *name, void (*prefix)(void *ctx, const void *buf, size_t len),
			  void *ctx, struct st_blob_writer **out);
int st_blob_writer_suspend(struct st_blob_writer *w);

/* One-shot put of a buffer: st_blob_writer_new, _write, _commit, with their
 * errors and the state they leave. id/dedup may be NULL. */
int st_blob_put(struct st_store *s, const void *buf, size_t len, st_id *id, bool *dedup);
/* Put everything read from fd (from its current offset to EOF; fd is left
 * at EOF, or where a read failed). expect may be NULL; a mismatch ->
 * ST_ECORRUPT and nothing is kept. If the expected blob already exists,
 * the bytes are only hashed, never written (dedup). Errors and state as
 * the writer's, plus read errors of fd (-EIO, ...): nothing published. */
int st_blob_put_fd(struct st_store *s, int fd, const st_id *expect, st_id *id, bool *dedup);

/* Open a blob O_RDONLY|O_CLOEXEC|O_NOFOLLOW into *fd; the caller closes
 * it. Absent -> -ENOENT, other -errno; *fd untouched. */
int st_blob_open(struct st_store *s, const st_id *id, int *fd);
/* True if the blob is a regular file in the store (does not verify it;
 * false on any error). */
bool st_blob_has(struct st_store *s, const st_id *id);
/* Size in bytes into *size. Absent -> -ENOENT, other -errno; *size untouched. */
int st_blob_size(struct st_store *s, const st_id *id, uint64_t *size);
/* Absolute path "STORE/blobs/ab/<id>" into buf (for mapping directly).
 * -ENAMETOOLONG if it does not fit (buf then holds a cut path). Does not
 * check existence. */
int st_blob_path(const struct st_store *s, const st_id *id, char *buf, size_t len);
/* The same path for the store whose root directory is root (no store open). */
int st_blob_path_at(const char *root, const st_id *id, char *buf, size_t len);
/* Mark the blob as in use now (its mtime): gc keeps blobs younger than its
 * grace period, so an import that matched an unreferenced blob keeps it
 * until it commits. -ENOENT if absent, other -errno; nothing changed then.
 * Works on a read-only handle if the file system lets it. */
int st_blob_touch(struct st_store *s, const st_id *id);
/* The blob file's mtime in ns since the epoch into *mtime_ns. -ENOENT if
 * absent, other -errno; *mtime_ns untouched. */
int st_blob_mtime(struct st_store *s, const st_id *id, int64_t *mtime_ns);
/* Unlink the blob file, then (ST_SYNC_FULL) fsync its directory. The
 * caller (index/gc) is responsible for knowing nothing references it.
 * Errors: ST_EREADONLY (handle read-only, or the file system refuses),
 * -ENOENT (absent), other -errno: the blob stays. A failed directory fsync
 * is returned after the unlink (the blob is gone, maybe not durably). */
int st_blob_del(struct st_store *s, const st_id *id);
/* Re-hash the blob: 0 if it hashes to its name, ST_ECORRUPT if not,
 * -ENOENT if absent, -errno if it cannot be mapped. Changes nothing. */
int st_blob_verify(struct st_store *s, const st_id *id);
/* Hash the whole file behind fd (from offset 0, mapped read-only, whatever
 * fd's offset): its id in *id and the bytes hashed in *size. -errno if it
 * cannot be stat'ed or mapped; *id and *size untouched. */
int st_hash_fd(int fd, st_id *id, uint64_t *size);

/* Called for each blob file with a well-formed name. Return 0 to go on,
 * anything else stops the walk and is returned by st_blob_foreach. */
typedef int (*st_blob_cb)(const st_id *id, uint64_t size, int64_t mtime_ns, void *ctx);
/* Walk blobs/ (blobs put or deleted meanwhile may or may not be seen).
 * 0 after the last, cb's non-zero return, or -errno if blobs/ cannot be
 * read (a fan-out directory deleted meanwhile is skipped). Changes nothing. */
int st_blob_foreach(struct st_store *s, st_blob_cb cb, void *ctx);

/* Remove files (and staging directories) in STORE/tmp/ last modified more
 * than older_than_s seconds ago (crash leftovers). *removed (may be NULL)
 * gets the count. ST_EREADONLY (handle read-only, or the file system
 * refuses), -errno: it stops at the first failure (ENOENT aside: removed
 * by someone else); what it removed before stays removed, *removed untouched. */
int st_tmp_sweep(struct st_store *s, unsigned older_than_s, unsigned *removed);

/* ------------------------------------------------------------- manifests */

/* Limits the parser enforces (docs/formats.md). */
/* The most guest memory a snapshot may have: 4 GiB, what both backends can
 * address (guest addresses fit the 32-bit hypercall register; vmm/layout.c,
 * the process child's own check). A manifest saying more is refused where
 * it is parsed, before any layer is looked at. */
#define ST_MANIFEST_MAX_MEM (4ull << 30)
#define ST_MANIFEST_MAX_LAYERS 65536u
#define ST_MANIFEST_MAX_LABELS 256u
#define ST_MANIFEST_MAX_LABEL_VALUE 4096u
#define ST_MANIFEST_MAX_OBJECT (1u << 20)     /* guest / vcpu JSON text */
/* Ranges per snapshot: the most a capture writes (its range cap, policy
 * range_cap, is at most this) and an ingest may make. */
#define ST_MANIFEST_MAX_RANGES 65536u
/* A whole manifest.json: the largest strata can write, canonically encoded,
 * is 14,283,064 bytes, 13.6 MiB (65,536 ranges and layers with the widest
 * numbers, two 1 MiB objects, 256 labels whose every byte is escaped;
 * tests/store builds it, docs/formats.md); 16 MiB leaves room for
 * whitespace. */
#define ST_MANIFEST_MAX_BYTES (16u << 20)
/* What parsing may allocate beyond the text, whatever its shape: at most
 * ST_MANIFEST_TREE_PER_BYTE per byte plus ST_MANIFEST_TREE_SLACK, and never
 * more than ST_MANIFEST_TREE_MAX (docs/formats.md has the measurements). */
#define ST_MANIFEST_TREE_PER_BYTE 48u
#define ST_MANIFEST_TREE_SLACK (64u << 10)
#define ST_MANIFEST_TREE_MAX (96u << 20)

/* A layer the snapshot uses: a blob of `pages` whole pages. */
struct st_layer_ref {
	st_id id;
	uint64_t pages;
};

/* Guest pages [gpage, gpage + npages) are layer `layer`'s pages
 * [lpage, lpage + npages). Pages in no range read as zero. */
struct st_range {
	uint64_t gpage;
	uint64_t npages;
	uint32_t layer; /* index into st_manifest.layers */
	uint64_t lpage;
};

struct st_label {
	char *key;   /* st_name_valid */
	char *value; /* UTF-8, at most ST_MANIFEST_MAX_LABEL_VALUE bytes */
};

/*
 * A snapshot manifest. The struct is a public data carrier: the VMM fills
 * one (every pointer from malloc, or NULL), st_manifest_free releases it.
 * Valid means: ranges sorted by gpage, disjoint, inside mem_size, each inside
 * its layer, every layer used by a range, no layer listed twice, labels
 * sorted by key without duplicates (st_manifest_validate checks all this).
 */
struct st_manifest {
	uint32_t version;         /* ST_MANIFEST_VERSION_MIN..ST_MANIFEST_VERSION; kept when re-encoded */
	uint64_t mem_size;        /* bytes, a multiple of ST_PAGE_SIZE, <= ST_MANIFEST_MAX_MEM */
	uint32_t nlayers;
	struct st_layer_ref *layers;
	uint64_t nranges;
	struct st_range *ranges;
	bool has_parent;
	st_id parent;
	int64_t created;          /* unix time, nanoseconds */
	uint32_t abi_version;     /* guest ABI version (0: none / not a VMM snapshot) */
	char *guest;              /* JSON object text (entry points...) or NULL */
	char *vcpu;               /* JSON object text, opaque to the store, or NULL */
	size_t nlabels;
	struct st_label *labels;
	/* Private to manifest.c: XXH3-64 of the guest / vcpu text last proven
	 * to be a canonical JSON object (0: none). A memo by content, so
	 * validate and encode skip re-parsing a text they have already
	 * checked, and a replaced text is simply checked again. */
	uint64_t guest_canon, vcpu_canon;
};

/* Allocate an empty manifest (version ST_MANIFEST_VERSION, everything else
 * zero) into *out. -ENOMEM, *out untouched. */
int st_manifest_new(struct st_manifest **out);
/* Free m and everything it points to. Accepts NULL. */
void st_manifest_free(struct st_manifest *m);
/* Deep copy of m (valid or not) into *out. -ENOMEM: *out untouched,
 * nothing left allocated. */
int st_manifest_dup(const struct st_manifest *m, struct st_manifest **out);

/* Check every rule above, changing nothing. -> ST_ELAYOUT / ST_EFORMAT /
 * ST_EVERSION / ST_EBADNAME with why naming the first broken rule, -ENOMEM. */
int st_manifest_validate(const struct st_manifest *m, char *why, size_t whylen);
/*
 * Finish a manifest built in memory: validate it, put its guest / vcpu texts
 * in canonical form and remember that they are, so later validation and
 * encoding (the id) need not parse them again. A parsed manifest is sealed
 * already. Errors as st_manifest_validate, or -ENOMEM. On failure m may
 * already hold its guest text (when vcpu's or a later rule fails), or both
 * texts, in canonical form: the same JSON objects, so the same id; nothing
 * else of m changes.
 */
int st_manifest_seal(struct st_manifest *m, char *why, size_t whylen);
/*
 * Set m's "guest" or "vcpu" text from a jansson object (not consumed): its
 * canonical text, remembered as such, so neither sealing nor the id parses
 * it again. -> 0, -EINVAL (another key), ST_EFORMAT (not an object, too
 * large), -ENOMEM; on failure m is unchanged. On success the old text is
 * freed.
 */
struct json_t;
int st_manifest_set_object(struct st_manifest *m, const char *key, const struct json_t *obj);

/*
 * Parse manifest JSON strictly (docs/formats.md): truncated or malformed JSON,
 * duplicate or unknown keys, wrong types, negative or oversized numbers ->
 * ST_EFORMAT; a version outside ST_MANIFEST_VERSION_MIN..ST_MANIFEST_VERSION -> ST_EVERSION;
 * layout errors -> ST_ELAYOUT; bad label key -> ST_EBADNAME; over
 * ST_MANIFEST_MAX_BYTES or the tree limits -> ST_EFORMAT; -ENOMEM. The
 * result (*out, the caller's to st_manifest_free) is validated and sealed;
 * guest / vcpu are kept as their canonical JSON text. On failure *out is
 * untouched and why names the place.
 */
int st_manifest_parse(const char *json, size_t len, struct st_manifest **out, char *why, size_t whylen);

/*
 * Canonical encoding: compact JSON, keys sorted, no trailing newline. m is
 * validated first (its errors, why says which rule). *json is malloc'd and
 * NUL-terminated; *len excludes the NUL. manifest.json on disk is this
 * plus "\n". -ENOMEM; on failure *json and *len are untouched.
 */
int st_manifest_encode(const struct st_manifest *m, char **json, size_t *len, char *why, size_t whylen);

/* Snapshot id: XXH3-128 of the canonical encoding into *id (validates m:
 * st_manifest_encode's errors, *id untouched). */
int st_manifest_id(const struct st_manifest *m, st_id *id, char *why, size_t whylen);

/* Sum of pages of every layer (bytes = pages * ST_PAGE_SIZE). Never fails. */
uint64_t st_manifest_layer_pages(const struct st_manifest *m);

/* Layer index whose range covers guest page gpage, and the page inside that
 * layer; -ENOENT if the page is a hole (reads as zero; *layer and *lpage
 * untouched). m's ranges must be sorted (a valid manifest). O(log nranges). */
int st_manifest_lookup(const struct st_manifest *m, uint64_t gpage, uint32_t *layer, uint64_t *lpage);

/* --------------------------------------------------------- manifest deltas */

/*
 * A manifest delta (docs/formats.md, "Manifest deltas") is a child
 * snapshot's manifest written against its parent's: the child's own fields,
 * its layers as runs of the parent's layer list plus any new ones, and only
 * the guest pages whose mapping differs from the parent's. It names the
 * snapshot id it stands for, which is still the XXH3-128 of the child's
 * canonical FULL encoding (st_manifest_id): a delta is a way to store and
 * send a manifest, never a new meaning of an id. Only version 2 children
 * are written as deltas; the parent may be any version.
 */
/* Most overrides one delta may list: a child's ranges and the holes
 * between them. */
#define ST_MANIFEST_DELTA_MAX_OVERRIDES (2u * ST_MANIFEST_MAX_RANGES + 1u)

/*
 * The canonical delta of child against parent (both valid; child->parent
 * must be parent_id, the parent's id, which the caller knows and is not
 * checked here against parent's bytes) into *json (malloc'd,
 * NUL-terminated, *len without the NUL). child_id may be NULL (then it is
 * computed). One pair (parent, child) has one delta. Errors: the
 * manifests' validation errors, -EINVAL (child has no parent or another
 * one), ST_EVERSION (child is not version 2), -ENOMEM; *json and *len
 * untouched.
 */
int st_manifest_delta_encode(const struct st_manifest *parent, const st_id *parent_id,
			     const struct st_manifest *child, const st_id *child_id, char **json, size_t *len,
			     char *why, size_t whylen);
/*
 * Read which snapshot a delta stands for (*id) and which parent it needs
 * (*parent), without the parent: parsed under the manifest's size and tree
 * limits, its keys and these two checked, nothing else. 0; ST_EFORMAT (not
 * JSON, not an object, an id missing or malformed), ST_EVERSION (version is
 * not ST_MANIFEST_DELTA_VERSION: not a delta), -ENOMEM; *id and *parent
 * untouched.
 */
int st_manifest_delta_peek(const char *json, size_t len, st_id *id, st_id *parent, char *why, size_t whylen);
/*
 * Rebuild the full manifest a delta stands for from parent (valid, with id
 * parent_id) into *out (st_manifest_free; sealed) and its id into *id (may
 * be NULL). Checked, each with why saying which: the text is a delta
 * (ST_EVERSION), in canonical form (ST_EFORMAT: exactly what
 * st_manifest_delta_encode writes for this parent and result), of this
 * parent (ST_EFORMAT "a delta of X"), every layer run inside the parent's
 * list, every override sorted, disjoint, inside memory and its layer
 * (ST_ELAYOUT), counts under ST_MANIFEST_MAX_LAYERS and
 * ST_MANIFEST_DELTA_MAX_OVERRIDES before anything is allocated for them,
 * pages the child keeps from the parent lying in layers the child lists
 * (ST_ELAYOUT), the result a valid manifest (its validation errors), and
 * the result's canonical encoding hashing to the id the delta claims
 * (ST_ECORRUPT). -ENOMEM. On failure *out and *id are untouched.
 */
int st_manifest_delta_apply(const struct st_manifest *parent, const st_id *parent_id, const char *json, size_t len,
			    struct st_manifest **out, st_id *id, char *why, size_t whylen);

/* ------------------------------------------------- snapshot directories */

/*
 * A snapshot directory is DIR/manifest.json + DIR/layers/<id> (one file per
 * layer, named by its id, exactly pages * ST_PAGE_SIZE bytes).
 */

/* Read and parse DIR/manifest.json (at most ST_MANIFEST_MAX_BYTES) into
 * *out (the caller's to st_manifest_free). Missing directory or file ->
 * -ENOENT / -ENOTDIR; not a regular file (a FIFO, symlink, device node,
 * socket or directory: never opened blocking, never followed), too large or
 * holding a NUL -> ST_EFORMAT; -ENOMEM, other -errno; other errors as
 * st_manifest_parse.
 * Does not look at layers. On failure *out is untouched, why says what. */
int st_snapdir_read(const char *dir, struct st_manifest **out, char *why, size_t whylen);
/* DIR/manifest.json's bytes, unparsed, into *text (malloc'd,
 * NUL-terminated; at most ST_MANIFEST_MAX_BYTES) and *len: for a caller
 * that parses them its own way. Errors as st_snapdir_read's before the
 * parse; *text and *len untouched. */
int st_snapdir_manifest_text(const char *dir, char **text, size_t *len, char *why, size_t whylen);

/* Open DIR/layers/<id> read-only into *fd: a regular file, opened without
 * blocking (a FIFO there is refused, not waited on) and without following a
 * link (layers/ and the file itself; DIR is followed as any path the user
 * names). The caller closes *fd. -ENOENT (missing); ST_ELAYOUT (a FIFO,
 * symlink, device node, socket or directory there, or a layers/ that is not
 * a directory); other -errno: *fd untouched. Does not check the layer's
 * size or bytes (st_snapdir_verify does). */
int st_snapdir_layer_open(const char *dir, const st_id *id, int *fd);
/* The same, with why saying what is wrong ("layers/<id>: not a regular
 * file (a FIFO)"); nothing is written to why for -ENOENT. */
int st_snapdir_layer_open_why(const char *dir, const st_id *id, int *fd, char *why, size_t whylen);

/* Check every layer of m in DIR: present (-ENOENT, why names it), size ==
 * pages * ST_PAGE_SIZE (ST_ELAYOUT: "layer too short/long", or not a
 * regular file), and bytes hash to the name (ST_ECORRUPT); -errno if one
 * cannot be opened or mapped. Stops at the first bad layer; changes
 * nothing. */
int st_snapdir_verify(const char *dir, const struct st_manifest *m, char *why, size_t whylen);

/*
 * Write snapshot directory dir (must not exist; its parent must) from m and
 * the store's blobs: builds a sibling temp directory, copies (reflinks when
 * the filesystem can) each layer, writes the canonical manifest.json,
 * fsyncs files and directories (ST_SYNC_FULL), then renames it into place.
 * It is as private as the store: directories ST_PERM_DIR (in the store's
 * group when shared), files ST_PERM_RO, whatever the umask.
 * A temp directory a killed export left beside dir is removed first.
 * Errors: m's validation errors, -EEXIST (dir exists), -EINVAL (dir's last
 * component is not a name), -ENOENT (parent missing, or a missing blob:
 * why names it), ST_ECORRUPT (a blob's size differs from the manifest),
 * -ENOSPC, -EIO, -ENOMEM, other -errno; why always says which. On failure
 * nothing is left behind (the temp directory is removed), except: a
 * failed sync of dir's parent after the rename is returned with dir in
 * place and complete.
 */
int st_snapdir_export(struct st_store *s, const struct st_manifest *m, const char *dir, char *why, size_t whylen);

/* ------------------------------------- snapshot directories opened to map */

/*
 * Opening a snapshot directory to map its layers (a VMM restoring from it):
 * the manifest parsed and checked, one open, size-checked (and with
 * ST_SNAPDIR_VERIFY hashed) descriptor per layer. Where the layers come from:
 * - On a strata mount (statfs says FUSE and /proc/self/mountinfo says
 *   strata's, store/mountabi.h), each layer is its backing blob in the store
 *   behind the mount, named by the mount's user.strata.restore answer (one
 *   request) or user.strata.blob_path xattrs, and used only if it is exactly
 *   that store's blob of the layer's size; never trusted elsewhere
 *   (docs/security.md). Such a layer needs no daemon once opened.
 * - Any other layer (a plain directory's, or a mount's whose blob cannot be
 *   opened) is copied once into a sealed memfd, so truncating the user's
 *   file or killing a daemon cannot fault a mapping of it; unless
 *   ST_SNAPDIR_MAP_FILES or ST_SNAPDIR_VIA_FUSE ask for the file itself.
 * docs/restore-from-path.md measures each choice.
 */
enum {
	ST_SNAPDIR_VERIFY = 1u << 0,    /* hash every layer before it is handed out */
	ST_SNAPDIR_VIA_FUSE = 1u << 1,  /* on a strata mount, the FUSE files, not the backing blobs */
	ST_SNAPDIR_MAP_FILES = 1u << 2, /* plain directory: its files as they are (the caller promises
					 * they are never truncated), not private copies */
};

/*
 * What opens share: parsed manifests (by the hash of their bytes: never
 * stale), private copies of plain-directory layers (reused while the file
 * they came from has the same id, device, inode, size, mtime and ctime), and
 * the last "is this a strata mount" answer (kept until the mount table
 * changes; it holds /proc/self/mountinfo open). The caller creates it with
 * its limits, passes it to st_snapdir_open, and frees it after the last open
 * that used it returns (handles and fds handed out do not need it). Thread
 * safe: one internal lock per cache. A cache of 0 entries keeps nothing.
 */
struct st_snapcache;
#define ST_SNAPCACHE_MANIFESTS 8u            /* parsed manifests kept */
#define ST_SNAPCACHE_COPIES 32u              /* private copies kept */
#define ST_SNAPCACHE_COPY_BYTES (256ull << 20) /* and their bytes in all (docs/restore-from-path.md) */
struct st_snapcache_limits {
	unsigned manifests;
	unsigned copies;
	uint64_t copy_bytes; /* a layer larger than this is never kept */
};
/* A cache with limits lim (NULL: the ST_SNAPCACHE_* defaults) into *out;
 * it keeps nothing yet. -ENOMEM; *out untouched on failure. */
int st_snapcache_new(const struct st_snapcache_limits *lim, struct st_snapcache **out);
/* Forget everything kept (memfds are closed; mappings and fds already handed
 * out stay valid). Accepts NULL. */
void st_snapcache_drop(struct st_snapcache *c);
/* Drop and free. Accepts NULL. No st_snapdir_open with c may be running. */
void st_snapcache_free(struct st_snapcache *c);

/*
 * Open snapshot directory path (ST_SNAPDIR_* flags; c may be NULL: nothing
 * is kept or reused). On success *out holds the manifest and one fd per
 * layer; the directory may change or go afterwards without affecting them.
 * On failure nothing is left open and why says what, with the path:
 * -ENOENT (no such path, no manifest.json, a missing layer), -ENOTDIR,
 * -ENOTCONN (a strata mount whose daemon is gone), -ENOMEM, other -errno,
 * or ST_EFORMAT / ST_EVERSION / ST_ELAYOUT / ST_EBADNAME (the manifest),
 * ST_ELAYOUT (a layer of the wrong size or type, or one that shrank while
 * copied), ST_ECORRUPT (a layer that does not hash to its id).
 */
struct st_snapdir;
int st_snapdir_open(const char *path, unsigned flags, struct st_snapcache *c, struct st_snapdir **out, char *why,
		    size_t whylen);
/* Close every layer fd and free the handle (descriptors duplicated from
 * it stay open). Accepts NULL. No other thread may be using d. */
void st_snapdir_close(struct st_snapdir *d);
/* The manifest; lives as long as the handle. Never fails. */
const struct st_manifest *st_snapdir_manifest(const struct st_snapdir *d);
/* A new descriptor (O_CLOEXEC, the caller closes it) for the layer with
 * this id into *fd: -ENOENT if the manifest has none, -EMFILE and other
 * -errno of dup; *fd untouched. Thread safe. */
int st_snapdir_layer_dup(const struct st_snapdir *d, const st_id *id, int *fd);
/* Layers opened through their backing blob; whether path is on a strata
 * mount. Never fail. */
unsigned st_snapdir_direct_layers(const struct st_snapdir *d);
bool st_snapdir_on_mount(const struct st_snapdir *d);

/* ---------------------------------------------------------------- ingest */

struct st_ingest_stats {
	uint64_t pages;          /* pages in the image */
	uint64_t pages_zero;     /* all-zero pages (holes) */
	uint64_t pages_same;     /* non-zero pages equal to the parent's */
	uint64_t pages_stored;   /* pages written to the new layer */
	uint64_t bytes_added;    /* bytes the store grew by (0 on a dedup hit) */
	bool layer_dedup;        /* the new layer already existed */
};

/*
 * Build a snapshot from a raw memory image (size: a multiple of
 * ST_PAGE_SIZE, at most ST_MANIFEST_MAX_MEM; otherwise -EINVAL). Pages equal to
 * the parent's keep pointing at the parent's layers; changed non-zero pages
 * go, in guest order, into one new layer blob put into s (none if nothing
 * changed); zero pages are holes. Ranges are merged where adjacent. The
 * parent (may be NULL) must be valid and its layers present in s. The result
 * has parent = id of parent, created = now, no guest/vcpu/labels; it is
 * valid, and not committed to any index (the caller does that). *out is
 * the caller's (st_manifest_free). stats may be NULL.
 * Errors: -EINVAL (size), the parent's validation errors, -ENOENT (a
 * parent layer missing from s), ST_ECORRUPT (one of another size), ST_EREADONLY, -ENOSPC, -EIO, -ENOMEM,
 * other -errno; *out and *stats untouched. The new layer blob is put
 * before the manifest is built: a failure after that (out of memory)
 * leaves the blob in s, whole and unreferenced (ix_gc removes it after
 * its grace period); any earlier failure leaves nothing.
 */
int st_ingest_image(struct st_store *s, const void *image, uint64_t size, const struct st_manifest *parent,
		    struct st_manifest **out, struct st_ingest_stats *stats);

/* Same as st_ingest_image on the contents of a file (mapped read-only),
 * with its errors; also -ENOENT and other -errno opening or mapping path,
 * -EINVAL (not a regular file, or a size not a multiple of ST_PAGE_SIZE). */
int st_ingest_file(struct st_store *s, const char *path, const struct st_manifest *parent,
		   struct st_manifest **out, struct st_ingest_stats *stats);

/* ------------------------------------------------- OCI (store/oci.c, sha256.c) */

/*
 * Snapshots as OCI artifacts (docs/oci.md): one OCI image manifest per
 * snapshot, artifactType ST_OCI_ARTIFACT_TYPE; its config is the canonical
 * strata manifest (ST_OCI_CONFIG_TYPE), one OCI layer per strata layer
 * (ST_OCI_LAYER_TYPE); each descriptor carries the blob's XXH3-128 id in
 * the ST_OCI_ANN_ID annotation; "subject" names the parent's OCI manifest.
 */
#define ST_OCI_ARTIFACT_TYPE "application/vnd.strata.snapshot.v1"
#define ST_OCI_CONFIG_TYPE "application/vnd.strata.manifest.v1+json"
#define ST_OCI_LAYER_TYPE "application/vnd.strata.layer.v1"
/* A layer's chunk index (index/lazy.h), listed after the layers. */
#define ST_OCI_CHUNKS_TYPE "application/vnd.strata.chunks.v1"
#define ST_OCI_MANIFEST_TYPE "application/vnd.oci.image.manifest.v1+json"
#define ST_OCI_INDEX_TYPE "application/vnd.oci.image.index.v1+json"
#define ST_OCI_ANN_ID "dev.strata.id"
#define ST_OCI_ANN_CREATED "org.opencontainers.image.created"
#define ST_OCI_ANN_REF "org.opencontainers.image.ref.name"
#define ST_OCI_MANIFEST_MAX (4u << 20)  /* an OCI manifest or index.json, as registries limit them */

#define ST_SHA256_LEN 32
#define ST_DIGEST_LEN (7 + 64)          /* "sha256:" + 64 lowercase hex */

/* Streaming SHA-256 (libcrypto). new: a state in *out, or -ENOMEM with *out
 * untouched. reset, update and final never fail; final writes the digest
 * and resets the state. free accepts NULL. hash: one buffer's digest,
 * never fails. */
struct st_sha256;
int st_sha256_new(struct st_sha256 **out);
void st_sha256_reset(struct st_sha256 *h);
void st_sha256_update(struct st_sha256 *h, const void *buf, size_t len);
void st_sha256_final(struct st_sha256 *h, uint8_t out[ST_SHA256_LEN]);
void st_sha256_free(struct st_sha256 *h);
void st_sha256_hash(const void *buf, size_t len, uint8_t out[ST_SHA256_LEN]);
/* base64 s (standard alphabet, padding optional) decoded into *out
 * (malloc'd, NUL-terminated; *len without the NUL). -EINVAL when s is not
 * base64, -ENOMEM: *out and *len untouched. */
int st_base64_decode(const char *s, char **out, size_t *len);
/* "sha256:<64 lowercase hex>" and back. format never fails; parse of
 * anything else (NULL, uppercase, another algorithm, another length) ->
 * ST_EBADID with out untouched. */
void st_digest_format(const uint8_t sha[ST_SHA256_LEN], char out[ST_DIGEST_LEN + 1]);
int st_digest_parse(const char *s, uint8_t out[ST_SHA256_LEN]);

/* An OCI descriptor of a strata blob: digest, size and (has_id) XXH3-128 id. */
struct st_oci_desc {
	uint8_t sha256[ST_SHA256_LEN];
	uint64_t size;
	bool has_id;
	st_id id;
};

/* A snapshot's OCI manifest. */
struct st_oci_manifest {
	struct st_oci_desc config;   /* the canonical strata manifest; id = snapshot id */
	uint32_t nlayers;
	struct st_oci_desc *layers;  /* in the strata manifest's layer order */
	/* 0 or nlayers chunk indexes, chunks[i] of layers[i] (ST_OCI_CHUNKS_TYPE
	 * descriptors after the layers; the allocation is layers'). */
	uint32_t nchunks;
	struct st_oci_desc *chunks;
	bool has_subject;
	struct st_oci_desc subject;  /* the parent's OCI manifest (no id) */
	/* The manifest's annotations (encode only; a parse leaves them 0):
	 * org.opencontainers.image.created from created (the snapshot's
	 * capture time, unix ns; 0: none), then each "KEY=VALUE" of the
	 * NULL-terminated extra (may be NULL; a KEY given twice: the last). */
	int64_t created;
	const char *const *extra;
};
/* Free om and its arrays (one allocation: layers). Accepts NULL. */
void st_oci_manifest_free(struct st_oci_manifest *om);

/* Compact JSON with sorted keys (so equal content gives an equal digest).
 * *json malloc'd, NUL-terminated, *len without the NUL. -EINVAL (an extra
 * annotation that is not KEY=VALUE, or not UTF-8), -ENOMEM: *json and
 * *len untouched. */
int st_oci_manifest_encode(const struct st_oci_manifest *om, char **json, size_t *len);

/*
 * Parse an OCI manifest strictly enough to trust it as a strata snapshot:
 * schemaVersion 2, an image manifest, artifactType and config media type
 * ours (ST_EFORMAT "artifact type X is not a strata snapshot" otherwise),
 * every layer ours with a valid digest, size and id annotation, at most
 * ST_MANIFEST_MAX_LAYERS layers, at most ST_OCI_MANIFEST_MAX bytes.
 * Unknown keys are ignored (OCI lets writers add them). *out malloc'd
 * (st_oci_manifest_free). ST_EFORMAT (why says what), -ENOMEM: *out untouched.
 */
int st_oci_manifest_parse(const char *json, size_t len, struct st_oci_manifest **out, char *why, size_t whylen);

/* Check the strata manifest m (parsed from config bytes) against om: same
 * layers in the same order with sizes pages * ST_PAGE_SIZE, and om's
 * config id equal to m's id. ST_EFORMAT with why naming the difference, or
 * m's encoding errors. Changes nothing. */
int st_oci_manifest_check(const struct st_oci_manifest *om, const struct st_manifest *m, char *why, size_t whylen);

/* One entry of an OCI layout's index.json. */
struct st_oci_ref {
	uint8_t sha256[ST_SHA256_LEN];
	uint64_t size;
	char *name;  /* org.opencontainers.image.ref.name, or NULL */
	bool ours;   /* artifactType (when present) is ST_OCI_ARTIFACT_TYPE */
};
/* Free n refs and the array. Accepts NULL. */
void st_oci_refs_free(struct st_oci_ref *refs, size_t n);
/* index.json: encode from refs (*json malloc'd; -ENOMEM); parse into *refs
 * (malloc'd array of *n, st_oci_refs_free; ST_EFORMAT with why, -ENOMEM).
 * On failure the out-parameters are untouched. */
int st_oci_index_encode(const struct st_oci_ref *refs, size_t n, char **json, size_t *len);
int st_oci_index_parse(const char *json, size_t len, struct st_oci_ref **refs, size_t *n, char *why, size_t whylen);

/* ==== working-set records (store/workingset.c; docs/formats.md "working-set records") ==== */
/*
 * The layer pages a sandbox restored from a snapshot touched before its
 * first call returned, per layer, as a small blob of its own linked to the
 * snapshot (index: ix_ws_*). Untrusted when pulled: st_ws_parse checks the
 * format's every rule, st_ws_check it against the snapshot.
 */
#define ST_WS_VERSION 1
#define ST_WS_MAX_LAYERS 65536u
#define ST_WS_MAX_RUNS (1u << 21)  /* 16 MiB of runs: a record is at most ~18 MiB */
#define ST_WS_MEDIA_TYPE "application/vnd.strata.workingset.v1"   /* the OCI artifact type */
#define ST_WS_LAYER_TYPE "application/vnd.strata.workingset.record.v1" /* the record blob in it */

/* Pages [lpage, lpage + npages) of a layer (or, given to st_ws_build, of guest memory). */
struct st_ws_run {
	uint64_t lpage, npages;
};
struct st_ws_layer {
	st_id id;
	uint32_t nruns;  /* its runs are the next nruns of st_ws.runs */
};
struct st_ws {
	st_id snapshot;             /* the snapshot it was recorded on */
	uint32_t nlayers;           /* ids strictly ascending, each with >= 1 run */
	struct st_ws_layer *layers;
	uint64_t nruns;             /* per layer ascending, disjoint, merged */
	struct st_ws_run *runs;
	uint64_t pages;             /* sum of npages */
};
/* Free; accepts NULL. */
void st_ws_free(struct st_ws *ws);
/* From touched guest pages (runs ascending by guest page, as a page scan
 * gives them) through m's ranges (m valid): pages in no range (zero pages)
 * are not part of it. mid is m's id. *out the caller's (st_ws_free).
 * -ENOMEM, -E2BIG (over ST_WS_MAX_RUNS): *out untouched. */
int st_ws_build(const struct st_manifest *m, const st_id *mid, const struct st_ws_run *gruns, size_t n,
		struct st_ws **out);
/* Bytes of format version 1 (*buf malloc'd, *len). ST_EFORMAT (why: the
 * rule ws breaks), -ENOMEM: *buf and *len untouched. */
int st_ws_encode(const struct st_ws *ws, void **buf, size_t *len, char *why, size_t whylen);
/* Parse and check every rule into *out (st_ws_free); the length is checked
 * against the counts before anything is allocated. ST_EFORMAT, ST_EVERSION
 * (why says which), -ENOMEM: *out untouched. */
int st_ws_parse(const void *buf, size_t len, struct st_ws **out, char *why, size_t whylen);
/* Does ws belong to snapshot m (id mid): recorded on it, naming only its
 * layers, within their sizes? 0, ST_EFORMAT (another snapshot),
 * ST_ELAYOUT (why says which layer). Changes nothing. */
int st_ws_check(const struct st_ws *ws, const struct st_manifest *m, const st_id *mid, char *why, size_t whylen);

#endif
