/* wasm_glue.h: read a wasm module's types, imports and exports, and write the C glue that makes it a strata guest (docs/wasm.md). */
#ifndef STRATA_MOUNT_WASM_GLUE_H
#define STRATA_MOUNT_WASM_GLUE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The C name prefix wasm2c is told to use (-n): the module's symbols are
 * Z_guest_..., its exports Z_guestZ_NAME. */
#define WASM_GLUE_MODULE "guest"

/*
 * Write to out the glue of the module in wasm[0, len): one strata function
 * per exported wasm function (its signature from the wasm types, or from a
 * "export NAME SIG" line of the module's strata.sig custom section or of
 * sigs[], which win in that order), the module's imports as host calls or
 * the WASI subset, and strata_init instantiating the module. Notes (exports
 * left out, WASI functions that trap) go to notes, each ending in a NUL
 * (they quote the module's names, which may hold any byte). The glue
 * declares the guest's heap (STRATA_GUEST_HEAP): `heap` bytes, or if 0 what
 * the module's memory section needs (docs/wasm.md, "Memory"). 0, or -1 with
 * why.
 */
int wasm_glue_write(const uint8_t *wasm, size_t len, const char *const *sigs, int nsigs, uint64_t heap, FILE *out,
		    FILE *notes, char *why, size_t wl);

/* The largest heap a guest may declare (a sandbox's heap region). */
#define WASM_GLUE_HEAP_MAX (2ull << 30)

#endif
