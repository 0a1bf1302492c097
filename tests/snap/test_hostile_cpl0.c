/* test_hostile_cpl0.c: CPL 0 channels: a guest with its own exception stubs (vmm/guest/hostile_cpl0.S) never runs them, so nothing it could keep at CPL 0 survives a restore, a warm take or a recycled VM shell. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "vmm/snap_int.h"

/* hostile_cpl0.c's ways to trap from CPL 3, with the vector the host
 * reports for each on the kvm backend. Its gates: int3 DPL 3, every other
 * one DPL 0, so `int $n` is #GP (13). kvm_pvm runs CPL 3 on the host's own
 * IDT: it raises #UD (6) for an `int n` the host kernel's gate refuses
 * (docs/vmm.md), and passes on vector 4 for `int $4` (the host kernel's
 * #OF gate is DPL 3, for INTO). Either way the host's stub reports it. */
static const struct {
	int64_t way;
	const char *what;
	unsigned vector, or_vector;
} ways[] = {
	{ 3, "int3", 3, 3 },
	{ 6, "ud2", 6, 6 },
	{ 13, "hlt at CPL 3", 13, 13 },
	{ 14, "a null read", 14, 14 },
	{ 0, "a divide by 0", 0, 0 },
	{ 0x100 + 14, "int $0x0e", 13, 6 },
	{ 0x100 + 4, "int $0x04", 13, 4 },
	{ 0x100 + 0x80, "int $0x80", 13, 6 },
};
#define NWAYS (sizeof(ways) / sizeof(ways[0]))
/* hostile_cpl0.S's work at CPL 0: the DR0 counter, the KERNEL_GS_BASE counter. */
static const char *const ops[] = { "DR0", "KERNEL_GS_BASE" };

static bool on_kvm(void)
{
	return vmm_backend_resolve(vmm_host_default(), VMM_BACKEND_AUTO) == VMM_BACKEND_KVM;
}

/*
 * One trap: appends what came of it to `log` ("fault N" or the value the
 * guest's CPL 0 stub returned) and returns true if the guest got CPL 0. A
 * fault poisons the sandbox; the caller restores or frees it.
 */
static bool trap(struct vmm_sandbox *sb, size_t w, int64_t op, char *log, size_t len)
{
	struct vmm_value a[2] = { { .type = VMM_I64, .i64 = ways[w].way }, { .type = VMM_I64, .i64 = op } };
	struct vmm_result r = { 0 };
	int rc = vmm_sandbox_call(sb, "cpl0_next", a, 2, &r);
	size_t at = strlen(log);

	if (rc == 0) {
		snprintf(log + at, len - at, " %lld", (long long)r.i64);
		return true;
	}
	const struct vmm_error *e = vmm_sandbox_error(sb);
	cr_assert_eq(rc, VMM_E_GUEST_FAULT, "%s: %s", ways[w].what, e->message);
	if (on_kvm())
		cr_assert(e->vector == ways[w].vector || e->vector == ways[w].or_vector,
			  "%s: the host reports vector %u (%s), not %u", ways[w].what, e->vector, e->message,
			  ways[w].vector);
	snprintf(log + at, len - at, " fault %u", e->vector);
	return false;
}

/* The hostile guest, captured once; *m gets its snapshot. */
static struct vmm_sandbox *cpl0_snap(const struct vmm_config *cfg, struct st_manifest **m)
{
	struct vmm_sandbox *sb = NULL;
	struct vmm_error err;

	cr_assert_eq(vmm_sandbox_new(HOSTILECPL0, cfg, &sb, &err), 0, "sandbox: %s", err.message);
	cr_assert_eq(sh_snap(sb, m), 0);
	return sb;
}

Test(hostile, no_trap_runs_the_guest_s_own_stubs_at_cpl0_across_restores_in_place, .init = sh_setup,
     .fini = sh_teardown)
{
	struct vmm_sandbox *sb = cpl0_snap(NULL, NULL);

	vmm_sandbox_set_debug(sb, true);
	for (size_t w = 0; w < NWAYS; w++) {
		for (int64_t op = 0; op < 2; op++) {
			char log[128] = "";
			bool cpl0 = false;
			for (int round = 0; round < 3; round++) {
				cpl0 |= trap(sb, w, op, log, sizeof(log));
				cr_assert_eq(vmm_sandbox_restore(sb), 0, "%s", vmm_sandbox_error(sb)->message);
			}
			cr_log_info("%s, %s counter, three restores in place:%s", ways[w].what, ops[op], log);
			cr_expect(!cpl0, "%s ran the guest's own stub at CPL 0; its %s counter across restores in place:%s",
				  ways[w].what, ops[op], log);
		}
	}
	vmm_sandbox_free(sb);
}

