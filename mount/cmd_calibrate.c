/* cmd_calibrate.c: `strata calibrate`: measure restore mechanisms on this machine and write the policy file. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "store/store.h"
#include "vmm/vmm.h"

#define ROUNDS 40
/* A cold restore may spend this much mapping ranges (docs/restore.md). */
#define MAP_BUDGET_NS 250000.0

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_d);
	return v[n / 2];
}

static int call_touch(struct vmm_sandbox *sb, int64_t pages)
{
	struct vmm_value v = { .type = VMM_I64, .i64 = pages };
	struct vmm_result r = { 0 };

	return vmm_sandbox_call(sb, "touch_pages", &v, 1, &r);
}

/* Median of (call writing `pages` + restore) under `mode`. */
static int measure_mode(struct vmm_sandbox *sb, enum vmm_reset_mode mode, int64_t pages, double *out)
{
	double v[ROUNDS];
	int rc;

	if ((rc = vmm_sandbox_set_reset(sb, mode, 0)) < 0)
		return rc;
	for (int i = 0; i < ROUNDS + 3; i++) {
		double t0 = now_ns();
		if ((rc = call_touch(sb, pages)) < 0 || (rc = vmm_sandbox_restore(sb)) < 0)
			return rc;
		if (i >= 3)
			v[i - 3] = now_ns() - t0;
	}
	*out = median(v, ROUNDS);
	return 0;
}

/* Median cost of one MAP_FIXED private mapping of a file range. */
static double measure_map(void)
{
	char path[] = "/tmp/strata-calibrate-XXXXXX";
	int fd = mkstemp(path);
	double v[ROUNDS] = { 0 };

	if (fd < 0)
		return 7000;
	unlink(path);
	if (ftruncate(fd, 64 * 4096) < 0) {
		close(fd);
		return 7000;
	}
	uint8_t *area = mmap(NULL, 64 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	for (int i = 0; i < ROUNDS && area != MAP_FAILED; i++) {
		double t0 = now_ns();
		for (int k = 0; k < 32; k++)
			mmap(area + 2 * k * 4096, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd, k * 4096);
		v[i] = (now_ns() - t0) / 32;
	}
	if (area != MAP_FAILED)
		munmap(area, 64 * 4096);
	close(fd);
	return median(v, ROUNDS);
}

static const char *guest_default(void)
{
	static char buf[4096];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 64);

	if (n <= 0)
		return "simpleguest.elf";
	buf[n] = 0;
	char *s = strrchr(buf, '/');
	if (s) {
		*s = 0;
		if ((s = strrchr(buf, '/')))
			strcpy(s, "/vmm/guest/simpleguest.elf");
	}
	return buf;
}

