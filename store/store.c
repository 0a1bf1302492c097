/* store.c: creating and opening a store directory, its format file and sync policy. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/store_int.h"

#define FORMAT_FILE "format"
#define FORMAT_MAGIC "strata-store"
#define FORMAT_MAX 4096

int st_why(char *why, size_t whylen, int code, const char *fmt, ...)
{
	va_list ap;

	if (why && whylen) {
		va_start(ap, fmt);
		vsnprintf(why, whylen, fmt, ap);
		va_end(ap);
		for (char *p = why; *p; p++)
			if (*p == '\n' || *p == '\r')
				*p = ' ';
	}
	return code;
}

int st_write_err(int rc)
{
	if (rc == -EROFS || rc == -EACCES || rc == -EPERM)
		return ST_EREADONLY;
	return rc;
}

int st_dir_fsync(int dirfd, const char *path)
{
	int fd = st_sys_openat(dirfd, path, O_RDONLY | O_DIRECTORY, 0), rc;

	if (fd < 0)
		return fd;
	rc = st_sys_fsync(fd);
	int crc = st_sys_close(fd);
	return rc < 0 ? rc : crc;
}

bool st_is_zero(const void *buf, size_t len)
{
	const unsigned char *p = buf;

	/* Compare 64 bits at a time; pages are 4 KiB aligned in practice. */
	if (((uintptr_t)p & 7) == 0 && (len & 7) == 0) {
		const uint64_t *q = (const uint64_t *)buf;
		for (size_t i = 0; i < len / 8; i += 8) {
			uint64_t acc = 0;
			size_t end = i + 8 < len / 8 ? i + 8 : len / 8;
			for (size_t j = i; j < end; j++)
				acc |= q[j];
			if (acc)
				return false;
		}
		return true;
	}
	for (size_t i = 0; i < len; i++)
		if (p[i])
			return false;
	return true;
}

static const char *st_sync_name(enum st_sync sync)
{
	switch (sync) {
	case ST_SYNC_FULL: return "full";
	case ST_SYNC_NONE: return "none";
	default: return "default";
	}
}

int st_sync_parse(const char *name, enum st_sync *out)
{
	if (name && strcmp(name, "full") == 0)
		*out = ST_SYNC_FULL;
	else if (name && strcmp(name, "none") == 0)
		*out = ST_SYNC_NONE;
	else
		return -EINVAL;
	return 0;
}

/* Parse STORE/format: "strata-store <version>\nsync <policy>\n", then for a
 * shared store "shared <gid>\n", nothing else. */
static int format_parse(const char *text, enum st_sync *sync, bool *shared, gid_t *group)
{
	size_t ml = strlen(FORMAT_MAGIC);
	const char *p = text + ml + 1, *nl;
	char *end;
	char policy[16];
	unsigned long version, gid;

	if (strncmp(text, FORMAT_MAGIC " ", ml + 1) != 0)
		return ST_ENOTSTORE;
	if (*p < '0' || *p > '9')
		return ST_EFORMAT;
	errno = 0;
	version = strtoul(p, &end, 10);
	if (errno)
		return ST_EFORMAT;
	if (version != ST_STORE_VERSION)
		return ST_EVERSION;
	if (strncmp(end, "\nsync ", 6) != 0)
		return ST_EFORMAT;
	p = end + 6;
	nl = strchr(p, '\n');
	if (!nl || (size_t)(nl - p) >= sizeof(policy))
		return ST_EFORMAT;
	memcpy(policy, p, (size_t)(nl - p));
	policy[nl - p] = '\0';
	if (st_sync_parse(policy, sync) < 0)
		return ST_EFORMAT;
	*shared = false;
	if (nl[1] == '\0')
		return 0;
	/* A line older strata does not know: it refuses the store (ST_EFORMAT)
	 * rather than writing it with its own modes. */
	if (strncmp(nl + 1, "shared ", 7) != 0 || nl[8] < '0' || nl[8] > '9')
		return ST_EFORMAT;
	errno = 0;
	gid = strtoul(nl + 8, &end, 10);
	if (errno || gid >= (unsigned long)(gid_t)-1 || strcmp(end, "\n") != 0)
		return ST_EFORMAT;
	*shared = true;
	*group = (gid_t)gid;
	return 0;
}

static int format_read(int dirfd, enum st_sync *sync, bool *shared, gid_t *group)
{
	char buf[FORMAT_MAX + 1];
	int fd = st_sys_openat(dirfd, FORMAT_FILE, O_RDONLY, 0);
	ssize_t n;

	if (fd == -ENOENT)
		return ST_ENOTSTORE;
	if (fd < 0)
		return fd;
	n = st_sys_read(fd, buf, FORMAT_MAX);
	st_sys_close(fd);
	if (n < 0)
		return (int)n;
	buf[n] = '\0';
	return format_parse(buf, sync, shared, group);
}

