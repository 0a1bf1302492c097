/* lazy.h: lazy layers: snapshots pulled without their pages, chunks fetched by HTTP Range on demand and verified against a chunk index. */
#ifndef STRATA_INDEX_LAZY_H
#define STRATA_INDEX_LAZY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "index/index.h"

/*
 * Caveats (docs/lazy.md):
 * - A struct ix_lazy serves one open index from any number of threads:
 *   fetches of different chunks run in parallel, a chunk wanted by several
 *   threads at once is fetched by one while the others wait for it.
 *   Processes sharing a store see each other's chunks (the map file is
 *   read again before a chunk is fetched), but two of them asking for the
 *   same chunk at the same moment may both fetch it (the bytes are the
 *   same, verified, and written to the same place).
 * - It keeps, per lazy layer it has touched, the chunk index (16 bytes per
 *   chunk), a present map (1 byte per chunk) and two open files, until
 *   ix_lazy_close; and one idle HTTP client per registry repository per
 *   thread that fetched.
 * - It reads no environment variable and prints nothing: credentials come
 *   from the caller's callback, messages (which chunk, which registry) go
 *   to its log callback and to the why buffers.
 * - A fetch blocks its thread for at most the bounded retries with backoff
 *   (ix_lazy_opts), then fails: a lazy layer never hangs a reader.
 */

/* ------------------------------------------------------- chunk indexes */

/*
 * A chunk index lists the XXH3-128 of each fixed-size chunk of one layer,
 * so any chunk can be checked on its own (the eStargz TOC pattern). It is
 * a blob of its own, pushed beside the layer and named in the OCI manifest
 * (ST_OCI_CHUNKS_TYPE), so the manifest's digest covers it. Bytes
 * (little-endian):
 *   0  8  magic "STRCHK1\n"
 *   8  16 the layer's id
 *   24 8  the layer's size in bytes (a multiple of 4096, at least 4096)
 *   32 4  chunk size (a power of two, IX_CHUNK_MIN..IX_CHUNK_MAX)
 *   36 4  zero
 *   40    one 16-byte id per chunk, ceil(size / chunk size) of them
 * Nothing may follow. The last chunk may be short.
 */
#define IX_CHUNK_MIN (4u << 10)
#define IX_CHUNK_MAX (16u << 20)
/* What push writes (docs/lazy.md has the measurement behind it). */
#define IX_CHUNK_DEFAULT (64u << 10)
#define IX_CHUNKS_HEADER 40u

struct ix_chunks {
	st_id layer;
	uint64_t size;         /* the layer's bytes */
	uint32_t chunk_size;
	uint64_t n;            /* chunks */
	st_id *hash;           /* n ids */
};
/* Chunk i's offset and length within the layer. */
static inline uint64_t ix_chunk_off(const struct ix_chunks *c, uint64_t i)
{
	return i * c->chunk_size;
}
static inline uint64_t ix_chunk_len(const struct ix_chunks *c, uint64_t i)
{
	uint64_t off = i * c->chunk_size;
	return c->size - off < c->chunk_size ? c->size - off : c->chunk_size;
}
void ix_chunks_free(struct ix_chunks *c);
/* Build the index of size bytes read from fd (from offset 0) for layer. */
int ix_chunks_build(int fd, const st_id *layer, uint64_t size, uint32_t chunk_size, struct ix_chunks **out);
/* The bytes above (malloc'd). */
int ix_chunks_encode(const struct ix_chunks *c, uint8_t **buf, size_t *len);
/* Parse strictly: wrong magic, size or chunk size rules, a length that is
 * not exactly the header and the chunks' ids -> ST_EFORMAT (why says). */
int ix_chunks_parse(const void *buf, size_t len, struct ix_chunks **out, char *why, size_t whylen);

/* --------------------------------------------------------- lazy layers */

/*
 * A lazy layer is a snapshot's layer whose blob file is not (yet) in the
 * store: `strata pull --lazy` records the snapshot with, for each layer the
 * store lacks, a record in the index's `lazy` table (its size, sha256,
 * chunk index and the registry repository it comes from) and two files:
 * STORE/lazy/<id>.part, sparse and full-sized, and STORE/lazy/<id>.map,
 * one byte per chunk, 1 once the chunk's bytes are in .part, verified and
 * (under `sync full`) on disk. When every chunk is there, the file is
 * hashed whole and published as the layer's blob (ix_lazy_complete): from
 * then on it is an ordinary layer.
 */

