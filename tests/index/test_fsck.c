/* test_fsck.c: fsck finds each kind of damage (blobs, refcounts, tags, children, records). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "index/index_int.h"
#include "tests/index/helpers.h"

static struct tstore T;

static void setup(void) { ts_open(&T); }
static void teardown(void) { ts_close(&T); }

TestSuite(fsck, .init = setup, .fini = teardown, .timeout = 60);

/* Damage helpers: tamper with records through a write txn. */
struct tamper {
	int what;
	st_id id;
};

static int tamper_fn(struct ix *ix, MDB_txn *txn, void *arg)
{
	struct tamper *tp = arg;
	MDB_val k = ix_val(tp->id.b, 16), v;
	struct ix_blob_rec r;

	switch (tp->what) {
	case 0: /* refcount off by one */
		cr_assert_eq(ix_blob_rec_get(ix, txn, &tp->id, &r), 0);
		r.refs++;
		return ix_blob_rec_put(ix, txn, &tp->id, &r);
	case 1: /* dangling tag */
		k = ix_val("ghost", 5);
		v = ix_val(tp->id.b, 16);
		return mdb_put(txn, ix->tags, &k, &v, 0);
	case 2: /* bogus children edge */
		v = ix_val(tp->id.b, 16);
		k = ix_val("\1\1\1\1\1\1\1\1\1\1\1\1\1\1\1\1", 16);
		return mdb_put(txn, ix->children, &k, &v, 0);
	case 3: /* snapshot record no longer hashes to its key */
		v = ix_val("{}", 2);
		return mdb_put(txn, ix->snaps, &k, &v, 0);
	}
	return 0;
}

static void tamper(int what, const st_id *id)
{
	struct tamper tp = { .what = what, .id = *id };

	cr_assert_eq(ix_write(T.ix, tamper_fn, &tp), 0);
}

Test(fsck, a_healthy_store_is_clean_and_orphans_are_not_errors)
{
	unsigned s1[] = { 1, 2 };
	commit_seeds(&T, s1, 2, NULL, "a");
	put_page(T.s, 50);
	struct ix_fsck_stats st;
	int rc = ix_fsck(T.ix, IX_FSCK_HASH, NULL, NULL, &st);

	cr_assert_eq(rc, 0);
	cr_assert_eq(st.snapshots, 1);
	cr_assert_eq(st.blobs, 2);
	cr_assert_eq(st.blob_files, 3);
	cr_assert_eq(st.orphans, 1);
	cr_assert_eq(st.bytes_hashed, 2 * ST_PAGE_SIZE);
	cr_assert_eq(fsck_kinds(T.ix, 0), 1u << IX_PROBLEM_ORPHAN);
}

Test(fsck, finds_a_missing_blob)
{
	unsigned s1[] = { 1, 2 };
	commit_seeds(&T, s1, 2, NULL, "a");
	st_id l = put_page(T.s, 2);

	cr_assert_eq(st_blob_del(T.s, &l), 0);
	cr_assert_eq(fsck_errors(T.ix), 1);
	cr_assert(fsck_kinds(T.ix, 0) & (1u << IX_PROBLEM_MISSING));
}

Test(fsck, finds_a_corrupt_blob)
{
	unsigned s1[] = { 1, 2 };
	commit_seeds(&T, s1, 2, NULL, "a");
	st_id l = put_page(T.s, 2);
	char path[512];

	cr_assert_eq(st_blob_path(T.s, &l, path, sizeof(path)), 0);
	cr_assert_eq(sh("chmod u+w %s && printf Z | dd of=%s bs=1 seek=100 conv=notrunc 2>/dev/null", path, path), 0);
	cr_assert_eq(fsck_kinds(T.ix, 0), 0, "without hashing the damage is invisible");
	cr_assert_eq(fsck_errors(T.ix), 1);
	cr_assert(fsck_kinds(T.ix, IX_FSCK_HASH) & (1u << IX_PROBLEM_CORRUPT));
}

Test(fsck, finds_a_truncated_blob)
{
	unsigned s1[] = { 1 };
	commit_seeds(&T, s1, 1, NULL, "a");
	st_id l = put_page(T.s, 1);
	char path[512];

	cr_assert_eq(st_blob_path(T.s, &l, path, sizeof(path)), 0);
	cr_assert_eq(truncate(path, 100), 0);
	cr_assert(fsck_kinds(T.ix, 0) & (1u << IX_PROBLEM_SIZE));
}

Test(fsck, finds_a_refcount_mismatch)
{
	unsigned s1[] = { 1 };
	commit_seeds(&T, s1, 1, NULL, "a");
	st_id l = put_page(T.s, 1);

	tamper(0, &l);
	cr_assert_eq(fsck_errors(T.ix), 1);
	cr_assert_eq(fsck_kinds(T.ix, 0), 1u << IX_PROBLEM_REFCOUNT);
}

Test(fsck, finds_a_dangling_tag)
{
	st_id ghost = { { 9, 9, 9 } };

	tamper(1, &ghost);
	cr_assert_eq(fsck_kinds(T.ix, 0), 1u << IX_PROBLEM_TAG);
}

Test(fsck, finds_a_wrong_children_list)
{
	unsigned s1[] = { 1 };
	st_id a = commit_seeds(&T, s1, 1, NULL, "a");

	tamper(2, &a);
	cr_assert_eq(fsck_kinds(T.ix, 0), 1u << IX_PROBLEM_CHILDREN);
}

Test(fsck, finds_a_damaged_snapshot_record)
{
	unsigned s1[] = { 1 };
	st_id a = commit_seeds(&T, s1, 1, NULL, "a");

	tamper(3, &a);
	unsigned k = fsck_kinds(T.ix, 0);
	cr_assert(k & (1u << IX_PROBLEM_SNAPSHOT));
}
