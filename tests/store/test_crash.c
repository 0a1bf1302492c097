/* test_crash.c: a real kill -9 in the middle of puts and exports leaves only whole blobs and snapshots. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"
#include "tests/store/helpers.h"

TestSuite(crash, .init = th_setup_store, .fini = th_teardown);

/* Child: put blobs of varied sizes forever, each under both policies. */
static void put_forever(void)
{
	static uint8_t buf[1 << 20];
	struct st_store *s;

	if (st_store_open(th_path("store"), 0, &s) < 0)
		_exit(2);
	for (uint64_t i = 0;; i++) {
		size_t len = (size_t)((i * 7919) % sizeof(buf)) + 1;
		th_fill(buf, len, i);
		st_store_set_sync(s, i % 2 ? ST_SYNC_FULL : ST_SYNC_NONE);
		if (st_blob_put(s, buf, len, NULL, NULL) < 0)
			_exit(3);
	}
}

static void sleep_us(long us)
{
	struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000 };
	nanosleep(&ts, NULL);
}

Test(crash, kill9_during_puts_leaves_only_whole_blobs)
{
	for (int round = 0; round < 20; round++) {
		int status;
		pid_t pid = fork();

		cr_assert_geq(pid, 0);
		if (pid == 0)
			put_forever();
		sleep_us(2000 + round * 1500);
		kill(pid, SIGKILL);
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		cr_assert(WIFSIGNALED(status), "child exited by itself (status %d)", status);
		cr_assert(th_all_blobs_valid(th_store), "round %d: a published blob does not match its name", round);
		/* Leftover temp files are swept; the store stays usable. */
		cr_assert_eq(st_tmp_sweep(th_store, 0, NULL), 0);
		cr_assert_eq(th_count_entries(th_path("store/tmp")), 0);
	}
	cr_assert_gt(th_count_blobs(th_store), 0, "the children managed to publish something");
}

Test(crash, kill9_during_export_never_leaves_a_partial_directory)
{
	size_t n = 1024;
	uint8_t *img = calloc(n, ST_PAGE_SIZE);
	struct st_manifest *m;

	th_fill(img, n * ST_PAGE_SIZE, 11);
	cr_assert_eq(st_ingest_image(th_store, img, n * ST_PAGE_SIZE, NULL, &m, NULL), 0);
	free(img);
	mkdir(th_path("out"), 0755);
	for (int round = 0; round < 10; round++) {
		char name[64];
		int status;
		pid_t pid;

		snprintf(name, sizeof(name), "out/s%d", round);
		pid = fork();
		cr_assert_geq(pid, 0);
		if (pid == 0) {
			for (int k = 0;; k++) {
				char sub[96];
				snprintf(sub, sizeof(sub), "%s-%d", th_path(name), k);
				if (st_snapdir_export(th_store, m, sub, NULL, 0) < 0)
					_exit(3);
			}
		}
		sleep_us(3000 + round * 2000);
		kill(pid, SIGKILL);
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		cr_assert(WIFSIGNALED(status));
	}
	/* Every directory with a final name is complete and verifies; only
	 * dot-named temp directories may be left by the kills, and the next
	 * export to the same name removes those of dead processes. */
	for (int round = 0; round < 10; round++) {
		char sub[96];
		snprintf(sub, sizeof(sub), "%s/s%d-0", th_path("out"), round);
		struct stat st;
		if (stat(sub, &st) < 0)
			cr_assert_eq(st_snapdir_export(th_store, m, sub, NULL, 0), 0);
	}
	DIR *d = opendir(th_path("out"));
	struct dirent *e;
	int complete = 0;
	while ((e = readdir(d))) {
		char p[600], why[ST_WHY_LEN];
		struct st_manifest *back;
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", th_path("out"), e->d_name);
		cr_assert_eq(st_snapdir_read(p, &back, why, sizeof(why)), 0, "%s: %s", e->d_name, why);
		cr_assert_eq(st_snapdir_verify(p, back, why, sizeof(why)), 0, "%s: %s", e->d_name, why);
		st_manifest_free(back);
		complete++;
	}
	closedir(d);
	cr_assert_gt(complete, 0);
	/* Leftovers of s<round>-0 were swept by the re-export above. */
	d = opendir(th_path("out"));
	while ((e = readdir(d))) {
		if (e->d_name[0] != '.' || !strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		cr_assert(!strstr(e->d_name, "-0.strata-export."), "stale temp dir %s survived", e->d_name);
	}
	closedir(d);
	st_manifest_free(m);
}
