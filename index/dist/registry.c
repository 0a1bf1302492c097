/* registry.c: HTTP to an OCI registry (libcurl): auth, blobs HEAD/GET/upload/mount, manifests GET/PUT. The only file that includes curl.h. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "index/dist/curl_dl.h"
#include <jansson.h>

#include "store/array.h"
#include "index/index_int.h"
#include "index/dist/dist.h"

/* An error body kept for the message (registries answer JSON errors). */
#define ERRBODY_MAX 512
/* Give up on a transfer that moves less than the low-speed limit for this long. */
#define STALL_SECONDS 60L
#define CONNECT_SECONDS 30L
/* libcurl's receive and send buffers (defaults 16 and 64 KiB): larger ones
 * mean fewer callbacks per blob (docs/oci.md has the measurement). */
#define RECV_BUFFER (512L << 10)
#define SEND_BUFFER (1L << 20)
/* Requests ix_registry_ahead runs at once, each on its own connection. */
#define AHEAD_MAX 16
/* The largest answer it fetches ahead and keeps in memory: the largest
 * manifest a pull takes (a 4 GiB layer's chunk index of 64 KiB chunks is
 * 1 MiB and 40 bytes); a larger one is asked when needed, bounded as ever
 * by its reader. */
#define AHEAD_BYTES_MAX ST_OCI_MANIFEST_MAX

/* An answer fetched ahead (ix_registry_ahead), kept for the first request
 * of the same URL and Accept, which then reads it as if it came now. */
struct ahead {
	char url[2048];
	char accept[512];
	long status;
	char digest[ST_DIGEST_LEN + 1];
	char *body;
	size_t len;
};

struct ix_registry {
	CURL *curl;
	char base[600];        /* "https://host:port" */
	char repo[512];
	char host[512];
	char origin[IX_ORIGIN_MAX + 1]; /* "host/repo" */
	struct ix_registry_opts o;
	st_id *seen;           /* blobs this repository holds, for ix_registry_origins_record */
	size_t nseen, capseen;
	char *token;           /* bearer token, once fetched */
	bool basic;            /* the registry asked for Basic: send credentials */
	char *user, *pass;     /* from o.auth at open (NULL: none) */
	struct ix_registry_wire wire;
	const struct st_oci_desc *upload;  /* the blob being uploaded, for progress */
	uint64_t upload_done;              /* its bytes reported so far */
	uint32_t index, count;
	/* From the certificate directory (o.cert_dir or certs_d), read at open:
	 * the CAs to trust (cacert or the system's, then each *.crt), the
	 * client certificate and key; certs_rc < 0: what was wrong with it. */
	char *ca_blob;
	size_t ca_len;
	char *client_cert, *client_key;
	int certs_rc;
	char certs_why[2400];
	struct ahead *ahead;   /* answers fetched ahead, not yet asked for */
	size_t nahead;
};

/* One request and what came back. */
struct req {
	const char *method;
	char url[2048];
	const char *content_type;
	const char *accept;
	const char *body;          /* PUT/POST body in memory */
	size_t body_len;
	int body_fd;               /* or from fd (if >= 0) */
	uint64_t body_off;
	uint64_t range_from;       /* GET: ask for bytes from here */
	uint64_t range_len;        /* ... this many (0: to the end) */
	/* response */
	long status;
	char location[2048];
	char www_auth[1024];
	char digest[ST_DIGEST_LEN + 1];
	char subject[ST_DIGEST_LEN + 1];  /* OCI-Subject: the registry lists referrers itself */
	/* body: to sink (2xx only), or to mem (up to mem_max), error body to err */
	ix_oci_sink_fn sink;
	void *sctx;
	int sink_rc;
	uint64_t skip;             /* bytes of a 200 answer to a range request to drop */
	uint64_t left;             /* range_len: bytes still to hand to the sink */
	bool cut;                  /* the transfer was stopped after range_len bytes */
	bool started;              /* the first body bytes of a 2xx answer arrived */
	char *mem;
	size_t mem_len, mem_max;
	bool mem_over;
	char err[ERRBODY_MAX + 1];
	size_t err_len;
};


uint64_t ix_registry_now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/*
 * One connection cache for every handle of the process: a connection one
 * request leaves open (a pull's metadata, the requests fetched ahead) is
 * taken by the next on any handle and thread (a lazy layer's Range
 * requests, the working-set prefetch) instead of a new connection's round
 * trip. libcurl locks it through these.
 */
static CURLSH *conn_share;
static pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST];

static void share_lock(CURL *c, curl_lock_data data, curl_lock_access access, void *arg)
{
	(void)c, (void)access, (void)arg;
	pthread_mutex_lock(&share_locks[data]);
}

static void share_unlock(CURL *c, curl_lock_data data, void *arg)
{
	(void)c, (void)arg;
	pthread_mutex_unlock(&share_locks[data]);
}

int ix_registry_global_init(void)
{
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return -ENOMEM;
	if (!conn_share && (conn_share = curl_share_init())) {
		for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
			pthread_mutex_init(&share_locks[i], NULL);
		curl_share_setopt(conn_share, CURLSHOPT_LOCKFUNC, share_lock);
		curl_share_setopt(conn_share, CURLSHOPT_UNLOCKFUNC, share_unlock);
		if (curl_share_setopt(conn_share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT) != CURLSHE_OK) {
			curl_share_cleanup(conn_share);
			conn_share = NULL; /* an older libcurl: a cache per handle */
		}
	}
	return 0;
}

void ix_registry_after_fork(void)
{
	/* The parent's share is left as it is (freeing it would close
	 * descriptor numbers this process may have reused); its locks may
	 * have been held by a thread that fork did not copy. */
	conn_share = NULL;
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&share_locks[i], NULL);
}

static int certs_load(struct ix_registry *r, const char *host);

int ix_registry_open(const struct ix_registry_ref *ref, const struct ix_registry_opts *opts, struct ix_registry **out)
{
	struct ix_registry *r = st_sys_calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	if (opts)
		r->o = *opts;
	snprintf(r->base, sizeof(r->base), "%s://%s", r->o.insecure ? "http" : "https", ref->host);
	snprintf(r->repo, sizeof(r->repo), "%s", ref->repo);
	snprintf(r->host, sizeof(r->host), "%s", ref->host);
	snprintf(r->origin, sizeof(r->origin), "%s/%s", ref->host, ref->repo);
	if (!(r->curl = curl_easy_init())) {
		free(r);
		return -ENOMEM;
	}
	if (!r->o.insecure && certs_load(r, ref->host) == -ENOMEM) {
		ix_registry_close(r);
		return -ENOMEM;
	}
	/* Asked once, here; the provider's strings are not kept. */
	int rc = r->o.auth ? r->o.auth->get(r->o.auth->ctx, ref->host, &r->user, &r->pass, NULL, 0) : 0;
	r->o.auth = NULL;
	if (rc < 0) {
		ix_registry_close(r);
		return rc;
	}
	*out = r;
	return 0;
}

