/* helpers.h: fixtures for the snapshot tests: a temp store, a simpleguest sandbox, capture+rebase in one step. */
#ifndef STRATA_TESTS_SNAP_HELPERS_H
#define STRATA_TESTS_SNAP_HELPERS_H

#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"
#include "vmm/vmm.h"

extern char sh_dir[256];
extern struct st_store *sh_store;

/* Fresh temp dir with a store (ST_SYNC_NONE: tests need kill -9 safety, not power loss). */
void sh_setup(void);
void sh_teardown(void);
/* A simpleguest sandbox with `heap` bytes of heap (0: default). Asserts. */
struct vmm_sandbox *sh_sandbox(uint64_t heap);
/* Capture, then rebase; *m (may be NULL) gets the manifest, owned by the caller. Returns rc. */
int sh_snap(struct vmm_sandbox *sb, struct st_manifest **m);
/* Call a function of signature i(i) or i(); asserts success, returns the result. */
int64_t sh_call_i(struct vmm_sandbox *sb, const char *fn, int nargs, int64_t a);
/* Echo s through the guest; asserts the result equals s. */
void sh_echo(struct vmm_sandbox *sb, const char *s);
/* A call of fn(addr) (signature i(i)) that must end in a page fault at
 * addr (what names the page in messages); the sandbox is restored after. */
void sh_must_page_fault(struct vmm_sandbox *sb, const char *fn, uint64_t addr, const char *what);
/* A host of this run's backend in debug mode (every restore, the warm
 * park's included, checks memory and vCPU) keeping `warm` warm sandboxes
 * and `shells` VM shells. Asserts. */
struct vmm_host *sh_debug_host(unsigned warm, unsigned shells);
/* A new sandbox from m (layers in sh_store), asserted equal to the
 * snapshot, memory and vCPU. */
struct vmm_sandbox *sh_from_snapshot_checked(const struct st_manifest *m, const struct vmm_config *cfg);
/* One call of a hostile-guest channel function (vmm/guest/hostile*.c): its
 * value, or 0 where it was refused: rc is one `refused` accepts (it asserts
 * on any other). A refused call leaves the sandbox restored, so the next
 * step starts from the snapshot again. */
int64_t sh_channel_call(struct vmm_sandbox *sb, const char *fn, bool (*refused)(int rc, const struct vmm_error *e));

#endif
