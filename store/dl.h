/* dl.h: not installed: shared by store, index and the CLI: a shared library loaded on first use from an absolute path fixed at build time. */
#ifndef STRATA_STORE_DL_H
#define STRATA_STORE_DL_H

#include <stddef.h>

/*
 * The registry's HTTP stack (libcurl and the TLS libraries it needs) and
 * OpenSSL's libcrypto cost a process tens of libraries to map and relocate at
 * its start (docs/library.md, "What a process loads"), so the code that needs
 * them loads them the first time it runs. path is absolute and chosen when
 * strata is built: dlopen() of an absolute path searches nothing, so no
 * environment variable redirects it. syms names each symbol; fns is n
 * pointers' room (a struct of function pointers), and its i-th pointer
 * receives syms[i] (copied by memcpy, as POSIX lets dlsym's result be). st_dl_load loads once per process (thread-safe) and returns 0, or
 * -ELIBACC with the reason in why (the library or one of its symbols missing).
 */
struct st_dl {
	const char *path;
	const char *const *syms;
	void *fns;
	size_t n;
	int done; /* set (release) once rc is final */
	int rc;
	char why[256];
};

#define ST_DL_INIT(path_, syms_, fns_, n_) \
	{ .path = (path_), .syms = (syms_), .fns = (fns_), .n = (n_) }

int st_dl_load(struct st_dl *dl);

#endif
