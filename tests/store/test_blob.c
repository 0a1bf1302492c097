/* test_blob.c: blob put/dedup/verify/delete, store init/open, sync policy, read-only stores. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store/store.h"
#include "tests/store/helpers.h"

TestSuite(store, .init = th_setup_store, .fini = th_teardown);

Test(store, init_creates_layout_and_is_idempotent)
{
	struct stat st;

	cr_assert_eq(stat(th_path("store/format"), &st), 0);
	cr_assert(S_ISDIR((stat(th_path("store/blobs"), &st), st.st_mode)));
	cr_assert(S_ISDIR((stat(th_path("store/tmp"), &st), st.st_mode)));
	cr_assert_eq(st_store_init(th_path("store"), NULL), 0);
	cr_assert_eq(st_store_sync(th_store), ST_SYNC_FULL);
	cr_assert_str_eq(st_store_path(th_store), th_path("store"));
}

Test(store, sync_policy_is_recorded_and_overridable)
{
	struct st_store_opts o = { .sync = ST_SYNC_NONE };
	struct st_store *s;

	cr_assert_eq(st_store_init(th_path("fast"), &o), 0);
	cr_assert_eq(st_store_open(th_path("fast"), 0, &s), 0);
	cr_assert_eq(st_store_sync(s), ST_SYNC_NONE);
	st_store_set_sync(s, ST_SYNC_FULL);
	cr_assert_eq(st_store_sync(s), ST_SYNC_FULL);
	st_store_set_sync(s, ST_SYNC_DEFAULT);
	cr_assert_eq(st_store_sync(s), ST_SYNC_NONE);
	st_store_close(s);
}

Test(store, open_rejects_non_stores)
{
	struct st_store *s = NULL;

	mkdir(th_path("plain"), 0755);
	cr_assert_eq(st_store_open(th_path("plain"), 0, &s), ST_ENOTSTORE);
	cr_assert_null(s);
	cr_assert_eq(st_store_open(th_path("missing"), 0, &s), -ENOENT);
	/* A non-empty directory is never turned into a store. */
	cr_assert_eq(th_write_file(th_path("plain/file"), "x", 1), 0);
	cr_assert_eq(st_store_init(th_path("plain"), NULL), ST_ENOTSTORE);
}

Test(store, open_rejects_bad_format_file)
{
	struct st_store *s = NULL;

	chmod(th_path("store/format"), 0644);
	cr_assert_eq(th_write_file(th_path("store/format"), "strata-store 99\nsync full\n", 26), 0);
	cr_assert_eq(st_store_open(th_path("store"), 0, &s), ST_EVERSION);
	cr_assert_eq(th_write_file(th_path("store/format"), "strata-store 1\nsync maybe\n", 26), 0);
	cr_assert_eq(st_store_open(th_path("store"), 0, &s), ST_EFORMAT);
	cr_assert_eq(th_write_file(th_path("store/format"), "hello", 5), 0);
	cr_assert_eq(st_store_open(th_path("store"), 0, &s), ST_ENOTSTORE);
}

Test(store, put_is_idempotent)
{
	const char data[] = "hello, strata";
	st_id a, b;
	bool dedup = true;
	char path[512];
	struct stat st;

	cr_assert_eq(st_blob_put(th_store, data, sizeof(data), &a, &dedup), 0);
	cr_assert(!dedup);
	cr_assert_eq(st_blob_put(th_store, data, sizeof(data), &b, &dedup), 0);
	cr_assert(dedup);
	cr_assert(st_id_equal(&a, &b));
	cr_assert_eq(th_count_blobs(th_store), 1);
	cr_assert_eq(th_count_entries(th_path("store/tmp")), 0, "temp files left behind");
	cr_assert_eq(st_blob_path(th_store, &a, path, sizeof(path)), 0);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0400, "published blobs are read-only, and their owner's only");
	cr_assert_eq(st.st_size, (off_t)sizeof(data));
}

Test(store, dedup_keeps_one_copy)
{
	static uint8_t page[ST_PAGE_SIZE * 4];
	st_id ids[8];
	bool dedup;
	uint64_t size;

	th_fill(page, sizeof(page), 7);
	for (int i = 0; i < 8; i++) {
		cr_assert_eq(st_blob_put(th_store, page, sizeof(page), &ids[i], &dedup), 0);
		cr_assert_eq(dedup, i > 0);
	}
	cr_assert_eq(th_count_blobs(th_store), 1);
	cr_assert_eq(st_blob_size(th_store, &ids[0], &size), 0);
	cr_assert_eq(size, sizeof(page));
	page[5] ^= 1;
	cr_assert_eq(st_blob_put(th_store, page, sizeof(page), &ids[1], &dedup), 0);
	cr_assert(!dedup);
	cr_assert_eq(th_count_blobs(th_store), 2);
}

