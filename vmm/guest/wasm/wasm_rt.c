/* wasm_rt.c: wasm2c's runtime (wasm-rt.h) for a strata guest: traps as guest errors, linear memory on the guest heap, the WASI subset. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "strata_wasm_rt.h"

#define WASM_PAGE 65536u
/* Stack kept free below the wasm code for the glue, host calls and the
 * WASI functions (printf-sized frames). */
#define STACK_RESERVE (12u << 10)

uintptr_t strata_wasm_stack_floor;
uint32_t wasm_rt_call_stack_depth;
wasm_rt_memory_t *strata_wasm_memory;
jmp_buf strata_wasm_jmp;
static char why[256];
static jmp_buf *unwind_target;

void strata_wasm_init(void)
{
	const struct strata_boot_info *b = strata_boot_info();

	strata_wasm_stack_floor = (uintptr_t)b->stack_lo + STACK_RESERVE;
}

const char *strata_wasm_why(void)
{
	return why;
}

void strata_wasm_enter(void)
{
	wasm_rt_call_stack_depth = 0;
	why[0] = 0;
}

_Noreturn void strata_wasm_fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	longjmp(strata_wasm_jmp, 1);
}

const char *wasm_rt_strerror(wasm_rt_trap_t trap)
{
	switch (trap) {
	case WASM_RT_TRAP_NONE: return "no trap";
	case WASM_RT_TRAP_OOB: return "out of bounds memory access";
	case WASM_RT_TRAP_INT_OVERFLOW: return "integer overflow";
	case WASM_RT_TRAP_DIV_BY_ZERO: return "integer divide by zero";
	case WASM_RT_TRAP_INVALID_CONVERSION: return "invalid conversion to integer";
	case WASM_RT_TRAP_UNREACHABLE: return "unreachable";
	case WASM_RT_TRAP_CALL_INDIRECT: return "indirect call type mismatch";
	case WASM_RT_TRAP_UNCAUGHT_EXCEPTION: return "uncaught exception";
	case WASM_RT_TRAP_EXHAUSTION: return "call stack exhausted";
	}
	return "unknown trap";
}

void wasm_rt_trap(wasm_rt_trap_t code)
{
	strata_wasm_fail("wasm trap: %s", wasm_rt_strerror(code));
}

void wasm_rt_init(void)
{
}

bool wasm_rt_is_initialized(void)
{
	return true;
}

void wasm_rt_free(void)
{
}

/* ---- function types: one list, equal signatures share an index ---- */

struct func_type {
	uint32_t params, results;
	wasm_rt_type_t *types;
};
static struct func_type *types;
static uint32_t ntypes, captypes;

uint32_t wasm_rt_register_func_type(uint32_t params, uint32_t results, ...)
{
	uint32_t n = params + results;
	wasm_rt_type_t *t = malloc((n ? n : 1) * sizeof(*t));
	va_list ap;

	if (!t)
		strata_abort(-1, "wasm: out of memory registering a function type");
	va_start(ap, results);
	for (uint32_t i = 0; i < n; i++)
		t[i] = (wasm_rt_type_t)va_arg(ap, int);
	va_end(ap);
	for (uint32_t i = 0; i < ntypes; i++)
		if (types[i].params == params && types[i].results == results &&
		    memcmp(types[i].types, t, n * sizeof(*t)) == 0) {
			free(t);
			return i;
		}
	if (ntypes == captypes) {
		uint32_t cap = captypes ? captypes * 2 : 16;
		struct func_type *nt = realloc(types, cap * sizeof(*nt));
		if (!nt)
			strata_abort(-1, "wasm: out of memory registering a function type");
		types = nt;
		captypes = cap;
	}
	types[ntypes] = (struct func_type){ params, results, t };
	return ntypes++;
}

/* ---- exceptions (the exceptions proposal): caught or a trap ---- */

static uint32_t ntags, exc_tag, exc_size;
static uint8_t exc_data[256];

uint32_t wasm_rt_register_tag(uint32_t size)
{
	(void)size;
	return ntags++;
}

void wasm_rt_load_exception(uint32_t tag, uint32_t size, const void *values)
{
	if (size > sizeof(exc_data))
		strata_wasm_fail("wasm: exception of %u bytes is too large", size);
	exc_tag = tag;
	exc_size = size;
	if (size)
		memcpy(exc_data, values, size);
}

void wasm_rt_throw(void)
{
	if (unwind_target)
		longjmp(*unwind_target, 1);
	wasm_rt_trap(WASM_RT_TRAP_UNCAUGHT_EXCEPTION);
}

WASM_RT_UNWIND_TARGET *wasm_rt_get_unwind_target(void)
{
	return unwind_target;
}

