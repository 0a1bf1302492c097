/* test_workingset.c: working-set records: built through a manifest's ranges, encoded, parsed strictly, checked against the snapshot. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"

TestSuite(workingset);

/* Two layers: A (id ff..) holds guest pages 0-9 and 20-29 at layer pages
 * 0-9 and 10-19; B (id 11..) holds guest pages 40-49 at layer pages 5-14.
 * Pages 10-19 and 30-39 are holes. */
static struct st_manifest *two_layers(st_id *mid)
{
	struct st_manifest *m;

	cr_assert_eq(st_manifest_new(&m), 0);
	m->mem_size = 64 * ST_PAGE_SIZE;
	m->nlayers = 2;
	m->layers = calloc(2, sizeof(*m->layers));
	memset(m->layers[0].id.b, 0xff, 16);
	m->layers[0].pages = 20;
	memset(m->layers[1].id.b, 0x11, 16);
	m->layers[1].pages = 15;
	m->nranges = 3;
	m->ranges = calloc(3, sizeof(*m->ranges));
	m->ranges[0] = (struct st_range){ 0, 10, 0, 0 };
	m->ranges[1] = (struct st_range){ 20, 10, 0, 10 };
	m->ranges[2] = (struct st_range){ 40, 10, 1, 5 };
	char why[ST_WHY_LEN];
	cr_assert_eq(st_manifest_validate(m, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(st_manifest_id(m, mid, why, sizeof(why)), 0);
	return m;
}

Test(workingset, built_from_guest_pages_per_layer_in_id_order_without_holes)
{
	st_id mid;
	struct st_manifest *m = two_layers(&mid);
	/* 8-11 (2 in a hole), 15 (hole), 20-21 (adjacent to 8-9 in layer A),
	 * 41 and 43-44 in B, 60 (hole). */
	struct st_ws_run g[] = { { 8, 4 }, { 15, 1 }, { 20, 2 }, { 41, 1 }, { 43, 2 }, { 60, 1 } };
	struct st_ws *ws;

	cr_assert_eq(st_ws_build(m, &mid, g, 6, &ws), 0);
	cr_assert(st_id_equal(&ws->snapshot, &mid));
	cr_assert_eq(ws->nlayers, 2);
	cr_assert_eq(ws->layers[0].id.b[0], 0x11, "layers ascend by id");
	cr_assert_eq(ws->layers[0].nruns, 2);
	cr_assert_eq(ws->runs[0].lpage, 6);
	cr_assert_eq(ws->runs[0].npages, 1);
	cr_assert_eq(ws->runs[1].lpage, 8);
	cr_assert_eq(ws->runs[1].npages, 2);
	cr_assert_eq(ws->layers[1].nruns, 1, "guest 8-9 and 20-21 are layer pages 8-11 of A: one run");
	cr_assert_eq(ws->runs[2].lpage, 8);
	cr_assert_eq(ws->runs[2].npages, 4);
	cr_assert_eq(ws->pages, 7);
	char why[ST_WHY_LEN];
	cr_assert_eq(st_ws_check(ws, m, &mid, why, sizeof(why)), 0, "%s", why);
	st_ws_free(ws);
	st_manifest_free(m);
}

Test(workingset, encodes_and_parses_back_to_the_same_record)
{
	st_id mid;
	struct st_manifest *m = two_layers(&mid);
	struct st_ws_run g[] = { { 0, 3 }, { 5, 1 }, { 22, 8 }, { 40, 10 } };
	struct st_ws *ws, *back;
	void *buf, *buf2;
	size_t len, len2;
	char why[ST_WHY_LEN];

	cr_assert_eq(st_ws_build(m, &mid, g, 4, &ws), 0);
	cr_assert_eq(st_ws_encode(ws, &buf, &len, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(len, 48 + 2 * 24 + ws->nruns * 8, "header, layers, runs: nothing else");
	cr_assert_eq(st_ws_parse(buf, len, &back, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(back->nlayers, ws->nlayers);
	cr_assert_eq(back->nruns, ws->nruns);
	cr_assert_eq(back->pages, ws->pages);
	cr_assert_eq(memcmp(back->runs, ws->runs, ws->nruns * sizeof(*ws->runs)), 0);
	cr_assert_eq(st_ws_encode(back, &buf2, &len2, why, sizeof(why)), 0);
	cr_assert(len2 == len && memcmp(buf, buf2, len) == 0, "encode -> parse -> encode keeps the bytes");
	free(buf);
	free(buf2);
	st_ws_free(back);
	st_ws_free(ws);
	st_manifest_free(m);
}

/* A valid record's bytes, to break one rule at a time. */
static uint8_t *sample(size_t *len)
{
	st_id mid;
	struct st_manifest *m = two_layers(&mid);
	struct st_ws_run g[] = { { 0, 2 }, { 5, 1 }, { 40, 2 } };
	struct st_ws *ws;
	void *buf;
	char why[ST_WHY_LEN];

	cr_assert_eq(st_ws_build(m, &mid, g, 3, &ws), 0);
	cr_assert_eq(st_ws_encode(ws, &buf, len, why, sizeof(why)), 0);
	st_ws_free(ws);
	st_manifest_free(m);
	return buf;
}

static void refused(const uint8_t *buf, size_t len, int want, const char *msg)
{
	struct st_ws *ws = NULL;
	char why[ST_WHY_LEN] = "";
	int rc = st_ws_parse(buf, len, &ws, why, sizeof(why));

	cr_assert_eq(rc, want, "%s: got %d (%s)", msg, rc, why);
	cr_assert(why[0], "%s: says why", msg);
	cr_assert_null(ws);
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

Test(workingset, every_broken_rule_is_refused_with_a_reason)
{
	size_t len;
	uint8_t *b = sample(&len), c[256];
	/* Layout: header 48, layers at 48 (B) and 72 (A), runs at 96: B 5-6,
	 * A 0-1, A 5. */
	cr_assert_eq(len, 48 + 48 + 24);
	cr_assert(len + 1 <= sizeof(c));

	refused(b, 10, ST_EFORMAT, "short");
	memcpy(c, b, len), c[0] = 'X', refused(c, len, ST_EFORMAT, "bad magic");
	memcpy(c, b, len), put32(c + 8, 2), refused(c, len, ST_EVERSION, "a later version");
	refused(b, len - 1, ST_EFORMAT, "one byte short of its counts");
	memcpy(c, b, len), c[len] = 0, refused(c, len + 1, ST_EFORMAT, "a trailing byte");
	memcpy(c, b, len), put32(c + 12, 0xffffffffu), refused(c, len, ST_EFORMAT, "absurd layer count");
	memcpy(c, b, len), put32(c + 36, 1), refused(c, len, ST_EFORMAT, "absurd run count (high word)");
	memcpy(c, b, len), c[40]++, refused(c, len, ST_EFORMAT, "page total that lies");
	memcpy(c, b, len), c[68] = 1, refused(c, len, ST_EFORMAT, "reserved field set");
	memcpy(c, b, len), memset(c + 72, 0x00, 16), refused(c, len, ST_EFORMAT, "layer ids out of order");
	memcpy(c, b, len), memcpy(c + 72, c + 48, 16), refused(c, len, ST_EFORMAT, "a layer twice");
	memcpy(c, b, len), put32(c + 64, 0), put32(c + 88, 3), refused(c, len, ST_EFORMAT, "a layer without runs");
	memcpy(c, b, len), put32(c + 88, 3), refused(c, len, ST_EFORMAT, "layers claim more runs than there are");
	memcpy(c, b, len), put32(c + 112, 2), refused(c, len, ST_EFORMAT, "a run adjacent to the one before");
	memcpy(c, b, len), put32(c + 112, 1), refused(c, len, ST_EFORMAT, "a run overlapping the one before");
	memcpy(c, b, len), put32(c + 116, 0), c[40]--, refused(c, len, ST_EFORMAT, "an empty run");
	memcpy(c, b, len), put32(c + 112, 0xffffffffu), refused(c, len, ST_EFORMAT, "a run past page 2^32");
	free(b);
}

Test(workingset, a_record_of_another_snapshot_or_outside_its_layers_does_not_belong)
{
	st_id mid, other;
	struct st_manifest *m = two_layers(&mid);
	struct st_ws_run g[] = { { 0, 2 }, { 40, 10 } };
	struct st_ws *ws;
	char why[ST_WHY_LEN];

	cr_assert_eq(st_ws_build(m, &mid, g, 2, &ws), 0);
	memset(other.b, 7, 16);
	cr_assert_eq(st_ws_check(ws, m, &other, why, sizeof(why)), ST_EFORMAT);
	cr_assert(strstr(why, "not this one"), "%s", why);
	m->layers[0].pages = 12; /* layer B (index 1 in m, 11..) keeps 15 */
	m->layers[1].pages = 10;
	cr_assert_eq(st_ws_check(ws, m, &mid, why, sizeof(why)), ST_ELAYOUT, "B's run 5-14 passes its 10 pages");
	cr_assert(strstr(why, "reaches page 15"), "%s", why);
	m->layers[1].pages = 15;
	memset(m->layers[1].id.b, 0x22, 16);
	cr_assert_eq(st_ws_check(ws, m, &mid, why, sizeof(why)), ST_ELAYOUT);
	cr_assert(strstr(why, "lacks"), "%s", why);
	st_ws_free(ws);
	st_manifest_free(m);
}

Test(workingset, nothing_touched_is_an_empty_record_that_round_trips)
{
	st_id mid;
	struct st_manifest *m = two_layers(&mid);
	struct st_ws_run g[] = { { 12, 3 } };
	struct st_ws *ws, *back;
	void *buf;
	size_t len;
	char why[ST_WHY_LEN];

	cr_assert_eq(st_ws_build(m, &mid, g, 1, &ws), 0);
	cr_assert_eq(ws->nlayers, 0);
	cr_assert_eq(ws->pages, 0);
	cr_assert_eq(st_ws_encode(ws, &buf, &len, why, sizeof(why)), 0);
	cr_assert_eq(len, 48);
	cr_assert_eq(st_ws_parse(buf, len, &back, why, sizeof(why)), 0, "%s", why);
	free(buf);
	st_ws_free(back);
	st_ws_free(ws);
	st_manifest_free(m);
}
