/* bench.h: the harness of strata-bench (`strata bench`) that every area adds its cases to. */
#ifndef STRATA_TESTS_BENCH_H
#define STRATA_TESTS_BENCH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "vmm/vmm.h"

struct bench;        /* one run of `strata bench`: options and collected results */
struct bench_timer;  /* per-iteration timer handed to a case */

/*
 * A timed case. setup() builds state once (untimed), iter() runs one
 * iteration, teardown() frees the state. By default the whole iter() call is
 * timed; a case that must exclude work (e.g. a restore before the timed call)
 * brackets the timed part with bench_timer_start()/bench_timer_stop(), which
 * may be called once per iteration.
 */
struct bench_case {
	const char *name;        /* "guest_calls/call/default" */
	const char *floor;       /* name of an earlier result to print beside this one, or NULL */
	int (*setup)(void **state, const void *arg);
	int (*iter)(void *state, struct bench_timer *t);
	void (*teardown)(void *state);
	const void *arg;
	unsigned warmup;         /* untimed iterations first (0: harness default) */
	unsigned iters;          /* timed iterations wanted (0: harness default) */
	double max_seconds;      /* stop early after this much timed work (0: default) */
	uint64_t bytes_per_iter; /* >0: also report throughput */
	bool is_floor;           /* the floor of cases of its group: runs whatever --filter says (the
				  * group runs it only when one of them is selected) */
};

/* Run one case, record and print its result. Returns 0, or the first error
 * from setup/iter (reported, the run continues with the next case). */
int bench_run(struct bench *b, const struct bench_case *c);

/* Record a figure that is not a latency (bytes added, PSS per sandbox, a
 * ratio): printed in the table and written to the JSON file. */
void bench_note(struct bench *b, const char *name, double value, const char *unit);

/* The median (ns; a note's value) of the result recorded as name in this
 * backend's run (the prefix added as bench_run adds it), or -1. */
double bench_median(struct bench *b, const char *name);

/* True if the case name passes the user's --filter (so a group can skip
 * expensive setup for cases that will not run). */
bool bench_selected(const struct bench *b, const char *name);
/* True if some case named under prefix ("lazy/chunks/") can pass --filter:
 * the filter is in the prefix, or names a case under it. */
bool bench_selected_under(const struct bench *b, const char *prefix);
/* True under --quick: fewer iterations, smaller sizes where a group offers them. */
bool bench_quick(const struct bench *b);

void bench_timer_start(struct bench_timer *t);
void bench_timer_stop(struct bench_timer *t);
/* The iteration took ns, as measured elsewhere (a child process's own clock). */
void bench_timer_set(struct bench_timer *t, uint64_t ns);
/* Monotonic nanoseconds, for cases that time things themselves. */
uint64_t bench_now_ns(void);

/* The four sizes of BENCHMARKS.md (guest heap): default, small, medium, large. */
struct bench_size {
	const char *name;
	uint64_t heap;
};
extern const struct bench_size bench_sizes[4];
/* A host with the default limits and policy that benchmarks creating
 * sandboxes in a loop share (one per backend measured, made at first use,
 * freed after the run), so they measure what a program with a host sees;
 * NULL without memory. */
struct vmm_host *bench_host(void);
/* Run argv (a name looked up in PATH, or a path) with stdout and stderr
 * on /dev/null: its exit status, 128 if a signal ended it, or -errno. */
int bench_run_quiet(char *const argv[]);
/* REL from the directory of this program (build/tests/bench/) in buf, if
 * that file exists; else NULL. */
const char *bench_beside_self(const char *rel, char *buf, size_t len);
/* The simpleguest ELF: $STRATA_GUEST, else the build tree's (found from
 * $STRATA_BUILD or from where strata-bench is). */
const char *bench_guest_path(void);
/* The strata command the cases run (mount, umount, gc): $STRATA_BIN (which
 * `strata bench` sets to itself), else the build tree's. */
const char *bench_strata_path(void);
/* A fresh temp directory (mkdtemp under $TMPDIR or /tmp) in buf; remove it
 * and everything below with bench_rm_rf. */
int bench_tmpdir(const char *prefix, char *buf, size_t len);
int bench_rm_rf(const char *path);
/* Fill len bytes (a multiple of 8) with a xorshift sequence from seed:
 * incompressible, distinct per seed. */
void bench_fill(uint8_t *p, size_t len, uint64_t seed);

