/* repair.c: fsck's repairs: blob files and damaged records into lost+found, the index rebuilt from its snapshots. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/array.h"
#include "index/index_int.h"
#include "store/sys.h"

#define LF_DIR "lost+found"
/* Numbered names tried when <name> is taken in lost+found (earlier repairs). */
#define LF_TRIES 1000

/* ------------------------------------------------------------ lost+found */

/* STORE/lost+found, created (and its name made durable) on first use. */
static int lf_create(int dirfd)
{
	int rc = st_sys_mkdirat(dirfd, LF_DIR, 0700);

	if (rc == -EEXIST)
		return 0;
	if (rc < 0)
		return rc;
	return st_dir_fsync(dirfd, ".");
}

/* Rename from (relative to the store) into lost+found as base, or base.N
 * if taken, never replacing anything; to gets "lost+found/<name>". The
 * rename is durable in lost+found when this returns (from's directory is
 * the caller's to fsync). */
static int lf_place(int dirfd, const char *from, const char *base, char *to, size_t tolen)
{
	int rc = -EEXIST;

	for (unsigned n = 0; n < LF_TRIES && rc == -EEXIST; n++) {
		int w = n ? snprintf(to, tolen, LF_DIR "/%s.%u", base, n) : snprintf(to, tolen, LF_DIR "/%s", base);
		if (w < 0 || (size_t)w >= tolen)
			return -ENAMETOOLONG;
		rc = st_sys_renameat_noreplace(dirfd, from, dirfd, to);
		if (rc == -EINVAL || rc == -ENOSYS) {
			/* No RENAME_NOREPLACE here: link refuses to replace too. A
			 * failed unlink leaves both names, which loses nothing. */
			rc = st_sys_linkat(dirfd, from, dirfd, to, 0);
			if (rc == 0)
				rc = st_sys_unlinkat(dirfd, from, 0);
		}
	}
	if (rc < 0)
		return rc;
	return st_dir_fsync(dirfd, LF_DIR);
}

int ix_lf_blob_move(struct ix *ix, const st_id *id, char *name, size_t len)
{
	int dirfd = st_store_dirfd(ix->s);
	char hex[ST_ID_HEX_LEN + 1], from[64], fan[16], base[64], to[160];
	int rc;

	st_id_format(id, hex);
	snprintf(fan, sizeof(fan), "blobs/%.2s", hex);
	snprintf(from, sizeof(from), "%s/%s", fan, hex);
	snprintf(base, sizeof(base), "%s.%lld", hex, (long long)time(NULL));
	if ((rc = lf_create(dirfd)) < 0)
		return rc;
	if ((rc = lf_place(dirfd, from, base, to, sizeof(to))) < 0)
		return rc;
	/* The blob's name is gone for good before any record says so. */
	if ((rc = st_dir_fsync(dirfd, fan)) < 0)
		return rc;
	snprintf(name, len, "%s", to);
	return 0;
}

int ix_lf_rec_save(struct ix *ix, const MDB_val *k, const MDB_val *v, struct ix_saved_rec *out)
{
	int dirfd = st_store_dirfd(ix->s);
	size_t hexbytes = k->mv_size < 32 ? k->mv_size : 32;
	char hex[65], base[80], tmp[100], to[96];
	const uint8_t *kb = k->mv_data;
	int rc;

	if (k->mv_size > sizeof(out->key))
		return IX_ECORRUPT;
	for (size_t i = 0; i < hexbytes; i++)
		snprintf(hex + 2 * i, 3, "%02x", kb[i]);
	hex[2 * hexbytes] = '\0';
	snprintf(base, sizeof(base), "%s.record", hexbytes ? hex : "empty-key");
	snprintf(tmp, sizeof(tmp), LF_DIR "/.%s.tmp", base);
	if ((rc = lf_create(dirfd)) < 0)
		return rc;
	/* Written whole and synced under a temporary name first, so a name
	 * ending in .record always holds a complete record. */
	if ((rc = st_sys_write_file_synced(dirfd, tmp, v->mv_data, v->mv_size, 0400)) < 0)
		return rc;
	if ((rc = lf_place(dirfd, tmp, base, to, sizeof(to))) < 0) {
		st_sys_unlinkat(dirfd, tmp, 0);
		return rc;
	}
	memcpy(out->key, k->mv_data, k->mv_size);
	out->klen = k->mv_size;
	st_id_hash(v->mv_data, v->mv_size, &out->vhash);
	snprintf(out->name, sizeof(out->name), "%s", to);
	return 0;
}

