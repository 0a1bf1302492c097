/* bench_oci.c: push and pull through a loopback registry, beside a plain curl transfer and skopeo copy of one whole-memory layer. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <ftw.h>

#include "bench.h"
#include "index/dist/dist.h"
#include "index/index.h"
#ifdef IX_DELTA_DEPTH_MAX
#include "index/index_int.h" /* the record as stored: a manifest delta or the whole text */
#endif
#include "store/store.h"

extern char **environ;

#define MiB (1024ull * 1024)
#define IMAGE (256 * MiB)     /* guest memory of the snapshot */
#define NONZERO (64 * MiB)    /* of it non-zero */
#define CHANGE_PAGES 1024     /* the child's scattered change: 4 MiB */
#define FANOUT 8

struct oci_bench {
	char dir[256];
	char reg_port[16];
	pid_t reg;
	char src[320];          /* the store holding base and child */
	struct st_store *s;
	struct ix *ix;
	unsigned repo_n, store_n;
	uint8_t *image;         /* base's memory image (IMAGE bytes) */
	char hl[320];           /* Hyperlight-style layout: one config, one raw memory layer */
	char hl_repo[64];       /* where the last skopeo push went */
	char layer_path[400];   /* base's layer blob file, for the curl upload floor */
	char layer_digest[ST_DIGEST_LEN + 1];
	char layer_url[512];    /* the base's layer in the registry, for the curl floor */
	struct ix_registry_wire last;  /* wire of the last timed transfer */
	/* Paired floors: the curl transfer run just before each push / pull
	 * iteration, and the ratio of the two, so both see the same load. */
	double pair_floor[32], pair_ratio[32];
	unsigned npair;
	uint64_t last_sha;      /* sha256 bytes of the last push */
	uint64_t last_moved;    /* blob bytes the last push / pull moved */
	/* What committing a child added to the store: its new layers' bytes,
	 * and its record in the index; [0] "child", [1] "schild". */
	struct added {
		uint64_t store_pages, store_record, ranges, manifest;
	} add[2];
};

bool bench_have(const char *prog)
{
	char *argv[] = { "sh", "-c", NULL, NULL };
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "command -v %s", prog);
	argv[2] = cmd;
	return bench_run_quiet(argv) == 0;
}

static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;

	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

static bool port_open(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;

	if (fd >= 0)
		close(fd);
	return ok;
}

int bench_registry_start(const char *dir, char port_s[16], pid_t *pid)
{
	char cfg[400], data[400];
	int port = free_port();
	FILE *f;

	if (port < 0)
		return -EADDRNOTAVAIL;
	snprintf(port_s, 16, "%d", port);
	snprintf(cfg, sizeof(cfg), "%s/registry.yml", dir);
	snprintf(data, sizeof(data), "%s/registry", dir);
	if (!(f = fopen(cfg, "we")))
		return -errno;
	fprintf(f, "version: 0.1\nlog: {level: error}\nstorage: {filesystem: {rootdirectory: %s}}\n"
		   "http: {addr: 127.0.0.1:%d}\n", data, port);
	fclose(f);
	char *argv[] = { "docker-registry", "serve", cfg, NULL };
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	int rc = posix_spawnp(pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc)
		return -rc;
	for (int i = 0; i < 200; i++) {
		if (port_open(port))
			return 0;
		usleep(50000);
	}
	return -ETIMEDOUT;
}

static int open_store(const char *path, struct st_store **s, struct ix **ix)
{
	/* sync none: the figures are about the network path; docs/sync.md
	 * has what durable commits add. */
	struct st_store_opts so = { .sync = ST_SYNC_NONE };
	int rc;

	if ((rc = st_store_init(path, &so)) < 0 || (rc = st_store_open(path, 0, s)) < 0)
		return rc;
	if ((rc = ix_open(*s, NULL, ix)) < 0)
		st_store_close(*s);
	return rc;
}

static void ob_free(void *state)
{
	struct oci_bench *ob = state;

	if (!ob)
		return;
	ix_close(ob->ix);
	st_store_close(ob->s);
	if (ob->reg > 0) {
		kill(ob->reg, SIGTERM);
		waitpid(ob->reg, NULL, 0);
	}
	bench_rm_rf(ob->dir);
	free(ob->image);
	free(ob);
}

/* A Hyperlight-style layout: one JSON config and the whole memory image as
 * one layer; seq goes into the image's first page, so each layout's layer
 * is new to the registry (skopeo would mount a known one, moving nothing). */
