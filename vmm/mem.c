/* mem.c: the one checked translator from guest addresses to host pointers. */
#include "vmm/vmm_int.h"

void *vmm_mem_translate(uint8_t *mem, uint64_t lo, uint64_t hi, uint64_t gpa, uint64_t len)
{
	/* Overflow-safe: never compute gpa + len before knowing it fits. */
	if (lo > hi || gpa < lo || gpa > hi || len > hi - gpa)
		return NULL;
	return mem + gpa;
}
