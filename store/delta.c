/* delta.c: manifest deltas: a child's manifest as the pages that differ from its parent's, encoded, peeked at and applied. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/manifest_int.h"
#include "store/store_int.h"

#define HOLE 0u /* an override's layer number for "these pages read zero" */
#define NO_LAYER UINT32_MAX

/* Guest pages [g, g + n) of the child map as layer L - 1's pages from
 * lpage (L = HOLE: they read zero). */
struct ov {
	uint64_t g, n, lpage;
	uint32_t L;
};

/* A layer id and its place in a list, sorted by id for lookups. */
struct id_at {
	st_id id;
	uint32_t at;
};

static int id_at_cmp(const void *a, const void *b)
{
	return st_id_cmp(&((const struct id_at *)a)->id, &((const struct id_at *)b)->id);
}

static int id_index(const struct st_layer_ref *layers, uint32_t n, struct id_at **out)
{
	struct id_at *v = st_sys_calloc(n ? n : 1, sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++)
		v[i] = (struct id_at){ layers[i].id, i };
	qsort(v, n, sizeof(*v), id_at_cmp);
	*out = v;
	return 0;
}

static uint32_t id_find(const struct id_at *v, uint32_t n, const st_id *id)
{
	struct id_at key = { .id = *id };
	const struct id_at *f = bsearch(&key, v, n, sizeof(*v), id_at_cmp);

	return f ? f->at : NO_LAYER;
}

/* What guest page pos maps to in m: *id (NULL: a hole) and *lpage, with
 * *run the pages from pos on that continue the same way. *ri is a cursor
 * into m's ranges, only ever moved forward. */
static void map_at(const struct st_manifest *m, uint64_t pos, uint64_t *ri, const st_id **id, uint32_t *layer,
		   uint64_t *lpage, uint64_t *run)
{
	while (*ri < m->nranges && m->ranges[*ri].gpage + m->ranges[*ri].npages <= pos)
		(*ri)++;
	if (*ri < m->nranges && m->ranges[*ri].gpage <= pos) {
		const struct st_range *r = &m->ranges[*ri];
		*id = &m->layers[r->layer].id;
		*layer = r->layer;
		*lpage = r->lpage + (pos - r->gpage);
		*run = r->gpage + r->npages - pos;
		return;
	}
	*id = NULL;
	*layer = NO_LAYER;
	*lpage = 0;
	*run = *ri < m->nranges ? m->ranges[*ri].gpage - pos : UINT64_MAX;
}

/* The child's pages whose mapping differs from the parent's, as the
 * fewest overrides (adjacent ones that continue each other are one). */
static int overrides_make(const struct st_manifest *p, const struct st_manifest *c, struct ov **out, size_t *n)
{
	uint64_t mem = c->mem_size / ST_PAGE_SIZE, pos = 0, pi = 0, ci = 0;
	struct ov *v = NULL;
	size_t k = 0, cap = 0;

	while (pos < mem) {
		const st_id *pid, *cid;
		uint32_t pl, cl;
		uint64_t plp, clp, prun, crun;

		map_at(p, pos, &pi, &pid, &pl, &plp, &prun);
		map_at(c, pos, &ci, &cid, &cl, &clp, &crun);
		uint64_t len = prun < crun ? prun : crun;
		if (len > mem - pos)
			len = mem - pos;
		bool same = (!pid && !cid) || (pid && cid && st_id_equal(pid, cid) && plp == clp);
		if (!same) {
			uint32_t L = cid ? cl + 1 : HOLE;
			struct ov *last = k ? &v[k - 1] : NULL;
			if (last && last->g + last->n == pos && last->L == L && (L == HOLE || last->lpage + last->n == clp)) {
				last->n += len;
			} else {
				if (k == cap) {
					size_t ncap = cap ? cap * 2 : 64;
					struct ov *nv = st_sys_realloc(v, ncap * sizeof(*v));
					if (!nv) {
						free(v);
						return -ENOMEM;
					}
					v = nv;
					cap = ncap;
				}
				v[k++] = (struct ov){ pos, len, L == HOLE ? 0 : clp, L };
			}
		}
		pos += len;
	}
	*out = v;
	*n = k;
	return 0;
}

