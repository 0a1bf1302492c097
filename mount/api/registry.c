/* registry.c: strata_registry (how to reach registries) and the store's push and pull through the registry client. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "index/dist/dist.h"
#include "mount/api/api_int.h"

int strata_registry_new(strata_registry **out)
{
	strata_registry *r = calloc(1, sizeof(*r));

	if (!r)
		return api_fail(-ENOMEM, "registry settings: out of memory");
	*out = r;
	return 0;
}

void strata_registry_free(strata_registry *reg)
{
	if (!reg)
		return;
	free(reg->cacert);
	free(reg->user);
	free(reg->pass);
	api_strv_free(reg->certs_d);
	free(reg);
}

void api_strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

int api_strv_set(char ***slot, const char *const *v)
{
	size_t n = 0;
	char **c = NULL;

	while (v && v[n])
		n++;
	if (v && !(c = calloc(n + 1, sizeof(*c))))
		return api_fail(-ENOMEM, "registry settings: out of memory");
	for (size_t i = 0; i < n; i++)
		if (!(c[i] = strdup(v[i]))) {
			api_strv_free(c);
			return api_fail(-ENOMEM, "registry settings: out of memory");
		}
	api_strv_free(*slot);
	*slot = c;
	return 0;
}

int strata_registry_set_credentials_fn(strata_registry *reg, strata_credentials_fn fn, void *ctx)
{
	reg->creds = fn;
	reg->creds_ctx = fn ? ctx : NULL;
	return 0;
}

int strata_registry_set_certs_dirs(strata_registry *reg, const char *const *roots)
{
	return api_strv_set(&reg->certs_d, roots);
}

/* The ix_auth callback over a strata_credentials_fn (ctx: the settings). */
static int creds_trampoline(void *ctx, const char *host, char **user, char **pass, char *why, size_t whylen)
{
	const strata_registry *reg = ctx;
	char *u = NULL, *p = NULL;
	char buf[512] = "";
	int rc = reg->creds(reg->creds_ctx, host, &u, &p, buf, sizeof(buf));

	if (rc < 0 || !u != !p) {
		free(u);
		free(p);
		if (why && whylen)
			snprintf(why, whylen, "%s", buf[0] ? buf : rc < 0 ? "the credentials callback failed"
								       : "the credentials callback gave a user without a password or the other way round");
		return rc < 0 ? rc : IX_EAUTH;
	}
	*user = u;
	*pass = p;
	return 0;
}

const struct ix_auth *api_registry_auth(const strata_registry *reg, struct ix_auth_provider *creds,
					struct ix_auth *fn_auth)
{
	if (reg->creds) {
		*fn_auth = (struct ix_auth){ .get = creds_trampoline, .ctx = (void *)reg };
		return fn_auth;
	}
	ix_auth_creds(creds, reg->user, reg->pass);
	return &creds->auth;
}

int strata_registry_set_plain_http(strata_registry *reg, int on)
{
	reg->plain_http = on != 0;
	return 0;
}

int api_str_set(char **slot, const char *s)
{
	char *c = NULL;

	if (s && !(c = strdup(s)))
		return api_fail(-ENOMEM, "registry settings: out of memory");
	free(*slot);
	*slot = c;
	return 0;
}

int strata_registry_set_tls(strata_registry *reg, const char *cacert, int verify)
{
	int rc = api_str_set(&reg->cacert, cacert);

	if (rc == 0)
		reg->noverify = !verify;
	return rc;
}

int strata_registry_set_credentials(strata_registry *reg, const char *user, const char *pass)
{
	char *u = NULL, *p = NULL;

	if (!user != !pass)
		return api_fail(-EINVAL, "registry credentials: a %s without a %s", user ? "user" : "password",
				user ? "password" : "user");
	if (api_str_set(&u, user) < 0 || api_str_set(&p, pass) < 0) {
		free(u);
		return -ENOMEM;
	}
	free(reg->user);
	free(reg->pass);
	reg->user = u;
	reg->pass = p;
	return 0;
}

int strata_registry_set_timeout(strata_registry *reg, unsigned seconds)
{
	reg->timeout_s = seconds;
	return 0;
}

/* A registry client for reference (parsed into *ref) with reg's settings. */
static int client_open(strata_store *st, const strata_registry *reg, const char *what, const char *reference,
		       struct ix_registry_ref *ref, struct ix_registry **out)
{
	static const strata_registry defaults;
	int rc;

