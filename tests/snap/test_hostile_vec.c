/* test_hostile_vec.c: the hostile guest's vector-register channels (vmm/guest/hostile_vec.c) on each backend. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"

/* Every vector channel of hostile_vec.c: those outside the FXSAVE image
 * (ymm upper halves, zmm16-31, mask registers) and those inside it. */
static const char *const channels[] = {
	"ymm_upper_next", "zmm31_next", "k7_next", "xmm15_next", "x87_rc_next", "x87_st_next", "mxcsr_next",
};
#define NCHANNELS (sizeof(channels) / sizeof(channels[0]))

/* A vector channel is refused where the guest gave up with a reason
 * (strata_fail: the extension is off) or the CPU did (a #UD: the
 * instruction is not there for the guest). */
static bool vector_refused(int rc, const struct vmm_error *e)
{
	return rc == VMM_E_GUEST_ERROR || (rc == VMM_E_GUEST_FAULT && e->vector == 6);
}

static int64_t channel_call(struct vmm_sandbox *sb, const char *fn)
{
	return sh_channel_call(sb, fn, vector_refused);
}

/* A channel after a restore: 1 (the snapshot's state plus one), or refused. */
static void channel_fresh(struct vmm_sandbox *sb, const char *fn, const char *after)
{
	int64_t v = channel_call(sb, fn);

	cr_assert(v == 0 || v == 1, "%s after %s returned %lld: state survived", fn, after, (long long)v);
}

/* The hostile guest, captured once; *m gets its snapshot. */
static struct vmm_sandbox *hostile_snap(const struct vmm_config *cfg, struct st_manifest **m)
{
	struct vmm_sandbox *sb = NULL;
	struct vmm_error err;

	cr_assert_eq(vmm_sandbox_new(HOSTILEGUEST, cfg, &sb, &err), 0, "sandbox: %s", err.message);
	cr_assert_eq(sh_snap(sb, m), 0);
	return sb;
}

Test(hostile, no_vector_channel_survives_a_restore_in_place, .init = sh_setup, .fini = sh_teardown)
{
	struct vmm_sandbox *sb = hostile_snap(NULL, NULL);

	vmm_sandbox_set_debug(sb, true);
	cr_log_info("guest CPUID.1:ECX %#llx, CPUID.7:EBX %#llx, XCR0 %lld", (long long)sh_call_i(sb, "vec_cpu", 1, 0),
		    (long long)sh_call_i(sb, "vec_cpu", 1, 1), (long long)sh_call_i(sb, "vec_cpu", 1, 2));
	cr_assert_eq(vmm_sandbox_restore(sb), 0, "%s", vmm_sandbox_error(sb)->message);
	for (size_t i = 0; i < NCHANNELS; i++) {
		for (int round = 0; round < 3; round++) {
			channel_fresh(sb, channels[i], round ? "a restore in place" : "the capture");
			cr_assert_eq(vmm_sandbox_restore(sb), 0, "%s", vmm_sandbox_error(sb)->message);
		}
	}
	vmm_sandbox_free(sb);
}

/* Every channel at once, so one life leaves all of them dirty. */
static void all_channels_fresh(struct vmm_sandbox *sb, const char *after)
{
	for (size_t i = 0; i < NCHANNELS; i++)
		channel_fresh(sb, channels[i], after);
}

Test(hostile, no_vector_channel_reaches_a_new_sandbox_from_the_warm_list, .init = sh_setup, .fini = sh_teardown)
{
	struct vmm_host *host = sh_debug_host(4, 0);
	struct vmm_config cfg = { .host = host };
	struct st_manifest *m = NULL;
	struct vmm_sandbox *sb = hostile_snap(&cfg, &m);
	struct vmm_host_stats hs;

	vmm_sandbox_free(sb);
	sb = sh_from_snapshot_checked(m, &cfg);
	for (int life = 0; life < 3; life++) {
		all_channels_fresh(sb, life ? "a new sandbox from the warm list" : "a new sandbox");
		vmm_sandbox_free(sb);
		vmm_host_stats(host, &hs);
		cr_assert_geq(hs.warm, 1, "the freed sandbox is kept warm");
		unsigned before = hs.warm;
		sb = sh_from_snapshot_checked(m, &cfg);
		vmm_host_stats(host, &hs);
		cr_assert_eq(hs.warm, before - 1, "the new sandbox came from the warm list");
	}
	vmm_sandbox_free(sb);
	st_manifest_free(m);
	cr_assert_eq(vmm_host_free(host), 0);
}

Test(hostile, no_vector_channel_reaches_the_next_sandbox_of_a_recycled_vm_shell, .init = sh_setup,
     .fini = sh_teardown)
{
	/* Shells only: a freed sandbox leaves its VM and vCPU for the next. */
	struct vmm_host *host = sh_debug_host(0, 2);
	struct vmm_config cfg = { .host = host };
	struct vmm_host_stats hs;
	struct st_manifest *m = NULL;
	struct vmm_sandbox *sb = hostile_snap(&cfg, &m);

	for (int life = 0; life < 3; life++) {
		all_channels_fresh(sb, life ? "a new sandbox in a recycled VM shell" : "the capture");
		vmm_sandbox_free(sb);
		vmm_host_stats(host, &hs);
		unsigned before = hs.shells;
		sb = sh_from_snapshot_checked(m, &cfg);
		vmm_host_stats(host, &hs);
		if (before)
			cr_assert_eq(hs.shells, before - 1, "the new sandbox took the shell");
	}
	vmm_sandbox_free(sb);
	st_manifest_free(m);
	cr_assert_eq(vmm_host_free(host), 0);
}

/* The debug check sees a vector register a call changed, before any page
 * (kvm: the whole XSAVE image is compared; the process backend compares
 * what its own check covers). */
Test(hostile, the_debug_check_compares_the_whole_vector_state, .init = sh_setup, .fini = sh_teardown)
{
	struct vmm_sandbox *sb = hostile_snap(NULL, NULL);
	uint64_t gpage = 0;
	static const struct {
		const char *fn, *names;
	} cases[] = {
		{ "zmm31_next", "extended component" }, { "k7_next", "extended component" },
		{ "ymm_upper_next", "extended component" }, { "xmm15_next", "XMM0-15" }, { "mxcsr_next", "MXCSR" },
	};

	if (vmm_backend_resolve(vmm_host_default(), VMM_BACKEND_AUTO) != VMM_BACKEND_KVM)
		cr_skip_test("the vCPU part of the check is the kvm backend's");
	vmm_sandbox_set_debug(sb, true);
	cr_assert_eq(vmm_sandbox_restore(sb), 0, "%s", vmm_sandbox_error(sb)->message);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (channel_call(sb, cases[i].fn) == 0)
			continue;  /* refused here: nothing changed */
		cr_assert_eq(vmm_sandbox_check(sb, &gpage), VMM_E_LEAK, "%s", cases[i].fn);
		cr_assert_eq(gpage, UINT64_MAX, "%s: a register is reported, not page %llu", cases[i].fn,
			     (unsigned long long)gpage);
		cr_assert(strstr(vmm_sandbox_error(sb)->message, cases[i].names), "%s: %s", cases[i].fn,
			  vmm_sandbox_error(sb)->message);
		cr_assert_eq(vmm_sandbox_restore(sb), 0, "%s", vmm_sandbox_error(sb)->message);
	}
	vmm_sandbox_free(sb);
}
