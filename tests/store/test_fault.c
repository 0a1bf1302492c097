/* test_fault.c: fault injection over every step of init, put, ingest, export and opening a snapshot directory: nothing partial is published or left open. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <dirent.h>

#include "store/store.h"
#include "store/sys.h"
#include "tests/store/helpers.h"

TestSuite(fault, .init = th_setup_store, .fini = th_teardown);

static const int errs[] = { ENOSPC, EIO };

/* After any put, failed or not: the blob is either absent or whole, and no
 * temp file is left behind. */
static void check_put_outcome(int rc, const st_id *id, uint64_t i, int err)
{
	if (rc == 0)
		cr_assert_eq(st_blob_verify(th_store, id), 0, "step %lu (%s): put ok but blob bad", (unsigned long)i,
			     strerror(err));
	else if (st_blob_has(th_store, id))
		/* Only a failed directory fsync after publishing leaves it. */
		cr_assert_eq(st_blob_verify(th_store, id), 0, "step %lu: partial blob published", (unsigned long)i);
	int left = th_count_entries(th_path("store/tmp"));
	/* The one leftover allowed: a dedup hit whose temp-file unlink was the
	 * failing step still succeeds; st_tmp_sweep removes the file. */
	if (left && rc == 0) {
		cr_assert_eq(left, 1);
		cr_assert_eq(st_tmp_sweep(th_store, 0, NULL), 0);
		left = th_count_entries(th_path("store/tmp"));
	}
	cr_assert_eq(left, 0, "step %lu (%s): temp file left (rc %d)", (unsigned long)i, strerror(err), rc);
	cr_assert(th_all_blobs_valid(th_store));
}

Test(fault, every_step_of_put_fails_cleanly)
{
	static uint8_t buf[3 * ST_PAGE_SIZE];
	uint64_t steps, failures = 0;
	st_id id;

	th_fill(buf, sizeof(buf), 1);
	st_sys_fault_set(0, 0);
	cr_assert_eq(st_blob_put(th_store, buf, sizeof(buf), &id, NULL), 0);
	steps = st_sys_calls();
	cr_assert_gt(steps, 5, "put counts its syscalls (%lu)", (unsigned long)steps);
	for (size_t e = 0; e < 2; e++) {
		for (uint64_t i = 1; i <= steps; i++) {
			st_id want;
			buf[0]++;  /* fresh content: not a dedup hit */
			buf[1] = (uint8_t)e;
			st_id_hash(buf, sizeof(buf), &want);
			st_sys_fault_set(i, errs[e]);
			int rc = st_blob_put(th_store, buf, sizeof(buf), &id, NULL);
			cr_assert(st_sys_fault_fired(), "step %lu never ran", (unsigned long)i);
			st_sys_fault_set(0, 0);
			if (rc < 0) {
				failures++;
				cr_assert(rc == -errs[e] || rc == -ENOMEM, "step %lu: error %d is not the injected one", (unsigned long)i, rc);
			}
			check_put_outcome(rc, &want, i, errs[e]);
		}
	}
	cr_assert_geq(failures, steps, "most injected faults surface as errors");
}

Test(fault, every_step_of_put_fd_from_a_file_fails_cleanly)
{
	static uint8_t buf[5 * ST_PAGE_SIZE];
	uint64_t steps;
	st_id id, want;
	int fd;

	th_fill(buf, sizeof(buf), 21);
	cr_assert_eq(th_write_file(th_path("src"), buf, sizeof(buf)), 0);
	fd = open(th_path("src"), O_RDONLY);
	st_sys_fault_set(0, 0);
	cr_assert_eq(st_blob_put_fd(th_store, fd, NULL, &id, NULL), 0);
	steps = st_sys_calls();
	close(fd);
	for (uint64_t i = 1; i <= steps; i++) {
		buf[0] = (uint8_t)i;  /* fresh content each time */
		buf[1] = 0xee;
		cr_assert_eq(th_write_file(th_path("src"), buf, sizeof(buf)), 0);
		st_id_hash(buf, sizeof(buf), &want);
		fd = open(th_path("src"), O_RDONLY);
		st_sys_fault_set(i, ENOSPC);
		int rc = st_blob_put_fd(th_store, fd, &want, &id, NULL);
		st_sys_fault_set(0, 0);
		close(fd);
		check_put_outcome(rc, &want, i, ENOSPC);
	}
}