void wasm_rt_set_unwind_target(WASM_RT_UNWIND_TARGET *target)
{
	unwind_target = target;
}

uint32_t wasm_rt_exception_tag(void)
{
	return exc_tag;
}

uint32_t wasm_rt_exception_size(void)
{
	return exc_size;
}

void *wasm_rt_exception(void)
{
	return exc_data;
}

/* ---- linear memory: a block of the guest heap, grown by realloc ---- */

void wasm_rt_allocate_memory(wasm_rt_memory_t *m, uint32_t initial, uint32_t max)
{
	uint64_t size = (uint64_t)initial * WASM_PAGE;

	m->pages = initial;
	m->max_pages = max;
	m->size = (uint32_t)size;
	m->data = NULL;
	if (initial > 65536 || size > UINT32_MAX)
		strata_abort(-1, "wasm: memory of %u pages is larger than 4 GiB", initial);
	/* calloc: the heap hands out fresh pages as zero without writing them. */
	if (size && !(m->data = calloc(1, (size_t)size)))
		strata_abort(-1, "wasm: the module's memory (%u pages, %llu KiB) does not fit in the guest heap: "
				 "run with a larger --heap", initial, (unsigned long long)(size >> 10));
}

uint32_t wasm_rt_grow_memory(wasm_rt_memory_t *m, uint32_t delta)
{
	uint32_t old = m->pages;
	uint64_t pages = (uint64_t)old + delta;
	uint64_t size = pages * WASM_PAGE;

	if (pages > m->max_pages || pages > 65536 || size > UINT32_MAX)
		return UINT32_MAX;
	if (delta == 0)
		return old;
	/* Past the heap's room memory.grow fails as wasm says (-1). */
	uint8_t *d = realloc(m->data, (size_t)size);
	if (!d)
		return UINT32_MAX;
	memset(d + m->size, 0, (size_t)(size - m->size));
	m->data = d;
	m->pages = (uint32_t)pages;
	m->size = (uint32_t)size;
	return old;
}

void wasm_rt_free_memory(wasm_rt_memory_t *m)
{
	free(m->data);
	m->data = NULL;
	m->size = m->pages = 0;
}

/* ---- tables ---- */

#define TABLE_FNS(kind, elem, null)                                                                  \
	void wasm_rt_allocate_##kind##_table(wasm_rt_##kind##_table_t *t, uint32_t n, uint32_t max)  \
	{                                                                                            \
		t->size = n;                                                                         \
		t->max_size = max;                                                                   \
		t->data = n ? calloc(n, sizeof(elem)) : NULL;                                        \
		if (n && !t->data)                                                                   \
			strata_abort(-1, "wasm: a table of %u elements does not fit in the guest heap", n); \
	}                                                                                            \
	void wasm_rt_free_##kind##_table(wasm_rt_##kind##_table_t *t)                               \
	{                                                                                            \
		free(t->data);                                                                       \
		t->data = NULL;                                                                      \
		t->size = 0;                                                                         \
	}                                                                                            \
	uint32_t wasm_rt_grow_##kind##_table(wasm_rt_##kind##_table_t *t, uint32_t delta, elem init) \
	{                                                                                            \
		uint32_t old = t->size;                                                              \
		uint64_t n = (uint64_t)old + delta;                                                  \
		if (n > t->max_size || n > UINT32_MAX / sizeof(elem))                                \
			return UINT32_MAX;                                                           \
		if (!delta)                                                                          \
			return old;                                                                  \
		elem *d = realloc(t->data, (size_t)n * sizeof(elem));                                \
		if (!d)                                                                              \
			return UINT32_MAX;                                                           \
		for (uint64_t i = old; i < n; i++)                                                   \
			d[i] = init;                                                                 \
		t->data = d;                                                                         \
		t->size = (uint32_t)n;                                                               \
		return old;                                                                          \
	}
TABLE_FNS(funcref, wasm_rt_funcref_t, wasm_rt_funcref_null_value)
TABLE_FNS(externref, wasm_rt_externref_t, NULL)

/* ---- the glue's helpers ---- */

uint8_t *strata_wasm_span(uint32_t off, uint64_t len)
{
	if (!strata_wasm_memory || (uint64_t)off + len > strata_wasm_memory->size)
		wasm_rt_trap(WASM_RT_TRAP_OOB);
	return strata_wasm_memory->data + off;
}

static const char *host_status(int st)
{
	switch (st) {
	case STRATA_HOST_NO_FUNCTION: return "the host registered no function by that name";
	case STRATA_HOST_BAD_ARGS: return "its arguments differ from the host function's signature";
	case STRATA_HOST_FAILED: return "the host function failed";
	case STRATA_HOST_TOO_SMALL: return "its result is larger than the guest's buffer";
	}
	return "unknown status";
}

