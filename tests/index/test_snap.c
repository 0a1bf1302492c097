/* test_snap.c: snapshot records: commit, get, delete, refcounts, children, tags, generation. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/index/helpers.h"

static struct tstore T;

static void setup(void) { ts_open(&T); }
static void teardown(void) { ts_close(&T); }

TestSuite(snap, .init = setup, .fini = teardown, .timeout = 60);

static uint64_t gen(void)
{
	uint64_t g;

	cr_assert_eq(ix_generation(T.ix, &g), 0);
	return g;
}

Test(snap, commit_then_get_returns_the_same_manifest)
{
	unsigned seeds[] = { 1, 2, 3 };
	struct st_manifest *m = mk_manifest(T.s, seeds, 3, NULL), *got;
	struct ix_txn *t;
	char *a, *b;
	size_t al, bl;
	st_id id, want;

	cr_assert_eq(st_manifest_id(m, &want, NULL, 0), 0);
	cr_assert_eq(ix_snap_commit(T.ix, m, "base", 0, &id), 0);
	cr_assert(st_id_equal(&id, &want), "the snapshot id is the hash of the canonical manifest");
	cr_assert_eq(ix_txn_begin(T.ix, &t), 0);
	cr_assert(ix_snap_has(t, &id));
	cr_assert_eq(ix_snap_get(t, &id, &got), 0);
	cr_assert_eq(st_manifest_encode(m, &a, &al, NULL, 0), 0);
	cr_assert_eq(st_manifest_encode(got, &b, &bl, NULL, 0), 0);
	cr_assert_eq(al, bl);
	cr_assert_eq(memcmp(a, b, al), 0);
	const void *raw;
	size_t rl;
	cr_assert_eq(ix_snap_get_raw(t, &id, &raw, &rl), 0);
	cr_assert_eq(rl, al);
	cr_assert_eq(memcmp(raw, a, al), 0);
	ix_txn_end(t);
	free(a);
	free(b);
	st_manifest_free(m);
	st_manifest_free(got);
	for (unsigned i = 0; i < 3; i++) {
		st_id l = put_page(T.s, seeds[i]);
		cr_assert_eq(blob_refs(T.ix, &l), 1);
	}
	cr_assert_eq(fsck_errors(T.ix), 0);
}

Test(snap, commit_is_idempotent)
{
	unsigned seeds[] = { 7 };
	st_id a = commit_seeds(&T, seeds, 1, NULL, NULL);
	uint64_t g = gen();
	st_id b = commit_seeds(&T, seeds, 1, NULL, NULL);
	st_id l = put_page(T.s, 7);

	cr_assert(st_id_equal(&a, &b));
	cr_assert_eq(blob_refs(T.ix, &l), 1, "a second commit must not count the layer twice");
	cr_assert_eq(gen(), g, "a no-op commit changes nothing, not even the generation");
	cr_assert_eq(fsck_errors(T.ix), 0);
}

Test(snap, commit_refuses_a_manifest_whose_blob_is_missing)
{
	unsigned seeds[] = { 1, 2 };
	struct st_manifest *m = mk_manifest(T.s, seeds, 2, NULL);
	struct ix_txn *t;
	st_id id;

	cr_assert_eq(st_blob_del(T.s, &m->layers[1].id), 0);
	cr_assert_eq(ix_snap_commit(T.ix, m, "x", 0, &id), IX_EMISSING);
	cr_assert_eq(st_manifest_id(m, &id, NULL, 0), 0);
	cr_assert_eq(ix_txn_begin(T.ix, &t), 0);
	cr_assert_not(ix_snap_has(t, &id), "nothing of a failed commit is visible");
	cr_assert_eq(ix_tag_get(t, "x", &id), IX_ENOTFOUND);
	ix_txn_end(t);
	cr_assert_eq(blob_refs(T.ix, &m->layers[0].id), 0);
	st_manifest_free(m);
}

Test(snap, commit_refuses_an_invalid_manifest)
{
	unsigned seeds[] = { 1, 2 };
	struct st_manifest *m = mk_manifest(T.s, seeds, 2, NULL);

	m->ranges[1].gpage = 0; /* overlaps range 0 */
	cr_assert_lt(ix_snap_commit(T.ix, m, NULL, 0, NULL), 0);
	st_manifest_free(m);
	cr_assert_eq(fsck_errors(T.ix), 0);
}

