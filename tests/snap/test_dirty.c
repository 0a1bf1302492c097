/* test_dirty.c: both written-page mechanisms (PAGEMAP_SCAN, pagemap reads) find exactly the pages of their own (no KVM needed). */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/harness/harness.h"
#include "vmm/snap_int.h"

#define NPAGES 128u  /* pages 0..63 a private file mapping, 64..127 anonymous */
#define PG 4096u

static uint8_t *mem;
static int fd = -1, pm = -1;

static void setup(void)
{
	char path[] = "/tmp/strata-dirty-XXXXXX";
	uint8_t page[PG];

	fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	unlink(path);
	for (unsigned i = 0; i < NPAGES / 2; i++) {
		memset(page, (int)(i + 1), sizeof(page));
		cr_assert_eq(write(fd, page, sizeof(page)), (ssize_t)sizeof(page));
	}
	/* Laid out as guest memory is: one anonymous range, layers mapped over it. */
	mem = mmap(NULL, NPAGES * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	cr_assert_neq(mem, MAP_FAILED);
	madvise(mem, NPAGES * PG, MADV_NOHUGEPAGE);
	cr_assert_neq(mmap(mem, NPAGES / 2 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd, 0), MAP_FAILED);
	pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	cr_assert_geq(pm, 0);
}

static void teardown(void)
{
	munmap(mem, NPAGES * PG);
	close(fd);
	close(pm);
}

TestSuite(dirty, .init = setup, .fini = teardown);

static volatile uint8_t sink;

/* Reads that map page-cache pages and the zero page, writes that make pages
 * of their own, a write of zeros (still a page of its own), and a written
 * file page given back (the file's page again). */
static void touch(void)
{
	for (unsigned p = 0; p < 10; p++)
		sink = mem[p * PG];
	for (unsigned p = 64; p < 75; p++)
		sink = mem[p * PG];
	mem[3 * PG] = 0xaa;
	mem[5 * PG + 7] = 0xbb;
	mem[20 * PG] = 0xcc;
	mem[70 * PG + 100] = 1;
	mem[80 * PG] = 2;
	mem[81 * PG + 4095] = 3;
	memset(mem + 90 * PG, 0, 16);
	cr_assert_eq(madvise(mem + 5 * PG, PG, MADV_DONTNEED), 0);
}

static const unsigned want[] = { 3, 20, 70, 80, 81, 90 };

/* Runs as a set of pages, checked against want. */
static void expect_want(const struct vmm_runs *r, const char *how)
{
	bool in[NPAGES] = { false };
	unsigned n = 0;

	for (size_t i = 0; i < r->n; i++)
		for (uint64_t p = r->v[i].gpage; p < r->v[i].gpage + r->v[i].npages; p++) {
			cr_assert_lt(p, NPAGES, "%s: page %lu out of range", how, (unsigned long)p);
			in[p] = true;
			n++;
		}
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		cr_assert(in[want[i]], "%s: page %u was written but not found", how, want[i]);
	cr_assert_eq(n, sizeof(want) / sizeof(want[0]), "%s: %u pages found, %zu written", how, n,
		     sizeof(want) / sizeof(want[0]));
}

static void scan(enum vmm_dirty_mech mech, struct vmm_runs *r)
{
	unsigned calls = 0;

	cr_assert_eq(vmm_dirty_scan_fd(pm, mech, (uint64_t)(uintptr_t)mem, NPAGES * PG, r, &calls), 0);
	cr_assert_gt(calls, 0);
}

Test(dirty, pagemap_reads_find_exactly_the_pages_of_their_own)
{
	struct vmm_runs r = { 0 };

	touch();
	scan(VMM_DIRTY_READ, &r);
	expect_want(&r, "pagemap-read");
	vmm_runs_free(&r);
}

Test(dirty, pagemap_scan_finds_the_same_pages)
{
	struct vmm_runs r = { 0 };

	if (!vmm_dirty_scan_works(pm)) {
		char why[512];
		cr_assert_neq(harness_has("PAGEMAP_SCAN", why, sizeof(why)), 1,
			      "strata finds no PAGEMAP_SCAN, but the harness's own check used it: %s", why);
		cr_skip_test("this kernel lacks PAGEMAP_SCAN (Linux 6.7+; the harness agrees: %s); pagemap-read is what runs here",
			     why);
	}
	touch();
	scan(VMM_DIRTY_SCAN, &r);
	expect_want(&r, "pagemap-scan");
	vmm_runs_free(&r);
}

/* A fork shares every written anonymous page with the child: no page is
 * exclusive any more, yet each is still a page of its own. */
Test(dirty, pages_shared_with_a_forked_child_are_still_found)
{
	struct vmm_runs r = { 0 };
	int status;

	touch();
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		pause();
		_exit(0);
	}
	scan(VMM_DIRTY_READ, &r);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	expect_want(&r, "pagemap-read after fork");
	vmm_runs_free(&r);
}

Test(dirty, the_process_choice_honours_a_forced_mechanism)
{
	struct vmm_error err;

	cr_assert_eq(vmm_dirty_resolve(VMM_DIRTY_READ, &err), VMM_DIRTY_READ, "%s", err.message);
	int rc = vmm_dirty_resolve(VMM_DIRTY_SCAN, &err);
	if (vmm_dirty_scan_works(pm)) {
		cr_assert_eq(rc, VMM_DIRTY_SCAN);
	} else {
		cr_assert_eq(rc, VMM_E_NO_PAGEMAP);
		cr_assert_not_null(strstr(err.message, "Linux 6.7"), "%s", err.message);
	}
	enum vmm_dirty_mech mech = VMM_DIRTY_AUTO;
	cr_assert_eq(vmm_dirty_mechanism(&mech, NULL), 0);
	cr_assert(mech == VMM_DIRTY_SCAN || mech == VMM_DIRTY_READ, "AUTO resolves to a mechanism");
}
