/* bench_lazy.c: time to a first result from a registry behind an injected delay (full pull, lazy pull, lazy pull with the working set, the local cold start), the chunk size lazy reads fetch by, and what a working-set record holds per backend. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

extern char **environ;

#define MiB (1024ull * 1024)
#define HEAP "256M"            /* the snapshot: a 256 MiB heap, every page holding data */
#define HEAP_PAGES 65536
/* The first call reads 8 runs of 410 pages spread over the heap: 3,280
 * pages, 5.0% of it (12.8 MiB). */
#define CLUSTERS "8"
#define CLUSTER_PAGES "410"
#define SANDBOXES "8"

/* ------------------------------------------------------ the delaying relay */

/*
 * A TCP relay from a loopback port to the registry that holds every byte
 * for half the round trip in each direction before passing it on, so a
 * request and its answer cost one round trip more than on loopback, and a
 * stream is delayed, not slowed (bytes queue while they wait, as in flight
 * on a long link with a large window). It counts the bytes it passes.
 */
struct relay {
	int lfd, up_port, port;
	_Atomic uint64_t half_rtt_ns;
	_Atomic uint64_t down, up, conns;
	_Atomic uint64_t ranges;  /* requests with a Range header sent upstream */
	_Atomic uint64_t requests; /* HTTP requests sent upstream (their request lines) */
	FILE *log;                 /* $STRATA_BENCH_LAZY_LOG: each request line and Range, when the client sent it */
	uint64_t t0;
	pthread_mutex_t log_lock;
	pthread_t th;
};

struct chunk {
	uint64_t due;
	size_t len, off;
	struct chunk *next;
	uint8_t data[];
};

struct pump {
	struct relay *r;
	int src, dst;
	bool down;
	_Atomic int *refs;
	int *fds;  /* both fds, closed by the last pump */
	size_t match;  /* upstream: how much of RANGE_HEADER the bytes so far end with */
	size_t rmatch; /* ... and of REQUEST_LINE_END */
	uint64_t conn;  /* which connection, for the log */
	char line[160]; /* upstream: the line so far, for the log */
	size_t llen;
};

/* How a Range request shows upstream (libcurl's spelling). */
static const char RANGE_HEADER[] = "\r\nRange: bytes=";

/* How each request line ends (libcurl speaks HTTP/1.1 to the registry). */
static const char REQUEST_LINE_END[] = " HTTP/1.1\r\n";

/* Step a matcher of pattern pat (length len) over byte c; true when it ends there. */
static bool match_step(size_t *m, const char *pat, size_t len, uint8_t c)
{
	if (c == (uint8_t)pat[*m])
		(*m)++;
	else
		*m = c == (uint8_t)pat[0] ? 1 : 0;
	if (*m < len)
		return false;
	*m = 0;
	return true;
}

/* Log a request line or a Range header of the bytes passing upstream. */
static void log_line(struct pump *p, uint8_t c)
{
	if (c != '\n') {
		if (p->llen < sizeof(p->line) - 1)
			p->line[p->llen++] = (char)c;
		return;
	}
	p->line[p->llen && p->line[p->llen - 1] == '\r' ? p->llen - 1 : p->llen] = '\0';
	p->llen = 0;
	if (strstr(p->line, " HTTP/1.1") || strncmp(p->line, "Range: ", 7) == 0) {
		pthread_mutex_lock(&p->r->log_lock);
		fprintf(p->r->log, "%9.3f ms conn %" PRIu64 ": %s\n", (double)(bench_now_ns() - p->r->t0) / 1e6, p->conn,
			p->line);
		pthread_mutex_unlock(&p->r->log_lock);
	}
}

/* A line of the bench's own in the log (which case, which step). */
static void relay_mark(struct relay *r, const char *what, const char *name)
{
	if (!r->log)
		return;
	pthread_mutex_lock(&r->log_lock);
	fprintf(r->log, "%9.3f ms ---- %s %s\n", (double)(bench_now_ns() - r->t0) / 1e6, what, name);
	pthread_mutex_unlock(&r->log_lock);
}

/* Count the Range headers and the requests in bytes passing upstream, across reads. */
static void count_ranges(struct pump *p, const uint8_t *d, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (p->r->log)
			log_line(p, d[i]);
		if (match_step(&p->match, RANGE_HEADER, sizeof(RANGE_HEADER) - 1, d[i]))
			atomic_fetch_add(&p->r->ranges, 1);
		if (match_step(&p->rmatch, REQUEST_LINE_END, sizeof(REQUEST_LINE_END) - 1, d[i]))
			atomic_fetch_add(&p->r->requests, 1);
	}
}

