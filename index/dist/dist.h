/* dist.h: distribution: snapshots as OCI artifacts (push, pull, OCI image layouts), the registry client, lazy layers fetched by HTTP Range, working-set prefetch. */
#ifndef STRATA_INDEX_DIST_DIST_H
#define STRATA_INDEX_DIST_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "index/index.h"

/*
 * index/dist/ is the index's distribution room: every file that talks to
 * a registry or writes an OCI layout, and the fetching half of lazy
 * layers. It builds on the index (index.h) and records what it learns in
 * the index's tables (the sha256 table: index/sha256.c; lazy records and
 * partial files: index/lazy.c).
 */

/* ---- OCI artifacts: the sha256 table (index/sha256.c), push and pull engines (index/dist/oci.c, oci_layout.c) ---- */

struct ix_lazy; /* lazy layers (below) */

/* The chunk size of the chunk indexes a push writes beside each layer
 * (docs/lazy.md has the measurement behind the default). */
#define IX_CHUNK_MIN (4u << 10)
#define IX_CHUNK_MAX (16u << 20)
#define IX_CHUNK_DEFAULT (64u << 10)

/*
 * The sha256 table maps a blob's (or a snapshot config's) XXH3-128 id to
 * its sha256, so each blob is sha256-hashed at most once per store. Entries
 * are facts about bytes, never stale; gc leaves them (48 bytes each).
 * Push and pull record them. ix_sha256_get: the sha256 into sha;
 * IX_ENOTFOUND when not recorded (sha untouched), read errors.
 */
int ix_sha256_get(struct ix *ix, const st_id *id, uint8_t sha[ST_SHA256_LEN]);
/* The longest registry repository ("host/repo") kept as a blob's origin. */
#define IX_ORIGIN_MAX 512
/* Where snapshot snap was last pulled from or pushed to: the registry
 * repository ("host/repo") recorded as the origin of its manifest's blob,
 * else of the first of its layers that has one, into buf (IX_ORIGIN_MAX + 1
 * bytes hold any). IX_ENOTFOUND when none is recorded (a snapshot made or
 * imported here, never pushed or pulled), the errors of ix_snap_get. */
int ix_snap_origin(struct ix *ix, const st_id *snap, char *buf, size_t len);

struct ix_oci_stats {
	uint32_t snapshots;       /* OCI manifests pushed / pulled (the chain) */
	uint32_t blobs_moved;     /* blobs sent or fetched */
	uint32_t blobs_skipped;   /* blobs the other side already had */
	uint64_t bytes_moved;     /* blob bytes sent or fetched (resumed bytes excluded) */
	uint64_t bytes_skipped;
	uint64_t bytes_resumed;   /* pull: bytes of interrupted fetches reused */
	uint64_t bytes_sha256;    /* bytes sha256-hashed for the table (0 when all were known) */
	uint64_t bytes_chunks;    /* chunk indexes sent (push) or fetched (lazy pull) */
	uint32_t layers_lazy;     /* lazy pull: layers recorded without their bytes */
	uint32_t layers_completed; /* full pull: lazy layers of this source completed (ix_oci_source.lazy) */
	bool existed;             /* pull: the top snapshot was already in the store */
};

enum ix_oci_event_kind {
	IX_OCI_BLOB_BEGIN,  /* a blob starts moving: size */
	IX_OCI_BLOB_BYTES,  /* done of size bytes moved so far */
	IX_OCI_BLOB_END,    /* it moved whole and verified */
	IX_OCI_BLOB_SKIP,   /* the other side had it */
	IX_OCI_MANIFEST,    /* a manifest was written / read */
};
/* What a blob is to the snapshot. */
enum ix_oci_blob_kind {
	IX_OCI_LAYER,       /* a strata layer */
	IX_OCI_CONFIG,      /* the strata manifest (the OCI config) */
	IX_OCI_CHUNKS,      /* a layer's chunk index (docs/lazy.md) */
	IX_OCI_MANIFEST_BLOB, /* an OCI manifest (IX_OCI_MANIFEST events) */
};
/* Events come in order per blob: BEGIN, BYTES with done growing (never the
 * same done twice), END; or SKIP alone; one blob at a time. A registry
 * upload's BYTES (ix_registry_opts.prog) do not know index, count or what:
 * they belong to the blob of the last BEGIN. */
struct ix_oci_event {
	enum ix_oci_event_kind kind;
	const uint8_t *sha256;
	uint64_t size, done;
	uint32_t index, count;   /* blob index and blobs in this transfer */
	enum ix_oci_blob_kind what;
};
struct ix_oci_progress {
	void (*cb)(void *ctx, const struct ix_oci_event *ev);
	void *ctx;
};

/*
 * Where a push goes (an OCI layout directory, a registry): blob_has
 * returns 1 if present, 0 if not, < 0 on error; blob_put sends size bytes
 * read from fd (from offset 0) or, if fd < 0, from buf (returns 0), or
 * gets the blob without them, e.g. by a mount (returns 1); manifest_put sends
 * an OCI manifest under its digest and, if tag is not NULL, the tag.
 * Errors are returned as is (a sink may use its own code range) and may
 * describe themselves in why.
 */
