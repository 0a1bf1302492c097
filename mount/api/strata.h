/* strata.h: libstrata 1.0, the API a host program embeds: micro-VM sandboxes whose memory snapshots are files. */
#ifndef STRATA_H
#define STRATA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The rules every call follows (docs/library.md is the reference):
 *
 * - Errors: a call that can fail returns an int: 0 (or a count, >= 0) on
 *   success, a negative code on failure: -errno (-ENOMEM, -EINVAL, ...)
 *   or one of the STRATA_E_* codes below. strata_strerror() names every
 *   code; strata_errmsg() says what went wrong in the calling thread's
 *   last failed call, in plain words. Out-parameters are written only on
 *   success, and a failed call keeps nothing it made, unless its comment
 *   says otherwise. Nothing here prints, exits or reads the environment.
 * - Configuration: every object is opaque and configured by setters on
 *   it after its _new (as libkrun's contexts are). A setter's value holds
 *   for what is made or done after it; a failed setter changes nothing.
 * - Threads: a host, a store, a registry's settings and a pool may be used
 *   from any thread. A sandbox may be used from any thread, one call at a
 *   time (STRATA_E_BUSY otherwise); strata_sandbox_kill may come from any
 *   thread. The process's first KVM (or automatic) host starts one
 *   short-lived library thread that opens /dev/kvm and ends.
 * - Lifetimes: a host outlives every sandbox and pool made with it
 *   (strata_host_free says -EBUSY before); a store outlives the sandboxes
 *   and pools opened from it and every call given it. Strings given to a
 *   call are copied or used during the call only.
 * - Fork: a forked child must not use the parent's hosts, sandboxes, pools
 *   or stores; it may make new ones.
 * - Signals: SIGRTMIN+1 is installed at the first call and sent to the
 *   calling thread to stop a KVM call (kill, timeout): leave it alone.
 *   A process-backend sandbox is a child process started by one library
 *   thread that lives as long as the process: it outlives the thread that
 *   made it, and dies with the host process. Its signals and waits go
 *   through its pidfd, so SIGCHLD set to SIG_IGN or a waitpid(-1) of the
 *   host's does not disturb it (a child the host reaps first is reported
 *   with its real exit status on Linux 6.15+). Do not wait for any
 *   child's stops (waitpid(-1, ..., WUNTRACED)): the children report by
 *   stopping. A page of a lazy snapshot that cannot be fetched raises
 *   SIGBUS in the host thread that touches it; a handler reads why with
 *   strata_store_lazy_errmsg.
 */

/* The version of this header; strata_version() gives the library's. */
#define STRATA_VERSION_MAJOR 1
#define STRATA_VERSION_MINOR 0
#define STRATA_VERSION_PATCH 0
/* 0xMMmmpp, as libcurl's LIBCURL_VERSION_NUM: compare with >=. */
#define STRATA_VERSION_NUMBER ((STRATA_VERSION_MAJOR << 16) | (STRATA_VERSION_MINOR << 8) | STRATA_VERSION_PATCH)

/* Opaque handles. */
typedef struct strata_host strata_host;         /* what sandboxes share: caches, settings, host functions */
typedef struct strata_sandbox strata_sandbox;   /* one micro-VM running a guest */
typedef struct strata_pool strata_pool;         /* sandboxes restored from one snapshot, to get and put */
typedef struct strata_store strata_store;       /* an open store of snapshots (and its index) */
typedef struct strata_registry strata_registry; /* how to reach OCI registries: transport, TLS, credentials */
typedef struct strata_snapshot strata_snapshot; /* an in-memory restore point of one sandbox */

/* Error codes (negative; -errno values are above -1000). Each names its
 * condition; strata_errmsg() says which file, function or rule. */
enum {
	/* the store (-1000..-1099) */
	STRATA_E_CORRUPT = -1000,        /* bytes do not hash to their name, or a size is wrong */
	STRATA_E_FORMAT = -1001,         /* a malformed manifest or store file */
	STRATA_E_VERSION = -1002,        /* an unknown manifest or store format version */
	STRATA_E_LAYOUT = -1003,         /* a snapshot's ranges are out of bounds; a layer too short */
	STRATA_E_NOT_STORE = -1004,      /* the directory is not a strata store */
	STRATA_E_BAD_NAME = -1005,       /* a tag name breaks the name rule */
	STRATA_E_BAD_ID = -1006,         /* text is not a 32-character lowercase hex id */
	STRATA_E_READ_ONLY = -1007,      /* the store was opened read-only, or its filesystem refuses writes */
	/* the index (-1100..-1199) */
	STRATA_E_NOT_FOUND = -1100,      /* no such snapshot or tag */
	STRATA_E_EXISTS = -1101,         /* the tag already names another snapshot */
	STRATA_E_MISSING = -1102,        /* a layer the snapshot needs is not in the store */
	STRATA_E_INDEX_VERSION = -1103,  /* the index was written by an unknown format version */
	STRATA_E_INDEX_CORRUPT = -1104,  /* an index record is damaged */
	STRATA_E_INDEX_BUSY = -1105,     /* too many readers of the index */
	STRATA_E_LMDB = -1106,           /* any other failure of the index's database */
	STRATA_E_AMBIGUOUS = -1107,      /* an id prefix matches more than one snapshot */
	STRATA_E_BAD_REF = -1150,        /* not a REGISTRY/REPOSITORY[:TAG|@sha256:DIGEST] reference */
	STRATA_E_NET = -1151,            /* cannot connect to the registry, or the connection dropped */
	STRATA_E_TLS = -1152,            /* the TLS handshake or certificate check failed */
	STRATA_E_AUTH = -1153,           /* credentials missing or rejected, or access denied */
	STRATA_E_REMOTE_MISSING = -1154, /* the manifest or blob is not in the repository */
	STRATA_E_HTTP = -1155,           /* any other unexpected answer of the registry */
	STRATA_E_DEADLINE = -1156,       /* the registry timeout (strata_registry_set_timeout) passed */
	STRATA_E_LAZY_BAD_CHUNK = -1160, /* a fetched chunk of a lazy layer does not match its index */
	STRATA_E_LAZY_OFFLINE = -1161,   /* a lazy layer's registry could not be reached */
	STRATA_E_LAZY_NO_INDEX = -1162,  /* the artifact carries no chunk index */
	/* sandboxes (-1200..-1299) */
	STRATA_E_POISONED = -1200,       /* an earlier guest error poisoned the sandbox: restore it */
	STRATA_E_GUEST_FAULT = -1201,    /* a CPU exception in the guest */
	STRATA_E_STACK_OVERFLOW = -1202, /* the guest touched its stack guard page */
	STRATA_E_ABORT = -1203,          /* the guest called strata_abort() */
	STRATA_E_BAD_HYPERCALL = -1204,  /* the guest broke the ABI */
	STRATA_E_TIMEOUT = -1205,        /* the call ran past its timeout */
	STRATA_E_CANCELLED = -1206,      /* strata_sandbox_kill stopped the call */
	STRATA_E_SHUTDOWN = -1207,       /* the guest triple-faulted (or its process ended) */
	STRATA_E_BAD_ELF = -1208,        /* not a valid x86-64 strata guest ELF */
	STRATA_E_ABI = -1209,            /* the guest was built for another ABI version */
	STRATA_E_NO_FUNCTION = -1210,    /* no guest function by that name */
	STRATA_E_BAD_ARGS = -1211,       /* the arguments do not match the function's signature */
	STRATA_E_GUEST_ERROR = -1212,    /* the guest function returned an error (not poisoning) */
	STRATA_E_TOO_BIG = -1213,        /* the arguments or the result do not fit the sandbox's buffers */
	STRATA_E_NO_KVM = -1214,         /* /dev/kvm is missing */
	STRATA_E_BAD_CONFIG = -1215,     /* a setting out of range */
	STRATA_E_UNEXPECTED_EXIT = -1216,/* the vCPU stopped for a reason strata does not handle */
	STRATA_E_BAD_ADDRESS = -1217,    /* the guest accessed an address outside its memory */
	STRATA_E_BUSY = -1218,           /* a call is already running on this sandbox */
	STRATA_E_KVM_DENIED = -1219,     /* /dev/kvm exists but this user may not open it */
	STRATA_E_KVM_UNBOUND = -1220,    /* a kvm module is loaded but gave no /dev/kvm */
	STRATA_E_KVM_API = -1221,        /* /dev/kvm is not KVM, or speaks another API version */
	STRATA_E_KERNEL_OLD = -1222,     /* the kernel is older than strata needs */
	STRATA_E_NO_BACKEND = -1223,     /* the backend asked for cannot run here */
	STRATA_E_NO_SNAPSHOT = -1250,    /* the sandbox has no snapshot to restore to */
	STRATA_E_BAD_SNAPSHOT = -1251,   /* the snapshot does not fit this strata */
	STRATA_E_LEAK = -1252,           /* debug check: memory differs from the snapshot after a restore */
	STRATA_E_BAD_POLICY = -1253,     /* a malformed policy file */
	STRATA_E_NO_PAGEMAP = -1254,     /* the kernel cannot say which pages were written */
	STRATA_E_STALE = -1255,          /* a rebase on a manifest that is not the pending capture */
	STRATA_E_FOREIGN = -1256,        /* an in-memory snapshot of another sandbox */
	/* the mount (-1300..-1399) */
	STRATA_E_STALE_MOUNT = -1300,    /* a dead FUSE mount */
	STRATA_E_MOUNTED = -1301,        /* the mountpoint already has a live mount */
	STRATA_E_MOUNT = -1302,          /* the kernel refused the mount */
	STRATA_E_NOT_MOUNTED = -1303,    /* nothing is mounted there */
	STRATA_E_OPTION = -1304,         /* a mount option was refused */
};

/* ==== version and errors ==== */

/* The library's version, "MAJOR.MINOR.PATCH"; each of major, minor, patch
 * (any may be NULL) gets its number. Never fails. (LMDB's mdb_version.) */
const char *strata_version(int *major, int *minor, int *patch);
/* The name of any code a strata call returns: a STRATA_E_* code's
 * words, a -errno in strerror's words, 0 "success"; a code no version of
 * strata names says so. Static strings; never fails; thread-safe. */