static int hyperlight_layout(struct oci_bench *ob, unsigned seq)
{
	uint8_t *image = ob->image;
	static const char cfg[] = "{\"kind\":\"hyperlight-style snapshot\",\"memory\":268435456}";
	uint8_t csha[ST_SHA256_LEN], lsha[ST_SHA256_LEN];
	char dg[ST_DIGEST_LEN + 1], ldg[ST_DIGEST_LEN + 1], path[600], *json;
	FILE *f;

	if (ob->hl[0])
		bench_rm_rf(ob->hl);
	memcpy(image + 64, &seq, sizeof(seq));
	snprintf(ob->hl, sizeof(ob->hl), "%s/hyperlight", ob->dir);
	snprintf(path, sizeof(path), "%s/blobs/sha256", ob->hl);
	if (mkdir(ob->hl, 0755) < 0)
		return -errno;
	snprintf(path, sizeof(path), "%s/blobs", ob->hl);
	if (mkdir(path, 0755) < 0)
		return -errno;
	snprintf(path, sizeof(path), "%s/blobs/sha256", ob->hl);
	if (mkdir(path, 0755) < 0)
		return -errno;
	st_sha256_hash(cfg, sizeof(cfg) - 1, csha);
	st_sha256_hash(image, IMAGE, lsha);
	st_digest_format(csha, dg);
	st_digest_format(lsha, ldg);
	snprintf(path, sizeof(path), "%s/blobs/sha256/%s", ob->hl, dg + 7);
	if (!(f = fopen(path, "we")) || fwrite(cfg, 1, sizeof(cfg) - 1, f) != sizeof(cfg) - 1 || fclose(f))
		return -EIO;
	snprintf(path, sizeof(path), "%s/blobs/sha256/%s", ob->hl, ldg + 7);
	if (!(f = fopen(path, "we")) || fwrite(image, 1, IMAGE, f) != IMAGE || fclose(f))
		return -EIO;
	if (asprintf(&json,
		     "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
		     "\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"%s\",\"size\":%zu},"
		     "\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar\",\"digest\":\"%s\",\"size\":%llu}]}",
		     dg, sizeof(cfg) - 1, ldg, (unsigned long long)IMAGE) < 0)
		return -ENOMEM;
	uint8_t msha[ST_SHA256_LEN];
	st_sha256_hash(json, strlen(json), msha);
	st_digest_format(msha, dg);
	snprintf(path, sizeof(path), "%s/blobs/sha256/%s", ob->hl, dg + 7);
	f = fopen(path, "we");
	int bad = !f || fputs(json, f) < 0 || fclose(f);
	size_t mlen = strlen(json);
	free(json);
	if (bad)
		return -EIO;
	snprintf(path, sizeof(path), "%s/index.json", ob->hl);
	if (!(f = fopen(path, "we")))
		return -errno;
	fprintf(f, "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
		   "\"digest\":\"%s\",\"size\":%zu,\"annotations\":{\"org.opencontainers.image.ref.name\":\"mem\"}}]}",
		dg, mlen);
	fclose(f);
	snprintf(path, sizeof(path), "%s/oci-layout", ob->hl);
	if (!(f = fopen(path, "we")))
		return -errno;
	fputs("{\"imageLayoutVersion\":\"1.0.0\"}", f);
	fclose(f);
	return 0;
}

/* base: 256 MiB, 64 MiB of it random; child: 1,024 pages changed at random places in it. */
/* The store side of the child: the bytes of its layers base lacks, and of
 * its index record (the whole manifest, or the delta it is stored as). */
static void child_added(struct oci_bench *ob, struct added *a, const struct st_manifest *base,
			const struct st_manifest *child, const st_id *cid)
{
	struct ix_txn *t;

	a->store_pages = 0;
	for (uint32_t i = 0; i < child->nlayers; i++) {
		bool old = false;
		for (uint32_t j = 0; j < base->nlayers && !old; j++)
			old = st_id_equal(&child->layers[i].id, &base->layers[j].id);
		if (!old)
			a->store_pages += child->layers[i].pages * ST_PAGE_SIZE;
	}
	a->ranges = child->nranges;
	if (ix_txn_begin(ob->ix, &t) < 0)
		return;
	struct ix_snap_info info;
	if (ix_snap_info(t, cid, &info) == 0)
		a->manifest = a->store_record = info.manifest_len;
#ifdef IX_DELTA_DEPTH_MAX
	MDB_val v;
	if (ix_snap_rec_get(ob->ix, t->txn, cid, &v) == 0)
		a->store_record = v.mv_size;
#endif
	ix_txn_end(t);
}

