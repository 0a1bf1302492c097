/* test_kvm_open.c: opening /dev/kvm in a process that has not opened it yet (a program of its own: the vmm suite's opens it first). */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store/sys.h"
#include "tests/kvm_check.h"
#include "vmm/vmm.h"

/* Running out of descriptors or memory while opening /dev/kvm says nothing
 * about KVM: the check reports it, and the next check opens it (regression:
 * the first open's failure was the process's verdict, so one EMFILE made
 * every later sandbox of the process refuse KVM, or the automatic backend
 * choice fall back to the process backend for good). */
Test(vmm_probe, a_passing_failure_to_open_dev_kvm_is_tried_again)
{
	struct vmm_error err;
	int status;

	/* Whether KVM works here, asked in a child: this process must not
	 * open /dev/kvm before the injected failure. */
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(vmm_kvm_check(NULL) == 0 ? 0 : 1);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		kvm_skip_or_fail("/dev/kvm is not usable here");

	st_sys_fault_set(1, EMFILE);
	int rc = vmm_kvm_check(&err);
	bool fired = st_sys_fault_fired();
	st_sys_fault_set(0, 0);
	cr_assert(fired, "opening /dev/kvm goes through the seam");
	cr_assert_eq(rc, VMM_E_NO_KVM);
	cr_assert(strstr(err.message, strerror(EMFILE)), "%s", err.message);
	cr_assert_eq(vmm_kvm_check(&err), 0, "%s", err.message);
}
