/* run.c: the vCPU loop: guest calls, hypercalls (host calls, logs, aborts, exceptions), kill and timeouts. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "store/sys.h"
#include "vmm/vmm_int.h"

/* The signal that kicks a vCPU thread out of KVM_RUN (kill, timeouts). */
#define KICK_SIGNAL (SIGRTMIN + 1)

static __thread struct vmm_sandbox *volatile tls_sb;
static pthread_once_t kick_once = PTHREAD_ONCE_INIT;

static void kick_handler(int sig)
{
	struct vmm_sandbox *sb = tls_sb;

	(void)sig;
	/* Covers a signal that lands just before KVM_RUN: it returns at once. */
	if (sb)
		sb->be->kick(sb, true);
}

static void kick_install(void)
{
	struct sigaction sa = { .sa_handler = kick_handler };

	sigemptyset(&sa.sa_mask);
	/* No SA_RESTART: KVM_RUN must return EINTR. */
	sigaction(KICK_SIGNAL, &sa, NULL);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static bool poisons(int code)
{
	switch (code) {
	case VMM_E_GUEST_FAULT: case VMM_E_STACK_OVERFLOW: case VMM_E_ABORT:
	case VMM_E_BAD_HYPERCALL: case VMM_E_TIMEOUT: case VMM_E_CANCELLED:
	case VMM_E_SHUTDOWN: case VMM_E_UNEXPECTED_EXIT: case VMM_E_BAD_ADDRESS:
		return true;
	default:
		return false;
	}
}

_Static_assert(VMM_MESSAGE_MAX >= STRATA_MSG_MAX + 128, "a guest's whole error message fits vmm_error.message");

int vmm_run_fail(struct vmm_sandbox *sb, int code, const char *fmt, ...)
{
	va_list ap;

	/* Keep fields a caller filled in (vector, rip...) and set the rest. */
	sb->err.code = code;
	va_start(ap, fmt);
	vsnprintf(sb->err.message, sizeof(sb->err.message), fmt, ap);
	va_end(ap);
	if (poisons(code))
		sb->poisoned = true;
	return code;
}

void *vmm_run_guest_ptr(struct vmm_sandbox *sb, uint64_t gpa, uint64_t len)
{
	return vmm_mem_translate(sb->mem, sb->layout.image_lo, sb->mem_size, gpa, len);
}

int vmm_run_guest_str(struct vmm_sandbox *sb, uint64_t gpa, char *buf, size_t cap)
{
	for (size_t i = 0; i < cap; i++) {
		const char *c = vmm_run_guest_ptr(sb, gpa + i, 1);
		if (!c || gpa + i < gpa)
			return -EFAULT;
		buf[i] = *c;
		if (!*c)
			return (int)i;
	}
	return -ENAMETOOLONG;
}

bool vmm_sig_parse(const char *sig, struct vmm_signature *out)
{
	struct vmm_signature t = { 0 };

	if (!sig || !sig[0] || sig[1] != '(')
		return false;
	switch (sig[0]) {
	case 'v': t.ret = VMM_VOID; break;
	case 'i': t.ret = VMM_I64; break;
	case 'b': t.ret = VMM_BYTES; break;
	case 's': t.ret = VMM_STR; break;
	default: return false;
	}
	const char *p = sig + 2;
	for (; *p && *p != ')'; p++) {
		if (t.nparams == VMM_MAX_PARAMS)
			return false;
		switch (*p) {
		case 'i': t.params[t.nparams++] = VMM_I64; break;
		case 'b': t.params[t.nparams++] = VMM_BYTES; break;
		case 's': t.params[t.nparams++] = VMM_STR; break;
		default: return false;
		}
	}
	if (*p != ')' || p[1] != '\0')
		return false;
	*out = t;
	return true;
}

/* ---- hypercalls ---- */

static int hc_log(struct vmm_sandbox *sb, uint32_t gpa)
{
	struct strata_log rec;
	const void *p = vmm_run_guest_ptr(sb, gpa, sizeof(rec));

	if (!p)
		return vmm_run_fail(sb, VMM_E_BAD_HYPERCALL, "log: record at 0x%x is outside guest memory", gpa);
	memcpy(&rec, p, sizeof(rec));
	const char *msg = vmm_run_guest_ptr(sb, rec.addr, rec.len);
	if (!msg)
		return vmm_run_fail(sb, VMM_E_BAD_HYPERCALL,
				    "log: message at 0x%llx+%llu is outside guest memory",
				    (unsigned long long)rec.addr, (unsigned long long)rec.len);
	if (sb->cfg.log)
		sb->cfg.log(sb->cfg.log_ctx, rec.level > VMM_LOG_DEBUG ? VMM_LOG_DEBUG : (enum vmm_log_level)rec.level, msg,
			    (size_t)rec.len);
	return 0;
}

static int hc_abort(struct vmm_sandbox *sb, uint32_t gpa)
{
	struct strata_abort rec;
	const void *p = vmm_run_guest_ptr(sb, gpa, sizeof(rec));

	if (!p)
		return vmm_run_fail(sb, VMM_E_BAD_HYPERCALL, "abort: record at 0x%x is outside guest memory", gpa);
	memcpy(&rec, p, sizeof(rec));
	uint64_t len = rec.len > 200 ? 200 : rec.len;
	const char *msg = vmm_run_guest_ptr(sb, rec.addr, len);
	sb->err.abort_code = rec.code;
	if (!msg)
		return vmm_run_fail(sb, VMM_E_ABORT, "guest aborted with code %lld (message unreadable)",
				    (long long)rec.code);
	char buf[201];
	memcpy(buf, msg, len);
	buf[len] = 0;
	for (uint64_t i = 0; i < len; i++)
		if ((unsigned char)buf[i] < 0x20 && buf[i] != '\0')
			buf[i] = '?';
	return vmm_run_fail(sb, VMM_E_ABORT, "guest aborted with code %lld: %s", (long long)rec.code, buf);
}

int vmm_run_exception(struct vmm_sandbox *sb, uint64_t vector, uint64_t error_code, uint64_t rip, uint64_t cr2)
{
	sb->err.vector = (uint32_t)vector;
	sb->err.error_code = error_code;
	sb->err.rip = rip;
	/* Kept for a core file (vmm_sandbox_core): the general registers as
	 * the guest left them, rip from the report. */
	sb->fault_state_ok = sb->be->get_state(sb, &sb->fault_state) == 0;
	if (sb->fault_state_ok)
		sb->fault_state.rip = rip;
	if (vector == VMM_X86_VEC_PF) {
		sb->err.fault_addr = cr2;
		const struct vmm_layout *l = &sb->layout;
		if (cr2 >= l->stack_guard && cr2 < l->stack_lo)
			return vmm_run_fail(sb, VMM_E_STACK_OVERFLOW,
					    "guest stack overflow (page fault on the stack guard page at 0x%llx, rip 0x%llx)",
					    (unsigned long long)cr2, (unsigned long long)rip);
		return vmm_run_fail(sb, VMM_E_GUEST_FAULT,
				    "guest page fault at address 0x%llx (%s, %s), rip 0x%llx",
				    (unsigned long long)cr2, (error_code & 1) ? "protection" : "not present",
				    (error_code & 2) ? "write" : (error_code & 16) ? "fetch" : "read",
				    (unsigned long long)rip);
	}
	return vmm_run_fail(sb, VMM_E_GUEST_FAULT, "guest exception %llu: %s at rip 0x%llx (error code 0x%llx)",
			    (unsigned long long)vector, vmm_x86_vector_name((unsigned)vector),
			    (unsigned long long)rip, (unsigned long long)error_code);
}

static int hc_exception(struct vmm_sandbox *sb, uint32_t gpa)
{
	struct strata_exception_frame f;
	/* The stub's frame lives on an IST stack (supervisor pages, below image_lo). */
	const void *p = vmm_mem_translate(sb->mem, sb->layout.ist1_top - VMM_PAGE, sb->layout.ist2_top, gpa, sizeof(f));
	uint64_t cr2 = 0;

	if (!p)
		return vmm_run_fail(sb, VMM_E_BAD_HYPERCALL, "exception report from outside the exception stacks");
	memcpy(&f, p, sizeof(f));
	(void)sb->be->get_cr2(sb, &cr2);
	int rc = vmm_run_exception(sb, f.vector, f.error_code, f.rip, cr2);
	/* The vCPU is in the CPL 0 stub: the guest's stack and flags are the frame's. */
	if (sb->fault_state_ok) {
		sb->fault_state.gpr[6] = f.rsp;
		sb->fault_state.rflags = f.rflags;
		sb->fault_state.cs.selector = (uint16_t)f.cs;
		sb->fault_state.ss.selector = (uint16_t)f.ss;
	}
	return rc;
}

static int hc_hostcall(struct vmm_sandbox *sb, uint32_t gpa)
{
	struct strata_hostcall rec;
	struct vmm_value args[STRATA_MAX_ARGS] = { 0 };
	struct vmm_value ret = { 0 };
	char name[STRATA_NAME_MAX];
	struct strata_hostcall *g = vmm_run_guest_ptr(sb, gpa, sizeof(rec));
	const struct vmm_host_fn *h = NULL;

	if (!g)
		return vmm_run_fail(sb, VMM_E_BAD_HYPERCALL, "host call: record at 0x%x is outside guest memory", gpa);
	memcpy(&rec, g, sizeof(rec));
	if (vmm_run_guest_str(sb, rec.name_addr, name, sizeof(name)) < 0)
		return vmm_run_fail(sb, VMM_E_BAD_HYPERCALL, "host call: unreadable function name");
	if (rec.nargs > STRATA_MAX_ARGS)
		return vmm_run_fail(sb, VMM_E_BAD_HYPERCALL, "host call: %u arguments (at most %u)", rec.nargs,
				    STRATA_MAX_ARGS);
	for (unsigned i = 0; i < rec.nargs; i++) {
		const struct strata_value *v = &rec.args[i];
		switch (v->type) {
		case STRATA_T_I64:
			args[i] = (struct vmm_value){ .type = VMM_I64, .i64 = v->i64 };
			break;
		case STRATA_T_BYTES:
		case STRATA_T_STR: {
			bool str = v->type == STRATA_T_STR;
			const char *d = vmm_run_guest_ptr(sb, v->addr, v->len);
			if (!d || (str && (v->len == UINT64_MAX || !vmm_run_guest_ptr(sb, v->addr, v->len + 1) ||
					  d[v->len] != '\0')))
				return vmm_run_fail(sb, VMM_E_BAD_HYPERCALL,
						    "host call %s: argument %u at 0x%llx+%llu is outside guest memory%s",
						    name, i, (unsigned long long)v->addr, (unsigned long long)v->len,
						    str ? " or not NUL-terminated" : "");
			args[i] = (struct vmm_value){ .type = str ? VMM_STR : VMM_BYTES, .data = d,
						      .len = (size_t)v->len };
			break;
		}
		default:
			return vmm_run_fail(sb, VMM_E_BAD_HYPERCALL, "host call %s: argument %u has unknown type %u",
					    name, i, v->type);
		}
	}
	for (unsigned i = 0; i < sb->nhfns; i++)
		if (strcmp(sb->hfns[i].name, name) == 0)
			h = &sb->hfns[i];
	rec.ret = (struct strata_value){ .addr = rec.ret.addr };
	if (!h) {
		rec.status = STRATA_HOST_NO_FUNCTION;
		goto out_reply;
	}
	bool match = h->sig.nparams == rec.nargs;
	for (unsigned i = 0; match && i < rec.nargs; i++)
		match = h->sig.params[i] == args[i].type;
	if (!match) {
		rec.status = STRATA_HOST_BAD_ARGS;
		goto out_reply;
	}
	if (h->cb(h->ctx, args, rec.nargs, &ret) < 0 || ret.type != h->sig.ret) {
		rec.status = STRATA_HOST_FAILED;
		goto out_reply;
	}
	rec.status = STRATA_HOST_OK;
	rec.ret.type = (uint32_t)ret.type;
	if (ret.type == VMM_I64) {
		rec.ret.i64 = ret.i64;
	} else if (ret.type == VMM_BYTES || ret.type == VMM_STR) {
		uint64_t need = ret.len + (ret.type == VMM_STR);
		rec.ret.len = ret.len;
		if (need > rec.ret_cap) {
			rec.status = STRATA_HOST_TOO_SMALL;
			goto out_reply;
		}
		uint8_t *dst = vmm_run_guest_ptr(sb, rec.ret.addr, need);
		if (!dst)
			return vmm_run_fail(sb, VMM_E_BAD_HYPERCALL, "host call %s: result buffer outside guest memory",
					    name);
		if (ret.len)
			memcpy(dst, ret.data, ret.len);
		if (ret.type == VMM_STR)
			dst[ret.len] = 0;
	}
out_reply:
	/* Write back only the output fields. */
	g->status = rec.status;
	g->ret = rec.ret;
	return 0;
}

/* ---- the loop ---- */

int vmm_run_until(struct vmm_sandbox *sb, uint16_t port, uint64_t timeout_ns, uint32_t *value)
{
	struct vmm_exit ex;
	uint64_t deadline = timeout_ns ? now_ns() + timeout_ns : 0;
	timer_t timer;
	bool have_timer = false;
	int rc = 0;

	pthread_once(&kick_once, kick_install);
	tls_sb = sb;
	sb->fault_state_ok = false;
	if (timeout_ns) {
		struct sigevent sev = { .sigev_notify = SIGEV_THREAD_ID, .sigev_signo = KICK_SIGNAL };
		sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
		if (timer_create(CLOCK_MONOTONIC, &sev, &timer) == 0) {
			struct itimerspec its = { 0 };
			its.it_value.tv_sec = (time_t)(timeout_ns / 1000000000ull);
			its.it_value.tv_nsec = (long)(timeout_ns % 1000000000ull);
			/* Re-kick every 10 ms in case one lands between checks. */
			its.it_interval.tv_nsec = 10000000;
			timer_settime(timer, 0, &its, NULL);
			have_timer = true;
		}
	}
	for (;;) {
		if (atomic_load(&sb->kill_pending)) {
			rc = vmm_run_fail(sb, VMM_E_CANCELLED, "the call was cancelled (sandbox killed)");
			break;
		}
		rc = sb->be->run(sb, &ex);
		if (rc < 0) {
			rc = vmm_run_fail(sb, VMM_E_UNEXPECTED_EXIT, "running the guest (%s backend) failed: %s",
					  sb->be->name, strerror(-rc));
			break;
		}
		if (ex.kind == VMM_EXIT_INTR) {
			sb->be->kick(sb, false);
			if (atomic_load(&sb->kill_pending)) {
				rc = vmm_run_fail(sb, VMM_E_CANCELLED, "the call was cancelled (sandbox killed)");
				break;
			}
			if (deadline && now_ns() >= deadline) {
				rc = vmm_run_fail(sb, VMM_E_TIMEOUT, "the call timed out after %llu ms",
						  (unsigned long long)(timeout_ns / 1000000));
				break;
			}
			continue;
		}
		/* A 32-bit store into the hypercall page is a hypercall from CPL 3. */
		if (ex.kind == VMM_EXIT_MMIO && ex.is_write && ex.len == 4 && ex.addr >= STRATA_HC_GPA &&
		    ex.addr < STRATA_HC_GPA + VMM_PAGE && (ex.addr & 3) == 0) {
			ex.kind = VMM_EXIT_IO_OUT;
			ex.port = (uint16_t)(STRATA_HC_PORT_BASE + (ex.addr - STRATA_HC_GPA) / 4);
		}
		if (ex.kind == VMM_EXIT_IO_OUT) {
			if (ex.port == port) {
				*value = ex.value;
				rc = 0;
				break;
			}
			switch (ex.port) {
			case STRATA_PORT_HOSTCALL: rc = hc_hostcall(sb, ex.value); break;
			case STRATA_PORT_LOG: rc = hc_log(sb, ex.value); break;
			case STRATA_PORT_ABORT: rc = hc_abort(sb, ex.value); break;
			case STRATA_PORT_EXCEPTION: rc = hc_exception(sb, ex.value); break;
			default:
				sb->err.port = ex.port;
				rc = vmm_run_fail(sb, VMM_E_BAD_HYPERCALL, "guest wrote to port 0x%x, which is not a hypercall%s",
						  ex.port, ex.port == STRATA_PORT_READY || ex.port == STRATA_PORT_RETURN
						  ? " here" : "");
			}
			if (rc < 0)
				break;
			if (deadline && now_ns() >= deadline) {
				rc = vmm_run_fail(sb, VMM_E_TIMEOUT, "the call timed out after %llu ms",
						  (unsigned long long)(timeout_ns / 1000000));
				break;
			}
			continue;
		}
		switch (ex.kind) {
		case VMM_EXIT_IO_BAD:
			sb->err.port = ex.port;
			rc = vmm_run_fail(sb, VMM_E_BAD_HYPERCALL,
					  "guest did port I/O on 0x%x that is not a 32-bit `out` hypercall", ex.port);
			break;
		case VMM_EXIT_MMIO:
			sb->err.fault_addr = ex.addr;
			rc = vmm_run_fail(sb, VMM_E_BAD_ADDRESS, "guest accessed 0x%llx, outside its memory",
					  (unsigned long long)ex.addr);
			break;
		case VMM_EXIT_SHUTDOWN:
			rc = vmm_run_fail(sb, VMM_E_SHUTDOWN, "the guest triple-faulted (vCPU shut down)");
			break;
		case VMM_EXIT_INTERNAL:
			/* kvm_pvm ends here where hardware would triple-fault: an
			 * exception it cannot deliver (suberror 1 emulation, 3 event
			 * delivery). Either way the vCPU cannot go on. */
			rc = vmm_run_fail(sb, VMM_E_SHUTDOWN,
					  "the vCPU stopped: KVM could not deliver an exception or emulate an "
					  "instruction (internal error, suberror %u)", ex.reason);
			break;
		case VMM_EXIT_HLT:
			rc = vmm_run_fail(sb, VMM_E_UNEXPECTED_EXIT, "the guest halted");
			break;
		case VMM_EXIT_EXCEPTION:
			rc = vmm_run_exception(sb, ex.vector, ex.error_code, ex.rip, ex.addr);
			break;
		case VMM_EXIT_DEAD: {
			char how[64];
			rc = vmm_run_fail(sb, VMM_E_SHUTDOWN, "the guest's process %s",
					  vmm_proc_end_str((int)ex.reason, how, sizeof(how)));
			break;
		}
		case VMM_EXIT_BAD_REPORT:
			rc = vmm_run_fail(sb, VMM_E_UNEXPECTED_EXIT,
					  "the guest's process made a bad report (signal %u, or its frame moved): the guest "
					  "forged it; the process is ended", ex.reason);
			break;
		default:
			rc = vmm_run_fail(sb, VMM_E_UNEXPECTED_EXIT, "the vCPU stopped with KVM exit reason %u", ex.reason);
			break;
		}
		break;
	}
	tls_sb = NULL;
	if (have_timer)
		timer_delete(timer);
	sb->be->kick(sb, false);
	/* A guest left running (timeout, kill) is stopped before anyone looks at it. */
	if (rc < 0 && sb->be->halt)
		sb->be->halt(sb);
	return rc;
}

/* ---- calls ---- */

static const struct vmm_fn *fn_find(const struct vmm_sandbox *sb, const char *name, uint32_t *idx)
{
	for (uint32_t i = 0; i < sb->nfns; i++) {
		if (strcmp(sb->fns[i].name, name) == 0) {
			*idx = i;
			return &sb->fns[i];
		}
	}
	return NULL;
}

/* Write the call frame and arguments into the input buffer. */
static const char *type_name(enum vmm_type t)
{
	switch (t) {
	case VMM_VOID: return "void";
	case VMM_I64: return "integer";
	case VMM_BYTES: return "bytes";
	case VMM_STR: return "string";
	}
	return "unknown";
}

static int frame_write(struct vmm_sandbox *sb, uint32_t idx, const struct vmm_fn *f,
		       const struct vmm_value *args, size_t nargs)
{
	const struct vmm_layout *l = &sb->layout;
	struct strata_call_frame fr = { .magic = STRATA_CALL_MAGIC, .fn = idx, .nargs = (uint32_t)nargs,
					.seq = ++sb->seq };
	uint64_t off = sizeof(fr);

	for (size_t i = 0; i < nargs; i++) {
		if (args[i].type != f->type.params[i])
			return vmm_run_fail(sb, VMM_E_BAD_ARGS, "%s: argument %zu should be %s, not %s", f->name, i + 1,
					    type_name(f->type.params[i]), type_name(args[i].type));
		if (args[i].type == VMM_I64) {
			fr.args[i] = (struct strata_value){ .type = STRATA_T_I64, .i64 = args[i].i64 };
			continue;
		}
		bool str = args[i].type == VMM_STR;
		uint64_t need = (uint64_t)args[i].len + str;
		if (off > l->in_size || args[i].len > l->in_size - off || need > l->in_size - off)
			return vmm_run_fail(sb, VMM_E_TOO_BIG,
					    "%s: arguments do not fit the %llu-byte input buffer (raise input_size)",
					    f->name, (unsigned long long)l->in_size);
		if (args[i].len && !args[i].data)
			return vmm_run_fail(sb, VMM_E_BAD_ARGS, "%s: argument %zu has no data", f->name, i + 1);
		uint8_t *dst = sb->mem + l->in_addr + off;
		if (args[i].len)
			memcpy(dst, args[i].data, args[i].len);
		if (str)
			dst[args[i].len] = 0;
		fr.args[i] = (struct strata_value){ .type = str ? STRATA_T_STR : STRATA_T_BYTES,
						    .addr = l->in_addr + off, .len = args[i].len };
		off = vmm_round_up(off + need, 8);
	}
	memcpy(sb->mem + l->in_addr, &fr, sizeof(fr));
	return 0;
}

static int result_read(struct vmm_sandbox *sb, const struct vmm_fn *f, uint32_t status, struct vmm_result *res)
{
	const struct vmm_layout *l = &sb->layout;
	struct strata_result_frame r;

	memcpy(&r, sb->mem + l->out_addr, sizeof(r));
	if (r.magic != STRATA_RESULT_MAGIC || r.seq != sb->seq || r.status != status)
		return vmm_run_fail(sb, VMM_E_BAD_HYPERCALL, "%s: the guest returned a malformed result frame", f->name);
	if (status == STRATA_ERR_FUNCTION) {
		/* At most STRATA_MSG_MAX bytes, and only from inside guest
		 * memory: the length is the guest's word. */
		uint64_t len = r.msg_len < STRATA_MSG_MAX ? r.msg_len : STRATA_MSG_MAX;
		const char *m = vmm_run_guest_ptr(sb, r.msg_addr, len);
		return vmm_run_fail(sb, VMM_E_GUEST_ERROR, "the guest function reported an error: %.*s", m ? (int)len : 0,
				    m ? m : "");
	}
	if (status != STRATA_OK)
		return vmm_run_fail(sb, VMM_E_BAD_HYPERCALL, "%s: the guest rejected a valid call frame (status %u)",
				    f->name, status);
	if (r.ret.type != (uint32_t)f->type.ret)
		return vmm_run_fail(sb, VMM_E_BAD_HYPERCALL, "%s: result type %u does not match signature '%s'",
				    f->name, r.ret.type, f->sig);
	memset(res, 0, sizeof(*res));
	res->type = f->type.ret;
	if (f->type.ret == VMM_I64) {
		res->i64 = r.ret.i64;
	} else if (f->type.ret == VMM_BYTES || f->type.ret == VMM_STR) {
		const void *d = vmm_run_guest_ptr(sb, r.ret.addr, r.ret.len);
		if (!d)
			return vmm_run_fail(sb, VMM_E_BAD_HYPERCALL, "%s: result at 0x%llx+%llu is outside guest memory",
					    f->name, (unsigned long long)r.ret.addr, (unsigned long long)r.ret.len);
		res->data = st_sys_malloc(r.ret.len + 1);
		if (!res->data)
			return vmm_run_fail(sb, -ENOMEM, "out of memory for a %llu-byte result",
					    (unsigned long long)r.ret.len);
		memcpy(res->data, d, r.ret.len);
		((char *)res->data)[r.ret.len] = 0;
		res->len = (size_t)r.ret.len;
	}
	return 0;
}

int vmm_sandbox_call_timeout(struct vmm_sandbox *sb, const char *fn, const struct vmm_value *args,
			     size_t nargs, uint64_t timeout_ns, struct vmm_result *res)
{
	const struct vmm_fn *f;
	uint32_t idx, status = 0;
	int rc;

	/* Claim the sandbox first: nothing below may touch guest memory or the
	 * error record while another thread's call runs. */
	pthread_mutex_lock(&sb->lock);
	if (sb->in_call) {
		pthread_mutex_unlock(&sb->lock);
		return VMM_E_BUSY;
	}
	sb->in_call = true;
	sb->thread = pthread_self();
	atomic_store(&sb->kill_pending, false);
	pthread_mutex_unlock(&sb->lock);

	if (sb->poisoned) {
		/* Keep the original error's details; say why the call is refused. */
		sb->err.code = VMM_E_POISONED;
		rc = VMM_E_POISONED;
		goto out_release;
	}
	vmm_error_clear(&sb->err);
	if (!fn || !(f = fn_find(sb, fn, &idx))) {
		rc = vmm_run_fail(sb, VMM_E_NO_FUNCTION, "the guest has no function '%s'", fn ? fn : "(null)");
		goto out_release;
	}
	if (nargs != f->type.nparams || (nargs && !args)) {
		rc = vmm_run_fail(sb, VMM_E_BAD_ARGS, "%s takes %u argument(s) (signature %s), %zu given", f->name,
				  f->type.nparams, f->sig, nargs);
		goto out_release;
	}
	if ((rc = frame_write(sb, idx, f, args, nargs)) < 0)
		goto out_release;
	rc = vmm_run_until(sb, STRATA_PORT_RETURN, timeout_ns ? timeout_ns : sb->cfg.timeout_ns, &status);
	if (rc == 0)
		rc = result_read(sb, f, status, res);
out_release:
	pthread_mutex_lock(&sb->lock);
	sb->in_call = false;
	atomic_store(&sb->kill_pending, false);
	pthread_mutex_unlock(&sb->lock);
	return rc;
}

int vmm_sandbox_call(struct vmm_sandbox *sb, const char *fn, const struct vmm_value *args, size_t nargs,
		     struct vmm_result *res)
{
	return vmm_sandbox_call_timeout(sb, fn, args, nargs, 0, res);
}

int vmm_sandbox_kill(struct vmm_sandbox *sb)
{
	int hit = 0;

	pthread_mutex_lock(&sb->lock);
	if (sb->in_call) {
		atomic_store(&sb->kill_pending, true);
		sb->be->kick(sb, true);
		pthread_kill(sb->thread, KICK_SIGNAL);
		hit = 1;
	}
	pthread_mutex_unlock(&sb->lock);
	return hit;
}

void vmm_result_clear(struct vmm_result *res)
{
	if (!res)
		return;
	free(res->data);
	memset(res, 0, sizeof(*res));
}
