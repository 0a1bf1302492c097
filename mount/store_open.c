/* store_open.c: the one way a command opens the store and its index, with the messages a person can act on. */
#include <errno.h>
#include <jansson.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "index/dist/dist.h"
#include "index/index.h"
#include "store/store.h"

/* Plain words for an error while working on the store: the few a person
 * acts on said for the store, every other code st_strerror's (it names
 * the registry's and lazy layers' codes a store command can end in too). */
const char *cli_store_strerror(int rc)
{
	switch (rc) {
	case -ENOSPC: return "no space left on the store's filesystem";
	case ST_EREADONLY: return "the store is read-only";
	case -EACCES: case -EPERM: return "permission denied";
	default: return st_strerror(rc);
	}
}

/* The exit status an error code deserves. */
int cli_store_exit(int rc)
{
	switch (rc) {
	case STRATA_E_NOT_FOUND:
	case -ENOENT:
		return CLI_NOTFOUND;
	case STRATA_E_BAD_NAME:
	case STRATA_E_BAD_ID:
		return CLI_USAGE;
	default:
		return CLI_FAIL;
	}
}

/* Report a failed lookup of ref: names the snapshot and the store. */
int cli_ref_error(const struct cli *cli, const char *ref, int rc)
{
	if (rc == STRATA_E_BAD_NAME)
		cli_err(cli, "'%s' is neither a snapshot id nor a valid tag name "
			"(tags are [A-Za-z0-9_][A-Za-z0-9._-]*, at most 128 characters)", ref);
	else if (rc == STRATA_E_NOT_FOUND)
		cli_err(cli, "snapshot '%s' not found in store %s", ref, cli->store);
	else
		cli_err(cli, "cannot look up '%s' in store %s: %s", ref, cli->store, cli_store_strerror(rc));
	return cli_store_exit(rc);
}

/* mkdir -p of dir's parents (mode 0755 less the umask; the store itself
 * is made by st_store_init, readable by its owner only). 0 or -errno. */
int cli_make_parents(const char *dir)
{
	char buf[PATH_MAX];
	size_t len = strlen(dir);

	if (len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, dir, len + 1);
	while (len > 1 && buf[len - 1] == '/')
		buf[--len] = '\0';
	char *last = strrchr(buf, '/');
	if (!last || last == buf)
		return 0;
	*last = '\0';
	for (char *p = buf + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;
		*p = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		if (!(*p = c))
			return 0;
	}
}

int cli_store_create(const struct cli *cli, const struct st_store_opts *so)
{
	int rc = cli_make_parents(cli->store);

	return rc < 0 ? rc : st_store_init(cli->store, so);
}

/* A store another user owns, said with the rule (a store is its owner's
 * unless shared) and the fix; false (nothing said) if it is the caller's. */
static bool not_owner(const struct cli *cli)
{
	struct stat sb;

	if (stat(cli->store, &sb) < 0 || sb.st_uid == geteuid())
		return false;
	cli_err(cli, "cannot open store %s: permission denied: it belongs to uid %lu (mode %04o), and a store "
		"is readable by its owner only unless made with 'strata init --shared GROUP' "
		"(docs/security.md, \"Who can read a store\")", cli->store, (unsigned long)sb.st_uid,
		(unsigned)(sb.st_mode & 07777));
	return true;
}

/* Open the store and its index; reports the error and returns an exit status. */
int cli_store_open(const struct cli *cli, bool write, struct st_store **s, struct ix **ix)
{
	return cli_store_open_flags(cli, write ? CLI_STORE_WRITE : 0, s, ix);
}

int cli_store_open_flags(const struct cli *cli, unsigned flags, struct st_store **s, struct ix **ix)
{
	bool write = flags & (CLI_STORE_WRITE | CLI_STORE_CREATE);
	struct ix_opts opts = { .flags = write ? 0 : IX_OPEN_RDONLY };
	struct st_store *st;
	int rc = st_store_open(cli->store, write ? 0 : ST_OPEN_RDONLY, &st);

	/* pull and import make the store they are to fill, as podman does:
	 * a directory that does not exist, or an empty one. */
	if ((flags & CLI_STORE_CREATE) && (rc == -ENOENT || rc == ST_ENOTSTORE)) {
		struct st_store_opts so = { 0 };
		int crc = cli_store_create(cli, &so);
		if (crc == 0) {
			fprintf(stderr, "strata: created store %s\n", cli_esc(cli->store));
			rc = st_store_open(cli->store, 0, &st);
		} else if (crc != ST_ENOTSTORE) {
			cli_err(cli, "cannot create store %s: %s", cli->store, cli_store_strerror(crc));
			return CLI_FAIL;
		}
	}
	if (rc == -ENOENT || rc == ST_ENOTSTORE) {
		cli_err(cli, "%s is not a strata store (create one with 'strata --store %s init')",
			cli->store, cli->store);
		return CLI_NOTFOUND;
	}
	if ((rc == -EACCES || rc == -EPERM) && not_owner(cli))
		return CLI_FAIL;
	if (rc < 0) {
		cli_err(cli, "cannot open store %s: %s", cli->store, st_strerror(rc));
		return CLI_FAIL;
	}
	rc = ix_open(st, &opts, ix);
	if (rc == -ENOENT) {
		cli_err(cli, "store %s has no index yet (run 'strata --store %s init')", cli->store, cli->store);
		st_store_close(st);
		return CLI_NOTFOUND;
	}
	if (rc < 0) {
		cli_err(cli, "cannot open the index of store %s: %s", cli->store, cli_store_strerror(rc));
		st_store_close(st);
		return CLI_FAIL;
	}
	*s = st;
	return CLI_OK;
}

