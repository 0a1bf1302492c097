/* snapopen.c: open a snapshot directory (a mount's snapshots/NAME, an export, a copy) to map it: one checked fd per layer. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "store/array.h"
#include "store/mountabi.h"
#include "store/store_int.h"

/* The largest mountinfo read; a table larger than this is not searched (answers "not a mount"). */
#define MOUNTS_TEXT_MAX (4u << 20)
#define MOUNTS_TEXT_STEP (16u << 10)

/*
 * File times can come from a coarse clock (one 4 ms tick here, CONFIG_HZ
 * 250): a file changed in the same tick as the copy was made could look
 * unchanged, so a copy made less than 10 ms after the file's last change is
 * not trusted (it is made again, and that one is).
 */
#define COPIES_RACY_NS 10000000ll

/* A parsed manifest, by the XXH3-128 of its bytes. */
struct kept_parse {
	st_id hash;
	struct st_manifest *m; /* NULL: a free slot */
	uint64_t used;
};

/* A private copy of a plain-directory layer, and the file it was made from. */
struct kept_copy {
	st_id id;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
	int64_t made_ns; /* CLOCK_REALTIME when the copy was made */
	st_id uses;      /* XXH3-128 of the page runs copied (another snapshot may use others) */
	uint64_t bytes;  /* bytes copied: the pages those runs hold */
	int mfd;
	bool live;     /* false: a free slot */
	bool verified; /* hashed to id when it was made or since */
	uint64_t used;
};

struct st_snapcache {
	struct st_snapcache_limits lim; /* fixed at new */

	pthread_mutex_t parsed_lock;
	struct kept_parse *parsed; /* lim.manifests slots; guarded by parsed_lock */
	uint64_t parsed_clock;     /* guarded by parsed_lock */

	pthread_mutex_t copies_lock;
	struct kept_copy *copies; /* lim.copies slots; guarded by copies_lock */
	uint64_t copies_clock;    /* guarded by copies_lock */

	/* The answer for the last device asked about, kept while the mount
	 * table is unchanged: /proc/self/mountinfo polls POLLPRI after any
	 * mount or unmount (proc(5)), so a repeated open costs one poll(2),
	 * not a read of the table and a statfs round trip to the daemon. */
	pthread_mutex_t mounts_lock;
	int mounts_fd; /* /proc/self/mountinfo or -1; guarded by mounts_lock */
	struct {
		bool valid;
		dev_t dev;
		int answer; /* 1: a strata mount of store, 0: not */
		char store[PATH_MAX];
	} mounts_last; /* guarded by mounts_lock */
};

/* A run of a layer's pages that some range uses: [first, first + n). */
struct page_run {
	uint64_t first, n;
};

/* The pages of every layer that m's ranges use, each layer's runs ascending
 * and merged: layer i's are runs[starts[i] .. starts[i + 1]). */
struct layer_use {
	struct page_run *runs;
	uint64_t *starts; /* nlayers + 1 */
};

struct st_snapdir {
	char *path;
	unsigned flags;
	struct st_manifest *m;
	int *fds;         /* one per layer, opened (and verified) at open */
	uint32_t ndirect; /* layers reached through their backing blob */
	char *store;      /* on a strata mount: the store behind it, else NULL */
	struct layer_use use; /* the pages each layer's ranges use; built for the first private copy */
};

/* ------------------------------------------------------------------ cache */

int st_snapcache_new(const struct st_snapcache_limits *lim, struct st_snapcache **out)
{
	struct st_snapcache *c = st_sys_calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->lim = lim ? *lim :
		       (struct st_snapcache_limits){ .manifests = ST_SNAPCACHE_MANIFESTS,
						     .copies = ST_SNAPCACHE_COPIES,
						     .copy_bytes = ST_SNAPCACHE_COPY_BYTES };
	c->mounts_fd = -1;
	if ((c->lim.manifests && !(c->parsed = st_sys_calloc(c->lim.manifests, sizeof(*c->parsed)))) ||
	    (c->lim.copies && !(c->copies = st_sys_calloc(c->lim.copies, sizeof(*c->copies))))) {
		free(c->parsed);
		free(c);
		return -ENOMEM;
	}
	pthread_mutex_init(&c->parsed_lock, NULL);
	pthread_mutex_init(&c->copies_lock, NULL);
	pthread_mutex_init(&c->mounts_lock, NULL);
	*out = c;
	return 0;
}

