/* sandbox.c: strata_sandbox (made from an ELF, a snapshot directory, a store or a registry; calls, restore, capture in one step) and strata_pool. */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mount/api/api_int.h"

/* The vmm's log callback: the sandbox's copy of its host's setting. */
static void log_trampoline(void *ctx, enum vmm_log_level level, const char *msg, size_t len)
{
	const strata_sandbox *sb = ctx;

	if (sb->log)
		sb->log(sb->log_ctx, (int)level, msg, len);
}

int api_sandbox_make(strata_host *h, const struct api_make *how, strata_sandbox **out)
{
	struct vmm_error err = { 0 };
	strata_sandbox *sb = calloc(1, sizeof(*sb));
	int rc;

	if (!sb)
		return api_fail(-ENOMEM, "sandbox: out of memory");
	sb->host = h;
	pthread_mutex_lock(&h->lock);
	struct vmm_config cfg = { .timeout_ns = h->timeout_ns, .backend = (enum vmm_backend_kind)h->backend,
				  .host = h->vh, .log = log_trampoline, .log_ctx = sb };
	sb->log = h->log;
	sb->log_ctx = h->log_ctx;
	pthread_mutex_unlock(&h->lock);
	if (how->path || how->elf) {
		/* Sizes are an ELF sandbox's; a snapshot brings its own. */
		pthread_mutex_lock(&h->lock);
		cfg.heap_size = h->heap;
		cfg.stack_size = h->stack;
		cfg.input_size = h->input;
		cfg.output_size = h->output;
		pthread_mutex_unlock(&h->lock);
		rc = how->path ? vmm_sandbox_new(how->path, &cfg, &sb->vs, &err)
			       : vmm_sandbox_new_mem(how->elf, how->size, &cfg, &sb->vs, &err);
	} else if (how->dir) {
		rc = vmm_sandbox_from_snapdir(how->dir, &cfg, &sb->vs, &err);
	} else {
		rc = vmm_sandbox_from_snapshot(how->m, how->open, how->open_ctx, &cfg, &sb->vs, &err);
	}
	if (rc < 0) {
		free(sb);
		return api_fail_vmm(rc, how->path, &err);
	}
	/* What it was opened from, for strata_sandbox_info. */
	const struct st_manifest *m = how->dir ? vmm_snapdir_manifest(how->dir) : how->m;
	if (m) {
		sb->layers = m->nlayers;
		sb->layer_pages = st_manifest_layer_pages(m);
	}
	if (how->dir && vmm_snapdir_on_mount(how->dir)) {
		sb->on_mount = true;
		sb->direct_layers = vmm_snapdir_direct_layers(how->dir);
		sb->lazy = sb->direct_layers < m->nlayers;  /* a layer read through the mount: a lazy one */
	}
	sb->lazy = sb->lazy || how->lazy;
	/* The host's functions as they are now: every sandbox starts with them. */
	pthread_mutex_lock(&h->lock);
	vmm_sandbox_set_debug(sb->vs, h->debug);
	rc = api_fns_apply(&h->fns, sb->vs);
	if (rc == 0)
		h->live++;
	pthread_mutex_unlock(&h->lock);
	if (rc < 0) {
		vmm_sandbox_free(sb->vs);
		free(sb);
		return rc;
	}
	*out = sb;
	return 0;
}

int strata_sandbox_new(strata_host *h, const char *path, strata_sandbox **out)
{
	if (!path)
		return api_fail(-EINVAL, "sandbox: the ELF path is NULL");
	return api_sandbox_make(h, &(struct api_make){ .path = path }, out);
}

int strata_sandbox_new_mem(strata_host *h, const void *elf, size_t size, strata_sandbox **out)
{
	if (!elf || !size)
		return api_fail(-EINVAL, "sandbox: no ELF bytes given");
	return api_sandbox_make(h, &(struct api_make){ .elf = elf, .size = size }, out);
}

static unsigned dir_flags(unsigned flags)
{
	return (flags & STRATA_DIR_VERIFY ? VMM_SNAPDIR_VERIFY : 0) |
	       (flags & STRATA_DIR_MAP_FILES ? VMM_SNAPDIR_MAP_FILES : 0) |
	       (flags & STRATA_DIR_VIA_FUSE ? VMM_SNAPDIR_VIA_FUSE : 0);
}

