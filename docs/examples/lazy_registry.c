/* lazy_registry.c: restore a sandbox from a snapshot in an OCI registry before its pages arrive: a lazy pull, then calls; each page is fetched when the guest first touches it. */
#include <stdio.h>
#include <string.h>

#include <strata.h>

int main(int argc, char **argv)
{
	strata_host *host = NULL;
	strata_store *store = NULL;
	strata_registry *reg = NULL;
	strata_sandbox *sb = NULL;
	int status = 1, backend = STRATA_BACKEND_AUTO, bad = 0;

	/* A last --backend auto|kvm|process (strata_backend_parse's words):
	 * where the sandboxes run; auto is KVM where /dev/kvm opens. */
	if (argc > 2 && strcmp(argv[argc - 2], "--backend") == 0) {
		bad = strata_backend_parse(argv[argc - 1], &backend) < 0;
		argc -= 2;
	}
	if ((argc != 4 && !(argc == 5 && strcmp(argv[4], "--plain-http") == 0)) || bad) {
		fprintf(stderr, "usage: %s STORE REGISTRY/REPOSITORY:TAG FUNCTION [--plain-http] [--backend B]\n", argv[0]);
		return 2;
	}
	if (strata_host_new(&host) < 0 || strata_host_set_backend(host, backend) < 0 ||
	    strata_store_open(argv[1], STRATA_STORE_CREATE, &store) < 0 || strata_registry_new(&reg) < 0) {
		fprintf(stderr, "%s\n", strata_errmsg());
		goto out;
	}
	/* A registry on loopback speaks plain HTTP; give up after a minute. */
	strata_registry_set_plain_http(reg, argc == 5);
	strata_registry_set_timeout(reg, 60);
	/* The manifest, config and chunk indexes now; the layers' chunks as
	 * the guest touches them, each checked against its digest. */
	if (strata_sandbox_pull(host, store, reg, argv[2], STRATA_PULL_LAZY, &sb) < 0) {
		fprintf(stderr, "%s\n", strata_errmsg());
		goto out;
	}
	printf("backend: %s\n", strata_backend_name(strata_sandbox_backend(sb)));
	for (int i = 0; i < 2; i++) {
		struct strata_result res = { 0 };

		if (strata_sandbox_call(sb, argv[3], NULL, 0, 0, &res) < 0) {
			fprintf(stderr, "%s\n", strata_errmsg());
			goto out;
		}
		printf("call %d: %lld\n", i + 1, (long long)res.i64);
		strata_result_clear(&res);
		strata_sandbox_restore(sb);
	}
	status = 0;
out:
	strata_sandbox_free(sb);
	strata_store_close(store); /* after its sandboxes: stops the lazy layers' server */
	strata_registry_free(reg);
	strata_host_free(host);
	return status;
}
