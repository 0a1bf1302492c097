/* strata guest libc: mem*, str* and number parsing for freestanding guests. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "include/stdlib.h"
#include "include/string.h"

/*
 * memcpy, memset and memmove are written with rep movsb / rep stosb on
 * x86-64. Besides being fast on CPUs with ERMS (and native at CPL 3), this
 * keeps gcc from turning a byte loop inside memset into a call to memset
 * (it does that even with -ffreestanding), which would recurse forever.
 */

void *STRATA_LIBC_NAME(memcpy)(void *restrict dst, const void *restrict src, size_t n)
{
#if defined(__x86_64__)
	void *d = dst;
	__asm__ volatile("rep movsb"
	                 : "+D"(d), "+S"(src), "+c"(n)
	                 :
	                 : "memory");
#else
	unsigned char *d = dst;
	const unsigned char *s = src;
	while (n--)
		*(volatile unsigned char *)d++ = *s++;
#endif
	return dst;
}

void *STRATA_LIBC_NAME(memset)(void *dst, int c, size_t n)
{
#if defined(__x86_64__)
	void *d = dst;
	__asm__ volatile("rep stosb"
	                 : "+D"(d), "+c"(n)
	                 : "a"(c)
	                 : "memory");
#else
	unsigned char *d = dst;
	while (n--)
		*(volatile unsigned char *)d++ = (unsigned char)c;
#endif
	return dst;
}

void *STRATA_LIBC_NAME(memmove)(void *dst, const void *src, size_t n)
{
	uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;

	/* Forward copy is safe unless dst starts inside [src, src + n). */
	if (d - s >= n)
		return STRATA_LIBC_NAME(memcpy)(dst, src, n);
#if defined(__x86_64__)
	{
		unsigned char *de = (unsigned char *)dst + n - 1;
		const unsigned char *se = (const unsigned char *)src + n - 1;
		__asm__ volatile("std\n\trep movsb\n\tcld"
		                 : "+D"(de), "+S"(se), "+c"(n)
		                 :
		                 : "memory");
	}
#else
	{
		unsigned char *dp = dst;
		const unsigned char *sp = src;
		while (n--)
			*(volatile unsigned char *)(dp + n) = sp[n];
	}
#endif
	return dst;
}

int STRATA_LIBC_NAME(memcmp)(const void *a, const void *b, size_t n)
{
	const unsigned char *x = a, *y = b;

	/* Compare a word at a time while the words agree. */
	while (n >= sizeof(uint64_t)) {
		uint64_t wx, wy;
		__builtin_memcpy(&wx, x, sizeof wx);
		__builtin_memcpy(&wy, y, sizeof wy);
		if (wx != wy)
			break;
		x += sizeof wx;
		y += sizeof wy;
		n -= sizeof wx;
	}
	for (; n; n--, x++, y++)
		if (*x != *y)
			return *x < *y ? -1 : 1;
	return 0;
}

void *STRATA_LIBC_NAME(memchr)(const void *s, int c, size_t n)
{
	const unsigned char *p = s;

	for (; n; n--, p++)
		if (*p == (unsigned char)c)
			return (void *)(uintptr_t)p;
	return NULL;
}

size_t STRATA_LIBC_NAME(strlen)(const char *s)
{
	const char *p = s;

	while (*p)
		p++;
	return (size_t)(p - s);
}

size_t STRATA_LIBC_NAME(strnlen)(const char *s, size_t max)
{
	size_t i = 0;

	while (i < max && s[i])
		i++;
	return i;
}

int STRATA_LIBC_NAME(strcmp)(const char *a, const char *b)
{
	const unsigned char *x = (const unsigned char *)a;
	const unsigned char *y = (const unsigned char *)b;

	while (*x && *x == *y) {
		x++;
		y++;
	}
	return (*x > *y) - (*x < *y);
}

int STRATA_LIBC_NAME(strncmp)(const char *a, const char *b, size_t n)
{
	const unsigned char *x = (const unsigned char *)a;
	const unsigned char *y = (const unsigned char *)b;

	for (; n; n--, x++, y++) {
		if (*x != *y)
			return *x < *y ? -1 : 1;
		if (!*x)
			break;
	}
	return 0;
}

char *STRATA_LIBC_NAME(strcpy)(char *restrict dst, const char *restrict src)
{
	size_t n = STRATA_LIBC_NAME(strlen)(src);

	STRATA_LIBC_NAME(memcpy)(dst, src, n + 1);
	return dst;
}

