/* cmd_run.c: `strata run`: load a guest ELF into a sandbox and call its functions. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli_api.h"

#define RUN_FILE_MAX (1ull << 30)
/* The input and output buffers' size unless --input, --output or ARGS say
 * otherwise (strata_host_set_sizes's default). */
#define RUN_DEFAULT_IO (16ull << 10)

static void run_usage(FILE *f)
{
	fprintf(f,
		"usage: strata run GUEST.elf|TAG|ID|SNAPSHOT_DIR --call FN [ARGS...] [options]\n"
		"       strata run GUEST.elf --list\n"
		"\n"
		"Creates a sandbox from a guest ELF (built with the strata guest SDK) and\n"
		"calls FN with ARGS, parsed per the function's signature: an integer for\n"
		"'i', text for 's', and for 'b' text or @FILE for a file's bytes. The\n"
		"result is printed (bytes as hex unless --raw). Host functions\n"
		"host_add(i,i)->i, host_upper(s)->s, clock_gettime(i)->i (the clock the\n"
		"guest C library's time() and clock_gettime read) and random_get(i)->b\n"
		"(WASI's randomness) are available to the guest; guest logs go to stderr.\n"
		"\n"
		"  --call FN        the guest function to call; several --call FN [ARGS...] run\n"
		"                   in order in the one sandbox, each with the ARGS after it\n"
		"  --list           list the guest's functions and signatures\n"
		"  --heap SIZE      guest heap (default: what the guest declares, else 128K; e.g. 8M)\n"
		"  --stack SIZE     guest stack (default: what the guest declares, else 64K)\n"
		"  --input SIZE     input buffer for arguments (default: 16K or what ARGS need)\n"
		"  --output SIZE    output buffer for results (default 16K)\n"
		"  --timeout T      per-call timeout: seconds, or with ms/s suffix (default none)\n"
		"  --repeat N       call each FN N times (state persists); print the last result\n"
		"                   and timing\n"
		"  --snapshot TAG   after the calls, capture the sandbox into the store under TAG\n"
		"                   (checked first: a valid name, a store, TAG not yet naming a\n"
		"                   snapshot, a directory's layers in the store)\n"
		"  --force          with --snapshot, move TAG if it names another snapshot\n"
		"  --raw            print 's' and 'b' results as their bytes (no hex, no newline;\n"
		"                   into a pipe or file only)\n"
		"  --record-working-set  after the first call, record the snapshot pages the sandbox\n"
		"                   touched since its restore and link them to the snapshot (a lazy\n"
		"                   pull fetches them first; strata show reports them)\n"
		"  --via-fuse       on a strata mount, map the layer files through the mount (a\n"
		"                   lazy snapshot's pages are then fetched as the guest touches them)\n"
		"  --backend B      kvm, process or auto (default: strata's --backend, else auto)\n"
		"  --core FILE      if the call fails in the guest (fault, abort, timeout), write an\n"
		"                   ELF core of its registers and memory: gdb GUEST.elf FILE\n"
		"\n"
		"A TAG or ID restores that snapshot from the store (--store); a directory\n"
		"holding manifest.json (a mount's snapshots/NAME, an export) restores from it.\n"
		"\n"
		"Exit status 5 when the guest faults, aborts, times out or breaks the ABI; a\n"
		"fault names the guest function and line where the ELF has symbols (-g).\n");
}

static void guest_log(void *ctx, int level, const char *msg, size_t len)
{
	static const char *const lv[] = { "error", "warn", "info", "debug" };

	(void)ctx;
	char *e = cli_esc_dup(msg, len);

	fprintf(stderr, "guest %s: %s\n", lv[level & 3], e ? e : "(out of memory)");
	free(e);
}

/* After a guest failure: where it faulted, and the core file asked for. */
static void guest_debug(const struct cli *cli, strata_sandbox *sb, const char *path, int rc, const char *core)
{
	uint64_t rip = 0;
	char where[512];

	if (rc == STRATA_E_GUEST_FAULT || rc == STRATA_E_STACK_OVERFLOW) {
		strata_sandbox_info(sb, STRATA_INFO_FAULT_RIP, &rip);
		int w = cli_guest_where(path, rip, where, sizeof(where));
		if (w == 0)
			cli_err(cli, "run: the guest faulted in %s", where);
		else if (w == 1)
			cli_err(cli, "run: no symbols for rip 0x%llx in %s: build the guest with -g",
				(unsigned long long)rip, path);
	}
	if (core && strata_sandbox_core(sb, core) == 0)
		cli_err(cli, "run: wrote the guest's core to %s (gdb GUEST.elf %s)", core, core);
	else if (core)
		cli_err(cli, "run: --core: %s", strata_errmsg());
}

