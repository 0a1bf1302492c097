/* cmd_xfer.c: strata push and strata pull, a snapshot to and from an OCI registry, on <strata.h>: options, progress lines, the result and its figures. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli_api.h"

/* ------------------------------------------------------------- progress */

/* The version of the --json event lines (docs/oci.md): every line has it. */
#define EVENTS_SCHEMA 1
/* --json "bytes" events: at most one per this many seconds. */
#define EVENTS_BYTES_EVERY 0.5

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static const char *blob_kind(int k)
{
	switch (k) {
	case STRATA_BLOB_LAYER: return "layer";
	case STRATA_BLOB_CONFIG: return "config";
	case STRATA_BLOB_CHUNK_INDEX: return "chunk-index";
	case STRATA_BLOB_MANIFEST: return "manifest";
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

static void progress_json(struct cli_progress *p, const char *event, const struct strata_xfer_event *ev)
{
	fprintf(p->out, "{\"schema\":%d,\"event\":\"%s\",\"kind\":\"%s\",\"digest\":\"%s\",\"size\":%" PRIu64
			",\"done\":%" PRIu64 ",\"index\":%" PRIu32 ",\"count\":%" PRIu32 "}\n",
		EVENTS_SCHEMA, event, blob_kind(p->what), p->dg, p->size, ev->done, ev->index, ev->count);
	fflush(p->out);
}

void cli_progress_cb(void *ctx, const struct strata_xfer_event *ev)
{
	struct cli_progress *p = ctx;
	char a[32], b[32], c[32];
	double t = now_s();

	if (!p->t0)
		p->t0 = t;
	if (ev->kind != STRATA_XFER_BYTES) {
		/* A registry upload's BYTES belong to the blob begun last. */
		if (ev->digest)
			snprintf(p->dg, sizeof(p->dg), "%s", ev->digest);
		p->what = ev->blob;
		p->size = ev->total;
	}
	switch (ev->kind) {
	case STRATA_XFER_BEGIN:
		p->done = p->start_done = ev->done;
		p->begun = t;
		if (p->json)
			progress_json(p, "begin", ev);
		break;
	case STRATA_XFER_BYTES:
		if (ev->done <= p->done)
			return;
		p->done = ev->done;
		if (p->json && t - p->last_json >= EVENTS_BYTES_EVERY) {
			p->last_json = t;
			progress_json(p, "bytes", ev);
		}
		break;
	case STRATA_XFER_END:
		p->blobs_done++;
		p->bytes_done += ev->total - p->start_done;
		if (p->json)
			progress_json(p, "end", ev);
		break;
	case STRATA_XFER_SKIP:
		p->blobs_skipped++;
		if (p->json)
			progress_json(p, "skip", ev);
		break;
	case STRATA_XFER_MANIFEST:
		if (p->json)
			progress_json(p, "manifest", ev);
		break;
	}
	if (p->json)
		return;
	const char *clear = p->tty ? "\r\033[K" : "";
	switch (ev->kind) {
	case STRATA_XFER_BEGIN:
	case STRATA_XFER_BYTES:
		if (!p->tty || t - p->last_line < 0.1)
			return;
		p->last_line = t;
		fprintf(stderr, "\r\033[KCopying %s %s %s / %s (%s/s)", blob_kind(p->what), short_digest(p->dg),
			human(p->done, a, sizeof(a)), human(p->size, b, sizeof(b)),
			human(t > p->begun ? (uint64_t)((double)(p->done - p->start_done) / (t - p->begun)) : 0, c,
			      sizeof(c)));
		break;
	case STRATA_XFER_END:
		fprintf(stderr, "%sCopying %s %s done (%s)\n", clear, blob_kind(p->what), short_digest(p->dg),
			human(ev->total, a, sizeof(a)));
		break;
	case STRATA_XFER_SKIP:
		fprintf(stderr, "%sCopying %s %s skipped: already exists\n", clear, blob_kind(p->what),
			short_digest(p->dg));
		break;
	case STRATA_XFER_MANIFEST:
		fprintf(stderr, "%s%s manifest %s\n", clear, p->pull ? "Reading" : "Writing", short_digest(p->dg));
		break;
	}
	fflush(stderr);
}

/* The totals line after a transfer (not with --json: the done event has them). */
void cli_progress_end(struct cli_progress *p)
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

int cli_xfer_exit(int rc)
{
	switch (rc) {
	case STRATA_E_REMOTE_MISSING:
	case STRATA_E_NOT_FOUND:
	case -ENOENT:
		return CLI_NOTFOUND;
	case STRATA_E_BAD_REF:
	case STRATA_E_BAD_NAME:
		return CLI_USAGE;
	default:
		return CLI_FAIL;
	}
}

void cli_xfer_report(const struct cli *cli, const char *what, int rc, const char *why)
{
	const char *msg = rc == -ENOSPC ? "no space left on the store's filesystem"
			  : rc == STRATA_E_READ_ONLY ? "the store is read-only"
						     : strata_strerror(rc);

	if (why && why[0])
		cli_err(cli, "%s: %s: %s", what, msg, why);
	else
		cli_err(cli, "%s: %s", what, msg);
}

/* One figure of the store's last push or pull (0 if the store has none). */
static uint64_t xfer(strata_store *st, int what)
{
	uint64_t v = 0;

	strata_store_info(st, what, &v);
	return v;
}

/* The figures every "done" event has, the closing brace left to the caller. */
static void stats_json(FILE *f, const char *event, strata_store *st)
{
	fprintf(f, "{\"schema\":%d,\"event\":\"%s\",\"snapshots\":%" PRIu64 ",\"blobs_moved\":%" PRIu64
		   ",\"blobs_skipped\":%" PRIu64 ",\"bytes_moved\":%" PRIu64 ",\"bytes_skipped\":%" PRIu64
		   ",\"bytes_resumed\":%" PRIu64 ",\"bytes_sha256\":%" PRIu64,
		EVENTS_SCHEMA, event, xfer(st, STRATA_STORE_INFO_XFER_SNAPSHOTS), xfer(st, STRATA_STORE_INFO_XFER_BLOBS_MOVED),
		xfer(st, STRATA_STORE_INFO_XFER_BLOBS_SKIPPED), xfer(st, STRATA_STORE_INFO_XFER_BYTES_MOVED),
		xfer(st, STRATA_STORE_INFO_XFER_BYTES_SKIPPED), xfer(st, STRATA_STORE_INFO_XFER_BYTES_RESUMED),
		xfer(st, STRATA_STORE_INFO_XFER_BYTES_SHA256));
	fprintf(f, ",\"wire_up\":%" PRIu64 ",\"wire_down\":%" PRIu64 ",\"requests\":%" PRIu64 ",\"mounts\":%" PRIu64,
		xfer(st, STRATA_STORE_INFO_XFER_WIRE_UP), xfer(st, STRATA_STORE_INFO_XFER_WIRE_DOWN),
		xfer(st, STRATA_STORE_INFO_XFER_WIRE_REQUESTS), xfer(st, STRATA_STORE_INFO_XFER_WIRE_MOUNTS));
}

/* ------------------------------------------------------- registry access */

struct reg_args {
	bool insecure, json, tls_noverify;
	const char *cacert, *authfile, *from, *cert_dir;
	const char *creds;     /* --creds USER:PASSWORD */
	unsigned long timeout; /* pull: seconds for the whole pull (0: none) */
};

/* A pull's overall deadline unless --timeout or $STRATA_PULL_TIMEOUT say
 * otherwise: long enough for gigabytes on a slow link, short enough that a
 * registry trickling bytes cannot keep a pull (and its store lock) alive
 * for days. */
#define PULL_TIMEOUT_DEFAULT 3600ul

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
		if (!strata_reference_host_valid(host)) {
			cli_err(cli, "%s: '%s' is not a registry host (HOST[:PORT]: a name with a '.', 'localhost' or an "
				     "address, and PORT a number); strata %s takes %s (e.g. 127.0.0.1:5000/sandboxes/web:v1)",
				what, host, what, form);
			return CLI_USAGE;
		}
	}
	cli_err(cli, "%s: '%s' is not %s (e.g. 127.0.0.1:5000/sandboxes/web:v1)", what, s, form);
	return CLI_USAGE;
}


