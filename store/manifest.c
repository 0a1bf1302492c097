/* manifest.c: the snapshot manifest: strict JSON parsing, validation, canonical encoding and id. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <stdint.h>

#include "store/store_int.h"
#include "store/manifest_int.h"
#include "store/sys.h"

#define MAX_PAGES (ST_MANIFEST_MAX_MEM / ST_PAGE_SIZE)
/* "2026-12-01T12:00:00.123456789Z": `created` from version 2 on. */
#define CREATED_LEN 30

/*
 * Version 1 wrote `created` as an integer of nanoseconds, above 2^53: jq 1.6
 * and every JavaScript parser round it, so a manifest passed through them
 * named another snapshot. Version 2 writes an RFC 3339 UTC string with all
 * nine fractional digits, which every JSON tool keeps as it is. Re-encoding
 * keeps a manifest's version, so a version 1 snapshot keeps its id.
 */
/*
 * Days since 1970-01-01 of a proleptic Gregorian date (month 1-12, day
 * 1-31), and back (Howard Hinnant's days_from_civil and civil_from_days):
 * arithmetic, where glibc's timegm and gmtime_r load the local time zone
 * (/etc/localtime) on their first call in a process, some 40 us of every
 * command that reads a manifest.
 */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	unsigned yoe = (unsigned)(y - era * 400);
	unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;

	return era * 146097 + (int64_t)doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
	z += 719468;
	int64_t era = (z >= 0 ? z : z - 146096) / 146097;
	unsigned doe = (unsigned)(z - era * 146097);
	unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	unsigned mp = (5 * doy + 2) / 153;

	*d = doy - (153 * mp + 2) / 5 + 1;
	*m = mp < 10 ? mp + 3 : mp - 9;
	*y = (int64_t)yoe + era * 400 + (*m <= 2);
}

static int created_format(int64_t ns, char out[CREATED_LEN + 1])
{
	int64_t secs = ns / 1000000000ll, y;
	unsigned mon, day, sod = (unsigned)(secs % 86400);

	if (ns < 0)
		return -EINVAL;
	civil_from_days(secs / 86400, &y, &mon, &day);
	if (y > 9999)
		return -EINVAL;
	char tmp[80];
	int n = snprintf(tmp, sizeof(tmp), "%04d-%02u-%02uT%02u:%02u:%02u.%09lldZ", (int)y, mon, day, sod / 3600,
			 sod / 60 % 60, sod % 60, (long long)(ns % 1000000000ll));
	if (n != CREATED_LEN)
		return -EINVAL;
	memcpy(out, tmp, CREATED_LEN + 1);
	return 0;
}

/* Parse exactly the form created_format writes (one text per instant). */
static int created_parse(const char *s, size_t len, int64_t *out)
{
	char again[CREATED_LEN + 1];
	struct tm tm = { 0 };
	long long frac;
	int n = 0;

	if (len != CREATED_LEN || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d.%9lldZ%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
					 &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &frac, &n) != 7 || n != CREATED_LEN)
		return -EINVAL;
	/* A field past its range is refused here; a day past its month's end
	 * (Feb 30) gives another instant, which the canonical check refuses. */
	if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour < 0 || tm.tm_hour > 23 ||
	    tm.tm_min < 0 || tm.tm_min > 59 || tm.tm_sec < 0 || tm.tm_sec > 59)
		return -EINVAL;
	int64_t secs = days_from_civil(tm.tm_year, (unsigned)tm.tm_mon, (unsigned)tm.tm_mday) * 86400 +
		       tm.tm_hour * 3600 + tm.tm_min * 60 + tm.tm_sec;
	int64_t ns;
	/* Nanoseconds since 1970 fit in 64 bits until 2262-04-11T23:47:16.854775807Z:
	 * a later time (the four digits allow 9999) is refused, not overflowed. */
	if (secs < 0 || frac < 0 || __builtin_mul_overflow((int64_t)secs, 1000000000ll, &ns) ||
	    __builtin_add_overflow(ns, (int64_t)frac, &ns))
		return -EINVAL;
	if (created_format(ns, again) < 0 || memcmp(again, s, CREATED_LEN) != 0)
		return -EINVAL; /* out of range fields (Feb 30, 25:00), or not canonical */
	*out = ns;
	return 0;
}

int st_manifest_new(struct st_manifest **out)
{
	struct st_manifest *m = st_sys_calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	m->version = ST_MANIFEST_VERSION;
	*out = m;
	return 0;
}

void st_manifest_free(struct st_manifest *m)
{
	if (!m)
		return;
	free(m->layers);
	free(m->ranges);
	free(m->guest);
	free(m->vcpu);
	for (size_t i = 0; i < m->nlabels; i++) {
		free(m->labels[i].key);
		free(m->labels[i].value);
	}
	free(m->labels);
	free(m);
}

/* Copy n elements of size sz (NULL for n == 0). */
static int dup_array(const void *src, size_t n, size_t sz, void **out)
{
	void *p;

	*out = NULL;
	if (n == 0)
		return 0;
	if (n > SIZE_MAX / sz || !(p = st_sys_malloc(n * sz)))
		return -ENOMEM;
	memcpy(p, src, n * sz);
	*out = p;
	return 0;
}

