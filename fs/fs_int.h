/* fs_int.h: declarations shared inside fs/: nodes, the namespace model, imports, memory view. */
#ifndef STRATA_FS_FS_INT_H
#define STRATA_FS_FS_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "fs/fs.h"
#include "index/index.h"
#include "store/store.h"

/* Fixed node ids of the top of the tree (FUSE_ROOT_ID is 1). */
enum { FS_INO_ROOT = 1, FS_INO_SNAPSHOTS = 2, FS_INO_BLOBS = 3, FS_INO_MEMORY = 4, FS_INO_IMPORTS = 5,
       FS_INO_FIRST_DYNAMIC = 16 };

/* Longest file name the mount accepts (NAME_MAX). */
#define FS_NAME_MAX 255
/* Largest read/write request negotiated with the kernel (docs/fs.md). */
#define FS_MAX_REQUEST (1u << 20)
/* Largest manifest.json a copy may write (the store's own limit). */
#define FS_MANIFEST_MAX ST_MANIFEST_MAX_BYTES

enum fs_kind {
	FS_K_ROOT = 1,
	FS_K_SNAPSHOTS,   /* snapshots/ */
	FS_K_BLOBS,       /* blobs/ */
	FS_K_MEMORY,      /* memory/ */
	FS_K_SNAPDIR,     /* snapshots/NAME (key: snapshot id + tag) */
	FS_K_LAYERS,      /* snapshots/NAME/layers (key: snapshot id + tag) */
	FS_K_MANIFEST,    /* manifest.json (key: snapshot id) */
	FS_K_BLOB,        /* a blob file, wherever it appears (key: blob id) */
	FS_K_MEMFILE,     /* memory/NAME (key: snapshot id) */
	FS_K_STAGEDIR,    /* snapshots/NAME while a copy imports it (key: stage serial) */
	FS_K_STAGELAYERS, /* its layers/ (key: stage serial) */
	FS_K_STAGEFILE,   /* a file (or an ignored extra dir) being copied in (key: file serial) */
	FS_K_IMPORTS,     /* imports/: one status file per unfinished import */
	FS_K_IMPORTFILE,  /* imports/NAME (key: stage serial) */
	FS_K_COUNT        /* not a kind: one more than the last (the size of fs_kinds, kinds.h) */
};

/* What identifies a node: kind, a 16-byte id and, for tagged dirs, the tag. */
struct fs_key {
	enum fs_kind kind;
	st_id id;
	const char *name; /* NULL unless SNAPDIR/LAYERS */
};

struct fs_stage;
struct fs_sfile;
struct fs_rm;

/*
 * A node the kernel holds. Every FUSE worker thread may use one at once;
 * the fields say what protects them. "Fixed" fields are written once, in
 * fs_itable_acquire under the table's lock before the node is published,
 * and read without a lock after; the node lives until its last forget.
 */
struct fs_node {
	uint64_t ino;      /* fixed: FUSE node id, unique for the session, never reused */
	uint64_t st_ino;   /* fixed: the inode number stat shows, stable across mounts */
	enum fs_kind kind; /* fixed */
	st_id id;          /* fixed */
	char *name;        /* fixed: tag for SNAPDIR/LAYERS, else NULL */
	uint64_t nlookup;  /* protected by the itable's lock: kernel references
	                    * (lookup/readdirplus/create minus forget) */
	bool pinned;       /* fixed: the fixed top dirs, never freed */
	struct fs_stage *stage; /* fixed (set by the init under the table lock): STAGE*, IMPORTFILE: a
	                         * counted reference, dropped when the node is freed */
	struct fs_sfile *sfile; /* fixed: STAGEFILE: owned by stage (its fields under stage's lock) */
	/* SNAPDIR: entries `rm -r` has unlinked so far. Set and changed under
	 * fs->stage_lock (never freed before the node: rm_clear resets it);
	 * lookups, listings and opendir read its flags without a lock, as hints
	 * the kernel re-asks for. */
	struct fs_rm *rm;
	/* BLOB: the backing blob's stat, filled by the first getattr that
	 * finds it (attr_known after). Not locked: concurrent getattrs store
	 * the same values of one immutable blob (a lazy layer, never known,
	 * is re-read each time and its block count follows its fetches). */
	bool attr_known;
	uint64_t size, blocks;
	int64_t mtime_ns;
	struct fs_node *next_ino, *next_key; /* protected by the itable's lock: hash chains */
};

