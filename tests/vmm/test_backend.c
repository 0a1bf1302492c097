/* test_backend.c: choosing a backend: names, what a sandbox reports, each host's own, refusals that name the other backend. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "tests/kvm_check.h"
#include "tests/proc_child.h"
#include "vmm/proc/proc_abi.h"

Test(vmm_backend, names_round_trip_and_junk_is_refused)
{
	static const enum vmm_backend_kind all[] = { VMM_BACKEND_AUTO, VMM_BACKEND_KVM, VMM_BACKEND_PROCESS };
	enum vmm_backend_kind k;

	for (unsigned i = 0; i < 3; i++) {
		cr_assert_eq(vmm_backend_parse(vmm_backend_name(all[i]), &k), 0);
		cr_assert_eq(k, all[i]);
	}
	cr_assert_eq(vmm_backend_parse("qemu", &k), -EINVAL);
	cr_assert_eq(vmm_backend_parse("", &k), -EINVAL);
	cr_assert_eq(vmm_backend_parse(NULL, &k), -EINVAL);
}

Test(vmm_backend, a_sandbox_names_the_backend_it_runs_on)
{
	struct vmm_sandbox *sb = guest_new(NULL);
	enum vmm_backend_kind want = vmm_backend_resolve(NULL, VMM_BACKEND_AUTO);

	cr_assert_neq(want, VMM_BACKEND_AUTO);
	cr_assert_eq(vmm_sandbox_backend(sb), want);
	vmm_sandbox_free(sb);
	/* Asked for by name, the process backend runs anywhere. */
	struct vmm_config cfg = { .backend = VMM_BACKEND_PROCESS };
	sb = guest_new(&cfg);
	cr_assert_eq(vmm_sandbox_backend(sb), VMM_BACKEND_PROCESS);
	struct vmm_result res;
	cr_assert_eq(call_i64(sb, "add", 40, 2, 2, &res), 0, "%s", vmm_sandbox_error(sb)->message);
	cr_assert_eq(res.i64, 42);
	vmm_sandbox_free(sb);
}

Test(vmm_backend, many_process_sandboxes_live_side_by_side)
{
	struct vmm_config cfg = { .backend = VMM_BACKEND_PROCESS };
	struct vmm_sandbox *sb[8];
	struct vmm_result res;

	for (unsigned i = 0; i < 8; i++)
		sb[i] = guest_new(&cfg);
	for (unsigned round = 0; round < 3; round++)
		for (unsigned i = 0; i < 8; i++) {
			cr_assert_eq(vmm_sandbox_call(sb[i], "counter_next", NULL, 0, &res), 0);
			cr_assert_eq(res.i64, round + 1);
		}
	for (unsigned i = 0; i < 8; i++)
		vmm_sandbox_free(sb[i]);
}


/* The control page's second half and the signal stack below the frame of
 * the child's reports are never written but by a guest: they stay holes
 * in the memfd, allocated for no sandbox (regression: starting the child
 * zeroed and read all 24 KiB of them, 20 KiB more per sandbox). */
Test(vmm_backend, a_process_sandbox_allocates_no_shared_page_it_does_not_use)
{
	struct vmm_config cfg = { .backend = VMM_BACKEND_PROCESS };
	struct vmm_sandbox *sb = guest_new(&cfg);
	struct vmm_result res;
	uint64_t mem_size = 0, uc = 0;
	char path[64];

	cr_assert_eq(vmm_sandbox_call(sb, "counter_next", NULL, 0, &res), 0);
	pid_t pid = proc_child_find(&mem_size);
	cr_assert_gt(pid, 0, "the sandbox's child is not among this process's children");
	snprintf(path, sizeof(path), "/proc/%d/fd/3", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		vmm_sandbox_free(sb);
		cr_skip_test("cannot open the child's memfd (%s): needs CAP_SYS_PTRACE", strerror(errno));
	}
	cr_assert_eq(pread(fd, &uc, 8, (off_t)(mem_size + CTL_UC)), 8);
	cr_assert(uc > PROC_ALT_LO + 16 && uc < PROC_END, "the first report's frame is in the signal stack");
	/* The first page with data after the control page's first: the one
	 * holding the bottom of the stub's stack, under the frame. */
	uint64_t live = (uc - 16 - PROC_ALT_LO) / 4096 * 4096;
	off_t d = lseek(fd, (off_t)(mem_size + 4096), SEEK_DATA);
	cr_assert_eq((uint64_t)d, mem_size + PROC_CTL_SIZE + live,
		     "data at memfd offset +%lld past guest memory, not only from the frame's page (+%llu)",
		     (long long)d - (long long)mem_size, (unsigned long long)(PROC_CTL_SIZE + live));
	close(fd);
	vmm_sandbox_free(sb);
}

