/* test_manifest.c: manifest parsing (strict), validation, canonical encoding and snapshot id. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/store.h"

#define A "00112233445566778899aabbccddeeff"
#define B "ffeeddccbbaa99887766554433221100"

/* A valid manifest in canonical form (keys sorted, compact). */
static const char canonical[] =
	"{\"abi_version\":3,\"created\":1700000000000000000,\"guest\":{\"entry\":4096,\"name\":\"echo\"},"
	"\"labels\":{\"app\":\"web\",\"team\":\"x\"},"
	"\"layers\":[{\"id\":\"" A "\",\"pages\":4},{\"id\":\"" B "\",\"pages\":2}],"
	"\"mem_size\":65536,\"parent\":\"" B "\","
	"\"ranges\":[[0,2,0,0],[4,2,1,0],[8,2,0,2]],"
	"\"vcpu\":{\"rip\":1,\"rsp\":2},\"version\":1}";

/* The same manifest: whitespace, other key order, labels unsorted. */
static const char reordered[] =
	"{ \"version\": 1,\n  \"mem_size\": 65536, \"created\": 1700000000000000000,\n"
	"  \"ranges\": [ [0, 2, 0, 0], [4, 2, 1, 0], [8, 2, 0, 2] ],\n"
	"  \"layers\": [ {\"pages\": 4, \"id\": \"" A "\"}, {\"id\": \"" B "\", \"pages\": 2} ],\n"
	"  \"labels\": {\"team\": \"x\", \"app\": \"web\"}, \"parent\": \"" B "\", \"abi_version\": 3,\n"
	"  \"vcpu\": {\"rsp\": 2, \"rip\": 1}, \"guest\": {\"name\": \"echo\", \"entry\": 4096} }\n";

static struct st_manifest *parse_ok(const char *text)
{
	char why[ST_WHY_LEN] = "";
	struct st_manifest *m = NULL;
	int rc = st_manifest_parse(text, strlen(text), &m, why, sizeof(why));

	cr_assert_eq(rc, 0, "parse: %s: %s", st_strerror(rc), why);
	return m;
}

Test(manifest, parse_fields)
{
	struct st_manifest *m = parse_ok(canonical);
	st_id a;

	cr_assert_eq(m->version, 1);
	cr_assert_eq(m->mem_size, 65536);
	cr_assert_eq(m->nlayers, 2);
	cr_assert_eq(st_id_parse(A, &a), 0);
	cr_assert(st_id_equal(&m->layers[0].id, &a));
	cr_assert_eq(m->layers[0].pages, 4);
	cr_assert_eq(m->nranges, 3);
	cr_assert_eq(m->ranges[1].gpage, 4);
	cr_assert_eq(m->ranges[1].layer, 1);
	cr_assert_eq(m->ranges[2].lpage, 2);
	cr_assert(m->has_parent);
	cr_assert_eq(m->created, 1700000000000000000ll);
	cr_assert_eq(m->abi_version, 3);
	cr_assert_str_eq(m->vcpu, "{\"rip\":1,\"rsp\":2}");
	cr_assert_str_eq(m->guest, "{\"entry\":4096,\"name\":\"echo\"}");
	cr_assert_eq(m->nlabels, 2);
	cr_assert_str_eq(m->labels[0].key, "app");
	cr_assert_str_eq(m->labels[1].value, "x");
	st_manifest_free(m);
}

Test(manifest, round_trip_is_canonical)
{
	struct st_manifest *m = parse_ok(reordered), *m2;
	char *text;
	size_t len;

	cr_assert_eq(st_manifest_encode(m, &text, &len, NULL, 0), 0);
	cr_assert_str_eq(text, canonical);
	cr_assert_eq(len, strlen(canonical));
	m2 = parse_ok(text);
	free(text);
	cr_assert_eq(st_manifest_encode(m2, &text, &len, NULL, 0), 0);
	cr_assert_str_eq(text, canonical, "encode(parse(encode(x))) == encode(x)");
	free(text);
	st_manifest_free(m);
	st_manifest_free(m2);
}