struct ix_oci_sink {
	void *ctx;
	int (*blob_has)(void *ctx, const struct st_oci_desc *d, char *why, size_t whylen);
	int (*blob_put)(void *ctx, const struct st_oci_desc *d, int fd, const void *buf, char *why, size_t whylen);
	int (*manifest_put)(void *ctx, const char *json, size_t len, const uint8_t sha[ST_SHA256_LEN],
			    const char *tag, char *why, size_t whylen);
	/* Chunk size of the chunk indexes written (IX_CHUNK_MIN..IX_CHUNK_MAX; 0: IX_CHUNK_DEFAULT). */
	uint32_t chunk_size;
	/* "KEY=VALUE" annotations of the top manifest (NULL-terminated; may be
	 * NULL), beside org.opencontainers.image.created every manifest has. */
	const char *const *annotations;
	/* Every config a full strata manifest, each artifact complete on its
	 * own (a copy of one tag alone, as skopeo makes, still pulls); else a
	 * snapshot stored as a delta of its parent goes out as that delta
	 * (docs/oci.md). */
	bool whole_configs;
};

/*
 * Where a pull comes from: manifest_get returns an OCI manifest by tag or
 * "sha256:<hex>" (malloc'd, at most ST_OCI_MANIFEST_MAX); blob_get streams
 * d's bytes from offset to sink (which may refuse with an error; blob_get
 * then returns it). A short stream is not an error of blob_get: the engine
 * counts the bytes.
 */
typedef int (*ix_oci_sink_fn)(void *sctx, const void *buf, size_t len);
struct ix_oci_source {
	void *ctx;
	int (*manifest_get)(void *ctx, const char *ref, char **json, size_t *len, char *why, size_t whylen);
	int (*blob_get)(void *ctx, const struct st_oci_desc *d, uint64_t offset, ix_oci_sink_fn sink, void *sctx,
			char *why, size_t whylen);
	/* True if rc from manifest_get means "no such manifest": a parent
	 * (subject) that is absent ends the chain instead of failing it. */
	bool (*not_found)(int rc);
	/* For lazy pulls: the registry repository "host[:port]/repo" later
	 * Range requests go to, and whether it is plain HTTP (NULL: none). */
	const char *origin;
	bool insecure;
	/* For full pulls (may be NULL): the lazy-layer state (ix_lazy_open, below)
	 * through which a layer the store holds lazily, recorded from this
	 * same source (origin, transport, the layer's sha256 and chunk index),
	 * is completed and checked against its id before the commit; without
	 * it such a layer is fetched whole. A lazy record from any other
	 * source is never reused: the layer is fetched whole from this one. */
	struct ix_lazy *lazy;
};

/*
 * Push the snapshot ref (tag, id or prefix) and its ancestors in the store
 * (oldest first, each the next one's "subject") to sink: every blob the
 * sink lacks, then each OCI manifest, the top one under tag (NULL: by
 * digest only). sha256 of each blob comes from the table, else is
 * computed once and recorded (stats->bytes_sha256). digest (may be NULL)
 * gets the top manifest's sha256, *size its length. prog, stats may be NULL.
 * Errors: ix_resolve's, IX_EMISSING (a blob file is gone), the sink's codes
 * (why says which blob or manifest), -ENOMEM. A failed push leaves what the
 * sink received (whole blobs, the manifests sent before the failure): a
 * retry skips them. The store is not changed beyond sha256 table entries
 * (recorded before sending). *stats, when given, is written on failure
 * too (what moved before it); digest and *size only on success.
 */
int ix_oci_push(struct ix *ix, const char *ref, const char *tag, const struct ix_oci_sink *sink,
		const struct ix_oci_progress *prog, struct ix_oci_stats *stats, uint8_t digest[ST_SHA256_LEN],
		uint64_t *size, char *why, size_t whylen);

