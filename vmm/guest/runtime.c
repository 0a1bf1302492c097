/* runtime.c: the guest runtime: init, the CPL 3 dispatch loop, arguments/results, hypercalls. */
#include <stdbool.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/strata_heap.h"
#include "include/strata_guest.h"

struct strata_call {
	const struct strata_call_frame *frame;
	struct strata_result_frame *res;
	const struct strata_fn_reg *reg;
	bool done;
};

extern const struct strata_fn_reg __start_strata_fns[], __stop_strata_fns[];
/* sys.c: stdout's buffered bytes to the host log, if it holds any. */
void strata_stdout_flush(void);

static const struct strata_boot_info *boot;
static struct strata_fn_desc descs[STRATA_MAX_FUNCTIONS];
static struct strata_fn_table table;
static char fail_msg[STRATA_MSG_MAX + 1];

const struct strata_boot_info *strata_boot_info(void)
{
	return boot;
}

static uint64_t addr_of(const void *p)
{
	return (uint64_t)(uintptr_t)p;
}

_Noreturn void strata_abort(int64_t code, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	struct strata_abort rec;

	va_start(ap, fmt);
	int n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= sizeof(msg))
		n = sizeof(msg) - 1;
	rec.code = code;
	rec.addr = addr_of(msg);
	rec.len = (uint64_t)n;
	for (;;)
		strata_out(STRATA_PORT_ABORT, (uint32_t)addr_of(&rec));
}

_Noreturn void abort(void)
{
	strata_abort(-1, "abort() called");
}

void strata_log_write(int level, const char *msg, size_t len)
{
	struct strata_log rec = { .level = (uint32_t)level, .addr = addr_of(msg), .len = len };

	strata_out(STRATA_PORT_LOG, (uint32_t)addr_of(&rec));
}

void strata_log(int level, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(msg))
		n = sizeof(msg) - 1;
	strata_log_write(level, msg, (size_t)n);
}

struct strata_value strata_val_str(const char *s)
{
	return (struct strata_value){ .type = STRATA_T_STR, .addr = addr_of(s), .len = strlen(s) };
}

int strata_host_call(const char *name, const struct strata_value *args, unsigned nargs,
		     struct strata_value *ret, void *buf, size_t cap)
{
	struct strata_hostcall hc = { .name_addr = addr_of(name), .nargs = nargs };

	if (nargs > STRATA_MAX_ARGS)
		return STRATA_HOST_BAD_ARGS;
	for (unsigned i = 0; i < nargs; i++)
		hc.args[i] = args[i];
	hc.ret.addr = addr_of(buf);
	hc.ret_cap = buf ? cap : 0;
	strata_out(STRATA_PORT_HOSTCALL, (uint32_t)addr_of(&hc));
	if (ret)
		*ret = hc.ret;
	return (int)hc.status;
}

/* ---- arguments and results ---- */

unsigned strata_arg_count(const struct strata_call *c)
{
	return c->frame->nargs;
}

static const struct strata_value *arg(const struct strata_call *c, unsigned i, uint32_t type)
{
	if (i >= c->frame->nargs || c->frame->args[i].type != type)
		strata_abort(-2, "%s: argument %u is not of the requested type", c->reg->name, i);
	return &c->frame->args[i];
}

int64_t strata_arg_i64(const struct strata_call *c, unsigned i)
{
	return arg(c, i, STRATA_T_I64)->i64;
}

const char *strata_arg_str(const struct strata_call *c, unsigned i)
{
	return (const char *)(uintptr_t)arg(c, i, STRATA_T_STR)->addr;
}

const void *strata_arg_bytes(const struct strata_call *c, unsigned i, size_t *len)
{
	const struct strata_value *v = arg(c, i, STRATA_T_BYTES);

	if (len)
		*len = v->len;
	return (const void *)(uintptr_t)v->addr;
}

static int ret_value(struct strata_call *c, uint32_t type, int64_t i, const void *p, size_t len)
{
	c->res->ret = (struct strata_value){ .type = type, .i64 = i, .addr = addr_of(p), .len = len };
	c->done = true;
	return STRATA_OK;
}

int strata_ret_void(struct strata_call *c)
{
	return ret_value(c, STRATA_T_VOID, 0, NULL, 0);
}

int strata_ret_i64(struct strata_call *c, int64_t v)
{
	return ret_value(c, STRATA_T_I64, v, NULL, 0);
}

