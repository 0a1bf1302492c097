/* test_calls.c: guest calls of each type, host functions, state across calls, logs, sizes. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "helpers.h"
#include "tests/kvm_check.h"
#include "vmm/abi.h"

TestSuite(vmm_calls, .init = kvm_require);

Test(vmm_calls, echo_returns_its_string)
{
	struct vmm_sandbox *sb = guest_new(NULL);
	struct vmm_result res;

	cr_assert_eq(call_str(sb, "echo", "hello!", &res), 0, "%s", vmm_sandbox_error(sb)->message);
	cr_assert_eq(res.type, VMM_STR);
	cr_assert_eq(res.len, 6);
	cr_assert_str_eq(res.data, "hello!");
	vmm_result_clear(&res);
	cr_assert_eq(call_str(sb, "echo", "", &res), 0);
	cr_assert_eq(res.len, 0);
	cr_assert_str_eq(res.data, "");
	vmm_result_clear(&res);
	vmm_sandbox_free(sb);
}

Test(vmm_calls, bytes_round_trip_including_nul_bytes)
{
	struct vmm_sandbox *sb = guest_new(NULL);
	unsigned char in[300];
	struct vmm_result res;

	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (unsigned char)(i * 13);
	struct vmm_value v = { .type = VMM_BYTES, .data = in, .len = sizeof(in) };
	cr_assert_eq(vmm_sandbox_call(sb, "echo_bytes", &v, 1, &res), 0);
	cr_assert_eq(res.type, VMM_BYTES);
	cr_assert_eq(res.len, sizeof(in));
	cr_assert_eq(memcmp(res.data, in, sizeof(in)), 0);
	vmm_result_clear(&res);
	vmm_sandbox_free(sb);
}

Test(vmm_calls, integers_in_and_out)
{
	struct vmm_sandbox *sb = guest_new(NULL);
	struct vmm_result res;

	cr_assert_eq(call_i64(sb, "add_local", -5, INT64_C(1) << 40, 2, &res), 0);
	cr_assert_eq(res.type, VMM_I64);
	cr_assert_eq(res.i64, (INT64_C(1) << 40) - 5);
	vmm_sandbox_free(sb);
}

Test(vmm_calls, host_function_does_the_addition)
{
	struct vmm_sandbox *sb = guest_new(NULL);
	struct vmm_result res;

	cr_assert_eq(call_i64(sb, "add", 1, 41, 2, &res), 0, "%s", vmm_sandbox_error(sb)->message);
	cr_assert_eq(res.i64, 42);
	vmm_sandbox_free(sb);
}

Test(vmm_calls, host_function_returns_a_string_into_guest_buffer)
{
	struct vmm_sandbox *sb = guest_new(NULL);
	struct vmm_result res;

	cr_assert_eq(call_str(sb, "upper_via_host", "strata", &res), 0, "%s", vmm_sandbox_error(sb)->message);
	cr_assert_str_eq(res.data, "STRATA");
	vmm_result_clear(&res);
	vmm_sandbox_free(sb);
}

Test(vmm_calls, unknown_host_function_is_reported_to_the_guest_not_fatal)
{
	struct vmm_sandbox *sb = guest_new(NULL);
	struct vmm_value v[2] = { { .type = VMM_STR, .data = "no_such", .len = 7 },
				  { .type = VMM_STR, .data = "x", .len = 1 } };
	struct vmm_result res;

	cr_assert_eq(vmm_sandbox_call(sb, "host_status", v, 2, &res), 0);
	cr_assert_eq(res.i64, 1 /* STRATA_HOST_NO_FUNCTION */);
	v[0] = (struct vmm_value){ .type = VMM_STR, .data = "host_add", .len = 8 };
	cr_assert_eq(vmm_sandbox_call(sb, "host_status", v, 2, &res), 0);
	cr_assert_eq(res.i64, 2 /* STRATA_HOST_BAD_ARGS: host_add wants two integers */);
	cr_assert_not(vmm_sandbox_poisoned(sb));
	vmm_sandbox_free(sb);
}

Test(vmm_calls, counter_keeps_state_across_calls)
{
	struct vmm_sandbox *sb = guest_new(NULL);
	struct vmm_result res;

	for (int64_t i = 1; i <= 50; i++) {
		cr_assert_eq(vmm_sandbox_call(sb, "counter_next", NULL, 0, &res), 0);
		cr_assert_eq(res.i64, i);
	}
	vmm_sandbox_free(sb);
}

Test(vmm_calls, heap_write_reads_back_what_it_wrote)
{
	struct vmm_config cfg = { .heap_size = 1 << 20 };
	struct vmm_sandbox *sb = guest_new(&cfg);
	struct vmm_result res;
	int64_t n = 100000, want = 0;

	for (int64_t i = 0; i < n; i++)
		want += (uint8_t)(i * 7 + 1);
	cr_assert_eq(call_i64(sb, "heap_write", n, 0, 1, &res), 0, "%s", vmm_sandbox_error(sb)->message);
	cr_assert_eq(res.i64, want);
	/* Too big for the heap: a function error, and the sandbox stays usable. */
	cr_assert_eq(call_i64(sb, "heap_write", 8 << 20, 0, 1, &res), VMM_E_GUEST_ERROR);
	cr_assert_not(vmm_sandbox_poisoned(sb));
	cr_assert_eq(call_i64(sb, "heap_write", 10, 0, 1, &res), 0);
	vmm_sandbox_free(sb);
}

