/* mountabi.h: not installed: shared by store and fs: the contract between a strata mount and its readers (how a mount is recognised, its xattrs, the restore answer). */
#ifndef STRATA_STORE_MOUNTABI_H
#define STRATA_STORE_MOUNTABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/*
 * One definition that both sides include: fs/ (the daemon that answers) and
 * whoever opens a snapshot directory on a mount (store/, for the VMM).
 * docs/fs.md describes the xattrs, docs/security.md when a reader may trust
 * them (only on a strata mount, only for paths in the store behind it).
 */

/* statfs(2) f_type of every FUSE filesystem (linux/magic.h FUSE_SUPER_MAGIC). */
#define ST_MOUNT_FUSE_MAGIC 0x65735546
/* A strata mount's /proc/self/mountinfo entry: fstype "fuse." ST_MOUNT_SUBTYPE,
 * source ST_MOUNT_SOURCE followed by the store's absolute path. */
#define ST_MOUNT_SUBTYPE "strata"
#define ST_MOUNT_FSTYPE "fuse." ST_MOUNT_SUBTYPE
#define ST_MOUNT_SOURCE "strata:"

/* Every strata xattr starts so; each is computed, never stored. */
#define ST_XATTR_PREFIX "user.strata."
/* The id of a snapshot directory, manifest, memory file or blob (32 hex chars). */
#define ST_XATTR_ID ST_XATTR_PREFIX "id"
/* On a blob: the absolute path of its backing file in the store. */
#define ST_XATTR_BLOB_PATH ST_XATTR_PREFIX "blob_path"
/* On a committed snapshot directory, not listed (copies do not carry it):
 * the restore answer below. */
#define ST_XATTR_RESTORE ST_XATTR_PREFIX "restore"
/* The largest value Linux passes (XATTR_SIZE_MAX): a longer answer is E2BIG. */
#define ST_XATTR_VALUE_MAX 65536u

/*
 * The restore answer: everything a reader needs to open a snapshot
 * directory, in one request.
 *
 *   answer  = version NUL manifest NUL ( entry NUL ){one per layer, manifest order}
 *   version = ST_RESTORE_VERSION in decimal ("1")
 *   manifest= manifest.json's bytes, exactly as the directory serves them
 *   entry   = kind byte, then that kind's payload (no NUL in either)
 *
 * Kinds (a reader treats a kind it does not know as "read this directory's
 * files instead", so a new kind needs no new version):
 *   ST_RESTORE_BLOB  payload: the absolute path of the layer's complete
 *                    backing blob in the store behind the mount.
 *   ST_RESTORE_FILE  payload: none. The layer has no complete backing blob
 *                    (a lazy layer, docs/lazy.md): map this directory's
 *                    layers/<id> file itself; its reads and page faults go
 *                    through the mount, which fetches the chunks.
 * A change that an older reader would misread takes a new version; a reader
 * refuses versions it does not know (and reads the files).
 */
#define ST_RESTORE_VERSION 1u
enum st_restore_kind {
	ST_RESTORE_BLOB = 'b',
	ST_RESTORE_FILE = 'f',
};

/*
 * Encoder. The value is built in place; with buf NULL (or size 0) only its
 * length is counted, the way getxattr(2) asks for a size first:
 *   st_restore_enc_begin(&e, buf, size, raw, rawlen);
 *   for each layer: st_restore_enc_layer(&e, ST_RESTORE_BLOB, path);
 *   n = st_restore_enc_end(&e);
 * enc_end returns the answer's length, -E2BIG past ST_XATTR_VALUE_MAX, or
 * -ERANGE if buf was given and is too small. Nothing fails before enc_end.
 */
struct st_restore_enc {
	char *buf;
	size_t size;
	size_t len; /* the answer's length so far */
};
void st_restore_enc_begin(struct st_restore_enc *e, char *buf, size_t size, const char *manifest, size_t mlen);
void st_restore_enc_layer(struct st_restore_enc *e, char kind, const char *payload);
int st_restore_enc_end(const struct st_restore_enc *e);

/* One decoded entry; payload points into the decoded buffer (NUL-ended). */
struct st_restore_layer {
	char kind;
	const char *payload;
	size_t len;
};

/* A decoded answer; points into the decoded buffer, which must outlive it. */
struct st_restore_answer {
	unsigned version;
	const char *manifest; /* manifest.json's bytes (without NUL: they end at the first) */
	size_t manifest_len;
	uint32_t nlayers;     /* entries that follow the manifest */
	const char *next;     /* private: the next entry */
	const char *end;
};

/*
 * Decode buf[0, n): 0 and *out, or ST_EFORMAT if it is not an answer in a
 * version this code reads (no version, an unknown one, a missing NUL, an
 * empty entry, bytes after the last entry). Never allocates; buf need not be
 * NUL-terminated. What the entries name is the caller's to check.
 */
int st_restore_decode(const char *buf, size_t n, struct st_restore_answer *out);
/* The next entry, in manifest order: true and *out, or false after the last. */
bool st_restore_answer_next(struct st_restore_answer *a, struct st_restore_layer *out);

/*
 * Read an answer from a mount of store (an absolute path) the way
 * st_snapdir_open does: 1 and the parsed manifest in *out (the caller frees
 * it) if it decodes, the manifest parses (c: the cache of parsed
 * manifests, may be NULL) and there is one entry per layer, each of kind
 * ST_RESTORE_BLOB naming exactly that store's blob of the layer; 0 if not
 * (read the files instead); -ENOMEM.
 */
int st_restore_answer_read(const char *buf, size_t n, const char *store, struct st_snapcache *c,
			   struct st_manifest **out);

/*
 * Search /proc/self/mountinfo text for the strata mount of device
 * major:minor: 1 and its store's root (absolute, unescaped) in store, or 0
 * (no such line, not ST_MOUNT_FSTYPE, a source that is not
 * ST_MOUNT_SOURCE "/..." or does not fit in size).
 */
int st_mountinfo_store(const char *text, size_t len, unsigned major, unsigned minor, char *store, size_t size);

#endif
