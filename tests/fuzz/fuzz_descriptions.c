/* fuzz_descriptions.c: fuzz target 4, the vCPU and guest descriptions of a manifest: decode, and a vCPU state round-trips. */
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "vmm/snap_int.h"

/* The input is tried as both; the first byte picks which runs first, so
 * either decoder sees every mutation. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vmm_vcpu_state st, back;
	struct vmm_layout l;
	struct vmm_fn *fns = NULL;
	unsigned nfns = 0;
	char why[256] = "", *json = NULL;
	char *text = malloc(size + 1);

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	memset(&st, 0, sizeof(st));
	if (vmm_vcpu_from_json(text, &st, why, sizeof(why)) == 0) {
		FUZZ_CHECK(st.version == VMM_VCPU_STATE_VERSION, "version %u", st.version);
		FUZZ_CHECK(vmm_vcpu_to_json(&st, &json) == 0, "a decoded state does not encode");
		memset(&back, 0, sizeof(back));
		FUZZ_CHECK(vmm_vcpu_from_json(json, &back, why, sizeof(why)) == 0, "its encoding does not decode: %s",
			   why);
		char *json2 = NULL;
		FUZZ_CHECK(vmm_vcpu_to_json(&back, &json2) == 0, "the decoded encoding does not encode");
		FUZZ_CHECK(strcmp(json, json2) == 0, "decode -> encode -> decode changed the state");
		free(json2);
		free(json);
	} else {
		FUZZ_CHECK(why[0], "a refusal says why");
	}
	why[0] = '\0';
	if (vmm_guest_from_json(text, &l, &fns, &nfns, why, sizeof(why)) == 0) {
		FUZZ_CHECK(nfns == 0 || fns, "%u functions, no table", nfns);
		for (unsigned i = 0; i < nfns; i++)
			FUZZ_CHECK(strnlen(fns[i].name, sizeof(fns[i].name)) < sizeof(fns[i].name) &&
				   strnlen(fns[i].sig, sizeof(fns[i].sig)) < sizeof(fns[i].sig) &&
				   fns[i].type.nparams <= STRATA_MAX_ARGS, "function %u", i);
		free(fns);
	} else {
		FUZZ_CHECK(why[0], "a refusal says why");
		FUZZ_CHECK(!fns, "a refusal leaves no table");
	}
	free(text);
	return 0;
}
