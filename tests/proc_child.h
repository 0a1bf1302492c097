/* proc_child.h: find this process's process-backend child, for the tests that look at its /proc files. */
#ifndef STRATA_TESTS_PROC_CHILD_H
#define STRATA_TESTS_PROC_CHILD_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#include "vmm/proc/proc_abi.h"

/* The pid of this process's child whose maps show the process backend's
 * control pages, and the memfd offset they map (= guest memory's size); 0
 * if none. */
static inline pid_t proc_child_find(uint64_t *mem_size)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	pid_t found = 0;
	char path[64], line[256];

	while (d && !found && (e = readdir(d))) {
		int pid = atoi(e->d_name), ppid = 0;
		FILE *f;
		if (pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/stat", pid);
		if (!(f = fopen(path, "re")))
			continue;
		if (fscanf(f, "%*d (%*[^)]) %*c %d", &ppid) != 1)
			ppid = 0;
		fclose(f);
		if (ppid != getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/%d/maps", pid);
		if (!(f = fopen(path, "re")))
			continue;
		unsigned long long lo, off;
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "%llx-%*x %*s %llx", &lo, &off) == 2 && lo == PROC_CTL) {
				*mem_size = off;
				found = pid;
			}
		fclose(f);
	}
	if (d)
		closedir(d);
	return found;
}

#endif