/* Three lives of `int3` with the DR0 counter, each in a new sandbox from m
 * on host (through its warm list or its VM shells, as it keeps them). */
static void three_lives(struct vmm_host *host, const char *how)
{
	struct vmm_config cfg = { .host = host };
	struct st_manifest *m = NULL;
	struct vmm_sandbox *sb = cpl0_snap(&cfg, &m);
	struct vmm_host_stats hs;
	char log[128] = "";
	bool cpl0 = false;

	vmm_sandbox_free(sb);  /* kept: the first life reuses it */
	for (int life = 0; life < 3; life++) {
		vmm_host_stats(host, &hs);
		unsigned reused = hs.warm + hs.shells;
		sb = sh_from_snapshot_checked(m, &cfg);
		vmm_host_stats(host, &hs);
		cr_assert_eq(hs.warm + hs.shells, reused - 1, "life %d: the new sandbox came from %s", life, how);
		cpl0 |= trap(sb, 0, 0, log, sizeof(log));
		/* A faulted sandbox is poisoned, and a poisoned one is not kept:
		 * back to the snapshot first, as a platform would before handing
		 * it on. */
		cr_assert_eq(vmm_sandbox_restore(sb), 0, "%s", vmm_sandbox_error(sb)->message);
		vmm_sandbox_free(sb);
	}
	cr_log_info("int3, DR0 counter, three sandboxes from %s:%s", how, log);
	cr_assert(!cpl0, "int3 ran the guest's own stub at CPL 0; its DR0 counter across sandboxes from %s:%s", how, log);
	st_manifest_free(m);
	cr_assert_eq(vmm_host_free(host), 0);
}

Test(hostile, no_trap_runs_the_guest_s_own_stubs_in_a_new_sandbox_from_the_warm_list, .init = sh_setup,
     .fini = sh_teardown)
{
	three_lives(sh_debug_host(4, 0), "the warm list");
}

Test(hostile, no_trap_runs_the_guest_s_own_stubs_in_a_recycled_vm_shell, .init = sh_setup, .fini = sh_teardown)
{
	if (!on_kvm())
		cr_skip_test("VM shells are the kvm backend's");
	three_lives(sh_debug_host(0, 2), "a recycled VM shell");
}

/* ---- hostile snapshots: the pages below the image are strata's own ---- */

/*
 * m's memory (sb's, just captured) as one new layer with `edit` applied
 * to it and, if not NULL, the guest description and vCPU state given. The
 * caller frees the manifest.
 */
static struct st_manifest *forge(struct vmm_sandbox *sb, const struct st_manifest *m,
				 void (*edit)(uint8_t *mem, const struct vmm_layout *l), const char *guest,
				 const struct vmm_vcpu_state *st)
{
	struct vmm_layout l;
	struct vmm_fn *fns = NULL;
	unsigned nfns;
	uint8_t *mem, *copy;
	uint64_t size;
	struct st_blob_writer *w = NULL;
	struct st_manifest *f = NULL;
	st_id id;
	bool dedup;

	cr_assert_eq(vmm_guest_from_json(m->guest, &l, &fns, &nfns, NULL, 0), 0);
	free(fns);
	vmm_sandbox_memory(sb, &mem, &size);
	cr_assert(copy = malloc(size));
	memcpy(copy, mem, size);
	edit(copy, &l);
	cr_assert_eq(st_blob_writer_new(sh_store, &w), 0);
	cr_assert_eq(st_blob_writer_write(w, copy, size), 0);
	cr_assert_eq(st_blob_writer_commit(w, NULL, &id, &dedup), 0);
	free(copy);
	cr_assert_eq(st_manifest_dup(m, &f), 0);
	free(f->layers);
	free(f->ranges);
	cr_assert(f->layers = calloc(1, sizeof(*f->layers)));
	cr_assert(f->ranges = calloc(1, sizeof(*f->ranges)));
	f->nlayers = 1;
	f->layers[0] = (struct st_layer_ref){ .id = id, .pages = size / 4096 };
	f->nranges = 1;
	f->ranges[0] = (struct st_range){ .gpage = 0, .npages = size / 4096, .layer = 0, .lpage = 0 };
	if (guest) {
		free(f->guest);
		cr_assert(f->guest = strdup(guest));
	}
	if (st) {
		char *json = NULL;
		cr_assert_eq(vmm_vcpu_to_json(st, &json), 0);
		free(f->vcpu);
		f->vcpu = json;
	}
	return f;
}

