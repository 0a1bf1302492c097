/* libcguest.c: a guest of ordinary portable C: stdio, printf with floats, strtod, qsort, setjmp, math, errno, locale (tests/e2e/libc.sh). */
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "include/strata_guest.h"

static char out[4096];

/* fmt(FORMAT, NUMBER): FORMAT applied to strtod(NUMBER). */
STRATA_FUNCTION(fmt, "s(ss)")
{
	char *end;
	double v = strtod(strata_arg_str(c, 1), &end);

	if (*end)
		return strata_fail(c, "strtod stopped at '%s'", end);
	snprintf(out, sizeof out, strata_arg_str(c, 0), v);
	return strata_ret_str(c, out);
}

/* roundtrip(NUMBER): "%.17g" of strtod(NUMBER) parsed again gives the same double. */
STRATA_FUNCTION(roundtrip, "s(s)")
{
	double a = strtod(strata_arg_str(c, 0), NULL), b;
	char txt[64];

	snprintf(txt, sizeof txt, "%.17g", a);
	b = strtod(txt, NULL);
	snprintf(out, sizeof out, "%s %s", txt, memcmp(&a, &b, sizeof a) == 0 ? "same" : "differs");
	return strata_ret_str(c, out);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* sort(WORDS): the space-separated words sorted by qsort, each found by bsearch. */
STRATA_FUNCTION(sort, "s(s)")
{
	static char text[1024];
	char *words[128], *save = NULL;
	size_t n = 0, len = 0;

	snprintf(text, sizeof text, "%s", strata_arg_str(c, 0));
	for (char *w = strtok_r(text, " ", &save); w && n < 128; w = strtok_r(NULL, " ", &save))
		words[n++] = w;
	qsort(words, n, sizeof words[0], cmp_str);
	out[0] = 0;
	for (size_t i = 0; i < n; i++) {
		if (bsearch(&words[i], words, n, sizeof words[0], cmp_str) == NULL)
			return strata_fail(c, "bsearch lost '%s'", words[i]);
		len += (size_t)snprintf(out + len, sizeof out - len, "%s%s", i ? " " : "", words[i]);
	}
	return strata_ret_str(c, out);
}

static jmp_buf jb;
/* Through a pointer: gcc would call a recursion that only longjmps out infinite. */
static void (*volatile jump_out)(jmp_buf, int) = longjmp;

static void dive(int depth)
{
	volatile char frame[64];

	frame[0] = (char)depth;
	if (depth > 0)
		dive(depth - 1);
	else
		jump_out(jb, 42);
	frame[1] = frame[0];
}

/* jump(DEPTH): longjmp out of DEPTH nested calls; returns setjmp's second value. */
STRATA_FUNCTION(jump, "i(i)")
{
	int v = setjmp(jb);

	if (v)
		return strata_ret_i64(c, v);
	dive((int)strata_arg_i64(c, 0));
	return strata_fail(c, "longjmp did not come back");
}

/* files(): what opening a file, the clock and the locale say. */
STRATA_FUNCTION(files, "s()")
{
	struct timespec ts;
	errno = 0;
	FILE *f = fopen("/etc/passwd", "r");
	int e1 = errno;
	int rc = clock_gettime(CLOCK_REALTIME, &ts);
	int e2 = errno;
	const char *loc = setlocale(LC_ALL, "");
	struct lconv *lc = localeconv();

	snprintf(out, sizeof out, "fopen=%s errno=%s; clock_gettime=%d errno=%s; time=%lld; locale=%s point='%s' fr=%s",
	         f ? "FILE" : "NULL", strerror(e1), rc, strerror(e2), (long long)time(NULL),
	         loc ? loc : "NULL", lc->decimal_point, setlocale(LC_ALL, "fr_FR.UTF-8") ? "set" : "NULL");
	return strata_ret_str(c, out);
}

/* math(NAME, X): "%.17g" of the named libm function at strtod(X). */
STRATA_FUNCTION(math, "s(ss)")
{
	static const struct { const char *name; double (*f)(double); } fns[] = {
		{ "sin", sin }, { "cos", cos }, { "tan", tan }, { "exp", exp }, { "log", log },
		{ "log10", log10 }, { "sqrt", sqrt }, { "atan", atan }, { "cbrt", cbrt },
		{ "floor", floor }, { "ceil", ceil }, { "tanh", tanh }, { "erf", erf },
	};
	double x = strtod(strata_arg_str(c, 1), NULL);

	for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
		if (strcmp(fns[i].name, strata_arg_str(c, 0)) == 0) {
			snprintf(out, sizeof out, "%.17g", fns[i].f(x));
			return strata_ret_str(c, out);
		}
	if (strcmp(strata_arg_str(c, 0), "pow2") == 0) {
		snprintf(out, sizeof out, "%.17g %.17g", pow(x, 2.5), fmod(x, 0.75));
		return strata_ret_str(c, out);
	}
	return strata_fail(c, "no math function '%s'", strata_arg_str(c, 0));
}

/* say(TEXT): printf to stdout and fprintf to stderr (the host log), then
 * ctype's view of TEXT. */
STRATA_FUNCTION(say, "s(s)")
{
	const char *s = strata_arg_str(c, 0);
	size_t alpha = 0, digit = 0;

	printf("stdout: %s %g\n", s, 2.5);
	fprintf(stderr, "stderr: %e\n", 1e-3);
	printf("unterminated %d", 7);
	fflush(stdout);
	for (const char *p = s; *p; p++) {
		alpha += isalpha((unsigned char)*p) != 0;
		digit += isdigit((unsigned char)*p) != 0;
	}
	snprintf(out, sizeof out, "%zu alpha %zu digit %c", alpha, digit, toupper((unsigned char)s[0]));
	return strata_ret_str(c, out);
}

/* when(SECONDS): gmtime's broken-down time through asctime, and mktime
 * and timegm back to seconds (the time zone is UTC). */
STRATA_FUNCTION(when, "s(i)")
{
	time_t t = (time_t)strata_arg_i64(c, 0);
	struct tm tm, *g = gmtime(&t);

	if (!g)
		return strata_fail(c, "gmtime failed");
	tm = *g;
	size_t n = strlen(asctime(&tm));
	snprintf(out, sizeof out, "%.*s|%lld|%lld|%s", (int)n - 1, asctime(&tm), (long long)mktime(&tm),
	         (long long)timegm(&tm), tzname[0]);
	return strata_ret_str(c, out);
}

/* now(): time(), clock_gettime(CLOCK_REALTIME) and clock() as the guest
 * sees them (from the host's clock_gettime, if it registered one). */
STRATA_FUNCTION(now, "s()")
{
	struct timespec ts = { 0 };
	errno = 0;
	int rc = clock_gettime(CLOCK_REALTIME, &ts);
	int e = errno;

	snprintf(out, sizeof out, "%lld %d %d %lld %ld", (long long)time(NULL), rc, e,
	         (long long)ts.tv_sec, (long)clock());
	return strata_ret_str(c, out);
}

/* streams(): what a program finds of the rest of the system: an empty
 * stdin, an unseekable stdout, no processes, temporary files or shared
 * objects. */
STRATA_FUNCTION(streams, "s()")
{
	int x = 0;
	int sc = scanf("%d", &x);
	int gc = getchar();
	int eof = feof(stdin) != 0;
	errno = 0;
	int sk = fseek(stdout, 0, SEEK_SET);
	int e_sk = errno;
	errno = 0;
	FILE *p = popen("ls", "r");
	int e_p = errno;
	void *h = dlopen("libc.so.6", RTLD_NOW);
	FILE *tf = tmpfile();
	int rm = remove("x");

	snprintf(out, sizeof out, "scanf=%d getchar=%d eof=%d fseek=%d(%s) popen=%s(%s) dlopen=%s(%s) tmpfile=%s remove=%d getenv=%s",
	         sc, gc, eof, sk, strerror(e_sk), p ? "FILE" : "NULL", strerror(e_p), h ? "handle" : "NULL",
	         dlerror(), tf ? "FILE" : "NULL", rm, getenv("HOME") ? "set" : "NULL");
	return strata_ret_str(c, out);
}

/* strf(FORMAT, SECONDS): strftime of gmtime(SECONDS). */
STRATA_FUNCTION(strf, "s(si)")
{
	time_t t = (time_t)strata_arg_i64(c, 1);
	size_t n = strftime(out, sizeof out, strata_arg_str(c, 0), gmtime(&t));

	if (n == 0 && strata_arg_str(c, 0)[0])
		return strata_fail(c, "strftime: no room");
	return strata_ret_str(c, out);
}

/* partial(): printf of a line without its newline and without fflush; the
 * runtime flushes stdout when the call returns. */
STRATA_FUNCTION(partial, "i()")
{
	printf("no newline %d", 5);
	return strata_ret_i64(c, 1);
}
