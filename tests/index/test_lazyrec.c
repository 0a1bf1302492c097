/* test_lazyrec.c: lazy records stand only for the source they were recorded from; fsck lists their layers as unchecked and re-hashes their present chunks. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "index/index_int.h"
#include "index/lazy.h"
#include "tests/index/helpers.h"

static struct tstore T;

static void setup(void) { ts_open(&T); }
static void teardown(void) { ts_close(&T); }

TestSuite(lazyrec, .init = setup, .fini = teardown, .timeout = 30);

struct put_ctx {
	const st_id *layer;
	const void *val;
	size_t len;
};

static int put_fn(struct ix *ix, MDB_txn *txn, void *arg)
{
	struct put_ctx *p = arg;
	MDB_val k = ix_val(p->layer->b, 16), v = ix_val(p->val, p->len);

	return ix_mdb(mdb_put(txn, ix->lazy, &k, &v, 0));
}

static uint8_t LSHA[32] = { 1 }, MSHA[32] = { 2 }, CSHA[32] = { 3 }, XSHA[32] = { 4 };

/* The chunk index of one page of seed's content; *layer gets its id. */
static struct ix_chunks *one_page(unsigned seed, st_id *layer)
{
	char path[] = "/tmp/strata-lazyrec.XXXXXX";
	uint8_t page[4096];
	struct ix_chunks *c = NULL;
	int fd = mkstemp(path);

	cr_assert(fd >= 0);
	unlink(path);
	page_fill(page, seed);
	cr_assert_eq(write(fd, page, sizeof(page)), (ssize_t)sizeof(page));
	st_id_hash(page, sizeof(page), layer);
	cr_assert_eq(ix_chunks_build(fd, layer, sizeof(page), IX_CHUNK_MIN, &c), 0);
	close(fd);
	return c;
}

/* Record layer as lazy, from origin with the digests above. */
static void record(const struct ix_chunks *c, const st_id *layer, const char *origin, bool insecure)
{
	struct ix_lazy_source from = { origin, insecure, LSHA, MSHA, CSHA };
	uint8_t *val;
	size_t len;

	cr_assert_eq(ix_lazy_rec_encode(c, &from, &val, &len), 0);
	struct put_ctx p = { layer, val, len };
	cr_assert_eq(ix_write(T.ix, put_fn, &p), 0);
	free(val);
}

static int match(const st_id *layer, const struct ix_lazy_source *want)
{
	struct ix_txn *t;
	int m;

	cr_assert_eq(ix_txn_begin(T.ix, &t), 0);
	m = ix_lazy_rec_match(T.ix, t->txn, layer, want);
	ix_txn_end(t);
	return m;
}

Test(lazyrec, a_record_stands_for_its_own_source_only)
{
	st_id layer, other;
	struct ix_chunks *c = one_page(1, &layer);

	st_id_hash("other", 5, &other);
	record(c, &layer, "127.0.0.1:5000/trusted/img", false);
	struct ix_lazy_source same = { "127.0.0.1:5000/trusted/img", false, LSHA, XSHA, CSHA };
	cr_assert_eq(match(&layer, &same), IX_LAZY_SAME, "the same origin and chunk index, under another manifest");
	struct ix_lazy_source s = same;
	s.origin = "127.0.0.1:5001/trusted/img";
	cr_assert_eq(match(&layer, &s), IX_LAZY_OTHER, "another registry");
	s.origin = "127.0.0.1:5000/evil/img";
	cr_assert_eq(match(&layer, &s), IX_LAZY_OTHER, "another repository of the registry");
	s = same;
	s.insecure = true;
	cr_assert_eq(match(&layer, &s), IX_LAZY_OTHER, "plain HTTP where the record came over TLS");
	s = same;
	s.chunks_sha = XSHA;
	cr_assert_eq(match(&layer, &s), IX_LAZY_OTHER, "another chunk index");
	s = same;
	s.layer_sha = XSHA;
	cr_assert_eq(match(&layer, &s), IX_LAZY_OTHER, "another sha256 for the layer");
	cr_assert_eq(match(&layer, NULL), IX_LAZY_OTHER, "a source without an origin (an OCI layout)");
	cr_assert_eq(match(&other, &same), IX_LAZY_NONE, "a layer without a record");
	ix_chunks_free(c);
}