/* Errors (the index's range, -1160..-1169). */
enum {
	IX_ELAZY_BADCHUNK = -1160,  /* a fetched chunk does not match the chunk index */
	IX_ELAZY_OFFLINE = -1161,   /* the registry could not be reached within the retries */
	IX_ELAZY_NOINDEX = -1162,   /* the artifact carries no chunk index (pushed by an older strata) */
};
/* st_strerror under the lazy layers' name. */
const char *ix_lazy_strerror(int err);

struct ix_lazy;

struct ix_lazy_opts {
	const char *cacert;     /* CA bundle for HTTPS registries, or NULL */
	/* Roots of per-registry certificate directories, one directory for
	 * every registry instead, no certificate checks (ix_registry_opts). */
	const char *const *certs_d;
	const char *cert_dir;
	bool tls_noverify;
	/* Credentials for host (malloc'd strings, or NULLs); NULL: anonymous. */
	int (*creds)(void *ctx, const char *host, char **user, char **pass);
	void *creds_ctx;
	/* Attempts per Range request before a read fails (0: IX_LAZY_ATTEMPTS),
	 * waiting backoff_ms, then twice that... between them (0: IX_LAZY_BACKOFF_MS). */
	unsigned attempts, backoff_ms;
	/* Longest Range request made when merging adjacent chunks (0: IX_LAZY_SPAN). */
	uint64_t span_max;
	/* A Range request moving less than low_speed bytes a second for 10 s
	 * fails (0: IX_REGISTRY_LOW_SPEED), and is retried as a network error;
	 * none starts after deadline_ns (CLOCK_MONOTONIC ns; 0: none), one
	 * under way then ends (IX_EDEADLINE, not retried): a pull's bound. */
	unsigned low_speed;
	uint64_t deadline_ns;
	/* One line per refused chunk, failed fetch or completed layer (may be NULL). */
	void (*log)(void *ctx, const char *msg);
	void *log_ctx;
};
#define IX_LAZY_ATTEMPTS 4
#define IX_LAZY_BACKOFF_MS 100
#define IX_LAZY_SPAN (8u << 20)

/* Open over ix (which must outlive it); opts is copied, its strings must
 * outlive the handle. */
int ix_lazy_open(struct ix *ix, const struct ix_lazy_opts *opts, struct ix_lazy **out);
/* Accepts NULL. No fetch may be running. */
void ix_lazy_close(struct ix_lazy *lz);

struct ix_lazy_info {
	uint64_t size;          /* the layer's bytes */
	uint32_t chunk_size;
	uint64_t chunks;        /* chunks in the layer */
	uint64_t present;       /* chunks in the store now */
	char origin[IX_ORIGIN_MAX + 1]; /* "host[:port]/repo" */
};
/* 1 and *out if layer is lazy (recorded, not yet published), 0 if not
 * (an ordinary blob, or unknown). Any thread. */
int ix_lazy_layer_info(struct ix_lazy *lz, const st_id *layer, struct ix_lazy_info *out);
/* Which chunks are present: map[i] = 1 or 0, for i < n (n = info.chunks). */
int ix_lazy_present(struct ix_lazy *lz, const st_id *layer, uint8_t *map, uint64_t n);
/* The same for chunks [first, first + n) (those past the last read as
 * absent), looking again in the .map for those absent here: another
 * process sharing the store (a prefetch) may have brought them in. */
int ix_lazy_present_at(struct ix_lazy *lz, const st_id *layer, uint64_t first, uint8_t *map, uint64_t n);

/* A byte range of a layer. */
struct ix_lazy_range {
	uint64_t off, len;
};
/*
 * Make bytes [off, off + len) of each of ranges present in the store: the
 * chunks they touch that are missing are fetched, runs of adjacent missing
 * chunks merged into one Range request (up to span_max bytes), each chunk
 * verified against the chunk index before it is written and marked
 * present. Chunks another thread is fetching are waited for. Ranges may
 * overlap and come in any order; past the end they are cut. 0 when all are
 * present; IX_ELAZY_BADCHUNK (nothing of that chunk is kept; why names the
 * chunk and the registry), IX_ELAZY_OFFLINE, or -errno otherwise. A layer
 * that is not lazy -> 0 (its blob holds every byte).
 */