char *STRATA_LIBC_NAME(strncpy)(char *restrict dst, const char *restrict src, size_t n)
{
	size_t len = STRATA_LIBC_NAME(strnlen)(src, n);

	STRATA_LIBC_NAME(memcpy)(dst, src, len);
	STRATA_LIBC_NAME(memset)(dst + len, 0, n - len);
	return dst;
}

char *STRATA_LIBC_NAME(strchr)(const char *s, int c)
{
	for (;; s++) {
		if (*s == (char)c)
			return (char *)(uintptr_t)s;
		if (!*s)
			return NULL;
	}
}

char *STRATA_LIBC_NAME(strrchr)(const char *s, int c)
{
	const char *last = NULL;

	for (;; s++) {
		if (*s == (char)c)
			last = s;
		if (!*s)
			return (char *)(uintptr_t)last;
	}
}

char *STRATA_LIBC_NAME(strstr)(const char *haystack, const char *needle)
{
	size_t nlen = STRATA_LIBC_NAME(strlen)(needle);

	if (nlen == 0)
		return (char *)(uintptr_t)haystack;
	/* Quadratic in the worst case; guests search short strings. */
	for (const char *h = haystack; *h; h++)
		if (*h == *needle && STRATA_LIBC_NAME(strncmp)(h, needle, nlen) == 0)
			return (char *)(uintptr_t)h;
	return NULL;
}

static bool is_space(unsigned char c)
{
	return c == ' ' || (c >= '\t' && c <= '\r');
}

static int digit_value(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'Z')
		return c - 'A' + 10;
	return 99;
}

/*
 * Shared body of strtol/strtoul: parses the magnitude into *mag (saturating
 * at limit, with *overflow set) and the sign into *neg. Returns the end of
 * the parsed text, or s when no digits were found.
 */
static const char *parse_integer(const char *s, int base, unsigned long limit,
                                 unsigned long *mag, bool *neg, bool *overflow)
{
	const char *p = s;
	unsigned long v = 0;
	bool any = false;

	*neg = false;
	*overflow = false;
	*mag = 0;
	if (base < 0 || base == 1 || base > 36)
		return s;
	while (is_space((unsigned char)*p))
		p++;
	if (*p == '+' || *p == '-')
		*neg = *p++ == '-';
	if ((base == 0 || base == 16) && p[0] == '0' && (p[1] == 'x' || p[1] == 'X') &&
	    digit_value((unsigned char)p[2]) < 16) {
		p += 2;
		base = 16;
	} else if (base == 0) {
		base = p[0] == '0' ? 8 : 10;
	}
	for (;; p++) {
		int d = digit_value((unsigned char)*p);
		if (d >= base)
			break;
		any = true;
		if (v > (limit - (unsigned long)d) / (unsigned long)base) {
			*overflow = true;
			v = limit;
		} else if (!*overflow) {
			v = v * (unsigned long)base + (unsigned long)d;
		}
	}
	if (!any)
		return s;
	*mag = v;
	return p;
}

long STRATA_LIBC_NAME(strtol)(const char *restrict s, char **restrict end, int base)
{
	unsigned long mag;
	bool neg, overflow;
	/* The magnitude of LONG_MIN is one more than LONG_MAX. */
	unsigned long limit = (unsigned long)__LONG_MAX__ + 1;
	const char *p = parse_integer(s, base, limit, &mag, &neg, &overflow);

	if (end)
		*end = (char *)(uintptr_t)p;
	if (neg)
		return mag >= limit ? -__LONG_MAX__ - 1 : -(long)mag;
	return mag > (unsigned long)__LONG_MAX__ ? __LONG_MAX__ : (long)mag;
}

unsigned long STRATA_LIBC_NAME(strtoul)(const char *restrict s, char **restrict end, int base)
{
	unsigned long mag;
	bool neg, overflow;
	const char *p = parse_integer(s, base, ~0UL, &mag, &neg, &overflow);

	if (end)
		*end = (char *)(uintptr_t)p;
	if (overflow)
		return ~0UL;
	return neg ? -mag : mag;
}

int STRATA_LIBC_NAME(atoi)(const char *s)
{
	return (int)STRATA_LIBC_NAME(strtol)(s, NULL, 10);
}
