/* cmd_ls.c: `strata ls`: the store's snapshots as a table, a tree or JSON, through <strata.h>. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_api.h"

/* A snapshot's lazy layers, chunks and chunks present (0 layers: none lazy). */
struct lazy_sum {
	uint64_t layers, chunks, present;
};

static void lazy_sum_of(strata_store *st, const char *id, struct lazy_sum *ls)
{
	memset(ls, 0, sizeof(*ls));
	if (strata_store_snapshot_info(st, id, STRATA_SNAPSHOT_LAZY_LAYERS, &ls->layers) < 0 || !ls->layers ||
	    strata_store_snapshot_info(st, id, STRATA_SNAPSHOT_LAZY_CHUNKS, &ls->chunks) < 0 ||
	    strata_store_snapshot_info(st, id, STRATA_SNAPSHOT_LAZY_PRESENT, &ls->present) < 0)
		ls->layers = 0;
}

static void ls_row(strata_store *st, const struct cli_tags *tags, const char *id, int depth)
{
	char phex[STRATA_ID_LEN + 1] = "-", mem[32], uniq[32];
	char tagbuf[1024], lazy[112] = "", from[STRATA_ORIGIN_LEN * 4 + 8] = "", origin[STRATA_ORIGIN_LEN + 1];
	uint64_t msize, ubytes, has_parent;
	struct lazy_sum ls;

	cli_tags_of(tags, id, tagbuf, sizeof(tagbuf));
	if (strata_store_snapshot_info(st, id, STRATA_SNAPSHOT_MEMORY, &msize) < 0 ||
	    strata_store_snapshot_info(st, id, STRATA_SNAPSHOT_UNIQUE, &ubytes) < 0 ||
	    strata_store_snapshot_info(st, id, STRATA_SNAPSHOT_HAS_PARENT, &has_parent) < 0) {
		printf("%-20s %s  (unreadable record)\n", tagbuf, id);
		return;
	}
	if (has_parent)
		strata_store_parent(st, id, phex);
	cli_fmt_size(mem, sizeof(mem), msize);
	cli_fmt_size(uniq, sizeof(uniq), ubytes);
	lazy_sum_of(st, id, &ls);
	if (ls.layers) {
		char what[96];
		cli_fmt_lazy(what, sizeof(what), ls.present, ls.chunks);
		snprintf(lazy, sizeof(lazy), depth < 0 ? "  %s" : ", %s", what);
	}
	/* "  from HOST/REPO" for a snapshot last pulled from or pushed to there. */
	if (strata_store_origin(st, id, origin, sizeof(origin)) == 0)
		snprintf(from, sizeof(from), "  from %s", cli_esc(origin));
	if (depth < 0)
		printf("%-20s %-32s %-32s %10s %10s%s%s\n", tagbuf, id, phex, mem, uniq, lazy, from);
	else
		printf("%*s%s %s  memory %s, unique %s%s%s\n", depth * 2, "", tagbuf, id, mem, uniq, lazy, from);
}

/* ls --json: one object per snapshot (docs/cli.md). */
static json_t *ls_json_row(strata_store *st, const struct cli_tags *tags, const char *id)
{
	char phex[STRATA_ID_LEN + 1], origin[STRATA_ORIGIN_LEN + 1];
	uint64_t msize, ubytes, has_parent;
	json_t *o = json_object();
	struct lazy_sum ls;

	json_object_set_new(o, "id", json_string(id));
	json_object_set_new(o, "tags", cli_tags_json(tags, id));
	if (strata_store_snapshot_info(st, id, STRATA_SNAPSHOT_MEMORY, &msize) < 0 ||
	    strata_store_snapshot_info(st, id, STRATA_SNAPSHOT_UNIQUE, &ubytes) < 0 ||
	    strata_store_snapshot_info(st, id, STRATA_SNAPSHOT_HAS_PARENT, &has_parent) < 0) {
		json_object_set_new(o, "error", json_string("unreadable record"));
		return o;
	}
	json_object_set_new(o, "parent", has_parent && strata_store_parent(st, id, phex) == 0 ? json_string(phex)
											  : json_null());
	json_object_set_new(o, "memory_bytes", json_integer((json_int_t)msize));
	json_object_set_new(o, "unique_bytes", json_integer((json_int_t)ubytes));
	json_t *lazy = json_null();
	lazy_sum_of(st, id, &ls);
	if (ls.layers && strata_store_lazy_origin(st, id, origin, sizeof(origin)) == 0) {
		json_decref(lazy);
		lazy = json_pack("{sIsIsIss}", "layers", (json_int_t)ls.layers, "chunks", (json_int_t)ls.chunks,
				 "present", (json_int_t)ls.present, "origin", origin);
	}
	json_object_set_new(o, "lazy", lazy);
	json_object_set_new(o, "origin", strata_store_origin(st, id, origin, sizeof(origin)) == 0 ? json_string(origin)
												     : json_null());
	return o;
}