/* ------------------------------------------------------------ the index */

/* Keys to delete once the cursor that found them is closed. */
struct keys {
	MDB_val *v;
	size_t n, cap;
};

static int keys_add(struct keys *ks, const MDB_val *k)
{
	if (ST_ARRAY_RESERVE(ks->v, ks->cap, ks->n + 1) < 0)
		return -ENOMEM;
	void *p = st_sys_malloc(k->mv_size ? k->mv_size : 1);
	if (!p)
		return -ENOMEM;
	memcpy(p, k->mv_data, k->mv_size);
	ks->v[ks->n++] = ix_val(p, k->mv_size);
	return 0;
}

static void keys_free(struct keys *ks)
{
	for (size_t i = 0; i < ks->n; i++)
		free(ks->v[i].mv_data);
	free(ks->v);
}

static int keys_del(MDB_txn *txn, MDB_dbi dbi, const struct keys *ks)
{
	for (size_t i = 0; i < ks->n; i++) {
		int rc = ix_mdb(mdb_del(txn, dbi, &ks->v[i], NULL));
		if (rc < 0 && rc != MDB_NOTFOUND)
			return rc;
	}
	return 0;
}

struct repair {
	const struct ix_saved_rec *saved;
	size_t nsaved;
	struct ix_fixes *fixes;
	struct ix_pairs refs, edges;  /* from the readable snapshots, this run */
};

static int fix(struct repair *r, enum ix_problem_kind kind, const st_id *id, const char *tag,
	       const char *detail, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Note one change the transaction makes. */
static int fix(struct repair *r, enum ix_problem_kind kind, const st_id *id, const char *tag,
	       const char *detail, const char *fmt, ...)
{
	struct ix_fixes *fx = r->fixes;
	struct ix_fix *x;
	va_list ap;

	if (ST_ARRAY_RESERVE(fx->v, fx->cap, fx->n + 1) < 0)
		return -ENOMEM;
	x = &fx->v[fx->n++];
	*x = (struct ix_fix){ .kind = kind };
	if (id)
		x->id = *id;
	if (tag)
		snprintf(x->tag, sizeof(x->tag), "%s", tag);
	snprintf(x->detail, sizeof(x->detail), "%s", detail);
	va_start(ap, fmt);
	vsnprintf(x->action, sizeof(x->action), fmt, ap);
	va_end(ap);
	return 0;
}

static const struct ix_saved_rec *saved_find(const struct repair *r, const MDB_val *k, const MDB_val *v)
{
	st_id h;

	st_id_hash(v->mv_data, v->mv_size, &h);
	for (size_t i = 0; i < r->nsaved; i++)
		if (r->saved[i].klen == k->mv_size && memcmp(r->saved[i].key, k->mv_data, k->mv_size) == 0 &&
		    st_id_equal(&r->saved[i].vhash, &h))
			return &r->saved[i];
	return NULL;
}

/* Snapshot records: collect the readable ones' references; remove the
 * damaged ones whose bytes are safe in lost+found (a record damaged since
 * the check was not saved, so it stays and is reported again). */
static int repair_snapshots(struct ix *ix, MDB_txn *txn, struct repair *r)
{
	struct keys dels = { 0 };
	MDB_cursor *cur;
	MDB_val k, v;
	int rc = ix_mdb(mdb_cursor_open(txn, ix->snaps, &cur));

	if (rc < 0)
		return rc;
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		struct st_manifest *m;
		const struct ix_saved_rec *sv;
		char why[ST_WHY_LEN];
		st_id id = { 0 };

		if (ix_snap_rec_check(ix, txn, &k, &v, &id, &m, why, sizeof(why)) == 0) {
			rc = ix_refs_add(&r->refs, &r->edges, &id, m);
			st_manifest_free(m);
		} else if ((sv = saved_find(r, &k, &v)) != NULL) {
			rc = keys_add(&dels, &k);
			if (rc == 0)
				rc = fix(r, IX_PROBLEM_SNAPSHOT, &id, NULL, why,
					 "saved to %s and removed from the index", sv->name);
		}
		if (rc < 0)
			break;
	}
	mdb_cursor_close(cur);
	if (rc == MDB_NOTFOUND)
		rc = keys_del(txn, ix->snaps, &dels);
	keys_free(&dels);
	/* Working-set links: of the snapshots that stay, referencing their
	 * records; of the removed ones, gone (their records become orphans). */
	uint64_t gone = 0;
	if (rc == 0 && (rc = ix_ws_dangling_del(ix, txn, &gone)) == 0 && gone)
		rc = fix(r, IX_PROBLEM_WORKINGSET, NULL, NULL, "working-set links naming no snapshot",
			 "%llu link(s) removed", (unsigned long long)gone);
	if (rc == 0)
		rc = ix_ws_refs_add(ix, txn, &r->refs, NULL);
	ix_pairs_sort(&r->refs);
	ix_pairs_sort(&r->edges);
	return ix_mdb(rc);
}

