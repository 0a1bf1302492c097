/* test_delta.c: snapshot records stored as manifest deltas: ids, rebuilds, the depth bound, deletes, and hostile records. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "index/index_int.h"
#include "tests/index/helpers.h"

static struct tstore T;

static void setup(void) { ts_open(&T); }
static void teardown(void) { ts_close(&T); }

TestSuite(delta, .init = setup, .fini = teardown, .timeout = 120);

#define PAGES 256

/* An image of PAGES pages, every one non-zero; version k changes pages
 * k*5 .. k*5+2 (mod PAGES) to content of its own. */
static void image(uint8_t *img, unsigned k)
{
	for (unsigned p = 0; p < PAGES; p++)
		page_fill(img + (size_t)p * ST_PAGE_SIZE, 1000 + p);
	for (unsigned j = 1; j <= k; j++)
		for (unsigned q = 0; q < 3; q++)
			page_fill(img + (size_t)((j * 5 + q) % PAGES) * ST_PAGE_SIZE, 100000 + j * 3 + q);
}

/* Ingest version k on top of parent (NULL: none) and commit it. */
static st_id commit_version(unsigned k, struct st_manifest *parent, struct st_manifest **out)
{
	uint8_t *img = malloc((size_t)PAGES * ST_PAGE_SIZE);
	struct st_manifest *m = NULL;
	st_id id;

	cr_assert(img);
	image(img, k);
	cr_assert_eq(st_ingest_image(T.s, img, (uint64_t)PAGES * ST_PAGE_SIZE, parent, &m, NULL), 0);
	m->created = 1764590400000000000ll + k; /* fixed: the same run gives the same ids */
	cr_assert_eq(ix_snap_commit(T.ix, m, NULL, 0, &id), 0);
	free(img);
	if (out)
		*out = m;
	else
		st_manifest_free(m);
	return id;
}

/* The stored record of id, copied. */
static char *record(const st_id *id, size_t *len)
{
	struct ix_txn *t;
	MDB_val v;
	char *c;

	cr_assert_eq(ix_txn_begin(T.ix, &t), 0);
	cr_assert_eq(ix_snap_rec_get(T.ix, t->txn, id, &v), 0);
	c = malloc(v.mv_size + 1);
	memcpy(c, v.mv_data, v.mv_size);
	c[v.mv_size] = '\0';
	*len = v.mv_size;
	ix_txn_end(t);
	return c;
}

static bool is_delta(const st_id *id)
{
	size_t len;
	char *r = record(id, &len);
	st_id a, b;
	bool d = st_manifest_delta_peek(r, len, &a, &b, NULL, 0) == 0;

	free(r);
	return d;
}

/* Read id back (with a fresh index handle: no cache) and check it is the
 * manifest want, byte for byte, through ix_snap_get and ix_snap_get_raw. */
static void reads_back(const st_id *id, const struct st_manifest *want)
{
	struct ix *ix;
	struct ix_txn *t;
	struct st_manifest *got;
	const void *raw;
	char *a, *b;
	size_t al, bl, rl;
	st_id h;

	cr_assert_eq(ix_open(T.s, NULL, &ix), 0);
	cr_assert_eq(ix_txn_begin(ix, &t), 0);
	cr_assert_eq(ix_snap_get(t, id, &got), 0);
	cr_assert_eq(st_manifest_encode(want, &a, &al, NULL, 0), 0);
	cr_assert_eq(st_manifest_encode(got, &b, &bl, NULL, 0), 0);
	cr_assert(al == bl && memcmp(a, b, al) == 0, "rebuilt manifest differs");
	cr_assert_eq(ix_snap_get_raw(t, id, &raw, &rl), 0);
	cr_assert(rl == al && memcmp(raw, a, al) == 0, "get_raw is not the full canonical text");
	st_id_hash(raw, rl, &h);
	cr_assert(st_id_equal(&h, id));
	ix_txn_end(t);
	ix_close(ix);
	free(a);
	free(b);
	st_manifest_free(got);
}

