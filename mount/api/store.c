/* store.c: strata_store: a store and its index opened together, and the store-side calls a host program needs (resolve, list, tag, verify, gc, import, export). */
#include <errno.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "index/lazy.h"
#include "mount/api/api_int.h"

int strata_store_open(const char *path, unsigned flags, strata_store **out)
{
	struct ix_opts io = { 0 };
	strata_store *s;
	int rc;

	if (!path)
		return api_fail(-EINVAL, "store: the path is NULL");
	if (flags & ~(unsigned)(STRATA_STORE_CREATE | STRATA_STORE_RDONLY | STRATA_STORE_NOSYNC))
		return api_fail(-EINVAL, "store %s: unknown flags 0x%x", path, flags);
	if ((flags & STRATA_STORE_CREATE) && (flags & STRATA_STORE_RDONLY))
		return api_fail(-EINVAL, "store %s: STRATA_STORE_CREATE and STRATA_STORE_RDONLY together", path);
	if ((flags & STRATA_STORE_CREATE) && (rc = st_store_init(path, NULL)) < 0)
		return api_fail(rc, "store %s: cannot create it: %s", path, st_strerror(rc));
	if (!(s = calloc(1, sizeof(*s))))
		return api_fail(-ENOMEM, "store %s: out of memory", path);
	if ((rc = st_store_open(path, flags & STRATA_STORE_RDONLY ? ST_OPEN_RDONLY : 0, &s->st)) < 0) {
		free(s);
		return api_fail(rc, "store %s: %s", path, st_strerror(rc));
	}
	io.flags = (flags & STRATA_STORE_RDONLY ? IX_OPEN_RDONLY : 0) | (flags & STRATA_STORE_NOSYNC ? IX_OPEN_NOSYNC : 0);
	if (flags & STRATA_STORE_NOSYNC)
		st_store_set_sync(s->st, ST_SYNC_NONE);
	if ((rc = ix_open(s->st, &io, &s->ix)) < 0) {
		st_store_close(s->st);
		free(s);
		return api_fail(rc, "store %s: cannot open its index: %s", path, st_strerror(rc));
	}
	pthread_mutex_init(&s->lazy_lock, NULL);
	pthread_mutex_init(&s->gc_lock, NULL);
	*out = s;
	return 0;
}

int strata_store_create(const char *path, const struct strata_store_options *opts)
{
	struct strata_store_options o = { .size = sizeof(o) };
	struct st_store_opts so = { 0 };
	int rc;

	if (!path)
		return api_fail(-EINVAL, "store: the path is NULL");
	if (opts) {
		if (opts->size < offsetof(struct strata_store_options, group) + sizeof(opts->group))
			return api_fail(-EINVAL, "store %s: options of %zu bytes (this version's are %zu)", path, opts->size,
					sizeof(o));
		memcpy(&o, opts, opts->size < sizeof(o) ? opts->size : sizeof(o));
	}
	if (o.sync != STRATA_SYNC_FULL && o.sync != STRATA_SYNC_NONE)
		return api_fail(-EINVAL, "store %s: %d is not a STRATA_SYNC_* policy", path, o.sync);
	so.sync = o.sync == STRATA_SYNC_NONE ? ST_SYNC_NONE : ST_SYNC_FULL;
	so.shared = o.shared != 0;
	so.group = (gid_t)o.group;
	rc = st_store_init(path, &so);
	if (rc == -EEXIST)
		return api_fail(rc, "store %s already exists and is not shared with group %u", path, (unsigned)o.group);
	if (rc == -EPERM)
		return api_fail(rc, "store %s: cannot give it to group %u: the caller is not a member of it", path,
				(unsigned)o.group);
	if (rc == ST_ENOTSTORE)
		return api_fail(rc, "store %s: the directory is not empty and is not a strata store", path);
	if (rc < 0)
		return api_fail(rc, "store %s: cannot create it: %s", path, st_strerror(rc));
	return 0;
}

const char *strata_store_path(const strata_store *st)
{
	return st_store_path(st->st);
}