Test(snap, shared_layers_are_refcounted_and_unique_bytes_follow)
{
	unsigned s1[] = { 1, 2 }, s2[] = { 1, 3 };
	st_id a = commit_seeds(&T, s1, 2, NULL, "a");
	st_id b = commit_seeds(&T, s2, 2, NULL, "b");
	st_id shared = put_page(T.s, 1);
	struct ix_snap_info info;
	struct ix_txn *t;

	cr_assert_eq(blob_refs(T.ix, &shared), 2);
	cr_assert_eq(ix_txn_begin(T.ix, &t), 0);
	cr_assert_eq(ix_snap_info(t, &a, &info), 0);
	ix_txn_end(t);
	cr_assert_eq(info.stored_bytes, 2 * ST_PAGE_SIZE);
	cr_assert_eq(info.unique_bytes, ST_PAGE_SIZE, "only layer 2 is a's alone");
	cr_assert_eq(info.mem_size, 2 * ST_PAGE_SIZE);

	cr_assert_eq(ix_snap_del(T.ix, &a), 0);
	cr_assert_eq(blob_refs(T.ix, &shared), 1);
	cr_assert_eq(ix_txn_begin(T.ix, &t), 0);
	cr_assert_eq(ix_snap_info(t, &b, &info), 0);
	ix_txn_end(t);
	cr_assert_eq(info.unique_bytes, 2 * ST_PAGE_SIZE);
	cr_assert_eq(fsck_errors(T.ix), 0);
}

Test(snap, delete_removes_tags_children_and_refs_but_keeps_children_working)
{
	unsigned s1[] = { 1 }, s2[] = { 1, 2 };
	st_id p = commit_seeds(&T, s1, 1, NULL, "parent");
	st_id c = commit_seeds(&T, s2, 2, &p, "child");
	struct ix_txn *t;
	st_id got;

	cr_assert_eq(ix_tag_set(T.ix, "parent2", &p, 0), 0);
	cr_assert_eq(ix_snap_del(T.ix, &p), 0);
	cr_assert_eq(ix_snap_del(T.ix, &p), IX_ENOTFOUND);
	cr_assert_eq(ix_txn_begin(T.ix, &t), 0);
	cr_assert_not(ix_snap_has(t, &p));
	cr_assert_eq(ix_tag_get(t, "parent", &got), IX_ENOTFOUND);
	cr_assert_eq(ix_tag_get(t, "parent2", &got), IX_ENOTFOUND);
	cr_assert_eq(ix_tag_get(t, "child", &got), 0);
	cr_assert(st_id_equal(&got, &c));
	ix_txn_end(t);
	st_id l1 = put_page(T.s, 1);
	cr_assert_eq(blob_refs(T.ix, &l1), 1, "the child still holds the shared layer");
	cr_assert_eq(fsck_errors(T.ix), 0);
}

static int collect(const st_id *id, void *ctx)
{
	st_id *v = ctx;
	unsigned n = 0;

	while (!st_id_equal(&v[n], &(st_id){ 0 }))
		n++;
	v[n] = *id;
	return 0;
}

Test(snap, children_are_listed_and_leave_with_their_snapshot)
{
	unsigned s0[] = { 1 }, s1[] = { 2 }, s2[] = { 3 };
	st_id p = commit_seeds(&T, s0, 1, NULL, NULL);
	st_id a = commit_seeds(&T, s1, 1, &p, NULL);
	st_id b = commit_seeds(&T, s2, 1, &p, NULL);
	st_id kids[4] = { 0 };
	struct ix_txn *t;

	cr_assert_eq(ix_txn_begin(T.ix, &t), 0);
	cr_assert_eq(ix_children_foreach(t, &p, collect, kids), 0);
	ix_txn_end(t);
	cr_assert((st_id_equal(&kids[0], &a) && st_id_equal(&kids[1], &b)) ||
		  (st_id_equal(&kids[0], &b) && st_id_equal(&kids[1], &a)));
	cr_assert(st_id_equal(&kids[2], &(st_id){ 0 }));
	cr_assert_eq(ix_snap_del(T.ix, &a), 0);
	memset(kids, 0, sizeof(kids));
	cr_assert_eq(ix_txn_begin(T.ix, &t), 0);
	cr_assert_eq(ix_children_foreach(t, &p, collect, kids), 0);
	ix_txn_end(t);
	cr_assert(st_id_equal(&kids[0], &b));
	cr_assert(st_id_equal(&kids[1], &(st_id){ 0 }));
	cr_assert_eq(fsck_errors(T.ix), 0);
}