int cli_strata_store_open(const struct cli *cli, bool write, strata_store **out)
{
	struct st_store *probe;
	int rc = strata_store_open(cli->store, write ? 0 : STRATA_STORE_RDONLY, out);

	if (rc == 0)
		return CLI_OK;
	/* Which half failed, the store or its index, for cli_store_open's
	 * words: the store opened again the same way says. */
	int src = st_store_open(cli->store, write ? 0 : ST_OPEN_RDONLY, &probe);
	if (src == 0) {
		st_store_close(probe);
		if (rc == -ENOENT) {
			cli_err(cli, "store %s has no index yet (run 'strata --store %s init')", cli->store, cli->store);
			return CLI_NOTFOUND;
		}
		cli_err(cli, "cannot open the index of store %s: %s", cli->store, cli_store_strerror(rc));
		return CLI_FAIL;
	}
	if (src == -ENOENT || src == ST_ENOTSTORE) {
		cli_err(cli, "%s is not a strata store (create one with 'strata --store %s init')", cli->store, cli->store);
		return CLI_NOTFOUND;
	}
	if ((src == -EACCES || src == -EPERM) && not_owner(cli))
		return CLI_FAIL;
	cli_err(cli, "cannot open store %s: %s", cli->store, st_strerror(src));
	return CLI_FAIL;
}

int cli_strata_store_create_open(const struct cli *cli, strata_store **out)
{
	struct st_store *probe;
	int rc = st_store_open(cli->store, ST_OPEN_RDONLY, &probe);

	if (rc == 0) {
		st_store_close(probe);
	} else if (rc == -ENOENT || rc == ST_ENOTSTORE) {
		struct st_store_opts so = { 0 };
		int crc = cli_store_create(cli, &so);
		if (crc == 0) {
			fprintf(stderr, "strata: created store %s\n", cli_esc(cli->store));
		} else if (crc != ST_ENOTSTORE) {
			cli_err(cli, "cannot create store %s: %s", cli->store, cli_store_strerror(crc));
			return CLI_FAIL;
		}
	}
	return cli_strata_store_open(cli, true, out);
}

/* A path as the API reports it, for cli_exposed_print. */
static int print_exposed(const struct st_exposed *e, void *arg)
{
	struct strata_exposed se = { .size = sizeof(se), .path = e->path, .mode = (uint32_t)e->mode,
				     .want = (uint32_t)e->want, .dir = e->dir, .fixed = e->fixed };

	return cli_exposed_print(arg, &se);
}

long long cli_store_exposed(const struct cli *cli, struct st_store *s, unsigned flags, json_t *json)
{
	struct cli_exposed c = { .store = st_store_path(s), .json = json };
	gid_t g = 0;
	bool shared = st_store_shared(s, &g);
	int rc = st_store_perm_check(s, flags, print_exposed, &c, NULL);

	if (rc < 0) {
		cli_err(cli, "cannot check who can read store %s: %s", cli->store, cli_store_strerror(rc));
		return rc;
	}
	cli_exposed_done(cli, &c, flags & ST_PERM_CHECK_FIX, shared, (unsigned long)g);
	return (long long)c.n;
}

int cli_pull_tag_check(const struct cli *cli, struct ix *ix, const char *tag, const char *origin, bool force)
{
	char have[IX_ORIGIN_MAX + 1], hex[ST_ID_HEX_LEN + 1];
	struct ix_txn *t;
	st_id id;
	int rc;

	if (!tag || force || ix_txn_begin(ix, &t) < 0)
		return CLI_OK;
	rc = ix_tag_get(t, tag, &id);
	ix_txn_end(t);
	if (rc < 0)
		return CLI_OK; /* a new tag */
	rc = ix_snap_origin(ix, &id, have, sizeof(have));
	if (rc == 0 && strcmp(have, origin) == 0)
		return CLI_OK; /* the same repository: an update, checked when its manifest is in */
	st_id_format(&id, hex);
	cli_err(cli, "pull: tag '%s' already names snapshot %s%s%s, not one from %s; nothing was fetched "
		"(use --tag NAME to keep both, or --force to move it)", tag, hex, rc == 0 ? " from " : "",
		rc == 0 ? have : " (made here)", origin);
	return CLI_FAIL;
}
