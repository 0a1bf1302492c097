/* cmd_export.c: `strata export`: a snapshot as a snapshot directory or snapshots as an OCI image layout, lazy layers completed first, through <strata.h>. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli_api.h"

static void export_usage(FILE *f)
{
	fprintf(f,
		"usage: strata [--store DIR] export TAG|ID DIR\n"
		"       strata [--store DIR] export --oci [--whole-configs] DIR [TAG|ID...]\n"
		"\n"
		"Write the snapshot as a snapshot directory DIR (DIR/manifest.json and\n"
		"DIR/layers/<id>). DIR must not exist; it appears complete or not at all.\n"
		"With --oci, write an OCI image layout holding each snapshot named (every\n"
		"tagged one if none is) and its ancestors, one artifact per snapshot, tags\n"
		"as ref names (docs/oci.md); 'strata import DIR' reads it back. A snapshot\n"
		"stored as a delta of its parent is written as that delta, unless\n"
		"--whole-configs: then every config is a full manifest, so a copy of one\n"
		"tag alone (as skopeo makes) is still complete.\n");
}

/* A lazy layer's line (a refused chunk, a failed fetch) as an error line. */
static void lazy_warning(void *ctx, const char *line)
{
	cli_err(ctx, "%s", line);
}

/*
 * Before exporting snapshot ref: fetch what its lazy layers lack from the
 * registries they came from and keep them as ordinary blobs (the store is
 * reopened for writing, *st then being that). CLI_OK with nothing lazy
 * left; else reported, saying to pull it first.
 */
static int export_lazy(struct cli *cli, strata_store **st, const char *ref)
{
	uint64_t layers = 0, chunks = 0, present = 0;
	char id[STRATA_ID_LEN + 1], origin[STRATA_ORIGIN_LEN + 1] = "", lazy[96];
	strata_registry *reg;
	int rc;

	if ((rc = strata_store_resolve(*st, ref, id)) < 0 ||
	    (rc = strata_store_snapshot_info(*st, id, STRATA_SNAPSHOT_LAZY_LAYERS, &layers)) < 0)
		return cli_ref_error(cli, ref, rc);
	if (!layers)
		return CLI_OK;
	strata_store_snapshot_info(*st, id, STRATA_SNAPSHOT_LAZY_CHUNKS, &chunks);
	strata_store_snapshot_info(*st, id, STRATA_SNAPSHOT_LAZY_PRESENT, &present);
	strata_store_lazy_origin(*st, id, origin, sizeof(origin));
	cli_fmt_lazy(lazy, sizeof(lazy), present, chunks);
	fprintf(stderr, "strata: export: '%s' is %s; fetching the rest from %s\n", cli_esc(ref), lazy, cli_esc(origin));
	strata_store_close(*st);
	*st = NULL;
	if ((rc = cli_strata_store_open(cli, true, st)) != CLI_OK)
		return rc;
	if (strata_registry_new(&reg) < 0) {
		cli_err(cli, "export: %s", strata_errmsg());
		return CLI_FAIL;
	}
	strata_registry_set_credentials_fn(reg, cli_registry_creds, NULL);
	strata_registry_set_warning_fn(reg, lazy_warning, cli);
	if ((rc = strata_registry_set_certs_dirs(reg, cli_certs_d())) == 0)
		rc = strata_store_complete(*st, reg, id);
	strata_registry_free(reg);
	if (rc < 0) {
		const char *why = strata_errdetail();
		cli_err(cli, "export: '%s' is lazy and its missing chunks could not be fetched: %s; pull it first "
			"('strata pull' without --lazy, from %s)", ref, why[0] ? why : strata_strerror(rc), origin);
		return CLI_FAIL;
	}
	return CLI_OK;
}