Test(snap, tags_set_get_move_rename_and_delete)
{
	unsigned s1[] = { 1 }, s2[] = { 2 };
	st_id a = commit_seeds(&T, s1, 1, NULL, "web-1");
	st_id b = commit_seeds(&T, s2, 1, NULL, NULL);
	struct ix_txn *t;
	st_id got;

	cr_assert_eq(ix_tag_set(T.ix, "web-1", &b, 0), IX_EEXIST, "a tag is not moved silently");
	cr_assert_eq(ix_tag_set(T.ix, "web-1", &a, 0), 0, "re-setting the same target is fine");
	cr_assert_eq(ix_tag_set(T.ix, "web-1", &b, IX_TAG_FORCE), 0);
	cr_assert_eq(ix_txn_begin(T.ix, &t), 0);
	cr_assert_eq(ix_tag_get(t, "web-1", &got), 0);
	cr_assert(st_id_equal(&got, &b));
	ix_txn_end(t);

	cr_assert_eq(ix_tag_set(T.ix, "other", &a, 0), 0);
	cr_assert_eq(ix_tag_rename(T.ix, "web-1", "other", 0), IX_EEXIST);
	cr_assert_eq(ix_tag_rename(T.ix, "web-1", "web-2", 0), 0);
	cr_assert_eq(ix_tag_rename(T.ix, "web-1", "web-3", 0), IX_ENOTFOUND);
	cr_assert_eq(ix_txn_begin(T.ix, &t), 0);
	cr_assert_eq(ix_tag_get(t, "web-1", &got), IX_ENOTFOUND);
	cr_assert_eq(ix_tag_get(t, "web-2", &got), 0);
	cr_assert(st_id_equal(&got, &b));
	ix_txn_end(t);

	cr_assert_eq(ix_tag_del(T.ix, "web-2", 0, NULL), 0);
	cr_assert_eq(ix_tag_del(T.ix, "web-2", 0, NULL), IX_ENOTFOUND);
	cr_assert_eq(ix_txn_begin(T.ix, &t), 0);
	cr_assert(ix_snap_has(t, &b), "removing a tag alone keeps the snapshot");
	ix_txn_end(t);
	cr_assert_eq(fsck_errors(T.ix), 0);
}

Test(snap, tag_on_a_missing_snapshot_is_refused)
{
	st_id none = { { 1, 2, 3 } };

	cr_assert_eq(ix_tag_set(T.ix, "x", &none, 0), IX_ENOTFOUND);
}

Test(snap, tag_delete_with_prune_removes_the_snapshot_only_when_no_other_tag_names_it)
{
	unsigned s1[] = { 1 };
	st_id a = commit_seeds(&T, s1, 1, NULL, "one");
	struct ix_txn *t;
	bool pruned = true;

	cr_assert_eq(ix_tag_set(T.ix, "two", &a, 0), 0);
	cr_assert_eq(ix_tag_del(T.ix, "one", IX_TAG_PRUNE, &pruned), 0);
	cr_assert_not(pruned);
	cr_assert_eq(ix_tag_del(T.ix, "two", IX_TAG_PRUNE, &pruned), 0);
	cr_assert(pruned);
	cr_assert_eq(ix_txn_begin(T.ix, &t), 0);
	cr_assert_not(ix_snap_has(t, &a));
	ix_txn_end(t);
	st_id l = put_page(T.s, 1);
	cr_assert_eq(blob_refs(T.ix, &l), 0);
	cr_assert_eq(fsck_errors(T.ix), 0);
}

