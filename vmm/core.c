/* core.c: an ELF core file of a guest (registers and memory) that gdb opens beside the guest ELF. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/procfs.h>
#include <unistd.h>

#include "store/sys.h"
#include "vmm/backend.h"
#include "vmm/vmm_int.h"

/* One note: the header, the name "CORE" padded to 4 bytes, the payload. */
struct core_note {
	Elf64_Nhdr hdr;
	char name[8];
};

static size_t note_put(uint8_t *at, uint32_t type, const void *desc, size_t len)
{
	struct core_note n = { .hdr = { .n_namesz = 5, .n_descsz = (Elf64_Word)len, .n_type = type }, .name = "CORE" };

	memcpy(at, &n, sizeof(n));
	memcpy(at + sizeof(n), desc, len);
	return sizeof(n) + ((len + 3) & ~(size_t)3);
}

/* The signal a Linux process would have got for the failure: gdb says it. */
static int core_signal(const struct vmm_error *e)
{
	if (e->code != VMM_E_GUEST_FAULT && e->code != VMM_E_STACK_OVERFLOW)
		return SIGABRT;
	switch (e->vector) {
	case VMM_X86_VEC_DE: return SIGFPE;
	case VMM_X86_VEC_UD: return SIGILL;
	case 1: case 3: return SIGTRAP;
	default: return SIGSEGV;
	}
}

static void prstatus_fill(const struct vmm_vcpu_state *st, int sig, struct elf_prstatus *ps)
{
	/* struct user_regs_struct's order (sys/user.h), from ours (rax rbx rcx rdx rsi rdi rsp rbp r8..r15). */
	static const unsigned from_gpr[] = { 15, 14, 13, 12, 7, 1, 11, 10, 9, 8, 0, 2, 3, 4, 5 };
	elf_greg_t *r = ps->pr_reg;

	memset(ps, 0, sizeof(*ps));
	ps->pr_info.si_signo = sig;
	ps->pr_cursig = (short)sig;
	ps->pr_pid = 1;
	for (unsigned i = 0; i < sizeof(from_gpr) / sizeof(from_gpr[0]); i++)
		r[i] = st->gpr[from_gpr[i]];
	r[15] = UINT64_MAX;  /* orig_rax: not in a system call */
	r[16] = st->rip;
	r[17] = st->cs.selector;
	r[18] = st->rflags;
	r[19] = st->gpr[6];
	r[20] = st->ss.selector;
	r[21] = st->fs.base;
	r[22] = st->gs.base;
	r[23] = st->ds.selector;
	r[24] = st->es.selector;
	r[25] = st->fs.selector;
	r[26] = st->gs.selector;
}

static bool page_zero(const uint8_t *p)
{
	for (size_t i = 0; i < VMM_PAGE; i += 8) {
		uint64_t w;
		memcpy(&w, p + i, 8);
		if (w)
			return false;
	}
	return true;
}

int vmm_sandbox_core(struct vmm_sandbox *sb, const char *path, struct vmm_error *err)
{
	struct vmm_vcpu_state st;
	struct elf_prstatus ps;
	uint8_t notes[sizeof(struct core_note) * 2 + sizeof(ps) + sizeof(st.fxsave) + 8];
	uint8_t *buf = NULL;
	int rc;

	pthread_mutex_lock(&sb->lock);
	bool busy = sb->in_call;
	pthread_mutex_unlock(&sb->lock);
	if (busy)
		return vmm_fail(err, VMM_E_BUSY, "the sandbox is running a call");
	if (sb->fault_state_ok)
		st = sb->fault_state;
	else if ((rc = sb->be->get_state(sb, &st)) < 0)
		return vmm_fail(err, rc, "cannot read the guest's registers: %s", vmm_strerror(rc));
	prstatus_fill(&st, core_signal(&sb->err), &ps);
	size_t nlen = note_put(notes, NT_PRSTATUS, &ps, sizeof(ps));
	nlen += note_put(notes + nlen, NT_FPREGSET, st.fxsave, sizeof(st.fxsave));

	Elf64_Ehdr eh = {
		.e_ident = { ELFMAG0, ELFMAG1, ELFMAG2, ELFMAG3, ELFCLASS64, ELFDATA2LSB, EV_CURRENT, ELFOSABI_NONE },
		.e_type = ET_CORE, .e_machine = EM_X86_64, .e_version = EV_CURRENT,
		.e_phoff = sizeof(Elf64_Ehdr), .e_ehsize = sizeof(Elf64_Ehdr), .e_phentsize = sizeof(Elf64_Phdr),
		.e_phnum = 2,
	};
	off_t note_off = sizeof(eh) + 2 * sizeof(Elf64_Phdr);
	off_t mem_off = (note_off + (off_t)nlen + VMM_PAGE - 1) & ~(off_t)(VMM_PAGE - 1);
	Elf64_Phdr ph[2] = {
		{ .p_type = PT_NOTE, .p_offset = (Elf64_Off)note_off, .p_filesz = nlen, .p_align = 4 },
		{ .p_type = PT_LOAD, .p_flags = PF_R | PF_W | PF_X, .p_offset = (Elf64_Off)mem_off, .p_vaddr = 0,
		  .p_paddr = 0, .p_filesz = sb->mem_size, .p_memsz = sb->mem_size, .p_align = VMM_PAGE },
	};
	int fd = st_sys_openat(AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return vmm_fail(err, fd, "cannot create %s: %s", path, strerror(-fd));
	if ((rc = st_sys_pwrite_all(fd, &eh, sizeof(eh), 0)) < 0 ||
	    (rc = st_sys_pwrite_all(fd, ph, sizeof(ph), sizeof(eh))) < 0 ||
	    (rc = st_sys_pwrite_all(fd, notes, nlen, note_off)) < 0)
		goto out_close;
	if (sb->be->page_read && !(buf = st_sys_malloc(VMM_PAGE))) {
		rc = -ENOMEM;
		goto out_close;
	}
	/* Zero pages stay holes: a guest's memory is mostly untouched heap. */
	for (uint64_t p = 0; p < sb->mem_size / VMM_PAGE; p++) {
		const uint8_t *page = sb->be->page_read ? sb->be->page_read(sb, p, buf) : sb->mem + p * VMM_PAGE;
		if (!page) {
			rc = -EIO;
			goto out_close;
		}
		if (!page_zero(page) && (rc = st_sys_pwrite_all(fd, page, VMM_PAGE, mem_off + (off_t)(p * VMM_PAGE))) < 0)
			goto out_close;
	}
	rc = st_sys_ftruncate(fd, mem_off + (off_t)sb->mem_size);
out_close:
	free(buf);
	int crc = st_sys_close(fd);
	if (crc < 0 && rc == 0)
		rc = crc;
	if (rc < 0) {
		(void)st_sys_unlinkat(AT_FDCWD, path, 0);
		return vmm_fail(err, rc, "cannot write the core file %s: %s", path, strerror(-rc));
	}
	return 0;
}