Test(store, streaming_put_equals_one_shot)
{
	size_t len = 3 * 1024 * 1024 + 123;
	uint8_t *buf = malloc(len);
	struct st_blob_writer *w;
	st_id a, b, h;
	bool dedup;

	th_fill(buf, len, 42);
	st_id_hash(buf, len, &h);
	cr_assert_eq(st_blob_writer_new(th_store, &w), 0);
	for (size_t off = 0, step = 1000; off < len; off += step, step = step * 2 + 1) {
		size_t n = step < len - off ? step : len - off;
		cr_assert_eq(st_blob_writer_write(w, buf + off, n), 0);
	}
	cr_assert_eq(st_blob_writer_size(w), len);
	cr_assert_eq(st_blob_writer_commit(w, &h, &a, &dedup), 0);
	cr_assert(!dedup);
	cr_assert(st_id_equal(&a, &h));
	cr_assert_eq(st_blob_put(th_store, buf, len, &b, &dedup), 0);
	cr_assert(dedup);
	cr_assert(st_id_equal(&a, &b));
	cr_assert_eq(st_blob_verify(th_store, &a), 0);
	free(buf);
}

/* Small writes are gathered in a 256 KiB buffer and large ones go straight
 * through: any mix, at and around the buffer's size, stores the same bytes. */
Test(store, gathered_and_direct_writes_keep_their_order)
{
	static const size_t sizes[] = { 4096, 1, 262143, 1, 262144, 7, 4096, 300000, 262137, 4096, 1 << 20, 3 };
	size_t len = 0;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		len += sizes[i] * 3;
	uint8_t *buf = malloc(len);
	struct st_blob_writer *w;
	st_id got, want;

	cr_assert_not_null(buf);
	th_fill(buf, len, 7);
	st_id_hash(buf, len, &want);
	cr_assert_eq(st_blob_writer_new(th_store, &w), 0);
	for (size_t off = 0, i = 0; off < len; off += sizes[i % 12], i++)
		cr_assert_eq(st_blob_writer_write(w, buf + off, sizes[i % 12]), 0);
	cr_assert_eq(st_blob_writer_size(w), len);
	cr_assert_eq(st_blob_writer_commit(w, &want, &got, NULL), 0);
	cr_assert_eq(st_blob_verify(th_store, &got), 0, "the file holds the bytes in order");
	free(buf);
}

Test(store, put_fd_with_wrong_expectation_keeps_nothing)
{
	uint8_t buf[10000];
	st_id wrong, id;
	int fd;

	th_fill(buf, sizeof(buf), 3);
	cr_assert_eq(th_write_file(th_path("in"), buf, sizeof(buf)), 0);
	st_id_hash("other", 5, &wrong);
	fd = open(th_path("in"), O_RDONLY);
	cr_assert_eq(st_blob_put_fd(th_store, fd, &wrong, &id, NULL), ST_ECORRUPT);
	cr_assert_eq(th_count_blobs(th_store), 0);
	cr_assert_eq(th_count_entries(th_path("store/tmp")), 0);
	lseek(fd, 0, SEEK_SET);
	cr_assert_eq(st_blob_put_fd(th_store, fd, NULL, &id, NULL), 0);
	close(fd);
	st_id_hash(buf, sizeof(buf), &wrong);
	cr_assert(st_id_equal(&id, &wrong));
}

Test(store, verify_detects_flipped_byte)
{
	static uint8_t buf[ST_PAGE_SIZE * 16];
	char path[512];
	st_id id;
	int fd;

	th_fill(buf, sizeof(buf), 9);
	cr_assert_eq(st_blob_put(th_store, buf, sizeof(buf), &id, NULL), 0);
	cr_assert_eq(st_blob_verify(th_store, &id), 0);
	cr_assert_eq(st_blob_path(th_store, &id, path, sizeof(path)), 0);
	chmod(path, 0644);
	fd = open(path, O_RDWR);
	cr_assert_geq(fd, 0);
	uint8_t c;
	cr_assert_eq(pread(fd, &c, 1, 12345), 1);
	c ^= 0x10;
	cr_assert_eq(pwrite(fd, &c, 1, 12345), 1);
	close(fd);
	cr_assert_eq(st_blob_verify(th_store, &id), ST_ECORRUPT);
	cr_assert_eq(truncate(path, 100), 0);
	cr_assert_eq(st_blob_verify(th_store, &id), ST_ECORRUPT);
}

