/* host_function.c: a guest function that calls back into the host: register host_add, call the guest's add. */
#include <stdio.h>
#include <stdlib.h>

#include <vmm/vmm.h>

/* Called by the guest as host_add(i, i) -> i. Arguments are already checked
 * against the signature given at registration. */
static int host_add(void *ctx, const struct vmm_value *args, size_t nargs, struct vmm_value *ret)
{
	unsigned *calls = ctx;

	(void)nargs;
	(*calls)++;
	ret->type = VMM_I64;
	ret->i64 = args[0].i64 + args[1].i64;
	return 0;
}

int main(int argc, char **argv)
{
	struct vmm_sandbox *sb = NULL;
	struct vmm_error err;
	unsigned calls = 0;
	int status = 1;

	if (argc != 4) {
		fprintf(stderr, "usage: %s GUEST.elf A B\n", argv[0]);
		return 2;
	}
	if (vmm_sandbox_new(argv[1], NULL, &sb, &err) < 0) {
		fprintf(stderr, "%s: %s\n", argv[1], err.message);
		return 1;
	}
	/* host_add(i64, i64) -> i64: the guest's calls are checked against it. */
	static const struct vmm_signature add_sig = { .ret = VMM_I64, .nparams = 2, .params = { VMM_I64, VMM_I64 } };
	if (vmm_sandbox_register(sb, "host_add", &add_sig, host_add, &calls, &err) < 0) {
		fprintf(stderr, "host_add: %s\n", err.message);
		goto out;
	}
	struct vmm_value args[2] = {
		{ .type = VMM_I64, .i64 = atoll(argv[2]) },
		{ .type = VMM_I64, .i64 = atoll(argv[3]) },
	};
	struct vmm_result res = { 0 };
	if (vmm_sandbox_call(sb, "add", args, 2, &res) < 0) {
		fprintf(stderr, "add: %s\n", vmm_sandbox_error(sb)->message);
		goto out;
	}
	printf("add(%s, %s) = %lld, host_add called %u time(s)\n", argv[2], argv[3], (long long)res.i64, calls);
	vmm_result_clear(&res);
	status = 0;
out:
	vmm_sandbox_free(sb);
	return status;
}
