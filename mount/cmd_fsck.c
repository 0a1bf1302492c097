/* cmd_fsck.c: `strata fsck`: the store checked whole, and repaired, through <strata.h>. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cli_api.h"

struct check_ctx {
	struct cli *cli;
	json_t *problems; /* --json: each problem is appended here, nothing printed */
};

static int print_problem(void *arg, const struct strata_problem *p)
{
	struct check_ctx *c = arg;

	if (c->problems)
		return cli_problem_json(p, c->problems);
	if (p->kind == STRATA_PROBLEM_LAZY) /* always shown: what fsck could not check */
		printf("%s: layer %s: %s\n", cli_problem_word(p->kind), p->id, cli_esc(p->detail));
	else if (p->kind == STRATA_PROBLEM_CHUNK)
		printf("%s: layer %s: %s%s%s\n", cli_problem_word(p->kind), p->id, cli_esc(p->detail),
		       p->action ? " -> " : "", p->action ? cli_esc(p->action) : "");
	else if (p->error)
		printf("%s: %s %s: %s%s%s\n", cli_problem_word(p->kind), cli_problem_object(p->kind), p->id,
		       cli_esc(p->detail), p->action ? " -> " : "", p->action ? cli_esc(p->action) : "");
	else if (c->cli->verbose)
		printf("note: %s blob %s: %s\n", cli_problem_word(p->kind), p->id, cli_esc(p->detail));
	return 0;
}

struct lacking_ctx {
	struct cli_tags tags;
	uint64_t n;
	json_t *json;
};

static int print_lacking(void *arg, const char *id, uint32_t missing, uint32_t nlayers)
{
	struct lacking_ctx *l = arg;
	char tags[512];

	if (l->json) {
		json_t *o = json_object();
		json_object_set_new(o, "id", json_string(id));
		json_object_set_new(o, "tags", cli_tags_json(&l->tags, id));
		json_object_set_new(o, "missing_layers", json_integer(missing));
		json_object_set_new(o, "layers", json_integer(nlayers));
		l->n++;
		return json_array_append_new(l->json, o) < 0 ? -ENOMEM : 0;
	}
	cli_tags_of(&l->tags, id, tags, sizeof(tags));
	printf("lacking: snapshot %s (tags: %s) lacks %" PRIu32 " of %" PRIu32 " layer(s)\n", id, tags, missing,
	       nlayers);
	l->n++;
	return 0;
}

/* After a repair: the snapshots still lacking layers, and how to heal them. */
static int report_lacking(struct cli *cli, strata_store *st, json_t *json)
{
	struct lacking_ctx l = { .json = json };
	int rc = cli_tags_collect(st, &l.tags);

	if (rc == 0)
		rc = strata_store_lacking(st, print_lacking, &l);
	cli_tags_free(&l.tags);
	if (rc < 0) {
		cli_err(cli, "cannot list the snapshots lacking layers: %s", cli_store_strerror(rc));
		return CLI_FAIL;
	}
	if (l.n && !json)
		printf("%" PRIu64 " snapshot(s) lack layers; to heal one, import a copy that holds those layers\n"
		       "(an earlier 'strata export' of it, or a 'cp -r' of a mount's snapshots/NAME):\n"
		       "  strata --store %s import DIR\n", l.n, cli->store);
	return CLI_OK;
}

/* The last check's figures (strata_store_info's STRATA_STORE_INFO_CHECK_*). */
struct fsck_stats {
	uint64_t snapshots, blobs, bytes_hashed, orphans, lazy, lazy_chunks, errors, repaired, remaining;
};

static void fsck_stats(strata_store *st, struct fsck_stats *s)
{
	static const int what[] = { STRATA_STORE_INFO_CHECK_SNAPSHOTS, STRATA_STORE_INFO_CHECK_BLOBS,
				    STRATA_STORE_INFO_CHECK_BYTES_HASHED, STRATA_STORE_INFO_CHECK_ORPHANS,
				    STRATA_STORE_INFO_CHECK_LAZY, STRATA_STORE_INFO_CHECK_LAZY_CHUNKS,
				    STRATA_STORE_INFO_CHECK_ERRORS, STRATA_STORE_INFO_CHECK_REPAIRED,
				    STRATA_STORE_INFO_CHECK_REMAINING };
	uint64_t *v[] = { &s->snapshots, &s->blobs, &s->bytes_hashed, &s->orphans, &s->lazy,
			  &s->lazy_chunks, &s->errors, &s->repaired, &s->remaining };

	for (size_t i = 0; i < sizeof(what) / sizeof(what[0]); i++) {
		*v[i] = 0;
		strata_store_info(st, what[i], v[i]);
	}
}

