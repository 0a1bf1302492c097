/* fsck.c: consistency check of the index against the blob files (missing, corrupt, orphan, refcounts). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "index/index_int.h"

/* A (key, value) pair of ids: a layer reference (blob, snapshot) or a
 * children edge (parent, child). Sorted to count and compare in one pass. */
struct pair {
	st_id a, b;
};

struct pairs {
	struct pair *v;
	size_t n, cap;
};

static int pairs_add(struct pairs *p, const st_id *a, const st_id *b)
{
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 256;
		struct pair *v = realloc(p->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		p->v = v;
		p->cap = cap;
	}
	p->v[p->n].a = *a;
	p->v[p->n].b = *b;
	p->n++;
	return 0;
}

static int pair_cmp(const void *x, const void *y)
{
	const struct pair *p = x, *q = y;
	int c = st_id_cmp(&p->a, &q->a);

	return c ? c : st_id_cmp(&p->b, &q->b);
}

static bool pairs_has_a(const struct pairs *p, const st_id *a)
{
	size_t lo = 0, hi = p->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = st_id_cmp(&p->v[mid].a, a);
		if (c == 0)
			return true;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

struct fsck {
	struct ix *ix;
	unsigned flags;
	int (*cb)(const struct ix_problem *p, void *ctx);
	void *ctx;
	struct ix_fsck_stats st;
	struct pairs refs;      /* (layer, snapshot) */
	struct pairs edges;     /* (parent, child) from the manifests */
	int cb_rc;
};

static void problem(struct fsck *f, enum ix_problem_kind kind, const st_id *id, const char *tag,
		    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void problem(struct fsck *f, enum ix_problem_kind kind, const st_id *id, const char *tag,
		    const char *fmt, ...)
{
	struct ix_problem p = { .kind = kind, .error = kind != IX_PROBLEM_ORPHAN, .tag = tag };
	char detail[256];
	va_list ap;

	if (id)
		p.id = *id;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	p.detail = detail;
	if (p.error)
		f->st.errors++;
	else
		f->st.orphans++;
	if (f->cb && f->cb_rc == 0)
		f->cb_rc = f->cb(&p, f->ctx);
}

/* Snapshot records: each named by its hash, parseable; collect references. */
static int check_snapshots(struct fsck *f, MDB_txn *txn)
{
	MDB_cursor *cur;
	MDB_val k, v;
	int rc = ix_mdb(mdb_cursor_open(txn, f->ix->snaps, &cur));

	if (rc < 0)
		return rc;
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		struct st_manifest *m;
		st_id id, h;
		char why[ST_WHY_LEN];

		f->st.snapshots++;
		if (k.mv_size != sizeof(id.b)) {
			problem(f, IX_PROBLEM_SNAPSHOT, NULL, NULL, "a snapshot key is %zu bytes, not 16", k.mv_size);
			continue;
		}
		memcpy(id.b, k.mv_data, sizeof(id.b));
		st_id_hash(v.mv_data, v.mv_size, &h);
		if (!st_id_equal(&h, &id)) {
			problem(f, IX_PROBLEM_SNAPSHOT, &id, NULL, "the stored manifest does not hash to the snapshot's id");
			continue;
		}
		if (st_manifest_parse(v.mv_data, v.mv_size, &m, why, sizeof(why)) < 0) {
			problem(f, IX_PROBLEM_SNAPSHOT, &id, NULL, "the stored manifest does not parse: %s", why);
			continue;
		}
		for (uint32_t i = 0; i < m->nlayers && rc == 0; i++) {
			bool dup = false;
			for (uint32_t j = 0; j < i && !dup; j++)
				dup = st_id_equal(&m->layers[j].id, &m->layers[i].id);
			if (!dup)
				rc = pairs_add(&f->refs, &m->layers[i].id, &id);
		}
		if (rc == 0 && m->has_parent)
			rc = pairs_add(&f->edges, &m->parent, &id);
		st_manifest_free(m);
		if (rc < 0)
			break;
	}
	mdb_cursor_close(cur);
	if (rc == MDB_NOTFOUND)
		rc = 0;
	if (f->refs.n)
		qsort(f->refs.v, f->refs.n, sizeof(*f->refs.v), pair_cmp);
	if (f->edges.n)
		qsort(f->edges.v, f->edges.n, sizeof(*f->edges.v), pair_cmp);
	return rc;
}

/* A blob found missing may have been released and collected after our view
 * was taken: only the current index can say it is really missing. */
static bool still_referenced(struct ix *ix, const st_id *id)
{
	struct ix_blob_rec r;
	struct ix_txn *t;
	bool yes = true;

	if (ix_txn_begin(ix, &t) == 0) {
		yes = ix_blob_rec_get(ix, t->txn, id, &r) == 0;
		ix_txn_end(t);
	}
	return yes;
}

/* Blob records: refcount equals the number of snapshots listing the blob;
 * referenced blob files exist with the recorded size (and hash). */
static int check_blobs(struct fsck *f, MDB_txn *txn)
{
	MDB_cursor *cur;
	MDB_val k, v;
	size_t i = 0;
	int rc = ix_mdb(mdb_cursor_open(txn, f->ix->blobs, &cur));

	if (rc < 0)
		return rc;
	rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
	/* Merge the sorted records with the sorted references. */
	while (rc == 0 || i < f->refs.n) {
		st_id rid;
		bool have_rec = rc == 0;
		uint64_t nref = 0;
		int c;

		if (have_rec) {
			if (k.mv_size != sizeof(rid.b) || v.mv_size != IX_BLOB_REC_LEN) {
				problem(f, IX_PROBLEM_REFCOUNT, NULL, NULL, "a blob record is malformed");
				rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
				continue;
			}
			memcpy(rid.b, k.mv_data, sizeof(rid.b));
		}
		c = !have_rec ? 1 : i >= f->refs.n ? -1 : st_id_cmp(&rid, &f->refs.v[i].a);
		if (c > 0)
			rid = f->refs.v[i].a;
		if (c >= 0)
			for (; i < f->refs.n && st_id_equal(&f->refs.v[i].a, &rid); i++)
				nref++;
		f->st.blobs++;
		struct ix_blob_rec r = { 0 };
		if (c <= 0) {
			const uint8_t *p = v.mv_data;
			for (int b = 0; b < 8; b++) {
				r.size |= (uint64_t)p[b] << (8 * b);
				r.refs |= (uint64_t)p[8 + b] << (8 * b);
			}
		}
		if (c > 0)
			problem(f, IX_PROBLEM_REFCOUNT, &rid, NULL, "no blob record, referenced by %llu snapshot(s)",
				(unsigned long long)nref);
		else if (r.refs != nref)
			problem(f, IX_PROBLEM_REFCOUNT, &rid, NULL, "refcount %llu, referenced by %llu snapshot(s)",
				(unsigned long long)r.refs, (unsigned long long)nref);
		if (nref > 0) {
			uint64_t size;
			int src = st_blob_size(f->ix->s, &rid, &size);
			if (src == -ENOENT && still_referenced(f->ix, &rid))
				problem(f, IX_PROBLEM_MISSING, &rid, NULL, "blob file is missing");
			else if (src == -ENOENT)
				;
			else if (src < 0)
				return src;
			else if (c <= 0 && size != r.size)
				problem(f, IX_PROBLEM_SIZE, &rid, NULL, "blob file is %llu bytes, the index says %llu",
					(unsigned long long)size, (unsigned long long)r.size);
			else if (f->flags & IX_FSCK_HASH) {
				int vrc = st_blob_verify(f->ix->s, &rid);
				f->st.bytes_hashed += size;
				if (vrc == ST_ECORRUPT)
					problem(f, IX_PROBLEM_CORRUPT, &rid, NULL, "blob bytes do not hash to its name");
				else if (vrc == -ENOENT)
					problem(f, IX_PROBLEM_MISSING, &rid, NULL, "blob file is missing");
				else if (vrc < 0)
					return vrc;
			}
		}
		if (c <= 0)
			rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
	}
	mdb_cursor_close(cur);
	return rc == MDB_NOTFOUND || rc == 0 ? 0 : ix_mdb(rc);
}

static int check_tags(struct fsck *f, MDB_txn *txn)
{
	MDB_cursor *cur;
	MDB_val k, v, sv;
	char name[ST_NAME_MAX + 1];
	int rc = ix_mdb(mdb_cursor_open(txn, f->ix->tags, &cur));

	if (rc < 0)
		return rc;
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		size_t n = k.mv_size > ST_NAME_MAX ? ST_NAME_MAX : k.mv_size;
		memcpy(name, k.mv_data, n);
		name[n] = '\0';
		if (v.mv_size != 16 || mdb_get(txn, f->ix->snaps, &v, &sv) != 0) {
			st_id id = { 0 };
			if (v.mv_size == 16)
				memcpy(id.b, v.mv_data, 16);
			problem(f, IX_PROBLEM_TAG, &id, name, "tag '%s' names a snapshot that does not exist", name);
		} else if (!st_name_valid(name) || n != k.mv_size) {
			problem(f, IX_PROBLEM_TAG, NULL, name, "tag '%s' breaks the name rule", name);
		}
	}
	mdb_cursor_close(cur);
	return rc == MDB_NOTFOUND ? 0 : ix_mdb(rc);
}

