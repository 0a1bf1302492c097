/* glibc_compat.c: the glibc entry points Debian's liblua5.4.a calls (its ctype tables, _FORTIFY_SOURCE checks, the 64-bit file names) over the guest's musl C library. */
#include <ctype.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "strata_guest.h"

/*
 * glibc's <ctype.h> macros index per-thread tables through
 * __ctype_b_loc/__ctype_tolower_loc/__ctype_toupper_loc, from -128 (EOF
 * and signed chars) to 255. The class bits are glibc's on a little-endian
 * machine (_ISbit in its <ctype.h>); the tables are the C locale's, filled
 * from musl's classifiers on first use.
 */
enum {
	GL_UPPER = 0x100, GL_LOWER = 0x200, GL_ALPHA = 0x400, GL_DIGIT = 0x800,
	GL_XDIGIT = 0x1000, GL_SPACE = 0x2000, GL_PRINT = 0x4000, GL_GRAPH = 0x8000,
	GL_BLANK = 0x1, GL_CNTRL = 0x2, GL_PUNCT = 0x4, GL_ALNUM = 0x8,
};

static unsigned short class_tab[384];
static int32_t lower_tab[384], upper_tab[384];
static const unsigned short *class_ptr;
static const int32_t *lower_ptr, *upper_ptr;

static void tables_fill(void)
{
	for (int i = 0; i < 384; i++) {
		int ch = i - 128;
		unsigned short b = 0;

		lower_tab[i] = upper_tab[i] = ch;
		if (ch < 0 || ch > 127)
			continue;
		b |= isupper(ch) ? GL_UPPER : 0;
		b |= islower(ch) ? GL_LOWER : 0;
		b |= isalpha(ch) ? GL_ALPHA : 0;
		b |= isdigit(ch) ? GL_DIGIT : 0;
		b |= isxdigit(ch) ? GL_XDIGIT : 0;
		b |= isspace(ch) ? GL_SPACE : 0;
		b |= isprint(ch) ? GL_PRINT : 0;
		b |= isgraph(ch) ? GL_GRAPH : 0;
		b |= isblank(ch) ? GL_BLANK : 0;
		b |= iscntrl(ch) ? GL_CNTRL : 0;
		b |= ispunct(ch) ? GL_PUNCT : 0;
		b |= isalnum(ch) ? GL_ALNUM : 0;
		class_tab[i] = b;
		lower_tab[i] = tolower(ch);
		upper_tab[i] = toupper(ch);
	}
	class_ptr = class_tab + 128;
	lower_ptr = lower_tab + 128;
	upper_ptr = upper_tab + 128;
}

const unsigned short **__ctype_b_loc(void);
const unsigned short **__ctype_b_loc(void)
{
	if (!class_ptr)
		tables_fill();
	return &class_ptr;
}

const int32_t **__ctype_tolower_loc(void);
const int32_t **__ctype_tolower_loc(void)
{
	if (!class_ptr)
		tables_fill();
	return &lower_ptr;
}

const int32_t **__ctype_toupper_loc(void);
const int32_t **__ctype_toupper_loc(void)
{
	if (!class_ptr)
		tables_fill();
	return &upper_ptr;
}

/* _FORTIFY_SOURCE: the checked forms stop the guest where glibc would. */
_Noreturn static void chk_fail(const char *what)
{
	strata_abort(-6, "%s: buffer overflow detected", what);
}

int __fprintf_chk(FILE *f, int flag, const char *fmt, ...);
int __fprintf_chk(FILE *f, int flag, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	int n = vfprintf(f, fmt, ap);
	va_end(ap);
	return n;
}

int __snprintf_chk(char *s, size_t max, int flag, size_t slen, const char *fmt, ...);
int __snprintf_chk(char *s, size_t max, int flag, size_t slen, const char *fmt, ...)
{
	va_list ap;

	if (slen < max)
		chk_fail("snprintf");
	va_start(ap, fmt);
	int n = vsnprintf(s, max, fmt, ap);
	va_end(ap);
	return n;
}

void *__memcpy_chk(void *d, const void *s, size_t n, size_t dlen);
void *__memcpy_chk(void *d, const void *s, size_t n, size_t dlen)
{
	if (dlen < n)
		chk_fail("memcpy");
	return memcpy(d, s, n);
}

/* glibc's jmp_buf is as large as musl's (8 words, a flag word, a signal
 * set); neither mangles what the other reads back, since both are musl's. */
_Noreturn void __longjmp_chk(jmp_buf env, int val);
_Noreturn void __longjmp_chk(jmp_buf env, int val)
{
	longjmp(env, val);
}

/* The large-file names glibc's headers give these with _FILE_OFFSET_BITS=64. */
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

int mkstemp64(char *tmpl);
int mkstemp64(char *tmpl)
{
	return mkstemp(tmpl);
}

/* No files, so no descriptor to close (os.tmpname's mkstemp makes none). */
int close(int fd)
{
	errno = EBADF;
	return -1;
}
