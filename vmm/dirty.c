/* dirty.c: which guest pages hold memory of their own (PAGEMAP_SCAN, or pagemap reads): the only file reading pagemap. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "store/array.h"
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

/*
 * /proc/PID/pagemap entries (Documentation/admin-guide/mm/pagemap.rst):
 * one 64-bit word per page. Kernel ABI since 2.6.25; the exclusive bit
 * since 4.2.
 */
#define PM_PRESENT (1ull << 63)
#define PM_SWAP (1ull << 62)
#define PM_FILE (1ull << 61)         /* page-cache page (or shared anonymous) */
#define PM_MMAP_EXCLUSIVE (1ull << 56) /* mapped by exactly one page table */
#define PM_PFN_MASK ((1ull << 55) - 1) /* page frame; 0 unless CAP_SYS_ADMIN */
/* Entries read per pread: 64 KiB of entries covers 32 MiB of guest memory
 * (docs/restore.md: the fallback's cost). */
#define READ_ENTRIES 8192u

/* Per process: pagemap describes the process, not a sandbox. */
static int self_fd = -1;
static bool self_scan_ok, self_read_ok;
static int self_open_errno;
static uint64_t zero_pfn;  /* the shared zero page's frame, 0 if hidden from us */
static pthread_once_t self_once = PTHREAD_ONCE_INIT;

bool vmm_dirty_scan_works(int fd)
{
	/* Probe: an empty walk fails with EINVAL/ENOTTY on kernels without it. */
	struct page_region r;
	struct pm_scan_arg a = {
		.size = sizeof(a), .vec = (uint64_t)(uintptr_t)&r, .vec_len = 1,
		.return_mask = PAGE_IS_PRESENT, .category_anyof_mask = PAGE_IS_PRESENT,
	};

	a.start = a.end = (uint64_t)(uintptr_t)&r & ~(VMM_PAGE - 1);
	return ioctl(fd, PAGEMAP_SCAN, &a) >= 0;
}

static void self_open(void)
{
	uint64_t entry;

	self_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (self_fd < 0) {
		self_open_errno = errno;
		return;
	}
	self_scan_ok = vmm_dirty_scan_works(self_fd);
	/* Where frames are visible (CAP_SYS_ADMIN), learn the zero page's:
	 * read one fresh anonymous page, which maps it, and look. */
	void *p = mmap(NULL, VMM_PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p != MAP_FAILED) {
		(void)*(volatile const uint8_t *)p;
		if (pread(self_fd, &entry, sizeof(entry), (off_t)((uintptr_t)p / VMM_PAGE * sizeof(entry))) ==
		    (ssize_t)sizeof(entry) && (entry & PM_PRESENT))
			zero_pfn = entry & PM_PFN_MASK;
		munmap(p, VMM_PAGE);
	}
	/* Reads must work too: a locked-down /proc can refuse them. */
	self_read_ok = pread(self_fd, &entry, sizeof(entry),
			     (off_t)((uintptr_t)&entry / VMM_PAGE * sizeof(entry))) == (ssize_t)sizeof(entry);
	if (!self_read_ok)
		self_open_errno = errno;
}

int vmm_dirty_resolve(enum vmm_dirty_mech mech, struct vmm_error *err)
{
	pthread_once(&self_once, self_open);
	if (self_fd < 0)
		return vmm_fail(err, VMM_E_NO_PAGEMAP, "cannot open /proc/self/pagemap: %s",
				strerror(self_open_errno));
	if (mech != VMM_DIRTY_READ && self_scan_ok)
		return VMM_DIRTY_SCAN;
	if (mech == VMM_DIRTY_SCAN)
		return vmm_fail(err, VMM_E_NO_PAGEMAP,
				"pagemap-scan was asked for, but this kernel lacks PAGEMAP_SCAN "
				"(Linux 6.7 or newer); pagemap-read works on any supported kernel");
	if (!self_read_ok)
		return vmm_fail(err, VMM_E_NO_PAGEMAP, "cannot read /proc/self/pagemap: %s",
				strerror(self_open_errno));
	return VMM_DIRTY_READ;
}

const char *vmm_dirty_name(enum vmm_dirty_mech mech)
{
	switch (mech) {
	case VMM_DIRTY_SCAN: return "pagemap-scan";
	case VMM_DIRTY_READ: return "pagemap-read";
	default: return "auto";
	}
}

int vmm_dirty_mechanism(enum vmm_dirty_mech *out, struct vmm_error *err)
{
	int m = vmm_dirty_resolve(VMM_DIRTY_AUTO, err);

	if (m < 0)
		return m;
	*out = (enum vmm_dirty_mech)m;
	return 0;
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
	if (ST_ARRAY_RESERVE(r->v, r->cap, r->n + 1) < 0)
		return -ENOMEM;
	r->v[r->n++] = (struct vmm_run){ gpage, npages };
	return 0;
}

/*
 * A page of its own: not a page-cache page (a private copy made by a write,
 * or anonymous memory), present or swapped, and not the shared zero page
 * (an anonymous page only ever read). PAGEMAP_SCAN says so directly.
 */
