/* bench_alloc.c: the guest heap's malloc+free (vmm/guest/alloc.c, compiled for the host with sg_ names), in batches of 1000 pairs. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "bench.h"
/* The guest libc built for the host (-DSTRATA_LIBC_HOST_TEST, as
 * tests/guestlib builds it) names its calls sg_*. */
#define STRATA_LIBC_HOST_TEST 1
#include "vmm/guest/own_stdlib.h"
#include "vmm/guest/include/strata_heap.h"

#define PAIRS 1000   /* malloc+free pairs per timed iteration */
#define LIVE 1000    /* blocks kept live while they run */
#define PAGE 4096u

/* The heap calls abort() on corruption; on the host it is the real one. */
_Noreturn void sg_abort(void);
_Noreturn void sg_abort(void)
{
	abort();
}

struct alloc_arg {
	size_t size;        /* bytes per malloc */
	size_t live_size;   /* bytes of each live block (0: size) */
	unsigned free_runs; /* >0: leave this many free runs of 1-5 pages first */
};

struct alloc_state {
	void *region;
	size_t region_size;
	size_t size;
	void *live[2 * LIVE + 4000];
	size_t nlive;
};

/* A fresh heap (the allocator keeps one, so each case starts it again)
 * with the live blocks and free runs the case asks for. */
static int alloc_setup(void **state, const void *arg)
{
	const struct alloc_arg *a = arg;
	struct alloc_state *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->size = a->size;
	s->region_size = 512ull << 20;
	s->region = mmap(NULL, s->region_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			 -1, 0);
	if (s->region == MAP_FAILED) {
		free(s);
		return -errno;
	}
	strata_heap_init(s->region, s->region_size);
	size_t live_size = a->live_size ? a->live_size : a->size;
	for (unsigned i = 0; i < LIVE; i++)
		if (!(s->live[s->nlive++] = sg_malloc(live_size)))
			goto nomem;
	if (a->free_runs) {
		/* Blocks of 1-5 pages with a live one between: freeing every
		 * other one leaves that many separate free runs. */
		uint64_t x = 2026;
		void *tmp[2 * 2000];
		unsigned n = 2 * a->free_runs;
		if (n > sizeof(tmp) / sizeof(tmp[0]))
			n = sizeof(tmp) / sizeof(tmp[0]);
		for (unsigned i = 0; i < n; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			if (!(tmp[i] = sg_malloc((size_t)(1 + x % 5) * PAGE)))
				goto nomem;
		}
		for (unsigned i = 0; i < n; i++) {
			if (i % 2)
				sg_free(tmp[i]);
			else
				s->live[s->nlive++] = tmp[i];
		}
	}
	*state = s;
	return 0;
nomem:
	munmap(s->region, s->region_size);
	free(s);
	return -ENOMEM;
}

static int alloc_iter(void *state, struct bench_timer *t)
{
	struct alloc_state *s = state;
	(void)t;
	for (unsigned i = 0; i < PAIRS; i++) {
		void *p = sg_malloc(s->size);
		if (!p)
			return -ENOMEM;
		*(volatile char *)p = 1;
		sg_free(p);
	}
	return 0;
}

static void alloc_teardown(void *state)
{
	struct alloc_state *s = state;

	munmap(s->region, s->region_size);
	free(s);
}

void bench_alloc(struct bench *b)
{
	static const struct {
		const char *name;
		struct alloc_arg a;
	} cases[] = {
		{ "guest_alloc/malloc_free_x1000/16B/1000_live", { 16, 0, 0 } },
		{ "guest_alloc/malloc_free_x1000/64B/1000_live", { 64, 0, 0 } },
		{ "guest_alloc/malloc_free_x1000/256B/1000_live", { 256, 0, 0 } },
		{ "guest_alloc/malloc_free_x1000/1008B/1000_live", { 1008, 0, 0 } },
		{ "guest_alloc/malloc_free_x1000/2016B/1000_live", { 2016, 0, 0 } },
		{ "guest_alloc/malloc_free_x1000/2_pages/1000_live", { 2 * PAGE, 0, 0 } },
		{ "guest_alloc/malloc_free_x1000/16_pages/1000_live", { 16 * PAGE, 0, 0 } },
		{ "guest_alloc/malloc_free_x1000/3_pages/2000_free_runs", { 3 * PAGE, PAGE, 2000 } },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (!bench_selected(b, cases[i].name))
			continue;
		bench_run(b, &(struct bench_case){ .name = cases[i].name, .setup = alloc_setup, .iter = alloc_iter,
						   .teardown = alloc_teardown, .arg = &cases[i].a,
						   .iters = bench_quick(b) ? 20 : 200 });
	}
}
