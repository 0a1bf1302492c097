/* oci.c: snapshots as OCI artifacts: the XXH3<->sha256 table, the push and pull engines. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/array.h"
#include "index/index_int.h"
#include "index/lazy.h"
#include "index/dist/dist.h"

/* Blob bytes are hashed and copied in chunks of this size. */
#define OCI_CHUNK (1u << 20)
/* Longest chain of subjects a pull follows (a loop in a hostile registry
 * ends here). */
#define OCI_CHAIN_MAX 4096
/* Most canonical manifest bytes a pull stages for its chain (on disk in
 * the store's tmp/, not in memory; docs/oci.md). */
#define OCI_CHAIN_BYTES_MAX (1ull << 30)

/* Pairs to record once a push or pull has them all. */
struct sha_list {
	st_id *ids;
	uint8_t (*shas)[ST_SHA256_LEN];
	size_t n, cap_ids, cap_shas;
};

static int sha_list_add(struct sha_list *l, const st_id *id, const uint8_t sha[ST_SHA256_LEN])
{
	if (ST_ARRAY_RESERVE(l->ids, l->cap_ids, l->n + 1) < 0 || ST_ARRAY_RESERVE(l->shas, l->cap_shas, l->n + 1) < 0)
		return -ENOMEM;
	l->ids[l->n] = *id;
	memcpy(l->shas[l->n], sha, ST_SHA256_LEN);
	l->n++;
	return 0;
}

static void sha_list_free(struct sha_list *l)
{
	free(l->ids);
	free(l->shas);
}

static int sha_list_commit(struct ix *ix, struct sha_list *l)
{
	int rc = ix->rdonly ? 0 : ix_sha256_put(ix, l->ids, (const uint8_t(*)[ST_SHA256_LEN])l->shas, l->n);

	l->n = 0;
	return rc;
}

static void emit(const struct ix_oci_progress *p, enum ix_oci_event_kind kind, const uint8_t *sha, uint64_t size,
		 uint64_t done, uint32_t index, uint32_t count, enum ix_oci_blob_kind what)
{
	struct ix_oci_event ev = { kind, sha, size, done, index, count, what };

	if (p && p->cb)
		p->cb(p->ctx, &ev);
}

/* ------------------------------------------------------------------ push */

/* A snapshot on its way out: its manifest, config bytes and descriptors. */
struct out_snap {
	st_id id;
	struct st_manifest *m;
	char *config;
	size_t config_len;
	struct st_oci_manifest om;
	uint8_t **chunks;         /* each layer's chunk index bytes */
};

static void out_snap_clear(struct out_snap *o)
{
	for (uint32_t i = 0; o->chunks && i < o->om.nchunks; i++)
		free(o->chunks[i]);
	free(o->chunks);
	st_manifest_free(o->m);
	free(o->config);
	free(o->om.layers);
	free(o->om.chunks);
}

/* The chunk index of a store layer, as a descriptor and its bytes. */
static int chunk_index_make(struct ix *ix, const struct st_oci_desc *layer, uint32_t cs, struct st_oci_desc *d,
			    uint8_t **bytes)
{
	struct ix_chunks *c;
	size_t len;
	int fd, rc;

	if ((rc = st_blob_open(ix->s, &layer->id, &fd)) < 0)
		return rc;
	rc = ix_chunks_build(fd, &layer->id, layer->size, cs ? cs : IX_CHUNK_DEFAULT, &c);
	(void)st_sys_close(fd);
	if (rc < 0)
		return rc;
	rc = ix_chunks_encode(c, bytes, &len);
	ix_chunks_free(c);
	if (rc < 0)
		return rc;
	d->size = len;
	d->has_id = true;
	st_id_hash(*bytes, len, &d->id);
	st_sha256_hash(*bytes, len, d->sha256);
	return 0;
}

/* sha256 of a store blob: from the table, else hashed once (and added to l). */
static int blob_sha(struct ix *ix, const st_id *id, uint8_t sha[ST_SHA256_LEN], struct sha_list *l,
		    struct ix_oci_stats *st, uint8_t *buf)
{
	struct st_sha256 *h;
	int fd, rc;

	rc = ix_sha256_get(ix, id, sha);
	if (rc != IX_ENOTFOUND)
		return rc;
	for (size_t i = 0; i < l->n; i++) /* a layer shared by two snapshots of the chain */
		if (st_id_equal(&l->ids[i], id)) {
			memcpy(sha, l->shas[i], ST_SHA256_LEN);
			return 0;
		}
	if ((rc = st_blob_open(ix->s, id, &fd)) < 0)
		return rc;
	if ((rc = st_sha256_new(&h)) < 0)
		goto out_close;
	for (;;) {
		ssize_t n = st_sys_read(fd, buf, OCI_CHUNK);
		if (n < 0) {
			rc = (int)n;
			goto out_free;
		}
		if (n == 0)
			break;
		st_sha256_update(h, buf, (size_t)n);
		st->bytes_sha256 += (uint64_t)n;
	}
	st_sha256_final(h, sha);
	rc = sha_list_add(l, id, sha);
out_free:
	st_sha256_free(h);
out_close:
	(void)st_sys_close(fd);
	return rc;
}

/* Fill o from snapshot id: manifest, canonical config, every digest. */
static int out_snap_load(struct ix *ix, const st_id *id, uint32_t cs, bool whole, struct out_snap *o,
			 struct sha_list *l, struct ix_oci_stats *st, uint8_t *buf, char *why, size_t whylen)
{
	struct ix_txn *t;
	int rc;

	MDB_val rec;
	st_id key = *id;

	o->id = *id;
	if ((rc = ix_txn_begin(ix, &t)) < 0)
		return rc;
	rc = ix_snap_get(t, id, &o->m);
	/* A snapshot stored as a delta of its parent goes out as that delta
	 * (docs/oci.md): its parent is in the store, so it is pushed too, as
	 * the subject. */
	if (rc == 0 && !whole && (rc = ix_snap_rec_get(ix, t->txn, id, &rec)) == 0 &&
	    ix_snap_text_is_delta(rec.mv_data, rec.mv_size)) {
		if ((o->config = st_sys_malloc(rec.mv_size + 1))) {
			memcpy(o->config, rec.mv_data, rec.mv_size);
			o->config[rec.mv_size] = '\0';
			o->config_len = rec.mv_size;
		} else {
			rc = -ENOMEM;
		}
	}
	ix_txn_end(t);
	if (rc < 0)
		return rc;
	if (!o->config && (rc = st_manifest_encode(o->m, &o->config, &o->config_len, why, whylen)) < 0)
		return rc;
	/* The config's sha256 is a fact about its bytes: a delta's is filed
	 * under the XXH3-128 of the delta, a full manifest's under its id. */
	if (ix_snap_text_is_delta(o->config, o->config_len))
		st_id_hash(o->config, o->config_len, &key);
	o->om.config.size = o->config_len;
	o->om.config.has_id = true;
	o->om.config.id = *id;
	rc = ix_sha256_get(ix, &key, o->om.config.sha256);
	if (rc == IX_ENOTFOUND) {
		st_sha256_hash(o->config, o->config_len, o->om.config.sha256);
		st->bytes_sha256 += o->config_len;
		rc = sha_list_add(l, &key, o->om.config.sha256);
	}
	if (rc < 0)
		return rc;
	if (o->m->nlayers && (!(o->om.layers = st_sys_calloc(o->m->nlayers, sizeof(*o->om.layers))) ||
			      !(o->om.chunks = st_sys_calloc(o->m->nlayers, sizeof(*o->om.chunks))) ||
			      !(o->chunks = st_sys_calloc(o->m->nlayers, sizeof(*o->chunks)))))
		return -ENOMEM;
	o->om.nlayers = o->m->nlayers;
	for (uint32_t i = 0; i < o->m->nlayers; i++) {
		struct st_oci_desc *d = &o->om.layers[i];
		char hex[ST_ID_HEX_LEN + 1];

		d->id = o->m->layers[i].id;
		d->has_id = true;
		d->size = o->m->layers[i].pages * ST_PAGE_SIZE;
		if ((rc = blob_sha(ix, &d->id, d->sha256, l, st, buf)) < 0) {
			st_id_format(&d->id, hex);
			if (rc == -ENOENT)
				snprintf(why, whylen, "layer %s is missing from the store (run 'strata verify'; "
					 "a lazy layer: 'strata pull' completes it)", hex);
			return rc;
		}
		/* Each layer's chunk index travels with it, so it can be pulled
		 * lazily (docs/lazy.md). */
		if ((rc = chunk_index_make(ix, d, cs, &o->om.chunks[i], &o->chunks[i])) < 0)
			return rc;
		o->om.nchunks++;
	}
	return 0;
}