Test(snap, bad_tag_names_are_refused)
{
	unsigned s1[] = { 1 };
	st_id a = commit_seeds(&T, s1, 1, NULL, NULL);
	char longname[200];
	const char *bad[] = { "a/b", "..", ".", "-x", "", "a b", "../etc", longname };

	memset(longname, 'a', 129);
	longname[129] = '\0';
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(ix_tag_set(T.ix, bad[i], &a, 0), ST_EBADNAME, "'%s'", bad[i]);
		unsigned s[] = { 5 };
		struct st_manifest *m = mk_manifest(T.s, s, 1, NULL);
		cr_assert_eq(ix_snap_commit(T.ix, m, bad[i], 0, NULL), ST_EBADNAME);
		st_manifest_free(m);
	}
	longname[128] = '\0';
	cr_assert_eq(ix_tag_set(T.ix, longname, &a, 0), 0, "128 characters is the limit, inclusive");
}

Test(snap, resolve_takes_an_id_or_a_tag)
{
	unsigned s1[] = { 1 };
	st_id a = commit_seeds(&T, s1, 1, NULL, "base");
	char hex[ST_ID_HEX_LEN + 1];
	struct ix_txn *t;
	st_id got;

	st_id_format(&a, hex);
	cr_assert_eq(ix_txn_begin(T.ix, &t), 0);
	cr_assert_eq(ix_resolve(t, hex, &got), 0);
	cr_assert(st_id_equal(&got, &a));
	cr_assert_eq(ix_resolve(t, "base", &got), 0);
	cr_assert(st_id_equal(&got, &a));
	cr_assert_eq(ix_resolve(t, "nope", &got), IX_ENOTFOUND);
	cr_assert_eq(ix_resolve(t, "00000000000000000000000000000000", &got), IX_ENOTFOUND);
	cr_assert_eq(ix_resolve(t, "a/b", &got), ST_EBADNAME);
	ix_txn_end(t);
}

Test(snap, resolve_takes_a_unique_id_prefix)
{
	unsigned s1[] = { 1 };
	st_id a = commit_seeds(&T, s1, 1, NULL, NULL);
	char hex[ST_ID_HEX_LEN + 1], pre[ST_ID_HEX_LEN + 1];
	struct ix_txn *t;
	st_id got;

	st_id_format(&a, hex);
	cr_assert_eq(ix_txn_begin(T.ix, &t), 0);
	snprintf(pre, sizeof(pre), "%.*s", IX_ID_PREFIX_MIN, hex);
	cr_assert_eq(ix_resolve(t, pre, &got), 0, "a %d-digit prefix resolves", IX_ID_PREFIX_MIN);
	cr_assert(st_id_equal(&got, &a));
	snprintf(pre, sizeof(pre), "%.*s", IX_ID_PREFIX_MIN - 1, hex);
	cr_assert_eq(ix_resolve(t, pre, &got), IX_ENOTFOUND, "shorter prefixes are not ids");
	snprintf(pre, sizeof(pre), "%.*s", ST_ID_HEX_LEN - 1, hex);
	cr_assert_eq(ix_resolve(t, pre, &got), 0);
	ix_txn_end(t);
	/* A tag spelled like a prefix wins over the prefix. */
	snprintf(pre, sizeof(pre), "%.*s", IX_ID_PREFIX_MIN, hex);
	unsigned s2[] = { 2 };
	st_id b = commit_seeds(&T, s2, 1, NULL, pre);
	cr_assert_eq(ix_txn_begin(T.ix, &t), 0);
	cr_assert_eq(ix_resolve(t, pre, &got), 0);
	cr_assert(st_id_equal(&got, &b));
	ix_txn_end(t);
}

/* Two snapshots whose ids share IX_ID_PREFIX_MIN hex digits: that prefix is
 * ambiguous, a longer one is not. Snapshots differing only in their creation
 * time are committed until two collide (~5,000 by the birthday bound). */
