/* snapdir.c: open a snapshot directory (a mount's snapshots/NAME, an export, a copy) for restore. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "store/mountabi.h"
#include "store/store.h"
#include "vmm/vmm_int.h"


struct vmm_snapdir {
	char *path;
	unsigned flags;
	struct st_manifest *m;
	int *fds;         /* one per layer, opened (and verified) at open */
	uint32_t ndirect; /* layers reached through their backing blob */
	char *store;      /* on a strata mount: the store behind it, else NULL */
};

/*
 * On a strata mount of store (vmm_mount_store), open the layer's backing
 * blob instead of the FUSE file: its pages then come straight from the page
 * cache (no daemon round trip per fault) and the mapping outlives a daemon
 * restart. The mount's answer (target) is only used if it is exactly that
 * store's blob for the layer's id, and the blob must be a regular file of
 * the layer's size; verified mode hashes the file that is mapped. Anywhere
 * else (a plain copy, even one carrying the xattrs, docs/security.md) the
 * answer is not asked for. Returns the fd, or -1 to use the file in the
 * directory.
 */
static int open_blob_target(const char *store, const char *target, const st_id *id, uint64_t size)
{
	char want[PATH_MAX];
	struct stat st;
	int fd;

	if (st_blob_path_at(store, id, want, sizeof(want)) < 0 || strcmp(target, want) != 0)
		return -1;
	fd = open(want, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != size) {
		close(fd);
		return -1;
	}
	return fd;
}

static int open_backing(const char *store, const char *layer_path, const st_id *id, uint64_t size)
{
	char target[PATH_MAX];
	ssize_t n;

	/* By path: one getxattr round trip to the daemon, no open/release. */
	n = lgetxattr(layer_path, ST_XATTR_BLOB_PATH, target, sizeof(target) - 1);
	if (n <= 0)
		return -1;
	target[n] = '\0';
	return open_blob_target(store, target, id, size);
}

/*
 * Parsed manifests by the XXH3-128 of their bytes. Opening the same
 * snapshot again (a new handle on the same directory, on a mount or a copy)
 * then skips the parse (~100 µs, docs/restore-from-path.md). The parse is a
 * function of the bytes alone, so an entry is never stale; failures are not
 * kept (each says why anew).
 */
#define PARSED_KEPT 8

static pthread_mutex_t parsed_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	st_id hash;
	struct st_manifest *m;
	uint64_t used;
} parsed[PARSED_KEPT];
static uint64_t parsed_clock;

static int parse_manifest(const char *text, size_t len, struct st_manifest **out, char *why, size_t whylen)
{
	struct st_manifest *m, *keep;
	st_id h;
	int rc = 1;

	st_id_hash(text, len, &h);
	pthread_mutex_lock(&parsed_lock);
	for (unsigned i = 0; i < PARSED_KEPT && rc == 1; i++)
		if (parsed[i].m && st_id_equal(&parsed[i].hash, &h)) {
			parsed[i].used = ++parsed_clock;
			rc = st_manifest_dup(parsed[i].m, out);
		}
	pthread_mutex_unlock(&parsed_lock);
	if (rc != 1)
		return rc;
	if (memchr(text, '\0', len)) {
		snprintf(why, whylen, "manifest.json contains a NUL byte");
		return ST_EFORMAT;
	}
	if ((rc = st_manifest_parse(text, len, &m, why, whylen)) < 0)
		return rc;
	if (st_manifest_dup(m, &keep) == 0) {
		unsigned lru = 0;
		pthread_mutex_lock(&parsed_lock);
		for (unsigned i = 1; i < PARSED_KEPT; i++)
			if (parsed[i].used < parsed[lru].used)
				lru = i;
		struct st_manifest *old = parsed[lru].m;
		parsed[lru].hash = h;
		parsed[lru].m = keep;
		parsed[lru].used = ++parsed_clock;
		pthread_mutex_unlock(&parsed_lock);
		st_manifest_free(old);
	}
	*out = m;
	return 0;
}