const char *strata_strerror(int code);
/* What went wrong in the calling thread's last failed strata call, in
 * one line: the code's words and the particulars (the file, the guest's
 * message, the rule broken). "" if no call of this thread failed yet. The
 * string is the thread's own, valid until its next failed call; a call
 * that succeeds leaves it as it was (as errno). Never fails. */
const char *strata_errmsg(void);
/* The cause of the calling thread's last failed call in the words of the
 * side that gave it (the registry's answer, the check that refused a
 * blob), without the call's own context: the part of strata_errmsg after
 * what was being done. Empty if the failure had none beyond its code
 * (then strata_strerror names it). Set by strata_store_push,
 * strata_store_pull, strata_store_import, strata_store_export_oci and
 * strata_store_complete; any other failing call empties it. Never NULL. */
const char *strata_errdetail(void);

/* ==== values ==== */

/* The types of arguments and results (a function's signature letters:
 * v, i, b, s). */
enum {
	STRATA_VOID = 0,
	STRATA_I64 = 1,   /* int64_t: i */
	STRATA_BYTES = 2, /* bytes with a length: b */
	STRATA_STR = 3,   /* a string (its length without the NUL): s */
};
/* An argument, or a host function's result. For BYTES and STR, data and
 * len are borrowed: the caller keeps them valid during the call. */
struct strata_value {
	int type;
	int64_t i64;
	const void *data;
	size_t len;
};
/* A guest function's result. For BYTES and STR data is malloc'd (a STR is
 * NUL-terminated) and the caller's: strata_result_clear frees it. */
struct strata_result {
	int type;
	int64_t i64;
	void *data;
	size_t len;
};
/* Free what a result holds and zero it; accepts NULL and a zeroed result. */
void strata_result_clear(struct strata_result *res);

/*
 * A host function the guest calls by name. args has the types of the
 * signature it was registered with (checked before the call). Fill *ret
 * with a value of the signature's result type (BYTES and STR: data valid
 * until the function returns) and return 0, or return < 0 to tell the
 * guest it failed (the sandbox is not poisoned). It runs on the thread
 * that made the call.
 */
typedef int (*strata_host_fn)(void *ctx, const struct strata_value *args, size_t nargs, struct strata_value *ret);
/* A guest log line (the guest's strata_log): level 0 error .. 3 debug. */
typedef void (*strata_log_fn)(void *ctx, int level, const char *msg, size_t len);

/* ==== the host ==== */

enum {
	STRATA_BACKEND_AUTO = 0,    /* KVM where /dev/kvm opens, else the process backend */
	STRATA_BACKEND_KVM = 1,     /* a one-vCPU KVM virtual machine */
	STRATA_BACKEND_PROCESS = 2, /* a locked-down child process (seccomp); no KVM needed */
};

/*
 * Make a host: what every sandbox and pool made with it shares (idle VM
 * shells and warm sandboxes, 8 of each; the parsed manifests and private
 * layer copies of the snapshot directories it opens), its settings (the
 * setters below) and its host functions. Returns 0 and *out, or -ENOMEM;
 * *out untouched then. Free it with strata_host_free after its sandboxes.
 */
int strata_host_new(strata_host **out);
/* Free the host and what it keeps. Needs every sandbox and pool made with
 * it freed: -EBUSY otherwise, and nothing changes. Accepts NULL (0). */
int strata_host_free(strata_host *h);
/* Where the host's next sandboxes run: STRATA_BACKEND_AUTO (the default),
 * _KVM or _PROCESS. -EINVAL for another value; STRATA_E_NO_KVM (and the
 * other KVM codes) or STRATA_E_NO_BACKEND if that backend cannot run here,
 * strata_errmsg saying why. */
int strata_host_set_backend(strata_host *h, int backend);
/* The backend the host's next sandbox runs on (_KVM or _PROCESS: AUTO
 * resolved). Never fails. */
int strata_host_backend(const strata_host *h);
/* The word for a backend, as the strata command's --backend and
 * $STRATA_BACKEND take it: "auto", "kvm" or "process"; NULL for a value
 * that names none. Static strings; never fails. */
const char *strata_backend_name(int backend);
/* The backend `name` is the word for (strata_backend_name's words), into
 * *backend: 0, or -EINVAL (name NULL or no backend's word, strata_errmsg
 * saying which; *backend untouched). Whether it can run here is
 * strata_host_set_backend's to say. */
int strata_backend_parse(const char *name, int *backend);
/* How many idle VM shells (0..1024) and warm sandboxes (0..64) the host
 * keeps; what it keeps beyond them is freed now. STRATA_E_BAD_CONFIG over
 * the maxima (nothing changes). */
int strata_host_set_cache(strata_host *h, unsigned shells, unsigned warm);
/* Sizes of the host's next sandboxes made from an ELF, in bytes: guest
 * heap and stack, call input and output buffers; 0 keeps each default
 * (the heap the ELF declares, else 128 KiB; 64 KiB; 16 KiB; 16 KiB).
 * Sandboxes from snapshots have the snapshot's. Never fails: a size out
 * of range fails the making of a sandbox (STRATA_E_BAD_CONFIG, strata_errmsg
 * saying which). */
int strata_host_set_sizes(strata_host *h, uint64_t heap, uint64_t stack, uint64_t input, uint64_t output);
/* The timeout of every call on the host's next sandboxes that gives none
 * (strata_sandbox_call's timeout_ns 0), in nanoseconds; 0: none (the
 * default). Never fails. */
int strata_host_set_timeout(strata_host *h, uint64_t timeout_ns);
/* Where guest log lines of the host's next sandboxes go (fn NULL: dropped,
 * the default). fn may run on any thread that calls a sandbox. Never fails. */
int strata_host_set_log(strata_host *h, strata_log_fn fn, void *ctx);
/*
 * Register host function `name` (1..63 bytes) of signature `sig` for
 * every sandbox this host makes from now on, or replace the one of that
 * name. sig is the guest SDK's notation: the result letter, then the
 * parameters in parentheses, "i(ii)" for (int64, int64) -> int64 (v: no
 * result; at most 8 parameters of i, b, s). It lives on the host: each
 * sandbox made afterwards (from an ELF, a directory, a store, a registry,
 * a pool) has it from its start, and keeps it across restores, captures
 * and pool returns; sandboxes made before keep the table they started
 * with. A sandbox's own strata_sandbox_register of the same name wins.
 * -EINVAL (a bad name, signature or NULL fn) or -ENOMEM, strata_errmsg
 * saying which; the host's table is as before then.
 */
int strata_host_register(strata_host *h, const char *name, const char *sig, strata_host_fn fn, void *ctx);
/*
 * The reset policy of the host's next sandboxes (docs/restore.md): the
 * file at `path`, as `strata calibrate` writes it ("key = value" lines:
 * reset, keep_restores, idle_cap, range_cap, dirty), over the defaults;
 * NULL: the defaults. Read during the call. It must come before the
 * host's sandboxes and pools: -EBUSY while any made with it is alive.
 * Errors: -ENOENT and other -errno (the file), STRATA_E_BAD_POLICY
 * (strata_errmsg names the file and the line), -EBUSY, -ENOMEM; the
 * host's policy is as before then.
 */
int strata_host_set_policy(strata_host *h, const char *path);
/* The debug check of the host's next sandboxes (on != 0; off by default):
 * every restore then compares all guest memory and the vCPU with the
 * snapshot, and one that differs fails with STRATA_E_LEAK (strata_errmsg
 * naming the page or register). Slow: for tests. Never fails. */
int strata_host_set_debug(strata_host *h, int on);
/* What strata_host_info reports. */
enum {
	STRATA_HOST_INFO_SHELLS_MAX = 1, /* idle VM shells kept at most (strata_host_set_cache) */
	STRATA_HOST_INFO_WARM_MAX = 2,   /* warm sandboxes kept at most */
	STRATA_HOST_INFO_SHELLS = 3,     /* idle VM shells kept now */
	STRATA_HOST_INFO_WARM = 4,       /* warm sandboxes kept now */
	STRATA_HOST_INFO_SANDBOXES = 5,  /* sandboxes and pools made with it and not freed */
};
/* One figure of the host into *value, as of the call (thread-safe). -EINVAL
 * for a `what` this version does not know (*value untouched). */
int strata_host_info(const strata_host *h, int what, uint64_t *value);
/* Whether `backend` (STRATA_BACKEND_KVM or _PROCESS) can run here: 0, or
 * the code strata_host_set_backend would refuse it with, strata_errmsg
 * saying why (STRATA_E_NO_KVM, STRATA_E_KVM_DENIED, ...,
 * STRATA_E_NO_BACKEND). -EINVAL for another value. Probes once per
 * process; changes nothing. */
int strata_backend_check(int backend);

/* ==== sandboxes ==== */

/*
 * A new sandbox running the guest ELF at `path` (or the size bytes at
 * `elf`, not kept after the call), its init run until it reports ready,
 * with the host's settings and host functions. It has no snapshot:
 * strata_sandbox_restore needs a capture first. Errors: -ENOENT and other
 * -errno (path), STRATA_E_BAD_ELF, STRATA_E_ABI, STRATA_E_BAD_CONFIG, the
 * backend's (STRATA_E_NO_KVM, ...), a fault of the init; *out untouched.
 */
int strata_sandbox_new(strata_host *h, const char *path, strata_sandbox **out);
int strata_sandbox_new_mem(strata_host *h, const void *elf, size_t size, strata_sandbox **out);

