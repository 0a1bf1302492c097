/* cmd_oci.c: snapshots as OCI artifacts: export --oci, import of a layout, push and pull through a registry. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "index/dist/dist.h"
#include "index/index.h"
#include "store/store.h"

/* ------------------------------------------------------------- progress */

/* The version of the --json event lines (docs/oci.md): every line has it. */
#define EVENTS_SCHEMA 1
/* --json "bytes" events: at most one per this many seconds. */
#define EVENTS_BYTES_EVERY 0.5

/* What the progress callback prints: skopeo-like lines on stderr (one
 * updated in place on a TTY, a line per finished blob otherwise), or
 * JSON lines on stdout. */
struct progress {
	bool tty, json, pull;   /* pull: manifests are read, not written */
	FILE *out;
	double t0;              /* when the transfer started */
	uint32_t blobs_done, blobs_skipped;
	uint64_t bytes_done;    /* bytes of blobs moved whole */
	/* the blob in flight (from its BEGIN) */
	char dg[ST_DIGEST_LEN + 1];
	enum ix_oci_blob_kind what;
	uint64_t size, done, start_done;
	double begun, last_line, last_json;
};

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static const char *blob_kind(enum ix_oci_blob_kind k)
{
	switch (k) {
	case IX_OCI_LAYER: return "layer";
	case IX_OCI_CONFIG: return "config";
	case IX_OCI_CHUNKS: return "chunk-index";
	case IX_OCI_MANIFEST_BLOB: return "manifest";
	}
	return "blob";
}

/* n bytes as B, KiB, MiB or GiB with one decimal. */
static const char *human(uint64_t n, char *buf, size_t len)
{
	static const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)n;
	int u = 0;

	while (v >= 1024 && u < 4)
		v /= 1024, u++;
	if (u == 0)
		snprintf(buf, len, "%" PRIu64 " B", n);
	else
		snprintf(buf, len, "%.1f %s", v, units[u]);
	return buf;
}

/* "sha256:" and the first 12 hex digits, as skopeo shortens them. */
static const char *short_digest(const char *dg)
{
	static char buf[20];

	snprintf(buf, sizeof(buf), "%.19s", dg);
	return buf;
}

static void progress_json(struct progress *p, const char *event, const struct ix_oci_event *ev)
{
	fprintf(p->out, "{\"schema\":%d,\"event\":\"%s\",\"kind\":\"%s\",\"digest\":\"%s\",\"size\":%" PRIu64
			",\"done\":%" PRIu64 ",\"index\":%" PRIu32 ",\"count\":%" PRIu32 "}\n",
		EVENTS_SCHEMA, event, blob_kind(p->what), p->dg, p->size, ev->done, ev->index, ev->count);
	fflush(p->out);
}

