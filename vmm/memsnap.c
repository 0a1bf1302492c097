/* memsnap.c: in-memory snapshots: a restore point in a sealed memfd over the current snapshot's layers, and restores to it. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "store/sys.h"
#include "vmm/snap_int.h"

/*
 * How it works (docs/restore.md, "In-memory snapshots"):
 * - Taking one is a capture whose layer is a sealed memfd instead of a
 *   store blob, rebased at once: the pages that differ from the current
 *   snapshot are written into the memfd, the new snapshot is the current
 *   one's ranges with those pages on top, and the sandbox runs on it (on
 *   KVM those pages are mapped from the memfd copy-on-write again, as a
 *   rebase maps a new blob; the process backend's shared memory already
 *   holds them). The next restore finds only what was written since.
 * - The snapshot object holds its manifest (ranges and layer ids, no
 *   description: nothing parses it), its segments, the vCPU state and a
 *   descriptor of each layer of its own; the sandbox holds its own
 *   descriptors and read-only mappings of the snapshot it runs on and of
 *   those it left (the alternates of snap_int.h), so either may go first.
 * - Restoring the current one is vmm_snap_reset; another is a switch
 *   (vmm_snap_switch) to the kept alternate, or to a copy built from the
 *   object: layers reached through its descriptors, no parsing, no checks
 *   of what strata itself recorded.
 * - Ids and keys come from a process-wide counter under a prefix that a
 *   content hash never starts with in practice (2^-64), so no manifest of
 *   a store matches one; vmm_memsnap_id tells them apart.
 */

struct vmm_memsnap {
	atomic_uint refs;
	uint64_t owner;                 /* vmm_snap.mem_owner of the sandbox life it was taken from */
	st_id key, id;
	struct st_manifest *m;          /* layers and ranges */
	struct vmm_snap_layer *layers;  /* parallel to m->layers: fds of its own, no mappings */
	struct vmm_seg *segs;
	size_t nsegs;
	struct vmm_vcpu_state vcpu;
	uint64_t own_pages;             /* pages in memfd layers */
};

static const uint8_t MEM_PREFIX[8] = { 's', 't', 'r', 'a', 't', 'a', 0x00, 0x6d };
static atomic_uint_fast64_t next_serial = 1;

bool vmm_memsnap_id(const st_id *id)
{
	return memcmp(id->b, MEM_PREFIX, sizeof(MEM_PREFIX)) == 0;
}

static void memsnap_id_new(st_id *id)
{
	uint64_t n = atomic_fetch_add(&next_serial, 1);

	memcpy(id->b, MEM_PREFIX, sizeof(MEM_PREFIX));
	memcpy(id->b + sizeof(MEM_PREFIX), &n, sizeof(n));
}

/* The pages of c's new layer, in its order, into a sealed memfd mapped
 * read-only in *out. */
static int layer_write(struct vmm_sandbox *sb, const struct vmm_changes *c, struct vmm_snap_layer *out)
{
	const struct vmm_segv *src = vmm_changes_new(c);
	int fd = st_sys_memfd_create("strata-memsnap", MFD_ALLOW_SEALING), rc;

	if (fd < 0)
		return fd;
	if ((rc = st_sys_ftruncate(fd, (off_t)(c->new_pages * VMM_PAGE))) < 0)
		goto out_close;
	for (size_t i = 0; i < src->n; i++) {
		const struct vmm_seg *g = &src->v[i];
		if (g->layer == VMM_NEW_LAYER &&
		    (rc = st_sys_write_all(fd, sb->mem + g->gpage * VMM_PAGE, g->npages * VMM_PAGE)) < 0)
			goto out_close;
	}
	if ((rc = st_sys_add_seals(fd, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL)) < 0)
		goto out_close;
	void *map = st_sys_mmap(NULL, c->new_pages * VMM_PAGE, PROT_READ, MAP_SHARED, fd, 0, &rc);
	if (!map)
		goto out_close;
	memsnap_id_new(&out->id);
	out->pages = c->new_pages;
	out->fd = fd;
	out->src = map;
	out->on_fuse = false;
	return 0;
out_close:
	st_sys_close(fd);
	return rc;
}

static void layers_close(struct vmm_snap_layer *l, uint32_t n)
{
	for (uint32_t i = 0; l && i < n; i++)
		vmm_snap_layer_close(&l[i]);
	free(l);
}

static void memsnap_destroy(struct vmm_memsnap *ms)
{
	layers_close(ms->layers, ms->m ? ms->m->nlayers : 0);
	st_manifest_free(ms->m);
	free(ms->segs);
	free(ms);
}

/* The object for the sandbox's snapshot a (just built): its own copies of
 * manifest and segments, a descriptor of each layer. */
