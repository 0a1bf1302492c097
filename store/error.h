/* error.h: not installed: shared by every module: the code range table each fills (one const table per module, found by st_strerror) and st_why. */
#ifndef STRATA_STORE_ERROR_H
#define STRATA_STORE_ERROR_H

#include <stddef.h>

/*
 * strata's codes are one space: -errno (-1..-4095) and, below it, one range
 * of a hundred codes per module: the store -1000..-1099, the index
 * -1100..-1199 (its registry -1150..-1159, lazy layers -1160..-1169), the
 * vmm -1200..-1299, fs -1300..-1399. Each module's error.c holds one
 * const table of its codes (code, the enum's name, the message) and adds
 * it here from a constructor, so st_strerror, in the lowest module, names
 * every code of every module linked into the program without calling up
 * the dependency arrows (store <- index <- fs; store <- vmm). The module's
 * error.c also holds a function every part of the module calls (ix_err,
 * vmm_fail, ...), so linking any of the module links its table too.
 */

#define ST_ERR_RANGE 100 /* codes in a module's range */

struct st_errcode {
	int code;
	const char *name;    /* the enum's identifier: "IX_ENOTFOUND" */
	const char *message; /* what st_strerror returns */
};

struct st_errtable {
	int first;           /* the range's first code: -1000, -1100, ...; a multiple of -ST_ERR_RANGE */
	const struct st_errcode *codes;
	size_t n;
};

/* Adds a table (a static const one, at load time: module constructors call
 * it before main or from dlopen, never while another thread reads). One
 * table per range; a second for the same range is ignored. */
void st_errtable_add(const struct st_errtable *t);

/* The row for a code of a range whose table was added, else NULL. */
const struct st_errcode *st_errcode_find(int code);

/* Format a one-line reason into why (if non-NULL; newlines made spaces)
 * and return code: how every module fills its why buffers. */
int st_why(char *why, size_t whylen, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif
