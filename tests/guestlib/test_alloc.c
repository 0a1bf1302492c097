/* tests/guestlib: the guest heap's correctness: random workloads, alignment, zeroing, OOM, misuse. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "tests/guestlib/common.h"

#define MIB ((size_t)1 << 20)

struct block {
	unsigned char *p;
	size_t size;
	uint8_t seed;
};

static void block_fill(struct block *b)
{
	for (size_t i = 0; i < b->size; i++)
		b->p[i] = (uint8_t)(b->seed + i * 7 + (i >> 8));
}

static void block_check(const struct block *b, size_t upto)
{
	for (size_t i = 0; i < upto; i++)
		if (b->p[i] != (uint8_t)(b->seed + i * 7 + (i >> 8)))
			cr_assert_fail("block %p size %zu corrupted at %zu", (void *)b->p, b->size, i);
}

static size_t random_size(uint64_t *rng)
{
	uint64_t r = rng_next(rng) % 100;

	if (r < 70)
		return rng_next(rng) % 256;
	if (r < 90)
		return rng_next(rng) % 2100;
	if (r < 98)
		return rng_next(rng) % 40000;
	return rng_next(rng) % (600 * 1024);
}

Test(guestlib, heap_survives_a_random_alloc_free_realloc_workload_with_contents_intact)
{
	const size_t heap_size = 64 * MIB;
	void *region = heap_new(heap_size);
	enum { SLOTS = 400, OPS = 30000 };
	static struct block live[SLOTS];
	uint64_t rng = 42;
	unsigned long ops[4] = { 0 };

	for (int op = 0; op < OPS; op++) {
		struct block *b = &live[rng_next(&rng) % SLOTS];
		uint64_t what = rng_next(&rng) % 4;
		if (!b->p) {
			size_t size = random_size(&rng);
			b->p = what == 0 ? sg_calloc(1, size) : sg_malloc(size);
			cr_assert_not_null(b->p, "op %d: alloc %zu failed", op, size);
			if (what == 0)
				for (size_t i = 0; i < size; i++)
					cr_assert_eq(b->p[i], 0, "calloc(%zu) byte %zu not zero", size, i);
			b->size = size;
			b->seed = (uint8_t)rng_next(&rng);
			block_fill(b);
			ops[what == 0]++;
		} else if (what == 1) {
			size_t size = random_size(&rng);
			unsigned char *q = sg_realloc(b->p, size);
			if (size == 0) {
				cr_assert_null(q);
				b->p = NULL;
			} else {
				cr_assert_not_null(q, "op %d: realloc to %zu failed", op, size);
				b->p = q;
				block_check(b, size < b->size ? size : b->size);
				b->size = size;
				block_fill(b);
			}
			ops[2]++;
		} else {
			block_check(b, b->size);
			sg_free(b->p);
			b->p = NULL;
			ops[3]++;
		}
		if (b->p)
			cr_assert_eq((uintptr_t)b->p % 16, 0, "misaligned %p", (void *)b->p);
		if (b->p && b->size > 2016)
			cr_assert_eq((uintptr_t)b->p % TEST_PAGE, 0, "large block not page-aligned");
	}
	for (int i = 0; i < SLOTS; i++) {
		if (live[i].p) {
			block_check(&live[i], live[i].size);
			sg_free(live[i].p);
		}
	}
	cr_assert_eq(strata_heap_in_use(), 0);
	cr_log_info("workload: %lu malloc, %lu calloc, %lu realloc, %lu free",
	            ops[0], ops[1], ops[2], ops[3]);
	region_free(region, heap_size);
}

Test(guestlib, heap_blocks_never_overlap)
{
	const size_t heap_size = 16 * MIB;
	void *region = heap_new(heap_size);
	enum { N = 3000 };
	static struct { uintptr_t a; size_t n; } blocks[N];
	uint64_t rng = 7;

	for (int i = 0; i < N; i++) {
		blocks[i].n = random_size(&rng) % 9000 + 1;
		blocks[i].a = (uintptr_t)sg_malloc(blocks[i].n);
		cr_assert(blocks[i].a);
		if (i % 3 == 0) { /* punch holes so later blocks reuse memory */
			int j = (int)(rng_next(&rng) % (uint64_t)(i + 1));
			if (blocks[j].a) {
				sg_free((void *)blocks[j].a);
				blocks[j].a = 0;
			}
		}
	}
	/* Sort-free check: every pair of live blocks is disjoint. */
	for (int i = 0; i < N; i++)
		for (int j = i + 1; j < N && blocks[i].a; j++)
			if (blocks[j].a)
				cr_assert(blocks[i].a + blocks[i].n <= blocks[j].a ||
				          blocks[j].a + blocks[j].n <= blocks[i].a, "blocks %d and %d overlap", i, j);
	region_free(region, heap_size);
}