Test(manifest, id_is_stable_across_formatting)
{
	struct st_manifest *a = parse_ok(canonical), *b = parse_ok(reordered), *c;
	st_id ia, ib, ic, raw;

	cr_assert_eq(st_manifest_id(a, &ia, NULL, 0), 0);
	cr_assert_eq(st_manifest_id(b, &ib, NULL, 0), 0);
	cr_assert(st_id_equal(&ia, &ib));
	st_id_hash(canonical, strlen(canonical), &raw);
	cr_assert(st_id_equal(&ia, &raw), "id = XXH3-128 of the canonical text");
	cr_assert_eq(st_manifest_dup(a, &c), 0);
	c->created++;
	cr_assert_eq(st_manifest_id(c, &ic, NULL, 0), 0);
	cr_assert(!st_id_equal(&ia, &ic), "any field change changes the id");
	st_manifest_free(a);
	st_manifest_free(b);
	st_manifest_free(c);
}

Test(manifest, minimal_manifest_without_optional_keys)
{
	const char *t = "{\"abi_version\":0,\"created\":0,\"layers\":[],\"mem_size\":0,\"ranges\":[],\"version\":1}";
	struct st_manifest *m = parse_ok(t);
	char *text;
	size_t len;

	cr_assert(!m->has_parent);
	cr_assert_null(m->vcpu);
	cr_assert_eq(st_manifest_encode(m, &text, &len, NULL, 0), 0);
	cr_assert_str_eq(text, t);
	free(text);
	st_manifest_free(m);
}

Test(manifest, lookup_finds_ranges_and_holes)
{
	struct st_manifest *m = parse_ok(canonical);
	uint32_t layer;
	uint64_t lpage;

	cr_assert_eq(st_manifest_lookup(m, 1, &layer, &lpage), 0);
	cr_assert_eq(layer, 0);
	cr_assert_eq(lpage, 1);
	cr_assert_eq(st_manifest_lookup(m, 2, &layer, &lpage), -ENOENT);
	cr_assert_eq(st_manifest_lookup(m, 5, &layer, &lpage), 0);
	cr_assert_eq(layer, 1);
	cr_assert_eq(lpage, 1);
	cr_assert_eq(st_manifest_lookup(m, 9, &layer, &lpage), 0);
	cr_assert_eq(lpage, 3);
	cr_assert_eq(st_manifest_lookup(m, 15, &layer, &lpage), -ENOENT);
	cr_assert_eq(st_manifest_layer_pages(m), 6);
	st_manifest_free(m);
}

/* Replace the first occurrence of `from` in the canonical text. */
static char *edit(const char *from, const char *to)
{
	const char *p = strstr(canonical, from);
	char *out;

	cr_assert_not_null(p, "test bug: '%s' not in the template", from);
	out = malloc(strlen(canonical) + strlen(to) + 1);
	memcpy(out, canonical, (size_t)(p - canonical));
	strcpy(out + (p - canonical), to);
	strcat(out, p + strlen(from));
	return out;
}

struct bad_case {
	const char *name;
	const char *from, *to; /* edit of the canonical text; from NULL: `to` is the whole text */
	int code;
	const char *why_has;   /* substring expected in the why string */
};

