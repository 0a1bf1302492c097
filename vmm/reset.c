/* reset.c: restore in place: put back exactly the pages that differ from the snapshot, remap ranges, reset the vCPU. */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "store/sys.h"
#include "vmm/snap_int.h"

void vmm_snap_layer_close(struct vmm_snap_layer *l)
{
	if (l->src && l->pages)
		st_sys_munmap((void *)l->src, l->pages * VMM_PAGE);
	if (l->fd >= 0)
		st_sys_close(l->fd);
	l->src = NULL;
	l->fd = -1;
}

/* The most one read of a mount's file asks for: the mount's largest
 * request (FS_MAX_REQUEST, fs/fs_int.h). */
#define READ_PIECE (1u << 20)

/*
 * A lazy layer's file on a mount: read its present chunks, which the
 * mount reports as data (SEEK_DATA; absent chunks are holes), into the
 * page cache now, in requests as large as the mount takes, so the guest's
 * faults there find their pages cached. The reads ask for exactly those
 * bytes (POSIX_FADV_RANDOM: no readahead past an extent's end into an
 * absent chunk; posix_fadvise(WILLNEED) left most of them to the faults,
 * a mount round trip per page). Its mappings are MADV_RANDOM
 * (kvm_map_pages): a fault elsewhere asks for its own page, and only the
 * chunk holding it is fetched (docs/workingset.md). Best effort.
 */
static void lazy_read_ahead(int fd, uint64_t size)
{
	char *buf = st_sys_malloc(READ_PIECE);
	off_t at = 0, end;

	if (!buf)
		return;
	posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
	while ((uint64_t)at < size && (at = st_sys_lseek(fd, at, SEEK_DATA)) >= 0) {
		if ((end = st_sys_lseek(fd, at, SEEK_HOLE)) < 0)
			end = (off_t)size;
		for (off_t p = at; p < end; p += READ_PIECE)
			if (st_sys_pread(fd, buf, end - p < READ_PIECE ? (size_t)(end - p) : READ_PIECE, p) <= 0)
				break;
		at = end;
	}
	free(buf);
}

int vmm_snap_layer_open(const st_id *id, uint64_t pages, vmm_layer_open_fn opener, void *ctx,
			struct vmm_snap_layer *out, char *why, size_t whylen)
{
	char hex[ST_ID_HEX_LEN + 1];
	struct stat st;
	int fd = -1, rc;

	st_id_format(id, hex);
	rc = opener(ctx, id, &fd);
	if (rc < 0) {
		if (why)
			snprintf(why, whylen, "layer %s cannot be opened: %s", hex,
				 rc == -ENOENT ? "it is missing" : strerror(-rc));
		return rc == -ENOENT ? VMM_E_BAD_SNAPSHOT : rc;
	}
	if ((rc = st_sys_fstat(fd, &st)) < 0)
		goto out_close;
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != pages * VMM_PAGE) {
		if (why)
			snprintf(why, whylen, "layer %s is %lld bytes, the manifest says %llu pages (%llu bytes)", hex,
				 (long long)st.st_size, (unsigned long long)pages,
				 (unsigned long long)(pages * VMM_PAGE));
		rc = VMM_E_BAD_SNAPSHOT;
		goto out_close;
	}
	void *src = NULL;
	if (pages && !(src = st_sys_mmap(NULL, pages * VMM_PAGE, PROT_READ, MAP_SHARED, fd, 0, &rc)))
		goto out_close;
	struct statfs sf;
	/* A file of a mount with holes and data is a lazy layer with chunks
	 * absent and some present (a working set fetched ahead). Without any
	 * present the kernel's read-around is the only read-ahead, and keeps
	 * fewer round trips: docs/lazy.md has both measured. */
	bool on_fuse = pages && st_sys_fstatfs(fd, &sf) == 0 && sf.f_type == FUSE_SUPER_MAGIC &&
		       st_sys_lseek(fd, 0, SEEK_HOLE) < (off_t)(pages * VMM_PAGE) && st_sys_lseek(fd, 0, SEEK_DATA) >= 0;
	if (on_fuse)
		lazy_read_ahead(fd, pages * VMM_PAGE);
	*out = (struct vmm_snap_layer){ .id = *id, .pages = pages, .fd = fd, .src = src, .on_fuse = on_fuse };
	return 0;
out_close:
	st_sys_close(fd);
	return rc;
}

