/* bench_checkpoint.c: `strata bench checkpoint`: a durable checkpoint after every call, one chain, beside the store's fdatasync floor; its growth and the last checkpoint's restore beside a flat snapshot's. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "index/index.h"
#include "store/store.h"
#include "vmm/vmm.h"
#ifdef IX_DELTA_DEPTH_MAX
#include "index/index_int.h" /* the record as stored: a manifest delta or the whole text */
#endif

/*
 * One sandbox (medium: a 64 MiB heap) in a store with the full sync
 * policy (ST_SYNC_FULL: blobs and directories fsync'd, the index commit
 * synced). Each checkpoint: a call fills 16 heap pages (64 KiB) with
 * content no earlier call wrote, at the next 16 pages of the heap; the
 * sandbox is captured (a child of the last checkpoint), committed and
 * rebased on it, so the chain grows by one. Beside it, in the same store
 * directory, the floor: a 4 KiB write and fdatasync.
 */
#define HEAP (64ull << 20)
#define PAGES 16

struct ckpt {
	char dir[PATH_MAX], store[PATH_MAX + 16];
	struct st_store *st;
	struct ix *ix;
	struct vmm_sandbox *sb;
	struct st_manifest *last;   /* the chain's last checkpoint */
	st_id last_id;
	unsigned n;                 /* checkpoints made */
	uint64_t pages_captured;    /* what the captures wrote to layers, pages */
	uint64_t *phase_ns;         /* the durable chain's call, capture, commit, rebase times: 4 per checkpoint */
	size_t nphase, capphase;    /* checkpoints in phase_ns, room for */
	int floor_fd;
	st_id *ids;                 /* the chain's checkpoints, oldest first */
	size_t nids, capids;
};

static struct ckpt *chain; /* the chain's state, kept for the restore cases after it */

static int fill(struct vmm_sandbox *sb, unsigned k)
{
	struct vmm_value a[3] = {
		{ .type = VMM_I64, .i64 = PAGES },
		{ .type = VMM_I64, .i64 = (int64_t)((k * PAGES) % (HEAP / 4096 - PAGES)) },
		{ .type = VMM_I64, .i64 = (int64_t)k + 1 },
	};
	struct vmm_result r = { 0 };
	int rc = vmm_sandbox_call(sb, "fill_pages", a, 3, &r);

	vmm_result_clear(&r);
	return rc;
}

static void ckpt_free(struct ckpt *c)
{
	if (!c)
		return;
	vmm_sandbox_free(c->sb);
	st_manifest_free(c->last);
	free(c->ids);
	free(c->phase_ns);
	ix_close(c->ix);
	st_store_close(c->st);
	if (c->floor_fd >= 0)
		close(c->floor_fd);
	if (c->dir[0])
		bench_rm_rf(c->dir);
	free(c);
}

