/* helpers.h: shared fixtures for the store tests: a fresh temp directory and store per test. */
#ifndef STRATA_TESTS_STORE_HELPERS_H
#define STRATA_TESTS_STORE_HELPERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/* Per-test temp directory (created by th_setup, removed by th_teardown). */
extern char th_dir[256];
/* A store at th_dir/store, opened read-write (th_setup_store). */
extern struct st_store *th_store;

void th_setup(void);
void th_setup_store(void);
void th_teardown(void);

/* th_dir + "/" + rel into a static rotating buffer. */
const char *th_path(const char *rel);
/* Count entries (not . / ..) in a directory; -1 if it cannot be opened. */
int th_count_entries(const char *dir);
/* Count blob files under STORE/blobs. */
int th_count_blobs(struct st_store *s);
/* Every blob file in the store hashes to its name. */
bool th_all_blobs_valid(struct st_store *s);
/* Deterministic pseudo-random fill. */
void th_fill(void *buf, size_t len, uint64_t seed);
/* Write a whole file; returns 0 or -errno. */
int th_write_file(const char *path, const void *buf, size_t len);
/* Remove a tree (for cleanup). */
void th_rm_rf(const char *path);
/* A manifest's canonical encoding built wholly with jansson (test_manifest_encode.c). */
char *th_reference_encode(const struct st_manifest *m);

#endif
