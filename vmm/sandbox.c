/* sandbox.c: sandbox lifecycle: load a guest ELF into fresh guest memory, boot it to ready, free. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/array.h"
#include "store/sys.h"
#include "vmm/snap_int.h"

#define INIT_TIMEOUT_NS (10ull * 1000000000ull)
#define ELF_FILE_MAX (64ull << 20)

int vmm_sandbox_load_functions(struct vmm_sandbox *sb, uint32_t table_gpa)
{
	struct strata_fn_table t;
	const void *p = vmm_run_guest_ptr(sb, table_gpa, sizeof(t));

	if (!p)
		return vmm_run_fail(sb, VMM_E_BAD_HYPERCALL, "READY: function table at 0x%x is outside guest memory",
				    table_gpa);
	sb->fn_table_gpa = table_gpa;
	free(sb->fns);
	sb->fns = NULL;
	sb->nfns = 0;
	memcpy(&t, p, sizeof(t));
	if (t.magic != STRATA_FN_TABLE_MAGIC || t.count > STRATA_MAX_FUNCTIONS)
		return vmm_run_fail(sb, VMM_E_BAD_HYPERCALL, "READY: malformed function table (count %u)", t.count);
	const struct strata_fn_desc *d = vmm_run_guest_ptr(sb, t.descs_addr, (uint64_t)t.count * sizeof(*d));
	if (!d && t.count)
		return vmm_run_fail(sb, VMM_E_BAD_HYPERCALL, "READY: function descriptors outside guest memory");
	sb->fns = st_sys_calloc(t.count ? t.count : 1, sizeof(*sb->fns));
	if (!sb->fns)
		return -ENOMEM;
	for (uint32_t i = 0; i < t.count; i++) {
		struct strata_fn_desc desc;
		struct vmm_fn *f = &sb->fns[i];
		memcpy(&desc, &d[i], sizeof(desc));
		if (vmm_run_guest_str(sb, desc.name_addr, f->name, sizeof(f->name)) < 0 || !f->name[0] ||
		    vmm_run_guest_str(sb, desc.sig_addr, f->sig, sizeof(f->sig)) < 0)
			return vmm_run_fail(sb, VMM_E_BAD_HYPERCALL, "READY: function %u has a bad name or signature", i);
		if (!vmm_sig_parse(f->sig, &f->type))
			return vmm_run_fail(sb, VMM_E_BAD_HYPERCALL, "READY: function '%s' has malformed signature '%s'",
					    f->name, f->sig);
	}
	sb->nfns = t.count;
	return 0;
}

/* The sizes the guest's memory note asks for, where the caller set none
 * (the caller's sizes win, smaller or larger: the caller is trusted, the
 * ELF is not). true if one was taken. */
static bool sandbox_take_declared(struct vmm_config *cfg, const struct vmm_elf *e)
{
	bool took = false;

	if (!cfg->heap_size && e->mem.heap_size) {
		cfg->heap_size = e->mem.heap_size;
		took = true;
	}
	if (!cfg->stack_size && e->mem.stack_size) {
		cfg->stack_size = e->mem.stack_size;
		took = true;
	}
	return took;
}