Test(store, open_has_size_del)
{
	st_id id, absent;
	uint64_t size;
	int fd;
	char c;

	st_id_hash("nothing", 7, &absent);
	cr_assert(!st_blob_has(th_store, &absent));
	cr_assert_eq(st_blob_open(th_store, &absent, &fd), -ENOENT);
	cr_assert_eq(st_blob_size(th_store, &absent, &size), -ENOENT);
	cr_assert_eq(st_blob_verify(th_store, &absent), -ENOENT);
	cr_assert_eq(st_blob_del(th_store, &absent), -ENOENT);
	cr_assert_eq(st_blob_put(th_store, "abc", 3, &id, NULL), 0);
	cr_assert(st_blob_has(th_store, &id));
	cr_assert_eq(st_blob_open(th_store, &id, &fd), 0);
	cr_assert_eq(read(fd, &c, 1), 1);
	cr_assert_eq(c, 'a');
	close(fd);
	cr_assert_eq(st_blob_del(th_store, &id), 0);
	cr_assert(!st_blob_has(th_store, &id));
}

Test(store, empty_blob)
{
	st_id id, h;

	cr_assert_eq(st_blob_put(th_store, "", 0, &id, NULL), 0);
	st_id_hash("", 0, &h);
	cr_assert(st_id_equal(&id, &h));
	cr_assert_eq(st_blob_verify(th_store, &id), 0);
}

static int collect_cb(const st_id *id, uint64_t size, int64_t mtime, void *ctx)
{
	uint64_t *total = ctx;
	(void)id;
	cr_assert_gt(mtime, 0);
	*total += size;
	return 0;
}

Test(store, foreach_sees_every_blob_and_skips_junk)
{
	uint64_t total = 0;
	char buf[100];

	for (int i = 0; i < 20; i++) {
		snprintf(buf, sizeof(buf), "blob number %d", i);
		cr_assert_eq(st_blob_put(th_store, buf, 50, NULL, NULL), 0);
	}
	mkdir(th_path("store/blobs/zz"), 0755);
	th_write_file(th_path("store/blobs/zz/junk"), "x", 1);
	cr_assert_eq(st_blob_foreach(th_store, collect_cb, &total), 0);
	cr_assert_eq(total, 20 * 50);
}

Test(store, tmp_sweep_removes_only_old_leftovers)
{
	unsigned removed = 99;
	struct timespec old[2] = { { .tv_sec = 1000 }, { .tv_sec = 1000 } };

	cr_assert_eq(th_write_file(th_path("store/tmp/blob.1.1"), "x", 1), 0);
	cr_assert_eq(th_write_file(th_path("store/tmp/blob.1.2"), "y", 1), 0);
	mkdir(th_path("store/tmp/stage"), 0755);
	th_write_file(th_path("store/tmp/stage/f"), "z", 1);
	utimensat(AT_FDCWD, th_path("store/tmp/blob.1.1"), old, 0);
	utimensat(AT_FDCWD, th_path("store/tmp/stage"), old, 0);
	cr_assert_eq(st_tmp_sweep(th_store, 3600, &removed), 0);
	cr_assert_eq(removed, 2);
	cr_assert_eq(th_count_entries(th_path("store/tmp")), 1);
	cr_assert_eq(st_tmp_sweep(th_store, 0, &removed), 0);
	cr_assert_eq(th_count_entries(th_path("store/tmp")), 0);
}

Test(store, rdonly_handle_refuses_writes)
{
	struct st_store *ro;
	st_id id;

	cr_assert_eq(st_blob_put(th_store, "abc", 3, &id, NULL), 0);
	cr_assert_eq(st_store_open(th_path("store"), ST_OPEN_RDONLY, &ro), 0);
	cr_assert(st_store_rdonly(ro));
	cr_assert_eq(st_blob_put(ro, "def", 3, NULL, NULL), ST_EREADONLY);
	cr_assert_eq(st_blob_del(ro, &id), ST_EREADONLY);
	cr_assert_eq(st_blob_verify(ro, &id), 0);
	st_store_close(ro);
}

