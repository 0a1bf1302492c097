/* test_elf.c: malformed, truncated, oversized and wrong-architecture guest ELF files get clear errors. */
#include <criterion/criterion.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "tests/kvm_check.h"

static unsigned char *img;
static size_t img_len;

static void load(void)
{
	img = file_read(guest_path(), &img_len);
	cr_assert_not_null(img, "cannot read %s", guest_path());
}

static void unload(void)
{
	free(img);
}

static Elf64_Ehdr *eh(unsigned char *p)
{
	return (Elf64_Ehdr *)p;
}

static Elf64_Phdr *ph(unsigned char *p, unsigned i)
{
	return (Elf64_Phdr *)(p + eh(p)->e_phoff + i * sizeof(Elf64_Phdr));
}

static int find_ph(unsigned char *p, uint32_t type)
{
	for (unsigned i = 0; i < eh(p)->e_phnum; i++)
		if (ph(p, i)->p_type == type)
			return (int)i;
	return -1;
}

/* Create from a modified copy; expect `code` and a message containing `words`. */
static void expect(const unsigned char *p, size_t len, int code, const char *words)
{
	struct vmm_sandbox *sb = NULL;
	struct vmm_error err = { 0 };
	int rc = vmm_sandbox_new_mem(p, len, NULL, &sb, &err);

	cr_assert_eq(rc, code, "got %d (%s): %s", rc, vmm_strerror(rc), err.message);
	cr_assert_null(sb);
	if (words)
		cr_assert(strstr(err.message, words), "message '%s' lacks '%s'", err.message, words);
}

static unsigned char *copy(void)
{
	unsigned char *c = malloc(img_len);
	memcpy(c, img, img_len);
	return c;
}

TestSuite(vmm_elf, .init = load, .fini = unload);

Test(vmm_elf, the_real_guest_loads, .init = kvm_require)
{
	struct vmm_sandbox *sb = NULL;
	struct vmm_error err;

	cr_assert_eq(vmm_sandbox_new_mem(img, img_len, NULL, &sb, &err), 0, "%s", err.message);
	vmm_sandbox_free(sb);
}

Test(vmm_elf, empty_and_tiny_inputs)
{
	expect(img, 0, VMM_E_BAD_ELF, "too short");
	expect(img, 10, VMM_E_BAD_ELF, "too short");
	expect(NULL, 100, VMM_E_BAD_ELF, NULL);
}

Test(vmm_elf, bad_magic)
{
	unsigned char *c = copy();
	c[1] = 'X';
	expect(c, img_len, VMM_E_BAD_ELF, "not an ELF");
	free(c);
}

Test(vmm_elf, wrong_class_endianness_and_architecture)
{
	unsigned char *c = copy();
	c[EI_CLASS] = ELFCLASS32;
	expect(c, img_len, VMM_E_BAD_ELF, "64-bit");
	free(c);
	c = copy();
	c[EI_DATA] = ELFDATA2MSB;
	expect(c, img_len, VMM_E_BAD_ELF, "little-endian");
	free(c);
	c = copy();
	eh(c)->e_machine = EM_AARCH64;
	expect(c, img_len, VMM_E_BAD_ELF, "wrong architecture");
	free(c);
}

Test(vmm_elf, shared_objects_and_dynamic_executables_are_refused)
{
	unsigned char *c = copy();
	eh(c)->e_type = ET_DYN;
	expect(c, img_len, VMM_E_BAD_ELF, "static");
	free(c);
	c = copy();
	int n = find_ph(c, PT_NOTE);
	ph(c, (unsigned)n)->p_type = PT_INTERP;
	expect(c, img_len, VMM_E_BAD_ELF, "dynamically linked");
	free(c);
}

Test(vmm_elf, truncated_files)
{
	/* Every cut inside the headers and the loaded bytes must be refused
	 * (what follows the loaded bytes, e.g. debug info, may go). */
	size_t end = 0;
	for (unsigned i = 0; i < eh(img)->e_phnum; i++)
		if (ph(img, i)->p_type == PT_LOAD && ph(img, i)->p_offset + ph(img, i)->p_filesz > end)
			end = ph(img, i)->p_offset + ph(img, i)->p_filesz;
	size_t cuts[] = { sizeof(Elf64_Ehdr), sizeof(Elf64_Ehdr) + 10, 200, 4096, 4097, end / 2, end - 1 };
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++)
		expect(img, cuts[i], VMM_E_BAD_ELF, NULL);
}

