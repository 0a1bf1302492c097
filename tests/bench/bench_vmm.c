/* bench_vmm.c: the "vmm" benchmark group: KVM floor, sandbox creation, guest calls, kill latency. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "vmm/bare.h"
#include "vmm/vmm.h"

#define FLOOR "floor/kvm_run_roundtrip"

/* ---- floor ---- */

static int floor_setup(void **state, const void *arg)
{
	return vmm_bare_new(*(const enum vmm_bare_mode *)arg, (struct vmm_bare **)state);
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

/* A first sandbox's floor, as the first_in_process cases are measured: a
 * fresh process each time (strata-bench-first, bench_first.c), timed from
 * its main(). KVM: raw KVM_CREATE_VM, the memslot, KVM_CREATE_VCPU and one
 * KVM_RUN of a guest that exits at once; process: the child program
 * spawned and one round trip. */
static int floor_first_setup(void **state, const void *arg)
{
	*state = (void *)arg;
	return 0;
}

static int floor_first_iter(void *state, struct bench_timer *t)
{
	char *args[] = { (char *)state, NULL };
	uint64_t ns;
	int rc = bench_first_run(args, &ns);

	if (rc == 0)
		bench_timer_set(t, ns);
	return rc;
}

/* ---- sandboxes ---- */

static int host_add(void *ctx, const struct vmm_value *a, size_t n, struct vmm_value *ret)
{
	(void)ctx;
	(void)n;
	ret->type = VMM_I64;
	ret->i64 = (int64_t)((uint64_t)a[0].i64 + (uint64_t)a[1].i64);  /* wraps: random inputs */
	return 0;
}

static int sandbox_make(const struct vmm_config *cfg, struct vmm_sandbox **out)
{
	struct vmm_error err;
	int rc = vmm_sandbox_new(bench_guest_path(), cfg, out, &err);

	if (rc < 0) {
		fprintf(stderr, "bench: vmm: %s: %s\n", bench_guest_path(), err.message);
		return rc;
	}
	static const struct vmm_signature add_sig = { .ret = VMM_I64, .nparams = 2, .params = { VMM_I64, VMM_I64 } };
	rc = vmm_sandbox_register(*out, "host_add", &add_sig, host_add, NULL, &err);
	if (rc < 0) {
		fprintf(stderr, "bench: vmm: %s\n", err.message);
		vmm_sandbox_free(*out);
	}
	return rc;
}

static int create_setup(void **state, const void *arg)
{
	*state = (void *)arg;
	return 0;
}

static int create_iter(void *state, struct bench_timer *t)
{
	const struct bench_size *s = state;
	struct vmm_config cfg = { .heap_size = s->heap, .host = bench_host() };
	struct vmm_sandbox *sb;

	bench_timer_start(t);
	int rc = sandbox_make(&cfg, &sb);
	bench_timer_stop(t);
	if (rc == 0)
		vmm_sandbox_free(sb);
	return rc;
}

static int create_drop_iter(void *state, struct bench_timer *t)
{
	const struct bench_size *s = state;
	struct vmm_config cfg = { .heap_size = s->heap, .host = bench_host() };
	struct vmm_sandbox *sb;

	(void)t;
	int rc = sandbox_make(&cfg, &sb);
	if (rc == 0)
		vmm_sandbox_free(sb);
	return rc;
}

/* ---- calls ---- */

struct call_state {
	struct vmm_sandbox *sb;
	const char *fn;
	struct vmm_value args[2];
	size_t nargs;
	void *buf[2];
};

static int call_setup_cfg(void **state, const struct vmm_config *cfg)
{
	struct call_state *cs = calloc(1, sizeof(*cs));
	if (!cs)
		return -ENOMEM;
	int rc = sandbox_make(cfg, &cs->sb);
	if (rc < 0) {
		free(cs);
		return rc;
	}
	*state = cs;
	return 0;
}

static int echo_setup(void **state, const void *arg)
{
	const struct bench_size *s = arg;
	struct vmm_config cfg = { .heap_size = s->heap };
	int rc = call_setup_cfg(state, &cfg);
	if (rc < 0)
		return rc;
	struct call_state *cs = *state;
	cs->fn = "echo";
	cs->args[0] = (struct vmm_value){ .type = VMM_STR, .data = "hello!", .len = 6 };
	cs->nargs = 1;
	return 0;
}

static int add_setup(void **state, const void *arg)
{
	const struct bench_size *s = arg;
	struct vmm_config cfg = { .heap_size = s->heap };
	int rc = call_setup_cfg(state, &cfg);
	if (rc < 0)
		return rc;
	struct call_state *cs = *state;
	cs->fn = "add";
	cs->args[0] = (struct vmm_value){ .type = VMM_I64, .i64 = 1 };
	cs->args[1] = (struct vmm_value){ .type = VMM_I64, .i64 = 41 };
	cs->nargs = 2;
	return 0;
}

static int io24k_setup(void **state, const void *arg)
{
	struct vmm_config cfg = { .input_size = 64 << 10, .output_size = 16 << 10 };
	(void)arg;
	int rc = call_setup_cfg(state, &cfg);
	if (rc < 0)
		return rc;
	struct call_state *cs = *state;
	cs->buf[0] = malloc(24 << 10);
	if (!cs->buf[0])
		return -ENOMEM;
	for (size_t i = 0; i < (24 << 10); i++)
		((unsigned char *)cs->buf[0])[i] = (unsigned char)(i * 31);
	cs->fn = "in24k_out8k";
	cs->args[0] = (struct vmm_value){ .type = VMM_BYTES, .data = cs->buf[0], .len = 24 << 10 };
	cs->nargs = 1;
	return 0;
}

#define LARGE_ARG (50ull << 20)
static int large_setup(void **state, const void *arg)
{
	struct vmm_config cfg = { .input_size = 2 * LARGE_ARG + (1 << 20) };
	(void)arg;
	int rc = call_setup_cfg(state, &cfg);
	if (rc < 0)
		return rc;
	struct call_state *cs = *state;
	for (int i = 0; i < 2; i++) {
		cs->buf[i] = malloc(LARGE_ARG);
		if (!cs->buf[i])
			return -ENOMEM;
		memset(cs->buf[i], 'a' + i, LARGE_ARG);
		cs->args[i] = (struct vmm_value){ .type = VMM_BYTES, .data = cs->buf[i], .len = LARGE_ARG };
	}
	cs->fn = "large_params";
	cs->nargs = 2;
	return 0;
}

static int call_iter(void *state, struct bench_timer *t)
{
	struct call_state *cs = state;
	struct vmm_result res;

	(void)t;
	int rc = vmm_sandbox_call(cs->sb, cs->fn, cs->args, cs->nargs, &res);
	if (rc < 0) {
		fprintf(stderr, "bench: vmm: %s: %s\n", cs->fn, vmm_sandbox_error(cs->sb)->message);
		return rc;
	}
	vmm_result_clear(&res);
	return 0;
}

static void call_teardown(void *state)
{
	struct call_state *cs = state;

	if (!cs)
		return;
	vmm_sandbox_free(cs->sb);
	free(cs->buf[0]);
	free(cs->buf[1]);
	free(cs);
}

/* ---- interrupt latency: kill() to the spinning call returning ---- */

struct kill_state {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct vmm_sandbox *sb;   /* the sandbox for the next spin, or NULL */
	bool quit;
	atomic_int phase;         /* 0 idle, 1 calling, 2 returned */
	sem_t returned;           /* posted when the call returned */
	int rc;
};

static void *kill_worker(void *arg)
{
	struct kill_state *ks = arg;
	struct vmm_result res;

	for (;;) {
		pthread_mutex_lock(&ks->mu);
		while (!ks->sb && !ks->quit)
			pthread_cond_wait(&ks->cv, &ks->mu);
		struct vmm_sandbox *sb = ks->sb;
		ks->sb = NULL;
		bool quit = ks->quit;
		pthread_mutex_unlock(&ks->mu);
		if (quit)
			return NULL;
		atomic_store(&ks->phase, 1);
		ks->rc = vmm_sandbox_call(sb, "spin", NULL, 0, &res);
		atomic_store(&ks->phase, 2);
		sem_post(&ks->returned);
	}
}

static int kill_setup(void **state, const void *arg)
{
	struct kill_state *ks = calloc(1, sizeof(*ks));

	(void)arg;
	if (!ks)
		return -ENOMEM;
	pthread_mutex_init(&ks->mu, NULL);
	pthread_cond_init(&ks->cv, NULL);
	sem_init(&ks->returned, 0, 0);
	if (pthread_create(&ks->thread, NULL, kill_worker, ks) != 0) {
		free(ks);
		return -EAGAIN;
	}
	*state = ks;
	return 0;
}

static int kill_iter(void *state, struct bench_timer *t)
{
	struct kill_state *ks = state;
	struct vmm_config cfg = { 0 };
	struct vmm_sandbox *sb;
	int rc = sandbox_make(&cfg, &sb);

	if (rc < 0)
		return rc;
	atomic_store(&ks->phase, 0);
	pthread_mutex_lock(&ks->mu);
	ks->sb = sb;
	pthread_cond_signal(&ks->cv);
	pthread_mutex_unlock(&ks->mu);
	while (atomic_load(&ks->phase) == 0)
		sched_yield();
	/* Let the guest get into its loop. */
	struct timespec ts = { 0, 2000000 };
	nanosleep(&ts, NULL);
	/* Block (not spin) while waiting: on a busy 2-core machine a spinning
	 * waiter can hold the CPU the vCPU thread needs to see the signal. */
	bench_timer_start(t);
	vmm_sandbox_kill(sb);
	while (sem_wait(&ks->returned) != 0)
		;
	bench_timer_stop(t);
	rc = ks->rc == VMM_E_CANCELLED ? 0 : (ks->rc < 0 ? ks->rc : -EINVAL);
	vmm_sandbox_free(sb);
	return rc;
}

/* A spinning call with a 1 ms timeout: the total minus 1 ms is how late
 * the timeout stops the guest. */
static int timeout_iter(void *state, struct bench_timer *t)
{
	struct vmm_config cfg = { .timeout_ns = 1000000 };
	struct vmm_sandbox *sb;
	struct vmm_result res;
	int rc = sandbox_make(&cfg, &sb);

	(void)state;
	if (rc < 0)
		return rc;
	bench_timer_start(t);
	rc = vmm_sandbox_call(sb, "spin", NULL, 0, &res);
	bench_timer_stop(t);
	vmm_sandbox_free(sb);
	return rc == VMM_E_TIMEOUT ? 0 : (rc < 0 ? rc : -EINVAL);
}

static void kill_teardown(void *state)
{
	struct kill_state *ks = state;

	if (!ks)
		return;
	pthread_mutex_lock(&ks->mu);
	ks->quit = true;
	pthread_cond_signal(&ks->cv);
	pthread_mutex_unlock(&ks->mu);
	pthread_join(ks->thread, NULL);
	free(ks);
}

void bench_floor(struct bench *b)
{
	static const enum vmm_bare_mode modes[] = { VMM_BARE_CPL3_MMIO, VMM_BARE_CPL0_OUT, VMM_BARE_CPL3_INT3,
						    VMM_BARE_CPL3_GP };
	static const char *const mode_names[] = { FLOOR, "floor/kvm_run_roundtrip_cpl0_out",
						  "floor/kvm_run_roundtrip_cpl3_int3_stub",
						  "floor/kvm_run_roundtrip_cpl3_gp_stub" };
	static const enum vmm_bare_mode proc_modes[] = { VMM_BARE_PROCESS, VMM_BARE_PTRACE };
	/* The floor: the hypercall path guests use (CPL 3 store into the MMIO
	 * hypercall page); the other paths for comparison (docs/vmm.md). KVM's
	 * only where it runs. */
	bench_backend_note(b, VMM_BACKEND_KVM);
	for (size_t i = 0; i < 4 && vmm_backend_resolve(NULL, VMM_BACKEND_AUTO) == VMM_BACKEND_KVM; i++)
		bench_run(b, &(struct bench_case){ .name = mode_names[i], .floor = i ? FLOOR : NULL,
						   .setup = floor_setup, .iter = floor_iter,
						   .teardown = floor_teardown, .arg = &modes[i], .iters = 2000 });
	/* The process backend's: the same guest store, one signal, handover and
	 * return; and a ptrace stop and resume of the same store, the design
	 * it was measured against (docs/vmm.md). */
	bench_backend_note(b, VMM_BACKEND_PROCESS);
	bench_run(b, &(struct bench_case){ .name = BENCH_FLOOR_PROCESS, .setup = floor_setup, .iter = floor_iter,
					   .teardown = floor_teardown, .arg = &proc_modes[0], .iters = 2000 });
	bench_run(b, &(struct bench_case){ .name = "floor/ptrace_fault_roundtrip", .floor = BENCH_FLOOR_PROCESS,
					   .setup = floor_setup, .iter = floor_iter, .teardown = floor_teardown,
					   .arg = &proc_modes[1], .iters = 2000 });
	/* A process's first sandbox (the first_in_process cases) stands beside these. */
	bench_backend_note(b, VMM_BACKEND_KVM);
	if (vmm_backend_resolve(NULL, VMM_BACKEND_AUTO) == VMM_BACKEND_KVM)
		bench_run(b, &(struct bench_case){ .name = BENCH_FLOOR_FIRST, .setup = floor_first_setup,
						   .iter = floor_first_iter,
						   .arg = "kvm_floor", .iters = 100, .max_seconds = 2 });
	bench_backend_note(b, VMM_BACKEND_PROCESS);
	bench_run(b, &(struct bench_case){ .name = BENCH_FLOOR_PROCESS_FIRST, .setup = floor_first_setup,
					   .iter = floor_first_iter,
					   .arg = "process_floor", .iters = 100, .max_seconds = 2 });
	bench_backend_note(b, VMM_BACKEND_AUTO);
}

void bench_vmm(struct bench *b)
{
	char name[128];

	for (size_t i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "sandboxes/create_initialized/%s", bench_sizes[i].name);
		bench_run(b, &(struct bench_case){ .name = name, .floor = FLOOR, .setup = create_setup,
						   .iter = create_iter, .arg = &bench_sizes[i], .iters = 50 });
		snprintf(name, sizeof(name), "sandboxes/create_initialized_and_drop/%s", bench_sizes[i].name);
		bench_run(b, &(struct bench_case){ .name = name, .floor = FLOOR, .setup = create_setup,
						   .iter = create_drop_iter, .arg = &bench_sizes[i], .iters = 50 });
	}
	for (size_t i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "guest_calls/call/%s", bench_sizes[i].name);
		bench_run(b, &(struct bench_case){ .name = name, .floor = FLOOR, .setup = echo_setup,
						   .iter = call_iter, .teardown = call_teardown, .arg = &bench_sizes[i],
						   .iters = 2000 });
		snprintf(name, sizeof(name), "guest_calls/call_with_host_function/%s", bench_sizes[i].name);
		bench_run(b, &(struct bench_case){ .name = name, .floor = FLOOR, .setup = add_setup,
						   .iter = call_iter, .teardown = call_teardown, .arg = &bench_sizes[i],
						   .iters = 2000 });
	}
	bench_run(b, &(struct bench_case){ .name = "guest_calls/interrupt_latency", .floor = FLOOR,
					   .setup = kill_setup, .iter = kill_iter, .teardown = kill_teardown,
					   .iters = 50 });
	bench_run(b, &(struct bench_case){ .name = "guest_calls/timeout_1ms", .floor = FLOOR,
					   .iter = timeout_iter, .iters = 50 });
	bench_run(b, &(struct bench_case){ .name = "sample_workloads/24K_in_8K_out", .floor = FLOOR,
					   .setup = io24k_setup, .iter = call_iter, .teardown = call_teardown,
					   .iters = 1000 });
	bench_run(b, &(struct bench_case){ .name = "guest_call_with_large_parameters", .floor = FLOOR,
					   .setup = large_setup, .iter = call_iter, .teardown = call_teardown,
					   .warmup = 1, .iters = 10, .max_seconds = 5,
					   .bytes_per_iter = 2 * LARGE_ARG });
}
