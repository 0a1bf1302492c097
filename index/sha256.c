/* sha256.c: the sha256 table: each blob's sha256 (what registries name it by) and the registry it came from. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "index/index_int.h"
#include "index/dist/dist.h"

int ix_sha256_get(struct ix *ix, const st_id *id, uint8_t sha[ST_SHA256_LEN])
{
	MDB_val k = ix_val(id->b, sizeof(id->b)), v;
	struct ix_txn *t;
	int rc;

	if (!ix->has_sha256)
		return IX_ENOTFOUND;
	if ((rc = ix_txn_begin(ix, &t)) < 0)
		return rc;
	rc = ix_mdb(mdb_get(t->txn, ix->sha256, &k, &v));
	if (rc == 0 && (v.mv_size < ST_SHA256_LEN || v.mv_size > ST_SHA256_LEN + IX_ORIGIN_MAX))
		rc = IX_ECORRUPT;
	if (rc == 0)
		memcpy(sha, v.mv_data, ST_SHA256_LEN);
	ix_txn_end(t);
	return ix_err(rc);
}

struct sha_put {
	const st_id *ids;
	const uint8_t (*shas)[ST_SHA256_LEN];
	size_t n;
};

static int sha_put_fn(struct ix *ix, MDB_txn *txn, void *arg)
{
	struct sha_put *p = arg;

	for (size_t i = 0; i < p->n; i++) {
		MDB_val k = ix_val(p->ids[i].b, 16), v;
		int rc = ix_mdb(mdb_get(txn, ix->sha256, &k, &v));
		if (rc == 0 && v.mv_size >= ST_SHA256_LEN && memcmp(v.mv_data, p->shas[i], ST_SHA256_LEN) == 0)
			continue; /* known, maybe with an origin to keep */
		v = ix_val(p->shas[i], ST_SHA256_LEN);
		if ((rc = ix_mdb(mdb_put(txn, ix->sha256, &k, &v, 0))) < 0)
			return rc;
	}
	return 0;
}

/* Record n (id, sha256) pairs in one transaction. */
int ix_sha256_put(struct ix *ix, const st_id *ids, const uint8_t (*shas)[ST_SHA256_LEN], size_t n)
{
	struct sha_put p = { ids, shas, n };

	if (n == 0)
		return 0;
	if (!ix->has_sha256)
		return ST_EREADONLY;
	return ix_write(ix, sha_put_fn, &p);
}

int ix_origin_get(struct ix *ix, const st_id *id, char *buf, size_t len)
{
	MDB_val k = ix_val(id->b, sizeof(id->b)), v;
	struct ix_txn *t;
	int rc;

	if (!ix->has_sha256)
		return IX_ENOTFOUND;
	if ((rc = ix_txn_begin(ix, &t)) < 0)
		return rc;
	rc = ix_mdb(mdb_get(t->txn, ix->sha256, &k, &v));
	if (rc == 0 && v.mv_size <= ST_SHA256_LEN)
		rc = MDB_NOTFOUND;
	else if (rc == 0 && (v.mv_size - ST_SHA256_LEN >= len || v.mv_size > ST_SHA256_LEN + IX_ORIGIN_MAX))
		rc = -ENAMETOOLONG;
	if (rc == 0) {
		memcpy(buf, (const char *)v.mv_data + ST_SHA256_LEN, v.mv_size - ST_SHA256_LEN);
		buf[v.mv_size - ST_SHA256_LEN] = '\0';
	}
	ix_txn_end(t);
	return ix_err(rc);
}

struct origin_put {
	const st_id *ids;
	size_t n;
	const char *origin;
	size_t olen;
};

static int origin_put_fn(struct ix *ix, MDB_txn *txn, void *arg)
{
	struct origin_put *p = arg;
	uint8_t buf[ST_SHA256_LEN + IX_ORIGIN_MAX];
	bool any = false;

	for (size_t i = 0; i < p->n; i++) {
		MDB_val k = ix_val(p->ids[i].b, 16), v;
		int rc = ix_mdb(mdb_get(txn, ix->sha256, &k, &v));
		if (rc == MDB_NOTFOUND || (rc == 0 && v.mv_size < ST_SHA256_LEN))
			continue; /* only beside a recorded sha256 */
		if (rc < 0)
			return rc;
		if (v.mv_size == ST_SHA256_LEN + p->olen &&
		    memcmp((const char *)v.mv_data + ST_SHA256_LEN, p->origin, p->olen) == 0)
			continue;
		memcpy(buf, v.mv_data, ST_SHA256_LEN);
		memcpy(buf + ST_SHA256_LEN, p->origin, p->olen);
		v = ix_val(buf, ST_SHA256_LEN + p->olen);
		if ((rc = ix_mdb(mdb_put(txn, ix->sha256, &k, &v, 0))) < 0)
			return rc;
		any = true;
	}
	return any ? 0 : IX_NOCHANGE;
}

int ix_origin_put(struct ix *ix, const st_id *ids, size_t n, const char *origin)
{
	struct origin_put p = { ids, n, origin, strlen(origin) };

	if (p.olen == 0 || p.olen > IX_ORIGIN_MAX)
		return -EINVAL;
	if (n == 0 || ix->rdonly || !ix->has_sha256)
		return 0;
	return ix_write(ix, origin_put_fn, &p);
}


int ix_snap_origin(struct ix *ix, const st_id *snap, char *buf, size_t len)
{
	struct st_manifest *m;
	struct ix_txn *t;
	int rc = ix_origin_get(ix, snap, buf, len);

	if (rc != IX_ENOTFOUND)
		return rc;
	if ((rc = ix_txn_begin(ix, &t)) < 0)
		return rc;
	rc = ix_snap_get(t, snap, &m);
	ix_txn_end(t);
	if (rc < 0)
		return rc;
	rc = IX_ENOTFOUND;
	for (uint32_t i = 0; i < m->nlayers && rc == IX_ENOTFOUND; i++)
		rc = ix_origin_get(ix, &m->layers[i].id, buf, len);
	st_manifest_free(m);
	return rc;
}
