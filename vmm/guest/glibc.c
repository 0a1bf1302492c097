/* glibc.c: the glibc-only entry points that objects compiled against glibc's headers call (Debian's static libraries, -D_FORTIFY_SOURCE), over the guest's musl C library. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/strata_guest.h"

/*
 * glibc's _FORTIFY_SOURCE headers turn a call whose destination size the
 * compiler knows into its __*_chk form, which takes that size too. A check
 * that fails ends the call as a guest error naming the function and the
 * sizes (glibc would print "buffer overflow detected" and abort the
 * process), never silently. The `flag` argument of the printf forms asks
 * glibc to refuse %n in a writable format; musl's printf is used as it is.
 * docs/guests.md, "Objects built for glibc".
 */
static _Noreturn void chk_fail(const char *fn, size_t need, size_t have)
{
	strata_abort(-6, "buffer overflow detected in %s: %zu bytes into an object of %zu (_FORTIFY_SOURCE)", fn, need,
		     have);
}

_Noreturn void __chk_fail(void);
_Noreturn void __chk_fail(void)
{
	strata_abort(-6, "buffer overflow detected (_FORTIFY_SOURCE)");
}

void *__memcpy_chk(void *restrict d, const void *restrict s, size_t n, size_t dn);
void *__memcpy_chk(void *restrict d, const void *restrict s, size_t n, size_t dn)
{
	if (n > dn)
		chk_fail("__memcpy_chk", n, dn);
	return memcpy(d, s, n);
}

void *__memmove_chk(void *d, const void *s, size_t n, size_t dn);
void *__memmove_chk(void *d, const void *s, size_t n, size_t dn)
{
	if (n > dn)
		chk_fail("__memmove_chk", n, dn);
	return memmove(d, s, n);
}

void *__mempcpy_chk(void *restrict d, const void *restrict s, size_t n, size_t dn);
void *__mempcpy_chk(void *restrict d, const void *restrict s, size_t n, size_t dn)
{
	if (n > dn)
		chk_fail("__mempcpy_chk", n, dn);
	return (char *)memcpy(d, s, n) + n;
}

void *__memset_chk(void *d, int c, size_t n, size_t dn);
void *__memset_chk(void *d, int c, size_t n, size_t dn)
{
	if (n > dn)
		chk_fail("__memset_chk", n, dn);
	return memset(d, c, n);
}

void __explicit_bzero_chk(void *d, size_t n, size_t dn);
void __explicit_bzero_chk(void *d, size_t n, size_t dn)
{
	if (n > dn)
		chk_fail("__explicit_bzero_chk", n, dn);
	memset(d, 0, n);
	__asm__ volatile("" : : "r"(d) : "memory");
}

char *__strcpy_chk(char *restrict d, const char *restrict s, size_t dn);
char *__strcpy_chk(char *restrict d, const char *restrict s, size_t dn)
{
	size_t n = strlen(s) + 1;

	if (n > dn)
		chk_fail("__strcpy_chk", n, dn);
	return memcpy(d, s, n);
}

char *__stpcpy_chk(char *restrict d, const char *restrict s, size_t dn);
char *__stpcpy_chk(char *restrict d, const char *restrict s, size_t dn)
{
	size_t n = strlen(s);

	if (n + 1 > dn)
		chk_fail("__stpcpy_chk", n + 1, dn);
	memcpy(d, s, n + 1);
	return d + n;
}

char *__strncpy_chk(char *restrict d, const char *restrict s, size_t n, size_t dn);
char *__strncpy_chk(char *restrict d, const char *restrict s, size_t n, size_t dn)
{
	if (n > dn)
		chk_fail("__strncpy_chk", n, dn);
	return strncpy(d, s, n);
}

char *__stpncpy_chk(char *restrict d, const char *restrict s, size_t n, size_t dn);
char *__stpncpy_chk(char *restrict d, const char *restrict s, size_t n, size_t dn)
{
	if (n > dn)
		chk_fail("__stpncpy_chk", n, dn);
	return stpncpy(d, s, n);
}

char *__strcat_chk(char *restrict d, const char *restrict s, size_t dn);
char *__strcat_chk(char *restrict d, const char *restrict s, size_t dn)
{
	size_t dl = strnlen(d, dn), n = dl + strlen(s) + 1;

	if (n > dn)
		chk_fail("__strcat_chk", n, dn);
	memcpy(d + dl, s, n - dl);
	return d;
}

char *__strncat_chk(char *restrict d, const char *restrict s, size_t n, size_t dn);
char *__strncat_chk(char *restrict d, const char *restrict s, size_t n, size_t dn)
{
	size_t dl = strnlen(d, dn), sl = strnlen(s, n);

	if (dl + sl + 1 > dn)
		chk_fail("__strncat_chk", dl + sl + 1, dn);
	memcpy(d + dl, s, sl);
	d[dl + sl] = 0;
	return d;
}

int __vsnprintf_chk(char *restrict s, size_t n, int flag, size_t sn, const char *restrict fmt, va_list ap);
int __vsnprintf_chk(char *restrict s, size_t n, int flag, size_t sn, const char *restrict fmt, va_list ap)
{
	if (n > sn)
		chk_fail("__vsnprintf_chk", n, sn);
	return vsnprintf(s, n, fmt, ap);
}

