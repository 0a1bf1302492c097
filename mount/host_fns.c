/* host_fns.c: the host functions `strata run` and `strata pool` register on their host, and their operand rule. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <string.h>
#include <time.h>
#include <sys/random.h>

#include "cli_api.h"

static int host_add(void *ctx, const struct strata_value *a, size_t n, struct strata_value *ret)
{
	(void)ctx;
	(void)n;
	ret->type = STRATA_I64;
	ret->i64 = (int64_t)((uint64_t)a[0].i64 + (uint64_t)a[1].i64);
	return 0;
}

static int host_upper(void *ctx, const struct strata_value *a, size_t n, struct strata_value *ret)
{
	static char buf[4096];
	size_t len = a[0].len < sizeof(buf) - 1 ? a[0].len : sizeof(buf) - 1;

	(void)ctx;
	(void)n;
	for (size_t i = 0; i < len; i++)
		buf[i] = (char)toupper(((const unsigned char *)a[0].data)[i]);
	buf[len] = 0;
	ret->type = STRATA_STR;
	ret->data = buf;
	ret->len = len;
	return 0;
}

/* b(i): n random bytes (n at most 4096) from the kernel: WASI's random_get
 * in a wasm guest (docs/wasm.md) asks for it, and lua.elf seeds
 * math.random from it (docs/lua.md). */
static int host_random(void *ctx, const struct strata_value *a, size_t n, struct strata_value *ret)
{
	static unsigned char buf[4096];
	size_t len = a[0].i64 < 0 ? 0 : (size_t)a[0].i64;

	(void)ctx;
	(void)n;
	if (len > sizeof(buf) || getrandom(buf, len, 0) != (ssize_t)len)
		return -1;
	ret->type = STRATA_BYTES;
	ret->data = buf;
	ret->len = len;
	return 0;
}

/* clock_gettime(i) -> i: the guest C library's clock (vmm/guest/sys.c:
 * time(), clock_gettime, clock()), in nanoseconds, from this process's
 * clock of that id. The CPU-time clocks are this process's (on the process
 * backend the guest's child is not counted); another id is a host error,
 * which the guest sees as EINVAL. */
static int host_clock(void *ctx, const struct strata_value *a, size_t n, struct strata_value *ret)
{
	static const clockid_t ids[] = { CLOCK_REALTIME, CLOCK_MONOTONIC, CLOCK_PROCESS_CPUTIME_ID,
					 CLOCK_THREAD_CPUTIME_ID, CLOCK_MONOTONIC_RAW, CLOCK_REALTIME_COARSE,
					 CLOCK_MONOTONIC_COARSE, CLOCK_BOOTTIME };
	struct timespec ts;

	(void)ctx;
	(void)n;
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
		if (a[0].i64 == ids[i] && clock_gettime(ids[i], &ts) == 0 && ts.tv_sec >= 0) {
			ret->type = STRATA_I64;
			ret->i64 = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
			return 0;
		}
	return -EINVAL;
}

int cli_host_fns_register(strata_host *h)
{
	int rc;

	if ((rc = strata_host_register(h, "host_add", "i(ii)", host_add, NULL)) < 0 ||
	    (rc = strata_host_register(h, "host_upper", "s(s)", host_upper, NULL)) < 0 ||
	    (rc = strata_host_register(h, "random_get", "b(i)", host_random, NULL)) < 0 ||
	    (rc = strata_host_register(h, "clock_gettime", "i(i)", host_clock, NULL)) < 0)
		return rc;
	return 0;
}

/* A negative number needs no `--` (no option is a digit), nor does text
 * whose name (up to an '=') has a space, tab or newline in it (no option's
 * has: `--call load "$(cat app.lua)"` with a Lua comment first). */
static bool is_operand(const char *arg)
{
	return arg[0] == '-' && ((arg[1] >= '0' && arg[1] <= '9') || strcspn(arg, " \t\n") < strcspn(arg, "="));
}

int cli_getopt_operands(int argc, char **argv, const char *shortopts, const struct option *opts, char **pos,
			int *npos)
{
	for (;;) {
		if (optind < argc && is_operand(argv[optind])) {
			pos[(*npos)++] = argv[optind++];
			continue;
		}
		int at = optind;
		int c = getopt_long(argc, argv, shortopts, opts, NULL);
		if (c != -1)
			return c;
		if (optind > at && strcmp(argv[optind - 1], "--") == 0) {
			while (optind < argc)
				pos[(*npos)++] = argv[optind++];
		}
		if (optind >= argc)
			return -1;
		pos[(*npos)++] = argv[optind++];
	}
}
