/* test_import.c: import and export of snapshot directories: round trips, dedup, every refusal, a failure at any step. */
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

TestSuite(import, .init = setup, .fini = teardown, .timeout = 120);

static char src[600];

/* Export snapshot ref of T into dir. */
static void export_to(const char *ref, const char *dir)
{
	int rc = ix_export(T.ix, ref, dir);

	cr_assert_eq(rc, 0, "export: %s", ix_strerror(rc));
}

/* A second store to import into; returns the export dir of a 3-layer snapshot. */
static struct tstore U;

static void make_source(void)
{
	unsigned s1[] = { 1, 2, 3 };
	commit_seeds(&T, s1, 3, NULL, "src");
	snprintf(src, sizeof(src), "%s/snap", T.dir);
	export_to("src", src);
	ts_open(&U);
}

static void layer_path(struct st_manifest *m, unsigned i, char *buf, size_t len)
{
	char hex[ST_ID_HEX_LEN + 1];

	st_id_format(&m->layers[i].id, hex);
	snprintf(buf, len, "%s/layers/%s", src, hex);
}

/* The store U is exactly as before: no snapshot, no blob file, fsck clean. */
static void assert_unchanged(uint64_t gen0)
{
	uint64_t g;

	cr_assert_eq(ix_generation(U.ix, &g), 0);
	cr_assert_eq(g, gen0, "no index change");
	cr_assert_eq(count_blob_files(U.s), 0, "no blob left behind");
	cr_assert_eq(fsck_errors(U.ix), 0);
	cr_assert_eq(fsck_kinds(U.ix, IX_FSCK_HASH), 0);
}

/* make_source, then read the exported manifest; returns U's generation. */
static uint64_t make_source_read(struct st_manifest **m)
{
	uint64_t g;

	make_source();
	cr_assert_eq(ix_generation(U.ix, &g), 0);
	cr_assert_eq(st_snapdir_read(src, m, NULL, 0), 0);
	return g;
}

static int import_rc(char *why)
{
	return ix_import_dir(U.ix, src, "in", 0, NULL, NULL, why, ST_WHY_LEN);
}

Test(import, round_trip_between_stores)
{
	struct ix_import_stats st;
	struct st_manifest *a, *b;
	struct ix_txn *t;
	st_id id, tid;

	make_source();
	cr_assert_eq(ix_import_dir(U.ix, src, "copy", 0, &id, &st, NULL, 0), 0);
	cr_assert_eq(st.layers, 3);
	cr_assert_eq(st.layers_added, 3);
	cr_assert_eq(st.bytes_added, 3 * ST_PAGE_SIZE);
	cr_assert_not(st.existed);
	cr_assert_eq(ix_txn_begin(T.ix, &t), 0);
	cr_assert_eq(ix_tag_get(t, "src", &tid), 0);
	cr_assert_eq(ix_snap_get(t, &tid, &a), 0);
	ix_txn_end(t);
	cr_assert(st_id_equal(&id, &tid), "the id travels with the snapshot");
	cr_assert_eq(ix_txn_begin(U.ix, &t), 0);
	cr_assert_eq(ix_snap_get(t, &id, &b), 0);
	ix_txn_end(t);
	cr_assert_eq(a->nlayers, b->nlayers);
	st_manifest_free(a);
	st_manifest_free(b);
	cr_assert_eq(fsck_errors(U.ix), 0);
	ts_close(&U);
}

Test(import, is_idempotent)
{
	struct ix_import_stats st;
	uint64_t g;
	st_id a, b;

	make_source();
	cr_assert_eq(ix_import_dir(U.ix, src, "x", 0, &a, NULL, NULL, 0), 0);
	cr_assert_eq(ix_generation(U.ix, &g), 0);
	cr_assert_eq(ix_import_dir(U.ix, src, "x", 0, &b, &st, NULL, 0), 0);
	cr_assert(st_id_equal(&a, &b));
	cr_assert(st.existed);
	uint64_t g2;
	cr_assert_eq(ix_generation(U.ix, &g2), 0);
	cr_assert_eq(g2, g, "importing again changes nothing");
	st_id l = put_page(T.s, 1);
	cr_assert_eq(blob_refs(U.ix, &l), 1);
	cr_assert_eq(count_blob_files(U.s), 3);
	cr_assert_eq(fsck_errors(U.ix), 0);
	ts_close(&U);
}

