/* luaguest.c: lua.elf, Debian's Lua 5.4 in a sandbox: `eval` and `load` a text chunk, `strata.call` the host's functions (docs/lua.md). */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata_guest.h"
#include "strata_heap.h"

static lua_State *L;

/*
 * Lua's C stack. The guest stack (64 KiB unless --stack says otherwise) is
 * too small for Lua's deepest C recursion: LUAI_MAXCCALLS (200) nested C
 * calls (pcall, gsub's callback, a metamethod, a coroutine resume), the
 * parser's nesting, each up to a few KiB. The calls run on this one
 * instead, which holds them with room to spare (docs/lua.md, "Limits"); its
 * pages cost nothing until a deep call touches them. The lowest page is a
 * tripwire: a call that leaves it written stops the guest.
 */
#define LUA_CSTACK_SIZE (1024u * 1024u)
#define LUA_CSTACK_TRIP 4096u
static unsigned char lua_cstack[LUA_CSTACK_SIZE] __attribute__((aligned(4096)));

/*
 * The allocator: the guest heap, less a reserve the runtime and the C
 * library keep (stdout's buffer), so a script that asks for more than there
 * is gets Lua's "not enough memory" error and the state stays whole.
 */
static size_t lua_used, lua_limit;

static void *lua_heap_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
	size_t old = ptr ? osize : 0;

	if (nsize == 0) {
		free(ptr);
		lua_used -= old;
		return NULL;
	}
	if (nsize > old && nsize - old > lua_limit - lua_used)
		return NULL;
	void *p = realloc(ptr, nsize);
	if (p)
		lua_used = lua_used - old + nsize;
	return p;
}

static int lua_panicked(lua_State *l)
{
	const char *msg = lua_tostring(l, -1);

	strata_abort(-7, "lua: unprotected error: %s", msg ? msg : "(not a string)");
}

/* ---- the strata table ---- */

/* A host function's string or bytes result lands here. */
static char host_ret[64 * 1024];

/* strata.call(name, ...): integers (or floats with an integer value) go as
 * i64, strings as s; the host checks them against the function's signature
 * as it does a C guest's. Returns the result (nothing for a void one). */
static int strata_call_lua(lua_State *l)
{
	size_t name_len;
	const char *name = luaL_checklstring(l, 1, &name_len);
	int n = lua_gettop(l) - 1;
	struct strata_value args[STRATA_MAX_ARGS], ret;

	luaL_argcheck(l, name_len > 0 && name_len < STRATA_NAME_MAX && strlen(name) == name_len, 1,
		      "not a host function name");
	if (n > (int)STRATA_MAX_ARGS)
		return luaL_error(l, "strata.call: %d arguments, at most %d", n, (int)STRATA_MAX_ARGS);
	for (int i = 0; i < n; i++) {
		int at = i + 2;
		int exact;
		size_t len;

		switch (lua_type(l, at)) {
		case LUA_TNUMBER: {
			lua_Integer v = lua_tointegerx(l, at, &exact);
			if (!exact)
				return luaL_argerror(l, at, "number has no integer representation");
			args[i] = strata_val_i64(v);
			break;
		}
		case LUA_TSTRING: {
			const char *s = lua_tolstring(l, at, &len);
			args[i] = (struct strata_value){ .type = STRATA_T_STR, .addr = (uint64_t)(uintptr_t)s,
							 .len = len };
			break;
		}
		default:
			return luaL_typeerror(l, at, "integer or string");
		}
	}
	int st = strata_host_call(name, args, (unsigned)n, &ret, host_ret, sizeof(host_ret));
	switch (st) {
	case STRATA_HOST_OK:
		break;
	case STRATA_HOST_NO_FUNCTION:
		return luaL_error(l, "strata.call: no host function '%s'", name);
	case STRATA_HOST_BAD_ARGS:
		return luaL_error(l, "strata.call: the arguments do not match the signature of host function '%s'", name);
	case STRATA_HOST_TOO_SMALL:
		return luaL_error(l, "strata.call: host function '%s' returned %I bytes, more than %I", name,
				  (lua_Integer)ret.len, (lua_Integer)sizeof(host_ret));
	default:
		return luaL_error(l, "strata.call: host function '%s' failed", name);
	}
	switch (ret.type) {
	case STRATA_T_I64:
		lua_pushinteger(l, ret.i64);
		return 1;
	case STRATA_T_STR:
	case STRATA_T_BYTES:
		if (ret.len > sizeof(host_ret))
			return luaL_error(l, "strata.call: host function '%s' returned a malformed result", name);
		lua_pushlstring(l, host_ret, (size_t)ret.len);
		return 1;
	default:
		return 0;
	}
}

