/* sys.h: not installed: shared by store, index, fs and vmm: the syscall seam for file and memory calls, with fault injection for tests. */
#ifndef STRATA_STORE_SYS_H
#define STRATA_STORE_SYS_H

#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/*
 * Every wrapper: retries EINTR, adds O_CLOEXEC where it opens, returns >= 0 on
 * success and -errno on failure (never sets errno for the caller to read).
 * Each call counts as one "step" for fault injection, before it reaches the
 * kernel.
 */

/*
 * Fault injection. st_sys_fault_set(n, err) makes the n-th counted call from
 * now (1-based) fail with -err without reaching the kernel; later calls run
 * normally. n == 0 disarms. st_sys_calls() returns calls counted since the
 * last st_sys_fault_set / st_sys_count_reset, so a test can run an operation
 * once to learn its step count, then make step i fail for every i.
 * Process-wide; tests run one at a time.
 */
void st_sys_fault_set(uint64_t n, int err);
void st_sys_count_reset(void);
uint64_t st_sys_calls(void);
/* True once the armed fault has fired. */
int st_sys_fault_fired(void);

/* Allocator seam (counted like a syscall; an injected fault returns NULL). */
void *st_sys_malloc(size_t size);
void *st_sys_calloc(size_t n, size_t size);
void *st_sys_realloc(void *p, size_t size);
char *st_sys_strdup(const char *s);
char *st_sys_strndup(const char *s, size_t n);
/* size bytes aligned to align (a power of two, a multiple of
 * sizeof(void *)), freed with free(); NULL on failure. */
void *st_sys_aligned_alloc(size_t align, size_t size);

int st_sys_openat(int dirfd, const char *path, int flags, mode_t mode);
/* Closes fd even on failure; returns -EIO (or the injected error) if the
 * kernel reported a write-back error. */
int st_sys_close(int fd);
/* Read up to len; returns bytes read (0 at EOF). */
ssize_t st_sys_read(int fd, void *buf, size_t len);
ssize_t st_sys_pread(int fd, void *buf, size_t len, off_t off);
/* Write all len bytes (loops on short writes); returns 0 or -errno. */
int st_sys_write_all(int fd, const void *buf, size_t len);
/* The same at offset off (pwrite; the file offset is not moved). */
int st_sys_pwrite_all(int fd, const void *buf, size_t len, off_t off);
/* Create (or truncate) dirfd/name with mode exactly (fchmod: the umask does
 * not narrow it), write buf, fsync and close it;
 * on any failure the file is removed. Built on the calls above, so each
 * step can be failed by fault injection. */
int st_sys_write_file_synced(int dirfd, const char *name, const void *buf, size_t len, mode_t mode);
int st_sys_fsync(int fd);
int st_sys_fdatasync(int fd);
int st_sys_fstat(int fd, struct stat *st);
int st_sys_fstatat(int dirfd, const char *path, struct stat *st, int flags);
int st_sys_fchmod(int fd, mode_t mode);
int st_sys_fchown(int fd, uid_t uid, gid_t gid);
/* Set a file's access and modification times to now. */
int st_sys_touchat(int dirfd, const char *path);
int st_sys_mkdirat(int dirfd, const char *path, mode_t mode);
int st_sys_unlinkat(int dirfd, const char *path, int flags);
int st_sys_linkat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, int flags);
int st_sys_renameat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath);
/* renameat2 with RENAME_NOREPLACE. */
int st_sys_renameat_noreplace(int olddirfd, const char *oldpath, int newdirfd, const char *newpath);
int st_sys_ftruncate(int fd, off_t len);
/* lseek; returns the new offset or -errno. */
off_t st_sys_lseek(int fd, off_t off, int whence);
/* madvise hint; failures are ignored by callers, so not counted. */
void st_sys_madvise(void *addr, size_t len, int advice);
/* madvise(MADV_DONTNEED) where the drop is needed (a reset's pages read
 * as their source again): counted, 0 or -errno. */
int st_sys_madvise_drop(void *addr, size_t len);
/* mprotect(2): -errno on failure. */
int st_sys_mprotect(void *addr, size_t len, int prot);
/* mmap; on failure returns NULL and *err = -errno. */
void *st_sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off, int *err);
int st_sys_munmap(void *addr, size_t len);
/* Copy len bytes from in_fd at in_off to out_fd's current offset: FICLONE
 * if both are whole files and the fs can, else copy_file_range, else
 * read/write. */
int st_sys_copy_range(int in_fd, int out_fd, uint64_t len);
/* True if a process with this pid exists (kill(pid, 0) is not ESRCH).
 * Not counted as a step. */
int st_sys_pid_alive(pid_t pid);
/* Open directory path (relative to dirfd) for readdir; caller closedir()s. */
int st_sys_opendirat(int dirfd, const char *path, DIR **out);

/* Calls for opening snapshot directories to map (store/snapopen.c) and for
 * the process backend's guest memory (vmm/proc.c), so the fault sweeps
 * cover restore from a directory on either backend. */
struct statfs;
/* fcntl(F_DUPFD_CLOEXEC): a new descriptor for fd's file. */
int st_sys_dup(int fd);
/* The same, numbered lowest or above. */
int st_sys_dup_above(int fd, int lowest);
/* fallocate(PUNCH_HOLE | KEEP_SIZE): [off, off + len) reads as zero again. */
int st_sys_punch_hole(int fd, off_t off, off_t len);
/* getxattr(2), or lgetxattr(2) with nofollow: the value's length. */
ssize_t st_sys_getxattr(const char *path, const char *name, void *buf, size_t size, int nofollow);
int st_sys_statfs(const char *path, struct statfs *out);
int st_sys_fstatfs(int fd, struct statfs *out);
/* memfd_create(2); MFD_CLOEXEC is added. */
int st_sys_memfd_create(const char *name, unsigned flags);
/* sendfile(2) from in_fd at *off to out_fd: bytes copied (0 at in_fd's end). */
ssize_t st_sys_sendfile(int out_fd, int in_fd, off_t *off, size_t count);
/* fcntl(F_ADD_SEALS). */
int st_sys_add_seals(int fd, int seals);
/* fcntl(F_SETFL) clearing O_NONBLOCK (a file opened so that a FIFO cannot block the open). */
int st_sys_set_blocking(int fd);
/* poll(2) of one descriptor: its revents, 0 on timeout. */
int st_sys_poll1(int fd, short events, int timeout_ms);

/* File helpers built on the seam (store/store.c), for every module. */
/* fsync a directory given as an O_PATH fd or by path relative to one
 * (its close's error too). */
int st_dir_fsync(int parent, const char *path);
/* Remove path (relative to parent) and everything under it: 0, or the
 * first error (what was removed before it stays removed). */
int st_rm_tree(int parent, const char *path);

#endif
