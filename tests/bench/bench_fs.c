/* bench_fs.c: FUSE mount benchmarks: sequential read and mmap faults vs the backing file, ls -lR/du over
 * 1,000 snapshots, cp -r into a mount vs a plain directory, page-cache use per read mode. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "bench.h"
#include "fs/fs.h"
#include "index/index.h"
#include "store/store.h"

#define MiB (1024ull * 1024)
#define CHUNK (1u << 20)

extern char **environ;

struct fs_bench {
	char dir[PATH_MAX];       /* temp root */
	char store[PATH_MAX + 16];
	char mnt[PATH_MAX + 16];
	char log[PATH_MAX + 16];
	char blob[PATH_MAX];      /* backing file of the big layer */
	char layer[PATH_MAX + 128];/* the same layer through the mount */
	char plain[PATH_MAX + 16];/* plain copy of snapshots/ (ls floor) */
	char src[PATH_MAX + 16];  /* exported snapshot (cp -r source) */
	uint64_t size;            /* big layer bytes */
	const char *mode;         /* read mode of the current mount */
	char *buf;
	/* mmap cases */
	int fd;
	char *map;
	uint64_t page;
	bool drop_each_map;
	bool through_mount;
	unsigned counter;
};

static struct fs_bench fb;

static int run(char *const argv[], bool quiet)
{
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int status, rc;

	posix_spawn_file_actions_init(&fa);
	if (quiet) {
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
		posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	}
	rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0)
		return -rc;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

static int do_mount(const char *mode)
{
	char *argv[] = { (char *)bench_strata_path(), "mount", fb.store, fb.mnt, "--log", fb.log, "--read-mode",
			 (char *)mode, NULL };
	int rc;

	fb.mode = mode;
	rc = run(argv, false);
	if (rc < 0)
		fprintf(stderr, "bench: fs: strata mount --read-mode %s failed\n", mode);
	return rc;
}

static void do_umount(void)
{
	for (int i = 0; i < 50 && fs_umount(fb.mnt, false) == -EBUSY; i++)
		usleep(100000);
}

static int remount(const char *mode)
{
	do_umount();
	return do_mount(mode);
}

/* Drop a file's cached pages (the mount's copy or the backing file's). */
static void drop_cache(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		fdatasync(fd); /* dirty pages (a fresh blob) cannot be dropped */
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		close(fd);
	}
}

static int read_all(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	uint64_t total = 0;
	ssize_t r;

	if (fd < 0)
		return -errno;
	while ((r = read(fd, fb.buf, CHUNK)) > 0)
		total += (uint64_t)r;
	close(fd);
	return r < 0 ? -errno : (total == fb.size ? 0 : -EIO);
}

/* ---- sequential read */

static int seq_file_iter(void *state, struct bench_timer *t)
{
	return read_all(fb.blob);
}

static int seq_mount_warm_iter(void *state, struct bench_timer *t)
{
	return read_all(fb.layer);
}

static int seq_mount_cold_iter(void *state, struct bench_timer *t)
{
	drop_cache(fb.layer);
	bench_timer_start(t);
	int rc = read_all(fb.layer);
	bench_timer_stop(t);
	return rc;
}

/* ---- mmap fault-in: touch one byte per page of a fresh 16 MiB mapping window */

#define FAULT_WINDOW (16 * MiB)

static void unmap(void)
{
	if (fb.map)
		munmap(fb.map, FAULT_WINDOW);
	if (fb.fd >= 0)
		close(fb.fd);
	fb.map = NULL;
	fb.fd = -1;
}

static int fault_setup(void **state, const void *arg)
{
	const char *kind = arg;

	fb.through_mount = strcmp(kind, "file") != 0;
	fb.drop_each_map = strcmp(kind, "mount_cold") == 0;
	fb.fd = -1;
	fb.page = 0;
	if (!fb.through_mount)
		return read_all(fb.blob); /* warm: the floor is a page-cache hit */
	if (!fb.drop_each_map)
		return read_all(fb.layer); /* warm: the mount's own page cache holds it */
	return 0;
}