/* fsck's counts, for --json (docs/cli.md). */
static json_t *fsck_json(const struct fsck_stats *st, json_t *problems)
{
	return json_pack("{sIsIsIsIsIsIsIso}", "snapshots", (json_int_t)st->snapshots, "blobs",
			 (json_int_t)st->blobs, "bytes_hashed", (json_int_t)st->bytes_hashed, "orphans",
			 (json_int_t)st->orphans, "lazy", (json_int_t)st->lazy, "lazy_chunks_hashed",
			 (json_int_t)st->lazy_chunks, "errors", (json_int_t)st->errors, "problems", problems);
}

static int run_repair(struct cli *cli, unsigned flags, bool json)
{
	json_t *problems = json ? json_array() : NULL, *exposed = json ? json_array() : NULL;
	json_t *lacking = json ? json_array() : NULL;
	struct check_ctx cc = { .cli = cli, .problems = problems };
	struct fsck_stats fs;
	strata_store *st;
	int rc;

	if ((rc = cli_strata_store_open(cli, true, &st)) != CLI_OK)
		goto out_free;
	rc = strata_store_check(st, flags | STRATA_CHECK_REPAIR, print_problem, &cc);
	fsck_stats(st, &fs);
	if (rc >= 0 && cli_strata_store_exposed(cli, st, STRATA_EXPOSED_FIX, exposed) < 0) {
		strata_store_close(st);
		rc = CLI_FAIL;
		goto out_free;
	}
	if (rc < 0) {
		strata_store_close(st);
		cli_err(cli, "repair of store %s stopped: %s (what was done is safe; run it again)", cli->store,
			cli_store_strerror(rc));
		rc = CLI_FAIL;
		goto out_free;
	}
	if (!json)
		printf("%" PRIu64 " snapshot(s), %" PRIu64 " referenced blob(s): %" PRIu64 " problem(s) found, %" PRIu64
		       " repaired, %" PRIu64 " left\n", fs.snapshots, fs.blobs, fs.errors, fs.repaired, fs.remaining);
	rc = report_lacking(cli, st, lacking);
	strata_store_close(st);
	if (rc != CLI_OK)
		goto out_free;
	if (json) {
		json_t *root = fsck_json(&fs, problems);
		problems = NULL;
		json_object_set_new(root, "repaired", json_integer((json_int_t)fs.repaired));
		json_object_set_new(root, "remaining", json_integer((json_int_t)fs.remaining));
		json_object_set_new(root, "exposed", exposed);
		json_object_set_new(root, "lacking", lacking);
		exposed = lacking = NULL;
		if (cli_json_put(root) < 0)
			return CLI_FAIL;
	}
	if (fs.remaining) {
		cli_err(cli, "store %s still has %" PRIu64 " problem(s) after repair", cli->store, fs.remaining);
		return CLI_CORRUPT;
	}
	return CLI_OK;
out_free:
	json_decref(problems);
	json_decref(exposed);
	json_decref(lacking);
	return rc;
}

