/* cmd_snap.c: `strata run` with snapshots: start from a tag, id or snapshot directory; --snapshot TAG captures and commits. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "fs/fs.h"
#include "index/index.h"
#include "index/lazy.h"
#include "store/store.h"
#include "vmm/vmm.h"

/* The store a run uses: opened on first need, kept for the process (the
 * sandbox's layer mappings outlive nothing here; capture needs the handle). */
static struct st_store *run_store;
static struct ix *run_index;

static int store_need(const struct cli *cli, bool write)
{
	return run_index ? CLI_OK : cli_store_open(cli, write, &run_store, &run_index);
}

/*
 * Lazy layers of a snapshot restored from the store (docs/lazy.md) have no
 * blob file to map: they are mapped from the library's private server of
 * the store (fs_private, fs/fs.h), a FUSE mount served by threads of this
 * process that no path reaches, whose reads fetch their chunks. It starts
 * with the first lazy layer opened, serves every sandbox of the command,
 * and stops in cli_snap_close once they are freed. Its reasons (refused
 * chunks, a registry that cannot be reached) are printed on stderr when
 * the command ends, and by the SIGBUS guard below.
 */
static struct fs_private *run_private;
/* What the SIGBUS guard reads: the server, once made (never freed before
 * the guard's process ends or the pointer is cleared). */
static struct fs_private *_Atomic guard_private;
static bool private_reported;

/* Print each reason once, as the kernel may ask for a failed page again. */
static void private_report(void)
{
	char buf[8192];

	if (private_reported || !fs_private_why(run_private, buf, sizeof(buf)))
		return;
	private_reported = true;
	for (char *line = buf, *nl; *line && (nl = strchr(line, '\n')); line = nl + 1) {
		*nl = '\0';
		fprintf(stderr, "strata: %s\n", line);
	}
}

static struct fs_private *private_get(const struct cli *cli)
{
	struct fs_private_config pc = { .store = run_store, .threads = FS_PRIVATE_THREADS,
					.auth = cli_registry_auth(),
					.certs_d = cli_certs_d() };

	if (!run_private && fs_private_new(&pc, &run_private) == 0) {
		atomic_store(&guard_private, run_private);
		atexit(private_report);
	}
	return run_private;
}

void cli_snap_close(void)
{
	/* The sandboxes are freed: nothing maps the private mount any more. */
	private_report();
	atomic_store(&guard_private, NULL);
	fs_private_free(run_private);
	run_private = NULL;
	ix_close(run_index);
	st_store_close(run_store);
	run_index = NULL;
	run_store = NULL;
}

/*
 * The VMM writes each call's frame into guest memory from the host: when
 * that page is in a lazy layer whose chunk cannot be had (refused, or the
 * registry is unreachable after the retries), the write faults with SIGBUS
 * instead of returning an error. What the guest itself touches comes back
 * as a guest error (KVM: "Bad address"). So a run or pool of a snapshot
 * says why and exits with the guest-error status instead of dying.
 * Async-signal-safe: fs_private_why, write, _exit.
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
	static char buf[8192];
	struct fs_private *p = atomic_load(&guard_private);

	(void)sig;
	say("strata: a page of the snapshot could not be read: it is in a lazy layer whose chunk was "
	    "refused or could not be fetched (docs/lazy.md)");
	if (!p || !fs_private_why(p, buf, sizeof(buf))) {
		say(p ? "; no reason was recorded\n" : "; the mount's log says which chunk and which registry\n");
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

void cli_lazy_guard(void)
{
	struct sigaction sa = { 0 };

	sa.sa_handler = on_sigbus;
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

static int from_manifest(const struct cli *cli, const char *what, const struct st_manifest *m,
			 vmm_layer_open_fn open, void *ctx, const struct vmm_config *cfg, struct vmm_sandbox **out)
{
	struct vmm_error err;
	/* Sizes come from the snapshot; keep the caller's timeout and log. */
	struct vmm_config c = { .timeout_ns = cfg->timeout_ns, .log = cfg->log, .log_ctx = cfg->log_ctx,
				.backend = cfg->backend, .host = cfg->host };
	int rc = vmm_sandbox_from_snapshot(m, open, ctx, &c, out, &err);

	if (rc < 0) {
		cli_err(cli, "run: cannot restore %s: %s", what, err.message);
		return rc == -ENOENT ? CLI_NOTFOUND : CLI_FAIL;
	}
	return CLI_OK;
}

