/* test_stage.c: imports without FUSE: hashing at flush, commit when complete, refusals, abandonment. */
#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs/fs_int.h"
#include "store/sys.h"

struct env {
	char dir[64];
	struct fs_config cfg;
	struct fs fs;
	struct st_store *src;      /* where the snapshot to copy comes from */
	struct st_manifest *m;
	char *json;                /* its manifest.json bytes */
	size_t jsonlen;
	char *layer;               /* its one layer */
	size_t layerlen;
	char hex[ST_ID_HEX_LEN + 1];
	char lastlog[1024];
};

static struct env E;

static void capture_log(void *ctx, int prio, const char *msg)
{
	snprintf(E.lastlog, sizeof(E.lastlog), "%s", msg);
}

static int rm_cb(const char *p, const struct stat *sb, int f, struct FTW *ftw)
{
	return remove(p);
}

static void setup(void)
{
	char path[128], why[ST_WHY_LEN];
	uint8_t img[8 * ST_PAGE_SIZE] = { 0 };
	int fd;

	memset(&E, 0, sizeof(E));
	snprintf(E.dir, sizeof(E.dir), "/tmp/strata-test-stage.XXXXXX");
	cr_assert_not_null(mkdtemp(E.dir));
	for (size_t i = 0; i < sizeof(img); i += 64)
		img[i] = (uint8_t)(i / 64 + 1);
	snprintf(path, sizeof(path), "%s/src", E.dir);
	cr_assert_eq(st_store_init(path, NULL), 0);
	cr_assert_eq(st_store_open(path, 0, &E.src), 0);
	cr_assert_eq(st_ingest_image(E.src, img, sizeof(img), NULL, &E.m, NULL), 0);
	cr_assert_eq(st_manifest_encode(E.m, &E.json, &E.jsonlen, why, sizeof(why)), 0);
	E.layerlen = E.m->layers[0].pages * ST_PAGE_SIZE;
	E.layer = malloc(E.layerlen);
	cr_assert_eq(st_blob_open(E.src, &E.m->layers[0].id, &fd), 0);
	cr_assert_eq(pread(fd, E.layer, E.layerlen, 0), (ssize_t)E.layerlen);
	close(fd);
	st_id_format(&E.m->layers[0].id, E.hex);

	snprintf(path, sizeof(path), "%s/dst", E.dir);
	cr_assert_eq(st_store_init(path, NULL), 0);
	E.cfg.log = capture_log;
	E.cfg.stage_timeout_s = 1;
	E.fs.cfg = &E.cfg;
	E.fs.stage_mem_max = FS_STAGE_MEMORY_DEFAULT;
	pthread_mutex_init(&E.fs.stage_lock, NULL);
	cr_assert_eq(st_store_open(path, 0, &E.fs.store), 0);
	cr_assert_eq(ix_open(E.fs.store, NULL, &E.fs.ix), 0);
	cr_assert_eq(fs_view_init(&E.fs), 0);
}

