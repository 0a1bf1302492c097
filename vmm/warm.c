/* warm.c: freed sandboxes a host keeps ready on their snapshot and hands out again for the same snapshot and files. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/sys.h"
#include "vmm/snap_int.h"

/*
 * A kept sandbox holds the private pages its runs wrote (a restore rewrites
 * them in place rather than dropping them), so only sandboxes with at most
 * this many are kept: 1,024 pages, 4 MiB, times the host's limit (8 by
 * default) bounds what idle sandboxes can hold. docs/restore-from-path.md
 * measures what a kept one saves.
 */
#define WARM_MAX_PAGES 1024
#define WARM_LIMIT VMM_HOST_WARM_MAX

/* The host's limit now. */
static unsigned warm_cap(struct vmm_host *h)
{
	pthread_mutex_lock(&h->warm_lock);
	unsigned max = h->warm_max;
	pthread_mutex_unlock(&h->warm_lock);
	return max;
}

/* Remove h->warm[i] keeping the order (caller holds warm_lock). */
static struct vmm_sandbox *warm_remove(struct vmm_host *h, unsigned i)
{
	struct vmm_sandbox *sb = h->warm[i];

	memmove(h->warm + i, h->warm + i + 1, (h->nwarm - i - 1) * sizeof(*h->warm));
	h->nwarm--;
	return sb;
}

/* Do two snapshots map the very same files (device and inode, in order)? */
static bool same_layer_files(const struct vmm_snap *a, const struct vmm_snap *b)
{
	if (!a->m || !b->m || a->m->nlayers != b->m->nlayers)
		return false;
	for (uint32_t i = 0; i < a->m->nlayers; i++) {
		struct stat x, y;
		if (st_sys_fstat(a->layers[i].fd, &x) < 0 || st_sys_fstat(b->layers[i].fd, &y) < 0 || x.st_dev != y.st_dev ||
		    x.st_ino != y.st_ino)
			return false;
	}
	return true;
}

/*
 * Keep sb, the most recently freed. One kept for the same content over
 * other files is dropped: that content now comes from elsewhere (a private
 * copy made per snapshot-directory handle never matches again once its
 * handle is gone). At the limit, the one kept longest makes room: the last
 * one freed is the likeliest to be asked for again. false if the host's
 * limit (read under the lock: it may change at any time) is 0.
 */
static bool warm_push(struct vmm_host *h, struct vmm_sandbox *sb)
{
	struct vmm_sandbox *drop[WARM_LIMIT + 1];
	unsigned ndrop = 0;

	pthread_mutex_lock(&h->warm_lock);
	unsigned max = h->warm_max;
	if (max == 0) {
		pthread_mutex_unlock(&h->warm_lock);
		return false;
	}
	for (unsigned i = h->nwarm; i-- > 0;)
		if (st_id_equal(&h->warm[i]->snap->key, &sb->snap->key) && !same_layer_files(h->warm[i]->snap, sb->snap))
			drop[ndrop++] = warm_remove(h, i);
	if (h->nwarm >= max || h->nwarm >= WARM_LIMIT)
		drop[ndrop++] = warm_remove(h, 0);
	h->warm[h->nwarm++] = sb;
	pthread_mutex_unlock(&h->warm_lock);
	for (unsigned i = 0; i < ndrop; i++)
		vmm_sandbox_destroy(drop[i]);
	return true;
}

bool vmm_warm_park(struct vmm_sandbox *sb)
{
	struct vmm_snap *s = sb->snap;
	struct vmm_host *h = sb->cfg.host;

	/* A sandbox on an in-memory snapshot: no manifest asks for it again. */
	if (!h || warm_cap(h) == 0 || sb->poisoned || sb->in_call || !sb->be || !sb->be->live(sb) || !sb->mem || !s || !s->have_vcpu ||
	    !s->has_key || s->pending || (s->has_id && vmm_memsnap_id(&s->id)))
		return false;
	/* Back to the snapshot now, so a take needs no restore; the scan
	 * also says how many private pages it would keep. */
	uint64_t before = s->stats.pages_scanned;
	if (vmm_snap_reset(sb, s) < 0 || s->stats.pages_scanned - before > WARM_MAX_PAGES)
		return false;
	/* Nothing of this user stays: host functions, last error, a kill. */
	for (unsigned i = 0; i < sb->nhfns; i++)
		free(sb->hfns[i].name);
	free(sb->hfns);
	sb->hfns = NULL;
	sb->nhfns = sb->hfns_cap = 0;
	vmm_error_clear(&sb->err);
	atomic_store(&sb->kill_pending, false);
	memset(&s->stats, 0, sizeof(s->stats));
	vmm_snap_settings_reset(s, h); /* policy and debug mode as a new sandbox's */
	s->mem_owner = 0;              /* its in-memory snapshots are not the next user's */
	/* Uncounted before it is published: once in the list, another thread's
	 * warm_push or trim may destroy it at any time. */
	vmm_sandbox_unheld(sb);
	return warm_push(h, sb);
}