/* Tags naming no snapshot (after the removals above) or breaking the name rule. */
static int repair_tags(struct ix *ix, MDB_txn *txn, struct repair *r)
{
	struct keys dels = { 0 };
	MDB_cursor *cur;
	MDB_val k, v, sv;
	char name[ST_NAME_MAX + 1], detail[ST_NAME_MAX + 64];
	int rc = ix_mdb(mdb_cursor_open(txn, ix->tags, &cur));

	if (rc < 0)
		return rc;
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		size_t n = k.mv_size > ST_NAME_MAX ? ST_NAME_MAX : k.mv_size;
		st_id id = { 0 };

		memcpy(name, k.mv_data, n);
		name[n] = '\0';
		if (v.mv_size == sizeof(id.b))
			memcpy(id.b, v.mv_data, sizeof(id.b));
		if (v.mv_size != sizeof(id.b) || mdb_get(txn, ix->snaps, &v, &sv) != 0)
			snprintf(detail, sizeof(detail), "tag '%s' names a snapshot that does not exist", name);
		else if (!st_name_valid(name) || n != k.mv_size)
			snprintf(detail, sizeof(detail), "tag '%s' breaks the name rule", name);
		else
			continue;
		if ((rc = keys_add(&dels, &k)) < 0 || (rc = fix(r, IX_PROBLEM_TAG, &id, name, detail, "tag removed")) < 0)
			break;
	}
	mdb_cursor_close(cur);
	if (rc == MDB_NOTFOUND)
		rc = keys_del(txn, ix->tags, &dels);
	keys_free(&dels);
	return ix_mdb(rc);
}

/* After merging a database with what the snapshots say: close the cursor
 * and, if anything differed, empty the database for the caller to rewrite
 * (returns 1). rc is the merge's error, more the cursor's last result. */
static int merge_end(MDB_txn *txn, MDB_dbi dbi, MDB_cursor *cur, int rc, int more, bool differs)
{
	if (rc == 0 && more != 0 && more != MDB_NOTFOUND)
		rc = ix_mdb(more);
	mdb_cursor_close(cur);
	if (rc < 0 || !differs)
		return rc;
	if ((rc = ix_mdb(mdb_drop(txn, dbi, 0))) < 0)
		return rc;
	return 1;
}

/* Blob records: one per referenced blob, refs = snapshots listing it, size
 * = the layer's bytes. Compared record by record (for the report); any
 * difference rewrites the whole database from the references. */
