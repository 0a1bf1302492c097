/* exposed.c: the store's paths other users can read, listed and warned about in <strata.h> terms (fsck's, and doctor's through store_open.c). */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli_api.h"

int cli_exposed_print(void *ctx, const struct strata_exposed *e)
{
	struct cli_exposed *c = ctx;
	char mode[8], want[8];

	if (c->json) { /* every one, not the first CLI_EXPOSED_SHOWN */
		c->n++;
		snprintf(mode, sizeof(mode), "%04o", (unsigned)e->mode);
		snprintf(want, sizeof(want), "%04o", (unsigned)e->want);
		return json_array_append_new(c->json, json_pack("{sssbsssssb}", "path", e->path, "directory", e->dir,
								 "mode", mode, "store_mode", want, "fixed",
								 e->fixed)) < 0 ? -ENOMEM : 0;
	}
	if (c->n++ < CLI_EXPOSED_SHOWN)
		printf("exposed: %s%s%s: %s mode %04o lets other users read it%s%04o\n", cli_esc(c->store),
		       strcmp(e->path, ".") ? "/" : "", strcmp(e->path, ".") ? cli_esc(e->path) : "",
		       e->dir ? "directory" : "file", (unsigned)e->mode,
		       e->fixed ? " -> mode set to " : "; the store's mode is ", (unsigned)e->want);
	return 0;
}

void cli_exposed_done(const struct cli *cli, const struct cli_exposed *c, bool fixed, bool shared, unsigned long gid)
{
	uint64_t n = c->n;

	if (n > CLI_EXPOSED_SHOWN && !c->json)
		printf("exposed: ... and %" PRIu64 " more\n", n - CLI_EXPOSED_SHOWN);
	if (!n || fixed)
		return;
	if (shared)
		cli_err(cli, "warning: %" PRIu64 " path(s) of shared store %s can be read by users outside its group "
			"(gid %lu) or written by the group; fix: chown -R :%lu %s && chmod -R o-rwx,g-w %s "
			"(or 'strata fsck --repair'; docs/security.md)", n, cli->store, gid, gid, cli->store, cli->store);
	else
		cli_err(cli, "warning: %" PRIu64 " path(s) of store %s can be read by other users (a snapshot layer "
			"is a sandbox's memory); fix: chmod -R go-rwx %s (or 'strata fsck --repair'); to share it "
			"with a group, make a new store with 'strata init --shared GROUP' (docs/security.md)", n,
			cli->store, cli->store);
}

long long cli_strata_store_exposed(const struct cli *cli, strata_store *st, unsigned flags, json_t *json)
{
	struct cli_exposed c = { .store = strata_store_path(st), .json = json };
	uint64_t shared = 0, gid = 0;
	int rc = strata_store_exposed(st, flags, cli_exposed_print, &c);

	if (rc < 0) {
		cli_err(cli, "cannot check who can read store %s: %s", cli->store, cli_store_strerror(rc));
		return rc;
	}
	strata_store_info(st, STRATA_STORE_INFO_SHARED, &shared);
	strata_store_info(st, STRATA_STORE_INFO_GROUP, &gid);
	cli_exposed_done(cli, &c, flags & STRATA_EXPOSED_FIX, shared, (unsigned long)gid);
	return (long long)c.n;
}