/* A group of cases, registered in bench.c's table. */
struct bench_group {
	const char *name;   /* "floor", "store", "vmm", "snapshots", "fs", ... */
	void (*run)(struct bench *b);
	bool per_backend;   /* run once per sandbox backend (kvm, then process/) */
};

/* The process backend's floor: one exit and resume of its child. */
#define BENCH_FLOOR_PROCESS "floor/process_roundtrip"
/* A first sandbox's floor, each backend's (bench_vmm.c): a bare VM made, run
 * once and freed; a child spawned, one round trip, ended. A case naming the
 * KVM one stands beside the process one on the process backend. */
#define BENCH_FLOOR_FIRST "floor/kvm_first_sandbox"
#define BENCH_FLOOR_PROCESS_FIRST "floor/process_first_sandbox"
/* The backend the running group's sandboxes use (vmm.h), and which backend
 * the results recorded from now on name (AUTO: none). */
enum vmm_backend_kind bench_backend(const struct bench *b);
void bench_backend_note(struct bench *b, enum vmm_backend_kind kind);

/* Groups, one per area (each in tests/bench/bench_<area>.c). */
void bench_store(struct bench *b);    /* bench_store.c */
void bench_vmm(struct bench *b);      /* bench_vmm.c */
void bench_index(struct bench *b);    /* bench_index.c */
void bench_fs(struct bench *b);       /* bench_fs.c */

void bench_snap(struct bench *b);     /* bench_snap.c */
void bench_cold(struct bench *b);     /* bench_cold.c */
void bench_density(struct bench *b);  /* bench_cold.c */
/* Run strata-bench-first (bench_first.c) with args (args[0] its mode) in a
 * fresh process: *ns gets the time it measured from its main() (bench_cold.c). */
int bench_first_run(char *const args[], uint64_t *ns);
/* This process's PSS (smaps_rollup), KiB (bench_cold.c). */
unsigned long long bench_pss_kib(void);
/*
 * A memory cgroup of its own for this process (bench_memcg.c): made under
 * the one it is in (cgroup v2 where the memory controller is there, else
 * v1), and the process moved into it, so that what it allocates from then
 * on (its children's too, and the kernel's memory for both) is charged
 * there. Leave moves it back and removes the cgroup.
 */
struct bench_memcg {
	int version;              /* 2 or 1 */
	char home[4096];          /* the cgroup the process was in */
	char dir[4096 + 64];      /* the one made for it */
	bool entered;
};
/* Bytes. v2: memory.current, memory.peak and memory.stat; v1:
 * memory.usage_in_bytes, memory.max_usage_in_bytes,
 * memory.kmem.usage_in_bytes and rss + cache, with the kernel's parts
 * (stacks, page tables, slab, percpu) host-wide from /proc/meminfo, as v1
 * breaks none of them down per cgroup. */
struct bench_memcg_stat {
	long long current, peak, kernel, user;
	long long shmem;          /* of user: shared memory (the process backend's guest memory) */
	long long kernel_stack, pagetables, sec_pagetables, slab, percpu;
};
/* 0, or -errno with why (no controller, no permission) filled. */
int bench_memcg_enter(struct bench_memcg *cg, const char *name, char *why, size_t len);
void bench_memcg_read(const struct bench_memcg *cg, struct bench_memcg_stat *st);
void bench_memcg_leave(struct bench_memcg *cg);
void bench_oci(struct bench *b);      /* bench_oci.c: push / pull through a loopback registry */
void bench_lazy(struct bench *b);     /* bench_lazy.c: first result from a delayed registry, lazy or not */
void bench_alloc(struct bench *b);    /* bench_alloc.c: the guest heap's malloc+free */
void bench_wasm(struct bench *b);     /* bench_wasm.c: a wasm module as a guest, natively, as a C guest */
void bench_lua(struct bench *b);      /* bench_lua.c: one Lua request: restore + eval, lua5.4 per request, a host Lua state */
void bench_checkpoint(struct bench *b); /* bench_checkpoint.c: a durable checkpoint after every call, one chain */
void bench_start(struct bench *b);    /* bench_start.c: whole processes, strata's own start beside libc and lua5.4 */
/* bench_oci.c: is prog on PATH; start docker-registry on a free loopback
 * port with its storage under dir (port_s gets the port, *pid the process). */
bool bench_have(const char *prog);
int bench_registry_start(const char *dir, char port_s[16], pid_t *pid);
void bench_floor(struct bench *b);    /* bench_vmm.c: the KVM round trips every latency is compared with */

#endif
