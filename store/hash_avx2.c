/* hash_avx2.c: XXH3-128 compiled for AVX2 (built with -mavx2; called only when the CPU has it). */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "store/store_int.h"

void st_hash_avx2(const void *buf, size_t len, st_id *out)
{
	XXH128_canonical_t c;

	XXH128_canonicalFromHash(&c, XXH3_128bits(buf, len));
	memcpy(out->b, c.digest, sizeof(out->b));
}

void st_hash_avx2_update(void *state, const void *buf, size_t len)
{
	XXH3_128bits_update(state, buf, len);
}
