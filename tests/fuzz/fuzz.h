/* fuzz.h: what every fuzz target shares: the libFuzzer entry point and a failed-invariant stop. */
#ifndef STRATA_TESTS_FUZZ_H
#define STRATA_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Each target defines it; libFuzzer (-Dfuzz=true) or replay.c calls it once per input. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An invariant the target checks: abort with where and what, so libFuzzer
 * keeps the input and the replay driver names it. */
#define FUZZ_CHECK(cond, ...)                                                                  \
	do {                                                                                   \
		if (!(cond)) {                                                                 \
			fprintf(stderr, "%s:%d: invariant failed: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                          \
			fputc('\n', stderr);                                                   \
			abort();                                                               \
		}                                                                              \
	} while (0)

#endif
