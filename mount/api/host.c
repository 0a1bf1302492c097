/* host.c: strata_host: the vmm host its sandboxes share, its settings, and host functions (signatures, tables, the vmm callback). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mount/api/api_int.h"

/* One signature letter: a result (v allowed) or a parameter type. */
static int sig_letter(char c, bool result)
{
	switch (c) {
	case 'v':
		return result ? VMM_VOID : -1;
	case 'i':
		return VMM_I64;
	case 'b':
		return VMM_BYTES;
	case 's':
		return VMM_STR;
	default:
		return -1;
	}
}

bool api_sig_parse(const char *sig, struct vmm_signature *out)
{
	struct vmm_signature s = { 0 };
	int t;

	if (!sig || (t = sig_letter(sig[0], true)) < 0 || sig[1] != '(')
		return false;
	s.ret = (enum vmm_type)t;
	const char *p = sig + 2;
	for (; *p && *p != ')'; p++) {
		if (s.nparams == VMM_MAX_PARAMS || (t = sig_letter(*p, false)) < 0)
			return false;
		s.params[s.nparams++] = (enum vmm_type)t;
	}
	if (*p != ')' || p[1] != '\0')
		return false;
	*out = s;
	return true;
}

int api_fns_add(struct api_fns *t, const char *name, const char *sig, strata_host_fn fn, void *ctx,
		struct api_fn **added)
{
	struct vmm_signature s;
	size_t len = name ? strlen(name) : 0;

	if (len == 0 || len > VMM_NAME_MAX)
		return api_fail(-EINVAL, "host function name %s%s%s: it must be 1..%u bytes", name ? "'" : "",
				name ? name : "NULL", name ? "'" : "", VMM_NAME_MAX);
	if (!api_sig_parse(sig, &s))
		return api_fail(-EINVAL, "host function %s: signature '%s' is not one (a result letter v, i, b or s, "
				"then up to %u parameters of i, b, s in parentheses, e.g. \"i(ii)\")", name,
				sig ? sig : "NULL", VMM_MAX_PARAMS);
	if (!fn)
		return api_fail(-EINVAL, "host function %s: the function pointer is NULL", name);
	return api_fns_push(t, &(struct api_fn){ .sig = s, .fn = fn, .ctx = ctx }, name, added);
}

int api_fns_push(struct api_fns *t, const struct api_fn *src, const char *name, struct api_fn **added)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 8;
		struct api_fn **v = realloc(t->v, cap * sizeof(*v));
		if (!v)
			return api_fail(-ENOMEM, "host function %s: out of memory", name);
		t->v = v;
		t->cap = cap;
	}
	struct api_fn *f = malloc(sizeof(*f));
	if (!f)
		return api_fail(-ENOMEM, "host function %s: out of memory", name);
	*f = *src;
	snprintf(f->name, sizeof(f->name), "%s", name);
	t->v[t->n++] = f;
	if (added)
		*added = f;
	return 0;
}

void api_fns_free(struct api_fns *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->v[i]);
	free(t->v);
	memset(t, 0, sizeof(*t));
}

/* The vmm's callback: the arguments as strata_values, the result back. */
static int fn_trampoline(void *ctx, const struct vmm_value *args, size_t nargs, struct vmm_value *ret)
{
	const struct api_fn *f = ctx;
	struct strata_value a[VMM_MAX_PARAMS], r = { 0 };

	if (nargs > VMM_MAX_PARAMS)
		return -EINVAL;
	for (size_t i = 0; i < nargs; i++)
		a[i] = (struct strata_value){ .type = (int)args[i].type, .i64 = args[i].i64, .data = args[i].data,
					      .len = args[i].len };
	int rc = f->fn(f->ctx, a, nargs, &r);
	if (rc < 0)
		return rc;
	*ret = (struct vmm_value){ .type = (enum vmm_type)r.type, .i64 = r.i64, .data = r.data, .len = r.len };
	return 0;
}

int api_fn_register(struct vmm_sandbox *vs, struct api_fn *f)
{
	struct vmm_error err = { 0 };
	int rc = vmm_sandbox_register(vs, f->name, &f->sig, fn_trampoline, f, &err);

	return rc < 0 ? api_fail_vmm(rc, f->name, &err) : 0;
}

