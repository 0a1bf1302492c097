/* bare.c: the floors: a bare VM (or child process) whose guest is one hypercall in a loop, to time one exit. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store/sys.h"
#include "vmm/bare.h"
#include "vmm/vmm_int.h"

struct vmm_bare {
	enum vmm_bare_mode mode;
	struct vmm_kvm kvm;
	uint8_t *mem;
	uint64_t size;
	struct vmm_sandbox *sb;  /* VMM_BARE_PROCESS: a sandbox with no guest ELF */
	pid_t pid;               /* VMM_BARE_PTRACE */
};

/* The process backend's floor: the KVM floor's guest (a store into the
 * hypercall page in a loop) in a process-backend sandbox. */
static int bare_process_new(const struct vmm_layout *l, const uint8_t *mem, uint64_t code, struct vmm_bare *b)
{
	struct vmm_sandbox *sb = st_sys_calloc(1, sizeof(*sb));
	struct vmm_vcpu_state st;
	bool ready;
	int rc;

	if (!sb)
		return -ENOMEM;
	pthread_mutex_init(&sb->lock, NULL);
	sb->be = &vmm_backend_process;
	sb->layout = *l;
	sb->mem_size = l->mem_size;
	sb->poisoned = true;  /* never kept by a cache */
	b->sb = sb;
	if ((rc = sb->be->mem_new(sb, &ready)) < 0)
		return rc;
	/* Page tables, descriptors, code: the pages that hold any. Copying
	 * all of low memory (2 MiB, nearly all zero) would put 512 page
	 * faults of the floor's own into the floor; guest memory is zero. */
	static const uint8_t zero[VMM_PAGE];
	for (uint64_t at = 0; at < l->low_end; at += VMM_PAGE)
		if (memcmp(mem + at, zero, VMM_PAGE) != 0)
			memcpy(sb->mem + at, mem + at, VMM_PAGE);
	if ((rc = sb->be->start(sb, ready, NULL)) < 0)
		return rc;
	vmm_x86_initial_state(l, 3, code, l->stack_hi, &st);
	st.gpr[3] = STRATA_HC_VA + (STRATA_PORT_RETURN - STRATA_HC_PORT_BASE) * 4;
	return sb->be->set_state(sb, &st);
}

/* The ptrace floor: a child storing to an unmapped page in a loop. */
static int bare_ptrace_new(struct vmm_bare *b)
{
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) < 0)
			_exit(1);
		raise(SIGSTOP);
		for (;;)
			__asm__ volatile("movl %%eax, (%0)" : : "r"((uintptr_t)16) : "memory");
	}
	b->pid = pid;
	int st;
	if (waitpid(pid, &st, 0) < 0 || !WIFSTOPPED(st))
		return -ECHILD;
	return ptrace(PTRACE_CONT, pid, NULL, NULL) < 0 ? -errno : 0;
}

static int bare_ptrace_run(struct vmm_bare *b)
{
	struct user_regs_struct r;
	int st;

	if (waitpid(b->pid, &st, 0) < 0)
		return -errno;
	if (!WIFSTOPPED(st) || WSTOPSIG(st) != SIGSEGV)
		return VMM_E_UNEXPECTED_EXIT;
	if (ptrace(PTRACE_GETREGS, b->pid, NULL, &r) < 0)
		return -errno;
	r.rip += 2;  /* movl %eax, (%reg): 2 bytes */
	if (ptrace(PTRACE_SETREGS, b->pid, NULL, &r) < 0 || ptrace(PTRACE_CONT, b->pid, NULL, NULL) < 0)
		return -errno;
	return 0;
}