int vmm_snap_segs(const struct st_manifest *m, uint64_t total, struct vmm_seg **out, size_t *n)
{
	size_t cap = 2 * (m ? m->nranges : 0) + 1, k = 0;
	struct vmm_seg *v = st_sys_malloc(cap * sizeof(*v));
	uint64_t p = 0;

	if (!v)
		return -ENOMEM;
	for (uint64_t i = 0; m && i < m->nranges; i++) {
		const struct st_range *r = &m->ranges[i];
		if (r->gpage > p)
			v[k++] = (struct vmm_seg){ p, r->gpage - p, -1, 0 };
		v[k++] = (struct vmm_seg){ r->gpage, r->npages, (int32_t)r->layer, r->lpage };
		p = r->gpage + r->npages;
	}
	if (p < total)
		v[k++] = (struct vmm_seg){ p, total - p, -1, 0 };
	*out = v;
	*n = k;
	return 0;
}

/* Index of the segment holding page p (segments cover every page). */
static size_t seg_find(const struct vmm_seg *v, size_t n, uint64_t p)
{
	size_t lo = 0, hi = n;

	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;
		if (v[mid].gpage <= p)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

static const uint8_t *seg_page(const struct vmm_snap_layer *layers, const struct vmm_seg *g, uint64_t p)
{
	if (g->layer < 0)
		return NULL;
	return layers[g->layer].src + (g->lpage + (p - g->gpage)) * VMM_PAGE;
}

const uint8_t *vmm_segs_page(const struct vmm_seg *segs, size_t nsegs, const struct vmm_snap_layer *layers, uint64_t p)
{
	return seg_page(layers, &segs[seg_find(segs, nsegs, p)], p);
}

const uint8_t *vmm_snap_page(const struct vmm_snap *s, uint64_t p)
{
	return vmm_segs_page(s->segs, s->nsegs, s->layers, p);
}

static struct vmm_snap *snap_new(struct vmm_sandbox *sb)
{
	struct vmm_snap *s = st_sys_calloc(1, sizeof(*s));
	uint64_t pages = sb->mem_size / VMM_PAGE;

	if (!s)
		return NULL;
	/* Anonymous memory: only entries of pages that were ever written become
	 * resident, so a sandbox pays for its ages in proportion to its writes. */
	s->age_size = pages;
	int err;
	s->age = st_sys_mmap(NULL, pages, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0, &err);
	if (!s->age || vmm_snap_segs(NULL, pages, &s->segs, &s->nsegs) < 0) {
		if (s->age)
			(void)st_sys_munmap(s->age, pages);
		free(s);
		return NULL;
	}
	vmm_snap_settings_reset(s, sb->cfg.host);
	s->pending_layer.fd = -1;
	return s;
}

void vmm_snap_settings_reset(struct vmm_snap *s, const struct vmm_host *h)
{
	if (h)
		s->policy = h->policy;
	else
		vmm_policy_defaults(&s->policy);
	s->debug = h && h->debug;
}

struct vmm_snap *vmm_snap_of(struct vmm_sandbox *sb)
{
	if (!sb->snap)
		sb->snap = snap_new(sb);
	return sb->snap;
}

static void layers_free(struct vmm_snap_layer *l, uint32_t n)
{
	for (uint32_t i = 0; l && i < n; i++)
		vmm_snap_layer_close(&l[i]);
	free(l);
}

void vmm_snap_free(struct vmm_snap *s)
{
	if (!s)
		return;
	layers_free(s->layers, s->m ? s->m->nlayers : 0);
	st_manifest_free(s->m);
	st_manifest_free(s->pending);
	vmm_snap_layer_close(&s->pending_layer);
	free(s->segs);
	(void)st_sys_munmap(s->age, s->age_size);
	vmm_runs_free(&s->scan);
	vmm_snap_alt_free(s);
	free(s);
}

static void alt_free(struct vmm_snap_alt *a)
{
	if (!a->valid)
		return;
	layers_free(a->layers, a->m->nlayers);
	st_manifest_free(a->m);
	free(a->segs);
	memset(a, 0, sizeof(*a));
}

void vmm_snap_alt_free(struct vmm_snap *s)
{
	for (unsigned i = 0; i < VMM_SNAP_ALTS; i++)
		alt_free(&s->alt[i]);
}

struct vmm_snap_alt *vmm_snap_alt_find(struct vmm_snap *s, const st_id *key)
{
	for (unsigned i = 0; i < VMM_SNAP_ALTS; i++)
		if (s->alt[i].valid && st_id_equal(key, &s->alt[i].key))
			return &s->alt[i];
	return NULL;
}

/* A free alternate slot, evicting the least recently left snapshot. */
static struct vmm_snap_alt *alt_slot(struct vmm_snap *s)
{
	struct vmm_snap_alt *oldest = &s->alt[0];

	for (unsigned i = 0; i < VMM_SNAP_ALTS; i++) {
		if (!s->alt[i].valid)
			return &s->alt[i];
		if (s->alt[i].left < oldest->left)
			oldest = &s->alt[i];
	}
	alt_free(oldest);
	return oldest;
}

void vmm_snap_set_current(struct vmm_snap *s, const struct vmm_snap_alt *n, bool keep_old)
{
	struct vmm_snap_alt old = { .valid = s->m && s->has_key, .key = s->key, .m = s->m, .layers = s->layers,
				    .segs = s->segs, .nsegs = s->nsegs, .id = s->id, .vcpu = s->vcpu };

	if (keep_old && old.valid) {
		old.left = ++s->switches;
		*alt_slot(s) = old;
	} else {
		for (uint32_t k = 0; old.m && k < old.m->nlayers; k++) {
			bool taken = false;
			for (uint32_t i = 0; i < n->m->nlayers; i++)
				taken |= n->layers[i].fd == old.layers[k].fd;
			if (!taken)
				vmm_snap_layer_close(&old.layers[k]);
		}
		free(old.layers);
		st_manifest_free(old.m);
		free(old.segs);
	}
	s->m = n->m;
	s->layers = n->layers;
	s->segs = n->segs;
	s->nsegs = n->nsegs;
	s->id = n->id;
	s->has_id = true;
	s->key = n->key;
	s->has_key = true;
	s->vcpu = n->vcpu;
	s->have_vcpu = true;
}

void vmm_snap_key(const struct st_manifest *m, st_id *key)
{
	uint64_t hdr[6] = { m->mem_size, m->nlayers, m->nranges, (uint64_t)m->created, m->abi_version,
			    m->has_parent };
	struct st_hasher *h = NULL;

	if (st_hasher_new(&h) < 0) {
		memset(key, 0xff, sizeof(*key));  /* never matches a real key: no caching */
		return;
	}
	st_hasher_update(h, hdr, sizeof(hdr));
	st_hasher_update(h, &m->parent, sizeof(m->parent));
	for (uint32_t i = 0; i < m->nlayers; i++) {
		st_hasher_update(h, &m->layers[i].id, sizeof(m->layers[i].id));
		st_hasher_update(h, &m->layers[i].pages, sizeof(m->layers[i].pages));
	}
	for (uint64_t i = 0; i < m->nranges; i++) {
		const struct st_range *r = &m->ranges[i];
		uint64_t f[4] = { r->gpage, r->npages, r->layer, r->lpage };
		st_hasher_update(h, f, sizeof(f));
	}
	if (m->vcpu)
		st_hasher_update(h, m->vcpu, strlen(m->vcpu) + 1);
	if (m->guest)
		st_hasher_update(h, m->guest, strlen(m->guest) + 1);
	st_hasher_final(h, key);
	st_hasher_free(h);
}

static bool same_mapping(const struct vmm_seg *a, const struct vmm_snap_layer *al, const struct vmm_seg *b,
			 const struct vmm_snap_layer *bl, uint64_t p)
{
	if (a->layer < 0 || b->layer < 0)
		return a->layer < 0 && b->layer < 0;
	return st_id_equal(&al[a->layer].id, &bl[b->layer].id) &&
	       a->lpage + (p - a->gpage) == b->lpage + (p - b->gpage);
}

static int map_run(struct vmm_sandbox *sb, const struct vmm_seg *g, const struct vmm_snap_layer *layers,
		   uint64_t p, uint64_t n)
{
	return sb->be->map_pages(sb, p, n, g->layer < 0 ? -1 : layers[g->layer].fd, g->lpage + (p - g->gpage),
				 g->layer >= 0 && layers[g->layer].on_fuse);
}

int vmm_snap_remap(struct vmm_sandbox *sb, const struct vmm_seg *old, size_t nold,
		   const struct vmm_snap_layer *old_layers, const struct vmm_seg *segs, size_t nsegs,
		   const struct vmm_snap_layer *layers, unsigned *maps)
{
	size_t i = 0, j = 0;
	uint64_t total = sb->mem_size / VMM_PAGE, p = 0;
	/* a pending run to map: [run_p, run_p + run_n) of segs[run_j] */
	uint64_t run_p = 0, run_n = 0;
	size_t run_j = 0;
	int rc;

	while (p < total) {
		while (old && i < nold && old[i].gpage + old[i].npages <= p)
			i++;
		while (j < nsegs && segs[j].gpage + segs[j].npages <= p)
			j++;
		uint64_t end = segs[j].gpage + segs[j].npages;
		if (old && old[i].gpage + old[i].npages < end)
			end = old[i].gpage + old[i].npages;
		/* A fresh sandbox's memory (old NULL) is anonymous: a hole mapping. */
		bool same = old ? same_mapping(&old[i], old_layers, &segs[j], layers, p) : segs[j].layer < 0;
		if (!same) {
			if (run_n && run_j == j && run_p + run_n == p) {
				run_n += end - p;
			} else {
				if (run_n && (rc = map_run(sb, &segs[run_j], layers, run_p, run_n)) < 0)
					return rc;
				if (run_n && maps)
					(*maps)++;
				run_p = p;
				run_n = end - p;
				run_j = j;
			}
		}
		p = end;
	}
	if (run_n) {
		if ((rc = map_run(sb, &segs[run_j], layers, run_p, run_n)) < 0)
			return rc;
		if (maps)
			(*maps)++;
	}
	return 0;
}

static int drop_runs(struct vmm_snap *s, uint8_t *mem, const struct vmm_runs *drop)
{
	for (size_t i = 0; i < drop->n; i++) {
		int rc = st_sys_madvise_drop(mem + drop->v[i].gpage * VMM_PAGE, drop->v[i].npages * VMM_PAGE);
		if (rc < 0)
			return rc;
		s->stats.madvise_calls++;
		s->stats.pages_dropped += drop->v[i].npages;
	}
	return 0;
}

int vmm_snap_reset(struct vmm_sandbox *sb, struct vmm_snap *s)
{
	unsigned ioctls = 0;
	int rc;

	if (!s->have_vcpu)
		return VMM_E_NO_SNAPSHOT;
	rc = sb->be->dirty_scan(sb, &s->scan, &ioctls);
	s->stats.scan_ioctls += ioctls;
	if (rc < 0)
		return rc;
	if (!sb->be->private_pages) {
		/* Shared memory (process backend): nothing to drop; put back
		 * what differs. */
		for (size_t i = 0; i < s->scan.n; i++) {
			uint64_t p = s->scan.v[i].gpage, end = p + s->scan.v[i].npages;
			s->stats.pages_scanned += end - p;
			for (; p < end; p++) {
				const uint8_t *src = vmm_snap_page(s, p);
				uint8_t *dst = sb->mem + p * VMM_PAGE;
				if (src ? memcmp(dst, src, VMM_PAGE) == 0 : vmm_page_is_zero(dst))
					continue;
				if (src)
					memcpy(dst, src, VMM_PAGE);
				else
					memset(dst, 0, VMM_PAGE);
				s->stats.pages_rewritten++;
			}
		}
		if (sb->be->dirty_clear)
			sb->be->dirty_clear(sb);
	} else if (s->policy.mode == VMM_RESET_DROP) {
		for (size_t i = 0; i < s->scan.n; i++)
			s->stats.pages_scanned += s->scan.v[i].npages;
		rc = drop_runs(s, sb->mem, &s->scan);
		if (rc < 0)
			return rc;
	} else {
		struct vmm_runs drop = { 0 }, idle = { 0 };
		uint64_t nidle = 0;
		for (size_t i = 0; i < s->scan.n; i++) {
			uint64_t p = s->scan.v[i].gpage, end = p + s->scan.v[i].npages;
			size_t k = seg_find(s->segs, s->nsegs, p);
			s->stats.pages_scanned += end - p;
			for (; p < end; p++) {
				while (s->segs[k].gpage + s->segs[k].npages <= p)
					k++;
				const uint8_t *src = seg_page(s->layers, &s->segs[k], p);
				uint8_t *dst = sb->mem + p * VMM_PAGE;
				bool differs = src ? memcmp(dst, src, VMM_PAGE) != 0 : !vmm_page_is_zero(dst);
				if (differs) {
					if (src)
						memcpy(dst, src, VMM_PAGE);
					else
						memset(dst, 0, VMM_PAGE);
					s->age[p] = 0;
					s->stats.pages_rewritten++;
				} else {
					/* Unchanged: give it back after keep_restores such
					 * restores, or now if too many are idle (a heavy run
					 * followed by light ones: comparing them every
					 * restore would cost more than refaulting). */
					bool old = ++s->age[p] >= s->policy.keep_restores;
					nidle++;
					rc = vmm_runs_add(old ? &drop : &idle, p, 1);
					if (old)
						s->age[p] = 0;
					if (rc < 0) {
						vmm_runs_free(&drop);
						vmm_runs_free(&idle);
						return rc;
					}
				}
			}
		}
		rc = drop_runs(s, sb->mem, &drop);
		if (rc == 0 && nidle > s->policy.idle_cap) {
			for (size_t i = 0; i < idle.n; i++)
				memset(s->age + idle.v[i].gpage, 0, idle.v[i].npages);
			rc = drop_runs(s, sb->mem, &idle);
		}
		vmm_runs_free(&drop);
		vmm_runs_free(&idle);
		if (rc < 0)
			return rc;
	}
	if ((rc = sb->be->stage_state(sb, &s->vcpu)) < 0)
		return rc;
	sb->poisoned = false;
	vmm_error_clear(&sb->err);
	s->stats.restores++;
	sb->ws_fresh = false;
	if (s->debug)
		return vmm_sandbox_check(sb, NULL);
	return 0;
}

int vmm_sandbox_restore(struct vmm_sandbox *sb)
{
	struct vmm_snap *s = vmm_snap_of(sb);

	if (!s)
		return -ENOMEM;
	if (sb->in_call)
		return VMM_E_BUSY;
	return vmm_snap_reset(sb, s);
}

int vmm_sandbox_check(struct vmm_sandbox *sb, uint64_t *gpage)
{
	struct vmm_snap *s = vmm_snap_of(sb);

	if (!s)
		return -ENOMEM;
	if (!s->have_vcpu)
		return VMM_E_NO_SNAPSHOT;
	/* What lies outside guest memory first (cheap, and a call changes
	 * the vCPU as surely as memory), then memory. */
	char why[sizeof(sb->err.message) - 32];
	int rc = sb->be->check_state ? sb->be->check_state(sb, &s->vcpu, why, sizeof(why)) : 0;
	if (rc == VMM_E_LEAK) {
		if (gpage)
			*gpage = UINT64_MAX;
		sb->err.code = VMM_E_LEAK;
		snprintf(sb->err.message, sizeof(sb->err.message), "debug check: %s", why);
	}
	if (rc < 0)
		return rc;
	uint8_t buf[VMM_PAGE];
	for (size_t k = 0; k < s->nsegs; k++) {
		const struct vmm_seg *g = &s->segs[k];
		for (uint64_t p = g->gpage; p < g->gpage + g->npages; p++) {
			const uint8_t *src = seg_page(s->layers, g, p);
			/* Read so as to change nothing (the process backend: a read
			 * through its shared mapping would give a hole a page). */
			const uint8_t *dst = sb->be->page_read ? sb->be->page_read(sb, p, buf) : sb->mem + p * VMM_PAGE;
			if (!dst)
				return -EIO;
			if (src ? memcmp(dst, src, VMM_PAGE) != 0 : !vmm_page_is_zero(dst)) {
				if (gpage)
					*gpage = p;
				return vmm_fail(&sb->err, VMM_E_LEAK, "guest page %llu differs from the snapshot",
						(unsigned long long)p);
			}
		}
	}
	return 0;
}

void vmm_sandbox_set_debug(struct vmm_sandbox *sb, bool on)
{
	struct vmm_snap *s = vmm_snap_of(sb);

	if (s)
		s->debug = on;
}

void vmm_sandbox_snap_stats(struct vmm_sandbox *sb, struct vmm_snap_stats *out)
{
	struct vmm_snap *s = vmm_snap_of(sb);

	if (s)
		*out = s->stats;
	else
		memset(out, 0, sizeof(*out));
}

bool vmm_sandbox_snapshot_id(struct vmm_sandbox *sb, st_id *id)
{
	struct vmm_snap *s = vmm_snap_of(sb);

	if (!s || !s->has_id || vmm_memsnap_id(&s->id))
		return false;
	*id = s->id;
	return true;
}

int vmm_sandbox_set_dirty(struct vmm_sandbox *sb, enum vmm_dirty_mech mech)
{
	struct vmm_snap *s = vmm_snap_of(sb);
	int rc;

	if (!s)
		return -ENOMEM;
	if (mech != VMM_DIRTY_AUTO && mech != VMM_DIRTY_SCAN && mech != VMM_DIRTY_READ)
		return -EINVAL;
	if (mech != VMM_DIRTY_AUTO && (rc = vmm_dirty_resolve(mech, NULL)) < 0)
		return rc;
	s->policy.dirty = mech;
	return 0;
}

int vmm_sandbox_set_reset(struct vmm_sandbox *sb, enum vmm_reset_mode mode, unsigned keep)
{
	struct vmm_snap *s;

	/* Both checked before anything changes. */
	if ((mode != VMM_RESET_REWRITE && mode != VMM_RESET_DROP) || keep > VMM_POLICY_KEEP_MAX)
		return -EINVAL;
	if (!(s = vmm_snap_of(sb)))
		return -ENOMEM;
	s->policy.mode = mode;
	if (keep)
		s->policy.keep_restores = keep;
	return 0;
}
