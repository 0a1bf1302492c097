/* api_int.h: what the files of libstrata's public API (mount/api/) share: the handles' insides and the error helpers. */
#ifndef STRATA_MOUNT_API_INT_H
#define STRATA_MOUNT_API_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "fs/fs.h"
#include "index/dist/dist.h"
#include "index/index.h"
#include "mount/api/strata.h"
#include "vmm/vmm.h"

/* A host function as registered: what the vmm's callback finds in its ctx.
 * Entries are never moved or freed while a sandbox may call them. */
struct api_fn {
	char name[VMM_NAME_MAX + 1];
	struct vmm_signature sig;
	strata_host_fn fn;
	void *ctx;
};
/* A table of host functions by name (the newest entry of a name wins). */
struct api_fns {
	struct api_fn **v;
	size_t n, cap;
};

struct strata_host {
	struct vmm_host *vh;
	pthread_mutex_t lock;    /* the settings and fns below */
	int backend;
	uint64_t heap, stack, input, output, timeout_ns;
	bool debug;              /* strata_host_set_debug */
	strata_log_fn log;
	void *log_ctx;
	struct api_fns fns;      /* every entry ever registered (replaced ones stay for older sandboxes) */
	unsigned live;           /* sandboxes and pools made with it and not freed */
};

/* A store snapshot's manifest and layer opener, shared by the sandboxes
 * opened from it and their clones (the last one frees it). */
struct api_src {
	_Atomic unsigned refs;
	struct st_manifest *m;
	vmm_layer_open_fn open;
	void *ctx;
};

struct strata_sandbox {
	strata_host *host;
	struct vmm_sandbox *vs;
	struct api_fns own;      /* registered on this sandbox (kept for a pool's replacement) */
	strata_log_fn log;
	void *log_ctx;
	strata_pool *pool;       /* the pool it belongs to, or NULL */
	bool out;                /* a pool's: taken by strata_pool_get */
	/* What it was opened from (strata_sandbox_info). */
	uint32_t layers;
	uint64_t layer_pages;
	bool on_mount, lazy;
	uint32_t direct_layers;
	/* How to make another sandbox of what it was opened from
	 * (strata_sandbox_clone): the manifest and its layer opener (from a
	 * store), or the directory and its flags. */
	struct api_src *src;
	char *src_dir;
	unsigned src_dir_flags;
	/* Its last working-set record. */
	uint64_t ws_pages, ws_runs, ws_layers, ws_bytes, ws_mapped;
};

struct strata_registry {
	bool plain_http, noverify;
	char *cacert, *user, *pass;
	unsigned timeout_s;
	strata_credentials_fn creds;  /* strata_registry_set_credentials_fn, or NULL: user and pass */
	void *creds_ctx;
	char **certs_d;               /* NULL-terminated copies, or NULL */
	char *mount_from;             /* strata_registry_set_mount_from's copy, or NULL */
	strata_progress_fn progress;  /* strata_registry_set_progress, or NULL */
	void *progress_ctx;
	char *cert_dir;               /* strata_registry_set_cert_dir's copy, or NULL */
	uint32_t chunk_size;          /* 0: the default */
	bool whole_configs;
	char **annotations;           /* NULL-terminated copies, or NULL */
	strata_warning_fn warn;       /* strata_registry_set_warning_fn, or NULL */
	void *warn_ctx;
};

/* The figures of a store's last push or pull (strata_store_info's
 * STRATA_STORE_INFO_XFER_*, in their order) and the last pushed digest. */
struct api_xfer {
	uint64_t v[STRATA_STORE_INFO_XFER_COMPLETED_REQUESTS - STRATA_STORE_INFO_XFER_SNAPSHOTS + 1];
	bool pushed;
	char digest[STRATA_DIGEST_LEN + 1];
};
/* The ix_auth reg's credentials are asked through: its callback's, or
 * creds (initialised here) with its user and pass. Lives as long as reg
 * (or creds). */
const struct ix_auth *api_registry_auth(const strata_registry *reg, struct ix_auth_provider *creds,
					struct ix_auth *fn_auth);
/* Replace *slot with a copy of the NULL-terminated list v (NULL: none). -ENOMEM. */
int api_strv_set(char ***slot, const char *const *v);
void api_strv_free(char **v);

