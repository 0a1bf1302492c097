/* memory_snapshot.c: in-memory snapshots of a sandbox made from an ELF: take one after each step, go back to any of them, with no store. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strata.h>

#define STEPS 3

/* One step: a call of FUNCTION (no arguments, an integer back, e.g. counter_next). */
static int step(strata_sandbox *sb, const char *fn, long long *out)
{
	struct strata_result res = { 0 };

	if (strata_sandbox_call(sb, fn, NULL, 0, 0, &res) < 0)
		return -1;
	*out = (long long)res.i64;
	strata_result_clear(&res);
	return 0;
}

int main(int argc, char **argv)
{
	strata_host *host = NULL;
	strata_sandbox *sb = NULL;
	strata_snapshot *after[STEPS] = { 0 };
	long long v;
	int status = 1, backend = STRATA_BACKEND_AUTO, bad = 0;

	/* A last --backend auto|kvm|process (strata_backend_parse's words):
	 * where the sandboxes run; auto is KVM where /dev/kvm opens. */
	if (argc > 2 && strcmp(argv[argc - 2], "--backend") == 0) {
		bad = strata_backend_parse(argv[argc - 1], &backend) < 0;
		argc -= 2;
	}
	if (argc != 3 || bad) {
		fprintf(stderr, "usage: %s GUEST.elf FUNCTION [--backend auto|kvm|process]\n", argv[0]);
		return 2;
	}
	if (strata_host_new(&host) < 0 || strata_host_set_backend(host, backend) < 0 ||
	    strata_sandbox_new(host, argv[1], &sb) < 0) {
		fprintf(stderr, "%s\n", strata_errmsg());
		goto out;
	}
	printf("backend: %s\n", strata_backend_name(strata_sandbox_backend(sb)));
	/* A checkpoint after every step, kept in memory. */
	for (int i = 0; i < STEPS; i++) {
		if (step(sb, argv[2], &v) < 0 || strata_sandbox_snapshot(sb, &after[i]) < 0) {
			fprintf(stderr, "%s\n", strata_errmsg());
			goto out;
		}
		printf("step %d: %lld\n", i + 1, v);
	}
	/* Back to each checkpoint, newest to oldest, and one step on from it:
	 * exactly the pages written since are put back each time. */
	for (int i = STEPS - 1; i >= 0; i--) {
		if (strata_sandbox_restore_to(sb, after[i]) < 0 || step(sb, argv[2], &v) < 0) {
			fprintf(stderr, "%s\n", strata_errmsg());
			goto out;
		}
		printf("from step %d: %lld\n", i + 1, v);
	}
	status = 0;
out:
	strata_sandbox_free(sb);
	for (int i = 0; i < STEPS; i++)
		strata_snapshot_free(after[i]);
	strata_host_free(host);
	return status;
}
