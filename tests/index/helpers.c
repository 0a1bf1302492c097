/* helpers.c: shared fixtures of the index tests: temp stores and synthetic snapshots. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "index/index_int.h"
#include "tests/index/helpers.h"

void ts_reopen(struct tstore *t)
{
	ix_close(t->ix);
	st_store_close(t->s);
	cr_assert_eq(st_store_open(t->path, 0, &t->s), 0);
	cr_assert_eq(ix_open(t->s, NULL, &t->ix), 0);
}

void ts_open(struct tstore *t)
{
	struct st_store_opts so = { .sync = ST_SYNC_NONE };

	memset(t, 0, sizeof(*t));
	snprintf(t->dir, sizeof(t->dir), "/tmp/strata-ix-XXXXXX");
	cr_assert_not_null(mkdtemp(t->dir));
	snprintf(t->path, sizeof(t->path), "%s/store", t->dir);
	cr_assert_eq(st_store_init(t->path, &so), 0);
	ts_reopen(t);
}

void ts_close(struct tstore *t)
{
	ix_close(t->ix);
	st_store_close(t->s);
	t->ix = NULL;
	t->s = NULL;
	sh("chmod -R u+w '%s' 2>/dev/null; rm -rf '%s'", t->dir, t->dir);
}

int sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	int st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void page_fill(void *page, unsigned seed)
{
	uint64_t *p = page, x = 0x9e3779b97f4a7c15ull * (seed + 1);

	for (size_t i = 0; i < ST_PAGE_SIZE / 8; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = x | 1;
	}
}

st_id put_page(struct st_store *s, unsigned seed)
{
	static uint64_t page[ST_PAGE_SIZE / 8];
	st_id id;

	page_fill(page, seed);
	cr_assert_eq(st_blob_put(s, page, ST_PAGE_SIZE, &id, NULL), 0);
	return id;
}

struct st_manifest *mk_manifest(struct st_store *s, const unsigned *seeds, unsigned n, const st_id *parent)
{
	struct st_manifest *m;

	cr_assert_eq(st_manifest_new(&m), 0);
	m->mem_size = (uint64_t)(n ? n : 1) * ST_PAGE_SIZE;
	m->created = 1700000000000000000ll;
	m->nlayers = n;
	m->nranges = n;
	m->layers = calloc(n ? n : 1, sizeof(*m->layers));
	m->ranges = calloc(n ? n : 1, sizeof(*m->ranges));
	cr_assert(m->layers && m->ranges);
	for (unsigned i = 0; i < n; i++) {
		m->layers[i].id = put_page(s, seeds[i]);
		m->layers[i].pages = 1;
		m->ranges[i] = (struct st_range){ .gpage = i, .npages = 1, .layer = i, .lpage = 0 };
	}
	if (parent) {
		m->has_parent = true;
		m->parent = *parent;
	}
	return m;
}

st_id commit_seeds(struct tstore *t, const unsigned *seeds, unsigned n, const st_id *parent, const char *tag)
{
	struct st_manifest *m = mk_manifest(t->s, seeds, n, parent);
	st_id id;
	int rc = ix_snap_commit(t->ix, m, tag, 0, &id);

	cr_assert_eq(rc, 0, "commit: %s", ix_strerror(rc));
	st_manifest_free(m);
	return id;
}

static int count_cb(const st_id *id, uint64_t size, int64_t mtime, void *ctx)
{
	(*(unsigned *)ctx)++;
	return 0;
}

unsigned count_blob_files(struct st_store *s)
{
	unsigned n = 0;

	cr_assert_eq(st_blob_foreach(s, count_cb, &n), 0);
	return n;
}

static int kinds_cb(const struct ix_problem *p, void *ctx)
{
	*(unsigned *)ctx |= 1u << p->kind;
	return 0;
}

unsigned fsck_kinds(struct ix *ix, unsigned flags)
{
	unsigned k = 0;
	int rc = ix_fsck(ix, flags, kinds_cb, &k, NULL);

	cr_assert_geq(rc, 0, "fsck: %s", ix_strerror(rc));
	return k;
}

int fsck_errors(struct ix *ix)
{
	int rc = ix_fsck(ix, IX_FSCK_HASH, NULL, NULL, NULL);

	cr_assert_geq(rc, 0, "fsck: %s", ix_strerror(rc));
	return rc;
}

uint64_t blob_refs(struct ix *ix, const st_id *id)
{
	struct ix_txn *t;
	struct ix_blob_rec r;
	uint64_t refs = 0;

	cr_assert_eq(ix_txn_begin(ix, &t), 0);
	if (ix_blob_rec_get(ix, t->txn, id, &r) == 0)
		refs = r.refs;
	ix_txn_end(t);
	return refs;
}
