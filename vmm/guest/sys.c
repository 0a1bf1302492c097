/* sys.c: what musl's C library reaches below it, for a guest with no kernel: output, errno, locks, files, time, exit. */
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <langinfo.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

#include "include/strata_guest.h"

/*
 * The head of musl's FILE (its src/internal/stdio_impl.h, the ABI of the
 * libc.a this links: Debian's musl 1.2): the fields the write, read, seek
 * and close hooks below touch.
 */
struct musl_file {
	unsigned flags;
	unsigned char *rpos, *rend;
	int (*close)(FILE *);
	unsigned char *wend, *wpos;
	unsigned char *mustbezero_1;
	unsigned char *wbase;
	size_t (*read)(FILE *, unsigned char *, size_t);
	size_t (*write)(FILE *, const unsigned char *, size_t);
	long (*seek)(FILE *, long, int);
	unsigned char *buf;
	size_t buf_size;
};
#define MUSL_F_EOF 16u

/* errno: one thread, one variable (musl's own reads the thread block at %fs). */
static int errno_value;
int *__errno_location(void) __attribute__((const));
int *__errno_location(void)
{
	return &errno_value;
}
int *___errno_location(void) __attribute__((const, alias("__errno_location")));

/* One write of a stream to the host log: its buffered bytes, then `buf`,
 * one record per line; what follows the last newline is a record of its own
 * (a write is a flush: the line is complete or fflush asked for it). Lines
 * longer than `line` go as several records. */
static size_t write_to_log(FILE *f, const unsigned char *buf, size_t len, int level)
{
	struct musl_file *m = (struct musl_file *)f;
	const unsigned char *part[2] = { m->wbase, buf };
	size_t part_len[2] = { (size_t)(m->wpos - m->wbase), len };
	char line[1024];
	size_t n = 0;

	for (int k = 0; k < 2; k++)
		for (size_t i = 0; i < part_len[k]; i++) {
			unsigned char ch = part[k][i];
			if (ch != '\n')
				line[n++] = (char)ch;
			if (ch == '\n' || n == sizeof line) {
				strata_log_write(level, line, n);
				n = 0;
			}
		}
	if (n)
		strata_log_write(level, line, n);
	m->wend = m->buf + m->buf_size;
	m->wpos = m->wbase = m->buf;
	return len;
}

/* Flush stdout if it holds bytes (the runtime calls this when a call
 * returns). Nothing is written otherwise: fflush would store to the FILE
 * and dirty its page on every call. */
void strata_stdout_flush(void);
void strata_stdout_flush(void)
{
	struct musl_file *m = (struct musl_file *)stdout;

	if (m->wpos != m->wbase)
		fflush(stdout);
}

/* stdout goes to the host log at info, stderr at warn (stdout is
 * line-buffered; fflush sends a partial line). */
size_t __stdout_write(FILE *f, const unsigned char *buf, size_t len);
size_t __stdout_write(FILE *f, const unsigned char *buf, size_t len)
{
	return write_to_log(f, buf, len, STRATA_LOG_INFO);
}

size_t __stdio_write(FILE *f, const unsigned char *buf, size_t len);
size_t __stdio_write(FILE *f, const unsigned char *buf, size_t len)
{
	return write_to_log(f, buf, len, STRATA_LOG_WARN);
}

/* stdin is empty: the first read is the end of the file. */
size_t __stdio_read(FILE *f, unsigned char *buf, size_t len);
size_t __stdio_read(FILE *f, unsigned char *buf, size_t len)
{
	((struct musl_file *)f)->flags |= MUSL_F_EOF;
	return 0;
}

long __stdio_seek(FILE *f, long off, int whence);
long __stdio_seek(FILE *f, long off, int whence)
{
	errno = ESPIPE;
	return -1;
}

int __stdio_close(FILE *f);
int __stdio_close(FILE *f)
{
	return 0;
}

/* One thread: musl's locks have nothing to wait for (its own use futex
 * system calls). */
