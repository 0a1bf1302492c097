/* tests/guestlib: the guest libc built as guests build it (plain names, -ffreestanding, musl's part from libstrata-c.a, no other C library), run as a static program that prints TAP. */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* musl's headers (the guest's C library) and the runtime's heap: this
 * program has no other libc. */
#include <stdio.h>
#include <stdlib.h>
#include <strata_guest.h>
#include <strata_heap.h>
#include <string.h>

#define PAGE 4096
#define HEAP_SIZE ((size_t)16 << 20)

/* The heap region: .bss pages are populated on first touch, like a guest's. */
static unsigned char heap_area[HEAP_SIZE] __attribute__((aligned(PAGE)));
static unsigned char mincore_vec[HEAP_SIZE / PAGE];

static long sys3(long nr, long a, long b, long c)
{
	long ret;

	__asm__ volatile("syscall"
	                 : "=a"(ret)
	                 : "a"(nr), "D"(a), "S"(b), "d"(c)
	                 : "rcx", "r11", "memory");
	return ret;
}

static void put(const char *s)
{
	sys3(1 /* write */, 1, (long)s, (long)strlen(s));
}

static _Noreturn void leave(int status)
{
	for (;;)
		sys3(231 /* exit_group */, status, 0, 0);
}

/* The runtime provides abort(); here it reports and exits like SIGABRT. */
_Noreturn void abort(void)
{
	put("Bail out! abort() called\n");
	leave(134);
}

static size_t heap_resident(void)
{
	size_t n = 0;

	if (sys3(27 /* mincore */, (long)heap_area, HEAP_SIZE, (long)mincore_vec) != 0)
		return (size_t)-1;
	for (size_t i = 0; i < sizeof mincore_vec; i++)
		n += mincore_vec[i] & 1;
	return n;
}

/* What sys.c (musl's hooks) needs of the runtime, here without a host:
 * log lines to stderr, no host functions, an abort exits. */
void strata_log_write(int level, const char *msg, size_t len)
{
	sys3(1 /* write */, 2, (long)msg, (long)len);
	sys3(1 /* write */, 2, (long)"\n", 1);
}

int strata_host_call(const char *name, const struct strata_value *args, unsigned nargs,
		     struct strata_value *ret, void *buf, size_t cap)
{
	return STRATA_HOST_NO_FUNCTION;
}

_Noreturn void strata_abort(int64_t code, const char *fmt, ...)
{
	put("Bail out! strata_abort called\n");
	leave(134);
}

static int test_no;
static int failed;

static void report(bool ok, const char *name, const char *detail)
{
	char line[256];

	snprintf(line, sizeof line, "%s %d - %s%s%s\n", ok ? "ok" : "not ok", ++test_no, name,
	         detail[0] ? " # " : "", detail);
	put(line);
	failed += !ok;
}

struct big {
	unsigned char bytes[1000];
};

/* noinline so gcc emits a real struct copy (a call to memcpy). */
__attribute__((noinline)) static void copy_big(struct big *dst, const struct big *src)
{
	*dst = *src;
}

static void test_mem(void)
{
	static unsigned char a[5000], b[5000];
	static struct big s1, s2;
	bool ok = true;

	memset(a, 0x5a, sizeof a);
	for (size_t i = 0; i < sizeof a; i++)
		ok &= a[i] == 0x5a;
	report(ok, "memset fills without recursing into itself", "");

	for (size_t i = 0; i < sizeof a; i++)
		a[i] = (unsigned char)(i * 13);
	memcpy(b, a, sizeof a);
	ok = memcmp(a, b, sizeof a) == 0;
	memmove(a + 7, a, 4000);
	for (size_t i = 0; i < 4000; i++)
		ok &= a[i + 7] == b[i];
	memmove(a, a + 7, 4000);
	for (size_t i = 0; i < 4000; i++)
		ok &= a[i] == b[i];
	report(ok, "memcpy and overlapping memmove copy correctly", "");

	for (size_t i = 0; i < sizeof s1.bytes; i++)
		s1.bytes[i] = (unsigned char)i;
	copy_big(&s2, &s1);
	report(memcmp(&s1, &s2, sizeof s1) == 0, "compiler-emitted memcpy links to the guest one", "");

	ok = strlen("hello") == 5 && strcmp("abc", "abd") < 0 && strncmp("abc", "abd", 2) == 0 &&
	     strchr("hello", 'l') != NULL && strstr("haystack", "st") != NULL &&
	     strtol("-0x1f", NULL, 0) == -31 && atoi("  42") == 42;
	report(ok, "string functions and number parsing work", "");
}