static int sandbox_build(struct vmm_sandbox *sb, const struct vmm_elf *e, struct vmm_error *err)
{
	struct vmm_layout *l = &sb->layout;
	uint8_t *perms = NULL;
	int rc;

	bool declared = sandbox_take_declared(&sb->cfg, e);
	rc = vmm_layout_compute(&sb->cfg, e->lo, e->hi, l);
	if (rc == VMM_E_BAD_CONFIG && declared)
		return vmm_fail(err, VMM_E_BAD_ELF,
			    "the guest's memory note asks for what does not fit a sandbox: heap %llu KiB, stack %llu KiB "
			    "(with its %llu KiB image, the stack must end below 16 MiB; all memory below 4 GiB); "
			    "give smaller sizes (--heap, --stack) or rebuild the guest",
			    (unsigned long long)((sb->cfg.heap_size ? sb->cfg.heap_size : VMM_DEFAULT_HEAP) >> 10),
			    (unsigned long long)((sb->cfg.stack_size ? sb->cfg.stack_size : VMM_DEFAULT_STACK) >> 10),
			    (unsigned long long)((e->hi - e->lo) >> 10));
	if (rc < 0)
		return vmm_fail(err, rc, rc == VMM_E_BAD_CONFIG
			    ? "sizes out of range (heap/input/output at most 2 GiB, stack at most 16 MiB with the image, total under 4 GiB)"
			    : "image does not fit the guest image area");
	sb->mem_size = l->mem_size;
	bool ready = false;
	if ((rc = sb->be->mem_new(sb, &ready)) < 0)
		return vmm_fail(err, rc, "cannot reserve %llu bytes of guest memory: %s",
			    (unsigned long long)l->mem_size, strerror(-rc));
	perms = st_sys_calloc(l->low_end / VMM_PAGE, 1);
	if (!perms)
		return vmm_fail(err, -ENOMEM, "out of memory");
	for (unsigned i = 0; i < e->nseg; i++) {
		const struct vmm_elf_segment *s = &e->seg[i];
		vmm_perms_set(perms, s->vaddr, s->vaddr + s->memsz, (uint8_t)(s->flags | VMM_PERM_USER));
		memcpy(sb->mem + s->vaddr, e->data + s->offset, s->filesz);
	}
	/* The note's exception stubs are not used: the host builds its own.
	 * The stack protector's canary is this sandbox's own random word
	 * (every sandbox restored from one of its snapshots shares it). */
	uint64_t canary = 0;
	if (getrandom(&canary, sizeof(canary), 0) != (ssize_t)sizeof(canary)) {
		free(perms);
		return vmm_fail(err, -errno, "cannot draw the stack protector's canary: %s", strerror(errno));
	}
	vmm_host_pages_build(sb->mem, l, perms, canary);
	free(perms);

	if ((rc = sb->be->start(sb, ready, err)) < 0)
		return rc;
	struct vmm_vcpu_state st;
	vmm_x86_initial_state(l, 3, e->entry, l->stack_hi, &st);
	/* Staged where the backend can (kvm: the registers ride in with the
	 * first KVM_RUN instead of three ioctls; docs/vmm.md, "Sandbox
	 * creation"). */
	if ((rc = (sb->be->stage_state ? sb->be->stage_state : sb->be->set_state)(sb, &st)) < 0)
		return vmm_fail(err, rc, "cannot set the initial vCPU state: %s", strerror(-rc));

	/* Boot: the guest's init runs at CPL 3 until it reports READY. */
	uint32_t table = 0;
	/* Init gets 10 s, or the call timeout if longer: a short per-call
	 * timeout is about calls, not about booting. */
	uint64_t tmo = sb->cfg.timeout_ns > INIT_TIMEOUT_NS ? sb->cfg.timeout_ns : INIT_TIMEOUT_NS;
	rc = vmm_run_until(sb, STRATA_PORT_READY, tmo, &table);
	if (rc == 0)
		rc = vmm_sandbox_load_functions(sb, table);
	if (rc < 0) {
		if (err)
			*err = sb->err;
		if (err && err->code == 0)
			vmm_fail(err, rc, "guest init failed: %s", vmm_strerror(rc));
		if (err)
			snprintf(err->message + strlen(err->message),
				 sizeof(err->message) - strlen(err->message), " (during guest init)");
		return rc;
	}
	return 0;
}

int vmm_sandbox_new_mem(const void *elf, size_t size, const struct vmm_config *cfg,
			struct vmm_sandbox **out, struct vmm_error *err)
{
	struct vmm_sandbox *sb;
	struct vmm_elf e;
	char why[200] = "";
	int rc;

