/* ops.c: the FUSE low-level operations: each request mapped onto the namespace and imports, one reply each. */
#define FUSE_USE_VERSION 35
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "fs/kinds.h"
#include "index/dist/dist.h"
#include "fs/ops.h"
#include "store/mountabi.h"
#include "store/sys.h"

enum fh_kind { FH_BUF, FH_BLOB, FH_MEM, FH_STAGE };

/*
 * An open file. Several FUSE workers may read through one handle at once:
 * every field is fixed when open makes it, except those under lock (the
 * lazily opened parts) and the list links (fs->open_lock).
 */
struct fs_fh {
	enum fh_kind kind;
	int fd;                    /* FH_BLOB: the backing blob (O_DIRECT in FS_READ_DIRECT) */
	int fd_buffered;           /* FH_BLOB: a plain fd for reads O_DIRECT cannot do (-1 until needed; lock) */
	char *map;                 /* FH_BLOB, FS_READ_DIRECT: the backing blob mapped, MADV_RANDOM */
	bool lazy;                 /* FH_BLOB: fd is a lazy layer's partial file; fetch before reading */
	st_id id;                  /* FH_BLOB: the blob */
	size_t maplen;
	const struct fs_snap *snap;/* FH_BUF (manifest.json), FH_MEM */
	pthread_mutex_t lock;      /* FH_MEM's layers, FH_BLOB's fd_buffered: opened on first need */
	struct fs_fh **layers;     /* FH_MEM: one FH_BLOB handle per layer, NULL until read (lock) */
	struct fs_stage *stage;    /* FH_STAGE: counted reference */
	struct fs_sfile *sfile;
	bool writing;
	char *text;                /* FH_BUF without snap: imports/NAME's status */
	size_t textlen;
	struct fs_fh *next, **pprev; /* in fs->open while the kernel holds it (open_lock) */
};

