/* sys.c: the only file in store/ that issues syscalls, and the seam fs and vmm use; each call is a countable, fault-injectable step. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "store/sys.h"

/* Fault-injection state. Atomics so threaded callers (the FUSE daemon) stay
 * well-defined; tests drive it from one thread. */
static _Atomic uint64_t sys_calls;
static _Atomic uint64_t sys_fault_at;
static _Atomic int sys_fault_err;
static _Atomic int sys_fault_hit;

void st_sys_fault_set(uint64_t n, int err)
{
	atomic_store(&sys_calls, 0);
	atomic_store(&sys_fault_hit, 0);
	atomic_store(&sys_fault_err, err > 0 ? err : -err);
	atomic_store(&sys_fault_at, n);
}

void st_sys_count_reset(void)
{
	atomic_store(&sys_calls, 0);
}

uint64_t st_sys_calls(void)
{
	return atomic_load(&sys_calls);
}

int st_sys_fault_fired(void)
{
	return atomic_load(&sys_fault_hit);
}

/* Count one step; returns -err if this is the step armed to fail. */
static int step(void)
{
	uint64_t n = atomic_fetch_add(&sys_calls, 1) + 1;
	uint64_t at = atomic_load(&sys_fault_at);

	if (at && n == at) {
		atomic_store(&sys_fault_hit, 1);
		return -atomic_load(&sys_fault_err);
	}
	return 0;
}

void *st_sys_malloc(size_t size)
{
	if (step() < 0)
		return NULL;
	return malloc(size);
}

void *st_sys_calloc(size_t n, size_t size)
{
	if (step() < 0)
		return NULL;
	return calloc(n, size);
}

void *st_sys_realloc(void *p, size_t size)
{
	if (step() < 0)
		return NULL;
	return realloc(p, size);
}

char *st_sys_strdup(const char *s)
{
	if (step() < 0)
		return NULL;
	return strdup(s);
}

char *st_sys_strndup(const char *s, size_t n)
{
	if (step() < 0)
		return NULL;
	return strndup(s, n);
}

void *st_sys_aligned_alloc(size_t align, size_t size)
{
	void *p;

	if (step() < 0)
		return NULL;
	return posix_memalign(&p, align, size) == 0 ? p : NULL;
}

int st_sys_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	int rc = step(), fd;

	if (rc < 0)
		return rc;
	do
		fd = openat(dirfd, path, flags | O_CLOEXEC, mode);
	while (fd < 0 && errno == EINTR);
	return fd < 0 ? -errno : fd;
}

int st_sys_close(int fd)
{
	int rc = step();

	/* Close regardless of an injected fault: the caller must not retry. */
	if (close(fd) < 0 && errno != EINTR && rc == 0)
		rc = -errno;
	return rc;
}