void __lock(volatile int *l);
void __lock(volatile int *l) {}
void __unlock(volatile int *l);
void __unlock(volatile int *l) {}
int __lockfile(FILE *f);
int __lockfile(FILE *f)
{
	return 0;
}
void __unlockfile(FILE *f);
void __unlockfile(FILE *f) {}

/* No filesystem: opening a file finds none. */
FILE *fopen(const char *restrict path, const char *restrict mode)
{
	errno = ENOENT;
	return NULL;
}

FILE *freopen(const char *restrict path, const char *restrict mode, FILE *restrict f)
{
	errno = ENOENT;
	return NULL;
}

FILE *tmpfile(void)
{
	errno = ENOSYS;
	return NULL;
}

/* No file descriptors either (the streams are not files). */
int close(int fd)
{
	errno = EBADF;
	return -1;
}

int remove(const char *path)
{
	errno = ENOENT;
	return -1;
}

int rename(const char *from, const char *to)
{
	errno = ENOENT;
	return -1;
}

/* No environment, no shell. */
char *getenv(const char *name)
{
	return NULL;
}

int system(const char *cmd)
{
	if (!cmd)
		return 0;
	errno = ENOSYS;
	return -1;
}

/* The C locale is the only one: "C", "POSIX" and "" (the environment's,
 * which is C) select it; any other fails. */
char *setlocale(int cat, const char *name)
{
	static char c_name[] = "C";

	if (cat < LC_CTYPE || cat > LC_ALL)
		return NULL;
	if (name && *name && strcmp(name, "C") != 0 && strcmp(name, "POSIX") != 0)
		return NULL;
	return c_name;
}

/* musl's MB_CUR_MAX: 1 in the C locale (bytes are characters). */
size_t __ctype_get_mb_cur_max(void);
size_t __ctype_get_mb_cur_max(void)
{
	return 1;
}

/*
 * Time comes from the host only if the host registers a function
 * `clock_gettime` of signature i(i) (clock id -> nanoseconds, or a host
 * error); without one, clock_gettime fails with ENOSYS, time() and clock()
 * return -1.
 */
int clock_gettime(clockid_t id, struct timespec *ts)
{
	struct strata_value arg = strata_val_i64(id), ret;
	int st = strata_host_call("clock_gettime", &arg, 1, &ret, NULL, 0);

	if (st != STRATA_HOST_OK || ret.type != STRATA_T_I64 || ret.i64 < 0) {
		errno = st == STRATA_HOST_NO_FUNCTION || st == STRATA_HOST_BAD_ARGS ? ENOSYS : EINVAL;
		return -1;
	}
	ts->tv_sec = ret.i64 / 1000000000;
	ts->tv_nsec = ret.i64 % 1000000000;
	return 0;
}

time_t time(time_t *t)
{
	struct timespec ts;
	time_t v = clock_gettime(CLOCK_REALTIME, &ts) == 0 ? ts.tv_sec : (time_t)-1;

	if (t)
		*t = v;
	return v;
}

clock_t clock(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
		return (clock_t)-1;
	return (clock_t)(ts.tv_sec * 1000000 + ts.tv_nsec / 1000);
}

/* exit ends the guest: flush the streams, stop with the status as the
 * abort code (the host's call fails with VMM_E_ABORT). */
_Noreturn void exit(int status)
{
	fflush(stdout);
	fflush(stderr);
	strata_abort(status, "exit(%d) called", status);
}

_Noreturn void _Exit(int status)
{
	strata_abort(status, "_Exit(%d) called", status);
}

/* musl's own allocator entry points, for its members that call them: the
 * runtime's heap (docs/guest-alloc.md). */
void *__libc_malloc(size_t n);
void *__libc_malloc(size_t n)
{
	return malloc(n);
}
void *__libc_calloc(size_t n, size_t size);
void *__libc_calloc(size_t n, size_t size)
{
	return calloc(n, size);
}
void *__libc_realloc(void *p, size_t n);
void *__libc_realloc(void *p, size_t n)
{
	return realloc(p, n);
}
void __libc_free(void *p);
void __libc_free(void *p)
{
	free(p);
}

