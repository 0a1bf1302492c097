/* fsck.c: consistency check of the index against the blob files (missing, corrupt, orphan, refcounts), and the order of a repair. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/array.h"
#include "index/index_int.h"
#include "index/lazy.h"

static bool pairs_has_a(const struct ix_pairs *p, const st_id *a)
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

/* A problem held back until the repair is done, so cb sees what was done. */
struct pending {
	enum ix_problem_kind kind;
	bool error, has_tag;
	st_id id;
	char tag[ST_NAME_MAX + 1];
	char detail[256];
	char action[192];
};

struct fsck {
	struct ix *ix;
	unsigned flags;
	int (*cb)(const struct ix_problem *p, void *ctx);
	void *ctx;
	struct ix_fsck_stats st;
	struct ix_pairs refs;   /* (layer, snapshot) */
	struct ix_pairs edges;  /* (parent, child) from the manifests */
	int cb_rc;
	/* IX_FSCK_REPAIR: problems held until repaired, records saved. */
	struct pending *pend;
	size_t npend, cappend;
	struct ix_saved_rec *saved;
	size_t nsaved, capsaved;
};

static struct pending *problem(struct fsck *f, enum ix_problem_kind kind, const st_id *id, const char *tag,
			       const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Count a problem and show it to cb, or (repairing) hold it back; returns
 * the held entry so the repair can note its action, else NULL. */
static struct pending *problem(struct fsck *f, enum ix_problem_kind kind, const st_id *id, const char *tag,
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
	if (f->flags & IX_FSCK_REPAIR) {
		struct pending *e;
		if (ST_ARRAY_RESERVE(f->pend, f->cappend, f->npend + 1) < 0) {
			f->cb_rc = f->cb_rc ? f->cb_rc : -ENOMEM;
			return NULL;
		}
		e = &f->pend[f->npend++];
		*e = (struct pending){ .kind = kind, .error = p.error, .id = p.id, .has_tag = tag != NULL };
		if (tag)
			snprintf(e->tag, sizeof(e->tag), "%s", tag);
		snprintf(e->detail, sizeof(e->detail), "%s", detail);
		return e;
	}
	if (f->cb && f->cb_rc == 0)
		f->cb_rc = f->cb(&p, f->ctx);
	return NULL;
}

struct bad_chunk {
	struct fsck *f;
	const st_id *layer;
	const struct ix_lazy_check *chk;
};

/* A present chunk of a lazy layer that its chunk index refuses. */
static int bad_chunk_cb(void *ctx, const struct ix_lazy_bad *b)
{
	struct bad_chunk *bc = ctx;
	const struct ix_lazy_check *k = bc->chk;
	struct pending *e = problem(bc->f, IX_PROBLEM_CHUNK, bc->layer, NULL,
				    "chunk %llu (bytes %llu-%llu) does not match the layer's chunk index (XXH3-128 of "
				    "each chunk%s%s, from %s)", (unsigned long long)b->chunk, (unsigned long long)b->off,
				    (unsigned long long)(b->off + b->len - 1), k->chunks_digest[0] ? "; index " : "",
				    k->chunks_digest, k->origin);
	if (e && b->dropped)
		snprintf(e->action, sizeof(e->action), "marked missing: fetched again when read");
	return bc->f->cb_rc;
}

/* A lazy layer: not a problem (nothing to repair), but not checked either:
 * its chunks were checked against the chunk index its record came with,
 * never the whole against its id. cb sees it as such (not when repairing).
 * Hashing, each present chunk is checked against that index again: a bad
 * one is a problem (repairing: its mark is cleared, so it is fetched again). */
static int note_lazy(struct fsck *f, MDB_txn *txn, const st_id *id)
{
	char detail[IX_ORIGIN_MAX + 512];
	struct ix_problem p = { .kind = IX_PROBLEM_LAZY, .error = false, .id = *id, .detail = detail };

	f->st.lazy++;
	if (ix_lazy_rec_describe(f->ix, txn, id, detail, sizeof(detail)) < 0)
		snprintf(detail, sizeof(detail), "lazy layer: its bytes are not yet checked against its id");
	if (f->cb && f->cb_rc == 0 && !(f->flags & IX_FSCK_REPAIR))
		f->cb_rc = f->cb(&p, f->ctx);
	if (!(f->flags & IX_FSCK_HASH))
		return 0;
	struct ix_lazy_check chk = { 0 };
	struct bad_chunk bc = { .f = f, .layer = id, .chk = &chk };
	int rc = ix_lazy_rec_check(f->ix, txn, id, f->flags & IX_FSCK_REPAIR, bad_chunk_cb, &bc, &chk);
	f->st.lazy_chunks += chk.present;
	f->st.bytes_hashed += chk.bytes;
	if (rc == -ENOENT || rc == IX_ECORRUPT) {
		/* Its files are gone or its record unreadable: nothing of it is present. */
		problem(f, IX_PROBLEM_CHUNK, id, NULL, "lazy layer's %s: %s", rc == -ENOENT ? "files are missing" :
			"record cannot be read", rc == -ENOENT ? "no chunk of it can be read" : "it cannot be checked");
		return 0;
	}
	return rc > 0 ? 0 : rc;
}

/* Repairing: keep a damaged snapshot record's bytes in lost+found. */
static int save_record(struct fsck *f, const MDB_val *k, const MDB_val *v)
{
	int rc;

	if (ST_ARRAY_RESERVE(f->saved, f->capsaved, f->nsaved + 1) < 0)
		return -ENOMEM;
	if ((rc = ix_lf_rec_save(f->ix, k, v, &f->saved[f->nsaved])) < 0)
		return rc;
	f->nsaved++;
	return 0;
}

/* Repairing: move a blob file whose bytes are wrong to lost+found. */
static int move_blob(struct fsck *f, const st_id *id, struct pending *e)
{
	char name[128];
	int rc = ix_lf_blob_move(f->ix, id, name, sizeof(name));

	if (rc == -ENOENT)
		return 0; /* gone meanwhile: reported as missing by the next check */
	if (rc < 0)
		return rc;
	if (e)
		snprintf(e->action, sizeof(e->action), "moved to %s; the layer is now missing", name);
	return 0;
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
		char why[ST_WHY_LEN];
		st_id id = { 0 };

		f->st.snapshots++;
		if (ix_snap_rec_check(f->ix, txn, &k, &v, &id, &m, why, sizeof(why)) < 0) {
			problem(f, IX_PROBLEM_SNAPSHOT, k.mv_size == sizeof(id.b) ? &id : NULL, NULL, "%s", why);
			if ((f->flags & IX_FSCK_REPAIR) && (rc = save_record(f, &k, &v)) < 0)
				break;
			continue;
		}
		rc = ix_refs_add(&f->refs, &f->edges, &id, m);
		st_manifest_free(m);
		if (rc < 0)
			break;
	}
	mdb_cursor_close(cur);
	if (rc == MDB_NOTFOUND)
		rc = 0;
	/* A working-set record is referenced by its snapshot's link. */
	uint64_t dangling = 0;
	if (rc == 0 && (rc = ix_ws_refs_add(f->ix, txn, &f->refs, &dangling)) == 0 && dangling)
		problem(f, IX_PROBLEM_WORKINGSET, NULL, NULL, "%llu working-set link(s) name no snapshot",
			(unsigned long long)dangling);
	ix_pairs_sort(&f->refs);
	ix_pairs_sort(&f->edges);
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
	int err = 0;
	int rc = ix_mdb(mdb_cursor_open(txn, f->ix->blobs, &cur));

	if (rc < 0)
		return rc;
	rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
	/* Merge the sorted records with the sorted references. */
	while (err == 0 && (rc == 0 || i < f->refs.n)) {
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
			if (src == -ENOENT && ix_lazy_rec_has(f->ix, txn, &rid, &size))
				err = note_lazy(f, txn, &rid); /* its chunks come on demand (lazy.c) */
			else if (src == -ENOENT && still_referenced(f->ix, &rid))
				problem(f, IX_PROBLEM_MISSING, &rid, NULL, "blob file is missing");
			else if (src == -ENOENT)
				;
			else if (src < 0)
				err = src;
			else if (c <= 0 && size != r.size) {
				struct pending *e = problem(f, IX_PROBLEM_SIZE, &rid, NULL,
							    "blob file is %llu bytes, the index says %llu",
							    (unsigned long long)size, (unsigned long long)r.size);
				/* Only bytes that are wrong move: a file that hashes to
				 * its name is the blob, and the record gets its size. */
				int vrc = f->flags & IX_FSCK_REPAIR ? st_blob_verify(f->ix->s, &rid) : 0;
				if (vrc == ST_ECORRUPT)
					vrc = move_blob(f, &rid, e);
				if (vrc < 0 && vrc != -ENOENT)
					err = vrc;
			} else if (f->flags & IX_FSCK_HASH) {
				int vrc = st_blob_verify(f->ix->s, &rid);
				f->st.bytes_hashed += size;
				if (vrc == ST_ECORRUPT) {
					struct pending *e = problem(f, IX_PROBLEM_CORRUPT, &rid, NULL,
								    "blob bytes do not hash to its name");
					if (f->flags & IX_FSCK_REPAIR)
						err = move_blob(f, &rid, e);
				} else if (vrc == -ENOENT)
					problem(f, IX_PROBLEM_MISSING, &rid, NULL, "blob file is missing");
				else if (vrc < 0)
					err = vrc;
			}
		}
		if (c <= 0)
			rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
	}
	mdb_cursor_close(cur);
	if (err < 0)
		return err;
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
		struct ix_pair e = { 0 };
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
		c = rc != 0 ? 1 : i >= f->edges.n ? -1 : ix_pair_cmp(&e, &f->edges.v[i]);
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

