/* restore.c: sandboxes from a snapshot manifest and its layer files, and restore in place to another snapshot. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "store/sys.h"
#include "vmm/snap_int.h"

int vmm_layer_open_store(void *ctx, const st_id *id, int *fd)
{
	return st_blob_open(ctx, id, fd);
}

int vmm_layer_open_dir(void *ctx, const st_id *id, int *fd)
{
	return st_snapdir_layer_open(ctx, id, fd);
}

/* Everything a manifest must say for this VMM to run it. */
struct parsed {
	struct vmm_layout layout;
	struct vmm_fn *fns;
	unsigned nfns;
	struct vmm_vcpu_state vcpu;
	st_id id;
};

static int parse(const struct st_manifest *m, struct parsed *p, char *why, size_t whylen)
{
	int rc;

	memset(p, 0, sizeof(*p));
	if ((rc = st_manifest_validate(m, why, whylen)) < 0)
		return rc;
	if (m->abi_version != STRATA_ABI_VERSION) {
		snprintf(why, whylen, "the snapshot was taken with guest ABI version %u; this VMM speaks version %d",
			 m->abi_version, STRATA_ABI_VERSION);
		return VMM_E_ABI;
	}
	if ((rc = vmm_guest_from_json(m->guest, &p->layout, &p->fns, &p->nfns, why, whylen)) < 0)
		return rc;
	if (p->layout.mem_size != m->mem_size) {
		snprintf(why, whylen, "the manifest says %llu bytes of memory but its guest layout needs %llu",
			 (unsigned long long)m->mem_size, (unsigned long long)p->layout.mem_size);
		rc = VMM_E_BAD_SNAPSHOT;
		goto out_free;
	}
	if ((rc = vmm_vcpu_from_json(m->vcpu, &p->vcpu, why, whylen)) < 0)
		goto out_free;
	/* Only the user-mode state comes from the manifest: the privileged
	 * parts must be what strata writes, and are built here anyway. */
	if ((rc = vmm_x86_state_check(&p->layout, &p->vcpu, &p->vcpu, why, whylen)) < 0)
		goto out_free;
	if ((rc = st_manifest_id(m, &p->id, why, whylen)) < 0)
		goto out_free;
	return 0;
out_free:
	free(p->fns);
	p->fns = NULL;
	return rc;
}

static int dup_open(void *ctx, const st_id *id, int *fd)
{
	int d = st_sys_dup(*(const int *)ctx);

	(void)id;
	if (d < 0)
		return d;
	*fd = d;
	return 0;
}

/* Open every layer of m; those `have` (n of them) already has open are
 * reached through a dup of their fd, so both sets stay valid. */
static int layers_open(const struct st_manifest *m, const struct vmm_snap_layer *have, uint32_t nhave,
		       vmm_layer_open_fn open, void *ctx, struct vmm_snap_layer **out, char *why, size_t whylen)
{
	struct vmm_snap_layer *v = st_sys_calloc(m->nlayers + 1, sizeof(*v));
	int rc = 0;

	if (!v)
		return -ENOMEM;
	for (uint32_t i = 0; i < m->nlayers; i++)
		v[i].fd = -1;
	for (uint32_t i = 0; i < m->nlayers; i++) {
		vmm_layer_open_fn fn = open;
		void *fctx = ctx;
		for (uint32_t k = 0; k < nhave; k++)
			if (have[k].fd >= 0 && st_id_equal(&have[k].id, &m->layers[i].id)) {
				fn = dup_open;
				fctx = (void *)&have[k].fd;
				break;
			}
		rc = vmm_snap_layer_open(&m->layers[i].id, m->layers[i].pages, fn, fctx, &v[i], why, whylen);
		if (rc < 0)
			goto out_close;
	}
	*out = v;
	return 0;
out_close:
	for (uint32_t i = 0; i < m->nlayers; i++)
		vmm_snap_layer_close(&v[i]);
	free(v);
	return rc;
}

/* A snapshot's pages as its segments map them (vmm_host_pages_check). */
struct seg_view {
	const struct vmm_seg *segs;
	size_t nsegs;
	const struct vmm_snap_layer *layers;
};

static const uint8_t *seg_view_page(void *ctx, uint64_t p)
{
	const struct seg_view *v = ctx;

	return vmm_segs_page(v->segs, v->nsegs, v->layers, p);
}