static void progress_cb(void *ctx, const struct ix_oci_event *ev)
{
	struct progress *p = ctx;
	char a[32], b[32], c[32];
	double t = now_s();

	if (!p->t0)
		p->t0 = t;
	if (ev->kind != IX_OCI_BLOB_BYTES) {
		/* A registry upload's BYTES belong to the blob begun last. */
		if (ev->sha256)
			st_digest_format(ev->sha256, p->dg);
		p->what = ev->what;
		p->size = ev->size;
	}
	switch (ev->kind) {
	case IX_OCI_BLOB_BEGIN:
		p->done = p->start_done = ev->done;
		p->begun = t;
		if (p->json)
			progress_json(p, "begin", ev);
		break;
	case IX_OCI_BLOB_BYTES:
		if (ev->done <= p->done)
			return;
		p->done = ev->done;
		if (p->json && t - p->last_json >= EVENTS_BYTES_EVERY) {
			p->last_json = t;
			progress_json(p, "bytes", ev);
		}
		break;
	case IX_OCI_BLOB_END:
		p->blobs_done++;
		p->bytes_done += ev->size - p->start_done;
		if (p->json)
			progress_json(p, "end", ev);
		break;
	case IX_OCI_BLOB_SKIP:
		p->blobs_skipped++;
		if (p->json)
			progress_json(p, "skip", ev);
		break;
	case IX_OCI_MANIFEST:
		if (p->json)
			progress_json(p, "manifest", ev);
		break;
	}
	if (p->json)
		return;
	const char *clear = p->tty ? "\r\033[K" : "";
	switch (ev->kind) {
	case IX_OCI_BLOB_BEGIN:
	case IX_OCI_BLOB_BYTES:
		if (!p->tty || t - p->last_line < 0.1)
			return;
		p->last_line = t;
		fprintf(stderr, "\r\033[KCopying %s %s %s / %s (%s/s)", blob_kind(p->what), short_digest(p->dg),
			human(p->done, a, sizeof(a)), human(p->size, b, sizeof(b)),
			human(t > p->begun ? (uint64_t)((double)(p->done - p->start_done) / (t - p->begun)) : 0, c,
			      sizeof(c)));
		break;
	case IX_OCI_BLOB_END:
		fprintf(stderr, "%sCopying %s %s done (%s)\n", clear, blob_kind(p->what), short_digest(p->dg),
			human(ev->size, a, sizeof(a)));
		break;
	case IX_OCI_BLOB_SKIP:
		fprintf(stderr, "%sCopying %s %s skipped: already exists\n", clear, blob_kind(p->what),
			short_digest(p->dg));
		break;
	case IX_OCI_MANIFEST:
		fprintf(stderr, "%s%s manifest %s\n", clear, p->pull ? "Reading" : "Writing", short_digest(p->dg));
		break;
	}
	fflush(stderr);
}

/* The totals line after a transfer (not with --json: the done event has them). */
static void progress_end(struct progress *p)
{
	char a[32], b[32];

	if (p->json || (!p->blobs_done && !p->blobs_skipped))
		return;
	double secs = now_s() - p->t0;
	fprintf(stderr, "%s%" PRIu32 " blob(s) copied (%s) in %.1f s, %s/s; %" PRIu32 " already there\n",
		p->tty ? "\r\033[K" : "", p->blobs_done, human(p->bytes_done, a, sizeof(a)), secs,
		human(secs > 0 ? (uint64_t)((double)p->bytes_done / secs) : 0, b, sizeof(b)), p->blobs_skipped);
	fflush(stderr);
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
	fprintf(f, "{\"schema\":%d,\"event\":\"%s\",\"snapshots\":%" PRIu32 ",\"blobs_moved\":%" PRIu32 ",\"blobs_skipped\":%" PRIu32
		   ",\"bytes_moved\":%" PRIu64 ",\"bytes_skipped\":%" PRIu64 ",\"bytes_resumed\":%" PRIu64
		   ",\"bytes_sha256\":%" PRIu64,
		EVENTS_SCHEMA, event, st->snapshots, st->blobs_moved, st->blobs_skipped, st->bytes_moved, st->bytes_skipped,
		st->bytes_resumed, st->bytes_sha256);
	if (w)
		fprintf(f, ",\"wire_up\":%" PRIu64 ",\"wire_down\":%" PRIu64 ",\"requests\":%" PRIu64 ",\"mounts\":%" PRIu32,
			w->up, w->down, w->requests, w->mounts);
}

/* ------------------------------------------------------ layout commands */

int cli_oci_export(struct cli *cli, int argc, char **argv, bool whole_configs)
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
	rc = ix_oci_export_opts(ix, (const char *const *)argv + 1, (size_t)argc - 1, argv[0], whole_configs, &prog, &st, why,
			       sizeof(why));
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

struct cli_auth {
	struct ix_auth_provider p;
	char paths[CLI_AUTH_FILES][CLI_AUTH_PATH];
	const char *files[CLI_AUTH_FILES];
	char *user, *pass;  /* --creds, split */
};

struct reg_args {
	struct cli *cli;
	bool insecure, json, tls_noverify;
	const char *cacert, *authfile, *from, *cert_dir;
	const char *creds;     /* --creds USER:PASSWORD */
	struct cli_auth auth;  /* the provider the flags pick (args_auth) */
	bool auth_ready;
	char *user, *pass;     /* what it gave for the registry named */
	uint64_t deadline_ns;  /* pull: CLOCK_MONOTONIC end of the whole pull (0: none) */
};