Test(fault, every_step_of_dedup_put_fails_cleanly)
{
	static uint8_t buf[ST_PAGE_SIZE];
	uint64_t steps;
	st_id id;
	bool dedup;

	th_fill(buf, sizeof(buf), 2);
	cr_assert_eq(st_blob_put(th_store, buf, sizeof(buf), &id, NULL), 0);
	st_sys_fault_set(0, 0);
	cr_assert_eq(st_blob_put(th_store, buf, sizeof(buf), &id, &dedup), 0);
	cr_assert(dedup);
	steps = st_sys_calls();
	for (uint64_t i = 1; i <= steps; i++) {
		st_sys_fault_set(i, ENOSPC);
		int rc = st_blob_put(th_store, buf, sizeof(buf), &id, &dedup);
		st_sys_fault_set(0, 0);
		check_put_outcome(rc, &id, i, ENOSPC);
		cr_assert(st_blob_has(th_store, &id), "a failed dedup put never removes the existing blob");
	}
	cr_assert_eq(th_count_blobs(th_store), 1);
}

Test(fault, every_step_of_ingest_fails_cleanly)
{
	size_t n = 32;
	uint8_t *img = calloc(n, ST_PAGE_SIZE);
	struct st_manifest *p, *c;
	uint64_t steps;

	th_fill(img, 10 * ST_PAGE_SIZE, 3);
	cr_assert_eq(st_ingest_image(th_store, img, n * ST_PAGE_SIZE, NULL, &p, NULL), 0);
	th_fill(img + 20 * ST_PAGE_SIZE, ST_PAGE_SIZE, 4);
	st_sys_fault_set(0, 0);
	cr_assert_eq(st_ingest_image(th_store, img, n * ST_PAGE_SIZE, p, &c, NULL), 0);
	steps = st_sys_calls();
	st_manifest_free(c);
	for (uint64_t i = 1; i <= steps; i++) {
		img[20 * ST_PAGE_SIZE] = (uint8_t)(i + 1); /* new content each time */
		c = NULL;
		st_sys_fault_set(i, EIO);
		int rc = st_ingest_image(th_store, img, n * ST_PAGE_SIZE, p, &c, NULL);
		st_sys_fault_set(0, 0);
		if (rc < 0)
			cr_assert_null(c);
		else
			st_manifest_free(c);
		cr_assert_eq(th_count_entries(th_path("store/tmp")), 0, "step %lu: temp file left", (unsigned long)i);
		cr_assert(th_all_blobs_valid(th_store));
	}
	st_manifest_free(p);
	free(img);
}

Test(fault, every_step_of_export_fails_cleanly)
{
	size_t n = 32;
	uint8_t *img = calloc(n, ST_PAGE_SIZE);
	struct st_manifest *p, *m, *back;
	char why[ST_WHY_LEN];
	uint64_t steps;

	th_fill(img, 10 * ST_PAGE_SIZE, 3);
	cr_assert_eq(st_ingest_image(th_store, img, n * ST_PAGE_SIZE, NULL, &p, NULL), 0);
	th_fill(img + 20 * ST_PAGE_SIZE, ST_PAGE_SIZE, 4);
	cr_assert_eq(st_ingest_image(th_store, img, n * ST_PAGE_SIZE, p, &m, NULL), 0);
	mkdir(th_path("out"), 0755);
	st_sys_fault_set(0, 0);
	cr_assert_eq(st_snapdir_export(th_store, m, th_path("out/first"), why, sizeof(why)), 0, "%s", why);
	steps = st_sys_calls();
	cr_assert_gt(steps, 10);
	for (size_t e = 0; e < 2; e++) {
		for (uint64_t i = 1; i <= steps; i++) {
			char name[64];
			struct stat st;

			snprintf(name, sizeof(name), "out/e%zu-%lu", e, (unsigned long)i);
			why[0] = '\0';
			st_sys_fault_set(i, errs[e]);
			int rc = st_snapdir_export(th_store, m, th_path(name), why, sizeof(why));
			st_sys_fault_set(0, 0);
			if (stat(th_path(name), &st) == 0) {
				/* In place: must be complete (only the final
				 * parent fsync can fail after the rename). */
				cr_assert_eq(st_snapdir_read(th_path(name), &back, why, sizeof(why)), 0, "step %lu", (unsigned long)i);
				cr_assert_eq(st_snapdir_verify(th_path(name), back, why, sizeof(why)), 0, "step %lu: %s",
					     (unsigned long)i, why);
				st_manifest_free(back);
				if (rc == 0)
					continue;
			} else {
				cr_assert_lt(rc, 0, "step %lu: success but no directory", (unsigned long)i);
				cr_assert(why[0], "step %lu: failure without a why", (unsigned long)i);
			}
		}
	}
	/* Only the good exports are in out/: no temp directories left. */
	DIR *d = opendir(th_path("out"));
	struct dirent *de;
	while ((de = readdir(d)))
		cr_assert(de->d_name[0] != '.' || !strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."),
			  "temp directory left: %s", de->d_name);
	closedir(d);
	st_manifest_free(p);
	st_manifest_free(m);
	free(img);
}

