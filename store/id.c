/* id.c: blob and snapshot ids (XXH3-128, canonical big-endian), streaming hashing and the name rule. */
#include <errno.h>
#if defined(STRATA_HAVE_AVX2)
#include <cpuid.h>
#endif
#include <stdlib.h>
#include <string.h>
/* Inlined rather than linked: the distribution's libxxhash is built for
 * baseline SSE2 only; AVX2 doubles hashing speed here (docs/formats.md). */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "store/store.h"
#include "store/store_int.h"

_Static_assert(sizeof(st_id) == sizeof(XXH128_canonical_t), "st_id is a canonical XXH128");

#if defined(STRATA_HAVE_AVX2)
/*
 * The CPU runs AVX2 and the kernel saves its registers (XCR0 holds the SSE
 * and AVX state): what __builtin_cpu_supports("avx2") answers, asked here
 * on the first hash rather than by libgcc's constructor, which a program
 * using __builtin_cpu_supports runs at every start and which reads every
 * CPUID leaf it knows (each CPUID traps to the hypervisor in a VM;
 * docs/benchmarks.md, "start").
 */
static bool cpu_avx2(void)
{
	unsigned a, b, c, d, lo, hi;

	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE) || !(c & bit_AVX))
		return false;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	if ((lo & 6) != 6)
		return false;
	return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_AVX2);
}

static bool have_avx2(void)
{
	static int cached = -1;

	if (cached < 0)
		cached = cpu_avx2() ? 1 : 0;
	return cached;
}
#else
static bool have_avx2(void)
{
	return false;
}
#endif

void st_id_hash(const void *buf, size_t len, st_id *out)
{
	XXH128_canonical_t c;

#if defined(STRATA_HAVE_AVX2)
	if (have_avx2()) {
		st_hash_avx2(buf, len, out);
		return;
	}
#endif
	XXH128_canonicalFromHash(&c, XXH3_128bits(buf, len));
	memcpy(out->b, c.digest, sizeof(out->b));
}

uint64_t st_hash64(const void *buf, size_t len)
{
	return XXH3_64bits(buf, len);
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1; /* uppercase is rejected: one id, one spelling */
}

int st_id_parse_n(const char *hex, size_t len, st_id *out)
{
	st_id id;

	if (!hex || len != ST_ID_HEX_LEN)
		return ST_EBADID;
	for (size_t i = 0; i < sizeof(id.b); i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return ST_EBADID;
		id.b[i] = (uint8_t)(hi << 4 | lo);
	}
	*out = id;
	return 0;
}

int st_id_parse(const char *hex, st_id *out)
{
	if (!hex)
		return ST_EBADID;
	return st_id_parse_n(hex, strnlen(hex, ST_ID_HEX_LEN + 1), out);
}

void st_id_format(const st_id *id, char out[ST_ID_HEX_LEN + 1])
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < sizeof(id->b); i++) {
		out[2 * i] = digits[id->b[i] >> 4];
		out[2 * i + 1] = digits[id->b[i] & 15];
	}
	out[ST_ID_HEX_LEN] = '\0';
}

bool st_id_equal(const st_id *a, const st_id *b)
{
	return memcmp(a->b, b->b, sizeof(a->b)) == 0;
}

int st_id_cmp(const st_id *a, const st_id *b)
{
	return memcmp(a->b, b->b, sizeof(a->b));
}

struct st_hasher {
	XXH3_state_t *state;
};

int st_hasher_new(struct st_hasher **out)
{
	struct st_hasher *h = st_sys_malloc(sizeof(*h));

	if (!h)
		return -ENOMEM;
	h->state = XXH3_createState();
	if (!h->state) {
		free(h);
		return -ENOMEM;
	}
	XXH3_128bits_reset(h->state);
	*out = h;
	return 0;
}

void st_hasher_reset(struct st_hasher *h)
{
	XXH3_128bits_reset(h->state);
}

void st_hasher_update(struct st_hasher *h, const void *buf, size_t len)
{
#if defined(STRATA_HAVE_AVX2)
	if (have_avx2()) {
		st_hash_avx2_update(h->state, buf, len);
		return;
	}
#endif
	XXH3_128bits_update(h->state, buf, len);
}

void st_hasher_final(const struct st_hasher *h, st_id *out)
{
	XXH128_canonical_t c;

	XXH128_canonicalFromHash(&c, XXH3_128bits_digest(h->state));
	memcpy(out->b, c.digest, sizeof(out->b));
}

void st_hasher_free(struct st_hasher *h)
{
	if (!h)
		return;
	XXH3_freeState(h->state);
	free(h);
}

bool st_name_valid(const char *name)
{
	size_t n;

	if (!name || !name[0])
		return false;
	char c = name[0];
	if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
		return false;
	for (n = 1; name[n]; n++) {
		c = name[n];
		if (n >= ST_NAME_MAX)
			return false;
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
		      c == '.' || c == '-'))
			return false;
	}
	return true;
}
