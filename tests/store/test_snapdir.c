/* test_snapdir.c: snapshot directories: export, read back, verify catches missing/corrupt/truncated layers. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
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

/* ------------------------------------------- hostile directories (issue 20) */

/* Export the two-layer child to dir; *m is its manifest. */
static struct st_manifest *export_child(const char *dir)
{
	struct st_manifest *m = make_snapshot(NULL);
	char why[ST_WHY_LEN] = "";

	cr_assert_eq(st_snapdir_export(th_store, m, dir, why, sizeof(why)), 0, "%s", why);
	return m;
}

/* read, verify and open of dir all fail with code, each why holding has. */
static void refused_everywhere(const char *dir, const struct st_manifest *m, int code, const char *has)
{
	char why[ST_WHY_LEN] = "";
	struct st_manifest *back = NULL;
	struct st_snapdir *d = NULL;
	int rc;

	if (!m) {
		rc = st_snapdir_read(dir, &back, why, sizeof(why));
		cr_expect_eq(rc, code, "read: got %s (%s)", st_strerror(rc), why);
		cr_expect_not_null(strstr(why, has), "read: why '%s' lacks '%s'", why, has);
	} else {
		rc = st_snapdir_verify(dir, m, why, sizeof(why));
		cr_expect_eq(rc, code, "verify: got %s (%s)", st_strerror(rc), why);
		cr_expect_not_null(strstr(why, has), "verify: why '%s' lacks '%s'", why, has);
	}
	for (unsigned f = 0; f < 2; f++) {
		why[0] = '\0';
		rc = st_snapdir_open(dir, f ? ST_SNAPDIR_VERIFY : 0, NULL, &d, why, sizeof(why));
		cr_expect_eq(rc, code, "open: got %s (%s)", st_strerror(rc), why);
		cr_expect_not_null(strstr(why, has), "open: why '%s' lacks '%s'", why, has);
	}
	st_manifest_free(back);
}

/* Regression: open(2) of a FIFO waits for a writer, before any check could
 * see it is not a file: `strata run`, `verify` and `import` of a directory
 * from `tar x` hung for ever. The timeout makes a hang a failure. */
Test(snapdir, a_fifo_as_manifest_or_layer_is_refused_without_blocking, .timeout = 20)
{
	const char *dir = th_path("fifo");
	struct st_manifest *m = export_child(dir);
	char p[700];
	int fd;

	snprintf(p, sizeof(p), "%s", layer_path(dir, &m->layers[0].id));
	cr_assert_eq(unlink(p), 0);
	cr_assert_eq(mkfifo(p, 0644), 0);
	refused_everywhere(dir, m, ST_ELAYOUT, "not a regular file (a FIFO)");
	cr_assert_eq(st_snapdir_layer_open(dir, &m->layers[0].id, &fd), ST_ELAYOUT);
	snprintf(p, sizeof(p), "%s/manifest.json", dir);
	cr_assert_eq(unlink(p), 0);
	cr_assert_eq(mkfifo(p, 0644), 0);
	refused_everywhere(dir, NULL, ST_EFORMAT, "manifest.json: not a regular file (a FIFO)");
	st_manifest_free(m);
}

/* Regression: a layers/ that is a symbolic link was followed (to anything
 * the link names); so were symlinked manifest.json's refusals unclear.
 * Nothing inside a snapshot directory is followed. */