Test(lazyrec, a_version_1_record_is_still_read_but_stands_for_no_pull)
{
	st_id layer;
	struct ix_chunks *c = one_page(2, &layer);
	const char *origin = "127.0.0.1:5000/trusted/img";
	uint8_t *ci, *v1;
	size_t clen, olen = strlen(origin);

	/* Version 1: version, flags, origin length, the layer's sha256, the
	 * origin, the chunk index (docs/formats.md). */
	cr_assert_eq(ix_chunks_encode(c, &ci, &clen), 0);
	cr_assert((v1 = malloc(36 + olen + clen)));
	v1[0] = 1;
	v1[1] = 0;
	v1[2] = (uint8_t)olen;
	v1[3] = 0;
	memcpy(v1 + 4, LSHA, 32);
	memcpy(v1 + 36, origin, olen);
	memcpy(v1 + 36 + olen, ci, clen);
	struct put_ctx p = { &layer, v1, 36 + olen + clen };
	cr_assert_eq(ix_write(T.ix, put_fn, &p), 0);

	struct ix_txn *t;
	uint64_t size = 0;
	cr_assert_eq(ix_txn_begin(T.ix, &t), 0);
	cr_assert(ix_lazy_rec_has(T.ix, t->txn, &layer, &size), "still a lazy layer of the snapshots pulled with it");
	ix_txn_end(t);
	cr_assert_eq(size, 4096);
	struct ix_lazy_source same = { origin, false, LSHA, MSHA, CSHA };
	cr_assert_eq(match(&layer, &same), IX_LAZY_OTHER, "it does not say which chunk index it came with");
	free(v1);
	free(ci);
	ix_chunks_free(c);
}

static int lazy_cb(const struct ix_problem *p, void *ctx)
{
	if (p->kind == IX_PROBLEM_LAZY && !p->error)
		snprintf(ctx, 1024, "%s", p->detail);
	return 0;
}

Test(lazyrec, fsck_lists_a_lazy_layer_as_unchecked_not_as_a_problem)
{
	unsigned seeds[] = { 3 };
	struct st_manifest *m = mk_manifest(T.s, seeds, 1, NULL);
	struct ix_chunks *c;
	st_id layer;
	char detail[1024] = "";
	struct ix_fsck_stats st;

	c = one_page(3, &layer);
	cr_assert(st_id_equal(&layer, &m->layers[0].id));
	cr_assert_eq(sh("find %s/blobs -type f -delete", T.path), 0);
	record(c, &layer, "127.0.0.1:5000/evil/img", true);
	cr_assert_eq(ix_lazy_files_make(T.ix, &layer, 4096, 1), 0);
	cr_assert_eq(ix_snap_commit(T.ix, m, "lz", 0, NULL), 0);
	cr_assert_eq(ix_fsck(T.ix, IX_FSCK_HASH, lazy_cb, detail, &st), 0, "not an error");
	cr_assert_eq(st.lazy, 1);
	cr_assert(strstr(detail, "from http://127.0.0.1:5000/evil/img"), "names the source: %s", detail);
	cr_assert(strstr(detail, "0 of 1 chunks here"), "%s", detail);
	cr_assert(strstr(detail, "not yet against the layer's id"), "%s", detail);
	st_manifest_free(m);
	ix_chunks_free(c);
}

struct chunk_probs {
	unsigned bad;
	char action[256];
};

static int chunk_cb(const struct ix_problem *p, void *ctx)
{
	struct chunk_probs *cp = ctx;

	if (p->kind == IX_PROBLEM_CHUNK && p->error) {
		cp->bad++;
		snprintf(cp->action, sizeof(cp->action), "%s", p->action ? p->action : "");
	}
	return 0;
}

/* Write the lazy layer's partial file and mark its one chunk present. */
static void part_put(const st_id *layer, const uint8_t *page)
{
	char hex[ST_ID_HEX_LEN + 1];

	st_id_format(layer, hex);
	cr_assert_eq(sh("printf '\\001' | dd of=%s/lazy/%s.map conv=notrunc status=none", T.path, hex), 0);
	char path[4096];
	snprintf(path, sizeof(path), "%s/lazy/%s.part", T.path, hex);
	FILE *f = fopen(path, "r+");
	cr_assert(f);
	cr_assert_eq(fwrite(page, 1, 4096, f), 4096u);
	fclose(f);
}

Test(lazyrec, fsck_rehashes_present_chunks_and_repair_marks_a_bad_one_missing)
{
	unsigned seeds[] = { 5 };
	struct st_manifest *m = mk_manifest(T.s, seeds, 1, NULL);
	struct ix_chunks *c;
	struct ix_fsck_stats st;
	struct chunk_probs cp = { 0 };
	uint8_t page[4096];
	st_id layer;

	c = one_page(5, &layer);
	cr_assert_eq(sh("find %s/blobs -type f -delete", T.path), 0);
	record(c, &layer, "127.0.0.1:5000/ok/img", false);
	cr_assert_eq(ix_lazy_files_make(T.ix, &layer, 4096, 1), 0);
	cr_assert_eq(ix_snap_commit(T.ix, m, "lz", 0, NULL), 0);
	page_fill(page, 5);
	part_put(&layer, page);
	cr_assert_eq(ix_fsck(T.ix, IX_FSCK_HASH, chunk_cb, &cp, &st), 0, "the chunk matches");
	cr_assert_eq(st.lazy_chunks, 1);
	cr_assert_eq(cp.bad, 0);

	page[100] ^= 0xff;
	part_put(&layer, page);
	cr_assert_eq(ix_fsck(T.ix, 0, chunk_cb, &cp, &st), 0, "not hashing: not seen");
	cr_assert_eq(ix_fsck(T.ix, IX_FSCK_HASH, chunk_cb, &cp, &st), 1, "a rotted chunk is a problem");
	cr_assert_eq(cp.bad, 1);
	cr_assert_eq(ix_fsck(T.ix, IX_FSCK_HASH | IX_FSCK_REPAIR, chunk_cb, &cp, &st), 0, "repaired");
	cr_assert(strstr(cp.action, "marked missing"), "%s", cp.action);
	cr_assert_eq(st.repaired, 1);
	struct ix_lazy_check chk;
	cr_assert_eq(ix_lazy_check(T.ix, &layer, NULL, NULL, &chk), 0);
	cr_assert_eq(chk.present, 0, "its mark is cleared: fetched again when read");
	cr_assert_eq(ix_fsck(T.ix, IX_FSCK_HASH, chunk_cb, &cp, &st), 0, "consistent afterwards");
	st_manifest_free(m);
	ix_chunks_free(c);
}

