/* hello_wasm.c: a WebAssembly module for strata, built from C (docs/wasm.md; README.md's tour):
 *   clang --target=wasm32-wasi -mexec-model=reactor -O2 -Ivmm/guest/wasm -Wl,--export=malloc -o hello.wasm hello_wasm.c
 *   strata wasm build hello.wasm -o hello.elf
 *   strata run hello.elf --call greet wasm */
#include <stdio.h>

#include "strata_wasm.h"

static char out[256];
static int calls;

/* s(s): the string arrives as a pointer and a length in linear memory; the
 * result is a pointer to a NUL-terminated string. */
STRATA_WASM_SIG(greet, "s(s)");
STRATA_WASM_EXPORT(greet) const char *greet(const char *name, int len)
{
	printf("call %d\n", ++calls);   /* WASI fd_write: the host log */
	snprintf(out, sizeof(out), "hello, %.*s", len, name);
	return out;
}

/* i(ii): integers need no signature. */
STRATA_WASM_EXPORT(add) int add(int a, int b)
{
	return a + b;
}

/* A trap: `--call divide 1 0` fails with "wasm trap: integer divide by zero". */
STRATA_WASM_EXPORT(divide) int divide(int a, int b)
{
	return a / b;
}
