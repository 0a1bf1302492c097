/* harness.h: what the test harness's own probes (tests/harness/kvm_works.c and pagemap_scan_works.c, no strata code) say this machine has. */
#ifndef STRATA_TESTS_HARNESS_H
#define STRATA_TESTS_HARNESS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * A suite about to skip because strata's own check says something is
 * missing asks the harness first: harness_has("KVM", ...) or
 * harness_has("PAGEMAP_SCAN", ...). Returns 1 when the harness's probe
 * found it working (the suite must then fail, not skip), 0 when the probe
 * agrees it is missing, -1 when no probe could be asked; why gets the
 * probe's words. tests/run runs each probe once and exports
 * STRATA_HARNESS_<NAME>=1/0 and STRATA_HARNESS_<NAME>_WHY; without those
 * (meson test alone) the probe in STRATA_BUILD/tests/harness runs here.
 */
static inline int harness_has(const char *name, char *why, size_t len)
{
	char var[64], line[512] = "";
	const char *v, *w, *build = getenv("STRATA_BUILD");

	snprintf(var, sizeof(var), "STRATA_HARNESS_%s", name);
	v = getenv(var);
	if (v && (*v == '0' || *v == '1')) {
		snprintf(var, sizeof(var), "STRATA_HARNESS_%s_WHY", name);
		w = getenv(var);
		snprintf(why, len, "%s", w ? w : "(no reason exported)");
		return *v == '1';
	}
	snprintf(why, len, "no harness probe (STRATA_BUILD unset)");
	if (!build)
		return -1;
	char cmd[4096];
	snprintf(cmd, sizeof(cmd), "'%s/tests/harness/%s_works'",
		 build, strcmp(name, "KVM") == 0 ? "kvm" : "pagemap_scan");
	FILE *p = popen(cmd, "re");
	if (!p)
		return -1;
	if (!fgets(line, sizeof(line), p))
		line[0] = 0;
	int st = pclose(p);
	line[strcspn(line, "\n")] = 0;
	if (st != 0 || (line[0] != '0' && line[0] != '1') || line[1] != ' ') {
		snprintf(why, len, "the harness probe said '%.300s' (status %d)", line, st);
		return -1;
	}
	snprintf(why, len, "%s", line + 2);
	return line[0] == '1';
}

#endif