enum {
	IX_OCI_KEEP_PARTIAL = 1u << 8,  /* pull: keep verified blobs and partial fetches of a failed pull, to resume */
	IX_OCI_LAZY = 1u << 9,          /* pull: record layers the store lacks as lazy (below), fetch none */
};
/*
 * Pull the OCI manifest ref from src, and the chain of its subjects until
 * a snapshot the store holds: each config must be a canonical strata
 * manifest matching its OCI manifest, each layer the store lacks is
 * fetched once, verified for sha256 and XXH3-128 in one streaming pass
 * (st_blob_writer_resume, so an interrupted fetch continues), then the
 * snapshots are committed oldest first, the top one with tag (flags:
 * IX_TAG_FORCE). Nothing half-fetched is ever published: a blob is
 * published only whole and verified, a snapshot only with all its layers.
 * One link is held in memory at a time (each verified config is staged
 * in the store's tmp/; a chain is at most 4096 links and 1 GiB of
 * manifests, else ST_ELAYOUT). A layer the store holds lazily counts as
 * there only if its record came from src itself (same origin, transport,
 * layer sha256 and chunk index; ix_oci_source.lazy completes it before
 * the commit on a full pull); from any other source it is fetched whole
 * and checked, also for a top snapshot the store already holds.
 * Nothing is committed before the whole chain is here; the chain is then
 * committed in transactions of at most 4 MiB of manifests (one for any
 * ordinary chain): on failure no snapshot is committed, except, for a
 * longer chain failing between its transactions, older links (complete,
 * untagged; a retry resumes above them). Without IX_OCI_KEEP_PARTIAL the
 * blobs this pull added are removed, with it they stay for a retry
 * (unreferenced: gc frees them after its grace period). IX_EDEADLINE
 * (the registry client's, below) when src's deadline passes.
 * Errors: ST_EFORMAT (not a strata snapshot, bad config), ST_ECORRUPT
 * (bytes do not match), ST_ELAYOUT, IX_EEXIST (tag names another
 * snapshot), ST_EBADNAME, the source's codes, the write errors; why says
 * which. Lazy records (IX_OCI_LAZY) are committed in the chain's
 * transaction, or not at all (their chunk files are removed); sha256
 * table entries of verified blobs are recorded just before it (facts about
 * bytes, kept on failure). *stats, when given, is written on failure too
 * (what moved before it); *out_id only on success.
 */
int ix_oci_pull(struct ix *ix, const struct ix_oci_source *src, const char *ref, const char *tag,
		unsigned flags, const struct ix_oci_progress *prog, struct ix_oci_stats *stats, st_id *out_id,
		char *why, size_t whylen);

/* True if dir holds an OCI image layout (an oci-layout file; false on
 * any error). */
bool ix_oci_is_layout(const char *dir);
/*
 * Write an OCI image layout at dir (must not exist; built beside it and
 * renamed into place): each of refs (NULL/0: every tagged snapshot) with
 * its ancestors, index.json naming each ref that is a tag (or each tag).
 * Errors: -EEXIST, ix_resolve's, IX_EMISSING, -ENOSPC, -EIO, -ENOMEM; why
 * says which. On failure the directory built beside dir is removed: dir
 * does not appear.
 */
int ix_oci_export(struct ix *ix, const char *const *refs, size_t nrefs, const char *dir,
		  const struct ix_oci_progress *prog, struct ix_oci_stats *stats, char *why, size_t whylen);
/* ix_oci_export with whole_configs (struct ix_oci_sink's): every config a
 * full manifest instead of the delta a snapshot may be stored as. */
int ix_oci_export_opts(struct ix *ix, const char *const *refs, size_t nrefs, const char *dir, bool whole_configs,
		       const struct ix_oci_progress *prog, struct ix_oci_stats *stats, char *why, size_t whylen);
/*
 * Import every manifest index.json of the OCI layout at dir lists (each a
 * strata snapshot, else ST_EFORMAT), tagged with its ref name when it is
 * a valid tag, or with tag (only when the layout lists one manifest,
 * else -EINVAL). *out_id gets the last one's id. Errors as ix_oci_pull's
 * (why says which manifest); each manifest is one pull: those imported
 * before a failed one stay imported (and *out_id holds the last of them,
 * if any), the failed one's blobs are removed again; *stats only on success.
 */
int ix_oci_import(struct ix *ix, const char *dir, const char *tag, unsigned flags,
		  const struct ix_oci_progress *prog, struct ix_oci_stats *stats, st_id *out_id, char *why,
		  size_t whylen);

/* ---- registry credentials (index/dist/auth.c) ---- */

/*
 * The one way credentials reach a registry client: a provider, handed as
 * a struct ix_auth to everything that opens one (ix_registry_opts.auth,
 * ix_lazy_opts.auth, fs_config.auth). get is asked for a registry's
 * "host[:port]" (docker's server name) when a client for it is opened and
 * answers 0 with *user and *pass (malloc'd, the caller's), or both NULL:
 * nothing for that host, requests go anonymously; or a negative code with
 * why (may be NULL) saying what failed: -ENOENT when a file it was told
 * must exist does not, IX_EAUTH (a helper failed or gave no usable
 * answer), ST_EFORMAT or -errno (an auth file that cannot be read),
 * -ENOMEM. It may be called from any thread, one call at a time per
 * provider unless the provider says otherwise (the ones below may be
 * called at once from several).
 */
struct ix_auth {
	int (*get)(void *ctx, const char *host, char **user, char **pass, char *why, size_t whylen);
	void *ctx;
};

