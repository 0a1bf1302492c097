/* oci.c: snapshots as OCI artifacts: the OCI manifest and index.json, encoded and parsed strictly. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/store_int.h"
#include "store/sys.h"

void st_oci_manifest_free(struct st_oci_manifest *om)
{
	if (!om)
		return;
	free(om->layers);
	free(om);
}

void st_oci_refs_free(struct st_oci_ref *refs, size_t n)
{
	for (size_t i = 0; refs && i < n; i++)
		free(refs[i].name);
	free(refs);
}

/* A descriptor object; id annotation when d->has_id. NULL on -ENOMEM. */
static json_t *desc_json(const char *media, const struct st_oci_desc *d)
{
	char dg[ST_DIGEST_LEN + 1], hex[ST_ID_HEX_LEN + 1];
	json_t *o = json_object();

	st_digest_format(d->sha256, dg);
	if (!o || json_object_set_new(o, "mediaType", json_string(media)) ||
	    json_object_set_new(o, "digest", json_string(dg)) ||
	    json_object_set_new(o, "size", json_integer((json_int_t)d->size)))
		goto out_free;
	if (d->has_id) {
		json_t *a = json_object();
		st_id_format(&d->id, hex);
		if (!a || json_object_set_new(a, ST_OCI_ANN_ID, json_string(hex)) ||
		    json_object_set_new(o, "annotations", a))
			goto out_free;
	}
	return o;
out_free:
	json_decref(o);
	return NULL;
}

static int dump(json_t *root, char **json, size_t *len)
{
	char *s = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);

	json_decref(root);
	if (!s)
		return -ENOMEM;
	*json = s;
	*len = strlen(s);
	return 0;
}

int st_oci_manifest_encode(const struct st_oci_manifest *om, char **json, size_t *len)
{
	json_t *root = json_object(), *layers = json_array(), *d;

	if (!root || !layers)
		goto out_nomem;
	if (json_object_set_new(root, "schemaVersion", json_integer(2)) ||
	    json_object_set_new(root, "mediaType", json_string(ST_OCI_MANIFEST_TYPE)) ||
	    json_object_set_new(root, "artifactType", json_string(ST_OCI_ARTIFACT_TYPE)) ||
	    !(d = desc_json(ST_OCI_CONFIG_TYPE, &om->config)) || json_object_set_new(root, "config", d))
		goto out_nomem;
	for (uint32_t i = 0; i < om->nlayers; i++)
		if (!(d = desc_json(ST_OCI_LAYER_TYPE, &om->layers[i])) || json_array_append_new(layers, d))
			goto out_nomem;
	for (uint32_t i = 0; i < om->nchunks; i++)
		if (!(d = desc_json(ST_OCI_CHUNKS_TYPE, &om->chunks[i])) || json_array_append_new(layers, d))
			goto out_nomem;
	if (json_object_set(root, "layers", layers))
		goto out_nomem;
	if (om->has_subject &&
	    (!(d = desc_json(ST_OCI_MANIFEST_TYPE, &om->subject)) || json_object_set_new(root, "subject", d)))
		goto out_nomem;
	if (om->created > 0 || (om->extra && om->extra[0])) {
		json_t *a = json_object();
		if (!a || json_object_set_new(root, "annotations", a))
			goto out_nomem;
		if (om->created > 0) {
			/* RFC 3339 in UTC, to the second (OCI image spec, annotations). */
			char when[32];
			struct tm tm;
			time_t t = (time_t)(om->created / 1000000000);
			if (!gmtime_r(&t, &tm) || !strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm) ||
			    json_object_set_new(a, ST_OCI_ANN_CREATED, json_string(when)))
				goto out_nomem;
		}
		for (const char *const *e = om->extra; e && *e; e++) {
			const char *eq = strchr(*e, '=');
			json_t *v;
			if (!eq || eq == *e) {
				json_decref(layers);
				json_decref(root);
				return -EINVAL;
			}
			if (!(v = json_string(eq + 1))) { /* not UTF-8 */
				json_decref(layers);
				json_decref(root);
				return -EINVAL;
			}
			char *key = st_sys_strndup(*e, (size_t)(eq - *e));
			if (!key || json_object_set_new(a, key, v)) {
				free(key);
				goto out_nomem;
			}
			free(key);
		}
	}
	json_decref(layers);
	return dump(root, json, len);
