/* lazy.c: chunk indexes, lazy layer records and files, and fetching their chunks by HTTP Range on demand. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store/array.h"
#include "index/index_int.h"
#include "index/lazy.h"
#include "index/registry.h"

static const char chunks_magic[8] = { 'S', 'T', 'R', 'C', 'H', 'K', '1', '\n' };
/* Waits for another thread's fetch before a reader gives up (each wait
 * ends when that fetch ends, itself bounded by the retries). */
#define LAZY_ROUNDS 8
/* A reader waits on the network for at most this per attempt: a fault in
 * a guest should fail, not stall for a minute (docs/lazy.md). */
#define LAZY_CONNECT_S 5
#define LAZY_STALL_S 10
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
	struct ix_chunks *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->layer = *layer;
	c->size = size;
	c->chunk_size = cs;
	c->n = (size + cs - 1) / cs;
	if (!(c->hash = calloc(c->n ? c->n : 1, sizeof(*c->hash)))) {
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
	if (!(buf = malloc(chunk_size))) {
		ix_chunks_free(c);
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < c->n; i++) {
		uint64_t len = ix_chunk_len(c, i), got = 0;
		while (got < len) {
			ssize_t r = pread(fd, buf + got, len - got, (off_t)(ix_chunk_off(c, i) + got));
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				rc = r < 0 ? -errno : ST_ELAYOUT; /* shorter than its size */
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
	uint8_t *b = calloc(1, n);

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
		return ix_why(why, whylen, ST_EFORMAT, "not a strata chunk index (no STRCHK1 header)");
	memcpy(layer.b, b + 8, 16);
	size = get64(b + 24);
	cs = get32(b + 32);
	if (get32(b + 36) != 0)
		return ix_why(why, whylen, ST_EFORMAT, "chunk index: reserved bytes are not zero");
	if (!chunk_size_ok(cs))
		return ix_why(why, whylen, ST_EFORMAT, "chunk index: chunk size %" PRIu32 " is not a power of two in %u..%u",
			      cs, IX_CHUNK_MIN, IX_CHUNK_MAX);
	if (size == 0 || size % ST_PAGE_SIZE || size > ST_MANIFEST_MAX_MEM)
		return ix_why(why, whylen, ST_EFORMAT, "chunk index: layer size %" PRIu64 " is not whole pages up to 4 GiB",
			      size);
	n = (size + cs - 1) / cs;
	if ((len - IX_CHUNKS_HEADER) % 16 || (len - IX_CHUNKS_HEADER) / 16 != n)
		return ix_why(why, whylen, ST_EFORMAT, "chunk index: %zu bytes, a layer of %" PRIu64 " bytes in chunks of %"
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
	if (!(b = malloc(REC_HEAD + olen + clen))) {
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

/* A lazy record as read from the index. */
struct lz_rec {
	struct ix_chunks *c;
	uint8_t sha[ST_SHA256_LEN];
	uint8_t manifest_sha[ST_SHA256_LEN], chunks_sha[ST_SHA256_LEN];
	bool has_source;  /* version 2: the two digests above are known */
	char origin[IX_ORIGIN_MAX + 1];
	bool insecure;
};

static int lazy_open(struct st_store *s, const st_id *id, const char *ext, int flags, int *out);
static int pwrite_all(int fd, const void *buf, size_t len, uint64_t off);

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
static int rec_source(const void *val, size_t len, struct lz_rec *out)
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

static int rec_decode(const st_id *layer, const void *val, size_t len, struct lz_rec *out)
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
	struct lz_rec r;

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
	struct lz_rec r;
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
	if (lazy_open(ix->s, layer, "map", O_RDONLY, &fd) == 0) {
		ssize_t n;
		while ((n = read(fd, map, sizeof(map))) > 0)
			for (ssize_t i = 0; i < n; i++)
				present += map[i] == 1;
		close(fd);
	}
	snprintf(buf, len, "lazy layer from %s%s (manifest %s), %" PRIu64 " of %" PRIu64 " chunks here: its bytes "
		 "are checked only against that registry's chunk index, not yet against the layer's id ('strata pull' "
		 "without --lazy completes and checks it)", r.insecure ? "http://" : "", r.origin, dg, present,
		 nchunks);
	return 0;
}

/* ------------------------------------------------------ checking chunks */

/* Chunk i of c as it is in .part: 1 if it hashes to the chunk index's id,
 * 0 if not (or the file is short), else -errno. */
static int chunk_good(int fd, const struct ix_chunks *c, uint64_t i, uint8_t *buf)
{
	uint64_t len = ix_chunk_len(c, i), got = 0;
	st_id id;

	while (got < len) {
		ssize_t n = pread(fd, buf + got, len - got, (off_t)(ix_chunk_off(c, i) + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
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

	int rc = pwrite_all(map_fd, &zero, 1, i);

	if (rc < 0)
		return rc;
	if (st_store_sync(s) == ST_SYNC_FULL && fdatasync(map_fd) < 0)
		return -errno;
	return 0;
}

int ix_lazy_rec_check(struct ix *ix, MDB_txn *txn, const st_id *layer, bool drop,
		      int (*bad)(void *ctx, const struct ix_lazy_bad *b), void *ctx, struct ix_lazy_check *out)
{
	MDB_val k = ix_val(layer->b, sizeof(layer->b)), v;
	struct lz_rec r = { 0 };
	uint8_t *map = NULL, *buf = NULL;
	int part = -1, mfd = -1, rc;

	*out = (struct ix_lazy_check){ 0 };
	if (!ix->has_lazy || mdb_get(txn, ix->lazy, &k, &v) != 0)
		return IX_ENOTFOUND;
	if (rec_decode(layer, v.mv_data, v.mv_size, &r) < 0)
		return IX_ECORRUPT;
	const struct ix_chunks *c = r.c;
	snprintf(out->origin, sizeof(out->origin), "%s%s", r.insecure ? "http://" : "", r.origin);
	if (r.has_source)
		st_digest_format(r.chunks_sha, out->chunks_digest);
	out->chunks = c->n;
	int mode = drop ? O_RDWR : O_RDONLY;
	if ((rc = lazy_open(ix->s, layer, "part", O_RDONLY, &part)) < 0 ||
	    (rc = lazy_open(ix->s, layer, "map", mode, &mfd)) < 0)
		goto out;
	if (!(map = calloc(c->n, 1)) || !(buf = malloc(c->chunk_size))) {
		rc = -ENOMEM;
		goto out;
	}
	/* The marks first: a chunk is marked only once its bytes are in .part. */
	ssize_t got = pread(mfd, map, c->n, 0);
	if (got < 0) {
		rc = -errno;
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
		close(mfd);
	if (part >= 0)
		close(part);
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

static int lazy_open(struct st_store *s, const st_id *id, const char *ext, int flags, int *out)
{
	char name[64];
	int fd;

	lazy_name(id, ext, name, sizeof(name));
	fd = openat(st_store_dirfd(s), name, flags | O_CLOEXEC | O_NOFOLLOW, st_store_perm(s, ST_PERM_RW));
	if (fd < 0)
		return -errno;
	/* A layer's bytes: the store's mode exactly (docs/security.md). */
	int rc = flags & O_CREAT ? st_store_fchmod(s, fd, ST_PERM_RW) : 0;
	if (rc < 0) {
		close(fd);
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
	if ((rc = lazy_open(ix->s, layer, "part", O_RDWR | O_CREAT | O_TRUNC, &pfd)) < 0)
		return rc;
	if ((rc = lazy_open(ix->s, layer, "map", O_RDWR | O_CREAT | O_TRUNC, &mfd)) < 0)
		goto out_close;
	if (ftruncate(pfd, (off_t)size) < 0 || ftruncate(mfd, (off_t)nchunks) < 0) {
		rc = -errno;
		goto out_close;
	}
	if (st_store_sync(ix->s) == ST_SYNC_FULL && (fsync(pfd) < 0 || fsync(mfd) < 0))
		rc = -errno;
out_close:
	if (mfd >= 0)
		close(mfd);
	close(pfd);
	return rc;
}

void ix_lazy_files_del(struct ix *ix, const st_id *layer)
{
	char name[64];

	lazy_name(layer, "part", name, sizeof(name));
	unlinkat(st_store_dirfd(ix->s), name, 0);
	lazy_name(layer, "map", name, sizeof(name));
	unlinkat(st_store_dirfd(ix->s), name, 0);
}

/* --------------------------------------------------------------- handle */

struct lz_client {
	struct lz_client *next;
	char origin[IX_ORIGIN_MAX + 1];
	struct ix_registry *r;
	char *user, *pass;  /* the client points at them */
};

struct lz_layer {
	struct lz_layer *next;
	st_id id;
	struct lz_rec rec;
	int part_fd, map_fd;
	/* Guarded by ix_lazy.lock: */
	uint8_t *present;   /* 1: the chunk's bytes are in .part, verified */
	uint8_t *inflight;  /* 1: a thread is fetching it */
	uint64_t npresent;
	bool published;     /* now an ordinary blob */
};

struct ix_lazy {
	struct ix *ix;
	struct ix_lazy_opts o;
	pthread_mutex_t lock;    /* guards layers, each layer's marked fields, idle, st */
	pthread_cond_t changed;  /* some chunk stopped being in flight */
	struct lz_layer *layers;
	struct lz_client *idle;
	struct ix_lazy_stats st;
};

static void logf_(struct ix_lazy *lz, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(struct ix_lazy *lz, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (!lz->o.log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	lz->o.log(lz->o.log_ctx, msg);
}

int ix_lazy_open(struct ix *ix, const struct ix_lazy_opts *opts, struct ix_lazy **out)
{
	struct ix_lazy *lz = calloc(1, sizeof(*lz));
	int rc;

	if (!lz)
		return -ENOMEM;
	if ((rc = ix_registry_global_init()) < 0) {
		free(lz);
		return rc;
	}
	lz->ix = ix;
	if (opts)
		lz->o = *opts;
	if (!lz->o.attempts)
		lz->o.attempts = IX_LAZY_ATTEMPTS;
	if (!lz->o.backoff_ms)
		lz->o.backoff_ms = IX_LAZY_BACKOFF_MS;
	if (!lz->o.span_max)
		lz->o.span_max = IX_LAZY_SPAN;
	pthread_mutex_init(&lz->lock, NULL);
	pthread_cond_init(&lz->changed, NULL);
	*out = lz;
	return 0;
}

static void layer_free(struct lz_layer *l)
{
	if (!l)
		return;
	if (l->part_fd >= 0)
		close(l->part_fd);
	if (l->map_fd >= 0)
		close(l->map_fd);
	ix_chunks_free(l->rec.c);
	free(l->present);
	free(l->inflight);
	free(l);
}

void ix_lazy_close(struct ix_lazy *lz)
{
	if (!lz)
		return;
	while (lz->layers) {
		struct lz_layer *l = lz->layers;
		lz->layers = l->next;
		layer_free(l);
	}
	while (lz->idle) {
		struct lz_client *c = lz->idle;
		lz->idle = c->next;
		ix_registry_close(c->r);
		free(c->user);
		free(c->pass);
		free(c);
	}
	pthread_cond_destroy(&lz->changed);
	pthread_mutex_destroy(&lz->lock);
	free(lz);
}

/* Read the record and open the files of a lazy layer. 1: not lazy. */
static int layer_load(struct ix_lazy *lz, const st_id *id, struct lz_layer **out)
{
	struct ix *ix = lz->ix;
	struct lz_layer *l;
	struct ix_txn *t;
	MDB_val k = ix_val(id->b, sizeof(id->b)), v;
	int rc;

	if (!ix->has_lazy || st_blob_has(ix->s, id))
		return 1;
	if (!(l = calloc(1, sizeof(*l))))
		return -ENOMEM;
	l->id = *id;
	l->part_fd = l->map_fd = -1;
	if ((rc = ix_txn_begin(ix, &t)) < 0)
		goto out_free;
	rc = ix_mdb(mdb_get(t->txn, ix->lazy, &k, &v));
	if (rc == 0)
		rc = rec_decode(id, v.mv_data, v.mv_size, &l->rec);
	ix_txn_end(t);
	if (rc == MDB_NOTFOUND) {
		rc = 1;
		goto out_free;
	}
	if (rc < 0)
		goto out_free;
	uint64_t n = l->rec.c->n;
	if (!(l->present = calloc(n, 1)) || !(l->inflight = calloc(n, 1))) {
		rc = -ENOMEM;
		goto out_free;
	}
	int wr = st_store_rdonly(ix->s) ? O_RDONLY : O_RDWR;
	if ((rc = lazy_open(ix->s, id, "part", wr, &l->part_fd)) < 0 ||
	    (rc = lazy_open(ix->s, id, "map", wr, &l->map_fd)) < 0)
		goto out_free;
	ssize_t got = pread(l->map_fd, l->present, n, 0);
	if (got < 0) {
		rc = -errno;
		goto out_free;
	}
	for (uint64_t i = 0; i < n; i++) {
		l->present[i] = l->present[i] == 1;
		l->npresent += l->present[i];
	}
	*out = l;
	return 0;
out_free:
	layer_free(l);
	return rc;
}

/* The layer's state, loaded on first use; 1 if it is not lazy. */
static int layer_get(struct ix_lazy *lz, const st_id *id, struct lz_layer **out)
{
	struct lz_layer *l, *mine = NULL;
	int rc;

	for (int pass = 0; pass < 2; pass++) {
		pthread_mutex_lock(&lz->lock);
		for (l = lz->layers; l; l = l->next)
			if (st_id_equal(&l->id, id))
				break;
		if (!l && mine) {
			mine->next = lz->layers;
			lz->layers = l = mine;
			mine = NULL;
		}
		bool published = l && l->published;
		pthread_mutex_unlock(&lz->lock);
		/* A pull may since have fetched the layer whole from another
		 * source (its record was not that source's): the blob, checked
		 * against the id, is what the layer is from then on. */
		if (l && !published && st_blob_has(lz->ix->s, id)) {
			pthread_mutex_lock(&lz->lock);
			l->published = true;
			pthread_mutex_unlock(&lz->lock);
			published = true;
		}
		if (l) {
			layer_free(mine);
			if (published)
				return 1;
			*out = l;
			return 0;
		}
		if ((rc = layer_load(lz, id, &mine)) != 0)
			return rc;
	}
	return -EAGAIN; /* not reached: the second pass finds or inserts */
}

int ix_lazy_layer_info(struct ix_lazy *lz, const st_id *layer, struct ix_lazy_info *out)
{
	struct lz_layer *l;
	int rc = layer_get(lz, layer, &l);

	if (rc != 0)
		return rc == 1 ? 0 : rc;
	pthread_mutex_lock(&lz->lock);
	out->size = l->rec.c->size;
	out->chunk_size = l->rec.c->chunk_size;
	out->chunks = l->rec.c->n;
	out->present = l->npresent;
	snprintf(out->origin, sizeof(out->origin), "%s", l->rec.origin);
	pthread_mutex_unlock(&lz->lock);
	return 1;
}

int ix_lazy_present_at(struct ix_lazy *lz, const st_id *layer, uint64_t first, uint8_t *map, uint64_t n)
{
	struct lz_layer *l;
	int rc = layer_get(lz, layer, &l);

	if (rc != 0)
		return rc == 1 ? -ENOENT : rc;
	uint8_t marks[256];
	ssize_t got = 0;
	pthread_mutex_lock(&lz->lock);
	for (uint64_t i = 0; i < n; i++) {
		uint64_t ci = first + i;
		if (i % sizeof(marks) == 0)
			got = ci < l->rec.c->n ? pread(l->map_fd, marks, sizeof(marks), (off_t)ci) : 0;
		if (ci < l->rec.c->n && !l->present[ci] && !l->inflight[ci] && (ssize_t)(i % sizeof(marks)) < got &&
		    marks[i % sizeof(marks)] == 1) {
			l->present[ci] = 1;
			l->npresent++;
		}
		map[i] = ci < l->rec.c->n ? l->present[ci] : 0;
	}
	pthread_mutex_unlock(&lz->lock);
	return 0;
}

int ix_lazy_present(struct ix_lazy *lz, const st_id *layer, uint8_t *map, uint64_t n)
{
	return ix_lazy_present_at(lz, layer, 0, map, n);
}

int ix_lazy_fd(struct ix_lazy *lz, const st_id *layer, int *fd)
{
	struct lz_layer *l;
	int rc = layer_get(lz, layer, &l);

	if (rc != 0)
		return rc == 1 ? -ENOENT : rc;
	if ((*fd = fcntl(l->part_fd, F_DUPFD_CLOEXEC, 0)) < 0)
		return -errno;
	return 0;
}

void ix_lazy_stats_get(struct ix_lazy *lz, struct ix_lazy_stats *out)
{
	pthread_mutex_lock(&lz->lock);
	*out = lz->st;
	pthread_mutex_unlock(&lz->lock);
}

/* --------------------------------------------------------------- fetch */

static int client_get(struct ix_lazy *lz, const struct lz_layer *l, struct lz_client **out)
{
	struct lz_client *c, **pp;
	struct ix_registry_ref ref;
	char refs[IX_ORIGIN_MAX + 16];
	int rc;

	pthread_mutex_lock(&lz->lock);
	for (pp = &lz->idle; (c = *pp); pp = &c->next)
		if (strcmp(c->origin, l->rec.origin) == 0) {
			*pp = c->next;
			break;
		}
	pthread_mutex_unlock(&lz->lock);
	if (c) {
		*out = c;
		return 0;
	}
	snprintf(refs, sizeof(refs), "%s:lazy", l->rec.origin);
	if (ix_registry_ref_parse(refs, &ref) < 0)
		return IX_EREF;
	if (!(c = calloc(1, sizeof(*c))))
		return -ENOMEM;
	snprintf(c->origin, sizeof(c->origin), "%s", l->rec.origin);
	if (lz->o.creds)
		lz->o.creds(lz->o.creds_ctx, ref.host, &c->user, &c->pass);
	struct ix_registry_opts o = { .insecure = l->rec.insecure, .cacert = lz->o.cacert, .certs_d = lz->o.certs_d,
				      .cert_dir = lz->o.cert_dir, .tls_noverify = lz->o.tls_noverify, .user = c->user,
				      .pass = c->pass, .connect_s = LAZY_CONNECT_S, .stall_s = LAZY_STALL_S,
				      .low_speed = lz->o.low_speed, .deadline_ns = lz->o.deadline_ns };
	if ((rc = ix_registry_open(&ref, &o, &c->r)) < 0) {
		free(c->user);
		free(c->pass);
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

static void client_put(struct ix_lazy *lz, struct lz_client *c)
{
	pthread_mutex_lock(&lz->lock);
	c->next = lz->idle;
	lz->idle = c;
	pthread_mutex_unlock(&lz->lock);
}

struct run_sink {
	uint8_t *buf;
	uint64_t len, got;
};

static int run_sink_fn(void *sctx, const void *buf, size_t len)
{
	struct run_sink *rs = sctx;

	if (len > rs->len - rs->got)
		return ST_ECORRUPT;
	memcpy(rs->buf + rs->got, buf, len);
	rs->got += len;
	return 0;
}

static bool retryable(int rc)
{
	return rc == IX_ENET || rc == IX_EHTTP || rc == -EPIPE;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t w = pwrite(fd, (const char *)buf + done, len - done, (off_t)(off + done));
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		done += (size_t)w;
	}
	return 0;
}

/*
 * Fetch chunks [first, first + count) of l (this thread holds their in-flight
 * marks): one Range request, retried with backoff on network errors; each
 * chunk verified, written, made durable per the store's policy, then marked
 * in the map. The in-flight marks are cleared on every path.
 */
static int fetch_run(struct ix_lazy *lz, struct lz_layer *l, uint64_t first, uint64_t count, char *why, size_t whylen)
{
	const struct ix_chunks *c = l->rec.c;
	uint64_t off = ix_chunk_off(c, first), end = ix_chunk_off(c, first + count - 1) + ix_chunk_len(c, first + count - 1);
	struct run_sink rs = { .len = end - off };
	char hex[ST_ID_HEX_LEN + 1], inner[ST_WHY_LEN] = "";
	uint8_t *good = NULL;
	uint64_t ngood = 0;
	int rc = 0;

	st_id_format(&l->id, hex);
	if (!(rs.buf = malloc(rs.len)) || !(good = calloc(count, 1))) {
		rc = -ENOMEM;
		goto out_release;
	}
	unsigned wait = lz->o.backoff_ms;
	for (unsigned attempt = 0;; attempt++) {
		struct lz_client *cl;
		rs.got = 0;
		inner[0] = '\0';
		if ((rc = client_get(lz, l, &cl)) < 0)
			break;
		rc = ix_registry_blob_range(cl->r, l->rec.sha, off, rs.len, run_sink_fn, &rs, inner, sizeof(inner));
		client_put(lz, cl);
		pthread_mutex_lock(&lz->lock);
		lz->st.requests++;
		lz->st.bytes += rs.got;
		pthread_mutex_unlock(&lz->lock);
		if (rc == 0 && rs.got < rs.len)
			rc = ix_why(inner, sizeof(inner), -EPIPE, "the answer ended after %" PRIu64 " of %" PRIu64 " bytes",
				    rs.got, rs.len);
		if (rc == 0 || !retryable(rc) || attempt + 1 >= lz->o.attempts)
			break;
		pthread_mutex_lock(&lz->lock);
		lz->st.retries++;
		pthread_mutex_unlock(&lz->lock);
		sleep_ms(wait);
		wait *= 2;
	}
	if (rc < 0) {
		if (retryable(rc))
			rc = IX_ELAZY_OFFLINE;
		ix_why(why, whylen, rc, "layer %s bytes %" PRIu64 "-%" PRIu64 " from %s: %s%s", hex, off, end - 1,
		       l->rec.origin, inner[0] ? inner : ix_lazy_strerror(rc),
		       rc == IX_ELAZY_OFFLINE ? " (gave up after the retries)" : "");
		logf_(lz, "%s", why ? why : "lazy fetch failed");
		goto out_release;
	}
	for (uint64_t i = 0; i < count; i++) {
		uint64_t ci = first + i, coff = ix_chunk_off(c, ci) - off, clen = ix_chunk_len(c, ci);
		st_id got;
		st_id_hash(rs.buf + coff, clen, &got);
		if (!st_id_equal(&got, &c->hash[ci])) {
			pthread_mutex_lock(&lz->lock);
			lz->st.bad_chunks++;
			pthread_mutex_unlock(&lz->lock);
			rc = ix_why(why, whylen, IX_ELAZY_BADCHUNK,
				    "chunk %" PRIu64 " of layer %s (bytes %" PRIu64 "-%" PRIu64 ") from %s does not match "
				    "the chunk index: refused", ci, hex, ix_chunk_off(c, ci), ix_chunk_off(c, ci) + clen - 1,
				    l->rec.origin);
			logf_(lz, "%s", why ? why : "a chunk was refused");
			continue;
		}
		int w = pwrite_all(l->part_fd, rs.buf + coff, clen, ix_chunk_off(c, ci));
		if (w < 0) {
			rc = w;
			break;
		}
		good[i] = 1;
		ngood++;
	}
	/* Bytes first, then the marks: a chunk counts as present only once its
	 * bytes are where a crash cannot lose them. */
	if (ngood && st_store_sync(lz->ix->s) == ST_SYNC_FULL && fdatasync(l->part_fd) < 0) {
		rc = -errno;
		memset(good, 0, count);
		ngood = 0;
	}
	for (uint64_t i = 0; i < count; i++) {
		static const uint8_t one = 1;
		if (good[i] && pwrite_all(l->map_fd, &one, 1, first + i) < 0)
			good[i] = 0; /* fetched again next time */
	}
out_release:
	pthread_mutex_lock(&lz->lock);
	for (uint64_t i = 0; i < count; i++) {
		l->inflight[first + i] = 0;
		if (good && good[i] && !l->present[first + i]) {
			l->present[first + i] = 1;
			l->npresent++;
			lz->st.chunks++;
		}
	}
	pthread_cond_broadcast(&lz->changed);
	pthread_mutex_unlock(&lz->lock);
	free(good);
	free(rs.buf);
	return rc;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The chunks ranges touch, sorted and distinct (malloc'd). */
static int chunks_of(const struct ix_chunks *c, const struct ix_lazy_range *r, size_t n, uint64_t **out, size_t *nout)
{
	uint64_t *v = NULL;
	size_t cnt = 0, cap = 0;

	for (size_t k = 0; k < n; k++) {
		if (r[k].len == 0 || r[k].off >= c->size)
			continue;
		uint64_t end = r[k].len > c->size - r[k].off ? c->size : r[k].off + r[k].len;
		for (uint64_t i = r[k].off / c->chunk_size; i <= (end - 1) / c->chunk_size; i++) {
			if (ST_ARRAY_RESERVE(v, cap, cnt + 1) < 0) {
				free(v);
				return -ENOMEM;
			}
			v[cnt++] = i;
		}
	}
	if (cnt > 1)
		qsort(v, cnt, sizeof(*v), u64_cmp);
	size_t u = 0;
	for (size_t i = 0; i < cnt; i++)
		if (u == 0 || v[u - 1] != v[i])
			v[u++] = v[i];
	*out = v;
	*nout = u;
	return 0;
}

int ix_lazy_fetch(struct ix_lazy *lz, const st_id *layer, const struct ix_lazy_range *ranges, size_t n, char *why,
		  size_t whylen)
{
	struct lz_layer *l;
	uint64_t *need = NULL, *mine = NULL;
	size_t nneed = 0;
	int rc = layer_get(lz, layer, &l);

	if (rc != 0)
		return rc == 1 ? 0 : rc;
	if ((rc = chunks_of(l->rec.c, ranges, n, &need, &nneed)) < 0)
		return rc;
	if (nneed && !(mine = malloc(nneed * sizeof(*mine)))) {
		free(need);
		return -ENOMEM;
	}
	uint64_t span = lz->o.span_max / l->rec.c->chunk_size;
	if (span == 0)
		span = 1;
	for (int round = 0;; round++) {
		size_t nmine = 0;
		bool waiting = false, missing = false;

		pthread_mutex_lock(&lz->lock);
		for (size_t i = 0; i < nneed; i++) {
			uint64_t ci = need[i];
			uint8_t mark = 0;
			/* Another process sharing the store (a completion, a
			 * prefetch) may have brought it in since the map was read. */
			if (!l->present[ci] && !l->inflight[ci] && pread(l->map_fd, &mark, 1, (off_t)ci) == 1 && mark == 1) {
				l->present[ci] = 1;
				l->npresent++;
			}
			if (l->present[ci])
				continue;
			missing = true;
			if (l->inflight[ci] || round >= LAZY_ROUNDS) {
				waiting = true;
				continue;
			}
			l->inflight[ci] = 1;
			mine[nmine++] = ci;
		}
		pthread_mutex_unlock(&lz->lock);
		if (!missing)
			break;
		if (round >= LAZY_ROUNDS) {
			rc = ix_why(why, whylen, IX_ELAZY_OFFLINE, "gave up waiting for chunks of a lazy layer");
			break;
		}
		/* Runs of adjacent chunks, one request each. */
		int frc = 0;
		for (size_t i = 0; i < nmine;) {
			size_t j = i + 1;
			while (j < nmine && mine[j] == mine[j - 1] + 1 && j - i < span)
				j++;
			if (frc == 0) {
				frc = fetch_run(lz, l, mine[i], j - i, why, whylen);
			} else {
				pthread_mutex_lock(&lz->lock);
				for (size_t k = i; k < j; k++)
					l->inflight[mine[k]] = 0;
				pthread_cond_broadcast(&lz->changed);
				pthread_mutex_unlock(&lz->lock);
			}
			i = j;
		}
		if (frc < 0) {
			rc = frc;
			break;
		}
		if (waiting) {
			pthread_mutex_lock(&lz->lock);
			for (;;) {
				bool busy = false;
				for (size_t i = 0; i < nneed && !busy; i++)
					busy = l->inflight[need[i]] && !l->present[need[i]];
				if (!busy)
					break;
				lz->st.waits++;
				pthread_cond_wait(&lz->changed, &lz->lock);
			}
			pthread_mutex_unlock(&lz->lock);
		}
	}
	free(mine);
	free(need);
	return rc;
}

/* ------------------------------------------------------------ complete */

static int rec_del_fn(struct ix *ix, MDB_txn *txn, void *arg)
{
	MDB_val k = ix_val(((const st_id *)arg)->b, 16);
	int rc = ix_mdb(mdb_del(txn, ix->lazy, &k, NULL));

	return rc == MDB_NOTFOUND ? IX_NOCHANGE : rc;
}

void ix_lazy_rec_drop(struct ix *ix, const st_id *layer)
{
	if (!ix->has_lazy || !st_blob_has(ix->s, layer))
		return;
	if (ix_write(ix, rec_del_fn, (void *)layer) >= 0)
		ix_lazy_files_del(ix, layer);
}

int ix_lazy_complete(struct ix_lazy *lz, const st_id *layer, char *why, size_t whylen)
{
	struct ix *ix = lz->ix;
	struct lz_layer *l;
	char hex[ST_ID_HEX_LEN + 1];
	int fd, rc = layer_get(lz, layer, &l);

	if (rc != 0)
		return rc == 1 ? 0 : rc;
	struct ix_lazy_range all = { 0, l->rec.c->size };
	if ((rc = ix_lazy_fetch(lz, layer, &all, 1, why, whylen)) < 0)
		return rc;
	st_id_format(layer, hex);
	if ((fd = fcntl(l->part_fd, F_DUPFD_CLOEXEC, 0)) < 0)
		return -errno;
	if (lseek(fd, 0, SEEK_SET) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	/* The whole against its id: chunks that each match a chunk index that
	 * does not describe this layer are caught here. */
	rc = st_blob_put_fd(ix->s, fd, layer, NULL, NULL);
	close(fd);
	if (rc == ST_ECORRUPT) {
		/* Nothing bad is kept: every chunk of it counts as missing again. */
		pthread_mutex_lock(&lz->lock);
		memset(l->present, 0, l->rec.c->n);
		l->npresent = 0;
		pthread_mutex_unlock(&lz->lock);
		if (ftruncate(l->map_fd, 0) == 0)
			(void)ftruncate(l->map_fd, (off_t)l->rec.c->n);
		rc = ix_why(why, whylen, ST_ECORRUPT,
			    "layer %s from %s: its chunks match the chunk index but the whole does not hash to the "
			    "layer's id (a wrong chunk index): refused", hex, l->rec.origin);
		logf_(lz, "%s", why ? why : "a completed layer was refused");
		return rc;
	}
	if (rc < 0)
		return rc;
	if ((rc = ix_write(ix, rec_del_fn, (void *)layer)) < 0 && rc != IX_NOCHANGE)
		return rc;
	ix_lazy_files_del(ix, layer);
	pthread_mutex_lock(&lz->lock);
	l->published = true;
	pthread_mutex_unlock(&lz->lock);
	logf_(lz, "layer %s is complete: now an ordinary blob", hex);
	return 0;
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

	if (fstatat(st_store_dirfd(ix->s), name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
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
	int dfd = openat(st_store_dirfd(ix->s), "lazy", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	struct dirent *e;
	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return changed ? 0 : IX_NOCHANGE;
	}
	while ((e = readdir(d))) {
		char name[300];
		st_id id;
		if (strlen(e->d_name) < ST_ID_HEX_LEN + 2 || st_id_parse_n(e->d_name, ST_ID_HEX_LEN, &id) < 0)
			continue;
		k = ix_val(id.b, 16);
		if (mdb_get(txn, ix->lazy, &k, &v) == 0)
			continue;
		snprintf(name, sizeof(name), "lazy/%s", e->d_name);
		if (lazy_file_old(ix, name, g->cutoff_ns) && unlinkat(st_store_dirfd(ix->s), name, 0) == 0)
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