Test(delta, a_child_is_stored_as_a_delta_and_reads_back_whole)
{
	struct st_manifest *p, *c;
	st_id pid = commit_version(0, NULL, &p), cid = commit_version(1, p, &c);
	size_t dlen, flen;
	char *full = NULL;

	cr_assert_not(is_delta(&pid), "a snapshot without a parent is whole");
	cr_assert(is_delta(&cid), "the child is a delta");
	free(record(&cid, &dlen));
	cr_assert_eq(st_manifest_encode(c, &full, &flen, NULL, 0), 0);
	cr_assert_lt(dlen, flen);
	st_id mid;
	cr_assert_eq(st_manifest_id(c, &mid, NULL, 0), 0);
	cr_assert(st_id_equal(&mid, &cid), "the id is the hash of the full encoding");
	reads_back(&cid, c);
	cr_assert_eq(fsck_errors(T.ix), 0);
	free(full);
	st_manifest_free(p);
	st_manifest_free(c);
}

Test(delta, the_chain_is_whole_every_depth_max_records)
{
	struct st_manifest *m = NULL, *next;
	st_id ids[IX_DELTA_DEPTH_MAX * 2 + 3];
	unsigned n = IX_DELTA_DEPTH_MAX * 2 + 3, whole = 0, run = 0, longest = 0;

	for (unsigned k = 0; k < n; k++) {
		ids[k] = commit_version(k, m, &next);
		st_manifest_free(m);
		m = next;
		if (is_delta(&ids[k])) {
			run++;
		} else {
			whole++;
			run = 0;
		}
		longest = run > longest ? run : longest;
	}
	cr_assert_eq(longest, IX_DELTA_DEPTH_MAX, "runs of deltas are at most the bound (%u)", longest);
	cr_assert_eq(whole, 3, "the root and one record in each %u after it are whole (%u)", IX_DELTA_DEPTH_MAX + 1, whole);
	reads_back(&ids[n - 1], m);
	cr_assert_eq(fsck_errors(T.ix), 0);
	st_manifest_free(m);
}

Test(delta, deleting_a_parent_writes_its_children_whole)
{
	struct st_manifest *p, *c, *g;
	st_id pid = commit_version(0, NULL, &p), cid = commit_version(1, p, &c), gid = commit_version(2, c, &g);

	cr_assert(is_delta(&cid) && is_delta(&gid));
	cr_assert_eq(ix_snap_del(T.ix, &pid), 0);
	cr_assert_not(is_delta(&cid), "the child no longer needs its parent");
	cr_assert(is_delta(&gid), "the grandchild's parent is still there");
	reads_back(&cid, c);
	reads_back(&gid, g);
	cr_assert_eq(fsck_errors(T.ix), 0);
	cr_assert_eq(ix_snap_del(T.ix, &cid), 0);
	reads_back(&gid, g);
	cr_assert_eq(fsck_errors(T.ix), 0);
	st_manifest_free(p);
	st_manifest_free(c);
	st_manifest_free(g);
}

/* Records written by strata before deltas (whole, with a parent in the
 * index) are read as they are. */
struct rec_put {
	st_id key;
	const char *val;
	size_t len;
};

static int rec_put_fn(struct ix *ix, MDB_txn *txn, void *arg)
{
	struct rec_put *r = arg;
	MDB_val k = ix_val(r->key.b, 16), v = ix_val(r->val, r->len);

	return ix_mdb(mdb_put(txn, ix->snaps, &k, &v, 0));
}

static void rec_put(const st_id *key, const char *val, size_t len)
{
	struct rec_put r = { *key, val, len };
	cr_assert_eq(ix_write(T.ix, rec_put_fn, &r), 0);
}

Test(delta, whole_records_of_children_still_read)
{
	struct st_manifest *p, *c;
	st_id pid = commit_version(0, NULL, &p), cid = commit_version(1, p, &c);
	char *full;
	size_t flen;

	cr_assert_eq(st_manifest_encode(c, &full, &flen, NULL, 0), 0);
	rec_put(&cid, full, flen);
	cr_assert_not(is_delta(&cid));
	reads_back(&cid, c);
	cr_assert_eq(fsck_errors(T.ix), 0);
	(void)pid;
	free(full);
	st_manifest_free(p);
	st_manifest_free(c);
}

