/* cli_api.h: what the `strata` command's subcommands share, in libc and <strata.h> terms only: the commands built on the public API (run, pool) include nothing else of strata's. */
#ifndef STRATA_MOUNT_CLI_API_H
#define STRATA_MOUNT_CLI_API_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <strata.h>

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
	int backend;        /* STRATA_BACKEND_*: --backend, $STRATA_BACKEND, else auto */
	strata_host *host;  /* what the command's sandboxes share (cli_host_open), NULL until then */
};

/* The subcommands built on <strata.h> alone (main.c's table runs them). */
int cmd_run(struct cli *cli, int argc, char **argv);          /* cmd_run.c */
int cmd_pool(struct cli *cli, int argc, char **argv);         /* cmd_pool.c */
int cmd_tag(struct cli *cli, int argc, char **argv);          /* cmd_tag.c */
int cmd_rm(struct cli *cli, int argc, char **argv);           /* cmd_tag.c */
int cmd_gc(struct cli *cli, int argc, char **argv);           /* cmd_gc.c */
int cmd_push(struct cli *cli, int argc, char **argv);         /* cmd_xfer.c */
int cmd_pull(struct cli *cli, int argc, char **argv);         /* cmd_xfer.c */
int cmd_import(struct cli *cli, int argc, char **argv);       /* cmd_import.c */
int cmd_ls(struct cli *cli, int argc, char **argv);           /* cmd_ls.c */
int cmd_export(struct cli *cli, int argc, char **argv);       /* cmd_export.c */
int cmd_verify(struct cli *cli, int argc, char **argv);       /* cmd_verify.c */
int cmd_init(struct cli *cli, int argc, char **argv);         /* cmd_init.c */
int cmd_show(struct cli *cli, int argc, char **argv);         /* cmd_show.c */
int cmd_fsck(struct cli *cli, int argc, char **argv);         /* cmd_fsck.c */

/* host.c: make cli->host once: STRATA_VM_CACHE=N idle VMs and warm
 * sandboxes (default 8), STRATA_SNAP_DEBUG=1, the reset policy file
 * (cli_policy_path). Reports errors; returns an exit status. cli_host_leave
 * ends it (main does, after the command). cli->backend is given to the
 * host by cli_sandbox_open, which reports a backend that cannot run. */
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
/* host_fns.c: register on h the host functions run and pool give every
 * sandbox: host_add i(ii), host_upper s(s), random_get b(i), clock_gettime
 * i(i). 0, or <0 with strata_errmsg. */
int cli_host_fns_register(strata_host *h);

/* The name of a backend (STRATA_BACKEND_*): "auto", "kvm", "process". */
const char *cli_backend_name(int backend);
/* Parse a backend name into *out (STRATA_BACKEND_*); -EINVAL on junk. */
int cli_backend_from_name(const char *name, int *out);
/* Parse --backend NAME into *out; reports a usage error and returns false on junk. */
bool cli_backend_parse(const struct cli *cli, const char *name, int *out);
/* A subcommand's --backend NAME: every sandbox it makes runs there (it sets
 * cli->backend: call it before cli_sandbox_open); false, reported, on junk. */
bool cli_backend_use(struct cli *cli, const char *name);

