/* blob.c: content-addressed blob files: streaming put with atomic publish, open, verify, delete, walk. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "store/store_int.h"

#define PUT_FD_CHUNK (1u << 20)
/* Writes smaller than this are gathered before they reach write(2): a
 * capture hands over one run of pages at a time, and scattered pages would
 * otherwise cost a system call each. Small enough to come from the heap,
 * not mmap (docs/formats.md has the measurement and the reason). */
#define WRITER_BUF (64u << 10)

struct st_blob_writer {
	struct st_store *s;
	struct st_hasher *h;
	int fd;
	int err;           /* first failure of write(); commit then fails with it */
	uint64_t size;
	uint8_t *buf;      /* gathered small writes, allocated on first use */
	size_t buffered;
	bool hole_at_end;  /* the last bytes were skipped (writer_skip_zeros): commit sets the size */
	char tmpname[96];
};

/* "ab/<32 hex>" relative to STORE/blobs. */
static void blob_relpath(const st_id *id, char out[ST_ID_HEX_LEN + 4])
{
	char hex[ST_ID_HEX_LEN + 1];

	st_id_format(id, hex);
	out[0] = hex[0];
	out[1] = hex[1];
	out[2] = '/';
	memcpy(out + 3, hex, ST_ID_HEX_LEN + 1);
}

int st_blob_writer_new(struct st_store *s, struct st_blob_writer **out)
{
	static _Atomic unsigned counter;
	struct st_blob_writer *w;
	int rc;

	if (s->flags & ST_OPEN_RDONLY)
		return ST_EREADONLY;
	w = st_sys_calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->s = s;
	w->fd = -1;
	if ((rc = st_hasher_new(&w->h)) < 0)
		goto out_free;
	/* pid + counter is unique among live writers; O_EXCL guards against a
	 * leftover from a crashed process that had the same pid. */
	for (int tries = 0; tries < 16; tries++) {
		snprintf(w->tmpname, sizeof(w->tmpname), "blob.%ld.%u", (long)getpid(), atomic_fetch_add(&counter, 1));
		w->fd = st_sys_openat(s->tmp_fd, w->tmpname, O_RDWR | O_CREAT | O_EXCL, 0600);
		if (w->fd != -EEXIST)
			break;
	}
	if (w->fd < 0) {
		rc = st_write_err(w->fd);
		goto out_free;
	}
	*out = w;
	return 0;
out_free:
	st_hasher_free(w->h);
	free(w);
	return rc;
}

/* Write what is gathered; a failure is kept and reported by commit. */
static int writer_flush(struct st_blob_writer *w)
{
	int rc;

	if (w->err || w->buffered == 0)
		return w->err;
	rc = st_sys_write_all(w->fd, w->buf, w->buffered);
	w->buffered = 0;
	if (rc < 0)
		w->err = st_write_err(rc);
	return w->err;
}

/* Take len zero bytes (zeros, which the caller has) without writing them:
 * hashed and counted, a hole in the file. */
static int writer_skip_zeros(struct st_blob_writer *w, const void *zeros, size_t len)
{
	off_t at;

	if (w->err || writer_flush(w) < 0)
		return w->err;
	st_hasher_update(w->h, zeros, len);
	w->size += len;
	if ((at = st_sys_lseek(w->fd, (off_t)len, SEEK_CUR)) < 0)
		return w->err = st_write_err((int)at);
	w->hole_at_end = true;
	return 0;
}

int st_blob_writer_write(struct st_blob_writer *w, const void *buf, size_t len)
{
	int rc;

	if (w->err)
		return w->err;
	if (len == 0)
		return 0;
	w->hole_at_end = false;
	st_hasher_update(w->h, buf, len);
	w->size += len;
	if (len < WRITER_BUF && !w->buf && !(w->buf = st_sys_malloc(WRITER_BUF)))
		return w->err = -ENOMEM;
	if (len < WRITER_BUF) {
		if (w->buffered + len > WRITER_BUF && (rc = writer_flush(w)) < 0)
			return rc;
		memcpy(w->buf + w->buffered, buf, len);
		w->buffered += len;
		return 0;
	}
	if ((rc = writer_flush(w)) < 0)
		return rc;
	rc = st_sys_write_all(w->fd, buf, len);
	if (rc < 0) {
		w->err = st_write_err(rc);
		return w->err;
	}
	return 0;
}

/* Resumable puts keep their bytes under this prefix in STORE/tmp/, so
 * the random names of ordinary writers never collide with them. */
#define RESUME_PREFIX "part."

