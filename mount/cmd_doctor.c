/* cmd_doctor.c: `strata doctor`: what this machine offers strata (kernel, backends, written-page mechanism, FUSE, store, registry), and why not. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "cli.h"
#include "store/store.h"
#include "vmm/vmm.h"

static void usage(void)
{
	printf("usage: strata doctor [--need kvm] [--json]\n\n"
	       "Says what this machine offers strata, one line each: the kernel, KVM (or\n"
	       "why it cannot be used and what would grant it), the process backend and\n"
	       "which backend 'auto' picks, how written guest pages are found\n"
	       "(pagemap-scan on Linux 6.7+, else pagemap-read), FUSE and fusermount3,\n"
	       "the reset policy in force, the store (who can read it, whether you may\n"
	       "write it) and the registry credentials push and pull would use (the auth\n"
	       "files in the order they are read, their credHelpers and credsStore).\n"
	       "Exits 1 if sandboxes cannot run here (no backend works, no way to find\n"
	       "written pages, a broken policy); a missing KVM alone is not that when\n"
	       "the process backend works.\n\n"
	       "  --need kvm   check only KVM: if sandboxes can run on it, say so and exit 0;\n"
	       "               else print the reason on one line and exit 1 (for scripts)\n"
	       "  --json       print one JSON object (docs/cli.md)\n");
}

/* What doctor found: printed as "name: detail" lines, or gathered for --json. */
struct doctor {
	json_t *json; /* --json: the "checks" object */
};

