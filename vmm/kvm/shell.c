/* shell.c: idle VM shells (VM + vCPU + memory slot) a host keeps from freed sandboxes for its next one. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "store/sys.h"
#include "vmm/vmm_int.h"

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
	*mem = s.mem;
	return 1;
}

bool vmm_shell_give(struct vmm_host *h, struct vmm_kvm *kvm, uint8_t *mem, uint64_t mem_size)
{
	struct vmm_shell evict = { .mem = NULL };

	if (!h || kvm->vm_fd < 0 || !mem)
		return false;
	pthread_mutex_lock(&h->shell_lock);
	bool off = h->shell_max == 0;
	pthread_mutex_unlock(&h->shell_lock);
	if (off)
		return false;
	/* Wipe the guest range in one call: every page (anonymous, private
	 * copies, layer mappings) is replaced by fresh zero memory, and KVM's
	 * MMU notifier drops its mappings of the old pages. Outside the lock:
	 * it can take long. */
	int rc;
	if (!st_sys_mmap(mem, mem_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
			 -1, 0, &rc))
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
