/* proc_stub.S: the process backend's child stub: reports each guest exit to the host (and stops), and puts back what it asks for. */
#include "vmm/proc/proc_abi.h"
#include "vmm/abi.h"

#define SYS_rt_sigreturn 15
#define SYS_getppid 110
#define SYS_prctl 157
#define SYS_arch_prctl 158
#define ARCH_SET_FS 0x1002
#define SYS_tgkill 234
#define SIGSTOP 19
#define SYS_exit_group 231
#define PR_SET_DUMPABLE 4
#define FP_XSTATE_MAGIC1 0x46505853

/*
 * Part of the child program (proc_child.c, linked at PROC_BASE). After
 * stub_lock has locked the child down, its seccomp filter lets system
 * calls through from two instructions only: the stub's stop (`stop`, only
 * tgkill(self, self, SIGSTOP)) and `sys` (every other call the stub makes).
 */
	.text
	.globl _start, vmm_proc_stub_handler
	.globl vmm_proc_stub_restorer, vmm_proc_stub_sys_ret, vmm_proc_stub_stop_ret, vmm_proc_stub_ready
_start:
	/* The kernel's initial stack: argc, argv..., envp..., auxv (proc_child.c). */
	movq %rsp, %rdi
	andq $-16, %rsp
	call stub_main
	/* Off the kernel's stack (stub_lock unmaps it): the signal stack's top,
	 * which the first report then overwrites. */
	movq %rax, %rdi
	movabsq $PROC_END, %rsp
	call stub_lock
vmm_proc_stub_ready:
	ud2             /* the first report: the host sees the child ready */

sys:
	syscall
vmm_proc_stub_sys_ret:
	ret

vmm_proc_stub_restorer:
	movl $SYS_rt_sigreturn, %eax
	jmp sys

/* handler(signo, siginfo, ucontext) on the signal stack, every signal blocked. */
vmm_proc_stub_handler:
	cld
	movq %rsi, %r13
	movq %rdx, %r12
	movabsq $PROC_CTL, %rbx
	movq %r12, CTL_UC(%rbx)
	leaq UC_GREGS(%r12), %rsi
	leaq CTL_GREGS(%rbx), %rdi
	movl $NGREGS, %ecx
	rep movsq
	movq UC_FPREGS(%r12), %rsi
	testq %rsi, %rsi
	jz 1f
	leaq CTL_FX(%rbx), %rdi
	movl $64, %ecx
	rep movsq
1:	movq %r13, %rsi
	leaq CTL_SI(%rbx), %rdi
	movl $6, %ecx
	rep movsq
	/* The stub runs from here to its end with every signal blocked, so a
	 * signal taken there interrupted code a guest jumped into with its
	 * own signal mask: most of all, a stop it made itself, resumed with
	 * its kick pending. Signal 0 makes that a bad report (the child is
	 * replaced): resumed, the stub would go on with the guest's registers. */
	movq UC_GREGS+16*8(%r12), %rax  /* the interrupted RIP (REG_RIP) */
	leaq vmm_proc_stub_handler(%rip), %rcx
	subq %rcx, %rax
	cmpq $(stub_end - vmm_proc_stub_handler), %rax
	jae handover
	movl $0, CTL_SI(%rbx)
handover:
	/* Stop: the host works only on a stopped child (waitid WSTOPPED), so
	 * nothing in the child can run while it reads or writes guest memory;
	 * it resumes us with SIGCONT. */
	movabsq $PROC_CTL, %rbx
	movl $STATE_HOST, CTL_STATE(%rbx)
stop:
	movq CTL_PID(%rbx), %rdi        /* our pid (= tid: one thread) */
	movq %rdi, %rsi
	movl $SIGSTOP, %edx
	movl $SYS_tgkill, %eax
	syscall
vmm_proc_stub_stop_ret:
	/* Resumed (SIGCONT). A guest can jump to the `syscall` above with its
	 * own registers and stop itself too, so nothing from here on depends
	 * on a register: the stack and the frame are the words the host wrote
	 * into the control page before it resumed us (the frame of the first
	 * report, on the signal stack, which a restore rewrites whole). */
	movabsq $PROC_CTL, %rbx
	movq CTL_SP(%rbx), %rsp
	cld
	/* End if the host is gone (reparented), else see what it wants. */
	movl $SYS_getppid, %eax
	call sys
	movabsq $PROC_CTL, %rbx
	cmpq CTL_HOSTPID(%rbx), %rax
	je 5f
	movl $1, %edi
	movl $SYS_exit_group, %eax
	call sys
5:	movq CTL_UC(%rbx), %r12
	movl CTL_STATE(%rbx), %eax
	cmpl $STATE_LOCK, %eax
	je lock
	cmpl $STATE_GUEST, %eax
	jne stop
	/* Resume with the host's registers and FPU state. */
	leaq CTL_GREGS(%rbx), %rsi
	leaq UC_GREGS(%r12), %rdi
	movl $NGREGS, %ecx
	rep movsq
	movq UC_FPREGS(%r12), %rdx
	testq %rdx, %rdx
	jz 2f
	leaq CTL_FX(%rbx), %rsi
	movq %rdx, %rdi
	movl $52, %ecx          /* 416 bytes: x87, MXCSR, XMM0-15; the frame's bytes after stay */
	rep movsq
	cmpl $FP_XSTATE_MAGIC1, 464(%rdx)
	jne 2f
	orq $3, 512(%rdx)       /* XSTATE_BV: x87 and SSE come from the image (a restore set it to exactly 3) */
2:	/* After a restore, the fs and gs bases the host gives (no signal frame
	 * holds them) and null selectors: wrfsbase/wrgsbase where user code
	 * can write the bases (AT_HWCAP2 FSGSBASE); elsewhere the guest can
	 * change fs base only by loading a selector (base 0), and arch_prctl
	 * puts it back (the filter allows it with exactly the thread block's
	 * address). */
	movl CTL_FSGS(%rbx), %eax
	testl $FSGS_LOAD, %eax
	jz 3f
	xorl %ecx, %ecx
	movl %ecx, %fs
	movl %ecx, %gs
	testl $FSGS_HAVE, %eax
	jz 4f
	movq CTL_FSBASE(%rbx), %rax
	wrfsbase %rax
	movq CTL_GSBASE(%rbx), %rax
	wrgsbase %rax
	jmp 5f
4:	movl $ARCH_SET_FS, %edi
	movq CTL_FSBASE(%rbx), %rsi
	movl $SYS_arch_prctl, %eax
	call sys
	movabsq $PROC_CTL, %rbx
5:	andl $FSGS_HAVE, CTL_FSGS(%rbx)
3:	ret

lock:
	/* Not dumpable from here on: the host has taken what needs it
	 * (its pagemap, maps and userfaultfd handles). */
	movl $PR_SET_DUMPABLE, %edi
	xorl %esi, %esi
	movl $SYS_prctl, %eax
	call sys
	movq %rax, CTL_RESULT(%rbx)
	jmp handover
stub_end:


	.section .note.GNU-stack, "", @progbits
