/* fuzz_lua.c: fuzz target 10, Lua chunks fed to lua.elf's eval in a real sandbox: each ends in a result, a Lua error or the call timeout, never a fault or an abort, and the sandbox answers the next call. */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "index/index.h"
#include "store/store.h"
#include "tests/fuzz/fuzz.h"
#include "vmm/vmm.h"

/* One sandbox from a snapshot of lua.elf after init, restored after each
 * input (the first input pays for the store and the snapshot). */
static struct vmm_sandbox *sb;
/* What sb was made from, freed at exit (before its directory goes). */
static struct st_store *store_of;
static struct ix *ix_of;
static struct st_manifest *snap_of;
static char dir[] = "/tmp/strata-fuzz-lua.XXXXXX";

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void dir_remove(void)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void sandbox_drop(void)
{
	vmm_sandbox_free(sb);
	st_manifest_free(snap_of);
	ix_close(ix_of);
	st_store_close(store_of);
}

static const char *lua_elf(void)
{
	static char path[4096];
	const char *build = getenv("STRATA_BUILD");

	snprintf(path, sizeof(path), "%s/vmm/guest/lua/lua.elf", build ? build : STRATA_BUILD_ROOT);
	return path;
}

static void sandbox_make(void)
{
	char store[sizeof(dir) + 8];
	struct vmm_config cfg = { .timeout_ns = 2000000000ull };
	struct vmm_sandbox *first;
	struct vmm_error err;
	st_id id;

	FUZZ_CHECK(mkdtemp(dir), "mkdtemp");
	atexit(dir_remove);
	snprintf(store, sizeof(store), "%s/store", dir);
	FUZZ_CHECK(st_store_init(store, NULL) == 0 && st_store_open(store, 0, &store_of) == 0 && ix_open(store_of, NULL, &ix_of) == 0,
		   "a store in %s", store);
	FUZZ_CHECK(vmm_sandbox_new(lua_elf(), &cfg, &first, &err) == 0, "%s: %s", lua_elf(), err.message);
	FUZZ_CHECK(vmm_sandbox_capture(first, store_of, &snap_of) == 0 && ix_snap_commit(ix_of, snap_of, "lua", 0, &id) == 0, "capture");
	vmm_sandbox_free(first);
	FUZZ_CHECK(vmm_sandbox_from_snapshot(snap_of, vmm_layer_open_store, store_of, &cfg, &sb, &err) == 0, "%s", err.message);
	/* sb keeps what it maps; the store, index and manifest live as long. */
	atexit(sandbox_drop);
}

static int eval(const char *chunk, size_t len, struct vmm_result *res)
{
	struct vmm_value a = { .type = VMM_STR, .data = chunk, .len = len };

	memset(res, 0, sizeof(*res));
	return vmm_sandbox_call(sb, "eval", &a, 1, res);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vmm_result res;

	if (size > 8192)
		return 0;
	if (!sb)
		sandbox_make();
	/* A string argument is its bytes up to a NUL, as the CLI passes one. */
	size_t len = strnlen((const char *)data, size);
	char *chunk = malloc(len + 1);
	FUZZ_CHECK(chunk, "malloc");
	memcpy(chunk, data, len);
	chunk[len] = 0;
	int rc = eval(chunk, len, &res);
	free(chunk);
	FUZZ_CHECK(rc == 0 || rc == VMM_E_GUEST_ERROR || rc == VMM_E_TIMEOUT, "eval: rc %d (%s): %s", rc,
		   vmm_strerror(rc), vmm_sandbox_error(sb)->message);
	if (rc == 0)
		vmm_result_clear(&res);
	if (rc != VMM_E_TIMEOUT) {
		rc = eval("return 6 * 7", 12, &res);
		FUZZ_CHECK(rc == 0 && strcmp(res.data, "42") == 0, "the next call: rc %d (%s)", rc,
			   vmm_sandbox_error(sb)->message);
		vmm_result_clear(&res);
	}
	FUZZ_CHECK(vmm_sandbox_restore(sb) == 0, "restore: %s", vmm_sandbox_error(sb)->message);
	return 0;
}