static int dup_str(const char *src, char **out)
{
	*out = NULL;
	if (src && !(*out = st_sys_strdup(src)))
		return -ENOMEM;
	return 0;
}

int st_manifest_dup(const struct st_manifest *m, struct st_manifest **out)
{
	struct st_manifest *c = st_sys_calloc(1, sizeof(*c));
	int rc;

	if (!c)
		return -ENOMEM;
	*c = *m;
	c->layers = NULL;
	c->ranges = NULL;
	c->guest = c->vcpu = NULL;
	c->labels = NULL;
	c->nlabels = 0;
	if ((rc = dup_array(m->layers, m->nlayers, sizeof(*m->layers), (void **)&c->layers)) < 0 ||
	    (rc = dup_array(m->ranges, m->nranges, sizeof(*m->ranges), (void **)&c->ranges)) < 0 ||
	    (rc = dup_str(m->guest, &c->guest)) < 0 || (rc = dup_str(m->vcpu, &c->vcpu)) < 0)
		goto out_free;
	if (m->nlabels) {
		c->labels = st_sys_calloc(m->nlabels, sizeof(*c->labels));
		if (!c->labels) {
			rc = -ENOMEM;
			goto out_free;
		}
		for (size_t i = 0; i < m->nlabels; i++) {
			c->nlabels = i + 1;
			if ((rc = dup_str(m->labels[i].key, &c->labels[i].key)) < 0 ||
			    (rc = dup_str(m->labels[i].value, &c->labels[i].value)) < 0)
				goto out_free;
		}
	}
	*out = c;
	return 0;
out_free:
	st_manifest_free(c);
	return rc;
}

static int cmp_id_ptr(const void *a, const void *b)
{
	return st_id_cmp(a, b);
}

/* The memo of a text known canonical: never 0, so 0 can mean "unknown". */
static uint64_t canon_memo(const char *text, size_t len)
{
	uint64_t h = st_hash64(text, len);

	return h ? h : 1;
}

/*
 * A guest / vcpu text must be one JSON object of bounded size. With canon
 * set, also return its canonical text (compact, sorted keys: what the
 * snapshot id is computed over), malloc'd. A text whose memo matches is
 * known canonical already and is not parsed again.
 */
static int check_object_text(const char *what, const char *text, uint64_t memo, char **canon, char *why,
			     size_t whylen)
{
	json_error_t err;
	json_t *j;
	size_t len = strlen(text);

	if (len > ST_MANIFEST_MAX_OBJECT)
		return st_why(why, whylen, ST_EFORMAT, "%s: %zu bytes, more than the limit of %u", what, len,
			      ST_MANIFEST_MAX_OBJECT);
	if (memo && canon_memo(text, len) == memo) {
		if (canon && !(*canon = st_sys_strdup(text)))
			return -ENOMEM;
		return 0;
	}
	j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
	if (!j)
		return st_why(why, whylen, ST_EFORMAT, "%s: not valid JSON: %s", what, err.text);
	bool obj = json_is_object(j);
	if (obj && canon && !(*canon = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS))) {
		json_decref(j);
		return -ENOMEM;
	}
	json_decref(j);
	if (!obj)
		return st_why(why, whylen, ST_EFORMAT, "%s: must be a JSON object", what);
	return 0;
}

