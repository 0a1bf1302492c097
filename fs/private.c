/* private.c: a store served for this process on a private, detached FUSE mount by a helper process the library forks (lazy layers for the VMM, docs/lazy.md). */
#define FUSE_USE_VERSION 35
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <linux/close_range.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fs/fs_int.h"
#include "fs/ops.h"
#include "index/dist/dist.h"
#include "index/index.h"
#include "store/mountabi.h"
#include "store/sys.h"

/* The last reasons kept (refused chunks, unreachable registries): a run
 * that fails on one page meets it a few times (the kernel retries). */
#define WHY_SLOTS 8
#define WHY_LEN 1024
_Static_assert(FS_PRIVATE_WHY_SIZE == WHY_SLOTS * WHY_LEN + 1, "fs.h's size holds every slot and its newline");

/*
 * What the helper and the caller share (a MAP_SHARED anonymous page set,
 * made before the fork): the reasons. The helper's serving threads write
 * them under the helper's why_lock inside an odd seq; the caller reads
 * them by seq alone, without a lock: fs_private_why may run in a signal
 * handler of a thread that faulted.
 */
struct why_ring {
	_Atomic unsigned seq;   /* odd while a writer fills a slot */
	_Atomic unsigned count; /* reasons recorded in all (the last WHY_SLOTS kept) */
	char slot[WHY_SLOTS][WHY_LEN];
};

/*
 * Locks: `lock` orders start, stop and free in the caller (held while the
 * helper starts or is stopped). In the helper (its own copy of the
 * struct), why_lock orders the writers of the ring.
 */
struct fs_private {
	struct st_store *store; /* fixed: the caller's (the helper opens its own) */
	char *store_path;       /* fixed */
	unsigned nthreads;      /* fixed */
	void (*user_log)(void *ctx, int prio, const char *msg); /* fixed */
	void *user_log_ctx;                                     /* fixed */
	struct fs_config cfg;   /* fixed: what struct fs reads (log: private_log) */
	struct why_ring *why;   /* fixed: shared with every helper this handle starts */
	pthread_mutex_t lock;
	bool started;           /* protected by lock */
	pid_t pid;              /* protected by lock: the helper */
	int sock;               /* protected by lock: the caller's end of the helper's socket */
	_Atomic int root;       /* written under lock, read by openers: O_PATH root of the mount, or -1 */
	/* The helper's own (meaningful in the helper process only). */
	pthread_mutex_t why_lock;
	struct fuse_session *se;
	struct fs fs;
	int stopfd; /* the helper's end of the socket: readable (EOF) once the caller stops or exits */
};

/* Keep an error line as a reason (unless it repeats the last one) and
 * pass every line on to the caller's log. Serving threads call it. */
static void private_log(void *ctx, int prio, const char *msg)
{
	struct fs_private *p = ctx;
	struct why_ring *w = p->why;

	if (prio <= FS_LOG_ERR) {
		pthread_mutex_lock(&p->why_lock);
		unsigned n = atomic_load_explicit(&w->count, memory_order_relaxed);
		if (n == 0 || strncmp(w->slot[(n - 1) % WHY_SLOTS], msg, WHY_LEN - 1) != 0) {
			atomic_fetch_add_explicit(&w->seq, 1, memory_order_acq_rel);
			atomic_thread_fence(memory_order_release);
			snprintf(w->slot[n % WHY_SLOTS], WHY_LEN, "%s", msg);
			atomic_store_explicit(&w->count, n + 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&w->seq, 1, memory_order_release);
		}
		pthread_mutex_unlock(&p->why_lock);
	}
	if (p->user_log)
		p->user_log(p->user_log_ctx, prio, msg);
}

