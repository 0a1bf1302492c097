/* private.c: a store served in-process on a private, detached mount (lazy layers for the VMM, docs/lazy.md). */
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
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/mount.h>
#include <unistd.h>

#include "fs/fs_int.h"
#include "fs/ops.h"
#include "store/mountabi.h"
#include "store/sys.h"

/* The last reasons kept (refused chunks, unreachable registries): a run
 * that fails on one page meets it a few times (the kernel retries). */
#define WHY_SLOTS 8
#define WHY_LEN 1024

/*
 * Locks: `lock` orders start, stop and free (held while a mount is made or
 * taken down, never while a request is served, so a serving thread never
 * waits on it); `why_lock` orders writers of the reasons, which readers
 * follow by `why_seq` alone (odd while a slot is written), without a lock:
 * fs_private_why may run in a signal handler of a thread that faulted.
 */
struct fs_private {
	struct st_store *store; /* fixed: the caller's */
	struct ix *ix;          /* fixed: the caller's */
	unsigned nthreads;      /* fixed */
	void (*user_log)(void *ctx, int prio, const char *msg); /* fixed */
	void *user_log_ctx;                                     /* fixed */
	struct fs_config cfg;   /* fixed: what struct fs reads (log: private_log) */
	pthread_mutex_t lock;
	bool started;           /* protected by lock */
	bool fallback;          /* protected by lock: mounted on a temporary directory */
	struct fs fs;           /* set up under lock, then used by the serving threads */
	struct fuse_session *se; /* protected by lock */
	int dev;                /* protected by lock: /dev/fuse, non-blocking */
	bool dev_in_se;         /* protected by lock: the session owns dev (and closes it) */
	int stopfd;             /* protected by lock: an eventfd, readable once a stop began */
	_Atomic int root;       /* written under lock, read by openers: O_PATH root of the mount, or -1 */
	pthread_t sup;          /* protected by lock: the supervisor (supervise_main) */
	pthread_cond_t sup_cond; /* signals sup_ready (with lock) */
	bool sup_ready;         /* protected by lock: the supervisor has its table and fs */
	int sup_rc;             /* protected by lock: its setup's result */
	pthread_t *threads;     /* the supervisor's: the workers it started */
	unsigned running;       /* the supervisor's: workers started */
	/* The reasons. */
	pthread_mutex_t why_lock;
	_Atomic unsigned why_seq;   /* odd while a writer (why_lock) fills a slot */
	_Atomic unsigned why_count; /* reasons recorded in all (the last WHY_SLOTS kept) */
	char why[WHY_SLOTS][WHY_LEN]; /* written under why_lock inside an odd why_seq */
};

/* Keep an error line as a reason (unless it repeats the last one) and
 * pass every line on to the caller's log. Serving threads call it. */
static void private_log(void *ctx, int prio, const char *msg)
{
	struct fs_private *p = ctx;

	if (prio <= FS_LOG_ERR) {
		pthread_mutex_lock(&p->why_lock);
		unsigned n = atomic_load_explicit(&p->why_count, memory_order_relaxed);
		if (n == 0 || strncmp(p->why[(n - 1) % WHY_SLOTS], msg, WHY_LEN - 1) != 0) {
			atomic_fetch_add_explicit(&p->why_seq, 1, memory_order_acq_rel);
			atomic_thread_fence(memory_order_release);
			snprintf(p->why[n % WHY_SLOTS], WHY_LEN, "%s", msg);
			atomic_store_explicit(&p->why_count, n + 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&p->why_seq, 1, memory_order_release);
		}
		pthread_mutex_unlock(&p->why_lock);
	}
	if (p->user_log)
		p->user_log(p->user_log_ctx, prio, msg);
}

size_t fs_private_why(const struct fs_private *p, char *buf, size_t len)
{
	struct fs_private *q = (struct fs_private *)p; /* the atomics are read only */
	size_t out = 0;

	if (!len)
		return 0;
	buf[0] = '\0';
	if (!p)
		return 0;
	for (int tries = 0; tries < 64; tries++) {
		unsigned s1 = atomic_load_explicit(&q->why_seq, memory_order_acquire);
		if (s1 & 1)
			continue;
		unsigned n = atomic_load_explicit(&q->why_count, memory_order_relaxed);
		out = 0;
		for (unsigned i = n > WHY_SLOTS ? n - WHY_SLOTS : 0; i < n && out + 1 < len; i++) {
			const volatile char *s = q->why[i % WHY_SLOTS];
			for (size_t k = 0; k < WHY_LEN && s[k] && out + 1 < len; k++)
				buf[out++] = s[k];
			if (out + 1 < len)
				buf[out++] = '\n';
		}
		buf[out] = '\0';
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&q->why_seq, memory_order_relaxed) == s1)
			break;
	}
	return out;
}

