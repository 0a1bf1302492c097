/* snap.c: snapshot records: commit (refcounts, children, tag), get, info, delete, listings. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "index/index_int.h"

int ix_snap_rec_get(struct ix *ix, MDB_txn *txn, const st_id *id, MDB_val *v)
{
	MDB_val k = ix_val(id->b, sizeof(id->b));
	int rc = ix_mdb(mdb_get(txn, ix->snaps, &k, v));

	return rc < 0 ? ix_err(rc) : 0;
}

/* A record strata wrote as a delta: its canonical text ends with the
 * delta's version (a full manifest's ends with version 1 or 2). Only a
 * dispatch: either form is then parsed and checked in full. */
bool ix_snap_text_is_delta(const void *p, size_t len)
{
	static const char tail[] = ",\"version\":3}";
	size_t n = sizeof(tail) - 1;

	return len > n && memcmp((const char *)p + len - n, tail, n) == 0;
}

static bool rec_is_delta(const MDB_val *v)
{
	return ix_snap_text_is_delta(v->mv_data, v->mv_size);
}

/* The one-entry cache (index_int.h): a copy of id's manifest, or NULL. */
static struct st_manifest *cache_get(struct ix *ix, const st_id *id, unsigned *depth)
{
	struct st_manifest *m = NULL;

	pthread_mutex_lock(&ix->cache_lock);
	if (ix->cache_has && st_id_equal(&ix->cache_id, id) && st_manifest_dup(ix->cache_m, &m) == 0)
		*depth = ix->cache_depth;
	pthread_mutex_unlock(&ix->cache_lock);
	return m;
}

/* Remember m as id's manifest (best effort: out of memory keeps nothing). */
static void cache_put(struct ix *ix, const st_id *id, const struct st_manifest *m, unsigned depth)
{
	struct st_manifest *c = NULL;

	if (st_manifest_dup(m, &c) < 0)
		return;
	pthread_mutex_lock(&ix->cache_lock);
	st_manifest_free(ix->cache_m);
	ix->cache_m = c;
	ix->cache_id = *id;
	ix->cache_depth = depth;
	ix->cache_has = true;
	pthread_mutex_unlock(&ix->cache_lock);
}

/* check: id's own record is rebuilt even when the cache holds id (fsck
 * checks the record, not only the manifest it names). */
static int load(struct ix *ix, MDB_txn *txn, const st_id *id, struct st_manifest **out, unsigned *depth,
		bool check, char *why, size_t whylen)
{
	st_id chain[IX_DELTA_DEPTH_MAX + 1], cur = *id;
	MDB_val recs[IX_DELTA_DEPTH_MAX + 1];
	struct st_manifest *m = NULL;
	char inner[ST_WHY_LEN] = "", hex[ST_ID_HEX_LEN + 1], hex2[ST_ID_HEX_LEN + 1];
	unsigned n = 0, base_depth = 0;
	int rc;

	/* Down the deltas to a full record (or one the cache holds)... */
	for (;;) {
		MDB_val v;
		st_id did, dparent;

		if ((rc = ix_snap_rec_get(ix, txn, &cur, &v)) < 0) {
			if (rc != IX_ENOTFOUND || n == 0)
				return rc;
			st_id_format(&chain[n - 1], hex);
			st_id_format(&cur, hex2);
			return st_why(why, whylen, IX_ECORRUPT, "snapshot %s is stored as a delta of %s, which is not in the index",
				      hex, hex2);
		}
		if ((n > 0 || !check) && (m = cache_get(ix, &cur, &base_depth)))
			break;
		if (!rec_is_delta(&v)) {
			rc = st_manifest_parse(v.mv_data, v.mv_size, &m, inner, sizeof(inner));
			if (rc == 0)
				break;
			st_id_format(&cur, hex);
			return rc == -ENOMEM ? rc : st_why(why, whylen, IX_ECORRUPT, "the record of snapshot %s: %s", hex, inner);
		}
		st_id_format(&cur, hex);
		if ((rc = st_manifest_delta_peek(v.mv_data, v.mv_size, &did, &dparent, inner, sizeof(inner))) < 0)
			return rc == -ENOMEM ? rc : st_why(why, whylen, IX_ECORRUPT, "the record of snapshot %s: %s", hex, inner);
		if (!st_id_equal(&did, &cur))
			return st_why(why, whylen, IX_ECORRUPT, "the record of snapshot %s is a delta of another snapshot", hex);
		if (n == IX_DELTA_DEPTH_MAX)
			return st_why(why, whylen, IX_ECORRUPT,
				      "snapshot %s needs more than %u deltas to rebuild (a cycle, or an index strata did not write)",
				      hex, IX_DELTA_DEPTH_MAX);
		chain[n] = cur;
		recs[n++] = v;
		cur = dparent;
	}
	/* ...then up again, each step checked against its id. */
	for (unsigned k = n; k-- > 0;) {
		struct st_manifest *c = NULL;
		rc = st_manifest_delta_apply(m, k + 1 < n ? &chain[k + 1] : &cur, recs[k].mv_data, recs[k].mv_size, &c, NULL,
					     inner, sizeof(inner));
		st_manifest_free(m);
		if (rc < 0) {
			st_id_format(&chain[k], hex);
			return rc == -ENOMEM ? rc : st_why(why, whylen, IX_ECORRUPT, "snapshot %s: %s", hex, inner);
		}
		m = c;
	}
	if (n)
		cache_put(ix, id, m, n + base_depth);
	if (depth)
		*depth = n + base_depth;
	*out = m;
	return 0;
}

