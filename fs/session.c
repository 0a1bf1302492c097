/* session.c: mount lifecycle: open the store, mount, serve on worker threads, poll the index, unmount. */
#define FUSE_USE_VERSION 35
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fs/fs_int.h"
#include "index/dist/dist.h"
#include "fs/ops.h"
#include "store/mountabi.h"
#include "store/sys.h"

#define DEFAULT_POLL_MS 200
/* One thread serving requests in order: a `ls -lR` over 200 snapshots took
 * 25-33 ms with it and 280-660 ms with 2 or 8 pool threads on this machine
 * (docs/fs.md, "threads"); --threads N > 1 enables the pool. */
#define DEFAULT_THREADS 1
/* Immutable content (manifests, layers, blobs) is cached this long; tag
 * changes are pushed out by invalidation, not by expiry. */
#define ENTRY_TIMEOUT_S 86400.0

int fs_read_mode_parse(const char *s, enum fs_read_mode *out)
{
	if (strcmp(s, "direct") == 0)
		*out = FS_READ_DIRECT;
	else if (strcmp(s, "dontneed") == 0)
		*out = FS_READ_DONTNEED;
	else if (strcmp(s, "cached") == 0)
		*out = FS_READ_CACHED;
	else
		return -EINVAL;
	return 0;
}

int fs_mountpoint_state(const char *path)
{
	struct stat st, pst;
	struct statfs sf;
	char parent[PATH_MAX];

	int rc;

	if ((rc = st_sys_fstatat(AT_FDCWD, path, &st, 0)) < 0)
		return rc == -ENOTCONN ? FS_MP_STALE : rc;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if ((rc = st_sys_statfs(path, &sf)) < 0)
		return rc == -ENOTCONN ? FS_MP_STALE : rc;
	if (snprintf(parent, sizeof(parent), "%s/..", path) >= (int)sizeof(parent))
		return -ENAMETOOLONG;
	if ((rc = st_sys_fstatat(AT_FDCWD, parent, &pst, 0)) < 0)
		return rc;
	if ((unsigned long)sf.f_type == ST_MOUNT_FUSE_MAGIC && st.st_dev != pst.st_dev)
		return FS_MP_MOUNTED;
	return FS_MP_FREE;
}

static int run_fusermount(const char *path, bool lazy)
{
	pid_t pid = fork();
	int status;

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		execlp("fusermount3", "fusermount3", lazy ? "-uz" : "-u", "--", path, (char *)NULL);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EPERM;
}

int fs_umount(const char *path, bool lazy)
{
	int st = fs_mountpoint_state(path);

	if (st < 0)
		return st;
	if (st == FS_MP_FREE)
		return FS_ENOTMOUNT;
	if (umount2(path, lazy ? MNT_DETACH : 0) == 0)
		return 0;
	if (errno == EBUSY)
		return -EBUSY;
	if (errno != EPERM)
		return -errno;
	return run_fusermount(path, lazy);
}

/* The thread following the index generation (tags, abandoned imports). */
struct fs_poller {
	struct fs *fs;      /* fixed */
	pthread_t thread;   /* fixed */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop; /* protected by lock (cond signals it) */
};

/* Follow the index: when the generation moves, re-read the tags and tell the
 * kernel what changed; drop imports that were abandoned. */