/* Write STORE/format through a temp name so a crash never leaves half a
 * file. *placed says whether it is in place (a failed directory sync after
 * the rename is returned with the file there). */
static int format_write(int dirfd, enum st_sync sync, bool shared, gid_t group, bool *placed)
{
	char text[128];
	int len = snprintf(text, sizeof(text), FORMAT_MAGIC " %u\nsync %s\n", ST_STORE_VERSION, st_sync_name(sync));
	if (shared)
		len += snprintf(text + len, sizeof(text) - (size_t)len, "shared %lu\n", (unsigned long)group);
	int rc = st_sys_write_file_synced(dirfd, FORMAT_FILE ".tmp", text, (size_t)len, shared ? 0440 : 0400);

	*placed = false;
	if (rc == 0 && (rc = st_sys_renameat(dirfd, FORMAT_FILE ".tmp", dirfd, FORMAT_FILE)) < 0)
		st_sys_unlinkat(dirfd, FORMAT_FILE ".tmp", 0);
	if (rc < 0)
		return rc;
	*placed = true;
	return st_dir_fsync(dirfd, ".");
}

/* A directory of an existing store that it lost: made again with the mode
 * the store records. */
static int mkdir_ok(const struct st_store *s, int dirfd, const char *path, enum st_perm kind)
{
	int rc = st_store_mkdirat(s, dirfd, path, kind);

	return rc == -EEXIST ? 0 : rc;
}

/* What an init that stopped before its format file leaves: empty blobs/
 * and tmp/ (and a format.tmp, if killed while writing it). */
static bool init_leftover(int dirfd, const char *name)
{
	DIR *d;
	struct dirent *e;
	bool empty = true;

	if (!strcmp(name, FORMAT_FILE ".tmp"))
		return true;
	if ((strcmp(name, "blobs") && strcmp(name, "tmp")) || st_sys_opendirat(dirfd, name, &d) < 0)
		return false;
	while (empty && (e = readdir(d)))
		empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
	closedir(d);
	return empty;
}

/* True if the directory has no entries besides . and .. and what an
 * interrupted init left (init_leftover). */
static int dir_is_empty(int dirfd)
{
	DIR *d;
	struct dirent *e;
	int rc = st_sys_opendirat(dirfd, ".", &d);

	if (rc < 0)
		return rc;
	rc = 1;
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && !init_leftover(dirfd, e->d_name)) {
			rc = 0;
			break;
		}
	}
	closedir(d);
	return rc;
}

/* mkdir_ok that says whether it made the directory (*made). */
static int mkdir_made(const struct st_store *s, int dirfd, const char *path, enum st_perm kind, bool *made)
{
	int rc = st_store_mkdirat(s, dirfd, path, kind);

	*made = rc == 0;
	return rc == -EEXIST ? 0 : rc;
}

/* Give the new store's own directory its owner's (or its group's) mode:
 * init makes it a store, so a directory made beforehand (mkdir, another
 * tool) gets the mode too. */
static int store_dir_claim(const struct st_store *s, int dirfd)
{
	int rc = 0;

	if (s->shared && (rc = st_sys_fchown(dirfd, (uid_t)-1, s->group)) < 0)
		return rc;
	return st_store_fchmod(s, dirfd, ST_PERM_DIR);
}