/* export --oci DIR [REF...] (argv[0] = DIR). */
static int export_oci(struct cli *cli, int argc, char **argv, bool whole)
{
	struct cli_progress p = { .tty = isatty(2), .out = stdout };
	struct cli_tags tags = { 0 };
	strata_registry *reg = NULL;
	strata_store *st;
	uint64_t snapshots = 0, blobs = 0, bytes = 0, sha = 0;
	int rc;

	if (argc < 1) {
		cli_err(cli, "export --oci: expected DIR [TAG|ID...] (see 'strata export --help')");
		return CLI_USAGE;
	}
	/* Writable (if the store is) for the sha256 table. */
	if ((rc = cli_strata_store_open(cli, true, &st)) != CLI_OK)
		return rc;
	/* The snapshots named, else every tagged one (what the layout holds),
	 * their lazy layers completed first. */
	if (argc == 1 && (rc = cli_tags_collect(st, &tags)) < 0) {
		cli_err(cli, "cannot list the tags of store %s: %s", cli->store, cli_store_strerror(rc));
		rc = CLI_FAIL;
	}
	for (int i = 1; i < argc && rc == CLI_OK; i++)
		rc = export_lazy(cli, &st, argv[i]);
	for (size_t i = 0; i < tags.n && rc == CLI_OK; i++)
		rc = export_lazy(cli, &st, tags.v[i].name);
	cli_tags_free(&tags);
	if (rc != CLI_OK)
		goto out_close;
	if (strata_registry_new(&reg) < 0) {
		cli_err(cli, "export: %s", strata_errmsg());
		rc = CLI_FAIL;
		goto out_close;
	}
	strata_registry_set_progress(reg, cli_progress_cb, &p);
	strata_registry_set_whole_configs(reg, whole);
	rc = strata_store_export_oci(st, reg, argv[0], (const char *const *)argv + 1, (size_t)argc - 1);
	strata_registry_free(reg);
	strata_store_info(st, STRATA_STORE_INFO_XFER_SNAPSHOTS, &snapshots);
	strata_store_info(st, STRATA_STORE_INFO_XFER_BLOBS_MOVED, &blobs);
	strata_store_info(st, STRATA_STORE_INFO_XFER_BYTES_MOVED, &bytes);
	strata_store_info(st, STRATA_STORE_INFO_XFER_BYTES_SHA256, &sha);
	if (rc == -EEXIST) {
		cli_err(cli, "export: %s already exists (export writes a new directory)", argv[0]);
		rc = CLI_FAIL;
	} else if (rc == STRATA_E_NOT_FOUND || rc == STRATA_E_BAD_NAME) {
		cli_err(cli, "export: a snapshot named on the command line is not in store %s", cli->store);
		rc = cli_xfer_exit(rc);
	} else if (rc < 0) {
		char what[300];
		snprintf(what, sizeof(what), "export of an OCI layout to %s failed", argv[0]);
		cli_xfer_report(cli, what, rc, strata_errdetail());
		rc = cli_xfer_exit(rc);
	} else {
		cli_info(cli, "%" PRIu64 " snapshot(s), %" PRIu64 " blob(s) written (%" PRIu64 " bytes), sha256 computed "
			      "over %" PRIu64 " bytes", snapshots, blobs, bytes, sha);
		rc = CLI_OK;
	}
out_close:
	strata_store_close(st);
	return rc;
}

int cmd_export(struct cli *cli, int argc, char **argv)
{
	static const struct option opts[] = { { "help", no_argument, NULL, 'h' }, { "oci", no_argument, NULL, 'o' },
					       { "whole-configs", no_argument, NULL, 'w' }, { 0 } };
	strata_store *st;
	bool oci = false, whole = false;
	int c, rc;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'h': export_usage(stdout); return CLI_OK;
		case 'o': oci = true; break;
		case 'w': whole = true; break;
		default: return cli_usage_hint(argv[0]);
		}
	}
	if (oci)
		return export_oci(cli, argc - optind, argv + optind, whole);
	if (whole) {
		cli_err(cli, "export: --whole-configs is an option of export --oci (a snapshot directory is always whole)");
		return CLI_USAGE;
	}
	if (argc - optind != 2) {
		cli_err(cli, "export: expected TAG|ID and DIR (see 'strata export --help')");
		return CLI_USAGE;
	}
	const char *ref = argv[optind], *dir = argv[optind + 1];
	if ((rc = cli_strata_store_open(cli, false, &st)) != CLI_OK)
		return rc;
	if ((rc = export_lazy(cli, &st, ref)) != CLI_OK) {
		strata_store_close(st);
		return rc;
	}
	rc = strata_store_export(st, ref, dir);
	strata_store_close(st);
	if (rc == STRATA_E_NOT_FOUND || rc == STRATA_E_BAD_NAME || rc == STRATA_E_AMBIGUOUS)
		return cli_ref_error(cli, ref, rc);
	if (rc == -EEXIST) {
		cli_err(cli, "export: %s already exists (export writes a new directory)", dir);
		return CLI_FAIL;
	}
	if (rc == -ENOENT) {
		cli_err(cli, "export: %s: the parent directory does not exist, or a layer blob is missing from "
			"the store (run 'strata verify')", dir);
		return CLI_FAIL;
	}
	if (rc < 0) {
		cli_err(cli, "export of '%s' to %s failed: %s", ref, dir, cli_store_strerror(rc));
		return CLI_FAIL;
	}
	return CLI_OK;
}
