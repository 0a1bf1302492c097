/* mounts.c: whether a directory is on a strata mount, and the store behind it (/proc/self/mountinfo + statfs). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "store/array.h"
#include "store/mountabi.h"
#include "vmm/vmm_int.h"

/* The largest mountinfo read; a table larger than this is not searched (answers "not a mount"). */
#define MOUNTS_TEXT_MAX (4u << 20)

/* Copy field [s, e) of a mountinfo line to out, undoing the kernel's octal
 * escapes (\040 space, \011 tab, \012 newline, \134 backslash). */
static int unescape(const char *s, const char *e, char *out, size_t size)
{
	size_t n = 0;

	while (s < e) {
		char c = *s++;
		if (c == '\\' && e - s >= 3 && s[0] >= '0' && s[0] <= '3' && s[1] >= '0' && s[1] <= '7' &&
		    s[2] >= '0' && s[2] <= '7') {
			c = (char)((s[0] - '0') << 6 | (s[1] - '0') << 3 | (s[2] - '0'));
			s += 3;
		}
		if (c == '\0' || n + 1 >= size)
			return -ENAMETOOLONG;
		out[n++] = c;
	}
	out[n] = '\0';
	return 0;
}

/* The next space-separated field of [*p, e), or NULL at the end of the line. */
static const char *next_field(const char **p, const char *e, const char **fend)
{
	const char *s = *p;

	while (s < e && *s == ' ')
		s++;
	if (s >= e)
		return NULL;
	const char *f = s;
	while (s < e && *s != ' ')
		s++;
	*fend = s;
	*p = s;
	return f;
}

int vmm_mountinfo_store(const char *text, size_t len, unsigned major, unsigned minor, char *store, size_t size)
{
	const char *end = text + len;

	for (const char *line = text; line < end;) {
		const char *eol = memchr(line, '\n', (size_t)(end - line));
		if (!eol)
			eol = end;
		/* id parent major:minor root mountpoint options [optional...] - fstype source superoptions */
		const char *p = line, *f, *fe = NULL, *fstype = NULL, *fstype_end = NULL;
		unsigned i = 0, ma, mi;
		bool dev_match = false;
		while ((f = next_field(&p, eol, &fe))) {
			if (i == 2) {
				char dev[32];
				int used = 0;
				if ((size_t)(fe - f) < sizeof(dev)) {
					memcpy(dev, f, (size_t)(fe - f));
					dev[fe - f] = '\0';
					dev_match = sscanf(dev, "%u:%u%n", &ma, &mi, &used) == 2 && used == fe - f &&
						    ma == major && mi == minor;
				}
				if (!dev_match)
					break;
			} else if (i >= 6 && fe - f == 1 && *f == '-') {
				fstype = next_field(&p, eol, &fstype_end);
				const char *src_end = NULL, *src = fstype ? next_field(&p, eol, &src_end) : NULL;
				if (!src || (size_t)(fstype_end - fstype) != strlen(ST_MOUNT_FSTYPE) ||
				    memcmp(fstype, ST_MOUNT_FSTYPE, strlen(ST_MOUNT_FSTYPE)) != 0)
					break;
				if ((size_t)(src_end - src) <= strlen(ST_MOUNT_SOURCE) ||
				    memcmp(src, ST_MOUNT_SOURCE, strlen(ST_MOUNT_SOURCE)) != 0)
					break;
				if (unescape(src + strlen(ST_MOUNT_SOURCE), src_end, store, size) < 0 || store[0] != '/')
					break;
				return 1;
			}
			i++;
		}
		line = eol + 1;
	}
	return 0;
}

/*
 * The answer for the last device asked about, kept while the mount table is
 * unchanged: /proc/self/mountinfo polls POLLPRI after any mount or unmount
 * (proc(5)), so a repeated open costs one poll(2), not a read of the table
 * and a statfs round trip to the daemon.
 */
static pthread_mutex_t mounts_lock = PTHREAD_MUTEX_INITIALIZER;
static int mounts_fd = -1;
static struct {
	bool valid;
	dev_t dev;
	int answer;          /* 1: a strata mount of store, 0: not */
	char store[4096];
} mounts_last;

/* Read the whole of /proc/self/mountinfo through fd (from its start). */
static int read_table(int fd, char **out, size_t *len)
{
	size_t cap = 16384, n = 0;
	char *buf = malloc(cap);

	if (!buf)
		return -ENOMEM;
	for (;;) {
		if (n == cap) {
			if (cap >= MOUNTS_TEXT_MAX || ST_ARRAY_RESERVE(buf, cap, cap + 1) < 0) {
				free(buf);
				return -ENOMEM;
			}
		}
		ssize_t r = pread(fd, buf + n, cap - n, (off_t)n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int rc = -errno;
			free(buf);
			return rc;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	*out = buf;
	*len = n;
	return 0;
}

int vmm_mount_store(const char *path, dev_t dev, char *store, size_t size)
{
	struct statfs sfs;
	char *text = NULL;
	size_t len = 0;
	int rc;

	pthread_mutex_lock(&mounts_lock);
	if (mounts_fd < 0)
		mounts_fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	struct pollfd pfd = { .fd = mounts_fd, .events = POLLPRI };
	/* Any event (or a failed poll) means the table may have changed. */
	if (mounts_fd >= 0 && poll(&pfd, 1, 0) != 0)
		mounts_last.valid = false;
	if (mounts_fd >= 0 && mounts_last.valid && mounts_last.dev == dev) {
		rc = mounts_last.answer;
		goto out_answer;
	}
	rc = 0;
	/* The kernel says FUSE (the mount table alone could name a stale
	 * entry), and the table says which FUSE: strata's, of which store.
	 * Only a clear answer is kept (a failed statfs or read is asked again). */
	bool clear = statfs(path, &sfs) == 0 && mounts_fd >= 0;
	if (clear && sfs.f_type == ST_MOUNT_FUSE_MAGIC) {
		clear = read_table(mounts_fd, &text, &len) == 0;
		if (clear)
			rc = vmm_mountinfo_store(text, len, major(dev), minor(dev), mounts_last.store,
						 sizeof(mounts_last.store));
	}
	free(text);
	if (clear) {
		mounts_last.valid = true;
		mounts_last.dev = dev;
		mounts_last.answer = rc;
	}
out_answer:
	if (rc == 1 && strlen(mounts_last.store) >= size)
		rc = 0;
	if (rc == 1)
		memcpy(store, mounts_last.store, strlen(mounts_last.store) + 1);
	pthread_mutex_unlock(&mounts_lock);
	return rc;
}