static int memsnap_new(const struct vmm_snap *s, const struct vmm_snap_alt *a, struct vmm_memsnap **out)
{
	struct vmm_memsnap *ms = st_sys_calloc(1, sizeof(*ms));
	int rc;

	if (!ms)
		return -ENOMEM;
	atomic_init(&ms->refs, 1);
	ms->owner = s->mem_owner;
	ms->key = a->key;
	ms->id = a->id;
	ms->vcpu = a->vcpu;
	ms->nsegs = a->nsegs;
	if ((rc = st_manifest_dup(a->m, &ms->m)) < 0)
		goto out_free;
	ms->segs = st_sys_malloc(a->nsegs * sizeof(*ms->segs));
	ms->layers = st_sys_calloc(a->m->nlayers + 1, sizeof(*ms->layers));
	if (!ms->segs || !ms->layers) {
		rc = -ENOMEM;
		goto out_free;
	}
	memcpy(ms->segs, a->segs, a->nsegs * sizeof(*ms->segs));
	for (uint32_t i = 0; i < a->m->nlayers; i++)
		ms->layers[i].fd = -1;
	for (uint32_t i = 0; i < a->m->nlayers; i++) {
		const struct vmm_snap_layer *l = &a->layers[i];
		if ((ms->layers[i].fd = st_sys_dup(l->fd)) < 0) {
			rc = ms->layers[i].fd;
			goto out_free;
		}
		ms->layers[i].id = l->id;
		ms->layers[i].pages = l->pages;
		ms->layers[i].on_fuse = l->on_fuse;
		if (vmm_memsnap_id(&l->id))
			ms->own_pages += l->pages;
	}
	*out = ms;
	return 0;
out_free:
	memsnap_destroy(ms);
	return rc;
}

/* The checks both calls start with: arguments, the snapshot state, no call running. */
static int begin(struct vmm_sandbox *sb, const void *arg, struct vmm_snap **s)
{
	if (!sb || !arg)
		return -EINVAL;
	if (!(*s = vmm_snap_of(sb)))
		return -ENOMEM;
	return sb->in_call ? VMM_E_BUSY : 0;
}

int vmm_sandbox_snapshot_mem(struct vmm_sandbox *sb, struct vmm_memsnap **out)
{
	struct vmm_snap *s;
	struct vmm_changes c = { 0 };
	struct vmm_snap_layer nl = { .fd = -1 }, *layers = NULL;
	struct vmm_memsnap *ms = NULL;
	struct vmm_snap_alt n = { .valid = true };
	int rc;

	if ((rc = begin(sb, out, &s)) < 0)
		return rc;
	if (sb->poisoned)
		return VMM_E_POISONED;
	if (!s->mem_owner)
		s->mem_owner = atomic_fetch_add(&next_serial, 1);
	/* The privileged parts are rebuilt from the layout, as for a capture. */
	if ((rc = sb->be->get_state(sb, &n.vcpu)) < 0)
		return rc;
	vmm_x86_user_state(&sb->layout, &n.vcpu, &n.vcpu);
	if ((rc = vmm_changes_find(sb, s, false, &c)) < 0)
		return rc;
	if (c.new_pages && (rc = layer_write(sb, &c, &nl)) < 0)
		goto out_free;
	if ((rc = vmm_changes_manifest(sb, s, &c, &nl.id, false, &n.m)) < 0)
		goto out_free;
	if ((rc = vmm_snap_segs(n.m, sb->mem_size / VMM_PAGE, &n.segs, &n.nsegs)) < 0)
		goto out_free;
	/* Each layer: the memfd just written, or the current snapshot's (the
	 * same one, taken over as a rebase does). */
	if (!(layers = st_sys_calloc(n.m->nlayers + 1, sizeof(*layers)))) {
		rc = -ENOMEM;
		goto out_free;
	}
	for (uint32_t i = 0; i < n.m->nlayers; i++) {
		const st_id *lid = &n.m->layers[i].id;
		layers[i].fd = -1;
		if (nl.fd >= 0 && st_id_equal(lid, &nl.id))
			layers[i] = nl;
		for (uint32_t k = 0; layers[i].fd < 0 && s->m && k < s->m->nlayers; k++)
			if (s->layers[k].fd >= 0 && st_id_equal(lid, &s->layers[k].id))
				layers[i] = s->layers[k];
		if (layers[i].fd < 0) {
			rc = -EIO;  /* a layer of the manifest that neither has: cannot happen */
			goto out_free;
		}
	}
	n.layers = layers;
	memsnap_id_new(&n.id);
	memsnap_id_new(&n.key);
	if ((rc = memsnap_new(s, &n, &ms)) < 0)
		goto out_free;
	/* Shared memory (process backend) already holds the point: nothing to
	 * map, and nothing differs from it now. */
	if (sb->be->private_pages) {
		unsigned maps = 0;
		rc = vmm_snap_remap(sb, s->segs, s->nsegs, s->layers, n.segs, n.nsegs, layers, &maps);
		s->stats.maps += maps;
		if (rc < 0) {
			/* Memory now mixes both mappings: the sandbox cannot be trusted. */
			sb->poisoned = true;
			goto out_free;
		}
	} else if (sb->be->dirty_clear) {
		sb->be->dirty_clear(sb);
	}
	st_manifest_free(s->pending);
	s->pending = NULL;
	vmm_snap_layer_close(&s->pending_layer);
	vmm_snap_set_current(s, &n, false);
	s->stats.pages_captured += c.new_pages;
	sb->ws_fresh = false;
	vmm_changes_free(&c);
	*out = ms;
	return 0;
out_free:
	if (ms)
		memsnap_destroy(ms);
	free(layers);  /* the current snapshot's stay its own */
	vmm_snap_layer_close(&nl);
	st_manifest_free(n.m);
	free(n.segs);
	vmm_changes_free(&c);
	return rc;
}