void strata_wasm_host_call(const char *name, const struct strata_value *args, unsigned nargs,
			   struct strata_value *ret)
{
	int st = strata_host_call(name, args, nargs, ret, NULL, 0);

	if (st != STRATA_HOST_OK)
		strata_wasm_fail("import %s: %s", name, host_status(st));
}

uint64_t strata_wasm_host_call_buf(const char *name, const struct strata_value *args, unsigned nargs, uint32_t buf,
				   uint32_t cap)
{
	struct strata_value r;
	uint8_t *dst = strata_wasm_span(buf, cap);
	int st = strata_host_call(name, args, nargs, &r, cap ? dst : NULL, cap);

	if (st != STRATA_HOST_OK && st != STRATA_HOST_TOO_SMALL)
		strata_wasm_fail("import %s: %s", name, host_status(st));
	if (r.type != STRATA_T_STR && r.type != STRATA_T_BYTES)
		strata_wasm_fail("import %s: the host function's result is not a string or bytes", name);
	if (st == STRATA_HOST_TOO_SMALL && r.len <= cap)
		return (uint64_t)cap + 1;   /* a string whose NUL did not fit */
	return r.len;
}

int strata_wasm_ret_cstr(struct strata_call *c, uint32_t off)
{
	if (!strata_wasm_memory || off >= strata_wasm_memory->size)
		return strata_fail(c, "wasm: the string result at %#x is outside linear memory", off);
	const uint8_t *p = strata_wasm_memory->data + off;
	if (!memchr(p, 0, strata_wasm_memory->size - off))
		return strata_fail(c, "wasm: the string result at %#x has no NUL before the end of linear memory", off);
	return strata_ret_str(c, (const char *)p);
}

int strata_wasm_ret_span(struct strata_call *c, uint64_t packed, int is_str)
{
	uint32_t off = (uint32_t)packed, len = (uint32_t)(packed >> 32);

	if (!strata_wasm_memory || (uint64_t)off + len > strata_wasm_memory->size)
		return strata_fail(c, "wasm: the result [%#x, +%u) is outside linear memory", off, len);
	if (!is_str)
		return strata_ret_bytes(c, strata_wasm_memory->data + off, len);
	char *out = strata_ret_buffer(c, (size_t)len + 1);
	if (!out)
		return strata_fail(c, "wasm: the string result (%u bytes) is larger than the output buffer", len);
	memcpy(out, strata_wasm_memory->data + off, len);
	out[len] = 0;
	return strata_ret_str(c, out);
}

/* ---- WASI (wasi_snapshot_preview1) without a filesystem ---- */

struct Z_wasi_snapshot_preview1_instance_t;
typedef struct Z_wasi_snapshot_preview1_instance_t wasi_t;

/* WASI's errno values (wasi_snapshot_preview1). */
enum { W_SUCCESS = 0, W_BADF = 8, W_INVAL = 28, W_NOSYS = 52, W_SPIPE = 70 };

static void put32(uint32_t off, uint32_t v)
{
	memcpy(strata_wasm_span(off, 4), &v, 4);
}

static void put64(uint32_t off, uint64_t v)
{
	memcpy(strata_wasm_span(off, 8), &v, 8);
}

/* fd 1 and 2 are the runtime's stdout and stderr (the host log, at info
 * and warn: docs/guests.md); there are no other descriptors. */
uint32_t Z_wasi_snapshot_preview1Z_fd_write(wasi_t *w, uint32_t fd, uint32_t iovs, uint32_t n, uint32_t nwritten)
{
	FILE *f = fd == 1 ? stdout : fd == 2 ? stderr : NULL;
	uint64_t total = 0;

	(void)w;
	if (!f)
		return W_BADF;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t io[2];
		memcpy(io, strata_wasm_span(iovs + i * 8, 8), 8);
		if (io[1])
			fwrite(strata_wasm_span(io[0], io[1]), 1, io[1], f);
		total += io[1];
	}
	put32(nwritten, (uint32_t)total);
	return W_SUCCESS;
}

uint32_t Z_wasi_snapshot_preview1Z_fd_read(wasi_t *w, uint32_t fd, uint32_t iovs, uint32_t n, uint32_t nread)
{
	(void)w, (void)iovs, (void)n;
	if (fd != 0)
		return W_BADF;
	put32(nread, 0);   /* stdin is empty */
	return W_SUCCESS;
}

uint32_t Z_wasi_snapshot_preview1Z_fd_close(wasi_t *w, uint32_t fd)
{
	(void)w;
	return fd <= 2 ? W_SUCCESS : W_BADF;
}