/* The blob files of the registry's filesystem storage
 * (ROOT/docker/registry/v2/blobs/sha256/ab/HEX/data): digest and size. */
struct reg_blob {
	char hex[65];
	uint64_t size;
};
static struct reg_blob *walk_v;
static size_t walk_n, walk_cap;

static int walk_one(const char *path, const struct stat *st, int type, struct FTW *f)
{
	size_t len = strlen(path);

	(void)f;
	if (type != FTW_F || len < 70 || strcmp(path + len - 5, "/data") != 0)
		return 0;
	if (walk_n == walk_cap) {
		size_t cap = walk_cap ? 2 * walk_cap : 64;
		struct reg_blob *v = realloc(walk_v, cap * sizeof(*v));
		if (!v)
			return -1;
		walk_v = v;
		walk_cap = cap;
	}
	memcpy(walk_v[walk_n].hex, path + len - 69, 64);
	walk_v[walk_n].hex[64] = '\0';
	walk_v[walk_n++].size = (uint64_t)st->st_size;
	return 0;
}

static struct reg_blob *reg_blobs(const struct oci_bench *ob, size_t *n)
{
	char root[400];

	snprintf(root, sizeof(root), "%s/registry/docker/registry/v2/blobs", ob->dir);
	walk_v = NULL;
	walk_n = walk_cap = 0;
	nftw(root, walk_one, 16, FTW_PHYS);
	*n = walk_n;
	return walk_v;
}

/* The registry side of pushing the child next to its parent: bytes of the
 * new blob files that are the child's layers (pages) and of the others
 * (config, chunk indexes, the OCI manifest). */
static void note_child_added(struct bench *b, struct oci_bench *ob, const char *name, const char *tag,
			     const struct added *a, const struct reg_blob *before, size_t nbefore)
{
	struct st_manifest *m = NULL;
	struct ix_txn *t;
	size_t nafter;
	struct reg_blob *after = reg_blobs(ob, &nafter);
	uint64_t pages = 0, other = 0;
	char n[160];
	st_id cid;

	if (ix_txn_begin(ob->ix, &t) < 0)
		goto out;
	int rc = ix_tag_get(t, tag, &cid) == 0 && ix_snap_get(t, &cid, &m) == 0 ? 0 : -ENOENT;
	ix_txn_end(t);
	if (rc < 0)
		goto out;
	for (size_t i = 0; i < nafter; i++) {
		bool old = false, layer = false;
		for (size_t j = 0; j < nbefore && !old; j++)
			old = strcmp(before[j].hex, after[i].hex) == 0;
		if (old)
			continue;
		for (uint32_t k = 0; k < m->nlayers && !layer; k++) {
			uint8_t sha[ST_SHA256_LEN];
			char dg[ST_DIGEST_LEN + 1];
			if (ix_sha256_get(ob->ix, &m->layers[k].id, sha) == 0) {
				st_digest_format(sha, dg);
				layer = strcmp(dg + 7, after[i].hex) == 0;
			}
		}
		*(layer ? &pages : &other) += after[i].size;
	}
	snprintf(n, sizeof(n), "%s/registry_pages_added", name);
	bench_note(b, n, (double)pages, "B");
	snprintf(n, sizeof(n), "%s/registry_other_added", name);
	bench_note(b, n, (double)other, "B");
	snprintf(n, sizeof(n), "%s/store_pages_added", name);
	bench_note(b, n, (double)a->store_pages, "B");
	snprintf(n, sizeof(n), "%s/store_record_bytes", name);
	bench_note(b, n, (double)a->store_record, "B");
	snprintf(n, sizeof(n), "%s/full_manifest_bytes", name);
	bench_note(b, n, (double)a->manifest, "B");
	snprintf(n, sizeof(n), "%s/child_ranges", name);
	bench_note(b, n, (double)a->ranges, "ranges");
out:
	st_manifest_free(m);
	free(after);
}

/* The case: a parent of 64 MiB of pages scattered over 256 MiB
 * (16,384 random pages), and a child that changes 1,024 of them (4 MiB),
 * 12,813 ranges in all: tagged "sbase" and "schild". */