static struct fs *req_fs(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static struct fs_node *node_of(struct fs *fs, fuse_ino_t ino)
{
	return fs_itable_get(fs->itable, ino);
}

/* Every error leaves here as a positive errno, exactly once. */
static void reply_err(fuse_req_t req, int rc)
{
	rc = fs_errno(rc);
	fuse_reply_err(req, rc < 0 ? -rc : (rc == 0 ? 0 : EIO));
}

static int fill_entry(struct fs *fs, struct fs_node *n, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	int rc = fs_ns_attr(fs, n, &e->attr);
	if (rc < 0)
		return rc;
	e->ino = n->ino;
	e->generation = 1;
	e->attr_timeout = e->entry_timeout = fs_node_timeout(fs, n);
	return 0;
}

/* Answer with an entry for n, which carries one counted lookup; on failure
 * that lookup is given back. */
static void reply_node(fuse_req_t req, struct fs *fs, struct fs_node *n)
{
	struct fuse_entry_param e;
	int rc = fill_entry(fs, n, &e);

	if (rc < 0) {
		fs_itable_forget(fs->itable, n->ino, 1);
		reply_err(req, rc);
		return;
	}
	if (fuse_reply_entry(req, &e) != 0)
		fs_itable_forget(fs->itable, n->ino, 1);
}

/* Listing snapshots/ or missing a name there: catch up with the index now
 * (one read of the generation) instead of waiting for the poller, so a tag
 * the CLI just made or removed shows at once. True if the tags changed. */
static bool sync_tags(struct fs *fs)
{
	struct fs_tags *old = NULL;
	int rc = fs_view_refresh(fs, false, &old);

	fs_tags_put(fs, old);
	return rc > 0;
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	if (conn->capable & FUSE_CAP_SPLICE_WRITE)
		conn->want |= FUSE_CAP_SPLICE_WRITE;
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	/* Writes must reach us in order and before flush: no writeback cache. */
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	/* 1 MiB requests (256 pages): a quarter of the round trips of the
	 * 128 KiB default for cp into the mount and for reads (docs/fs.md). */
	conn->max_write = FS_MAX_REQUEST;
	conn->max_readahead = FS_MAX_REQUEST;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = req_fs(req);
	struct fs_node *dir = node_of(fs, parent), *n;
	int rc;

	if (!dir) {
		reply_err(req, -ESTALE);
		return;
	}
	rc = fs_ns_lookup(fs, dir, name, &n);
	if (rc == -ENOENT && (fs_kind(dir->kind)->flags & FS_KF_TAGGED) && sync_tags(fs))
		rc = fs_ns_lookup(fs, dir, name, &n);
	if (rc == -ENOENT) {
		/* a negative entry: cached briefly only where names never appear */
		struct fuse_entry_param e = { 0 };
		e.entry_timeout = (fs_kind(dir->kind)->flags & FS_KF_NEG_CACHE) ? fs->entry_timeout : 0;
		fuse_reply_entry(req, &e);
		return;
	}
	if (rc < 0) {
		reply_err(req, rc);
		return;
	}
	reply_node(req, fs, n);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	fs_itable_forget(req_fs(req)->itable, ino, nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	struct fs *fs = req_fs(req);

	for (size_t i = 0; i < count; i++)
		fs_itable_forget(fs->itable, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	struct fs_node *n = node_of(fs, ino);
	struct stat st;
	int rc;

	if (!n) {
		reply_err(req, -ESTALE);
		return;
	}
	if ((rc = fs_ns_attr(fs, n, &st)) < 0)
		reply_err(req, rc);
	else
		fuse_reply_attr(req, &st, fs_node_timeout(fs, n));
}

static bool is_stage(const struct fs_node *n)
{
	return fs_kind(n->kind)->flags & FS_KF_STAGE;
}

/* A node of a committed snapshot's directory (a layer is a blob node). */
static bool in_snapshot(const struct fs_node *n)
{
	return fs_kind(n->kind)->flags & FS_KF_SNAPSHOT;
}

/* What a write gets where nothing may be written, with the log line saying so. */
static int refuse(struct fs *fs, const struct fs_node *n, const char *op, const char *name)
{
	const struct fs_kind_ops *k = fs_kind(n->kind);
	int rc = k->refuse == -EPERM ? -EPERM : -EROFS;

	fs_log(fs, FS_LOG_WARNING, "%s%s%s in %s: refused (%s): snapshots are immutable; "
	       "import by copying a snapshot directory into snapshots/", op, name ? " " : "",
	       name ? name : "", k->name ? k->name : "a node", rc == -EPERM ? "EPERM" : "EROFS");
	return rc;
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	struct fs_node *n = node_of(fs, ino);
	struct stat st;
	int rc = 0;

	if (!n) {
		reply_err(req, -ESTALE);
		return;
	}
	if (!is_stage(n) && (!in_snapshot(n) || (to_set & FUSE_SET_ATTR_SIZE))) {
		reply_err(req, refuse(fs, n, to_set & FUSE_SET_ATTR_SIZE ? "truncate" : "setattr", NULL));
		return;
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		if (n->kind != FS_K_STAGEFILE || fs_sfile_is_dir(n->sfile))
			rc = -EISDIR;
		else
			rc = fs_stage_truncate(fs, n->stage, n->sfile, (uint64_t)attr->st_size);
	}
	/* Mode, owner and times are accepted and not kept, in an import and
	 * on a committed snapshot alike: a snapshot's files are 0444 and dated
	 * by the manifest, so copying the same snapshot onto it again (rsync
	 * -a, cp -a) ends with a successful no-op. */
	if (rc >= 0)
		rc = fs_ns_attr(fs, n, &st);
	if (rc < 0)
		reply_err(req, rc);
	else
		fuse_reply_attr(req, &st, 0);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct fs *fs = req_fs(req);
	struct fs_node *dir = node_of(fs, parent), *n;
	int rc;

	if (!dir) {
		reply_err(req, -ESTALE);
		return;
	}
	if ((rc = fs_name_check(name)) < 0) {
		fs_log(fs, FS_LOG_WARNING, "mkdir: refused name (%s)", rc == -ENAMETOOLONG ? "longer than 255 bytes" : "invalid");
		reply_err(req, rc);
		return;
	}
	const struct fs_kind_ops *k = fs_kind(dir->kind);
	if (!k->mkdir)
		rc = refuse(fs, dir, "mkdir", name);
	else if ((rc = k->mkdir(fs, dir, name, &n)) >= 0) {
		reply_node(req, fs, n);
		return;
	}
	reply_err(req, rc);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = req_fs(req);
	struct fs_node *dir = node_of(fs, parent);
	int rc;

	if (!dir) {
		reply_err(req, -ESTALE);
		return;
	}
	const struct fs_kind_ops *k = fs_kind(dir->kind);
	rc = k->unlink ? k->unlink(fs, dir, name) : refuse(fs, dir, "unlink", name);
	reply_err(req, rc);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = req_fs(req);
	struct fs_node *dir = node_of(fs, parent);

	if (!dir) {
		reply_err(req, -ESTALE);
		return;
	}
	const struct fs_kind_ops *k = fs_kind(dir->kind);
	reply_err(req, k->rmdir ? k->rmdir(fs, dir, name) : refuse(fs, dir, "rmdir", name));
}

static bool tag_exists(struct fs *fs, const char *name)
{
	struct fs_tags *t = fs_tags_get(fs);
	bool found = fs_tags_find(t, name) != NULL;

	fs_tags_put(fs, t);
	return found;
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	struct fs *fs = req_fs(req);
	struct fs_node *from = node_of(fs, parent), *to = node_of(fs, newparent);
	struct fs_sfile *fd, *td;
	bool fl, tl;
	int rc;

	if (!from || !to) {
		reply_err(req, -ESTALE);
		return;
	}
	if (flags & RENAME_EXCHANGE) {
		reply_err(req, -EINVAL);
		return;
	}
	if ((rc = fs_name_check(newname)) < 0) {
		reply_err(req, rc);
		return;
	}
	if (from->kind == FS_K_SNAPSHOTS && to->kind == FS_K_SNAPSHOTS) {
		struct fs_stage *s = fs_stage_find(fs, name);
		st_id committed;
		/* An import that has committed lingers under its name for a
		 * while (its writers' handles stay valid): the name is its tag
		 * now, and renaming it renames the tag. */
		if (s && fs_stage_committed_id(s, &committed)) {
			fs_stage_unref(fs, s);
			s = NULL;
		}
		if (s) {
			rc = fs_stage_rename_dir(fs, s, newname);
			fs_stage_unref(fs, s);
		} else if (!st_name_valid(newname)) {
			fs_log(fs, FS_LOG_WARNING, "mv snapshots/%s: refused: not a valid tag name", name);
			rc = -EINVAL;
		} else if ((s = fs_stage_find(fs, newname))) {
			fs_stage_unref(fs, s);
			rc = -EEXIST;
		} else if (tag_exists(fs, newname)) {
			/* rename(2) over a non-empty directory; never merge tags */
			rc = -EEXIST;
		} else {
			rc = ix_tag_rename(fs->ix, name, newname, 0);
			if (rc >= 0) {
				struct fs_tags *old;
				fs_log(fs, FS_LOG_INFO, "mv snapshots/%s -> %s", name, newname);
				if (fs_view_refresh(fs, true, &old) >= 0)
					fs_tags_put(fs, old);
			}
		}
	} else if (is_stage(from) && is_stage(to) && from->stage == to->stage &&
		   fs_ns_stage_place(from, &fl, &fd) && fs_ns_stage_place(to, &tl, &td)) {
		rc = fs_stage_rename(fs, from->stage, fl, fd, name, tl, td, newname);
	} else if (is_stage(from) || is_stage(to)) {
		fs_log(fs, FS_LOG_WARNING, "rename %s -> %s refused: files move only inside one import", name, newname);
		rc = -EINVAL;
	} else {
		rc = refuse(fs, from, "rename", name);
	}
	reply_err(req, rc);
}

/* Hard links, symlinks and device nodes have no place in a snapshot. */
static void refuse_node(fuse_req_t req, fuse_ino_t parent, const char *op, const char *name)
{
	struct fs *fs = req_fs(req);
	struct fs_node *dir = node_of(fs, parent);

	fs_log(fs, FS_LOG_WARNING, "%s %s in %s: refused (EPERM): a snapshot holds only manifest.json and "
	       "layer files", op, name, dir ? fs_kind(dir->kind)->name : "a directory gone since");
	reply_err(req, -EPERM);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	refuse_node(req, newparent, "link", newname);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	refuse_node(req, parent, "symlink", name);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	refuse_node(req, parent, "mknod", name);
}

static void fh_free(struct fs *fs, struct fs_fh *fh)
{
	if (!fh)
		return;
	if (fh->fd >= 0)
		st_sys_close(fh->fd);
	if (fh->fd_buffered >= 0)
		st_sys_close(fh->fd_buffered);
	if (fh->map)
		st_sys_munmap(fh->map, fh->maplen);
	if (fh->layers) {
		for (uint32_t i = 0; fh->snap && i < fh->snap->m->nlayers; i++)
			fh_free(fs, fh->layers[i]);
		free(fh->layers);
	}
	if (fh->stage && fh->sfile)
		fs_stage_release(fs, fh->stage, fh->sfile, fh->writing);
	if (fh->stage)
		fs_stage_unref(fs, fh->stage);
	free(fh->text);
	pthread_mutex_destroy(&fh->lock);
	free(fh);
}

/* The kernel holds fh from now on: list it in fs->open. */
static void fh_hand_out(struct fs *fs, struct fs_fh *fh)
{
	pthread_mutex_lock(&fs->open_lock);
	fh->next = fs->open;
	if (fh->next)
		fh->next->pprev = &fh->next;
	fh->pprev = &fs->open;
	fs->open = fh;
	pthread_mutex_unlock(&fs->open_lock);
}

/* The kernel released fh (or the session ended): off the list. */
static void fh_take_back(struct fs *fs, struct fs_fh *fh)
{
	pthread_mutex_lock(&fs->open_lock);
	if (fh->pprev) {
		*fh->pprev = fh->next;
		if (fh->next)
			fh->next->pprev = fh->pprev;
		fh->next = NULL;
		fh->pprev = NULL;
	}
	pthread_mutex_unlock(&fs->open_lock);
}

void fs_ops_release_open(struct fs *fs)
{
	for (;;) {
		pthread_mutex_lock(&fs->open_lock);
		struct fs_fh *fh = fs->open;
		pthread_mutex_unlock(&fs->open_lock);
		if (!fh)
			return;
		fh_take_back(fs, fh);
		fh_free(fs, fh);
	}
}

static struct fs_fh *fh_new(enum fh_kind kind)
{
	struct fs_fh *fh = st_sys_calloc(1, sizeof(*fh));

	if (!fh)
		return NULL;
	fh->kind = kind;
	fh->fd = fh->fd_buffered = -1;
	pthread_mutex_init(&fh->lock, NULL);
	return fh;
}

/* Open a blob for serving reads, in the configured read mode. */
static int blob_fd(struct fs *fs, const st_id *id, bool buffered, int *out)
{
	char path[PATH_MAX];
	int flags = O_RDONLY | O_CLOEXEC | O_NOATIME;
	int rc = st_blob_path(fs->store, id, path, sizeof(path));

	if (rc < 0)
		return rc;
	if (fs->read_mode == FS_READ_DIRECT && !buffered)
		flags |= O_DIRECT;
	int fd = st_sys_openat(AT_FDCWD, path, flags, 0);
	if (fd == -EPERM) { /* O_NOATIME on a file we do not own */
		flags &= ~O_NOATIME;
		fd = st_sys_openat(AT_FDCWD, path, flags, 0);
	}
	if (fd == -EINVAL && (flags & O_DIRECT)) /* tmpfs has no O_DIRECT */
		fd = st_sys_openat(AT_FDCWD, path, flags & ~O_DIRECT, 0);
	if (fd < 0)
		return fd;
	*out = fd;
	return 0;
}

/*
 * In FS_READ_DIRECT the daemon never adds backing pages to the page cache
 * (O_DIRECT), but when they are cached already (a VMM maps the blob, or it
 * was just written) reading them from memory is free: the blob is mapped
 * with MADV_RANDOM (no readahead) and mincore() says which requests can be
 * answered straight from it (docs/fs.md, "read modes").
 */
static void map_backing(struct fs *fs, struct fs_fh *fh, const st_id *id)
{
	struct stat st;
	int fd;

	if (blob_fd(fs, id, true, &fd) < 0)
		return;
	if (st_sys_fstat(fd, &st) == 0 && st.st_size > 0) {
		int err;
		void *p = st_sys_mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0, &err);
		if (p) {
			st_sys_madvise(p, (size_t)st.st_size, MADV_RANDOM);
			fh->map = p;
			fh->maplen = (size_t)st.st_size;
		}
	}
	st_sys_close(fd);
}

/* True if every page of [off, off + len) of the mapped blob is in the page cache. */
static bool resident(const struct fs_fh *fh, size_t off, size_t len)
{
	unsigned char vec[FS_MAX_REQUEST / 4096 + 2];
	size_t start = off & ~(size_t)4095, end = off + len;
	size_t pages = (end - start + 4095) / 4096;

	if (!fh->map || pages > sizeof(vec) || mincore(fh->map + start, end - start, vec) < 0)
		return false;
	for (size_t i = 0; i < pages; i++)
		if (!(vec[i] & 1))
			return false;
	return true;
}

/* A handle reading one backing blob in the configured read mode. */
static int blob_fh(struct fs *fs, const st_id *id, struct fs_fh **out)
{
	struct fs_fh *fh = fh_new(FH_BLOB);
	int rc;

	if (!fh)
		return -ENOMEM;
	fh->id = *id;
	rc = blob_fd(fs, id, false, &fh->fd);
	if (rc == -ENOENT && ix_lazy_fd(fs->lazy, id, &fh->fd) == 0) {
		fh->lazy = true;
		*out = fh;
		return 0;
	}
	if (rc < 0) {
		fh_free(fs, fh);
		return rc;
	}
	if (fs->read_mode == FS_READ_DIRECT)
		map_backing(fs, fh, id);
	*out = fh;
	return 0;
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	struct fs_node *n = node_of(fs, ino);
	bool wr = (fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC);
	struct fs_fh *fh = NULL;
	int rc = 0;

	if (!n) {
		reply_err(req, -ESTALE);
		return;
	}
	enum fs_open_as as = fs_kind(n->kind)->open;
	if (wr && as != FS_OPEN_STAGE) {
		reply_err(req, refuse(fs, n, "open for writing", NULL));
		return;
	}
	switch (as) {
	case FS_OPEN_MANIFEST:
	case FS_OPEN_MEMORY:
		if (!(fh = fh_new(as == FS_OPEN_MANIFEST ? FH_BUF : FH_MEM))) {
			rc = -ENOMEM;
			break;
		}
		rc = fs_snap_get(fs, &n->id, &fh->snap);
		if (rc >= 0 && as == FS_OPEN_MEMORY) {
			size_t nl = fh->snap->m->nlayers ? fh->snap->m->nlayers : 1;
			if (!(fh->layers = st_sys_calloc(nl, sizeof(*fh->layers))))
				rc = -ENOMEM;
		}
		fi->keep_cache = 1;
		break;
	case FS_OPEN_BLOB:
		rc = blob_fh(fs, &n->id, &fh);
		/* Immutable: every opener and every mapping shares one page cache. */
		fi->keep_cache = 1;
		break;
	case FS_OPEN_STATUS:
		if (!(fh = fh_new(FH_BUF))) {
			rc = -ENOMEM;
			break;
		}
		rc = fs_stage_status(fs, n->stage, &fh->text, &fh->textlen);
		fi->direct_io = 1; /* the text changes as the import goes on */
		break;
	case FS_OPEN_STAGE: {
		if (fs_sfile_is_dir(n->sfile)) {
			rc = -EISDIR;
			break;
		}
		/* A finished layer of an import read back (a restore right after
		 * rsync, say) is served as its blob: page-cached and mappable. */
		st_id sid;
		const char *sbuf;
		size_t slen;
		if (!wr && fs_sfile_blob(n->stage, n->sfile, &sid, &sbuf, &slen) == 0 && !sbuf) {
			rc = blob_fh(fs, &sid, &fh);
			fi->keep_cache = 1;
			break;
		}
		if (!(fh = fh_new(FH_STAGE))) {
			rc = -ENOMEM;
			break;
		}
		fh->stage = fs_stage_ref(n->stage);
		if (wr)
			rc = fs_stage_open_write(fs, n->stage, n->sfile, fi->flags & O_TRUNC);
		else
			rc = fs_stage_open_read(n->stage, n->sfile);
		fh->writing = wr;
		fh->sfile = rc >= 0 ? n->sfile : NULL; /* counted: released in op_release */
		fi->direct_io = 1; /* bytes go straight to the hasher, in order */
		break;
	}
	case FS_OPEN_NONE:
		rc = -EISDIR;
		break;
	}
	if (rc < 0) {
		fh_free(fs, fh);
		reply_err(req, rc);
		return;
	}
	fh_hand_out(fs, fh);
	fi->fh = (uintptr_t)fh;
	/* Only a file being written into an import has work at close (its
	 * layer is checked and committed at flush); every other close would be
	 * a round trip to the daemon for nothing (~0.1 ms here). */
	fi->noflush = !(fh->kind == FH_STAGE && fh->writing);
	if (fuse_reply_open(req, fi) != 0) {
		fh_take_back(fs, fh);
		fh_free(fs, fh);
	}
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	struct fs_node *dir = node_of(fs, parent), *n;
	struct fs_sfile *f;
	struct fuse_entry_param e;
	int rc;

	if (!dir) {
		reply_err(req, -ESTALE);
		return;
	}
	bool in_layers;
	struct fs_sfile *sdir;
	if (!fs_ns_stage_place(dir, &in_layers, &sdir)) {
		if (fs_name_check(name) == -ENAMETOOLONG)
			rc = -ENAMETOOLONG;
		else if (dir->kind == FS_K_SNAPSHOTS) {
			fs_log(fs, FS_LOG_WARNING, "create snapshots/%s refused: snapshots/ holds directories "
			       "(mkdir NAME, then manifest.json and layers/)", name);
			rc = -EPERM;
		} else {
			rc = refuse(fs, dir, "create", name);
		}
		reply_err(req, rc);
		return;
	}
	rc = fs_stage_create(fs, dir->stage, in_layers, sdir, name, fi->flags & O_EXCL, &f);
	if (rc < 0) {
		reply_err(req, rc);
		return;
	}
	if ((rc = fs_ns_lookup(fs, dir, name, &n)) < 0) {
		reply_err(req, rc);
		return;
	}
	struct fs_fh *fh = fh_new(FH_STAGE);
	if (!fh || (rc = fill_entry(fs, n, &e)) < 0) {
		fh_free(fs, fh);
		fs_itable_forget(fs->itable, n->ino, 1);
		reply_err(req, fh ? rc : -ENOMEM);
		return;
	}
	fh->stage = fs_stage_ref(dir->stage);
	fh->writing = true;
	if ((rc = fs_stage_open_write(fs, dir->stage, f, false)) >= 0)
		fh->sfile = f; /* counted: released in op_release */
	if (rc < 0) {
		fh_free(fs, fh);
		fs_itable_forget(fs->itable, n->ino, 1);
		reply_err(req, rc);
		return;
	}
	fh_hand_out(fs, fh);
	fi->fh = (uintptr_t)fh;
	fi->direct_io = 1;
	if (fuse_reply_create(req, &e, fi) != 0) {
		fh_take_back(fs, fh);
		fh_free(fs, fh);
		fs_itable_forget(fs->itable, n->ino, 1);
	}
}

/* pread all of len (or to EOF). */
static ssize_t pread_full(int fd, char *buf, size_t len, off_t off)
{
	size_t got = 0;

	while (got < len) {
		ssize_t r = st_sys_pread(fd, buf + got, len - got, off + (off_t)got);
		if (r < 0)
			return got ? (ssize_t)got : r;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

/* Read from a backing blob fd honouring the read mode. */
static ssize_t backing_read(struct fs *fs, struct fs_fh *fh, int fd, const st_id *id, char *buf, size_t len, off_t off)
{
	ssize_t r = pread_full(fd, buf, len, off);

	if (r == -EINVAL && fs->read_mode == FS_READ_DIRECT && fh) {
		/* an unaligned request (only direct_io openers make those) */
		pthread_mutex_lock(&fh->lock);
		if (fh->fd_buffered < 0)
			blob_fd(fs, id, true, &fh->fd_buffered);
		int bfd = fh->fd_buffered;
		pthread_mutex_unlock(&fh->lock);
		if (bfd < 0)
			return -EIO;
		r = pread_full(bfd, buf, len, off);
		if (r > 0)
			posix_fadvise(bfd, off, r, POSIX_FADV_DONTNEED);
		return r;
	}
	if (r > 0 && fs->read_mode == FS_READ_DONTNEED)
		posix_fadvise(fd, off, r, POSIX_FADV_DONTNEED);
	return r;
}

/* Bring the chunks of a lazy layer that [off, off + len) touches into the
 * store. A chunk that cannot be had (refused, registry unreachable after
 * the retries) is EIO for the reader; the log says which and why. */
static int lazy_fetch(struct fs *fs, struct fs_fh *fh, uint64_t off, uint64_t len)
{
	struct ix_lazy_range r = { off, len };
	char why[ST_WHY_LEN * 2];
	int rc = ix_lazy_fetch(fs->lazy, &fh->id, &r, 1, why, sizeof(why));

	return rc < 0 && rc != -ENOMEM ? -EIO : rc;
}

static void read_mem(fuse_req_t req, struct fs *fs, struct fs_fh *fh, size_t size, off_t off)
{
	const struct st_manifest *m = fh->snap->m;
	char *buf;
	size_t done = 0;
	int rc = 0;

	if ((uint64_t)off >= m->mem_size) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if ((uint64_t)off + size > m->mem_size)
		size = (size_t)(m->mem_size - (uint64_t)off);
	if (!(buf = st_sys_aligned_alloc(4096, size ? size : 1))) {
		reply_err(req, -ENOMEM);
		return;
	}
	while (done < size && rc >= 0) {
		uint64_t len, loff;
		uint32_t layer;
		rc = fs_mem_extent(m, (uint64_t)off + done, &len, &layer, &loff);
		if (rc < 0)
			break;
		size_t n = len < size - done ? (size_t)len : size - done;
		if (layer == UINT32_MAX) {
			memset(buf + done, 0, n);
		} else {
			pthread_mutex_lock(&fh->lock);
			if (!fh->layers[layer])
				rc = blob_fh(fs, &m->layers[layer].id, &fh->layers[layer]);
			struct fs_fh *lh = fh->layers[layer];
			pthread_mutex_unlock(&fh->lock);
			if (rc < 0)
				break;
			ssize_t r;
			if (lh->lazy && (rc = lazy_fetch(fs, lh, loff, n)) < 0)
				break;
			if (lh->map && loff + n <= lh->maplen && resident(lh, (size_t)loff, n)) {
				memcpy(buf + done, lh->map + loff, n);
				r = (ssize_t)n;
			} else {
				r = backing_read(fs, lh, lh->fd, &m->layers[layer].id, buf + done, n, (off_t)loff);
			}
			if (r < 0) {
				rc = (int)r;
				break;
			}
			if ((size_t)r < n) {
				fs_log(fs, FS_LOG_ERR, "memory: a layer is shorter than its manifest says");
				rc = -EIO;
				break;
			}
		}
		done += n;
	}
	if (rc < 0)
		reply_err(req, rc);
	else
		fuse_reply_buf(req, buf, done);
	free(buf);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	struct fs_fh *fh = (struct fs_fh *)(uintptr_t)fi->fh;
	struct fs_node *n = node_of(fs, ino);

	switch (fh->kind) {
	case FH_BUF:
		if (fh->text) {
			/* Replied from a copy: once the reply is written the reader
			 * may close and its release free fh on another thread
			 * while this one is still in the reply's write (where a
			 * sanitizer reads the buffer after the syscall). */
			size_t o = (size_t)off < fh->textlen ? (size_t)off : fh->textlen;
			size_t len = size < fh->textlen - o ? size : fh->textlen - o;
			char *copy = st_sys_malloc(len ? len : 1);
			if (!copy) {
				reply_err(req, -ENOMEM);
				return;
			}
			memcpy(copy, fh->text + o, len);
			fuse_reply_buf(req, copy, len);
			free(copy);
			return;
		}
		if ((size_t)off >= fh->snap->rawlen)
			fuse_reply_buf(req, NULL, 0);
		else
			fuse_reply_buf(req, fh->snap->raw + off,
				       size < fh->snap->rawlen - (size_t)off ? size : fh->snap->rawlen - (size_t)off);
		return;
	case FH_MEM:
		read_mem(req, fs, fh, size, off);
		return;
	case FH_BLOB:
		if (fh->lazy) {
			int rc = lazy_fetch(fs, fh, (uint64_t)off, size);
			if (rc < 0) {
				reply_err(req, rc);
				return;
			}
		}
		if (fh->map && (size_t)off < fh->maplen) {
			size_t len = size < fh->maplen - (size_t)off ? size : fh->maplen - (size_t)off;
			if (resident(fh, (size_t)off, len)) {
				fuse_reply_buf(req, fh->map + off, len);
				return;
			}
		}
		/* A lazy layer's partial file holds what the fetch just wrote,
		 * in the page cache already: in direct mode splice it from there too,
		 * without a buffer of the request's size and a copy through it
		 * (the restore's reads of a prefetched working set, docs/fs.md). */
		if (fs->read_mode == FS_READ_CACHED || (fh->lazy && fs->read_mode == FS_READ_DIRECT)) {
			/* splice straight from the backing file when the kernel can */
			struct fuse_bufvec bv = FUSE_BUFVEC_INIT(size);
			bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
			bv.buf[0].fd = fh->fd;
			bv.buf[0].pos = off;
			fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE);
			return;
		}
		break;
	case FH_STAGE: {
		st_id id;
		const char *b;
		size_t len;
		int rc = fs_sfile_blob(fh->stage, fh->sfile, &id, &b, &len);
		if (rc < 0) {
			reply_err(req, rc == -EBUSY ? -EACCES : rc);
			return;
		}
		if (b) {
			/* b may move or go while we reply: reply from a copy */
			char *copy;
			size_t got;
			if ((rc = fs_sfile_copy(fh->stage, fh->sfile, (uint64_t)off, size, &copy, &got)) < 0) {
				reply_err(req, rc == -EBUSY ? -EACCES : rc);
				return;
			}
			fuse_reply_buf(req, copy, got);
			free(copy);
			return;
		}
		int fd;
		if ((rc = blob_fd(fs, &id, true, &fd)) < 0) {
			reply_err(req, rc);
			return;
		}
		char *buf = st_sys_malloc(size ? size : 1);
		ssize_t r = buf ? pread_full(fd, buf, size, off) : -ENOMEM;
		st_sys_close(fd);
		if (r < 0)
			reply_err(req, (int)r);
		else
			fuse_reply_buf(req, buf, (size_t)r);
		free(buf);
		return;
	}
	}
	(void)n;
	char *buf;
	if (!(buf = st_sys_aligned_alloc(4096, size ? size : 1))) {
		reply_err(req, -ENOMEM);
		return;
	}
	ssize_t r = backing_read(fs, fh, fh->fd, n ? &n->id : NULL, buf, size, off);
	if (r < 0)
		reply_err(req, (int)r);
	else
		fuse_reply_buf(req, buf, (size_t)r);
	free(buf);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	struct fs_fh *fh = (struct fs_fh *)(uintptr_t)fi->fh;

	if (fh->kind != FH_STAGE || !fh->writing) {
		reply_err(req, -EBADF);
		return;
	}
	int rc = fs_stage_write(fs, fh->stage, fh->sfile, (uint64_t)off, buf, size);
	if (rc < 0)
		reply_err(req, rc);
	else
		fuse_reply_write(req, (size_t)rc);
}

/* close(): the kernel orders flush before the next operation on the name,
 * so this is where a file's bytes are checked and the snapshot committed. */
static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	struct fs_fh *fh = (struct fs_fh *)(uintptr_t)fi->fh;

	if (fh->kind != FH_STAGE || !fh->writing) {
		fuse_reply_err(req, 0);
		return;
	}
	reply_err(req, fs_stage_flush(fs, fh->stage, fh->sfile));
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs_fh *fh = (struct fs_fh *)(uintptr_t)fi->fh;

	fh_take_back(req_fs(req), fh);
	fh_free(req_fs(req), fh);
	fuse_reply_err(req, 0);
}

/* fsync() of a file being written into an import checks it as close()
 * does, committing the snapshot when it is complete, so a tool that fsyncs
 * its last file learns there whether the import took (a refused commit,
 * bytes that can never be valid, a removed file). Staged bytes become
 * durable when they are published (store policy). */
static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	struct fs_fh *fh = (struct fs_fh *)(uintptr_t)fi->fh;

	if (fh->kind != FH_STAGE || !fh->writing) {
		fuse_reply_err(req, 0);
		return;
	}
	reply_err(req, fs_stage_flush(fs, fh->stage, fh->sfile));
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	struct fs_node *n = node_of(fs, ino);
	struct fs_dirlist *l;
	int rc;

	if (!n) {
		reply_err(req, -ESTALE);
		return;
	}
	bool keep = true;
	enum fs_listing_cache listing = fs_kind(n->kind)->listing;
	if (listing == FS_LIST_TAGS) {
		/* The kernel may keep this listing only while the tags it shows
		 * are the current ones (whoever changed them: us, the CLI). */
		sync_tags(fs);
		struct fs_tags *t = fs_tags_get(fs);
		int w = n->kind == FS_K_MEMORY;
		pthread_mutex_lock(&fs->view_lock);
		keep = fs->listed_gen[w] == t->gen && fs->listed_n[w] == t->n;
		fs->listed_gen[w] = t->gen;
		fs->listed_n[w] = t->n;
		pthread_mutex_unlock(&fs->view_lock);
		fs_tags_put(fs, t);
	}
	if ((rc = fs_ns_list(fs, n, &l)) < 0) {
		reply_err(req, rc);
		return;
	}
	fi->fh = (uintptr_t)l;
	/* Listings of immutable dirs are cached by the kernel (`ls -lR` again
	 * costs no daemon round trip per directory); imports, blobs/ and a
	 * snapshot being removed are always listed afresh. */
	switch (listing) {
	case FS_LIST_KEEP:
	case FS_LIST_TAGS:
		fi->cache_readdir = 1;
		fi->keep_cache = keep;
		break;
	case FS_LIST_UNLESS_RM:
		fi->cache_readdir = 1;
		fi->keep_cache = n->rm == NULL;
		break;
	case FS_LIST_FRESH:
		fi->cache_readdir = 0;
		fi->keep_cache = 0;
		break;
	}
	if (fuse_reply_open(req, fi) != 0)
		fs_dirlist_free(l);
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi, bool plus)
{
	struct fs *fs = req_fs(req);
	struct fs_dirlist *l = (struct fs_dirlist *)(uintptr_t)fi->fh;
	struct fs_node *dir = node_of(fs, ino);
	char *buf = st_sys_malloc(size);
	size_t used = 0;

	if (!buf || !dir) {
		free(buf);
		reply_err(req, buf ? -ESTALE : -ENOMEM);
		return;
	}
	/* offsets: 0 ".", 1 "..", 2 + i the i-th entry */
	for (off_t i = off; i < (off_t)l->n + 2; i++) {
		const char *name = i == 0 ? "." : i == 1 ? ".." : l->v[i - 2].name;
		size_t want;
		if (i < 2 || !plus) {
			struct stat st = { 0 };
			st.st_ino = i == 0 ? dir->st_ino : i == 1 ? FS_INO_ROOT : l->v[i - 2].st_ino;
			st.st_mode = i < 2 ? S_IFDIR : l->v[i - 2].type;
			if (plus) {
				struct fuse_entry_param e = { 0 };
				e.attr = st;
				want = fuse_add_direntry_plus(req, buf + used, size - used, name, &e, i + 1);
			} else {
				want = fuse_add_direntry(req, buf + used, size - used, name, &st, i + 1);
			}
			if (want > size - used)
				break;
			used += want;
			continue;
		}
		struct fs_node *n;
		struct fuse_entry_param e;
		if (fs_ns_lookup(fs, dir, name, &n) < 0)
			continue; /* gone since opendir */
		if (fill_entry(fs, n, &e) < 0) {
			fs_itable_forget(fs->itable, n->ino, 1);
			continue;
		}
		want = fuse_add_direntry_plus(req, buf + used, size - used, name, &e, i + 1);
		if (want > size - used) {
			fs_itable_forget(fs->itable, n->ino, 1); /* not sent: not counted */
			break;
		}
		used += want;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, true);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fs_dirlist_free((struct fs_dirlist *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct fs *fs = req_fs(req);
	struct statvfs sv;

	if (statvfs(st_store_path(fs->store), &sv) < 0) {
		reply_err(req, -errno);
		return;
	}
	sv.f_namemax = FS_NAME_MAX;
	fuse_reply_statfs(req, &sv);
}

/* getxattr and listxattr: size 0 asks for the length, else for the bytes. */
static void reply_xattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct fs *fs = req_fs(req);
	struct fs_node *n = node_of(fs, ino);
	char *buf = size ? st_sys_malloc(size) : NULL;

	if (!n || (size && !buf)) {
		free(buf);
		reply_err(req, n ? -ENOMEM : -ESTALE);
		return;
	}
	int rc = name ? fs_ns_getxattr(fs, n, name, buf, size) : fs_ns_listxattr(fs, n, buf, size);
	if (rc < 0)
		reply_err(req, rc);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)rc);
	else
		fuse_reply_buf(req, buf, (size_t)rc);
	free(buf);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	reply_xattr(req, ino, name, size);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	reply_xattr(req, ino, NULL, size);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size, int flags)
{
	struct fs *fs = req_fs(req);
	struct fs_node *n = node_of(fs, ino);

	if (!n) {
		reply_err(req, -ESTALE);
		return;
	}
	/* Copies into an import may try to carry xattrs along: strata's own
	 * are accepted (rsync -X, cp -a), others ENOTSUP; none is kept. */
	if (is_stage(n)) {
		reply_err(req, fs_stage_setxattr(fs, n->stage, name));
		return;
	}
	/* On a snapshot, writing back what strata exports is a no-op: the same
	 * id, or a blob path (it names a file in another store when copied). */
	if (in_snapshot(n) && strncmp(name, ST_XATTR_PREFIX, strlen(ST_XATTR_PREFIX)) == 0) {
		char cur[ST_ID_HEX_LEN + 1];
		int len = fs_ns_getxattr(fs, n, name, cur, sizeof(cur));
		if (strcmp(name, ST_XATTR_BLOB_PATH) == 0 ||
		    (len >= 0 && (size_t)len == size && memcmp(cur, value, size) == 0)) {
			fuse_reply_err(req, 0);
			return;
		}
	}
	reply_err(req, refuse(fs, n, "setxattr", name));
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct fs *fs = req_fs(req);
	struct fs_node *n = node_of(fs, ino);

	if (!n) {
		reply_err(req, -ESTALE);
		return;
	}
	/* strata's own names are computed, never stored: removing one (rsync
	 * -X from a copy that lacks them) is accepted and changes nothing. */
	if ((is_stage(n) || in_snapshot(n)) && strncmp(name, ST_XATTR_PREFIX, strlen(ST_XATTR_PREFIX)) == 0) {
		fuse_reply_err(req, 0);
		return;
	}
	reply_err(req, is_stage(n) ? -ENOTSUP : refuse(fs, n, "removexattr", name));
}