void ix_registry_close(struct ix_registry *r)
{
	if (!r)
		return;
	curl_easy_cleanup(r->curl);
	free(r->ca_blob);
	free(r->client_cert);
	free(r->client_key);
	for (size_t i = 0; i < r->nahead; i++)
		free(r->ahead[i].body);
	free(r->ahead);
	free(r->token);
	free(r->seen);
	free(r->user);
	free(r->pass);
	free(r);
}

void ix_registry_wire_get(const struct ix_registry *r, struct ix_registry_wire *out)
{
	*out = r->wire;
}

/* -------------------------------------------------------- certificates */

/* Append the file at path to r->ca_blob (a PEM bundle), with a newline. */
static int ca_append(struct ix_registry *r, const char *path)
{
	FILE *f = fopen(path, "re");
	char buf[8192];
	size_t got;

	if (!f)
		return -errno;
	while ((got = fread(buf, 1, sizeof(buf), f)) > 0) {
		char *n = st_sys_realloc(r->ca_blob, r->ca_len + got + 2);
		if (!n) {
			fclose(f);
			return -ENOMEM;
		}
		r->ca_blob = n;
		memcpy(r->ca_blob + r->ca_len, buf, got);
		r->ca_len += got;
	}
	bool bad = ferror(f);
	fclose(f);
	if (bad)
		return -EIO;
	if (r->ca_blob)
		r->ca_blob[r->ca_len++] = '\n';
	return 0;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n > k && strcmp(s + n - k, suffix) == 0;
}

static int names_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The certificate directory for host: o.cert_dir, else the first
 * ROOT/HOST of o.certs_d that is a directory; read as docker reads
 * certs.d (containers/image's rules: *.crt CAs, NAME.cert + NAME.key).
 * Returns -ENOMEM, else 0 with r->certs_rc saying what went wrong. */
static int certs_load(struct ix_registry *r, const char *host)
{
	char dir[4096], path[4400];
	struct stat sb;
	char **names = NULL;
	size_t nnames = 0, cap = 0;
	int rc = 0;

	if (r->o.cert_dir) {
		snprintf(dir, sizeof(dir), "%s", r->o.cert_dir);
	} else {
		dir[0] = '\0';
		for (const char *const *root = r->o.certs_d; root && *root; root++) {
			snprintf(dir, sizeof(dir), "%s/%s", *root, host);
			if (st_sys_fstatat(AT_FDCWD, dir, &sb, 0) == 0 && S_ISDIR(sb.st_mode))
				break;
			dir[0] = '\0';
		}
		if (!dir[0])
			return 0;
	}
	DIR *d = NULL;
	int orc = st_sys_opendirat(AT_FDCWD, dir, &d);
	if (orc < 0) {
		r->certs_rc = IX_ETLS;
		snprintf(r->certs_why, sizeof(r->certs_why), "the certificate directory %.1000s: %s", dir, strerror(-orc));
		return 0;
	}
	for (struct dirent *e; (e = readdir(d));) {
		if (!ends_with(e->d_name, ".crt") && !ends_with(e->d_name, ".cert") && !ends_with(e->d_name, ".key"))
			continue;
		if (ST_ARRAY_RESERVE(names, cap, nnames + 1) < 0 || !(names[nnames] = st_sys_strdup(e->d_name))) {
			rc = -ENOMEM;
			goto out_free;
		}
		nnames++;
	}
	/* In name order, so which client certificate is used does not depend
	 * on the directory's order. */
	qsort(names, nnames, sizeof(*names), names_cmp);
	bool cas = false;
	for (size_t i = 0; i < nnames && r->certs_rc == 0; i++) {
		const char *nm = names[i];
		snprintf(path, sizeof(path), "%s/%s", dir, nm);
		if (ends_with(nm, ".crt")) {
			/* The CAs trusted without the directory come first. */
			if (!cas) {
				const char *base = r->o.cacert;
				if (!base)
					curl_easy_getinfo(r->curl, CURLINFO_CAINFO, &base);
				if (base && access(base, R_OK) == 0 && (rc = ca_append(r, base)) == -ENOMEM)
					goto out_free;
				cas = true;
			}
			if ((rc = ca_append(r, path)) == -ENOMEM)
				goto out_free;
			if (rc < 0) {
				r->certs_rc = IX_ETLS;
				snprintf(r->certs_why, sizeof(r->certs_why), "cannot read the CA %.1000s: %s", path, strerror(-rc));
			}
			rc = 0;
		} else if (ends_with(nm, ".cert")) {
			char key[4400];
			snprintf(key, sizeof(key), "%.*s.key", (int)(strlen(path) - 5), path);
			if (access(key, R_OK) != 0) {
				r->certs_rc = IX_ETLS;
				snprintf(r->certs_why, sizeof(r->certs_why), "the client certificate %.1000s has no key %.1000s", path,
					 key);
			} else if (!r->client_cert) {
				if (!(r->client_cert = st_sys_strdup(path)) || !(r->client_key = st_sys_strdup(key))) {
					rc = -ENOMEM;
					goto out_free;
				}
			}
		} else {
			char cert[4400];
			snprintf(cert, sizeof(cert), "%.*s.cert", (int)(strlen(path) - 4), path);
			if (access(cert, F_OK) != 0) {
				r->certs_rc = IX_ETLS;
				snprintf(r->certs_why, sizeof(r->certs_why), "the client key %.1000s has no certificate %.1000s", path,
					 cert);
			}
		}
	}
out_free:
	closedir(d);
	for (size_t i = 0; i < nnames; i++)
		free(names[i]);
	free(names);
	return rc;
}

/* ------------------------------------------------------------ callbacks */

static size_t on_header(char *buf, size_t size, size_t n, void *arg)
{
	struct req *q = arg;
	size_t len = size * n, vlen;
	const char *v;

	/* A redirect or a 100-continue starts a new header block. */
	if (len > 5 && strncmp(buf, "HTTP/", 5) == 0) {
		q->www_auth[0] = '\0';
		q->digest[0] = '\0';
		q->subject[0] = '\0';
		return len;
	}
	struct {
		const char *name;
		char *dst;
		size_t cap;
	} keep[] = {
		{ "location:", q->location, sizeof(q->location) },
		{ "www-authenticate:", q->www_auth, sizeof(q->www_auth) },
		{ "docker-content-digest:", q->digest, sizeof(q->digest) },
		{ "oci-subject:", q->subject, sizeof(q->subject) },
	};
	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
		size_t nl = strlen(keep[i].name);
		if (len < nl || strncasecmp(buf, keep[i].name, nl) != 0)
			continue;
		v = buf + nl;
		vlen = len - nl;
		while (vlen && (*v == ' ' || *v == '\t'))
			v++, vlen--;
		while (vlen && (v[vlen - 1] == '\r' || v[vlen - 1] == '\n' || v[vlen - 1] == ' '))
			vlen--;
		if (vlen < keep[i].cap) {
			memcpy(keep[i].dst, v, vlen);
			keep[i].dst[vlen] = '\0';
		}
	}
	return len;
}

