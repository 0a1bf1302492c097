/* module.c: the wasm test module, built by tests/e2e/wasm.sh with clang --target=wasm32-wasi (docs/wasm.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "strata_wasm.h"

STRATA_WASM_IMPORT(host_add) long long host_add(long long, long long);

STRATA_WASM_EXPORT(add) int add(int a, int b)
{
	return a + b;
}

/* i64 arguments, and an import that reaches strata run's host_add. */
STRATA_WASM_EXPORT(sum3) long long sum3(long long a, long long b, long long c)
{
	return host_add(a, b) + c;
}

/* A string in (pointer, length), a NUL-terminated string out; printf is fd_write to stdout. */
static char greeting[256];
STRATA_WASM_SIG(greet, "s(s)");
STRATA_WASM_EXPORT(greet) const char *greet(const char *s, int n)
{
	snprintf(greeting, sizeof(greeting), "hello %.*s", n, s);
	printf("greeted %d bytes\n", n);
	return greeting;
}

/* Bytes in, bytes out as an i64 (offset | length << 32): the bytes reversed. */
static unsigned char rev_buf[4096];
STRATA_WASM_SIG(reverse, "b(b)");
STRATA_WASM_EXPORT(reverse) long long reverse(const unsigned char *p, int n)
{
	if (n > (int)sizeof(rev_buf))
		n = sizeof(rev_buf);
	for (int i = 0; i < n; i++)
		rev_buf[i] = p[n - 1 - i];
	return (long long)(unsigned)(unsigned long)rev_buf | (long long)n << 32;
}

/* State kept across calls (and in snapshots). */
static int counter;
STRATA_WASM_EXPORT(next) int next(void)
{
	return ++counter;
}

STRATA_WASM_EXPORT(divide) int divide(int a, int b)
{
	return a / b;
}

STRATA_WASM_EXPORT(peek) int peek(int addr)
{
	return *(volatile int *)addr;
}

static volatile int depth_sink;
STRATA_WASM_EXPORT(recurse) int recurse(int n)
{
	volatile char pad[64];
	pad[0] = (char)n;
	depth_sink = pad[0];
	return n <= 0 ? 0 : 1 + recurse(n - 1);
}

/* WASI: random_get from the host; exit() is proc_exit; clock_gettime has no host clock under strata run. */
STRATA_WASM_EXPORT(random64) long long random64(void)
{
	long long v = 0;
	if (getentropy(&v, sizeof(v)) != 0)
		return -1;
	return v;
}

STRATA_WASM_EXPORT(quit) int quit(int code)
{
	exit(code);
}

STRATA_WASM_EXPORT(now) long long now(void)
{
	struct timespec ts;
	return clock_gettime(CLOCK_REALTIME, &ts) == 0 ? (long long)ts.tv_sec : -1;
}

/* Linear memory grows from the guest heap (malloc: memory.grow underneath).
 * The block is kept (the compiler may drop a malloc nothing keeps). */
static char *volatile grabbed;
STRATA_WASM_EXPORT(grab) int grab(int kib)
{
	char *p = malloc((size_t)kib << 10);
	if (!p)
		return -1;
	memset(p, 1, (size_t)kib << 10);
	grabbed = p;
	return (int)__builtin_wasm_memory_size(0);
}

/* An import with a string result: strata run's host_upper s(s), its result written into a buffer of the module's,
 * its length returned (larger than the buffer: nothing usable written). */
STRATA_WASM_IMPORT_SIG(host_upper, "s(s)");
STRATA_WASM_IMPORT(host_upper) int host_upper(const char *s, int n, char *buf, int cap);
static char shout_buf[16];
STRATA_WASM_SIG(shout, "s(s)");
STRATA_WASM_EXPORT(shout) const char *shout(const char *s, int n)
{
	int len = host_upper(s, n, shout_buf, sizeof(shout_buf));
	if (len >= (int)sizeof(shout_buf)) {
		snprintf(greeting, sizeof(greeting), "needs %d bytes", len);
		return greeting;
	}
	return shout_buf;
}
