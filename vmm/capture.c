/* capture.c: snapshot a sandbox: the pages that differ from its snapshot go into one new layer; rebase onto it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "store/array.h"
#include "store/sys.h"
#include "vmm/snap_int.h"

/* Append, merging with the last segment when it continues it. */
static int segv_add(struct vmm_segv *s, struct vmm_seg g)
{
	if (g.npages == 0)
		return 0;
	if (s->n) {
		struct vmm_seg *l = &s->v[s->n - 1];
		if (l->gpage + l->npages == g.gpage && l->layer == g.layer &&
		    (g.layer < 0 || l->lpage + l->npages == g.lpage)) {
			l->npages += g.npages;
			return 0;
		}
	}
	if (ST_ARRAY_RESERVE(s->v, s->cap, s->n + 1) < 0)
		return -ENOMEM;
	s->v[s->n++] = g;
	return 0;
}

/* old segments (cover all pages) overlaid with `ov` (sorted, disjoint). */
static int overlay(const struct vmm_seg *old, size_t nold, const struct vmm_seg *ov, size_t nov, uint64_t total,
		   struct vmm_segv *out)
{
	size_t i = 0, j = 0;
	uint64_t p = 0;
	int rc;

	while (p < total) {
		while (i < nold && old[i].gpage + old[i].npages <= p)
			i++;
		struct vmm_seg g;
		if (j < nov && ov[j].gpage <= p) {
			g = ov[j];
			j++;
		} else {
			uint64_t end = old[i].gpage + old[i].npages;
			if (j < nov && ov[j].gpage < end)
				end = ov[j].gpage;
			g = old[i];
			g.lpage += p - old[i].gpage;
			g.gpage = p;
			g.npages = end - p;
		}
		if ((rc = segv_add(out, g)) < 0)
			return rc;
		p = g.gpage + g.npages;
	}
	return 0;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A boundary between two neighbouring ranges and what merging them costs. */
struct merge_cand {
	uint64_t cost;
	size_t b;
};

static bool cand_less(struct merge_cand x, struct merge_cand y)
{
	return x.cost < y.cost || (x.cost == y.cost && x.b < y.b);
}

static void heap_push(struct merge_cand *h, size_t *n, struct merge_cand x)
{
	size_t i = (*n)++;

	for (; i > 0 && cand_less(x, h[(i - 1) / 2]); i = (i - 1) / 2)
		h[i] = h[(i - 1) / 2];
	h[i] = x;
}

static struct merge_cand heap_pop(struct merge_cand *h, size_t *n)
{
	struct merge_cand top = h[0], x = h[--(*n)];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= *n)
			break;
		if (c + 1 < *n && cand_less(h[c + 1], h[c]))
			c++;
		if (!cand_less(h[c], x))
			break;
		h[i] = h[c];
		i = c;
	}
	if (*n)
		h[i] = x;
	return top;
}

/* A layer kept by a compaction and the pages it still serves. */
struct layer_use {
	int32_t layer;
	uint64_t pages;
};

static int layer_use_cmp(const void *a, const void *b)
{
	const struct layer_use *x = a, *y = b;

	return x->pages < y->pages ? -1 : x->pages > y->pages ? 1 : (x->layer > y->layer) - (x->layer < y->layer);
}

/*
 * At most `most` older layers kept: the ranges of those that serve the
 * fewest pages are rewritten into the new layer too (a restore opens and
 * maps each layer: docs/restore.md, "Range cap"). Rewriting a range never
 * adds one.
 */