static int dir_open(strata_host *h, const char *dir, unsigned flags, struct vmm_snapdir **out)
{
	struct vmm_error err = { 0 };
	int rc;

	if (!dir)
		return api_fail(-EINVAL, "snapshot directory: the path is NULL");
	if (flags & ~(unsigned)(STRATA_DIR_VERIFY | STRATA_DIR_MAP_FILES | STRATA_DIR_VIA_FUSE))
		return api_fail(-EINVAL, "%s: unknown flags 0x%x", dir, flags);
	/* The vmm's message names the directory itself, mostly: once is enough. */
	if ((rc = vmm_snapdir_open(h->vh, dir, dir_flags(flags), out, &err)) < 0)
		return api_fail_vmm(rc, err.code == rc && strncmp(err.message, dir, strlen(dir)) == 0 ? NULL : dir, &err);
	return 0;
}

int strata_sandbox_open_dir(strata_host *h, const char *dir, unsigned flags, strata_sandbox **out)
{
	struct vmm_snapdir *d;
	char *copy = NULL;
	int rc = dir_open(h, dir, flags, &d);

	if (rc < 0)
		return rc;
	if (!(copy = strdup(dir))) {
		vmm_snapdir_close(d);
		return api_fail(-ENOMEM, "%s: out of memory", dir);
	}
	rc = api_sandbox_make(h, &(struct api_make){ .dir = d }, out);
	vmm_snapdir_close(d);
	if (rc < 0) {
		free(copy);
		return rc;
	}
	(*out)->src_dir = copy;
	(*out)->src_dir_flags = flags;
	return 0;
}

int strata_sandbox_open_store(strata_host *h, strata_store *st, const char *ref, strata_sandbox **out)
{
	struct st_manifest *m;
	vmm_layer_open_fn open;
	void *ctx;
	int rc = api_store_manifest(st, ref, &m, NULL, &open, &ctx);

	if (rc < 0)
		return rc;
	rc = api_sandbox_make(h, &(struct api_make){ .m = m, .open = open, .open_ctx = ctx,
						      .lazy = open == fs_private_layer_open }, out);
	struct api_src *src = rc == 0 ? malloc(sizeof(*src)) : NULL;
	if (rc == 0 && !src) {
		strata_sandbox_free(*out);
		rc = api_fail(-ENOMEM, "sandbox: out of memory");
	}
	if (rc < 0) {
		st_manifest_free(m);
		return rc;
	}
	/* Kept for strata_sandbox_clone: the store outlives the sandbox. */
	atomic_init(&src->refs, 1);
	src->m = m;
	src->open = open;
	src->ctx = ctx;
	(*out)->src = src;
	return 0;
}

static void src_unref(struct api_src *src)
{
	if (src && atomic_fetch_sub(&src->refs, 1) == 1) {
		st_manifest_free(src->m);
		free(src);
	}
}

int strata_sandbox_clone(strata_sandbox *sb, strata_sandbox **out)
{
	if (!sb || !out)
		return api_fail(-EINVAL, "clone: no sandbox or no place for the new one");
	if (sb->src_dir)
		return strata_sandbox_open_dir(sb->host, sb->src_dir, sb->src_dir_flags, out);
	struct api_src *src = sb->src;
	if (!src)
		return api_fail(VMM_E_NO_SNAPSHOT, "clone: the sandbox was not opened from a snapshot directory or a "
				"store (%s)", sb->pool ? "a pool's sandbox: strata_pool_get another" : "made from an ELF");
	int rc = api_sandbox_make(sb->host, &(struct api_make){ .m = src->m, .open = src->open, .open_ctx = src->ctx,
								 .lazy = src->open == fs_private_layer_open }, out);
	if (rc < 0)
		return rc;
	atomic_fetch_add(&src->refs, 1);
	(*out)->src = src;
	return 0;
}

int strata_sandbox_pull(strata_host *h, strata_store *st, const strata_registry *reg, const char *reference,
			unsigned flags, strata_sandbox **out)
{
	char id[STRATA_ID_LEN + 1];
	int rc;

	if (flags & ~(unsigned)STRATA_PULL_LAZY)
		return api_fail(-EINVAL, "pull: unknown flags 0x%x", flags);
	/* The lazy layers' fetches use reg's settings, unless st already
	 * serves lazy layers with others (kept: -EBUSY is no failure here). */
	if ((flags & STRATA_PULL_LAZY) && (rc = strata_store_set_registry(st, reg)) < 0 && rc != -EBUSY)
		return rc;
	rc = strata_store_pull(st, reg, reference, NULL, flags, id);

	return rc < 0 ? rc : strata_sandbox_open_store(h, st, id, out);
}

