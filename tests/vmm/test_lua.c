/* test_lua.c: lua.elf against the hostile-script corpus (tests/lua/hostile/): each script gets the Lua error, result or timeout its first lines expect, and the sandbox serves the next call with its state kept. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "helpers.h"

static const char *lua_elf(void)
{
	static char path[4096];
	const char *build = getenv("STRATA_BUILD");

	snprintf(path, sizeof path, "%s/vmm/guest/lua/lua.elf", build ? build : ".");
	return path;
}

/* The script's header: "-- heap: NM" (MiB, else the default heap),
 * "-- timeout: Ns" (else 30 s: a 256 MiB recursion takes seconds on a
 * loaded machine) and
 * "-- expect: error TEXT" | "-- expect: result TEXT" | "-- expect: timeout". */
struct expect {
	unsigned long heap_mib, timeout_s;
	char kind[16];
	char text[512];
};

static void header_read(const char *name, const char *script, struct expect *e)
{
	const char *p = script;

	memset(e, 0, sizeof(*e));
	while (strncmp(p, "-- ", 3) == 0) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		char line[600];

		cr_assert_lt(len, sizeof(line), "%s: header line too long", name);
		memcpy(line, p, len);
		line[len] = 0;
		if (sscanf(line, "-- heap: %luM", &e->heap_mib) != 1 && sscanf(line, "-- timeout: %lus", &e->timeout_s) != 1 &&
		    sscanf(line, "-- expect: %15s", e->kind) == 1) {
			const char *t = line + strlen("-- expect: ") + strlen(e->kind);
			snprintf(e->text, sizeof(e->text), "%s", *t == ' ' ? t + 1 : t);
		}
		if (!nl)
			break;
		p = nl + 1;
	}
	cr_assert(e->kind[0], "%s: no '-- expect:' line", name);
}

static void eval_expect(struct vmm_sandbox *sb, const char *chunk, const char *want)
{
	struct vmm_result res;

	cr_assert_eq(call_str(sb, "eval", chunk, &res), 0, "eval %s: %s", chunk, vmm_sandbox_error(sb)->message);
	cr_assert_str_eq(res.data, want, "eval %s", chunk);
	vmm_result_clear(&res);
}

/* One hostile script: a sandbox that has loaded some state runs it, gets
 * what its header expects, then answers from that state. */
static void hostile_run(const char *dir, const char *name)
{
	char path[4096 + 256];
	size_t len;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	char *script = file_read(path, &len);
	cr_assert(script, "read %s", path);
	struct expect e;
	header_read(name, script, &e);
	struct vmm_config cfg = { .timeout_ns = (e.timeout_s ? e.timeout_s : 30) * 1000000000ull,
				  .heap_size = e.heap_mib << 20 };
	struct vmm_sandbox *sb = guest_new_at(lua_elf(), &cfg);
	struct vmm_result res;

	cr_assert_eq(call_str(sb, "load", "kept = 41", &res), 0, "%s", vmm_sandbox_error(sb)->message);
	vmm_result_clear(&res);
	int rc = call_str(sb, "eval", script, &res);
	const char *msg = vmm_sandbox_error(sb)->message;
	if (strcmp(e.kind, "timeout") == 0) {
		cr_expect_eq(rc, VMM_E_TIMEOUT, "%s: rc %d (%s), not a timeout", name, rc, msg);
	} else if (strcmp(e.kind, "error") == 0) {
		cr_expect_eq(rc, VMM_E_GUEST_ERROR, "%s: rc %d (%s), not a guest error", name, rc, rc ? msg : "");
		if (rc == VMM_E_GUEST_ERROR)
			cr_expect(strstr(msg, e.text), "%s: error '%s' does not say '%s'", name, msg, e.text);
	} else {
		cr_assert_str_eq(e.kind, "result", "%s: unknown expectation", name);
		cr_expect_eq(rc, 0, "%s: rc %d (%s)", name, rc, msg);
		if (rc == 0)
			cr_expect(strstr(res.data, e.text), "%s: result '%s' does not hold '%s'", name,
				  (char *)res.data, e.text);
	}
	if (rc == 0)
		vmm_result_clear(&res);
	if (strcmp(e.kind, "timeout") != 0)
		eval_expect(sb, "return kept + 1, 2^10, ('x'):rep(3)", "42\t1024.0\txxx");
	vmm_sandbox_free(sb);
	free(script);
}

