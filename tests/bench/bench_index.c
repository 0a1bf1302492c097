/* bench_index.c: index benchmarks: snapshot commit (sync / no sync), tag lookup, export and import of 256 MiB. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench.h"
#include "index/index.h"
#include "store/store.h"

#define MiB (1024ull * 1024)
#define COMMIT_LAYERS 4096   /* fresh one-page layers, one per commit: more than any run uses */
#define TAGS 1000            /* tags present during tag_lookup */
#define BIG (256 * MiB)

struct ix_bench {
	char dir[256];
	char store[300];
	struct st_store *s;
	struct ix *ix;
	st_id *layers;
	unsigned next;
	int fd;               /* floor: a file in the store's filesystem */
	/* export / import */
	char out[320];
	char other[320];
	st_id big;
	st_id layer_big;      /* its one layer */
};

static int open_store(struct ix_bench *ib, const char *path, enum st_sync sync)
{
	struct st_store_opts so = { .sync = sync };
	int rc;

	if ((rc = st_store_init(path, &so)) < 0 || (rc = st_store_open(path, 0, &ib->s)) < 0)
		return rc;
	if ((rc = ix_open(ib->s, NULL, &ib->ix)) < 0) {
		st_store_close(ib->s);
		ib->s = NULL;
	}
	return rc;
}

static int bench_new(struct ix_bench **out, enum st_sync sync)
{
	struct ix_bench *ib = calloc(1, sizeof(*ib));
	const char *tmp = getenv("TMPDIR");
	int rc;

	if (!ib)
		return -ENOMEM;
	ib->fd = -1;
	snprintf(ib->dir, sizeof(ib->dir), "%s/strata-bench-ix-XXXXXX", tmp && *tmp ? tmp : "/var/tmp");
	if (!mkdtemp(ib->dir)) {
		free(ib);
		return -errno;
	}
	snprintf(ib->store, sizeof(ib->store), "%s/store", ib->dir);
	if ((rc = open_store(ib, ib->store, sync)) < 0) {
		bench_rm_rf(ib->dir);
		free(ib);
		return rc;
	}
	*out = ib;
	return 0;
}

static void bench_free(void *state)
{
	struct ix_bench *ib = state;

	if (!ib)
		return;
	if (ib->fd >= 0)
		close(ib->fd);
	ix_close(ib->ix);
	st_store_close(ib->s);
	bench_rm_rf(ib->dir);
	free(ib->layers);
	free(ib);
}

/* ---- floor: what one durable commit cannot beat (a 4 KiB write + fdatasync) */

static int floor_setup(void **state, const void *arg)
{
	struct ix_bench *ib;
	char path[400];
	int rc = bench_new(&ib, ST_SYNC_FULL);

	(void)arg;
	if (rc < 0)
		return rc;
	snprintf(path, sizeof(path), "%s/floor", ib->dir);
	ib->fd = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
	if (ib->fd < 0) {
		rc = -errno;
		bench_free(ib);
		return rc;
	}
	*state = ib;
	return 0;
}

static int floor_iter(void *state, struct bench_timer *t)
{
	struct ix_bench *ib = state;
	static char page[4096];

	(void)t;
	page[0]++;
	if (pwrite(ib->fd, page, sizeof(page), 0) != (ssize_t)sizeof(page) || fdatasync(ib->fd) < 0)
		return -errno;
	return 0;
}

/* ---- snapshot_commit: publish a 2-layer snapshot (one shared, one fresh layer) */

static int commit_setup(void **state, const void *arg)
{
	const enum st_sync *sync = arg;
	struct ix_bench *ib;
	uint8_t page[ST_PAGE_SIZE];
	int rc = bench_new(&ib, *sync);

	if (rc < 0)
		return rc;
	ib->layers = calloc(COMMIT_LAYERS + 1, sizeof(*ib->layers));
	if (!ib->layers) {
		bench_free(ib);
		return -ENOMEM;
	}
	/* Blobs are put untimed here: the case times the index commit alone. */
	st_store_set_sync(ib->s, ST_SYNC_NONE);
	for (unsigned i = 0; i <= COMMIT_LAYERS; i++) {
		bench_fill(page, sizeof(page), i + 1);
		if ((rc = st_blob_put(ib->s, page, sizeof(page), &ib->layers[i], NULL)) < 0) {
			bench_free(ib);
			return rc;
		}
	}
	st_store_set_sync(ib->s, *sync);
	*state = ib;
	return 0;
}