uint32_t Z_wasi_snapshot_preview1Z_fd_seek(wasi_t *w, uint32_t fd, uint64_t off, uint32_t whence, uint32_t out)
{
	(void)w, (void)off, (void)whence, (void)out;
	return fd <= 2 ? W_SPIPE : W_BADF;
}

uint32_t Z_wasi_snapshot_preview1Z_fd_fdstat_get(wasi_t *w, uint32_t fd, uint32_t out)
{
	(void)w;
	if (fd > 2)
		return W_BADF;
	/* fdstat: filetype u8 (2, character device), flags u16, rights u64 x2 */
	uint8_t *p = strata_wasm_span(out, 24);
	memset(p, 0, 24);
	p[0] = 2;
	uint64_t rights = fd == 0 ? 2 /* fd_read */ : 64 /* fd_write */;
	memcpy(p + 8, &rights, 8);
	return W_SUCCESS;
}

uint32_t Z_wasi_snapshot_preview1Z_fd_prestat_get(wasi_t *w, uint32_t fd, uint32_t out)
{
	(void)w, (void)fd, (void)out;
	return W_BADF;   /* no preopened directories */
}

uint32_t Z_wasi_snapshot_preview1Z_fd_prestat_dir_name(wasi_t *w, uint32_t fd, uint32_t path, uint32_t len)
{
	(void)w, (void)fd, (void)path, (void)len;
	return W_BADF;
}

/* No arguments, no environment. */
uint32_t Z_wasi_snapshot_preview1Z_args_sizes_get(wasi_t *w, uint32_t argc, uint32_t size)
{
	(void)w;
	put32(argc, 0);
	put32(size, 0);
	return W_SUCCESS;
}

uint32_t Z_wasi_snapshot_preview1Z_args_get(wasi_t *w, uint32_t argv, uint32_t buf)
{
	(void)w, (void)argv, (void)buf;
	return W_SUCCESS;
}

uint32_t Z_wasi_snapshot_preview1Z_environ_sizes_get(wasi_t *w, uint32_t n, uint32_t size)
{
	return Z_wasi_snapshot_preview1Z_args_sizes_get(w, n, size);
}

uint32_t Z_wasi_snapshot_preview1Z_environ_get(wasi_t *w, uint32_t env, uint32_t buf)
{
	return Z_wasi_snapshot_preview1Z_args_get(w, env, buf);
}

/* The runtime's clock_gettime: the host's `clock_gettime` i(i), if it
 * registered one (docs/guests.md); WASI's clock ids are POSIX's 0-3. */
uint32_t Z_wasi_snapshot_preview1Z_clock_time_get(wasi_t *w, uint32_t id, uint64_t precision, uint32_t out)
{
	struct timespec ts;

	(void)w, (void)precision;
	if (id > 3)
		return W_INVAL;
	if (clock_gettime((clockid_t)id, &ts) != 0)
		return W_NOSYS;
	put64(out, (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
	return W_SUCCESS;
}

uint32_t Z_wasi_snapshot_preview1Z_clock_res_get(wasi_t *w, uint32_t id, uint32_t out)
{
	(void)w;
	if (id > 3)
		return W_INVAL;
	put64(out, 1);
	return W_SUCCESS;
}

/* Random bytes from the host's `random_get` b(i) (strata run registers
 * one); without it, ENOSYS. */
uint32_t Z_wasi_snapshot_preview1Z_random_get(wasi_t *w, uint32_t buf, uint32_t len)
{
	(void)w;
	uint8_t *dst = strata_wasm_span(buf, len);
	while (len) {
		uint32_t n = len > 4096 ? 4096 : len;
		struct strata_value arg = strata_val_i64(n), ret;
		int st = strata_host_call("random_get", &arg, 1, &ret, dst, n);
		if (st != STRATA_HOST_OK || ret.type != STRATA_T_BYTES || ret.len != n)
			return W_NOSYS;
		dst += n;
		len -= n;
	}
	return W_SUCCESS;
}

uint32_t Z_wasi_snapshot_preview1Z_sched_yield(wasi_t *w)
{
	(void)w;
	return W_SUCCESS;
}

void Z_wasi_snapshot_preview1Z_proc_exit(wasi_t *w, uint32_t code)
{
	(void)w;
	fflush(stdout);
	fflush(stderr);
	strata_wasm_fail("proc_exit(%d)", (int32_t)code);
}

/* assert() in wasm2c's C (instantiation's checks): musl's assert.h calls
 * this, which the guest C library does not have. */
_Noreturn void __assert_fail(const char *expr, const char *file, int line, const char *func)
{
	strata_abort(-1, "%s:%d: %s: assertion '%s' failed", file, line, func, expr);
}