Test(store, read_only_filesystem_gives_ereadonly)
{
	struct st_store *s;
	st_id id;
	int rc;

	/* A real read-only filesystem: a read-only bind mount of the store
	 * (we are root on the project's machines). */
	cr_assert_eq(st_blob_put(th_store, "abc", 3, &id, NULL), 0);
	mkdir(th_path("ro"), 0755);
	if (mount(th_path("store"), th_path("ro"), NULL, MS_BIND, NULL) < 0)
		cr_skip_test("cannot bind mount (%s): not root?", strerror(errno));
	rc = mount(NULL, th_path("ro"), NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL);
	cr_assert_eq(rc, 0, "remount ro: %s", strerror(errno));
	cr_assert_eq(st_store_open(th_path("ro"), 0, &s), 0);
	cr_assert_eq(st_blob_put(s, "def", 3, NULL, NULL), ST_EREADONLY);
	cr_assert_eq(st_blob_del(s, &id), ST_EREADONLY);
	cr_assert_eq(st_blob_verify(s, &id), 0, "reads still work");
	st_store_close(s);
	umount2(th_path("ro"), MNT_DETACH);
}

Test(store, permission_denied_gives_ereadonly)
{
	int status;
	pid_t pid;

	if (getuid() != 0)
		cr_skip_test("needs root to switch to an unprivileged user");
	/* As root, permissions do not apply: a child drops to nobody, whose
	 * writes into a root-owned store its owner made readable to all (0755:
	 * a store is 0700 unless chmodded) are refused with EACCES. */
	chmod(th_dir, 0755);
	chmod(th_path("store"), 0755);
	chmod(th_path("store/blobs"), 0755);
	chmod(th_path("store/tmp"), 0755);
	chmod(th_path("store/format"), 0444);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct st_store *s;
		if (setgid(65534) < 0 || setuid(65534) < 0)
			_exit(10);
		if (st_store_open(th_path("store"), 0, &s) < 0)
			_exit(11);
		int rc = st_blob_put(s, "def", 3, NULL, NULL);
		st_store_close(s);
		_exit(rc == ST_EREADONLY ? 0 : 12);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status));
	cr_assert_eq(WEXITSTATUS(status), 0, "child status %d", WEXITSTATUS(status));
}

Test(store, put_fd_from_pipe_streams)
{
	uint8_t buf[50000];
	int p[2];
	st_id id, want;
	pid_t pid;

	th_fill(buf, sizeof(buf), 8);
	st_id_hash(buf, sizeof(buf), &want);
	cr_assert_eq(pipe(p), 0);
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		_exit(write(p[1], buf, sizeof(buf)) == (ssize_t)sizeof(buf) ? 0 : 1);
	}
	close(p[1]);
	cr_assert_eq(st_blob_put_fd(th_store, p[0], &want, &id, NULL), 0);
	close(p[0]);
	waitpid(pid, NULL, 0);
	cr_assert(st_id_equal(&id, &want));
	cr_assert_eq(st_blob_verify(th_store, &id), 0);
}

Test(store, put_fd_of_file_dedup_writes_nothing)
{
	static uint8_t buf[8 * ST_PAGE_SIZE];
	st_id a, b;
	bool dedup;
	int fd;

	th_fill(buf, sizeof(buf), 12);
	cr_assert_eq(th_write_file(th_path("layer"), buf, sizeof(buf)), 0);
	fd = open(th_path("layer"), O_RDONLY);
	cr_assert_eq(st_blob_put_fd(th_store, fd, NULL, &a, &dedup), 0);
	cr_assert(!dedup);
	cr_assert_eq(st_blob_verify(th_store, &a), 0);
	/* Second time: the hash matches an existing blob before any write.
	 * tmp/ made a read-only mount proves nothing is staged. */
	if (mount(th_path("store/tmp"), th_path("store/tmp"), NULL, MS_BIND, NULL) < 0)
		cr_skip_test("cannot bind mount (%s): not root?", strerror(errno));
	int mrc = mount(NULL, th_path("store/tmp"), NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL);
	struct st_store *s2 = NULL; /* opened after the mount, so it sees it */
	int orc = st_store_open(th_path("store"), 0, &s2);
	int ro_rc = orc == 0 ? st_blob_put(s2, "x", 1, NULL, NULL) : orc;
	lseek(fd, 0, SEEK_SET);
	int rc = orc == 0 ? st_blob_put_fd(s2, fd, &a, &b, &dedup) : orc;
	st_store_close(s2);
	umount2(th_path("store/tmp"), MNT_DETACH);
	cr_assert_eq(mrc, 0);
	cr_assert_eq(ro_rc, ST_EREADONLY, "tmp/ is really read-only");
	cr_assert_eq(rc, 0, "%s", st_strerror(rc));
	cr_assert(dedup);
	cr_assert(st_id_equal(&a, &b));
	close(fd);
	/* From a non-zero offset: only the rest of the file. */
	fd = open(th_path("layer"), O_RDONLY);
	cr_assert_eq(lseek(fd, ST_PAGE_SIZE, SEEK_SET), ST_PAGE_SIZE);
	cr_assert_eq(st_blob_put_fd(th_store, fd, NULL, &b, &dedup), 0);
	close(fd);
	st_id_hash(buf + ST_PAGE_SIZE, sizeof(buf) - ST_PAGE_SIZE, &a);
	cr_assert(st_id_equal(&a, &b));
}