/* Send one blob unless the sink has it. */
static int push_blob(struct ix *ix, const struct ix_oci_sink *sink, const struct st_oci_desc *d, const void *buf,
		     enum ix_oci_blob_kind what, const struct ix_oci_progress *prog, uint32_t index, uint32_t count,
		     struct ix_oci_stats *st, char *why, size_t whylen)
{
	int fd = -1, rc = sink->blob_has(sink->ctx, d, why, whylen);

	if (rc < 0)
		return rc;
	if (rc > 0) {
		st->blobs_skipped++;
		st->bytes_skipped += d->size;
		emit(prog, IX_OCI_BLOB_SKIP, d->sha256, d->size, d->size, index, count, what);
		return 0;
	}
	if (!buf && (rc = st_blob_open(ix->s, &d->id, &fd)) < 0)
		return rc;
	emit(prog, IX_OCI_BLOB_BEGIN, d->sha256, d->size, 0, index, count, what);
	rc = sink->blob_put(sink->ctx, d, fd, buf, why, whylen);
	if (fd >= 0)
		(void)st_sys_close(fd);
	if (rc < 0)
		return rc;
	if (rc > 0) { /* the sink had it from elsewhere (a mount): nothing sent */
		st->blobs_skipped++;
		st->bytes_skipped += d->size;
		emit(prog, IX_OCI_BLOB_SKIP, d->sha256, d->size, d->size, index, count, what);
		return 0;
	}
	st->blobs_moved++;
	st->bytes_moved += d->size;
	emit(prog, IX_OCI_BLOB_END, d->sha256, d->size, d->size, index, count, what);
	return 0;
}

/* The chain from id down through ancestors the store holds: ids[0] = id. */
static int chain_collect(struct ix *ix, const st_id *id, st_id **out, size_t *n)
{
	struct ix_txn *t;
	st_id *ids = NULL, cur = *id;
	size_t cnt = 0, cap = 0;
	int rc;

	if ((rc = ix_txn_begin(ix, &t)) < 0)
		return rc;
	for (;;) {
		struct st_manifest *m;

		if (cnt >= OCI_CHAIN_MAX) {
			rc = ST_ELAYOUT;
			break;
		}
		if ((rc = ST_ARRAY_RESERVE(ids, cap, cnt + 1)) < 0)
			break;
		ids[cnt++] = cur;
		if ((rc = ix_snap_get(t, &cur, &m)) < 0)
			break;
		bool more = m->has_parent && ix_snap_has(t, &m->parent);
		cur = m->parent;
		st_manifest_free(m);
		if (!more)
			break;
	}
	ix_txn_end(t);
	if (rc < 0) {
		free(ids);
		return rc;
	}
	*out = ids;
	*n = cnt;
	return 0;
}

static int push_id(struct ix *ix, const st_id *top, const char *tag, const struct ix_oci_sink *sink,
		   const struct ix_oci_progress *prog, struct ix_oci_stats *st, uint8_t digest[ST_SHA256_LEN],
		   uint64_t *size, char *why, size_t whylen)
{
	struct sha_list l = { 0 };
	st_id *chain = NULL;
	size_t n = 0;
	uint8_t *buf = st_sys_malloc(OCI_CHUNK);
	struct st_oci_desc subject = { 0 };
	bool has_subject = false;
	int rc;

	if (!buf)
		return -ENOMEM;
	if ((rc = chain_collect(ix, top, &chain, &n)) < 0)
		goto out_free;
	for (size_t k = n; k-- > 0;) {
		struct out_snap o = { 0 };
		char *json = NULL;
		size_t len;
		uint8_t sha[ST_SHA256_LEN];

		if ((rc = out_snap_load(ix, &chain[k], sink->chunk_size, sink->whole_configs, &o, &l, st, buf, why, whylen)) < 0)
			goto out_snap;
		/* Record new digests before sending, so an interrupted push
		 * does not hash them again. */
		if ((rc = sha_list_commit(ix, &l)) < 0)
			goto out_snap;
		uint32_t count = o.om.nlayers + 1;
		for (uint32_t i = 0; i < o.om.nlayers; i++)
			if ((rc = push_blob(ix, sink, &o.om.layers[i], NULL, IX_OCI_LAYER, prog, i, count, st, why, whylen)) < 0)
				goto out_snap;
		for (uint32_t i = 0; i < o.om.nchunks; i++) {
			struct ix_oci_stats cst = { 0 };
			if ((rc = push_blob(ix, sink, &o.om.chunks[i], o.chunks[i], IX_OCI_CHUNKS, prog, i, count, &cst,
					     why, whylen)) < 0)
				goto out_snap;
			st->bytes_chunks += cst.bytes_moved;
		}
		/* A delta config is a blob of its own bytes: the sink files it
		 * (origins, mounts) under their XXH3-128, not the snapshot id its
		 * annotation names. */
		struct st_oci_desc cdesc = o.om.config;
		if (ix_snap_text_is_delta(o.config, o.config_len))
			st_id_hash(o.config, o.config_len, &cdesc.id);
		if ((rc = push_blob(ix, sink, &cdesc, o.config, IX_OCI_CONFIG, prog, o.om.nlayers, count, st, why,
				     whylen)) < 0)
			goto out_snap;
		o.om.has_subject = has_subject;
		o.om.subject = subject;
		/* The snapshot's own capture time, not now: a push of the same
		 * snapshot gives the same manifest and digest. */
		o.om.created = o.m->created;
		o.om.extra = k == 0 ? sink->annotations : NULL;
		if ((rc = st_oci_manifest_encode(&o.om, &json, &len)) < 0)
			goto out_snap;
		st_sha256_hash(json, len, sha);
		rc = sink->manifest_put(sink->ctx, json, len, sha, k == 0 ? tag : NULL, why, whylen);
		free(json);
		if (rc < 0)
			goto out_snap;
		emit(prog, IX_OCI_MANIFEST, sha, len, len, 0, 0, IX_OCI_MANIFEST_BLOB);
		st->snapshots++;
		memcpy(subject.sha256, sha, ST_SHA256_LEN);
		subject.size = len;
		has_subject = true;
out_snap:
		out_snap_clear(&o);
		if (rc < 0)
			goto out_free;
	}
	if (digest)
		memcpy(digest, subject.sha256, ST_SHA256_LEN);
	if (size)
		*size = subject.size;
out_free:
	sha_list_free(&l);
	free(chain);
	free(buf);
	return rc;
}

