/* snap_int.h: declarations shared by vmm's snapshot files (capture, reset, restore, dirty, policy, vcpu). */
#ifndef STRATA_VMM_SNAP_INT_H
#define STRATA_VMM_SNAP_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "store/store.h"
#include "vmm/vmm_int.h"

/* True if the 4 KiB page at p holds only zero bytes. */
static inline bool vmm_page_is_zero(const uint8_t *p)
{
	const uint64_t *w = (const uint64_t *)(const void *)p;

	for (size_t i = 0; i < VMM_PAGE / 8; i += 4)
		if (w[i] | w[i + 1] | w[i + 2] | w[i + 3])
			return false;
	return true;
}

/* ---- written-page discovery (dirty.c: the only file touching /proc/self/pagemap) ---- */

/* A run of guest pages [gpage, gpage + npages). */
struct vmm_run {
	uint64_t gpage, npages;
};

/* A growable list of runs. */
struct vmm_runs {
	struct vmm_run *v;
	size_t n, cap;
};

void vmm_runs_clear(struct vmm_runs *r);
void vmm_runs_free(struct vmm_runs *r);
/* Append a run, merging it with the last one when adjacent. */
int vmm_runs_add(struct vmm_runs *r, uint64_t gpage, uint64_t npages);

/*
 * Pages of [mem, mem + size) that hold memory of their own: private copies of
 * a file page, or anonymous pages with data (not the shared zero page).
 * Every page whose content can differ from the snapshot mapped there is in
 * this set: guest writes and host writes alike. Found with `mech` (AUTO: the
 * process's choice, vmm_dirty_mechanism). *out is cleared first. Counts
 * kernel calls (ioctls or preads) in *calls if not NULL. VMM_E_NO_PAGEMAP if
 * the mechanism does not work here.
 */
int vmm_dirty_scan(uint8_t *mem, uint64_t size, enum vmm_dirty_mech mech, struct vmm_runs *out,
		   unsigned *calls);
/* The same over [addr, addr + size) of the process whose pagemap is open
 * as fd (/proc/PID/pagemap), with mechanism `mech` (SCAN or READ). */
int vmm_dirty_scan_fd(int fd, enum vmm_dirty_mech mech, uint64_t addr, uint64_t size,
		      struct vmm_runs *out, unsigned *calls);
/*
 * Pages of the range that are present: every page read or written since
 * the range was mapped, plus the neighbours a read fault mapped with it
 * (fault-around: docs/workingset.md measures how many); a page swapped out since
 * is missed (a swap entry can also be a write-tracking marker on a page
 * never touched). The working-set record's source. _fd: of the process
 * whose pagemap is fd.
 */
int vmm_touched_scan(uint8_t *mem, uint64_t size, struct vmm_runs *out);
int vmm_touched_scan_fd(int fd, enum vmm_dirty_mech mech, uint64_t addr, uint64_t size, struct vmm_runs *out);
/* True if PAGEMAP_SCAN works on pagemap fd `fd` (this kernel has it). */
bool vmm_dirty_scan_works(int fd);
/* Resolve `mech` for this process: SCAN or READ, or VMM_E_NO_PAGEMAP with
 * the reason in err (if not NULL) when it cannot work here. */
int vmm_dirty_resolve(enum vmm_dirty_mech mech, struct vmm_error *err);

/* ---- written-page tracking of shared memory (wp.c: the process backend) ---- */

/* Register [addr, addr + len) of this process for write tracking (Linux
 * 6.7: a userfaultfd in asynchronous write-protect mode); *uffd must stay
 * open while tracking lasts. Nothing is tracked until protected. -errno
 * where the kernel cannot. */
int vmm_wp_track(uint64_t addr, uint64_t len, int *uffd);
/* Register [addr, addr + len) with uffd (from vmm_wp_track) too: a mapping
 * put back where another one was (the process backend's shared pages). */
int vmm_wp_register(int uffd, uint64_t addr, uint64_t len);
/* Track writes to [addr, addr + len) from now on (uffd may be another
 * process's, taken with pidfd_getfd; unpopulated pages included). */
int vmm_wp_protect(int uffd, uint64_t addr, uint64_t len);
/* The pages of [start, end) written since the last scan (or since tracking
 * began) in the process whose pagemap is open as pagemap_fd, as address
 * runs passed to cb; protects them again. Counts scans in *ioctls. */
int vmm_wp_scan(int pagemap_fd, uint64_t start, uint64_t end, int (*cb)(void *ctx, uint64_t lo, uint64_t hi),
		void *ctx, unsigned *ioctls);

/* ---- policy (policy.c) ---- */

/* 0 if p is in range, else VMM_E_BAD_POLICY with the first bad field in why. */
int vmm_policy_check(const struct vmm_policy *p, char *why, size_t whylen);

