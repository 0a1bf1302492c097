/* restore_loop.c: load a snapshot directory, call a function N times, restoring the sandbox in between. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strata.h>

int main(int argc, char **argv)
{
	strata_host *host = NULL;
	strata_sandbox *sb = NULL;
	int status = 1, backend = STRATA_BACKEND_AUTO, bad = 0;

	/* A last --backend auto|kvm|process (strata_backend_parse's words):
	 * where the sandboxes run; auto is KVM where /dev/kvm opens. */
	if (argc > 2 && strcmp(argv[argc - 2], "--backend") == 0) {
		bad = strata_backend_parse(argv[argc - 1], &backend) < 0;
		argc -= 2;
	}
	if (argc != 4 || bad) {
		fprintf(stderr, "usage: %s SNAPSHOT_DIR FUNCTION N [--backend auto|kvm|process]\n", argv[0]);
		return 2;
	}
	int n = atoi(argv[3]);
	/* What the program's sandboxes share: default limits, the backend chosen. */
	if (strata_host_new(&host) < 0 || strata_host_set_backend(host, backend) < 0) {
		fprintf(stderr, "host: %s\n", strata_errmsg());
		goto out;
	}
	/* A mount's snapshots/NAME, an export or a plain copy: all the same. */
	if (strata_sandbox_open_dir(host, argv[1], 0, &sb) < 0) {
		fprintf(stderr, "cannot restore %s\n", strata_errmsg());
		goto out;
	}
	printf("backend: %s\n", strata_backend_name(strata_sandbox_backend(sb)));
	for (int i = 0; i < n; i++) {
		struct strata_result res = { 0 };

		/* A function of no arguments returning an integer, e.g. counter_next. */
		if (strata_sandbox_call(sb, argv[2], NULL, 0, 0, &res) < 0) {
			fprintf(stderr, "%s\n", strata_errmsg());
			goto out;
		}
		printf("call %d: %lld\n", i + 1, (long long)res.i64);
		strata_result_clear(&res);
		/* Put back exactly the pages the call wrote: the next call sees
		 * the snapshot again. */
		if (strata_sandbox_restore(sb) < 0) {
			fprintf(stderr, "%s\n", strata_errmsg());
			goto out;
		}
	}
	status = 0;
out:
	strata_sandbox_free(sb);
	strata_host_free(host); /* last: it keeps the freed sandbox warm until now */
	return status;
}