void strata_sandbox_free(strata_sandbox *sb)
{
	/* A pool's sandbox is the pool's to free. */
	if (!sb || sb->pool)
		return;
	vmm_sandbox_free(sb->vs);
	pthread_mutex_lock(&sb->host->lock);
	sb->host->live--;
	pthread_mutex_unlock(&sb->host->lock);
	api_fns_free(&sb->own);
	src_unref(sb->src);
	free(sb->src_dir);
	free(sb);
}

int strata_sandbox_register(strata_sandbox *sb, const char *name, const char *sig, strata_host_fn fn, void *ctx)
{
	struct api_fn *f;
	int rc = api_fns_add(&sb->own, name, sig, fn, ctx, &f);

	if (rc < 0)
		return rc;
	if ((rc = api_fn_register(sb->vs, f)) < 0) {
		sb->own.n--;  /* the entry just added: the table is as before */
		free(f);
	}
	return rc;
}

int strata_sandbox_call(strata_sandbox *sb, const char *fn, const struct strata_value *args, size_t nargs,
			uint64_t timeout_ns, struct strata_result *res)
{
	struct vmm_value a[VMM_MAX_PARAMS];
	struct vmm_result r = { 0 };

	if (!fn || !res || (nargs && !args))
		return api_fail(-EINVAL, "call: %s is NULL", !fn ? "the function name" : !res ? "the result" : "args");
	if (nargs > VMM_MAX_PARAMS)
		return api_fail(STRATA_E_BAD_ARGS, "call %s: %zu arguments (at most %u)", fn, nargs, VMM_MAX_PARAMS);
	for (size_t i = 0; i < nargs; i++)
		a[i] = (struct vmm_value){ .type = (enum vmm_type)args[i].type, .i64 = args[i].i64,
					   .data = args[i].data, .len = args[i].len };
	int rc = vmm_sandbox_call_timeout(sb->vs, fn, a, nargs, timeout_ns, &r);
	if (rc < 0) {
		const struct vmm_error *err = vmm_sandbox_error(sb->vs);
		return api_fail(rc, "%s: %s", fn, err->code == rc && err->message[0] ? err->message : st_strerror(rc));
	}
	*res = (struct strata_result){ .type = (int)r.type, .i64 = r.i64, .data = r.data, .len = r.len };
	return 0;
}

void strata_result_clear(struct strata_result *res)
{
	if (!res)
		return;
	free(res->data);
	memset(res, 0, sizeof(*res));
}

int strata_sandbox_kill(strata_sandbox *sb)
{
	return vmm_sandbox_kill(sb->vs);
}

int strata_sandbox_restore(strata_sandbox *sb)
{
	int rc = vmm_sandbox_restore(sb->vs);

	if (rc < 0) {
		const struct vmm_error *err = vmm_sandbox_error(sb->vs);
		if (rc == VMM_E_NO_SNAPSHOT)
			return api_fail(rc, "restore: the sandbox has no snapshot (made from an ELF and never "
					"captured: strata_sandbox_capture makes one)");
		if (rc == VMM_E_BUSY)
			return api_fail(rc, "restore: a call is running on the sandbox");
		return api_fail(rc, "restore: %s", err->code == rc && err->message[0] ? err->message : st_strerror(rc));
	}
	return 0;
}

/* An in-memory snapshot: the vmm's, which refuses another sandbox's. */
struct strata_snapshot {
	struct vmm_memsnap *ms;
};

int strata_sandbox_snapshot(strata_sandbox *sb, strata_snapshot **out)
{
	strata_snapshot *snap;
	int rc;

	if (!sb || !out)
		return api_fail(-EINVAL, "snapshot: no sandbox or no place for the snapshot");
	if (sb->pool)
		return api_fail(-EINVAL, "snapshot: the sandbox is a pool's (strata_pool_put takes it back to the "
				"pool's snapshot)");
	if (!(snap = calloc(1, sizeof(*snap))))
		return api_fail(-ENOMEM, "snapshot: out of memory");
	if ((rc = vmm_sandbox_snapshot_mem(sb->vs, &snap->ms)) < 0) {
		free(snap);
		if (rc == VMM_E_BUSY)
			return api_fail(rc, "snapshot: a call is running on the sandbox");
		if (rc == VMM_E_POISONED)
			return api_fail(rc, "snapshot: the sandbox is poisoned (restore it first)");
		return api_fail(rc, "snapshot: %s", st_strerror(rc));
	}
	*out = snap;
	return 0;
}