static void put64(uint8_t *mem, uint64_t at, uint64_t v) { memcpy(mem + at, &v, 8); }
static uint64_t get64(const uint8_t *mem, uint64_t at)
{
	uint64_t v;
	memcpy(&v, mem + at, 8);
	return v;
}

/* What a snapshot taken before strata owned the stubs has: gate 3 (DPL 3)
 * pointing at the guest's own code. */
static void idt_to_the_image(uint8_t *mem, const struct vmm_layout *l)
{
	uint64_t off = l->image_lo, g0 = get64(mem, l->idt + 16 * 3);
	g0 = (g0 & 0x0000ffffffff0000ull) | (off & 0xffff) | ((off >> 16) & 0xffff) << 48;
	put64(mem, l->idt + 16 * 3, g0);
	put64(mem, l->idt + 16 * 3 + 8, off >> 32);
}
/* The IDT page user-writable (PTE R/W and U/S, SDM Vol. 3A 4.5). */
static void idt_user_writable(uint8_t *mem, const struct vmm_layout *l)
{
	put64(mem, l->pt + 8 * (l->idt / 4096), get64(mem, l->pt + 8 * (l->idt / 4096)) | 2 | 4);
}
/* The host's stub for int3 made `iretq`: back to CPL 3 with CPL 0 state. */
static void stub_returns(uint8_t *mem, const struct vmm_layout *l)
{
	mem[l->isr + 3 * STRATA_ISR_STRIDE] = 0x48;
	mem[l->isr + 3 * STRATA_ISR_STRIDE + 1] = 0xcf;
}
/* RSP0 on the guest's own stack: the CPU would push CPL 0 frames there. */
static void rsp0_user(uint8_t *mem, const struct vmm_layout *l) { put64(mem, l->tss + 4, l->stack_hi); }
/* A second PML4 entry mapping the page tables again, user-writable. */
static void pml4_alias(uint8_t *mem, const struct vmm_layout *l) { put64(mem, l->pml4 + 8, l->pml4 | 0x27); }
static void boot_info_heap(uint8_t *mem, const struct vmm_layout *l)
{
	put64(mem, l->boot_info + offsetof(struct strata_boot_info, heap_size), 1ull << 30);
}
static void nothing(uint8_t *mem, const struct vmm_layout *l)
{
	(void)mem;
	(void)l;
}

Test(hostile, a_snapshot_whose_supervisor_pages_are_not_strata_s_is_refused_naming_the_page, .init = sh_setup,
     .fini = sh_teardown)
{
	static const struct {
		void (*edit)(uint8_t *mem, const struct vmm_layout *l);
		const char *names;
	} forgeries[] = {
		{ idt_to_the_image, "IDT" },        { idt_user_writable, "page-table" }, { stub_returns, "exception-stub" },
		{ rsp0_user, "GDT/TSS" },           { pml4_alias, "page-table" },       { boot_info_heap, "boot-info" },
	};
	struct st_manifest *m = NULL;
	struct vmm_sandbox *sb = cpl0_snap(NULL, &m), *out = NULL;
	struct vmm_error err;

	st_id mid;
	cr_assert_eq(st_manifest_id(m, &mid, NULL, 0), 0);
	/* The control: the same memory as a layer of its own is taken. */
	struct st_manifest *f = forge(sb, m, nothing, NULL, NULL);
	cr_assert_eq(vmm_sandbox_from_snapshot(f, vmm_layer_open_store, sh_store, NULL, &out, &err), 0, "%s",
		     err.message);
	vmm_sandbox_free(out);
	st_manifest_free(f);
	for (size_t i = 0; i < sizeof(forgeries) / sizeof(forgeries[0]); i++) {
		f = forge(sb, m, forgeries[i].edit, NULL, NULL);
		memset(&err, 0, sizeof(err));
		int rc = vmm_sandbox_from_snapshot(f, vmm_layer_open_store, sh_store, NULL, &out, &err);
		if (rc == 0) {
			vmm_sandbox_free(out);
			cr_assert_fail("forged %s page: the sandbox was made", forgeries[i].names);
		}
		cr_assert_eq(rc, VMM_E_BAD_SNAPSHOT, "forged %s page: %s", forgeries[i].names, err.message);
		cr_assert(strstr(err.message, forgeries[i].names), "forged %s page: %s", forgeries[i].names, err.message);
		/* A restore in place to it is refused as well, and changes nothing. */
		rc = vmm_sandbox_restore_to(sb, f, vmm_layer_open_store, sh_store);
		cr_assert_eq(rc, VMM_E_BAD_SNAPSHOT, "restore to a forged %s page: %s", forgeries[i].names,
			     vmm_sandbox_error(sb)->message);
		st_id now;
		cr_assert(vmm_sandbox_snapshot_id(sb, &now) && st_id_equal(&now, &mid), "still on its snapshot");
		cr_assert_eq(vmm_sandbox_restore(sb), 0, "%s", vmm_sandbox_error(sb)->message);
		cr_assert_eq(vmm_sandbox_check(sb, NULL), 0, "%s", vmm_sandbox_error(sb)->message);
		st_manifest_free(f);
	}
	vmm_sandbox_free(sb);
	st_manifest_free(m);
}

