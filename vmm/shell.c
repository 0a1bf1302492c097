/* shell.c: idle VM shells (VM + vCPU + memory slot) kept from freed sandboxes for the next one. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "vmm/snap_int.h"

/* At most this many idle shells per process unless $STRATA_VM_CACHE says
 * otherwise (0 turns the cache off); the one kept longest makes room for a
 * new one. Each holds a VM, a vCPU and a guest address range with no pages
 * in it; docs/restore-from-path.md measures the creation cost a shell saves. */
#define SHELL_DEFAULT_MAX 8
#define SHELL_LIMIT 1024

struct shell {
	struct vmm_kvm kvm;
	uint8_t *mem;
	uint64_t mem_size;
};

static pthread_mutex_t shell_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shell shells[SHELL_LIMIT];
static unsigned nshells;
static int shell_max = -1;

unsigned vmm_shell_cap(void)
{
	if (shell_max < 0) {
		const char *env = getenv("STRATA_VM_CACHE");
		char *end;
		long v = env && *env ? strtol(env, &end, 10) : -1;
		shell_max = v >= 0 && v <= SHELL_LIMIT && env && !*end ? (int)v : SHELL_DEFAULT_MAX;
	}
	return (unsigned)shell_max;
}

void vmm_shell_cache_set(unsigned max)
{
	pthread_mutex_lock(&shell_lock);
	shell_max = (int)(max > SHELL_LIMIT ? SHELL_LIMIT : max);
	while (nshells > (unsigned)shell_max) {
		struct shell s = shells[0];
		memmove(shells, shells + 1, (nshells - 1) * sizeof(*shells));
		nshells--;
		vmm_kvm_close(&s.kvm);
		munmap(s.mem, s.mem_size);
	}
	pthread_mutex_unlock(&shell_lock);
	vmm_warm_cache_set(max); /* the same limit for warm sandboxes */
}

int vmm_shell_take(uint64_t mem_size, struct vmm_kvm *kvm, uint8_t **mem)
{
	struct shell s;
	bool hit = false;

	pthread_mutex_lock(&shell_lock);
	for (unsigned i = nshells; i-- > 0;) {
		if (shells[i].mem_size == mem_size) {
			s = shells[i];
			memmove(shells + i, shells + i + 1, (nshells - i - 1) * sizeof(*shells));
			nshells--;
			hit = true;
			break;
		}
	}
	pthread_mutex_unlock(&shell_lock);
	if (!hit)
		return 0;
	int rc = vmm_kvm_recycle(&s.kvm);
	if (rc < 0) {
		vmm_kvm_close(&s.kvm);
		munmap(s.mem, s.mem_size);
		return 0; /* a miss: the caller builds a new VM */
	}
	*kvm = s.kvm;
	*mem = s.mem;
	return 1;
}

bool vmm_shell_give(struct vmm_kvm *kvm, uint8_t *mem, uint64_t mem_size)
{
	struct shell evict = { .mem = NULL };

	if (kvm->vm_fd < 0 || !mem || vmm_shell_cap() == 0)
		return false;
	/* Wipe the guest range in one call: every page (anonymous, private
	 * copies, layer mappings) is replaced by fresh zero memory, and KVM's
	 * MMU notifier drops its mappings of the old pages. */
	if (mmap(mem, mem_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
		 0) == MAP_FAILED)
		return false;
	/* At the limit the shell kept longest makes room: shells of a size the
	 * process no longer uses would otherwise hold every place, and each
	 * sandbox of the size it uses now would pay for a new VM
	 * (docs/restore-from-path.md). */
	pthread_mutex_lock(&shell_lock);
	unsigned cap = vmm_shell_cap() < SHELL_LIMIT ? vmm_shell_cap() : SHELL_LIMIT;
	bool kept = cap > 0;
	if (kept && nshells >= cap) {
		evict = shells[0];
		memmove(shells, shells + 1, (nshells - 1) * sizeof(*shells));
		nshells--;
	}
	if (kept)
		shells[nshells++] = (struct shell){ .kvm = *kvm, .mem = mem, .mem_size = mem_size };
	pthread_mutex_unlock(&shell_lock);
	if (evict.mem) {
		vmm_kvm_close(&evict.kvm);
		munmap(evict.mem, evict.mem_size);
	}
	return kept;
}

unsigned vmm_shell_cache_limit(void)
{
	pthread_mutex_lock(&shell_lock);
	unsigned n = vmm_shell_cap();
	pthread_mutex_unlock(&shell_lock);
	return n;
}

unsigned vmm_shell_cached(void)
{
	pthread_mutex_lock(&shell_lock);
	unsigned n = nshells;
	pthread_mutex_unlock(&shell_lock);
	return n;
}