void strata_store_close(strata_store *st)
{
	if (!st)
		return;
	/* After its sandboxes (the rule): stops the lazy layers' helper. */
	fs_private_free(st->lazy);
	ix_lazy_close(st->lazy_read);
	free(st->lazy_cacert);
	free(st->lazy_user);
	free(st->lazy_pass);
	api_strv_free(st->lazy_certs_d);
	pthread_mutex_destroy(&st->lazy_lock);
	pthread_mutex_destroy(&st->gc_lock);
	ix_close(st->ix);
	st_store_close(st->st);
	free(st);
}

int api_store_resolve(strata_store *st, const char *ref, st_id *id)
{
	struct ix_txn *t;
	int rc;

	if (!ref)
		return api_fail(-EINVAL, "store: the snapshot reference is NULL");
	if ((rc = ix_txn_begin(st->ix, &t)) < 0)
		return api_fail(rc, "store %s: cannot read its index: %s", st_store_path(st->st), st_strerror(rc));
	rc = ix_resolve(t, ref, id);
	ix_txn_end(t);
	if (rc == IX_ENOTFOUND || rc == ST_EBADNAME)
		return api_fail(rc, "store %s: no snapshot '%s' (no such tag, id or id prefix)", st_store_path(st->st),
				ref);
	if (rc == IX_EAMBIGUOUS)
		return api_fail(rc, "store %s: '%s' is the prefix of more than one snapshot id", st_store_path(st->st),
				ref);
	if (rc < 0)
		return api_fail(rc, "store %s: cannot look up '%s': %s", st_store_path(st->st), ref, st_strerror(rc));
	return 0;
}

int api_store_snap_get(strata_store *st, const char *what, const char *ref, st_id *id, struct st_manifest **m)
{
	struct ix_txn *t;
	int rc;

	if ((rc = api_store_resolve(st, ref, id)) < 0)
		return rc;
	if ((rc = ix_txn_begin(st->ix, &t)) == 0) {
		rc = ix_snap_get(t, id, m);
		ix_txn_end(t);
	}
	if (rc < 0)
		return api_fail(rc, "%s %s: %s", what, ref, st_strerror(rc));
	return 0;
}

int strata_store_set_registry(strata_store *st, const strata_registry *reg)
{
	static const strata_registry defaults;

	if (!st)
		return api_fail(-EINVAL, "store: NULL");
	if (!reg)
		reg = &defaults;
	pthread_mutex_lock(&st->lazy_lock);
	int rc = st->lazy ? -EBUSY : 0;
	if (rc == 0 && (api_str_set(&st->lazy_cacert, reg->cacert) < 0 || api_str_set(&st->lazy_user, reg->user) < 0 ||
			api_str_set(&st->lazy_pass, reg->pass) < 0 ||
			api_strv_set(&st->lazy_certs_d, (const char *const *)reg->certs_d) < 0))
		rc = -ENOMEM;
	if (rc == 0) {
		st->lazy_reg.creds = reg->creds;
		st->lazy_reg.creds_ctx = reg->creds_ctx;
	}
	pthread_mutex_unlock(&st->lazy_lock);
	if (rc == -EBUSY)
		return api_fail(rc, "store %s: its lazy layers are already being fetched with the settings they "
				"started with (set the registry before the first lazy open)", st_store_path(st->st));
	return rc;  /* -ENOMEM: api_str_set said so */
}

_Static_assert(STRATA_LAZY_ERRMSG_SIZE >= FS_PRIVATE_WHY_SIZE, "strata.h's size holds every reason fs_private keeps");

/* No api_fail here: strata_errmsg's buffer is written with vsnprintf,
 * which a signal handler may not call. */
int strata_store_lazy_errmsg(const strata_store *st, char *buf, size_t len)
{
	if (!st || !buf || !len)
		return -EINVAL;
	return (int)fs_private_why(atomic_load_explicit(&st->lazy, memory_order_acquire), buf, len);
}

