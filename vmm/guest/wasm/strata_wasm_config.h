/* strata_wasm_config.h: how wasm2c's C is compiled for a strata guest (forced in by strata-wasm.pc's -include). */
#ifndef STRATA_WASM_CONFIG_H
#define STRATA_WASM_CONFIG_H

#include <stdint.h>

/* Bounds checks are explicit compares in the generated code: no guard
 * pages, no signal handler (a guest has neither). */
#define WASM_RT_MEMCHECK_SIGNAL_HANDLER 0
#define WASM_RT_USE_STACK_DEPTH_COUNT 1
/* The call stack is checked against the guest's real stack, not a depth:
 * every wasm function's prologue compares its frame with a floor above the
 * stack's guard page (set at init from the boot info), and traps with
 * "call stack exhausted" below it. wasm2c's prologue traps when
 * ++depth > WASM_RT_MAX_CALL_STACK_DEPTH: 0 below the floor, never above. */
extern uintptr_t strata_wasm_stack_floor;
#define WASM_RT_MAX_CALL_STACK_DEPTH \
	((uintptr_t)__builtin_frame_address(0) < strata_wasm_stack_floor ? 0u : UINT32_MAX)

#endif