ssize_t st_sys_read(int fd, void *buf, size_t len)
{
	int rc = step();
	ssize_t n;

	if (rc < 0)
		return rc;
	do
		n = read(fd, buf, len);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

ssize_t st_sys_pread(int fd, void *buf, size_t len, off_t off)
{
	int rc = step();
	ssize_t n;

	if (rc < 0)
		return rc;
	do
		n = pread(fd, buf, len, off);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

/* Writes all of buf: at off when off >= 0 (pwrite), else at the file
 * offset (write); a short write goes on, a write of nothing is -EIO. */
static int write_all_at(int fd, const char *p, size_t len, off_t off)
{
	int rc = step();

	if (rc < 0)
		return rc;
	while (len > 0) {
		ssize_t n = off < 0 ? write(fd, p, len) : pwrite(fd, p, len, off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
		if (off >= 0)
			off += n;
	}
	return 0;
}

int st_sys_write_all(int fd, const void *buf, size_t len)
{
	return write_all_at(fd, buf, len, -1);
}

int st_sys_pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
	if (off < 0)
		return -EINVAL;
	return write_all_at(fd, buf, len, off);
}

int st_sys_write_file_synced(int dirfd, const char *name, const void *buf, size_t len, mode_t mode)
{
	int fd = st_sys_openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC, mode);
	int rc, crc;

	if (fd < 0)
		return fd;
	rc = st_sys_fchmod(fd, mode);
	if (rc == 0)
		rc = st_sys_write_all(fd, buf, len);
	if (rc == 0)
		rc = st_sys_fsync(fd);
	crc = st_sys_close(fd);
	if (rc == 0)
		rc = crc;
	if (rc < 0)
		st_sys_unlinkat(dirfd, name, 0);
	return rc;
}

int st_sys_fsync(int fd)
{
	int rc = step();

	if (rc < 0)
		return rc;
	while (fsync(fd) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	return 0;
}

int st_sys_fdatasync(int fd)
{
	int rc = step();

	if (rc < 0)
		return rc;
	while (fdatasync(fd) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	return 0;
}

int st_sys_fstat(int fd, struct stat *st)
{
	int rc = step();

	if (rc < 0)
		return rc;
	return fstat(fd, st) < 0 ? -errno : 0;
}

int st_sys_fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
	int rc = step();

	if (rc < 0)
		return rc;
	return fstatat(dirfd, path, st, flags) < 0 ? -errno : 0;
}

int st_sys_fchmod(int fd, mode_t mode)
{
	int rc = step();

	if (rc < 0)
		return rc;
	return fchmod(fd, mode) < 0 ? -errno : 0;
}

int st_sys_fchown(int fd, uid_t uid, gid_t gid)
{
	int rc = step();

	if (rc < 0)
		return rc;
	return fchown(fd, uid, gid) < 0 ? -errno : 0;
}

int st_sys_touchat(int dirfd, const char *path)
{
	int rc = step();

	if (rc < 0)
		return rc;
	return utimensat(dirfd, path, NULL, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

int st_sys_mkdirat(int dirfd, const char *path, mode_t mode)
{
	int rc = step();

	if (rc < 0)
		return rc;
	return mkdirat(dirfd, path, mode) < 0 ? -errno : 0;
}

int st_sys_unlinkat(int dirfd, const char *path, int flags)
{
	int rc = step();

	if (rc < 0)
		return rc;
	return unlinkat(dirfd, path, flags) < 0 ? -errno : 0;
}

int st_sys_linkat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, int flags)
{
	int rc = step();

	if (rc < 0)
		return rc;
	return linkat(olddirfd, oldpath, newdirfd, newpath, flags) < 0 ? -errno : 0;
}

int st_sys_renameat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath)
{
	int rc = step();

	if (rc < 0)
		return rc;
	return renameat(olddirfd, oldpath, newdirfd, newpath) < 0 ? -errno : 0;
}

int st_sys_renameat_noreplace(int olddirfd, const char *oldpath, int newdirfd, const char *newpath)
{
	int rc = step();

	if (rc < 0)
		return rc;
	return renameat2(olddirfd, oldpath, newdirfd, newpath, RENAME_NOREPLACE) < 0 ? -errno : 0;
}

int st_sys_ftruncate(int fd, off_t len)
{
	int rc = step();

	if (rc < 0)
		return rc;
	while (ftruncate(fd, len) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	return 0;
}

int st_sys_madvise_drop(void *addr, size_t len)
{
	int rc = step();

	if (rc < 0)
		return rc;
	return madvise(addr, len, MADV_DONTNEED) < 0 ? -errno : 0;
}

int st_sys_mprotect(void *addr, size_t len, int prot)
{
	int rc = step();

	if (rc < 0)
		return rc;
	return mprotect(addr, len, prot) < 0 ? -errno : 0;
}

void *st_sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off, int *err)
{
	int rc = step();
	void *p;

	if (rc < 0) {
		*err = rc;
		return NULL;
	}
	p = mmap(addr, len, prot, flags, fd, off);
	if (p == MAP_FAILED) {
		*err = -errno;
		return NULL;
	}
	return p;
}

off_t st_sys_lseek(int fd, off_t off, int whence)
{
	int rc = step();
	off_t r;

	if (rc < 0)
		return rc;
	r = lseek(fd, off, whence);
	return r < 0 ? -errno : r;
}

void st_sys_madvise(void *addr, size_t len, int advice)
{
	(void)madvise(addr, len, advice);
}

int st_sys_munmap(void *addr, size_t len)
{
	return munmap(addr, len) < 0 ? -errno : 0;
}

/* Fallback copy through a buffer when neither cloning nor copy_file_range work. */
static int copy_by_read(int in_fd, int out_fd, uint64_t len)
{
	enum { BUF = 1 << 20 };
	char *buf = malloc(BUF);
	int rc = 0;

	if (!buf)
		return -ENOMEM;
	while (len > 0) {
		ssize_t n = read(in_fd, buf, len < BUF ? (size_t)len : BUF);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : -EIO; /* EOF before len: the source shrank */
			break;
		}
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(out_fd, buf + off, (size_t)(n - off));
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				rc = w < 0 ? -errno : -EIO;
				goto out_free;
			}
			off += w;
		}
		len -= (uint64_t)n;
	}