int __snprintf_chk(char *restrict s, size_t n, int flag, size_t sn, const char *restrict fmt, ...);
int __snprintf_chk(char *restrict s, size_t n, int flag, size_t sn, const char *restrict fmt, ...)
{
	va_list ap;

	if (n > sn)
		chk_fail("__snprintf_chk", n, sn);
	va_start(ap, fmt);
	int r = vsnprintf(s, n, fmt, ap);
	va_end(ap);
	return r;
}

/* sprintf into an object of sn bytes: what did not fit is an overflow
 * (glibc's check, made after formatting into at most sn bytes). */
static int sprintf_chk(const char *fn, char *restrict s, size_t sn, const char *restrict fmt, va_list ap)
{
	if (sn == 0)
		chk_fail(fn, 1, 0);
	int r = vsnprintf(s, sn, fmt, ap);
	if (r >= 0 && (size_t)r >= sn)
		chk_fail(fn, (size_t)r + 1, sn);
	return r;
}

int __vsprintf_chk(char *restrict s, int flag, size_t sn, const char *restrict fmt, va_list ap);
int __vsprintf_chk(char *restrict s, int flag, size_t sn, const char *restrict fmt, va_list ap)
{
	return sprintf_chk("__vsprintf_chk", s, sn, fmt, ap);
}

int __sprintf_chk(char *restrict s, int flag, size_t sn, const char *restrict fmt, ...);
int __sprintf_chk(char *restrict s, int flag, size_t sn, const char *restrict fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	int r = sprintf_chk("__sprintf_chk", s, sn, fmt, ap);
	va_end(ap);
	return r;
}

int __vfprintf_chk(FILE *restrict f, int flag, const char *restrict fmt, va_list ap);
int __vfprintf_chk(FILE *restrict f, int flag, const char *restrict fmt, va_list ap)
{
	return vfprintf(f, fmt, ap);
}

int __fprintf_chk(FILE *restrict f, int flag, const char *restrict fmt, ...);
int __fprintf_chk(FILE *restrict f, int flag, const char *restrict fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	int r = vfprintf(f, fmt, ap);
	va_end(ap);
	return r;
}

int __vprintf_chk(int flag, const char *restrict fmt, va_list ap);
int __vprintf_chk(int flag, const char *restrict fmt, va_list ap)
{
	return vfprintf(stdout, fmt, ap);
}

int __printf_chk(int flag, const char *restrict fmt, ...);
int __printf_chk(int flag, const char *restrict fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	int r = vfprintf(stdout, fmt, ap);
	va_end(ap);
	return r;
}

int __vasprintf_chk(char **s, int flag, const char *fmt, va_list ap);
int __vasprintf_chk(char **s, int flag, const char *fmt, va_list ap)
{
	return vasprintf(s, fmt, ap);
}

int __asprintf_chk(char **s, int flag, const char *fmt, ...);
int __asprintf_chk(char **s, int flag, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	int r = vasprintf(s, fmt, ap);
	va_end(ap);
	return r;
}

char *__fgets_chk(char *restrict s, size_t sn, int n, FILE *restrict f);
char *__fgets_chk(char *restrict s, size_t sn, int n, FILE *restrict f)
{
	if (n > 0 && (size_t)n > sn)
		chk_fail("__fgets_chk", (size_t)n, sn);
	return fgets(s, n, f);
}

size_t __fread_chk(void *restrict p, size_t pn, size_t size, size_t n, FILE *restrict f);
size_t __fread_chk(void *restrict p, size_t pn, size_t size, size_t n, FILE *restrict f)
{
	size_t bytes;

	if (__builtin_mul_overflow(size, n, &bytes) || bytes > pn)
		chk_fail("__fread_chk", bytes, pn);
	return fread(p, size, n, f);
}

/*
 * longjmp under _FORTIFY_SOURCE: glibc refuses a jump down the stack (to a
 * frame that has returned). jmp_buf here is musl's: _setjmp (the name
 * glibc's headers call) is musl's too, and keeps rsp in word 6.
 */
_Noreturn void __longjmp_chk(jmp_buf env, int val);
_Noreturn void __longjmp_chk(jmp_buf env, int val)
{
	uint64_t sp, target;

	__asm__ volatile("movq %%rsp, %0" : "=r"(sp));
	memcpy(&target, (const char *)env + 6 * sizeof(uint64_t), sizeof(target));
	if (target < sp)
		strata_abort(-7, "longjmp causes uninitialized stack frame (to %#llx, below the stack pointer %#llx)",
			     (unsigned long long)target, (unsigned long long)sp);
	longjmp(env, val);
}

/* The large-file names (_FILE_OFFSET_BITS=64 objects): off_t is 64 bits
 * already, and there are no files. */
FILE *fopen64(const char *restrict path, const char *restrict mode);
FILE *fopen64(const char *restrict path, const char *restrict mode)
{
	return fopen(path, mode);
}

FILE *freopen64(const char *restrict path, const char *restrict mode, FILE *restrict f);
FILE *freopen64(const char *restrict path, const char *restrict mode, FILE *restrict f)
{
	return freopen(path, mode, f);
}

FILE *tmpfile64(void);
FILE *tmpfile64(void)
{
	return tmpfile();
}

int mkstemp64(char *tmpl);
int mkstemp64(char *tmpl)
{
	return mkstemp(tmpl);
}