static int make_scattered(struct oci_bench *ob)
{
	struct st_manifest *base = NULL, *child = NULL;
	uint8_t *img = mmap(NULL, IMAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	static uint32_t at[NONZERO / ST_PAGE_SIZE];
	static uint8_t hit[IMAGE / ST_PAGE_SIZE];
	uint64_t x = 0x2545f4914f6cdd1dull;
	st_id cid;
	int rc;

	if (img == MAP_FAILED)
		return -ENOMEM;
	memset(hit, 0, sizeof(hit));
	for (unsigned i = 0; i < NONZERO / ST_PAGE_SIZE;) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		uint64_t page = x % (IMAGE / ST_PAGE_SIZE);
		if (hit[page])
			continue;
		hit[page] = 1;
		at[i] = (uint32_t)page;
		bench_fill(img + page * ST_PAGE_SIZE, ST_PAGE_SIZE, 5000000 + i++);
	}
	if ((rc = st_ingest_image(ob->s, img, IMAGE, NULL, &base, NULL)) < 0 ||
	    (rc = ix_snap_commit(ob->ix, base, "sbase", IX_TAG_FORCE, NULL)) < 0)
		goto out_free;
	for (unsigned i = 0; i < CHANGE_PAGES;) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		uint32_t page = at[x % (NONZERO / ST_PAGE_SIZE)];
		if (hit[page] == 2)
			continue;
		hit[page] = 2;
		bench_fill(img + (uint64_t)page * ST_PAGE_SIZE, ST_PAGE_SIZE, 7000000 + i++);
	}
	if ((rc = st_ingest_image(ob->s, img, IMAGE, base, &child, NULL)) < 0 ||
	    (rc = ix_snap_commit(ob->ix, child, "schild", IX_TAG_FORCE, &cid)) < 0)
		goto out_free;
	child_added(ob, &ob->add[1], base, child, &cid);
out_free:
	st_manifest_free(base);
	st_manifest_free(child);
	munmap(img, IMAGE);
	return rc;
}

static int make_snapshots(struct oci_bench *ob)
{
	struct st_manifest *base = NULL, *child = NULL;
	uint8_t *img = mmap(NULL, IMAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int rc;

	if (img == MAP_FAILED)
		return -ENOMEM;
	bench_fill(img, NONZERO, 42);
	if (!(ob->image = malloc(IMAGE))) {
		rc = -ENOMEM;
		goto out_unmap;
	}
	memcpy(ob->image, img, IMAGE);
	if ((rc = st_ingest_image(ob->s, img, IMAGE, NULL, &base, NULL)) < 0 ||
	    (rc = ix_snap_commit(ob->ix, base, "base", IX_TAG_FORCE, NULL)) < 0)
		goto out_free;
	/* 1,024 distinct pages, so the change is exactly 4 MiB. */
	static uint8_t hit[NONZERO / ST_PAGE_SIZE];
	uint64_t x = 0x9e3779b97f4a7c15ull;
	memset(hit, 0, sizeof(hit));
	for (unsigned i = 0; i < CHANGE_PAGES;) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		uint64_t page = x % (NONZERO / ST_PAGE_SIZE);
		if (hit[page])
			continue;
		hit[page] = 1;
		bench_fill(img + page * ST_PAGE_SIZE, ST_PAGE_SIZE, 1000 + i++);
	}
	st_id cid;
	if ((rc = st_ingest_image(ob->s, img, IMAGE, base, &child, NULL)) < 0 ||
	    (rc = ix_snap_commit(ob->ix, child, "child", IX_TAG_FORCE, &cid)) < 0)
		goto out_free;
	child_added(ob, &ob->add[0], base, child, &cid);
out_free:
	st_manifest_free(base);
	st_manifest_free(child);
out_unmap:
	munmap(img, IMAGE);
	return rc;
}

static int ob_setup(void **state, const void *arg)
{
	struct oci_bench *ob = calloc(1, sizeof(*ob));
	int rc;

	if (!ob)
		return -ENOMEM;
	if ((rc = bench_tmpdir("strata-bench-oci", ob->dir, sizeof(ob->dir))) < 0) {
		free(ob);
		return rc;
	}
	snprintf(ob->src, sizeof(ob->src), "%s/src", ob->dir);
	if ((rc = ix_registry_global_init()) < 0 || (rc = open_store(ob->src, &ob->s, &ob->ix)) < 0 ||
	    (rc = bench_registry_start(ob->dir, ob->reg_port, &ob->reg)) < 0 || (rc = make_snapshots(ob)) < 0 ||
	    (rc = make_scattered(ob)) < 0) {
		ob_free(ob);
		return rc;
	}
	*state = ob;
	return 0;
}