static void *poll_main(void *arg)
{
	struct fs_poller *p = arg;
	struct fs *fs = p->fs;
	unsigned ms = fs->cfg->poll_ms ? fs->cfg->poll_ms : DEFAULT_POLL_MS;
	struct fs_tags *seen = fs_tags_get(fs);
	uint64_t seen_gen = seen->gen;

	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += (long)(ms % 1000) * 1000000l;
		ts.tv_sec += ms / 1000 + ts.tv_nsec / 1000000000l;
		ts.tv_nsec %= 1000000000l;
		pthread_cond_timedwait(&p->cond, &p->lock, &ts);
		if (p->stop)
			break;
		pthread_mutex_unlock(&p->lock);
		struct fs_tags *old = NULL;
		int rc = fs_view_refresh(fs, false, &old);
		if (rc < 0)
			fs_log(fs, FS_LOG_ERR, "index: cannot read the generation: %s", fs_strerror(rc));
		fs_tags_put(fs, old);
		struct fs_tags *cur = fs_tags_get(fs);
		if (cur != seen)
			fs_ops_invalidate_tags(fs, seen, cur);
		/* The view may have moved on between two polls (a lookup that
		 * missed re-reads the index at once), so diffing what this
		 * thread saw is not enough: every name the kernel was given is
		 * checked against the index's tags whenever its generation moved. */
		if (cur->gen != seen_gen) {
			char **names;
			size_t n;
			if (fs_view_take_stale(fs, &names, &n) >= 0 || names) {
				fs_ops_invalidate_names(fs, names, n);
				for (size_t i = 0; i < n; i++)
					free(names[i]);
				free(names);
			}
			seen_gen = cur->gen;
		}
		fs_tags_put(fs, seen);
		seen = cur;
		fs_stage_sweep(fs, false);
		pthread_mutex_lock(&p->lock);
	}
	pthread_mutex_unlock(&p->lock);
	fs_tags_put(fs, seen);
	return NULL;
}

static int fs_poller_start(struct fs *fs, struct fs_poller *p)
{
	int rc;

	p->fs = fs;
	p->stop = false;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	if ((rc = -pthread_create(&p->thread, NULL, poll_main, p)) < 0) {
		pthread_cond_destroy(&p->cond);
		pthread_mutex_destroy(&p->lock);
	}
	return rc;
}

static void fs_poller_stop(struct fs_poller *p)
{
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
	pthread_join(p->thread, NULL);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
}

static void release_node(struct fs_node *n, void *ctx)
{
	if (n->stage)
		fs_stage_unref(ctx, n->stage);
}