/* The registry settings the flags say for the registry host names, with
 * its credentials looked up now (before anything is sent, so that a
 * missing auth file or a failing helper stops the command with its own
 * words) and progress to p. Reports; returns an exit status. */
static int reg_open(const struct cli *cli, const struct reg_args *a, const char *host, struct cli_progress *p,
		    strata_registry **out)
{
	strata_registry *reg = NULL;
	char *user = NULL, *pass = NULL;
	int status;

	if ((status = cli_registry_lookup(cli, a->creds, a->authfile, host, &user, &pass)) != CLI_OK)
		return status;
	if (strata_registry_new(&reg) < 0 || strata_registry_set_tls(reg, a->cacert, !a->tls_noverify) < 0 ||
	    strata_registry_set_cert_dir(reg, a->cert_dir) < 0 || strata_registry_set_certs_dirs(reg, cli_certs_d()) < 0 ||
	    strata_registry_set_mount_from(reg, a->from) < 0 || strata_registry_set_credentials(reg, user, pass) < 0) {
		cli_err(cli, "out of memory");
		status = CLI_FAIL;
		goto out;
	}
	strata_registry_set_plain_http(reg, a->insecure);
	strata_registry_set_timeout(reg, (unsigned)a->timeout);
	strata_registry_set_progress(reg, cli_progress_cb, p);
	*out = reg;
	reg = NULL;
	status = CLI_OK;
out:
	strata_registry_free(reg);
	free(user);
	free(pass);
	return status;
}

