/* cli.h: shared declarations of the `strata` command's subcommands. */
#ifndef STRATA_MOUNT_CLI_H
#define STRATA_MOUNT_CLI_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "vmm/vmm.h"

/* Exit statuses (docs/cli.md). */
enum {
	CLI_OK = 0,
	CLI_FAIL = 1,      /* the operation failed; the message says why */
	CLI_USAGE = 2,     /* bad command line */
	CLI_NOTFOUND = 3,  /* a named snapshot, tag, blob or file does not exist */
	CLI_CORRUPT = 4,   /* verify/fsck found corruption */
	CLI_GUEST = 5,     /* the guest faulted, aborted, timed out or was killed */
};

/* What every subcommand gets: the global options, already parsed. */
struct cli {
	const char *prog;   /* "strata" */
	const char *store;  /* --store, $STRATA_STORE or the default location */
	bool store_given;   /* the user named the store explicitly */
	int verbose;        /* -v count */
	enum vmm_backend_kind backend; /* --backend, $STRATA_BACKEND, else auto */
	struct vmm_host *host; /* what the command's sandboxes share (cli_host_open), NULL until then */
};

/* host.c: the reset policy file: $STRATA_POLICY (*named), else
 * $XDG_CONFIG_HOME/strata/policy, else ~/.config/strata/policy; -ENOENT
 * with neither HOME nor XDG_CONFIG_HOME. */
int cli_policy_path(char *buf, size_t len, bool *named);
/* The policy sandboxes use: that file if it exists (one $STRATA_POLICY
 * names must), else the defaults. <0 with why (naming file and line) if
 * it cannot be read or is malformed. */
int cli_policy_load(struct vmm_policy *p, char *why, size_t whylen);
/* Make cli->host once: STRATA_VM_CACHE=N idle VMs and warm sandboxes
 * (default 8), STRATA_SNAP_DEBUG=1, the policy, cli->backend. Reports errors; returns
 * an exit status. cli_host_leave ends it (main does, after the command). */
int cli_host_open(struct cli *cli);
void cli_host_close(struct cli *cli);
/*
 * The command is done (its store closed, its results written) and about to
 * exit: what the kernel tears down of cli->host at exit (VMs, guest memory,
 * the process backend's children, about a millisecond: docs/cli.md, "How a
 * command ends") is left to a helper process that outlives the command by
 * that long, so that the command's caller sees it end first. With
 * STRATA_EXIT_WAIT=1, under AddressSanitizer, as PID 1, or when the helper
 * cannot start: cli_host_close instead. After it the command only exits
 * (exit(): atexit handlers and stdio flushes run as ever).
 */
void cli_host_leave(struct cli *cli);

/* A subcommand: argv[0] is the subcommand's name; returns an exit status. */
struct cli_cmd {
	const char *name;
	int (*run)(struct cli *cli, int argc, char **argv);
	const char *summary;  /* one line for `strata --help` */
};

/* Parse --backend NAME into *out; reports a usage error and returns false on junk. */
bool cli_backend_parse(const struct cli *cli, const char *name, enum vmm_backend_kind *out);
/* A subcommand's --backend NAME: every sandbox it makes runs there (it sets
 * cli->backend, which cli_host_open gives the host: call it before);
 * false, reported, on junk. */
bool cli_backend_use(struct cli *cli, const char *name);

/* store_open.c: list on stdout, one "exposed:" line each (the first
 * CLI_EXPOSED_SHOWN, then a count), the paths of store s other users can
 * read (st_store_perm_check with flags; ST_PERM_CHECK_FIX sets each to the
 * store's mode), and on stderr one warning naming the fix. Returns how many
 * were found, or <0 (reported) if the store could not be walked. With
 * json, each path is appended to that array as {path, directory, mode,
 * store_mode, fixed} instead (every one), and the warning still goes to
 * stderr. */