#define QUEUE_MAX (64 * MiB)
#define READ_MAX (256u << 10)

static void *pump_main(void *arg)
{
	struct pump *p = arg;
	struct chunk *head = NULL, **tail = &head;
	size_t queued = 0;
	bool eof = false;

	for (;;) {
		uint64_t now = bench_now_ns();
		/* Pass on what is due. */
		while (head && head->due <= now) {
			ssize_t w = write(p->dst, head->data + head->off, head->len - head->off);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				goto out;
			head->off += (size_t)w;
			if (head->off < head->len)
				continue;
			struct chunk *c = head;
			queued -= c->len;
			head = c->next;
			if (!head)
				tail = &head;
			free(c);
		}
		if (eof && !head)
			break;
		/* Wake when the head is due, to the nanosecond: poll()'s
		 * milliseconds, rounded up so as not to wake early, held each
		 * byte up to 1 ms longer than half the round trip each way, up
		 * to twice the delay at 2 ms. */
		struct timespec wait = { 0, 0 }, *timeout = NULL;
		if (head) {
			uint64_t left = head->due > now ? head->due - now : 0;
			wait = (struct timespec){ (time_t)(left / 1000000000u), (long)(left % 1000000000u) };
			timeout = &wait;
		}
		struct pollfd pf = { .fd = p->src, .events = POLLIN };
		if (eof || queued >= QUEUE_MAX) {
			if (head)
				nanosleep(&(struct timespec){ 0, (long)(head->due > now ? head->due - now : 0) }, NULL);
			continue;
		}
		int n = ppoll(&pf, 1, timeout, NULL);
		if (n < 0 && errno != EINTR)
			break;
		if (n <= 0)
			continue;
		struct chunk *c = malloc(sizeof(*c) + READ_MAX);
		if (!c)
			break;
		ssize_t got = read(p->src, c->data, READ_MAX);
		if (got <= 0) {
			free(c);
			eof = true;
			continue;
		}
		c->due = bench_now_ns() + atomic_load(&p->r->half_rtt_ns);
		c->len = (size_t)got;
		c->off = 0;
		c->next = NULL;
		*tail = c;
		tail = &c->next;
		queued += (size_t)got;
		atomic_fetch_add(p->down ? &p->r->down : &p->r->up, (uint64_t)got);
		if (!p->down)
			count_ranges(p, c->data, (size_t)got);
	}
out:
	shutdown(p->dst, SHUT_WR);
	while (head) {
		struct chunk *c = head;
		head = c->next;
		free(c);
	}
	if (atomic_fetch_sub(p->refs, 1) == 1) {
		close(p->fds[0]);
		close(p->fds[1]);
		free(p->fds);
		free(p->refs);
	}
	free(p);
	return NULL;
}

static void *relay_main(void *arg)
{
	struct relay *r = arg;

	for (;;) {
		int c = accept4(r->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return NULL;
		}
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)r->up_port),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
		if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) < 0) {
			if (s >= 0)
				close(s);
			close(c);
			continue;
		}
		setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		uint64_t conn = atomic_fetch_add(&r->conns, 1);
		int *fds = malloc(2 * sizeof(int));
		_Atomic int *refs = malloc(sizeof(*refs));
		struct pump *up = malloc(sizeof(*up)), *down = malloc(sizeof(*down));
		if (!fds || !refs || !up || !down) {
			free(fds), free((void *)refs), free(up), free(down);
			close(c), close(s);
			continue;
		}
		fds[0] = c, fds[1] = s;
		atomic_init(refs, 2);
		*up = (struct pump){ r, c, s, false, refs, fds, 0, 0, conn, "", 0 };
		*down = (struct pump){ r, s, c, true, refs, fds, 0, 0, conn, "", 0 };
		pthread_t t1, t2;
		pthread_attr_t at;
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		pthread_create(&t1, &at, pump_main, up);
		pthread_create(&t2, &at, pump_main, down);
		pthread_attr_destroy(&at);
	}
}

