/* registry_ws.c: a snapshot's working-set record through a registry: an OCI artifact whose subject is the snapshot's manifest, found by the referrers API or the tag schema. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "index/index_int.h"
#include "index/dist/dist.h"

#define EMPTY_TYPE "application/vnd.oci.empty.v1+json"
#define EMPTY_DIGEST "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
#define ANN_SNAPSHOT "dev.strata.snapshot"
/* The largest record st_ws_parse accepts. */
#define WS_MAX_BYTES (48ull + (uint64_t)ST_WS_MAX_LAYERS * 24 + (uint64_t)ST_WS_MAX_RUNS * 8)
/* A record, and the artifact manifest in the tag schema's index, up to this
 * size also travel inside the descriptor that names them (the descriptor's
 * `data`, OCI image-spec 1.1): a pull then asks for neither, two round
 * trips fewer before a lazy pull can fetch the working set. What is
 * embedded is checked against the descriptor's digest as fetched bytes are. */
#define WS_INLINE_MAX 16384u

/* len bytes as a base64 JSON string (standard alphabet, padded). */
static json_t *b64_json(const uint8_t *p, size_t len)
{
	static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char *out = st_sys_malloc((len + 2) / 3 * 4 + 1), *o = out;
	json_t *j;

	if (!out)
		return NULL;
	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < len ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < len ? p[i + 2] : 0);
		*o++ = abc[v >> 18 & 63];
		*o++ = abc[v >> 12 & 63];
		*o++ = i + 1 < len ? abc[v >> 6 & 63] : '=';
		*o++ = i + 2 < len ? abc[v & 63] : '=';
	}
	*o = '\0';
	j = json_string(out);
	free(out);
	return j;
}

/* The bytes a descriptor embeds (its `data`), if it has any: 1 with them
 * in *out (malloc'd), 0 without, ST_EFORMAT if they are not base64. */
static int embedded(json_t *desc, char **out, size_t *len)
{
	const char *s = json_string_value(json_object_get(desc, "data"));

	if (!s)
		return 0;
	if (strlen(s) > (WS_INLINE_MAX + 2) / 3 * 4 + 4)
		return ST_EFORMAT;
	int rc = st_base64_decode(s, out, len);
	return rc == 0 ? 1 : rc == -EINVAL ? ST_EFORMAT : rc;
}

static json_t *desc_json(const char *type, const uint8_t sha[ST_SHA256_LEN], uint64_t size)
{
	char dg[ST_DIGEST_LEN + 1];

	st_digest_format(sha, dg);
	return json_pack("{s:s, s:s, s:I}", "mediaType", type, "digest", dg, "size", (json_int_t)size);
}

/* The record's bytes from the store (at most WS_MAX_BYTES). */
static int record_read(struct ix *ix, const st_id *blob, uint64_t size, uint8_t **out)
{
	uint8_t *buf;
	size_t got = 0;
	int fd, rc = 0;

	if (size > WS_MAX_BYTES)
		return IX_ECORRUPT;
	if ((rc = st_blob_open(ix->s, blob, &fd)) < 0)
		return rc == -ENOENT ? IX_EMISSING : rc;
	if (!(buf = st_sys_malloc(size ? size : 1))) {
		(void)st_sys_close(fd);
		return -ENOMEM;
	}
	while (got < size) {
		ssize_t n = st_sys_pread(fd, buf + got, size - got, (off_t)got);
		if (n <= 0) {
			rc = n < 0 ? (int)n : IX_EMISSING;
			break;
		}
		got += (size_t)n;
	}
	(void)st_sys_close(fd);
	if (rc < 0) {
		free(buf);
		return rc;
	}
	*out = buf;
	return 0;
}

/* The tag schema's index for subject, with every entry of our artifact type
 * replaced by `mine`: the one record a snapshot has. */