#define CLI_EXPOSED_SHOWN 10
typedef struct json_t json_t;
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
const char *const *cli_certs_d(void);
/* An ix_lazy_opts log callback printing each line as an error (ctx: struct cli). */
void cli_lazy_log(void *ctx, const char *msg);
/* Report an error once, as "strata: <message>" on stderr. */
void cli_err(const struct cli *cli, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* From now on cli_err also writes each error to f as a JSON line
 * {"schema":SCHEMA,"event":"error","message":...} (push and pull --json;
 * NULL: no more). */
void cli_err_json(FILE *f, int schema);
/* Informational line on stderr when -v was given. */
void cli_info(const struct cli *cli, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/*
 * Text that came from a snapshot or a guest (labels, names, function names,
 * log lines, error reasons) is printed escaped, as git and ls do, so it
 * cannot forge output lines or reach the terminal as escape sequences:
 * backslash, \n, \t, \r as C escapes, other control bytes (C0, DEL, C1) and
 * bytes that are not valid UTF-8 as \xHH; printable UTF-8 stays as is.
 * cli_escape writes at most size bytes (NUL-terminated) and returns the
 * escaped length; cli_esc/cli_esc_n return a copy valid for the next
 * three calls (so one printf can take up to four), for the main thread
 * only; cli_esc_dup returns a malloc'd copy (NULL without memory).
 */
size_t cli_escape(const char *s, size_t n, char *out, size_t size);
const char *cli_esc(const char *s);
const char *cli_esc_n(const char *s, size_t n);
char *cli_esc_dup(const char *s, size_t n);
/* vfprintf(f, fmt, ap) with the whole formatted text escaped. */
void cli_vputs_escaped(FILE *f, const char *fmt, va_list ap);
/* After getopt said what is wrong with an option ("strata CMD: ...", its
 * argv[0] being "strata CMD"): the one-line hint "see 'strata CMD --help'"
 * on stderr, not the whole usage. Returns CLI_USAGE. */
int cli_usage_hint(const char *prog);
/* True if argv has -h or --help before any "--". */
bool cli_wants_help(int argc, char **argv);
/* --json output: print root (indented, keys sorted, ASCII only, as `show
 * --json`) and a newline on stdout, and drop the reference; -ENOMEM if it
 * could not be made (root NULL, a failed json_object()). */
int cli_json_put(json_t *root);
/* Parse a size such as 4096, 64K, 8M, 1G; false on junk or overflow. */
bool cli_parse_size(const char *s, unsigned long long *out);
/* The base a number on the command line is read in: 16 after "0x" (a sign
 * may come first), else 10: a leading zero is decimal ("010" is ten), not
 * octal as strtol's base 0 would have it. */
int cli_number_base(const char *s);
/* Parse an unsigned integer (decimal or 0x hex); false on junk or overflow. */
bool cli_parse_u64(const char *s, unsigned long long *out);
/* Remove path and everything below it (symbolic links are removed, not
 * followed); 0 or -errno of the first failure. */
int cli_rm_tree(const char *path);

/* Subcommands (main.c's table runs them), one file per group. */
int cmd_bench(struct cli *cli, int argc, char **argv);        /* cmd_bench.c: runs strata-bench */
int cmd_run(struct cli *cli, int argc, char **argv);          /* cmd_run.c */
int cmd_pool(struct cli *cli, int argc, char **argv);         /* cmd_pool.c */
int cmd_wasm(struct cli *cli, int argc, char **argv);         /* cmd_wasm.c: wasm build */
int cmd_calibrate(struct cli *cli, int argc, char **argv);    /* cmd_calibrate.c */
int cmd_doctor(struct cli *cli, int argc, char **argv);       /* cmd_doctor.c */
int cmd_init(struct cli *cli, int argc, char **argv);         /* cmd_store.c */
int cmd_ls(struct cli *cli, int argc, char **argv);           /* cmd_store.c */
int cmd_show(struct cli *cli, int argc, char **argv);         /* cmd_store.c */
int cmd_tag(struct cli *cli, int argc, char **argv);          /* cmd_store.c */
int cmd_rm(struct cli *cli, int argc, char **argv);           /* cmd_store.c */
int cmd_gc(struct cli *cli, int argc, char **argv);           /* cmd_store.c */
int cmd_verify(struct cli *cli, int argc, char **argv);       /* cmd_store.c */
int cmd_fsck(struct cli *cli, int argc, char **argv);         /* cmd_store.c */
int cmd_export(struct cli *cli, int argc, char **argv);       /* cmd_store.c */
int cmd_import(struct cli *cli, int argc, char **argv);       /* cmd_store.c */
int cmd_debug(struct cli *cli, int argc, char **argv);        /* cmd_store.c */
int cmd_mount(struct cli *cli, int argc, char **argv);        /* cmd_mount.c */
int cmd_push(struct cli *cli, int argc, char **argv);         /* cmd_oci.c */
int cmd_pull(struct cli *cli, int argc, char **argv);         /* cmd_oci.c */
int cmd_umount(struct cli *cli, int argc, char **argv);       /* cmd_mount.c */
/* guest_debug.c: where guest address addr is in the ELF at elf_path:
 * "FUNC (FILE:LINE)" into buf. 0, 1 if the ELF has no symbols or lines for
 * it, -1 if elf_path is no ELF file (a snapshot). */
int cli_guest_where(const char *elf_path, uint64_t addr, char *buf, size_t len);
/* cmd_snap.c: the sandbox of what `strata run` (cmd_run.c) names, a guest
 * ELF, a snapshot directory or a tag/id in the store (reports errors;
 * returns an exit status), and its --snapshot TAG (capture, commit,
 * continue on it). snapdir_flags: more vmm_snapdir_open flags for a
 * directory target (VMM_SNAPDIR_VIA_FUSE). */
struct vmm_config;
struct vmm_sandbox;
struct vmm_error;
int cli_sandbox_open(const struct cli *cli, const char *target, const struct vmm_config *cfg, unsigned snapdir_flags,
		     struct vmm_sandbox **out, struct vmm_error *err);
int cli_snapshot_commit(const struct cli *cli, struct vmm_sandbox *sb, const char *tag, bool force);
/* What --snapshot TAG needs, checked before any sandbox runs: a valid tag
 * name, a store to write, TAG naming no snapshot yet unless force (the
 * rule of tag, import and pull), and for a snapshot directory target
 * (NULL: none) its layers in the store. Reports; returns an exit status. */
int cli_snapshot_precheck(const struct cli *cli, const char *target, const char *tag, bool force);
/* Record the working set of the snapshot sb was made from (after its first
 * call) and link it to the snapshot in the store; prints what it stored. */
int cli_working_set_record(const struct cli *cli, struct vmm_sandbox *sb);
/* A snapshot named by a directory path or a tag/id in the store (opened
 * for writing if `write`): its manifest and how to open its layers. Reports
 * errors as "WHAT: ..." and returns an exit status. Release when done (the
 * sandboxes made from it keep their own mappings). */
struct st_manifest;
struct vmm_snapdir;
struct cli_snapshot {
	struct vmm_snapdir *dir;
	struct st_manifest *m;
	const struct st_manifest *manifest;
	vmm_layer_open_fn open;
	void *ctx;
};
int cli_snapshot_find(const struct cli *cli, const char *what, const char *target, unsigned flags, bool write,
		      struct cli_snapshot *out);
void cli_snapshot_release(struct cli_snapshot *s);
/* Turn a SIGBUS from a host access to a lazy layer's page that could not
 * be fetched into a message and the guest-error exit status (docs/lazy.md). */
void cli_lazy_guard(void);
/* vmm_snapdir_open flags from the environment: STRATA_VERIFY=1 hashes every
 * layer first; STRATA_MAP_FILES=1 maps a plain directory's files directly. */
unsigned cli_snapdir_flags(void);
void cli_snap_close(void);
/* cmd_run.c: parse ARGS per a guest signature ("i(is)"); `owned` collects
 * buffers read from @FILE arguments (free them); print a result. */
struct vmm_value;
struct vmm_result;
struct vmm_signature;
struct vmm_sandbox;
int cli_build_args(const struct cli *cli, const char *fn, const struct vmm_signature *sig, char **argv, int argc,
		   struct vmm_value *vals, void **owned);
/* The type of the guest's function fn (NULL: none by that name). */
const struct vmm_signature *cli_function_find(const struct vmm_sandbox *sb, const char *fn);

/* Register the host functions run and pool give every sandbox (host_fns.c):
 * host_add i(ii), host_upper s(s), random_get b(i), clock_gettime i(i).
 * Returns 0 or <0 with err filled. */
int cli_host_fns_register(struct vmm_sandbox *sb, struct vmm_error *err);

/*
 * getopt_long (shortopts starting with '+') for a command whose operands
 * may come anywhere: options anywhere, `--` ends them, an argument starting
 * with '-' goes after `--` unless it is a negative number or text whose
 * name (up to an '=') holds a space, tab or newline. Each non-option is
 * appended to pos[*npos] in order (pos may be argv + 1: the slots getopt
 * has passed). Returns the next option, or -1 when argv is used up.
 */
struct option;
int cli_getopt_operands(int argc, char **argv, const char *shortopts, const struct option *opts, char **pos,
			int *npos);
/* sig as the guest SDK writes it, "r(aa..)" with letters v i b s, in buf
 * (CLI_SIG_LEN bytes hold any). */
#define CLI_SIG_LEN 16
void cli_sig_format(const struct vmm_signature *sig, char *buf, size_t len);
/* raw: an 's' or 'b' result's bytes as they are, no newline (run --raw). */
void cli_print_result(const struct vmm_result *r, bool raw);
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
/* Plain words for an error while working on the store (store_open.c). */
const char *cli_store_strerror(int rc);
/* cmd_oci.c: `export --oci DIR [REF...]` (argv[0] = DIR) and import of an OCI layout. */
int cli_oci_export(struct cli *cli, int argc, char **argv, bool whole_configs);
int cli_oci_import(struct cli *cli, const char *dir, const char *tag, unsigned flags);

#endif