Test(snapdir, links_inside_a_snapshot_directory_are_not_followed, .timeout = 20)
{
	const char *dir = th_path("links"), *elsewhere = th_path("elsewhere");
	struct st_manifest *m = export_child(dir);
	char from[700], to[700];

	snprintf(from, sizeof(from), "%s/layers", dir);
	cr_assert_eq(rename(from, elsewhere), 0);
	cr_assert_eq(symlink(elsewhere, from), 0);
	refused_everywhere(dir, m, ST_ELAYOUT, "layers: not a directory (a symbolic link)");
	cr_assert_eq(unlink(from), 0);
	cr_assert_eq(rename(elsewhere, from), 0);

	snprintf(from, sizeof(from), "%s/manifest.json", dir);
	snprintf(to, sizeof(to), "%s/m.json", dir);
	cr_assert_eq(rename(from, to), 0);
	cr_assert_eq(symlink("m.json", from), 0);
	refused_everywhere(dir, NULL, ST_EFORMAT, "manifest.json: not a regular file (a symbolic link)");
	st_manifest_free(m);
}

/* Every other kind of entry where a layer belongs is named for what it is,
 * and is not opened (a device node's open can act on the device). */
Test(snapdir, device_socket_and_directory_layers_are_refused_by_kind, .timeout = 20)
{
	static const struct {
		mode_t mode;
		const char *kind;
	} kinds[] = { { S_IFCHR | 0644, "(a character device)" }, { S_IFSOCK | 0644, "(a socket)" },
		      { S_IFDIR | 0755, "(a directory)" }, { S_IFLNK, "(a symbolic link)" } };
	const char *dir = th_path("kinds");
	struct st_manifest *m = export_child(dir);
	char p[700];

	snprintf(p, sizeof(p), "%s", layer_path(dir, &m->layers[1].id));
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		cr_assert_eq(i ? remove(p) : unlink(p), 0);
		if (S_ISDIR(kinds[i].mode))
			cr_assert_eq(mkdir(p, 0755), 0);
		else if (S_ISLNK(kinds[i].mode))
			cr_assert_eq(symlink("/dev/zero", p), 0);
		else
			cr_assert_eq(mknod(p, kinds[i].mode, S_ISCHR(kinds[i].mode) ? makedev(1, 3) : 0), 0, "%s",
				     strerror(errno));
		refused_everywhere(dir, m, ST_ELAYOUT, kinds[i].kind);
	}
	st_manifest_free(m);
}

/* The snapshot directory itself is a path the user names: a link to one is
 * followed like any path on a command line. */