/*
 * strata's providers, in one struct (its strings and arrays must outlive
 * every use of p->auth, and p is not copied: p->auth.ctx is p):
 * - ix_auth_creds: user and pass for every registry (both NULL: none).
 * - ix_auth_files: the auth files files[0..n) (containers auth.json,
 *   docker config.json), read at each ask: with explicit_file, files[0]
 *   alone, which must exist (-ENOENT, why "the auth file ... does not
 *   exist"); else the first that has anything for the host
 *   (ix_registry_auth_lookup's order: credHelpers, auths, credsStore),
 *   missing files skipped. A helper the file names runs as
 *   docker-credential-NAME get (found on the process's PATH, run with the
 *   environment envp, NULL: an empty one) with the host on its stdin; its
 *   answer is parsed with ix_registry_helper_parse; "credentials not
 *   found" from it is nothing for that host. SIGPIPE is blocked for the
 *   calling thread while the host is written (no handler is installed).
 * The library reads no environment: which files, and in which order, is
 * the caller's (docs/oci.md lists the CLI's).
 */
struct ix_auth_provider {
	struct ix_auth auth;       /* set by the init functions: hand on &p->auth */
	const char *user, *pass;
	const char *const *files;
	size_t nfiles;
	bool explicit_file;
	char *const *envp;
};
void ix_auth_creds(struct ix_auth_provider *p, const char *user, const char *pass);
void ix_auth_files(struct ix_auth_provider *p, const char *const *files, size_t n, bool explicit_file,
		   char *const *envp);

/* ---- the registry client (index/dist/registry.c, registry_ref.c, registry_ws.c) ---- */

/*
 * One struct ix_registry talks to one repository of one registry over
 * one reused HTTP connection (libcurl), from one thread at a time. It
 * prints nothing and reads no environment variable: credentials (a
 * struct ix_auth provider), the CA file and plain HTTP are the caller's
 * choices (struct ix_registry_opts).
 * ix_registry_global_init must run once per process before any other call
 * (libcurl's global init is not thread-safe).
 *
 * Caveats: threads: one struct ix_registry per thread at a time, any
 * number in a process after ix_registry_global_init. Fork: do not use a
 * registry handle in a forked child (its connection is shared with the
 * parent); open a new one. Signals: libcurl is told not to use any
 * (CURLOPT_NOSIGNAL); SIGPIPE on a dropped connection is suppressed by
 * libcurl where the platform allows, else the caller ignores SIGPIPE.
 * Caches: one HTTP connection and the last bearer token per handle, freed
 * by ix_registry_close. Lifetimes: ref is copied at open; the strings opts
 * points to (cacert, cert_dir, certs_d) must stay valid until
 * ix_registry_close. The certificate directory is read and the
 * credentials asked for (opts->auth) at open.
 *
 * Authentication follows the registry's WWW-Authenticate answer: Basic
 * sends the credentials; Bearer fetches a token from the named realm (with
 * the credentials as Basic when there are any, anonymously otherwise) for
 * the scope asked, then retries once.
 */

/* Errors: -errno, the index's and store's codes, or these (the index's range, -1150..-1159). */
enum {
	IX_EREF = -1150,       /* not a REGISTRY/REPO[:TAG|@sha256:...] reference */
	IX_ENET = -1151,       /* cannot connect, or the connection dropped */
	IX_ETLS = -1152,       /* TLS handshake or certificate check failed */
	IX_EAUTH = -1153,      /* credentials missing, rejected, or access denied */
	IX_EREMOTE_MISSING = -1154,  /* the manifest or blob is not in the repository */
	IX_EHTTP = -1155,      /* any other unexpected HTTP answer (why has the status) */
	IX_EDEADLINE = -1156,  /* the caller's deadline (ix_registry_opts.deadline_ns) passed */
};
/* st_strerror under the registry's name. */
const char *ix_registry_strerror(int err);

/* A parsed reference. Strings point into buf (the default tag "latest" is
 * static storage): a copy of the struct made after parsing points into the
 * original's buf. */
struct ix_registry_ref {
	char buf[1024];
	const char *host;   /* "host[:port]" */
	const char *repo;   /* "name/space" */
	const char *tag;    /* or NULL */
	const char *digest; /* "sha256:<hex>" or NULL */
};
/* host must be HOST[:PORT] (ix_registry_host_valid); repo
 * components lowercase [a-z0-9] separated by '.', '_', '__', '-'; tag the
 * name rule. Neither tag nor digest: tag = "latest". NULL, 1024 bytes or
 * more, or anything else -> IX_EREF with *out untouched. Nothing is
 * allocated. */
int ix_registry_ref_parse(const char *s, struct ix_registry_ref *out);
/* True if h is a registry host: a DNS name or IPv4 address (labels of
 * letters, digits and inner '-') or a [bracketed] IPv6 address, then
 * ":PORT" with PORT 1..65535; without a port the name must have a '.' or
 * be "localhost" (so "team/app" is not read as host "team"). */
bool ix_registry_host_valid(const char *h);

