/* lazy.h: not installed: the index side of lazy layers (chunk indexes, record checks), shared by index, index/dist, the CLI and tests. */
#ifndef STRATA_INDEX_LAZY_H
#define STRATA_INDEX_LAZY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "index/index.h"
#include "index/dist/dist.h"

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
/* IX_CHUNK_MIN, IX_CHUNK_MAX and IX_CHUNK_DEFAULT: index/dist/dist.h. */
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

/* What a lazy layer is, and the handle that fetches its chunks:
 * index/dist/dist.h. Its record (index/lazy.c) lives in the index's `lazy`
 * table, its bytes in STORE/lazy/<id>.part and .map. */

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

#endif