int st_blob_writer_resume(struct st_store *s, const char *name, void (*prefix)(void *ctx, const void *buf, size_t len),
			  void *ctx, struct st_blob_writer **out)
{
	struct st_blob_writer *w;
	uint8_t *buf = NULL;
	int rc;

	if (s->flags & ST_OPEN_RDONLY)
		return ST_EREADONLY;
	if (!st_name_valid(name) || strlen(name) + sizeof(RESUME_PREFIX) > sizeof(w->tmpname))
		return -EINVAL;
	if (!(w = st_sys_calloc(1, sizeof(*w))))
		return -ENOMEM;
	w->s = s;
	w->fd = -1;
	snprintf(w->tmpname, sizeof(w->tmpname), RESUME_PREFIX "%s", name);
	if ((rc = st_hasher_new(&w->h)) < 0)
		goto out_free;
	for (int tries = 0;; tries++) {
		struct stat a, b;

		w->fd = st_sys_openat(s->tmp_fd, w->tmpname, O_RDWR | O_CREAT, 0600);
		if (w->fd < 0) {
			rc = st_write_err(w->fd);
			goto out_free;
		}
		/* One writer per name: a second process resuming the same bytes
		 * would interleave its appends with ours. */
		if (flock(w->fd, LOCK_EX | LOCK_NB) < 0) {
			rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
			goto out_close;
		}
		/* The lock holder may have published the file between our open and
		 * our lock: then it is a blob now and must never be appended to. */
		if ((rc = st_sys_fstat(w->fd, &a)) < 0)
			goto out_close;
		rc = st_sys_fstatat(s->tmp_fd, w->tmpname, &b, AT_SYMLINK_NOFOLLOW);
		if (rc == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev)
			break;
		st_sys_close(w->fd);
		if (tries >= 4) {
			rc = -EBUSY;
			goto out_free;
		}
	}
	if (!(buf = st_sys_malloc(PUT_FD_CHUNK))) {
		rc = -ENOMEM;
		goto out_close;
	}
	for (;;) {
		ssize_t n = st_sys_read(w->fd, buf, PUT_FD_CHUNK);
		if (n < 0) {
			rc = (int)n;
			goto out_close;
		}
		if (n == 0)
			break;
		st_hasher_update(w->h, buf, (size_t)n);
		if (prefix)
			prefix(ctx, buf, (size_t)n);
		w->size += (uint64_t)n;
	}
	free(buf);
	*out = w;
	return 0;
out_close:
	free(buf);
	st_sys_close(w->fd);
out_free:
	st_hasher_free(w->h);
	free(w);
	return rc;
}

int st_blob_writer_suspend(struct st_blob_writer *w)
{
	int rc;

	if (!w)
		return 0;
	rc = writer_flush(w);
	if (w->fd >= 0) {
		int crc = st_sys_close(w->fd);
		if (rc == 0)
			rc = crc;
	}
	if (rc < 0) /* what is on disk may not be what was hashed: start over next time */
		st_sys_unlinkat(w->s->tmp_fd, w->tmpname, 0);
	st_hasher_free(w->h);
	free(w->buf);
	free(w);
	return rc;
}

uint64_t st_blob_writer_size(const struct st_blob_writer *w)
{
	return w->size;
}

void st_blob_writer_digest(const struct st_blob_writer *w, st_id *out)
{
	st_hasher_final(w->h, out);
}

/* Drop the temp file and the writer. */
static void writer_discard(struct st_blob_writer *w)
{
	if (w->fd >= 0)
		st_sys_close(w->fd);
	st_sys_unlinkat(w->s->tmp_fd, w->tmpname, 0);
	st_hasher_free(w->h);
	free(w->buf);
	free(w);
}

void st_blob_writer_abort(struct st_blob_writer *w)
{
	if (w)
		writer_discard(w);
}

/* Create STORE/blobs/ab if missing (durable per policy before anything is
 * linked into it). */
static int fanout_create(struct st_store *s, const char *rel)
{
	char dir[3] = { rel[0], rel[1], '\0' };
	int rc = st_store_mkdirat(s, s->blobs_fd, dir, ST_PERM_DIR);

	if (rc < 0 && rc != -EEXIST)
		return rc;
	if (rc == 0 && s->sync == ST_SYNC_FULL)
		return st_dir_fsync(s->blobs_fd, ".");
	return 0;
}

/* Move the finished temp file to its blob name without replacing an
 * existing one. Returns 1 if the name already existed (dedup), 0 if
 * published. */
