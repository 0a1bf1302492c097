/* array.h: not installed: shared by every module: the growable array (room for more elements, doubling). */
#ifndef STRATA_STORE_ARRAY_H
#define STRATA_STORE_ARRAY_H

#include <stddef.h>

/*
 * Make room for at least `need` elements of `elem` bytes in the array whose
 * pointer is at *arrp (any object pointer type: `&list->v`) and whose
 * capacity in elements is *cap. The capacity doubles (16 at first) until it
 * holds `need`; the memory comes from st_sys_realloc, so fault injection
 * reaches every growth. Returns 0, or -ENOMEM (too large or no memory) with
 * the array and *cap unchanged. New elements are not initialised.
 */
int st_array_reserve(void *arrp, size_t *cap, size_t need, size_t elem);

/* st_array_reserve for an array lvalue `arr` and its size_t capacity lvalue
 * `cap`: `if ((rc = ST_ARRAY_RESERVE(l->v, l->cap, l->n + 1)) < 0)`. */
#define ST_ARRAY_RESERVE(arr, cap, need) st_array_reserve(&(arr), &(cap), (need), sizeof(*(arr)))

#endif
