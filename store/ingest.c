/* ingest.c: build a layer and manifest from a raw memory image, storing only changed non-zero pages. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "store/array.h"
#include "store/store_int.h"

/* The parent's layers, mapped read-only so its pages can be compared. */
struct parent_view {
	const struct st_manifest *m;
	const uint8_t **maps; /* one per parent layer */
	uint64_t cursor;      /* index of the parent range at or after the current page */
};

static void parent_unmap(struct parent_view *pv)
{
	if (!pv->maps)
		return;
	for (uint32_t i = 0; i < pv->m->nlayers; i++)
		if (pv->maps[i])
			st_sys_munmap((void *)pv->maps[i], pv->m->layers[i].pages * ST_PAGE_SIZE);
	free(pv->maps);
	pv->maps = NULL;
}

static int parent_map(struct st_store *s, const struct st_manifest *m, struct parent_view *pv)
{
	int rc = 0;

	pv->m = m;
	pv->cursor = 0;
	if (!m->nlayers)
		return 0;
	pv->maps = st_sys_calloc(m->nlayers, sizeof(*pv->maps));
	if (!pv->maps)
		return -ENOMEM;
	for (uint32_t i = 0; i < m->nlayers; i++) {
		size_t len = m->layers[i].pages * ST_PAGE_SIZE;
		struct stat st;
		int fd, err = 0;

		if ((rc = st_blob_open(s, &m->layers[i].id, &fd)) < 0)
			goto out_unmap;
		rc = st_sys_fstat(fd, &st);
		if (rc == 0 && (uint64_t)st.st_size != len)
			rc = ST_ECORRUPT;
		if (rc == 0) {
			pv->maps[i] = st_sys_mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0, &err);
			rc = pv->maps[i] ? 0 : err;
		}
		st_sys_close(fd);
		if (rc < 0)
			goto out_unmap;
	}
	return 0;
out_unmap:
	parent_unmap(pv);
	return rc;
}

/* The parent's bytes for guest page g (pages are visited in increasing
 * order), or NULL where the parent has a hole. */
static const uint8_t *parent_page(struct parent_view *pv, uint64_t g, uint32_t *layer, uint64_t *lpage)
{
	const struct st_manifest *m = pv->m;

	if (!m)
		return NULL;
	while (pv->cursor < m->nranges && m->ranges[pv->cursor].gpage + m->ranges[pv->cursor].npages <= g)
		pv->cursor++;
	if (pv->cursor == m->nranges || m->ranges[pv->cursor].gpage > g)
		return NULL;
	const struct st_range *r = &m->ranges[pv->cursor];
	*layer = r->layer;
	*lpage = r->lpage + (g - r->gpage);
	return pv->maps[r->layer] + *lpage * ST_PAGE_SIZE;
}

struct range_list {
	struct st_range *v;
	uint64_t n, cap;
};

/* Map guest page g to (layer, lpage), merging with the previous range when
 * it continues it. */
static int range_add(struct range_list *rl, uint64_t g, uint32_t layer, uint64_t lpage)
{
	if (rl->n) {
		struct st_range *last = &rl->v[rl->n - 1];
		if (last->layer == layer && last->gpage + last->npages == g && last->lpage + last->npages == lpage) {
			last->npages++;
			return 0;
		}
	}
	if (ST_ARRAY_RESERVE(rl->v, rl->cap, rl->n + 1) < 0)
		return -ENOMEM;
	rl->v[rl->n++] = (struct st_range){ .gpage = g, .npages = 1, .layer = layer, .lpage = lpage };
	return 0;
}

/* Changed pages accumulate as one contiguous run of the image, written
 * with one call when the run breaks (fewer syscalls than page by page). */
struct pending {
	const uint8_t *start;
	size_t len;
};

static int pending_flush(struct st_blob_writer *w, struct pending *p)
{
	int rc = 0;

	if (p->len)
		rc = st_blob_writer_write(w, p->start, p->len);
	p->len = 0;
	return rc;
}

int st_ingest_image(struct st_store *s, const void *image, uint64_t size, const struct st_manifest *parent,
		    struct st_manifest **out, struct st_ingest_stats *stats_out)
{
	const uint8_t *img = image;
	struct st_ingest_stats stats = { 0 };
	struct parent_view pv = { 0 };
	struct range_list rl = { 0 };
	struct st_blob_writer *w = NULL;
	struct pending pend = { 0 };
	struct st_manifest *m = NULL;
	uint32_t new_layer, *remap = NULL;
	st_id parent_id, layer_id;
	bool dedup = false;
	int rc;

