/* proc_abi.h: the process backend's child layout and control page, shared by proc.c and proc_stub.S. */
#ifndef STRATA_VMM_PROC_ABI_H
#define STRATA_VMM_PROC_ABI_H

/*
 * The child holds nothing of the host: it is a small program of its own
 * (proc_child.c, proc_stub.S) whose code, control pages and stacks live at
 * PROC_BASE, far above guest memory (< 4 GiB).
 */
#define PROC_BASE 0x7e0000000000  /* above ASan's shadow (ends 0x10007fff8000), below where libraries load */
#define PROC_CODE PROC_BASE                   /* the child program (proc_child.c) is linked here */
#define PROC_CTL (PROC_BASE + 0x100000)       /* control pages, shared with the host */
#define PROC_CTL_SIZE 0x2000
#define PROC_STACK_LO (PROC_BASE + 0x104000)  /* words: the host's pid, the child's */
#define PROC_ALT_LO (PROC_BASE + 0x108000)    /* signal stack: every report runs here */
#define PROC_END (PROC_BASE + 0x120000)
#define PROC_TASK_TOP 0x7ffffffff000

/* Control page offsets. */
#define CTL_STATE 0     /* u32: what the stopped child is to do when resumed */
#define CTL_NOPS 4      /* u32 ops to run in STATE_OPS */
#define CTL_WP 8        /* u32 set by the child: its guest range is write-tracked */
#define CTL_GREGS 64    /* ucontext gregs[23] of the last report; written back on resume */
#define CTL_SI 256      /* first 48 bytes of the report's siginfo */
#define CTL_FX 512      /* FXSAVE image (512 bytes); bytes 0-415 written back on resume */
#define CTL_OPS 1024    /* ops: 8 words each: nr, 6 arguments, result */
#define CTL_OP_SIZE 64
#define CTL_OPS_MAX ((PROC_CTL_SIZE - CTL_OPS) / CTL_OP_SIZE)

#define STATE_HOST 0    /* the stub is stopped in its signal handler, reporting */
#define STATE_GUEST 1   /* resume the guest with CTL_GREGS / CTL_FX */
#define STATE_OPS 2     /* run the ops, then report again */

/* struct ucontext (x86-64): mcontext gregs and fpregs pointer. */
#define UC_GREGS 40
#define UC_FPREGS 224
#define NGREGS 23

#endif