/* ---- inode.c: the node table (pure logic, unit tested) ---- */
struct fs_itable;
/* release (may be NULL) is called on each node before it is freed (to drop
 * what it references, e.g. its stage). */
int fs_itable_new(void (*release)(struct fs_node *n, void *ctx), void *ctx, struct fs_itable **out);
void fs_itable_free(struct fs_itable *t);
/* The node with FUSE id ino, or NULL. The kernel never forgets a node while
 * a request on it is in flight, so the pointer is valid for that request. */
struct fs_node *fs_itable_get(struct fs_itable *t, uint64_t ino);
/* Find or create the node for key and count one kernel lookup on it.
 * -ENOMEM. init (may be NULL) is called on a new node under the table lock. */
int fs_itable_acquire(struct fs_itable *t, const struct fs_key *key,
		      void (*init)(struct fs_node *n, void *ctx), void *ctx, struct fs_node **out);
/* Drop n kernel lookups; frees the node at zero unless pinned. */
void fs_itable_forget(struct fs_itable *t, uint64_t ino, uint64_t n);
/* Number of live nodes (for tests and the log). */
size_t fs_itable_count(struct fs_itable *t);
/* Stable inode number for a key: fixed for the top dirs, else a hash of
 * kind, id and name, never below FS_INO_FIRST_DYNAMIC. */
uint64_t fs_ino_stable(const struct fs_key *key);
/* The key of an import's node (a stage, its layers/ or a staged file): kind and serial. */
void fs_key_serial(struct fs_key *k, enum fs_kind kind, uint64_t serial);

/* ---- path.c: name rules (pure logic, unit tested) ---- */
/* 0 if name can be a directory entry at all: non-empty, no '/', not "." or
 * "..", at most FS_NAME_MAX bytes (-ENAMETOOLONG), else -EINVAL. */
int fs_name_check(const char *name);
/* True for the temporary names copy tools use before a rename
 * (rsync ".NAME.XXXXXX", anything starting with '.'). */
bool fs_name_is_temp(const char *name);
/* What a file name inside an import may be. */
enum fs_stage_slot {
	FS_SLOT_BAD = 0,
	FS_SLOT_MANIFEST, /* DIR/manifest.json */
	FS_SLOT_LAYER,    /* DIR/layers/<32-hex id> */
	FS_SLOT_TEMP,     /* a temp name, to be renamed */
};
enum fs_stage_slot fs_stage_slot(bool in_layers, const char *name);

/* ---- memview.c: the flat memory file over a manifest (pure logic) ---- */
/* Where byte off of guest memory lives: *len bytes from off (>0) are either
 * a hole (*layer = UINT32_MAX) or contiguous in layer *layer at *loff.
 * -ENXIO if off >= mem_size. */
int fs_mem_extent(const struct st_manifest *m, uint64_t off, uint64_t *len, uint32_t *layer, uint64_t *loff);
/* lseek SEEK_DATA (data=true) / SEEK_HOLE over guest memory. -ENXIO past the end. */
int fs_mem_seek(const struct st_manifest *m, uint64_t off, bool data, uint64_t *out);
/* Pages backed by a layer (for st_blocks). */
uint64_t fs_mem_data_pages(const struct st_manifest *m);

/* ---- view.c: cached tags and manifests, refreshed by generation ---- */
/* A parsed manifest: immutable once in fs->snaps (next: under view_lock). */
struct fs_snap {
	st_id id;
	char *raw;      /* canonical manifest + "\n" */
	size_t rawlen;
	struct st_manifest *m;
	uint64_t data_pages;
	struct fs_snap *next;
};
struct fs_tag {
	char *name;
	st_id id;
};
/* A tag set: immutable once published in fs->tags but for refs. */
struct fs_tags {
	unsigned refs;  /* protected by fs->view_lock (fs_tags_get/put) */
	uint64_t gen;
	size_t n;
	struct fs_tag *v; /* sorted by name */
};

/*
 * The daemon's state, shared by every FUSE worker and the poller thread.
 * The fields up to view_lock are fixed before the session starts (read
 * without a lock); the others say what protects them.
 */
