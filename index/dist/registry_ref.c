/* registry_ref.c: registry references (REGISTRY/REPO[:TAG|@DIGEST]) and registry host names. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "index/dist/dist.h"

/* A repository path component: [a-z0-9]+ joined by '.', '_', '__' or '-'s. */
static bool component_valid(const char *s, size_t n)
{
	if (n == 0 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
		if (alnum)
			continue;
		if (c != '.' && c != '_' && c != '-')
			return false;
		if (i + 1 == n) /* a separator cannot end it */
			return false;
	}
	return true;
}

/* A DNS name or IPv4 address: labels of [A-Za-z0-9-], not starting or
 * ending with '-', joined by single dots. */
static bool hostname_valid(const char *s, size_t n)
{
	size_t label = 0;

	if (n == 0 || n > 253)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c == '.') {
			if (label == 0 || s[i - 1] == '-')
				return false;
			label = 0;
			continue;
		}
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-'))
			return false;
		if (c == '-' && label == 0)
			return false;
		if (++label > 63)
			return false;
	}
	return label > 0 && s[n - 1] != '-';
}

/* host[:port]: a DNS name, an IPv4 address or a [bracketed] IPv6 address,
 * and a port of 1..65535 if there is a ':'. A registry host is also
 * recognisable as one: it has a '.' or a port, or is "localhost". */
bool ix_registry_host_valid(const char *h)
{
	const char *colon, *name_end;
	bool v6 = h[0] == '[';

	if (v6) {
		const char *close = strchr(h, ']');
		if (!close || close == h + 1)
			return false;
		for (const char *p = h + 1; p < close; p++)
			if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || (*p >= 'A' && *p <= 'F') || *p == ':' ||
			      *p == '.'))
				return false;
		name_end = close + 1;
		if (*name_end && *name_end != ':')
			return false;
		colon = *name_end ? name_end : NULL;
	} else {
		colon = strchr(h, ':');
		name_end = colon ? colon : h + strlen(h);
		if (!hostname_valid(h, (size_t)(name_end - h)))
			return false;
	}
	if (colon) {
		unsigned long port = 0;
		const char *p = colon + 1;
		if (!*p || strlen(p) > 5)
			return false;
		for (; *p; p++) {
			if (*p < '0' || *p > '9')
				return false;
			port = port * 10 + (unsigned long)(*p - '0');
		}
		if (port == 0 || port > 65535)
			return false;
		return true;
	}
	return v6 || memchr(h, '.', (size_t)(name_end - h)) || strcmp(h, "localhost") == 0;
}

/* The tag of a reference that names neither a tag nor a digest. */
static const char default_tag[] = "latest";

int ix_registry_ref_parse(const char *s, struct ix_registry_ref *out)
{
	struct ix_registry_ref r;
	char *slash, *at, *colon;
	uint8_t sha[ST_SHA256_LEN];

	memset(&r, 0, sizeof(r));
	if (!s || strlen(s) >= sizeof(r.buf))
		return IX_EREF;
	strcpy(r.buf, s);
	if (!(slash = strchr(r.buf, '/')))
		return IX_EREF;
	*slash = '\0';
	r.host = r.buf;
	if (!ix_registry_host_valid(r.host))
		return IX_EREF;
	r.repo = slash + 1;
	if ((at = strchr(r.repo, '@'))) {
		*at = '\0';
		r.digest = at + 1;
		if (st_digest_parse(r.digest, sha) < 0)
			return IX_EREF;
	}
	colon = strrchr(r.repo, ':');
	if (colon && !strchr(colon, '/')) {
		*colon = '\0';
		r.tag = colon + 1;
		if (!st_name_valid(r.tag))
			return IX_EREF;
	}
	for (const char *c = r.repo;;) {
		const char *e = strchr(c, '/');
		size_t n = e ? (size_t)(e - c) : strlen(c);
		if (!component_valid(c, n))
			return IX_EREF;
		if (!e)
			break;
		c = e + 1;
	}
	if (strlen(r.repo) > 255)
		return IX_EREF;
	if (!r.tag && !r.digest)
		r.tag = default_tag;
	*out = r;
	/* The pointers point into out->buf now, at the same offsets (the
	 * default tag is not in buf: it stays where it is). */
	out->host = out->buf + (r.host - r.buf);
	out->repo = out->buf + (r.repo - r.buf);
	out->tag = !r.tag ? NULL : r.tag == default_tag ? default_tag : out->buf + (r.tag - r.buf);
	out->digest = r.digest ? out->buf + (r.digest - r.buf) : NULL;
	return 0;
}