/* A smashed stack protector canary: a function's copy of the word at
 * %fs:0x28 (the host's thread block, vmm/abi.h) no longer matches it. The
 * runtime is built without the protector: this path reads no canary. */
_Noreturn void __stack_chk_fail(void);
_Noreturn void __stack_chk_fail(void)
{
	strata_abort(-5, "stack smashing detected (a function's stack protector canary was overwritten)");
}

/* The locking character functions (musl's wait with futex system calls
 * when contended; one thread never is). */
int fputc(int ch, FILE *f)
{
	return putc_unlocked(ch, f);
}
int putc(int ch, FILE *f) __attribute__((alias("fputc")));
int putchar(int ch)
{
	return putc_unlocked(ch, stdout);
}
int fgetc(FILE *f)
{
	return getc_unlocked(f);
}
int getc(FILE *f) __attribute__((alias("fgetc")));
int getchar(void)
{
	return getc_unlocked(stdin);
}

/* The C locale's multibyte conversion, as musl's C locale has it: bytes
 * below 0x80 are themselves, the others the code units 0xdf80-0xdfff. */
size_t wcrtomb(char *restrict s, wchar_t wc, mbstate_t *restrict st)
{
	if (!s)
		return 1;
	if ((unsigned)wc < 0x80 || ((unsigned)wc >= 0xdf80 && (unsigned)wc <= 0xdfff)) {
		*s = (char)wc;
		return 1;
	}
	errno = EILSEQ;
	return (size_t)-1;
}

size_t mbrtowc(wchar_t *restrict wc, const char *restrict s, size_t n, mbstate_t *restrict st)
{
	if (!s)
		return 0;
	if (!n)
		return (size_t)-2;
	unsigned char b = (unsigned char)*s;
	wchar_t v = b < 0x80 ? b : 0xdf00 + b;
	if (wc)
		*wc = v;
	return v != 0;
}

/* Collation in the C locale is byte order. */
int strcoll(const char *a, const char *b)
{
	return strcmp(a, b);
}

size_t strxfrm(char *restrict dst, const char *restrict src, size_t n)
{
	size_t len = strlen(src);

	if (len < n)
		memcpy(dst, src, len + 1);
	return len;
}

/* The messages of the errors a guest meets (musl's table is reached
 * through the thread's locale). */
char *strerror(int e)
{
	static const struct { int e; const char *msg; } msgs[] = {
		{ 0, "No error information" }, { ENOENT, "No such file or directory" },
		{ ENOSYS, "Function not implemented" }, { EINVAL, "Invalid argument" },
		{ ENOMEM, "Out of memory" }, { ERANGE, "Result not representable" },
		{ EDOM, "Domain error" }, { EILSEQ, "Illegal byte sequence" },
		{ ESPIPE, "Illegal seek" }, { EBADF, "Bad file descriptor" },
		{ EACCES, "Permission denied" }, { EEXIST, "File exists" },
	};
	static char unknown[32];

	for (size_t i = 0; i < sizeof msgs / sizeof msgs[0]; i++)
		if (msgs[i].e == e)
			return (char *)msgs[i].msg;
	snprintf(unknown, sizeof unknown, "Unknown error %d", e);
	return unknown;
}

/* The time zone is UTC: there are no zone files (musl's reader maps them
 * with system calls). */
const char __utc[] = "UTC";
char *tzname[2] = { (char *)__utc, (char *)__utc };
long timezone;
int daylight;

void tzset(void) {}

void __secs_to_zone(long long t, int local, int *isdst, long *offset, long *oppoff, const char **zonename);
void __secs_to_zone(long long t, int local, int *isdst, long *offset, long *oppoff, const char **zonename)
{
	*isdst = 0;
	*offset = 0;
	if (oppoff)
		*oppoff = 0;
	*zonename = __utc;
}

const char *__tm_to_tzname(const struct tm *tm);
const char *__tm_to_tzname(const struct tm *tm)
{
	return __utc;
}

