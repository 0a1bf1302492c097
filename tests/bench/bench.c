/* bench.c: strata-bench, the benchmark program behind `strata bench`: warm-up, iterations, median and spread, table and JSON. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "store/array.h"
#include "vmm/vmm.h"
#include "vmm/vmm_int.h"  /* vmm_host_default_set */

#define BENCH_DEFAULT_WARMUP 5
#define BENCH_DEFAULT_ITERS 200
#define BENCH_DEFAULT_SECONDS 3.0

struct bench_timer {
	uint64_t start;
	uint64_t elapsed;
	bool used;
};

struct bench_result {
	char *name;
	double median, p10, p90, min, max; /* ns, or value for notes */
	unsigned n;
	uint64_t bytes_per_iter;
	char *floor;
	char *unit; /* NULL for latencies */
	const char *backend; /* the sandbox backend the case ran on, or NULL */
	const char *group;   /* the group (groups[].name) that recorded it */
	unsigned run;        /* which of --runs recorded it (0-based) */
	/* After the last run (runs > 1): each run's median and ratio to that
	 * run's floor (0: no floor), for the spread across runs. */
	double *run_median, *run_ratio;
	unsigned nruns;
};

struct bench {
	const char *filter;
	const char *json_path;
	bool quick;
	struct bench_result *res;
	size_t nres, cap;
	int failures;
	/* The backend the VMM groups run on right now: their cases are named
	 * with prefix ("" for kvm, "process/" for the process backend). */
	enum vmm_backend_kind backend;
	const char *prefix;
	const char *backend_name;
	const char *group;       /* the group running now */
	char **named;            /* the groups named on the command line (none: all) */
	int nnamed;
	double seconds[16];      /* wall time of each group that ran (groups[] order) */
	unsigned runs;           /* --runs: how many times every named group runs */
	unsigned run;            /* the run going on (0-based) */
};

/* Groups: each area adds one line. */
static const struct bench_group groups[] = {
	{ "floor", bench_floor, false }, /* first, and always: every latency is printed beside it */
	{ "store", bench_store, false },
	{ "vmm", bench_vmm, true },
	{ "index", bench_index, false },
	{ "fs", bench_fs, false },
	{ "snapshots", bench_snap, true },
	{ "cold", bench_cold, true },
	{ "density", bench_density, false },
	{ "oci", bench_oci, false },
	{ "lazy", bench_lazy, false },
	{ "alloc", bench_alloc, false },
	{ "wasm", bench_wasm, true },
	{ "lua", bench_lua, false },
	{ "checkpoint", bench_checkpoint, true },
	{ "start", bench_start, false },
	{ NULL, NULL, false },
};
_Static_assert(sizeof(groups) / sizeof(groups[0]) <= sizeof(((struct bench *)0)->seconds) / sizeof(double),
	       "struct bench's seconds[] holds a time for every group");

const struct bench_size bench_sizes[4] = {
	{ "default", 128ull << 10 },
	{ "small", 8ull << 20 },
	{ "medium", 64ull << 20 },
	{ "large", 256ull << 20 },
};

/*
 * Goals a case is held to, as its ratio to the floor it stands beside
 * (issue figures in docs/benchmarks.md): a name prefix, the most the
 * ratio may be on KVM and on the process backend (0: no goal there).
 * With --runs, the summary says for each whether every run met it, none
 * did, or the spread across runs crosses it, so a goal is never judged
 * on one run of a machine whose runs swing.
 */
