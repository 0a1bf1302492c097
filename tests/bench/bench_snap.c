/* bench_snap.c: the "snapshots" benchmark group: capture, restore in place, restore_to, memory reset, give-back. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench.h"
#include "store/store.h"
#include "vmm/bare.h"
#include "vmm/vmm.h"

#define FLOOR "floor/kvm_run_roundtrip"
#define OWN_FLOOR "snapshots/floor/kvm_run_roundtrip"

/* The reset mode a benchmark names ("rewrite" or "drop"). */
static enum vmm_reset_mode mode_of(const char *name)
{
	return strcmp(name, "drop") == 0 ? VMM_RESET_DROP : VMM_RESET_REWRITE;
}

static const char *floor_name = FLOOR;

/* A sandbox with its own throwaway store, on a first snapshot. */
struct snap_state {
	char dir[64];
	struct st_store *st;
	struct vmm_sandbox *sb;
	struct st_manifest *m[5];  /* m[0..1]: alternate; m[0..4]: a cycle of five */
	int cur;
	int nsnaps;                /* restore_to cycles through m[0..nsnaps) */
	int64_t write_pages;   /* per call: 0 = echo */
	int64_t heavy_pages;
	char mode[16];
};

static int snap_now(struct snap_state *s, struct st_manifest **keep)
{
	struct st_manifest *m = NULL;
	st_id id;
	int rc = vmm_sandbox_capture(s->sb, s->st, &m);

	if (rc < 0)
		return rc;
	if ((rc = st_manifest_id(m, &id, NULL, 0)) == 0)
		rc = vmm_sandbox_rebase(s->sb, m, &id);
	if (keep && rc == 0)
		*keep = m;
	else
		st_manifest_free(m);
	return rc;
}

static void state_free(void *state)
{
	struct snap_state *s = state;

	if (!s)
		return;
	vmm_sandbox_free(s->sb);
	for (size_t i = 0; i < sizeof(s->m) / sizeof(s->m[0]); i++)
		st_manifest_free(s->m[i]);
	st_store_close(s->st);
	if (s->dir[0])
		bench_rm_rf(s->dir);
	free(s);
}

static int state_new(uint64_t heap, struct snap_state **out)
{
	struct snap_state *s = calloc(1, sizeof(*s));
	struct vmm_config cfg = { .heap_size = heap };
	struct st_store_opts o = { .sync = ST_SYNC_NONE };
	struct vmm_error err;
	char path[128];
	int rc;

	if (!s)
		return -ENOMEM;
	snprintf(s->dir, sizeof(s->dir), "/tmp/strata-bench-snap-XXXXXX");
	if (!mkdtemp(s->dir)) {
		s->dir[0] = 0;
		rc = -errno;
		goto out_free;
	}
	snprintf(path, sizeof(path), "%s/store", s->dir);
	if ((rc = st_store_init(path, &o)) < 0 || (rc = st_store_open(path, 0, &s->st)) < 0)
		goto out_free;
	if ((rc = vmm_sandbox_new(bench_guest_path(), &cfg, &s->sb, &err)) < 0) {
		fprintf(stderr, "bench: snapshots: %s\n", err.message);
		goto out_free;
	}
	if ((rc = snap_now(s, &s->m[0])) < 0)
		goto out_free;
	*out = s;
	return 0;
out_free:
	state_free(s);
	return rc;
}

static int echo(struct vmm_sandbox *sb)
{
	struct vmm_value v = { .type = VMM_STR, .data = "hello!", .len = 6 };
	struct vmm_result r = { 0 };
	int rc = vmm_sandbox_call(sb, "echo", &v, 1, &r);

	vmm_result_clear(&r);
	return rc;
}

static int touch(struct vmm_sandbox *sb, int64_t pages)
{
	struct vmm_value v = { .type = VMM_I64, .i64 = pages };
	struct vmm_result r = { 0 };

	if (pages == 0)
		return echo(sb);
	return vmm_sandbox_call(sb, "touch_pages", &v, 1, &r);
}

/* ---- snapshots/{create,restore,restore_alternate,call_and_create} ---- */

static int size_setup(void **state, const void *arg)
{
	return state_new(((const struct bench_size *)arg)->heap, (struct snap_state **)state);
}