int st_manifest_validate(const struct st_manifest *m, char *why, size_t whylen)
{
	uint64_t mem_pages, end = 0;
	bool *used = NULL;
	st_id *ids = NULL;
	int rc = 0;

	if (m->version < ST_MANIFEST_VERSION_MIN || m->version > ST_MANIFEST_VERSION)
		return st_why(why, whylen, ST_EVERSION, "version %" PRIu32 " is not supported (this strata reads %u to %u)",
			      m->version, ST_MANIFEST_VERSION_MIN, ST_MANIFEST_VERSION);
	if (m->mem_size % ST_PAGE_SIZE)
		return st_why(why, whylen, ST_ELAYOUT, "mem_size %" PRIu64 " is not a multiple of %u", m->mem_size,
			      ST_PAGE_SIZE);
	if (m->mem_size > ST_MANIFEST_MAX_MEM)
		return st_why(why, whylen, ST_ELAYOUT,
			      "mem_size %" PRIu64 " is more than the limit of %llu (4 GiB, the most guest memory "
			      "strata's VMM addresses)",
			      m->mem_size, ST_MANIFEST_MAX_MEM);
	if (m->nlayers > ST_MANIFEST_MAX_LAYERS)
		return st_why(why, whylen, ST_EFORMAT, "%" PRIu32 " layers, more than the limit of %u", m->nlayers,
			      ST_MANIFEST_MAX_LAYERS);
	if (m->created < 0)
		return st_why(why, whylen, ST_EFORMAT, "created is negative");
	mem_pages = m->mem_size / ST_PAGE_SIZE;
	if (m->nranges > ST_MANIFEST_MAX_RANGES)
		return st_why(why, whylen, ST_EFORMAT, "%" PRIu64 " ranges, more than the limit of %u", m->nranges,
			      ST_MANIFEST_MAX_RANGES);
	if (m->nranges > mem_pages)
		return st_why(why, whylen, ST_ELAYOUT, "%" PRIu64 " ranges for %" PRIu64 " pages of memory",
			      m->nranges, mem_pages);
	if ((m->nlayers && !m->layers) || (m->nranges && !m->ranges) || (m->nlabels && !m->labels))
		return st_why(why, whylen, ST_EFORMAT, "counts set but arrays missing");
	if (m->nlayers) {
		used = st_sys_calloc(m->nlayers, sizeof(*used));
		ids = st_sys_malloc(m->nlayers * sizeof(*ids));
		if (!used || !ids) {
			rc = -ENOMEM;
			goto out_free;
		}
	}
	for (uint32_t i = 0; i < m->nlayers; i++) {
		if (m->layers[i].pages == 0 || m->layers[i].pages > MAX_PAGES) {
			rc = st_why(why, whylen, ST_ELAYOUT, "layers[%" PRIu32 "]: %" PRIu64 " pages (must be 1..%llu)", i,
				    m->layers[i].pages, MAX_PAGES);
			goto out_free;
		}
		/* A layer holds distinct pages of the memory of the snapshot that
		 * wrote it, and every snapshot naming it has that memory (a
		 * capture keeps its sandbox's size; an ingest smaller than its
		 * parent copies what it keeps of a larger layer): a layer larger
		 * than the memory is bytes no guest can see, a 72 KiB directory
		 * could make it a 2 GiB sparse file. */
		if (m->layers[i].pages > mem_pages) {
			rc = st_why(why, whylen, ST_ELAYOUT,
				    "layers[%" PRIu32 "]: %" PRIu64 " pages, more than the snapshot's memory "
				    "(mem_size %" PRIu64 ": %" PRIu64 " pages)",
				    i, m->layers[i].pages, m->mem_size, mem_pages);
			goto out_free;
		}
		ids[i] = m->layers[i].id;
	}
	if (m->nlayers > 1) {
		qsort(ids, m->nlayers, sizeof(*ids), cmp_id_ptr);
		for (uint32_t i = 1; i < m->nlayers; i++) {
			if (st_id_equal(&ids[i - 1], &ids[i])) {
				char hex[ST_ID_HEX_LEN + 1];
				st_id_format(&ids[i], hex);
				rc = st_why(why, whylen, ST_ELAYOUT, "layer %s is listed twice", hex);
				goto out_free;
			}
		}
	}
	for (uint64_t i = 0; i < m->nranges; i++) {
		const struct st_range *r = &m->ranges[i];

		if (r->npages == 0) {
			rc = st_why(why, whylen, ST_ELAYOUT, "ranges[%" PRIu64 "]: empty range", i);
			goto out_free;
		}
		if (r->gpage > mem_pages || r->npages > mem_pages - r->gpage) {
			rc = st_why(why, whylen, ST_ELAYOUT,
				    "ranges[%" PRIu64 "]: pages %" PRIu64 "+%" PRIu64 " are outside memory of %" PRIu64
				    " pages",
				    i, r->gpage, r->npages, mem_pages);
			goto out_free;
		}
		if (r->layer >= m->nlayers) {
			rc = st_why(why, whylen, ST_ELAYOUT, "ranges[%" PRIu64 "]: layer %" PRIu32 " does not exist (%" PRIu32 " layers)",
				    i, r->layer, m->nlayers);
			goto out_free;
		}
		uint64_t lp = m->layers[r->layer].pages;
		if (r->lpage > lp || r->npages > lp - r->lpage) {
			rc = st_why(why, whylen, ST_ELAYOUT,
				    "ranges[%" PRIu64 "]: layer %" PRIu32 " is too short (%" PRIu64
				    " pages, range needs pages %" PRIu64 "+%" PRIu64 ")",
				    i, r->layer, lp, r->lpage, r->npages);
			goto out_free;
		}
		if (i > 0 && r->gpage < end) {
			rc = st_why(why, whylen, ST_ELAYOUT,
				    "ranges[%" PRIu64 "]: starts at page %" PRIu64 ", before the end of ranges[%" PRIu64
				    "] (%" PRIu64 "): ranges must be sorted and disjoint",
				    i, r->gpage, i - 1, end);
			goto out_free;
		}
		if (i > 0 && r->gpage == end && r->layer == m->ranges[i - 1].layer &&
		    r->lpage == m->ranges[i - 1].lpage + m->ranges[i - 1].npages) {
			rc = st_why(why, whylen, ST_ELAYOUT,
				    "ranges[%" PRIu64 "]: continues ranges[%" PRIu64 "]; adjacent ranges must be merged", i,
				    i - 1);
			goto out_free;
		}
		end = r->gpage + r->npages;
		used[r->layer] = true;
	}
	for (uint32_t i = 0; i < m->nlayers; i++) {
		if (!used[i]) {
			rc = st_why(why, whylen, ST_ELAYOUT, "layers[%" PRIu32 "] is not used by any range", i);
			goto out_free;
		}
	}
	if (m->nlabels > ST_MANIFEST_MAX_LABELS) {
		rc = st_why(why, whylen, ST_EFORMAT, "%zu labels, more than the limit of %u", m->nlabels,
			    ST_MANIFEST_MAX_LABELS);
		goto out_free;
	}
	for (size_t i = 0; i < m->nlabels; i++) {
		const struct st_label *l = &m->labels[i];

		if (!l->key || !st_name_valid(l->key)) {
			rc = st_why(why, whylen, ST_EBADNAME, "label key '%.64s' is not a valid name", l->key ? l->key : "");
			goto out_free;
		}
		if (i > 0 && strcmp(m->labels[i - 1].key, l->key) >= 0) {
			rc = st_why(why, whylen, ST_EFORMAT, "labels must be sorted by key without duplicates ('%s')", l->key);
			goto out_free;
		}
		if (!l->value || strlen(l->value) > ST_MANIFEST_MAX_LABEL_VALUE) {
			rc = st_why(why, whylen, ST_EFORMAT, "label '%s': value missing or longer than %u bytes", l->key,
				    ST_MANIFEST_MAX_LABEL_VALUE);
			goto out_free;
		}
	}
	if (m->guest && (rc = check_object_text("guest", m->guest, m->guest_canon, NULL, why, whylen)) < 0)
		goto out_free;
	if (m->vcpu && (rc = check_object_text("vcpu", m->vcpu, m->vcpu_canon, NULL, why, whylen)) < 0)
		goto out_free;
out_free:
	free(used);
	free(ids);
	return rc;
}

