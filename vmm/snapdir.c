/* snapdir.c: sandboxes from a snapshot directory: the store opens it (store/snapopen.c), the VMM maps the fds it gets. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "store/store.h"
#include "vmm/vmm_int.h"

struct vmm_snapdir {
	struct st_snapdir *sd;
};

/*
 * The parsed manifests, private copies and mount answer every handle of the
 * process shares (st_snapcache, store.h), made at first use with the
 * store's default limits. If it cannot be made, opens keep nothing.
 */
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static struct st_snapcache *cache;

static void cache_make(void)
{
	if (st_snapcache_new(NULL, &cache) < 0)
		cache = NULL;
}

static struct st_snapcache *process_cache(void)
{
	pthread_once(&cache_once, cache_make);
	return cache;
}

void vmm_snapdir_caches_drop(void)
{
	st_snapcache_drop(process_cache());
}

int vmm_snapdir_open(const char *path, unsigned flags, struct vmm_snapdir **out, struct vmm_error *err)
{
	char why[ST_WHY_LEN];
	struct vmm_snapdir *d;
	unsigned sflags = (flags & VMM_SNAPDIR_VERIFY ? ST_SNAPDIR_VERIFY : 0) |
			  (flags & VMM_SNAPDIR_VIA_FUSE ? ST_SNAPDIR_VIA_FUSE : 0) |
			  (flags & VMM_SNAPDIR_MAP_FILES ? ST_SNAPDIR_MAP_FILES : 0);
	int rc;

	if (!(d = calloc(1, sizeof(*d))))
		return vmm_fail(err, -ENOMEM, "out of memory");
	if ((rc = st_snapdir_open(path, sflags, process_cache(), &d->sd, why, sizeof(why))) < 0) {
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

int vmm_snapdir_layer_open(void *ctx, const void *id, int *fd)
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
