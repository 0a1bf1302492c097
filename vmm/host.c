/* host.c: the host handle that owns what a program's sandboxes share (VM shells, warm sandboxes, policy, backend). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "store/sys.h"
#include "vmm/snap_int.h"

/* docs/restore-from-path.md measures what 8 of each save; the limits bound
 * memory, they are not tuned for speed. */
#define HOST_DEFAULT_SHELLS 8u
#define HOST_DEFAULT_WARM 8u

void vmm_host_config_defaults(struct vmm_host_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->shells = HOST_DEFAULT_SHELLS;
	cfg->warm = HOST_DEFAULT_WARM;
	cfg->snapdir_manifests = ST_SNAPCACHE_MANIFESTS;
	cfg->snapdir_copies = ST_SNAPCACHE_COPIES;
	cfg->snapdir_copy_bytes = ST_SNAPCACHE_COPY_BYTES;
}

static int limits_check(unsigned shells, unsigned warm, struct vmm_error *err)
{
	if (shells > VMM_HOST_SHELLS_MAX)
		return vmm_fail(err, VMM_E_BAD_CONFIG, "%u idle VM shells asked for; at most %u", shells,
				VMM_HOST_SHELLS_MAX);
	if (warm > VMM_HOST_WARM_MAX)
		return vmm_fail(err, VMM_E_BAD_CONFIG, "%u warm sandboxes asked for; at most %u", warm,
				VMM_HOST_WARM_MAX);
	return 0;
}

int vmm_host_new(const struct vmm_host_config *cfg, struct vmm_host **out, struct vmm_error *err)
{
	struct vmm_host_config def;
	struct vmm_host *h;
	char why[256];
	int rc;

	if (!cfg) {
		vmm_host_config_defaults(&def);
		cfg = &def;
	}
	if ((rc = limits_check(cfg->shells, cfg->warm, err)) < 0)
		return rc;
	if (cfg->policy && (rc = vmm_policy_check(cfg->policy, why, sizeof(why))) < 0)
		return vmm_fail(err, VMM_E_BAD_CONFIG, "reset policy: %s", why);
	if (cfg->backend != VMM_BACKEND_AUTO && !vmm_backend_of(cfg->backend))
		return vmm_fail(err, VMM_E_BAD_CONFIG, "unknown backend %d (%s)", (int)cfg->backend,
				vmm_backend_names(why, sizeof(why)));
	h = st_sys_calloc(1, sizeof(*h));
	if (!h)
		return vmm_fail(err, -ENOMEM, "out of memory");
	struct st_snapcache_limits lim = { .manifests = cfg->snapdir_manifests,
					   .copies = cfg->snapdir_copies,
					   .copy_bytes = cfg->snapdir_copy_bytes };
	if ((rc = st_snapcache_new(&lim, &h->snapcache)) < 0) {
		free(h);
		return vmm_fail(err, rc, "snapshot-directory cache: %s", st_strerror(rc));
	}
	pthread_mutex_init(&h->shell_lock, NULL);
	pthread_mutex_init(&h->warm_lock, NULL);
	h->shell_max = cfg->shells;
	h->warm_max = cfg->warm;
	if (cfg->policy)
		h->policy = *cfg->policy;
	else
		vmm_policy_defaults(&h->policy);
	h->debug = cfg->debug;
	h->backend = cfg->backend;
	atomic_init(&h->sandboxes, 0);
	/* A host is made to make sandboxes: the first one's one-time work
	 * begins now, beside what the program does before it. */
	vmm_backend_prepare(cfg->backend);
	*out = h;
	return 0;
}

int vmm_host_limits_set(struct vmm_host *h, unsigned shells, unsigned warm)
{
	int rc;

	if ((rc = limits_check(shells, warm, NULL)) < 0)
		return rc;
	pthread_mutex_lock(&h->warm_lock);
	h->warm_max = warm;
	pthread_mutex_unlock(&h->warm_lock);
	pthread_mutex_lock(&h->shell_lock);
	h->shell_max = shells;
	pthread_mutex_unlock(&h->shell_lock);
	/* Warm sandboxes first: each one destroyed may give its shell back. */
	vmm_warm_trim(h, warm);
	vmm_shell_trim(h, shells);
	return 0;
}

int vmm_host_free(struct vmm_host *h)
{
	if (!h)
		return 0;
	if (atomic_load(&h->sandboxes) > 0)
		return -EBUSY;
	if (vmm_host_default() == h)
		vmm_host_default_set(NULL);
	vmm_host_limits_set(h, 0, 0);
	st_snapcache_free(h->snapcache);
	pthread_mutex_destroy(&h->shell_lock);
	pthread_mutex_destroy(&h->warm_lock);
	free(h);
	return 0;
}

void vmm_host_stats(struct vmm_host *h, struct vmm_host_stats *out)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&h->warm_lock);
	out->warm = h->nwarm;
	out->warm_max = h->warm_max;
	pthread_mutex_unlock(&h->warm_lock);
	pthread_mutex_lock(&h->shell_lock);
	out->shells = h->nshells;
	out->shells_max = h->shell_max;
	pthread_mutex_unlock(&h->shell_lock);
	out->sandboxes = atomic_load(&h->sandboxes);
}

const struct vmm_policy *vmm_host_policy(const struct vmm_host *h)
{
	return &h->policy;
}

/* Freeing a sandbox gives it back to its host, which keeps it warm if it
 * can; otherwise it is destroyed (its VM may still become a shell). */
void vmm_sandbox_free(struct vmm_sandbox *sb)
{
	if (!sb)
		return;
	if (!vmm_warm_park(sb))
		vmm_sandbox_destroy(sb);
}