int strata_sandbox_restore_to(strata_sandbox *sb, const strata_snapshot *snap)
{
	int rc;

	if (!sb || !snap)
		return api_fail(-EINVAL, "restore: no sandbox or no snapshot");
	if ((rc = vmm_sandbox_restore_mem(sb->vs, snap->ms)) < 0) {
		const struct vmm_error *err = vmm_sandbox_error(sb->vs);
		if (rc == VMM_E_FOREIGN)
			return api_fail(rc, "restore: the snapshot is another sandbox's");
		if (rc == VMM_E_BUSY)
			return api_fail(rc, "restore: a call is running on the sandbox");
		return api_fail(rc, "restore: %s", err->code == rc && err->message[0] ? err->message : st_strerror(rc));
	}
	return 0;
}

void strata_snapshot_free(strata_snapshot *snap)
{
	if (!snap)
		return;
	vmm_memsnap_free(snap->ms);
	free(snap);
}

int strata_sandbox_capture(strata_sandbox *sb, strata_store *st, const char *tag, unsigned flags,
			   char id[STRATA_ID_LEN + 1])
{
	struct st_manifest *m = NULL;
	st_id sid;
	int rc;

	if (flags & ~(unsigned)STRATA_TAG_FORCE)
		return api_fail(-EINVAL, "capture: unknown flags 0x%x", flags);
	if (sb->pool)
		return api_fail(-EINVAL, "capture: the sandbox is a pool's, which puts it back to the pool's snapshot: "
				"capture a sandbox of its own (strata_sandbox_open_dir, _open_store)");
	if (tag && !st_name_valid(tag))
		return api_fail(ST_EBADNAME, "capture: '%s' is not a valid tag name", tag);
	if ((rc = vmm_sandbox_capture(sb->vs, st->st, &m)) < 0) {
		const struct vmm_error *err = vmm_sandbox_error(sb->vs);
		return api_fail(rc, "cannot capture the sandbox: %s",
				rc == -ENOSPC ? "no space left on the store's filesystem"
				: err->code == rc && err->message[0] ? err->message : st_strerror(rc));
	}
	rc = ix_snap_commit(st->ix, m, tag, flags & STRATA_TAG_FORCE ? IX_TAG_FORCE : 0, &sid);
	if (rc < 0) {
		st_manifest_free(m);
		if (rc == IX_EEXIST)
			return api_fail(rc, "capture: tag '%s' already names another snapshot (STRATA_TAG_FORCE moves it)",
					tag);
		if (rc == IX_EMISSING)
			return api_fail(rc, "capture: the store lacks a layer of the sandbox's snapshot (opened from a "
					"directory outside this store: import that directory into it first)");
		return api_fail(rc, "cannot commit the snapshot to store %s: %s", st_store_path(st->st), st_strerror(rc));
	}
	rc = vmm_sandbox_rebase(sb->vs, m, &sid);
	st_manifest_free(m);
	char hex[ST_ID_HEX_LEN + 1];
	st_id_format(&sid, hex);
	if (rc < 0)
		return api_fail(rc, "snapshot %s committed, but the sandbox cannot continue on it: %s", hex, st_strerror(rc));
	if (id)
		memcpy(id, hex, sizeof(hex));
	return 0;
}

int strata_sandbox_backend(const strata_sandbox *sb)
{
	return (int)vmm_sandbox_backend(sb->vs);
}

int strata_sandbox_snapshot_id(const strata_sandbox *sb, char id[STRATA_ID_LEN + 1])
{
	st_id sid;

	if (!vmm_sandbox_snapshot_id(sb->vs, &sid))
		return api_fail(VMM_E_NO_SNAPSHOT, "the sandbox runs on no store snapshot (made from an ELF and never "
				"captured, or on an in-memory snapshot)");
	st_id_format(&sid, id);
	return 0;
}