int api_fns_apply(const struct api_fns *t, struct vmm_sandbox *vs)
{
	/* In order: a later entry of a name replaces the earlier one. */
	for (size_t i = 0; i < t->n; i++) {
		int rc = api_fn_register(vs, t->v[i]);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int strata_host_new(strata_host **out)
{
	struct vmm_host_config cfg;
	struct vmm_error err = { 0 };
	strata_host *h = calloc(1, sizeof(*h));
	int rc;

	if (!h)
		return api_fail(-ENOMEM, "host: out of memory");
	vmm_host_config_defaults(&cfg);
	if ((rc = vmm_host_new(&cfg, &h->vh, &err)) < 0) {
		free(h);
		return api_fail_vmm(rc, "host", &err);
	}
	pthread_mutex_init(&h->lock, NULL);
	*out = h;
	return 0;
}

int strata_host_free(strata_host *h)
{
	if (!h)
		return 0;
	pthread_mutex_lock(&h->lock);
	unsigned live = h->live;
	pthread_mutex_unlock(&h->lock);
	if (live)
		return api_fail(-EBUSY, "host: %u sandbox(es) or pool(s) made with it are not freed yet", live);
	int rc = vmm_host_free(h->vh);
	if (rc < 0)
		return api_fail(rc, "host: its vmm host is still in use");
	api_fns_free(&h->fns);
	pthread_mutex_destroy(&h->lock);
	free(h);
	return 0;
}

/* Can backend (KVM or PROCESS) run here: 0, or its code with err filled. */
static int backend_probe(int backend, struct vmm_error *err)
{
	return backend == STRATA_BACKEND_KVM ? vmm_kvm_check(err) : vmm_process_check(err);
}

int strata_host_set_backend(strata_host *h, int backend)
{
	struct vmm_error err = { 0 };
	int rc = 0;

	if (backend != STRATA_BACKEND_AUTO && backend != STRATA_BACKEND_KVM && backend != STRATA_BACKEND_PROCESS)
		return api_fail(-EINVAL, "backend %d: not STRATA_BACKEND_AUTO, _KVM or _PROCESS", backend);
	if (backend != STRATA_BACKEND_AUTO && (rc = backend_probe(backend, &err)) < 0)
		return api_fail(rc, "the %s backend cannot run here: %s", backend == STRATA_BACKEND_KVM ? "kvm" : "process",
				err.code == rc && err.message[0] ? err.message : st_strerror(rc));
	pthread_mutex_lock(&h->lock);
	h->backend = backend;
	pthread_mutex_unlock(&h->lock);
	return 0;
}

int strata_host_backend(const strata_host *h)
{
	return (int)vmm_backend_resolve(h->vh, (enum vmm_backend_kind)h->backend);
}

/* The words are the vmm's backend table's, as the strata command parses them. */
const char *strata_backend_name(int backend)
{
	switch (backend) {
	case STRATA_BACKEND_AUTO:
	case STRATA_BACKEND_KVM:
	case STRATA_BACKEND_PROCESS:
		return vmm_backend_name((enum vmm_backend_kind)backend);
	default:
		return NULL;
	}
}

int strata_backend_parse(const char *name, int *backend)
{
	enum vmm_backend_kind k;

	if (!backend)
		return api_fail(-EINVAL, "backend: the out-parameter is NULL");
	if (vmm_backend_parse(name, &k) < 0)
		return api_fail(-EINVAL, "backend '%s': not auto, kvm or process", name ? name : "(null)");
	*backend = (int)k;
	return 0;
}

int strata_host_set_cache(strata_host *h, unsigned shells, unsigned warm)
{
	int rc = vmm_host_limits_set(h->vh, shells, warm);

	if (rc < 0)
		return api_fail(rc, "host cache: %u shells (at most %u), %u warm sandboxes (at most %u)", shells,
				VMM_HOST_SHELLS_MAX, warm, VMM_HOST_WARM_MAX);
	return 0;
}

int strata_host_set_sizes(strata_host *h, uint64_t heap, uint64_t stack, uint64_t input, uint64_t output)
{
	pthread_mutex_lock(&h->lock);
	h->heap = heap;
	h->stack = stack;
	h->input = input;
	h->output = output;
	pthread_mutex_unlock(&h->lock);
	return 0;
}

int strata_host_set_timeout(strata_host *h, uint64_t timeout_ns)
{
	pthread_mutex_lock(&h->lock);
	h->timeout_ns = timeout_ns;
	pthread_mutex_unlock(&h->lock);
	return 0;
}

int strata_host_set_log(strata_host *h, strata_log_fn fn, void *ctx)
{
	pthread_mutex_lock(&h->lock);
	h->log = fn;
	h->log_ctx = ctx;
	pthread_mutex_unlock(&h->lock);
	return 0;
}

int strata_host_register(strata_host *h, const char *name, const char *sig, strata_host_fn fn, void *ctx)
{
	pthread_mutex_lock(&h->lock);
	int rc = api_fns_add(&h->fns, name, sig, fn, ctx, NULL);
	pthread_mutex_unlock(&h->lock);
	return rc;
}

int strata_backend_check(int backend)
{
	struct vmm_error err = { 0 };
	int rc;

	if (backend != STRATA_BACKEND_KVM && backend != STRATA_BACKEND_PROCESS)
		return api_fail(-EINVAL, "backend %d: not STRATA_BACKEND_KVM or _PROCESS", backend);
	/* The bare reason: a caller says which backend around it. */
	return (rc = backend_probe(backend, &err)) < 0 ? api_fail_vmm(rc, NULL, &err) : 0;
}

int strata_host_set_policy(strata_host *h, const char *path)
{
	struct vmm_host_config cfg;
	struct vmm_host_stats hs;
	struct vmm_policy p;
	struct vmm_host *vh;
	struct vmm_error err = { 0 };
	char why[VMM_MESSAGE_MAX] = "";
	int rc;

	vmm_policy_defaults(&p);
	if (path && (rc = vmm_policy_read(path, &p, why, sizeof(why))) < 0)
		return why[0] ? api_fail(rc, "%s", why) : api_fail(rc, "%s: %s", path, st_strerror(rc));
	/* The vmm host copies its policy at its making, and its sandboxes
	 * theirs from it: a new vmm host with the same limits takes the old
	 * one's place while nothing made with it lives. */
	pthread_mutex_lock(&h->lock);
	if (h->live) {
		pthread_mutex_unlock(&h->lock);
		return api_fail(-EBUSY, "reset policy: the host's sandboxes or pools are alive (%u): set it before "
				"the first", h->live);
	}
	vmm_host_stats(h->vh, &hs);
	vmm_host_config_defaults(&cfg);
	cfg.shells = hs.shells_max;
	cfg.warm = hs.warm_max;
	cfg.policy = &p;
	if ((rc = vmm_host_new(&cfg, &vh, &err)) < 0) {
		pthread_mutex_unlock(&h->lock);
		return api_fail_vmm(rc, "reset policy", &err);
	}
	if ((rc = vmm_host_free(h->vh)) < 0) {
		pthread_mutex_unlock(&h->lock);
		vmm_host_free(vh);
		return api_fail(rc, "reset policy: the host is still in use");
	}
	h->vh = vh;
	pthread_mutex_unlock(&h->lock);
	return 0;
}

int strata_host_set_debug(strata_host *h, int on)
{
	pthread_mutex_lock(&h->lock);
	h->debug = on != 0;
	pthread_mutex_unlock(&h->lock);
	return 0;
}

int strata_host_info(const strata_host *h, int what, uint64_t *value)
{
	pthread_mutex_t *lock = (pthread_mutex_t *)&h->lock;  /* a const handle's lock still locks */
	struct vmm_host_stats hs;
	uint64_t v;

	pthread_mutex_lock(lock);
	vmm_host_stats(h->vh, &hs);
	unsigned live = h->live;
	pthread_mutex_unlock(lock);
	switch (what) {
	case STRATA_HOST_INFO_SHELLS_MAX: v = hs.shells_max; break;
	case STRATA_HOST_INFO_WARM_MAX: v = hs.warm_max; break;
	case STRATA_HOST_INFO_SHELLS: v = hs.shells; break;
	case STRATA_HOST_INFO_WARM: v = hs.warm; break;
	case STRATA_HOST_INFO_SANDBOXES: v = live; break;
	default:
		return api_fail(-EINVAL, "host info: %d is not a STRATA_HOST_INFO_* this version knows", what);
	}
	*value = v;
	return 0;
}