/* The number on /proc/PID/status's line "key: N" (kB for sizes); -1 if missing. */
static long long status_value(pid_t pid, const char *key)
{
	char path[64], line[256];
	long long v = -1;
	size_t n = strlen(key);
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (!(f = fopen(path, "re")))
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, key, n) == 0 && line[n] == ':')
			v = atoll(line + n + 1);
	fclose(f);
	return v;
}

/*
 * What an idle child keeps (docs/restore-from-path.md, "Density"): its mappings are
 * guest memory, its code, the control pages and the signal stack, all
 * below PROC_END (no startup stack, no vDSO or its data pages: nothing
 * above but the kernel's [vsyscall]), in one 512 GiB slot of the top-level
 * page table, so its page tables are exactly one upper-level table, one
 * middle table per GiB and one last-level table per 2 MiB it has pages in
 * (regression: the child sat in a slot of its own at 0x7e00_0000_0000 and
 * kept the vDSO: 4 KiB more page tables and three more mappings each).
 */
Test(vmm_backend, an_idle_process_child_keeps_only_its_pages_and_their_page_tables)
{
	struct vmm_config cfg = { .backend = VMM_BACKEND_PROCESS };
	struct vmm_sandbox *sb = guest_new(&cfg);
	struct vmm_result res;
	uint64_t mem_size = 0, top[8], gib[64], mib2[256];
	size_t ntop = 0, ngib = 0, nmib2 = 0, nmaps = 0;
	char path[64], line[512];

	_Static_assert(PROC_END <= (512ull << 30), "the child's pages share guest memory's top-level slot");
	cr_assert_eq(vmm_sandbox_call(sb, "counter_next", NULL, 0, &res), 0);
	pid_t pid = proc_child_find(&mem_size);
	cr_assert_gt(pid, 0, "the sandbox's child is not among this process's children");
	snprintf(path, sizeof(path), "/proc/%d/pagemap", (int)pid);
	int pm = open(path, O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *maps = fopen(path, "re");
	if (pm < 0 || !maps) {
		vmm_sandbox_free(sb);
		cr_skip_test("cannot read the child's pagemap or maps (%s): needs CAP_SYS_PTRACE", strerror(errno));
	}
	while (fgets(line, sizeof(line), maps)) {
		unsigned long long lo, hi;
		cr_assert_eq(sscanf(line, "%llx-%llx", &lo, &hi), 2);
		if (strstr(line, "[vsyscall]"))
			continue;  /* the kernel's, in its half of the address space */
		nmaps++;
		cr_assert(hi <= PROC_END, "the child maps something above its signal stack: %s", line);
		for (uint64_t va = lo; va < hi; va += 4096) {
			uint64_t e = 0;
			cr_assert_eq(pread(pm, &e, 8, (off_t)(va / 4096 * 8)), 8);
			if (!(e >> 63))
				continue;  /* no page: no last-level entry */
			const uint64_t keys[3] = { va >> 39, va >> 30, va >> 21 };
			uint64_t *sets[3] = { top, gib, mib2 };
			size_t *ns[3] = { &ntop, &ngib, &nmib2 }, caps[3] = { 8, 64, 256 };
			for (unsigned k = 0; k < 3; k++) {
				size_t i = 0;
				while (i < *ns[k] && sets[k][i] != keys[k])
					i++;
				if (i == *ns[k]) {
					cr_assert_lt(*ns[k], caps[k]);
					sets[k][(*ns[k])++] = keys[k];
				}
			}
		}
	}
	fclose(maps);
	close(pm);
	cr_assert_eq(ntop, 1, "the child's pages span %zu top-level slots", ntop);
	cr_assert_leq(nmaps, 16u, "%zu mappings", nmaps);
	/* VmPTE counts every page table but the top-level one. */
	long long pte = status_value(pid, "VmPTE"), want = (long long)(ntop + ngib + nmib2) * 4;
	cr_assert_geq(pte, 0);
	cr_assert_leq(pte, want, "the child's page tables take %lld KiB, its pages need %lld KiB", pte, want);
	vmm_sandbox_free(sb);
}

/* The child's descriptor table is a new process's, whatever the host holds
 * (regression: the child was cloned with a copy of the host's table, which
 * exec kept: with a thousand sandboxes thousands of entries each, some
 * 40 KiB of kernel memory per child at 1,000, and a copy at every spawn). */
Test(vmm_backend, a_process_child_holds_a_small_descriptor_table_whatever_the_host_holds)
{
	struct vmm_config cfg = { .backend = VMM_BACKEND_PROCESS };
	enum { MANY = 600 };
	int fds[MANY];
	uint64_t mem_size = 0;

	for (unsigned i = 0; i < MANY; i++)
		cr_assert_geq(fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC), 0, "%s", strerror(errno));
	struct vmm_sandbox *sb = guest_new(&cfg);
	pid_t pid = proc_child_find(&mem_size);
	cr_assert_gt(pid, 0, "the sandbox's child is not among this process's children");
	long long size = status_value(pid, "FDSize");
	cr_assert_gt(size, 0);
	cr_assert_leq(size, 64, "the child's table has room for %lld descriptors (the host holds %d more)", size, MANY);
	vmm_sandbox_free(sb);
	for (unsigned i = 0; i < MANY; i++)
		close(fds[i]);
}

