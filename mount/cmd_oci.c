/* cmd_oci.c: snapshots as OCI artifacts: export --oci, import of a layout, push and pull through a registry. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "index/lazy.h"
#include "index/registry.h"
#include "index/index.h"
#include "store/store.h"

/* ------------------------------------------------------------- progress */

/* What the progress callback prints: nothing, a line on a TTY, or JSON lines. */
struct progress {
	bool tty, json;
	uint32_t blobs_done;
	uint64_t bytes_done;   /* bytes of finished blobs */
	uint64_t cur;          /* bytes of the blob in flight */
	struct timespec last;
	FILE *out;
};

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void progress_cb(void *ctx, const struct ix_oci_event *ev)
{
	static const char *kinds[] = { "begin", "bytes", "end", "skip", "manifest" };
	static double last;
	struct progress *p = ctx;
	char dg[ST_DIGEST_LEN + 1] = "";

	if (ev->sha256)
		st_digest_format(ev->sha256, dg);
	if (p->json) {
		fprintf(p->out, "{\"event\":\"%s\",\"digest\":\"%s\",\"size\":%" PRIu64 ",\"done\":%" PRIu64
				",\"index\":%" PRIu32 ",\"count\":%" PRIu32 "}\n",
			kinds[ev->kind], dg, ev->size, ev->done, ev->index, ev->count);
		fflush(p->out);
		return;
	}
	if (ev->kind == IX_OCI_BLOB_END || ev->kind == IX_OCI_BLOB_SKIP) {
		p->blobs_done++;
		if (ev->kind == IX_OCI_BLOB_END)
			p->bytes_done += ev->size;
		p->cur = 0;
	} else if (ev->kind == IX_OCI_BLOB_BYTES || ev->kind == IX_OCI_BLOB_BEGIN) {
		p->cur = ev->done;
	}
	if (!p->tty)
		return;
	double t = now_s();
	if (ev->kind == IX_OCI_BLOB_BYTES && t - last < 0.1)
		return;
	last = t;
	fprintf(stderr, "\r%" PRIu32 " blob(s) done, %.1f MiB moved; %s %.19s %.1f/%.1f MiB   ", p->blobs_done,
		(double)(p->bytes_done + p->cur) / 1048576.0, kinds[ev->kind], dg, (double)ev->done / 1048576.0,
		(double)ev->size / 1048576.0);
	fflush(stderr);
}

static void progress_end(struct progress *p)
{
	if (p->tty && !p->json) {
		fputc('\n', stderr);
		fflush(stderr);
	}
}

/* ------------------------------------------------------------ reporting */

static int exit_for(int rc)
{
	switch (rc) {
	case IX_EREMOTE_MISSING:
	case IX_ENOTFOUND:
	case -ENOENT:
		return CLI_NOTFOUND;
	case IX_EREF:
	case ST_EBADNAME:
		return CLI_USAGE;
	default:
		return CLI_FAIL;
	}
}

static void report(struct cli *cli, const char *what, int rc, const char *why)
{
	const char *msg = rc == -ENOSPC ? "no space left on the store's filesystem"
			  : rc == ST_EREADONLY ? "the store is read-only"
					       : ix_lazy_strerror(rc);

	if (why && why[0])
		cli_err(cli, "%s: %s: %s", what, msg, why);
	else
		cli_err(cli, "%s: %s", what, msg);
}

static void stats_json(FILE *f, const char *event, const struct ix_oci_stats *st, const struct ix_registry_wire *w)
{
	fprintf(f, "{\"event\":\"%s\",\"snapshots\":%" PRIu32 ",\"blobs_moved\":%" PRIu32 ",\"blobs_skipped\":%" PRIu32
		   ",\"bytes_moved\":%" PRIu64 ",\"bytes_skipped\":%" PRIu64 ",\"bytes_resumed\":%" PRIu64
		   ",\"bytes_sha256\":%" PRIu64,
		event, st->snapshots, st->blobs_moved, st->blobs_skipped, st->bytes_moved, st->bytes_skipped,
		st->bytes_resumed, st->bytes_sha256);
	if (w)
		fprintf(f, ",\"wire_up\":%" PRIu64 ",\"wire_down\":%" PRIu64 ",\"requests\":%" PRIu64 ",\"mounts\":%" PRIu32,
			w->up, w->down, w->requests, w->mounts);
}

