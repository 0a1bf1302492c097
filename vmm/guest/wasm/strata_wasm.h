/* strata_wasm.h: for a WebAssembly module built for strata (clang --target=wasm32-wasi): the signatures of its exports and imports (docs/wasm.md). */
#ifndef STRATA_WASM_H
#define STRATA_WASM_H

/*
 * STRATA_WASM_SIG(greet, "s(s)") records in the module's strata.sig custom
 * section that export greet is the strata function s(s); strata wasm build
 * reads it. A 'b' or 's' argument is two wasm parameters, a pointer and a
 * length (the bytes are copied into memory the module's exported malloc
 * gives, NUL-terminated); an 's' result is a pointer to a NUL-terminated
 * string (an i32), or an i64 offset | length << 32 (also how a 'b' result
 * is returned). STRATA_WASM_IMPORT_SIG(name, "i(s)") does the same for an
 * imported host function (its results are v or i).
 */
#define STRATA_WASM_SIG_LINE_(kind, name, sig) \
	__asm__(".section .custom_section.strata.sig,\"\",@\n.ascii \"" kind " " #name " " sig "\\n\"\n.text\n")
#define STRATA_WASM_SIG(name, sig) STRATA_WASM_SIG_LINE_("export", name, sig)
#define STRATA_WASM_IMPORT_SIG(name, sig) STRATA_WASM_SIG_LINE_("import", name, sig)

/* An exported function: STRATA_WASM_EXPORT(add) int add(int a, int b) { ... } */
#define STRATA_WASM_EXPORT(name) __attribute__((export_name(#name)))
/* A host function registered on the sandbox: STRATA_WASM_IMPORT(host_add) long long host_add(long long, long long); */
#define STRATA_WASM_IMPORT(name) __attribute__((import_module("env"), import_name(#name)))

#endif