/* Time one capture (and rebase onto it). */
static int timed_snap(struct snap_state *s, struct bench_timer *t)
{
	bench_timer_start(t);
	int rc = snap_now(s, NULL);
	bench_timer_stop(t);
	return rc;
}

static int create_iter(void *state, struct bench_timer *t)
{
	struct snap_state *s = state;
	int rc = echo(s->sb);

	return rc < 0 ? rc : timed_snap(s, t);
}

/* 1,024 pages two apart written by one call, then captured: a layer put
 * together from 1,024 separate runs of guest memory. */
static int create_scattered_iter(void *state, struct bench_timer *t)
{
	struct snap_state *s = state;
	struct vmm_value v[2] = { { .type = VMM_I64, .i64 = 1024 }, { .type = VMM_I64, .i64 = 2 } };
	struct vmm_result r = { 0 };
	int rc = vmm_sandbox_call(s->sb, "touch_strided", v, 2, &r);

	return rc < 0 ? rc : timed_snap(s, t);
}

static int restore_iter(void *state, struct bench_timer *t)
{
	struct snap_state *s = state;
	int rc = echo(s->sb);

	if (rc < 0)
		return rc;
	bench_timer_start(t);
	rc = vmm_sandbox_restore(s->sb);
	bench_timer_stop(t);
	return rc;
}

/* n snapshots that differ in a few ranges each, current = the last. */
static int snapshots_setup(void **state, const void *arg, int n)
{
	int rc = size_setup(state, arg);
	struct snap_state *s = *state;

	if (rc < 0)
		return rc;
	for (int i = 1; i < n; i++) {
		if ((rc = touch(s->sb, 15 + i)) < 0 || (rc = snap_now(s, &s->m[i])) < 0) {
			state_free(s);
			return rc;
		}
	}
	s->nsnaps = n;
	s->cur = n - 1;
	return 0;
}

/* Two snapshots in turn: each restore targets the one just left. */
static int alternate_setup(void **state, const void *arg)
{
	return snapshots_setup(state, arg, 2);
}

/* Jumping across a tree: five snapshots visited in turn, so each restore
 * targets one left four switches ago (the current one plus the kept
 * alternates cover five). */
static int cycle_setup(void **state, const void *arg)
{
	return snapshots_setup(state, arg, 5);
}

/* An untimed echo, then a timed restore to the next snapshot in turn. */
static int switch_iter(void *state, struct bench_timer *t)
{
	struct snap_state *s = state;
	int rc = echo(s->sb);

	if (rc < 0)
		return rc;
	s->cur = (s->cur + 1) % s->nsnaps;
	bench_timer_start(t);
	rc = vmm_sandbox_restore_to(s->sb, s->m[s->cur], vmm_layer_open_store, s->st);
	bench_timer_stop(t);
	return rc;
}

static int call_and_create_iter(void *state, struct bench_timer *t)
{
	struct snap_state *s = state;
	int rc = echo(s->sb);

	(void)t;
	return rc < 0 ? rc : snap_now(s, NULL);
}

/* ---- guest_calls/{call_with_restore,call_after_restore} and the memory-reset set ---- */

struct reset_arg {
	char name[96];
	uint64_t heap;
	int64_t pages;       /* written per call */
	const char *mode;    /* "rewrite" / "drop" */
	enum vmm_dirty_mech dirty;  /* how written pages are found (AUTO: the process's) */
};

static int reset_setup(void **state, const void *arg)
{
	const struct reset_arg *a = arg;
	int rc = state_new(a->heap, (struct snap_state **)state);
	struct snap_state *s = *state;

	if (rc < 0)
		return rc;
	s->write_pages = a->pages;
	if ((rc = vmm_sandbox_set_reset(s->sb, mode_of(a->mode), 0)) < 0 ||
	    (rc = vmm_sandbox_set_dirty(s->sb, a->dirty)) < 0) {
		state_free(s);
		return rc;
	}
	return 0;
}

static int call_with_restore_iter(void *state, struct bench_timer *t)
{
	struct snap_state *s = state;
	int rc = touch(s->sb, s->write_pages);

	(void)t;
	return rc < 0 ? rc : vmm_sandbox_restore(s->sb);
}