static int run_check(struct cli *cli, unsigned flags, bool json)
{
	json_t *problems = json ? json_array() : NULL, *exposed = json ? json_array() : NULL;
	struct check_ctx cc = { .cli = cli, .problems = problems };
	struct fsck_stats fs;
	strata_store *st;
	char sz[32];
	int rc;

	if ((rc = cli_strata_store_open(cli, false, &st)) != CLI_OK) {
		json_decref(problems);
		json_decref(exposed);
		return rc;
	}
	rc = strata_store_check(st, flags, print_problem, &cc);
	fsck_stats(st, &fs);
	/* Who can read it: a warning, not a problem (the store is consistent;
	 * it is exposed). fsck --repair sets the modes. */
	bool failed = rc >= 0 && cli_strata_store_exposed(cli, st, 0, exposed) < 0;
	strata_store_close(st);
	if (failed || rc < 0) {
		if (rc < 0)
			cli_err(cli, "cannot check store %s: %s", cli->store, cli_store_strerror(rc));
		json_decref(problems);
		json_decref(exposed);
		return CLI_FAIL;
	}
	if (json) {
		json_t *root = fsck_json(&fs, problems);
		if (exposed)
			json_object_set_new(root, "exposed", exposed);
		if (cli_json_put(root) < 0)
			return CLI_FAIL;
		if (fs.errors)
			cli_err(cli, "store %s has %" PRIu64 " problem(s)", cli->store, fs.errors);
		return fs.errors ? CLI_CORRUPT : CLI_OK;
	}
	cli_fmt_size(sz, sizeof(sz), fs.bytes_hashed);
	char lazy[160] = "";
	if (fs.lazy && (flags & STRATA_VERIFY_HASH))
		snprintf(lazy, sizeof(lazy), " (%" PRIu64 " lazy, not yet checked against their ids), %" PRIu64
			 " present chunk(s) of them re-hashed against their chunk indexes", fs.lazy, fs.lazy_chunks);
	else if (fs.lazy)
		snprintf(lazy, sizeof(lazy), " (%" PRIu64 " lazy, not yet checked against their ids)", fs.lazy);
	printf("%" PRIu64 " snapshot(s), %" PRIu64 " referenced blob(s)%s, %s hashed, %" PRIu64
	       " orphan blob(s): %" PRIu64 " problem(s)\n",
	       fs.snapshots, fs.blobs, lazy, sz, fs.orphans, fs.errors);
	if (fs.errors) {
		cli_err(cli, "store %s has %" PRIu64 " problem(s) (listed above)", cli->store, fs.errors);
		return CLI_CORRUPT;
	}
	return CLI_OK;
}

static void fsck_usage(FILE *f)
{
	fprintf(f,
		"usage: strata [--store DIR] fsck [--quick] [--repair] [--json]\n"
		"\n"
		"Check the index against the blob files: snapshot records, missing and\n"
		"corrupt blobs, refcounts, parent/children lists, tags. Orphan blobs (no\n"
		"snapshot uses them; 'strata gc' frees them) are noted with -v, not errors.\n"
		"Paths other users can read (an 'exposed:' line each) are warned about.\n"
		"Exit status 4 if anything is wrong (exposed paths alone do not count).\n"
		"\n"
		"  --quick   do not re-hash blob contents\n"
		"  --repair  repair what can be repaired without losing anything: damaged\n"
		"            blob files and snapshot records are moved to STORE/lost+found,\n"
		"            a lazy layer's bad chunks are marked missing (fetched again),\n"
		"            refcounts, children lists and dangling tags are fixed, exposed\n"
		"            paths get the store's mode; then\n"
		"            lists the snapshots lacking layers ('strata import' of a copy\n"
		"            heals them). Exit 0 if the store is consistent afterwards, 4 if not.\n"
		"  --json    print one JSON object (docs/cli.md)\n");
}

int cmd_fsck(struct cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "quick", no_argument, NULL, 'q' }, { "repair", no_argument, NULL, 'r' },
		{ "json", no_argument, NULL, 'j' }, { "help", no_argument, NULL, 'h' }, { 0 } };
	unsigned flags = STRATA_VERIFY_HASH;
	bool repair = false, json = false;
	int c;

	while ((c = getopt_long(argc, argv, "qrh", opts, NULL)) != -1) {
		switch (c) {
		case 'q': flags &= ~(unsigned)STRATA_VERIFY_HASH; break;
		case 'r': repair = true; break;
		case 'j': json = true; break;
		case 'h': fsck_usage(stdout); return CLI_OK;
		default: return cli_usage_hint(argv[0]);
		}
	}
	if (optind != argc) {
		cli_err(cli, "fsck: unexpected argument '%s'", argv[optind]);
		return CLI_USAGE;
	}
	return repair ? run_repair(cli, flags, json) : run_check(cli, flags, json);
}