/* A pull's overall deadline unless --timeout or $STRATA_PULL_TIMEOUT say
 * otherwise: long enough for gigabytes on a slow link, short enough that a
 * registry trickling bytes cannot keep a pull (and its store lock) alive
 * for days. */
#define PULL_TIMEOUT_DEFAULT 3600ul

const char *const *cli_certs_d(void)
{
	static char buf[8192], conf[4096];
	static const char *roots[17];
	static bool done;
	const char *env = getenv("STRATA_CERTS_D"), *x = getenv("XDG_CONFIG_HOME"), *h = getenv("HOME");
	size_t n = 0;

	if (done)
		return roots;
	done = true;
	if (env) {
		snprintf(buf, sizeof(buf), "%s", env);
		for (char *save = NULL, *t = strtok_r(buf, ":", &save); t && n < 16; t = strtok_r(NULL, ":", &save))
			roots[n++] = t;
		return roots;
	}
	if (x && *x)
		snprintf(conf, sizeof(conf), "%s/containers/certs.d", x);
	else if (h && *h)
		snprintf(conf, sizeof(conf), "%s/.config/containers/certs.d", h);
	if (conf[0])
		roots[n++] = conf;
	roots[n++] = "/etc/containers/certs.d";
	roots[n++] = "/etc/docker/certs.d";
	return roots;
}

size_t cli_auth_files(char paths[][CLI_AUTH_PATH], bool *explicit)
{
	const char *env = getenv("REGISTRY_AUTH_FILE");
	const char *xr = getenv("XDG_RUNTIME_DIR"), *xc = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME"),
		   *dc = getenv("DOCKER_CONFIG");
	size_t n = 0;

	*explicit = env && *env;
	if (*explicit) {
		snprintf(paths[n++], CLI_AUTH_PATH, "%s", env);
		return n;
	}
	if (xr && *xr)
		snprintf(paths[n++], CLI_AUTH_PATH, "%s/containers/auth.json", xr);
	if (xc && *xc)
		snprintf(paths[n++], CLI_AUTH_PATH, "%s/containers/auth.json", xc);
	else if (home && *home)
		snprintf(paths[n++], CLI_AUTH_PATH, "%s/.config/containers/auth.json", home);
	if (dc && *dc)
		snprintf(paths[n++], CLI_AUTH_PATH, "%s/config.json", dc);
	else if (home && *home)
		snprintf(paths[n++], CLI_AUTH_PATH, "%s/.docker/config.json", home);
	return n;
}

/* The provider a command's flags pick (index/dist/auth.c does the
 * lookups): --creds USER:PASSWORD for every registry, else --authfile or
 * $REGISTRY_AUTH_FILE alone (it must exist), else the first of
 * cli_auth_files with anything for the host (credHelpers, auths,
 * credsStore: ix_registry_auth_lookup; helpers run with strata's
 * environment). 0 or -ENOMEM. */
static int auth_pick(struct cli_auth *ca, const char *creds, const char *authfile)
{
	bool env;
	size_t n;

	*ca = (struct cli_auth){ 0 };
	if (creds) {
		const char *colon = strchr(creds, ':');
		if (!(ca->user = strndup(creds, (size_t)(colon - creds))) || !(ca->pass = strdup(colon + 1))) {
			free(ca->user);
			ca->user = NULL;
			return -ENOMEM;
		}
		ix_auth_creds(&ca->p, ca->user, ca->pass);
		return 0;
	}
	n = cli_auth_files(ca->paths, &env);
	if (authfile) {
		snprintf(ca->paths[0], CLI_AUTH_PATH, "%s", authfile);
		n = 1;
	}
	for (size_t i = 0; i < n; i++)
		ca->files[i] = ca->paths[i];
	ix_auth_files(&ca->p, ca->files, n, authfile || env, environ);
	return 0;
}

static void auth_free(struct cli_auth *ca)
{
	free(ca->user);
	free(ca->pass);
}

