/* ns.c: the namespace: what each directory holds, node attributes, listings and xattrs. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/kinds.h"
#include "index/lazy.h"
#include "store/mountabi.h"
#include "store/sys.h"


struct stage_init {
	struct fs_stage *stage;
	struct fs_sfile *sfile;
};

static void init_stage_node(struct fs_node *n, void *ctx)
{
	struct stage_init *si = ctx;

	n->stage = fs_stage_ref(si->stage);
	n->sfile = si->sfile;
}

int fs_ns_acquire(struct fs *fs, const struct fs_key *key, struct fs_node **out)
{
	return fs_itable_acquire(fs->itable, key, NULL, NULL, out);
}

static int acquire_stage(struct fs *fs, enum fs_kind kind, struct fs_stage *s, struct fs_sfile *f,
			 struct fs_node **out)
{
	struct fs_key k;
	struct stage_init si = { s, f };

	fs_key_serial(&k, kind, f ? fs_sfile_serial(f) : fs_stage_serial(s));
	return fs_itable_acquire(fs->itable, &k, init_stage_node, &si, out);
}

/* The index of layer id in manifest m, or -1 if m does not name it. */
static int layer_index(const struct st_manifest *m, const st_id *id)
{
	for (uint32_t i = 0; i < m->nlayers; i++)
		if (st_id_equal(&m->layers[i].id, id))
			return (int)i;
	return -1;
}

/* How long a removed snapshot's directory keeps answering for the `rm -r`
 * taking it apart, after its last use. */
#define REMOVING_LINGER_NS (2ll * 1000000000ll)

bool fs_ns_removing_find(struct fs *fs, const char *name, st_id *id, bool renew)
{
	int64_t now = fs_now_ns();
	bool found = false;

	pthread_mutex_lock(&fs->stage_lock);
	for (size_t i = 0; i < fs->nremoving;) {
		struct fs_removing *r = &fs->removing[i];
		if (now - r->last_ns > REMOVING_LINGER_NS) {
			free(r->name);
			*r = fs->removing[--fs->nremoving];
			continue;
		}
		if (strcmp(r->name, name) == 0) {
			*id = r->id;
			if (renew)
				r->last_ns = now;
			found = true;
		}
		i++;
	}
	pthread_mutex_unlock(&fs->stage_lock);
	return found;
}

bool fs_stagedir_place(const struct fs_node *n, bool *in_layers, struct fs_sfile **dir)
{
	*in_layers = n->kind == FS_K_STAGELAYERS;
	*dir = NULL;
	return true;
}

bool fs_stagefile_place(const struct fs_node *n, bool *in_layers, struct fs_sfile **dir)
{
	if (!fs_sfile_is_dir(n->sfile))
		return false;
	*in_layers = fs_sfile_in_layers(n->sfile);
	*dir = n->sfile;
	return true;
}

bool fs_ns_stage_place(const struct fs_node *n, bool *in_layers, struct fs_sfile **dir)
{
	const struct fs_kind_ops *k = fs_kind(n->kind);

	return k->place && k->place(n, in_layers, dir);
}

int fs_root_lookup(struct fs *fs, struct fs_node *dir, const char *name, struct fs_node **out)
{
	struct fs_key k = { 0 };

	if (strcmp(name, "snapshots") == 0)
		k.kind = FS_K_SNAPSHOTS;
	else if (strcmp(name, "blobs") == 0)
		k.kind = FS_K_BLOBS;
	else if (strcmp(name, "memory") == 0)
		k.kind = FS_K_MEMORY;
	else if (strcmp(name, "imports") == 0)
		k.kind = FS_K_IMPORTS;
	else
		return -ENOENT;
	return fs_ns_acquire(fs, &k, out);
}

int fs_imports_lookup(struct fs *fs, struct fs_node *dir, const char *name, struct fs_node **out)
{
	struct fs_stage *s = fs_stage_find_any(fs, name);
	int rc;

	if (!s)
		return -ENOENT;
	rc = acquire_stage(fs, FS_K_IMPORTFILE, s, NULL, out);
	fs_stage_unref(fs, s);
	return rc;
}