out_nomem:
	json_decref(layers);
	json_decref(root);
	return -ENOMEM;
}

/* Parse a descriptor at place `where`: mediaType must be media (if not
 * NULL), digest sha256, size a non-negative integer, and the id annotation
 * required if want_id. */
static int desc_parse(json_t *o, const char *media, bool want_id, const char *where, struct st_oci_desc *d,
		      char *why, size_t whylen)
{
	json_t *mt = json_object_get(o, "mediaType"), *dg = json_object_get(o, "digest"),
	       *sz = json_object_get(o, "size"), *ann = json_object_get(o, "annotations"), *id;

	if (!json_is_object(o))
		return st_why(why, whylen, ST_EFORMAT, "%s is not an object", where);
	if (!json_is_string(mt))
		return st_why(why, whylen, ST_EFORMAT, "%s has no mediaType", where);
	if (media && strcmp(json_string_value(mt), media) != 0)
		return st_why(why, whylen, ST_EFORMAT, "%s has media type '%.80s', not %s", where,
			      json_string_value(mt), media);
	if (!json_is_string(dg) || st_digest_parse(json_string_value(dg), d->sha256) < 0)
		return st_why(why, whylen, ST_EFORMAT, "%s: digest is not sha256:<64 lowercase hex>", where);
	if (!json_is_integer(sz) || json_integer_value(sz) < 0)
		return st_why(why, whylen, ST_EFORMAT, "%s: size is not a non-negative integer", where);
	d->size = (uint64_t)json_integer_value(sz);
	d->has_id = false;
	id = json_is_object(ann) ? json_object_get(ann, ST_OCI_ANN_ID) : NULL;
	if (id && (!json_is_string(id) || st_id_parse(json_string_value(id), &d->id) < 0))
		return st_why(why, whylen, ST_EFORMAT, "%s: annotation %s is not a 32-hex strata id", where, ST_OCI_ANN_ID);
	d->has_id = id != NULL;
	if (want_id && !d->has_id)
		return st_why(why, whylen, ST_EFORMAT, "%s has no %s annotation", where, ST_OCI_ANN_ID);
	return 0;
}

static json_t *load(const char *json, size_t len, const char *what, char *why, size_t whylen, int *rc)
{
	json_error_t e;
	json_t *root;

	if (len > ST_OCI_MANIFEST_MAX) {
		*rc = st_why(why, whylen, ST_EFORMAT, "%s is %zu bytes, over the %u limit", what, len, ST_OCI_MANIFEST_MAX);
		return NULL;
	}
	root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &e);
	if (!root) {
		*rc = st_why(why, whylen, ST_EFORMAT, "%s is not valid JSON at line %d column %d: %s", what, e.line,
			     e.column, e.text);
		return NULL;
	}
	if (!json_is_object(root)) {
		json_decref(root);
		*rc = st_why(why, whylen, ST_EFORMAT, "%s is not a JSON object", what);
		return NULL;
	}
	return root;
}

