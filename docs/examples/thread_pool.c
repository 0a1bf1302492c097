/* thread_pool.c: a pool of sandboxes from one snapshot, shared by threads; each call starts from the snapshot. */
#include <pthread.h>
#include <stdio.h>

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
	strata_host *host;
	pthread_t t[THREADS];

	if (argc != 3) {
		fprintf(stderr, "usage: %s SNAPSHOT_DIR FUNCTION\n", argv[0]);
		return 2;
	}
	fn = argv[2];
	if (strata_host_new(&host) < 0) {
		fprintf(stderr, "host: %s\n", strata_errmsg());
		return 1;
	}
	/* Fewer sandboxes than threads: they are shared, and the pages of the
	 * snapshot are shared by all of them. */
	if (strata_pool_open_dir(host, argv[1], 0, THREADS / 2, &pool) < 0) {
		fprintf(stderr, "pool: %s\n", strata_errmsg());
		strata_host_free(host);
		return 1;
	}
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