int cmd_calibrate(struct cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "guest", required_argument, NULL, 'g' },
		{ "backend", required_argument, NULL, 'B' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	char path[4096], dir[PATH_MAX], sdir[PATH_MAX + 8];
	const char *tmpdir = getenv("TMPDIR");
	const char *out = NULL, *guest = getenv("STRATA_GUEST");
	int c, rc, status = CLI_FAIL;

	while ((c = getopt_long(argc, argv, "o:g:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o': out = optarg; break;
		case 'g': guest = optarg; break;
		case 'B':
			if (!cli_backend_use(cli, optarg))
				return CLI_USAGE;
			break;
		case 'h':
			printf("usage: strata calibrate [--output FILE] [--guest GUEST.elf] [--backend B]\n\n"
			       "Measures how this machine restores sandboxes (rewrite written pages in\n"
			       "place vs drop them; the cost of mapping a range) and writes the policy\n"
			       "sandboxes read at creation: FILE, else $STRATA_POLICY, else\n"
			       "$XDG_CONFIG_HOME/strata/policy (~/.config/strata/policy).\n");
			return CLI_OK;
		default:
			return cli_usage_hint(argv[0]);
		}
	}
	bool named = true;
	if (!out) {
		if (cli_policy_path(path, sizeof(path), &named) < 0) {
			cli_err(cli, "calibrate: no HOME or XDG_CONFIG_HOME; say --output FILE");
			return CLI_USAGE;
		}
		out = path;
	}
	if (!guest || !*guest)
		guest = guest_default();

	struct st_store *st = NULL;
	struct vmm_sandbox *sb = NULL;
	struct vmm_error err;
	struct st_manifest *m = NULL;
	/* No host: the measurement starts from nothing kept and the default policy. */
	struct vmm_config cfg = { .heap_size = 64ull << 20, .backend = cli->backend };
	/* The sandbox's snapshot goes to a temp store, removed at the end. */
	if (!tmpdir || !*tmpdir)
		tmpdir = "/tmp";
	int len = snprintf(dir, sizeof(dir), "%s/strata-calibrate-store-XXXXXX", tmpdir);
	if (len >= (int)sizeof(dir) || !mkdtemp(dir)) {
		cli_err(cli, "calibrate: cannot make a temp dir in %s: %s", tmpdir,
			strerror(len >= (int)sizeof(dir) ? ENAMETOOLONG : errno));
		return CLI_FAIL;
	}
	snprintf(sdir, sizeof(sdir), "%s/store", dir);
	struct st_store_opts so = { .sync = ST_SYNC_NONE };
	if ((rc = st_store_init(sdir, &so)) < 0 || (rc = st_store_open(sdir, 0, &st)) < 0) {
		cli_err(cli, "calibrate: temp store: %s", st_strerror(rc));
		goto out_rm;
	}
	if ((rc = vmm_sandbox_new(guest, &cfg, &sb, &err)) < 0) {
		cli_err(cli, "calibrate: cannot start %s: %s", guest, err.message);
		goto out_rm;
	}
	st_id id;
	if ((rc = vmm_sandbox_capture(sb, st, &m)) < 0 || (rc = st_manifest_id(m, &id, NULL, 0)) < 0 ||
	    (rc = vmm_sandbox_rebase(sb, m, &id)) < 0) {
		cli_err(cli, "calibrate: cannot snapshot the sandbox: %s", vmm_strerror(rc));
		goto out_rm;
	}
	/* A light call (16 pages) and a 1 MiB call, each + restore, both modes. */
	double rw_light, rw_heavy, dr_light, dr_heavy;
	if ((rc = measure_mode(sb, VMM_RESET_REWRITE, 16, &rw_light)) < 0 ||
	    (rc = measure_mode(sb, VMM_RESET_REWRITE, 256, &rw_heavy)) < 0 ||
	    (rc = measure_mode(sb, VMM_RESET_DROP, 16, &dr_light)) < 0 ||
	    (rc = measure_mode(sb, VMM_RESET_DROP, 256, &dr_heavy)) < 0) {
		cli_err(cli, "calibrate: measuring failed: %s", vmm_strerror(rc));
		goto out_rm;
	}
	/* Finding written pages: each mechanism this kernel has, after the same
	 * calls (rewrite mode, the default); the faster is written down. */
	static const enum vmm_dirty_mech mechs[2] = { VMM_DIRTY_SCAN, VMM_DIRTY_READ };
	double dirty_ns[2] = { -1, -1 };
	int best = -1;
	for (int k = 0; k < 2; k++) {
		double light, heavy;
		if (vmm_sandbox_set_dirty(sb, mechs[k]) < 0)
			continue;  /* PAGEMAP_SCAN on a kernel before 6.7 */
		if ((rc = measure_mode(sb, VMM_RESET_REWRITE, 16, &light)) < 0 ||
		    (rc = measure_mode(sb, VMM_RESET_REWRITE, 256, &heavy)) < 0) {
			cli_err(cli, "calibrate: measuring %s failed: %s", vmm_dirty_name(mechs[k]), vmm_strerror(rc));
			goto out_rm;
		}
		dirty_ns[k] = light + heavy;
		if (best < 0 || dirty_ns[k] < dirty_ns[best])
			best = k;
	}
	if (best < 0) {
		cli_err(cli, "calibrate: no way to find written pages works here");
		goto out_rm;
	}
	double map_ns = measure_map();
	bool rewrite = rw_light + rw_heavy <= dr_light + dr_heavy;
	unsigned cap = (unsigned)(MAP_BUDGET_NS / (map_ns > 100 ? map_ns : 100));
	cap = cap < 16 ? 16 : cap > 1024 ? 1024 : cap;

	/* The default location's directories are made; a named file's are the user's. */
	char *slash = strrchr(path, '/');
	if (!named && slash) {
		*slash = 0;
		char *s2 = strrchr(path, '/');
		if (s2) {
			*s2 = 0;
			mkdir(path, 0755);
			*s2 = '/';
		}
		mkdir(path, 0755);
		*slash = '/';
	}
	struct vmm_policy pol;
	vmm_policy_defaults(&pol);
	pol.mode = rewrite ? VMM_RESET_REWRITE : VMM_RESET_DROP;
	pol.range_cap = cap;
	/* auto picks PAGEMAP_SCAN where the kernel has it: a policy file that
	 * moves to an older kernel keeps working. */
	pol.dirty = mechs[best] == VMM_DIRTY_SCAN ? VMM_DIRTY_AUTO : mechs[best];
	struct vmm_policy_note notes[8];
	size_t nnotes = 0;
	notes[nnotes++] = (struct vmm_policy_note){ "rewrite_16_pages_us", rw_light / 1e3 };
	notes[nnotes++] = (struct vmm_policy_note){ "rewrite_256_pages_us", rw_heavy / 1e3 };
	notes[nnotes++] = (struct vmm_policy_note){ "drop_16_pages_us", dr_light / 1e3 };
	notes[nnotes++] = (struct vmm_policy_note){ "drop_256_pages_us", dr_heavy / 1e3 };
	notes[nnotes++] = (struct vmm_policy_note){ "map_range_us", map_ns / 1e3 };
	for (int k = 0; k < 2; k++)
		if (dirty_ns[k] >= 0)
			notes[nnotes++] = (struct vmm_policy_note){
				k ? "pagemap_read_16_and_256_pages_us" : "pagemap_scan_16_and_256_pages_us", dirty_ns[k] / 1e3 };
	char why[4300];
	if ((rc = vmm_policy_write(out, &pol, notes, nnotes, why, sizeof(why))) < 0) {
		cli_err(cli, "calibrate: %s", why);
		goto out_rm;
	}
	printf("call+restore, 16 pages written: rewrite %.1f us, drop %.1f us\n", rw_light / 1e3, dr_light / 1e3);
	printf("call+restore, 1 MiB written:    rewrite %.1f us, drop %.1f us\n", rw_heavy / 1e3, dr_heavy / 1e3);
	printf("mapping one range: %.2f us -> range cap %u\n", map_ns / 1e3, cap);
	for (int k = 0; k < 2; k++) {
		if (dirty_ns[k] >= 0)
			printf("written pages by %s: %.1f us (call+restore, 16 + 256 pages)%s\n",
			       vmm_dirty_name(mechs[k]), dirty_ns[k] / 1e3, k == best ? " -> chosen" : "");
		else
			printf("written pages by %s: not on this kernel\n", vmm_dirty_name(mechs[k]));
	}
	printf("policy (reset = %s) written to %s\n", rewrite ? "rewrite" : "drop", out);
	status = CLI_OK;
out_rm:
	st_manifest_free(m);
	vmm_sandbox_free(sb);
	st_store_close(st);
	if ((rc = cli_rm_tree(dir)) < 0)
		cli_info(cli, "calibrate: could not remove %s: %s", dir, strerror(-rc));
	return status;
}