static bool same(const char *a, const char *b)
{
	return a && b && strcmp(a, b) == 0;
}

int st_manifest_delta_encode(const struct st_manifest *parent, const st_id *parent_id,
			     const struct st_manifest *child, const st_id *child_id, char **json, size_t *len,
			     char *why, size_t whylen)
{
	char hex[ST_ID_HEX_LEN + 1];
	struct st_mf_texts t = { 0 }, pt = { 0 };
	struct st_mf_out o = { 0 };
	struct id_at *pidx = NULL;
	uint64_t *next = NULL;
	struct ov *ov = NULL;
	size_t nov = 0;
	st_id cid;
	int rc;

	if ((rc = st_manifest_validate(parent, why, whylen)) < 0)
		return rc;
	if (child->version != ST_MANIFEST_VERSION)
		return st_why(why, whylen, ST_EVERSION, "only version %u manifests are written as deltas (this one is %" PRIu32 ")",
			      ST_MANIFEST_VERSION, child->version);
	if (!child->has_parent || !st_id_equal(&child->parent, parent_id))
		return st_why(why, whylen, -EINVAL, "the child's parent is not the snapshot given as its parent");
	if (child_id)
		cid = *child_id;
	else if ((rc = st_manifest_id(child, &cid, why, whylen)) < 0)
		return rc;
	if ((rc = st_manifest_validate(child, why, whylen)) < 0 || (rc = st_mf_texts_make(child, &t, why, whylen)) < 0)
		return rc;
	if ((rc = st_mf_texts_make(parent, &pt, why, whylen)) < 0)
		goto out_free;
	if ((rc = id_index(parent->layers, parent->nlayers, &pidx)) < 0 || (rc = overrides_make(parent, child, &ov, &nov)) < 0)
		goto out_free;
	if (!(next = st_sys_calloc(child->nlayers ? child->nlayers : 1, sizeof(*next)))) {
		rc = -ENOMEM;
		goto out_free;
	}
	o.cap = t.extra + 128 + (size_t)child->nlayers * (ST_ID_HEX_LEN + 64) + nov * (4 * 21 + 4);
	if (!(o.p = st_sys_malloc(o.cap))) {
		rc = -ENOMEM;
		goto out_free;
	}
	st_id_format(&cid, hex);
	st_mf_put(&o, "{\"abi_version\":%" PRIu32 ",\"created\":%s", child->abi_version, t.created);
	/* A nested value equal to the parent's is written "parent". */
	if (t.guest)
		st_mf_put(&o, ",\"guest\":%s", same(t.guest, pt.guest) ? "\"parent\"" : t.guest);
	st_mf_put(&o, ",\"id\":\"%s\"", hex);
	if (t.labels)
		st_mf_put(&o, ",\"labels\":%s", same(t.labels, pt.labels) ? "\"parent\"" : t.labels);
	/* Layers: runs of the parent's list where the child keeps its order,
	 * each other layer written out. */
	st_mf_put(&o, ",\"layers\":[");
	for (uint32_t i = 0; i < child->nlayers;) {
		uint32_t p = id_find(pidx, parent->nlayers, &child->layers[i].id), n = 1;
		if (i)
			st_mf_put(&o, ",");
		if (p == NO_LAYER || parent->layers[p].pages != child->layers[i].pages) {
			st_id_format(&child->layers[i].id, hex);
			st_mf_put(&o, "{\"id\":\"%s\",\"pages\":%" PRIu64 "}", hex, child->layers[i].pages);
			i++;
			continue;
		}
		while (i + n < child->nlayers && p + n < parent->nlayers &&
		       st_id_equal(&child->layers[i + n].id, &parent->layers[p + n].id) &&
		       child->layers[i + n].pages == parent->layers[p + n].pages)
			n++;
		st_mf_put(&o, "[%" PRIu32 ",%" PRIu32 "]", p, n);
		i += n;
	}
	st_mf_put(&o, "],\"mem_size\":%" PRIu64, child->mem_size);
	st_id_format(parent_id, hex);
	st_mf_put(&o, ",\"parent\":\"%s\",\"ranges\":[", hex);
	/* Each override: the gap since the last one's end, its length, its
	 * layer number (0: a hole, else index + 1) and its first layer page
	 * relative to where the last override in that layer ended. A capture
	 * writes its changed pages to its new layer in guest order, so that
	 * last number is 0 for all of them. */
	uint64_t end = 0;
	for (size_t i = 0; i < nov; i++) {
		const struct ov *v = &ov[i];
		int64_t lp = 0;
		if (v->L != HOLE) {
			lp = (int64_t)v->lpage - (int64_t)next[v->L - 1];
			next[v->L - 1] = v->lpage + v->n;
		}
		st_mf_put(&o, "%s%" PRIu64 ",%" PRIu64 ",%" PRIu32 ",%" PRId64, i ? "," : "", v->g - end, v->n, v->L, lp);
		end = v->g + v->n;
	}
	st_mf_put(&o, "]");
	if (t.vcpu)
		st_mf_put(&o, ",\"vcpu\":%s", same(t.vcpu, pt.vcpu) ? "\"parent\"" : t.vcpu);
	st_mf_put(&o, ",\"version\":%u}", ST_MANIFEST_DELTA_VERSION);
	*json = o.p;
	*len = o.len;
	o.p = NULL;
	rc = 0;
out_free:
	free(o.p);
	free(next);
	free(ov);
	free(pidx);
	st_mf_texts_free(&t);
	st_mf_texts_free(&pt);
	return rc;
}

