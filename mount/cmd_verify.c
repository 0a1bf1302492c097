/* cmd_verify.c: `strata verify`: the store's layers, single snapshots or snapshot directories re-hashed, through <strata.h>. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "cli_api.h"

const char *cli_problem_word(int kind)
{
	switch (kind) {
	case STRATA_PROBLEM_MISSING: return "missing";
	case STRATA_PROBLEM_SIZE: return "wrong size";
	case STRATA_PROBLEM_CORRUPT: return "corrupt";
	case STRATA_PROBLEM_REFCOUNT: return "refcount";
	case STRATA_PROBLEM_SNAPSHOT: return "bad snapshot";
	case STRATA_PROBLEM_TAG: return "bad tag";
	case STRATA_PROBLEM_CHILDREN: return "children";
	case STRATA_PROBLEM_ORPHAN: return "orphan";
	case STRATA_PROBLEM_WORKING_SET: return "working set";
	case STRATA_PROBLEM_LAZY: return "unchecked";
	case STRATA_PROBLEM_CHUNK: return "bad chunk";
	}
	return "problem";
}

const char *cli_problem_object(int kind)
{
	switch (kind) {
	case STRATA_PROBLEM_LAZY: case STRATA_PROBLEM_CHUNK: return "layer";
	case STRATA_PROBLEM_MISSING: case STRATA_PROBLEM_SIZE: case STRATA_PROBLEM_CORRUPT:
	case STRATA_PROBLEM_REFCOUNT: case STRATA_PROBLEM_ORPHAN: return "blob";
	}
	return "snapshot";
}

int cli_problem_json(const struct strata_problem *p, json_t *arr)
{
	json_t *o = json_object();

	json_object_set_new(o, "kind", json_string(cli_problem_word(p->kind)));
	json_object_set_new(o, "object", json_string(cli_problem_object(p->kind)));
	json_object_set_new(o, "id", json_string(p->id));
	json_object_set_new(o, "error", json_boolean(p->error));
	json_object_set_new(o, "detail", json_string(p->detail));
	json_object_set_new(o, "action", p->action ? json_string(p->action) : json_null()); /* fsck --repair's */
	if (p->tag)
		json_object_set_new(o, "tag", json_string(p->tag));
	return json_array_append_new(arr, o) < 0 ? -ENOMEM : 0;
}

/* An error of the store check, printed, or appended to the JSON array ctx
 * (--json: docs/cli.md); notes are fsck's to show. */
static int store_problem(void *ctx, const struct strata_problem *p)
{
	json_t *arr = ctx;

	if (!p->error)
		return 0;
	if (arr)
		return cli_problem_json(p, arr);
	if (p->kind == STRATA_PROBLEM_CHUNK)
		printf("%s: layer %s: %s\n", cli_problem_word(p->kind), p->id, cli_esc(p->detail));
	else
		printf("%s: %s %s: %s\n", cli_problem_word(p->kind), cli_problem_object(p->kind), p->id,
		       cli_esc(p->detail));
	return 0;
}

static uint64_t figure(strata_store *st, int what)
{
	uint64_t v = 0;

	strata_store_info(st, what, &v);
	return v;
}

