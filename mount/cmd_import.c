/* cmd_import.c: `strata import`: a snapshot directory or an OCI image layout into the store, through <strata.h>. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>

#include "cli_api.h"

static void import_usage(FILE *f)
{
	fprintf(f,
		"usage: strata [--store DIR] import DIR [--tag NAME] [--force]\n"
		"\n"
		"Import a snapshot directory (DIR/manifest.json and DIR/layers/<id>). The\n"
		"manifest is validated and every layer re-hashed against its name; layers\n"
		"already in the store are not stored twice. The snapshot appears whole or\n"
		"not at all. Importing a snapshot already in the store checks DIR and\n"
		"stores only the layers missing from the store (healing it, after\n"
		"'strata fsck --repair'); otherwise changes nothing. Prints its id.\n"
		"\n"
		"  --tag NAME  tag the snapshot\n"
		"  --force     move NAME if it already names another snapshot\n");
}

/* One of the last import's figures (STRATA_STORE_INFO_IMPORT_*). */
static uint64_t figure(strata_store *st, int what)
{
	uint64_t v = 0;

	strata_store_info(st, what, &v);
	return v;
}

int cmd_import(struct cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "tag", required_argument, NULL, 't' }, { "force", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' }, { 0 } };
	strata_store *st;
	const char *tag = NULL;
	char id[STRATA_ID_LEN + 1], sz[32];
	unsigned flags = 0;
	int c, rc;

	while ((c = getopt_long(argc, argv, "t:fh", opts, NULL)) != -1) {
		switch (c) {
		case 't': tag = optarg; break;
		case 'f': flags |= STRATA_TAG_FORCE; break;
		case 'h': import_usage(stdout); return CLI_OK;
		default: return cli_usage_hint(argv[0]);
		}
	}
	if (argc - optind != 1) {
		cli_err(cli, "import: expected one snapshot directory (see 'strata import --help')");
		return CLI_USAGE;
	}
	const char *dir = argv[optind];
	if (tag && !strata_tag_valid(tag))
		return cli_bad_tag_name(cli, tag);
	if ((rc = cli_strata_store_create_open(cli, &st)) != CLI_OK)
		return rc;
	rc = strata_store_import(st, dir, tag, flags, id);
	bool oci = figure(st, STRATA_STORE_INFO_IMPORT_OCI);
	uint64_t snapshots = figure(st, STRATA_STORE_INFO_IMPORT_SNAPSHOTS);
	uint64_t layers = figure(st, STRATA_STORE_INFO_IMPORT_LAYERS);
	uint64_t added = figure(st, STRATA_STORE_INFO_IMPORT_BLOBS_ADDED);
	uint64_t present = figure(st, STRATA_STORE_INFO_IMPORT_BLOBS_PRESENT);
	uint64_t bytes = figure(st, STRATA_STORE_INFO_IMPORT_BYTES_ADDED);
	uint64_t healed = figure(st, STRATA_STORE_INFO_IMPORT_LAYERS_HEALED);
	bool existed = figure(st, STRATA_STORE_INFO_IMPORT_EXISTED);
	strata_store_close(st);
	if (rc < 0) {
		const char *why = strata_errdetail();
		if (rc == STRATA_E_EXISTS && oci) {
			cli_err(cli, "import: the tag already names another snapshot (use --force to move it)");
		} else if (rc == STRATA_E_EXISTS) {
			cli_err(cli, "import: tag '%s' already names another snapshot (use --force to move it)", tag);
		} else if (oci) {
			char what[300];
			snprintf(what, sizeof(what), "import of OCI layout %s rejected", dir);
			cli_xfer_report(cli, what, rc, why);
		} else if (why[0]) {
			cli_err(cli, "import of %s rejected: %s: %s", dir, cli_store_strerror(rc), why);
		} else {
			cli_err(cli, "import of %s failed: %s", dir, cli_store_strerror(rc));
		}
		return rc == -ENOENT && !why[0] ? CLI_NOTFOUND : CLI_FAIL;
	}
	printf("%s\n", id);
	if (oci) {
		cli_info(cli, "%" PRIu64 " snapshot(s) imported, %" PRIu64 " blob(s) stored (%" PRIu64 " bytes), %" PRIu64
			      " already present",
			 snapshots, added, bytes, present);
		return CLI_OK;
	}
	cli_fmt_size(sz, sizeof(sz), bytes);
	if (healed)
		fprintf(stderr, "healed %" PRIu64 " layer(s) of snapshot %s that were missing from the store (%s stored)\n",
			healed, id, sz);
	cli_info(cli, "%s: %" PRIu64 " layer(s), %" PRIu64 " new, %s added", existed ? "already present" : "imported",
		 layers, added, sz);
	return CLI_OK;
}