/* Hash the whole file behind fd: 0 if it is size bytes hashing to id, else ST_ECORRUPT. */
static int verify_fd(int fd, uint64_t size, const st_id *id)
{
	uint64_t got_size;
	st_id got;
	int rc = st_hash_fd(fd, &got, &got_size);

	if (rc < 0)
		return rc;
	return got_size == size && st_id_equal(&got, id) ? 0 : ST_ECORRUPT;
}

/*
 * A layer from a plain directory is the user's file: truncating it under a
 * MAP_PRIVATE mapping would turn the next host access to one of its pages
 * into SIGBUS; a mount's layer without a reachable backing blob depends on
 * its daemon the same way. So it is copied once into a sealed memfd (shared
 * by every sandbox made from this handle) and hashed on the way when
 * verifying. Store blobs are read-only and immutable: mapped as is.
 */
static int copy_private(int fd, uint64_t size, const st_id *id, bool verify, int *out)
{
	int mfd, rc = 0;

	mfd = memfd_create("strata-layer", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (mfd < 0)
		return -errno;
	/* sendfile copies in the kernel, page cache to shmem, once; a file
	 * that shrinks while being read just ends early (no SIGBUS). */
	for (off_t off = 0; (uint64_t)off < size;) {
		size_t want = size - (uint64_t)off < (1u << 30) ? (size_t)(size - (uint64_t)off) : (1u << 30);
		ssize_t n = sendfile(mfd, fd, &off, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : VMM_E_BAD_SNAPSHOT; /* shrank while being read */
			goto out_close;
		}
	}
	if (fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
		rc = -errno;
		goto out_close;
	}
	/* Hash what will be mapped: the private copy, which nobody else can change. */
	if (verify && (rc = verify_fd(mfd, size, id)) < 0)
		goto out_close;
	*out = mfd;
	return 0;
out_close:
	close(mfd);
	return rc;
}

/*
 * Private copies of plain-directory layers, shared by every handle of the
 * process while the file they were copied from is unchanged: same layer id,
 * device, inode, size, modification and change times (any write or
 * truncation moves ctime). A handle opened again on the same copy then maps
 * the same sealed memfd, so it is as safe as before, costs no second copy,
 * and warm sandboxes (warm.c) match it. At most COPIES_BYTES are kept (the
 * least recently used go first); docs/restore-from-path.md measures it.
 */
#define COPIES_MAX 32
#define COPIES_BYTES (256ull << 20)

struct kept_copy {
	st_id id;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
	int64_t made_ns;   /* CLOCK_REALTIME when the copy was made */
	int mfd;
	bool live;         /* false: a free slot */
	bool verified;     /* hashed to id when it was made or since */
	uint64_t used;
};

static pthread_mutex_t copies_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kept_copy copies[COPIES_MAX];
static uint64_t copies_clock;

/* File times can come from a coarse clock (one 4 ms tick here, CONFIG_HZ
 * 250): a file changed in the same tick as the copy was made could look
 * unchanged, so a copy made less than 10 ms after the file's last change is
 * not trusted (it is made again, and that one is). */
#define COPIES_RACY_NS 10000000ll

static int64_t ts_ns(struct timespec t)
{
	return (int64_t)t.tv_sec * 1000000000ll + t.tv_nsec;
}

static bool same_source(const struct kept_copy *c, const st_id *id, const struct stat *st)
{
	return c->live && st_id_equal(&c->id, id) && c->dev == st->st_dev && c->ino == st->st_ino &&
	       c->size == st->st_size && ts_ns(c->mtime) == ts_ns(st->st_mtim) &&
	       ts_ns(c->ctime) == ts_ns(st->st_ctim) && ts_ns(st->st_ctim) + COPIES_RACY_NS < c->made_ns;
}

/* A dup of the kept copy of this file, or -1; *verified says if it was hashed. */
static int copies_find(const st_id *id, const struct stat *st, bool *verified)
{
	int fd = -1;

	pthread_mutex_lock(&copies_lock);
	for (unsigned i = 0; i < COPIES_MAX && fd < 0; i++)
		if (same_source(&copies[i], id, st)) {
			fd = fcntl(copies[i].mfd, F_DUPFD_CLOEXEC, 0);
			*verified = copies[i].verified;
			copies[i].used = ++copies_clock;
		}
	pthread_mutex_unlock(&copies_lock);
	return fd;
}

/* Note that the kept copy of this file now hashed to its id. */
static void copies_mark_verified(const st_id *id, const struct stat *st)
{
	pthread_mutex_lock(&copies_lock);
	for (unsigned i = 0; i < COPIES_MAX; i++)
		if (same_source(&copies[i], id, st))
			copies[i].verified = true;
	pthread_mutex_unlock(&copies_lock);
}

/* Keep a dup of mfd as the copy of this file, making room by age. */
static void copies_add(const st_id *id, const struct stat *st, int mfd, bool verified)
{
	int drop[COPIES_MAX], ndrop = 0;
	uint64_t bytes = (uint64_t)st->st_size;

	if (bytes > COPIES_BYTES)
		return;
	int keep = fcntl(mfd, F_DUPFD_CLOEXEC, 0);
	struct timespec now;
	if (keep < 0)
		return;
	clock_gettime(CLOCK_REALTIME, &now);
	pthread_mutex_lock(&copies_lock);
	/* An older copy of the same file is replaced. */
	for (unsigned i = 0; i < COPIES_MAX; i++)
		if (copies[i].live && st_id_equal(&copies[i].id, id) && copies[i].dev == st->st_dev &&
		    copies[i].ino == st->st_ino) {
			drop[ndrop++] = copies[i].mfd;
			copies[i].live = false;
		}
	for (;;) {
		uint64_t total = bytes;
		unsigned lru = COPIES_MAX, freeslot = COPIES_MAX;
		for (unsigned i = 0; i < COPIES_MAX; i++) {
			if (!copies[i].live) {
				freeslot = i;
				continue;
			}
			total += (uint64_t)copies[i].size;
			if (lru == COPIES_MAX || copies[i].used < copies[lru].used)
				lru = i;
		}
		if (freeslot < COPIES_MAX && total <= COPIES_BYTES) {
			copies[freeslot] = (struct kept_copy){ .id = *id, .dev = st->st_dev, .ino = st->st_ino,
							       .size = st->st_size, .mtime = st->st_mtim,
							       .ctime = st->st_ctim, .made_ns = ts_ns(now), .mfd = keep,
							       .live = true,
							       .verified = verified,
							       .used = ++copies_clock };
			keep = -1;
			break;
		}
		if (lru == COPIES_MAX)
			break;
		drop[ndrop++] = copies[lru].mfd;
		copies[lru].live = false;
	}
	pthread_mutex_unlock(&copies_lock);
	for (int i = 0; i < ndrop; i++)
		close(drop[i]);
	if (keep >= 0)
		close(keep);
}

void vmm_snapdir_caches_drop(void)
{
	pthread_mutex_lock(&copies_lock);
	for (unsigned i = 0; i < COPIES_MAX; i++)
		if (copies[i].live) {
			close(copies[i].mfd);
			copies[i].live = false;
		}
	pthread_mutex_unlock(&copies_lock);
	pthread_mutex_lock(&parsed_lock);
	for (unsigned i = 0; i < PARSED_KEPT; i++) {
		st_manifest_free(parsed[i].m);
		parsed[i].m = NULL;
	}
	pthread_mutex_unlock(&parsed_lock);
}

static int layer_fail(const struct vmm_snapdir *d, const char *hex, int rc, struct vmm_error *err)
{
	return vmm_fail(err, rc == ST_ECORRUPT || rc == VMM_E_BAD_SNAPSHOT ? VMM_E_BAD_SNAPSHOT : rc,
			"snapshot %s: layer %s %s", d->path, hex,
			rc == ST_ECORRUPT ? "does not hash to its name (corrupted)" :
			rc == VMM_E_BAD_SNAPSHOT ? "shrank while being read" : strerror(-rc));
}

static int open_layer(struct vmm_snapdir *d, uint32_t i, struct vmm_error *err)
{
	const struct st_layer_ref *l = &d->m->layers[i];
	uint64_t size = l->pages * ST_PAGE_SIZE;
	char hex[ST_ID_HEX_LEN + 1], path[PATH_MAX];
	struct stat st;
	int fd, rc;

	st_id_format(&l->id, hex);
	if (snprintf(path, sizeof(path), "%s/layers/%s", d->path, hex) >= (int)sizeof(path))
		return vmm_fail(err, -ENAMETOOLONG, "path of layer %s in %s is too long", hex, d->path);
	fd = -1;
	bool direct = d->store && !(d->flags & VMM_SNAPDIR_VIA_FUSE) &&
		      (fd = open_backing(d->store, path, &l->id, size)) >= 0;
	if (direct)
		d->ndirect++;
	if (fd < 0 && (rc = st_snapdir_layer_open(d->path, &l->id, &fd)) < 0)
		return vmm_fail(err, rc, "snapshot %s: layer %s: %s", d->path, hex,
			    rc == -ENOENT ? "missing (an incomplete copy?)" : st_strerror(rc));
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		close(fd);
		return vmm_fail(err, rc, "snapshot %s: layer %s: %s", d->path, hex, strerror(-rc));
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != size) {
		close(fd);
		return vmm_fail(err, VMM_E_BAD_SNAPSHOT,
			    "snapshot %s: layer %s is %lld bytes, the manifest says %llu (truncated or replaced?)",
			    d->path, hex, (long long)st.st_size, (unsigned long long)size);
	}
	bool verify = d->flags & VMM_SNAPDIR_VERIFY;
	/* Anything but an immutable store blob is copied, unless the caller
	 * asked to map the file itself: a plain directory's file may be
	 * truncated, and a mount's FUSE file needs its daemon for every page
	 * fault (a dead daemon would turn the host's next access into SIGBUS). */
	if (!direct && !(d->flags & (VMM_SNAPDIR_MAP_FILES | VMM_SNAPDIR_VIA_FUSE))) {
		bool verified = false;
		int mfd = copies_find(&l->id, &st, &verified);
		if (mfd >= 0) {
			close(fd);
			fd = mfd;
			if (verify && !verified) {
				if ((rc = verify_fd(fd, size, &l->id)) < 0) {
					close(fd);
					goto out_fail;
				}
				copies_mark_verified(&l->id, &st);
			}
			verify = false;
		} else {
			rc = copy_private(fd, size, &l->id, verify, &mfd);
			close(fd);
			if (rc < 0)
				goto out_fail;
			fd = mfd;
			copies_add(&l->id, &st, mfd, verify);
			verify = false; /* hashed while copying */
		}
	}
	if (verify && (rc = verify_fd(fd, size, &l->id)) < 0) {
		close(fd);
		goto out_fail;
	}
	d->fds[i] = fd;
	return 0;
out_fail:
	return layer_fail(d, hex, rc, err);
}

