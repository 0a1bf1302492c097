/* tag.c: tags (human names for snapshot ids): get, set, delete, rename, list, resolve. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "index/index_int.h"

static int tag_read(struct ix *ix, MDB_txn *txn, const char *name, st_id *out)
{
	MDB_val k = ix_val(name, strlen(name)), v;
	int rc = ix_mdb(mdb_get(txn, ix->tags, &k, &v));

	if (rc < 0)
		return rc == MDB_NOTFOUND ? IX_ENOTFOUND : rc;
	if (v.mv_size != sizeof(out->b))
		return IX_ECORRUPT;
	memcpy(out->b, v.mv_data, sizeof(out->b));
	return 0;
}

int ix_tag_get(struct ix_txn *t, const char *name, st_id *out)
{
	if (!st_name_valid(name))
		return ST_EBADNAME;
	return ix_err(tag_read(t->ix, t->txn, name, out));
}

struct tag_ctx {
	const char *name, *to;
	const st_id *id;
	unsigned flags;
	bool pruned;
};

static int tag_set_fn(struct ix *ix, MDB_txn *txn, void *arg)
{
	struct tag_ctx *c = arg;
	MDB_val k = ix_val(c->id->b, sizeof(c->id->b)), v;
	st_id cur;
	int rc = ix_mdb(mdb_get(txn, ix->snaps, &k, &v));

	if (rc < 0)
		return rc == MDB_NOTFOUND ? IX_ENOTFOUND : rc;
	rc = tag_read(ix, txn, c->name, &cur);
	if (rc == 0 && st_id_equal(&cur, c->id))
		return IX_NOCHANGE;
	if (rc == 0 && !(c->flags & IX_TAG_FORCE))
		return IX_EEXIST;
	if (rc < 0 && rc != IX_ENOTFOUND)
		return rc;
	k = ix_val(c->name, strlen(c->name));
	v = ix_val(c->id->b, sizeof(c->id->b));
	return ix_mdb(mdb_put(txn, ix->tags, &k, &v, 0));
}

int ix_tag_set(struct ix *ix, const char *name, const st_id *id, unsigned flags)
{
	struct tag_ctx c = { .name = name, .id = id, .flags = flags };

	if (!st_name_valid(name))
		return ST_EBADNAME;
	return ix_write(ix, tag_set_fn, &c);
}

/* True if some tag other than `except` names id. */
static int tag_other_names(struct ix *ix, MDB_txn *txn, const st_id *id, const char *except, bool *out)
{
	MDB_cursor *cur;
	MDB_val k, v;
	size_t elen = strlen(except);
	int rc = ix_mdb(mdb_cursor_open(txn, ix->tags, &cur));

	if (rc < 0)
		return rc;
	*out = false;
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (v.mv_size == sizeof(id->b) && memcmp(v.mv_data, id->b, sizeof(id->b)) == 0 &&
		    !(k.mv_size == elen && memcmp(k.mv_data, except, elen) == 0)) {
			*out = true;
			break;
		}
	}
	mdb_cursor_close(cur);
	return rc == MDB_NOTFOUND || rc == 0 ? 0 : ix_mdb(rc);
}

static int tag_del_fn(struct ix *ix, MDB_txn *txn, void *arg)
{
	struct tag_ctx *c = arg;
	MDB_val k = ix_val(c->name, strlen(c->name));
	st_id id;
	bool others;
	int rc = tag_read(ix, txn, c->name, &id);

	c->pruned = false;
	if (rc < 0)
		return rc;
	if (c->flags & IX_TAG_PRUNE) {
		if ((rc = tag_other_names(ix, txn, &id, c->name, &others)) < 0)
			return rc;
		if (!others) {
			/* Deleting the snapshot removes every tag naming it, this one too. */
			rc = ix_snap_del_txn(ix, txn, &id);
			if (rc == 0) {
				c->pruned = true;
				return 0;
			}
			if (rc != IX_ENOTFOUND)
				return rc;
		}
	}
	return ix_mdb(mdb_del(txn, ix->tags, &k, NULL));
}

int ix_tag_del(struct ix *ix, const char *name, unsigned flags, bool *pruned)
{
	struct tag_ctx c = { .name = name, .flags = flags };
	int rc;

	if (!st_name_valid(name))
		return ST_EBADNAME;
	rc = ix_write(ix, tag_del_fn, &c);
	if (rc == 0 && pruned)
		*pruned = c.pruned;
	return rc;
}