static int fewer_layers(const struct vmm_seg *r, bool *rew, size_t n, size_t most)
{
	struct layer_use *u = NULL;
	size_t nu = 0, cap = 0;

	for (size_t i = 0; i < n; i++) {
		if (rew[i])
			continue;
		size_t k = 0;
		while (k < nu && u[k].layer != r[i].layer)
			k++;
		if (k == nu) {
			if (ST_ARRAY_RESERVE(u, cap, nu + 1) < 0) {
				free(u);
				return -ENOMEM;
			}
			u[nu++] = (struct layer_use){ r[i].layer, 0 };
		}
		u[k].pages += r[i].npages;
	}
	if (nu > most) {
		qsort(u, nu, sizeof(*u), layer_use_cmp);
		for (size_t k = 0; k < nu - most; k++)
			for (size_t i = 0; i < n; i++)
				if (!rew[i] && r[i].layer == u[k].layer)
					rew[i] = true;
	}
	free(u);
	return 0;
}

/*
 * Too many ranges: merge neighbouring ranges into the new layer, cheapest
 * first, until at most `cap` remain. Two neighbours become one range when
 * both are in the new layer, with the hole between them stored as zero
 * pages; a range of an older layer costs its pages to rewrite, once. The
 * cost of a merge is what it adds to the new layer, so the ranges a
 * capture merges are its own and the last few captures' small ones, not
 * memory that older layers already hold: a chain of small captures
 * rewrites each page about once per merge level instead of every page
 * at every compaction (docs/restore.md, "Range cap"). Guest memory holds
 * exactly the new snapshot's content, so rewritten pages are read from it.
 * *runs gets the new snapshot's ranges (no holes), each either kept on its
 * older layer or in the new layer, whose pages follow guest order.
 */
static int compact(const struct vmm_segv *segs, unsigned cap, struct vmm_segv *runs)
{
	struct vmm_seg *r = NULL;
	bool *rew = NULL, *merged = NULL;
	struct merge_cand *heap = NULL;
	size_t n = 0, nheap = 0;
	int rc = 0;

	for (size_t i = 0; i < segs->n; i++)
		n += segs->v[i].layer >= 0;
	r = st_sys_malloc((n ? n : 1) * sizeof(*r));
	rew = st_sys_calloc(n ? n : 1, sizeof(*rew));
	merged = st_sys_calloc(n ? n : 1, sizeof(*merged));
	/* every boundary once, then two more each time a range is rewritten */
	heap = st_sys_malloc((3 * n + 1) * sizeof(*heap));
	if (!r || !rew || !merged || !heap) {
		rc = -ENOMEM;
		goto out_free;
	}
	n = 0;
	for (size_t i = 0; i < segs->n; i++)
		if (segs->v[i].layer >= 0) {
			rew[n] = segs->v[i].layer == VMM_NEW_LAYER;
			r[n++] = segs->v[i];
		}
#define GAP(b) (r[(b) + 1].gpage - (r[b].gpage + r[b].npages))
#define COST(b) (GAP(b) + (rew[b] ? 0 : r[b].npages) + (rew[(b) + 1] ? 0 : r[(b) + 1].npages))
	for (size_t b = 0; b + 1 < n; b++)
		heap_push(heap, &nheap, (struct merge_cand){ COST(b), b });
	/* Down to half the cap, so the next cap / 2 captures compact nothing
	 * and a compaction merges a run of them at once: each page is
	 * rewritten about once per merge level (docs/restore.md, "Range cap",
	 * has the growth it measured beside merging down to the cap alone). */
	size_t left = n, target = cap / 2 ? cap / 2 : 1;
	while (left > target && nheap) {
		struct merge_cand x = heap_pop(heap, &nheap);
		/* stale: merged, or cheaper since (its fresh entry is queued) */
		if (merged[x.b] || COST(x.b) != x.cost)
			continue;
		merged[x.b] = true;
		left--;
		for (size_t k = x.b; k <= x.b + 1; k++) {
			if (rew[k])
				continue;
			rew[k] = true;
			if (k > 0 && !merged[k - 1])
				heap_push(heap, &nheap, (struct merge_cand){ COST(k - 1), k - 1 });
			if (k + 1 < n && !merged[k])
				heap_push(heap, &nheap, (struct merge_cand){ COST(k), k });
		}
	}
#undef COST
#undef GAP
	if ((rc = fewer_layers(r, rew, n, cap / 4 ? cap / 4 : 1)) < 0)
		goto out_free;
	uint64_t lp = 0;
	for (size_t i = 0; i < n; i++) {
		size_t j = i;
		while (j + 1 < n && merged[j])
			j++;
		struct vmm_seg g = r[i];
		if (rew[i]) {
			g = (struct vmm_seg){ r[i].gpage, r[j].gpage + r[j].npages - r[i].gpage, VMM_NEW_LAYER, lp };
			lp += g.npages;
		}
		if ((rc = segv_add(runs, g)) < 0)
			goto out_free;
		i = j;
	}
out_free:
	free(r);
	free(rew);
	free(merged);
	free(heap);
	return rc;
}

