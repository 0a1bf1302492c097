/* strata_libc.h: how the guest libc names its functions (plain in guests, sg_ in host tests). */
#ifndef STRATA_GUEST_LIBC_H
#define STRATA_GUEST_LIBC_H

/* Guests see memcpy, malloc, snprintf...; the host tests build the same
 * sources with -DSTRATA_LIBC_HOST_TEST so they can sit beside glibc's. */
#ifndef STRATA_LIBC_NAME
#ifdef STRATA_LIBC_HOST_TEST
#define STRATA_LIBC_NAME(x) sg_##x
#else
#define STRATA_LIBC_NAME(x) x
#endif
#endif

#endif