Test(vmm_calls, guest_function_error_does_not_poison)
{
	struct vmm_sandbox *sb = guest_new(NULL);
	struct vmm_result res;

	cr_assert_eq(call_i64(sb, "fail_if_negative", -3, 0, 1, &res), VMM_E_GUEST_ERROR);
	cr_assert(strstr(vmm_sandbox_error(sb)->message, "value -3 is negative"), "%s", vmm_sandbox_error(sb)->message);
	cr_assert_not(vmm_sandbox_poisoned(sb));
	cr_assert_eq(call_i64(sb, "fail_if_negative", 3, 0, 1, &res), 0);
	cr_assert_eq(res.i64, 3);
	vmm_sandbox_free(sb);
}

Test(vmm_calls, wrong_arguments_are_refused_before_the_guest_runs)
{
	struct vmm_sandbox *sb = guest_new(NULL);
	struct vmm_result res;

	cr_assert_eq(call_i64(sb, "echo", 1, 0, 1, &res), VMM_E_BAD_ARGS);
	cr_assert_eq(call_i64(sb, "add", 1, 0, 1, &res), VMM_E_BAD_ARGS);
	cr_assert_eq(call_i64(sb, "nope", 1, 0, 1, &res), VMM_E_NO_FUNCTION);
	cr_assert_eq(vmm_sandbox_call(sb, NULL, NULL, 0, &res), VMM_E_NO_FUNCTION);
	cr_assert_not(vmm_sandbox_poisoned(sb));
	cr_assert_eq(call_str(sb, "echo", "ok", &res), 0);
	vmm_result_clear(&res);
	vmm_sandbox_free(sb);
}

Test(vmm_calls, arguments_larger_than_the_input_buffer_are_refused)
{
	struct vmm_sandbox *sb = guest_new(NULL);
	size_t n = 64 << 10;
	char *big = malloc(n);
	struct vmm_result res;

	memset(big, 'x', n);
	struct vmm_value v = { .type = VMM_BYTES, .data = big, .len = n };
	cr_assert_eq(vmm_sandbox_call(sb, "echo_bytes", &v, 1, &res), VMM_E_TOO_BIG);
	cr_assert_not(vmm_sandbox_poisoned(sb));
	free(big);
	vmm_sandbox_free(sb);
}

Test(vmm_calls, in24k_out8k)
{
	struct vmm_config cfg = { .input_size = 64 << 10 };
	struct vmm_sandbox *sb = guest_new(&cfg);
	size_t n = 24 << 10;
	unsigned char *in = malloc(n);
	struct vmm_result res;

	for (size_t i = 0; i < n; i++)
		in[i] = (unsigned char)(i * 31 + 7);
	struct vmm_value v = { .type = VMM_BYTES, .data = in, .len = n };
	cr_assert_eq(vmm_sandbox_call(sb, "in24k_out8k", &v, 1, &res), 0, "%s", vmm_sandbox_error(sb)->message);
	cr_assert_eq(res.len, 8 << 10);
	for (size_t i = 0; i < res.len; i++)
		cr_assert_eq(((unsigned char *)res.data)[i], in[3 * i] ^ in[3 * i + 1] ^ in[3 * i + 2]);
	vmm_result_clear(&res);
	free(in);
	vmm_sandbox_free(sb);
}

Test(vmm_calls, two_large_arguments)
{
	size_t n = 8 << 20;
	struct vmm_config cfg = { .input_size = 2 * n + 4096 };
	struct vmm_sandbox *sb = guest_new(&cfg);
	char *a = malloc(n), *b = malloc(n);
	struct vmm_result res;

	memset(a, 3, n);
	memset(b, 5, n);
	struct vmm_value v[2] = { { .type = VMM_BYTES, .data = a, .len = n }, { .type = VMM_BYTES, .data = b, .len = n } };
	cr_assert_eq(vmm_sandbox_call(sb, "large_params", v, 2, &res), 0, "%s", vmm_sandbox_error(sb)->message);
	cr_assert_eq(res.i64, (int64_t)(2 * n) + 3 + 3 + 5 + 5);
	free(a);
	free(b);
	vmm_sandbox_free(sb);
}

static char logged[256];
static int log_level = -1;
static void on_log(void *ctx, enum vmm_log_level level, const char *msg, size_t len)
{
	(void)ctx;
	log_level = level;
	snprintf(logged, sizeof(logged), "%.*s", (int)len, msg);
}