/*
 * SEEK_DATA / SEEK_HOLE in a lazy layer: its present chunks are data, its
 * absent ones holes (as st_blocks counts them). A restore walks them to
 * read the present chunks ahead into the page cache without touching an
 * absent one (vmm/reset.c, docs/lazy.md).
 */
static int lazy_seek(struct fs *fs, struct fs_fh *fh, uint64_t off, bool data, uint64_t *out)
{
	struct ix_lazy_info info;
	uint8_t map[256];

	if (ix_lazy_layer_info(fs->lazy, &fh->id, &info) != 1)
		return -EIO;
	if (off >= info.size)
		return -ENXIO;
	for (uint64_t c = off / info.chunk_size; c < info.chunks; c += sizeof(map)) {
		if (ix_lazy_present_at(fs->lazy, &fh->id, c, map, sizeof(map)) < 0)
			return -EIO;
		for (uint64_t i = 0; i < sizeof(map) && c + i < info.chunks; i++) {
			if (map[i] != data)
				continue;
			uint64_t at = (c + i) * info.chunk_size;
			*out = at > off ? at : off;
			return 0;
		}
	}
	if (data)
		return -ENXIO;
	*out = info.size; /* the end is a hole */
	return 0;
}

static void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi)
{
	struct fs *fs = req_fs(req);
	struct fs_fh *fh = (struct fs_fh *)(uintptr_t)fi->fh;
	struct fs_node *n = node_of(fs, ino);
	struct stat st;
	uint64_t out;
	int rc;

	if (whence != SEEK_DATA && whence != SEEK_HOLE) {
		reply_err(req, -EINVAL);
		return;
	}
	if (off < 0) {
		reply_err(req, -ENXIO);
		return;
	}
	if (fh->kind == FH_MEM) {
		rc = fs_mem_seek(fh->snap->m, (uint64_t)off, whence == SEEK_DATA, &out);
		if (rc < 0)
			reply_err(req, rc);
		else
			fuse_reply_lseek(req, (off_t)out);
		return;
	}
	if (fh->kind == FH_BLOB && fh->lazy) {
		rc = lazy_seek(fs, fh, (uint64_t)off, whence == SEEK_DATA, &out);
		if (rc < 0)
			reply_err(req, rc);
		else
			fuse_reply_lseek(req, (off_t)out);
		return;
	}
	/* Other files are dense. */
	if (!n || (rc = fs_ns_attr(fs, n, &st)) < 0) {
		reply_err(req, n ? rc : -ESTALE);
		return;
	}
	if (off >= st.st_size)
		reply_err(req, -ENXIO);
	else
		fuse_reply_lseek(req, whence == SEEK_DATA ? off : st.st_size);
}

