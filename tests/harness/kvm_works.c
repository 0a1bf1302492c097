/* kvm_works.c: the test harness's own "this machine has KVM" check, linked with nothing of strata: a guest runs one out. */
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

/*
 * Prints one line, "1 WHAT RAN" or "0 WHY NOT", and exits 0 either way
 * (status 2 only for a usage error). The suites that skip because
 * strata's own check calls KVM unusable compare their verdict with this
 * one (tests/harness/harness.h, docs/testing.md).
 *
 * The guest: one page at guest address 0x1000 holding
 *   mov $0x5a, %al; out %al, $0x42; hlt
 * run in real mode, which every KVM flavour boots into. The check passes
 * when KVM_RUN comes back with an I/O exit on port 0x42 carrying 0x5a.
 */
#define GUEST_ADDR 0x1000
#define PORT 0x42
#define VALUE 0x5a

static int no(const char *what)
{
	printf("0 %s: %s\n", what, strerror(errno));
	return 0;
}

int main(int argc, char **argv)
{
	static const uint8_t code[] = { 0xb0, VALUE, 0xe6, PORT, 0xf4 };
	const char *dev = argc > 1 ? argv[1] : "/dev/kvm";

	if (argc > 2) {
		fprintf(stderr, "usage: kvm_works [DEVICE]\n");
		return 2;
	}
	int kvm = open(dev, O_RDWR | O_CLOEXEC);
	if (kvm < 0)
		return no(dev);
	int api = ioctl(kvm, KVM_GET_API_VERSION, 0);
	if (api != KVM_API_VERSION) {
		printf("0 %s answers KVM_GET_API_VERSION with %d, not %d\n", dev, api, KVM_API_VERSION);
		return 0;
	}
	int vm = ioctl(kvm, KVM_CREATE_VM, 0);
	if (vm < 0)
		return no("KVM_CREATE_VM");
	void *mem = mmap(NULL, 0x1000, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		return no("mmap");
	memcpy(mem, code, sizeof(code));
	struct kvm_userspace_memory_region slot = {
		.slot = 0, .guest_phys_addr = GUEST_ADDR, .memory_size = 0x1000, .userspace_addr = (uintptr_t)mem,
	};
	if (ioctl(vm, KVM_SET_USER_MEMORY_REGION, &slot) < 0)
		return no("KVM_SET_USER_MEMORY_REGION");
	int vcpu = ioctl(vm, KVM_CREATE_VCPU, 0);
	if (vcpu < 0)
		return no("KVM_CREATE_VCPU");
	int run_size = ioctl(kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (run_size < (int)sizeof(struct kvm_run))
		return no("KVM_GET_VCPU_MMAP_SIZE");
	struct kvm_run *run = mmap(NULL, (size_t)run_size, PROT_READ | PROT_WRITE, MAP_SHARED, vcpu, 0);
	if (run == MAP_FAILED)
		return no("mmap of the vCPU's kvm_run");
	struct kvm_sregs s;
	if (ioctl(vcpu, KVM_GET_SREGS, &s) < 0)
		return no("KVM_GET_SREGS");
	s.cs.base = 0;
	s.cs.selector = 0;
	if (ioctl(vcpu, KVM_SET_SREGS, &s) < 0)
		return no("KVM_SET_SREGS");
	struct kvm_regs r = { .rip = GUEST_ADDR, .rflags = 0x2 };
	if (ioctl(vcpu, KVM_SET_REGS, &r) < 0)
		return no("KVM_SET_REGS");
	if (ioctl(vcpu, KVM_RUN, 0) < 0)
		return no("KVM_RUN");
	if (run->exit_reason != KVM_EXIT_IO) {
		printf("0 the guest's out exited with reason %u, not KVM_EXIT_IO (%u)\n", run->exit_reason, KVM_EXIT_IO);
		return 0;
	}
	uint8_t got = *((uint8_t *)run + run->io.data_offset);
	if (run->io.direction != KVM_EXIT_IO_OUT || run->io.port != PORT || run->io.size != 1 || got != VALUE) {
		printf("0 the guest's out reached port 0x%x with 0x%x (size %u), not port 0x%x with 0x%x\n", run->io.port,
		       got, run->io.size, PORT, VALUE);
		return 0;
	}
	printf("1 %s ran a guest instruction (out 0x%x to port 0x%x)\n", dev, VALUE, PORT);
	return 0;
}
