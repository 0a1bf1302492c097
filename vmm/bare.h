/* bare.h: the benchmark VM (floors), for strata-bench only: not installed, not in libstrata. */
#ifndef STRATA_VMM_BARE_H
#define STRATA_VMM_BARE_H

/*
 * Floor measurement: a bare VM whose guest is one hypercall instruction in
 * a loop. Each vmm_bare_run is one KVM_RUN round trip (or, for the process
 * modes, one exit and resume of a child). Built into its own static library
 * (vmm/meson.build: vmm_bare_dep) that only tests/bench links.
 */
enum vmm_bare_mode {
	VMM_BARE_CPL3_MMIO,  /* CPL 3 store into the hypercall page (what guests use) */
	VMM_BARE_CPL0_OUT,   /* CPL 0 `out` */
	VMM_BARE_CPL3_INT3,  /* CPL 3 `int3` into a CPL 0 stub doing `out; iretq` */
	VMM_BARE_CPL3_GP,    /* CPL 3 `out` faulting (#GP) into a CPL 0 stub doing the `out` */
	VMM_BARE_PROCESS,    /* the process backend: the same store, one exit and resume of its child */
	VMM_BARE_PTRACE,     /* for comparison: a ptraced child's faulting store, stopped and resumed */
};
struct vmm_bare;
int vmm_bare_new(enum vmm_bare_mode mode, struct vmm_bare **out);
int vmm_bare_run(struct vmm_bare *b);
void vmm_bare_free(struct vmm_bare *b);

#endif
