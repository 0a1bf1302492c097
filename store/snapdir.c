/* snapdir.c: the portable snapshot directory (manifest.json + layers/<id>): read, verify and export. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <dirent.h>
#include <libgen.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/store_int.h"

#define MANIFEST_FILE "manifest.json"
#define LAYERS_DIR "layers"

/* What a directory entry is, for a refusal that says so. */
static const char *kind_of(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFIFO: return "a FIFO";
	case S_IFLNK: return "a symbolic link";
	case S_IFDIR: return "a directory";
	case S_IFCHR: return "a character device";
	case S_IFBLK: return "a block device";
	case S_IFSOCK: return "a socket";
	default: return "not a file";
	}
}

/*
 * Open name (in dirfd) to read as a regular file, never blocking and never
 * following a link. A snapshot directory comes from anyone: `tar x` makes
 * FIFOs and device nodes, and an open(2) of a FIFO waits for a writer
 * forever. The entry is looked at first, so a device node or FIFO is not
 * opened at all; the open is O_NOFOLLOW | O_NONBLOCK, so an entry swapped
 * for one in between cannot block it either, and the descriptor is checked
 * again, since it is what is read. Returns the descriptor (blocking again);
 * -ENOENT; notreg (the caller's code) with why "<shown>: not a regular file
 * (a FIFO)"; other -errno.
 */
static int open_regular(int dirfd, const char *name, const char *shown, int notreg, char *why, size_t whylen)
{
	struct stat st;
	int fd, rc;

	if ((rc = st_sys_fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW)) < 0)
		return rc == -ENOENT ? rc : st_why(why, whylen, rc, "%s: %s", shown, st_strerror(rc));
	if (!S_ISREG(st.st_mode))
		return st_why(why, whylen, notreg, "%s: not a regular file (%s)", shown, kind_of(st.st_mode));
	fd = st_sys_openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
	if (fd == -ELOOP)
		return st_why(why, whylen, notreg, "%s: not a regular file (a symbolic link)", shown);
	if (fd < 0)
		return fd == -ENOENT ? fd : st_why(why, whylen, fd, "%s: %s", shown, st_strerror(fd));
	if ((rc = st_sys_fstat(fd, &st)) < 0 || (S_ISREG(st.st_mode) && (rc = st_sys_set_blocking(fd)) < 0)) {
		st_why(why, whylen, rc, "%s: %s", shown, st_strerror(rc));
		goto out_close;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = st_why(why, whylen, notreg, "%s: not a regular file (%s)", shown, kind_of(st.st_mode));
		goto out_close;
	}
	return fd;
out_close:
	st_sys_close(fd);
	return rc;
}

/*
 * The snapshot directory dir, and its layers/ in it. dir itself is the path
 * the user named, so it is followed like any path given on a command line
 * (a symlink to a snapshot works); nothing inside it is: a layers/ that is
 * a symbolic link is refused (ST_ELAYOUT), as is any non-directory there.
 * *lfd is -1 where there is no layers/ (-ENOENT is then each layer's
 * answer). O_PATH descriptors: nothing is read through them.
 */
static int open_dirs(const char *dir, int *dfd, int *lfd, char *why, size_t whylen)
{
	struct stat st;
	int rc;

	*dfd = st_sys_openat(AT_FDCWD, dir, O_PATH | O_DIRECTORY, 0);
	if (*dfd < 0)
		return st_why(why, whylen, *dfd, "cannot open snapshot directory: %s", st_strerror(*dfd));
	if (!lfd)
		return 0;
	*lfd = st_sys_openat(*dfd, LAYERS_DIR, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0);
	if (*lfd >= 0 || *lfd == -ENOENT)
		return 0;
	rc = *lfd;
	if ((rc == -ENOTDIR || rc == -ELOOP) && st_sys_fstatat(*dfd, LAYERS_DIR, &st, AT_SYMLINK_NOFOLLOW) == 0)
		rc = st_why(why, whylen, ST_ELAYOUT, LAYERS_DIR ": not a directory (%s)", kind_of(st.st_mode));
	else
		rc = st_why(why, whylen, rc, LAYERS_DIR ": %s", st_strerror(rc));
	st_sys_close(*dfd);
	return rc;
}