void st_snapcache_drop(struct st_snapcache *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->copies_lock);
	for (unsigned i = 0; i < c->lim.copies; i++)
		if (c->copies[i].live) {
			st_sys_close(c->copies[i].mfd);
			c->copies[i].live = false;
		}
	pthread_mutex_unlock(&c->copies_lock);
	pthread_mutex_lock(&c->parsed_lock);
	for (unsigned i = 0; i < c->lim.manifests; i++) {
		st_manifest_free(c->parsed[i].m);
		c->parsed[i].m = NULL;
	}
	pthread_mutex_unlock(&c->parsed_lock);
	pthread_mutex_lock(&c->mounts_lock);
	c->mounts_last.valid = false;
	pthread_mutex_unlock(&c->mounts_lock);
}

void st_snapcache_free(struct st_snapcache *c)
{
	if (!c)
		return;
	st_snapcache_drop(c);
	if (c->mounts_fd >= 0)
		st_sys_close(c->mounts_fd);
	pthread_mutex_destroy(&c->parsed_lock);
	pthread_mutex_destroy(&c->copies_lock);
	pthread_mutex_destroy(&c->mounts_lock);
	free(c->parsed);
	free(c->copies);
	free(c);
}

/* ------------------------------------------------------- strata mounts */

/* Read the whole of /proc/self/mountinfo through fd (from its start): at
 * most MOUNTS_TEXT_MAX bytes (-ENOMEM beyond), read MOUNTS_TEXT_STEP or more at a time. */
