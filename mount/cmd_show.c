/* cmd_show.c: `strata show`: one snapshot described, as text or JSON, through <strata.h>. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_api.h"

#define PAGE 4096u /* the unit of a layer's and a record's pages */

static void show_usage(FILE *f)
{
	fprintf(f,
		"usage: strata [--store DIR] show TAG|ID [--json]\n"
		"\n"
		"Describe a snapshot: id, tags, parent, memory, layers, ranges, labels.\n"
		"\n"
		"  --json  print one JSON object: id, tags, children, stored_bytes,\n"
		"          unique_bytes and the whole manifest under \"manifest\"\n");
}

static void fmt_time(char *buf, size_t len, int64_t ns)
{
	time_t t = (time_t)(ns / 1000000000);
	struct tm tm;

	if (ns <= 0 || !gmtime_r(&t, &tm) || strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		snprintf(buf, len, "-");
}

/* What show says of a snapshot, read through the API. */
struct snap {
	strata_store *st;
	char id[STRATA_ID_LEN + 1];
	struct cli_tags tags;
	struct cli_ids kids;
	uint64_t memory, stored, unique, created, layers, has_parent, abi, ranges, present;
	/* the working-set record: rc 0 (the figures), STRATA_E_NOT_FOUND (none), else why not */
	int ws_rc;
	char ws_record[STRATA_ID_LEN + 1], ws_why[512];
	uint64_t ws_pages, ws_runs, ws_layers;
	/* the lazy layers, summed as listed */
	uint64_t lazy_layers, lazy_chunks, lazy_present;
	char lazy_origin[STRATA_ORIGIN_LEN + 1];
	json_t *lazy_json; /* --json: their objects */
};

static int snap_read(strata_store *st, const char *id, struct snap *s)
{
	static const int what[] = { STRATA_SNAPSHOT_MEMORY, STRATA_SNAPSHOT_STORED, STRATA_SNAPSHOT_UNIQUE,
				    STRATA_SNAPSHOT_CREATED, STRATA_SNAPSHOT_LAYERS, STRATA_SNAPSHOT_HAS_PARENT,
				    STRATA_SNAPSHOT_ABI, STRATA_SNAPSHOT_RANGES, STRATA_SNAPSHOT_PAGES_PRESENT };
	uint64_t *to[] = { &s->memory, &s->stored, &s->unique, &s->created, &s->layers, &s->has_parent,
			   &s->abi, &s->ranges, &s->present };
	int rc;

	s->st = st;
	snprintf(s->id, sizeof(s->id), "%s", id);
	s->ws_rc = strata_store_working_set(st, id, s->ws_record);
	if (s->ws_rc < 0 && s->ws_rc != STRATA_E_NOT_FOUND)
		snprintf(s->ws_why, sizeof(s->ws_why), "%s",
			 strata_errdetail()[0] ? strata_errdetail() : strata_strerror(s->ws_rc));
	if (s->ws_rc == 0 && ((rc = strata_store_snapshot_info(st, id, STRATA_SNAPSHOT_WS_PAGES, &s->ws_pages)) < 0 ||
			      (rc = strata_store_snapshot_info(st, id, STRATA_SNAPSHOT_WS_RUNS, &s->ws_runs)) < 0 ||
			      (rc = strata_store_snapshot_info(st, id, STRATA_SNAPSHOT_WS_LAYERS, &s->ws_layers)) < 0))
		return rc;
	if ((rc = cli_tags_collect(st, &s->tags)) < 0)
		return rc;
	if ((rc = strata_store_children(st, id, cli_ids_collect_cb, &s->kids)) < 0)
		return rc;
	for (size_t i = 0; i < sizeof(what) / sizeof(what[0]); i++)
		if ((rc = strata_store_snapshot_info(st, id, what[i], to[i])) < 0)
			return rc;
	return 0;
}

static void snap_free(struct snap *s)
{
	cli_tags_free(&s->tags);
	free(s->kids.v);
	json_decref(s->lazy_json);
}

static void lazy_add(struct snap *s, const struct strata_layer *l)
{
	if (!s->lazy_layers++)
		snprintf(s->lazy_origin, sizeof(s->lazy_origin), "%s", l->origin);
	s->lazy_chunks += l->chunks;
	s->lazy_present += l->present;
}

static int layer_text(void *ctx, const struct strata_layer *l)
{
	char a[32], lazy[96];

	cli_fmt_size(a, sizeof(a), l->pages * PAGE);
	if (l->lazy) {
		lazy_add(ctx, l);
		cli_fmt_lazy(lazy, sizeof(lazy), l->present, l->chunks);
		printf("  %s %10" PRIu64 " pages %10s  %s\n", l->id, l->pages, a, lazy);
	} else {
		printf("  %s %10" PRIu64 " pages %10s\n", l->id, l->pages, a);
	}
	return 0;
}

static int label_text(void *ctx, const char *key, const char *value)
{
	(void)ctx;
	printf("label     %s=%s\n", cli_esc(key), cli_esc(value));
	return 0;
}

static void ws_text(const struct snap *s)
{
	char a[32], b[32], c[32];
	double bytes = (double)(s->ws_pages * PAGE);

	if (s->ws_rc == STRATA_E_NOT_FOUND) {
		printf("working set  none (strata run SNAPSHOT --call FN --record-working-set records one)\n");
		return;
	}
	if (s->ws_rc < 0) {
		printf("working set  unreadable: %s\n", s->ws_why);
		return;
	}
	cli_fmt_size(a, sizeof(a), s->ws_pages * PAGE);
	cli_fmt_size(b, sizeof(b), s->stored);
	cli_fmt_size(c, sizeof(c), s->memory);
	printf("working set  %s (%" PRIu64 " pages, %.1f%% of the %s stored, %.1f%% of %s memory) in %" PRIu64
	       " runs over %" PRIu32 " layer(s), record %s\n",
	       a, s->ws_pages, s->stored ? 100.0 * bytes / (double)s->stored : 0.0, b,
	       s->memory ? 100.0 * bytes / (double)s->memory : 0.0, c, s->ws_runs, (uint32_t)s->ws_layers,
	       s->ws_record);
}

static int show_text(struct snap *s)
{
	char buf[1024], a[32], b[32], lazy[96];
	int rc;

	printf("snapshot  %s\n", s->id);
	cli_tags_of(&s->tags, s->id, buf, sizeof(buf));
	printf("tags      %s\n", buf);
	if (s->has_parent) {
		char parent[STRATA_ID_LEN + 1], got[STRATA_ID_LEN + 1];
		if ((rc = strata_store_parent(s->st, s->id, parent)) < 0)
			return rc;
		bool here = strata_store_resolve(s->st, parent, got) == 0 && strcmp(got, parent) == 0;
		cli_tags_of(&s->tags, parent, buf, sizeof(buf));
		printf("parent    %s (%s%s)\n", parent, here ? "" : "not in store, ", buf);
	} else {
		printf("parent    -\n");
	}
	printf("children  %zu\n", s->kids.n);
	cli_fmt_size(a, sizeof(a), s->memory);
	printf("memory    %s (%" PRIu64 " bytes)\n", a, s->memory);
	fmt_time(buf, sizeof(buf), (int64_t)s->created);
	printf("created   %s\n", buf);
	printf("abi       %" PRIu32 "\n", (uint32_t)s->abi);
	cli_fmt_size(a, sizeof(a), s->stored);
	cli_fmt_size(b, sizeof(b), s->unique);
	printf("layers    %" PRIu32 " (%s, %s unique to this snapshot)\n", (uint32_t)s->layers, a, b);
	if ((rc = strata_store_layers(s->st, s->id, layer_text, s)) < 0)
		return rc;
	if (s->lazy_layers) {
		cli_fmt_lazy(lazy, sizeof(lazy), s->lazy_present, s->lazy_chunks);
		printf("lazy      %" PRIu32 " layer(s) from %s, %s (the rest fetched on demand; 'strata pull' "
		       "without --lazy fetches it all)\n", (uint32_t)s->lazy_layers, cli_esc(s->lazy_origin),
		       lazy + strlen("lazy: "));
	}
	printf("ranges    %" PRIu64 " (%" PRIu64 " of %" PRIu64 " pages present, the rest read as zero)\n", s->ranges,
	       s->present, s->memory / PAGE);
	ws_text(s);
	rc = strata_store_labels(s->st, s->id, label_text, NULL);
	return rc < 0 ? rc : 0;
}

static int layer_json(void *ctx, const struct strata_layer *l)
{
	struct snap *s = ctx;

	if (!l->lazy)
		return 0;
	lazy_add(s, l);
	return json_array_append_new(s->lazy_json, json_pack("{sssIsIsIss}", "id", l->id, "chunks", (json_int_t)l->chunks,
							     "present", (json_int_t)l->present, "chunk_size",
							     (json_int_t)l->chunk_size, "origin", l->origin)) < 0
		       ? -ENOMEM : 0;
}

static json_t *ws_json(const struct snap *s)
{
	if (s->ws_rc == STRATA_E_NOT_FOUND)
		return json_null();
	if (s->ws_rc < 0)
		return json_pack("{ss}", "error", s->ws_why);
	double bytes = (double)(s->ws_pages * PAGE);
	return json_pack("{sssIsIsIsIsf}", "record", s->ws_record, "pages", (json_int_t)s->ws_pages, "bytes",
			 (json_int_t)(s->ws_pages * PAGE), "runs", (json_int_t)s->ws_runs, "layers",
			 (json_int_t)s->ws_layers, "of_stored", s->stored ? bytes / (double)s->stored : 0.0);
}

static int show_json(struct snap *s)
{
	uint64_t len = 0;
	json_error_t jerr;
	json_t *root, *man, *karr;
	char *raw;
	int rc;

	if ((rc = strata_store_snapshot_info(s->st, s->id, STRATA_SNAPSHOT_MANIFEST_BYTES, &len)) < 0)
		return rc;
	if (!(raw = malloc(len + 1)))
		return -ENOMEM;
	if ((rc = strata_store_manifest(s->st, s->id, raw, len + 1)) < 0) {
		free(raw);
		return rc;
	}
	man = json_loadb(raw, (size_t)rc, 0, &jerr);
	free(raw);
	if (!man)
		return STRATA_E_INDEX_CORRUPT;
	if (!(s->lazy_json = json_array()) || (rc = strata_store_layers(s->st, s->id, layer_json, s)) < 0) {
		json_decref(man);
		return rc < 0 ? rc : -ENOMEM;
	}
	karr = json_array();
	for (size_t i = 0; i < s->kids.n; i++)
		json_array_append_new(karr, json_string(s->kids.v[i]));
	root = json_object();
	json_object_set_new(root, "id", json_string(s->id));
	json_object_set_new(root, "tags", cli_tags_json(&s->tags, s->id));
	json_object_set_new(root, "children", karr);
	json_object_set_new(root, "stored_bytes", json_integer((json_int_t)s->stored));
	json_object_set_new(root, "unique_bytes", json_integer((json_int_t)s->unique));
	json_object_set_new(root, "manifest", man);
	json_object_set_new(root, "working_set", ws_json(s));
	json_t *lazy = json_null();
	if (json_array_size(s->lazy_json)) {
		json_decref(lazy);
		lazy = json_pack("{sIsIsO}", "chunks", (json_int_t)s->lazy_chunks, "present", (json_int_t)s->lazy_present,
				 "layers", s->lazy_json);
	}
	json_object_set_new(root, "lazy", lazy);
	return cli_json_put(root);
}

int cmd_show(struct cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' }, { "help", no_argument, NULL, 'h' }, { 0 } };
	struct snap s = { 0 };
	strata_store *st;
	char id[STRATA_ID_LEN + 1];
	bool json = false;
	int c, rc;

	while ((c = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
		switch (c) {
		case 'j': json = true; break;
		case 'h': show_usage(stdout); return CLI_OK;
		default: return cli_usage_hint(argv[0]);
		}
	}
	if (argc - optind != 1) {
		cli_err(cli, "show: expected one TAG or ID (see 'strata show --help')");
		return CLI_USAGE;
	}
	const char *ref = argv[optind];
	if ((rc = cli_strata_store_open(cli, false, &st)) != CLI_OK)
		return rc;
	if ((rc = strata_store_resolve(st, ref, id)) < 0) {
		strata_store_close(st);
		return cli_ref_error(cli, ref, rc);
	}
	if ((rc = snap_read(st, id, &s)) == 0)
		rc = json ? show_json(&s) : show_text(&s);
	snap_free(&s);
	strata_store_close(st);
	if (rc < 0) {
		cli_err(cli, "cannot show snapshot '%s' in store %s: %s", ref, cli->store, cli_store_strerror(rc));
		return CLI_FAIL;
	}
	return CLI_OK;
}