out_free:
	free(buf);
	return rc;
}

int st_sys_copy_range(int in_fd, int out_fd, uint64_t len)
{
	int rc = step();

	if (rc < 0)
		return rc;
	/* A clone shares extents: instant, and no second copy on disk. */
	if (ioctl(out_fd, FICLONE, in_fd) == 0) {
		if (lseek(out_fd, (off_t)len, SEEK_SET) < 0 || lseek(in_fd, (off_t)len, SEEK_CUR) < 0)
			return -errno;
		return 0;
	}
	while (len > 0) {
		ssize_t n = copy_file_range(in_fd, NULL, out_fd, NULL, len, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EXDEV || errno == EINVAL || errno == EOPNOTSUPP || errno == ENOSYS)
				return copy_by_read(in_fd, out_fd, len);
			return -errno;
		}
		if (n == 0)
			return -EIO;
		len -= (uint64_t)n;
	}
	return 0;
}

int st_sys_opendirat(int dirfd, const char *path, DIR **out)
{
	int fd = st_sys_openat(dirfd, path, O_RDONLY | O_DIRECTORY, 0);
	DIR *d;

	if (fd < 0)
		return fd;
	d = fdopendir(fd);
	if (!d) {
		int rc = -errno;
		close(fd);
		return rc;
	}
	*out = d;
	return 0;
}

int st_sys_pid_alive(pid_t pid)
{
	return pid > 0 && (kill(pid, 0) == 0 || errno != ESRCH);
}

int st_sys_dup(int fd)
{
	return st_sys_dup_above(fd, 0);
}

int st_sys_dup_above(int fd, int lowest)
{
	int rc = step(), nfd;

	if (rc < 0)
		return rc;
	nfd = fcntl(fd, F_DUPFD_CLOEXEC, lowest);
	return nfd < 0 ? -errno : nfd;
}

int st_sys_punch_hole(int fd, off_t off, off_t len)
{
	int rc = step();

	if (rc < 0)
		return rc;
	while (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	return 0;
}

ssize_t st_sys_getxattr(const char *path, const char *name, void *buf, size_t size, int nofollow)
{
	int rc = step();
	ssize_t n;

	if (rc < 0)
		return rc;
	do
		n = nofollow ? lgetxattr(path, name, buf, size) : getxattr(path, name, buf, size);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

int st_sys_fstatfs(int fd, struct statfs *out)
{
	int rc = step();

	if (rc < 0)
		return rc;
	return fstatfs(fd, out) < 0 ? -errno : 0;
}

int st_sys_statfs(const char *path, struct statfs *out)
{
	int rc = step();

	if (rc < 0)
		return rc;
	return statfs(path, out) < 0 ? -errno : 0;
}

int st_sys_memfd_create(const char *name, unsigned flags)
{
	int rc = step(), fd;

	if (rc < 0)
		return rc;
	fd = memfd_create(name, flags | MFD_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

ssize_t st_sys_sendfile(int out_fd, int in_fd, off_t *off, size_t count)
{
	int rc = step();
	ssize_t n;

	if (rc < 0)
		return rc;
	do
		n = sendfile(out_fd, in_fd, off, count);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

int st_sys_add_seals(int fd, int seals)
{
	int rc = step();

	if (rc < 0)
		return rc;
	return fcntl(fd, F_ADD_SEALS, seals) < 0 ? -errno : 0;
}

int st_sys_set_blocking(int fd)
{
	int rc = step(), fl;

	if (rc < 0)
		return rc;
	if ((fl = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

int st_sys_poll1(int fd, short events, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = events };
	int rc = step(), n;

	if (rc < 0)
		return rc;
	do
		n = poll(&p, 1, timeout_ms);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return n == 0 ? 0 : p.revents;
}
