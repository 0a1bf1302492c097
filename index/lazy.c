/* lazy.c: the index side of lazy layers: chunk indexes, lazy records, partial files, their checks and gc (fetching: index/dist/lazy_fetch.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/array.h"
#include "index/index_int.h"
#include "index/lazy.h"

static const char chunks_magic[8] = { 'S', 'T', 'R', 'C', 'H', 'K', '1', '\n' };
/* Lazy record: version, flags, origin length, the layer's sha256, then
 * (version 2) the sha256 of the OCI manifest and of the chunk index it came
 * with, the origin, the chunk index. Version 1 records lack the two
 * digests: their source is unknown, so no pull reuses them (they still
 * serve the snapshots that were pulled with them). */
#define REC_VERSION_1 1
#define REC_VERSION 2
#define REC_INSECURE 1u
#define REC_HEAD_1 36u
#define REC_HEAD 100u

/* -------------------------------------------------------- chunk indexes */

void ix_chunks_free(struct ix_chunks *c)
{
	if (!c)
		return;
	free(c->hash);
	free(c);
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static bool chunk_size_ok(uint32_t cs)
{
	return cs >= IX_CHUNK_MIN && cs <= IX_CHUNK_MAX && (cs & (cs - 1)) == 0;
}

static int chunks_alloc(const st_id *layer, uint64_t size, uint32_t cs, struct ix_chunks **out)
{
	struct ix_chunks *c = st_sys_calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->layer = *layer;
	c->size = size;
	c->chunk_size = cs;
	c->n = (size + cs - 1) / cs;
	if (!(c->hash = st_sys_calloc(c->n ? c->n : 1, sizeof(*c->hash)))) {
		free(c);
		return -ENOMEM;
	}
	*out = c;
	return 0;
}

int ix_chunks_build(int fd, const st_id *layer, uint64_t size, uint32_t chunk_size, struct ix_chunks **out)
{
	struct ix_chunks *c;
	uint8_t *buf;
	int rc;

	if (!chunk_size_ok(chunk_size) || size == 0 || size % ST_PAGE_SIZE)
		return -EINVAL;
	if ((rc = chunks_alloc(layer, size, chunk_size, &c)) < 0)
		return rc;
	if (!(buf = st_sys_malloc(chunk_size))) {
		ix_chunks_free(c);
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < c->n; i++) {
		uint64_t len = ix_chunk_len(c, i), got = 0;
		while (got < len) {
			ssize_t r = st_sys_pread(fd, buf + got, len - got, (off_t)(ix_chunk_off(c, i) + got));
			if (r <= 0) {
				rc = r < 0 ? (int)r : ST_ELAYOUT; /* shorter than its size */
				goto out_free;
			}
			got += (uint64_t)r;
		}
		st_id_hash(buf, len, &c->hash[i]);
	}
	free(buf);
	*out = c;
	return 0;
out_free:
	free(buf);
	ix_chunks_free(c);
	return rc;
}

int ix_chunks_encode(const struct ix_chunks *c, uint8_t **buf, size_t *len)
{
	size_t n = IX_CHUNKS_HEADER + (size_t)c->n * sizeof(st_id);
	uint8_t *b = st_sys_calloc(1, n);

	if (!b)
		return -ENOMEM;
	memcpy(b, chunks_magic, sizeof(chunks_magic));
	memcpy(b + 8, c->layer.b, 16);
	put64(b + 24, c->size);
	for (int i = 0; i < 4; i++)
		b[32 + i] = (uint8_t)(c->chunk_size >> (8 * i));
	for (uint64_t i = 0; i < c->n; i++)
		memcpy(b + IX_CHUNKS_HEADER + i * 16, c->hash[i].b, 16);
	*buf = b;
	*len = n;
	return 0;
}

int ix_chunks_parse(const void *buf, size_t len, struct ix_chunks **out, char *why, size_t whylen)
{
	const uint8_t *b = buf;
	struct ix_chunks *c;
	st_id layer;
	uint64_t size, n;
	uint32_t cs;
	int rc;

	if (len < IX_CHUNKS_HEADER || memcmp(b, chunks_magic, sizeof(chunks_magic)) != 0)
		return st_why(why, whylen, ST_EFORMAT, "not a strata chunk index (no STRCHK1 header)");
	memcpy(layer.b, b + 8, 16);
	size = get64(b + 24);
	cs = get32(b + 32);
	if (get32(b + 36) != 0)
		return st_why(why, whylen, ST_EFORMAT, "chunk index: reserved bytes are not zero");
	if (!chunk_size_ok(cs))
		return st_why(why, whylen, ST_EFORMAT, "chunk index: chunk size %" PRIu32 " is not a power of two in %u..%u",
			      cs, IX_CHUNK_MIN, IX_CHUNK_MAX);
	if (size == 0 || size % ST_PAGE_SIZE || size > ST_MANIFEST_MAX_MEM)
		return st_why(why, whylen, ST_EFORMAT, "chunk index: layer size %" PRIu64 " is not whole pages up to 4 GiB",
			      size);
	n = (size + cs - 1) / cs;
	if ((len - IX_CHUNKS_HEADER) % 16 || (len - IX_CHUNKS_HEADER) / 16 != n)
		return st_why(why, whylen, ST_EFORMAT, "chunk index: %zu bytes, a layer of %" PRIu64 " bytes in chunks of %"
			      PRIu32 " needs %" PRIu64, len, size, cs, IX_CHUNKS_HEADER + n * 16);
	if ((rc = chunks_alloc(&layer, size, cs, &c)) < 0)
		return rc;
	memcpy(c->hash, b + IX_CHUNKS_HEADER, n * 16);
	*out = c;
	return 0;
}

/* -------------------------------------------------------------- records */

int ix_lazy_rec_encode(const struct ix_chunks *c, const struct ix_lazy_source *from, uint8_t **buf, size_t *len)
{
	const char *origin = from->origin;
	size_t olen = strlen(origin), clen;
	uint8_t *cb, *b;
	int rc;

	if (olen > IX_ORIGIN_MAX)
		return -ENAMETOOLONG;
	if ((rc = ix_chunks_encode(c, &cb, &clen)) < 0)
		return rc;
	if (!(b = st_sys_malloc(REC_HEAD + olen + clen))) {
		free(cb);
		return -ENOMEM;
	}
	b[0] = REC_VERSION;
	b[1] = from->insecure ? REC_INSECURE : 0;
	b[2] = (uint8_t)olen;
	b[3] = (uint8_t)(olen >> 8);
	memcpy(b + 4, from->layer_sha, ST_SHA256_LEN);
	memcpy(b + 36, from->manifest_sha, ST_SHA256_LEN);
	memcpy(b + 68, from->chunks_sha, ST_SHA256_LEN);
	memcpy(b + REC_HEAD, origin, olen);
	memcpy(b + REC_HEAD + olen, cb, clen);
	free(cb);
	*buf = b;
	*len = REC_HEAD + olen + clen;
	return 0;
}



/* The header of a record: its length (by version) and the origin's; false
 * if the value is too short or of an unknown version. */
static bool rec_head(const uint8_t *b, size_t len, size_t *head, size_t *olen)
{
	if (len < REC_HEAD_1 || (b[0] != REC_VERSION_1 && b[0] != REC_VERSION))
		return false;
	*head = b[0] == REC_VERSION ? REC_HEAD : REC_HEAD_1;
	*olen = (size_t)b[2] | (size_t)b[3] << 8;
	return *olen <= IX_ORIGIN_MAX && len >= *head + *olen;
}

/* The record's source, without parsing its chunk index. */
static int rec_source(const void *val, size_t len, struct ix_lazy_rec *out)
{
	const uint8_t *b = val;
	size_t head, olen;

	if (!rec_head(b, len, &head, &olen))
		return IX_ECORRUPT;
	out->insecure = b[1] & REC_INSECURE;
	memcpy(out->sha, b + 4, ST_SHA256_LEN);
	out->has_source = b[0] == REC_VERSION;
	if (out->has_source) {
		memcpy(out->manifest_sha, b + 36, ST_SHA256_LEN);
		memcpy(out->chunks_sha, b + 68, ST_SHA256_LEN);
	}
	memcpy(out->origin, b + head, olen);
	out->origin[olen] = '\0';
	return 0;
}

int ix_lazy_rec_decode(const st_id *layer, const void *val, size_t len, struct ix_lazy_rec *out)
{
	const uint8_t *b = val;
	size_t head, olen;

	if (rec_source(val, len, out) < 0 || !rec_head(b, len, &head, &olen))
		return IX_ECORRUPT;
	if (ix_chunks_parse(b + head + olen, len - head - olen, &out->c, NULL, 0) < 0)
		return IX_ECORRUPT;
	if (!st_id_equal(&out->c->layer, layer)) {
		ix_chunks_free(out->c);
		return IX_ECORRUPT;
	}
	return 0;
}

bool ix_lazy_rec_has(struct ix *ix, MDB_txn *txn, const st_id *layer, uint64_t *size)
{
	MDB_val k = ix_val(layer->b, sizeof(layer->b)), v;
	size_t head, olen;

	if (!ix->has_lazy || mdb_get(txn, ix->lazy, &k, &v) != 0 || !rec_head(v.mv_data, v.mv_size, &head, &olen))
		return false;
	if (v.mv_size < head + olen + IX_CHUNKS_HEADER)
		return false;
	if (size)
		*size = get64((const uint8_t *)v.mv_data + head + olen + 24);
	return true;
}

int ix_lazy_rec_match(struct ix *ix, MDB_txn *txn, const st_id *layer, const struct ix_lazy_source *want)
{
	MDB_val k = ix_val(layer->b, sizeof(layer->b)), v;
	struct ix_lazy_rec r;

	if (!ix->has_lazy || mdb_get(txn, ix->lazy, &k, &v) != 0)
		return IX_LAZY_NONE;
	/*
	 * The trust decision: the record's chunks were checked only against
	 * the chunk index it came with, so they are the layer's bytes only as
	 * far as the party that served that index says. It stands for this
	 * request only if the request is that same party saying the same thing:
	 * the same origin (registry host[:port]/repository), over the same
	 * transport (plain HTTP or not), listing the layer with the same sha256
	 * and the same chunk index (its sha256). The manifest digest is kept
	 * to say where the record came from (fsck), not compared: two
	 * snapshots of one repository share layers under different manifests.
	 * A version 1 record does not know its chunk index: it never matches.
	 */
	if (!want || !want->origin || rec_source(v.mv_data, v.mv_size, &r) < 0 || !r.has_source)
		return IX_LAZY_OTHER;
	if (strcmp(r.origin, want->origin) != 0 || r.insecure != want->insecure ||
	    memcmp(r.sha, want->layer_sha, ST_SHA256_LEN) != 0 || memcmp(r.chunks_sha, want->chunks_sha, ST_SHA256_LEN) != 0)
		return IX_LAZY_OTHER;
	return IX_LAZY_SAME;
}

int ix_lazy_rec_describe(struct ix *ix, MDB_txn *txn, const st_id *layer, char *buf, size_t len)
{
	MDB_val k = ix_val(layer->b, sizeof(layer->b)), v;
	char dg[ST_DIGEST_LEN + 1] = "an unrecorded manifest";
	struct ix_lazy_rec r;
	size_t head, olen;
	uint64_t nchunks = 0, present = 0;
	uint8_t map[4096];
	int fd = -1;

	if (!ix->has_lazy || mdb_get(txn, ix->lazy, &k, &v) != 0)
		return IX_ENOTFOUND;
	if (rec_source(v.mv_data, v.mv_size, &r) < 0 || !rec_head(v.mv_data, v.mv_size, &head, &olen) ||
	    v.mv_size < head + olen + IX_CHUNKS_HEADER)
		return IX_ECORRUPT;
	const uint8_t *ci = (const uint8_t *)v.mv_data + head + olen;
	uint32_t cs = get32(ci + 32);
	uint64_t size = get64(ci + 24);
	if (cs)
		nchunks = (size + cs - 1) / cs;
	if (r.has_source)
		st_digest_format(r.manifest_sha, dg);
	if (ix_lazy_file_open(ix->s, layer, "map", O_RDONLY, &fd) == 0) {
		ssize_t n;
		while ((n = st_sys_read(fd, map, sizeof(map))) > 0)
			for (ssize_t i = 0; i < n; i++)
				present += map[i] == 1;
		(void)st_sys_close(fd);
	}
	snprintf(buf, len, "lazy layer from %s%s (manifest %s), %" PRIu64 " of %" PRIu64 " chunks here: its bytes "
		 "are checked only against that registry's chunk index, not yet against the layer's id ('strata pull' "
		 "without --lazy completes and checks it)", r.insecure ? "http://" : "", r.origin, dg, present,
		 nchunks);
	return 0;
}

/* ------------------------------------------------------ checking chunks */

int ix_pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	return st_sys_pwrite_all(fd, buf, len, (off_t)off);
}


