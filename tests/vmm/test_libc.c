/* test_libc.c: the guest C library's clock comes from the host's clock_gettime when the host registers one (libcguest), and fails with ENOSYS otherwise. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "helpers.h"

static struct vmm_sandbox *libc_new(void)
{
	static char path[4096];
	const char *build = getenv("STRATA_BUILD");
	struct vmm_sandbox *sb = NULL;
	struct vmm_error err;

	snprintf(path, sizeof path, "%s/vmm/guest/libcguest.elf", build ? build : ".");
	/* No config: the default host, on the backend this run of the suite names. */
	int rc = vmm_sandbox_new(path, NULL, &sb, &err);
	cr_assert_eq(rc, 0, "sandbox_new(%s): %s", path, err.message);
	return sb;
}

/* The host's clock, in nanoseconds, for the clock id the guest asks. */
static int host_clock(void *ctx, const struct vmm_value *a, size_t n, struct vmm_value *ret)
{
	struct timespec ts;

	(void)ctx;
	(void)n;
	if (clock_gettime((clockid_t)a[0].i64, &ts) != 0)
		return -EINVAL;
	ret->type = VMM_I64;
	ret->i64 = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	return 0;
}

static long long realtime_sec(void)
{
	struct timespec ts;

	cr_assert_eq(clock_gettime(CLOCK_REALTIME, &ts), 0);
	return (long long)ts.tv_sec;
}

/* now() -> "time rc errno sec clock" */
static void guest_now(struct vmm_sandbox *sb, long long *t, int *rc, int *e, long long *sec, long *clk)
{
	struct vmm_result res;

	cr_assert_eq(vmm_sandbox_call(sb, "now", NULL, 0, &res), 0, "%s", vmm_sandbox_error(sb)->message);
	cr_assert_eq(sscanf(res.data, "%lld %d %d %lld %ld", t, rc, e, sec, clk), 5, "now: %s", (char *)res.data);
	vmm_result_clear(&res);
}

Test(libc, time_and_clock_come_from_the_host_clock_gettime)
{
	struct vmm_sandbox *sb = libc_new();
	static const struct vmm_signature sig = { .ret = VMM_I64, .nparams = 1, .params = { VMM_I64 } };
	struct vmm_error err;
	long long t, sec;
	long clk;
	int rc, e;

	cr_assert_eq(vmm_sandbox_register(sb, "clock_gettime", &sig, host_clock, NULL, &err), 0, "%s", err.message);
	/* The bounds from the clock the guest reads through the host function:
	 * the host's own time() reads the coarse clock, which can lag
	 * CLOCK_REALTIME by a tick and put a second boundary between them. */
	long long before = realtime_sec();
	guest_now(sb, &t, &rc, &e, &sec, &clk);
	long long after = realtime_sec();
	cr_assert_eq(rc, 0, "clock_gettime failed with errno %d", e);
	cr_assert(t >= before && t <= after, "guest time() %lld, host %lld..%lld", t, before, after);
	cr_assert(sec >= before && sec <= after, "guest CLOCK_REALTIME %lld, host %lld..%lld", sec, before, after);
	cr_assert_geq(clk, 0, "clock() %ld", clk);
	vmm_sandbox_free(sb);
}

Test(libc, without_a_host_clock_time_is_minus_one_and_clock_gettime_enosys)
{
	struct vmm_sandbox *sb = libc_new();
	long long t, sec;
	long clk;
	int rc, e;

	guest_now(sb, &t, &rc, &e, &sec, &clk);
	cr_assert_eq(t, -1);
	cr_assert_eq(rc, -1);
	cr_assert_eq(e, ENOSYS);
	cr_assert_eq(clk, -1);
	vmm_sandbox_free(sb);
}
