/* test_ns.c: the namespace over a real store and index, without FUSE: lookups, attributes, listings, xattrs. */
#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs_int.h"
#include "store/mountabi.h"

static struct {
	char dir[64];
	struct fs_config cfg;
	struct fs fs;
	struct st_manifest *m;
	st_id snap;
} N;

static int rm_cb(const char *p, const struct stat *sb, int f, struct FTW *ftw)
{
	return remove(p);
}

static void no_log(void *ctx, int prio, const char *msg)
{
}

static void release(struct fs_node *n, void *ctx)
{
	if (n->stage)
		fs_stage_unref(ctx, n->stage);
}

static void setup(void)
{
	static uint8_t img[16 * ST_PAGE_SIZE];

	memset(&N, 0, sizeof(N));
	snprintf(N.dir, sizeof(N.dir), "/tmp/strata-test-ns.XXXXXX");
	cr_assert_not_null(mkdtemp(N.dir));
	memset(img, 0, sizeof(img));
	for (int p = 0; p < 16; p++)
		if (p < 4 || p >= 12)
			img[p * ST_PAGE_SIZE] = (uint8_t)(p + 1); /* pages 4..11 are a hole */
	cr_assert_eq(st_store_init(N.dir, NULL), 0);
	N.cfg.log = no_log;
	N.fs.cfg = &N.cfg;
	N.fs.stage_mem_max = FS_STAGE_MEMORY_DEFAULT;
	N.fs.entry_timeout = 86400;
	pthread_mutex_init(&N.fs.stage_lock, NULL);
	cr_assert_eq(st_store_open(N.dir, 0, &N.fs.store), 0);
	cr_assert_eq(ix_open(N.fs.store, NULL, &N.fs.ix), 0);
	cr_assert_eq(st_ingest_image(N.fs.store, img, sizeof(img), NULL, &N.m, NULL), 0);
	cr_assert_eq(ix_snap_commit(N.fs.ix, N.m, "alpha", 0, &N.snap), 0);
	cr_assert_eq(ix_tag_set(N.fs.ix, "beta", &N.snap, 0), 0);
	cr_assert_eq(fs_itable_new(release, &N.fs, &N.fs.itable), 0);
	cr_assert_eq(fs_view_init(&N.fs), 0);
}

