/* strata_guest.h: the strata guest SDK: register functions, read arguments, return results, call the host. */
#ifndef STRATA_GUEST_H
#define STRATA_GUEST_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "vmm/abi.h"

/* One call in progress: handed to every guest function. */
struct strata_call;

/* A guest function: read arguments with strata_arg_*, set the result with
 * strata_ret_* (or strata_fail), return what that returned. */
typedef int (*strata_fn)(struct strata_call *c);

struct strata_fn_reg {
	const char *name;
	const char *sig;   /* "r(aa..)": r and a from v (void, result only), i (int64), b (bytes), s (string) */
	strata_fn fn;
};

/*
 * Define and register a guest function callable by name from the host:
 *   STRATA_FUNCTION(add, "i(ii)") { return strata_ret_i64(c, strata_arg_i64(c, 0) + ...); }
 * The body sees `struct strata_call *c`.
 */
#define STRATA_FUNCTION(fname, signature)                                          \
	static int fname(struct strata_call *c);                                   \
	static const struct strata_fn_reg strata_reg_##fname                       \
		__attribute__((used, section("strata_fns"), aligned(8))) = {       \
			#fname, signature, fname };                                \
	static int fname(struct strata_call *c)

/*
 * Optional: the memory the guest needs, in bytes, as a note in its ELF
 * (struct strata_mem_note): the host uses it where its caller gave no size
 * (`strata run --heap`/`--stack`, vmm_config), so the guest runs without
 * them. At most once per guest, at file scope:
 *   STRATA_GUEST_HEAP(4 << 20);                  heap only
 *   STRATA_GUEST_MEMORY(4 << 20, 256 << 10);     heap and stack (0: default)
 * The heap is at most 2 GiB, the stack at most 16 MiB with the image
 * (docs/guests.md, "Memory").
 */
#define STRATA_GUEST_MEMORY(heap, stack)                                                   \
	static const struct {                                                              \
		uint32_t namesz, descsz, type;                                             \
		char name[8];                                                              \
		uint32_t desc[6];                                                          \
	} strata_mem_note __attribute__((used, section(".note.strata.mem"), aligned(4))) = { \
		sizeof(STRATA_NOTE_NAME), sizeof(struct strata_mem_note), STRATA_NOTE_MEM_TYPE, \
		STRATA_NOTE_NAME,                                                          \
		{ STRATA_MEM_NOTE_VERSION, 0, (uint32_t)(uint64_t)(heap),                  \
		  (uint32_t)((uint64_t)(heap) >> 32), (uint32_t)(uint64_t)(stack),         \
		  (uint32_t)((uint64_t)(stack) >> 32) } }
#define STRATA_GUEST_HEAP(heap) STRATA_GUEST_MEMORY(heap, 0)

/* Optional: defined by the guest, run once at init before READY. */
void strata_init(void) __attribute__((weak));

/* Arguments. Asking for the wrong type or index aborts the guest. Bytes and
 * strings point into the input buffer and are valid during the call. */
unsigned strata_arg_count(const struct strata_call *c);
int64_t strata_arg_i64(const struct strata_call *c, unsigned i);
const char *strata_arg_str(const struct strata_call *c, unsigned i);
const void *strata_arg_bytes(const struct strata_call *c, unsigned i, size_t *len);

/* Results. Bytes and strings are not copied: the host reads them from guest
 * memory after the function returns, so they must stay valid until then
 * (the input buffer, the heap, static data, or strata_ret_buffer()). */
int strata_ret_void(struct strata_call *c);
int strata_ret_i64(struct strata_call *c, int64_t v);
int strata_ret_str(struct strata_call *c, const char *s);
/* A string result of len bytes (NUL bytes among them), NUL-terminated at s[len]. */
int strata_ret_strn(struct strata_call *c, const char *s, size_t len);
int strata_ret_bytes(struct strata_call *c, const void *p, size_t len);
/* Space for a result of `len` bytes in the output buffer (NULL if it does
 * not fit); fill it and return strata_ret_bytes(c, buf, len). */
void *strata_ret_buffer(struct strata_call *c, size_t len);
/* Report a function error (the host's call fails with VMM_E_GUEST_ERROR;
 * the sandbox stays usable). */
int strata_fail(struct strata_call *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Host functions. Build arguments with strata_val_*; returns enum
 * strata_hostcall_status. For bytes/string results set ret->addr/cap via
 * `buf`/`cap`; ret->len tells the length. */
static inline struct strata_value strata_val_i64(int64_t v)
{
	return (struct strata_value){ .type = STRATA_T_I64, .i64 = v };
}
static inline struct strata_value strata_val_bytes(const void *p, size_t len)
{
	return (struct strata_value){ .type = STRATA_T_BYTES, .addr = (uint64_t)(uintptr_t)p, .len = len };
}
struct strata_value strata_val_str(const char *s);
int strata_host_call(const char *name, const struct strata_value *args, unsigned nargs,
		     struct strata_value *ret, void *buf, size_t cap);

/* Log levels (struct strata_log's level; the host's enum vmm_log_level). */
enum strata_log_level {
	STRATA_LOG_ERROR = 0,
	STRATA_LOG_WARN = 1,
	STRATA_LOG_INFO = 2,
	STRATA_LOG_DEBUG = 3,
};

/* Log a line to the host at a level of enum strata_log_level. */
void strata_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Log len bytes of msg as one line, unformatted (stdout and stderr use it). */
void strata_log_write(int level, const char *msg, size_t len);
/* Stop with a message; the host's call fails with VMM_E_ABORT. */
_Noreturn void strata_abort(int64_t code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Where things are (for guests that want to know). */
const struct strata_boot_info *strata_boot_info(void);

/* Raw hypercall: store `value` into the hypercall page slot of `port` (one
 * MMIO exit; tests use it to misbehave). */
static inline void strata_out(uint16_t port, uint32_t value)
{
	volatile uint32_t *slot = (volatile uint32_t *)(uintptr_t)STRATA_HC_VA + (uint16_t)(port - STRATA_HC_PORT_BASE);
	__asm__ volatile("movl %1, %0" : "=m"(*slot) : "r"(value) : "memory");
}

#endif