size_t fs_private_why(const struct fs_private *p, char *buf, size_t len)
{
	size_t out = 0;

	if (!len)
		return 0;
	buf[0] = '\0';
	if (!p)
		return 0;
	struct why_ring *w = p->why;
	for (int tries = 0; tries < 64; tries++) {
		unsigned s1 = atomic_load_explicit(&w->seq, memory_order_acquire);
		if (s1 & 1)
			continue;
		unsigned n = atomic_load_explicit(&w->count, memory_order_relaxed);
		out = 0;
		for (unsigned i = n > WHY_SLOTS ? n - WHY_SLOTS : 0; i < n && out + 1 < len; i++) {
			const volatile char *s = w->slot[i % WHY_SLOTS];
			for (size_t k = 0; k < WHY_LEN && s[k] && out + 1 < len; k++)
				buf[out++] = s[k];
			if (out + 1 < len)
				buf[out++] = '\n';
		}
		buf[out] = '\0';
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&w->seq, memory_order_relaxed) == s1)
			break;
	}
	return out;
}

int fs_private_new(const struct fs_private_config *cfg, struct fs_private **out)
{
	struct fs_private *p;

	if (!cfg || !cfg->store || !out)
		return -EINVAL;
	if (!(p = st_sys_calloc(1, sizeof(*p))))
		return -ENOMEM;
	int err;
	p->why = st_sys_mmap(NULL, sizeof(*p->why), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0, &err);
	if (!p->why || !(p->store_path = st_sys_strdup(st_store_path(cfg->store)))) {
		if (p->why)
			(void)st_sys_munmap(p->why, sizeof(*p->why));
		free(p);
		return -ENOMEM;
	}
	p->store = cfg->store;
	p->nthreads = cfg->threads ? cfg->threads : FS_PRIVATE_THREADS;
	if (p->nthreads > 64)
		p->nthreads = 64;
	p->user_log = cfg->log;
	p->user_log_ctx = cfg->log_ctx;
	p->cfg.store = p->store_path;
	p->cfg.cacert = cfg->cacert;
	p->cfg.certs_d = cfg->certs_d;
	p->cfg.auth = cfg->auth;
	p->cfg.log = private_log;
	p->cfg.log_ctx = p;
	p->sock = p->stopfd = -1;
	p->pid = -1;
	atomic_init(&p->root, -1);
	pthread_mutex_init(&p->lock, NULL);
	pthread_mutex_init(&p->why_lock, NULL);
	*out = p;
	return 0;
}

/* ---- the helper process ---- */

/* One serving thread: wait for a request or the stop, answer the request.
 * The device is non-blocking, so a thread that lost the race for a request
 * goes back to waiting; none blocks where the stop cannot reach it. */
static void *serve_main(void *arg)
{
	struct fs_private *p = arg;
	struct fuse_buf buf = { .mem = NULL };
	struct pollfd pf[2] = { { .fd = fuse_session_fd(p->se), .events = POLLIN }, { .fd = p->stopfd, .events = POLLIN } };

	while (!fuse_session_exited(p->se)) {
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pf[1].revents)
			break;
		if (pf[0].revents & (POLLERR | POLLHUP | POLLNVAL))
			break; /* the connection is gone */
		int rc = fuse_session_receive_buf(p->se, &buf);
		if (rc == -EAGAIN || rc == -EINTR)
			continue;
		if (rc <= 0)
			break;
		fuse_session_process_buf(p->se, &buf);
	}
	free(buf.mem);
	return NULL;
}

static int fsconfig_str(int fsfd, const char *key, const char *val)
{
	return fsconfig(fsfd, FSCONFIG_SET_STRING, key, val, 0) < 0 ? -errno : 0;
}

/* A FUSE mount of dev that never has a mount point: fsopen/fsmount give
 * the root of a detached mount (the kernel needs CAP_SYS_ADMIN for it). */
