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
	       "write it) and the registry credentials push and pull would use.\n"
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

/* fusermount3, which `strata mount` needs unless it runs as root: on PATH,
 * and setuid root for anyone else. */
static void doctor_fusermount(struct doctor *d)
{
	const char *path = getenv("PATH");
	char buf[PATH_MAX];
	struct stat sb;

	for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
		size_t len = strcspn(p, ":");
		if (len && snprintf(buf, sizeof(buf), "%.*s/fusermount3", (int)len, p) < (int)sizeof(buf) &&
		    stat(buf, &sb) == 0 && S_ISREG(sb.st_mode)) {
			if (geteuid() == 0 || (sb.st_uid == 0 && (sb.st_mode & S_ISUID)))
				say(d, "fusermount3", true, "%s", cli_esc(buf));
			else
				say(d, "fusermount3", false, "%s is not setuid root: 'strata mount' as this user fails "
				    "(chmod u+s %s as root; Debian's fuse3 package installs it so)", cli_esc(buf),
				    cli_esc(buf));
			return;
		}
		p += len;
		if (*p == ':')
			p++;
	}
	say(d, "fusermount3", false, "not found on PATH: 'strata mount' needs it (Debian: apt install fuse3)");
}

/* The auth file push and pull read first ($REGISTRY_AUTH_FILE, else
 * $XDG_RUNTIME_DIR/containers/auth.json, else $DOCKER_CONFIG/config.json
 * or ~/.docker/config.json): which exists, and the registries it has
 * credentials for. */
static void doctor_registry(struct doctor *d)
{
	char paths[3][PATH_MAX];
	size_t n = 0;
	const char *env;

	if ((env = getenv("REGISTRY_AUTH_FILE")) && *env)
		snprintf(paths[n++], sizeof(paths[0]), "%s", env);
	else {
		if ((env = getenv("XDG_RUNTIME_DIR")) && *env)
			snprintf(paths[n++], sizeof(paths[0]), "%s/containers/auth.json", env);
		if ((env = getenv("DOCKER_CONFIG")) && *env)
			snprintf(paths[n++], sizeof(paths[0]), "%s/config.json", env);
		else if ((env = getenv("HOME")) && *env)
			snprintf(paths[n++], sizeof(paths[0]), "%s/.docker/config.json", env);
	}
	for (size_t i = 0; i < n; i++) {
		json_error_t jerr;
		if (access(paths[i], F_OK) != 0)
			continue;
		json_t *root = json_load_file(paths[i], 0, &jerr);
		json_t *auths = root ? json_object_get(root, "auths") : NULL;
		if (!root || (auths && !json_is_object(auths))) {
			say(d, "registry", false, "auth file %s cannot be read: %s (push and pull fail until it is fixed)",
			    cli_esc(paths[i]), root ? "\"auths\" is not an object" : jerr.text);
			json_decref(root);
			return;
		}
		char hosts[512] = "";
		size_t off = 0, count = 0;
		const char *host;
		json_t *v;
		json_object_foreach(auths, host, v) {
			int w = snprintf(hosts + off, sizeof(hosts) - off, "%s%s", count ? ", " : "", cli_esc(host));
			if (w > 0 && (size_t)w < sizeof(hosts) - off)
				off += (size_t)w;
			count++;
		}
		say(d, "registry", true, "credentials from %s for %zu registr%s%s%s%s", cli_esc(paths[i]), count,
		    count == 1 ? "y" : "ies", count ? " (" : "", hosts, count ? ")" : "");
		json_decref(root);
		return;
	}
	say(d, "registry", true, "no auth file (%s): push and pull go without credentials; --authfile FILE or "
	    "$REGISTRY_AUTH_FILE names one", n ? cli_esc(paths[0]) : "$REGISTRY_AUTH_FILE unset, no HOME");
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
	enum vmm_backend_kind pick = cli->backend != VMM_BACKEND_AUTO ? cli->backend
				     : krc == 0			 ? VMM_BACKEND_KVM
								 : VMM_BACKEND_PROCESS;
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
