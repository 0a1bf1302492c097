/* fs.h: the FUSE view of a strata store: mount it, serve it, unmount it. */
#ifndef STRATA_FS_FS_H
#define STRATA_FS_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/*
 * Namespace (docs/fs.md):
 *   MOUNT/snapshots/NAME/manifest.json   canonical manifest of the tagged snapshot
 *   MOUNT/snapshots/NAME/layers/<id>     each layer blob it names
 *   MOUNT/blobs/<id>                     every blob in the store
 *   MOUNT/memory/NAME                    the snapshot's guest memory, sparse
 * `mkdir snapshots/NAME` and writing manifest.json and layers/<id> imports a
 * snapshot; `rm -r` removes a tag, `mv` renames one.
 *
 * Caveats:
 * - Threads: fs_serve serves on the calling thread (with max_threads > 1,
 *   libfuse's pool of up to max_threads workers) plus one thread polling
 *   the index generation; it returns after joining them. The other calls
 *   keep no state and are thread safe.
 * - Fork: fs_serve opens the store's index (LMDB): call it in a process
 *   that has not opened that index, and do not fork while it runs. fs_umount
 *   forks and execs fusermount3 when unprivileged.
 * - Signals: while fs_serve runs, libfuse's handlers for SIGINT, SIGTERM and
 *   SIGHUP (stop serving) and SIGPIPE (ignored) are installed; they are
 *   removed before it returns.
 * - Caches (all inside fs_serve, freed when it returns): parsed manifests of
 *   the snapshots served (immutable, kept while the mount lives), the tag
 *   list (refreshed when the index generation moves, polled every poll_ms),
 *   the node table (one entry per name the kernel holds), and each import
 *   in progress (its small files in memory, layers in STORE/tmp/) until it
 *   commits or stays idle stage_timeout_s; all imports together hold at
 *   most stage_memory bytes in memory (past it: ENOSPC). Chunks of lazy layers a read
 *   needs are fetched into the store and stay there (docs/lazy.md).
 * - Lifetimes: cfg and the strings it points to must stay valid until
 *   fs_serve returns; cfg->log may be called from any serving thread.
 * - Errors: -errno or the codes below; nothing here prints (cfg->log says
 *   why a request was refused) or reads environment variables.
 */

/* Errors: -errno, the index's and store's codes, or one of these (range
 * -1300..-1399); st_strerror names every code strata returns. */
enum {
	FS_ESTALE_MOUNT = -1300, /* mountpoint is a dead FUSE mount (ENOTCONN) */
	FS_EMOUNTED = -1301,     /* mountpoint already has a live FUSE mount */
	FS_EMOUNT = -1302,       /* the kernel refused the mount (see the log) */
	FS_ENOTMOUNT = -1303,    /* umount: nothing is mounted there */
	FS_EOPTION = -1304,      /* libfuse rejected a -o option */
};

/* st_strerror under the mount's name. */
const char *fs_strerror(int err);

/* How the daemon reads backing blobs to answer FUSE reads (docs/fs.md has
 * the measurements behind the default). */
enum fs_read_mode {
	FS_READ_DEFAULT = 0,
	FS_READ_DIRECT,   /* O_DIRECT: the backing blob is not cached a second time */
	FS_READ_DONTNEED, /* buffered read, then POSIX_FADV_DONTNEED the range */
	FS_READ_CACHED,   /* plain buffered reads (pages cached twice) */
};
/* "direct", "dontneed", "cached" -> *out; anything else -> -EINVAL with
 * *out untouched. s must not be NULL. */
int fs_read_mode_parse(const char *s, enum fs_read_mode *out);

/* Log priorities (syslog's numbers). */
enum { FS_LOG_ERR = 3, FS_LOG_WARNING = 4, FS_LOG_NOTICE = 5, FS_LOG_INFO = 6, FS_LOG_DEBUG = 7 };

struct ix_auth; /* registry credentials (index/dist/dist.h) */

struct fs_config {
	const char *store;        /* store directory */
	const char *mountpoint;   /* an existing directory */
	const char *fuse_opts;    /* comma-separated -o options passed to libfuse, or NULL */
	bool debug;               /* libfuse's request trace (foreground only) */
	unsigned stage_timeout_s; /* drop an import idle this long (0: 600) */
	unsigned poll_ms;         /* index generation poll period (0: 200) */
	unsigned max_threads;     /* worker threads (0: 1, measured in docs/fs.md) */
	enum fs_read_mode read_mode;
	/* Where the daemon says why it refused something (never NULL). */
	void (*log)(void *ctx, int prio, const char *msg);
	void *log_ctx;
	/* Lazy layers (docs/lazy.md): the CA bundle and credentials for the
	 * registries their chunks come from (auth: a provider,
	 * index/dist/dist.h; NULL: anonymous). */
	const char *cacert;
	const char *const *certs_d; /* roots of certs.d/HOST[:PORT]/ directories, or NULL */
	const struct ix_auth *auth;
	/* Called once the mount is live, before serving (may be NULL): the
	 * place to tell a waiting parent process that the mount succeeded. */
	void (*ready)(void *ctx);
	void *ready_ctx;
	/* The most memory imports may hold in the daemon at once: manifest
	 * buffers, parsed manifests, file entries, layer writers (0:
	 * FS_STAGE_MEMORY_DEFAULT). A write, create or mkdir past it fails
	 * with ENOSPC until an import commits or is removed (docs/fs.md). */
	uint64_t stage_memory;
};

/* The default stage budget: four manifest.json files of the largest size
 * the store takes (16 MiB each) at once, or thousands of ordinary ones (a
 * few KiB); without it, 40 unfinished copies of 16 MiB manifests held 663 MB
 * in the daemon. */
#define FS_STAGE_MEMORY_DEFAULT (64ull << 20)

/*
 * Open the store (read-write) and its index, mount at cfg->mountpoint and
 * serve requests on worker threads until the filesystem is unmounted or
 * SIGINT/SIGTERM/SIGHUP arrives; then unmount and close everything.
 * Needs: cfg->store a store, cfg->mountpoint an existing directory with
 * nothing mounted on it, cfg->log set; not called in a process that
 * already has the store's index open (LMDB and fork); /dev/fuse usable
 * (or fusermount3 for an unprivileged mount).
 * Returns 0 once a started mount is unmounted or stopped by a signal.
 * Errors before ready(): FS_ESTALE_MOUNT, FS_EMOUNTED, -ENOENT/-ENOTDIR
 * (mountpoint), st_store_open's (ST_ENOTSTORE, ...), ix_open's, -EINVAL
 * (a store path holding ',', or -o options too long), FS_EOPTION (libfuse
 * refused an -o option), FS_EMOUNT (the kernel
 * refused the mount; cfg->log says why), -EIO (signal handlers), -ENOMEM;
 * nothing is mounted then and the signal handlers are as they were (the
 * store's index may have been created). Errors after ready(): libfuse's
 * loop error (-errno), the mount taken down. Either way, on return imports
 * that had not committed are dropped (their staged layers removed from
 * STORE/tmp/) and every committed snapshot stays.
 */
int fs_serve(const struct fs_config *cfg);

enum fs_mp_state {
	FS_MP_FREE = 0,    /* a directory with nothing of ours mounted on it */
	FS_MP_MOUNTED = 1, /* a live FUSE mount */
	FS_MP_STALE = 2,   /* a FUSE mount whose daemon is gone (ENOTCONN) */
};
/* What is at path: >= 0 an fs_mp_state (FS_MP_MOUNTED for any live FUSE
 * mount, strata's or not), or -errno (-ENOTDIR, -ENOENT, -EACCES,
 * -ENAMETOOLONG). Changes nothing. */
int fs_mountpoint_state(const char *path);

/* Unmount the FUSE mount at path (live or stale; it does not check that
 * the mount is strata's): umount2(), falling back to `fusermount3 -u`
 * (forked and exec'd) when not privileged. lazy detaches a busy mount.
 * FS_ENOTMOUNT if path is not a FUSE mount, -EBUSY (busy and not lazy),
 * -EPERM (fusermount3 failed or is missing), fs_mountpoint_state's errors,
 * other -errno: the mount stays as it was. */
int fs_umount(const char *path, bool lazy);

/*
 * The private server: a store served for this process on a FUSE mount that
 * no path reaches, so a host program can map the layers of a snapshot
 * whose layers are lazy (docs/lazy.md, "Sandboxes on a lazy snapshot").
 * fs_private_layer_open is a vmm_layer_open_fn: give it, with the handle
 * as ctx, to vmm_sandbox_from_snapshot, vmm_sandbox_restore_to or
 * vmm_pool_new.
 *
 * Caveats:
 * - Process: fs_private_start forks a helper process (no exec) that opens
 *   the store and its index again, mounts and serves on `threads` threads
 *   of its own, and exits when stopped or when this process ends (its end
 *   of a socket closes). Not a thread of the caller: a caller's thread
 *   that faults on a lazy page (a vCPU, the host writing a call frame, the
 *   process backend copying pages at restore) can hold the process's mmap
 *   lock while the kernel waits for the page, and a serving thread in the
 *   same process whose malloc grows its heap would wait on that lock
 *   forever (measured: `strata pool -n 8` of a lazy snapshot hung so). The
 *   helper closes every descriptor but stdio and its socket, ignores
 *   SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1/2 and SIGALRM (so a
 *   page a dying caller waits on is still answered), and is not waited
 *   for by anyone but fs_private_stop: do not reap it with waitpid(-1).
 *   It is a copy of the caller at start (memory copy-on-write): start
 *   before making large sandboxes to keep that small.
 * - Mount: made by the helper and never attached to a directory
 *   (fsopen/fsmount; needs CAP_SYS_ADMIN): reachable only through
 *   fs_private_root and the files opened from it, so a kill -9 of either
 *   process leaves no mount point. Without the privilege, libfuse mounts on
 *   a temporary directory (fusermount3) that is detached (MNT_DETACH) and
 *   removed at once; a kill -9 in between leaves that directory mounted.
 * - Threads: the calls are thread safe; cfg->log and cfg->auth are called
 *   in the helper (a copy of the caller's memory: what they write there
 *   stays there, except stdio).
 * - Lifetime: the mount lives until stop (or the helper's death); a file
 *   or mapping opened from it that is still in use then reads EIO (a
 *   mapping: SIGBUS) for any page not yet cached. Free every sandbox and
 *   pool restored through it first.
 * - Memory: the helper's copy of the caller; per serving thread a receive
 *   buffer of about 1 MiB; fs_serve's caches; per lazy layer touched, what
 *   ix_lazy keeps (index/lazy.h). The reasons: 8 KiB shared with it.
 * - Errors: -errno or the codes above; a reason (a refused chunk, a
 *   registry that could not be reached, a mount the kernel refused) is
 *   kept for fs_private_why and passed to cfg->log; nothing is printed.
 */
#define FS_PRIVATE_THREADS 4

struct fs_private;

struct fs_private_config {
	struct st_store *store; /* an open store, outliving the handle (blobs are opened from it;
	                         * the helper opens the store and its index again, read-write) */
	unsigned threads;       /* serving threads (0: FS_PRIVATE_THREADS; at most 64) */
	/* Lazy layers' registries: as in struct fs_config (strings outlive the handle). */
	const char *cacert;
	const char *const *certs_d;
	const struct ix_auth *auth; /* registry credentials (may be NULL: none); asked in the helper */
	/* Every line the server logs (may be NULL); any serving thread calls it. */
	void (*log)(void *ctx, int prio, const char *msg);
	void *log_ctx;
};

/* A handle serving cfg->store; nothing is mounted and no process started
 * yet. cfg is copied. -EINVAL (cfg, store or out NULL), -ENOMEM. */
int fs_private_new(const struct fs_private_config *cfg, struct fs_private **out);

/* Fork the helper, mount and start serving, unless already started (then
 * 0 at once: every later open reuses the same mount and helper). Needs
 * /dev/fuse. Errors: -EINVAL (p NULL), -ENOENT/-EACCES (/dev/fuse),
 * FS_EMOUNT (the kernel or fusermount3 refused the mount; fs_private_why
 * says why), FS_EOPTION, -ENOMEM, st_store_open's and ix_open's codes (in
 * the helper), fork's and socketpair's -errno, -EIO (the helper died
 * before it answered); nothing is left mounted or running then, and a
 * later call tries again. */
int fs_private_start(struct fs_private *p);

/* The mount's root (an O_PATH directory fd, open for openat), or -1 before
 * start and after stop. Owned by the handle: do not close it. */
int fs_private_root(const struct fs_private *p);

/* A vmm_layer_open_fn (ctx: struct fs_private *): the store's blob of id
 * if it has one, else (a lazy layer) starts the server if needed and
 * opens blobs/<id> in the mount, whose reads fetch the chunks they touch.
 * 0 and *fd (O_RDONLY, close-on-exec, the caller's). -ENOENT (neither a
 * blob nor a lazy layer), fs_private_start's errors, st_blob_open's and
 * openat's -errno. */
int fs_private_layer_open(void *ctx, const st_id *id, int *fd);

/* The reasons kept so far (the last 8 distinct error lines, oldest first,
 * each ending in '\n'; e.g. "chunk 3 of layer X (bytes A-B) from
 * HOST/REPO does not match the chunk index: refused", "layer X bytes A-B
 * from HOST/REPO: ... (gave up after the retries)") copied into buf
 * (NUL-terminated, cut to len). Returns the bytes written (0: none, or p
 * NULL). Takes no lock and allocates nothing: safe in a signal handler,
 * e.g. the SIGBUS of a thread that touched a page that could not be read. */
size_t fs_private_why(const struct fs_private *p, char *buf, size_t len);
/* A buffer of this size holds every reason kept, whole. */
#define FS_PRIVATE_WHY_SIZE (8 * 1024 + 1)

/* Stop serving: close the helper's socket; its threads finish the request
 * each serves (bounded by the fetch retries), it closes the device (the
 * kernel ends the mount) and exits; wait for it; close the root. The
 * reasons are kept; a later start forks a new helper. */
void fs_private_stop(struct fs_private *p);

/* fs_private_stop, then free the handle. Accepts NULL. */
void fs_private_free(struct fs_private *p);

#endif
