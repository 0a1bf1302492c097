/* cmd_pool.c: `strata pool`: restore N sandboxes from one snapshot, call each, report time and memory. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "cli_api.h"

/* Most sandboxes one pool command restores (strata_pool_open_dir's bound). */
#define POOL_MAX 100000u

static void pool_usage(FILE *f)
{
	fprintf(f,
		"usage: strata pool SNAPSHOT [-n N] [--verify] [--via-fuse] [--map-files] [--call FN [--] [ARGS...]]\n"
		"\n"
		"Restores N sandboxes (default 100) from one snapshot -- a snapshot directory\n"
		"(a mount's snapshots/NAME, an export, a copy) or a tag/id in the store --\n"
		"calls FN in each, and reports the time per restore and the memory each\n"
		"sandbox adds (PSS from /proc/self/smaps: its private pages and its share of\n"
		"the snapshot's layer mappings): the sandboxes share the\n"
		"snapshot's pages, so each costs about what it writes.\n"
		"\n"
		"  -n, --count N   sandboxes to restore (1..%u)\n"
		"  --call FN       call FN (with ARGS parsed per its signature) in each\n"
		"  --verify        hash every layer before mapping it\n"
		"  --via-fuse      on a strata mount, map the FUSE files instead of the backing blobs\n"
		"  --map-files     map a plain directory's layer files directly instead of a private\n"
		"                  copy (only for files nobody will truncate while sandboxes run)\n"
		"  --backend B     kvm, process or auto (default: strata's --backend, else auto)\n"
		"\n"
		"Each sandbox has the host functions strata run registers: host_add(i,i)->i,\n"
		"host_upper(s)->s, clock_gettime(i)->i and random_get(i)->b. An ARG that starts\n"
		"with '-' goes after --, unless it is a negative number or its name (up to an\n"
		"'=') holds a space, tab or newline (a Lua chunk that starts with a comment).\n",
		POOL_MAX);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Is this smaps mapping a snapshot layer: a file named by its 32-hex id
 * (layers/ID, blobs/ab/ID) or a private copy (memfd "strata-layer")? */
static bool is_layer_mapping(const char *line)
{
	const char *path = strchr(line, '/');
	size_t n;

	if (!path)
		return false;
	if (strncmp(path, "/memfd:strata-layer", 19) == 0)
		return true;
	const char *base = strrchr(path, '/') + 1;
	n = strspn(base, "0123456789abcdef");
	return n == 32 && (base[n] == '\n' || base[n] == ' ' || base[n] == 0);
}

/*
 * What sandboxes cost this process, in KiB: Pss_Anon (their private pages)
 * and the PSS of the snapshot's layer mappings (pages shared by every
 * sandbox of it). Other file pages are left out: the binary's and the
 * libraries' PSS moves whenever another process maps them.
 */
static int read_pss(unsigned long long *anon, unsigned long long *layers)
{
	FILE *f = fopen("/proc/self/smaps_rollup", "re");
	char line[512];
	bool in_layer = false;
	unsigned long long v;

	if (!f)
		return -errno;
	*anon = *layers = 0;
	while (fgets(line, sizeof(line), f))
		sscanf(line, "Pss_Anon: %llu kB", anon);
	fclose(f);
	/* Per mapping: Pss less Anonymous, as a written page of a layer
	 * mapping is a private copy already counted in Pss_Anon (smaps has no
	 * Pss_Anon per mapping; a private copy's PSS is its size). */
	if (!(f = fopen("/proc/self/smaps", "re")))
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (!(line[0] >= 'A' && line[0] <= 'Z')) {  /* a mapping's header, not a "Key: value" line */
			in_layer = is_layer_mapping(line);
			continue;
		}
		if (in_layer && sscanf(line, "Pss: %llu kB", &v) == 1)
			*layers += v;
		else if (in_layer && sscanf(line, "Anonymous: %llu kB", &v) == 1)
			*layers -= v;
	}
	fclose(f);
	return 0;
}

