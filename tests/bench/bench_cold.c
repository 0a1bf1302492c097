/* bench_cold.c: benchmark group "cold": sandboxes from snapshot directories (store, mount, copy), snapshot files, density. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "index/index.h"
#include "store/store.h"
#include "vmm/vmm.h"

extern char **environ;

/* Every latency here is printed beside a bare KVM_RUN round trip (bench_vmm.c). */
#define FLOOR "floor/kvm_run_roundtrip"

/* One size's fixture: a store holding snapshot "s" of a guest after one
 * echo, an exported copy of it, and a mount of the store. */
struct cold {
	char dir[PATH_MAX], store[PATH_MAX + 16], copy[PATH_MAX + 16], mnt[PATH_MAX + 16], snap[PATH_MAX + 48];
	char blob[PATH_MAX];
	struct st_store *st;
	struct ix *ix;
	struct st_manifest *m;
	uint64_t heap;
	bool mounted;
};

static int echo(struct vmm_sandbox *sb)
{
	struct vmm_value a = { .type = VMM_STR, .data = "hello!", .len = 6 };
	struct vmm_result r = { 0 };
	int rc = vmm_sandbox_call(sb, "echo", &a, 1, &r);

	vmm_result_clear(&r);
	return rc;
}

/* Run `strata ARGS...` and wait for it. */
static int self_run(char *const argv[])
{
	pid_t pid = fork();
	int status;

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		if (null >= 0) {
			dup2(null, 1);
			dup2(null, 2);
		}
		execv(bench_strata_path(), argv);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) < 0)
		return -errno;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

int bench_first_run(char *const args[], uint64_t *ns)
{
	char path[4096], out[64];
	char *argv[8] = { "strata-bench-first" };
	posix_spawn_file_actions_t fa;
	size_t n = 0, k = 1;
	int fds[2], status, rc;
	pid_t pid;

	if (!bench_beside_self("strata-bench-first", path, sizeof(path)))
		return -ENOENT;
	for (; args[k - 1] && k < sizeof(argv) / sizeof(argv[0]) - 1; k++)
		argv[k] = args[k - 1];
	argv[k] = NULL;
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
	rc = -posix_spawn(&pid, path, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	if (rc < 0) {
		close(fds[0]);
		return rc;
	}
	for (ssize_t r; n < sizeof(out) - 1 && (r = read(fds[0], out + n, sizeof(out) - 1 - n)) != 0;)
		if (r > 0)
			n += (size_t)r;
		else if (errno != EINTR)
			break;
	close(fds[0]);
	out[n] = 0;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return -EIO;
	char *end;
	unsigned long long v = strtoull(out, &end, 10);
	if (end == out || *end != '\n')
		return -EPROTO;
	*ns = v;
	return 0;
}

static void cold_free(struct cold *c)
{
	if (!c)
		return;
	if (c->mounted) {
		char *argv[] = { "strata", "umount", c->mnt, NULL };
		if (self_run(argv) < 0)
			umount2(c->mnt, MNT_DETACH);
	}
	st_manifest_free(c->m);
	ix_close(c->ix);
	st_store_close(c->st);
	if (c->dir[0])
		bench_rm_rf(c->dir);
	free(c);
}

static int cold_new(uint64_t heap, int64_t touch, bool with_mount, struct cold **out)
{
	struct cold *c = calloc(1, sizeof(*c));
	struct vmm_config cfg = { .heap_size = heap };
	struct vmm_sandbox *sb = NULL;
	char why[ST_WHY_LEN];
	st_id id;
	int rc;

	if (!c)
		return -ENOMEM;
	c->heap = heap;
	if ((rc = bench_tmpdir("strata-bench-cold", c->dir, sizeof(c->dir))) < 0)
		goto out_free;
	snprintf(c->store, sizeof(c->store), "%s/store", c->dir);
	snprintf(c->copy, sizeof(c->copy), "%s/copy", c->dir);
	snprintf(c->mnt, sizeof(c->mnt), "%s/mnt", c->dir);
	snprintf(c->snap, sizeof(c->snap), "%s/snapshots/s", c->mnt);
	if ((rc = st_store_init(c->store, NULL)) < 0 || (rc = st_store_open(c->store, 0, &c->st)) < 0 ||
	    (rc = ix_open(c->st, NULL, &c->ix)) < 0)
		goto out_free;
	struct vmm_value a = { .type = VMM_I64, .i64 = touch };
	struct vmm_result r = { 0 };
	if ((rc = vmm_sandbox_new(bench_guest_path(), &cfg, &sb, NULL)) < 0 || (rc = echo(sb)) < 0 ||
	    (touch && (rc = vmm_sandbox_call(sb, "touch_pages", &a, 1, &r)) < 0) ||
	    (rc = vmm_sandbox_capture(sb, c->st, &c->m)) < 0 || (rc = ix_snap_commit(c->ix, c->m, "s", 0, &id)) < 0)
		goto out_free;
	if ((rc = st_snapdir_export(c->st, c->m, c->copy, why, sizeof(why))) < 0)
		goto out_free;
	if (c->m->nlayers && (rc = st_blob_path(c->st, &c->m->layers[0].id, c->blob, sizeof(c->blob))) < 0)
		goto out_free;
	if (with_mount) {
		char *argv[] = { "strata", "mount", c->store, c->mnt, NULL };
		if (mkdir(c->mnt, 0755) < 0 || (rc = self_run(argv)) < 0)
			goto out_free;
		c->mounted = true;
	}
	vmm_sandbox_free(sb);
	*out = c;
	return 0;
out_free:
	vmm_sandbox_free(sb);
	cold_free(c);
	return rc < 0 ? rc : -EIO;
}

/* Drop the page cache of every layer blob (a cold start from disk). */
static void drop_cache(const struct cold *c)
{
	for (uint32_t i = 0; i < c->m->nlayers; i++) {
		char path[PATH_MAX];
		if (st_blob_path(c->st, &c->m->layers[i].id, path, sizeof(path)) < 0)
			continue;
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
			close(fd);
		}
	}
}

