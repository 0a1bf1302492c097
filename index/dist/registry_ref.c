/* registry_ref.c: registry references (REGISTRY/REPO[:TAG|@DIGEST]) and credentials from docker-style auth files. */
#include <errno.h>
#include <jansson.h>
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

/* Does an "auths" key name host? "host", "https://host", "host/v2/"... */
static bool key_matches(const char *key, const char *host)
{
	size_t hl = strlen(host);

	if (strncmp(key, "https://", 8) == 0)
		key += 8;
	else if (strncmp(key, "http://", 7) == 0)
		key += 7;
	return strncmp(key, host, hl) == 0 && (key[hl] == '\0' || key[hl] == '/');
}

/* nu and np (malloc'd, either NULL when out of memory) into *user and
 * *pass: both, or -ENOMEM with neither written and both freed. */
static int creds_take(char *nu, char *np, char **user, char **pass)
{
	if (!nu || !np) {
		free(nu);
		free(np);
		return -ENOMEM;
	}
	*user = nu;
	*pass = np;
	return 0;
}

/* A credential helper's name (the X of docker-credential-X): letters,
 * digits, '-', '_', '.'; never a path. */
static bool helper_name_valid(const char *s)
{
	if (!*s || strlen(s) > 64)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '-' ||
		      *s == '_' || *s == '.'))
			return false;
	return s[-1] != '.';
}

/* The helper v names (a JSON string) into *helper; ST_EFORMAT if it is not a name. */
static int helper_take(json_t *v, const char *path, const char *what, char **helper, char *why, size_t whylen)
{
	if (!json_is_string(v) || !helper_name_valid(json_string_value(v))) {
		if (why && whylen)
			snprintf(why, whylen, "%s: %s is not the name of a docker-credential-NAME helper", path, what);
		return ST_EFORMAT;
	}
	if (!(*helper = strdup(json_string_value(v))))
		return -ENOMEM;
	return 2;
}

int ix_registry_auth_lookup(const char *path, const char *host, char **user, char **pass, char **helper, char *why,
			    size_t whylen)
{
	json_error_t e;
	json_t *root = json_load_file(path, 0, &e), *auths, *helpers, *v;
	const char *key;
	int rc = 1;

	if (!root) {
		FILE *f = fopen(path, "re");
		if (!f)
			return -errno;
		fclose(f);
		if (why && whylen)
			snprintf(why, whylen, "%s is not valid JSON at line %d: %s", path, e.line, e.text);
		return ST_EFORMAT;
	}
	auths = json_object_get(root, "auths");
	helpers = json_object_get(root, "credHelpers");
	if ((auths && !json_is_object(auths)) || (helpers && !json_is_object(helpers))) {
		if (why && whylen)
			snprintf(why, whylen, "%s: \"%s\" is not an object", path,
				 auths && !json_is_object(auths) ? "auths" : "credHelpers");
		rc = ST_EFORMAT;
		goto out_decref;
	}
	/* docker's order: the host's own helper, then its entry, then the
	 * store for every host. */
	json_object_foreach(helpers, key, v) {
		if (key_matches(key, host)) {
			rc = helper_take(v, path, "the credHelpers entry", helper, why, whylen);
			goto out_decref;
		}
	}
	json_object_foreach(auths, key, v) {
		json_t *a = json_object_get(v, "auth"), *u = json_object_get(v, "username"),
		       *p = json_object_get(v, "password");
		char *dec = NULL, *sep = NULL, *nu = NULL, *np = NULL;
		size_t declen;

		if (!key_matches(key, host))
			continue;
		if (json_is_string(a) && json_string_length(a)) {
			int drc = st_base64_decode(json_string_value(a), &dec, &declen);
			if (drc == -ENOMEM) {
				rc = drc;
				goto out_decref;
			}
			if (drc < 0 || strlen(dec) != declen || !(sep = strchr(dec, ':'))) {
				free(dec);
				if (why && whylen)
					snprintf(why, whylen, "%s: the auth of %s is not base64 of user:password", path, key);
				rc = ST_EFORMAT;
				goto out_decref;
			}
			*sep = '\0';
			nu = strdup(dec);
			np = strdup(sep + 1);
			free(dec);
		} else if (json_is_string(u) && json_is_string(p)) {
			nu = strdup(json_string_value(u));
			np = strdup(json_string_value(p));
		} else {
			continue;
		}
		rc = creds_take(nu, np, user, pass);
		break;
	}
	if (rc == 1 && (v = json_object_get(root, "credsStore")) && !(json_is_string(v) && !json_string_length(v)))
		rc = helper_take(v, path, "credsStore", helper, why, whylen);
out_decref:
	json_decref(root);
	return rc;
}

int ix_registry_helper_parse(const char *out, size_t len, char **user, char **pass, char *why, size_t whylen)
{
	json_t *root = json_loadb(out, len, 0, NULL), *u, *p;
	int rc = ST_EFORMAT;

	u = json_object_get(root, "Username");
	p = json_object_get(root, "Secret");
	if (!json_is_string(u) || !json_is_string(p)) {
		if (why && whylen)
			snprintf(why, whylen, "the helper's answer is not {\"Username\":...,\"Secret\":...}");
	} else if (strcmp(json_string_value(u), "<token>") == 0) {
		if (why && whylen)
			snprintf(why, whylen, "the helper gave an identity token (Username \"<token>\"), which strata "
					      "does not exchange: store a user and password or a registry token instead");
	} else {
		rc = creds_take(strdup(json_string_value(u)), strdup(json_string_value(p)), user, pass);
	}
	json_decref(root);
	return rc;
}
