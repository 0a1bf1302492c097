/* test_hostile.c: the hostile guest (vmm/guest/hostileguest.c) on each backend: no channel keeps state across a restore in place, a new sandbox from the warm list or a pool. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include "vmm/abi.h"
#include "vmm/snap_int.h"
#include "tests/proc_child.h"

/* A hostile-guest sandbox, captured once (its snapshot is the state every
 * later call must start from). */
static struct vmm_sandbox *hostile_new(void)
{
	struct vmm_sandbox *sb = NULL;
	struct vmm_error err;

	cr_assert_eq(vmm_sandbox_new(HOSTILEGUEST, NULL, &sb, &err), 0, "sandbox: %s", err.message);
	cr_assert_eq(sh_snap(sb, NULL), 0);
	return sb;
}

Test(hostile, the_memory_counter_is_reset_by_a_restore, .init = sh_setup, .fini = sh_teardown)
{
	struct vmm_sandbox *sb = hostile_new();

	for (int round = 0; round < 3; round++) {
		int64_t v = sh_call_i(sb, "memory_next", 0, 0);
		cr_assert_eq(v, 1, "round %d: the counter kept its value across a restore (%lld)", round, (long long)v);
		cr_assert_eq(vmm_sandbox_restore(sb), 0, "%s", vmm_sandbox_error(sb)->message);
	}
	vmm_sandbox_free(sb);
}

/*
 * The process backend's channels (hostileguest.c): state kept in the
 * child's own pages, registers outside the snapshot's, mappings made
 * through the stub's system call. On KVM none of them exists: each call
 * faults (nothing is mapped at PROC_BASE, rdfsbase is #UD), which closes
 * the channel too.
 */
static const char *const channels[] = {
	"altstack_next", "stack_next", "ctl_next", "child_data_next", "fsbase_next", "gsbase_next",
	"memfd_alias_next", "madv_remove_next", "stub_code_next", "mmap_1g_next", "mlock_next",
	"hwpoison_try", "soft_offline_try", "page_tables_next", "forged_stop_next",
};
#define NCHANNELS (sizeof(channels) / sizeof(channels[0]))

/* A channel is refused where the guest faulted, the stub's filter ended
 * its process, or the guest gave up with a reason. */
static bool process_refused(int rc, const struct vmm_error *e)
{
	(void)e;
	return rc == VMM_E_GUEST_ERROR || rc == VMM_E_GUEST_FAULT || rc == VMM_E_SHUTDOWN;
}

static int64_t channel_call(struct vmm_sandbox *sb, const char *fn)
{
	return sh_channel_call(sb, fn, process_refused);
}

/* Channels whose state survived, named once each (every channel is tried
 * before the test fails, so one run shows them all). */
static char survived[1024];

/* A channel after a restore: 1 (the snapshot's state plus one), or refused. */
static void channel_fresh(struct vmm_sandbox *sb, const char *fn, const char *after)
{
	int64_t v = channel_call(sb, fn);
	char one[160];

	if (v == 0 || v == 1)
		return;
	snprintf(one, sizeof(one), " %s", fn);
	if (strstr(survived, one))
		return;
	cr_log_error("%s after %s returned %lld: state survived", fn, after, (long long)v);
	strncat(survived, one, sizeof(survived) - strlen(survived) - 1);
}

static void none_survived(void)
{
	cr_assert_eq(survived[0], 0, "state survived through:%s", survived);
}

/* The hostile guest, captured once, checking every restore; *m (may be
 * NULL) gets its snapshot. */
static struct vmm_sandbox *hostile_snap(const struct vmm_config *cfg, struct st_manifest **m)
{
	struct vmm_sandbox *sb = NULL;
	struct vmm_error err;

	cr_assert_eq(vmm_sandbox_new(HOSTILEGUEST, cfg, &sb, &err), 0, "sandbox: %s", err.message);
	cr_assert_eq(sh_snap(sb, m), 0);
	vmm_sandbox_set_debug(sb, true);
	return sb;
}

/* A restore after fn: 0, or the channel is named as surviving (the debug
 * check found what it left behind, VMM_E_LEAK). */
static int restore_after(struct vmm_sandbox *sb, const char *fn)
{
	int rc = vmm_sandbox_restore(sb);
	char one[160];

	if (rc == VMM_E_LEAK) {
		snprintf(one, sizeof(one), " %s(check)", fn);
		cr_log_error("restore after %s: %s", fn, vmm_sandbox_error(sb)->message);
		strncat(survived, one, sizeof(survived) - strlen(survived) - 1);
		return rc;
	}
	cr_assert_eq(rc, 0, "after %s: %s", fn, vmm_sandbox_error(sb)->message);
	return 0;
}

Test(hostile, no_process_channel_survives_a_restore_in_place, .init = sh_setup, .fini = sh_teardown)
{
	for (size_t i = 0; i < NCHANNELS; i++) {
		struct vmm_sandbox *sb = hostile_snap(NULL, NULL);
		for (int round = 0; round < 3; round++) {
			channel_fresh(sb, channels[i], round ? "a restore in place" : "the capture");
			if (restore_after(sb, channels[i]) < 0)
				break;
		}
		vmm_sandbox_free(sb);
	}
	/* Every channel in one life, then each after one restore. */
	struct vmm_sandbox *sb = hostile_snap(NULL, NULL);
	for (size_t i = 0; i < NCHANNELS; i++)
		channel_call(sb, channels[i]);
	if (restore_after(sb, "every channel") == 0)
		for (size_t i = 0; i < NCHANNELS; i++)
			channel_fresh(sb, channels[i], "a restore after every channel");
	vmm_sandbox_free(sb);
	none_survived();
}

/* Three lives of one channel, each a new sandbox from the same snapshot and
 * host: from the second on, the one the last life freed (its warm list). */
static void warm_lives(struct vmm_host *host, const struct st_manifest *m, const char *fn)
{
	struct vmm_config cfg = { .host = host };
	struct vmm_host_stats hs;
	struct vmm_sandbox *sb;
	struct vmm_error err;

	cr_assert_eq(vmm_sandbox_from_snapshot(m, vmm_layer_open_store, sh_store, &cfg, &sb, &err), 0, "%s",
		     err.message);
	for (int life = 0; life < 3; life++) {
		channel_fresh(sb, fn, life ? "a new sandbox from the warm list" : "a new sandbox");
		vmm_sandbox_free(sb);
		vmm_host_stats(host, &hs);
		unsigned before = hs.warm;
		cr_assert_eq(vmm_sandbox_from_snapshot(m, vmm_layer_open_store, sh_store, &cfg, &sb, &err), 0, "%s",
			     err.message);
		vmm_host_stats(host, &hs);
		if (before == 0) {
			/* Not parked: its reset failed (the debug check found a leak). */
			char one[160];
			snprintf(one, sizeof(one), " %s(not-kept)", fn);
			strncat(survived, one, sizeof(survived) - strlen(survived) - 1);
			break;
		}
		cr_assert_eq(hs.warm + 1, before, "the new sandbox came from the warm list");
	}
	vmm_sandbox_free(sb);
}

Test(hostile, no_process_channel_reaches_a_new_sandbox_from_the_warm_list, .init = sh_setup, .fini = sh_teardown)
{
	struct vmm_host_config hc;
	struct vmm_host *host;
	struct vmm_error err;
	struct st_manifest *m = NULL;

	vmm_host_config_defaults(&hc);
	hc.backend = vmm_backend_resolve(vmm_host_default(), VMM_BACKEND_AUTO); /* this run's backend */
	hc.warm = 2;
	hc.shells = 0;
	hc.debug = true;
	cr_assert_eq(vmm_host_new(&hc, &host, &err), 0, "%s", err.message);
	struct vmm_config cfg = { .host = host };
	vmm_sandbox_free(hostile_snap(&cfg, &m));
	for (size_t i = 0; i < NCHANNELS; i++)
		warm_lives(host, m, channels[i]);
	st_manifest_free(m);
	cr_assert_eq(vmm_host_free(host), 0);
	none_survived();
}

/* Refused outright: the boot-info page stays read-only (on KVM its page
 * table says so; on the process backend nothing may change a protection). */
Test(hostile, the_boot_info_page_cannot_be_made_writable, .init = sh_setup, .fini = sh_teardown)
{
	struct vmm_sandbox *sb = hostile_snap(NULL, NULL);
	struct vmm_result r = { 0 };
	int rc = vmm_sandbox_call(sb, "boot_info_write", NULL, 0, &r);

	cr_assert_lt(rc, 0, "the guest wrote its boot info (%lld)", (long long)r.i64);
	cr_log_info("refused: %s", vmm_sandbox_error(sb)->message);
	cr_assert_eq(vmm_sandbox_restore(sb), 0, "%s", vmm_sandbox_error(sb)->message);
	cr_assert_eq(sh_call_i(sb, "memory_next", 0, 0), 1);
	vmm_sandbox_free(sb);
}

/*
 * Stores to the pages the guest's page tables make read-only (its
 * read-only data, its code, the boot-info page), without asking for any
 * protection change: each faults, and neither a restore of that sandbox
 * nor another sandbox of the same snapshot sees a changed byte (on the
 * process backend those pages may be one copy shared by every sandbox of
 * the snapshot, as KVM shares them).
 */