/* What one case does, as flags over the fixture. */
enum {
	F_STORE = 1 << 0,     /* layers from the store (no directory) */
	F_COPY = 1 << 1,      /* the exported copy */
	F_MOUNT = 1 << 2,     /* the mount's snapshots/s */
	F_VERIFY = 1 << 3,    /* hash layers before mapping */
	F_VIA_FUSE = 1 << 4,  /* map the FUSE files, not the backing blobs */
	F_ECHO = 1 << 5,      /* one call after the restore (cold start) */
	F_COLD = 1 << 6,      /* drop the page cache first (untimed) */
	F_EVOLVE = 1 << 7,    /* from the ELF, not a snapshot */
	F_SAVE = 1 << 8,      /* export only */
	F_FREE_TIMED = 1 << 9, /* dropping the sandbox is part of the work (load) */
	F_NO_WARM = 1 << 10,   /* warm sandboxes off (VM shells on): every sandbox built */
	F_FIRST = 1 << 11      /* a process's first sandbox: a fresh process each time (strata-bench-first) */
};

struct cold_arg {
	uint64_t heap;
	unsigned flags;
	int64_t touch; /* heap pages the guest writes before the capture */
};

struct cold_state {
	struct cold *c;
	struct vmm_host *host;  /* the case's own: it starts with nothing kept */
	unsigned flags;
	unsigned n;
};

static int cold_setup(void **state, const void *arg)
{
	const struct cold_arg *a = arg;
	struct cold_state *s = calloc(1, sizeof(*s));
	int rc;

	if (!s)
		return -ENOMEM;
	s->flags = a->flags;
	struct vmm_host_config hc;
	vmm_host_config_defaults(&hc);
	hc.backend = vmm_backend_resolve(NULL, VMM_BACKEND_AUTO); /* the one being measured */
	if (a->flags & F_NO_WARM)
		hc.warm = 0;
	if ((rc = vmm_host_new(&hc, &s->host, NULL)) < 0) {
		free(s);
		return rc;
	}
	if ((rc = cold_new(a->heap, a->touch, a->flags & F_MOUNT, &s->c)) < 0) {
		vmm_host_free(s->host);
		free(s);
		return rc;
	}
	*state = s;
	return 0;
}

static void cold_teardown(void *state)
{
	struct cold_state *s = state;

	cold_free(s->c);
	vmm_host_free(s->host);
	free(s);
}