static const struct bench_goal {
	const char *prefix;
	double kvm, process;
	/* NULL: the ratio is to the case's floor; else to the case named with
	 * this prefix in place of `prefix` (the same size), in the same run. */
	const char *vs;
	/* Non-NULL: only names that also end so (a case beside others under
	 * the same prefix). */
	const char *suffix;
	/* A figure (bench_note) whose value itself is held to the goal: a
	 * count derived from cases of the same run, e.g. round trips. */
	bool value;
	/* With vs: to the one case vs names, whatever follows the prefix. */
	bool whole;
} goals[] = {
	{ "guest_calls/call_with_restore/", 1.5, 3.0, NULL, NULL, false, false },
	{ "snapshots/restore_alternate/", 1.0, 0, NULL, NULL, false, false },
	{ "sandboxes/create_initialized/", 5.0, 0, NULL, NULL, false, false },
	/* An in-memory snapshot's restore costs what a store snapshot's does. */
	{ "snapshots/restore_mem/", 1.1, 1.1, "snapshots/restore/", NULL, false, false },
	/* A process's first sandbox: a fresh process each time, beside the
	 * kernel's part of a first VM (a child spawned and one round trip on
	 * the process backend), measured the same way (bench_first.c). */
	{ "snapshot_files/cold_start_via_snapshot/", 1.5, 1.5, NULL, "/first_in_process", false, false },
	{ "snapshot_files/cold_start_via_mount/", 1.5, 1.5, NULL, "/first_in_process", false, false },
	/* A lazy start with its working set: at most 5 round trips more than a
	 * cold start from the store, (median - local cold start) / RTT in the
	 * same run (bench_lazy.c; 0 ms has no round trips to count). */
	{ "lazy/lazy_working_set/20ms/round_trips_over_local", 5.0, 0, NULL, NULL, true, false },
	{ "lazy/lazy_working_set/60ms/round_trips_over_local", 5.0, 0, NULL, NULL, true, false },
	/* A process's own start (issue 26 §7; bench_start.c): the case names
	 * its backend, so the KVM column holds for both. */
	{ "start/strata_version", 1.5, 0, "start/floor/libc_process", NULL, false, true },
	{ "start/strata_run_call/", 3.0, 0, "start/floor/lua5.4_e", NULL, false, true },
	/* A durable checkpoint after every call (issue 26 §4; bench_checkpoint.c):
	 * a checkpoint against the store's own 4 KiB write + fdatasync, the
	 * chain's last checkpoint restored against a flat snapshot of the same
	 * memory, both floors of the same run and backend. */
	{ "checkpoint/call_capture_commit_", 4.0, 4.0, NULL, "KiB", false, false },
	{ "checkpoint/restore_last", 1.5, 1.5, NULL, NULL, false, false },
	{ NULL, 0, 0, NULL, NULL, false, false },
};

/* The goal of the result named name (its process/ prefix says the
 * backend), or 0; *vs (may be NULL) gets the name of the case it is
 * compared with when that is not its floor; *value (may be NULL) whether
 * the goal holds the figure's own value. */
static double goal_vs(const char *name, char *vs, size_t vslen, bool *value)
{
	bool process = strncmp(name, "process/", 8) == 0;
	const char *base = process ? name + 8 : name;

	for (size_t i = 0; goals[i].prefix; i++) {
		size_t len = strlen(goals[i].prefix);
		if (strncmp(base, goals[i].prefix, len) != 0)
			continue;
		size_t blen = strlen(base), slen = goals[i].suffix ? strlen(goals[i].suffix) : 0;
		if (slen && (blen < len + slen || strcmp(base + blen - slen, goals[i].suffix) != 0))
			continue;
		if (vs)
			vs[0] = '\0';
		if (vs && goals[i].vs && goals[i].whole)
			snprintf(vs, vslen, "%s", goals[i].vs);
		else if (vs && goals[i].vs)
			snprintf(vs, vslen, "%s%s%s", process ? "process/" : "", goals[i].vs, base + len);
		if (value)
			*value = goals[i].value;
		return process ? goals[i].process : goals[i].kvm;
	}
	return 0;
}

static double goal_of(const char *name)
{
	return goal_vs(name, NULL, 0, NULL);
}

/* bench_host's, one per backend; and the default hosts (keeping nothing)
 * that put sandboxes naming no host on the backend being measured. */
static struct vmm_host *hosts[3], *bare_hosts[3];

struct vmm_host *bench_host(void)
{
	enum vmm_backend_kind kind = vmm_backend_resolve(NULL, VMM_BACKEND_AUTO);
	struct vmm_host_config hc;

	vmm_host_config_defaults(&hc);
	hc.backend = kind;
	if (!hosts[kind] && vmm_host_new(&hc, &hosts[kind], NULL) < 0)
		hosts[kind] = NULL;
	return hosts[kind];
}

/* Sandboxes that name no host run on `kind` from now on (AUTO: where the
 * machine decides), caching nothing, as with no host at all. */
static void bench_backend_default(enum vmm_backend_kind kind)
{
	struct vmm_host_config hc = { .backend = kind };

	if (kind != VMM_BACKEND_AUTO && !bare_hosts[kind] && vmm_host_new(&hc, &bare_hosts[kind], NULL) < 0)
		bare_hosts[kind] = NULL;
	vmm_host_default_set(kind == VMM_BACKEND_AUTO ? NULL : bare_hosts[kind]);
}

int bench_run_quiet(char *const argv[])
{
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int st, rc;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc)
		return -rc;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