/* Replace *text by its canonical form (if it is not already) and remember it. */
static int seal_object(const char *what, char **text, uint64_t *memo, char *why, size_t whylen)
{
	char *canon = NULL;
	int rc;

	if (!*text)
		return 0;
	if ((rc = check_object_text(what, *text, *memo, &canon, why, whylen)) < 0)
		return rc;
	free(*text);
	*text = canon;
	*memo = canon_memo(canon, strlen(canon));
	return 0;
}

int st_manifest_set_object(struct st_manifest *m, const char *key, const json_t *obj)
{
	bool guest = strcmp(key, "guest") == 0;
	char *text;

	if (!guest && strcmp(key, "vcpu") != 0)
		return -EINVAL;
	if (!json_is_object(obj))
		return ST_EFORMAT;
	if (!(text = json_dumps(obj, JSON_COMPACT | JSON_SORT_KEYS)))
		return -ENOMEM;
	size_t len = strlen(text);
	if (len > ST_MANIFEST_MAX_OBJECT) {
		free(text);
		return ST_EFORMAT;
	}
	char **slot = guest ? &m->guest : &m->vcpu;
	free(*slot);
	*slot = text;
	*(guest ? &m->guest_canon : &m->vcpu_canon) = canon_memo(text, len);
	return 0;
}

int st_manifest_seal(struct st_manifest *m, char *why, size_t whylen)
{
	int rc;

	if ((rc = seal_object("guest", &m->guest, &m->guest_canon, why, whylen)) < 0 ||
	    (rc = seal_object("vcpu", &m->vcpu, &m->vcpu_canon, why, whylen)) < 0)
		return rc;
	return st_manifest_validate(m, why, whylen);
}

/* ---- parsing */

const char *st_mf_type_name(const json_t *j)
{
	switch (json_typeof(j)) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return "an array";
	case JSON_STRING: return "a string";
	case JSON_INTEGER: return "an integer";
	case JSON_REAL: return "a real number";
	case JSON_TRUE:
	case JSON_FALSE: return "a boolean";
	default: return "null";
	}
}

/* A non-negative integer <= max. */
int st_mf_get_uint(const json_t *j, const char *what, uint64_t max, uint64_t *out, char *why, size_t whylen)
{
	json_int_t v;

	if (!json_is_integer(j))
		return st_why(why, whylen, ST_EFORMAT, "%s: expected a non-negative integer, got %s", what, st_mf_type_name(j));
	v = json_integer_value(j);
	if (v < 0)
		return st_why(why, whylen, ST_EFORMAT, "%s: negative value %lld", what, (long long)v);
	if ((uint64_t)v > max)
		return st_why(why, whylen, ST_EFORMAT, "%s: %lld is larger than %" PRIu64, what, (long long)v, max);
	*out = (uint64_t)v;
	return 0;
}

int st_mf_get_id(const json_t *j, const char *what, st_id *out, char *why, size_t whylen)
{
	if (!json_is_string(j))
		return st_why(why, whylen, ST_EFORMAT, "%s: expected an id string, got %s", what, st_mf_type_name(j));
	if (st_id_parse_n(json_string_value(j), json_string_length(j), out) < 0)
		return st_why(why, whylen, ST_EFORMAT, "%s: '%.40s' is not a 32-char lowercase hex id", what,
			      json_string_value(j));
	return 0;
}