Test(vmm_elf, program_headers_outside_the_file)
{
	unsigned char *c = copy();
	eh(c)->e_phoff = img_len - 8;
	expect(c, img_len, VMM_E_BAD_ELF, "program headers");
	free(c);
	c = copy();
	eh(c)->e_phoff = UINT64_MAX - 16;
	expect(c, img_len, VMM_E_BAD_ELF, "program headers");
	free(c);
	c = copy();
	eh(c)->e_phnum = 0;
	expect(c, img_len, VMM_E_BAD_ELF, "program headers");
	free(c);
	c = copy();
	eh(c)->e_phnum = 60000;
	expect(c, img_len, VMM_E_BAD_ELF, "program headers");
	free(c);
}

Test(vmm_elf, segments_with_bad_sizes_or_addresses)
{
	int n = find_ph(img, PT_LOAD);
	cr_assert_geq(n, 0);
	unsigned char *c = copy();
	ph(c, (unsigned)n)->p_filesz = ph(c, (unsigned)n)->p_memsz + 1;
	expect(c, img_len, VMM_E_BAD_ELF, "file size");
	free(c);
	c = copy();
	ph(c, (unsigned)n)->p_offset = UINT64_MAX - 100;
	expect(c, img_len, VMM_E_BAD_ELF, "outside the file");
	free(c);
	c = copy();
	ph(c, (unsigned)n)->p_vaddr = 0x1000;
	expect(c, img_len, VMM_E_BAD_ELF, "image area");
	free(c);
	c = copy();
	ph(c, (unsigned)n)->p_vaddr = UINT64_MAX - 0x100;
	expect(c, img_len, VMM_E_BAD_ELF, "image area");
	free(c);
	c = copy();
	ph(c, (unsigned)n)->p_memsz = 1ull << 40;
	expect(c, img_len, VMM_E_BAD_ELF, "image area");
	free(c);
	/* Two segments on the same addresses. */
	c = copy();
	int m = -1;
	for (unsigned i = 0; i < eh(c)->e_phnum; i++)
		if (ph(c, i)->p_type == PT_LOAD && (int)i != n)
			m = (int)i;
	cr_assert_geq(m, 0);
	ph(c, (unsigned)m)->p_vaddr = ph(c, (unsigned)n)->p_vaddr;
	expect(c, img_len, VMM_E_BAD_ELF, "overlap");
	free(c);
}

Test(vmm_elf, entry_must_be_in_code)
{
	unsigned char *c = copy();
	eh(c)->e_entry = 0xdeadbeef;
	expect(c, img_len, VMM_E_BAD_ELF, "entry point");
	free(c);
}

Test(vmm_elf, a_plain_elf_without_the_strata_note_is_refused)
{
	unsigned char *c = copy();
	int n = find_ph(c, PT_NOTE);
	cr_assert_geq(n, 0);
	ph(c, (unsigned)n)->p_type = PT_NULL;
	expect(c, img_len, VMM_E_BAD_ELF, "not a strata guest");
	free(c);
}

Test(vmm_elf, another_abi_version_is_refused)
{
	unsigned char *c = copy();
	int n = find_ph(c, PT_NOTE);
	/* Nhdr (12 bytes) + "strata\0" padded to 8, then abi_version. */
	uint32_t v = 999;
	memcpy(c + ph(c, (unsigned)n)->p_offset + 12 + 8, &v, 4);
	expect(c, img_len, VMM_E_ABI, "ABI version 999");
	free(c);
}

