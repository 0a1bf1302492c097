/* cmd_oci.c: the registry credentials and certificates push, pull and export use (cmd_xfer.c and cmd_export.c are the commands). */
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