/* strata_sandbox_open_dir flags. */
enum {
	STRATA_DIR_VERIFY = 1u << 0,    /* hash every layer against its id before it is mapped */
	STRATA_DIR_MAP_FILES = 1u << 1, /* plain directory: map its layer files (the caller promises never
					 * to truncate them) instead of a private copy */
	STRATA_DIR_VIA_FUSE = 1u << 2,  /* on a strata mount, map the mount's files instead of the backing
					 * blobs (a lazy snapshot's pages are then fetched as they are touched) */
};
/*
 * A new sandbox restored from the snapshot directory `dir`
 * (DIR/manifest.json and DIR/layers/: a strata mount's snapshots/NAME, an
 * export, a plain copy). On a strata mount the layers are mapped from the
 * store's blobs; a plain directory's are copied once into private memory
 * (kept by the host while the files are unchanged), unless
 * STRATA_DIR_MAP_FILES. The sandbox keeps its mappings: the directory may
 * go afterwards. Errors: -ENOENT, -ENOTDIR, STRATA_E_STALE_MOUNT,
 * STRATA_E_BAD_SNAPSHOT (a bad manifest, a short or corrupted layer), the
 * backend's; *out untouched.
 */
int strata_sandbox_open_dir(strata_host *h, const char *dir, unsigned flags, strata_sandbox **out);
/*
 * A new sandbox restored from snapshot `ref` of store st: a tag, an id or
 * a unique prefix of one (6 hex digits at least). Its layers are mapped
 * from the store's blobs. A lazy snapshot's layers (STRATA_PULL_LAZY) are
 * mapped from a FUSE mount no path reaches, served by a helper process
 * the store starts at its first lazy open and stops at strata_store_close
 * (needs /dev/fuse): a page the guest touches is fetched then, with the
 * settings strata_store_set_registry gave; st must outlive the sandbox.
 * Errors: STRATA_E_NOT_FOUND, STRATA_E_AMBIGUOUS, STRATA_E_BAD_NAME,
 * STRATA_E_MOUNT (the lazy layers cannot be served: strata_errmsg says
 * why), -ENOENT (a layer neither in the store nor lazy), the backend's;
 * *out untouched.
 */
int strata_sandbox_open_store(strata_host *h, strata_store *st, const char *ref, strata_sandbox **out);
/*
 * Pull `reference` (REGISTRY/REPOSITORY:TAG or @sha256:DIGEST) into st
 * with reg's settings (NULL: HTTPS, the system's CAs, no credentials, no
 * timeout), its whole chain of layers, then restore a sandbox from it as
 * strata_sandbox_open_store. With STRATA_PULL_LAZY only the snapshot's
 * metadata is pulled, and the sandbox starts at once: its pages are
 * fetched as the guest touches them, each chunk checked against its
 * digest (strata_store_set_registry: with reg's settings, when the store
 * has not served lazy layers yet). The pulled snapshot is left in st
 * untagged (strata_store_pull tags). Errors: strata_store_pull's, then
 * strata_sandbox_open_store's (the snapshot stays in st); *out untouched.
 */
int strata_sandbox_pull(strata_host *h, strata_store *st, const strata_registry *reg, const char *reference,
			unsigned flags, strata_sandbox **out);
/*
 * Another sandbox of the snapshot sb was opened from (its directory, with
 * the same flags, or its store snapshot: the manifest sb read, not read
 * again, and st must outlive it too), with the host's settings and host
 * functions now, as strata_sandbox_open_dir or _open_store would make it:
 * its pages are shared with sb's. What sb did since (calls, captures,
 * in-memory snapshots, its own host functions) is not in it. Errors:
 * STRATA_E_NO_SNAPSHOT (sb was made from an ELF, or is a pool's), those of
 * strata_sandbox_open_dir / _open_store; *out untouched.
 */
int strata_sandbox_clone(strata_sandbox *sb, strata_sandbox **out);
/* Free a sandbox; accepts NULL, and does nothing to a pool's sandbox (the
 * pool frees it). No call may be running on it. A healthy one may be kept
 * warm by its host (for the next open of the same snapshot), without its
 * host functions. */
void strata_sandbox_free(strata_sandbox *sb);
/*
 * Register host function `name` on this sandbox only (as
 * strata_host_register, which see for name and sig), or replace the one
 * of that name: kept across restores and captures and while the sandbox
 * goes in and out of a pool. -EINVAL, -ENOMEM, STRATA_E_BUSY (a call is
 * running); the sandbox's functions are as before then.
 */
int strata_sandbox_register(strata_sandbox *sb, const char *name, const char *sig, strata_host_fn fn, void *ctx);
/*
 * Call guest function `fn` with nargs typed arguments, within timeout_ns
 * nanoseconds (0: the host's strata_host_set_timeout at the sandbox's
 * making). Fills *res on success (strata_result_clear frees it). A guest
 * fault, abort, bad hypercall, timeout or kill poisons the sandbox: later
 * calls fail with STRATA_E_POISONED until strata_sandbox_restore succeeds.
 * STRATA_E_NO_FUNCTION, STRATA_E_BAD_ARGS, STRATA_E_TOO_BIG and
 * STRATA_E_GUEST_ERROR (the guest's message in strata_errmsg) do not
 * poison. STRATA_E_BUSY while another call runs.
 */
int strata_sandbox_call(strata_sandbox *sb, const char *fn, const struct strata_value *args, size_t nargs,
			uint64_t timeout_ns, struct strata_result *res);
/* Stop the call running on sb, from any thread: it fails with
 * STRATA_E_CANCELLED and poisons the sandbox. 1 if a call was stopped, 0
 * if none ran. */
int strata_sandbox_kill(strata_sandbox *sb);
/*
 * Put the sandbox back to its snapshot: the one it was opened from, or
 * the last strata_sandbox_capture (exactly the pages that differ, and the
 * vCPU). A poisoned sandbox becomes usable; host functions stay. Errors:
 * STRATA_E_NO_SNAPSHOT (made from an ELF and never captured), STRATA_E_BUSY;
 * on another error the memory may be partly restored: restore again or free.
 */
int strata_sandbox_restore(strata_sandbox *sb);
/*
 * In-memory snapshots: a restore point with no store, index or file, as
 * cheap to go back to as strata_sandbox_restore.
 *
 * strata_sandbox_snapshot takes one of sb as it is now (every guest page
 * and the vCPU: what a capture into a store would record; the pages that
 * differ from its snapshot are copied into sealed anonymous memory) and
 * makes it sb's snapshot: strata_sandbox_restore goes back to it from now
 * on. *out is the caller's (strata_snapshot_free). Errors: STRATA_E_BUSY,
 * STRATA_E_POISONED, -EINVAL for a pool's sandbox (a put takes it back to
 * the pool's snapshot), -ENOMEM; nothing changes then.
 *
 * strata_sandbox_restore_to makes sb exactly snap again (memory and
 * vCPU), resetting only the pages that differ; snap becomes sb's snapshot.
 * Any of sb's in-memory snapshots may be restored in any order. A
 * poisoned sandbox becomes usable; host functions stay. Errors:
 * STRATA_E_FOREIGN (a snapshot of another sandbox), STRATA_E_BUSY; on
 * another error restore again or free the sandbox.
 *
 * A snapshot stays valid until freed, even after its sandbox is freed
 * (then it can only be freed). strata_sandbox_capture of a sandbox on an
 * in-memory snapshot stores every page (its parent is the store snapshot
 * below the in-memory ones).
 */
int strata_sandbox_snapshot(strata_sandbox *sb, strata_snapshot **out);
int strata_sandbox_restore_to(strata_sandbox *sb, const strata_snapshot *snap);
/* Accepts NULL. */
void strata_snapshot_free(strata_snapshot *snap);
/* strata_sandbox_capture and strata_store_tag flags. */
enum {
	STRATA_TAG_FORCE = 1u << 0, /* move the tag if it names another snapshot */
	STRATA_PULL_LAZY = 1u << 2, /* strata_store_pull, strata_sandbox_pull: record the layers, fetch their
	                             * chunks when a restored guest touches them */
	STRATA_TAG_PRUNE = 1u << 1, /* strata_store_untag: delete the snapshot too if no other tag names it */
	STRATA_PULL_PREFETCH = 1u << 3, /* strata_store_pull with STRATA_PULL_LAZY: fetch the working set recorded
	                                 * with the snapshot now, in parallel Range requests, so that a
	                                 * restore finds it present */
	STRATA_PULL_KEEP_PARTIAL = 1u << 4, /* strata_store_pull: a failed pull keeps the blobs it checked and
	                                     * its partial fetches, so that the next pull resumes there */
};
/*
 * Capture the sandbox into store st in one step: the pages that differ
 * from its snapshot go into a new layer, written durably (per the store's
 * sync setting), the snapshot is committed to the index and tagged `tag`
 * (NULL: untagged), and the sandbox continues on it: the next restore
 * goes back to this point. id (may be NULL) gets the snapshot's id, 32 hex
 * digits and a NUL. st must hold the sandbox's snapshot's layers (a
 * sandbox opened from a directory outside st: import it first) and outlive
 * the sandbox. -EINVAL for a pool's sandbox (a put takes it back to the
 * pool's snapshot). Errors: STRATA_E_POISONED, STRATA_E_BUSY, STRATA_E_EXISTS
 * (tag names another snapshot, without STRATA_TAG_FORCE), STRATA_E_BAD_NAME,
 * STRATA_E_MISSING, STRATA_E_READ_ONLY, -ENOSPC: nothing is committed and
 * the sandbox keeps its snapshot (a layer blob may stay for gc).
 */
#define STRATA_ID_LEN 32
int strata_sandbox_capture(strata_sandbox *sb, strata_store *st, const char *tag, unsigned flags,
			   char id[STRATA_ID_LEN + 1]);
/* The backend the sandbox runs on: STRATA_BACKEND_KVM or _PROCESS. */
int strata_sandbox_backend(const strata_sandbox *sb);
/* The id of the store snapshot the sandbox runs on (the one it was opened
 * from, or its last capture) into id. STRATA_E_NO_SNAPSHOT: made from an
 * ELF and never captured, or on an in-memory snapshot. */
int strata_sandbox_snapshot_id(const strata_sandbox *sb, char id[STRATA_ID_LEN + 1]);

/* The guest's functions: a name and its signature (as strata_host_register
 * writes one, "i(ii)"), at most STRATA_SIG_LEN bytes with the NUL. */
#define STRATA_SIG_LEN 16
typedef int (*strata_function_fn)(void *ctx, const char *name, const char *sig);
/* Each function the guest publishes, in the guest's order: the count
 * (>= 0), or cb's non-zero return, which stops the walk. Never fails
 * otherwise. */
