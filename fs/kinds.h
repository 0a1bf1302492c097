/* kinds.h: the node kinds of the mount and, per kind, what each operation does (one row each in kinds.c). */
#ifndef STRATA_FS_KINDS_H
#define STRATA_FS_KINDS_H

#include "fs/fs_int.h"

/*
 * How the mount opens a file of a kind (ops.c makes the handle; the set of
 * handle types is fixed, a new kind picks one).
 */
enum fs_open_as {
	FS_OPEN_NONE = 0, /* not a file: open gets -EISDIR */
	FS_OPEN_MANIFEST, /* the snapshot's canonical manifest from the view, page-cached */
	FS_OPEN_MEMORY,   /* guest memory over the snapshot's layers, page-cached */
	FS_OPEN_BLOB,     /* the backing blob (or lazy layer), page-cached and mappable */
	FS_OPEN_STATUS,   /* a text made at open (direct I/O: it changes) */
	FS_OPEN_STAGE,    /* a file of an import: written or read back (direct I/O) */
};

/* Whether the kernel may keep a directory's listing (opendir). */
enum fs_listing_cache {
	FS_LIST_FRESH = 0, /* listed afresh at every opendir */
	FS_LIST_KEEP,      /* immutable: cached and kept */
	FS_LIST_TAGS,      /* follows the tag set: kept while the tags listed are current */
	FS_LIST_UNLESS_RM, /* kept unless an `rm -r` is taking it apart (n->rm) */
};

/* Flags of a kind. */
enum {
	FS_KF_STAGE = 1 << 0,    /* inside an import: n->stage is counted, attributes follow the stage */
	FS_KF_SNAPSHOT = 1 << 1, /* part of a committed snapshot's directory (setattr is a no-op) */
	FS_KF_TAGGED = 1 << 2,   /* names in it follow the tag set: a miss re-reads the tags once */
	FS_KF_NEG_CACHE = 1 << 3,/* names never appear in it: a miss is cached for entry_timeout */
};

/*
 * What the mount does for one kind of node, in the manner of libfuse's
 * struct fuse_lowlevel_ops. Every kind has a row (kinds.c; a static assert
 * holds the table to the enum, tests/fs checks every row). An operation a
 * kind leaves NULL gives the defined result named with it, never a silent
 * -ENOENT. Every operation runs on a FUSE worker thread with the node
 * referenced by the request (the kernel does not forget it meanwhile) and
 * no fs lock held; it returns 0 or a negative errno / st_ / ix_ code
 * (fs_errno maps it once, at the reply).
 */
struct fs_kind_ops {
	/* How log lines name a node of the kind ("snapshots/", "a blob"). Required. */
	const char *name;
	/* Its FUSE and stat inode number if the kind is one fixed, pinned
	 * directory (the top of the tree), else 0: numbered per session and
	 * hashed from the key for stat (fs_ino_stable). */
	uint64_t fixed_ino;
	/* FS_KF_* */
	unsigned flags;
	/* What a write gets where the kind takes none (-EPERM where a name
	 * may appear by other means, -EROFS in a committed snapshot; anything
	 * else is -EROFS); logged with the name. */
	int refuse;
	enum fs_open_as open;
	enum fs_listing_cache listing;

	/* Attributes of n into st (zeroed, inode number, owner, block size and
	 * the mount time already filled). Required.
	 * Valid results: 0, -ENOENT (its snapshot or import is gone), -ENOMEM, -EIO. */
	int (*attr)(struct fs *fs, struct fs_node *n, struct stat *st);
	/* Seconds the kernel may cache n's entry and attributes.
	 * NULL: fs->entry_timeout (immutable content). */
	double (*timeout)(struct fs *fs, const struct fs_node *n);
	/* Resolve name (already checked by fs_name_check) in directory dir; on
	 * success one kernel lookup is counted on *out.
	 * Valid results: 0, -ENOENT, -ENOMEM, -EIO. NULL: -ENOTDIR. */
	int (*lookup)(struct fs *fs, struct fs_node *dir, const char *name, struct fs_node **out);
	/* The entries of directory dir, in readdir order, into *out (the
	 * caller frees it with fs_dirlist_free).
	 * Valid results: 0, -ENOENT, -ENOMEM, -EIO. NULL: -ENOTDIR. */
	int (*list)(struct fs *fs, struct fs_node *dir, struct fs_dirlist **out);
	/* The id n carries in user.strata.id: true and *id set, or false.
	 * NULL: no id (getxattr -ENODATA, an empty listxattr). */
	bool (*id)(struct fs_node *n, st_id *id);
	/* For a directory inside an import: where names in it live (see
	 * fs_ns_stage_place). NULL: not such a directory (false). */
	bool (*place)(const struct fs_node *n, bool *in_layers, struct fs_sfile **dir);
	/* mkdir name in dir; on success *out is the new directory's node, one
	 * lookup counted. Valid results: 0, -EEXIST, -EINVAL, -ENOENT,
	 * -ENOTDIR, -ENOSPC, -ENOMEM, -EIO. NULL: refuse (logged). */
	int (*mkdir)(struct fs *fs, struct fs_node *dir, const char *name, struct fs_node **out);
	/* unlink name in dir. Valid results: 0, -ENOENT, -EISDIR, -ENOTDIR,
	 * -ENOMEM, -EIO. NULL: refuse (logged). */
	int (*unlink)(struct fs *fs, struct fs_node *dir, const char *name);
	/* rmdir name in dir. Valid results: 0, -ENOENT, -ENOTEMPTY, -ENOTDIR,
	 * -ENOMEM, -EIO. NULL: refuse (logged). */
	int (*rmdir)(struct fs *fs, struct fs_node *dir, const char *name);
};