/* Report an error once, as "strata: <message>" on stderr. */
void cli_err(const struct cli *cli, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
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
/* Report name as no valid tag name, with the rule; returns CLI_USAGE. */
int cli_bad_tag_name(const struct cli *cli, const char *name);
/* v bytes in words: "512 B", "1.5 KiB", "12 MiB". */
void cli_fmt_size(char *buf, size_t len, uint64_t v);
/* Parse a size such as 4096, 64K, 8M, 1G; false on junk or overflow. */
bool cli_parse_size(const char *s, unsigned long long *out);
/* The base a number on the command line is read in: 16 after "0x" (a sign
 * may come first), else 10: a leading zero is decimal ("010" is ten), not
 * octal as strtol's base 0 would have it. */
int cli_number_base(const char *s);
/* Parse an unsigned integer (decimal or 0x hex); false on junk or overflow. */
bool cli_parse_u64(const char *s, unsigned long long *out);
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

/* guest_debug.c: where guest address addr is in the ELF at elf_path:
 * "FUNC (FILE:LINE)" into buf. 0, 1 if the ELF has no symbols or lines for
 * it, -1 if elf_path is no ELF file (a snapshot). */
int cli_guest_where(const char *elf_path, uint64_t addr, char *buf, size_t len);

/*
 * cmd_snap.c: the sandbox of what `strata run` or `strata pool` names (what:
 * "run" or "pool", the messages' prefix): a guest ELF, a snapshot directory
 * (dir_flags: STRATA_DIR_*) or a tag/id in the store (opened for writing
 * if write). It runs on cli->backend. A snapshot with lazy layers gets the
 * SIGBUS guard (cli_lazy_guard). Reports errors; returns an exit status.
 */
int cli_sandbox_open(const struct cli *cli, const char *what, const char *target, unsigned dir_flags, bool write,
		     strata_sandbox **out);
/* run --snapshot TAG: capture sb into the store under tag, continue on it;
 * prints the id. Reports; returns an exit status. */
int cli_snapshot_commit(const struct cli *cli, strata_sandbox *sb, const char *tag, bool force);
/* What --snapshot TAG needs, checked before any sandbox runs: a valid tag
 * name, a store to write, TAG naming no snapshot yet unless force (the
 * rule of tag, import and pull), and for a snapshot directory target
 * (NULL: none) its layers in the store. Reports; returns an exit status. */
int cli_snapshot_precheck(const struct cli *cli, const char *target, const char *tag, bool force);
/* Record the working set of the snapshot sb was made from (after its first
 * call) and link it to the snapshot in the store; prints what it stored. */
int cli_working_set_record(const struct cli *cli, strata_sandbox *sb);
/* STRATA_DIR_* flags from the environment: STRATA_VERIFY=1 hashes every
 * layer first; STRATA_MAP_FILES=1 maps a plain directory's files directly. */
unsigned cli_snapdir_flags(void);
/* The store a run or pool opened, closed after its sandboxes (and the
 * reasons its lazy layers' fetches failed printed once). */
void cli_snap_close(void);

/* --json output: print root (indented, keys sorted, ASCII only, as `show
 * --json`) and a newline on stdout, and drop the reference; -ENOMEM if it
 * could not be made (root NULL, a failed json_object()). jansson's. */
typedef struct json_t json_t;
int cli_json_put(json_t *root);
/* Plain words for an error while working on the store (store_open.c). */
const char *cli_store_strerror(int rc);

/* The exit status a store error deserves (CLI_NOTFOUND, CLI_USAGE for a
 * bad name or id, else CLI_FAIL), and a failed lookup of ref reported
 * naming the snapshot and the store (returns that status). */
int cli_store_exit(int rc);
int cli_ref_error(const struct cli *cli, const char *ref, int rc);

/* store_open.c: open cli->store through the API (for writing if write),
 * with the messages cli_store_open gives. Reports; returns an exit status. */
int cli_strata_store_open(const struct cli *cli, bool write, strata_store **out);
/*
 * exposed.c: list on stdout, one "exposed:" line each (the first
 * CLI_EXPOSED_SHOWN, then a count), the paths of store st other users can
 * read (strata_store_exposed with flags; STRATA_EXPOSED_FIX sets each to
 * the store's mode), and on stderr one warning naming the fix. Returns how
 * many were found, or <0 (reported) if the store could not be walked. With
 * json, each path is appended to that array as {path, directory, mode,
 * store_mode, fixed} instead (every one), and the warning still goes to
 * stderr. cli_exposed_print (a strata_exposed_fn on a struct cli_exposed)
 * and cli_exposed_done (the count line and the warning; none after a fix)
 * are its two halves, for a walk made otherwise (doctor's).
 */
#define CLI_EXPOSED_SHOWN 10
struct cli_exposed {
	const char *store; /* the store's directory, as the lines name it */
	uint64_t n;        /* paths seen so far */
	json_t *json;      /* NULL: print */
};
long long cli_strata_store_exposed(const struct cli *cli, strata_store *st, unsigned flags, json_t *json);
int cli_exposed_print(void *ctx, const struct strata_exposed *e);
void cli_exposed_done(const struct cli *cli, const struct cli_exposed *c, bool fixed, bool shared, unsigned long gid);
/* Make the directories above dir that are missing (0755), as init, pull
 * and import do for the store they are to make. 0 or -errno. */
int cli_make_parents(const char *dir);
/* The same for writing, the store made first if cli->store is absent or an
 * empty directory (as pull and import do: "strata: created store DIR"). */
int cli_strata_store_create_open(const struct cli *cli, strata_store **out);

/* cmd_oci.c: the command's registry credentials (auth files, credential
 * helpers: those push and pull use) as a strata_credentials_fn (ctx
 * unused), and its certs.d directories (NULL-ended). */
int cli_registry_creds(void *ctx, const char *host, char **user, char **pass, char *why, size_t whylen);
const char *const *cli_certs_d(void);
/* cmd_oci.c: the credentials push and pull use for the registry host:
 * --creds USER:PASSWORD (creds, else NULL), else --authfile (authfile,
 * else NULL) or $REGISTRY_AUTH_FILE alone, else the first of the auth
 * files with an entry for host. *user and *pass malloc'd (both NULL:
 * anonymous). Reports; returns an exit status. */
int cli_registry_lookup(const struct cli *cli, const char *creds, const char *authfile, const char *host, char **user,
			char **pass);

/* From now on cli_err also writes each error to f as a JSON line
 * {"schema":SCHEMA,"event":"error","message":...} (push and pull --json;
 * NULL: no more). */
void cli_err_json(FILE *f, int schema);

/* cmd_xfer.c: what the progress of a push, a pull or an export prints:
 * skopeo-like lines on stderr (one updated in place on a TTY, a line per
 * finished blob otherwise), or JSON lines on out. cli_progress_cb is a
 * strata_progress_fn (ctx: a struct cli_progress, zeroed but for its
 * first four fields); cli_progress_end prints the totals line (not with
 * json: the done event has them). */
struct cli_progress {
	bool tty, json, pull;   /* pull: manifests are read, not written */
	FILE *out;
	double t0;              /* when the transfer started */
	uint32_t blobs_done, blobs_skipped;
	uint64_t bytes_done;    /* bytes of blobs moved whole */
	/* the blob in flight (from its BEGIN) */
	char dg[STRATA_DIGEST_LEN + 1];
	int what;               /* STRATA_BLOB_* */
	uint64_t size, done, start_done;
	double begun, last_line, last_json;
};
void cli_progress_cb(void *ctx, const struct strata_xfer_event *ev);
void cli_progress_end(struct cli_progress *p);
/* The exit status a transfer's error deserves, and the error reported as
 * "WHAT: <its words>[: why]". */
int cli_xfer_exit(int rc);
void cli_xfer_report(const struct cli *cli, const char *what, int rc, const char *why);

/* lists.c: a store's tags (name and id) and snapshot ids, collected for
 * printing beside each snapshot. cli_tags_collect fills *out (zeroed
 * first by the caller) with strata_store_tags: 0 or its error;
 * cli_tags_collect_cb and cli_ids_collect_cb are the strata_tag_fn and
 * strata_snapshot_fn that append (-ENOMEM). cli_tags_of joins the tags
 * naming id with ',' (escaped; "-" if none) into buf; cli_tags_json
 * gives them as a JSON array. */
struct cli_tag {
	char *name;
	char id[STRATA_ID_LEN + 1];
};
struct cli_tags {
	struct cli_tag *v;
	size_t n, cap;
};
struct cli_ids {
	char (*v)[STRATA_ID_LEN + 1];
	size_t n, cap;
};
int cli_tags_collect(strata_store *st, struct cli_tags *out);
int cli_tags_collect_cb(void *ctx, const char *name, const char *id);
void cli_tags_free(struct cli_tags *l);
void cli_tags_of(const struct cli_tags *l, const char *id, char *buf, size_t len);
json_t *cli_tags_json(const struct cli_tags *l, const char *id);
int cli_ids_collect_cb(void *ctx, const char *id);
/* cmd_verify.c: a store check's problem in verify's and fsck's words: its
 * kind ("corrupt"), what it is about ("blob", "snapshot", "layer"), and as
 * --json gives it, appended to arr (docs/cli.md; -ENOMEM). */
const char *cli_problem_word(int kind);
const char *cli_problem_object(int kind);
int cli_problem_json(const struct strata_problem *p, json_t *arr);
/* text.c: "lazy: 37 of 1,024 chunks present". */
void cli_fmt_lazy(char *buf, size_t len, uint64_t present, uint64_t chunks);

/* cmd_run.c: parse ARGS per a guest signature ("i(is)"); `owned` collects
 * buffers read from @FILE arguments (free them); print a result. */
int cli_build_args(const struct cli *cli, const char *fn, const char *sig, char **argv, int argc,
		   struct strata_value *vals, void **owned);
/* raw: an 's' or 'b' result's bytes as they are, no newline (run --raw). */
void cli_print_result(const struct strata_result *r, bool raw);

#endif