static int relay_start(struct relay *r, int up_port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);

	r->up_port = up_port;
	const char *log = getenv("STRATA_BENCH_LAZY_LOG");
	if (log && *log && (r->log = fopen(log, "we")))
		setvbuf(r->log, NULL, _IOLBF, 0);
	r->t0 = bench_now_ns();
	pthread_mutex_init(&r->log_lock, NULL);
	if ((r->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -errno;
	if (bind(r->lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(r->lfd, 64) < 0 ||
	    getsockname(r->lfd, (struct sockaddr *)&a, &len) < 0) {
		close(r->lfd);
		return -errno;
	}
	r->port = ntohs(a.sin_port);
	return -pthread_create(&r->th, NULL, relay_main, r);
}

/* ------------------------------------------------------------- the cases */

struct lazy_bench {
	char dir[256];
	char reg_port[16];
	pid_t reg;
	struct relay relay;
	char src[320];         /* the store that made the snapshot (complete) */
	char ref_plain[128];   /* the snapshot in a repository without its working set */
	char ref_ws[128];      /* and with it */
	unsigned seq;
	const char *mode;      /* the case running */
	/* per iteration, for the notes */
	uint64_t bytes[64], run_ns[64];
	uint64_t pull_reqs[64], pull_conns[64], run_reqs[64], run_conns[64];
	unsigned n;
	uint64_t ws_bytes;     /* the working set's pages in bytes */
};

/* Run the strata command with args (NULL-terminated), output to /dev/null
 * (or stdout to out_path); its exit status or -errno. */
static int strata(const char *out_path, const char *const *args)
{
	const char *argv[24];
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int st, rc, n = 0;

	argv[n++] = bench_strata_path();
	for (; *args && n < 23; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, out_path ? out_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	rc = posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc)
		return -rc;
	if (waitpid(pid, &st, 0) < 0)
		return -errno;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* A fresh store for one iteration. */
static int fresh_store(struct lazy_bench *lb, char *path, size_t len)
{
	snprintf(path, len, "%s/it%u", lb->dir, lb->seq++);
	const char *a[] = { "--store", path, "init", "--sync", "none", NULL };
	(void)len;
	return strata(NULL, a) == 0 ? 0 : -EIO;
}

static void store_drop(const char *path)
{
	bench_rm_rf(path);
}

static const char *call_args[] = { "--call", "touch_clusters", CLUSTERS, CLUSTER_PAGES, NULL };

/* strata --store S run TARGET [--via-fuse] --call touch_clusters ... */
static int run_first(const char *store, const char *target, bool via_fuse)
{
	const char *a[12] = { "--store", store, "run", target };
	int n = 4;
	if (via_fuse)
		a[n++] = "--via-fuse";
	for (int i = 0; call_args[i]; i++)
		a[n++] = call_args[i];
	a[n] = NULL;
	return strata(NULL, a) == 0 ? 0 : -EIO;
}

static void lb_free(struct lazy_bench *lb)
{
	if (lb->reg > 0) {
		kill(lb->reg, SIGTERM);
		waitpid(lb->reg, NULL, 0);
	}
	bench_rm_rf(lb->dir);
	free(lb);
}

/* The snapshot, pushed twice: without its working set, then with it. */
static int lb_setup(struct lazy_bench **out)
{
	struct lazy_bench *lb = calloc(1, sizeof(*lb));
	char ref[200];
	int rc;

	if (!lb)
		return -ENOMEM;
	if ((rc = bench_tmpdir("strata-bench-lazy", lb->dir, sizeof(lb->dir))) < 0) {
		free(lb);
		return rc;
	}
	snprintf(lb->src, sizeof(lb->src), "%s/src", lb->dir);
	if ((rc = bench_registry_start(lb->dir, lb->reg_port, &lb->reg)) < 0 ||
	    (rc = relay_start(&lb->relay, atoi(lb->reg_port))) < 0)
		goto out_free;
	const char *init[] = { "--store", lb->src, "init", "--sync", "none", NULL };
	const char *make[] = { "--store", lb->src, "run", bench_guest_path(), "--heap", HEAP, "--call", "touch_pages",
			       "65536", "--snapshot", "app", NULL };
	snprintf(ref, sizeof(ref), "127.0.0.1:%s/plain/app:v1", lb->reg_port);
	const char *push1[] = { "--store", lb->src, "push", "--insecure", "app", ref, NULL };
	if (strata(NULL, init) != 0 || strata(NULL, make) != 0 || strata(NULL, push1) != 0) {
		rc = -EIO;
		goto out_free;
	}
	const char *rec[] = { "--store", lb->src, "run", "app", "--call", "touch_clusters", CLUSTERS, CLUSTER_PAGES,
			      "--record-working-set", NULL };
	char ref2[200], json[400];
	snprintf(ref2, sizeof(ref2), "127.0.0.1:%s/ws/app:v1", lb->reg_port);
	const char *push2[] = { "--store", lb->src, "push", "--insecure", "app", ref2, NULL };
	snprintf(json, sizeof(json), "%s/show.json", lb->dir);
	const char *show[] = { "--store", lb->src, "show", "app", "--json", NULL };
	if (strata(NULL, rec) != 0 || strata(NULL, push2) != 0 || strata(json, show) != 0) {
		rc = -EIO;
		goto out_free;
	}
	FILE *f = fopen(json, "re");
	char line[512];
	while (f && fgets(line, sizeof(line), f)) {
		char *p = strstr(line, "\"bytes\": ");
		if (p && !lb->ws_bytes)
			lb->ws_bytes = strtoull(p + 9, NULL, 10);
	}
	if (f)
		fclose(f);
	snprintf(lb->ref_plain, sizeof(lb->ref_plain), "127.0.0.1:%d/plain/app:v1", lb->relay.port);
	snprintf(lb->ref_ws, sizeof(lb->ref_ws), "127.0.0.1:%d/ws/app:v1", lb->relay.port);
	*out = lb;
	return 0;
out_free:
	lb_free(lb);
	return rc;
}

struct lazy_case {
	struct lazy_bench *lb;
	enum { C_FULL, C_LAZY, C_LAZY_WS, C_LOCAL, C_POOL8 } kind;
	const char *name;
};

/*
 * One iteration: a fresh store; for the lazy cases it is mounted first
 * (untimed) and the sandbox restores from the mount. Timed: the pull and
 * the first call's result.
 */
static int iter_case(void *state, struct bench_timer *t)
{
	struct lazy_case *lc = state;
	struct lazy_bench *lb = lc->lb;
	char store[400], mnt[420], snap[480];
	int rc = 0;

	if ((rc = fresh_store(lb, store, sizeof(store))) < 0)
		return rc;
	snprintf(mnt, sizeof(mnt), "%s.mnt", store);
	snprintf(snap, sizeof(snap), "%s/snapshots/v1", mnt);
	bool lazy = lc->kind == C_LAZY || lc->kind == C_LAZY_WS || lc->kind == C_POOL8;
	const char *ref = lc->kind == C_LAZY ? lb->ref_plain : lb->ref_ws;
	if (lc->kind == C_LOCAL) {
		/* The floor: the snapshot complete in the store (pulled untimed). */
		const char *pull[] = { "--store", store, "pull", "--insecure", lb->ref_plain, NULL };
		if (strata(NULL, pull) != 0)
			rc = -EIO;
		bench_timer_start(t);
		if (rc == 0)
			rc = run_first(store, "v1", false);
		bench_timer_stop(t);
		goto out;
	}
	if (lazy) {
		if (mkdir(mnt, 0755) < 0)
			return -errno;
		const char *mount[] = { "--store", store, "mount", mnt, NULL };
		if (strata(NULL, mount) != 0) {
			rc = -EIO;
			goto out;
		}
	}
	uint64_t down0 = atomic_load(&lb->relay.down), req0 = atomic_load(&lb->relay.requests),
		 conn0 = atomic_load(&lb->relay.conns);
	relay_mark(&lb->relay, "pull", lc->name);
	bench_timer_start(t);
	const char *pull_full[] = { "--store", store, "pull", "--insecure", ref, NULL };
	const char *pull_lazy[] = { "--store", store, "pull", "--insecure", "--lazy", ref, NULL };
	if (strata(NULL, lazy ? pull_lazy : pull_full) != 0)
		rc = -EIO;
	uint64_t t_run = bench_now_ns(), req1 = atomic_load(&lb->relay.requests),
		 conn1 = atomic_load(&lb->relay.conns);
	relay_mark(&lb->relay, "run", lc->name);
	if (rc == 0 && lc->kind == C_POOL8) {
		const char *pool[] = { "--store", store, "pool", snap, "-n", SANDBOXES, "--via-fuse", "--call",
				       "touch_clusters", CLUSTERS, CLUSTER_PAGES, NULL };
		rc = strata(NULL, pool) == 0 ? 0 : -EIO;
	} else if (rc == 0) {
		rc = run_first(store, lazy ? snap : "v1", lazy);
	}
	bench_timer_stop(t);
	relay_mark(&lb->relay, "done", lc->name);
	if (rc == 0 && lb->n < 64) {
		lb->bytes[lb->n] = atomic_load(&lb->relay.down) - down0;
		lb->run_ns[lb->n] = bench_now_ns() - t_run;
		lb->pull_reqs[lb->n] = req1 - req0;
		lb->pull_conns[lb->n] = conn1 - conn0;
		lb->run_reqs[lb->n] = atomic_load(&lb->relay.requests) - req1;
		lb->run_conns[lb->n] = atomic_load(&lb->relay.conns) - conn1;
		lb->n++;
	}
	if (lazy) {
		const char *um[] = { "umount", mnt, NULL };
		strata(NULL, um);
		rmdir(mnt);
	}
out:
	store_drop(store);
	return rc;
}

/* The case's state is made before bench_run: hand it through. */
static int pass_state(void **state, const void *arg)
{
	*state = (void *)arg;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	return n ? v[n / 2] : 0;
}

/*
 * One request and its answer's headers on a fresh connection to port (a
 * HEAD of /v2/, which the registry answers without a body): the time from
 * the request's write to the end of the headers, or 0 on failure.
 */
static uint64_t probe_ns(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	static const char req[] = "HEAD /v2/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	uint64_t t = 0;
	size_t m = 0;
	char buf[512];

	if (fd < 0)
		return 0;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		goto out;
	uint64_t t0 = bench_now_ns();
	if (write(fd, req, sizeof(req) - 1) != (ssize_t)(sizeof(req) - 1))
		goto out;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n <= 0)
			goto out;
		for (ssize_t i = 0; i < n; i++)
			if (match_step(&m, "\r\n\r\n", 4, (uint8_t)buf[i])) {
				t = bench_now_ns() - t0;
				goto out;
			}
	}
out:
	close(fd);
	return t;
}

/*
 * What the relay adds to one request and its answer at its current delay:
 * the median of 9 probes through it less the median of 9 straight to the
 * registry (the case names the round trip; this is the one the bytes met).
 */
static double relay_added_ms(struct lazy_bench *lb)
{
	uint64_t via[9], direct[9];
	unsigned n = 0;

	for (unsigned i = 0; i < 9; i++) {
		uint64_t v = probe_ns(lb->relay.port), d = probe_ns(atoi(lb->reg_port));
		if (v && d) {
			via[n] = v;
			direct[n++] = d;
		}
	}
	return n ? ((double)median(via, n) - (double)median(direct, n)) / 1e6 : -1;
}

/* ------------------------------------------------ the chunk size of a lazy read */

/*
 * Which chunk size a lazy pull should fetch by: one 64 MiB layer of random
 * pages pushed with chunk indexes of 64 KiB to 1 MiB; per iteration a fresh
 * store pulls it --lazy and mounts it (untimed), then the timed part reads
 * what a first call might through a shared mapping of the layer file (page
 * faults, as a restored guest makes them): 5% of the layer, 100 runs of 8
 * pages at fixed pseudo-random places. Bytes and Range requests are counted
 * at the relay.
 */
#define CHUNK_LAYER (64 * MiB)
#define TOUCH_RUNS 100
#define TOUCH_RUN_PAGES 8
static const unsigned chunk_kib[] = { 64, 128, 256, 512, 1024 };

struct chunk_case {
	struct lazy_bench *lb;
	unsigned kib, delay_ms;
	const uint32_t *pages;  /* the pages read, ascending */
	size_t npages;
	uint64_t bytes[64], ranges[64];
	unsigned n;
};

/* The pages a first call reads: TOUCH_RUNS runs of TOUCH_RUN_PAGES at
 * distinct pseudo-random starts (fixed seed), ascending. */
static size_t touch_pages(uint32_t *out)
{
	const uint32_t pages = (uint32_t)(CHUNK_LAYER / 4096) - TOUCH_RUN_PAGES;
	uint32_t starts[TOUCH_RUNS];
	uint64_t x = 2026;
	size_t n = 0;

	while (n < TOUCH_RUNS) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		uint32_t s = (uint32_t)(x % pages);
		bool dup = false;
		for (size_t i = 0; i < n; i++)
			dup |= starts[i] == s;
		if (!dup)
			starts[n++] = s;
	}
	size_t m = 0;
	for (size_t i = 0; i < TOUCH_RUNS; i++)
		for (uint32_t k = 0; k < TOUCH_RUN_PAGES; k++)
			out[m++] = starts[i] + k;
	/* ascending, without the pages two runs share */
	for (size_t i = 1; i < m; i++)
		for (size_t j = i; j > 0 && out[j - 1] > out[j]; j--) {
			uint32_t t = out[j];
			out[j] = out[j - 1];
			out[j - 1] = t;
		}
	size_t u = 0;
	for (size_t i = 0; i < m; i++)
		if (u == 0 || out[u - 1] != out[i])
			out[u++] = out[i];
	return u;
}

