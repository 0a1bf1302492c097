/* sha256.c: SHA-256 for OCI digests and base64 for registry credentials (OpenSSL's libcrypto), and the "sha256:<hex>" spelling. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "store/dl.h"
#include "store/store_int.h"
#include "store/sys.h"

/* libcrypto is loaded on the first digest (store/dl.h): mapping and relocating
 * it at every process start costs more than a whole libc-only program */
static struct {
	__typeof__(EVP_MD_CTX_new) *ctx_new;
	__typeof__(EVP_MD_CTX_free) *ctx_free;
	__typeof__(EVP_sha256) *sha256;
	__typeof__(EVP_DigestInit_ex) *init;
	__typeof__(EVP_DigestUpdate) *update;
	__typeof__(EVP_DigestFinal_ex) *final;
	__typeof__(EVP_Digest) *digest;
	__typeof__(EVP_DecodeBlock) *decode_block;
} evp;
static const char *const evp_syms[] = {
	"EVP_MD_CTX_new", "EVP_MD_CTX_free", "EVP_sha256", "EVP_DigestInit_ex", "EVP_DigestUpdate",
	"EVP_DigestFinal_ex", "EVP_Digest", "EVP_DecodeBlock",
};
_Static_assert(sizeof(evp_syms) / sizeof(evp_syms[0]) * sizeof(void *) == sizeof(evp), "evp_syms names every member of evp");
/* STRATA_LIBCRYPTO: found when strata was configured (store/meson.build) */
static struct st_dl evp_dl = ST_DL_INIT(STRATA_LIBCRYPTO, evp_syms, &evp, sizeof(evp_syms) / sizeof(evp_syms[0]));

#define EVP_MD_CTX_new evp.ctx_new
#define EVP_MD_CTX_free evp.ctx_free
#define EVP_sha256 evp.sha256
#define EVP_DigestInit_ex evp.init
#define EVP_DigestUpdate evp.update
#define EVP_DigestFinal_ex evp.final
#define EVP_Digest evp.digest
#define EVP_DecodeBlock evp.decode_block

/* st_sha256_hash cannot fail, so a libcrypto that was there when strata was
 * built and is gone now ends the process with the reason */
static int evp_load(bool must)
{
	int rc = st_dl_load(&evp_dl);

	if (rc < 0 && must) {
		fprintf(stderr, "strata: SHA-256 needs libcrypto: %s\n", evp_dl.why);
		abort();
	}
	return rc;
}

struct st_sha256 {
	EVP_MD_CTX *ctx;
};

int st_sha256_new(struct st_sha256 **out)
{
	struct st_sha256 *h = st_sys_calloc(1, sizeof(*h));

	if (!h)
		return -ENOMEM;
	if (evp_load(false) < 0) {
		free(h);
		return -ELIBACC;
	}
	h->ctx = EVP_MD_CTX_new();
	if (!h->ctx || EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1) {
		st_sha256_free(h);
		return -ENOMEM;
	}
	*out = h;
	return 0;
}

void st_sha256_reset(struct st_sha256 *h)
{
	EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL);
}

void st_sha256_update(struct st_sha256 *h, const void *buf, size_t len)
{
	if (len)
		EVP_DigestUpdate(h->ctx, buf, len);
}

void st_sha256_final(struct st_sha256 *h, uint8_t out[ST_SHA256_LEN])
{
	unsigned n = ST_SHA256_LEN;

	EVP_DigestFinal_ex(h->ctx, out, &n);
	EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL);
}

void st_sha256_free(struct st_sha256 *h)
{
	if (!h)
		return;
	EVP_MD_CTX_free(h->ctx);
	free(h);
}

void st_sha256_hash(const void *buf, size_t len, uint8_t out[ST_SHA256_LEN])
{
	unsigned n = ST_SHA256_LEN;

	evp_load(true);
	EVP_Digest(buf, len, out, &n, EVP_sha256(), NULL);
}

int st_base64_decode(const char *s, char **out, size_t *len)
{
	size_t n = strlen(s), pad = 0, full;
	char *in, *o;
	int got;

	/* docker writes the padding; other writers leave it out: add it. */
	while (n && s[n - 1] == '=')
		n--, pad++;
	if (pad > 2 || n % 4 == 1 || n > (size_t)INT_MAX / 2)
		return -EINVAL;
	if ((got = evp_load(false)) < 0)
		return got;
	full = (n + 3) / 4 * 4;
	if (!(in = st_sys_malloc(full + 1)) || !(o = st_sys_malloc(full / 4 * 3 + 1))) {
		free(in);
		return -ENOMEM;
	}
	memcpy(in, s, n);
	memset(in + n, '=', full - n);
	in[full] = '\0';
	got = EVP_DecodeBlock((unsigned char *)o, (const unsigned char *)in, (int)full);
	free(in);
	if (got < 0) {
		free(o);
		return -EINVAL;
	}
	/* EVP_DecodeBlock counts the padding as zero bytes. */
	got -= (int)(full - n);
	o[got] = '\0';
	*out = o;
	*len = (size_t)got;
	return 0;
}

void st_digest_format(const uint8_t sha[ST_SHA256_LEN], char out[ST_DIGEST_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";

	memcpy(out, "sha256:", 7);
	for (int i = 0; i < ST_SHA256_LEN; i++) {
		out[7 + 2 * i] = hex[sha[i] >> 4];
		out[8 + 2 * i] = hex[sha[i] & 15];
	}
	out[ST_DIGEST_LEN] = '\0';
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int st_digest_parse(const char *s, uint8_t out[ST_SHA256_LEN])
{
	uint8_t v[ST_SHA256_LEN];

	if (!s || strlen(s) != ST_DIGEST_LEN || memcmp(s, "sha256:", 7) != 0)
		return ST_EBADID;
	for (int i = 0; i < ST_SHA256_LEN; i++) {
		int hi = hexval(s[7 + 2 * i]), lo = hexval(s[8 + 2 * i]);
		if (hi < 0 || lo < 0)
			return ST_EBADID;
		v[i] = (uint8_t)(hi << 4 | lo);
	}
	memcpy(out, v, sizeof(v));
	return 0;
}
