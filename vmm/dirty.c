/* dirty.c: which guest pages hold memory of their own (PAGEMAP_SCAN): the only file touching /proc/self/pagemap. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "vmm/snap_int.h"

/*
 * PAGEMAP_SCAN (Linux 6.7). The build machine's headers (Debian 12, Linux
 * 6.1) predate it, so the ABI is spelled out here from the kernel's
 * include/uapi/linux/fs.h; the values are kernel ABI and never change.
 */
#ifndef PAGEMAP_SCAN
struct page_region {
	uint64_t start;
	uint64_t end;
	uint64_t categories;
};

struct pm_scan_arg {
	uint64_t size;               /* sizeof(struct pm_scan_arg) */
	uint64_t flags;              /* PM_SCAN_* */
	uint64_t start, end;         /* address range to walk */
	uint64_t walk_end;           /* out: where the walk stopped */
	uint64_t vec, vec_len;       /* struct page_region array */
	uint64_t max_pages;          /* 0: no limit */
	uint64_t category_inverted;  /* categories to invert before matching */
	uint64_t category_mask;      /* all of these must be set (after inversion) */
	uint64_t category_anyof_mask;/* at least one of these */
	uint64_t return_mask;        /* categories reported in page_region */
};

#define PAGEMAP_SCAN _IOWR('f', 16, struct pm_scan_arg)
#define PAGE_IS_WPALLOWED (1ull << 0)
#define PAGE_IS_WRITTEN (1ull << 1)
#define PAGE_IS_FILE (1ull << 2)
#define PAGE_IS_PRESENT (1ull << 3)
#define PAGE_IS_SWAPPED (1ull << 4)
#define PAGE_IS_PFNZERO (1ull << 5)
#endif

#define VEC_LEN 512

static int pagemap_fd = -1;
static pthread_once_t pagemap_once = PTHREAD_ONCE_INIT;

/* One fd per process: pagemap describes the process, not a sandbox. */
static void pagemap_open(void)
{
	pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (pagemap_fd < 0)
		return;
	/* Probe: an empty walk fails with EINVAL/ENOTTY on kernels without it. */
	struct page_region r;
	struct pm_scan_arg a = {
		.size = sizeof(a), .start = (uint64_t)(uintptr_t)&r, .end = (uint64_t)(uintptr_t)&r,
		.vec = (uint64_t)(uintptr_t)&r, .vec_len = 1, .return_mask = PAGE_IS_PRESENT,
		.category_anyof_mask = PAGE_IS_PRESENT,
	};
	a.end = a.start & ~(VMM_PAGE - 1);
	a.start = a.end;
	if (ioctl(pagemap_fd, PAGEMAP_SCAN, &a) < 0) {
		close(pagemap_fd);
		pagemap_fd = -1;
	}
}

bool vmm_dirty_supported(void)
{
	pthread_once(&pagemap_once, pagemap_open);
	return pagemap_fd >= 0;
}

void vmm_runs_clear(struct vmm_runs *r)
{
	r->n = 0;
}

void vmm_runs_free(struct vmm_runs *r)
{
	free(r->v);
	memset(r, 0, sizeof(*r));
}

int vmm_runs_add(struct vmm_runs *r, uint64_t gpage, uint64_t npages)
{
	if (r->n && r->v[r->n - 1].gpage + r->v[r->n - 1].npages == gpage) {
		r->v[r->n - 1].npages += npages;
		return 0;
	}
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 64;
		struct vmm_run *v = realloc(r->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		r->v = v;
		r->cap = cap;
	}
	r->v[r->n++] = (struct vmm_run){ gpage, npages };
	return 0;
}

int vmm_dirty_scan(uint8_t *mem, uint64_t size, struct vmm_runs *out, unsigned *ioctls)
{
	struct page_region vec[VEC_LEN];
	uint64_t base = (uint64_t)(uintptr_t)mem;
	uint64_t start = base, end = base + size;
	unsigned calls = 0;
	int rc;

	if (!vmm_dirty_supported())
		return VMM_E_NO_PAGEMAP;
	vmm_runs_clear(out);
	while (start < end) {
		/*
		 * A page of its own: not a page-cache page (a private copy made by
		 * a write, or anonymous memory), present or swapped, and not the
		 * shared zero page (an anonymous page only ever read).
		 */
		struct pm_scan_arg a = {
			.size = sizeof(a), .start = start, .end = end,
			.vec = (uint64_t)(uintptr_t)vec, .vec_len = VEC_LEN,
			.category_inverted = PAGE_IS_FILE | PAGE_IS_PFNZERO,
			.category_mask = PAGE_IS_FILE | PAGE_IS_PFNZERO,
			.category_anyof_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
			.return_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
		};
		do
			rc = ioctl(pagemap_fd, PAGEMAP_SCAN, &a);
		while (rc < 0 && errno == EINTR);
		calls++;
		if (rc < 0)
			return -errno;
		for (int i = 0, found = rc; i < found; i++) {
			uint64_t g = (vec[i].start - base) / VMM_PAGE;
			uint64_t n = (vec[i].end - vec[i].start) / VMM_PAGE;
			if ((rc = vmm_runs_add(out, g, n)) < 0)
				return rc;
		}
		if (a.walk_end <= start)
			break;
		start = a.walk_end;
	}
	if (ioctls)
		*ioctls += calls;
	return 0;
}