/* The layer of snapshot `base` under a mount: its one file in layers/. */
static int layer_open(const char *mnt, char *path, size_t len)
{
	char dir[600];
	snprintf(dir, sizeof(dir), "%s/snapshots/base/layers", mnt);
	DIR *d = opendir(dir);
	if (!d)
		return -errno;
	struct dirent *e;
	int fd = -ENOENT;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, len, "%s/%s", dir, e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			fd = -errno;
		break;
	}
	closedir(d);
	return fd;
}

static int iter_chunks(void *state, struct bench_timer *t)
{
	struct chunk_case *cc = state;
	struct lazy_bench *lb = cc->lb;
	char store[400], mnt[420], ref[200], layer[900];
	int rc = 0, fd = -1;

	if ((rc = fresh_store(lb, store, sizeof(store))) < 0)
		return rc;
	snprintf(mnt, sizeof(mnt), "%s.mnt", store);
	snprintf(ref, sizeof(ref), "127.0.0.1:%d/chunks/c%u:v1", lb->relay.port, cc->kib);
	atomic_store(&lb->relay.half_rtt_ns, 0);
	const char *pull[] = { "--store", store, "pull", "--insecure", "--lazy", "--tag", "base", ref, NULL };
	const char *mount[] = { "--store", store, "mount", mnt, NULL };
	if (strata(NULL, pull) != 0 || mkdir(mnt, 0755) < 0) {
		rc = -EIO;
		goto out_store;
	}
	if (strata(NULL, mount) != 0) {
		rc = -EIO;
		goto out_dir;
	}
	if ((fd = layer_open(mnt, layer, sizeof(layer))) < 0) {
		rc = fd;
		goto out_umount;
	}
	const volatile uint8_t *m = mmap(NULL, CHUNK_LAYER, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		rc = -errno;
		goto out_close;
	}
	atomic_store(&lb->relay.half_rtt_ns, (uint64_t)cc->delay_ms * 1000000 / 2);
	uint64_t down0 = atomic_load(&lb->relay.down), ranges0 = atomic_load(&lb->relay.ranges);
	unsigned sum = 0;
	bench_timer_start(t);
	for (size_t i = 0; i < cc->npages; i++)
		sum += m[(size_t)cc->pages[i] * 4096];
	bench_timer_stop(t);
	(void)sum;
	if (cc->n < 64) {
		cc->bytes[cc->n] = atomic_load(&lb->relay.down) - down0;
		cc->ranges[cc->n] = atomic_load(&lb->relay.ranges) - ranges0;
		cc->n++;
	}
	munmap((void *)m, CHUNK_LAYER);
out_close:
	close(fd);
out_umount:
	atomic_store(&lb->relay.half_rtt_ns, 0);
	const char *um[] = { "umount", mnt, NULL };
	strata(NULL, um);
out_dir:
	rmdir(mnt);
out_store:
	store_drop(store);
	return rc;
}

