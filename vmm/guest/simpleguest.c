/* simpleguest.c: the example guest used by tests and benchmarks: calls of each type and misbehaviour on demand. */
#include <stdint.h>

#include <stdlib.h>
#include <string.h>

#include "include/strata_guest.h"

static int64_t counter;

STRATA_FUNCTION(echo, "s(s)")
{
	return strata_ret_str(c, strata_arg_str(c, 0));
}

STRATA_FUNCTION(echo_bytes, "b(b)")
{
	size_t n;
	const void *p = strata_arg_bytes(c, 0, &n);

	return strata_ret_bytes(c, p, n);
}

STRATA_FUNCTION(add_local, "i(ii)")
{
	return strata_ret_i64(c, strata_arg_i64(c, 0) + strata_arg_i64(c, 1));
}

/* Addition done by the host function "host_add" (i(ii)). */
STRATA_FUNCTION(add, "i(ii)")
{
	struct strata_value args[2] = { strata_val_i64(strata_arg_i64(c, 0)), strata_val_i64(strata_arg_i64(c, 1)) };
	struct strata_value ret;
	int st = strata_host_call("host_add", args, 2, &ret, NULL, 0);

	if (st != STRATA_HOST_OK)
		return strata_fail(c, "host_add failed with status %d", st);
	return strata_ret_i64(c, ret.i64);
}

/* Ask the host function "host_upper" (s(s)) for a string result. */
STRATA_FUNCTION(upper_via_host, "s(s)")
{
	static char buf[256];
	struct strata_value a = strata_val_str(strata_arg_str(c, 0)), ret;
	int st = strata_host_call("host_upper", &a, 1, &ret, buf, sizeof(buf));

	if (st != STRATA_HOST_OK)
		return strata_fail(c, "host_upper failed with status %d", st);
	return strata_ret_str(c, buf);
}

/* Call any host function with one string argument; return its status. */
STRATA_FUNCTION(host_status, "i(ss)")
{
	struct strata_value a = strata_val_str(strata_arg_str(c, 1)), ret;
	static char buf[64];

	return strata_ret_i64(c, strata_host_call(strata_arg_str(c, 0), &a, 1, &ret, buf, sizeof(buf)));
}

/* Write n bytes into a fresh heap block, read them back, return their sum. */
STRATA_FUNCTION(heap_write, "i(i)")
{
	int64_t n = strata_arg_i64(c, 0);
	if (n < 0)
		return strata_fail(c, "negative size");
	uint8_t *p = malloc((size_t)n);
	if (!p)
		return strata_fail(c, "cannot allocate %lld bytes", (long long)n);
	for (int64_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 7 + 1);
	int64_t sum = 0;
	for (int64_t i = 0; i < n; i++)
		sum += p[i];
	free(p);
	return strata_ret_i64(c, sum);
}

/* Touch one word in each of `pages` heap pages (dirties them); returns pages. */
STRATA_FUNCTION(touch_pages, "i(i)")
{
	int64_t pages = strata_arg_i64(c, 0);
	const struct strata_boot_info *bi = strata_boot_info();
	if (pages < 0 || (uint64_t)pages > bi->heap_size / 4096)
		return strata_fail(c, "%lld pages do not fit the heap", (long long)pages);
	volatile uint64_t *base = (volatile uint64_t *)(uintptr_t)bi->heap_addr;
	for (int64_t i = 0; i < pages; i++)
		base[(uint64_t)i * 512] = (uint64_t)i + 1;
	return strata_ret_i64(c, pages);
}

/* Fill heap pages [first, first + pages) whole with a xorshift sequence
 * from seed: content no other seed gives (the checkpoint benchmark writes
 * 64 KiB of new pages per call with it). Returns pages. */
STRATA_FUNCTION(fill_pages, "i(iii)")
{
	int64_t pages = strata_arg_i64(c, 0), first = strata_arg_i64(c, 1);
	uint64_t x = (uint64_t)strata_arg_i64(c, 2) * 0x9E3779B97F4A7C15ull | 1;
	const struct strata_boot_info *bi = strata_boot_info();
	uint64_t heap_pages = bi->heap_size / 4096;
	if (pages < 0 || first < 0 || (uint64_t)first > heap_pages || (uint64_t)pages > heap_pages - (uint64_t)first)
		return strata_fail(c, "pages %lld..%lld are not in the heap", (long long)first, (long long)(first + pages));
	volatile uint64_t *w = (volatile uint64_t *)(uintptr_t)(bi->heap_addr + (uint64_t)first * 4096);
	for (uint64_t i = 0; i < (uint64_t)pages * 512; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		w[i] = x;
	}
	return strata_ret_i64(c, pages);
}

/* Touch one word in `pages` heap pages `stride` pages apart: scattered
 * writes, one run per page (the capture benchmarks use it). */