int ix_oci_push(struct ix *ix, const char *ref, const char *tag, const struct ix_oci_sink *sink,
		const struct ix_oci_progress *prog, struct ix_oci_stats *stats, uint8_t digest[ST_SHA256_LEN],
		uint64_t *size, char *why, size_t whylen)
{
	struct ix_oci_stats st = { 0 };
	struct ix_txn *t;
	st_id id;
	int rc;

	if (why && whylen)
		why[0] = '\0';
	if ((rc = ix_txn_begin(ix, &t)) < 0)
		return rc;
	rc = ix_resolve(t, ref, &id);
	ix_txn_end(t);
	if (rc < 0)
		return rc;
	rc = push_id(ix, &id, tag, sink, prog, &st, digest, size, why, whylen);
	if (stats)
		*stats = st;
	return rc;
}

/* ------------------------------------------------------------------ pull */

/* A snapshot on its way in. */
struct in_snap {
	struct st_oci_manifest *om;
	struct st_manifest *m;
};

/* Collects a small blob (a config) in memory, refusing more than max. */
struct mem_sink {
	char *buf;
	size_t len, max;
};

static int mem_sink_fn(void *sctx, const void *buf, size_t len)
{
	struct mem_sink *ms = sctx;

	if (len > ms->max - ms->len)
		return ST_ECORRUPT;
	memcpy(ms->buf + ms->len, buf, len);
	ms->len += len;
	return 0;
}

/* The XXH3-128 of a snapshot's layer list as (id, bytes) pairs: what an
 * OCI manifest carries, checked against the snapshot once it is rebuilt. */
static void layers_digest_om(const struct st_oci_manifest *om, st_id *out)
{
	struct st_hasher *h;

	memset(out, 0, sizeof(*out));
	if (st_hasher_new(&h) < 0)
		return;
	for (uint32_t i = 0; i < om->nlayers; i++) {
		st_hasher_update(h, om->layers[i].id.b, 16);
		st_hasher_update(h, &om->layers[i].size, sizeof(om->layers[i].size));
	}
	st_hasher_final(h, out);
	st_hasher_free(h);
}

static void layers_digest_m(const struct st_manifest *m, st_id *out)
{
	struct st_hasher *h;

	memset(out, 0, sizeof(*out));
	if (st_hasher_new(&h) < 0)
		return;
	for (uint32_t i = 0; i < m->nlayers; i++) {
		uint64_t size = m->layers[i].pages * ST_PAGE_SIZE;
		st_hasher_update(h, m->layers[i].id.b, 16);
		st_hasher_update(h, &size, sizeof(size));
	}
	st_hasher_final(h, out);
	st_hasher_free(h);
}

/* A config that is a manifest delta (docs/oci.md): for the snapshot its
 * descriptor names, and rebuilt at once if its parent is in the store
 * (*out), else left for the pull to rebuild once it has the parent
 * (*out NULL, *base the parent). */
static int config_delta(struct ix *ix, const struct st_oci_manifest *om, const char *buf, size_t len,
			struct st_manifest **out, st_id *base, char *why, size_t whylen)
{
	char inner[ST_WHY_LEN] = "", hex[ST_ID_HEX_LEN + 1];
	struct st_manifest *pm = NULL;
	struct ix_txn *t;
	st_id id;
	int rc;

	if ((rc = st_manifest_delta_peek(buf, len, &id, base, inner, sizeof(inner))) < 0)
		return st_why(why, whylen, ST_EFORMAT, "the config is not a strata manifest delta: %s", inner);
	if (!st_id_equal(&id, &om->config.id)) {
		st_id_format(&id, hex);
		return st_why(why, whylen, ST_EFORMAT, "the config is a delta for snapshot %s, its annotation says otherwise",
			      hex);
	}
	if ((rc = ix_txn_begin(ix, &t)) < 0)
		return rc;
	rc = ix_snap_get(t, base, &pm);
	ix_txn_end(t);
	if (rc == IX_ENOTFOUND) {
		*out = NULL;
		return 0;
	}
	if (rc < 0)
		return rc;
	rc = st_manifest_delta_apply(pm, base, buf, len, out, NULL, inner, sizeof(inner));
	st_manifest_free(pm);
	if (rc < 0)
		return rc == -ENOMEM ? rc : st_why(why, whylen, rc, "the config's manifest delta: %s", inner);
	if ((rc = st_oci_manifest_check(om, *out, why, whylen)) < 0) {
		st_manifest_free(*out);
		*out = NULL;
	}
	return rc;
}

/* Fetch, verify and parse the config of om; *bytes (malloc'd) gets its
 * canonical bytes, *len their length. A delta config whose parent the
 * store lacks gives *out NULL and *delta_base that parent. */
static int fetch_config(struct ix *ix, const struct ix_oci_source *src, const struct st_oci_manifest *om,
			struct st_manifest **out, char **bytes, size_t *len, st_id *delta_base, bool *is_delta,
			char *why, size_t whylen)
{
	struct mem_sink ms = { .max = om->config.size };
	uint8_t sha[ST_SHA256_LEN];
	char *canon = NULL;
	size_t clen;
	int rc;

	if (!(ms.buf = st_sys_malloc(om->config.size + 1)))
		return -ENOMEM;
	rc = src->blob_get(src->ctx, &om->config, 0, mem_sink_fn, &ms, why, whylen);
	if (rc == ST_ECORRUPT || (rc == 0 && ms.len != om->config.size)) {
		rc = st_why(why, whylen, ST_ECORRUPT, "the config is not %" PRIu64 " bytes as its descriptor says",
			    om->config.size);
		goto out_free;
	}
	if (rc < 0)
		goto out_free;
	st_sha256_hash(ms.buf, ms.len, sha);
	if (memcmp(sha, om->config.sha256, ST_SHA256_LEN) != 0) {
		rc = st_why(why, whylen, ST_ECORRUPT, "the config's bytes do not match its sha256 digest");
		goto out_free;
	}
	*is_delta = ix_snap_text_is_delta(ms.buf, ms.len);
	if (*is_delta) {
		if ((rc = config_delta(ix, om, ms.buf, ms.len, out, delta_base, why, whylen)) < 0)
			goto out_free;
		*bytes = ms.buf;
		*len = ms.len;
		return 0;
	}
	char inner[ST_WHY_LEN];
	if ((rc = st_manifest_parse(ms.buf, ms.len, out, inner, sizeof(inner))) < 0) {
		rc = st_why(why, whylen, ST_EFORMAT, "the config is not a strata manifest: %s", inner);
		goto out_free;
	}
	if ((rc = st_manifest_encode(*out, &canon, &clen, why, whylen)) < 0)
		goto out_manifest;
	if (clen != ms.len || memcmp(canon, ms.buf, clen) != 0) {
		rc = st_why(why, whylen, ST_EFORMAT, "the config is a strata manifest but not in canonical form");
		goto out_manifest;
	}
	if ((rc = st_oci_manifest_check(om, *out, why, whylen)) < 0)
		goto out_manifest;
	free(canon);
	*bytes = ms.buf;
	*len = ms.len;
	return 0;
out_manifest:
	st_manifest_free(*out);
	*out = NULL;
out_free:
	free(canon);
	free(ms.buf);
	return rc;
}