/* One check of the whole store in one read txn. */
static int fsck_pass(struct fsck *f)
{
	struct ix_txn *t;
	int rc;

	if ((rc = ix_txn_begin(f->ix, &t)) < 0)
		return rc;
	/* One read txn: a consistent view of the index. Blob files published
	 * by a concurrent import after it began show as orphans, which is what
	 * they are until that import commits. */
	if ((rc = check_snapshots(f, t->txn)) == 0 &&
	    (rc = check_blobs(f, t->txn)) == 0 &&
	    (rc = check_tags(f, t->txn)) == 0 &&
	    (rc = check_children(f, t->txn)) == 0)
		rc = st_blob_foreach(f->ix->s, orphan_cb, f);
	ix_txn_end(t);
	return rc;
}

static bool fix_matches(const struct pending *e, const struct ix_fix *x)
{
	if (e->kind != x->kind || e->action[0])
		return false;
	if (x->kind == IX_PROBLEM_TAG)
		return e->has_tag && strcmp(e->tag, x->tag) == 0;
	return st_id_equal(&e->id, &x->id);
}

/* Note what the repair txn did on the problems found; a change the check
 * had not seen (made by another process since) becomes a problem of its own. */
static int note_fixes(struct fsck *f, const struct ix_fixes *fx)
{
	for (size_t i = 0; i < fx->n; i++) {
		const struct ix_fix *x = &fx->v[i];
		size_t j = 0;

		while (j < f->npend && !fix_matches(&f->pend[j], x))
			j++;
		if (j == f->npend) {
			struct pending *e = problem(f, x->kind, &x->id, x->kind == IX_PROBLEM_TAG ? x->tag : NULL,
						    "%s", x->detail);
			if (!e)
				return f->cb_rc;
		}
		snprintf(f->pend[j].action, sizeof(f->pend[j].action), "%s", x->action);
	}
	return 0;
}