/* ------------------------------------------------------ layout commands */

int cli_oci_export(struct cli *cli, int argc, char **argv)
{
	struct progress p = { .tty = isatty(2), .out = stdout };
	struct ix_oci_progress prog = { progress_cb, &p };
	struct ix_oci_stats st;
	struct st_store *s;
	struct ix *ix;
	char why[ST_WHY_LEN] = "";
	int rc;

	if (argc < 1) {
		cli_err(cli, "export --oci: expected DIR [TAG|ID...] (see 'strata export --help')");
		return CLI_USAGE;
	}
	/* Writable (if the store is) for the sha256 table. */
	if ((rc = cli_store_open(cli, true, &s, &ix)) != CLI_OK)
		return rc;
	rc = ix_oci_export(ix, (const char *const *)argv + 1, (size_t)argc - 1, argv[0], &prog, &st, why, sizeof(why));
	ix_close(ix);
	st_store_close(s);
	if (rc == -EEXIST) {
		cli_err(cli, "export: %s already exists (export writes a new directory)", argv[0]);
		return CLI_FAIL;
	}
	if (rc == IX_ENOTFOUND || rc == ST_EBADNAME) {
		cli_err(cli, "export: a snapshot named on the command line is not in store %s", cli->store);
		return exit_for(rc);
	}
	if (rc < 0) {
		char what[300];
		snprintf(what, sizeof(what), "export of an OCI layout to %s failed", argv[0]);
		report(cli, what, rc, why);
		return exit_for(rc);
	}
	cli_info(cli, "%" PRIu32 " snapshot(s), %" PRIu32 " blob(s) written (%" PRIu64 " bytes), sha256 computed over %" PRIu64
		      " bytes",
		 st.snapshots, st.blobs_moved, st.bytes_moved, st.bytes_sha256);
	return CLI_OK;
}

int cli_oci_import(struct cli *cli, const char *dir, const char *tag, unsigned flags)
{
	struct ix_oci_stats st;
	struct st_store *s;
	struct ix *ix;
	char why[ST_WHY_LEN] = "", hex[ST_ID_HEX_LEN + 1];
	st_id id;
	int rc;

	if ((rc = cli_store_open_flags(cli, CLI_STORE_CREATE, &s, &ix)) != CLI_OK)
		return rc;
	rc = ix_oci_import(ix, dir, tag, flags, NULL, &st, &id, why, sizeof(why));
	ix_close(ix);
	st_store_close(s);
	if (rc == IX_EEXIST) {
		cli_err(cli, "import: the tag already names another snapshot (use --force to move it)");
		return CLI_FAIL;
	}
	if (rc < 0) {
		char what[300];
		snprintf(what, sizeof(what), "import of OCI layout %s rejected", dir);
		report(cli, what, rc, why);
		return rc == -ENOENT && !why[0] ? CLI_NOTFOUND : CLI_FAIL;
	}
	st_id_format(&id, hex);
	printf("%s\n", hex);
	cli_info(cli, "%" PRIu32 " snapshot(s) imported, %" PRIu32 " blob(s) stored (%" PRIu64 " bytes), %" PRIu32
		      " already present",
		 st.snapshots, st.blobs_moved, st.bytes_moved, st.blobs_skipped);
	return CLI_OK;
}

/* ------------------------------------------------------- registry access */

struct reg_args {
	bool insecure, json;
	const char *cacert, *authfile, *from;
	char *user, *pass;
	uint64_t deadline_ns;  /* pull: CLOCK_MONOTONIC end of the whole pull (0: none) */
};

