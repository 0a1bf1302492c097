/* pagemap_scan_works.c: the test harness's own "this kernel has PAGEMAP_SCAN" check, linked with nothing of strata. */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * Prints "1 WHAT WORKED" or "0 WHY NOT" and exits 0 either way. The check:
 * four anonymous pages under a userfaultfd in asynchronous write-protect
 * mode, pages 1 and 3 written; PAGEMAP_SCAN over the four must report
 * exactly those two as written (and present). Linux 6.7 added the ioctl;
 * Debian 12's headers predate it, so its ABI is spelled out here
 * (include/uapi/linux/fs.h).
 */
struct scan_region {
	uint64_t start, end, categories;
};

struct scan_arg {
	uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
	uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};

#define SCAN_IOCTL _IOWR('f', 16, struct scan_arg)
#define IS_WRITTEN (1ull << 1)
#define IS_PRESENT (1ull << 3)
#define WP_UNPOPULATED (1ull << 13) /* UFFD_FEATURE_WP_UNPOPULATED, Linux 6.4 */
#define WP_ASYNC (1ull << 15)       /* UFFD_FEATURE_WP_ASYNC, Linux 6.7 */

static int no(const char *what)
{
	printf("0 %s: %s\n", what, strerror(errno));
	return 0;
}

int main(void)
{
	long page = sysconf(_SC_PAGESIZE);
	uint8_t *m = mmap(NULL, 4 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return no("mmap");
	int uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (uffd < 0)
		return no("userfaultfd");
	struct uffdio_api api = { .api = UFFD_API, .features = WP_ASYNC | WP_UNPOPULATED };
	if (ioctl(uffd, UFFDIO_API, &api) < 0)
		return no("UFFDIO_API with asynchronous write-protect");
	struct uffdio_register reg = { .range = { (uintptr_t)m, 4 * (uint64_t)page }, .mode = UFFDIO_REGISTER_MODE_WP };
	if (ioctl(uffd, UFFDIO_REGISTER, &reg) < 0)
		return no("UFFDIO_REGISTER");
	struct uffdio_writeprotect wp = { .range = reg.range, .mode = UFFDIO_WRITEPROTECT_MODE_WP };
	if (ioctl(uffd, UFFDIO_WRITEPROTECT, &wp) < 0)
		return no("UFFDIO_WRITEPROTECT");
	m[1 * page] = 1;
	m[3 * page] = 1;
	int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (pm < 0)
		return no("/proc/self/pagemap");
	struct scan_region r[4];
	struct scan_arg a = {
		.size = sizeof(a), .start = (uintptr_t)m, .end = (uintptr_t)m + 4 * (uint64_t)page,
		.vec = (uintptr_t)r, .vec_len = 4, .category_mask = IS_WRITTEN | IS_PRESENT,
		.return_mask = IS_WRITTEN | IS_PRESENT,
	};
	int n = ioctl(pm, SCAN_IOCTL, &a);
	if (n < 0)
		return no("ioctl PAGEMAP_SCAN");
	if (n != 2 || r[0].start != (uintptr_t)(m + page) || r[0].end != (uintptr_t)(m + 2 * page) ||
	    r[1].start != (uintptr_t)(m + 3 * page) || r[1].end != (uintptr_t)(m + 4 * page)) {
		printf("0 PAGEMAP_SCAN answered %d regions, not the 2 written pages\n", n);
		return 0;
	}
	printf("1 PAGEMAP_SCAN found the 2 written pages of 4 under userfaultfd write-protect\n");
	return 0;
}