/* ---- reading */

static const char *const delta_keys[] = {
	"abi_version", "created", "guest", "id", "labels", "layers", "mem_size", "parent", "ranges", "vcpu", "version",
};

/* The version, the keys and the two ids: what peek checks, and apply first. */
static int delta_head(const json_t *root, st_id *id, st_id *parent, char *why, size_t whylen)
{
	const char *key;
	json_t *v;
	int rc;

	if (!json_is_object(root))
		return st_why(why, whylen, ST_EFORMAT, "expected a JSON object at the top, got %s", st_mf_type_name(root));
	v = json_object_get(root, "version");
	if (!json_is_integer(v))
		return st_why(why, whylen, ST_EFORMAT, "version: missing or not an integer");
	if (json_integer_value(v) != ST_MANIFEST_DELTA_VERSION)
		return st_why(why, whylen, ST_EVERSION, "version %lld is not a manifest delta (%u)",
			      (long long)json_integer_value(v), ST_MANIFEST_DELTA_VERSION);
	json_object_foreach((json_t *)root, key, v) {
		bool known = false;
		for (size_t i = 0; i < sizeof(delta_keys) / sizeof(delta_keys[0]); i++)
			known = known || strcmp(key, delta_keys[i]) == 0;
		if (!known)
			return st_why(why, whylen, ST_EFORMAT, "unknown key '%.64s' in a manifest delta", key);
	}
	static const char *const required[] = { "abi_version", "created", "id", "layers", "mem_size", "parent", "ranges" };
	for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++)
		if (!json_object_get(root, required[i]))
			return st_why(why, whylen, ST_EFORMAT, "manifest delta: missing '%s'", required[i]);
	if ((rc = st_mf_get_id(json_object_get(root, "id"), "id", id, why, whylen)) < 0 ||
	    (rc = st_mf_get_id(json_object_get(root, "parent"), "parent", parent, why, whylen)) < 0)
		return rc;
	return 0;
}

int st_manifest_delta_peek(const char *json, size_t len, st_id *id, st_id *parent, char *why, size_t whylen)
{
	json_t *root;
	st_id a, b;
	int rc;

	if ((rc = st_mf_load(json, len, &root, why, whylen)) < 0)
		return rc;
	rc = delta_head(root, &a, &b, why, whylen);
	json_decref(root);
	if (rc < 0)
		return rc;
	*id = a;
	*parent = b;
	return 0;
}

/* The child's layers from the delta's list: runs of the parent's, or
 * objects. The total is checked before anything is allocated. */