int vmm_restore_answer_parse(const char *buf, size_t n, const char *store, struct st_manifest **out)
{
	char why[ST_WHY_LEN], want[PATH_MAX];
	struct st_restore_answer a;
	struct st_restore_layer l;
	struct st_manifest *m = NULL;
	int rc;

	if (st_restore_decode(buf, n, &a) < 0)
		return 0;
	if ((rc = parse_manifest(a.manifest, a.manifest_len, &m, why, sizeof(why))) < 0)
		return rc == -ENOMEM ? rc : 0; /* the files will say what is wrong */
	/* Exactly one entry per layer, each the store's blob for it, or (a
	 * lazy layer) the directory's own file. */
	if (a.nlayers != m->nlayers)
		goto out_unusable;
	for (uint32_t i = 0; st_restore_answer_next(&a, &l); i++) {
		if (l.kind == ST_RESTORE_FILE && l.len == 0)
			continue;
		if (l.kind != ST_RESTORE_BLOB || st_blob_path_at(store, &m->layers[i].id, want, sizeof(want)) < 0 ||
		    l.len != strlen(want) || memcmp(l.payload, want, l.len) != 0)
			goto out_unusable;
	}
	*out = m;
	return 1;
out_unusable:
	st_manifest_free(m);
	return 0;
}

