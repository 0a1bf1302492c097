/* test_descriptions.c: the manifest's vCPU state and guest description JSON (vmm/vcpu.c), and forged vCPU states refused at restore. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "vmm/snap_int.h"

Test(descriptions, vcpu_state_round_trips_through_json)
{
	struct vmm_vcpu_state a, b;
	char *json = NULL;

	memset(&a, 0, sizeof(a));
	a.version = VMM_VCPU_STATE_VERSION;
	for (int i = 0; i < 16; i++)
		a.gpr[i] = 0xfedcba9876543210ull ^ (uint64_t)i;  /* past 2^53 */
	a.rip = 0x401000;
	a.rflags = 0x3002;
	a.cs = (struct vmm_segment){ .base = 0, .limit = 0xffffffff, .selector = 0x23, .type = 11, .present = 1,
				     .dpl = 3, .s = 1, .l = 1, .g = 1 };
	a.tr = (struct vmm_segment){ .base = 0xf080, .limit = 0xe7, .selector = 0x28, .type = 11, .present = 1 };
	a.gdt = (struct vmm_dtable){ 0xf000, 0x37 };
	a.cr0 = 0x80010033;
	a.cr3 = 0x1000;
	a.efer = 0xd00;
	a.apic_base = 0xfee00900;
	a.xcr0 = 3;
	for (int i = 0; i < 512; i++)
		a.fxsave[i] = (uint8_t)(i * 7);
	cr_assert_eq(vmm_vcpu_to_json(&a, &json), 0);
	cr_assert_eq(vmm_vcpu_from_json(json, &b, NULL, 0), 0);
	cr_assert_eq(memcmp(&a, &b, sizeof(a)), 0);
	char why[256];
	/* What strtoull and sscanf would have let through is refused: signs,
	 * spaces, a second prefix, in a register or the FXSAVE image. */
	static const char *const bad_hex[] = { "0x-1", "0x 1", "0x+1", "0x0x1", "0x", "0x1g", "0x11111111111111111" };
	char *rip = strstr(json, "\"rip\":\"");
	char *fx = strstr(json, "\"fxsave\":\"");
	cr_assert(rip && fx);
	for (size_t i = 0; i < sizeof(bad_hex) / sizeof(bad_hex[0]); i++) {
		char *end = strchr(rip + 7, '"'), *edited = NULL;
		cr_assert(asprintf(&edited, "%.*s%s%s", (int)(rip + 7 - json), json, bad_hex[i], end) > 0);
		cr_assert_eq(vmm_vcpu_from_json(edited, &b, why, sizeof(why)), VMM_E_BAD_SNAPSHOT, "rip %s", bad_hex[i]);
		free(edited);
	}
	static const char *const bad_byte[] = { " f", "+f", "-1", "0x", "g0" };
	for (size_t i = 0; i < sizeof(bad_byte) / sizeof(bad_byte[0]); i++) {
		char *edited = strdup(json);
		memcpy(edited + (fx - json) + 10 + 2 * 100, bad_byte[i], 2);
		cr_assert_eq(vmm_vcpu_from_json(edited, &b, why, sizeof(why)), VMM_E_BAD_SNAPSHOT, "byte '%s'", bad_byte[i]);
		free(edited);
	}
	/* a truncated FXSAVE image is refused */
	fx[20] = '"';
	cr_assert_eq(vmm_vcpu_from_json(json, &b, why, sizeof(why)), VMM_E_BAD_SNAPSHOT);
	free(json);
	cr_assert_eq(vmm_vcpu_from_json("{\"version\":1}", &b, why, sizeof(why)), VMM_E_BAD_SNAPSHOT);
	cr_assert_eq(vmm_vcpu_from_json("not json", &b, why, sizeof(why)), VMM_E_BAD_SNAPSHOT);
}

