/* gc.c: garbage collection: unlink blob files no snapshot references, after a grace period. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/array.h"
#include "index/index_int.h"

/* Blobs checked and unlinked per write transaction: bounds how long gc holds
 * the writer lock, so commits from other processes wait at most one batch. */
#define GC_BATCH 256

struct gc_cand {
	st_id id;
	uint64_t size;
	bool young; /* inside the grace period when listed */
};

struct gc_list {
	struct gc_cand *v;
	size_t n, cap;
	int64_t cutoff_ns;
};

/* Every blob is a candidate: whether it is referenced is asked under the
 * writer lock (gc_batch_fn), so a young blob is counted as kept for its
 * age only if no snapshot references it. */
static int gc_collect(const st_id *id, uint64_t size, int64_t mtime_ns, void *arg)
{
	struct gc_list *l = arg;

	if (ST_ARRAY_RESERVE(l->v, l->cap, l->n + 1) < 0)
		return -ENOMEM;
	l->v[l->n++] = (struct gc_cand){ .id = *id, .size = size, .young = mtime_ns > l->cutoff_ns };
	return 0;
}

struct gc_batch {
	const struct gc_cand *v;
	size_t n;
	struct ix_gc_stats *st;
	int64_t cutoff_ns;
};

static int gc_batch_fn(struct ix *ix, MDB_txn *txn, void *arg)
{
	struct gc_batch *b = arg;

	for (size_t i = 0; i < b->n; i++) {
		struct ix_blob_rec r;
		int rc = ix_blob_rec_get(ix, txn, &b->v[i].id, &r);

		if (rc == 0) {
			b->st->blobs_in_use++;
			continue;
		}
		if (rc != IX_ENOTFOUND)
			return rc;
		/* Young: may be an import's blob not yet committed. A mount's
		 * import may have matched an old one since it was listed (it
		 * touches the blob it matches): young again, keep it. */
		int64_t mtime;
		if (b->v[i].young ||
		    (st_blob_mtime(ix->s, &b->v[i].id, &mtime) == 0 && mtime > b->cutoff_ns)) {
			b->st->blobs_young++;
			continue;
		}
		/* Unreferenced while we hold the writer lock: no commit can
		 * start referencing it before the unlink is done. */
		rc = st_blob_del(ix->s, &b->v[i].id);
		if (rc == 0) {
			b->st->blobs_removed++;
			b->st->bytes_removed += b->v[i].size;
		} else if (rc != -ENOENT) {
			return rc;
		}
	}
	return IX_NOCHANGE; /* the index itself does not change */
}

int ix_gc(struct ix *ix, unsigned grace_s, struct ix_gc_stats *stats)
{
	struct ix_gc_stats st = { 0 };
	struct gc_list l = { 0 };
	struct timespec now;
	unsigned tmp = 0;
	int rc;

	if (ix->rdonly)
		return ST_EREADONLY;
	clock_gettime(CLOCK_REALTIME, &now);
	l.cutoff_ns = ((int64_t)now.tv_sec - (int64_t)grace_s) * 1000000000ll + now.tv_nsec;
	if ((rc = st_tmp_sweep(ix->s, grace_s, &tmp)) < 0)
		return rc;
	st.tmp_removed = tmp;
	if ((rc = st_blob_foreach(ix->s, gc_collect, &l)) < 0)
		goto out_free;
	for (size_t off = 0; off < l.n; off += GC_BATCH) {
		struct gc_batch b = { .v = l.v + off, .n = l.n - off < GC_BATCH ? l.n - off : GC_BATCH, .st = &st,
					.cutoff_ns = l.cutoff_ns };
		if ((rc = ix_write(ix, gc_batch_fn, &b)) < 0)
			goto out_free;
	}
	uint64_t lazy = 0;
	if ((rc = ix_lazy_gc(ix, l.cutoff_ns, &lazy)) < 0)
		goto out_free;
	st.lazy_removed = lazy;
	if (stats)
		*stats = st;
out_free:
	free(l.v);
	return rc;
}
