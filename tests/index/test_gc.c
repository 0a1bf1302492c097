/* test_gc.c: gc: references, the grace period, staging files, a failure at any step. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "index/index_int.h"
#include "store/sys.h"
#include "tests/index/helpers.h"

static struct tstore T;

static void setup(void) { ts_open(&T); }
static void teardown(void) { ts_close(&T); }

TestSuite(gc, .init = setup, .fini = teardown, .timeout = 60);

/* Make a blob file look old enough for gc (mtime an hour back). */
static void age_blob(const st_id *id, int seconds)
{
	char path[512];
	struct timespec ts[2];

	cr_assert_eq(st_blob_path(T.s, id, path, sizeof(path)), 0);
	clock_gettime(CLOCK_REALTIME, &ts[0]);
	ts[0].tv_sec -= seconds;
	ts[1] = ts[0];
	cr_assert_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
}

Test(gc, never_deletes_a_referenced_blob_and_removes_unreferenced_ones)
{
	unsigned s1[] = { 1, 2 }, s2[] = { 2, 3 };
	st_id a = commit_seeds(&T, s1, 2, NULL, "a");
	commit_seeds(&T, s2, 2, NULL, "b");
	st_id l1 = put_page(T.s, 1), l2 = put_page(T.s, 2), l3 = put_page(T.s, 3);
	st_id loose = put_page(T.s, 99);
	struct ix_gc_stats st;

	cr_assert_eq(ix_gc(T.ix, 0, &st), 0);
	cr_assert_eq(st.blobs_removed, 1, "only the unreferenced blob goes");
	cr_assert_not(st_blob_has(T.s, &loose));
	cr_assert(st_blob_has(T.s, &l1) && st_blob_has(T.s, &l2) && st_blob_has(T.s, &l3));

	cr_assert_eq(ix_snap_del(T.ix, &a), 0);
	cr_assert_eq(ix_gc(T.ix, 0, &st), 0);
	cr_assert_eq(st.blobs_removed, 1);
	cr_assert_eq(st.bytes_removed, ST_PAGE_SIZE);
	cr_assert_not(st_blob_has(T.s, &l1), "a's own layer is freed");
	cr_assert(st_blob_has(T.s, &l2), "the layer b shares survives");
	cr_assert(st_blob_has(T.s, &l3));
	cr_assert_eq(fsck_errors(T.ix), 0);
}

Test(gc, respects_the_grace_period)
{
	st_id young = put_page(T.s, 10), old = put_page(T.s, 11);
	struct ix_gc_stats st;

	age_blob(&old, 7200);
	cr_assert_eq(ix_gc(T.ix, 3600, &st), 0);
	cr_assert_eq(st.blobs_removed, 1);
	cr_assert_eq(st.blobs_young, 1);
	cr_assert(st_blob_has(T.s, &young), "a blob younger than the grace period may belong to an import");
	cr_assert_not(st_blob_has(T.s, &old));
}

/* A young blob a snapshot references is kept because it is referenced, and
 * counted so, not among the unreferenced ones the grace period keeps. */
Test(gc, counts_referenced_blobs_apart_from_young_unreferenced_ones)
{
	unsigned seeds[] = { 1, 2, 3 };
	commit_seeds(&T, seeds, 3, NULL, "a");
	st_id loose = put_page(T.s, 99);
	struct ix_gc_stats st;

	cr_assert_eq(ix_gc(T.ix, 3600, &st), 0);
	cr_assert_eq(st.blobs_removed, 0);
	cr_assert_eq(st.blobs_young, 1, "only the loose blob is unreferenced and young");
	cr_assert_geq(st.blobs_in_use, 3, "the snapshot's layers are kept as referenced");
	cr_assert(st_blob_has(T.s, &loose));
}

Test(gc, removes_stale_staging_files)
{
	char path[600];
	struct st_blob_writer *w;
	int fd;

	snprintf(path, sizeof(path), "%s/tmp/leftover", T.path);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	cr_assert_geq(fd, 0);
	close(fd);
	struct timespec ts[2] = { { .tv_sec = 1000 }, { .tv_sec = 1000 } };
	cr_assert_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
	/* A writer in progress (fresh temp file) must survive a gc with grace. */
	cr_assert_eq(st_blob_writer_new(T.s, &w), 0);
	cr_assert_eq(st_blob_writer_write(w, "x", 1), 0);
	struct ix_gc_stats st;
	cr_assert_eq(ix_gc(T.ix, 60, &st), 0);
	cr_assert_eq(st.tmp_removed, 1);
	cr_assert_neq(access(path, F_OK), 0);
	st_id id;
	cr_assert_eq(st_blob_writer_commit(w, NULL, &id, NULL), 0, "the in-flight put completes");
}

Test(gc, a_failure_at_any_step_never_loses_a_referenced_blob)
{
	unsigned s1[] = { 1, 2 };
	st_id loose[4];
	uint64_t steps = 0;

	commit_seeds(&T, s1, 2, NULL, "keep");
	for (unsigned round = 0;; round++) {
		if (round > 0 && round > steps)
			break;
		for (unsigned j = 0; j < 4; j++) {
			loose[j] = put_page(T.s, 300 + j);
			age_blob(&loose[j], 7200);
		}
		if (round == 0) {
			st_sys_count_reset();
			cr_assert_eq(ix_gc(T.ix, 60, NULL), 0);
			steps = st_sys_calls();
			cr_assert_gt(steps, 4);
			continue;
		}
		st_sys_fault_set(round, round % 2 ? EIO : ENOSPC);
		ix_gc(T.ix, 60, NULL); /* may fail: nothing referenced may go */
		st_sys_fault_set(0, 0);
		cr_assert_eq(fsck_errors(T.ix), 0, "step %u", round);
		cr_assert_eq(ix_gc(T.ix, 60, NULL), 0);
		for (unsigned j = 0; j < 4; j++)
			cr_assert_not(st_blob_has(T.s, &loose[j]));
	}
	cr_assert_eq(count_blob_files(T.s), 2);
}
