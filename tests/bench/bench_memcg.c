/* bench_memcg.c: a memory cgroup of its own for this process (cgroup v2, else v1), and what it charges, kernel memory included. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "bench.h"

#define CGROUP2_MAGIC 0x63677270

/* The first line of path as a number; -1 if unreadable. */
static long long read_ll(const char *dir, const char *file)
{
	char path[8448];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (!(f = fopen(path, "re")))
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

static int write_str(const char *dir, const char *file, const char *s)
{
	char path[8448];
	int fd, rc = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) < 0)
		return -errno;
	if (write(fd, s, strlen(s)) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

/* "key value" lines of a file: the value of key (multiplied by mult), 0 if absent. */
static long long keyed(const char *path, const char *key, long long mult)
{
	char line[256], k[128];
	long long v, out = 0;
	FILE *f = fopen(path, "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%127[^: ]:%*[ ]%lld", k, &v) == 2 || sscanf(line, "%127s %lld", k, &v) == 2)
			if (strcmp(k, key) == 0) {
				out = v * mult;
				break;
			}
	fclose(f);
	return out;
}

static long long stat_of(const struct bench_memcg *cg, const char *key)
{
	char path[8448];

	snprintf(path, sizeof(path), "%s/memory.stat", cg->dir);
	return keyed(path, key, 1);
}

/* /proc/meminfo's key, bytes. */
static long long meminfo(const char *key)
{
	return keyed("/proc/meminfo", key, 1024);
}

/* This process's cgroup in the hierarchy `want` names ("" for v2's "0::",
 * else a v1 controller) from /proc/self/cgroup. */
static int self_cgroup(const char *want, char *out, size_t len)
{
	char line[PATH_MAX + 64];
	FILE *f = fopen("/proc/self/cgroup", "re");
	int rc = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = 0;
		/* v2's line is "0::PATH": hierarchy 0, no controllers. */
		bool match = *want ? false : c1 - line == 1 && line[0] == '0' && c1 + 1 == c2;
		for (char *t = strtok(c1 + 1, ","); *want && t; t = strtok(NULL, ","))
			match |= strcmp(t, want) == 0;
		if (!match)
			continue;
		c2[1 + strcspn(c2 + 1, "\n")] = 0;
		snprintf(out, len, "%s", c2 + 1);
		rc = 0;
		break;
	}
	fclose(f);
	return rc;
}

static bool has_word(const char *dir, const char *file, const char *word)
{
	char path[8448], buf[512];
	FILE *f;
	bool found = false;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (!(f = fopen(path, "re")))
		return false;
	if (fgets(buf, sizeof(buf), f))
		for (char *t = strtok(buf, " \n"); t; t = strtok(NULL, " \n"))
			found |= strcmp(t, word) == 0;
	fclose(f);
	return found;
}

/*
 * Where this process's memory cgroup is: v2 (at /sys/fs/cgroup, or the
 * unified hierarchy of a hybrid mount with the memory controller there),
 * else v1's memory controller. 0, or -errno with why.
 */
static int locate(struct bench_memcg *cg, char *why, size_t len)
{
	static const char *const v2_roots[] = { "/sys/fs/cgroup", "/sys/fs/cgroup/unified" };
	char rel[4000];
	struct statfs fs;

	for (size_t i = 0; i < 2; i++) {
		if (statfs(v2_roots[i], &fs) < 0 || fs.f_type != CGROUP2_MAGIC)
			continue;
		if (!has_word(v2_roots[i], "cgroup.controllers", "memory"))
			continue;  /* the memory controller is bound to v1 */
		if (self_cgroup("", rel, sizeof(rel)) < 0)
			break;
		cg->version = 2;
		snprintf(cg->home, sizeof(cg->home), "%s%s", v2_roots[i], strcmp(rel, "/") == 0 ? "" : rel);
		return 0;
	}
	if (statfs("/sys/fs/cgroup/memory", &fs) == 0 && self_cgroup("memory", rel, sizeof(rel)) == 0) {
		cg->version = 1;
		snprintf(cg->home, sizeof(cg->home), "/sys/fs/cgroup/memory%s", strcmp(rel, "/") == 0 ? "" : rel);
		return 0;
	}
	snprintf(why, len, "no memory controller: neither cgroup v2 with \"memory\" in cgroup.controllers "
		 "nor a v1 memory hierarchy with this process in it");
	return -ENOENT;
}

