/* wslink.c: the workingsets table: each snapshot's link to its working-set record blob, counted in the blob's refcount so gc keeps it while the snapshot lives. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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


int ix_ws_link(struct ix *ix, const st_id *snap, const st_id *blob, uint64_t size)
{
	struct link l = { .snap = snap, .blob = blob, .size = size };

	return ix_write(ix, link_fn, &l);
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