const struct ix_auth *cli_registry_auth(void)
{
	static struct cli_auth ca;
	static bool done;

	if (!done && auth_pick(&ca, NULL, NULL) == 0)
		done = true;
	return done ? &ca.p.auth : NULL;
}

int cli_registry_creds(void *ctx, const char *host, char **user, char **pass, char *why, size_t whylen)
{
	const struct ix_auth *a = cli_registry_auth();

	(void)ctx;
	if (!a) {
		*user = *pass = NULL;  /* out of memory: anonymous */
		return 0;
	}
	return a->get(a->ctx, host, user, pass, why, whylen);
}

/* The command's provider, picked on first use. */
static int args_auth(struct cli *cli, struct reg_args *a)
{
	if (a->auth_ready)
		return CLI_OK;
	if (auth_pick(&a->auth, a->creds, a->authfile) < 0) {
		cli_err(cli, "out of memory");
		return CLI_FAIL;
	}
	a->auth_ready = true;
	return CLI_OK;
}

void cli_lazy_log(void *ctx, const char *msg)
{
	cli_err(ctx, "%s", msg);
}

enum { OPT_INSECURE = 1000, OPT_CACERT, OPT_AUTHFILE, OPT_JSON, OPT_FROM, OPT_LAZY, OPT_CHUNK, OPT_TIMEOUT,
       OPT_TLS_VERIFY, OPT_CERT_DIR, OPT_CREDS, OPT_ANNOTATION, OPT_SOURCE, OPT_WHOLE };

/* An option push and pull share into a; false if it is not one. *status:
 * CLI_USAGE (reported) for a bad value. */
static bool reg_opt(struct cli *cli, const char *cmd, int c, struct reg_args *a, int *status)
{
	switch (c) {
	case OPT_INSECURE: a->insecure = true; return true;
	case OPT_CACERT: a->cacert = optarg; return true;
	case OPT_CERT_DIR: a->cert_dir = optarg; return true;
	case OPT_AUTHFILE: a->authfile = optarg; return true;
	case OPT_JSON: a->json = true; return true;
	case OPT_TLS_VERIFY:
		if (!optarg || strcmp(optarg, "true") == 0) {
			a->tls_noverify = false;
		} else if (strcmp(optarg, "false") == 0) {
			a->tls_noverify = true;
		} else {
			cli_err(cli, "%s: --tls-verify takes true or false, not '%s'", cmd, optarg);
			*status = CLI_USAGE;
		}
		return true;
	case OPT_CREDS:
		if (!strchr(optarg, ':')) {
			cli_err(cli, "%s: --creds takes USER:PASSWORD (strata does not prompt for a password; an auth "
				     "file or a credential helper keeps it off the command line)", cmd);
			*status = CLI_USAGE;
		}
		a->creds = optarg;
		return true;
	default: return false;
	}
}

/* Seconds (0: no deadline) from --timeout or $STRATA_PULL_TIMEOUT; false
 * if it is not a number. */
static bool timeout_parse(const char *v, unsigned long *out)
{
	char *end;

	errno = 0;
	*out = strtoul(v, &end, 10);
	return *v >= '0' && *v <= '9' && !*end && errno == 0 && *out <= 100ul * 365 * 86400;
}

/* The options push and pull share: transport, certificates, credentials. */
static void reg_usage(FILE *f)
{
	fprintf(f,
		"  --plain-http     plain HTTP (a loopback registry); HTTPS otherwise\n"
		"  --insecure       the same as --plain-http (crane's meaning; oras's and\n"
		"                   helm's --insecure, HTTPS without checks, is\n"
		"                   --tls-verify=false here)\n"
		"  --tls-verify=BOOL  false: HTTPS without checking the registry's\n"
		"                   certificate or name (default true)\n"
		"  --cacert FILE    trust this CA bundle for HTTPS instead of the system's\n"
		"  --cert-dir DIR   CAs (*.crt) and a client certificate (NAME.cert, NAME.key)\n"
		"                   for the registry (default: the first HOST[:PORT]\n"
		"                   directory of ~/.config/containers/certs.d,\n"
		"                   /etc/containers/certs.d, /etc/docker/certs.d)\n"
		"  --creds USER:PASSWORD  credentials for the registry (no prompt)\n"
		"  --authfile FILE  credentials file (docker config.json format: auths,\n"
		"                   credHelpers, credsStore); default $REGISTRY_AUTH_FILE,\n"
		"                   else the first of $XDG_RUNTIME_DIR/containers/auth.json,\n"
		"                   ~/.config/containers/auth.json, ~/.docker/config.json\n"
		"                   with an entry for the registry\n");
}

