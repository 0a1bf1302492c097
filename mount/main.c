/* main.c: the `strata` command: global options and subcommand dispatch. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Longest command name the table holds, for the typo distance and argv[0]. */
#define CLI_NAME_MAX 16

static int cmd_help(struct cli *cli, int argc, char **argv);

static const struct cli_cmd commands[] = {
	/* store and snapshots */
	{ "init", cmd_init, "create a store (idempotent)" },
	{ "ls", cmd_ls, "list snapshots: tags, ids, parents, sizes (--tree)" },
	{ "show", cmd_show, "describe one snapshot (--json)" },
	{ "tag", cmd_tag, "set, move, rename, remove or list tags" },
	{ "rm", cmd_rm, "remove snapshots or tags" },
	{ "gc", cmd_gc, "free blobs no snapshot uses, and crash leftovers" },
	{ "verify", cmd_verify, "re-hash every referenced blob; exit 4 on corruption" },
	{ "fsck", cmd_fsck, "check the index against the blob files; exit 4 on problems" },
	{ "export", cmd_export, "write a snapshot as a snapshot directory" },
	{ "import", cmd_import, "import a snapshot directory or OCI layout (verified, atomic, deduplicated)" },
	{ "push", cmd_push, "send a snapshot to an OCI registry (only the blobs it lacks)" },
	{ "pull", cmd_pull, "fetch a snapshot from an OCI registry (only the layers the store lacks)" },
	{ "debug", cmd_debug, "developer tools: 'debug ingest IMAGE' makes a snapshot from a memory file" },
	/* sandboxes */
	{ "run", cmd_run, "run a guest function in a sandbox" },
	{ "wasm", cmd_wasm, "'wasm build MODULE.wasm -o GUEST.elf': a WebAssembly module as a guest (wasm2c)" },
	{ "pool", cmd_pool, "restore N sandboxes from one snapshot; time per restore, memory per sandbox" },
	{ "calibrate", cmd_calibrate, "measure this machine and write the snapshot reset policy" },
	{ "doctor", cmd_doctor, "what this machine offers strata (KVM, kernel, FUSE), and why not" },
	/* filesystem */
	{ "mount", cmd_mount, "mount a store as a filesystem (snapshots as directories)" },
	{ "umount", cmd_umount, "unmount a strata mount (also a stale one)" },
	/* measurement */
	{ "bench", cmd_bench, "run benchmarks; print a table and write JSON" },
	/* this list */
	{ "help", cmd_help, "a command's help: 'strata help COMMAND' (as 'strata COMMAND --help')" },
};

static const char *default_store(void)
{
	static char buf[PATH_MAX];
	const char *env = getenv("STRATA_STORE");
	const char *xdg = getenv("XDG_DATA_HOME");
	const char *home = getenv("HOME");

	if (env && *env)
		return env;
	if (xdg && *xdg && snprintf(buf, sizeof(buf), "%s/strata", xdg) < (int)sizeof(buf))
		return buf;
	if (home && *home && snprintf(buf, sizeof(buf), "%s/.local/share/strata", home) < (int)sizeof(buf))
		return buf;
	return "/var/lib/strata";
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: strata [--store DIR] [--backend auto|kvm|process] [-v] COMMAND [ARGS...]\n"
		"\n"
		"Micro-VM sandboxes on KVM whose memory snapshots are files.\n"
		"\n"
		"Options:\n"
		"  -s, --store DIR   the store to use (default: $STRATA_STORE,\n"
		"                    else $XDG_DATA_HOME/strata, else ~/.local/share/strata)\n"
		"  -b, --backend B   where guests run: kvm, process (a child process, no KVM\n"
		"                    needed) or auto (kvm when /dev/kvm opens; the default,\n"
		"                    or $STRATA_BACKEND); commands that run sandboxes take it too\n"
		"  -v, --verbose     say more about what is done\n"
		"  -h, --help        this help; `strata COMMAND --help` for a command\n"
		"\n"
		"Commands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\nExit status: 0 ok, 1 failed, 2 usage, 3 not found, 4 corruption, 5 guest error.\n");
}

/*
 * The global options are accepted after the subcommand's name too
 * (`strata fsck -v`, `strata ls --store S`): they are taken out of the
 * subcommand's arguments, up to a `--`, before it parses the rest. No
 * subcommand has a -s or -v of its own.
 */
static int take_global_options(struct cli *cli, int argc, char **argv)
{
	int out = 1;
	bool rest = false;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (rest || strcmp(a, "--") == 0) {
			rest = true;
			argv[out++] = argv[i];
		} else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
			cli->verbose++;
		} else if (strcmp(a, "-s") == 0 || strcmp(a, "--store") == 0) {
			if (i + 1 >= argc || !*argv[i + 1]) {
				cli_err(cli, "%s needs a directory", a);
				return -1;
			}
			cli->store = argv[++i];
			cli->store_given = true;
		} else if (strncmp(a, "--store=", 8) == 0) {
			if (!a[8]) {
				cli_err(cli, "--store needs a directory");
				return -1;
			}
			cli->store = a + 8;
			cli->store_given = true;
		} else {
			argv[out++] = argv[i];
		}
	}
	argv[out] = NULL;
	return out;
}

