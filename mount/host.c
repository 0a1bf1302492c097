/* host.c: the host the command's sandboxes share, configured from the environment and the policy file. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

int cli_policy_path(char *buf, size_t len, bool *named)
{
	const char *env = getenv("STRATA_POLICY"), *x = getenv("XDG_CONFIG_HOME"), *h = getenv("HOME");
	int n;

	*named = env && *env;
	if (*named)
		n = snprintf(buf, len, "%s", env);
	else if (x && *x)
		n = snprintf(buf, len, "%s/strata/policy", x);
	else if (h && *h)
		n = snprintf(buf, len, "%s/.config/strata/policy", h);
	else
		return -ENOENT;
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int cli_policy_load(struct vmm_policy *p, char *why, size_t whylen)
{
	char path[4096];
	bool named;
	int rc;

	vmm_policy_defaults(p);
	if (cli_policy_path(path, sizeof(path), &named) < 0)
		return 0;
	/* The default location may hold nothing; a file named by
	 * $STRATA_POLICY must be there. */
	if (!named && access(path, F_OK) < 0 && errno == ENOENT)
		return 0;
	if ((rc = vmm_policy_read(path, p, why, whylen)) < 0 && named && rc == -ENOENT)
		snprintf(why, whylen, "STRATA_POLICY names %s, which does not exist", path);
	return rc;
}

/* The host's reset policy: the file cli_policy_path names if it exists (one
 * $STRATA_POLICY names must), else the defaults. Reports; an exit status. */
static int host_policy(const struct cli *cli)
{
	char path[4096];
	bool named;
	int rc;

	if (cli_policy_path(path, sizeof(path), &named) < 0)
		return CLI_OK;
	if (!named && access(path, F_OK) < 0 && errno == ENOENT)
		return CLI_OK;
	if ((rc = strata_host_set_policy(cli->host, path)) == 0)
		return CLI_OK;
	if (named && rc == -ENOENT)
		cli_err(cli, "reset policy: STRATA_POLICY names %s, which does not exist (run 'strata calibrate' to "
			"write a new one)", path);
	else
		cli_err(cli, "reset policy: %s (run 'strata calibrate' to write a new one)", strata_errmsg());
	return CLI_FAIL;
}

int cli_host_open(struct cli *cli)
{
	int status;

	if (cli->host)
		return CLI_OK;
	if (strata_host_new(&cli->host) < 0) {
		cli_err(cli, "%s", strata_errmsg());
		return CLI_FAIL;
	}
	const char *cache = getenv("STRATA_VM_CACHE");
	if (cache && *cache) {
		unsigned long long n;
		if (!cli_parse_u64(cache, &n) || n > VMM_HOST_SHELLS_MAX) {
			cli_err(cli, "STRATA_VM_CACHE wants a number of idle VMs from 0 to %u, not '%s'",
				VMM_HOST_SHELLS_MAX, cache);
			return CLI_USAGE;
		}
		strata_host_set_cache(cli->host, (unsigned)n, n < VMM_HOST_WARM_MAX ? (unsigned)n : VMM_HOST_WARM_MAX);
	}
	const char *debug = getenv("STRATA_SNAP_DEBUG");
	strata_host_set_debug(cli->host, debug && strcmp(debug, "1") == 0);
	if ((status = host_policy(cli)) != CLI_OK)
		return status;
	if (cli_host_fns_register(cli->host) < 0) {
		cli_err(cli, "cannot register host functions: %s", strata_errmsg());
		return CLI_FAIL;
	}
	/* auto fell back: say so once per command, and how to choose the
	 * process backend outright (which says nothing). On a terminal, or
	 * with -v: what a script captures of stderr stays as it was. */
	if (cli->backend == STRATA_BACKEND_AUTO && (cli->verbose || isatty(STDERR_FILENO)) &&
	    strata_host_backend(cli->host) == STRATA_BACKEND_PROCESS && strata_backend_check(STRATA_BACKEND_KVM) < 0)
		fprintf(stderr, "strata: note: sandboxes run on the process backend, KVM cannot be used here (%s); "
			"--backend process or STRATA_BACKEND=process chooses it without this note\n", strata_errmsg());
	return CLI_OK;
}

void cli_host_close(struct cli *cli)
{
	/* -EBUSY only if a command kept a sandbox to the end: the process
	 * exits anyway. */
	if (strata_host_free(cli->host) == 0)
		cli->host = NULL;
}