/* verify without arguments: every layer the store's snapshots reference. */
static int verify_store(struct cli *cli, bool json)
{
	json_t *problems = json ? json_array() : NULL;
	strata_store *st;
	char sz[32];
	int rc;

	if ((rc = cli_strata_store_open(cli, false, &st)) != CLI_OK) {
		json_decref(problems);
		return rc;
	}
	rc = strata_store_check(st, STRATA_VERIFY_HASH, store_problem, problems);
	uint64_t snapshots = figure(st, STRATA_STORE_INFO_CHECK_SNAPSHOTS), blobs = figure(st, STRATA_STORE_INFO_CHECK_BLOBS);
	uint64_t hashed = figure(st, STRATA_STORE_INFO_CHECK_BYTES_HASHED), orphans = figure(st, STRATA_STORE_INFO_CHECK_ORPHANS);
	uint64_t lazy = figure(st, STRATA_STORE_INFO_CHECK_LAZY), lazy_chunks = figure(st, STRATA_STORE_INFO_CHECK_LAZY_CHUNKS);
	uint64_t errors = figure(st, STRATA_STORE_INFO_CHECK_ERRORS);
	strata_store_close(st);
	if (rc < 0) {
		cli_err(cli, "cannot check store %s: %s", cli->store, cli_store_strerror(rc));
		json_decref(problems);
		return CLI_FAIL;
	}
	if (json) {
		json_t *root = json_pack("{sIsIsIsIsIsIsIso}", "snapshots", (json_int_t)snapshots, "blobs",
					 (json_int_t)blobs, "bytes_hashed", (json_int_t)hashed, "orphans",
					 (json_int_t)orphans, "lazy", (json_int_t)lazy, "lazy_chunks_hashed",
					 (json_int_t)lazy_chunks, "errors", (json_int_t)errors, "problems", problems);
		if (cli_json_put(root) < 0)
			return CLI_FAIL;
		if (errors)
			cli_err(cli, "store %s has %" PRIu64 " problem(s)", cli->store, errors);
		return errors ? CLI_CORRUPT : CLI_OK;
	}
	cli_fmt_size(sz, sizeof(sz), hashed);
	char lz[160] = "";
	if (lazy)
		snprintf(lz, sizeof(lz), " (%" PRIu64 " lazy, not yet checked against their ids), %" PRIu64
			 " present chunk(s) of them re-hashed against their chunk indexes", lazy, lazy_chunks);
	printf("%" PRIu64 " snapshot(s), %" PRIu64 " referenced blob(s)%s, %s hashed, %" PRIu64
	       " orphan blob(s): %" PRIu64 " problem(s)\n", snapshots, blobs, lz, sz, orphans, errors);
	if (errors) {
		cli_err(cli, "store %s has %" PRIu64 " problem(s) (listed above)", cli->store, errors);
		return CLI_CORRUPT;
	}
	return CLI_OK;
}

static void verify_usage(FILE *f)
{
	fprintf(f,
		"usage: strata [--store DIR] verify [--json] [TAG|ID|SNAPSHOT_DIR...]\n"
		"\n"
		"Without arguments: re-hash every layer blob a snapshot in the store\n"
		"references and check it is present with the right size. With arguments:\n"
		"only those snapshots' layers, or a snapshot directory (an export, a copy,\n"
		"a mount's snapshots/NAME: its manifest is parsed strictly and every layer\n"
		"file is hashed against its name). A lazy layer's present chunks are\n"
		"re-hashed against its chunk index. Names each bad blob, chunk or file;\n"
		"exit status 4 if any, 3 if a snapshot or directory does not exist.\n"
		"\n"
		"  --json  print one JSON object (docs/cli.md)\n");
}

/* One snapshot's check as it goes. */
struct vsnap {
	const char *ref;
	json_t *probs, *lazies; /* --json: the target's problems and lazy layers */
	uint64_t *bad;
	uint32_t nlazy;
};

static int layer_checked(void *ctx, const struct strata_layer_check *c)
{
	struct vsnap *v = ctx;
	char lazy[96];

	if (c->kind == STRATA_LAYER_BAD_CHUNK) {
		(*v->bad)++;
		if (v->probs)
			return json_array_append_new(v->probs, json_pack("{sssssIsIsI}", "layer", c->layer, "problem",
									 "bad chunk", "chunk", (json_int_t)c->chunk,
									 "offset", (json_int_t)c->off, "length",
									 (json_int_t)c->len)) < 0 ? -ENOMEM : 0;
		printf("%s: layer %s: chunk %" PRIu64 " (bytes %" PRIu64 "-%" PRIu64 ") does not match the layer's chunk "
		       "index from %s: corrupt ('strata fsck --repair' marks it missing, to be fetched again)\n",
		       cli_esc(v->ref), c->layer, c->chunk, c->off, c->off + c->len - 1, cli_esc(c->source));
		return 0;
	}
	if (c->kind != STRATA_LAYER_CHECKED)
		return 0;
	if (c->lazy)
		v->nlazy++;
	if (c->status < 0) {
		const char *what = c->lazy ? (c->status == -ENOENT ? "its lazy files are missing" : cli_store_strerror(c->status))
				 : c->status == -ENOENT ? "missing" : c->status == STRATA_E_LAYOUT ? "wrong size"
				 : strata_strerror(c->status);
		(*v->bad)++;
		if (v->probs)
			json_array_append_new(v->probs, json_pack("{ssss}", "layer", c->layer, "problem", what));
		else if (c->lazy)
			printf("%s: layer %s: lazy, and %s\n", cli_esc(v->ref), c->layer, what);
		else
			printf("%s: layer %s: %s\n", cli_esc(v->ref), c->layer, what);
		return 0;
	}
	if (!c->lazy)
		return 0;
	if (v->lazies) {
		json_array_append_new(v->lazies, json_pack("{sssIsIsIsIssss}", "layer", c->layer, "chunks",
							   (json_int_t)c->chunks, "present", (json_int_t)c->present,
							   "checked", (json_int_t)c->present, "bad", (json_int_t)c->bad,
							   "origin", c->origin, "chunk_index", c->chunk_index));
		return 0;
	}
	cli_fmt_lazy(lazy, sizeof(lazy), c->present, c->chunks);
	printf("%s: layer %s: %s from %s, each re-hashed against the layer's chunk index (XXH3-128%s%s)%s\n",
	       cli_esc(v->ref), c->layer, lazy, cli_esc(c->origin), c->chunk_index[0] ? ", " : "", c->chunk_index,
	       c->bad ? "" : ": all match");
	return 0;
}

