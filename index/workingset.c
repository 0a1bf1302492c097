/* workingset.c: each snapshot's working-set record: a blob linked from the snapshot, counted in its refcount so gc keeps it while the snapshot lives. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "index/index_int.h"

/* workingsets[snapshot id] = blob id (16) + blob bytes (u64le): 24 bytes. */
#define WS_REC_LEN 24

static void rec_decode(const MDB_val *v, st_id *blob, uint64_t *size)
{
	const uint8_t *p = v->mv_data;

	memcpy(blob->b, p, 16);
	*size = 0;
	for (int i = 0; i < 8; i++)
		*size |= (uint64_t)p[16 + i] << (8 * i);
}

static int blob_ref(struct ix *ix, MDB_txn *txn, const st_id *blob, uint64_t size, int delta)
{
	struct ix_blob_rec r;
	int rc = ix_blob_rec_get(ix, txn, blob, &r);

	if (rc == IX_ENOTFOUND) {
		if (delta < 0)
			return 0; /* fsck reports the mismatch; the link goes anyway */
		r = (struct ix_blob_rec){ .size = size, .refs = 0 };
	} else if (rc < 0) {
		return rc;
	}
	r.refs = delta < 0 ? (r.refs ? r.refs - 1 : 0) : r.refs + 1;
	if (r.refs == 0) {
		MDB_val k = ix_val(blob->b, sizeof(blob->b));
		rc = ix_mdb(mdb_del(txn, ix->blobs, &k, NULL));
		return rc == MDB_NOTFOUND ? 0 : rc;
	}
	return ix_blob_rec_put(ix, txn, blob, &r);
}

int ix_ws_del_txn(struct ix *ix, MDB_txn *txn, const st_id *id)
{
	MDB_val k = ix_val(id->b, sizeof(id->b)), v;
	st_id blob;
	uint64_t size;
	int rc;

	if (!ix->has_ws)
		return 0;
	rc = ix_mdb(mdb_get(txn, ix->ws, &k, &v));
	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc < 0)
		return rc;
	if (v.mv_size == WS_REC_LEN) {
		rec_decode(&v, &blob, &size);
		if ((rc = blob_ref(ix, txn, &blob, size, -1)) < 0)
			return rc;
	}
	return ix_mdb(mdb_del(txn, ix->ws, &k, NULL));
}

struct link {
	const st_id *snap, *blob;
	uint64_t size;
};

static int link_fn(struct ix *ix, MDB_txn *txn, void *arg)
{
	const struct link *l = arg;
	MDB_val k = ix_val(l->snap->b, sizeof(l->snap->b)), v;
	uint8_t rec[WS_REC_LEN];
	uint64_t size;
	int rc = ix_mdb(mdb_get(txn, ix->snaps, &k, &v));

	if (rc < 0)
		return rc;
	/* Inside the writer lock, so gc cannot unlink the blob under us. */
	if (st_blob_size(ix->s, l->blob, &size) < 0 || size != l->size)
		return IX_EMISSING;
	rc = ix_mdb(mdb_get(txn, ix->ws, &k, &v));
	if (rc == 0 && v.mv_size == WS_REC_LEN && memcmp(v.mv_data, l->blob->b, 16) == 0)
		return IX_NOCHANGE;
	if (rc < 0 && rc != MDB_NOTFOUND)
		return rc;
	if ((rc = ix_ws_del_txn(ix, txn, l->snap)) < 0 || (rc = blob_ref(ix, txn, l->blob, l->size, +1)) < 0)
		return rc;
	memcpy(rec, l->blob->b, 16);
	for (int i = 0; i < 8; i++)
		rec[16 + i] = (uint8_t)(l->size >> (8 * i));
	v = ix_val(rec, sizeof(rec));
	return ix_mdb(mdb_put(txn, ix->ws, &k, &v, 0));
}

/* The manifest of snapshot id, from a read transaction. */
static int manifest_of(struct ix *ix, const st_id *id, struct st_manifest **m)
{
	struct ix_txn *t;
	int rc = ix_txn_begin(ix, &t);

	if (rc < 0)
		return rc;
	rc = ix_snap_get(t, id, m);
	ix_txn_end(t);
	return rc;
}

int ix_ws_put(struct ix *ix, const st_id *snap, const void *buf, size_t len, st_id *out, char *why, size_t whylen)
{
	struct st_manifest *m = NULL;
	struct st_ws *ws = NULL;
	struct link l = { .snap = snap };
	st_id blob;
	int rc;

	if (ix->rdonly || !ix->has_ws)
		return ST_EREADONLY;
	if ((rc = manifest_of(ix, snap, &m)) < 0)
		return rc;
	if ((rc = st_ws_parse(buf, len, &ws, why, whylen)) < 0 || (rc = st_ws_check(ws, m, snap, why, whylen)) < 0)
		goto out_free;
	if ((rc = st_blob_put(ix->s, buf, len, &blob, NULL)) < 0)
		goto out_free;
	l.blob = &blob;
	l.size = len;
	/* On failure the blob stays unreferenced: gc reclaims it. */
	if ((rc = ix_write(ix, link_fn, &l)) < 0)
		goto out_free;
	if (out)
		*out = blob;
out_free:
	st_ws_free(ws);
	st_manifest_free(m);
	return rc;
}

