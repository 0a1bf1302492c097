/* registry.c: strata_registry (how to reach registries) and the store's push and pull through the registry client. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
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
	free(reg->mount_from);
	free(reg->cert_dir);
	api_strv_free(reg->annotations);
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

int strata_registry_set_mount_from(strata_registry *reg, const char *repository)
{
	return api_str_set(&reg->mount_from, repository);
}

int strata_registry_set_cert_dir(strata_registry *reg, const char *dir)
{
	return api_str_set(&reg->cert_dir, dir);
}

int strata_registry_set_chunk_size(strata_registry *reg, uint32_t bytes)
{
	if (bytes && (bytes < STRATA_CHUNK_MIN || bytes > STRATA_CHUNK_MAX || (bytes & (bytes - 1))))
		return api_fail(-EINVAL, "registry settings: a chunk size is a power of two from %u to %u, not %" PRIu32,
				STRATA_CHUNK_MIN, STRATA_CHUNK_MAX, bytes);
	reg->chunk_size = bytes;
	return 0;
}

int strata_registry_set_whole_configs(strata_registry *reg, int on)
{
	reg->whole_configs = on != 0;
	return 0;
}

int strata_registry_set_annotations(strata_registry *reg, const char *const *annotations)
{
	for (size_t i = 0; annotations && annotations[i]; i++)
		if (!strchr(annotations[i], '=') || annotations[i][0] == '=')
			return api_fail(-EINVAL, "registry settings: an annotation is KEY=VALUE, not '%s'", annotations[i]);
	return api_strv_set(&reg->annotations, annotations);
}

int strata_registry_set_warning_fn(strata_registry *reg, strata_warning_fn fn, void *ctx)
{
	reg->warn = fn;
	reg->warn_ctx = fn ? ctx : NULL;
	return 0;
}

int strata_reference_parse(const char *reference, struct strata_reference *out)
{
	struct ix_registry_ref r;
	int rc;

	if (!reference || !out)
		return api_fail(-EINVAL, "reference: NULL");
	if ((rc = ix_registry_ref_parse(reference, &r)) < 0)
		return api_fail(rc, "'%s' is not a registry reference (REGISTRY/REPOSITORY[:TAG|@sha256:DIGEST], "
				"e.g. 127.0.0.1:5000/sandboxes/web:v1)", reference);
	_Static_assert(sizeof(out->buf) == sizeof(r.buf), "struct strata_reference holds a parsed reference");
	memcpy(out->buf, r.buf, sizeof(r.buf));
	/* Into out->buf what points into r.buf; a constant ("latest") as it is. */
#define MOVE(p) ((p) && (uintptr_t)(p) - (uintptr_t)r.buf < sizeof(r.buf) ? out->buf + ((p) - r.buf) : (p))
	out->host = MOVE(r.host);
	out->repository = MOVE(r.repo);
	out->tag = MOVE(r.tag);
	out->digest = MOVE(r.digest);
#undef MOVE
	return 0;
}

int strata_reference_host_valid(const char *host)
{
	return host && ix_registry_host_valid(host);
}

int strata_registry_set_progress(strata_registry *reg, strata_progress_fn fn, void *ctx)
{
	reg->progress = fn;
	reg->progress_ctx = fn ? ctx : NULL;
	return 0;
}

/* The ix_oci_progress callback over a strata_progress_fn (ctx: the settings). */
static void progress_trampoline(void *ctx, const struct ix_oci_event *ev)
{
	static const int kinds[] = { [IX_OCI_BLOB_BEGIN] = STRATA_XFER_BEGIN, [IX_OCI_BLOB_BYTES] = STRATA_XFER_BYTES,
				     [IX_OCI_BLOB_END] = STRATA_XFER_END, [IX_OCI_BLOB_SKIP] = STRATA_XFER_SKIP,
				     [IX_OCI_MANIFEST] = STRATA_XFER_MANIFEST };
	static const int blobs[] = { [IX_OCI_LAYER] = STRATA_BLOB_LAYER, [IX_OCI_CONFIG] = STRATA_BLOB_CONFIG,
				     [IX_OCI_CHUNKS] = STRATA_BLOB_CHUNK_INDEX,
				     [IX_OCI_MANIFEST_BLOB] = STRATA_BLOB_MANIFEST };
	const strata_registry *reg = ctx;
	char dg[ST_DIGEST_LEN + 1];
	struct strata_xfer_event e = { .size = sizeof(e), .kind = kinds[ev->kind], .blob = blobs[ev->what],
				       .total = ev->size, .done = ev->done, .index = ev->index, .count = ev->count };

	if (ev->sha256) {
		st_digest_format(ev->sha256, dg);
		e.digest = dg;
	}
	reg->progress(reg->progress_ctx, &e);
}

