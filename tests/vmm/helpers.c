/* helpers.c: shared helpers of the vmm tests. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "../backend_env.h"

const char *guest_path(void)
{
	static char buf[4096];
	const char *build = getenv("STRATA_BUILD");

	snprintf(buf, sizeof(buf), "%s/vmm/guest/simpleguest.elf", build ? build : ".");
	return buf;
}

static int host_add(void *ctx, const struct vmm_value *a, size_t n, struct vmm_value *ret)
{
	(void)ctx;
	(void)n;
	ret->type = VMM_I64;
	ret->i64 = (int64_t)((uint64_t)a[0].i64 + (uint64_t)a[1].i64);  /* wraps: random inputs */
	return 0;
}

static int host_upper(void *ctx, const struct vmm_value *a, size_t n, struct vmm_value *ret)
{
	static char buf[256];
	size_t len = a[0].len < sizeof(buf) ? a[0].len : sizeof(buf);

	(void)ctx;
	(void)n;
	for (size_t i = 0; i < len; i++)
		buf[i] = (char)toupper(((const unsigned char *)a[0].data)[i]);
	ret->type = VMM_STR;
	ret->data = buf;
	ret->len = len;
	return 0;
}

struct vmm_sandbox *guest_new(const struct vmm_config *cfg)
{
	return guest_new_at(guest_path(), cfg);
}

struct vmm_sandbox *guest_new_at(const char *path, const struct vmm_config *cfg)
{
	struct vmm_sandbox *sb = NULL;
	struct vmm_error err;
	int rc = vmm_sandbox_new(path, cfg, &sb, &err);

	cr_assert_eq(rc, 0, "sandbox_new(%s): %s (%s)", path, vmm_strerror(rc), err.message);
	static const struct vmm_signature add_sig = { .ret = VMM_I64, .nparams = 2, .params = { VMM_I64, VMM_I64 } },
					  upper_sig = { .ret = VMM_STR, .nparams = 1, .params = { VMM_STR } };
	cr_assert_eq(vmm_sandbox_register(sb, "host_add", &add_sig, host_add, NULL, &err), 0, "%s", err.message);
	cr_assert_eq(vmm_sandbox_register(sb, "host_upper", &upper_sig, host_upper, NULL, &err), 0, "%s", err.message);
	return sb;
}

int call_str(struct vmm_sandbox *sb, const char *fn, const char *arg, struct vmm_result *res)
{
	struct vmm_value v = { .type = VMM_STR, .data = arg, .len = strlen(arg) };

	return vmm_sandbox_call(sb, fn, &v, 1, res);
}

int call_i64(struct vmm_sandbox *sb, const char *fn, int64_t a, int64_t b, unsigned nargs, struct vmm_result *res)
{
	struct vmm_value v[2] = { { .type = VMM_I64, .i64 = a }, { .type = VMM_I64, .i64 = b } };

	return vmm_sandbox_call(sb, fn, v, nargs, res);
}

void *file_read(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *buf = malloc(n > 0 ? (size_t)n + 1 : 1);  /* NUL-terminated: a text file is a string */
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	if (buf)
		buf[n > 0 ? n : 0] = 0;
	fclose(f);
	*len = (size_t)n;
	return buf;
}