static const struct cli_cmd *command_find(const char *name)
{
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

/* Edits (insert, delete, substitute, swap two neighbours) from a to b,
 * counted up to 3: enough to tell a typo from another word. */
static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t d[CLI_NAME_MAX + 1][CLI_NAME_MAX + 1];

	if (la > CLI_NAME_MAX || lb > CLI_NAME_MAX)
		return 3;
	for (size_t i = 0; i <= la; i++)
		d[i][0] = i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = j;
	for (size_t i = 1; i <= la; i++) {
		for (size_t j = 1; j <= lb; j++) {
			size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
			if (d[i - 1][j] + 1 < best)
				best = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < best)
				best = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
				best = d[i - 2][j - 2] + 1;
			d[i][j] = best;
		}
	}
	return d[la][lb] < 3 ? d[la][lb] : 3;
}

/* An unknown command: say so, with the nearest commands (at most two
 * edits away, fewer than the name is long) as "did you mean". */
static int unknown_command(const struct cli *cli, const char *name)
{
	size_t best = 3, len = strlen(name);

	cli_err(cli, "unknown command '%s' (see 'strata --help')", name);
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		size_t d = edit_distance(name, commands[i].name);
		if (d < best && d < len)
			best = d;
	}
	if (best >= 3)
		return CLI_USAGE;
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (edit_distance(name, commands[i].name) == best)
			fprintf(stderr, "did you mean 'strata %s'?\n", commands[i].name);
	return CLI_USAGE;
}

/* The subcommand's getopt reports bad options as "strata NAME: ..." (glibc
 * prefixes argv[0]); it is the name a hint quotes too. */
static int command_run(struct cli *cli, const struct cli_cmd *cmd, int argc, char **argv)
{
	char prog[CLI_NAME_MAX + 8];

	snprintf(prog, sizeof(prog), "strata %s", cmd->name);
	argv[0] = prog;
	optind = 0; /* glibc: fully re-initialise getopt (permuting) for the subcommand */
	return cmd->run(cli, argc, argv);
}

static int cmd_help(struct cli *cli, int argc, char **argv)
{
	char help[] = "--help";

	if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		usage(stdout);
		return CLI_OK;
	}
	if (argc > 2) {
		cli_err(cli, "help: expected one COMMAND (see 'strata --help')");
		return CLI_USAGE;
	}
	const struct cli_cmd *cmd = command_find(argv[1]);
	if (!cmd)
		return unknown_command(cli, argv[1]);
	if (cmd->run == cmd_help) {
		usage(stdout);
		return CLI_OK;
	}
	char *sub[] = { argv[1], help, NULL };
	return command_run(cli, cmd, 2, sub);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "store", required_argument, NULL, 's' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "backend", required_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	struct cli cli = { .prog = "strata" };
	int c;

	cli.store = default_store();
	const char *env_backend = getenv("STRATA_BACKEND");
	if (env_backend && *env_backend && cli_backend_from_name(env_backend, &cli.backend) < 0) {
		cli_err(&cli, "STRATA_BACKEND must be auto, kvm or process, not '%s'", env_backend);
		return CLI_USAGE;
	}
	/* getopt's messages start with argv[0]: "strata: ...", whatever path ran it. */
	char prog[] = "strata";
	argv[0] = prog;
	/* '+' stops at the first non-option: the subcommand parses the rest. */
	while ((c = getopt_long(argc, argv, "+s:b:vhV", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (!*optarg) {
				cli_err(&cli, "--store needs a directory");
				return CLI_USAGE;
			}
			cli.store = optarg;
			cli.store_given = true;
			break;
		case 'v':
			cli.verbose++;
			break;
		case 'b':
			if (!cli_backend_parse(&cli, optarg, &cli.backend))
				return CLI_USAGE;
			break;
		case 'h':
			usage(stdout);
			return CLI_OK;
		case 'V':
			printf("strata %s\n", STRATA_VERSION);
			return CLI_OK;
		default:
			fprintf(stderr, "see 'strata --help'\n");
			return CLI_USAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return CLI_USAGE;
	}
	int sub = optind;
	const struct cli_cmd *cmd = command_find(argv[sub]);
	if (!cmd)
		return unknown_command(&cli, argv[sub]);
	int n = take_global_options(&cli, argc - sub, &argv[sub]);
	if (n < 0)
		return CLI_USAGE;
	int status = command_run(&cli, cmd, n, &argv[sub]);
	cli_host_leave(&cli);
	return status;
}
