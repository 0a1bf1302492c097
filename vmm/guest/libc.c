/* strata guest libc: the mem* and str* functions the runtime defines itself (musl has the rest: docs/guests.md). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "own_string.h"

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
