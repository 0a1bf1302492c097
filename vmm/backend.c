/* backend.c: choosing a backend (vmm/kvm/ and vmm/proc/ hold the backends themselves). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "vmm/vmm_int.h"

/*
 * The backends, in the order AUTO prefers them: the one list that names,
 * parses, chooses and validates backends. AUTO takes the first whose check
 * passes; the last is what it falls back to unchecked (its check runs when
 * a sandbox picks it).
 */
static const struct vmm_backend *const backends[] = { &vmm_backend_kvm, &vmm_backend_process };
#define NBACKENDS (sizeof(backends) / sizeof(backends[0]))

const struct vmm_backend *vmm_backend_of(enum vmm_backend_kind kind)
{
	for (size_t i = 0; i < NBACKENDS; i++)
		if (backends[i]->kind == kind)
			return backends[i];
	return NULL;
}

const char *vmm_backend_name(enum vmm_backend_kind kind)
{
	const struct vmm_backend *be = vmm_backend_of(kind);

	return kind == VMM_BACKEND_AUTO ? "auto" : be ? be->name : "unknown";
}

int vmm_backend_parse(const char *name, enum vmm_backend_kind *out)
{
	if (!name)
		return -EINVAL;
	if (strcmp(name, "auto") == 0) {
		*out = VMM_BACKEND_AUTO;
		return 0;
	}
	for (size_t i = 0; i < NBACKENDS; i++) {
		if (strcmp(name, backends[i]->name) == 0) {
			*out = backends[i]->kind;
			return 0;
		}
	}
	return -EINVAL;
}

const char *vmm_backend_names(char *buf, size_t len)
{
	size_t at = (size_t)snprintf(buf, len, "auto");

	for (size_t i = 0; i < NBACKENDS && at < len; i++)
		at += (size_t)snprintf(buf + at, len - at, "%s%s", i + 1 == NBACKENDS ? " or " : ", ", backends[i]->name);
	return buf;
}

void vmm_backend_prepare(enum vmm_backend_kind kind)
{
	/* AUTO: the first in the list, whose check AUTO makes first. */
	const struct vmm_backend *be = kind == VMM_BACKEND_AUTO ? backends[0] : vmm_backend_of(kind);

	if (be && be->prepare)
		be->prepare();
}

/* What AUTO means with no host choosing: the first backend that can run
 * here, else the last. */
static const struct vmm_backend *machine_backend(void)
{
	for (size_t i = 0; i + 1 < NBACKENDS; i++)
		if (backends[i]->check(NULL) == 0)
			return backends[i];
	return backends[NBACKENDS - 1];
}

enum vmm_backend_kind vmm_backend_resolve(const struct vmm_host *host, enum vmm_backend_kind want)
{
	if (want == VMM_BACKEND_AUTO && !host)
		host = vmm_host_default();
	if (want == VMM_BACKEND_AUTO && host)
		want = host->backend;
	return want != VMM_BACKEND_AUTO ? want : machine_backend()->kind;
}

int vmm_backend_pick(const struct vmm_host *host, enum vmm_backend_kind want, const struct vmm_backend **out,
		     struct vmm_error *err)
{
	const struct vmm_backend *be;
	struct vmm_error why;

	/* host is the sandbox's, already resolved: NULL means none. */
	if (want == VMM_BACKEND_AUTO && host)
		want = host->backend;
	be = want != VMM_BACKEND_AUTO ? vmm_backend_of(want) : machine_backend();
	if (!be)
		return vmm_fail(err, -EINVAL, "unknown backend %d", (int)want);
	/* AUTO took any backend but the last because its check passed. */
	if ((want != VMM_BACKEND_AUTO || be == backends[NBACKENDS - 1]) && be->check(&why) < 0)
		return vmm_fail(err, VMM_E_NO_BACKEND, "the %s backend cannot run here: %s (%s)", be->name, why.message,
				want == VMM_BACKEND_AUTO ? be->auto_hint : be->hint);
	*out = be;
	return 0;
}

enum vmm_backend_kind vmm_sandbox_backend(const struct vmm_sandbox *sb)
{
	return sb->be ? sb->be->kind : backends[0]->kind;
}
