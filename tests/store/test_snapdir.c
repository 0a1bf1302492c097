/* test_snapdir.c: snapshot directories: export, read back, verify catches missing/corrupt/truncated layers. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store.h"
#include "tests/store/helpers.h"

TestSuite(snapdir, .init = th_setup_store, .fini = th_teardown);

/* Two snapshots (a parent and a child with a few changed pages). */
static struct st_manifest *make_snapshot(struct st_manifest **parent_out)
{
	size_t n = 64;
	uint8_t *img = calloc(n, ST_PAGE_SIZE);
	struct st_manifest *p, *c;

	th_fill(img, 20 * ST_PAGE_SIZE, 1);
	th_fill(img + 40 * ST_PAGE_SIZE, 3 * ST_PAGE_SIZE, 2);
	cr_assert_eq(st_ingest_image(th_store, img, n * ST_PAGE_SIZE, NULL, &p, NULL), 0);
	th_fill(img + 5 * ST_PAGE_SIZE, ST_PAGE_SIZE, 3);
	cr_assert_eq(st_ingest_image(th_store, img, n * ST_PAGE_SIZE, p, &c, NULL), 0);
	free(img);
	if (parent_out)
		*parent_out = p;
	else
		st_manifest_free(p);
	return c;
}

static const char *layer_path(const char *dir, const st_id *id)
{
	static char buf[600];
	char hex[ST_ID_HEX_LEN + 1];

	st_id_format(id, hex);
	snprintf(buf, sizeof(buf), "%s/layers/%s", dir, hex);
	return buf;
}

