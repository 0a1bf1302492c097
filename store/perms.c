/* perms.c: who can read a store: the modes strata creates its files with, and the check for a store others can read. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "store/store_int.h"

/* The LMDB lock file: the one file group readers of a shared store write. */
#define LOCK_FILE "index/lock.mdb"

mode_t st_store_perm(const struct st_store *s, enum st_perm kind)
{
	switch (kind) {
	case ST_PERM_DIR: return s->shared ? 02750 : 0700;
	case ST_PERM_STAGING: return s->shared ? 02700 : 0700;
	case ST_PERM_RO: return s->shared ? 0440 : 0400;
	case ST_PERM_RW: return s->shared ? 0640 : 0600;
	case ST_PERM_LOCK: return s->shared ? 0660 : 0600;
	}
	return 0600;
}

bool st_store_shared(const struct st_store *s, gid_t *group)
{
	if (s->shared && group)
		*group = s->group;
	return s->shared;
}

int st_store_fchmod(const struct st_store *s, int fd, enum st_perm kind)
{
	return st_sys_fchmod(fd, st_store_perm(s, kind));
}

int st_store_mkdirat(const struct st_store *s, int dirfd, const char *name, enum st_perm kind)
{
	mode_t mode = st_store_perm(s, kind);
	int rc = st_sys_mkdirat(dirfd, name, mode & 0777), fd;

	if (rc < 0)
		return rc;
	/* The umask may have narrowed it (or, shared, the set-group-id bit
	 * mkdir ignores is wanted): set it exactly, on the directory this call
	 * made (O_NOFOLLOW: not on whatever a racing rename put there). */
	if ((fd = rc = st_sys_openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0)) >= 0) {
		rc = 0;
		if (s->shared)
			rc = st_sys_fchown(fd, (uid_t)-1, s->group);
		if (rc == 0)
			rc = st_sys_fchmod(fd, mode);
		/* Its failure fails the call too: every step of the seam that
		 * fails is reported (tests/snap: a fault at each step of a
		 * capture fails it). */
		int crc = st_sys_close(fd);
		if (rc == 0)
			rc = crc;
	}
	if (rc < 0)
		st_sys_unlinkat(dirfd, name, AT_REMOVEDIR);
	return rc;
}

/* The bits a path may not have in this store (docs/security.md). */
static mode_t excess_bits(const struct st_store *s, const char *rel, const struct stat *st)
{
	mode_t m = st->st_mode & 07777;

	if (!s->shared)
		return m & 077;
	if (st->st_gid != s->group)
		return m & 077;
	if (!strcmp(rel, LOCK_FILE))
		return m & 007;
	return m & 027;
}

struct walk {
	struct st_store *s;
	unsigned flags;
	int (*fn)(const struct st_exposed *e, void *ctx);
	void *ctx;
	uint64_t count;
	char path[4096];
};

/* chmod dirfd/name to mode, not following a symlink put there meanwhile. */
static int fix_mode(int dirfd, const char *name, bool dir, mode_t mode)
{
	int fd = st_sys_openat(dirfd, name, (dir ? O_DIRECTORY : 0) | O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0), rc;

	if (fd < 0)
		return fd;
	rc = st_sys_fchmod(fd, mode);
	st_sys_close(fd);
	return rc;
}

/* Check w->path (name in dirfd, stat st); recurse into directories. */
static int walk_entry(struct walk *w, int dirfd, const char *name, const struct stat *st, size_t plen);

static int walk_dir(struct walk *w, int parent, const char *name, size_t plen)
{
	struct dirent *e;
	DIR *d;
	int rc = st_sys_opendirat(parent, name, &d);

	if (rc < 0)
		return rc;
	while ((e = readdir(d))) {
		struct stat st;
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if ((rc = st_sys_fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW)) < 0) {
			if (rc == -ENOENT) /* removed meanwhile (gc, a put's temp file) */
				continue;
			break;
		}
		if ((w->flags & ST_PERM_CHECK_DIRS) && !S_ISDIR(st.st_mode))
			continue;
		int n = snprintf(w->path + plen, sizeof(w->path) - plen, "%s%s", plen ? "/" : "", e->d_name);
		if (n < 0 || (size_t)n >= sizeof(w->path) - plen) {
			rc = -ENAMETOOLONG;
			break;
		}
		if ((rc = walk_entry(w, dirfd(d), e->d_name, &st, plen + (size_t)n)) != 0)
			break;
	}
	closedir(d);
	w->path[plen] = '\0';
	return rc;
}

static int walk_entry(struct walk *w, int dirfd, const char *name, const struct stat *st, size_t plen)
{
	bool dir = S_ISDIR(st->st_mode);
	mode_t excess;
	int rc;

	if (!dir && !S_ISREG(st->st_mode))
		return 0; /* symlinks' modes mean nothing; strata makes nothing else */
	if ((excess = excess_bits(w->s, plen ? w->path : ".", st))) {
		struct st_exposed e = {
			.path = plen ? w->path : ".",
			.mode = st->st_mode & 07777,
			.want = st->st_mode & 07777 & ~excess,
			.dir = dir,
		};
		if ((w->flags & ST_PERM_CHECK_FIX) && (rc = fix_mode(dirfd, name, dir, e.want)) < 0)
			return rc;
		e.fixed = w->flags & ST_PERM_CHECK_FIX;
		w->count++;
		if ((rc = w->fn(&e, w->ctx)) != 0)
			return rc;
	}
	if (!dir)
		return 0;
	rc = walk_dir(w, dirfd, name, plen);
	/* A directory the caller may not read (a group member checking a
	 * shared store's tmp/) is not the caller's to check. */
	return rc == -EACCES && plen ? 0 : rc;
}

int st_store_perm_check(struct st_store *s, unsigned flags, int (*fn)(const struct st_exposed *e, void *ctx),
			void *ctx, uint64_t *count)
{
	struct walk w = { .s = s, .flags = flags, .fn = fn, .ctx = ctx };
	struct stat st;
	int rc;

	if ((rc = st_sys_fstatat(s->dirfd, "", &st, AT_EMPTY_PATH)) < 0)
		return rc;
	/* The store's directory through its path: an O_PATH descriptor can
	 * be neither read nor chmodded. */
	rc = walk_entry(&w, AT_FDCWD, s->path, &st, 0);
	if (count)
		*count = w.count;
	return rc;
}