/* Install m (layers open) as the sandbox's snapshot, if its pages below the
 * image are the ones strata builds (else VMM_E_BAD_SNAPSHOT with why, and
 * nothing changed). */
static int install(struct vmm_sandbox *sb, struct vmm_snap *s, const struct st_manifest *m,
		   struct vmm_snap_layer *layers, const struct parsed *p, char *why, size_t whylen)
{
	struct st_manifest *dup = NULL;
	struct vmm_seg *segs = NULL;
	size_t nsegs = 0;
	unsigned maps = 0;
	int rc;

	if ((rc = st_manifest_dup(m, &dup)) < 0)
		return rc;
	if ((rc = vmm_snap_segs(m, sb->mem_size / VMM_PAGE, &segs, &nsegs)) < 0)
		goto out_free;
	/* Page tables, descriptors, stubs and boot info are strata's own, or
	 * the snapshot is refused: no layer decides what runs at CPL 0. */
	struct seg_view view = { segs, nsegs, layers };
	if ((rc = vmm_host_pages_check(&p->layout, seg_view_page, &view, why, whylen)) < 0)
		goto out_free;
	rc = vmm_snap_remap(sb, s->segs, s->nsegs, s->layers, segs, nsegs, layers, &maps);
	s->stats.maps += maps;
	if (rc < 0) {
		sb->poisoned = true;
		goto out_free;
	}
	/* The snapshot left behind stays ready for a switch back. */
	struct vmm_snap_alt n = { .valid = true, .m = dup, .layers = layers, .segs = segs, .nsegs = nsegs,
				  .id = p->id, .vcpu = p->vcpu };
	vmm_snap_key(dup, &n.key);
	vmm_snap_set_current(s, &n, true);
	return 0;
out_free:
	free(segs);
	st_manifest_free(dup);
	return rc;
}

int vmm_snap_switch(struct vmm_sandbox *sb, struct vmm_snap *s, struct vmm_snap_alt *a)
{
	unsigned maps = 0;
	struct vmm_snap_alt n = *a;
	int rc = vmm_snap_remap(sb, s->segs, s->nsegs, s->layers, n.segs, n.nsegs, n.layers, &maps);

	s->stats.maps += maps;
	if (rc < 0) {
		sb->poisoned = true;
		return rc;
	}
	a->valid = false;  /* a kept one's contents move to the current snapshot */
	vmm_snap_set_current(s, &n, true);
	return vmm_snap_reset(sb, s);
}

int vmm_sandbox_restore_to(struct vmm_sandbox *sb, const struct st_manifest *m, vmm_layer_open_fn open, void *ctx)
{
	struct vmm_snap *s = vmm_snap_of(sb);
	struct vmm_snap_layer *layers = NULL;
	struct parsed p;
	char why[ST_WHY_LEN];
	int rc;

	if (!s)
		return -ENOMEM;
	if (sb->in_call)
		return VMM_E_BUSY;
	/* Fast paths: the current snapshot, or one kept from before. */
	st_id key;
	vmm_snap_key(m, &key);
	if (s->has_key && st_id_equal(&key, &s->key))
		return vmm_snap_reset(sb, s);
	struct vmm_snap_alt *kept = vmm_snap_alt_find(s, &key);
	if (kept)
		return vmm_snap_switch(sb, s, kept);
	if ((rc = parse(m, &p, why, sizeof(why))) < 0) {
		/* Refused before anything changed: poisoned or not, as it was. */
		bool poisoned = sb->poisoned;
		vmm_run_fail(sb, rc, "cannot restore: %s", why);
		sb->poisoned = poisoned;
		return rc;
	}
	free(p.fns);
	if (memcmp(&p.layout, &sb->layout, sizeof(p.layout)) != 0) {
		sb->err.code = VMM_E_BAD_SNAPSHOT;
		snprintf(sb->err.message, sizeof(sb->err.message),
			 "cannot restore: the snapshot's guest memory layout differs from this sandbox's");
		return VMM_E_BAD_SNAPSHOT;
	}
	if (s->has_id && st_id_equal(&s->id, &p.id))
		return vmm_snap_reset(sb, s);
	rc = layers_open(m, s->layers, s->m ? s->m->nlayers : 0, open, ctx, &layers, why, sizeof(why));
	if (rc < 0) {
		vmm_run_fail(sb, rc, "cannot restore: %s", why);
		return rc;
	}
	why[0] = '\0';
	if ((rc = install(sb, s, m, layers, &p, why, sizeof(why))) < 0) {
		for (uint32_t i = 0; i < m->nlayers; i++)
			vmm_snap_layer_close(&layers[i]);
		free(layers);
		if (why[0]) {
			/* Refused before anything changed: poisoned or not, as it was. */
			bool poisoned = sb->poisoned;
			vmm_run_fail(sb, rc, "cannot restore: %s", why);
			sb->poisoned = poisoned;
		}
		return rc;
	}
	return vmm_snap_reset(sb, s);
}

int vmm_sandbox_from_snapshot(const struct st_manifest *m, vmm_layer_open_fn open, void *ctx,
			      const struct vmm_config *cfg, struct vmm_sandbox **out, struct vmm_error *err)
{
	struct vmm_sandbox *sb = NULL;
	struct vmm_snap_layer *layers = NULL;
	struct vmm_snap *s;
	struct parsed p;
	char why[ST_WHY_LEN] = "";
	int rc;

	if (!m || !open)
		return vmm_fail(err, -EINVAL, "no manifest or layer opener");
	/* A freed sandbox kept on this very snapshot and its layer files
	 * (warm.c) is ready as it is. */
	if ((*out = vmm_warm_take(m, open, ctx, cfg)))
		return 0;
	if ((rc = parse(m, &p, why, sizeof(why))) < 0)
		return vmm_fail(err, rc, "refusing the snapshot: %s", why);
	const struct vmm_layout *l = &p.layout;
	if (!vmm_sandbox_cfg_fits(l, cfg)) {
		rc = vmm_fail(err, VMM_E_BAD_SNAPSHOT,
			  "refusing the snapshot: it has heap %llu, input %llu, output %llu bytes; the configuration asks otherwise",
			  (unsigned long long)l->heap_size, (unsigned long long)l->in_size,
			  (unsigned long long)l->out_size);
		goto out_free_fns;
	}
	sb = st_sys_calloc(1, sizeof(*sb));
	if (!sb) {
		rc = vmm_fail(err, -ENOMEM, "out of memory");
		goto out_free_fns;
	}
	sb->layout = *l;
	vmm_sandbox_cfg_apply(sb, cfg);
	pthread_mutex_init(&sb->lock, NULL);
	sb->mem_size = l->mem_size;
	sb->fns = p.fns;
	sb->nfns = p.nfns;
	p.fns = NULL;
	if ((rc = vmm_backend_pick(sb->cfg.host, sb->cfg.backend, &sb->be, err)) < 0)
		goto out_free_sb;
	sb->cfg.backend = sb->be->kind;
	bool ready = false;
	if ((rc = sb->be->mem_new(sb, &ready)) < 0) {
		rc = vmm_fail(err, rc, "cannot reserve %llu bytes of guest memory: %s",
			  (unsigned long long)l->mem_size, strerror(-rc));
		goto out_free_sb;
	}
	if (!(s = vmm_snap_of(sb))) {
		rc = vmm_fail(err, -ENOMEM, "out of memory");
		goto out_free_sb;
	}
	if ((rc = layers_open(m, NULL, 0, open, ctx, &layers, why, sizeof(why))) < 0) {
		vmm_fail(err, rc, "refusing the snapshot: %s", why[0] ? why : vmm_strerror(rc));
		goto out_free_sb;
	}
	why[0] = '\0';
	if ((rc = install(sb, s, m, layers, &p, why, sizeof(why))) < 0) {
		for (uint32_t i = 0; i < m->nlayers; i++)
			vmm_snap_layer_close(&layers[i]);
		free(layers);
		if (why[0])
			vmm_fail(err, rc, "refusing the snapshot: %s", why);
		else
			vmm_fail(err, rc, "cannot map the snapshot's layers: %s", strerror(-rc));
		goto out_free_sb;
	}
	if ((rc = sb->be->start(sb, ready, err)) < 0)
		goto out_free_sb;
	if ((rc = sb->be->set_state(sb, &s->vcpu)) < 0) {
		vmm_fail(err, rc, "cannot load the snapshot's vCPU state: %s", strerror(-rc));
		goto out_free_sb;
	}
	vmm_sandbox_held(sb);
	sb->ws_fresh = true;
	*out = sb;
	return 0;
out_free_sb:
	vmm_sandbox_destroy(sb);
out_free_fns:
	free(p.fns);
	return rc;
}