/* The most --annotation and --source options a push takes. */
#define PUSH_ANNOTATIONS_MAX 64

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
		"Prints the pushed manifest's digest.\n"
		"\n");
	reg_usage(f);
	fprintf(f,
		"  --annotation KEY=VALUE  an annotation of the pushed manifest (repeatable;\n"
		"                   org.opencontainers.image.created, the snapshot's\n"
		"                   capture time, is always there)\n"
		"  --source URL     the same as --annotation org.opencontainers.image.source=URL\n"
		"  --from REPO      mount blobs from REPO on the same registry (default: each\n"
		"                   blob's recorded origin)\n"
		"  --chunk-size N   chunks of the chunk indexes a lazy pull fetches by (bytes,\n"
		"                   a power of two, 4096..16777216; default 65536)\n"
		"  --whole-configs  every config a full strata manifest, so each artifact is\n"
		"                   complete on its own (default: a snapshot stored as a\n"
		"                   delta of its parent is sent as that delta)\n"
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
		"  --force          move the tag if it names another snapshot\n");
	reg_usage(f);
	fprintf(f,
		"  --timeout SECS   give up when the whole pull (lazy layers it completes\n"
		"                   included) has taken this long; 0: never (default: 3600,\n"
		"                   or $STRATA_PULL_TIMEOUT). Any transfer moving under\n"
		"                   1024 bytes a second for 60 s fails on its own.\n"
		"  --json           progress and result as JSON lines on stdout\n");
}

static const struct option reg_opts[] = {
	{ "insecure", no_argument, NULL, OPT_INSECURE }, { "plain-http", no_argument, NULL, OPT_INSECURE },
	{ "tls-verify", optional_argument, NULL, OPT_TLS_VERIFY }, { "cert-dir", required_argument, NULL, OPT_CERT_DIR },
	{ "creds", required_argument, NULL, OPT_CREDS }, { "annotation", required_argument, NULL, OPT_ANNOTATION },
	{ "source", required_argument, NULL, OPT_SOURCE }, { "cacert", required_argument, NULL, OPT_CACERT },
	{ "authfile", required_argument, NULL, OPT_AUTHFILE }, { "json", no_argument, NULL, OPT_JSON },
	{ "from", required_argument, NULL, OPT_FROM }, { "tag", required_argument, NULL, 't' },
	{ "force", no_argument, NULL, 'f' }, { "help", no_argument, NULL, 'h' },
	{ "lazy", no_argument, NULL, OPT_LAZY }, { "chunk-size", required_argument, NULL, OPT_CHUNK },
	{ "whole-configs", no_argument, NULL, OPT_WHOLE },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT }, { 0 } };

/* Say why s is not a registry reference, with the fix (a usage error).
 * what: "push" or "pull"; form: the reference form it takes. */
