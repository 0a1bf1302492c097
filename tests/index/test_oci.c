/* test_oci.c: OCI layouts through the index: round trip, the sha256 table, and a failure at every step of export and import. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "index/index_int.h"
#include "index/dist/dist.h"
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
	/* b travelled as a delta of a (its config's sha256 is filed under the
	 * delta's own XXH3-128), and U stores it as one too. */
	st_id bkey;
	MDB_val rec;
	cr_assert_eq(ix_txn_begin(U.ix, &t), 0);
	cr_assert_eq(ix_snap_rec_get(U.ix, t->txn, &b, &rec), 0);
	cr_assert(ix_snap_text_is_delta(rec.mv_data, rec.mv_size), "b is stored as a delta of a");
	st_id_hash(rec.mv_data, rec.mv_size, &bkey);
	ix_txn_end(t);
	cr_assert_eq(ix_sha256_get(U.ix, &bkey, sha), 0, "the import recorded what it verified");
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

/* The manifest index.json of layout lay names first: its JSON, digest and size. */
static json_t *layout_top(const char *lay, char digest[ST_DIGEST_LEN + 1], json_int_t *size)
{
	char path[600];
	json_error_t je;

	snprintf(path, sizeof(path), "%s/index.json", lay);
	json_t *index = json_load_file(path, 0, &je);
	cr_assert_not_null(index, "%s: %s", path, je.text);
	json_t *d = json_array_get(json_object_get(index, "manifests"), 0);
	snprintf(digest, ST_DIGEST_LEN + 1, "%s", json_string_value(json_object_get(d, "digest")));
	*size = json_integer_value(json_object_get(d, "size"));
	json_decref(index);
	snprintf(path, sizeof(path), "%s/blobs/sha256/%s", lay, digest + 7);
	json_t *m = json_load_file(path, 0, &je);
	cr_assert_not_null(m, "%s: %s", path, je.text);
	return m;
}

/*
 * docs/security.md: a chain is at most 4,096 long. Export and push refuse
 * to send a longer one; an import (or pull) of a longer one, which strata
 * never writes, is refused once it has read 4,096 manifests; 4,096 pass
 * both ways. The 4,097-long layout is grafted: the top's manifest, exported
 * from a store that lacks the rest of its chain, gets the 4,096-long
 * layout's top as its subject.
 */
Test(oci, a_chain_of_4096_passes_and_one_of_4097_is_refused_by_export_and_import)
{
	enum { CHAIN = 4096 };
	static const unsigned seed[] = { 7 };
	const char *top[] = { "top" }, *over[] = { "over" };
	char lay[400], lay_over[400], lay_w[400], path[600], why[ST_WHY_LEN] = "";
	char top_digest[ST_DIGEST_LEN + 1], w_digest[ST_DIGEST_LEN + 1];
	json_int_t top_size, w_size;
	struct ix_oci_stats st;
	struct tstore W, X;
	st_id *ids = malloc((CHAIN + 1) * sizeof(*ids)), got;

	cr_assert_not_null(ids);
	for (unsigned i = 0; i <= CHAIN; i++)
		ids[i] = commit_seeds(&T, seed, 1, i ? &ids[i - 1] : NULL,
				      i == CHAIN - 1 ? "top" : i == CHAIN ? "over" : NULL);
	snprintf(lay, sizeof(lay), "%s/lay", T.dir);
	snprintf(lay_over, sizeof(lay_over), "%s/lay-over", T.dir);
	cr_assert_eq(ix_oci_export(T.ix, over, 1, lay_over, NULL, &st, why, sizeof(why)), ST_ELAYOUT,
		     "a chain of 4,097 exported: %s", why);
	cr_assert_eq(ix_oci_export(T.ix, top, 1, lay, NULL, &st, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(st.snapshots, CHAIN);

	/* W holds the last two alone: its layout's top names a subject
	 * without one; graft the 4,096-long layout's top in its place. */
	ts_open(&W);
	struct st_manifest *m = mk_manifest(W.s, seed, 1, &ids[CHAIN - 2]);
	cr_assert_eq(ix_snap_commit(W.ix, m, NULL, 0, &got), 0);
	cr_assert(st_id_equal(&got, &ids[CHAIN - 1]));
	st_manifest_free(m);
	got = commit_seeds(&W, seed, 1, &ids[CHAIN - 1], "over");
	cr_assert(st_id_equal(&got, &ids[CHAIN]));
	snprintf(lay_w, sizeof(lay_w), "%s/lay-w", W.dir);
	cr_assert_eq(ix_oci_export(W.ix, over, 1, lay_w, NULL, &st, why, sizeof(why)), 0, "%s", why);
	json_decref(layout_top(lay, top_digest, &top_size));
	json_t *om = layout_top(lay_w, w_digest, &w_size);
	json_t *subject = json_object_get(om, "subject");
	cr_assert_not_null(subject, "the top of W's layout has its parent as subject");
	json_object_set_new(subject, "digest", json_string(top_digest));
	json_object_set_new(subject, "size", json_integer(top_size));
	char *text = json_dumps(om, JSON_COMPACT);
	json_decref(om);
	uint8_t sha[ST_SHA256_LEN];
	char digest[ST_DIGEST_LEN + 1];
	st_sha256_hash(text, strlen(text), sha);
	st_digest_format(sha, digest);
	snprintf(path, sizeof(path), "%s/blobs/sha256/%s", lay, digest + 7);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
	cr_assert_eq(sh("cp -n '%s'/blobs/sha256/* '%s/blobs/sha256/'", lay_w, lay), 0);
	cr_assert_eq(sh("cp '%s/index.json' '%s/index-4096.json' && sed -i 's/%s/%s/; s/\"size\":%lld,/\"size\":%zu,/' '%s/index.json'",
			lay, T.dir, top_digest + 7, digest + 7, (long long)top_size, strlen(text), lay), 0);
	free(text);

	ts_open(&X);
	cr_assert_eq(ix_oci_import(X.ix, lay, NULL, 0, NULL, &st, &got, why, sizeof(why)), ST_ELAYOUT,
		     "a chain of 4,097 imported: %s", why);
	cr_assert(strstr(why, "longer than 4096"), "%s", why);
	cr_assert_eq(snapshots(X.ix), 0, "nothing of it was committed");
	ts_close(&X);
	cr_assert_eq(sh("cp '%s/index-4096.json' '%s/index.json'", T.dir, lay), 0);
	cr_assert_eq(ix_oci_import(U.ix, lay, NULL, 0, NULL, &st, &got, why, sizeof(why)), 0, "%s", why);
	cr_assert(st_id_equal(&got, &ids[CHAIN - 1]));
	cr_assert_eq(snapshots(U.ix), CHAIN);
	ts_close(&W);
	free(ids);
}
