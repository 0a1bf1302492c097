/* kvm/backend.c: the KVM backend's side of the seam (VM shells, vCPU state, KVM_RUN); vmm/backend.c chooses. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "store/sys.h"
#include "vmm/snap_int.h"

/* The sandbox's KVM state (its backend-private pointer). */
static inline struct vmm_kvm *kvm_of(const struct vmm_sandbox *sb)
{
	return sb->priv;
}

static int kvm_mem_new(struct vmm_sandbox *sb, bool *ready)
{
	struct vmm_kvm *k = st_sys_calloc(1, sizeof(*k));

	if (!k)
		return -ENOMEM;
	k->vm_fd = k->vcpu_fd = -1;
	sb->priv = k;
	/* A recycled shell (shell.c) brings a wiped range and a ready VM. */
	if (vmm_shell_take(sb->cfg.host, sb->mem_size, k, &sb->mem) == 1) {
		*ready = true;
		return 0;
	}
	/* One private anonymous range: pages appear on first touch, so
	 * creation cost does not grow with the heap; snapshots map layer
	 * files over it. */
	int rc;
	sb->mem = st_sys_mmap(NULL, sb->mem_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			      -1, 0, &rc);
	if (!sb->mem) {
		free(k);
		sb->priv = NULL;
		return rc;
	}
	*ready = false;
	return 0;
}

static int kvm_start(struct vmm_sandbox *sb, bool ready, struct vmm_error *err)
{
	int rc;

	if (ready)
		return 0;
	if ((rc = vmm_kvm_open(kvm_of(sb))) < 0)
		return vmm_kvm_open_failed(rc, err);
	if ((rc = vmm_kvm_set_memory(kvm_of(sb), 0, sb->mem, sb->mem_size)) < 0)
		return vmm_fail(err, rc, "cannot register guest memory with KVM: %s", strerror(-rc));
	return 0;
}

static void kvm_destroy(struct vmm_sandbox *sb)
{
	struct vmm_kvm *k = kvm_of(sb);

	/* A healthy sandbox's VM and range go back to the shell cache; a
	 * poisoned one (faulted, killed, shut down) is destroyed. The pages
	 * below the heap (host pages, image, stack) are kept, zeroed, for the
	 * next sandbox to write its own there, unless a layer file was mapped
	 * into the range, or the kernel cannot say exactly which pages hold
	 * anything (PAGEMAP_SCAN; shell.c). */
	enum vmm_dirty_mech mech;
	uint64_t keep = k && !k->mapped && vmm_dirty_mechanism(&mech, NULL) == 0 && mech == VMM_DIRTY_SCAN
		? sb->layout.low_end : 0;
	if (k && !sb->poisoned && vmm_shell_give(sb->cfg.host, k, sb->mem, sb->mem_size, keep)) {
		k->vm_fd = k->vcpu_fd = -1;
		k->run = NULL;
		k->xsave = NULL;
		sb->mem = NULL;
	}
	if (k)
		vmm_kvm_close(k);
	free(k);
	sb->priv = NULL;
	if (sb->mem)
		st_sys_munmap(sb->mem, sb->mem_size);
	sb->mem = NULL;
}

static bool kvm_live(const struct vmm_sandbox *sb)
{
	const struct vmm_kvm *k = kvm_of(sb);

	return k && k->vcpu_fd >= 0;
}

static int kvm_set_state(struct vmm_sandbox *sb, const struct vmm_vcpu_state *st)
{
	return vmm_kvm_set_state(kvm_of(sb), st);
}

static int kvm_stage_state(struct vmm_sandbox *sb, const struct vmm_vcpu_state *st)
{
	return vmm_kvm_stage_state(kvm_of(sb), st);
}

static int kvm_get_state(struct vmm_sandbox *sb, struct vmm_vcpu_state *st)
{
	return vmm_kvm_get_state(kvm_of(sb), st);
}

static int kvm_check_state(struct vmm_sandbox *sb, const struct vmm_vcpu_state *st, char *why, size_t whylen)
{
	struct vmm_vcpu_state live;
	char name[64];
	const char *f;
	int rc;

	/* The vector state first: it names the component that differs. */
	if ((rc = vmm_kvm_check_vector_state(kvm_of(sb), st->fxsave, why, whylen)) < 0)
		return rc;
	if ((rc = vmm_kvm_get_state(kvm_of(sb), &live)) < 0)
		return rc;
	if ((f = vmm_x86_state_differs(&live, st, name, sizeof(name)))) {
		snprintf(why, whylen, "register %s differs from the snapshot's", f);
		return VMM_E_LEAK;
	}
	return 0;
}

static int kvm_get_cr2(struct vmm_sandbox *sb, uint64_t *cr2)
{
	return vmm_kvm_get_cr2(kvm_of(sb), cr2);
}

static int kvm_run(struct vmm_sandbox *sb, struct vmm_exit *ex)
{
	return vmm_kvm_run(kvm_of(sb), ex);
}

static void kvm_kick(struct vmm_sandbox *sb, bool on)
{
	struct vmm_kvm *k = kvm_of(sb);

	if (k)
		vmm_kvm_set_immediate_exit(k, on);
}

/* Guest memory is this process's range: a guest access faults it in here. */
static int kvm_touched_scan(struct vmm_sandbox *sb, struct vmm_runs *out)
{
	return vmm_touched_scan(sb->mem, sb->mem_size, out);
}

static int kvm_dirty_scan(struct vmm_sandbox *sb, struct vmm_runs *out, unsigned *ioctls)
{
	return vmm_dirty_scan(sb->mem, sb->mem_size, sb->snap->policy.dirty, out, ioctls);
}

/* A layer's pages copy-on-write into the one memory slot (or fresh zero
 * pages): KVM's MMU notifier follows the mapping change. */
static int kvm_map_pages(struct vmm_sandbox *sb, uint64_t gpage, uint64_t n, int fd, uint64_t lpage, bool random)
{
	void *at = sb->mem + gpage * VMM_PAGE;
	int rc = 0;

	kvm_of(sb)->mapped = true;  /* its pages no longer all read as their own */

	if (fd < 0)
		st_sys_mmap(at, n * VMM_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
			    -1, 0, &rc);
	else
		st_sys_mmap(at, n * VMM_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd, (off_t)(lpage * VMM_PAGE),
			    &rc);
	/* A lazy layer's fault asks the mount for its page alone: the kernel's
	 * read-around would fetch absent chunks nobody touches, one round trip
	 * each. The mount fills the page cache around it from present chunks
	 * instead (fs/ops.c, docs/lazy.md). */
	if (rc == 0 && fd >= 0 && random)
		st_sys_madvise(at, n * VMM_PAGE, MADV_RANDOM);
	return rc;
}

const struct vmm_backend vmm_backend_kvm = {
	.kind = VMM_BACKEND_KVM,
	.name = "kvm",
	.check = vmm_kvm_check,
	.prepare = vmm_kvm_prepare,
	.hint = "the process backend, --backend process, needs no KVM",
	.auto_hint = "the process backend, --backend process, needs no KVM",
	.mem_new = kvm_mem_new,
	.start = kvm_start,
	.destroy = kvm_destroy,
	.live = kvm_live,
	.set_state = kvm_set_state,
	.stage_state = kvm_stage_state,
	.check_state = kvm_check_state,
	.get_state = kvm_get_state,
	.get_cr2 = kvm_get_cr2,
	.run = kvm_run,
	.kick = kvm_kick,
	.dirty_scan = kvm_dirty_scan,
	.touched_scan = kvm_touched_scan,
	.map_pages = kvm_map_pages,
	.private_pages = true,
};