/* One image of random pages, pushed once per chunk size. */
static int chunks_setup(struct lazy_bench *lb)
{
	char img[400], ref[200], kib[16];
	int rc = 0;

	snprintf(img, sizeof(img), "%s/chunks.img", lb->dir);
	uint8_t *buf = malloc(MiB);
	int fd = open(img, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	for (uint64_t off = 0; buf && fd >= 0 && off < CHUNK_LAYER && rc == 0; off += MiB) {
		bench_fill(buf, MiB, 0xc4u + off);
		if (write(fd, buf, MiB) != (ssize_t)MiB)
			rc = -EIO;
	}
	if (!buf || fd < 0)
		rc = -ENOMEM;
	free(buf);
	if (fd >= 0)
		close(fd);
	const char *ingest[] = { "--store", lb->src, "debug", "ingest", img, "--tag", "chunks", NULL };
	if (rc == 0 && strata(NULL, ingest) != 0)
		rc = -EIO;
	unlink(img);
	for (size_t i = 0; rc == 0 && i < sizeof(chunk_kib) / sizeof(chunk_kib[0]); i++) {
		snprintf(ref, sizeof(ref), "127.0.0.1:%s/chunks/c%u:v1", lb->reg_port, chunk_kib[i]);
		snprintf(kib, sizeof(kib), "%u", chunk_kib[i] * 1024);
		const char *push[] = { "--store", lb->src, "push", "--insecure", "--chunk-size", kib, "chunks", ref, NULL };
		if (strata(NULL, push) != 0)
			rc = -EIO;
	}
	return rc;
}

static void bench_chunks(struct bench *b, struct lazy_bench *lb)
{
	static const unsigned delays_ms[] = { 0, 2, 20 };
	static uint32_t pages[TOUCH_RUNS * TOUCH_RUN_PAGES];
	size_t npages = touch_pages(pages);
	char name[128], note[160];
	int rc;

	if (!bench_selected_under(b, "lazy/chunks/"))
		return;
	if ((rc = chunks_setup(lb)) < 0) {
		fprintf(stderr, "bench lazy: chunk setup failed: %s\n", strerror(-rc));
		return;
	}
	bench_note(b, "lazy/chunks/touched_bytes", (double)npages * 4096, "B");
	for (size_t d = 0; d < sizeof(delays_ms) / sizeof(delays_ms[0]); d++)
		for (size_t k = 0; k < sizeof(chunk_kib) / sizeof(chunk_kib[0]); k++) {
			struct chunk_case cc = { .lb = lb, .kib = chunk_kib[k], .delay_ms = delays_ms[d],
						 .pages = pages, .npages = npages };
			snprintf(name, sizeof(name), "lazy/chunks/%uKiB/%ums", chunk_kib[k], delays_ms[d]);
			if (!bench_selected(b, name))
				continue;
			struct bench_case c = { .name = name, .setup = pass_state, .iter = iter_chunks, .arg = &cc,
						.warmup = 1, .iters = bench_quick(b) ? 2 : 5 };
			bench_run(b, &c);
			if (!cc.n)
				continue;
			snprintf(note, sizeof(note), "%s/bytes_fetched", name);
			bench_note(b, note, (double)median(cc.bytes, cc.n), "B");
			snprintf(note, sizeof(note), "%s/range_requests", name);
			bench_note(b, note, (double)median(cc.ranges, cc.n), "");
		}
}

/* ------------------------------------------- what a working-set record holds */

/*
 * A snapshot with a 32 MiB heap, every page holding data; for each first
 * call and each backend, `run --record-working-set` and the pages its record
 * holds. KVM records what the guest's mapping has present, rounded out by
 * the kernel's fault-around; the process backend's record is page-exact
 * (docs/workingset.md). No registry needed.
 */
static long record_pages(const char *json_path)
{
	json_error_t e;
	json_t *root = json_load_file(json_path, 0, &e);
	json_t *p = json_object_get(json_object_get(root, "working_set"), "pages");
	long pages = json_is_integer(p) ? (long)json_integer_value(p) : -1;
	json_decref(root);
	return pages;
}

static void bench_ws_record(struct bench *b)
{
	static const struct {
		const char *name;
		const char *args[4];
	} calls[] = {
		{ "echo", { "echo", "hi", NULL } },
		{ "touch_clusters_1_800", { "touch_clusters", "1", "800", NULL } },
		{ "touch_clusters_8_100", { "touch_clusters", "8", "100", NULL } },
		{ "touch_strided_100_20", { "touch_strided", "100", "20", NULL } },
	};
	static const char *const backends[] = { "kvm", "process" };
	char dir[256], store[300], json[320], name[160];
	long pages[4][2];

	if (!bench_selected_under(b, "lazy/working_set_record/") || bench_tmpdir("strata-bench-ws", dir, sizeof(dir)) < 0)
		return;
	snprintf(store, sizeof(store), "%s/s", dir);
	snprintf(json, sizeof(json), "%s/show.json", dir);
	const char *init[] = { "--store", store, "init", "--sync", "none", NULL };
	const char *make[] = { "--store", store, "run", bench_guest_path(), "--heap", "32M", "--call", "touch_pages",
			       "8192", "--snapshot", "ws", NULL };
	if (strata(NULL, init) != 0 || strata(NULL, make) != 0) {
		fprintf(stderr, "bench lazy: working-set snapshot failed\n");
		goto out;
	}
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
		for (size_t k = 0; k < 2; k++) {
			const char *run[12] = { "--store", store, "--backend", backends[k], "run", "ws", "--call" };
			int n = 7;
			for (int a = 0; calls[i].args[a]; a++)
				run[n++] = calls[i].args[a];
			run[n++] = "--record-working-set";
			run[n] = NULL;
			const char *show[] = { "--store", store, "show", "ws", "--json", NULL };
			pages[i][k] = -1;
			if (strata(NULL, run) != 0 || strata(json, show) != 0)
				continue;  /* e.g. no KVM here: that backend's rows are missing */
			pages[i][k] = record_pages(json);
			snprintf(name, sizeof(name), "lazy/working_set_record/%s/%s", calls[i].name, backends[k]);
			if (pages[i][k] >= 0)
				bench_note(b, name, (double)pages[i][k], "pages");
		}
out:
	bench_rm_rf(dir);
}


void bench_lazy(struct bench *b)
{
	struct lazy_bench *lb;
	static const unsigned delays_ms[] = { 0, 2, 20, 60 };
	static const struct {
		const char *name;
		int kind;
	} kinds[] = { { "full_pull_then_run", C_FULL }, { "lazy", C_LAZY }, { "lazy_working_set", C_LAZY_WS },
		      { "pool8_lazy_working_set", C_POOL8 } };
	int rc;

	if (!bench_selected_under(b, "lazy/"))
		return;
	bench_ws_record(b);
	if (!bench_have("docker-registry")) {
		bench_note(b, "lazy/skipped_no_docker_registry", 1, "");
		return;
	}
	if ((rc = lb_setup(&lb)) < 0) {
		fprintf(stderr, "bench lazy: setup failed: %s\n", strerror(rc < 0 ? -rc : rc));
		return;
	}
	unsigned it = bench_quick(b) ? 3 : 7;
	bench_note(b, "lazy/working_set_bytes", (double)lb->ws_bytes, "B");
	/* A strata without lazy pulls runs the full pull and the floor only. */
	char help[480];
	snprintf(help, sizeof(help), "%s/pull-help", lb->dir);
	const char *ph[] = { "pull", "--help", NULL };
	strata(help, ph);
	FILE *hf = fopen(help, "re");
	bool has_lazy = false;
	char hl[256];
	while (hf && fgets(hl, sizeof(hl), hf))
		has_lazy |= strstr(hl, "--lazy") != NULL;
	if (hf)
		fclose(hf);
	if (!has_lazy)
		bench_note(b, "lazy/skipped_lazy_cases_no_pull_lazy", 1, "");
	struct lazy_case local = { lb, C_LOCAL, "lazy/local_cold_start" };
	const struct bench_case lc = { .name = "lazy/local_cold_start", .setup = pass_state, .iter = iter_case,
				       .arg = &local, .iters = it, .is_floor = true };
	/* The floor of every case below: it runs whenever one of them does. */
	bool any = false;
	for (size_t d = 0; d < sizeof(delays_ms) / sizeof(delays_ms[0]); d++)
		for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
			char name[128];
			snprintf(name, sizeof(name), "lazy/%s/%ums", kinds[k].name, delays_ms[d]);
			any |= bench_selected(b, name);
		}
	if (bench_selected(b, lc.name) || any)
		bench_run(b, &lc);
	for (size_t d = 0; d < sizeof(delays_ms) / sizeof(delays_ms[0]); d++) {
		atomic_store(&lb->relay.half_rtt_ns, (uint64_t)delays_ms[d] * 1000000 / 2);
		/* The round trip the bytes meet at this delay, as measured: a
		 * relay that held them longer than it says would show here. */
		char rname[64];
		snprintf(rname, sizeof(rname), "lazy/relay_added_rtt/%ums", delays_ms[d]);
		if (bench_selected(b, rname) || any)
			bench_note(b, rname, relay_added_ms(lb), "ms");
		for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
			char name[128], note[160];
			struct lazy_case cs = { lb, kinds[k].kind, name };
			snprintf(name, sizeof(name), "lazy/%s/%ums", kinds[k].name, delays_ms[d]);
			if (!bench_selected(b, name) || (kinds[k].kind != C_FULL && !has_lazy))
				continue;
			struct bench_case c = { .name = name, .floor = "lazy/local_cold_start", .setup = pass_state,
						.iter = iter_case, .arg = &cs, .iters = it };
			lb->n = 0;
			bench_run(b, &c);
			if (!lb->n)
				continue;
			unsigned n = lb->n;
			uint64_t bytes = median(lb->bytes, n), run = median(lb->run_ns, n);
			snprintf(note, sizeof(note), "%s/bytes_fetched", name);
			bench_note(b, note, (double)bytes, "B");
			snprintf(note, sizeof(note), "%s/bytes_vs_working_set", name);
			bench_note(b, note, lb->ws_bytes ? (double)bytes / (double)lb->ws_bytes : 0, "x");
			snprintf(note, sizeof(note), "%s/run_after_pull", name);
			bench_note(b, note, (double)run / 1e6, "ms");
			/* What the delay cost, in round trips: the time over a cold
			 * start from the store, per RTT (the goal: at most 5 with the
			 * working set, bench.c's goals[]). */
			double med = bench_median(b, name), floor = bench_median(b, lc.name);
			if (delays_ms[d] && med > 0 && floor > 0) {
				snprintf(note, sizeof(note), "%s/round_trips_over_local", name);
				bench_note(b, note, (med - floor) / ((double)delays_ms[d] * 1e6), "");
			}
			/* Where the round trips go: requests and connections at the
			 * relay, in the pull and in the run after it. */
			const struct {
				const char *what;
				uint64_t *v;
			} counts[] = { { "requests_pull", lb->pull_reqs }, { "connections_pull", lb->pull_conns },
				       { "requests_run", lb->run_reqs }, { "connections_run", lb->run_conns } };
			for (size_t j = 0; j < sizeof(counts) / sizeof(counts[0]); j++) {
				snprintf(note, sizeof(note), "%s/%s", name, counts[j].what);
				bench_note(b, note, (double)median(counts[j].v, n), "");
			}
		}
	}
	if (has_lazy)
		bench_chunks(b, lb);
	lb_free(lb);
}
