/* test_gc.c: gc (references, grace, staging files), fsck (each kind of damage), import and export. */
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

TestSuite(gc, .init = setup, .fini = teardown, .timeout = 60);
TestSuite(fsck, .init = setup, .fini = teardown, .timeout = 60);
TestSuite(import, .init = setup, .fini = teardown, .timeout = 120);

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

/* ---- import / export ---- */

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
#include "store/sys.h"

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
