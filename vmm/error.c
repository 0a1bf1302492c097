/* error.c: the vmm's codes (vmm.h) in one table, in vmm.h's order, and vmm_fail. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "store/error.h"
#include "store/store.h"
#include "vmm/vmm_int.h"

static const struct st_errcode vmm_codes[] = {
	{VMM_E_POISONED, "VMM_E_POISONED", "sandbox is poisoned by an earlier guest error"},
	{VMM_E_GUEST_FAULT, "VMM_E_GUEST_FAULT", "the guest faulted"},
	{VMM_E_STACK_OVERFLOW, "VMM_E_STACK_OVERFLOW", "the guest overflowed its stack"},
	{VMM_E_ABORT, "VMM_E_ABORT", "the guest aborted"},
	{VMM_E_BAD_HYPERCALL, "VMM_E_BAD_HYPERCALL", "the guest made a bad hypercall"},
	{VMM_E_TIMEOUT, "VMM_E_TIMEOUT", "the guest call timed out"},
	{VMM_E_CANCELLED, "VMM_E_CANCELLED", "the guest call was cancelled"},
	{VMM_E_SHUTDOWN, "VMM_E_SHUTDOWN", "the guest triple-faulted"},
	{VMM_E_BAD_ELF, "VMM_E_BAD_ELF", "not a valid strata guest ELF"},
	{VMM_E_ABI, "VMM_E_ABI", "guest built for another ABI version"},
	{VMM_E_NO_FUNCTION, "VMM_E_NO_FUNCTION", "no such guest function"},
	{VMM_E_BAD_ARGS, "VMM_E_BAD_ARGS", "arguments do not match the function's signature"},
	{VMM_E_GUEST_ERROR, "VMM_E_GUEST_ERROR", "the guest function reported an error"},
	{VMM_E_TOO_BIG, "VMM_E_TOO_BIG", "arguments or result too big for the guest's buffers"},
	{VMM_E_NO_KVM, "VMM_E_NO_KVM", "no /dev/kvm on this machine"},
	{VMM_E_BAD_CONFIG, "VMM_E_BAD_CONFIG", "sandbox or host configuration out of range"},
	{VMM_E_UNEXPECTED_EXIT, "VMM_E_UNEXPECTED_EXIT", "the vCPU stopped unexpectedly"},
	{VMM_E_BAD_ADDRESS, "VMM_E_BAD_ADDRESS", "the guest accessed memory outside its range"},
	{VMM_E_BUSY, "VMM_E_BUSY", "a call is already running on this sandbox"},
	{VMM_E_KVM_DENIED, "VMM_E_KVM_DENIED", "permission denied opening /dev/kvm"},
	{VMM_E_KVM_UNBOUND, "VMM_E_KVM_UNBOUND", "a kvm module is loaded but /dev/kvm is missing"},
	{VMM_E_KVM_API, "VMM_E_KVM_API", "/dev/kvm is not a KVM this VMM can use"},
	{VMM_E_KERNEL_OLD, "VMM_E_KERNEL_OLD", "the kernel is too old for strata"},
	{VMM_E_NO_BACKEND, "VMM_E_NO_BACKEND", "the sandbox backend asked for cannot run here"},
	/* snapshots, -1250..-1269 */
	{VMM_E_NO_SNAPSHOT, "VMM_E_NO_SNAPSHOT", "the sandbox has no snapshot to restore to"},
	{VMM_E_BAD_SNAPSHOT, "VMM_E_BAD_SNAPSHOT", "the snapshot does not fit this VMM or guest"},
	{VMM_E_LEAK, "VMM_E_LEAK", "a guest page or register differs from the snapshot after restore"},
	{VMM_E_BAD_POLICY, "VMM_E_BAD_POLICY", "malformed reset policy file"},
	{VMM_E_NO_PAGEMAP, "VMM_E_NO_PAGEMAP",
	 "no way to find written pages (/proc/self/pagemap unreadable, or "
	 "PAGEMAP_SCAN asked for on a kernel before 6.7)"},
	{VMM_E_STALE, "VMM_E_STALE", "not the sandbox's pending capture"},
	{VMM_E_FOREIGN, "VMM_E_FOREIGN", "the in-memory snapshot belongs to another sandbox"},
};

static const struct st_errtable vmm_table = {
	-1200, vmm_codes, sizeof(vmm_codes) / sizeof(vmm_codes[0]),
};

__attribute__((constructor)) static void vmm_errors_add(void)
{
	st_errtable_add(&vmm_table);
}

/* st_strerror under the vmm's name (vmm_fail, which every part of the vmm
 * calls, keeps this file and so its table linked). */
const char *vmm_strerror(int code)
{
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