int strata_sandbox_functions(const strata_sandbox *sb, strata_function_fn cb, void *ctx);
/* The signature of guest function fn into sig. STRATA_E_NO_FUNCTION. */
int strata_sandbox_signature(const strata_sandbox *sb, const char *fn, char sig[STRATA_SIG_LEN]);

/* What strata_sandbox_info reports. */
enum {
	/* the sandbox's last failed call (0 when it has no such field) */
	STRATA_INFO_ERROR = 1,          /* its code (0: no call failed yet) */
	STRATA_INFO_FAULT_VECTOR = 2,   /* STRATA_E_GUEST_FAULT, _STACK_OVERFLOW: the exception vector */
	STRATA_INFO_FAULT_ERROR_CODE = 3, /* ... and the exception's error code */
	STRATA_INFO_FAULT_RIP = 4,      /* ... the guest instruction pointer (a guest address) */
	STRATA_INFO_FAULT_ADDRESS = 5,  /* a page fault's address; STRATA_E_BAD_ADDRESS: the address */
	STRATA_INFO_ABORT_CODE = 6,     /* STRATA_E_ABORT: the guest's code (as int64_t) */
	/* the snapshot it was opened from (0 for a sandbox from an ELF) */
	STRATA_INFO_LAYERS = 16,        /* its layers */
	STRATA_INFO_LAYER_PAGES = 17,   /* 4 KiB pages its layers hold */
	STRATA_INFO_ON_MOUNT = 18,      /* 1: opened from a directory on a strata mount */
	STRATA_INFO_DIRECT_LAYERS = 19, /* ... layers mapped from their backing blobs, not the mount's files */
	STRATA_INFO_LAZY = 20,          /* 1: some layer's pages are fetched from a registry as they are touched */
	/* counters since it was made */
	STRATA_INFO_RESTORES = 32,
	STRATA_INFO_CAPTURES = 33,
	STRATA_INFO_PAGES_REWRITTEN = 34, /* restores: pages copied or zeroed in place */
	STRATA_INFO_PAGES_DROPPED = 35,   /* restores: pages given back to the kernel */
	STRATA_INFO_PAGES_CAPTURED = 36,  /* captures: pages written to new layers */
	/* its last strata_sandbox_record_working_set */
	STRATA_INFO_WS_PAGES = 48,      /* snapshot pages in the record */
	STRATA_INFO_WS_RUNS = 49,       /* runs of consecutive pages */
	STRATA_INFO_WS_LAYERS = 50,     /* layers they are in */
	STRATA_INFO_WS_BYTES = 51,      /* the record's size */
	STRATA_INFO_WS_MAPPED = 52,     /* guest pages found mapped */
};
/* One figure of the sandbox into *value (as libcurl's curl_easy_getinfo).
 * -EINVAL for a `what` this version does not know (*value untouched). Not
 * during a call on another thread. */
int strata_sandbox_info(const strata_sandbox *sb, int what, uint64_t *value);
/*
 * Write an ELF core file of the sandbox at `path` (registers and guest
 * memory, as they were at its last failed call if that poisoned it):
 * `gdb GUEST.elf FILE` reads it. Mode 0600; an existing file is
 * replaced. Errors: STRATA_E_BUSY, -errno from the file; strata_errmsg
 * says which.
 */
int strata_sandbox_core(strata_sandbox *sb, const char *path);
/*
 * Record the working set of the snapshot sb was opened from
 * (docs/workingset.md): the snapshot pages it touched since it started,
 * guest and host alike; call it after its first call. The record is
 * stored in st and linked to that snapshot (st must hold it): a lazy pull
 * fetches those pages first. record (may be NULL) gets the record's id;
 * strata_sandbox_info's STRATA_INFO_WS_* say what it holds. Errors:
 * STRATA_E_NO_SNAPSHOT (made from an ELF, restored or captured since, or
 * a warm sandbox of its host: strata_host_set_cache(h, shells, 0) keeps
 * none), STRATA_E_NO_PAGEMAP, STRATA_E_NOT_FOUND (the snapshot is not in
 * st), STRATA_E_READ_ONLY, -ENOMEM; nothing is stored then.
 */
int strata_sandbox_record_working_set(strata_sandbox *sb, strata_store *st, char record[STRATA_ID_LEN + 1]);

/* ==== pools ==== */

/*
 * n (1..100000) sandboxes restored from one snapshot, which share its
 * pages: from a snapshot directory (flags as strata_sandbox_open_dir) or
 * from ref in store st (st must outlive the pool). Each has the host's
 * functions. Errors: those of strata_sandbox_open_dir / _open_store, and
 * -EINVAL for n; nothing is left on failure, *out untouched.
 */
int strata_pool_open_dir(strata_host *h, const char *dir, unsigned flags, unsigned n, strata_pool **out);
int strata_pool_open_store(strata_host *h, strata_store *st, const char *ref, unsigned n, strata_pool **out);
/* Free the pool and its sandboxes. -EBUSY (nothing changes) while one is
 * out (strata_pool_get without its put). Accepts NULL (0). */
int strata_pool_free(strata_pool *p);
/* Take an idle sandbox into *out, waiting up to wait_ns nanoseconds for
 * one (0: not at all). -EAGAIN if none came back in time. */
int strata_pool_get(strata_pool *p, uint64_t wait_ns, strata_sandbox **out);
/* Give a sandbox back: restored to the snapshot (replaced by a new one if
 * the restore fails), then idle again. -EINVAL if it is not this pool's
 * or not out (nothing changes); if the replacement fails too, the
 * sandbox stays out and the error is returned. */
int strata_pool_put(strata_pool *p, strata_sandbox *sb);

/* ==== stores ==== */

/* strata_store_open flags. */
enum {
	STRATA_STORE_CREATE = 1u << 0,   /* make the store if the directory is absent (its parent must exist) or empty */
	STRATA_STORE_RDONLY = 1u << 1,   /* never write: writes fail with STRATA_E_READ_ONLY */
	STRATA_STORE_NOSYNC = 1u << 2,   /* no fsync: commits survive a crash of the program, not of the machine */
};
/*
 * Open the store at `path` and its index. Errors: -ENOENT (no such
 * directory, without STRATA_STORE_CREATE), STRATA_E_NOT_STORE,
 * STRATA_E_VERSION, STRATA_E_INDEX_VERSION, -EACCES, -ENOMEM; *out untouched.
 */
int strata_store_open(const char *path, unsigned flags, strata_store **out);
/* How strata_store_create makes a store. Zeroed, with size set, is the
 * default; later versions may add fields at the end (the library reads
 * the first size bytes, the rest as zero). */
enum {
	STRATA_SYNC_FULL = 0, /* fsync every blob and index commit: survives power loss (the default) */
	STRATA_SYNC_NONE = 1, /* no fsync: survives a crash of the program, not of the machine */
};
struct strata_store_options {
	size_t size;      /* sizeof(struct strata_store_options) of the caller */
	int sync;         /* STRATA_SYNC_*, recorded in the store: every open of it keeps it */
	int shared;       /* 1: members of `group` may read the store and run its snapshots, not write it */
	uint32_t group;   /* that group's gid (the caller must be in it, or root) */
};
/*
 * Make a store at `path` (created if missing; its parent must exist) with
 * opts (NULL: the defaults), private to its owner unless shared. An
 * existing store is left as it is (its sync policy and modes unchanged).
 * Errors: STRATA_E_NOT_STORE (a directory neither empty nor a store),
 * -EEXIST (opts->shared, and the existing store is not shared with that
 * group), -EPERM (the caller is not in opts->group), -EINVAL (an
 * unknown sync policy, or size too small), STRATA_E_VERSION,
 * STRATA_E_FORMAT, STRATA_E_READ_ONLY, -ENOSPC, -EIO: what it made is
 * removed again. Open it with strata_store_open.
 */
int strata_store_create(const char *path, const struct strata_store_options *opts);
/* The store's directory as an absolute path, as long as st is open.
 * Never fails. */
const char *strata_store_path(const strata_store *st);
/* Close; accepts NULL. Needs every sandbox and pool opened from it, and
 * every sandbox captured into it, freed. */
void strata_store_close(strata_store *st);
/* 1 if `name` may be a tag: 1..128 bytes of letters, digits, '_', '.'
 * and '-', not starting with '.' or '-'; else 0. Never fails. */
int strata_tag_valid(const char *name);
/* The id of snapshot ref (a tag, an id, a unique id prefix) into id (32
 * hex digits and a NUL). STRATA_E_NOT_FOUND, STRATA_E_AMBIGUOUS,
 * STRATA_E_BAD_NAME. */
int strata_store_resolve(strata_store *st, const char *ref, char id[STRATA_ID_LEN + 1]);
/* How many layers of the snapshot directory `dir` st holds neither as a
 * blob nor as a lazy layer (0: a sandbox opened from dir can be captured
 * into st). -ENOENT and other -errno, STRATA_E_FORMAT or STRATA_E_VERSION
 * (its manifest.json cannot be read; strata_errmsg says why). */
int strata_store_lacks(strata_store *st, const char *dir);
/* Called for each snapshot (id, 32 hex digits) or tag (name, id); a
 * non-zero return stops the walk and is returned. */
typedef int (*strata_snapshot_fn)(void *ctx, const char *id);
typedef int (*strata_tag_fn)(void *ctx, const char *name, const char *id);
/* Every snapshot of the store, in id order: the count seen (>= 0), or
 * cb's non-zero return, or an index error. */
