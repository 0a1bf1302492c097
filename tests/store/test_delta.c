/* test_delta.c: manifest deltas: round trips against the full encoding, sizes, and every refusal of a hostile delta. */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"

/* A page map: which of up to 8 layers (-1: a hole) and which page of it. */
#define MAXL 8
struct pmap {
	uint64_t pages;
	int *layer;
	uint64_t *lpage;
	st_id ids[MAXL];
	uint64_t lpages[MAXL];
};

static uint64_t rnd(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 33;
}

static void pmap_init(struct pmap *p, uint64_t pages)
{
	p->pages = pages;
	p->layer = calloc(pages, sizeof(*p->layer));
	p->lpage = calloc(pages, sizeof(*p->lpage));
	cr_assert(p->layer && p->lpage);
	for (uint64_t i = 0; i < pages; i++)
		p->layer[i] = -1;
	for (int l = 0; l < MAXL; l++) {
		memset(p->ids[l].b, 0, 16);
		p->ids[l].b[0] = (uint8_t)(0x10 * (l + 1));
		p->ids[l].b[15] = (uint8_t)l;
		p->lpages[l] = pages;
	}
}

static void pmap_free(struct pmap *p)
{
	free(p->layer);
	free(p->lpage);
}

/* The manifest of a page map: its used layers in the order given by
 * order[] (a permutation of 0..MAXL-1), ranges merged. */
static struct st_manifest *pmap_manifest(const struct pmap *p, const int *order, const st_id *parent)
{
	struct st_manifest *m;
	int at[MAXL];
	bool used[MAXL] = { false };
	char why[ST_WHY_LEN] = "";

	cr_assert_eq(st_manifest_new(&m), 0);
	m->mem_size = p->pages * ST_PAGE_SIZE;
	m->created = 1764590400000000000ll;
	m->abi_version = 3;
	if (parent) {
		m->has_parent = true;
		m->parent = *parent;
	}
	for (uint64_t i = 0; i < p->pages; i++)
		if (p->layer[i] >= 0)
			used[p->layer[i]] = true;
	m->layers = calloc(MAXL, sizeof(*m->layers));
	m->ranges = calloc(p->pages, sizeof(*m->ranges));
	for (int k = 0; k < MAXL; k++) {
		int l = order[k];
		at[l] = -1;
		if (!used[l])
			continue;
		at[l] = (int)m->nlayers;
		m->layers[m->nlayers++] = (struct st_layer_ref){ p->ids[l], p->lpages[l] };
	}
	for (uint64_t i = 0; i < p->pages; i++) {
		if (p->layer[i] < 0)
			continue;
		uint32_t L = (uint32_t)at[p->layer[i]];
		struct st_range *last = m->nranges ? &m->ranges[m->nranges - 1] : NULL;
		if (last && last->gpage + last->npages == i && last->layer == L && last->lpage + last->npages == p->lpage[i])
			last->npages++;
		else
			m->ranges[m->nranges++] = (struct st_range){ i, 1, L, p->lpage[i] };
	}
	cr_assert_eq(st_manifest_seal(m, why, sizeof(why)), 0, "%s", why);
	return m;
}

static const int ident[MAXL] = { 0, 1, 2, 3, 4, 5, 6, 7 };

static char *full_text(const struct st_manifest *m, size_t *len)
{
	char *t = NULL, why[ST_WHY_LEN] = "";
	cr_assert_eq(st_manifest_encode(m, &t, len, why, sizeof(why)), 0, "%s", why);
	return t;
}

