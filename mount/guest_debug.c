/* guest_debug.c: where in a guest's source a fault happened (its ELF's symbols and DWARF lines, read with libdw, loaded on first use). */
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "store/dl.h"

/* libdw (and the libelf under it) is loaded on the first fault report
 * (store/dl.h), not at every command's start */
static struct {
	__typeof__(elf_version) *elf_version;
	__typeof__(elf_begin) *elf_begin;
	__typeof__(elf_end) *elf_end;
	__typeof__(elf_kind) *elf_kind;
	__typeof__(elf_nextscn) *elf_nextscn;
	__typeof__(elf_getdata) *elf_getdata;
	__typeof__(elf_strptr) *elf_strptr;
	__typeof__(gelf_getshdr) *gelf_getshdr;
	__typeof__(gelf_getsym) *gelf_getsym;
	__typeof__(dwarf_begin_elf) *dwarf_begin_elf;
	__typeof__(dwarf_end) *dwarf_end;
	__typeof__(dwarf_addrdie) *dwarf_addrdie;
	__typeof__(dwarf_getsrc_die) *dwarf_getsrc_die;
	__typeof__(dwarf_linesrc) *dwarf_linesrc;
	__typeof__(dwarf_lineno) *dwarf_lineno;
} dwl;
static const char *const dw_syms[] = {
	"elf_version", "elf_begin", "elf_end", "elf_kind", "elf_nextscn", "elf_getdata", "elf_strptr",
	"gelf_getshdr", "gelf_getsym", "dwarf_begin_elf", "dwarf_end", "dwarf_addrdie", "dwarf_getsrc_die",
	"dwarf_linesrc", "dwarf_lineno",
};
_Static_assert(sizeof(dw_syms) / sizeof(dw_syms[0]) * sizeof(void *) == sizeof(dwl), "dw_syms names every member of dwl");
/* STRATA_LIBDW: found when strata was configured (mount/meson.build) */
static struct st_dl dw_dl = ST_DL_INIT(STRATA_LIBDW, dw_syms, &dwl, sizeof(dw_syms) / sizeof(dw_syms[0]));

#define elf_version dwl.elf_version
#define elf_begin dwl.elf_begin
#define elf_end dwl.elf_end
#define elf_kind dwl.elf_kind
#define elf_nextscn dwl.elf_nextscn
#define elf_getdata dwl.elf_getdata
#define elf_strptr dwl.elf_strptr
#define gelf_getshdr dwl.gelf_getshdr
#define gelf_getsym dwl.gelf_getsym
#define dwarf_begin_elf dwl.dwarf_begin_elf
#define dwarf_end dwl.dwarf_end
#define dwarf_addrdie dwl.dwarf_addrdie
#define dwarf_getsrc_die dwl.dwarf_getsrc_die
#define dwarf_linesrc dwl.dwarf_linesrc
#define dwarf_lineno dwl.dwarf_lineno

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
	int fd, rc = 1;

	if (st_dl_load(&dw_dl) < 0 || (fd = open(elf_path, O_RDONLY | O_CLOEXEC)) < 0)
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