static int delta_layers(const json_t *arr, const struct st_manifest *p, struct st_manifest *c, char *why,
			size_t whylen)
{
	uint64_t total = 0;
	uint32_t k = 0;
	int rc;

	if (!json_is_array(arr))
		return st_why(why, whylen, ST_EFORMAT, "layers: expected an array, got %s", st_mf_type_name(arr));
	if (json_array_size(arr) > ST_MANIFEST_MAX_LAYERS)
		return st_why(why, whylen, ST_EFORMAT, "layers: %zu entries, more than the limit of %u",
			      json_array_size(arr), ST_MANIFEST_MAX_LAYERS);
	for (size_t i = 0; i < json_array_size(arr); i++) {
		const json_t *e = json_array_get(arr, i);
		uint64_t at, n;
		char what[48];
		if (json_is_object(e)) {
			total++;
			continue;
		}
		if (!json_is_array(e) || json_array_size(e) != 2)
			return st_why(why, whylen, ST_EFORMAT,
				      "layers[%zu]: expected a layer object or [first parent layer, count]", i);
		snprintf(what, sizeof(what), "layers[%zu] first parent layer", i);
		if ((rc = st_mf_get_uint(json_array_get(e, 0), what, UINT32_MAX, &at, why, whylen)) < 0)
			return rc;
		snprintf(what, sizeof(what), "layers[%zu] count", i);
		if ((rc = st_mf_get_uint(json_array_get(e, 1), what, UINT32_MAX, &n, why, whylen)) < 0)
			return rc;
		if (n == 0 || at > p->nlayers || n > p->nlayers - at)
			return st_why(why, whylen, ST_ELAYOUT,
				      "layers[%zu]: parent layers %" PRIu64 "+%" PRIu64 " are not in the parent's %" PRIu32, i,
				      at, n, p->nlayers);
		total += n;
		if (total > ST_MANIFEST_MAX_LAYERS)
			return st_why(why, whylen, ST_EFORMAT, "layers: more than the limit of %u", ST_MANIFEST_MAX_LAYERS);
	}
	if (total && !(c->layers = st_sys_calloc(total, sizeof(*c->layers))))
		return -ENOMEM;
	c->nlayers = (uint32_t)total;
	for (size_t i = 0; i < json_array_size(arr); i++) {
		const json_t *e = json_array_get(arr, i);
		if (json_is_object(e)) {
			if ((rc = st_mf_layer_obj(e, i, &c->layers[k++], why, whylen)) < 0)
				return rc;
			continue;
		}
		uint64_t at = (uint64_t)json_integer_value(json_array_get(e, 0)), n = (uint64_t)json_integer_value(json_array_get(e, 1));
		for (uint64_t j = 0; j < n; j++)
			c->layers[k++] = p->layers[at + j];
	}
	return 0;
}

