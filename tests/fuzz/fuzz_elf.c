/* fuzz_elf.c: fuzz target 3, the guest ELF validator: whatever it accepts lies within the file and the image. */
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "vmm/vmm_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vmm_elf e;
	char why[256] = "";
	/* An exact-size copy, so ASan sees any read past the end. */
	uint8_t *copy = malloc(size ? size : 1);

	if (!copy)
		return 0;
	memcpy(copy, data, size);
	if (vmm_elf_parse(copy, size, &e, why, sizeof(why)) < 0) {
		FUZZ_CHECK(why[0], "a refusal says why");
		free(copy);
		return 0;
	}
	FUZZ_CHECK(e.nseg >= 1 && e.nseg <= VMM_ELF_MAX_SEGMENTS, "%u segments", e.nseg);
	FUZZ_CHECK(e.lo < e.hi, "extent %llx-%llx", (unsigned long long)e.lo, (unsigned long long)e.hi);
	FUZZ_CHECK(e.entry >= e.lo && e.entry < e.hi, "entry %llx outside %llx-%llx", (unsigned long long)e.entry,
		   (unsigned long long)e.lo, (unsigned long long)e.hi);
	for (unsigned i = 0; i < e.nseg; i++) {
		const struct vmm_elf_segment *s = &e.seg[i];
		FUZZ_CHECK(s->filesz <= s->memsz, "segment %u: filesz > memsz", i);
		FUZZ_CHECK(s->offset <= size && s->filesz <= size - s->offset, "segment %u outside the file", i);
		FUZZ_CHECK(s->vaddr >= e.lo && s->memsz <= e.hi - s->vaddr, "segment %u outside the extent", i);
		for (unsigned j = 0; j < i; j++)
			FUZZ_CHECK(s->vaddr >= e.seg[j].vaddr + e.seg[j].memsz || e.seg[j].vaddr >= s->vaddr + s->memsz,
				   "segments %u and %u overlap", j, i);
		/* Touch every byte the loader would copy. */
		volatile uint8_t sum = 0;
		for (uint64_t k = 0; k < s->filesz; k += 512)
			sum ^= copy[s->offset + k];
		(void)sum;
	}
	free(copy);
	return 0;
}