/* A registry client for reference (parsed into *ref) with reg's settings;
 * prog (filled here) carries reg's progress callback, or is NULL'd in
 * *progp if there is none. */
static int client_open(strata_store *st, const strata_registry *reg, const char *what, const char *reference,
		       struct ix_registry_ref *ref, struct ix_oci_progress *prog, const struct ix_oci_progress **progp,
		       struct ix_registry **out)
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
	*prog = (struct ix_oci_progress){ progress_trampoline, (void *)reg };
	*progp = reg->progress ? prog : NULL;
	struct ix_auth_provider creds;  /* copied by the client at open */
	struct ix_auth fn_auth;
	struct ix_registry_opts o = { .insecure = reg->plain_http, .tls_noverify = reg->noverify,
				      .cacert = reg->cacert, .auth = api_registry_auth(reg, &creds, &fn_auth),
				      .certs_d = (const char *const *)reg->certs_d, .ix = st->ix,
				      .mount_from = reg->mount_from, .cert_dir = reg->cert_dir,
				      /* an upload's bytes as they go (a pull's come through ix_oci_pull) */
				      .prog = strcmp(what, "push") == 0 ? *progp : NULL };
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
	return api_fail_why(rc, why, "%s %s: %s", what, reference, why[0] ? why : st_strerror(rc));
}

/* The figures a transfer leaves for strata_store_info (STRATA_STORE_INFO_XFER_*). */
struct xfer_figures {
	struct ix_oci_stats oci;
	struct ix_registry_wire wire;
	struct ix_ws_xfer ws;
	struct ix_lazy_stats lazy;
	struct ix_ws_prefetch_stats pre;
};

#define XF(name) st->xfer.v[STRATA_STORE_INFO_XFER_##name - STRATA_STORE_INFO_XFER_SNAPSHOTS]
static void xfer_keep(strata_store *st, const struct xfer_figures *f)
{
	pthread_mutex_lock(&st->gc_lock);
	XF(SNAPSHOTS) = f->oci.snapshots;
	XF(BLOBS_MOVED) = f->oci.blobs_moved;
	XF(BLOBS_SKIPPED) = f->oci.blobs_skipped;
	XF(BYTES_MOVED) = f->oci.bytes_moved;
	XF(BYTES_SKIPPED) = f->oci.bytes_skipped;
	XF(BYTES_RESUMED) = f->oci.bytes_resumed;
	XF(BYTES_SHA256) = f->oci.bytes_sha256;
	XF(BYTES_CHUNK_INDEX) = f->oci.bytes_chunks;
	XF(LAYERS_LAZY) = f->oci.layers_lazy;
	XF(LAYERS_COMPLETED) = f->oci.layers_completed;
	XF(BYTES_COMPLETED) = f->lazy.bytes;
	XF(EXISTED) = f->oci.existed;
	XF(WIRE_UP) = f->wire.up;
	XF(WIRE_DOWN) = f->wire.down;
	XF(WIRE_REQUESTS) = f->wire.requests;
	XF(WIRE_MOUNTS) = f->wire.mounts;
	XF(WS_FOUND) = f->ws.found;
	XF(WS_BYTES) = f->ws.bytes;
	XF(WS_REFERRERS_API) = f->ws.api;
	XF(PREFETCH_WS_BYTES) = f->pre.ws_bytes;
	XF(PREFETCH_JOBS) = f->pre.jobs;
	XF(PREFETCH_REQUESTS) = f->pre.requests;
	XF(PREFETCH_BYTES) = f->pre.bytes;
	XF(COMPLETED_REQUESTS) = f->lazy.requests;
	pthread_mutex_unlock(&st->gc_lock);
}
#undef XF