Test(descriptions, guest_description_from_another_abi_is_refused)
{
	struct vmm_layout l;
	struct vmm_fn *fns = NULL;
	unsigned n;
	char why[256];

	cr_assert_eq(vmm_guest_from_json("{\"abi_version\":99,\"layout\":{},\"functions\":[]}", &l, &fns, &n, why,
					 sizeof(why)), VMM_E_BAD_SNAPSHOT);
	cr_assert(strstr(why, "ABI version 99"), "%s", why);
	cr_assert_eq(vmm_guest_from_json("{\"abi_version\":1,\"layout\":{\"pml4\":1}}", &l, &fns, &n, why,
					 sizeof(why)), VMM_E_BAD_SNAPSHOT);
	cr_assert_null(fns);
}

/* Regression: without abi_version the message printed a value never
 * written (a stack address under ASan), and -O3 warned of it. */
Test(descriptions, guest_description_without_an_abi_version_says_so)
{
	struct vmm_layout l;
	struct vmm_fn *fns = NULL;
	unsigned n;
	char why[256];

	memset(why, 0, sizeof(why));
	cr_assert_eq(vmm_guest_from_json("{\"layout\":{},\"functions\":[]}", &l, &fns, &n, why, sizeof(why)),
		     VMM_E_BAD_SNAPSHOT);
	cr_assert(strstr(why, "no valid abi_version"), "%s", why);
	cr_assert_eq(vmm_guest_from_json("{\"abi_version\":-1}", &l, &fns, &n, why, sizeof(why)), VMM_E_BAD_SNAPSHOT);
	cr_assert(strstr(why, "no valid abi_version"), "%s", why);
}

/* ---- hostile vCPU states in a manifest: only user-mode state is taken ---- */

/* One forged field: how it is edited, and the word the refusal must name. */
struct forged {
	const char *field;
	void (*edit)(struct vmm_vcpu_state *st, const struct vmm_layout *l);
};

static void cpl0(struct vmm_vcpu_state *st, const struct vmm_layout *l)
{
	(void)l;
	st->cs.selector = 0x08;  /* the kernel code segment: the guest would run at CPL 0 */
	st->cs.dpl = 0;
	st->ss.selector = 0x10;
	st->ss.dpl = 0;
}
static void ss_dpl(struct vmm_vcpu_state *st, const struct vmm_layout *l) { (void)l; st->ss.dpl = 0; }
static void cr0_no_wp(struct vmm_vcpu_state *st, const struct vmm_layout *l) { (void)l; st->cr0 &= ~(1ull << 16); }
static void cr3_elsewhere(struct vmm_vcpu_state *st, const struct vmm_layout *l) { st->cr3 = l->pdpt; }
static void cr4_osxsave(struct vmm_vcpu_state *st, const struct vmm_layout *l)
{
	(void)l;
	st->cr4 |= 1ull << 18 | 1ull << 16;  /* OSXSAVE, FSGSBASE */
}
static void efer_no_nx(struct vmm_vcpu_state *st, const struct vmm_layout *l) { (void)l; st->efer &= ~(1ull << 11); }
static void xcr0_avx512(struct vmm_vcpu_state *st, const struct vmm_layout *l) { (void)l; st->xcr0 = 0xe7; }
static void apic_moved(struct vmm_vcpu_state *st, const struct vmm_layout *l) { (void)l; st->apic_base = 0x1000900; }
static void cr2_set(struct vmm_vcpu_state *st, const struct vmm_layout *l) { (void)l; st->cr2 = 0xdead000; }
static void cr8_set(struct vmm_vcpu_state *st, const struct vmm_layout *l) { (void)l; st->cr8 = 15; }
static void gdt_moved(struct vmm_vcpu_state *st, const struct vmm_layout *l) { st->gdt.base = l->heap_addr; }
static void idt_longer(struct vmm_vcpu_state *st, const struct vmm_layout *l) { (void)l; st->idt.limit = 0xffff; }
static void tr_moved(struct vmm_vcpu_state *st, const struct vmm_layout *l) { st->tr.base = l->heap_addr; }
static void ldt_present(struct vmm_vcpu_state *st, const struct vmm_layout *l) { st->ldt.base = l->heap_addr; }
static void ds_kernel(struct vmm_vcpu_state *st, const struct vmm_layout *l) { (void)l; st->ds.selector = 0x10; }
static void fs_noncanonical(struct vmm_vcpu_state *st, const struct vmm_layout *l)
{
	(void)l;
	st->fs.base = 0x0000800000000000ull;
}
/* Canonical and in guest memory, but not the thread block: the canary a
 * guest's stack protector reads would be whatever lies there. */
