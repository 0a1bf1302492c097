/* cmd_tag.c: `strata tag` and `strata rm`: a store's tags and snapshots, through <strata.h>. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli_api.h"

/* A snapshot id: 32 lowercase hex digits. */
static bool is_id(const char *s)
{
	return strlen(s) == STRATA_ID_LEN && strspn(s, "0123456789abcdef") == STRATA_ID_LEN;
}

static void tag_usage(FILE *f)
{
	fprintf(f,
		"usage: strata [--store DIR] tag [-f] TAG|ID NAME   point tag NAME at a snapshot\n"
		"       strata [--store DIR] tag -d NAME             remove tag NAME (the snapshot stays)\n"
		"       strata [--store DIR] tag -m OLD NEW          rename a tag\n"
		"       strata [--store DIR] tag [--json]            list tags\n"
		"\n"
		"Tag names: [A-Za-z0-9_][A-Za-z0-9._-]*, at most 128 characters.\n"
		"\n"
		"  -f, --force   move NAME (or replace NEW) if it already names another snapshot\n"
		"  -d, --delete  remove a tag\n"
		"  -m, --move    rename a tag\n"
		"  --json        list the tags as a JSON array of {name, id} (docs/cli.md)\n");
}

static int print_tag(void *arg, const char *name, const char *id)
{
	(void)arg;
	printf("%-20s %s\n", cli_esc(name), id);
	return 0;
}

static int json_tag(void *arg, const char *name, const char *id)
{
	json_t *o = json_object();

	json_object_set_new(o, "name", json_string(name));
	json_object_set_new(o, "id", json_string(id));
	return json_array_append_new(arg, o) < 0 ? -ENOMEM : 0;
}

int cmd_tag(struct cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "force", no_argument, NULL, 'f' }, { "delete", no_argument, NULL, 'd' },
		{ "move", no_argument, NULL, 'm' }, { "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' }, { 0 } };
	strata_store *st;
	bool json = false;
	unsigned flags = 0;
	char mode = 's';
	int c, rc, n;

	while ((c = getopt_long(argc, argv, "fdmh", opts, NULL)) != -1) {
		switch (c) {
		case 'f': flags |= STRATA_TAG_FORCE; break;
		case 'd': mode = 'd'; break;
		case 'm': mode = 'm'; break;
		case 'j': json = true; break;
		case 'h': tag_usage(stdout); return CLI_OK;
		default: return cli_usage_hint(argv[0]);
		}
	}
	n = argc - optind;
	char **a = argv + optind;
	if ((mode == 'd' && n != 1) || (mode != 'd' && n != 0 && n != 2)) {
		tag_usage(stderr);
		return CLI_USAGE;
	}
	if (json && (n != 0 || mode != 's')) {
		cli_err(cli, "tag: --json lists the tags: it takes no operands, -d or -m");
		return CLI_USAGE;
	}
	if (mode == 'd' && !strata_tag_valid(a[0]))
		return cli_bad_tag_name(cli, a[0]);
	if (mode == 'm' && (!strata_tag_valid(a[0]) || !strata_tag_valid(a[1])))
		return cli_bad_tag_name(cli, strata_tag_valid(a[0]) ? a[1] : a[0]);
	if (mode == 's' && n == 2 && !strata_tag_valid(a[1]))
		return cli_bad_tag_name(cli, a[1]);
	if ((rc = cli_strata_store_open(cli, n != 0, &st)) != CLI_OK)
		return rc;
	if (n == 0) {
		json_t *arr = json ? json_array() : NULL;
		rc = json ? strata_store_tags(st, json_tag, arr) : strata_store_tags(st, print_tag, NULL);
		if (rc > 0)
			rc = 0;  /* the count */
		if (json && rc == 0)
			rc = cli_json_put(arr);
		else
			json_decref(arr);
	} else if (mode == 'd') {
		rc = strata_store_untag(st, a[0], 0);
		if (rc == STRATA_E_NOT_FOUND) {
			cli_err(cli, "tag '%s' not found in store %s", a[0], cli->store);
			strata_store_close(st);
			return CLI_NOTFOUND;
		}
	} else if (mode == 'm') {
		rc = strata_store_rename_tag(st, a[0], a[1], flags);
		if (rc == STRATA_E_NOT_FOUND) {
			cli_err(cli, "tag '%s' not found in store %s", a[0], cli->store);
			strata_store_close(st);
			return CLI_NOTFOUND;
		}
	} else {
		char id[STRATA_ID_LEN + 1];
		if ((rc = strata_store_resolve(st, a[0], id)) < 0) {
			strata_store_close(st);
			return cli_ref_error(cli, a[0], rc);
		}
		rc = strata_store_tag(st, id, a[1], flags);
	}
	strata_store_close(st);
	if (rc == STRATA_E_EXISTS) {
		cli_err(cli, "tag '%s' already names another snapshot (use --force to move it)", a[1]);
		return CLI_FAIL;
	}
	if (rc < 0) {
		cli_err(cli, "tag: %s (store %s)", cli_store_strerror(rc), cli->store);
		return cli_store_exit(rc);
	}
	return CLI_OK;
}

/* ------------------------------------------------------------------ rm */

static void rm_usage(FILE *f)
{
	fprintf(f,
		"usage: strata [--store DIR] rm TAG|ID...\n"
		"\n"
		"Remove snapshots. 'rm TAG' removes the tag, and the snapshot too when no\n"
		"other tag names it. 'rm ID' removes the snapshot and every tag naming it.\n"
		"Snapshots made from it keep working (each lists all the layers it needs).\n"
		"Layer blobs are freed by 'strata gc'.\n");
}

int cmd_rm(struct cli *cli, int argc, char **argv)
{
	static const struct option opts[] = { { "help", no_argument, NULL, 'h' }, { 0 } };
	strata_store *st;
	int c, rc, status = CLI_OK;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'h': rm_usage(stdout); return CLI_OK;
		default: return cli_usage_hint(argv[0]);
		}
	}
	if (optind == argc) {
		cli_err(cli, "rm: name at least one TAG or ID (see 'strata rm --help')");
		return CLI_USAGE;
	}
	if ((rc = cli_strata_store_open(cli, true, &st)) != CLI_OK)
		return rc;
	for (int i = optind; i < argc; i++) {
		const char *ref = argv[i];
		char id[STRATA_ID_LEN + 1], left[STRATA_ID_LEN + 1];

		if (is_id(ref)) {
			rc = strata_store_delete(st, ref);
			if (rc == 0)
				cli_info(cli, "removed snapshot %s", ref);
		} else if (strata_tag_valid(ref)) {
			/* Whether the snapshot went too: it resolves no more. */
			bool had = strata_store_resolve(st, ref, id) == 0;
			rc = strata_store_untag(st, ref, STRATA_TAG_PRUNE);
			bool pruned = rc == 0 && had && strata_store_resolve(st, id, left) == STRATA_E_NOT_FOUND;
			if (rc == 0 && pruned)
				cli_info(cli, "removed tag '%s' and its snapshot", ref);
			else if (rc == 0)
				cli_info(cli, "removed tag '%s' (its snapshot has other tags)", ref);
		} else {
			rc = STRATA_E_BAD_NAME;
		}
		if (rc < 0) {
			int failed = cli_ref_error(cli, ref, rc);
			if (status == CLI_OK)
				status = failed;
		}
	}
	strata_store_close(st);
	return status;
}

