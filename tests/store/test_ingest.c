/* test_ingest.c: building layers from raw memory images: only changed non-zero pages are stored. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "store/store.h"
#include "tests/store/helpers.h"

TestSuite(ingest, .init = th_setup_store, .fini = th_teardown);

#define NPAGES 256
#define PG ST_PAGE_SIZE

/* Rebuild the memory a manifest describes from the store's blobs. */
static uint8_t *materialize(const struct st_manifest *m)
{
	uint8_t *mem = calloc(1, m->mem_size ? m->mem_size : 1);

	for (uint64_t g = 0; g < m->mem_size / PG; g++) {
		uint32_t layer;
		uint64_t lpage;
		int fd;

		if (st_manifest_lookup(m, g, &layer, &lpage) < 0)
			continue;
		cr_assert_eq(st_blob_open(th_store, &m->layers[layer].id, &fd), 0);
		cr_assert_eq(pread(fd, mem + g * PG, PG, (off_t)(lpage * PG)), PG);
		close(fd);
	}
	return mem;
}

/* A 256-page image: runs and single pages of data, zero gaps. */
static uint8_t *base_image(void)
{
	uint8_t *img = calloc(NPAGES, PG);

	for (int g = 0; g < NPAGES; g++) {
		bool data = (g >= 0 && g < 40) || (g >= 64 && g < 128) || g % 17 == 0 || g == 255;
		if (data)
			th_fill(img + (size_t)g * PG, PG, (uint64_t)g + 1);
	}
	return img;
}

static uint64_t count_nonzero(const uint8_t *img)
{
	uint64_t n = 0;

	for (int g = 0; g < NPAGES; g++)
		for (int i = 0; i < (int)PG; i++)
			if (img[(size_t)g * PG + i]) {
				n++;
				break;
			}
	return n;
}

Test(ingest, first_image_stores_non_zero_pages_only)
{
	uint8_t *img = base_image(), *back;
	struct st_manifest *m;
	struct st_ingest_stats st;
	uint64_t nz = count_nonzero(img);

	cr_assert_eq(st_ingest_image(th_store, img, NPAGES * PG, NULL, &m, &st), 0);
	cr_assert_eq(st.pages, NPAGES);
	cr_assert_eq(st.pages_stored, nz);
	cr_assert_eq(st.pages_zero, NPAGES - nz);
	cr_assert_eq(st.bytes_added, nz * PG);
	cr_assert(!m->has_parent);
	cr_assert_eq(m->nlayers, 1);
	cr_assert_eq(m->layers[0].pages, nz);
	/* Runs [0,40) and [64,128) merge into one range each: page 17 and 34
	 * sit inside the first run, 68,85,102,119 inside the second. */
	cr_assert_eq(m->ranges[0].gpage, 0);
	cr_assert_eq(m->ranges[0].npages, 40);
	bool found = false;
	for (uint64_t i = 0; i < m->nranges; i++)
		found = found || (m->ranges[i].gpage == 64 && m->ranges[i].npages == 64);
	cr_assert(found, "run [64,128) is one range");
	back = materialize(m);
	cr_assert_eq(memcmp(back, img, NPAGES * PG), 0);
	cr_assert_eq(th_count_blobs(th_store), 1);
	free(back);
	free(img);
	st_manifest_free(m);
}

Test(ingest, change_of_4_pages_stores_a_layer_of_4_pages)
{
	uint8_t *img = base_image(), *back;
	struct st_manifest *p, *c;
	struct st_ingest_stats st;
	st_id pid;
	/* Two adjacent changed pages, one single page, one page in a former hole. */
	const int changed[] = { 70, 71, 100, 200 };

	cr_assert_eq(st_ingest_image(th_store, img, NPAGES * PG, NULL, &p, NULL), 0);
	for (size_t i = 0; i < 4; i++)
		th_fill(img + (size_t)changed[i] * PG, PG, 1000 + i);
	cr_assert_eq(st_ingest_image(th_store, img, NPAGES * PG, p, &c, &st), 0);
	cr_assert_eq(st.pages_stored, 4);
	cr_assert_eq(st.bytes_added, 4 * PG);
	cr_assert(c->has_parent);
	cr_assert_eq(st_manifest_id(p, &pid, NULL, 0), 0);
	cr_assert(st_id_equal(&c->parent, &pid));
	cr_assert_eq(c->nlayers, 2, "parent layer + new layer");
	cr_assert_eq(c->layers[1].pages, 4);
	/* Pages 70-71 are one range in the new layer. */
	uint32_t layer;
	uint64_t lpage, lpage2;
	cr_assert_eq(st_manifest_lookup(c, 70, &layer, &lpage), 0);
	cr_assert_eq(layer, 1);
	cr_assert_eq(st_manifest_lookup(c, 71, &layer, &lpage2), 0);
	cr_assert_eq(lpage2, lpage + 1);
	bool merged = false;
	for (uint64_t i = 0; i < c->nranges; i++)
		merged = merged || (c->ranges[i].gpage == 70 && c->ranges[i].npages == 2 && c->ranges[i].layer == 1);
	cr_assert(merged, "adjacent changed pages form one range");
	back = materialize(c);
	cr_assert_eq(memcmp(back, img, NPAGES * PG), 0);
	cr_assert_eq(th_count_blobs(th_store), 2);
	free(back);
	free(img);
	st_manifest_free(p);
	st_manifest_free(c);
}