int cmd_push(struct cli *cli, int argc, char **argv)
{
	struct reg_args a = { 0 };
	strata_registry *reg = NULL;
	struct strata_reference ref;
	strata_store *st = NULL;
	char dg[STRATA_DIGEST_LEN + 1];
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
			if (*end || v < STRATA_CHUNK_MIN || v > STRATA_CHUNK_MAX || (v & (v - 1))) {
				cli_err(cli, "push: --chunk-size must be a power of two from %u to %u", STRATA_CHUNK_MIN,
					STRATA_CHUNK_MAX);
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
	if (strata_reference_parse(target, &ref) < 0)
		return ref_refuse(cli, "push", target, "REGISTRY/REPOSITORY[:TAG]");
	if (ref.digest) {
		cli_err(cli, "push: '%s' names a digest: a push is to REGISTRY/REPOSITORY[:TAG] (it prints the digest)",
			target);
		return CLI_USAGE;
	}
	struct cli_progress p = { .tty = !a.json && isatty(2), .json = a.json, .out = stdout };
	/* Writable (if the store is) for the sha256 table. */
	if ((status = cli_strata_store_open(cli, true, &st)) != CLI_OK)
		return status;
	if ((status = reg_open(cli, &a, ref.host, &p, &reg)) != CLI_OK)
		goto out_close;
	if (strata_registry_set_chunk_size(reg, chunk_size) < 0 || strata_registry_set_whole_configs(reg, whole) < 0 ||
	    strata_registry_set_annotations(reg, ann) < 0) {
		cli_err(cli, "out of memory");
		status = CLI_FAIL;
		goto out_close;
	}
	rc = strata_store_push(st, reg, snap, target);
	char why[1024];
	snprintf(why, sizeof(why), "%s", strata_errdetail()); /* before the next call empties it */
	cli_progress_end(&p);
	/* The working-set record, if the snapshot has one, follows it: the
	 * snapshot's digest is there when only the record failed. */
	if (rc < 0 && strata_store_push_digest(st, dg) == 0) {
		cli_xfer_report(cli, "push: the snapshot was pushed, but not its working set", rc, why);
		status = cli_xfer_exit(rc);
		goto out_close;
	}
	if (rc < 0) {
		char what[1200];
		if (rc == STRATA_E_NOT_FOUND || rc == STRATA_E_BAD_NAME) {
			cli_err(cli, "push: snapshot '%s' not found in store %s", snap, cli->store);
			status = cli_xfer_exit(rc);
			goto out_close;
		}
		snprintf(what, sizeof(what), "push of '%s' to %s failed", snap, target);
		cli_xfer_report(cli, what, rc, why);
		status = cli_xfer_exit(rc);
		goto out_close;
	}
	strata_store_push_digest(st, dg);
	bool ws = xfer(st, STRATA_STORE_INFO_XFER_WS_FOUND);
	if (a.json) {
		stats_json(stdout, "done", st);
		printf(",\"digest\":\"%s\",\"working_set\":%s}\n", dg, ws ? "true" : "false");
	} else {
		printf("%s\n", dg);
	}
	cli_info(cli, "%" PRIu64 " snapshot(s); %" PRIu64 " blob(s) sent (%" PRIu64 " bytes), %" PRIu64
		      " already there (%" PRIu64 " bytes), %" PRIu64 " mounted; %" PRIu64 " bytes up, %" PRIu64
		      " down in %" PRIu64 " requests; sha256 over %" PRIu64 " bytes",
		 xfer(st, STRATA_STORE_INFO_XFER_SNAPSHOTS), xfer(st, STRATA_STORE_INFO_XFER_BLOBS_MOVED),
		 xfer(st, STRATA_STORE_INFO_XFER_BYTES_MOVED), xfer(st, STRATA_STORE_INFO_XFER_BLOBS_SKIPPED),
		 xfer(st, STRATA_STORE_INFO_XFER_BYTES_SKIPPED), xfer(st, STRATA_STORE_INFO_XFER_WIRE_MOUNTS),
		 xfer(st, STRATA_STORE_INFO_XFER_WIRE_UP), xfer(st, STRATA_STORE_INFO_XFER_WIRE_DOWN),
		 xfer(st, STRATA_STORE_INFO_XFER_WIRE_REQUESTS), xfer(st, STRATA_STORE_INFO_XFER_BYTES_SHA256));
	if (ws)
		cli_info(cli, "working set: record of %" PRIu64 " bytes sent, listed %s",
			 xfer(st, STRATA_STORE_INFO_XFER_WS_BYTES),
			 xfer(st, STRATA_STORE_INFO_XFER_WS_REFERRERS_API) ? "by the registry's referrers API"
									   : "in the tag schema's index sha256-<digest>");
	status = CLI_OK;
out_close:
	strata_registry_free(reg);
	strata_store_close(st);
	return status;
}

/* The lines a pull warns with, kept to print after its progress ends. */
struct warnings {
	char text[4096];
	size_t len;
};

static void warning_keep(void *ctx, const char *line)
{
	struct warnings *w = ctx;
	int n = snprintf(w->text + w->len, sizeof(w->text) - w->len, "strata: pull: warning: %s\n", line);

	if (n > 0)
		w->len = w->len + (size_t)n < sizeof(w->text) ? w->len + (size_t)n : sizeof(w->text) - 1;
}

struct tag_find {
	const char *tag;
	char id[STRATA_ID_LEN + 1];
};

static int tag_match(void *ctx, const char *name, const char *id)
{
	struct tag_find *f = ctx;

	if (strcmp(name, f->tag) != 0)
		return 0;
	snprintf(f->id, sizeof(f->id), "%s", id);
	return 1; /* found: stop */
}

/* Refuse, before anything is fetched, a tag that names a snapshot from
 * another repository than origin ("host/repo") or one made here (unless
 * force): a pull would move it. Reports; returns an exit status. */
static int pull_tag_check(const struct cli *cli, strata_store *st, const char *tag, const char *origin, bool force)
{
	char have[STRATA_ORIGIN_LEN + 1];
	struct tag_find f = { .tag = tag };

	if (!tag || force || strata_store_tags(st, tag_match, &f) < 0 || !f.id[0])
		return CLI_OK; /* a new tag */
	int rc = strata_store_origin(st, f.id, have, sizeof(have));
	if (rc == 0 && strcmp(have, origin) == 0)
		return CLI_OK; /* the same repository: an update, checked when its manifest is in */
	cli_err(cli, "pull: tag '%s' already names snapshot %s%s%s, not one from %s; nothing was fetched "
		     "(use --tag NAME to keep both, or --force to move it)", tag, f.id, rc == 0 ? " from " : "",
		rc == 0 ? have : " (made here)", origin);
	return CLI_FAIL;
}

int cmd_pull(struct cli *cli, int argc, char **argv)
{
	struct reg_args a = { 0 };
	strata_registry *reg = NULL;
	struct strata_reference ref;
	strata_store *st = NULL;
	const char *tag = NULL;
	char hex[STRATA_ID_LEN + 1];
	unsigned flags = STRATA_PULL_KEEP_PARTIAL;
	const char *timeout = getenv("STRATA_PULL_TIMEOUT");
	unsigned long secs = PULL_TIMEOUT_DEFAULT;
	struct warnings warned = { .len = 0 };
	int c, rc, status = CLI_OK;

	while ((c = getopt_long(argc, argv, "t:fh", reg_opts, NULL)) != -1) {
		switch (c) {
		case OPT_TIMEOUT: timeout = optarg; break;
		case 't': tag = optarg; break;
		case 'f': flags |= STRATA_TAG_FORCE; break;
		case OPT_LAZY: flags |= STRATA_PULL_LAZY | STRATA_PULL_PREFETCH; break;
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
	a.timeout = secs;
	const char *from = argv[optind];
	if (strata_reference_parse(from, &ref) < 0)
		return ref_refuse(cli, "pull", from, "REGISTRY/REPOSITORY[:TAG|@sha256:DIGEST]");
	if (!tag && !ref.digest)
		tag = ref.tag;
	if (tag && !strata_tag_valid(tag)) {
		cli_err(cli, "pull: '%s' is not a valid tag name", tag);
		return CLI_USAGE;
	}
	struct cli_progress p = { .tty = !a.json && isatty(2), .json = a.json, .pull = true, .out = stdout };
	if ((status = cli_strata_store_create_open(cli, &st)) != CLI_OK)
		return status;
	char origin[STRATA_ORIGIN_LEN + 1];
	snprintf(origin, sizeof(origin), "%s/%s", ref.host, ref.repository);
	if ((status = pull_tag_check(cli, st, tag, origin, flags & STRATA_TAG_FORCE)) != CLI_OK)
		goto out_close;
	if ((status = reg_open(cli, &a, ref.host, &p, &reg)) != CLI_OK)
		goto out_close;
	strata_registry_set_warning_fn(reg, warning_keep, &warned);
	/* The working-set record comes with the snapshot; a lazy snapshot's
	 * working set is fetched now, first, in parallel Range requests: the
	 * restore then finds it present. */
	rc = strata_store_pull(st, reg, from, tag, flags, hex);
	char why[1024];
	snprintf(why, sizeof(why), "%s", strata_errdetail()); /* before the next call empties it */
	cli_progress_end(&p);
	fputs(warned.text, stderr);
	if (rc < 0) {
		char what[1200];
		if (rc == STRATA_E_EXISTS) {
			cli_err(cli, "pull: tag '%s' already names another snapshot (use --tag NAME or --force)", tag);
			status = CLI_FAIL;
			goto out_close;
		}
		if (rc == STRATA_E_DEADLINE)
			snprintf(what, sizeof(what), "pull of %s gave up after %lu s (--timeout, $STRATA_PULL_TIMEOUT)",
				 from, secs);
		else
			snprintf(what, sizeof(what), "pull of %s failed%s", from,
				 xfer(st, STRATA_STORE_INFO_XFER_BYTES_MOVED) &&
						 (rc == STRATA_E_NET || rc == -EPIPE || rc == STRATA_E_HTTP)
					 ? " (what arrived is kept: run it again to resume)"
					 : "");
		cli_xfer_report(cli, what, rc, why);
		status = cli_xfer_exit(rc);
		goto out_close;
	}
	uint64_t completed = xfer(st, STRATA_STORE_INFO_XFER_LAYERS_COMPLETED);
	if (completed)
		cli_info(cli, "%" PRIu64 " lazy layer(s) completed (%" PRIu64 " bytes fetched in %" PRIu64 " requests)",
			 completed, xfer(st, STRATA_STORE_INFO_XFER_BYTES_COMPLETED),
			 xfer(st, STRATA_STORE_INFO_XFER_COMPLETED_REQUESTS));
	bool ws = xfer(st, STRATA_STORE_INFO_XFER_WS_FOUND);
	if (a.json) {
		stats_json(stdout, "done", st);
		printf(",\"id\":\"%s\",\"existed\":%s,\"layers_lazy\":%" PRIu64 ",\"bytes_chunk_index\":%" PRIu64
		       ",\"layers_completed\":%" PRIu64 ",\"bytes_completed\":%" PRIu64
		       ",\"working_set\":%s,\"working_set_bytes\":%" PRIu64 ",\"prefetch_requests\":%" PRIu64
		       ",\"prefetch_bytes\":%" PRIu64 "}\n",
		       hex, xfer(st, STRATA_STORE_INFO_XFER_EXISTED) ? "true" : "false",
		       xfer(st, STRATA_STORE_INFO_XFER_LAYERS_LAZY), xfer(st, STRATA_STORE_INFO_XFER_BYTES_CHUNK_INDEX),
		       completed, xfer(st, STRATA_STORE_INFO_XFER_BYTES_COMPLETED), ws ? "true" : "false",
		       xfer(st, STRATA_STORE_INFO_XFER_WS_BYTES), xfer(st, STRATA_STORE_INFO_XFER_PREFETCH_REQUESTS),
		       xfer(st, STRATA_STORE_INFO_XFER_PREFETCH_BYTES));
	} else {
		printf("%s\n", hex);
	}
	cli_info(cli, "%" PRIu64 " snapshot(s); %" PRIu64 " layer(s) fetched (%" PRIu64 " bytes, %" PRIu64
		      " resumed), %" PRIu64 " already in the store; %" PRIu64 " bytes down, %" PRIu64 " up in %" PRIu64
		      " requests",
		 xfer(st, STRATA_STORE_INFO_XFER_SNAPSHOTS), xfer(st, STRATA_STORE_INFO_XFER_BLOBS_MOVED),
		 xfer(st, STRATA_STORE_INFO_XFER_BYTES_MOVED), xfer(st, STRATA_STORE_INFO_XFER_BYTES_RESUMED),
		 xfer(st, STRATA_STORE_INFO_XFER_BLOBS_SKIPPED), xfer(st, STRATA_STORE_INFO_XFER_WIRE_DOWN),
		 xfer(st, STRATA_STORE_INFO_XFER_WIRE_UP), xfer(st, STRATA_STORE_INFO_XFER_WIRE_REQUESTS));
	if (ws)
		cli_info(cli, "working set: record of %" PRIu64 " bytes, found %s", xfer(st, STRATA_STORE_INFO_XFER_WS_BYTES),
			 xfer(st, STRATA_STORE_INFO_XFER_WS_REFERRERS_API) ? "by the registry's referrers API"
									   : "in the tag schema's index");
	if (xfer(st, STRATA_STORE_INFO_XFER_PREFETCH_JOBS))
		cli_info(cli, "working set: %" PRIu64 " bytes of pages fetched first (%" PRIu64 " bytes in %" PRIu64
			      " Range request(s), %" PRIu64 " in parallel)",
			 xfer(st, STRATA_STORE_INFO_XFER_PREFETCH_WS_BYTES), xfer(st, STRATA_STORE_INFO_XFER_PREFETCH_BYTES),
			 xfer(st, STRATA_STORE_INFO_XFER_PREFETCH_REQUESTS), xfer(st, STRATA_STORE_INFO_XFER_PREFETCH_JOBS));
	status = CLI_OK;
out_close:
	strata_registry_free(reg);
	strata_store_close(st);
	return status;
}