int st_mf_layer_obj(const json_t *o, size_t i, struct st_layer_ref *out, char *why, size_t whylen)
{
	char what[64];
	const json_t *v;
	const char *key;
	int rc;

	snprintf(what, sizeof(what), "layers[%zu]", i);
	if (!json_is_object(o))
		return st_why(why, whylen, ST_EFORMAT, "%s: expected an object, got %s", what, st_mf_type_name(o));
	json_object_foreach((json_t *)o, key, v) {
		if (strcmp(key, "id") && strcmp(key, "pages"))
			return st_why(why, whylen, ST_EFORMAT, "%s: unknown key '%.64s'", what, key);
	}
	if (!(v = json_object_get(o, "id")))
		return st_why(why, whylen, ST_EFORMAT, "%s: missing 'id'", what);
	snprintf(what, sizeof(what), "layers[%zu].id", i);
	if ((rc = st_mf_get_id(v, what, &out->id, why, whylen)) < 0)
		return rc;
	snprintf(what, sizeof(what), "layers[%zu].pages", i);
	if (!(v = json_object_get(o, "pages")))
		return st_why(why, whylen, ST_EFORMAT, "%s: missing", what);
	return st_mf_get_uint(v, what, INT64_MAX, &out->pages, why, whylen);
}

static int parse_layers(const json_t *arr, struct st_manifest *m, char *why, size_t whylen)
{
	size_t n;
	int rc;

	if (!json_is_array(arr))
		return st_why(why, whylen, ST_EFORMAT, "layers: expected an array, got %s", st_mf_type_name(arr));
	n = json_array_size(arr);
	if (n > ST_MANIFEST_MAX_LAYERS)
		return st_why(why, whylen, ST_EFORMAT, "layers: %zu entries, more than the limit of %u", n,
			      ST_MANIFEST_MAX_LAYERS);
	if (n && !(m->layers = st_sys_calloc(n, sizeof(*m->layers))))
		return -ENOMEM;
	m->nlayers = (uint32_t)n;
	for (size_t i = 0; i < n; i++)
		if ((rc = st_mf_layer_obj(json_array_get(arr, i), i, &m->layers[i], why, whylen)) < 0)
			return rc;
	return 0;
}

static int parse_ranges(const json_t *arr, struct st_manifest *m, char *why, size_t whylen)
{
	static const char *const field[4] = { "guest page", "page count", "layer", "layer page" };
	char what[80];
	size_t n;
	int rc;

	if (!json_is_array(arr))
		return st_why(why, whylen, ST_EFORMAT, "ranges: expected an array, got %s", st_mf_type_name(arr));
	n = json_array_size(arr);
	if (n > ST_MANIFEST_MAX_RANGES)
		return st_why(why, whylen, ST_EFORMAT, "ranges: %zu entries, more than the limit of %u", n,
			      ST_MANIFEST_MAX_RANGES);
	if (n && !(m->ranges = st_sys_calloc(n, sizeof(*m->ranges))))
		return -ENOMEM;
	m->nranges = n;
	for (size_t i = 0; i < n; i++) {
		const json_t *r = json_array_get(arr, i);
		uint64_t v[4];

		if (!json_is_array(r) || json_array_size(r) != 4)
			return st_why(why, whylen, ST_EFORMAT,
				      "ranges[%zu]: expected [guest page, page count, layer, layer page]", i);
		for (size_t k = 0; k < 4; k++) {
			snprintf(what, sizeof(what), "ranges[%zu] %s", i, field[k]);
			if ((rc = st_mf_get_uint(json_array_get(r, k), what, k == 2 ? UINT32_MAX : INT64_MAX, &v[k], why,
					   whylen)) < 0)
				return rc;
		}
		m->ranges[i] = (struct st_range){ .gpage = v[0], .npages = v[1], .layer = (uint32_t)v[2], .lpage = v[3] };
	}
	return 0;
}

int st_mf_parse_labels(const json_t *obj, struct st_manifest *m, char *why, size_t whylen)
{
	const char *key;
	json_t *v;
	size_t n, i = 0;

	if (!json_is_object(obj))
		return st_why(why, whylen, ST_EFORMAT, "labels: expected an object, got %s", st_mf_type_name(obj));
	n = json_object_size(obj);
	if (n > ST_MANIFEST_MAX_LABELS)
		return st_why(why, whylen, ST_EFORMAT, "labels: %zu entries, more than the limit of %u", n,
			      ST_MANIFEST_MAX_LABELS);
	if (n && !(m->labels = st_sys_calloc(n, sizeof(*m->labels))))
		return -ENOMEM;
	json_object_foreach((json_t *)obj, key, v) {
		if (!st_name_valid(key))
			return st_why(why, whylen, ST_EBADNAME, "labels: key '%.64s' is not a valid name", key);
		if (!json_is_string(v))
			return st_why(why, whylen, ST_EFORMAT, "labels.%s: expected a string, got %s", key, st_mf_type_name(v));
		if (strlen(json_string_value(v)) != json_string_length(v))
			return st_why(why, whylen, ST_EFORMAT, "labels.%s: contains a NUL character", key);
		m->nlabels = i + 1;
		if (!(m->labels[i].key = st_sys_strdup(key)) || !(m->labels[i].value = st_sys_strdup(json_string_value(v))))
			return -ENOMEM;
		i++;
	}
	/* Canonical order: sorted by key (jansson iterates in insertion order). */
	for (size_t a = 1; a < m->nlabels; a++) {
		struct st_label t = m->labels[a];
		size_t b = a;
		while (b > 0 && strcmp(m->labels[b - 1].key, t.key) > 0) {
			m->labels[b] = m->labels[b - 1];
			b--;
		}
		m->labels[b] = t;
	}
	return 0;
}