static int tag_index_update(struct ix_registry *r, const uint8_t subject[ST_SHA256_LEN], json_t *mine, char *why,
			    size_t whylen)
{
	struct ix_oci_source src;
	char dg[ST_DIGEST_LEN + 1], tag[80], *json = NULL, *out = NULL;
	size_t len = 0;
	json_t *idx = NULL, *list, *keep;
	int rc;

	ix_registry_source(r, &src);
	st_digest_format(subject, dg);
	snprintf(tag, sizeof(tag), "sha256-%s", dg + 7);
	rc = src.manifest_get(src.ctx, tag, &json, &len, why, whylen);
	if (rc == 0) {
		json_error_t e;
		idx = json_loadb(json, len, 0, &e);
		free(json);
		if (!idx || !json_is_array(json_object_get(idx, "manifests"))) {
			json_decref(idx);
			idx = NULL; /* not an index: replaced by ours */
		}
	} else if (rc != IX_EREMOTE_MISSING) {
		return rc;
	}
	if (why && whylen)
		why[0] = '\0';
	if (!idx)
		idx = json_pack("{s:i, s:s, s:[]}", "schemaVersion", 2, "mediaType", ST_OCI_INDEX_TYPE, "manifests");
	if (!idx)
		return -ENOMEM;
	list = json_object_get(idx, "manifests");
	keep = json_array();
	size_t i;
	json_t *e;
	json_array_foreach(list, i, e) {
		const char *at = json_string_value(json_object_get(e, "artifactType"));
		if (!at || strcmp(at, ST_WS_MEDIA_TYPE) != 0)
			json_array_append(keep, e);
	}
	json_array_append(keep, mine);
	json_object_set_new(idx, "manifests", keep);
	if (!(out = json_dumps(idx, JSON_COMPACT | JSON_SORT_KEYS))) {
		json_decref(idx);
		return -ENOMEM;
	}
	rc = ix_registry_manifest_put_typed(r, tag, ST_OCI_INDEX_TYPE, out, strlen(out), NULL, why, whylen);
	free(out);
	json_decref(idx);
	return rc;
}

int ix_registry_ws_push(struct ix_registry *r, struct ix *ix, const st_id *snap, const uint8_t subject[ST_SHA256_LEN],
			uint64_t subject_size, struct ix_ws_xfer *x, char *why, size_t whylen)
{
	struct ix_oci_sink sink;
	struct ix_txn *t;
	struct st_oci_desc wd = { .has_id = true }, ed = { .size = 2 };
	uint8_t *rec = NULL;
	char hex[ST_ID_HEX_LEN + 1], shex[ST_ID_HEX_LEN + 1], *json = NULL;
	json_t *m = NULL, *mine = NULL;
	bool listed = false;
	int rc;

	memset(x, 0, sizeof(*x));
	if ((rc = ix_txn_begin(ix, &t)) < 0)
		return rc;
	rc = ix_ws_get(t, snap, &wd.id, &wd.size);
	ix_txn_end(t);
	if (rc == IX_ENOTFOUND)
		return 0;
	if (rc < 0 || (rc = record_read(ix, &wd.id, wd.size, &rec)) < 0)
		return rc;
	st_sha256_hash(rec, wd.size, wd.sha256);
	st_digest_parse(EMPTY_DIGEST, ed.sha256);
	ix_registry_sink(r, &sink);
	/* The empty config and the record, unless the registry has them. */
	const struct st_oci_desc *ds[2] = { &ed, &wd };
	const void *bufs[2] = { "{}", rec };
	for (int i = 0; i < 2; i++) {
		rc = sink.blob_has(sink.ctx, ds[i], why, whylen);
		if (rc == 0)
			rc = sink.blob_put(sink.ctx, ds[i], -1, bufs[i], why, whylen);
		if (rc < 0)
			goto out_free;
		if (rc == 0 && i == 1)
			x->bytes = wd.size;
	}
	st_id_format(&wd.id, hex);
	st_id_format(snap, shex);
	json_t *layer = desc_json(ST_WS_LAYER_TYPE, wd.sha256, wd.size);
	json_object_set_new(layer, "annotations", json_pack("{s:s}", ST_OCI_ANN_ID, hex));
	if (wd.size <= WS_INLINE_MAX)
		json_object_set_new(layer, "data", b64_json(rec, wd.size));
	m = json_pack("{s:i, s:s, s:s, s:o, s:[o], s:o, s:{s:s}}", "schemaVersion", 2, "mediaType", ST_OCI_MANIFEST_TYPE,
		      "artifactType", ST_WS_MEDIA_TYPE, "config", desc_json(EMPTY_TYPE, ed.sha256, 2), "layers", layer,
		      "subject", desc_json(ST_OCI_MANIFEST_TYPE, subject, subject_size), "annotations", ANN_SNAPSHOT, shex);
	if (!m || !(json = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS))) {
		rc = -ENOMEM;
		goto out_free;
	}
	size_t len = strlen(json);
	if ((rc = ix_registry_manifest_put_typed(r, NULL, ST_OCI_MANIFEST_TYPE, json, len, &listed, why, whylen)) < 0)
		goto out_free;
	st_sha256_hash(json, len, x->manifest);
	x->found = true;
	x->api = listed;
	/* Without OCI-Subject the registry lists no referrers: the tag schema. */
	if (!listed) {
		mine = desc_json(ST_OCI_MANIFEST_TYPE, x->manifest, len);
		json_object_set_new(mine, "artifactType", json_string(ST_WS_MEDIA_TYPE));
		if (len <= WS_INLINE_MAX)
			json_object_set_new(mine, "data", b64_json((const uint8_t *)json, len));
		rc = tag_index_update(r, subject, mine, why, whylen);
	}
