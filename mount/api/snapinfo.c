/* snapinfo.c: what the store knows of one snapshot: its figures, parent, children and lazy layers (strata_store_snapshot_info and its kin). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "index/lazy.h"
#include "mount/api/api_int.h"

static int any_lazy(const st_id *layer, void *ctx)
{
	(void)layer;
	*(bool *)ctx = true;
	return 1; /* one is enough */
}

/* A store that never saw a lazy pull opens nothing for it. */
struct ix_lazy *api_store_lazy_read(strata_store *st)
{
	bool any = false;

	pthread_mutex_lock(&st->lazy_lock);
	if (!st->lazy_read && ix_lazy_foreach(st->ix, any_lazy, &any) >= 0 && any &&
	    ix_lazy_open(st->ix, NULL, &st->lazy_read) < 0)
		st->lazy_read = NULL;
	struct ix_lazy *lz = st->lazy_read;
	pthread_mutex_unlock(&st->lazy_lock);
	return lz;
}

/* Snapshot ref's record (and, if m, its manifest: the caller's). */
static int snap_read(strata_store *st, const char *ref, st_id *id, struct ix_snap_info *info, struct st_manifest **m)
{
	struct ix_txn *t;
	int rc;

	if (!st)
		return api_fail(-EINVAL, "store: NULL");
	if ((rc = api_store_resolve(st, ref, id)) < 0)
		return rc;
	if ((rc = ix_txn_begin(st->ix, &t)) < 0)
		return api_fail(rc, "store %s: cannot read its index: %s", st_store_path(st->st), st_strerror(rc));
	if ((rc = ix_snap_info(t, id, info)) == 0 && m)
		rc = ix_snap_get(t, id, m);
	ix_txn_end(t);
	if (rc < 0)
		return api_fail(rc, "snapshot %s: its record cannot be read: %s", ref, st_strerror(rc));
	return 0;
}

/* Snapshot id's working-set record (ref: its name in messages). */
static int ws_load(strata_store *st, const char *ref, const st_id *id, struct st_ws **ws, st_id *blob)
{
	char why[ST_WHY_LEN] = "";
	st_id b;
	int rc = ix_ws_load(st->ix, id, ws, blob ? blob : &b, why, sizeof(why));

	if (rc == IX_ENOTFOUND)
		return api_fail(rc, "snapshot %s has no working-set record", ref);
	if (rc < 0)
		return api_fail_why(rc, why, "snapshot %s: its working-set record cannot be read: %s", ref,
				    why[0] ? why : st_strerror(rc));
	return 0;
}

