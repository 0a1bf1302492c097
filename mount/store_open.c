/* store_open.c: the one way a command opens the store and its index, with the messages a person can act on. */
#include <errno.h>

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

