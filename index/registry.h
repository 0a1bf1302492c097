/* registry.h: a client of the OCI distribution API (a registry), as a push sink and a pull source for index/. */
#ifndef STRATA_INDEX_REGISTRY_H
#define STRATA_INDEX_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "index/index.h"

/*
 * One struct ix_registry talks to one repository of one registry over
 * one reused HTTP connection (libcurl), from one thread at a time. It
 * prints nothing and reads no environment variable: credentials, the CA
 * file and plain HTTP are the caller's choices (struct ix_registry_opts).
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
 * points to (cacert, cert_dir, certs_d, user, pass) must stay valid until
 * ix_registry_close. The certificate directory is read at open.
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
	const char *user, *pass; /* credentials, or NULL */
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
 * written only with their code. The library runs no helper: the caller
 * does (docs/oci.md), then parses its answer with ix_registry_helper_parse.
 */
int ix_registry_auth_lookup(const char *path, const char *host, char **user, char **pass, char **helper, char *why,
			    size_t whylen);
/* A credential helper's answer to "get" (JSON: Username, Secret) into
 * *user, *pass (malloc'd). ST_EFORMAT (why) for anything else, and for an
 * identity token (Username "<token>"); -ENOMEM. Written only on 0. */
int ix_registry_helper_parse(const char *out, size_t len, char **user, char **pass, char *why, size_t whylen);

#endif