unsigned cli_snapdir_flags(void)
{
	const char *v = getenv("STRATA_VERIFY"), *m = getenv("STRATA_MAP_FILES");

	return (v && strcmp(v, "1") == 0 ? VMM_SNAPDIR_VERIFY : 0) |
	       (m && strcmp(m, "1") == 0 ? VMM_SNAPDIR_MAP_FILES : 0);
}

static int snapshot_find(const struct cli *cli, const char *what, const char *target, enum target_kind kind,
			 unsigned flags, bool write, struct cli_snapshot *out)
{
	struct vmm_error err;
	char manifest[4096];
	int rc, status;

	memset(out, 0, sizeof(*out));
	/* A snapshot directory (a mount's snapshots/NAME, an export, a copy):
	 * on a strata mount its layers are mapped from their backing blobs
	 * (vmm/snapdir.c), a lazy one read through the mount. A target with a
	 * '/' or naming an existing directory is a directory; any other a tag
	 * or id in the store. */
	if (strchr(target, '/') || kind == TARGET_DIR) {
		rc = vmm_snapdir_open(cli->host, target, flags, &out->dir, &err);
		if (rc < 0) {
			/* An existing directory or file that is no snapshot directory. */
			if (rc == -ENOENT && kind != TARGET_OTHER &&
			    (kind == TARGET_FILE ||
			     (snprintf(manifest, sizeof(manifest), "%s/manifest.json", target) < (int)sizeof(manifest) &&
			      access(manifest, F_OK) != 0)))
				cli_err(cli, "%s: %s is neither a guest ELF nor a snapshot directory (no manifest.json)",
					what, target);
			else
				cli_err(cli, "%s: %s", what, err.message);
			return rc == -ENOENT || rc == -ENOTDIR ? CLI_NOTFOUND : CLI_FAIL;
		}
		out->manifest = vmm_snapdir_manifest(out->dir);
		out->open = vmm_snapdir_layer_open;
		out->ctx = out->dir;
		/* A mount's layer not reached through its blob: a lazy one. */
		if (vmm_snapdir_on_mount(out->dir) && vmm_snapdir_direct_layers(out->dir) < out->manifest->nlayers)
			cli_lazy_guard();
		return CLI_OK;
	}
	/* A tag or id in the store. */
	if ((status = store_need(cli, write)) != CLI_OK)
		return status;
	struct ix_txn *t = NULL;
	st_id id;
	if ((rc = ix_txn_begin(run_index, &t)) < 0) {
		cli_err(cli, "%s: cannot read store %s: %s", what, cli->store, ix_strerror(rc));
		return CLI_FAIL;
	}
	rc = ix_resolve(t, target, &id);
	if (rc == 0)
		rc = ix_snap_get(t, &id, &out->m);
	ix_txn_end(t);
	if (rc < 0) {
		if (rc == IX_ENOTFOUND || rc == ST_EBADNAME)
			cli_err(cli, "%s: snapshot '%s' not found in store %s (and no such %s)", what, target,
				cli->store, strcmp(what, "run") == 0 ? "guest file or directory" : "directory");
		else
			cli_err(cli, "%s: cannot look up '%s': %s", what, target, ix_strerror(rc));
		return rc == IX_ENOTFOUND || rc == ST_EBADNAME ? CLI_NOTFOUND : CLI_FAIL;
	}
	out->manifest = out->m;
	out->open = vmm_layer_open_store;
	out->ctx = run_store;
	for (uint32_t i = 0; i < out->m->nlayers; i++)
		if (!st_blob_has(run_store, &out->m->layers[i].id)) {
			struct fs_private *p = private_get(cli);
			if (!p) {
				cli_err(cli, "%s: out of memory", what);
				return CLI_FAIL;
			}
			/* Started now, before any sandbox exists: the helper is a
			 * fork of this process, best made while it is small. */
			if ((rc = fs_private_start(p)) < 0) {
				char why[2048];
				fs_private_why(p, why, sizeof(why));
				cli_err(cli, "%s: cannot serve the lazy layers of '%s': %s%s%s", what, target,
					fs_strerror(rc), why[0] ? ": " : "", why);
				private_reported = true;
				return CLI_FAIL;
			}
			out->open = fs_private_layer_open;
			out->ctx = p;
			cli_lazy_guard();
			break;
		}
	return CLI_OK;
}

