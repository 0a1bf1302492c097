/* pool.c: N sandboxes restored from one snapshot, handed out and put back restored. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"
#include "store/sys.h"
#include "vmm/vmm_int.h"

struct vmm_pool {
	pthread_mutex_t lock;
	struct st_manifest *m;   /* kept to replace a sandbox whose restore failed */
	vmm_layer_open_fn open;
	void *ctx;
	struct vmm_config cfg;
	struct vmm_sandbox **sb;
	bool *busy;
	unsigned n;
};

int vmm_pool_new(const struct st_manifest *m, vmm_layer_open_fn open, void *ctx, const struct vmm_config *cfg,
		 unsigned n, struct vmm_pool **out, struct vmm_error *err)
{
	struct vmm_pool *p;
	int rc;

	if (n == 0 || n > VMM_POOL_MAX) {
		if (err) {
			memset(err, 0, sizeof(*err));
			err->code = VMM_E_BAD_CONFIG;
		}
		return VMM_E_BAD_CONFIG;
	}
	p = st_sys_calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->lock, NULL);
	p->open = open;
	p->ctx = ctx;
	if (cfg)
		p->cfg = *cfg;
	p->sb = st_sys_calloc(n, sizeof(*p->sb));
	p->busy = st_sys_calloc(n, sizeof(*p->busy));
	if (!p->sb || !p->busy || (rc = st_manifest_dup(m, &p->m)) < 0) {
		rc = -ENOMEM;
		goto out_free;
	}
	for (p->n = 0; p->n < n; p->n++) {
		rc = vmm_sandbox_from_snapshot(m, open, ctx, cfg, &p->sb[p->n], err);
		if (rc < 0)
			goto out_free;
	}
	*out = p;
	return 0;
out_free:
	vmm_pool_free(p);
	return rc;
}

void vmm_pool_free(struct vmm_pool *p)
{
	if (!p)
		return;
	for (unsigned i = 0; p->sb && i < p->n; i++)
		vmm_sandbox_free(p->sb[i]);
	free(p->sb);
	free(p->busy);
	st_manifest_free(p->m);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

unsigned vmm_pool_size(const struct vmm_pool *p)
{
	return p->n;
}

struct vmm_sandbox *vmm_pool_at(const struct vmm_pool *p, unsigned i)
{
	return i < p->n ? p->sb[i] : NULL;
}

int vmm_pool_get(struct vmm_pool *p, struct vmm_sandbox **out)
{
	int rc = -EAGAIN;

	pthread_mutex_lock(&p->lock);
	for (unsigned i = 0; i < p->n; i++) {
		if (!p->busy[i]) {
			p->busy[i] = true;
			*out = p->sb[i];
			rc = 0;
			break;
		}
	}
	pthread_mutex_unlock(&p->lock);
	return rc;
}

int vmm_pool_put(struct vmm_pool *p, struct vmm_sandbox *sb)
{
	unsigned i;
	bool out;

	pthread_mutex_lock(&p->lock);
	for (i = 0; i < p->n && p->sb[i] != sb; i++)
		;
	out = i < p->n && p->busy[i];
	pthread_mutex_unlock(&p->lock);
	if (!out)
		return -EINVAL; /* not this pool's, or not checked out */
	/* Restore outside the lock: other sandboxes stay available meanwhile.
	 * One its user moved onto an in-memory snapshot (no store id) goes
	 * back to the pool's. */
	st_id cur;
	int rc = vmm_sandbox_snapshot_id(sb, &cur) ? vmm_sandbox_restore(sb)
						   : vmm_sandbox_restore_to(sb, p->m, p->open, p->ctx);
	if (rc < 0) {
		/* A sandbox that cannot be restored is replaced by a fresh one. */
		struct vmm_sandbox *fresh;
		rc = vmm_sandbox_from_snapshot(p->m, p->open, p->ctx, &p->cfg, &fresh, NULL);
		if (rc < 0)
			return rc; /* stays checked out: the caller still owns it */
		vmm_sandbox_destroy(sb); /* not kept warm: its restore just failed */
		pthread_mutex_lock(&p->lock);
		p->sb[i] = fresh;
		pthread_mutex_unlock(&p->lock);
	}
	pthread_mutex_lock(&p->lock);
	p->busy[i] = false;
	pthread_mutex_unlock(&p->lock);
	return 0;
}