int st_oci_manifest_parse(const char *json, size_t len, struct st_oci_manifest **out, char *why, size_t whylen)
{
	struct st_oci_manifest *om = NULL;
	json_t *root, *v, *layers;
	int rc = 0;

	if (!(root = load(json, len, "the OCI manifest", why, whylen, &rc)))
		return rc;
	v = json_object_get(root, "schemaVersion");
	if (!json_is_integer(v) || json_integer_value(v) != 2) {
		rc = st_why(why, whylen, ST_EFORMAT, "the OCI manifest's schemaVersion is not 2");
		goto out_decref;
	}
	v = json_object_get(root, "mediaType");
	if (v && (!json_is_string(v) || strcmp(json_string_value(v), ST_OCI_MANIFEST_TYPE) != 0)) {
		rc = st_why(why, whylen, ST_EFORMAT, "media type '%.80s' is not an OCI image manifest",
			    json_is_string(v) ? json_string_value(v) : "?");
		goto out_decref;
	}
	v = json_object_get(root, "artifactType");
	if (!json_is_string(v) || strcmp(json_string_value(v), ST_OCI_ARTIFACT_TYPE) != 0) {
		rc = st_why(why, whylen, ST_EFORMAT, "artifact type '%.80s' is not a strata snapshot (%s)",
			    json_is_string(v) ? json_string_value(v) : "(none)", ST_OCI_ARTIFACT_TYPE);
		goto out_decref;
	}
	layers = json_object_get(root, "layers");
	if (!json_is_array(layers) || json_array_size(layers) > ST_MANIFEST_MAX_LAYERS) {
		rc = st_why(why, whylen, ST_EFORMAT, "the OCI manifest's layers are not an array of at most %u",
			    ST_MANIFEST_MAX_LAYERS);
		goto out_decref;
	}
	if (!(om = st_sys_calloc(1, sizeof(*om))) ||
	    (json_array_size(layers) &&
	     !(om->layers = st_sys_calloc(json_array_size(layers), sizeof(*om->layers))))) {
		rc = -ENOMEM;
		goto out_free;
	}
	if ((rc = desc_parse(json_object_get(root, "config"), ST_OCI_CONFIG_TYPE, true, "config", &om->config,
			     why, whylen)) < 0)
		goto out_free;
	if (om->config.size > ST_MANIFEST_MAX_BYTES) {
		rc = st_why(why, whylen, ST_EFORMAT, "config is %" PRIu64 " bytes, over the manifest limit",
			    om->config.size);
		goto out_free;
	}
	/* The layers, then (pushed since chunk indexes exist) one chunk index
	 * per layer, in the same order. */
	for (size_t i = 0; i < json_array_size(layers); i++) {
		json_t *o = json_array_get(layers, i), *mt = json_object_get(o, "mediaType");
		bool chunks = json_is_string(mt) && strcmp(json_string_value(mt), ST_OCI_CHUNKS_TYPE) == 0;
		char where[32];
		snprintf(where, sizeof(where), "layers[%zu]", i);
		if (chunks && !om->chunks)
			om->chunks = om->layers + i;
		if (!chunks && om->chunks) {
			rc = st_why(why, whylen, ST_EFORMAT, "%s: a layer after the chunk indexes", where);
			goto out_free;
		}
		if ((rc = desc_parse(o, chunks ? ST_OCI_CHUNKS_TYPE : ST_OCI_LAYER_TYPE, true, where, &om->layers[i],
				     why, whylen)) < 0)
			goto out_free;
		if (chunks)
			om->nchunks++;
		else
			om->nlayers++;
	}
	if (om->nchunks && om->nchunks != om->nlayers) {
		rc = st_why(why, whylen, ST_EFORMAT, "%" PRIu32 " chunk index(es) for %" PRIu32 " layer(s)", om->nchunks,
			    om->nlayers);
		goto out_free;
	}
	v = json_object_get(root, "subject");
	if (v) {
		if ((rc = desc_parse(v, ST_OCI_MANIFEST_TYPE, false, "subject", &om->subject, why, whylen)) < 0)
			goto out_free;
		om->has_subject = true;
	}
	json_decref(root);
	*out = om;
	return 0;
out_free:
	st_oci_manifest_free(om);
out_decref:
	json_decref(root);
	return rc;
}

int st_oci_manifest_check(const struct st_oci_manifest *om, const struct st_manifest *m, char *why, size_t whylen)
{
	char hex[ST_ID_HEX_LEN + 1];
	st_id id;
	int rc;

	if ((rc = st_manifest_id(m, &id, why, whylen)) < 0)
		return rc;
	if (!st_id_equal(&id, &om->config.id)) {
		st_id_format(&id, hex);
		return st_why(why, whylen, ST_EFORMAT, "the config is snapshot %s, its annotation says otherwise", hex);
	}
	if (om->nlayers != m->nlayers)
		return st_why(why, whylen, ST_EFORMAT,
			      "the OCI manifest carries %" PRIu32 " layer(s), the snapshot lists %" PRIu32,
			      om->nlayers, m->nlayers);
	for (uint32_t i = 0; i < m->nlayers; i++) {
		st_id_format(&m->layers[i].id, hex);
		if (!st_id_equal(&om->layers[i].id, &m->layers[i].id))
			return st_why(why, whylen, ST_EFORMAT, "the snapshot's layer %s is not carried (layers[%" PRIu32 "])",
				      hex, i);
		if (m->layers[i].pages > UINT64_MAX / ST_PAGE_SIZE ||
		    om->layers[i].size != m->layers[i].pages * ST_PAGE_SIZE)
			return st_why(why, whylen, ST_EFORMAT, "layer %s is %" PRIu64 " bytes, the snapshot says %" PRIu64,
				      hex, om->layers[i].size, m->layers[i].pages * ST_PAGE_SIZE);
	}
	return 0;
}

