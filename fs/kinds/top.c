/* kinds/top.c: the top of the tree: /, snapshots/, blobs/ and memory/ (their rows in kinds.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/kinds.h"
#include "index/dist/dist.h"
#include "store/sys.h"

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

/* snapshots/ and memory/: a name is a tag (or, in snapshots/, an import). */
int fs_tagdir_lookup(struct fs *fs, struct fs_node *dir, const char *name, struct fs_node **out)
{
	struct fs_key k = { 0 };
	int rc;

	if (dir->kind == FS_K_SNAPSHOTS) {
		struct fs_stage *s = fs_stage_find(fs, name);
		if (s) {
			rc = fs_ns_acquire_stage(fs, FS_K_STAGEDIR, s, NULL, out);
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

double fs_listing_timeout(struct fs *fs, const struct fs_node *n)
{
	return 1.0; /* link counts and times follow the tag set */
}

int fs_root_attr(struct fs *fs, struct fs_node *n, struct stat *st)
{
	fs_attr_dir(st, 0555, 6);
	return 0;
}

/* blobs/, memory/, imports/ */
int fs_plaindir_attr(struct fs *fs, struct fs_node *n, struct stat *st)
{
	fs_attr_dir(st, 0555, 2);
	return 0;
}

int fs_snapshots_attr(struct fs *fs, struct fs_node *n, struct stat *st)
{
	struct fs_tags *t = fs_tags_get(fs);

	fs_attr_dir(st, 0755, 2 + t->n);
	fs_tags_put(fs, t);
	return 0;
}

static int list_blob(const st_id *id, uint64_t size, int64_t mtime_ns, void *ctx)
{
	struct fs_dirlist *l = ctx;
	char hex[ST_ID_HEX_LEN + 1];
	struct fs_key k = { .kind = FS_K_BLOB, .id = *id };

	st_id_format(id, hex);
	return fs_dirlist_add(l, hex, &k, S_IFREG);
}

int fs_root_list(struct fs *fs, struct fs_node *dir, struct fs_dirlist **out)
{
	struct fs_dirlist *l;
	struct fs_key k = { 0 };
	int rc;

	if ((rc = fs_dirlist_new(&l)) < 0)
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
	return fs_dirlist_done(l, rc, out);
}

int fs_tagdir_list(struct fs *fs, struct fs_node *dir, struct fs_dirlist **out)
{
	struct fs_dirlist *l;
	int rc;

	if ((rc = fs_dirlist_new(&l)) < 0)
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
	return fs_dirlist_done(l, rc, out);
}

int fs_blobs_list(struct fs *fs, struct fs_node *dir, struct fs_dirlist **out)
{
	struct fs_dirlist *l;
	int rc;

	if ((rc = fs_dirlist_new(&l)) < 0)
		return rc;
	return fs_dirlist_done(l, st_blob_foreach(fs->store, list_blob, l), out);
}

int fs_snapshots_mkdir(struct fs *fs, struct fs_node *dir, const char *name, struct fs_node **out)
{
	struct fs_stage *s;
	int rc = fs_stage_mkdir(fs, name, &s);

	if (rc < 0)
		return rc;
	rc = fs_ns_lookup(fs, dir, name, out);
	fs_stage_unref(fs, s);
	return rc;
}