static int client(struct oci_bench *ob, const char *repo, const char *tag, struct ix_registry **r)
{
	char ref[256];
	struct ix_registry_ref dr;
	struct ix_registry_opts o = { .insecure = true };
	int rc;

	snprintf(ref, sizeof(ref), "127.0.0.1:%s/%s:%s", ob->reg_port, repo, tag);
	if ((rc = ix_registry_ref_parse(ref, &dr)) < 0)
		return rc;
	return ix_registry_open(&dr, &o, r);
}

static int push(struct oci_bench *ob, const char *snap, const char *repo)
{
	struct ix_registry *r;
	struct ix_oci_sink sink;
	struct ix_oci_stats st;
	int rc;

	if ((rc = client(ob, repo, snap, &r)) < 0)
		return rc;
	ix_registry_sink(r, &sink);
	rc = ix_oci_push(ob->ix, snap, snap, &sink, NULL, &st, NULL, NULL, NULL, 0);
	ix_registry_wire_get(r, &ob->last);
	ob->last_sha = st.bytes_sha256;
	ob->last_moved = st.bytes_moved;
	ix_registry_close(r);
	return rc;
}

static int pull(struct oci_bench *ob, struct ix *ix, const char *repo, const char *tag, struct ix_registry_wire *w)
{
	struct ix_registry *r;
	struct ix_oci_source src;
	int rc;

	if ((rc = client(ob, repo, tag, &r)) < 0)
		return rc;
	ix_registry_source(r, &src);
	struct ix_oci_stats st = { 0 };
	rc = ix_oci_pull(ix, &src, tag, tag, 0, NULL, &st, NULL, NULL, 0);
	ix_registry_wire_get(r, w);
	if (w == &ob->last)
		ob->last_moved = st.bytes_moved;
	ix_registry_close(r);
	return rc;
}

/* A fresh store under the bench directory. */
static int fresh_store(struct oci_bench *ob, char *path, size_t len, struct st_store **s, struct ix **ix)
{
	snprintf(path, len, "%s/dst%u", ob->dir, ob->store_n++);
	return open_store(path, s, ix);
}

static void drop_store(const char *path, struct st_store *s, struct ix *ix)
{
	ix_close(ix);
	st_store_close(s);
	bench_rm_rf(path);
}

static int iter_curl_put(void *state, struct bench_timer *t);
static int iter_curl(void *state, struct bench_timer *t);

/* Time one floor transfer (curl) outside the harness's timer. */
static int paired_floor(struct oci_bench *ob, int (*floor)(void *, struct bench_timer *), double *ns)
{
	uint64_t t0 = bench_now_ns();
	int rc = floor(ob, NULL);

	*ns = (double)(bench_now_ns() - t0);
	return rc;
}

static void pair_add(struct oci_bench *ob, double floor_ns, double ns)
{
	if (ob->npair < 32) {
		ob->pair_floor[ob->npair] = floor_ns;
		ob->pair_ratio[ob->npair++] = floor_ns / ns;
	}
}

static int iter_push_full(void *state, struct bench_timer *t)
{
	struct oci_bench *ob = state;
	char repo[64];
	double fl;
	int rc;

	if ((rc = paired_floor(ob, iter_curl_put, &fl)) < 0)
		return rc;
	snprintf(repo, sizeof(repo), "full%u", ob->repo_n++);
	uint64_t t0 = bench_now_ns();
	bench_timer_start(t);
	rc = push(ob, "base", repo);
	bench_timer_stop(t);
	pair_add(ob, fl, (double)(bench_now_ns() - t0));
	return rc;
}

static int iter_push_again(void *state, struct bench_timer *t)
{
	return push(state, "base", "full0");
}

static int iter_pull_full(void *state, struct bench_timer *t)
{
	struct oci_bench *ob = state;
	struct st_store *s;
	struct ix *ix;
	char path[400];
	double fl;
	int rc;

	if ((rc = paired_floor(ob, iter_curl, &fl)) < 0)
		return rc;
	if ((rc = fresh_store(ob, path, sizeof(path), &s, &ix)) < 0)
		return rc;
	uint64_t t0 = bench_now_ns();
	bench_timer_start(t);
	rc = pull(ob, ix, "full0", "base", &ob->last);
	bench_timer_stop(t);
	pair_add(ob, fl, (double)(bench_now_ns() - t0));
	drop_store(path, s, ix);
	return rc;
}

static int iter_push_child(void *state, struct bench_timer *t)
{
	struct oci_bench *ob = state;
	char repo[64];
	int rc;

	snprintf(repo, sizeof(repo), "child%u", ob->repo_n++);
	if ((rc = push(ob, "base", repo)) < 0)
		return rc;
	bench_timer_start(t);
	rc = push(ob, "child", repo);
	bench_timer_stop(t);
	return rc;
}