int cli_snapshot_find(const struct cli *cli, const char *what, const char *target, unsigned flags, bool write,
		      struct cli_snapshot *out)
{
	return snapshot_find(cli, what, target, target_kind(target), flags, write, out);
}

void cli_snapshot_release(struct cli_snapshot *s)
{
	vmm_snapdir_close(s->dir);
	st_manifest_free(s->m);
	memset(s, 0, sizeof(*s));
}

int cli_sandbox_open(const struct cli *cli, const char *target, const struct vmm_config *given, unsigned extra_flags,
		     struct vmm_sandbox **out, struct vmm_error *err)
{
	struct vmm_config cfg = *given;
	struct cli_snapshot snap;
	enum target_kind kind = target_kind(target);
	int rc, status;

	/* The host brings the command's --backend (cli_host_open). */
	cfg.host = cli->host;
	/* A guest ELF file: a fresh sandbox. */
	if (kind == TARGET_FILE) {
		rc = vmm_sandbox_new(target, &cfg, out, err);
		if (rc < 0) {
			cli_err(cli, "run: cannot start %s: %s", target, err->message);
			return rc == -ENOENT ? CLI_NOTFOUND : CLI_FAIL;
		}
	} else {
		unsigned flags = cli_snapdir_flags() | extra_flags;
		if ((status = snapshot_find(cli, "run", target, kind, flags, true, &snap)) != CLI_OK)
			return status;
		status = from_manifest(cli, target, snap.manifest, snap.open, snap.ctx, &cfg, out);
		cli_snapshot_release(&snap);
		if (status != CLI_OK)
			return status;
	}
	cli_info(cli, "run: the sandbox runs on the %s backend", vmm_backend_name(vmm_sandbox_backend(*out)));
	return CLI_OK;
}

struct lazy_find {
	const st_id *id;
	bool found;
};

static int lazy_match(const st_id *layer, void *ctx)
{
	struct lazy_find *f = ctx;

	f->found = st_id_equal(layer, f->id);
	return f->found; /* 1 stops the walk */
}

/* The store records layer as lazy (pull --lazy): it counts as held. */
static bool lazy_known(const st_id *layer)
{
	struct lazy_find f = { .id = layer };

	return ix_lazy_foreach(run_index, lazy_match, &f) >= 0 && f.found;
}

int cli_snapshot_precheck(const struct cli *cli, const char *target, const char *tag, bool force)
{
	struct st_manifest *m = NULL;
	char why[ST_WHY_LEN] = "", hex[ST_ID_HEX_LEN + 1];
	struct ix_txn *t;
	st_id id;
	int rc, status;

	if (!st_name_valid(tag)) {
		cli_err(cli, "run: '%s' is not a valid tag (letters, digits, '_', '.', '-'; at most 128)", tag);
		return CLI_USAGE;
	}
	if ((status = store_need(cli, true)) != CLI_OK)
		return status;
	if ((rc = ix_txn_begin(run_index, &t)) < 0) {
		cli_err(cli, "run: cannot read store %s: %s", cli->store, ix_strerror(rc));
		return CLI_FAIL;
	}
	rc = ix_tag_get(t, tag, &id);
	ix_txn_end(t);
	if (rc == 0 && !force) {
		st_id_format(&id, hex);
		cli_err(cli, "run: tag '%s' already names snapshot %s (use --force to move it)", tag, hex);
		return CLI_FAIL;
	}
	/* A snapshot directory: the capture names its layers, which the
	 * store must hold for the commit (a lazy one's records count). */
	if (target && (strchr(target, '/') || target_kind(target) == TARGET_DIR) &&
	    st_snapdir_read(target, &m, why, sizeof(why)) == 0) {
		uint32_t missing = 0;
		for (uint32_t i = 0; i < m->nlayers; i++)
			if (!st_blob_has(run_store, &m->layers[i].id) &&
			    !lazy_known(&m->layers[i].id))
				missing++;
		st_manifest_free(m);
		if (missing) {
			cli_err(cli, "run: --snapshot needs the snapshot %s starts from in store %s, which lacks %u of "
				"its layer(s): import it first ('strata --store %s import %s')", target, cli->store,
				missing, cli->store, target);
			return CLI_FAIL;
		}
	}
	return CLI_OK;
}

