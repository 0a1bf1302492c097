/* mountabi.c: the user.strata.restore answer's encoder and decoder, and the mountinfo line of a strata mount (mountabi.h). */
#include <errno.h>
#include <stdio.h>
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

/* Copy field [s, e) of a mountinfo line to out, undoing the kernel's octal
 * escapes (\040 space, \011 tab, \012 newline, \134 backslash). */
static int unescape(const char *s, const char *e, char *out, size_t size)
{
	size_t n = 0;

	while (s < e) {
		char c = *s++;
		if (c == '\\' && e - s >= 3 && s[0] >= '0' && s[0] <= '3' && s[1] >= '0' && s[1] <= '7' &&
		    s[2] >= '0' && s[2] <= '7') {
			c = (char)((s[0] - '0') << 6 | (s[1] - '0') << 3 | (s[2] - '0'));
			s += 3;
		}
		if (c == '\0' || n + 1 >= size)
			return -ENAMETOOLONG;
		out[n++] = c;
	}
	out[n] = '\0';
	return 0;
}

/* The next space-separated field of [*p, e), or NULL at the end of the line. */
static const char *next_field(const char **p, const char *e, const char **fend)
{
	const char *s = *p;

	while (s < e && *s == ' ')
		s++;
	if (s >= e)
		return NULL;
	const char *f = s;
	while (s < e && *s != ' ')
		s++;
	*fend = s;
	*p = s;
	return f;
}

int st_mountinfo_store(const char *text, size_t len, unsigned major, unsigned minor, char *store, size_t size)
{
	const char *end = text + len;

	for (const char *line = text; line < end;) {
		const char *eol = memchr(line, '\n', (size_t)(end - line));
		if (!eol)
			eol = end;
		/* id parent major:minor root mountpoint options [optional...] - fstype source superoptions */
		const char *p = line, *f, *fe = NULL, *fstype = NULL, *fstype_end = NULL;
		unsigned i = 0, ma, mi;
		bool dev_match = false;
		while ((f = next_field(&p, eol, &fe))) {
			if (i == 2) {
				char dev[32];
				int used = 0;
				if ((size_t)(fe - f) < sizeof(dev)) {
					memcpy(dev, f, (size_t)(fe - f));
					dev[fe - f] = '\0';
					dev_match = sscanf(dev, "%u:%u%n", &ma, &mi, &used) == 2 && used == fe - f &&
						    ma == major && mi == minor;
				}
				if (!dev_match)
					break;
			} else if (i >= 6 && fe - f == 1 && *f == '-') {
				fstype = next_field(&p, eol, &fstype_end);
				const char *src_end = NULL, *src = fstype ? next_field(&p, eol, &src_end) : NULL;
				if (!src || (size_t)(fstype_end - fstype) != strlen(ST_MOUNT_FSTYPE) ||
				    memcmp(fstype, ST_MOUNT_FSTYPE, strlen(ST_MOUNT_FSTYPE)) != 0)
					break;
				if ((size_t)(src_end - src) <= strlen(ST_MOUNT_SOURCE) ||
				    memcmp(src, ST_MOUNT_SOURCE, strlen(ST_MOUNT_SOURCE)) != 0)
					break;
				if (unescape(src + strlen(ST_MOUNT_SOURCE), src_end, store, size) < 0 || store[0] != '/')
					break;
				return 1;
			}
			i++;
		}
		line = eol + 1;
	}
	return 0;
}
