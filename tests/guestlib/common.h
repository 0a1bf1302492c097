/* tests/guestlib: helpers shared by the guest libc tests (sg_ names, heap regions, page counting). */
#ifndef TESTS_GUESTLIB_COMMON_H
#define TESTS_GUESTLIB_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "vmm/guest/own_stdlib.h"
#include "vmm/guest/include/strata_heap.h"
#include "vmm/guest/own_string.h"

#define TEST_PAGE 4096

/* A fresh anonymous private region (no huge pages), like a guest heap whose
 * pages are populated on first touch. Aborts the test on failure. */
void *region_new(size_t size);
void region_free(void *base, size_t size);
/* Pages of [base, base + size) that are resident (mincore). */
size_t region_resident(const void *base, size_t size);

/* A heap of size bytes over a new region; returns the region. */
void *heap_new(size_t size);

/* Deterministic PRNG for workloads (xorshift64*). */
uint64_t rng_next(uint64_t *state);

#endif