/* The overrides, absolute again, each inside memory and its layer. */
static int delta_overrides(const json_t *arr, const struct st_manifest *c, struct ov **out, size_t *nout, char *why,
			   size_t whylen)
{
	uint64_t mem = c->mem_size / ST_PAGE_SIZE, end = 0, *next = NULL;
	struct ov *v = NULL;
	size_t n;
	int rc = 0;

	if (!json_is_array(arr))
		return st_why(why, whylen, ST_EFORMAT, "ranges: expected an array, got %s", st_mf_type_name(arr));
	if (json_array_size(arr) % 4)
		return st_why(why, whylen, ST_EFORMAT, "ranges: %zu numbers, not groups of 4 (gap, count, layer, layer page)",
			      json_array_size(arr));
	n = json_array_size(arr) / 4;
	if (n > ST_MANIFEST_DELTA_MAX_OVERRIDES || n > mem)
		return st_why(why, whylen, ST_EFORMAT, "ranges: %zu overrides, more than the limit of %" PRIu64, n,
			      mem < ST_MANIFEST_DELTA_MAX_OVERRIDES ? mem : (uint64_t)ST_MANIFEST_DELTA_MAX_OVERRIDES);
	if ((n && !(v = st_sys_calloc(n, sizeof(*v)))) || !(next = st_sys_calloc(c->nlayers ? c->nlayers : 1, sizeof(*next)))) {
		rc = -ENOMEM;
		goto out_free;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t gap, cnt, L;
		const json_t *lpj = json_array_get(arr, 4 * i + 3);
		char what[48];
		snprintf(what, sizeof(what), "ranges override %zu gap", i);
		if ((rc = st_mf_get_uint(json_array_get(arr, 4 * i), what, mem, &gap, why, whylen)) < 0)
			goto out_free;
		snprintf(what, sizeof(what), "ranges override %zu count", i);
		if ((rc = st_mf_get_uint(json_array_get(arr, 4 * i + 1), what, mem, &cnt, why, whylen)) < 0)
			goto out_free;
		snprintf(what, sizeof(what), "ranges override %zu layer", i);
		if ((rc = st_mf_get_uint(json_array_get(arr, 4 * i + 2), what, c->nlayers, &L, why, whylen)) < 0)
			goto out_free;
		if (!json_is_integer(lpj)) {
			rc = st_why(why, whylen, ST_EFORMAT, "ranges override %zu layer page: expected an integer, got %s", i,
				    st_mf_type_name(lpj));
			goto out_free;
		}
		json_int_t lp = json_integer_value(lpj);
		/* gap, cnt <= mem <= 2^20 pages: no sum below overflows. */
		if (cnt == 0 || gap > mem - end || cnt > mem - end - gap) {
			rc = st_why(why, whylen, ST_ELAYOUT,
				    "ranges override %zu: pages %" PRIu64 "+%" PRIu64 " are empty or outside memory of %" PRIu64
				    " pages", i, end + gap, cnt, mem);
			goto out_free;
		}
		v[i] = (struct ov){ .g = end + gap, .n = cnt, .L = (uint32_t)L };
		if (L == HOLE) {
			if (lp != 0) {
				rc = st_why(why, whylen, ST_EFORMAT, "ranges override %zu: a hole with a layer page", i);
				goto out_free;
			}
		} else {
			/* base <= lpages <= 2^20: every sum below fits. */
			uint64_t lpages = c->layers[L - 1].pages, base = next[L - 1];
			if (lp < -(json_int_t)base || lp > (json_int_t)lpages || cnt > lpages - (uint64_t)((json_int_t)base + lp) ||
			    (uint64_t)((json_int_t)base + lp) > lpages) {
				rc = st_why(why, whylen, ST_ELAYOUT, "ranges override %zu: layer %" PRIu64 " has no pages %" PRIu64
					    "%+lld+%" PRIu64 " (%" PRIu64 " pages)", i, L - 1, base, (long long)lp, cnt, lpages);
				goto out_free;
			}
			v[i].lpage = (uint64_t)((json_int_t)base + lp);
			next[L - 1] = v[i].lpage + cnt;
		}
		end = v[i].g + cnt;
	}
	*out = v;
	*nout = n;
	v = NULL;
out_free:
	free(v);
	free(next);
	return rc;
}

/* Append [g, g + n) -> layer from lpage to c's ranges, merged with the
 * last one where it continues it (the canonical form). */
static void emit(struct st_manifest *c, uint64_t g, uint64_t n, uint32_t layer, uint64_t lpage)
{
	struct st_range *last = c->nranges ? &c->ranges[c->nranges - 1] : NULL;

	if (last && last->gpage + last->npages == g && last->layer == layer && last->lpage + last->npages == lpage) {
		last->npages += n;
		return;
	}
	c->ranges[c->nranges++] = (struct st_range){ g, n, layer, lpage };
}