/*
 * A layer's sha256 on a thread of its own, beside the transfer. SHA-256 is
 * the larger part of a pull's own work per byte (several times XXH3-128,
 * which the store writer computes as it writes), and done in the
 * transfer's callback it keeps the connection's receive loop waiting. So
 * the callback writes what arrived (the writer's XXH3 and write(2): about
 * the other half of the work), copies it into the next of SHA_SLOTS
 * buffers and returns; the thread hashes the buffers in order. The digest
 * is read only after the thread has hashed every byte (sha_pipe_stop),
 * before the blob is published: what is checked is exactly what was
 * written. Where no thread can be started the callback hashes inline.
 * Measured in docs/oci.md ("Where a pull's time goes").
 */
#define SHA_SLOT (512u << 10)
#define SHA_SLOTS 16 /* 8 MiB in flight: room for the thread to fall behind and catch up */

struct sha_pipe {
	struct st_sha256 *h;    /* the thread's while it runs, else the caller's */
	uint8_t *buf;           /* SHA_SLOTS slots of SHA_SLOT bytes */
	size_t fill;            /* bytes in slot head % SHA_SLOTS (the caller's) */
	bool running;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;      /* a slot was filled or emptied, or the end came */
	/* Under mu: slots [tail, head) are filled, in order, len[] bytes each. */
	unsigned head, tail;
	size_t len[SHA_SLOTS];
	bool end;
};

static void *sha_pipe_main(void *arg)
{
	struct sha_pipe *sp = arg;

	pthread_mutex_lock(&sp->mu);
	for (;;) {
		while (sp->tail == sp->head && !sp->end)
			pthread_cond_wait(&sp->cv, &sp->mu);
		if (sp->tail == sp->head)
			break;
		unsigned slot = sp->tail % SHA_SLOTS;
		size_t len = sp->len[slot];
		pthread_mutex_unlock(&sp->mu);
		st_sha256_update(sp->h, sp->buf + (size_t)slot * SHA_SLOT, len);
		pthread_mutex_lock(&sp->mu);
		sp->tail++;
		pthread_cond_signal(&sp->cv);
	}
	pthread_mutex_unlock(&sp->mu);
	return NULL;
}

/* Hash into h (reset, or holding a resumed prefix): on a thread if one
 * starts, else inline. Never fails. */
static void sha_pipe_start(struct sha_pipe *sp, struct st_sha256 *h)
{
	*sp = (struct sha_pipe){ .h = h };
	if (!(sp->buf = st_sys_malloc((size_t)SHA_SLOTS * SHA_SLOT)))
		return;
	pthread_mutex_init(&sp->mu, NULL);
	pthread_cond_init(&sp->cv, NULL);
	if (pthread_create(&sp->th, NULL, sha_pipe_main, sp) != 0) {
		pthread_cond_destroy(&sp->cv);
		pthread_mutex_destroy(&sp->mu);
		free(sp->buf);
		sp->buf = NULL;
		return;
	}
	sp->running = true;
}

/* Hand the slot being filled to the thread; wait for a free one. */
static void sha_pipe_push(struct sha_pipe *sp)
{
	pthread_mutex_lock(&sp->mu);
	sp->len[sp->head % SHA_SLOTS] = sp->fill;
	sp->head++;
	pthread_cond_signal(&sp->cv);
	while (sp->head - sp->tail == SHA_SLOTS)
		pthread_cond_wait(&sp->cv, &sp->mu);
	pthread_mutex_unlock(&sp->mu);
	sp->fill = 0;
}

static void sha_pipe_update(struct sha_pipe *sp, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	if (!sp->running) {
		st_sha256_update(sp->h, buf, len);
		return;
	}
	while (len) {
		size_t take = SHA_SLOT - sp->fill < len ? SHA_SLOT - sp->fill : len;
		memcpy(sp->buf + (size_t)(sp->head % SHA_SLOTS) * SHA_SLOT + sp->fill, p, take);
		sp->fill += take;
		p += take;
		len -= take;
		if (sp->fill == SHA_SLOT)
			sha_pipe_push(sp);
	}
}

/* Wait until every byte handed over is hashed and stop the thread: h is
 * the caller's again. Never fails. */
static void sha_pipe_stop(struct sha_pipe *sp)
{
	if (sp->running) {
		if (sp->fill)
			sha_pipe_push(sp);
		pthread_mutex_lock(&sp->mu);
		sp->end = true;
		pthread_cond_signal(&sp->cv);
		pthread_mutex_unlock(&sp->mu);
		pthread_join(sp->th, NULL);
		pthread_cond_destroy(&sp->cv);
		pthread_mutex_destroy(&sp->mu);
		sp->running = false;
	}
	free(sp->buf);
	sp->buf = NULL;
}

/* Streams a layer into a resumable store writer, hashing sha256 alongside. */
struct blob_sink {
	struct st_blob_writer *w;
	struct sha_pipe sp;
	uint64_t have, size;
	const struct ix_oci_progress *prog;
	const uint8_t *sha;
	uint32_t index, count;
	uint64_t next_tick;
};

static void prefix_fn(void *ctx, const void *buf, size_t len)
{
	st_sha256_update(ctx, buf, len);
}

static int blob_sink_fn(void *sctx, const void *buf, size_t len)
{
	struct blob_sink *b = sctx;
	int rc;

	if (len > b->size - b->have)
		return ST_ECORRUPT;
	if ((rc = st_blob_writer_write(b->w, buf, len)) < 0)
		return rc;
	sha_pipe_update(&b->sp, buf, len);
	b->have += len;
	/* Not at the end: the END event says that. */
	if (b->have >= b->next_tick && b->have < b->size) {
		emit(b->prog, IX_OCI_BLOB_BYTES, b->sha, b->size, b->have, b->index, b->count, IX_OCI_LAYER);
		b->next_tick = b->have + (4u << 20);
	}
	return 0;
}