static int check_children(struct fsck *f, MDB_txn *txn)
{
	MDB_cursor *cur;
	MDB_val k, v;
	size_t i = 0;
	int rc = ix_mdb(mdb_cursor_open(txn, f->ix->children, &cur));

	if (rc < 0)
		return rc;
	rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
	while (rc == 0 || i < f->edges.n) {
		struct pair e = { 0 };
		int c;

		if (rc == 0) {
			if (k.mv_size != 16 || v.mv_size != 16) {
				problem(f, IX_PROBLEM_CHILDREN, NULL, NULL, "a children record is malformed");
				rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
				continue;
			}
			memcpy(e.a.b, k.mv_data, 16);
			memcpy(e.b.b, v.mv_data, 16);
		}
		c = rc != 0 ? 1 : i >= f->edges.n ? -1 : pair_cmp(&e, &f->edges.v[i]);
		if (c < 0)
			problem(f, IX_PROBLEM_CHILDREN, &e.b, NULL, "listed as a child of a snapshot that is not its parent");
		else if (c > 0)
			problem(f, IX_PROBLEM_CHILDREN, &f->edges.v[i].b, NULL, "missing from its parent's children list");
		if (c >= 0)
			i++;
		if (c <= 0)
			rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
	}
	mdb_cursor_close(cur);
	return rc == MDB_NOTFOUND || rc == 0 ? 0 : ix_mdb(rc);
}