Test(hostile, a_store_to_a_read_only_page_faults_and_changes_no_sandbox, .init = sh_setup, .fini = sh_teardown)
{
	static const char *const stores[] = { "rodata_store", "code_store", "boot_info_store" };
	struct vmm_host *host = sh_debug_host(0, 0);
	struct vmm_error err;
	struct st_manifest *m = NULL;
	struct vmm_config cfg = { .host = host };
	struct vmm_sandbox *a = hostile_snap(&cfg, &m), *b = NULL;
	const int64_t want = sh_call_i(a, "ro_read", 0, 0);
	cr_assert_eq(vmm_sandbox_restore(a), 0, "%s", vmm_sandbox_error(a)->message);
	cr_assert_eq(vmm_sandbox_from_snapshot(m, vmm_layer_open_store, sh_store, &cfg, &b, &err), 0, "%s",
		     err.message);
	/* b (restored from the snapshot's files) maps those pages from them. */
	for (size_t i = 0; i < 2 * sizeof(stores) / sizeof(stores[0]); i++) {
		struct vmm_sandbox *w = i % 2 ? a : b, *o = i % 2 ? b : a;
		const char *fn = stores[i / 2];
		struct vmm_result r = { 0 };
		int rc = vmm_sandbox_call(w, fn, NULL, 0, &r);
		cr_assert(rc == VMM_E_GUEST_FAULT || rc == VMM_E_SHUTDOWN, "%s: %d (%lld), %s", fn, rc, (long long)r.i64,
			  rc < 0 ? vmm_sandbox_error(w)->message : "the store was made");
		cr_assert_eq(sh_call_i(o, "ro_read", 0, 0), want, "another sandbox saw %s", fn);
		cr_assert_eq(vmm_sandbox_restore(o), 0, "%s", vmm_sandbox_error(o)->message);
		cr_assert_eq(vmm_sandbox_restore(w), 0, "after %s: %s", fn, vmm_sandbox_error(w)->message);
		cr_assert_eq(sh_call_i(w, "ro_read", 0, 0), want, "the restore after %s", fn);
		cr_assert_eq(vmm_sandbox_restore(w), 0, "%s", vmm_sandbox_error(w)->message);
	}
	vmm_sandbox_free(b);
	vmm_sandbox_free(a);
	st_manifest_free(m);
	cr_assert_eq(vmm_host_free(host), 0);
}

/*
 * On the process backend a sandbox restored from a snapshot's files maps
 * the pages its guest cannot write (code, read-only data, boot info) from
 * those files, shared and read-only, rather than copying them into its own
 * memory: one copy for every sandbox of the snapshot. None of those
 * mappings is writable.
 */
Test(hostile, a_process_sandbox_maps_the_read_only_pages_from_the_snapshot_s_file, .init = sh_setup,
     .fini = sh_teardown)
{
	struct st_manifest *m = NULL;
	struct vmm_sandbox *sb = NULL;
	struct vmm_error err;
	char path[64], line[512];
	unsigned shared = 0;

	if (vmm_backend_resolve(vmm_host_default(), VMM_BACKEND_AUTO) != VMM_BACKEND_PROCESS)
		cr_skip_test("the process backend's mappings");
	struct vmm_host *host = sh_debug_host(0, 0);  /* warm 0: a new sandbox, not the capturing one parked */
	struct vmm_config cfg = { .host = host };
	vmm_sandbox_free(hostile_snap(&cfg, &m));
	cr_assert_eq(vmm_sandbox_from_snapshot(m, vmm_layer_open_store, sh_store, &cfg, &sb, &err), 0, "%s",
		     err.message);
	const int64_t want = sh_call_i(sb, "ro_read", 0, 0);
	uint64_t mem_size = 0;
	pid_t pid = proc_child_find(&mem_size);
	cr_assert_gt(pid, 0, "the sandbox's child is not among this process's children");
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		cr_skip_test("cannot read the child's maps: needs CAP_SYS_PTRACE");
	while (fgets(line, sizeof(line), f)) {
		unsigned long long lo, hi;
		char perms[8], file[256] = "";
		if (sscanf(line, "%llx-%llx %7s %*s %*s %*s %255s", &lo, &hi, perms, file) < 3 || hi > (4ull << 30) ||
		    !file[0] || strstr(file, "memfd:"))
			continue;
		cr_assert_neq(perms[1], 'w', "a mapping of the snapshot's file is writable: %s", line);
		cr_assert_eq(perms[3], 's', "%s", line);
		shared++;
	}
	fclose(f);
	cr_assert_geq(shared, 2, "the code and the read-only data are mapped from the snapshot's file");
	cr_assert_eq(sh_call_i(sb, "ro_read", 0, 0), want);
	vmm_sandbox_free(sb);
	st_manifest_free(m);
	cr_assert_eq(vmm_host_free(host), 0);
}

/*
 * The thread block: after every restore, whatever the guest did to fs
 * (wrfsbase to the child's control pages, a null selector, arch_prctl at
 * the stub's site), fs base is the snapshot's (the word at %fs:0 is the
 * block's address) and so is the canary at %fs:0x28; the debug check
 * compares the live fs base with the snapshot's too. A capture after a
 * move records the block, not the guest's base.
 */
static void fs_is_the_snapshot_s(struct vmm_sandbox *sb, int64_t canary, const char *after)
{
	cr_assert_eq(sh_call_i(sb, "fs_self", 0, 0), (int64_t)STRATA_TLS_GPA, "fs base after %s", after);
	cr_assert_eq(sh_call_i(sb, "fs_canary", 0, 0), canary, "the canary after %s", after);
}

