/* test_guestmem.c: the memory a guest declares in its ELF (STRATA_GUEST_MEMORY): used where the caller sets none, overridden by the caller, refused when hostile. */
#include <criterion/criterion.h>
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tests/kvm_check.h"
#include "vmm/vmm_int.h"

#define MIB (1ull << 20)

static unsigned char *img;
static size_t img_len;
static size_t desc_off;   /* the memory note's descriptor in img */

static const char *memguest_path(void)
{
	static char buf[4096];
	const char *build = getenv("STRATA_BUILD");

	snprintf(buf, sizeof(buf), "%s/vmm/guest/memguest.elf", build ? build : ".");
	return buf;
}

/* The memory note as the SDK writes it: header, "strata" padded to 8. */
static const uint32_t note_hdr[3] = { 7, sizeof(struct strata_mem_note), STRATA_NOTE_MEM_TYPE };

static void load(void)
{
	img = file_read(memguest_path(), &img_len);
	cr_assert_not_null(img, "cannot read %s", memguest_path());
	for (size_t i = 0; i + 20 + sizeof(struct strata_mem_note) <= img_len && !desc_off; i += 4)
		if (!memcmp(img + i, note_hdr, 12) && !memcmp(img + i + 12, "strata\0", 8))
			desc_off = i + 20;
	cr_assert_neq(desc_off, 0, "no memory note in %s", memguest_path());
}

static void unload(void)
{
	free(img);
}

TestSuite(guestmem, .init = load, .fini = unload);

static Elf64_Phdr *note_phdr(unsigned char *p)
{
	Elf64_Ehdr *eh = (Elf64_Ehdr *)p;

	for (unsigned i = 0; i < eh->e_phnum; i++) {
		Elf64_Phdr *ph = (Elf64_Phdr *)(p + eh->e_phoff + i * sizeof(Elf64_Phdr));
		if (ph->p_type == PT_NOTE)
			return ph;
	}
	cr_assert_fail("no PT_NOTE");
	return NULL;
}

/* A copy of img whose memory note says m. */
static unsigned char *with_note(const struct strata_mem_note *m)
{
	unsigned char *c = malloc(img_len);

	memcpy(c, img, img_len);
	memcpy(c + desc_off, m, sizeof(*m));
	return c;
}

static int64_t call_i(struct vmm_sandbox *sb, const char *fn, int64_t arg, bool has_arg)
{
	struct vmm_value v = { .type = VMM_I64, .i64 = arg };
	struct vmm_result r;
	int rc = vmm_sandbox_call(sb, fn, &v, has_arg ? 1 : 0, &r);

	cr_assert_eq(rc, 0, "%s: %s: %s", fn, vmm_strerror(rc), vmm_sandbox_error(sb)->message);
	cr_assert_eq(r.type, VMM_I64);
	return r.i64;
}

static struct vmm_sandbox *made(const unsigned char *p, size_t len, const struct vmm_config *cfg)
{
	struct vmm_sandbox *sb = NULL;
	struct vmm_error err = { 0 };
	int rc = vmm_sandbox_new_mem(p, len, cfg, &sb, &err);

	cr_assert_eq(rc, 0, "%s: %s", vmm_strerror(rc), err.message);
	return sb;
}

static void refused(const unsigned char *p, size_t len, const struct vmm_config *cfg, const char *words)
{
	struct vmm_sandbox *sb = NULL;
	struct vmm_error err = { 0 };
	int rc = vmm_sandbox_new_mem(p, len, cfg, &sb, &err);

	cr_assert_eq(rc, VMM_E_BAD_ELF, "got %d (%s): %s", rc, vmm_strerror(rc), err.message);
	cr_assert_null(sb);
	cr_assert(strstr(err.message, words), "message '%s' lacks '%s'", err.message, words);
}