/* ---- math.random: seeded per call from the host's randomness ---- */

/*
 * Every sandbox restored from one snapshot holds the same random state, so
 * each would draw the same numbers. A call's first math.random seeds the
 * state from the host function random_get (b(i)) when the host registers
 * one: each request draws its own numbers. A call that sets
 * math.randomseed itself keeps its sequence; without random_get the state
 * is the snapshot's (deterministic). Nothing is asked of the host by a call
 * that draws no number.
 */
static bool random_fresh;  /* this call has seeded math.random, or set its seed */

static int random_call(lua_State *l)
{
	if (!random_fresh) {
		struct strata_value arg = strata_val_i64(16), ret;
		uint64_t seed[2];

		random_fresh = true;
		if (strata_host_call("random_get", &arg, 1, &ret, seed, sizeof(seed)) == STRATA_HOST_OK &&
		    ret.type == STRATA_T_BYTES && ret.len == sizeof(seed)) {
			lua_pushvalue(l, lua_upvalueindex(2));
			lua_pushinteger(l, (lua_Integer)seed[0]);
			lua_pushinteger(l, (lua_Integer)seed[1]);
			lua_call(l, 2, 0);
		}
	}
	int n = lua_gettop(l);
	lua_pushvalue(l, lua_upvalueindex(1));
	lua_insert(l, 1);
	lua_call(l, n, LUA_MULTRET);
	return lua_gettop(l);
}

static int randomseed_call(lua_State *l)
{
	int n = lua_gettop(l);

	random_fresh = true;
	lua_pushvalue(l, lua_upvalueindex(1));
	lua_insert(l, 1);
	lua_call(l, n, LUA_MULTRET);
	return lua_gettop(l);
}

/* math.random and math.randomseed through random_call and randomseed_call. */
static void random_wrap(lua_State *l)
{
	lua_getglobal(l, LUA_MATHLIBNAME);
	lua_getfield(l, -1, "random");
	lua_getfield(l, -2, "randomseed");
	lua_pushcclosure(l, random_call, 2);
	lua_setfield(l, -2, "random");
	lua_getfield(l, -1, "randomseed");
	lua_pushcclosure(l, randomseed_call, 1);
	lua_setfield(l, -2, "randomseed");
	lua_pop(l, 1);
}

/* ---- the libraries: Lua's, less what reaches outside the state ---- */

/* load() with the mode forced to text: a binary chunk is refused (Lua does
 * not check bytecode; a crafted one corrupts the VM). */
static int load_text(lua_State *l)
{
	int n = lua_gettop(l);

	if (n < 3)
		lua_settop(l, n = 3);
	lua_pushliteral(l, "t");
	lua_replace(l, 3);
	lua_pushvalue(l, lua_upvalueindex(1));
	lua_insert(l, 1);
	lua_call(l, n, LUA_MULTRET);
	return lua_gettop(l);
}