static int tag_rename_fn(struct ix *ix, MDB_txn *txn, void *arg)
{
	struct tag_ctx *c = arg;
	MDB_val k, v;
	st_id id, cur;
	int rc = tag_read(ix, txn, c->name, &id);

	if (rc < 0)
		return rc;
	if (strcmp(c->name, c->to) == 0)
		return IX_NOCHANGE;
	rc = tag_read(ix, txn, c->to, &cur);
	if (rc == 0 && !st_id_equal(&cur, &id) && !(c->flags & IX_TAG_FORCE))
		return IX_EEXIST;
	if (rc < 0 && rc != IX_ENOTFOUND)
		return rc;
	k = ix_val(c->to, strlen(c->to));
	v = ix_val(id.b, sizeof(id.b));
	if ((rc = ix_mdb(mdb_put(txn, ix->tags, &k, &v, 0))) < 0)
		return rc;
	k = ix_val(c->name, strlen(c->name));
	return ix_mdb(mdb_del(txn, ix->tags, &k, NULL));
}

int ix_tag_rename(struct ix *ix, const char *from, const char *to, unsigned flags)
{
	struct tag_ctx c = { .name = from, .to = to, .flags = flags };

	if (!st_name_valid(from) || !st_name_valid(to))
		return ST_EBADNAME;
	return ix_write(ix, tag_rename_fn, &c);
}

int ix_tag_foreach(struct ix_txn *t, int (*cb)(const char *name, const st_id *id, void *ctx),
		   void *ctx)
{
	MDB_cursor *cur;
	MDB_val k, v;
	char name[ST_NAME_MAX + 1];
	int rc = ix_mdb(mdb_cursor_open(t->txn, t->ix->tags, &cur));

	if (rc < 0)
		return ix_err(rc);
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		st_id id;

		if (k.mv_size == 0 || k.mv_size > ST_NAME_MAX || v.mv_size != sizeof(id.b)) {
			rc = IX_ECORRUPT;
			break;
		}
		memcpy(name, k.mv_data, k.mv_size);
		name[k.mv_size] = '\0';
		memcpy(id.b, v.mv_data, sizeof(id.b));
		if ((rc = cb(name, &id, ctx)) != 0)
			break;
	}
	mdb_cursor_close(cur);
	if (rc == MDB_NOTFOUND)
		return 0;
	return rc < 0 ? ix_err(rc) : rc;
}

/* An abbreviated id: IX_ID_PREFIX_MIN..31 lowercase hex digits. */
static bool prefix_valid(const char *ref)
{
	size_t n = strlen(ref);

	if (n < IX_ID_PREFIX_MIN || n >= ST_ID_HEX_LEN)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((ref[i] >= '0' && ref[i] <= '9') || (ref[i] >= 'a' && ref[i] <= 'f')))
			return false;
	return true;
}

struct prefix_match {
	const char *prefix;
	size_t len;
	unsigned n;
	st_id id;
};

static int prefix_cb(const st_id *id, void *ctx)
{
	struct prefix_match *pm = ctx;
	char hex[ST_ID_HEX_LEN + 1];

	st_id_format(id, hex);
	if (memcmp(hex, pm->prefix, pm->len) == 0 && pm->n++ == 0)
		pm->id = *id;
	return 0;
}

int ix_resolve(struct ix_txn *t, const char *ref, st_id *out)
{
	st_id id;

	if (st_id_parse(ref, &id) == 0 && ix_snap_has(t, &id)) {
		*out = id;
		return 0;
	}
	if (!st_name_valid(ref))
		return ST_EBADNAME;
	int rc = ix_tag_get(t, ref, out);
	if (rc != IX_ENOTFOUND || !prefix_valid(ref))
		return rc;
	struct prefix_match pm = { .prefix = ref, .len = strlen(ref) };
	if ((rc = ix_snap_foreach(t, prefix_cb, &pm)) < 0)
		return rc;
	if (pm.n == 0)
		return IX_ENOTFOUND;
	if (pm.n > 1)
		return IX_EAMBIGUOUS;
	*out = pm.id;
	return 0;
}