static int iter_pull_child(void *state, struct bench_timer *t)
{
	struct oci_bench *ob = state;
	struct st_store *s;
	struct ix *ix;
	char path[400];
	int rc;

	if ((rc = fresh_store(ob, path, sizeof(path), &s, &ix)) < 0)
		return rc;
	if ((rc = pull(ob, ix, "full0", "base", &ob->last)) < 0)
		goto out;
	bench_timer_start(t);
	rc = pull(ob, ix, "full0", "child", &ob->last);
	bench_timer_stop(t);
out:
	drop_store(path, s, ix);
	return rc;
}

/* The upload floor: the curl command line opening an upload session and
 * PUTting the same 64 MiB layer in one request, to a new repository. */
static int iter_curl_put(void *state, struct bench_timer *t)
{
	struct oci_bench *ob = state;
	char post[200], loc[600] = "", url[700], cmd[400];
	FILE *p;

	snprintf(post, sizeof(post), "http://127.0.0.1:%s/v2/curl%u/blobs/uploads/", ob->reg_port, ob->repo_n++);
	snprintf(cmd, sizeof(cmd), "curl -sf -o /dev/null -D - -X POST %s", post);
	if (t)
		bench_timer_start(t);
	if (!(p = popen(cmd, "re")))
		return -errno;
	char line[700];
	while (fgets(line, sizeof(line), p))
		if (strncasecmp(line, "location:", 9) == 0)
			sscanf(line + 9, " %599s", loc);
	if (pclose(p) != 0 || !loc[0])
		return -EIO;
	if (loc[0] == '/')
		snprintf(url, sizeof(url), "http://127.0.0.1:%s%s&digest=%s", ob->reg_port, loc, ob->layer_digest);
	else
		snprintf(url, sizeof(url), "%s&digest=%s", loc, ob->layer_digest);
	char *argv[] = { "curl", "-sf", "-o", "/dev/null", "-H", "Content-Type: application/octet-stream", "-H", "Expect:",
			 "-T", ob->layer_path, url, NULL };
	int rc = bench_run_quiet(argv);
	if (t)
		bench_timer_stop(t);
	return rc == 0 ? 0 : -EIO;
}

/* The floor: the curl command line fetching the same 64 MiB layer into a file. */
static int iter_curl(void *state, struct bench_timer *t)
{
	struct oci_bench *ob = state;
	char out[400];

	snprintf(out, sizeof(out), "%s/curl.out", ob->dir);
	char *argv[] = { "curl", "-sf", "-o", out, ob->layer_url, NULL };
	if (t)
		bench_timer_start(t);
	int rc = bench_run_quiet(argv);
	if (t)
		bench_timer_stop(t);
	unlink(out);
	return rc == 0 ? 0 : -EIO;
}

/* One skopeo copy of a new Hyperlight-style layout; timed if t. */
static int skopeo_push(struct oci_bench *ob, struct bench_timer *t)
{
	char src[400], dst[200];
	int rc;

	if ((rc = hyperlight_layout(ob, ob->repo_n)) < 0)
		return rc;
	snprintf(ob->hl_repo, sizeof(ob->hl_repo), "hl%u", ob->repo_n++);
	snprintf(src, sizeof(src), "oci:%s:mem", ob->hl);
	snprintf(dst, sizeof(dst), "docker://127.0.0.1:%s/%s:mem", ob->reg_port, ob->hl_repo);
	char *argv[] = { "skopeo", "copy", "--preserve-digests", "--dest-tls-verify=false", src, dst, NULL };
	if (t)
		bench_timer_start(t);
	rc = bench_run_quiet(argv);
	if (t)
		bench_timer_stop(t);
	return rc == 0 ? 0 : -EIO;
}

static int iter_skopeo_push(void *state, struct bench_timer *t)
{
	return skopeo_push(state, t);
}

static int iter_skopeo_pull(void *state, struct bench_timer *t)
{
	struct oci_bench *ob = state;
	char src[200], dst[420], dir[400];

	if (!ob->hl_repo[0]) { /* the push case did not run: push one, untimed */
		int rc = skopeo_push(ob, NULL);
		if (rc < 0)
			return rc;
	}
	snprintf(src, sizeof(src), "docker://127.0.0.1:%s/%s:mem", ob->reg_port, ob->hl_repo);
	snprintf(dir, sizeof(dir), "%s/hlpull%u", ob->dir, ob->store_n++);
	snprintf(dst, sizeof(dst), "oci:%s:mem", dir);
	char *argv[] = { "skopeo", "copy", "--preserve-digests", "--src-tls-verify=false", src, dst, NULL };
	bench_timer_start(t);
	int rc = bench_run_quiet(argv);
	bench_timer_stop(t);
	bench_rm_rf(dir);
	return rc == 0 ? 0 : -EIO;
}