/* Does every layer of m open to the file sb's snapshot maps? */
static bool same_files(const struct vmm_snap *s, const struct st_manifest *m, vmm_layer_open_fn opener, void *ctx)
{
	if (!s->m || s->m->nlayers != m->nlayers)
		return false;
	for (uint32_t i = 0; i < m->nlayers; i++) {
		struct stat a, b;
		int fd = -1;
		if (!st_id_equal(&s->layers[i].id, &m->layers[i].id) || opener(ctx, &m->layers[i].id, &fd) < 0)
			return false;
		bool same = st_sys_fstat(fd, &a) == 0 && st_sys_fstat(s->layers[i].fd, &b) == 0 &&
			    a.st_dev == b.st_dev && a.st_ino == b.st_ino;
		(void)st_sys_close(fd);
		if (!same)
			return false;
	}
	return true;
}

struct vmm_sandbox *vmm_warm_take(const struct st_manifest *m, vmm_layer_open_fn opener, void *ctx,
				  const struct vmm_config *cfg)
{
	struct vmm_sandbox *cand[WARM_LIMIT], *sb = NULL;
	struct vmm_host *h = vmm_host_resolve(cfg);
	unsigned n = 0;
	st_id key, id;

	if (!h)
		return NULL;
	pthread_mutex_lock(&h->warm_lock);
	bool any = h->nwarm > 0;
	pthread_mutex_unlock(&h->warm_lock);
	if (!any)
		return NULL;
	vmm_snap_key(m, &key);
	/* Every kept one with this content; the checks below open files, so
	 * they run outside the lock. */
	pthread_mutex_lock(&h->warm_lock);
	for (unsigned i = h->nwarm; i-- > 0;)
		if (h->warm[i]->mem_size == m->mem_size && st_id_equal(&h->warm[i]->snap->key, &key))
			cand[n++] = warm_remove(h, i);
	pthread_mutex_unlock(&h->warm_lock);
	/* The same content key and the very same layer files: the state it
	 * was restored to is exactly what a new sandbox would be built from.
	 * The id is recomputed: labels are not in the key. Any thread may
	 * take any of them (a process-backend child lives as long as the
	 * process, proc.c). */
	enum vmm_backend_kind kind = vmm_backend_resolve(h, cfg ? cfg->backend : VMM_BACKEND_AUTO);
	bool usable = n > 0 && vmm_sandbox_cfg_fits(&cand[0]->layout, cfg);
	for (unsigned i = 0; i < n; i++) {
		if (!sb && usable && cand[i]->be->kind == kind && same_files(cand[i]->snap, m, opener, ctx))
			sb = cand[i];
		else if (!warm_push(h, cand[i])) /* back: no more than were there, unless the limit fell */
			vmm_sandbox_destroy(cand[i]);
	}
	if (sb && st_manifest_id(m, &id, NULL, 0) < 0) {
		if (!warm_push(h, sb))
			vmm_sandbox_destroy(sb);
		sb = NULL;
	}
	if (!sb)
		return NULL;
	sb->snap->id = id;
	sb->snap->has_id = true;
	vmm_sandbox_cfg_apply(sb, cfg);
	vmm_sandbox_held(sb);
	return sb;
}

void vmm_warm_trim(struct vmm_host *h, unsigned max)
{
	for (;;) {
		struct vmm_sandbox *sb = NULL;
		pthread_mutex_lock(&h->warm_lock);
		if (h->nwarm > max)
			sb = warm_remove(h, 0);
		pthread_mutex_unlock(&h->warm_lock);
		if (!sb)
			return;
		vmm_sandbox_destroy(sb);
	}
}
