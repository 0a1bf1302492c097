/* test_manifest_encode.c: the canonical encoder agrees byte for byte with jansson's own, and its memo is safe. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "helpers.h"

/* The manifest as one jansson object, every nested text re-parsed: the
 * encoding strata's ids were first defined by. */
char *th_reference_encode(const struct st_manifest *m)
{
	json_t *root = json_object(), *layers = json_array(), *ranges = json_array();
	char hex[ST_ID_HEX_LEN + 1];

	cr_assert(root && layers && ranges);
	for (uint32_t i = 0; i < m->nlayers; i++) {
		st_id_format(&m->layers[i].id, hex);
		json_array_append_new(layers, json_pack("{s:s,s:I}", "id", hex, "pages", (json_int_t)m->layers[i].pages));
	}
	for (uint64_t i = 0; i < m->nranges; i++) {
		const struct st_range *r = &m->ranges[i];
		json_array_append_new(ranges, json_pack("[I,I,I,I]", (json_int_t)r->gpage, (json_int_t)r->npages,
							(json_int_t)r->layer, (json_int_t)r->lpage));
	}
	json_object_set_new(root, "layers", layers);
	json_object_set_new(root, "ranges", ranges);
	json_object_set_new(root, "version", json_integer(m->version));
	json_object_set_new(root, "mem_size", json_integer((json_int_t)m->mem_size));
	if (m->version == 1) {
		json_object_set_new(root, "created", json_integer(m->created));
	} else {
		/* version 2: an RFC 3339 UTC string with nine fractional digits */
		char buf[64];
		time_t secs = (time_t)(m->created / 1000000000ll);
		struct tm tm;
		gmtime_r(&secs, &tm);
		size_t n = strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
		snprintf(buf + n, sizeof(buf) - n, ".%09lldZ", (long long)(m->created % 1000000000ll));
		json_object_set_new(root, "created", json_string(buf));
	}
	json_object_set_new(root, "abi_version", json_integer(m->abi_version));
	if (m->has_parent) {
		st_id_format(&m->parent, hex);
		json_object_set_new(root, "parent", json_string(hex));
	}
	if (m->nlabels) {
		json_t *l = json_object();
		for (size_t i = 0; i < m->nlabels; i++)
			json_object_set_new(l, m->labels[i].key, json_string(m->labels[i].value));
		json_object_set_new(root, "labels", l);
	}
	if (m->guest)
		json_object_set_new(root, "guest", json_loads(m->guest, 0, NULL));
	if (m->vcpu)
		json_object_set_new(root, "vcpu", json_loads(m->vcpu, 0, NULL));
	char *text = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(root);
	cr_assert_not_null(text);
	return text;
}

static void expect_same_encoding(const struct st_manifest *m, const char *what)
{
	char why[ST_WHY_LEN] = "", *text;
	size_t len;

	cr_assert_eq(st_manifest_encode(m, &text, &len, why, sizeof(why)), 0, "%s: %s", what, why);
	char *ref = th_reference_encode(m);
	cr_assert_eq(len, strlen(text), "%s: length", what);
	cr_assert_str_eq(text, ref, "%s", what);
	free(ref);
	free(text);
}

static struct st_manifest *parse_ok(const char *json)
{
	struct st_manifest *m = NULL;
	char why[ST_WHY_LEN] = "";

	cr_assert_eq(st_manifest_parse(json, strlen(json), &m, why, sizeof(why)), 0, "%s", why);
	return m;
}

#define A "00112233445566778899aabbccddeeff"

Test(manifest_encode, agrees_with_jansson_on_every_optional_part)
{
	struct st_manifest *m = parse_ok("{\"version\":1,\"mem_size\":8192,\"layers\":[],\"ranges\":[],\"created\":0,"
					 "\"abi_version\":0}");
	expect_same_encoding(m, "no layers, no optional keys");
	st_manifest_free(m);

	/* Labels with every kind of character jansson escapes or passes through. */
	m = parse_ok("{\"version\":1,\"mem_size\":65536,\"created\":9223372036854775807,\"abi_version\":4294967295,"
		     "\"layers\":[{\"pages\":16,\"id\":\"" A "\"}],\"ranges\":[[0,16,0,0]],\"parent\":\"" A "\","
		     "\"labels\":{\"z\":\"tab\\tquote\\\"slash/back\\\\\",\"a\":\"\\u00e9\\u0001\\u001f\\u2028 \\ud83d\\ude00\"},"
		     "\"guest\":{\"z\":[1,{\"y\":null,\"x\":true}],\"a\":\"\\u0002\"},\"vcpu\":{\"rip\":1.5e3,\"b\":[]}}");
	expect_same_encoding(m, "labels, parent, nested objects, extreme integers");
	st_manifest_free(m);
}

