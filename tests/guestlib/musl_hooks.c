/* musl_hooks.c: what libstrata-c-sg.a (musl's members, sg_ names) needs below it on the host, as vmm/guest/sys.c gives it to a guest. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

int *sg___errno_location(void);
int *sg___errno_location(void)
{
	return &errno;
}
int *sg____errno_location(void) __attribute__((alias("sg___errno_location")));

/* One thread per test: nothing to lock. */
void sg___lock(volatile int *l);
void sg___lock(volatile int *l) {}
void sg___unlock(volatile int *l);
void sg___unlock(volatile int *l) {}
int sg___lockfile(FILE *f);
int sg___lockfile(FILE *f)
{
	return 0;
}
void sg___unlockfile(FILE *f);
void sg___unlockfile(FILE *f) {}

void sg___stack_chk_fail(void);
void sg___stack_chk_fail(void)
{
	abort();
}

char *sg_strerror(int e);
char *sg_strerror(int e)
{
	return strerror(e);
}

size_t sg_wcrtomb(char *restrict s, wchar_t wc, mbstate_t *restrict st);
size_t sg_wcrtomb(char *restrict s, wchar_t wc, mbstate_t *restrict st)
{
	return wcrtomb(s, wc, st);
}
