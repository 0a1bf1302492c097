/* helpers.h: shared helpers of the vmm tests (guest path, sandbox with host functions). */
#ifndef STRATA_TESTS_VMM_HELPERS_H
#define STRATA_TESTS_VMM_HELPERS_H

#include "vmm/vmm.h"

/* Path of the built simpleguest ELF. */
const char *guest_path(void);
/* A simpleguest sandbox with host_add and host_upper registered; aborts the test on failure. */
struct vmm_sandbox *guest_new(const struct vmm_config *cfg);
/* The same for the guest ELF at path (lua.elf). */
struct vmm_sandbox *guest_new_at(const char *path, const struct vmm_config *cfg);
/* Call fn with a string argument / two integers; returns the call's rc. */
int call_str(struct vmm_sandbox *sb, const char *fn, const char *arg, struct vmm_result *res);
int call_i64(struct vmm_sandbox *sb, const char *fn, int64_t a, int64_t b, unsigned nargs, struct vmm_result *res);
/* Read a whole file, NUL-terminated; NULL on failure. */
void *file_read(const char *path, size_t *len);

#endif
