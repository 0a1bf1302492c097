/* bench_store.c: store benchmarks: raw XXH3-128, blob put/verify per sync policy, image ingest. */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench.h"
#include "store/store.h"

#define MiB (1024ull * 1024)
#define PG ST_PAGE_SIZE

/* State shared by the group's cases. */
struct store_bench {
	struct st_store *store;
	char dir[256];
	uint8_t *buf;       /* blob_put / hash input */
	size_t len;
	uint64_t counter;   /* makes every put new content (no dedup) */
	st_id last;
	enum st_sync sync;
	/* ingest */
	uint8_t *image;
	uint64_t image_len;
	struct st_manifest *parent;
	struct st_ingest_stats stats;
};

static void *map_anon(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* ---- raw hash: the floor */

static int hash_iter(void *state, struct bench_timer *t)
{
	struct store_bench *sb = state;
	st_id id;

	(void)t;
	st_id_hash(sb->buf, sb->len, &id);
	__asm__ volatile("" : : "r"(&id) : "memory");
	return 0;
}

/* ---- put / verify */

static int put_iter(void *state, struct bench_timer *t)
{
	struct store_bench *sb = state;
	bool dedup;
	int rc;

	sb->counter++;
	memcpy(sb->buf, &sb->counter, sizeof(sb->counter));
	st_store_set_sync(sb->store, sb->sync);
	bench_timer_start(t);
	rc = st_blob_put(sb->store, sb->buf, sb->len, &sb->last, &dedup);
	bench_timer_stop(t);
	if (rc < 0)
		return rc < -1000 ? -EIO : rc;
	if (dedup)
		return -EEXIST; /* the case would be measuring the dedup path */
	/* Keep the disk footprint flat; untimed. */
	st_store_set_sync(sb->store, ST_SYNC_NONE);
	rc = st_blob_del(sb->store, &sb->last);
	return rc < -1000 ? -EIO : rc;
}

static int verify_iter(void *state, struct bench_timer *t)
{
	struct store_bench *sb = state;
	int rc;

	(void)t;
	rc = st_blob_verify(sb->store, &sb->last);
	return rc < -1000 ? -EIO : rc;
}

/* ---- ingest */

/* A 256 MiB image with 64 MiB of non-zero pages: runs of 1..64 pages and
 * single pages scattered between zero gaps. */
static void build_image(uint8_t *img, uint64_t len, uint64_t nonzero)
{
	uint64_t pages = len / PG, want = nonzero / PG, done = 0, x = 12345;
	uint64_t g = 0;

	memset(img, 0, len);
	while (done < want && g < pages) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		uint64_t run = (x >> 33) % 4 == 0 ? 1 : 1 + (x >> 40) % 64; /* a quarter are single pages */
		uint64_t gap = 1 + (x >> 20) % 5;
		if (run > want - done)
			run = want - done;
		if (g + run > pages)
			run = pages - g;
		for (uint64_t i = 0; i < run; i++)
			bench_fill(img + (g + i) * PG, PG, g + i + 1);
		done += run;
		g += run + gap;
	}
}

/* Change npages scattered non-zero... and zero pages alike, spread evenly. */
static void scatter_change(uint8_t *img, uint64_t len, uint64_t npages, uint64_t seed)
{
	uint64_t pages = len / PG, stride = pages / npages;

	for (uint64_t i = 0; i < npages; i++) {
		uint64_t g = i * stride + (seed + i * 7) % stride;
		bench_fill(img + g * PG, PG, seed * 1000003 + g);
	}
}

static int ingest_first_iter(void *state, struct bench_timer *t)
{
	struct store_bench *sb = state;
	struct st_manifest *m;
	int rc;

	bench_timer_start(t);
	rc = st_ingest_image(sb->store, sb->image, sb->image_len, NULL, &m, &sb->stats);
	bench_timer_stop(t);
	if (rc < 0)
		return rc < -1000 ? -EIO : rc;
	/* Drop the layer so the next iteration stores it again (untimed). */
	for (uint32_t i = 0; i < m->nlayers; i++)
		st_blob_del(sb->store, &m->layers[i].id);
	st_manifest_free(m);
	return 0;
}