/* Put a description object into the manifest as canonical text, and drop it. */
static int set_object(struct st_manifest *m, const char *key, json_t *obj)
{
	int rc = obj ? st_manifest_set_object(m, key, obj) : -ENOMEM;

	json_decref(obj);
	return rc;
}

int vmm_changes_manifest(struct vmm_sandbox *sb, const struct vmm_snap *s, const struct vmm_changes *c,
			 const st_id *new_id, bool describe, struct st_manifest **out)
{
	const struct vmm_segv *segs = vmm_changes_segs(c);
	bool has_new = c->new_pages > 0;
	uint64_t new_pages = c->new_pages;
	struct st_manifest *m = NULL;
	uint32_t nold = s->m ? s->m->nlayers : 0;
	int32_t *remap = NULL;
	int rc;

	if ((rc = st_manifest_new(&m)) < 0)
		return rc;
	remap = st_sys_malloc((nold + 1) * sizeof(*remap));
	m->layers = st_sys_calloc(nold + 1, sizeof(*m->layers));
	size_t nr = 0;
	for (size_t i = 0; i < segs->n; i++)
		nr += segs->v[i].layer >= 0;
	m->ranges = st_sys_calloc(nr ? nr : 1, sizeof(*m->ranges));
	if (!remap || !m->layers || !m->ranges) {
		rc = -ENOMEM;
		goto out_free;
	}
	for (uint32_t i = 0; i < nold; i++)
		remap[i] = -1;
	for (size_t i = 0; i < segs->n; i++) {
		int32_t l = segs->v[i].layer;
		if (l >= 0 && l != VMM_NEW_LAYER && remap[l] < 0) {
			remap[l] = 0;
		}
	}
	for (uint32_t i = 0; i < nold; i++)
		if (remap[i] == 0) {
			remap[i] = (int32_t)m->nlayers;
			m->layers[m->nlayers++] = s->m->layers[i];
		}
	uint32_t new_index = m->nlayers;
	if (has_new)
		m->layers[m->nlayers++] = (struct st_layer_ref){ .id = *new_id, .pages = new_pages };
	for (size_t i = 0; i < segs->n; i++) {
		const struct vmm_seg *g = &segs->v[i];
		if (g->layer < 0)
			continue;
		uint32_t l = g->layer == VMM_NEW_LAYER ? new_index : (uint32_t)remap[g->layer];
		m->ranges[m->nranges++] = (struct st_range){ g->gpage, g->npages, l, g->lpage };
	}
	m->mem_size = sb->mem_size;
	/* The parent is a snapshot of a store: an in-memory one's own parent. */
	if (s->has_id && vmm_memsnap_id(&s->id)) {
		m->has_parent = s->m && s->m->has_parent;
		if (m->has_parent)
			m->parent = s->m->parent;
	} else {
		m->has_parent = s->has_id;
		if (s->has_id)
			m->parent = s->id;
	}
	m->created = now_ns();
	m->abi_version = STRATA_ABI_VERSION;
	if (describe && (rc = set_object(m, "guest", vmm_guest_object(sb))) < 0)
		goto out_free;
	free(remap);
	*out = m;
	return 0;
out_free:
	free(remap);
	st_manifest_free(m);
	return rc;
}

