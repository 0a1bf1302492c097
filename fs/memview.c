/* memview.c: the flat guest-memory file: where each byte lives, SEEK_DATA/SEEK_HOLE. */
#include <errno.h>

#include "fs/fs_int.h"

/* Index of the first range ending after page gp (ranges are sorted and disjoint). */
static uint64_t first_range_after(const struct st_manifest *m, uint64_t gp)
{
	uint64_t lo = 0, hi = m->nranges;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		const struct st_range *r = &m->ranges[mid];
		if (r->gpage + r->npages <= gp)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int fs_mem_extent(const struct st_manifest *m, uint64_t off, uint64_t *len, uint32_t *layer, uint64_t *loff)
{
	if (off >= m->mem_size)
		return -ENXIO;
	uint64_t gp = off / ST_PAGE_SIZE, in = off % ST_PAGE_SIZE;
	uint64_t i = first_range_after(m, gp);
	if (i < m->nranges && m->ranges[i].gpage <= gp) {
		const struct st_range *r = &m->ranges[i];
		*layer = r->layer;
		*loff = (r->lpage + (gp - r->gpage)) * ST_PAGE_SIZE + in;
		*len = (r->gpage + r->npages) * ST_PAGE_SIZE - off;
		return 0;
	}
	uint64_t end = i < m->nranges ? m->ranges[i].gpage * ST_PAGE_SIZE : m->mem_size;
	*layer = UINT32_MAX;
	*loff = 0;
	*len = end - off;
	return 0;
}

int fs_mem_seek(const struct st_manifest *m, uint64_t off, bool data, uint64_t *out)
{
	uint64_t len, loff;
	uint32_t layer;

	if (off >= m->mem_size)
		return -ENXIO;
	while (off < m->mem_size) {
		int rc = fs_mem_extent(m, off, &len, &layer, &loff);
		if (rc < 0)
			return rc;
		bool is_data = layer != UINT32_MAX;
		if (is_data == data) {
			*out = off;
			return 0;
		}
		off += len;
	}
	if (data)
		return -ENXIO;
	*out = m->mem_size; /* the implicit hole at the end of the file */
	return 0;
}

uint64_t fs_mem_data_pages(const struct st_manifest *m)
{
	uint64_t n = 0;

	for (uint64_t i = 0; i < m->nranges; i++)
		n += m->ranges[i].npages;
	return n;
}