/* snapshots/ and memory/: a name is a tag (or, in snapshots/, an import). */
int fs_tagdir_lookup(struct fs *fs, struct fs_node *dir, const char *name, struct fs_node **out)
{
	struct fs_key k = { 0 };
	int rc;

	if (dir->kind == FS_K_SNAPSHOTS) {
		struct fs_stage *s = fs_stage_find(fs, name);
		if (s) {
			rc = acquire_stage(fs, FS_K_STAGEDIR, s, NULL, out);
			fs_stage_unref(fs, s);
			return rc;
		}
	}
	struct fs_tags *t = fs_tags_get(fs);
	const struct fs_tag *tag = fs_tags_find(t, name);
	if (tag) {
		k.kind = dir->kind == FS_K_SNAPSHOTS ? FS_K_SNAPDIR : FS_K_MEMFILE;
		k.id = tag->id;
		k.name = dir->kind == FS_K_SNAPSHOTS ? tag->name : NULL;
		rc = fs_ns_acquire(fs, &k, out);
		if (rc >= 0)
			fs_view_handed(fs, tag->name, &tag->id);
	} else if (dir->kind == FS_K_SNAPSHOTS && fs_ns_removing_find(fs, name, &k.id, false)) {
		k.kind = FS_K_SNAPDIR;
		k.name = name;
		rc = fs_ns_acquire(fs, &k, out);
	} else {
		rc = -ENOENT;
	}
	fs_tags_put(fs, t);
	return rc;
}

int fs_snapdir_lookup(struct fs *fs, struct fs_node *dir, const char *name, struct fs_node **out)
{
	struct fs_key k = { 0 };

	if (strcmp(name, "manifest.json") == 0 && !(dir->rm && dir->rm->manifest)) {
		k.kind = FS_K_MANIFEST;
		k.id = dir->id;
		return fs_ns_acquire(fs, &k, out);
	}
	if (strcmp(name, "layers") == 0 && !(dir->rm && dir->rm->layers_dir)) {
		k.kind = FS_K_LAYERS;
		k.id = dir->id;
		k.name = dir->name;
		return fs_ns_acquire(fs, &k, out);
	}
	return -ENOENT;
}

int fs_layers_lookup(struct fs *fs, struct fs_node *dir, const char *name, struct fs_node **out)
{
	struct fs_key k = { 0 };
	const struct fs_snap *snap;
	st_id id;
	int rc;

	if (st_id_parse(name, &id) < 0)
		return -ENOENT;
	if ((rc = fs_snap_get(fs, &dir->id, &snap)) < 0)
		return rc;
	int li = layer_index(snap->m, &id);
	if (li < 0)
		return -ENOENT;
	/* the snapdir node carries the rm -r state; find it by key */
	struct fs_key dk = { FS_K_SNAPDIR, dir->id, dir->name };
	struct fs_node *dn;
	if (fs_ns_acquire(fs, &dk, &dn) == 0) {
		bool hidden = dn->rm && dn->rm->layer && dn->rm->layer[li];
		fs_itable_forget(fs->itable, dn->ino, 1);
		if (hidden)
			return -ENOENT;
	}
	k.kind = FS_K_BLOB;
	k.id = id;
	return fs_ns_acquire(fs, &k, out);
}

int fs_blobs_lookup(struct fs *fs, struct fs_node *dir, const char *name, struct fs_node **out)
{
	struct fs_key k = { 0 };
	struct ix_lazy_info li;
	st_id id;

	/* A lazy layer is reachable by name (not listed): what a
	 * restore from the store maps (docs/lazy.md). */
	if (st_id_parse(name, &id) < 0 ||
	    (!st_blob_has(fs->store, &id) && ix_lazy_layer_info(fs->lazy, &id, &li) != 1))
		return -ENOENT;
	k.kind = FS_K_BLOB;
	k.id = id;
	return fs_ns_acquire(fs, &k, out);
}

/* An import's directory, its layers/ or an extra directory in it. */
int fs_stageplace_lookup(struct fs *fs, struct fs_node *dir, const char *name, struct fs_node **out)
{
	bool in_layers;
	struct fs_sfile *sdir;

	if (!fs_ns_stage_place(dir, &in_layers, &sdir))
		return -ENOTDIR;
	if (dir->kind == FS_K_STAGEDIR && strcmp(name, "layers") == 0) {
		if (!fs_stage_has_layers(dir->stage))
			return -ENOENT;
		return acquire_stage(fs, FS_K_STAGELAYERS, dir->stage, NULL, out);
	}
	struct fs_sfile *f = fs_stage_file_find(dir->stage, in_layers, sdir, name);
	if (!f)
		return -ENOENT;
	return acquire_stage(fs, FS_K_STAGEFILE, dir->stage, f, out);
}