static const struct bad_case bad[] = {
	{ "empty", NULL, "", ST_EFORMAT, "JSON" },
	{ "not an object", NULL, "[1,2]", ST_EFORMAT, "object" },
	{ "trailing junk", "\"version\":1}", "\"version\":1} x", ST_EFORMAT, "JSON" },
	{ "duplicate key", "\"version\":1}", "\"version\":1,\"version\":1}", ST_EFORMAT, "duplicate" },
	{ "unknown version", "\"version\":1}", "\"version\":3}", ST_EVERSION, "version 3" },
	{ "version 2 with an integer created", "\"version\":1}", "\"version\":2}", ST_EFORMAT, "created: expected a UTC time" },
	{ "version as string", "\"version\":1}", "\"version\":\"1\"}", ST_EFORMAT, "version" },
	{ "missing version", ",\"version\":1}", "}", ST_EFORMAT, "missing 'version'" },
	{ "unknown key", "\"version\":1}", "\"version\":1,\"extra\":0}", ST_EFORMAT, "unknown key 'extra'" },
	{ "missing layers", "\"layers\":[{\"id\":\"" A "\",\"pages\":4},{\"id\":\"" B "\",\"pages\":2}],", "",
	  ST_EFORMAT, "missing 'layers'" },
	{ "negative mem_size", "\"mem_size\":65536", "\"mem_size\":-4096", ST_EFORMAT, "negative" },
	{ "real mem_size", "\"mem_size\":65536", "\"mem_size\":65536.0", ST_EFORMAT, "real" },
	{ "huge integer", "\"mem_size\":65536", "\"mem_size\":999999999999999999999999", ST_EFORMAT, "JSON" },
	{ "mem_size not page multiple", "\"mem_size\":65536", "\"mem_size\":65537", ST_ELAYOUT, "multiple" },
	{ "mem_size over limit", "\"mem_size\":65536", "\"mem_size\":1125899906842624", ST_ELAYOUT, "limit" },
	{ "range out of bounds", "[8,2,0,2]", "[15,2,0,2]", ST_ELAYOUT, "outside memory" },
	{ "range count overflows", "[8,2,0,2]", "[8,9223372036854775807,0,2]", ST_ELAYOUT, "outside memory" },
	{ "layer page overflows", "[8,2,0,2]", "[8,2,0,9223372036854775807]", ST_ELAYOUT, "too short" },
	{ "ranges overlap", "[4,2,1,0]", "[1,2,1,0]", ST_ELAYOUT, "sorted and disjoint" },
	{ "ranges unsorted", "[[0,2,0,0],[4,2,1,0]", "[[4,2,1,0],[0,2,0,0]", ST_ELAYOUT, "sorted and disjoint" },
	{ "layer too short", "[8,2,0,2]", "[8,3,0,2]", ST_ELAYOUT, "too short" },
	{ "layer index out of range", "[4,2,1,0]", "[4,2,7,0]", ST_ELAYOUT, "does not exist" },
	{ "empty range", "[4,2,1,0]", "[4,0,1,0]", ST_ELAYOUT, "empty" },
	{ "adjacent ranges not merged", "[[0,2,0,0],", "[[0,2,0,0],[2,2,0,2],", ST_ELAYOUT, "merged" },
	{ "unused layer", "[4,2,1,0],", "", ST_ELAYOUT, "not used" },
	{ "duplicate layer", "\"id\":\"" B "\",\"pages\":2", "\"id\":\"" A "\",\"pages\":2", ST_ELAYOUT, "twice" },
	{ "zero-page layer", "\"pages\":2", "\"pages\":0", ST_ELAYOUT, "pages" },
	{ "bad layer id", "{\"id\":\"" A "\"", "{\"id\":\"00112233445566778899AABBCCDDEEFF\"", ST_EFORMAT, "hex" },
	{ "layer unknown key", "\"pages\":2}", "\"pages\":2,\"x\":1}", ST_EFORMAT, "unknown key 'x'" },
	{ "range of 3 numbers", "[8,2,0,2]", "[8,2,0]", ST_EFORMAT, "expected [" },
	{ "range layer too big for u32", "[8,2,0,2]", "[8,2,4294967296,2]", ST_EFORMAT, "larger" },
	{ "label key with slash", "\"app\":\"web\"", "\"a/b\":\"web\"", ST_EBADNAME, "a/b" },
	{ "label key dotdot", "\"app\":\"web\"", "\"..\":\"web\"", ST_EBADNAME, ".." },
	{ "label value not string", "\"app\":\"web\"", "\"app\":5", ST_EFORMAT, "string" },
	{ "parent not an id", "\"parent\":\"" B "\"", "\"parent\":\"../x\"", ST_EFORMAT, "parent" },
	{ "vcpu not an object", "\"vcpu\":{\"rip\":1,\"rsp\":2}", "\"vcpu\":[1]", ST_EFORMAT, "vcpu" },
	{ "negative created", "\"created\":1700000000000000000", "\"created\":-1", ST_EFORMAT, "created" },
	{ "abi_version too big", "\"abi_version\":3", "\"abi_version\":4294967296", ST_EFORMAT, "abi_version" },
	{ "layers not an array", "\"layers\":[{\"id\":\"" A "\",\"pages\":4},{\"id\":\"" B "\",\"pages\":2}]",
	  "\"layers\":{}", ST_EFORMAT, "expected an array" },
};

