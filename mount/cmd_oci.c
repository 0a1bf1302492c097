/* cmd_oci.c: snapshots as OCI layouts (export --oci, import of a layout) and the registry credentials and certificates push and pull use (cmd_xfer.c is the commands). */
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

/* An export's events as a transfer's (cli_progress_cb prints them). */
static void export_progress(void *ctx, const struct ix_oci_event *ev)
{
	static const int kinds[] = { [IX_OCI_BLOB_BEGIN] = STRATA_XFER_BEGIN, [IX_OCI_BLOB_BYTES] = STRATA_XFER_BYTES,
				     [IX_OCI_BLOB_END] = STRATA_XFER_END, [IX_OCI_BLOB_SKIP] = STRATA_XFER_SKIP,
				     [IX_OCI_MANIFEST] = STRATA_XFER_MANIFEST };
	static const int blobs[] = { [IX_OCI_LAYER] = STRATA_BLOB_LAYER, [IX_OCI_CONFIG] = STRATA_BLOB_CONFIG,
				     [IX_OCI_CHUNKS] = STRATA_BLOB_CHUNK_INDEX,
				     [IX_OCI_MANIFEST_BLOB] = STRATA_BLOB_MANIFEST };
	char dg[ST_DIGEST_LEN + 1];
	struct strata_xfer_event e = { .size = sizeof(e), .kind = kinds[ev->kind], .blob = blobs[ev->what],
				       .total = ev->size, .done = ev->done, .index = ev->index, .count = ev->count };

	if (ev->sha256) {
		st_digest_format(ev->sha256, dg);
		e.digest = dg;
	}
	cli_progress_cb(ctx, &e);
}

/* ------------------------------------------------------ layout commands */

int cli_oci_export(struct cli *cli, int argc, char **argv, bool whole_configs)
{
	struct cli_progress p = { .tty = isatty(2), .out = stdout };
	struct ix_oci_progress prog = { export_progress, &p };
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
		return cli_xfer_exit(rc);
	}
	if (rc < 0) {
		char what[300];
		snprintf(what, sizeof(what), "export of an OCI layout to %s failed", argv[0]);
		cli_xfer_report(cli, what, rc, why);
		return cli_xfer_exit(rc);
	}
	cli_info(cli, "%" PRIu32 " snapshot(s), %" PRIu32 " blob(s) written (%" PRIu64 " bytes), sha256 computed over %" PRIu64
		      " bytes",
		 st.snapshots, st.blobs_moved, st.bytes_moved, st.bytes_sha256);
	return CLI_OK;
}

/* ------------------------------------------------------- registry access */

struct cli_auth {
	struct ix_auth_provider p;
	char paths[CLI_AUTH_FILES][CLI_AUTH_PATH];
	const char *files[CLI_AUTH_FILES];
	char *user, *pass;  /* --creds, split */
};

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

int cli_registry_lookup(const struct cli *cli, const char *creds, const char *authfile, const char *host, char **user,
			char **pass)
{
	struct cli_auth ca;
	char why[ST_WHY_LEN] = "";
	int rc;

	if (auth_pick(&ca, creds, authfile) < 0) {
		cli_err(cli, "out of memory");
		return CLI_FAIL;
	}
	rc = ca.p.auth.get(ca.p.auth.ctx, host, user, pass, why, sizeof(why));
	auth_free(&ca);
	if (rc < 0) {
		cli_err(cli, "%s", why[0] ? why : "out of memory");
		return rc == -ENOENT ? CLI_NOTFOUND : CLI_FAIL;
	}
	return CLI_OK;
}

void cli_lazy_log(void *ctx, const char *msg)
{
	cli_err(ctx, "%s", msg);
}