static int ingest_change_iter(void *state, struct bench_timer *t)
{
	struct store_bench *sb = state;
	struct st_manifest *m;
	int rc;

	bench_timer_start(t);
	rc = st_ingest_image(sb->store, sb->image, sb->image_len, sb->parent, &m, &sb->stats);
	bench_timer_stop(t);
	if (rc < 0)
		return rc < -1000 ? -EIO : rc;
	/* Remove only the new layer (the last one); the parent's stay. */
	if (m->nlayers > sb->parent->nlayers || !st_id_equal(&m->layers[m->nlayers - 1].id,
							       &sb->parent->layers[sb->parent->nlayers - 1].id))
		st_blob_del(sb->store, &m->layers[m->nlayers - 1].id);
	st_manifest_free(m);
	return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path) < 0 ? 0 : 0;
}

static int setup_store(struct store_bench *sb)
{
	const char *tmp = getenv("TMPDIR");
	char path[300];
	int rc;

	snprintf(sb->dir, sizeof(sb->dir), "%s/strata-bench-store-XXXXXX", tmp && *tmp ? tmp : "/var/tmp");
	if (!mkdtemp(sb->dir))
		return -errno;
	snprintf(path, sizeof(path), "%s/store", sb->dir);
	if ((rc = st_store_init(path, NULL)) < 0 || (rc = st_store_open(path, 0, &sb->store)) < 0) {
		fprintf(stderr, "bench store: %s: %s\n", path, st_strerror(rc));
		return -EIO;
	}
	return 0;
}

static void print_ingest_note(struct bench *b, const char *name, const struct st_ingest_stats *st)
{
	char n[160];

	snprintf(n, sizeof(n), "%s/bytes_added", name);
	bench_note(b, n, (double)st->bytes_added / MiB, "MiB");
	snprintf(n, sizeof(n), "%s/pages_stored", name);
	bench_note(b, n, (double)st->pages_stored, "pages");
}

/* Cases share one state built by bench_store(); setup just hands it over. */
static int pass_state(void **state, const void *arg)
{
	*state = (void *)arg;
	return 0;
}

