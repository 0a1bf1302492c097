/* strata guest libc: string formatting (snprintf family) for freestanding guests. */
#ifndef STRATA_GUEST_STDIO_H
#define STRATA_GUEST_STDIO_H

#include <stdarg.h>
#include <stddef.h>

#include "strata_libc.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Format into buf (at most size bytes, always NUL-terminated when size > 0;
 * buf may be NULL when size is 0). Returns the length the full output would
 * have (C99), or -1 if that exceeds INT_MAX.
 *
 * Supported: conversions d i u x X o p s c %, length modifiers hh h l ll z j
 * t, flags - 0 + space #, width and precision (also as *). %p prints like
 * glibc ("0x1f", "(nil)"); %s of NULL prints "(null)" (or nothing if the
 * precision is below 6). Floating point and %n are not supported: an
 * unsupported conversion is copied to the output as written and consumes no
 * argument. There is no FILE or printf: log through the runtime.
 */
int STRATA_LIBC_NAME(vsnprintf)(char *restrict buf, size_t size,
                                const char *restrict fmt, va_list ap);
/* vsnprintf with variadic arguments. */
int STRATA_LIBC_NAME(snprintf)(char *restrict buf, size_t size,
                               const char *restrict fmt, ...)
    __attribute__((__format__(__printf__, 3, 4)));

#ifdef __cplusplus
}
#endif

#endif /* STRATA_GUEST_STDIO_H */
