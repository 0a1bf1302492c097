/* ckpt_chain.c: a durable checkpoint after every call, as an agent makes one, for crash_loop.sh to kill -9 mid-chain: each acknowledged checkpoint is printed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strata.h>

/*
 * ckpt_chain STORE GUEST PREFIX N [BACKEND]: a sandbox of GUEST (the
 * simpleguest), then N times: one call to counter_next (the state a restore
 * must bring back), one to fill_pages (16 pages of new content, 64 KiB, at
 * the next 16 heap pages), and a capture tagged PREFIX<k> into STORE, each
 * a child of the one before. After each capture returns, the line
 * "PREFIX<k> ID COUNTER" goes to stdout and is flushed: that checkpoint is
 * acknowledged, and a kill -9 from then on must not lose it. Exit 0 after N,
 * 1 with the error on stderr.
 */
#define PAGES 16
#define HEAP (8u << 20)

static int fail(const char *what, int rc)
{
	fprintf(stderr, "ckpt_chain: %s: %s%s%s\n", what, strata_strerror(rc), strata_errmsg()[0] ? ": " : "",
		strata_errmsg());
	return 1;
}

int main(int argc, char **argv)
{
	strata_host *h = NULL;
	strata_store *st = NULL;
	strata_sandbox *sb = NULL;
	int backend = STRATA_BACKEND_AUTO, rc, status = 1;

	if (argc < 5 || argc > 6) {
		fprintf(stderr, "usage: ckpt_chain STORE GUEST PREFIX N [kvm|process|auto]\n");
		return 2;
	}
	long n = strtol(argv[4], NULL, 10);
	if (argc == 6 && strata_backend_parse(argv[5], &backend) < 0) {
		fprintf(stderr, "ckpt_chain: unknown backend '%s'\n", argv[5]);
		return 2;
	}
	if ((rc = strata_host_new(&h)) < 0)
		return fail("host", rc);
	strata_host_set_backend(h, backend);
	strata_host_set_sizes(h, HEAP, 0, 0, 0);
	if ((rc = strata_store_open(argv[1], 0, &st)) < 0) {
		status = fail(argv[1], rc);
		goto out_free_host;
	}
	if ((rc = strata_sandbox_new(h, argv[2], &sb)) < 0) {
		status = fail(argv[2], rc);
		goto out_close_store;
	}
	for (long k = 0; k < n; k++) {
		struct strata_value fill[3] = {
			{ .type = STRATA_I64, .i64 = PAGES },
			{ .type = STRATA_I64, .i64 = (k * PAGES) % (HEAP / 4096 - PAGES) },
			{ .type = STRATA_I64, .i64 = k + 1 },
		};
		struct strata_result counter = { 0 }, r = { 0 };
		char tag[128], id[STRATA_ID_LEN + 1];

		if ((rc = strata_sandbox_call(sb, "counter_next", NULL, 0, 0, &counter)) < 0) {
			status = fail("counter_next", rc);
			goto out_free_sandbox;
		}
		rc = strata_sandbox_call(sb, "fill_pages", fill, 3, 0, &r);
		strata_result_clear(&r);
		if (rc < 0) {
			status = fail("fill_pages", rc);
			goto out_free_sandbox;
		}
		snprintf(tag, sizeof(tag), "%s%ld", argv[3], k);
		if ((rc = strata_sandbox_capture(sb, st, tag, 0, id)) < 0) {
			status = fail(tag, rc);
			goto out_free_sandbox;
		}
		printf("%s %s %lld\n", tag, id, (long long)counter.i64);
		fflush(stdout);
	}
	status = 0;
out_free_sandbox:
	strata_sandbox_free(sb);
out_close_store:
	strata_store_close(st);
out_free_host:
	strata_host_free(h);
	return status;
}