Test(hostile, fs_base_and_the_canary_are_the_snapshot_s_after_every_restore, .init = sh_setup, .fini = sh_teardown)
{
	static const char *const movers[] = { "fsbase_next", "fsbase_far", "fs_selector_null", "fsbase_arch_prctl",
					      "fsbase_arch_prctl_tls" };
	struct st_manifest *m = NULL;
	struct vmm_sandbox *sb = hostile_snap(NULL, &m);
	int64_t canary = sh_call_i(sb, "fs_canary", 0, 0);

	cr_assert_eq(sh_call_i(sb, "fs_self", 0, 0), (int64_t)STRATA_TLS_GPA);
	cr_assert_neq(canary, 0, "the canary is drawn at random");
	cr_assert_eq(canary & 0xff, 0, "the canary's low byte is 0");
	for (size_t i = 0; i < sizeof(movers) / sizeof(movers[0]); i++) {
		struct vmm_result r = { 0 };
		int rc = vmm_sandbox_call(sb, movers[i], NULL, 0, &r);
		cr_log_info("%s: %s", movers[i], rc ? vmm_sandbox_error(sb)->message : "returned");
		cr_assert_eq(vmm_sandbox_restore(sb), 0, "after %s: %s", movers[i], vmm_sandbox_error(sb)->message);
		fs_is_the_snapshot_s(sb, canary, movers[i]);
		cr_assert_eq(vmm_sandbox_restore(sb), 0, "%s", vmm_sandbox_error(sb)->message);
	}
	/* A capture right after the guest moved fs (to 0 where a null selector
	 * clears the base). */
	struct vmm_result r = { 0 };
	cr_assert_eq(vmm_sandbox_call(sb, "fs_selector_null", NULL, 0, &r), 0, "%s", vmm_sandbox_error(sb)->message);
	cr_assert_eq(sh_snap(sb, NULL), 0);
	cr_assert_eq(vmm_sandbox_restore(sb), 0, "%s", vmm_sandbox_error(sb)->message);
	fs_is_the_snapshot_s(sb, canary, "a capture after a null selector");
	vmm_sandbox_free(sb);
	/* A new sandbox from the snapshot: its canary; one from the ELF: its own. */
	sb = sh_from_snapshot_checked(m, NULL);
	fs_is_the_snapshot_s(sb, canary, "a new sandbox from the snapshot");
	vmm_sandbox_free(sb);
	st_manifest_free(m);
	sb = hostile_new();
	cr_assert_neq(sh_call_i(sb, "fs_canary", 0, 0), canary, "each sandbox built from the ELF draws its canary");
	vmm_sandbox_free(sb);
}

/* On the process backend, arch_prctl at the stub's site with any address
 * but the thread block's ends the child (its filter): fs base outside
 * guest memory is never reached that way. */
static bool on_process(void);
Test(hostile, arch_prctl_with_another_fs_base_kills_the_child, .init = sh_setup, .fini = sh_teardown)
{
	if (!on_process())
		cr_skip_test("the process backend's child only (the other backend maps nothing at the stub's site)");
	struct vmm_sandbox *sb = hostile_snap(NULL, NULL);
	struct vmm_result r = { 0 };

	cr_assert_lt(vmm_sandbox_call(sb, "fsbase_arch_prctl", NULL, 0, &r), 0, "arch_prctl returned %lld",
		     (long long)r.i64);
	const char *msg = vmm_sandbox_error(sb)->message;
	cr_assert(strstr(msg, "SIGSYS"), "%s", msg);
	cr_assert_eq(vmm_sandbox_restore(sb), 0, "%s", vmm_sandbox_error(sb)->message);
	cr_assert_eq(sh_call_i(sb, "fsbase_arch_prctl_tls", 0, 0), 0, "the thread block's own address is allowed");
	cr_assert_eq(sh_call_i(sb, "fs_self", 0, 0), (int64_t)STRATA_TLS_GPA);
	vmm_sandbox_free(sb);
}

/*
 * A forbidden system call at the stub's site kills the child; even with
 * core dumps allowed to the host, and the kernel's pattern a plain file
 * name, it dumps nothing (no core file where it runs, and the kernel does
 * not say "dumped").
 */
Test(hostile, a_killed_child_dumps_no_core, .init = sh_setup, .fini = sh_teardown)
{
	struct rlimit old, unlimited = { RLIM_INFINITY, RLIM_INFINITY };
	struct stat st;
	bool had_core = stat("/core", &st) == 0;

	cr_assert_eq(getrlimit(RLIMIT_CORE, &old), 0);
	if (setrlimit(RLIMIT_CORE, &unlimited) < 0)
		unlimited.rlim_cur = old.rlim_max, setrlimit(RLIMIT_CORE, &unlimited);
	struct vmm_sandbox *sb = hostile_snap(NULL, NULL);
	struct vmm_result r = { 0 };
	int rc = vmm_sandbox_call(sb, "forbidden_call", NULL, 0, &r);
	setrlimit(RLIMIT_CORE, &old);
	const char *msg = vmm_sandbox_error(sb)->message;
	cr_log_info("forbidden_call: %s", rc ? msg : "returned");
	bool has_core = stat("/core", &st) == 0;
	if (has_core && !had_core)
		unlink("/core");
	cr_assert_lt(rc, 0, "a forbidden system call returned %lld", (long long)r.i64);
	cr_assert(!strstr(msg, "core dumped"), "%s", msg);
	cr_assert(had_core || !has_core, "the child dumped core into /");
	cr_assert_eq(vmm_sandbox_restore(sb), 0, "%s", vmm_sandbox_error(sb)->message);
	cr_assert_eq(sh_call_i(sb, "memory_next", 0, 0), 1);
	vmm_sandbox_free(sb);
}