struct fs {
	const struct fs_config *cfg;
	struct st_store *store;  /* used by every thread at once, as store.h allows */
	struct ix *ix;           /* used by every thread at once, as index.h allows */
	struct ix_lazy *lazy;  /* chunks of lazy layers, fetched on read (as index/dist/dist.h allows) */
	struct fs_itable *itable; /* its own lock (inode.c) */
	enum fs_read_mode read_mode;
	int64_t start_ns;     /* mount time: times of the fixed dirs */
	double entry_timeout; /* immutable content */
	/* view */
	pthread_mutex_t view_lock;
	struct fs_tags *tags;   /* protected by view_lock (swapped whole; readers take a counted reference) */
	struct fs_snap **snaps; /* protected by view_lock: hash table of parsed manifests (immutable) */
	size_t nsnapbuckets;    /* fixed */
	uint64_t listed_gen[2]; /* protected by view_lock: tags generation last listed in snapshots/, memory/ */
	size_t listed_n[2];     /* protected by view_lock */
	/* Every tag the kernel was given a positive entry for under snapshots/
	 * or memory/ (it may cache it for a day), with the snapshot it named;
	 * checked against the index whenever its generation moves (view_lock). */
	struct fs_tag *handed;     /* protected by view_lock */
	size_t nhanded, caphanded; /* protected by view_lock */
	/* imports; lock order: stage_lock, then a stage's own lock, then view_lock */
	pthread_mutex_t stage_lock;
	struct fs_stage *stages; /* protected by stage_lock: the imports not dead */
	uint64_t next_serial;    /* atomic (no lock): serials of imports and their files */
	/* The stage budget (docs/fs.md, "Memory"): bytes imports hold in the
	 * daemon's memory, charged before each allocation (atomic, no lock),
	 * and the most they may hold (cfg->stage_memory, else the default). */
	uint64_t stage_mem;      /* atomic (no lock) */
	uint64_t stage_mem_max;  /* fixed */
	/* Snapshots whose tag a file unlink removed and whose directory an
	 * `rm -r` is still taking apart (stage_lock): name -> id, last use. */
	struct fs_removing *removing; /* protected by stage_lock */
	size_t nremoving, capremoving; /* protected by stage_lock */
	void *session; /* fixed: struct fuse_session *, for invalidation (ops.c/session.c only) */
	/* Every file handle the kernel holds (opened, not yet released), so
	 * that the ones a session ends with (a lazy unmount, a killed reader:
	 * the kernel sends no release then) are freed too (open_lock). */
	pthread_mutex_t open_lock;
	struct fs_fh *open; /* protected by open_lock */
};