struct ix_registry_opts {
	bool insecure;           /* plain HTTP (for a loopback registry) instead of HTTPS */
	bool tls_noverify;       /* HTTPS without checking the certificate or its name */
	const char *cacert;      /* CA bundle file for TLS, or NULL for the system's */
	/* A directory of certificates for this registry, as docker's and the
	 * containers tools' certs.d/HOST[:PORT]/: every *.crt is a CA trusted
	 * beside cacert (or the system's), a NAME.cert with its NAME.key the
	 * client certificate. NULL: the first ROOT/HOST[:PORT] directory of
	 * the NULL-terminated list certs_d that exists (certs_d NULL: none). A
	 * .cert without its .key, or a directory that cannot be read, fails
	 * the first request with IX_ETLS saying which. */
	const char *cert_dir;
	const char *const *certs_d;
	/* Credentials: asked once, at open, for the registry's host (its
	 * answer is copied; a failure fails the open with its code). NULL:
	 * anonymous. */
	const struct ix_auth *auth;
	const char *mount_from;  /* push: try a cross-repository mount from this repository */
	struct ix *ix;           /* for origins (ix_origin_get): where else on this registry a blob
				  * is, to mount it; NULL: only mount_from */
	const struct ix_oci_progress *prog; /* upload byte progress, or NULL */
	/* Give up connecting after connect_s, and on a transfer that moves
	 * less than low_speed bytes a second for stall_s seconds (0: 30, 60
	 * and IX_REGISTRY_LOW_SPEED): a registry that trickles bytes ends
	 * with IX_ENET saying so. */
	unsigned connect_s, stall_s, low_speed;
	/* CLOCK_MONOTONIC nanoseconds after which no request starts and any
	 * request under way is ended (IX_EDEADLINE); 0: none. One deadline
	 * for everything done through the handle: a pull's overall bound. */
	uint64_t deadline_ns;
};
#define IX_REGISTRY_LOW_SPEED 1024u
/* CLOCK_MONOTONIC now, in nanoseconds (for deadline_ns). */
uint64_t ix_registry_now_ns(void);

/* Bytes on the wire (headers and bodies, both ways) and requests made. */
struct ix_registry_wire {
	uint64_t up, down, requests;
	uint32_t mounts;         /* blobs the registry mounted from mount_from */
};

struct ix_registry;
/* libcurl's global init: once per process, before any other thread runs
 * libcurl. -ENOMEM if it fails (then no registry call may be made). */
int ix_registry_global_init(void);
/* In a child of fork() that closed the parent's descriptors: forget the
 * connection cache the parent's handles share (its sockets are the
 * parent's), so the next handle starts a new one. Call before any other
 * registry call in that child. */
void ix_registry_after_fork(void);
/* Open a client for ref's host and repository into *out (nothing is sent
 * yet; ref is copied). opts (NULL: plain defaults) is copied; its strings
 * must outlive the client. -ENOMEM: *out untouched. */
int ix_registry_open(const struct ix_registry_ref *ref, const struct ix_registry_opts *opts, struct ix_registry **out);
/* Close the connection and free; accepts NULL. The sink and source views
 * of r die with it. */
void ix_registry_close(struct ix_registry *r);
/* The push sink and pull source views of r (valid while r is open; one
 * thread at a time, like r). Never fail. */
void ix_registry_sink(struct ix_registry *r, struct ix_oci_sink *out);
void ix_registry_source(struct ix_registry *r, struct ix_oci_source *out);
/* Stream len bytes of blob sha from offset off to sink (HTTP Range; a
 * registry that answers with the whole blob is read up to the range and
 * cut). A short answer is not an error here: the sink counts. 404 ->
 * IX_EREMOTE_MISSING; other answers IX_EHTTP; transport IX_ENET; IX_ETLS,
 * IX_EAUTH; the sink's own error if it refuses. On failure the sink may
 * already have received some bytes (it counts them). */
int ix_registry_blob_range(struct ix_registry *r, const uint8_t sha[ST_SHA256_LEN], uint64_t off, uint64_t len,
			   ix_oci_sink_fn sink, void *sctx, char *why, size_t whylen);
/* Give dst the bearer token src holds, if src has one and speaks to the
 * same repository over the same transport (a token's scope is its
 * repository): a second handle on a registry then starts authenticated
 * instead of asking the token service again, one round trip or two fewer.
 * dst keeps its own copy (src may close first). 0, or -ENOMEM. */
int ix_registry_token_share(struct ix_registry *dst, const struct ix_registry *src);
/* What a manifest GET accepts: the other types are asked for too, so that
 * what is there is refused with a clear reason rather than a 404. */
#define IX_REGISTRY_MANIFEST_ACCEPT                                                                              \
	ST_OCI_MANIFEST_TYPE ", " ST_OCI_INDEX_TYPE ", application/vnd.docker.distribution.manifest.v2+json"     \
			     ", application/vnd.docker.distribution.manifest.list.v2+json"
/*
 * Requests a caller will make next, fetched now and at once, each on its
 * own connection: the first later GET of the same URL (relative to
 * /v2/REPO/) and Accept is answered from what came, through the same
 * checks as ever (a pull verifies every digest as it reads). max: the most
 * bytes kept of an answer (a longer one is asked again later; one whose
 * max is over ST_OCI_MANIFEST_MAX is not fetched ahead). Only 200 and 404
 * answers are kept; anything else goes again when asked. Best effort: 0
 * or -ENOMEM.
 */