out_free:
	json_decref(mine);
	json_decref(m);
	free(json);
	free(rec);
	return rc;
}

/* Collects a small blob in memory, refusing more than max. */
struct mem {
	uint8_t *buf;
	size_t len, max;
};

static int mem_fn(void *sctx, const void *buf, size_t len)
{
	struct mem *m = sctx;

	if (len > m->max - m->len)
		return ST_ECORRUPT;
	memcpy(m->buf + m->len, buf, len);
	m->len += len;
	return 0;
}

/* The last entry of our artifact type in an image index; *data (NULL if
 * none) the manifest it embeds, unchecked. */
static int pick(const char *json, size_t len, uint8_t sha[ST_SHA256_LEN], char **data, size_t *dlen, char *why,
		size_t whylen)
{
	json_error_t e;
	json_t *idx = json_loadb(json, len, 0, &e), *list, *it, *last = NULL;
	size_t i;
	int rc = IX_ENOTFOUND;

	*data = NULL;

	if (!idx || !json_is_array(list = json_object_get(idx, "manifests"))) {
		json_decref(idx);
		return st_why(why, whylen, ST_EFORMAT, "the referrers list is not an image index");
	}
	json_array_foreach(list, i, it) {
		const char *at = json_string_value(json_object_get(it, "artifactType"));
		const char *dg = json_string_value(json_object_get(it, "digest"));
		if (at && strcmp(at, ST_WS_MEDIA_TYPE) == 0) {
			rc = dg && st_digest_parse(dg, sha) == 0 ? 0
				: st_why(why, whylen, ST_EFORMAT, "the referrers list names a working set without a valid digest");
			last = it;
		}
	}
	int erc = rc == 0 ? embedded(last, data, dlen) : 0;
	if (erc == ST_EFORMAT)
		rc = st_why(why, whylen, erc, "the referrers list embeds a working-set manifest that is not base64");
	else if (erc < 0)
		rc = erc;
	json_decref(idx);
	return rc;
}

