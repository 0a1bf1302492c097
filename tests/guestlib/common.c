/* tests/guestlib: helpers shared by the guest libc tests; also the sg_abort the heap calls. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/guestlib/common.h"

/* The guest runtime provides abort(); on the host it is the real one, so
 * heap-corruption tests can expect SIGABRT. */
_Noreturn void sg_abort(void)
{
	abort();
}

void *region_new(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	cr_assert(p != MAP_FAILED, "mmap %zu bytes", size);
	/* A huge page would make one touch look like 512. */
	cr_assert(madvise(p, size, MADV_NOHUGEPAGE) == 0);
	return p;
}

void region_free(void *base, size_t size)
{
	munmap(base, size);
}

size_t region_resident(const void *base, size_t size)
{
	size_t pages = size / TEST_PAGE, n = 0;
	unsigned char *vec = malloc(pages);

	cr_assert(vec);
	cr_assert(mincore((void *)(uintptr_t)base, size, vec) == 0);
	for (size_t i = 0; i < pages; i++)
		n += vec[i] & 1;
	free(vec);
	return n;
}

void *heap_new(size_t size)
{
	void *r = region_new(size);

	strata_heap_init(r, size);
	return r;
}

uint64_t rng_next(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545F4914F6CDD1DULL;
}
