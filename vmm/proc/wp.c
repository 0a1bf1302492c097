/* wp.c: written-page tracking for the process backend: userfaultfd asynchronous write-protect and PAGEMAP_SCAN. */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "vmm/snap_int.h"

/*
 * Guest memory of the process backend is shared memory (a memfd mapped in
 * the host and in the child), so "pages of its own" (dirty.c) says nothing
 * about writes. Instead both mappings are registered with a userfaultfd in
 * asynchronous write-protect mode (Linux 6.7): the kernel resolves each
 * first write itself (no exit) and marks the page written; PAGEMAP_SCAN
 * with PM_SCAN_WP_MATCHING reports the written pages and protects them
 * again in one call. The ABI below is kernel ABI, spelled out because the
 * build machine's headers (Linux 6.1) predate it.
 */
#ifndef UFFD_FEATURE_WP_HUGETLBFS_SHMEM
#define UFFD_FEATURE_WP_HUGETLBFS_SHMEM (1 << 12)
#endif
#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 13)
#endif
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1 << 15)
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

struct wp_region {
	uint64_t start, end, categories;
};

struct wp_scan_arg {
	uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
	uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};

#define WP_PAGEMAP_SCAN _IOWR('f', 16, struct wp_scan_arg)
#define WP_PAGE_IS_WRITTEN (1ull << 1)
#define WP_PAGE_IS_PRESENT (1ull << 3)
#define WP_PAGE_IS_SWAPPED (1ull << 4)
#define WP_SCAN_WP_MATCHING (1ull << 0)
#define WP_SCAN_CHECK_WPASYNC (1ull << 1)
#define WP_VEC_LEN 256

int vmm_wp_track(uint64_t addr, uint64_t len, int *out)
{
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
	int rc;

	if (fd < 0)
		return -errno;
	struct uffdio_api api = { .api = UFFD_API, .features = UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED |
							    UFFD_FEATURE_WP_HUGETLBFS_SHMEM };
	struct uffdio_register reg = { .range = { addr, len }, .mode = UFFDIO_REGISTER_MODE_WP };
	if (ioctl(fd, UFFDIO_API, &api) < 0 || ioctl(fd, UFFDIO_REGISTER, &reg) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	*out = fd;
	return 0;
}

int vmm_wp_register(int uffd, uint64_t addr, uint64_t len)
{
	struct uffdio_register reg = { .range = { addr, len }, .mode = UFFDIO_REGISTER_MODE_WP };

	return ioctl(uffd, UFFDIO_REGISTER, &reg) < 0 ? -errno : 0;
}

int vmm_wp_protect(int uffd, uint64_t addr, uint64_t len)
{
	struct uffdio_writeprotect wp = { .range = { addr, len }, .mode = UFFDIO_WRITEPROTECT_MODE_WP };
	int rc;

	do
		rc = ioctl(uffd, UFFDIO_WRITEPROTECT, &wp);
	while (rc < 0 && errno == EINTR);
	return rc < 0 ? -errno : 0;
}

int vmm_wp_scan(int pagemap_fd, uint64_t start, uint64_t end, int (*cb)(void *ctx, uint64_t lo, uint64_t hi),
		void *ctx, unsigned *ioctls)
{
	struct wp_region vec[WP_VEC_LEN];
	int rc;

	while (start < end) {
		struct wp_scan_arg a = {
			.size = sizeof(a), .flags = WP_SCAN_WP_MATCHING | WP_SCAN_CHECK_WPASYNC,
			.start = start, .end = end, .vec = (uint64_t)(uintptr_t)vec, .vec_len = WP_VEC_LEN,
			/* Written, and a page (present or swapped): a hole that was
			 * never protected counts as written but holds nothing. */
			.category_mask = WP_PAGE_IS_WRITTEN, .category_anyof_mask = WP_PAGE_IS_PRESENT | WP_PAGE_IS_SWAPPED,
			.return_mask = WP_PAGE_IS_WRITTEN,
		};
		do
			rc = ioctl(pagemap_fd, WP_PAGEMAP_SCAN, &a);
		while (rc < 0 && errno == EINTR);
		if (ioctls)
			(*ioctls)++;
		if (rc < 0)
			return -errno;
		for (int i = 0; i < rc; i++) {
			int r = cb(ctx, vec[i].start, vec[i].end);
			if (r < 0)
				return r;
		}
		if (a.walk_end <= start)
			break;
		start = a.walk_end;
	}
	return 0;
}