static int publish(struct st_store *s, const char *tmpname, const char *rel)
{
	int rc;

	for (int attempt = 0; attempt < 2; attempt++) {
		rc = st_sys_renameat_noreplace(s->tmp_fd, tmpname, s->blobs_fd, rel);
		if (rc == -EINVAL || rc == -ENOSYS) {
			/* Filesystem without RENAME_NOREPLACE: link is atomic and
			 * also refuses to replace. */
			rc = st_sys_linkat(s->tmp_fd, tmpname, s->blobs_fd, rel, 0);
			if (rc == 0)
				st_sys_unlinkat(s->tmp_fd, tmpname, 0);
		}
		if (rc == -EEXIST)
			return 1;
		if (rc != -ENOENT || attempt)
			return rc;
		if ((rc = fanout_create(s, rel)) < 0)
			return rc;
	}
	return rc;
}

/* Publish the writer's temp file as blob id (already known to be its
 * hash), or drop it on a dedup hit. Frees w. */
static int writer_publish(struct st_blob_writer *w, st_id id, const st_id *expect, st_id *id_out, bool *dedup_out)
{
	struct st_store *s = w->s;
	char rel[ST_ID_HEX_LEN + 4], dir[3];
	struct stat st;
	int rc;

	if (expect && !st_id_equal(expect, &id)) {
		rc = ST_ECORRUPT;
		goto out_discard;
	}
	blob_relpath(&id, rel);
	/* Dedup before paying for fsync. */
	rc = st_sys_fstatat(s->blobs_fd, rel, &st, AT_SYMLINK_NOFOLLOW);
	if (rc == 0)
		goto out_dedup;
	if (rc != -ENOENT)
		goto out_discard;
	if (s->sync == ST_SYNC_FULL && (rc = st_sys_fsync(w->fd)) < 0)
		goto out_discard;
	if ((rc = st_store_fchmod(s, w->fd, ST_PERM_RO)) < 0)
		goto out_discard;
	rc = st_sys_close(w->fd);
	w->fd = -1;
	if (rc < 0)
		goto out_discard;
	rc = publish(s, w->tmpname, rel);
	if (rc == 1)
		goto out_dedup;
	if (rc < 0)
		goto out_discard;
	/* Published. The directory fsync makes the name durable; if it fails
	 * the blob is visible but may not survive power loss, so report it:
	 * the caller must not reference it from a durable index. */
	if (s->sync == ST_SYNC_FULL) {
		dir[0] = rel[0];
		dir[1] = rel[1];
		dir[2] = '\0';
		if ((rc = st_dir_fsync(s->blobs_fd, dir)) < 0) {
			st_hasher_free(w->h);
			free(w->buf);
			free(w);
			return rc;
		}
	}
	st_hasher_free(w->h);
	free(w->buf);
	free(w);
	if (id_out)
		*id_out = id;
	if (dedup_out)
		*dedup_out = false;
	return 0;
out_dedup:
	writer_discard(w);
	if (id_out)
		*id_out = id;
	if (dedup_out)
		*dedup_out = true;
	return 0;
out_discard:
	writer_discard(w);
	return st_write_err(rc);
}

int st_blob_writer_commit(struct st_blob_writer *w, const st_id *expect, st_id *id_out, bool *dedup_out)
{
	st_id id;
	int rc;

	if ((rc = writer_flush(w)) < 0) {
		writer_discard(w);
		return rc;
	}
	if (w->hole_at_end && (rc = st_sys_ftruncate(w->fd, (off_t)w->size)) < 0) {
		writer_discard(w);
		return st_write_err(rc);
	}
	st_hasher_final(w->h, &id);
	return writer_publish(w, id, expect, id_out, dedup_out);
}

int st_blob_put(struct st_store *s, const void *buf, size_t len, st_id *id, bool *dedup)
{
	struct st_blob_writer *w;
	int rc = st_blob_writer_new(s, &w);

	if (rc < 0)
		return rc;
	if ((rc = st_blob_writer_write(w, buf, len)) < 0) {
		st_blob_writer_abort(w);
		return rc;
	}
	return st_blob_writer_commit(w, NULL, id, dedup);
}

/* Hash everything read from fd without storing it. */
static int hash_stream(int fd, char *buf, st_id *out)
{
	struct st_hasher *h;
	int rc = st_hasher_new(&h);

	if (rc < 0)
		return rc;
	for (;;) {
		ssize_t n = st_sys_read(fd, buf, PUT_FD_CHUNK);
		if (n < 0) {
			st_hasher_free(h);
			return (int)n;
		}
		if (n == 0)
			break;
		st_hasher_update(h, buf, (size_t)n);
	}
	st_hasher_final(h, out);
	st_hasher_free(h);
	return 0;
}