/* Chunk i of c as it is in .part: 1 if it hashes to the chunk index's id,
 * 0 if not (or the file is short), else -errno. */
static int chunk_good(int fd, const struct ix_chunks *c, uint64_t i, uint8_t *buf)
{
	uint64_t len = ix_chunk_len(c, i), got = 0;
	st_id id;

	while (got < len) {
		ssize_t n = st_sys_pread(fd, buf + got, len - got, (off_t)(ix_chunk_off(c, i) + got));
		if (n < 0)
			return (int)n;
		if (n == 0)
			return 0;
		got += (uint64_t)n;
	}
	st_id_hash(buf, len, &id);
	return st_id_equal(&id, &c->hash[i]);
}

/* Clear chunk i's mark: it is fetched (and checked) again when read. */
static int chunk_unmark(struct st_store *s, int map_fd, uint64_t i)
{
	static const uint8_t zero = 0;

	int rc = ix_pwrite_all(map_fd, &zero, 1, i);

	if (rc < 0)
		return rc;
	if (st_store_sync(s) == ST_SYNC_FULL)
		return st_sys_fdatasync(map_fd);
	return 0;
}

int ix_lazy_rec_check(struct ix *ix, MDB_txn *txn, const st_id *layer, bool drop,
		      int (*bad)(void *ctx, const struct ix_lazy_bad *b), void *ctx, struct ix_lazy_check *out)
{
	MDB_val k = ix_val(layer->b, sizeof(layer->b)), v;
	struct ix_lazy_rec r = { 0 };
	uint8_t *map = NULL, *buf = NULL;
	int part = -1, mfd = -1, rc;

	*out = (struct ix_lazy_check){ 0 };
	if (!ix->has_lazy || mdb_get(txn, ix->lazy, &k, &v) != 0)
		return IX_ENOTFOUND;
	if (ix_lazy_rec_decode(layer, v.mv_data, v.mv_size, &r) < 0)
		return IX_ECORRUPT;
	const struct ix_chunks *c = r.c;
	snprintf(out->origin, sizeof(out->origin), "%s%s", r.insecure ? "http://" : "", r.origin);
	if (r.has_source)
		st_digest_format(r.chunks_sha, out->chunks_digest);
	out->chunks = c->n;
	int mode = drop ? O_RDWR : O_RDONLY;
	if ((rc = ix_lazy_file_open(ix->s, layer, "part", O_RDONLY, &part)) < 0 ||
	    (rc = ix_lazy_file_open(ix->s, layer, "map", mode, &mfd)) < 0)
		goto out;
	if (!(map = st_sys_calloc(c->n, 1)) || !(buf = st_sys_malloc(c->chunk_size))) {
		rc = -ENOMEM;
		goto out;
	}
	/* The marks first: a chunk is marked only once its bytes are in .part. */
	ssize_t got = st_sys_pread(mfd, map, c->n, 0);
	if (got < 0) {
		rc = (int)got;
		goto out;
	}
	for (uint64_t i = 0; i < c->n && rc == 0; i++) {
		if (map[i] != 1)
			continue;
		out->present++;
		int g = chunk_good(part, c, i, buf);
		if (g < 0) {
			rc = g;
			break;
		}
		out->bytes += ix_chunk_len(c, i);
		if (g)
			continue;
		struct ix_lazy_bad b = { .chunk = i, .off = ix_chunk_off(c, i), .len = ix_chunk_len(c, i) };
		out->bad++;
		if (drop && (rc = chunk_unmark(ix->s, mfd, i)) < 0)
			break;
		b.dropped = drop;
		if (bad)
			rc = bad(ctx, &b);
	}
out:
	free(map);
	free(buf);
	if (mfd >= 0)
		(void)st_sys_close(mfd);
	if (part >= 0)
		(void)st_sys_close(part);
	ix_chunks_free(r.c);
	return rc;
}