void bench_store(struct bench *b)
{
	static const struct {
		const char *name;
		enum st_sync sync;
	} policies[] = { { "store/blob_put/sync_none", ST_SYNC_NONE }, { "store/blob_put/sync_full", ST_SYNC_FULL } };
	static const struct {
		const char *name;
		enum st_sync sync;
	} small[] = { { "store/blob_put_4KiB/sync_none", ST_SYNC_NONE },
		      { "store/blob_put_4KiB/sync_full", ST_SYNC_FULL } };
	struct store_bench sb = { 0 };
	bool quick = bench_quick(b);
	const uint64_t hash_len = 256 * MiB, put_len = 64 * MiB;
	const uint64_t image_len = 256 * MiB, nonzero = 64 * MiB, change = 4 * MiB;

	bool want_blob = false, want_ingest = bench_selected(b, "store/ingest_256MiB_64MiB_nonzero") ||
					 bench_selected(b, "store/ingest_4MiB_scattered_change");
	const char *blob_cases[] = { "store/xxh3_128_raw", "store/xxh3_128_raw_64MiB", "store/blob_verify",
				     policies[0].name, policies[1].name, small[0].name, small[1].name };
	for (size_t i = 0; i < sizeof(blob_cases) / sizeof(blob_cases[0]); i++)
		want_blob = want_blob || bench_selected(b, blob_cases[i]);
	if (!want_blob && !want_ingest)
		return;
	if (setup_store(&sb) < 0) {
		fprintf(stderr, "bench store: cannot create a store under %s\n", sb.dir);
		return;
	}
	if (!want_blob)
		goto ingest;
	sb.buf = map_anon(hash_len);
	if (!sb.buf)
		goto out_rm;
	bench_fill(sb.buf, hash_len, 1);

	/* Floors: raw XXH3-128 of 256 MiB, and of the 64 MiB the put/verify
	 * cases handle (so their ratio compares equal work). */
	sb.len = hash_len;
	bench_run(b, &(struct bench_case){ .name = "store/xxh3_128_raw", .setup = pass_state, .iter = hash_iter,
					   .arg = &sb, .bytes_per_iter = hash_len, .warmup = 2, .iters = 30 });
	sb.len = put_len;
	bench_run(b, &(struct bench_case){ .name = "store/xxh3_128_raw_64MiB", .setup = pass_state,
					   .iter = hash_iter, .arg = &sb, .bytes_per_iter = put_len, .warmup = 2,
					   .iters = 50 });
	for (size_t i = 0; i < sizeof(policies) / sizeof(policies[0]); i++) {
		sb.sync = policies[i].sync;
		bench_run(b, &(struct bench_case){ .name = policies[i].name, .floor = "store/xxh3_128_raw_64MiB",
						   .setup = pass_state, .iter = put_iter, .arg = &sb,
						   .bytes_per_iter = put_len, .warmup = 2, .iters = 30,
						   .max_seconds = 10 });
	}
	/* One blob left in the store for verify (page-cache hot). */
	sb.sync = ST_SYNC_NONE;
	st_store_set_sync(sb.store, ST_SYNC_NONE);
	if (st_blob_put(sb.store, sb.buf, put_len, &sb.last, NULL) == 0)
		bench_run(b, &(struct bench_case){ .name = "store/blob_verify", .floor = "store/xxh3_128_raw_64MiB",
						   .setup = pass_state, .iter = verify_iter, .arg = &sb,
						   .bytes_per_iter = put_len, .warmup = 2, .iters = 50 });
	/* The fixed cost of a put: a one-page blob under each policy. */
	sb.len = PG;
	for (size_t i = 0; i < sizeof(small) / sizeof(small[0]); i++) {
		sb.sync = small[i].sync;
		bench_run(b, &(struct bench_case){ .name = small[i].name, .setup = pass_state, .iter = put_iter,
						   .arg = &sb, .warmup = 5, .iters = 200 });
	}
	munmap(sb.buf, hash_len);
	sb.buf = NULL;

	/* Ingest: 256 MiB image with 64 MiB non-zero, then 4 MiB of scattered pages changed. */
ingest:
	if (!want_ingest)
		goto out_rm;
	st_store_set_sync(sb.store, ST_SYNC_DEFAULT);
	sb.image_len = image_len;
	sb.image = map_anon(image_len);
	if (!sb.image)
		goto out_rm;
	build_image(sb.image, image_len, nonzero);
	bench_run(b, &(struct bench_case){ .name = "store/ingest_256MiB_64MiB_nonzero", .setup = pass_state,
					   .iter = ingest_first_iter, .arg = &sb, .warmup = 1, .iters = quick ? 3 : 10,
					   .max_seconds = 20 });
	print_ingest_note(b, "store/ingest_256MiB_64MiB_nonzero", &sb.stats);
	st_store_set_sync(sb.store, ST_SYNC_DEFAULT);
	if (st_ingest_image(sb.store, sb.image, image_len, NULL, &sb.parent, NULL) < 0)
		goto out_rm;
	scatter_change(sb.image, image_len, change / PG, 77);
	bench_run(b, &(struct bench_case){ .name = "store/ingest_4MiB_scattered_change", .setup = pass_state,
					   .iter = ingest_change_iter, .arg = &sb, .warmup = 1, .iters = quick ? 3 : 10,
					   .max_seconds = 20 });
	print_ingest_note(b, "store/ingest_4MiB_scattered_change", &sb.stats);
out_rm:
	if (sb.buf)
		munmap(sb.buf, hash_len);
	if (sb.image)
		munmap(sb.image, image_len);
	st_manifest_free(sb.parent);
	st_store_close(sb.store);
	nftw(sb.dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}