static bool index_kind(enum ix_problem_kind k)
{
	return k == IX_PROBLEM_REFCOUNT || k == IX_PROBLEM_SNAPSHOT || k == IX_PROBLEM_TAG ||
	       k == IX_PROBLEM_CHILDREN || k == IX_PROBLEM_WORKINGSET;
}

/* The repair after a check: the blob files and records are already in
 * lost+found; fix the index, show each problem with its action, check again. */
static int repair(struct fsck *f)
{
	struct ix_fixes fx = { 0 };
	bool index_damaged = false;
	int rc = 0;

	/* A wrong-size file that hashes to its name stayed: its record is wrong. */
	for (size_t i = 0; i < f->npend; i++)
		index_damaged |= index_kind(f->pend[i].kind) ||
				 (f->pend[i].kind == IX_PROBLEM_SIZE && !f->pend[i].action[0]);
	if (index_damaged) {
		rc = ix_repair_index(f->ix, f->saved, f->nsaved, &fx);
		if (rc == 0)
			rc = note_fixes(f, &fx);
		free(fx.v);
		if (rc < 0)
			return rc;
	}
	for (size_t i = 0; i < f->npend && f->cb_rc == 0; i++) {
		const struct pending *e = &f->pend[i];
		struct ix_problem p = { .kind = e->kind, .error = e->error, .id = e->id,
					.tag = e->has_tag ? e->tag : NULL, .detail = e->detail,
					.action = e->action[0] ? e->action : NULL };
		f->st.repaired += p.action != NULL;
		if (f->cb)
			f->cb_rc = f->cb(&p, f->ctx);
	}
	/* What is left, by the plain check's measure (the hashing is done:
	 * every blob found corrupt has left blobs/). */
	struct fsck after = { .ix = f->ix };
	rc = fsck_pass(&after);
	free(after.refs.v);
	free(after.edges.v);
	if (rc < 0)
		return rc;
	f->st.remaining = after.st.errors;
	return 0;
}

int ix_fsck(struct ix *ix, unsigned flags,
	    int (*cb)(const struct ix_problem *p, void *ctx), void *ctx,
	    struct ix_fsck_stats *stats)
{
	struct fsck f = { .ix = ix, .flags = flags, .cb = cb, .ctx = ctx };
	int rc;

	if ((flags & IX_FSCK_REPAIR) && ix->rdonly)
		return ST_EREADONLY;
	rc = fsck_pass(&f);
	if (rc == 0 && f.cb_rc == 0 && (flags & IX_FSCK_REPAIR))
		rc = repair(&f);
	else
		f.st.remaining = f.st.errors;
	free(f.refs.v);
	free(f.edges.v);
	free(f.pend);
	free(f.saved);
	if (rc < 0)
		return ix_err(rc);
	if (f.cb_rc < 0)
		return f.cb_rc;
	if (stats)
		*stats = f.st;
	return (int)(f.st.remaining > INT32_MAX ? INT32_MAX : f.st.remaining);
}