static int commit_iter(void *state, struct bench_timer *t)
{
	struct ix_bench *ib = state;
	struct st_layer_ref layers[2];
	struct st_range ranges[2];
	struct st_manifest m = {
		.version = ST_MANIFEST_VERSION, .mem_size = 64 * MiB, .nlayers = 2, .layers = layers,
		.nranges = 2, .ranges = ranges, .created = 1700000000000000000ll,
	};
	char tag[32];

	(void)t;
	if (ib->next >= COMMIT_LAYERS)
		return -ENOSPC;
	layers[0] = (struct st_layer_ref){ .id = ib->layers[COMMIT_LAYERS], .pages = 1 };
	layers[1] = (struct st_layer_ref){ .id = ib->layers[ib->next], .pages = 1 };
	ranges[0] = (struct st_range){ .gpage = 0, .npages = 1, .layer = 0, .lpage = 0 };
	ranges[1] = (struct st_range){ .gpage = 1, .npages = 1, .layer = 1, .lpage = 0 };
	snprintf(tag, sizeof(tag), "snap-%u", ib->next++);
	return ix_snap_commit(ib->ix, &m, tag, 0, NULL);
}

/* ---- tag_lookup: read txn + tag get + end, among TAGS tags */

static int tags_setup(void **state, const void *arg)
{
	static const enum st_sync none = ST_SYNC_NONE;
	struct ix_bench *ib;
	int rc = commit_setup((void **)&ib, &none);

	(void)arg;
	if (rc < 0)
		return rc;
	for (unsigned i = 0; i < TAGS; i++)
		if ((rc = commit_iter(ib, NULL)) < 0) {
			bench_free(ib);
			return rc;
		}
	ib->next = 0;
	*state = ib;
	return 0;
}

static int tags_iter(void *state, struct bench_timer *t)
{
	struct ix_bench *ib = state;
	struct ix_txn *txn;
	char tag[32];
	st_id id;
	int rc;

	(void)t;
	snprintf(tag, sizeof(tag), "snap-%u", (ib->next++ * 7919u) % TAGS);
	if ((rc = ix_txn_begin(ib->ix, &txn)) < 0)
		return rc;
	rc = ix_tag_get(txn, tag, &id);
	ix_txn_end(txn);
	return rc;
}

/* ---- export / import of a 256 MiB snapshot (every page non-zero) */