static int ckpt_new(struct ckpt **out)
{
	struct ckpt *c = calloc(1, sizeof(*c));
	struct st_store_opts o = { .sync = ST_SYNC_FULL };
	struct vmm_config cfg = { .heap_size = HEAP };
	char path[PATH_MAX + 32];
	int rc;

	if (!c)
		return -ENOMEM;
	c->floor_fd = -1;
	if ((rc = bench_tmpdir("strata-bench-ckpt", c->dir, sizeof(c->dir))) < 0)
		goto fail;
	snprintf(c->store, sizeof(c->store), "%s/store", c->dir);
	if ((rc = st_store_init(c->store, &o)) < 0 || (rc = st_store_open(c->store, 0, &c->st)) < 0 ||
	    (rc = ix_open(c->st, NULL, &c->ix)) < 0)
		goto fail;
	/* The parent: the guest after one call, captured and committed. */
	if ((rc = vmm_sandbox_new(bench_guest_path(), &cfg, &c->sb, NULL)) < 0 || (rc = fill(c->sb, 0)) < 0 ||
	    (rc = vmm_sandbox_capture(c->sb, c->st, &c->last)) < 0 ||
	    (rc = ix_snap_commit(c->ix, c->last, "parent", 0, &c->last_id)) < 0 ||
	    (rc = vmm_sandbox_rebase(c->sb, c->last, &c->last_id)) < 0)
		goto fail;
	snprintf(path, sizeof(path), "%s/floor", c->store);
	if ((c->floor_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0) {
		rc = -errno;
		goto fail;
	}
	*out = c;
	return 0;
fail:
	ckpt_free(c);
	return rc;
}

static int floor_setup(void **state, const void *arg)
{
	(void)arg;
	*state = chain;
	return 0;
}

static int floor_iter(void *state, struct bench_timer *t)
{
	struct ckpt *c = state;
	static uint8_t buf[4096];
	int rc = 0;

	(void)t;
	buf[0]++;
	if (pwrite(c->floor_fd, buf, sizeof(buf), 0) != (ssize_t)sizeof(buf) || fdatasync(c->floor_fd) < 0)
		rc = -errno;
	return rc;
}

static void no_teardown(void *state)
{
	(void)state;
}

static int ckpt_setup(void **state, const void *arg)
{
	(void)arg;
	*state = chain;
	return 0;
}

/* One checkpoint: the call, the capture (its layer blob durable), the
 * commit (synced) and the rebase. */
static int ckpt_iter(void *state, struct bench_timer *t)
{
	struct ckpt *c = state;
	struct st_manifest *m = NULL;
	struct vmm_snap_stats s0, s1;
	st_id id;
	int rc;

	(void)t;
	uint64_t t0, t1, t2, t3, t4;

	vmm_sandbox_snap_stats(c->sb, &s0);
	t0 = bench_now_ns();
	if ((rc = fill(c->sb, c->n + 1)) < 0)
		return rc;
	t1 = bench_now_ns();
	if ((rc = vmm_sandbox_capture(c->sb, c->st, &m)) < 0)
		return rc;
	t2 = bench_now_ns();
	if ((rc = ix_snap_commit(c->ix, m, NULL, 0, &id)) < 0)
		goto out_free_manifest;
	t3 = bench_now_ns();
	if ((rc = vmm_sandbox_rebase(c->sb, m, &id)) < 0)
		goto out_free_manifest;
	t4 = bench_now_ns();
	if (c->nphase < c->capphase) {
		uint64_t *v = c->phase_ns + 4 * c->nphase++;
		v[0] = t1 - t0;
		v[1] = t2 - t1;
		v[2] = t3 - t2;
		v[3] = t4 - t3;
	}
	vmm_sandbox_snap_stats(c->sb, &s1);
	c->pages_captured += s1.pages_captured - s0.pages_captured;
	st_manifest_free(c->last);
	c->last = m;
	c->last_id = id;
	c->n++;
	if (c->nids == c->capids) {
		size_t cap = c->capids ? 2 * c->capids : 256;
		st_id *v = realloc(c->ids, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		c->ids = v;
		c->capids = cap;
	}
	c->ids[c->nids++] = id;
	return 0;
out_free_manifest:
	st_manifest_free(m);
	return rc;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* The median of phase i over the chain (sorts a copy; 0 without memory). */
static double phase_median(const struct ckpt *c, int i)
{
	uint64_t *v = malloc(c->nphase * sizeof(*v));
	double m;

	if (!v)
		return 0;
	for (size_t k = 0; k < c->nphase; k++)
		v[k] = c->phase_ns[4 * k + (size_t)i];
	qsort(v, c->nphase, sizeof(*v), cmp_u64);
	m = c->nphase % 2 ? (double)v[c->nphase / 2] : ((double)v[c->nphase / 2 - 1] + (double)v[c->nphase / 2]) / 2;
	free(v);
	return m;
}

/* The index side of the chain: the bytes of its snapshot records as
 * stored, beside the bytes of its manifests written whole. */
static void chain_records(const struct ckpt *c, uint64_t *stored, uint64_t *whole)
{
	struct ix_txn *t;

	*stored = *whole = 0;
	if (ix_txn_begin(c->ix, &t) < 0)
		return;
	for (size_t i = 0; i < c->nids; i++) {
		struct ix_snap_info info;
		if (ix_snap_info(t, &c->ids[i], &info) < 0)
			break;
		*whole += info.manifest_len;
		*stored += info.manifest_len;
#ifdef IX_DELTA_DEPTH_MAX
		MDB_val v;
		if (ix_snap_rec_get(c->ix, t->txn, &c->ids[i], &v) == 0)
			*stored += v.mv_size - info.manifest_len;
#endif
	}
	ix_txn_end(t);
}

static uint64_t du_sum;
static int du_one(const char *path, const struct stat *st, int type, struct FTW *f)
{
	(void)path;
	(void)type;
	(void)f;
	du_sum += (uint64_t)st->st_blocks * 512;
	return 0;
}

/* Bytes the files under dir take on disk. */
static uint64_t du(const char *dir)
{
	du_sum = 0;
	nftw(dir, du_one, 16, FTW_PHYS);
	return du_sum;
}

/* A restore from the store: a new sandbox from m, one call (freed untimed). */
struct restore_arg {
	const struct st_manifest *m;
	struct st_store *st;
};

static int restore_setup(void **state, const void *arg)
{
	*state = (void *)arg;
	return 0;
}

static int restore_iter(void *state, struct bench_timer *t)
{
	const struct restore_arg *a = state;
	struct vmm_sandbox *sb = NULL;
	struct vmm_value v = { .type = VMM_I64, .i64 = 1 };
	struct vmm_result r = { 0 };
	int rc;

	bench_timer_start(t);
	rc = vmm_sandbox_from_snapshot(a->m, vmm_layer_open_store, a->st, NULL, &sb, NULL);
	if (rc == 0)
		rc = vmm_sandbox_call(sb, "touch_pages", &v, 1, &r);
	bench_timer_stop(t);
	vmm_result_clear(&r);
	vmm_sandbox_free(sb);
	return rc;
}

/* The same memory as the chain's end, in one capture of a new sandbox:
 * the same calls, then a single snapshot (one layer). */
static int flat_new(const struct ckpt *c, struct st_manifest **out)
{
	struct vmm_config cfg = { .heap_size = HEAP };
	struct vmm_sandbox *sb = NULL;
	int rc = vmm_sandbox_new(bench_guest_path(), &cfg, &sb, NULL);

	for (unsigned k = 0; rc == 0 && k <= c->n; k++)
		rc = fill(sb, k);
	if (rc == 0)
		rc = vmm_sandbox_capture(sb, c->st, out);
	if (rc == 0)
		rc = ix_snap_commit(c->ix, *out, "flat", 0, NULL);
	vmm_sandbox_free(sb);
	return rc;
}

void bench_checkpoint(struct bench *b)
{
	unsigned n = bench_quick(b) ? 100 : 1000;
	/* Floors are named whole: this backend's, as recorded. */
	const char *pre = bench_backend(b) == VMM_BACKEND_PROCESS ? "process/" : "";
	char floor[128], flat_name[128];

	if (!bench_selected_under(b, "checkpoint/"))
		return;
	if (ckpt_new(&chain) < 0) {
		fprintf(stderr, "bench: checkpoint: setup failed\n");
		return;
	}
	bench_run(b, &(struct bench_case){ .name = "checkpoint/floor/write_4KiB_fdatasync", .setup = floor_setup,
					   .iter = floor_iter, .teardown = no_teardown, .iters = 200, .max_seconds = 10 });
	uint64_t before = du(chain->store);
	/* Room for the chain and its warm-up; after it, capphase 0 stops the
	 * sync_none case adding to it. */
	if ((chain->phase_ns = calloc(4 * ((size_t)n + 1), sizeof(*chain->phase_ns))))
		chain->capphase = (size_t)n + 1;
	snprintf(floor, sizeof(floor), "%scheckpoint/floor/write_4KiB_fdatasync", pre);
	snprintf(flat_name, sizeof(flat_name), "%scheckpoint/restore_flat", pre);
	bench_run(b, &(struct bench_case){ .name = "checkpoint/call_capture_commit_64KiB", .floor = floor, .setup = ckpt_setup,
					   .iter = ckpt_iter, .teardown = no_teardown, .warmup = 1, .iters = n,
					   .max_seconds = 600 });
	uint64_t after = du(chain->store);
	chain->capphase = 0;
	if (chain->n) {
		/* The warm-up's checkpoint is in the chain too; the growth is
		 * over all the chain's links (the floor file stays 4 KiB). */
		bench_note(b, "checkpoint/chain_length", chain->n, "checkpoints");
		bench_note(b, "checkpoint/store_growth_per_checkpoint", (double)(after - before) / 1024.0 / chain->n,
			   "KiB (store on disk)");
		bench_note(b, "checkpoint/captured_per_checkpoint", (double)chain->pages_captured * 4.0 / chain->n,
			   "KiB (pages the captures wrote)");
		bench_note(b, "checkpoint/unique_per_checkpoint", PAGES * 4.0, "KiB (new pages each call writes)");
		/* Where a durable checkpoint's time goes (the median over the
		 * chain, warm-up included): the call, the capture (the layer
		 * written and made durable), the commit (LMDB's two syncs) and
		 * the rebase. */
		static const char *const phase[4] = { "call", "capture", "commit", "rebase" };
		for (int i = 0; i < 4 && chain->nphase; i++) {
			char name[96];
			snprintf(name, sizeof(name), "checkpoint/phase/%s", phase[i]);
			bench_note(b, name, phase_median(chain, i) / 1e3, "us");
		}
		bench_note(b, "checkpoint/last_layers", chain->last->nlayers, "layers");
		bench_note(b, "checkpoint/last_ranges", chain->last->nranges, "ranges");
		uint64_t stored, whole;
		chain_records(chain, &stored, &whole);
		bench_note(b, "checkpoint/index_records_per_checkpoint", (double)stored / chain->nids, "B (snapshot records as stored)");
		bench_note(b, "checkpoint/manifests_whole_per_checkpoint", (double)whole / chain->nids, "B (the same manifests whole)");
	}
	struct st_manifest *flat = NULL;
	if (flat_new(chain, &flat) == 0) {
		struct restore_arg fa = { flat, chain->st }, la = { chain->last, chain->st };
		bench_run(b, &(struct bench_case){ .name = "checkpoint/restore_flat", .setup = restore_setup,
						   .iter = restore_iter, .teardown = no_teardown, .arg = &fa,
						   .iters = 50, .max_seconds = 10 });
		bench_run(b, &(struct bench_case){ .name = "checkpoint/restore_last", .floor = flat_name,
						   .setup = restore_setup, .iter = restore_iter, .teardown = no_teardown,
						   .arg = &la, .iters = 50, .max_seconds = 10 });
	} else {
		fprintf(stderr, "bench: checkpoint/restore_flat: the flat snapshot could not be made\n");
	}
	st_manifest_free(flat);
#ifdef IX_DELTA_DEPTH_MAX
	/* The same checkpoint with no sync at all (blob, directory and the
	 * index's commit): what the call, capture, commit and rebase cost
	 * besides the disk, so the durable case's excess over it is the
	 * syncs'. After the restores, so they see the chain as measured. */
	st_store_set_sync(chain->st, ST_SYNC_NONE);
	if (mdb_env_set_flags(chain->ix->env, MDB_NOSYNC, 1) == 0)
		bench_run(b, &(struct bench_case){ .name = "checkpoint/call_capture_commit_64KiB/sync_none",
						   .floor = floor, .setup = ckpt_setup, .iter = ckpt_iter,
						   .teardown = no_teardown, .warmup = 1, .iters = n / 5, .max_seconds = 60 });
#endif
	ckpt_free(chain);
	chain = NULL;
}