Test(guestlib, allocations_are_16_byte_aligned_and_aligned_alloc_honours_alignment)
{
	void *region = heap_new(32 * MIB);

	for (size_t size = 0; size < 5000; size += 1 + size / 8) {
		void *p = sg_malloc(size);
		cr_assert_not_null(p);
		cr_assert_eq((uintptr_t)p % 16, 0, "malloc(%zu) = %p", size, p);
	}
	for (size_t align = 1; align <= (size_t)1 << 20; align <<= 1)
		for (size_t size = 1; size < 20000; size *= 7) {
			unsigned char *p = sg_aligned_alloc(align, size);
			cr_assert_not_null(p, "aligned_alloc(%zu, %zu)", align, size);
			cr_assert_eq((uintptr_t)p % align, 0);
			memset(p, 0x5a, size);
			if (size % 2)
				sg_free(p);
		}
	/* Small blocks with 32- and 64-byte alignment come from slabs. */
	size_t before = strata_heap_in_use();
	void *a32 = sg_aligned_alloc(32, 40), *a64 = sg_aligned_alloc(64, 100);
	cr_assert_eq((uintptr_t)a32 % 32, 0);
	cr_assert_eq((uintptr_t)a64 % 64, 0);
	cr_assert_eq(strata_heap_in_use() - before, 64 + 128, "slab classes, not pages");
	cr_assert_null(sg_aligned_alloc(3, 16));
	cr_assert_null(sg_aligned_alloc(0, 16));
	cr_assert_null(sg_aligned_alloc(48, 16));
	region_free(region, 32 * MIB);
}

Test(guestlib, calloc_zeroes_reused_memory)
{
	void *region = heap_new(8 * MIB);
	const size_t sizes[] = { 1, 24, 100, 2016, 2017, 4096, 10000, 300000 };

	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		unsigned char *p = sg_malloc(sizes[i]);
		cr_assert_not_null(p);
		memset(p, 0xa5, sizes[i]);
		sg_free(p);
		unsigned char *q = sg_calloc(sizes[i], 1);
		cr_assert_not_null(q);
		for (size_t j = 0; j < sizes[i]; j++)
			cr_assert_eq(q[j], 0, "calloc(%zu) byte %zu after reuse", sizes[i], j);
		memset(q, 0x3c, sizes[i]);
		sg_free(q);
	}
	region_free(region, 8 * MIB);

	/* A free run extended into untouched pages: the old part is cleared. */
	region = heap_new(8 * MIB);
	unsigned char *a = sg_malloc(3 * TEST_PAGE);
	memset(a, 0xee, 3 * TEST_PAGE);
	sg_free(a);
	unsigned char *b = sg_calloc(10, TEST_PAGE);
	cr_assert_eq(b, a, "the last free run grows into the untouched top");
	for (size_t j = 0; j < 10 * TEST_PAGE; j++)
		cr_assert_eq(b[j], 0, "byte %zu", j);
	region_free(region, 8 * MIB);
}

Test(guestlib, calloc_refuses_overflowing_products)
{
	void *region = heap_new(4 * MIB);

	cr_assert_null(sg_calloc(SIZE_MAX / 2 + 1, 2));
	cr_assert_null(sg_calloc((size_t)1 << 32, (size_t)1 << 32));
	cr_assert_null(sg_calloc(SIZE_MAX, SIZE_MAX));
	cr_assert_null(sg_calloc(3, SIZE_MAX / 3 + 1));
	cr_assert_not_null(sg_calloc(0, SIZE_MAX));
	cr_assert_eq(strata_heap_in_use(), 16);
	region_free(region, 4 * MIB);
}

Test(guestlib, out_of_memory_returns_null_and_leaves_the_heap_usable)
{
	const size_t heap_size = 1 * MIB;
	void *region = heap_new(heap_size);
	static void *ptrs[100000];
	size_t n = 0;

	cr_assert_eq(strata_heap_size(), heap_size);
	cr_assert_null(sg_malloc(heap_size + 1));
	cr_assert_null(sg_malloc(SIZE_MAX));
	cr_assert_null(sg_malloc(SIZE_MAX - 4095));
	cr_assert_null(sg_aligned_alloc((size_t)1 << 40, 1));
	/* Fill with a mix of sizes until every size class and pages run out. */
	for (size_t size = 64 * 1024; size >= 16; size /= 2)
		while ((ptrs[n] = sg_malloc(size)) != NULL) {
			memset(ptrs[n], (int)n, size);
			n++;
			cr_assert_lt(n, 100000);
		}
	cr_assert_null(sg_malloc(1));
	cr_assert_null(sg_calloc(1, 5000));
	cr_assert_null(sg_realloc(ptrs[0], heap_size));
	unsigned char *first = ptrs[0];
	for (size_t i = 0; i < 64 * 1024; i++)
		cr_assert_eq(first[i], 0, "failed realloc left the block intact");
	cr_assert_gt(strata_heap_in_use(), heap_size * 9 / 10, "in use %zu", strata_heap_in_use());
	for (size_t i = 0; i < n; i++)
		sg_free(ptrs[i]);
	cr_assert_eq(strata_heap_in_use(), 0);
	/* After freeing everything, nearly the whole heap is one block again. */
	void *big = sg_malloc(heap_size - 4 * TEST_PAGE);
	cr_assert_not_null(big);
	sg_free(big);
	region_free(region, heap_size);
}

