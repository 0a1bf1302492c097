/* cli.c: what every subcommand shares: messages, number and size parsing, removing a tree, the backend option. */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Where cli_err also writes each error as a JSON event line (NULL: nowhere). */
static FILE *err_json;
static int err_json_schema;

void cli_err_json(FILE *f, int schema)
{
	err_json = f;
	err_json_schema = schema;
}

void cli_err(const struct cli *cli, const char *fmt, ...)
{
	va_list ap;

	/* Messages quote paths, names and reasons from snapshots: escaped. */
	fprintf(stderr, "%s: ", cli ? cli->prog : "strata");
	va_start(ap, fmt);
	cli_vputs_escaped(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (err_json) {
		char msg[VMM_MESSAGE_MAX + 512];
		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
		fprintf(err_json, "{\"schema\":%d,\"event\":\"error\",\"message\":\"", err_json_schema);
		/* JSON-escaped; bytes that are not ASCII as \u00XX (a message may
		 * quote a registry's bytes, not always UTF-8). */
		for (const unsigned char *c = (const unsigned char *)msg; *c; c++) {
			if (*c == '"' || *c == '\\')
				fprintf(err_json, "\\%c", *c);
			else if (*c < 0x20 || *c >= 0x7f)
				fprintf(err_json, "\\u%04x", *c);
			else
				fputc(*c, err_json);
		}
		fputs("\"}\n", err_json);
		fflush(err_json);
	}
}

void cli_info(const struct cli *cli, const char *fmt, ...)
{
	va_list ap;

	if (!cli || cli->verbose == 0)
		return;
	va_start(ap, fmt);
	cli_vputs_escaped(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

bool cli_wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0)
			return false;
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
			return true;
	}
	return false;
}

int cli_usage_hint(const char *prog)
{
	fprintf(stderr, "see '%s --help'\n", prog);
	return CLI_USAGE;
}

int cli_number_base(const char *s)
{
	if (*s == '-' || *s == '+')
		s++;
	return s[0] == '0' && (s[1] == 'x' || s[1] == 'X') ? 16 : 10;
}

bool cli_parse_u64(const char *s, unsigned long long *out)
{
	char *end;

	if (!s || !*s || *s == '-' || *s == '+')
		return false;
	errno = 0;
	unsigned long long v = strtoull(s, &end, cli_number_base(s));
	if (errno || *end)
		return false;
	*out = v;
	return true;
}

bool cli_parse_size(const char *s, unsigned long long *out)
{
	char *end;
	unsigned shift = 0;

	if (!s || !*s || *s == '-' || *s == '+')
		return false;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s)
		return false;
	switch (*end) {
	case '\0': break;
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	default: return false;
	}
	if (*end == 'i' && shift)
		end++;
	if (*end == 'B' && shift)
		end++;
	if (*end)
		return false;
	if (shift && v > (ULLONG_MAX >> shift))
		return false;
	*out = v << shift;
	return true;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path) == 0 ? 0 : -errno;
}

int cli_rm_tree(const char *path)
{
	int rc = nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);

	return rc == 0 ? 0 : rc < 0 ? -errno : rc;
}

const char *cli_backend_name(int backend)
{
	switch (backend) {
	case STRATA_BACKEND_KVM: return "kvm";
	case STRATA_BACKEND_PROCESS: return "process";
	default: return "auto";
	}
}

int cli_backend_from_name(const char *name, int *out)
{
	static const int all[] = { STRATA_BACKEND_AUTO, STRATA_BACKEND_KVM, STRATA_BACKEND_PROCESS };

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (strcmp(name, cli_backend_name(all[i])) == 0) {
			*out = all[i];
			return 0;
		}
	return -EINVAL;
}

bool cli_backend_parse(const struct cli *cli, const char *name, int *out)
{
	if (cli_backend_from_name(name, out) == 0)
		return true;
	cli_err(cli, "--backend wants auto, kvm or process, not '%s'", name);
	return false;
}

bool cli_backend_use(struct cli *cli, const char *name)
{
	/* The host takes it at the first sandbox: a subcommand reads its options first. */
	return cli_backend_parse(cli, name, &cli->backend);
}

int cli_bad_tag_name(const struct cli *cli, const char *name)
{
	cli_err(cli, "'%s' is not a valid tag name (use [A-Za-z0-9_][A-Za-z0-9._-]*, at most 128 characters; "
		"no '/' or '..')", name);
	return CLI_USAGE;
}
