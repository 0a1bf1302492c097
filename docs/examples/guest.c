/* guest.c: a complete strata guest built against the installed SDK (docs/guests.md):
 *   cc -g $(pkg-config --cflags --libs strata-guest) -o guest.elf guest.c
 *   strata run guest.elf --call shout hello */
#include <stdio.h>
#include <string.h>

#include <strata_guest.h>

static unsigned long calls;

/* s(s): a string in, a host call that returns a string, a string out. */
STRATA_FUNCTION(shout, "s(s)")
{
	static char upper[256];
	static char out[300];
	struct strata_value arg = strata_val_str(strata_arg_str(c, 0));
	struct strata_value r;

	calls++;
	/* host_upper writes its result into upper (at most its size, NUL
	 * included) and sets r.len; STRATA_HOST_TOO_SMALL says it needed more. */
	int st = strata_host_call("host_upper", &arg, 1, &r, upper, sizeof(upper));
	if (st != STRATA_HOST_OK)
		return strata_fail(c, "host_upper: status %d", st);
	strata_log(STRATA_LOG_INFO, "call %lu: %llu bytes from the host", calls, (unsigned long long)r.len);
	snprintf(out, sizeof(out), "%s!", upper);
	return strata_ret_str(c, out);
}

/* i(ii): integers through the host's host_add. */
STRATA_FUNCTION(add, "i(ii)")
{
	struct strata_value a[2] = { strata_val_i64(strata_arg_i64(c, 0)), strata_val_i64(strata_arg_i64(c, 1)) };
	struct strata_value r;

	if (strata_host_call("host_add", a, 2, &r, NULL, 0) != STRATA_HOST_OK)
		return strata_fail(c, "host_add failed");
	return strata_ret_i64(c, r.i64);
}

/* v(i): a guest that faults, for the debugging section (a NULL write). */
STRATA_FUNCTION(crash, "v(i)")
{
	volatile int *p = (volatile int *)(unsigned long)strata_arg_i64(c, 0);

	*p = 1;
	return strata_ret_void(c);
}
