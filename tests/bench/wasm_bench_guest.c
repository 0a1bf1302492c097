/* wasm_bench_guest.c: the C guest of `strata bench wasm`: the wasm module's work, s(iii), as a C guest. */
#include <strata_guest.h>

#include "wasm_bench_logic.h"

static char out[128];

STRATA_FUNCTION(work, "s(iii)")
{
	return strata_ret_str(c, wasm_bench_work(out, sizeof(out), (int)strata_arg_i64(c, 0), (int)strata_arg_i64(c, 1),
						 (int)strata_arg_i64(c, 2)));
}