Test(manifest_encode, a_text_set_in_memory_is_checked_and_canonicalised)
{
	struct st_manifest *m = parse_ok("{\"version\":1,\"mem_size\":8192,\"layers\":[{\"id\":\"" A "\",\"pages\":1}],"
					 "\"ranges\":[[1,1,0,0]],\"created\":5,\"abi_version\":1,\"vcpu\":{\"a\":1}}");
	char why[ST_WHY_LEN] = "";

	/* Replaced after parsing: the memo no longer matches, so it is checked. */
	free(m->vcpu);
	m->vcpu = strdup("{\"a\":");
	cr_assert_eq(st_manifest_validate(m, why, sizeof(why)), ST_EFORMAT);
	free(m->vcpu);
	m->vcpu = strdup("[1,2]");
	cr_assert_eq(st_manifest_validate(m, why, sizeof(why)), ST_EFORMAT);
	/* Valid but not canonical: encoded in canonical form, as before. */
	free(m->vcpu);
	m->vcpu = strdup("{ \"b\" : 2 ,\n \"a\" : [ 1 , 2 ] }");
	m->guest = strdup("{\"k\":{\"y\":1,\"x\":2}}");
	expect_same_encoding(m, "non-canonical texts");
	st_id before, after;
	cr_assert_eq(st_manifest_id(m, &before, NULL, 0), 0);
	/* The same id once the texts are canonical and known to be. */
	char *text;
	size_t len;
	cr_assert_eq(st_manifest_encode(m, &text, &len, why, sizeof(why)), 0);
	struct st_manifest *m2 = parse_ok(text);
	cr_assert_eq(st_manifest_id(m2, &after, NULL, 0), 0);
	cr_assert(st_id_equal(&before, &after));
	cr_assert_str_eq(m2->vcpu, "{\"a\":[1,2],\"b\":2}");
	free(text);
	st_manifest_free(m2);
	st_manifest_free(m);
}

Test(manifest_encode, many_ranges_and_layers_fit)
{
	struct st_manifest *m;
	char *text, why[ST_WHY_LEN] = "";
	size_t len;

	cr_assert_eq(st_manifest_new(&m), 0);
	m->mem_size = 4ull << 30;
	m->nlayers = 300;
	m->layers = calloc(m->nlayers, sizeof(*m->layers));
	m->nranges = 30000;
	m->ranges = calloc(m->nranges, sizeof(*m->ranges));
	for (uint32_t i = 0; i < m->nlayers; i++) {
		st_id_hash(&i, sizeof(i), &m->layers[i].id);
		m->layers[i].pages = 1000000;
	}
	for (uint64_t i = 0; i < m->nranges; i++)
		m->ranges[i] = (struct st_range){ .gpage = i * 2 + 1, .npages = 1, .layer = (uint32_t)(i % 300),
						  .lpage = 999999 - i / 300 };
	cr_assert_eq(st_manifest_encode(m, &text, &len, why, sizeof(why)), 0, "%s", why);
	char *ref = th_reference_encode(m);
	cr_assert_eq(strcmp(text, ref), 0);
	free(ref);
	free(text);
	st_manifest_free(m);
}

Test(manifest_encode, sealing_puts_texts_in_canonical_form)
{
	struct st_manifest *m = parse_ok("{\"version\":1,\"mem_size\":8192,\"layers\":[{\"id\":\"" A "\",\"pages\":1}],"
					 "\"ranges\":[[1,1,0,0]],\"created\":5,\"abi_version\":1}");
	char why[ST_WHY_LEN] = "";
	st_id before, after;

	m->vcpu = strdup("{ \"rip\" : 16, \"cr3\" : 4096 }");
	cr_assert_eq(st_manifest_id(m, &before, NULL, 0), 0);
	cr_assert_eq(st_manifest_seal(m, why, sizeof(why)), 0, "%s", why);
	cr_assert_str_eq(m->vcpu, "{\"cr3\":4096,\"rip\":16}");
	cr_assert_neq(m->vcpu_canon, 0);
	cr_assert_eq(st_manifest_id(m, &after, NULL, 0), 0);
	cr_assert(st_id_equal(&before, &after), "sealing does not change the id");
	expect_same_encoding(m, "sealed");
	free(m->guest);
	m->guest = strdup("{\"a\":1,\"a\":2}");
	cr_assert_eq(st_manifest_seal(m, why, sizeof(why)), ST_EFORMAT, "duplicate keys are refused");
	st_manifest_free(m);
}

Test(manifest_encode, an_object_set_from_jansson_is_canonical_and_remembered)
{
	struct st_manifest *m = parse_ok("{\"version\":1,\"mem_size\":8192,\"layers\":[{\"id\":\"" A "\",\"pages\":1}],"
					 "\"ranges\":[[1,1,0,0]],\"created\":5,\"abi_version\":1}");
	json_t *o = json_pack("{s:i,s:[i,i],s:s}", "z", 1, "a", 2, 3, "m", "x\"y");
	char why[ST_WHY_LEN] = "";

	cr_assert_eq(st_manifest_set_object(m, "vcpu", o), 0);
	cr_assert_str_eq(m->vcpu, "{\"a\":[2,3],\"m\":\"x\\\"y\",\"z\":1}");
	cr_assert_neq(m->vcpu_canon, 0);
	cr_assert_eq(st_manifest_set_object(m, "guest", o), 0);
	cr_assert_str_eq(m->guest, m->vcpu);
	expect_same_encoding(m, "objects set from jansson");
	cr_assert_eq(st_manifest_seal(m, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(st_manifest_set_object(m, "labels", o), -EINVAL);
	json_t *arr = json_array();
	cr_assert_eq(st_manifest_set_object(m, "vcpu", arr), ST_EFORMAT);
	json_decref(arr);
	json_decref(o);
	st_manifest_free(m);
}
