/* cmd_mount.c: `strata mount` (daemonise, log, report startup errors) and `strata umount`. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "fs/fs.h"

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

struct mount_log {
	FILE *f;
	bool to_stderr;
};

static const char *prio_name(int prio)
{
	switch (prio) {
	case FS_LOG_ERR: return "error";
	case FS_LOG_WARNING: return "warning";
	case FS_LOG_NOTICE: return "notice";
	case FS_LOG_INFO: return "info";
	default: return "debug";
	}
}

static void mount_log(void *ctx, int prio, const char *msg)
{
	struct mount_log *l = ctx;
	char ts[32];
	time_t now = time(NULL);
	struct tm tm;

	gmtime_r(&now, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
	/* Messages name what was copied in (file names, reasons): escaped. The
	 * daemon's threads log, so each line gets its own copy. */
	char *e = cli_esc_dup(msg, strlen(msg));
	const char *text = e ? e : "(out of memory)";
	if (l->f)
		fprintf(l->f, "%s strata-mount[%d] %s: %s\n", ts, (int)getpid(), prio_name(prio), text);
	if (l->to_stderr)
		fprintf(stderr, "strata-mount: %s: %s\n", prio_name(prio), text);
	free(e);
}

struct ready_pipe {
	int fd;
	int stderr_fd; /* where the daemon's stderr goes once mounted: the log, or -1 for /dev/null */
};

/* The mount is live: tell the waiting parent, then let go of the terminal. */
static void mount_ready(void *ctx)
{
	struct ready_pipe *rp = ctx;
	int code = 0;

	if (rp->fd < 0)
		return;
	if (write(rp->fd, &code, sizeof(code)) < 0) {
		/* the parent is gone; keep serving */
	}
	close(rp->fd);
	rp->fd = -1;
	/* The terminal is let go of; whatever the daemon's process still
	 * writes to stderr (a sanitizer's report at exit, a library's
	 * complaint) goes on to the log, where the caller of `strata mount`
	 * (a test, a person) can read it. */
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
		dup2(rp->stderr_fd >= 0 ? rp->stderr_fd : null, STDERR_FILENO);
		close(null);
	}
}

static void mount_usage(FILE *f)
{
	fprintf(f,
		"usage: strata mount [STORE] MOUNTPOINT [-f] [-d] [-o OPTS] [--log FILE]\n"
		"                    [--read-mode direct|dontneed|cached] [--stage-timeout SEC]\n"
		"                    [--stage-memory MIB] [--poll-ms MS] [--threads N]\n"
		"\n"
		"Mount a store (default: --store) as a filesystem: snapshots/NAME/manifest.json,\n"
		"snapshots/NAME/layers/<id>, blobs/<id>, memory/NAME. Copying a snapshot\n"
		"directory into snapshots/ imports it; rm -r removes a tag, mv renames one.\n"
		"Runs in the background once the mount is live (docs/fs.md).\n"
		"\n"
		"  -f               stay in the foreground (log to stderr unless --log)\n"
		"  -d               libfuse's request trace (implies -f)\n"
		"  -o OPTS          options passed to libfuse (e.g. allow_other), repeatable\n"
		"  --log FILE       where the daemon says why it refused something, and\n"
		"                   where its stderr goes (default: STORE/mount.log)\n"
		"  --read-mode M    how the daemon reads backing blobs (default: direct)\n"
		"  --stage-timeout SEC  drop an unfinished copy idle this long (default 600)\n"
		"  --stage-memory MIB   memory imports may hold in the daemon (default 64);\n"
		"                   writes past it fail with ENOSPC\n"
		"  --poll-ms MS     how often to look for changes made by others (default 200)\n"
		"  --threads N      worker threads (default 1: fastest for ls/cp/rsync here;\n"
		"                   more let parallel readers overlap disk reads)\n");
}

