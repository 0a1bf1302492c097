/* proc_abi.h: the process backend's child layout and control page, shared by proc.c and proc_stub.S. */
#ifndef STRATA_VMM_PROC_ABI_H
#define STRATA_VMM_PROC_ABI_H

/*
 * The child holds nothing of the host: it is a small program of its own
 * (proc_child.c, proc_stub.S) whose code, control pages and signal stack
 * live at PROC_BASE, far above guest memory (< 4 GiB). Once it is locked
 * down, the only pages it can write are guest memory and two shared ones
 * the host rewrites on every restore: the control pages (the memfd at
 * mem_size) and the signal stack (the memfd after them). The startup stack
 * (the kernel's) is unmapped, and the program has no data of its own.
 */
/* 256 GiB: far above guest memory (< 4 GiB) and in the same 512 GiB as it,
 * so the child's page tables need one upper-level table for both, not two
 * (docs/restore-from-path.md, "Density"). The child is a program of its own (nothing of
 * the host's, ASan's shadow included, is in its address space). */
#define PROC_BASE 0x4000000000
#define PROC_CODE PROC_BASE                   /* the child program (proc_child.c) is linked here */
#define PROC_CTL (PROC_BASE + 0x100000)       /* control pages, shared with the host (memfd at mem_size) */
#define PROC_CTL_SIZE 0x2000
#define PROC_STACK_LO (PROC_BASE + 0x104000)  /* nothing is mapped here (a stack of older versions) */
#define PROC_ALT_LO (PROC_BASE + 0x108000)    /* signal stack: every report runs here (memfd after the control pages) */
#define PROC_ALT_SIZE 0x4000
#define PROC_END (PROC_ALT_LO + PROC_ALT_SIZE)
#define PROC_SHARED_SIZE (PROC_CTL_SIZE + PROC_ALT_SIZE) /* the memfd's bytes past guest memory */
#define PROC_TASK_TOP 0x7ffffffff000

/* Control page offsets. Everything here is guest-writable while the guest
 * runs: the host reads it only as input and rewrites all of it on restore. */
#define CTL_STATE 0     /* u32: what the stopped child is to do when resumed */
#define CTL_NOPS 4      /* u32: protection runs the child applies at startup */
#define CTL_WP 8        /* u32 set by the child: its guest range is write-tracked */
#define CTL_FSGS 12     /* u32: FSGS_* */
#define CTL_HOSTPID 16  /* u64: the host's pid (the stub's parent) */
#define CTL_PID 24      /* u64: the child's pid (= tid: one thread) */
#define CTL_FSBASE 32   /* u64: fs base loaded with FSGS_LOAD (STRATA_TLS_GPA) */
#define CTL_GSBASE 40   /* u64: gs base loaded with FSGS_LOAD where FSGS_HAVE (0) */
#define CTL_UC 48       /* u64: the report's ucontext; the host writes the frame to resume through before every SIGCONT */
#define CTL_RESULT 56   /* u64: what STATE_LOCK's prctl returned */
#define CTL_GREGS 64    /* ucontext gregs[23] of the last report; written back on resume */
#define CTL_SP 248      /* u64: the stack the stub resumes on (written by the host before every SIGCONT) */
#define CTL_SI 256      /* first 48 bytes of the report's siginfo */
#define CTL_FX 512      /* FXSAVE image (512 bytes); bytes 0-415 written back on resume */
#define CTL_RUNS 1024   /* startup protection runs: 3 words each (address, length, PROT_*) */
#define CTL_RUN_SIZE 24
#define CTL_RUNS_MAX ((PROC_CTL_SIZE - CTL_RUNS) / CTL_RUN_SIZE)
/* A run's third word: PROT_* in its low 3 bits; with RUN_SHARED, the run is
 * instead mapped read-only (MAP_SHARED) from fd 5, a file of the snapshot
 * the child cannot write, at the page offset in the bits from RUN_OFF_SHIFT
 * up: one copy of those pages for every sandbox of the snapshot. */
#define RUN_SHARED 8
#define RUN_OFF_SHIFT 12
#define PROC_SHARED_FD 5

#define FSGS_HAVE 1     /* the CPU and kernel let user code write fs/gs base (AT_HWCAP2 FSGSBASE) */
#define FSGS_LOAD 2     /* load CTL_FSBASE/CTL_GSBASE (wrfsbase) or CTL_FSBASE (arch_prctl) on the next resume (a restore) */

#define STATE_HOST 0    /* the stub is stopped in its signal handler, reporting */
#define STATE_GUEST 1   /* resume the guest with CTL_GREGS / CTL_FX */
#define STATE_LOCK 2    /* make the child non-dumpable, then report again */

/* struct ucontext (x86-64, the kernel's): mcontext gregs and fpregs pointer;
 * the signal frame's siginfo follows it. */
#define UC_GREGS 40
#define UC_FPREGS 224
#define UC_SIZE 304
#define NGREGS 23

#endif
