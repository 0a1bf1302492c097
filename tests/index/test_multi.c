/* test_multi.c: several processes at once, map growth, and a real kill -9 loop. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/index/helpers.h"

static struct tstore T;

static void setup(void) { ts_open(&T); }
static void teardown(void) { ts_close(&T); }

TestSuite(multi, .init = setup, .fini = teardown, .timeout = 240);

/* In a forked child: open the store afresh (never reuse the parent's LMDB env). */
static struct ix *child_open(struct st_store **s, uint64_t map)
{
	struct ix_opts o = { .map_initial = map };
	struct ix *ix;

	if (st_store_open(T.path, 0, s) < 0 || ix_open(*s, &o, &ix) < 0)
		_exit(90);
	return ix;
}

static int child_commit(struct st_store *s, struct ix *ix, const unsigned *seeds, unsigned n,
			const char *tag)
{
	struct st_manifest *m = mk_manifest(s, seeds, n, NULL);
	int rc = ix_snap_commit(ix, m, tag, 0, NULL);

	st_manifest_free(m);
	return rc;
}

Test(multi, two_processes_commit_at_once)
{
	enum { PER = 40 };
	pid_t pid[2];

	for (int p = 0; p < 2; p++) {
		pid[p] = fork();
		cr_assert_geq(pid[p], 0);
		if (pid[p] == 0) {
			struct st_store *s;
			struct ix *ix = child_open(&s, 0);
			for (unsigned i = 0; i < PER; i++) {
				unsigned seeds[] = { 7, 1000 + p * PER + i };
				char tag[32];
				snprintf(tag, sizeof(tag), "p%d-%u", p, i);
				if (child_commit(s, ix, seeds, 2, tag) < 0)
					_exit(1);
			}
			ix_close(ix);
			st_store_close(s);
			_exit(0);
		}
	}
	for (int p = 0; p < 2; p++) {
		int st;
		cr_assert_eq(waitpid(pid[p], &st, 0), pid[p]);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d failed (status %d)", p, st);
	}
	st_id shared = put_page(T.s, 7);
	struct ix_fsck_stats fs;
	cr_assert_eq(ix_fsck(T.ix, IX_FSCK_HASH, NULL, NULL, &fs), 0);
	cr_assert_eq(fs.snapshots, 2 * PER, "every commit of both processes is there");
	cr_assert_eq(blob_refs(T.ix, &shared), 2 * PER, "no refcount update was lost");
}

