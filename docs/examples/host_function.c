/* host_function.c: a guest function that calls back into the host: host_add lives on the host, the guest's add calls it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strata.h>

/* Called by the guest as host_add(i, i) -> i. The arguments are already
 * checked against the signature given at registration. */
static int host_add(void *ctx, const struct strata_value *args, size_t nargs, struct strata_value *ret)
{
	unsigned *calls = ctx;

	(void)nargs;
	(*calls)++;
	ret->type = STRATA_I64;
	ret->i64 = args[0].i64 + args[1].i64;
	return 0;
}

int main(int argc, char **argv)
{
	strata_host *host = NULL;
	strata_sandbox *sb = NULL;
	unsigned calls = 0;
	int status = 1, backend = STRATA_BACKEND_AUTO, bad = 0;

	/* A last --backend auto|kvm|process (strata_backend_parse's words):
	 * where the sandboxes run; auto is KVM where /dev/kvm opens. */
	if (argc > 2 && strcmp(argv[argc - 2], "--backend") == 0) {
		bad = strata_backend_parse(argv[argc - 1], &backend) < 0;
		argc -= 2;
	}
	if (argc != 4 || bad) {
		fprintf(stderr, "usage: %s GUEST.elf A B [--backend auto|kvm|process]\n", argv[0]);
		return 2;
	}
	if (strata_host_new(&host) < 0 || strata_host_set_backend(host, backend) < 0) {
		fprintf(stderr, "host: %s\n", strata_errmsg());
		goto out;
	}
	/* On the host: every sandbox it makes from now on has host_add, and
	 * keeps it across restores and captures. */
	if (strata_host_register(host, "host_add", "i(ii)", host_add, &calls) < 0 ||
	    strata_sandbox_new(host, argv[1], &sb) < 0) {
		fprintf(stderr, "%s\n", strata_errmsg());
		goto out;
	}
	printf("backend: %s\n", strata_backend_name(strata_sandbox_backend(sb)));
	struct strata_value args[2] = {
		{ .type = STRATA_I64, .i64 = atoll(argv[2]) },
		{ .type = STRATA_I64, .i64 = atoll(argv[3]) },
	};
	struct strata_result res = { 0 };
	if (strata_sandbox_call(sb, "add", args, 2, 0, &res) < 0) {
		fprintf(stderr, "%s\n", strata_errmsg());
		goto out;
	}
	printf("add(%s, %s) = %lld, host_add called %u time(s)\n", argv[2], argv[3], (long long)res.i64, calls);
	strata_result_clear(&res);
	status = 0;
out:
	strata_sandbox_free(sb);
	strata_host_free(host);
	return status;
}
