/* cmd_wasm.c: `strata wasm build`: a WebAssembly module to a guest ELF through wasm2c, the glue (wasm_glue.c) and the guest SDK (docs/wasm.md). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "wasm_glue.h"

static void usage(void)
{
	printf("usage: strata wasm build MODULE.wasm -o GUEST.elf [--sig NAME=SIG]... [--heap SIZE] [--keep]\n\n"
	       "Compiles a WebAssembly module ahead of time into a strata guest: wasm2c\n"
	       "(Debian's wabt) translates it to C, strata writes the glue that makes each\n"
	       "exported function a strata function and each imported function a host call,\n"
	       "and the C compiler ($CC, else cc) builds it with the guest SDK's flags\n"
	       "(pkg-config strata-wasm). The guest declares the heap its module's memory\n"
	       "needs, so strata run GUEST.elf --call NAME needs no --heap.\n\n"
	       "  -o, --output FILE      the guest ELF to write\n"
	       "  --sig NAME=SIG         the strata signature of export NAME (import:NAME=SIG for an\n"
	       "                         import), e.g. greet=s(s): b and s are a pointer and a\n"
	       "                         length (i32 i32) in linear memory (docs/wasm.md)\n"
	       "  --heap SIZE            the heap the guest declares (e.g. 64M), instead of its initial\n"
	       "                         memory, its maximum or 16M of growth, and 1M (docs/wasm.md)\n"
	       "  --keep                 keep the generated C (its directory is printed)\n");
}

/* Run argv, waiting; 0 if it exited 0, else reported. */
static int run_tool(const struct cli *cli, char **argv)
{
	int status;
	pid_t pid = fork();

	if (pid < 0) {
		cli_err(cli, "wasm build: fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		execvp(argv[0], argv);
		fprintf(stderr, "strata: wasm build: cannot run %s: %s%s\n", argv[0], strerror(errno),
			errno == ENOENT && !strcmp(argv[0], "wasm2c") ? " (install Debian's wabt)" : "");
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (!(WIFEXITED(status) && WEXITSTATUS(status) == 127))
		cli_err(cli, "wasm build: %s failed (%s %d)", argv[0], WIFEXITED(status) ? "exit status" : "signal",
			WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	return -1;
}

/* Where strata-wasm.pc is: the build tree's (its -uninstalled.pc) when this
 * binary is the build tree's (the same file, by device and inode: the path
 * it was run by may be a link or a bind mount), else the installed one. */
static void sdk_pkgconfig_dir(char *buf, size_t len)
{
	struct stat self, built;

	if (stat("/proc/self/exe", &self) == 0 && stat(STRATA_BUILD_ROOT "/mount/strata", &built) == 0 &&
	    self.st_dev == built.st_dev && self.st_ino == built.st_ino)
		snprintf(buf, len, "%s", STRATA_BUILD_ROOT "/vmm/guest/wasm");
	else
		snprintf(buf, len, "%s", STRATA_PKGCONFIG_DIR);
}

/* pkg-config --cflags --libs strata-wasm, split at blanks, appended to argv. */
static int sdk_flags(const struct cli *cli, char **argv, int *argc, int max, char *buf, size_t len)
{
	char dir[PATH_MAX];

	sdk_pkgconfig_dir(dir, sizeof(dir));
	if (setenv("PKG_CONFIG_PATH", dir, 1) < 0)
		return -1;
	FILE *p = popen("pkg-config --cflags --libs strata-wasm", "r");
	if (!p) {
		cli_err(cli, "wasm build: cannot run pkg-config: %s", strerror(errno));
		return -1;
	}
	size_t n = fread(buf, 1, len - 1, p);
	buf[n] = 0;
	if (pclose(p) != 0 || n == 0 || n == len - 1) {
		cli_err(cli, "wasm build: pkg-config found no strata-wasm SDK in %s (meson install puts it there; "
			     "Debian's wabt is needed to build it)", dir);
		return -1;
	}
	for (char *tok = strtok(buf, " \t\n"); tok; tok = strtok(NULL, " \t\n")) {
		if (*argc >= max - 1)
			return -1;
		argv[(*argc)++] = tok;
	}
	return 0;
}

static int read_file(const char *path, uint8_t **out, size_t *len)
{
	FILE *f = fopen(path, "rb");
	struct stat st;

	if (!f)
		return -errno;
	if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode)) {
		fclose(f);
		return -EINVAL;
	}
	uint8_t *d = malloc((size_t)st.st_size + 1);
	if (!d || fread(d, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
		free(d);
		fclose(f);
		return -EIO;
	}
	fclose(f);
	*out = d;
	*len = (size_t)st.st_size;
	return 0;
}

static int wasm_build(struct cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "sig", required_argument, NULL, 's' },
		{ "keep", no_argument, NULL, 'k' },
		{ "heap", required_argument, NULL, 'H' },
		{ "help", no_argument, NULL, 'h' },
		{ 0, 0, 0, 0 },
	};
	const char *output = NULL;
	const char **sigs = calloc((size_t)argc + 1, sizeof(*sigs));
	int nsigs = 0, c, status = CLI_FAIL;
	unsigned long long heap = 0;
	bool keep = false;

	if (!sigs)
		return CLI_FAIL;
	optind = 0; /* glibc: re-initialise getopt for the subcommand of a subcommand */
	while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o': output = optarg; break;
		case 's':
			if (!strchr(optarg, '=')) {
				cli_err(cli, "wasm build: --sig %s: expected NAME=SIG", cli_esc(optarg));
				free(sigs);
				return CLI_USAGE;
			}
			sigs[nsigs++] = optarg;
			break;
		case 'k': keep = true; break;
		case 'H':
			if (!cli_parse_size(optarg, &heap) || heap == 0 || heap > WASM_GLUE_HEAP_MAX) {
				cli_err(cli, "wasm build: --heap wants a size from 1 to 2G such as 4M, not '%s'",
					cli_esc(optarg));
				free(sigs);
				return CLI_USAGE;
			}
			break;
		case 'h': usage(); free(sigs); return CLI_OK;
		default: free(sigs); return cli_usage_hint("strata wasm build");
		}
	}
	if (optind + 1 != argc || !output) {
		cli_err(cli, "wasm build: expected MODULE.wasm and -o GUEST.elf");
		free(sigs);
		return cli_usage_hint("strata wasm build");
	}
	const char *module = argv[optind];
	uint8_t *wasm = NULL;
	size_t len = 0;
	int rc = read_file(module, &wasm, &len);
	if (rc < 0) {
		cli_err(cli, "wasm build: %s: %s", cli_esc(module), strerror(-rc));
		free(sigs);
		return rc == -ENOENT ? CLI_NOTFOUND : CLI_FAIL;
	}

	const char *tmp = getenv("TMPDIR");
	char dir[PATH_MAX], modc[PATH_MAX + 16], gluec[PATH_MAX + 16], why[512];
	snprintf(dir, sizeof(dir), "%s/strata-wasm.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		cli_err(cli, "wasm build: cannot make a temporary directory: %s", strerror(errno));
		goto out_free;
	}
	snprintf(modc, sizeof(modc), "%s/module.c", dir);
	snprintf(gluec, sizeof(gluec), "%s/glue.c", dir);

	FILE *g = fopen(gluec, "w");
	if (!g) {
		cli_err(cli, "wasm build: %s: %s", gluec, strerror(errno));
		goto out_rm;
	}
	/* Notes and reasons name what the module calls things: printed escaped. */
	char *notes = NULL;
	size_t notes_len = 0;
	FILE *nf = open_memstream(&notes, &notes_len);
	if (!nf) {
		fclose(g);
		cli_err(cli, "wasm build: %s", strerror(errno));
		goto out_rm;
	}
	rc = wasm_glue_write(wasm, len, sigs, nsigs, heap, g, nf, why, sizeof(why));
	fclose(nf);
	for (const char *note = notes; note && note < notes + notes_len; note += strlen(note) + 1)
		fprintf(stderr, "%s\n", cli_esc(note));
	free(notes);
	if (fclose(g) != 0 && rc == 0) {
		cli_err(cli, "wasm build: %s: %s", gluec, strerror(errno));
		goto out_rm;
	}
	if (rc < 0) {
		cli_err(cli, "wasm build: %s: %s", cli_esc(module), cli_esc(why));
		goto out_rm;
	}
	char *w2c[] = { "wasm2c", (char *)module, "-n", WASM_GLUE_MODULE, "--no-debug-names", "-o", modc, NULL };
	if (run_tool(cli, w2c) < 0)
		goto out_rm;

	char flags[8192];
	char *cc[128];
	int n = 0;
	const char *cc_env = getenv("CC");
	cc[n++] = (char *)(cc_env && *cc_env ? cc_env : "cc");
	cc[n++] = "-std=gnu17";
	cc[n++] = "-O2";
	cc[n++] = "-g";
	cc[n++] = "-w";   /* wasm2c's C is not ours to warn about */
	cc[n++] = "-I";
	cc[n++] = dir;
	cc[n++] = "-o";
	cc[n++] = (char *)output;
	cc[n++] = modc;
	cc[n++] = gluec;
	if (sdk_flags(cli, cc, &n, (int)(sizeof(cc) / sizeof(cc[0])), flags, sizeof(flags)) < 0)
		goto out_rm;
	cc[n] = NULL;
	if (cli->verbose) {
		for (int i = 0; i < n; i++)
			fprintf(stderr, "%s%s", i ? " " : "", cc[i]);
		fputc('\n', stderr);
	}
	if (run_tool(cli, cc) < 0)
		goto out_rm;
	status = CLI_OK;
out_rm:
	if (keep) {
		fprintf(stderr, "strata: wasm build: the generated C is in %s\n", dir);
	} else {
		unlink(gluec);
		unlink(modc);
		snprintf(modc, sizeof(modc), "%s/module.h", dir);
		unlink(modc);
		rmdir(dir);
	}
out_free:
	free(wasm);
	free(sigs);
	return status;
}

int cmd_wasm(struct cli *cli, int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage();
		return argc < 2 ? CLI_USAGE : CLI_OK;
	}
	if (!strcmp(argv[1], "build"))
		return wasm_build(cli, argc - 1, argv + 1);
	cli_err(cli, "wasm: unknown subcommand '%s' (build)", cli_esc(argv[1]));
	return cli_usage_hint("strata wasm");
}