static int orphan_cb(const st_id *id, uint64_t size, int64_t mtime_ns, void *arg)
{
	struct fsck *f = arg;

	f->st.blob_files++;
	if (!pairs_has_a(&f->refs, id))
		problem(f, IX_PROBLEM_ORPHAN, id, NULL, "no snapshot references this blob (%llu bytes); gc reclaims it",
			(unsigned long long)size);
	return 0;
}

int ix_fsck(struct ix *ix, unsigned flags,
	    int (*cb)(const struct ix_problem *p, void *ctx), void *ctx,
	    struct ix_fsck_stats *stats)
{
	struct fsck f = { .ix = ix, .flags = flags, .cb = cb, .ctx = ctx };
	struct ix_txn *t;
	int rc;

	if ((rc = ix_txn_begin(ix, &t)) < 0)
		return rc;
	/* One read txn: a consistent view of the index. Blob files published
	 * by a concurrent import after it began show as orphans, which is what
	 * they are until that import commits. */
	if ((rc = check_snapshots(&f, t->txn)) == 0 &&
	    (rc = check_blobs(&f, t->txn)) == 0 &&
	    (rc = check_tags(&f, t->txn)) == 0 &&
	    (rc = check_children(&f, t->txn)) == 0)
		rc = st_blob_foreach(ix->s, orphan_cb, &f);
	ix_txn_end(t);
	free(f.refs.v);
	free(f.edges.v);
	if (rc < 0)
		return ix_err(rc);
	if (f.cb_rc < 0)
		return f.cb_rc;
	if (stats)
		*stats = f.st;
	return (int)(f.st.errors > INT32_MAX ? INT32_MAX : f.st.errors);
}