	if (size % ST_PAGE_SIZE || size > ST_MANIFEST_MAX_MEM)
		return -EINVAL;
	if (parent) {
		if ((rc = st_manifest_id(parent, &parent_id, NULL, 0)) < 0)
			return rc;
		if ((rc = parent_map(s, parent, &pv)) < 0)
			return rc;
	}
	/* Ranges first name parent layers by their parent index and the new
	 * layer as index nlayers; renumbered once we know which are used. */
	new_layer = parent ? parent->nlayers : 0;
	stats.pages = size / ST_PAGE_SIZE;
	for (uint64_t g = 0; g < stats.pages; g++) {
		const uint8_t *page = img + g * ST_PAGE_SIZE, *old;
		uint32_t layer = 0;
		uint64_t lpage = 0;

		old = parent_page(&pv, g, &layer, &lpage);
		/* A layer may not have more pages than its snapshot has memory
		 * (st_manifest_validate): an image smaller than its parent stores
		 * its own copy of a page from a parent layer larger than it. */
		if (old && parent->layers[layer].pages > size / ST_PAGE_SIZE)
			old = NULL;
		if (st_is_zero(page, ST_PAGE_SIZE)) {
			stats.pages_zero++;
			continue;
		}
		if (old && memcmp(old, page, ST_PAGE_SIZE) == 0) {
			stats.pages_same++;
			rc = range_add(&rl, g, layer, lpage);
		} else {
			if (!w && (rc = st_blob_writer_new(s, &w)) < 0)
				goto out_free;
			if (pend.len && pend.start + pend.len != page && (rc = pending_flush(w, &pend)) < 0)
				goto out_free;
			if (!pend.len)
				pend.start = page;
			pend.len += ST_PAGE_SIZE;
			rc = range_add(&rl, g, new_layer, stats.pages_stored++);
		}
		if (rc < 0)
			goto out_free;
	}
	if (w) {
		if ((rc = pending_flush(w, &pend)) < 0)
			goto out_free;
		rc = st_blob_writer_commit(w, NULL, &layer_id, &dedup);
		w = NULL;
		if (rc < 0)
			goto out_free;
		stats.layer_dedup = dedup;
		stats.bytes_added = dedup ? 0 : stats.pages_stored * ST_PAGE_SIZE;
	}
	if ((rc = st_manifest_new(&m)) < 0)
		goto out_free;
	m->mem_size = size;
	if (parent) {
		m->has_parent = true;
		m->parent = parent_id;
	}
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	m->created = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
	/* Keep only the layers some range uses, in parent order, new layer last. */
	remap = st_sys_calloc((size_t)new_layer + 1, sizeof(*remap));
	m->layers = st_sys_calloc((size_t)new_layer + 1, sizeof(*m->layers));
	if (!remap || !m->layers) {
		rc = -ENOMEM;
		goto out_free;
	}
	for (uint64_t i = 0; i < rl.n; i++)
		remap[rl.v[i].layer] = 1;
	for (uint32_t i = 0; i <= new_layer; i++) {
		if (!remap[i])
			continue;
		remap[i] = m->nlayers + 1; /* 1-based so 0 stays "unused" */
		if (i < new_layer)
			m->layers[m->nlayers] = parent->layers[i];
		else
			m->layers[m->nlayers] = (struct st_layer_ref){ .id = layer_id, .pages = stats.pages_stored };
		m->nlayers++;
	}
	for (uint64_t i = 0; i < rl.n; i++)
		rl.v[i].layer = remap[rl.v[i].layer] - 1;
	/* Renumbering cannot make two ranges mergeable that were not: layer
	 * identity is unchanged. */
	m->ranges = rl.v;
	m->nranges = rl.n;
	rl.v = NULL;
	if ((rc = st_manifest_validate(m, NULL, 0)) < 0)
		goto out_free;
	*out = m;
	m = NULL;
	if (stats_out)
		*stats_out = stats;
out_free:
	st_blob_writer_abort(w);
	st_manifest_free(m);
	free(remap);
	free(rl.v);
	parent_unmap(&pv);
	return rc;
}

int st_ingest_file(struct st_store *s, const char *path, const struct st_manifest *parent, struct st_manifest **out,
		   struct st_ingest_stats *stats)
{
	struct stat st;
	void *p = NULL;
	int fd, rc, err = 0;

	fd = st_sys_openat(AT_FDCWD, path, O_RDONLY, 0);
	if (fd < 0)
		return fd;
	if ((rc = st_sys_fstat(fd, &st)) < 0)
		goto out_close;
	if (!S_ISREG(st.st_mode) || st.st_size % ST_PAGE_SIZE) {
		rc = -EINVAL;
		goto out_close;
	}
	if (st.st_size > 0) {
		p = st_sys_mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0, &err);
		if (!p) {
			rc = err;
			goto out_close;
		}
		st_sys_madvise(p, (size_t)st.st_size, MADV_SEQUENTIAL);
	}
	rc = st_ingest_image(s, p ? p : (const void *)"", (uint64_t)st.st_size, parent, out, stats);
	if (p)
		st_sys_munmap(p, (size_t)st.st_size);
out_close:
	st_sys_close(fd);
	return rc;
}