int fs_ns_lookup(struct fs *fs, struct fs_node *dir, const char *name, struct fs_node **out)
{
	const struct fs_kind_ops *k = fs_kind(dir->kind);
	int rc = fs_name_check(name);

	if (rc < 0)
		return rc;
	return k->lookup ? k->lookup(fs, dir, name, out) : -ENOTDIR;
}

double fs_no_timeout(struct fs *fs, const struct fs_node *n)
{
	return 0;
}

double fs_snapdir_timeout(struct fs *fs, const struct fs_node *n)
{
	/* Cached for a day only while its tag names it: a snapshot an
	 * unlink removed is seen by the rm -r taking it apart alone. */
	struct fs_tags *t = fs_tags_get(fs);
	const struct fs_tag *tag = n->name ? fs_tags_find(t, n->name) : NULL;
	bool current = tag && st_id_equal(&tag->id, &n->id);
	fs_tags_put(fs, t);
	return current ? fs->entry_timeout : 0;
}

double fs_listing_timeout(struct fs *fs, const struct fs_node *n)
{
	return 1.0; /* link counts and times follow the tag set */
}

double fs_node_timeout(struct fs *fs, const struct fs_node *n)
{
	const struct fs_kind_ops *k = fs_kind(n->kind);

	return k->timeout ? k->timeout(fs, n) : fs->entry_timeout;
}

static void set_time(struct stat *st, int64_t ns)
{
	if (ns < 0)
		ns = 0;
	st->st_mtim.tv_sec = ns / 1000000000ll;
	st->st_mtim.tv_nsec = ns % 1000000000ll;
	st->st_atim = st->st_mtim;
	st->st_ctim = st->st_mtim;
}

static void dir_attr(struct stat *st, mode_t perm, nlink_t nlink)
{
	st->st_mode = S_IFDIR | perm;
	st->st_nlink = nlink;
	st->st_size = 4096;
	st->st_blocks = 8;
}

static int blob_attr(struct fs *fs, struct fs_node *n)
{
	char path[4096];
	struct stat bs;
	int rc;

	if (n->attr_known)
		return 0;
	rc = st_blob_path(fs->store, &n->id, path, sizeof(path));
	if (rc < 0)
		return rc;
	if ((rc = st_sys_fstatat(AT_FDCWD, path, &bs, 0)) < 0) {
		struct ix_lazy_info li;
		if (rc != -ENOENT || ix_lazy_layer_info(fs->lazy, &n->id, &li) != 1)
			return rc;
		/* A lazy layer: its full size, the chunks it holds so far. */
		n->size = li.size;
		n->blocks = li.present * li.chunk_size / 512;
		n->mtime_ns = fs->start_ns;
		return 0;
	}
	n->size = (uint64_t)bs.st_size;
	n->blocks = (uint64_t)bs.st_blocks;
	n->mtime_ns = (int64_t)bs.st_mtim.tv_sec * 1000000000ll + bs.st_mtim.tv_nsec;
	n->attr_known = true;
	return 0;
}

int fs_root_attr(struct fs *fs, struct fs_node *n, struct stat *st)
{
	dir_attr(st, 0555, 6);
	return 0;
}

/* blobs/, memory/, imports/ */
int fs_plaindir_attr(struct fs *fs, struct fs_node *n, struct stat *st)
{
	dir_attr(st, 0555, 2);
	return 0;
}

int fs_importfile_attr(struct fs *fs, struct fs_node *n, struct stat *st)
{
	char *text;
	size_t len;
	int rc;

	if ((rc = fs_stage_status(fs, n->stage, &text, &len)) < 0)
		return rc;
	free(text);
	st->st_mode = S_IFREG | 0444;
	st->st_nlink = 1;
	st->st_size = (off_t)len;
	st->st_blocks = (blkcnt_t)((len + 511) / 512);
	set_time(st, fs_now_ns());
	return 0;
}

int fs_snapshots_attr(struct fs *fs, struct fs_node *n, struct stat *st)
{
	struct fs_tags *t = fs_tags_get(fs);

	dir_attr(st, 0755, 2 + t->n);
	fs_tags_put(fs, t);
	return 0;
}