int strata_store_snapshot_info(strata_store *st, const char *ref, int what, uint64_t *value)
{
	bool lazy = what >= STRATA_SNAPSHOT_LAZY_LAYERS && what <= STRATA_SNAPSHOT_LAZY_PRESENT;
	bool manifest = lazy || what == STRATA_SNAPSHOT_ABI || what == STRATA_SNAPSHOT_RANGES ||
			what == STRATA_SNAPSHOT_PAGES_PRESENT;
	struct st_manifest *m = NULL;
	struct ix_snap_info info;
	uint64_t v = 0;
	st_id id;
	int rc;

	if (what < STRATA_SNAPSHOT_MEMORY || what > STRATA_SNAPSHOT_WS_LAYERS)
		return api_fail(-EINVAL, "snapshot info: %d is not a STRATA_SNAPSHOT_* this version knows", what);
	if ((rc = snap_read(st, ref, &id, &info, manifest ? &m : NULL)) < 0)
		return rc;
	if (what >= STRATA_SNAPSHOT_WS_PAGES) {
		struct st_ws *ws;
		if ((rc = ws_load(st, ref, &id, &ws, NULL)) < 0)
			return rc;
		*value = what == STRATA_SNAPSHOT_WS_PAGES ? ws->pages : what == STRATA_SNAPSHOT_WS_RUNS ? ws->nruns
													 : ws->nlayers;
		st_ws_free(ws);
		return 0;
	}
	switch (what) {
	case STRATA_SNAPSHOT_MEMORY: v = info.mem_size; break;
	case STRATA_SNAPSHOT_STORED: v = info.stored_bytes; break;
	case STRATA_SNAPSHOT_UNIQUE: v = info.unique_bytes; break;
	case STRATA_SNAPSHOT_CREATED: v = info.created > 0 ? (uint64_t)info.created : 0; break;
	case STRATA_SNAPSHOT_LAYERS: v = info.nlayers; break;
	case STRATA_SNAPSHOT_HAS_PARENT: v = info.has_parent; break;
	case STRATA_SNAPSHOT_MANIFEST_BYTES: v = info.manifest_len; break;
	case STRATA_SNAPSHOT_ABI: v = m->abi_version; st_manifest_free(m); break;
	case STRATA_SNAPSHOT_RANGES: v = m->nranges; st_manifest_free(m); break;
	case STRATA_SNAPSHOT_PAGES_PRESENT:
		for (uint64_t i = 0; i < m->nranges; i++)
			v += m->ranges[i].npages;
		st_manifest_free(m);
		break;
	default: {
		struct ix_lazy *lz = api_store_lazy_read(st);
		struct ix_lazy_info li;
		for (uint32_t i = 0; lz && i < m->nlayers; i++) {
			if (ix_lazy_layer_info(lz, &m->layers[i].id, &li) != 1)
				continue;
			v += what == STRATA_SNAPSHOT_LAZY_LAYERS ? 1 : what == STRATA_SNAPSHOT_LAZY_CHUNKS ? li.chunks
												 : li.present;
		}
		st_manifest_free(m);
	}
	}
	*value = v;
	return 0;
}

int strata_store_parent(strata_store *st, const char *ref, char id[STRATA_ID_LEN + 1])
{
	struct ix_snap_info info;
	st_id sid;
	int rc;

	if ((rc = snap_read(st, ref, &sid, &info, NULL)) < 0)
		return rc;
	if (!info.has_parent)
		return api_fail(IX_ENOTFOUND, "snapshot %s has no parent", ref);
	st_id_format(&info.parent, id);
	return 0;
}

struct kids {
	strata_snapshot_fn cb;
	void *ctx;
	int count;
};

static int kid(const st_id *id, void *ctx)
{
	struct kids *k = ctx;
	char hex[ST_ID_HEX_LEN + 1];

	st_id_format(id, hex);
	k->count++;
	return k->cb(k->ctx, hex);
}

int strata_store_children(strata_store *st, const char *ref, strata_snapshot_fn cb, void *ctx)
{
	struct kids k = { cb, ctx, 0 };
	struct ix_txn *t;
	st_id id;
	int rc;

	if (!st || !cb)
		return api_fail(-EINVAL, "children: the %s is NULL", st ? "callback" : "store");
	if ((rc = api_store_resolve(st, ref, &id)) < 0)
		return rc;
	if ((rc = ix_txn_begin(st->ix, &t)) < 0)
		return api_fail(rc, "store %s: cannot read its index: %s", st_store_path(st->st), st_strerror(rc));
	rc = ix_children_foreach(t, &id, kid, &k);
	ix_txn_end(t);
	if (rc < 0)
		return api_fail(rc, "children of %s: %s", ref, st_strerror(rc));
	/* A callback's positive return stops the walk and is returned as is. */
	return rc > 0 ? rc : k.count;
}

int strata_store_lazy_origin(strata_store *st, const char *ref, char *buf, size_t len)
{
	struct st_manifest *m = NULL;
	struct ix_snap_info info;
	struct ix_lazy_info li;
	st_id id;
	int rc;

	if (!buf)
		return api_fail(-EINVAL, "lazy origin: the buffer is NULL");
	if ((rc = snap_read(st, ref, &id, &info, &m)) < 0)
		return rc;
	struct ix_lazy *lz = api_store_lazy_read(st);
	rc = IX_ENOTFOUND;
	for (uint32_t i = 0; lz && i < m->nlayers && rc == IX_ENOTFOUND; i++)
		if (ix_lazy_layer_info(lz, &m->layers[i].id, &li) == 1)
			rc = strlen(li.origin) < len ? 0 : -ERANGE;
	st_manifest_free(m);
	if (rc == IX_ENOTFOUND)
		return api_fail(rc, "snapshot %s has no lazy layer", ref);
	if (rc < 0)
		return api_fail(rc, "lazy origin of %s: %zu bytes do not hold it", ref, len);
	snprintf(buf, len, "%s", li.origin);
	return 0;
}