struct fan {
	struct oci_bench *ob;
	char path[400];
	struct st_store *s;
	struct ix *ix;
	struct ix_registry_wire wire;
	int rc;
};

static void *fan_pull(void *arg)
{
	struct fan *f = arg;

	f->rc = pull(f->ob, f->ix, "full0", "base", &f->wire);
	return NULL;
}

static int iter_fanout(void *state, struct bench_timer *t)
{
	struct oci_bench *ob = state;
	struct fan f[FANOUT];
	pthread_t th[FANOUT];
	int rc = 0;

	for (int i = 0; i < FANOUT; i++) {
		f[i].ob = ob;
		if ((rc = fresh_store(ob, f[i].path, sizeof(f[i].path), &f[i].s, &f[i].ix)) < 0)
			return rc;
	}
	bench_timer_start(t);
	for (int i = 0; i < FANOUT; i++)
		pthread_create(&th[i], NULL, fan_pull, &f[i]);
	for (int i = 0; i < FANOUT; i++)
		pthread_join(th[i], NULL);
	bench_timer_stop(t);
	ob->last = (struct ix_registry_wire){ 0 };
	for (int i = 0; i < FANOUT; i++) {
		ob->last.up += f[i].wire.up;
		ob->last.down += f[i].wire.down;
		if (f[i].rc < 0)
			rc = f[i].rc;
		drop_store(f[i].path, f[i].s, f[i].ix);
	}
	return rc;
}