/* The parent's mapping of guest pages [from, to), in the child's layers. */
static int keep(const struct st_manifest *p, const uint32_t *map, uint64_t *pi, uint64_t from, uint64_t to,
		struct st_manifest *c, char *why, size_t whylen)
{
	while (*pi < p->nranges && p->ranges[*pi].gpage + p->ranges[*pi].npages <= from)
		(*pi)++;
	for (uint64_t k = *pi; k < p->nranges && p->ranges[k].gpage < to; k++) {
		const struct st_range *r = &p->ranges[k];
		uint64_t s = r->gpage > from ? r->gpage : from, e = r->gpage + r->npages < to ? r->gpage + r->npages : to;
		if (s >= e)
			continue;
		if (map[r->layer] == NO_LAYER) {
			char hex[ST_ID_HEX_LEN + 1];
			st_id_format(&p->layers[r->layer].id, hex);
			return st_why(why, whylen, ST_ELAYOUT,
				      "pages %" PRIu64 "+%" PRIu64 " keep the parent's layer %s, which the delta's layers do not list",
				      s, e - s, hex);
		}
		emit(c, s, e - s, map[r->layer], r->lpage + (s - r->gpage));
	}
	return 0;
}

static int rebuild(const struct st_manifest *p, const struct ov *ov, size_t nov, struct st_manifest *c, char *why,
		   size_t whylen)
{
	uint64_t mem = c->mem_size / ST_PAGE_SIZE, pos = 0, pi = 0;
	struct id_at *cidx = NULL;
	uint32_t *map = NULL;
	int rc;

	/* Each override may split one parent range in two and add one. */
	uint64_t cap = p->nranges + 2 * (uint64_t)nov + 1;
	if ((rc = id_index(c->layers, c->nlayers, &cidx)) < 0)
		return rc;
	if (!(map = st_sys_calloc(p->nlayers ? p->nlayers : 1, sizeof(*map))) ||
	    !(c->ranges = st_sys_calloc(cap, sizeof(*c->ranges)))) {
		rc = -ENOMEM;
		goto out_free;
	}
	for (uint32_t i = 0; i < p->nlayers; i++) {
		uint32_t at = id_find(cidx, c->nlayers, &p->layers[i].id);
		map[i] = at != NO_LAYER && c->layers[at].pages == p->layers[i].pages ? at : NO_LAYER;
	}
	for (size_t i = 0; i < nov; i++) {
		if ((rc = keep(p, map, &pi, pos, ov[i].g, c, why, whylen)) < 0)
			goto out_free;
		if (ov[i].L != HOLE)
			emit(c, ov[i].g, ov[i].n, ov[i].L - 1, ov[i].lpage);
		pos = ov[i].g + ov[i].n;
	}
	rc = keep(p, map, &pi, pos, mem, c, why, whylen);
out_free:
	free(map);
	free(cidx);
	return rc;
}

/* labels, guest or vcpu of the child: its own, or "parent" (the parent's,
 * which must have one). */
static int nested(const json_t *root, const char *key, const struct st_manifest *p, struct st_manifest *c, char *why,
		  size_t whylen)
{
	const json_t *v = json_object_get(root, key);
	bool labels = strcmp(key, "labels") == 0, guest = strcmp(key, "guest") == 0;

	if (!v)
		return 0;
	if (json_is_string(v)) {
		if (strcmp(json_string_value(v), "parent") != 0)
			return st_why(why, whylen, ST_EFORMAT, "%s: expected an object or \"parent\"", key);
		if (labels) {
			if (!p->nlabels)
				return st_why(why, whylen, ST_EFORMAT, "labels: \"parent\", but the parent has none");
			if (!(c->labels = st_sys_calloc(p->nlabels, sizeof(*c->labels))))
				return -ENOMEM;
			for (size_t i = 0; i < p->nlabels; i++) {
				c->nlabels = i + 1;
				if (!(c->labels[i].key = st_sys_strdup(p->labels[i].key)) ||
				    !(c->labels[i].value = st_sys_strdup(p->labels[i].value)))
					return -ENOMEM;
			}
			return 0;
		}
		const char *pt = guest ? p->guest : p->vcpu;
		if (!pt)
			return st_why(why, whylen, ST_EFORMAT, "%s: \"parent\", but the parent has none", key);
		/* Sealed with the child: the text is checked and made canonical there. */
		char **slot = guest ? &c->guest : &c->vcpu;
		return (*slot = st_sys_strdup(pt)) ? 0 : -ENOMEM;
	}
	if (labels)
		return st_mf_parse_labels(v, c, why, whylen);
	return st_mf_parse_object(v, key, guest ? &c->guest : &c->vcpu, guest ? &c->guest_canon : &c->vcpu_canon, why,
				  whylen);
}

