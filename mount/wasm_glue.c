/* wasm_glue.c: a wasm module's type, import, export and strata.sig sections, and the C glue that makes its exports strata functions (docs/wasm.md). */
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/abi.h"
#include "wasm_glue.h"

enum { T_I32 = 0x7f, T_I64 = 0x7e, T_F32 = 0x7d, T_F64 = 0x7c };
enum { K_FUNC = 0, K_TABLE = 1, K_MEMORY = 2, K_GLOBAL = 3 };

/* The declared heap (module_heap). */
#define WASM_GLUE_PAGE (64ull << 10)          /* a wasm page */
#define WASM_GLUE_GROW (16ull << 20)          /* room to grow for a memory without a maximum */
#define WASM_GLUE_LINEAR_CAP (1ull << 30)     /* at most this much linear memory unless it starts larger */
#define WASM_GLUE_HEADROOM (1ull << 20)       /* the runtime's own allocations (tables, types, stdio) */

struct rd {
	const uint8_t *p, *end;
	bool bad;
};

struct str {
	const char *p;
	uint32_t n;
};

struct ftype {
	const uint8_t *params, *results;
	uint32_t np, nr;
};

struct import {
	struct str mod, name;
	uint32_t kind, type;
};

struct export {
	struct str name;
	uint32_t kind, idx;
};

struct module {
	struct ftype *types;
	uint32_t ntypes;
	struct import *imports;
	uint32_t nimports, nfuncimports;
	uint32_t *funcs;
	uint32_t nfuncs, nmems;
	struct export *exports;
	uint32_t nexports;
	struct str sigsec;   /* the strata.sig custom section's text */
	uint32_t mem_min, mem_max;  /* the first memory's limits, in 64 KiB pages */
	bool mem_has_max;
};

static int fail(char *why, size_t wl, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *why, size_t wl, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, wl, fmt, ap);
	va_end(ap);
	return -1;
}

static uint8_t rd_byte(struct rd *r)
{
	if (r->p >= r->end) {
		r->bad = true;
		return 0;
	}
	return *r->p++;
}

static uint32_t rd_u32(struct rd *r)
{
	uint64_t v = 0;

	for (unsigned shift = 0; shift < 35; shift += 7) {
		uint8_t b = rd_byte(r);
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			if (v > UINT32_MAX)
				r->bad = true;
			return (uint32_t)v;
		}
	}
	r->bad = true;
	return 0;
}

static struct str rd_name(struct rd *r)
{
	uint32_t n = rd_u32(r);
	struct str s = { (const char *)r->p, n };

	if (r->bad || n > (size_t)(r->end - r->p)) {
		r->bad = true;
		return (struct str){ "", 0 };
	}
	r->p += n;
	return s;
}

/* Limits: min, and max if flag bit 0 (else *max untouched). */
static void rd_limits(struct rd *r, uint32_t *min, uint32_t *max)
{
	uint8_t f = rd_byte(r);

	*min = rd_u32(r);
	if (f & 1)
		*max = rd_u32(r);
}

static bool str_is(struct str s, const char *z)
{
	return s.n == strlen(z) && memcmp(s.p, z, s.n) == 0;
}

/* Vectors are bounded by the section's bytes: each element takes one at least. */
static void *rd_vec(struct rd *r, uint32_t *n, size_t elem)
{
	*n = rd_u32(r);
	if (r->bad || *n > (size_t)(r->end - r->p)) {
		r->bad = true;
		return NULL;
	}
	return calloc(*n ? *n : 1, elem);
}