static int read_table(int fd, char **out, size_t *len)
{
	size_t cap = 0, n = 0;
	char *buf = NULL;
	int rc;

	for (;;) {
		if (n == cap && (cap >= MOUNTS_TEXT_MAX || ST_ARRAY_RESERVE(buf, cap, n + MOUNTS_TEXT_STEP) < 0)) {
			rc = -ENOMEM;
			goto out_free;
		}
		ssize_t r = st_sys_pread(fd, buf + n, cap - n, (off_t)n);
		if (r < 0) {
			rc = (int)r;
			goto out_free;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	*out = buf;
	*len = n;
	return 0;
out_free:
	free(buf);
	return rc;
}

/* The answer without a cache: statfs, then the whole table. -1: unclear (ask again). */
static int mount_store_uncached(int mounts_fd, const char *path, dev_t dev, char *store, size_t size)
{
	struct statfs sfs;
	char *text = NULL;
	size_t len = 0;
	int rc = 0;

	/* The kernel says FUSE (the mount table alone could name a stale
	 * entry), and the table says which FUSE: strata's, of which store.
	 * Only a clear answer is kept (a failed statfs or read is asked again). */
	if (mounts_fd < 0 || st_sys_statfs(path, &sfs) < 0)
		return -1;
	if (sfs.f_type != ST_MOUNT_FUSE_MAGIC)
		return 0;
	if (read_table(mounts_fd, &text, &len) < 0)
		return -1;
	rc = st_mountinfo_store(text, len, major(dev), minor(dev), store, size);
	free(text);
	return rc;
}

/* Whether path (a directory on device dev) is on a strata mount: 1 and the
 * store behind it, or 0. */
static int mount_store(struct st_snapcache *c, const char *path, dev_t dev, char *store, size_t size)
{
	char found[PATH_MAX];
	int rc;

	if (!c) {
		int fd = st_sys_openat(AT_FDCWD, "/proc/self/mountinfo", O_RDONLY, 0);
		rc = mount_store_uncached(fd, path, dev, found, sizeof(found));
		if (fd >= 0)
			st_sys_close(fd);
		rc = rc == 1 && strlen(found) < size;
		if (rc)
			memcpy(store, found, strlen(found) + 1);
		return rc;
	}
	pthread_mutex_lock(&c->mounts_lock);
	if (c->mounts_fd < 0)
		c->mounts_fd = st_sys_openat(AT_FDCWD, "/proc/self/mountinfo", O_RDONLY, 0);
	/* Any event (or a failed poll) means the table may have changed. */
	if (c->mounts_fd >= 0 && st_sys_poll1(c->mounts_fd, POLLPRI, 0) != 0)
		c->mounts_last.valid = false;
	if (c->mounts_fd >= 0 && c->mounts_last.valid && c->mounts_last.dev == dev) {
		rc = c->mounts_last.answer;
	} else {
		rc = mount_store_uncached(c->mounts_fd, path, dev, c->mounts_last.store, sizeof(c->mounts_last.store));
		c->mounts_last.valid = rc >= 0;
		c->mounts_last.dev = dev;
		c->mounts_last.answer = rc = rc == 1;
	}
	if (rc == 1 && strlen(c->mounts_last.store) >= size)
		rc = 0;
	if (rc == 1)
		memcpy(store, c->mounts_last.store, strlen(c->mounts_last.store) + 1);
	pthread_mutex_unlock(&c->mounts_lock);
	return rc;
}

/* --------------------------------------------------------- parsed manifests */

/*
 * Parsed manifests by the XXH3-128 of their bytes. Opening the same
 * snapshot again (a new handle on the same directory, on a mount or a copy)
 * then skips the parse (~100 µs, docs/restore-from-path.md). The parse is a
 * function of the bytes alone, so an entry is never stale; failures are not
 * kept (each says why anew).
 */
static int parse_manifest(struct st_snapcache *c, const char *text, size_t len, struct st_manifest **out, char *why,
			  size_t whylen)
{
	struct st_manifest *m, *keep;
	st_id h;
	int rc = 1;

	st_id_hash(text, len, &h);
	if (c) {
		pthread_mutex_lock(&c->parsed_lock);
		for (unsigned i = 0; i < c->lim.manifests && rc == 1; i++)
			if (c->parsed[i].m && st_id_equal(&c->parsed[i].hash, &h)) {
				c->parsed[i].used = ++c->parsed_clock;
				rc = st_manifest_dup(c->parsed[i].m, out);
			}
		pthread_mutex_unlock(&c->parsed_lock);
		if (rc != 1)
			return rc;
	}
	if (memchr(text, '\0', len))
		return st_why(why, whylen, ST_EFORMAT, "manifest.json contains a NUL byte");
	if ((rc = st_manifest_parse(text, len, &m, why, whylen)) < 0)
		return rc;
	if (c && c->lim.manifests && st_manifest_dup(m, &keep) == 0) {
		unsigned lru = 0;
		pthread_mutex_lock(&c->parsed_lock);
		for (unsigned i = 1; i < c->lim.manifests; i++)
			if (c->parsed[i].used < c->parsed[lru].used)
				lru = i;
		struct st_manifest *old = c->parsed[lru].m;
		c->parsed[lru].hash = h;
		c->parsed[lru].m = keep;
		c->parsed[lru].used = ++c->parsed_clock;
		pthread_mutex_unlock(&c->parsed_lock);
		st_manifest_free(old);
	}
	*out = m;
	return 0;
}

/* ------------------------------------------------------- private copies */

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

struct use_key {
	uint32_t layer;
	struct page_run r;
};

static int cmp_use_key(const void *a, const void *b)
{
	const struct use_key *x = a, *y = b;

	if (x->layer != y->layer)
		return x->layer < y->layer ? -1 : 1;
	return x->r.first < y->r.first ? -1 : x->r.first > y->r.first;
}

/* One sort of all ranges (not a scan of them per layer: 65,536 layers by
 * 65,536 ranges would be 2^32 steps). Ranges of one layer may overlap in
 * the layer (two guest pages showing one layer page). */
static int layer_use_build(const struct st_manifest *m, struct layer_use *u)
{
	struct use_key *k = st_sys_malloc((m->nranges + 1) * sizeof(*k));
	uint64_t n = 0;

	u->runs = st_sys_malloc((m->nranges + 1) * sizeof(*u->runs));
	u->starts = st_sys_calloc((size_t)m->nlayers + 1, sizeof(*u->starts));
	if (!k || !u->runs || !u->starts) {
		free(k);
		free(u->runs);
		free(u->starts);
		*u = (struct layer_use){ 0 };
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < m->nranges; i++)
		k[i] = (struct use_key){ m->ranges[i].layer, { m->ranges[i].lpage, m->ranges[i].npages } };
	qsort(k, m->nranges, sizeof(*k), cmp_use_key);
	for (uint64_t i = 0, layer = 0; i < m->nranges; i++) {
		while (layer < k[i].layer)
			u->starts[++layer] = n;
		struct page_run *last = n > u->starts[layer] ? &u->runs[n - 1] : NULL;
		if (last && k[i].r.first <= last->first + last->n) {
			uint64_t end = k[i].r.first + k[i].r.n; /* inside the layer: validated */
			if (end > last->first + last->n)
				last->n = end - last->first;
		} else {
			u->runs[n++] = k[i].r;
		}
	}
	for (uint32_t layer = m->nranges ? k[m->nranges - 1].layer : 0; layer < m->nlayers; layer++)
		u->starts[layer + 1] = n;
	free(k);
	return 0;
}

static void layer_use_free(struct layer_use *u)
{
	free(u->runs);
	free(u->starts);
	*u = (struct layer_use){ 0 };
}

/* Hash the size bytes of a layer whose used pages (runs) are in the sealed
 * copy mem and whose other pages are only in the user's file fd (read, not
 * mapped: a file truncated under a mapping would be SIGBUS). */
static int verify_copy(int fd, const uint8_t *mem, uint64_t size, const struct page_run *runs, size_t nruns,
		       const st_id *id)
{
	struct st_hasher *h;
	char *buf = NULL;
	uint64_t at = 0;
	st_id got;
	int rc;

	if ((rc = st_hasher_new(&h)) < 0)
		return rc;
	for (size_t i = 0; i <= nruns; i++) {
		uint64_t first = i < nruns ? runs[i].first * ST_PAGE_SIZE : size;
		/* The pages before this run: from the file. */
		while (at < first) {
			size_t want = first - at < (1u << 20) ? (size_t)(first - at) : (1u << 20);
			if (!buf && !(buf = st_sys_malloc(1u << 20))) {
				rc = -ENOMEM;
				goto out_free;
			}
			ssize_t n = st_sys_pread(fd, buf, want, (off_t)at);
			if (n <= 0) {
				rc = n < 0 ? (int)n : ST_ELAYOUT; /* shrank while being read */
				goto out_free;
			}
			st_hasher_update(h, buf, (size_t)n);
			at += (uint64_t)n;
		}
		if (i == nruns)
			break;
		/* The run: what will be mapped. */
		st_hasher_update(h, mem + at, runs[i].n * ST_PAGE_SIZE);
		at += runs[i].n * ST_PAGE_SIZE;
	}
	st_hasher_final(h, &got);
	rc = st_id_equal(&got, id) ? 0 : ST_ECORRUPT;
out_free:
	free(buf);
	st_hasher_free(h);
	return rc;
}

/* verify_copy of the copy mfd of the file fd. */
static int verify_mfd(int fd, int mfd, uint64_t size, const struct page_run *runs, size_t nruns, const st_id *id)
{
	int rc = 0;
	uint8_t *mem = st_sys_mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, mfd, 0, &rc);

	if (!mem)
		return rc;
	rc = verify_copy(fd, mem, size, runs, nruns, id);
	st_sys_munmap(mem, (size_t)size);
	return rc;
}

/*
 * A layer from a plain directory is the user's file: truncating it under a
 * MAP_PRIVATE mapping would turn the next host access to one of its pages
 * into SIGBUS; a mount's layer without a reachable backing blob depends on
 * its daemon the same way. So it is copied once into a sealed memfd (shared
 * by every sandbox made from this handle) and hashed on the way when
 * verifying. Store blobs are read-only and immutable: mapped as is.
 *
 * Only the pages some range uses (runs) are copied; the rest of the memfd
 * (the layer's full size, so it maps as the layer does) stays a hole that
 * no guest page shows. A layer's id hashes all of it, so verifying reads the
 * unused pages from the file, without keeping them: a layer of 2 GiB whose
 * ranges use one page costs one page of memory, not 2 GiB.
 * ST_ELAYOUT: the file shrank while being read.
 */
static int copy_private(int fd, uint64_t size, const struct page_run *runs, size_t nruns, const st_id *id,
			bool verify, int *out)
{
	int mfd, rc = 0;

	mfd = st_sys_memfd_create("strata-layer", MFD_ALLOW_SEALING);
	if (mfd < 0)
		return mfd;
	if ((rc = st_sys_ftruncate(mfd, (off_t)size)) < 0)
		goto out_close;
	/* sendfile copies in the kernel, page cache to shmem, once; a file
	 * that shrinks while being read just ends early (no SIGBUS). */
	for (size_t i = 0; i < nruns; i++) {
		off_t off = (off_t)(runs[i].first * ST_PAGE_SIZE), end = off + (off_t)(runs[i].n * ST_PAGE_SIZE);
		off_t at = st_sys_lseek(mfd, off, SEEK_SET);
		if (at < 0) {
			rc = (int)at;
			goto out_close;
		}
		while (off < end) {
			size_t want = end - off < (1 << 30) ? (size_t)(end - off) : (1u << 30);
			ssize_t n = st_sys_sendfile(mfd, fd, &off, want);
			if (n <= 0) {
				rc = n < 0 ? (int)n : ST_ELAYOUT; /* shrank while being read */
				goto out_close;
			}
		}
	}
	if ((rc = st_sys_add_seals(mfd, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL)) < 0)
		goto out_close;
	/* Hash what will be mapped: the private copy, which nobody else can change. */
	if (verify && (rc = verify_mfd(fd, mfd, size, runs, nruns, id)) < 0)
		goto out_close;
	*out = mfd;
	return 0;
out_close:
	st_sys_close(mfd);
	return rc;
}

/*
 * Private copies of plain-directory layers, shared by every handle opened
 * with the same cache while the file they were copied from is unchanged:
 * same layer id, device, inode, size, modification and change times (any
 * write or truncation moves ctime). A handle opened again on the same copy
 * then maps the same sealed memfd, so it is as safe as before, costs no
 * second copy, and warm sandboxes match it. At most lim.copies copies of
 * lim.copy_bytes in all are kept (the least recently used go first);
 * docs/restore-from-path.md measures it.
 */
static int64_t ts_ns(struct timespec t)
{
	return (int64_t)t.tv_sec * 1000000000ll + t.tv_nsec;
}

static bool same_source(const struct kept_copy *k, const st_id *id, const st_id *uses, const struct stat *st)
{
	return k->live && st_id_equal(&k->id, id) && st_id_equal(&k->uses, uses) && k->dev == st->st_dev && k->ino == st->st_ino &&
	       k->size == st->st_size && ts_ns(k->mtime) == ts_ns(st->st_mtim) &&
	       ts_ns(k->ctime) == ts_ns(st->st_ctim) && ts_ns(st->st_ctim) + COPIES_RACY_NS < k->made_ns;
}

/* A dup of the kept copy of this file, or -1; *verified says if it was hashed. */
static int copies_find(struct st_snapcache *c, const st_id *id, const st_id *uses, const struct stat *st,
		       bool *verified)
{
	int fd = -1;

	if (!c)
		return -1;
	pthread_mutex_lock(&c->copies_lock);
	for (unsigned i = 0; i < c->lim.copies && fd < 0; i++)
		if (same_source(&c->copies[i], id, uses, st)) {
			fd = st_sys_dup(c->copies[i].mfd);
			*verified = c->copies[i].verified;
			c->copies[i].used = ++c->copies_clock;
		}
	pthread_mutex_unlock(&c->copies_lock);
	return fd < 0 ? -1 : fd;
}

/* Note that the kept copy of this file now hashed to its id. */
static void copies_mark_verified(struct st_snapcache *c, const st_id *id, const st_id *uses, const struct stat *st)
{
	pthread_mutex_lock(&c->copies_lock);
	for (unsigned i = 0; i < c->lim.copies; i++)
		if (same_source(&c->copies[i], id, uses, st))
			c->copies[i].verified = true;
	pthread_mutex_unlock(&c->copies_lock);
}

/* Keep a dup of mfd as the copy of this file, making room by age. */
static void copies_add(struct st_snapcache *c, const st_id *id, const st_id *uses, uint64_t bytes,
		       const struct stat *st, int mfd, bool verified)
{
	int *drop, ndrop = 0, keep;
	struct timespec now;

	if (!c || !c->lim.copies || bytes > c->lim.copy_bytes)
		return;
	if (!(drop = st_sys_calloc(c->lim.copies, sizeof(*drop))))
		return;
	if ((keep = st_sys_dup(mfd)) < 0) {
		free(drop);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &now);
	pthread_mutex_lock(&c->copies_lock);
	/* An older copy of the same file's same pages is replaced. */
	for (unsigned i = 0; i < c->lim.copies; i++)
		if (c->copies[i].live && st_id_equal(&c->copies[i].id, id) && st_id_equal(&c->copies[i].uses, uses) &&
		    c->copies[i].dev == st->st_dev && c->copies[i].ino == st->st_ino) {
			drop[ndrop++] = c->copies[i].mfd;
			c->copies[i].live = false;
		}
	for (;;) {
		uint64_t total = bytes;
		unsigned lru = c->lim.copies, freeslot = c->lim.copies;
		for (unsigned i = 0; i < c->lim.copies; i++) {
			if (!c->copies[i].live) {
				freeslot = i;
				continue;
			}
			total += c->copies[i].bytes;
			if (lru == c->lim.copies || c->copies[i].used < c->copies[lru].used)
				lru = i;
		}
		if (freeslot < c->lim.copies && total <= c->lim.copy_bytes) {
			c->copies[freeslot] = (struct kept_copy){ .id = *id, .dev = st->st_dev, .ino = st->st_ino,
								  .size = st->st_size, .mtime = st->st_mtim,
								  .ctime = st->st_ctim, .made_ns = ts_ns(now),
								  .uses = *uses, .bytes = bytes, .mfd = keep, .live = true, .verified = verified,
								  .used = ++c->copies_clock };
			keep = -1;
			break;
		}
		if (lru == c->lim.copies)
			break;
		drop[ndrop++] = c->copies[lru].mfd;
		c->copies[lru].live = false;
	}
	pthread_mutex_unlock(&c->copies_lock);
	for (int i = 0; i < ndrop; i++)
		st_sys_close(drop[i]);
	if (keep >= 0)
		st_sys_close(keep);
	free(drop);
}

/* ---------------------------------------------------------------- layers */

/*
 * On a strata mount of store, open the layer's backing blob instead of the
 * FUSE file: its pages then come straight from the page cache (no daemon
 * round trip per fault) and the mapping outlives a daemon restart. The
 * mount's answer (target) is only used if it is exactly that store's blob
 * for the layer's id, and the blob must be a regular file of the layer's
 * size; verified mode hashes the file that is mapped. Anywhere else (a
 * plain copy, even one carrying the xattrs, docs/security.md) the answer is
 * not asked for. Returns the fd, or -1 to use the file in the directory.
 */
static int open_blob_target(const char *store, const char *target, const st_id *id, uint64_t size)
{
	char want[PATH_MAX];
	struct stat st;
	int fd;

	if (st_blob_path_at(store, id, want, sizeof(want)) < 0 || strcmp(target, want) != 0)
		return -1;
	fd = st_sys_openat(AT_FDCWD, want, O_RDONLY | O_NOFOLLOW, 0);
	if (fd < 0)
		return -1;
	if (st_sys_fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != size) {
		st_sys_close(fd);
		return -1;
	}
	return fd;
}

static int open_backing(const char *store, const char *layer_path, const st_id *id, uint64_t size)
{
	char target[PATH_MAX];
	ssize_t n;

	/* By path: one getxattr round trip to the daemon, no open/release. */
	n = st_sys_getxattr(layer_path, ST_XATTR_BLOB_PATH, target, sizeof(target) - 1, 1);
	if (n <= 0)
		return -1;
	target[n] = '\0';
	return open_blob_target(store, target, id, size);
}

static int layer_fail(const struct st_snapdir *d, const char *hex, int rc, char *why, size_t whylen)
{
	return st_why(why, whylen, rc, "snapshot %s: layer %s %s", d->path, hex,
		      rc == ST_ECORRUPT ? "does not hash to its name (corrupted)" :
		      rc == ST_ELAYOUT ? "shrank while being read" : st_strerror(rc));
}

static int open_layer(struct st_snapdir *d, struct st_snapcache *c, uint32_t i, char *why, size_t whylen)
{
	const struct st_layer_ref *l = &d->m->layers[i];
	uint64_t size = l->pages * ST_PAGE_SIZE;
	char hex[ST_ID_HEX_LEN + 1], path[PATH_MAX];
	struct stat st;
	int fd, rc;

	st_id_format(&l->id, hex);
	if (snprintf(path, sizeof(path), "%s/layers/%s", d->path, hex) >= (int)sizeof(path))
		return st_why(why, whylen, -ENAMETOOLONG, "path of layer %s in %s is too long", hex, d->path);
	fd = -1;
	bool direct = d->store && !(d->flags & ST_SNAPDIR_VIA_FUSE) &&
		      (fd = open_backing(d->store, path, &l->id, size)) >= 0;
	if (direct)
		d->ndirect++;
	char owhy[ST_WHY_LEN] = "";
	if (fd < 0 && (rc = st_snapdir_layer_open_why(d->path, &l->id, &fd, owhy, sizeof(owhy))) < 0)
		return rc == -ENOENT ? st_why(why, whylen, rc, "snapshot %s: layer %s: missing (an incomplete copy?)",
					      d->path, hex) :
				       st_why(why, whylen, rc, "snapshot %s: %s", d->path, owhy[0] ? owhy : st_strerror(rc));
	if ((rc = st_sys_fstat(fd, &st)) < 0) {
		st_sys_close(fd);
		return st_why(why, whylen, rc, "snapshot %s: layer %s: %s", d->path, hex, st_strerror(rc));
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != size) {
		st_sys_close(fd);
		return st_why(why, whylen, ST_ELAYOUT,
			      "snapshot %s: layer %s is %lld bytes, the manifest says %llu (truncated or replaced?)",
			      d->path, hex, (long long)st.st_size, (unsigned long long)size);
	}
	bool verify = d->flags & ST_SNAPDIR_VERIFY;
	/* Anything but an immutable store blob is copied, unless the caller
	 * asked to map the file itself: a plain directory's file may be
	 * truncated, and a mount's FUSE file needs its daemon for every page
	 * fault (a dead daemon would turn the host's next access into SIGBUS). */
	if (!direct && !(d->flags & (ST_SNAPDIR_MAP_FILES | ST_SNAPDIR_VIA_FUSE))) {
		if (!d->use.starts && layer_use_build(d->m, &d->use) < 0) {
			st_sys_close(fd);
			return st_why(why, whylen, -ENOMEM, "out of memory");
		}
		const struct page_run *runs = d->use.runs + d->use.starts[i];
		size_t nruns = (size_t)(d->use.starts[i + 1] - d->use.starts[i]);
		uint64_t bytes = 0;
		st_id uses;
		st_id_hash(runs, nruns * sizeof(*runs), &uses);
		for (size_t r = 0; r < nruns; r++)
			bytes += runs[r].n * ST_PAGE_SIZE;
		bool verified = false;
		int mfd = copies_find(c, &l->id, &uses, &st, &verified);
		if (mfd >= 0) {
			if (verify && !verified) {
				if ((rc = verify_mfd(fd, mfd, size, runs, nruns, &l->id)) < 0) {
					st_sys_close(mfd);
					st_sys_close(fd);
					goto out_fail;
				}
				copies_mark_verified(c, &l->id, &uses, &st);
			}
		} else {
			if ((rc = copy_private(fd, size, runs, nruns, &l->id, verify, &mfd)) < 0) {
				st_sys_close(fd);
				goto out_fail;
			}
			copies_add(c, &l->id, &uses, bytes, &st, mfd, verify);
		}
		st_sys_close(fd);
		fd = mfd;
		verify = false; /* hashed while copying, or when kept */
	}
	if (verify && (rc = verify_fd(fd, size, &l->id)) < 0) {
		st_sys_close(fd);
		goto out_fail;
	}
	d->fds[i] = fd;
	return 0;
out_fail:
	return layer_fail(d, hex, rc, why, whylen);
}

/* ------------------------------------------------------ the restore answer */

int st_restore_answer_read(const char *buf, size_t n, const char *store, struct st_snapcache *c,
			   struct st_manifest **out)
{
	char why[ST_WHY_LEN], want[PATH_MAX];
	struct st_restore_answer a;
	struct st_restore_layer l;
	struct st_manifest *m = NULL;
	int rc;

	if (st_restore_decode(buf, n, &a) < 0)
		return 0;
	if ((rc = parse_manifest(c, a.manifest, a.manifest_len, &m, why, sizeof(why))) < 0)
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
	if ((fd = st_sys_openat(AT_FDCWD, path, O_RDONLY | O_NOFOLLOW, 0)) < 0)
		return -1;
	if (st_sys_fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != size) {
		st_sys_close(fd);
		return -1;
	}
	return fd;
}

/*
 * On a strata mount, one getxattr of the directory's user.strata.restore
 * brings manifest.json's bytes and every layer's backing blob path
 * (store/mountabi.h): one daemon round trip instead of an open and release
 * of manifest.json plus a getxattr per layer. Only asked on a strata mount
 * (d->store), where the daemon answers it from the same bytes it serves as
 * manifest.json, so what is restored is what `strata verify` of the path
 * checks; on any other directory the xattr is someone's file content and is
 * ignored. Each blob is checked as open_backing checks it. It is only a
 * shortcut: returns 1 if d is now open, 0 to read the files instead (no such
 * xattr, an answer too large for one, anything in it unusable), or an error
 * (out of memory, a layer that fails verification).
 */
static int open_via_restore_xattr(struct st_snapdir *d, struct st_snapcache *c, char *why, size_t whylen)
{
	char hex[ST_ID_HEX_LEN + 1], want[PATH_MAX], *buf;
	struct st_manifest *m = NULL;
	int *fds = NULL, rc = 0;
	uint32_t nopen = 0;
	ssize_t n;

	if (!d->store)
		return 0;
	if (!(buf = st_sys_malloc(ST_XATTR_VALUE_MAX)))
		return st_why(why, whylen, -ENOMEM, "out of memory");
	n = st_sys_getxattr(d->path, ST_XATTR_RESTORE, buf, ST_XATTR_VALUE_MAX, 0);
	rc = n > 0 ? st_restore_answer_read(buf, (size_t)n, d->store, c, &m) : 0;
	if (rc <= 0) {
		free(buf);
		return rc < 0 ? st_why(why, whylen, rc, "out of memory") : 0;
	}
	struct st_restore_answer a;
	struct st_restore_layer e;
	st_restore_decode(buf, (size_t)n, &a); /* decoded once already */
	if (!(fds = st_sys_malloc((m->nlayers + 1) * sizeof(*fds)))) {
		rc = st_why(why, whylen, -ENOMEM, "out of memory");
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
		if ((d->flags & ST_SNAPDIR_VERIFY) &&
		    (rc = verify_fd(fds[nopen], l->pages * ST_PAGE_SIZE, &l->id)) < 0) {
			st_sys_close(fds[nopen]);
			rc = layer_fail(d, hex, rc, why, whylen);
			goto out_free;
		}
	}
	d->m = m;
	d->fds = fds;
	free(buf);
	return 1;
out_free:
	while (nopen > 0)
		st_sys_close(fds[--nopen]);
	free(fds);
	free(buf);
	st_manifest_free(m);
	d->ndirect = 0;
	return rc;
}

/* ------------------------------------------------------------- open/close */

int st_snapdir_open(const char *path, unsigned flags, struct st_snapcache *c, struct st_snapdir **out, char *why,
		    size_t whylen)
{
	char store[PATH_MAX], *text = NULL;
	struct st_snapdir *d;
	struct stat st;
	size_t tlen = 0;
	int rc;

	if (why && whylen)
		why[0] = '\0';
	if ((rc = st_sys_fstatat(AT_FDCWD, path, &st, 0)) < 0) {
		if (rc == -ENOTCONN)
			return st_why(why, whylen, rc, "%s is on a strata mount whose daemon is gone "
				      "(unmount it with 'strata umount' and mount again)", path);
		return st_why(why, whylen, rc, "%s: %s", path, st_strerror(rc));
	}
	if (!S_ISDIR(st.st_mode))
		return st_why(why, whylen, -ENOTDIR, "%s is not a snapshot directory (not a directory)", path);
	d = st_sys_calloc(1, sizeof(*d));
	if (!d || !(d->path = st_sys_strdup(path))) {
		free(d);
		return st_why(why, whylen, -ENOMEM, "out of memory");
	}
	d->flags = flags;
	if (mount_store(c, path, st.st_dev, store, sizeof(store)) == 1 && !(d->store = st_sys_strdup(store))) {
		rc = st_why(why, whylen, -ENOMEM, "out of memory");
		goto out_close;
	}
	if (!(flags & ST_SNAPDIR_VIA_FUSE) && (rc = open_via_restore_xattr(d, c, why, whylen)) != 0) {
		if (rc < 0)
			goto out_close;
		*out = d;
		return 0;
	}
	char mwhy[ST_WHY_LEN] = "";
	rc = st_snapdir_manifest_text(path, &text, &tlen, mwhy, sizeof(mwhy));
	if (rc == 0)
		rc = parse_manifest(c, text, tlen, &d->m, mwhy, sizeof(mwhy));
	free(text);
	if (rc < 0) {
		st_why(why, whylen, rc, "%s is not a usable snapshot directory: %s", path,
		       rc == -ENOENT ? "it has no manifest.json" : mwhy[0] ? mwhy : st_strerror(rc));
		goto out_close;
	}
	if (!(d->fds = st_sys_malloc((d->m->nlayers + 1) * sizeof(*d->fds)))) {
		rc = st_why(why, whylen, -ENOMEM, "out of memory");
		goto out_close;
	}
	for (uint32_t i = 0; i < d->m->nlayers; i++)
		d->fds[i] = -1;
	for (uint32_t i = 0; i < d->m->nlayers; i++)
		if ((rc = open_layer(d, c, i, why, whylen)) < 0)
			goto out_close;
	*out = d;
	return 0;
out_close:
	st_snapdir_close(d);
	return rc;
}

void st_snapdir_close(struct st_snapdir *d)
{
	if (!d)
		return;
	for (uint32_t i = 0; d->fds && i < d->m->nlayers; i++)
		if (d->fds[i] >= 0)
			st_sys_close(d->fds[i]);
	free(d->fds);
	layer_use_free(&d->use);
	st_manifest_free(d->m);
	free(d->store);
	free(d->path);
	free(d);
}

const struct st_manifest *st_snapdir_manifest(const struct st_snapdir *d)
{
	return d->m;
}

unsigned st_snapdir_direct_layers(const struct st_snapdir *d)
{
	return d->ndirect;
}

bool st_snapdir_on_mount(const struct st_snapdir *d)
{
	return d->store != NULL;
}

int st_snapdir_layer_dup(const struct st_snapdir *d, const st_id *id, int *fd)
{
	for (uint32_t i = 0; i < d->m->nlayers; i++) {
		if (!st_id_equal(&d->m->layers[i].id, id))
			continue;
		int nfd = st_sys_dup(d->fds[i]);
		if (nfd < 0)
			return nfd;
		*fd = nfd;
		return 0;
	}
	return -ENOENT;
}
