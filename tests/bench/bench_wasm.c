/* bench_wasm.c: the "wasm" benchmark group: a wasm module's work (wasm_bench_logic.h) as a guest restored from a snapshot per call, natively (wasm2c's C in this process), and as a C guest (docs/wasm.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench.h"
#include "store/store.h"
#include "vmm/vmm.h"

#ifdef STRATA_BENCH_WASM
#include "wasm_bench_native.h"
#endif

#define FLOOR "floor/kvm_run_roundtrip"
#define HEAP (4ull << 20)

struct wstate {
	char dir[64];
	struct st_store *st;
	struct vmm_sandbox *sb;
	struct st_manifest *m;   /* the snapshot of the initialised guest */
	uint64_t captured;   /* pages in the snapshot's layer */
};

static void wstate_free(void *state)
{
	struct wstate *s = state;

	if (!s)
		return;
	vmm_sandbox_free(s->sb);
	st_manifest_free(s->m);
	st_store_close(s->st);
	if (s->dir[0])
		bench_rm_rf(s->dir);
	free(s);
}

static int work(struct vmm_sandbox *sb)
{
	struct vmm_value v[3] = { { .type = VMM_I64, .i64 = 3 }, { .type = VMM_I64, .i64 = 4 }, { .type = VMM_I64, .i64 = 5 } };
	struct vmm_result r = { 0 };
	int rc = vmm_sandbox_call(sb, "work", v, 3, &r);

	if (rc == 0 && (r.type != VMM_STR || r.len < 10 || memcmp(r.data, "sum of 3, ", 10) != 0))
		rc = -EPROTO;
	vmm_result_clear(&r);
	return rc;
}

/* A sandbox from the guest, work called once (the initialising call), captured. */
static int wsetup(void **state, const void *arg)
{
	struct wstate *s = calloc(1, sizeof(*s));
	struct vmm_config cfg = { .heap_size = HEAP };
	struct st_store_opts o = { .sync = ST_SYNC_NONE };
	struct st_manifest *m = NULL;
	struct vmm_snap_stats before, after;
	struct vmm_error err;
	char path[128];
	st_id id;
	int rc;

	if (!s)
		return -ENOMEM;
	snprintf(s->dir, sizeof(s->dir), "/tmp/strata-bench-wasm-XXXXXX");
	if (!mkdtemp(s->dir)) {
		s->dir[0] = 0;
		rc = -errno;
		goto out_free;
	}
	snprintf(path, sizeof(path), "%s/store", s->dir);
	if ((rc = st_store_init(path, &o)) < 0 || (rc = st_store_open(path, 0, &s->st)) < 0)
		goto out_free;
	if ((rc = vmm_sandbox_new(arg, &cfg, &s->sb, &err)) < 0) {
		fprintf(stderr, "bench: wasm: %s: %s\n", (const char *)arg, err.message);
		goto out_free;
	}
	if ((rc = work(s->sb)) < 0)
		goto out_free;
	vmm_sandbox_snap_stats(s->sb, &before);
	if ((rc = vmm_sandbox_capture(s->sb, s->st, &m)) < 0)
		goto out_free;
	vmm_sandbox_snap_stats(s->sb, &after);
	s->captured = after.pages_captured - before.pages_captured;
	s->m = m;
	if ((rc = st_manifest_id(m, &id, NULL, 0)) == 0)
		rc = vmm_sandbox_rebase(s->sb, m, &id);
	if (rc < 0)
		goto out_free;
	*state = s;
	return 0;
out_free:
	wstate_free(s);
	return rc;
}

static int restore_call_iter(void *state, struct bench_timer *t)
{
	struct wstate *s = state;
	int rc = vmm_sandbox_restore(s->sb);

	(void)t;
	return rc < 0 ? rc : work(s->sb);
}

#ifdef STRATA_BENCH_WASM
/* The module's WASI imports (snprintf's stdio links them; work calls none). */
struct Z_wasi_snapshot_preview1_instance_t;
u32 Z_wasi_snapshot_preview1Z_fd_close(struct Z_wasi_snapshot_preview1_instance_t *w, u32 fd)
{
	(void)w, (void)fd;
	return 8;
}
u32 Z_wasi_snapshot_preview1Z_fd_seek(struct Z_wasi_snapshot_preview1_instance_t *w, u32 fd, u64 off, u32 wh, u32 out)
{
	(void)w, (void)fd, (void)off, (void)wh, (void)out;
	return 70;
}
u32 Z_wasi_snapshot_preview1Z_fd_write(struct Z_wasi_snapshot_preview1_instance_t *w, u32 fd, u32 iov, u32 n, u32 out)
{
	(void)w, (void)fd, (void)iov, (void)n, (void)out;
	return 8;
}

static Z_bench_native_instance_t native;