/* ---- vCPU and guest description as manifest JSON text (vcpu.c) ---- */

int vmm_vcpu_to_json(const struct vmm_vcpu_state *st, char **json);
/* The same as a jansson object (NULL when out of memory); the caller decrefs it. */
json_t *vmm_vcpu_object(const struct vmm_vcpu_state *st);
int vmm_vcpu_from_json(const char *json, struct vmm_vcpu_state *st, char *why, size_t whylen);
int vmm_guest_to_json(const struct vmm_sandbox *sb, char **json);
json_t *vmm_guest_object(const struct vmm_sandbox *sb);
/* Layout and function table of a snapshot's guest. *fns malloc'd. */
int vmm_guest_from_json(const char *json, struct vmm_layout *l, struct vmm_fn **fns, unsigned *nfns,
			char *why, size_t whylen);

/* ---- the snapshot a sandbox runs on (reset.c owns its lifetime) ---- */

struct vmm_snap_layer {
	st_id id;
	uint64_t pages;
	int fd;
	const uint8_t *src;  /* PROT_READ mapping of the whole layer: the snapshot's page contents */
	bool on_fuse;        /* fd is a lazy layer's file on a mount, chunks absent: mapped without read-around */
};

/* A guest page run mapped to one layer (or to zero: layer < 0). */
struct vmm_seg {
	uint64_t gpage, npages;
	int32_t layer;
	uint64_t lpage;
};

/* A snapshot the sandbox ran on before, kept ready (layers open, segments
 * built) so switching back to it parses and opens nothing. The last
 * VMM_SNAP_ALTS are kept, least recently left evicted first. */
#define VMM_SNAP_ALTS 4
struct vmm_snap_alt {
	bool valid;
	uint64_t left;                  /* when it was left (a counter), for eviction */
	st_id key;                      /* vmm_snap_key of m */
	struct st_manifest *m;
	struct vmm_snap_layer *layers;
	struct vmm_seg *segs;
	size_t nsegs;
	st_id id;
	struct vmm_vcpu_state vcpu;
};

struct vmm_snap {
	struct st_manifest *m;          /* current snapshot; NULL: the all-zero memory of a fresh sandbox */
	bool has_id;
	st_id id;
	struct vmm_snap_layer *layers;  /* parallel to m->layers */
	struct vmm_seg *segs;           /* m's ranges plus the holes: covers all guest pages */
	size_t nsegs;
	struct vmm_vcpu_state vcpu;     /* vCPU at the snapshot */
	bool have_vcpu;
	uint8_t *age;                   /* per page: restores since it last differed (REWRITE) */
	uint64_t age_size;
	struct vmm_runs scan;           /* scratch for scans */
	struct vmm_policy policy;
	bool debug;                     /* compare all memory after each restore */
	/* a capture waiting for vmm_sandbox_rebase */
	struct st_manifest *pending;
	struct vmm_snap_layer pending_layer;
	struct vmm_vcpu_state pending_vcpu;
	struct vmm_snap_stats stats;
	bool has_key;
	st_id key;                      /* vmm_snap_key of m */
	struct vmm_snap_alt alt[VMM_SNAP_ALTS];
	uint64_t switches;              /* counter behind vmm_snap_alt.left */
	/* This sandbox life's mark on its in-memory snapshots (memsnap.c);
	 * 0 until the first, and again once a warm park hands it on. */
	uint64_t mem_owner;
};

/* Content key of a manifest (everything that shapes the sandbox), cheaper
 * than its canonical id: a hash of its fields, not of its JSON. */
void vmm_snap_key(const struct st_manifest *m, st_id *key);
/* Free every kept alternate snapshot. */
void vmm_snap_alt_free(struct vmm_snap *s);
/* The kept alternate whose key is `key`, or NULL. */
struct vmm_snap_alt *vmm_snap_alt_find(struct vmm_snap *s, const st_id *key);
/* Make n (valid, owned from now on) the current snapshot. The old one is
 * kept as an alternate if keep_old (evicting the least recently left one
 * when all slots are used), else freed, closing the layers n did
 * not take over (same fd). */
void vmm_snap_set_current(struct vmm_snap *s, const struct vmm_snap_alt *n, bool keep_old);


/*
 * Warm sandboxes (warm.c): a healthy sandbox being freed whose current
 * snapshot is known is restored to it and kept by its host if it holds at
 * most WARM_MAX_PAGES private pages and the host's warm limit is not 0
 * (vmm_host_limits_set; at the limit the one kept longest makes room);
 * park returns true if it was kept (the caller then owns nothing). take hands one out
 * for a manifest with the same content key whose layers open to the very
 * same files (device and inode), with cfg applied and nothing of its last
 * user left; NULL otherwise.
 */