/* Read a whole small file into a NUL-terminated malloc'd buffer. */
static int read_file(int dirfd, const char *path, size_t max, char **out, size_t *len, char *why, size_t whylen)
{
	struct stat st;
	char *buf;
	size_t got = 0;
	int fd, rc;

	fd = open_regular(dirfd, path, path, ST_EFORMAT, why, whylen);
	if (fd == -ENOENT)
		return st_why(why, whylen, fd, "cannot open %s: %s", path, st_strerror(fd));
	if (fd < 0)
		return fd;
	if ((rc = st_sys_fstat(fd, &st)) < 0)
		goto out_close;
	if ((uint64_t)st.st_size > max) {
		rc = st_why(why, whylen, ST_EFORMAT, "%s is %lld bytes, more than the limit of %zu", path,
			    (long long)st.st_size, max);
		goto out_close;
	}
	buf = st_sys_malloc((size_t)st.st_size + 1);
	if (!buf) {
		rc = -ENOMEM;
		goto out_close;
	}
	/* The file may change size under us; read to EOF within the limit. */
	for (;;) {
		ssize_t n = st_sys_read(fd, buf + got, (size_t)st.st_size - got);
		if (n < 0) {
			free(buf);
			rc = (int)n;
			goto out_close;
		}
		if (n == 0 || got + (size_t)n == (size_t)st.st_size) {
			got += (size_t)n;
			break;
		}
		got += (size_t)n;
	}
	buf[got] = '\0';
	*out = buf;
	*len = got;
	rc = 0;
out_close:
	st_sys_close(fd);
	return rc;
}

int st_snapdir_manifest_text(const char *dir, char **text, size_t *len, char *why, size_t whylen)
{
	int dfd, rc;

	if ((rc = open_dirs(dir, &dfd, NULL, why, whylen)) < 0)
		return rc;
	rc = read_file(dfd, MANIFEST_FILE, ST_MANIFEST_MAX_BYTES, text, len, why, whylen);
	st_sys_close(dfd);
	return rc;
}

int st_snapdir_read(const char *dir, struct st_manifest **out, char *why, size_t whylen)
{
	char *text = NULL;
	size_t len = 0;
	int rc = st_snapdir_manifest_text(dir, &text, &len, why, whylen);

	if (rc < 0)
		return rc;
	if (memchr(text, '\0', len))
		rc = st_why(why, whylen, ST_EFORMAT, "manifest.json contains a NUL byte");
	else
		rc = st_manifest_parse(text, len, out, why, whylen);
	free(text);
	return rc;
}

static void layer_relpath(const st_id *id, char out[sizeof(LAYERS_DIR) + ST_ID_HEX_LEN + 1])
{
	memcpy(out, LAYERS_DIR "/", sizeof(LAYERS_DIR));
	st_id_format(id, out + sizeof(LAYERS_DIR));
}

/* Open layers/<id> in lfd (-1: there is no layers/) as open_regular does. */
static int layer_open_at(int lfd, const st_id *id, char *why, size_t whylen)
{
	char rel[sizeof(LAYERS_DIR) + ST_ID_HEX_LEN + 1];

	layer_relpath(id, rel);
	if (lfd < 0)
		return -ENOENT;
	return open_regular(lfd, rel + sizeof(LAYERS_DIR), rel, ST_ELAYOUT, why, whylen);
}

int st_snapdir_layer_open_why(const char *dir, const st_id *id, int *fd_out, char *why, size_t whylen)
{
	int dfd, lfd = -1, fd;

	if ((fd = open_dirs(dir, &dfd, &lfd, why, whylen)) < 0)
		return fd;
	fd = layer_open_at(lfd, id, why, whylen);
	if (lfd >= 0)
		st_sys_close(lfd);
	st_sys_close(dfd);
	if (fd < 0)
		return fd;
	*fd_out = fd;
	return 0;
}

int st_snapdir_layer_open(const char *dir, const st_id *id, int *fd_out)
{
	return st_snapdir_layer_open_why(dir, id, fd_out, NULL, 0);
}

/* Check one open layer file: size, then content. */
static int layer_check(int fd, const struct st_layer_ref *l, char *why, size_t whylen)
{
	char hex[ST_ID_HEX_LEN + 1], got_hex[ST_ID_HEX_LEN + 1];
	uint64_t size, want = l->pages * ST_PAGE_SIZE;
	struct stat st;
	st_id got;
	int rc;

	st_id_format(&l->id, hex);
	if ((rc = st_sys_fstat(fd, &st)) < 0)
		return st_why(why, whylen, rc, "layer %s: %s", hex, st_strerror(rc));
	if (!S_ISREG(st.st_mode))
		return st_why(why, whylen, ST_ELAYOUT, "layer %s is not a regular file", hex);
	if ((uint64_t)st.st_size != want)
		return st_why(why, whylen, ST_ELAYOUT, "layer %s is too %s: %lld bytes, the manifest says %" PRIu64 " pages (%" PRIu64 " bytes)",
			      hex, (uint64_t)st.st_size < want ? "short" : "long", (long long)st.st_size, l->pages, want);
	if ((rc = st_hash_fd(fd, &got, &size)) < 0)
		return st_why(why, whylen, rc, "layer %s: %s", hex, st_strerror(rc));
	if (size != want)
		return st_why(why, whylen, ST_ELAYOUT, "layer %s changed size while being read", hex);
	if (!st_id_equal(&got, &l->id)) {
		st_id_format(&got, got_hex);
		return st_why(why, whylen, ST_ECORRUPT, "layer %s: content hashes to %s", hex, got_hex);
	}
	return 0;
}