/* The body callback needs the handle for the status; keep both together. */
struct body_ctx {
	CURL *curl;
	struct req *q;
};

static size_t on_data(char *buf, size_t size, size_t n, void *arg)
{
	struct body_ctx *b = arg;
	struct req *q = b->q;
	size_t len = size * n, take;
	long status = 0;

	curl_easy_getinfo(b->curl, CURLINFO_RESPONSE_CODE, &status);
	if (status < 200 || status > 299) {
		take = len < ERRBODY_MAX - q->err_len ? len : ERRBODY_MAX - q->err_len;
		memcpy(q->err + q->err_len, buf, take);
		q->err_len += take;
		q->err[q->err_len] = '\0';
		return len;
	}
	if (!q->started) {
		/* A 200 to a range request is the whole blob: drop what we have. */
		q->started = true;
		q->skip = status == 200 ? q->range_from : 0;
		q->left = q->range_len;
	}
	if (q->skip) {
		take = len < q->skip ? len : (size_t)q->skip;
		q->skip -= take;
		buf += take;
		len -= take;
		if (len == 0)
			return size * n;
	}
	if (q->sink) {
		bool last = false;
		if (q->range_len) {
			/* A server that ignores the range sends more: stop after it. */
			if (len > q->left) {
				len = (size_t)q->left;
				last = true;
			}
			q->left -= len;
		}
		if (len && (q->sink_rc = q->sink(q->sctx, buf, len)) < 0)
			return 0; /* aborts the transfer with CURLE_WRITE_ERROR */
		if (last) {
			q->cut = true;
			return 0;
		}
		return size * n;
	}
	if (q->mem_max) {
		if (len > q->mem_max - q->mem_len) {
			q->mem_over = true;
			return 0;
		}
		memcpy(q->mem + q->mem_len, buf, len);
		q->mem_len += len;
	}
	return size * n;
}

static size_t on_read(char *buf, size_t size, size_t n, void *arg)
{
	struct req *q = arg;
	size_t want = size * n;

	if (q->body_fd >= 0) {
		ssize_t got = st_sys_pread(q->body_fd, buf, want, (off_t)q->body_off);
		if (got < 0)
			return CURL_READFUNC_ABORT;
		q->body_off += (uint64_t)got;
		return (size_t)got;
	}
	if (want > q->body_len - q->body_off)
		want = q->body_len - q->body_off;
	memcpy(buf, q->body + q->body_off, want);
	q->body_off += want;
	return want;
}

static int on_xfer(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
	struct ix_registry *r = arg;

	/* libcurl calls this often with nothing new: only bytes that moved,
	 * and not the last (the engine's END says that). */
	if (r->upload && r->o.prog && r->o.prog->cb && ulnow > 0 && (uint64_t)ulnow > r->upload_done &&
	    (uint64_t)ulnow < r->upload->size) {
		r->upload_done = (uint64_t)ulnow;
		struct ix_oci_event ev = { IX_OCI_BLOB_BYTES, r->upload->sha256, r->upload->size, (uint64_t)ulnow,
					   r->index, r->count, IX_OCI_LAYER };
		r->o.prog->cb(r->o.prog->ctx, &ev);
	}
	return 0;
}

/* ------------------------------------------------------------- requests */

/* Whether r has credentials to send (libcurl encodes them as Basic). */
static bool has_creds(const struct ix_registry *r)
{
	return r->user && r->pass;
}


/* After a failure that may be the wrong transport, one HEAD /v2/ on a
 * handle of its own, for at most 5 s (made only then): tls false, does
 * the port answer plain HTTP as a registry does (200 or 401; a TLS server
 * answers plain HTTP with 400)? tls true, does it complete a TLS
 * handshake and answer (no certificate check: only the transport is
 * asked)? */
static bool port_speaks(struct ix_registry *r, bool tls)
{
	CURL *c = curl_easy_init();
	char url[700];
	long status = 0;

	if (!c)
		return false;
	snprintf(url, sizeof(url), "%s://%s/v2/", tls ? "https" : "http", r->host);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 5L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, tls ? "https" : "http");
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
	bool answered = curl_easy_perform(c) == CURLE_OK &&
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK &&
		(tls || status == 200 || status == 401);
	curl_easy_cleanup(c);
	r->wire.requests++;
	return answered;
}

/* Answer GET q from an answer fetched ahead for its URL and Accept, as the
 * transfer would have: its status and digest header, its body to the sink
 * or memory (2xx) or as the error body. 1: none kept for q. */
static int from_ahead(struct ix_registry *r, struct req *q, char *why, size_t whylen)
{
	if (strcmp(q->method, "GET") != 0 || q->range_from || q->range_len)
		return 1;
	for (size_t i = 0; i < r->nahead; i++) {
		struct ahead *a = &r->ahead[i];
		if (strcmp(a->url, q->url) != 0 || strcmp(a->accept, q->accept ? q->accept : "") != 0)
			continue;
		struct ahead got = *a;
		r->ahead[i] = r->ahead[--r->nahead];
		int rc = 0;
		q->status = got.status;
		snprintf(q->digest, sizeof(q->digest), "%s", got.digest);
		if (got.status < 200 || got.status > 299) {
			q->err_len = got.len < ERRBODY_MAX ? got.len : ERRBODY_MAX;
			memcpy(q->err, got.body, q->err_len);
			q->err[q->err_len] = '\0';
		} else if (q->sink) {
			if (got.len && (q->sink_rc = q->sink(q->sctx, got.body, got.len)) < 0)
				rc = q->sink_rc;
		} else if (q->mem_max) {
			if (got.len > q->mem_max)
				rc = st_why(why, whylen, ST_EFORMAT, "%s: the answer is over %zu bytes", q->url, q->mem_max);
			else
				memcpy(q->mem, got.body, q->mem_len = got.len);
		}
		free(got.body);
		return rc;
	}
	return 1;
}

