/* test_repair.c: fsck --repair (lost+found, refcounts, children, tags, damaged records) and healing by import. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "index/index_int.h"
#include "store/sys.h"
#include "tests/index/helpers.h"

static struct tstore T;

static void setup(void) { ts_open(&T); }
static void teardown(void) { ts_close(&T); }

TestSuite(repair, .init = setup, .fini = teardown, .timeout = 120);

/* What a repair reported: kinds seen and each action, in order. */
struct seen {
	unsigned kinds, acted;
	char actions[16][192];
	unsigned n;
};

static int seen_cb(const struct ix_problem *p, void *ctx)
{
	struct seen *s = ctx;

	s->kinds |= 1u << p->kind;
	if (p->action) {
		s->acted |= 1u << p->kind;
		if (s->n < 16)
			snprintf(s->actions[s->n++], sizeof(s->actions[0]), "%s", p->action);
	}
	return 0;
}

static bool saw_action(const struct seen *s, const char *text)
{
	for (unsigned i = 0; i < s->n; i++)
		if (strstr(s->actions[i], text))
			return true;
	return false;
}

/* Repair with hashing; returns what is left (asserts it did not fail). */
static int repair(struct seen *s, struct ix_fsck_stats *st)
{
	int rc = ix_fsck(T.ix, IX_FSCK_HASH | IX_FSCK_REPAIR, s ? seen_cb : NULL, s, st);

	cr_assert_geq(rc, 0, "repair: %s", ix_strerror(rc));
	return rc;
}

static void blob_file(const st_id *id, char *path, size_t len)
{
	cr_assert_eq(st_blob_path(T.s, id, path, len), 0);
}

/* Overwrite one byte of a blob file in place. */
static void corrupt_blob(const st_id *id, off_t at)
{
	char path[512];
	int fd;

	blob_file(id, path, sizeof(path));
	cr_assert_eq(chmod(path, 0644), 0);
	fd = open(path, O_WRONLY);
	cr_assert_geq(fd, 0);
	cr_assert_eq(pwrite(fd, "Z", 1, at), 1);
	close(fd);
}

/* Read a whole small file into buf; returns its length. */
static size_t slurp(const char *path, void *buf, size_t cap)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	cr_assert_geq(fd, 0, "open %s", path);
	n = read(fd, buf, cap);
	close(fd);
	cr_assert_geq(n, 0);
	return (size_t)n;
}

/* The one file in STORE/lost+found whose name starts with prefix (full path
 * into path); false if none. */
static bool lf_find(const char *prefix, char *path, size_t len)
{
	char dir[320];
	struct dirent *e;
	DIR *d;
	bool found = false;

	snprintf(dir, sizeof(dir), "%s/lost+found", T.path);
	if (!(d = opendir(dir)))
		return false;
	while ((e = readdir(d)) && !found) {
		if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
			int w = snprintf(path, len, "%s/%.255s", dir, e->d_name);
			cr_assert(w > 0 && (size_t)w < len);
			found = true;
		}
	}
	closedir(d);
	return found;
}

