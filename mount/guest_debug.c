/* guest_debug.c: where in a guest's source a fault happened (its ELF's symbols and DWARF lines, read with libdw). */
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* The function of the ELF's .symtab holding addr, or NULL. */
static const char *symtab_function(Elf *e, uint64_t addr)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(e, scn))) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || !sh.sh_entsize)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			if (gelf_getsym(d, (int)i, &s) && GELF_ST_TYPE(s.st_info) == STT_FUNC && addr >= s.st_value &&
			    addr < s.st_value + (s.st_size ? s.st_size : 1))
				return elf_strptr(e, sh.sh_link, s.st_name);
		}
	}
	return NULL;
}

int cli_guest_where(const char *elf_path, uint64_t addr, char *buf, size_t len)
{
	int fd = open(elf_path, O_RDONLY | O_CLOEXEC);
	int rc = 1;

	if (fd < 0)
		return -1;
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e || elf_kind(e) != ELF_K_ELF) {
		rc = -1;
		goto out_close;
	}
	const char *fn = symtab_function(e, addr);
	const char *file = NULL;
	int line = 0;
	Dwarf *dw = dwarf_begin_elf(e, DWARF_C_READ, NULL);
	Dwarf_Die cu;
	if (dw && dwarf_addrdie(dw, addr, &cu)) {
		Dwarf_Line *l = dwarf_getsrc_die(&cu, addr);
		if (l && (file = dwarf_linesrc(l, NULL, NULL)) && dwarf_lineno(l, &line) != 0)
			file = NULL;
	}
	if (fn || file) {
		const char *base = file ? strrchr(file, '/') : NULL;
		if (fn && file)
			snprintf(buf, len, "%s (%s:%d)", cli_esc(fn), cli_esc(base ? base + 1 : file), line);
		else if (fn)
			snprintf(buf, len, "%s (no line table: build the guest with -g)", cli_esc(fn));
		else
			snprintf(buf, len, "%s:%d", cli_esc(base ? base + 1 : file), line);
		rc = 0;
	}
	if (dw)
		dwarf_end(dw);
out_close:
	if (e)
		elf_end(e);
	close(fd);
	return rc;
}
