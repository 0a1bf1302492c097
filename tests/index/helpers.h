/* helpers.h: shared fixtures of the index tests: temp stores and synthetic snapshots. */
#ifndef STRATA_TESTS_INDEX_HELPERS_H
#define STRATA_TESTS_INDEX_HELPERS_H

#include <stdbool.h>
#include <stdint.h>

#include "index/index.h"
#include "store/store.h"

struct tstore {
	char dir[256];    /* the temp dir holding everything of this test */
	char path[300];   /* the store: dir/store */
	struct st_store *s;
	struct ix *ix;
};

/* Make a temp dir and an initialised store (sync none: tests need speed, not
 * power-loss safety) with its index open. Asserts on failure. */
void ts_open(struct tstore *t);
/* Reopen the store handles (e.g. in a forked child, or after a crash). */
void ts_reopen(struct tstore *t);
/* Close handles and remove the temp dir. */
void ts_close(struct tstore *t);

/* One page of content for a seed (never all-zero). */
void page_fill(void *page, unsigned seed);
/* Put one page of seed's content as a blob; returns its id. */
st_id put_page(struct st_store *s, unsigned seed);

/*
 * A manifest of n one-page layers with the given seeds (layer i at guest page
 * i), putting the blobs into s. parent may be NULL. created is fixed, so the
 * same arguments give the same snapshot id.
 */
struct st_manifest *mk_manifest(struct st_store *s, const unsigned *seeds, unsigned n, const st_id *parent);
/* mk_manifest + ix_snap_commit; returns the snapshot id. */
st_id commit_seeds(struct tstore *t, const unsigned *seeds, unsigned n, const st_id *parent, const char *tag);

/* Number of blob files in the store. */
unsigned count_blob_files(struct st_store *s);
/* Errors ix_fsck reports (with hashing). */
int fsck_errors(struct ix *ix);
/* Kinds seen by the last fsck_kinds call: bit (1 << kind). */
unsigned fsck_kinds(struct ix *ix, unsigned flags);
/* Refcount of a blob in the index (0 if it has no record). */
uint64_t blob_refs(struct ix *ix, const st_id *id);
/* Run a shell command; returns its exit status. */
int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