Test(manifest, malformed_manifests_are_rejected_with_the_right_code)
{
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const struct bad_case *c = &bad[i];
		char *text = c->from ? edit(c->from, c->to) : strdup(c->to);
		char why[ST_WHY_LEN] = "";
		struct st_manifest *m = (struct st_manifest *)0x1;
		int rc = st_manifest_parse(text, strlen(text), &m, why, sizeof(why));

		cr_expect_eq(rc, c->code, "%s: got %d (%s), why '%s'", c->name, rc, st_strerror(rc), why);
		cr_expect_eq(m, (struct st_manifest *)0x1, "%s: out-parameter written on failure", c->name);
		cr_expect_not_null(strstr(why, c->why_has), "%s: why '%s' lacks '%s'", c->name, why, c->why_has);
		free(text);
	}
}

/* Regression (issue 20): a mem_size of 1 TiB passed parse, so `strata
 * verify` and `strata import` took a snapshot no backend can run. The limit
 * is what the VMM addresses, 4 GiB, and the refusal names the field and it. */
Test(manifest, mem_size_beyond_what_the_vmm_addresses_is_refused_naming_the_limit)
{
	static const char *const over[] = { "\"mem_size\":1099511627776", "\"mem_size\":4294971392" };
	char why[ST_WHY_LEN] = "";

	for (size_t i = 0; i < 2; i++) {
		char *text = edit("\"mem_size\":65536", over[i]);
		struct st_manifest *m = NULL;
		int rc = st_manifest_parse(text, strlen(text), &m, why, sizeof(why));
		cr_expect_eq(rc, ST_ELAYOUT, "%s: got %s (%s)", over[i], st_strerror(rc), why);
		cr_expect_null(m);
		cr_expect(strstr(why, "mem_size") && strstr(why, "limit of 4294967296") && strstr(why, "4 GiB"),
			  "why names the field and the limit: %s", why);
		free(text);
	}
	char *text = edit("\"mem_size\":65536", "\"mem_size\":4294967296");
	struct st_manifest *m = parse_ok(text);
	cr_assert_eq(m->mem_size, ST_MANIFEST_MAX_MEM);
	st_manifest_free(m);
	free(text);
}

/* Regression (issue 20): a layer could be 1 TiB whatever mem_size said: a
 * 72 KiB directory whose one layer is a 2 GiB sparse file (one page used)
 * made `strata run` copy 2 GiB and `strata import` store a 2 GiB blob. No
 * strata writer makes a layer larger than its snapshot's memory. */
Test(manifest, a_layer_larger_than_the_snapshots_memory_is_refused)
{
	char why[ST_WHY_LEN] = "";
	char *text = edit("\"pages\":4}", "\"pages\":524288}");
	struct st_manifest *m = NULL;
	int rc = st_manifest_parse(text, strlen(text), &m, why, sizeof(why));

	cr_assert_eq(rc, ST_ELAYOUT, "got %s (%s)", st_strerror(rc), why);
	cr_assert_null(m);
	cr_assert(strstr(why, "layers[0]: 524288 pages, more than the snapshot's memory") && strstr(why, "16 pages"),
		  "why: %s", why);
	free(text);
	/* A layer as large as the memory is fine. */
	text = edit("\"pages\":4}", "\"pages\":16}");
	st_manifest_free(parse_ok(text));
	free(text);
}

Test(manifest, truncated_manifests_are_rejected)
{
	size_t len = strlen(canonical);

	for (size_t cut = 0; cut < len; cut++) {
		struct st_manifest *m = NULL;
		char why[ST_WHY_LEN];
		int rc = st_manifest_parse(canonical, cut, &m, why, sizeof(why));
		cr_assert_eq(rc, ST_EFORMAT, "cut at %zu: %d", cut, rc);
		cr_assert_null(m);
	}
}

