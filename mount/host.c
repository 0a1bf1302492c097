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

int cli_host_open(struct cli *cli)
{
	struct vmm_host_config hc;
	struct vmm_policy policy;
	struct vmm_error err;
	char why[4300];
	int rc;

	if (cli->host)
		return CLI_OK;
	vmm_host_config_defaults(&hc);
	const char *cache = getenv("STRATA_VM_CACHE");
	if (cache && *cache) {
		unsigned long long n;
		if (!cli_parse_u64(cache, &n) || n > VMM_HOST_SHELLS_MAX) {
			cli_err(cli, "STRATA_VM_CACHE wants a number of idle VMs from 0 to %u, not '%s'",
				VMM_HOST_SHELLS_MAX, cache);
			return CLI_USAGE;
		}
		hc.shells = (unsigned)n;
		hc.warm = n < VMM_HOST_WARM_MAX ? (unsigned)n : VMM_HOST_WARM_MAX;
	}
	const char *debug = getenv("STRATA_SNAP_DEBUG");
	hc.debug = debug && strcmp(debug, "1") == 0;
	if ((rc = cli_policy_load(&policy, why, sizeof(why))) < 0) {
		cli_err(cli, "reset policy: %s (run 'strata calibrate' to write a new one)", why);
		return CLI_FAIL;
	}
	hc.policy = &policy;
	/* --backend, $STRATA_BACKEND, or a subcommand's own --backend. */
	hc.backend = cli->backend;
	if ((rc = vmm_host_new(&hc, &cli->host, &err)) < 0) {
		cli_err(cli, "%s", err.message);
		return CLI_FAIL;
	}
	/* auto fell back: say so once per command, and how to choose the
	 * process backend outright (which says nothing). On a terminal, or
	 * with -v: what a script captures of stderr stays as it was. */
	if (cli->backend == VMM_BACKEND_AUTO && (cli->verbose || isatty(STDERR_FILENO)) &&
	    vmm_backend_resolve(cli->host, VMM_BACKEND_AUTO) == VMM_BACKEND_PROCESS && vmm_kvm_check(&err) < 0)
		fprintf(stderr, "strata: note: sandboxes run on the process backend, KVM cannot be used here (%s); "
			"--backend process or STRATA_BACKEND=process chooses it without this note\n", err.message);
	return CLI_OK;
}

void cli_host_close(struct cli *cli)
{
	/* -EBUSY only if a command kept a sandbox to the end: the process
	 * exits anyway. */
	if (vmm_host_free(cli->host) == 0)
		cli->host = NULL;
}