int cli_snapshot_commit(const struct cli *cli, struct vmm_sandbox *sb, const char *tag, bool force)
{
	struct st_manifest *m = NULL;
	st_id id;
	char hex[ST_ID_HEX_LEN + 1];
	int rc, status;

	if ((status = cli_snapshot_precheck(cli, NULL, tag, force)) != CLI_OK)
		return status;
	rc = vmm_sandbox_capture(sb, run_store, &m);
	if (rc < 0) {
		cli_err(cli, "run: cannot capture the sandbox: %s",
			rc == -ENOSPC ? "no space left on the store's filesystem"
			: vmm_sandbox_error(sb)->code == rc && vmm_sandbox_error(sb)->message[0] ? vmm_sandbox_error(sb)->message
			: vmm_strerror(rc));
		return CLI_FAIL;
	}
	rc = ix_snap_commit(run_index, m, tag, force ? IX_TAG_FORCE : 0, &id);
	if (rc == IX_EEXIST) {
		cli_err(cli, "run: tag '%s' already names another snapshot (use --force to move it)", tag);
		st_manifest_free(m);
		return CLI_FAIL;
	}
	if (rc < 0) {
		cli_err(cli, "run: cannot commit the snapshot to store %s: %s%s", cli->store, ix_strerror(rc),
			rc == IX_EMISSING ? " (the sandbox was restored from a directory outside this store: "
					    "import it first with 'strata import')" : "");
		st_manifest_free(m);
		return CLI_FAIL;
	}
	rc = vmm_sandbox_rebase(sb, m, &id);
	st_manifest_free(m);
	if (rc < 0) {
		cli_err(cli, "run: snapshot committed, but the sandbox cannot continue on it: %s", vmm_strerror(rc));
		return CLI_FAIL;
	}
	st_id_format(&id, hex);
	fprintf(stderr, "snapshot %s tagged %s\n", hex, tag);
	return CLI_OK;
}

int cli_working_set_record(const struct cli *cli, struct vmm_sandbox *sb)
{
	struct st_ws *ws = NULL;
	uint64_t mapped = 0;
	void *buf = NULL;
	size_t len = 0;
	char why[ST_WHY_LEN] = "", hex[ST_ID_HEX_LEN + 1], bhex[ST_ID_HEX_LEN + 1];
	st_id id, blob;
	int rc, status = CLI_FAIL;

	if (!vmm_sandbox_snapshot_id(sb, &id)) {
		cli_err(cli, "run: --record-working-set needs a snapshot to start from (a tag, id or snapshot directory)");
		return CLI_USAGE;
	}
	if ((status = store_need(cli, true)) != CLI_OK)
		return status;
	status = CLI_FAIL;
	if ((rc = vmm_sandbox_working_set(sb, &ws, &mapped)) < 0) {
		cli_err(cli, "run: cannot record the working set: %s", vmm_strerror(rc));
		return CLI_FAIL;
	}
	if ((rc = st_ws_encode(ws, &buf, &len, why, sizeof(why))) < 0) {
		cli_err(cli, "run: cannot encode the working set: %s", why[0] ? why : st_strerror(rc));
		goto out_free;
	}
	st_id_format(&id, hex);
	rc = ix_ws_put(run_index, &id, buf, len, &blob, why, sizeof(why));
	if (rc == IX_ENOTFOUND) {
		cli_err(cli, "run: snapshot %s is not in store %s: import it first ('strata import') to record its "
			"working set", hex, cli->store);
		goto out_free;
	}
	if (rc < 0) {
		cli_err(cli, "run: cannot store the working set in %s: %s", cli->store,
			why[0] ? why : ix_strerror(rc));
		goto out_free;
	}
	st_id_format(&blob, bhex);
	fprintf(stderr, "working set of %s: %llu pages (%.1f MiB) in %llu runs over %u layer(s), record %s "
		"(%zu bytes); %llu guest pages mapped\n", hex, (unsigned long long)ws->pages,
		(double)ws->pages * ST_PAGE_SIZE / 1048576.0, (unsigned long long)ws->nruns, ws->nlayers, bhex, len,
		(unsigned long long)mapped);
	status = CLI_OK;
out_free:
	free(buf);
	st_ws_free(ws);
	return status;
}