struct ix_registry_ahead_req {
	char path[256];
	const char *accept;
	size_t max;
};
int ix_registry_ahead(struct ix_registry *r, const struct ix_registry_ahead_req *v, size_t n);
/* What a pull of the OCI manifest json (its bytes, sha256 sha) asks next,
 * fetched ahead (ix_registry_ahead): its config, its chunk indexes (lazy),
 * and the working-set record's listing (the referrers API and the tag
 * schema's index), so those round trips overlap. Best effort. */
int ix_registry_pull_ahead(struct ix_registry *r, const char *json, size_t len, const uint8_t sha[ST_SHA256_LEN],
			   bool lazy);
/* The bytes and requests r has moved so far into *out. Never fails. */
void ix_registry_wire_get(const struct ix_registry *r, struct ix_registry_wire *out);
/* After a successful push or pull: record this repository as the origin
 * of every blob r saw it hold (ix_origin_put on opts->ix; 0 without one,
 * or when "host/repo" is longer than IX_ORIGIN_MAX). The index's write
 * errors: nothing recorded (one transaction). */
int ix_registry_origins_record(struct ix_registry *r);

/*
 * Referrers (OCI distribution 1.1): PUT a manifest (by digest if ref is
 * NULL, else under tag ref) with its media type; *subject_listed (may be
 * NULL) says whether the registry answered OCI-Subject, i.e. lists the
 * manifest's subject's referrers itself. referrers_get: GET the referrers
 * API's image index for subject, filtered by artifact_type (*json
 * malloc'd); IX_EREMOTE_MISSING when the registry has no such API (then
 * the tag schema's "sha256-<hex>" tag holds the index).
 * Both: IX_ENET, IX_ETLS, IX_EAUTH, IX_EHTTP (why has the status), -ENOMEM;
 * the out-parameters are written only on success. A put is one request:
 * the registry has the manifest or not.
 */
int ix_registry_manifest_put_typed(struct ix_registry *r, const char *ref, const char *media_type, const char *json,
				   size_t len, bool *subject_listed, char *why, size_t whylen);
int ix_registry_referrers_get(struct ix_registry *r, const uint8_t subject[ST_SHA256_LEN], const char *artifact_type,
			      char **json, size_t *len, char *why, size_t whylen);

/*
 * A snapshot's working-set record through the registry (docs/workingset.md):
 * an OCI image manifest of artifactType ST_WS_MEDIA_TYPE whose subject is
 * the snapshot's manifest (subject: its sha256 and size), with the empty
 * config and one layer, the record.
 * push: sends it if snap has a record (x->found), then, unless the
 * registry answered OCI-Subject (x->api), puts it in the tag schema's
 * index "sha256-<subject hex>" (replacing an earlier record's entry).
 * pull: asks the referrers API, else the tag schema's index; if a record
 * is listed, fetches it (sha256 and strata id checked), and links it to
 * snap with ix_ws_put (which checks it belongs to the snapshot). No
 * record listed: 0 with x->found false. x->bytes: the record's bytes
 * moved; x->manifest: the artifact manifest's sha256.
 * Errors: the registry's codes (above), ST_ECORRUPT (pulled bytes that do
 * not match their digest or id), ST_EFORMAT, ix_ws_put's (pull: a record
 * that does not belong to snap), the index's read errors; why says which.
 * A failed pull links nothing (x->found false; x->api and x->manifest may
 * hold what was learnt). A push that fails after the artifact is sent
 * leaves it in the registry, unlisted in the tag schema's index: a retry
 * skips the blobs the registry has, puts the manifest again and lists it.
 */
struct ix_ws_xfer {
	bool found, api;
	uint64_t bytes;
	uint8_t manifest[ST_SHA256_LEN];
};
int ix_registry_ws_push(struct ix_registry *r, struct ix *ix, const st_id *snap, const uint8_t subject[ST_SHA256_LEN],
			uint64_t subject_size, struct ix_ws_xfer *x, char *why, size_t whylen);
int ix_registry_ws_pull(struct ix_registry *r, struct ix *ix, const st_id *snap, const uint8_t subject[ST_SHA256_LEN],
			struct ix_ws_xfer *x, char *why, size_t whylen);

/*
 * Credentials for host from a docker config.json / containers auth.json
 * file, in docker's order: a "credHelpers" entry for host names a
 * helper; else the "auths" entry for host (the key also with an https://
 * prefix or a path after it), its "auth" (base64 user:password) or
 * "username"/"password"; else "credsStore" names a helper.
 * 0: *user, *pass (malloc'd); 2: *helper (malloc'd), the NAME of the
 * docker-credential-NAME program to ask (letters, digits, '-', '_', '.';
 * never a path); 1 when the file has nothing for host; -ENOENT when the
 * file does not exist (other -errno if it cannot be read); ST_EFORMAT
 * (why) when it is not such a file; -ENOMEM. The out-parameters are
 * written only with their code. It runs no helper: ix_auth_files does
 * (above), then parses its answer with ix_registry_helper_parse.
 */
