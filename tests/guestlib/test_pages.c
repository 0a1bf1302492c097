/* tests/guestlib: which heap pages the allocator touches, measured with mincore() on a fresh region. */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/guestlib/common.h"

#define MIB ((size_t)1 << 20)
#define HEAP (256 * MIB)

static void *region;

static void setup(void)
{
	region = region_new(HEAP);
}

static void teardown(void)
{
	region_free(region, HEAP);
}

static size_t resident(void)
{
	return region_resident(region, HEAP);
}

TestSuite(guestlib_pages, .init = setup, .fini = teardown);

Test(guestlib_pages, init_touches_no_heap_page)
{
	cr_assert_eq(resident(), 0);
	strata_heap_init(region, HEAP);
	cr_log_info("init: %zu pages resident", resident());
	cr_assert_eq(resident(), 0, "init wrote %zu heap pages", resident());
	cr_assert_eq(strata_heap_size(), HEAP);
}

/* Each small block's slab page is the only page it touches. */
static void check_small(size_t size, size_t n)
{
	strata_heap_init(region, HEAP);
	for (size_t i = 0; i < n; i++) {
		unsigned char *p = sg_malloc(size);
		cr_assert_not_null(p);
		memset(p, 0x77, size);
	}
	size_t used = size * n, pages = resident();
	size_t ideal = (used + TEST_PAGE - 1) / TEST_PAGE;
	cr_log_info("%zu x %zu bytes: %zu pages resident, payload needs %zu", n, size, pages, ideal);
	/* Header per page (64 B) and class rounding: within 1/8 plus 2 pages. */
	cr_assert_leq(pages, ideal + ideal / 8 + 2,
	              "%zu x %zu bytes touched %zu pages (payload %zu)", n, size, pages, ideal);
}

Test(guestlib_pages, small_allocations_touch_about_their_payload_in_pages)
{
	static const size_t sizes[] = { 16, 64, 112, 256, 448, 1008, 2016 };

	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		region_free(region, HEAP);
		region = region_new(HEAP);
		check_small(sizes[i], 1000);
	}
}

Test(guestlib_pages, an_unwritten_large_block_touches_constant_pages)
{
	strata_heap_init(region, HEAP);
	void *p = sg_malloc(MIB);
	cr_assert_not_null(p);
	size_t after_malloc = resident();
	void *q = sg_calloc(64, MIB);
	cr_assert_not_null(q);
	size_t after_calloc = resident();
	cr_log_info("1 MiB malloc: %zu pages; + 64 MiB calloc: %zu pages", after_malloc, after_calloc);
	cr_assert_leq(after_malloc, 1, "malloc(1 MiB) touched %zu pages", after_malloc);
	cr_assert_eq(after_calloc, after_malloc, "calloc of untouched pages wrote them");
	sg_free(p);
	sg_free(q);
	cr_assert_leq(resident(), 3, "freeing touched %zu pages", resident());
}

Test(guestlib_pages, a_large_block_touches_only_the_pages_written)
{
	strata_heap_init(region, HEAP);
	unsigned char *p = sg_malloc(4 * MIB);
	for (size_t i = 0; i < 4 * MIB; i += 16 * TEST_PAGE)
		p[i] = 1;
	cr_assert_leq(resident(), 64 + 1, "%zu pages", resident());
}

/* One round of a guest call's allocations: mixed sizes, all written.
 * Returns the most pages in use at once during the round. */
static size_t workload_round(uint64_t *rng)
{
	enum { N = 200 };
	void *ptrs[N];
	size_t peak = 0;

	for (int i = 0; i < N; i++) {
		size_t size = rng_next(rng) % 100 < 90 ? rng_next(rng) % 512 : rng_next(rng) % 65536;
		ptrs[i] = sg_malloc(size);
		cr_assert_not_null(ptrs[i]);
		memset(ptrs[i], i, size);
		if (strata_heap_in_use() > peak)
			peak = strata_heap_in_use();
		if (i % 4 == 3) { /* free some early, like temporaries */
			int j = (int)(rng_next(rng) % (uint64_t)(i + 1));
			sg_free(ptrs[j]);
			ptrs[j] = NULL;
		}
	}
	for (int i = 0; i < N; i++)
		sg_free(ptrs[i]);
	return (peak + TEST_PAGE - 1) / TEST_PAGE;
}

Test(guestlib_pages, repeated_alloc_free_rounds_do_not_grow_the_written_set)
{
	enum { ROUNDS = 400 };
	uint64_t rng = 99;
	size_t peak_in_use = 0, half = 0;

	strata_heap_init(region, HEAP);
	for (int round = 0; round < ROUNDS; round++) {
		size_t peak = workload_round(&rng);
		if (peak > peak_in_use)
			peak_in_use = peak;
		if (round == ROUNDS / 2 - 1)
			half = resident();
	}
	size_t end = resident();
	cr_log_info("%d random alloc/free rounds: largest live set %zu pages; written set %zu pages "
	            "after %d rounds, %zu after %d", ROUNDS, peak_in_use, half, ROUNDS / 2, end, ROUNDS);
	cr_assert_eq(strata_heap_in_use(), 0);
	/* The written set follows the largest live set (plus fragmentation),
	 * not the total ever allocated (~40 MiB here), and levels off. */
	cr_assert_leq(end, peak_in_use * 3 / 2 + 8, "%zu pages written for a %zu-page peak",
	              end, peak_in_use);
	cr_assert_leq(end, half + half / 8, "grew from %zu to %zu pages in the second half", half, end);
}

Test(guestlib_pages, the_same_alloc_free_cycle_reuses_exactly_the_same_pages)
{
	strata_heap_init(region, HEAP);
	size_t base = 0;
	for (int round = 0; round < 1000; round++) {
		void *a = sg_malloc(100), *b = sg_malloc(3000), *c = sg_malloc(200 * 1024);
		memset(a, 1, 100);
		memset(b, 2, 3000);
		memset(c, 3, 200 * 1024);
		sg_free(b);
		sg_free(a);
		sg_free(c);
		if (round == 0)
			base = resident();
		cr_assert_eq(resident(), base, "round %d", round);
	}
	cr_log_info("100 B + 3000 B + 200 KiB cycle: %zu pages resident", base);
}

Test(guestlib_pages, a_buffer_grown_by_realloc_at_the_top_is_never_copied)
{
	strata_heap_init(region, HEAP);
	size_t size = 2 * TEST_PAGE;
	unsigned char *p = sg_malloc(size), *first = p;

	memset(p, 1, size);
	while (size < 8 * MIB) {
		p = sg_realloc(p, 2 * size);
		cr_assert_eq(p, first, "grew in place");
		memset(p + size, 2, size); /* write only the new half */
		size *= 2;
	}
	cr_log_info("8 MiB grown by doubling from 8 KiB: %zu pages written", resident());
	cr_assert_eq(resident(), 8 * MIB / TEST_PAGE + 1, "%zu pages", resident());
}