const char *bench_beside_self(const char *rel, char *buf, size_t len)
{
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (n <= 0)
		return NULL;
	self[n] = 0;
	if (!(slash = strrchr(self, '/')))
		return NULL;
	*slash = 0;
	if (snprintf(buf, len, "%s/%s", self, rel) >= (int)len)
		return NULL;
	return access(buf, F_OK) == 0 ? buf : NULL;
}

const char *bench_guest_path(void)
{
	static char buf[4096];
	const char *env = getenv("STRATA_GUEST");
	const char *build = getenv("STRATA_BUILD");
	const char *p;

	if (env && *env)
		return env;
	if (build && *build && snprintf(buf, sizeof(buf), "%s/vmm/guest/simpleguest.elf", build) < (int)sizeof(buf))
		return buf;
	if ((p = bench_beside_self("../../vmm/guest/simpleguest.elf", buf, sizeof(buf))))
		return p;
	return "simpleguest.elf";
}

const char *bench_strata_path(void)
{
	static char buf[4096];
	const char *env = getenv("STRATA_BIN");
	const char *p;

	if (env && *env)
		return env;
	if ((p = bench_beside_self("../../mount/strata", buf, sizeof(buf))))
		return p;
	return "strata";
}

int bench_tmpdir(const char *prefix, char *buf, size_t len)
{
	const char *tmp = getenv("TMPDIR");

	if (snprintf(buf, len, "%s/%s.XXXXXX", tmp && *tmp ? tmp : "/tmp", prefix) >= (int)len)
		return -ENAMETOOLONG;
	return mkdtemp(buf) ? 0 : -errno;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	return remove(path);
}

int bench_rm_rf(const char *path)
{
	return nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -errno;
}

void bench_fill(uint8_t *p, size_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;

	for (size_t i = 0; i + 8 <= len; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(p + i, &x, 8);
	}
}

uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void bench_timer_start(struct bench_timer *t)
{
	t->used = true;
	t->start = bench_now_ns();
}

void bench_timer_stop(struct bench_timer *t)
{
	t->elapsed += bench_now_ns() - t->start;
}

void bench_timer_set(struct bench_timer *t, uint64_t ns)
{
	t->used = true;
	t->elapsed = ns;
}

bool bench_selected_under(const struct bench *b, const char *prefix)
{
	return !b->filter || strstr(prefix, b->filter) != NULL || strncmp(b->filter, prefix, strlen(prefix)) == 0;
}

bool bench_selected(const struct bench *b, const char *name)
{
	char full[256];

	/* Floors always run: every filtered result is printed beside its floor. */
	if (!b->filter || strstr(name, b->filter) != NULL || strncmp(name, "floor/", 6) == 0)
		return true;
	snprintf(full, sizeof(full), "%s%s", b->prefix ? b->prefix : "", name);
	return strstr(full, b->filter) != NULL;
}

enum vmm_backend_kind bench_backend(const struct bench *b)
{
	return b->backend;
}

void bench_backend_note(struct bench *b, enum vmm_backend_kind kind)
{
	b->backend = kind;
	b->backend_name = kind == VMM_BACKEND_AUTO ? NULL : vmm_backend_name(kind);
}