STRATA_FUNCTION(touch_strided, "i(ii)")
{
	int64_t pages = strata_arg_i64(c, 0), stride = strata_arg_i64(c, 1);
	const struct strata_boot_info *bi = strata_boot_info();
	if (pages < 0 || stride < 1 || stride > 1024 || (uint64_t)pages > bi->heap_size / 4096 / (uint64_t)stride)
		return strata_fail(c, "%lld pages %lld apart do not fit the heap", (long long)pages, (long long)stride);
	volatile uint64_t *base = (volatile uint64_t *)(uintptr_t)bi->heap_addr;
	for (int64_t i = 0; i < pages; i++)
		base[(uint64_t)(i * stride) * 512] += (uint64_t)i + 1;
	return strata_ret_i64(c, pages);
}

/* Read one word of each of `pages` heap pages in each of `clusters` runs
 * spread evenly over the heap (run k starts at k * heap / clusters): a
 * start that reads a few regions of a large snapshot (the working-set
 * benchmark). Returns the sum of the words read. */
STRATA_FUNCTION(touch_clusters, "i(ii)")
{
	int64_t clusters = strata_arg_i64(c, 0), pages = strata_arg_i64(c, 1);
	const struct strata_boot_info *bi = strata_boot_info();
	uint64_t heap_pages = bi->heap_size / 4096;
	if (clusters < 1 || pages < 0 || (uint64_t)clusters > heap_pages || (uint64_t)pages > heap_pages / (uint64_t)clusters)
		return strata_fail(c, "%lld runs of %lld pages do not fit the heap", (long long)clusters, (long long)pages);
	volatile const uint64_t *base = (volatile const uint64_t *)(uintptr_t)bi->heap_addr;
	uint64_t sum = 0, step = heap_pages / (uint64_t)clusters;
	for (int64_t k = 0; k < clusters; k++)
		for (int64_t i = 0; i < pages; i++)
			sum += base[((uint64_t)k * step + (uint64_t)i) * 512];
	return strata_ret_i64(c, (int64_t)sum);
}

STRATA_FUNCTION(counter_next, "i()")
{
	return strata_ret_i64(c, ++counter);
}

STRATA_FUNCTION(spin, "v()")
{
	for (volatile uint64_t i = 0;; i++)
		;
	return strata_ret_void(c);
}

/* 24 KiB in, 8 KiB out: the result is each 3-byte group xor'ed together. */
STRATA_FUNCTION(in24k_out8k, "b(b)")
{
	size_t n;
	const uint8_t *in = strata_arg_bytes(c, 0, &n);
	size_t out_len = n / 3;
	uint8_t *out = strata_ret_buffer(c, out_len);
	if (!out)
		return strata_fail(c, "%zu-byte result does not fit the output buffer", out_len);
	for (size_t i = 0; i < out_len; i++)
		out[i] = in[3 * i] ^ in[3 * i + 1] ^ in[3 * i + 2];
	return strata_ret_bytes(c, out, out_len);
}

/* Two large arguments: return the sum of their lengths plus their first and last bytes. */
STRATA_FUNCTION(large_params, "i(bb)")
{
	size_t na, nb;
	const uint8_t *a = strata_arg_bytes(c, 0, &na);
	const uint8_t *b = strata_arg_bytes(c, 1, &nb);
	int64_t r = (int64_t)(na + nb);
	if (na)
		r += a[0] + a[na - 1];
	if (nb)
		r += b[0] + b[nb - 1];
	return strata_ret_i64(c, r);
}

STRATA_FUNCTION(log_msg, "v(s)")
{
	strata_log(2, "%s", strata_arg_str(c, 0));
	return strata_ret_void(c);
}

STRATA_FUNCTION(fail_if_negative, "i(i)")
{
	int64_t v = strata_arg_i64(c, 0);
	if (v < 0)
		return strata_fail(c, "value %lld is negative", (long long)v);
	return strata_ret_i64(c, v);
}

/* ---- misbehaviour on demand ---- */

STRATA_FUNCTION(null_write, "v()")
{
	*(volatile int *)(uintptr_t)0 = 1;
	return strata_ret_void(c);
}

STRATA_FUNCTION(div_zero, "i(i)")
{
	volatile int64_t d = strata_arg_i64(c, 0);
	return strata_ret_i64(c, 100 / d);
}

STRATA_FUNCTION(invalid_opcode, "v()")
{
	__asm__ volatile("ud2");
	return strata_ret_void(c);
}

STRATA_FUNCTION(privileged, "v()")
{
	__asm__ volatile("hlt");
	return strata_ret_void(c);
}

STRATA_FUNCTION(do_abort, "v(i)")
{
	strata_abort(strata_arg_i64(c, 0), "asked to abort");
}

STRATA_FUNCTION(bad_pointer, "v()")
{
	strata_out(STRATA_PORT_LOG, 0xfffff000u);
	return strata_ret_void(c);
}

STRATA_FUNCTION(bad_port, "v()")
{
	strata_out(0x5f0, 0);
	return strata_ret_void(c);
}

STRATA_FUNCTION(write_text, "v()")
{
	*(volatile uint8_t *)(uintptr_t)STRATA_IMAGE_BASE = 0x90;
	return strata_ret_void(c);
}

/* A Linux system call (getpid): #UD on KVM (EFER.SCE is clear); the process
 * backend's seccomp filter refuses it and reports the same #UD. */
