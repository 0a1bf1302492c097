/* tests/guestlib: the guest's number parsing and sorting (musl's strtol, strtod, qsort: libstrata-c.a with sg_ names) against glibc's. */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/guestlib/musl_sg.h"

static const char *const number_inputs[] = {
	"0", "1", "-1", "+1", "  42", "\t\n -17xyz", "12abc", "abc", "", "-", "+",
	"0x", "0x1f", "0X1F", "0xg", "-0x10", "010", "019", "08", "0b101", "z", "Zz",
	"2147483647", "2147483648", "-2147483649", "9223372036854775807",
	"9223372036854775808", "-9223372036854775808", "-9223372036854775809",
	"18446744073709551615", "18446744073709551616", "-18446744073709551615",
	"99999999999999999999999999", "0000000000000000000000000001",
	"7fffffffffffffff", "ffffffffffffffff", "10000000000000000", " +0x7fffffffffffffff",
	"1010101", "777", "-777", "zzzzzzzzzzzzz", "  -  1",
};

Test(guestlib, strtol_and_strtoul_match_glibc_values_and_ends)
{
	const int bases[] = { 0, 2, 8, 10, 16, 36 };

	for (size_t i = 0; i < sizeof number_inputs / sizeof number_inputs[0]; i++)
		for (size_t b = 0; b < sizeof bases / sizeof bases[0]; b++) {
			const char *s = number_inputs[i];
			char *e1, *e2;
			long l1 = sg_strtol(s, &e1, bases[b]), l2 = strtol(s, &e2, bases[b]);
			cr_assert_eq(l1, l2, "strtol('%s', %d): %ld vs %ld", s, bases[b], l1, l2);
			cr_assert_eq(e1, e2, "strtol('%s', %d) end", s, bases[b]);
			unsigned long u1 = sg_strtoul(s, &e1, bases[b]), u2 = strtoul(s, &e2, bases[b]);
			cr_assert_eq(u1, u2, "strtoul('%s', %d): %lu vs %lu", s, bases[b], u1, u2);
			cr_assert_eq(e1, e2, "strtoul('%s', %d) end", s, bases[b]);
		}
	cr_assert_eq(sg_atoi(" -123x"), -123);
	cr_assert_eq(sg_strtol("12", NULL, 10), 12);
}

Test(guestlib, strtol_rejects_a_bad_base_without_parsing)
{
	char *end;
	const char *s = "123";

	cr_assert_eq(sg_strtol(s, &end, 1), 0);
	cr_assert_eq(end, s);
	cr_assert_eq(sg_strtoul(s, &end, 37), 0);
	cr_assert_eq(end, s);
}

static const char *const double_inputs[] = {
	"0", "-0", "0.1", "1e-310", "4.9e-324", "2.4703282292062327e-324", "2.4703282292062328e-324",
	"1.7976931348623157e308", "1.7976931348623159e308", "1e400", "-1e400", "0x1.8p3", "0x1p-1074",
	"  +12.5e+3xyz", "inf", "-Infinity", "nan", "NAN(123)", ".5", "5.", ".", "e5", "1e", "1e+",
	"0.30000000000000004", "9007199254740993", "123456789012345678901234567890", "0x", "-0x.8",
	"2.2250738585072011e-308", "2.2250738585072014e-308",
};

Test(guestlib, strtod_matches_glibc_bits_ends_and_errno)
{
	for (size_t i = 0; i < sizeof double_inputs / sizeof double_inputs[0]; i++) {
		const char *s = double_inputs[i];
		char *e1, *e2;
		errno = 0;
		double d1 = sg_strtod(s, &e1);
		int err1 = errno;
		errno = 0;
		double d2 = strtod(s, &e2);
		int err2 = errno;
		if (d1 != d1 && d2 != d2)
			d1 = d2 = 0; /* NaN payloads may differ; both being NaN is the contract */
		cr_assert(memcmp(&d1, &d2, sizeof d1) == 0, "strtod('%s'): %a vs glibc %a", s, d1, d2);
		cr_assert_eq(e1, e2, "strtod('%s') end", s);
		/* ERANGE on underflow is the implementation's (C11 7.22.1.3):
		 * glibc sets it for every subnormal result, musl does not; and
		 * musl sets EINVAL where nothing was converted, which C allows. */
		if (fpclassify(d2) != FP_SUBNORMAL)
			cr_assert_eq(err1 == ERANGE, err2 == ERANGE, "strtod('%s') errno %d vs glibc %d", s, err1, err2);
	}
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

Test(guestlib, qsort_sorts_like_glibc_at_every_length)
{
	static int a[600], b[600];

	for (size_t n = 0; n <= 600; n += n < 20 ? 1 : 37) {
		unsigned x = 12345u + (unsigned)n;
		for (size_t i = 0; i < n; i++) {
			x = x * 1103515245u + 12345u;
			a[i] = b[i] = (int)(x >> 16) % 50; /* many equal keys */
		}
		sg_qsort(a, n, sizeof a[0], cmp_int);
		qsort(b, n, sizeof b[0], cmp_int);
		cr_assert(memcmp(a, b, n * sizeof a[0]) == 0, "qsort of %zu ints", n);
	}
}