/* A pull's overall deadline unless --timeout or $STRATA_PULL_TIMEOUT say
 * otherwise: long enough for gigabytes on a slow link, short enough that a
 * registry trickling bytes cannot keep a pull (and its store lock) alive
 * for days. */
#define PULL_TIMEOUT_DEFAULT 3600ul

/* Credentials for host: --authfile, else $REGISTRY_AUTH_FILE, else
 * $XDG_RUNTIME_DIR/containers/auth.json, $DOCKER_CONFIG/config.json,
 * ~/.docker/config.json (the first that has an entry for host). */
static int find_credentials(struct cli *cli, struct reg_args *a, const char *host)
{
	const char *explicit = a->authfile ? a->authfile : getenv("REGISTRY_AUTH_FILE");
	char paths[3][4096];
	size_t n = 0;
	char why[ST_WHY_LEN] = "";

	if (explicit) {
		int rc = ix_registry_auth_lookup(explicit, host, &a->user, &a->pass, why, sizeof(why));
		if (rc == -ENOENT) {
			cli_err(cli, "the auth file %s does not exist", explicit);
			return CLI_NOTFOUND;
		}
		if (rc < 0) {
			cli_err(cli, "cannot read the auth file %s: %s", explicit, why[0] ? why : strerror(-rc));
			return CLI_FAIL;
		}
		return CLI_OK;
	}
	if (getenv("XDG_RUNTIME_DIR"))
		snprintf(paths[n++], sizeof(paths[0]), "%s/containers/auth.json", getenv("XDG_RUNTIME_DIR"));
	if (getenv("DOCKER_CONFIG"))
		snprintf(paths[n++], sizeof(paths[0]), "%s/config.json", getenv("DOCKER_CONFIG"));
	else if (getenv("HOME"))
		snprintf(paths[n++], sizeof(paths[0]), "%s/.docker/config.json", getenv("HOME"));
	for (size_t i = 0; i < n; i++) {
		int rc = ix_registry_auth_lookup(paths[i], host, &a->user, &a->pass, why, sizeof(why));
		if (rc == 0)
			return CLI_OK;
		if (rc < 0 && rc != -ENOENT) {
			cli_err(cli, "cannot read the auth file %s: %s", paths[i], why[0] ? why : strerror(-rc));
			return CLI_FAIL;
		}
	}
	return CLI_OK;
}

int cli_registry_creds(void *ctx, const char *host, char **user, char **pass)
{
	struct reg_args a = { 0 };
	int rc = find_credentials(ctx, &a, host);

	*user = a.user;
	*pass = a.pass;
	return rc == CLI_OK ? 0 : -ENOENT;
}

void cli_lazy_log(void *ctx, const char *msg)
{
	cli_err(ctx, "%s", msg);
}

enum { OPT_INSECURE = 1000, OPT_CACERT, OPT_AUTHFILE, OPT_JSON, OPT_FROM, OPT_LAZY, OPT_CHUNK, OPT_TIMEOUT };

/* Seconds (0: no deadline) from --timeout or $STRATA_PULL_TIMEOUT; false
 * if it is not a number. */
static bool timeout_parse(const char *v, unsigned long *out)
{
	char *end;

	errno = 0;
	*out = strtoul(v, &end, 10);
	return *v >= '0' && *v <= '9' && !*end && errno == 0 && *out <= 100ul * 365 * 86400;
}

