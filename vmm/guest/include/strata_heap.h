/* strata guest heap: setup and accounting of the region behind malloc/free. */
#ifndef STRATA_GUEST_STRATA_HEAP_H
#define STRATA_GUEST_STRATA_HEAP_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Hand the heap its region: [base, base + size). Called once by the runtime
 * at guest init, before any allocation. The region's pages must read as
 * zero until written (fresh pages populated on first touch): the heap relies
 * on that for calloc and never writes a page it has not handed out. Init
 * only stores base and size (no heap page is touched); a later call starts
 * over with an empty heap. base is rounded up and the end rounded down to
 * 4096 bytes; a region smaller than one page gives an empty heap.
 */
void strata_heap_init(void *base, size_t size);

/* Bytes currently allocated, counted as handed out: the size class for
 * small blocks, whole pages for large ones. Metadata is not counted. */
size_t strata_heap_in_use(void);

/* Usable bytes in the heap region (after page rounding). */
size_t strata_heap_size(void);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_GUEST_STRATA_HEAP_H */