Test(guestmem, the_declared_heap_and_stack_are_what_the_guest_gets, .init = kvm_require)
{
	struct vmm_sandbox *sb = made(img, img_len, NULL);

	cr_assert_eq(call_i(sb, "heap_size", 0, false), (int64_t)(3 * MIB));
	cr_assert_eq(call_i(sb, "stack_size", 0, false), 192 << 10);
	cr_assert_eq(call_i(sb, "take", (int64_t)(2 * MIB), true), 1, "2 MiB fits a 3 MiB heap");
	vmm_sandbox_free(sb);
}

Test(guestmem, a_guest_without_the_note_gets_the_defaults, .init = kvm_require)
{
	size_t len;
	unsigned char *p = file_read(guest_path(), &len);
	struct vmm_elf e;
	char why[200];

	cr_assert_not_null(p);
	cr_assert_eq(vmm_elf_parse(p, len, &e, why, sizeof(why)), 0, "%s", why);
	cr_assert(!e.have_mem);
	struct vmm_sandbox *sb = made(p, len, NULL);
	uint8_t *mem;
	uint64_t size;
	vmm_sandbox_memory(sb, &mem, &size);
	const struct strata_boot_info *b = (const void *)(mem + STRATA_BOOT_INFO_GPA);
	cr_assert_eq(b->heap_size, VMM_DEFAULT_HEAP);
	cr_assert_eq(b->stack_hi - b->stack_lo, VMM_DEFAULT_STACK);
	vmm_sandbox_free(sb);
	free(p);
}

Test(guestmem, the_caller_s_sizes_win_smaller_or_larger, .init = kvm_require)
{
	struct vmm_config small = { .heap_size = 256 << 10, .stack_size = 64 << 10 };
	struct vmm_sandbox *sb = made(img, img_len, &small);

	cr_assert_eq(call_i(sb, "heap_size", 0, false), 256 << 10);
	cr_assert_eq(call_i(sb, "stack_size", 0, false), 64 << 10);
	/* Smaller than the guest asked: its usual out of memory, not an error. */
	cr_assert_eq(call_i(sb, "take", (int64_t)(2 * MIB), true), 0);
	vmm_sandbox_free(sb);

	struct vmm_config big = { .heap_size = 8 * MIB };
	sb = made(img, img_len, &big);
	cr_assert_eq(call_i(sb, "heap_size", 0, false), (int64_t)(8 * MIB));
	cr_assert_eq(call_i(sb, "stack_size", 0, false), 192 << 10, "the stack the caller left unset is the guest's");
	cr_assert_eq(call_i(sb, "take", (int64_t)(6 * MIB), true), 1);
	vmm_sandbox_free(sb);
}