	rc = vmm_elf_parse(elf, size, &e, why, sizeof(why));
	if (rc < 0)
		return vmm_fail(err, rc, "%s", why);
	sb = st_sys_calloc(1, sizeof(*sb));
	if (!sb)
		return vmm_fail(err, -ENOMEM, "out of memory");
	if (cfg)
		sb->cfg = *cfg;
	sb->cfg.host = vmm_host_resolve(cfg);
	pthread_mutex_init(&sb->lock, NULL);
	if ((rc = vmm_backend_pick(sb->cfg.host, sb->cfg.backend, &sb->be, err)) < 0) {
		pthread_mutex_destroy(&sb->lock);
		free(sb);
		return rc;
	}
	sb->cfg.backend = sb->be->kind;
	rc = sandbox_build(sb, &e, err);
	if (rc < 0) {
		vmm_sandbox_destroy(sb);
		return rc;
	}
	vmm_error_clear(&sb->err);
	vmm_sandbox_held(sb);
	*out = sb;
	return 0;
}

int vmm_sandbox_new(const char *path, const struct vmm_config *cfg, struct vmm_sandbox **out,
		    struct vmm_error *err)
{
	struct stat st;
	void *map;
	int fd, rc;

	fd = st_sys_openat(AT_FDCWD, path, O_RDONLY, 0);
	if (fd < 0)
		return vmm_fail(err, fd, "cannot open %s: %s", path, strerror(-fd));
	if ((rc = st_sys_fstat(fd, &st)) < 0) {
		rc = vmm_fail(err, rc, "cannot stat %s: %s", path, strerror(-rc));
		goto out_close;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = vmm_fail(err, VMM_E_BAD_ELF, "%s is not a regular file", path);
		goto out_close;
	}
	if (st.st_size == 0 || (uint64_t)st.st_size > ELF_FILE_MAX) {
		rc = vmm_fail(err, VMM_E_BAD_ELF, "%s: %lld bytes is not a plausible guest image (1 byte to 64 MiB)",
			  path, (long long)st.st_size);
		goto out_close;
	}
	map = st_sys_mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0, &rc);
	if (!map) {
		rc = vmm_fail(err, rc, "cannot map %s: %s", path, strerror(-rc));
		goto out_close;
	}
	rc = vmm_sandbox_new_mem(map, (size_t)st.st_size, cfg, out, err);
	st_sys_munmap(map, (size_t)st.st_size);
out_close:
	/* Read-only: a failed close loses nothing. */
	(void)st_sys_close(fd);
	return rc;
}

bool vmm_sandbox_cfg_fits(const struct vmm_layout *l, const struct vmm_config *cfg)
{
	return !cfg || !((cfg->heap_size && vmm_round_up(cfg->heap_size, 16) != l->heap_size) ||
			 (cfg->input_size && cfg->input_size != l->in_size) ||
			 (cfg->output_size && cfg->output_size != l->out_size));
}

void vmm_sandbox_cfg_apply(struct vmm_sandbox *sb, const struct vmm_config *cfg)
{
	const struct vmm_layout *l = &sb->layout;

	memset(&sb->cfg, 0, sizeof(sb->cfg));
	if (cfg)
		sb->cfg = *cfg;
	sb->cfg.host = vmm_host_resolve(cfg);
	sb->cfg.heap_size = l->heap_size;
	sb->cfg.input_size = l->in_size;
	sb->cfg.output_size = l->out_size;
	sb->cfg.stack_size = l->stack_hi - l->stack_lo;
	if (sb->be)
		sb->cfg.backend = sb->be->kind;
}

void vmm_sandbox_destroy(struct vmm_sandbox *sb)
{
	if (!sb)
		return;
	vmm_sandbox_unheld(sb);
	vmm_snap_free(sb->snap);
	if (sb->be)
		sb->be->destroy(sb);
	free(sb->fns);
	for (unsigned i = 0; i < sb->nhfns; i++)
		free(sb->hfns[i].name);
	free(sb->hfns);
	pthread_mutex_destroy(&sb->lock);
	free(sb);
}

_Static_assert(VMM_MAX_PARAMS == STRATA_MAX_ARGS, "a signature holds every argument the ABI carries");
_Static_assert(VMM_NAME_MAX + 1 == STRATA_NAME_MAX, "a host function's name fits the ABI's");

static bool type_known(enum vmm_type t)
{
	return t == VMM_VOID || t == VMM_I64 || t == VMM_BYTES || t == VMM_STR;
}