int strata_store_push(strata_store *st, const strata_registry *reg, const char *ref, const char *reference)
{
	struct ix_registry_ref rr;
	struct ix_registry *r;
	struct ix_oci_sink sink;
	struct ix_oci_progress prog;
	const struct ix_oci_progress *progp;
	struct xfer_figures f = { 0 };
	uint8_t sha[ST_SHA256_LEN];
	uint64_t size;
	char why[ST_WHY_LEN] = "", hex[STRATA_ID_LEN + 1];
	st_id id;
	int rc;

	if (!ref)
		return api_fail(-EINVAL, "push: the snapshot reference is NULL");
	pthread_mutex_lock(&st->gc_lock);
	st->xfer.pushed = false;
	pthread_mutex_unlock(&st->gc_lock);
	if ((rc = client_open(st, reg, "push", reference, &rr, &prog, &progp, &r)) < 0)
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
	if (reg) {
		sink.chunk_size = reg->chunk_size;
		sink.whole_configs = reg->whole_configs;
		sink.annotations = (const char *const *)reg->annotations;
	}
	rc = ix_oci_push(st->ix, ref, rr.tag, &sink, progp, &f.oci, sha, &size, why, sizeof(why));
	/* The working-set record, if the snapshot has one, follows it. */
	if (rc == 0) {
		pthread_mutex_lock(&st->gc_lock);
		st_digest_format(sha, st->xfer.digest);
		st->xfer.pushed = true;
		pthread_mutex_unlock(&st->gc_lock);
	}
	if (rc == 0 && st_id_parse(hex, &id) == 0 &&
	    (rc = ix_registry_ws_push(r, st->ix, &id, sha, size, &f.ws, why, sizeof(why))) < 0) {
		ix_registry_wire_get(r, &f.wire);
		ix_registry_close(r);
		xfer_keep(st, &f);
		return api_fail_why(rc, why, "push to %s: the snapshot was pushed, but not its working set: %s", reference,
				    why[0] ? why : st_strerror(rc));
	}
	if (rc == 0)
		ix_registry_origins_record(r);
	ix_registry_wire_get(r, &f.wire);
	ix_registry_close(r);
	xfer_keep(st, &f);
	return rc < 0 ? xfer_fail(rc, "push to", reference, why) : 0;
}

int strata_store_push_digest(strata_store *st, char digest[STRATA_DIGEST_LEN + 1])
{
	pthread_mutex_lock(&st->gc_lock);
	bool pushed = st->xfer.pushed;
	if (pushed)
		memcpy(digest, st->xfer.digest, sizeof(st->xfer.digest));
	pthread_mutex_unlock(&st->gc_lock);
	return pushed ? 0 : api_fail(STRATA_E_NOT_FOUND, "push digest: this store has pushed nothing yet");
}

/* A pull source that remembers the sha256 of the first manifest it
 * fetched (the top snapshot's): the subject its referrers name. */
struct top_catch {
	struct ix_oci_source src;
	struct ix_registry *r;
	bool lazy;
	bool have;
	uint8_t sha[ST_SHA256_LEN];
};

static int top_manifest_get(void *ctx, const char *ref, char **json, size_t *len, char *why, size_t whylen)
{
	struct top_catch *tc = ctx;
	int rc = tc->src.manifest_get(tc->src.ctx, ref, json, len, why, whylen);

	if (rc == 0 && !tc->have) {
		st_sha256_hash(*json, *len, tc->sha);
		tc->have = true;
		/* What the pull asks next, at once: one round trip instead of
		 * one after another (docs/lazy.md). */
		ix_registry_pull_ahead(tc->r, *json, *len, tc->sha, tc->lazy);
	}
	return rc;
}

static int top_blob_get(void *ctx, const struct st_oci_desc *d, uint64_t offset, ix_oci_sink_fn sink, void *sctx,
			char *why, size_t whylen)
{
	struct top_catch *tc = ctx;

	return tc->src.blob_get(tc->src.ctx, d, offset, sink, sctx, why, whylen);
}

static bool top_not_found(int rc)
{
	return rc == IX_EREMOTE_MISSING;
}

/* A line to reg's warning callback: what, and why (or rc's words). */
static void warn(const strata_registry *reg, const char *what, int rc, const char *why)
{
	char line[ST_WHY_LEN * 2 + 128];

	if (!reg->warn)
		return;
	snprintf(line, sizeof(line), "%s: %s", what, why[0] ? why : st_strerror(rc));
	reg->warn(reg->warn_ctx, line);
}

int strata_store_origin(strata_store *st, const char *ref, char *buf, size_t len)
{
	char hex[STRATA_ID_LEN + 1], have[IX_ORIGIN_MAX + 1];
	st_id id;
	int rc;

	_Static_assert(STRATA_ORIGIN_LEN == IX_ORIGIN_MAX, "STRATA_ORIGIN_LEN is the index's");
	if (!buf || !len)
		return api_fail(-EINVAL, "origin: no buffer");
	if ((rc = strata_store_resolve(st, ref, hex)) < 0)
		return rc;
	if (st_id_parse(hex, &id) < 0)
		return api_fail(STRATA_E_BAD_ID, "origin: '%s' resolved to no id", ref);
	if ((rc = ix_snap_origin(st->ix, &id, have, sizeof(have))) == IX_ENOTFOUND)
		return api_fail(rc, "snapshot %s was made or imported here, never pushed or pulled", hex);
	if (rc < 0)
		return api_fail(rc, "origin of %s: %s", hex, st_strerror(rc));
	if (strlen(have) >= len)
		return api_fail(-ERANGE, "origin of %s: %zu bytes do not hold it", hex, len);
	memcpy(buf, have, strlen(have) + 1);
	return 0;
}