static int ref_refuse(struct cli *cli, const char *what, const char *s, const char *form)
{
	static const char *transports[] = { "docker://", "oci:", "oci-archive:", "docker-archive:", "dir:",
					    "containers-storage:", "docker-daemon:", "registry://" };
	char host[300];
	const char *slash = strchr(s, '/');

	for (size_t i = 0; i < sizeof(transports) / sizeof(transports[0]); i++) {
		size_t n = strlen(transports[i]);
		if (strncmp(s, transports[i], n) != 0)
			continue;
		if (i == 0 || i == 7)
			cli_err(cli, "%s: '%s': drop the transport prefix: strata %s takes %s (e.g. %s)", what, s, what,
				form, s + n);
		else
			cli_err(cli, "%s: '%s': strata %s talks to registries only (%s); an OCI layout directory is "
				     "written by 'strata export --oci DIR' and read by 'strata import DIR'",
				what, s, what, form);
		return CLI_USAGE;
	}
	if (strncmp(s, "http://", 7) == 0 || strncmp(s, "https://", 8) == 0) {
		cli_err(cli, "%s: '%s': drop the scheme: strata %s takes %s (plain HTTP is --plain-http)", what, s, what,
			form);
		return CLI_USAGE;
	}
	if (slash && (size_t)(slash - s) < sizeof(host)) {
		memcpy(host, s, (size_t)(slash - s));
		host[slash - s] = '\0';
		if (!ix_registry_host_valid(host)) {
			cli_err(cli, "%s: '%s' is not a registry host (HOST[:PORT]: a name with a '.', 'localhost' or an "
				     "address, and PORT a number); strata %s takes %s (e.g. 127.0.0.1:5000/sandboxes/web:v1)",
				what, host, what, form);
			return CLI_USAGE;
		}
	}
	cli_err(cli, "%s: '%s' is not %s (e.g. 127.0.0.1:5000/sandboxes/web:v1)", what, s, form);
	return CLI_USAGE;
}

/* Open the registry client for ref (credentials looked up); exit status. */
static int reg_open(struct cli *cli, struct reg_args *a, const struct ix_registry_ref *ref, const struct ix_oci_progress *prog,
		    struct ix *ix, struct ix_registry **out)
{
	int rc;

	char why[ST_WHY_LEN] = "";
	struct ix_auth_provider found;

	if ((rc = args_auth(cli, a)) != CLI_OK)
		return rc;
	/* Asked here, before anything is sent, so that a missing auth file or
	 * a failing helper stops the command with its own words. */
	if ((rc = a->auth.p.auth.get(a->auth.p.auth.ctx, ref->host, &a->user, &a->pass, why, sizeof(why))) < 0) {
		cli_err(cli, "%s", why[0] ? why : "out of memory");
		return rc == -ENOENT ? CLI_NOTFOUND : CLI_FAIL;
	}
	ix_auth_creds(&found, a->user, a->pass);
	struct ix_registry_opts o = { .insecure = a->insecure, .tls_noverify = a->tls_noverify, .cacert = a->cacert,
				      .cert_dir = a->cert_dir, .certs_d = cli_certs_d(), .auth = &found.auth,
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
	struct reg_args a = { .cli = cli };
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
	bool whole = false;
	/* --annotation KEY=VALUE and --source URL, in order, NULL-terminated. */
	const char *ann[PUSH_ANNOTATIONS_MAX + 1] = { 0 };
	char source[4200];
	size_t nann = 0;
	int c, rc, status = CLI_OK;