Test(snapdir, export_then_read_and_verify)
{
	struct st_manifest *m = make_snapshot(NULL), *back;
	char why[ST_WHY_LEN] = "";
	const char *dir = th_path("out/web");
	st_id a, b;
	struct stat st;
	int rc;

	mkdir(th_path("out"), 0755);
	rc = st_snapdir_export(th_store, m, dir, why, sizeof(why));
	cr_assert_eq(rc, 0, "%s: %s", st_strerror(rc), why);
	cr_assert_eq(th_count_entries(th_path("out")), 1, "no temp directory left beside the export");
	cr_assert_eq(th_count_entries(th_path("out/web/layers")), (int)m->nlayers);
	cr_assert_eq(stat(layer_path(dir, &m->layers[0].id), &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0400);
	rc = st_snapdir_read(dir, &back, why, sizeof(why));
	cr_assert_eq(rc, 0, "%s", why);
	cr_assert_eq(st_manifest_id(m, &a, NULL, 0), 0);
	cr_assert_eq(st_manifest_id(back, &b, NULL, 0), 0);
	cr_assert(st_id_equal(&a, &b));
	rc = st_snapdir_verify(dir, back, why, sizeof(why));
	cr_assert_eq(rc, 0, "%s", why);
	/* manifest.json is the canonical encoding plus a newline. */
	char *text;
	size_t len;
	char file[4096];
	int fd = open(th_path("out/web/manifest.json"), O_RDONLY);
	ssize_t n = read(fd, file, sizeof(file) - 1);
	close(fd);
	cr_assert_gt(n, 0);
	file[n] = '\0';
	cr_assert_eq(st_manifest_encode(m, &text, &len, NULL, 0), 0);
	cr_assert_eq((size_t)n, len + 1);
	cr_assert_eq(memcmp(file, text, len), 0);
	cr_assert_eq(file[len], '\n');
	free(text);
	int lfd;
	cr_assert_eq(st_snapdir_layer_open(dir, &m->layers[0].id, &lfd), 0);
	close(lfd);
	st_manifest_free(m);
	st_manifest_free(back);
}

Test(snapdir, export_refuses_existing_directory)
{
	struct st_manifest *m = make_snapshot(NULL);
	char why[ST_WHY_LEN];

	mkdir(th_path("exists"), 0755);
	cr_assert_eq(st_snapdir_export(th_store, m, th_path("exists"), why, sizeof(why)), -EEXIST);
	st_manifest_free(m);
}

Test(snapdir, export_with_missing_blob_leaves_nothing)
{
	struct st_manifest *m = make_snapshot(NULL);
	char why[ST_WHY_LEN] = "";

	cr_assert_eq(st_blob_del(th_store, &m->layers[m->nlayers - 1].id), 0);
	mkdir(th_path("out"), 0755);
	cr_assert_eq(st_snapdir_export(th_store, m, th_path("out/x"), why, sizeof(why)), -ENOENT);
	cr_assert_not_null(strstr(why, "missing"), "why: %s", why);
	cr_assert_eq(th_count_entries(th_path("out")), 0);
	st_manifest_free(m);
}

/* Export, damage the directory with `damage`, expect `code` from verify. */
static void damaged(void (*damage)(const char *dir, const struct st_manifest *m), int code, const char *why_has)
{
	struct st_manifest *m = make_snapshot(NULL), *back = NULL;
	char why[ST_WHY_LEN] = "";
	const char *dir = th_path("snap");
	int rc;

	cr_assert_eq(st_snapdir_export(th_store, m, dir, why, sizeof(why)), 0, "%s", why);
	damage(dir, m);
	rc = st_snapdir_read(dir, &back, why, sizeof(why));
	cr_assert_eq(rc, 0, "%s", why);
	rc = st_snapdir_verify(dir, back, why, sizeof(why));
	cr_assert_eq(rc, code, "got %s (%s)", st_strerror(rc), why);
	cr_assert_not_null(strstr(why, why_has), "why '%s' lacks '%s'", why, why_has);
	st_manifest_free(m);
	st_manifest_free(back);
}

static void rename_layer(const char *dir, const struct st_manifest *m)
{
	char to[700];
	snprintf(to, sizeof(to), "%s/layers/renamed", dir);
	cr_assert_eq(rename(layer_path(dir, &m->layers[0].id), to), 0);
}

static void swap_layer_names(const char *dir, const struct st_manifest *m)
{
	char a[700], b[700], t[700];
	snprintf(a, sizeof(a), "%s", layer_path(dir, &m->layers[0].id));
	snprintf(b, sizeof(b), "%s", layer_path(dir, &m->layers[1].id));
	snprintf(t, sizeof(t), "%s/layers/t", dir);
	cr_assert_eq(rename(a, t), 0);
	cr_assert_eq(rename(b, a), 0);
	cr_assert_eq(rename(t, b), 0);
}

static void flip_byte(const char *dir, const struct st_manifest *m)
{
	const char *p = layer_path(dir, &m->layers[0].id);
	uint8_t c;
	chmod(p, 0644);
	int fd = open(p, O_RDWR);
	cr_assert_eq(pread(fd, &c, 1, 4097), 1);
	c ^= 0x80;
	cr_assert_eq(pwrite(fd, &c, 1, 4097), 1);
	close(fd);
}

static void truncate_layer(const char *dir, const struct st_manifest *m)
{
	const char *p = layer_path(dir, &m->layers[0].id);
	chmod(p, 0644);
	cr_assert_eq(truncate(p, (off_t)(m->layers[0].pages - 1) * ST_PAGE_SIZE), 0);
}

static void extend_layer(const char *dir, const struct st_manifest *m)
{
	const char *p = layer_path(dir, &m->layers[1].id);
	chmod(p, 0644);
	cr_assert_eq(truncate(p, (off_t)(m->layers[1].pages + 1) * ST_PAGE_SIZE), 0);
}

Test(snapdir, verify_catches_renamed_layer)
{
	damaged(rename_layer, -ENOENT, "missing");
}

Test(snapdir, verify_catches_swapped_layer_names)
{
	/* Swapped names also swap sizes here (layers of 22 and 1 pages). */
	damaged(swap_layer_names, ST_ELAYOUT, "too");
}

Test(snapdir, verify_catches_corrupted_layer)
{
	damaged(flip_byte, ST_ECORRUPT, "hashes to");
}

Test(snapdir, verify_catches_truncated_layer)
{
	damaged(truncate_layer, ST_ELAYOUT, "too short");
}

Test(snapdir, verify_catches_extended_layer)
{
	damaged(extend_layer, ST_ELAYOUT, "too long");
}

Test(snapdir, read_rejects_bad_manifest_files)
{
	char why[ST_WHY_LEN];
	struct st_manifest *m = NULL;

	mkdir(th_path("s"), 0755);
	cr_assert_eq(st_snapdir_read(th_path("s"), &m, why, sizeof(why)), -ENOENT);
	cr_assert_eq(th_write_file(th_path("s/manifest.json"), "{\"version\":1", 12), 0);
	cr_assert_eq(st_snapdir_read(th_path("s"), &m, why, sizeof(why)), ST_EFORMAT);
	cr_assert_eq(th_write_file(th_path("s/manifest.json"), "{\"version\":7}", 13), 0);
	cr_assert_eq(st_snapdir_read(th_path("s"), &m, why, sizeof(why)), ST_EVERSION);
	cr_assert_null(m);
}