int st_store_init(const char *dir, const struct st_store_opts *opts)
{
	enum st_sync sync = opts && opts->sync != ST_SYNC_DEFAULT ? opts->sync : ST_SYNC_FULL, existing;
	/* The modes to create with: those asked for, or for an existing store
	 * those it records. */
	struct st_store m = { .shared = opts && opts->shared, .group = opts && opts->shared ? opts->group : 0 },
			priv = { .shared = false };
	bool made_dir = false, made_blobs = false, made_tmp = false, placed = false;
	int rc, dirfd;

	if (sync != ST_SYNC_FULL && sync != ST_SYNC_NONE)
		return -EINVAL;
	/* Made private; store_dir_claim gives it its group once it is known
	 * not to be a store already. */
	if ((rc = mkdir_made(&priv, AT_FDCWD, dir, ST_PERM_DIR, &made_dir)) < 0)
		return st_write_err(rc);
	dirfd = st_sys_openat(AT_FDCWD, dir, O_RDONLY | O_DIRECTORY, 0);
	if (dirfd < 0) {
		rc = dirfd;
		goto out_rmdir;
	}
	rc = format_read(dirfd, &existing, &m.shared, &m.group);
	if (rc == ST_ENOTSTORE) {
		m.shared = opts && opts->shared;
		rc = dir_is_empty(dirfd);
		if (rc == 0)
			rc = ST_ENOTSTORE;
		if (rc < 0)
			goto out_close;
		/* Directories first, format file last: a store is a store only
		 * once it is complete. A failure before the format file is in
		 * place removes what this call made, so the directory is as it
		 * was; once it is, the store is complete and a failed sync is
		 * reported without undoing it (a retry returns 0). */
		if ((rc = store_dir_claim(&m, dirfd)) < 0) {
			/* EPERM from the chown: the caller is not in the group. */
			rc = rc == -EPERM && m.shared ? -EPERM : st_write_err(rc);
			goto out_close;
		}
		if ((rc = mkdir_made(&m, dirfd, "blobs", ST_PERM_DIR, &made_blobs)) < 0 ||
		    (rc = mkdir_made(&m, dirfd, "tmp", ST_PERM_STAGING, &made_tmp)) < 0 ||
		    (rc = format_write(dirfd, sync, m.shared, m.group, &placed)) < 0) {
			rc = st_write_err(rc);
			if (placed) {
				made_dir = false;
				goto out_close;
			}
			if (made_tmp)
				st_sys_unlinkat(dirfd, "tmp", AT_REMOVEDIR);
			if (made_blobs)
				st_sys_unlinkat(dirfd, "blobs", AT_REMOVEDIR);
			goto out_close;
		}
		made_dir = false;
		rc = st_dir_fsync(AT_FDCWD, dir);
	} else if (rc == 0) {
		/* Existing store: its modes are what it records, never changed
		 * here (fsck says how); asking for others is refused. */
		if (opts && opts->shared && (!m.shared || opts->group != m.group)) {
			rc = -EEXIST;
			goto out_close;
		}
		/* Make sure its directories exist (a copied store may have lost
		 * empty ones). */
		if ((rc = mkdir_ok(&m, dirfd, "blobs", ST_PERM_DIR)) < 0 ||
		    (rc = mkdir_ok(&m, dirfd, "tmp", ST_PERM_STAGING)) < 0)
			rc = st_write_err(rc);
	}
out_close:
	st_sys_close(dirfd);
out_rmdir:
	if (rc < 0 && made_dir)
		st_sys_unlinkat(AT_FDCWD, dir, AT_REMOVEDIR);
	return rc;
}

int st_store_open(const char *dir, unsigned flags, struct st_store **out)
{
	struct st_store *s = st_sys_calloc(1, sizeof(*s));
	char *abs;
	int rc;

	if (!s)
		return -ENOMEM;
	s->dirfd = s->blobs_fd = s->tmp_fd = -1;
	s->flags = flags;
	abs = realpath(dir, NULL);
	if (!abs) {
		rc = -errno;
		goto out_free;
	}
	s->path = abs;
	s->dirfd = st_sys_openat(AT_FDCWD, abs, O_PATH | O_DIRECTORY, 0);
	if (s->dirfd < 0) {
		rc = s->dirfd;
		goto out_free;
	}
	if ((rc = format_read(s->dirfd, &s->config_sync, &s->shared, &s->group)) < 0)
		goto out_free;
	s->sync = s->config_sync;
	s->blobs_fd = st_sys_openat(s->dirfd, "blobs", O_PATH | O_DIRECTORY, 0);
	if (s->blobs_fd < 0) {
		rc = s->blobs_fd == -ENOENT ? ST_ENOTSTORE : s->blobs_fd;
		goto out_free;
	}
	s->tmp_fd = st_sys_openat(s->dirfd, "tmp", O_PATH | O_DIRECTORY, 0);
	if (s->tmp_fd < 0 && !(flags & ST_OPEN_RDONLY)) {
		rc = s->tmp_fd == -ENOENT ? ST_ENOTSTORE : s->tmp_fd;
		goto out_free;
	}
	*out = s;
	return 0;
out_free:
	st_store_close(s);
	return rc;
}

void st_store_close(struct st_store *s)
{
	if (!s)
		return;
	if (s->tmp_fd >= 0)
		st_sys_close(s->tmp_fd);
	if (s->blobs_fd >= 0)
		st_sys_close(s->blobs_fd);
	if (s->dirfd >= 0)
		st_sys_close(s->dirfd);
	free(s->path);
	free(s);
}

void st_store_set_sync(struct st_store *s, enum st_sync sync)
{
	s->sync = sync == ST_SYNC_DEFAULT ? s->config_sync : sync;
}

enum st_sync st_store_sync(const struct st_store *s)
{
	return s->sync;
}

const char *st_store_path(const struct st_store *s)
{
	return s->path;
}

int st_store_dirfd(const struct st_store *s)
{
	return s->dirfd;
}

bool st_store_rdonly(const struct st_store *s)
{
	return s->flags & ST_OPEN_RDONLY;
}

int st_rm_tree(int parent, const char *path)
{
	struct dirent *e;
	DIR *d;
	int rc = st_sys_unlinkat(parent, path, 0);

	if (rc != -EISDIR && rc != -EPERM)
		return rc;
	if ((rc = st_sys_opendirat(parent, path, &d)) < 0)
		return rc;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if ((rc = st_rm_tree(dirfd(d), e->d_name)) < 0 && rc != -ENOENT) {
			closedir(d);
			return rc;
		}
	}
	closedir(d);
	return st_sys_unlinkat(parent, path, AT_REMOVEDIR);
}