int st_oci_index_encode(const struct st_oci_ref *refs, size_t n, char **json, size_t *len)
{
	json_t *root = json_object(), *arr = json_array();
	struct st_oci_desc d = { 0 };

	if (!root || !arr || json_object_set_new(root, "schemaVersion", json_integer(2)) ||
	    json_object_set_new(root, "mediaType", json_string(ST_OCI_INDEX_TYPE)))
		goto out_nomem;
	for (size_t i = 0; i < n; i++) {
		json_t *o;
		memcpy(d.sha256, refs[i].sha256, ST_SHA256_LEN);
		d.size = refs[i].size;
		if (!(o = desc_json(ST_OCI_MANIFEST_TYPE, &d)) || json_array_append_new(arr, o) ||
		    json_object_set_new(o, "artifactType", json_string(ST_OCI_ARTIFACT_TYPE)))
			goto out_nomem;
		if (refs[i].name) {
			json_t *a = json_object();
			if (!a || json_object_set_new(a, ST_OCI_ANN_REF, json_string(refs[i].name)) ||
			    json_object_set_new(o, "annotations", a))
				goto out_nomem;
		}
	}
	if (json_object_set(root, "manifests", arr))
		goto out_nomem;
	json_decref(arr);
	return dump(root, json, len);
out_nomem:
	json_decref(arr);
	json_decref(root);
	return -ENOMEM;
}

int st_oci_index_parse(const char *json, size_t len, struct st_oci_ref **out, size_t *nout, char *why,
		       size_t whylen)
{
	struct st_oci_ref *refs = NULL;
	json_t *root, *arr, *v;
	size_t n = 0;
	int rc = 0;

	if (!(root = load(json, len, "index.json", why, whylen, &rc)))
		return rc;
	v = json_object_get(root, "schemaVersion");
	arr = json_object_get(root, "manifests");
	if (!json_is_integer(v) || json_integer_value(v) != 2 || !json_is_array(arr)) {
		rc = st_why(why, whylen, ST_EFORMAT, "index.json is not an OCI index (schemaVersion 2, manifests)");
		goto out_decref;
	}
	if (json_array_size(arr) && !(refs = st_sys_calloc(json_array_size(arr), sizeof(*refs)))) {
		rc = -ENOMEM;
		goto out_decref;
	}
	for (; n < json_array_size(arr); n++) {
		json_t *o = json_array_get(arr, n), *ann, *name, *at;
		struct st_oci_desc d;
		char where[64];

		snprintf(where, sizeof(where), "index.json manifests[%zu]", n);
		if ((rc = desc_parse(o, NULL, false, where, &d, why, whylen)) < 0)
			goto out_free;
		memcpy(refs[n].sha256, d.sha256, ST_SHA256_LEN);
		refs[n].size = d.size;
		at = json_object_get(o, "artifactType");
		refs[n].ours = !at || (json_is_string(at) && strcmp(json_string_value(at), ST_OCI_ARTIFACT_TYPE) == 0);
		if (strcmp(json_string_value(json_object_get(o, "mediaType")), ST_OCI_MANIFEST_TYPE) != 0)
			refs[n].ours = false;
		ann = json_object_get(o, "annotations");
		name = json_is_object(ann) ? json_object_get(ann, ST_OCI_ANN_REF) : NULL;
		if (name && json_is_string(name) && !(refs[n].name = st_sys_strdup(json_string_value(name)))) {
			rc = -ENOMEM;
			goto out_free;
		}
	}
	json_decref(root);
	*out = refs;
	*nout = n;
	return 0;
out_free:
	st_oci_refs_free(refs, n + 1);
out_decref:
	json_decref(root);
	return rc;
}
