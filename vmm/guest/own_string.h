/* own_string.h: the mem* and str* functions the runtime defines itself (sg_ names in host tests; guests include musl's <string.h>). */
#ifndef STRATA_GUEST_STRING_H
#define STRATA_GUEST_STRING_H

#include <stddef.h>

/*
 * STRATA_LIBC_NAME(x) is the link name of libc function x. Guests see the
 * plain names (gcc emits calls to memcpy/memset/memmove/memcmp by itself, so
 * those must exist under exactly those names). The host test build
 * (-DSTRATA_LIBC_HOST_TEST) prefixes them with sg_ so they can be linked and
 * compared next to the host's C library.
 */
#include "strata_libc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Copy n bytes; the ranges must not overlap. Returns dst. */
void *STRATA_LIBC_NAME(memcpy)(void *restrict dst, const void *restrict src, size_t n);
/* Copy n bytes; the ranges may overlap. Returns dst. */
void *STRATA_LIBC_NAME(memmove)(void *dst, const void *src, size_t n);
/* Fill n bytes with (unsigned char)c. Returns dst. */
void *STRATA_LIBC_NAME(memset)(void *dst, int c, size_t n);
/* Compare n bytes as unsigned char: <0, 0 or >0. */
int STRATA_LIBC_NAME(memcmp)(const void *a, const void *b, size_t n);
/* First byte equal to (unsigned char)c in the first n bytes, or NULL. */
void *STRATA_LIBC_NAME(memchr)(const void *s, int c, size_t n);

/* Length of the NUL-terminated string s. */
size_t STRATA_LIBC_NAME(strlen)(const char *s);
/* Length of s, reading at most max bytes. */
size_t STRATA_LIBC_NAME(strnlen)(const char *s, size_t max);
/* Compare strings as unsigned char: <0, 0 or >0. */
int STRATA_LIBC_NAME(strcmp)(const char *a, const char *b);
/* Compare at most n bytes of two strings. */
int STRATA_LIBC_NAME(strncmp)(const char *a, const char *b, size_t n);
/* Copy src including its NUL into dst. Returns dst. */
char *STRATA_LIBC_NAME(strcpy)(char *restrict dst, const char *restrict src);
/* Copy at most n bytes of src, padding dst with NULs up to n (C semantics:
 * dst is not terminated when strlen(src) >= n). Returns dst. */
char *STRATA_LIBC_NAME(strncpy)(char *restrict dst, const char *restrict src, size_t n);
/* First occurrence of (char)c in s (c == 0 finds the terminator), or NULL. */
char *STRATA_LIBC_NAME(strchr)(const char *s, int c);
/* Last occurrence of (char)c in s, or NULL. */
char *STRATA_LIBC_NAME(strrchr)(const char *s, int c);
/* First occurrence of needle in haystack (an empty needle matches at
 * haystack), or NULL. */
char *STRATA_LIBC_NAME(strstr)(const char *haystack, const char *needle);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_GUEST_STRING_H */
