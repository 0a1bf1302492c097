/* test_workingset.c: working-set links: checked before they are stored, counted in refcounts, released with their snapshot, repaired when dangling. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "index/index_int.h"
#include "tests/index/helpers.h"

static struct tstore T;

static void setup(void) { ts_open(&T); }
static void teardown(void) { ts_close(&T); }

TestSuite(workingset, .init = setup, .fini = teardown, .timeout = 60);

/* A record of snapshot id touching guest pages 0 and 2 of a 3-layer snapshot. */
static void *record(const st_id *id, size_t *len)
{
	struct st_manifest *m;
	struct ix_txn *t;
	struct st_ws *ws;
	struct st_ws_run g[] = { { 0, 1 }, { 2, 1 } };
	void *buf;
	char why[ST_WHY_LEN];

	cr_assert_eq(ix_txn_begin(T.ix, &t), 0);
	cr_assert_eq(ix_snap_get(t, id, &m), 0);
	ix_txn_end(t);
	cr_assert_eq(st_ws_build(m, id, g, 2, &ws), 0);
	cr_assert_eq(ws->pages, 2);
	cr_assert_eq(st_ws_encode(ws, &buf, len, why, sizeof(why)), 0);
	st_ws_free(ws);
	st_manifest_free(m);
	return buf;
}

Test(workingset, a_link_counts_as_a_reference_until_its_snapshot_goes)
{
	unsigned seeds[] = { 1, 2, 3 };
	st_id id = commit_seeds(&T, seeds, 3, NULL, "a"), blob, got;
	size_t len;
	void *buf = record(&id, &len);
	struct ix_txn *t;
	struct st_ws *ws;
	uint64_t size;
	char why[ST_WHY_LEN];

	cr_assert_eq(ix_ws_put(T.ix, &id, buf, len, &blob, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(blob_refs(T.ix, &blob), 1);
	cr_assert_eq(ix_txn_begin(T.ix, &t), 0);
	cr_assert_eq(ix_ws_get(t, &id, &got, &size), 0);
	ix_txn_end(t);
	cr_assert(st_id_equal(&got, &blob));
	cr_assert_eq(size, len);
	cr_assert_eq(ix_ws_put(T.ix, &id, buf, len, NULL, why, sizeof(why)), 0, "linking it again changes nothing");
	cr_assert_eq(blob_refs(T.ix, &blob), 1);
	cr_assert_eq(ix_ws_load(T.ix, &id, &ws, NULL, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(ws->pages, 2);
	st_ws_free(ws);
	cr_assert_eq(fsck_errors(T.ix), 0, "fsck counts the link as the record's reference");

	cr_assert_eq(ix_snap_del(T.ix, &id), 0);
	cr_assert_eq(blob_refs(T.ix, &blob), 0, "deleting the snapshot releases its record");
	cr_assert_eq(ix_txn_begin(T.ix, &t), 0);
	cr_assert_eq(ix_ws_get(t, &id, NULL, NULL), IX_ENOTFOUND);
	ix_txn_end(t);
	cr_assert_eq(fsck_errors(T.ix), 0);
	free(buf);
}

Test(workingset, a_record_that_does_not_belong_is_refused_and_nothing_is_stored)
{
	unsigned seeds[] = { 1, 2, 3 }, other[] = { 4, 5, 6 };
	st_id a = commit_seeds(&T, seeds, 3, NULL, "a"), b = commit_seeds(&T, other, 3, NULL, "b");
	size_t len;
	uint8_t *buf = record(&a, &len);
	unsigned before = count_blob_files(T.s);
	char why[ST_WHY_LEN] = "";

	cr_assert_eq(ix_ws_put(T.ix, &b, buf, len, NULL, why, sizeof(why)), ST_EFORMAT, "a's record on b");
	cr_assert(strstr(why, "recorded on snapshot"), "%s", why);
	buf[len - 1] ^= 0x40; /* a run's page count: the total no longer matches */
	cr_assert_eq(ix_ws_put(T.ix, &a, buf, len, NULL, why, sizeof(why)), ST_EFORMAT);
	cr_assert_eq(ix_ws_put(T.ix, &a, buf, 7, NULL, why, sizeof(why)), ST_EFORMAT, "seven bytes");
	st_id none;
	memset(none.b, 9, 16);
	cr_assert_eq(ix_ws_put(T.ix, &none, buf, len, NULL, why, sizeof(why)), IX_ENOTFOUND);
	cr_assert_eq(count_blob_files(T.s), before, "nothing stored");
	cr_assert_eq(fsck_errors(T.ix), 0);
	free(buf);
}

Test(workingset, repair_removes_a_link_whose_snapshot_is_gone)
{
	unsigned seeds[] = { 1, 2, 3 };
	st_id id = commit_seeds(&T, seeds, 3, NULL, "a"), blob;
	size_t len;
	void *buf = record(&id, &len);
	char why[ST_WHY_LEN];

	cr_assert_eq(ix_ws_put(T.ix, &id, buf, len, &blob, why, sizeof(why)), 0, "%s", why);
	/* Damage: the snapshot record vanishes behind the index's back. */
	MDB_txn *txn;
	MDB_val k = { 16, id.b };
	cr_assert_eq(mdb_txn_begin(T.ix->env, NULL, 0, &txn), 0);
	cr_assert_eq(mdb_del(txn, T.ix->snaps, &k, NULL), 0);
	cr_assert_eq(mdb_txn_commit(txn), 0);
	cr_assert(fsck_kinds(T.ix, 0) & (1u << IX_PROBLEM_WORKINGSET), "fsck reports the dangling link");
	struct ix_fsck_stats st;
	cr_assert_eq(ix_fsck(T.ix, IX_FSCK_REPAIR, NULL, NULL, &st), 0);
	cr_assert_eq(fsck_errors(T.ix), 0, "clean after the repair");
	cr_assert_eq(blob_refs(T.ix, &blob), 0, "the record is an orphan gc may collect");
	free(buf);
}