int strata_store_snapshots(strata_store *st, strata_snapshot_fn cb, void *ctx);
/* Every tag of the store, in name order: the count seen, as above. */
int strata_store_tags(strata_store *st, strata_tag_fn cb, void *ctx);
/* What strata_store_snapshot_info reports of one snapshot. */
enum {
	STRATA_SNAPSHOT_MEMORY = 1,       /* its guest memory, in bytes */
	STRATA_SNAPSHOT_STORED = 2,       /* the bytes of its layers */
	STRATA_SNAPSHOT_UNIQUE = 3,       /* ...of those no other snapshot uses (what delete then gc frees) */
	STRATA_SNAPSHOT_CREATED = 4,      /* when it was captured, ns since the epoch (0: unknown) */
	STRATA_SNAPSHOT_LAYERS = 5,       /* its layers */
	STRATA_SNAPSHOT_HAS_PARENT = 6,   /* 1 if it was made from another snapshot (strata_store_parent) */
	STRATA_SNAPSHOT_LAZY_LAYERS = 7,  /* its layers a lazy pull recorded and nothing has completed yet */
	STRATA_SNAPSHOT_LAZY_CHUNKS = 8,  /* ...the chunks they are cut into */
	STRATA_SNAPSHOT_LAZY_PRESENT = 9, /* ...of those, the chunks the store holds */
	STRATA_SNAPSHOT_ABI = 10,         /* the guest ABI version it was captured with (0: none) */
	STRATA_SNAPSHOT_RANGES = 11,      /* runs of guest pages its layers hold */
	STRATA_SNAPSHOT_PAGES_PRESENT = 12, /* ...their pages (the others read as zero) */
	STRATA_SNAPSHOT_MANIFEST_BYTES = 13, /* its manifest's length (strata_store_manifest) */
	/* its working-set record (strata_sandbox_record_working_set):
	 * STRATA_E_NOT_FOUND if it has none */
	STRATA_SNAPSHOT_WS_PAGES = 14,    /* snapshot pages in the record */
	STRATA_SNAPSHOT_WS_RUNS = 15,     /* runs of consecutive pages */
	STRATA_SNAPSHOT_WS_LAYERS = 16,   /* layers they are in */
};
/* One figure of snapshot ref (a tag, an id, a unique prefix) into *value.
 * Reads the index only (no layer byte; the manifest for the _LAZY_ ones).
 * STRATA_E_NOT_FOUND, STRATA_E_AMBIGUOUS, STRATA_E_INDEX_CORRUPT (its
 * record cannot be read), -EINVAL for a `what` this version does not
 * know: *value untouched. */
int strata_store_snapshot_info(strata_store *st, const char *ref, int what, uint64_t *value);
/* Snapshot ref's manifest (docs/formats.md: canonical JSON, as its
 * manifest.json holds it without the last newline) into buf, NUL-
 * terminated: its length, or -ERANGE if len does not hold it and the NUL
 * (STRATA_SNAPSHOT_MANIFEST_BYTES + 1 do), STRATA_E_NOT_FOUND, ... */
int strata_store_manifest(strata_store *st, const char *ref, char *buf, size_t len);
/* One layer of a snapshot, for strata_store_layers. Made by the library,
 * valid during the callback only; later versions may add fields at the end. */
struct strata_layer {
	size_t size;          /* sizeof(struct strata_layer) of the library */
	const char *id;       /* 32 hex digits */
	uint64_t pages;       /* its 4 KiB pages */
	int lazy;             /* 1: a lazy pull's, not complete: the figures below */
	uint64_t chunks, present; /* its chunks, and those the store holds */
	uint32_t chunk_size;
	const char *origin;   /* the registry repository it is fetched from */
};
typedef int (*strata_layer_fn)(void *ctx, const struct strata_layer *l);
/* Every layer of snapshot ref, in its manifest's order: the count, cb's
 * non-zero return (which stops the walk), or an error as
 * strata_store_snapshot_info's. */
int strata_store_layers(strata_store *st, const char *ref, strata_layer_fn cb, void *ctx);
/* Every label (KEY=VALUE given at capture) of snapshot ref, in its
 * manifest's order, as strata_store_layers. Values are UTF-8 from the
 * snapshot: escape them before a terminal sees them. */
typedef int (*strata_label_fn)(void *ctx, const char *key, const char *value);
int strata_store_labels(strata_store *st, const char *ref, strata_label_fn cb, void *ctx);
/* The id of snapshot ref's working-set record into record: 0,
 * STRATA_E_NOT_FOUND (no record), or why the record cannot be read
 * (STRATA_E_CORRUPT, STRATA_E_FORMAT, -ENOENT: its blob is gone;
 * strata_errdetail says which). */
int strata_store_working_set(strata_store *st, const char *ref, char record[STRATA_ID_LEN + 1]);
/* The id of the snapshot ref was made from into id: STRATA_E_NOT_FOUND
 * (strata_errmsg saying which) if ref names none or has no parent
 * (STRATA_SNAPSHOT_HAS_PARENT 0); the parent itself may be gone from the
 * store since (strata_store_resolve of its id says). */
int strata_store_parent(strata_store *st, const char *ref, char id[STRATA_ID_LEN + 1]);
/* Every snapshot made from ref, in id order, as strata_store_snapshots
 * (the count seen, cb's non-zero return, or an error such as
 * STRATA_E_NOT_FOUND for ref). */
int strata_store_children(strata_store *st, const char *ref, strata_snapshot_fn cb, void *ctx);
/* The registry repository ("host[:port]/name/space", a NUL) the first lazy
 * layer of snapshot ref is fetched from into buf (len bytes;
 * STRATA_ORIGIN_LEN + 1 hold any). STRATA_E_NOT_FOUND if ref names no
 * snapshot or one with no lazy layer (STRATA_SNAPSHOT_LAZY_LAYERS 0);
 * -ERANGE if len is too small. */
int strata_store_lazy_origin(strata_store *st, const char *ref, char *buf, size_t len);
/* Point tag `name` at snapshot ref. STRATA_E_NOT_FOUND, STRATA_E_EXISTS
 * (name names another snapshot, without STRATA_TAG_FORCE),
 * STRATA_E_BAD_NAME, STRATA_E_READ_ONLY: the tag is as it was. */
int strata_store_tag(strata_store *st, const char *ref, const char *name, unsigned flags);
/* Remove tag `name`; with STRATA_TAG_PRUNE the snapshot goes too when no
 * other tag names it (its layers then wait for gc). STRATA_E_NOT_FOUND,
 * STRATA_E_BAD_NAME, STRATA_E_READ_ONLY: nothing changes. */
int strata_store_untag(strata_store *st, const char *name, unsigned flags);
/* Rename tag `from` to `to` at once (flags: STRATA_TAG_FORCE replaces a
 * `to` that names another snapshot). STRATA_E_NOT_FOUND (no tag `from`),
 * STRATA_E_EXISTS, STRATA_E_BAD_NAME, STRATA_E_READ_ONLY: both names are
 * as they were. */
int strata_store_rename_tag(strata_store *st, const char *from, const char *to, unsigned flags);
/* Remove snapshot `id` (32 hex digits: an id, not a tag or a prefix) and
 * every tag naming it; snapshots made from it keep working (each lists
 * every layer it needs), and its layers wait for strata_store_gc.
 * STRATA_E_BAD_ID, STRATA_E_NOT_FOUND, STRATA_E_READ_ONLY: nothing changes. */
