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
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
		dup2(null, STDERR_FILENO);
		close(null);
	}
}

static void mount_usage(FILE *f)
{
	fprintf(f,
		"usage: strata mount [STORE] MOUNTPOINT [-f] [-d] [-o OPTS] [--log FILE]\n"
		"                    [--read-mode direct|dontneed|cached] [--stage-timeout SEC]\n"
		"\n"
		"Mount a store (default: --store) as a filesystem: snapshots/NAME/manifest.json,\n"
		"snapshots/NAME/layers/<id>, blobs/<id>, memory/NAME. Copying a snapshot\n"
		"directory into snapshots/ imports it; rm -r removes a tag, mv renames one.\n"
		"Runs in the background once the mount is live (docs/fs.md).\n"
		"\n"
		"  -f               stay in the foreground (log to stderr unless --log)\n"
		"  -d               libfuse's request trace (implies -f)\n"
		"  -o OPTS          options passed to libfuse (e.g. allow_other), repeatable\n"
		"  --log FILE       where the daemon says why it refused something\n"
		"                   (default: STORE/mount.log)\n"
		"  --read-mode M    how the daemon reads backing blobs (default: direct)\n"
		"  --stage-timeout SEC  drop an unfinished copy idle this long (default 600)\n"
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

int cmd_mount(struct cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "foreground", no_argument, NULL, 'f' },
		{ "debug", no_argument, NULL, 'd' },
		{ "log", required_argument, NULL, 'l' },
		{ "read-mode", required_argument, NULL, 'r' },
		{ "stage-timeout", required_argument, NULL, 't' },
		{ "poll-ms", required_argument, NULL, 'p' },
		{ "threads", required_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct fs_config cfg = { 0 };
	struct mount_log log = { 0 };
	struct ready_pipe rp = { -1 };
	char *fuse_opts = NULL, store[PATH_MAX], mp[PATH_MAX], logpath[PATH_MAX + 16];
	const char *log_arg = NULL, *store_arg = cli->store;
	bool fg = false;
	unsigned long long v;
	int c, rc = CLI_USAGE;

	cfg.creds = cli_registry_creds; /* lazy layers' chunks (docs/lazy.md) */
	cfg.creds_ctx = cli;
	while ((c = getopt_long(argc, argv, "fdo:h", opts, NULL)) != -1) {
		switch (c) {
		case 'f': fg = true; break;
		case 'd': fg = true; cfg.debug = true; break;
		case 'o':
			if (join_opt(&fuse_opts, optarg) < 0) {
				cli_err(cli, "mount: out of memory");
				return CLI_FAIL;
			}
			break;
		case 'l': log_arg = optarg; break;
		case 'r':
			if (fs_read_mode_parse(optarg, &cfg.read_mode) < 0) {
				cli_err(cli, "mount: --read-mode must be direct, dontneed or cached");
				goto out;
			}
			break;
		case 't':
			if (!cli_parse_u64(optarg, &v) || v == 0 || v > 86400 * 7) {
				cli_err(cli, "mount: --stage-timeout needs seconds (1..604800)");
				goto out;
			}
			cfg.stage_timeout_s = (unsigned)v;
			break;
		case 'p':
			if (!cli_parse_u64(optarg, &v) || v == 0 || v > 60000) {
				cli_err(cli, "mount: --poll-ms needs milliseconds (1..60000)");
				goto out;
			}
			cfg.poll_ms = (unsigned)v;
			break;
		case 'T':
			if (!cli_parse_u64(optarg, &v) || v == 0 || v > 256) {
				cli_err(cli, "mount: --threads needs 1..256");
				goto out;
			}
			cfg.max_threads = (unsigned)v;
			break;
		case 'h': mount_usage(stdout); rc = CLI_OK; goto out;
		default: mount_usage(stderr); goto out;
		}
	}
	if (argc - optind == 2) {
		store_arg = argv[optind++];
	} else if (argc - optind != 1) {
		mount_usage(stderr);
		goto out;
	}
	if (!realpath(store_arg, store)) {
		cli_err(cli, "mount: store %s: %s", store_arg, strerror(errno));
		rc = CLI_NOTFOUND;
		goto out;
	}
	const char *mp_arg = argv[optind];
	int st = fs_mountpoint_state(mp_arg);
	if (st == FS_MP_STALE) {
		/* Its daemon died (kill -9, crash): nothing serves it, so take it down. */
		fprintf(stderr, "strata: %s: %s; unmounting it first\n", mp_arg, fs_strerror(FS_ESTALE_MOUNT));
		int urc = fs_umount(mp_arg, true);
		if (urc < 0) {
			cli_err(cli, "mount: %s: cannot unmount the stale mount: %s", mp_arg, fs_strerror(urc));
			rc = CLI_FAIL;
			goto out;
		}
		st = fs_mountpoint_state(mp_arg);
	}
	if (st == FS_MP_MOUNTED) {
		cli_err(cli, "mount: %s: %s (strata umount %s)", mp_arg, fs_strerror(FS_EMOUNTED), mp_arg);
		rc = CLI_FAIL;
		goto out;
	}
	if (st < 0 || !realpath(mp_arg, mp)) {
		cli_err(cli, "mount: mountpoint %s: %s", mp_arg, st < 0 ? strerror(-st) : strerror(errno));
		rc = CLI_NOTFOUND;
		goto out;
	}
	if (!log_arg && !fg) {
		snprintf(logpath, sizeof(logpath), "%s/mount.log", store);
		log_arg = logpath;
	}
	if (log_arg) {
		log.f = fopen(log_arg, "ae");
		if (!log.f) {
			cli_err(cli, "mount: log %s: %s", log_arg, strerror(errno));
			rc = CLI_FAIL;
			goto out;
		}
		setvbuf(log.f, NULL, _IOLBF, 0);
	} else {
		log.to_stderr = true;
	}
	cfg.store = store;
	cfg.mountpoint = mp;
	cfg.fuse_opts = fuse_opts;
	cfg.log = mount_log;
	cfg.log_ctx = &log;

	if (fg) {
		rc = fs_serve(&cfg);
		if (rc < 0)
			cli_err(cli, "mount: %s", fs_strerror(rc));
		rc = rc < 0 ? CLI_FAIL : CLI_OK;
		goto out;
	}

	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		cli_err(cli, "mount: pipe: %s", strerror(errno));
		rc = CLI_FAIL;
		goto out;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		cli_err(cli, "mount: fork: %s", strerror(errno));
		rc = CLI_FAIL;
		goto out;
	}
	if (pid == 0) {
		close(pfd[0]);
		setsid();
		if (chdir("/") < 0) {
			/* paths are absolute already */
		}
		rp.fd = pfd[1];
		cfg.ready = mount_ready;
		cfg.ready_ctx = &rp;
		int src = fs_serve(&cfg);
		if (rp.fd >= 0) { /* never got ready: tell the parent why */
			if (write(rp.fd, &src, sizeof(src)) < 0) {
				/* nothing more to do */
			}
			close(rp.fd);
		} else if (src < 0) {
			mount_log(&log, FS_LOG_ERR, fs_strerror(src));
		}
		if (log.f)
			fclose(log.f);
		free(fuse_opts);
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
		rc = CLI_FAIL;
	} else if (code < 0) {
		cli_err(cli, "mount: %s: %s", mp, fs_strerror(code));
		rc = CLI_FAIL;
	} else {
		cli_info(cli, "mounted %s at %s (daemon pid %d, log %s)", store, mp, (int)pid, log_arg);
		rc = CLI_OK;
	}
out:
	if (log.f)
		fclose(log.f);
	free(fuse_opts);
	return rc;
}

int cmd_umount(struct cli *cli, int argc, char **argv)
{
	bool lazy = false;
	int c;

	while ((c = getopt(argc, argv, "lh")) != -1) {
		switch (c) {
		case 'l': lazy = true; break;
		case 'h':
			printf("usage: strata umount [-l] MOUNTPOINT\n\nUnmount a strata mount, live or stale "
			       "(its daemon died). -l detaches a busy mount now and finishes when it is idle.\n");
			return CLI_OK;
		default:
			fprintf(stderr, "usage: strata umount [-l] MOUNTPOINT\n");
			return CLI_USAGE;
		}
	}
	if (argc - optind != 1) {
		fprintf(stderr, "usage: strata umount [-l] MOUNTPOINT\n");
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