/* Every step of a lazy layer's files made and of a repair of a rotted chunk
 * (index/lazy.c: the opens, reads, writes and syncs through store/sys.c)
 * failed in turn: the call fails or succeeds whole, and the next clean
 * repair leaves the layer consistent, its bad chunk marked missing. */
Test(lazyrec, a_failure_at_any_step_of_a_lazy_layers_files_or_repair_leaves_it_repairable)
{
	unsigned seeds[] = { 6 };
	struct st_manifest *m = mk_manifest(T.s, seeds, 1, NULL);
	struct ix_chunks *c;
	struct ix_fsck_stats st;
	struct chunk_probs cp = { 0 };
	struct ix_lazy_check chk;
	uint8_t page[4096];
	uint64_t steps, failed = 0;
	st_id layer;

	c = one_page(6, &layer);
	cr_assert_eq(sh("find %s/blobs -type f -delete", T.path), 0);
	record(c, &layer, "127.0.0.1:5000/ok/img", false);
	cr_assert_eq(ix_snap_commit(T.ix, m, "lz", 0, NULL), 0);

	st_sys_count_reset();
	cr_assert_eq(ix_lazy_files_make(T.ix, &layer, 4096, 1), 0);
	steps = st_sys_calls();
	/* The directory, then each file's open, mode, truncate and close (its
	 * sync too where the store syncs): its own calls are steps. */
	cr_assert_geq(steps, 9, "index/lazy.c's file calls are steps (%llu)", (unsigned long long)steps);
	for (uint64_t i = 1; i <= steps; i++) {
		st_sys_fault_set(i, i % 2 ? EIO : ENOSPC);
		int rc = ix_lazy_files_make(T.ix, &layer, 4096, 1);
		bool fired = st_sys_fault_fired();
		st_sys_fault_set(0, 0);
		cr_assert(rc == 0 || fired, "step %llu: %d without the fault", (unsigned long long)i, rc);
		failed += rc < 0;
		cr_assert_eq(ix_lazy_files_make(T.ix, &layer, 4096, 1), 0, "step %llu: made again",
			     (unsigned long long)i);
		cr_assert_eq(ix_lazy_check(T.ix, &layer, NULL, NULL, &chk), 0, "step %llu", (unsigned long long)i);
		cr_assert_eq(chk.present, 0, "step %llu: made empty", (unsigned long long)i);
	}
	cr_assert_gt(failed, 0);

	page_fill(page, 6);
	page[7] ^= 0xff;
	part_put(&layer, page);
	st_sys_count_reset();
	cr_assert_eq(ix_fsck(T.ix, IX_FSCK_HASH | IX_FSCK_REPAIR, chunk_cb, &cp, &st), 0);
	steps = st_sys_calls();
	cr_assert_eq(st.repaired, 1);
	failed = 0;
	for (uint64_t i = 1; i <= steps; i++) {
		part_put(&layer, page); /* rotted and marked present again */
		st_sys_fault_set(i, i % 2 ? EIO : ENOSPC);
		int rc = ix_fsck(T.ix, IX_FSCK_HASH | IX_FSCK_REPAIR, chunk_cb, &cp, &st);
		bool fired = st_sys_fault_fired();
		st_sys_fault_set(0, 0);
		cr_assert(rc == 0 || fired, "step %llu: %d without the fault", (unsigned long long)i, rc);
		failed += rc != 0;
		int again = ix_fsck(T.ix, IX_FSCK_HASH | IX_FSCK_REPAIR, chunk_cb, &cp, &st);
		cr_assert_eq(again, 0, "step %llu: the next repair (%d)", (unsigned long long)i, again);
		cr_assert_eq(ix_lazy_check(T.ix, &layer, NULL, NULL, &chk), 0, "step %llu", (unsigned long long)i);
		cr_assert_eq(chk.present, 0, "step %llu: the bad chunk is marked missing", (unsigned long long)i);
		cr_assert_eq(ix_fsck(T.ix, IX_FSCK_HASH, chunk_cb, &cp, &st), 0, "step %llu: consistent",
			     (unsigned long long)i);
	}
	cr_assert_gt(failed, 0);
	st_manifest_free(m);
	ix_chunks_free(c);
}