int ix_snap_load_why(struct ix *ix, MDB_txn *txn, const st_id *id, struct st_manifest **out, unsigned *depth,
		     char *why, size_t whylen)
{
	return load(ix, txn, id, out, depth, false, why, whylen);
}

int ix_snap_load_check(struct ix *ix, MDB_txn *txn, const st_id *id, struct st_manifest **out, char *why,
		       size_t whylen)
{
	return load(ix, txn, id, out, NULL, true, why, whylen);
}

int ix_snap_load(struct ix *ix, MDB_txn *txn, const st_id *id, struct st_manifest **out)
{
	return ix_snap_load_why(ix, txn, id, out, NULL, NULL, 0);
}

/* Distinct layer ids of m (a manifest lists each layer once, but the index
 * must not double-count if one ever did). */
static int layer_set(const struct st_manifest *m, st_id **out, uint32_t *n)
{
	st_id *ids = st_sys_calloc(m->nlayers ? m->nlayers : 1, sizeof(*ids));
	uint32_t k = 0;

	if (!ids)
		return -ENOMEM;
	for (uint32_t i = 0; i < m->nlayers; i++) {
		bool dup = false;
		for (uint32_t j = 0; j < k && !dup; j++)
			dup = st_id_equal(&ids[j], &m->layers[i].id);
		if (!dup)
			ids[k++] = m->layers[i].id;
	}
	*out = ids;
	*n = k;
	return 0;
}

struct commit_ctx {
	const struct st_manifest *m;
	const char *json;         /* the full canonical encoding */
	size_t len;
	st_id id;
	const char *tag;
	unsigned flags;
	char *rec;                /* the delta stored instead, or NULL (commit_fn's) */
	size_t rec_len;
	unsigned depth;           /* deltas the stored record needs to rebuild */
	bool wrote;               /* commit_fn stored the record (not there before) */
};

/*
 * What to store for c->m: a delta of its parent's manifest when the parent
 * is in the index, its record needs fewer than IX_DELTA_DEPTH_MAX deltas,
 * and the delta is the shorter; else the full text. Only version 2
 * manifests have deltas.
 */