int strata_store_delete(strata_store *st, const char *id);
/* strata_store_verify and strata_store_check flags. */
enum {
	STRATA_VERIFY_HASH = 1u << 0,   /* re-hash every blob against its id (reads every byte) */
	STRATA_CHECK_REPAIR = 1u << 1,  /* strata_store_check only: repair what can be repaired without losing anything */
};
/* What strata_store_info reports. */
enum {
	/* the store's last strata_store_gc (0 before one) */
	STRATA_STORE_INFO_GC_BLOBS_REMOVED = 1,
	STRATA_STORE_INFO_GC_BYTES_REMOVED = 2,
	STRATA_STORE_INFO_GC_STAGING_REMOVED = 3, /* staging files of crashed imports */
	STRATA_STORE_INFO_GC_LAZY_REMOVED = 4,    /* lazy layers no snapshot uses */
	STRATA_STORE_INFO_GC_BLOBS_IN_USE = 5,    /* kept: snapshots use them */
	STRATA_STORE_INFO_GC_BLOBS_YOUNG = 6,     /* kept: unreferenced, younger than the grace */
	/* the store's last strata_store_push or strata_store_pull (0 before
	 * one; a failed one's figures up to where it stopped) */
	STRATA_STORE_INFO_XFER_SNAPSHOTS = 7,     /* OCI manifests pushed or pulled (the chain) */
	STRATA_STORE_INFO_XFER_BLOBS_MOVED = 8,   /* blobs sent or fetched */
	STRATA_STORE_INFO_XFER_BLOBS_SKIPPED = 9, /* blobs the other side already had */
	STRATA_STORE_INFO_XFER_BYTES_MOVED = 10,  /* blob bytes sent or fetched (resumed bytes excluded) */
	STRATA_STORE_INFO_XFER_BYTES_SKIPPED = 11,
	STRATA_STORE_INFO_XFER_BYTES_RESUMED = 12, /* pull: bytes of interrupted fetches reused */
	STRATA_STORE_INFO_XFER_BYTES_SHA256 = 13, /* push: bytes hashed for the sha256 table */
	STRATA_STORE_INFO_XFER_BYTES_CHUNK_INDEX = 14, /* chunk indexes sent, or fetched by a lazy pull */
	STRATA_STORE_INFO_XFER_LAYERS_LAZY = 15,  /* lazy pull: layers recorded without their bytes */
	STRATA_STORE_INFO_XFER_LAYERS_COMPLETED = 16, /* full pull: lazy layers of st completed */
	STRATA_STORE_INFO_XFER_BYTES_COMPLETED = 17,  /* ...with these chunk bytes fetched */
	STRATA_STORE_INFO_XFER_EXISTED = 18,      /* pull: 1 if the snapshot was in st already */
	STRATA_STORE_INFO_XFER_WIRE_UP = 19,      /* bytes sent to the registry (headers included) */
	STRATA_STORE_INFO_XFER_WIRE_DOWN = 20,    /* bytes received from it */
	STRATA_STORE_INFO_XFER_WIRE_REQUESTS = 21, /* HTTP requests made */
	STRATA_STORE_INFO_XFER_WIRE_MOUNTS = 22,  /* push: blobs the registry mounted from another repository */
	STRATA_STORE_INFO_XFER_WS_FOUND = 23,     /* 1 if a working-set record went with the snapshot */
	STRATA_STORE_INFO_XFER_WS_BYTES = 24,     /* ...of this size */
	STRATA_STORE_INFO_XFER_WS_REFERRERS_API = 25, /* ...listed by the registry's referrers API (0: the tag schema's index) */
	STRATA_STORE_INFO_XFER_PREFETCH_WS_BYTES = 26, /* STRATA_PULL_PREFETCH: the record's lazy pages, in bytes */
	STRATA_STORE_INFO_XFER_PREFETCH_JOBS = 27,     /* ...fetched in this many parallel groups */
	STRATA_STORE_INFO_XFER_PREFETCH_REQUESTS = 28, /* ...of Range requests */
	STRATA_STORE_INFO_XFER_PREFETCH_BYTES = 29,    /* ...bringing these chunk bytes */
	STRATA_STORE_INFO_XFER_COMPLETED_REQUESTS = 30, /* full pull: Range requests completing lazy layers */
	/* the store's last strata_store_import (0 before one; a failed one's
	 * figures are 0 but for _IMPORT_OCI) */
	STRATA_STORE_INFO_IMPORT_OCI = 31,          /* 1: it read an OCI image layout; 0: a snapshot directory */
	STRATA_STORE_INFO_IMPORT_SNAPSHOTS = 32,    /* snapshots it holds (1 for a directory; the chain for a layout) */
	STRATA_STORE_INFO_IMPORT_LAYERS = 33,       /* a directory: the layers its manifest lists */
	STRATA_STORE_INFO_IMPORT_BLOBS_ADDED = 34,  /* blobs that were not in the store (a directory: layers) */
	STRATA_STORE_INFO_IMPORT_BLOBS_PRESENT = 35, /* blobs the store had already */
	STRATA_STORE_INFO_IMPORT_BYTES_ADDED = 36,  /* bytes newly stored */
	STRATA_STORE_INFO_IMPORT_EXISTED = 37,      /* a directory: 1 if its snapshot was in the store already */
	STRATA_STORE_INFO_IMPORT_LAYERS_HEALED = 38, /* ...and these of its layers' blobs were missing: stored from it */
	/* the store's last strata_store_check or strata_store_verify (0 before one) */
	STRATA_STORE_INFO_CHECK_SNAPSHOTS = 39,     /* snapshot records read */
	STRATA_STORE_INFO_CHECK_BLOBS = 40,         /* blobs they reference */
	STRATA_STORE_INFO_CHECK_BYTES_HASHED = 41,  /* STRATA_VERIFY_HASH: bytes re-hashed */
	STRATA_STORE_INFO_CHECK_ORPHANS = 42,       /* blobs no snapshot references (not errors) */
	STRATA_STORE_INFO_CHECK_LAZY = 43,          /* referenced layers that are lazy (not errors) */
	STRATA_STORE_INFO_CHECK_LAZY_CHUNKS = 44,   /* STRATA_VERIFY_HASH: their present chunks re-hashed */
	STRATA_STORE_INFO_CHECK_ERRORS = 45,        /* errors found (before any repair) */
	STRATA_STORE_INFO_CHECK_REPAIRED = 46,      /* STRATA_CHECK_REPAIR: problems an action was taken on */
	STRATA_STORE_INFO_CHECK_REMAINING = 47,     /* STRATA_CHECK_REPAIR: errors a check finds afterwards */
	/* the store itself */
	STRATA_STORE_INFO_SHARED = 48,              /* 1: shared with a group (strata_store_options.shared) */
	STRATA_STORE_INFO_GROUP = 49,               /* that group's gid (0 for a private store) */
};
/* One figure of the store into *value (the transfer figures are the last
 * push's or pull's on st from any thread). -EINVAL for a `what` this version
 * does not know (*value untouched). */
int strata_store_info(strata_store *st, int what, uint64_t *value);
/* A problem strata_store_verify found: id of the blob or snapshot, a line. */
typedef void (*strata_problem_fn)(void *ctx, const char *id, const char *what);
/*
 * Check the store: every index record readable, every layer a snapshot
 * needs present with its size (and, with STRATA_VERIFY_HASH, its hash),
 * reference counts and tags consistent. cb (may be NULL) sees each error.
 * Returns the number of errors found (0: consistent; orphan blobs are not
 * errors), or a negative code if the check could not run. Changes nothing.
 */
int strata_store_verify(strata_store *st, unsigned flags, strata_problem_fn cb, void *ctx);
/*
 * Import `dir` into st: a snapshot directory (DIR/manifest.json and
 * DIR/layers/<id>, as strata_store_export writes it or a mount's
 * snapshots/NAME) or an OCI image layout (a strata export --oci: its last
 * snapshot and the chain of its parents). The manifest is parsed strictly
 * and every layer re-hashed against its name as it is stored; layers st
 * has already are not stored twice. The snapshot appears whole or not at
 * all, tagged `tag` (NULL: untagged; flags: STRATA_TAG_FORCE moves a tag
 * naming another snapshot). Importing a snapshot st holds already checks
 * dir and stores only the layers st lacks (healing it). id (may be NULL)
 * gets its id; strata_store_info's STRATA_STORE_INFO_IMPORT_* say what
 * was done. Errors: -ENOENT (no such directory, no manifest.json, a
 * missing layer file), STRATA_E_FORMAT, STRATA_E_VERSION, STRATA_E_LAYOUT
 * (a layer of the wrong size), STRATA_E_CORRUPT (bytes that do not hash to
 * their name), STRATA_E_EXISTS, STRATA_E_BAD_NAME, STRATA_E_READ_ONLY,
 * -ENOSPC, -EIO: nothing is committed and the blobs it stored are removed
 * (the layers it healed stay); strata_errdetail says which file and rule.
 */
int strata_store_import(strata_store *st, const char *dir, const char *tag, unsigned flags,
			char id[STRATA_ID_LEN + 1]);
/*
 * Write snapshot ref of st as a snapshot directory `dir` (dir/manifest.json
 * and dir/layers/<id>, what strata_store_import and
 * strata_sandbox_open_dir read). dir must not exist; it is written beside
 * itself and renamed, so it appears whole or not at all. A lazy snapshot's
 * layers must be complete first (strata_store_complete). Errors:
 * STRATA_E_NOT_FOUND, STRATA_E_AMBIGUOUS, STRATA_E_BAD_NAME, -EEXIST (dir
 * exists), -ENOENT (dir's parent is missing, or a layer blob is missing
 * from st), -ENOSPC, -EIO: nothing is left at dir.
 */
int strata_store_export(strata_store *st, const char *ref, const char *dir);
/*
 * Write an OCI image layout at `dir` (must not exist; built beside it and
 * renamed): each of the nrefs snapshots refs names (nrefs 0: every tagged
 * one) with its ancestors, one artifact per snapshot, tags as ref names;
 * strata_store_import reads it back. With reg's settings (NULL: the
 * defaults): its progress callback sees each blob, and
 * strata_registry_set_whole_configs makes every config a full manifest
 * instead of the delta a snapshot may be stored as. strata_store_info's
 * STRATA_STORE_INFO_XFER_SNAPSHOTS, _BLOBS_MOVED, _BYTES_MOVED and
 * _BYTES_SHA256 say what was written. st is written to (the sha256 table
 * it keeps), so it must not be read-only. Errors: -EEXIST,
 * STRATA_E_NOT_FOUND (a ref names no snapshot), STRATA_E_MISSING,
 * STRATA_E_READ_ONLY, -ENOSPC, -EIO, -ENOMEM (strata_errdetail says
 * which): dir does not appear.
 */
int strata_store_export_oci(strata_store *st, const strata_registry *reg, const char *dir, const char *const *refs,
			    size_t nrefs);
/*
 * Fetch what snapshot ref's lazy layers (a lazy pull's) lack from the
 * registries each came from, with reg's settings (NULL: the defaults;
 * its credentials, certificates, timeout, and its warning callback for
 * each refused chunk, failed fetch or completed layer), check each whole
 * layer against its id and keep it as an ordinary blob: after it the
 * snapshot needs no registry (STRATA_SNAPSHOT_LAZY_LAYERS is 0). 0 at
 * once for a snapshot with no lazy layer. Errors: STRATA_E_NOT_FOUND,
 * STRATA_E_LAZY_OFFLINE, STRATA_E_LAZY_BAD_CHUNK, STRATA_E_AUTH,
 * STRATA_E_CORRUPT, STRATA_E_READ_ONLY, -errno (strata_errdetail says
 * why); the layers completed before the failure stay complete, the
 * chunks fetched stay.
 */
int strata_store_complete(strata_store *st, const strata_registry *reg, const char *ref);
/* What a problem strata_store_check reports is about (strata_problem.kind). */
enum {
	STRATA_PROBLEM_MISSING = 1,     /* a referenced blob file does not exist */
	STRATA_PROBLEM_SIZE = 2,        /* a blob file's size differs from its record */
	STRATA_PROBLEM_CORRUPT = 3,     /* a blob's bytes do not hash to its name */
	STRATA_PROBLEM_REFCOUNT = 4,    /* a blob's reference count differs from the snapshots' */
	STRATA_PROBLEM_SNAPSHOT = 5,    /* a snapshot record is unreadable or not named by its hash */
	STRATA_PROBLEM_TAG = 6,         /* a tag names a snapshot that does not exist */
	STRATA_PROBLEM_CHILDREN = 7,    /* the children lists disagree with the parents */
	STRATA_PROBLEM_ORPHAN = 8,      /* a blob no snapshot references (a note: gc frees it) */
	STRATA_PROBLEM_WORKING_SET = 9, /* a working-set link names a snapshot that does not exist */
	STRATA_PROBLEM_LAZY = 10,       /* a lazy layer (a note): its chunks checked against its chunk index only */
	STRATA_PROBLEM_CHUNK = 11,      /* a present chunk of a lazy layer does not match its chunk index */
};
/* One problem strata_store_check found. Made by the library, valid during
 * the callback only; later versions may add fields at the end (size says
 * how many bytes of it there are). */