/*
 * The runs to look at for a capture into a store on a snapshot with
 * in-memory layers: the scanned pages and every page such a layer maps (no
 * store has that layer: its pages are changes whatever they hold). Both
 * lists are sorted and disjoint; *out gets their union.
 */
static int runs_with_memory(const struct vmm_snap *s, struct vmm_runs *out)
{
	size_t i = 0, k = 0;
	uint64_t lo = 0, hi = 0;
	int rc;

	vmm_runs_clear(out);
	for (;;) {
		while (k < s->nsegs && (s->segs[k].layer < 0 || !vmm_memsnap_id(&s->layers[s->segs[k].layer].id)))
			k++;
		bool scan = i < s->scan.n, seg = k < s->nsegs;
		if (!scan && !seg)
			break;
		struct vmm_run r;
		if (scan && (!seg || s->scan.v[i].gpage <= s->segs[k].gpage))
			r = s->scan.v[i++];
		else
			r = (struct vmm_run){ s->segs[k].gpage, s->segs[k].npages }, k++;
		if (hi > lo && r.gpage <= hi) {
			if (r.gpage + r.npages > hi)
				hi = r.gpage + r.npages;
			continue;
		}
		if (hi > lo && (rc = vmm_runs_add(out, lo, hi - lo)) < 0)
			return rc;
		lo = r.gpage;
		hi = r.gpage + r.npages;
	}
	return hi > lo ? vmm_runs_add(out, lo, hi - lo) : 0;
}

void vmm_changes_free(struct vmm_changes *c)
{
	free(c->ov.v);
	free(c->segs.v);
	free(c->flat.v);
	memset(c, 0, sizeof(*c));
}

int vmm_changes_find(struct vmm_sandbox *sb, struct vmm_snap *s, bool store, struct vmm_changes *c)
{
	struct vmm_runs look = { 0 };
	const struct vmm_runs *runs = &s->scan;
	uint64_t total = sb->mem_size / VMM_PAGE;
	unsigned ioctls = 0;
	int rc;

	memset(c, 0, sizeof(*c));
	/* 1. Pages of their own that differ from the snapshot. */
	rc = sb->be->dirty_scan(sb, &s->scan, &ioctls);
	s->stats.scan_ioctls += ioctls;
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < s->scan.n; i++)
		s->stats.pages_scanned += s->scan.v[i].npages;
	bool memory = false;
	for (uint32_t i = 0; store && s->m && i < s->m->nlayers; i++)
		memory |= vmm_memsnap_id(&s->layers[i].id);
	if (memory) {
		if ((rc = runs_with_memory(s, &look)) < 0)
			goto out_free;
		runs = &look;
	}
	size_t k = 0;  /* the segment holding p: runs are sorted */
	for (size_t i = 0; i < runs->n; i++) {
		uint64_t p = runs->v[i].gpage, end = p + runs->v[i].npages;
		for (; p < end; p++) {
			while (s->segs[k].gpage + s->segs[k].npages <= p)
				k++;
			const struct vmm_seg *g = &s->segs[k];
			const uint8_t *src = g->layer < 0 ? NULL : s->layers[g->layer].src + (g->lpage + p - g->gpage) * VMM_PAGE;
			const uint8_t *cur = sb->mem + p * VMM_PAGE;
			bool must = memory && g->layer >= 0 && vmm_memsnap_id(&s->layers[g->layer].id);
			if (!must && (src ? memcmp(cur, src, VMM_PAGE) == 0 : vmm_page_is_zero(cur)))
				continue;
			struct vmm_seg ng = { p, 1, -1, 0 };
			if (!vmm_page_is_zero(cur)) {
				ng.layer = VMM_NEW_LAYER;
				ng.lpage = c->new_pages++;
			}
			if ((rc = segv_add(&c->ov, ng)) < 0)
				goto out_free;
		}
	}

	/* 2. The new snapshot's segments: the old ones overlaid with the changes. */
	if ((rc = overlay(s->segs, s->nsegs, c->ov.v, c->ov.n, total, &c->segs)) < 0)
		goto out_free;
	size_t nranges = 0;
	for (size_t i = 0; i < c->segs.n; i++)
		nranges += c->segs.v[i].layer >= 0;
	if (nranges > s->policy.range_cap) {
		if ((rc = compact(&c->segs, s->policy.range_cap, &c->flat)) < 0)
			goto out_free;
		/* the new layer: the merged ranges, in guest order */
		c->new_pages = 0;
		for (size_t i = 0; i < c->flat.n; i++)
			if (c->flat.v[i].layer == VMM_NEW_LAYER)
				c->new_pages += c->flat.v[i].npages;
		c->flat_used = true;
		s->stats.compactions++;
	}
	vmm_runs_free(&look);
	return 0;