int ix_registry_auth_lookup(const char *path, const char *host, char **user, char **pass, char **helper, char *why,
			    size_t whylen);
/* A credential helper's answer to "get" (JSON: Username, Secret) into
 * *user, *pass (malloc'd). ST_EFORMAT (why) for anything else, and for an
 * identity token (Username "<token>"); -ENOMEM. Written only on 0. */
int ix_registry_helper_parse(const char *out, size_t len, char **user, char **pass, char *why, size_t whylen);

/* ---- lazy layers: fetching their chunks (index/dist/lazy_fetch.c) ---- */

/*
 * Caveats (docs/lazy.md):
 * - A struct ix_lazy serves one open index from any number of threads:
 *   fetches of different chunks run in parallel, a chunk wanted by several
 *   threads at once is fetched by one while the others wait for it.
 *   Processes sharing a store see each other's chunks (the map file is
 *   read again before a chunk is fetched), but two of them asking for the
 *   same chunk at the same moment may both fetch it (the bytes are the
 *   same, verified, and written to the same place).
 * - It keeps, per lazy layer it has touched, the chunk index (16 bytes per
 *   chunk), a present map (1 byte per chunk) and two open files, until
 *   ix_lazy_close; and one idle HTTP client per registry repository per
 *   thread that fetched.
 * - It reads no environment variable and prints nothing: credentials come
 *   from the caller's provider (struct ix_auth), messages (which chunk, which registry) go
 *   to its log callback and to the why buffers.
 * - A fetch blocks its thread for at most the bounded retries with backoff
 *   (ix_lazy_opts), then fails: a lazy layer never hangs a reader.
 */

/*
 * A lazy layer is a snapshot's layer whose blob file is not (yet) in the
 * store: `strata pull --lazy` records the snapshot with, for each layer the
 * store lacks, a record in the index's `lazy` table (its size, sha256,
 * chunk index and the registry repository it comes from) and two files:
 * STORE/lazy/<id>.part, sparse and full-sized, and STORE/lazy/<id>.map,
 * one byte per chunk, 1 once the chunk's bytes are in .part, verified and
 * (under `sync full`) on disk. When every chunk is there, the file is
 * hashed whole and published as the layer's blob (ix_lazy_complete): from
 * then on it is an ordinary layer.
 */

/* Errors (the index's range, -1160..-1169). */
enum {
	IX_ELAZY_BADCHUNK = -1160,  /* a fetched chunk does not match the chunk index */
	IX_ELAZY_OFFLINE = -1161,   /* the registry could not be reached within the retries */
	IX_ELAZY_NOINDEX = -1162,   /* the artifact carries no chunk index (pushed by an older strata) */
};
/* st_strerror under the lazy layers' name. */
const char *ix_lazy_strerror(int err);

struct ix_lazy;

struct ix_lazy_opts {
	const char *cacert;     /* CA bundle for HTTPS registries, or NULL */
	/* Roots of per-registry certificate directories, one directory for
	 * every registry instead, no certificate checks (ix_registry_opts). */
	const char *const *certs_d;
	const char *cert_dir;
	bool tls_noverify;
	/* Credentials, asked for a registry's host when a client for it is
	 * first opened (a failure is logged, then the client goes anonymous);
	 * NULL: anonymous. It must outlive the handle. */
	const struct ix_auth *auth;
	/* Attempts per Range request before a read fails (0: IX_LAZY_ATTEMPTS),
	 * waiting backoff_ms, then twice that... between them (0: IX_LAZY_BACKOFF_MS). */
	unsigned attempts, backoff_ms;
	/* Longest Range request made when merging adjacent chunks (0: IX_LAZY_SPAN). */
	uint64_t span_max;
	/* A Range request moving less than low_speed bytes a second for 10 s
	 * fails (0: IX_REGISTRY_LOW_SPEED), and is retried as a network error;
	 * none starts after deadline_ns (CLOCK_MONOTONIC ns; 0: none), one
	 * under way then ends (IX_EDEADLINE, not retried): a pull's bound. */
	unsigned low_speed;
	uint64_t deadline_ns;
	/* One line per refused chunk, failed fetch, failed credential lookup or
	 * completed layer (may be NULL). */
	void (*log)(void *ctx, const char *msg);
	void *log_ctx;
	/* A handle on the registry the lazy layers come from, whose bearer
	 * token clients for its repository start with (ix_registry_token_share):
	 * a pull's own, so that the working set's Range requests that follow it
	 * do not each ask the token service first. May be NULL; read only while
	 * clients are opened, from any thread: it must outlive the handle and
	 * not be used meanwhile. */
	const struct ix_registry *token_from;
};
#define IX_LAZY_ATTEMPTS 4
#define IX_LAZY_BACKOFF_MS 100
#define IX_LAZY_SPAN (8u << 20)

