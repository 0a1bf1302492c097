/* cmd_snap.c: `strata run` and `strata pool` with snapshots: start from a tag, id or snapshot directory; --snapshot TAG captures and commits. */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_api.h"

/* The store a run uses: opened on first need, kept for the process (the
 * sandboxes opened from it and captured into it need the handle). */
static strata_store *run_store;

static int store_need(const struct cli *cli, bool write)
{
	strata_registry *reg = NULL;
	int status;

	if (run_store)
		return CLI_OK;
	if ((status = cli_strata_store_open(cli, write, &run_store)) != CLI_OK)
		return status;
	/* Lazy layers are fetched with push's and pull's credentials and
	 * certs.d directories. */
	if (strata_registry_new(&reg) < 0 || strata_registry_set_credentials_fn(reg, cli_registry_creds, NULL) < 0 ||
	    strata_registry_set_certs_dirs(reg, cli_certs_d()) < 0 || strata_store_set_registry(run_store, reg) < 0) {
		cli_err(cli, "%s", strata_errmsg());
		strata_registry_free(reg);
		return CLI_FAIL;
	}
	strata_registry_free(reg);
	return CLI_OK;
}

/*
 * Lazy layers of a snapshot restored from the store (docs/lazy.md) have no
 * blob file to map: the store maps them from its private server, a FUSE
 * mount no path reaches whose reads fetch their chunks. It starts with the
 * first lazy layer opened, serves every sandbox of the command, and stops
 * in cli_snap_close once they are freed. Its reasons (refused chunks, a
 * registry that cannot be reached) are printed on stderr when the command
 * ends, and by the SIGBUS guard below.
 */
/* What the SIGBUS guard reads: the store whose server it asks, once opened
 * (never closed before the guard's process ends or the pointer is
 * cleared); its server is made once, before the first lazy sandbox. */
static strata_store *_Atomic guard_store;
static bool private_reported;

/* Print each reason once, as the kernel may ask for a failed page again. */
static void private_report(void)
{
	char buf[STRATA_LAZY_ERRMSG_SIZE];

	if (private_reported || !run_store || strata_store_lazy_errmsg(run_store, buf, sizeof(buf)) <= 0)
		return;
	private_reported = true;
	for (char *line = buf, *nl; *line && (nl = strchr(line, '\n')); line = nl + 1) {
		*nl = '\0';
		fprintf(stderr, "strata: %s\n", line);
	}
}

void cli_snap_close(void)
{
	/* The sandboxes are freed: nothing maps the private mount any more. */
	private_report();
	atomic_store(&guard_store, NULL);
	strata_store_close(run_store);
	run_store = NULL;
}

/*
 * The VMM writes each call's frame into guest memory from the host: when
 * that page is in a lazy layer whose chunk cannot be had (refused, or the
 * registry is unreachable after the retries), the write faults with SIGBUS
 * instead of returning an error. What the guest itself touches comes back
 * as a guest error (KVM: "Bad address"). So a run or pool of a snapshot
 * says why and exits with the guest-error status instead of dying.
 * Async-signal-safe: strata_store_lazy_errmsg, write, _exit.
 */