/*
 * Write buf, its whole zero pages as holes. strata's own layers hold no
 * zero page (they are holes in the ranges), so this costs them one scan;
 * a file from elsewhere (`strata import` of a directory) may be a sparse
 * 2 GiB layer of a few pages, which is then stored in those pages, not
 * 2 GiB of disk. Mapped or read, a hole is the zeros it replaced.
 */
static int write_sparse(struct st_blob_writer *w, const uint8_t *buf, size_t len)
{
	size_t at = 0;
	int rc = 0;

	while (at < len && rc == 0) {
		size_t end = at;
		bool zero = len - at >= ST_PAGE_SIZE && st_is_zero(buf + at, ST_PAGE_SIZE);
		/* A run of pages of one kind (a part page at the end is data). */
		do
			end += len - end < ST_PAGE_SIZE ? len - end : ST_PAGE_SIZE;
		while (end < len && len - end >= ST_PAGE_SIZE && st_is_zero(buf + end, ST_PAGE_SIZE) == zero);
		rc = zero ? writer_skip_zeros(w, buf + at, end - at) : st_blob_writer_write(w, buf + at, end - at);
		at = end;
	}
	return rc;
}

int st_blob_put_fd(struct st_store *s, int fd, const st_id *expect, st_id *id, bool *dedup)
{
	struct st_blob_writer *w;
	char *buf;
	int rc;

	if (s->flags & ST_OPEN_RDONLY)
		return ST_EREADONLY;
	buf = st_sys_malloc(PUT_FD_CHUNK);
	if (!buf)
		return -ENOMEM;
	/* The expected blob is already here (re-import): the bytes still have
	 * to be checked against the name, but need not be written. */
	if (expect && st_blob_has(s, expect)) {
		st_id got;
		if ((rc = hash_stream(fd, buf, &got)) == 0) {
			if (!st_id_equal(&got, expect)) {
				rc = ST_ECORRUPT;
			} else {
				if (id)
					*id = got;
				if (dedup)
					*dedup = true;
			}
		}
		goto out_free;
	}
	if ((rc = st_blob_writer_new(s, &w)) < 0)
		goto out_free;
	for (;;) {
		ssize_t n = st_sys_read(fd, buf, PUT_FD_CHUNK);
		if (n < 0) {
			rc = (int)n;
			st_blob_writer_abort(w);
			goto out_free;
		}
		if (n == 0)
			break;
		if ((rc = write_sparse(w, (const uint8_t *)buf, (size_t)n)) < 0) {
			st_blob_writer_abort(w);
			goto out_free;
		}
	}
	rc = st_blob_writer_commit(w, expect, id, dedup);
out_free:
	free(buf);
	return rc;
}

int st_blob_open(struct st_store *s, const st_id *id, int *fd_out)
{
	char rel[ST_ID_HEX_LEN + 4];
	int fd;

	blob_relpath(id, rel);
	fd = st_sys_openat(s->blobs_fd, rel, O_RDONLY | O_NOFOLLOW, 0);
	if (fd < 0)
		return fd;
	*fd_out = fd;
	return 0;
}

int st_blob_touch(struct st_store *s, const st_id *id)
{
	char rel[ST_ID_HEX_LEN + 4];

	blob_relpath(id, rel);
	return st_sys_touchat(s->blobs_fd, rel);
}

int st_blob_mtime(struct st_store *s, const st_id *id, int64_t *mtime_ns)
{
	char rel[ST_ID_HEX_LEN + 4];
	struct stat st;
	int rc;

	blob_relpath(id, rel);
	if ((rc = st_sys_fstatat(s->blobs_fd, rel, &st, AT_SYMLINK_NOFOLLOW)) < 0)
		return rc;
	*mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000ll + st.st_mtim.tv_nsec;
	return 0;
}