const struct fuse_lowlevel_ops *fs_ops(void)
{
	static const struct fuse_lowlevel_ops ops = {
		.init = op_init,
		.lookup = op_lookup,
		.forget = op_forget,
		.forget_multi = op_forget_multi,
		.getattr = op_getattr,
		.setattr = op_setattr,
		.mkdir = op_mkdir,
		.unlink = op_unlink,
		.rmdir = op_rmdir,
		.rename = op_rename,
		.link = op_link,
		.symlink = op_symlink,
		.mknod = op_mknod,
		.open = op_open,
		.create = op_create,
		.read = op_read,
		.write = op_write,
		.flush = op_flush,
		.release = op_release,
		.fsync = op_fsync,
		.opendir = op_opendir,
		.readdir = op_readdir,
		.readdirplus = op_readdirplus,
		.releasedir = op_releasedir,
		.statfs = op_statfs,
		.getxattr = op_getxattr,
		.listxattr = op_listxattr,
		.setxattr = op_setxattr,
		.removexattr = op_removexattr,
		.lseek = op_lseek,
	};
	return &ops;
}

void fs_ops_invalidate_names(struct fs *fs, char **names, size_t n)
{
	struct fuse_session *se = fs->session;

	for (size_t i = 0; se && i < n; i++) {
		fuse_lowlevel_notify_inval_entry(se, FS_INO_SNAPSHOTS, names[i], strlen(names[i]));
		fuse_lowlevel_notify_inval_entry(se, FS_INO_MEMORY, names[i], strlen(names[i]));
	}
}