/* Keep only the fields of table `lib` (a global) named in `keep`. */
static void lib_keep(lua_State *l, const char *lib, const char *const *keep)
{
	lua_getglobal(l, lib);
	lua_newtable(l);
	for (; *keep; keep++) {
		lua_getfield(l, -2, *keep);
		lua_setfield(l, -2, *keep);
	}
	lua_setglobal(l, lib);
	lua_pop(l, 1);
}

static void libs_open(lua_State *l)
{
	static const luaL_Reg libs[] = {
		{ LUA_GNAME, luaopen_base },
		{ LUA_COLIBNAME, luaopen_coroutine },
		{ LUA_TABLIBNAME, luaopen_table },
		{ LUA_STRLIBNAME, luaopen_string },
		{ LUA_MATHLIBNAME, luaopen_math },
		{ LUA_UTF8LIBNAME, luaopen_utf8 },
		{ LUA_OSLIBNAME, luaopen_os },
		{ LUA_DBLIBNAME, luaopen_debug },
		{ NULL, NULL },
	};
	static const char *const os_keep[] = { "clock", "date", "difftime", "time", NULL };
	static const char *const debug_keep[] = { "traceback", NULL };
	static const luaL_Reg strata_lib[] = {
		{ "call", strata_call_lua },
		{ NULL, NULL },
	};

	for (const luaL_Reg *r = libs; r->name; r++) {
		luaL_requiref(l, r->name, r->func, 1);
		lua_pop(l, 1);
	}
	/* The file system's and the process's: there are none to reach, and a
	 * plugin should not be handed names that only fail. */
	lib_keep(l, LUA_OSLIBNAME, os_keep);
	lib_keep(l, LUA_DBLIBNAME, debug_keep);
	lua_pushnil(l);
	lua_setglobal(l, "dofile");
	lua_pushnil(l);
	lua_setglobal(l, "loadfile");
	lua_getglobal(l, "load");
	lua_pushcclosure(l, load_text, 1);
	lua_setglobal(l, "load");
	/* Strings share one metatable (the string library): a script may not
	 * replace its methods under the next call's feet. */
	lua_pushliteral(l, "");
	lua_getmetatable(l, -1);
	lua_pushboolean(l, 0);
	lua_setfield(l, -2, "__metatable");
	lua_pop(l, 2);
	random_wrap(l);
	luaL_newlib(l, strata_lib);
	lua_setglobal(l, "strata");
}

void strata_init(void)
{
	size_t heap = strata_heap_size();

	lua_limit = heap - heap / 16;
	L = lua_newstate(lua_heap_alloc, NULL);
	if (!L)
		strata_abort(-7, "lua: no memory for a Lua state (%zu-byte heap)", heap);
	lua_atpanic(L, lua_panicked);
#ifdef LUA_CSTACK_PEAK
	memset(lua_cstack + LUA_CSTACK_TRIP, 0xa5, LUA_CSTACK_SIZE - LUA_CSTACK_TRIP);
#endif
	libs_open(L);
	lua_settop(L, 0);
}

/* ---- eval and load ---- */

/* The message handler: Lua's message and its traceback (as lua.c's). */
static int with_traceback(lua_State *l)
{
	const char *msg = lua_tostring(l, 1);

	if (!msg) {
		if (luaL_callmeta(l, 1, "__tostring") && lua_type(l, -1) == LUA_TSTRING)
			msg = lua_tostring(l, -1);
		else
			msg = lua_pushfstring(l, "(error object is a %s value)", luaL_typename(l, 1));
	}
	luaL_traceback(l, l, msg, 1);
	return 1;
}

/* Fail the call with the error at the top of the stack (Lua's message and
 * traceback) and leave the state's stack empty: the next call starts clean. */
static int lua_failed(struct strata_call *c)
{
	const char *msg = lua_tostring(L, -1);
	int r = strata_fail(c, "%s", msg ? msg : "(error object is not a string)");

	lua_settop(L, 0);
	return r;
}

/* Compile and run the call's chunk under with_traceback (stack slot 1),
 * leaving its results above it; on an error, fail the call. */
