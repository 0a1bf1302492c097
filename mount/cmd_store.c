/* cmd_store.c: the store subcommands still built on the modules: fsck, debug. */
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

static json_t *id_json(const st_id *id)
{
	char hex[ST_ID_HEX_LEN + 1];

	st_id_format(id, hex);
	return json_string(hex);
}

/* ------------------------------------------------------------------ tags and ids */

/* The index's tags into lists.c's list (ids in hex). */
static int collect_tag(const char *name, const st_id *id, void *arg)
{
	char hex[ST_ID_HEX_LEN + 1];

	st_id_format(id, hex);
	return cli_tags_collect_cb(arg, name, hex);
}

/* Tags naming id, joined with ','; "-" if none. */
static void tags_of(const struct cli_tags *l, const st_id *id, char *buf, size_t len)
{
	char hex[ST_ID_HEX_LEN + 1];

	st_id_format(id, hex);
	cli_tags_of(l, hex, buf, len);
}

static json_t *tags_json(const struct cli_tags *l, const st_id *id)
{
	char hex[ST_ID_HEX_LEN + 1];

	st_id_format(id, hex);
	return cli_tags_json(l, hex);
}

/* ------------------------------------------------------------------ fsck */

static const char *problem_word(enum ix_problem_kind k)
{
	switch (k) {
	case IX_PROBLEM_MISSING: return "missing";
	case IX_PROBLEM_SIZE: return "wrong size";
	case IX_PROBLEM_CORRUPT: return "corrupt";
	case IX_PROBLEM_REFCOUNT: return "refcount";
	case IX_PROBLEM_SNAPSHOT: return "bad snapshot";
	case IX_PROBLEM_TAG: return "bad tag";
	case IX_PROBLEM_CHILDREN: return "children";
	case IX_PROBLEM_ORPHAN: return "orphan";
	case IX_PROBLEM_WORKINGSET: return "working set";
	case IX_PROBLEM_LAZY: return "unchecked";
	case IX_PROBLEM_CHUNK: return "bad chunk";
	}
	return "problem";
}

struct check_ctx {
	struct cli *cli;
	json_t *problems; /* --json: each problem is appended here, nothing printed */
};

static bool problem_is_blob(enum ix_problem_kind k)
{
	return k == IX_PROBLEM_MISSING || k == IX_PROBLEM_SIZE || k == IX_PROBLEM_CORRUPT ||
	       k == IX_PROBLEM_REFCOUNT || k == IX_PROBLEM_ORPHAN;
}

/* A problem as --json gives it (docs/cli.md). */
static int json_problem(const struct ix_problem *p, json_t *arr)
{
	json_t *o = json_object();

	json_object_set_new(o, "kind", json_string(problem_word(p->kind)));
	bool layer = p->kind == IX_PROBLEM_LAZY || p->kind == IX_PROBLEM_CHUNK;

	json_object_set_new(o, "object", json_string(layer ? "layer" :
						     problem_is_blob(p->kind) ? "blob" : "snapshot"));
	json_object_set_new(o, "id", id_json(&p->id));
	json_object_set_new(o, "error", json_boolean(p->error));
	json_object_set_new(o, "detail", json_string(p->detail ? p->detail : ""));
	json_object_set_new(o, "action", p->action ? json_string(p->action) : json_null());
	if (p->tag)
		json_object_set_new(o, "tag", json_string(p->tag));
	return json_array_append_new(arr, o) < 0 ? -ENOMEM : 0;
}

static int print_problem(const struct ix_problem *p, void *arg)
{
	struct check_ctx *c = arg;
	char hex[ST_ID_HEX_LEN + 1];
	bool blob = problem_is_blob(p->kind);

	if (c->problems)
		return json_problem(p, c->problems);
	st_id_format(&p->id, hex);
	if (p->kind == IX_PROBLEM_LAZY) /* always shown: what fsck could not check */
		printf("%s: layer %s: %s\n", problem_word(p->kind), hex, cli_esc(p->detail));
	else if (p->kind == IX_PROBLEM_CHUNK)
		printf("%s: layer %s: %s%s%s\n", problem_word(p->kind), hex, cli_esc(p->detail),
		       p->action ? " -> " : "", p->action ? cli_esc(p->action) : "");
	else if (p->error)
		printf("%s: %s %s: %s%s%s\n", problem_word(p->kind), blob ? "blob" : "snapshot", hex,
		       cli_esc(p->detail), p->action ? " -> " : "", p->action ? cli_esc(p->action) : "");
	else if (c->cli->verbose)
		printf("note: %s blob %s: %s\n", problem_word(p->kind), hex, cli_esc(p->detail));
	return 0;
}

struct lacking_ctx {
	struct cli_tags tags;
	uint64_t n;
	json_t *json;
};

static int print_lacking(const st_id *id, uint32_t missing, uint32_t nlayers, void *arg)
{
	struct lacking_ctx *l = arg;
	char hex[ST_ID_HEX_LEN + 1], tags[512];

	if (l->json) {
		json_t *o = json_object(), *tarr = tags_json(&l->tags, id);
		json_object_set_new(o, "id", id_json(id));
		json_object_set_new(o, "tags", tarr);
		json_object_set_new(o, "missing_layers", json_integer(missing));
		json_object_set_new(o, "layers", json_integer(nlayers));
		l->n++;
		return json_array_append_new(l->json, o) < 0 ? -ENOMEM : 0;
	}
	st_id_format(id, hex);
	tags_of(&l->tags, id, tags, sizeof(tags));
	printf("lacking: snapshot %s (tags: %s) lacks %" PRIu32 " of %" PRIu32 " layer(s)\n", hex, tags, missing,
	       nlayers);
	l->n++;
	return 0;
}