/* Fetch one layer into the store, verified for both digests. */
static int fetch_layer(struct ix *ix, const struct ix_oci_source *src, const struct st_oci_desc *d, unsigned flags,
		       const struct ix_oci_progress *prog, uint32_t index, uint32_t count, struct ix_oci_stats *st,
		       char *why, size_t whylen)
{
	struct blob_sink b = { .size = d->size, .prog = prog, .sha = d->sha256, .index = index, .count = count };
	char name[80], hex[ST_ID_HEX_LEN + 1], dg[ST_DIGEST_LEN + 1];
	uint8_t sha[ST_SHA256_LEN];
	struct st_sha256 *h;
	bool dedup;
	int rc;

	st_id_format(&d->id, hex);
	st_digest_format(d->sha256, dg);
	snprintf(name, sizeof(name), "pull-%s", dg + 7);
	if ((rc = st_sha256_new(&h)) < 0)
		return rc;
	rc = st_blob_writer_resume(ix->s, name, prefix_fn, h, &b.w);
	if (rc == -EBUSY) /* another pull of this blob is under way: fetch our own copy */
		rc = st_blob_writer_new(ix->s, &b.w);
	if (rc < 0)
		goto out_sha;
	b.have = st_blob_writer_size(b.w);
	if (b.have > d->size) { /* not a prefix of this blob: start over */
		st_blob_writer_abort(b.w);
		st_sha256_reset(h);
		if ((rc = st_blob_writer_resume(ix->s, name, prefix_fn, h, &b.w)) < 0)
			goto out_sha;
		b.have = 0;
	}
	st->bytes_resumed += b.have;
	uint64_t start = b.have;
	emit(prog, IX_OCI_BLOB_BEGIN, d->sha256, d->size, b.have, index, count, IX_OCI_LAYER);
	if (b.have < d->size) {
		sha_pipe_start(&b.sp, h);
		rc = src->blob_get(src->ctx, d, b.have, blob_sink_fn, &b, why, whylen);
		sha_pipe_stop(&b.sp); /* h holds every byte written, and is ours again */
	}
	st->bytes_moved += b.have - start;
	if (rc == ST_ECORRUPT) {
		st_blob_writer_abort(b.w);
		rc = st_why(why, whylen, ST_ECORRUPT, "layer %s: the source sent more than its %" PRIu64 " bytes", hex,
			    d->size);
		goto out_sha;
	}
	if (rc == 0 && b.have < d->size)
		rc = st_why(why, whylen, -EPIPE, "layer %s: the transfer ended after %" PRIu64 " of %" PRIu64 " bytes",
			    hex, b.have, d->size);
	if (rc < 0) {
		/* Keep what arrived for the next attempt (verified at the end). */
		if (flags & IX_OCI_KEEP_PARTIAL)
			st_blob_writer_suspend(b.w);
		else
			st_blob_writer_abort(b.w);
		goto out_sha;
	}
	st_sha256_final(h, sha);
	if (memcmp(sha, d->sha256, ST_SHA256_LEN) != 0) {
		st_blob_writer_abort(b.w);
		rc = st_why(why, whylen, ST_ECORRUPT, "layer %s: the bytes received do not match digest %s", hex, dg);
		goto out_sha;
	}
	rc = st_blob_writer_commit(b.w, &d->id, NULL, &dedup);
	if (rc == ST_ECORRUPT)
		rc = st_why(why, whylen, ST_ECORRUPT, "layer %s: the bytes match their sha256 but not their strata id", hex);
	if (rc == 0) {
		st->blobs_moved++;
		emit(prog, IX_OCI_BLOB_END, d->sha256, d->size, d->size, index, count, IX_OCI_LAYER);
	}
out_sha:
	st_sha256_free(h);
	return rc;
}

/* Lazy records a pull will commit with its snapshots. */
struct lazy_list {
	struct ix_lazy_put *v;
	size_t n, cap;
	bool committed; /* the records are in the index: their files stay */
};

/* Free the list; uncommitted records' files go too. */
static void lazy_list_free(struct ix *ix, struct lazy_list *lz)
{
	for (size_t i = 0; i < lz->n; i++) {
		if (!lz->committed)
			ix_lazy_files_del(ix, &lz->v[i].layer);
		free(lz->v[i].val);
	}
	free(lz->v);
}

/* What a record of om's layer i from src would say of its source. */
static struct ix_lazy_source lazy_source(const struct ix_oci_source *src, const struct st_oci_manifest *om, uint32_t i,
					 const uint8_t manifest_sha[ST_SHA256_LEN])
{
	struct ix_lazy_source ls = { src->origin, src->insecure, om->layers[i].sha256, manifest_sha, NULL };

	if (om->nchunks == om->nlayers)
		ls.chunks_sha = om->chunks[i].sha256;
	return ls;
}

/* ix_lazy_rec_match for om's layer i pulled from src (lazy.c says what is
 * compared). A source without an origin (an OCI layout) or a manifest
 * without chunk indexes matches no record. */
static int lazy_match(struct ix *ix, const struct ix_oci_source *src, const struct st_oci_manifest *om, uint32_t i,
		      const uint8_t manifest_sha[ST_SHA256_LEN])
{
	struct ix_lazy_source ls = lazy_source(src, om, i, manifest_sha);
	struct ix_txn *t;
	int m = IX_LAZY_NONE;

	if (ix_txn_begin(ix, &t) == 0) {
		m = ix_lazy_rec_match(ix, t->txn, &om->layers[i].id, src->origin && ls.chunks_sha ? &ls : NULL);
		ix_txn_end(t);
	}
	return m;
}

/*
 * Lazy pull of om's layer i: fetch its chunk index (checked against the
 * descriptor's sha256 and id, parsed, describing exactly this layer),
 * make the partial files, and queue the record for the commit.
 */
static int lazy_layer(struct ix *ix, const struct ix_oci_source *src, const struct st_oci_manifest *om, uint32_t i,
		      const uint8_t manifest_sha[ST_SHA256_LEN], struct lazy_list *lz, struct ix_oci_stats *st,
		      char *why, size_t whylen)
{
	const struct st_oci_desc *d = &om->layers[i], *cd;
	char hex[ST_ID_HEX_LEN + 1], inner[ST_WHY_LEN] = "";
	struct ix_chunks *c = NULL;
	struct mem_sink ms = { 0 };
	uint8_t sha[ST_SHA256_LEN];
	st_id got;
	int rc;

	st_id_format(&d->id, hex);
	for (size_t k = 0; k < lz->n; k++)
		if (st_id_equal(&lz->v[k].layer, &d->id))
			return 0; /* listed by two snapshots of the chain */
	if (!src->origin)
		return st_why(why, whylen, -ENOTSUP, "a lazy pull needs a registry");
	if (om->nchunks != om->nlayers)
		return st_why(why, whylen, IX_ELAZY_NOINDEX, "layer %s: %s", hex, ix_lazy_strerror(IX_ELAZY_NOINDEX));
	cd = &om->chunks[i];
	/* At most one id per smallest chunk: anything larger is not an index of this layer. */
	uint64_t max = IX_CHUNKS_HEADER + 16 * ((d->size + IX_CHUNK_MIN - 1) / IX_CHUNK_MIN);
	if (cd->size > max || cd->size < IX_CHUNKS_HEADER)
		return st_why(why, whylen, ST_ECORRUPT, "the chunk index of layer %s is %" PRIu64 " bytes, not an index "
			      "of a %" PRIu64 "-byte layer: refused", hex, cd->size, d->size);
	ms.max = cd->size;
	if (!(ms.buf = st_sys_malloc(cd->size)))
		return -ENOMEM;
	rc = src->blob_get(src->ctx, cd, 0, mem_sink_fn, &ms, why, whylen);
	if (rc == ST_ECORRUPT || (rc == 0 && ms.len != cd->size)) {
		rc = st_why(why, whylen, ST_ECORRUPT, "the chunk index of layer %s is not %" PRIu64 " bytes: refused", hex,
			    cd->size);
		goto out_free;
	}
	if (rc < 0)
		goto out_free;
	st->bytes_chunks += ms.len;
	st_sha256_hash(ms.buf, ms.len, sha);
	st_id_hash(ms.buf, ms.len, &got);
	if (memcmp(sha, cd->sha256, ST_SHA256_LEN) != 0 || !cd->has_id || !st_id_equal(&got, &cd->id)) {
		rc = st_why(why, whylen, ST_ECORRUPT, "the chunk index of layer %s does not match its digest in the "
			    "manifest (tampered?): refused", hex);
		goto out_free;
	}
	if ((rc = ix_chunks_parse(ms.buf, ms.len, &c, inner, sizeof(inner))) < 0) {
		rc = st_why(why, whylen, rc, "the chunk index of layer %s: %s: refused", hex, inner);
		goto out_free;
	}
	if (!st_id_equal(&c->layer, &d->id) || c->size != d->size) {
		rc = st_why(why, whylen, ST_ECORRUPT, "the chunk index of layer %s describes another layer: refused", hex);
		goto out_free;
	}
	if ((rc = ST_ARRAY_RESERVE(lz->v, lz->cap, lz->n + 1)) < 0)
		goto out_free;
	struct ix_lazy_put *p = &lz->v[lz->n];
	*p = (struct ix_lazy_put){ 0 };
	p->layer = d->id;
	/* The record names what it was recorded from, so that no pull from
	 * another source reuses it (lazy_match). */
	struct ix_lazy_source from = lazy_source(src, om, i, manifest_sha);
	if ((rc = ix_lazy_rec_encode(c, &from, &p->val, &p->len)) < 0)
		goto out_free;
	if ((rc = ix_lazy_files_make(ix, &d->id, d->size, c->n)) < 0) {
		free(p->val);
		p->val = NULL;
		ix_lazy_files_del(ix, &d->id);
		goto out_free;
	}
	lz->n++;
	st->layers_lazy++;
out_free:
	ix_chunks_free(c);
	free(ms.buf);
	return rc;
}