	if (!reg)
		reg = &defaults;
	if (!reference)
		return api_fail(-EINVAL, "%s: the registry reference is NULL", what);
	if ((rc = ix_registry_ref_parse(reference, ref)) < 0)
		return api_fail(rc, "%s: '%s' is not a registry reference (REGISTRY/REPOSITORY[:TAG|@sha256:DIGEST], "
				"e.g. 127.0.0.1:5000/sandboxes/web:v1)", what, reference);
	struct ix_auth_provider creds;  /* copied by the client at open */
	struct ix_auth fn_auth;
	struct ix_registry_opts o = { .insecure = reg->plain_http, .tls_noverify = reg->noverify,
				      .cacert = reg->cacert, .auth = api_registry_auth(reg, &creds, &fn_auth),
				      .certs_d = (const char *const *)reg->certs_d, .ix = st->ix };
	if (reg->timeout_s)
		o.deadline_ns = ix_registry_now_ns() + (uint64_t)reg->timeout_s * 1000000000u;
	if ((rc = ix_registry_global_init()) < 0)
		return api_fail(rc, "%s: cannot start the HTTP client (libcurl could not be loaded)", what);
	if ((rc = ix_registry_open(ref, &o, out)) < 0)
		return api_fail(rc, "%s: cannot start the HTTP client: %s", what, st_strerror(rc));
	return 0;
}

static int xfer_fail(int rc, const char *what, const char *reference, const char *why)
{
	return api_fail(rc, "%s %s: %s", what, reference, why[0] ? why : st_strerror(rc));
}

int strata_store_push(strata_store *st, const strata_registry *reg, const char *ref, const char *reference)
{
	struct ix_registry_ref rr;
	struct ix_registry *r;
	struct ix_oci_sink sink;
	uint8_t sha[ST_SHA256_LEN];
	uint64_t size;
	char why[ST_WHY_LEN] = "", hex[STRATA_ID_LEN + 1];
	int rc;

	if (!ref)
		return api_fail(-EINVAL, "push: the snapshot reference is NULL");
	if ((rc = client_open(st, reg, "push", reference, &rr, &r)) < 0)
		return rc;
	if (rr.digest) {
		ix_registry_close(r);
		return api_fail(IX_EREF, "push: '%s' names a digest: push to a tag (REGISTRY/REPOSITORY:TAG)", reference);
	}
	/* ix_oci_push resolves ref too; this says which store lacks it. */
	if ((rc = strata_store_resolve(st, ref, hex)) < 0) {
		ix_registry_close(r);
		return rc;
	}
	ix_registry_sink(r, &sink);
	rc = ix_oci_push(st->ix, ref, rr.tag, &sink, NULL, NULL, sha, &size, why, sizeof(why));
	if (rc == 0)
		ix_registry_origins_record(r);
	ix_registry_close(r);
	return rc < 0 ? xfer_fail(rc, "push to", reference, why) : 0;
}

int strata_store_pull(strata_store *st, const strata_registry *reg, const char *reference, const char *tag,
		      unsigned flags, char id[STRATA_ID_LEN + 1])
{
	struct ix_registry_ref rr;
	struct ix_registry *r;
	struct ix_oci_source src;
	char why[ST_WHY_LEN] = "";
	st_id sid;
	int rc;

	if (flags & ~(unsigned)(STRATA_TAG_FORCE | STRATA_PULL_LAZY))
		return api_fail(-EINVAL, "pull: unknown flags 0x%x", flags);
	if (tag && !st_name_valid(tag))
		return api_fail(ST_EBADNAME, "pull: '%s' is not a valid tag name", tag);
	if ((rc = client_open(st, reg, "pull", reference, &rr, &r)) < 0)
		return rc;
	ix_registry_source(r, &src);
	unsigned ixf = (flags & STRATA_TAG_FORCE ? IX_TAG_FORCE : 0) | (flags & STRATA_PULL_LAZY ? IX_OCI_LAZY : 0);
	rc = ix_oci_pull(st->ix, &src, rr.digest ? rr.digest : rr.tag, tag, ixf, NULL, NULL, &sid, why, sizeof(why));
	if (rc == 0)
		ix_registry_origins_record(r);
	ix_registry_close(r);
	if (rc == IX_EEXIST)
		return api_fail(rc, "pull %s: tag '%s' already names another snapshot (STRATA_TAG_FORCE moves it)",
				reference, tag);
	if (rc < 0)
		return xfer_fail(rc, "pull of", reference, why);
	if (id)
		st_id_format(&sid, id);
	return 0;
}
