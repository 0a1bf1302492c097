/* hostile_vec.c: the hostile guest's vector-register channels (x87/SSE/AVX/AVX-512 state outside guest memory). */
#include <stdint.h>

#include "include/strata_guest.h"

/*
 * The convention of hostileguest.c: each function reads the state it
 * hides, adds one, writes it back and returns the new value; after a
 * restore it must return 1 (the snapshot's state) or fail with a reason
 * where the channel is refused.
 *
 * An extension is used only where CPUID says the CPU has it and, once the
 * OS bit (CPUID.1:ECX.OSXSAVE) is set, where XCR0 enables its state: a
 * guest that reads "not enabled" there fails with that reason. A guest
 * whose CPUID says the CPU has the extension but the OS bit is clear
 * tries the instruction anyway, as an attacker would (the OS bit is a
 * promise, not a fence): a #UD then ends the call as a guest fault, which
 * is the channel refused too. Only the registers named in each asm block
 * are touched, so the compiler's own use of xmm0-7 does not disturb them.
 */

/* CPUID leaf/subleaf (SDM Vol. 2A, CPUID). */
static void cpuid(uint32_t leaf, uint32_t sub, uint32_t r[4])
{
	__asm__ volatile("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(leaf), "c"(sub));
}

/* CPUID.1:ECX bits (SDM Vol. 2A, Table 3-10). */
#define CPUID1_ECX_XSAVE (1u << 26)
#define CPUID1_ECX_OSXSAVE (1u << 27)
#define CPUID1_ECX_AVX (1u << 28)
/* CPUID.(7,0):EBX bits (SDM Vol. 2A, Table 3-8). */
#define CPUID7_EBX_AVX512F (1u << 16)
/* XCR0 state components (SDM Vol. 1 13.1). */
#define XCR0_SSE (1ull << 1)
#define XCR0_YMM (1ull << 2)
#define XCR0_OPMASK (1ull << 5)
#define XCR0_ZMM_HI256 (1ull << 6)
#define XCR0_HI16_ZMM (1ull << 7)

/*
 * May the guest use the state components `xcr0_bits`, whose CPUID feature
 * is `have`? NULL if so (or if only the OS bit is missing: then it tries),
 * else why not.
 */
static const char *vec_refused(int have, uint64_t xcr0_bits, const char *name)
{
	uint32_t r[4];

	if (!have)
		return name;
	cpuid(1, 0, r);
	if (!(r[2] & CPUID1_ECX_OSXSAVE))
		return NULL;
	uint32_t lo, hi;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	if ((((uint64_t)hi << 32 | lo) & xcr0_bits) != xcr0_bits)
		return "XCR0 does not enable the state";
	return NULL;
}

static int have_avx(void)
{
	uint32_t r[4];

	cpuid(1, 0, r);
	return (r[2] & (CPUID1_ECX_XSAVE | CPUID1_ECX_AVX)) == (CPUID1_ECX_XSAVE | CPUID1_ECX_AVX);
}

static int have_avx512f(void)
{
	uint32_t r[4];

	cpuid(0, 0, r);
	if (r[0] < 7 || !have_avx())
		return 0;
	cpuid(7, 0, r);
	return (r[1] & CPUID7_EBX_AVX512F) != 0;
}

/* The upper 128 bits of ymm7 (the AVX state component; legacy SSE code,
 * the runtime's included, leaves them alone). */
__attribute__((target("avx"))) STRATA_FUNCTION(ymm_upper_next, "i()")
{
	const char *why = vec_refused(have_avx(), XCR0_SSE | XCR0_YMM, "CPUID: no AVX");
	uint64_t v;

	if (why)
		return strata_fail(c, "%s", why);
	__asm__ volatile("vextractf128 $1, %%ymm7, %%xmm6\n\t"
			 "vmovq %%xmm6, %0\n\t"
			 "incq %0\n\t"
			 "vmovq %0, %%xmm6\n\t"
			 "vinsertf128 $1, %%xmm6, %%ymm7, %%ymm7"
			 : "=&r"(v) : : "xmm6", "xmm7");
	return strata_ret_i64(c, (int64_t)v);
}

/* xmm15: inside the FXSAVE image, and used by neither the runtime nor the
 * calling convention between calls. */
STRATA_FUNCTION(xmm15_next, "i()")
{
	uint64_t v;

	__asm__ volatile("movq %%xmm15, %0\n\t"
			 "incq %0\n\t"
			 "movq %0, %%xmm15"
			 : "=&r"(v) : : "xmm15");
	return strata_ret_i64(c, (int64_t)v);
}

/* zmm31's low quadword (the Hi16_ZMM state component: xmm16-31 are
 * outside the FXSAVE image entirely). */
__attribute__((target("avx512f"))) STRATA_FUNCTION(zmm31_next, "i()")
{
	const char *why = vec_refused(have_avx512f(), XCR0_SSE | XCR0_YMM | XCR0_OPMASK | XCR0_ZMM_HI256 | XCR0_HI16_ZMM,
				      "CPUID: no AVX-512F");
	uint64_t v;

	if (why)
		return strata_fail(c, "%s", why);
	__asm__ volatile("vmovq %%xmm31, %0\n\t"
			 "incq %0\n\t"
			 "vmovq %0, %%xmm31"
			 : "=&r"(v) : : "xmm31");
	return strata_ret_i64(c, (int64_t)v);
}

/* The AVX-512 mask register k7 (the opmask state component). */
__attribute__((target("avx512f"))) STRATA_FUNCTION(k7_next, "i()")
{
	const char *why = vec_refused(have_avx512f(), XCR0_SSE | XCR0_YMM | XCR0_OPMASK | XCR0_ZMM_HI256 | XCR0_HI16_ZMM,
				      "CPUID: no AVX-512F");
	uint32_t v;

	if (why)
		return strata_fail(c, "%s", why);
	__asm__ volatile("kmovw %%k7, %0\n\t"
			 "incl %0\n\t"
			 "kmovw %0, %%k7"
			 : "=&r"(v) : : "k7");
	return strata_ret_i64(c, (int64_t)(uint16_t)v);
}

/* The x87 control word's rounding-control field (bits 10-11, SDM Vol. 1
 * 8.1.5): a counter modulo 4 that no SSE code reads. */
STRATA_FUNCTION(x87_rc_next, "i()")
{
	uint16_t cw;

	__asm__ volatile("fnstcw %0" : "=m"(cw));
	unsigned n = ((cw >> 10) + 1) & 3;
	cw = (uint16_t)((cw & ~(3u << 10)) | n << 10);
	__asm__ volatile("fldcw %0" : : "m"(cw));
	return strata_ret_i64(c, n);
}

/* An x87 data register: a value left on the x87 stack (ST0) between
 * calls; the tag word (FNSTENV) says whether one is there. */
STRATA_FUNCTION(x87_st_next, "i()")
{
	struct {
		uint16_t cw, r0, sw, r1, tw, r2;
		uint32_t ip, cs_op, dp, ds;
	} env;
	int64_t v = 0;

	__asm__ volatile("fnstenv %0" : "=m"(env));
	__asm__ volatile("fldcw %0" : : "m"(env.cw));  /* fnstenv masked every exception */
	unsigned top = (env.sw >> 11) & 7;
	if (((env.tw >> (2 * top)) & 3) != 3)  /* ST0 holds a value */
		__asm__ volatile("fistpll %0" : "=m"(v));
	v++;
	__asm__ volatile("fildll %0" : : "m"(v));
	return strata_ret_i64(c, v);
}

/* MXCSR's sticky exception flags (bits 0-5, SDM Vol. 1 10.2.3): a counter
 * modulo 64 that changes no result (every exception stays masked). */
STRATA_FUNCTION(mxcsr_next, "i()")
{
	uint32_t m;

	__asm__ volatile("stmxcsr %0" : "=m"(m));
	unsigned n = ((m & 0x3f) + 1) & 0x3f;
	m = (m & ~0x3fu) | n;
	__asm__ volatile("ldmxcsr %0" : : "m"(m));
	return strata_ret_i64(c, n);
}

/* What the CPU tells the guest: argument 0 CPUID.1:ECX, 1 CPUID.(7,0):EBX,
 * 2 XCR0 where the OS bit lets XGETBV run (else -1). For the tests'
 * messages and docs/guests.md. */
STRATA_FUNCTION(vec_cpu, "i(i)")
{
	uint32_t r[4];

	switch (strata_arg_i64(c, 0)) {
	case 0:
		cpuid(1, 0, r);
		return strata_ret_i64(c, r[2]);
	case 1:
		cpuid(7, 0, r);
		return strata_ret_i64(c, r[1]);
	default:
		cpuid(1, 0, r);
		if (!(r[2] & CPUID1_ECX_OSXSAVE))
			return strata_ret_i64(c, -1);
		uint32_t lo, hi;
		__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
		return strata_ret_i64(c, (int64_t)((uint64_t)hi << 32 | lo));
	}
}