static int call_after_restore_iter(void *state, struct bench_timer *t)
{
	struct snap_state *s = state;
	int rc = vmm_sandbox_restore(s->sb);

	if (rc < 0)
		return rc;
	bench_timer_start(t);
	rc = touch(s->sb, s->write_pages);
	bench_timer_stop(t);
	return rc;
}

static int restore_only_iter(void *state, struct bench_timer *t)
{
	struct snap_state *s = state;
	int rc = touch(s->sb, s->write_pages);

	if (rc < 0)
		return rc;
	bench_timer_start(t);
	rc = vmm_sandbox_restore(s->sb);
	bench_timer_stop(t);
	return rc;
}

/* One 32 MiB call, then 32 light calls with restores (timed). */
static int after_heavy_iter(void *state, struct bench_timer *t)
{
	struct snap_state *s = state;
	int rc;

	if ((rc = touch(s->sb, 32 << 8)) < 0 || (rc = vmm_sandbox_restore(s->sb)) < 0)
		return rc;
	bench_timer_start(t);
	for (int i = 0; i < 32 && rc == 0; i++) {
		rc = echo(s->sb);
		if (rc == 0)
			rc = vmm_sandbox_restore(s->sb);
	}
	bench_timer_stop(t);
	return rc;
}

/* Resident guest pages (mincore over guest memory). */
static uint64_t resident_pages(struct vmm_sandbox *sb)
{
	uint8_t *mem;
	uint64_t size, n = 0;

	vmm_sandbox_memory(sb, &mem, &size);
	unsigned char *v = malloc(size / 4096);
	if (!v)
		return 0;
	if (mincore(mem, size, v) == 0)
		for (uint64_t i = 0; i < size / 4096; i++)
			n += v[i] & 1;
	free(v);
	return n;
}

/* Resident memory after a heavy run, then after light runs (give-back). */
static void resident_notes(struct bench *b, const char *mode)
{
	struct snap_state *s = NULL;
	char name[128];

	snprintf(name, sizeof(name), "snapshots/resident_after_heavy/%s", mode);
	if (!bench_selected(b, name) || state_new(64ull << 20, &s) < 0)
		return;
	vmm_sandbox_set_reset(s->sb, mode_of(mode), 0);
	touch(s->sb, 32 << 8);
	vmm_sandbox_restore(s->sb);
	bench_note(b, name, (double)resident_pages(s->sb) * 4096 / 1048576.0, "MiB");
	for (int i = 0; i < 32; i++) {
		echo(s->sb);
		vmm_sandbox_restore(s->sb);
	}
	snprintf(name, sizeof(name), "snapshots/resident_after_heavy_then_32_light/%s", mode);
	bench_note(b, name, (double)resident_pages(s->sb) * 4096 / 1048576.0, "MiB");
	state_free(s);
}

/*
 * What write tracking (KVM dirty log, uffd-wp) would cost per page: make the
 * heap read-only and writable again (the kernel write-protects the pages
 * and KVM drops its mappings, as a tracking epoch does), then time a call
 * writing 1 MiB of resident pages, against the same call without it.
 */
static int wp_setup(void **state, const void *arg)
{
	int rc = state_new(64ull << 20, (struct snap_state **)state);
	struct snap_state *s = *state;

	(void)arg;
	if (rc == 0 && (rc = touch(s->sb, 256)) < 0)
		state_free(s);
	return rc;
}

static int wp_iter(void *state, struct bench_timer *t)
{
	struct snap_state *s = state;
	uint8_t *mem;
	uint64_t size;

	vmm_sandbox_memory(s->sb, &mem, &size);
	if (s->write_pages) {
		/* the heap is the top of guest memory; touch_pages writes its start */
		uint8_t *heap = mem + size - (64ull << 20);
		if (mprotect(heap, 256 * 4096, PROT_READ) < 0 ||
		    mprotect(heap, 256 * 4096, PROT_READ | PROT_WRITE) < 0)
			return -errno;
	}
	bench_timer_start(t);
	int rc = touch(s->sb, 256);
	bench_timer_stop(t);
	return rc;
}