static int fault_iter(void *state, struct bench_timer *t)
{
	const char *path = fb.through_mount ? fb.layer : fb.blob;
	uint64_t off = (fb.page++ * FAULT_WINDOW) % fb.size;

	unmap();
	if (fb.drop_each_map)
		drop_cache(path);
	fb.fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fb.fd < 0)
		return -errno;
	void *p = mmap(NULL, FAULT_WINDOW, PROT_READ, MAP_PRIVATE, fb.fd, (off_t)off);
	if (p == MAP_FAILED)
		return -errno;
	fb.map = p;
	bench_timer_start(t);
	for (uint64_t i = 0; i < FAULT_WINDOW; i += ST_PAGE_SIZE)
		(void)*(volatile char *)(fb.map + i);
	bench_timer_stop(t);
	return 0;
}

static void fault_teardown(void *state)
{
	unmap();
}

/* ---- one daemon round trip: getxattr of a name the root does not have */

static int roundtrip_iter(void *state, struct bench_timer *t)
{
	char v[8];

	return getxattr(fb.mnt, "user.strata.none", v, sizeof(v)) < 0 && errno == ENODATA ? 0 : -EIO;
}

/* ---- ls -lR and du over many snapshots */

static int ls_iter_common(struct bench_timer *t, bool cold, const char *what, const char *root)
{
	char path[PATH_MAX + 32];
	char *ls[] = { "ls", "-lR", path, NULL };
	char *du[] = { "du", "-s", path, NULL };

	snprintf(path, sizeof(path), "%s", root);
	if (cold) {
		int rc = remount(fb.mode);
		if (rc < 0)
			return rc;
	}
	bench_timer_start(t);
	int rc = run(strcmp(what, "ls") == 0 ? ls : du, true);
	bench_timer_stop(t);
	return rc;
}

static int ls_mount_cold(void *s, struct bench_timer *t) { return ls_iter_common(t, true, "ls", fb.mnt); }
static int ls_mount_warm(void *s, struct bench_timer *t) { return ls_iter_common(t, false, "ls", fb.mnt); }
static int ls_plain(void *s, struct bench_timer *t) { return ls_iter_common(t, false, "ls", fb.plain); }
static int du_mount_cold(void *s, struct bench_timer *t) { return ls_iter_common(t, true, "du", fb.mnt); }
static int du_plain(void *s, struct bench_timer *t) { return ls_iter_common(t, false, "du", fb.plain); }

/* ---- cp -r into the mount vs a plain directory */

static int cp_plain_iter(void *state, struct bench_timer *t)
{
	char dst[PATH_MAX + 32];
	char *argv[] = { "cp", "-r", fb.src, dst, NULL };

	snprintf(dst, sizeof(dst), "%s/cpdst", fb.dir);
	bench_rm_rf(dst);
	bench_timer_start(t);
	int rc = run(argv, false);
	bench_timer_stop(t);
	return rc;
}

static int cp_mount_iter(void *state, struct bench_timer *t)
{
	char dst[PATH_MAX + 64];
	char *argv[] = { "cp", "-r", fb.src, dst, NULL };
	bool dedup = state != NULL;

	snprintf(dst, sizeof(dst), "%s/snapshots/cp%u", fb.mnt, fb.counter++);
	bench_timer_start(t);
	int rc = run(argv, false);
	bench_timer_stop(t);
	if (rc < 0 || dedup)
		return rc;
	/* untimed: take the snapshot out again so the next copy stores its layer anew */
	char *rm[] = { "rm", "-r", dst, NULL };
	char *gc[] = { (char *)bench_strata_path(), "--store", fb.store, "gc", "--grace", "0", NULL };
	if ((rc = run(rm, false)) < 0)
		return rc;
	return run(gc, true);
}