/* A snapshot's directory, its layers/, its manifest.json or its memory file. */
int fs_snap_attr(struct fs *fs, struct fs_node *n, struct stat *st)
{
	const struct fs_snap *snap;
	int rc;

	if ((rc = fs_snap_get(fs, &n->id, &snap)) < 0)
		return rc;
	set_time(st, snap->m->created);
	if (n->kind == FS_K_SNAPDIR) {
		dir_attr(st, 0555, 3);
	} else if (n->kind == FS_K_LAYERS) {
		dir_attr(st, 0555, 2);
	} else if (n->kind == FS_K_MANIFEST) {
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		st->st_size = (off_t)snap->rawlen;
		st->st_blocks = (blkcnt_t)((snap->rawlen + 511) / 512);
	} else {
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		st->st_size = (off_t)snap->m->mem_size;
		st->st_blocks = (blkcnt_t)(snap->data_pages * (ST_PAGE_SIZE / 512));
	}
	return 0;
}

int fs_blob_attr(struct fs *fs, struct fs_node *n, struct stat *st)
{
	int rc;

	if ((rc = blob_attr(fs, n)) < 0)
		return rc;
	set_time(st, n->mtime_ns);
	st->st_mode = S_IFREG | 0444;
	/* One inode under blobs/ and under every snapshot using it, but a
	 * link count of 1: above 1, tar and cp -a would record the later
	 * paths as hard links, which no import can take (docs/fs.md). */
	st->st_nlink = 1;
	st->st_size = (off_t)n->size;
	st->st_blocks = (blkcnt_t)n->blocks;
	return 0;
}

int fs_stage_node_attr(struct fs *fs, struct fs_node *n, struct stat *st)
{
	fs_stage_attr(n->stage, n->sfile, n->kind == FS_K_STAGELAYERS, st);
	st->st_ino = n->st_ino;
	st->st_uid = getuid();
	st->st_gid = getgid();
	return 0;
}

int fs_ns_attr(struct fs *fs, struct fs_node *n, struct stat *st)
{
	const struct fs_kind_ops *k = fs_kind(n->kind);

	memset(st, 0, sizeof(*st));
	st->st_ino = n->st_ino;
	st->st_uid = getuid();
	st->st_gid = getgid();
	st->st_blksize = FS_MAX_REQUEST; /* cp and friends size their buffers by it */
	set_time(st, fs->start_ns);
	return k->attr ? k->attr(fs, n, st) : -EIO;
}

static int list_blob(const st_id *id, uint64_t size, int64_t mtime_ns, void *ctx)
{
	struct fs_dirlist *l = ctx;
	char hex[ST_ID_HEX_LEN + 1];
	struct fs_key k = { .kind = FS_K_BLOB, .id = *id };

	st_id_format(id, hex);
	return fs_dirlist_add(l, hex, &k, S_IFREG);
}

/* An empty listing to fill. */
static int list_new(struct fs_dirlist **out)
{
	return (*out = st_sys_calloc(1, sizeof(**out))) ? 0 : -ENOMEM;
}

/* Hand l out, or free it on failure. */
static int list_done(struct fs_dirlist *l, int rc, struct fs_dirlist **out)
{
	if (rc < 0) {
		fs_dirlist_free(l);
		return rc;
	}
	*out = l;
	return 0;
}

int fs_root_list(struct fs *fs, struct fs_node *dir, struct fs_dirlist **out)
{
	struct fs_dirlist *l;
	struct fs_key k = { 0 };
	int rc;

	if ((rc = list_new(&l)) < 0)
		return rc;
	k.kind = FS_K_SNAPSHOTS;
	rc = fs_dirlist_add(l, "snapshots", &k, S_IFDIR);
	k.kind = FS_K_BLOBS;
	if (rc >= 0)
		rc = fs_dirlist_add(l, "blobs", &k, S_IFDIR);
	k.kind = FS_K_MEMORY;
	if (rc >= 0)
		rc = fs_dirlist_add(l, "memory", &k, S_IFDIR);
	k.kind = FS_K_IMPORTS;
	if (rc >= 0)
		rc = fs_dirlist_add(l, "imports", &k, S_IFDIR);
	return list_done(l, rc, out);
}

