/* check.c: the store's checks for a host program: the whole store (strata_store_check, its repair), the snapshots lacking layers, the paths others may read, one snapshot's layers, a snapshot directory. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "index/lazy.h"
#include "mount/api/api_int.h"

_Static_assert(STRATA_PROBLEM_CHUNK == IX_PROBLEM_CHUNK + 1, "STRATA_PROBLEM_* are the index's kinds, from 1");

struct check {
	strata_check_fn cb;
	strata_problem_fn verify_cb; /* strata_store_verify's: errors only, id and detail */
	void *ctx;
};

static int one_problem(const struct ix_problem *p, void *ctx)
{
	struct check *c = ctx;
	char hex[ST_ID_HEX_LEN + 1];

	st_id_format(&p->id, hex);
	if (c->verify_cb) {
		if (p->error)
			c->verify_cb(c->ctx, hex, p->detail ? p->detail : "");
		return 0;
	}
	if (!c->cb)
		return 0;
	struct strata_problem sp = { .size = sizeof(sp), .kind = (int)p->kind + 1, .error = p->error, .id = hex,
				     .detail = p->detail ? p->detail : "", .tag = p->tag, .action = p->action };
	return c->cb(c->ctx, &sp);
}

#define CHECK(name) st->check[STRATA_STORE_INFO_CHECK_##name - STRATA_STORE_INFO_CHECK_SNAPSHOTS]

int api_store_check(strata_store *st, unsigned flags, strata_check_fn cb, strata_problem_fn verify_cb, void *ctx)
{
	struct check c = { cb, verify_cb, ctx };
	struct ix_fsck_stats fs = { 0 };

	if (!st)
		return api_fail(-EINVAL, "verify: the store is NULL");
	if (flags & ~(unsigned)(STRATA_VERIFY_HASH | STRATA_CHECK_REPAIR))
		return api_fail(-EINVAL, "verify: unknown flags 0x%x", flags);
	unsigned ixf = (flags & STRATA_VERIFY_HASH ? IX_FSCK_HASH : 0) | (flags & STRATA_CHECK_REPAIR ? IX_FSCK_REPAIR : 0);
	int rc = ix_fsck(st->ix, ixf, one_problem, &c, &fs);
	pthread_mutex_lock(&st->gc_lock);
	CHECK(SNAPSHOTS) = fs.snapshots;
	CHECK(BLOBS) = fs.blobs;
	CHECK(BYTES_HASHED) = fs.bytes_hashed;
	CHECK(ORPHANS) = fs.orphans;
	CHECK(LAZY) = fs.lazy;
	CHECK(LAZY_CHUNKS) = fs.lazy_chunks;
	CHECK(ERRORS) = fs.errors;
	CHECK(REPAIRED) = fs.repaired;
	CHECK(REMAINING) = fs.remaining;
	pthread_mutex_unlock(&st->gc_lock);
	if (rc < 0)
		return api_fail(rc, "%s %s: %s", flags & STRATA_CHECK_REPAIR ? "repair" : "verify",
				st_store_path(st->st), st_strerror(rc));
	return rc;
}

int strata_store_check(strata_store *st, unsigned flags, strata_check_fn cb, void *ctx)
{
	return api_store_check(st, flags, cb, NULL, ctx);
}

struct lacking {
	strata_lacking_fn cb;
	void *ctx;
	int n;
};

static int one_lacking(const st_id *id, uint32_t missing, uint32_t nlayers, void *ctx)
{
	struct lacking *l = ctx;
	char hex[ST_ID_HEX_LEN + 1];

	st_id_format(id, hex);
	l->n++;
	return l->cb ? l->cb(l->ctx, hex, missing, nlayers) : 0;
}

int strata_store_lacking(strata_store *st, strata_lacking_fn cb, void *ctx)
{
	struct lacking l = { cb, ctx, 0 };

	if (!st)
		return api_fail(-EINVAL, "lacking: the store is NULL");
	int rc = ix_snap_lacking_foreach(st->ix, one_lacking, &l);
	if (rc < 0)
		return api_fail(rc, "the snapshots of %s lacking layers: %s", st_store_path(st->st), st_strerror(rc));
	return rc > 0 ? rc : l.n;
}

struct exposed {
	strata_exposed_fn cb;
	void *ctx;
};

static int one_exposed(const struct st_exposed *e, void *ctx)
{
	struct exposed *x = ctx;
	struct strata_exposed se = { .size = sizeof(se), .path = e->path, .mode = (uint32_t)e->mode,
				     .want = (uint32_t)e->want, .dir = e->dir, .fixed = e->fixed };

	return x->cb ? x->cb(x->ctx, &se) : 0;
}