Test(vmm_calls, guest_log_reaches_the_callback)
{
	struct vmm_config cfg = { .log = on_log };
	struct vmm_sandbox *sb = guest_new(&cfg);
	struct vmm_result res;

	cr_assert_eq(call_str(sb, "log_msg", "hello from the guest", &res), 0);
	cr_assert_str_eq(logged, "hello from the guest");
	cr_assert_eq(log_level, VMM_LOG_INFO);
	vmm_sandbox_free(sb);
}

Test(vmm_calls, creation_does_not_touch_the_heap)
{
	/* 256 MiB heap: creation must not populate it (RSS grows by far less). */
	struct vmm_config cfg = { .heap_size = 256ull << 20 };
	struct vmm_sandbox *sb = guest_new(&cfg);
	uint8_t *mem;
	uint64_t size;
	struct rusage ru0, ru1;

	vmm_sandbox_memory(sb, &mem, &size);
	cr_assert_geq(size, 256ull << 20);
	getrusage(RUSAGE_SELF, &ru0);
	struct vmm_sandbox *sb2 = guest_new(&cfg);
	getrusage(RUSAGE_SELF, &ru1);
	cr_assert_lt(ru1.ru_maxrss - ru0.ru_maxrss, 8 * 1024, "creation grew RSS by %ld KiB",
		     ru1.ru_maxrss - ru0.ru_maxrss);
	vmm_sandbox_free(sb2);
	vmm_sandbox_free(sb);
}

Test(vmm_config, absurd_sizes_are_refused)  /* checked before any VM exists: no KVM needed */
{
	struct vmm_sandbox *sb = NULL;
	struct vmm_error err;
	struct vmm_config cfgs[] = {
		{ .heap_size = UINT64_MAX },
		{ .heap_size = 3ull << 30 },
		{ .stack_size = 1ull << 40 },
		{ .input_size = UINT64_MAX - 4095 },
		{ .output_size = 8 },
		{ .heap_size = 2ull << 30, .input_size = 2ull << 30 },
	};
	for (size_t i = 0; i < sizeof(cfgs) / sizeof(cfgs[0]); i++) {
		int rc = vmm_sandbox_new(guest_path(), &cfgs[i], &sb, &err);
		cr_assert_eq(rc, VMM_E_BAD_CONFIG, "config %zu: %s", i, vmm_strerror(rc));
		cr_assert_gt(strlen(err.message), 0);
	}
}

Test(vmm_calls, page_tables_and_descriptor_tables_stay_unwritten)
{
	/* Accessed/Dirty bits are preset, so running code (calls, heap and
	 * stack writes, faults aside) never makes the CPU write these pages:
	 * they stay clean for snapshots. */
	struct vmm_config cfg = { .heap_size = 4 << 20 };
	struct vmm_sandbox *sb = guest_new(&cfg);
	uint8_t *mem;
	uint64_t size;
	struct vmm_result res;
	static uint8_t before[0x11000];

	vmm_sandbox_memory(sb, &mem, &size);
	memcpy(before, mem, sizeof(before));
	cr_assert_eq(call_i64(sb, "touch_pages", 1000, 0, 1, &res), 0, "%s", vmm_sandbox_error(sb)->message);
	cr_assert_eq(call_i64(sb, "heap_write", 50000, 0, 1, &res), 0);
	cr_assert_eq(call_i64(sb, "stack_overflow", 50, 0, 1, &res), 0);
	cr_assert_eq(call_i64(sb, "add", 2, 3, 2, &res), 0);
	cr_assert_eq(memcmp(before, mem, sizeof(before)), 0, "page tables, GDT, TSS or IDT changed");
	vmm_sandbox_free(sb);
}

Test(vmm_calls, arguments_exactly_filling_an_odd_sized_input_buffer)
{
	/* 1001-byte input buffer: the frame plus arguments must fit exactly,
	 * one byte more is refused, whatever the alignment padding. */
	struct vmm_config cfg = { .input_size = 1001 };
	struct vmm_sandbox *sb = guest_new(&cfg);
	struct vmm_result res;
	char buf[1001];
	size_t room = 1001 - sizeof(struct strata_call_frame);

	memset(buf, 'q', sizeof(buf));
	struct vmm_value v = { .type = VMM_BYTES, .data = buf, .len = room };
	cr_assert_eq(vmm_sandbox_call(sb, "echo_bytes", &v, 1, &res), 0, "%s", vmm_sandbox_error(sb)->message);
	cr_assert_eq(res.len, room);
	vmm_result_clear(&res);
	v.len = room + 1;
	cr_assert_eq(vmm_sandbox_call(sb, "echo_bytes", &v, 1, &res), VMM_E_TOO_BIG);
	struct vmm_value two[2] = { { .type = VMM_BYTES, .data = buf, .len = room - 3 },
				    { .type = VMM_BYTES, .data = buf, .len = 2 } };
	cr_assert_eq(vmm_sandbox_call(sb, "large_params", two, 2, &res), VMM_E_TOO_BIG);
	vmm_sandbox_free(sb);
}