static void teardown(void)
{
	fs_stage_sweep(&E.fs, true);
	fs_view_fini(&E.fs);
	ix_close(E.fs.ix);
	st_store_close(E.fs.store);
	st_store_close(E.src);
	st_manifest_free(E.m);
	free(E.json);
	free(E.layer);
	nftw(E.dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static bool tagged(const char *name)
{
	struct ix_txn *t;
	st_id id;

	cr_assert_eq(ix_txn_begin(E.fs.ix, &t), 0);
	bool found = ix_tag_get(t, name, &id) == 0;
	ix_txn_end(t);
	return found;
}

/* Write a whole file into the import and close it; returns what close() would. */
static int put(struct fs_stage *s, bool in_layers, const char *name, const void *buf, size_t len)
{
	struct fs_sfile *f;
	int rc = fs_stage_create(&E.fs, s, in_layers, NULL, name, true, &f);

	if (rc < 0)
		return rc;
	for (size_t off = 0; off < len; off += 4096) {
		size_t n = len - off < 4096 ? len - off : 4096;
		rc = fs_stage_write(&E.fs, s, f, off, (const char *)buf + off, n);
		if (rc < 0)
			return rc;
	}
	return fs_stage_flush(&E.fs, s, f);
}

TestSuite(fs_stage, .init = setup, .fini = teardown, .timeout = 30);

Test(fs_stage, commits_when_manifest_and_layers_are_in)
{
	struct fs_stage *s;

	cr_assert_eq(fs_stage_mkdir(&E.fs, "snap", &s), 0);
	cr_assert_eq(fs_stage_mkdir_layers(&E.fs, s), 0);
	cr_assert_eq(put(s, false, "manifest.json", E.json, E.jsonlen), 0);
	cr_assert(!tagged("snap"), "nothing visible before the layer arrives");
	cr_assert_eq(put(s, true, E.hex, E.layer, E.layerlen), 0);
	cr_assert(tagged("snap"));
	fs_stage_unref(&E.fs, s);
}

Test(fs_stage, layer_first_then_manifest_commits_too)
{
	struct fs_stage *s;

	cr_assert_eq(fs_stage_mkdir(&E.fs, "snap", &s), 0);
	cr_assert_eq(fs_stage_mkdir_layers(&E.fs, s), 0);
	cr_assert_eq(put(s, true, E.hex, E.layer, E.layerlen), 0);
	cr_assert(!tagged("snap"));
	cr_assert_eq(put(s, false, "manifest.json", E.json, E.jsonlen), 0);
	cr_assert(tagged("snap"));
	fs_stage_unref(&E.fs, s);
}

Test(fs_stage, corrupt_layer_is_ebadmsg_and_never_committed)
{
	struct fs_stage *s;

	E.layer[100] ^= 1;
	cr_assert_eq(fs_stage_mkdir(&E.fs, "snap", &s), 0);
	cr_assert_eq(fs_stage_mkdir_layers(&E.fs, s), 0);
	/* Before the manifest says how long the layer is, more bytes could
	 * still come: its close is not an error; the manifest's close is. */
	cr_assert_eq(put(s, true, E.hex, E.layer, E.layerlen), 0);
	cr_assert_eq(put(s, false, "manifest.json", E.json, E.jsonlen), -EBADMSG);
	cr_assert(strstr(E.lastlog, "do not hash"), "log: %s", E.lastlog);
	cr_assert(!tagged("snap"));
	fs_stage_unref(&E.fs, s);
}

Test(fs_stage, corrupt_layer_after_the_manifest_fails_its_own_close)
{
	struct fs_stage *s;

	E.layer[100] ^= 1;
	cr_assert_eq(fs_stage_mkdir(&E.fs, "snap", &s), 0);
	cr_assert_eq(fs_stage_mkdir_layers(&E.fs, s), 0);
	cr_assert_eq(put(s, false, "manifest.json", E.json, E.jsonlen), 0);
	cr_assert_eq(put(s, true, E.hex, E.layer, E.layerlen), -EBADMSG);
	cr_assert(strstr(E.lastlog, "do not hash"), "log: %s", E.lastlog);
	cr_assert(!tagged("snap"));
	fs_stage_unref(&E.fs, s);
}

Test(fs_stage, a_close_before_the_last_byte_is_not_the_end)
{
	struct fs_stage *s;
	struct fs_sfile *m, *l;

	/* `cat m > manifest.json`: bash dup2()s and closes the first
	 * descriptor before cat writes anything: a flush at 0 bytes. */
	cr_assert_eq(fs_stage_mkdir(&E.fs, "snap", &s), 0);
	cr_assert_eq(fs_stage_mkdir_layers(&E.fs, s), 0);
	cr_assert_eq(fs_stage_create(&E.fs, s, false, NULL, "manifest.json", false, &m), 0);
	cr_assert_eq(fs_stage_open_write(&E.fs, s, m, false), 0);
	cr_assert_eq(fs_stage_flush(&E.fs, s, m), 0);
	cr_assert_eq(fs_stage_write(&E.fs, s, m, 0, E.json, E.jsonlen), (int)E.jsonlen);
	cr_assert_eq(fs_stage_flush(&E.fs, s, m), 0);
	fs_stage_release(&E.fs, s, m, true);
	/* `cat part1 >> L; cat part2 >> L`: two opens, two releases */
	cr_assert_eq(fs_stage_create(&E.fs, s, true, NULL, E.hex, false, &l), 0);
	cr_assert_eq(fs_stage_open_write(&E.fs, s, l, false), 0);
	cr_assert_eq(fs_stage_write(&E.fs, s, l, 0, E.layer, 6000), 6000);
	cr_assert_eq(fs_stage_flush(&E.fs, s, l), 0);
	fs_stage_release(&E.fs, s, l, true);
	cr_assert(!tagged("snap"));
	cr_assert_eq(fs_stage_open_write(&E.fs, s, l, false), 0);
	cr_assert_eq(fs_stage_write(&E.fs, s, l, 6000, E.layer + 6000, E.layerlen - 6000), (int)(E.layerlen - 6000));
	cr_assert_eq(fs_stage_flush(&E.fs, s, l), 0);
	fs_stage_release(&E.fs, s, l, true);
	cr_assert(tagged("snap"));
	fs_stage_unref(&E.fs, s);
}

Test(fs_stage, unfinished_import_is_set_aside_and_its_name_freed)
{
	struct fs_stage *s, *again;
	char *text;
	size_t len;

	cr_assert_eq(fs_stage_mkdir(&E.fs, "snap", &s), 0);
	cr_assert_eq(fs_stage_mkdir_layers(&E.fs, s), 0);
	cr_assert_eq(put(s, false, "manifest.json", E.json, E.jsonlen), 0);
	cr_assert_eq(fs_stage_status(&E.fs, s, &text, &len), 0);
	cr_assert(strstr(text, "lacks: layer ") && strstr(text, E.hex), "status: %s", text);
	free(text);
	cr_assert_eq(fs_stage_mkdir(&E.fs, "snap", &again), -EEXIST, "still being copied");
	sleep(3);
	cr_assert_null(fs_stage_find(&E.fs, "snap"), "set aside: snapshots/snap is free");
	struct fs_stage *any = fs_stage_find_any(&E.fs, "snap");
	cr_assert_not_null(any, "imports/snap still tells what it lacks");
	fs_stage_unref(&E.fs, any);
	cr_assert_eq(fs_stage_mkdir(&E.fs, "snap", &again), 0, "a new copy takes the name");
	cr_assert(strstr(E.lastlog, "started"), "log: %s", E.lastlog);
	cr_assert_eq(fs_stage_mkdir_layers(&E.fs, again), 0);
	cr_assert_eq(put(again, false, "manifest.json", E.json, E.jsonlen), 0);
	cr_assert_eq(put(again, true, E.hex, E.layer, E.layerlen), 0);
	cr_assert(tagged("snap"));
	fs_stage_unref(&E.fs, again);
	fs_stage_unref(&E.fs, s);
}

Test(fs_stage, write_behind_the_end_is_einval)
{
	struct fs_stage *s;
	struct fs_sfile *f;

	cr_assert_eq(fs_stage_mkdir(&E.fs, "snap", &s), 0);
	cr_assert_eq(fs_stage_mkdir_layers(&E.fs, s), 0);
	cr_assert_eq(fs_stage_create(&E.fs, s, true, NULL, E.hex, true, &f), 0);
	cr_assert_eq(fs_stage_write(&E.fs, s, f, 0, E.layer, 8192), 8192);
	cr_assert_eq(fs_stage_write(&E.fs, s, f, 4096, E.layer, 4096), -EINVAL);
	fs_stage_unref(&E.fs, s);
}

Test(fs_stage, temp_name_is_checked_at_rename)
{
	struct fs_stage *s;

	cr_assert_eq(fs_stage_mkdir(&E.fs, "snap", &s), 0);
	cr_assert_eq(fs_stage_mkdir_layers(&E.fs, s), 0);
	cr_assert_eq(put(s, false, ".manifest.json.x", E.json, E.jsonlen), 0);
	cr_assert_eq(fs_stage_rename(&E.fs, s, false, NULL, ".manifest.json.x", false, NULL, "manifest.json"), 0);
	cr_assert_eq(put(s, true, ".tmp.1", E.layer, E.layerlen), 0);
	cr_assert_eq(fs_stage_rename(&E.fs, s, true, NULL, ".tmp.1", true, NULL, "00000000000000000000000000000000"), -EBADMSG);
	cr_assert(!tagged("snap"));
	cr_assert_eq(put(s, true, ".tmp.2", E.layer, E.layerlen), 0);
	cr_assert_eq(fs_stage_rename(&E.fs, s, true, NULL, ".tmp.2", true, NULL, E.hex), 0);
	cr_assert(tagged("snap"));
	fs_stage_unref(&E.fs, s);
}

Test(fs_stage, invalid_manifest_is_einval_with_reason)
{
	struct fs_stage *s;

	cr_assert_eq(fs_stage_mkdir(&E.fs, "snap", &s), 0);
	cr_assert_eq(put(s, false, "manifest.json", "{\"version\":1", 12), 0, "not a whole object yet");
	cr_assert_eq(fs_stage_unlink(&E.fs, s, false, NULL, "manifest.json"), 0);
	cr_assert_eq(put(s, false, "manifest.json", "{\"version\":1}", 13), -EINVAL);
	cr_assert(strstr(E.lastlog, "manifest.json refused"), "log: %s", E.lastlog);
	fs_stage_unref(&E.fs, s);
}

Test(fs_stage, names_outside_the_format_are_extras_or_refused)
{
	struct fs_stage *s;
	struct fs_sfile *f;

	cr_assert_eq(fs_stage_mkdir(&E.fs, "bad/name", &s), -EINVAL);
	cr_assert_eq(fs_stage_mkdir(&E.fs, "-x", &s), -EINVAL);
	cr_assert_eq(fs_stage_mkdir(&E.fs, "snap", &s), 0);
	cr_assert_eq(fs_stage_create(&E.fs, s, false, NULL, "README", true, &f), 0, "an extra: accepted and ignored");
	cr_assert_eq(fs_stage_create(&E.fs, s, true, NULL, E.hex, true, &f), -ENOENT, "no layers/ yet");
	struct fs_stage *again;
	cr_assert_eq(fs_stage_mkdir(&E.fs, "snap", &again), -EEXIST);
	fs_stage_unref(&E.fs, s);
}

Test(fs_stage, idle_import_is_abandoned_and_its_bytes_removed)
{
	struct fs_stage *s;
	struct fs_sfile *f;
	char tmp[128];

	cr_assert_eq(fs_stage_mkdir(&E.fs, "snap", &s), 0);
	cr_assert_eq(fs_stage_mkdir_layers(&E.fs, s), 0);
	cr_assert_eq(fs_stage_create(&E.fs, s, true, NULL, E.hex, true, &f), 0);
	cr_assert_eq(fs_stage_write(&E.fs, s, f, 0, E.layer, 4096), 4096);
	sleep(2);
	cr_assert_eq(fs_stage_sweep(&E.fs, false), 1);
	cr_assert(strstr(E.lastlog, "abandoned"), "log: %s", E.lastlog);
	struct fs_stage *gone = fs_stage_find(&E.fs, "snap");
	cr_assert_null(gone);
	snprintf(tmp, sizeof(tmp), "rmdir %s/dst/tmp 2>/dev/null", E.dir);
	cr_assert_eq(system(tmp), 0, "staging dir is empty again");
	fs_stage_unref(&E.fs, s);
}

/* Import the test snapshot as `name` through the stage: mkdir, layers/,
 * manifest.json, the layer; the first failure's code, else 0. */
static int import_once(const char *name)
{
	struct fs_stage *s;
	int rc = fs_stage_mkdir(&E.fs, name, &s);

	if (rc < 0)
		return rc;
	rc = fs_stage_mkdir_layers(&E.fs, s);
	if (rc == 0)
		rc = put(s, false, "manifest.json", E.json, E.jsonlen);
	if (rc == 0)
		rc = put(s, true, E.hex, E.layer, E.layerlen);
	fs_stage_unref(&E.fs, s);
	return rc;
}

static uint64_t fsck_errors(void)
{
	struct ix_fsck_stats st;
	int rc = ix_fsck(E.fs.ix, IX_FSCK_HASH, NULL, NULL, &st);

	cr_assert_geq(rc, 0, "fsck: %s", ix_strerror(rc));
	return (uint64_t)rc;
}

/* Remove the imported snapshot and its blobs: the next import writes them anew. */
static void unimport(const char *name)
{
	cr_assert_eq(ix_tag_del(E.fs.ix, name, IX_TAG_PRUNE, NULL), 0);
	cr_assert_eq(ix_gc(E.fs.ix, 0, NULL), 0);
	cr_assert(!st_blob_has(E.fs.store, &E.m->layers[0].id), "gc removed the layer");
	/* As a lookup in the mount would: the view sees the tag gone. */
	struct fs_tags *old = NULL;
	cr_assert_geq(fs_view_refresh(&E.fs, false, &old), 0);
	if (old)
		fs_tags_put(&E.fs, old);
}

/* Fail each seam step (store/sys.h) of an import into the stage, in turn:
 * each try fails with an error (never a crash) or imports the snapshot
 * whole; the store stays consistent (fsck, hashing every blob, finds no
 * error); once the fault is gone and the unfinished import is dropped, the
 * same import succeeds. Every step fires its fault and most fail the
 * import, so the sweep cannot pass vacuously. */
Test(fs_stage, every_step_of_an_import_fails_cleanly)
{
	static const int errs[] = { EIO, ENOSPC, ENOMEM };
	uint64_t failed = 0, tries = 0;

	/* The first import also fills the view's caches: count a later one. */
	cr_assert_eq(import_once("snap"), 0);
	unimport("snap");
	/* Each finished import still listed is checked against the index (a
	 * read transaction, one allocation) when the name is made again: every
	 * try starts with none listed, so each counts the same steps. */
	fs_stage_sweep(&E.fs, true);
	st_sys_fault_set(0, 0);
	cr_assert_eq(import_once("snap"), 0);
	uint64_t steps = st_sys_calls();
	cr_assert(tagged("snap"));
	unimport("snap");
	cr_assert_gt(steps, 10, "an import counts its calls (%lu)", (unsigned long)steps);
	for (size_t e = 0; e < 3; e++)
		for (uint64_t i = 1; i <= steps; i++, tries++) {
			fs_stage_sweep(&E.fs, true);
			st_sys_fault_set(i, errs[e]);
			int rc = import_once("snap");
			bool fired = st_sys_fault_fired();
			st_sys_fault_set(0, 0);
			cr_assert(fired, "step %lu of %lu (%s): the fault never fired", (unsigned long)i,
				  (unsigned long)steps, strerror(errs[e]));
			cr_assert_leq(rc, 0);
			/* What a timeout does to an import left unfinished. */
			fs_stage_sweep(&E.fs, true);
			cr_assert_eq(fsck_errors(), 0, "step %lu (%s): the store is inconsistent", (unsigned long)i,
				     strerror(errs[e]));
			if (rc < 0) {
				failed++;
				cr_assert(rc == -errs[e] || rc == -ENOMEM || rc == -EIO,
					  "step %lu: error %d (%s) is not the injected %s (%s)", (unsigned long)i, rc,
					  strerror(-rc), strerror(errs[e]), E.lastlog);
				cr_assert(!tagged("snap"), "step %lu: a failed import is visible", (unsigned long)i);
				rc = import_once("snap");
				cr_assert_eq(rc, 0, "step %lu (%s): the import again, without the fault: %s (%s)",
					     (unsigned long)i, strerror(errs[e]), strerror(-rc), E.lastlog);
			}
			cr_assert(tagged("snap"), "step %lu", (unsigned long)i);
			unimport("snap");
		}
	cr_assert_gt(failed, tries / 2, "most steps of an import fail it (%lu of %lu)", (unsigned long)failed,
		     (unsigned long)tries);
}

/* A layer file open for writing is unlinked (`rm -rf` of the import during
 * a `cp` of it) and the copy writes again: the write, a truncate and the
 * close fail with ESTALE, nothing is published, and another import in
 * progress completes. Before, the unlink dropped the layer's writer but
 * left the file writing, and the next write called
 * st_blob_writer_write(NULL): the daemon crashed and every import was lost. */
Test(fs_stage, a_write_after_unlink_is_estale_and_the_other_import_completes)
{
	struct fs_stage *s, *other;
	struct fs_sfile *f;

	cr_assert_eq(fs_stage_mkdir(&E.fs, "other", &other), 0);
	cr_assert_eq(fs_stage_mkdir_layers(&E.fs, other), 0);
	cr_assert_eq(put(other, false, "manifest.json", E.json, E.jsonlen), 0);

	cr_assert_eq(fs_stage_mkdir(&E.fs, "snap", &s), 0);
	cr_assert_eq(fs_stage_mkdir_layers(&E.fs, s), 0);
	cr_assert_eq(fs_stage_create(&E.fs, s, true, NULL, E.hex, true, &f), 0);
	cr_assert_eq(fs_stage_open_write(&E.fs, s, f, false), 0);
	cr_assert_eq(fs_stage_write(&E.fs, s, f, 0, E.layer, 4096), 4096);
	cr_assert_eq(fs_stage_unlink(&E.fs, s, true, NULL, E.hex), 0);
	cr_assert_eq(fs_stage_write(&E.fs, s, f, 4096, E.layer + 4096, 4096), -ESTALE);
	cr_assert(strstr(E.lastlog, "after it was removed"), "log: %s", E.lastlog);
	cr_assert_eq(fs_stage_truncate(&E.fs, s, f, 0), -ESTALE, "an emptying truncate restarts nothing");
	cr_assert_eq(fs_stage_write(&E.fs, s, f, 0, E.layer, 4096), -ESTALE);
	cr_assert_eq(fs_stage_flush(&E.fs, s, f), -ESTALE);
	fs_stage_release(&E.fs, s, f, true);
	/* The same name again is a new file, which imports. */
	cr_assert_eq(put(s, false, "manifest.json", E.json, E.jsonlen), 0);
	cr_assert_eq(put(s, true, E.hex, E.layer, E.layerlen), 0);
	cr_assert(tagged("snap"));
	cr_assert_eq(put(other, true, E.hex, E.layer, E.layerlen), 0);
	cr_assert(tagged("other"), "the other import completes");
	fs_stage_unref(&E.fs, s);
	fs_stage_unref(&E.fs, other);
}

/* Every descriptor of an import that was removed (rmdir, rm imports/NAME,
 * the timeout) fails cleanly: write, truncate, read, flush, fsync (flush)
 * and release of a layer, of manifest.json and of an extra. */
Test(fs_stage, every_descriptor_of_a_removed_import_is_estale)
{
	struct fs_stage *s;
	struct fs_sfile *l, *m, *x;
	char *copy;
	size_t got;

	cr_assert_eq(fs_stage_mkdir(&E.fs, "snap", &s), 0);
	cr_assert_eq(fs_stage_mkdir_layers(&E.fs, s), 0);
	cr_assert_eq(fs_stage_create(&E.fs, s, true, NULL, E.hex, true, &l), 0);
	cr_assert_eq(fs_stage_open_write(&E.fs, s, l, false), 0);
	cr_assert_eq(fs_stage_create(&E.fs, s, false, NULL, "manifest.json", true, &m), 0);
	cr_assert_eq(fs_stage_open_write(&E.fs, s, m, false), 0);
	cr_assert_eq(fs_stage_create(&E.fs, s, false, NULL, "README", true, &x), 0);
	cr_assert_eq(fs_stage_open_write(&E.fs, s, x, false), 0);
	cr_assert_eq(fs_stage_write(&E.fs, s, l, 0, E.layer, 8192), 8192);
	cr_assert_eq(fs_stage_write(&E.fs, s, m, 0, E.json, 10), 10);
	fs_stage_drop(&E.fs, s);
	cr_assert_not(fs_stage_alive(s));
	struct fs_sfile *files[] = { l, m, x };
	for (size_t i = 0; i < 3; i++) {
		cr_assert_eq(fs_stage_write(&E.fs, s, files[i], 8192, E.layer, 4096), -ESTALE, "file %zu", i);
		cr_assert_eq(fs_stage_truncate(&E.fs, s, files[i], 0), -ESTALE, "file %zu", i);
		cr_assert_eq(fs_stage_truncate(&E.fs, s, files[i], 65536), -ESTALE, "file %zu", i);
		cr_assert_eq(fs_stage_flush(&E.fs, s, files[i]), -ESTALE, "file %zu", i);
		cr_assert_eq(fs_stage_open_write(&E.fs, s, files[i], true), -ENOENT, "file %zu", i);
		cr_assert_eq(fs_stage_open_read(s, files[i]), -ENOENT, "file %zu", i);
	}
	cr_assert_eq(fs_sfile_copy(s, m, 0, 10, &copy, &got), -ESTALE);
	for (size_t i = 0; i < 3; i++)
		fs_stage_release(&E.fs, s, files[i], true);
	cr_assert(!tagged("snap"));
	fs_stage_unref(&E.fs, s);
	cr_assert_eq(import_once("snap"), 0, "the name is free for a new copy");
}

/* A rename onto a file still open for writing (rsync's temp file onto a
 * name another writer has open) leaves that writer's descriptor ESTALE. */
Test(fs_stage, a_file_replaced_by_a_rename_is_estale_for_its_writer)
{
	struct fs_stage *s;
	struct fs_sfile *f;

	cr_assert_eq(fs_stage_mkdir(&E.fs, "snap", &s), 0);
	cr_assert_eq(fs_stage_mkdir_layers(&E.fs, s), 0);
	cr_assert_eq(fs_stage_create(&E.fs, s, true, NULL, E.hex, true, &f), 0);
	cr_assert_eq(fs_stage_open_write(&E.fs, s, f, false), 0);
	cr_assert_eq(fs_stage_write(&E.fs, s, f, 0, E.layer, 4096), 4096);
	cr_assert_eq(put(s, true, ".tmp.1", E.layer, E.layerlen), 0);
	cr_assert_eq(fs_stage_rename(&E.fs, s, true, NULL, ".tmp.1", true, NULL, E.hex), 0);
	cr_assert_eq(fs_stage_write(&E.fs, s, f, 4096, E.layer + 4096, 4096), -ESTALE);
	cr_assert_eq(fs_stage_flush(&E.fs, s, f), -ESTALE);
	fs_stage_release(&E.fs, s, f, true);
	cr_assert_eq(put(s, false, "manifest.json", E.json, E.jsonlen), 0);
	cr_assert(tagged("snap"));
	fs_stage_unref(&E.fs, s);
}

/* A second descriptor's O_TRUNC open (or an emptying truncate) that cannot
 * restart the layer (a fault at each step in turn) fails the file, and the
 * first descriptor's writes then fail with an error: before, the file was
 * left writing without a writer and the next write crashed the daemon. */
Test(fs_stage, a_restart_that_fails_leaves_no_writer_less_file)
{
	uint64_t failed = 0;

	for (uint64_t i = 1; i <= 8; i++) {
		struct fs_stage *s;
		struct fs_sfile *f;
		cr_assert_eq(fs_stage_mkdir(&E.fs, "snap", &s), 0);
		cr_assert_eq(fs_stage_mkdir_layers(&E.fs, s), 0);
		cr_assert_eq(fs_stage_create(&E.fs, s, true, NULL, E.hex, true, &f), 0);
		cr_assert_eq(fs_stage_open_write(&E.fs, s, f, false), 0);
		cr_assert_eq(fs_stage_write(&E.fs, s, f, 0, E.layer, 4096), 4096);
		st_sys_fault_set(i, ENOSPC);
		int rc = (i & 1) ? fs_stage_open_write(&E.fs, s, f, true) : fs_stage_truncate(&E.fs, s, f, 0);
		st_sys_fault_set(0, 0);
		if (rc < 0) {
			failed++;
			cr_assert_lt(fs_stage_write(&E.fs, s, f, 4096, E.layer + 4096, 4096), 0, "step %lu",
				     (unsigned long)i);
			cr_assert_eq(fs_stage_flush(&E.fs, s, f), rc, "step %lu", (unsigned long)i);
		} else {
			if (i & 1)
				fs_stage_release(&E.fs, s, f, true);
			cr_assert_eq(fs_stage_write(&E.fs, s, f, 0, E.layer, 4096), 4096);
		}
		fs_stage_release(&E.fs, s, f, true);
		fs_stage_drop(&E.fs, s);
		fs_stage_unref(&E.fs, s);
	}
	cr_assert_gt(failed, 0, "some restart failed");
}

/* Ingest another snapshot into the mount's store and tag it name, as the
 * CLI (`strata tag`, `strata import --tag`) would while a copy runs. */
static void tag_elsewhere(const char *name)
{
	uint8_t img[2 * ST_PAGE_SIZE];
	struct st_manifest *m;

	memset(img, 0x5a, sizeof(img));
	cr_assert_eq(st_ingest_image(E.fs.store, img, sizeof(img), NULL, &m, NULL), 0);
	cr_assert_eq(ix_snap_commit(E.fs.ix, m, name, 0, NULL), 0);
	st_manifest_free(m);
}

/* The CLI tags NAME while a copy imports it: the mount's commit is refused
 * and every close and fsync of the import's files from then on says so
 * (EEXIST), extras and files already finished included, so the copying
 * tool exits non-zero whichever file it closes last; the import is set
 * aside at once, so snapshots/NAME answers with the tag's snapshot and a
 * copy made again fails instead of landing in the refused import. */
Test(fs_stage, a_commit_refused_by_a_tag_set_elsewhere_fails_every_later_close)
{
	struct fs_stage *s, *again;
	struct fs_sfile *x, *m;

	cr_assert_eq(fs_stage_mkdir(&E.fs, "snap", &s), 0);
	cr_assert_eq(fs_stage_mkdir_layers(&E.fs, s), 0);
	cr_assert_eq(put(s, true, E.hex, E.layer, E.layerlen), 0);
	cr_assert_eq(fs_stage_create(&E.fs, s, false, NULL, "README", true, &x), 0);
	cr_assert_eq(fs_stage_open_write(&E.fs, s, x, false), 0);
	tag_elsewhere("snap");
	cr_assert_eq(put(s, false, "manifest.json", E.json, E.jsonlen), -EEXIST);
	cr_assert(strstr(E.lastlog, "commit refused"), "log: %s", E.lastlog);
	cr_assert_eq(fs_stage_write(&E.fs, s, x, 0, "hi\n", 3), 3);
	cr_assert_eq(fs_stage_flush(&E.fs, s, x), -EEXIST, "an extra closed last reports it too");
	fs_stage_release(&E.fs, s, x, true);
	m = fs_stage_file_find(s, false, NULL, "manifest.json");
	cr_assert_not_null(m);
	cr_assert_eq(fs_stage_open_write(&E.fs, s, m, false), 0);
	cr_assert_eq(fs_stage_flush(&E.fs, s, m), -EEXIST, "a finished file closed again (fsync too)");
	fs_stage_release(&E.fs, s, m, true);
	cr_assert_null(fs_stage_find(&E.fs, "snap"), "set aside: snapshots/snap is the tag's snapshot");
	struct fs_stage *any = fs_stage_find_any(&E.fs, "snap");
	cr_assert_not_null(any, "imports/snap says why");
	char *text;
	size_t len;
	cr_assert_eq(fs_stage_status(&E.fs, any, &text, &len), 0);
	cr_assert(strstr(text, "commit was refused"), "status: %s", text);
	free(text);
	fs_stage_unref(&E.fs, any);
	cr_assert_eq(fs_stage_mkdir(&E.fs, "snap", &again), -EEXIST, "the tag has the name");
	fs_stage_unref(&E.fs, s);
}

/* Write a cut-off manifest.json of len bytes into a new import; what the
 * first refused write returned, else 0. */
static int hold_manifest(const char *name, size_t len, struct fs_stage **out)
{
	static char chunk[1 << 20];
	struct fs_sfile *f;
	int rc;

	memset(chunk, 'a', sizeof(chunk));
	chunk[0] = '{';
	chunk[1] = '"';
	if ((rc = fs_stage_mkdir(&E.fs, name, out)) < 0)
		return rc;
	if ((rc = fs_stage_create(&E.fs, *out, false, NULL, "manifest.json", true, &f)) < 0)
		return rc;
	fs_stage_open_write(&E.fs, *out, f, false);
	for (size_t off = 0; off < len && rc >= 0; off += sizeof(chunk))
		rc = fs_stage_write(&E.fs, *out, f, off, off ? chunk + 2 : chunk, sizeof(chunk) - (off ? 2 : 0));
	if (rc >= 0)
		rc = fs_stage_flush(&E.fs, *out, f);
	fs_stage_release(&E.fs, *out, f, true);
	return rc < 0 ? rc : 0;
}

/* Unfinished imports hold at most the stage budget in memory: a copy
 * writing past it gets ENOSPC (and the log says why); removing an import
 * gives its share back; when every import is gone nothing is charged. */
Test(fs_stage, unfinished_imports_hold_no_more_than_the_stage_budget)
{
	struct fs_stage *a, *b, *c;

	E.fs.stage_mem_max = 10u << 20;
	cr_assert_eq(hold_manifest("a", 4u << 20, &a), 0);
	cr_assert_eq(hold_manifest("b", 4u << 20, &b), 0);
	cr_assert_eq(hold_manifest("c", 4u << 20, &c), -ENOSPC);
	cr_assert(strstr(E.lastlog, "stage budget"), "log: %s", E.lastlog);
	cr_assert_leq(E.fs.stage_mem, E.fs.stage_mem_max);
	cr_assert_eq(fs_stage_mkdir_layers(&E.fs, c), 0);
	fs_stage_drop(&E.fs, a);
	fs_stage_unref(&E.fs, a);
	fs_stage_drop(&E.fs, c);
	fs_stage_unref(&E.fs, c);
	cr_assert_eq(hold_manifest("c", 4u << 20, &c), 0, "a's share is back");
	fs_stage_unref(&E.fs, c);
	fs_stage_unref(&E.fs, b);
	fs_stage_sweep(&E.fs, true);
	cr_assert_eq(E.fs.stage_mem, 0, "%lu bytes still charged", (unsigned long)E.fs.stage_mem);
	/* The budget leaves room for ordinary imports. */
	cr_assert_eq(import_once("snap"), 0);
}

/* A committed import gives its memory back once it stops answering, not
 * when the last node the kernel holds on it is forgotten (much later). */
Test(fs_stage, a_committed_import_gives_its_memory_back_when_it_stops_answering)
{
	struct fs_stage *s;

	cr_assert_eq(fs_stage_mkdir(&E.fs, "snap", &s), 0); /* s: as a node the kernel keeps */
	cr_assert_eq(fs_stage_mkdir_layers(&E.fs, s), 0);
	cr_assert_eq(put(s, false, "manifest.json", E.json, E.jsonlen), 0);
	cr_assert_eq(put(s, true, E.hex, E.layer, E.layerlen), 0);
	cr_assert(tagged("snap"));
	uint64_t held = E.fs.stage_mem;
	cr_assert_geq(held, 4096, "the manifest's buffer is charged (%lu)", (unsigned long)held);
	struct fs_sfile *m = fs_stage_file_find(s, false, NULL, "manifest.json");
	cr_assert_eq(fs_stage_open_read(s, m), 0, "a reader keeps manifest.json open");
	sleep(3);
	cr_assert_eq(fs_stage_sweep(&E.fs, false), 1);
	cr_assert_geq(E.fs.stage_mem, 4096, "an open file keeps its bytes");
	char *copy;
	size_t got;
	cr_assert_eq(fs_sfile_copy(s, m, 0, 4, &copy, &got), 0, "and its reader reads them");
	free(copy);
	fs_stage_release(&E.fs, s, m, false);
	cr_assert_lt(E.fs.stage_mem, 4096, "%lu of %lu bytes still held", (unsigned long)E.fs.stage_mem,
		     (unsigned long)held);
	fs_stage_unref(&E.fs, s);
	cr_assert_eq(E.fs.stage_mem, 0);
}