static int pin_top(struct fs *fs)
{
	static const enum fs_kind top[] = { FS_K_ROOT, FS_K_SNAPSHOTS, FS_K_BLOBS, FS_K_MEMORY, FS_K_IMPORTS };
	struct fs_node *n;

	for (size_t i = 0; i < sizeof(top) / sizeof(top[0]); i++) {
		struct fs_key k = { .kind = top[i] };
		int rc = fs_itable_acquire(fs->itable, &k, NULL, NULL, &n);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int make_args(const struct fs_config *cfg, const char *store, struct fuse_args *args)
{
	char opts[4096];
	int n = snprintf(opts, sizeof(opts), "fsname=" ST_MOUNT_SOURCE "%s,subtype=" ST_MOUNT_SUBTYPE ",default_permissions%s%s", store,
			 cfg->fuse_opts && *cfg->fuse_opts ? "," : "", cfg->fuse_opts ? cfg->fuse_opts : "");

	if (n < 0 || n >= (int)sizeof(opts) || strchr(store, ','))
		return -EINVAL;
	if (fuse_opt_add_arg(args, "strata") || fuse_opt_add_arg(args, "-o") || fuse_opt_add_arg(args, opts) ||
	    (cfg->debug && fuse_opt_add_arg(args, "-d")))
		return -ENOMEM;
	return 0;
}

/* A refused chunk or a failed fetch, said in the mount's log. */
static void lazy_log(void *ctx, const char *msg)
{
	fs_log(ctx, FS_LOG_ERR, "%s", msg);
}

int fs_core_open(struct fs *fs, const struct fs_config *cfg, struct st_store *store, struct ix *ix)
{
	int rc;

	memset(fs, 0, sizeof(*fs));
	fs->cfg = cfg;
	fs->store = store;
	fs->ix = ix;
	fs->read_mode = cfg->read_mode ? cfg->read_mode : FS_READ_DIRECT;
	fs->entry_timeout = ENTRY_TIMEOUT_S;
	fs->start_ns = fs_now_ns();
	pthread_mutex_init(&fs->stage_lock, NULL);
	pthread_mutex_init(&fs->open_lock, NULL);
	fs->stage_mem_max = cfg->stage_memory ? cfg->stage_memory : FS_STAGE_MEMORY_DEFAULT;
	struct ix_lazy_opts lo = { .cacert = cfg->cacert, .certs_d = cfg->certs_d, .auth = cfg->auth,
				   .log = lazy_log, .log_ctx = fs };
	if ((rc = ix_lazy_open(fs->ix, &lo, &fs->lazy)) < 0)
		goto out;
	if ((rc = fs_itable_new(release_node, fs, &fs->itable)) < 0)
		goto out_lazy;
	if ((rc = fs_view_init(fs)) < 0)
		goto out_view;
	if ((rc = pin_top(fs)) < 0)
		goto out_view;
	return 0;
out_view:
	fs_view_fini(fs);
	fs_itable_free(fs->itable);
out_lazy:
	ix_lazy_close(fs->lazy);
out:
	pthread_mutex_destroy(&fs->stage_lock);
	pthread_mutex_destroy(&fs->open_lock);
	return rc;
}

void fs_core_close(struct fs *fs)
{
	fs_ops_release_open(fs);
	fs_stage_sweep(fs, true);
	fs_itable_free(fs->itable);
	fs_view_fini(fs);
	ix_lazy_close(fs->lazy);
	pthread_mutex_destroy(&fs->stage_lock);
	pthread_mutex_destroy(&fs->open_lock);
}

int fs_serve(const struct fs_config *cfg)
{
	struct fs fs;
	struct st_store *store = NULL;
	struct ix *ix = NULL;
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_session *se = NULL;
	struct fs_poller p;
	int rc = fs_mountpoint_state(cfg->mountpoint);

	if (rc == FS_MP_STALE)
		return FS_ESTALE_MOUNT;
	if (rc == FS_MP_MOUNTED)
		return FS_EMOUNTED;
	if (rc < 0)
		return rc;
	if ((rc = st_store_open(cfg->store, 0, &store)) < 0)
		return rc;
	if ((rc = ix_open(store, NULL, &ix)) < 0)
		goto out_close_store;
	if ((rc = fs_core_open(&fs, cfg, store, ix)) < 0)
		goto out_close_index;
	if ((rc = make_args(cfg, st_store_path(fs.store), &args)) < 0)
		goto out_free_args;
	se = fuse_session_new(&args, fs_ops(), sizeof(struct fuse_lowlevel_ops), &fs);
	if (!se) {
		rc = FS_EOPTION;
		goto out_free_args;
	}
	fs.session = se;
	if (fuse_set_signal_handlers(se) != 0) {
		rc = -EIO;
		goto out_destroy;
	}
	if (fuse_session_mount(se, cfg->mountpoint) != 0) {
		rc = FS_EMOUNT;
		goto out_signals;
	}
	fs_log(&fs, FS_LOG_NOTICE, "mounted %s at %s", st_store_path(fs.store), cfg->mountpoint);
	if ((rc = fs_poller_start(&fs, &p)) < 0)
		goto out_unmount;
	if (cfg->ready)
		cfg->ready(cfg->ready_ctx);

	unsigned threads = cfg->max_threads ? cfg->max_threads : DEFAULT_THREADS;
	struct fuse_loop_config *lc = threads == 1 ? NULL : fuse_loop_cfg_create();
	if (threads == 1) {
		rc = fuse_session_loop(se);
		rc = rc < 0 ? rc : 0;
	} else if (!lc) {
		rc = -ENOMEM;
	} else {
		fuse_loop_cfg_set_max_threads(lc, threads);
		fuse_loop_cfg_set_idle_threads(lc, UINT_MAX);
		rc = fuse_session_loop_mt(se, lc);
		fuse_loop_cfg_destroy(lc);
		rc = rc < 0 ? rc : 0; /* > 0: a signal ended the loop: a clean stop */
	}
	fs_poller_stop(&p);
	fs_log(&fs, FS_LOG_NOTICE, "unmounting %s", cfg->mountpoint);
out_unmount:
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_destroy:
	fuse_session_destroy(se);
	fs.session = NULL;
out_free_args:
	fuse_opt_free_args(&args);
	fs_core_close(&fs);
out_close_index:
	ix_close(ix);
out_close_store:
	st_store_close(store);
	return rc;
}