static bool snap_in_store(struct ix *ix, const st_id *id)
{
	struct ix_txn *t;
	bool has = false;

	if (ix_txn_begin(ix, &t) == 0) {
		has = ix_snap_has(t, id);
		ix_txn_end(t);
	}
	return has;
}

/* One pull: what it fetched, recorded and staged so far. */
struct pull {
	struct ix *ix;
	const struct ix_oci_source *src;
	unsigned flags;
	const struct ix_oci_progress *prog;
	struct ix_oci_stats st;
	struct sha_list l;        /* verified (id, sha256) pairs, layers and configs */
	struct lazy_list lz;      /* lazy records to commit */
	st_id *added;             /* blobs this pull published (rolled back on failure) */
	size_t nadded, capadded;
	st_id *stale;             /* layers fetched whole whose lazy record another source made */
	size_t nstale, capstale;
	/* The chain's canonical configs, staged in an unlinked file of the
	 * store's tmp/ as they are verified, so memory holds one link at a
	 * time (OCI_CHAIN_MAX links of up to ST_MANIFEST_MAX_BYTES each would
	 * not fit), read back one at a time by the commit. */
	int stage_fd;
	uint64_t stage_off;
	struct ix_stage_link *links;
	size_t n, caplinks;
	/* Links whose config is a delta of a parent the store lacked when it
	 * came: rebuilt and checked (layers: the XXH3-128 of the OCI
	 * manifest's list) once the chain is here, before any commit. */
	struct deferred {
		size_t link;
		st_id layers;
		uint32_t nlayers;
	} *defer;
	size_t ndefer, capdefer;
	st_id *dkeys;             /* delta configs' own ids: their origin is recorded with the layers' */
	size_t ndkeys, capdkeys;
	char *why;
	size_t whylen;
};

/*
 * Rebuild every deferred delta now that its parent is here: oldest link
 * first, each from the one before it (or the store), one manifest in
 * memory at a time. Each result hashes to its id (st_manifest_delta_apply)
 * and carries exactly the layers its OCI manifest listed.
 */
static int resolve_deferred(struct pull *p)
{
	struct st_manifest *prev = NULL;
	st_id prev_id = { 0 };
	size_t d = p->ndefer;
	int rc = 0;

	if (!p->ndefer)
		return 0;
	for (size_t k = p->n; k-- > 0 && rc == 0;) {
		struct st_manifest *m = NULL;
		char *buf = NULL, inner[ST_WHY_LEN] = "", hex[ST_ID_HEX_LEN + 1];
		st_id id, base;

		if ((rc = ix_stage_read(p->stage_fd, &p->links[k], &buf)) < 0)
			break;
		st_id_format(&p->links[k].id, hex);
		if (ix_snap_text_is_delta(buf, p->links[k].len) &&
		    st_manifest_delta_peek(buf, p->links[k].len, &id, &base, NULL, 0) == 0) {
			struct st_manifest *pm = NULL;
			if (prev && st_id_equal(&prev_id, &base)) {
				pm = prev;
			} else {
				struct ix_txn *t;
				if ((rc = ix_txn_begin(p->ix, &t)) == 0) {
					rc = ix_snap_get(t, &base, &pm);
					ix_txn_end(t);
				}
				if (rc < 0) {
					char bhex[ST_ID_HEX_LEN + 1];
					st_id_format(&base, bhex);
					rc = rc == IX_ENOTFOUND ? st_why(p->why, p->whylen, IX_ENOTFOUND,
									"snapshot %s is a delta of %s, which is neither in "
									"this store nor in the chain pulled", hex, bhex)
								: rc;
					free(buf);
					break;
				}
			}
			rc = st_manifest_delta_apply(pm, &base, buf, p->links[k].len, &m, NULL, inner, sizeof(inner));
			if (pm != prev)
				st_manifest_free(pm);
			if (rc < 0 && rc != -ENOMEM)
				rc = st_why(p->why, p->whylen, rc, "snapshot %s: the config's manifest delta: %s", hex, inner);
		} else {
			rc = st_manifest_parse(buf, p->links[k].len, &m, NULL, 0);
		}
		free(buf);
		if (rc == 0 && d > 0 && p->defer[d - 1].link == k) {
			st_id got;
			layers_digest_m(m, &got);
			if (p->defer[d - 1].nlayers != m->nlayers)
				rc = st_why(p->why, p->whylen, ST_EFORMAT,
					    "snapshot %s: the OCI manifest carries %" PRIu32 " layer(s), the snapshot lists %" PRIu32,
					    hex, p->defer[d - 1].nlayers, m->nlayers);
			else if (!st_id_equal(&got, &p->defer[d - 1].layers))
				rc = st_why(p->why, p->whylen, ST_EFORMAT,
					    "snapshot %s: a layer of the snapshot is not carried by its OCI manifest (or not "
					    "with its size)", hex);
			d--;
		}
		st_manifest_free(prev);
		prev = m;
		prev_id = p->links[k].id;
	}
	st_manifest_free(prev);
	return rc;
}

static int stage_open(struct pull *p)
{
	int dfd = st_store_dirfd(p->ix->s);
	char name[64];

	int fd = st_sys_openat(dfd, "tmp", O_TMPFILE | O_RDWR, 0600);
	if (fd >= 0) {
		p->stage_fd = fd;
		return 0;
	}
	if (fd != -EOPNOTSUPP && fd != -EISDIR && fd != -ENOENT)
		return fd;
	/* No O_TMPFILE here: a named file, unlinked at once. */
	snprintf(name, sizeof(name), "tmp/pull-stage-%ld", (long)getpid());
	if ((fd = st_sys_openat(dfd, name, O_CREAT | O_EXCL | O_RDWR, 0600)) < 0)
		return fd;
	p->stage_fd = fd;
	(void)st_sys_unlinkat(dfd, name, 0);
	return 0;
}