int ix_lazy_check(struct ix *ix, const st_id *layer, int (*bad)(void *ctx, const struct ix_lazy_bad *b), void *ctx,
		  struct ix_lazy_check *out)
{
	struct ix_txn *t;
	int rc = ix_txn_begin(ix, &t);

	if (rc < 0)
		return rc;
	rc = ix_lazy_rec_check(ix, t->txn, layer, false, bad, ctx, out);
	ix_txn_end(t);
	return rc;
}

/* ---------------------------------------------------------------- files */

/* "lazy/<hex>.part" or ".map". */
static void lazy_name(const st_id *id, const char *ext, char *out, size_t len)
{
	char hex[ST_ID_HEX_LEN + 1];

	st_id_format(id, hex);
	snprintf(out, len, "lazy/%s.%s", hex, ext);
}

int ix_lazy_file_open(struct st_store *s, const st_id *id, const char *ext, int flags, int *out)
{
	char name[64];
	int fd;

	lazy_name(id, ext, name, sizeof(name));
	fd = st_sys_openat(st_store_dirfd(s), name, flags | O_NOFOLLOW, st_store_perm(s, ST_PERM_RW));
	if (fd < 0)
		return fd;
	/* A layer's bytes: the store's mode exactly (docs/security.md). */
	int rc = flags & O_CREAT ? st_store_fchmod(s, fd, ST_PERM_RW) : 0;
	if (rc < 0) {
		(void)st_sys_close(fd);
		return rc;
	}
	*out = fd;
	return 0;
}

