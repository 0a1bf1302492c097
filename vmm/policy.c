/* policy.c: the reset policy file `strata calibrate` writes and sandboxes read at creation (docs/restore.md). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

int vmm_policy_default_path(char *buf, size_t len)
{
	const char *x = getenv("XDG_CONFIG_HOME"), *h = getenv("HOME");
	int n;

	if (x && *x)
		n = snprintf(buf, len, "%s/strata/policy", x);
	else if (h && *h)
		n = snprintf(buf, len, "%s/.config/strata/policy", h);
	else
		return -ENOENT;
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
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
			if (!parse_uint(v, 255, &p.keep_restores))
				goto out_bad;
		} else if (strcmp(k, "idle_cap") == 0) {
			if (!parse_uint(v, 1u << 30, &p.idle_cap))
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

static struct vmm_policy global;
static pthread_once_t global_once = PTHREAD_ONCE_INIT;

static void global_load(void)
{
	char path[512], why[512];
	const char *env = getenv("STRATA_POLICY");

	vmm_policy_defaults(&global);
	if (env && *env) {
		if (vmm_policy_read(env, &global, why, sizeof(why)) < 0) {
			vmm_policy_defaults(&global);
			snprintf(global.source, sizeof(global.source), "defaults (%.200s)", why);
		}
		return;
	}
	if (vmm_policy_default_path(path, sizeof(path)) == 0 && access(path, F_OK) == 0 &&
	    vmm_policy_read(path, &global, why, sizeof(why)) < 0) {
		vmm_policy_defaults(&global);
		snprintf(global.source, sizeof(global.source), "defaults (%.200s)", why);
	}
}

const struct vmm_policy *vmm_policy_get(void)
{
	pthread_once(&global_once, global_load);
	return &global;
}

void vmm_policy_describe(char *buf, size_t len)
{
	const struct vmm_policy *p = vmm_policy_get();

	snprintf(buf, len, "reset = %s, keep_restores = %u, idle_cap = %u, range_cap = %u, dirty = %s (from %s)",
		 p->mode == VMM_RESET_DROP ? "drop" : "rewrite", p->keep_restores, p->idle_cap, p->range_cap,
		 vmm_dirty_name(p->dirty), p->source);
}
