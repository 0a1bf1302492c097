/* tests/guestlib: the guest's snprintf (musl's, from libstrata-c.a with sg_ names) against glibc's on generated formats, values and sizes. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <math.h>
#include <string.h>

#include "tests/guestlib/common.h"
#include "tests/guestlib/musl_sg.h"

static const size_t sizes[] = { 0, 1, 2, 3, 5, 8, 13, 32, 300 };
static unsigned long checks;

/*
 * Format with glibc and with the guest vsnprintf into buffers of every size
 * in sizes[]; return values and buffer contents (including the bytes past
 * the end, which must stay untouched) must be identical.
 */
__attribute__((format(printf, 1, 2))) static void check(const char *fmt, ...)
{
	char want[320], got[320];

	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		va_list a, b;
		size_t size = sizes[i];
		memset(want, '@', sizeof want);
		memset(got, '@', sizeof got);
		va_start(a, fmt);
		va_copy(b, a);
		int rw = vsnprintf(size ? want : NULL, size, fmt, a);
		int rg = sg_vsnprintf(size ? got : NULL, size, fmt, b);
		va_end(b);
		va_end(a);
		cr_assert_eq(rg, rw, "fmt \"%s\" size %zu: returned %d, glibc %d", fmt, size, rg, rw);
		cr_assert(memcmp(got, want, sizeof want) == 0,
		          "fmt \"%s\" size %zu: \"%.*s\" vs glibc \"%.*s\"", fmt, size,
		          (int)(size ? size - 1 : 0), got, (int)(size ? size - 1 : 0), want);
		checks++;
	}
}

/* Build "%<flags><width><.prec><len><conv>" from its parts. */
static void spec(char *out, size_t cap, unsigned flagset, const char *width, const char *prec,
                 const char *len, char conv)
{
	static const char flagchars[] = "-0+ #";
	char flags[8];
	size_t n = 0;

	for (int i = 0; i < 5; i++)
		if (flagset & (1u << i))
			flags[n++] = flagchars[i];
	flags[n] = '\0';
	snprintf(out, cap, "[%%%s%s%s%s%c]", flags, width, prec, len, conv);
}

static const char *const widths[] = { "", "1", "4", "12", "25" };
static const char *const precs[] = { "", ".", ".0", ".1", ".3", ".18" };

Test(guestlib, snprintf_integers_match_glibc_for_all_flag_width_precision_combinations)
{
	static const long long sv[] = { 0, 1, -1, 7, -42, 127, -128, 255, 300, 32767, -32768,
	                                65536, 2147483647, -2147483647 - 1, 4294967296LL,
	                                9223372036854775807LL, -9223372036854775807LL - 1 };
	static const char convs[] = "diuxXo";
	static const char *const lens[] = { "", "hh", "h", "l", "ll", "z", "j", "t" };
	char f[64];

	checks = 0;
	for (size_t c = 0; convs[c]; c++)
		for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
			for (unsigned flagset = 0; flagset < 32; flagset++) {
				bool is_signed = convs[c] == 'd' || convs[c] == 'i';
				/* '#' is only defined for o, x and X. */
				if ((flagset & 16) && (is_signed || convs[c] == 'u'))
					continue;
				for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++)
					for (size_t p = 0; p < sizeof precs / sizeof precs[0]; p++) {
						spec(f, sizeof f, flagset, widths[w], precs[p], lens[l], convs[c]);
						for (size_t v = 0; v < sizeof sv / sizeof sv[0]; v++) {
							long long x = sv[v];
							switch (l) {
							case 0: check(f, (int)x); break;
							case 1: check(f, (int)x); break;
							case 2: check(f, (int)x); break;
							case 3: check(f, (long)x); break;
							case 4: check(f, x); break;
							case 5: check(f, (size_t)x); break;
							case 6: check(f, (intmax_t)x); break;
							default: check(f, (ptrdiff_t)x); break;
							}
						}
					}
			}
	cr_log_info("integer format checks: %lu", checks);
	cr_assert_gt(checks, 100000);
}

Test(guestlib, snprintf_strings_chars_and_pointers_match_glibc)
{
	/* %s of NULL is undefined: glibc and musl differ below precision 6 (below). */
	static const char *const strs[] = { "", "a", "hello", "a longer string of text" };
	static const int chars[] = { 'x', ' ', '%', 0xe9, 0 };
	/* %p of NULL is implementation-defined: glibc prints (nil), musl 0 (below). */
	static const uintptr_t ptrs[] = { 1, 0x1000, 0xdeadbeef, (uintptr_t)-1 };
	char f[64];

	for (unsigned flagset = 0; flagset < 2; flagset++) /* only '-' applies */
		for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
			for (size_t p = 0; p < sizeof precs / sizeof precs[0]; p++) {
				spec(f, sizeof f, flagset, widths[w], precs[p], "", 's');
				for (size_t s = 0; s < sizeof strs / sizeof strs[0]; s++)
					check(f, strs[s]);
			}
			spec(f, sizeof f, flagset, widths[w], "", "", 'c');
			for (size_t c = 0; c < sizeof chars / sizeof chars[0]; c++)
				check(f, chars[c]);
			spec(f, sizeof f, flagset, widths[w], "", "", 'p');
			for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
				check(f, (void *)ptrs[i]);
		}
}