static int record_choose(struct ix *ix, MDB_txn *txn, struct commit_ctx *c)
{
	const struct st_manifest *m = c->m;
	struct st_manifest *pm = NULL;
	unsigned pd = 0;
	int rc;

	free(c->rec);
	c->rec = NULL;
	c->depth = 0;
	if (!m->has_parent || m->version != ST_MANIFEST_VERSION)
		return 0;
	rc = ix_snap_load_why(ix, txn, &m->parent, &pm, &pd, NULL, 0);
	if (rc == -ENOMEM)
		return rc;
	if (rc < 0 || pd >= IX_DELTA_DEPTH_MAX) {
		/* No parent here (or one that does not read): the record is whole. */
		st_manifest_free(pm);
		return 0;
	}
	rc = st_manifest_delta_encode(pm, &m->parent, m, &c->id, &c->rec, &c->rec_len, NULL, 0);
	st_manifest_free(pm);
	if (rc == -ENOMEM)
		return rc;
	if (rc < 0 || c->rec_len >= c->len) {
		free(c->rec);
		c->rec = NULL;
		return 0;
	}
	c->depth = pd + 1;
	return 0;
}

static int tag_put_checked(struct ix *ix, MDB_txn *txn, const char *tag, const st_id *id,
			   unsigned flags, bool *changed)
{
	MDB_val k = ix_val(tag, strlen(tag)), v;
	int rc = ix_mdb(mdb_get(txn, ix->tags, &k, &v));

	*changed = false;
	if (rc == 0 && v.mv_size == sizeof(id->b) && memcmp(v.mv_data, id->b, sizeof(id->b)) == 0)
		return 0;
	if (rc == 0 && !(flags & IX_TAG_FORCE))
		return IX_EEXIST;
	if (rc < 0 && rc != MDB_NOTFOUND)
		return rc;
	v = ix_val(id->b, sizeof(id->b));
	*changed = true;
	return ix_mdb(mdb_put(txn, ix->tags, &k, &v, 0));
}

static int commit_fn(struct ix *ix, MDB_txn *txn, void *arg)
{
	struct commit_ctx *c = arg;
	const struct st_manifest *m = c->m;
	MDB_val k = ix_val(c->id.b, sizeof(c->id.b)), v;
	bool changed = false;
	int rc;

	c->wrote = false;
	rc = ix_mdb(mdb_get(txn, ix->snaps, &k, &v));
	if (rc == 0) {
		/* Already published: committing again only (re)sets the tag. */
		if (c->tag && (rc = tag_put_checked(ix, txn, c->tag, &c->id, c->flags, &changed)) < 0)
			return rc;
		return changed ? 0 : IX_NOCHANGE;
	}
	if (rc != MDB_NOTFOUND)
		return rc;
	if (c->tag && (rc = tag_put_checked(ix, txn, c->tag, &c->id, c->flags, &changed)) < 0)
		return rc;

	for (uint32_t i = 0; i < m->nlayers; i++) {
		const st_id *lid = &m->layers[i].id;
		uint64_t want = m->layers[i].pages * ST_PAGE_SIZE, have;
		struct ix_blob_rec r;

		bool dup = false;
		for (uint32_t j = 0; j < i && !dup; j++)
			dup = st_id_equal(&m->layers[j].id, lid);
		if (dup)
			continue;
		/* Inside the write txn, so gc (which unlinks inside one) cannot
		 * remove the file between this check and the commit. */
		rc = st_blob_size(ix->s, lid, &have);
		/* A lazy layer counts as present: its chunks come on demand,
		 * each checked against its record's chunk index, which is the
		 * word of the registry that record came from. That holds for
		 * this snapshot because only a pull from that same source
		 * (ix_lazy_rec_match, in index/dist/oci.c) lets a pulled snapshot name the
		 * layer without its blob; imports bring every layer's bytes
		 * and captures name their parent's layers. */
		if (rc == -ENOENT && ix_lazy_rec_has(ix, txn, lid, &have))
			rc = 0;
		if (rc == -ENOENT || (rc == 0 && have != want))
			return IX_EMISSING;
		if (rc < 0)
			return rc;
		rc = ix_blob_rec_get(ix, txn, lid, &r);
		if (rc == IX_ENOTFOUND)
			r = (struct ix_blob_rec){ .size = have, .refs = 0 };
		else if (rc < 0)
			return rc;
		r.refs++;
		if ((rc = ix_blob_rec_put(ix, txn, lid, &r)) < 0)
			return rc;
	}
	if ((rc = record_choose(ix, txn, c)) < 0)
		return rc;
	v = c->rec ? ix_val(c->rec, c->rec_len) : ix_val(c->json, c->len);
	if ((rc = ix_mdb(mdb_put(txn, ix->snaps, &k, &v, 0))) < 0)
		return rc;
	c->wrote = true;
	if (m->has_parent) {
		MDB_val pk = ix_val(m->parent.b, sizeof(m->parent.b));
		MDB_val cv = ix_val(c->id.b, sizeof(c->id.b));
		rc = ix_mdb(mdb_put(txn, ix->children, &pk, &cv, MDB_NODUPDATA));
		if (rc < 0 && rc != MDB_KEYEXIST)
			return rc;
	}
	return 0;
}

