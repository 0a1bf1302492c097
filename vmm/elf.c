/* elf.c: strict validation of guest ELF images (untrusted input) and their strata note. */
#include <elf.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "vmm/vmm_int.h"

#define ELF_MAX_PHDRS 64
#define IMAGE_MAX_END (16ull << 20)

static int bad(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (why && len) {
		va_start(ap, fmt);
		vsnprintf(why, len, fmt, ap);
		va_end(ap);
	}
	return VMM_E_BAD_ELF;
}

/* [off, off+len) inside [0, size)? Overflow-safe. */
static bool within(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

static bool in_exec_segment(const struct vmm_elf *e, uint64_t addr, uint64_t len)
{
	for (unsigned i = 0; i < e->nseg; i++) {
		const struct vmm_elf_segment *s = &e->seg[i];
		if ((s->flags & VMM_PERM_X) && addr >= s->vaddr && addr - s->vaddr <= s->memsz &&
		    len <= s->memsz - (addr - s->vaddr))
			return true;
	}
	return false;
}

/* The memory note's descriptor (hostile: every field checked). 0 or bad. */
static int mem_note(const uint8_t *desc, uint32_t descsz, struct strata_mem_note *mem, char *why, size_t wl)
{
	struct strata_mem_note m;

	if (descsz < sizeof(m) || descsz > STRATA_MEM_NOTE_MAX)
		return bad(why, wl, "strata memory note has size %u (%zu to %d)", descsz, sizeof(m), STRATA_MEM_NOTE_MAX);
	memcpy(&m, desc, sizeof(m));
	if (m.version == 0 || (m.version == 1 && m.reserved != 0))
		return bad(why, wl, "strata memory note is malformed (version %u, reserved %u)", m.version, m.reserved);
	if (m.heap_size > VMM_REGION_MAX)
		return bad(why, wl, "guest declares a heap of %llu bytes; a sandbox's heap is at most %llu MiB",
			   (unsigned long long)m.heap_size, VMM_REGION_MAX >> 20);
	if (m.stack_size > VMM_LOW_MAX)
		return bad(why, wl, "guest declares a stack of %llu bytes; a sandbox's stack is at most %llu MiB",
			   (unsigned long long)m.stack_size, VMM_LOW_MAX >> 20);
	*mem = m;
	return 0;
}

/* The strata notes in one PT_NOTE segment: the first ABI note (if none was
 * found yet) and the memory note (refused if there are two). 0 or bad. */
static int scan_notes(const uint8_t *p, uint64_t len, struct vmm_elf *e, bool *have_note, char *why, size_t wl)
{
	uint64_t off = 0;

	while (len - off >= sizeof(Elf64_Nhdr)) {
		Elf64_Nhdr nh;
		memcpy(&nh, p + off, sizeof(nh));
		off += sizeof(nh);
		uint64_t namesz = vmm_round_up(nh.n_namesz, 4), descsz = vmm_round_up(nh.n_descsz, 4);
		if (!within(off, namesz, len) || !within(off + namesz, descsz, len))
			return bad(why, wl, "note runs past its segment");
		const uint8_t *desc = p + off + namesz;
		bool ours = nh.n_namesz == sizeof(STRATA_NOTE_NAME) &&
			    memcmp(p + off, STRATA_NOTE_NAME, sizeof(STRATA_NOTE_NAME)) == 0;
		if (ours && nh.n_type == STRATA_NOTE_TYPE && !*have_note) {
			if (nh.n_descsz != sizeof(e->note))
				return bad(why, wl, "strata note has size %u, expected %zu", nh.n_descsz,
					   sizeof(e->note));
			memcpy(&e->note, desc, sizeof(e->note));
			*have_note = true;
		} else if (ours && nh.n_type == STRATA_NOTE_MEM_TYPE) {
			if (e->have_mem)
				return bad(why, wl, "two strata memory notes");
			int rc = mem_note(desc, nh.n_descsz, &e->mem, why, wl);
			if (rc < 0)
				return rc;
			e->have_mem = true;
		}
		off += namesz + descsz;
	}
	return 0;
}

int vmm_elf_parse(const void *data, size_t size, struct vmm_elf *out, char *why, size_t wl)
{
	const uint8_t *d = data;
	struct vmm_elf e = { .data = d, .size = size, .lo = UINT64_MAX };
	Elf64_Ehdr eh;
	bool have_note = false;

	if (!data || size < sizeof(eh))
		return bad(why, wl, "file too short for an ELF header (%zu bytes)", size);
	memcpy(&eh, d, sizeof(eh));
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
		return bad(why, wl, "not an ELF file (bad magic)");
	if (eh.e_ident[EI_CLASS] != ELFCLASS64)
		return bad(why, wl, "not a 64-bit ELF file");
	if (eh.e_ident[EI_DATA] != ELFDATA2LSB)
		return bad(why, wl, "not a little-endian ELF file");
	if (eh.e_ident[EI_VERSION] != EV_CURRENT || eh.e_version != EV_CURRENT)
		return bad(why, wl, "unknown ELF version");
	if (eh.e_machine != EM_X86_64)
		return bad(why, wl, "wrong architecture (e_machine %u, need x86-64)", eh.e_machine);
	if (eh.e_type != ET_EXEC)
		return bad(why, wl, "not a static executable (e_type %u; build with -static -fno-pic)",
			   eh.e_type);
	if (eh.e_ehsize != sizeof(eh) || eh.e_phentsize != sizeof(Elf64_Phdr))
		return bad(why, wl, "unexpected ELF header or program header size");
	if (eh.e_phnum == 0 || eh.e_phnum > ELF_MAX_PHDRS)
		return bad(why, wl, "%u program headers (need 1..%d)", eh.e_phnum, ELF_MAX_PHDRS);
	if (!within(eh.e_phoff, (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr), size))
		return bad(why, wl, "program headers lie outside the file (truncated?)");

	for (unsigned i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		memcpy(&ph, d + eh.e_phoff + (uint64_t)i * sizeof(ph), sizeof(ph));
		switch (ph.p_type) {
		case PT_LOAD: {
			if (ph.p_memsz == 0)
				continue;
			if (e.nseg == VMM_ELF_MAX_SEGMENTS)
				return bad(why, wl, "more than %d loadable segments", VMM_ELF_MAX_SEGMENTS);
			if (ph.p_filesz > ph.p_memsz)
				return bad(why, wl, "segment %u: file size exceeds memory size", i);
			if (!within(ph.p_offset, ph.p_filesz, size))
				return bad(why, wl, "segment %u lies outside the file (truncated?)", i);
			if (ph.p_vaddr < STRATA_IMAGE_BASE || !within(ph.p_vaddr, ph.p_memsz, IMAGE_MAX_END))
				return bad(why, wl,
					   "segment %u at 0x%llx+0x%llx is outside the image area "
					   "[0x%x, 0x%llx) (link with vmm/guest/guest.ld)",
					   i, (unsigned long long)ph.p_vaddr, (unsigned long long)ph.p_memsz,
					   STRATA_IMAGE_BASE, IMAGE_MAX_END);
			for (unsigned j = 0; j < e.nseg; j++) {
				const struct vmm_elf_segment *o = &e.seg[j];
				if (ph.p_vaddr < o->vaddr + o->memsz && o->vaddr < ph.p_vaddr + ph.p_memsz)
					return bad(why, wl, "segments %u and %u overlap", j, i);
			}
			struct vmm_elf_segment *s = &e.seg[e.nseg++];
			s->vaddr = ph.p_vaddr;
			s->memsz = ph.p_memsz;
			s->filesz = ph.p_filesz;
			s->offset = ph.p_offset;
			s->flags = ((ph.p_flags & PF_R) ? VMM_PERM_R : 0) | ((ph.p_flags & PF_W) ? VMM_PERM_W : 0) |
				   ((ph.p_flags & PF_X) ? VMM_PERM_X : 0);
			if (ph.p_vaddr < e.lo)
				e.lo = ph.p_vaddr;
			if (ph.p_vaddr + ph.p_memsz > e.hi)
				e.hi = ph.p_vaddr + ph.p_memsz;
			break;
		}
		case PT_NOTE: {
			if (!within(ph.p_offset, ph.p_filesz, size))
				return bad(why, wl, "note segment %u lies outside the file (truncated?)", i);
			int rc = scan_notes(d + ph.p_offset, ph.p_filesz, &e, &have_note, why, wl);
			if (rc < 0)
				return rc;
			break;
		}
		case PT_INTERP:
		case PT_DYNAMIC:
			return bad(why, wl, "dynamically linked (guests are static, -static -nostdlib)");
		case PT_TLS:
			return bad(why, wl, "thread-local storage is not supported in guests");
		default:
			break;  /* PT_GNU_STACK, PT_GNU_PROPERTY...: nothing to load */
		}
	}
	if (e.nseg == 0)
		return bad(why, wl, "no loadable segments");
	if (!have_note)
		return bad(why, wl, "not a strata guest (no strata ELF note; link with the guest runtime)");
	if (e.note.abi_version != STRATA_ABI_VERSION) {
		bad(why, wl, "guest built for ABI version %u, this host speaks %u", e.note.abi_version,
		    STRATA_ABI_VERSION);
		return VMM_E_ABI;
	}
	e.entry = eh.e_entry;
	if (!in_exec_segment(&e, e.entry, 1))
		return bad(why, wl, "entry point 0x%llx is not in an executable segment",
			   (unsigned long long)e.entry);
	/* Checked as ever, so the note means what it always did (guests still
	 * carry stubs for earlier hosts); never used: the IDT points at the
	 * host's own stubs (vmm_x86_build), whatever the guest ships. */
	if (e.note.isr_stride < 8 || e.note.isr_stride > 64 ||
	    !in_exec_segment(&e, e.note.isr_base, (uint64_t)STRATA_ISR_COUNT * e.note.isr_stride))
		return bad(why, wl, "exception stubs are not in an executable segment");
	*out = e;
	return 0;
}