Test(vmm_elf, files_that_are_missing_not_regular_or_oversized)
{
	struct vmm_sandbox *sb = NULL;
	struct vmm_error err;
	char dir[] = "/tmp/strata-vmm-XXXXXX";

	cr_assert_eq(vmm_sandbox_new("/nonexistent/guest.elf", NULL, &sb, &err), -ENOENT);
	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(vmm_sandbox_new(dir, NULL, &sb, &err), VMM_E_BAD_ELF);
	char path[64];
	snprintf(path, sizeof(path), "%s/big.elf", dir);
	int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, 200 << 20), 0);
	close(fd);
	cr_assert_eq(vmm_sandbox_new(path, NULL, &sb, &err), VMM_E_BAD_ELF);
	cr_assert(strstr(err.message, "plausible"), "%s", err.message);
	unlink(path);
	snprintf(path, sizeof(path), "%s/empty.elf", dir);
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	close(fd);
	cr_assert_eq(vmm_sandbox_new(path, NULL, &sb, &err), VMM_E_BAD_ELF);
	unlink(path);
	rmdir(dir);
	cr_assert_null(sb);
}

Test(vmm_elf, random_header_corruption_never_crashes_the_host)
{
	struct vmm_config cfg = { .timeout_ns = 200 * 1000000ull };
	uint64_t s = 0x9e3779b97f4a7c15ull;
	size_t hdr = eh(img)->e_phoff + eh(img)->e_phnum * sizeof(Elf64_Phdr);
	int refused = 0;

	for (int k = 0; k < 400; k++) {
		unsigned char *c = copy();
		int flips = 1 + (int)(s % 4);
		for (int f = 0; f < flips; f++) {
			s ^= s << 13;
			s ^= s >> 7;
			s ^= s << 17;
			c[s % hdr] ^= (unsigned char)(1u << (s >> 40) % 8);
		}
		struct vmm_sandbox *sb = NULL;
		struct vmm_error err;
		int rc = vmm_sandbox_new_mem(c, img_len, &cfg, &sb, &err);
		if (rc < 0) {
			cr_assert_gt(strlen(err.message), 0);
			refused++;
		} else {
			vmm_sandbox_free(sb);
		}
		free(c);
	}
	cr_assert_gt(refused, 0);
}

Test(vmm_elf, the_note_s_exception_stubs_are_never_run, .init = kvm_require)
{
	/* Point the note's exception stubs at simpleguest's self-faulting
	 * stubs: were they run, a fault would nest into #DF and a triple
	 * fault. The host's own stubs run instead and report the fault. */
	unsigned char pat[16] = { 0xcd, 0x30 };
	memset(pat + 2, 0x90, 14);
	unsigned char *c = copy();
	size_t off = 0;
	for (size_t i = 0; i + 32 * 16 <= img_len && !off; i += 16) {
		bool all = true;
		for (int k = 0; k < 32 && all; k++)
			all = memcmp(c + i + 16 * k, pat, 16) == 0;
		if (all)
			off = i;
	}
	cr_assert_neq(off, 0, "bad stubs not found in simpleguest");
	int t = -1;
	for (unsigned i = 0; i < eh(c)->e_phnum; i++)
		if (ph(c, i)->p_type == PT_LOAD && off >= ph(c, i)->p_offset &&
		    off < ph(c, i)->p_offset + ph(c, i)->p_filesz)
			t = (int)i;
	cr_assert_geq(t, 0);
	uint64_t va = ph(c, (unsigned)t)->p_vaddr + (off - ph(c, (unsigned)t)->p_offset);
	int n = find_ph(c, PT_NOTE);
	memcpy(c + ph(c, (unsigned)n)->p_offset + 12 + 8 + 8, &va, 8);

	struct vmm_sandbox *sb = NULL;
	struct vmm_error err;
	cr_assert_eq(vmm_sandbox_new_mem(c, img_len, NULL, &sb, &err), 0, "%s", err.message);
	struct vmm_result res;
	int rc = vmm_sandbox_call(sb, "null_write", NULL, 0, &res);
	cr_assert_eq(rc, VMM_E_GUEST_FAULT, "%s: %s", vmm_strerror(rc), vmm_sandbox_error(sb)->message);
	cr_assert_eq(vmm_sandbox_error(sb)->vector, 14, "%s", vmm_sandbox_error(sb)->message);
	cr_assert(vmm_sandbox_poisoned(sb));
	vmm_sandbox_free(sb);
	free(c);
}
