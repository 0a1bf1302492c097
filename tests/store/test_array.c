/* test_array.c: the growable-array helper every module uses (store/array.h). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "store/array.h"
#include "store/sys.h"

struct pair {
	uint64_t a, b;
};

Test(array, grows_by_doubling_and_keeps_the_elements)
{
	struct pair *v = NULL;
	size_t n = 0, cap = 0, grew = 0;

	for (uint64_t i = 0; i < 1000; i++) {
		size_t before = cap;
		cr_assert_eq(ST_ARRAY_RESERVE(v, cap, n + 1), 0);
		cr_assert_geq(cap, n + 1);
		if (cap != before) {
			grew++;
			cr_assert(before == 0 || cap == 2 * before, "capacity %zu after %zu", cap, before);
		}
		v[n++] = (struct pair){ i, ~i };
	}
	for (uint64_t i = 0; i < n; i++)
		cr_assert(v[i].a == i && v[i].b == ~i);
	cr_assert_leq(grew, 8, "1000 elements took %zu growths", grew);
	/* Room already there: nothing moves. */
	struct pair *same = v;
	cr_assert_eq(ST_ARRAY_RESERVE(v, cap, n), 0);
	cr_assert_eq(v, same);
	free(v);
}

Test(array, a_large_need_is_reached_in_one_call)
{
	char *buf = NULL;
	size_t cap = 0;

	cr_assert_eq(ST_ARRAY_RESERVE(buf, cap, 100000), 0);
	cr_assert_geq(cap, 100000);
	buf[99999] = 1;
	free(buf);
}

Test(array, overflow_is_refused_and_leaves_the_array_as_it_was)
{
	struct pair *v = NULL;
	size_t cap = 0;

	cr_assert_eq(ST_ARRAY_RESERVE(v, cap, 4), 0);
	struct pair *old = v;
	size_t old_cap = cap;
	cr_assert_eq(ST_ARRAY_RESERVE(v, cap, SIZE_MAX / 2), -ENOMEM);
	cr_assert_eq(ST_ARRAY_RESERVE(v, cap, SIZE_MAX), -ENOMEM);
	cr_assert(v == old && cap == old_cap);
	free(v);
}

Test(array, a_failed_allocation_leaves_the_array_as_it_was)
{
	int *v = NULL;
	size_t cap = 0;

	cr_assert_eq(ST_ARRAY_RESERVE(v, cap, 16), 0);
	for (int i = 0; i < 16; i++)
		v[i] = i;
	int *old = v;
	/* The growth goes through the allocator seam: its next step fails. */
	st_sys_fault_set(1, ENOMEM);
	int rc = ST_ARRAY_RESERVE(v, cap, 17);
	int fired = st_sys_fault_fired();
	st_sys_fault_set(0, 0);
	cr_assert_eq(rc, -ENOMEM);
	cr_assert(fired);
	cr_assert(v == old && cap == 16);
	for (int i = 0; i < 16; i++)
		cr_assert_eq(v[i], i);
	cr_assert_eq(ST_ARRAY_RESERVE(v, cap, 17), 0);
	cr_assert_eq(cap, 32);
	free(v);
}