static void fs_elsewhere(struct vmm_vcpu_state *st, const struct vmm_layout *l) { st->fs.base = l->heap_addr; }
static void rflags_vm(struct vmm_vcpu_state *st, const struct vmm_layout *l) { (void)l; st->rflags |= 1ull << 17; }
static void rflags_iopl1(struct vmm_vcpu_state *st, const struct vmm_layout *l)
{
	(void)l;
	st->rflags = (st->rflags & ~(3ull << 12)) | 1ull << 12;
}
static void rip_noncanonical(struct vmm_vcpu_state *st, const struct vmm_layout *l)
{
	(void)l;
	st->rip = 0x8000000000001000ull >> 1;
}
static void mxcsr_reserved(struct vmm_vcpu_state *st, const struct vmm_layout *l)
{
	(void)l;
	uint32_t m = 0xffff1f80u;
	memcpy(st->fxsave + 24, &m, 4);
}
static void fx_software_bytes(struct vmm_vcpu_state *st, const struct vmm_layout *l) { (void)l; st->fxsave[500] = 1; }

static const struct forged forgeries[] = {
	{ "cs.selector", cpl0 },      { "ss.dpl", ss_dpl },         { "cr0", cr0_no_wp },
	{ "cr3", cr3_elsewhere },     { "cr4", cr4_osxsave },       { "efer", efer_no_nx },
	{ "xcr0", xcr0_avx512 },      { "apic_base", apic_moved },  { "cr2", cr2_set },
	{ "cr8", cr8_set },           { "gdt", gdt_moved },         { "idt", idt_longer },
	{ "tr.base", tr_moved },      { "ldt.base", ldt_present },  { "ds.selector", ds_kernel },
	{ "fs.base", fs_noncanonical }, { "fs.base", fs_elsewhere }, { "rflags", rflags_vm },
	{ "rflags", rflags_iopl1 },
	{ "rip", rip_noncanonical },  { "MXCSR", mxcsr_reserved },  { "FXSAVE byte 500", fx_software_bytes },
};

/* Replace m's vCPU state by st. */
static void manifest_set_vcpu(struct st_manifest *m, const struct vmm_vcpu_state *st)
{
	char *json = NULL;

	cr_assert_eq(vmm_vcpu_to_json(st, &json), 0);
	free(m->vcpu);
	m->vcpu = json;
}

/* A captured simpleguest snapshot with its layout and vCPU state. */
static struct st_manifest *captured(struct vmm_layout *l, struct vmm_vcpu_state *st)
{
	struct vmm_sandbox *sb = sh_sandbox(0);
	struct st_manifest *m = NULL;
	struct vmm_fn *fns = NULL;
	unsigned n;

	cr_assert_eq(sh_call_i(sb, "counter_next", 0, 0), 1);
	cr_assert_eq(sh_snap(sb, &m), 0);
	vmm_sandbox_free(sb);
	cr_assert_eq(vmm_guest_from_json(m->guest, l, &fns, &n, NULL, 0), 0);
	free(fns);
	cr_assert_eq(vmm_vcpu_from_json(m->vcpu, st, NULL, 0), 0);
	return m;
}

