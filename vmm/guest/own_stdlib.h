/* own_stdlib.h: the heap and abort the runtime defines itself (sg_ names in host tests; guests include musl's <stdlib.h>). */
#ifndef STRATA_GUEST_STDLIB_H
#define STRATA_GUEST_STDLIB_H

#include <stddef.h>

#include "strata_libc.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The heap (see strata_heap.h and docs/guest-alloc.md). All returned
 * pointers are 16-byte aligned; allocations larger than 2016 bytes are
 * page-aligned whole pages. Out of memory returns NULL and leaves the heap
 * intact. Before strata_heap_init every allocation returns NULL.
 */

/* size bytes of uninitialised memory (malloc(0) returns a unique pointer). */
void *STRATA_LIBC_NAME(malloc)(size_t size);
/* n * size zeroed bytes, NULL if the product overflows. Pages the heap has
 * never handed out are known to be zero and are not written. */
void *STRATA_LIBC_NAME(calloc)(size_t n, size_t size);
/* Resize p keeping its contents (up to the smaller size). realloc(NULL, n)
 * is malloc(n); realloc(p, 0) frees p and returns NULL. On failure returns
 * NULL and p is untouched. Large blocks grow and shrink in place when they
 * can. */
void *STRATA_LIBC_NAME(realloc)(void *p, size_t size);
/* Release p (NULL is ignored). A pointer the heap did not hand out, or a
 * double free, calls abort(). */
void STRATA_LIBC_NAME(free)(void *p);
/* size bytes aligned to align, which must be a power of two (else NULL). */
void *STRATA_LIBC_NAME(aligned_alloc)(size_t align, size_t size);

/* Provided by the guest runtime: report an abort to the host and stop. */
_Noreturn void STRATA_LIBC_NAME(abort)(void);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_GUEST_STDLIB_H */