static void test_fmt(void)
{
	char buf[128];
	int n = snprintf(buf, sizeof buf, "%d|%5s|%-4x|%#o|%p|%lld|%zu|%c|%%", -12, "ab", 255u, 8u,
	                 (void *)0x1000, -9000000000LL, (size_t)77, 'z');
	const char *want = "-12|   ab|ff  |010|0x1000|-9000000000|77|z|%";

	report(n == (int)strlen(want) && strcmp(buf, want) == 0, "musl's snprintf formats over the runtime's hooks alone", buf);
}

static void test_heap(void)
{
	char detail[160];
	size_t r0, r1, r2, r3;
	void *ptrs[1000];
	bool ok = true;

	strata_heap_init(heap_area, HEAP_SIZE);
	r0 = heap_resident();
	snprintf(detail, sizeof detail, "%zu pages", r0);
	report(r0 == 0, "heap init touches no heap page", detail);

	void *big = malloc((size_t)1 << 20);
	void *zeroed = calloc(4, (size_t)1 << 20);
	r1 = heap_resident();
	snprintf(detail, sizeof detail, "%zu pages", r1);
	report(big && zeroed && r1 <= 1, "unwritten 1 MiB malloc and 4 MiB calloc touch at most one page", detail);

	for (int i = 0; i < 1000; i++) {
		ptrs[i] = malloc(64);
		ok &= ptrs[i] != NULL && (uintptr_t)ptrs[i] % 16 == 0;
		if (ptrs[i])
			memset(ptrs[i], i, 64);
	}
	r2 = heap_resident() - r1;
	snprintf(detail, sizeof detail, "%zu pages for 64000 bytes", r2);
	report(ok && r2 <= 17, "1000 x 64-byte blocks touch about their payload", detail);

	for (int round = 0; round < 100; round++) {
		for (int i = 0; i < 1000; i++)
			free(ptrs[i]);
		for (int i = 0; i < 1000; i++) {
			ptrs[i] = malloc((size_t)(i % 7) * 100 + 1);
			ok &= ptrs[i] != NULL;
			if (ptrs[i])
				memset(ptrs[i], 1, (size_t)(i % 7) * 100 + 1);
		}
	}
	for (int i = 0; i < 1000; i++)
		free(ptrs[i]);
	free(big);
	free(zeroed);
	r3 = heap_resident();
	snprintf(detail, sizeof detail, "%zu pages after 100 rounds, in use %zu", r3, strata_heap_in_use());
	report(ok && strata_heap_in_use() == 0 && r3 < 140, "alloc/free rounds reuse memory", detail);
}

int freestanding_main(void);

/* A thread block as the host gives a guest (vmm/abi.h, struct strata_tls):
 * musl's members check their stack protector canary at %fs:0x28. */
static struct strata_tls tls;

int freestanding_main(void)
{
	tls.self = (uint64_t)(uintptr_t)&tls;
	tls.canary = 0x5a17c0de5a17c000ull;
	if (sys3(158 /* arch_prctl */, 0x1002 /* ARCH_SET_FS */, (long)&tls, 0) != 0)
		return 2;
	put("1..9\n");
	test_mem();
	test_fmt();
	test_heap();
	return failed ? 1 : 0;
}

__asm__(".text\n"
        ".globl _start\n"
        "_start:\n"
        "\txor %ebp, %ebp\n"
        "\tand $-16, %rsp\n"
        "\tcall freestanding_main\n"
        "\tmov %eax, %edi\n"
        "\tmov $231, %eax\n"
        "\tsyscall\n"
        "\thlt\n");