/* The store's private mount for lazy layers, made and started once. */
static int lazy_server(strata_store *st, struct fs_private **out)
{
	int rc = 0;

	pthread_mutex_lock(&st->lazy_lock);
	if (!st->lazy) {
		/* The settings strata_store_set_registry copied, as a registry's. */
		st->lazy_reg.user = st->lazy_user;
		st->lazy_reg.pass = st->lazy_pass;
		const struct ix_auth *auth = api_registry_auth(&st->lazy_reg, &st->lazy_auth, &st->lazy_fn_auth);
		struct fs_private_config pc = { .store = st->st, .cacert = st->lazy_cacert, .auth = auth,
						.certs_d = (const char *const *)st->lazy_certs_d };
		struct fs_private *p = NULL;
		if ((rc = fs_private_new(&pc, &p)) == 0 && (rc = fs_private_start(p)) < 0) {
			char why[1024] = "";
			fs_private_why(p, why, sizeof(why));
			fs_private_free(p);
			pthread_mutex_unlock(&st->lazy_lock);
			return api_fail(rc, "store %s: cannot serve its lazy layers (a private FUSE mount): %s",
					st_store_path(st->st), why[0] ? why : st_strerror(rc));
		}
		/* Published started: a handler never sees one being freed. */
		if (rc == 0)
			atomic_store_explicit(&st->lazy, p, memory_order_release);
	}
	*out = st->lazy;
	pthread_mutex_unlock(&st->lazy_lock);
	return rc < 0 ? api_fail(rc, "store: %s", st_strerror(rc)) : 0;
}

int api_store_manifest(strata_store *st, const char *ref, struct st_manifest **m, st_id *out, vmm_layer_open_fn *open,
		       void **open_ctx)
{
	struct ix_txn *t;
	bool lazy = false;
	st_id id;
	int rc;

	if ((rc = api_store_resolve(st, ref, &id)) < 0)
		return rc;
	if ((rc = ix_txn_begin(st->ix, &t)) < 0)
		return api_fail(rc, "store %s: cannot read its index: %s", st_store_path(st->st), st_strerror(rc));
	rc = ix_snap_get(t, &id, m);
	ix_txn_end(t);
	if (rc < 0)
		return api_fail(rc, "snapshot %s: %s", ref, st_strerror(rc));
	for (uint32_t i = 0; i < (*m)->nlayers && !lazy; i++)
		lazy = !st_blob_has(st->st, &(*m)->layers[i].id);
	*open = vmm_layer_open_store;
	*open_ctx = st->st;
	if (lazy) {
		/* A layer with no blob: a lazy pull's (its chunks are fetched as
		 * pages are touched), or one the store lost (the open fails). */
		struct fs_private *p;
		if ((rc = lazy_server(st, &p)) < 0) {
			st_manifest_free(*m);
			return rc;
		}
		*open = fs_private_layer_open;
		*open_ctx = p;
	}
	if (out)
		*out = id;
	return 0;
}

int strata_store_resolve(strata_store *st, const char *ref, char id[STRATA_ID_LEN + 1])
{
	st_id sid;
	int rc = api_store_resolve(st, ref, &sid);

	if (rc == 0)
		st_id_format(&sid, id);
	return rc;
}

struct walk {
	strata_snapshot_fn snap;
	strata_tag_fn tag;
	void *ctx;
	int count;
};

static int walk_snap(const st_id *id, void *ctx)
{
	struct walk *w = ctx;
	char hex[ST_ID_HEX_LEN + 1];

	st_id_format(id, hex);
	w->count++;
	return w->snap(w->ctx, hex);
}

static int walk_tag(const char *name, const st_id *id, void *ctx)
{
	struct walk *w = ctx;
	char hex[ST_ID_HEX_LEN + 1];

	st_id_format(id, hex);
	w->count++;
	return w->tag(w->ctx, name, hex);
}

static int walk(strata_store *st, struct walk *w)
{
	struct ix_txn *t;
	int rc;

	if ((rc = ix_txn_begin(st->ix, &t)) < 0)
		return api_fail(rc, "store %s: cannot read its index: %s", st_store_path(st->st), st_strerror(rc));
	rc = w->snap ? ix_snap_foreach(t, walk_snap, w) : ix_tag_foreach(t, walk_tag, w);
	ix_txn_end(t);
	if (rc < 0)
		return api_fail(rc, "store %s: %s", st_store_path(st->st), st_strerror(rc));
	/* A callback's positive return stops the walk and is returned as is. */
	return rc > 0 ? rc : w->count;
}