int ix_ws_get(struct ix_txn *t, const st_id *snap, st_id *blob, uint64_t *size)
{
	MDB_val k = ix_val(snap->b, sizeof(snap->b)), v;
	uint64_t sz;
	st_id b;
	int rc;

	if (!t->ix->has_ws)
		return IX_ENOTFOUND;
	if ((rc = ix_mdb(mdb_get(t->txn, t->ix->ws, &k, &v))) < 0)
		return ix_err(rc);
	if (v.mv_size != WS_REC_LEN)
		return IX_ECORRUPT;
	rec_decode(&v, &b, &sz);
	if (blob)
		*blob = b;
	if (size)
		*size = sz;
	return 0;
}

int ix_ws_load(struct ix *ix, const st_id *snap, struct st_ws **out, st_id *blob_out, char *why, size_t whylen)
{
	struct st_manifest *m = NULL;
	struct ix_txn *t;
	uint8_t *buf = NULL;
	uint64_t size;
	st_id blob;
	size_t got = 0;
	int fd = -1, rc;

	if ((rc = ix_txn_begin(ix, &t)) < 0)
		return rc;
	if ((rc = ix_ws_get(t, snap, &blob, &size)) == 0)
		rc = ix_snap_get(t, snap, &m);
	ix_txn_end(t);
	if (rc < 0)
		return rc;
	if (size > 48 + (uint64_t)ST_WS_MAX_LAYERS * 24 + (uint64_t)ST_WS_MAX_RUNS * 8) {
		rc = IX_ECORRUPT;
		goto out_free;
	}
	if ((rc = st_blob_open(ix->s, &blob, &fd)) < 0) {
		rc = rc == -ENOENT ? IX_EMISSING : rc;
		goto out_free;
	}
	if (!(buf = malloc(size ? size : 1))) {
		rc = -ENOMEM;
		goto out_close;
	}
	while (got < size) {
		ssize_t r = pread(fd, buf + got, size - got, (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			rc = r < 0 ? -errno : IX_EMISSING;
			goto out_close;
		}
		got += (size_t)r;
	}
	struct st_ws *ws;
	if ((rc = st_ws_parse(buf, size, &ws, why, whylen)) < 0)
		goto out_close;
	if ((rc = st_ws_check(ws, m, snap, why, whylen)) < 0) {
		st_ws_free(ws);
		goto out_close;
	}
	*out = ws;
	if (blob_out)
		*blob_out = blob;
out_close:
	close(fd);
out_free:
	free(buf);
	st_manifest_free(m);
	return rc;
}

static int unlink_fn(struct ix *ix, MDB_txn *txn, void *arg)
{
	MDB_val k = ix_val(((const st_id *)arg)->b, 16), v;
	int rc = ix_mdb(mdb_get(txn, ix->ws, &k, &v));

	if (rc == MDB_NOTFOUND)
		return IX_ENOTFOUND;
	if (rc < 0)
		return rc;
	return ix_ws_del_txn(ix, txn, arg);
}

int ix_ws_del(struct ix *ix, const st_id *snap)
{
	if (ix->rdonly || !ix->has_ws)
		return ST_EREADONLY;
	return ix_write(ix, unlink_fn, (void *)snap);
}

int ix_ws_refs_add(struct ix *ix, MDB_txn *txn, struct ix_pairs *refs, uint64_t *dangling)
{
	MDB_cursor *cur;
	MDB_val k, v;
	uint64_t n = 0;
	int rc;

	if (!ix->has_ws)
		return 0;
	if ((rc = ix_mdb(mdb_cursor_open(txn, ix->ws, &cur))) < 0)
		return rc;
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		MDB_val sv;
		st_id snap, blob;
		uint64_t size;

		if (k.mv_size != sizeof(snap.b) || v.mv_size != WS_REC_LEN ||
		    mdb_get(txn, ix->snaps, &k, &sv) != 0) {
			n++;
			continue;
		}
		memcpy(snap.b, k.mv_data, sizeof(snap.b));
		rec_decode(&v, &blob, &size);
		if ((rc = ix_pairs_add(refs, &blob, &snap, size)) < 0)
			break;
	}
	mdb_cursor_close(cur);
	if (dangling)
		*dangling = n;
	return rc == MDB_NOTFOUND ? 0 : rc;
}

int ix_ws_dangling_del(struct ix *ix, MDB_txn *txn, uint64_t *removed)
{
	MDB_cursor *cur;
	MDB_val k, v;
	uint64_t n = 0;
	int rc;

	*removed = 0;
	if (!ix->has_ws)
		return 0;
	if ((rc = ix_mdb(mdb_cursor_open(txn, ix->ws, &cur))) < 0)
		return rc;
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		MDB_val sv;
		if (k.mv_size == 16 && v.mv_size == WS_REC_LEN && mdb_get(txn, ix->snaps, &k, &sv) == 0)
			continue;
		if ((rc = ix_mdb(mdb_cursor_del(cur, 0))) < 0)
			break;
		n++;
	}
	mdb_cursor_close(cur);
	if (rc == MDB_NOTFOUND)
		rc = 0;
	if (rc == 0)
		*removed = n;
	return rc;
}
