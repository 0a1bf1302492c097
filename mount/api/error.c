/* error.c: libstrata's version, its one strerror and the calling thread's message of its last failed call. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fs/fs.h"
#include "index/dist/dist.h"
#include "mount/api/api_int.h"

/* The public codes are the modules' codes under strata's names. */
#define SAME(pub, mod) _Static_assert((int)(pub) == (int)(mod), #pub " is " #mod)
SAME(STRATA_E_CORRUPT, ST_ECORRUPT);
SAME(STRATA_E_FORMAT, ST_EFORMAT);
SAME(STRATA_E_VERSION, ST_EVERSION);
SAME(STRATA_E_LAYOUT, ST_ELAYOUT);
SAME(STRATA_E_NOT_STORE, ST_ENOTSTORE);
SAME(STRATA_E_BAD_NAME, ST_EBADNAME);
SAME(STRATA_E_BAD_ID, ST_EBADID);
SAME(STRATA_E_READ_ONLY, ST_EREADONLY);
SAME(STRATA_E_NOT_FOUND, IX_ENOTFOUND);
SAME(STRATA_E_EXISTS, IX_EEXIST);
SAME(STRATA_E_MISSING, IX_EMISSING);
SAME(STRATA_E_INDEX_VERSION, IX_EVERSION);
SAME(STRATA_E_INDEX_CORRUPT, IX_ECORRUPT);
SAME(STRATA_E_INDEX_BUSY, IX_EBUSY);
SAME(STRATA_E_LMDB, IX_ELMDB);
SAME(STRATA_E_AMBIGUOUS, IX_EAMBIGUOUS);
SAME(STRATA_E_BAD_REF, IX_EREF);
SAME(STRATA_E_NET, IX_ENET);
SAME(STRATA_E_TLS, IX_ETLS);
SAME(STRATA_E_AUTH, IX_EAUTH);
SAME(STRATA_E_REMOTE_MISSING, IX_EREMOTE_MISSING);
SAME(STRATA_E_HTTP, IX_EHTTP);
SAME(STRATA_E_DEADLINE, IX_EDEADLINE);
SAME(STRATA_E_POISONED, VMM_E_POISONED);
SAME(STRATA_E_GUEST_FAULT, VMM_E_GUEST_FAULT);
SAME(STRATA_E_STACK_OVERFLOW, VMM_E_STACK_OVERFLOW);
SAME(STRATA_E_ABORT, VMM_E_ABORT);
SAME(STRATA_E_BAD_HYPERCALL, VMM_E_BAD_HYPERCALL);
SAME(STRATA_E_TIMEOUT, VMM_E_TIMEOUT);
SAME(STRATA_E_CANCELLED, VMM_E_CANCELLED);
SAME(STRATA_E_SHUTDOWN, VMM_E_SHUTDOWN);
SAME(STRATA_E_BAD_ELF, VMM_E_BAD_ELF);
SAME(STRATA_E_ABI, VMM_E_ABI);
SAME(STRATA_E_NO_FUNCTION, VMM_E_NO_FUNCTION);
SAME(STRATA_E_BAD_ARGS, VMM_E_BAD_ARGS);
SAME(STRATA_E_GUEST_ERROR, VMM_E_GUEST_ERROR);
SAME(STRATA_E_TOO_BIG, VMM_E_TOO_BIG);
SAME(STRATA_E_NO_KVM, VMM_E_NO_KVM);
SAME(STRATA_E_BAD_CONFIG, VMM_E_BAD_CONFIG);
SAME(STRATA_E_UNEXPECTED_EXIT, VMM_E_UNEXPECTED_EXIT);
SAME(STRATA_E_BAD_ADDRESS, VMM_E_BAD_ADDRESS);
SAME(STRATA_E_BUSY, VMM_E_BUSY);
SAME(STRATA_E_KVM_DENIED, VMM_E_KVM_DENIED);
SAME(STRATA_E_KVM_UNBOUND, VMM_E_KVM_UNBOUND);
SAME(STRATA_E_KVM_API, VMM_E_KVM_API);
SAME(STRATA_E_KERNEL_OLD, VMM_E_KERNEL_OLD);
SAME(STRATA_E_NO_BACKEND, VMM_E_NO_BACKEND);
SAME(STRATA_E_NO_SNAPSHOT, VMM_E_NO_SNAPSHOT);
SAME(STRATA_E_BAD_SNAPSHOT, VMM_E_BAD_SNAPSHOT);
SAME(STRATA_E_LEAK, VMM_E_LEAK);
SAME(STRATA_E_BAD_POLICY, VMM_E_BAD_POLICY);
SAME(STRATA_E_NO_PAGEMAP, VMM_E_NO_PAGEMAP);
SAME(STRATA_E_STALE, VMM_E_STALE);
SAME(STRATA_E_FOREIGN, VMM_E_FOREIGN);
SAME(STRATA_E_STALE_MOUNT, FS_ESTALE_MOUNT);
SAME(STRATA_E_MOUNTED, FS_EMOUNTED);
SAME(STRATA_E_MOUNT, FS_EMOUNT);
SAME(STRATA_E_NOT_MOUNTED, FS_ENOTMOUNT);
SAME(STRATA_E_OPTION, FS_EOPTION);
SAME(STRATA_VOID, VMM_VOID);
SAME(STRATA_I64, VMM_I64);
SAME(STRATA_BYTES, VMM_BYTES);
SAME(STRATA_STR, VMM_STR);
SAME(STRATA_BACKEND_AUTO, VMM_BACKEND_AUTO);
SAME(STRATA_BACKEND_KVM, VMM_BACKEND_KVM);
SAME(STRATA_BACKEND_PROCESS, VMM_BACKEND_PROCESS);