Test(manifest, validate_checks_built_manifests)
{
	struct st_manifest *m;
	char why[ST_WHY_LEN];
	char *text;
	size_t len;

	cr_assert_eq(st_manifest_new(&m), 0);
	m->mem_size = 8 * ST_PAGE_SIZE;
	m->layers = calloc(1, sizeof(*m->layers));
	m->nlayers = 1;
	m->layers[0].pages = 2;
	st_id_hash("layer", 5, &m->layers[0].id);
	m->ranges = calloc(1, sizeof(*m->ranges));
	m->nranges = 1;
	m->ranges[0] = (struct st_range){ .gpage = 7, .npages = 2, .layer = 0, .lpage = 0 };
	cr_assert_eq(st_manifest_validate(m, why, sizeof(why)), ST_ELAYOUT);
	cr_assert_eq(st_manifest_encode(m, &text, &len, why, sizeof(why)), ST_ELAYOUT, "encode validates");
	m->ranges[0].gpage = 6;
	cr_assert_eq(st_manifest_validate(m, why, sizeof(why)), 0, "%s", why);
	m->vcpu = strdup("{\"a\":");
	cr_assert_eq(st_manifest_validate(m, why, sizeof(why)), ST_EFORMAT);
	free(m->vcpu);
	m->vcpu = strdup("{\"a\":1}");
	m->labels = calloc(2, sizeof(*m->labels));
	m->nlabels = 2;
	m->labels[0] = (struct st_label){ strdup("b"), strdup("1") };
	m->labels[1] = (struct st_label){ strdup("a"), strdup("2") };
	cr_assert_eq(st_manifest_validate(m, why, sizeof(why)), ST_EFORMAT, "labels must be sorted");
	st_manifest_free(m);
}

/* The largest manifest strata can write: every count at its limit and every
 * number at its widest. It must fit under the size cap and parse within the
 * memory budget, or the caps refuse what strata itself writes. */