bool bench_quick(const struct bench *b)
{
	return b->quick;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double quantile(const double *v, unsigned n, double q)
{
	double pos = q * (n - 1);
	unsigned lo = (unsigned)pos;
	double frac = pos - lo;

	if (lo + 1 >= n)
		return v[n - 1];
	return v[lo] + frac * (v[lo + 1] - v[lo]);
}

static void fmt_time(char *buf, size_t len, double ns)
{
	if (ns < 1e3)
		snprintf(buf, len, "%.0f ns", ns);
	else if (ns < 1e6)
		snprintf(buf, len, "%.2f us", ns / 1e3);
	else if (ns < 1e9)
		snprintf(buf, len, "%.2f ms", ns / 1e6);
	else
		snprintf(buf, len, "%.2f s", ns / 1e9);
}

/* The latest result named name: under --runs, the run going on's (a
 * case stands beside the floor measured in its own run). */
static struct bench_result *find_result(struct bench *b, const char *name)
{
	for (size_t i = b->nres; i-- > 0;)
		if (strcmp(b->res[i].name, name) == 0)
			return &b->res[i];
	return NULL;
}

double bench_median(struct bench *b, const char *name)
{
	char full[256];
	snprintf(full, sizeof(full), "%s%s", b->prefix ? b->prefix : "", name);
	const struct bench_result *r = find_result(b, full);
	return r ? r->median : -1;
}

static struct bench_result *add_result(struct bench *b)
{
	if (ST_ARRAY_RESERVE(b->res, b->cap, b->nres + 1) < 0)
		return NULL;
	struct bench_result *r = &b->res[b->nres++];
	memset(r, 0, sizeof(*r));
	r->group = b->group;
	r->run = b->run;
	return r;
}

static void print_result(struct bench *b, const struct bench_result *r)
{
	char med[32], p10[32], p90[32], fl[48] = "";

	if (r->unit) {
		printf("%-58s %14.3f %s\n", r->name, r->median, r->unit);
		fflush(stdout);
		return;
	}
	fmt_time(med, sizeof(med), r->median);
	fmt_time(p10, sizeof(p10), r->p10);
	fmt_time(p90, sizeof(p90), r->p90);
	if (r->floor) {
		const struct bench_result *f = find_result(b, r->floor);
		if (f && f->median > 0) {
			char ft[32];
			fmt_time(ft, sizeof(ft), f->median);
			snprintf(fl, sizeof(fl), "%s  %6.2fx", ft, r->median / f->median);
		}
	}
	printf("%-58s %11s %11s %11s %6u  %s", r->name, med, p10, p90, r->n, fl);
	if (r->bytes_per_iter && r->median > 0)
		printf("  %.2f GB/s", (double)r->bytes_per_iter / r->median);
	printf("\n");
	fflush(stdout);
}

int bench_run(struct bench *b, const struct bench_case *c)
{
	unsigned warmup = c->warmup ? c->warmup : BENCH_DEFAULT_WARMUP;
	unsigned iters = c->iters ? c->iters : BENCH_DEFAULT_ITERS;
	double max_s = c->max_seconds > 0 ? c->max_seconds : BENCH_DEFAULT_SECONDS;
	void *state = NULL;
	double *samples;
	unsigned n = 0;
	uint64_t spent = 0;
	int rc = 0;

	char name[256], floor[256];
	snprintf(name, sizeof(name), "%s%s", b->prefix ? b->prefix : "", c->name);
	/* Each backend's cases stand beside that backend's own floor. */
	if (c->floor && b->backend == VMM_BACKEND_PROCESS && strstr(c->floor, "kvm_run_roundtrip"))
		snprintf(floor, sizeof(floor), "%s", BENCH_FLOOR_PROCESS);
	else if (c->floor && b->backend == VMM_BACKEND_PROCESS && strcmp(c->floor, BENCH_FLOOR_FIRST) == 0)
		snprintf(floor, sizeof(floor), "%s", BENCH_FLOOR_PROCESS_FIRST);
	else
		snprintf(floor, sizeof(floor), "%s", c->floor ? c->floor : "");
	if (!c->is_floor && !bench_selected(b, c->name))
		return 0;
	if (b->quick) {
		iters = iters > 20 ? 20 : iters;
		warmup = warmup > 2 ? 2 : warmup;
		max_s /= 4;
	}
	samples = calloc(iters, sizeof(*samples));
	if (!samples)
		return -ENOMEM;
	if (c->setup && (rc = c->setup(&state, c->arg)) < 0) {
		fprintf(stderr, "bench: %s: setup failed: %s\n", name, strerror(-rc));
		goto out;
	}
	for (unsigned i = 0; i < warmup + iters; i++) {
		struct bench_timer t = { 0 };
		uint64_t t0 = bench_now_ns();
		rc = c->iter(state, &t);
		uint64_t t1 = bench_now_ns();
		if (rc < 0) {
			fprintf(stderr, "bench: %s: iteration %u failed: %s\n", name, i, strerror(-rc));
			goto out_teardown;
		}
		if (i < warmup)
			continue;
		uint64_t el = t.used ? t.elapsed : t1 - t0;
		samples[n++] = (double)el;
		spent += el;
		if (n >= 5 && spent > (uint64_t)(max_s * 1e9))
			break;
	}
	qsort(samples, n, sizeof(*samples), cmp_double);
	struct bench_result *r = add_result(b);
	if (!r) {
		rc = -ENOMEM;
		goto out_teardown;
	}
	r->name = strdup(name);
	r->floor = c->floor ? strdup(floor) : NULL;
	r->backend = b->backend_name;
	r->n = n;
	r->median = quantile(samples, n, 0.5);
	r->p10 = quantile(samples, n, 0.1);
	r->p90 = quantile(samples, n, 0.9);
	r->min = samples[0];
	r->max = samples[n - 1];
	r->bytes_per_iter = c->bytes_per_iter;
	print_result(b, r);
out_teardown:
	if (c->teardown)
		c->teardown(state);
out:
	if (rc < 0)
		b->failures++;
	free(samples);
	return rc;
}

void bench_note(struct bench *b, const char *name, double value, const char *unit)
{
	struct bench_result *r;

	if (!bench_selected(b, name) || !(r = add_result(b)))
		return;
	char full[256];
	snprintf(full, sizeof(full), "%s%s", b->prefix ? b->prefix : "", name);
	r->name = strdup(full);
	r->unit = strdup(unit);
	r->backend = b->backend_name;
	r->median = r->p10 = r->p90 = r->min = r->max = value;
	r->n = 1;
	print_result(b, r);
}

/* The median of n values (sorted in place). */
static double median_of(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return quantile(v, n, 0.5);
}

/*
 * After --runs N > 1: one result per name, whose median is the median of
 * the runs' medians (its p10/p90/min/max are those of the run nearest that
 * median), keeping each run's median and ratio to that run's own floor.
 */
static int merge_runs(struct bench *b)
{
	struct bench_result *out = calloc(b->nres ? b->nres : 1, sizeof(*out));
	size_t nout = 0;

	if (!out)
		return -ENOMEM;
	for (size_t i = 0; i < b->nres; i++) {
		struct bench_result *r = &b->res[i];
		size_t j;
		for (j = 0; j < nout && strcmp(out[j].name, r->name) != 0; j++)
			;
		if (j < nout)
			continue;
		/* The first of its name: gather every run's. */
		double *med = calloc(b->runs, sizeof(*med)), *ratio = calloc(b->runs, sizeof(*ratio));
		double *sorted = calloc(b->runs, sizeof(*sorted));
		unsigned n = 0;
		if (!med || !ratio || !sorted) {
			free(med);
			free(ratio);
			free(sorted);
			free(out);
			return -ENOMEM;
		}
		const struct bench_result *runs[64] = { 0 };
		for (size_t k = i; k < b->nres && n < b->runs && n < 64; k++) {
			const struct bench_result *q = &b->res[k];
			if (strcmp(q->name, r->name) != 0)
				continue;
			runs[n] = q;
			med[n] = q->median;
			ratio[n] = 0;
			if (q->floor) {
				for (size_t f = 0; f < b->nres; f++) {
					const struct bench_result *fr = &b->res[f];
					if (fr->run == q->run && strcmp(fr->name, q->floor) == 0 && fr->median > 0)
						ratio[n] = q->median / fr->median;
				}
			}
			n++;
		}
		memcpy(sorted, med, n * sizeof(*sorted));
		double m = median_of(sorted, n);
		unsigned near = 0;
		for (unsigned k = 1; k < n; k++)
			if (fabs(med[k] - m) < fabs(med[near] - m))
				near = k;
		out[nout] = *runs[near];
		out[nout].median = m;
		out[nout].run_median = med;
		out[nout].run_ratio = ratio;
		out[nout].nruns = n;
		free(sorted);
		nout++;
	}
	/* The merged results own the names; the others' strings go. */
	for (size_t i = 0; i < b->nres; i++) {
		bool kept = false;
		for (size_t j = 0; j < nout && !kept; j++)
			kept = out[j].name == b->res[i].name;
		if (!kept) {
			free(b->res[i].name);
			free(b->res[i].floor);
			free(b->res[i].unit);
		}
	}
	free(b->res);
	b->res = out;
	b->nres = b->cap = nout;
	return 0;
}

/* The median of a merged result's ratios to its runs' floors (0: none). */
static double run_ratio_median(const struct bench_result *r)
{
	double v[64];
	unsigned n = 0;

	for (unsigned k = 0; k < r->nruns && n < 64; k++)
		if (r->run_ratio[k] > 0)
			v[n++] = r->run_ratio[k];
	return n ? median_of(v, n) : 0;
}

/*
 * What each case with a goal (goals[]) showed across the runs: met in
 * every run, missed in every run, or a spread that crosses the goal (the
 * verdict of one run would depend on which run it was).
 */
static void print_goals(const struct bench *b)
{
	bool head = false;

	for (size_t i = 0; i < b->nres; i++) {
		const struct bench_result *r = &b->res[i];
		char vs[256];
		bool value = false;
		double goal = goal_vs(r->name, vs, sizeof(vs), &value), lo = 0, hi = 0, mid;
		unsigned n = 0;

		if (goal <= 0 || (r->unit != NULL) != value)
			continue;
		if (value) {
			/* The figure itself, in each run. */
			double v[64];
			if (r->nruns)
				for (unsigned k = 0; k < r->nruns && n < 64; k++)
					v[n++] = r->run_median[k];
			else
				v[n++] = r->median;
			for (unsigned k = 0; k < n; k++) {
				lo = k == 0 || v[k] < lo ? v[k] : lo;
				hi = k == 0 || v[k] > hi ? v[k] : hi;
			}
			mid = median_of(v, n);
		} else if (vs[0]) {
			/* Against another case of the same run(s). */
			const struct bench_result *o = find_result((struct bench *)b, vs);
			double v[64];
			if (!o || o->median <= 0)
				continue;
			if (r->nruns && o->nruns == r->nruns) {
				for (unsigned k = 0; k < r->nruns && n < 64; k++)
					if (o->run_median[k] > 0)
						v[n++] = r->run_median[k] / o->run_median[k];
			} else {
				v[n++] = r->median / o->median;
			}
			for (unsigned k = 0; k < n; k++) {
				lo = k == 0 || v[k] < lo ? v[k] : lo;
				hi = k == 0 || v[k] > hi ? v[k] : hi;
			}
			mid = n ? median_of(v, n) : 0;
		} else if (r->nruns) {
			for (unsigned k = 0; k < r->nruns; k++) {
				double x = r->run_ratio[k];
				if (x <= 0)
					continue;
				lo = n == 0 || x < lo ? x : lo;
				hi = n == 0 || x > hi ? x : hi;
				n++;
			}
			mid = run_ratio_median(r);
		} else {
			const struct bench_result *f = r->floor ? find_result((struct bench *)b, r->floor) : NULL;
			if (!f || f->median <= 0)
				continue;
			lo = hi = mid = r->median / f->median;
			n = 1;
		}
		if (!n)
			continue;
		if (!head) {
			printf("\n%-58s %8s %17s %7s  %s\n", "goal (ratio to the floor, or to the case named)", "median", "runs min-max",
			       "goal", b->runs > 1 ? "across the runs" : "in this one run");
			head = true;
		}
		const char *verdict = hi <= goal ? "met" : lo > goal ? "missed" : "spread crosses the goal";
		char span[40];
		const char *x = value ? "" : "x"; /* a value goal is a count, not a ratio */
		snprintf(span, sizeof(span), "%.2f%s-%.2f%s", lo, x, hi, x);
		printf("%-58s %7.2f%s %17s %6.2f%s  %s (%u run%s)%s%s\n", r->name, mid, value ? " " : x, span, goal,
		       value ? " " : x, verdict, n,
		       n == 1 ? "" : "s", vs[0] ? ", to " : "", vs);
	}
}

static int write_json(struct bench *b)
{
	json_t *root = json_object(), *arr = json_array();

	if (!root || !arr) {
		json_decref(root);
		json_decref(arr);
		return -ENOMEM;
	}
	json_object_set_new(root, "version", json_integer(1));
	json_object_set_new(root, "time", json_integer((json_int_t)time(NULL)));
	json_object_set_new(root, "quick", json_boolean(b->quick));
	json_object_set_new(root, "runs", json_integer(b->runs));
	/* What was asked for, so tests/bench/figures.py can merge a partial
	 * run into the kept one: the groups named (none: every group) and the
	 * filter. The floor runs every time but counts as measured only when
	 * named or in a run of every group. */
	json_t *named = json_array();
	for (int i = 0; i < b->nnamed; i++)
		json_array_append_new(named, json_string(b->named[i]));
	json_object_set_new(root, "groups", named);
	if (b->filter)
		json_object_set_new(root, "filter", json_string(b->filter));
	/* How long each group took, setup included: what a re-run costs (one run
	 * of --runs). */
	json_t *secs = json_object();
	for (size_t i = 0; groups[i].name; i++)
		if (b->seconds[i] > 0)
			json_object_set_new(secs, groups[i].name, json_real(b->seconds[i] / b->runs));
	json_object_set_new(root, "seconds", secs);
	/* What the machine offered this run: results depend on it. */
	struct vmm_error err;
	struct utsname u;
	json_t *machine = json_object();
	enum vmm_dirty_mech mech;
	bool have_mech = vmm_dirty_mechanism(&mech, &err) == 0;
	if (uname(&u) == 0)
		json_object_set_new(machine, "kernel", json_string(u.release));
	json_object_set_new(machine, "dirty_mechanism", have_mech ? json_string(vmm_dirty_name(mech)) : json_null());
	json_object_set_new(machine, "kvm", vmm_kvm_check(&err) == 0 ? json_string("usable") : json_string(err.message));
	json_object_set_new(root, "machine", machine);
	for (size_t i = 0; i < b->nres; i++) {
		const struct bench_result *r = &b->res[i];
		json_t *o = json_object();

		json_object_set_new(o, "name", json_string(r->name));
		if (r->group)
			json_object_set_new(o, "group", json_string(r->group));
		if (r->backend)
			json_object_set_new(o, "backend", json_string(r->backend));
		if (r->unit) {
			bool value = false;
			json_object_set_new(o, "value", json_real(r->median));
			json_object_set_new(o, "unit", json_string(r->unit));
			if (goal_vs(r->name, NULL, 0, &value) > 0 && value)
				json_object_set_new(o, "goal_value", json_real(goal_of(r->name)));
		} else {
			json_object_set_new(o, "median_ns", json_real(r->median));
			json_object_set_new(o, "p10_ns", json_real(r->p10));
			json_object_set_new(o, "p90_ns", json_real(r->p90));
			json_object_set_new(o, "min_ns", json_real(r->min));
			json_object_set_new(o, "max_ns", json_real(r->max));
			json_object_set_new(o, "iterations", json_integer(r->n));
			if (r->bytes_per_iter)
				json_object_set_new(o, "bytes_per_iter", json_integer((json_int_t)r->bytes_per_iter));
			const struct bench_result *f = r->floor ? find_result(b, r->floor) : NULL;
			if (r->nruns && f && run_ratio_median(r) > 0) {
				json_object_set_new(o, "floor", json_string(f->name));
				json_object_set_new(o, "floor_ratio", json_real(run_ratio_median(r)));
			} else if (f && f->median > 0) {
				json_object_set_new(o, "floor", json_string(f->name));
				json_object_set_new(o, "floor_ratio", json_real(r->median / f->median));
			}
			char vs[256];
			if (goal_vs(r->name, vs, sizeof(vs), NULL) > 0) {
				json_object_set_new(o, "goal_ratio", json_real(goal_of(r->name)));
				if (vs[0])
					json_object_set_new(o, "goal_vs", json_string(vs));
			}
		}
		if (r->nruns) {
			/* Every run's median (and ratio to its own floor). */
			json_t *runs = json_array();
			for (unsigned k = 0; k < r->nruns; k++) {
				json_t *one = json_object();
				json_object_set_new(one, r->unit ? "value" : "median_ns", json_real(r->run_median[k]));
				if (r->run_ratio[k] > 0)
					json_object_set_new(one, "floor_ratio", json_real(r->run_ratio[k]));
				json_array_append_new(runs, one);
			}
			json_object_set_new(o, "runs", runs);
		}
		json_array_append_new(arr, o);
	}
	json_object_set_new(root, "results", arr);
	int rc = json_dump_file(root, b->json_path, JSON_INDENT(1) | JSON_SORT_KEYS);
	json_decref(root);
	return rc == 0 ? 0 : -EIO;
}

/* Errors of the program itself, as "strata bench: ..." on stderr (it runs as `strata bench`). */
static void bench_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void bench_err(const char *fmt, ...)
{
	va_list ap;

	fputs("strata bench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void bench_usage(FILE *f)
{
	fprintf(f,
		"usage: strata bench [--filter TEXT] [--quick] [--runs N] [--json FILE] [--backend B] [--list] [GROUP...]\n"
		"\n"
		"Runs strata's benchmarks side by side in one process and prints, for each,\n"
		"the median, p10 and p90 of its iterations, the iteration count and, where\n"
		"one applies, this machine's floor measured in the same run with the ratio.\n"
		"The sandbox groups run once per backend: kvm (where /dev/kvm works) under\n"
		"their plain names, the process backend under process/.\n"
		"\n"
		"  --backend B    only this backend's sandbox cases (kvm or process; auto: both)\n"
		"  --filter TEXT  run only cases whose name contains TEXT\n"
		"  --quick        fewer iterations and sizes (a smoke run)\n"
		"  --runs N       run the named groups N times, one after another (default 1):\n"
		"                 each figure is the median of the runs' medians, the JSON keeps\n"
		"                 every run's, and the cases held to a goal say whether the\n"
		"                 spread across the runs crosses it\n"
		"  --json FILE    where to write results (default: bench-results.json)\n"
		"  --list         list the benchmark groups\n"
		"  GROUP...       run only these groups (e.g. `strata bench density`)\n");
}

/* One run of the groups named (every group if none; the floor always). */
static void run_groups(struct bench *b, enum vmm_backend_kind backend)
{
	printf("%-58s %11s %11s %11s %6s  %s\n", "benchmark", "median", "p10", "p90", "n", "floor  ratio");
	for (size_t i = 0; groups[i].name; i++) {
		bool run = b->nnamed == 0 || i == 0;
		for (int a = 0; a < b->nnamed && !run; a++)
			run = strcmp(groups[i].name, b->named[a]) == 0;
		if (!run)
			continue;
		b->group = groups[i].name;
		uint64_t t0 = bench_now_ns();
		if (!groups[i].per_backend) {
			groups[i].run(b);
			b->seconds[i] += (double)(bench_now_ns() - t0) / 1e9;
			continue;
		}
		/* VMM groups run once per backend this machine has, side by side:
		 * kvm under their plain names, the process backend under process/. */
		static const enum vmm_backend_kind kinds[] = { VMM_BACKEND_KVM, VMM_BACKEND_PROCESS };
		for (size_t k = 0; k < 2; k++) {
			if (kinds[k] == VMM_BACKEND_KVM && vmm_kvm_check(NULL) < 0 && backend != VMM_BACKEND_KVM)
				continue;
			if (backend != VMM_BACKEND_AUTO && backend != kinds[k])
				continue;
			bench_backend_note(b, kinds[k]);
			b->prefix = kinds[k] == VMM_BACKEND_PROCESS ? "process/" : "";
			bench_backend_default(kinds[k]);
			groups[i].run(b);
		}
		bench_backend_note(b, VMM_BACKEND_AUTO);
		b->prefix = NULL;
		bench_backend_default(backend);
		b->seconds[i] += (double)(bench_now_ns() - t0) / 1e9;
	}
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "filter", required_argument, NULL, 'f' },
		{ "quick", no_argument, NULL, 'q' },
		{ "runs", required_argument, NULL, 'r' },
		{ "json", required_argument, NULL, 'j' },
		{ "list", no_argument, NULL, 'l' },
		{ "backend", required_argument, NULL, 'B' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct bench b = { .json_path = "bench-results.json", .runs = 1 };
	enum vmm_backend_kind backend = VMM_BACKEND_AUTO;
	int c;

	while ((c = getopt_long(argc, argv, "f:qr:j:B:lh", opts, NULL)) != -1) {
		switch (c) {
		case 'f': b.filter = optarg; break;
		case 'q': b.quick = true; break;
		case 'r': {
			char *end;
			unsigned long n = strtoul(optarg, &end, 10);
			if (*optarg < '0' || *optarg > '9' || *end || n < 1 || n > 64) {
				bench_err("--runs wants a count from 1 to 64, not '%s'", optarg);
				return 2;
			}
			b.runs = (unsigned)n;
			break;
		}
		case 'j': b.json_path = optarg; break;
		case 'l':
			for (size_t i = 0; groups[i].name; i++)
				printf("%s\n", groups[i].name);
			return 0;
		case 'B':
			if (vmm_backend_parse(optarg, &backend) < 0) {
				bench_err("--backend wants auto, kvm or process, not '%s'", optarg);
				return 2;
			}
			bench_backend_default(backend);
			break;
		case 'h': bench_usage(stdout); return 0;
		default: bench_usage(stderr); return 2;
		}
	}
	/* GROUP... names the groups to run (default: all); the floor always runs. */
	for (int a = optind; a < argc; a++) {
		bool known = false;
		for (size_t i = 0; groups[i].name; i++)
			known |= strcmp(groups[i].name, argv[a]) == 0;
		if (!known) {
			bench_err("no benchmark group '%s' (see strata bench --list)", argv[a]);
			return 2;
		}
	}
	b.named = argv + optind;
	b.nnamed = argc - optind;
	for (b.run = 0; b.run < b.runs; b.run++) {
		if (b.runs > 1)
			printf("%srun %u of %u\n", b.run ? "\n" : "", b.run + 1, b.runs);
		run_groups(&b, backend);
	}
	int rc = b.runs > 1 ? merge_runs(&b) : 0;
	print_goals(&b);
	if (rc == 0)
		rc = write_json(&b);
	if (rc < 0)
		bench_err("cannot write %s: %s", b.json_path, strerror(-rc));
	else
		printf("results written to %s\n", b.json_path);
	for (size_t i = 0; i < b.nres; i++) {
		free(b.res[i].name);
		free(b.res[i].floor);
		free(b.res[i].unit);
		free(b.res[i].run_median);
		free(b.res[i].run_ratio);
	}
	free(b.res);
	vmm_host_default_set(NULL);
	for (size_t k = 0; k < 3; k++) {
		if (vmm_host_free(hosts[k]) == 0)
			hosts[k] = NULL;
		if (vmm_host_free(bare_hosts[k]) == 0)
			bare_hosts[k] = NULL;
	}
	if (b.failures) {
		bench_err("%d case(s) failed", b.failures);
		return 1;
	}
	return rc < 0 ? 1 : 0;
}