int vmm_bare_new(enum vmm_bare_mode mode, struct vmm_bare **out)
{
	bool cpl3 = mode != VMM_BARE_CPL0_OUT;
	struct vmm_config cfg = { .stack_size = VMM_PAGE, .heap_size = VMM_PAGE };
	struct vmm_layout l;
	struct vmm_vcpu_state st;
	struct vmm_bare *b;
	int rc;

	rc = vmm_layout_compute(&cfg, STRATA_IMAGE_BASE, STRATA_IMAGE_BASE + VMM_PAGE, &l);
	if (rc < 0)
		return rc;
	b = st_sys_calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->kvm.vm_fd = b->kvm.vcpu_fd = -1;
	b->mode = mode;
	b->pid = -1;
	if (mode == VMM_BARE_PTRACE) {
		if ((rc = bare_ptrace_new(b)) < 0)
			goto out_free;
		*out = b;
		return 0;
	}
	b->size = l.mem_size;
	b->mem = st_sys_mmap(NULL, b->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0,
			     &rc);
	if (!b->mem)
		goto out_free;
	uint8_t *perms = st_sys_calloc(l.low_end / VMM_PAGE, 1);
	if (!perms) {
		rc = -ENOMEM;
		goto out_free;
	}
	vmm_x86_supervisor_perms(&l, perms);
	perms[STRATA_IMAGE_BASE / VMM_PAGE] = VMM_PERM_R | VMM_PERM_X | VMM_PERM_USER;
	vmm_x86_build(b->mem, &l, perms);
	free(perms);
	/* CPL 3: mov %eax, (%rdx) into the hypercall page ; jmp back.
	 * CPL 0: out %eax, %dx ; jmp back. */
	static const uint8_t user[] = { 0x89, 0x02, 0xeb, 0xfc };
	static const uint8_t kernel[] = { 0xef, 0xeb, 0xfd };
	uint64_t code = STRATA_IMAGE_BASE + 0x800;
	if (mode == VMM_BARE_CPL3_INT3) {
		/* int3 ; jmp back. The host's stub 3 becomes: out %eax, %dx ; iretq
		 * (a floor only: a sandbox's stubs never return). */
		static const uint8_t c[] = { 0xcc, 0xeb, 0xfd }, st3[] = { 0xef, 0x48, 0xcf };
		memcpy(b->mem + code, c, sizeof(c));
		memcpy(b->mem + l.isr + 3 * STRATA_ISR_STRIDE, st3, sizeof(st3));
	} else if (mode == VMM_BARE_CPL3_GP) {
		/* out (faults: #GP) ; jmp back. The host's stub 13 becomes: out ;
		 * addq $1, 8(%rsp) ; add $8, %rsp ; iretq */
		static const uint8_t c[] = { 0xef, 0xeb, 0xfd };
		static const uint8_t st13[] = { 0xef, 0x48, 0x83, 0x44, 0x24, 0x08, 0x01, 0x48, 0x83, 0xc4, 0x08, 0x48, 0xcf };
		memcpy(b->mem + code, c, sizeof(c));
		memcpy(b->mem + l.isr + 13 * STRATA_ISR_STRIDE, st13, sizeof(st13));
	} else if (cpl3)
		memcpy(b->mem + code, user, sizeof(user));
	else
		memcpy(b->mem + code, kernel, sizeof(kernel));
	if (mode == VMM_BARE_PROCESS) {
		if ((rc = bare_process_new(&l, b->mem, code, b)) < 0)
			goto out_free;
		*out = b;
		return 0;
	}
	if ((rc = vmm_kvm_open(&b->kvm)) < 0 || (rc = vmm_kvm_set_memory(&b->kvm, 0, b->mem, b->size)) < 0)
		goto out_free;
	vmm_x86_initial_state(&l, cpl3 ? 3 : 0, code, l.stack_hi, &st);
	/* rdx: the port (CPL 0) or the RETURN slot of the hypercall page (CPL 3) */
	st.gpr[3] = mode == VMM_BARE_CPL3_MMIO ? STRATA_HC_VA + (STRATA_PORT_RETURN - STRATA_HC_PORT_BASE) * 4 : STRATA_PORT_RETURN;
	if ((rc = vmm_kvm_set_state(&b->kvm, &st)) < 0)
		goto out_free;
	*out = b;
	return 0;
out_free:
	vmm_bare_free(b);
	return rc;
}

int vmm_bare_run(struct vmm_bare *b)
{
	struct vmm_exit ex;
	int rc;

	if (b->mode == VMM_BARE_PTRACE)
		return bare_ptrace_run(b);
	do
		rc = b->sb ? b->sb->be->run(b->sb, &ex) : vmm_kvm_run(&b->kvm, &ex);
	while (rc == 0 && ex.kind == VMM_EXIT_INTR && b->sb);

	if (rc < 0)
		return rc;
	if (ex.kind == VMM_EXIT_IO_OUT && ex.port == STRATA_PORT_RETURN)
		return 0;
	if (ex.kind == VMM_EXIT_MMIO && ex.addr == STRATA_HC_GPA + (STRATA_PORT_RETURN - STRATA_HC_PORT_BASE) * 4)
		return 0;
	return VMM_E_UNEXPECTED_EXIT;
}

void vmm_bare_free(struct vmm_bare *b)
{
	if (!b)
		return;
	if (b->pid > 0) {
		kill(b->pid, SIGKILL);
		waitpid(b->pid, NULL, 0);
	}
	vmm_sandbox_destroy(b->sb);
	vmm_kvm_close(&b->kvm);
	if (b->mem)
		(void)st_sys_munmap(b->mem, b->size);
	free(b);
}