static int cold_iter(void *state, struct bench_timer *t)
{
	struct cold_state *s = state;
	struct cold *c = s->c;
	struct vmm_sandbox *sb = NULL;
	struct vmm_snapdir *d = NULL;
	struct vmm_config cfg = { .heap_size = c->heap, .host = s->host }, snap_cfg = { .host = s->host };
	int rc = 0;

	if (s->flags & F_SAVE) {
		char dir[PATH_MAX + 32], why[ST_WHY_LEN];
		snprintf(dir, sizeof(dir), "%s/save-%u", c->dir, s->n++);
		bench_timer_start(t);
		rc = st_snapdir_export(c->st, c->m, dir, why, sizeof(why));
		bench_timer_stop(t);
		bench_rm_rf(dir);
		return rc;
	}
	if (s->flags & F_COLD)
		drop_cache(c);
	if (s->flags & F_FIRST) {
		/* A new process each time: its host, its snapshot opened, one call. */
		char *args[] = { "sandbox", vmm_backend_resolve(NULL, VMM_BACKEND_AUTO) == VMM_BACKEND_KVM ? "kvm" : "process",
				 s->flags & F_MOUNT ? c->snap : c->copy, s->flags & F_VERIFY ? "verify" : NULL, NULL };
		uint64_t ns;
		if ((rc = bench_first_run(args, &ns)) == 0)
			bench_timer_set(t, ns);
		return rc;
	}
	bench_timer_start(t);
	if (s->flags & F_EVOLVE) {
		rc = vmm_sandbox_new(bench_guest_path(), &cfg, &sb, NULL);
	} else if (s->flags & F_STORE) {
		rc = vmm_sandbox_from_snapshot(c->m, vmm_layer_open_store, c->st, &snap_cfg, &sb, NULL);
	} else {
		unsigned fl = (s->flags & F_VERIFY ? VMM_SNAPDIR_VERIFY : 0) |
			      (s->flags & F_VIA_FUSE ? VMM_SNAPDIR_VIA_FUSE : 0);
		rc = vmm_snapdir_open(s->host, s->flags & F_MOUNT ? c->snap : c->copy, fl, &d, NULL);
		if (rc == 0)
			rc = vmm_sandbox_from_snapdir(d, &snap_cfg, &sb, NULL);
		vmm_snapdir_close(d);
	}
	if (rc == 0 && (s->flags & F_ECHO))
		rc = echo(sb);
	if (!(s->flags & F_FREE_TIMED))
		bench_timer_stop(t);
	vmm_sandbox_free(sb);
	if (s->flags & F_FREE_TIMED)
		bench_timer_stop(t);
	return rc;
}

static void cold_case(struct bench *b, const char *name, uint64_t heap, unsigned flags, int64_t touch)
{
	struct cold_arg a = { .heap = heap, .flags = flags, .touch = touch };
	struct bench_case c = {
		.name = name,
		.floor = flags & F_FIRST ? BENCH_FLOOR_FIRST : FLOOR,
		.setup = cold_setup,
		.iter = cold_iter,
		.teardown = cold_teardown,
		.arg = &a,
		.iters = flags & F_SAVE ? 20 : 100,
		.max_seconds = 3,
	};

	bench_run(b, &c);
}

/* Density: N sandboxes from one medium snapshot, each after a call that
 * writes 64 KiB (16 pages); PSS from smaps_rollup before and after. */