static void sig_format(const struct vmm_signature *sig, char out[STRATA_SIG_LEN])
{
	static const char letter[] = { [VMM_VOID] = 'v', [VMM_I64] = 'i', [VMM_BYTES] = 'b', [VMM_STR] = 's' };
	size_t n = 0;

	out[n++] = letter[sig->ret & 3];
	out[n++] = '(';
	for (unsigned i = 0; i < sig->nparams && i < VMM_MAX_PARAMS; i++)
		out[n++] = letter[sig->params[i] & 3];
	out[n++] = ')';
	out[n] = '\0';
}

int strata_sandbox_functions(const strata_sandbox *sb, strata_function_fn cb, void *ctx)
{
	const struct vmm_signature *sig;
	const char *name;
	char text[STRATA_SIG_LEN];
	int count = 0;

	if (!cb)
		return api_fail(-EINVAL, "functions: the callback is NULL");
	for (unsigned i = 0; i < vmm_sandbox_function_count(sb->vs); i++) {
		if (vmm_sandbox_function(sb->vs, i, &name, &sig) < 0)
			continue;
		sig_format(sig, text);
		count++;
		int rc = cb(ctx, name, text);
		if (rc)
			return rc;
	}
	return count;
}

int strata_sandbox_signature(const strata_sandbox *sb, const char *fn, char sig[STRATA_SIG_LEN])
{
	const struct vmm_signature *s;
	const char *name;

	if (!fn)
		return api_fail(-EINVAL, "signature: the function name is NULL");
	for (unsigned i = 0; i < vmm_sandbox_function_count(sb->vs); i++)
		if (vmm_sandbox_function(sb->vs, i, &name, &s) == 0 && strcmp(name, fn) == 0) {
			sig_format(s, sig);
			return 0;
		}
	return api_fail(VMM_E_NO_FUNCTION, "the guest has no function '%s'", fn);
}

int strata_sandbox_info(const strata_sandbox *sb, int what, uint64_t *value)
{
	const struct vmm_error *e = vmm_sandbox_error(sb->vs);
	struct vmm_snap_stats ss;
	uint64_t v;

	/* The counters need the sandbox's own, not a const view. */
	if (what >= STRATA_INFO_RESTORES && what <= STRATA_INFO_PAGES_CAPTURED)
		vmm_sandbox_snap_stats(sb->vs, &ss);
	switch (what) {
	case STRATA_INFO_ERROR: v = (uint64_t)(int64_t)e->code; break;
	case STRATA_INFO_FAULT_VECTOR: v = e->vector; break;
	case STRATA_INFO_FAULT_ERROR_CODE: v = e->error_code; break;
	case STRATA_INFO_FAULT_RIP: v = e->rip; break;
	case STRATA_INFO_FAULT_ADDRESS: v = e->fault_addr; break;
	case STRATA_INFO_ABORT_CODE: v = (uint64_t)e->abort_code; break;
	case STRATA_INFO_LAYERS: v = sb->layers; break;
	case STRATA_INFO_LAYER_PAGES: v = sb->layer_pages; break;
	case STRATA_INFO_ON_MOUNT: v = sb->on_mount; break;
	case STRATA_INFO_DIRECT_LAYERS: v = sb->direct_layers; break;
	case STRATA_INFO_LAZY: v = sb->lazy; break;
	case STRATA_INFO_RESTORES: v = ss.restores; break;
	case STRATA_INFO_CAPTURES: v = ss.captures; break;
	case STRATA_INFO_PAGES_REWRITTEN: v = ss.pages_rewritten; break;
	case STRATA_INFO_PAGES_DROPPED: v = ss.pages_dropped; break;
	case STRATA_INFO_PAGES_CAPTURED: v = ss.pages_captured; break;
	case STRATA_INFO_WS_PAGES: v = sb->ws_pages; break;
	case STRATA_INFO_WS_RUNS: v = sb->ws_runs; break;
	case STRATA_INFO_WS_LAYERS: v = sb->ws_layers; break;
	case STRATA_INFO_WS_BYTES: v = sb->ws_bytes; break;
	case STRATA_INFO_WS_MAPPED: v = sb->ws_mapped; break;
	default:
		return api_fail(-EINVAL, "sandbox info: %d is not a STRATA_INFO_* this version knows", what);
	}
	*value = v;
	return 0;
}