Test(descriptions, a_manifest_whose_privileged_vcpu_state_is_not_strata_s_is_refused_naming_the_field,
     .init = sh_setup, .fini = sh_teardown)
{
	struct vmm_layout l;
	struct vmm_vcpu_state good, bad;
	struct st_manifest *m = captured(&l, &good);
	struct vmm_sandbox *sb = NULL;
	struct vmm_error err;

	for (size_t i = 0; i < sizeof(forgeries) / sizeof(forgeries[0]); i++) {
		bad = good;
		forgeries[i].edit(&bad, &l);
		manifest_set_vcpu(m, &bad);
		memset(&err, 0, sizeof(err));
		int rc = vmm_sandbox_from_snapshot(m, vmm_layer_open_store, sh_store, NULL, &sb, &err);
		if (rc == 0) {
			vmm_sandbox_free(sb);
			cr_assert_fail("forged %s: the sandbox was made", forgeries[i].field);
		}
		cr_assert_eq(rc, VMM_E_BAD_SNAPSHOT, "forged %s: %s", forgeries[i].field, err.message);
		cr_assert(strstr(err.message, forgeries[i].field), "forged %s: %s", forgeries[i].field, err.message);
	}
	st_manifest_free(m);
}

Test(descriptions, a_restore_in_place_to_a_forged_manifest_is_refused_and_changes_nothing, .init = sh_setup,
     .fini = sh_teardown)
{
	struct vmm_layout l;
	struct vmm_vcpu_state good, bad;
	struct st_manifest *m = captured(&l, &good);
	struct vmm_sandbox *sb = NULL;
	struct vmm_error err;

	cr_assert_eq(vmm_sandbox_from_snapshot(m, vmm_layer_open_store, sh_store, NULL, &sb, &err), 0, "%s",
		     err.message);
	bad = good;
	cpl0(&bad, &l);
	manifest_set_vcpu(m, &bad);
	int rc = vmm_sandbox_restore_to(sb, m, vmm_layer_open_store, sh_store);
	cr_assert_eq(rc, VMM_E_BAD_SNAPSHOT, "%s", vmm_sandbox_error(sb)->message);
	cr_assert(strstr(vmm_sandbox_error(sb)->message, "cs.selector"), "%s", vmm_sandbox_error(sb)->message);
	cr_assert_eq(sh_call_i(sb, "counter_next", 0, 0), 2, "still the first snapshot");
	vmm_sandbox_free(sb);
	st_manifest_free(m);
}

Test(descriptions, a_manifest_s_user_mode_state_is_taken_as_it_is, .init = sh_setup, .fini = sh_teardown)
{
	struct vmm_layout l;
	struct vmm_vcpu_state good, st;
	struct st_manifest *m = captured(&l, &good);
	struct vmm_sandbox *sb = NULL;
	struct vmm_error err;

	/* What a guest at CPL 3 may leave: flags it can set (CF, DF, AC, ID),
	 * IOPL 0 as kvm_pvm reports it, a canonical gs base, another
	 * rounding mode in MXCSR, APIC base 0 and XCR0 1 as earlier versions
	 * and KVM wrote them. */
	st = good;
	st.rflags = (st.rflags & ~(3ull << 12)) | 1 | 1ull << 10 | 1ull << 18 | 1ull << 21;
	st.gs.base = 0x7fffffff0000ull;
	uint32_t mxcsr = 0x1f80 | 3u << 13;
	memcpy(st.fxsave + 24, &mxcsr, 4);
	st.apic_base = 0;
	st.xcr0 = 1;
	manifest_set_vcpu(m, &st);
	cr_assert_eq(vmm_sandbox_from_snapshot(m, vmm_layer_open_store, sh_store, NULL, &sb, &err), 0, "%s",
		     err.message);
	cr_assert_eq(sh_call_i(sb, "counter_next", 0, 0), 2);
	vmm_sandbox_free(sb);
	st_manifest_free(m);
}
