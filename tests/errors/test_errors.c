/* test_errors.c: st_strerror names every code the headers declare, once, and each module's alias is it. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "fs/fs.h"
#include "index/index.h"
#include "index/dist/dist.h"
#include "store/error.h"
#include "store/store.h"
#include "vmm/vmm.h"

static const struct {
	int code;
	const char *name;
} header_codes[] = {
#include "error_codes.h"
};
#define N_CODES (sizeof(header_codes) / sizeof(header_codes[0]))

/* The words st_strerror has for a code nobody named. */
static bool generic(const char *m)
{
	return !m || !m[0] || strstr(m, "Unknown error") || strstr(m, "unknown error") ||
	       strstr(m, "does not name") || strstr(m, "not linked");
}

Test(errors, every_code_of_the_headers_has_its_own_row)
{
	cr_assert_gt(N_CODES, 40, "codes.py found %zu codes", N_CODES);
	for (size_t i = 0; i < N_CODES; i++) {
		int c = header_codes[i].code;
		const struct st_errcode *row = st_errcode_find(c);

		cr_assert(row, "%s (%d) has no row in its module's error.c", header_codes[i].name, c);
		cr_expect_str_eq(row->name, header_codes[i].name, "code %d", c);
		cr_expect(!generic(st_strerror(c)), "%s: '%s'", header_codes[i].name, st_strerror(c));
		cr_expect_eq(st_strerror(c), row->message, "%s", header_codes[i].name);
		for (size_t j = 0; j < i; j++) {
			cr_expect_neq(header_codes[j].code, c, "%s and %s are both %d", header_codes[j].name,
				      header_codes[i].name, c);
			cr_expect_str_neq(st_strerror(header_codes[j].code), st_strerror(c), "%s and %s say the same",
					  header_codes[j].name, header_codes[i].name);
		}
	}
}

/* Walks every code of every range: none is strerror's "Unknown error N",
 * and the tables name exactly the codes the headers declare. */
Test(errors, every_code_of_every_range)
{
	size_t named = 0;

	for (int c = ST_E_FIRST; c > ST_E_FIRST - 4 * ST_ERR_RANGE; c--) {
		const char *m = st_strerror(c);

		cr_assert(m && !strstr(m, "Unknown error") && !strstr(m, "not linked"), "%d: '%s'", c, m);
		if (!st_errcode_find(c))
			continue;
		named++;
		bool declared = false;
		for (size_t i = 0; i < N_CODES; i++)
			declared |= header_codes[i].code == c;
		cr_expect(declared, "%d (%s) has a row but no header declares it", c, st_errcode_find(c)->name);
	}
	cr_expect_eq(named, N_CODES, "%zu rows, %zu codes in the headers", named, N_CODES);
}

Test(errors, errno_and_success)
{
	cr_expect_str_eq(st_strerror(-ENOENT), strerror(ENOENT));
	cr_expect_str_eq(st_strerror(-ENOSPC), strerror(ENOSPC));
	cr_expect_str_eq(st_strerror(0), "success");
	cr_expect(strstr(st_strerror(-1500), "not linked"), "%s", st_strerror(-1500));
	cr_expect_str_eq(st_strerror(-30781), "unknown error"); /* an LMDB code: ix_err maps them */
	cr_expect_str_eq(st_strerror(-5000), "unknown error");
}

/* Each module's strerror is the dispatcher: fs serves lazy reads, so it
 * names the registry's and lazy layers' codes; the vmm names the index's. */
Test(errors, every_alias_is_the_dispatcher)
{
	cr_expect(strstr(fs_strerror(IX_EREF), "registry reference"), "%s", fs_strerror(IX_EREF));
	cr_expect(strstr(fs_strerror(IX_ELAZY_BADCHUNK), "chunk"), "%s", fs_strerror(IX_ELAZY_BADCHUNK));
	cr_expect(strstr(fs_strerror(IX_ELAZY_OFFLINE), "registry"), "%s", fs_strerror(IX_ELAZY_OFFLINE));
	cr_expect(strstr(vmm_strerror(IX_ENOTFOUND), "index"), "%s", vmm_strerror(IX_ENOTFOUND));
	cr_expect(strstr(ix_strerror(FS_EMOUNTED), "mounted"), "%s", ix_strerror(FS_EMOUNTED));
	cr_expect(strstr(ix_registry_strerror(VMM_E_TIMEOUT), "timed out"), "%s", ix_registry_strerror(VMM_E_TIMEOUT));
	for (size_t i = 0; i < N_CODES; i++) {
		int c = header_codes[i].code;
		const char *m = st_strerror(c);

		cr_expect_eq(ix_strerror(c), m, "%s", header_codes[i].name);
		cr_expect_eq(ix_registry_strerror(c), m, "%s", header_codes[i].name);
		cr_expect_eq(ix_lazy_strerror(c), m, "%s", header_codes[i].name);
		cr_expect_eq(vmm_strerror(c), m, "%s", header_codes[i].name);
		cr_expect_eq(fs_strerror(c), m, "%s", header_codes[i].name);
	}
}