int strata_store_snapshots(strata_store *st, strata_snapshot_fn cb, void *ctx)
{
	if (!cb)
		return api_fail(-EINVAL, "store: the callback is NULL");
	return walk(st, &(struct walk){ .snap = cb, .ctx = ctx });
}

int strata_store_tags(strata_store *st, strata_tag_fn cb, void *ctx)
{
	if (!cb)
		return api_fail(-EINVAL, "store: the callback is NULL");
	return walk(st, &(struct walk){ .tag = cb, .ctx = ctx });
}

int strata_store_tag(strata_store *st, const char *ref, const char *name, unsigned flags)
{
	st_id id;
	int rc;

	if (flags & ~(unsigned)STRATA_TAG_FORCE)
		return api_fail(-EINVAL, "tag: unknown flags 0x%x", flags);
	if (!name || !st_name_valid(name))
		return api_fail(ST_EBADNAME, "tag: '%s' is not a valid tag name", name ? name : "NULL");
	if ((rc = api_store_resolve(st, ref, &id)) < 0)
		return rc;
	rc = ix_tag_set(st->ix, name, &id, flags & STRATA_TAG_FORCE ? IX_TAG_FORCE : 0);
	if (rc == IX_EEXIST)
		return api_fail(rc, "tag: '%s' already names another snapshot (STRATA_TAG_FORCE moves it)", name);
	if (rc < 0)
		return api_fail(rc, "tag %s: %s", name, st_strerror(rc));
	return 0;
}

int strata_store_untag(strata_store *st, const char *name, unsigned flags)
{
	int rc;

	if (flags & ~(unsigned)STRATA_TAG_PRUNE)
		return api_fail(-EINVAL, "untag: unknown flags 0x%x", flags);
	if (!name || !st_name_valid(name))
		return api_fail(ST_EBADNAME, "untag: '%s' is not a valid tag name", name ? name : "NULL");
	rc = ix_tag_del(st->ix, name, flags & STRATA_TAG_PRUNE ? IX_TAG_PRUNE : 0, NULL);
	if (rc == IX_ENOTFOUND)
		return api_fail(rc, "untag: no tag '%s' in store %s", name, st_store_path(st->st));
	if (rc < 0)
		return api_fail(rc, "untag %s: %s", name, st_strerror(rc));
	return 0;
}

int strata_store_verify(strata_store *st, unsigned flags, strata_problem_fn cb, void *ctx)
{
	if (flags & STRATA_CHECK_REPAIR) /* verify changes nothing: strata_store_check repairs */
		return api_fail(-EINVAL, "verify: unknown flags 0x%x", flags);
	return api_store_check(st, flags, NULL, cb, ctx);
}

int strata_store_gc(strata_store *st, unsigned grace_s, uint64_t *freed)
{
	struct ix_gc_stats gs = { 0 };
	int rc = ix_gc(st->ix, grace_s, &gs);

	if (rc < 0)
		return api_fail(rc, "gc %s: %s", st_store_path(st->st), st_strerror(rc));
	pthread_mutex_lock(&st->gc_lock);
	st->gc = gs;
	pthread_mutex_unlock(&st->gc_lock);
	if (freed)
		*freed = gs.bytes_removed;
	return 0;
}