struct strata_problem {
	size_t size;        /* sizeof(struct strata_problem) of the library */
	int kind;           /* STRATA_PROBLEM_* (a later version may add kinds) */
	int error;          /* 1: an error; 0: a note (an orphan blob, a lazy layer) */
	const char *id;     /* the blob, layer or snapshot, 32 hex digits */
	const char *detail; /* plain words, e.g. "refcount 2, referenced by 1 snapshot" */
	const char *tag;    /* STRATA_PROBLEM_TAG: the tag; else NULL */
	/* STRATA_CHECK_REPAIR: what was done, e.g. "moved to lost+found/<id>.<time>",
	 * "refcount set to 1", "tag removed"; NULL if nothing was (or could be) */
	const char *action;
};
/* Called for each problem, errors and notes; a non-zero return stops the
 * check and is returned. */
typedef int (*strata_check_fn)(void *ctx, const struct strata_problem *p);
/*
 * strata_store_verify with every problem, notes included, in full: the
 * index's records readable, every layer a snapshot needs present with its
 * size (and, with STRATA_VERIFY_HASH, its hash; a lazy layer's present
 * chunks against its chunk index), reference counts, children lists and
 * tags consistent; strata_store_info's STRATA_STORE_INFO_CHECK_* count
 * what was read. Returns the number of errors (0: consistent), cb's
 * non-zero return, or a negative code if the check could not run
 * (-ENOMEM, STRATA_E_INDEX_BUSY, -errno reading blobs, -EINVAL for unknown
 * flags). Without STRATA_CHECK_REPAIR it changes nothing.
 *
 * With STRATA_CHECK_REPAIR (st opened for writing, else
 * STRATA_E_READ_ONLY) it repairs what it can without losing anything:
 * damaged blob files and snapshot records are moved to STORE/lost+found,
 * a lazy layer's bad chunks are marked missing (fetched again), reference
 * counts, children lists and dangling tags are fixed. cb then sees each problem found with its
 * action; the return value (and STRATA_STORE_INFO_CHECK_REMAINING) is the
 * number of errors a check without hashing finds afterwards. Missing
 * layers cannot be repaired here (strata_store_lacking lists the
 * snapshots; a strata_store_import of a copy heals them). A repair that
 * fails part way keeps what it did: each step leaves a consistent store.
 * Paths others may read are strata_store_exposed's.
 */
int strata_store_check(strata_store *st, unsigned flags, strata_check_fn cb, void *ctx);
/* Called for each snapshot some of whose layers st holds neither as a blob
 * of the right size nor as a lazy layer: missing of its nlayers layers. */
typedef int (*strata_lacking_fn)(void *ctx, const char *id, uint32_t missing, uint32_t nlayers);
/* Every readable snapshot of st that lacks layers, in id order: the count
 * seen (>= 0), cb's non-zero return (it stops the walk), or STRATA_E_CORRUPT,
 * -ENOMEM, -EINVAL (st NULL). Changes nothing. */
int strata_store_lacking(strata_store *st, strata_lacking_fn cb, void *ctx);
/* A path of the store others than its readers may read (strata_store_exposed).
 * Made by the library, valid during the callback only; later versions may
 * add fields at the end (size says how many bytes of it there are). */
struct strata_exposed {
	size_t size;      /* sizeof(struct strata_exposed) of the library */
	const char *path; /* relative to the store's directory ("." for itself) */
	uint32_t mode;    /* its permission bits (07777) as found */
	uint32_t want;    /* with the bits the store does not grant removed */
	int dir;          /* 1: a directory */
	int fixed;        /* STRATA_EXPOSED_FIX: now set to want */
};
typedef int (*strata_exposed_fn)(void *ctx, const struct strata_exposed *e);
/* strata_store_exposed flags. */
enum {
	STRATA_EXPOSED_DIRS = 1u << 0, /* only the directories (and STORE/format): cheap */
	STRATA_EXPOSED_FIX = 1u << 1,  /* set each exposed path to want (st opened for writing) */
};
/*
 * Walk the store (symlinks not followed) and call cb (may be NULL) once per
 * file or directory that grants more than the store's mode allows: for a
 * private store any group or other bit; for a shared one any other bit,
 * group write (the index's lock file excepted), or group bits while owned
 * by another group. A subdirectory the caller may not read is skipped.
 * Returns the number of exposed paths found, cb's non-zero return (it
 * stops the walk), or -errno (the store's directory cannot be read, a
 * stat or chmod failed: the paths fixed before stay fixed), -EINVAL
 * (st NULL, unknown flags), STRATA_E_READ_ONLY (STRATA_EXPOSED_FIX on a
 * read-only st: nothing changes).
 */
int strata_store_exposed(strata_store *st, unsigned flags, strata_exposed_fn cb, void *ctx);

/* What a strata_layer_check event reports (its kind). */
enum {
	STRATA_LAYER_CHECKED = 1,   /* a layer was checked: status says how it is */
	STRATA_LAYER_BAD_CHUNK = 2, /* a present chunk of a lazy layer does not match its chunk index */
};
/* One event of strata_store_verify_snapshot. Made by the library, valid
 * during the callback only; later versions may add fields at the end. */
struct strata_layer_check {
	size_t size;            /* sizeof(struct strata_layer_check) of the library */
	int kind;               /* STRATA_LAYER_* */
	const char *layer;      /* its id, 32 hex digits */
	/* STRATA_LAYER_CHECKED: 0 sound; -ENOENT missing (a lazy layer: its
	 * lazy files are); STRATA_E_LAYOUT wrong size; STRATA_E_CORRUPT its
	 * bytes do not hash to its id; another code if it could not be read */
	int status;
	int lazy;               /* 1: a lazy layer: only its present chunks are checked, against its chunk index */
	uint64_t chunks;        /* lazy: its chunks */
	uint64_t present;       /* lazy: those in the store, each re-hashed */
	uint64_t bad;           /* lazy: of them, those that do not match (each a BAD_CHUNK event first) */
	const char *origin;     /* lazy: the registry repository it is fetched from ("host[:port]/repo") */
	const char *source;     /* lazy: the same as its record keeps it ("http://" first if plain HTTP) */
	const char *chunk_index; /* lazy: the chunk index's digest ("sha256:..."; "" if unknown) */
	uint64_t chunk, off, len; /* BAD_CHUNK: the chunk's number and its bytes in the layer */
};
typedef int (*strata_layer_check_fn)(void *ctx, const struct strata_layer_check *c);
/*
 * Check every layer of snapshot ref: present, of its size, hashing to its
 * id; a lazy layer's present chunks re-hashed against its chunk index
 * (checked so when fetched; the whole layer is checked against its id
 * when it is complete). cb (may be NULL) sees a STRATA_LAYER_CHECKED event
 * per layer, after its BAD_CHUNK events; a non-zero return stops and is
 * returned. Returns the number of layers (problems are cb's to count), or
 * STRATA_E_NOT_FOUND, STRATA_E_AMBIGUOUS, an index error. Changes nothing.
 */
int strata_store_verify_snapshot(strata_store *st, const char *ref, strata_layer_check_fn cb, void *ctx);
/*
 * Check a snapshot directory (an export, a copy, a mount's
 * snapshots/NAME): its manifest.json parsed strictly, every layer file of
 * the right size and hashing to its name, nothing followed that is not a
 * plain file or directory. Returns its number of layers, or -ENOENT (no
 * such directory or file), STRATA_E_FORMAT, STRATA_E_VERSION,
 * STRATA_E_LAYOUT, STRATA_E_CORRUPT, -errno; strata_errdetail names the
 * file and the rule. *layers (may be NULL) gets the manifest's layer
 * count as soon as it is read, also when a layer then fails.
 */
int strata_dir_verify(const char *dir, uint32_t *layers);
/* Remove the blobs no snapshot references, older than grace_s seconds (so
 * a capture or import still writing survives), stale staging files and
 * unused lazy layers; *freed (may be NULL) gets the bytes removed, and
 * strata_store_info's STRATA_STORE_INFO_GC_* the counts. STRATA_E_READ_ONLY; on failure what was removed stays
 * removed (it was garbage). */
int strata_store_gc(strata_store *st, unsigned grace_s, uint64_t *freed);
/*
 * Push snapshot ref of st and its ancestors to `reference`
 * (REGISTRY/REPOSITORY:TAG) with reg's settings (NULL: the defaults):
 * every blob the registry lacks, then the OCI manifests, then the
 * snapshot's working-set record (strata_sandbox_record_working_set), if
 * it has one, as a referrer of its manifest. Errors:
 * STRATA_E_BAD_REF, STRATA_E_NOT_FOUND, STRATA_E_MISSING, STRATA_E_NET,
 * STRATA_E_TLS, STRATA_E_AUTH, STRATA_E_HTTP, STRATA_E_DEADLINE; what the
 * registry received stays there (a retry skips it).
 */
int strata_store_push(strata_store *st, const strata_registry *reg, const char *ref, const char *reference);
/* The digest of the manifest st's last strata_store_push pushed ("sha256:"
 * and 64 hex digits, a NUL) into digest, also when only its working-set
 * record failed. STRATA_E_NOT_FOUND before one, or when the last one
 * pushed no manifest. */
#define STRATA_DIGEST_LEN 71
int strata_store_push_digest(strata_store *st, char digest[STRATA_DIGEST_LEN + 1]);
/* The repository ("host[:port]/name/space") snapshot ref of st was last
 * pulled from or pushed to into buf (len bytes, NUL-terminated;
 * STRATA_ORIGIN_LEN + 1 bytes hold any). STRATA_E_NOT_FOUND: ref names no
 * snapshot, or one made or imported here and never pushed or pulled;
 * -ERANGE if len is too small. */