/* The IDT moved into the heap (user-writable) by the guest description and
 * the vCPU state together, with its gates copied there: each would pass
 * the other's checks alone. */
static uint64_t moved_idt;
static void idt_into_the_heap(uint8_t *mem, const struct vmm_layout *l)
{
	memcpy(mem + moved_idt, mem + l->idt, 4096);
	idt_to_the_image(mem + moved_idt - l->idt, l);
}

Test(hostile, a_snapshot_whose_layout_moves_the_idt_is_refused, .init = sh_setup, .fini = sh_teardown)
{
	struct st_manifest *m = NULL;
	struct vmm_sandbox *sb = cpl0_snap(NULL, &m), *out = NULL;
	struct vmm_vcpu_state st;
	struct vmm_error err;
	struct vmm_layout l;
	struct vmm_fn *fns = NULL;
	unsigned nfns;
	char from[64], to[64], guest[8192];

	cr_assert_eq(vmm_guest_from_json(m->guest, &l, &fns, &nfns, NULL, 0), 0);
	free(fns);
	cr_assert_eq(vmm_vcpu_from_json(m->vcpu, &st, NULL, 0), 0);
	moved_idt = l.heap_addr;
	snprintf(from, sizeof(from), "\"idt\":%" PRIu64 ",", l.idt);
	snprintf(to, sizeof(to), "\"idt\":%" PRIu64 ",", moved_idt);
	const char *at = strstr(m->guest, from);
	cr_assert(at, "%s", m->guest);
	cr_assert_lt(strlen(m->guest) + strlen(to), sizeof(guest));
	snprintf(guest, sizeof(guest), "%.*s%s%s", (int)(at - m->guest), m->guest, to, at + strlen(from));
	st.idt.base = moved_idt;
	struct st_manifest *f = forge(sb, m, idt_into_the_heap, guest, &st);
	int rc = vmm_sandbox_from_snapshot(f, vmm_layer_open_store, sh_store, NULL, &out, &err);
	if (rc == 0) {
		vmm_sandbox_free(out);
		cr_assert_fail("an IDT in the heap: the sandbox was made");
	}
	cr_assert_eq(rc, VMM_E_BAD_SNAPSHOT, "%s", err.message);
	cr_assert(strstr(err.message, "guest layout"), "%s", err.message);
	st_manifest_free(f);
	vmm_sandbox_free(sb);
	st_manifest_free(m);
}

Test(hostile, cpl3_can_neither_write_nor_run_the_pages_strata_builds, .init = sh_setup, .fini = sh_teardown)
{
	struct st_manifest *m = NULL;
	struct vmm_sandbox *sb = cpl0_snap(NULL, &m);
	struct vmm_layout l;
	struct vmm_fn *fns = NULL;
	unsigned nfns;

	cr_assert_eq(vmm_guest_from_json(m->guest, &l, &fns, &nfns, NULL, 0), 0);
	free(fns);
	const struct {
		uint64_t addr;
		const char *what;
	} pages[] = {
		{ l.pml4, "PML4" }, { l.pdpt, "PDPT" }, { l.pd, "PD" }, { l.pt, "PT" }, { l.gdt, "GDT" },
		{ l.tss, "TSS" }, { l.idt, "IDT" }, { l.isr, "exception-stub" }, { l.ist1_top - 8, "IST1 stack" },
		{ l.ist2_top - 8, "IST2 stack" }, { l.boot_info, "boot-info" },
	};
	for (size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); i++)
		sh_must_page_fault(sb, "cpl3_poke", pages[i].addr, pages[i].what);
	sh_must_page_fault(sb, "cpl3_jump", l.isr + 3 * STRATA_ISR_STRIDE, "exception-stub");
	vmm_sandbox_free(sb);
	st_manifest_free(m);
}