int ix_snap_commit(struct ix *ix, const struct st_manifest *m, const char *tag,
		   unsigned flags, st_id *out_id)
{
	struct commit_ctx c = { .m = m, .tag = tag, .flags = flags };
	char *json = NULL;
	int rc;

	if (tag && !st_name_valid(tag))
		return ST_EBADNAME;
	if ((rc = st_manifest_encode(m, &json, &c.len, NULL, 0)) < 0)
		return rc;
	c.json = json;
	st_id_hash(json, c.len, &c.id);
	rc = ix_write(ix, commit_fn, &c);
	free(json);
	free(c.rec);
	/* The next checkpoint of a chain is this one's child. */
	if (rc == 0 && c.wrote)
		cache_put(ix, &c.id, m, c.depth);
	if (rc == 0 && out_id)
		*out_id = c.id;
	return rc;
}

struct chain_ctx {
	struct commit_ctx *c;
	size_t n;
	const struct ix_lazy_put *recs;
	size_t nrecs;
};

/* Every snapshot of a chain in one transaction: all of them or none. */
static int chain_fn(struct ix *ix, MDB_txn *txn, void *arg)
{
	struct chain_ctx *cc = arg;
	bool any = false;

	for (size_t i = 0; i < cc->nrecs; i++) {
		MDB_val k = ix_val(cc->recs[i].layer.b, 16), v = ix_val(cc->recs[i].val, cc->recs[i].len);
		int rc;
		if (!ix->has_lazy)
			return ST_EREADONLY;
		if ((rc = ix_mdb(mdb_put(txn, ix->lazy, &k, &v, 0))) < 0)
			return rc;
		any = true;
	}
	for (size_t i = 0; i < cc->n; i++) {
		int rc = commit_fn(ix, txn, &cc->c[i]);
		if (rc == IX_NOCHANGE)
			continue;
		if (rc < 0)
			return rc;
		any = true;
	}
	return any ? 0 : IX_NOCHANGE;
}

int ix_snap_commit_chain(struct ix *ix, const struct st_manifest *const *ms, size_t n, const char *tag,
			 unsigned flags, st_id *out_top)
{
	return ix_snap_commit_chain_lazy(ix, ms, n, tag, flags, out_top, NULL, 0);
}