/* On the process backend only: the child's own ways out, and how the host
 * names them. */
static bool on_process(void)
{
	return vmm_backend_resolve(vmm_host_default(), VMM_BACKEND_AUTO) == VMM_BACKEND_PROCESS;
}

Test(hostile, a_child_that_exits_is_reported_with_its_exit_code, .init = sh_setup, .fini = sh_teardown)
{
	if (!on_process())
		cr_skip_test("the process backend's child only");
	struct vmm_sandbox *sb = hostile_snap(NULL, NULL);
	struct vmm_result r = { 0 };

	cr_assert_lt(vmm_sandbox_call(sb, "exit_77", NULL, 0, &r), 0);
	const char *msg = vmm_sandbox_error(sb)->message;
	cr_assert(strstr(msg, "exited with code 77"), "%s", msg);
	cr_assert_eq(vmm_sandbox_restore(sb), 0, "%s", vmm_sandbox_error(sb)->message);
	cr_assert_eq(sh_call_i(sb, "memory_next", 0, 0), 1);
	vmm_sandbox_free(sb);
}

Test(hostile, a_forged_report_with_an_unknown_signal_is_a_bad_report, .init = sh_setup, .fini = sh_teardown)
{
	if (!on_process())
		cr_skip_test("the process backend's child only");
	struct vmm_sandbox *sb = hostile_snap(NULL, NULL);
	struct vmm_result r = { 0 };

	cr_assert_lt(vmm_sandbox_call(sb, "forge_signal_99", NULL, 0, &r), 0);
	const char *msg = vmm_sandbox_error(sb)->message;
	cr_assert(strstr(msg, "bad report (signal 99"), "%s", msg);
	cr_assert(!strstr(msg, "KVM"), "%s", msg);
	cr_assert_eq(vmm_sandbox_restore(sb), 0, "%s", vmm_sandbox_error(sb)->message);
	cr_assert_eq(sh_call_i(sb, "memory_next", 0, 0), 1);
	vmm_sandbox_free(sb);
}

/*
 * rt_sigreturn at the stub's `sys` site through a frame of the guest's own
 * (hostileguest.c own_frame) sets its registers, its signal mask and its
 * signal stack. A blocked kick only means the host's timeout and the kill
 * after it end the call; a signal stack moved into guest memory makes the
 * next report name a frame the host does not know: a bad report. Either
 * way the child is replaced and the next call starts from the snapshot.
 */
Test(hostile, a_blocked_kick_ends_in_the_timeout_and_a_kill, .init = sh_setup, .fini = sh_teardown)
{
	if (!on_process())
		cr_skip_test("the process backend's child only");
	struct vmm_sandbox *sb = hostile_snap(NULL, NULL);
	struct vmm_result r = { 0 };

	cr_assert_eq(vmm_sandbox_call_timeout(sb, "kick_blocked_spin", NULL, 0, 100 * 1000000ull, &r), VMM_E_TIMEOUT,
		     "%s", vmm_sandbox_error(sb)->message);
	cr_assert_eq(vmm_sandbox_restore(sb), 0, "%s", vmm_sandbox_error(sb)->message);
	cr_assert_eq(sh_call_i(sb, "memory_next", 0, 0), 1);
	cr_assert_eq(sh_call_i(sb, "forged_stop_next", 0, 0), 1);
	vmm_sandbox_free(sb);
}

Test(hostile, a_moved_signal_stack_is_a_bad_report, .init = sh_setup, .fini = sh_teardown)
{
	if (!on_process())
		cr_skip_test("the process backend's child only");
	struct vmm_sandbox *sb = hostile_snap(NULL, NULL);
	struct vmm_result r = { 0 };

	cr_assert_lt(vmm_sandbox_call(sb, "altstack_moved_fault", NULL, 0, &r), 0);
	const char *msg = vmm_sandbox_error(sb)->message;
	cr_assert(strstr(msg, "bad report (signal 11"), "%s", msg);
	cr_assert_eq(vmm_sandbox_restore(sb), 0, "%s", vmm_sandbox_error(sb)->message);
	cr_assert_eq(sh_call_i(sb, "memory_next", 0, 0), 1);
	vmm_sandbox_free(sb);
}

/* A signal taken in the stub's code after its stop (where the stub blocks
 * every signal; there only a guest's jump, or a kick pending across a stop
 * the guest made itself, can take one) is a bad report: signal 0. */