/* Run q once, with the Authorization header auth (a bearer token), or
 * the credentials as Basic if basic. Returns 0 with q->status set, or an
 * error for the transport. */
static int perform(struct ix_registry *r, struct req *q, const char *auth, bool basic, char *why, size_t whylen)
{
	struct curl_slist *h = NULL;
	struct body_ctx bc = { r->curl, q };
	char line[4096], errbuf[CURL_ERROR_SIZE];
	uint64_t body_size = 0;
	CURLcode cc;
	int rc = 0;

	uint64_t left_ms = 0;
	if (r->o.deadline_ns) {
		uint64_t now = ix_registry_now_ns();
		if (now >= r->o.deadline_ns)
			return st_why(why, whylen, IX_EDEADLINE, "%s %s: not started, the deadline passed", q->method,
				      q->url);
		left_ms = (r->o.deadline_ns - now + 999999) / 1000000;
	}
	CURL *c = r->curl;
	curl_easy_reset(c);
	q->status = 0;
	q->location[0] = q->www_auth[0] = q->digest[0] = '\0';
	q->err_len = 0;
	q->err[0] = '\0';
	q->mem_len = 0;
	q->mem_over = false;
	q->sink_rc = 0;
	q->body_off = 0;
	q->skip = 0;
	q->left = 0;
	q->cut = false;
	q->started = false;
	if (r->nahead && (rc = from_ahead(r, q, why, whylen)) != 1)
		return rc;
	rc = 0;
	if (conn_share)
		curl_easy_setopt(c, CURLOPT_SHARE, conn_share);

	curl_easy_setopt(c, CURLOPT_URL, q->url);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "strata/" STRATA_VERSION);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, r->o.connect_s ? (long)r->o.connect_s : CONNECT_SECONDS);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, r->o.low_speed ? (long)r->o.low_speed : (long)IX_REGISTRY_LOW_SPEED);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, r->o.stall_s ? (long)r->o.stall_s : STALL_SECONDS);
	if (left_ms)
		curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)left_ms);
	curl_easy_setopt(c, CURLOPT_BUFFERSIZE, RECV_BUFFER);
	curl_easy_setopt(c, CURLOPT_UPLOAD_BUFFERSIZE, SEND_BUFFER);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, q);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &bc);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, r->o.insecure ? "http" : "https");
	curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, r->o.insecure ? "http,https" : "https");
	if (r->certs_rc < 0)
		return st_why(why, whylen, r->certs_rc, "%s", r->certs_why);
	if (r->ca_blob) {
		struct curl_blob blob = { r->ca_blob, r->ca_len, CURL_BLOB_NOCOPY };
		curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &blob);
	} else if (r->o.cacert) {
		curl_easy_setopt(c, CURLOPT_CAINFO, r->o.cacert);
	}
	if (r->client_cert) {
		curl_easy_setopt(c, CURLOPT_SSLCERT, r->client_cert);
		curl_easy_setopt(c, CURLOPT_SSLKEY, r->client_key);
	}
	if (r->o.tls_noverify) {
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (strcmp(q->method, "GET") == 0) {
		curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L); /* blob stores redirect to their backend */
		curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
		if (q->range_len) {
			char range[48];
			snprintf(range, sizeof(range), "%" PRIu64 "-%" PRIu64, q->range_from, q->range_from + q->range_len - 1);
			curl_easy_setopt(c, CURLOPT_RANGE, range);
		} else if (q->range_from) {
			char range[48];
			snprintf(range, sizeof(range), "%" PRIu64 "-", q->range_from);
			curl_easy_setopt(c, CURLOPT_RANGE, range);
		}
	} else if (strcmp(q->method, "HEAD") == 0) {
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	} else if (strcmp(q->method, "PUT") == 0 || strcmp(q->method, "POST") == 0) {
		body_size = q->body_len;
		curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, q->method);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(c, CURLOPT_READDATA, q);
		curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)body_size);
		h = curl_slist_append(h, "Expect:"); /* no 100-continue round trip */
		if (r->upload) {
			curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_xfer);
			curl_easy_setopt(c, CURLOPT_XFERINFODATA, r);
			curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
		}
	}
	if (q->content_type) {
		snprintf(line, sizeof(line), "Content-Type: %s", q->content_type);
		h = curl_slist_append(h, line);
	}
	if (q->accept) {
		snprintf(line, sizeof(line), "Accept: %s", q->accept);
		h = curl_slist_append(h, line);
	}
	if (auth) {
		snprintf(line, sizeof(line), "Authorization: %s", auth);
		h = curl_slist_append(h, line);
	} else if (basic && has_creds(r)) {
		/* Sent to this URL's host only: libcurl drops it on a redirect
		 * elsewhere (CURLOPT_UNRESTRICTED_AUTH is off). */
		curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl_easy_setopt(c, CURLOPT_USERNAME, r->user);
		curl_easy_setopt(c, CURLOPT_PASSWORD, r->pass);
	}
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);

	errbuf[0] = '\0';
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	cc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &q->status);
	{
		curl_off_t up = 0, down = 0;
		long hdr = 0, reqsz = 0;
		curl_easy_getinfo(c, CURLINFO_SIZE_UPLOAD_T, &up);
		curl_easy_getinfo(c, CURLINFO_SIZE_DOWNLOAD_T, &down);
		curl_easy_getinfo(c, CURLINFO_HEADER_SIZE, &hdr);
		curl_easy_getinfo(c, CURLINFO_REQUEST_SIZE, &reqsz);
		r->wire.up += (uint64_t)up + (uint64_t)reqsz;
		r->wire.down += (uint64_t)down + (uint64_t)hdr;
		r->wire.requests++;
	}
	curl_slist_free_all(h);
	/* Go's and nginx's answer to plain HTTP on their HTTPS port (a 400,
	 * with no body to a HEAD): ask the port for TLS. */
	if (cc == CURLE_OK && r->o.insecure && q->status == 400 && port_speaks(r, true))
		return st_why(why, whylen, IX_ETLS, "%s speaks HTTPS, not plain HTTP (HTTP 400): drop --plain-http "
			      "(--insecure means plain HTTP, as in crane; HTTPS without certificate checks is "
			      "--tls-verify=false)", r->host);
	if (cc == CURLE_OK || (cc == CURLE_WRITE_ERROR && q->cut))
		return 0;
	if (cc == CURLE_WRITE_ERROR && q->sink_rc < 0)
		return q->sink_rc;
	if (cc == CURLE_WRITE_ERROR && q->mem_over)
		return st_why(why, whylen, ST_EFORMAT, "%s: the answer is over %zu bytes", q->url, q->mem_max);
	if (cc == CURLE_OPERATION_TIMEDOUT && r->o.deadline_ns && ix_registry_now_ns() >= r->o.deadline_ns)
		return st_why(why, whylen, IX_EDEADLINE, "%s %s: ended, the deadline passed", q->method, q->url);
	if (cc == CURLE_OPERATION_TIMEDOUT)
		return st_why(why, whylen, IX_ENET, "%s %s: %s (less than %u bytes a second for %ld s, or no connection "
			      "within %ld s): given up", q->method, q->url, curl_easy_strerror(cc),
			      r->o.low_speed ? r->o.low_speed : IX_REGISTRY_LOW_SPEED,
			      r->o.stall_s ? (long)r->o.stall_s : STALL_SECONDS,
			      r->o.connect_s ? (long)r->o.connect_s : CONNECT_SECONDS);
	switch (cc) {
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_CONNECT:
	case CURLE_OPERATION_TIMEDOUT:
		rc = IX_ENET;
		break;
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_CACERT_BADFILE:
		rc = IX_ETLS;
		break;
	default:
		rc = IX_ENET;
		break;
	}
	/* A transport that does not match the registry's, or a certificate:
	 * the fix first, in the few words why holds. */
	if (rc == IX_ETLS && cc != CURLE_PEER_FAILED_VERIFICATION && port_speaks(r, false))
		return st_why(why, whylen, IX_ETLS, "%s speaks plain HTTP, not HTTPS: use --plain-http (%s)", r->host,
			      errbuf[0] ? errbuf : curl_easy_strerror(cc));
	if (cc == CURLE_PEER_FAILED_VERIFICATION)
		return st_why(why, whylen, IX_ETLS, "%s: %s; a private CA: --cacert FILE or its CA as ca.crt in the "
			      "registry's certs.d directory; --tls-verify=false skips the check", r->host,
			      errbuf[0] ? errbuf : curl_easy_strerror(cc));
	if (!r->o.insecure && !r->client_cert &&
	    (cc == CURLE_SEND_ERROR || cc == CURLE_RECV_ERROR || cc == CURLE_SSL_CONNECT_ERROR))
		return st_why(why, whylen, rc, "%s %s: %s (if the registry asks for a client certificate: NAME.cert and "
			      "NAME.key in its certs.d directory)", q->method, r->host,
			      errbuf[0] ? errbuf : curl_easy_strerror(cc));
	return st_why(why, whylen, rc, "%s %s: %s%s%s", q->method, q->url, curl_easy_strerror(cc), errbuf[0] ? ": " : "",
		      errbuf);
}

