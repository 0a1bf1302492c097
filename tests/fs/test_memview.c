/* test_memview.c: the flat memory file: byte placement, SEEK_DATA/SEEK_HOLE over ranges. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "fs/fs_int.h"

#define P ST_PAGE_SIZE

/* 16 pages: [2,4) in layer 0 at page 0, [4,6) in layer 1 at page 3, [10,12) layer 0 at page 2. */
static struct st_range ranges[] = {
	{ .gpage = 2, .npages = 2, .layer = 0, .lpage = 0 },
	{ .gpage = 4, .npages = 2, .layer = 1, .lpage = 3 },
	{ .gpage = 10, .npages = 2, .layer = 0, .lpage = 2 },
};
static struct st_manifest m = { .mem_size = 16 * P, .nranges = 3, .ranges = ranges };

Test(fs, extent_in_a_hole_reaches_the_next_range)
{
	uint64_t len, loff;
	uint32_t layer;

	cr_assert_eq(fs_mem_extent(&m, 100, &len, &layer, &loff), 0);
	cr_assert_eq(layer, UINT32_MAX);
	cr_assert_eq(len, 2 * P - 100);
}

Test(fs, extent_in_a_range_maps_to_the_layer_offset)
{
	uint64_t len, loff;
	uint32_t layer;

	cr_assert_eq(fs_mem_extent(&m, 5 * P + 7, &len, &layer, &loff), 0);
	cr_assert_eq(layer, 1);
	cr_assert_eq(loff, 4 * P + 7);
	cr_assert_eq(len, P - 7);
}

Test(fs, extent_past_the_end_is_enxio)
{
	uint64_t len, loff;
	uint32_t layer;

	cr_assert_eq(fs_mem_extent(&m, 16 * P, &len, &layer, &loff), -ENXIO);
	cr_assert_eq(fs_mem_extent(&m, 12 * P, &len, &layer, &loff), 0);
	cr_assert_eq(layer, UINT32_MAX);
	cr_assert_eq(len, 4 * P);
}

Test(fs, seek_data_and_hole_follow_the_ranges)
{
	uint64_t out;

	cr_assert_eq(fs_mem_seek(&m, 0, true, &out), 0);
	cr_assert_eq(out, 2 * P);
	cr_assert_eq(fs_mem_seek(&m, 2 * P, false, &out), 0);
	cr_assert_eq(out, 6 * P, "adjacent ranges are one data extent");
	cr_assert_eq(fs_mem_seek(&m, 7 * P, true, &out), 0);
	cr_assert_eq(out, 10 * P);
	cr_assert_eq(fs_mem_seek(&m, 11 * P, false, &out), 0);
	cr_assert_eq(out, 12 * P);
	cr_assert_eq(fs_mem_seek(&m, 12 * P, true, &out), -ENXIO);
	cr_assert_eq(fs_mem_seek(&m, 13 * P, false, &out), 0);
	cr_assert_eq(out, 13 * P);
	cr_assert_eq(fs_mem_seek(&m, 16 * P, false, &out), -ENXIO);
}

Test(fs, data_pages_count_every_range)
{
	cr_assert_eq(fs_mem_data_pages(&m), 6);
}