/* DIR/layers/<hex> of a mount, a regular file of size bytes, or -1. */
static int open_mount_file(const char *dir, const char *hex, uint64_t size)
{
	char path[PATH_MAX];
	struct stat st;
	int fd;

	if (snprintf(path, sizeof(path), "%s/layers/%s", dir, hex) >= (int)sizeof(path))
		return -1;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return -1;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != size) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * On a strata mount, one getxattr of the directory's user.strata.restore
 * brings manifest.json's bytes and every layer's backing blob path
 * (docs/fs.md): one daemon round trip instead of an open and release of
 * manifest.json plus a getxattr per layer. Only asked on a strata mount
 * (d->store), where the daemon answers it from the same bytes it serves as
 * manifest.json, so what is restored is what `strata verify` of the path
 * checks; on any other directory the xattr is someone's file content and is
 * ignored. Each blob is checked as open_backing checks it. It is only a
 * shortcut: returns 1 if d is now open, 0 to read the files instead (no such
 * xattr, an answer too large for one, anything in it unusable), or an error
 * (out of memory, a layer that fails verification).
 */
static int open_via_restore_xattr(struct vmm_snapdir *d, struct vmm_error *err)
{
	char hex[ST_ID_HEX_LEN + 1], want[PATH_MAX], *buf;
	struct st_manifest *m = NULL;
	int *fds = NULL, rc = 0;
	uint32_t nopen = 0;
	ssize_t n;

	if (!d->store)
		return 0;
	if (!(buf = malloc(ST_XATTR_VALUE_MAX)))
		return vmm_fail(err, -ENOMEM, "out of memory");
	n = getxattr(d->path, ST_XATTR_RESTORE, buf, ST_XATTR_VALUE_MAX);
	rc = n > 0 ? vmm_restore_answer_parse(buf, (size_t)n, d->store, &m) : 0;
	if (rc <= 0) {
		free(buf);
		return rc < 0 ? vmm_fail(err, rc, "out of memory") : 0;
	}
	struct st_restore_answer a;
	struct st_restore_layer e;
	st_restore_decode(buf, (size_t)n, &a); /* decoded once already */
	if (!(fds = malloc((m->nlayers + 1) * sizeof(*fds)))) {
		rc = vmm_fail(err, -ENOMEM, "out of memory");
		goto out_free;
	}
	for (rc = 0; nopen < m->nlayers && st_restore_answer_next(&a, &e); nopen++) {
		const struct st_layer_ref *l = &m->layers[nopen];
		st_id_format(&l->id, hex);
		if (e.kind == ST_RESTORE_FILE) {
			/* A lazy layer: the mount's file itself, mapped as it is, so
			 * each page fault fetches only its chunk and the page cache
			 * shares fetched pages with every other mapping of it. */
			if ((fds[nopen] = open_mount_file(d->path, hex, l->pages * ST_PAGE_SIZE)) < 0)
				goto out_free; /* rc 0: read the files */
		} else {
			st_blob_path_at(d->store, &l->id, want, sizeof(want));
			if ((fds[nopen] = open_blob_target(d->store, want, &l->id, l->pages * ST_PAGE_SIZE)) < 0)
				goto out_free; /* rc 0: read the files */
			d->ndirect++;
		}
		if ((d->flags & VMM_SNAPDIR_VERIFY) && (rc = verify_fd(fds[nopen], l->pages * ST_PAGE_SIZE, &l->id)) < 0) {
			close(fds[nopen]);
			rc = layer_fail(d, hex, rc, err);
			goto out_free;
		}
	}
	d->m = m;
	d->fds = fds;
	free(buf);
	return 1;
out_free:
	while (nopen > 0)
		close(fds[--nopen]);
	free(fds);
	free(buf);
	st_manifest_free(m);
	d->ndirect = 0;
	return rc;
}