int ix_snap_commit_chain_lazy(struct ix *ix, const struct st_manifest *const *ms, size_t n, const char *tag,
			      unsigned flags, st_id *out_top, const struct ix_lazy_put *recs, size_t nrecs)
{
	struct chain_ctx cc = { .n = n, .recs = recs, .nrecs = nrecs };
	int rc = 0;

	if (n == 0)
		return -EINVAL;
	if (tag && !st_name_valid(tag))
		return ST_EBADNAME;
	if (!(cc.c = st_sys_calloc(n, sizeof(*cc.c))))
		return -ENOMEM;
	for (size_t i = 0; i < n && rc == 0; i++) {
		char *json = NULL;
		cc.c[i] = (struct commit_ctx){ .m = ms[i], .tag = i + 1 == n ? tag : NULL, .flags = flags };
		if ((rc = st_manifest_encode(ms[i], &json, &cc.c[i].len, NULL, 0)) < 0)
			break;
		cc.c[i].json = json;
		st_id_hash(json, cc.c[i].len, &cc.c[i].id);
	}
	if (rc == 0)
		rc = ix_write(ix, chain_fn, &cc);
	if (rc == 0 && out_top)
		*out_top = cc.c[n - 1].id;
	for (size_t i = 0; i < n; i++) {
		free((char *)cc.c[i].json);
		free(cc.c[i].rec);
	}
	free(cc.c);
	return rc;
}

struct staged_ctx {
	int fd;
	const struct ix_stage_link *links;
	size_t hi, lo;            /* this transaction: links[hi - 1] down to links[lo] */
	const char *tag;
	unsigned flags;
	const struct ix_lazy_put *recs;
	size_t nrecs;             /* 0 but in the first transaction */
};

int ix_stage_read(int fd, const struct ix_stage_link *l, char **out)
{
	char *buf = st_sys_malloc(l->len + 1);
	size_t got = 0;

	if (!buf)
		return -ENOMEM;
	while (got < l->len) {
		ssize_t r = st_sys_pread(fd, buf + got, l->len - got, (off_t)(l->off + got));
		if (r <= 0) {
			int rc = r < 0 ? (int)r : ST_ECORRUPT;
			free(buf);
			return rc;
		}
		got += (size_t)r;
	}
	buf[l->len] = '\0';
	*out = buf;
	return 0;
}

/* Read back, check and commit one staged manifest. */
static int staged_one(struct ix *ix, MDB_txn *txn, const struct staged_ctx *sc, size_t k)
{
	const struct ix_stage_link *l = &sc->links[k];
	struct commit_ctx c = { .tag = k == 0 ? sc->tag : NULL, .flags = sc->flags, .id = l->id, .len = l->len };
	struct st_manifest *m = NULL;
	char *buf = NULL, *full = NULL;
	st_id id, parent;
	int rc;

	if ((rc = ix_stage_read(sc->fd, l, &buf)) < 0)
		return rc;
	if (ix_snap_text_is_delta(buf, l->len) && st_manifest_delta_peek(buf, l->len, &id, &parent, NULL, 0) == 0) {
		/* A delta: its parent is older in the chain (committed before it)
		 * or was in the store; the rebuilt manifest must be l->id. */
		struct st_manifest *pm = NULL;
		if (!st_id_equal(&id, &l->id)) {
			rc = ST_ECORRUPT;
			goto out_free;
		}
		if ((rc = ix_snap_load(ix, txn, &parent, &pm)) < 0)
			goto out_free;
		rc = st_manifest_delta_apply(pm, &parent, buf, l->len, &m, &id, NULL, 0);
		st_manifest_free(pm);
		if (rc < 0 || (rc = st_manifest_encode(m, &full, &c.len, NULL, 0)) < 0)
			goto out_free;
		c.json = full;
	} else {
		st_id_hash(buf, l->len, &id);
		if (!st_id_equal(&id, &l->id)) {
			rc = ST_ECORRUPT;
			goto out_free;
		}
		if ((rc = st_manifest_parse(buf, l->len, &m, NULL, 0)) < 0)
			goto out_free;
		c.json = buf;
	}
	c.m = m;
	rc = commit_fn(ix, txn, &c);
	free(c.rec);
out_free:
	st_manifest_free(m);
	free(full);
	free(buf);
	return rc;
}