int strata_sandbox_core(strata_sandbox *sb, const char *path)
{
	struct vmm_error err = { 0 };
	int rc;

	if (!path)
		return api_fail(-EINVAL, "core: the path is NULL");
	if ((rc = vmm_sandbox_core(sb->vs, path, &err)) < 0)
		return api_fail_vmm(rc, NULL, &err);
	return 0;
}

int strata_sandbox_record_working_set(strata_sandbox *sb, strata_store *st, char record[STRATA_ID_LEN + 1])
{
	struct st_ws *ws = NULL;
	uint64_t mapped = 0;
	void *buf = NULL;
	size_t len = 0;
	char why[ST_WHY_LEN] = "", hex[ST_ID_HEX_LEN + 1];
	st_id id, blob;
	int rc;

	if (!st)
		return api_fail(-EINVAL, "working set: the store is NULL");
	if (!vmm_sandbox_snapshot_id(sb->vs, &id))
		return api_fail(VMM_E_NO_SNAPSHOT, "working set: the sandbox has no snapshot to start from (opened "
				"from a tag, an id or a snapshot directory)");
	if ((rc = vmm_sandbox_working_set(sb->vs, &ws, &mapped)) < 0)
		return api_fail(rc, "cannot record the working set: %s", st_strerror(rc));
	if ((rc = st_ws_encode(ws, &buf, &len, why, sizeof(why))) < 0) {
		api_fail(rc, "cannot encode the working set: %s", why[0] ? why : st_strerror(rc));
		goto out_free;
	}
	st_id_format(&id, hex);
	if ((rc = ix_ws_put(st->ix, &id, buf, len, &blob, why, sizeof(why))) < 0) {
		if (rc == IX_ENOTFOUND)
			api_fail(rc, "snapshot %s is not in store %s", hex, st_store_path(st->st));
		else
			api_fail(rc, "cannot store the working set in %s: %s", st_store_path(st->st),
				 why[0] ? why : st_strerror(rc));
		goto out_free;
	}
	sb->ws_pages = ws->pages;
	sb->ws_runs = ws->nruns;
	sb->ws_layers = ws->nlayers;
	sb->ws_bytes = len;
	sb->ws_mapped = mapped;
	if (record)
		st_id_format(&blob, record);
out_free:
	free(buf);
	st_ws_free(ws);
	return rc < 0 ? rc : 0;
}

/* ==== pools ==== */

struct strata_pool {
	strata_host *host;
	pthread_mutex_t lock;
	pthread_cond_t back;      /* a sandbox came back */
	unsigned n, out;
	strata_sandbox **sbs;
	/* what a replacement is made from */
	struct vmm_snapdir *dir;
	struct st_manifest *m;
	vmm_layer_open_fn open;   /* the manifest's layers: the store's blobs, or its lazy mount's */
	void *open_ctx;
};

static int pool_make_one(strata_pool *p, strata_sandbox **out)
{
	struct api_make how = { .dir = p->dir };

	if (!p->dir)
		how = (struct api_make){ .m = p->m, .open = p->open, .open_ctx = p->open_ctx,
					 .lazy = p->open == fs_private_layer_open };
	int rc = api_sandbox_make(p->host, &how, out);
	if (rc == 0)
		(*out)->pool = p;
	return rc;
}