int fs_private_new(const struct fs_private_config *cfg, struct fs_private **out)
{
	struct fs_private *p;

	if (!cfg || !cfg->store || !cfg->ix || !out)
		return -EINVAL;
	if (!(p = st_sys_calloc(1, sizeof(*p))))
		return -ENOMEM;
	p->store = cfg->store;
	p->ix = cfg->ix;
	p->nthreads = cfg->threads ? cfg->threads : FS_PRIVATE_THREADS;
	if (p->nthreads > 64)
		p->nthreads = 64;
	p->user_log = cfg->log;
	p->user_log_ctx = cfg->log_ctx;
	p->cfg.store = st_store_path(cfg->store);
	p->cfg.cacert = cfg->cacert;
	p->cfg.certs_d = cfg->certs_d;
	p->cfg.creds = cfg->creds;
	p->cfg.creds_ctx = cfg->creds_ctx;
	p->cfg.log = private_log;
	p->cfg.log_ctx = p;
	p->dev = p->stopfd = -1;
	atomic_init(&p->root, -1);
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->sup_cond, NULL);
	pthread_mutex_init(&p->why_lock, NULL);
	*out = p;
	return 0;
}

/* One serving thread: wait for a request or the stop, answer the request.
 * The device is non-blocking, so a thread that lost the race for a request
 * to another goes back to waiting; none ever blocks where a stop cannot
 * reach it. Every signal is blocked here (the caller's handlers run on the
 * caller's threads), and nothing here touches a sandbox's memory. */