int ix_lazy_files_make(struct ix *ix, const st_id *layer, uint64_t size, uint64_t nchunks)
{
	int dfd = st_store_dirfd(ix->s), pfd = -1, mfd = -1, rc = 0;

	if ((rc = st_store_mkdirat(ix->s, dfd, "lazy", ST_PERM_DIR)) < 0 && rc != -EEXIST)
		return rc;
	/* Leftovers of a pull that did not commit are not trusted: start empty. */
	if ((rc = ix_lazy_file_open(ix->s, layer, "part", O_RDWR | O_CREAT | O_TRUNC, &pfd)) < 0)
		return rc;
	if ((rc = ix_lazy_file_open(ix->s, layer, "map", O_RDWR | O_CREAT | O_TRUNC, &mfd)) < 0)
		goto out_close;
	if ((rc = st_sys_ftruncate(pfd, (off_t)size)) < 0 || (rc = st_sys_ftruncate(mfd, (off_t)nchunks)) < 0)
		goto out_close;
	if (st_store_sync(ix->s) == ST_SYNC_FULL && (rc = st_sys_fsync(pfd)) == 0)
		rc = st_sys_fsync(mfd);
out_close:
	if (mfd >= 0)
		(void)st_sys_close(mfd);
	(void)st_sys_close(pfd);
	return rc;
}