static int staged_fn(struct ix *ix, MDB_txn *txn, void *arg)
{
	const struct staged_ctx *sc = arg;
	bool any = false;

	for (size_t i = 0; i < sc->nrecs; i++) {
		MDB_val k = ix_val(sc->recs[i].layer.b, 16), v = ix_val(sc->recs[i].val, sc->recs[i].len);
		int rc;
		if (!ix->has_lazy)
			return ST_EREADONLY;
		if ((rc = ix_mdb(mdb_put(txn, ix->lazy, &k, &v, 0))) < 0)
			return rc;
		any = true;
	}
	for (size_t k = sc->hi; k-- > sc->lo;) {
		int rc = staged_one(ix, txn, sc, k);
		if (rc == IX_NOCHANGE)
			continue;
		if (rc < 0)
			return rc;
		any = true;
	}
	return any ? 0 : IX_NOCHANGE;
}

int ix_snap_commit_chain_staged(struct ix *ix, int fd, const struct ix_stage_link *links, size_t n, const char *tag,
				unsigned flags, st_id *out_top, const struct ix_lazy_put *recs, size_t nrecs,
				bool *recs_committed)
{
	struct staged_ctx sc = { fd, links, n, n, tag, flags, recs, nrecs };
	int rc = 0;

	if (n == 0)
		return -EINVAL;
	if (tag && !st_name_valid(tag))
		return ST_EBADNAME;
	/* The tag is checked before the first transaction, so a tag naming
	 * another snapshot refuses the chain before any of it is committed
	 * (the last transaction checks it again). */
	if (tag && !(flags & IX_TAG_FORCE)) {
		struct ix_txn *t;
		st_id cur;
		if ((rc = ix_txn_begin(ix, &t)) < 0)
			return rc;
		rc = ix_tag_get(t, tag, &cur);
		ix_txn_end(t);
		if (rc == 0 && !st_id_equal(&cur, &links[0].id))
			return IX_EEXIST;
		if (rc < 0 && rc != IX_ENOTFOUND)
			return rc;
	}
	/* Oldest first, as many links per transaction as IX_CHAIN_TXN_BYTES
	 * of manifests allow (at least one): a transaction keeps every page it
	 * writes in memory until it commits. */
	while (sc.hi > 0) {
		uint64_t bytes = links[sc.hi - 1].len;
		sc.lo = sc.hi - 1;
		while (sc.lo > 0 && bytes + links[sc.lo - 1].len <= IX_CHAIN_TXN_BYTES)
			bytes += links[--sc.lo].len;
		if ((rc = ix_write(ix, staged_fn, &sc)) < 0)
			break;
		if (sc.nrecs && recs_committed)
			*recs_committed = true;
		sc.nrecs = 0;
		sc.hi = sc.lo;
	}
	if (rc == 0 && out_top)
		*out_top = links[0].id;
	return rc;
}

bool ix_snap_has(struct ix_txn *t, const st_id *id)
{
	MDB_val k = ix_val(id->b, sizeof(id->b)), v;

	return mdb_get(t->txn, t->ix->snaps, &k, &v) == 0;
}

int ix_snap_get(struct ix_txn *t, const st_id *id, struct st_manifest **out)
{
	return ix_snap_load(t->ix, t->txn, id, out);
}

int ix_snap_get_raw(struct ix_txn *t, const st_id *id, const void **buf, size_t *len)
{
	struct st_manifest *m = NULL;
	struct ix_owned *o;
	char *json = NULL;
	size_t jlen;
	MDB_val v;
	int rc = ix_snap_rec_get(t->ix, t->txn, id, &v);

	if (rc < 0)
		return rc;
	if (!rec_is_delta(&v)) {
		*buf = v.mv_data;
		*len = v.mv_size;
		return 0;
	}
	/* A delta: the full text is rebuilt and lives as long as the txn. */
	if ((rc = ix_snap_load(t->ix, t->txn, id, &m)) < 0)
		return rc;
	rc = st_manifest_encode(m, &json, &jlen, NULL, 0);
	st_manifest_free(m);
	if (rc < 0)
		return rc == -ENOMEM ? rc : IX_ECORRUPT;
	if (!(o = st_sys_malloc(sizeof(*o) + jlen + 1))) {
		free(json);
		return -ENOMEM;
	}
	memcpy(o->bytes, json, jlen + 1);
	free(json);
	o->len = jlen;
	o->next = t->owned;
	t->owned = o;
	*buf = o->bytes;
	*len = jlen;
	return 0;
}