static int native_setup(void **state, const void *arg)
{
	(void)arg;
	wasm_rt_init();
	Z_bench_native_init_module();
	Z_bench_native_instantiate(&native, NULL);
	*state = &native;
	return 0;
}

static int native_iter(void *state, struct bench_timer *t)
{
	u32 off = Z_bench_nativeZ_work(state, 3, 4, 5);
	wasm_rt_memory_t *mem = Z_bench_nativeZ_memory(state);

	(void)t;
	return off < mem->size && memcmp(mem->data + off, "sum of 3, ", 10) == 0 ? 0 : -EPROTO;
}

static void native_teardown(void *state)
{
	Z_bench_native_free(state);
}
#endif

/* /proc/self/smaps_rollup's Pss, KiB (0 if unreadable). */
static unsigned long long pss_kib(void)
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

/* n sandboxes from the snapshot of the initialised module, each after one
 * call: the PSS this process gains per sandbox (kvm: the VMs' memory is this
 * process's; the process backend's children are not counted, so not run there). */
static void density(struct bench *b, const char *elf, unsigned n)
{
	char name[96];
	struct vmm_sandbox **sb = calloc(n, sizeof(*sb));
	void *st = NULL;
	unsigned made = 0;
	struct rlimit rl;

	snprintf(name, sizeof(name), "wasm/density/%u/pss_per_sandbox", n);
	if (!sb || !bench_selected(b, name) || wsetup(&st, elf) < 0) {
		free(sb);
		return;
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	struct wstate *s = st;
	unsigned long long before = pss_kib();
	for (made = 0; made < n; made++)
		if (vmm_sandbox_from_snapshot(s->m, vmm_layer_open_store, s->st, NULL, &sb[made], NULL) < 0 ||
		    work(sb[made]) < 0)
			break;
	unsigned long long after = pss_kib();
	if (made == n)
		bench_note(b, name, (double)(after - before) / made, "KiB");
	else
		fprintf(stderr, "bench: %s: only %u of %u sandboxes could be made\n", name, made, n);
	for (unsigned i = 0; i < n; i++)
		vmm_sandbox_free(sb[i]);
	free(sb);
	wstate_free(st);
}

void bench_wasm(struct bench *b)
{
	char wbuf[4096], cbuf[4096];
	const char *wasm_elf = bench_beside_self("wasm_bench.elf", wbuf, sizeof(wbuf));
	const char *c_elf = bench_beside_self("wasm_bench_guest.elf", cbuf, sizeof(cbuf));

	if (!wasm_elf || !c_elf) {
		fprintf(stderr, "bench: wasm: the wasm guests were not built (Debian's wabt, clang's wasm32 target and "
				"wasi-libc at meson setup): skipped\n");
		return;
	}
	bench_run(b, &(struct bench_case){ .name = "wasm/restore_and_call", .floor = FLOOR, .setup = wsetup,
					   .iter = restore_call_iter, .teardown = wstate_free, .arg = wasm_elf });
	bench_run(b, &(struct bench_case){ .name = "wasm/c_guest_restore_and_call", .floor = FLOOR, .setup = wsetup,
					   .iter = restore_call_iter, .teardown = wstate_free, .arg = c_elf });
#ifdef STRATA_BENCH_WASM
	/* Natively (no backend: measured in each backend's pass, so each has its ratio). */
	bench_run(b, &(struct bench_case){ .name = "wasm/native_call", .setup = native_setup,
					   .iter = native_iter, .teardown = native_teardown });
#endif
	/* The goal: (1) within 1.5x of (3); and (1)/(2), what isolation costs. */
	double w = bench_median(b, "wasm/restore_and_call"), c = bench_median(b, "wasm/c_guest_restore_and_call");
	if (w > 0 && c > 0)
		bench_note(b, "wasm/restore_and_call_vs_c_guest", w / c, "x");
	double nat = bench_median(b, "wasm/native_call");
	if (w > 0 && nat > 0)
		bench_note(b, "wasm/restore_and_call_vs_native", w / nat, "x");
	if (bench_backend(b) != VMM_BACKEND_PROCESS)
		density(b, wasm_elf, bench_quick(b) ? 100 : 1000);
	/* The snapshot of the initialised module, as captured after its first call. */
	void *st = NULL;
	if (bench_selected(b, "wasm/snapshot_bytes") && wsetup(&st, wasm_elf) == 0) {
		bench_note(b, "wasm/snapshot_bytes", (double)((struct wstate *)st)->captured * 4096, "bytes");
		wstate_free(st);
		if (wsetup(&st, c_elf) == 0) {
			bench_note(b, "wasm/c_guest_snapshot_bytes", (double)((struct wstate *)st)->captured * 4096, "bytes");
			wstate_free(st);
		}
	}
}