void ix_lazy_files_del(struct ix *ix, const st_id *layer)
{
	char name[64];

	lazy_name(layer, "part", name, sizeof(name));
	(void)st_sys_unlinkat(st_store_dirfd(ix->s), name, 0);
	lazy_name(layer, "map", name, sizeof(name));
	(void)st_sys_unlinkat(st_store_dirfd(ix->s), name, 0);
}

/* ------------------------------------------------------ dropping records */

static int rec_del_fn(struct ix *ix, MDB_txn *txn, void *arg)
{
	MDB_val k = ix_val(((const st_id *)arg)->b, 16);
	int rc = ix_mdb(mdb_del(txn, ix->lazy, &k, NULL));

	return rc == MDB_NOTFOUND ? IX_NOCHANGE : rc;
}

int ix_lazy_rec_del(struct ix *ix, const st_id *layer)
{
	return ix_write(ix, rec_del_fn, (void *)layer);
}

void ix_lazy_rec_drop(struct ix *ix, const st_id *layer)
{
	if (!ix->has_lazy || !st_blob_has(ix->s, layer))
		return;
	if (ix_lazy_rec_del(ix, layer) >= 0)
		ix_lazy_files_del(ix, layer);
}

int ix_lazy_foreach(struct ix *ix, int (*cb)(const st_id *layer, void *ctx), void *ctx)
{
	struct ix_txn *t;
	MDB_cursor *cur;
	MDB_val k, v;
	st_id *ids = NULL;
	size_t n = 0, cap = 0;
	int rc;

	if (!ix->has_lazy)
		return 0;
	if ((rc = ix_txn_begin(ix, &t)) < 0)
		return rc;
	if ((rc = ix_mdb(mdb_cursor_open(t->txn, ix->lazy, &cur))) < 0) {
		ix_txn_end(t);
		return rc;
	}
	/* Collected first: cb may write (complete a layer). */
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (k.mv_size != 16)
			continue;
		if ((rc = ST_ARRAY_RESERVE(ids, cap, n + 1)) < 0)
			break;
		memcpy(ids[n++].b, k.mv_data, 16);
	}
	mdb_cursor_close(cur);
	ix_txn_end(t);
	rc = rc == MDB_NOTFOUND ? 0 : ix_mdb(rc);
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = cb(&ids[i], ctx);
	free(ids);
	return rc;
}