bool vmm_warm_park(struct vmm_sandbox *sb);
struct vmm_sandbox *vmm_warm_take(const struct st_manifest *m, vmm_layer_open_fn open, void *ctx,
				  const struct vmm_config *cfg);
/* Keep at most max of h's warm sandboxes (destroying the rest). */
void vmm_warm_trim(struct vmm_host *h, unsigned max);

/* Reset policy and debug mode as h gives new sandboxes (h NULL: the
 * defaults, debug off). */
void vmm_snap_settings_reset(struct vmm_snap *s, const struct vmm_host *h);

/* The sandbox's snapshot state, created on first use. NULL only on ENOMEM. */
struct vmm_snap *vmm_snap_of(struct vmm_sandbox *sb);
void vmm_snap_free(struct vmm_snap *s);
void vmm_snap_layer_close(struct vmm_snap_layer *l);
/* Open and map a layer through `open` (size checked against pages). */
int vmm_snap_layer_open(const st_id *id, uint64_t pages, vmm_layer_open_fn open, void *ctx,
			struct vmm_snap_layer *out, char *why, size_t whylen);
/* Segments of m over [0, total pages). */
int vmm_snap_segs(const struct st_manifest *m, uint64_t total, struct vmm_seg **out, size_t *n);
/* The snapshot's content of guest page p (NULL: zero). */
const uint8_t *vmm_snap_page(const struct vmm_snap *s, uint64_t p);
/* The same for segments segs (covering every page) over layers. */
const uint8_t *vmm_segs_page(const struct vmm_seg *segs, size_t nsegs, const struct vmm_snap_layer *layers, uint64_t p);
/* Map runs of `m` (layers opened in `layers`) into guest memory where they
 * differ from what `old` maps (old NULL: everything). */
int vmm_snap_remap(struct vmm_sandbox *sb, const struct vmm_seg *old, size_t nold,
		   const struct vmm_snap_layer *old_layers, const struct vmm_seg *segs, size_t nsegs,
		   const struct vmm_snap_layer *layers, unsigned *maps);
/* Put back every page that differs from the snapshot and the vCPU state. */
int vmm_snap_reset(struct vmm_sandbox *sb, struct vmm_snap *s);
/* Switch to a (a kept alternate, or one built for the switch: valid, its
 * layers open, owned by s once this succeeds): remap the runs that differ,
 * keep the snapshot left as an alternate, make a current, then reset. A
 * failed remap poisons the sandbox and leaves a to the caller (restore.c). */
int vmm_snap_switch(struct vmm_sandbox *sb, struct vmm_snap *s, struct vmm_snap_alt *a);

/* ---- what changed since the current snapshot (capture.c; memsnap.c too) ---- */

/* A growable list of segments. */
struct vmm_segv {
	struct vmm_seg *v;
	size_t n, cap;
};
/* Layer index of "the new layer" while segments are built. */
#define VMM_NEW_LAYER INT32_MAX
struct vmm_changes {
	struct vmm_segv ov;     /* changed pages: to the new layer (consecutive lpage), or holes */
	struct vmm_segv segs;   /* the new snapshot's segments, covering every page */
	struct vmm_segv flat;   /* past range_cap: one flat new layer instead (flat_used) */
	bool flat_used;
	uint64_t new_pages;     /* pages of the new layer */
};
/* The pages whose content differs from s's (scanned: guest and host
 * writes; all-zero pages become holes) and the new snapshot's segments,
 * compacted past range_cap. store: for a store, so every page an
 * in-memory layer maps is a change too. c is the caller's
 * (vmm_changes_free), cleared on failure. */
int vmm_changes_find(struct vmm_sandbox *sb, struct vmm_snap *s, bool store, struct vmm_changes *c);
void vmm_changes_free(struct vmm_changes *c);
static inline const struct vmm_segv *vmm_changes_segs(const struct vmm_changes *c)
{
	return c->flat_used ? &c->flat : &c->segs;
}
/* The runs of the new layer's pages (layer VMM_NEW_LAYER), in its order. */
static inline const struct vmm_segv *vmm_changes_new(const struct vmm_changes *c)
{
	return c->flat_used ? &c->flat : &c->ov;
}
/* The manifest of c over s (every layer still used, then the new one,
 * new_id, if c has pages; parent: s's, or an in-memory snapshot's own
 * parent), unsealed and without vcpu; with the guest description if
 * describe. */
int vmm_changes_manifest(struct vmm_sandbox *sb, const struct vmm_snap *s, const struct vmm_changes *c,
			 const st_id *new_id, bool describe, struct st_manifest **out);
/* Is id one memsnap.c made (an in-memory snapshot's or layer's: no store
 * has it)? */
bool vmm_memsnap_id(const st_id *id);

#endif
