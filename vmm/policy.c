/* policy.c: the reset policy and its file format (docs/restore.md): defaults, checks, reader and writer. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/sys.h"
#include "vmm/snap_int.h"

/*
 * Defaults, from the measurements in docs/restore.md: rewriting a page in
 * place costs far less than the fault that brings a dropped page back under
 * kvm_pvm (1 MiB written: 111 us vs 22.9 ms per call+restore), so REWRITE;
 * a page unchanged for 16 restores is given back; at most 64 ranges keep a
 * cold restore's mapping work under 50 us here (0.74 us per map).
 */
#define DEFAULT_KEEP 16u
#define DEFAULT_CAP 64u
#define DEFAULT_IDLE 1024u
#define CAP_MAX ST_MANIFEST_MAX_RANGES /* a capture never writes more ranges than a manifest may hold */

void vmm_policy_defaults(struct vmm_policy *p)
{
	memset(p, 0, sizeof(*p));
	p->mode = VMM_RESET_REWRITE;
	p->keep_restores = DEFAULT_KEEP;
	p->range_cap = DEFAULT_CAP;
	p->idle_cap = DEFAULT_IDLE;
	snprintf(p->source, sizeof(p->source), "defaults");
}

static const char *mode_name(enum vmm_reset_mode m)
{
	return m == VMM_RESET_DROP ? "drop" : "rewrite";
}

int vmm_policy_check(const struct vmm_policy *p, char *why, size_t whylen)
{
	const char *bad = NULL;

	if (p->mode != VMM_RESET_REWRITE && p->mode != VMM_RESET_DROP)
		bad = "reset mode is neither rewrite nor drop";
	else if (p->dirty != VMM_DIRTY_AUTO && p->dirty != VMM_DIRTY_SCAN && p->dirty != VMM_DIRTY_READ)
		bad = "dirty is neither auto, pagemap-scan nor pagemap-read";
	else if (p->keep_restores < 1 || p->keep_restores > VMM_POLICY_KEEP_MAX)
		bad = "keep_restores is not 1..255";
	else if (p->idle_cap < 1 || p->idle_cap > VMM_POLICY_IDLE_MAX)
		bad = "idle_cap is not 1..2^30";
	else if (p->range_cap < 1 || p->range_cap > CAP_MAX)
		bad = "range_cap is out of range";
	if (!bad)
		return 0;
	if (why && whylen)
		snprintf(why, whylen, "%s", bad);
	return VMM_E_BAD_POLICY;
}

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
		s[--n] = 0;
	return s;
}

static bool parse_uint(const char *s, unsigned max, unsigned *out)
{
	char *end;

	if (!*s || *s == '-' || *s == '+')
		return false;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || *end || v == 0 || v > max)
		return false;
	*out = (unsigned)v;
	return true;
}

int vmm_policy_read(const char *path, struct vmm_policy *out, char *why, size_t whylen)
{
	struct vmm_policy p;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	unsigned lineno = 0;
	FILE *f = fopen(path, "re");
	int rc = 0;

	if (!why)
		whylen = 0;
	if (!f) {
		rc = -errno;
		snprintf(why, whylen, "cannot open %s: %s", path, strerror(errno));
		return rc;
	}
	vmm_policy_defaults(&p);
	/* Whole lines, however long: a fixed buffer split a long line in two,
	 * so a comment's tail could read as a setting. */
	while ((len = getline(&line, &cap, f)) >= 0) {
		lineno++;
		if (memchr(line, '\0', (size_t)len))
			goto out_bad;
		char *s = trim(line);
		if (!*s || *s == '#')
			continue;
		char *eq = strchr(s, '=');
		if (!eq)
			goto out_bad;
		*eq = 0;
		char *k = trim(s), *v = trim(eq + 1);
		if (strcmp(k, "reset") == 0) {
			if (strcmp(v, "rewrite") == 0)
				p.mode = VMM_RESET_REWRITE;
			else if (strcmp(v, "drop") == 0)
				p.mode = VMM_RESET_DROP;
			else
				goto out_bad;
		} else if (strcmp(k, "keep_restores") == 0) {
			if (!parse_uint(v, VMM_POLICY_KEEP_MAX, &p.keep_restores))
				goto out_bad;
		} else if (strcmp(k, "idle_cap") == 0) {
			if (!parse_uint(v, VMM_POLICY_IDLE_MAX, &p.idle_cap))
				goto out_bad;
		} else if (strcmp(k, "range_cap") == 0) {
			if (!parse_uint(v, CAP_MAX, &p.range_cap))
				goto out_bad;
		} else if (strcmp(k, "dirty") == 0) {
			if (strcmp(v, "auto") == 0)
				p.dirty = VMM_DIRTY_AUTO;
			else if (strcmp(v, "pagemap-scan") == 0)
				p.dirty = VMM_DIRTY_SCAN;
			else if (strcmp(v, "pagemap-read") == 0)
				p.dirty = VMM_DIRTY_READ;
			else
				goto out_bad;
		} else if (strncmp(k, "x-", 2) != 0 && strncmp(k, "measured_", 9) != 0) {
			/* measured_* lines record what calibrate saw; x-* are extensions */
			goto out_bad;
		}
	}
	if (ferror(f)) {
		rc = -EIO;
		snprintf(why, whylen, "cannot read %s: %s", path, strerror(EIO));
		free(line);
		fclose(f);
		return rc;
	}
	free(line);
	fclose(f);
	snprintf(p.source, sizeof(p.source), "%s", path);
	*out = p;
	return 0;
out_bad:
	free(line);
	fclose(f);
	snprintf(why, whylen, "%s line %u: expected 'reset = rewrite|drop', 'keep_restores = 1..255', "
		 "'idle_cap = PAGES', 'range_cap = 1..%u' or 'dirty = auto|pagemap-scan|pagemap-read'", path, lineno, CAP_MAX);
	return VMM_E_BAD_POLICY;
}