Test(manifest, the_largest_manifest_strata_writes_fits_the_caps, .timeout = 120)
{
	struct st_manifest *m, *back = NULL;
	char why[ST_WHY_LEN] = "", *text;
	size_t len;

	cr_assert_eq(st_manifest_new(&m), 0);
	m->mem_size = ST_MANIFEST_MAX_MEM;
	m->nlayers = ST_MANIFEST_MAX_RANGES;
	m->nranges = ST_MANIFEST_MAX_RANGES;
	m->layers = calloc(m->nlayers, sizeof(*m->layers));
	m->ranges = calloc(m->nranges, sizeof(*m->ranges));
	cr_assert(m->layers && m->ranges);
	for (uint32_t i = 0; i < m->nlayers; i++) {
		m->layers[i].pages = ST_MANIFEST_MAX_MEM / ST_PAGE_SIZE;
		st_id_hash(&i, sizeof(i), &m->layers[i].id);
		m->ranges[i] = (struct st_range){ .gpage = (uint64_t)i * 16 + 15, .npages = 1, .layer = i,
						   .lpage = m->layers[i].pages - 1 };
	}
	m->created = INT64_MAX;
	m->nlabels = ST_MANIFEST_MAX_LABELS;
	m->labels = calloc(m->nlabels, sizeof(*m->labels));
	for (size_t i = 0; i < m->nlabels; i++) {
		char key[129];
		memset(key, 'k', 128);
		key[128] = '\0';
		key[0] = (char)('a' + i / 26 % 26);
		key[1] = (char)('a' + i % 26);
		m->labels[i].key = strdup(key);
		m->labels[i].value = malloc(ST_MANIFEST_MAX_LABEL_VALUE + 1);
		memset(m->labels[i].value, 1, ST_MANIFEST_MAX_LABEL_VALUE); /* each escaped as \u0001 */
		m->labels[i].value[ST_MANIFEST_MAX_LABEL_VALUE] = '\0';
	}
	for (int k = 0; k < 2; k++) {
		char *obj = malloc(ST_MANIFEST_MAX_OBJECT + 1);
		size_t n = ST_MANIFEST_MAX_OBJECT;
		memset(obj, 'x', n);
		memcpy(obj, "{\"x\":\"", 6);
		memcpy(obj + n - 2, "\"}", 2);
		obj[n] = '\0';
		*(k ? &m->vcpu : &m->guest) = obj;
	}
	cr_assert_eq(st_manifest_encode(m, &text, &len, why, sizeof(why)), 0, "%s", why);
	cr_assert_gt(len, 13u << 20, "the widest manifest is %zu bytes", len);
	cr_log_info("the widest manifest is %zu bytes", len);
	cr_assert_leq(len, ST_MANIFEST_MAX_BYTES, "%zu bytes pass the cap", len);
	cr_assert_eq(st_manifest_parse(text, len, &back, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(back->nranges, ST_MANIFEST_MAX_RANGES);
	st_manifest_free(back);
	free(text);
	st_manifest_free(m);
}

/* Regression: a 64 MiB manifest was parsed whole (1.3-1.4 GiB, 8-16 s)
 * before any limit applied. Larger than any strata writes: refused by its
 * size; within the size but denser in structure than any manifest: refused
 * before a tree is built. */
Test(manifest, oversized_or_overdense_manifests_are_refused_before_parsing)
{
	struct st_manifest *m = NULL;
	char why[ST_WHY_LEN] = "";
	size_t n = 60u << 20, dense = 4u << 20;
	char *text = malloc(n);

	cr_assert_not_null(text);
	memset(text, ' ', n);
	text[0] = '{';
	text[n - 1] = '}';
	cr_assert_eq(st_manifest_parse(text, n, &m, why, sizeof(why)), ST_EFORMAT);
	cr_assert(strstr(why, "more than the limit"), "%s", why);
	/* {"x":[{},{},...]} in 4 MiB: about 380 MiB as a tree */
	memcpy(text, "{\"x\":[", 6);
	for (size_t i = 6; i + 3 < dense; i += 3)
		memcpy(text + i, "{},", 3);
	memcpy(text + dense - 5, "{}]}", 4);
	memset(text + dense - 1, ' ', 1);
	cr_assert_eq(st_manifest_parse(text, dense, &m, why, sizeof(why)), ST_EFORMAT);
	cr_assert(strstr(why, "too dense"), "%s", why);
	cr_assert_null(m);
	free(text);
}

/*
 * The parse bound of docs/formats.md and docs/security.md: a parse takes at
 * most 52 bytes of memory per byte of manifest + 64 KiB. Every allocation
 * jansson makes goes through counting hooks (usable size plus the 8-byte
 * chunk header glibc keeps); with the text itself that is the parse's
 * memory. For each shape, the densest text the parser accepts (padded with
 * the fewest spaces per element that pass its structure check) is parsed;
 * the peak must stay under the bound. Raising ST_MANIFEST_TREE_PER_BYTE or
 * weakening the structure check lets denser texts through and fails here.
 */
static size_t j_live, j_peak;

static void *j_malloc(size_t n)
{
	void *p = malloc(n);

	if (p) {
		j_live += malloc_usable_size(p) + sizeof(size_t);
		if (j_live > j_peak)
			j_peak = j_live;
	}
	return p;
}

static void j_free(void *p)
{
	if (p)
		j_live -= malloc_usable_size(p) + sizeof(size_t);
	free(p);
}

/* {"x":[E, E, ...]} (or {"x":{"kN":0, ...}} for members) of about len
 * bytes, each element followed by ',' and pad spaces. */
static size_t dense_text(char *buf, size_t len, const char *elem, unsigned pad)
{
	bool members = strcmp(elem, "member") == 0;
	size_t at = (size_t)sprintf(buf, "{\"x\":%c", members ? '{' : '[');
	unsigned k = 0;

	for (;;) {
		char e[32];
		int el = members ? snprintf(e, sizeof(e), "\"k%u\":0", k++) : snprintf(e, sizeof(e), "%s", elem);
		if (at + (size_t)el + 1 + pad + 3 > len)
			break;
		if (at > 6)
			buf[at++] = ',';
		memset(buf + at, ' ', pad);
		at += pad;
		memcpy(buf + at, e, (size_t)el);
		at += (size_t)el;
	}
	at += (size_t)sprintf(buf + at, "%c}", members ? '}' : ']');
	return at;
}

Test(manifest, a_parse_takes_at_most_52_bytes_per_byte_plus_64_KiB)
{
	static const char *const shapes[] = { "0", "[]", "{}", "\"\"", "[1,3,0,0]", "member" };
	static const size_t sizes[] = { 128u << 10, 1u << 20 };
	char why[ST_WHY_LEN];

	json_set_alloc_funcs(j_malloc, j_free);
	for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
		char *text = malloc(sizes[z] + 64);
		cr_assert_not_null(text);
		for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
			unsigned pad = 0;
			size_t len;
			int rc;
			struct st_manifest *m = NULL;
			for (;; pad++) {
				len = dense_text(text, sizes[z], shapes[s], pad);
				j_live = j_peak = 0;
				rc = st_manifest_parse(text, len, &m, why, sizeof(why));
				if (rc != ST_EFORMAT || !strstr(why, "too dense"))
					break;
				cr_assert_lt(pad, 64, "%s: refused even with %u spaces per element", shapes[s], pad);
			}
			/* Not a manifest (no required keys): refused after the tree was built. */
			cr_assert_eq(rc, ST_EFORMAT, "%s: %s", shapes[s], why);
			cr_assert_null(m);
			cr_assert_eq(j_live, 0, "%s: jansson kept %zu bytes", shapes[s], j_live);
			size_t peak = j_peak + len, bound = 52 * len + (64u << 10);
			cr_log_info("%s, %zu bytes (%u spaces per element): peak %zu bytes, %.1f per byte", shapes[s], len, pad,
				    peak, (double)peak / (double)len);
			cr_assert_leq(peak, bound, "%s, %zu bytes (%u spaces per element): the parse took %zu bytes, more than 52 per byte + 64 KiB (%zu)",
				      shapes[s], len, pad, peak, bound);
		}
		free(text);
	}
	json_set_alloc_funcs(malloc, free);
}