static bool parse_timeout(const char *s, uint64_t *ns)
{
	char *end;
	double v;
	double mul = 1e9;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || v < 0)
		return false;
	if (strcmp(end, "ms") == 0)
		mul = 1e6;
	else if (*end && strcmp(end, "s") != 0)
		return false;
	if (v * mul > 1e18)
		return false;
	*ns = (uint64_t)(v * mul);
	return true;
}

static bool parse_i64(const char *s, int64_t *out)
{
	char *end;

	errno = 0;
	long long v = strtoll(s, &end, cli_number_base(s));
	if (errno || end == s || *end)
		return false;
	*out = v;
	return true;
}

static int read_file(const char *path, void **data, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -errno;
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);
	int rc = 0;
	while (buf) {
		size_t got = fread(buf + n, 1, cap - n, f);
		n += got;
		if (got == 0)
			break;
		if (n == cap) {
			if (cap >= RUN_FILE_MAX) {
				rc = -EFBIG;
				break;
			}
			char *more = realloc(buf, cap * 2);
			if (!more) {
				rc = -ENOMEM;
				break;
			}
			buf = more;
			cap *= 2;
		}
	}
	if (!buf)
		rc = -ENOMEM;
	else if (ferror(f))
		rc = -EIO;
	fclose(f);
	if (rc < 0) {
		free(buf);
		return rc;
	}
	*data = buf;
	*len = n;
	return 0;
}

static int exit_for(int rc)
{
	switch (rc) {
	case STRATA_E_GUEST_FAULT: case STRATA_E_STACK_OVERFLOW: case STRATA_E_ABORT: case STRATA_E_BAD_HYPERCALL:
	case STRATA_E_TIMEOUT: case STRATA_E_CANCELLED: case STRATA_E_SHUTDOWN: case STRATA_E_UNEXPECTED_EXIT:
	case STRATA_E_BAD_ADDRESS: case STRATA_E_POISONED: case STRATA_E_GUEST_ERROR:
		return CLI_GUEST;
	case STRATA_E_NO_FUNCTION: case STRATA_E_BAD_ARGS:
		return CLI_USAGE;
	case -ENOENT:
		return CLI_NOTFOUND;
	default:
		return CLI_FAIL;
	}
}

void cli_print_result(const struct strata_result *r, bool raw)
{
	if (raw && (r->type == STRATA_STR || r->type == STRATA_BYTES)) {
		fwrite(r->data, 1, r->len, stdout); /* as they are: no newline, no hex */
		return;
	}
	switch (r->type) {
	case STRATA_VOID:
		break;
	case STRATA_I64:
		printf("%lld\n", (long long)r->i64);
		break;
	case STRATA_STR:
		/* The function's output: byte-exact into a pipe or file, escaped
		 * on a terminal (as ls does), where it could drive the terminal. */
		if (isatty(STDOUT_FILENO))
			fputs(cli_esc_n(r->data, r->len), stdout);
		else
			fwrite(r->data, 1, r->len, stdout);
		putchar('\n');
		break;
	case STRATA_BYTES:
		for (size_t i = 0; i < r->len; i++)
			printf("%02x", ((const unsigned char *)r->data)[i]);
		putchar('\n');
		break;
	}
}

/* The number of parameters of signature sig ("r(pp..)"). */
static int sig_nparams(const char *sig)
{
	const char *open = strchr(sig, '(');

	return open ? (int)strcspn(open + 1, ")") : 0;
}

static int list_one(void *ctx, const char *name, const char *sig)
{
	(void)ctx;
	printf("%s %s\n", cli_esc(name), sig);
	return 0;
}

static int list_functions(const strata_sandbox *sb)
{
	strata_sandbox_functions(sb, list_one, NULL);
	return CLI_OK;
}