#define STR2(x) #x
#define STR(x) STR2(x)

const char *strata_version(int *major, int *minor, int *patch)
{
	if (major)
		*major = STRATA_VERSION_MAJOR;
	if (minor)
		*minor = STRATA_VERSION_MINOR;
	if (patch)
		*patch = STRATA_VERSION_PATCH;
	return STR(STRATA_VERSION_MAJOR) "." STR(STRATA_VERSION_MINOR) "." STR(STRATA_VERSION_PATCH);
}

const char *strata_strerror(int code)
{
	return st_strerror(code);
}

/* Room for a guest's whole message and the words around it. */
static _Thread_local char errmsg[VMM_MESSAGE_MAX + 256];
/* The cause part of errmsg (api_fail_why). */
static _Thread_local char errdetail[ST_WHY_LEN * 2];

const char *strata_errmsg(void)
{
	return errmsg;
}

const char *strata_errdetail(void)
{
	return errdetail;
}

int api_fail_why(int code, const char *why, const char *fmt, ...)
{
	va_list ap;

	errmsg[0] = '\0';
	va_start(ap, fmt);
	vsnprintf(errmsg, sizeof(errmsg), fmt, ap);
	va_end(ap);
	snprintf(errdetail, sizeof(errdetail), "%s", why ? why : "");
	return code;
}

int api_fail(int code, const char *fmt, ...)
{
	va_list ap;

	errmsg[0] = '\0';
	errdetail[0] = '\0';
	if (fmt) {
		va_start(ap, fmt);
		vsnprintf(errmsg, sizeof(errmsg), fmt, ap);
		va_end(ap);
	}
	if (!errmsg[0])
		snprintf(errmsg, sizeof(errmsg), "%s", st_strerror(code));
	return code;
}

int api_fail_vmm(int code, const char *what, const struct vmm_error *err)
{
	const char *msg = err && err->code == code && err->message[0] ? err->message : st_strerror(code);

	return what ? api_fail(code, "%s: %s", what, msg) : api_fail(code, "%s", msg);
}