/* A note's name: letters, digits and '_', so the line reads back as one key. */
static bool note_name_ok(const char *n)
{
	if (!n || !*n || strlen(n) > 64)
		return false;
	for (; *n; n++)
		if (!((*n >= 'a' && *n <= 'z') || (*n >= 'A' && *n <= 'Z') || (*n >= '0' && *n <= '9') || *n == '_'))
			return false;
	return true;
}

int vmm_policy_write(const char *path, const struct vmm_policy *p, const struct vmm_policy_note *notes,
		     size_t nnotes, char *why, size_t whylen)
{
	char tmp[4096];
	int rc, fd;
	FILE *f;

	if (!why)
		whylen = 0;
	if ((rc = vmm_policy_check(p, why, whylen)) < 0)
		return -EINVAL;
	for (size_t i = 0; i < nnotes; i++) {
		if (!note_name_ok(notes[i].name)) {
			snprintf(why, whylen, "note %zu: a name of letters, digits and '_' (at most 64)", i);
			return -EINVAL;
		}
	}
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
		snprintf(why, whylen, "%s: path too long", path);
		return -ENAMETOOLONG;
	}
	fd = st_sys_openat(AT_FDCWD, tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		rc = fd < 0 ? fd : -errno;
		snprintf(why, whylen, "cannot write %s: %s", tmp, strerror(-rc));
		if (fd >= 0)
			(void)st_sys_close(fd);
		return rc;
	}
	fprintf(f, "# strata reset policy (docs/restore.md), written by `strata calibrate`\n");
	fprintf(f, "reset = %s\nkeep_restores = %u\nidle_cap = %u\nrange_cap = %u\ndirty = %s\n", mode_name(p->mode),
		p->keep_restores, p->idle_cap, p->range_cap, vmm_dirty_name(p->dirty));
	for (size_t i = 0; i < nnotes; i++)
		fprintf(f, "measured_%s = %.2f\n", notes[i].name, notes[i].value);
	/* The whole file or nothing: flushed, synced, then renamed over path. */
	rc = fflush(f) == 0 && !ferror(f) ? st_sys_fsync(fileno(f)) : -errno;
	bool ok = rc == 0;
	if (fclose(f) != 0 && ok) {
		ok = false;
		rc = -errno;
	}
	if (ok && (rc = st_sys_renameat(AT_FDCWD, tmp, AT_FDCWD, path)) < 0)
		ok = false;
	if (!ok) {
		if (rc == 0)
			rc = -EIO;
		snprintf(why, whylen, "cannot write %s: %s", path, strerror(-rc));
		(void)st_sys_unlinkat(AT_FDCWD, tmp, 0);
		return rc;
	}
	return 0;
}

void vmm_policy_describe(const struct vmm_policy *p, char *buf, size_t len)
{
	snprintf(buf, len, "reset = %s, keep_restores = %u, idle_cap = %u, range_cap = %u, dirty = %s (from %s)",
		 mode_name(p->mode), p->keep_restores, p->idle_cap, p->range_cap, vmm_dirty_name(p->dirty), p->source);
}
