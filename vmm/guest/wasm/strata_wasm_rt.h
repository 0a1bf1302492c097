/* strata_wasm_rt.h: the guest side of a wasm module: what the glue `strata wasm build` generates calls (docs/wasm.md). */
#ifndef STRATA_WASM_RT_H
#define STRATA_WASM_RT_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include <wasm-rt.h>

#include "strata_guest.h"

/* The module's linear memory (its first exported memory), NULL if none:
 * the WASI functions and the string/bytes conventions read it. */
extern wasm_rt_memory_t *strata_wasm_memory;

/* Where a trap, a failed import or proc_exit jumps: the glue sets it
 * (setjmp) before it enters the module; strata_wasm_why() then says what
 * happened ("wasm trap: unreachable", "proc_exit(3)", ...). */
extern jmp_buf strata_wasm_jmp;
const char *strata_wasm_why(void);
/* Before each entry into the module (after the setjmp): the call depth. */
void strata_wasm_enter(void);
/* Stop the module's code with a reason (printf format): a guest error. */
_Noreturn void strata_wasm_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Set the stack floor from the boot info (strata_init, first thing). */
void strata_wasm_init(void);

/* len bytes at offset off of linear memory, or a trap (out of bounds). */
uint8_t *strata_wasm_span(uint32_t off, uint64_t len);
/* A host call from an import: fails the module's code (strata_wasm_fail)
 * unless the host answers STRATA_HOST_OK; the result in *ret. */
void strata_wasm_host_call(const char *name, const struct strata_value *args, unsigned nargs,
			   struct strata_value *ret);
/* A host call whose result is a string or bytes, written into linear
 * memory at [buf, buf + cap) (a string with its NUL if it fits): returns
 * the result's length, larger than cap (nothing usable written) when the
 * buffer is too small, so the module can call again with a larger one.
 * Other failures as strata_wasm_host_call. */
uint64_t strata_wasm_host_call_buf(const char *name, const struct strata_value *args, unsigned nargs, uint32_t buf,
				   uint32_t cap);
/* Results of the string/bytes conventions: a NUL-terminated string at off;
 * a span packed as off | len << 32 (string or bytes). */
int strata_wasm_ret_cstr(struct strata_call *c, uint32_t off);
int strata_wasm_ret_span(struct strata_call *c, uint64_t packed, int is_str);

#endif