struct strata_store {
	struct st_store *st;
	struct ix *ix;
	pthread_mutex_t gc_lock;      /* gc */
	struct ix_gc_stats gc;        /* the last strata_store_gc's counts */
	struct api_xfer xfer;         /* the last push's or pull's (gc_lock guards it too) */
	uint64_t import[STRATA_STORE_INFO_IMPORT_LAYERS_HEALED - STRATA_STORE_INFO_IMPORT_OCI + 1];
				      /* the last import's figures (gc_lock guards them too) */
	uint64_t check[STRATA_STORE_INFO_CHECK_REMAINING - STRATA_STORE_INFO_CHECK_SNAPSHOTS + 1];
				      /* the last check's figures (gc_lock guards them too) */
	/* Lazy layers (a lazy pull's): mapped from a private mount served by
	 * a helper process (fs/fs.h, fs_private_*), made at the first open of
	 * a lazy snapshot and freed by strata_store_close. */
	pthread_mutex_t lazy_lock;    /* the fields below */
	/* Set once under lazy_lock, after its helper started; read without
	 * it by strata_store_lazy_errmsg (a signal handler's). */
	struct fs_private *_Atomic lazy;
	char *lazy_cacert, *lazy_user, *lazy_pass; /* strata_store_set_registry's copies */
	char **lazy_certs_d;
	strata_registry lazy_reg;     /* its credentials callback, and user and pass borrowed from above */
	struct ix_auth_provider lazy_auth;
	struct ix_auth lazy_fn_auth;
	/* What of its lazy layers is present, for strata_store_snapshot_info
	 * (no fetch: no credentials): opened at the first question about a
	 * store that records a lazy layer, under lazy_lock; then read from any
	 * thread (ix_lazy_layer_info is thread-safe). */
	struct ix_lazy *lazy_read;
};


/* Set the calling thread's message (printf-style; NULL fmt or an empty
 * result: strata_strerror(code)) and return code. */
int api_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* api_fail with strata_errdetail's words too: why (NULL: none). */
int api_fail_why(int code, const char *why, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* api_fail with a vmm_error's message (or the code's words if it has none). */
int api_fail_vmm(int code, const char *what, const struct vmm_error *err);

/* Replace *slot with a copy of s (NULL: none); -ENOMEM with the thread's
 * message set, *slot unchanged. */
int api_str_set(char **slot, const char *s);

/* Parse a signature ("i(ii)") into *out; false if it is not one. */
bool api_sig_parse(const char *sig, struct vmm_signature *out);
/* Add a host function to a table (copying name and sig); 0, -EINVAL or
 * -ENOMEM with the thread's message set. *added gets the entry. */
int api_fns_add(struct api_fns *t, const char *name, const char *sig, strata_host_fn fn, void *ctx,
		struct api_fn **added);
/* Add a copy of *src named name (1..VMM_NAME_MAX bytes, checked by the caller). */
int api_fns_push(struct api_fns *t, const struct api_fn *src, const char *name, struct api_fn **added);
void api_fns_free(struct api_fns *t);
/* Register every function of t (newest of each name) on vs. */
int api_fns_apply(const struct api_fns *t, struct vmm_sandbox *vs);
int api_fn_register(struct vmm_sandbox *vs, struct api_fn *f);

/* A sandbox handle around a new vmm sandbox made with h's settings: make
 * is called with the vmm_config to use (sizes only for ELF sandboxes). */
struct api_make {
	const char *path;                  /* an ELF file, or */
	const void *elf;                   /* ELF bytes, size, or */
	size_t size;
	const struct vmm_snapdir *dir;     /* an open snapshot directory, or */
	const struct st_manifest *m;       /* a manifest with its layer opener */
	vmm_layer_open_fn open;
	void *open_ctx;
	bool lazy;                         /* some layer of m is a lazy one */
};
int api_sandbox_make(strata_host *h, const struct api_make *how, strata_sandbox **out);
/* Resolve ref in st and read its manifest (*m the caller's), and the
 * layer opener to restore it with: the store's blobs, or (some layer a
 * lazy one) the store's private mount, started here. */
int api_store_manifest(strata_store *st, const char *ref, struct st_manifest **m, st_id *id, vmm_layer_open_fn *open,
		       void **open_ctx);
/* strata_store_check, or strata_store_verify's (verify_cb: errors only). */
int api_store_check(strata_store *st, unsigned flags, strata_check_fn cb, strata_problem_fn verify_cb, void *ctx);
/* Resolve ref in a read transaction of its own, with strata_errmsg's
 * words for a failure (STRATA_E_NOT_FOUND, _AMBIGUOUS, the index's). */
int api_store_resolve(strata_store *st, const char *ref, st_id *id);
/* Resolve ref and read its manifest into *m (the caller's); a failure
 * says "WHAT REF: ..." (what: the call's name). */
int api_store_snap_get(strata_store *st, const char *what, const char *ref, st_id *id, struct st_manifest **m);
/* The store's read-only view of its lazy layers (no fetch: no
 * credentials), opened at the first call that finds one recorded, kept
 * until strata_store_close; NULL while it records none or if it cannot
 * be had (nothing shows lazy then). */
struct ix_lazy *api_store_lazy_read(strata_store *st);

#endif
