/* error.c: the vmm error codes' messages (one table, in vmm.h's order) and vmm_fail. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "store/store.h"
#include "vmm/vmm_int.h"

/* Indexed by -(code + 1200): the codes of vmm.h, in its order. */
static const char *const messages[] = {
	[-1200 - VMM_E_POISONED] = "sandbox is poisoned by an earlier guest error",
	[-1200 - VMM_E_GUEST_FAULT] = "the guest faulted",
	[-1200 - VMM_E_STACK_OVERFLOW] = "the guest overflowed its stack",
	[-1200 - VMM_E_ABORT] = "the guest aborted",
	[-1200 - VMM_E_BAD_HYPERCALL] = "the guest made a bad hypercall",
	[-1200 - VMM_E_TIMEOUT] = "the guest call timed out",
	[-1200 - VMM_E_CANCELLED] = "the guest call was cancelled",
	[-1200 - VMM_E_SHUTDOWN] = "the guest triple-faulted",
	[-1200 - VMM_E_BAD_ELF] = "not a valid strata guest ELF",
	[-1200 - VMM_E_ABI] = "guest built for another ABI version",
	[-1200 - VMM_E_NO_FUNCTION] = "no such guest function",
	[-1200 - VMM_E_BAD_ARGS] = "arguments do not match the function's signature",
	[-1200 - VMM_E_GUEST_ERROR] = "the guest function reported an error",
	[-1200 - VMM_E_TOO_BIG] = "arguments or result too big for the guest's buffers",
	[-1200 - VMM_E_NO_KVM] = "no /dev/kvm on this machine",
	[-1200 - VMM_E_BAD_CONFIG] = "sandbox or host configuration out of range",
	[-1200 - VMM_E_UNEXPECTED_EXIT] = "the vCPU stopped unexpectedly",
	[-1200 - VMM_E_BAD_ADDRESS] = "the guest accessed memory outside its range",
	[-1200 - VMM_E_BUSY] = "a call is already running on this sandbox",
	[-1200 - VMM_E_KVM_DENIED] = "permission denied opening /dev/kvm",
	[-1200 - VMM_E_KVM_UNBOUND] = "a kvm module is loaded but /dev/kvm is missing",
	[-1200 - VMM_E_KVM_API] = "/dev/kvm is not a KVM this VMM can use",
	[-1200 - VMM_E_KERNEL_OLD] = "the kernel is too old for strata",
	[-1200 - VMM_E_NO_BACKEND] = "the sandbox backend asked for cannot run here",
	/* snapshots */
	[-1200 - VMM_E_NO_SNAPSHOT] = "the sandbox has no snapshot to restore to",
	[-1200 - VMM_E_BAD_SNAPSHOT] = "the snapshot does not fit this VMM or guest",
	[-1200 - VMM_E_LEAK] = "a guest page or register differs from the snapshot after restore",
	[-1200 - VMM_E_BAD_POLICY] = "malformed reset policy file",
	[-1200 - VMM_E_NO_PAGEMAP] = "no way to find written pages (/proc/self/pagemap unreadable, or "
				     "PAGEMAP_SCAN asked for on a kernel before 6.7)",
	[-1200 - VMM_E_STALE] = "not the sandbox's pending capture",
};

/* A code of the vmm range has its message here; any other (a store code
 * that came up through a capture or a layer open, -errno) is the store's
 * to name, as fs_strerror hands on to ix_strerror and it to st_strerror. */
const char *vmm_strerror(int code)
{
	if (code >= 0)
		return "success";
	if (code <= -1200 && code > -1300) {
		unsigned i = (unsigned)(-1200 - code);
		return i < sizeof(messages) / sizeof(messages[0]) && messages[i] ? messages[i] : "unknown vmm error code";
	}
	return st_strerror(code);
}

int vmm_fail(struct vmm_error *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (err) {
		memset(err, 0, sizeof(*err));
		err->code = code;
		va_start(ap, fmt);
		vsnprintf(err->message, sizeof(err->message), fmt, ap);
		va_end(ap);
	}
	return code;
}
