/* store_open.c: the one way a command opens the store and its index, with the messages a person can act on. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "index/index.h"
#include "store/store.h"

/* Plain words for an error while working on the store. */
const char *cli_store_strerror(int rc)
{
	switch (rc) {
	case -ENOSPC: return "no space left on the store's filesystem";
	case ST_EREADONLY: return "the store is read-only";
	case -EACCES: case -EPERM: return "permission denied";
	default: return ix_strerror(rc);
	}
}

/* Open the store and its index; reports the error and returns an exit status. */
int cli_store_open(const struct cli *cli, bool write, struct st_store **s, struct ix **ix)
{
	struct ix_opts opts = { .flags = write ? 0 : IX_OPEN_RDONLY };
	struct st_store *st;
	int rc = st_store_open(cli->store, write ? 0 : ST_OPEN_RDONLY, &st);

	if (rc == -ENOENT || rc == ST_ENOTSTORE) {
		cli_err(cli, "%s is not a strata store (create one with 'strata --store %s init')",
			cli->store, cli->store);
		return CLI_NOTFOUND;
	}
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


struct exposed_ctx {
	const char *store;
	uint64_t n;
};

static int print_exposed(const struct st_exposed *e, void *arg)
{
	struct exposed_ctx *c = arg;

	if (c->n++ < CLI_EXPOSED_SHOWN)
		printf("exposed: %s%s%s: %s mode %04o lets other users read it%s%04o\n", cli_esc(c->store),
		       strcmp(e->path, ".") ? "/" : "", strcmp(e->path, ".") ? cli_esc(e->path) : "",
		       e->dir ? "directory" : "file", (unsigned)e->mode,
		       e->fixed ? " -> mode set to " : "; the store's mode is ", (unsigned)e->want);
	return 0;
}

long long cli_store_exposed(const struct cli *cli, struct st_store *s, unsigned flags)
{
	struct exposed_ctx c = { .store = st_store_path(s) };
	uint64_t n = 0;
	gid_t g;
	bool shared = st_store_shared(s, &g);
	int rc = st_store_perm_check(s, flags, print_exposed, &c, &n);

	if (rc < 0) {
		cli_err(cli, "cannot check who can read store %s: %s", cli->store, cli_store_strerror(rc));
		return rc;
	}
	if (n > CLI_EXPOSED_SHOWN)
		printf("exposed: ... and %" PRIu64 " more\n", n - CLI_EXPOSED_SHOWN);
	if (n && !(flags & ST_PERM_CHECK_FIX)) {
		if (shared)
			cli_err(cli, "warning: %" PRIu64 " path(s) of shared store %s can be read by users outside its group "
				"(gid %lu) or written by the group; fix: chown -R :%lu %s && chmod -R o-rwx,g-w %s "
				"(or 'strata fsck --repair'; docs/security.md)", n, cli->store, (unsigned long)g,
				(unsigned long)g, cli->store, cli->store);
		else
			cli_err(cli, "warning: %" PRIu64 " path(s) of store %s can be read by other users (a snapshot layer "
				"is a sandbox's memory); fix: chmod -R go-rwx %s (or 'strata fsck --repair'); to share it "
				"with a group, make a new store with 'strata init --shared GROUP' (docs/security.md)", n,
				cli->store, cli->store);
	}
	return (long long)n;
}