/* After a repair: the snapshots still lacking layers, and how to heal them. */
static int report_lacking(struct cli *cli, struct open_store *o, json_t *json)
{
	struct lacking_ctx l = { .json = json };
	struct ix_txn *t;
	int rc = ix_txn_begin(o->ix, &t);

	if (rc == 0) {
		rc = ix_tag_foreach(t, collect_tag, &l.tags);
		ix_txn_end(t);
	}
	if (rc == 0)
		rc = ix_snap_lacking_foreach(o->ix, print_lacking, &l);
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

/* fsck's and verify's counts, for --json (docs/cli.md). */
static json_t *fsck_json(const struct ix_fsck_stats *st, json_t *problems)
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
	struct ix_fsck_stats st;
	struct open_store o;
	int rc;

	if ((rc = open_store(cli, true, &o)) != CLI_OK)
		goto out_free;
	rc = ix_fsck(o.ix, flags | IX_FSCK_REPAIR, print_problem, &cc, &st);
	if (rc >= 0 && cli_store_exposed(cli, o.s, ST_PERM_CHECK_FIX, exposed) < 0) {
		close_store(&o);
		rc = CLI_FAIL;
		goto out_free;
	}
	if (rc < 0) {
		close_store(&o);
		cli_err(cli, "repair of store %s stopped: %s (what was done is safe; run it again)", cli->store,
			cli_store_strerror(rc));
		rc = CLI_FAIL;
		goto out_free;
	}
	if (!json)
		printf("%" PRIu64 " snapshot(s), %" PRIu64 " referenced blob(s): %" PRIu64 " problem(s) found, %" PRIu64
		       " repaired, %" PRIu64 " left\n", st.snapshots, st.blobs, st.errors, st.repaired, st.remaining);
	rc = report_lacking(cli, &o, lacking);
	close_store(&o);
	if (rc != CLI_OK)
		goto out_free;
	if (json) {
		json_t *root = fsck_json(&st, problems);
		problems = NULL;
		json_object_set_new(root, "repaired", json_integer((json_int_t)st.repaired));
		json_object_set_new(root, "remaining", json_integer((json_int_t)st.remaining));
		json_object_set_new(root, "exposed", exposed);
		json_object_set_new(root, "lacking", lacking);
		exposed = lacking = NULL;
		if (cli_json_put(root) < 0)
			return CLI_FAIL;
	}
	if (st.remaining) {
		cli_err(cli, "store %s still has %" PRIu64 " problem(s) after repair", cli->store, st.remaining);
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
	struct ix_fsck_stats st;
	struct open_store o;
	char sz[32];
	int rc;

	if ((rc = open_store(cli, false, &o)) != CLI_OK) {
		json_decref(problems);
		json_decref(exposed);
		return rc;
	}
	rc = ix_fsck(o.ix, flags, print_problem, &cc, &st);
	/* Who can read it: a warning, not a problem (the store is consistent;
	 * it is exposed). fsck --repair sets the modes. */
	bool failed = rc >= 0 && cli_store_exposed(cli, o.s, 0, exposed) < 0;
	close_store(&o);
	if (failed || rc < 0) {
		if (rc < 0)
			cli_err(cli, "cannot check store %s: %s", cli->store, cli_store_strerror(rc));
		json_decref(problems);
		json_decref(exposed);
		return CLI_FAIL;
	}
	if (json) {
		json_t *root = fsck_json(&st, problems);
		if (exposed)
			json_object_set_new(root, "exposed", exposed);
		if (cli_json_put(root) < 0)
			return CLI_FAIL;
		if (st.errors)
			cli_err(cli, "store %s has %" PRIu64 " problem(s)", cli->store, st.errors);
		return st.errors ? CLI_CORRUPT : CLI_OK;
	}
	cli_fmt_size(sz, sizeof(sz), st.bytes_hashed);
	char lazy[160] = "";
	if (st.lazy && (flags & IX_FSCK_HASH))
		snprintf(lazy, sizeof(lazy), " (%" PRIu64 " lazy, not yet checked against their ids), %" PRIu64
			 " present chunk(s) of them re-hashed against their chunk indexes", st.lazy, st.lazy_chunks);
	else if (st.lazy)
		snprintf(lazy, sizeof(lazy), " (%" PRIu64 " lazy, not yet checked against their ids)", st.lazy);
	printf("%" PRIu64 " snapshot(s), %" PRIu64 " referenced blob(s)%s, %s hashed, %" PRIu64
	       " orphan blob(s): %" PRIu64 " problem(s)\n",
	       st.snapshots, st.blobs, lazy, sz, st.orphans, st.errors);
	if (st.errors) {
		cli_err(cli, "store %s has %" PRIu64 " problem(s) (listed above)", cli->store, st.errors);
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
	unsigned flags = IX_FSCK_HASH;
	bool repair = false, json = false;
	int c;

	while ((c = getopt_long(argc, argv, "qrh", opts, NULL)) != -1) {
		switch (c) {
		case 'q': flags &= ~(unsigned)IX_FSCK_HASH; break;
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
