/* capture_store.c: run a guest, capture it into a store in one call (tagged), and restore back to that point. */
#include <stdio.h>
#include <string.h>

#include <strata.h>

static long long next(strata_sandbox *sb)
{
	struct strata_result res = { 0 };

	if (strata_sandbox_call(sb, "counter_next", NULL, 0, 0, &res) < 0) {
		fprintf(stderr, "%s\n", strata_errmsg());
		return -1;
	}
	return res.i64;
}

static int print_tag(void *ctx, const char *name, const char *id)
{
	(void)ctx;
	printf("tag %s -> %s\n", name, id);
	return 0;
}

int main(int argc, char **argv)
{
	strata_host *host = NULL;
	strata_store *st = NULL;
	strata_sandbox *sb = NULL;
	char id[STRATA_ID_LEN + 1];
	int status = 1, backend = STRATA_BACKEND_AUTO, bad = 0;

	/* A last --backend auto|kvm|process (strata_backend_parse's words):
	 * where the sandboxes run; auto is KVM where /dev/kvm opens. */
	if (argc > 2 && strcmp(argv[argc - 2], "--backend") == 0) {
		bad = strata_backend_parse(argv[argc - 1], &backend) < 0;
		argc -= 2;
	}
	if (argc != 4 || bad) {
		fprintf(stderr, "usage: %s STORE GUEST.elf TAG [--backend auto|kvm|process]\n", argv[0]);
		return 2;
	}
	if (strata_host_new(&host) < 0 || strata_host_set_backend(host, backend) < 0 ||
	    strata_store_open(argv[1], STRATA_STORE_CREATE, &st) < 0 || strata_sandbox_new(host, argv[2], &sb) < 0) {
		fprintf(stderr, "%s\n", strata_errmsg());
		goto out;
	}
	printf("backend: %s\n", strata_backend_name(strata_sandbox_backend(sb)));
	long long a = next(sb);
	/* Capture, commit durably, tag, and continue on the new snapshot. */
	if (a < 0 || strata_sandbox_capture(sb, st, argv[3], STRATA_TAG_FORCE, id) < 0) {
		fprintf(stderr, "capture: %s\n", strata_errmsg());
		goto out;
	}
	printf("counter %lld captured as %s (%s)\n", a, argv[3], id);
	long long b = next(sb), c = next(sb);
	/* Back to the captured point, not to the ELF's start. */
	if (b < 0 || c < 0 || strata_sandbox_restore(sb) < 0) {
		fprintf(stderr, "restore: %s\n", strata_errmsg());
		goto out;
	}
	printf("after %lld, %lld and a restore: %lld\n", b, c, next(sb));
	if (strata_store_tags(st, print_tag, NULL) < 0) {
		fprintf(stderr, "tags: %s\n", strata_errmsg());
		goto out;
	}
	status = 0;
out:
	strata_sandbox_free(sb);
	strata_store_close(st); /* after the sandbox captured into it */
	strata_host_free(host);
	return status;
}