static int parse(const uint8_t *w, size_t len, struct module *m, char *why, size_t wl)
{
	struct rd f = { w, w + len, false };
	static const uint8_t magic[8] = { 0, 'a', 's', 'm', 1, 0, 0, 0 };

	if (len < 8 || memcmp(w, magic, 8) != 0)
		return fail(why, wl, "not a WebAssembly binary module (version 1)");
	f.p += 8;
	uint32_t seen = 0, lo, hi;
	while (f.p < f.end && !f.bad) {
		uint8_t id = rd_byte(&f);
		uint32_t size = rd_u32(&f);
		if (f.bad || size > (size_t)(f.end - f.p))
			break;
		/* Each known section once (wasm's rule; and each is read into one place). */
		if (id > 0 && id < 32) {
			if (seen & (1u << id))
				return fail(why, wl, "malformed module: section %u appears twice", id);
			seen |= 1u << id;
		}
		struct rd r = { f.p, f.p + size, false };
		f.p += size;
		switch (id) {
		case 0: {
			struct str name = rd_name(&r);
			if (!r.bad && str_is(name, "strata.sig"))
				m->sigsec = (struct str){ (const char *)r.p, (uint32_t)(r.end - r.p) };
			r.bad = false;
			break;
		}
		case 1:
			if (!(m->types = rd_vec(&r, &m->ntypes, sizeof(*m->types))))
				break;
			for (uint32_t i = 0; i < m->ntypes && !r.bad; i++) {
				struct ftype *t = &m->types[i];
				if (rd_byte(&r) != 0x60)
					return fail(why, wl, "type %u is not a function type", i);
				t->np = rd_u32(&r);
				t->params = r.p;
				if (t->np > (size_t)(r.end - r.p)) {
					r.bad = true;
					break;
				}
				r.p += t->np;
				t->nr = rd_u32(&r);
				t->results = r.p;
				if (t->nr > (size_t)(r.end - r.p)) {
					r.bad = true;
					break;
				}
				r.p += t->nr;
			}
			break;
		case 2:
			if (!(m->imports = rd_vec(&r, &m->nimports, sizeof(*m->imports))))
				break;
			for (uint32_t i = 0; i < m->nimports && !r.bad; i++) {
				struct import *im = &m->imports[i];
				im->mod = rd_name(&r);
				im->name = rd_name(&r);
				im->kind = rd_byte(&r);
				switch (im->kind) {
				case K_FUNC:
					im->type = rd_u32(&r);
					m->nfuncimports++;
					break;
				case K_TABLE: rd_byte(&r); rd_limits(&r, &lo, &hi); break;
				case K_MEMORY: rd_limits(&r, &lo, &hi); break;
				case K_GLOBAL: rd_byte(&r); rd_byte(&r); break;
				default: r.bad = true;
				}
			}
			break;
		case 3:
			if (!(m->funcs = rd_vec(&r, &m->nfuncs, sizeof(*m->funcs))))
				break;
			for (uint32_t i = 0; i < m->nfuncs; i++)
				m->funcs[i] = rd_u32(&r);
			break;
		case 5:
			m->nmems = rd_u32(&r);
			if (m->nmems >= 1) {
				uint8_t flags = r.p < r.end ? *r.p : 0;
				rd_limits(&r, &m->mem_min, &m->mem_max);
				m->mem_has_max = (flags & 1) != 0;
			}
			r.p = r.end;
			break;
		case 7:
			if (!(m->exports = rd_vec(&r, &m->nexports, sizeof(*m->exports))))
				break;
			for (uint32_t i = 0; i < m->nexports && !r.bad; i++) {
				m->exports[i].name = rd_name(&r);
				m->exports[i].kind = rd_byte(&r);
				m->exports[i].idx = rd_u32(&r);
			}
			break;
		default:
			r.p = r.end;
		}
		if (r.bad)
			return fail(why, wl, "malformed section %u", id);
	}
	if (f.bad)
		return fail(why, wl, "malformed module: a section runs past the end");
	for (uint32_t i = 0; i < m->nimports; i++)
		if (m->imports[i].kind == K_FUNC && m->imports[i].type >= m->ntypes)
			return fail(why, wl, "import %u names type %u of %u", i, m->imports[i].type, m->ntypes);
	for (uint32_t i = 0; i < m->nfuncs; i++)
		if (m->funcs[i] >= m->ntypes)
			return fail(why, wl, "function %u names type %u of %u", i, m->funcs[i], m->ntypes);
	return 0;
}

static const struct ftype *func_type(const struct module *m, uint32_t idx)
{
	if (idx < m->nfuncimports) {
		for (uint32_t i = 0, k = 0; i < m->nimports; i++)
			if (m->imports[i].kind == K_FUNC && k++ == idx)
				return &m->types[m->imports[i].type];
	}
	idx -= m->nfuncimports;
	return idx < m->nfuncs ? &m->types[m->funcs[idx]] : NULL;
}

/* wasm2c's names: letters, digits and '_' as they are (but 'Z'), any other
 * byte as Z and two hex digits. */
