/* cmd_init.c: `strata init`: make the store, private or shared with a group, through <strata.h>. */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_api.h"

static void init_usage(FILE *f)
{
	fprintf(f,
		"usage: strata [--store DIR] init [--sync full|none] [--shared GROUP]\n"
		"\n"
		"Create the store (blobs, staging area, LMDB index), readable by you only:\n"
		"its layers are sandboxes' memory. Safe to run again on an existing store:\n"
		"nothing changes.\n"
		"\n"
		"  --sync full      fsync every blob and index commit (default): survives power loss\n"
		"  --sync none      no fsync: survives kill -9, not power loss\n"
		"  --shared GROUP   members of GROUP (a name or gid you belong to) may read the\n"
		"                   store and run its snapshots, not write it; nobody else may\n");
}

/* A group by name or number; false if there is no such group. */
static bool group_parse(const char *arg, gid_t *out)
{
	struct group *g = getgrnam(arg);
	char *end;
	unsigned long v;

	if (g) {
		*out = g->gr_gid;
		return true;
	}
	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno || end == arg || *end || arg[0] == '-' || v >= (unsigned long)(gid_t)-1 || !getgrgid((gid_t)v))
		return false;
	*out = (gid_t)v;
	return true;
}

int cmd_init(struct cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "sync", required_argument, NULL, 's' }, { "shared", required_argument, NULL, 'g' },
		{ "help", no_argument, NULL, 'h' }, { 0 } };
	struct strata_store_options so = { .size = sizeof(so) };
	const char *group = NULL;
	strata_store *st;
	gid_t gid;
	int c, rc;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (strcmp(optarg, "full") == 0) {
				so.sync = STRATA_SYNC_FULL;
			} else if (strcmp(optarg, "none") == 0) {
				so.sync = STRATA_SYNC_NONE;
			} else {
				cli_err(cli, "init: --sync takes 'full' or 'none', not '%s'", optarg);
				return CLI_USAGE;
			}
			break;
		case 'g':
			if (!group_parse(optarg, &gid)) {
				cli_err(cli, "init: --shared: no group '%s' on this machine", optarg);
				return CLI_USAGE;
			}
			so.shared = 1;
			so.group = (uint32_t)gid;
			group = optarg;
			break;
		case 'h': init_usage(stdout); return CLI_OK;
		default: return cli_usage_hint(argv[0]);
		}
	}
	if (optind != argc) {
		cli_err(cli, "init: unexpected argument '%s'", argv[optind]);
		return CLI_USAGE;
	}
	if ((rc = cli_make_parents(cli->store)) == 0)
		rc = strata_store_create(cli->store, &so);
	if (rc < 0) {
		if (rc == -EEXIST)
			cli_err(cli, "store %s already exists and is not shared with group '%s': --shared makes a new "
				"store (to share this one, see docs/security.md, \"Who can read a store\")", cli->store,
				group);
		else if (rc == -EPERM && group)
			cli_err(cli, "cannot give store %s to group '%s': you are not a member of it", cli->store, group);
		else if (rc == STRATA_E_NOT_STORE)
			cli_err(cli, "cannot create a store in %s: the directory is not empty and is not a strata store",
				cli->store);
		else
			cli_err(cli, "cannot create store %s: %s", cli->store, cli_store_strerror(rc));
		return CLI_FAIL;
	}
	if ((rc = cli_strata_store_open(cli, true, &st)) != CLI_OK)
		return rc;
	printf("store %s ready\n", strata_store_path(st));
	strata_store_close(st);
	return CLI_OK;
}