/* Verify one snapshot of the store: every layer present, right size, right
 * hash; a lazy layer's present chunks re-hashed against its chunk index. */
static int verify_snapshot(struct cli *cli, strata_store *st, const char *ref, uint64_t *bad, json_t *json)
{
	struct vsnap v = { .ref = ref, .probs = json ? json_array() : NULL, .lazies = json ? json_array() : NULL,
			   .bad = bad };
	char id[STRATA_ID_LEN + 1];
	int rc;

	if ((rc = strata_store_resolve(st, ref, id)) < 0 || (rc = strata_store_verify_snapshot(st, id, layer_checked, &v)) < 0) {
		json_decref(v.probs);
		json_decref(v.lazies);
		return cli_ref_error(cli, ref, rc);
	}
	if (json)
		json_array_append_new(json, json_pack("{sssssssIsoso}", "name", ref, "kind", "snapshot", "id", id,
						      "layers", (json_int_t)rc, "lazy", v.lazies, "problems", v.probs));
	else if (v.nlazy)
		printf("%s: %u layer(s) checked, %u of them lazy\n", cli_esc(ref), (unsigned)rc, v.nlazy);
	else
		printf("%s: %u layer(s) checked\n", cli_esc(ref), (unsigned)rc);
	return CLI_OK;
}

/* Verify a snapshot directory: strict manifest, every layer file's bytes. */
static int verify_dir(struct cli *cli, const char *dir, uint64_t *bad, json_t *json)
{
	uint32_t layers = 0;
	int rc = strata_dir_verify(dir, &layers);
	const char *why = rc < 0 && strata_errdetail()[0] ? strata_errdetail() : strata_strerror(rc);

	if (rc == -ENOENT && access(dir, F_OK) != 0) {
		cli_err(cli, "verify: %s: %s", dir, strerror(ENOENT));
		return CLI_NOTFOUND;
	}
	if (json) {
		json_t *probs = json_array();
		if (rc < 0) {
			(*bad)++;
			json_array_append_new(probs, json_pack("{ss}", "problem", why));
		}
		json_array_append_new(json, json_pack("{sssssIso}", "name", dir, "kind", "directory", "layers",
						      (json_int_t)layers, "problems", probs));
	} else if (rc < 0) {
		(*bad)++;
		printf("%s: %s\n", cli_esc(dir), cli_esc(why));
	} else {
		printf("%s: manifest and %u layer(s) verified\n", cli_esc(dir), layers);
	}
	return CLI_OK;
}

int cmd_verify(struct cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' }, { "help", no_argument, NULL, 'h' }, { 0 } };
	strata_store *st = NULL;
	uint64_t bad = 0;
	bool json = false;
	int c, status = CLI_OK;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'j': json = true; break;
		case 'h': verify_usage(stdout); return CLI_OK;
		default: return cli_usage_hint(argv[0]);
		}
	}
	if (optind == argc)
		return verify_store(cli, json);
	json_t *targets = json ? json_array() : NULL;
	for (int a = optind; a < argc && status == CLI_OK; a++) {
		struct stat sb;
		if (strchr(argv[a], '/') || (stat(argv[a], &sb) == 0 && S_ISDIR(sb.st_mode))) {
			status = verify_dir(cli, argv[a], &bad, targets);
			continue;
		}
		if (!st && (status = cli_strata_store_open(cli, false, &st)) != CLI_OK)
			break;
		status = verify_snapshot(cli, st, argv[a], &bad, targets);
	}
	strata_store_close(st);
	if (status != CLI_OK) {
		json_decref(targets);
		return status;
	}
	if (json && cli_json_put(json_pack("{sIso}", "errors", (json_int_t)bad, "targets", targets)) < 0)
		return CLI_FAIL;
	if (bad) {
		cli_err(cli, "verify: %llu problem(s) found", (unsigned long long)bad);
		return CLI_CORRUPT;
	}
	return CLI_OK;
}