STRATA_FUNCTION(raw_syscall, "i()")
{
	int64_t r = 39;
	__asm__ volatile("syscall" : "+a"(r) : : "rcx", "r11", "memory");
	return strata_ret_i64(c, r);
}

/* `int $0x80` (the 32-bit system call gate): a not-present vector, #GP. */
STRATA_FUNCTION(int80, "v()")
{
	__asm__ volatile("int $0x80" : : "a"(20) : "memory");
	return strata_ret_void(c);
}

/* Read a guest address outside guest memory (a page fault everywhere). */
STRATA_FUNCTION(peek, "i(i)")
{
	return strata_ret_i64(c, *(volatile int64_t *)(uintptr_t)strata_arg_i64(c, 0));
}

/* Write 0 at `addr` (a host-side control word, say), then count forever in
 * the first heap word: a guest that pretends to have stopped. */
STRATA_FUNCTION(forge_report, "v(i)")
{
	volatile uint64_t *heap = (volatile uint64_t *)(uintptr_t)strata_boot_info()->heap_addr;
	*(volatile uint32_t *)(uintptr_t)strata_arg_i64(c, 0) = 0;
	for (;;)
		heap[0]++;
	return strata_ret_void(c);
}

static int64_t recurse(volatile int64_t depth)
{
	volatile uint8_t frame[512];
	size_t i = (size_t)depth % sizeof(frame);
	/* Indexed by a run-time value, so the whole frame exists; read after
	 * the call returns, so every level keeps its own. clang turned the
	 * plain `return recurse(depth - 1) + frame[0]` into a loop over a
	 * 16-byte frame. */
	frame[i] = (uint8_t)depth;
	if (depth == 0)
		return frame[i];
	frame[sizeof(frame) - 1 - i] = (uint8_t)recurse(depth - 1);
	return frame[i] + frame[sizeof(frame) - 1 - i];
}

STRATA_FUNCTION(stack_overflow, "i(i)")
{
	return strata_ret_i64(c, recurse(strata_arg_i64(c, 0)));
}

/* Allocate until the heap is exhausted, touching each block, then abort. */
STRATA_FUNCTION(runaway_alloc, "v()")
{
	size_t total = 0;
	for (;;) {
		volatile uint8_t *p = malloc(64 << 10);
		if (!p)
			strata_abort(12, "out of memory after %zu bytes", total);
		p[0] = 1;
		total += 64 << 10;
	}
}

/* xorshift64: deterministic pseudo-random numbers for the hammer. */
static uint64_t rnd(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* n host calls with random names, arity, types and lengths, all pointing
 * inside guest memory; returns how many the host accepted. */
STRATA_FUNCTION(hammer, "i(ii)")
{
	static const char *names[] = { "host_add", "host_upper", "nope", "", "host_add_extra" };
	static char blob[4096];
	uint64_t s = (uint64_t)strata_arg_i64(c, 0) | 1;
	int64_t n = strata_arg_i64(c, 1), ok = 0;

	for (int64_t k = 0; k < n; k++) {
		struct strata_value args[STRATA_MAX_ARGS], ret;
		unsigned nargs = (unsigned)(rnd(&s) % (STRATA_MAX_ARGS + 1));
		for (unsigned i = 0; i < nargs; i++) {
			uint64_t t = rnd(&s) % 3;
			size_t len = (size_t)(rnd(&s) % sizeof(blob));
			if (t == 0)
				args[i] = strata_val_i64((int64_t)rnd(&s));
			else if (t == 1)
				args[i] = strata_val_bytes(blob, len);
			else {
				blob[len == 0 ? 0 : len - 1] = 0;
				args[i] = strata_val_str(blob);
			}
		}
		char buf[32];
		int st = strata_host_call(names[rnd(&s) % 5], args, nargs, &ret, buf, rnd(&s) % sizeof(buf));
		if (st == STRATA_HOST_OK)
			ok++;
	}
	return strata_ret_i64(c, ok);
}

/* One raw hypercall with a random port (among strata's) and value. */
STRATA_FUNCTION(wild_hypercall, "v(i)")
{
	uint64_t s = (uint64_t)strata_arg_i64(c, 0) | 1;
	uint16_t port = (uint16_t)(STRATA_PORT_RETURN + rnd(&s) % 8);
	uint32_t v = (uint32_t)rnd(&s);
	if (rnd(&s) % 2)
		v = (uint32_t)(strata_boot_info()->heap_addr + rnd(&s) % 8192);
	strata_out(port, v);
	return strata_ret_void(c);
}

/* Exception stubs that fault themselves (`int $0x30` hits a not-present
 * vector): tests point the ELF note at these, which a host that ran them
 * would take into a triple fault (tests/vmm/test_elf.c: it never does). */
__asm__(".pushsection .text\n"
	".balign 16\n"
	"strata_test_bad_stubs:\n"
	".rept 32\n"
	".byte 0xcd, 0x30\n"
	".fill 14, 1, 0x90\n"
	".endr\n"
	".popsection");
