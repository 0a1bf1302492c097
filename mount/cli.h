/* cli.h: the declarations the `strata` command's subcommands on the module libraries share (cli_api.h holds those in <strata.h> terms). */
#ifndef STRATA_MOUNT_CLI_H
#define STRATA_MOUNT_CLI_H

#include "cli_api.h"
#include "vmm/vmm.h"

/* host.c: the reset policy file: $STRATA_POLICY (*named), else
 * $XDG_CONFIG_HOME/strata/policy, else ~/.config/strata/policy; -ENOENT
 * with neither HOME nor XDG_CONFIG_HOME. */
int cli_policy_path(char *buf, size_t len, bool *named);
/* The policy sandboxes use: that file if it exists (one $STRATA_POLICY
 * names must), else the defaults. <0 with why (naming file and line) if
 * it cannot be read or is malformed. */
int cli_policy_load(struct vmm_policy *p, char *why, size_t whylen);
/* A subcommand: argv[0] is the subcommand's name; returns an exit status. */
struct cli_cmd {
	const char *name;
	int (*run)(struct cli *cli, int argc, char **argv);
	const char *summary;  /* one line for `strata --help` */
};

/* store_open.c: cli_strata_store_exposed (cli_api.h) for a store opened
 * with the modules: flags are st_store_perm_check's. */
long long cli_store_exposed(const struct cli *cli, struct st_store *s, unsigned flags, json_t *json);

/* The registry credentials provider push and pull use without --creds or
 * --authfile (the auth files of cli_auth_files; index/dist/auth.c), for
 * lazy layers' chunks: static, picked on first use; NULL only when out of
 * memory (then anonymous). */
struct ix_auth;
const struct ix_auth *cli_registry_auth(void);
/* The auth files push and pull look in, in order: $REGISTRY_AUTH_FILE alone
 * (*explicit), else $XDG_RUNTIME_DIR/containers/auth.json,
 * $XDG_CONFIG_HOME/containers/auth.json (~/.config/containers/auth.json),
 * $DOCKER_CONFIG/config.json (~/.docker/config.json), those whose variables
 * are set. Returns how many. */
#define CLI_AUTH_FILES 3
#define CLI_AUTH_PATH 4096
size_t cli_auth_files(char paths[][CLI_AUTH_PATH], bool *explicit);
/* The roots of per-registry certificate directories, in the order
 * looked in: $STRATA_CERTS_D (':'-separated) if set, else
 * $XDG_CONFIG_HOME (or ~/.config)/containers/certs.d,
 * /etc/containers/certs.d, /etc/docker/certs.d. NULL-terminated, static. */
/* Remove path and everything below it (symbolic links are removed, not
 * followed); 0 or -errno of the first failure. */
int cli_rm_tree(const char *path);

/* Subcommands (main.c's table runs them), one file per group (run and pool: cli_api.h). */
int cmd_bench(struct cli *cli, int argc, char **argv);        /* cmd_bench.c: runs strata-bench */
int cmd_wasm(struct cli *cli, int argc, char **argv);         /* cmd_wasm.c: wasm build */
int cmd_calibrate(struct cli *cli, int argc, char **argv);    /* cmd_calibrate.c */
int cmd_doctor(struct cli *cli, int argc, char **argv);       /* cmd_doctor.c */
int cmd_debug(struct cli *cli, int argc, char **argv);        /* cmd_store.c */
int cmd_mount(struct cli *cli, int argc, char **argv);        /* cmd_mount.c */
int cmd_umount(struct cli *cli, int argc, char **argv);       /* cmd_mount.c */
/* store_open.c: open the store (for writing if write) and its index;
 * reports errors and returns an exit status. */
struct st_store;
struct ix;
int cli_store_open(const struct cli *cli, bool write, struct st_store **s, struct ix **ix);
/* The same with flags: CLI_STORE_WRITE, CLI_STORE_CREATE (write, and make
 * the store first if its directory is missing or empty, saying so on
 * stderr: what pull and import do). */
enum { CLI_STORE_WRITE = 1u << 0, CLI_STORE_CREATE = 1u << 1 };
int cli_store_open_flags(const struct cli *cli, unsigned flags, struct st_store **s, struct ix **ix);
/* st_store_init of cli->store after making its missing parent directories
 * (mode 0755 less the umask); 0 or its error. */
struct st_store_opts;
int cli_store_create(const struct cli *cli, const struct st_store_opts *so);
/* Before a pull into tag (NULL: none) from registry repository origin
 * ("host/repo"): if the tag names a snapshot that came from elsewhere (or
 * was made here), refuse before anything is fetched, unless force; one
 * from the same repository goes on (the pull checks the tag when it has
 * the manifest). Reports; returns an exit status. */
int cli_pull_tag_check(const struct cli *cli, struct ix *ix, const char *tag, const char *origin, bool force);

#endif
