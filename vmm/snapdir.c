/* snapdir.c: sandboxes from a snapshot directory: the store opens it (store/snapopen.c), the VMM maps the fds it gets. */
#include <errno.h>
#include <stdlib.h>

#include "store/store.h"
#include "store/sys.h"
#include "vmm/vmm_int.h"

struct vmm_snapdir {
	struct st_snapdir *sd;
};

/* The parsed manifests, private copies and mount answer that handles opened
 * with host share: the host's st_snapcache (host NULL: the default host's;
 * no host at all: none, every open reads and copies anew). */
static struct st_snapcache *host_cache(struct vmm_host *host)
{
	if (!host)
		host = vmm_host_default();
	return host ? host->snapcache : NULL;
}

void vmm_snapdir_caches_drop(struct vmm_host *host)
{
	st_snapcache_drop(host_cache(host));
}

int vmm_snapdir_open(struct vmm_host *host, const char *path, unsigned flags, struct vmm_snapdir **out,
		     struct vmm_error *err)
{
	char why[ST_WHY_LEN];
	struct vmm_snapdir *d;
	unsigned sflags = (flags & VMM_SNAPDIR_VERIFY ? ST_SNAPDIR_VERIFY : 0) |
			  (flags & VMM_SNAPDIR_VIA_FUSE ? ST_SNAPDIR_VIA_FUSE : 0) |
			  (flags & VMM_SNAPDIR_MAP_FILES ? ST_SNAPDIR_MAP_FILES : 0);
	int rc;

	if (!(d = st_sys_calloc(1, sizeof(*d))))
		return vmm_fail(err, -ENOMEM, "out of memory");
	if ((rc = st_snapdir_open(path, sflags, host_cache(host), &d->sd, why, sizeof(why))) < 0) {
		free(d);
		/* The store's format codes (a bad manifest, a short or corrupted
		 * layer) are this module's "bad snapshot"; -errno passes through. */
		return vmm_fail(err, rc <= ST_E_FIRST && rc >= ST_E_LAST ? VMM_E_BAD_SNAPSHOT : rc, "%s", why);
	}
	*out = d;
	return 0;
}

void vmm_snapdir_close(struct vmm_snapdir *d)
{
	if (!d)
		return;
	st_snapdir_close(d->sd);
	free(d);
}

const struct st_manifest *vmm_snapdir_manifest(const struct vmm_snapdir *d)
{
	return st_snapdir_manifest(d->sd);
}

unsigned vmm_snapdir_direct_layers(const struct vmm_snapdir *d)
{
	return st_snapdir_direct_layers(d->sd);
}

bool vmm_snapdir_on_mount(const struct vmm_snapdir *d)
{
	return st_snapdir_on_mount(d->sd);
}

int vmm_snapdir_layer_open(void *ctx, const st_id *id, int *fd)
{
	const struct vmm_snapdir *d = ctx;

	return st_snapdir_layer_dup(d->sd, id, fd);
}

int vmm_sandbox_from_snapdir(const struct vmm_snapdir *d, const struct vmm_config *cfg, struct vmm_sandbox **out,
			     struct vmm_error *err)
{
	return vmm_sandbox_from_snapshot(st_snapdir_manifest(d->sd), vmm_snapdir_layer_open, (void *)d, cfg, out,
					 err);
}
