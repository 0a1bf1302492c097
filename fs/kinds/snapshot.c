/* kinds/snapshot.c: a committed snapshot: its directory, layers/, manifest.json, its blobs and memory file, and the `rm -r` taking one apart. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/kinds.h"
#include "index/dist/dist.h"
#include "store/array.h"
#include "store/sys.h"

/* How long a removed snapshot's directory keeps answering for the `rm -r`
 * taking it apart, after its last use. */
#define REMOVING_LINGER_NS (2ll * 1000000000ll)

/* The index of layer id in manifest m, or -1 if m does not name it. */
static int layer_index(const struct st_manifest *m, const st_id *id)
{
	for (uint32_t i = 0; i < m->nlayers; i++)
		if (st_id_equal(&m->layers[i].id, id))
			return (int)i;
	return -1;
}

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

/* A snapshot's directory, its layers/, its manifest.json or its memory file. */
int fs_snap_attr(struct fs *fs, struct fs_node *n, struct stat *st)
{
	const struct fs_snap *snap;
	int rc;

	if ((rc = fs_snap_get(fs, &n->id, &snap)) < 0)
		return rc;
	fs_attr_time(st, snap->m->created);
	if (n->kind == FS_K_SNAPDIR) {
		fs_attr_dir(st, 0555, 3);
	} else if (n->kind == FS_K_LAYERS) {
		fs_attr_dir(st, 0555, 2);
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
	fs_attr_time(st, n->mtime_ns);
	st->st_mode = S_IFREG | 0444;
	/* One inode under blobs/ and under every snapshot using it, but a
	 * link count of 1: above 1, tar and cp -a would record the later
	 * paths as hard links, which no import can take (docs/fs.md). */
	st->st_nlink = 1;
	st->st_size = (off_t)n->size;
	st->st_blocks = (blkcnt_t)n->blocks;
	return 0;
}

int fs_snapdir_list(struct fs *fs, struct fs_node *dir, struct fs_dirlist **out)
{
	struct fs_dirlist *l;
	int rc;

	if ((rc = fs_dirlist_new(&l)) < 0)
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
	return fs_dirlist_done(l, rc, out);
}

int fs_layers_list(struct fs *fs, struct fs_node *dir, struct fs_dirlist **out)
{
	const struct fs_snap *snap;
	struct fs_dirlist *l;
	int rc;

	if ((rc = fs_dirlist_new(&l)) < 0)
		return rc;
	if ((rc = fs_snap_get(fs, &dir->id, &snap)) < 0)
		return fs_dirlist_done(l, rc, out);
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
	return fs_dirlist_done(l, rc, out);
}

bool fs_snap_id(struct fs_node *n, st_id *id)
{
	*id = n->id;
	return true;
}

/* The snapshot dir node of a tag (for the `rm -r` bookkeeping); counted. */
static int snapdir_node(struct fs *fs, const st_id *id, const char *tag, struct fs_node **out)
{
	struct fs_key k = { FS_K_SNAPDIR, *id, tag };

	return fs_ns_acquire(fs, &k, out);
}

/* The rm -r ended: the same snapshot imported again under the name shows whole. */
static void rm_clear(struct fs *fs, struct fs_node *snapdir)
{
	/* reset, not freed: lookups read the state without stage_lock */
	pthread_mutex_lock(&fs->stage_lock);
	struct fs_rm *rm = snapdir->rm;
	if (rm) {
		rm->tag_removed = rm->manifest = rm->layers_dir = false;
		memset(rm->layer, 0, (rm->nlayers ? rm->nlayers : 1) * sizeof(bool));
	}
	pthread_mutex_unlock(&fs->stage_lock);
}

static struct fs_rm *rm_state(struct fs *fs, struct fs_node *snapdir)
{
	const struct fs_snap *snap;

	if (snapdir->rm)
		return snapdir->rm;
	if (fs_snap_get(fs, &snapdir->id, &snap) < 0)
		return NULL;
	struct fs_rm *rm = st_sys_calloc(1, sizeof(*rm));
	if (!rm || !(rm->layer = st_sys_calloc(snap->m->nlayers ? snap->m->nlayers : 1, sizeof(bool)))) {
		free(rm);
		return NULL;
	}
	rm->nlayers = snap->m->nlayers;
	snapdir->rm = rm;
	return rm;
}

/* Remember a removed snapshot's dir for the rest of its `rm -r` (stage_lock held). */
static void removing_add(struct fs *fs, const char *name, const st_id *id)
{
	for (size_t i = 0; i < fs->nremoving; i++) {
		if (strcmp(fs->removing[i].name, name) == 0) {
			fs->removing[i].id = *id;
			fs->removing[i].last_ns = fs_now_ns();
			return;
		}
	}
	if (ST_ARRAY_RESERVE(fs->removing, fs->capremoving, fs->nremoving + 1) < 0)
		return; /* then the rmdir ending the rm -r says ENOENT: nothing is lost */
	char *dup = st_sys_strdup(name);
	if (!dup)
		return;
	fs->removing[fs->nremoving++] = (struct fs_removing){ dup, *id, fs_now_ns() };
}

/* Forget a removed snapshot's dir (its rmdir came); true if it was there. */
static bool removing_del(struct fs *fs, const char *name)
{
	bool found = false;

	pthread_mutex_lock(&fs->stage_lock);
	for (size_t i = 0; i < fs->nremoving; i++) {
		if (strcmp(fs->removing[i].name, name) == 0) {
			free(fs->removing[i].name);
			fs->removing[i] = fs->removing[--fs->nremoving];
			found = true;
			break;
		}
	}
	pthread_mutex_unlock(&fs->stage_lock);
	return found;
}

/*
 * Removing a file of a committed snapshot removes the snapshot: a snapshot
 * is whole or not at all, so the first unlink of its manifest.json or a
 * layer removes the tag (the snapshot too when no other tag names it;
 * `strata gc` reclaims its blobs), exactly as `strata rm NAME` would, and
 * the CLI agrees at once. What is left of the directory stays visible to
 * the `rm -r` taking it apart (files it unlinked are hidden) until its
 * rmdir, or 2 s after its last use.
 */
static int remove_tag_of(struct fs *fs, struct fs_node *dn, const char *file)
{
	struct fs_tags *t = fs_tags_get(fs), *old;
	const struct fs_tag *tag = fs_tags_find(t, dn->name);
	bool ours = tag && st_id_equal(&tag->id, &dn->id);
	bool pruned = false;
	int rc = 0;

	fs_tags_put(fs, t);
	if (ours)
		rc = ix_tag_del(fs->ix, dn->name, IX_TAG_PRUNE, &pruned);
	if (rc == IX_ENOTFOUND)
		rc = 0;
	if (rc < 0)
		return rc;
	if (ours) {
		fs_log(fs, FS_LOG_INFO, "rm snapshots/%s/%s: a snapshot is whole or not at all: tag %s removed%s",
		       dn->name, file, dn->name, pruned ? " with its snapshot (gc reclaims its blobs)" : "");
		if (fs_view_refresh(fs, true, &old) >= 0)
			fs_tags_put(fs, old);
	}
	pthread_mutex_lock(&fs->stage_lock);
	removing_add(fs, dn->name, &dn->id);
	pthread_mutex_unlock(&fs->stage_lock);
	return 0;
}
int fs_committed_unlink(struct fs *fs, struct fs_node *dir, const char *name)
{
	const struct fs_snap *snap;
	struct fs_node *dn = dir;
	st_id id;
	int rc = 0;

	if (dir->kind == FS_K_LAYERS && (rc = snapdir_node(fs, &dir->id, dir->name, &dn)) < 0)
		return rc;
	pthread_mutex_lock(&fs->stage_lock); /* serialises rm bookkeeping */
	struct fs_rm *rm = rm_state(fs, dn);
	if (!rm) {
		rc = -ENOMEM;
	} else if (dir->kind == FS_K_SNAPDIR) {
		if (strcmp(name, "manifest.json") == 0 && !rm->manifest)
			rm->manifest = true;
		else
			rc = strcmp(name, "layers") == 0 ? -EISDIR : -ENOENT;
	} else if (st_id_parse(name, &id) < 0 || fs_snap_get(fs, &dir->id, &snap) < 0) {
		rc = -ENOENT;
	} else {
		rc = -ENOENT;
		for (uint32_t i = 0; i < snap->m->nlayers; i++) {
			if (st_id_equal(&snap->m->layers[i].id, &id) && !rm->layer[i]) {
				rm->layer[i] = true;
				rc = 0;
			}
		}
	}
	bool first = rc == 0 && rm && !rm->tag_removed;
	if (first)
		rm->tag_removed = true;
	pthread_mutex_unlock(&fs->stage_lock);
	if (first && (rc = remove_tag_of(fs, dn, name)) < 0) {
		pthread_mutex_lock(&fs->stage_lock);
		rm->tag_removed = false;
		pthread_mutex_unlock(&fs->stage_lock);
	}
	if (rc >= 0 && !first) {
		st_id rid;
		fs_ns_removing_find(fs, dn->name, &rid, true); /* renews it for the rest of the rm -r */
	}
	if (dn != dir)
		fs_itable_forget(fs->itable, dn->ino, 1);
	return rc;
}

/* The rmdir ending an `rm -r` of snapshot id under tag: 0 (and the
 * bookkeeping reset) if it took everything out, else -ENOTEMPTY. */
static int rm_finished(struct fs *fs, const st_id *id, const char *tag)
{
	struct fs_node *dn;
	int rc;

	if ((rc = snapdir_node(fs, id, tag, &dn)) < 0)
		return rc;
	pthread_mutex_lock(&fs->stage_lock);
	bool empty = dn->rm && dn->rm->manifest && dn->rm->layers_dir;
	pthread_mutex_unlock(&fs->stage_lock);
	if (empty)
		rm_clear(fs, dn);
	fs_itable_forget(fs->itable, dn->ino, 1);
	return empty ? 0 : -ENOTEMPTY;
}

/* The end of an `rm -r` whose first unlink removed the tag of snapshots/NAME. */
static int rmdir_removed(struct fs *fs, const char *name)
{
	st_id rid;
	int rc;

	if (!fs_ns_removing_find(fs, name, &rid, true))
		return -ENOENT;
	if ((rc = rm_finished(fs, &rid, name)) < 0)
		return rc;
	removing_del(fs, name);
	return 0;
}

int fs_snapshots_rmdir(struct fs *fs, struct fs_node *dir, const char *name)
{
	int rc;

	struct fs_stage *s = fs_stage_find(fs, name);
	if (s) {
		rc = fs_stage_rmdir(fs, s);
		fs_stage_unref(fs, s);
		return rc;
	}
	struct fs_tags *t = fs_tags_get(fs);
	const struct fs_tag *tag = fs_tags_find(t, name);
	if (!tag) {
		fs_tags_put(fs, t);
		return rmdir_removed(fs, name);
	}
	rc = rm_finished(fs, &tag->id, tag->name);
	fs_tags_put(fs, t);
	if (rc < 0)
		return rc;
	bool pruned = false;
	rc = ix_tag_del(fs->ix, name, IX_TAG_PRUNE, &pruned);
	if (rc >= 0) {
		struct fs_tags *old;
		fs_log(fs, FS_LOG_INFO, "rm snapshots/%s: tag removed%s", name,
		       pruned ? " with its snapshot (gc reclaims its blobs)" : "");
		if (fs_view_refresh(fs, true, &old) >= 0)
			fs_tags_put(fs, old);
	}
	return rc;
}

int fs_snapdir_rmdir(struct fs *fs, struct fs_node *dir, const char *name)
{
	int rc = 0;

	if (strcmp(name, "layers") != 0)
		return -ENOENT;
	pthread_mutex_lock(&fs->stage_lock);
	struct fs_rm *rm = rm_state(fs, dir);
	if (!rm) {
		rc = -ENOMEM;
	} else if (rm->layers_dir) {
		rc = -ENOENT;
	} else {
		for (size_t i = 0; i < rm->nlayers && rc == 0; i++)
			if (!rm->layer[i])
				rc = -ENOTEMPTY;
		if (rc == 0)
			rm->layers_dir = true;
	}
	pthread_mutex_unlock(&fs->stage_lock);
	return rc;
}