static int mount_detached(struct fs_private *p, int dev, int *root)
{
	char v[32], src[4096];
	int fsfd = fsopen("fuse", FSOPEN_CLOEXEC), rc;

	if (fsfd < 0)
		return -errno;
	snprintf(v, sizeof(v), "%d", dev);
	rc = fsconfig_str(fsfd, "fd", v);
	if (rc == 0)
		rc = fsconfig_str(fsfd, "rootmode", "40000");
	snprintf(v, sizeof(v), "%u", (unsigned)getuid());
	if (rc == 0)
		rc = fsconfig_str(fsfd, "user_id", v);
	snprintf(v, sizeof(v), "%u", (unsigned)getgid());
	if (rc == 0)
		rc = fsconfig_str(fsfd, "group_id", v);
	if (rc == 0 && fsconfig(fsfd, FSCONFIG_SET_FLAG, "default_permissions", NULL, 0) < 0)
		rc = -errno;
	if (rc == 0 && snprintf(src, sizeof(src), ST_MOUNT_SOURCE "%s", p->store_path) < (int)sizeof(src))
		fsconfig_str(fsfd, "source", src); /* a name only: nothing depends on it */
	if (rc == 0)
		fsconfig_str(fsfd, "subtype", ST_MOUNT_SUBTYPE);
	if (rc == 0 && fsconfig(fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		rc = -errno;
	if (rc == 0) {
		int m = fsmount(fsfd, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
		if (m < 0)
			rc = -errno;
		else
			*root = m;
	}
	close(fsfd);
	return rc;
}

/* Without the privilege for that: libfuse mounts on a temporary directory
 * (fusermount3 when unprivileged). Once the serving threads answer, the
 * root is opened, the mount detached and the directory removed
 * (fallback_detach). A kill -9 between the mount and the detach would
 * leave that mount point (the detached mount has none). */
static int mount_fallback(struct fs_private *p, char *mp)
{
	int dev;

	if (!mkdtemp(mp))
		return -errno;
	if (fuse_session_mount(p->se, mp) != 0) {
		rmdir(mp);
		return FS_EMOUNT;
	}
	dev = fuse_session_fd(p->se);
	if (fcntl(dev, F_SETFL, fcntl(dev, F_GETFL) | O_NONBLOCK) < 0) {
		int rc = -errno;
		fs_umount(mp, true);
		rmdir(mp);
		return rc;
	}
	return 0;
}

static int fallback_detach(const char *mp, int *root)
{
	int fd = open(mp, O_PATH | O_DIRECTORY | O_CLOEXEC), rc = fd < 0 ? -errno : 0;

	fs_umount(mp, true);
	rmdir(mp);
	if (rc == 0)
		*root = fd;
	return rc;
}

/* Send the start's result, and the root on success, to the caller. */
static int send_result(int sock, int rc, int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec io = { .iov_base = &rc, .iov_len = sizeof(rc) };
	struct msghdr mh = { .msg_iov = &io, .msg_iovlen = 1 };

	if (fd >= 0) {
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof(cbuf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	return sendmsg(sock, &mh, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

/*
 * The helper: mount, hand the root to the caller, serve until the caller
 * stops it or ends (its end of the socket closes), then unmount and exit.
 * A process of its own, so that serving a page never waits on the
 * caller's memory map: a thread of the caller faulting on a lazy layer
 * holds its process's mmap lock (for reading) while the kernel waits for
 * the page, and a serving thread in the same process that grows its heap
 * (mprotect, mmap, munmap: malloc does) would wait on that lock forever.
 * It ignores the signals that stop a command (SIGINT, SIGTERM, SIGHUP,
 * SIGQUIT, SIGPIPE), so that a caller's thread waiting on a page is still
 * answered while the caller dies, and exits once the caller has.
 */
static void helper_main(struct fs_private *p, int sock)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct st_store *store = NULL;
	struct ix *ix = NULL;
	pthread_t *threads = NULL;
	unsigned running = 0;
	int rc, root = -1, dev = -1;
	char devpath[32], mp[] = "/tmp/strata-lazy.XXXXXX";
	bool fallback = false, sent = false;
	sigset_t none;

	static const int ignored[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2, SIGALRM };
	for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
		signal(ignored[i], SIG_IGN);
	sigemptyset(&none);
	pthread_sigmask(SIG_SETMASK, &none, NULL);
	prctl(PR_SET_NAME, "strata-lazy", 0, 0, 0);
	/* Nothing of the caller's but stdio: its sandboxes' descriptors, its
	 * index (opened again below) and the sockets of other helpers (whose
	 * end must close when the caller ends) stay the caller's alone. */
	if (sock > 3)
		close_range(3, (unsigned)sock - 1, 0);
	close_range((unsigned)sock + 1, ~0u, 0);
	/* The registry client's connection cache holds the caller's sockets,
	 * closed just now: libcurl would close their numbers again, which are
	 * this helper's files by then. */
	ix_registry_after_fork();
	p->stopfd = sock;
	pthread_mutex_init(&p->why_lock, NULL);
	if ((rc = st_store_open(p->store_path, 0, &store)) < 0 || (rc = ix_open(store, NULL, &ix)) < 0)
		goto out_send;
	if ((rc = fs_core_open(&p->fs, &p->cfg, store, ix)) < 0)
		goto out_send;
	if (fuse_opt_add_arg(&args, "strata") != 0) {
		rc = -ENOMEM;
		goto out_core;
	}
	p->se = fuse_session_new(&args, fs_ops(), sizeof(struct fuse_lowlevel_ops), &p->fs);
	fuse_opt_free_args(&args);
	if (!p->se) {
		rc = FS_EOPTION;
		goto out_core;
	}
	p->fs.session = p->se;
	if ((dev = open("/dev/fuse", O_RDWR | O_CLOEXEC | O_NONBLOCK)) < 0) {
		rc = -errno;
		fs_log(&p->fs, FS_LOG_ERR, "private mount of %s: cannot open /dev/fuse: %s", p->store_path, strerror(-rc));
		goto out_session;
	}
	rc = mount_detached(p, dev, &root);
	if (rc == 0) {
		snprintf(devpath, sizeof(devpath), "/dev/fd/%d", dev);
		if (fuse_session_mount(p->se, devpath) != 0) {
			close(dev);
			rc = FS_EMOUNT;
			goto out_session;
		}
	} else if (rc == -EPERM || rc == -ENOSYS || rc == -EINVAL) {
		close(dev);
		if ((rc = mount_fallback(p, mp)) == 0)
			fallback = true;
		else {
			fs_log(&p->fs, FS_LOG_ERR, "private mount of %s: the kernel refused the mount: %s", p->store_path,
			       rc == FS_EMOUNT ? "see libfuse's message" : strerror(-rc));
			goto out_session;
		}
	} else {
		close(dev);
		fs_log(&p->fs, FS_LOG_ERR, "private mount of %s: the kernel refused the mount: %s", p->store_path,
		       strerror(-rc));
		rc = FS_EMOUNT;
		goto out_session;
	}
	if (!(threads = st_sys_calloc(p->nthreads, sizeof(*threads)))) {
		rc = -ENOMEM;
		goto out_threads;
	}
	/* At least one thread serves before anything reaches the mount. */
	for (; running < p->nthreads; running++)
		if (pthread_create(&threads[running], NULL, serve_main, p) != 0)
			break;
	if (!running) {
		rc = -EAGAIN;
		goto out_threads;
	}
	if (fallback && (rc = fallback_detach(mp, &root)) < 0) {
		fs_log(&p->fs, FS_LOG_ERR, "private mount of %s: cannot open its root: %s", p->store_path, strerror(-rc));
		goto out_threads;
	}
	fallback = false;
	if ((rc = send_result(sock, 0, root)) < 0)
		goto out_threads;
	close(root);
	root = -1;
out_threads:
	if (fallback) {
		fs_umount(mp, true);
		rmdir(mp);
	}
	/* The stop (or the caller's end) wakes every thread; an error above
	 * comes with the socket closed, so they end at once too. */
	if (rc < 0) {
		send_result(sock, rc, -1);
		sent = true;
		shutdown(sock, SHUT_RD);
	}
	for (unsigned i = 0; i < running; i++)
		pthread_join(threads[i], NULL);
out_session:
	if (root >= 0)
		close(root);
	free(threads);
	if (p->se)
		fuse_session_destroy(p->se); /* closes the device: the kernel ends the connection */
	p->fs.session = NULL;
out_core:
	fs_core_close(&p->fs);
out_send:
	if (rc < 0 && !sent)
		send_result(sock, rc, -1);
	ix_close(ix);
	st_store_close(store);
	_exit(rc < 0 ? 1 : 0);
}

/* ---- the caller's side ---- */

static int start_locked(struct fs_private *p)
{
	int sv[2], rc, fd = -1;
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec io = { .iov_base = &rc, .iov_len = sizeof(rc) };
	struct msghdr mh = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	if ((pid = fork()) < 0) {
		rc = -errno;
		(void)st_sys_close(sv[0]);
		(void)st_sys_close(sv[1]);
		return rc;
	}
	if (pid == 0) {
		close(sv[0]);
		helper_main(p, sv[1]);
	}
	(void)st_sys_close(sv[1]);
	ssize_t n;
	while ((n = recvmsg(sv[0], &mh, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof(int))
		rc = -EIO; /* the helper died before it said */
	for (struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL; c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			memcpy(&fd, CMSG_DATA(c), sizeof(int));
	if (rc == 0 && fd < 0)
		rc = -EIO;
	if (rc < 0) {
		if (fd >= 0)
			(void)st_sys_close(fd);
		(void)st_sys_close(sv[0]);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		return rc;
	}
	p->pid = pid;
	p->sock = sv[0];
	atomic_store(&p->root, fd);
	p->started = true;
	return 0;
}

int fs_private_start(struct fs_private *p)
{
	int rc = 0;

	if (!p)
		return -EINVAL;
	pthread_mutex_lock(&p->lock);
	if (!p->started)
		rc = start_locked(p);
	pthread_mutex_unlock(&p->lock);
	return rc;
}

int fs_private_root(const struct fs_private *p)
{
	return p ? atomic_load(&((struct fs_private *)p)->root) : -1;
}

int fs_private_layer_open(void *ctx, const st_id *id, int *fd)
{
	struct fs_private *p = ctx;
	char name[6 + ST_ID_HEX_LEN + 1];
	int rc, f;

	if (!p || !id || !fd)
		return -EINVAL;
	rc = st_blob_open(p->store, id, fd);
	if (rc != -ENOENT)
		return rc;
	if ((rc = fs_private_start(p)) < 0)
		return rc;
	memcpy(name, "blobs/", 6);
	st_id_format(id, name + 6);
	if ((f = st_sys_openat(atomic_load(&p->root), name, O_RDONLY, 0)) < 0)
		return f;
	*fd = f;
	return 0;
}

void fs_private_stop(struct fs_private *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	if (p->started) {
		int root = atomic_exchange(&p->root, -1);
		/* The helper's threads see the socket close, finish the request
		 * each serves, and the helper unmounts and exits. */
		(void)st_sys_close(p->sock);
		p->sock = -1;
		while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR)
			;
		p->pid = -1;
		(void)st_sys_close(root);
		p->started = false;
	}
	pthread_mutex_unlock(&p->lock);
}

void fs_private_free(struct fs_private *p)
{
	if (!p)
		return;
	fs_private_stop(p);
	pthread_mutex_destroy(&p->lock);
	pthread_mutex_destroy(&p->why_lock);
	(void)st_sys_munmap(p->why, sizeof(*p->why));
	free(p->store_path);
	free(p);
}