/* -------------------------------------------------------------------- gc */

struct lazy_gc {
	int64_t cutoff_ns;
	uint64_t removed;
};

static bool lazy_file_old(struct ix *ix, const char *name, int64_t cutoff_ns)
{
	struct stat sb;

	if (st_sys_fstatat(st_store_dirfd(ix->s), name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
		return false;
	return (int64_t)sb.st_mtim.tv_sec * 1000000000ll + sb.st_mtim.tv_nsec <= cutoff_ns;
}

static int lazy_gc_fn(struct ix *ix, MDB_txn *txn, void *arg)
{
	struct lazy_gc *g = arg;
	MDB_cursor *cur;
	MDB_val k, v;
	bool changed = false;
	int rc = ix_mdb(mdb_cursor_open(txn, ix->lazy, &cur));

	if (rc < 0)
		return rc;
	/* Records of layers no snapshot references any more (their files too),
	 * unless touched within the grace period (a pull about to commit). */
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		struct ix_blob_rec r;
		char name[64];
		st_id id;
		if (k.mv_size != 16)
			continue;
		memcpy(id.b, k.mv_data, 16);
		if (ix_blob_rec_get(ix, txn, &id, &r) == 0)
			continue;
		lazy_name(&id, "map", name, sizeof(name));
		if (!lazy_file_old(ix, name, g->cutoff_ns) && !st_blob_has(ix->s, &id))
			continue;
		if ((rc = ix_mdb(mdb_cursor_del(cur, 0))) < 0)
			break;
		ix_lazy_files_del(ix, &id);
		g->removed++;
		changed = true;
	}
	mdb_cursor_close(cur);
	if (rc != MDB_NOTFOUND && rc < 0)
		return rc;
	/* Files no record names: a pull that did not commit, a completion cut short. */
	DIR *d = NULL;
	struct dirent *e;
	if (st_sys_opendirat(st_store_dirfd(ix->s), "lazy", &d) < 0)
		return changed ? 0 : IX_NOCHANGE;
	while ((e = readdir(d))) {
		char name[300];
		st_id id;
		if (strlen(e->d_name) < ST_ID_HEX_LEN + 2 || st_id_parse_n(e->d_name, ST_ID_HEX_LEN, &id) < 0)
			continue;
		k = ix_val(id.b, 16);
		if (mdb_get(txn, ix->lazy, &k, &v) == 0)
			continue;
		snprintf(name, sizeof(name), "lazy/%s", e->d_name);
		if (lazy_file_old(ix, name, g->cutoff_ns) && st_sys_unlinkat(st_store_dirfd(ix->s), name, 0) == 0)
			g->removed++;
	}
	closedir(d);
	return changed ? 0 : IX_NOCHANGE;
}

int ix_lazy_gc(struct ix *ix, int64_t cutoff_ns, uint64_t *removed)
{
	struct lazy_gc g = { .cutoff_ns = cutoff_ns };
	int rc;

	if (!ix->has_lazy)
		return 0;
	rc = ix_write(ix, lazy_gc_fn, &g);
	if (rc == IX_NOCHANGE)
		rc = 0;
	if (rc == 0 && removed)
		*removed = g.removed;
	return rc;
}