/* One row per enum fs_kind, indexed by kind (row 0 unused). */
extern const struct fs_kind_ops fs_kinds[];

/* The row of a kind. */
static inline const struct fs_kind_ops *fs_kind(enum fs_kind k)
{
	return &fs_kinds[k];
}

/* ---- what the kinds' files share (ns.c) ---- */
/* Acquire the node of an import (s), its layers/ or one of its files (f):
 * counts one lookup and, on a new node, a reference on s. */
int fs_ns_acquire_stage(struct fs *fs, enum fs_kind kind, struct fs_stage *s, struct fs_sfile *f,
			struct fs_node **out);
/* Set all three times of st to ns (clamped at 0). */
void fs_attr_time(struct stat *st, int64_t ns);
/* A directory's mode, link count and size. */
void fs_attr_dir(struct stat *st, mode_t perm, nlink_t nlink);

/* ---- the operations, by room: kinds/top.c (/, snapshots/, blobs/,
 * memory/), kinds/snapshot.c (a committed snapshot and its removal),
 * kinds/import.c (an import and imports/) ---- */
int fs_root_attr(struct fs *fs, struct fs_node *n, struct stat *st);
int fs_root_lookup(struct fs *fs, struct fs_node *dir, const char *name, struct fs_node **out);
int fs_root_list(struct fs *fs, struct fs_node *dir, struct fs_dirlist **out);
int fs_snapshots_attr(struct fs *fs, struct fs_node *n, struct stat *st);
int fs_tagdir_lookup(struct fs *fs, struct fs_node *dir, const char *name, struct fs_node **out);
int fs_tagdir_list(struct fs *fs, struct fs_node *dir, struct fs_dirlist **out);
int fs_snapshots_mkdir(struct fs *fs, struct fs_node *dir, const char *name, struct fs_node **out);
int fs_snapshots_rmdir(struct fs *fs, struct fs_node *dir, const char *name);
double fs_listing_timeout(struct fs *fs, const struct fs_node *n);
int fs_plaindir_attr(struct fs *fs, struct fs_node *n, struct stat *st);
int fs_blobs_lookup(struct fs *fs, struct fs_node *dir, const char *name, struct fs_node **out);
int fs_blobs_list(struct fs *fs, struct fs_node *dir, struct fs_dirlist **out);
int fs_snap_attr(struct fs *fs, struct fs_node *n, struct stat *st);
bool fs_snap_id(struct fs_node *n, st_id *id);
double fs_snapdir_timeout(struct fs *fs, const struct fs_node *n);
int fs_snapdir_lookup(struct fs *fs, struct fs_node *dir, const char *name, struct fs_node **out);
int fs_snapdir_list(struct fs *fs, struct fs_node *dir, struct fs_dirlist **out);
int fs_snapdir_rmdir(struct fs *fs, struct fs_node *dir, const char *name);
int fs_committed_unlink(struct fs *fs, struct fs_node *dir, const char *name);
int fs_layers_lookup(struct fs *fs, struct fs_node *dir, const char *name, struct fs_node **out);
int fs_layers_list(struct fs *fs, struct fs_node *dir, struct fs_dirlist **out);
int fs_blob_attr(struct fs *fs, struct fs_node *n, struct stat *st);
int fs_stage_node_attr(struct fs *fs, struct fs_node *n, struct stat *st);
double fs_no_timeout(struct fs *fs, const struct fs_node *n);
bool fs_stagedir_place(const struct fs_node *n, bool *in_layers, struct fs_sfile **dir);
bool fs_stagedir_id(struct fs_node *n, st_id *id);
bool fs_stagefile_place(const struct fs_node *n, bool *in_layers, struct fs_sfile **dir);
bool fs_stagefile_id(struct fs_node *n, st_id *id);
int fs_stageplace_lookup(struct fs *fs, struct fs_node *dir, const char *name, struct fs_node **out);
int fs_stageplace_list(struct fs *fs, struct fs_node *dir, struct fs_dirlist **out);
int fs_stageplace_mkdir(struct fs *fs, struct fs_node *dir, const char *name, struct fs_node **out);
int fs_stageplace_unlink(struct fs *fs, struct fs_node *dir, const char *name);
int fs_stageplace_rmdir(struct fs *fs, struct fs_node *dir, const char *name);
int fs_imports_lookup(struct fs *fs, struct fs_node *dir, const char *name, struct fs_node **out);
int fs_imports_list(struct fs *fs, struct fs_node *dir, struct fs_dirlist **out);
int fs_imports_unlink(struct fs *fs, struct fs_node *dir, const char *name);
int fs_importfile_attr(struct fs *fs, struct fs_node *n, struct stat *st);

#endif
