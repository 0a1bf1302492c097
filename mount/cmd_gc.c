/* cmd_gc.c: `strata gc`: remove what no snapshot uses from the store, through <strata.h>. */
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "cli_api.h"

/* Unreferenced blobs younger than this survive `strata gc` (an import may be
 * staging them); one hour is far longer than any import takes. */
#define GC_GRACE_DEFAULT 3600

static void gc_usage(FILE *f)
{
	fprintf(f,
		"usage: strata [--store DIR] gc [--grace SECONDS] [--json]\n"
		"\n"
		"Remove layer blobs no snapshot references and staging files left by\n"
		"crashed imports. Files younger than the grace period are kept, so imports\n"
		"running now are safe. Says how many blobs were removed, how many are kept\n"
		"because snapshots use them, and how many unreferenced ones are kept for\n"
		"their age.\n"
		"\n"
		"  --grace SECONDS  keep unreferenced files younger than this (default %d)\n"
		"  --json           print one JSON object (docs/cli.md)\n",
		GC_GRACE_DEFAULT);
}

int cmd_gc(struct cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "grace", required_argument, NULL, 'g' }, { "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' }, { 0 } };
	unsigned long long grace = GC_GRACE_DEFAULT;
	bool json = false;
	struct { uint64_t blobs_removed, bytes_removed, tmp_removed, lazy_removed, blobs_in_use, blobs_young; } st;
	strata_store *o;
	char sz[32];
	int c, rc;

	while ((c = getopt_long(argc, argv, "g:h", opts, NULL)) != -1) {
		switch (c) {
		case 'g':
			if (!cli_parse_u64(optarg, &grace) || grace > UINT32_MAX) {
				cli_err(cli, "gc: --grace takes a number of seconds, not '%s'", optarg);
				return CLI_USAGE;
			}
			break;
		case 'j': json = true; break;
		case 'h': gc_usage(stdout); return CLI_OK;
		default: return cli_usage_hint(argv[0]);
		}
	}
	if (optind != argc) {
		cli_err(cli, "gc: unexpected argument '%s'", argv[optind]);
		return CLI_USAGE;
	}
	if ((rc = cli_strata_store_open(cli, true, &o)) != CLI_OK)
		return rc;
	rc = strata_store_gc(o, (unsigned)grace, NULL);
	strata_store_info(o, STRATA_STORE_INFO_GC_BLOBS_REMOVED, &st.blobs_removed);
	strata_store_info(o, STRATA_STORE_INFO_GC_BYTES_REMOVED, &st.bytes_removed);
	strata_store_info(o, STRATA_STORE_INFO_GC_STAGING_REMOVED, &st.tmp_removed);
	strata_store_info(o, STRATA_STORE_INFO_GC_LAZY_REMOVED, &st.lazy_removed);
	strata_store_info(o, STRATA_STORE_INFO_GC_BLOBS_IN_USE, &st.blobs_in_use);
	strata_store_info(o, STRATA_STORE_INFO_GC_BLOBS_YOUNG, &st.blobs_young);
	strata_store_close(o);
	if (rc < 0) {
		cli_err(cli, "gc of store %s failed: %s", cli->store, cli_store_strerror(rc));
		return CLI_FAIL;
	}
	if (json) {
		json_t *jo = json_pack("{sIsIsIsIsIsIsI}", "blobs_removed", (json_int_t)st.blobs_removed,
				      "bytes_removed", (json_int_t)st.bytes_removed, "staging_removed",
				      (json_int_t)st.tmp_removed, "lazy_removed", (json_int_t)st.lazy_removed,
				      "blobs_in_use", (json_int_t)st.blobs_in_use, "blobs_young",
				      (json_int_t)st.blobs_young, "grace_seconds", (json_int_t)grace);
		return cli_json_put(jo) < 0 ? CLI_FAIL : CLI_OK;
	}
	cli_fmt_size(sz, sizeof(sz), st.bytes_removed);
	printf("removed %" PRIu64 " blob(s) (%s) and %" PRIu64 " staging file(s); kept %" PRIu64
	       " blob(s) snapshots use and %" PRIu64 " unreferenced blob(s) younger than %llus\n",
	       st.blobs_removed, sz, st.tmp_removed, st.blobs_in_use, st.blobs_young, grace);
	return CLI_OK;
}

