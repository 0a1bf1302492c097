/* test_chunks.c: the chunk index (index/lazy.h): build, encode, strict parse, and every refusal saying why. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "index/lazy.h"

/* A temp file of n pages of a pattern, open for reading. */
static int pattern_fd(uint64_t pages)
{
	char path[] = "/tmp/strata-chunks.XXXXXX";
	int fd = mkstemp(path);
	uint8_t page[4096];

	cr_assert(fd >= 0);
	unlink(path);
	for (uint64_t p = 0; p < pages; p++) {
		for (size_t i = 0; i < sizeof(page); i++)
			page[i] = (uint8_t)(p * 31 + i);
		cr_assert_eq(write(fd, page, sizeof(page)), (ssize_t)sizeof(page));
	}
	return fd;
}

static struct ix_chunks *build(uint64_t pages, uint32_t cs)
{
	struct ix_chunks *c = NULL;
	st_id layer;
	int fd = pattern_fd(pages);

	st_id_hash("layer", 5, &layer);
	cr_assert_eq(ix_chunks_build(fd, &layer, pages * 4096, cs, &c), 0);
	close(fd);
	return c;
}

Test(chunks, build_hashes_each_chunk_and_a_short_last_one)
{
	struct ix_chunks *c = build(20, 16384); /* 80 KiB: 5 chunks, the last 16 KiB */
	uint8_t buf[16384];
	int fd = pattern_fd(20);
	st_id h;

	cr_assert_eq(c->n, 5);
	cr_assert_eq(ix_chunk_len(c, 4), 16384);
	cr_assert_eq(pread(fd, buf, 16384, 3 * 16384), 16384);
	st_id_hash(buf, 16384, &h);
	cr_assert(st_id_equal(&h, &c->hash[3]));
	close(fd);
	ix_chunks_free(c);

	c = build(5, 8192); /* 20 KiB in chunks of 8: the last is 4 KiB */
	cr_assert_eq(c->n, 3);
	cr_assert_eq(ix_chunk_len(c, 2), 4096);
	ix_chunks_free(c);
}

Test(chunks, encode_parse_round_trip)
{
	struct ix_chunks *c = build(64, 65536), *back = NULL;
	uint8_t *buf;
	size_t len;
	char why[ST_WHY_LEN] = "";

	cr_assert_eq(ix_chunks_encode(c, &buf, &len), 0);
	cr_assert_eq(len, IX_CHUNKS_HEADER + 4 * 16);
	cr_assert_eq(ix_chunks_parse(buf, len, &back, why, sizeof(why)), 0, "%s", why);
	cr_assert(st_id_equal(&back->layer, &c->layer));
	cr_assert_eq(back->size, c->size);
	cr_assert_eq(back->chunk_size, 65536);
	cr_assert_eq(back->n, 4);
	cr_assert_eq(memcmp(back->hash, c->hash, 4 * 16), 0);
	free(buf);
	ix_chunks_free(back);
	ix_chunks_free(c);
}

/* Encode c, let edit change the bytes, expect a refusal whose reason holds want. */
static void refused(void (*edit)(uint8_t *buf, size_t *len), const char *want)
{
	struct ix_chunks *c = build(8, 16384), *back = NULL;
	uint8_t *buf;
	size_t len;
	char why[ST_WHY_LEN] = "";

	cr_assert_eq(ix_chunks_encode(c, &buf, &len), 0);
	edit(buf, &len);
	cr_assert_eq(ix_chunks_parse(buf, len, &back, why, sizeof(why)), ST_EFORMAT);
	cr_assert(strstr(why, want), "why '%s' lacks '%s'", why, want);
	cr_assert_null(back);
	free(buf);
	ix_chunks_free(c);
}

static void bad_magic(uint8_t *b, size_t *len) { b[0] = 'X'; }
static void cut_short(uint8_t *b, size_t *len) { *len -= 16; }
static void one_more(uint8_t *b, size_t *len) { b[24] = 0; b[25] = 0xc0; } /* size 48 KiB: 3 chunks, 2 listed */
static void trailing(uint8_t *b, size_t *len) { *len += 1; }
static void header_only(uint8_t *b, size_t *len) { *len = 20; }
static void odd_chunk(uint8_t *b, size_t *len) { b[32] = 1; }
static void huge_chunk(uint8_t *b, size_t *len) { b[32] = 0; b[33] = 0; b[34] = 0; b[35] = 2; }
static void tiny_chunk(uint8_t *b, size_t *len) { b[32] = 0; b[33] = 8; b[34] = 0; b[35] = 0; }
static void ragged_size(uint8_t *b, size_t *len) { b[24] = 1; }
static void zero_size(uint8_t *b, size_t *len) { memset(b + 24, 0, 8); }
static void reserved(uint8_t *b, size_t *len) { b[37] = 1; }

Test(chunks, parse_refuses_what_is_not_exactly_an_index)
{
	refused(bad_magic, "not a strata chunk index");
	refused(header_only, "not a strata chunk index");
	refused(cut_short, "needs");
	refused(trailing, "needs");
	refused(one_more, "needs");
	refused(odd_chunk, "not a power of two");
	refused(huge_chunk, "not a power of two");
	refused(tiny_chunk, "not a power of two");
	refused(ragged_size, "not whole pages");
	refused(zero_size, "not whole pages");
	refused(reserved, "reserved");
}

Test(chunks, build_refuses_bad_sizes)
{
	struct ix_chunks *c = NULL;
	st_id layer = { { 0 } };
	int fd = pattern_fd(2);

	cr_assert_eq(ix_chunks_build(fd, &layer, 8192, 3000, &c), -EINVAL);
	cr_assert_eq(ix_chunks_build(fd, &layer, 0, 4096, &c), -EINVAL);
	cr_assert_eq(ix_chunks_build(fd, &layer, 12288, 4096, &c), ST_ELAYOUT); /* the file is shorter */
	cr_assert_null(c);
	close(fd);
}
