/* vcpu.c: vCPU state and guest description as the manifest's "vcpu" and "guest" JSON objects (docs/restore.md). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "store/sys.h"
#include "vmm/snap_int.h"

/*
 * 64-bit values are written as "0x..." strings: JSON numbers lose bits past
 * 2^53 in many readers, and registers use all 64. Small fields are numbers.
 */

static json_t *hex64(uint64_t v)
{
	char b[24];

	snprintf(b, sizeof(b), "0x%" PRIx64, v);
	return json_string(b);
}

/* One hex digit's value, or -1: no signs, spaces or prefixes slip through. */
static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* "0x" and 1..16 hex digits, nothing else. */
static bool get_hex64(json_t *o, const char *key, uint64_t *v)
{
	json_t *j = json_object_get(o, key);
	const char *s;
	uint64_t x = 0;
	size_t n;

	if (!json_is_string(j))
		return false;
	s = json_string_value(j);
	n = strlen(s);
	if (n < 3 || n > 18 || s[0] != '0' || s[1] != 'x')
		return false;
	for (size_t i = 2; i < n; i++) {
		int d = hex_digit(s[i]);
		if (d < 0)
			return false;
		x = x << 4 | (uint64_t)d;
	}
	*v = x;
	return true;
}

static bool get_small(json_t *o, const char *key, uint64_t max, uint64_t *v)
{
	json_t *j = json_object_get(o, key);

	if (!json_is_integer(j) || json_integer_value(j) < 0 || (uint64_t)json_integer_value(j) > max)
		return false;
	*v = (uint64_t)json_integer_value(j);
	return true;
}

static const char *const gpr_names[16] = { "rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rsp", "rbp",
					   "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15" };

static json_t *seg_json(const struct vmm_segment *s)
{
	return json_pack("{s:o,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "base", hex64(s->base),
			 "limit", (json_int_t)s->limit, "selector", (json_int_t)s->selector, "type",
			 (json_int_t)s->type, "present", (json_int_t)s->present, "dpl", (json_int_t)s->dpl,
			 "db", (json_int_t)s->db, "s", (json_int_t)s->s, "l", (json_int_t)s->l, "g",
			 (json_int_t)s->g, "avl", (json_int_t)s->avl, "unusable", (json_int_t)s->unusable);
}

static bool seg_parse(json_t *o, const char *key, struct vmm_segment *s)
{
	json_t *j = json_object_get(o, key);
	uint64_t v[11];
	static const char *const k[11] = { "limit", "selector", "type", "present", "dpl", "db",
					   "s", "l", "g", "avl", "unusable" };
	static const uint64_t max[11] = { UINT32_MAX, UINT16_MAX, 15, 1, 3, 1, 1, 1, 1, 1, 1 };

	if (!json_is_object(j) || !get_hex64(j, "base", &s->base))
		return false;
	for (int i = 0; i < 11; i++)
		if (!get_small(j, k[i], max[i], &v[i]))
			return false;
	s->limit = (uint32_t)v[0];
	s->selector = (uint16_t)v[1];
	s->type = (uint8_t)v[2];
	s->present = (uint8_t)v[3];
	s->dpl = (uint8_t)v[4];
	s->db = (uint8_t)v[5];
	s->s = (uint8_t)v[6];
	s->l = (uint8_t)v[7];
	s->g = (uint8_t)v[8];
	s->avl = (uint8_t)v[9];
	s->unusable = (uint8_t)v[10];
	return true;
}

static const struct {
	const char *name;
	size_t off;
} seg_fields[] = {
	{ "cs", offsetof(struct vmm_vcpu_state, cs) }, { "ds", offsetof(struct vmm_vcpu_state, ds) },
	{ "es", offsetof(struct vmm_vcpu_state, es) }, { "fs", offsetof(struct vmm_vcpu_state, fs) },
	{ "gs", offsetof(struct vmm_vcpu_state, gs) }, { "ss", offsetof(struct vmm_vcpu_state, ss) },
	{ "tr", offsetof(struct vmm_vcpu_state, tr) }, { "ldt", offsetof(struct vmm_vcpu_state, ldt) },
};