int strata_store_info(strata_store *st, int what, uint64_t *value)
{
	pthread_mutex_lock(&st->gc_lock);
	struct ix_gc_stats gs = st->gc;
	pthread_mutex_unlock(&st->gc_lock);
	uint64_t v;

	switch (what) {
	case STRATA_STORE_INFO_GC_BLOBS_REMOVED: v = gs.blobs_removed; break;
	case STRATA_STORE_INFO_GC_BYTES_REMOVED: v = gs.bytes_removed; break;
	case STRATA_STORE_INFO_GC_STAGING_REMOVED: v = gs.tmp_removed; break;
	case STRATA_STORE_INFO_GC_LAZY_REMOVED: v = gs.lazy_removed; break;
	case STRATA_STORE_INFO_GC_BLOBS_IN_USE: v = gs.blobs_in_use; break;
	case STRATA_STORE_INFO_GC_BLOBS_YOUNG: v = gs.blobs_young; break;
	case STRATA_STORE_INFO_SHARED: v = st_store_shared(st->st, NULL); break;
	case STRATA_STORE_INFO_GROUP: {
		gid_t g = 0;
		v = st_store_shared(st->st, &g) ? g : 0;
		break;
	}
	default:
		if (what >= STRATA_STORE_INFO_XFER_SNAPSHOTS && what <= STRATA_STORE_INFO_XFER_COMPLETED_REQUESTS) {
			pthread_mutex_lock(&st->gc_lock);
			v = st->xfer.v[what - STRATA_STORE_INFO_XFER_SNAPSHOTS];
			pthread_mutex_unlock(&st->gc_lock);
			break;
		}
		if (what >= STRATA_STORE_INFO_CHECK_SNAPSHOTS && what <= STRATA_STORE_INFO_CHECK_REMAINING) {
			pthread_mutex_lock(&st->gc_lock);
			v = st->check[what - STRATA_STORE_INFO_CHECK_SNAPSHOTS];
			pthread_mutex_unlock(&st->gc_lock);
			break;
		}
		if (what >= STRATA_STORE_INFO_IMPORT_OCI && what <= STRATA_STORE_INFO_IMPORT_LAYERS_HEALED) {
			pthread_mutex_lock(&st->gc_lock);
			v = st->import[what - STRATA_STORE_INFO_IMPORT_OCI];
			pthread_mutex_unlock(&st->gc_lock);
			break;
		}
		return api_fail(-EINVAL, "store info: %d is not a STRATA_STORE_INFO_* this version knows", what);
	}
	*value = v;
	return 0;
}

struct lazy_find {
	const st_id *id;
	bool found;
};

static int lazy_match(const st_id *layer, void *ctx)
{
	struct lazy_find *f = ctx;

	f->found = st_id_equal(layer, f->id);
	return f->found; /* 1 stops the walk */
}

int strata_store_lacks(strata_store *st, const char *dir)
{
	struct st_manifest *m = NULL;
	char why[ST_WHY_LEN] = "";
	int rc, missing = 0;

	if (!dir)
		return api_fail(-EINVAL, "store: the directory is NULL");
	if ((rc = st_snapdir_read(dir, &m, why, sizeof(why))) < 0)
		return api_fail(rc, "%s: %s", dir, why[0] ? why : st_strerror(rc));
	for (uint32_t i = 0; i < m->nlayers; i++) {
		struct lazy_find f = { .id = &m->layers[i].id };
		/* A lazy layer's record counts as held (pull --lazy). */
		if (!st_blob_has(st->st, f.id) && !(ix_lazy_foreach(st->ix, lazy_match, &f) >= 0 && f.found))
			missing++;
	}
	st_manifest_free(m);
	return missing;
}

int strata_tag_valid(const char *name)
{
	return st_name_valid(name);
}

int strata_store_rename_tag(strata_store *st, const char *from, const char *to, unsigned flags)
{
	int rc;

	if (flags & ~(unsigned)STRATA_TAG_FORCE)
		return api_fail(-EINVAL, "rename tag: unknown flags 0x%x", flags);
	if (!from || !to || !st_name_valid(from) || !st_name_valid(to))
		return api_fail(ST_EBADNAME, "rename tag: '%s' is not a valid tag name",
				!from ? "NULL" : !st_name_valid(from) ? from : to ? to : "NULL");
	rc = ix_tag_rename(st->ix, from, to, flags & STRATA_TAG_FORCE ? IX_TAG_FORCE : 0);
	if (rc == IX_ENOTFOUND)
		return api_fail(rc, "rename tag: no tag '%s' in store %s", from, st_store_path(st->st));
	if (rc == IX_EEXIST)
		return api_fail(rc, "rename tag: '%s' already names another snapshot (STRATA_TAG_FORCE replaces it)", to);
	if (rc < 0)
		return api_fail(rc, "rename tag %s: %s", from, st_strerror(rc));
	return 0;
}