Test(hostile, a_signal_in_the_stub_after_its_stop_is_a_bad_report, .init = sh_setup, .fini = sh_teardown)
{
	if (!on_process())
		cr_skip_test("the process backend's child only");
	struct vmm_sandbox *sb = hostile_snap(NULL, NULL);
	struct vmm_result r = { 0 };

	cr_assert_lt(vmm_sandbox_call(sb, "stub_continuation_fault", NULL, 0, &r), 0);
	const char *msg = vmm_sandbox_error(sb)->message;
	cr_assert(strstr(msg, "bad report (signal 0,"), "%s", msg);
	cr_assert_eq(vmm_sandbox_restore(sb), 0, "%s", vmm_sandbox_error(sb)->message);
	cr_assert_eq(sh_call_i(sb, "memory_next", 0, 0), 1);
	cr_assert_eq(sh_call_i(sb, "forged_stop_next", 0, 0), 1);
	vmm_sandbox_free(sb);
}

/* ---- a recycled VM shell: the pages below the heap ---- */

/*
 * A freed sandbox's VM shell keeps the pages below the heap (host pages,
 * image, stack) for the next sandbox, zeroed in place (vmm/kvm/shell.c).
 * Whatever was written there, by the guest or through the host's view of
 * its memory, is gone from the next sandbox's memory, which runs.
 */
Test(hostile, nothing_below_the_heap_reaches_the_next_sandbox_of_a_recycled_vm_shell, .init = sh_setup,
     .fini = sh_teardown)
{
	static const char mark[8] = "STALEPG!";
	struct vmm_host *host;
	struct vmm_host_stats hs;
	struct vmm_error err;

	if (vmm_backend_resolve(vmm_host_default(), VMM_BACKEND_AUTO) != VMM_BACKEND_KVM)
		cr_skip_test("VM shells are the kvm backend's");
	host = sh_debug_host(0, 2);
	struct vmm_config cfg = { .host = host };
	for (int life = 0; life < 3; life++) {
		struct vmm_sandbox *sb = NULL;
		uint8_t *mem;
		uint64_t size;
		cr_assert_eq(vmm_sandbox_new(SIMPLEGUEST, &cfg, &sb, &err), 0, "%s", err.message);
		vmm_host_stats(host, &hs);
		cr_assert_eq(hs.shells, 0u, "life %d: the sandbox took the shell", life);
		sh_echo(sb, "a call in the shell");
		vmm_sandbox_memory(sb, &mem, &size);
		uint64_t low = sb->layout.low_end;
		cr_assert(low > 0 && low < size);
		for (uint64_t off = 0; life && off + sizeof(mark) <= low; off++)
			cr_assert(memcmp(mem + off, mark, sizeof(mark)) != 0,
				  "life %d: the last sandbox's bytes at 0x%llx", life, (unsigned long long)off);
		/* Every page below the heap, page tables and image included. */
		for (uint64_t off = 0; off < low; off += sizeof(mark))
			memcpy(mem + off, mark, sizeof(mark));
		vmm_sandbox_free(sb);
		vmm_host_stats(host, &hs);
		cr_assert_eq(hs.shells, 1u, "life %d: the freed sandbox left its shell", life);
	}
	cr_assert_eq(vmm_host_free(host), 0);
}

/* ---- a recycled VM shell: the next sandbox has another layout ---- */

/*
 * Shells are matched on memory size alone (vmm/kvm/shell.c), so a sandbox
 * of another layout or guest can take one: here pages A could write (its
 * input buffer, or its stack) lie where B's low area is unmapped past its
 * stack. What A leaves (its vector registers, a
 * marker over every word of its memory through the host's view, its
 * writable mappings in KVM's MMU) must not reach B: B's host view and its
 * own reads hold no marker, its vector channels start fresh, and every
 * page its own page tables do not make user-writable faults on a store.
 */
#define STALE_MARK 0x2147504c45544153ull  /* "STALEPG!" */

static const char *const vec_channels[] = {
	"xmm15_next", "x87_rc_next", "x87_st_next", "mxcsr_next", "ymm_upper_next", "zmm31_next", "k7_next",
};
#define NVEC (sizeof(vec_channels) / sizeof(vec_channels[0]))

/* Does the guest's vCPU have channel i's registers (CPUID and XCR0, as
 * the guest reads them)? A (no snapshot, no restore) calls only those. */
static bool vec_usable(struct vmm_sandbox *sb, size_t i)
{
	int64_t ecx1 = sh_call_i(sb, "vec_cpu", 1, 0), ebx7 = sh_call_i(sb, "vec_cpu", 1, 1);
	int64_t xcr0 = sh_call_i(sb, "vec_cpu", 1, 2);
	bool avx = (ecx1 >> 28 & 1) && (ecx1 >> 27 & 1) && (xcr0 & 6) == 6;

	if (i < 4)
		return true;
	if (i == 4)
		return avx;
	return avx && (ebx7 >> 16 & 1) && (xcr0 & 0xe0) == 0xe0;
}

static bool vec_refused(int rc, const struct vmm_error *e)
{
	(void)e;
	return rc == VMM_E_GUEST_FAULT || rc == VMM_E_GUEST_ERROR;
}

static int64_t call3(struct vmm_sandbox *sb, const char *fn, int64_t x, int64_t y, int64_t z)
{
	struct vmm_value a[3] = { { .type = VMM_I64, .i64 = x }, { .type = VMM_I64, .i64 = y },
				  { .type = VMM_I64, .i64 = z } };
	struct vmm_result r = { 0 };

	cr_assert_eq(vmm_sandbox_call(sb, fn, a, 3, &r), 0, "%s(%#llx, %#llx): %s", fn, (unsigned long long)x,
		     (unsigned long long)y, vmm_sandbox_error(sb)->message);
	return r.i64;
}