bool st_blob_has(struct st_store *s, const st_id *id)
{
	char rel[ST_ID_HEX_LEN + 4];
	struct stat st;

	blob_relpath(id, rel);
	return st_sys_fstatat(s->blobs_fd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

int st_blob_size(struct st_store *s, const st_id *id, uint64_t *size)
{
	char rel[ST_ID_HEX_LEN + 4];
	struct stat st;
	int rc;

	blob_relpath(id, rel);
	if ((rc = st_sys_fstatat(s->blobs_fd, rel, &st, AT_SYMLINK_NOFOLLOW)) < 0)
		return rc;
	*size = (uint64_t)st.st_size;
	return 0;
}

int st_blob_path(const struct st_store *s, const st_id *id, char *buf, size_t len)
{
	return st_blob_path_at(s->path, id, buf, len);
}

int st_blob_path_at(const char *root, const st_id *id, char *buf, size_t len)
{
	char rel[ST_ID_HEX_LEN + 4];
	int n;

	blob_relpath(id, rel);
	n = snprintf(buf, len, "%s/blobs/%s", root, rel);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

int st_blob_del(struct st_store *s, const st_id *id)
{
	char rel[ST_ID_HEX_LEN + 4];
	int rc;

	if (s->flags & ST_OPEN_RDONLY)
		return ST_EREADONLY;
	blob_relpath(id, rel);
	if ((rc = st_sys_unlinkat(s->blobs_fd, rel, 0)) < 0)
		return st_write_err(rc);
	if (s->sync == ST_SYNC_FULL) {
		rel[2] = '\0';
		return st_dir_fsync(s->blobs_fd, rel);
	}
	return 0;
}

int st_hash_fd(int fd, st_id *id, uint64_t *size)
{
	struct stat st;
	void *p;
	int rc, err = 0;

	if ((rc = st_sys_fstat(fd, &st)) < 0)
		return rc;
	if (st.st_size == 0) {
		st_id_hash("", 0, id);
		*size = 0;
		return 0;
	}
	p = st_sys_mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0, &err);
	if (!p)
		return err;
	st_sys_madvise(p, (size_t)st.st_size, MADV_SEQUENTIAL);
	st_id_hash(p, (size_t)st.st_size, id);
	st_sys_munmap(p, (size_t)st.st_size);
	*size = (uint64_t)st.st_size;
	return 0;
}

int st_blob_verify(struct st_store *s, const st_id *id)
{
	st_id got;
	uint64_t size;
	int fd, rc;

	if ((rc = st_blob_open(s, id, &fd)) < 0)
		return rc;
	rc = st_hash_fd(fd, &got, &size);
	st_sys_close(fd);
	if (rc < 0)
		return rc;
	return st_id_equal(&got, id) ? 0 : ST_ECORRUPT;
}

static bool is_hex2(const char *name)
{
	static const char hex[] = "0123456789abcdef";

	return name[0] && name[1] && !name[2] && strchr(hex, name[0]) && strchr(hex, name[1]);
}

int st_blob_foreach(struct st_store *s, st_blob_cb cb, void *ctx)
{
	DIR *top, *sub;
	struct dirent *e, *f;
	int rc;

	if ((rc = st_sys_opendirat(s->blobs_fd, ".", &top)) < 0)
		return rc;
	while ((e = readdir(top))) {
		if (!is_hex2(e->d_name))
			continue;
		if ((rc = st_sys_opendirat(s->blobs_fd, e->d_name, &sub)) < 0) {
			if (rc == -ENOENT || rc == -ENOTDIR)
				continue;
			goto out_close_top;
		}
		while ((f = readdir(sub))) {
			struct stat st;
			st_id id;

			if (st_id_parse(f->d_name, &id) < 0 || memcmp(f->d_name, e->d_name, 2) != 0)
				continue;
			if (st_sys_fstatat(dirfd(sub), f->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
				continue; /* deleted meanwhile, or not a file */
			rc = cb(&id, (uint64_t)st.st_size,
				(int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec, ctx);
			if (rc) {
				closedir(sub);
				goto out_close_top;
			}
		}
		closedir(sub);
	}
	rc = 0;
out_close_top:
	closedir(top);
	return rc;
}

int st_tmp_sweep(struct st_store *s, unsigned older_than_s, unsigned *removed)
{
	struct timespec now;
	struct dirent *e;
	unsigned n = 0;
	DIR *d;
	int rc;

	if (s->flags & ST_OPEN_RDONLY)
		return ST_EREADONLY;
	clock_gettime(CLOCK_REALTIME, &now);
	if ((rc = st_sys_opendirat(s->tmp_fd, ".", &d)) < 0)
		return rc;
	while ((e = readdir(d))) {
		struct stat st;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (st_sys_fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (now.tv_sec - st.st_mtim.tv_sec < (time_t)older_than_s)
			continue;
		/* Directories here are staging dirs of an interrupted export/import. */
		if (S_ISDIR(st.st_mode))
			rc = st_rm_tree(dirfd(d), e->d_name);
		else
			rc = st_sys_unlinkat(dirfd(d), e->d_name, 0);
		if (rc == 0)
			n++;
		else if (rc != -ENOENT) {
			closedir(d);
			return st_write_err(rc);
		}
	}
	closedir(d);
	if (removed)
		*removed = n;
	return 0;
}