static void pool_release(strata_pool *p)
{
	for (unsigned i = 0; i < p->n; i++)
		if (p->sbs[i]) {
			p->sbs[i]->pool = NULL;
			strata_sandbox_free(p->sbs[i]);
		}
	free(p->sbs);
	vmm_snapdir_close(p->dir);
	st_manifest_free(p->m);
	pthread_cond_destroy(&p->back);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

static int pool_open(strata_host *h, struct vmm_snapdir *d, struct st_manifest *m, vmm_layer_open_fn open,
		     void *open_ctx, unsigned n, strata_pool **out)
{
	strata_pool *p = calloc(1, sizeof(*p));
	int rc = 0;

	if (!p || !(p->sbs = calloc(n, sizeof(*p->sbs)))) {
		free(p);
		vmm_snapdir_close(d);
		st_manifest_free(m);
		return api_fail(-ENOMEM, "pool: out of memory");
	}
	p->host = h;
	p->dir = d;
	p->m = m;
	p->open = open;
	p->open_ctx = open_ctx;
	pthread_condattr_t ca;
	pthread_mutex_init(&p->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);  /* a get's wait does not follow the wall clock */
	pthread_cond_init(&p->back, &ca);
	pthread_condattr_destroy(&ca);
	for (p->n = 0; p->n < n; p->n++)
		if ((rc = pool_make_one(p, &p->sbs[p->n])) < 0)
			break;
	if (rc < 0) {
		pool_release(p);
		return rc;
	}
	pthread_mutex_lock(&h->lock);
	h->live++;
	pthread_mutex_unlock(&h->lock);
	*out = p;
	return 0;
}

static int pool_n_check(unsigned n)
{
	if (n == 0 || n > VMM_POOL_MAX)
		return api_fail(-EINVAL, "pool: %u sandboxes (1..%u)", n, VMM_POOL_MAX);
	return 0;
}

int strata_pool_open_dir(strata_host *h, const char *dir, unsigned flags, unsigned n, strata_pool **out)
{
	struct vmm_snapdir *d;
	int rc;

	if ((rc = pool_n_check(n)) < 0 || (rc = dir_open(h, dir, flags, &d)) < 0)
		return rc;
	return pool_open(h, d, NULL, NULL, NULL, n, out);
}

int strata_pool_open_store(strata_host *h, strata_store *st, const char *ref, unsigned n, strata_pool **out)
{
	struct st_manifest *m;
	vmm_layer_open_fn open;
	void *ctx;
	int rc;

	if ((rc = pool_n_check(n)) < 0 || (rc = api_store_manifest(st, ref, &m, NULL, &open, &ctx)) < 0)
		return rc;
	return pool_open(h, NULL, m, open, ctx, n, out);
}

int strata_pool_free(strata_pool *p)
{
	if (!p)
		return 0;
	pthread_mutex_lock(&p->lock);
	unsigned out = p->out;
	pthread_mutex_unlock(&p->lock);
	if (out)
		return api_fail(-EBUSY, "pool: %u of its sandboxes are out (strata_pool_put them first)", out);
	strata_host *h = p->host;
	pool_release(p);
	pthread_mutex_lock(&h->lock);
	h->live--;
	pthread_mutex_unlock(&h->lock);
	return 0;
}

int strata_pool_get(strata_pool *p, uint64_t wait_ns, strata_sandbox **out)
{
	struct timespec until;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += (time_t)(wait_ns / 1000000000u);
	until.tv_nsec += (long)(wait_ns % 1000000000u);
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&p->lock);
	for (;;) {
		for (unsigned i = 0; i < p->n; i++)
			if (!p->sbs[i]->out) {
				p->sbs[i]->out = true;
				p->out++;
				*out = p->sbs[i];
				pthread_mutex_unlock(&p->lock);
				return 0;
			}
		if (wait_ns == 0 || pthread_cond_timedwait(&p->back, &p->lock, &until) == ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&p->lock);
	return api_fail(-EAGAIN, "pool: all %u sandboxes are out", p->n);
}

int strata_pool_put(strata_pool *p, strata_sandbox *sb)
{
	unsigned i;

	pthread_mutex_lock(&p->lock);
	for (i = 0; i < p->n && p->sbs[i] != sb; i++)
		;
	bool ok = i < p->n && sb->out;
	pthread_mutex_unlock(&p->lock);
	if (!ok)
		return api_fail(-EINVAL, "pool: the sandbox is not %s", i < p->n ? "out" : "this pool's");
	if (vmm_sandbox_restore(sb->vs) < 0) {
		/* A new one from the snapshot, with the old one's own functions. */
		strata_sandbox *fresh;
		int rc = pool_make_one(p, &fresh);
		if (rc == 0) {
			for (size_t k = 0; k < sb->own.n && rc == 0; k++) {
				struct api_fn *f;
				if ((rc = api_fns_push(&fresh->own, sb->own.v[k], sb->own.v[k]->name, &f)) == 0)
					rc = api_fn_register(fresh->vs, f);
			}
			if (rc < 0) {
				fresh->pool = NULL;
				strata_sandbox_free(fresh);
			}
		}
		if (rc < 0)
			return rc;
		fresh->out = true;
		pthread_mutex_lock(&p->lock);
		p->sbs[i] = fresh;
		pthread_mutex_unlock(&p->lock);
		sb->pool = NULL;
		strata_sandbox_free(sb);
		sb = fresh;
	}
	pthread_mutex_lock(&p->lock);
	sb->out = false;
	p->out--;
	pthread_cond_signal(&p->back);
	pthread_mutex_unlock(&p->lock);
	return 0;
}