static const struct {
	const char *name;
	size_t off;
} reg_fields[] = {
	{ "rip", offsetof(struct vmm_vcpu_state, rip) }, { "rflags", offsetof(struct vmm_vcpu_state, rflags) },
	{ "cr0", offsetof(struct vmm_vcpu_state, cr0) }, { "cr2", offsetof(struct vmm_vcpu_state, cr2) },
	{ "cr3", offsetof(struct vmm_vcpu_state, cr3) }, { "cr4", offsetof(struct vmm_vcpu_state, cr4) },
	{ "cr8", offsetof(struct vmm_vcpu_state, cr8) }, { "efer", offsetof(struct vmm_vcpu_state, efer) },
	{ "apic_base", offsetof(struct vmm_vcpu_state, apic_base) },
	{ "xcr0", offsetof(struct vmm_vcpu_state, xcr0) },
};

static int dump(json_t *o, char **json)
{
	if (!o)
		return -ENOMEM;
	*json = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	return *json ? 0 : -ENOMEM;
}

json_t *vmm_vcpu_object(const struct vmm_vcpu_state *st)
{
	json_t *o = json_object(), *g = json_object();
	char fx[2 * 512 + 1];

	if (!o || !g) {
		json_decref(o);
		json_decref(g);
		return NULL;
	}
	json_object_set_new(o, "version", json_integer(st->version));
	for (int i = 0; i < 16; i++)
		json_object_set_new(g, gpr_names[i], hex64(st->gpr[i]));
	json_object_set_new(o, "gpr", g);
	for (size_t i = 0; i < sizeof(reg_fields) / sizeof(reg_fields[0]); i++) {
		uint64_t v;
		memcpy(&v, (const uint8_t *)st + reg_fields[i].off, 8);
		json_object_set_new(o, reg_fields[i].name, hex64(v));
	}
	for (size_t i = 0; i < sizeof(seg_fields) / sizeof(seg_fields[0]); i++)
		json_object_set_new(o, seg_fields[i].name,
				    seg_json((const struct vmm_segment *)((const uint8_t *)st + seg_fields[i].off)));
	json_object_set_new(o, "gdt", json_pack("{s:o,s:I}", "base", hex64(st->gdt.base), "limit",
						(json_int_t)st->gdt.limit));
	json_object_set_new(o, "idt", json_pack("{s:o,s:I}", "base", hex64(st->idt.base), "limit",
						(json_int_t)st->idt.limit));
	for (int i = 0; i < 512; i++)
		snprintf(fx + 2 * i, 3, "%02x", st->fxsave[i]);
	json_object_set_new(o, "fxsave", json_string(fx));
	/* MSRs: the guest runtime uses none beyond EFER (above); no SYSCALL,
	 * no FS/GS base MSRs (bases travel in the segments). */
	json_object_set_new(o, "msrs", json_object());
	return o;
}

int vmm_vcpu_to_json(const struct vmm_vcpu_state *st, char **json)
{
	return dump(vmm_vcpu_object(st), json);
}

static int bad(char *why, size_t whylen, const char *what)
{
	if (why)
		snprintf(why, whylen, "%s", what);
	return VMM_E_BAD_SNAPSHOT;
}