int st_snapdir_verify(const char *dir, const struct st_manifest *m, char *why, size_t whylen)
{
	int dfd, lfd = -1, rc;

	if ((rc = open_dirs(dir, &dfd, &lfd, why, whylen)) < 0)
		return rc;
	for (uint32_t i = 0; i < m->nlayers && rc == 0; i++) {
		char hex[ST_ID_HEX_LEN + 1];
		int fd = layer_open_at(lfd, &m->layers[i].id, why, whylen);

		if (fd < 0) {
			st_id_format(&m->layers[i].id, hex);
			rc = fd == -ENOENT ? st_why(why, whylen, fd, "layer %s: missing", hex) : fd;
			break;
		}
		rc = layer_check(fd, &m->layers[i], why, whylen);
		st_sys_close(fd);
	}
	if (lfd >= 0)
		st_sys_close(lfd);
	st_sys_close(dfd);
	return rc;
}

/* Finish a file written during export: durable per policy, read-only, closed. */
static int finish_file(struct st_store *s, int fd)
{
	int rc = 0;

	if (s->sync == ST_SYNC_FULL)
		rc = st_sys_fsync(fd);
	if (rc == 0)
		rc = st_store_fchmod(s, fd, ST_PERM_RO);
	int crc = st_sys_close(fd);
	return rc < 0 ? rc : crc;
}