Test(snapdir, a_link_to_a_snapshot_directory_is_followed)
{
	const char *dir = th_path("real"), *link = th_path("link");
	struct st_manifest *m = export_child(dir), *back = NULL;
	struct st_snapdir *d = NULL;
	char why[ST_WHY_LEN] = "";

	cr_assert_eq(symlink(dir, link), 0);
	cr_assert_eq(st_snapdir_read(link, &back, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(st_snapdir_verify(link, back, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(st_snapdir_open(link, ST_SNAPDIR_VERIFY, NULL, &d, why, sizeof(why)), 0, "%s", why);
	st_snapdir_close(d);
	st_manifest_free(back);
	st_manifest_free(m);
}

/* A directory by hand: one layer of layer_pages pages, holes but for the
 * pages of used (data in them), mem_pages of memory, ranges mapping each used
 * run at the same guest pages. Returns the manifest. */
static struct st_manifest *sparse_dir(const char *dir, uint64_t mem_pages, uint64_t layer_pages,
				      const struct st_range *used, size_t nused)
{
	char why[ST_WHY_LEN] = "", p[700], *text;
	struct st_manifest *m;
	uint8_t page[ST_PAGE_SIZE];
	size_t len;
	uint64_t size;
	int fd;

	snprintf(p, sizeof(p), "%s/layers", dir);
	cr_assert_eq(mkdir(dir, 0755), 0);
	cr_assert_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/layers/new", dir);
	fd = open(p, O_RDWR | O_CREAT | O_EXCL, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, (off_t)(layer_pages * ST_PAGE_SIZE)), 0);
	cr_assert_eq(st_manifest_new(&m), 0);
	m->mem_size = mem_pages * ST_PAGE_SIZE;
	m->created = 1;
	m->nlayers = 1;
	m->layers = calloc(1, sizeof(*m->layers));
	m->layers[0].pages = layer_pages;
	m->nranges = nused;
	m->ranges = calloc(nused, sizeof(*m->ranges));
	for (size_t i = 0; i < nused; i++) {
		m->ranges[i] = used[i];
		for (uint64_t k = 0; k < used[i].npages; k++) {
			th_fill(page, sizeof(page), used[i].lpage + k + 1);
			cr_assert_eq(pwrite(fd, page, sizeof(page), (off_t)((used[i].lpage + k) * ST_PAGE_SIZE)),
				     (ssize_t)sizeof(page));
		}
	}
	cr_assert_eq(st_hash_fd(fd, &m->layers[0].id, &size), 0);
	close(fd);
	char to[700];
	snprintf(to, sizeof(to), "%s", layer_path(dir, &m->layers[0].id));
	cr_assert_eq(rename(p, to), 0);
	cr_assert_eq(st_manifest_encode(m, &text, &len, why, sizeof(why)), 0, "%s", why);
	snprintf(p, sizeof(p), "%s/manifest.json", dir);
	cr_assert_eq(th_write_file(p, text, len), 0);
	free(text);
	return m;
}

/* The bytes the memfd behind a layer fd holds (its allocated blocks). */
static uint64_t held_bytes(const struct st_snapdir *d, const st_id *id, int *fd_out)
{
	struct stat st;
	int fd;

	cr_assert_eq(st_snapdir_layer_dup(d, id, &fd), 0);
	cr_assert_eq(fstat(fd, &st), 0);
	*fd_out = fd;
	return (uint64_t)st.st_blocks * 512;
}

/* Regression (issue 20): the private copy of a plain directory's layer was
 * the whole file: a 256 MiB sparse layer whose ranges use 2 pages took
 * 256 MiB of shared memory. Only the pages the ranges use are copied, with
 * verification and without, and they read back as the file's. */
Test(snapdir, a_private_copy_holds_only_the_pages_its_ranges_use, .timeout = 60)
{
	const uint64_t pages = 65536; /* 256 MiB */
	const struct st_range used[] = { { 3, 1, 0, 0 }, { 9000, 1, 0, pages - 1 } };
	const char *dir = th_path("sparse");
	struct st_manifest *m = sparse_dir(dir, pages, pages, used, 2);
	uint8_t want[ST_PAGE_SIZE];

	for (unsigned f = 0; f < 2; f++) {
		struct st_snapdir *d = NULL;
		char why[ST_WHY_LEN] = "";
		int fd;

		cr_assert_eq(st_snapdir_open(dir, f ? ST_SNAPDIR_VERIFY : 0, NULL, &d, why, sizeof(why)), 0, "%s",
			     why);
		uint64_t held = held_bytes(d, &m->layers[0].id, &fd);
		cr_expect_leq(held, 64u << 10, "the copy holds %llu bytes for 2 used pages",
			      (unsigned long long)held);
		struct stat st;
		cr_assert_eq(fstat(fd, &st), 0);
		cr_assert_eq((uint64_t)st.st_size, pages * ST_PAGE_SIZE, "it maps as the layer does");
		uint8_t *map = mmap(NULL, pages * ST_PAGE_SIZE, PROT_READ, MAP_SHARED, fd, 0);
		cr_assert_neq(map, MAP_FAILED);
		th_fill(want, sizeof(want), 1);
		cr_expect_eq(memcmp(map, want, sizeof(want)), 0);
		th_fill(want, sizeof(want), pages);
		cr_expect_eq(memcmp(map + (pages - 1) * ST_PAGE_SIZE, want, sizeof(want)), 0);
		munmap(map, pages * ST_PAGE_SIZE);
		close(fd);
		st_snapdir_close(d);
	}
	st_manifest_free(m);
}

/* Verification still covers the pages no range uses (the id hashes them):
 * a byte changed in one is caught, and a copy kept without verification is
 * checked the same way when a verified open reuses it. */
Test(snapdir, verifying_a_partial_copy_still_hashes_every_page, .timeout = 60)
{
	const struct st_range used[] = { { 0, 2, 0, 1 } };
	const char *dir = th_path("partial");
	struct st_manifest *m = sparse_dir(dir, 64, 8, used, 1);
	struct st_snapcache *c;

	usleep(20000); /* a copy of a file changed in the last 10 ms is not kept (snapopen.c) */
	struct st_snapdir *d = NULL;
	char why[ST_WHY_LEN] = "";

	cr_assert_eq(st_snapcache_new(NULL, &c), 0);
	cr_assert_eq(st_snapdir_open(dir, 0, c, &d, why, sizeof(why)), 0, "%s", why);
	st_snapdir_close(d);
	cr_assert_eq(st_snapdir_open(dir, ST_SNAPDIR_VERIFY, c, &d, why, sizeof(why)), 0, "kept copy: %s", why);
	st_snapdir_close(d);
	int fd = open(layer_path(dir, &m->layers[0].id), O_RDWR);
	cr_assert_eq(pwrite(fd, "x", 1, 6 * ST_PAGE_SIZE + 7), 1); /* page 6: no range uses it */
	close(fd);
	for (unsigned k = 0; k < 2; k++) {
		int rc = st_snapdir_open(dir, ST_SNAPDIR_VERIFY, k ? c : NULL, &d, why, sizeof(why));
		cr_expect_eq(rc, ST_ECORRUPT, "got %s (%s)", st_strerror(rc), why);
	}
	st_snapcache_free(c);
	st_manifest_free(m);
}

/* Two snapshots using different pages of one file share no copy: the
 * second must see its own pages, not the holes of the first's copy. */
Test(snapdir, snapshots_using_other_pages_of_one_layer_file_get_their_own_copy)
{
	const struct st_range one[] = { { 0, 1, 0, 0 } }, all[] = { { 0, 4, 0, 0 } };
	const char *dir = th_path("shared");
	struct st_manifest *m = sparse_dir(dir, 4, 4, all, 1), *m1;
	struct st_snapcache *c;
	struct st_snapdir *d = NULL;
	char why[ST_WHY_LEN] = "", p[700], *text;
	uint8_t got[ST_PAGE_SIZE], want[ST_PAGE_SIZE];
	size_t len;
	int fd;

	usleep(20000); /* a copy of a file changed in the last 10 ms is not kept (snapopen.c) */
	cr_assert_eq(st_manifest_dup(m, &m1), 0);
	m1->nranges = 1;
	m1->ranges[0] = one[0];
	cr_assert_eq(st_manifest_encode(m1, &text, &len, why, sizeof(why)), 0, "%s", why);
	snprintf(p, sizeof(p), "%s/manifest.json", dir);
	cr_assert_eq(th_write_file(p, text, len), 0);
	free(text);
	cr_assert_eq(st_snapcache_new(NULL, &c), 0);
	cr_assert_eq(st_snapdir_open(dir, 0, c, &d, why, sizeof(why)), 0, "%s", why);
	st_snapdir_close(d);
	cr_assert_eq(st_manifest_encode(m, &text, &len, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(th_write_file(p, text, len), 0);
	free(text);
	cr_assert_eq(st_snapdir_open(dir, ST_SNAPDIR_VERIFY, c, &d, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(st_snapdir_layer_dup(d, &m->layers[0].id, &fd), 0);
	cr_assert_eq(pread(fd, got, sizeof(got), 3 * ST_PAGE_SIZE), (ssize_t)sizeof(got));
	th_fill(want, sizeof(want), 4);
	cr_expect_eq(memcmp(got, want, sizeof(got)), 0, "page 3 is the file's");
	close(fd);
	st_snapdir_close(d);
	st_snapcache_free(c);
	st_manifest_free(m1);
	st_manifest_free(m);
}