int ix_lazy_fetch(struct ix_lazy *lz, const st_id *layer, const struct ix_lazy_range *ranges, size_t n, char *why,
		  size_t whylen);
/* A read-only fd of the layer's partial file (bytes of present chunks are
 * final; others read as zero). -ENOENT if the layer is not lazy. */
int ix_lazy_fd(struct ix_lazy *lz, const st_id *layer, int *fd);
/*
 * Fetch every missing chunk, hash the whole file against the layer's id,
 * publish it as the layer's blob and drop the lazy record and files. 0
 * also if the layer was not lazy. Readers holding the partial file keep
 * reading the same bytes.
 */
int ix_lazy_complete(struct ix_lazy *lz, const st_id *layer, char *why, size_t whylen);

struct ix_lazy_stats {
	uint64_t requests;      /* Range requests made (retries included) */
	uint64_t bytes;         /* chunk bytes received */
	uint64_t chunks;        /* chunks verified and stored */
	uint64_t waits;         /* times a thread waited for another's fetch of a chunk */
	uint64_t bad_chunks;    /* chunks refused */
	uint64_t retries;       /* requests repeated after a network error */
};
void ix_lazy_stats_get(struct ix_lazy *lz, struct ix_lazy_stats *out);

/*
 * Re-hash every chunk of layer its map marks present, as it is in .part,
 * against the layer's chunk index (XXH3-128 ids): a partial file that rotted
 * after its chunks were fetched and checked. bad is called for each that
 * does not match (or whose bytes are short). 0 with *out filled,
 * IX_ENOTFOUND if layer is not lazy, the first error of bad, or -errno.
 * It reads the files fresh, whatever a handle holds.
 */
struct ix_lazy_bad {
	uint64_t chunk;         /* its number in the chunk index */
	uint64_t off, len;      /* its bytes in the layer */
	bool dropped;           /* (fsck --repair) its mark is cleared: fetched again when read */
};
struct ix_lazy_check {
	uint64_t chunks;        /* chunks in the layer */
	uint64_t present;       /* chunks marked present, each re-hashed */
	uint64_t bad;           /* of them, not matching the chunk index */
	uint64_t bytes;         /* bytes hashed */
	char origin[IX_ORIGIN_MAX + 8];  /* the record's registry repository ("http://" if plain) */
	char chunks_digest[ST_DIGEST_LEN + 1]; /* the chunk index's sha256 ("" if the record predates it) */
};
int ix_lazy_check(struct ix *ix, const st_id *layer, int (*bad)(void *ctx, const struct ix_lazy_bad *b), void *ctx,
		  struct ix_lazy_check *out);

/* Every lazy layer recorded, sorted by id (for completion, fsck, show). */
int ix_lazy_foreach(struct ix *ix, int (*cb)(const st_id *layer, void *ctx), void *ctx);

/*
 * Prefetch (index/prefetch.c; docs/workingset.md): make snapshot snap's
 * working set present in its lazy layers before anything
 * reads them: the record's runs become byte ranges of each lazy layer,
 * cut where chunks are not adjacent, spread over up to `parallel` threads
 * (0: IX_WS_PREFETCH_PARALLEL), each fetching its ranges with
 * ix_lazy_fetch (adjacent chunks merged into one Range request), so the
 * requests travel at once. IX_ENOTFOUND: no record; else 0 or the first
 * fetch error (why says which chunk, which registry); -ENOMEM. stats may be
 * NULL. lz is the index's lazy-layer state (ix_lazy_open). Chunks fetched
 * before a failure stay in the store (they are verified; a later read or
 * prefetch does not fetch them again).
 */
#define IX_WS_PREFETCH_PARALLEL 8
#define IX_WS_PREFETCH_MAX 32
struct ix_ws_prefetch_stats {
	uint64_t ws_bytes;  /* the record's pages in lazy layers, in bytes */
	uint64_t jobs;      /* groups of ranges fetched in parallel */
	uint64_t requests;  /* Range requests made */
	uint64_t bytes;     /* chunk bytes received */
};
int ix_ws_prefetch(struct ix_lazy *lz, struct ix *ix, const st_id *snap, unsigned parallel,
		   struct ix_ws_prefetch_stats *stats, char *why, size_t whylen);

#endif