#define STRATA_ORIGIN_LEN 512
int strata_store_origin(strata_store *st, const char *ref, char *buf, size_t len);
/*
 * Pull `reference` (REGISTRY/REPOSITORY:TAG or @sha256:DIGEST) and the
 * chain of its parents into st with reg's settings (NULL: the defaults),
 * every layer fetched whole and checked, tagged `tag` (NULL: untagged;
 * flags: STRATA_TAG_FORCE; STRATA_PULL_LAZY: the layers recorded with
 * their chunk indexes and sha256, no layer byte fetched, so that a
 * sandbox opened from it starts at once and fetches what it touches;
 * without it, a lazy snapshot already in st is completed from the same
 * registry; STRATA_PULL_PREFETCH with STRATA_PULL_LAZY: its working set
 * fetched ahead). The working-set record listed as a referrer of the
 * snapshot's manifest comes with it, linked to the snapshot; a missing or
 * bad record, or a prefetch that fails, does not fail the pull (what is
 * not fetched ahead is fetched on demand): STRATA_STORE_INFO_XFER_WS_*
 * and _PREFETCH_* say what was done. id (may be NULL) gets its id. Errors:
 * STRATA_E_BAD_REF, STRATA_E_REMOTE_MISSING, STRATA_E_NET, STRATA_E_TLS,
 * STRATA_E_AUTH, STRATA_E_HTTP, STRATA_E_DEADLINE, STRATA_E_FORMAT (not a
 * strata snapshot), STRATA_E_CORRUPT, STRATA_E_EXISTS, STRATA_E_READ_ONLY:
 * no snapshot is committed and the blobs it fetched are removed (kept,
 * with STRATA_PULL_KEEP_PARTIAL).
 */
int strata_store_pull(strata_store *st, const strata_registry *reg, const char *reference, const char *tag,
		      unsigned flags, char id[STRATA_ID_LEN + 1]);
/*
 * The registry settings st's lazy layers are fetched with (their chunks
 * go to the registry each was pulled from; reg NULL: the defaults). Must
 * come before the first lazy open of st: -EBUSY after. -ENOMEM.
 */
int strata_store_set_registry(strata_store *st, const strata_registry *reg);
/*
 * Why a page of st's lazy layers could not be had, for a host's SIGBUS
 * handler: a page of a lazy layer whose chunk cannot be fetched (the
 * registry unreachable after the retries, a chunk refused because it does
 * not match its index) reads as an error inside strata, but raises SIGBUS
 * in a thread of the host that touches it through a mapping (a call's
 * frame written into guest memory, the process backend copying a
 * snapshot's pages at restore). Copies the last reasons st's lazy layers'
 * server kept (at most 8 distinct lines, oldest first, each ending in
 * '\n') into buf, NUL-terminated and cut to len bytes;
 * STRATA_LAZY_ERRMSG_SIZE bytes hold them all. Returns the bytes written
 * without the NUL: 0 if no reason was kept (or st never served a lazy
 * layer); -EINVAL if st or buf is NULL or len 0 (buf untouched).
 * Async-signal-safe: it takes no lock, allocates nothing, makes no system
 * call and leaves strata_errmsg alone. st must stay open while a handler
 * may call it (clear the handler's pointer before strata_store_close).
 * Outside a handler too, e.g. after a call on a lazy snapshot failed.
 */
#define STRATA_LAZY_ERRMSG_SIZE 8193
int strata_store_lazy_errmsg(const strata_store *st, char *buf, size_t len);

/* ==== registry settings ==== */

/* Settings for talking to registries (the defaults: HTTPS with the
 * system's CAs, no credentials, no timeout). -ENOMEM; *out untouched. */
int strata_registry_new(strata_registry **out);
/* Free; accepts NULL. */
void strata_registry_free(strata_registry *reg);
/* Plain HTTP instead of HTTPS (on != 0), for a registry on loopback. Never fails. */
int strata_registry_set_plain_http(strata_registry *reg, int on);
/* The CA bundle file to trust (NULL: the system's), and whether to check
 * the certificate at all (verify 0: no, for a test registry). -ENOMEM. */
int strata_registry_set_tls(strata_registry *reg, const char *cacert, int verify);
/* Credentials (both NULL: anonymous); -EINVAL for one of them NULL, -ENOMEM. */
int strata_registry_set_credentials(strata_registry *reg, const char *user, const char *pass);
/* Give up a push or pull after `seconds` (0: no limit) with STRATA_E_DEADLINE. Never fails. */
int strata_registry_set_timeout(strata_registry *reg, unsigned seconds);
/*
 * Credentials asked per registry, instead of one pair for all: fn is
 * called with the registry's "host[:port]" when a connection to it opens
 * (from any thread, at once from several; in a lazy layers' helper
 * process too) and answers 0 with *user and *pass malloc'd (the library
 * frees them) or both NULL (anonymous), or < 0 (STRATA_E_AUTH, -ENOENT,
 * ...) with why (whylen bytes) saying what failed, which fails the push,
 * pull or fetch. fn NULL: strata_registry_set_credentials' pair again.
 * ctx must outlive reg's uses. Never fails.
 */
typedef int (*strata_credentials_fn)(void *ctx, const char *host, char **user, char **pass, char *why,
				     size_t whylen);
int strata_registry_set_credentials_fn(strata_registry *reg, strata_credentials_fn fn, void *ctx);
/* One directory of CAs (*.crt) and a client certificate (NAME.cert,
 * NAME.key) for every registry reached with reg, instead of the certs.d
 * roots below (NULL: the roots). Copied. -ENOMEM. */
int strata_registry_set_cert_dir(strata_registry *reg, const char *dir);
/* Per-registry certificate directories, as podman's certs.d: the roots
 * (NULL-terminated; NULL: none) under which ROOT/HOST[:PORT]/ holds
 * *.crt CAs and a client.cert/client.key pair for that registry; the first
 * root that has the registry's directory is used. Copied. -ENOMEM. */
int strata_registry_set_certs_dirs(strata_registry *reg, const char *const *roots);
/* A push's cross-repository mounts: a blob the target repository lacks is
 * first asked of `repository` (REPOSITORY, on the same registry; NULL:
 * none) by a mount request, then of the repositories the store last
 * pushed it to or pulled it from, and uploaded only where the registry
 * refuses (STRATA_STORE_INFO_XFER_WIRE_MOUNTS counts the mounts). Copied.
 * -ENOMEM. */
int strata_registry_set_mount_from(strata_registry *reg, const char *repository);

/* The bytes of the chunks a pushed layer's chunk index cuts it into (a
 * lazy pull fetches by them): a power of two from STRATA_CHUNK_MIN to
 * STRATA_CHUNK_MAX, or 0 for the default (65536). -EINVAL otherwise. */
#define STRATA_CHUNK_MIN 4096u
#define STRATA_CHUNK_MAX 16777216u
int strata_registry_set_chunk_size(strata_registry *reg, uint32_t bytes);
/* Push every config as a full strata manifest (on != 0), so that each
 * pushed artifact is complete on its own; by default a snapshot stored as
 * a delta of its parent is sent as that delta. Never fails. */
int strata_registry_set_whole_configs(strata_registry *reg, int on);
/* Annotations of the manifests a push sends, "KEY=VALUE" each
 * (NULL-terminated; NULL: none) beside org.opencontainers.image.created,
 * the snapshot's capture time. Copied. -EINVAL for an entry without '='
 * or with an empty key (reg unchanged), -ENOMEM. */
int strata_registry_set_annotations(strata_registry *reg, const char *const *annotations);
/* A line a push or pull reports without failing for it (a working-set
 * record that could not be taken, a prefetch that failed: what is not
 * fetched ahead is fetched on demand). fn NULL: none. Called on the
 * calling thread; ctx must outlive reg's uses. Never fails. */
typedef void (*strata_warning_fn)(void *ctx, const char *line);
int strata_registry_set_warning_fn(strata_registry *reg, strata_warning_fn fn, void *ctx);

/* A registry reference split: REGISTRY/REPOSITORY[:TAG|@sha256:DIGEST]. */
struct strata_reference {
	const char *host;       /* "host[:port]" */
	const char *repository; /* "name/space" */
	const char *tag;        /* NULL with a digest; "latest" if the reference names neither */
	const char *digest;     /* "sha256:<64 hex>" or NULL */
	char buf[1024];         /* what they point into */
};
/* Split reference into *out (the pointers into out->buf). STRATA_E_BAD_REF
 * (with the message) for anything else, a reference of 1024 bytes or
 * more included: *out untouched. */
int strata_reference_parse(const char *reference, struct strata_reference *out);
/* 1 if host is a registry host (HOST[:PORT]: a name with a '.',
 * "localhost" or an address, and PORT a number), else 0. */
int strata_reference_host_valid(const char *host);

/* What a transfer event is (strata_xfer_event.kind). */
enum {
	STRATA_XFER_BEGIN = 1,    /* a blob starts moving: size */
	STRATA_XFER_BYTES = 2,    /* done of its size bytes moved so far */
	STRATA_XFER_END = 3,      /* it moved whole and was checked */
	STRATA_XFER_SKIP = 4,     /* the other side had it */
	STRATA_XFER_MANIFEST = 5, /* a manifest was written (push) or read (pull) */
};
/* What the blob is to the snapshot (strata_xfer_event.blob). */
enum {
	STRATA_BLOB_LAYER = 1,
	STRATA_BLOB_CONFIG = 2,
	STRATA_BLOB_CHUNK_INDEX = 3,
	STRATA_BLOB_MANIFEST = 4, /* a snapshot manifest kept as a blob (a delta's parent) */
};
/* One event of a push or pull. Made by the library, valid during the
 * callback only; later versions may add fields at the end (size says how
 * many bytes of it there are). */
struct strata_xfer_event {
	size_t size;        /* sizeof(struct strata_xfer_event) of the library */
	int kind;           /* STRATA_XFER_* */
	int blob;           /* STRATA_BLOB_* */
	/* "sha256:<64 hex>" of the blob or manifest; NULL for a BYTES event
	 * of a registry upload (it is the blob begun last) */
	const char *digest;
	uint64_t total;     /* the blob's size */
	uint64_t done;      /* its bytes moved so far (BEGIN: those a resumed pull had) */
	uint32_t index, count; /* the blob's index and the blobs of the transfer */
};
typedef void (*strata_progress_fn)(void *ctx, const struct strata_xfer_event *ev);
/* Progress of the pushes and pulls made with reg: fn (NULL: none) is
 * called on the calling thread for each event, in order, and must not
 * call into the store the transfer uses. ctx must outlive reg's uses.
 * Never fails. */
int strata_registry_set_progress(strata_registry *reg, strata_progress_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif

#endif
