/* lists.c: a store's tags and snapshot ids collected through <strata.h>, for the commands that print them beside each snapshot. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_api.h"

int cli_tags_collect_cb(void *ctx, const char *name, const char *id)
{
	struct cli_tags *l = ctx;

	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		struct cli_tag *v = realloc(l->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	if (!(l->v[l->n].name = strdup(name)))
		return -ENOMEM;
	memcpy(l->v[l->n++].id, id, STRATA_ID_LEN + 1);
	return 0;
}

int cli_tags_collect(strata_store *st, struct cli_tags *out)
{
	int rc = strata_store_tags(st, cli_tags_collect_cb, out);

	return rc < 0 ? rc : 0;
}

void cli_tags_free(struct cli_tags *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].name);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

void cli_tags_of(const struct cli_tags *l, const char *id, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < l->n; i++) {
		if (strcmp(l->v[i].id, id) != 0)
			continue;
		/* Tag names are checked on the way in; escaped anyway, like every
		 * name read from the index. */
		int w = snprintf(buf + off, len - off, "%s%s", off ? "," : "", cli_esc(l->v[i].name));
		if (w < 0 || (size_t)w >= len - off)
			break;
		off += (size_t)w;
	}
	if (!buf[0])
		snprintf(buf, len, "-");
}

json_t *cli_tags_json(const struct cli_tags *l, const char *id)
{
	json_t *arr = json_array();

	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i].id, id) == 0)
			json_array_append_new(arr, json_string(l->v[i].name));
	return arr;
}

int cli_ids_collect_cb(void *ctx, const char *id)
{
	struct cli_ids *l = ctx;

	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		char (*v)[STRATA_ID_LEN + 1] = realloc(l->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	memcpy(l->v[l->n++], id, STRATA_ID_LEN + 1);
	return 0;
}