static void say(struct doctor *d, const char *name, bool ok, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void say(struct doctor *d, const char *name, bool ok, const char *fmt, ...)
{
	char buf[4600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (d->json) {
		json_object_set_new(d->json, name, json_pack("{sbss}", "ok", ok, "detail", buf));
		return;
	}
	char label[24];
	snprintf(label, sizeof(label), "%s:", name);
	printf("%-14s %s\n", label, buf);
}

/* The store: who can read it (its directories only; fsck walks every
 * file), and whether this user may write it. A warning, never a failure. */
static void doctor_store(const struct cli *cli, struct doctor *d)
{
	struct st_store *s;
	struct stat sb;
	gid_t g;
	long long n;
	int rc = st_store_open(cli->store, ST_OPEN_RDONLY, &s);

	if (rc == -ENOENT || rc == ST_ENOTSTORE) {
		say(d, "store", true, "none at %s ('strata init' makes one; pull and import make it too)",
		    cli_esc(cli->store));
		return;
	}
	if (rc < 0) {
		if (stat(cli->store, &sb) == 0)
			say(d, "store", false, "%s: %s (owner uid %lu, group %lu, mode %04o)", cli_esc(cli->store),
			    cli_store_strerror(rc), (unsigned long)sb.st_uid, (unsigned long)sb.st_gid,
			    (unsigned)(sb.st_mode & 07777));
		else
			say(d, "store", false, "%s: %s", cli_esc(cli->store), cli_store_strerror(rc));
		return;
	}
	const char *rw = access(st_store_path(s), W_OK) == 0 ? "you may write it"
							       : "read-only for you (ls, show, verify, run, export work)";
	/* With --json, the exposed paths are counted, not printed. */
	json_t *exposed = d->json ? json_array() : NULL;
	if ((n = cli_store_exposed(cli, s, ST_PERM_CHECK_DIRS, exposed)) == 0) {
		if (st_store_shared(s, &g))
			say(d, "store", true, "%s, readable by group %lu only; %s", cli_esc(st_store_path(s)),
			    (unsigned long)g, rw);
		else
			say(d, "store", true, "%s, readable by its owner only; %s", cli_esc(st_store_path(s)), rw);
	} else if (n > 0) {
		say(d, "store", false, "%s: other users can read it (%lld of its directories; 'strata fsck' lists "
		    "every path); %s", cli_esc(st_store_path(s)), n, rw);
	}
	json_decref(exposed);
	st_store_close(s);
}

/* The first regular file NAME in $PATH's directories, into buf: true if any. */
static bool on_path(const char *name, char *buf, size_t len, struct stat *sb)
{
	const char *path = getenv("PATH");

	for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
		size_t n = strcspn(p, ":");
		if (n && snprintf(buf, len, "%.*s/%s", (int)n, p, name) < (int)len && stat(buf, sb) == 0 &&
		    S_ISREG(sb->st_mode))
			return true;
		p += n;
		if (*p == ':')
			p++;
	}
	return false;
}

/* fusermount3, which `strata mount` needs unless it runs as root: on PATH,
 * and setuid root for anyone else. */
static void doctor_fusermount(struct doctor *d)
{
	char buf[PATH_MAX];
	struct stat sb;

	if (!on_path("fusermount3", buf, sizeof(buf), &sb)) {
		say(d, "fusermount3", false, "not found on PATH: 'strata mount' needs it (Debian: apt install fuse3)");
		return;
	}
	if (geteuid() == 0 || (sb.st_uid == 0 && (sb.st_mode & S_ISUID)))
		say(d, "fusermount3", true, "%s", cli_esc(buf));
	else
		say(d, "fusermount3", false, "%s is not setuid root: 'strata mount' as this user fails "
		    "(chmod u+s %s as root; Debian's fuse3 package installs it so)", cli_esc(buf), cli_esc(buf));
}

/* Append to a bounded text; what does not fit is cut. */
static void add(char *buf, size_t len, size_t *off, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void add(char *buf, size_t len, size_t *off, const char *fmt, ...)
{
	va_list ap;

	if (*off >= len)
		return;
	va_start(ap, fmt);
	int w = vsnprintf(buf + *off, len - *off, fmt, ap);
	va_end(ap);
	if (w > 0)
		*off = (size_t)w < len - *off ? *off + (size_t)w : len;
}

/* A docker-credential-NAME helper an auth file names: not on PATH, it
 * fails push and pull for the registries it serves. */
static bool helper_found(const char *name, const char *file, const char *what, char *bad, size_t badlen)
{
	char prog[160], buf[PATH_MAX];
	struct stat sb;

	snprintf(prog, sizeof(prog), "docker-credential-%s", name);
	if (on_path(prog, buf, sizeof(buf), &sb))
		return true;
	if (!bad[0])
		snprintf(bad, badlen, "%s, named by %s in %s, is not on PATH: push and pull fail for the registries it "
			 "serves until it is installed or the entry removed", prog, what, file);
	return false;
}

/* One auth file: its auths' hosts, credHelpers and credsStore, as text; 1,
 * or (why in bad) 0 if it names a helper not on PATH, -1 if it cannot be read. */
static int describe_auth_file(const char *path, char *out, size_t len, size_t *off, char *bad, size_t badlen)
{
	json_error_t jerr;
	json_t *root = json_load_file(path, 0, &jerr), *v;
	json_t *auths = root ? json_object_get(root, "auths") : NULL;
	json_t *helpers = root ? json_object_get(root, "credHelpers") : NULL;
	const char *key;
	size_t count = 0;
	bool ok = true;

	if (!root || (auths && !json_is_object(auths)) || (helpers && !json_is_object(helpers))) {
		snprintf(bad, badlen, "auth file %s cannot be read: %s (push and pull fail until it is fixed)",
			 cli_esc(path), !root ? jerr.text : auths && !json_is_object(auths) ?
			 "\"auths\" is not an object" : "\"credHelpers\" is not an object");
		json_decref(root);
		return -1;
	}
	count = json_object_size(auths);
	add(out, len, off, "%s for %zu registr%s", cli_esc(path), count, count == 1 ? "y" : "ies");
	if (count) {
		size_t i = 0;
		add(out, len, off, " (");
		json_object_foreach(auths, key, v)
			add(out, len, off, "%s%s", i++ ? ", " : "", cli_esc(key));
		add(out, len, off, ")");
	}
	if (json_object_size(helpers)) {
		size_t i = 0;
		add(out, len, off, ", credHelpers ");
		json_object_foreach(helpers, key, v) {
			const char *h = json_is_string(v) ? json_string_value(v) : "?";
			add(out, len, off, "%s%s: docker-credential-%s", i++ ? ", " : "", cli_esc(key), cli_esc(h));
			ok &= helper_found(h, path, "credHelpers", bad, badlen);
		}
	}
	v = json_object_get(root, "credsStore");
	if (json_is_string(v) && json_string_length(v)) {
		add(out, len, off, ", credsStore docker-credential-%s", cli_esc(json_string_value(v)));
		ok &= helper_found(json_string_value(v), path, "credsStore", bad, badlen);
	}
	json_decref(root);
	return ok;
}

/* The auth files push and pull would read, in their order (cli_auth_files;
 * --creds and --authfile come first, but are per command), what each holds
 * and whether the credential helpers they name can be run. */
static void doctor_registry(struct doctor *d)
{
	static const char order[] = "looked up in order: --creds, --authfile, $REGISTRY_AUTH_FILE, "
				    "$XDG_RUNTIME_DIR/containers/auth.json, ~/.config/containers/auth.json, "
				    "~/.docker/config.json; in each, credHelpers, auths, then credsStore";
	char paths[CLI_AUTH_FILES][CLI_AUTH_PATH], text[3072] = "", bad[1024] = "";
	size_t off = 0, found = 0;
	bool env, ok = true;
	size_t n = cli_auth_files(paths, &env);

	if (env && access(paths[0], F_OK) != 0) {
		say(d, "registry", false, "$REGISTRY_AUTH_FILE names %s, which does not exist: push and pull fail until "
		    "it does or the variable is unset", cli_esc(paths[0]));
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (access(paths[i], F_OK) != 0)
			continue;
		add(text, sizeof(text), &off, found++ ? "; then " : "credentials from ");
		int drc = describe_auth_file(paths[i], text, sizeof(text), &off, bad, sizeof(bad));
		if (drc < 0) {
			say(d, "registry", false, "%s", bad);
			return;
		}
		ok &= drc == 1;
	}
	if (!found) {
		char tried[3 * CLI_AUTH_PATH + 8] = "";
		size_t toff = 0;
		for (size_t i = 0; i < n; i++)
			add(tried, sizeof(tried), &toff, "%s%s", i ? ", " : "", cli_esc(paths[i]));
		say(d, "registry", true, "no auth file (%s): push and pull go without credentials; --creds USER:PASSWORD, "
		    "--authfile FILE or $REGISTRY_AUTH_FILE give some (%s)", n ? tried : "$REGISTRY_AUTH_FILE unset, no HOME",
		    order);
		return;
	}
	if (!ok)
		say(d, "registry", false, "%s; %s", bad, text);
	else
		say(d, "registry", true, "%s (%s)", text, order);
}

int cmd_doctor(struct cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "need", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0, 0, 0, 0 },
	};
	struct vmm_error kerr, perr, derr;
	struct doctor d = { 0 };
	struct utsname u;
	const char *need = NULL;
	char policy[512];
	bool json = false;
	int c, status = CLI_OK;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'n': need = optarg; break;
		case 'j': json = true; break;
		case 'h': usage(); return CLI_OK;
		default: return cli_usage_hint(argv[0]);
		}
	}
	if (optind < argc || (need && strcmp(need, "kvm") != 0) || (need && json)) {
		cli_err(cli, "doctor: expected no arguments, --json, or --need kvm");
		return CLI_USAGE;
	}
	int krc = vmm_kvm_check(&kerr);
	if (need) {
		if (krc == 0) {
			printf("KVM runs sandboxes here\n");
			return CLI_OK;
		}
		printf("%s\n", kerr.message);
		return CLI_FAIL;
	}
	if (json)
		d.json = json_object();
	if (uname(&u) == 0)
		say(&d, "kernel", true, "Linux %s (strata supports %d.%d and newer)", u.release, VMM_KERNEL_MIN_MAJOR,
		    VMM_KERNEL_MIN_MINOR);
	if (krc == 0)
		say(&d, "kvm", true, "usable (/dev/kvm)");
	else
		say(&d, "kvm", false, "unusable: %s", kerr.message);
	int prc = vmm_process_check(&perr);
	if (prc == 0)
		say(&d, "process", true, "usable (sandboxes in locked-down child processes, no KVM needed)");
	else
		say(&d, "process", false, "unusable: %s", perr.message);
	/* No host: auto is the machine's choice (vmm/backend.c's list). */
	enum vmm_backend_kind pick = vmm_backend_resolve(NULL, cli->backend);
	bool runs = pick == VMM_BACKEND_KVM ? krc == 0 : prc == 0;
	say(&d, "backend", runs, "%s%s%s", vmm_backend_name(pick),
	    cli->backend != VMM_BACKEND_AUTO ? " (chosen by --backend or STRATA_BACKEND)" : " (what auto picks here)",
	    runs ? "" : ": it cannot run here");
	if (!runs)
		status = CLI_FAIL;
	enum vmm_dirty_mech mech;
	if (vmm_dirty_mechanism(&mech, &derr) == 0) {
		say(&d, "written pages", true, "%s%s", vmm_dirty_name(mech),
		    mech == VMM_DIRTY_SCAN ? " (PAGEMAP_SCAN)" : " (reading pagemap entries)");
	} else {
		say(&d, "written pages", false, "none works: %s", derr.message);
		status = CLI_FAIL;
	}
	int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		close(fd);
		say(&d, "fuse", true, "usable (/dev/fuse)");
	} else {
		say(&d, "fuse", false, "unusable: /dev/fuse: %s (mounts need it; nothing else does)", strerror(errno));
	}
	doctor_fusermount(&d);
	struct vmm_policy pol;
	char why[4300];
	if (cli_policy_load(&pol, why, sizeof(why)) < 0) {
		say(&d, "policy", false, "unusable: %s (sandboxes refuse to start; 'strata calibrate' writes a new one)",
		    why);
		status = CLI_FAIL;
	} else {
		vmm_policy_describe(&pol, policy, sizeof(policy));
		say(&d, "policy", true, "%s", policy);
	}
	doctor_store(cli, &d);
	doctor_registry(&d);
	if (json && cli_json_put(json_pack("{sbsssosi}", "ok", status == CLI_OK, "backend", vmm_backend_name(pick),
					   "checks", d.json, "schema", 1)) < 0)
		return CLI_FAIL;
	return status;
}
