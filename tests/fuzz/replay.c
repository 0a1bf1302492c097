/* replay.c: main() for builds without libFuzzer: run a target over corpus files and directories, as TAP. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fuzz.h"

static int read_all(const char *path, uint8_t **out, size_t *len)
{
	FILE *f = fopen(path, "rbe");
	size_t cap = 4096, n = 0;
	uint8_t *buf = malloc(cap);

	if (!f || !buf) {
		free(buf);
		if (f)
			fclose(f);
		return -1;
	}
	for (;;) {
		if (n == cap) {
			uint8_t *bigger = realloc(buf, cap * 2);
			if (!bigger) {
				free(buf);
				fclose(f);
				return -1;
			}
			buf = bigger;
			cap *= 2;
		}
		size_t r = fread(buf + n, 1, cap - n, f);
		n += r;
		if (r == 0)
			break;
	}
	fclose(f);
	*out = buf;
	*len = n;
	return 0;
}

/* Run one input in a child, so a crash is reported as this input's failure
 * and the other inputs still run. 0: passed. */
static int run_one(const char *path, char *why, size_t whylen)
{
	uint8_t *data;
	size_t len;
	int status;

	if (read_all(path, &data, &len) < 0) {
		snprintf(why, whylen, "cannot read: %s", strerror(errno));
		return -1;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		LLVMFuzzerTestOneInput(data, len);
		exit(0); /* not _exit: LeakSanitizer checks this input at exit */
	}
	free(data);
	if (pid < 0 || waitpid(pid, &status, 0) != pid) {
		snprintf(why, whylen, "cannot run: %s", strerror(errno));
		return -1;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFSIGNALED(status))
		snprintf(why, whylen, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		snprintf(why, whylen, "exit status %d", WEXITSTATUS(status));
	return -1;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The file names in dir, sorted (NULL-terminated; *n gets the count). */
static char **list_dir(const char *dir, size_t *n)
{
	DIR *d = opendir(dir);
	char **names = NULL;
	size_t cap = 0;
	struct dirent *e;

	*n = 0;
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (*n + 1 >= cap) {
			cap = cap ? cap * 2 : 64;
			names = realloc(names, cap * sizeof(*names));
			if (!names)
				abort();
		}
		names[(*n)++] = strdup(e->d_name);
	}
	if (d)
		closedir(d);
	if (names) {
		qsort(names, *n, sizeof(*names), by_name);
		names[*n] = NULL;
	}
	return names;
}

/*
 * Usage: TARGET [CORPUS_DIR | --each DIR | FILE]...: a corpus directory is
 * one test (every file in it replayed, the failures named); each file of a
 * --each directory (the named regression inputs) and each FILE is a test of
 * its own. Prints TAP, the plan last.
 */
int main(int argc, char **argv)
{
	int ntests = 0, failed = 0;
	char why[256], path[4096];

	for (int a = 1; a < argc; a++) {
		bool each = strcmp(argv[a], "--each") == 0 && a + 1 < argc;
		const char *arg = each ? argv[++a] : argv[a];
		struct stat st;
		size_t n;

		if (stat(arg, &st) < 0) {
			if (each && errno == ENOENT)
				continue; /* no regression inputs yet */
			printf("not ok %d - %s: %s\n", ++ntests, arg, strerror(errno));
			failed++;
			continue;
		}
		if (!S_ISDIR(st.st_mode) || each) {
			char **names = S_ISDIR(st.st_mode) ? list_dir(arg, &n) : NULL;
			size_t count = S_ISDIR(st.st_mode) ? n : 1;
			for (size_t i = 0; i < count; i++) {
				if (names)
					snprintf(path, sizeof(path), "%s/%s", arg, names[i]);
				else
					snprintf(path, sizeof(path), "%s", arg);
				if (run_one(path, why, sizeof(why)) == 0) {
					printf("ok %d - %s\n", ++ntests, path);
				} else {
					printf("not ok %d - %s: %s\n", ++ntests, path, why);
					failed++;
				}
				if (names)
					free(names[i]);
			}
			free(names);
			continue;
		}
		char **names = list_dir(arg, &n);
		unsigned bad = 0;
		for (size_t i = 0; i < n; i++) {
			snprintf(path, sizeof(path), "%s/%s", arg, names[i]);
			if (run_one(path, why, sizeof(why)) != 0) {
				printf("# %s: %s\n", path, why);
				bad++;
			}
			free(names[i]);
		}
		free(names);
		if (n == 0 || bad) {
			printf("not ok %d - %s: %u of %zu inputs failed%s\n", ++ntests, arg, bad, n,
			       n == 0 ? " (an empty corpus)" : "");
			failed++;
		} else {
			printf("ok %d - corpus %s: %zu inputs replayed\n", ++ntests, arg, n);
		}
	}
	printf("1..%d\n", ntests);
	return failed ? 1 : 0;
}