int strata_store_manifest(strata_store *st, const char *ref, char *buf, size_t len)
{
	struct ix_txn *t;
	const void *raw;
	size_t n = 0;
	st_id id;
	int rc;

	if (!st || !buf)
		return api_fail(-EINVAL, "manifest: the %s is NULL", st ? "buffer" : "store");
	if ((rc = api_store_resolve(st, ref, &id)) < 0)
		return rc;
	if ((rc = ix_txn_begin(st->ix, &t)) < 0)
		return api_fail(rc, "store %s: cannot read its index: %s", st_store_path(st->st), st_strerror(rc));
	if ((rc = ix_snap_get_raw(t, &id, &raw, &n)) == 0 && n < len && n <= INT32_MAX) {
		memcpy(buf, raw, n);
		buf[n] = '\0';
	}
	ix_txn_end(t);
	if (rc < 0)
		return api_fail(rc, "manifest of %s: %s", ref, st_strerror(rc));
	if (n >= len || n > INT32_MAX)
		return api_fail(-ERANGE, "manifest of %s: %zu bytes do not hold its %zu and a NUL", ref, len, n);
	return (int)n;
}

int strata_store_layers(strata_store *st, const char *ref, strata_layer_fn cb, void *ctx)
{
	struct st_manifest *m = NULL;
	struct ix_snap_info info;
	st_id id;
	int rc;

	if (!cb)
		return api_fail(-EINVAL, "layers: the callback is NULL");
	if ((rc = snap_read(st, ref, &id, &info, &m)) < 0)
		return rc;
	struct ix_lazy *lz = api_store_lazy_read(st);
	for (uint32_t i = 0; i < m->nlayers && rc == 0; i++) {
		char hex[ST_ID_HEX_LEN + 1];
		struct ix_lazy_info li;
		st_id_format(&m->layers[i].id, hex);
		struct strata_layer l = { .size = sizeof(l), .id = hex, .pages = m->layers[i].pages, .origin = "" };
		if (lz && ix_lazy_layer_info(lz, &m->layers[i].id, &li) == 1) {
			l.lazy = 1;
			l.chunks = li.chunks;
			l.present = li.present;
			l.chunk_size = li.chunk_size;
			l.origin = li.origin;
		}
		rc = cb(ctx, &l);
	}
	uint32_t n = m->nlayers;
	st_manifest_free(m);
	return rc ? rc : (int)n;
}

int strata_store_labels(strata_store *st, const char *ref, strata_label_fn cb, void *ctx)
{
	struct st_manifest *m = NULL;
	struct ix_snap_info info;
	st_id id;
	int rc;

	if (!cb)
		return api_fail(-EINVAL, "labels: the callback is NULL");
	if ((rc = snap_read(st, ref, &id, &info, &m)) < 0)
		return rc;
	for (size_t i = 0; i < m->nlabels && rc == 0; i++)
		rc = cb(ctx, m->labels[i].key, m->labels[i].value);
	size_t n = m->nlabels;
	st_manifest_free(m);
	return rc ? rc : (int)n;
}

int strata_store_working_set(strata_store *st, const char *ref, char record[STRATA_ID_LEN + 1])
{
	struct ix_snap_info info;
	struct st_ws *ws;
	st_id id, blob;
	int rc;

	if (!record)
		return api_fail(-EINVAL, "working set: the record buffer is NULL");
	if ((rc = snap_read(st, ref, &id, &info, NULL)) < 0 || (rc = ws_load(st, ref, &id, &ws, &blob)) < 0)
		return rc;
	st_ws_free(ws);
	st_id_format(&blob, record);
	return 0;
}