Test(guestmem, hostile_sizes_are_refused_before_any_arithmetic)
{
	static const struct {
		struct strata_mem_note m;
		const char *words;
	} cases[] = {
		{ { 1, 0, UINT64_MAX, 0 }, "heap of 18446744073709551615 bytes" },
		{ { 1, 0, VMM_REGION_MAX + 1, 0 }, "heap of" },
		{ { 1, 0, UINT64_MAX - 4095, 0 }, "heap of" },  /* rounds up to 0 */
		{ { 1, 0, 0, UINT64_MAX }, "stack of" },
		{ { 1, 0, 0, VMM_LOW_MAX + 1 }, "stack of" },
		{ { 1, 0, 1 * MIB, UINT64_MAX - 4095 }, "stack of" },
		{ { 0, 0, 1 * MIB, 0 }, "malformed" },
		{ { 1, 7, 1 * MIB, 0 }, "malformed" },
		/* Each within its own bound, but not with the image below 16 MiB. */
		{ { 1, 0, 1 * MIB, VMM_LOW_MAX }, "does not fit" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		unsigned char *c = with_note(&cases[i].m);
		refused(c, img_len, NULL, cases[i].words);
		free(c);
	}
}

Test(guestmem, a_declared_heap_that_fits_alone_but_not_with_the_caller_s_buffers)
{
	struct strata_mem_note m = { 1, 0, VMM_REGION_MAX, 0 };
	struct vmm_config cfg = { .input_size = VMM_REGION_MAX };
	unsigned char *c = with_note(&m);

	refused(c, img_len, &cfg, "does not fit");
	free(c);
}

Test(guestmem, a_caller_s_heap_makes_an_impossible_declared_heap_harmless, .init = kvm_require)
{
	/* Over the limit is refused at parse (hostile), whatever the caller
	 * sets; within it, the caller's size replaces it. */
	struct strata_mem_note m = { 1, 0, VMM_REGION_MAX, 0 };
	struct vmm_config cfg = { .heap_size = 1 * MIB, .input_size = VMM_REGION_MAX };
	unsigned char *c = with_note(&m);
	struct vmm_sandbox *sb = made(c, img_len, &cfg);

	cr_assert_eq(call_i(sb, "heap_size", 0, false), (int64_t)MIB);
	vmm_sandbox_free(sb);
	free(c);
}

/* A copy of base whose PT_NOTE is moved to the end of the file and followed
 * by a note of the memory note's name and type with descriptor desc
 * (descsz bytes): more notes in the same segment. */
static unsigned char *with_extra_note(const unsigned char *base, const void *desc, uint32_t descsz, size_t *out_len)
{
	Elf64_Phdr *ph = note_phdr((unsigned char *)base);
	uint32_t h[3] = { 7, descsz, STRATA_NOTE_MEM_TYPE };
	size_t seg = ph->p_filesz, n = img_len + seg + 20 + descsz;
	unsigned char *c = malloc(n);

	memcpy(c, base, img_len);
	memcpy(c + img_len, base + ph->p_offset, seg);
	memcpy(c + img_len + seg, h, 12);
	memcpy(c + img_len + seg + 12, "strata\0", 8);
	memcpy(c + img_len + seg + 20, desc, descsz);
	ph = note_phdr(c);
	ph->p_offset = img_len;
	ph->p_filesz = seg + 20 + descsz;
	*out_len = n;
	return c;
}

/* A copy of img whose own memory note is of another type (skipped). */
static unsigned char *without_own_note(void)
{
	unsigned char *c = malloc(img_len);
	uint32_t other = 99;

	memcpy(c, img, img_len);
	memcpy(c + desc_off - 12, &other, 4);
	return c;
}

Test(guestmem, two_memory_notes_are_refused)
{
	struct strata_mem_note m = { 1, 0, 1 * MIB, 0 };
	size_t len;
	unsigned char *c = with_extra_note(img, &m, sizeof(m), &len);

	refused(c, len, NULL, "two strata memory notes");
	free(c);
}

Test(guestmem, short_and_oversized_descriptors_are_refused)
{
	static const uint32_t sizes[] = { 0, 4, 8, 16, 20, STRATA_MEM_NOTE_MAX + 4 };
	unsigned char *base = without_own_note();

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint32_t *desc = calloc(1, sizes[i] + 4);
		size_t len;
		desc[0] = 1;  /* version */
		unsigned char *c = with_extra_note(base, desc, sizes[i], &len);
		refused(c, len, NULL, "memory note has size");
		free(c);
		free(desc);
	}
	free(base);
}

Test(guestmem, a_later_version_s_longer_note_is_read_for_the_fields_this_host_knows)
{
	struct vmm_elf e;
	char why[200];
	unsigned char desc[32];
	struct strata_mem_note m = { 2, 0xffffffffu, 5 * MIB, 0 };  /* version 2 may use `reserved` */
	unsigned char *base = without_own_note();
	size_t len;

	memcpy(desc, &m, sizeof(m));
	memset(desc + sizeof(m), 0xab, sizeof(desc) - sizeof(m));
	unsigned char *c = with_extra_note(base, desc, sizeof(desc), &len);
	cr_assert_eq(vmm_elf_parse(c, len, &e, why, sizeof(why)), 0, "%s", why);
	cr_assert(e.have_mem);
	cr_assert_eq(e.mem.heap_size, 5 * MIB);
	cr_assert_eq(e.mem.stack_size, 0);
	free(c);
	free(base);
}