int ix_snap_info(struct ix_txn *t, const st_id *id, struct ix_snap_info *out)
{
	struct ix_snap_info info = { .id = *id };
	struct st_manifest *m;
	const void *raw;
	int rc;

	if ((rc = ix_snap_get_raw(t, id, &raw, &info.manifest_len)) < 0)
		return rc;
	if ((rc = ix_snap_load(t->ix, t->txn, id, &m)) < 0)
		return rc;
	info.has_parent = m->has_parent;
	info.parent = m->parent;
	info.mem_size = m->mem_size;
	info.created = m->created;
	info.nlayers = m->nlayers;
	for (uint32_t i = 0; i < m->nlayers; i++) {
		struct ix_blob_rec r;
		uint64_t size = m->layers[i].pages * ST_PAGE_SIZE;

		info.stored_bytes += size;
		rc = ix_blob_rec_get(t->ix, t->txn, &m->layers[i].id, &r);
		if (rc == 0 && r.refs == 1)
			info.unique_bytes += size;
		else if (rc < 0 && rc != IX_ENOTFOUND)
			break;
		rc = 0;
	}
	st_manifest_free(m);
	if (rc < 0)
		return rc;
	*out = info;
	return 0;
}

/* Children of id stored as deltas of it are written whole before it goes:
 * deleting a parent never breaks a child (docs/formats.md). */
static int children_whole(struct ix *ix, MDB_txn *txn, const st_id *id)
{
	MDB_val k = ix_val(id->b, sizeof(id->b)), v;
	MDB_cursor *cur;
	st_id *kids = NULL;
	size_t n = 0, cap = 0;
	int rc = ix_mdb(mdb_cursor_open(txn, ix->children, &cur));

	if (rc < 0)
		return rc;
	/* Collected first: the puts below must not run under the cursor. */
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_KEY); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT_DUP)) {
		if (v.mv_size != 16)
			continue;
		if (n == cap) {
			size_t ncap = cap ? 2 * cap : 8;
			st_id *nk = st_sys_realloc(kids, ncap * sizeof(*kids));
			if (!nk) {
				rc = -ENOMEM;
				break;
			}
			kids = nk;
			cap = ncap;
		}
		memcpy(kids[n++].b, v.mv_data, 16);
	}
	mdb_cursor_close(cur);
	rc = rc == MDB_NOTFOUND ? 0 : ix_mdb(rc);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		struct st_manifest *cm = NULL;
		MDB_val rec, ck = ix_val(kids[i].b, 16);
		char *json = NULL;
		size_t len;
		if (ix_snap_rec_get(ix, txn, &kids[i], &rec) < 0 || !rec_is_delta(&rec))
			continue;
		/* A child that does not rebuild stays as it is (fsck says so). */
		if ((rc = ix_snap_load(ix, txn, &kids[i], &cm)) < 0) {
			rc = rc == -ENOMEM ? rc : 0;
			continue;
		}
		if ((rc = st_manifest_encode(cm, &json, &len, NULL, 0)) == 0) {
			MDB_val fv = ix_val(json, len);
			rc = ix_mdb(mdb_put(txn, ix->snaps, &ck, &fv, 0));
			free(json);
		}
		st_manifest_free(cm);
	}
	free(kids);
	return rc;
}