out_free:
	vmm_runs_free(&look);
	vmm_changes_free(c);
	return rc;
}

int vmm_sandbox_capture(struct vmm_sandbox *sb, struct st_store *st, struct st_manifest **out)
{
	struct vmm_snap *s = vmm_snap_of(sb);
	struct vmm_changes c = { 0 };
	struct st_manifest *m = NULL, *mine = NULL;
	struct st_blob_writer *w = NULL;
	struct vmm_snap_layer nl = { .fd = -1 };
	struct vmm_vcpu_state vcpu;
	st_id new_id;
	int rc;

	if (!s)
		return -ENOMEM;
	if (sb->in_call)
		return VMM_E_BUSY;
	if (sb->poisoned)
		return VMM_E_POISONED;
	st_manifest_free(s->pending);
	s->pending = NULL;
	vmm_snap_layer_close(&s->pending_layer);

	if ((rc = sb->be->get_state(sb, &vcpu)) < 0)
		return rc;
	/* The snapshot keeps the user-mode state; the privileged parts are the
	 * host-built ones whatever the vCPU holds (vmm_x86_state_check refuses
	 * any other in a manifest). */
	vmm_x86_user_state(&sb->layout, &vcpu, &vcpu);
	/* 1, 2. What changed, as the new snapshot's segments. */
	if ((rc = vmm_changes_find(sb, s, true, &c)) < 0)
		return rc;
	uint64_t new_pages = c.new_pages;

	/* 3. The layer blob: the new pages in guest order. */
	if (new_pages) {
		if ((rc = st_blob_writer_new(st, &w)) < 0)
			goto out_free;
		const struct vmm_segv *src = vmm_changes_new(&c);
		for (size_t i = 0; i < src->n && rc >= 0; i++) {
			const struct vmm_seg *g = &src->v[i];
			if (g->layer == VMM_NEW_LAYER)
				rc = st_blob_writer_write(w, sb->mem + g->gpage * VMM_PAGE, g->npages * VMM_PAGE);
		}
		if (rc < 0) {
			st_blob_writer_abort(w);
			goto out_free;
		}
		if ((rc = st_blob_writer_commit(w, NULL, &new_id, NULL)) < 0)
			goto out_free;
		s->stats.pages_captured += new_pages;
		if ((rc = st_blob_open(st, &new_id, &nl.fd)) < 0)
			goto out_free;
		nl.id = new_id;
		nl.pages = new_pages;
		nl.src = st_sys_mmap(NULL, new_pages * VMM_PAGE, PROT_READ, MAP_SHARED, nl.fd, 0, &rc);
		if (!nl.src)
			goto out_free;
	}

	/* 4. The manifest. */
	if ((rc = vmm_changes_manifest(sb, s, &c, &new_id, true, &m)) < 0)
		goto out_free;
	if ((rc = set_object(m, "vcpu", vmm_vcpu_object(&vcpu))) < 0)
		goto out_free;
	char why[ST_WHY_LEN];
	if ((rc = st_manifest_seal(m, why, sizeof(why))) < 0)
		goto out_free;
	if ((rc = st_manifest_dup(m, &mine)) < 0)
		goto out_free;
	s->pending = mine;
	s->pending_layer = nl;
	s->pending_vcpu = vcpu;
	nl.fd = -1;
	nl.src = NULL;
	s->stats.captures++;
	sb->ws_fresh = false;
	*out = m;
	m = NULL;
	rc = 0;
out_free:
	vmm_snap_layer_close(&nl);
	st_manifest_free(m);
	vmm_changes_free(&c);
	return rc;
}