/* The lazy-layer client a pull uses with reg's settings: to complete lazy
 * layers (a full pull) or fetch the working set ahead (token_from: the
 * pull's client, whose token it reuses). */
static int pull_lazy_open(strata_store *st, const strata_registry *reg, const struct ix_auth *auth,
			  uint64_t deadline_ns, const struct ix_registry *token_from, struct ix_lazy **out)
{
	struct ix_lazy_opts o = { .cacert = reg->cacert, .certs_d = (const char *const *)reg->certs_d, .cert_dir = reg->cert_dir,
				  .tls_noverify = reg->noverify, .auth = auth, .deadline_ns = deadline_ns,
				  .token_from = token_from };

	return ix_lazy_open(st->ix, &o, out);
}

int strata_store_pull(strata_store *st, const strata_registry *reg, const char *reference, const char *tag,
		      unsigned flags, char id[STRATA_ID_LEN + 1])
{
	static const strata_registry defaults;
	struct ix_registry_ref rr;
	struct ix_registry *r;
	struct ix_oci_source src;
	struct ix_oci_progress prog;
	const struct ix_oci_progress *progp;
	struct ix_lazy *lz = NULL;
	struct xfer_figures f = { 0 };
	char why[ST_WHY_LEN] = "";
	st_id sid;
	int rc;

	if (flags & ~(unsigned)(STRATA_TAG_FORCE | STRATA_PULL_LAZY | STRATA_PULL_PREFETCH | STRATA_PULL_KEEP_PARTIAL))
		return api_fail(-EINVAL, "pull: unknown flags 0x%x", flags);
	if (tag && !st_name_valid(tag))
		return api_fail(ST_EBADNAME, "pull: '%s' is not a valid tag name", tag);
	if (!reg)
		reg = &defaults;
	uint64_t deadline = reg->timeout_s ? ix_registry_now_ns() + (uint64_t)reg->timeout_s * 1000000000u : 0;
	if ((rc = client_open(st, reg, "pull", reference, &rr, &prog, &progp, &r)) < 0)
		return rc;
	struct ix_auth_provider creds;  /* for the lazy clients, alive until they close */
	struct ix_auth fn_auth;
	const struct ix_auth *auth = api_registry_auth(reg, &creds, &fn_auth);
	bool lazy = flags & STRATA_PULL_LAZY;
	/* A full pull completes the store's lazy layers of the same source. */
	if (!lazy && (rc = pull_lazy_open(st, reg, auth, deadline, NULL, &lz)) < 0) {
		ix_registry_close(r);
		return api_fail(rc, "pull of %s: %s", reference, st_strerror(rc));
	}
	ix_registry_source(r, &src);
	src.lazy = lz;
	struct top_catch tc = { .src = src, .r = r, .lazy = lazy };
	struct ix_oci_source wrapped = src;
	wrapped.ctx = &tc;
	wrapped.manifest_get = top_manifest_get;
	wrapped.blob_get = top_blob_get;
	wrapped.not_found = top_not_found;
	unsigned ixf = (flags & STRATA_PULL_KEEP_PARTIAL ? IX_OCI_KEEP_PARTIAL : 0) | (flags & STRATA_TAG_FORCE ? IX_TAG_FORCE : 0) | (lazy ? IX_OCI_LAZY : 0);
	rc = ix_oci_pull(st->ix, &wrapped, rr.digest ? rr.digest : rr.tag, tag, ixf, progp, &f.oci, &sid, why,
			 sizeof(why));
	/* The working-set record listed as a referrer of the snapshot's
	 * manifest: the snapshot is whole without it (best effort). */
	if (rc == 0 && tc.have) {
		char wwhy[ST_WHY_LEN] = "";
		int wrc = ix_registry_ws_pull(r, st->ix, &sid, tc.sha, &f.ws, wwhy, sizeof(wwhy));
		if (wrc < 0)
			warn(reg, "the snapshot's working set was not taken", wrc, wwhy);
	}
	/* A lazy snapshot's working set fetched now, in parallel Range
	 * requests, with the pull's token (best effort too). */
	if (rc == 0 && lazy && (flags & STRATA_PULL_PREFETCH) && f.ws.found) {
		struct ix_lazy *pz = NULL;
		char pwhy[ST_WHY_LEN * 2] = "";
		int prc = pull_lazy_open(st, reg, auth, deadline, r, &pz);
		if (prc == 0)
			prc = ix_ws_prefetch(pz, st->ix, &sid, 0, &f.pre, pwhy, sizeof(pwhy));
		if (prc < 0 && prc != IX_ENOTFOUND)
			warn(reg, "the working set was not fetched ahead", prc, pwhy);
		ix_lazy_close(pz);
	}
	if (rc == 0)
		ix_registry_origins_record(r);
	ix_registry_wire_get(r, &f.wire);
	if (lz)
		ix_lazy_stats_get(lz, &f.lazy);
	ix_lazy_close(lz);
	ix_registry_close(r);
	xfer_keep(st, &f);
	if (rc == IX_EEXIST)
		return api_fail(rc, "pull %s: tag '%s' already names another snapshot (STRATA_TAG_FORCE moves it)",
				reference, tag);
	if (rc < 0)
		return xfer_fail(rc, "pull of", reference, why);
	if (id)
		st_id_format(&sid, id);
	return 0;
}

