/* helpers.c: fixtures for the snapshot tests. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tests/kvm_check.h"
#include "../backend_env.h"

char sh_dir[256];
struct st_store *sh_store;

void sh_setup(void)
{
	kvm_require();
	snprintf(sh_dir, sizeof(sh_dir), "/tmp/strata-snap-XXXXXX");
	cr_assert(mkdtemp(sh_dir));
	char p[300];
	snprintf(p, sizeof(p), "%s/store", sh_dir);
	struct st_store_opts o = { .sync = ST_SYNC_NONE };
	cr_assert_eq(st_store_init(p, &o), 0);
	cr_assert_eq(st_store_open(p, 0, &sh_store), 0);
}

void sh_teardown(void)
{
	char cmd[600];

	st_store_close(sh_store);
	sh_store = NULL;
	snprintf(cmd, sizeof(cmd), "chmod -R u+w %s; rm -rf %s", sh_dir, sh_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cleanup of %s failed\n", sh_dir);
}

struct vmm_sandbox *sh_sandbox(uint64_t heap)
{
	struct vmm_config cfg = { .heap_size = heap };
	struct vmm_sandbox *sb = NULL;
	struct vmm_error err;
	int rc = vmm_sandbox_new(SIMPLEGUEST, &cfg, &sb, &err);

	cr_assert_eq(rc, 0, "sandbox: %s", err.message);
	return sb;
}

int sh_snap(struct vmm_sandbox *sb, struct st_manifest **out)
{
	struct st_manifest *m = NULL;
	st_id id;
	int rc = vmm_sandbox_capture(sb, sh_store, &m);

	if (rc < 0)
		return rc;
	cr_assert_eq(st_manifest_id(m, &id, NULL, 0), 0);
	rc = vmm_sandbox_rebase(sb, m, &id);
	if (out && rc == 0)
		*out = m;
	else
		st_manifest_free(m);
	return rc;
}

int64_t sh_call_i(struct vmm_sandbox *sb, const char *fn, int nargs, int64_t a)
{
	struct vmm_value v = { .type = VMM_I64, .i64 = a };
	struct vmm_result r = { 0 };
	int rc = vmm_sandbox_call(sb, fn, &v, (size_t)nargs, &r);

	cr_assert_eq(rc, 0, "%s: %s", fn, vmm_sandbox_error(sb)->message);
	return r.i64;
}

void sh_echo(struct vmm_sandbox *sb, const char *s)
{
	struct vmm_value v = { .type = VMM_STR, .data = s, .len = strlen(s) };
	struct vmm_result r = { 0 };
	int rc = vmm_sandbox_call(sb, "echo", &v, 1, &r);

	cr_assert_eq(rc, 0, "echo: %s", vmm_sandbox_error(sb)->message);
	cr_assert_str_eq(r.data, s);
	vmm_result_clear(&r);
}

struct vmm_host *sh_debug_host(unsigned warm, unsigned shells)
{
	struct vmm_host_config hc;
	struct vmm_host *host;
	struct vmm_error err;

	vmm_host_config_defaults(&hc);
	hc.backend = vmm_backend_resolve(vmm_host_default(), VMM_BACKEND_AUTO);  /* this run's backend */
	hc.warm = warm;
	hc.shells = shells;
	hc.debug = true;
	cr_assert_eq(vmm_host_new(&hc, &host, &err), 0, "%s", err.message);
	return host;
}

struct vmm_sandbox *sh_from_snapshot_checked(const struct st_manifest *m, const struct vmm_config *cfg)
{
	struct vmm_sandbox *sb;
	struct vmm_error err;
	uint64_t gpage = 0;

	cr_assert_eq(vmm_sandbox_from_snapshot(m, vmm_layer_open_store, sh_store, cfg, &sb, &err), 0, "%s",
		     err.message);
	cr_assert_eq(vmm_sandbox_check(sb, &gpage), 0, "%s", vmm_sandbox_error(sb)->message);
	return sb;
}

int64_t sh_channel_call(struct vmm_sandbox *sb, const char *fn, bool (*refused)(int rc, const struct vmm_error *e))
{
	struct vmm_result r = { 0 };
	int rc = vmm_sandbox_call(sb, fn, NULL, 0, &r);

	if (rc == 0)
		return r.i64;
	const struct vmm_error *e = vmm_sandbox_error(sb);
	cr_assert(refused(rc, e), "%s: %s (%s)", fn, e->message, vmm_strerror(rc));
	cr_log_info("%s refused: %s", fn, e->message);
	cr_assert_eq(vmm_sandbox_restore(sb), 0, "%s after %s: %s", fn, e->message, vmm_sandbox_error(sb)->message);
	return 0;
}

/* The page fault is asserted on every count: rc, vector and address. */
void sh_must_page_fault(struct vmm_sandbox *sb, const char *fn, uint64_t addr, const char *what)
{
	struct vmm_value a = { .type = VMM_I64, .i64 = (int64_t)addr };
	struct vmm_result r = { 0 };
	int rc = vmm_sandbox_call(sb, fn, &a, 1, &r);
	const struct vmm_error *e = vmm_sandbox_error(sb);

	cr_assert_neq(rc, 0, "%s of the %s page at %#llx from CPL 3 worked", fn, what, (unsigned long long)addr);
	cr_assert_eq(rc, VMM_E_GUEST_FAULT, "%s %s: %s", fn, what, e->message);
	cr_assert_eq(e->vector, 14, "%s %s: %s", fn, what, e->message);
	cr_assert_eq(e->fault_addr, addr, "%s %s: %s", fn, what, e->message);
	cr_assert_eq(vmm_sandbox_restore(sb), 0, "%s", vmm_sandbox_error(sb)->message);
}