int vmm_sandbox_rebase(struct vmm_sandbox *sb, const struct st_manifest *m, const st_id *id)
{
	struct vmm_snap *s = vmm_snap_of(sb);
	struct vmm_snap_layer *layers = NULL;
	struct vmm_seg *segs = NULL;
	size_t nsegs = 0;
	st_id pid;
	int rc;

	if (!s)
		return -ENOMEM;
	/* m must be the pending capture (compared by content key: encoding it
	 * for its id costs hundreds of microseconds); id is trusted to be m's
	 * id as ix_snap_commit returned it, and checked in debug mode. */
	st_id km, kp;
	if (!s->pending || !m)
		return VMM_E_STALE;
	vmm_snap_key(m, &km);
	vmm_snap_key(s->pending, &kp);
	if (!st_id_equal(&km, &kp))
		return VMM_E_STALE;
	memcpy(&pid, id, sizeof(pid));
	if (s->debug && (st_manifest_id(m, &pid, NULL, 0) < 0 || memcmp(&pid, id, sizeof(pid)) != 0))
		return VMM_E_STALE;
	struct st_manifest *pm = s->pending;
	layers = st_sys_calloc(pm->nlayers + 1, sizeof(*layers));
	if (!layers)
		return -ENOMEM;
	if ((rc = vmm_snap_segs(pm, sb->mem_size / VMM_PAGE, &segs, &nsegs)) < 0)
		goto out_free;
	/* Each layer: the one just written, or one the old snapshot has open. */
	for (uint32_t i = 0; i < pm->nlayers; i++) {
		layers[i].fd = -1;
		const st_id *lid = &pm->layers[i].id;
		if (s->pending_layer.fd >= 0 && st_id_equal(lid, &s->pending_layer.id)) {
			layers[i] = s->pending_layer;
			continue;
		}
		for (uint32_t k = 0; s->m && k < s->m->nlayers; k++)
			if (s->layers[k].fd >= 0 && st_id_equal(lid, &s->layers[k].id)) {
				layers[i] = s->layers[k];
				break;
			}
		if (layers[i].fd < 0) {
			rc = VMM_E_STALE;
			goto out_free;
		}
	}
	unsigned maps = 0;
	/* Shared memory (process backend) already holds what was captured:
	 * nothing to map (pages written since stay in its written set). */
	rc = sb->be->private_pages ? vmm_snap_remap(sb, s->segs, s->nsegs, s->layers, segs, nsegs, layers, &maps) : 0;
	s->stats.maps += maps;
	if (rc < 0) {
		/* Memory now mixes both mappings: the sandbox cannot be trusted. */
		sb->poisoned = true;
		goto out_free;
	}
	/* Old layers the new snapshot does not use are closed; the rest moved. */
	struct vmm_snap_alt n = { .valid = true, .key = kp, .m = pm, .layers = layers, .segs = segs,
				  .nsegs = nsegs, .id = pid, .vcpu = s->pending_vcpu };
	vmm_snap_set_current(s, &n, false);
	s->pending = NULL;
	s->pending_layer = (struct vmm_snap_layer){ .fd = -1 };
	return 0;
out_free:
	free(layers);
	free(segs);
	return rc;
}