/* Keep a nested object as its canonical text, and remember it is. */
int st_mf_parse_object(const json_t *j, const char *what, char **out, uint64_t *memo, char *why, size_t whylen)
{
	if (!json_is_object(j))
		return st_why(why, whylen, ST_EFORMAT, "%s: expected an object, got %s", what, st_mf_type_name(j));
	*out = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	if (!*out)
		return -ENOMEM;
	size_t len = strlen(*out);
	if (len > ST_MANIFEST_MAX_OBJECT)
		return st_why(why, whylen, ST_EFORMAT, "%s: more than %u bytes", what, ST_MANIFEST_MAX_OBJECT);
	*memo = canon_memo(*out, len);
	return 0;
}

int st_mf_created_get(const json_t *v, uint32_t version, int64_t *out, char *why, size_t whylen)
{
	uint64_t u;
	int rc;

	if (version == 1) {
		if ((rc = st_mf_get_uint(v, "created", INT64_MAX, &u, why, whylen)) < 0)
			return rc;
		*out = (int64_t)u;
		return 0;
	}
	if (!json_is_string(v) || created_parse(json_string_value(v), json_string_length(v), out) < 0)
		return st_why(why, whylen, ST_EFORMAT, "created: expected a UTC time such as "
			      "\"2026-12-01T12:00:00.000000000Z\" (nine fractional digits), got %s%.40s%s",
			      json_is_string(v) ? "'" : "", json_is_string(v) ? json_string_value(v) : st_mf_type_name(v),
			      json_is_string(v) ? "'" : "");
	return 0;
}

static const char *const known_keys[] = {
	"abi_version", "created", "guest", "labels", "layers", "mem_size", "parent", "ranges", "vcpu", "version",
};

static int parse_root(const json_t *root, struct st_manifest *m, char *why, size_t whylen)
{
	const char *key;
	json_t *v;
	uint64_t u;
	int rc;

	if (!json_is_object(root))
		return st_why(why, whylen, ST_EFORMAT, "expected a JSON object at the top, got %s", st_mf_type_name(root));
	/* Version first: a newer manifest may well have keys this code does not know. */
	if (!(v = json_object_get(root, "version")))
		return st_why(why, whylen, ST_EFORMAT, "missing 'version'");
	if (!json_is_integer(v))
		return st_why(why, whylen, ST_EFORMAT, "version: expected an integer, got %s", st_mf_type_name(v));
	if (json_integer_value(v) == ST_MANIFEST_DELTA_VERSION)
		return st_why(why, whylen, ST_EVERSION, "version %u is a manifest delta, which is read with its parent "
			      "snapshot (st_manifest_delta_apply), not on its own", ST_MANIFEST_DELTA_VERSION);
	if (json_integer_value(v) < ST_MANIFEST_VERSION_MIN || json_integer_value(v) > ST_MANIFEST_VERSION)
		return st_why(why, whylen, ST_EVERSION, "version %lld is not supported (this strata reads %u to %u)",
			      (long long)json_integer_value(v), ST_MANIFEST_VERSION_MIN, ST_MANIFEST_VERSION);
	m->version = (uint32_t)json_integer_value(v);
	json_object_foreach((json_t *)root, key, v) {
		bool known = false;
		for (size_t i = 0; i < sizeof(known_keys) / sizeof(known_keys[0]); i++)
			known = known || strcmp(key, known_keys[i]) == 0;
		if (!known)
			return st_why(why, whylen, ST_EFORMAT, "unknown key '%.64s'", key);
	}
	static const char *const required[] = { "mem_size", "layers", "ranges", "created", "abi_version" };
	for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++)
		if (!json_object_get(root, required[i]))
			return st_why(why, whylen, ST_EFORMAT, "missing '%s'", required[i]);
	if ((rc = st_mf_get_uint(json_object_get(root, "mem_size"), "mem_size", INT64_MAX, &m->mem_size, why, whylen)) < 0)
		return rc;
	if ((rc = st_mf_created_get(json_object_get(root, "created"), m->version, &m->created, why, whylen)) < 0)
		return rc;
	if ((rc = st_mf_get_uint(json_object_get(root, "abi_version"), "abi_version", UINT32_MAX, &u, why, whylen)) < 0)
		return rc;
	m->abi_version = (uint32_t)u;
	if ((rc = parse_layers(json_object_get(root, "layers"), m, why, whylen)) < 0)
		return rc;
	if ((rc = parse_ranges(json_object_get(root, "ranges"), m, why, whylen)) < 0)
		return rc;
	if ((v = json_object_get(root, "parent"))) {
		if ((rc = st_mf_get_id(v, "parent", &m->parent, why, whylen)) < 0)
			return rc;
		m->has_parent = true;
	}
	if ((v = json_object_get(root, "labels")) && (rc = st_mf_parse_labels(v, m, why, whylen)) < 0)
		return rc;
	if ((v = json_object_get(root, "guest")) && (rc = st_mf_parse_object(v, "guest", &m->guest, &m->guest_canon, why, whylen)) < 0)
		return rc;
	if ((v = json_object_get(root, "vcpu")) && (rc = st_mf_parse_object(v, "vcpu", &m->vcpu, &m->vcpu_canon, why, whylen)) < 0)
		return rc;
	return 0;
}