static uint64_t pte_of(const uint8_t *mem, const struct vmm_layout *l, uint64_t page)
{
	uint64_t pte;

	memcpy(&pte, mem + l->pt + 8 * page, 8);
	return pte;
}

#define PTE_USER_RW 7ull  /* P | R/W | U/S (SDM Vol. 3A 4.5) */
#define PTE_USER 5ull     /* P | U/S */
#define PTE_FRAME 0x000ffffffffff000ull

/* Is low page p of l readable from CPL 3 as guest memory (identity
 * mapped: the hypercall page is user-writable and backed by none)? */
static bool user_memory(const uint8_t *mem, const struct vmm_layout *l, uint64_t p)
{
	uint64_t pte = pte_of(mem, l, p);

	return (pte & PTE_USER) == PTE_USER && (pte & PTE_FRAME) == p * VMM_PAGE;
}

/* A sandbox of guest of no host (so no shell): its default layout. */
static struct vmm_layout default_layout(const char *guest)
{
	struct vmm_sandbox *sb = NULL;
	struct vmm_error err;

	cr_assert_eq(vmm_sandbox_new(guest, NULL, &sb, &err), 0, "%s", err.message);
	struct vmm_layout l = sb->layout;
	vmm_sandbox_free(sb);
	return l;
}

/*
 * A (hostileguest) and B (guest_b) of one memory size, one of them with a
 * low area a 2 MiB page longer (a_long: A's, its stack over what B leaves
 * unmapped past its own stack, pages a shell keeps and zeroes in place;
 * else B's, A's input buffer there, pages a shell remaps), its stack
 * ending 8 pages short of it, its heap 2 MiB shorter.
 */