/* A call's message without the "FN: " strata_sandbox_call puts first. */
static const char *after_fn(const char *msg, const char *fn)
{
	size_t n = strlen(fn);

	return strncmp(msg, fn, n) == 0 && strncmp(msg + n, ": ", 2) == 0 ? msg + n + 2 : msg;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

int cmd_pool(struct cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "count", required_argument, NULL, 'n' },
		{ "call", required_argument, NULL, 'c' },
		{ "verify", no_argument, NULL, 'V' },
		{ "via-fuse", no_argument, NULL, 'F' },
		{ "map-files", no_argument, NULL, 'M' },
		{ "backend", required_argument, NULL, 'B' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	unsigned long long n = 100;
	unsigned flags = cli_snapdir_flags();
	const char *fn = NULL;
	int c, status;

	/* Options anywhere and run's operand rule (cli_getopt_operands): a
	 * chunk such as `--call eval "-- a comment ..."` is an ARG. */
	char **pos = argv + 1;
	int npos = 0;
	while ((c = cli_getopt_operands(argc, argv, "+n:c:h", opts, pos, &npos)) != -1) {
		switch (c) {
		case 'n':
			if (!cli_parse_u64(optarg, &n) || n == 0 || n > POOL_MAX) {
				cli_err(cli, "pool: -n wants a count from 1 to %u, not '%s'", POOL_MAX, optarg);
				return CLI_USAGE;
			}
			break;
		case 'c':
			if (fn) {
				cli_err(cli, "pool: one --call FN (every sandbox calls it), not '%s' after '%s'", optarg, fn);
				return CLI_USAGE;
			}
			fn = optarg;
			break;
		case 'V': flags |= STRATA_DIR_VERIFY; break;
		case 'F': flags |= STRATA_DIR_VIA_FUSE; break;
		case 'M': flags |= STRATA_DIR_MAP_FILES; break;
		case 'B':
			if (!cli_backend_use(cli, optarg))
				return CLI_USAGE;
			break;
		case 'h': pool_usage(stdout); return CLI_OK;
		default: return cli_usage_hint(argv[0]);
		}
	}
	if (npos == 0) {
		cli_err(cli, "pool: which snapshot? (strata pool SNAPSHOT -n N)");
		return CLI_USAGE;
	}
	const char *target = pos[0];
	char **args = pos + 1;
	int nargs = npos - 1;
	if (!fn && nargs > 0) {
		cli_err(cli, "pool: unexpected argument '%s'", args[0]);
		return CLI_USAGE;
	}
	if (nargs > 8) {
		cli_err(cli, "pool: too many arguments");
		return CLI_USAGE;
	}

	unsigned long long anon0, layers0, anon1, layers1;
	strata_sandbox **sb = calloc(n, sizeof(*sb));
	uint64_t *t_restore = calloc(n, sizeof(*t_restore)), *t_call = calloc(n, sizeof(*t_call));
	uint64_t *t_again = calloc(n, sizeof(*t_again));
	struct strata_value vals[8];
	void *owned[8] = { 0 };
	unsigned made = 0;

	if (!sb || !t_restore || !t_call || !t_again) {
		cli_err(cli, "pool: out of memory");
		status = CLI_FAIL;
		goto out;
	}
	/* Each sandbox holds a VM, a vCPU and its layer files open. */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	/* Each sandbox has the host functions strata run gives a guest (its host's). */
	if ((status = cli_host_open(cli)) != CLI_OK)
		goto out;
	/* The first sandbox says what the snapshot is. */
	read_pss(&anon0, &layers0);
	uint64_t t0 = now_ns();
	if ((status = cli_sandbox_open(cli, "pool", target, flags, false, &sb[0])) != CLI_OK)
		goto out;
	t_restore[0] = now_ns() - t0;
	uint64_t on_mount = 0, direct = 0, nlayers = 0, layer_pages = 0;
	strata_sandbox_info(sb[0], STRATA_INFO_ON_MOUNT, &on_mount);
	strata_sandbox_info(sb[0], STRATA_INFO_DIRECT_LAYERS, &direct);
	strata_sandbox_info(sb[0], STRATA_INFO_LAYERS, &nlayers);
	strata_sandbox_info(sb[0], STRATA_INFO_LAYER_PAGES, &layer_pages);
	if (on_mount)
		printf("%s is on a strata mount: %u of %u layer(s) mapped from their backing blobs\n", target,
		       (unsigned)direct, (unsigned)nlayers);
	char sig[STRATA_SIG_LEN];
	bool have_sig = false;
	for (made = 0; made < n; made++) {
		int rc;
		/* The others from the snapshot the first read (a store's
		 * manifest is not read again; a directory's parse and private
		 * copy are the host's). */
		if (made > 0) {
			t0 = now_ns();
			rc = strata_sandbox_clone(sb[0], &sb[made]);
			t_restore[made] = now_ns() - t0;
			if (rc < 0) {
				cli_err(cli, "pool: restore %u of %llu failed: %s", made + 1, n, strata_errmsg());
				status = CLI_FAIL;
				goto out;
			}
		}
		if (made == 0)
			cli_info(cli, "pool: the sandboxes run on the %s backend",
				 cli_backend_name(strata_sandbox_backend(sb[0])));
		if (!fn)
			continue;
		if (!have_sig) {
			if (strata_sandbox_signature(sb[made], fn, sig) < 0) {
				cli_err(cli, "pool: the snapshot's guest has no function '%s'", fn);
				status = CLI_USAGE;
				made++;
				goto out;
			}
			if ((status = cli_build_args(cli, fn, sig, args, nargs, vals, owned)) != CLI_OK) {
				made++;
				goto out;
			}
			have_sig = true;
		}
		struct strata_result res = { 0 };
		t0 = now_ns();
		rc = strata_sandbox_call(sb[made], fn, vals, (size_t)nargs, 0, &res);
		t_call[made] = now_ns() - t0;
		if (rc < 0) {
			cli_err(cli, "pool: %s in sandbox %u: %s", fn, made + 1, after_fn(strata_errmsg(), fn));
			status = CLI_GUEST;
			made++;
			goto out;
		}
		if (made == 0) {
			printf("sandbox 1: %s -> ", fn);
			cli_print_result(&res, false);
		}
		strata_result_clear(&res);
	}
	read_pss(&anon1, &layers1);
	qsort(t_restore, n, sizeof(*t_restore), cmp_u64);
	qsort(t_call, n, sizeof(*t_call), cmp_u64);
	/* Reuse: each sandbox put back to the snapshot in place and called
	 * again, the way a pool serves requests. */
	if (fn) {
		for (unsigned i = 0; i < made; i++) {
			struct strata_result res = { 0 };
			t0 = now_ns();
			int rc = strata_sandbox_restore(sb[i]);
			if (rc == 0)
				rc = strata_sandbox_call(sb[i], fn, vals, (size_t)nargs, 0, &res);
			t_again[i] = now_ns() - t0;
			if (rc == 0 && i == 0) {
				printf("sandbox 1 after a restore in place: %s -> ", fn);
				cli_print_result(&res, false);
			}
			strata_result_clear(&res);
			if (rc < 0) {
				cli_err(cli, "pool: restore and %s in sandbox %u: %s", fn, i + 1,
					after_fn(strata_errmsg(), fn));
				status = CLI_GUEST;
				goto out;
			}
		}
		qsort(t_again, n, sizeof(*t_again), cmp_u64);
	}
	printf("restored %llu sandboxes from %s\n", n, target);
	printf("  restore (snapshot -> ready): median %.1f us, p10 %.1f us, p90 %.1f us\n", t_restore[n / 2] / 1e3,
	       t_restore[n / 10] / 1e3, t_restore[n * 9 / 10] / 1e3);
	if (fn)
		printf("  first call (%s):     median %.1f us, p10 %.1f us, p90 %.1f us\n", fn, t_call[n / 2] / 1e3,
		       t_call[n / 10] / 1e3, t_call[n * 9 / 10] / 1e3);
	if (fn)
		printf("  then restore in place + call: median %.1f us, p10 %.1f us, p90 %.1f us (the reuse path)\n",
		       t_again[n / 2] / 1e3, t_again[n / 10] / 1e3, t_again[n * 9 / 10] / 1e3);
	printf("  memory (PSS): %.1f KiB per sandbox (%.1f KiB private, %.1f KiB shared file pages); "
	       "snapshot %llu KiB of layers\n",
	       ((double)anon1 - (double)anon0 + (double)layers1 - (double)layers0) / n,
	       ((double)anon1 - (double)anon0) / n, ((double)layers1 - (double)layers0) / n,
	       (unsigned long long)(layer_pages * 4096 / 1024));
out:
	for (unsigned i = 0; i < n && sb; i++)
		strata_sandbox_free(sb[i]);
	for (int i = 0; i < 8; i++)
		free(owned[i]);
	free(sb);
	free(t_restore);
	free(t_call);
	free(t_again);
	cli_snap_close();
	return status;
}