static void teardown(void)
{
	fs_stage_sweep(&N.fs, true);
	fs_itable_free(N.fs.itable);
	fs_view_fini(&N.fs);
	ix_close(N.fs.ix);
	st_store_close(N.fs.store);
	st_manifest_free(N.m);
	nftw(N.dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(fs_ns, .init = setup, .fini = teardown, .timeout = 30);

static struct fs_node *top(enum fs_kind kind)
{
	struct fs_key k = { .kind = kind };
	struct fs_node *n;

	cr_assert_eq(fs_ns_acquire(&N.fs, &k, &n), 0);
	return n;
}

static struct fs_node *walk(const char *a, const char *b, const char *c)
{
	struct fs_node *n = top(FS_K_ROOT);
	const char *parts[] = { a, b, c };

	for (int i = 0; i < 3 && parts[i]; i++) {
		struct fs_node *next;
		int rc = fs_ns_lookup(&N.fs, n, parts[i], &next);
		cr_assert_eq(rc, 0, "lookup %s: %d", parts[i], rc);
		n = next;
	}
	return n;
}

Test(fs_ns, manifest_size_is_canonical_length_plus_newline)
{
	struct fs_node *n = walk("snapshots", "alpha", "manifest.json");
	struct stat st;
	char *json;
	size_t len;

	cr_assert_eq(st_manifest_encode(N.m, &json, &len, NULL, 0), 0);
	cr_assert_eq(fs_ns_attr(&N.fs, n, &st), 0);
	cr_assert_eq((size_t)st.st_size, len + 1);
	cr_assert_eq(st.st_mode, S_IFREG | 0444);
	free(json);
}

Test(fs_ns, memory_file_is_mem_size_with_blocks_for_data_only)
{
	struct fs_node *n = walk("memory", "beta", NULL);
	struct stat st;

	cr_assert_eq(fs_ns_attr(&N.fs, n, &st), 0);
	cr_assert_eq((uint64_t)st.st_size, 16 * ST_PAGE_SIZE);
	cr_assert_eq(st.st_blocks, 8 * (ST_PAGE_SIZE / 512), "8 data pages, 8 in the hole");
}

Test(fs_ns, a_layer_is_one_node_under_every_snapshot_and_blobs)
{
	char hex[ST_ID_HEX_LEN + 1];
	struct stat st;

	st_id_format(&N.m->layers[0].id, hex);
	struct fs_node *layers = walk("snapshots", "alpha", "layers");
	struct fs_node *a, *b, *c;
	cr_assert_eq(fs_ns_lookup(&N.fs, layers, hex, &a), 0);
	cr_assert_eq(fs_ns_lookup(&N.fs, walk("snapshots", "beta", "layers"), hex, &b), 0);
	cr_assert_eq(fs_ns_lookup(&N.fs, top(FS_K_BLOBS), hex, &c), 0);
	cr_assert(a == b && b == c, "one kernel inode, one page cache");
	cr_assert_eq(fs_ns_attr(&N.fs, a, &st), 0);
	cr_assert_eq((uint64_t)st.st_size, N.m->layers[0].pages * ST_PAGE_SIZE);
}

Test(fs_ns, lookups_refuse_what_is_not_there)
{
	struct fs_node *n, *snaps = top(FS_K_SNAPSHOTS);
	char longname[300];

	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	cr_assert_eq(fs_ns_lookup(&N.fs, snaps, "gamma", &n), -ENOENT);
	cr_assert_eq(fs_ns_lookup(&N.fs, snaps, "..", &n), -EINVAL);
	cr_assert_eq(fs_ns_lookup(&N.fs, snaps, longname, &n), -ENAMETOOLONG);
	cr_assert_eq(fs_ns_lookup(&N.fs, walk("snapshots", "alpha", "layers"), "00000000000000000000000000000000", &n),
		     -ENOENT);
	cr_assert_eq(fs_ns_lookup(&N.fs, top(FS_K_BLOBS), "not-an-id", &n), -ENOENT);
}

Test(fs_ns, listings_show_tags_and_hide_imports)
{
	struct fs_dirlist *l;
	struct fs_stage *s;

	cr_assert_eq(fs_stage_mkdir(&N.fs, "incoming", &s), 0);
	cr_assert_eq(fs_ns_list(&N.fs, top(FS_K_SNAPSHOTS), &l), 0);
	cr_assert_eq(l->n, 2);
	cr_assert_str_eq(l->v[0].name, "alpha");
	cr_assert_str_eq(l->v[1].name, "beta");
	fs_dirlist_free(l);
	struct fs_node *n;
	cr_assert_eq(fs_ns_lookup(&N.fs, top(FS_K_SNAPSHOTS), "incoming", &n), 0, "the copier can still find it");
	cr_assert_eq(n->kind, FS_K_STAGEDIR);
	cr_assert_eq(fs_ns_list(&N.fs, walk("snapshots", "alpha", NULL), &l), 0);
	cr_assert_eq(l->n, 2);
	cr_assert_str_eq(l->v[0].name, "layers", "layers before manifest.json");
	cr_assert_str_eq(l->v[1].name, "manifest.json");
	fs_dirlist_free(l);
	fs_stage_unref(&N.fs, s);
}

Test(fs_ns, xattrs_name_the_id_and_the_backing_file)
{
	char hex[ST_ID_HEX_LEN + 1], buf[512], want[512];
	struct fs_node *blob;

	st_id_format(&N.m->layers[0].id, hex);
	cr_assert_eq(fs_ns_lookup(&N.fs, top(FS_K_BLOBS), hex, &blob), 0);
	int len = fs_ns_getxattr(&N.fs, blob, "user.strata.id", buf, sizeof(buf));
	cr_assert_eq(len, ST_ID_HEX_LEN);
	cr_assert_eq(memcmp(buf, hex, ST_ID_HEX_LEN), 0);
	len = fs_ns_getxattr(&N.fs, blob, "user.strata.blob_path", buf, sizeof(buf));
	cr_assert_eq(st_blob_path(N.fs.store, &N.m->layers[0].id, want, sizeof(want)), 0);
	cr_assert_eq(len, (int)strlen(want));
	cr_assert_eq(memcmp(buf, want, (size_t)len), 0);
	cr_assert_eq(fs_ns_getxattr(&N.fs, blob, "user.strata.id", buf, 4), -ERANGE);
	cr_assert_eq(fs_ns_getxattr(&N.fs, blob, "user.other", buf, sizeof(buf)), -ENODATA);
	cr_assert_eq(fs_ns_getxattr(&N.fs, top(FS_K_ROOT), "user.strata.id", buf, sizeof(buf)), -ENODATA);
	/* Namespaces strata has none of say so (ls then stops asking). */
	cr_assert_eq(fs_ns_getxattr(&N.fs, blob, "security.selinux", buf, sizeof(buf)), -EOPNOTSUPP);
	cr_assert_eq(fs_ns_getxattr(&N.fs, top(FS_K_ROOT), "trusted.x", buf, sizeof(buf)), -EOPNOTSUPP);
	cr_assert_eq(fs_ns_getxattr(&N.fs, blob, "system.posix_acl_access", buf, sizeof(buf)), -EOPNOTSUPP);
	char hexsnap[ST_ID_HEX_LEN + 1];
	st_id_format(&N.snap, hexsnap);
	cr_assert_eq(fs_ns_getxattr(&N.fs, walk("snapshots", "alpha", NULL), "user.strata.id", buf, sizeof(buf)),
		     ST_ID_HEX_LEN);
	cr_assert_eq(memcmp(buf, hexsnap, ST_ID_HEX_LEN), 0);
}

Test(fs_ns, a_snapshot_directory_answers_its_manifest_and_blob_paths_in_one_xattr)
{
	struct fs_node *dir = walk("snapshots", "alpha", NULL);
	char path[4096], list[256];
	char *buf;

	int len = fs_ns_getxattr(&N.fs, dir, "user.strata.restore", NULL, 0);
	cr_assert_gt(len, 0);
	cr_assert_not_null(buf = malloc((size_t)len));
	cr_assert_eq(fs_ns_getxattr(&N.fs, dir, "user.strata.restore", buf, (size_t)len - 1), -ERANGE);
	cr_assert_eq(fs_ns_getxattr(&N.fs, dir, "user.strata.restore", buf, (size_t)len), len);
	/* The restore answer (store/mountabi.h): manifest.json's bytes, then
	 * each layer's backing blob, in manifest order. */
	struct st_restore_answer a;
	struct st_restore_layer l;
	char *text;
	size_t tlen;
	cr_assert_eq(st_restore_decode(buf, (size_t)len, &a), 0);
	cr_assert_eq(a.version, ST_RESTORE_VERSION);
	cr_assert_eq(st_manifest_encode(N.m, &text, &tlen, NULL, 0), 0);
	cr_assert_eq(a.manifest_len, tlen + 1);
	cr_assert_eq(memcmp(a.manifest, text, tlen), 0);
	cr_assert_eq(a.manifest[tlen], '\n');
	free(text);
	cr_assert_eq(a.nlayers, N.m->nlayers);
	for (uint32_t i = 0; i < N.m->nlayers; i++) {
		cr_assert(st_restore_answer_next(&a, &l));
		cr_assert_eq(st_blob_path(N.fs.store, &N.m->layers[i].id, path, sizeof(path)), 0);
		cr_assert_eq(l.kind, ST_RESTORE_BLOB);
		cr_assert_str_eq(l.payload, path);
	}
	cr_assert_not(st_restore_answer_next(&a, &l));
	free(buf);
	/* Not listed, so cp -a and rsync -X do not carry it into copies. */
	int ll = fs_ns_listxattr(&N.fs, dir, list, sizeof(list));
	cr_assert_gt(ll, 0);
	for (int o = 0; o < ll; o += (int)strlen(list + o) + 1)
		cr_assert_str_neq(list + o, "user.strata.restore");
	/* Only snapshot directories have it. */
	cr_assert_eq(fs_ns_getxattr(&N.fs, walk("snapshots", "alpha", "manifest.json"), "user.strata.restore", NULL, 0),
		     -ENODATA);
}

Test(fs_ns, stable_inode_numbers_do_not_depend_on_lookup_order)
{
	struct stat a, b;
	struct fs_node *n1 = walk("snapshots", "beta", "manifest.json");
	cr_assert_eq(fs_ns_attr(&N.fs, n1, &a), 0);
	struct fs_node *n2 = walk("snapshots", "alpha", "manifest.json");
	cr_assert_eq(fs_ns_attr(&N.fs, n2, &b), 0);
	cr_assert_eq(a.st_ino, b.st_ino, "same snapshot, same manifest inode");
	struct fs_node *d1 = walk("snapshots", "alpha", NULL), *d2 = walk("snapshots", "beta", NULL);
	cr_assert_neq(d1->st_ino, d2->st_ino, "two tags are two directories");
}