int ix_snap_del_txn(struct ix *ix, MDB_txn *txn, const st_id *id)
{
	MDB_val k = ix_val(id->b, sizeof(id->b)), v;
	struct st_manifest *m;
	st_id *layers = NULL;
	uint32_t n = 0;
	MDB_cursor *cur;
	int rc;

	if ((rc = ix_snap_load(ix, txn, id, &m)) < 0)
		return rc;
	if ((rc = children_whole(ix, txn, id)) < 0 || (rc = layer_set(m, &layers, &n)) < 0)
		goto out_free;
	for (uint32_t i = 0; i < n; i++) {
		struct ix_blob_rec r;

		rc = ix_blob_rec_get(ix, txn, &layers[i], &r);
		if (rc == IX_ENOTFOUND)
			continue; /* fsck reports the mismatch; deletion still proceeds */
		if (rc < 0)
			goto out_free;
		r.refs--;
		if ((rc = ix_blob_rec_put(ix, txn, &layers[i], &r)) < 0)
			goto out_free;
	}
	if (m->has_parent) {
		MDB_val pk = ix_val(m->parent.b, sizeof(m->parent.b));
		MDB_val cv = ix_val(id->b, sizeof(id->b));
		rc = ix_mdb(mdb_del(txn, ix->children, &pk, &cv));
		if (rc < 0 && rc != MDB_NOTFOUND)
			goto out_free;
	}
	if ((rc = ix_mdb(mdb_del(txn, ix->snaps, &k, NULL))) < 0 || (rc = ix_ws_del_txn(ix, txn, id)) < 0)
		goto out_free;
	/* Every tag naming it goes too. */
	if ((rc = ix_mdb(mdb_cursor_open(txn, ix->tags, &cur))) < 0)
		goto out_free;
	MDB_val tk;
	for (rc = mdb_cursor_get(cur, &tk, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(cur, &tk, &v, MDB_NEXT)) {
		if (v.mv_size == sizeof(id->b) && memcmp(v.mv_data, id->b, sizeof(id->b)) == 0 &&
		    (rc = ix_mdb(mdb_cursor_del(cur, 0))) < 0)
			break;
	}
	mdb_cursor_close(cur);
	rc = rc == MDB_NOTFOUND ? 0 : ix_mdb(rc);
out_free:
	free(layers);
	st_manifest_free(m);
	return rc;
}

static int del_fn(struct ix *ix, MDB_txn *txn, void *arg)
{
	return ix_snap_del_txn(ix, txn, arg);
}

int ix_snap_del(struct ix *ix, const st_id *id)
{
	return ix_write(ix, del_fn, (void *)id);
}

/* Walk ids in a database: every key (parent NULL) or the duplicate values of
 * one key (parent given, a dupsort database). */
static int id_walk(struct ix_txn *t, MDB_dbi dbi, const st_id *parent,
		   int (*cb)(const st_id *id, void *ctx), void *ctx)
{
	MDB_cursor *cur;
	MDB_val k = { 0 }, v;
	int rc = ix_mdb(mdb_cursor_open(t->txn, dbi, &cur));

	if (rc < 0)
		return ix_err(rc);
	if (parent)
		k = ix_val(parent->b, sizeof(parent->b));
	for (rc = mdb_cursor_get(cur, &k, &v, parent ? MDB_SET_KEY : MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, parent ? MDB_NEXT_DUP : MDB_NEXT)) {
		const MDB_val *idv = parent ? &v : &k;
		st_id id;

		if (idv->mv_size != sizeof(id.b)) {
			rc = IX_ECORRUPT;
			break;
		}
		memcpy(id.b, idv->mv_data, sizeof(id.b));
		if ((rc = cb(&id, ctx)) != 0)
			break;
	}
	mdb_cursor_close(cur);
	if (rc == MDB_NOTFOUND)
		return 0;
	return rc < 0 ? ix_err(rc) : rc;
}

int ix_snap_foreach(struct ix_txn *t, int (*cb)(const st_id *id, void *ctx), void *ctx)
{
	return id_walk(t, t->ix->snaps, NULL, cb, ctx);
}

int ix_children_foreach(struct ix_txn *t, const st_id *parent,
			int (*cb)(const st_id *child, void *ctx), void *ctx)
{
	return id_walk(t, t->ix->children, parent, cb, ctx);
}
