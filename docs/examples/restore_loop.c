/* restore_loop.c: load a snapshot directory, call a function N times, restoring the sandbox in between. */
#include <stdio.h>
#include <stdlib.h>

#include <vmm/vmm.h>

int main(int argc, char **argv)
{
	struct vmm_snapdir *dir = NULL;
	struct vmm_sandbox *sb = NULL;
	struct vmm_host *host = NULL;
	struct vmm_error err;
	int rc, status = 1;

	if (argc != 4) {
		fprintf(stderr, "usage: %s SNAPSHOT_DIR FUNCTION N\n", argv[0]);
		return 2;
	}
	int n = atoi(argv[3]);
	/* What the program's sandboxes and snapshot directories share:
	 * default limits and policy. */
	if (vmm_host_new(NULL, &host, &err) < 0) {
		fprintf(stderr, "host: %s\n", err.message);
		return 1;
	}
	/* A mount's snapshots/NAME, an export or a plain copy: all the same. */
	if (vmm_snapdir_open(host, argv[1], 0, &dir, &err) < 0) {
		fprintf(stderr, "%s: %s\n", argv[1], err.message);
		goto out;
	}
	struct vmm_config cfg = { .host = host };
	if (vmm_sandbox_from_snapdir(dir, &cfg, &sb, &err) < 0) {
		fprintf(stderr, "cannot restore %s: %s\n", argv[1], err.message);
		goto out;
	}
	for (int i = 0; i < n; i++) {
		struct vmm_result res = { 0 };

		/* A function of no arguments returning an integer, e.g. counter_next. */
		rc = vmm_sandbox_call(sb, argv[2], NULL, 0, &res);
		if (rc < 0) {
			fprintf(stderr, "%s: %s\n", argv[2], vmm_sandbox_error(sb)->message);
			goto out;
		}
		printf("call %d: %lld\n", i + 1, (long long)res.i64);
		vmm_result_clear(&res);
		/* Put back exactly the pages the call wrote: the next call sees
		 * the snapshot again. */
		if ((rc = vmm_sandbox_restore(sb)) < 0) {
			fprintf(stderr, "restore: %s\n", vmm_strerror(rc));
			goto out;
		}
	}
	status = 0;
out:
	vmm_sandbox_free(sb);
	vmm_host_free(host); /* last: it keeps the freed sandbox warm until now */
	vmm_snapdir_close(dir);
	return status;
}
