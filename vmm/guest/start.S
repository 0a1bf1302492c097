/* start.S: guest entry (_start, CPL 3), CPL 0 exception stubs and the strata ELF note. */
#include "vmm/abi.h"

	.section .text.start, "ax"
	.globl _start
_start:
	/* The host enters here at CPL 3 with RSP at the top of the stack. */
	xorl %ebp, %ebp
	call strata_main
	ud2

/*
 * Exception stubs, one per vector 0-31, STRATA_ISR_STRIDE bytes apart, named
 * by the note. This host never runs them: its IDT points at stubs it writes
 * itself, which do the same (docs/guest-abi.md). They stay so that a guest
 * built with this SDK still runs on earlier hosts, which point the IDT here:
 * push an error code where the CPU did not, push the vector, and report the
 * frame to the host with one `out`. The host never resumes a faulted guest.
 */
	.text
	.balign STRATA_ISR_STRIDE
	.globl strata_isr_base
strata_isr_base:
	.set vec, 0
	.rept 32
	.balign STRATA_ISR_STRIDE
	/* Vectors with a CPU error code: 8, 10-14, 17, 21, 29, 30 (SDM Vol. 3A 6.15). */
	.if (vec == 8) || (vec >= 10 && vec <= 14) || (vec == 17) || (vec == 21) || (vec == 29) || (vec == 30)
	.else
	pushq $0
	.endif
	pushq $vec
	jmp isr_common
	.set vec, vec + 1
	.endr

isr_common:
	movq %rsp, %rax
	movw $STRATA_PORT_EXCEPTION_NUM, %dx
	outl %eax, %dx
1:	hlt
	jmp 1b

/* The note that makes this ELF a strata guest (read by vmm/elf.c). */
	.section .note.strata, "a"
	.balign 4
	.long 7                 /* namesz: "strata\0" */
	.long 16                /* descsz: struct strata_note */
	.long STRATA_NOTE_TYPE
	.asciz "strata"
	.balign 4
	.long STRATA_ABI_VERSION
	.long STRATA_ISR_STRIDE
	.quad strata_isr_base

	.section .note.GNU-stack, "", @progbits