/* Value of key="..." (or key=token) in a WWW-Authenticate challenge. */
static bool challenge_param(const char *ch, const char *key, char *out, size_t cap)
{
	size_t kl = strlen(key);

	for (const char *p = ch; (p = strcasestr(p, key)); p += kl) {
		if ((p != ch && p[-1] != ' ' && p[-1] != ',') || p[kl] != '=')
			continue;
		const char *v = p + kl + 1;
		size_t n = 0;
		if (*v == '"') {
			v++;
			while (v[n] && v[n] != '"')
				n++;
		} else {
			while (v[n] && v[n] != ',' && v[n] != ' ')
				n++;
		}
		if (n >= cap)
			return false;
		memcpy(out, v, n);
		out[n] = '\0';
		return true;
	}
	return false;
}

/* Answer a Bearer challenge: GET realm?service=..&scope=.. for a token. */
static int fetch_token(struct ix_registry *r, const char *challenge, char *why, size_t whylen)
{
	char realm[1024], service[256] = "", scope[1024] = "";
	char *esc_service = NULL, *esc_scope = NULL;
	struct req *q = st_sys_calloc(1, sizeof(*q));
	json_t *root = NULL, *tok;
	int rc;

	if (!q)
		return -ENOMEM;
	if (!challenge_param(challenge, "realm", realm, sizeof(realm))) {
		rc = st_why(why, whylen, IX_EAUTH, "the registry's bearer challenge names no realm");
		goto out_free;
	}
	challenge_param(challenge, "service", service, sizeof(service));
	if (!challenge_param(challenge, "scope", scope, sizeof(scope)))
		snprintf(scope, sizeof(scope), "repository:%s:pull,push", r->repo);
	esc_service = curl_easy_escape(r->curl, service, 0);
	esc_scope = curl_easy_escape(r->curl, scope, 0);
	if (!esc_service || !esc_scope) {
		rc = -ENOMEM;
		goto out_free;
	}
	snprintf(q->url, sizeof(q->url), "%s%sservice=%s&scope=%s", realm, strchr(realm, '?') ? "&" : "?", esc_service,
		 esc_scope);
	q->method = "GET";
	q->body_fd = -1;
	q->mem_max = 64 << 10;
	if (!(q->mem = st_sys_malloc(q->mem_max + 1))) {
		rc = -ENOMEM;
		goto out_free;
	}
	bool have = has_creds(r);
	/* The token realm is the registry's choice, but plain HTTP only for an
	 * --insecure registry. */
	if (!r->o.insecure && strncmp(realm, "https://", 8) != 0) {
		rc = st_why(why, whylen, IX_EAUTH, "the token realm %s is not HTTPS", realm);
		goto out_free;
	}
	if ((rc = perform(r, q, NULL, have, why, whylen)) < 0)
		goto out_free;
	if (q->status == 401 || q->status == 403) {
		rc = st_why(why, whylen, IX_EAUTH, "the token service %s refused %s (HTTP %ld)", realm,
			     have ? "the credentials" : "an anonymous request; credentials are needed", q->status);
		goto out_free;
	}
	if (q->status != 200) {
		rc = st_why(why, whylen, IX_EAUTH, "the token service %s answered HTTP %ld", realm, q->status);
		goto out_free;
	}
	q->mem[q->mem_len] = '\0';
	root = json_loadb(q->mem, q->mem_len, 0, NULL);
	tok = json_object_get(root, "token");
	if (!json_is_string(tok))
		tok = json_object_get(root, "access_token");
	if (!json_is_string(tok)) {
		rc = st_why(why, whylen, IX_EAUTH, "the token service %s gave no token", realm);
		goto out_free;
	}
	free(r->token);
	if (!(r->token = st_sys_strdup(json_string_value(tok))))
		rc = -ENOMEM;
out_free:
	json_decref(root);
	curl_free(esc_service);
	curl_free(esc_scope);
	if (q)
		free(q->mem);
	free(q);
	return rc;
}