int bench_memcg_enter(struct bench_memcg *cg, const char *name, char *why, size_t len)
{
	char pid[32];
	int rc;

	memset(cg, 0, sizeof(*cg));
	if ((rc = locate(cg, why, len)) < 0)
		return rc;
	if (cg->version == 2 && !has_word(cg->home, "cgroup.subtree_control", "memory") &&
	    (rc = write_str(cg->home, "cgroup.subtree_control", "+memory")) < 0) {
		/* A v2 cgroup with processes of its own cannot hand controllers
		 * to children (but the root). */
		snprintf(why, len, "cannot enable the memory controller under %s: %s", cg->home, strerror(-rc));
		return rc;
	}
	snprintf(cg->dir, sizeof(cg->dir), "%s/%s-%d", cg->home, name, (int)getpid());
	if (mkdir(cg->dir, 0755) < 0) {
		rc = -errno;
		snprintf(why, len, "cannot make cgroup %s: %s", cg->dir, strerror(-rc));
		cg->dir[0] = 0;
		return rc;
	}
	/* The kernel's memory in the same counter: v2 always; v1 charges it
	 * to memory.usage_in_bytes and shows it in memory.kmem.usage_in_bytes. */
	if (cg->version == 1 && read_ll(cg->dir, "memory.kmem.usage_in_bytes") < 0) {
		snprintf(why, len, "the v1 memory cgroup has no kmem accounting (memory.kmem.usage_in_bytes)");
		rc = -ENOTSUP;
		goto fail;
	}
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	if ((rc = write_str(cg->dir, "cgroup.procs", pid)) < 0) {
		snprintf(why, len, "cannot move this process into %s: %s", cg->dir, strerror(-rc));
		goto fail;
	}
	cg->entered = true;
	return 0;
fail:
	rmdir(cg->dir);
	cg->dir[0] = 0;
	return rc;
}

void bench_memcg_read(const struct bench_memcg *cg, struct bench_memcg_stat *st)
{
	memset(st, 0, sizeof(*st));
	if (cg->version == 2) {
		st->current = read_ll(cg->dir, "memory.current");
		st->peak = read_ll(cg->dir, "memory.peak");
		st->kernel = stat_of(cg, "kernel");
		st->kernel_stack = stat_of(cg, "kernel_stack");
		st->pagetables = stat_of(cg, "pagetables");
		st->sec_pagetables = stat_of(cg, "sec_pagetables");
		st->slab = stat_of(cg, "slab");
		st->percpu = stat_of(cg, "percpu");
		st->user = stat_of(cg, "anon") + stat_of(cg, "file");
		st->shmem = stat_of(cg, "shmem");
		return;
	}
	/* v1 has no breakdown of the kernel's part: the host-wide counters
	 * (/proc/meminfo), which the caller turns into a difference. */
	st->current = read_ll(cg->dir, "memory.usage_in_bytes");
	st->peak = read_ll(cg->dir, "memory.max_usage_in_bytes");
	st->kernel = read_ll(cg->dir, "memory.kmem.usage_in_bytes");
	st->kernel_stack = meminfo("KernelStack");
	st->pagetables = meminfo("PageTables");
	st->sec_pagetables = meminfo("SecPageTables");
	st->slab = meminfo("Slab");
	st->percpu = meminfo("Percpu");
	st->user = stat_of(cg, "rss") + stat_of(cg, "cache");
	st->shmem = stat_of(cg, "shmem");
}

void bench_memcg_leave(struct bench_memcg *cg)
{
	char pid[32];
	int rc;

	if (cg->entered) {
		snprintf(pid, sizeof(pid), "%d", (int)getpid());
		if ((rc = write_str(cg->home, "cgroup.procs", pid)) < 0)
			fprintf(stderr, "bench: cannot move back to %s: %s\n", cg->home, strerror(-rc));
		cg->entered = false;
	}
	/* Charges left (pages still cached) keep it as an offline cgroup in
	 * the kernel; the directory goes now. */
	if (cg->dir[0] && rmdir(cg->dir) < 0)
		fprintf(stderr, "bench: cannot remove cgroup %s: %s\n", cg->dir, strerror(errno));
	cg->dir[0] = 0;
}