static void other_layout_in_a_recycled_shell(const char *guest_b, const char *poke_fn, bool probes, bool a_long)
{
	struct vmm_host_stats hs;
	struct vmm_error err;
	struct vmm_sandbox *a = NULL, *b = NULL;
	uint8_t *mem;
	uint64_t size;

	if (vmm_backend_resolve(vmm_host_default(), VMM_BACKEND_AUTO) != VMM_BACKEND_KVM)
		cr_skip_test("VM shells are the kvm backend's");
	const struct vmm_layout da = default_layout(HOSTILEGUEST), db = default_layout(guest_b);
	cr_assert_eq(da.low_end, db.low_end, "both guests' default low areas are one size");
	struct vmm_host *host = sh_debug_host(0, 2);
	struct vmm_config ca = { .host = host }, cb = { .host = host };
	struct vmm_config *lng = a_long ? &ca : &cb, *shrt = a_long ? &cb : &ca;
	const struct vmm_layout *dl = a_long ? &da : &db;
	lng->stack_size = dl->low_end + VMM_HUGE - 8 * VMM_PAGE - dl->stack_lo;
	lng->heap_size = VMM_HUGE;
	shrt->heap_size = 2 * VMM_HUGE;
	if (!a_long)
		ca.input_size = VMM_HUGE;  /* every page of it written: scribble_all */
	cr_assert_eq(vmm_sandbox_new(HOSTILEGUEST, &ca, &a, &err), 0, "A: %s", err.message);
	const struct vmm_layout la = a->layout;

	/* A, never captured: a rebase would map layer files into its range,
	 * and the shell would be wiped whole instead of zeroed in place. */
	for (size_t i = 0; i < NVEC; i++)
		if (vec_usable(a, i))
			for (int round = 0; round < 3; round++)
				sh_call_i(a, vec_channels[i], 0, 0);
	cr_assert_gt(sh_call_i(a, "scribble_all", 1, 7), 0);
	vmm_sandbox_memory(a, &mem, &size);
	/* A's user-writable pages of what is B's low area: its own low pages
	 * its page tables make so, and its buffers and heap (2 MiB pages). */
	bool a_rw[VMM_LOW_MAX / VMM_PAGE];
	for (uint64_t p = 0; p < VMM_LOW_MAX / VMM_PAGE; p++)
		a_rw[p] = p * VMM_PAGE >= la.low_end ? p * VMM_PAGE < la.mem_size
						      : (pte_of(mem, &la, p) & PTE_USER_RW) == PTE_USER_RW;
	for (uint64_t off = 0; off + 8 <= size; off += 8)
		memcpy(mem + off, &(uint64_t){ STALE_MARK }, 8);
	vmm_sandbox_free(a);
	vmm_host_stats(host, &hs);
	cr_assert_eq(hs.shells, 1u, "A left its shell");
	enum vmm_dirty_mech mech;
	cr_log_info("A's pages below its heap %s", vmm_dirty_mechanism(&mech, NULL) == 0 && mech == VMM_DIRTY_SCAN
			    ? "kept, zeroed in place" : "wiped with the rest (no PAGEMAP_SCAN)");

	cr_assert_eq(vmm_sandbox_new(guest_b, &cb, &b, &err), 0, "B: %s", err.message);
	vmm_host_stats(host, &hs);
	cr_assert_eq(hs.shells, 0u, "B took A's shell");
	const struct vmm_layout lb = b->layout;
	cr_assert_eq(lb.mem_size, la.mem_size);
	cr_assert_eq(a_long ? la.low_end : lb.low_end, (a_long ? lb.low_end : la.low_end) + VMM_HUGE,
		     "B's layout is not A's");
	cr_assert_neq(lb.n_pt, la.n_pt);
	uint8_t *bmem;
	uint64_t bsize;
	vmm_sandbox_memory(b, &bmem, &bsize);
	cr_assert_eq(bsize, size);
	for (uint64_t off = 0; off + 8 <= bsize; off += 8)
		cr_assert(memcmp(bmem + off, &(uint64_t){ STALE_MARK }, 8) != 0, "A's marker in B's memory at %#llx",
			  (unsigned long long)off);
	cr_assert_eq(sh_snap(b, NULL), 0);
	vmm_sandbox_memory(b, &bmem, &bsize);

	if (probes) {
		for (size_t i = 0; i < NVEC; i++) {
			int64_t v = sh_channel_call(b, vec_channels[i], vec_refused);
			cr_assert_leq(v, 1, "%s: A's value reached B (%lld)", vec_channels[i], (long long)v);
			cr_assert_eq(vmm_sandbox_restore(b), 0, "%s", vmm_sandbox_error(b)->message);
		}
		/* Through B's page tables: each run of user pages of the low
		 * area, then the buffers and heap. */
		for (uint64_t p = 0; p < lb.low_end / VMM_PAGE;) {
			if (!user_memory(bmem, &lb, p)) {
				p++;
				continue;
			}
			uint64_t q = p;
			while (q < lb.low_end / VMM_PAGE && user_memory(bmem, &lb, q))
				q++;
			int64_t at = call3(b, "find_word", (int64_t)(p * VMM_PAGE), (int64_t)(q * VMM_PAGE),
					   (int64_t)~STALE_MARK);
			cr_assert_eq(at, 0, "B reads A's marker at %#llx", (unsigned long long)at);
			cr_assert_eq(vmm_sandbox_restore(b), 0, "%s", vmm_sandbox_error(b)->message);
			p = q;
		}
		int64_t at = call3(b, "find_word", (int64_t)lb.low_end, (int64_t)lb.mem_size, (int64_t)~STALE_MARK);
		cr_assert_eq(at, 0, "B reads A's marker at %#llx", (unsigned long long)at);
		cr_assert_eq(vmm_sandbox_restore(b), 0, "%s", vmm_sandbox_error(b)->message);
	}

	/* B's permissions are its own: a store to every low page its page
	 * tables keep from CPL 3 stores faults, those A could write among them. */
	unsigned from_a = 0;
	for (uint64_t p = 0; p < lb.low_end / VMM_PAGE; p++) {
		if ((pte_of(bmem, &lb, p) & PTE_USER_RW) == PTE_USER_RW)
			continue;
		from_a += a_rw[p];
		if (p * VMM_PAGE == lb.stack_guard) {
			/* Reported as what a fault there means: a stack overflow. */
			struct vmm_value g = { .type = VMM_I64, .i64 = (int64_t)lb.stack_guard };
			struct vmm_result r = { 0 };
			cr_assert_neq(vmm_sandbox_call(b, poke_fn, &g, 1, &r), 0, "a store to B's stack guard page worked");
			cr_assert(strstr(vmm_sandbox_error(b)->message, "stack guard"), "%s", vmm_sandbox_error(b)->message);
			cr_assert_eq(vmm_sandbox_restore(b), 0, "%s", vmm_sandbox_error(b)->message);
			continue;
		}
		sh_must_page_fault(b, poke_fn, p * VMM_PAGE, "B's non-writable");
	}
	cr_assert_geq(from_a, 8u, "B keeps from CPL 3 stores 8 pages or more A could write");
	cr_log_info("%u pages user-writable in A and not in B faulted on a store from B", from_a);
	vmm_sandbox_free(b);
	cr_assert_eq(vmm_host_free(host), 0);
}

Test(hostile, nothing_of_a_sandbox_reaches_the_next_of_another_layout_in_its_recycled_vm_shell, .init = sh_setup,
     .fini = sh_teardown, .timeout = 120)
{
	other_layout_in_a_recycled_shell(HOSTILEGUEST, "poke", true, false);
}

Test(hostile, nothing_of_a_sandbox_with_a_longer_low_area_reaches_the_next_in_its_recycled_vm_shell,
     .init = sh_setup, .fini = sh_teardown, .timeout = 120)
{
	other_layout_in_a_recycled_shell(HOSTILEGUEST, "poke", true, true);
}

Test(hostile, nothing_of_a_sandbox_reaches_the_next_of_another_guest_in_its_recycled_vm_shell, .init = sh_setup,
     .fini = sh_teardown, .timeout = 120)
{
	other_layout_in_a_recycled_shell(HOSTILECPL0, "cpl3_poke", false, false);
}
