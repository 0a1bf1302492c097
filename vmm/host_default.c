/* host_default.c: the host a sandbox whose config names none uses (the caller sets it, or none). */
#include <stdatomic.h>

#include "vmm/vmm_int.h"

static _Atomic(struct vmm_host *) fallback;

void vmm_host_default_set(struct vmm_host *h)
{
	atomic_store(&fallback, h);
}

struct vmm_host *vmm_host_default(void)
{
	return atomic_load(&fallback);
}

struct vmm_host *vmm_host_resolve(const struct vmm_config *cfg)
{
	return cfg && cfg->host ? cfg->host : atomic_load(&fallback);
}
