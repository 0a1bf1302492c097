/* musl_sg.h: the guest C library's musl functions as the host tests link them (libstrata-c.a with every symbol prefixed sg_). */
#ifndef STRATA_TESTS_MUSL_SG_H
#define STRATA_TESTS_MUSL_SG_H

#include <stdarg.h>
#include <stddef.h>

int sg_vsnprintf(char *restrict buf, size_t size, const char *restrict fmt, va_list ap);
int sg_snprintf(char *restrict buf, size_t size, const char *restrict fmt, ...);
double sg_strtod(const char *restrict s, char **restrict end);
long sg_strtol(const char *restrict s, char **restrict end, int base);
unsigned long sg_strtoul(const char *restrict s, char **restrict end, int base);
int sg_atoi(const char *s);
void sg_qsort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *));

#endif