Test(snap, an_ambiguous_prefix_is_refused)
{
	unsigned seeds[] = { 7 };
	struct st_manifest *m = mk_manifest(T.s, seeds, 1, NULL);
	enum { LIMIT = 60000 };
	char (*seen)[IX_ID_PREFIX_MIN + 1] = calloc(LIMIT, sizeof(*seen));
	char hex[ST_ID_HEX_LEN + 1], other[ST_ID_HEX_LEN + 1] = "";
	st_id id, got;
	unsigned n;

	cr_assert_not_null(seen);
	for (n = 0; n < LIMIT && !other[0]; n++) {
		m->created = (int64_t)n + 1;
		cr_assert_eq(ix_snap_commit(T.ix, m, NULL, 0, &id), 0);
		st_id_format(&id, hex);
		memcpy(seen[n], hex, IX_ID_PREFIX_MIN);
		for (unsigned k = 0; k < n; k++)
			if (memcmp(seen[k], hex, IX_ID_PREFIX_MIN) == 0)
				memcpy(other, hex, sizeof(other));
	}
	cr_assert(other[0], "no two of %u ids shared a prefix", n);
	struct ix_txn *t;
	char pre[ST_ID_HEX_LEN + 1];
	cr_assert_eq(ix_txn_begin(T.ix, &t), 0);
	snprintf(pre, sizeof(pre), "%.*s", IX_ID_PREFIX_MIN, other);
	cr_assert_eq(ix_resolve(t, pre, &got), IX_EAMBIGUOUS);
	cr_assert_eq(ix_resolve(t, other, &got), 0, "the full id still resolves");
	ix_txn_end(t);
	free(seen);
	st_manifest_free(m);
}

Test(snap, every_change_bumps_the_generation)
{
	unsigned s1[] = { 1 }, s2[] = { 2 };
	uint64_t g0 = gen();
	st_id a = commit_seeds(&T, s1, 1, NULL, NULL);
	uint64_t g1 = gen();
	cr_assert_gt(g1, g0, "commit");
	cr_assert_eq(ix_tag_set(T.ix, "t", &a, 0), 0);
	uint64_t g2 = gen();
	cr_assert_gt(g2, g1, "tag set");
	cr_assert_eq(ix_tag_rename(T.ix, "t", "u", 0), 0);
	uint64_t g3 = gen();
	cr_assert_gt(g3, g2, "tag rename");
	cr_assert_eq(ix_tag_del(T.ix, "u", 0, NULL), 0);
	uint64_t g4 = gen();
	cr_assert_gt(g4, g3, "tag delete");
	cr_assert_eq(ix_tag_del(T.ix, "u", 0, NULL), IX_ENOTFOUND);
	cr_assert_eq(gen(), g4, "a failed change does not bump it");
	commit_seeds(&T, s2, 1, NULL, NULL);
	uint64_t g5 = gen();
	cr_assert_gt(g5, g4);
	cr_assert_eq(ix_snap_del(T.ix, &a), 0);
	cr_assert_gt(gen(), g5, "delete");
}

Test(snap, the_index_survives_reopening)
{
	unsigned s1[] = { 1, 2 };
	st_id a = commit_seeds(&T, s1, 2, NULL, "keep");
	uint8_t u1[16], u2[16];
	struct ix_txn *t;
	st_id got;

	ix_uuid(T.ix, u1);
	ts_reopen(&T);
	ix_uuid(T.ix, u2);
	cr_assert_eq(memcmp(u1, u2, 16), 0, "the store uuid is fixed at creation");
	cr_assert_eq(ix_txn_begin(T.ix, &t), 0);
	cr_assert_eq(ix_tag_get(t, "keep", &got), 0);
	cr_assert(st_id_equal(&got, &a));
	ix_txn_end(t);
}

Test(snap, a_read_only_open_reads_and_refuses_writes)
{
	unsigned s1[] = { 1 };
	st_id a = commit_seeds(&T, s1, 1, NULL, "ro");
	struct ix_opts o = { .flags = IX_OPEN_RDONLY };
	struct ix *ro;
	struct ix_txn *t;
	st_id got;

	cr_assert_eq(ix_open(T.s, &o, &ro), 0);
	cr_assert_eq(ix_txn_begin(ro, &t), 0);
	cr_assert_eq(ix_tag_get(t, "ro", &got), 0);
	cr_assert(st_id_equal(&got, &a));
	ix_txn_end(t);
	cr_assert_eq(ix_tag_set(ro, "x", &a, 0), ST_EREADONLY);
	cr_assert_eq(ix_gc(ro, 0, NULL), ST_EREADONLY);
	ix_close(ro);
}