static int join_opt(char **acc, const char *more)
{
	size_t a = *acc ? strlen(*acc) : 0, b = strlen(more);
	char *n = realloc(*acc, a + b + 2);

	if (!n)
		return -ENOMEM;
	if (a)
		n[a++] = ',';
	memcpy(n + a, more, b + 1);
	*acc = n;
	return 0;
}

/* What `strata mount` was asked for. */
struct mount_args {
	struct fs_config cfg;
	char *fuse_opts;        /* the -o options, joined with commas */
	const char *log_arg;    /* --log FILE, or NULL */
	const char *store_arg;  /* STORE, else --store */
	const char *mp_arg;     /* MOUNTPOINT */
	bool fg;                /* -f or -d */
	bool help;              /* --help was printed: nothing more to do */
};

/* Parse the command line into a; returns CLI_OK (a->help: the help was
 * printed), or the exit status of a reported error. */
static int mount_parse(struct cli *cli, int argc, char **argv, struct mount_args *a)
{
	static const struct option opts[] = {
		{ "foreground", no_argument, NULL, 'f' },
		{ "debug", no_argument, NULL, 'd' },
		{ "log", required_argument, NULL, 'l' },
		{ "read-mode", required_argument, NULL, 'r' },
		{ "stage-timeout", required_argument, NULL, 't' },
		{ "stage-memory", required_argument, NULL, 'M' },
		{ "poll-ms", required_argument, NULL, 'p' },
		{ "threads", required_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	unsigned long long v;
	int c;

	a->store_arg = cli->store;
	a->cfg.auth = cli_registry_auth(); /* lazy layers' chunks (docs/lazy.md) */
	a->cfg.certs_d = cli_certs_d();
	while ((c = getopt_long(argc, argv, "fdo:h", opts, NULL)) != -1) {
		switch (c) {
		case 'f': a->fg = true; break;
		case 'd': a->fg = true; a->cfg.debug = true; break;
		case 'o':
			if (join_opt(&a->fuse_opts, optarg) < 0) {
				cli_err(cli, "mount: out of memory");
				return CLI_FAIL;
			}
			break;
		case 'l': a->log_arg = optarg; break;
		case 'r':
			if (fs_read_mode_parse(optarg, &a->cfg.read_mode) < 0) {
				cli_err(cli, "mount: --read-mode must be direct, dontneed or cached");
				return CLI_USAGE;
			}
			break;
		case 't':
			if (!cli_parse_u64(optarg, &v) || v == 0 || v > 86400 * 7) {
				cli_err(cli, "mount: --stage-timeout needs seconds (1..604800)");
				return CLI_USAGE;
			}
			a->cfg.stage_timeout_s = (unsigned)v;
			break;
		case 'M':
			if (!cli_parse_u64(optarg, &v) || v == 0 || v > (1u << 20)) {
				cli_err(cli, "mount: --stage-memory needs MiB (1..1048576)");
				return CLI_USAGE;
			}
			a->cfg.stage_memory = (uint64_t)v << 20;
			break;
		case 'p':
			if (!cli_parse_u64(optarg, &v) || v == 0 || v > 60000) {
				cli_err(cli, "mount: --poll-ms needs milliseconds (1..60000)");
				return CLI_USAGE;
			}
			a->cfg.poll_ms = (unsigned)v;
			break;
		case 'T':
			if (!cli_parse_u64(optarg, &v) || v == 0 || v > 256) {
				cli_err(cli, "mount: --threads needs 1..256");
				return CLI_USAGE;
			}
			a->cfg.max_threads = (unsigned)v;
			break;
		case 'h': mount_usage(stdout); a->help = true; return CLI_OK;
		default: return cli_usage_hint(argv[0]);
		}
	}
	if (argc - optind == 2) {
		a->store_arg = argv[optind++];
	} else if (argc - optind != 1) {
		mount_usage(stderr);
		return CLI_USAGE;
	}
	a->mp_arg = argv[optind];
	return CLI_OK;
}

/* The mountpoint, made absolute in mp (PATH_MAX): a stale strata mount on
 * it (its daemon died) is taken down first; a live one is refused. */
static int mountpoint_take(struct cli *cli, const char *mp_arg, char *mp)
{
	int st = fs_mountpoint_state(mp_arg);

	if (st == FS_MP_STALE) {
		/* Its daemon died (kill -9, crash): nothing serves it, so take it down. */
		fprintf(stderr, "strata: %s: %s; unmounting it first\n", mp_arg, fs_strerror(FS_ESTALE_MOUNT));
		int urc = fs_umount(mp_arg, true);
		if (urc < 0) {
			cli_err(cli, "mount: %s: cannot unmount the stale mount: %s", mp_arg, fs_strerror(urc));
			return CLI_FAIL;
		}
		st = fs_mountpoint_state(mp_arg);
	}
	if (st == FS_MP_MOUNTED) {
		cli_err(cli, "mount: %s: %s (strata umount %s)", mp_arg, fs_strerror(FS_EMOUNTED), mp_arg);
		return CLI_FAIL;
	}
	if (st < 0 || !realpath(mp_arg, mp)) {
		cli_err(cli, "mount: mountpoint %s: %s", mp_arg, st < 0 ? strerror(-st) : strerror(errno));
		return CLI_NOTFOUND;
	}
	return CLI_OK;
}

/* Serve in a daemon: fork, let the child serve, and wait until it says the
 * mount is live (or why it is not). Returns the exit status. */
static int mount_daemon(struct cli *cli, struct fs_config *cfg, struct mount_log *log, const char *log_arg,
			char *fuse_opts)
{
	struct ready_pipe rp = { -1, log->f ? fileno(log->f) : -1 };
	int pfd[2];

	if (pipe2(pfd, O_CLOEXEC) < 0) {
		cli_err(cli, "mount: pipe: %s", strerror(errno));
		return CLI_FAIL;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		cli_err(cli, "mount: fork: %s", strerror(errno));
		close(pfd[0]);
		close(pfd[1]);
		return CLI_FAIL;
	}
	if (pid == 0) {
		close(pfd[0]);
		setsid();
		if (chdir("/") < 0) {
			/* paths are absolute already */
		}
		rp.fd = pfd[1];
		cfg->ready = mount_ready;
		cfg->ready_ctx = &rp;
		int src = fs_serve(cfg);
		if (rp.fd >= 0) { /* never got ready: tell the parent why */
			if (write(rp.fd, &src, sizeof(src)) < 0) {
				/* nothing more to do */
			}
			close(rp.fd);
		} else if (src < 0) {
			mount_log(log, FS_LOG_ERR, fs_strerror(src));
		}
		if (log->f)
			fclose(log->f);
		free(fuse_opts);
#ifdef __SANITIZE_ADDRESS__
		/* _exit skips LeakSanitizer's check at exit: in a sanitizer
		 * build the daemon asks for it here, so what it leaked while
		 * serving is reported (to its log, or the test's log_path). */
		__lsan_do_leak_check();
#endif
		_exit(src < 0 ? CLI_FAIL : CLI_OK);
	}
	close(pfd[1]);
	int code = 0;
	ssize_t got;
	while ((got = read(pfd[0], &code, sizeof(code))) < 0 && errno == EINTR)
		;
	close(pfd[0]);
	if (got != (ssize_t)sizeof(code)) {
		cli_err(cli, "mount: the daemon died while starting (see %s)", log_arg ? log_arg : "its log");
		return CLI_FAIL;
	}
	if (code < 0) {
		cli_err(cli, "mount: %s: %s", cfg->mountpoint, fs_strerror(code));
		return CLI_FAIL;
	}
	cli_info(cli, "mounted %s at %s (daemon pid %d, log %s)", cfg->store, cfg->mountpoint, (int)pid, log_arg);
	return CLI_OK;
}

/* Open the daemon's log for appending. It names snapshots and what was done
 * with them, so a new one is as private as the store (ST_PERM_RW exactly,
 * whatever the umask); one that exists keeps its mode. NULL with errno set. */
static FILE *log_open(const char *store, const char *path)
{
	struct st_store *s;
	mode_t mode = 0600;
	FILE *f;
	int fd, err;

	if (st_store_open(store, ST_OPEN_RDONLY, &s) == 0) {
		mode = st_store_perm(s, ST_PERM_RW);
		st_store_close(s);
	}
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	if (fd >= 0 && fchmod(fd, mode) < 0) {
		err = errno;
		close(fd);
		errno = err;
		return NULL;
	}
	if (fd < 0 && errno == EEXIST)
		fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (!(f = fdopen(fd, "ae"))) {
		err = errno;
		close(fd);
		errno = err;
	}
	return f;
}

int cmd_mount(struct cli *cli, int argc, char **argv)
{
	struct mount_args a = { 0 };
	struct mount_log log = { 0 };
	char store[PATH_MAX], mp[PATH_MAX], logpath[PATH_MAX + 16];
	int rc;

	if ((rc = mount_parse(cli, argc, argv, &a)) != CLI_OK || a.help)
		goto out;
	if (!realpath(a.store_arg, store)) {
		cli_err(cli, "mount: store %s: %s", a.store_arg, strerror(errno));
		rc = CLI_NOTFOUND;
		goto out;
	}
	if ((rc = mountpoint_take(cli, a.mp_arg, mp)) != CLI_OK)
		goto out;
	if (!a.log_arg && !a.fg) {
		snprintf(logpath, sizeof(logpath), "%s/mount.log", store);
		a.log_arg = logpath;
	}
	if (a.log_arg) {
		log.f = log_open(store, a.log_arg);
		if (!log.f) {
			cli_err(cli, "mount: log %s: %s", a.log_arg, strerror(errno));
			rc = CLI_FAIL;
			goto out;
		}
		setvbuf(log.f, NULL, _IOLBF, 0);
	} else {
		log.to_stderr = true;
	}
	a.cfg.store = store;
	a.cfg.mountpoint = mp;
	a.cfg.fuse_opts = a.fuse_opts;
	a.cfg.log = mount_log;
	a.cfg.log_ctx = &log;
	if (a.fg) {
		rc = fs_serve(&a.cfg);
		if (rc < 0)
			cli_err(cli, "mount: %s", fs_strerror(rc));
		rc = rc < 0 ? CLI_FAIL : CLI_OK;
	} else {
		rc = mount_daemon(cli, &a.cfg, &log, a.log_arg, a.fuse_opts);
	}
out:
	if (log.f)
		fclose(log.f);
	free(a.fuse_opts);
	return rc;
}

int cmd_umount(struct cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "lazy", no_argument, NULL, 'l' }, { "help", no_argument, NULL, 'h' }, { 0 } };
	bool lazy = false;
	int c;

	while ((c = getopt_long(argc, argv, "lh", opts, NULL)) != -1) {
		switch (c) {
		case 'l': lazy = true; break;
		case 'h':
			printf("usage: strata umount [-l] MOUNTPOINT\n\nUnmount a strata mount, live or stale "
			       "(its daemon died).\n\n  -l, --lazy  detach a busy mount now; it finishes when idle\n");
			return CLI_OK;
		default:
			return cli_usage_hint(argv[0]);
		}
	}
	if (argc - optind != 1) {
		cli_err(cli, "umount: expected one MOUNTPOINT (see 'strata umount --help')");
		return CLI_USAGE;
	}
	int rc = fs_umount(argv[optind], lazy);
	if (rc == -EBUSY) {
		cli_err(cli, "umount: %s: busy (a process uses it; strata umount -l detaches it)", argv[optind]);
		return CLI_FAIL;
	}
	if (rc < 0) {
		cli_err(cli, "umount: %s: %s", argv[optind], rc == FS_ENOTMOUNT ? fs_strerror(rc) : strerror(-rc));
		return rc == FS_ENOTMOUNT || rc == -ENOENT ? CLI_NOTFOUND : CLI_FAIL;
	}
	return CLI_OK;
}
