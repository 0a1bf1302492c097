/* thread_pool.c: a pool of sandboxes from one snapshot, shared by threads; each call starts from the snapshot. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#include <vmm/vmm.h>

#define THREADS 4
#define CALLS 25

static struct vmm_pool *pool;
static const char *fn;
static long long first = -1;
static int differ, failed;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void *worker(void *arg)
{
	(void)arg;
	for (int i = 0; i < CALLS; i++) {
		struct vmm_sandbox *sb = NULL;
		struct vmm_result res = { 0 };
		int rc = vmm_pool_get(pool, &sb);

		if (rc == -EAGAIN) {  /* every sandbox is out: wait for one */
			sched_yield();
			i--;
			continue;
		}
		if (rc == 0)
			rc = vmm_sandbox_call(sb, fn, NULL, 0, &res);
		pthread_mutex_lock(&lock);
		if (rc < 0)
			failed++;
		else if (first < 0)
			first = res.i64;
		else if (res.i64 != first)
			differ++;
		pthread_mutex_unlock(&lock);
		vmm_result_clear(&res);
		if (sb)
			vmm_pool_put(pool, sb);  /* restored in place, idle again */
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct vmm_snapdir *dir;
	struct vmm_error err;
	pthread_t t[THREADS];

	if (argc != 3) {
		fprintf(stderr, "usage: %s SNAPSHOT_DIR FUNCTION\n", argv[0]);
		return 2;
	}
	fn = argv[2];
	/* The host owns what the pool's sandboxes share (VM shells, warm
	 * sandboxes, parsed manifests: default limits) and the reset policy. */
	struct vmm_host *host;
	if (vmm_host_new(NULL, &host, &err) < 0) {
		fprintf(stderr, "host: %s\n", err.message);
		return 1;
	}
	if (vmm_snapdir_open(host, argv[1], 0, &dir, &err) < 0) {
		fprintf(stderr, "%s: %s\n", argv[1], err.message);
		vmm_host_free(host);
		return 1;
	}
	struct vmm_config cfg = { .host = host };
	/* Fewer sandboxes than threads: they are shared, and the pages of the
	 * snapshot are shared by all of them. */
	if (vmm_pool_new(vmm_snapdir_manifest(dir), vmm_snapdir_layer_open, dir, &cfg, THREADS / 2, &pool, &err) < 0) {
		fprintf(stderr, "pool: %s\n", err.message);
		vmm_host_free(host);
		vmm_snapdir_close(dir);
		return 1;
	}
	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	printf("%d calls on %u sandboxes: every result %lld, %d differed, %d failed\n", THREADS * CALLS,
	       vmm_pool_size(pool), first, differ, failed);
	vmm_pool_free(pool);
	vmm_host_free(host); /* after every sandbox made with it */
	vmm_snapdir_close(dir);
	return differ || failed ? 1 : 0;
}
