/* test_probe.c: why KVM cannot be used, in words a person can act on; kernel versions (no KVM needed). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/harness/harness.h"
#include "vmm/vmm_int.h"

/* A machine where everything works, to break one fact at a time. */
static struct vmm_kvm_facts good(void)
{
	struct vmm_kvm_facts f = { .api_version = 12, .run_size = 12288, .sync_regs = true, .mod_kvm = true,
				   .cpu_virt = true };

	snprintf(f.vendor, sizeof(f.vendor), "kvm_intel");
	snprintf(f.kernel, sizeof(f.kernel), "6.1.0-27-amd64");
	snprintf(f.dev_group, sizeof(f.dev_group), "kvm");
	f.dev_mode = 0660;
	return f;
}

static void expect(const struct vmm_kvm_facts *f, int code, const char *needle)
{
	struct vmm_error err;
	int rc = vmm_kvm_diagnose(f, &err);

	cr_assert_eq(rc, code, "code %d, want %d (%s)", rc, code, err.message);
	cr_assert_eq(err.code, code);
	cr_assert_not_null(strstr(err.message, needle), "'%s' lacks '%s'", err.message, needle);
	cr_assert_str_neq(vmm_strerror(code), strerror(-code), "vmm_strerror names %d", code);
}

static void expect_not(const struct vmm_kvm_facts *f, const char *needle)
{
	struct vmm_error err;

	vmm_kvm_diagnose(f, &err);
	cr_assert_null(strstr(err.message, needle), "'%s' has '%s'", err.message, needle);
}

Test(vmm_probe, a_working_kvm_is_usable)
{
	struct vmm_kvm_facts f = good();

	cr_assert_eq(vmm_kvm_diagnose(&f, NULL), 0);
}

Test(vmm_probe, no_dev_kvm_and_no_module_says_to_load_one)
{
	struct vmm_kvm_facts f = good();

	f.open_errno = ENOENT;
	f.mod_kvm = false;
	f.vendor[0] = 0;
	expect(&f, VMM_E_NO_KVM, "modprobe kvm_intel or kvm_amd");
	f.cpu_virt = false;
	expect(&f, VMM_E_NO_KVM, "no hardware virtualization");
}

Test(vmm_probe, a_module_loaded_but_not_bound_is_named)
{
	struct vmm_kvm_facts f = good();

	f.open_errno = ENOENT;
	snprintf(f.vendor, sizeof(f.vendor), "kvm_pvm");
	expect(&f, VMM_E_KVM_UNBOUND, "kvm_pvm is loaded");
	expect(&f, VMM_E_KVM_UNBOUND, "dmesg");
	f.vendor[0] = 0;
	expect(&f, VMM_E_KVM_UNBOUND, "no hardware module");
}

Test(vmm_probe, permission_denied_names_the_group_to_join)
{
	struct vmm_kvm_facts f = good();

	f.open_errno = EACCES;
	expect(&f, VMM_E_KVM_DENIED, "usermod -aG kvm");
	expect(&f, VMM_E_KVM_DENIED, "mode 660");
	snprintf(f.dev_group, sizeof(f.dev_group), "virt");
	expect(&f, VMM_E_KVM_DENIED, "group virt");
	/* A device only its owner may open: joining its group does not help. */
	f.dev_mode = 0600;
	snprintf(f.dev_group, sizeof(f.dev_group), "root");
	expect(&f, VMM_E_KVM_DENIED, "mode 600, group root): only its owner may open it");
	expect(&f, VMM_E_KVM_DENIED, "GROUP=\"kvm\", MODE=\"0660\"");
	expect(&f, VMM_E_KVM_DENIED, "--backend process");
	expect_not(&f, "usermod -aG root");
	/* Group root with group access: not "join root" either. */
	f.dev_mode = 0660;
	expect(&f, VMM_E_KVM_DENIED, "joining root grants far more");
	expect_not(&f, "usermod -aG root");
}

Test(vmm_probe, another_api_version_or_not_kvm_at_all)
{
	struct vmm_kvm_facts f = good();

	f.api_version = 11;
	expect(&f, VMM_E_KVM_API, "API version 11; strata needs version 12");
	f.api_version = -ENOTTY;
	expect(&f, VMM_E_KVM_API, "not a KVM device");
	f.api_version = 12;
	f.run_size = -EINVAL;
	expect(&f, VMM_E_KVM_API, "no vCPU run area");
	f.run_size = 12288;
	f.sync_regs = false;
	expect(&f, VMM_E_KVM_API, "KVM_CAP_SYNC_REGS");
}

Test(vmm_probe, a_kernel_older_than_supported_names_both_versions)
{
	struct vmm_kvm_facts f = good();

	snprintf(f.kernel, sizeof(f.kernel), "4.19.0-26-amd64");
	expect(&f, VMM_E_KERNEL_OLD, "Linux 4.19.0-26-amd64 is older than 5.10");
	snprintf(f.kernel, sizeof(f.kernel), "5.9.16");
	expect(&f, VMM_E_KERNEL_OLD, "older than 5.10");
	/* the oldest supported, and newer ones, pass */
	snprintf(f.kernel, sizeof(f.kernel), "5.10.0-32-amd64");
	cr_assert_eq(vmm_kvm_diagnose(&f, NULL), 0);
	snprintf(f.kernel, sizeof(f.kernel), "5.15.0-125-generic");
	cr_assert_eq(vmm_kvm_diagnose(&f, NULL), 0);
}

Test(vmm_probe, kernel_releases_parse_or_are_refused)
{
	unsigned a = 0, b = 0;

	cr_assert(vmm_kernel_version("6.18.44-fc-v1045", &a, &b));
	cr_assert_eq(a, 6);
	cr_assert_eq(b, 18);
	cr_assert(vmm_kernel_version("5.14.0-427.el9.x86_64", &a, &b));
	cr_assert_eq(b, 14);
	cr_assert_not(vmm_kernel_version("", &a, &b));
	cr_assert_not(vmm_kernel_version("six", &a, &b));
	cr_assert_not(vmm_kernel_version("6-1", &a, &b));
	cr_assert_not(vmm_kernel_version(NULL, &a, &b));
}

/* The real probe agrees with the device: it says usable exactly when
 * /dev/kvm opens and answers as KVM (checked here with plain syscalls). */
Test(vmm_probe, the_check_agrees_with_this_machine)
{
	struct vmm_error err;
	int rc = vmm_kvm_check(&err);
	int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);

	if (fd < 0) {
		cr_assert_lt(rc, 0, "no /dev/kvm (%s) yet the check says usable", strerror(errno));
		cr_assert_gt(strlen(err.message), 20, "a reason is given");
		return;
	}
	close(fd);
	if (rc < 0) {
		char why[512];
		cr_assert_neq(harness_has("KVM", why, sizeof(why)), 1,
			      "strata says KVM is unusable (%s), but the harness's own check ran a guest: %s", err.message, why);
		cr_assert(rc == VMM_E_KVM_API || rc == VMM_E_KERNEL_OLD, "%s", err.message);
	}
	/* asked twice, the answer stays */
	cr_assert_eq(vmm_kvm_check(NULL), rc);
}