/* Append one link's verified canonical config to the stage. */
static int stage_put(struct pull *p, const st_id *id, const char *json, size_t len)
{
	int rc;

	if (p->stage_off + len > OCI_CHAIN_BYTES_MAX)
		return st_why(p->why, p->whylen, ST_ELAYOUT, "the chain's snapshot manifests are over %llu MiB: refused",
			      OCI_CHAIN_BYTES_MAX >> 20);
	if (p->stage_fd < 0 && (rc = stage_open(p)) < 0)
		return rc;
	if ((rc = ST_ARRAY_RESERVE(p->links, p->caplinks, p->n + 1)) < 0)
		return rc;
	if ((rc = st_sys_pwrite_all(p->stage_fd, json, len, (off_t)p->stage_off)) < 0)
		return rc;
	p->links[p->n++] = (struct ix_stage_link){ *id, p->stage_off, len };
	p->stage_off += len;
	return 0;
}

static int id_list_add(st_id **v, size_t *cap, size_t *n, const st_id *id)
{
	if (ST_ARRAY_RESERVE(*v, *cap, *n + 1) < 0)
		return -ENOMEM;
	(*v)[(*n)++] = *id;
	return 0;
}

static void skipped(struct pull *p, const struct st_oci_desc *d, uint32_t i, uint32_t count)
{
	p->st.blobs_skipped++;
	p->st.bytes_skipped += d->size;
	emit(p->prog, IX_OCI_BLOB_SKIP, d->sha256, d->size, d->size, i, count, IX_OCI_LAYER);
}

/* Fetch layer i of om whole from the pull's source, verified for sha256
 * and id as it streams. */
static int pull_whole(struct pull *p, const struct st_oci_manifest *om, uint32_t i)
{
	const struct st_oci_desc *d = &om->layers[i];
	int rc = fetch_layer(p->ix, p->src, d, p->flags, p->prog, i, om->nlayers, &p->st, p->why, p->whylen);

	if (rc < 0)
		return rc;
	if ((rc = id_list_add(&p->added, &p->capadded, &p->nadded, &d->id)) < 0)
		return rc;
	return sha_list_add(&p->l, &d->id, d->sha256);
}

/* Every layer of om (whose manifest has sha256 msha) the store lacks.
 * existing: om is a snapshot the store holds (no record can be added for
 * it now: a layer it lacks with no lazy record is fetched whole). */
static int pull_layers(struct pull *p, const struct st_oci_manifest *om, const uint8_t msha[ST_SHA256_LEN],
		       bool existing)
{
	struct ix *ix = p->ix;
	int rc;

	for (uint32_t i = 0; i < om->nlayers; i++) {
		const struct st_oci_desc *d = &om->layers[i];
		uint8_t known[ST_SHA256_LEN];
		char hex[ST_ID_HEX_LEN + 1];
		bool seen = false;

		for (size_t j = 0; j < p->l.n && !seen; j++)
			seen = st_id_equal(&p->l.ids[j], &d->id);
		if (seen)
			continue;
		st_id_format(&d->id, hex);
		rc = ix_sha256_get(ix, &d->id, known);
		if (rc == 0 && memcmp(known, d->sha256, ST_SHA256_LEN) != 0)
			return st_why(p->why, p->whylen, ST_ECORRUPT,
				      "layer %s: its digest differs from the one this store recorded for those bytes", hex);
		if (rc < 0 && rc != IX_ENOTFOUND)
			return rc;
		bool sha_known = rc == 0;
		if (st_blob_has(ix->s, &d->id)) {
			/* A blob is published only after it hashed to its id. The
			 * descriptor's sha256 for it is this registry's word, not
			 * hashed here: the table takes it only if it already had it
			 * (else a hostile registry could record a wrong digest for a
			 * layer, and every later pull of it would be refused). */
			skipped(p, d, i, om->nlayers);
			if (sha_known && (rc = sha_list_add(&p->l, &d->id, d->sha256)) < 0)
				return rc;
			continue;
		}
		switch (lazy_match(ix, p->src, om, i, msha)) {
		case IX_LAZY_SAME:
			/* Trusted as far as this request's own source: the record
			 * was made from this origin with this very chunk index, so
			 * it says no more than this manifest does. Its sha256 is
			 * still no verified fact: not added to the table. */
			if (p->flags & IX_OCI_LAZY) {
				skipped(p, d, i, om->nlayers);
				continue;
			}
			/* A full pull completes it before anything is committed:
			 * the whole must hash to the layer's id. */
			if (p->src->lazy) {
				if ((rc = ix_lazy_complete(p->src->lazy, &d->id, p->why, p->whylen)) < 0)
					return rc;
				p->st.layers_completed++;
				continue;
			}
			if ((rc = pull_whole(p, om, i)) < 0)
				return rc;
			continue;
		case IX_LAZY_OTHER:
			/* Recorded from another source (or one that did not say
			 * which chunk index): its chunks were checked only against
			 * that source's chunk index, which may describe other bytes
			 * under this id. Not trusted for this request, lazy or
			 * not: the layer is fetched whole from this source and
			 * checked against its sha256 and id; the record then goes. */
			if ((rc = pull_whole(p, om, i)) < 0)
				return rc;
			if ((rc = id_list_add(&p->stale, &p->capstale, &p->nstale, &d->id)) < 0)
				return rc;
			continue;
		default:
			break;
		}
		if ((p->flags & IX_OCI_LAZY) && !existing) {
			if ((rc = lazy_layer(ix, p->src, om, i, msha, &p->lz, &p->st, p->why, p->whylen)) < 0)
				return rc;
			continue;
		}
		if ((rc = pull_whole(p, om, i)) < 0)
			return rc;
	}
	return 0;
}

/* A pull of a snapshot the store holds: its layers the store lacks (lazy
 * ones) are checked against this source, completed or fetched (as
 * pull_layers says), after checking that om carries exactly the stored
 * snapshot's layers. */
static int pull_existing(struct pull *p, const struct st_oci_manifest *om, const uint8_t msha[ST_SHA256_LEN])
{
	struct st_manifest *m = NULL;
	struct ix_txn *t;
	int rc;

	if ((rc = ix_txn_begin(p->ix, &t)) < 0)
		return rc;
	rc = ix_snap_get(t, &om->config.id, &m);
	ix_txn_end(t);
	if (rc < 0)
		return rc;
	if ((rc = st_oci_manifest_check(om, m, p->why, p->whylen)) == 0)
		rc = pull_layers(p, om, msha, true);
	st_manifest_free(m);
	return rc;
}