static unsigned lf_count(void)
{
	char dir[400];
	struct dirent *e;
	unsigned n = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/lost+found", T.path);
	if (!(d = opendir(dir)))
		return 0;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

struct lacking {
	st_id id;
	uint32_t missing, nlayers, n;
};

static int lacking_cb(const st_id *id, uint32_t missing, uint32_t nlayers, void *ctx)
{
	struct lacking *l = ctx;

	l->id = *id;
	l->missing = missing;
	l->nlayers = nlayers;
	l->n++;
	return 0;
}

static struct lacking lacking(void)
{
	struct lacking l = { 0 };

	cr_assert_eq(ix_snap_lacking_foreach(T.ix, lacking_cb, &l), 0);
	return l;
}

static uint64_t generation(void)
{
	uint64_t g;

	cr_assert_eq(ix_generation(T.ix, &g), 0);
	return g;
}

/* Export snapshot ref to T.dir/name; returns the path in buf. */
static void export_as(const char *ref, const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", T.dir, name);
	int rc = ix_export(T.ix, ref, buf);
	cr_assert_eq(rc, 0, "export: %s", ix_strerror(rc));
}

static uint32_t heal_from(const char *dir)
{
	struct ix_import_stats st;
	int rc = ix_import_dir(T.ix, dir, NULL, 0, NULL, &st, NULL, 0);

	cr_assert_eq(rc, 0, "import: %s", ix_strerror(rc));
	cr_assert(st.existed);
	return st.layers_healed;
}

Test(repair, a_corrupt_blob_goes_to_lost_found_and_an_import_heals_it)
{
	static uint8_t before[ST_PAGE_SIZE], kept[ST_PAGE_SIZE + 1];
	unsigned s1[] = { 1, 2 };
	st_id a = commit_seeds(&T, s1, 2, NULL, "a");
	st_id l = put_page(T.s, 2);
	char path[512], hex[ST_ID_HEX_LEN + 1], exp[400];
	struct ix_fsck_stats st;
	struct seen s = { 0 };

	export_as("a", "exp", exp, sizeof(exp));
	corrupt_blob(&l, 100);
	blob_file(&l, path, sizeof(path));
	cr_assert_eq(slurp(path, before, sizeof(before)), ST_PAGE_SIZE);
	cr_assert_eq(fsck_errors(T.ix), 1);

	cr_assert_eq(repair(&s, &st), 1, "the layer is missing until an import brings it back");
	cr_assert_eq(s.kinds, 1u << IX_PROBLEM_CORRUPT);
	cr_assert(saw_action(&s, "moved to lost+found/"), "%s", s.actions[0]);
	cr_assert_eq(st.errors, 1);
	cr_assert_eq(st.repaired, 1);
	cr_assert_eq(st.remaining, 1);
	cr_assert_not(st_blob_has(T.s, &l));
	st_id_format(&l, hex);
	cr_assert(lf_find(hex, path, sizeof(path)), "the corrupt bytes are kept in lost+found");
	cr_assert_eq(slurp(path, kept, sizeof(kept)), ST_PAGE_SIZE);
	cr_assert_eq(memcmp(kept, before, ST_PAGE_SIZE), 0, "byte for byte");
	cr_assert_eq(fsck_kinds(T.ix, IX_FSCK_HASH), 1u << IX_PROBLEM_MISSING);

	struct lacking lk = lacking();
	cr_assert_eq(lk.n, 1);
	cr_assert(st_id_equal(&lk.id, &a));
	cr_assert_eq(lk.missing, 1);
	cr_assert_eq(lk.nlayers, 2);

	cr_assert_eq(heal_from(exp), 1);
	cr_assert_eq(fsck_errors(T.ix), 0);
	cr_assert_eq(lacking().n, 0);
	cr_assert_eq(st_blob_verify(T.s, &l), 0);
	cr_assert_eq(lf_count(), 1, "lost+found keeps its copy");
}

Test(repair, a_truncated_blob_goes_to_lost_found_and_an_import_heals_it)
{
	unsigned s1[] = { 1 };
	commit_seeds(&T, s1, 1, NULL, "a");
	st_id l = put_page(T.s, 1);
	char path[512], hex[ST_ID_HEX_LEN + 1], exp[400];
	struct seen s = { 0 };
	struct stat sb;

	export_as("a", "exp", exp, sizeof(exp));
	blob_file(&l, path, sizeof(path));
	cr_assert_eq(truncate(path, 100), 0);
	cr_assert(fsck_kinds(T.ix, 0) & (1u << IX_PROBLEM_SIZE));
	cr_assert_eq(repair(&s, NULL), 1);
	cr_assert(s.acted & (1u << IX_PROBLEM_SIZE));
	st_id_format(&l, hex);
	cr_assert(lf_find(hex, path, sizeof(path)));
	cr_assert_eq(stat(path, &sb), 0);
	cr_assert_eq(sb.st_size, 100, "the short file is kept as it was");
	cr_assert_eq(heal_from(exp), 1);
	cr_assert_eq(fsck_errors(T.ix), 0);
}

Test(repair, a_deleted_blob_is_healed_by_importing_a_copy)
{
	unsigned s1[] = { 1, 2 }, s2[] = { 2, 3 };
	st_id a = commit_seeds(&T, s1, 2, NULL, "a");
	commit_seeds(&T, s2, 2, &a, "b");
	st_id shared = put_page(T.s, 2);
	char exp[400];
	struct seen s = { 0 };

	export_as("b", "exp", exp, sizeof(exp));
	cr_assert_eq(st_blob_del(T.s, &shared), 0);
	cr_assert_eq(repair(&s, NULL), 1, "a missing file cannot be repaired in place");
	cr_assert_eq(s.kinds, 1u << IX_PROBLEM_MISSING);
	cr_assert_eq(s.acted, 0, "nothing is done about it");
	cr_assert_eq(lacking().n, 2, "both snapshots using the layer lack it");
	cr_assert_eq(heal_from(exp), 1);
	cr_assert_eq(fsck_errors(T.ix), 0, "healing b's copy heals a too");
	cr_assert_eq(heal_from(exp), 0, "a second import has nothing to heal");
}

Test(repair, a_damaged_copy_heals_nothing)
{
	unsigned s1[] = { 1 };
	commit_seeds(&T, s1, 1, NULL, "a");
	st_id l = put_page(T.s, 1);
	char exp[400], path[600], hex[ST_ID_HEX_LEN + 1];

	export_as("a", "exp", exp, sizeof(exp));
	st_id_format(&l, hex);
	snprintf(path, sizeof(path), "%s/layers/%s", exp, hex);
	cr_assert_eq(sh("chmod u+w %s && printf Z | dd of=%s bs=1 seek=7 conv=notrunc 2>/dev/null", path, path), 0);
	cr_assert_eq(st_blob_del(T.s, &l), 0);
	cr_assert_lt(ix_import_dir(T.ix, exp, NULL, 0, NULL, NULL, NULL, 0), 0);
	cr_assert_not(st_blob_has(T.s, &l), "nothing stored from a copy that fails verification");
}

/* Write index records directly, as damage from outside strata would. */
struct raw_put {
	MDB_dbi which; /* 0 blobs, 1 tags, 2 children, 3 snaps */
	MDB_val k, v;
	bool del;
};

static int raw_fn(struct ix *ix, MDB_txn *txn, void *arg)
{
	struct raw_put *r = arg;
	MDB_dbi dbi[] = { ix->blobs, ix->tags, ix->children, ix->snaps };

	if (r->del)
		return mdb_del(txn, dbi[r->which], &r->k, NULL);
	return mdb_put(txn, dbi[r->which], &r->k, &r->v, 0);
}

static void raw_put(unsigned which, const void *k, size_t klen, const void *v, size_t vlen)
{
	struct raw_put r = { .which = which, .k = ix_val(k, klen), .v = ix_val(v, vlen) };

	cr_assert_eq(ix_write(T.ix, raw_fn, &r), 0);
}

static void raw_del(unsigned which, const void *k, size_t klen)
{
	struct raw_put r = { .which = which, .k = ix_val(k, klen), .del = true };

	cr_assert_eq(ix_write(T.ix, raw_fn, &r), 0);
}

/* A blob record {size, refs} in the index's little-endian layout. */
static void blob_rec_bytes(uint8_t out[16], uint64_t size, uint64_t refs)
{
	for (int b = 0; b < 8; b++) {
		out[b] = (uint8_t)(size >> (8 * b));
		out[8 + b] = (uint8_t)(refs >> (8 * b));
	}
}

Test(repair, broken_refcount_records_are_rewritten_from_the_snapshots)
{
	unsigned s1[] = { 1, 2 }, s2[] = { 2 };
	commit_seeds(&T, s1, 2, NULL, "a");
	commit_seeds(&T, s2, 1, NULL, "b");
	st_id l1 = put_page(T.s, 1), l2 = put_page(T.s, 2), loose = put_page(T.s, 77);
	uint8_t rec[16];
	struct seen s = { 0 };
	struct ix_fsck_stats st;

	blob_rec_bytes(rec, ST_PAGE_SIZE, 7);
	raw_put(0, l2.b, 16, rec, 16);           /* refcount 7, used by 2 */
	raw_del(0, l1.b, 16);                    /* no record, used by 1 */
	blob_rec_bytes(rec, ST_PAGE_SIZE, 1);
	raw_put(0, loose.b, 16, rec, 16);        /* a record nothing uses */
	raw_put(0, "short", 5, rec, 16);         /* a malformed key */
	cr_assert_eq(fsck_kinds(T.ix, 0) & ~(1u << IX_PROBLEM_ORPHAN), 1u << IX_PROBLEM_REFCOUNT);

	cr_assert_eq(repair(&s, &st), 0);
	cr_assert(saw_action(&s, "refcount set to 2"));
	cr_assert(saw_action(&s, "record added, refcount 1"));
	cr_assert(saw_action(&s, "record removed"));
	cr_assert(saw_action(&s, "malformed record removed"));
	cr_assert_eq(st.repaired, 4);
	cr_assert_eq(blob_refs(T.ix, &l2), 2);
	cr_assert_eq(blob_refs(T.ix, &l1), 1);
	cr_assert_eq(blob_refs(T.ix, &loose), 0);
	cr_assert_eq(fsck_errors(T.ix), 0);
	cr_assert(st_blob_has(T.s, &loose), "repair deletes no blob file; gc may");
	cr_assert_eq(lf_count(), 0, "index repairs need no lost+found");
}

Test(repair, a_wrong_size_in_the_record_is_fixed_and_the_good_file_stays)
{
	unsigned s1[] = { 1 };
	commit_seeds(&T, s1, 1, NULL, "a");
	st_id l = put_page(T.s, 1);
	uint8_t rec[16];
	struct seen s = { 0 };

	blob_rec_bytes(rec, 3 * ST_PAGE_SIZE, 1);
	raw_put(0, l.b, 16, rec, 16);
	cr_assert_eq(fsck_kinds(T.ix, 0), 1u << IX_PROBLEM_SIZE);
	cr_assert_eq(repair(&s, NULL), 0);
	cr_assert(saw_action(&s, "size set to 4096"), "%s", s.actions[0]);
	cr_assert_eq(lf_count(), 0, "a file that hashes to its name is not moved");
	cr_assert_eq(st_blob_verify(T.s, &l), 0);
	cr_assert_eq(fsck_errors(T.ix), 0);
}

Test(repair, dangling_and_misnamed_tags_are_removed_and_good_ones_stay)
{
	unsigned s1[] = { 1 };
	st_id a = commit_seeds(&T, s1, 1, NULL, "a");
	st_id ghost = { { 9, 9, 9 } };
	struct seen s = { 0 };
	st_id got;
	struct ix_txn *t;

	raw_put(1, "ghost", 5, ghost.b, 16);
	raw_put(1, "bad/name", 8, a.b, 16);
	raw_put(1, "short-value", 11, "xy", 2);
	cr_assert_eq(fsck_kinds(T.ix, 0), 1u << IX_PROBLEM_TAG);
	cr_assert_eq(repair(&s, NULL), 0);
	cr_assert_eq(s.n, 3);
	cr_assert(saw_action(&s, "tag removed"));
	cr_assert_eq(ix_txn_begin(T.ix, &t), 0);
	cr_assert_eq(ix_tag_get(t, "a", &got), 0);
	cr_assert(st_id_equal(&got, &a));
	cr_assert_eq(ix_tag_get(t, "ghost", &got), IX_ENOTFOUND);
	ix_txn_end(t);
	cr_assert_eq(fsck_errors(T.ix), 0);
}

Test(repair, children_lists_are_rebuilt_from_the_parents)
{
	unsigned s1[] = { 1 }, s2[] = { 2 }, s3[] = { 3 };
	st_id a = commit_seeds(&T, s1, 1, NULL, "a");
	st_id b = commit_seeds(&T, s2, 1, &a, "b");
	st_id c = commit_seeds(&T, s3, 1, &b, "c");
	struct seen s = { 0 };

	raw_del(2, a.b, 16);                      /* b drops out of a's list */
	raw_put(2, c.b, 16, a.b, 16);             /* a listed as c's child */
	cr_assert_eq(fsck_kinds(T.ix, 0), 1u << IX_PROBLEM_CHILDREN);
	cr_assert_eq(repair(&s, NULL), 0);
	cr_assert(saw_action(&s, "children lists rebuilt"));
	cr_assert_eq(fsck_errors(T.ix), 0);
}

/* A record stored as a delta needs its parent's: damage to the parent's
 * record is damage to it too, named and repaired like its own. */
Test(repair, a_delta_child_of_a_damaged_record_is_reported_and_saved_too)
{
	unsigned s1[] = { 1, 2 }, s2[] = { 2, 3 };
	st_id a = commit_seeds(&T, s1, 2, NULL, "a");
	st_id b = commit_seeds(&T, s2, 2, &a, "b");
	struct seen s = { 0 };
	struct ix_txn *t;
	MDB_val rec;
	char hex[ST_ID_HEX_LEN + 1], want[64], path[600];

	cr_assert_eq(ix_txn_begin(T.ix, &t), 0);
	cr_assert_eq(ix_snap_rec_get(T.ix, t->txn, &b, &rec), 0);
	cr_assert(ix_snap_text_is_delta(rec.mv_data, rec.mv_size), "b is stored as a delta of a");
	ix_txn_end(t);
	raw_put(3, a.b, 16, "{\"not\":\"a manifest\"}", 20);
	cr_assert_geq(fsck_errors(T.ix), 2, "a, and b which is rebuilt from it");
	cr_assert_eq(repair(&s, NULL), 0);
	st_id_format(&b, hex);
	snprintf(want, sizeof(want), "%s.record", hex);
	cr_assert(lf_find(want, path, sizeof(path)), "b's delta is kept in lost+found");
	cr_assert_eq(ix_txn_begin(T.ix, &t), 0);
	cr_assert_not(ix_snap_has(t, &a));
	cr_assert_not(ix_snap_has(t, &b));
	ix_txn_end(t);
	cr_assert_eq(fsck_errors(T.ix), 0);
}

Test(repair, a_damaged_snapshot_record_is_saved_then_removed_with_its_tags)
{
	unsigned s1[] = { 1, 2 }, s2[] = { 2, 3 };
	st_id a = commit_seeds(&T, s1, 2, NULL, "a");
	st_id b = commit_seeds(&T, s2, 2, &a, "b");
	st_id l1 = put_page(T.s, 1), l2 = put_page(T.s, 2);
	char hex[ST_ID_HEX_LEN + 1], path[600], buf[64];
	struct seen s = { 0 };
	struct ix_txn *t;
	st_id got;

	cr_assert_eq(ix_tag_set(T.ix, "a2", &a, 0), 0);
	/* b stored whole (as strata wrote every record before deltas): it
	 * needs nothing of a's record. */
	const void *raw;
	size_t rl;
	cr_assert_eq(ix_txn_begin(T.ix, &t), 0);
	cr_assert_eq(ix_snap_get_raw(t, &b, &raw, &rl), 0);
	char *whole = malloc(rl);
	memcpy(whole, raw, rl);
	ix_txn_end(t);
	raw_put(3, b.b, 16, whole, rl);
	free(whole);
	raw_put(3, a.b, 16, "{\"not\":\"a manifest\"}", 20);
	cr_assert(fsck_kinds(T.ix, 0) & (1u << IX_PROBLEM_SNAPSHOT));

	cr_assert_eq(repair(&s, NULL), 0, "left consistent: b keeps working without its parent");
	st_id_format(&a, hex);
	char want[64];
	snprintf(want, sizeof(want), "%s.record", hex);
	cr_assert(lf_find(want, path, sizeof(path)));
	cr_assert_eq(slurp(path, buf, sizeof(buf)), 20);
	cr_assert_eq(memcmp(buf, "{\"not\":\"a manifest\"}", 20), 0, "the record's bytes are kept");
	cr_assert(saw_action(&s, "removed from the index"));
	cr_assert(saw_action(&s, "tag removed"));
	cr_assert_eq(ix_txn_begin(T.ix, &t), 0);
	cr_assert_not(ix_snap_has(t, &a));
	cr_assert(ix_snap_has(t, &b));
	cr_assert_eq(ix_tag_get(t, "a", &got), IX_ENOTFOUND);
	cr_assert_eq(ix_tag_get(t, "a2", &got), IX_ENOTFOUND);
	ix_txn_end(t);
	cr_assert_eq(blob_refs(T.ix, &l1), 0, "refcounts follow the snapshots left");
	cr_assert_eq(blob_refs(T.ix, &l2), 1);
	cr_assert(st_blob_has(T.s, &l1), "its layer stays until gc");
	cr_assert_eq(fsck_errors(T.ix), 0);
}

Test(repair, is_idempotent_and_changes_nothing_in_a_healthy_store)
{
	unsigned s1[] = { 1, 2 };
	st_id a = commit_seeds(&T, s1, 2, NULL, "a");
	st_id l = put_page(T.s, 1), ghost = { { 5 } };
	struct ix_fsck_stats st;
	struct seen s = { 0 };
	uint64_t g;

	put_page(T.s, 60); /* an orphan: not an error, left for gc */
	g = generation();
	cr_assert_eq(repair(&s, &st), 0);
	cr_assert_eq(st.errors, 0);
	cr_assert_eq(s.acted, 0);
	cr_assert_eq(generation(), g, "no write on a healthy store");
	cr_assert_eq(lf_count(), 0);
	cr_assert_eq(count_blob_files(T.s), 3);

	corrupt_blob(&l, 9);
	raw_put(1, "ghost", 5, ghost.b, 16);
	cr_assert_eq(repair(NULL, NULL), 1);
	g = generation();
	unsigned files = lf_count();
	memset(&s, 0, sizeof(s));
	cr_assert_eq(repair(&s, &st), 1, "the missing layer is still reported");
	cr_assert_eq(s.acted, 0, "a second run does nothing");
	cr_assert_eq(st.repaired, 0);
	cr_assert_eq(generation(), g);
	cr_assert_eq(lf_count(), files);
	(void)a;
}

Test(repair, a_read_only_index_refuses_to_repair)
{
	struct ix_opts o = { .flags = IX_OPEN_RDONLY };
	struct ix *ro;

	cr_assert_eq(ix_open(T.s, &o, &ro), 0);
	cr_assert_eq(ix_fsck(ro, IX_FSCK_REPAIR, NULL, NULL, NULL), ST_EREADONLY);
	ix_close(ro);
}

/* ---- a failure at any step ---- */

static uint8_t corrupt_page[ST_PAGE_SIZE];

/* A fresh store with one of each damage repair handles: a corrupt blob,
 * a wrong refcount, a dangling tag, a damaged snapshot record. */
static void damaged_store(st_id *bad_blob, st_id *bad_snap)
{
	unsigned s1[] = { 1, 2 }, s2[] = { 3 }, s3[] = { 4 };
	char path[512];
	uint8_t rec[16];
	st_id ghost = { { 7 } };

	ts_close(&T);
	ts_open(&T);
	commit_seeds(&T, s1, 2, NULL, "a");
	commit_seeds(&T, s2, 1, NULL, "b");
	*bad_snap = commit_seeds(&T, s3, 1, NULL, "c");
	*bad_blob = put_page(T.s, 2);
	corrupt_blob(bad_blob, 11);
	blob_file(bad_blob, path, sizeof(path));
	slurp(path, corrupt_page, sizeof(corrupt_page));
	st_id l3 = put_page(T.s, 3);
	blob_rec_bytes(rec, ST_PAGE_SIZE, 3);
	raw_put(0, l3.b, 16, rec, 16);
	raw_put(1, "ghost", 5, ghost.b, 16);
	raw_put(3, bad_snap->b, 16, "[]", 2);
}

/* The corrupt blob's bytes are somewhere: in blobs/ or in lost+found. */
static void assert_blob_bytes_kept(const st_id *id, uint64_t step)
{
	static uint8_t buf[ST_PAGE_SIZE + 1];
	char path[600], hex[ST_ID_HEX_LEN + 1];

	st_id_format(id, hex);
	if (!lf_find(hex, path, sizeof(path)))
		blob_file(id, path, sizeof(path));
	cr_assert_eq(slurp(path, buf, sizeof(buf)), ST_PAGE_SIZE, "step %llu", (unsigned long long)step);
	cr_assert_eq(memcmp(buf, corrupt_page, ST_PAGE_SIZE), 0, "step %llu", (unsigned long long)step);
}

/* The damaged record is in the index or saved whole in lost+found. */
static void assert_record_kept(const st_id *id, uint64_t step)
{
	char path[600], hex[ST_ID_HEX_LEN + 1], want[64], buf[8];
	const void *raw;
	size_t len;
	struct ix_txn *t;
	int rc;

	cr_assert_eq(ix_txn_begin(T.ix, &t), 0);
	rc = ix_snap_get_raw(t, id, &raw, &len);
	ix_txn_end(t);
	if (rc == 0)
		return;
	st_id_format(id, hex);
	snprintf(want, sizeof(want), "%s.record", hex);
	cr_assert(lf_find(want, path, sizeof(path)), "step %llu: the record is nowhere", (unsigned long long)step);
	cr_assert_eq(slurp(path, buf, sizeof(buf)), 2, "step %llu", (unsigned long long)step);
}

Test(repair, a_failure_at_any_step_leaves_the_store_no_worse_and_a_rerun_completes)
{
	st_id bad_blob, bad_snap;
	uint64_t steps;
	int errors;

	damaged_store(&bad_blob, &bad_snap);
	errors = fsck_errors(T.ix);
	cr_assert_geq(errors, 4);
	st_sys_count_reset();
	cr_assert_eq(repair(NULL, NULL), 1);
	steps = st_sys_calls();
	cr_assert_gt(steps, 10);

	uint64_t failures = 0;
	for (uint64_t i = 1; i <= steps; i++) {
		int errs[] = { EIO, ENOSPC };
		damaged_store(&bad_blob, &bad_snap);
		st_sys_fault_set(i, errs[i % 2]);
		int rc = ix_fsck(T.ix, IX_FSCK_HASH | IX_FSCK_REPAIR, NULL, NULL, NULL);
		bool fired = st_sys_fault_fired();
		st_sys_fault_set(0, 0);
		if (rc < 0) {
			cr_assert(fired, "step %llu: failed (%s) without the injected fault", (unsigned long long)i,
				  ix_strerror(rc));
			failures++;
		}
		cr_assert_leq(fsck_errors(T.ix), errors, "step %llu: the store got worse", (unsigned long long)i);
		assert_blob_bytes_kept(&bad_blob, i);
		assert_record_kept(&bad_snap, i);
		cr_assert_eq(repair(NULL, NULL), 1, "step %llu: a rerun completes", (unsigned long long)i);
		cr_assert_eq(fsck_kinds(T.ix, IX_FSCK_HASH) & ~(1u << IX_PROBLEM_ORPHAN), 1u << IX_PROBLEM_MISSING,
			     "step %llu", (unsigned long long)i);
		assert_blob_bytes_kept(&bad_blob, i);
		assert_record_kept(&bad_snap, i);
	}
	cr_assert_gt(failures, steps / 2, "%llu of %llu injected faults made the repair fail",
		     (unsigned long long)failures, (unsigned long long)steps);
}
