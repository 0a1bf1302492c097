/* dist.h: a client of the OCI distribution API (a registry), as a push sink and a pull source for index/. */
#ifndef STRATA_DIST_DIST_H
#define STRATA_DIST_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "index/index.h"

/*
 * One struct dist_registry talks to one repository of one registry over
 * one reused HTTP connection (libcurl), from one thread at a time. It
 * prints nothing and reads no environment variable: credentials, the CA
 * file and plain HTTP are the caller's choices (struct dist_opts).
 * dist_global_init must run once per process before any other call
 * (libcurl's global init is not thread-safe).
 *
 * Authentication follows the registry's WWW-Authenticate answer: Basic
 * sends the credentials; Bearer fetches a token from the named realm (with
 * the credentials as Basic when there are any, anonymously otherwise) for
 * the scope asked, then retries once.
 */

/* Errors: -errno, the index's and store's codes, or these (-1200..-1299). */
enum {
	DIST_EREF = -1200,       /* not a REGISTRY/REPO[:TAG|@sha256:...] reference */
	DIST_ENET = -1201,       /* cannot connect, or the connection dropped */
	DIST_ETLS = -1202,       /* TLS handshake or certificate check failed */
	DIST_EAUTH = -1203,      /* credentials missing, rejected, or access denied */
	DIST_ENOTFOUND = -1204,  /* the manifest or blob is not in the repository */
	DIST_EHTTP = -1205,      /* any other unexpected HTTP answer (why has the status) */
};
const char *dist_strerror(int err);

/* A parsed reference. Strings point into buf. */
struct dist_ref {
	char buf[1024];
	const char *host;   /* "host[:port]" */
	const char *repo;   /* "name/space" */
	const char *tag;    /* or NULL */
	const char *digest; /* "sha256:<hex>" or NULL */
};
/* host must look like a host (has '.' or ':', or is "localhost"); repo
 * components lowercase [a-z0-9] separated by '.', '_', '__', '-'; tag the
 * name rule. Neither tag nor digest: tag = "latest". -> DIST_EREF. */
int dist_ref_parse(const char *s, struct dist_ref *out);

struct dist_opts {
	bool insecure;           /* plain HTTP (for a loopback registry) instead of HTTPS */
	const char *cacert;      /* CA bundle file for TLS, or NULL for the system's */
	const char *user, *pass; /* credentials, or NULL */
	const char *mount_from;  /* push: try a cross-repository mount from this repository */
	struct ix *ix;           /* for origins (ix_origin_get): where else on this registry a blob
				  * is, to mount it; NULL: only mount_from */
	const struct ix_oci_progress *prog; /* upload byte progress, or NULL */
};

/* Bytes on the wire (headers and bodies, both ways) and requests made. */
struct dist_wire {
	uint64_t up, down, requests;
	uint32_t mounts;         /* blobs the registry mounted from mount_from */
};

struct dist_registry;
int dist_global_init(void);
/* Open a client for ref's host and repository (nothing is sent yet).
 * opts is copied; its strings must outlive the client. */
int dist_open(const struct dist_ref *ref, const struct dist_opts *opts, struct dist_registry **out);
void dist_close(struct dist_registry *r);
/* The push sink and pull source views of r (valid while r is open). */
void dist_sink(struct dist_registry *r, struct ix_oci_sink *out);
void dist_source(struct dist_registry *r, struct ix_oci_source *out);
void dist_wire_get(const struct dist_registry *r, struct dist_wire *out);
/* After a successful push or pull: record this repository as the origin
 * of every blob r saw it hold (ix_origin_put on opts->ix; 0 without one). */
int dist_origins_record(struct dist_registry *r);

/*
 * Credentials for host from a docker config.json / containers auth.json
 * file: "auths" entry named host (also with an https:// prefix or a path
 * after it), its "auth" (base64 user:password) or "username"/"password".
 * 0 and *user, *pass (malloc'd); 1 when the file has none for host;
 * -ENOENT when the file does not exist; ST_EFORMAT (why) when it is not
 * such a file.
 */
int dist_auth_lookup(const char *path, const char *host, char **user, char **pass, char *why, size_t whylen);

#endif
