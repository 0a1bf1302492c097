/* manifest_int.h: the manifest codec's pieces shared by manifest.c (the full form) and delta.c (the delta form). */
#ifndef STRATA_STORE_MANIFEST_INT_H
#define STRATA_STORE_MANIFEST_INT_H

#include <jansson.h>

#include "store/store.h"

/* What a value is, for messages ("an array"). Never fails. */
const char *st_mf_type_name(const json_t *j);
/* A non-negative integer <= max into *out; ST_EFORMAT with why naming what. */
int st_mf_get_uint(const json_t *j, const char *what, uint64_t max, uint64_t *out, char *why, size_t whylen);
/* A 32-hex id string into *out; ST_EFORMAT. */
int st_mf_get_id(const json_t *j, const char *what, st_id *out, char *why, size_t whylen);
/* One {"id","pages"} object, element i of a layers array; ST_EFORMAT. */
int st_mf_layer_obj(const json_t *o, size_t i, struct st_layer_ref *out, char *why, size_t whylen);
/* The labels object into m (sorted by key); ST_EFORMAT, ST_EBADNAME, -ENOMEM. */
int st_mf_parse_labels(const json_t *obj, struct st_manifest *m, char *why, size_t whylen);
/* A guest / vcpu object kept as its canonical text with its memo. */
int st_mf_parse_object(const json_t *j, const char *what, char **out, uint64_t *memo, char *why, size_t whylen);
/* `created` as manifest version `version` writes it. */
int st_mf_created_get(const json_t *v, uint32_t version, int64_t *out, char *why, size_t whylen);
/* The text under the size cap and the tree budget, loaded by jansson
 * (duplicates refused) into *out (json_decref). ST_EFORMAT, -ENOMEM. */
int st_mf_load(const char *json, size_t len, json_t **out, char *why, size_t whylen);

/* A bounded text buffer: cap is an upper bound of what is written. */
struct st_mf_out {
	char *p;
	size_t len, cap;
};
void st_mf_put(struct st_mf_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The canonical texts of m's nested values: guest, vcpu, labels (NULL when
 * absent), created as its JSON value (a number in version 1, a string
 * after), and extra, an upper bound of the bytes they and the fixed keys
 * take. m must be valid. Errors of the texts' checks, -ENOMEM. */
struct st_mf_texts {
	char *guest, *vcpu, *labels;
	char created[40];
	size_t extra;
};
int st_mf_texts_make(const struct st_manifest *m, struct st_mf_texts *t, char *why, size_t whylen);
void st_mf_texts_free(struct st_mf_texts *t);

#endif