int vmm_snapdir_open(const char *path, unsigned flags, struct vmm_snapdir **out, struct vmm_error *err)
{
	char why[ST_WHY_LEN] = "";
	struct vmm_snapdir *d;
	struct stat st;
	int rc;

	if (stat(path, &st) < 0) {
		rc = -errno;
		if (rc == -ENOTCONN)
			return vmm_fail(err, rc, "%s is on a strata mount whose daemon is gone "
				    "(unmount it with 'strata umount' and mount again)", path);
		return vmm_fail(err, rc, "%s: %s", path, strerror(-rc));
	}
	if (!S_ISDIR(st.st_mode))
		return vmm_fail(err, -ENOTDIR, "%s is not a snapshot directory (not a directory)", path);
	d = calloc(1, sizeof(*d));
	if (!d || !(d->path = strdup(path))) {
		free(d);
		return vmm_fail(err, -ENOMEM, "out of memory");
	}
	d->flags = flags;
	char store[PATH_MAX];
	if (vmm_mount_store(path, st.st_dev, store, sizeof(store)) == 1 && !(d->store = strdup(store))) {
		rc = vmm_fail(err, -ENOMEM, "out of memory");
		goto out_free;
	}
	if (!(flags & VMM_SNAPDIR_VIA_FUSE) && (rc = open_via_restore_xattr(d, err)) != 0) {
		if (rc < 0)
			goto out_free;
		*out = d;
		return 0;
	}
	char *text = NULL;
	size_t tlen = 0;
	rc = st_snapdir_manifest_text(path, &text, &tlen, why, sizeof(why));
	if (rc == 0)
		rc = parse_manifest(text, tlen, &d->m, why, sizeof(why));
	free(text);
	if (rc < 0) {
		vmm_fail(err, rc == -ENOENT ? -ENOENT : VMM_E_BAD_SNAPSHOT, "%s is not a usable snapshot directory: %s",
		     path, rc == -ENOENT ? "it has no manifest.json" : why[0] ? why : st_strerror(rc));
		goto out_free;
	}
	d->fds = malloc((d->m->nlayers + 1) * sizeof(*d->fds));
	if (!d->fds) {
		rc = vmm_fail(err, -ENOMEM, "out of memory");
		goto out_free;
	}
	for (uint32_t i = 0; i < d->m->nlayers; i++)
		d->fds[i] = -1;
	for (uint32_t i = 0; i < d->m->nlayers; i++)
		if ((rc = open_layer(d, i, err)) < 0)
			goto out_free;
	*out = d;
	return 0;
out_free:
	vmm_snapdir_close(d);
	return rc;
}