static int wp_setup_tracked(void **state, const void *arg)
{
	int rc = wp_setup(state, arg);

	if (rc == 0)
		((struct snap_state *)*state)->write_pages = 1;
	return rc;
}

static int floor_setup(void **state, const void *arg)
{
	(void)arg;
	return vmm_bare_new(VMM_BARE_CPL3_MMIO, (struct vmm_bare **)state);
}

static int floor_iter(void *state, struct bench_timer *t)
{
	(void)t;
	return vmm_bare_run(state);
}

static void floor_teardown(void *state)
{
	vmm_bare_free(state);
}

void bench_snap(struct bench *b)
{
	char name[128];
	unsigned nsizes = bench_quick(b) ? 2 : 4;

	/* The vmm group measures the floor first; under a filter that skips it,
	 * measure it here under our own name. */
	if (!bench_selected(b, FLOOR)) {
		floor_name = OWN_FLOOR;
		bench_run(b, &(struct bench_case){ .name = OWN_FLOOR, .setup = floor_setup, .iter = floor_iter,
						   .teardown = floor_teardown });
	}
	/* The per-size snapshot cases: name, setup, timed iteration. */
	static const struct {
		const char *fmt;
		int (*setup)(void **state, const void *arg);
		int (*iter)(void *state, struct bench_timer *t);
	} per_size[] = {
		{ "snapshots/create/%s", size_setup, create_iter },
		{ "snapshots/restore/%s", size_setup, restore_iter },
		{ "snapshots/restore_alternate/%s", alternate_setup, switch_iter },
		{ "snapshots/restore_cycle5/%s", cycle_setup, switch_iter },
		{ "snapshots/call_and_create/%s", size_setup, call_and_create_iter },
	};
	for (unsigned i = 0; i < nsizes; i++) {
		for (size_t k = 0; k < sizeof(per_size) / sizeof(per_size[0]); k++) {
			snprintf(name, sizeof(name), per_size[k].fmt, bench_sizes[i].name);
			bench_run(b, &(struct bench_case){ .name = name, .floor = floor_name,
							   .setup = per_size[k].setup, .iter = per_size[k].iter,
							   .teardown = state_free, .arg = &bench_sizes[i] });
		}
	}
	/* 4 MiB stored per iteration: few iterations keep the store small. */
	bench_run(b, &(struct bench_case){ .name = "snapshots/create_scattered_1024_pages/medium", .floor = floor_name,
					   .setup = size_setup, .iter = create_scattered_iter, .teardown = state_free,
					   .arg = &bench_sizes[2], .warmup = 2, .iters = 30 });
	bench_run(b, &(struct bench_case){ .name = "snapshots/mech/guest_write_1mib_resident", .floor = floor_name,
					   .setup = wp_setup, .iter = wp_iter, .teardown = state_free });
	bench_run(b, &(struct bench_case){ .name = "snapshots/mech/guest_write_1mib_after_write_protect",
					   .floor = floor_name, .setup = wp_setup_tracked, .iter = wp_iter,
					   .teardown = state_free, .max_seconds = 2.0 });
	static struct reset_arg calls[4];
	for (unsigned i = 0; i < nsizes; i++) {
		calls[i] = (struct reset_arg){ .heap = bench_sizes[i].heap, .pages = 0, .mode = "rewrite" };
		snprintf(name, sizeof(name), "guest_calls/call_with_restore/%s", bench_sizes[i].name);
		bench_run(b, &(struct bench_case){ .name = name, .floor = floor_name, .setup = reset_setup,
						   .iter = call_with_restore_iter, .teardown = state_free,
						   .arg = &calls[i] });
		snprintf(name, sizeof(name), "guest_calls/call_after_restore/%s", bench_sizes[i].name);
		bench_run(b, &(struct bench_case){ .name = name, .floor = floor_name, .setup = reset_setup,
						   .iter = call_after_restore_iter, .teardown = state_free,
						   .arg = &calls[i] });
	}
	/* The memory-reset set, under both reset modes (docs/restore.md). */
	static const uint64_t mems[2] = { 64, 256 };
	static const int64_t writes[3] = { 0, 1, 16 };
	static const char *const modes[2] = { "rewrite", "drop" };
	static struct reset_arg ra[2][3][2];
	for (int mi = 0; mi < 2; mi++)
		for (int wi = 0; wi < 3; wi++)
			for (int di = 0; di < 2; di++) {
				struct reset_arg *a = &ra[mi][wi][di];
				*a = (struct reset_arg){ .heap = mems[mi] << 20, .pages = writes[wi] << 8,
							 .mode = modes[di] };
				static const struct {
					const char *what;
					int (*iter)(void *, struct bench_timer *);
				} kinds[3] = { { "call_with_restore", call_with_restore_iter },
					       { "call_after_restore", call_after_restore_iter },
					       { "restore", restore_only_iter } };
				for (int k = 0; k < 3; k++) {
					snprintf(name, sizeof(name), "guest_calls/%llumib_write_%lldmib/%s/%s",
						 (unsigned long long)mems[mi], (long long)writes[wi], kinds[k].what,
						 modes[di]);
					bench_run(b, &(struct bench_case){ .name = name, .floor = floor_name,
									   .setup = reset_setup, .iter = kinds[k].iter,
									   .teardown = state_free, .arg = a,
									   .max_seconds = writes[wi] >= 16 ? 1.0 : 0 });
				}
			}
	/* Finding written pages: PAGEMAP_SCAN beside its fallback, reading
	 * pagemap entries (kernels before 6.7), restore only (docs/restore.md). */
	static const enum vmm_dirty_mech mechs[2] = { VMM_DIRTY_SCAN, VMM_DIRTY_READ };
	static const int64_t dirty_writes[3] = { 1, 256, 4096 };  /* pages: 4 KiB, 1 MiB, 16 MiB */
	static struct reset_arg da[2][3][2];
	for (int mi = 0; mi < 2; mi++)
		for (int wi = 0; wi < 3; wi++)
			for (int ki = 0; ki < 2; ki++) {
				struct reset_arg *a = &da[mi][wi][ki];
				*a = (struct reset_arg){ .heap = mems[mi] << 20, .pages = dirty_writes[wi],
							 .mode = "rewrite", .dirty = mechs[ki] };
				snprintf(name, sizeof(name), "snapshots/dirty/%llumib_write_%lldkib/%s",
					 (unsigned long long)mems[mi], (long long)dirty_writes[wi] * 4,
					 vmm_dirty_name(mechs[ki]));
				bench_run(b, &(struct bench_case){ .name = name, .floor = floor_name,
								   .setup = reset_setup, .iter = restore_only_iter,
								   .teardown = state_free, .arg = a,
								   .max_seconds = dirty_writes[wi] >= 4096 ? 1.0 : 0 });
			}
	/* Restore against pages written: one curve from a page to 16 MiB (64
	 * MiB guest, reset by rewrite, the machine's way of finding written
	 * pages), the plot in docs/figures.md. */
	static const int64_t sweep[] = { 1, 4, 16, 64, 256, 1024, 4096 };
	static struct reset_arg sw[sizeof(sweep) / sizeof(sweep[0])];
	for (size_t wi = 0; wi < sizeof(sweep) / sizeof(sweep[0]); wi++) {
		sw[wi] = (struct reset_arg){ .heap = 64ull << 20, .pages = sweep[wi], .mode = "rewrite" };
		snprintf(name, sizeof(name), "snapshots/restore_pages_written/64mib/%lld", (long long)sweep[wi]);
		bench_run(b, &(struct bench_case){ .name = name, .floor = floor_name, .setup = reset_setup,
						   .iter = restore_only_iter, .teardown = state_free, .arg = &sw[wi],
						   .max_seconds = sweep[wi] >= 4096 ? 1.0 : 0 });
	}
	static struct reset_arg heavy[2];
	for (int di = 0; di < 2; di++) {
		heavy[di] = (struct reset_arg){ .heap = 64ull << 20, .pages = 0, .mode = modes[di] };
		snprintf(name, sizeof(name), "guest_calls/32_after_32mib_mem_64mib/%s", modes[di]);
		bench_run(b, &(struct bench_case){ .name = name, .floor = floor_name, .setup = reset_setup,
						   .iter = after_heavy_iter, .teardown = state_free, .arg = &heavy[di],
						   .iters = 20, .max_seconds = 2.0 });
		resident_notes(b, modes[di]);
	}
}