static void push_usage(FILE *f)
{
	fprintf(f,
		"usage: strata [--store DIR] push [OPTIONS] TAG|ID REGISTRY/REPOSITORY[:TAG]\n"
		"\n"
		"Send a snapshot and its ancestors in the store to an OCI registry, one\n"
		"artifact per snapshot (docs/oci.md). Only blobs the registry lacks are\n"
		"sent: each is asked for first (HEAD), then mounted from another\n"
		"repository of the registry that holds it (--from, else where the store\n"
		"last pushed or pulled it) where the registry allows it, else uploaded.\n"
		"Credentials come from --authfile, $REGISTRY_AUTH_FILE,\n"
		"$XDG_RUNTIME_DIR/containers/auth.json or ~/.docker/config.json.\n"
		"Prints the pushed manifest's digest.\n"
		"\n"
		"  --insecure       plain HTTP (a loopback registry); HTTPS otherwise\n"
		"  --cacert FILE    trust this CA bundle for HTTPS\n"
		"  --authfile FILE  credentials file (docker config.json format)\n"
		"  --from REPO      mount blobs from REPO on the same registry (default: each\n"
		"                   blob's recorded origin)\n"
		"  --chunk-size N   chunks of the chunk indexes a lazy pull fetches by (bytes,\n"
		"                   a power of two, 4096..16777216; default 65536)\n"
		"  --json           progress and result as JSON lines on stdout\n");
}

static void pull_usage(FILE *f)
{
	fprintf(f,
		"usage: strata [--store DIR] pull [OPTIONS] REGISTRY/REPOSITORY[:TAG|@sha256:DIGEST]\n"
		"\n"
		"Fetch a snapshot (and its parents the store lacks) from an OCI registry.\n"
		"Only layers the store lacks are fetched; each is checked against its\n"
		"sha256 and its strata id in one pass as it streams. An interrupted pull\n"
		"resumes where it stopped when run again. The snapshot appears whole, with\n"
		"its tag (the remote tag unless --tag), or not at all. Prints its id.\n"
		"With --lazy no layer bytes are fetched: the snapshot is recorded at once\n"
		"and each chunk is fetched by HTTP Range when something reads it\n"
		"(docs/lazy.md). A pull without --lazy of a lazy snapshot completes it\n"
		"from the same registry, each layer checked against its id before\n"
		"anything is committed. A layer the store holds lazily from another\n"
		"registry or repository is never trusted: it is fetched whole and checked.\n"
		"\n"
		"  --lazy           record the snapshot now, fetch its chunks on demand\n"
		"  --tag NAME       tag it NAME in the store\n"
		"  --force          move the tag if it names another snapshot\n"
		"  --insecure       plain HTTP (a loopback registry); HTTPS otherwise\n"
		"  --cacert FILE    trust this CA bundle for HTTPS\n"
		"  --authfile FILE  credentials file (docker config.json format)\n"
		"  --timeout SECS   give up when the whole pull (lazy layers it completes\n"
		"                   included) has taken this long; 0: never (default: 3600,\n"
		"                   or $STRATA_PULL_TIMEOUT). Any transfer moving under\n"
		"                   1024 bytes a second for 60 s fails on its own.\n"
		"  --json           progress and result as JSON lines on stdout\n");
}

static const struct option reg_opts[] = {
	{ "insecure", no_argument, NULL, OPT_INSECURE }, { "cacert", required_argument, NULL, OPT_CACERT },
	{ "authfile", required_argument, NULL, OPT_AUTHFILE }, { "json", no_argument, NULL, OPT_JSON },
	{ "from", required_argument, NULL, OPT_FROM }, { "tag", required_argument, NULL, 't' },
	{ "force", no_argument, NULL, 'f' }, { "help", no_argument, NULL, 'h' },
	{ "lazy", no_argument, NULL, OPT_LAZY }, { "chunk-size", required_argument, NULL, OPT_CHUNK },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT }, { 0 } };

/* Open the registry client for ref (credentials looked up); exit status. */
static int reg_open(struct cli *cli, struct reg_args *a, const struct ix_registry_ref *ref, const struct ix_oci_progress *prog,
		    struct ix *ix, struct ix_registry **out)
{
	int rc;

	if ((rc = find_credentials(cli, a, ref->host)) != CLI_OK)
		return rc;
	struct ix_registry_opts o = { .insecure = a->insecure, .cacert = a->cacert, .user = a->user, .pass = a->pass,
			       .mount_from = a->from, .prog = prog, .ix = ix, .deadline_ns = a->deadline_ns };
	if (ix_registry_global_init() < 0 || ix_registry_open(ref, &o, out) < 0) {
		cli_err(cli, "cannot start the HTTP client: out of memory");
		return CLI_FAIL;
	}
	return CLI_OK;
}