Test(import, dedups_layers_already_in_the_store)
{
	struct ix_import_stats st;

	make_source();
	put_page(U.s, 2); /* one of the three layers is already there */
	cr_assert_eq(ix_import_dir(U.ix, src, NULL, 0, NULL, &st, NULL, 0), 0);
	cr_assert_eq(st.layers_added, 2);
	cr_assert_eq(count_blob_files(U.s), 3);
	ts_close(&U);
}

Test(import, rejects_a_corrupt_layer_and_leaves_the_store_unchanged)
{
	struct st_manifest *m;
	char p[800], why[ST_WHY_LEN];
	uint64_t g = make_source_read(&m);

	layer_path(m, 2, p, sizeof(p));
	cr_assert_eq(sh("chmod u+w %s && printf Z | dd of=%s bs=1 seek=7 conv=notrunc 2>/dev/null", p, p), 0);
	cr_assert_eq(import_rc(why), ST_ECORRUPT);
	cr_assert_not_null(strstr(why, "do not hash"), "why: %s", why);
	assert_unchanged(g);
	st_manifest_free(m);
	ts_close(&U);
}

Test(import, rejects_a_renamed_layer)
{
	struct st_manifest *m;
	char p[800], q[800], why[ST_WHY_LEN];
	uint64_t g = make_source_read(&m);

	layer_path(m, 1, p, sizeof(p));
	snprintf(q, sizeof(q), "%s/layers/0123456789abcdef0123456789abcdef", src);
	cr_assert_eq(rename(p, q), 0);
	cr_assert_eq(import_rc(why), -ENOENT);
	cr_assert_not_null(strstr(why, "missing"), "why: %s", why);
	assert_unchanged(g);
	/* A layer renamed to another layer's name: bytes do not match the name. */
	layer_path(m, 0, p, sizeof(p));
	layer_path(m, 1, q, sizeof(q));
	cr_assert_eq(sh("cp %s %s", p, q), 0);
	cr_assert_eq(import_rc(why), ST_ECORRUPT);
	assert_unchanged(g);
	st_manifest_free(m);
	ts_close(&U);
}

Test(import, rejects_a_truncated_layer)
{
	struct st_manifest *m;
	char p[800], why[ST_WHY_LEN];
	uint64_t g = make_source_read(&m);

	layer_path(m, 2, p, sizeof(p));
	cr_assert_eq(sh("chmod u+w %s && truncate -s 4000 %s", p, p), 0);
	cr_assert_eq(import_rc(why), ST_ELAYOUT);
	cr_assert_not_null(strstr(why, "4000 bytes"), "why: %s", why);
	assert_unchanged(g);
	st_manifest_free(m);
	ts_close(&U);
}

Test(import, rejects_a_missing_layer)
{
	struct st_manifest *m;
	char p[800], why[ST_WHY_LEN];
	uint64_t g = make_source_read(&m);

	layer_path(m, 0, p, sizeof(p));
	cr_assert_eq(unlink(p), 0);
	cr_assert_eq(import_rc(why), -ENOENT);
	assert_unchanged(g);
	st_manifest_free(m);
	ts_close(&U);
}

Test(import, rejects_bad_manifests)
{
	static const char *bad[] = {
		"",                                  /* empty */
		"{\"version\": 1, \"mem_size\": ",  /* truncated */
		"[1,2,3]",                           /* not an object */
		"{\"version\": 99}",                 /* unknown version */
		"not json at all",
	};
	char p[800], why[ST_WHY_LEN];
	uint64_t g;

	make_source();
	cr_assert_eq(ix_generation(U.ix, &g), 0);
	snprintf(p, sizeof(p), "%s/manifest.json", src);
	cr_assert_eq(sh("chmod u+w %s", p), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		FILE *f = fopen(p, "w");
		cr_assert_not_null(f);
		fputs(bad[i], f);
		fclose(f);
		int rc = import_rc(why);
		cr_assert(rc == ST_EFORMAT || rc == ST_EVERSION, "'%s' -> %d %s", bad[i], rc, ix_strerror(rc));
		assert_unchanged(g);
	}
	/* Ranges out of bounds: edit a valid manifest's mem_size down. */
	cr_assert_eq(sh("cd %s && rm -f manifest.json", src), 0);
	cr_assert_eq(import_rc(why), -ENOENT);
	assert_unchanged(g);
	ts_close(&U);
}

