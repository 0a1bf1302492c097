/* test_register.c: registering host functions: typed signatures, every bad input refused with the functions as before, replacement, no registration during a call. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "helpers.h"

static int add_counted(void *ctx, const struct vmm_value *a, size_t n, struct vmm_value *ret)
{
	unsigned *calls = ctx;

	(void)n;
	(*calls)++;
	ret->type = VMM_I64;
	ret->i64 = a[0].i64 + a[1].i64;
	return 0;
}

static int len_of(void *ctx, const struct vmm_value *a, size_t n, struct vmm_value *ret)
{
	(void)ctx;
	(void)n;
	ret->type = VMM_I64;
	ret->i64 = (int64_t)a[0].len;
	return 0;
}

/* host_status(name, "x"): the status the guest gets calling host function
 * `name` with one string (0 OK, 1 no function, 2 bad arguments). */
static int64_t status_of(struct vmm_sandbox *sb, const char *name)
{
	struct vmm_value v[2] = { { .type = VMM_STR, .data = name, .len = strlen(name) },
				  { .type = VMM_STR, .data = "x", .len = 1 } };
	struct vmm_result res;

	cr_assert_eq(vmm_sandbox_call(sb, "host_status", v, 2, &res), 0, "%s", vmm_sandbox_error(sb)->message);
	return res.i64;
}

static const struct vmm_signature add_sig = { .ret = VMM_I64, .nparams = 2, .params = { VMM_I64, VMM_I64 } };
static const struct vmm_signature len_sig = { .ret = VMM_I64, .nparams = 1, .params = { VMM_STR } };