Test(guestlib, allocation_before_init_or_in_a_tiny_region_returns_null)
{
	static unsigned char tiny[6000];

	cr_assert_null(sg_malloc(1));
	cr_assert_eq(strata_heap_size(), 0);
	strata_heap_init(tiny + 1, 4000);
	cr_assert_eq(strata_heap_size(), 0);
	cr_assert_null(sg_malloc(1));
	sg_free(NULL);
}

Test(guestlib, realloc_keeps_contents_and_grows_large_blocks_in_place)
{
	void *region = heap_new(16 * MIB);
	unsigned char *p = sg_malloc(10);

	memcpy(p, "0123456789", 10);
	p = sg_realloc(p, 5000);
	cr_assert(memcmp(p, "0123456789", 10) == 0);
	memset(p + 10, 'x', 4990);
	unsigned char *q = sg_realloc(p, 100 * 1024);
	cr_assert_eq(q, p, "the block at the top grows in place");
	cr_assert(memcmp(q, "0123456789", 10) == 0);
	q = sg_realloc(q, 2 * TEST_PAGE);
	cr_assert_eq(q, p, "shrinking stays in place");
	void *after = sg_malloc(TEST_PAGE * 3);
	cr_assert_eq((uintptr_t)after, (uintptr_t)q + 2 * TEST_PAGE, "the trimmed tail is reused");
	sg_free(after);
	cr_assert_eq(sg_realloc(q, 5 * TEST_PAGE), p, "grows into the free run after it");
	cr_assert(memcmp(q, "0123456789", 10) == 0);
	cr_assert_null(sg_realloc(q, 0), "realloc to 0 frees");
	void *small = sg_malloc(100);
	cr_assert_eq(sg_realloc(small, 110), small, "same size class stays in place");
	region_free(region, 16 * MIB);
}

Test(guestlib, malloc_zero_returns_distinct_pointers)
{
	void *region = heap_new(MIB);
	void *a = sg_malloc(0), *b = sg_malloc(0);

	cr_assert_not_null(a);
	cr_assert_neq(a, b);
	sg_free(a);
	sg_free(b);
	region_free(region, MIB);
}

Test(guestlib, in_use_counts_size_classes_and_pages)
{
	void *region = heap_new(4 * MIB);
	void *a = sg_malloc(1), *b = sg_malloc(130), *c = sg_malloc(5000);

	cr_assert_eq(strata_heap_in_use(), 16 + 160 + 2 * TEST_PAGE);
	sg_free(b);
	cr_assert_eq(strata_heap_in_use(), 16 + 2 * TEST_PAGE);
	sg_free(a);
	sg_free(c);
	cr_assert_eq(strata_heap_in_use(), 0);
	region_free(region, 4 * MIB);
}

Test(guestlib, double_free_of_a_small_block_aborts, .signal = SIGABRT)
{
	heap_new(MIB);
	void *p = sg_malloc(40);
	sg_malloc(40);
	sg_free(p);
	sg_free(p);
}

Test(guestlib, double_free_of_a_large_block_aborts, .signal = SIGABRT)
{
	heap_new(MIB);
	void *p = sg_malloc(10000);
	sg_free(p);
	sg_free(p);
}

Test(guestlib, free_of_a_pointer_the_heap_did_not_return_aborts, .signal = SIGABRT)
{
	static char outside[64];

	heap_new(MIB);
	sg_malloc(100);
	sg_free(outside);
}

Test(guestlib, free_of_an_interior_pointer_aborts, .signal = SIGABRT)
{
	heap_new(MIB);
	char *p = sg_malloc(100);
	sg_free(p + 16);
}

Test(guestlib, freeing_data_that_looks_like_a_free_marker_is_not_a_double_free)
{
	heap_new(MIB);
	uintptr_t *p = sg_malloc(32);
	/* Forge the marker a freed block carries; free() must look closer. */
	p[1] = (uintptr_t)0x6672656564626c6bULL ^ (uintptr_t)p;
	sg_free(p);
	cr_assert_eq(strata_heap_in_use(), 0);
}

