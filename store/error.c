/* error.c: the store's codes (store.h) and st_strerror, the one dispatcher that names every code strata returns. */
#include <string.h>

#include "store/error.h"
#include "store/store.h"

static const struct st_errcode store_codes[] = {
	{ST_ECORRUPT, "ST_ECORRUPT", "content does not match its id (corrupt blob or layer)"},
	{ST_EFORMAT, "ST_EFORMAT", "malformed manifest or store file"},
	{ST_EVERSION, "ST_EVERSION", "unknown format version"},
	{ST_ELAYOUT, "ST_ELAYOUT", "invalid snapshot layout (ranges or layer sizes)"},
	{ST_ENOTSTORE, "ST_ENOTSTORE", "not a strata store"},
	{ST_EBADNAME, "ST_EBADNAME", "invalid name (allowed: [A-Za-z0-9_][A-Za-z0-9._-]{0,127})"},
	{ST_EBADID, "ST_EBADID", "invalid id (expected 32 lowercase hex characters)"},
	{ST_EREADONLY, "ST_EREADONLY", "store is read-only"},
};

static const struct st_errtable store_table = {
	ST_E_FIRST, store_codes, sizeof(store_codes) / sizeof(store_codes[0]),
};

/* The ranges from -1000 down: tables[i] holds -1000 - 100 * i .. - 99. */
#define RANGES 10
static const struct st_errtable *tables[RANGES] = {&store_table};

static const struct st_errtable *table_of(int code)
{
	if (code > ST_E_FIRST || code <= ST_E_FIRST - RANGES * ST_ERR_RANGE)
		return NULL;
	return tables[(ST_E_FIRST - code) / ST_ERR_RANGE];
}

void st_errtable_add(const struct st_errtable *t)
{
	int i = (ST_E_FIRST - t->first) / ST_ERR_RANGE;

	if (t->first <= ST_E_FIRST && (ST_E_FIRST - t->first) % ST_ERR_RANGE == 0 && i < RANGES && !tables[i])
		tables[i] = t;
}

const struct st_errcode *st_errcode_find(int code)
{
	const struct st_errtable *t = table_of(code);

	for (size_t i = 0; t && i < t->n; i++)
		if (t->codes[i].code == code)
			return &t->codes[i];
	return NULL;
}

const char *st_strerror(int err)
{
	const struct st_errcode *c;

	if (err >= 0)
		return "success";
	if ((c = st_errcode_find(err)))
		return c->message;
	/* strata's space, -1000..-1999, lies inside -errno's (errno values stop near 140) */
	if (err <= ST_E_FIRST && err > ST_E_FIRST - RANGES * ST_ERR_RANGE)
		return table_of(err) ? "a code of strata's range this version does not name"
				     : "a code of a strata module not linked into this program";
	if (err > -4096)
		return strerror(-err);
	return "unknown error";
}
