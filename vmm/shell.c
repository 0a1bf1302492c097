/* shell.c: idle VM shells (VM + vCPU + memory slot) kept from freed sandboxes for the next one. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "vmm/snap_int.h"

/* At most this many idle shells per process unless $STRATA_VM_CACHE says
 * otherwise (0 turns the cache off). Each holds a VM, a vCPU and a guest
 * address range with no pages in it; docs/restore-from-path.md measures the
 * creation cost a shell saves. */
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
		struct shell *s = &shells[--nshells];
		vmm_kvm_close(&s->kvm);
		munmap(s->mem, s->mem_size);
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
			shells[i] = shells[--nshells];
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
	if (kvm->vm_fd < 0 || !mem)
		return false;
	pthread_mutex_lock(&shell_lock);
	bool room = nshells < vmm_shell_cap();
	pthread_mutex_unlock(&shell_lock);
	if (!room)
		return false; /* full: not worth wiping a range only to destroy it */
	/* Wipe the guest range in one call: every page (anonymous, private
	 * copies, layer mappings) is replaced by fresh zero memory, and KVM's
	 * MMU notifier drops its mappings of the old pages. */
	if (mmap(mem, mem_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
		 0) == MAP_FAILED)
		return false;
	pthread_mutex_lock(&shell_lock);
	bool kept = nshells < vmm_shell_cap() && nshells < SHELL_LIMIT;
	if (kept)
		shells[nshells++] = (struct shell){ .kvm = *kvm, .mem = mem, .mem_size = mem_size };
	pthread_mutex_unlock(&shell_lock);
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