	while ((c = getopt_long(argc, argv, "h", reg_opts, NULL)) != -1) {
		switch (c) {
		case OPT_FROM: a.from = optarg; break;
		case OPT_ANNOTATION:
		case OPT_SOURCE:
			if (nann == PUSH_ANNOTATIONS_MAX) {
				cli_err(cli, "push: at most %d annotations", PUSH_ANNOTATIONS_MAX);
				return CLI_USAGE;
			}
			if (c == OPT_SOURCE) {
				snprintf(source, sizeof(source), "org.opencontainers.image.source=%s", optarg);
				ann[nann++] = source;
			} else if (!strchr(optarg, '=') || optarg[0] == '=') {
				cli_err(cli, "push: --annotation takes KEY=VALUE, not '%s'", cli_esc(optarg));
				return CLI_USAGE;
			} else {
				ann[nann++] = optarg;
			}
			break;
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
		case OPT_WHOLE: whole = true; break;
		case 'h': push_usage(stdout); return CLI_OK;
		default:
			if (!reg_opt(cli, "push", c, &a, &status))
				return cli_usage_hint(argv[0]);
			if (status != CLI_OK)
				return status;
		}
	}
	/* Errors from here on are events of the --json stream too. */
	if (a.json)
		cli_err_json(stdout, EVENTS_SCHEMA);
	if (argc - optind != 2) {
		cli_err(cli, "push: expected TAG|ID and REGISTRY/REPOSITORY[:TAG] (see 'strata push --help')");
		return CLI_USAGE;
	}
	const char *snap = argv[optind], *target = argv[optind + 1];
	if (ix_registry_ref_parse(target, &ref) < 0)
		return ref_refuse(cli, "push", target, "REGISTRY/REPOSITORY[:TAG]");
	if (ref.digest) {
		cli_err(cli, "push: '%s' names a digest: a push is to REGISTRY/REPOSITORY[:TAG] (it prints the digest)",
			target);
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
	sink.whole_configs = whole;
	sink.annotations = ann;
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
	auth_free(&a.auth);
	return status;
}

/* Fetch what is missing of every lazy layer of snapshot id and publish
 * each as an ordinary blob. */
/* Fetch the lazy snapshot id's working set (best effort: what is not
 * fetched now is fetched on demand; a failure is a warning). */
static void prefetch_working_set(struct cli *cli, struct ix *ix, const st_id *id, const struct reg_args *a,
				 const struct ix_registry *r, struct ix_ws_prefetch_stats *pst)
{
	/* The pull's token goes with it: no token request per Range request's client. */
	struct ix_lazy_opts o = { .cacert = a->cacert, .certs_d = cli_certs_d(), .cert_dir = a->cert_dir,
				  .tls_noverify = a->tls_noverify, .auth = &a->auth.p.auth,
				  .deadline_ns = a->deadline_ns, .token_from = r };
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
	struct ix_lazy_opts o = { .cacert = a->cacert, .certs_d = cli_certs_d(), .cert_dir = a->cert_dir,
				  .tls_noverify = a->tls_noverify, .auth = &a->auth.p.auth,
				  .deadline_ns = a->deadline_ns };

	return ix_lazy_open(ix, &o, out);
}

int cmd_pull(struct cli *cli, int argc, char **argv)
{
	struct reg_args a = { .cli = cli };
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
	int c, rc, status = CLI_OK;

	while ((c = getopt_long(argc, argv, "t:fh", reg_opts, NULL)) != -1) {
		switch (c) {
		case OPT_TIMEOUT: timeout = optarg; break;
		case 't': tag = optarg; break;
		case 'f': flags |= IX_TAG_FORCE; break;
		case OPT_LAZY: flags |= IX_OCI_LAZY; break;
		case 'h': pull_usage(stdout); return CLI_OK;
		default:
			if (!reg_opt(cli, "pull", c, &a, &status))
				return cli_usage_hint(argv[0]);
			if (status != CLI_OK)
				return status;
		}
	}
	/* Errors from here on are events of the --json stream too. */
	if (a.json)
		cli_err_json(stdout, EVENTS_SCHEMA);
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
	if (ix_registry_ref_parse(from, &ref) < 0)
		return ref_refuse(cli, "pull", from, "REGISTRY/REPOSITORY[:TAG|@sha256:DIGEST]");
	if (!tag && !ref.digest)
		tag = ref.tag;
	if (tag && !st_name_valid(tag)) {
		cli_err(cli, "pull: '%s' is not a valid tag name", tag);
		return CLI_USAGE;
	}
	struct progress p = { .tty = !a.json && isatty(2), .json = a.json, .pull = true, .out = stdout };
	struct ix_oci_progress prog = { progress_cb, &p };
	if ((status = cli_store_open_flags(cli, CLI_STORE_CREATE, &s, &ix)) != CLI_OK)
		return status;
	char origin[IX_ORIGIN_MAX + 1];
	snprintf(origin, sizeof(origin), "%s/%s", ref.host, ref.repo);
	if ((status = cli_pull_tag_check(cli, ix, tag, origin, flags & IX_TAG_FORCE)) != CLI_OK)
		goto out_close;
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
		prefetch_working_set(cli, ix, &id, &a, r, &pst);
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
	auth_free(&a.auth);
	return status;
}