/* Open over ix (which must outlive it); opts is copied, its strings must
 * outlive the handle. */
int ix_lazy_open(struct ix *ix, const struct ix_lazy_opts *opts, struct ix_lazy **out);
/* Accepts NULL. No fetch may be running. */
void ix_lazy_close(struct ix_lazy *lz);

struct ix_lazy_info {
	uint64_t size;          /* the layer's bytes */
	uint32_t chunk_size;
	uint64_t chunks;        /* chunks in the layer */
	uint64_t present;       /* chunks in the store now */
	char origin[IX_ORIGIN_MAX + 1]; /* "host[:port]/repo" */
};
/* 1 and *out if layer is lazy (recorded, not yet published), 0 if not
 * (an ordinary blob, or unknown). Any thread. */
int ix_lazy_layer_info(struct ix_lazy *lz, const st_id *layer, struct ix_lazy_info *out);
/* Which chunks are present: map[i] = 1 or 0, for i < n (n = info.chunks). */
int ix_lazy_present(struct ix_lazy *lz, const st_id *layer, uint8_t *map, uint64_t n);
/* The same for chunks [first, first + n) (those past the last read as
 * absent), looking again in the .map for those absent here: another
 * process sharing the store (a prefetch) may have brought them in. */
int ix_lazy_present_at(struct ix_lazy *lz, const st_id *layer, uint64_t first, uint8_t *map, uint64_t n);

/* A byte range of a layer. */
struct ix_lazy_range {
	uint64_t off, len;
};
/*
 * Make bytes [off, off + len) of each of ranges present in the store: the
 * chunks they touch that are missing are fetched, runs of adjacent missing
 * chunks merged into one Range request (up to span_max bytes), each chunk
 * verified against the chunk index before it is written and marked
 * present. Chunks another thread is fetching are waited for. Ranges may
 * overlap and come in any order; past the end they are cut. 0 when all are
 * present; IX_ELAZY_BADCHUNK (nothing of that chunk is kept; why names the
 * chunk and the registry), IX_ELAZY_OFFLINE, or -errno otherwise. A layer
 * that is not lazy -> 0 (its blob holds every byte).
 */
int ix_lazy_fetch(struct ix_lazy *lz, const st_id *layer, const struct ix_lazy_range *ranges, size_t n, char *why,
		  size_t whylen);
/* A read-only fd of the layer's partial file (bytes of present chunks are
 * final; others read as zero). -ENOENT if the layer is not lazy. */
int ix_lazy_fd(struct ix_lazy *lz, const st_id *layer, int *fd);
/*
 * Fetch every missing chunk, hash the whole file against the layer's id,
 * publish it as the layer's blob and drop the lazy record and files. 0
 * also if the layer was not lazy. Readers holding the partial file keep
 * reading the same bytes.
 */
int ix_lazy_complete(struct ix_lazy *lz, const st_id *layer, char *why, size_t whylen);

struct ix_lazy_stats {
	uint64_t requests;      /* Range requests made (retries included) */
	uint64_t bytes;         /* chunk bytes received */
	uint64_t chunks;        /* chunks verified and stored */
	uint64_t waits;         /* times a thread waited for another's fetch of a chunk */
	uint64_t bad_chunks;    /* chunks refused */
	uint64_t retries;       /* requests repeated after a network error */
};
void ix_lazy_stats_get(struct ix_lazy *lz, struct ix_lazy_stats *out);

/*
 * Prefetch (index/dist/prefetch.c; docs/workingset.md): make snapshot snap's
 * working set present in its lazy layers before anything
 * reads them: the record's runs become byte ranges of each lazy layer,
 * cut where chunks are not adjacent, spread over up to `parallel` threads
 * (0: IX_WS_PREFETCH_PARALLEL), each fetching its ranges with
 * ix_lazy_fetch (adjacent chunks merged into one Range request), so the
 * requests travel at once. IX_ENOTFOUND: no record; else 0 or the first
 * fetch error (why says which chunk, which registry); -ENOMEM. stats may be
 * NULL. lz is the index's lazy-layer state (ix_lazy_open). Chunks fetched
 * before a failure stay in the store (they are verified; a later read or
 * prefetch does not fetch them again).
 */
#define IX_WS_PREFETCH_PARALLEL 8
#define IX_WS_PREFETCH_MAX 32
struct ix_ws_prefetch_stats {
	uint64_t ws_bytes;  /* the record's pages in lazy layers, in bytes */
	uint64_t jobs;      /* groups of ranges fetched in parallel */
	uint64_t requests;  /* Range requests made */
	uint64_t bytes;     /* chunk bytes received */
};
int ix_ws_prefetch(struct ix_lazy *lz, struct ix *ix, const st_id *snap, unsigned parallel,
		   struct ix_ws_prefetch_stats *stats, char *why, size_t whylen);

#endif
