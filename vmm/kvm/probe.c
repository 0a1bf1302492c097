/* probe.c: judging what the machine offers for sandboxes (KVM, kernel version) into actionable errors. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "vmm/vmm_int.h"

/* The KVM API version strata speaks (linux/kvm.h; stable since 2.6.22). */
#define KVM_API 12

bool vmm_kernel_version(const char *release, unsigned *major, unsigned *minor)
{
	unsigned a, b;
	char dot;

	if (!release || sscanf(release, "%u%c%u", &a, &dot, &b) != 3 || dot != '.')
		return false;
	*major = a;
	*minor = b;
	return true;
}

static bool kernel_too_old(const char *release)
{
	unsigned a, b;

	if (!vmm_kernel_version(release, &a, &b))
		return false;  /* unknown form: let the mechanisms speak for themselves */
	return a < VMM_KERNEL_MIN_MAJOR || (a == VMM_KERNEL_MIN_MAJOR && b < VMM_KERNEL_MIN_MINOR);
}

int vmm_kvm_diagnose(const struct vmm_kvm_facts *f, struct vmm_error *err)
{
	if (kernel_too_old(f->kernel))
		return vmm_fail(err, VMM_E_KERNEL_OLD,
				"Linux %s is older than %u.%u, the oldest kernel strata supports; "
				"run strata on a newer kernel", f->kernel, VMM_KERNEL_MIN_MAJOR,
				VMM_KERNEL_MIN_MINOR);
	switch (f->open_errno) {
	case 0:
		break;
	case ENOENT:
	case ENXIO:
	case ENODEV:
		if (f->vendor[0])
			return vmm_fail(err, VMM_E_KVM_UNBOUND,
					"/dev/kvm does not exist although %s is loaded: the module "
					"did not bind (inside a VM without nested virtualization, or a "
					"nested PVM host); `dmesg | grep -i kvm` says why", f->vendor);
		if (f->mod_kvm)
			return vmm_fail(err, VMM_E_KVM_UNBOUND,
					"/dev/kvm does not exist: the kvm module is loaded but no "
					"hardware module is (%s); load kvm_intel or kvm_amd, or enable "
					"virtualization in the firmware or the hypervisor",
					f->cpu_virt ? "the CPU has vmx/svm" : "the CPU shows no vmx/svm");
		return vmm_fail(err, VMM_E_NO_KVM,
				"/dev/kvm does not exist and no kvm module is loaded: %s",
				f->cpu_virt ? "load one (modprobe kvm_intel or kvm_amd)"
					    : "this machine offers no hardware virtualization (no vmx/svm)");
	case EACCES:
	case EPERM:
		/* Joining the group helps only where the group may read and
		 * write the device, and never by joining root. */
		if ((f->dev_mode & 060u) != 060u || !f->dev_group[0] || strcmp(f->dev_group, "root") == 0)
			return vmm_fail(err, VMM_E_KVM_DENIED,
					"permission denied opening /dev/kvm (mode %03o, group %s): %s; a udev rule "
					"KERNEL==\"kvm\", GROUP=\"kvm\", MODE=\"0660\" and joining kvm would "
					"grant it, or use --backend process (no KVM needed)",
					f->dev_mode & 0777u, f->dev_group[0] ? f->dev_group : "?",
					(f->dev_mode & 060u) != 060u ? "only its owner may open it"
								     : "joining root grants far more");
		return vmm_fail(err, VMM_E_KVM_DENIED,
				"permission denied opening /dev/kvm (mode %03o, group %s): add the "
				"user to that group (usermod -aG %s USER, then log in again) or run "
				"as root", f->dev_mode & 0777u, f->dev_group[0] ? f->dev_group : "?",
				f->dev_group[0] ? f->dev_group : "kvm");
	default:
		return vmm_fail(err, VMM_E_NO_KVM, "cannot open /dev/kvm: %s", strerror(f->open_errno));
	}
	if (f->api_version < 0)
		return vmm_fail(err, VMM_E_KVM_API,
				"/dev/kvm is not a KVM device (KVM_GET_API_VERSION: %s)",
				strerror(-f->api_version));
	if (f->api_version != KVM_API)
		return vmm_fail(err, VMM_E_KVM_API,
				"/dev/kvm speaks KVM API version %d; strata needs version %d",
				f->api_version, KVM_API);
	if (!f->sync_regs)
		return vmm_fail(err, VMM_E_KVM_API,
				"this KVM cannot stage registers in the vCPU run area (KVM_CAP_SYNC_REGS, "
				"Linux 4.16+), which restores use");
	if (f->run_size <= 0)
		return vmm_fail(err, VMM_E_KVM_API, "/dev/kvm gives no vCPU run area (KVM_GET_VCPU_MMAP_SIZE: %s)",
				f->run_size < 0 ? strerror(-f->run_size) : "0 bytes");
	return 0;
}