/* The C locale's nl_langinfo (what strftime and asctime read). */
char *__nl_langinfo_l(nl_item item, locale_t loc);
char *__nl_langinfo_l(nl_item item, locale_t loc)
{
	static const char *const tm_names[] = {
		"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat",
		"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday",
		"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
		"January", "February", "March", "April", "May", "June", "July", "August",
		"September", "October", "November", "December",
		"AM", "PM", "%a %b %e %T %Y", "%m/%d/%y", "%H:%M:%S", "%I:%M:%S %p",
	};

	if (item >= ABDAY_1 && item <= T_FMT_AMPM)
		return (char *)tm_names[item - ABDAY_1];
	switch (item) {
	case CODESET: return (char *)"ASCII";
	case RADIXCHAR: return (char *)".";
	case YESEXPR: return (char *)"^[yY]";
	case NOEXPR: return (char *)"^[nN]";
	default: return (char *)"";
	}
}

char *nl_langinfo(nl_item item)
{
	return __nl_langinfo_l(item, 0);
}

/* One thread: a stream's lock is always free. */
void flockfile(FILE *f) {}
void funlockfile(FILE *f) {}
int ftrylockfile(FILE *f)
{
	return 0;
}

/* No processes, no temporary files, no shared objects. */
FILE *popen(const char *cmd, const char *mode)
{
	errno = ENOSYS;
	return NULL;
}

int pclose(FILE *f)
{
	errno = ECHILD;
	return -1;
}

char *tmpnam(char *buf)
{
	return NULL;
}

int mkstemp(char *tmpl)
{
	errno = ENOSYS;
	return -1;
}

void *dlopen(const char *path, int flags)
{
	return NULL;
}

void *dlsym(void *restrict handle, const char *restrict name)
{
	return NULL;
}

int dlclose(void *handle)
{
	return -1;
}

char *dlerror(void)
{
	return (char *)"a strata guest loads no shared objects";
}

/* ---- strftime: the C locale, in UTC (musl's reads the thread's locale) ---- */

struct tm_out {
	char *s;
	size_t max, n;
	bool full;
};

static void tm_put(struct tm_out *o, const char *p, size_t len)
{
	if (o->full || len >= o->max - o->n) {
		o->full = true;
		return;
	}
	memcpy(o->s + o->n, p, len);
	o->n += len;
}

/* v in decimal, at least `width` wide, padded with `pad` ('0' or ' '). */
static void tm_num(struct tm_out *o, long long v, int width, char pad)
{
	char b[24];
	int len = snprintf(b, sizeof b, pad == '0' ? "%0*lld" : "%*lld", width, v);

	tm_put(o, b, (size_t)len);
}

static bool leap(long long y)
{
	return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
}

/* ISO 8601 week number (1-53) of tm, and in *iso_year the year it belongs to. */
static int iso_week(const struct tm *tm, long long *iso_year)
{
	long long y = tm->tm_year + 1900LL;
	int wd = (tm->tm_wday + 6) % 7; /* Monday 0 */
	int week = (tm->tm_yday - wd + 10) / 7;
	/* Weeks in a year: 53 when it starts on a Thursday, or on a Wednesday
	 * in a leap year. */
	int jan1 = ((tm->tm_wday - tm->tm_yday) % 7 + 7) % 7; /* Sunday 0 */

	if (week < 1) {
		int pjan1 = ((jan1 - (leap(y - 1) ? 366 : 365)) % 7 + 7) % 7;
		week = pjan1 == 4 || (pjan1 == 3 && leap(y - 1)) ? 53 : 52;
		y--;
	} else if (week == 53 && !(jan1 == 4 || (jan1 == 3 && leap(y)))) {
		week = 1;
		y++;
	}
	*iso_year = y;
	return week;
}

