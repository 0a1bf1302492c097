/* wasm_bench_logic.h: the function `strata bench wasm` times, shared by its wasm module and its C guest (sum a few values, format a string). */
#ifndef STRATA_BENCH_WASM_LOGIC_H
#define STRATA_BENCH_WASM_LOGIC_H

#include <stdio.h>

static inline const char *wasm_bench_work(char *buf, size_t cap, int a, int b, int c)
{
	int v[4] = { a, b, c, a ^ b };
	long long sum = 0;

	for (int i = 0; i < 4; i++)
		sum += (long long)v[i] * (i + 1);
	snprintf(buf, cap, "sum of %d, %d, %d: %lld", a, b, c, sum);
	return buf;
}

#endif
