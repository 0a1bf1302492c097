/* backend.h: the seam between the VMM and where guest code runs (KVM or a traced child process). */
#ifndef STRATA_VMM_BACKEND_H
#define STRATA_VMM_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vmm/vmm.h"

struct vmm_sandbox;
struct vmm_vcpu_state;
struct vmm_exit;
struct vmm_runs;

/*
 * One backend: guest memory, the vCPU state and the run loop's one step.
 * Everything above it (loading, calls, hypercalls, snapshots) is shared:
 * both backends give the same guest the same memory image at the same
 * guest addresses, and report the same exits.
 */
struct vmm_backend {
	enum vmm_backend_kind kind;
	const char *name;  /* vmm_backend_name's, and what vmm_backend_parse and --backend take */
	/* 0 if it can run here, else <0 with why in err (may be NULL). */
	int (*check)(struct vmm_error *err);
	/* Begin, on a thread of its own, the one-time work a process's first
	 * sandbox on this backend waits for (KVM: /dev/kvm opened, its CPUID
	 * read), so that it overlaps what the program does before its first
	 * sandbox (opening and verifying a snapshot). Once per process; what
	 * it finds is what check and start would find. NULL: nothing to do. */
	void (*prepare)(void);
	/* What the error of a sandbox that asked for it and cannot have it
	 * adds in parentheses: chosen by name (hint), or by AUTO (auto_hint:
	 * AUTO chose it because none before it in vmm/backend.c's list runs). */
	const char *hint, *auto_hint;
	/* Guest memory of sb->mem_size bytes at sb->mem, all zero. *ready: it
	 * came with a VM that needs no start_memory (a recycled shell). */
	int (*mem_new)(struct vmm_sandbox *sb, bool *ready);
	/* Make guest memory (page tables written) runnable: create the VM or
	 * the child. err gets the reason on failure. */
	int (*start)(struct vmm_sandbox *sb, bool ready, struct vmm_error *err);
	/* Free the backend's parts and guest memory (a healthy sandbox may
	 * leave them to a cache). Accepts a sandbox whose start failed. */
	void (*destroy)(struct vmm_sandbox *sb);
	/* Could the sandbox run (its VM or child exists)? */
	bool (*live)(const struct vmm_sandbox *sb);
	int (*set_state)(struct vmm_sandbox *sb, const struct vmm_vcpu_state *st);
	/* set_state for a restore; may defer the work to the next run. */
	int (*stage_state)(struct vmm_sandbox *sb, const struct vmm_vcpu_state *st);
	int (*get_state)(struct vmm_sandbox *sb, struct vmm_vcpu_state *st);
	/* Debug check, after a restore to snapshot state st: does everything
	 * outside guest memory that the guest can reach equal the snapshot's?
	 * On kvm the vCPU (registers, fs/gs base, the whole vector state); on
	 * the process backend the child (its mappings and writable pages, the
	 * registers it resumes with, fs/gs base). 0, VMM_E_LEAK with why naming
	 * what differs, or <0. NULL: nothing but guest memory can hold state. */
	int (*check_state)(struct vmm_sandbox *sb, const struct vmm_vcpu_state *st, char *why, size_t whylen);
	int (*get_cr2)(struct vmm_sandbox *sb, uint64_t *cr2);
	/* Run until the next exit. VMM_EXIT_INTR: interrupted (kick, signal,
	 * or a wait slice ended); the guest may still be running. */
	int (*run)(struct vmm_sandbox *sb, struct vmm_exit *ex);
	/* Ask a running step to return VMM_EXIT_INTR soon. Async-signal-safe. */
	void (*kick)(struct vmm_sandbox *sb, bool on);
	/* After a call ended with the guest still running (timeout, kill): stop it. */
	void (*halt)(struct vmm_sandbox *sb);
	/* Guest pages that may differ from the snapshot mapped there: guest
	 * and host writes (clears *out first; counts scans in *ioctls). */
	int (*dirty_scan)(struct vmm_sandbox *sb, struct vmm_runs *out, unsigned *ioctls);
	/* Guest pages the guest or host touched since guest memory was mapped
	 * (vmm_touched_scan; clears *out first). */
	int (*touched_scan)(struct vmm_sandbox *sb, struct vmm_runs *out);
	/* Memory equals the snapshot again (a reset just made it so). */
	void (*dirty_clear)(struct vmm_sandbox *sb);
	/* Make guest pages [gpage, gpage + n) read as pages [lpage, lpage + n)
	 * of layer file fd (fd < 0: as zero). random: fd is a lazy layer's
	 * file on a mount, whose faults must not read around (docs/lazy.md). */
	int (*map_pages)(struct vmm_sandbox *sb, uint64_t gpage, uint64_t n, int fd, uint64_t lpage, bool random);
	/* Guest page `gpage` for reading without side effects: a pointer into
	 * guest memory or into buf (NULL on error). NULL op: sb->mem directly. */
	const uint8_t *(*page_read)(struct vmm_sandbox *sb, uint64_t gpage, uint8_t *buf);
	/* Make every page at sb->mem writable by the host and seen so by the
	 * guest (the process backend maps pages the guest cannot write from
	 * the snapshot's file, read-only, until then). <0: the sandbox cannot
	 * be trusted any more. NULL op: they are already. */
	int (*mem_own)(struct vmm_sandbox *sb);
	/* Snapshot pages are mapped copy-on-write and a written page is a
	 * private copy a reset may drop (KVM); else memory is shared and a
	 * reset only rewrites (process). */
	bool private_pages;
};

extern const struct vmm_backend vmm_backend_kvm;
extern const struct vmm_backend vmm_backend_process;

/* The backend of that kind (vmm/backend.c's list), NULL for AUTO or unknown. */
const struct vmm_backend *vmm_backend_of(enum vmm_backend_kind kind);
/* Run the prepare of the backend a host of that kind uses (AUTO: the
 * first AUTO checks), if it has one: vmm_host_new calls it. */
void vmm_backend_prepare(enum vmm_backend_kind kind);
/* "auto, kvm or process" (every name vmm_backend_parse takes) in buf. */
const char *vmm_backend_names(char *buf, size_t len);

/* The backend for a sandbox of `host` (already resolved; NULL: none) that
 * asks for `want`, as vmm_backend_resolve says; VMM_E_NO_BACKEND with the
 * reason (naming the other backend) in err. */
struct vmm_host;
int vmm_backend_pick(const struct vmm_host *host, enum vmm_backend_kind want, const struct vmm_backend **out,
		     struct vmm_error *err);

/* ---- the process backend (proc.c) ---- */

/* Can this machine run the process backend? 0, or <0 with why. */
int vmm_proc_probe(char *why, size_t whylen);
/* How the child ended, in words ("exited with code 120", "was killed by
 * signal 31 (SYS)"), from a wait status as VMM_EXIT_DEAD's reason has it
 * (-1: unknown, the host reaped it on a kernel that keeps no status). */
const char *vmm_proc_end_str(int status, char *buf, size_t len);

#endif