static int chunk_run(struct strata_call *c, const char *name)
{
	const char *chunk = strata_arg_str(c, 0);

	lua_settop(L, 0);
	random_fresh = false;
	lua_pushcfunction(L, with_traceback);
	int st = luaL_loadbufferx(L, chunk, strlen(chunk), name, "t");
	if (st == LUA_OK)
		st = lua_pcall(L, 0, LUA_MULTRET, 1);
	if (st != LUA_OK)
		return lua_failed(c);
	return STRATA_OK;
}

/* The values on the stack as print writes them: each through tostring
 * (so __tostring and __name count), tab-separated. */
static int results_join(lua_State *l)
{
	int n = lua_gettop(l);
	luaL_Buffer b;

	luaL_buffinit(l, &b);
	for (int i = 1; i <= n; i++) {
		if (i > 1)
			luaL_addchar(&b, '\t');
		luaL_tolstring(l, i, NULL);
		luaL_addvalue(&b);
	}
	luaL_pushresult(&b);
	return 1;
}

static int on_lua_cstack(int (*fn)(struct strata_call *), struct strata_call *c)
{
	int r;

	__asm__ volatile(
		"mov %%rsp, %%rbx\n\t"
		"mov %[top], %%rsp\n\t"
		"call *%[fn]\n\t"
		"mov %%rbx, %%rsp"
		: "=a"(r), "+D"(c)
		: [top] "r"(lua_cstack + sizeof(lua_cstack)), [fn] "r"(fn)
		: "rbx", "rcx", "rdx", "rsi", "r8", "r9", "r10", "r11", "memory", "cc",
		  "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
		  "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15",
		  "st", "st(1)", "st(2)", "st(3)", "st(4)", "st(5)", "st(6)", "st(7)");
	for (unsigned i = 0; i < LUA_CSTACK_TRIP; i += 8)
		if (*(volatile uint64_t *)(lua_cstack + i))
			strata_abort(-8, "lua: the C stack overflowed into its tripwire page");
	return r;
}

/* eval CHUNK: run it, return its results as print would write them. */
static int eval_on_cstack(struct strata_call *c)
{
	if (chunk_run(c, "=eval") != STRATA_OK)
		return STRATA_ERR_FUNCTION;
	lua_pushcfunction(L, results_join);
	lua_insert(L, 2);
	if (lua_pcall(L, lua_gettop(L) - 2, 1, 1) != LUA_OK)
		return lua_failed(c);
	size_t len;
	const char *s = lua_tolstring(L, -1, &len);
	char *out = strata_ret_buffer(c, len + 1);
	if (!out) {
		lua_settop(L, 0);
		return strata_fail(c, "eval: a result of %zu bytes is larger than the output buffer (--output)", len);
	}
	memcpy(out, s, len + 1);
	lua_settop(L, 0);
	return strata_ret_strn(c, out, len);
}

STRATA_FUNCTION(eval, "s(s)")
{
	return on_lua_cstack(eval_on_cstack, c);
}

/* load CHUNK: run it for its effects (define functions, set globals). */
static int load_on_cstack(struct strata_call *c)
{
	if (chunk_run(c, "=load") != STRATA_OK)
		return STRATA_ERR_FUNCTION;
	lua_settop(L, 0);
	return strata_ret_void(c);
}

STRATA_FUNCTION(load, "v(s)")
{
	return on_lua_cstack(load_on_cstack, c);
}

#ifdef LUA_CSTACK_PEAK
/* Development only: how deep the calls so far reached on Lua's C stack. */
STRATA_FUNCTION(cstack_peak, "i()")
{
	unsigned i = LUA_CSTACK_TRIP;

	while (i < LUA_CSTACK_SIZE && lua_cstack[i] == 0xa5)
		i++;
	return strata_ret_i64(c, (int64_t)(LUA_CSTACK_SIZE - i));
}
#endif