int vmm_vcpu_from_json(const char *json, struct vmm_vcpu_state *st, char *why, size_t whylen)
{
	json_error_t e;
	json_t *o = json ? json_loads(json, JSON_REJECT_DUPLICATES, &e) : NULL;
	struct vmm_vcpu_state s = { 0 };
	uint64_t v;
	int rc = VMM_E_BAD_SNAPSHOT;

	if (!json_is_object(o)) {
		rc = bad(why, whylen, "the manifest has no vCPU state object");
		goto out_free;
	}
	if (!get_small(o, "version", UINT32_MAX, &v) || v != VMM_VCPU_STATE_VERSION) {
		rc = bad(why, whylen, "vCPU state version is not one this VMM reads");
		goto out_free;
	}
	s.version = (uint32_t)v;
	json_t *g = json_object_get(o, "gpr");
	for (int i = 0; i < 16; i++)
		if (!json_is_object(g) || !get_hex64(g, gpr_names[i], &s.gpr[i])) {
			rc = bad(why, whylen, "vCPU state: general registers missing or malformed");
			goto out_free;
		}
	for (size_t i = 0; i < sizeof(reg_fields) / sizeof(reg_fields[0]); i++) {
		if (!get_hex64(o, reg_fields[i].name, &v)) {
			if (why)
				snprintf(why, whylen, "vCPU state: register %s missing or malformed", reg_fields[i].name);
			goto out_free;
		}
		memcpy((uint8_t *)&s + reg_fields[i].off, &v, 8);
	}
	for (size_t i = 0; i < sizeof(seg_fields) / sizeof(seg_fields[0]); i++)
		if (!seg_parse(o, seg_fields[i].name, (struct vmm_segment *)((uint8_t *)&s + seg_fields[i].off))) {
			if (why)
				snprintf(why, whylen, "vCPU state: segment %s missing or malformed", seg_fields[i].name);
			goto out_free;
		}
	json_t *gdt = json_object_get(o, "gdt"), *idt = json_object_get(o, "idt");
	uint64_t gl, il;
	if (!json_is_object(gdt) || !json_is_object(idt) || !get_hex64(gdt, "base", &s.gdt.base) ||
	    !get_hex64(idt, "base", &s.idt.base) || !get_small(gdt, "limit", UINT16_MAX, &gl) ||
	    !get_small(idt, "limit", UINT16_MAX, &il)) {
		rc = bad(why, whylen, "vCPU state: descriptor tables missing or malformed");
		goto out_free;
	}
	s.gdt.limit = (uint16_t)gl;
	s.idt.limit = (uint16_t)il;
	json_t *fx = json_object_get(o, "fxsave");
	const char *fxs = json_is_string(fx) ? json_string_value(fx) : NULL;
	if (!fxs || strlen(fxs) != 1024) {
		rc = bad(why, whylen, "vCPU state: FXSAVE image missing or not 512 bytes");
		goto out_free;
	}
	for (int i = 0; i < 512; i++) {
		int hi = hex_digit(fxs[2 * i]), lo = hex_digit(fxs[2 * i + 1]);
		if (hi < 0 || lo < 0) {
			rc = bad(why, whylen, "vCPU state: FXSAVE image is not hex");
			goto out_free;
		}
		s.fxsave[i] = (uint8_t)(hi << 4 | lo);
	}
	*st = s;
	rc = 0;
out_free:
	json_decref(o);
	return rc;
}

static const struct {
	const char *name;
	size_t off;
} layout_fields[] = {
#define F(x) { #x, offsetof(struct vmm_layout, x) }
	F(pml4), F(pdpt), F(pd), F(pt), F(gdt), F(tss), F(idt), F(ist1_top), F(ist2_top), F(boot_info),
	F(image_lo), F(image_hi), F(stack_guard), F(stack_lo), F(stack_hi), F(low_end), F(in_addr),
	F(in_size), F(in_span), F(out_addr), F(out_size), F(out_span), F(heap_addr), F(heap_size),
	F(heap_span), F(mem_size),
#undef F
};

json_t *vmm_guest_object(const struct vmm_sandbox *sb)
{
	json_t *o = json_object(), *l = json_object(), *fns = json_array();

	if (!o || !l || !fns) {
		json_decref(o);
		json_decref(l);
		json_decref(fns);
		return NULL;
	}
	for (size_t i = 0; i < sizeof(layout_fields) / sizeof(layout_fields[0]); i++) {
		uint64_t v;
		memcpy(&v, (const uint8_t *)&sb->layout + layout_fields[i].off, 8);
		json_object_set_new(l, layout_fields[i].name, json_integer((json_int_t)v));
	}
	json_object_set_new(l, "n_pd", json_integer(sb->layout.n_pd));
	json_object_set_new(l, "n_pt", json_integer(sb->layout.n_pt));
	for (unsigned i = 0; i < sb->nfns; i++)
		json_array_append_new(fns, json_pack("{s:s,s:s}", "name", sb->fns[i].name, "sig", sb->fns[i].sig));
	json_object_set_new(o, "abi_version", json_integer(STRATA_ABI_VERSION));
	json_object_set_new(o, "layout", l);
	json_object_set_new(o, "functions", fns);
	return o;
}