static void *serve_main(void *arg)
{
	struct fs_private *p = arg;
	struct fuse_buf buf = { .mem = NULL };
	/* The session's device and the stop, both in the serving threads' table. */
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
	if (rc == 0 && snprintf(src, sizeof(src), ST_MOUNT_SOURCE "%s", st_store_path(p->store)) < (int)sizeof(src))
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
 * (fusermount3 when unprivileged), the root is opened, the mount detached
 * and the directory removed at once. A kill -9 between the mount and the
 * detach would leave that mount point (the detached mount has none). */
static int mount_fallback(struct fs_private *p, int *root)
{
	char mp[] = "/tmp/strata-lazy.XXXXXX";
	int rc = 0, fd;

	if (!mkdtemp(mp))
		return -errno;
	if (fuse_session_mount(p->se, mp) != 0) {
		rmdir(mp);
		return FS_EMOUNT;
	}
	fd = open(mp, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		rc = -errno;
	fs_umount(mp, true);
	rmdir(mp);
	if (rc < 0)
		return rc;
	p->dev = fuse_session_fd(p->se);
	p->dev_in_se = true;
	if (fcntl(p->dev, F_SETFL, fcntl(p->dev, F_GETFL) | O_NONBLOCK) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	p->fallback = true;
	*root = fd;
	return 0;
}

/*
 * The supervisor: the first serving thread. It gives itself (and the
 * workers it starts, which share it) a descriptor table of its own
 * (unshare(CLONE_FILES)): a copy of the process's, from which the caller's
 * copy of the device is then closed. So the device is open only in the
 * serving threads' table, and when they die — a kill -9 of the process, or
 * an exit with a request in flight — the kernel closes it and ends the
 * connection, which wakes a caller's thread waiting on a page of the mount
 * (a FUSE request already read by its server is otherwise waited for
 * uninterruptibly: the process could never exit). Everything the serving
 * threads open (backing blobs, lazy layers' files, registry connections)
 * stays in that table, and is closed there (fs_core_close) before it
 * ends.
 */
static void *supervise_main(void *arg)
{
	struct fs_private *p = arg;
	int rc = unshare(CLONE_FILES) < 0 ? -errno : 0;

	if (rc == 0 && (rc = fs_core_open(&p->fs, &p->cfg, p->store, p->ix)) == 0)
		p->fs.session = p->se;
	pthread_mutex_lock(&p->lock);
	p->sup_rc = rc;
	p->sup_ready = true;
	pthread_cond_broadcast(&p->sup_cond);
	pthread_mutex_unlock(&p->lock);
	if (rc < 0)
		return NULL;
	/* The root is the caller's; this table needs none of it. */
	close(atomic_load(&p->root));
	for (p->running = 0; p->running + 1 < p->nthreads; p->running++)
		if (pthread_create(&p->threads[p->running], NULL, serve_main, p) != 0)
			break;
	serve_main(p);
	for (unsigned i = 0; i < p->running; i++)
		pthread_join(p->threads[i], NULL);
	p->running = 0;
	/* Closes the device (in this table, its only one): the kernel ends
	 * the connection, so a mapping still in use reads EIO (SIGBUS). */
	fuse_session_destroy(p->se);
	p->fs.session = NULL;
	fs_core_close(&p->fs);
	close(p->stopfd);
	return NULL;
}

/* Take down what start built before the supervisor took it over; p->lock held. */
static void teardown(struct fs_private *p)
{
	int root = atomic_exchange(&p->root, -1);

	if (root >= 0)
		close(root);
	if (p->se) {
		fuse_session_destroy(p->se);
		p->se = NULL;
		p->fs.session = NULL;
	}
	if (!p->dev_in_se && p->dev >= 0)
		close(p->dev);
	p->dev = -1;
	p->dev_in_se = false;
	if (p->stopfd >= 0)
		close(p->stopfd);
	p->stopfd = -1;
	free(p->threads);
	p->threads = NULL;
	p->fallback = false;
}

static int start_locked(struct fs_private *p)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	char devpath[32];
	int rc, root = -1;
	sigset_t all, old;
	struct ix_txn *t;

	/* This process's reader lock on the index is taken by a thread of the
	 * caller's table (LMDB takes it with the first read; a POSIX lock is
	 * owned by a descriptor table), not by a serving thread's. */
	if ((rc = ix_txn_begin(p->ix, &t)) < 0)
		return rc;
	ix_txn_end(t);
	p->fs.cfg = &p->cfg; /* fs_log before fs_core_open */
	if (!(p->threads = st_sys_calloc(p->nthreads, sizeof(*p->threads)))) {
		rc = -ENOMEM;
		goto out;
	}
	if ((p->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
		rc = -errno;
		goto out;
	}
	if (fuse_opt_add_arg(&args, "strata") != 0) {
		rc = -ENOMEM;
		goto out;
	}
	p->se = fuse_session_new(&args, fs_ops(), sizeof(struct fuse_lowlevel_ops), &p->fs);
	fuse_opt_free_args(&args);
	if (!p->se) {
		rc = FS_EOPTION;
		goto out;
	}
	p->fs.session = p->se;
	if ((p->dev = open("/dev/fuse", O_RDWR | O_CLOEXEC | O_NONBLOCK)) < 0) {
		rc = -errno;
		fs_log(&p->fs, FS_LOG_ERR, "private mount of %s: cannot open /dev/fuse: %s", p->cfg.store,
		       strerror(-rc));
		goto out;
	}
	rc = mount_detached(p, p->dev, &root);
	if (rc == 0) {
		snprintf(devpath, sizeof(devpath), "/dev/fd/%d", p->dev);
		if (fuse_session_mount(p->se, devpath) != 0) {
			close(root);
			rc = FS_EMOUNT;
			goto out;
		}
		p->dev_in_se = true;
	} else if (rc == -EPERM || rc == -ENOSYS || rc == -EINVAL) {
		close(p->dev);
		p->dev = -1;
		if ((rc = mount_fallback(p, &root)) < 0) {
			fs_log(&p->fs, FS_LOG_ERR, "private mount of %s: the kernel refused the mount: %s", p->cfg.store,
			       rc == FS_EMOUNT ? "see libfuse's message" : strerror(-rc));
			goto out;
		}
	} else {
		fs_log(&p->fs, FS_LOG_ERR, "private mount of %s: the kernel refused the mount: %s", p->cfg.store,
		       strerror(-rc));
		rc = FS_EMOUNT;
		goto out;
	}
	atomic_store(&p->root, root);
	/* Serving threads start with every signal blocked. */
	p->sup_ready = false;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = -pthread_create(&p->sup, NULL, supervise_main, p);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc < 0)
		goto out;
	while (!p->sup_ready)
		pthread_cond_wait(&p->sup_cond, &p->lock);
	if ((rc = p->sup_rc) < 0) {
		pthread_join(p->sup, NULL);
		goto out;
	}
	/* The device now lives in the serving threads' table only. */
	close(p->dev);
	p->dev = -1;
	p->started = true;
	return 0;
out:
	teardown(p);
	return rc;
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
	/* Not under p->lock: the open is a FUSE request the serving threads answer. */
	if ((f = openat(atomic_load(&p->root), name, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	*fd = f;
	return 0;
}

void fs_private_stop(struct fs_private *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	if (p->started) {
		uint64_t one = 1;
		int root = atomic_exchange(&p->root, -1);
		/* An eventfd write of 1 cannot fail here; the serving threads
		 * see it in their poll, finish the request they serve, and the
		 * supervisor closes all they opened before it returns. */
		if (write(p->stopfd, &one, sizeof(one)) != sizeof(one))
			fuse_session_exit(p->se);
		pthread_join(p->sup, NULL);
		close(root);
		close(p->stopfd); /* this table's copy */
		p->stopfd = -1;
		p->se = NULL;
		free(p->threads);
		p->threads = NULL;
		p->fallback = false;
		p->dev_in_se = false;
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
	pthread_cond_destroy(&p->sup_cond);
	pthread_mutex_destroy(&p->why_lock);
	free(p);
}