/* Push the working-set record of the snapshot ref names (if it has one)
 * as a referrer of its pushed manifest (sha, size). */
static int push_working_set(struct cli *cli, struct ix *ix, struct ix_registry *r, const char *ref,
			    const uint8_t sha[ST_SHA256_LEN], uint64_t size, struct ix_ws_xfer *x)
{
	char why[ST_WHY_LEN] = "";
	struct ix_txn *t;
	st_id id;
	int rc;

	if ((rc = ix_txn_begin(ix, &t)) < 0)
		return rc;
	rc = ix_resolve(t, ref, &id);
	ix_txn_end(t);
	if (rc == 0)
		rc = ix_registry_ws_push(r, ix, &id, sha, size, x, why, sizeof(why));
	if (rc < 0)
		report(cli, "push: the snapshot was pushed, but not its working set", rc, why);
	return rc;
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

int cmd_push(struct cli *cli, int argc, char **argv)
{
	struct reg_args a = { 0 };
	struct ix_registry *r = NULL;
	struct ix_registry_ref ref;
	struct ix_oci_sink sink;
	struct ix_oci_stats st = { 0 };
	struct ix_registry_wire w;
	struct st_store *s = NULL;
	struct ix *ix = NULL;
	char why[ST_WHY_LEN] = "", dg[ST_DIGEST_LEN + 1];
	uint8_t sha[ST_SHA256_LEN];
	uint32_t chunk_size = 0;
	int c, rc, status;

	while ((c = getopt_long(argc, argv, "h", reg_opts, NULL)) != -1) {
		switch (c) {
		case OPT_INSECURE: a.insecure = true; break;
		case OPT_CACERT: a.cacert = optarg; break;
		case OPT_AUTHFILE: a.authfile = optarg; break;
		case OPT_JSON: a.json = true; break;
		case OPT_FROM: a.from = optarg; break;
		case OPT_CHUNK: {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || v < IX_CHUNK_MIN || v > IX_CHUNK_MAX || (v & (v - 1))) {
				cli_err(cli, "push: --chunk-size must be a power of two from %u to %u", IX_CHUNK_MIN,
					IX_CHUNK_MAX);
				return CLI_USAGE;
			}
			chunk_size = (uint32_t)v;
			break;
		}
		case 'h': push_usage(stdout); return CLI_OK;
		default: return cli_usage_hint(argv[0]);
		}
	}
	if (argc - optind != 2) {
		cli_err(cli, "push: expected TAG|ID and REGISTRY/REPOSITORY[:TAG] (see 'strata push --help')");
		return CLI_USAGE;
	}
	const char *snap = argv[optind], *target = argv[optind + 1];
	if (ix_registry_ref_parse(target, &ref) < 0 || ref.digest) {
		cli_err(cli, "push: '%s' is not REGISTRY/REPOSITORY[:TAG] (e.g. 127.0.0.1:5000/sandboxes/web:v1)", target);
		return CLI_USAGE;
	}
	struct progress p = { .tty = !a.json && isatty(2), .json = a.json, .out = stdout };
	struct ix_oci_progress prog = { progress_cb, &p };
	/* Writable (if the store is) for the sha256 table. */
	if ((status = cli_store_open(cli, true, &s, &ix)) != CLI_OK)
		return status;
	if ((status = reg_open(cli, &a, &ref, &prog, ix, &r)) != CLI_OK)
		goto out_close;
	ix_registry_sink(r, &sink);
	sink.chunk_size = chunk_size;
	uint64_t msize = 0;
	struct ix_ws_xfer wsx = { 0 };
	rc = ix_oci_push(ix, snap, ref.tag, &sink, &prog, &st, sha, &msize, why, sizeof(why));
	progress_end(&p);
	/* The working-set record, if the snapshot has one, follows it. */
	if (rc == 0 && (rc = push_working_set(cli, ix, r, snap, sha, msize, &wsx)) < 0) {
		status = exit_for(rc);
		goto out_close;
	}
	ix_registry_wire_get(r, &w);
	if (rc < 0) {
		char what[1200];
		if (rc == IX_ENOTFOUND || rc == ST_EBADNAME) {
			cli_err(cli, "push: snapshot '%s' not found in store %s", snap, cli->store);
			status = exit_for(rc);
			goto out_close;
		}
		snprintf(what, sizeof(what), "push of '%s' to %s failed", snap, target);
		report(cli, what, rc, why);
		status = exit_for(rc);
		goto out_close;
	}
	ix_registry_origins_record(r); /* best effort: a later push elsewhere may mount instead of upload */
	st_digest_format(sha, dg);
	if (a.json) {
		stats_json(stdout, "done", &st, &w);
		printf(",\"digest\":\"%s\",\"working_set\":%s}\n", dg, wsx.found ? "true" : "false");
	} else {
		printf("%s\n", dg);
	}
	cli_info(cli, "%" PRIu32 " snapshot(s); %" PRIu32 " blob(s) sent (%" PRIu64 " bytes), %" PRIu32
		      " already there (%" PRIu64 " bytes), %" PRIu32 " mounted; %" PRIu64 " bytes up, %" PRIu64
		      " down in %" PRIu64 " requests; sha256 over %" PRIu64 " bytes",
		 st.snapshots, st.blobs_moved, st.bytes_moved, st.blobs_skipped, st.bytes_skipped, w.mounts, w.up, w.down,
		 w.requests, st.bytes_sha256);
	if (wsx.found)
		cli_info(cli, "working set: record of %" PRIu64 " bytes sent, listed %s", wsx.bytes,
			 wsx.api ? "by the registry's referrers API" : "in the tag schema's index sha256-<digest>");
	status = CLI_OK;
out_close:
	ix_registry_close(r);
	ix_close(ix);
	st_store_close(s);
	free(a.user);
	free(a.pass);
	return status;
}

