/* proc_stub.S: the process backend's child stub: reports each guest exit to the host (and stops) and runs the host's ops. */
#include "vmm/proc_abi.h"
#include "vmm/abi.h"

#define SYS_mmap 9
#define SYS_munmap 11
#define SYS_rt_sigreturn 15
#define SYS_getppid 110
#define SYS_tgkill 234
#define SIGSTOP 19
#define SYS_exit_group 231
#define FP_XSTATE_MAGIC1 0x46505853

/*
 * Part of the child program (proc_child.c, linked at PROC_BASE). After
 * stub_main has locked the child down, every system call goes through
 * `sys`, the one instruction its seccomp filter lets through.
 */
	.text
	.globl _start, vmm_proc_stub_handler
	.globl vmm_proc_stub_restorer, vmm_proc_stub_sys_ret, vmm_proc_stub_ready
_start:
	/* The kernel's initial stack: argc, argv..., envp... (proc_child.c). */
	movq %rsp, %rdi
	andq $-16, %rsp
	call stub_main
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
handover:
	/* Stop: the host works only on a stopped child (waitid WSTOPPED), so
	 * nothing in the child can run while it reads or writes guest memory;
	 * it resumes us with SIGCONT. */
	movl $STATE_HOST, CTL_STATE(%rbx)
stop:
	movabsq $PROC_STACK_LO, %rcx
	movq 8(%rcx), %rdi              /* our pid (= tid: one thread) */
	movq %rdi, %rsi
	movl $SIGSTOP, %edx
	movl $SYS_tgkill, %eax
	call sys
	/* Resumed: end if the host is gone (reparented), else see what it wants. */
	movl $SYS_getppid, %eax
	call sys
	movabsq $PROC_STACK_LO, %rcx
	cmpq (%rcx), %rax
	je 5f
	movl $1, %edi
	movl $SYS_exit_group, %eax
	call sys
5:	movl CTL_STATE(%rbx), %eax
got:
	cmpl $STATE_OPS, %eax
	je ops
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
	movl $52, %ecx          /* 416 bytes: x87, MXCSR, XMM0-15; the kernel's bytes after stay */
	rep movsq
	cmpl $FP_XSTATE_MAGIC1, 464(%rdx)
	jne 2f
	orq $3, 512(%rdx)       /* XSTATE_BV: x87 and SSE come from the image */
2:	ret

ops:
	movl CTL_NOPS(%rbx), %r14d
	cmpl $CTL_OPS_MAX, %r14d
	jbe 3f
	movl $CTL_OPS_MAX, %r14d
3:	leaq CTL_OPS(%rbx), %r15
4:	testl %r14d, %r14d
	jz handover
	movq 0(%r15), %rax
	movq 8(%r15), %rdi
	movq 16(%r15), %rsi
	movq 24(%r15), %rdx
	movq 32(%r15), %r10
	movq 40(%r15), %r8
	movq 48(%r15), %r9
	call sys
	movq %rax, 56(%r15)
	addq $CTL_OP_SIZE, %r15
	decl %r14d
	jmp 4b


	.section .note.GNU-stack, "", @progbits