static void note_wire(struct bench *b, const char *name, const struct ix_registry_wire *w, uint64_t moved)
{
	char n[128];

	snprintf(n, sizeof(n), "%s/blob_bytes", name);
	bench_note(b, n, (double)moved, "B");
	snprintf(n, sizeof(n), "%s/metadata_bytes", name);
	bench_note(b, n, (double)(w->up + w->down - moved), "B");

	snprintf(n, sizeof(n), "%s/wire_up", name);
	bench_note(b, n, (double)w->up, "B");
	snprintf(n, sizeof(n), "%s/wire_down", name);
	bench_note(b, n, (double)w->down, "B");
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Every case works on the one setup (a registry, the snapshots). */
static int share_setup(void **state, const void *arg)
{
	*state = (void *)arg;
	return 0;
}

void bench_oci(struct bench *b)
{
	struct oci_bench *ob;
	void *state;
	int rc;

	if (!bench_selected_under(b, "oci/"))
		return;
	if (!bench_have("docker-registry")) {
		bench_note(b, "oci/skipped_no_docker_registry", 1, "");
		return;
	}
	if ((rc = ob_setup(&state, NULL)) < 0) {
		fprintf(stderr, "bench oci: setup failed: %s\n", ix_registry_strerror(rc));
		return;
	}
	ob = state;
	unsigned it = bench_quick(b) ? 2 : 7;
	/* The first push hashes; every later one finds the digests in the table. */
	if (push(ob, "base", "full0") < 0)
		goto out;
	uint64_t first_sha = ob->last_sha;
	/* The child's first push, next to its parent: what it adds to the
	 * registry's storage (every later push finds its blobs there). */
	size_t nbefore;
	struct reg_blob *before = reg_blobs(ob, &nbefore);
	if (push(ob, "child", "full0") < 0) {
		free(before);
		goto out;
	}
	note_child_added(b, ob, "oci/push_child_4MiB", "child", &ob->add[0], before, nbefore);
	free(before);
	/* The case, the same way: the parent first, then the child. */
	if (push(ob, "sbase", "scattered") < 0)
		goto out;
	before = reg_blobs(ob, &nbefore);
	if (push(ob, "schild", "scattered") < 0) {
		free(before);
		goto out;
	}
	note_child_added(b, ob, "oci/push_child_4MiB_scattered", "schild", &ob->add[1], before, nbefore);
	bench_note(b, "oci/push_child_4MiB_scattered/wire_up", (double)ob->last.up, "B");
	bench_note(b, "oci/push_child_4MiB_scattered/wire_down", (double)ob->last.down, "B");
	free(before);
	ob->last_sha = first_sha;
	bench_note(b, "oci/first_push/sha256_bytes", (double)ob->last_sha, "B");
	{
		st_id lid;
		uint8_t sha[ST_SHA256_LEN];
		struct ix_txn *tx;
		struct st_manifest *m;
		char dg[ST_DIGEST_LEN + 1];
		if (ix_txn_begin(ob->ix, &tx) < 0)
			goto out;
		rc = ix_tag_get(tx, "base", &lid) == 0 && ix_snap_get(tx, &lid, &m) == 0 ? 0 : -ENOENT;
		ix_txn_end(tx);
		if (rc < 0)
			goto out;
		lid = m->layers[0].id;
		st_manifest_free(m);
		if (ix_sha256_get(ob->ix, &lid, sha) < 0)
			goto out;
		st_digest_format(sha, dg);
		snprintf(ob->layer_url, sizeof(ob->layer_url), "http://127.0.0.1:%s/v2/full0/blobs/%s", ob->reg_port, dg);
		memcpy(ob->layer_digest, dg, sizeof(dg));
		if (st_blob_path(ob->s, &lid, ob->layer_path, sizeof(ob->layer_path)) < 0)
			goto out;
	}
	const struct bench_case cases[] = {
		{ .name = "oci/floor/curl_get_64MiB", .iter = iter_curl, .iters = it, .bytes_per_iter = NONZERO },
		{ .name = "oci/floor/curl_put_64MiB", .iter = iter_curl_put, .iters = it, .bytes_per_iter = NONZERO },
		{ .name = "oci/push_256MiB", .floor = "oci/floor/curl_put_64MiB", .iter = iter_push_full, .iters = it,
		  .bytes_per_iter = NONZERO },
		{ .name = "oci/push_256MiB_again", .iter = iter_push_again, .iters = it },
		{ .name = "oci/pull_256MiB", .floor = "oci/floor/curl_get_64MiB", .iter = iter_pull_full, .iters = it,
		  .bytes_per_iter = NONZERO },
		{ .name = "oci/push_child_4MiB", .iter = iter_push_child, .iters = it },
		{ .name = "oci/pull_child_4MiB", .iter = iter_pull_child, .iters = it },
		{ .name = "oci/skopeo_push_whole_256MiB", .floor = "oci/push_256MiB", .iter = iter_skopeo_push,
		  .iters = it, .bytes_per_iter = IMAGE },
		{ .name = "oci/skopeo_pull_whole_256MiB", .floor = "oci/pull_256MiB", .iter = iter_skopeo_pull,
		  .iters = it, .bytes_per_iter = IMAGE },
		{ .name = "oci/fanout_8_pulls", .iter = iter_fanout, .iters = bench_quick(b) ? 1 : 3 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct bench_case c = cases[i];
		bool skopeo = strstr(c.name, "skopeo") != NULL;

		if (!bench_selected(b, c.name) || (skopeo && !bench_have("skopeo")) ||
		    ((c.iter == iter_curl || c.iter == iter_curl_put) && !bench_have("curl")))
			continue;
		c.setup = share_setup;
		c.arg = ob;
		ob->npair = 0;
		bench_run(b, &c);
		if (ob->npair) {
			char n[128];
			qsort(ob->pair_floor, ob->npair, sizeof(double), cmp_d);
			qsort(ob->pair_ratio, ob->npair, sizeof(double), cmp_d);
			snprintf(n, sizeof(n), "%s/paired_curl_floor", c.name);
			bench_note(b, n, ob->pair_floor[ob->npair / 2] / 1e6, "ms");
			snprintf(n, sizeof(n), "%s/speed_vs_paired_floor", c.name);
			bench_note(b, n, ob->pair_ratio[ob->npair / 2], "x");
			snprintf(n, sizeof(n), "%s/speed_vs_paired_floor_p10", c.name);
			bench_note(b, n, ob->pair_ratio[ob->npair / 10], "x");
			snprintf(n, sizeof(n), "%s/speed_vs_paired_floor_p90", c.name);
			bench_note(b, n, ob->pair_ratio[ob->npair * 9 / 10], "x");
		}
		if (c.iter == iter_push_full || c.iter == iter_push_again || c.iter == iter_push_child ||
		    c.iter == iter_pull_full || c.iter == iter_pull_child)
			note_wire(b, c.name, &ob->last, ob->last_moved);
		if (c.iter == iter_push_again)
			bench_note(b, "oci/push_256MiB_again/sha256_bytes", (double)ob->last_sha, "B");
		if (c.iter == iter_fanout)
			note_wire(b, c.name, &ob->last, 8 * NONZERO); /* all eight pulls: what the registry served */
	}
out:
	ob_free(ob);
}
