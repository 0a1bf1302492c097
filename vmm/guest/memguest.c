/* memguest.c: a guest that declares its heap and stack in its ELF (STRATA_GUEST_MEMORY) and reports what it got (tests/vmm/test_guestmem.c). */
#include <stdlib.h>
#include <string.h>

#include "include/strata_guest.h"

/* 3 MiB of heap, 192 KiB of stack: neither is a default, so a test sees
 * which the host used. */
STRATA_GUEST_MEMORY(3 << 20, 192 << 10);

STRATA_FUNCTION(heap_size, "i()")
{
	return strata_ret_i64(c, (int64_t)strata_boot_info()->heap_size);
}

STRATA_FUNCTION(stack_size, "i()")
{
	const struct strata_boot_info *b = strata_boot_info();

	return strata_ret_i64(c, (int64_t)(b->stack_hi - b->stack_lo));
}

/* take(N): malloc N bytes and write each page; 1 if it could, 0 if the
 * heap had no room (freed again either way). */
STRATA_FUNCTION(take, "i(i)")
{
	size_t n = (size_t)strata_arg_i64(c, 0);
	char *p = malloc(n);

	if (!p)
		return strata_ret_i64(c, 0);
	for (size_t i = 0; i < n; i += 4096)
		p[i] = 1;
	free(p);
	return strata_ret_i64(c, 1);
}