int vmm_guest_to_json(const struct vmm_sandbox *sb, char **json)
{
	return dump(vmm_guest_object(sb), json);
}

int vmm_guest_from_json(const char *json, struct vmm_layout *lout, struct vmm_fn **fns_out, unsigned *nfns,
			char *why, size_t whylen)
{
	json_error_t e;
	json_t *o = json ? json_loads(json, JSON_REJECT_DUPLICATES, &e) : NULL;
	struct vmm_layout l = { 0 };
	struct vmm_fn *fns = NULL;
	uint64_t v;
	int rc = VMM_E_BAD_SNAPSHOT;

	if (!json_is_object(o)) {
		rc = bad(why, whylen, "the manifest has no guest description object");
		goto out_free;
	}
	if (!get_small(o, "abi_version", UINT32_MAX, &v)) {
		rc = bad(why, whylen, "the guest description has no valid abi_version");
		goto out_free;
	}
	if (v != STRATA_ABI_VERSION) {
		if (why)
			snprintf(why, whylen, "the snapshot's guest speaks ABI version %" PRIu64 ", this VMM speaks %d", v,
				 STRATA_ABI_VERSION);
		goto out_free;
	}
	json_t *lj = json_object_get(o, "layout");
	for (size_t i = 0; i < sizeof(layout_fields) / sizeof(layout_fields[0]); i++) {
		if (!json_is_object(lj) || !get_small(lj, layout_fields[i].name, 1ull << 40, &v)) {
			if (why)
				snprintf(why, whylen, "guest layout field %s missing or malformed", layout_fields[i].name);
			goto out_free;
		}
		memcpy((uint8_t *)&l + layout_fields[i].off, &v, 8);
	}
	if (!get_small(lj, "n_pd", 4, &v))
		goto out_bad_layout;
	l.n_pd = (unsigned)v;
	if (!get_small(lj, "n_pt", 8, &v))
		goto out_bad_layout;
	l.n_pt = (unsigned)v;
	/* The regions the host translates guest pointers into must nest in memory. */
	if (l.image_lo >= l.mem_size || l.in_addr + l.in_size > l.mem_size || l.out_addr + l.out_size > l.mem_size ||
	    l.heap_addr + l.heap_size > l.mem_size || l.ist2_top > l.image_lo || l.mem_size % VMM_PAGE)
		goto out_bad_layout;
	/* Every address in it is strata's for these sizes, or it is refused. */
	if (vmm_layout_same(&l, &l) < 0) {
		rc = bad(why, whylen, "guest layout is not the one strata computes for its sizes and image");
		goto out_free;
	}
	json_t *fj = json_object_get(o, "functions");
	if (!json_is_array(fj) || json_array_size(fj) > STRATA_MAX_FUNCTIONS) {
		rc = bad(why, whylen, "guest function table missing or too long");
		goto out_free;
	}
	fns = st_sys_calloc(json_array_size(fj) + 1, sizeof(*fns));
	if (!fns) {
		rc = -ENOMEM;
		goto out_free;
	}
	for (size_t i = 0; i < json_array_size(fj); i++) {
		json_t *f = json_array_get(fj, i);
		const char *name = json_string_value(json_object_get(f, "name"));
		const char *sig = json_string_value(json_object_get(f, "sig"));
		struct vmm_fn *d = &fns[i];
		if (!name || !sig || !*name || strlen(name) >= sizeof(d->name) || strlen(sig) >= sizeof(d->sig) ||
		    !vmm_sig_parse(sig, &d->type)) {
			rc = bad(why, whylen, "guest function table has a malformed entry");
			goto out_free;
		}
		strcpy(d->name, name);
		strcpy(d->sig, sig);
	}
	*lout = l;
	*nfns = (unsigned)json_array_size(fj);
	*fns_out = fns;
	fns = NULL;
	rc = 0;
	goto out_free;
out_bad_layout:
	rc = bad(why, whylen, "guest layout is inconsistent");
out_free:
	free(fns);
	json_decref(o);
	return rc;
}