/* Fetch what is missing of every lazy layer of snapshot id and publish
 * each as an ordinary blob. */
/* Fetch the lazy snapshot id's working set (best effort: what is not
 * fetched now is fetched on demand; a failure is a warning). */
static void prefetch_working_set(struct cli *cli, struct ix *ix, const st_id *id, const struct reg_args *a,
				 struct ix_ws_prefetch_stats *pst)
{
	struct ix_lazy_opts o = { .cacert = a->cacert, .creds = cli_registry_creds, .creds_ctx = cli,
				  .deadline_ns = a->deadline_ns };
	struct ix_lazy *lz = NULL;
	char why[ST_WHY_LEN * 2] = "";
	int rc = ix_lazy_open(ix, &o, &lz);

	if (rc == 0)
		rc = ix_ws_prefetch(lz, ix, id, 0, pst, why, sizeof(why));
	if (rc < 0 && rc != IX_ENOTFOUND)
		fprintf(stderr, "strata: pull: warning: the working set was not fetched ahead: %s\n",
			why[0] ? why : ix_lazy_strerror(rc));
	ix_lazy_close(lz);
}

/* The lazy-layer state a full pull completes layers through (lazy layers
 * recorded from the same source: ix_oci_source.lazy). */
static int lazy_for_pull(struct cli *cli, struct ix *ix, const struct reg_args *a, struct ix_lazy **out)
{
	struct ix_lazy_opts o = { .cacert = a->cacert, .creds = cli_registry_creds, .creds_ctx = cli,
				  .deadline_ns = a->deadline_ns };

	return ix_lazy_open(ix, &o, out);
}