/* Parse the artifact manifest strictly: ours, about subject, one record. */
static int artifact_parse(const char *json, size_t len, const uint8_t subject[ST_SHA256_LEN], struct st_oci_desc *out,
			  char **data, size_t *dlen, char *why, size_t whylen)
{
	json_error_t e;
	json_t *m = json_loadb(json, len, 0, &e), *layers, *l, *sub;
	const char *s;
	uint8_t sha[ST_SHA256_LEN];
	int rc = ST_EFORMAT;

	if (!m || !json_is_object(m)) {
		st_why(why, whylen, rc, "the working-set manifest is not JSON: %s", e.text);
		goto out;
	}
	if (json_integer_value(json_object_get(m, "schemaVersion")) != 2 ||
	    !(s = json_string_value(json_object_get(m, "artifactType"))) || strcmp(s, ST_WS_MEDIA_TYPE) != 0) {
		st_why(why, whylen, rc, "the working-set manifest is not a strata working set (artifact type)");
		goto out;
	}
	sub = json_object_get(m, "subject");
	if (!(s = json_string_value(json_object_get(sub, "digest"))) || st_digest_parse(s, sha) < 0 ||
	    memcmp(sha, subject, ST_SHA256_LEN) != 0) {
		st_why(why, whylen, rc, "the working-set manifest is about another snapshot (subject)");
		goto out;
	}
	layers = json_object_get(m, "layers");
	if (!json_is_array(layers) || json_array_size(layers) != 1) {
		st_why(why, whylen, rc, "the working-set manifest must carry exactly one record");
		goto out;
	}
	l = json_array_get(layers, 0);
	json_t *size = json_object_get(l, "size");
	if (!(s = json_string_value(json_object_get(l, "mediaType"))) || strcmp(s, ST_WS_LAYER_TYPE) != 0 ||
	    !(s = json_string_value(json_object_get(l, "digest"))) || st_digest_parse(s, out->sha256) < 0 ||
	    !json_is_integer(size) || json_integer_value(size) < 0 ||
	    (uint64_t)json_integer_value(size) > WS_MAX_BYTES) {
		st_why(why, whylen, rc, "the working-set record's descriptor is malformed or too large");
		goto out;
	}
	out->size = (uint64_t)json_integer_value(size);
	s = json_string_value(json_object_get(json_object_get(l, "annotations"), ST_OCI_ANN_ID));
	out->has_id = s && st_id_parse(s, &out->id) == 0;
	/* The record it embeds, if any: checked by the caller as if fetched. */
	if ((rc = embedded(l, data, dlen)) == ST_EFORMAT)
		st_why(why, whylen, rc, "the working-set record embedded in its manifest is not base64");
	else if (rc > 0)
		rc = 0;
out:
	json_decref(m);
	return rc;
}

int ix_registry_pull_ahead(struct ix_registry *r, const char *json, size_t len, const uint8_t sha[ST_SHA256_LEN],
			   bool lazy)
{
	struct ix_registry_ahead_req v[16];
	struct st_oci_manifest *om = NULL;
	char dg[ST_DIGEST_LEN + 1], inner[ST_WHY_LEN];
	size_t n = 0;
	int rc;

	if (st_oci_manifest_parse(json, len, &om, inner, sizeof(inner)) < 0)
		return 0; /* the pull itself says what is wrong */
	st_digest_format(om->config.sha256, dg);
	v[n++] = (struct ix_registry_ahead_req){ .max = (size_t)om->config.size };
	snprintf(v[0].path, sizeof(v[0].path), "blobs/%s", dg);
	for (uint32_t i = 0; lazy && i < om->nchunks && n < 14; i++) {
		st_digest_format(om->chunks[i].sha256, dg);
		v[n] = (struct ix_registry_ahead_req){ .max = (size_t)om->chunks[i].size };
		snprintf(v[n++].path, sizeof(v[0].path), "blobs/%s", dg);
	}
	st_digest_format(sha, dg);
	v[n] = (struct ix_registry_ahead_req){ .accept = ST_OCI_INDEX_TYPE, .max = ST_OCI_MANIFEST_MAX };
	snprintf(v[n++].path, sizeof(v[0].path), "referrers/%s?artifactType=%s", dg, ST_WS_MEDIA_TYPE);
	v[n] = (struct ix_registry_ahead_req){ .accept = IX_REGISTRY_MANIFEST_ACCEPT, .max = ST_OCI_MANIFEST_MAX };
	snprintf(v[n++].path, sizeof(v[0].path), "manifests/sha256-%s", dg + 7);
	st_oci_manifest_free(om);
	rc = ix_registry_ahead(r, v, n);
	return rc;
}

