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
	st_sys_fault_set(0, 0);
	cr_assert_eq(import_once("snap"), 0);
	uint64_t steps = st_sys_calls();
	cr_assert(tagged("snap"));
	unimport("snap");
	cr_assert_gt(steps, 10, "an import counts its calls (%lu)", (unsigned long)steps);
	for (size_t e = 0; e < 3; e++)
		for (uint64_t i = 1; i <= steps; i++, tries++) {
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