static int big_setup(void **state, const void *arg)
{
	struct ix_bench *ib;
	struct st_manifest *m = NULL;
	uint8_t *img;
	int rc = bench_new(&ib, ST_SYNC_DEFAULT);

	(void)arg;
	if (rc < 0)
		return rc;
	img = mmap(NULL, BIG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (img == MAP_FAILED) {
		bench_free(ib);
		return -ENOMEM;
	}
	bench_fill(img, BIG, 42);
	for (size_t off = 0; off < BIG; off += ST_PAGE_SIZE)
		img[off] |= 1; /* no zero page: all 256 MiB is stored */
	rc = st_ingest_image(ib->s, img, BIG, NULL, &m, NULL);
	munmap(img, BIG);
	if (rc == 0 && m->nlayers == 1)
		ib->layer_big = m->layers[0].id;
	if (rc == 0)
		rc = ix_snap_commit(ib->ix, m, "big", 0, &ib->big);
	st_manifest_free(m);
	if (rc < 0) {
		bench_free(ib);
		return rc;
	}
	snprintf(ib->out, sizeof(ib->out), "%s/export", ib->dir);
	snprintf(ib->other, sizeof(ib->other), "%s/other", ib->dir);
	*state = ib;
	return 0;
}

static int export_iter(void *state, struct bench_timer *t)
{
	struct ix_bench *ib = state;
	int rc;

	bench_rm_rf(ib->out);
	bench_timer_start(t);
	rc = ix_export(ib->ix, "big", ib->out);
	bench_timer_stop(t);
	return rc;
}

/* Floor for both: copy the 256 MiB layer file to a new file and fsync it. */
static int copy_iter(void *state, struct bench_timer *t)
{
	struct ix_bench *ib = state;
	char dst[400];
	int in, out, rc = 0;

	snprintf(dst, sizeof(dst), "%s/copy", ib->dir);
	unlink(dst);
	in = -1;
	if (st_blob_open(ib->s, &ib->layer_big, &in) < 0)
		return -ENOENT;
	bench_timer_start(t);
	out = open(dst, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
	if (out < 0) {
		rc = -errno;
		goto out_close;
	}
	for (uint64_t left = BIG; left > 0;) {
		ssize_t n = copy_file_range(in, NULL, out, NULL, left, 0);
		if (n <= 0) {
			rc = n < 0 ? -errno : -EIO;
			break;
		}
		left -= (uint64_t)n;
	}
	if (rc == 0 && fsync(out) < 0)
		rc = -errno;
	close(out);
out_close:
	bench_timer_stop(t);
	close(in);
	return rc;
}

static int import_setup(void **state, const void *arg)
{
	struct ix_bench *ib;
	int rc = big_setup((void **)&ib, arg);

	if (rc < 0)
		return rc;
	if ((rc = ix_export(ib->ix, "big", ib->out)) < 0) {
		bench_free(ib);
		return rc;
	}
	*state = ib;
	return 0;
}

static int import_iter(void *state, struct bench_timer *t)
{
	struct ix_bench *ib = state;
	struct ix_bench u = { 0 };
	struct ix_import_stats st;
	st_id id;
	int rc;

	/* A fresh, empty store each time (untimed): the import stores all 256 MiB. */
	bench_rm_rf(ib->other);
	if ((rc = open_store(&u, ib->other, ST_SYNC_DEFAULT)) < 0)
		return rc;
	bench_timer_start(t);
	rc = ix_import_dir(u.ix, ib->out, "big", 0, &id, &st, NULL, 0);
	bench_timer_stop(t);
	ix_close(u.ix);
	st_store_close(u.s);
	if (rc == 0 && (!st_id_equal(&id, &ib->big) || st.bytes_added != BIG))
		rc = -EIO;
	return rc;
}

void bench_index(struct bench *b)
{
	static const enum st_sync full = ST_SYNC_FULL, none = ST_SYNC_NONE;

	static const char *names[] = { "index/floor/write_4KiB_fdatasync", "index/snapshot_commit/sync_full",
				       "index/snapshot_commit/sync_none", "index/tag_lookup", "index/floor/copy_256MiB_fsync",
				       "store/export_256MiB", "store/import_256MiB" };
	bool any = false;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		any = any || bench_selected(b, names[i]);
	if (!any)
		return;
	bench_run(b, &(struct bench_case){ .name = "index/floor/write_4KiB_fdatasync", .setup = floor_setup,
					   .iter = floor_iter, .teardown = bench_free, .iters = 200 });
	bench_run(b, &(struct bench_case){ .name = "index/snapshot_commit/sync_full",
					   .floor = "index/floor/write_4KiB_fdatasync", .setup = commit_setup,
					   .iter = commit_iter, .teardown = bench_free, .arg = &full, .iters = 200 });
	bench_run(b, &(struct bench_case){ .name = "index/snapshot_commit/sync_none",
					   .floor = "index/floor/write_4KiB_fdatasync", .setup = commit_setup,
					   .iter = commit_iter, .teardown = bench_free, .arg = &none, .iters = 1000 });
	bench_run(b, &(struct bench_case){ .name = "index/tag_lookup", .setup = tags_setup, .iter = tags_iter,
					   .teardown = bench_free, .iters = 10000, .warmup = 100 });
	bench_run(b, &(struct bench_case){ .name = "index/floor/copy_256MiB_fsync", .setup = big_setup,
					   .iter = copy_iter, .teardown = bench_free, .iters = 7, .warmup = 1,
					   .max_seconds = 20, .bytes_per_iter = BIG });
	bench_run(b, &(struct bench_case){ .name = "store/export_256MiB", .floor = "index/floor/copy_256MiB_fsync",
					   .setup = big_setup, .iter = export_iter,
					   .teardown = bench_free, .iters = 7, .warmup = 1, .max_seconds = 20,
					   .bytes_per_iter = BIG });
	bench_run(b, &(struct bench_case){ .name = "store/import_256MiB", .floor = "index/floor/copy_256MiB_fsync",
					   .setup = import_setup,
					   .iter = import_iter, .teardown = bench_free, .iters = 7, .warmup = 1,
					   .max_seconds = 20, .bytes_per_iter = BIG });
}