/* Every step of creating a store fails with the injected error and leaves
 * the directory as it was (absent, or empty when it existed), or leaves a
 * complete store; either way the next init makes (or keeps) the store. A
 * directory that only holds what a killed init left (empty blobs/ and
 * tmp/) is still an empty one. */
Test(fault, every_step_of_init_fails_cleanly)
{
	uint64_t steps;
	struct st_store *s;

	st_sys_fault_set(0, 0);
	cr_assert_eq(st_store_init(th_path("first"), NULL), 0);
	steps = st_sys_calls();
	cr_assert_gt(steps, 5, "init counts its syscalls (%lu)", (unsigned long)steps);
	for (size_t e = 0; e < 2; e++) {
		for (uint64_t i = 1; i <= steps; i++) {
			char name[64], again[80];
			struct stat st;

			snprintf(name, sizeof(name), "s%zu-%lu", e, (unsigned long)i);
			st_sys_fault_set(i, errs[e]);
			int rc = st_store_init(th_path(name), NULL);
			cr_assert(st_sys_fault_fired(), "step %lu never ran", (unsigned long)i);
			st_sys_fault_set(0, 0);
			if (rc < 0) {
				cr_assert(rc == -errs[e] || rc == ST_EREADONLY || rc == -ENOMEM,
					  "step %lu: error %d is not the injected one", (unsigned long)i, rc);
				if (stat(th_path(name), &st) == 0 && st_store_open(th_path(name), 0, &s) < 0)
					cr_assert_eq(th_count_entries(th_path(name)), 0,
						     "step %lu (%s): a failed init left entries in a directory that is not a store",
						     (unsigned long)i, strerror(errs[e]));
				else if (stat(th_path(name), &st) == 0)
					st_store_close(s);
			}
			rc = st_store_init(th_path(name), NULL);
			cr_assert_eq(rc, 0, "step %lu (%s): init after a failed one: %s", (unsigned long)i,
				     strerror(errs[e]), st_strerror(rc));
			cr_assert_eq(st_store_open(th_path(name), 0, &s), 0);
			st_store_close(s);
			snprintf(again, sizeof(again), "%s/blobs", name);
			cr_assert_eq(th_count_entries(th_path(again)), 0);
		}
	}
	cr_assert_eq(mkdir(th_path("killed"), 0755), 0);
	cr_assert_eq(mkdir(th_path("killed/blobs"), 0755), 0);
	cr_assert_eq(mkdir(th_path("killed/tmp"), 0755), 0);
	cr_assert_eq(st_store_init(th_path("killed"), NULL), 0, "what a killed init left is an empty directory");
	cr_assert_eq(st_store_open(th_path("killed"), 0, &s), 0);
	st_store_close(s);
	cr_assert_eq(mkdir(th_path("full"), 0755), 0);
	cr_assert_eq(mkdir(th_path("full/blobs"), 0755), 0);
	cr_assert_eq(th_write_file(th_path("full/blobs/x"), "x", 1), 0);
	cr_assert_eq(st_store_init(th_path("full"), NULL), ST_ENOTSTORE, "a blobs/ with files in it is not a leftover");
}