/* Run q with authentication: answer one 401 challenge, then retry. */
static int request(struct ix_registry *r, struct req *q, char *why, size_t whylen)
{
	char auth[4096];
	int rc;

	for (int attempt = 0;; attempt++) {
		const char *a = NULL;
		if (r->token) {
			snprintf(auth, sizeof(auth), "Bearer %s", r->token);
			a = auth;
		}
		if ((rc = perform(r, q, a, r->basic, why, whylen)) < 0)
			return rc;
		if (q->status == 403)
			return st_why(why, whylen, IX_EAUTH, "%s %s: access denied (HTTP 403)%s%.200s", q->method, q->url,
				       q->err_len ? ": " : "", q->err);
		if (q->status != 401)
			return 0;
		if (attempt > 0 || !q->www_auth[0])
			return st_why(why, whylen, IX_EAUTH, "%s %s: the registry refused the %s (HTTP 401)", q->method,
				       q->url, r->user ? "credentials"
							    : "request; no credentials were found for it (--creds USER:PASSWORD, "
							      "an auth file or a docker-credential helper)");
		if (strncasecmp(q->www_auth, "Bearer", 6) == 0) {
			if ((rc = fetch_token(r, q->www_auth, why, whylen)) < 0)
				return rc;
		} else if (strncasecmp(q->www_auth, "Basic", 5) == 0) {
			if (!r->user)
				return st_why(why, whylen, IX_EAUTH,
					       "the registry asks for credentials and none were found for it (--creds "
					       "USER:PASSWORD, an auth file or a docker-credential helper)");
			r->basic = true;
		} else {
			return st_why(why, whylen, IX_EAUTH, "unknown authentication scheme: %.60s", q->www_auth);
		}
	}
}

static int http_fail(const struct req *q, char *why, size_t whylen)
{
	return st_why(why, whylen, IX_EHTTP, "%s %s: HTTP %ld%s%.200s", q->method, q->url, q->status,
		       q->err_len ? ": " : "", q->err);
}