void fs_log(struct fs *fs, int prio, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int64_t fs_now_ns(void);

/* ---- session.c: what fs_serve and the private server (private.c) share ---- */
/* Fill fs for serving store and ix (the caller's, which outlive fs) under
 * cfg (outlives fs): the lazy handle, the node table, the view. -ENOMEM,
 * ix_lazy_open's and the index's read errors; nothing kept then. */
int fs_core_open(struct fs *fs, const struct fs_config *cfg, struct st_store *store, struct ix *ix);
/* Undo fs_core_open once no request is served any more (imports dropped). */
void fs_core_close(struct fs *fs);
/* Free the file handles still open when the session ended (ops.c). */
void fs_ops_release_open(struct fs *fs);

int fs_view_init(struct fs *fs);
void fs_view_fini(struct fs *fs);
/* Re-read the tags if the generation moved. *old gets the previous tag set
 * (counted reference, release with fs_tags_put) when they changed, else NULL. */
int fs_view_refresh(struct fs *fs, bool force, struct fs_tags **old);
/* Counted reference to the current tags. */
struct fs_tags *fs_tags_get(struct fs *fs);
void fs_tags_put(struct fs *fs, struct fs_tags *t);
/* Binary search; NULL if absent. */
const struct fs_tag *fs_tags_find(const struct fs_tags *t, const char *name);
/* Remember that the kernel got an entry for tag name -> id (it may cache it). */
void fs_view_handed(struct fs *fs, const char *name, const st_id *id);
/* The names handed out whose tag is gone or names another snapshot in the
 * current view; they are forgotten here and returned (malloc'd array of
 * malloc'd names, *n of them) for the caller to invalidate. */
int fs_view_take_stale(struct fs *fs, char ***names, size_t *n);
/* The parsed manifest of a snapshot (cached forever: immutable). -ENOENT. */
int fs_snap_get(struct fs *fs, const st_id *id, const struct fs_snap **out);

/* ---- ns.c: the namespace: lookup, attributes, listings ---- */
/* Entry/attr cache lifetime for a node (seconds). */
double fs_node_timeout(struct fs *fs, const struct fs_node *n);
/* Resolve name in dir; on success one kernel lookup is counted on *out. */
int fs_ns_lookup(struct fs *fs, struct fs_node *dir, const char *name, struct fs_node **out);
/* Acquire a node for a key (counts one lookup). */
int fs_ns_acquire(struct fs *fs, const struct fs_key *key, struct fs_node **out);
int fs_ns_attr(struct fs *fs, struct fs_node *n, struct stat *st);
/* For a directory node inside an import: where names in it live. False if
 * n is not one. */
bool fs_ns_stage_place(const struct fs_node *n, bool *in_layers, struct fs_sfile **dir);
struct fs_dirent {
	char *name;
	struct fs_key key;   /* name inside points into this entry's storage */
	uint64_t st_ino;
	mode_t type;         /* S_IFDIR / S_IFREG */
	char *keyname;
};
/* A listing (dirlist.c): entries in readdir order. */
struct fs_dirlist {
	size_t n, cap;
	struct fs_dirent *v;
};
/* Append a copy of name and key (its stable inode number computed). -ENOMEM. */
int fs_dirlist_add(struct fs_dirlist *l, const char *name, const struct fs_key *key, mode_t type);
/* Free l and its entries; accepts NULL. */
void fs_dirlist_free(struct fs_dirlist *l);
/* An empty listing into *out. -ENOMEM. */
int fs_dirlist_new(struct fs_dirlist **out);
/* The end of filling l: on rc >= 0 it is handed out in *out (0), else freed (rc). */
int fs_dirlist_done(struct fs_dirlist *l, int rc, struct fs_dirlist **out);
int fs_ns_list(struct fs *fs, struct fs_node *dir, struct fs_dirlist **out);
/* xattrs: value of name for n into buf (size 0: just the length). */
int fs_ns_getxattr(struct fs *fs, struct fs_node *n, const char *name, char *buf, size_t size);
int fs_ns_listxattr(struct fs *fs, struct fs_node *n, char *buf, size_t size);

/* ---- stage.c: importing snapshots copied in by file tools ---- */
struct fs_removing {
	char *name;
	st_id id;
	int64_t last_ns;
};
/* The snapshot dir name whose tag an unlink removed (still answering for
 * `rm -r` for 2 s after its last unlink or rmdir: renew); false if none.
 * Takes stage_lock. (ns.c) */
bool fs_ns_removing_find(struct fs *fs, const char *name, st_id *id, bool renew);
/* What an `rm -r` took from a committed snapshot's directory: written
 * under fs->stage_lock (read as hints without it, see struct fs_node). */
struct fs_rm {
	bool tag_removed;   /* the first unlink removed the tag */
	bool manifest;      /* manifest.json unlinked */
	bool layers_dir;    /* layers/ removed */
	size_t nlayers;
	bool *layer;        /* per manifest layer: unlinked */
};
int fs_stage_mkdir(struct fs *fs, const char *name, struct fs_stage **out);
/* The import answering for snapshots/NAME (open or just committed),
 * referenced; NULL if none. An unfinished import that was set aside
 * (stale: nothing open, idle, incomplete) no longer answers, so a new
 * copy can take the name. */
struct fs_stage *fs_stage_find(struct fs *fs, const char *name);
/* Any unfinished import by name, stale ones included (imports/NAME). */
struct fs_stage *fs_stage_find_any(struct fs *fs, const char *name);
struct fs_stage *fs_stage_ref(struct fs_stage *s);
void fs_stage_unref(struct fs *fs, struct fs_stage *s);
uint64_t fs_stage_serial(const struct fs_stage *s);
bool fs_stage_has_layers(const struct fs_stage *s);
bool fs_stage_alive(const struct fs_stage *s);
int fs_stage_mkdir_layers(struct fs *fs, struct fs_stage *s);
/*
 * A place inside an import: its directory (in_layers false, dir NULL), its
 * layers/ (in_layers true, dir NULL), or an extra directory the copy
 * brought along (dir: that directory's file; everything in it is ignored).
 */
struct fs_sfile *fs_stage_file_find(struct fs_stage *s, bool in_layers, struct fs_sfile *dir, const char *name);
uint64_t fs_sfile_serial(const struct fs_sfile *f);
bool fs_sfile_is_dir(const struct fs_sfile *f);
bool fs_sfile_in_layers(const struct fs_sfile *f);
/* Create (or truncate an existing) file. Names that are not part of the
 * snapshot format are accepted as extras and ignored; -EINVAL for a layer
 * id the manifest does not name; -EEXIST with excl. */
int fs_stage_create(struct fs *fs, struct fs_stage *s, bool in_layers, struct fs_sfile *dir, const char *name,
		    bool excl, struct fs_sfile **out);
/* mkdir of anything but layers/ in an import: an extra directory, ignored. */
int fs_stage_mkdir_extra(struct fs *fs, struct fs_stage *s, bool in_layers, struct fs_sfile *dir, const char *name,
			 struct fs_sfile **out);
/* An open handle on f begins (counted until fs_stage_release). */
int fs_stage_open_write(struct fs *fs, struct fs_stage *s, struct fs_sfile *f, bool trunc);
/* -ENOENT if f or its import was removed. */
int fs_stage_open_read(struct fs_stage *s, struct fs_sfile *f);
int fs_stage_write(struct fs *fs, struct fs_stage *s, struct fs_sfile *f, uint64_t off, const void *buf, size_t len);
int fs_stage_truncate(struct fs *fs, struct fs_stage *s, struct fs_sfile *f, uint64_t size);
/* A close(): finish the file if its bytes are now what its name promises
 * (a layer hashing to its id, a manifest that parses) and commit the
 * snapshot when complete. Too few bytes are not an error (more may come
 * through another descriptor or a later append); bytes that can never
 * become valid are, and that is what close() returns to the copy tool. */
int fs_stage_flush(struct fs *fs, struct fs_stage *s, struct fs_sfile *f);
/* The last reference to an open handle is gone (FUSE release). */
void fs_stage_release(struct fs *fs, struct fs_stage *s, struct fs_sfile *f, bool writing);
int fs_stage_rename(struct fs *fs, struct fs_stage *s, bool from_layers, struct fs_sfile *from_dir, const char *from,
		    bool to_layers, struct fs_sfile *to_dir, const char *to);
int fs_stage_unlink(struct fs *fs, struct fs_stage *s, bool in_layers, struct fs_sfile *dir, const char *name);
int fs_stage_rmdir_extra(struct fs *fs, struct fs_stage *s, bool in_layers, struct fs_sfile *dir, const char *name);
int fs_stage_rmdir_layers(struct fs *fs, struct fs_stage *s);
int fs_stage_rmdir(struct fs *fs, struct fs_stage *s);
int fs_stage_rename_dir(struct fs *fs, struct fs_stage *s, const char *to);
/* Attributes of a staged file / dir. */
void fs_stage_attr(struct fs_stage *s, struct fs_sfile *f, bool layers_dir, struct stat *st);
/* Names in the stage dir, its layers/ or an extra dir (for readdir). */
int fs_stage_list(struct fs_stage *s, bool in_layers, struct fs_sfile *dir, struct fs_dirlist **out);
/* Every unfinished import (imports/). */
int fs_stage_list_imports(struct fs *fs, struct fs_dirlist **out);
/* What an import has and lacks, as text (imports/NAME): malloc'd, *len bytes. */
int fs_stage_status(struct fs *fs, struct fs_stage *s, char **out, size_t *len);
/* Drop an unfinished import at once (rm imports/NAME). */
void fs_stage_drop(struct fs *fs, struct fs_stage *s);
/* A staged file that is complete: its blob id (layers) for reads. */
int fs_sfile_blob(struct fs_stage *s, struct fs_sfile *f, st_id *id, const char **buf, size_t *len);
/* Bytes [off, off + size) of a staged file held in memory (not a layer),
 * copied under the stage's lock into *out (malloc'd, *len bytes, possibly
 * 0): another opener's write may move the buffer and a release free it, so
 * a reader never keeps a pointer into it. -ENOENT/-EBUSY as fs_sfile_blob,
 * -EAGAIN if the file is a layer. */
int fs_sfile_copy(struct fs_stage *s, struct fs_sfile *f, uint64_t off, size_t size, char **out, size_t *len);
/* The snapshot an import committed (user.strata.id of its directory while
 * it lingers); false while unfinished. */
bool fs_stage_committed_id(struct fs_stage *s, st_id *id);
/* setxattr inside an import: strata's own names are accepted (a copy made
 * with rsync -X or cp -a carries them), others -ENOTSUP. */
int fs_stage_setxattr(struct fs *fs, struct fs_stage *s, const char *name);
/* Map an st_/ix_ code to the errno a file tool should see. */
int fs_errno(int rc);
/* Drop imports idle longer than the timeout; returns how many. */
unsigned fs_stage_sweep(struct fs *fs, bool all);

#endif