static void tm_format(struct tm_out *o, const char *f, const struct tm *tm)
{
	long long year = tm->tm_year + 1900LL, iso_y;

	for (; *f && !o->full; f++) {
		if (*f != '%') {
			tm_put(o, f, 1);
			continue;
		}
		f++;
		if (*f == 'E' || *f == 'O') /* the C locale has no alternative forms */
			f++;
		switch (*f) {
		case 'a': tm_put(o, nl_langinfo(ABDAY_1 + (unsigned)tm->tm_wday % 7), 3); break;
		case 'A': { const char *d = nl_langinfo(DAY_1 + (unsigned)tm->tm_wday % 7); tm_put(o, d, strlen(d)); break; }
		case 'h':
		case 'b': tm_put(o, nl_langinfo(ABMON_1 + (unsigned)tm->tm_mon % 12), 3); break;
		case 'B': { const char *m = nl_langinfo(MON_1 + (unsigned)tm->tm_mon % 12); tm_put(o, m, strlen(m)); break; }
		case 'c': tm_format(o, "%a %b %e %H:%M:%S %Y", tm); break;
		case 'C': tm_num(o, year / 100, 2, '0'); break;
		case 'd': tm_num(o, tm->tm_mday, 2, '0'); break;
		case 'D': tm_format(o, "%m/%d/%y", tm); break;
		case 'e': tm_num(o, tm->tm_mday, 2, ' '); break;
		case 'F': tm_format(o, "%Y-%m-%d", tm); break;
		case 'g': iso_week(tm, &iso_y); tm_num(o, (iso_y % 100 + 100) % 100, 2, '0'); break;
		case 'G': iso_week(tm, &iso_y); tm_num(o, iso_y, 1, '0'); break;
		case 'H': tm_num(o, tm->tm_hour, 2, '0'); break;
		case 'I': tm_num(o, tm->tm_hour % 12 ? tm->tm_hour % 12 : 12, 2, '0'); break;
		case 'j': tm_num(o, tm->tm_yday + 1, 3, '0'); break;
		case 'm': tm_num(o, tm->tm_mon + 1, 2, '0'); break;
		case 'M': tm_num(o, tm->tm_min, 2, '0'); break;
		case 'n': tm_put(o, "\n", 1); break;
		case 'p': tm_put(o, tm->tm_hour < 12 ? "AM" : "PM", 2); break;
		case 'r': tm_format(o, "%I:%M:%S %p", tm); break;
		case 'R': tm_format(o, "%H:%M", tm); break;
		case 's': { struct tm t = *tm; tm_num(o, (long long)timegm(&t), 1, '0'); break; }
		case 'S': tm_num(o, tm->tm_sec, 2, '0'); break;
		case 't': tm_put(o, "\t", 1); break;
		case 'T': tm_format(o, "%H:%M:%S", tm); break;
		case 'u': tm_num(o, tm->tm_wday ? tm->tm_wday : 7, 1, '0'); break;
		case 'U': tm_num(o, (tm->tm_yday + 7 - tm->tm_wday) / 7, 2, '0'); break;
		case 'V': tm_num(o, iso_week(tm, &iso_y), 2, '0'); break;
		case 'w': tm_num(o, tm->tm_wday, 1, '0'); break;
		case 'W': tm_num(o, (tm->tm_yday + 7 - (tm->tm_wday + 6) % 7) / 7, 2, '0'); break;
		case 'x': tm_format(o, "%m/%d/%y", tm); break;
		case 'X': tm_format(o, "%H:%M:%S", tm); break;
		case 'y': tm_num(o, (year % 100 + 100) % 100, 2, '0'); break;
		case 'Y': tm_num(o, year, 1, '0'); break;
		case 'z': tm_put(o, "+0000", 5); break;
		case 'Z': tm_put(o, __utc, 3); break;
		case '%': tm_put(o, "%", 1); break;
		case '\0': f--; break; /* a trailing '%' is dropped */
		default: tm_put(o, f - 1, 2); break; /* unknown: copied as written */
		}
	}
}

/* Returns the length written, or 0 (contents unspecified) when the result
 * and its NUL do not fit in max bytes, as C says. */
size_t strftime(char *restrict s, size_t max, const char *restrict fmt, const struct tm *restrict tm)
{
	struct tm_out o = { .s = s, .max = max };

	if (!max)
		return 0;
	tm_format(&o, fmt, tm);
	if (o.full)
		return 0;
	s[o.n] = '\0';
	return o.n;
}