Test(vmm_backend, a_process_sandbox_refuses_snapshots_and_names_kvm)
{
	struct vmm_config cfg = { .backend = VMM_BACKEND_PROCESS };
	struct vmm_sandbox *sb = guest_new(&cfg);

	cr_assert_eq(vmm_sandbox_restore(sb), VMM_E_NO_SNAPSHOT);
	struct vmm_result res;
	cr_assert_eq(call_i64(sb, "add", 1, 2, 2, &res), 0);
	vmm_sandbox_free(sb);
}

/* The default backend is the host's: two hosts of one process, each
 * naming its own, run their sandboxes there; a sandbox's own
 * vmm_config.backend still wins; the default host is not touched. */
Test(vmm_backend, two_hosts_in_one_process_run_on_their_own_backends)
{
	kvm_require_always();
	enum vmm_backend_kind before = vmm_backend_resolve(NULL, VMM_BACKEND_AUTO);
	struct vmm_host_config hc;
	struct vmm_host *kvm, *proc;
	struct vmm_error err;

	vmm_host_config_defaults(&hc);
	hc.backend = VMM_BACKEND_KVM;
	cr_assert_eq(vmm_host_new(&hc, &kvm, &err), 0, "%s", err.message);
	hc.backend = VMM_BACKEND_PROCESS;
	cr_assert_eq(vmm_host_new(&hc, &proc, &err), 0, "%s", err.message);
	cr_assert_eq(vmm_backend_resolve(kvm, VMM_BACKEND_AUTO), VMM_BACKEND_KVM);
	cr_assert_eq(vmm_backend_resolve(proc, VMM_BACKEND_AUTO), VMM_BACKEND_PROCESS);
	cr_assert_eq(vmm_backend_resolve(proc, VMM_BACKEND_KVM), VMM_BACKEND_KVM);

	struct vmm_config ck = { .host = kvm }, cp = { .host = proc },
			  cp_kvm = { .host = proc, .backend = VMM_BACKEND_KVM };
	struct vmm_sandbox *a = guest_new(&ck), *b = guest_new(&cp), *c = guest_new(&cp_kvm);
	cr_assert_eq(vmm_sandbox_backend(a), VMM_BACKEND_KVM);
	cr_assert_eq(vmm_sandbox_backend(b), VMM_BACKEND_PROCESS);
	cr_assert_eq(vmm_sandbox_backend(c), VMM_BACKEND_KVM, "the sandbox's own config wins over its host's");
	struct vmm_sandbox *all[] = { a, b, c };
	for (unsigned i = 0; i < 3; i++) {
		struct vmm_result res;
		cr_assert_eq(call_i64(all[i], "add", 40, 2, 2, &res), 0, "%s", vmm_sandbox_error(all[i])->message);
		cr_assert_eq(res.i64, 42);
		vmm_sandbox_free(all[i]);
	}
	cr_assert_eq(vmm_backend_resolve(NULL, VMM_BACKEND_AUTO), before, "other hosts leave the default as it was");
	cr_assert_eq(vmm_host_free(kvm), 0);
	cr_assert_eq(vmm_host_free(proc), 0);
}

Test(vmm_backend, a_host_refuses_an_unknown_backend)
{
	struct vmm_host_config hc;
	struct vmm_host *h = (struct vmm_host *)&hc;
	struct vmm_error err;

	vmm_host_config_defaults(&hc);
	hc.backend = (enum vmm_backend_kind)7;
	cr_assert_eq(vmm_host_new(&hc, &h, &err), VMM_E_BAD_CONFIG);
	cr_assert_eq(h, (struct vmm_host *)&hc, "*out untouched");
	cr_assert(strstr(err.message, "backend"), "%s", err.message);
}
