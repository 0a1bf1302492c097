/* lazy_fetch.c: the fetching half of lazy layers: the handle that fetches their chunks by HTTP Range on demand, verifies and stores them, and completes a layer (its records and files: index/lazy.c). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store/array.h"
#include "index/index_int.h"
#include "index/lazy.h"
#include "index/dist/dist.h"

/* Waits for another thread's fetch before a reader gives up (each wait
 * ends when that fetch ends, itself bounded by the retries). */
#define LAZY_ROUNDS 8
/* A reader waits on the network for at most this per attempt: a fault in
 * a guest should fail, not stall for a minute (docs/lazy.md). */
#define LAZY_CONNECT_S 5
#define LAZY_STALL_S 10

/* --------------------------------------------------------------- handle */

struct lz_client {
	struct lz_client *next;
	char origin[IX_ORIGIN_MAX + 1];
	struct ix_registry *r;
};

struct lz_layer {
	struct lz_layer *next;
	st_id id;
	struct ix_lazy_rec rec;
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
	struct ix_lazy *lz = st_sys_calloc(1, sizeof(*lz));
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
		(void)st_sys_close(l->part_fd);
	if (l->map_fd >= 0)
		(void)st_sys_close(l->map_fd);
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
	if (!(l = st_sys_calloc(1, sizeof(*l))))
		return -ENOMEM;
	l->id = *id;
	l->part_fd = l->map_fd = -1;
	if ((rc = ix_txn_begin(ix, &t)) < 0)
		goto out_free;
	rc = ix_mdb(mdb_get(t->txn, ix->lazy, &k, &v));
	if (rc == 0)
		rc = ix_lazy_rec_decode(id, v.mv_data, v.mv_size, &l->rec);
	ix_txn_end(t);
	if (rc == MDB_NOTFOUND) {
		rc = 1;
		goto out_free;
	}
	if (rc < 0)
		goto out_free;
	uint64_t n = l->rec.c->n;
	if (!(l->present = st_sys_calloc(n, 1)) || !(l->inflight = st_sys_calloc(n, 1))) {
		rc = -ENOMEM;
		goto out_free;
	}
	int wr = st_store_rdonly(ix->s) ? O_RDONLY : O_RDWR;
	if ((rc = ix_lazy_file_open(ix->s, id, "part", wr, &l->part_fd)) < 0 ||
	    (rc = ix_lazy_file_open(ix->s, id, "map", wr, &l->map_fd)) < 0)
		goto out_free;
	ssize_t got = st_sys_pread(l->map_fd, l->present, n, 0);
	if (got < 0) {
		rc = (int)got;
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
			got = ci < l->rec.c->n ? st_sys_pread(l->map_fd, marks, sizeof(marks), (off_t)ci) : 0;
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
	if (!(c = st_sys_calloc(1, sizeof(*c))))
		return -ENOMEM;
	snprintf(c->origin, sizeof(c->origin), "%s", l->rec.origin);
	/* A provider that fails is logged: the client goes anonymously (a
	 * registry that needs credentials then refuses it, saying so). */
	char why[ST_WHY_LEN] = "", *user = NULL, *pass = NULL;
	if (lz->o.auth && lz->o.auth->get(lz->o.auth->ctx, ref.host, &user, &pass, why, sizeof(why)) < 0 && why[0])
		logf_(lz, "%s", why);
	struct ix_auth_provider creds;
	ix_auth_creds(&creds, user, pass);
	struct ix_registry_opts o = { .insecure = l->rec.insecure, .cacert = lz->o.cacert, .certs_d = lz->o.certs_d,
				      .cert_dir = lz->o.cert_dir, .tls_noverify = lz->o.tls_noverify, .auth = &creds.auth,
				      .connect_s = LAZY_CONNECT_S, .stall_s = LAZY_STALL_S, .low_speed = lz->o.low_speed,
				      .deadline_ns = lz->o.deadline_ns };
	rc = ix_registry_open(&ref, &o, &c->r);
	free(user);
	free(pass);
	if (rc == 0 && (rc = ix_registry_token_share(c->r, lz->o.token_from)) < 0)
		ix_registry_close(c->r);
	if (rc < 0) {
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

/*
 * What a Range answer is poured into: one chunk at a time, into a buffer of
 * one chunk reused for each, so that each chunk is checked against the
 * chunk index and written into .part as soon as its last byte arrives,
 * while the rest is still on the wire, and a run of chunks costs no buffer
 * of its whole size (its page faults and a second pass over cold memory).
 * Nothing is marked present here (fetch_run does that once the bytes are
 * durable); a chunk that does not match is never written.
 */
struct run_sink {
	struct ix_lazy *lz;
	struct lz_layer *l;
	uint64_t first, count;  /* the chunks asked for */
	uint64_t len, got;      /* bytes of the range, and so far */
	uint8_t *buf;           /* one chunk */
	uint64_t fill;          /* bytes of the current chunk so far */
	uint8_t *good;          /* per chunk of the run: checked and written */
	uint64_t ngood;
	int bad;                /* IX_ELAZY_BADCHUNK once a chunk was refused */
	char *why;              /* the last refusal, in words */
	size_t whylen;
	int wrc;                /* a failed write: ends the transfer */
};

/* Chunk ci is whole in rs->buf: check it, then write it into .part. */
static int chunk_done(struct run_sink *rs, uint64_t ci, uint64_t clen)
{
	const struct ix_chunks *c = rs->l->rec.c;
	char hex[ST_ID_HEX_LEN + 1];
	st_id got;

	st_id_hash(rs->buf, clen, &got);
	if (!st_id_equal(&got, &c->hash[ci])) {
		pthread_mutex_lock(&rs->lz->lock);
		rs->lz->st.bad_chunks++;
		pthread_mutex_unlock(&rs->lz->lock);
		st_id_format(&rs->l->id, hex);
		rs->bad = st_why(rs->why, rs->whylen, IX_ELAZY_BADCHUNK,
				 "chunk %" PRIu64 " of layer %s (bytes %" PRIu64 "-%" PRIu64 ") from %s does not match "
				 "the chunk index: refused", ci, hex, ix_chunk_off(c, ci), ix_chunk_off(c, ci) + clen - 1,
				 rs->l->rec.origin);
		logf_(rs->lz, "%s", rs->why ? rs->why : "a chunk was refused");
		return 0;
	}
	int w = ix_pwrite_all(rs->l->part_fd, rs->buf, clen, ix_chunk_off(c, ci));
	if (w < 0)
		return rs->wrc = w;
	if (!rs->good[ci - rs->first]) {
		rs->good[ci - rs->first] = 1;
		rs->ngood++;
	}
	return 0;
}

static int run_sink_fn(void *sctx, const void *buf, size_t len)
{
	struct run_sink *rs = sctx;
	const struct ix_chunks *c = rs->l->rec.c;
	const uint8_t *p = buf;
	int rc;

	if (len > rs->len - rs->got)
		return ST_ECORRUPT;
	while (len) {
		/* The chunk these bytes belong to: the run starts on a chunk. */
		uint64_t ci = rs->first + (rs->got - rs->fill) / c->chunk_size, clen = ix_chunk_len(c, ci);
		uint64_t take = clen - rs->fill < len ? clen - rs->fill : len;
		memcpy(rs->buf + rs->fill, p, take);
		rs->fill += take;
		rs->got += take;
		p += take;
		len -= take;
		if (rs->fill == clen) {
			rs->fill = 0;
			if ((rc = chunk_done(rs, ci, clen)) < 0)
				return rc;
		}
	}
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
	struct run_sink rs = { .lz = lz, .l = l, .first = first, .count = count, .len = end - off, .why = why,
			       .whylen = whylen };
	char hex[ST_ID_HEX_LEN + 1], inner[ST_WHY_LEN] = "";
	int rc = 0;

	st_id_format(&l->id, hex);
	if (!(rs.buf = st_sys_malloc(c->chunk_size)) || !(rs.good = st_sys_calloc(count, 1))) {
		rc = -ENOMEM;
		goto out_release;
	}
	unsigned wait = lz->o.backoff_ms;
	for (unsigned attempt = 0;; attempt++) {
		struct lz_client *cl;
		/* Again from the start: chunks already written are written
		 * again with the same checked bytes. */
		rs.got = rs.fill = 0;
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
			rc = st_why(inner, sizeof(inner), -EPIPE, "the answer ended after %" PRIu64 " of %" PRIu64 " bytes",
				    rs.got, rs.len);
		if (rs.wrc < 0 || rc == 0 || !retryable(rc) || attempt + 1 >= lz->o.attempts)
			break;
		pthread_mutex_lock(&lz->lock);
		lz->st.retries++;
		pthread_mutex_unlock(&lz->lock);
		sleep_ms(wait);
		wait *= 2;
	}
	if (rs.wrc < 0) {
		rc = rs.wrc;
		memset(rs.good, 0, count);
		rs.ngood = 0;
		goto out_release;
	}
	if (rc < 0) {
		if (retryable(rc))
			rc = IX_ELAZY_OFFLINE;
		st_why(why, whylen, rc, "layer %s bytes %" PRIu64 "-%" PRIu64 " from %s: %s%s", hex, off, end - 1,
		       l->rec.origin, inner[0] ? inner : ix_lazy_strerror(rc),
		       rc == IX_ELAZY_OFFLINE ? " (gave up after the retries)" : "");
		logf_(lz, "%s", why ? why : "lazy fetch failed");
		/* Chunks checked and written before the failure still count. */
	} else if (rs.bad) {
		rc = rs.bad; /* why says which chunk */
	}
	/* Bytes first, then the marks: a chunk counts as present only once its
	 * bytes are where a crash cannot lose them. */
	int synced = rs.ngood && st_store_sync(lz->ix->s) == ST_SYNC_FULL ? st_sys_fdatasync(l->part_fd) : 0;
	if (synced < 0) {
		rc = synced;
		memset(rs.good, 0, count);
		rs.ngood = 0;
	}
	for (uint64_t i = 0; i < count; i++) {
		static const uint8_t one = 1;
		if (rs.good[i] && ix_pwrite_all(l->map_fd, &one, 1, first + i) < 0)
			rs.good[i] = 0; /* fetched again next time */
	}
out_release:
	pthread_mutex_lock(&lz->lock);
	for (uint64_t i = 0; i < count; i++) {
		l->inflight[first + i] = 0;
		if (rs.good && rs.good[i] && !l->present[first + i]) {
			l->present[first + i] = 1;
			l->npresent++;
			lz->st.chunks++;
		}
	}
	pthread_cond_broadcast(&lz->changed);
	pthread_mutex_unlock(&lz->lock);
	free(rs.good);
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
	if (nneed && !(mine = st_sys_malloc(nneed * sizeof(*mine)))) {
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
			if (!l->present[ci] && !l->inflight[ci] && st_sys_pread(l->map_fd, &mark, 1, (off_t)ci) == 1 && mark == 1) {
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
			rc = st_why(why, whylen, IX_ELAZY_OFFLINE, "gave up waiting for chunks of a lazy layer");
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
	if ((fd = st_sys_dup(l->part_fd)) < 0)
		return fd;
	off_t at = st_sys_lseek(fd, 0, SEEK_SET);
	if (at < 0) {
		(void)st_sys_close(fd);
		return (int)at;
	}
	/* The whole against its id: chunks that each match a chunk index that
	 * does not describe this layer are caught here. */
	rc = st_blob_put_fd(ix->s, fd, layer, NULL, NULL);
	(void)st_sys_close(fd);
	if (rc == ST_ECORRUPT) {
		/* Nothing bad is kept: every chunk of it counts as missing again. */
		pthread_mutex_lock(&lz->lock);
		memset(l->present, 0, l->rec.c->n);
		l->npresent = 0;
		pthread_mutex_unlock(&lz->lock);
		if (st_sys_ftruncate(l->map_fd, 0) == 0)
			(void)st_sys_ftruncate(l->map_fd, (off_t)l->rec.c->n);
		rc = st_why(why, whylen, ST_ECORRUPT,
			    "layer %s from %s: its chunks match the chunk index but the whole does not hash to the "
			    "layer's id (a wrong chunk index): refused", hex, l->rec.origin);
		logf_(lz, "%s", why ? why : "a completed layer was refused");
		return rc;
	}
	if (rc < 0)
		return rc;
	if ((rc = ix_lazy_rec_del(ix, layer)) < 0 && rc != IX_NOCHANGE)
		return rc;
	ix_lazy_files_del(ix, layer);
	pthread_mutex_lock(&lz->lock);
	l->published = true;
	pthread_mutex_unlock(&lz->lock);
	logf_(lz, "layer %s is complete: now an ordinary blob", hex);
	return 0;
}
