/* workingset.c: working-set records: the layer pages a snapshot's sandbox touched before its first result (binary, versioned). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/array.h"
#include "store/store.h"
#include "store/sys.h"

/*
 * Format version 1 (docs/formats.md, "working-set records"), little-endian:
 *   header  48 bytes: magic "STRATAWS", version u32, nlayers u32,
 *                     snapshot id 16 bytes, nruns u64, pages u64
 *   layers  nlayers x 24 bytes: id 16 bytes, nruns u32, reserved u32 = 0
 *   runs    nruns x 8 bytes: first page u32, page count u32 (per layer in
 *           layer order)
 * Layer ids strictly ascending; a layer's runs ascending, disjoint, not
 * adjacent (merged), count >= 1. The length is exactly what the counts say,
 * so it is checked before anything is allocated.
 */
#define WS_MAGIC "STRATAWS"
#define WS_HDR 48u
#define WS_LAYER 24u
#define WS_RUN 8u

static int why_set(char *why, size_t whylen, int rc, const char *fmt, ...)
{
	if (why && whylen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, whylen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

void st_ws_free(struct st_ws *ws)
{
	if (!ws)
		return;
	free(ws->layers);
	free(ws->runs);
	free(ws);
}

/* The rules of the format on a parsed or built record (not the length). */
static int ws_rules(const struct st_ws *ws, char *why, size_t whylen)
{
	uint64_t pages = 0, r = 0;

	if (ws->nlayers > ST_WS_MAX_LAYERS)
		return why_set(why, whylen, ST_EFORMAT, "%u layers (at most %u)", ws->nlayers, ST_WS_MAX_LAYERS);
	if (ws->nruns > ST_WS_MAX_RUNS)
		return why_set(why, whylen, ST_EFORMAT, "%llu runs (at most %u)", (unsigned long long)ws->nruns,
			       ST_WS_MAX_RUNS);
	for (uint32_t l = 0; l < ws->nlayers; l++) {
		if (l && st_id_cmp(&ws->layers[l - 1].id, &ws->layers[l].id) >= 0)
			return why_set(why, whylen, ST_EFORMAT, "layer %u is not after layer %u (ids must ascend)", l,
				       l - 1);
		if (ws->layers[l].nruns == 0)
			return why_set(why, whylen, ST_EFORMAT, "layer %u has no runs", l);
		if (ws->layers[l].nruns > ws->nruns - r)
			return why_set(why, whylen, ST_EFORMAT, "layer %u claims more runs than the record holds", l);
		for (uint32_t i = 0; i < ws->layers[l].nruns; i++, r++) {
			const struct st_ws_run *x = &ws->runs[r];
			if (x->npages == 0)
				return why_set(why, whylen, ST_EFORMAT, "run %llu is empty", (unsigned long long)r);
			if (x->lpage + x->npages > UINT32_MAX)
				return why_set(why, whylen, ST_EFORMAT, "run %llu ends past page 2^32",
					       (unsigned long long)r);
			if (i && ws->runs[r - 1].lpage + ws->runs[r - 1].npages >= x->lpage)
				return why_set(why, whylen, ST_EFORMAT,
					       "run %llu overlaps or touches the one before (runs ascend, merged)",
					       (unsigned long long)r);
			pages += x->npages;
		}
	}
	if (r != ws->nruns)
		return why_set(why, whylen, ST_EFORMAT, "the layers hold %llu runs, the header says %llu",
			       (unsigned long long)r, (unsigned long long)ws->nruns);
	if (pages != ws->pages)
		return why_set(why, whylen, ST_EFORMAT, "the runs hold %llu pages, the header says %llu",
			       (unsigned long long)pages, (unsigned long long)ws->pages);
	return 0;
}

int st_ws_parse(const void *buf, size_t len, struct st_ws **out, char *why, size_t whylen)
{
	const uint8_t *p = buf;
	struct st_ws *ws;
	uint64_t nruns, want;
	uint32_t nlayers;
	int rc;

	if (len < WS_HDR || memcmp(p, WS_MAGIC, 8) != 0)
		return why_set(why, whylen, ST_EFORMAT, "not a strata working-set record (no STRATAWS header)");
	if (get32(p + 8) != ST_WS_VERSION)
		return why_set(why, whylen, ST_EVERSION, "working-set format version %u (this strata reads %u)",
			       get32(p + 8), ST_WS_VERSION);
	nlayers = get32(p + 12);
	nruns = get64(p + 32);
	if (nlayers > ST_WS_MAX_LAYERS || nruns > ST_WS_MAX_RUNS)
		return why_set(why, whylen, ST_EFORMAT, "%u layers, %llu runs: over the limits (%u, %u)", nlayers,
			       (unsigned long long)nruns, ST_WS_MAX_LAYERS, ST_WS_MAX_RUNS);
	want = WS_HDR + (uint64_t)nlayers * WS_LAYER + nruns * WS_RUN;
	if (len != want)
		return why_set(why, whylen, ST_EFORMAT, "%zu bytes, the counts say %llu", len, (unsigned long long)want);
	if (!(ws = st_sys_calloc(1, sizeof(*ws))))
		return -ENOMEM;
	memcpy(ws->snapshot.b, p + 16, sizeof(ws->snapshot.b));
	ws->nlayers = nlayers;
	ws->nruns = nruns;
	ws->pages = get64(p + 40);
	if ((nlayers && !(ws->layers = st_sys_calloc(nlayers, sizeof(*ws->layers)))) ||
	    (nruns && !(ws->runs = st_sys_calloc(nruns, sizeof(*ws->runs))))) {
		rc = -ENOMEM;
		goto out_free;
	}
	p += WS_HDR;
	for (uint32_t l = 0; l < nlayers; l++, p += WS_LAYER) {
		memcpy(ws->layers[l].id.b, p, 16);
		ws->layers[l].nruns = get32(p + 16);
		if (get32(p + 20) != 0) {
			rc = why_set(why, whylen, ST_EFORMAT, "layer %u: reserved field is not zero", l);
			goto out_free;
		}
	}
	for (uint64_t r = 0; r < nruns; r++, p += WS_RUN) {
		ws->runs[r].lpage = get32(p);
		ws->runs[r].npages = get32(p + 4);
	}
	if ((rc = ws_rules(ws, why, whylen)) < 0)
		goto out_free;
	*out = ws;
	return 0;
out_free:
	st_ws_free(ws);
	return rc;
}

int st_ws_encode(const struct st_ws *ws, void **buf, size_t *len, char *why, size_t whylen)
{
	size_t n;
	uint8_t *b, *p;
	int rc;

	if ((rc = ws_rules(ws, why, whylen)) < 0)
		return rc;
	n = WS_HDR + (size_t)ws->nlayers * WS_LAYER + (size_t)ws->nruns * WS_RUN;
	if (!(b = st_sys_calloc(1, n)))
		return -ENOMEM;
	memcpy(b, WS_MAGIC, 8);
	put32(b + 8, ST_WS_VERSION);
	put32(b + 12, ws->nlayers);
	memcpy(b + 16, ws->snapshot.b, 16);
	put64(b + 32, ws->nruns);
	put64(b + 40, ws->pages);
	p = b + WS_HDR;
	for (uint32_t l = 0; l < ws->nlayers; l++, p += WS_LAYER) {
		memcpy(p, ws->layers[l].id.b, 16);
		put32(p + 16, ws->layers[l].nruns);
	}
	for (uint64_t r = 0; r < ws->nruns; r++, p += WS_RUN) {
		put32(p, (uint32_t)ws->runs[r].lpage);
		put32(p + 4, (uint32_t)ws->runs[r].npages);
	}
	*buf = b;
	*len = n;
	return 0;
}

int st_ws_check(const struct st_ws *ws, const struct st_manifest *m, const st_id *mid, char *why, size_t whylen)
{
	char hex[33];
	uint64_t r = 0;

	if (!st_id_equal(&ws->snapshot, mid)) {
		st_id_format(&ws->snapshot, hex);
		return why_set(why, whylen, ST_EFORMAT, "the working set was recorded on snapshot %s, not this one", hex);
	}
	for (uint32_t l = 0; l < ws->nlayers; l++) {
		const struct st_layer_ref *lr = NULL;
		for (uint32_t i = 0; i < m->nlayers && !lr; i++)
			if (st_id_equal(&m->layers[i].id, &ws->layers[l].id))
				lr = &m->layers[i];
		st_id_format(&ws->layers[l].id, hex);
		if (!lr)
			return why_set(why, whylen, ST_ELAYOUT, "the working set names layer %s, which the snapshot lacks",
				       hex);
		r += ws->layers[l].nruns;
		const struct st_ws_run *last = &ws->runs[r - 1];
		if (last->lpage + last->npages > lr->pages)
			return why_set(why, whylen, ST_ELAYOUT,
				       "the working set reaches page %llu of layer %s, which has %llu",
				       (unsigned long long)(last->lpage + last->npages), hex,
				       (unsigned long long)lr->pages);
	}
	return 0;
}

/* One piece of a layer, while building. */
struct piece {
	uint32_t layer;  /* index into the manifest's layers */
	uint64_t lpage, npages;
};

static int piece_cmp(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;

	if (x->layer != y->layer)
		return x->layer < y->layer ? -1 : 1;
	return x->lpage < y->lpage ? -1 : x->lpage > y->lpage;
}

/* Manifest layer indices in order of their ids (ctx: the manifest). */
static int layer_idx_cmp(const void *a, const void *b, void *ctx)
{
	const struct st_manifest *m = ctx;

	return st_id_cmp(&m->layers[*(const uint32_t *)a].id, &m->layers[*(const uint32_t *)b].id);
}

int st_ws_build(const struct st_manifest *m, const st_id *mid, const struct st_ws_run *gruns, size_t n,
		struct st_ws **out)
{
	struct piece *pc = NULL;
	size_t npc = 0, cap = 0;
	uint32_t *rank = NULL, *order = NULL;
	struct st_ws *ws = NULL;
	int rc = -ENOMEM;

	/* Each guest run through the manifest's ranges (sorted by gpage):
	 * the parts that fall in a range become layer pieces; holes drop. */
	for (size_t i = 0; i < n; i++) {
		uint64_t g = gruns[i].lpage, end = gruns[i].lpage + gruns[i].npages;
		size_t lo = 0, hi = m->nranges;
		while (lo < hi) { /* first range ending after g */
			size_t mid2 = (lo + hi) / 2;
			if (m->ranges[mid2].gpage + m->ranges[mid2].npages <= g)
				lo = mid2 + 1;
			else
				hi = mid2;
		}
		for (size_t r = lo; r < m->nranges && m->ranges[r].gpage < end; r++) {
			const struct st_range *rg = &m->ranges[r];
			uint64_t a = g > rg->gpage ? g : rg->gpage;
			uint64_t b = end < rg->gpage + rg->npages ? end : rg->gpage + rg->npages;
			if (a >= b)
				continue;
			if (ST_ARRAY_RESERVE(pc, cap, npc + 1) < 0)
				goto out_free;
			pc[npc++] = (struct piece){ rg->layer, rg->lpage + (a - rg->gpage), b - a };
		}
	}
	/* Layers in id order, then each layer's pieces sorted and merged. */
	if (m->nlayers && (!(rank = st_sys_calloc(m->nlayers, sizeof(*rank))) || !(order = st_sys_calloc(m->nlayers, sizeof(*order)))))
		goto out_free;
	for (uint32_t i = 0; i < m->nlayers; i++)
		order[i] = i;
	if (m->nlayers)
		qsort_r(order, m->nlayers, sizeof(*order), layer_idx_cmp, (void *)m);
	for (uint32_t i = 0; i < m->nlayers; i++)
		rank[order[i]] = i;
	for (size_t i = 0; i < npc; i++)
		pc[i].layer = rank[pc[i].layer];
	if (npc)
		qsort(pc, npc, sizeof(*pc), piece_cmp);

	if (!(ws = st_sys_calloc(1, sizeof(*ws))) || (npc && !(ws->runs = st_sys_calloc(npc, sizeof(*ws->runs)))) ||
	    (m->nlayers && !(ws->layers = st_sys_calloc(m->nlayers, sizeof(*ws->layers)))))
		goto out_free;
	ws->snapshot = *mid;
	for (size_t i = 0; i < npc; i++) {
		bool same = i && pc[i].layer == pc[i - 1].layer;
		if (same && ws->runs[ws->nruns - 1].lpage + ws->runs[ws->nruns - 1].npages >= pc[i].lpage) {
			struct st_ws_run *x = &ws->runs[ws->nruns - 1];
			uint64_t e = pc[i].lpage + pc[i].npages;
			if (e > x->lpage + x->npages)
				x->npages = e - x->lpage;
			continue;
		}
		if (!same) {
			ws->layers[ws->nlayers].id = m->layers[order[pc[i].layer]].id;
			ws->nlayers++;
		}
		ws->layers[ws->nlayers - 1].nruns++;
		ws->runs[ws->nruns++] = (struct st_ws_run){ pc[i].lpage, pc[i].npages };
	}
	for (uint64_t r = 0; r < ws->nruns; r++)
		ws->pages += ws->runs[r].npages;
	if (ws->nruns > ST_WS_MAX_RUNS) {
		rc = -E2BIG;
		goto out_free;
	}
	*out = ws;
	ws = NULL;
	rc = 0;
out_free:
	st_ws_free(ws);
	free(order);
	free(rank);
	free(pc);
	return rc;
}