int st_manifest_delta_apply(const struct st_manifest *parent, const st_id *parent_id, const char *json, size_t len,
			    struct st_manifest **out, st_id *id, char *why, size_t whylen)
{
	struct st_manifest *c = NULL;
	char hex[ST_ID_HEX_LEN + 1], hex2[ST_ID_HEX_LEN + 1], *again = NULL;
	struct ov *ov = NULL;
	size_t nov = 0, alen;
	json_t *root;
	st_id claim, got;
	uint64_t u;
	int rc;

	if ((rc = st_mf_load(json, len, &root, why, whylen)) < 0)
		return rc;
	if ((rc = st_manifest_new(&c)) < 0)
		goto out_decref;
	if ((rc = delta_head(root, &claim, &c->parent, why, whylen)) < 0)
		goto out_free;
	c->has_parent = true;
	if (!st_id_equal(&c->parent, parent_id)) {
		st_id_format(&c->parent, hex);
		st_id_format(parent_id, hex2);
		rc = st_why(why, whylen, ST_EFORMAT, "a delta of snapshot %s, not of %s", hex, hex2);
		goto out_free;
	}
	c->version = ST_MANIFEST_VERSION;
	if ((rc = st_mf_get_uint(json_object_get(root, "mem_size"), "mem_size", ST_MANIFEST_MAX_MEM, &c->mem_size, why,
				 whylen)) < 0)
		goto out_free;
	if (c->mem_size % ST_PAGE_SIZE) {
		rc = st_why(why, whylen, ST_ELAYOUT, "mem_size %" PRIu64 " is not a multiple of %u", c->mem_size, ST_PAGE_SIZE);
		goto out_free;
	}
	if ((rc = st_mf_created_get(json_object_get(root, "created"), c->version, &c->created, why, whylen)) < 0)
		goto out_free;
	if ((rc = st_mf_get_uint(json_object_get(root, "abi_version"), "abi_version", UINT32_MAX, &u, why, whylen)) < 0)
		goto out_free;
	c->abi_version = (uint32_t)u;
	if ((rc = nested(root, "labels", parent, c, why, whylen)) < 0 || (rc = nested(root, "guest", parent, c, why, whylen)) < 0 ||
	    (rc = nested(root, "vcpu", parent, c, why, whylen)) < 0)
		goto out_free;
	if ((rc = delta_layers(json_object_get(root, "layers"), parent, c, why, whylen)) < 0 ||
	    (rc = delta_overrides(json_object_get(root, "ranges"), c, &ov, &nov, why, whylen)) < 0 ||
	    (rc = rebuild(parent, ov, nov, c, why, whylen)) < 0 || (rc = st_manifest_seal(c, why, whylen)) < 0 ||
	    (rc = st_manifest_id(c, &got, why, whylen)) < 0)
		goto out_free;
	if (!st_id_equal(&got, &claim)) {
		st_id_format(&got, hex);
		st_id_format(&claim, hex2);
		rc = st_why(why, whylen, ST_ECORRUPT, "the delta rebuilds snapshot %s, not %s as it claims", hex, hex2);
		goto out_free;
	}
	/* One pair (parent, child), one delta: anything else that rebuilds
	 * the same snapshot is not what strata writes. */
	if ((rc = st_manifest_delta_encode(parent, parent_id, c, &got, &again, &alen, why, whylen)) < 0)
		goto out_free;
	if (alen != len || memcmp(again, json, len) != 0) {
		rc = st_why(why, whylen, ST_EFORMAT, "the manifest delta is not in canonical form");
		goto out_free;
	}
	*out = c;
	c = NULL;
	if (id)
		*id = got;
	rc = 0;
out_free:
	free(again);
	free(ov);
	st_manifest_free(c);
out_decref:
	json_decref(root);
	return rc;
}
