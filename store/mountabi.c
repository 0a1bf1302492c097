/* mountabi.c: encoder and decoder of the user.strata.restore answer (the format is in mountabi.h). */
#include <errno.h>
#include <string.h>

#include "store/mountabi.h"

/* The version field as the encoder writes it, with its NUL. */
#define VERSION_TEXT "1"
_Static_assert(ST_RESTORE_VERSION == 1, "VERSION_TEXT spells ST_RESTORE_VERSION");

static void enc_put(struct st_restore_enc *e, const void *p, size_t n)
{
	if (e->buf && e->len < e->size && n <= e->size - e->len)
		memcpy(e->buf + e->len, p, n);
	e->len += n;
}

void st_restore_enc_begin(struct st_restore_enc *e, char *buf, size_t size, const char *manifest, size_t mlen)
{
	*e = (struct st_restore_enc){ .buf = size ? buf : NULL, .size = size };
	enc_put(e, VERSION_TEXT, sizeof(VERSION_TEXT));
	enc_put(e, manifest, mlen);
	enc_put(e, "", 1);
}

void st_restore_enc_layer(struct st_restore_enc *e, char kind, const char *payload)
{
	enc_put(e, &kind, 1);
	enc_put(e, payload, strlen(payload) + 1);
}

int st_restore_enc_end(const struct st_restore_enc *e)
{
	if (e->len > ST_XATTR_VALUE_MAX)
		return -E2BIG;
	if (e->buf && e->len > e->size)
		return -ERANGE;
	return (int)e->len;
}

int st_restore_decode(const char *buf, size_t n, struct st_restore_answer *out)
{
	const char *end = buf + n, *p, *z;
	struct st_restore_answer a = { .end = end };

	/* The version: exactly the one this code reads. */
	if (!(z = memchr(buf, '\0', n)) || (size_t)(z - buf) != strlen(VERSION_TEXT) ||
	    memcmp(buf, VERSION_TEXT, strlen(VERSION_TEXT)) != 0)
		return ST_EFORMAT;
	a.version = ST_RESTORE_VERSION;
	p = z + 1;
	if (!(z = memchr(p, '\0', (size_t)(end - p))))
		return ST_EFORMAT;
	a.manifest = p;
	a.manifest_len = (size_t)(z - p);
	a.next = p = z + 1;
	/* Entries: each a kind byte and a payload, NUL-ended; nothing after. */
	while (p < end) {
		if (!(z = memchr(p, '\0', (size_t)(end - p))) || z == p)
			return ST_EFORMAT;
		a.nlayers++;
		p = z + 1;
	}
	*out = a;
	return 0;
}

bool st_restore_answer_next(struct st_restore_answer *a, struct st_restore_layer *out)
{
	if (a->next >= a->end)
		return false;
	size_t len = strlen(a->next); /* decode proved a NUL before end */
	*out = (struct st_restore_layer){ .kind = a->next[0], .payload = a->next + 1, .len = len - 1 };
	a->next += len + 1;
	return true;
}