/* Parse ARGS per the signature the guest published for fn (cli.h). */
int cli_build_args(const struct cli *cli, const char *fn, const char *sig, char **argv, int argc,
		   struct strata_value *vals, void **owned)
{
	int nparams = sig_nparams(sig);

	if (argc != nparams) {
		cli_err(cli, "run: %s takes %u argument(s) (signature %s), %d given", fn, (unsigned)nparams, sig, argc);
		return CLI_USAGE;
	}
	for (int i = 0; i < argc; i++) {
		char t = sig[2 + i];
		memset(&vals[i], 0, sizeof(vals[i]));
		if (t == 'i') {
			vals[i].type = STRATA_I64;
			if (!parse_i64(argv[i], &vals[i].i64)) {
				cli_err(cli, "run: argument %d of %s must be an integer, not '%s'", i + 1, fn, argv[i]);
				return CLI_USAGE;
			}
		} else if (t == 's') {
			vals[i].type = STRATA_STR;
			vals[i].data = argv[i];
			vals[i].len = strlen(argv[i]);
		} else {
			vals[i].type = STRATA_BYTES;
			if (argv[i][0] == '@') {
				size_t len = 0;
				int rc = read_file(argv[i] + 1, &owned[i], &len);
				if (rc < 0) {
					cli_err(cli, "run: cannot read %s: %s", argv[i] + 1, strerror(-rc));
					return rc == -ENOENT ? CLI_NOTFOUND : CLI_FAIL;
				}
				vals[i].data = owned[i];
				vals[i].len = len;
			} else {
				vals[i].data = argv[i];
				vals[i].len = strlen(argv[i]);
			}
		}
	}
	return CLI_OK;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Most --call FN a command line may give. */
#define RUN_CALLS_MAX 16

/* What --heap, --stack, --input, --output and --timeout give (0: the default). */
struct run_cfg {
	unsigned long long heap_size, stack_size, input_size, output_size;
	uint64_t timeout_ns;
	int backend;
};

struct run_opts {
	struct run_cfg cfg;
	bool list;
	unsigned long long repeat;
	const char *snapshot;
	bool record_ws;
	bool via_fuse;
	bool force;
	bool raw;
	const char *core;
};

/* One parsed option; returns -1 to go on, else an exit status. */
static int run_opt(const struct cli *cli, int c, struct run_opts *o)
{
	unsigned long long *dst = NULL, v;
	const char *what = "";

	switch (c) {
	case 'c': return -1; /* cmd_run keeps each --call in order */
	case 'l': o->list = true; return -1;
	case 'P': o->snapshot = optarg; return -1;
	case 'W': o->record_ws = true; return -1;
	case 'F': o->via_fuse = true; return -1;
	case 'f': o->force = true; return -1;
	case 'R': o->raw = true; return -1;
	case 'C': o->core = optarg; return -1;
	case 'B': return cli_backend_parse(cli, optarg, &o->cfg.backend) ? -1 : CLI_USAGE;
	case 'H': dst = &o->cfg.heap_size; what = "heap"; break;
	case 'S': dst = &o->cfg.stack_size; what = "stack"; break;
	case 'I': dst = &o->cfg.input_size; what = "input"; break;
	case 'O': dst = &o->cfg.output_size; what = "output"; break;
	case 't':
		if (!parse_timeout(optarg, &o->cfg.timeout_ns)) {
			cli_err(cli, "run: --timeout wants seconds (e.g. 2, 0.5, 500ms), not '%s'", optarg);
			return CLI_USAGE;
		}
		return -1;
	case 'r':
		if (!cli_parse_u64(optarg, &o->repeat) || o->repeat == 0) {
			cli_err(cli, "run: --repeat wants a positive count, not '%s'", optarg);
			return CLI_USAGE;
		}
		return -1;
	case 'h': run_usage(stdout); return CLI_OK;
	default: return cli_usage_hint("strata run");
	}
	if (!cli_parse_size(optarg, &v) || v == 0) {
		cli_err(cli, "run: --%s wants a size such as 64K or 8M, not '%s'", what, optarg);
		return CLI_USAGE;
	}
	*dst = v;
	return -1;
}

/* One --call FN [ARGS...] (ARGS as the command line gives them). */
struct run_call {
	const char *fn;
	int first;    /* where among the operands its ARGS start */
	char **args;
	int nargs;
};

/* Call c->fn with its args repeat times in sb, print the last result (and
 * the timing if repeat > 1); after the first call, record the working set
 * if record_ws; a guest failure writes the core asked for (NULL: none).
 * Returns an exit status. */
static int run_call(struct cli *cli, strata_sandbox *sb, const char *path, const struct run_call *c,
		    unsigned long long repeat, bool record_ws, const char *core, bool raw)
{
	const char *fn = c->fn;
	char **args = c->args;
	int nargs = c->nargs;
	char sig[STRATA_SIG_LEN];
	struct strata_value vals[8];
	void *owned[8] = { 0 };
	int rc = 0, status;

	if (strata_sandbox_signature(sb, fn, sig) < 0) {
		cli_err(cli, "run: %s has no function '%s' (try --list)", path, fn);
		return CLI_USAGE;
	}
	if (nargs > 8) {
		cli_err(cli, "run: too many arguments");
		return CLI_USAGE;
	}
	status = cli_build_args(cli, fn, sig, args, nargs, vals, owned);
	if (status != CLI_OK)
		goto out_owned;
	struct strata_result res = { 0 };
	uint64_t t0 = mono_ns();
	for (unsigned long long i = 0; i < repeat; i++) {
		strata_result_clear(&res);
		rc = strata_sandbox_call(sb, fn, vals, (size_t)nargs, 0, &res);
		if (rc < 0)
			break;
		if (i == 0 && record_ws && (status = cli_working_set_record(cli, sb)) != CLI_OK) {
			strata_result_clear(&res);
			goto out_owned;
		}
	}
	uint64_t t1 = mono_ns();
	if (rc < 0) {
		cli_err(cli, "run: %s", strata_errmsg());
		status = exit_for(rc);
		if (status == CLI_GUEST)
			guest_debug(cli, sb, path, rc, core);
		goto out_owned;
	}
	cli_print_result(&res, raw);
	strata_result_clear(&res);
	if (repeat > 1)
		fprintf(stderr, "%llu calls, %.2f us per call\n", repeat, (double)(t1 - t0) / 1e3 / (double)repeat);
out_owned:
	for (int i = 0; i < 8; i++)
		free(owned[i]);
	return status;
}

int cmd_run(struct cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "call", required_argument, NULL, 'c' },
		{ "list", no_argument, NULL, 'l' },
		{ "heap", required_argument, NULL, 'H' },
		{ "stack", required_argument, NULL, 'S' },
		{ "input", required_argument, NULL, 'I' },
		{ "output", required_argument, NULL, 'O' },
		{ "timeout", required_argument, NULL, 't' },
		{ "repeat", required_argument, NULL, 'r' },
		{ "snapshot", required_argument, NULL, 'P' },
		{ "backend", required_argument, NULL, 'B' },
		{ "record-working-set", no_argument, NULL, 'W' },
		{ "via-fuse", no_argument, NULL, 'F' },
		{ "core", required_argument, NULL, 'C' },
		{ "force", no_argument, NULL, 'f' },
		{ "raw", no_argument, NULL, 'R' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct run_opts o = { .cfg.backend = cli->backend, .repeat = 1 };
	struct run_call calls[RUN_CALLS_MAX];
	int ncalls = 0;
	int c, rc = 0, status = CLI_OK;

	/* Options anywhere (`run G --call f 1 2 --snapshot s`) and the
	 * operand rule of cli_getopt_operands; the non-options, in order, are
	 * the target and the ARGS, gathered at argv[1..]. */
	char **pos = argv + 1;
	int npos = 0;
	while ((c = cli_getopt_operands(argc, argv, "+c:lH:S:I:O:t:r:P:B:hWFC:f", opts, pos, &npos)) != -1) {
		if ((rc = run_opt(cli, c, &o)) >= 0)
			return rc;
		if (c == 'c') {
			if (ncalls == RUN_CALLS_MAX) {
				cli_err(cli, "run: at most %d --call options", RUN_CALLS_MAX);
				return CLI_USAGE;
			}
			calls[ncalls].fn = optarg;
			calls[ncalls++].first = npos;
		}
	}
	if (npos == 0) {
		cli_err(cli, "run: which guest? (strata run GUEST.elf --call FN [ARGS...])");
		return CLI_USAGE;
	}
	const char *path = pos[0];
	struct run_cfg cfg = o.cfg;
	bool list = o.list;
	unsigned long long repeat = o.repeat;
	if (!ncalls && !list) {
		cli_err(cli, "run: say --call FN or --list");
		return CLI_USAGE;
	}
	if (!ncalls && npos > 1) {
		cli_err(cli, "run: unexpected argument '%s'", pos[1]);
		return CLI_USAGE;
	}
	if (o.raw && isatty(STDOUT_FILENO)) {
		cli_err(cli, "run: --raw writes a result's bytes as they are into a pipe or a file, not a terminal "
			"(add '> FILE' or '| COMMAND')");
		return CLI_USAGE;
	}
	if (o.force && !o.snapshot) {
		cli_err(cli, "run: --force moves the tag --snapshot TAG names; there is no --snapshot");
		return CLI_USAGE;
	}
	/* What --snapshot needs is checked before the guest runs: nothing is
	 * printed, and no work done, for a capture that would be refused. */
	if (o.snapshot && (status = cli_snapshot_precheck(cli, path, o.snapshot, o.force)) != CLI_OK)
		return status;
	/* Call i takes the operands from its --call to the next one's; the
	 * target (the first operand) is no call's, and operands before the
	 * first --call are the first call's. */
	for (int i = 0; i < ncalls; i++) {
		int from = i == 0 || calls[i].first < 1 ? 1 : calls[i].first;
		int to = i + 1 < ncalls ? (calls[i + 1].first < 1 ? 1 : calls[i + 1].first) : npos;
		calls[i].args = pos + from;
		calls[i].nargs = to > from ? to - from : 0;
	}

	/* Size the input buffer for the largest call's arguments if the user did not. */
	uint64_t need = 4096;
	for (int k = 0; k < ncalls; k++) {
		uint64_t this = 4096;
		char **args = calls[k].args;
		for (int i = 0; i < calls[k].nargs; i++) {
			if (args[i][0] == '@') {
				FILE *f = fopen(args[i] + 1, "rb");
				if (f) {
					if (fseek(f, 0, SEEK_END) == 0 && ftell(f) > 0)
						this += (uint64_t)ftell(f) + 16;
					fclose(f);
				}
			}
			this += strlen(args[i]) + 16;
		}
		if (this > need)
			need = this;
	}
	if (!cfg.input_size && need > RUN_DEFAULT_IO)
		cfg.input_size = need;

	strata_sandbox *sb = NULL;
	if ((status = cli_host_open(cli)) != CLI_OK)
		return status;
	/* Sizes for a sandbox from an ELF (a snapshot brings its own), the
	 * timeout and the log for any. */
	strata_host_set_sizes(cli->host, cfg.heap_size, cfg.stack_size, cfg.input_size, cfg.output_size);
	strata_host_set_timeout(cli->host, cfg.timeout_ns);
	strata_host_set_log(cli->host, guest_log, NULL);
	cli->backend = cfg.backend;
	/* A warm sandbox's mappings say what earlier users touched, not a start. */
	if (o.record_ws) {
		uint64_t shells = 0;
		strata_host_info(cli->host, STRATA_HOST_INFO_SHELLS_MAX, &shells);
		strata_host_set_cache(cli->host, (unsigned)shells, 0);
	}
	/* A guest ELF, a snapshot directory, or a tag/id in the store (cmd_snap.c). */
	unsigned dir_flags = cli_snapdir_flags() | (o.via_fuse ? STRATA_DIR_VIA_FUSE : 0);
	if ((status = cli_sandbox_open(cli, "run", path, dir_flags, true, &sb)) != CLI_OK)
		return status;
	cli_info(cli, "run: the sandbox runs on the %s backend", cli_backend_name(strata_sandbox_backend(sb)));
	if (list) {
		status = list_functions(sb);
		if (!ncalls)
			goto out_free;
	}
	for (int k = 0; k < ncalls && status == CLI_OK; k++)
		status = run_call(cli, sb, path, &calls[k], repeat, k == 0 && o.record_ws, o.core, o.raw);
	if (status == CLI_OK && o.snapshot)
		status = cli_snapshot_commit(cli, sb, o.snapshot, o.force);
out_free:
	strata_sandbox_free(sb);
	cli_snap_close();
	return status;
}