int ix_registry_ws_pull(struct ix_registry *r, struct ix *ix, const st_id *snap, const uint8_t subject[ST_SHA256_LEN],
			struct ix_ws_xfer *x, char *why, size_t whylen)
{
	struct ix_oci_source src;
	struct st_oci_desc d = { 0 };
	char dg[ST_DIGEST_LEN + 1], ref[80], *json = NULL;
	size_t len = 0;
	struct mem mb = { 0 };
	int rc;

	memset(x, 0, sizeof(*x));
	ix_registry_source(r, &src);
	rc = ix_registry_referrers_get(r, subject, ST_WS_MEDIA_TYPE, &json, &len, why, whylen);
	x->api = rc == 0;
	if (rc == IX_EREMOTE_MISSING) {
		st_digest_format(subject, dg);
		snprintf(ref, sizeof(ref), "sha256-%s", dg + 7);
		rc = src.manifest_get(src.ctx, ref, &json, &len, why, whylen);
		if (rc == IX_EREMOTE_MISSING) {
			if (why && whylen)
				why[0] = '\0';
			return 0; /* no referrers at all */
		}
	}
	if (rc < 0)
		return rc;
	char *data = NULL;
	size_t dlen = 0;
	rc = pick(json, len, x->manifest, &data, &dlen, why, whylen);
	free(json);
	json = NULL;
	if (rc == IX_ENOTFOUND) {
		if (why && whylen)
			why[0] = '\0';
		return 0;
	}
	if (rc < 0)
		return rc;
	st_digest_format(x->manifest, dg);
	/* Embedded in the list, or fetched: the same digest check either way. */
	if (data) {
		json = data;
		len = dlen;
	} else if ((rc = src.manifest_get(src.ctx, dg, &json, &len, why, whylen)) < 0) {
		return rc;
	}
	uint8_t sha[ST_SHA256_LEN];
	st_sha256_hash(json, len, sha);
	if (memcmp(sha, x->manifest, ST_SHA256_LEN) != 0) {
		rc = st_why(why, whylen, ST_ECORRUPT, "working-set manifest %s: its bytes do not match the digest", dg);
		goto out_free;
	}
	data = NULL; /* json owns what the list embedded */
	if ((rc = artifact_parse(json, len, subject, &d, &data, &dlen, why, whylen)) < 0)
		goto out_free;
	if (data) {
		/* Embedded: checked below against the descriptor's size and sha256. */
		mb.buf = (uint8_t *)data;
		mb.len = dlen;
		rc = 0;
	} else {
		mb.max = d.size;
		if (!(mb.buf = st_sys_malloc(d.size ? d.size : 1))) {
			rc = -ENOMEM;
			goto out_free;
		}
		rc = src.blob_get(src.ctx, &d, 0, mem_fn, &mb, why, whylen);
	}
	if (rc == ST_ECORRUPT || (rc == 0 && mb.len != d.size)) {
		rc = st_why(why, whylen, ST_ECORRUPT, "the working-set record is not %" PRIu64 " bytes as its descriptor says",
			    d.size);
		goto out_free;
	}
	if (rc < 0)
		goto out_free;
	st_sha256_hash(mb.buf, mb.len, sha);
	if (memcmp(sha, d.sha256, ST_SHA256_LEN) != 0) {
		rc = st_why(why, whylen, ST_ECORRUPT, "the working-set record's bytes do not match their sha256 digest");
		goto out_free;
	}
	st_id blob;
	char inner[ST_WHY_LEN] = "";
	st_id_hash(mb.buf, mb.len, &blob);
	if (d.has_id && !st_id_equal(&blob, &d.id)) {
		rc = st_why(why, whylen, ST_ECORRUPT, "the working-set record does not hash to its annotated id");
		goto out_free;
	}
	if ((rc = ix_ws_put(ix, snap, mb.buf, mb.len, NULL, inner, sizeof(inner))) < 0) {
		rc = st_why(why, whylen, rc, "the working-set record is refused: %s", inner[0] ? inner : ix_strerror(rc));
		goto out_free;
	}
	x->found = true;
	x->bytes = mb.len;
out_free:
	free(mb.buf);
	free(json);
	return rc;
}
