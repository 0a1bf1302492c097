/* thread_pool.c: a pool of sandboxes from one snapshot, shared by threads; each call starts from the snapshot. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <strata.h>

#define THREADS 4
#define CALLS 25

static strata_pool *pool;
static const char *fn;
static long long first = -1;
static int differ, failed;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void *worker(void *arg)
{
	(void)arg;
	for (int i = 0; i < CALLS; i++) {
		strata_sandbox *sb = NULL;
		struct strata_result res = { 0 };
		/* Wait up to a second for an idle sandbox. */
		int rc = strata_pool_get(pool, 1000000000u, &sb);

		if (rc == 0)
			rc = strata_sandbox_call(sb, fn, NULL, 0, 0, &res);
		pthread_mutex_lock(&lock);
		if (rc < 0)
			failed++;
		else if (first < 0)
			first = res.i64;
		else if (res.i64 != first)
			differ++;
		pthread_mutex_unlock(&lock);
		strata_result_clear(&res);
		if (sb)
			strata_pool_put(pool, sb); /* restored in place, idle again */
	}
	return NULL;
}

int main(int argc, char **argv)
{
	strata_host *host = NULL;
	pthread_t t[THREADS];
	int backend = STRATA_BACKEND_AUTO, bad = 0;

	/* A last --backend auto|kvm|process (strata_backend_parse's words):
	 * where the sandboxes run; auto is KVM where /dev/kvm opens. */
	if (argc > 2 && strcmp(argv[argc - 2], "--backend") == 0) {
		bad = strata_backend_parse(argv[argc - 1], &backend) < 0;
		argc -= 2;
	}
	if (argc != 3 || bad) {
		fprintf(stderr, "usage: %s SNAPSHOT_DIR FUNCTION [--backend auto|kvm|process]\n", argv[0]);
		return 2;
	}
	fn = argv[2];
	if (strata_host_new(&host) < 0 || strata_host_set_backend(host, backend) < 0) {
		fprintf(stderr, "host: %s\n", strata_errmsg());
		strata_host_free(host);
		return 1;
	}
	/* Fewer sandboxes than threads: they are shared, and the pages of the
	 * snapshot are shared by all of them. */
	if (strata_pool_open_dir(host, argv[1], 0, THREADS / 2, &pool) < 0) {
		fprintf(stderr, "pool: %s\n", strata_errmsg());
		strata_host_free(host);
		return 1;
	}
	/* AUTO resolved: where the pool's sandboxes run. */
	printf("backend: %s\n", strata_backend_name(strata_host_backend(host)));
	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	printf("%d calls on %u sandboxes: every result %lld, %d differed, %d failed\n", THREADS * CALLS, THREADS / 2,
	       first, differ, failed);
	strata_pool_free(pool);
	strata_host_free(host); /* after every sandbox and pool made with it */
	return differ || failed ? 1 : 0;
}