int fs_tagdir_list(struct fs *fs, struct fs_node *dir, struct fs_dirlist **out)
{
	struct fs_dirlist *l;
	int rc;

	if ((rc = list_new(&l)) < 0)
		return rc;
	/* Only committed snapshots: an import in progress is never listed. */
	struct fs_tags *t = fs_tags_get(fs);
	for (size_t i = 0; i < t->n && rc >= 0; i++) {
		struct fs_key k = { .id = t->v[i].id };
		if (dir->kind == FS_K_SNAPSHOTS) {
			k.kind = FS_K_SNAPDIR;
			k.name = t->v[i].name;
			rc = fs_dirlist_add(l, t->v[i].name, &k, S_IFDIR);
		} else {
			k.kind = FS_K_MEMFILE;
			rc = fs_dirlist_add(l, t->v[i].name, &k, S_IFREG);
		}
	}
	fs_tags_put(fs, t);
	return list_done(l, rc, out);
}

int fs_snapdir_list(struct fs *fs, struct fs_node *dir, struct fs_dirlist **out)
{
	struct fs_dirlist *l;
	int rc;

	if ((rc = list_new(&l)) < 0)
		return rc;
	/* layers/ before manifest.json: a cp -r out of a mount into
	 * another mount then sends the manifest last, so its close()
	 * commits the snapshot and reports any problem to cp. */
	struct fs_key k = { .kind = FS_K_LAYERS, .id = dir->id, .name = dir->name };
	if (!(dir->rm && dir->rm->layers_dir))
		rc = fs_dirlist_add(l, "layers", &k, S_IFDIR);
	k.kind = FS_K_MANIFEST;
	k.name = NULL;
	if (rc >= 0 && !(dir->rm && dir->rm->manifest))
		rc = fs_dirlist_add(l, "manifest.json", &k, S_IFREG);
	return list_done(l, rc, out);
}

int fs_layers_list(struct fs *fs, struct fs_node *dir, struct fs_dirlist **out)
{
	const struct fs_snap *snap;
	struct fs_dirlist *l;
	int rc;

	if ((rc = list_new(&l)) < 0)
		return rc;
	if ((rc = fs_snap_get(fs, &dir->id, &snap)) < 0)
		return list_done(l, rc, out);
	struct fs_key dk = { FS_K_SNAPDIR, dir->id, dir->name };
	struct fs_node *dn = NULL;
	if (fs_ns_acquire(fs, &dk, &dn) < 0)
		dn = NULL;
	for (uint32_t i = 0; i < snap->m->nlayers && rc >= 0; i++) {
		char hex[ST_ID_HEX_LEN + 1];
		struct fs_key k = { .kind = FS_K_BLOB, .id = snap->m->layers[i].id };
		if (dn && dn->rm && dn->rm->layer && dn->rm->layer[i])
			continue;
		st_id_format(&k.id, hex);
		rc = fs_dirlist_add(l, hex, &k, S_IFREG);
	}
	if (dn)
		fs_itable_forget(fs->itable, dn->ino, 1);
	return list_done(l, rc, out);
}

int fs_blobs_list(struct fs *fs, struct fs_node *dir, struct fs_dirlist **out)
{
	struct fs_dirlist *l;
	int rc;

	if ((rc = list_new(&l)) < 0)
		return rc;
	return list_done(l, st_blob_foreach(fs->store, list_blob, l), out);
}

int fs_imports_list(struct fs *fs, struct fs_node *dir, struct fs_dirlist **out)
{
	return fs_stage_list_imports(fs, out);
}

int fs_stageplace_list(struct fs *fs, struct fs_node *dir, struct fs_dirlist **out)
{
	bool in_layers;
	struct fs_sfile *sdir;

	if (!fs_ns_stage_place(dir, &in_layers, &sdir))
		return -ENOTDIR;
	return fs_stage_list(dir->stage, in_layers, sdir, out);
}

int fs_ns_list(struct fs *fs, struct fs_node *dir, struct fs_dirlist **out)
{
	const struct fs_kind_ops *k = fs_kind(dir->kind);

	return k->list ? k->list(fs, dir, out) : -ENOTDIR;
}

static int put_value(const char *v, size_t len, char *buf, size_t size)
{
	if (size == 0)
		return (int)len;
	if (size < len)
		return -ERANGE;
	memcpy(buf, v, len);
	return (int)len;
}

bool fs_snap_id(struct fs_node *n, st_id *id)
{
	*id = n->id;
	return true;
}