int strata_ret_str(struct strata_call *c, const char *s)
{
	return ret_value(c, STRATA_T_STR, 0, s, strlen(s));
}

int strata_ret_strn(struct strata_call *c, const char *s, size_t len)
{
	return ret_value(c, STRATA_T_STR, 0, s, len);
}

int strata_ret_bytes(struct strata_call *c, const void *p, size_t len)
{
	return ret_value(c, STRATA_T_BYTES, 0, p, len);
}

void *strata_ret_buffer(struct strata_call *c, size_t len)
{
	size_t hdr = (sizeof(struct strata_result_frame) + 15) & ~(size_t)15;

	if (len > boot->out_size - hdr)
		return NULL;
	return (uint8_t *)c->res + hdr;
}

int strata_fail(struct strata_call *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(fail_msg, sizeof(fail_msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= sizeof(fail_msg))
		n = sizeof(fail_msg) - 1;
	c->res->msg_addr = addr_of(fail_msg);
	c->res->msg_len = (uint64_t)n;
	c->done = true;
	return STRATA_ERR_FUNCTION;
}

/* ---- dispatch ---- */

static uint32_t sig_type(char ch)
{
	switch (ch) {
	case 'i': return STRATA_T_I64;
	case 'b': return STRATA_T_BYTES;
	case 's': return STRATA_T_STR;
	default: return STRATA_T_VOID;
	}
}

static uint32_t dispatch(void)
{
	const struct strata_call_frame *f = (const void *)(uintptr_t)boot->in_addr;
	struct strata_result_frame *r = (void *)(uintptr_t)boot->out_addr;
	struct strata_call c = { .frame = f, .res = r };

	r->magic = STRATA_RESULT_MAGIC;
	r->seq = f->seq;
	r->ret = (struct strata_value){ 0 };
	r->msg_addr = r->msg_len = 0;
	if (f->magic != STRATA_CALL_MAGIC || f->nargs > STRATA_MAX_ARGS)
		return r->status = STRATA_ERR_BAD_FRAME;
	if (f->fn >= table.count)
		return r->status = STRATA_ERR_NO_FUNCTION;
	c.reg = &__start_strata_fns[f->fn];
	const char *p = c.reg->sig + 2;
	for (unsigned i = 0; i < f->nargs; i++, p++)
		if (*p == ')' || sig_type(*p) != f->args[i].type)
			return r->status = STRATA_ERR_BAD_FRAME;
	if (*p != ')')
		return r->status = STRATA_ERR_BAD_FRAME;
	uint32_t st = (uint32_t)c.reg->fn(&c);
	/* A call's output is in the host log when it returns: what it left in
	 * stdout's buffer (a line without its newline) goes now. */
	strata_stdout_flush();
	if (!c.done && st == STRATA_OK)
		st = (uint32_t)strata_fail(&c, "%s returned without a result", c.reg->name);
	return r->status = st;
}

void strata_main(void);
void strata_main(void)
{
	boot = (const struct strata_boot_info *)(uintptr_t)STRATA_BOOT_INFO_GPA;
	if (boot->magic != STRATA_BOOT_MAGIC || boot->abi_version != STRATA_ABI_VERSION)
		strata_abort(-3, "boot info missing or for another ABI version");
	strata_heap_init((void *)(uintptr_t)boot->heap_addr, (size_t)boot->heap_size);
	size_t n = (size_t)(__stop_strata_fns - __start_strata_fns);
	if (n > STRATA_MAX_FUNCTIONS)
		strata_abort(-4, "too many guest functions (%zu)", n);
	for (size_t i = 0; i < n; i++) {
		descs[i].name_addr = addr_of(__start_strata_fns[i].name);
		descs[i].sig_addr = addr_of(__start_strata_fns[i].sig);
		descs[i].entry = (uint64_t)(uintptr_t)__start_strata_fns[i].fn;
	}
	table = (struct strata_fn_table){ .magic = STRATA_FN_TABLE_MAGIC, .count = (uint32_t)n,
					  .descs_addr = addr_of(descs) };
	if (strata_init)
		strata_init();
	strata_out(STRATA_PORT_READY, (uint32_t)addr_of(&table));
	/* Parked here between calls: the host writes a frame and resumes us
	 * right after the `out` — one KVM_RUN per call, no register reloads. */
	for (;;) {
		uint32_t st = dispatch();
		strata_out(STRATA_PORT_RETURN, st);
	}
}