/* A copy of ms for the sandbox to switch to: its layers through ms's
 * descriptors, each mapped read-only. */
static int alt_build(const struct vmm_memsnap *ms, struct vmm_snap_alt *a)
{
	uint32_t nl = ms->m->nlayers;
	int rc;

	*a = (struct vmm_snap_alt){ .valid = true, .key = ms->key, .id = ms->id, .vcpu = ms->vcpu, .nsegs = ms->nsegs };
	a->segs = st_sys_malloc(ms->nsegs * sizeof(*a->segs));
	a->layers = st_sys_calloc(nl + 1, sizeof(*a->layers));
	if (!a->segs || !a->layers) {
		rc = -ENOMEM;
		goto out_free;
	}
	memcpy(a->segs, ms->segs, ms->nsegs * sizeof(*a->segs));
	for (uint32_t i = 0; i < nl; i++)
		a->layers[i].fd = -1;
	for (uint32_t i = 0; i < nl; i++) {
		struct vmm_snap_layer *l = &a->layers[i];
		*l = ms->layers[i];
		l->src = NULL;
		if ((l->fd = st_sys_dup(ms->layers[i].fd)) < 0) {
			rc = l->fd;
			goto out_free;
		}
		if (l->pages && !(l->src = st_sys_mmap(NULL, l->pages * VMM_PAGE, PROT_READ, MAP_SHARED, l->fd, 0, &rc)))
			goto out_free;
	}
	if ((rc = st_manifest_dup(ms->m, &a->m)) < 0)
		goto out_free;
	return 0;
out_free:
	layers_close(a->layers, nl);
	free(a->segs);
	memset(a, 0, sizeof(*a));
	return rc;
}

int vmm_sandbox_restore_mem(struct vmm_sandbox *sb, const struct vmm_memsnap *ms)
{
	struct vmm_snap *s;
	struct vmm_snap_alt built;
	int rc;

	if ((rc = begin(sb, ms, &s)) < 0)
		return rc;
	if (!s->mem_owner || ms->owner != s->mem_owner) {
		/* Refused before anything changed: poisoned or not, as it was. */
		sb->err.code = VMM_E_FOREIGN;
		snprintf(sb->err.message, sizeof(sb->err.message),
			 "cannot restore: the in-memory snapshot was taken from another sandbox%s",
			 s->mem_owner ? "" : " (this one has taken none since it was made or kept warm)");
		return VMM_E_FOREIGN;
	}
	if (s->has_key && st_id_equal(&s->key, &ms->key))
		return vmm_snap_reset(sb, s);
	struct vmm_snap_alt *kept = vmm_snap_alt_find(s, &ms->key);
	if (kept)
		return vmm_snap_switch(sb, s, kept);
	if ((rc = alt_build(ms, &built)) < 0)
		return rc;
	rc = vmm_snap_switch(sb, s, &built);
	if (built.valid) {
		/* Not taken: the remap failed. */
		layers_close(built.layers, built.m->nlayers);
		st_manifest_free(built.m);
		free(built.segs);
	}
	return rc;
}

struct vmm_memsnap *vmm_memsnap_ref(struct vmm_memsnap *ms)
{
	if (ms)
		atomic_fetch_add(&ms->refs, 1);
	return ms;
}

void vmm_memsnap_free(struct vmm_memsnap *ms)
{
	if (ms && atomic_fetch_sub(&ms->refs, 1) == 1)
		memsnap_destroy(ms);
}

uint64_t vmm_memsnap_pages(const struct vmm_memsnap *ms)
{
	return ms ? ms->own_pages : 0;
}
