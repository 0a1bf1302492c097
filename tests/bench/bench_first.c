/* bench_first.c: strata-bench-first, one process's first sandbox and its floors, each timed from main() and printed in ns. */
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "vmm/bare.h"
#include "vmm/vmm.h"

/*
 * strata-bench runs this program afresh for every iteration of the
 * first_in_process cases and of their floors (bench_cold.c, bench_vmm.c),
 * so that each pays what a new process pays: nothing made, cached, faulted
 * in or initialised before. The clock starts at main(), after the dynamic
 * loader (a process's own start is the start group's), and stops when the
 * work is done; freeing and exit are not timed. Prints the nanoseconds on
 * stdout; exits non-zero, saying why on stderr, if the work failed.
 *
 *   strata-bench-first kvm_floor
 *   strata-bench-first process_floor
 *   strata-bench-first sandbox kvm|process DIR [verify]
 */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * The kernel's part of a first VM and nothing else, in raw ioctls: a VM,
 * one page of guest memory in a memslot, a vCPU with its run area, and one
 * KVM_RUN of a guest that exits at once. The vCPU starts in its reset
 * state (real mode, CS base 0xffff0000, IP 0xfff0), so its first
 * instruction is the page's byte 0xff0 at 0xfffffff0: `out %al, $0x10`.
 * No CPUID, registers or page tables: a sandbox sets those up, and that is
 * what the floor leaves to it.
 */
static int kvm_floor(void)
{
	int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC), vm = -1, vcpu = -1;
	uint8_t *mem = MAP_FAILED;
	struct kvm_run *run = MAP_FAILED;
	long size = -1;
	int rc = -1;

	if (kvm < 0 || (vm = ioctl(kvm, KVM_CREATE_VM, 0)) < 0)
		goto out;
	mem = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		goto out;
	mem[0xff0] = 0xe6;  /* out %al, $0x10 */
	mem[0xff1] = 0x10;
	struct kvm_userspace_memory_region r = {
		.slot = 0, .guest_phys_addr = 0xfffff000, .memory_size = 4096, .userspace_addr = (uintptr_t)mem
	};
	if (ioctl(vm, KVM_SET_USER_MEMORY_REGION, &r) < 0 || (vcpu = ioctl(vm, KVM_CREATE_VCPU, 0)) < 0 ||
	    (size = ioctl(kvm, KVM_GET_VCPU_MMAP_SIZE, 0)) <= 0)
		goto out;
	run = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, vcpu, 0);
	if (run == MAP_FAILED || ioctl(vcpu, KVM_RUN, 0) < 0)
		goto out;
	if (run->exit_reason != KVM_EXIT_IO || run->io.port != 0x10) {
		fprintf(stderr, "strata-bench-first: kvm_floor: exit %u, not the guest's out\n", run->exit_reason);
		errno = EPROTO;
		goto out;
	}
	rc = 0;
out:
	if (rc < 0 && errno != EPROTO)
		fprintf(stderr, "strata-bench-first: kvm_floor: %s\n", strerror(errno));
	/* Left to exit: closing and unmapping are not the floor's. */
	return rc;
}

static int echo(struct vmm_sandbox *sb)
{
	struct vmm_value a = { .type = VMM_STR, .data = "hello!", .len = 6 };
	struct vmm_result r = { 0 };
	int rc = vmm_sandbox_call(sb, "echo", &a, 1, &r);

	vmm_result_clear(&r);
	return rc;
}

/* What a program embedding strata does first: a host with the defaults, the
 * snapshot directory opened (verified where asked), a sandbox from it and
 * one call. */
static int sandbox(enum vmm_backend_kind kind, const char *dir, unsigned flags, uint64_t *t1)
{
	struct vmm_host_config hc;
	struct vmm_host *host = NULL;
	struct vmm_snapdir *d = NULL;
	struct vmm_sandbox *sb = NULL;
	struct vmm_error err = { 0 };
	int rc;

	vmm_host_config_defaults(&hc);
	hc.backend = kind;
	if ((rc = vmm_host_new(&hc, &host, &err)) < 0 || (rc = vmm_snapdir_open(host, dir, flags, &d, &err)) < 0)
		goto out;
	struct vmm_config cfg = { .host = host };
	if ((rc = vmm_sandbox_from_snapdir(d, &cfg, &sb, &err)) < 0)
		goto out;
	rc = echo(sb);
	*t1 = now_ns();
out:
	if (rc < 0)
		fprintf(stderr, "strata-bench-first: sandbox %s: %s\n", dir, err.message[0] ? err.message : vmm_strerror(rc));
	vmm_sandbox_free(sb);
	vmm_snapdir_close(d);
	vmm_host_free(host);
	return rc;
}

int main(int argc, char **argv)
{
	uint64_t t0 = now_ns(), t1 = 0;
	int rc;

	if (argc == 2 && strcmp(argv[1], "kvm_floor") == 0) {
		rc = kvm_floor();
		t1 = now_ns();
	} else if (argc == 2 && strcmp(argv[1], "process_floor") == 0) {
		/* The child program spawned, one round trip (vmm/bare.c). */
		struct vmm_bare *b = NULL;
		if ((rc = vmm_bare_new(VMM_BARE_PROCESS, &b)) == 0)
			rc = vmm_bare_run(b);
		t1 = now_ns();
		if (rc < 0)
			fprintf(stderr, "strata-bench-first: process_floor: %s\n", vmm_strerror(rc));
		vmm_bare_free(b);
	} else if ((argc == 4 || argc == 5) && strcmp(argv[1], "sandbox") == 0 &&
		   (strcmp(argv[2], "kvm") == 0 || strcmp(argv[2], "process") == 0)) {
		enum vmm_backend_kind kind = strcmp(argv[2], "kvm") == 0 ? VMM_BACKEND_KVM : VMM_BACKEND_PROCESS;
		unsigned flags = argc == 5 && strcmp(argv[4], "verify") == 0 ? VMM_SNAPDIR_VERIFY : 0;
		rc = sandbox(kind, argv[3], flags, &t1);
	} else {
		fprintf(stderr, "usage: strata-bench-first kvm_floor | process_floor | sandbox kvm|process DIR [verify]\n");
		return 2;
	}
	if (rc < 0)
		return 1;
	printf("%llu\n", (unsigned long long)(t1 - t0));
	return 0;
}