Test(store, put_fd_against_existing_id_still_checks_the_bytes)
{
	uint8_t buf[3 * ST_PAGE_SIZE];
	st_id existing, id;
	bool dedup = false;
	int fd;

	th_fill(buf, sizeof(buf), 30);
	cr_assert_eq(st_blob_put(th_store, buf, sizeof(buf), &existing, NULL), 0);
	buf[100] ^= 1; /* a copy claiming that name, with one bit flipped */
	cr_assert_eq(th_write_file(th_path("bad"), buf, sizeof(buf)), 0);
	fd = open(th_path("bad"), O_RDONLY);
	cr_assert_eq(st_blob_put_fd(th_store, fd, &existing, &id, &dedup), ST_ECORRUPT);
	close(fd);
	cr_assert(!dedup);
	cr_assert_eq(th_count_blobs(th_store), 1);
	cr_assert_eq(st_blob_verify(th_store, &existing), 0);
}

/* Regression (issue 20): `strata import` of a directory whose layer is a
 * 2 GiB sparse file of a few pages stored a 2 GiB blob. A put from a file
 * stores whole zero pages as holes: the blob takes the disk its data pages
 * take, hashes and reads back as the whole file (a hole at the end too). */
Test(store, a_put_from_a_sparse_file_stores_its_zero_pages_as_holes)
{
	const off_t size = 256 << 20;
	char p[600];
	uint8_t page[ST_PAGE_SIZE], got[ST_PAGE_SIZE];
	struct stat st;
	st_id id, want;
	uint64_t n;
	int fd, bfd;

	snprintf(p, sizeof(p), "%s", th_path("sparse"));
	fd = open(p, O_RDWR | O_CREAT | O_EXCL, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, size), 0);
	th_fill(page, sizeof(page), 7);
	cr_assert_eq(pwrite(fd, page, sizeof(page), 5 * ST_PAGE_SIZE), (ssize_t)sizeof(page));
	cr_assert_eq(pwrite(fd, page, 100, 9000 * ST_PAGE_SIZE + 5), 100); /* a page partly zero */
	cr_assert_eq(st_hash_fd(fd, &want, &n), 0);
	cr_assert_eq(lseek(fd, 0, SEEK_SET), 0);
	cr_assert_eq(st_blob_put_fd(th_store, fd, &want, &id, NULL), 0);
	close(fd);
	cr_assert(st_id_equal(&id, &want));
	cr_assert_eq(st_blob_open(th_store, &id, &bfd), 0);
	cr_assert_eq(fstat(bfd, &st), 0);
	cr_assert_eq(st.st_size, size);
	cr_expect_leq((uint64_t)st.st_blocks * 512, 1u << 20, "the blob takes %llu bytes of disk",
		      (unsigned long long)st.st_blocks * 512);
	cr_assert_eq(pread(bfd, got, sizeof(got), 5 * ST_PAGE_SIZE), (ssize_t)sizeof(got));
	cr_expect_eq(memcmp(got, page, sizeof(got)), 0);
	cr_assert_eq(pread(bfd, got, sizeof(got), size - ST_PAGE_SIZE), (ssize_t)sizeof(got));
	cr_expect(got[0] == 0 && !memcmp(got, got + 1, sizeof(got) - 1), "the last page reads as zeros");
	close(bfd);
	cr_assert_eq(st_blob_verify(th_store, &id), 0);
}
