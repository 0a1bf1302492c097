/* fuzz_policy.c: fuzz target 5, the reset-policy file: accepted values are in range, refusals name a line. */
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/fuzz/fuzz.h"
#include "vmm/snap_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vmm_policy p;
	char path[64], why[512] = "";
	/* The reader takes a path: a memfd's, so no file is left behind. */
	int fd = memfd_create("strata-fuzz-policy", MFD_CLOEXEC);

	if (fd < 0)
		return 0;
	if (size && write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	memset(&p, 0xa5, sizeof(p));
	int rc = vmm_policy_read(path, &p, why, sizeof(why));
	if (rc == 0) {
		FUZZ_CHECK(p.mode == VMM_RESET_REWRITE || p.mode == VMM_RESET_DROP, "mode %d", (int)p.mode);
		FUZZ_CHECK(p.keep_restores >= 1 && p.keep_restores <= 255, "keep_restores %u", p.keep_restores);
		FUZZ_CHECK(p.range_cap >= 1 && p.range_cap <= ST_MANIFEST_MAX_RANGES, "range_cap %u", p.range_cap);
		FUZZ_CHECK(p.idle_cap >= 1 && p.idle_cap <= 1u << 30, "idle_cap %u", p.idle_cap);
		FUZZ_CHECK(strcmp(p.source, path) == 0, "source %s", p.source);
		/* What calibrate writes is "key = value" lines: a NUL or an
		 * unknown key anywhere is refused, so an accepted file has none. */
		FUZZ_CHECK(!memchr(data, '\0', size), "a file with a NUL byte was accepted");
		/* A file of comments and blank lines sets nothing. */
		bool only_comments = true;
		for (size_t i = 0; i < size && only_comments;) {
			while (i < size && (data[i] == ' ' || data[i] == '\t' || data[i] == '\r'))
				i++;
			only_comments = i == size || data[i] == '\n' || data[i] == '#';
			while (i < size && data[i] != '\n')
				i++;
			i++;
		}
		if (only_comments) {
			struct vmm_policy def;
			vmm_policy_defaults(&def);
			FUZZ_CHECK(p.mode == def.mode && p.keep_restores == def.keep_restores &&
				   p.range_cap == def.range_cap && p.idle_cap == def.idle_cap,
				   "a file of comments changed the policy");
		}
	} else {
		FUZZ_CHECK(rc == VMM_E_BAD_POLICY, "rc %d", rc);
		FUZZ_CHECK(strstr(why, " line "), "the refusal names no line: %s", why);
	}
	close(fd);
	return 0;
}