Test(vmm_register, each_bad_input_is_refused_and_the_functions_stay_as_they_were)
{
	struct vmm_sandbox *sb = guest_new(NULL);
	unsigned calls = 0;
	struct vmm_error err;
	struct vmm_result res;
	char long_name[VMM_NAME_MAX + 2];

	memset(long_name, 'n', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = 0;
	cr_assert_eq(vmm_sandbox_register(sb, "host_add", &add_sig, add_counted, &calls, &err), 0, "%s",
		     err.message);
	struct vmm_signature bad_ret = add_sig, too_many = add_sig, void_param = add_sig, junk_param = add_sig;
	bad_ret.ret = (enum vmm_type)9;
	too_many.nparams = VMM_MAX_PARAMS + 1;
	void_param.params[1] = VMM_VOID;
	junk_param.params[0] = (enum vmm_type)-1;
	const struct {
		const char *name;
		const struct vmm_signature *sig;
		vmm_host_fn_cb cb;
		const char *why;
	} bad[] = {
		{ NULL, &add_sig, add_counted, "name" },
		{ "", &add_sig, add_counted, "name" },
		{ long_name, &add_sig, add_counted, "at most" },
		{ "host_add", NULL, add_counted, "no signature" },
		{ "host_add", &bad_ret, add_counted, "result type" },
		{ "host_add", &too_many, add_counted, "parameters" },
		{ "host_add", &void_param, add_counted, "parameter 2" },
		{ "host_add", &junk_param, add_counted, "parameter 1" },
		{ "host_add", &add_sig, NULL, "callback" },
		{ "host_new", &bad_ret, len_of, "result type" },
		{ "host_new", &add_sig, NULL, "callback" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&err, 0, sizeof(err));
		cr_assert_eq(vmm_sandbox_register(sb, bad[i].name, bad[i].sig, bad[i].cb, NULL, &err), -EINVAL,
			     "case %zu", i);
		cr_assert_eq(err.code, -EINVAL, "case %zu", i);
		cr_assert(strstr(err.message, bad[i].why), "case %zu: '%s' says '%s'", i, err.message, bad[i].why);
		/* NULL err: the same refusal, nothing written. */
		cr_assert_eq(vmm_sandbox_register(sb, bad[i].name, bad[i].sig, bad[i].cb, NULL, NULL), -EINVAL);
		/* host_add is the one registered first, with its context. */
		unsigned before = calls;
		cr_assert_eq(call_i64(sb, "add", 40, 2, 2, &res), 0, "%s", vmm_sandbox_error(sb)->message);
		cr_assert_eq(res.i64, 42);
		cr_assert_eq(calls, before + 1, "case %zu: the first host_add still answers", i);
		cr_assert_eq(status_of(sb, "host_new"), 1, "case %zu: nothing new was registered", i);
		cr_assert_eq(status_of(sb, "host_upper"), 0, "case %zu: the others are untouched", i);
	}
	vmm_sandbox_free(sb);
}

Test(vmm_register, a_signature_is_copied_and_a_name_is_replaced_in_place)
{
	struct vmm_sandbox *sb = guest_new(NULL);
	struct vmm_signature sig = len_sig;
	struct vmm_error err;

	/* Entries past nparams are ignored, and the caller's copy may change. */
	sig.params[3] = (enum vmm_type)77;
	cr_assert_eq(vmm_sandbox_register(sb, "host_len", &sig, len_of, NULL, &err), 0, "%s", err.message);
	sig.params[0] = VMM_I64;
	cr_assert_eq(status_of(sb, "host_len"), 0, "registered as i(s): a string argument fits");
	/* Replacing host_upper (s(s)) by an i(i) one: a string no longer fits. */
	struct vmm_signature ii = { .ret = VMM_I64, .nparams = 1, .params = { VMM_I64 } };
	cr_assert_eq(vmm_sandbox_register(sb, "host_upper", &ii, len_of, NULL, &err), 0, "%s", err.message);
	cr_assert_eq(status_of(sb, "host_upper"), 2, "the replacement's signature holds");
	/* The longest name is accepted. */
	char name[VMM_NAME_MAX + 1];
	memset(name, 'n', VMM_NAME_MAX);
	name[VMM_NAME_MAX] = 0;
	cr_assert_eq(vmm_sandbox_register(sb, name, &len_sig, len_of, NULL, &err), 0, "%s", err.message);
	cr_assert_eq(status_of(sb, name), 0);
	vmm_sandbox_free(sb);
}

struct reenter {
	struct vmm_sandbox *sb;
	int rc;
	struct vmm_error err;
};

/* A host function that tries to register another while its call runs. */
static int register_during_call(void *ctx, const struct vmm_value *a, size_t n, struct vmm_value *ret)
{
	struct reenter *r = ctx;

	(void)a;
	(void)n;
	r->rc = vmm_sandbox_register(r->sb, "host_late", &len_sig, len_of, NULL, &r->err);
	ret->type = VMM_I64;
	ret->i64 = 0;
	return 0;
}

Test(vmm_register, no_registration_while_a_call_runs)
{
	struct vmm_sandbox *sb = guest_new(NULL);
	struct reenter r = { .sb = sb };
	struct vmm_error err;

	cr_assert_eq(vmm_sandbox_register(sb, "host_reenter", &len_sig, register_during_call, &r, &err), 0, "%s",
		     err.message);
	cr_assert_eq(status_of(sb, "host_reenter"), 0);
	cr_assert_eq(r.rc, VMM_E_BUSY, "%s", r.err.message);
	cr_assert(strstr(r.err.message, "call is running"), "%s", r.err.message);
	cr_assert_eq(status_of(sb, "host_late"), 1, "nothing was registered");
	/* After the call, the same registration goes through. */
	cr_assert_eq(vmm_sandbox_register(sb, "host_late", &len_sig, len_of, NULL, &err), 0, "%s", err.message);
	cr_assert_eq(status_of(sb, "host_late"), 0);
	vmm_sandbox_free(sb);
}

Test(vmm_register, the_guests_functions_come_with_their_types)
{
	struct vmm_sandbox *sb = guest_new(NULL);
	const struct vmm_signature *sig;
	const char *name;
	bool echo = false, add = false;

	cr_assert_gt(vmm_sandbox_function_count(sb), 10);
	for (unsigned i = 0; i < vmm_sandbox_function_count(sb); i++) {
		cr_assert_eq(vmm_sandbox_function(sb, i, &name, &sig), 0);
		if (strcmp(name, "echo") == 0)
			echo = sig->ret == VMM_STR && sig->nparams == 1 && sig->params[0] == VMM_STR;
		if (strcmp(name, "add") == 0)
			add = sig->ret == VMM_I64 && sig->nparams == 2 && sig->params[0] == VMM_I64 &&
			      sig->params[1] == VMM_I64;
	}
	cr_assert(echo && add, "echo s(s), add i(ii)");
	cr_assert_eq(vmm_sandbox_function(sb, vmm_sandbox_function_count(sb), &name, &sig), -ENOENT);
	vmm_sandbox_free(sb);
}