static int export_layer(struct st_store *s, int layers_fd, const struct st_layer_ref *l, char *why, size_t whylen)
{
	char hex[ST_ID_HEX_LEN + 1];
	uint64_t want = l->pages * ST_PAGE_SIZE, size;
	int in, out, rc;

	st_id_format(&l->id, hex);
	if ((rc = st_blob_open(s, &l->id, &in)) < 0)
		return st_why(why, whylen, rc, "layer %s: %s in the store", hex, rc == -ENOENT ? "missing" : st_strerror(rc));
	struct stat st;
	if ((rc = st_sys_fstat(in, &st)) < 0)
		goto out_close_in;
	size = (uint64_t)st.st_size;
	if (size != want) {
		rc = st_why(why, whylen, ST_ECORRUPT, "layer %s: store blob is %" PRIu64 " bytes, the manifest says %" PRIu64,
			    hex, size, want);
		goto out_close_in;
	}
	out = st_sys_openat(layers_fd, hex, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (out < 0) {
		rc = out;
		goto out_close_in;
	}
	rc = st_sys_copy_range(in, out, want);
	if (rc < 0) {
		st_sys_close(out);
		goto out_close_in;
	}
	rc = finish_file(s, out);
out_close_in:
	st_sys_close(in);
	return rc;
}

/* Remove ".BASE.strata-export.PID.N" directories whose process is gone
 * (left by a kill -9 during an earlier export to the same name). */
static void sweep_dead_exports(int pfd, const char *base)
{
	char prefix[NAME_MAX + 1];
	struct dirent *e;
	DIR *d;
	int plen = snprintf(prefix, sizeof(prefix), ".%.200s.strata-export.", base);

	if (st_sys_opendirat(pfd, ".", &d) < 0)
		return;
	while ((e = readdir(d))) {
		char *end;
		long pid;

		if (strncmp(e->d_name, prefix, (size_t)plen) != 0)
			continue;
		pid = strtol(e->d_name + plen, &end, 10);
		if (end == e->d_name + plen || *end != '.' || pid <= 0 || pid == (long)getpid() ||
		    st_sys_pid_alive((pid_t)pid))
			continue;
		st_rm_tree(dirfd(d), e->d_name);
	}
	closedir(d);
}

int st_snapdir_export(struct st_store *s, const struct st_manifest *m, const char *dir, char *why, size_t whylen)
{
	static _Atomic unsigned counter;
	char *dcopy = NULL, *bcopy = NULL, *text = NULL, tmpname[NAME_MAX + 1];
	const char *parent, *base;
	int pfd = -1, tfd = -1, lfd = -1, fd, rc;
	size_t len;
	struct stat st;

	if (why && whylen)
		why[0] = '\0';
	if ((rc = st_manifest_encode(m, &text, &len, why, whylen)) < 0)
		goto out_free;
	dcopy = st_sys_strdup(dir);
	bcopy = st_sys_strdup(dir);
	if (!dcopy || !bcopy) {
		rc = -ENOMEM;
		goto out_free;
	}
	parent = dirname(dcopy);
	base = basename(bcopy);
	if (!*base || !strcmp(base, ".") || !strcmp(base, "..") || !strcmp(base, "/")) {
		rc = st_why(why, whylen, -EINVAL, "'%s' is not a usable directory name", dir);
		goto out_free;
	}
	pfd = st_sys_openat(AT_FDCWD, parent, O_PATH | O_DIRECTORY, 0);
	if (pfd < 0) {
		rc = st_why(why, whylen, pfd, "cannot open %s: %s", parent, st_strerror(pfd));
		goto out_free;
	}
	if ((rc = st_sys_fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW)) == 0) {
		rc = st_why(why, whylen, -EEXIST, "%s already exists", dir);
		goto out_close;
	}
	sweep_dead_exports(pfd, base);
	snprintf(tmpname, sizeof(tmpname), ".%.200s.strata-export.%ld.%u", base, (long)getpid(),
		 atomic_fetch_add(&counter, 1));
	/* The export holds the snapshot's memory: as private as the store
	 * (and in its group when shared), whatever the parent directory. */
	if ((rc = st_store_mkdirat(s, pfd, tmpname, ST_PERM_DIR)) < 0) {
		rc = st_why(why, whylen, rc, "cannot create a directory in %s: %s", parent, st_strerror(rc));
		goto out_close;
	}
	/* From here on, failures remove the temp tree. */
	if ((tfd = st_sys_openat(pfd, tmpname, O_PATH | O_DIRECTORY, 0)) < 0) {
		rc = tfd;
		goto out_rm_tmp;
	}
	if ((rc = st_store_mkdirat(s, tfd, LAYERS_DIR, ST_PERM_DIR)) < 0)
		goto out_rm_tmp;
	if ((lfd = st_sys_openat(tfd, LAYERS_DIR, O_PATH | O_DIRECTORY, 0)) < 0) {
		rc = lfd;
		goto out_rm_tmp;
	}
	for (uint32_t i = 0; i < m->nlayers; i++)
		if ((rc = export_layer(s, lfd, &m->layers[i], why, whylen)) < 0)
			goto out_rm_tmp;
	if ((fd = st_sys_openat(tfd, MANIFEST_FILE, O_WRONLY | O_CREAT | O_EXCL, 0600)) < 0) {
		rc = fd;
		goto out_rm_tmp;
	}
	text[len] = '\n'; /* replaces the NUL: the file is the encoding plus a newline */
	rc = st_sys_write_all(fd, text, len + 1);
	if (rc < 0) {
		st_sys_close(fd);
		goto out_rm_tmp;
	}
	if ((rc = finish_file(s, fd)) < 0)
		goto out_rm_tmp;
	if (s->sync == ST_SYNC_FULL &&
	    ((rc = st_dir_fsync(lfd, ".")) < 0 || (rc = st_dir_fsync(tfd, ".")) < 0))
		goto out_rm_tmp;
	if ((rc = st_sys_renameat_noreplace(pfd, tmpname, pfd, base)) < 0)
		goto out_rm_tmp;
	if (s->sync == ST_SYNC_FULL && (rc = st_dir_fsync(pfd, ".")) < 0) {
		/* The directory is complete and in place; only its durability
		 * is in doubt. Report it without removing it. */
		rc = st_why(why, whylen, rc, "exported, but syncing %s failed: %s", parent, st_strerror(rc));
	}
	goto out_close;
out_rm_tmp:
	st_rm_tree(pfd, tmpname);
out_close:
	if (lfd >= 0)
		st_sys_close(lfd);
	if (tfd >= 0)
		st_sys_close(tfd);
	st_sys_close(pfd);
out_free:
	if (rc < 0 && why && whylen && !why[0])
		st_why(why, whylen, rc, "export failed: %s", st_strerror(rc));
	free(dcopy);
	free(bcopy);
	free(text);
	return rc;
}