unsigned long long bench_pss_kib(void)
{
	FILE *f = fopen("/proc/self/smaps_rollup", "re");
	unsigned long long v = 0;
	char line[256];

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Pss: %llu kB", &v) == 1)
			break;
	fclose(f);
	return v;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Once all n exist: each in turn restored in place and called again (the
 * same 64 KiB write), three rounds. Creating sandboxes slows down as the
 * process holds more VMs; this shows whether using them does. */
static void steady(struct bench *b, unsigned n, struct vmm_sandbox **sb, unsigned made)
{
	enum { ROUNDS = 3 };
	double *t = calloc((size_t)made * ROUNDS, sizeof(*t));
	struct vmm_value a = { .type = VMM_I64, .i64 = 16 };
	char name[128];
	size_t k = 0;

	if (!t)
		return;
	for (unsigned r = 0; r < ROUNDS; r++)
		for (unsigned i = 0; i < made; i++) {
			struct vmm_result res = { 0 };
			int64_t t0 = bench_now_ns();
			if (vmm_sandbox_restore(sb[i]) < 0 || vmm_sandbox_call(sb[i], "touch_pages", &a, 1, &res) < 0)
				goto out;
			t[k++] = (double)(bench_now_ns() - t0) / 1e3;
		}
	qsort(t, k, sizeof(*t), cmp_double);
	snprintf(name, sizeof(name), "density/%u/medium/steady_restore_and_call_median", n);
	bench_note(b, name, t[k / 2], "us");
	snprintf(name, sizeof(name), "density/%u/medium/steady_restore_and_call_p90", n);
	bench_note(b, name, t[k * 9 / 10], "us");
out:
	free(t);
}

static void density(struct bench *b, unsigned n)
{
	char name[128];
	struct cold *c = NULL;
	struct vmm_sandbox **sb;
	struct rlimit rl;
	unsigned made = 0;
	uint64_t t0, t1;

	snprintf(name, sizeof(name), "density/%u/medium", n);
	if (!bench_selected(b, name))
		return;
	/* Each sandbox holds a VM, a vCPU and its layer files open. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	sb = calloc(n, sizeof(*sb));
	if (!sb || cold_new(64ull << 20, 0, false, &c) < 0) {
		fprintf(stderr, "bench: %s: setup failed\n", name);
		goto out;
	}
	unsigned long long before = bench_pss_kib();
	t0 = bench_now_ns();
	for (made = 0; made < n; made++) {
		struct vmm_value a = { .type = VMM_I64, .i64 = 16 };
		struct vmm_result r = { 0 };
		if (vmm_sandbox_from_snapshot(c->m, vmm_layer_open_store, c->st, NULL, &sb[made], NULL) < 0)
			break;
		if (vmm_sandbox_call(sb[made], "touch_pages", &a, 1, &r) < 0) {
			made++;
			break;
		}
	}
	t1 = bench_now_ns();
	unsigned long long after = bench_pss_kib();
	if (made < n) {
		fprintf(stderr, "bench: %s: only %u of %u sandboxes could be made\n", name, made, n);
		snprintf(name, sizeof(name), "density/%u/medium/sandboxes_made", n);
		bench_note(b, name, made, "sandboxes");
	}
	if (made) {
		snprintf(name, sizeof(name), "density/%u/medium/pss_total", n);
		bench_note(b, name, (double)(after - before) / 1024.0, "MiB");
		snprintf(name, sizeof(name), "density/%u/medium/pss_per_sandbox", n);
		bench_note(b, name, (double)(after - before) / made, "KiB (64 KiB written)");
		snprintf(name, sizeof(name), "density/%u/medium/create_and_first_call_mean", n);
		bench_note(b, name, (double)(t1 - t0) / made / 1e3, "us");
		steady(b, n, sb, made);
	}
out:
	for (unsigned i = 0; i < made; i++)
		vmm_sandbox_free(sb[i]);
	free(sb);
	cold_free(c);
}

void bench_cold(struct bench *b)
{
	char name[128];

	for (size_t i = 0; i < 4; i++) {
		const struct bench_size *z = &bench_sizes[i];
		if (bench_quick(b) && i > 1)
			break;
		static const struct {
			const char *fmt;
			unsigned flags;
		} cases[] = {
			{ "sandboxes/sandbox_from_snapshot/%s/store", F_STORE },
			{ "sandboxes/sandbox_from_snapshot/%s/store_no_warm", F_STORE | F_NO_WARM },
			{ "sandboxes/sandbox_from_snapshot/%s/copy", F_COPY },
			{ "sandboxes/sandbox_from_snapshot/%s/mount", F_MOUNT },
			{ "sandboxes/sandbox_from_snapshot/%s/mount_via_fuse", F_MOUNT | F_VIA_FUSE },
			{ "snapshot_files/save/%s", F_SAVE },
			{ "snapshot_files/load/%s", F_COPY | F_VERIFY | F_FREE_TIMED },
			{ "snapshot_files/load_unverified/%s", F_COPY | F_FREE_TIMED },
			{ "snapshot_files/cold_start_via_snapshot/%s", F_COPY | F_VERIFY | F_ECHO },
			{ "snapshot_files/cold_start_via_snapshot_unverified/%s", F_COPY | F_ECHO },
			{ "snapshot_files/cold_start_via_snapshot/%s/first_in_process", F_COPY | F_VERIFY | F_ECHO | F_FIRST },
			{ "snapshot_files/cold_start_via_mount/%s/first_in_process", F_MOUNT | F_ECHO | F_FIRST },
			{ "snapshot_files/cold_start_via_mount/%s/warm", F_MOUNT | F_ECHO },
			{ "snapshot_files/cold_start_via_mount/%s/cold", F_MOUNT | F_ECHO | F_COLD },
			{ "snapshot_files/cold_start_via_mount_via_fuse/%s/warm", F_MOUNT | F_VIA_FUSE | F_ECHO },
			{ "snapshot_files/cold_start_via_mount_via_fuse/%s/cold", F_MOUNT | F_VIA_FUSE | F_ECHO | F_COLD },
			{ "snapshot_files/cold_start_via_evolve/%s", F_EVOLVE | F_ECHO },
		};
		for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
			snprintf(name, sizeof(name), cases[k].fmt, z->name);
			if (bench_selected(b, name))
				cold_case(b, name, z->heap, cases[k].flags, 0);
		}
	}
	/* Verified loads run at hash speed: a medium guest that wrote all of
	 * its 64 MiB heap, so its snapshot holds 64 MiB of pages. */
	static const struct {
		const char *name;
		unsigned flags;
	} full[] = {
		{ "snapshot_files/load/medium_64MiB_written/mount", F_MOUNT | F_VERIFY | F_FREE_TIMED },
		{ "snapshot_files/load_unverified/medium_64MiB_written/mount", F_MOUNT | F_FREE_TIMED },
		{ "snapshot_files/load/medium_64MiB_written/copy", F_COPY | F_VERIFY | F_FREE_TIMED },
		{ "snapshot_files/load_unverified/medium_64MiB_written/copy", F_COPY | F_FREE_TIMED },
	};
	for (size_t k = 0; k < sizeof(full) / sizeof(full[0]) && !bench_quick(b); k++)
		if (bench_selected(b, full[k].name))
			cold_case(b, full[k].name, 64ull << 20, full[k].flags, (64 << 20) / 4096);
}

/*
 * Density as the machine pays it: the same n sandboxes (each after the
 * 64 KiB call) made on one backend with this process in a memory cgroup
 * of its own, which charges what they allocate from then on, the kernel's
 * memory for them included (VMs and vCPUs, the process backend's children
 * with their page tables and task structures). The snapshot is made
 * before, outside it: its pages in the page cache are shared by every
 * sandbox, as the PSS figures share them. Per sandbox, beside the PSS this
 * process gains in the same run.
 */
static void density_cgroup(struct bench *b, enum vmm_backend_kind backend, const char *prefix, unsigned n)
{
	struct vmm_config cfg = { .backend = backend };
	char name[160], base[96], why[256], unit[64];
	struct vmm_sandbox **sb = NULL;
	struct bench_memcg cg;
	struct bench_memcg_stat s0, s1;
	struct cold *c = NULL;
	struct rlimit rl;
	unsigned made = 0;

	snprintf(base, sizeof(base), "%sdensity/%u/medium/cgroup", prefix, n);
	if (!bench_selected_under(b, base))
		return;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	sb = calloc(n, sizeof(*sb));
	if (!sb || cold_new(64ull << 20, 0, false, &c) < 0) {
		fprintf(stderr, "bench: %s: setup failed\n", base);
		goto out;
	}
	if (bench_memcg_enter(&cg, "strata-bench-density", why, sizeof(why)) < 0) {
		fprintf(stderr, "bench: %s: skipped (%s)\n", base, why);
		snprintf(name, sizeof(name), "%s/skipped_no_memcg", base);
		bench_note(b, name, 1, why);
		goto out;
	}
	bench_memcg_read(&cg, &s0);
	unsigned long long pss0 = bench_pss_kib();
	for (made = 0; made < n; made++) {
		struct vmm_value a = { .type = VMM_I64, .i64 = 16 };
		struct vmm_result r = { 0 };
		if (vmm_sandbox_from_snapshot(c->m, vmm_layer_open_store, c->st, &cfg, &sb[made], NULL) < 0)
			break;
		if (vmm_sandbox_call(sb[made], "touch_pages", &a, 1, &r) < 0) {
			made++;
			break;
		}
	}
	bench_memcg_read(&cg, &s1);
	unsigned long long pss1 = bench_pss_kib();
	for (unsigned i = 0; i < made; i++)
		vmm_sandbox_free(sb[i]);
	bench_memcg_leave(&cg);
	if (made < n) {
		fprintf(stderr, "bench: %s: only %u of %u sandboxes could be made\n", base, made, n);
		snprintf(name, sizeof(name), "%s/sandboxes_made", base);
		bench_note(b, name, made, "sandboxes");
	}
	if (!made)
		goto out;
	/* The kernel's parts: v2's are this cgroup's; v1's host-wide. */
	long long kernel = s1.kernel - s0.kernel, stack = s1.kernel_stack - s0.kernel_stack;
	long long pt = s1.pagetables - s0.pagetables, spt = s1.sec_pagetables - s0.sec_pagetables;
	long long slab = s1.slab - s0.slab, percpu = s1.percpu - s0.percpu;
	const struct {
		const char *what;
		long long bytes;
		bool kernel_part;
	} rows[] = {
		{ "all_in", s1.current - s0.current, false },
		{ "peak", s1.peak, false },
		{ "user_pages", s1.user - s0.user, false },
		{ "kernel", kernel, false },
		{ "kernel_stack", stack, true },
		{ "pagetables", pt, true },
		{ "sec_pagetables", spt, true },
		{ "slab", slab, true },
		{ "percpu", percpu, true },
		/* What the kernel keeps besides (KVM's per-VM and per-vCPU
		 * pages, vmalloc'd structures): the rest of its charge. */
		{ "kernel_other", kernel - stack - pt - spt - slab - percpu, false },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		snprintf(name, sizeof(name), "%s/%s_per_sandbox", base, rows[i].what);
		snprintf(unit, sizeof(unit), "KiB (cgroup v%d%s)", cg.version,
			 rows[i].kernel_part && cg.version == 1 ? ", host-wide /proc/meminfo" : "");
		bench_note(b, name, (double)rows[i].bytes / 1024.0 / made, unit);
	}
	if (backend == VMM_BACKEND_PROCESS) {
		/* The process backend's guest memory is each sandbox's memfd
		 * (shared memory): the snapshot's pages copied in, the 64 KiB
		 * the call wrote and the child's control pages. The rest is what
		 * the backend keeps beside it: the child process (kernel stack,
		 * task, page tables, seccomp filter) and this process's part. */
		long long shmem = s1.shmem - s0.shmem;
		snprintf(name, sizeof(name), "%s/guest_memory_per_sandbox", base);
		snprintf(unit, sizeof(unit), "KiB (cgroup v%d shmem)", cg.version);
		bench_note(b, name, (double)shmem / 1024.0 / made, unit);
		snprintf(name, sizeof(name), "%s/beside_guest_memory_per_sandbox", base);
		snprintf(unit, sizeof(unit), "KiB (cgroup v%d)", cg.version);
		bench_note(b, name, (double)(s1.current - s0.current - shmem) / 1024.0 / made, unit);
	}
	snprintf(name, sizeof(name), "%s/pss_per_sandbox", base);
	bench_note(b, name, ((double)pss1 - (double)pss0) / made, "KiB (this process, same run)");
	snprintf(name, sizeof(name), "%s/snapshot_layers", base);
	bench_note(b, name, (double)st_manifest_layer_pages(c->m) * ST_PAGE_SIZE / 1024.0, "KiB (+ 64 KiB written each)");
out:
	free(sb);
	cold_free(c);
}

void bench_density(struct bench *b)
{
	/* Sandbox counts: what one costs as more share the snapshot (the
	 * plot in docs/figures.md); --quick makes the first few. */
	static const unsigned pss_n[] = { 10, 30, 100, 300, 1000 }, cgroup_n[] = { 100, 300, 1000 };
	size_t npss = bench_quick(b) ? 3 : sizeof(pss_n) / sizeof(pss_n[0]);
	size_t ncg = bench_quick(b) ? 1 : sizeof(cgroup_n) / sizeof(cgroup_n[0]);

	for (size_t i = 0; i < npss; i++)
		density(b, pss_n[i]);
	for (size_t i = 0; i < ncg; i++) {
		if (vmm_kvm_check(NULL) == 0) {
			bench_backend_note(b, VMM_BACKEND_KVM);
			density_cgroup(b, VMM_BACKEND_KVM, "", cgroup_n[i]);
		}
		bench_backend_note(b, VMM_BACKEND_PROCESS);
		density_cgroup(b, VMM_BACKEND_PROCESS, "process/", cgroup_n[i]);
	}
	bench_backend_note(b, VMM_BACKEND_AUTO);
}