/* The canonical manifest as version 2 with `created` the text given; NULL
 * if the text is refused (*rc says how), else the manifest. */
static struct st_manifest *parse_created(const char *created, int *rc)
{
	char *v1 = edit("\"created\":1700000000000000000", "\"created\":\"@\""), *text;
	char *at = strchr(v1, '@'), *ver = strstr(v1, "\"version\":1}");
	char why[ST_WHY_LEN] = "";
	struct st_manifest *m = NULL;

	cr_assert_not_null(at);
	cr_assert_not_null(ver);
	ver[10] = '2';
	cr_assert_gt(asprintf(&text, "%.*s%s%s", (int)(at - v1), v1, created, at + 1), 0);
	*rc = st_manifest_parse(text, strlen(text), &m, why, sizeof(why));
	free(text);
	free(v1);
	return m;
}

/* Regression (fuzz_manifest through a delta's `created`): the four year
 * digits allow 9999, but nanoseconds since 1970 fit in 64 bits only until
 * 2262; the conversion overflowed (UBSan: signed multiplication). A later
 * time is refused, the last that fits is read. */
Test(manifest, a_created_time_past_what_64_bit_nanoseconds_hold_is_refused)
{
	static const struct {
		const char *created;
		int rc;
	} t[] = {
		{ "9999-12-31T23:59:59.999999999Z", ST_EFORMAT },
		{ "2263-01-01T00:00:00.000000000Z", ST_EFORMAT },
		{ "2262-04-11T23:47:16.854775808Z", ST_EFORMAT },
		{ "2262-04-11T23:47:16.854775807Z", 0 },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		int rc;
		struct st_manifest *m = parse_created(t[i].created, &rc);

		cr_expect_eq(rc, t[i].rc, "%s: got %d (%s)", t[i].created, rc, st_strerror(rc));
		if (rc == 0)
			cr_expect_eq(m->created, INT64_MAX);
		st_manifest_free(m);
	}
}

