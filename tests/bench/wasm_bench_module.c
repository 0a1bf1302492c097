/* wasm_bench_module.c: the wasm module of `strata bench wasm` (clang --target=wasm32-wasi): work, s(iii). */
#include "strata_wasm.h"
#include "wasm_bench_logic.h"

static char out[128];

STRATA_WASM_SIG(work, "s(iii)");
STRATA_WASM_EXPORT(work) const char *work(int a, int b, int c)
{
	return wasm_bench_work(out, sizeof(out), a, b, c);
}