static int load_fresh(const st_id *id, char *why)
{
	struct ix *ix;
	struct ix_txn *t;
	struct st_manifest *m = NULL;
	int rc;

	cr_assert_eq(ix_open(T.s, NULL, &ix), 0);
	cr_assert_eq(ix_txn_begin(ix, &t), 0);
	rc = ix_snap_load_why(ix, t->txn, id, &m, NULL, why, ST_WHY_LEN);
	ix_txn_end(t);
	ix_close(ix);
	st_manifest_free(m);
	return rc;
}

Test(delta, a_delta_of_a_damaged_parent_is_refused)
{
	struct st_manifest *p, *c;
	st_id pid = commit_version(0, NULL, &p), cid = commit_version(1, p, &c);
	char why[ST_WHY_LEN] = "", hex[ST_ID_HEX_LEN + 1];

	rec_put(&pid, "x", 1);
	cr_assert_eq(load_fresh(&cid, why), IX_ECORRUPT);
	st_id_format(&pid, hex);
	cr_assert(strstr(why, "the record of snapshot") && strstr(why, hex), "%s", why);
	st_manifest_free(p);
	st_manifest_free(c);
}

static int rec_del_fn(struct ix *ix, MDB_txn *txn, void *arg)
{
	MDB_val k = ix_val(((st_id *)arg)->b, 16);

	return ix_mdb(mdb_del(txn, ix->snaps, &k, NULL));
}

Test(delta, a_delta_whose_parent_record_is_gone_names_it)
{
	struct st_manifest *p, *c;
	st_id pid = commit_version(0, NULL, &p), cid = commit_version(1, p, &c);
	char why[ST_WHY_LEN] = "", hex[ST_ID_HEX_LEN + 1];

	cr_assert_eq(ix_write(T.ix, rec_del_fn, &pid), 0);
	cr_assert_eq(load_fresh(&cid, why), IX_ECORRUPT);
	st_id_format(&pid, hex);
	cr_assert(strstr(why, "which is not in the index") && strstr(why, hex), "%s", why);
	cr_assert_gt(fsck_errors(T.ix), 0, "fsck reports it");
	st_manifest_free(p);
	st_manifest_free(c);
}

Test(delta, a_delta_that_rebuilds_another_snapshot_is_refused)
{
	struct st_manifest *p, *c, *c2;
	st_id pid = commit_version(0, NULL, &p), cid = commit_version(1, p, &c);
	char why[ST_WHY_LEN] = "", *d = NULL;
	size_t len;

	/* A valid delta of the same parent to another child, stored under
	 * cid's key with cid's id claimed: it rebuilds to another hash. */
	cr_assert_eq(st_manifest_dup(c, &c2), 0);
	c2->abi_version++;
	cr_assert_eq(st_manifest_delta_encode(p, &pid, c2, &cid, &d, &len, NULL, 0), 0);
	rec_put(&cid, d, len);
	cr_assert_eq(load_fresh(&cid, why), IX_ECORRUPT);
	cr_assert(strstr(why, "as it claims"), "%s", why);
	cr_assert_gt(fsck_errors(T.ix), 0);
	free(d);
	st_manifest_free(p);
	st_manifest_free(c);
	st_manifest_free(c2);
}

