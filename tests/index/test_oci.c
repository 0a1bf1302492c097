/* test_oci.c: OCI layouts through the index: round trip, the sha256 table, and a failure at every step of export and import. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "index/index.h"
#include "store/sys.h"
#include "tests/index/helpers.h"

static struct tstore T, U;

static void setup(void)
{
	ts_open(&T);
	ts_open(&U);
}

static void teardown(void)
{
	ts_close(&U);
	ts_close(&T);
}

TestSuite(oci, .init = setup, .fini = teardown, .timeout = 240);

/* a (3 pages) and its child b (one page changed), tagged. */
static void make_chain(st_id *a, st_id *b)
{
	unsigned sa[] = { 1, 2, 3 }, sb[] = { 1, 2, 4 };

	*a = commit_seeds(&T, sa, 3, NULL, "a");
	*b = commit_seeds(&T, sb, 3, a, "b");
}

static int count_cb(const st_id *id, void *ctx)
{
	(*(unsigned *)ctx)++;
	return 0;
}

static unsigned snapshots(struct ix *ix)
{
	struct ix_txn *t;
	unsigned n = 0;

	cr_assert_eq(ix_txn_begin(ix, &t), 0);
	cr_assert_eq(ix_snap_foreach(t, count_cb, &n), 0);
	ix_txn_end(t);
	return n;
}

/* Entries of dir (to see that no temp directory is left beside an export). */
static unsigned entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	unsigned n = 0;

	cr_assert_not_null(d);
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

Test(oci, a_layout_round_trips_the_chain_and_hashes_each_blob_once)
{
	struct ix_oci_stats st;
	char lay[400], lay2[400], why[ST_WHY_LEN] = "";
	const char *refs[] = { "b" };
	st_id a, b, got;
	struct ix_txn *t;

	make_chain(&a, &b);
	snprintf(lay, sizeof(lay), "%s/lay", T.dir);
	snprintf(lay2, sizeof(lay2), "%s/lay2", T.dir);
	cr_assert_eq(ix_oci_export(T.ix, refs, 1, lay, NULL, &st, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(st.snapshots, 2, "b and its parent");
	cr_assert_gt(st.bytes_sha256, 4 * 4096);
	cr_assert(ix_oci_is_layout(lay));
	cr_assert_eq(ix_oci_export(T.ix, refs, 1, lay2, NULL, &st, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(st.bytes_sha256, 0, "the second export hashes nothing");
	cr_assert_eq(ix_oci_export(T.ix, refs, 1, lay2, NULL, &st, why, sizeof(why)), -EEXIST);

	cr_assert_eq(ix_oci_import(U.ix, lay, NULL, 0, NULL, &st, &got, why, sizeof(why)), 0, "%s", why);
	cr_assert(st_id_equal(&got, &b));
	cr_assert_eq(ix_txn_begin(U.ix, &t), 0);
	cr_assert(ix_snap_has(t, &a), "the parent came along");
	cr_assert_eq(ix_tag_get(t, "b", &got), 0);
	cr_assert(st_id_equal(&got, &b));
	ix_txn_end(t);
	cr_assert_eq(fsck_errors(U.ix), 0);
	uint8_t sha[ST_SHA256_LEN];
	cr_assert_eq(ix_sha256_get(U.ix, &b, sha), 0, "the import recorded what it verified");
}

Test(oci, a_failure_at_any_step_of_an_import_commits_nothing_and_a_rerun_imports)
{
	char lay[400], why[ST_WHY_LEN];
	const char *refs[] = { "b" };
	st_id a, b, got;
	uint64_t steps, failures = 0;

	make_chain(&a, &b);
	snprintf(lay, sizeof(lay), "%s/lay", T.dir);
	cr_assert_eq(ix_oci_export(T.ix, refs, 1, lay, NULL, NULL, why, sizeof(why)), 0, "%s", why);

	/* Learn the step count on a scratch store, then fail each step in U. */
	struct tstore S;
	ts_open(&S);
	st_sys_count_reset();
	cr_assert_eq(ix_oci_import(S.ix, lay, NULL, 0, NULL, NULL, NULL, why, sizeof(why)), 0, "%s", why);
	steps = st_sys_calls();
	ts_close(&S);
	cr_assert_gt(steps, 10);
	for (uint64_t i = 1; i <= steps; i++) {
		int errs[] = { EIO, ENOSPC };
		st_sys_fault_set(i, errs[i % 2]);
		int rc = ix_oci_import(U.ix, lay, NULL, 0, NULL, NULL, &got, why, sizeof(why));
		bool fired = st_sys_fault_fired();
		st_sys_fault_set(0, 0);
		if (rc == 0) {
			/* The fault hit a step whose failure does not matter (a
			 * close); then everything must be there. */
			cr_assert_eq(snapshots(U.ix), 2, "step %llu", (unsigned long long)i);
			ix_snap_del(U.ix, &b);
			ix_snap_del(U.ix, &a);
			ix_gc(U.ix, 0, NULL);
			continue;
		}
		cr_assert(fired, "step %llu failed (%s) without the fault", (unsigned long long)i, ix_strerror(rc));
		failures++;
		cr_assert_eq(snapshots(U.ix), 0, "step %llu: a failed import committed a snapshot", (unsigned long long)i);
		cr_assert_eq(fsck_errors(U.ix), 0, "step %llu", (unsigned long long)i);
	}
	cr_assert_gt(failures, steps / 2);
	cr_assert_eq(ix_oci_import(U.ix, lay, NULL, 0, NULL, NULL, &got, why, sizeof(why)), 0, "%s", why);
	cr_assert(st_id_equal(&got, &b));
	cr_assert_eq(snapshots(U.ix), 2);
	cr_assert_eq(fsck_errors(U.ix), 0);
}

Test(oci, a_failure_at_any_step_of_an_export_leaves_nothing_beside_it)
{
	char out[400], why[ST_WHY_LEN];
	const char *refs[] = { "b" };
	st_id a, b;
	uint64_t steps;

	make_chain(&a, &b);
	snprintf(out, sizeof(out), "%s/out", U.dir);
	cr_assert_eq(mkdir(out, 0755), 0);
	char lay[500];
	snprintf(lay, sizeof(lay), "%s/lay", out);
	st_sys_count_reset();
	cr_assert_eq(ix_oci_export(T.ix, refs, 1, lay, NULL, NULL, why, sizeof(why)), 0, "%s", why);
	steps = st_sys_calls();
	cr_assert_eq(sh("rm -rf '%s'", lay), 0);
	for (uint64_t i = 1; i <= steps; i++) {
		st_sys_fault_set(i, i % 2 ? ENOSPC : EIO);
		int rc = ix_oci_export(T.ix, refs, 1, lay, NULL, NULL, why, sizeof(why));
		st_sys_fault_set(0, 0);
		if (rc == 0) {
			cr_assert(ix_oci_is_layout(lay), "step %llu", (unsigned long long)i);
			cr_assert_eq(sh("rm -rf '%s'", lay), 0);
			continue;
		}
		cr_assert_eq(entries(out), 0, "step %llu: the failed export left %u entries", (unsigned long long)i,
			     entries(out));
	}
}