Test(import, a_tag_clash_leaves_the_store_unchanged)
{
	unsigned s1[] = { 40 };
	uint64_t g;

	make_source();
	commit_seeds(&U, s1, 1, NULL, "in");
	cr_assert_eq(ix_generation(U.ix, &g), 0);
	unsigned before = count_blob_files(U.s);
	cr_assert_eq(import_rc(NULL), IX_EEXIST);
	cr_assert_eq(count_blob_files(U.s), before);
	cr_assert_eq(fsck_errors(U.ix), 0);
	cr_assert_eq(ix_import_dir(U.ix, src, "in", IX_TAG_FORCE, NULL, NULL, NULL, 0), 0);
	ts_close(&U);
}

Test(import, export_refuses_an_existing_directory_and_unknown_refs)
{
	unsigned s1[] = { 1 };
	char d[600];

	commit_seeds(&T, s1, 1, NULL, "a");
	snprintf(d, sizeof(d), "%s/out", T.dir);
	cr_assert_eq(mkdir(d, 0755), 0);
	cr_assert_lt(ix_export(T.ix, "a", d), 0);
	cr_assert_eq(ix_export(T.ix, "nope", d), IX_ENOTFOUND);
}

/* The store's syscall seam: make step i of an import fail, for every i. */

Test(import, a_failure_at_any_step_leaves_the_store_unchanged)
{
	uint64_t steps, g;
	int rc;

	make_source();
	/* Count the steps of a successful import, then undo it. */
	st_sys_count_reset();
	cr_assert_eq(ix_import_dir(U.ix, src, "in", 0, NULL, NULL, NULL, 0), 0);
	steps = st_sys_calls();
	cr_assert_gt(steps, 3);
	cr_assert_eq(ix_tag_del(U.ix, "in", IX_TAG_PRUNE, NULL), 0);
	cr_assert_eq(ix_gc(U.ix, 0, NULL), 0);
	cr_assert_eq(count_blob_files(U.s), 0);

	uint64_t failures = 0;
	for (uint64_t i = 1; i <= steps; i++) {
		int errs[] = { EIO, ENOSPC };
		cr_assert_eq(ix_generation(U.ix, &g), 0);
		st_sys_fault_set(i, errs[i % 2]);
		rc = ix_import_dir(U.ix, src, "in", 0, NULL, NULL, NULL, 0);
		bool fired = st_sys_fault_fired();
		st_sys_fault_set(0, 0);
		if (rc == 0) {
			/* The failed step was one the import may survive (e.g. a retried
			 * or best-effort call): it must then be complete and consistent. */
			cr_assert_eq(fsck_errors(U.ix), 0, "step %llu", (unsigned long long)i);
			cr_assert_eq(ix_tag_del(U.ix, "in", IX_TAG_PRUNE, NULL), 0);
			cr_assert_eq(ix_gc(U.ix, 0, NULL), 0);
		} else {
			cr_assert(fired, "step %llu: failed (%s) without the injected fault", (unsigned long long)i,
				  ix_strerror(rc));
			assert_unchanged(g);
			failures++;
		}
		/* Leftover staging files of a failed step are crash debris: gc takes them. */
		cr_assert_eq(ix_gc(U.ix, 0, NULL), 0);
		cr_assert_eq(count_blob_files(U.s), 0, "step %llu", (unsigned long long)i);
	}
	cr_assert_gt(failures, steps / 2, "%llu of %llu injected faults made the import fail",
		     (unsigned long long)failures, (unsigned long long)steps);
	ts_close(&U);
}