/* Open descriptors of this process. */
static int count_fds(void)
{
	return th_count_entries("/proc/self/fd");
}

/* Every step of opening a snapshot directory to map it (a plain copy: the
 * manifest read and parsed, each layer opened, copied into sealed memory
 * and hashed) fails with the injected error, or succeeds with every layer
 * intact; either way nothing is left open and the next open works. With the
 * cache cold (each copy made again) and warm (copies reused). */
Test(fault, every_step_of_opening_a_snapshot_directory_fails_cleanly)
{
	size_t n = 32;
	uint8_t *img = calloc(n, ST_PAGE_SIZE);
	struct st_manifest *p, *m;
	struct st_snapcache *c;
	struct st_snapdir *d;
	char why[ST_WHY_LEN];
	const char *dir = th_path("out/copy");

	th_fill(img, 10 * ST_PAGE_SIZE, 5);
	cr_assert_eq(st_ingest_image(th_store, img, n * ST_PAGE_SIZE, NULL, &p, NULL), 0);
	th_fill(img + 20 * ST_PAGE_SIZE, ST_PAGE_SIZE, 6);
	cr_assert_eq(st_ingest_image(th_store, img, n * ST_PAGE_SIZE, p, &m, NULL), 0);
	cr_assert_eq(m->nlayers, 2);
	mkdir(th_path("out"), 0755);
	cr_assert_eq(st_snapdir_export(th_store, m, dir, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(st_snapcache_new(NULL, &c), 0);
	for (int warm = 0; warm < 2; warm++) {
		/* Learn the steps (and open what the cache keeps open). */
		cr_assert_eq(st_snapdir_open(dir, ST_SNAPDIR_VERIFY, c, &d, why, sizeof(why)), 0, "%s", why);
		st_snapdir_close(d);
		if (!warm)
			st_snapcache_drop(c);
		int fds = count_fds();
		st_sys_fault_set(0, 0);
		cr_assert_eq(st_snapdir_open(dir, ST_SNAPDIR_VERIFY, c, &d, why, sizeof(why)), 0, "%s", why);
		uint64_t steps = st_sys_calls();
		st_snapdir_close(d);
		cr_assert_gt(steps, 10, "opening counts its calls (%lu)", (unsigned long)steps);
		for (size_t e = 0; e < 2; e++)
			for (uint64_t i = 1; i <= steps; i++) {
				if (!warm)
					st_snapcache_drop(c);
				why[0] = '\0';
				st_sys_fault_set(i, errs[e]);
				int rc = st_snapdir_open(dir, ST_SNAPDIR_VERIFY, c, &d, why, sizeof(why));
				st_sys_fault_set(0, 0);
				if (rc == 0) {
					const struct st_manifest *got = st_snapdir_manifest(d);
					cr_assert_eq(got->nlayers, m->nlayers);
					for (uint32_t k = 0; k < got->nlayers; k++) {
						st_id h;
						uint64_t size;
						int fd;
						cr_assert_eq(st_snapdir_layer_dup(d, &got->layers[k].id, &fd), 0);
						cr_assert_eq(st_hash_fd(fd, &h, &size), 0);
						cr_assert(st_id_equal(&h, &got->layers[k].id), "step %lu: layer %u differs",
							  (unsigned long)i, k);
						close(fd);
					}
					st_snapdir_close(d);
				} else {
					cr_assert(rc == -errs[e] || rc == -ENOMEM, "step %lu: error %d (%s) is not the injected one",
						  (unsigned long)i, rc, why);
					cr_assert(why[0], "step %lu: failure without a why", (unsigned long)i);
				}
				if (!warm)
					st_snapcache_drop(c);
				cr_assert_eq(count_fds(), fds, "step %lu (%s): a descriptor left open", (unsigned long)i,
					     strerror(errs[e]));
			}
	}
	cr_assert_eq(st_snapdir_open(dir, ST_SNAPDIR_VERIFY, c, &d, why, sizeof(why)), 0, "%s", why);
	st_snapdir_close(d);
	st_snapcache_free(c);
	st_manifest_free(p);
	st_manifest_free(m);
	free(img);
}