Test(lua, hostile_scripts_give_lua_errors_and_the_sandbox_keeps_serving, .timeout = 240)
{
	char dir[4096];
	const char *src = getenv("STRATA_SRC");
	unsigned n = 0;

	snprintf(dir, sizeof dir, "%s/tests/lua/hostile", src ? src : "..");
	DIR *d = opendir(dir);
	cr_assert(d, "opendir %s", dir);
	for (struct dirent *de; (de = readdir(d));) {
		size_t len = strlen(de->d_name);
		if (len > 4 && strcmp(de->d_name + len - 4, ".lua") == 0) {
			hostile_run(dir, de->d_name);
			n++;
		}
	}
	closedir(d);
	cr_assert_geq(n, 40, "only %u hostile scripts in %s", n, dir);
}

/* Host functions from Lua, with the host's type checks. */
Test(lua, strata_call_reaches_the_host_functions)
{
	struct vmm_sandbox *sb = guest_new_at(lua_elf(), NULL);

	eval_expect(sb, "return strata.call('host_add', 2, 3), strata.call('host_add', 2.0, -3),"
			" strata.call('host_upper', 'lua')", "5\t-1\tLUA");
	vmm_sandbox_free(sb);
}

/* eval's result is the whole string, NUL bytes and all (strata_ret_strn). */
Test(lua, an_eval_result_keeps_its_nul_bytes)
{
	struct vmm_sandbox *sb = guest_new_at(lua_elf(), NULL);
	struct vmm_result res;

	cr_assert_eq(call_str(sb, "eval", "return 'a\\0b', 'c'", &res), 0, "%s", vmm_sandbox_error(sb)->message);
	cr_assert_eq(res.len, 5);
	cr_assert_eq(memcmp(res.data, "a\0b\tc", 5), 0);
	vmm_result_clear(&res);
	vmm_sandbox_free(sb);
}

/* random_get b(i) from the kernel, as the CLI registers it. */
static int host_random(void *ctx, const struct vmm_value *a, size_t n, struct vmm_value *ret)
{
	static unsigned char buf[64];

	(void)ctx;
	(void)n;
	if (a[0].i64 < 0 || (size_t)a[0].i64 > sizeof(buf) || getrandom(buf, (size_t)a[0].i64, 0) != a[0].i64)
		return -1;
	*ret = (struct vmm_value){ .type = VMM_BYTES, .data = buf, .len = (size_t)a[0].i64 };
	return 0;
}

static char *eval_dup(struct vmm_sandbox *sb, const char *chunk)
{
	struct vmm_result res;

	cr_assert_eq(call_str(sb, "eval", chunk, &res), 0, "eval %s: %s", chunk, vmm_sandbox_error(sb)->message);
	char *s = strdup(res.data);
	vmm_result_clear(&res);
	return s;
}

static const char draw[] = "return math.random(1, 1 << 40), math.random(1, 1 << 40)";

/* A host that registers no random_get gets the state as it was made:
 * every sandbox draws the same (determinism, for replay and tests). */
Test(lua, math_random_without_random_get_draws_the_same_in_every_sandbox)
{
	struct vmm_sandbox *a = guest_new_at(lua_elf(), NULL), *b = guest_new_at(lua_elf(), NULL);
	char *x = eval_dup(a, draw), *y = eval_dup(b, draw);

	cr_assert_str_eq(x, y);
	free(x);
	free(y);
	vmm_sandbox_free(a);
	vmm_sandbox_free(b);
}

/* With random_get, each call's first draw seeds from it: sandboxes made
 * alike draw apart; a call that sets math.randomseed keeps its sequence. */
Test(lua, math_random_is_seeded_per_call_from_random_get)
{
	static const struct vmm_signature random_sig = { VMM_BYTES, 1, { VMM_I64 } };
	struct vmm_sandbox *sb[2];
	char *got[2], *seeded[2];
	struct vmm_error err;

	for (int i = 0; i < 2; i++) {
		sb[i] = guest_new_at(lua_elf(), NULL);
		cr_assert_eq(vmm_sandbox_register(sb[i], "random_get", &random_sig, host_random, NULL, &err), 0, "%s",
			     err.message);
		got[i] = eval_dup(sb[i], draw);
		seeded[i] = eval_dup(sb[i], "math.randomseed(7) return math.random(1, 1 << 40), math.random(1, 1 << 40)");
	}
	cr_assert_str_neq(got[0], got[1], "both sandboxes drew %s", got[0]);
	cr_assert_str_eq(seeded[0], seeded[1]);
	for (int i = 0; i < 2; i++) {
		free(got[i]);
		free(seeded[i]);
		vmm_sandbox_free(sb[i]);
	}
}