static int cp_dedup_setup(void **state, const void *arg)
{
	*state = &fb; /* non-NULL: keep the copies (their layer is then already stored) */
	return 0;
}

/* ---- setup */

static int make_fixture(struct bench *b)
{
	struct st_store_opts so = { .sync = ST_SYNC_NONE };
	struct st_store *s = NULL;
	struct ix *ix = NULL;
	struct st_manifest *m = NULL;
	char hex[ST_ID_HEX_LEN + 1], tag[32];
	unsigned nsnap = bench_quick(b) ? 200 : 1000;
	int rc;

	fb.size = (bench_quick(b) ? 32 : 256) * MiB;
	snprintf(fb.dir, sizeof(fb.dir), "/tmp/strata-bench-fs.XXXXXX");
	if (!mkdtemp(fb.dir))
		return -errno;
	snprintf(fb.store, sizeof(fb.store), "%s/store", fb.dir);
	snprintf(fb.mnt, sizeof(fb.mnt), "%s/mnt", fb.dir);
	snprintf(fb.log, sizeof(fb.log), "%s/mount.log", fb.dir);
	snprintf(fb.plain, sizeof(fb.plain), "%s/plain", fb.dir);
	snprintf(fb.src, sizeof(fb.src), "%s/src", fb.dir);
	if (mkdir(fb.mnt, 0755) < 0)
		return -errno;
	/* sync none: cp into a plain directory does not fsync either */
	if ((rc = st_store_init(fb.store, &so)) < 0 || (rc = st_store_open(fb.store, 0, &s)) < 0)
		return rc;
	if ((rc = ix_open(s, NULL, &ix)) < 0)
		goto out;
	void *img = mmap(NULL, fb.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (img == MAP_FAILED) {
		rc = -errno;
		goto out;
	}
	uint64_t x = 0x9E3779B97F4A7C15ull;
	for (uint64_t i = 0; i < fb.size; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy((char *)img + i, &x, 8);
	}
	rc = st_ingest_image(s, img, fb.size, NULL, &m, NULL);
	if (rc >= 0)
		rc = ix_snap_commit(ix, m, "big", 0, NULL);
	if (rc < 0)
		goto out_unmap;
	st_id_format(&m->layers[0].id, hex);
	st_blob_path(s, &m->layers[0].id, fb.blob, sizeof(fb.blob));
	snprintf(fb.layer, sizeof(fb.layer), "%s/snapshots/big/layers/%s", fb.mnt, hex);
	st_manifest_free(m);
	m = NULL;
	/* a 64 MiB snapshot for cp -r (16 MiB under --quick) */
	uint64_t cpsize = (bench_quick(b) ? 16 : 64) * MiB;
	((char *)img)[0] ^= 1; /* different content: its own layer */
	rc = st_ingest_image(s, img, cpsize, NULL, &m, NULL);
	if (rc >= 0)
		rc = ix_snap_commit(ix, m, "cpsrc", 0, NULL);
	if (rc >= 0)
		rc = st_snapdir_export(s, m, fb.src, NULL, 0);
	st_manifest_free(m);
	m = NULL;
	if (rc < 0)
		goto out_unmap;
	/* and nsnap small snapshots (8 pages each, distinct) */
	for (unsigned i = 0; i < nsnap && rc >= 0; i++) {
		memcpy(img, &i, sizeof(i));
		((char *)img)[4] = 0x5a;
		rc = st_ingest_image(s, img, 8 * ST_PAGE_SIZE, NULL, &m, NULL);
		snprintf(tag, sizeof(tag), "snap%04u", i);
		if (rc >= 0)
			rc = ix_snap_commit(ix, m, tag, 0, NULL);
		st_manifest_free(m);
		m = NULL;
	}
	/* the big one's layer was changed in place above: put it back is not
	 * needed (ingest copied it); the store holds what was committed */
out_unmap:
	munmap(img, fb.size);
out:
	ix_close(ix);
	st_store_close(s);
	return rc;
}

static void page_cache_notes(struct bench *b, const char *mode)
{
	char name[128];
	int fd;

	if (remount(mode) < 0)
		return;
	drop_cache(fb.blob);
	drop_cache(fb.layer);
	if (read_all(fb.layer) < 0)
		return;
	const char *paths[2] = { fb.layer, fb.blob };
	const char *what[2] = { "mount_file", "backing_blob" };
	for (int i = 0; i < 2; i++) {
		if ((fd = open(paths[i], O_RDONLY | O_CLOEXEC)) < 0)
			continue;
		void *p = mmap(NULL, fb.size, PROT_READ, MAP_SHARED, fd, 0);
		close(fd);
		if (p == MAP_FAILED)
			continue;
		size_t pages = fb.size / ST_PAGE_SIZE, resident = 0;
		unsigned char *vec = malloc(pages);
		if (vec && mincore(p, fb.size, vec) == 0)
			for (size_t j = 0; j < pages; j++)
				resident += vec[j] & 1;
		free(vec);
		munmap(p, fb.size);
		snprintf(name, sizeof(name), "fs/page_cache/%s/%s_after_read", mode, what[i]);
		bench_note(b, name, (double)resident * ST_PAGE_SIZE / MiB, "MiB");
	}
}

void bench_fs(struct bench *b)
{
	static const char *modes[] = { "direct", "dontneed", "cached" };
	char name[3][128];
	int rc;

	static const char *cases[] = {
		"fs/seq_read/256m/mount_cold/dontneed", "fs/seq_read/32m/mount_cold/dontneed",
		"fs/mmap_fault_16m/256m/mount_cold", "fs/mmap_fault_16m/32m/mount_cold",
		"fs/request_roundtrip", "fs/ls_lR/1000/mount_cold", "fs/du/1000/mount_cold",
		"fs/cp_r/mount_dedup", "fs/page_cache/dontneed/backing_blob_after_read",
	};
	bool any = false;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		any = any || bench_selected(b, cases[i]);
	if (!any)
		return; /* the fixture takes seconds: build it only when a case will run */
	memset(&fb, 0, sizeof(fb));
	fb.fd = -1;
	if (!(fb.buf = malloc(CHUNK)))
		return;
	if ((rc = make_fixture(b)) < 0) {
		fprintf(stderr, "bench: fs: cannot build the fixture: %s\n", fs_strerror(rc));
		goto out;
	}
	if ((rc = do_mount("direct")) < 0) {
		fprintf(stderr, "bench: fs: cannot mount: %s\n", strerror(-rc));
		goto out;
	}
	char sz[16];
	snprintf(sz, sizeof(sz), "%llum", (unsigned long long)(fb.size / MiB));

	/* sequential read */
	snprintf(name[0], sizeof(name[0]), "fs/seq_read/%s/file", sz);
	read_all(fb.blob);
	struct bench_case c = { .name = name[0], .iter = seq_file_iter, .bytes_per_iter = fb.size,
				.warmup = 1, .iters = 20, .max_seconds = 3 };
	bench_run(b, &c);
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		if (remount(modes[i]) < 0)
			break;
		snprintf(name[1], sizeof(name[1]), "fs/seq_read/%s/mount_cold/%s", sz, modes[i]);
		struct bench_case cc = { .name = name[1], .floor = name[0], .iter = seq_mount_cold_iter,
					 .bytes_per_iter = fb.size, .warmup = 1, .iters = 10, .max_seconds = 4 };
		bench_run(b, &cc);
	}
	snprintf(name[1], sizeof(name[1]), "fs/seq_read/%s/mount_warm", sz);
	struct bench_case cw = { .name = name[1], .floor = name[0], .iter = seq_mount_warm_iter,
				 .bytes_per_iter = fb.size, .warmup = 1, .iters = 20, .max_seconds = 3 };
	bench_run(b, &cw);

	/* mmap fault-in: 4096 pages per iteration (per page = median / 4096) */
	if (remount("direct") >= 0) {
		static const char *kinds[] = { "file", "mount_warm", "mount_cold" };
		char floor[128];
		snprintf(floor, sizeof(floor), "fs/mmap_fault_16m/%s/file", sz);
		for (size_t i = 0; i < 3; i++) {
			snprintf(name[2], sizeof(name[2]), "fs/mmap_fault_16m/%s/%s", sz, kinds[i]);
			struct bench_case fc = { .name = name[2], .setup = fault_setup, .iter = fault_iter,
						 .teardown = fault_teardown, .arg = kinds[i],
						 .floor = i ? floor : NULL, .warmup = 1, .iters = 30,
						 .max_seconds = 3, .bytes_per_iter = FAULT_WINDOW };
			bench_run(b, &fc);
		}
	}

	/* ls -lR and du: a plain copy of snapshots/ is the floor */
	{
		char *cp[] = { "cp", "-r", NULL, fb.plain, NULL };
		char from[PATH_MAX + 32];
		snprintf(from, sizeof(from), "%s/snapshots", fb.mnt);
		cp[2] = from;
		if (bench_selected(b, "fs/ls_lR") || bench_selected(b, "fs/du"))
			run(cp, false);
		/* the big and cp snapshots would dominate; drop them from the plain copy */
		char big[PATH_MAX + 32];
		snprintf(big, sizeof(big), "%s/big", fb.plain);
		bench_rm_rf(big);
		snprintf(big, sizeof(big), "%s/cpsrc", fb.plain);
		bench_rm_rf(big);
		struct bench_case rt = { .name = "fs/request_roundtrip", .iter = roundtrip_iter, .iters = 2000,
					 .max_seconds = 1 };
		bench_run(b, &rt);
		struct bench_case lc[] = {
			{ .name = "fs/ls_lR/1000/plain_dir", .iter = ls_plain, .warmup = 1, .iters = 10 },
			{ .name = "fs/ls_lR/1000/mount_cold", .floor = "fs/ls_lR/1000/plain_dir", .iter = ls_mount_cold,
			  .warmup = 1, .iters = 10 },
			{ .name = "fs/ls_lR/1000/mount_warm", .floor = "fs/ls_lR/1000/plain_dir", .iter = ls_mount_warm,
			  .warmup = 1, .iters = 10 },
			{ .name = "fs/du/1000/plain_dir", .iter = du_plain, .warmup = 1, .iters = 10 },
			{ .name = "fs/du/1000/mount_cold", .floor = "fs/du/1000/plain_dir", .iter = du_mount_cold,
			  .warmup = 1, .iters = 10 },
		};
		for (size_t i = 0; i < sizeof(lc) / sizeof(lc[0]); i++)
			bench_run(b, &lc[i]);
	}

	/* cp -r of a snapshot directory */
	{
		struct bench_case cc[] = {
			{ .name = "fs/cp_r/plain_dir", .iter = cp_plain_iter, .warmup = 1, .iters = 10, .max_seconds = 4 },
			{ .name = "fs/cp_r/mount_new", .floor = "fs/cp_r/plain_dir", .iter = cp_mount_iter,
			  .warmup = 1, .iters = 10, .max_seconds = 4 },
			{ .name = "fs/cp_r/mount_dedup", .floor = "fs/cp_r/plain_dir", .setup = cp_dedup_setup,
			  .iter = cp_mount_iter, .warmup = 1, .iters = 10, .max_seconds = 4 },
		};
		for (size_t i = 0; i < sizeof(cc) / sizeof(cc[0]); i++)
			bench_run(b, &cc[i]);
	}

	/* page cache held after reading the layer once through the mount */
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		page_cache_notes(b, modes[i]);
	do_umount();
out:
	bench_rm_rf(fb.dir);
	free(fb.buf);
}
