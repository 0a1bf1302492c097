/* shell.c: idle VM shells (VM + vCPU + memory slot) a host keeps from freed sandboxes for its next one. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "store/sys.h"
#include "vmm/snap_int.h"

/* Remove h->shells[i] keeping the order (caller holds shell_lock). */
static struct vmm_shell shell_remove(struct vmm_host *h, unsigned i)
{
	struct vmm_shell s = h->shells[i];

	memmove(h->shells + i, h->shells + i + 1, (h->nshells - i - 1) * sizeof(*h->shells));
	h->nshells--;
	return s;
}

static void shell_close(struct vmm_shell *s)
{
	vmm_kvm_close(&s->kvm);
	st_sys_munmap(s->mem, s->mem_size);
}

void vmm_shell_trim(struct vmm_host *h, unsigned max)
{
	for (;;) {
		struct vmm_shell s = { .mem = NULL };
		pthread_mutex_lock(&h->shell_lock);
		if (h->nshells > max)
			s = shell_remove(h, 0);
		pthread_mutex_unlock(&h->shell_lock);
		if (!s.mem)
			return;
		shell_close(&s);
	}
}

int vmm_shell_take(struct vmm_host *h, uint64_t mem_size, struct vmm_kvm *kvm, uint8_t **mem)
{
	struct vmm_shell s;
	bool hit = false;

	if (!h)
		return 0;
	pthread_mutex_lock(&h->shell_lock);
	for (unsigned i = h->nshells; i-- > 0;) {
		if (h->shells[i].mem_size == mem_size) {
			s = shell_remove(h, i);
			hit = true;
			break;
		}
	}
	pthread_mutex_unlock(&h->shell_lock);
	if (!hit)
		return 0;
	int rc = vmm_kvm_recycle(&s.kvm);
	if (rc < 0) {
		shell_close(&s);
		return 0; /* a miss: the caller builds a new VM */
	}
	*kvm = s.kvm;
	kvm->mapped = false;  /* the wipe replaced every mapping */
	*mem = s.mem;
	return 1;
}

/*
 * Zero in place the pages of [mem, mem + keep) that hold anything (its own
 * anonymous pages, present or swapped: every other page of a range with no
 * file mapping reads as zero), then make KVM forget its mappings of the
 * range: a protection change runs the MMU notifier over it as a remap does,
 * so the next guest's accesses fault in through its own page tables. The
 * pages stay allocated: the next sandbox's host pages, image and first
 * stack pages land on them without a page fault and a fresh zeroed page
 * each (docs/vmm.md, "Sandbox creation"). 0, or -errno with the range's
 * contents unknown (the caller then wipes all of it).
 */
static int shell_zero_kept(uint8_t *mem, uint64_t keep)
{
	struct vmm_runs own = { 0 };
	int rc = vmm_dirty_scan(mem, keep, VMM_DIRTY_SCAN, &own, NULL);

	for (size_t i = 0; rc == 0 && i < own.n; i++)
		memset(mem + own.v[i].gpage * VMM_PAGE, 0, own.v[i].npages * VMM_PAGE);
	vmm_runs_free(&own);
	if (rc == 0)
		rc = st_sys_mprotect(mem, keep, PROT_READ);
	if (rc == 0)
		rc = st_sys_mprotect(mem, keep, PROT_READ | PROT_WRITE);
	return rc;
}

bool vmm_shell_give(struct vmm_host *h, struct vmm_kvm *kvm, uint8_t *mem, uint64_t mem_size, uint64_t keep)
{
	struct vmm_shell evict = { .mem = NULL };

	if (!h || kvm->vm_fd < 0 || !mem)
		return false;
	pthread_mutex_lock(&h->shell_lock);
	bool off = h->shell_max == 0;
	pthread_mutex_unlock(&h->shell_lock);
	if (off)
		return false;
	/* The first keep bytes are zeroed in place; the rest is wiped in one
	 * call: every page (anonymous, private copies, layer mappings) is
	 * replaced by fresh zero memory, and KVM's MMU notifier drops its
	 * mappings of the old pages. Outside the lock: it can take long. */
	int rc;
	if (keep > mem_size || (keep && shell_zero_kept(mem, keep) < 0))
		keep = 0;
	if (keep < mem_size &&
	    !st_sys_mmap(mem + keep, mem_size - keep, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0, &rc))
		return false;
	/* At the limit the shell kept longest makes room: shells of a size the
	 * process no longer uses would otherwise hold every place, and each
	 * sandbox of the size it uses now would pay for a new VM
	 * (docs/restore-from-path.md). The limit is read again under the lock:
	 * it may have changed since. */
	pthread_mutex_lock(&h->shell_lock);
	bool kept = h->shell_max > 0;
	if (kept && h->nshells >= h->shell_max)
		evict = shell_remove(h, 0);
	if (kept)
		h->shells[h->nshells++] = (struct vmm_shell){ .kvm = *kvm, .mem = mem, .mem_size = mem_size };
	pthread_mutex_unlock(&h->shell_lock);
	if (evict.mem)
		shell_close(&evict);
	return kept;
}