static struct req *req_new(struct ix_registry *r, const char *method, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static struct req *req_new(struct ix_registry *r, const char *method, const char *fmt, ...)
{
	struct req *q = st_sys_calloc(1, sizeof(*q));
	va_list ap;
	int n;

	if (!q)
		return NULL;
	q->method = method;
	q->body_fd = -1;
	n = snprintf(q->url, sizeof(q->url), "%s/v2/%s/", r->base, r->repo);
	va_start(ap, fmt);
	vsnprintf(q->url + n, sizeof(q->url) - (size_t)n, fmt, ap);
	va_end(ap);
	return q;
}

/* Remember that the repository holds d (best effort: only for origins). */
static void seen_add(struct ix_registry *r, const struct st_oci_desc *d)
{
	if (!d->has_id || !r->o.ix)
		return;
	if (ST_ARRAY_RESERVE(r->seen, r->capseen, r->nseen + 1) < 0)
		return;
	r->seen[r->nseen++] = d->id;
}

int ix_registry_origins_record(struct ix_registry *r)
{
	char origin[IX_ORIGIN_MAX + 1];
	int n = snprintf(origin, sizeof(origin), "%s/%s", r->host, r->repo);

	if (!r->o.ix || n < 0 || (size_t)n >= sizeof(origin))
		return 0;
	return ix_origin_put(r->o.ix, r->seen, r->nseen, origin);
}

/* The repository of this registry to mount d from: --from, else where
 * the store last saw d on this registry; NULL if none. */
static const char *mount_source(struct ix_registry *r, const struct st_oci_desc *d, char *buf, size_t len)
{
	size_t hl = strlen(r->host);

	if (r->o.mount_from)
		return strcmp(r->o.mount_from, r->repo) != 0 ? r->o.mount_from : NULL;
	if (!r->o.ix || !d->has_id || ix_origin_get(r->o.ix, &d->id, buf, len) < 0)
		return NULL;
	if (strncmp(buf, r->host, hl) != 0 || buf[hl] != '/' || strcmp(buf + hl + 1, r->repo) == 0)
		return NULL;
	return buf + hl + 1;
}

/* ------------------------------------------------------------------ sink */

static int reg_blob_has(void *ctx, const struct st_oci_desc *d, char *why, size_t whylen)
{
	struct ix_registry *r = ctx;
	char dg[ST_DIGEST_LEN + 1];
	struct req *q;
	int rc;

	st_digest_format(d->sha256, dg);
	if (!(q = req_new(r, "HEAD", "blobs/%s", dg)))
		return -ENOMEM;
	rc = request(r, q, why, whylen);
	if (rc == 0)
		rc = q->status == 200 ? 1 : q->status == 404 ? 0 : http_fail(q, why, whylen);
	if (rc == 1)
		seen_add(r, d);
	free(q);
	return rc;
}

/* An upload URL from a Location header (absolute or relative), with
 * digest. false if it does not fit. */
static bool upload_url(const struct ix_registry *r, const char *loc, const char *dg, char *out, size_t cap)
{
	const char *sep = strchr(loc, '?') ? "&" : "?";
	int n;

	if (strncmp(loc, "http://", 7) == 0 || strncmp(loc, "https://", 8) == 0)
		n = snprintf(out, cap, "%s%sdigest=%s", loc, sep, dg);
	else
		n = snprintf(out, cap, "%s%s%s%sdigest=%s", r->base, loc[0] == '/' ? "" : "/", loc, sep, dg);
	return n > 0 && (size_t)n < cap;
}

static int reg_blob_put(void *ctx, const struct st_oci_desc *d, int fd, const void *buf, char *why, size_t whylen)
{
	struct ix_registry *r = ctx;
	char dg[ST_DIGEST_LEN + 1];
	struct req *q;
	int rc;

	char origin[IX_ORIGIN_MAX + 1];
	const char *from = mount_source(r, d, origin, sizeof(origin));

	st_digest_format(d->sha256, dg);
	if (from)
		q = req_new(r, "POST", "blobs/uploads/?mount=%s&from=%s", dg, from);
	else
		q = req_new(r, "POST", "blobs/uploads/");
	if (!q)
		return -ENOMEM;
	if ((rc = request(r, q, why, whylen)) < 0)
		goto out_free;
	if (q->status == 201 && from) {
		r->wire.mounts++;
		seen_add(r, d);
		rc = 1; /* mounted: no bytes sent */
		goto out_free;
	}
	if (q->status != 202 || !q->location[0]) {
		rc = http_fail(q, why, whylen);
		goto out_free;
	}
	char loc[sizeof(q->location)];
	memcpy(loc, q->location, sizeof(loc));
	if (!upload_url(r, loc, dg, q->url, sizeof(q->url))) {
		rc = st_why(why, whylen, IX_EHTTP, "the registry's upload location is too long");
		goto out_free;
	}
	q->method = "PUT";
	q->content_type = "application/octet-stream";
	q->body_fd = fd;
	q->body = buf;
	q->body_len = d->size;
	r->upload = d;
	r->upload_done = 0;
	rc = request(r, q, why, whylen);
	r->upload = NULL;
	if (rc == 0 && q->status != 201)
		rc = http_fail(q, why, whylen);
	if (rc == 0)
		seen_add(r, d);
out_free:
	free(q);
	return rc;
}

/* PUT a manifest of media_type whose sha256 is sha under ref (NULL: its
 * digest); subject_listed (if not NULL): the registry answered with an
 * OCI-Subject header (it indexed the referrer itself). */
static int manifest_put(struct ix_registry *r, const char *ref, const char *media_type, const char *json, size_t len,
			const uint8_t sha[ST_SHA256_LEN], bool *subject_listed, char *why, size_t whylen)
{
	char dg[ST_DIGEST_LEN + 1];
	struct req *q;
	int rc;

	st_digest_format(sha, dg);
	if (!(q = req_new(r, "PUT", "manifests/%s", ref ? ref : dg)))
		return -ENOMEM;
	q->content_type = media_type;
	q->body = json;
	q->body_len = len;
	rc = request(r, q, why, whylen);
	if (rc == 0 && q->status != 201)
		rc = http_fail(q, why, whylen);
	if (rc == 0 && q->digest[0] && strcmp(q->digest, dg) != 0)
		rc = st_why(why, whylen, IX_EHTTP, "the registry stored manifest %s as %s", dg, q->digest);
	if (rc == 0 && subject_listed)
		*subject_listed = q->subject[0] != '\0';
	free(q);
	return rc;
}

static int reg_manifest_put(void *ctx, const char *json, size_t len, const uint8_t sha[ST_SHA256_LEN], const char *tag,
			    char *why, size_t whylen)
{
	return manifest_put(ctx, tag, ST_OCI_MANIFEST_TYPE, json, len, sha, NULL, why, whylen);
}

void ix_registry_sink(struct ix_registry *r, struct ix_oci_sink *out)
{
	*out = (struct ix_oci_sink){ r, reg_blob_has, reg_blob_put, reg_manifest_put, 0, NULL, false };
}

/* ---------------------------------------------------------------- source */

/* Run GET q (owned) for a small JSON document (at most ST_OCI_MANIFEST_MAX):
 * *json malloc'd and NUL-terminated; a 404 is IX_EREMOTE_MISSING with why
 * "<missing>". */
static int get_doc(struct ix_registry *r, struct req *q, const char *missing, char **json, size_t *len, char *why,
		   size_t whylen)
{
	int rc;

	q->mem_max = ST_OCI_MANIFEST_MAX;
	if (!(q->mem = st_sys_malloc(q->mem_max + 1))) {
		free(q);
		return -ENOMEM;
	}
	rc = request(r, q, why, whylen);
	if (rc == 0 && q->status == 404)
		rc = st_why(why, whylen, IX_EREMOTE_MISSING, "%s", missing);
	else if (rc == 0 && q->status != 200)
		rc = http_fail(q, why, whylen);
	if (rc == 0) {
		q->mem[q->mem_len] = '\0';
		*json = q->mem;
		*len = q->mem_len;
		q->mem = NULL;
	}
	free(q->mem);
	free(q);
	return rc;
}

static int reg_manifest_get(void *ctx, const char *ref, char **json, size_t *len, char *why, size_t whylen)
{
	struct ix_registry *r = ctx;
	struct req *q = req_new(r, "GET", "manifests/%s", ref);
	char missing[1200];

	if (!q)
		return -ENOMEM;
	/* The other types are asked for too, so that what is there is
	 * refused with a clear reason rather than a 404. */
	q->accept = IX_REGISTRY_MANIFEST_ACCEPT;
	snprintf(missing, sizeof(missing), "%s:%s is not in the registry", r->repo, ref);
	return get_doc(r, q, missing, json, len, why, whylen);
}

static int reg_blob_get(void *ctx, const struct st_oci_desc *d, uint64_t offset, ix_oci_sink_fn sink, void *sctx,
			char *why, size_t whylen)
{
	struct ix_registry *r = ctx;
	char dg[ST_DIGEST_LEN + 1];
	struct req *q;
	int rc;

	st_digest_format(d->sha256, dg);
	if (!(q = req_new(r, "GET", "blobs/%s", dg)))
		return -ENOMEM;
	q->sink = sink;
	q->sctx = sctx;
	q->range_from = offset;
	rc = request(r, q, why, whylen);
	if (rc == 0 && q->status == 404)
		rc = st_why(why, whylen, IX_EREMOTE_MISSING, "blob %s is not in %s (the manifest names a blob it does not carry)",
			     dg, r->repo);
	else if (rc == 0 && q->status != 200 && q->status != 206)
		rc = http_fail(q, why, whylen);
	if (rc == 0)
		seen_add(r, d);
	free(q);
	return rc;
}

int ix_registry_blob_range(struct ix_registry *r, const uint8_t sha[ST_SHA256_LEN], uint64_t off, uint64_t len,
			   ix_oci_sink_fn sink, void *sctx, char *why, size_t whylen)
{
	char dg[ST_DIGEST_LEN + 1];
	struct req *q;
	int rc;

	if (len == 0)
		return -EINVAL;
	st_digest_format(sha, dg);
	if (!(q = req_new(r, "GET", "blobs/%s", dg)))
		return -ENOMEM;
	q->sink = sink;
	q->sctx = sctx;
	q->range_from = off;
	q->range_len = len;
	rc = request(r, q, why, whylen);
	if (rc == 0 && q->status == 404)
		rc = st_why(why, whylen, IX_EREMOTE_MISSING, "blob %s is not in %s/%s", dg, r->host, r->repo);
	else if (rc == 0 && q->status == 416)
		rc = st_why(why, whylen, IX_EHTTP, "%s %s: bytes %" PRIu64 "-%" PRIu64 " are past the blob's end", q->method,
			    q->url, off, off + len - 1);
	else if (rc == 0 && q->status != 200 && q->status != 206)
		rc = http_fail(q, why, whylen);
	free(q);
	return rc;
}

int ix_registry_token_share(struct ix_registry *dst, const struct ix_registry *src)
{
	char *t;

	if (!src || !src->token || dst->token || strcmp(src->origin, dst->origin) != 0 ||
	    src->o.insecure != dst->o.insecure)
		return 0;
	if (!(t = st_sys_strdup(src->token)))
		return -ENOMEM;
	dst->token = t;
	return 0;
}

static bool reg_not_found(int rc)
{
	return rc == IX_EREMOTE_MISSING;
}

void ix_registry_source(struct ix_registry *r, struct ix_oci_source *out)
{
	*out = (struct ix_oci_source){ r, reg_manifest_get, reg_blob_get, reg_not_found, r->origin, r->o.insecure, NULL };
}

/* ------------------------------------------------------------ ahead of time */

struct ahead_job {
	struct ix_registry t;      /* r's settings, a handle of its own */
	struct req q;
	const char *auth;
	bool basic;                /* no token: the credentials as Basic */
	int rc;
	bool started;
	pthread_t th;
};

static void *ahead_main(void *arg)
{
	struct ahead_job *j = arg;
	char why[ST_WHY_LEN];

	j->rc = perform(&j->t, &j->q, j->auth, j->basic, why, sizeof(why));
	return NULL;
}

int ix_registry_ahead(struct ix_registry *r, const struct ix_registry_ahead_req *v, size_t n)
{
	struct ahead_job *jobs;
	char auth[4096];
	const char *a = NULL;
	size_t started = 0;

	if (n > AHEAD_MAX)
		n = AHEAD_MAX;
	if (!n || !(jobs = st_sys_calloc(n, sizeof(*jobs))))
		return n ? -ENOMEM : 0;
	if (r->token) {
		snprintf(auth, sizeof(auth), "Bearer %s", r->token);
		a = auth;
	}
	for (size_t i = 0; i < n; i++) {
		struct ahead_job *j = &jobs[i];
		if (!v[i].max || v[i].max > AHEAD_BYTES_MAX)
			continue;
		j->t = *r;
		j->t.nahead = 0;
		j->t.upload = NULL;
		j->t.wire = (struct ix_registry_wire){ 0 };
		j->q.method = "GET";
		j->q.body_fd = -1;
		j->q.accept = v[i].accept;
		j->q.mem_max = v[i].max;
		j->auth = a;
		j->basic = !a && r->basic;
		snprintf(j->q.url, sizeof(j->q.url), "%s/v2/%s/%s", r->base, r->repo, v[i].path);
		if (!(j->t.curl = curl_easy_init()) || !(j->q.mem = st_sys_malloc(v[i].max)) ||
		    pthread_create(&j->th, NULL, ahead_main, j) != 0) {
			if (j->t.curl)
				curl_easy_cleanup(j->t.curl);
			free(j->q.mem);
			break;
		}
		j->started = true;
		started++;
	}
	for (size_t i = 0; i < n && started; i++) {
		struct ahead_job *j = &jobs[i];
		if (!j->started)
			continue;
		started--;
		pthread_join(j->th, NULL);
		curl_easy_cleanup(j->t.curl);
		r->wire.up += j->t.wire.up;
		r->wire.down += j->t.wire.down;
		r->wire.requests += j->t.wire.requests;
		/* Only answers a later request would take as they are: a 401
		 * (authentication), a transfer error or a cut body goes again. */
		struct ahead *na = NULL;
		if (j->rc == 0 && !j->q.mem_over && (j->q.status == 200 || j->q.status == 404) &&
		    (na = st_sys_realloc(r->ahead, (r->nahead + 1) * sizeof(*r->ahead)))) {
			r->ahead = na;
			struct ahead *e = &r->ahead[r->nahead++];
			snprintf(e->url, sizeof(e->url), "%s", j->q.url);
			snprintf(e->accept, sizeof(e->accept), "%s", j->q.accept ? j->q.accept : "");
			e->status = j->q.status;
			snprintf(e->digest, sizeof(e->digest), "%s", j->q.digest);
			if (j->q.status == 404) {
				free(j->q.mem);
				j->q.mem = st_sys_malloc(j->q.err_len + 1);
				if (j->q.mem)
					memcpy(j->q.mem, j->q.err, j->q.err_len);
				e->len = j->q.mem ? j->q.err_len : 0;
			} else {
				e->len = j->q.mem_len;
			}
			e->body = j->q.mem;
			j->q.mem = NULL;
		}
		free(j->q.mem);
	}
	free(jobs);
	return 0;
}

/* ---------------------------------------------------------------- referrers */

int ix_registry_manifest_put_typed(struct ix_registry *r, const char *ref, const char *media_type, const char *json,
				   size_t len, bool *subject_listed, char *why, size_t whylen)
{
	uint8_t sha[ST_SHA256_LEN];

	st_sha256_hash(json, len, sha);
	return manifest_put(r, ref, media_type, json, len, sha, subject_listed, why, whylen);
}

int ix_registry_referrers_get(struct ix_registry *r, const uint8_t subject[ST_SHA256_LEN], const char *artifact_type,
			      char **json, size_t *len, char *why, size_t whylen)
{
	char dg[ST_DIGEST_LEN + 1];
	struct req *q;

	st_digest_format(subject, dg);
	if (!(q = req_new(r, "GET", "referrers/%s?artifactType=%s", dg, artifact_type)))
		return -ENOMEM;
	q->accept = ST_OCI_INDEX_TYPE;
	/* A registry without the API answers 404 (distribution 2.x: no such route). */
	return get_doc(r, q, "the registry has no referrers API", json, len, why, whylen);
}