/* `created` is read and written by the store's own calendar arithmetic
 * (glibc's timegm and gmtime_r load the time zone at their first call in a
 * process): it agrees with gmtime_r every fifth day from 1970 to 2262 (at a
 * second of the day and a nanosecond that move along, and at each day's last
 * second), on a leap day and at the last instant, and refuses the dates no
 * calendar has. */
Test(manifest, created_times_agree_with_gmtime_from_1970_to_2262)
{
	const int64_t last = INT64_MAX / 1000000000ll;
	int rc;

	for (int64_t secs = 0; secs <= last; secs += 5 * 86400 + 3607) {
		for (int k = 0; k < 2; k++) {
			int64_t s = k ? secs : secs - secs % 86400 + 86399;
			if (s > last)
				continue;
			time_t t = (time_t)s;
			struct tm tm;
			char text[64];
			long long frac = s == last ? INT64_MAX % 1000000000ll : (s * 7919) % 1000000000ll;
			cr_assert_not_null(gmtime_r(&t, &tm));
			size_t n = strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%S", &tm);
			snprintf(text + n, sizeof(text) - n, ".%09lldZ", frac);
			struct st_manifest *m = parse_created(text, &rc);
			cr_assert_eq(rc, 0, "%s: %d (%s)", text, rc, st_strerror(rc));
			cr_assert_eq(m->created, s * 1000000000ll + frac, "%s", text);
			char *out;
			size_t len;
			char why[ST_WHY_LEN] = "";
			cr_assert_eq(st_manifest_encode(m, &out, &len, why, sizeof(why)), 0, "%s", why);
			cr_assert_not_null(strstr(out, text), "%s written as %s", text, out);
			free(out);
			st_manifest_free(m);
		}
	}
	static const char *const refused[] = {
		"2026-02-29T00:00:00.000000000Z", "2100-02-29T00:00:00.000000000Z", "2026-04-31T00:00:00.000000000Z",
		"2026-13-01T00:00:00.000000000Z", "2026-00-10T00:00:00.000000000Z", "2026-01-00T00:00:00.000000000Z",
		"2026-01-32T00:00:00.000000000Z", "2026-01-01T24:00:00.000000000Z", "2026-01-01T23:60:00.000000000Z",
		"2026-01-01T23:59:60.000000000Z", "1969-12-31T23:59:59.999999999Z", "2026-1-01T00:00:00.0000000000Z",
	};
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		struct st_manifest *m = parse_created(refused[i], &rc);
		cr_expect_eq(rc, ST_EFORMAT, "%s: got %d", refused[i], rc);
		st_manifest_free(m);
	}
	struct st_manifest *m = parse_created("2000-02-29T12:00:00.000000001Z", &rc);
	cr_assert_eq(rc, 0);
	cr_expect_eq(m->created, 951825600000000001ll);
	st_manifest_free(m);
}

/* Reading and writing a manifest loads no time zone: tzname keeps glibc's
 * initial "GMT" under a TZ that would name another zone once loaded. */
Test(manifest, reading_and_writing_created_loads_no_time_zone)
{
	int rc;

	if (strcmp(tzname[0], "GMT") != 0)
		cr_skip_test("the test process loaded a time zone already (tzname %s)", tzname[0]);
	setenv("TZ", "STR5", 1);
	struct st_manifest *m = parse_created("2026-12-03T14:30:00.000000000Z", &rc);
	cr_assert_eq(rc, 0);
	char *out, why[ST_WHY_LEN] = "";
	size_t len;
	cr_assert_eq(st_manifest_encode(m, &out, &len, why, sizeof(why)), 0, "%s", why);
	free(out);
	st_manifest_free(m);
	cr_expect_str_eq(tzname[0], "GMT", "a time zone was loaded (tzname %s)", tzname[0]);
	tzset();
	cr_expect_str_eq(tzname[0], "STR", "test bug: TZ=STR5 names the zone STR");
}
