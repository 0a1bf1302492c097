/* cmd_bench.c: `strata bench`: runs strata-bench, the benchmark program built beside strata in a build tree. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* Where strata-bench may be, relative to this binary's directory: beside it,
 * or where the build tree puts it (build/mount/strata, build/tests/bench/). */
static const char *const bench_places[] = { "strata-bench", "../tests/bench/strata-bench" };

int cmd_bench(struct cli *cli, int argc, char **argv)
{
	char self[PATH_MAX], path[PATH_MAX + 32];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *dir_end = NULL;

	if (n > 0) {
		self[n] = 0;
		dir_end = strrchr(self, '/');
	}
	if (!dir_end) {
		cli_err(cli, "bench: cannot find this program's path: %s", strerror(n < 0 ? errno : ENOENT));
		return CLI_FAIL;
	}
	size_t dir_len = (size_t)(dir_end - self);
	path[0] = 0;
	for (size_t i = 0; i < sizeof(bench_places) / sizeof(bench_places[0]); i++) {
		snprintf(path, sizeof(path), "%.*s/%s", (int)dir_len, self, bench_places[i]);
		if (access(path, X_OK) == 0)
			break;
		path[0] = 0;
	}
	if (!path[0]) {
		cli_err(cli, "bench: strata-bench is not beside %s: the benchmarks run from a build tree "
			     "(build/mount/strata bench), they are not installed", self);
		return CLI_FAIL;
	}
	/* strata-bench gets this command's arguments, the backend chosen by the
	 * global --backend or $STRATA_BACKEND, and this binary for the cases
	 * that run strata (mount, gc) in $STRATA_BIN. */
	char **args = calloc((size_t)argc + 3, sizeof(*args));
	int k = 0;
	if (!args) {
		cli_err(cli, "bench: %s", strerror(ENOMEM));
		return CLI_FAIL;
	}
	args[k++] = path;
	if (cli->backend != VMM_BACKEND_AUTO) {
		args[k++] = "--backend";
		args[k++] = (char *)vmm_backend_name(cli->backend);
	}
	for (int a = 1; a < argc; a++)
		args[k++] = argv[a];
	args[k] = NULL;
	if (setenv("STRATA_BIN", self, 1) == 0)
		execv(path, args);
	cli_err(cli, "bench: cannot run %s: %s", path, strerror(errno));
	free(args);
	return CLI_FAIL;
}
