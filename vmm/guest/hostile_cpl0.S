/* hostile_cpl0.S: the CPL 0 hostile guest's entry, its own exception stubs (which do CPL 0 work and iretq back) and its note (tests/snap/test_hostile_cpl0.c). */
#include "vmm/abi.h"

/*
 * This replaces the SDK's start.S. Its note names stubs of its own: were
 * the IDT to point at them, every exception from CPL 3 would run this
 * code at CPL 0. A stub drops the CPU's error code where there is one,
 * resumes at the address the caller left in %r10 (past the instruction
 * that trapped) and does the work %r11 names:
 *   0  DR0 += 1, %rax = DR0        (a counter no restore puts back)
 *   1  KERNEL_GS_BASE += 1, %rax = the new value
 *   2  %rax = CR0                  (proof of CPL 0 by itself)
 * then iretq to CPL 3. hostile_cpl0.c triggers them.
 */
	.section .text.start, "ax"
	.globl _start
_start:
	xorl %ebp, %ebp
	call strata_main
	ud2

	.text
	.balign STRATA_ISR_STRIDE
hostile_isr_base:
	.set vec, 0
	.rept 32
	.balign STRATA_ISR_STRIDE
	/* Vectors with a CPU error code: 8, 10-14, 17, 21, 29, 30 (SDM Vol. 3A 6.15). */
	.if (vec == 8) || (vec >= 10 && vec <= 14) || (vec == 17) || (vec == 21) || (vec == 29) || (vec == 30)
	addq $8, %rsp
	.endif
	jmp hostile_cpl0_work
	.set vec, vec + 1
	.endr

hostile_cpl0_work:
	movq %r10, (%rsp)          /* the interrupt frame's rip */
	cmpq $1, %r11
	je 1f
	cmpq $2, %r11
	je 2f
	movq %dr0, %rax
	incq %rax
	movq %rax, %dr0
	iretq
1:	movl $0xc0000102, %ecx     /* IA32_KERNEL_GS_BASE */
	rdmsr
	shlq $32, %rdx
	orq %rdx, %rax
	incq %rax
	movq %rax, %rdx
	shrq $32, %rdx
	wrmsr
	iretq
2:	movq %cr0, %rax
	iretq

	.section .note.strata, "a"
	.balign 4
	.long 7
	.long 16
	.long STRATA_NOTE_TYPE
	.asciz "strata"
	.balign 4
	.long STRATA_ABI_VERSION
	.long STRATA_ISR_STRIDE
	.quad hostile_isr_base

	.section .note.GNU-stack, "", @progbits