Test(multi, the_map_grows_and_other_processes_follow)
{
	enum { SNAPS = 60, LAYERS = 40 };
	struct ix_opts o = { .map_initial = 128 << 10 };
	struct ix *small;
	struct stat sb;
	char data[600];
	unsigned seeds[LAYERS];
	int st;

	/* This process keeps a small-map env open while a child grows the map. */
	cr_assert_eq(ix_open(T.s, &o, &small), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct st_store *s;
		struct ix *ix = child_open(&s, 128 << 10);
		for (unsigned i = 0; i < SNAPS; i++) {
			for (unsigned j = 0; j < LAYERS; j++)
				seeds[j] = i * LAYERS + j;
			if (child_commit(s, ix, seeds, LAYERS, NULL) < 0)
				_exit(1);
		}
		_exit(0);
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	snprintf(data, sizeof(data), "%s/index/data.mdb", T.path);
	cr_assert_eq(stat(data, &sb), 0);
	cr_assert_gt(sb.st_size, 128 << 10, "the data outgrew the first map (%lld bytes)", (long long)sb.st_size);

	/* The parent's env still has the small map: its next txns must adopt the new size. */
	struct ix_fsck_stats fs;
	cr_assert_eq(ix_fsck(small, 0, NULL, NULL, &fs), 0);
	cr_assert_eq(fs.snapshots, SNAPS);
	for (unsigned j = 0; j < LAYERS; j++)
		seeds[j] = 100000 + j;
	struct st_manifest *m = mk_manifest(T.s, seeds, LAYERS, NULL);
	cr_assert_eq(ix_snap_commit(small, m, "after", 0, NULL), 0);
	st_manifest_free(m);
	ix_close(small);
	cr_assert_eq(fsck_errors(T.ix), 0);
}

/* The kill -9 loop: a child imports, tags, removes and collects in a loop and
 * is killed at a random moment; the store must stay consistent and every
 * snapshot committed before the loop must stay intact. */
enum { DIRS = 4, ANCHORS = 3 };
static char dirs[DIRS][600];

static void crash_child(unsigned seed, int progress_fd)
{
	struct st_store *s;
	struct ix *ix = child_open(&s, 0);
	char tag[32];

	srand(seed);
	for (unsigned i = 0;; i++) {
		if (write(progress_fd, "x", 1) != 1) /* one byte per round: the parent kills mid-round */
			_exit(91);
		unsigned d = (unsigned)rand() % DIRS;
		snprintf(tag, sizeof(tag), "loop-%u", d);
		ix_import_dir(ix, dirs[d], tag, IX_TAG_FORCE, NULL, NULL, NULL, 0);
		if (i % 3 == 1) {
			snprintf(tag, sizeof(tag), "loop-%u", (unsigned)rand() % DIRS);
			ix_tag_del(ix, tag, IX_TAG_PRUNE, NULL);
		}
		if (i % 4 == 2)
			ix_gc(ix, 0, NULL);
	}
}

static void check_anchors(const st_id *anchors)
{
	struct ix_txn *t;

	cr_assert_eq(ix_txn_begin(T.ix, &t), 0);
	for (unsigned a = 0; a < ANCHORS; a++) {
		char tag[32];
		st_id got;
		struct st_manifest *m;
		snprintf(tag, sizeof(tag), "anchor-%u", a);
		cr_assert_eq(ix_tag_get(t, tag, &got), 0, "%s lost", tag);
		cr_assert(st_id_equal(&got, &anchors[a]));
		cr_assert_eq(ix_snap_get(t, &got, &m), 0);
		for (uint32_t i = 0; i < m->nlayers; i++)
			cr_assert_eq(st_blob_verify(T.s, &m->layers[i].id), 0, "anchor layer damaged");
		st_manifest_free(m);
	}
	ix_txn_end(t);
}

Test(multi, kill_9_at_random_moments_leaves_the_store_consistent)
{
	struct tstore src;
	st_id anchors[ANCHORS];
	int iters = getenv("STRATA_CRASH_ITERS") ? atoi(getenv("STRATA_CRASH_ITERS")) : 40;

	/* Snapshot directories to import, from a separate store. */
	ts_open(&src);
	for (unsigned d = 0; d < DIRS; d++) {
		unsigned seeds[48];
		char tag[16];
		for (unsigned j = 0; j < 48; j++)
			seeds[j] = 5000 + d * 16 + j; /* neighbours share 32 layers */
		snprintf(tag, sizeof(tag), "d%u", d);
		struct st_manifest *m = mk_manifest(src.s, seeds, 48, NULL);
		cr_assert_eq(ix_snap_commit(src.ix, m, tag, 0, NULL), 0);
		st_manifest_free(m);
		snprintf(dirs[d], sizeof(dirs[d]), "%s/dir%u", T.dir, d);
		cr_assert_eq(ix_export(src.ix, tag, dirs[d]), 0);
	}
	ts_close(&src);
	for (unsigned a = 0; a < ANCHORS; a++) {
		unsigned seeds[] = { 1 + a, 5000 + a }; /* shares a layer with dir 0 */
		char tag[32];
		snprintf(tag, sizeof(tag), "anchor-%u", a);
		anchors[a] = commit_seeds(&T, seeds, 2, NULL, tag);
	}

	srand((unsigned)time(NULL));
	uint64_t gen0, gen1;
	cr_assert_eq(ix_generation(T.ix, &gen0), 0);
	int killed_mid = 0;
	for (int it = 0; it < iters; it++) {
		int pfd[2];
		char buf[4];
		cr_assert_eq(pipe(pfd), 0);
		pid_t pid = fork();
		cr_assert_geq(pid, 0);
		if (pid == 0) {
			close(pfd[0]);
			crash_child((unsigned)it * 7919u + (unsigned)getpid(), pfd[1]);
		}
		close(pfd[1]);
		/* Let it finish 0-3 rounds, then kill it at a random moment of the next. */
		for (int r = rand() % 4; r >= 0; r--)
			cr_assert_eq(read(pfd[0], buf, 1), 1);
		usleep((useconds_t)(rand() % 4000));
		cr_assert_eq(kill(pid, SIGKILL), 0);
		int st;
		cr_assert_eq(waitpid(pid, &st, 0), pid);
		close(pfd[0]);
		if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
			killed_mid++;
		/* After every crash: consistent (orphans allowed), anchors intact. */
		int errs = ix_fsck(T.ix, it % 5 == 4 ? IX_FSCK_HASH : 0, NULL, NULL, NULL);
		cr_assert_eq(errs, 0, "fsck after crash %d: %d errors", it, errs);
		check_anchors(anchors);
	}
	cr_assert_eq(killed_mid, iters, "every child was killed, not exited");
	cr_assert_eq(ix_generation(T.ix, &gen1), 0);
	cr_assert_gt(gen1, gen0 + (uint64_t)iters / 4, "the children made progress between kills");
	/* gc reclaims what the crashes left; the store is then exactly the snapshots. */
	struct ix_gc_stats gs;
	cr_assert_eq(ix_gc(T.ix, 0, &gs), 0);
	struct ix_fsck_stats fs;
	cr_assert_eq(ix_fsck(T.ix, IX_FSCK_HASH, NULL, NULL, &fs), 0);
	cr_assert_eq(fs.orphans, 0);
	cr_assert_eq(fs.blob_files, fs.blobs);
	check_anchors(anchors);
}