Test(guestlib, snprintf_star_width_and_precision_match_glibc)
{
	static const int ws[] = { -20, -5, -1, 0, 1, 3, 17 };
	static const int ps[] = { -3, -1, 0, 1, 4, 12 };

	for (size_t w = 0; w < sizeof ws / sizeof ws[0]; w++)
		for (size_t p = 0; p < sizeof ps / sizeof ps[0]; p++) {
			check("%*d|%-*d|%.*d|%*.*x|%0*d", ws[w], 42, ws[w], -7, ps[p], 123, ws[w], ps[p],
			      0xabcu, ws[w], -5);
			check("%*s|%.*s|%-*.*s", ws[w], "str", ps[p], "precision", ws[w], ps[p], "both");
		}
}

Test(guestlib, snprintf_mixed_text_and_truncation_match_glibc)
{
	check("%s", "");
	check("plain text without conversions");
	check("100%% sure");
	check("%d%s%c%x", 1, "two", '3', 4u);
	check("name=%s id=%08x count=%+d ptr=%p done", "guest", 0xbeefu, 17, (void *)0x7f00);
	check("%s and %s and %s", "first", "second", "third");
	check("%5d|%-5d|%05d|%+5d|% 5d|%.0d|%#o|%#.0o|%#x|%#X|%#5x", 3, 3, 3, 3, 3, 0, 0, 0, 0, 255u, 255u);
	/* ints out of the length modifier's range: both sides must narrow them */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat"
	check("%hhd %hhu %hd %hu", 300, 300, 70000, 70000);
#pragma GCC diagnostic pop
	check("%lld %llu %zu %zd %td %jd", -1LL, 18446744073709551615ULL, (size_t)-1, (size_t)5,
	      (ptrdiff_t)-9, (intmax_t)-1);
}

Test(guestlib, snprintf_always_terminates_and_returns_the_full_length)
{
	char buf[8];

	memset(buf, 'z', sizeof buf);
	cr_assert_eq(sg_snprintf(buf, sizeof buf, "%s", "0123456789"), 10);
	cr_assert_str_eq(buf, "0123456");
	cr_assert_eq(sg_snprintf(buf, 1, "%d", 12345), 5);
	cr_assert_eq(buf[0], '\0');
	cr_assert_eq(sg_snprintf(NULL, 0, "%d-%s", 42, "x"), 4);
	/* Very wide fields are counted without being written past the end. */
	cr_assert_eq(sg_snprintf(buf, sizeof buf, "%100000d", 1), 100000);
	cr_assert_str_eq(buf, "       ");
}

Test(guestlib, snprintf_null_pointer_and_string_print_as_musl_says)
{
	char buf[64];

	cr_assert_eq(sg_snprintf(buf, sizeof buf, "%p|%s", (void *)0, (char *)0), 8);
	cr_assert_str_eq(buf, "0|(null)");
}

Test(guestlib, snprintf_floats_match_glibc_for_every_conversion_flag_width_and_precision)
{
	static const double vals[] = { 0.0, -0.0, 0.1, 1.0, -1.5, 2.5, 0.5, 1e-300, 2.2250738585072014e-308,
		1.7976931348623157e308, 123456789.125, 1e22, 1e23, 0.000123456, 3.141592653589793,
		-2.718281828459045, 1e100, 9007199254740993.0, 1.0 / 0.0, -1.0 / 0.0, 0.0 / 0.0, 4.9e-324 };
	static const char convs[] = "feEgGaA";
	static const char *const fprecs[] = { "", ".", ".0", ".1", ".3", ".17", ".40" };
	char f[64];

	for (unsigned flagset = 0; flagset < 32; flagset++)
		for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++)
			for (size_t p = 0; p < sizeof fprecs / sizeof fprecs[0]; p++)
				for (const char *c = convs; *c; c++) {
					spec(f, sizeof f, flagset, widths[w], fprecs[p], "", *c);
					for (size_t v = 0; v < sizeof vals / sizeof vals[0]; v++) {
						/* %a of a subnormal: the leading hex digit is the
						 * implementation's (glibc 0x0.0…1p-1022, musl 0x1p-1074). */
						if ((*c == 'a' || *c == 'A') && vals[v] != 0 && fabs(vals[v]) < 2.2250738585072014e-308)
							continue;
						check(f, vals[v]);
					}
				}
}

Test(guestlib, snprintf_long_double_matches_glibc)
{
	static const long double vals[] = { 0.1L, -1.5L, 1e4000L, 3.14159265358979323846264L, 1e-4000L };
	static const char *const fmts[] = { "[%Lf]", "[%.20Le]", "[%Lg]", "[%.25Lg]", "[%10.3Lf]" };

	for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++)
		for (size_t v = 0; v < sizeof vals / sizeof vals[0]; v++)
			check(fmts[i], vals[v]);
}