void fs_ops_invalidate_tags(struct fs *fs, const struct fs_tags *old, const struct fs_tags *cur)
{
	struct fuse_session *se = fs->session;
	size_t i = 0, j = 0;
	bool changed = false;

	if (!se)
		return;
	/* merge walk of two sorted name lists */
	while (i < old->n || j < cur->n) {
		int c = i >= old->n ? 1 : j >= cur->n ? -1 : strcmp(old->v[i].name, cur->v[j].name);
		const char *name = NULL;
		if (c < 0) {
			name = old->v[i++].name;          /* removed */
		} else if (c > 0) {
			j++;                              /* added: negative entries are not cached */
			changed = true;
		} else {
			if (!st_id_equal(&old->v[i].id, &cur->v[j].id))
				name = old->v[i].name;    /* moved to another snapshot */
			i++;
			j++;
		}
		if (name) {
			changed = true;
			fuse_lowlevel_notify_inval_entry(se, FS_INO_SNAPSHOTS, name, strlen(name));
			fuse_lowlevel_notify_inval_entry(se, FS_INO_MEMORY, name, strlen(name));
		}
	}
	if (changed) {
		fuse_lowlevel_notify_inval_inode(se, FS_INO_SNAPSHOTS, -1, 0);
		fuse_lowlevel_notify_inval_inode(se, FS_INO_MEMORY, -1, 0);
	}
}