/* delta -> apply gives back exactly child: its canonical bytes and id. */
static void round_trip(const struct st_manifest *p, const struct st_manifest *c, size_t *dlen_out)
{
	char why[ST_WHY_LEN] = "", *d = NULL;
	struct st_manifest *back = NULL;
	st_id pid, cid, got, peek_id, peek_parent;
	size_t dlen, l1, l2;

	cr_assert_eq(st_manifest_id(p, &pid, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(st_manifest_id(c, &cid, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(st_manifest_delta_encode(p, &pid, c, NULL, &d, &dlen, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(strlen(d), dlen);
	cr_assert_eq(st_manifest_delta_peek(d, dlen, &peek_id, &peek_parent, why, sizeof(why)), 0, "%s", why);
	cr_assert(st_id_equal(&peek_id, &cid) && st_id_equal(&peek_parent, &pid));
	cr_assert_eq(st_manifest_delta_apply(p, &pid, d, dlen, &back, &got, why, sizeof(why)), 0, "%s\n%s", why, d);
	cr_assert(st_id_equal(&got, &cid), "the delta rebuilt another snapshot");
	char *a = full_text(c, &l1), *b = full_text(back, &l2);
	cr_assert(l1 == l2 && memcmp(a, b, l1) == 0, "rebuilt bytes differ:\n%s\n%s", a, b);
	/* A delta is not a manifest of its own. */
	struct st_manifest *x = NULL;
	cr_assert_eq(st_manifest_parse(d, dlen, &x, why, sizeof(why)), ST_EVERSION);
	cr_assert(strstr(why, "delta"), "%s", why);
	if (dlen_out)
		*dlen_out = dlen;
	free(a);
	free(b);
	free(d);
	st_manifest_free(back);
}

Test(delta, round_trip_random_children)
{
	for (uint64_t seed = 1; seed <= 400; seed++) {
		uint64_t s = seed, pages = 1 + rnd(&s) % 300;
		struct pmap p, c;
		int order[MAXL];

		pmap_init(&p, pages);
		/* Parent: three layers, pages in order within each. */
		uint64_t next[MAXL] = { 0 };
		for (uint64_t i = 0; i < pages; i++) {
			int l = (int)(rnd(&s) % 4) - 1;
			if (l >= 0 && rnd(&s) % 3) {
				p.layer[i] = l;
				p.lpage[i] = rnd(&s) % 5 == 0 ? rnd(&s) % pages : next[l]++ % pages;
			}
		}
		struct st_manifest *pm = pmap_manifest(&p, ident, NULL);
		st_id pid;
		cr_assert_eq(st_manifest_id(pm, &pid, NULL, 0), 0);
		/* Child: some pages changed to holes, to a new layer in guest
		 * order, or to other pages of the parent's layers; sometimes a
		 * whole parent layer goes, and the layer order is shuffled. */
		pmap_init(&c, rnd(&s) % 8 == 0 ? 1 + rnd(&s) % 300 : pages);
		for (uint64_t i = 0; i < c.pages && i < pages; i++) {
			c.layer[i] = p.layer[i];
			c.lpage[i] = p.lpage[i];
		}
		uint64_t changes = rnd(&s) % (c.pages + 1), nl = 0;
		for (uint64_t k = 0; k < changes; k++) {
			uint64_t i = rnd(&s) % c.pages;
			switch (rnd(&s) % 3) {
			case 0: c.layer[i] = -1; break;
			case 1: c.layer[i] = 3 + (int)(rnd(&s) % 2); c.lpage[i] = nl++ % c.pages; break;
			default: c.layer[i] = (int)(rnd(&s) % 3); c.lpage[i] = rnd(&s) % pages; break;
			}
		}
		if (rnd(&s) % 5 == 0)
			for (uint64_t i = 0; i < c.pages; i++)
				if (c.layer[i] == 1)
					c.layer[i] = -1;
		for (int k = 0; k < MAXL; k++)
			order[k] = k;
		if (rnd(&s) % 3 == 0)
			for (int k = MAXL - 1; k > 0; k--) {
				int j = (int)(rnd(&s) % (uint64_t)(k + 1)), t = order[k];
				order[k] = order[j];
				order[j] = t;
			}
		for (int l = 0; l < MAXL; l++)
			c.lpages[l] = c.pages > pages ? c.pages : pages;
		/* A layer kept from the parent keeps its size. */
		for (int l = 0; l < 3; l++)
			c.lpages[l] = p.lpages[l];
		if (c.pages < pages) {
			/* A smaller child: layers no larger than its memory. */
			bool ok = true;
			for (int l = 0; l < 3; l++)
				ok = ok && p.lpages[l] <= c.pages;
			if (!ok) {
				pmap_free(&c);
				pmap_free(&p);
				st_manifest_free(pm);
				continue;
			}
		}
		for (int l = 3; l < MAXL; l++)
			c.lpages[l] = c.pages;
		struct st_manifest *cm = pmap_manifest(&c, order, &pid);
		round_trip(pm, cm, NULL);
		st_manifest_free(cm);
		st_manifest_free(pm);
		pmap_free(&c);
		pmap_free(&p);
	}
}

/* The case: 64 MiB of random pages over 256 MiB, then 1,024 pages
 * changed at random places into a new layer. */
static void scattered(struct st_manifest **pm, struct st_manifest **cm, st_id *pid)
{
	uint64_t s = 42, pages = (256u << 20) / ST_PAGE_SIZE, next = 0;
	struct pmap p, c;

	pmap_init(&p, pages);
	for (uint64_t k = 0; k < 16384; k++) {
		uint64_t i = rnd(&s) % pages;
		if (p.layer[i] < 0)
			p.layer[i] = 0;
	}
	for (uint64_t i = 0; i < pages; i++)
		if (p.layer[i] == 0)
			p.lpage[i] = next++;
	p.lpages[0] = next;
	*pm = pmap_manifest(&p, ident, NULL);
	cr_assert_eq(st_manifest_id(*pm, pid, NULL, 0), 0);
	pmap_init(&c, pages);
	memcpy(c.layer, p.layer, pages * sizeof(*c.layer));
	memcpy(c.lpage, p.lpage, pages * sizeof(*c.lpage));
	c.lpages[0] = next;
	for (uint64_t k = 0; k < 1024;) {
		uint64_t i = rnd(&s) % pages;
		if (c.layer[i] == 1)
			continue;
		c.layer[i] = 1;
		k++;
	}
	next = 0;
	for (uint64_t i = 0; i < pages; i++)
		if (c.layer[i] == 1)
			c.lpage[i] = next++;
	c.lpages[1] = next;
	*cm = pmap_manifest(&c, ident, pid);
	pmap_free(&p);
	pmap_free(&c);
}

Test(delta, scattered_change_costs_its_own_pages)
{
	struct st_manifest *pm, *cm;
	st_id pid;
	size_t dlen = 0, flen;

	scattered(&pm, &cm, &pid);
	char *full = full_text(cm, &flen);
	round_trip(pm, cm, &dlen);
	cr_log_info("child: %" PRIu64 " ranges, full %zu bytes, delta %zu bytes", cm->nranges, flen, dlen);
	cr_assert_gt(cm->nranges, 10000);
	cr_assert_gt(flen, 150000);
	/* 1,024 overrides in at most 12 bytes each, and the fixed keys. */
	cr_assert_lt(dlen, 12 * 1024, "delta of %zu bytes", dlen);
	free(full);
	st_manifest_free(cm);
	st_manifest_free(pm);
}

Test(delta, version_1_parent_and_version_2_child_only)
{
	struct st_manifest *pm, *cm;
	char why[ST_WHY_LEN] = "", *d = NULL;
	size_t len;
	st_id pid;

	scattered(&pm, &cm, &pid);
	/* A version 1 parent (its own id) still has version 2 deltas. */
	pm->version = 1;
	cr_assert_eq(st_manifest_id(pm, &pid, NULL, 0), 0);
	cm->parent = pid;
	round_trip(pm, cm, NULL);
	/* A version 1 child is never written as a delta (its id would need
	 * version 1's encoding). */
	cm->version = 1;
	cr_assert_eq(st_manifest_delta_encode(pm, &pid, cm, NULL, &d, &len, why, sizeof(why)), ST_EVERSION);
	cm->version = 2;
	cm->has_parent = false;
	cr_assert_eq(st_manifest_delta_encode(pm, &pid, cm, NULL, &d, &len, why, sizeof(why)), -EINVAL);
	st_manifest_free(cm);
	st_manifest_free(pm);
}

/* ---- hostile deltas */

struct fixture {
	struct st_manifest *p, *c;
	st_id pid, cid;
	char *d;
	size_t len;
};

/* A small parent and child: parent pages 0-3 in layer A, 8-9 in layer B;
 * the child maps 2 in layer C, makes 9 a hole. */
static void fixture(struct fixture *f)
{
	struct pmap p, c;
	char why[ST_WHY_LEN] = "";

	pmap_init(&p, 16);
	for (int i = 0; i < 4; i++) {
		p.layer[i] = 0;
		p.lpage[i] = (uint64_t)i;
	}
	p.layer[8] = 1;
	p.layer[9] = 1;
	p.lpage[9] = 1;
	p.lpages[0] = 4;
	p.lpages[1] = 2;
	f->p = pmap_manifest(&p, ident, NULL);
	cr_assert_eq(st_manifest_id(f->p, &f->pid, NULL, 0), 0);
	pmap_init(&c, 16);
	memcpy(c.layer, p.layer, 16 * sizeof(int));
	memcpy(c.lpage, p.lpage, 16 * sizeof(uint64_t));
	memcpy(c.lpages, p.lpages, sizeof(p.lpages));
	c.layer[2] = 2;
	c.lpage[2] = 0;
	c.lpages[2] = 1;
	c.layer[9] = -1;
	f->c = pmap_manifest(&c, ident, &f->pid);
	cr_assert_eq(st_manifest_id(f->c, &f->cid, NULL, 0), 0);
	cr_assert_eq(st_manifest_delta_encode(f->p, &f->pid, f->c, NULL, &f->d, &f->len, why, sizeof(why)), 0, "%s", why);
	pmap_free(&p);
	pmap_free(&c);
}

static void fixture_free(struct fixture *f)
{
	st_manifest_free(f->p);
	st_manifest_free(f->c);
	free(f->d);
}

/* The fixture's delta with key set to value (JSON text), canonical again. */
static char *with(const struct fixture *f, const char *key, const char *value)
{
	json_t *root = json_loads(f->d, 0, NULL), *v = json_loads(value, JSON_DECODE_ANY, NULL);
	cr_assert(root && v, "%s", value);
	json_object_set_new(root, key, v);
	char *out = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(root);
	return out;
}

static int apply(const struct fixture *f, const char *text, char *why)
{
	struct st_manifest *m = NULL;
	int rc = st_manifest_delta_apply(f->p, &f->pid, text, strlen(text), &m, NULL, why, ST_WHY_LEN);

	cr_assert(rc < 0 || m);
	st_manifest_free(m);
	return rc;
}

Test(delta, fixture_is_what_the_format_says)
{
	struct fixture f;
	char hex[ST_ID_HEX_LEN + 1], want[1024], why[ST_WHY_LEN] = "";

	fixture(&f);
	/* Layers: the parent's two as one run, then the new one; overrides:
	 * page 2 in layer 3 (index 2 + 1), page 9 a hole (gap 6 after 3). */
	char *p = strstr(f.d, "\"layers\":[[0,2],{\"id\":\"");
	cr_assert(p, "%s", f.d);
	cr_assert(strstr(f.d, "\"ranges\":[2,1,3,0,6,1,0,0]"), "%s", f.d);
	st_id_format(&f.pid, hex);
	snprintf(want, sizeof(want), "\"parent\":\"%s\"", hex);
	cr_assert(strstr(f.d, want));
	cr_assert_eq(apply(&f, f.d, why), 0, "%s", why);
	fixture_free(&f);
}

Test(delta, refuses_another_parent)
{
	struct fixture f;
	struct st_manifest *m = NULL;
	char why[ST_WHY_LEN] = "";
	st_id other;

	fixture(&f);
	other = f.pid;
	other.b[0] ^= 1;
	cr_assert_eq(st_manifest_delta_apply(f.p, &other, f.d, f.len, &m, NULL, why, sizeof(why)), ST_EFORMAT);
	cr_assert(strstr(why, "a delta of snapshot"), "%s", why);
	cr_assert_null(m);
	fixture_free(&f);
}

Test(delta, refuses_a_wrong_id)
{
	struct fixture f;
	char why[ST_WHY_LEN] = "";

	fixture(&f);
	char *t = with(&f, "id", "\"00000000000000000000000000000000\"");
	cr_assert_eq(apply(&f, t, why), ST_ECORRUPT);
	cr_assert(strstr(why, "not 00000000000000000000000000000000 as it claims"), "%s", why);
	free(t);
	/* Changed content under the right id: the hash says so. */
	t = with(&f, "abi_version", "4");
	cr_assert_eq(apply(&f, t, why), ST_ECORRUPT, "%s", why);
	free(t);
	fixture_free(&f);
}

Test(delta, refuses_pages_outside_memory_or_layer)
{
	struct fixture f;
	char why[ST_WHY_LEN] = "";
	static const char *const bad[] = {
		"[2,1,3,0,6,8,0,0]",   /* 9+8 passes 16 pages */
		"[17,1,3,0]",          /* gap beyond memory */
		"[2,1,3,1,6,1,0,0]",   /* layer page 1 of a 1-page layer */
		"[2,1,3,-1,6,1,0,0]",  /* before the layer's first page */
		"[2,1,4,0,6,1,0,0]",   /* layer 4 of 3 */
		"[2,0,3,0,6,1,0,0]",   /* an empty override */
	};

	fixture(&f);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *t = with(&f, "ranges", bad[i]);
		int rc = apply(&f, t, why);
		cr_assert(rc == ST_ELAYOUT || rc == ST_EFORMAT, "%s: %d %s", bad[i], rc, why);
		cr_assert(strstr(why, "override"), "%s: %s", bad[i], why);
		free(t);
	}
	fixture_free(&f);
}

Test(delta, refuses_overlapping_or_unsorted_overrides)
{
	struct fixture f;
	char why[ST_WHY_LEN] = "";

	fixture(&f);
	/* Gaps are counts from the last end: a negative one is the only way
	 * to go back, and it is not a count. */
	char *t = with(&f, "ranges", "[2,1,3,0,-1,1,0,0]");
	cr_assert_eq(apply(&f, t, why), ST_EFORMAT);
	cr_assert(strstr(why, "gap"), "%s", why);
	free(t);
	/* Not groups of four. */
	t = with(&f, "ranges", "[2,1,3,0,6,1,0]");
	cr_assert_eq(apply(&f, t, why), ST_EFORMAT);
	free(t);
	/* A hole that names a layer page. */
	t = with(&f, "ranges", "[2,1,3,0,6,1,0,5]");
	cr_assert_eq(apply(&f, t, why), ST_EFORMAT);
	cr_assert(strstr(why, "hole"), "%s", why);
	free(t);
	/* Adjacent overrides that are one: rebuilds the same snapshot, but is
	 * not the canonical delta. */
	t = with(&f, "ranges", "[2,1,3,0,6,1,0,0,0,1,0,0]");
	int rc = apply(&f, t, why);
	cr_assert(rc == ST_EFORMAT || rc == ST_ECORRUPT, "%d %s", rc, why);
	free(t);
	fixture_free(&f);
}

Test(delta, refuses_layer_runs_outside_the_parent)
{
	struct fixture f;
	char why[ST_WHY_LEN] = "";
	static const char *const bad[] = {
		"[[0,3]]", "[[2,1]]", "[[0,0]]", "[[0,4294967295]]", "[[4294967295,1]]", "[[0,2],[0]]", "[7]",
	};

	fixture(&f);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *t = with(&f, "layers", bad[i]);
		int rc = apply(&f, t, why);
		cr_assert(rc == ST_ELAYOUT || rc == ST_EFORMAT, "%s: %d %s", bad[i], rc, why);
		free(t);
	}
	/* The child keeps parent pages of a layer it does not list. */
	char hex[ST_ID_HEX_LEN + 1], runs[256];
	st_id_format(&f.c->layers[2].id, hex);
	snprintf(runs, sizeof(runs), "[[1,1],{\"id\":\"%s\",\"pages\":1},{\"id\":\"%s\",\"pages\":1}]", hex,
		 "77777777777777777777777777777777");
	char *t = with(&f, "layers", runs);
	cr_assert_eq(apply(&f, t, why), ST_ELAYOUT);
	cr_assert(strstr(why, "which the delta's layers do not list"), "%s", why);
	free(t);
	fixture_free(&f);
}

Test(delta, refuses_huge_counts_before_allocating)
{
	struct fixture f;
	char why[ST_WHY_LEN] = "";

	fixture(&f);
	/* More overrides than memory has pages, and than the cap. */
	size_t n = 4 * ((size_t)ST_MANIFEST_DELTA_MAX_OVERRIDES + 1);
	char *arr = malloc(2 * n + 2), *p = arr;
	*p++ = '[';
	for (size_t i = 0; i < n; i++) {
		*p++ = '0';
		*p++ = i + 1 < n ? ',' : ']';
	}
	*p = '\0';
	char *t = with(&f, "ranges", arr);
	cr_assert_eq(apply(&f, t, why), ST_EFORMAT);
	cr_assert(strstr(why, "overrides, more than the limit"), "%s", why);
	free(t);
	free(arr);
	/* Layer runs summing past the layer limit (each inside the parent). */
	json_t *runs = json_array();
	for (int i = 0; i < 40000; i++)
		json_array_append_new(runs, json_pack("[ii]", 0, 2));
	char *rt = json_dumps(runs, JSON_COMPACT);
	json_decref(runs);
	t = with(&f, "layers", rt);
	cr_assert_eq(apply(&f, t, why), ST_EFORMAT);
	cr_assert(strstr(why, "more than the limit"), "%s", why);
	free(t);
	free(rt);
	fixture_free(&f);
}

Test(delta, refuses_non_canonical_text_and_unknown_keys)
{
	struct fixture f;
	char why[ST_WHY_LEN] = "";

	fixture(&f);
	char *spaced = malloc(f.len + 2);
	memcpy(spaced, f.d, f.len);
	memcpy(spaced + f.len, " ", 2);
	cr_assert_eq(apply(&f, spaced, why), ST_EFORMAT);
	cr_assert(strstr(why, "canonical"), "%s", why);
	free(spaced);
	char *t = with(&f, "extra", "1");
	cr_assert_eq(apply(&f, t, why), ST_EFORMAT);
	cr_assert(strstr(why, "unknown key"), "%s", why);
	free(t);
	t = with(&f, "version", "2");
	cr_assert_eq(apply(&f, t, why), ST_EVERSION);
	free(t);
	json_t *root = json_loads(f.d, 0, NULL);
	json_object_del(root, "parent");
	t = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(root);
	cr_assert_eq(apply(&f, t, why), ST_EFORMAT);
	cr_assert(strstr(why, "missing 'parent'"), "%s", why);
	st_id a, b;
	cr_assert_eq(st_manifest_delta_peek(t, strlen(t), &a, &b, why, sizeof(why)), ST_EFORMAT);
	free(t);
	fixture_free(&f);
}

Test(delta, peek_tells_a_full_manifest_from_a_delta)
{
	struct fixture f;
	char why[ST_WHY_LEN] = "", *full;
	size_t len;
	st_id a, b;

	fixture(&f);
	full = full_text(f.c, &len);
	cr_assert_eq(st_manifest_delta_peek(full, len, &a, &b, why, sizeof(why)), ST_EVERSION);
	cr_assert_eq(st_manifest_delta_peek("[1]", 3, &a, &b, why, sizeof(why)), ST_EFORMAT);
	cr_assert_eq(st_manifest_delta_peek("{", 1, &a, &b, why, sizeof(why)), ST_EFORMAT);
	/* A delta applied as a parent's own text is refused (it names itself
	 * nowhere: the ids differ). */
	struct st_manifest *m = NULL;
	cr_assert_lt(st_manifest_delta_apply(f.p, &f.pid, full, len, &m, NULL, why, sizeof(why)), 0);
	free(full);
	fixture_free(&f);
}

Test(delta, nested_values_equal_to_the_parents_are_written_parent)
{
	struct fixture f;
	char why[ST_WHY_LEN] = "", *d = NULL;
	size_t len;

	fixture(&f);
	/* Parent and child: the same guest and labels, another vcpu. */
	struct st_manifest *ms[2] = { f.p, f.c };
	for (int i = 0; i < 2; i++) {
		struct st_manifest *m = ms[i];
		m->guest = strdup("{\"name\":\"echo\",\"entry\":4096}");
		m->vcpu = strdup(i ? "{\"rip\":2}" : "{\"rip\":1}");
		m->labels = calloc(1, sizeof(*m->labels));
		m->labels[0].key = strdup("app");
		m->labels[0].value = strdup("web");
		m->nlabels = 1;
		cr_assert_eq(st_manifest_seal(m, why, sizeof(why)), 0, "%s", why);
	}
	cr_assert_eq(st_manifest_id(f.p, &f.pid, NULL, 0), 0);
	f.c->parent = f.pid;
	round_trip(f.p, f.c, NULL);
	cr_assert_eq(st_manifest_delta_encode(f.p, &f.pid, f.c, NULL, &d, &len, why, sizeof(why)), 0, "%s", why);
	cr_assert(strstr(d, "\"guest\":\"parent\"") && strstr(d, "\"labels\":\"parent\"") && strstr(d, "\"vcpu\":{\"rip\":2}"),
		  "%s", d);
	free(f.d);
	f.d = d;
	f.len = len;
	/* "parent" where the parent has none, or any other string. */
	struct st_manifest *bare = NULL;
	cr_assert_eq(st_manifest_dup(f.p, &bare), 0);
	free(bare->guest);
	bare->guest = NULL;
	bare->guest_canon = 0;
	st_id bid;
	cr_assert_eq(st_manifest_id(bare, &bid, NULL, 0), 0);
	struct st_manifest *m = NULL;
	cr_assert_eq(st_manifest_delta_apply(bare, &f.pid, d, len, &m, NULL, why, sizeof(why)), ST_EFORMAT);
	cr_assert(strstr(why, "the parent has none"), "%s", why);
	char *t = with(&f, "guest", "\"mine\"");
	cr_assert_eq(apply(&f, t, why), ST_EFORMAT);
	cr_assert(strstr(why, "expected an object or"), "%s", why);
	free(t);
	st_manifest_free(bare);
	fixture_free(&f);
}
