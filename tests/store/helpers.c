/* helpers.c: shared fixtures for the store tests. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/sys.h"
#include "tests/store/helpers.h"

char th_dir[256];
struct st_store *th_store;

void th_setup(void)
{
	const char *base = getenv("TMPDIR");

	snprintf(th_dir, sizeof(th_dir), "%s/strata-store-test-XXXXXX", base && *base ? base : "/tmp");
	cr_assert_not_null(mkdtemp(th_dir), "mkdtemp: %s", strerror(errno));
	th_store = NULL;
}

void th_setup_store(void)
{
	int rc;

	th_setup();
	rc = st_store_init(th_path("store"), NULL);
	cr_assert_eq(rc, 0, "st_store_init: %s", st_strerror(rc));
	rc = st_store_open(th_path("store"), 0, &th_store);
	cr_assert_eq(rc, 0, "st_store_open: %s", st_strerror(rc));
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	chmod(path, 0755);
	remove(path);
	return 0;
}

void th_rm_rf(const char *path)
{
	nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

void th_teardown(void)
{
	st_sys_fault_set(0, 0);
	st_store_close(th_store);
	th_store = NULL;
	if (th_dir[0]) {
		/* Mounts some tests make; detached even if an assertion fired. */
		umount2(th_path("ro"), MNT_DETACH);
		umount2(th_path("store/tmp"), MNT_DETACH);
		th_rm_rf(th_dir);
	}
}

const char *th_path(const char *rel)
{
	static char bufs[8][512];
	static unsigned next;
	char *b = bufs[next++ % 8];

	snprintf(b, sizeof(bufs[0]), "%s/%s", th_dir, rel);
	return b;
}

int th_count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static int count_cb(const st_id *id, uint64_t size, int64_t mtime, void *ctx)
{
	(void)id;
	(void)size;
	(void)mtime;
	++*(int *)ctx;
	return 0;
}

int th_count_blobs(struct st_store *s)
{
	int n = 0;

	cr_assert_eq(st_blob_foreach(s, count_cb, &n), 0);
	return n;
}

static int valid_cb(const st_id *id, uint64_t size, int64_t mtime, void *ctx)
{
	(void)size;
	(void)mtime;
	if (st_blob_verify(ctx, id) != 0)
		return 1;
	return 0;
}

bool th_all_blobs_valid(struct st_store *s)
{
	return st_blob_foreach(s, valid_cb, s) == 0;
}

void th_fill(void *buf, size_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
	uint8_t *p = buf;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (uint8_t)x;
	}
}

int th_write_file(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, buf, len) != (ssize_t)len)
		rc = -EIO;
	close(fd);
	return rc;
}
