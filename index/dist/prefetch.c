/* prefetch.c: fetch a lazy snapshot's working set first: its record's runs as byte ranges of each lazy layer, in parallel Range requests. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/array.h"
#include "index/index_int.h"
#include "index/dist/dist.h"

/* One piece of work: some ranges of one layer. */
struct pf_job {
	st_id layer;
	struct ix_lazy_range *r;
	size_t n, cap;
};

struct pf {
	struct ix_lazy *lz;
	struct pf_job *jobs;
	size_t njobs, cap, next;
	pthread_mutex_t lock;
	int rc;
	char why[ST_WHY_LEN * 2];
};

static void *pf_worker(void *arg)
{
	struct pf *p = arg;

	for (;;) {
		char why[ST_WHY_LEN * 2] = "";
		size_t j;

		pthread_mutex_lock(&p->lock);
		j = p->rc < 0 ? p->njobs : p->next++;
		pthread_mutex_unlock(&p->lock);
		if (j >= p->njobs)
			return NULL;
		int rc = ix_lazy_fetch(p->lz, &p->jobs[j].layer, p->jobs[j].r, p->jobs[j].n, why, sizeof(why));
		if (rc < 0) {
			pthread_mutex_lock(&p->lock);
			if (p->rc == 0) {
				p->rc = rc;
				snprintf(p->why, sizeof(p->why), "%s", why);
			}
			pthread_mutex_unlock(&p->lock);
		}
	}
}

/*
 * Jobs: per lazy layer the record names, its runs as byte ranges, cut into
 * groups of runs that are neighbours in the layer (runs in one chunk or
 * adjacent chunks land in one group, so one request fetches them), at most
 * `parallel` groups per layer so each can go on its own connection.
 */
static int pf_plan(struct ix_lazy *lz, const struct st_ws *ws, unsigned parallel, struct pf *p, uint64_t *bytes)
{
	uint64_t r0 = 0;

	for (uint32_t l = 0; l < ws->nlayers; r0 += ws->layers[l].nruns, l++) {
		const struct st_ws_layer *wl = &ws->layers[l];
		struct ix_lazy_info info;
		if (ix_lazy_layer_info(lz, &wl->id, &info) != 1)
			continue; /* complete already: nothing to fetch */
		uint64_t cs = info.chunk_size ? info.chunk_size : 1;
		/* Split points: between runs whose chunks are not adjacent. */
		size_t groups = 1;
		for (uint32_t i = 1; i < wl->nruns; i++) {
			const struct st_ws_run *a = &ws->runs[r0 + i - 1], *b = &ws->runs[r0 + i];
			if (b->lpage * ST_PAGE_SIZE / cs > ((a->lpage + a->npages) * ST_PAGE_SIZE - 1) / cs + 1)
				groups++;
		}
		/* At most `parallel` jobs: consecutive groups share one. */
		size_t per = (groups + parallel - 1) / parallel, g = 0;
		struct pf_job *cur = NULL;
		for (uint32_t i = 0; i < wl->nruns; i++) {
			const struct st_ws_run *x = &ws->runs[r0 + i];
			bool split = i == 0;
			if (i) {
				const struct st_ws_run *a = &ws->runs[r0 + i - 1];
				split = x->lpage * ST_PAGE_SIZE / cs > ((a->lpage + a->npages) * ST_PAGE_SIZE - 1) / cs + 1;
			}
			if (split && g++ % per == 0) {
				if (ST_ARRAY_RESERVE(p->jobs, p->cap, p->njobs + 1) < 0)
					return -ENOMEM;
				cur = &p->jobs[p->njobs++];
				*cur = (struct pf_job){ .layer = wl->id };
			}
			if (ST_ARRAY_RESERVE(cur->r, cur->cap, cur->n + 1) < 0)
				return -ENOMEM;
			cur->r[cur->n++] = (struct ix_lazy_range){ x->lpage * ST_PAGE_SIZE, x->npages * ST_PAGE_SIZE };
			*bytes += x->npages * ST_PAGE_SIZE;
		}
	}
	return 0;
}

int ix_ws_prefetch(struct ix_lazy *lz, struct ix *ix, const st_id *snap, unsigned parallel,
		   struct ix_ws_prefetch_stats *stats, char *why, size_t whylen)
{
	struct pf p = { .lz = lz };
	struct st_ws *ws = NULL;
	struct ix_lazy_stats before, after;
	pthread_t th[IX_WS_PREFETCH_MAX];
	unsigned nth = 0;
	uint64_t bytes = 0;
	int rc;

	if (parallel == 0)
		parallel = IX_WS_PREFETCH_PARALLEL;
	if (parallel > IX_WS_PREFETCH_MAX)
		parallel = IX_WS_PREFETCH_MAX;
	if ((rc = ix_ws_load(ix, snap, &ws, NULL, why, whylen)) < 0)
		return rc; /* IX_ENOTFOUND: no record */
	if ((rc = pf_plan(lz, ws, parallel, &p, &bytes)) < 0)
		goto out_free;
	ix_lazy_stats_get(lz, &before);
	pthread_mutex_init(&p.lock, NULL);
	for (nth = 0; nth < parallel && nth < p.njobs; nth++)
		if (pthread_create(&th[nth], NULL, pf_worker, &p) != 0)
			break;
	if (nth == 0 && p.njobs)
		pf_worker(&p);
	for (unsigned i = 0; i < nth; i++)
		pthread_join(th[i], NULL);
	pthread_mutex_destroy(&p.lock);
	ix_lazy_stats_get(lz, &after);
	rc = p.rc;
	if (rc < 0 && why && whylen)
		snprintf(why, whylen, "%s", p.why);
	if (stats) {
		stats->ws_bytes = bytes;
		stats->jobs = p.njobs;
		stats->requests = after.requests - before.requests;
		stats->bytes = after.bytes - before.bytes;
	}
out_free:
	for (size_t j = 0; j < p.njobs; j++)
		free(p.jobs[j].r);
	free(p.jobs);
	st_ws_free(ws);
	return rc;
}