Test(delta, a_cycle_of_deltas_is_refused)
{
	struct st_manifest *p, *c;
	st_id pid = commit_version(0, NULL, &p), cid = commit_version(1, p, &c);
	char why[ST_WHY_LEN] = "", *d = NULL;
	size_t len;

	/* The parent's record made a "delta of its child": each names the
	 * other, so a walk would never reach a whole record. */
	struct st_manifest *p2;
	cr_assert_eq(st_manifest_dup(p, &p2), 0);
	p2->has_parent = true;
	p2->parent = cid;
	cr_assert_eq(st_manifest_delta_encode(c, &cid, p2, &pid, &d, &len, NULL, 0), 0);
	rec_put(&pid, d, len);
	cr_assert_eq(load_fresh(&cid, why), IX_ECORRUPT);
	cr_assert(strstr(why, "more than 32 deltas"), "%s", why);
	cr_assert_gt(fsck_errors(T.ix), 0);
	free(d);
	st_manifest_free(p2);
	st_manifest_free(p);
	st_manifest_free(c);
}

Test(delta, a_delta_of_itself_is_refused)
{
	struct st_manifest *p, *c, *c2;
	st_id pid = commit_version(0, NULL, &p), cid = commit_version(1, p, &c);
	char why[ST_WHY_LEN] = "", *d = NULL;
	size_t len;

	(void)pid;
	cr_assert_eq(st_manifest_dup(c, &c2), 0);
	c2->parent = cid;
	cr_assert_eq(st_manifest_delta_encode(c, &cid, c2, &cid, &d, &len, NULL, 0), 0);
	rec_put(&cid, d, len);
	cr_assert_eq(load_fresh(&cid, why), IX_ECORRUPT);
	cr_assert(strstr(why, "more than 32 deltas"), "%s", why);
	free(d);
	st_manifest_free(p);
	st_manifest_free(c);
	st_manifest_free(c2);
}

struct meta_ver {
	uint32_t set, got;
};

static int meta_ver_fn(struct ix *ix, MDB_txn *txn, void *arg)
{
	struct meta_ver *mv = arg;
	MDB_val k = ix_val("version", 7), v;
	uint8_t b[4] = { (uint8_t)mv->set, 0, 0, 0 };

	if (mv->set) {
		v = ix_val(b, 4);
		return ix_mdb(mdb_put(txn, ix->meta, &k, &v, 0));
	}
	int rc = ix_mdb(mdb_get(txn, ix->meta, &k, &v));
	if (rc == 0 && v.mv_size == 4)
		mv->got = ((const uint8_t *)v.mv_data)[0];
	return rc < 0 ? rc : IX_NOCHANGE;
}

static uint32_t meta_version(struct ix *ix)
{
	struct meta_ver mv = { 0, 0 };
	int rc = ix_write(ix, meta_ver_fn, &mv);

	cr_assert(rc == 0 || rc == IX_NOCHANGE, "%d", rc);
	return mv.got;
}

/* Delta records came with index format 2: a version 1 index (every record
 * whole, as an older strata wrote it) is read, and marked version 2 at its
 * first writable open, before any delta is written; an older strata then
 * refuses the index instead of taking deltas for damage. */
Test(delta, a_version_1_index_is_read_and_becomes_version_2)
{
	struct st_manifest *p;
	st_id pid = commit_version(0, NULL, &p);
	struct meta_ver set1 = { 1, 0 }, set3 = { 3, 0 };
	struct ix *ix = NULL;

	cr_assert_eq(meta_version(T.ix), IX_FORMAT_VERSION);
	cr_assert_eq(ix_write(T.ix, meta_ver_fn, &set1), 0);
	ix_close(T.ix);
	cr_assert_eq(ix_open(T.s, NULL, &T.ix), 0, "a version 1 index opens");
	cr_assert_eq(meta_version(T.ix), 2, "and is version 2 from then on");
	struct st_manifest *c;
	st_id cid = commit_version(1, p, &c);
	cr_assert(is_delta(&cid));
	reads_back(&pid, p);
	cr_assert_eq(ix_write(T.ix, meta_ver_fn, &set3), 0);
	cr_assert_eq(ix_open(T.s, NULL, &ix), IX_EVERSION, "a newer index is refused");
	cr_assert_null(ix);
	st_manifest_free(p);
	st_manifest_free(c);
	cr_assert_eq(ix_write(T.ix, meta_ver_fn, &(struct meta_ver){ 2, 0 }), 0);
}