static void say(const char *s)
{
	size_t n = strlen(s);
	while (n) {
		ssize_t w = write(2, s, n);
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

static void on_sigbus(int sig)
{
	static char buf[STRATA_LAZY_ERRMSG_SIZE];
	strata_store *st = atomic_load(&guard_store);

	(void)sig;
	say("strata: a page of the snapshot could not be read: it is in a lazy layer whose chunk was "
	    "refused or could not be fetched (docs/lazy.md)");
	if (!st || strata_store_lazy_errmsg(st, buf, sizeof(buf)) <= 0) {
		say(st ? "; no reason was recorded\n" : "; the mount's log says which chunk and which registry\n");
		_exit(CLI_GUEST);
	}
	say(":\n");
	for (char *line = buf, *nl; *line && (nl = strchr(line, '\n')); line = nl + 1) {
		*nl = '\0';
		say("strata: ");
		say(line);
		say("\n");
	}
	_exit(CLI_GUEST);
}

/* on: install the guard (before a snapshot is opened: its restore may
 * touch a lazy page already); off: the default again (no lazy layer). */
static void lazy_guard(bool on)
{
	struct sigaction sa = { 0 };
	static bool reported_at_exit;

	if (on && run_store) {
		atomic_store(&guard_store, run_store);
		if (!reported_at_exit && atexit(private_report) == 0)
			reported_at_exit = true;
	}
	sa.sa_handler = on ? on_sigbus : SIG_DFL;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
}

/* What a target on the command line names, from its one stat(2): a
 * regular file (a guest ELF), a directory (a snapshot directory), or
 * neither (a tag or id in the store, or a path that does not exist). */
enum target_kind { TARGET_OTHER, TARGET_FILE, TARGET_DIR };

static enum target_kind target_kind(const char *target)
{
	struct stat st;

	if (stat(target, &st) < 0)
		return TARGET_OTHER;
	return S_ISREG(st.st_mode) ? TARGET_FILE : S_ISDIR(st.st_mode) ? TARGET_DIR : TARGET_OTHER;
}

unsigned cli_snapdir_flags(void)
{
	const char *v = getenv("STRATA_VERIFY"), *m = getenv("STRATA_MAP_FILES");

	return (v && strcmp(v, "1") == 0 ? STRATA_DIR_VERIFY : 0) |
	       (m && strcmp(m, "1") == 0 ? STRATA_DIR_MAP_FILES : 0);
}

/* A target with a '/' or naming an existing directory is a snapshot
 * directory; any other a tag or id in the store. */
static bool is_dir_target(const char *target, enum target_kind kind)
{
	return strchr(target, '/') || kind == TARGET_DIR;
}

/* Where a snapshot directory could not be opened (as opposed to restored). */
static bool dir_open_error(int rc)
{
	return rc == -ENOENT || rc == -ENOTDIR || rc == -EACCES || rc == -ENOTCONN || rc == STRATA_E_STALE_MOUNT ||
	       rc == STRATA_E_FORMAT || rc == STRATA_E_VERSION;
}

static int exit_for_open(int rc)
{
	return rc == -ENOENT || rc == -ENOTDIR ? CLI_NOTFOUND : CLI_FAIL;
}

int cli_sandbox_open(const struct cli *cli, const char *what, const char *target, unsigned dir_flags, bool write,
		     strata_sandbox **out)
{
	enum target_kind kind = target_kind(target);
	static bool lazy_seen;  /* a sandbox of the command has lazy layers: the guard stays */
	bool guarded = false;
	char manifest[4096];
	int rc, status;

	/* cli->backend, refused (with the CLI's hint) as the making of a
	 * sandbox would be. */
	if (cli->backend != STRATA_BACKEND_AUTO && (rc = strata_host_set_backend(cli->host, cli->backend)) < 0) {
		cli_err(cli, "%s: cannot start %s: %s (%s)", what, target, strata_errmsg(),
			cli->backend == STRATA_BACKEND_KVM ? "the process backend, --backend process, needs no KVM"
							   : "the kvm backend, --backend kvm, may");
		return CLI_FAIL;
	}
	if (kind == TARGET_FILE && strcmp(what, "run") == 0) {
		/* A guest ELF file: a fresh sandbox. */
		if ((rc = strata_sandbox_new(cli->host, target, out)) < 0) {
			cli_err(cli, "%s: cannot start %s", what, strata_errmsg());
			return rc == -ENOENT ? CLI_NOTFOUND : CLI_FAIL;
		}
	} else if (is_dir_target(target, kind)) {
		lazy_guard(guarded = true);
		/* A snapshot directory (a mount's snapshots/NAME, an export, a
		 * copy): on a strata mount its layers are mapped from their
		 * backing blobs, a lazy one read through the mount. */
		if ((rc = strata_sandbox_open_dir(cli->host, target, dir_flags, out)) < 0) {
			/* An existing directory or file that is no snapshot directory. */
			if (rc == -ENOENT && kind != TARGET_OTHER &&
			    (kind == TARGET_FILE ||
			     (snprintf(manifest, sizeof(manifest), "%s/manifest.json", target) < (int)sizeof(manifest) &&
			      access(manifest, F_OK) != 0)))
				cli_err(cli, "%s: %s is neither a guest ELF nor a snapshot directory (no manifest.json)",
					what, target);
			else if (dir_open_error(rc))
				cli_err(cli, "%s: %s", what, strata_errmsg());
			else
				cli_err(cli, "%s: cannot restore %s: %s", what, target, strata_errmsg());
			return exit_for_open(rc);
		}
	} else {
		/* A tag or id in the store. */
		if ((status = store_need(cli, write)) != CLI_OK)
			return status;
		lazy_guard(guarded = true);
		if ((rc = strata_sandbox_open_store(cli->host, run_store, target, out)) < 0) {
			if (rc == STRATA_E_NOT_FOUND || rc == STRATA_E_BAD_NAME)
				cli_err(cli, "%s: snapshot '%s' not found in store %s (and no such %s)", what, target,
					cli->store, strcmp(what, "run") == 0 ? "guest file or directory" : "directory");
			else if (rc == STRATA_E_MOUNT)
				cli_err(cli, "%s: cannot serve the lazy layers of '%s': %s", what, target, strata_errmsg());
			else
				cli_err(cli, "%s: cannot restore %s: %s", what, target, strata_errmsg());
			return rc == STRATA_E_NOT_FOUND || rc == STRATA_E_BAD_NAME || rc == -ENOENT ? CLI_NOTFOUND
												     : CLI_FAIL;
		}
	}
	uint64_t lazy = 0;
	if (guarded && !(strata_sandbox_info(*out, STRATA_INFO_LAZY, &lazy) == 0 && lazy) && !lazy_seen)
		lazy_guard(false);
	lazy_seen = lazy_seen || lazy;
	return CLI_OK;
}

struct tag_find {
	const char *name;
	char id[STRATA_ID_LEN + 1];
	bool found;
};

static int tag_match(void *ctx, const char *name, const char *id)
{
	struct tag_find *f = ctx;

	if (strcmp(name, f->name) != 0)
		return 0;
	f->found = true;
	snprintf(f->id, sizeof(f->id), "%s", id);
	return 1; /* stops the walk */
}

int cli_snapshot_precheck(const struct cli *cli, const char *target, const char *tag, bool force)
{
	struct tag_find f = { .name = tag };
	int rc, status;

	if (!strata_tag_valid(tag)) {
		cli_err(cli, "run: '%s' is not a valid tag (letters, digits, '_', '.', '-'; at most 128)", tag);
		return CLI_USAGE;
	}
	if ((status = store_need(cli, true)) != CLI_OK)
		return status;
	if ((rc = strata_store_tags(run_store, tag_match, &f)) < 0) {
		cli_err(cli, "run: cannot read store %s: %s", cli->store, strata_strerror(rc));
		return CLI_FAIL;
	}
	if (f.found && !force) {
		cli_err(cli, "run: tag '%s' already names snapshot %s (use --force to move it)", tag, f.id);
		return CLI_FAIL;
	}
	/* A snapshot directory: the capture names its layers, which the
	 * store must hold for the commit (a lazy one's records count). */
	if (target && is_dir_target(target, target_kind(target)) && (rc = strata_store_lacks(run_store, target)) > 0) {
		cli_err(cli, "run: --snapshot needs the snapshot %s starts from in store %s, which lacks %d of "
			"its layer(s): import it first ('strata --store %s import %s')", target, cli->store, rc,
			cli->store, target);
		return CLI_FAIL;
	}
	return CLI_OK;
}

int cli_snapshot_commit(const struct cli *cli, strata_sandbox *sb, const char *tag, bool force)
{
	char id[STRATA_ID_LEN + 1];
	int rc, status;

	if ((status = cli_snapshot_precheck(cli, NULL, tag, force)) != CLI_OK)
		return status;
	rc = strata_sandbox_capture(sb, run_store, tag, force ? STRATA_TAG_FORCE : 0, id);
	if (rc == STRATA_E_EXISTS) {
		cli_err(cli, "run: tag '%s' already names another snapshot (use --force to move it)", tag);
		return CLI_FAIL;
	}
	if (rc == STRATA_E_MISSING) {
		cli_err(cli, "run: cannot commit the snapshot to store %s: %s (the sandbox was restored from a "
			"directory outside this store: import it first with 'strata import')", cli->store,
			strata_strerror(rc));
		return CLI_FAIL;
	}
	if (rc < 0) {
		cli_err(cli, "run: %s", strata_errmsg());
		return CLI_FAIL;
	}
	fprintf(stderr, "snapshot %s tagged %s\n", id, tag);
	return CLI_OK;
}

int cli_working_set_record(const struct cli *cli, strata_sandbox *sb)
{
	char hex[STRATA_ID_LEN + 1], record[STRATA_ID_LEN + 1];
	uint64_t pages = 0, runs = 0, layers = 0, bytes = 0, mapped = 0;
	int rc, status;

	if (strata_sandbox_snapshot_id(sb, hex) < 0) {
		cli_err(cli, "run: --record-working-set needs a snapshot to start from (a tag, id or snapshot directory)");
		return CLI_USAGE;
	}
	if ((status = store_need(cli, true)) != CLI_OK)
		return status;
	if ((rc = strata_sandbox_record_working_set(sb, run_store, record)) < 0) {
		if (rc == STRATA_E_NOT_FOUND)
			cli_err(cli, "run: snapshot %s is not in store %s: import it first ('strata import') to record its "
				"working set", hex, cli->store);
		else
			cli_err(cli, "run: %s", strata_errmsg());
		return CLI_FAIL;
	}
	strata_sandbox_info(sb, STRATA_INFO_WS_PAGES, &pages);
	strata_sandbox_info(sb, STRATA_INFO_WS_RUNS, &runs);
	strata_sandbox_info(sb, STRATA_INFO_WS_LAYERS, &layers);
	strata_sandbox_info(sb, STRATA_INFO_WS_BYTES, &bytes);
	strata_sandbox_info(sb, STRATA_INFO_WS_MAPPED, &mapped);
	fprintf(stderr, "working set of %s: %llu pages (%.1f MiB) in %llu runs over %u layer(s), record %s "
		"(%zu bytes); %llu guest pages mapped\n", hex, (unsigned long long)pages,
		(double)pages * 4096 / 1048576.0, (unsigned long long)runs, (unsigned)layers, record, (size_t)bytes,
		(unsigned long long)mapped);
	return CLI_OK;
}