Test(ingest, unchanged_image_adds_nothing)
{
	uint8_t *img = base_image();
	struct st_manifest *p, *c;
	struct st_ingest_stats st;

	cr_assert_eq(st_ingest_image(th_store, img, NPAGES * PG, NULL, &p, NULL), 0);
	cr_assert_eq(st_ingest_image(th_store, img, NPAGES * PG, p, &c, &st), 0);
	cr_assert_eq(st.pages_stored, 0);
	cr_assert_eq(st.bytes_added, 0);
	cr_assert_eq(c->nlayers, 1);
	cr_assert_eq(c->nranges, p->nranges);
	for (uint64_t i = 0; i < p->nranges; i++) /* field by field: the struct has padding */
		cr_assert(c->ranges[i].gpage == p->ranges[i].gpage && c->ranges[i].npages == p->ranges[i].npages &&
			  c->ranges[i].layer == p->ranges[i].layer && c->ranges[i].lpage == p->ranges[i].lpage,
			  "range %llu differs", (unsigned long long)i);
	cr_assert_eq(th_count_blobs(th_store), 1);
	free(img);
	st_manifest_free(p);
	st_manifest_free(c);
}

Test(ingest, zeroed_pages_become_holes_and_unused_layers_drop)
{
	uint8_t *img = calloc(NPAGES, PG), *back;
	struct st_manifest *p, *c;
	struct st_ingest_stats st;

	th_fill(img, 8 * PG, 5);
	cr_assert_eq(st_ingest_image(th_store, img, NPAGES * PG, NULL, &p, NULL), 0);
	memset(img, 0, 8 * PG);
	th_fill(img + 100 * PG, PG, 6);
	cr_assert_eq(st_ingest_image(th_store, img, NPAGES * PG, p, &c, &st), 0);
	cr_assert_eq(st.pages_stored, 1);
	cr_assert_eq(c->nlayers, 1, "the parent's layer is no longer used");
	cr_assert_eq(c->nranges, 1);
	back = materialize(c);
	cr_assert_eq(memcmp(back, img, NPAGES * PG), 0);
	free(back);
	free(img);
	st_manifest_free(p);
	st_manifest_free(c);
}

Test(ingest, grows_and_shrinks_memory)
{
	uint8_t *img = base_image(), *back;
	struct st_manifest *p, *c;

	cr_assert_eq(st_ingest_image(th_store, img, 64 * PG, NULL, &p, NULL), 0);
	cr_assert_eq(st_ingest_image(th_store, img, NPAGES * PG, p, &c, NULL), 0);
	back = materialize(c);
	cr_assert_eq(memcmp(back, img, NPAGES * PG), 0);
	free(back);
	st_manifest_free(p);
	p = c;
	cr_assert_eq(st_ingest_image(th_store, img, 16 * PG, p, &c, NULL), 0);
	cr_assert_eq(c->mem_size, 16 * PG);
	back = materialize(c);
	cr_assert_eq(memcmp(back, img, 16 * PG), 0);
	free(back);
	free(img);
	st_manifest_free(p);
	st_manifest_free(c);
}

Test(ingest, rejects_partial_pages)
{
	uint8_t img[PG + 1] = { 1 };
	struct st_manifest *m = NULL;

	cr_assert_eq(st_ingest_image(th_store, img, sizeof(img), NULL, &m, NULL), -EINVAL);
	cr_assert_null(m);
}

Test(ingest, from_file)
{
	uint8_t *img = base_image();
	struct st_manifest *m, *m2;
	st_id a, b;

	cr_assert_eq(th_write_file(th_path("mem.raw"), img, NPAGES * PG), 0);
	cr_assert_eq(st_ingest_file(th_store, th_path("mem.raw"), NULL, &m, NULL), 0);
	cr_assert_eq(st_ingest_image(th_store, img, NPAGES * PG, NULL, &m2, NULL), 0);
	m2->created = m->created;
	cr_assert_eq(st_manifest_id(m, &a, NULL, 0), 0);
	cr_assert_eq(st_manifest_id(m2, &b, NULL, 0), 0);
	cr_assert(st_id_equal(&a, &b));
	free(img);
	st_manifest_free(m);
	st_manifest_free(m2);
}