static int repair_blobs(struct ix *ix, MDB_txn *txn, struct repair *r)
{
	MDB_cursor *cur;
	MDB_val k, v;
	size_t i = 0, before = r->fixes->n;
	char detail[160];
	int rc = ix_mdb(mdb_cursor_open(txn, ix->blobs, &cur));

	if (rc < 0)
		return rc;
	int more = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
	while (rc == 0 && (more == 0 || i < r->refs.n)) {
		struct ix_blob_rec rec = { 0 };
		uint64_t nref = 0, want = 0;
		st_id id;
		int c;

		if (more == 0 && (k.mv_size != sizeof(id.b) || v.mv_size != IX_BLOB_REC_LEN)) {
			rc = fix(r, IX_PROBLEM_REFCOUNT, NULL, NULL, "a blob record is malformed", "malformed record removed");
			more = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
			continue;
		}
		if (more == 0)
			memcpy(id.b, k.mv_data, sizeof(id.b));
		c = more != 0 ? 1 : i >= r->refs.n ? -1 : st_id_cmp(&id, &r->refs.v[i].a);
		if (c > 0)
			id = r->refs.v[i].a;
		if (c >= 0) {
			want = r->refs.v[i].n;
			for (; i < r->refs.n && st_id_equal(&r->refs.v[i].a, &id); i++)
				nref++;
		}
		if (c <= 0) {
			const uint8_t *p = v.mv_data;
			for (int b = 0; b < 8; b++) {
				rec.size |= (uint64_t)p[b] << (8 * b);
				rec.refs |= (uint64_t)p[8 + b] << (8 * b);
			}
			snprintf(detail, sizeof(detail), "refcount %llu, referenced by %llu snapshot(s)",
				 (unsigned long long)rec.refs, (unsigned long long)nref);
		} else {
			snprintf(detail, sizeof(detail), "no blob record, referenced by %llu snapshot(s)",
				 (unsigned long long)nref);
		}
		if (nref == 0)
			rc = fix(r, IX_PROBLEM_REFCOUNT, &id, NULL, detail, "record removed (no snapshot references it)");
		else if (c > 0)
			rc = fix(r, IX_PROBLEM_REFCOUNT, &id, NULL, detail, "record added, refcount %llu",
				 (unsigned long long)nref);
		else if (rec.refs != nref)
			rc = fix(r, IX_PROBLEM_REFCOUNT, &id, NULL, detail, "refcount set to %llu",
				 (unsigned long long)nref);
		else if (rec.size != want)
			rc = fix(r, IX_PROBLEM_SIZE, &id, NULL, detail, "the record's size set to %llu, the layer's",
				 (unsigned long long)want);
		if (c <= 0)
			more = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
	}
	if ((rc = merge_end(txn, ix->blobs, cur, rc, more, r->fixes->n != before)) <= 0)
		return rc;
	for (i = 0; i < r->refs.n;) {
		struct ix_blob_rec rec = { .size = r->refs.v[i].n };
		size_t j = i;
		for (; j < r->refs.n && st_id_equal(&r->refs.v[j].a, &r->refs.v[i].a); j++)
			rec.refs++;
		if ((rc = ix_blob_rec_put(ix, txn, &r->refs.v[i].a, &rec)) < 0)
			return rc;
		i = j;
	}
	return 0;
}

#define REBUILT "children lists rebuilt from the snapshots' parents"

/* Children lists: exactly the (parent, child) edges of the readable
 * snapshots; any difference rewrites the database from them. */