Test(guestlib, freed_neighbours_coalesce_into_one_reusable_run)
{
	void *region = heap_new(16 * MIB);
	const int orders[6][3] = { { 0, 1, 2 }, { 0, 2, 1 }, { 1, 0, 2 },
	                           { 1, 2, 0 }, { 2, 0, 1 }, { 2, 1, 0 } };

	for (int o = 0; o < 6; o++) {
		unsigned char *blk[3];
		for (int i = 0; i < 3; i++)
			blk[i] = sg_malloc(3 * TEST_PAGE);
		void *guard = sg_malloc(TEST_PAGE);
		cr_assert_eq(blk[1], blk[0] + 3 * TEST_PAGE);
		cr_assert_eq(blk[2], blk[1] + 3 * TEST_PAGE);
		for (int i = 0; i < 3; i++)
			sg_free(blk[orders[o][i]]);
		/* The three runs are one again: a 9-page block fits exactly there. */
		void *whole = sg_malloc(9 * TEST_PAGE);
		cr_assert_eq(whole, blk[0], "order %d", o);
		sg_free(whole);
		sg_free(guard);
	}
	region_free(region, 16 * MIB);
}

Test(guestlib, freeing_with_every_descriptor_in_use_still_records_the_free_pages)
{
	enum { N = 2000 };
	static unsigned char *blk[N];
	void *region = heap_new(64 * MIB);
	int cap = 0;

	/* Learn how many descriptors a descriptor page holds: the block after
	 * the last one that fits skips a page, taken for the next descriptor page. */
	for (int i = 0; i < N && !cap; i++) {
		blk[i] = sg_malloc(2 * TEST_PAGE);
		if (i > 0 && blk[i] != blk[i - 1] + 2 * TEST_PAGE)
			cap = i;
	}
	cr_assert_gt(cap, 10);
	region_free(region, 64 * MIB);

	/* Exactly cap live blocks: every descriptor slot is in use. */
	region = heap_new(64 * MIB);
	for (int i = 0; i < cap; i++) {
		blk[i] = sg_malloc(2 * TEST_PAGE);
		cr_assert_not_null(blk[i]);
		memset(blk[i], i, 2 * TEST_PAGE);
	}
	/* Freeing a block between two live ones needs a new descriptor: the
	 * block's first page becomes a descriptor page, its second is free. */
	sg_free(blk[5]);
	unsigned char *one = sg_malloc(TEST_PAGE);
	cr_assert_eq(one, blk[5] + TEST_PAGE, "the freed page after the new descriptor page is reused");
	sg_free(one);
	for (int i = 1; i < cap; i += 2)
		if (i != 5)
			sg_free(blk[i]);
	for (int i = 0; i < cap; i += 2)
		for (size_t j = 0; j < 2 * TEST_PAGE; j += 512)
			cr_assert_eq(blk[i][j], (unsigned char)i, "block %d intact", i);
	for (int i = 0; i < cap; i += 2)
		sg_free(blk[i]);
	cr_assert_eq(strata_heap_in_use(), 0);
	/* All but the descriptor pages is free and reusable. */
	void *big = sg_malloc((size_t)cap * 2 * TEST_PAGE - 8 * TEST_PAGE);
	cr_assert_not_null(big);
	region_free(region, 64 * MIB);
}

Test(guestlib, a_fragmented_heap_still_serves_every_size)
{
	enum { N = 4000 };
	void *region = heap_new(64 * MIB);
	static void *blk[N];

	for (int i = 0; i < N; i++)
		cr_assert_not_null(blk[i] = sg_malloc((size_t)(i % 5 + 1) * TEST_PAGE));
	for (int i = 0; i < N; i += 2)
		sg_free(blk[i]);
	/* 2000 holes of 1..5 pages: each request is served from a hole. */
	size_t top_before = 0;
	for (int i = 0; i < N; i += 2) {
		blk[i] = sg_malloc((size_t)(i % 5 + 1) * TEST_PAGE);
		cr_assert_not_null(blk[i]);
		if ((uintptr_t)blk[i] > top_before)
			top_before = (uintptr_t)blk[i];
	}
	cr_assert_lt(top_before - (uintptr_t)region, (size_t)N * 3 * TEST_PAGE + 64 * TEST_PAGE,
	             "holes were reused instead of growing into fresh pages");
	for (int i = 0; i < N; i++)
		sg_free(blk[i]);
	cr_assert_eq(strata_heap_in_use(), 0);
	region_free(region, 64 * MIB);
}