int strata_store_export_oci(strata_store *st, const strata_registry *reg, const char *dir, const char *const *refs,
			    size_t nrefs)
{
	static const strata_registry defaults;
	struct ix_oci_progress prog = { progress_trampoline, NULL };
	struct xfer_figures f = { 0 };
	char why[ST_WHY_LEN] = "";

	if (!st || !dir || (nrefs && !refs))
		return api_fail(-EINVAL, "export: the %s is NULL", !st ? "store" : !dir ? "directory" : "list of snapshots");
	for (size_t i = 0; i < nrefs; i++)
		if (!refs[i])
			return api_fail(-EINVAL, "export: snapshot %zu of the list is NULL", i);
	if (!reg)
		reg = &defaults;
	prog.ctx = (void *)reg;
	int rc = ix_oci_export_opts(st->ix, nrefs ? refs : NULL, nrefs, dir, reg->whole_configs,
				    reg->progress ? &prog : NULL, &f.oci, why, sizeof(why));
	xfer_keep(st, &f);
	if (rc == -EEXIST)
		return api_fail(rc, "export: %s already exists (export writes a new directory)", dir);
	if (rc < 0)
		return xfer_fail(rc, "export of an OCI layout to", dir, why);
	return 0;
}

/* A lazy layer's log line as reg's warning. */
static void complete_log(void *ctx, const char *msg)
{
	const strata_registry *reg = ctx;

	if (reg->warn)
		reg->warn(reg->warn_ctx, msg);
}

int strata_store_complete(strata_store *st, const strata_registry *reg, const char *ref)
{
	static const strata_registry defaults;
	struct st_manifest *m = NULL;
	struct ix_lazy *lz;
	char why[ST_WHY_LEN * 2] = "";
	st_id id;
	int rc;

	if (!st)
		return api_fail(-EINVAL, "complete: the store is NULL");
	if (!reg)
		reg = &defaults;
	if ((rc = api_store_snap_get(st, "complete", ref, &id, &m)) < 0)
		return rc;
	struct ix_auth_provider creds;  /* alive until lz closes */
	struct ix_auth fn_auth;
	uint64_t deadline = reg->timeout_s ? ix_registry_now_ns() + (uint64_t)reg->timeout_s * 1000000000u : 0;
	struct ix_lazy_opts o = { .cacert = reg->cacert, .certs_d = (const char *const *)reg->certs_d,
				  .cert_dir = reg->cert_dir, .tls_noverify = reg->noverify,
				  .auth = api_registry_auth(reg, &creds, &fn_auth), .deadline_ns = deadline,
				  .log = complete_log, .log_ctx = (void *)reg };
	if ((rc = ix_lazy_open(st->ix, &o, &lz)) < 0) {
		st_manifest_free(m);
		return api_fail(rc, "complete %s: %s", ref, st_strerror(rc));
	}
	for (uint32_t i = 0; i < m->nlayers && rc == 0; i++)
		rc = ix_lazy_complete(lz, &m->layers[i].id, why, sizeof(why));
	ix_lazy_close(lz);
	st_manifest_free(m);
	if (rc < 0)
		return api_fail_why(rc, why, "complete %s: its missing chunks could not be fetched: %s", ref,
				    why[0] ? why : st_strerror(rc));
	return 0;
}