int cmd_pull(struct cli *cli, int argc, char **argv)
{
	struct reg_args a = { 0 };
	struct ix_registry *r = NULL;
	struct ix_registry_ref ref;
	struct ix_oci_source src;
	struct ix_oci_stats st = { 0 };
	struct ix_registry_wire w;
	struct st_store *s = NULL;
	struct ix *ix = NULL;
	const char *tag = NULL;
	char why[ST_WHY_LEN] = "", hex[ST_ID_HEX_LEN + 1];
	unsigned flags = IX_OCI_KEEP_PARTIAL;
	st_id id;
	struct ix_lazy *lz = NULL;
	const char *timeout = getenv("STRATA_PULL_TIMEOUT");
	unsigned long secs = PULL_TIMEOUT_DEFAULT;
	int c, rc, status;

	while ((c = getopt_long(argc, argv, "t:fh", reg_opts, NULL)) != -1) {
		switch (c) {
		case OPT_TIMEOUT: timeout = optarg; break;
		case OPT_INSECURE: a.insecure = true; break;
		case OPT_CACERT: a.cacert = optarg; break;
		case OPT_AUTHFILE: a.authfile = optarg; break;
		case OPT_JSON: a.json = true; break;
		case 't': tag = optarg; break;
		case 'f': flags |= IX_TAG_FORCE; break;
		case OPT_LAZY: flags |= IX_OCI_LAZY; break;
		case 'h': pull_usage(stdout); return CLI_OK;
		default: return cli_usage_hint(argv[0]);
		}
	}
	if (argc - optind != 1) {
		cli_err(cli, "pull: expected REGISTRY/REPOSITORY[:TAG|@sha256:DIGEST] (see 'strata pull --help')");
		return CLI_USAGE;
	}
	if (timeout && *timeout && !timeout_parse(timeout, &secs)) {
		cli_err(cli, "pull: the timeout '%s' is not a number of seconds (0: none)", timeout);
		return CLI_USAGE;
	}
	if (secs)
		a.deadline_ns = ix_registry_now_ns() + (uint64_t)secs * 1000000000u;
	const char *from = argv[optind];
	if (ix_registry_ref_parse(from, &ref) < 0) {
		cli_err(cli, "pull: '%s' is not REGISTRY/REPOSITORY[:TAG|@sha256:DIGEST]", from);
		return CLI_USAGE;
	}
	if (!tag && !ref.digest)
		tag = ref.tag;
	if (tag && !st_name_valid(tag)) {
		cli_err(cli, "pull: '%s' is not a valid tag name", tag);
		return CLI_USAGE;
	}
	struct progress p = { .tty = !a.json && isatty(2), .json = a.json, .out = stdout };
	struct ix_oci_progress prog = { progress_cb, &p };
	if ((status = cli_store_open_flags(cli, CLI_STORE_CREATE, &s, &ix)) != CLI_OK)
		return status;
	if ((status = reg_open(cli, &a, &ref, NULL, ix, &r)) != CLI_OK)
		goto out_close;
	ix_registry_source(r, &src);
	if (!(flags & IX_OCI_LAZY) && (rc = lazy_for_pull(cli, ix, &a, &lz)) < 0) {
		report(cli, "pull", rc, NULL);
		status = exit_for(rc);
		goto out_close;
	}
	src.lazy = lz;
	struct top_catch tc = { .src = src, .r = r, .lazy = (flags & IX_OCI_LAZY) != 0 };
	struct ix_oci_source wrapped = src;
	wrapped.ctx = &tc;
	wrapped.manifest_get = top_manifest_get;
	wrapped.blob_get = top_blob_get;
	wrapped.not_found = top_not_found;
	struct ix_ws_xfer wsx = { 0 };
	rc = ix_oci_pull(ix, &wrapped, ref.digest ? ref.digest : ref.tag, tag, flags, &prog, &st, &id, why, sizeof(why));
	progress_end(&p);
	/* The working-set record listed as a referrer of the snapshot's
	 * manifest: the snapshot is whole without it, so a missing or bad
	 * record is reported and the pull still succeeds. */
	if (rc == 0 && tc.have) {
		char wwhy[ST_WHY_LEN] = "";
		int wrc = ix_registry_ws_pull(r, ix, &id, tc.sha, &wsx, wwhy, sizeof(wwhy));
		if (wrc < 0)
			fprintf(stderr, "strata: pull: warning: the snapshot's working set was not taken: %s\n",
				wwhy[0] ? wwhy : ix_registry_strerror(wrc));
	}
	/* A lazy snapshot's working set is fetched now, first, in parallel
	 * Range requests: the restore then finds it present. */
	struct ix_ws_prefetch_stats pst = { 0 };
	if (rc == 0 && (flags & IX_OCI_LAZY) && wsx.found)
		prefetch_working_set(cli, ix, &id, &a, &pst);
	ix_registry_wire_get(r, &w);
	if (rc < 0) {
		char what[1200];
		if (rc == IX_EEXIST) {
			cli_err(cli, "pull: tag '%s' already names another snapshot (use --tag NAME or --force)", tag);
			status = CLI_FAIL;
			goto out_close;
		}
		if (rc == IX_EDEADLINE)
			snprintf(what, sizeof(what), "pull of %s gave up after %lu s (--timeout, $STRATA_PULL_TIMEOUT)",
				 from, secs);
		else
			snprintf(what, sizeof(what), "pull of %s failed%s", from,
			 st.bytes_moved && (rc == IX_ENET || rc == -EPIPE || rc == IX_EHTTP)
				 ? " (what arrived is kept: run it again to resume)"
				 : "");
		report(cli, what, rc, why);
		status = exit_for(rc);
		goto out_close;
	}
	ix_registry_origins_record(r);
	st_id_format(&id, hex);
	struct ix_lazy_stats ls = { 0 };
	uint32_t completed = st.layers_completed;
	if (lz)
		ix_lazy_stats_get(lz, &ls);
	if (completed)
		cli_info(cli, "%" PRIu32 " lazy layer(s) completed (%" PRIu64 " bytes fetched in %" PRIu64 " requests)",
			 completed, ls.bytes, ls.requests);
	if (a.json) {
		stats_json(stdout, "done", &st, &w);
		printf(",\"id\":\"%s\",\"existed\":%s,\"layers_lazy\":%" PRIu32 ",\"bytes_chunk_index\":%" PRIu64
		       ",\"layers_completed\":%" PRIu32 ",\"bytes_completed\":%" PRIu64
		       ",\"working_set\":%s,\"working_set_bytes\":%" PRIu64 ",\"prefetch_requests\":%" PRIu64
		       ",\"prefetch_bytes\":%" PRIu64 "}\n",
		       hex, st.existed ? "true" : "false", st.layers_lazy, st.bytes_chunks, completed, ls.bytes,
		       wsx.found ? "true" : "false", wsx.bytes, pst.requests, pst.bytes);
	} else {
		printf("%s\n", hex);
	}
	cli_info(cli, "%" PRIu32 " snapshot(s); %" PRIu32 " layer(s) fetched (%" PRIu64 " bytes, %" PRIu64
		      " resumed), %" PRIu32 " already in the store; %" PRIu64 " bytes down, %" PRIu64 " up in %" PRIu64
		      " requests",
		 st.snapshots, st.blobs_moved, st.bytes_moved, st.bytes_resumed, st.blobs_skipped, w.down, w.up,
		 w.requests);
	if (wsx.found)
		cli_info(cli, "working set: record of %" PRIu64 " bytes, found %s", wsx.bytes,
			 wsx.api ? "by the registry's referrers API" : "in the tag schema's index");
	if (pst.jobs)
		cli_info(cli, "working set: %" PRIu64 " bytes of pages fetched first (%" PRIu64 " bytes in %" PRIu64
			      " Range request(s), %" PRIu64 " in parallel)",
			 pst.ws_bytes, pst.bytes, pst.requests, pst.jobs);
	status = CLI_OK;
out_close:
	ix_lazy_close(lz);
	ix_registry_close(r);
	ix_close(ix);
	st_store_close(s);
	free(a.user);
	free(a.pass);
	return status;
}
