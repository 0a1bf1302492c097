/* array.c: the growable-array helper (array.h). */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "store/array.h"
#include "store/sys.h"

#define ARRAY_FIRST_CAP 16

int st_array_reserve(void *arrp, size_t *cap, size_t need, size_t elem)
{
	size_t n = *cap ? *cap : ARRAY_FIRST_CAP;
	void *v;

	if (need <= *cap)
		return 0;
	while (n < need) {
		if (n > SIZE_MAX / 2)
			return -ENOMEM;
		n *= 2;
	}
	if (elem && n > SIZE_MAX / elem)
		return -ENOMEM;
	/* The pointer is read and written as bytes: *arrp may be any object
	 * pointer type, all of one representation here. */
	memcpy(&v, arrp, sizeof(v));
	if (!(v = st_sys_realloc(v, n * elem)))
		return -ENOMEM;
	memcpy(arrp, &v, sizeof(v));
	*cap = n;
	return 0;
}