int strata_store_exposed(strata_store *st, unsigned flags, strata_exposed_fn cb, void *ctx)
{
	struct exposed x = { cb, ctx };
	uint64_t n = 0;

	if (!st)
		return api_fail(-EINVAL, "exposed: the store is NULL");
	if (flags & ~(unsigned)(STRATA_EXPOSED_DIRS | STRATA_EXPOSED_FIX))
		return api_fail(-EINVAL, "exposed: unknown flags 0x%x", flags);
	if ((flags & STRATA_EXPOSED_FIX) && st_store_rdonly(st->st))
		return api_fail(ST_EREADONLY, "exposed: store %s was opened read-only", st_store_path(st->st));
	unsigned sf = (flags & STRATA_EXPOSED_DIRS ? ST_PERM_CHECK_DIRS : 0) |
		      (flags & STRATA_EXPOSED_FIX ? ST_PERM_CHECK_FIX : 0);
	int rc = st_store_perm_check(st->st, sf, one_exposed, &x, &n);
	if (rc < 0)
		return api_fail(rc, "who can read store %s: %s", st_store_path(st->st), st_strerror(rc));
	if (rc > 0)
		return rc;
	return n > INT32_MAX ? INT32_MAX : (int)n;
}

struct layer_ctx {
	strata_layer_check_fn cb;
	void *ctx;
	struct strata_layer_check *ev;
	const struct ix_lazy_check *chk;
};

static int bad_chunk(void *ctx, const struct ix_lazy_bad *b)
{
	struct layer_ctx *l = ctx;
	struct strata_layer_check ev = *l->ev;

	ev.kind = STRATA_LAYER_BAD_CHUNK;
	ev.status = IX_ELAZY_BADCHUNK;
	ev.source = l->chk->origin;
	ev.chunk = b->chunk;
	ev.off = b->off;
	ev.len = b->len;
	return l->cb ? l->cb(l->ctx, &ev) : 0;
}

int strata_store_verify_snapshot(strata_store *st, const char *ref, strata_layer_check_fn cb, void *ctx)
{
	struct st_manifest *m = NULL;
	st_id id;
	int rc;

	if (!st)
		return api_fail(-EINVAL, "verify: the store is NULL");
	if ((rc = api_store_snap_get(st, "verify", ref, &id, &m)) < 0)
		return rc;
	struct ix_lazy *lz = api_store_lazy_read(st);
	for (uint32_t i = 0; i < m->nlayers && rc == 0; i++) {
		char hex[ST_ID_HEX_LEN + 1];
		struct ix_lazy_info li;
		struct ix_lazy_check chk = { 0 }; /* ev points into it until cb returns */
		uint64_t size = 0;
		st_id_format(&m->layers[i].id, hex);
		struct strata_layer_check ev = { .size = sizeof(ev), .kind = STRATA_LAYER_CHECKED, .layer = hex,
						 .origin = "", .source = "", .chunk_index = "" };
		int lrc = st_blob_size(st->st, &m->layers[i].id, &size);
		if (lrc == -ENOENT && lz && ix_lazy_layer_info(lz, &m->layers[i].id, &li) == 1) {
			struct layer_ctx lc = { cb, ctx, &ev, &chk };
			ev.lazy = 1;
			ev.chunks = li.chunks;
			ev.origin = li.origin;
			lrc = ix_lazy_check(st->ix, &m->layers[i].id, bad_chunk, &lc, &chk);
			if (lrc > 0) {
				rc = lrc; /* cb stopped it */
				break;
			}
			ev.status = lrc == IX_ENOTFOUND ? 0 : lrc;
			ev.present = chk.present;
			ev.bad = chk.bad;
			ev.source = chk.origin;
			ev.chunk_index = chk.chunks_digest;
		} else {
			if (lrc == 0 && size != m->layers[i].pages * ST_PAGE_SIZE)
				lrc = ST_ELAYOUT;
			if (lrc == 0)
				lrc = st_blob_verify(st->st, &m->layers[i].id);
			ev.status = lrc;
		}
		if (cb)
			rc = cb(ctx, &ev);
	}
	uint32_t n = m->nlayers;
	st_manifest_free(m);
	if (rc < 0)
		return api_fail(rc, "verify %s: %s", ref, st_strerror(rc));
	return rc > 0 ? rc : (int)n;
}

int strata_dir_verify(const char *dir, uint32_t *layers)
{
	struct st_manifest *m = NULL;
	char why[ST_WHY_LEN] = "";
	int rc;

	if (!dir)
		return api_fail(-EINVAL, "verify: the directory is NULL");
	if ((rc = st_snapdir_read(dir, &m, why, sizeof(why))) == 0) {
		if (layers)
			*layers = m->nlayers;
		rc = st_snapdir_verify(dir, m, why, sizeof(why));
	}
	uint32_t n = m ? m->nlayers : 0;
	st_manifest_free(m);
	if (rc < 0)
		return api_fail_why(rc, why, "%s: %s", dir, why[0] ? why : st_strerror(rc));
	return (int)n;
}