int ix_oci_pull(struct ix *ix, const struct ix_oci_source *src, const char *ref, const char *tag,
		unsigned flags, const struct ix_oci_progress *prog, struct ix_oci_stats *stats, st_id *out_id,
		char *why, size_t whylen)
{
	struct pull p = { .ix = ix, .src = src, .flags = flags, .prog = prog, .stage_fd = -1, .why = why,
			  .whylen = whylen };
	char cur[ST_DIGEST_LEN + 1];
	const char *curref = ref;
	st_id parent = { 0 }, top = { 0 };
	int rc;

	if (why && whylen)
		why[0] = '\0';
	if (ix->rdonly)
		return ST_EREADONLY;
	if (tag && !st_name_valid(tag))
		return ST_EBADNAME;

	/*
	 * Top down, one link at a time until a snapshot we hold: its
	 * manifest, its config, then its layers the store lacks; its config is
	 * staged and the rest freed before the next link. Nothing is committed
	 * before the whole chain is here.
	 */
	for (size_t depth = 0;; depth++) {
		struct st_oci_manifest *om = NULL;
		struct st_manifest *m = NULL;
		uint8_t want[ST_SHA256_LEN], sha[ST_SHA256_LEN];
		char *json = NULL, *config = NULL, inner[ST_WHY_LEN];
		size_t len = 0, clen = 0;
		bool last = false;

		if (depth >= OCI_CHAIN_MAX) {
			rc = st_why(why, whylen, ST_ELAYOUT, "the chain of parents is longer than %d", OCI_CHAIN_MAX);
			goto out_rollback;
		}
		rc = src->manifest_get(src->ctx, curref, &json, &len, why, whylen);
		if (rc < 0 && depth > 0 && src->not_found && src->not_found(rc)) {
			/* The parent's manifest is not there (a copy of the top
			 * alone): the child is complete without it, unless it came
			 * as a delta of that parent. */
			if (p.ndefer && p.defer[p.ndefer - 1].link == p.n - 1) {
				char hex[ST_ID_HEX_LEN + 1], bhex[ST_ID_HEX_LEN + 1];
				st_id_format(&p.links[p.n - 1].id, hex);
				st_id_format(&parent, bhex);
				rc = st_why(why, whylen, IX_ENOTFOUND,
					    "snapshot %s is sent as a delta of %s, whose manifest %s is not in the registry "
					    "and which is not in this store: push the parent there, or pull it first",
					    hex, bhex, curref);
				goto out_rollback;
			}
			if (why && whylen)
				why[0] = '\0';
			break;
		}
		if (rc < 0)
			goto out_rollback;
		st_sha256_hash(json, len, sha);
		if (st_digest_parse(curref, want) == 0 && memcmp(want, sha, ST_SHA256_LEN) != 0) {
			free(json);
			rc = st_why(why, whylen, ST_ECORRUPT, "manifest %s: its bytes do not match the digest", curref);
			goto out_rollback;
		}
		rc = st_oci_manifest_parse(json, len, &om, inner, sizeof(inner));
		free(json);
		if (rc < 0) {
			st_why(why, whylen, rc, "%s: %s", curref, inner);
			goto out_rollback;
		}
		if (depth > 0 && !st_id_equal(&om->config.id, &parent)) {
			rc = st_why(why, whylen, ST_EFORMAT, "manifest %s: its subject is not the snapshot's parent", curref);
			goto out_link;
		}
		emit(prog, IX_OCI_MANIFEST, sha, len, len, 0, 0, IX_OCI_MANIFEST_BLOB);
		if (depth == 0)
			top = om->config.id;
		if (snap_in_store(ix, &om->config.id)) {
			if (depth == 0) {
				/* Held already, but maybe with lazy layers another
				 * source recorded: those are checked against this one. */
				p.st.existed = true;
				rc = pull_existing(&p, om, sha);
			}
			st_oci_manifest_free(om);
			if (rc < 0)
				goto out_rollback;
			break;
		}
		st_id base, key = om->config.id;
		bool delta = false;
		if ((rc = fetch_config(ix, src, om, &m, &config, &clen, &base, &delta, why, whylen)) < 0)
			goto out_link;
		/* A delta's sha256 is filed under the delta's own XXH3-128 (as a push does). */
		if (delta) {
			st_id_hash(config, clen, &key);
			if ((rc = ST_ARRAY_RESERVE(p.dkeys, p.capdkeys, p.ndkeys + 1)) < 0)
				goto out_link;
			p.dkeys[p.ndkeys++] = key;
		}
		if ((rc = sha_list_add(&p.l, &key, om->config.sha256)) < 0)
			goto out_link;
		if (!m && !om->has_subject) {
			char hex[ST_ID_HEX_LEN + 1], bhex[ST_ID_HEX_LEN + 1];
			st_id_format(&om->config.id, hex);
			st_id_format(&base, bhex);
			rc = st_why(why, whylen, IX_ENOTFOUND,
				    "snapshot %s is sent as a delta of %s, which is not in this store and which its "
				    "manifest names no subject for: pull %s first", hex, bhex, bhex);
			goto out_link;
		}
		if ((rc = pull_layers(&p, om, sha, false)) < 0)
			goto out_link;
		if ((rc = stage_put(&p, &om->config.id, config, clen)) < 0)
			goto out_link;
		if (!m) {
			/* Its parent comes next in the chain: rebuilt once it is here. */
			if ((rc = ST_ARRAY_RESERVE(p.defer, p.capdefer, p.ndefer + 1)) < 0)
				goto out_link;
			p.defer[p.ndefer].link = p.n - 1;
			layers_digest_om(om, &p.defer[p.ndefer].layers);
			p.defer[p.ndefer].nlayers = om->nlayers;
			p.ndefer++;
			parent = base;
			last = false;
			st_digest_format(om->subject.sha256, cur);
			curref = cur;
			goto out_link;
		}
		last = !m->has_parent || !om->has_subject || snap_in_store(ix, &m->parent);
		parent = m->parent;
		if (!last) {
			st_digest_format(om->subject.sha256, cur);
			curref = cur;
		}
out_link:
		st_oci_manifest_free(om);
		st_manifest_free(m);
		free(config);
		if (rc < 0)
			goto out_rollback;
		if (last)
			break;
	}

	if ((rc = resolve_deferred(&p)) < 0)
		goto out_rollback;
	/* The whole chain in one transaction, oldest first: all or nothing. */
	if ((rc = sha_list_commit(ix, &p.l)) < 0)
		goto out_rollback;
	if (p.n) {
		/* Once the records are in, their files are theirs. */
		rc = ix_snap_commit_chain_staged(ix, p.stage_fd, p.links, p.n, tag, flags & IX_TAG_FORCE, &top, p.lz.v,
						 p.lz.n, &p.lz.committed);
		p.st.snapshots = (uint32_t)p.n;
	} else if (tag) {
		rc = ix_tag_set(ix, tag, &top, flags & IX_TAG_FORCE);
	}
	if (rc < 0)
		goto out_rollback;
	for (size_t i = 0; i < p.nstale; i++)
		ix_lazy_rec_drop(ix, &p.stale[i]);
	/* Best effort, as the registry's own record of what it served. */
	if (src->origin && p.ndkeys && !ix->rdonly)
		ix_origin_put(ix, p.dkeys, p.ndkeys, src->origin);
	if (out_id)
		*out_id = top;
	goto out_free;
out_rollback:
	if (p.nadded && !(flags & IX_OCI_KEEP_PARTIAL))
		ix_blobs_rollback(ix, p.added, p.nadded);
out_free:
	if (p.stage_fd >= 0)
		(void)st_sys_close(p.stage_fd);
	free(p.links);
	free(p.defer);
	free(p.dkeys);
	free(p.added);
	free(p.stale);
	sha_list_free(&p.l);
	lazy_list_free(ix, &p.lz);
	if (stats)
		*stats = p.st;
	return rc;
}