/*
 * An upper bound of what jansson allocates for the tree of text[0, len),
 * string bytes aside (those are at most len), read from its structure
 * before any of it is built: per object 256 bytes (struct, first hash
 * buckets), per array 128 (struct, first table), per string 96 (struct,
 * copy's header, or an object key's pair), per number 32, and per ',' or
 * ':' 32 (the growth of tables and buckets). Measured against glibc malloc
 * in docs/formats.md; every shape stays under it.
 */
static uint64_t tree_cost(const char *text, size_t len)
{
	uint64_t cost = 0;
	bool in_string = false, in_number = false;

	for (size_t i = 0; i < len; i++) {
		char c = text[i];
		if (in_string) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_string = false;
			continue;
		}
		bool numeric = (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
		if (numeric && !in_number)
			cost += 32;
		in_number = numeric;
		switch (c) {
		case '{': cost += 256; break;
		case '[': cost += 128; break;
		case '"': cost += 96; in_string = true; break;
		case ',': case ':': cost += 32; break;
		default: break;
		}
	}
	return cost;
}

int st_mf_load(const char *json, size_t len, json_t **out, char *why, size_t whylen)
{
	json_error_t err;
	json_t *root;

	if (len > ST_MANIFEST_MAX_BYTES)
		return st_why(why, whylen, ST_EFORMAT, "manifest is %zu bytes, more than the limit of %u", len,
			      ST_MANIFEST_MAX_BYTES);
	/* A tree is 20-80 times the text it comes from: refuse before building
	 * one that no manifest strata writes would need (docs/formats.md). */
	uint64_t cost = tree_cost(json, len), budget = (uint64_t)len * ST_MANIFEST_TREE_PER_BYTE + ST_MANIFEST_TREE_SLACK;
	if (budget > ST_MANIFEST_TREE_MAX)
		budget = ST_MANIFEST_TREE_MAX;
	if (cost > budget)
		return st_why(why, whylen, ST_EFORMAT,
			      "manifest of %zu bytes is too dense in structure to be one strata writes "
			      "(parsing would take about %" PRIu64 " MiB, more than the limit of %" PRIu64 " MiB)",
			      len, cost >> 20, budget >> 20);
	root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &err);
	if (!root)
		return st_why(why, whylen, ST_EFORMAT, "not valid JSON at line %d column %d: %s", err.line, err.column,
			      err.text);
	*out = root;
	return 0;
}

int st_manifest_parse(const char *json, size_t len, struct st_manifest **out, char *why, size_t whylen)
{
	struct st_manifest *m;
	json_t *root;
	int rc;

	if ((rc = st_mf_load(json, len, &root, why, whylen)) < 0)
		return rc;
	if ((rc = st_manifest_new(&m)) < 0)
		goto out_decref;
	if ((rc = parse_root(root, m, why, whylen)) < 0 || (rc = st_manifest_validate(m, why, whylen)) < 0) {
		st_manifest_free(m);
		goto out_decref;
	}
	*out = m;
out_decref:
	json_decref(root);
	return rc;
}

/* ---- encoding */

void st_mf_put(struct st_mf_out *o, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(o->p + o->len, o->cap - o->len, fmt, ap);
	va_end(ap);
	o->len += n > 0 ? (size_t)n : 0; /* cap is an upper bound: never truncated */
}

void st_mf_texts_free(struct st_mf_texts *t)
{
	free(t->guest);
	free(t->vcpu);
	free(t->labels);
	*t = (struct st_mf_texts){ 0 };
}