static int repair_children(struct ix *ix, MDB_txn *txn, struct repair *r)
{
	MDB_cursor *cur;
	MDB_val k, v;
	size_t i = 0, before = r->fixes->n;
	int rc = ix_mdb(mdb_cursor_open(txn, ix->children, &cur));

	if (rc < 0)
		return rc;
	int more = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
	while (rc == 0 && (more == 0 || i < r->edges.n)) {
		struct ix_pair e = { 0 };
		int c;

		if (more == 0 && (k.mv_size != 16 || v.mv_size != 16)) {
			rc = fix(r, IX_PROBLEM_CHILDREN, NULL, NULL, "a children record is malformed", REBUILT);
			more = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
			continue;
		}
		if (more == 0) {
			memcpy(e.a.b, k.mv_data, 16);
			memcpy(e.b.b, v.mv_data, 16);
		}
		c = more != 0 ? 1 : i >= r->edges.n ? -1 : ix_pair_cmp(&e, &r->edges.v[i]);
		if (c < 0)
			rc = fix(r, IX_PROBLEM_CHILDREN, &e.b, NULL, "listed as a child of a snapshot that is not its parent",
				 REBUILT);
		else if (c > 0)
			rc = fix(r, IX_PROBLEM_CHILDREN, &r->edges.v[i].b, NULL, "missing from its parent's children list",
				 REBUILT);
		if (c >= 0)
			i++;
		if (c <= 0)
			more = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
	}
	if ((rc = merge_end(txn, ix->children, cur, rc, more, r->fixes->n != before)) <= 0)
		return rc;
	for (i = 0; i < r->edges.n; i++) {
		MDB_val pk = ix_val(r->edges.v[i].a.b, 16), cv = ix_val(r->edges.v[i].b.b, 16);
		rc = ix_mdb(mdb_put(txn, ix->children, &pk, &cv, MDB_NODUPDATA));
		if (rc < 0 && rc != MDB_KEYEXIST)
			return rc;
	}
	return 0;
}

static int repair_fn(struct ix *ix, MDB_txn *txn, void *arg)
{
	struct repair *r = arg;
	int rc;

	/* ix_write may run this again (map full): start from nothing. */
	r->fixes->n = 0;
	r->refs.n = 0;
	r->edges.n = 0;
	if ((rc = repair_snapshots(ix, txn, r)) < 0 ||
	    (rc = repair_tags(ix, txn, r)) < 0 ||
	    (rc = repair_blobs(ix, txn, r)) < 0 ||
	    (rc = repair_children(ix, txn, r)) < 0)
		return rc;
	return r->fixes->n ? 0 : IX_NOCHANGE;
}

int ix_repair_index(struct ix *ix, const struct ix_saved_rec *saved, size_t nsaved, struct ix_fixes *fixes)
{
	struct repair r = { .saved = saved, .nsaved = nsaved, .fixes = fixes };
	int rc = ix_write(ix, repair_fn, &r);

	free(r.refs.v);
	free(r.edges.v);
	if (rc < 0)
		fixes->n = 0;
	return rc;
}

/* ------------------------------------------------------------ what is left */

int ix_snap_lacking_foreach(struct ix *ix,
			    int (*cb)(const st_id *id, uint32_t missing, uint32_t nlayers, void *ctx),
			    void *ctx)
{
	struct ix_txn *t;
	MDB_cursor *cur;
	MDB_val k, v;
	int rc;

	if ((rc = ix_txn_begin(ix, &t)) < 0)
		return rc;
	if ((rc = ix_mdb(mdb_cursor_open(t->txn, ix->snaps, &cur))) < 0)
		goto out_end;
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		struct st_manifest *m;
		char why[ST_WHY_LEN];
		uint32_t missing = 0;
		st_id id;

		if (ix_snap_rec_check(ix, t->txn, &k, &v, &id, &m, why, sizeof(why)) < 0)
			continue; /* fsck reports (and repairs) damaged records */
		for (uint32_t i = 0; i < m->nlayers; i++) {
			uint64_t size;
			int src = st_blob_size(ix->s, &m->layers[i].id, &size);
			if (src == -ENOENT && ix_lazy_rec_has(ix, t->txn, &m->layers[i].id, NULL))
				continue; /* lazy: not lacking, its chunks come on demand */
			if (src == -ENOENT || (src == 0 && size != m->layers[i].pages * ST_PAGE_SIZE))
				missing++;
		}
		uint32_t n = m->nlayers;
		st_manifest_free(m);
		if (missing && (rc = cb(&id, missing, n, ctx)) != 0)
			break;
	}
	mdb_cursor_close(cur);
	if (rc == MDB_NOTFOUND)
		rc = 0;
out_end:
	ix_txn_end(t);
	return rc < 0 ? ix_err(rc) : rc;
}