/* 0 if sig is one a guest can call; else -EINVAL with what is wrong. */
static int signature_check(const char *name, const struct vmm_signature *sig, struct vmm_error *err)
{
	if (!sig)
		return vmm_fail(err, -EINVAL, "host function %s: no signature", name);
	if (!type_known(sig->ret))
		return vmm_fail(err, -EINVAL, "host function %s: result type %d is not a vmm_type", name, (int)sig->ret);
	if (sig->nparams > VMM_MAX_PARAMS)
		return vmm_fail(err, -EINVAL, "host function %s: %u parameters; at most %u", name, sig->nparams,
				VMM_MAX_PARAMS);
	for (unsigned i = 0; i < sig->nparams; i++)
		if (sig->params[i] == VMM_VOID || !type_known(sig->params[i]))
			return vmm_fail(err, -EINVAL, "host function %s: parameter %u has type %d (I64, BYTES or STR)",
					name, i + 1, (int)sig->params[i]);
	return 0;
}

static int register_locked(struct vmm_sandbox *sb, const char *name, const struct vmm_signature *sig,
			   vmm_host_fn_cb cb, void *ctx, struct vmm_error *err)
{
	struct vmm_host_fn h = { .sig = *sig, .cb = cb, .ctx = ctx };

	/* What lies past nparams is the caller's noise: keep none of it. */
	for (unsigned i = sig->nparams; i < VMM_MAX_PARAMS; i++)
		h.sig.params[i] = VMM_VOID;
	for (unsigned i = 0; i < sb->nhfns; i++) {
		if (strcmp(sb->hfns[i].name, name) == 0) {
			h.name = sb->hfns[i].name;
			sb->hfns[i] = h;
			return 0;
		}
	}
	if (ST_ARRAY_RESERVE(sb->hfns, sb->hfns_cap, sb->nhfns + 1) < 0 || !(h.name = st_sys_strdup(name)))
		return vmm_fail(err, -ENOMEM, "host function %s: out of memory", name);
	sb->hfns[sb->nhfns++] = h;
	return 0;
}

int vmm_sandbox_register(struct vmm_sandbox *sb, const char *name, const struct vmm_signature *sig,
			 vmm_host_fn_cb cb, void *ctx, struct vmm_error *err)
{
	int rc;

	if (!name || !*name)
		return vmm_fail(err, -EINVAL, "a host function needs a name");
	if (strlen(name) > VMM_NAME_MAX)
		return vmm_fail(err, -EINVAL, "host function name of %zu bytes; at most %u", strlen(name), VMM_NAME_MAX);
	if ((rc = signature_check(name, sig, err)) < 0)
		return rc;
	if (!cb)
		return vmm_fail(err, -EINVAL, "host function %s: no callback", name);
	/* The call path reads the table without the lock while in_call. */
	pthread_mutex_lock(&sb->lock);
	if (sb->in_call)
		rc = vmm_fail(err, VMM_E_BUSY, "host function %s: a call is running on this sandbox", name);
	else
		rc = register_locked(sb, name, sig, cb, ctx, err);
	pthread_mutex_unlock(&sb->lock);
	return rc;
}

const struct vmm_error *vmm_sandbox_error(const struct vmm_sandbox *sb)
{
	return &sb->err;
}

bool vmm_sandbox_poisoned(const struct vmm_sandbox *sb)
{
	return sb->poisoned;
}

unsigned vmm_sandbox_function_count(const struct vmm_sandbox *sb)
{
	return sb->nfns;
}

int vmm_sandbox_function(const struct vmm_sandbox *sb, unsigned i, const char **name,
			 const struct vmm_signature **sig)
{
	if (i >= sb->nfns)
		return -ENOENT;
	*name = sb->fns[i].name;
	*sig = &sb->fns[i].type;
	return 0;
}

void vmm_sandbox_memory(struct vmm_sandbox *sb, uint8_t **mem, uint64_t *size)
{
	if (sb->be->mem_own && sb->be->mem_own(sb) < 0)
		sb->poisoned = true;
	*mem = sb->mem;
	*size = sb->mem_size;
}
