/* vmm.h: strata's micro-VMM: sandboxes (KVM or a process) that run functions of a freestanding guest ELF. */
#ifndef STRATA_VMM_VMM_H
#define STRATA_VMM_VMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/*
 * Caveats (docs/library.md, docs/vmm.md):
 * - Conventions: functions that can fail return 0 or a negative code
 *   (VMM_E_* or -errno; vmm_strerror names both, and store codes too).
 *   Out-parameters are written only on success; a failed setter changes
 *   nothing. With a struct vmm_error *err, a failure fills it with the code
 *   and a one-line message. Nothing here prints or exits.
 * - Threads: a sandbox runs one call at a time (VMM_E_BUSY otherwise);
 *   calls on different sandboxes run in parallel. vmm_sandbox_kill and
 *   vmm_host_* are safe from any thread; everything else on one sandbox
 *   wants one thread at a time. A pool's get and put are thread-safe.
 * - Fork: a forked child must not use sandboxes, hosts or pools of the
 *   parent (their VMs, children and descriptors are the parent's); it may
 *   create new ones. Guest memory is mapped MAP_PRIVATE or MAP_SHARED as
 *   the backend needs, and a fork copies those mappings as any fork does.
 * - Signals: SIGRTMIN+1 is installed (no SA_RESTART) at the first call and
 *   sent to the calling thread to stop KVM_RUN for kills and timeouts
 *   (timer_create per call with a timeout): leave it alone. The process
 *   backend's children report by stopping (waitid through their pidfd,
 *   WSTOPPED), so a SIGCHLD handler runs at every guest exit. A host that
 *   reaps any child (waitpid(-1), SIGCHLD set to SIG_IGN) may reap one
 *   that ended: its report stays right (the pidfd keeps how it ended,
 *   Linux 6.15; older kernels say it was reaped elsewhere), but a
 *   waitpid(-1, WUNTRACED) would take its stops. Children are started by
 *   one thread of the library's, kept for the process's life with every
 *   signal blocked: each dies with the host process (PR_SET_PDEATHSIG,
 *   kill -9 included), not with the thread that made its sandbox, so any
 *   thread may call a sandbox made on a thread that has ended. SIGUSR1,
 *   SIGSTOP and SIGCONT go to the children only. The process's first
 *   vmm_host_new on the kvm backend (or AUTO) starts one short-lived,
 *   detached thread that opens /dev/kvm and reads its CPUID, then ends
 *   (pthread_atfork handlers keep a fork meanwhile safe).
 * - Caches, each with its limit: a host's idle VM shells and warm
 *   sandboxes (vmm_host_config: 8 and 8 by default, at most 1024 and 64),
 *   and the parsed manifests (8) and private layer copies (32, 256 MiB in
 *   all) of the snapshot directories opened with it, and its open mount
 *   table (vmm_host_config.snapdir_*, vmm_snapdir_caches_drop); per
 *   process, the descriptors probed once (/dev/kvm, /proc/self/pagemap, the
 *   process backend's child program). Nothing else is kept between calls.
 * - Keep alive: a host until every sandbox and pool made with it is freed
 *   (vmm_host_free says -EBUSY before); a pool's open/ctx for the pool's
 *   life; a manifest and opener only during the call that takes them (a
 *   sandbox keeps its own mappings: a snapshot directory handle may be
 *   closed, its files deleted); argument buffers for the call only.
 */

/* Guest-physical address (identity-mapped: also the guest-virtual address). */
typedef uint64_t vmm_gpa_t;

/* Error codes: the vmm range -1200..-1299 (plus -errno and the store's codes);
 * st_strerror (vmm_strerror is the same function) names every code strata returns. */
enum {
	VMM_E_POISONED = -1200,       /* an earlier guest error poisoned the sandbox */
	VMM_E_GUEST_FAULT = -1201,    /* CPU exception in the guest: vector, rip, fault address */
	VMM_E_STACK_OVERFLOW = -1202, /* guest touched its stack guard page */
	VMM_E_ABORT = -1203,          /* guest called strata_abort(): code, message */
	VMM_E_BAD_HYPERCALL = -1204,  /* guest broke the ABI: bad port, pointer or record */
	VMM_E_TIMEOUT = -1205,        /* the call ran past its timeout */
	VMM_E_CANCELLED = -1206,      /* vmm_sandbox_kill() stopped the call */
	VMM_E_SHUTDOWN = -1207,       /* triple fault: the vCPU shut down */
	VMM_E_BAD_ELF = -1208,        /* not a valid x86-64 strata guest ELF (message says why) */
	VMM_E_ABI = -1209,            /* guest built for another ABI version */
	VMM_E_NO_FUNCTION = -1210,    /* no guest function by that name */
	VMM_E_BAD_ARGS = -1211,       /* arguments do not match the function's signature */
	VMM_E_GUEST_ERROR = -1212,    /* the guest function returned an error (not poisoning) */
	VMM_E_TOO_BIG = -1213,        /* arguments or result do not fit the buffers */
	VMM_E_NO_KVM = -1214,         /* /dev/kvm missing or unusable */
	VMM_E_BAD_CONFIG = -1215,     /* sizes out of range */
	VMM_E_UNEXPECTED_EXIT = -1216,/* the vCPU stopped for a reason the VMM does not handle */
	VMM_E_BAD_ADDRESS = -1217,    /* guest accessed an address outside its memory */
	VMM_E_BUSY = -1218,           /* a call is already running on this sandbox */
	VMM_E_KVM_DENIED = -1219,     /* /dev/kvm exists but this user may not open it */
	VMM_E_KVM_UNBOUND = -1220,    /* a kvm module is loaded but gave no /dev/kvm */
	VMM_E_KVM_API = -1221,        /* /dev/kvm is not KVM, or speaks another API version */
	VMM_E_KERNEL_OLD = -1222,     /* the kernel is older than strata (or a mechanism) needs */
	VMM_E_NO_BACKEND = -1223,     /* the backend asked for cannot run here (message says why) */
};

/*
 * Where guest code runs (docs/vmm.md, "Backends"; docs/security.md).
 *
 * Caveats of the process backend: each sandbox has a child process of the
 * host, started by a thread the library keeps for the process's life: the
 * child is killed when the host process ends (PR_SET_PDEATHSIG), whichever
 * thread made or calls its sandbox. The host waits for its children
 * through their pidfds (waitid WSTOPPED), so a SIGCHLD handler is called
 * at every guest exit; a host's waitpid(-1) or SIGCHLD set to SIG_IGN may
 * reap a child that ended, and the report still names how (Linux 6.15).
 * It uses SIGUSR1 inside the child only.
 */
enum vmm_backend_kind {
	VMM_BACKEND_AUTO = 0,    /* KVM when /dev/kvm opens, else the process backend */
	VMM_BACKEND_KVM = 1,     /* a one-vCPU KVM virtual machine */
	VMM_BACKEND_PROCESS = 2, /* a child process with a seccomp filter, no KVM needed */
};

struct vmm_host;

/* A guest log line's level: strata_log's first argument (above DEBUG: DEBUG). */
enum vmm_log_level {
	VMM_LOG_ERROR = 0,
	VMM_LOG_WARN = 1,
	VMM_LOG_INFO = 2,
	VMM_LOG_DEBUG = 3,
};

/* Sizes; 0 in any field means the default. docs/vmm.md gives the limits. */
struct vmm_config {
	/* 0: what the guest's ELF declares (STRATA_GUEST_HEAP,
	 * docs/guest-abi.md), else 128 KiB / 64 KiB. Nonzero wins over the
	 * declaration, smaller or larger. */
	uint64_t heap_size;
	uint64_t stack_size;
	uint64_t input_size;   /* default 16 KiB: call frame + arguments */
	uint64_t output_size;  /* default 16 KiB: result frame + result */
	uint64_t timeout_ns;   /* per call; 0 = none */
	/* Guest log lines (strata_log) go here; NULL drops them. */
	void (*log)(void *ctx, enum vmm_log_level level, const char *msg, size_t len);
	void *log_ctx;
	/* Where the sandbox runs; AUTO (the default): its host's backend
	 * (vmm_host_config.backend), as vmm_backend_resolve says. */
	enum vmm_backend_kind backend;
	/* The host whose caches and settings the sandbox uses (vmm_host_new);
	 * NULL: none (vmm_host_default), so nothing is cached and the reset
	 * policy is the defaults. The host must outlive the sandbox. */
	struct vmm_host *host;
};

#define VMM_DEFAULT_HEAP (128ull << 10)
#define VMM_DEFAULT_STACK (64ull << 10)
#define VMM_DEFAULT_IO (16ull << 10)

/* Typed values: arguments and results. */
enum vmm_type {
	VMM_VOID = 0,
	VMM_I64 = 1,
	VMM_BYTES = 2,
	VMM_STR = 3,
};

/* An argument. For BYTES/STR, `data`/`len` are borrowed for the call only. */
struct vmm_value {
	enum vmm_type type;
	int64_t i64;
	const void *data;
	size_t len;
};

/* Most parameters of a function (guest or host), longest function name. */
#define VMM_MAX_PARAMS 8u
#define VMM_NAME_MAX 63u

/*
 * A function's type: its result (any vmm_type; VMM_VOID: none) and its
 * parameters' types in order (VMM_I64, VMM_BYTES or VMM_STR; entries past
 * nparams are ignored). host_add(i64, i64) -> i64 is
 *     { .ret = VMM_I64, .nparams = 2, .params = { VMM_I64, VMM_I64 } }
 */
struct vmm_signature {
	enum vmm_type ret;
	unsigned nparams;
	enum vmm_type params[VMM_MAX_PARAMS];
};

/* A result. For BYTES/STR `data` is malloc'd (STR NUL-terminated) and owned
 * by the caller: free it with vmm_result_clear(). */
struct vmm_result {
	enum vmm_type type;
	int64_t i64;
	void *data;
	size_t len;
};

/* The size of vmm_error.message: room for a guest's whole error message (up
 * to 4096 bytes: vmm/abi.h's STRATA_MSG_MAX, a Lua error's traceback) and
 * the host's words around it. */
#define VMM_MESSAGE_MAX 4352

/* What went wrong in the last failed call or creation. */
struct vmm_error {
	int code;              /* VMM_E_* or -errno; 0 none */
	uint32_t vector;       /* GUEST_FAULT/STACK_OVERFLOW: exception vector */
	uint64_t error_code;   /* the exception's error code */
	uint64_t rip;          /* guest instruction pointer */
	uint64_t fault_addr;   /* #PF: CR2; BAD_ADDRESS: the address */
	int64_t abort_code;    /* ABORT: the guest's code */
	uint32_t port;         /* BAD_HYPERCALL: the port */
	char message[VMM_MESSAGE_MAX];  /* plain words, always NUL-terminated */
};

struct vmm_sandbox;

/* A host function the guest may call by name. Fill *ret (for BYTES/STR point
 * data at memory that stays valid until the callback returns). Return 0, or
 * <0 to report failure to the guest (it is not poisoned). */
typedef int (*vmm_host_fn_cb)(void *ctx, const struct vmm_value *args, size_t nargs,
			      struct vmm_value *ret);

/*
 * Create a sandbox from a guest ELF at `path` (or in memory with
 * vmm_sandbox_new_mem; the bytes are not kept). Runs the guest's init at CPL 3
 * until it reports ready. cfg may be NULL (defaults). On failure returns <0,
 * *out untouched, and if `err` is not NULL fills it with the details.
 */
int vmm_sandbox_new(const char *path, const struct vmm_config *cfg,
		    struct vmm_sandbox **out, struct vmm_error *err);
int vmm_sandbox_new_mem(const void *elf, size_t size, const struct vmm_config *cfg,
			struct vmm_sandbox **out, struct vmm_error *err);
/* Free; accepts NULL. No call may be running. With a host, a healthy
 * sandbox may be kept warm, or leave its VM as a shell (vmm_host_config);
 * either way the caller owns nothing of it afterwards. */
void vmm_sandbox_free(struct vmm_sandbox *sb);

/*
 * Register host function `name` (1..VMM_NAME_MAX bytes) of type *sig
 * (copied), or replace the one of that name. A guest's call is checked
 * against sig (arity, each argument's type) before cb runs, and cb's
 * result must have type sig->ret. Errors, each with err (if not NULL)
 * saying which: -EINVAL for a NULL, empty or longer name, a NULL sig, a
 * ret that is no vmm_type, nparams over VMM_MAX_PARAMS, a parameter that
 * is VMM_VOID or no vmm_type, or a NULL cb; VMM_E_BUSY while a call runs
 * (a host function cannot register another); -ENOMEM. On failure the
 * sandbox's host functions are as before.
 */
int vmm_sandbox_register(struct vmm_sandbox *sb, const char *name, const struct vmm_signature *sig,
			 vmm_host_fn_cb cb, void *ctx, struct vmm_error *err);

/*
 * Call guest function `fn` with `args`. On success fills *res. On failure
 * returns <0 and vmm_sandbox_error() says more. Guest faults, aborts, bad
 * hypercalls, timeouts and kills poison the sandbox: later calls fail with
 * VMM_E_POISONED until a restore succeeds or it is freed. VMM_E_GUEST_ERROR,
 * NO_FUNCTION, BAD_ARGS and TOO_BIG do not poison. One call at a time.
 */
int vmm_sandbox_call(struct vmm_sandbox *sb, const char *fn, const struct vmm_value *args,
		     size_t nargs, struct vmm_result *res);
/* Like vmm_sandbox_call with a per-call timeout (0: the config's). */
int vmm_sandbox_call_timeout(struct vmm_sandbox *sb, const char *fn, const struct vmm_value *args,
			     size_t nargs, uint64_t timeout_ns, struct vmm_result *res);

/* Stop the running call (if any) from any thread; it fails with
 * VMM_E_CANCELLED and poisons the sandbox. Returns 1 if a call was
 * interrupted, 0 if none ran (nothing changes then). */
int vmm_sandbox_kill(struct vmm_sandbox *sb);

/*
 * Write an ELF core file of the guest at `path` (created, mode 0600) that
 * `gdb GUEST.elf PATH` opens: its registers (NT_PRSTATUS, NT_FPREGSET) as
 * the guest left them at the last call's exception (rax and rdx are the
 * exception stub's on the kvm backend), else as the vCPU is now (an abort,
 * a timeout), and all guest memory as one PT_LOAD at guest virtual address
 * 0 (the guest maps itself one to one; zero pages are holes). Meant after
 * a failed call; VMM_E_BUSY while a call runs, -errno from the file.
 */
int vmm_sandbox_core(struct vmm_sandbox *sb, const char *path, struct vmm_error *err);

/* Details of the sandbox's last error (valid until the next call). */
const struct vmm_error *vmm_sandbox_error(const struct vmm_sandbox *sb);
bool vmm_sandbox_poisoned(const struct vmm_sandbox *sb);

/* The guest's functions: count, then name and type of function i (both
 * pointers valid for the sandbox's life). -ENOENT past the count. */
unsigned vmm_sandbox_function_count(const struct vmm_sandbox *sb);
int vmm_sandbox_function(const struct vmm_sandbox *sb, unsigned i, const char **name,
			 const struct vmm_signature **sig);

/* Guest memory as one host range (for capture/restore and tests), every
 * page of it writable by the caller and seen by the guest as written. */
void vmm_sandbox_memory(struct vmm_sandbox *sb, uint8_t **mem, uint64_t *size);

/*
 * Can this process run KVM sandboxes? 0 if so. Otherwise the reason, each
 * with its own code and a message in err (if not NULL) naming the cause and
 * what to do: VMM_E_NO_KVM (no /dev/kvm, no kvm module), VMM_E_KVM_UNBOUND
 * (a kvm module is loaded but registered no /dev/kvm: no hardware support,
 * or a nested host that refuses to bind), VMM_E_KVM_DENIED (permission),
 * VMM_E_KVM_API (not a KVM device, or another API version),
 * VMM_E_KERNEL_OLD (older than VMM_KERNEL_MIN_*). Probes once per process;
 * later calls cost nothing. Thread-safe.
 */
int vmm_kvm_check(struct vmm_error *err);
/* 0 if the process backend can run sandboxes here (memfd_create and
 * seccomp filters), else VMM_E_NO_BACKEND with why in err (may be NULL). */
int vmm_process_check(struct vmm_error *err);

/* The oldest kernel strata supports (docs/restore.md: what each fallback needs). */
#define VMM_KERNEL_MIN_MAJOR 5
#define VMM_KERNEL_MIN_MINOR 10

/*
 * How written guest pages are found (docs/restore.md): PAGEMAP_SCAN (Linux
 * 6.7+, one ioctl returns runs of them) or, where the kernel lacks it,
 * reading /proc/self/pagemap entries (present, file and exclusive-mapping
 * bits: any supported kernel). AUTO is the first that works here, unless
 * the policy file's `dirty` line names one.
 */
enum vmm_dirty_mech {
	VMM_DIRTY_AUTO = 0,
	VMM_DIRTY_SCAN = 1,
	VMM_DIRTY_READ = 2,
};
/* What AUTO means in this process (SCAN or READ) in *out, found once and
 * kept. VMM_E_NO_PAGEMAP if neither works here (err says why, if not
 * NULL; *out untouched). */
int vmm_dirty_mechanism(enum vmm_dirty_mech *out, struct vmm_error *err);
/* "auto", "pagemap-scan" or "pagemap-read". */
const char *vmm_dirty_name(enum vmm_dirty_mech mech);

/*
 * The reset policy (docs/restore.md): how a restore puts written pages
 * back. A host holds one (vmm_host_config.policy) that its sandboxes start
 * with; vmm_sandbox_set_reset and _set_dirty override it per sandbox.
 * `strata calibrate` measures this machine and writes it as a policy file
 * (vmm_policy_write); vmm_policy_read reads one back.
 */
enum vmm_reset_mode {
	VMM_RESET_REWRITE = 0, /* compare written pages with the snapshot, rewrite what differs, keep resident */
	VMM_RESET_DROP = 1,    /* MADV_DONTNEED every page of its own: the next call faults them back */
};
#define VMM_POLICY_KEEP_MAX 255u          /* keep_restores: 1..255 */
#define VMM_POLICY_IDLE_MAX (1u << 30)     /* idle_cap: 1..2^30 pages */
struct vmm_policy {
	enum vmm_reset_mode mode;
	enum vmm_dirty_mech dirty; /* how written pages are found (AUTO: the best this kernel has) */
	unsigned keep_restores;  /* REWRITE: drop a page unchanged for this many restores */
	unsigned range_cap;      /* most ranges per snapshot before a capture compacts (1..ST_MANIFEST_MAX_RANGES) */
	unsigned idle_cap;       /* REWRITE: more unchanged resident pages than this in one restore: drop them all */
	char source[256];        /* where it came from: "defaults" or the file's path */
};
/* A measurement `strata calibrate` records beside the policy: a line
 * "measured_NAME = VALUE" (NAME: letters, digits, '_'). */
struct vmm_policy_note {
	const char *name;
	double value;
};
/* The defaults (docs/restore.md gives the measurements behind them). */
void vmm_policy_defaults(struct vmm_policy *p);
/*
 * Read a policy file of "key = value" lines (reset, keep_restores,
 * idle_cap, range_cap, dirty; measured_* and x-* lines are kept for people
 * and ignored) over the defaults. On success fills *p (source = path). On
 * failure *p is untouched and why (if not NULL) names the file and, for a
 * malformed file (VMM_E_BAD_POLICY), the line: -errno (cannot open or
 * read), VMM_E_BAD_POLICY.
 */
int vmm_policy_read(const char *path, struct vmm_policy *p, char *why, size_t whylen);
/*
 * Write p as a policy file at `path` (that vmm_policy_read reads back as
 * p), with the notes as measured_* lines: the whole file or nothing (a
 * temporary beside it, synced, renamed over it). The directory must exist.
 * -EINVAL for a p out of range or a bad note name; -errno with why.
 */
int vmm_policy_write(const char *path, const struct vmm_policy *p, const struct vmm_policy_note *notes,
		     size_t nnotes, char *why, size_t whylen);
/* One line: "reset = ..., keep_restores = ..., idle_cap = ..., range_cap = ...,
 * dirty = ... (from SOURCE)". */
void vmm_policy_describe(const struct vmm_policy *p, char *buf, size_t len);

/* The backend a sandbox runs on (never AUTO). */
enum vmm_backend_kind vmm_sandbox_backend(const struct vmm_sandbox *sb);
/* "auto", "kvm" or "process"; and back (-EINVAL on anything else). */
const char *vmm_backend_name(enum vmm_backend_kind kind);
int vmm_backend_parse(const char *name, enum vmm_backend_kind *out);
/*
 * The backend a sandbox made with `host` (NULL: the default host,
 * vmm_host_default) and vmm_config.backend `want` runs on: `want`
 * unless it is AUTO; else the host's vmm_host_config.backend unless that is
 * AUTO (or there is no host); else KVM if /dev/kvm opens (vmm_kvm_check),
 * else PROCESS. Never AUTO. It does not say the backend works here:
 * creation does (VMM_E_NO_BACKEND, with why). Thread-safe.
 */
enum vmm_backend_kind vmm_backend_resolve(const struct vmm_host *host, enum vmm_backend_kind want);

void vmm_result_clear(struct vmm_result *res);
/* st_strerror under the vmm's name. */
const char *vmm_strerror(int code);

/* ==== snapshots (capture, restore; vmm/capture.c reset.c restore.c dirty.c policy.c) ==== */
/* Error codes of the snapshot files: -1250..-1269 of the vmm range. */
enum {
	VMM_E_NO_SNAPSHOT = -1250,   /* the sandbox has no snapshot to restore to */
	VMM_E_BAD_SNAPSHOT = -1251,  /* manifest inconsistent with this VMM (message says why) */
	VMM_E_LEAK = -1252,          /* debug check: a page or register differs from the snapshot after restore */
	VMM_E_BAD_POLICY = -1253,    /* malformed policy file */
	VMM_E_NO_PAGEMAP = -1254,    /* the kernel lacks PAGEMAP_SCAN (Linux 6.7+) */
	VMM_E_STALE = -1255,         /* rebase with a manifest that is not the pending capture */
	VMM_E_FOREIGN = -1256,       /* an in-memory snapshot of another sandbox (or of this one's earlier life) */
};

struct st_store;
struct st_manifest;

/* Opens layer `id` read-only into *fd; ctx is the caller's. Return 0 or
 * -errno. */
typedef int (*vmm_layer_open_fn)(void *ctx, const st_id *id, int *fd);
/* Ready-made openers: ctx is a struct st_store * / a snapshot directory path. */
int vmm_layer_open_store(void *ctx, const st_id *id, int *fd);
int vmm_layer_open_dir(void *ctx, const st_id *id, int *fd);

/* Counters (kvm_pvm makes every exit and fault expensive: count them). */
struct vmm_snap_stats {
	uint64_t restores, captures;
	uint64_t scan_ioctls;        /* PAGEMAP_SCAN calls */
	uint64_t pages_scanned;      /* pages of their own found by scans */
	uint64_t pages_rewritten;    /* restore: copied/zeroed in place */
	uint64_t pages_dropped;      /* restore: given back (MADV_DONTNEED) */
	uint64_t madvise_calls;
	uint64_t maps;               /* mmap calls of layer ranges */
	uint64_t pages_captured;     /* pages written to new layers */
	uint64_t compactions;
};

/*
 * Capture the sandbox into `st`: the pages whose content differs from the
 * sandbox's current snapshot (guest and host writes; all-zero pages become
 * holes) go into one new layer blob (durable per the store's policy), and
 * *out gets the full manifest (ranges overlaying the parent's, every layer,
 * parent id, vCPU state, guest description, created now). Nothing is
 * committed to an index: the caller does that, then calls
 * vmm_sandbox_rebase. On failure nothing changes in the sandbox (a layer
 * blob may remain in the store unreferenced; gc reclaims it). Not while a
 * call runs; a poisoned sandbox cannot be captured.
 */
int vmm_sandbox_capture(struct vmm_sandbox *sb, struct st_store *st, struct st_manifest **out);
/* Make the sandbox run on the manifest `m` returned by its last capture,
 * whose id is `id` (as ix_snap_commit or st_manifest_id gave it; verified only in debug mode): pages it wrote now come from the new
 * layer (shared, copy-on-write) and the next capture is incremental. m stays
 * the caller's. VMM_E_STALE if m is not the pending capture. */
int vmm_sandbox_rebase(struct vmm_sandbox *sb, const struct st_manifest *m, const st_id *id);

/* Restore in place to the current snapshot: exactly the pages that differ
 * are put back, and the vCPU state; a poisoned sandbox becomes usable.
 * Needs a snapshot (VMM_E_NO_SNAPSHOT: a sandbox made from an ELF and never
 * captured) and no running call (VMM_E_BUSY). On any other failure the
 * sandbox keeps its poison, if it had one, and its memory may be partly
 * restored: restore again or free it. VMM_E_LEAK (debug mode) comes after
 * a complete restore that the check found wrong. */
int vmm_sandbox_restore(struct vmm_sandbox *sb);
/* Restore in place to another snapshot of the same guest layout: remaps only
 * the ranges that differ (same memory slot), then as vmm_sandbox_restore. */
int vmm_sandbox_restore_to(struct vmm_sandbox *sb, const struct st_manifest *m, vmm_layer_open_fn open,
			   void *ctx);

/*
 * New sandbox from a snapshot manifest: validates it against this VMM (ABI
 * version, memory size and layout, vCPU state), maps every range of every
 * layer MAP_PRIVATE (no copy: pages fault in on first touch), loads the
 * vCPU. Layers come from `open` (vmm_layer_open_store / _dir). cfg may give
 * timeout and log; sizes, if set, must match the snapshot's. err as
 * vmm_sandbox_new.
 */
int vmm_sandbox_from_snapshot(const struct st_manifest *m, vmm_layer_open_fn open, void *ctx,
			      const struct vmm_config *cfg, struct vmm_sandbox **out, struct vmm_error *err);

/*
 * The working set of the sandbox's snapshot (docs/workingset.md): the layer
 * pages it touched (read or written, by the guest or the host) since
 * vmm_sandbox_from_snapshot made it, as a record of that snapshot (named
 * by its id, vmm_sandbox_snapshot_id). Call it once the first call has
 * returned. Zero pages (in no layer) are not part of it; pages the
 * kernel mapped beside a touched one (fault-around) are
 * (docs/workingset.md measures how many). *mapped (may be NULL) gets the
 * guest pages found mapped. VMM_E_NO_SNAPSHOT if the sandbox was not made
 * from a snapshot or was restored or captured since, or came warm from
 * its host (record with a host that keeps no warm sandboxes,
 * vmm_host_limits_set): its mappings no longer say what a start touches. VMM_E_NO_PAGEMAP where the page tables cannot be read. *out is
 * the caller's (st_ws_free).
 */
struct st_ws;
int vmm_sandbox_working_set(struct vmm_sandbox *sb, struct st_ws **out, uint64_t *mapped);

/* Debug mode: after every restore compare all guest memory and the vCPU
 * (vmm_sandbox_check) with the snapshot; a difference fails the restore
 * with VMM_E_LEAK. A new sandbox starts with its host's
 * vmm_host_config.debug. */
void vmm_sandbox_set_debug(struct vmm_sandbox *sb, bool on);
/* Compare all guest memory with the current snapshot, then, on the kvm
 * backend, every register the guest can reach (general, flags, segments
 * with fs/gs base, control registers, the whole XSAVE image: x87, SSE,
 * AVX, AVX-512): 0, or VMM_E_LEAK with the first differing guest page in
 * *gpage (may be NULL; UINT64_MAX for a register) and the sandbox's error
 * naming it (vmm_sandbox_error). Meant right after a restore: a call
 * since changes registers. */
int vmm_sandbox_check(struct vmm_sandbox *sb, uint64_t *gpage);
/* Override this sandbox's reset policy (it starts with its host's):
 * `mode`, and `keep` = restores an unchanged page stays resident (1..255;
 * 0: unchanged). -EINVAL on a mode or keep out of range, -ENOMEM; nothing
 * changes then. */
int vmm_sandbox_set_reset(struct vmm_sandbox *sb, enum vmm_reset_mode mode, unsigned keep);
/* Find this sandbox's written pages with `mech` from now on (to compare the
 * mechanisms, or to test a fallback on a new kernel). VMM_E_NO_PAGEMAP if
 * it does not work here (nothing changes then). */
int vmm_sandbox_set_dirty(struct vmm_sandbox *sb, enum vmm_dirty_mech mech);
/* Counters since creation. */
void vmm_sandbox_snap_stats(struct vmm_sandbox *sb, struct vmm_snap_stats *out);
/* Id of the current snapshot (false if none, or if it is an in-memory
 * snapshot: no store has it). */
bool vmm_sandbox_snapshot_id(struct vmm_sandbox *sb, st_id *id);

/*
 * In-memory snapshots (vmm/memsnap.c, docs/restore.md): a restore point
 * with no store, index or file.
 *
 * vmm_sandbox_snapshot_mem takes one of the sandbox as it is now: what a
 * capture into a store would record (every guest page, and the vCPU's
 * user-mode state: general registers, rip, flags, x87/SSE; the rest is
 * rebuilt at restore), with the pages that differ from its current
 * snapshot copied into a sealed anonymous memfd and the current
 * snapshot's layers for the rest. The sandbox then runs on it (it is its
 * current snapshot: vmm_sandbox_restore goes back to it, and the next
 * restore puts back only pages written since). *out is the caller's
 * (vmm_memsnap_free). VMM_E_BUSY during a call, VMM_E_POISONED on a
 * poisoned sandbox, -ENOMEM or -errno of the memfd; nothing changes then.
 * A pending capture (vmm_sandbox_capture without its rebase) is dropped.
 *
 * vmm_sandbox_restore_mem makes the sandbox exactly that point again,
 * memory and vCPU, as vmm_sandbox_restore does for its current snapshot
 * (and it is that when snap is the current one); another of its in-memory
 * snapshots costs the remapping of the ranges that differ as well, as
 * vmm_sandbox_restore_to. A poisoned sandbox becomes usable. Its host
 * functions stay registered. VMM_E_FOREIGN (nothing changes) for a
 * snapshot of another sandbox, or of this one before a host kept it warm
 * (vmm_sandbox_free); VMM_E_BUSY during a call; other failures as
 * vmm_sandbox_restore_to's.
 *
 * A snapshot stays valid, whatever the sandbox does, until its last
 * reference is dropped (vmm_memsnap_ref adds one; vmm_memsnap_free drops
 * one, accepts NULL), even after the sandbox is freed; the sandbox keeps
 * its own hold on the snapshot it runs on. Both are thread-safe: a
 * snapshot may be restored by one thread while another drops a reference
 * of its own (each holding one). vmm_sandbox_capture of a sandbox on an in-memory snapshot
 * stores every page it maps (the new manifest's layers are all in the
 * store; its parent is the store snapshot the in-memory one was taken on).
 */
struct vmm_memsnap;
int vmm_sandbox_snapshot_mem(struct vmm_sandbox *sb, struct vmm_memsnap **out);
int vmm_sandbox_restore_mem(struct vmm_sandbox *sb, const struct vmm_memsnap *snap);
struct vmm_memsnap *vmm_memsnap_ref(struct vmm_memsnap *snap);
void vmm_memsnap_free(struct vmm_memsnap *snap);
/* Guest pages the snapshot keeps in memfd layers (its own, and those of the
 * in-memory snapshots it was taken on); the rest it shares with the store
 * snapshot below them, or are zero. 0 for NULL. */
uint64_t vmm_memsnap_pages(const struct vmm_memsnap *snap);

/* ==== end snapshots ==== */

/* ==== snapshot directories and pools (vmm/snapdir.c, vmm/pool.c) ==== */
/* vmm_snapdir_open flags. */
enum {
	VMM_SNAPDIR_VERIFY = 1u << 0,   /* hash every layer before it is mapped */
	VMM_SNAPDIR_VIA_FUSE = 1u << 1, /* on a strata mount, map the FUSE files, not the backing blobs */
	VMM_SNAPDIR_MAP_FILES = 1u << 2, /* plain directory: map its files as they are (the caller
					  * promises they are never truncated) instead of a private copy */
};
struct vmm_snapdir;

/*
 * Open a snapshot directory (NAME/manifest.json + NAME/layers/<id>: a strata
 * mount's snapshots/NAME, an export or a plain copy): read and validate the
 * manifest, open every layer and check its size, and hash each with
 * VMM_SNAPDIR_VERIFY. The store does the opening (st_snapdir_open, store.h,
 * with host's snapshot-directory cache; host NULL: the default host's, and
 * with no host nothing is kept); the VMM maps the descriptors it gets.
 * On a strata mount (a FUSE mount whose
 * /proc/self/mountinfo entry is strata's) each layer is reached through its
 * backing blob in the store behind that mount (the mount's
 * user.strata.blob_path or user.strata.restore xattr; never trusted
 * elsewhere, docs/security.md) unless
 * VMM_SNAPDIR_VIA_FUSE: the faster path, and sandboxes keep running if the
 * mount daemon dies. Any other layer (a plain directory's, or a mount's whose
 * backing blob cannot be opened) is copied once into sealed private memory
 * (shared by every handle opened with the same host while the file is unchanged), so
 * truncating the user's
 * files or killing a daemon cannot fault a running sandbox, unless
 * VMM_SNAPDIR_MAP_FILES or VMM_SNAPDIR_VIA_FUSE ask to map the files
 * themselves (docs/restore-from-path.md). The handle keeps the layer
 * files open; a sandbox made from it keeps its own mappings and may outlive
 * it. Errors: -ENOENT, -ENOTDIR, -ENOTCONN (stale mount), VMM_E_BAD_SNAPSHOT
 * (bad manifest, short or corrupted layer); err->message says which.
 */
int vmm_snapdir_open(struct vmm_host *host, const char *path, unsigned flags, struct vmm_snapdir **out,
		     struct vmm_error *err);
void vmm_snapdir_close(struct vmm_snapdir *d);
const struct st_manifest *vmm_snapdir_manifest(const struct vmm_snapdir *d);
/* Layers opened through their backing blob; whether the directory is on a strata mount. */
unsigned vmm_snapdir_direct_layers(const struct vmm_snapdir *d);
bool vmm_snapdir_on_mount(const struct vmm_snapdir *d);
/* A vmm_layer_open_fn over an open snapshot directory (ctx: struct vmm_snapdir *). */
int vmm_snapdir_layer_open(void *ctx, const st_id *id, int *fd);
/* vmm_sandbox_from_snapshot from an open snapshot directory. */
int vmm_sandbox_from_snapdir(const struct vmm_snapdir *d, const struct vmm_config *cfg, struct vmm_sandbox **out,
			     struct vmm_error *err);

#define VMM_POOL_MAX 100000u
struct vmm_pool;
/*
 * N sandboxes restored from one snapshot. They share the snapshot's pages
 * (MAP_PRIVATE layer mappings over one page cache); each costs what it
 * writes plus fixed overhead. open/ctx must stay valid for the pool's life.
 * Every one starts from the same memory, so they share the guest's random
 * state (a seeded PRNG, keys made at init): give each call its own seed or
 * nonce if that matters. On failure nothing is left (the sandboxes made so
 * far are freed), *out untouched.
 */
int vmm_pool_new(const struct st_manifest *m, vmm_layer_open_fn open, void *ctx, const struct vmm_config *cfg,
		 unsigned n, struct vmm_pool **out, struct vmm_error *err);
void vmm_pool_free(struct vmm_pool *p);
unsigned vmm_pool_size(const struct vmm_pool *p);
struct vmm_sandbox *vmm_pool_at(const struct vmm_pool *p, unsigned i);
/* Take an idle sandbox (-EAGAIN if all are out, *out untouched); thread-safe. */
int vmm_pool_get(struct vmm_pool *p, struct vmm_sandbox **out);
/* Give it back: restored in place to the snapshot (the pool's, also when
 * its user moved it onto an in-memory one; replaced by a fresh one if that
 * fails), then idle again; thread-safe. -EINVAL if it is not this
 * pool's or not checked out (nothing changes). If the restore and the
 * replacement both fail, it stays checked out, still the caller's, and
 * the replacement's error is returned. */
int vmm_pool_put(struct vmm_pool *p, struct vmm_sandbox *sb);
/* Forget the private copies and parsed manifests that host keeps for snapshot
 * directories (NULL: the default host's; docs/restore-from-path.md);
 * sandboxes using them are not affected. */
void vmm_snapdir_caches_drop(struct vmm_host *host);
/* ==== end snapshot directories and pools ==== */

/* ==== the host (vmm/host.c) ==== */
/*
 * A host owns what the sandboxes made with it share, the way an LMDB env
 * owns its readers: the caches below, each with its limit, and the reset
 * policy and debug mode new sandboxes start with. A program makes one (or
 * one per group of sandboxes that should share caches), names it in
 * vmm_config.host for every sandbox and pool, and frees it last. Sandboxes
 * made without a host (host NULL) share nothing and cache nothing.
 *
 * - Idle VM shells (KVM backend): a freed, healthy sandbox leaves its VM,
 *   vCPU and memory slot (its guest range wiped) for the host's next sandbox
 *   of the same memory size, which skips VM creation and slot registration.
 *   Each holds two descriptors and address space without pages. At the
 *   limit the one kept longest makes room.
 * - Warm sandboxes: a freed, healthy sandbox whose snapshot is known and
 *   that holds at most 4 MiB of pages of its own is restored to it and kept;
 *   vmm_sandbox_from_snapshot of a manifest with the same content whose
 *   layers open to the very same files gets it back, ready, with none of its
 *   last user's host functions, error or kill request
 *   (docs/restore-from-path.md). Each holds its descriptors, its mappings
 *   and up to 4 MiB; on the process backend, a child process too.
 */
#define VMM_HOST_SHELLS_MAX 1024u
#define VMM_HOST_WARM_MAX 64u
struct vmm_host_config {
	unsigned shells;  /* idle VM shells kept, 0..VMM_HOST_SHELLS_MAX (0: none) */
	unsigned warm;    /* warm sandboxes kept, 0..VMM_HOST_WARM_MAX (0: none) */
	const struct vmm_policy *policy; /* copied; NULL: vmm_policy_defaults */
	bool debug;       /* new sandboxes check every restore (vmm_sandbox_set_debug) */
	/* Where its sandboxes and pools run unless their vmm_config.backend
	 * names one; AUTO (the default): the machine decides
	 * (vmm_backend_resolve). */
	enum vmm_backend_kind backend;
	/* What vmm_snapdir_open keeps for this host's handles: parsed manifests
	 * and private copies of plain-copy layers, and the copies' bytes in
	 * all (a larger layer is never kept). 0s: keep none. */
	unsigned snapdir_manifests, snapdir_copies;
	uint64_t snapdir_copy_bytes;
};
/* What vmm_host_new(NULL) uses: 8 shells, 8 warm sandboxes
 * (docs/restore-from-path.md measures what they save), default policy,
 * backend AUTO. */
void vmm_host_config_defaults(struct vmm_host_config *cfg);
/* Make a host. cfg NULL: the defaults. VMM_E_BAD_CONFIG (a limit, the
 * policy or the backend out of range, err says which) or -ENOMEM; *out untouched then. */
int vmm_host_new(const struct vmm_host_config *cfg, struct vmm_host **out, struct vmm_error *err);
/* Free the host and everything it keeps. -EBUSY, and nothing changes, if a
 * sandbox or pool made with it is not freed yet. Accepts NULL (0). */
int vmm_host_free(struct vmm_host *h);
/* Change both limits at once; what is kept beyond them is freed now.
 * VMM_E_BAD_CONFIG over the maxima (nothing changes). Thread-safe. */
int vmm_host_limits_set(struct vmm_host *h, unsigned shells, unsigned warm);
struct vmm_host_stats {
	unsigned shells, shells_max;  /* kept now, limit */
	unsigned warm, warm_max;
	unsigned sandboxes;           /* made with the host and not freed (warm ones not counted) */
};
/* A consistent view of the counts. Thread-safe. */
void vmm_host_stats(struct vmm_host *h, struct vmm_host_stats *out);
/* The policy new sandboxes of this host start with. */
const struct vmm_policy *vmm_host_policy(const struct vmm_host *h);
/* The host of sandboxes whose vmm_config.host is NULL: none unless
 * strata's own programs set one (an internal call, vmm_int.h). */
struct vmm_host *vmm_host_default(void);
/* ==== end host ==== */

#endif
