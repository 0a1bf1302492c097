/* test_kvm_open.c: opening /dev/kvm in a process that has not opened it yet (a program of its own: the vmm suite's opens it first). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <errno.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store/sys.h"
#include "tests/kvm_check.h"
#include "vmm/vmm.h"

/* Whether KVM works here, asked in a child: this process must not open
 * /dev/kvm before its test does. Skips (or fails, where KVM is required)
 * if it does not. */
static void kvm_usable_or_skip(void)
{
	int status;
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(vmm_kvm_check(NULL) == 0 ? 0 : 1);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		kvm_skip_or_fail("/dev/kvm is not usable here");
}

/* Running out of descriptors or memory while opening /dev/kvm says nothing
 * about KVM: the check reports it, and the next check opens it (regression:
 * the first open's failure was the process's verdict, so one EMFILE made
 * every later sandbox of the process refuse KVM, or the automatic backend
 * choice fall back to the process backend for good). */
Test(vmm_probe, a_passing_failure_to_open_dev_kvm_is_tried_again)
{
	struct vmm_error err;

	kvm_usable_or_skip();
	st_sys_fault_set(1, EMFILE);
	int rc = vmm_kvm_check(&err);
	bool fired = st_sys_fault_fired();
	st_sys_fault_set(0, 0);
	cr_assert(fired, "opening /dev/kvm goes through the seam");
	cr_assert_eq(rc, VMM_E_NO_KVM);
	cr_assert(strstr(err.message, strerror(EMFILE)), "%s", err.message);
	cr_assert_eq(vmm_kvm_check(&err), 0, "%s", err.message);
}

/* Is /dev/kvm open in this process? */
static bool dev_kvm_open(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	bool found = false;

	cr_assert(d);
	while (!found && (e = readdir(d))) {
		char path[300], target[64];
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		ssize_t n = readlink(path, target, sizeof(target) - 1);
		if (n > 0) {
			target[n] = 0;
			found = strcmp(target, "/dev/kvm") == 0;
		}
	}
	closedir(d);
	return found;
}

/* A process's first KVM sandbox waited for /dev/kvm to be opened and its
 * CPUID read (~0.45 ms under kvm_pvm) after its snapshot was opened and
 * verified; making a host begins that on a thread of its own, before any
 * sandbox (regression: nothing opened /dev/kvm until the first sandbox).
 * A fork meanwhile leaves the child a KVM it can settle. */
Test(vmm_probe, making_a_kvm_host_opens_dev_kvm_before_its_first_sandbox)
{
	struct vmm_host_config hc;
	struct vmm_host *h;
	struct vmm_error err;
	int status;

	kvm_usable_or_skip();
	cr_assert(!dev_kvm_open(), "nothing opened /dev/kvm yet");
	vmm_host_config_defaults(&hc);
	hc.backend = VMM_BACKEND_KVM;
	cr_assert_eq(vmm_host_new(&hc, &h, &err), 0, "%s", err.message);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(vmm_kvm_check(NULL) == 0 ? 0 : 1);
	/* A bound, not a speed: the thread may be slow to be scheduled. */
	bool opened = false;
	for (int i = 0; i < 5000 && !(opened = dev_kvm_open()); i++)
		usleep(1000);
	cr_assert(opened, "making a KVM host opens /dev/kvm before any sandbox");
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a child forked meanwhile settles KVM itself");
	cr_assert_eq(vmm_kvm_check(&err), 0, "%s", err.message);
	cr_assert_eq(vmm_host_free(h), 0);
}