static void put_mangled(FILE *out, struct str s)
{
	for (uint32_t i = 0; i < s.n; i++) {
		unsigned char ch = (unsigned char)s.p[i];
		if (ch != 'Z' && ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_'))
			fputc(ch, out);
		else
			fprintf(out, "Z%02X", ch);
	}
}

/* wasm2c writes import and export names into C comments: a name with the
 * comment's end in it would be C code. */
static bool closes_comment(struct str s)
{
	for (uint32_t i = 0; i + 1 < s.n; i++)
		if (s.p[i] == '*' && s.p[i + 1] == '/')
			return true;
	return false;
}

static const char *c_type(uint8_t t)
{
	switch (t) {
	case T_I32: return "u32";
	case T_I64: return "u64";
	case T_F32: return "f32";
	case T_F64: return "f64";
	}
	return NULL;
}

static const char *wasm_type_name(uint8_t t)
{
	switch (t) {
	case T_I32: return "i32";
	case T_I64: return "i64";
	case T_F32: return "f32";
	case T_F64: return "f64";
	case 0x7b: return "v128";
	case 0x70: return "funcref";
	case 0x6f: return "externref";
	}
	return "an unknown type";
}

static bool is_int(uint8_t t)
{
	return t == T_I32 || t == T_I64;
}

/* The strata signature given for NAME (kind "export" or "import"): sigs[]
 * first, then the module's strata.sig lines. NULL if none. */
static bool find_sig(const struct module *m, const char *const *sigs, int nsigs, const char *kind, struct str name,
		     char *sig, size_t cap)
{
	for (int i = 0; i < nsigs; i++) {
		const char *s = sigs[i], *eq = strchr(s, '=');
		const char *nm = s;
		/* NAME=SIG for an export, import:NAME=SIG for an import */
		if (strncmp(s, "import:", 7) == 0) {
			if (strcmp(kind, "import"))
				continue;
			nm = s + 7;
		} else if (strcmp(kind, "export")) {
			continue;
		}
		if (eq && (size_t)(eq - nm) == name.n && memcmp(nm, name.p, name.n) == 0) {
			snprintf(sig, cap, "%s", eq + 1);
			return true;
		}
	}
	const char *p = m->sigsec.p, *end = p ? p + m->sigsec.n : NULL; /* no strata.sig section: p NULL */
	while (p && p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		char line[256];
		size_t ll = (size_t)(le - p);
		if (ll < sizeof(line)) {
			char k[16], n[128], s[64];
			memcpy(line, p, ll);
			line[ll] = 0;
			if (sscanf(line, "%15s %127s %63s", k, n, s) == 3 && !strcmp(k, kind) && strlen(n) == name.n &&
			    !memcmp(n, name.p, name.n)) {
				snprintf(sig, cap, "%s", s);
				return true;
			}
		}
		p = le + 1;
	}
	return false;
}

/* Check a strata signature against a wasm type: 'i' takes one i32/i64,
 * 'b'/'s' a pointer and a length (two i32). Results: 'v' none, 'i' one
 * i32/i64, 's' an i32 (a NUL-terminated string) or an i64 (offset | length
 * << 32), 'b' an i64; an import's 's' or 'b' result is a buffer (pointer,
 * capacity) after its arguments and the result's length as an integer. */
static int sig_check(const char *what, struct str name, const char *sig, const struct ftype *t, bool import,
		     char *why, size_t wl)
{
	size_t n = strlen(sig);
	uint32_t k = 0;
	unsigned nargs = 0;

	if (n < 3 || sig[1] != '(' || sig[n - 1] != ')' || !strchr("vibs", sig[0]))
		return fail(why, wl, "%s %.*s: signature '%s' is not R(ARGS) of v, i, b, s", what, (int)name.n, name.p, sig);
	for (size_t i = 2; i < n - 1; i++, nargs++) {
		if (sig[i] == 'i') {
			if (k >= t->np || !is_int(t->params[k]))
				goto mismatch;
			k++;
		} else if (sig[i] == 's' || sig[i] == 'b') {
			if (k + 1 >= t->np || t->params[k] != T_I32 || t->params[k + 1] != T_I32)
				goto mismatch;
			k += 2;
		} else {
			return fail(why, wl, "%s %.*s: '%c' in '%s' is not an argument type (i, b, s)", what, (int)name.n,
				    name.p, sig[i], sig);
		}
	}
	/* An import's string or bytes result: a buffer (pointer, capacity) after
	 * the arguments, and its length as the wasm result. */
	bool out_buf = import && (sig[0] == 's' || sig[0] == 'b');
	if (out_buf) {
		if (k + 2 != t->np || t->params[k] != T_I32 || t->params[k + 1] != T_I32)
			goto mismatch;
		k += 2;
	}
	if (k != t->np)
		goto mismatch;
	if (nargs > STRATA_MAX_ARGS)
		return fail(why, wl, "%s %.*s: more than %u arguments", what, (int)name.n, name.p, STRATA_MAX_ARGS);
	switch (sig[0]) {
	case 'v': if (t->nr != 0) goto mismatch; break;
	case 'i': if (t->nr != 1 || !is_int(t->results[0])) goto mismatch; break;
	case 's':
	case 'b':
		if (import) {
			if (t->nr != 1 || !is_int(t->results[0]))
				goto mismatch;
			break;
		}
		if (t->nr != 1 || !(t->results[0] == T_I64 || (sig[0] == 's' && t->results[0] == T_I32)))
			goto mismatch;
		break;
	}
	return 0;
mismatch:
	return fail(why, wl, "%s %.*s: signature '%s' does not fit its wasm type (%u parameters, %u results): "
		    "i is one i32/i64, b and s a pointer and a length (i32 i32); an import's b or s result a buffer "
		    "(i32 pointer, i32 capacity) after its arguments and its length as the result", what, (int)name.n, name.p, sig,
		    t->np, t->nr);
}

/* The default signature of a type: integers only, at most one result. */
static bool sig_default(const struct ftype *t, char *sig, size_t cap, const char **whynot)
{
	size_t k = 0;

	if (t->nr > 1) {
		*whynot = "more than one result";
		return false;
	}
	if (t->nr == 1 && !is_int(t->results[0])) {
		*whynot = wasm_type_name(t->results[0]);
		return false;
	}
	if (t->np > STRATA_MAX_ARGS) {
		*whynot = "more than 8 parameters";
		return false;
	}
	sig[k++] = t->nr ? 'i' : 'v';
	sig[k++] = '(';
	for (uint32_t i = 0; i < t->np; i++) {
		if (!is_int(t->params[i])) {
			*whynot = wasm_type_name(t->params[i]);
			return false;
		}
		sig[k++] = 'i';
	}
	sig[k++] = ')';
	sig[k] = 0;
	(void)cap;
	return true;
}

static void put_proto(FILE *out, const struct import *im, const struct ftype *t)
{
	fprintf(out, "%s Z_", t->nr ? c_type(t->results[0]) : "void");
	put_mangled(out, im->mod);
	fputs("Z_", out);
	put_mangled(out, im->name);
	fputs("(struct Z_", out);
	put_mangled(out, im->mod);
	fputs("_instance_t *self", out);
	for (uint32_t i = 0; i < t->np; i++)
		fprintf(out, ", %s p%u", c_type(t->params[i]), i);
	fputs(")", out);
}

/* The WASI functions the runtime has (vmm/guest/wasm/wasm_rt.c), with their
 * wasm types: 'i' i32, 'I' i64. */
static const struct {
	const char *name, *params, *results;
} wasi_fns[] = {
	{ "fd_write", "iiii", "i" },       { "fd_read", "iiii", "i" },
	{ "fd_close", "i", "i" },          { "fd_seek", "iIii", "i" },
	{ "fd_fdstat_get", "ii", "i" },    { "fd_prestat_get", "ii", "i" },
	{ "fd_prestat_dir_name", "iii", "i" },
	{ "args_sizes_get", "ii", "i" },   { "args_get", "ii", "i" },
	{ "environ_sizes_get", "ii", "i" }, { "environ_get", "ii", "i" },
	{ "clock_time_get", "iIi", "i" },  { "clock_res_get", "ii", "i" },
	{ "random_get", "ii", "i" },       { "sched_yield", "", "i" },
	{ "proc_exit", "i", "" },
};

static bool types_match(const uint8_t *t, uint32_t n, const char *want)
{
	if (n != strlen(want))
		return false;
	for (uint32_t i = 0; i < n; i++)
		if (t[i] != (want[i] == 'I' ? T_I64 : T_I32))
			return false;
	return true;
}

static bool name_ok(struct str n)
{
	if (n.n == 0 || n.n >= STRATA_NAME_MAX)
		return false;
	for (uint32_t i = 0; i < n.n; i++)
		if ((unsigned char)n.p[i] <= ' ' || (unsigned char)n.p[i] >= 0x7f || n.p[i] == '"' || n.p[i] == '\\')
			return false;
	return true;
}

static int write_import(FILE *out, FILE *notes, const struct module *m, const struct import *im, const char *const *sigs,
			int nsigs, bool *needs_mem, char *why, size_t wl)
{
	const struct ftype *t = &m->types[im->type];
	char sig[64];

	for (uint32_t i = 0; i < t->np; i++)
		if (!c_type(t->params[i]))
			return fail(why, wl, "import %.*s.%.*s takes %s: not available", (int)im->mod.n, im->mod.p,
				    (int)im->name.n, im->name.p, wasm_type_name(t->params[i]));
	if (t->nr > 1 || (t->nr == 1 && !c_type(t->results[0])))
		return fail(why, wl, "import %.*s.%.*s: its result type is not available", (int)im->mod.n, im->mod.p,
			    (int)im->name.n, im->name.p);
	if (str_is(im->mod, "wasi_snapshot_preview1")) {
		for (size_t i = 0; i < sizeof(wasi_fns) / sizeof(wasi_fns[0]); i++) {
			if (!str_is(im->name, wasi_fns[i].name))
				continue;
			if (!types_match(t->params, t->np, wasi_fns[i].params) ||
			    !types_match(t->results, t->nr, wasi_fns[i].results))
				return fail(why, wl, "WASI import %s has a type other than wasi_snapshot_preview1's",
					    wasi_fns[i].name);
			*needs_mem = true;
			return 0;   /* the runtime's */
		}
		fprintf(notes, "note: WASI function %.*s is not available in a strata guest: a call to it fails the call",
			(int)im->name.n, im->name.p);
		fputc(0, notes);
		fputs("\n", out);
		put_proto(out, im, t);
		fprintf(out, "\n{\n\t(void)self;\n");
		for (uint32_t i = 0; i < t->np; i++)
			fprintf(out, "\t(void)p%u;\n", i);
		fprintf(out, "\tstrata_wasm_fail(\"WASI function %.*s is not available in a strata guest\");\n}\n",
			(int)im->name.n, im->name.p);
		return 0;
	}
	if (!name_ok(im->name))
		return fail(why, wl, "import %.*s.%.*s: not a host function name (1 to %u printable characters, no "
			    "space, quote or backslash)", (int)im->mod.n, im->mod.p, (int)im->name.n, im->name.p,
			    STRATA_NAME_MAX - 1);
	const char *whynot = NULL;
	if (!find_sig(m, sigs, nsigs, "import", im->name, sig, sizeof(sig)) &&
	    !sig_default(t, sig, sizeof(sig), &whynot))
		return fail(why, wl, "import %.*s: %s is not available (host functions take and return i, b, s)",
			    (int)im->name.n, im->name.p, whynot);
	if (sig_check("import", im->name, sig, t, true, why, wl) < 0)
		return -1;
	unsigned nargs = (unsigned)strlen(sig) - 3;
	bool out_buf = sig[0] == 's' || sig[0] == 'b';
	fputs("\n", out);
	put_proto(out, im, t);
	fprintf(out, "\n{\n\tstruct strata_value a[%u], r;\n\n\t(void)self;\n", nargs ? nargs : 1);
	uint32_t k = 0;
	for (unsigned i = 0; i < nargs; i++) {
		char ch = sig[2 + i];
		if (ch == 'i') {
			fprintf(out, "\ta[%u] = strata_val_i64(%sp%u);\n", i, t->params[k] == T_I32 ? "(int32_t)" : "(int64_t)", k);
			k++;
		} else {
			*needs_mem = true;
			fprintf(out, "\ta[%u] = (struct strata_value){ .type = %s, .addr = (uintptr_t)strata_wasm_span(p%u, p%u), "
				".len = p%u };\n", i, ch == 's' ? "STRATA_T_STR" : "STRATA_T_BYTES", k, k + 1, k + 1);
			k += 2;
		}
	}
	if (out_buf) {
		*needs_mem = true;
		fprintf(out, "\treturn (%s)strata_wasm_host_call_buf(\"%.*s\", a, %u, p%u, p%u);\n}\n",
			c_type(t->results[0]), (int)im->name.n, im->name.p, nargs, k, k + 1);
		return 0;
	}
	fprintf(out, "\tstrata_wasm_host_call(\"%.*s\", a, %u, &r);\n", (int)im->name.n, im->name.p, nargs);
	if (sig[0] == 'i') {
		fprintf(out, "\tif (r.type != STRATA_T_I64)\n\t\tstrata_wasm_fail(\"import %.*s: the host function's "
			"result is not an integer\");\n", (int)im->name.n, im->name.p);
		fprintf(out, "\treturn (%s)r.i64;\n", c_type(t->results[0]));
	} else if (t->nr) {
		fprintf(out, "\treturn 0;\n");
	}
	fputs("}\n", out);
	return 0;
}


static int write_export(FILE *out, const struct export *e, const struct ftype *t, const char *sig, unsigned idx)
{
	unsigned nargs = (unsigned)strlen(sig) - 3;
	uint32_t k = 0;

	/* The name appears only in the registration's string (name_ok: no quote,
	 * backslash or control byte), never in a comment it could close. */
	fprintf(out, "\n/* export %u: %s */\nstatic int x%u(struct strata_call *c)\n{\n", idx, sig, idx);
	for (uint32_t i = 0; i < t->np; i++)
		fprintf(out, "\t%s p%u;\n", c_type(t->params[i]), i);
	fprintf(out, "\n\tif (setjmp(strata_wasm_jmp))\n\t\treturn strata_fail(c, \"%%s\", strata_wasm_why());\n"
		     "\tstrata_wasm_enter();\n\tglue_free_args();\n");
	for (unsigned i = 0; i < nargs; i++) {
		char ch = sig[2 + i];
		if (ch == 'i') {
			fprintf(out, "\tp%u = (%s)strata_arg_i64(c, %u);\n", k, c_type(t->params[k]), i);
			k++;
		} else {
			fprintf(out, "\tglue_copy_in(c, %u, %d, &p%u, &p%u);\n", i, ch == 's', k, k + 1);
			k += 2;
		}
	}
	fputs("\t", out);
	if (t->nr)
		fprintf(out, "%s r = ", c_type(t->results[0]));
	fputs("Z_" WASM_GLUE_MODULE "Z_", out);
	put_mangled(out, e->name);
	fputs("(&inst", out);
	for (uint32_t i = 0; i < t->np; i++)
		fprintf(out, ", p%u", i);
	fputs(");\n", out);
	switch (sig[0]) {
	case 'v': fputs("\treturn strata_ret_void(c);\n", out); break;
	case 'i': fprintf(out, "\treturn strata_ret_i64(c, %sr);\n", t->results[0] == T_I32 ? "(int32_t)" : "(int64_t)"); break;
	case 's':
		if (t->results[0] == T_I32)
			fputs("\treturn strata_wasm_ret_cstr(c, r);\n", out);
		else
			fputs("\treturn strata_wasm_ret_span(c, r, 1);\n", out);
		break;
	case 'b': fputs("\treturn strata_wasm_ret_span(c, r, 0);\n", out); break;
	}
	fprintf(out, "}\nstatic const struct strata_fn_reg reg%u __attribute__((used, section(\"strata_fns\"), aligned(8))) = "
		"{ \"%.*s\", \"%s\", x%u };\n", idx, (int)e->name.n, e->name.p, sig, idx);
	return 0;
}

/* The guest heap the module needs (docs/wasm.md, "Memory"): its linear
 * memory at its largest (the declared maximum, else the initial size and
 * WASM_GLUE_GROW more, at most WASM_GLUE_LINEAR_CAP unless the initial size
 * is larger), and WASM_GLUE_HEADROOM for the runtime's own allocations.
 * 0 (with why) if even the initial memory cannot fit a sandbox's heap. */
static uint64_t module_heap(const struct module *m, char *why, size_t wl)
{
	uint64_t lin = (uint64_t)m->mem_min * WASM_GLUE_PAGE, top;

	if (!m->nmems)
		return WASM_GLUE_HEADROOM;
	top = m->mem_has_max ? (uint64_t)m->mem_max * WASM_GLUE_PAGE : lin + WASM_GLUE_GROW;
	if (top > WASM_GLUE_LINEAR_CAP)
		top = WASM_GLUE_LINEAR_CAP;
	if (top < lin)
		top = lin;
	if (top + WASM_GLUE_HEADROOM > WASM_GLUE_HEAP_MAX) {
		fail(why, wl, "the module's initial memory (%u pages, %llu MiB) does not fit a sandbox's heap "
		     "(at most %llu MiB with %llu MiB for the runtime)", m->mem_min, (unsigned long long)(lin >> 20),
		     WASM_GLUE_HEAP_MAX >> 20, WASM_GLUE_HEADROOM >> 20);
		return 0;
	}
	return top + WASM_GLUE_HEADROOM;
}

static const struct export *find_export(const struct module *m, uint32_t kind, const char *name)
{
	for (uint32_t i = 0; i < m->nexports; i++)
		if (m->exports[i].kind == kind && (!name || str_is(m->exports[i].name, name)))
			return &m->exports[i];
	return NULL;
}

static int generate(const struct module *m, const char *const *sigs, int nsigs, uint64_t heap, FILE *out,
		    FILE *notes, char *why, size_t wl)
{
	bool needs_mem = false, copies = false, heap_given = heap != 0;
	unsigned nfns = 0;

	for (uint32_t i = 0; i < m->nimports; i++) {
		const struct import *im = &m->imports[i];
		if (im->kind != K_FUNC)
			return fail(why, wl, "the module imports a %s (%.*s.%.*s): not available, a strata guest's "
				    "imports are functions", im->kind == K_MEMORY ? "memory" : im->kind == K_TABLE ? "table" : "global",
				    (int)im->mod.n, im->mod.p, (int)im->name.n, im->name.p);
		if (closes_comment(im->mod) || closes_comment(im->name))
			return fail(why, wl, "import %.*s.%.*s: a name with */ in it is refused (wasm2c writes names into "
				    "C comments)", (int)im->mod.n, im->mod.p, (int)im->name.n, im->name.p);
		if (str_is(im->mod, WASM_GLUE_MODULE))
			return fail(why, wl, "imports from a module named '" WASM_GLUE_MODULE "' are not available "
				    "(the name strata gives the module itself)");
	}
	fputs("/* Generated by strata wasm build: the module's exports as strata functions, its imports as host "
	      "calls (docs/wasm.md). */\n#include <string.h>\n\n#include \"strata_wasm_rt.h\"\n#include \"module.h\"\n\n"
	      "static Z_" WASM_GLUE_MODULE "_instance_t inst;\n", out);
	if (!heap && !(heap = module_heap(m, why, wl)))
		return -1;
	fprintf(out, "STRATA_GUEST_HEAP(%lluull);  /* %s */\n", (unsigned long long)heap,
		heap_given ? "strata wasm build --heap" : "the module's memory and room for the runtime (docs/wasm.md)");
	/* Imports: one definition per distinct module.name. */
	for (uint32_t i = 0; i < m->nimports; i++) {
		bool dup = false;
		for (uint32_t j = 0; j < i && !dup; j++)
			dup = m->imports[j].mod.n == m->imports[i].mod.n && m->imports[j].name.n == m->imports[i].name.n &&
			      !memcmp(m->imports[j].mod.p, m->imports[i].mod.p, m->imports[i].mod.n) &&
			      !memcmp(m->imports[j].name.p, m->imports[i].name.p, m->imports[i].name.n);
		if (!dup && write_import(out, notes, m, &m->imports[i], sigs, nsigs, &needs_mem, why, wl) < 0)
			return -1;
	}
	for (uint32_t i = 0; i < m->nexports; i++)
		if (closes_comment(m->exports[i].name))
			return fail(why, wl, "export %.*s: a name with */ in it is refused (wasm2c writes names into C "
				    "comments)", (int)m->exports[i].name.n, m->exports[i].name.p);
	/* Exports' signatures first: string and bytes arguments need the module's malloc. */
	char (*esig)[64] = calloc(m->nexports ? m->nexports : 1, sizeof(*esig));
	if (!esig)
		return fail(why, wl, "out of memory");
	for (uint32_t i = 0; i < m->nexports; i++) {
		const struct export *e = &m->exports[i];
		const struct ftype *t = e->kind == K_FUNC ? func_type(m, e->idx) : NULL;
		const char *whynot = NULL;
		if (e->kind != K_FUNC || str_is(e->name, "_initialize"))
			continue;
		if (!t) {
			free(esig);
			return fail(why, wl, "export %.*s names function %u, which does not exist", (int)e->name.n, e->name.p, e->idx);
		}
		if (!name_ok(e->name)) {
			fprintf(notes, "note: export '%.*s' is left out: a strata function's name is 1 to %u printable "
				"characters, no space, quote or backslash", (int)e->name.n, e->name.p, STRATA_NAME_MAX - 1);
			fputc(0, notes);
			continue;
		}
		if (find_sig(m, sigs, nsigs, "export", e->name, esig[i], sizeof(esig[i]))) {
			if (sig_check("export", e->name, esig[i], t, false, why, wl) < 0) {
				free(esig);
				return -1;
			}
		} else if (!sig_default(t, esig[i], sizeof(esig[i]), &whynot)) {
			fprintf(notes, "note: export %.*s is left out: %s (strata functions take and return i, b, s; "
				"give it a signature with --sig)", (int)e->name.n, e->name.p, whynot);
			fputc(0, notes);
			esig[i][0] = 0;
			continue;
		}
		if (strchr(esig[i] + 1, 's') || strchr(esig[i] + 1, 'b'))
			copies = true;
		if (strchr("sb", esig[i][0]) || copies)
			needs_mem = true;
		nfns++;
	}
	if (nfns > STRATA_MAX_FUNCTIONS) {
		free(esig);
		return fail(why, wl, "%u exported functions: a guest has at most %u", nfns, STRATA_MAX_FUNCTIONS);
	}
	const struct export *mem = find_export(m, K_MEMORY, NULL);
	if (needs_mem && !mem) {
		free(esig);
		return fail(why, wl, "the module must export its memory (WASI and string or bytes arguments use it)");
	}
	const struct export *mal = find_export(m, K_FUNC, "malloc"), *fre = find_export(m, K_FUNC, "free");
	if (copies) {
		const struct ftype *t = mal ? func_type(m, mal->idx) : NULL;
		if (!t || !types_match(t->params, t->np, "i") || !types_match(t->results, t->nr, "i")) {
			free(esig);
			return fail(why, wl, "string and bytes arguments are copied into memory the module's malloc gives: "
				    "export malloc (i32) -> i32 (clang: -Wl,--export=malloc)");
		}
		t = fre ? func_type(m, fre->idx) : NULL;
		if (t && !(types_match(t->params, t->np, "i") && t->nr == 0))
			fre = NULL;
	}
	fputs("\n/* Arguments copied in by a call are freed at the next call: a result may point into them. */\n"
	      "static u32 pending[" "8" "];\nstatic unsigned npending;\n\n", out);
	fputs("static void glue_free_args(void)\n{\n", out);
	if (copies && fre)
		fputs("\twhile (npending)\n\t\tZ_" WASM_GLUE_MODULE "Z_free(&inst, pending[--npending]);\n", out);
	else
		fputs("\tnpending = 0;\n", out);
	fputs("}\n", out);
	if (copies)
		fputs("\nstatic void glue_copy_in(struct strata_call *c, unsigned i, int is_str, u32 *off, u32 *len)\n{\n"
		      "\tsize_t n;\n\tconst void *p;\n\n"
		      "\tif (is_str) {\n\t\tp = strata_arg_str(c, i);\n\t\tn = strlen(p);\n\t} else {\n"
		      "\t\tp = strata_arg_bytes(c, i, &n);\n\t}\n"
		      "\tif (n >= UINT32_MAX)\n\t\tstrata_wasm_fail(\"argument %u: too large for linear memory\", i);\n"
		      "\tu32 o = Z_" WASM_GLUE_MODULE "Z_malloc(&inst, (u32)n + 1);\n"
		      "\tif (!o)\n\t\tstrata_wasm_fail(\"argument %u: the module's malloc(%zu) failed\", i, n + 1);\n"
		      "\tuint8_t *d = strata_wasm_span(o, n + 1);\n\tmemcpy(d, p, n);\n\td[n] = 0;\n"
		      "\tpending[npending++] = o;\n\t*off = o;\n\t*len = (u32)n;\n}\n", out);
	for (uint32_t i = 0; i < m->nexports; i++)
		if (esig[i][0])
			write_export(out, &m->exports[i], func_type(m, m->exports[i].idx), esig[i], i);
	/* strata_init: instantiate; a reactor's _initialize runs here too. */
	fputs("\nvoid strata_init(void)\n{\n\tstrata_wasm_init();\n\tif (setjmp(strata_wasm_jmp))\n"
	      "\t\tstrata_abort(-1, \"wasm module: instantiation failed: %s\", strata_wasm_why());\n"
	      "\tstrata_wasm_enter();\n\tZ_" WASM_GLUE_MODULE "_init_module();\n\tZ_" WASM_GLUE_MODULE "_instantiate(&inst", out);
	for (uint32_t i = 0; i < m->nimports; i++) {
		bool seen = false;
		for (uint32_t j = 0; j < i && !seen; j++)
			seen = m->imports[j].mod.n == m->imports[i].mod.n &&
			       !memcmp(m->imports[j].mod.p, m->imports[i].mod.p, m->imports[i].mod.n);
		if (!seen)
			fputs(", NULL", out);
	}
	fputs(");\n", out);
	if (mem) {
		fputs("\tstrata_wasm_memory = Z_" WASM_GLUE_MODULE "Z_", out);
		put_mangled(out, mem->name);
		fputs("(&inst);\n", out);
	}
	const struct export *ini = find_export(m, K_FUNC, "_initialize");
	if (ini) {
		const struct ftype *t = func_type(m, ini->idx);
		if (t && t->np == 0 && t->nr == 0)
			fputs("\tZ_" WASM_GLUE_MODULE "Z__initialize(&inst);\n", out);
	}
	fputs("}\n", out);
	free(esig);
	return 0;
}

int wasm_glue_write(const uint8_t *wasm, size_t len, const char *const *sigs, int nsigs, uint64_t heap, FILE *out,
		    FILE *notes, char *why, size_t wl)
{
	struct module m = { 0 };
	int rc = parse(wasm, len, &m, why, wl);

	if (rc == 0)
		rc = generate(&m, sigs, nsigs, heap, out, notes, why, wl);
	free(m.types);
	free(m.imports);
	free(m.funcs);
	free(m.exports);
	return rc;
}