void vmm_snapdir_close(struct vmm_snapdir *d)
{
	if (!d)
		return;
	for (uint32_t i = 0; d->fds && i < d->m->nlayers; i++)
		if (d->fds[i] >= 0)
			close(d->fds[i]);
	free(d->fds);
	st_manifest_free(d->m);
	free(d->store);
	free(d->path);
	free(d);
}

const struct st_manifest *vmm_snapdir_manifest(const struct vmm_snapdir *d)
{
	return d->m;
}

unsigned vmm_snapdir_direct_layers(const struct vmm_snapdir *d)
{
	return d->ndirect;
}

bool vmm_snapdir_on_mount(const struct vmm_snapdir *d)
{
	return d->store != NULL;
}

int vmm_snapdir_layer_open(void *ctx, const void *id, int *fd)
{
	const struct vmm_snapdir *d = ctx;

	for (uint32_t i = 0; i < d->m->nlayers; i++) {
		if (!st_id_equal(&d->m->layers[i].id, id))
			continue;
		int nfd = fcntl(d->fds[i], F_DUPFD_CLOEXEC, 0);
		if (nfd < 0)
			return -errno;
		*fd = nfd;
		return 0;
	}
	return -ENOENT;
}

int vmm_sandbox_from_snapdir(const struct vmm_snapdir *d, const struct vmm_config *cfg, struct vmm_sandbox **out,
			     struct vmm_error *err)
{
	return vmm_sandbox_from_snapshot(d->m, vmm_snapdir_layer_open, (void *)d, cfg, out, err);
}