static int scan_ioctl(int fd, uint64_t base, uint64_t size, bool touched, struct vmm_runs *out, unsigned *calls)
{
	struct page_region vec[VEC_LEN];
	uint64_t start = base, end = base + size;
	int rc;

	while (start < end) {
		struct pm_scan_arg a = {
			.size = sizeof(a), .start = start, .end = end,
			.vec = (uint64_t)(uintptr_t)vec, .vec_len = VEC_LEN,
			.category_inverted = touched ? 0 : PAGE_IS_FILE | PAGE_IS_PFNZERO,
			.category_mask = touched ? 0 : PAGE_IS_FILE | PAGE_IS_PFNZERO,
			/* Touched: present only. A swap entry may be a marker
			 * the write tracking left on a page never touched
			 * (uffd-wp on shared memory). */
			.category_anyof_mask = touched ? PAGE_IS_PRESENT : PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
			.return_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
		};
		do
			rc = ioctl(fd, PAGEMAP_SCAN, &a);
		while (rc < 0 && errno == EINTR);
		(*calls)++;
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
	return 0;
}

/*
 * The same set from pagemap entries, for kernels before 6.7: swapped, or
 * present, not a page-cache page, and not the shared zero page. The zero
 * page is present and anonymous like a written page; what tells them apart
 * is its frame number where we may see frames (CAP_SYS_ADMIN), else the
 * exclusive bit, which the zero page never has (the kernel counts no
 * mapping of it). Without frames, a written page shared with a fork()ed
 * child is not exclusive either, so it would be missed: docs/restore.md.
 * Costs one pread per READ_ENTRIES pages, whatever is written.
 */
static bool entry_is_own(uint64_t e)
{
	uint64_t pfn = e & PM_PFN_MASK;

	if (e & PM_SWAP)
		return true;
	if ((e & (PM_PRESENT | PM_FILE)) != PM_PRESENT)
		return false;
	if (zero_pfn && pfn)
		return pfn != zero_pfn;
	return (e & PM_MMAP_EXCLUSIVE) != 0;
}

static int scan_read(int fd, uint64_t base, uint64_t size, bool touched, struct vmm_runs *out, unsigned *calls)
{
	uint64_t npages = size / VMM_PAGE, first = base / VMM_PAGE;
	uint64_t *ent = malloc(READ_ENTRIES * sizeof(*ent));
	int rc = 0;

	if (!ent)
		return -ENOMEM;

	for (uint64_t done = 0; done < npages;) {
		uint64_t want = npages - done < READ_ENTRIES ? npages - done : READ_ENTRIES;
		ssize_t got;
		do
			got = pread(fd, ent, want * sizeof(ent[0]), (off_t)((first + done) * sizeof(ent[0])));
		while (got < 0 && errno == EINTR);
		(*calls)++;
		if (got <= 0 || got % (ssize_t)sizeof(ent[0])) {
			rc = got < 0 ? -errno : -EIO;
			goto out_free;
		}
		uint64_t n = (uint64_t)got / sizeof(ent[0]);
		for (uint64_t i = 0; i < n; i++) {
			bool hit = touched ? (ent[i] & PM_PRESENT) != 0 : entry_is_own(ent[i]);
			if (hit && (rc = vmm_runs_add(out, done + i, 1)) < 0)
				goto out_free;
		}
		done += n;
	}
out_free:
	free(ent);
	return rc;
}

int vmm_dirty_scan_fd(int fd, enum vmm_dirty_mech mech, uint64_t addr, uint64_t size,
		      struct vmm_runs *out, unsigned *calls)
{
	unsigned n = 0;
	int rc;

	pthread_once(&self_once, self_open);  /* the zero page's frame */
	vmm_runs_clear(out);
	rc = mech == VMM_DIRTY_READ ? scan_read(fd, addr, size, false, out, &n)
				    : scan_ioctl(fd, addr, size, false, out, &n);
	if (calls)
		*calls += n;
	return rc;
}

int vmm_touched_scan_fd(int fd, enum vmm_dirty_mech mech, uint64_t addr, uint64_t size, struct vmm_runs *out)
{
	unsigned n = 0;

	vmm_runs_clear(out);
	return mech == VMM_DIRTY_READ ? scan_read(fd, addr, size, true, out, &n)
				      : scan_ioctl(fd, addr, size, true, out, &n);
}

int vmm_touched_scan(uint8_t *mem, uint64_t size, struct vmm_runs *out)
{
	int m = vmm_dirty_resolve(VMM_DIRTY_AUTO, NULL);

	if (m < 0)
		return m;
	return vmm_touched_scan_fd(self_fd, (enum vmm_dirty_mech)m, (uint64_t)(uintptr_t)mem, size, out);
}

int vmm_dirty_scan(uint8_t *mem, uint64_t size, enum vmm_dirty_mech mech, struct vmm_runs *out,
		   unsigned *calls)
{
	int m = vmm_dirty_resolve(mech, NULL);

	if (m < 0)
		return m;
	return vmm_dirty_scan_fd(self_fd, (enum vmm_dirty_mech)m, (uint64_t)(uintptr_t)mem, size, out, calls);
}
