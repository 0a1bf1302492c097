/* cmd_store.c: the store subcommands still built on the modules: debug. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/array.h"
#include "cli.h"
#include "index/index.h"
#include "store/store.h"


struct open_store {
	struct st_store *s;
	struct ix *ix;
};

static void close_store(struct open_store *o)
{
	ix_close(o->ix);
	st_store_close(o->s);
	o->ix = NULL;
	o->s = NULL;
}

static int open_store(const struct cli *cli, bool write, struct open_store *o)
{
	return cli_store_open(cli, write, &o->s, &o->ix);
}

/* ------------------------------------------------------------------ debug */

static void debug_usage(FILE *f)
{
	fprintf(f,
		"usage: strata [--store DIR] debug ingest IMAGE [--parent TAG|ID] [--tag NAME] [--force]\n"
		"\n"
		"Turn a raw guest-memory file into a snapshot: pages equal to the parent's\n"
		"are shared with it, all-zero pages are holes, and only the other pages are\n"
		"stored, in one new layer. Prints the new snapshot's id.\n"
		"\n"
		"  --parent REF  the snapshot this image was derived from\n"
		"  --tag NAME    tag the new snapshot\n"
		"  --force       move NAME if it already names another snapshot\n");
}

static int debug_ingest(struct cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "parent", required_argument, NULL, 'p' }, { "tag", required_argument, NULL, 't' },
		{ "force", no_argument, NULL, 'f' }, { "help", no_argument, NULL, 'h' }, { 0 } };
	struct st_manifest *parent = NULL, *m = NULL;
	struct st_ingest_stats st;
	struct open_store o;
	const char *pref = NULL, *tag = NULL;
	char hex[ST_ID_HEX_LEN + 1], sz[32];
	unsigned flags = 0;
	st_id id;
	int c, rc, status = CLI_FAIL;

	while ((c = getopt_long(argc, argv, "p:t:fh", opts, NULL)) != -1) {
		switch (c) {
		case 'p': pref = optarg; break;
		case 't': tag = optarg; break;
		case 'f': flags |= IX_TAG_FORCE; break;
		case 'h': debug_usage(stdout); return CLI_OK;
		default: return cli_usage_hint(argv[0]);
		}
	}
	if (argc - optind != 1) {
		cli_err(cli, "debug ingest: expected one IMAGE file (see 'strata debug --help')");
		return CLI_USAGE;
	}
	const char *image = argv[optind];
	if (tag && !st_name_valid(tag))
		return cli_bad_tag_name(cli, tag);
	if ((rc = open_store(cli, true, &o)) != CLI_OK)
		return rc;
	if (pref) {
		struct ix_txn *t;
		if ((rc = ix_txn_begin(o.ix, &t)) == 0) {
			if ((rc = ix_resolve(t, pref, &id)) == 0)
				rc = ix_snap_get(t, &id, &parent);
			ix_txn_end(t);
		}
		if (rc < 0) {
			status = cli_ref_error(cli, pref, rc);
			goto out_close;
		}
	}
	rc = st_ingest_file(o.s, image, parent, &m, &st);
	if (rc < 0) {
		if (rc == -ENOENT)
			cli_err(cli, "debug ingest: image %s does not exist", image);
		else if (rc == -EINVAL)
			cli_err(cli, "debug ingest: image %s is not a whole number of 4 KiB pages (or is too large)",
				image);
		else
			cli_err(cli, "debug ingest of %s failed: %s", image, cli_store_strerror(rc));
		status = rc == -ENOENT ? CLI_NOTFOUND : CLI_FAIL;
		goto out_free;
	}
	rc = ix_snap_commit(o.ix, m, tag, flags, &id);
	if (rc == IX_EEXIST) {
		cli_err(cli, "debug ingest: tag '%s' already names another snapshot (use --force to move it)", tag);
		goto out_free;
	}
	if (rc < 0) {
		cli_err(cli, "debug ingest: cannot commit the snapshot to store %s: %s", cli->store,
			cli_store_strerror(rc));
		goto out_free;
	}
	st_id_format(&id, hex);
	cli_fmt_size(sz, sizeof(sz), st.bytes_added);
	printf("%s\n", hex);
	cli_info(cli, "%" PRIu64 " pages: %" PRIu64 " zero, %" PRIu64 " same as parent, %" PRIu64
		 " stored (%s added)", st.pages, st.pages_zero, st.pages_same, st.pages_stored, sz);
	status = CLI_OK;
out_free:
	st_manifest_free(m);
	st_manifest_free(parent);
out_close:
	close_store(&o);
	return status;
}

int cmd_debug(struct cli *cli, int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		debug_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? CLI_USAGE : CLI_OK;
	}
	if (strcmp(argv[1], "ingest") == 0)
	{
		char prog[] = "strata debug ingest";
		argv[1] = prog;
		return debug_ingest(cli, argc - 1, argv + 1);
	}
	cli_err(cli, "debug: unknown subcommand '%s' (try 'strata debug --help')", argv[1]);
	return CLI_USAGE;
}
