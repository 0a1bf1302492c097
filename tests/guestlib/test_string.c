/* tests/guestlib: the guest memory and string functions and number parsing against glibc. */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "tests/guestlib/common.h"

#define BUF 320

static unsigned char src_buf[BUF + 64], a_buf[BUF + 64], b_buf[BUF + 64];

static void fill_random(unsigned char *p, size_t n, uint64_t *rng)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)rng_next(rng);
}

static int sign(int v)
{
	return (v > 0) - (v < 0);
}

Test(guestlib, memcpy_copies_every_length_and_alignment)
{
	uint64_t rng = 1;

	for (size_t so = 0; so < 16; so++)
		for (size_t doff = 0; doff < 16; doff++)
			for (size_t n = 0; n <= 300; n += (n < 40 ? 1 : 13)) {
				fill_random(src_buf, sizeof src_buf, &rng);
				fill_random(a_buf, sizeof a_buf, &rng);
				memcpy(b_buf, a_buf, sizeof a_buf);
				void *r = sg_memcpy(a_buf + doff, src_buf + so, n);
				memcpy(b_buf + doff, src_buf + so, n);
				cr_assert_eq(r, a_buf + doff);
				cr_assert(memcmp(a_buf, b_buf, sizeof a_buf) == 0,
				          "so=%zu do=%zu n=%zu", so, doff, n);
			}
}

Test(guestlib, memmove_handles_every_overlap)
{
	uint64_t rng = 2;

	for (size_t from = 0; from < 48; from++)
		for (size_t to = 0; to < 48; to++)
			for (size_t n = 0; n <= 200; n += (n < 33 ? 1 : 29)) {
				fill_random(a_buf, sizeof a_buf, &rng);
				memcpy(b_buf, a_buf, sizeof a_buf);
				void *r = sg_memmove(a_buf + to, a_buf + from, n);
				memmove(b_buf + to, b_buf + from, n);
				cr_assert_eq(r, a_buf + to);
				cr_assert(memcmp(a_buf, b_buf, sizeof a_buf) == 0,
				          "from=%zu to=%zu n=%zu", from, to, n);
			}
}

Test(guestlib, memset_fills_exactly_n_bytes_with_the_low_byte)
{
	uint64_t rng = 3;
	const int values[] = { 0, 1, 0x7f, 0x80, 0xff, 0x1ab, -1, -200 };

	for (size_t off = 0; off < 16; off++)
		for (size_t n = 0; n <= 300; n += (n < 40 ? 1 : 7))
			for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) {
				fill_random(a_buf, sizeof a_buf, &rng);
				memcpy(b_buf, a_buf, sizeof a_buf);
				cr_assert_eq(sg_memset(a_buf + off, values[v], n), a_buf + off);
				memset(b_buf + off, values[v], n);
				cr_assert(memcmp(a_buf, b_buf, sizeof a_buf) == 0);
			}
}

Test(guestlib, memcmp_orders_as_unsigned_bytes)
{
	uint64_t rng = 4;

	for (int iter = 0; iter < 20000; iter++) {
		size_t n = rng_next(&rng) % 70, diff = n ? rng_next(&rng) % n : 0;
		size_t ao = rng_next(&rng) % 8, bo = rng_next(&rng) % 8;
		fill_random(a_buf + ao, n, &rng);
		memcpy(b_buf + bo, a_buf + ao, n);
		if (n && (iter & 3))
			b_buf[bo + diff] = (unsigned char)rng_next(&rng);
		cr_assert_eq(sign(sg_memcmp(a_buf + ao, b_buf + bo, n)),
		             sign(memcmp(a_buf + ao, b_buf + bo, n)), "n=%zu diff=%zu", n, diff);
	}
	cr_assert(sg_memcmp("\x80", "\x7f", 1) > 0);
	cr_assert_eq(sg_memcmp("abc", "abd", 0), 0);
}

Test(guestlib, memchr_finds_the_first_matching_byte)
{
	uint64_t rng = 5;

	for (int iter = 0; iter < 20000; iter++) {
		size_t n = rng_next(&rng) % 100;
		for (size_t i = 0; i < n; i++)
			a_buf[i] = (unsigned char)(rng_next(&rng) % 8 + 0x7c);
		int c = (int)(rng_next(&rng) % 8 + 0x7c);
		if (iter % 5 == 0)
			c += 256; /* only the low byte counts */
		cr_assert_eq(sg_memchr(a_buf, c, n), memchr(a_buf, c, n));
	}
}