int st_mf_texts_make(const struct st_manifest *m, struct st_mf_texts *t, char *why, size_t whylen)
{
	int rc;

	*t = (struct st_mf_texts){ 0 };
	if ((m->guest && (rc = check_object_text("guest", m->guest, m->guest_canon, &t->guest, why, whylen)) < 0) ||
	    (m->vcpu && (rc = check_object_text("vcpu", m->vcpu, m->vcpu_canon, &t->vcpu, why, whylen)) < 0))
		goto out_free;
	if (m->nlabels) {
		json_t *l = json_object();
		rc = l ? 0 : -ENOMEM;
		for (size_t i = 0; rc == 0 && i < m->nlabels; i++) {
			json_t *v = json_string(m->labels[i].value);
			rc = v && json_object_set_new(l, m->labels[i].key, v) == 0 ? 0 : -ENOMEM;
		}
		if (rc == 0 && !(t->labels = json_dumps(l, JSON_COMPACT | JSON_SORT_KEYS)))
			rc = -ENOMEM;
		json_decref(l);
		if (rc < 0)
			goto out_free;
	}
	if (m->version == 1) {
		snprintf(t->created, sizeof(t->created), "%" PRId64, m->created);
	} else {
		char c[CREATED_LEN + 1];
		if (created_format(m->created, c) < 0) {
			rc = st_why(why, whylen, ST_EFORMAT, "created is out of range");
			goto out_free;
		}
		snprintf(t->created, sizeof(t->created), "\"%s\"", c);
	}
	t->extra = 512 + (t->guest ? strlen(t->guest) : 0) + (t->vcpu ? strlen(t->vcpu) : 0) +
		   (t->labels ? strlen(t->labels) : 0);
	return 0;
out_free:
	st_mf_texts_free(t);
	return rc;
}

/*
 * The canonical encoding is what json_dumps(JSON_COMPACT | JSON_SORT_KEYS)
 * writes for the manifest as one JSON object (docs/formats.md): keys in
 * byte order, no spaces, integers in decimal. It is written here directly;
 * the labels object and any guest / vcpu text not already known canonical
 * go through jansson, so string escaping is jansson's. tests/store checks
 * this encoder byte for byte against one built entirely with jansson.
 */
int st_manifest_encode(const struct st_manifest *m, char **json, size_t *len, char *why, size_t whylen)
{
	char hex[ST_ID_HEX_LEN + 1];
	struct st_mf_texts t;
	struct st_mf_out o = { 0 };
	int rc;

	if ((rc = st_manifest_validate(m, why, whylen)) < 0)
		return rc;
	if ((rc = st_mf_texts_make(m, &t, why, whylen)) < 0)
		return rc;
	/* Every integer fits in 20 digits; every fixed piece in 64 bytes. */
	o.cap = t.extra + (size_t)m->nlayers * (ST_ID_HEX_LEN + 64) + m->nranges * (4 * 21 + 8);
	if (!(o.p = st_sys_malloc(o.cap))) {
		rc = -ENOMEM;
		goto out_free;
	}
	st_mf_put(&o, "{\"abi_version\":%" PRIu32 ",\"created\":%s", m->abi_version, t.created);
	if (t.guest)
		st_mf_put(&o, ",\"guest\":%s", t.guest);
	if (t.labels)
		st_mf_put(&o, ",\"labels\":%s", t.labels);
	st_mf_put(&o, ",\"layers\":[");
	for (uint32_t i = 0; i < m->nlayers; i++) {
		st_id_format(&m->layers[i].id, hex);
		st_mf_put(&o, "%s{\"id\":\"%s\",\"pages\":%" PRIu64 "}", i ? "," : "", hex, m->layers[i].pages);
	}
	st_mf_put(&o, "],\"mem_size\":%" PRIu64, m->mem_size);
	if (m->has_parent) {
		st_id_format(&m->parent, hex);
		st_mf_put(&o, ",\"parent\":\"%s\"", hex);
	}
	st_mf_put(&o, ",\"ranges\":[");
	for (uint64_t i = 0; i < m->nranges; i++) {
		const struct st_range *r = &m->ranges[i];
		st_mf_put(&o, "%s[%" PRIu64 ",%" PRIu64 ",%" PRIu32 ",%" PRIu64 "]", i ? "," : "", r->gpage, r->npages,
			  r->layer, r->lpage);
	}
	st_mf_put(&o, "]");
	if (t.vcpu)
		st_mf_put(&o, ",\"vcpu\":%s", t.vcpu);
	st_mf_put(&o, ",\"version\":%" PRIu32 "}", m->version);
	*json = o.p;
	*len = o.len;
	rc = 0;
out_free:
	st_mf_texts_free(&t);
	return rc;
}

int st_manifest_id(const struct st_manifest *m, st_id *id, char *why, size_t whylen)
{
	char *text;
	size_t len;
	int rc = st_manifest_encode(m, &text, &len, why, whylen);

	if (rc < 0)
		return rc;
	st_id_hash(text, len, id);
	free(text);
	return 0;
}

uint64_t st_manifest_layer_pages(const struct st_manifest *m)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < m->nlayers; i++)
		n += m->layers[i].pages;
	return n;
}

int st_manifest_lookup(const struct st_manifest *m, uint64_t gpage, uint32_t *layer, uint64_t *lpage)
{
	uint64_t lo = 0, hi = m->nranges;

	/* First range whose end is past gpage. */
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		const struct st_range *r = &m->ranges[mid];
		if (r->gpage + r->npages <= gpage)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == m->nranges || m->ranges[lo].gpage > gpage)
		return -ENOENT;
	*layer = m->ranges[lo].layer;
	*lpage = m->ranges[lo].lpage + (gpage - m->ranges[lo].gpage);
	return 0;
}