/* id is in the store (a parent or child may have been removed since). */
static bool present(strata_store *st, const char *id)
{
	char got[STRATA_ID_LEN + 1];

	return strata_store_resolve(st, id, got) == 0 && strcmp(got, id) == 0;
}

static int ls_tree(strata_store *st, const struct cli_tags *tags, const char *id, int depth)
{
	struct cli_ids kids = { 0 };
	int rc;

	ls_row(st, tags, id, depth);
	if (depth > 1000)
		return 0; /* a cycle cannot happen (ids are hashes), but never recurse unbounded */
	if ((rc = strata_store_children(st, id, cli_ids_collect_cb, &kids)) < 0)
		goto out_free;
	rc = 0;
	for (size_t i = 0; i < kids.n && rc >= 0; i++)
		if (present(st, kids.v[i]))
			rc = ls_tree(st, tags, kids.v[i], depth + 1);
out_free:
	free(kids.v);
	return rc;
}

static void ls_usage(FILE *f)
{
	fprintf(f,
		"usage: strata [--store DIR] ls [--tree | --json]\n"
		"\n"
		"List snapshots: tag(s), id, parent id, guest memory size, and the bytes\n"
		"unique to the snapshot (what 'strata rm' then 'strata gc' would free);\n"
		"then a lazy snapshot's chunks present, and 'from HOST/REPO' for one last\n"
		"pulled from or pushed to a registry.\n"
		"\n"
		"  --tree  show snapshots as a tree of parents and children\n"
		"  --json  print a JSON array, one object per snapshot (docs/cli.md)\n");
}

int cmd_ls(struct cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "tree", no_argument, NULL, 't' }, { "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' }, { 0 } };
	struct cli_tags tags = { 0 };
	struct cli_ids ids = { 0 };
	strata_store *st;
	bool tree = false, json = false;
	int c, rc;

	while ((c = getopt_long(argc, argv, "th", opts, NULL)) != -1) {
		switch (c) {
		case 't': tree = true; break;
		case 'j': json = true; break;
		case 'h': ls_usage(stdout); return CLI_OK;
		default: return cli_usage_hint(argv[0]);
		}
	}
	if (optind != argc) {
		cli_err(cli, "ls: unexpected argument '%s'", argv[optind]);
		return CLI_USAGE;
	}
	if (tree && json) {
		cli_err(cli, "ls: --tree or --json, not both (each --json object names its parent)");
		return CLI_USAGE;
	}
	if ((rc = cli_strata_store_open(cli, false, &st)) != CLI_OK)
		return rc;
	if ((rc = cli_tags_collect(st, &tags)) < 0 || (rc = strata_store_snapshots(st, cli_ids_collect_cb, &ids)) < 0)
		goto out_close;
	rc = 0;
	if (json) {
		json_t *arr = json_array();
		for (size_t i = 0; i < ids.n; i++)
			json_array_append_new(arr, ls_json_row(st, &tags, ids.v[i]));
		rc = cli_json_put(arr);
	} else if (!tree) {
		printf("%-20s %-32s %-32s %10s %10s\n", "TAG", "ID", "PARENT", "MEMORY", "UNIQUE");
		for (size_t i = 0; i < ids.n; i++)
			ls_row(st, &tags, ids.v[i], -1);
	} else {
		for (size_t i = 0; i < ids.n && rc >= 0; i++) {
			char parent[STRATA_ID_LEN + 1];
			uint64_t has_parent;
			/* Roots: no parent, or a parent no longer in the store. */
			if (strata_store_snapshot_info(st, ids.v[i], STRATA_SNAPSHOT_HAS_PARENT, &has_parent) < 0 ||
			    !has_parent || strata_store_parent(st, ids.v[i], parent) < 0 || !present(st, parent))
				rc = ls_tree(st, &tags, ids.v[i], 0);
		}
	}
out_close:
	cli_tags_free(&tags);
	free(ids.v);
	strata_store_close(st);
	if (rc < 0) {
		cli_err(cli, "cannot list store %s: %s", cli->store, cli_store_strerror(rc));
		return CLI_FAIL;
	}
	return CLI_OK;
}