/* Random strings over a small alphabet, so matches and prefixes happen. */
static void random_string(char *s, size_t max, uint64_t *rng, const char *alphabet)
{
	size_t n = rng_next(rng) % max, k = strlen(alphabet);

	for (size_t i = 0; i < n; i++)
		s[i] = alphabet[rng_next(rng) % k];
	s[n] = '\0';
}

Test(guestlib, strlen_and_strnlen_match_glibc)
{
	uint64_t rng = 6;
	char s[BUF];

	for (int iter = 0; iter < 5000; iter++) {
		size_t off = rng_next(&rng) % 16;
		random_string(s + off, 200, &rng, "ab\x80\xff");
		cr_assert_eq(sg_strlen(s + off), strlen(s + off));
		for (size_t max = 0; max < 220; max += 17)
			cr_assert_eq(sg_strnlen(s + off, max), strnlen(s + off, max));
	}
	cr_assert_eq(sg_strlen(""), 0);
}

Test(guestlib, strcmp_and_strncmp_match_glibc_in_sign)
{
	uint64_t rng = 7;
	char a[64], b[64];

	for (int iter = 0; iter < 30000; iter++) {
		random_string(a, 8, &rng, "ab\xe9");
		random_string(b, 8, &rng, "ab\xe9");
		cr_assert_eq(sign(sg_strcmp(a, b)), sign(strcmp(a, b)), "'%s' '%s'", a, b);
		for (size_t n = 0; n < 10; n++)
			cr_assert_eq(sign(sg_strncmp(a, b, n)), sign(strncmp(a, b, n)));
	}
	cr_assert(sg_strcmp("\xff", "a") > 0);
	cr_assert_eq(sg_strncmp("abc", "abd", 2), 0);
	cr_assert_eq(sg_strncmp("ab", "ab", SIZE_MAX), 0);
}

Test(guestlib, strcpy_and_strncpy_copy_and_pad_like_glibc)
{
	uint64_t rng = 8;
	char s[64];

	for (int iter = 0; iter < 5000; iter++) {
		random_string(s, 40, &rng, "xyz");
		fill_random(a_buf, sizeof a_buf, &rng);
		memcpy(b_buf, a_buf, sizeof a_buf);
		cr_assert_eq(sg_strcpy((char *)a_buf + 3, s), (char *)a_buf + 3);
		strcpy((char *)b_buf + 3, s);
		cr_assert(memcmp(a_buf, b_buf, sizeof a_buf) == 0);
		for (size_t n = 0; n < 50; n += 3) {
			fill_random(a_buf, sizeof a_buf, &rng);
			memcpy(b_buf, a_buf, sizeof a_buf);
			cr_assert_eq(sg_strncpy((char *)a_buf + 1, s, n), (char *)a_buf + 1);
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-truncation"
#endif
			strncpy((char *)b_buf + 1, s, n);
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
			cr_assert(memcmp(a_buf, b_buf, sizeof a_buf) == 0, "'%s' n=%zu", s, n);
		}
	}
}

Test(guestlib, strchr_and_strrchr_match_glibc_including_the_terminator)
{
	uint64_t rng = 9;
	char s[64];
	const int cs[] = { 'a', 'b', 'c', 0, 0xe9, (int)(char)0xe9, 'a' + 256 };

	for (int iter = 0; iter < 5000; iter++) {
		random_string(s, 40, &rng, "ab\xe9");
		for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
			cr_assert_eq(sg_strchr(s, cs[i]), strchr(s, cs[i]), "'%s' %d", s, cs[i]);
			cr_assert_eq(sg_strrchr(s, cs[i]), strrchr(s, cs[i]), "'%s' %d", s, cs[i]);
		}
	}
}

Test(guestlib, strstr_matches_glibc)
{
	uint64_t rng = 10;
	char h[128], n[16];

	for (int iter = 0; iter < 30000; iter++) {
		random_string(h, 100, &rng, "aab");
		random_string(n, 6, &rng, "ab");
		cr_assert_eq(sg_strstr(h, n), strstr(h, n), "'%s' '%s'", h, n);
	}
	cr_assert_eq(sg_strstr("", ""), strstr("", ""));
	cr_assert_null(sg_strstr("", "a"));
}