int strata_store_delete(strata_store *st, const char *id)
{
	st_id sid;
	int rc;

	if (!id || st_id_parse(id, &sid) < 0)
		return api_fail(ST_EBADID, "delete: '%s' is not a snapshot id (32 lowercase hex digits)", id ? id : "NULL");
	if ((rc = ix_snap_del(st->ix, &sid)) == IX_ENOTFOUND)
		return api_fail(rc, "delete: no snapshot %s in store %s", id, st_store_path(st->st));
	if (rc < 0)
		return api_fail(rc, "delete %s: %s", id, st_strerror(rc));
	return 0;
}

#define IMPORT(name) im[STRATA_STORE_INFO_IMPORT_##name - STRATA_STORE_INFO_IMPORT_OCI]

int strata_store_import(strata_store *st, const char *dir, const char *tag, unsigned flags,
			char id[STRATA_ID_LEN + 1])
{
	uint64_t im[sizeof(st->import) / sizeof(st->import[0])] = { 0 };
	char why[ST_WHY_LEN] = "";
	st_id sid;
	int rc;

	if (!dir)
		return api_fail(-EINVAL, "import: the directory is NULL");
	if (flags & ~(unsigned)STRATA_TAG_FORCE)
		return api_fail(-EINVAL, "import: unknown flags 0x%x", flags);
	if (tag && !st_name_valid(tag))
		return api_fail(ST_EBADNAME, "import: '%s' is not a valid tag name", tag);
	IMPORT(OCI) = ix_oci_is_layout(dir);
	if (IMPORT(OCI)) {
		struct ix_oci_stats os = { 0 };
		rc = ix_oci_import(st->ix, dir, tag, flags & STRATA_TAG_FORCE ? IX_TAG_FORCE : 0, NULL, &os, &sid, why,
				   sizeof(why));
		if (rc == 0) {
			IMPORT(SNAPSHOTS) = os.snapshots;
			IMPORT(BLOBS_ADDED) = os.blobs_moved;
			IMPORT(BLOBS_PRESENT) = os.blobs_skipped;
			IMPORT(BYTES_ADDED) = os.bytes_moved;
		}
	} else {
		struct ix_import_stats is = { 0 };
		rc = ix_import_dir(st->ix, dir, tag, flags & STRATA_TAG_FORCE ? IX_TAG_FORCE : 0, &sid, &is, why,
				   sizeof(why));
		if (rc == 0) {
			IMPORT(SNAPSHOTS) = 1;
			IMPORT(LAYERS) = is.layers;
			IMPORT(BLOBS_ADDED) = is.layers_added;
			IMPORT(BLOBS_PRESENT) = is.layers - is.layers_added;
			IMPORT(BYTES_ADDED) = is.bytes_added;
			IMPORT(EXISTED) = is.existed;
			IMPORT(LAYERS_HEALED) = is.layers_healed;
		}
	}
	pthread_mutex_lock(&st->gc_lock);
	memcpy(st->import, im, sizeof(im));
	pthread_mutex_unlock(&st->gc_lock);
	if (rc == IX_EEXIST)
		return api_fail(rc, "import: tag '%s' already names another snapshot (STRATA_TAG_FORCE moves it)", tag);
	if (rc < 0)
		return api_fail_why(rc, why, "import of %s %s: %s", IMPORT(OCI) ? "OCI layout" : "snapshot directory",
				    dir, why[0] ? why : st_strerror(rc));
	if (id)
		st_id_format(&sid, id);
	return 0;
}

int strata_store_export(strata_store *st, const char *ref, const char *dir)
{
	st_id id;
	int rc;

	if (!dir)
		return api_fail(-EINVAL, "export: the directory is NULL");
	if ((rc = api_store_resolve(st, ref, &id)) < 0)
		return rc;
	rc = ix_export(st->ix, ref, dir);
	if (rc == -EEXIST)
		return api_fail(rc, "export: %s already exists (export writes a new directory)", dir);
	if (rc == -ENOENT)
		return api_fail(rc, "export: %s: the parent directory does not exist, or a layer blob is missing from "
				"store %s", dir, st_store_path(st->st));
	if (rc < 0)
		return api_fail(rc, "export of '%s' to %s: %s", ref, dir, st_strerror(rc));
	return 0;
}