bool fs_stagefile_id(struct fs_node *n, st_id *id)
{
	const char *buf;
	size_t len;

	return fs_sfile_blob(n->stage, n->sfile, id, &buf, &len) == 0 && !buf;
}

bool fs_stagedir_id(struct fs_node *n, st_id *id)
{
	return fs_stage_committed_id(n->stage, id);
}

/* The id a node carries in user.strata.id, if any. */
static bool node_id(struct fs_node *n, st_id *id)
{
	const struct fs_kind_ops *k = fs_kind(n->kind);

	return k->id && k->id(n, id);
}

/*
 * user.strata.restore of a committed snapshot directory (store/mountabi.h):
 * manifest.json's bytes and every layer's backing blob, so a VMM restoring
 * from the mount gets everything it needs in one request instead of an
 * open, a release and a getxattr per layer. Larger than an xattr may be:
 * E2BIG, and the reader uses the files.
 */
static int restore_value(struct fs *fs, struct fs_node *n, char *buf, size_t size)
{
	const struct fs_snap *snap;
	struct st_restore_enc e;
	char path[4096];
	int rc;

	if (n->rm) /* an `rm -r` is taking it apart */
		return -ENODATA;
	if ((rc = fs_snap_get(fs, &n->id, &snap)) < 0)
		return rc;
	st_restore_enc_begin(&e, buf, size, snap->raw, snap->rawlen);
	for (uint32_t i = 0; i < snap->m->nlayers && e.len <= ST_XATTR_VALUE_MAX; i++) {
		const st_id *lid = &snap->m->layers[i].id;
		struct ix_lazy_info li;
		if (!st_blob_has(fs->store, lid) && ix_lazy_layer_info(fs->lazy, lid, &li) == 1) {
			st_restore_enc_layer(&e, ST_RESTORE_FILE, "");
			continue;
		}
		if ((rc = st_blob_path(fs->store, lid, path, sizeof(path))) < 0)
			return rc;
		st_restore_enc_layer(&e, ST_RESTORE_BLOB, path);
	}
	return st_restore_enc_end(&e);
}

int fs_ns_getxattr(struct fs *fs, struct fs_node *n, const char *name, char *buf, size_t size)
{
	st_id id;
	char hex[ST_ID_HEX_LEN + 1], path[4096];

	/* Only user.strata.* exist. Saying the security, trusted and system
	 * (POSIX ACL) namespaces are not supported, rather than empty, lets
	 * `ls -l` stop asking for them after the first file of the mount: one
	 * round trip per listing instead of one per file (docs/fs.md). */
	if (strncmp(name, "security.", 9) == 0 || strncmp(name, "trusted.", 8) == 0 ||
	    strncmp(name, "system.", 7) == 0)
		return -EOPNOTSUPP;
	if (!node_id(n, &id))
		return -ENODATA;
	if (strcmp(name, ST_XATTR_ID) == 0) {
		st_id_format(&id, hex);
		return put_value(hex, ST_ID_HEX_LEN, buf, size);
	}
	if (strcmp(name, ST_XATTR_RESTORE) == 0 && n->kind == FS_K_SNAPDIR)
		return restore_value(fs, n, buf, size);
	if (strcmp(name, ST_XATTR_BLOB_PATH) == 0 && (n->kind == FS_K_BLOB || n->kind == FS_K_STAGEFILE)) {
		struct ix_lazy_info li;
		if (n->kind == FS_K_BLOB && !st_blob_has(fs->store, &id) && ix_lazy_layer_info(fs->lazy, &id, &li) == 1)
			return -ENODATA; /* no complete backing blob yet */
		int rc = st_blob_path(fs->store, &id, path, sizeof(path));
		if (rc < 0)
			return rc;
		return put_value(path, strlen(path), buf, size);
	}
	return -ENODATA;
}

int fs_ns_listxattr(struct fs *fs, struct fs_node *n, char *buf, size_t size)
{
	static const char both[] = ST_XATTR_ID "\0" ST_XATTR_BLOB_PATH;
	st_id id;

	if (!node_id(n, &id))
		return put_value("", 0, buf, size);
	if (n->kind == FS_K_BLOB || n->kind == FS_K_STAGEFILE)
		return put_value(both, sizeof(both), buf, size);
	return put_value(ST_XATTR_ID, sizeof(ST_XATTR_ID), buf, size);
}
