/* oci_layout.c: OCI image layout directories: export (a push into a directory) and import (a pull from one). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/array.h"
#include "index/index_int.h"
#include "index/dist/dist.h"
#include "store/sys.h"

#define LAYOUT_CHUNK (1u << 20)
static const char OCI_LAYOUT_FILE[] = "{\"imageLayoutVersion\":\"1.0.0\"}";

bool ix_oci_is_layout(const char *dir)
{
	char path[4096];
	struct stat sb;

	if (snprintf(path, sizeof(path), "%s/oci-layout", dir) >= (int)sizeof(path))
		return false;
	return st_sys_fstatat(AT_FDCWD, path, &sb, 0) == 0 && S_ISREG(sb.st_mode);
}

/* ---------------------------------------------------------------- export */

struct dir_sink {
	int blobs_fd;  /* LAYOUT/blobs/sha256 */
	bool sync;
	mode_t mode;   /* the store's ST_PERM_RO: a layout is as private as the store */
};

static void hex_of(const uint8_t sha[ST_SHA256_LEN], char out[65])
{
	char dg[ST_DIGEST_LEN + 1];

	st_digest_format(sha, dg);
	memcpy(out, dg + 7, 65);
}

static int dir_blob_has(void *ctx, const struct st_oci_desc *d, char *why, size_t whylen)
{
	struct dir_sink *ds = ctx;
	struct stat sb;
	char hex[65];

	hex_of(d->sha256, hex);
	return st_sys_fstatat(ds->blobs_fd, hex, &sb, 0) == 0 && (uint64_t)sb.st_size == d->size;
}

static int dir_write(struct dir_sink *ds, const uint8_t sha[ST_SHA256_LEN], int in_fd, const void *buf, size_t len)
{
	char hex[65];
	int fd = -1, rc;

	hex_of(sha, hex);
	if ((fd = st_sys_openat(ds->blobs_fd, hex, O_WRONLY | O_CREAT | O_TRUNC, ds->mode)) < 0)
		return fd;
	rc = st_sys_fchmod(fd, ds->mode);
	if (rc == 0)
		rc = in_fd >= 0 ? st_sys_copy_range(in_fd, fd, len) : st_sys_write_all(fd, buf, len);
	if (rc == 0 && ds->sync)
		rc = st_sys_fsync(fd);
	int crc = st_sys_close(fd);
	return rc < 0 ? rc : crc;
}

static int dir_blob_put(void *ctx, const struct st_oci_desc *d, int fd, const void *buf, char *why, size_t whylen)
{
	return dir_write(ctx, d->sha256, fd, buf, d->size);
}

static int dir_manifest_put(void *ctx, const char *json, size_t len, const uint8_t sha[ST_SHA256_LEN], const char *tag,
			    char *why, size_t whylen)
{
	return dir_write(ctx, sha, -1, json, len);
}

struct tag_names {
	char **v;
	size_t n, cap;
};

static int tag_collect(const char *name, const st_id *id, void *ctx)
{
	struct tag_names *t = ctx;

	if (ST_ARRAY_RESERVE(t->v, t->cap, t->n + 1) < 0)
		return -ENOMEM;
	if (!(t->v[t->n] = st_sys_strdup(name)))
		return -ENOMEM;
	t->n++;
	return 0;
}

/* Write a small file in dirfd, durable when sync. */
static int small_file(int dirfd, const char *name, const char *buf, size_t len, bool sync, mode_t mode)
{
	if (sync)
		return st_sys_write_file_synced(dirfd, name, buf, len, mode);
	int fd = st_sys_openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC, mode), rc;
	if (fd < 0)
		return fd;
	rc = st_sys_fchmod(fd, mode);
	if (rc == 0)
		rc = st_sys_write_all(fd, buf, len);
	int crc = st_sys_close(fd);
	return rc < 0 ? rc : crc;
}

int ix_oci_export(struct ix *ix, const char *const *refs, size_t nrefs, const char *dir,
		  const struct ix_oci_progress *prog, struct ix_oci_stats *stats, char *why, size_t whylen)
{
	return ix_oci_export_opts(ix, refs, nrefs, dir, false, prog, stats, why, whylen);
}

int ix_oci_export_opts(struct ix *ix, const char *const *refs, size_t nrefs, const char *dir, bool whole_configs,
		       const struct ix_oci_progress *prog, struct ix_oci_stats *stats, char *why, size_t whylen)
{
	struct ix_oci_stats st = { 0 };
	struct tag_names tags = { 0 };
	struct st_oci_ref *entries = NULL;
	struct dir_sink ds = { .blobs_fd = -1, .sync = st_store_sync(ix->s) == ST_SYNC_FULL,
			       .mode = st_store_perm(ix->s, ST_PERM_RO) };
	char *dcopy = NULL, *bcopy = NULL, tmp[4096], *index = NULL;
	const char *parent, *base;
	size_t nentries = 0, ilen;
	int pfd = -1, tfd = -1, rc;

	if (why && whylen)
		why[0] = '\0';
	if (!(dcopy = st_sys_strdup(dir)) || !(bcopy = st_sys_strdup(dir))) {
		rc = -ENOMEM;
		goto out_free;
	}
	parent = dirname(dcopy);
	base = basename(bcopy);
	if ((pfd = st_sys_openat(AT_FDCWD, parent, O_PATH | O_DIRECTORY, 0)) < 0) {
		rc = pfd;
		goto out_free;
	}
	struct stat sb;
	if (st_sys_fstatat(pfd, base, &sb, AT_SYMLINK_NOFOLLOW) == 0) {
		rc = -EEXIST;
		goto out_free;
	}
	if (nrefs == 0) {
		struct ix_txn *t;
		if ((rc = ix_txn_begin(ix, &t)) < 0)
			goto out_free;
		rc = ix_tag_foreach(t, tag_collect, &tags);
		ix_txn_end(t);
		if (rc < 0)
			goto out_free;
		refs = (const char *const *)tags.v;
		nrefs = tags.n;
	}
	snprintf(tmp, sizeof(tmp), ".%s.strata-oci.%ld", base, (long)getpid());
	st_rm_tree(pfd, tmp);
	if ((rc = st_store_mkdirat(ix->s, pfd, tmp, ST_PERM_DIR)) < 0)
		goto out_free;
	if ((tfd = st_sys_openat(pfd, tmp, O_PATH | O_DIRECTORY, 0)) < 0) {
		rc = tfd;
		goto out_rm;
	}
	if ((rc = st_store_mkdirat(ix->s, tfd, "blobs", ST_PERM_DIR)) < 0 ||
	    (rc = st_store_mkdirat(ix->s, tfd, "blobs/sha256", ST_PERM_DIR)) < 0)
		goto out_rm;
	if ((ds.blobs_fd = st_sys_openat(tfd, "blobs/sha256", O_PATH | O_DIRECTORY, 0)) < 0) {
		rc = ds.blobs_fd;
		goto out_rm;
	}
	if (nrefs && !(entries = st_sys_calloc(nrefs, sizeof(*entries)))) {
		rc = -ENOMEM;
		goto out_rm;
	}
	struct ix_oci_sink sink = { &ds, dir_blob_has, dir_blob_put, dir_manifest_put, 0, NULL, whole_configs };
	for (size_t i = 0; i < nrefs; i++) {
		struct ix_oci_stats one;
		struct ix_txn *t;
		st_id tid;
		bool is_tag = false;

		if ((rc = ix_txn_begin(ix, &t)) < 0)
			goto out_rm;
		is_tag = st_name_valid(refs[i]) && ix_tag_get(t, refs[i], &tid) == 0;
		ix_txn_end(t);
		rc = ix_oci_push(ix, refs[i], NULL, &sink, prog, &one, entries[i].sha256, &entries[i].size, why, whylen);
		if (rc < 0)
			goto out_rm;
		if (is_tag && !(entries[i].name = st_sys_strdup(refs[i]))) {
			rc = -ENOMEM;
			goto out_rm;
		}
		nentries = i + 1;
		st.snapshots += one.snapshots;
		st.blobs_moved += one.blobs_moved;
		st.blobs_skipped += one.blobs_skipped;
		st.bytes_moved += one.bytes_moved;
		st.bytes_skipped += one.bytes_skipped;
		st.bytes_sha256 += one.bytes_sha256;
	}
	if ((rc = st_oci_index_encode(entries, nrefs, &index, &ilen)) < 0 ||
	    (rc = small_file(tfd, "index.json", index, ilen, ds.sync, ds.mode)) < 0 ||
	    (rc = small_file(tfd, "oci-layout", OCI_LAYOUT_FILE, sizeof(OCI_LAYOUT_FILE) - 1, ds.sync, ds.mode)) < 0)
		goto out_rm;
	if (ds.sync && ((rc = st_dir_fsync(tfd, "blobs/sha256")) < 0 || (rc = st_dir_fsync(tfd, "blobs")) < 0 ||
			(rc = st_dir_fsync(tfd, ".")) < 0))
		goto out_rm;
	if ((rc = st_sys_renameat_noreplace(pfd, tmp, pfd, base)) < 0)
		goto out_rm;
	if (ds.sync)
		st_dir_fsync(pfd, ".");
	if (stats)
		*stats = st;
	rc = 0;
	goto out_close;
out_rm:
	st_rm_tree(pfd, tmp);
out_close:
	if (ds.blobs_fd >= 0)
		st_sys_close(ds.blobs_fd);
	if (tfd >= 0)
		st_sys_close(tfd);
out_free:
	if (pfd >= 0)
		st_sys_close(pfd);
	st_oci_refs_free(entries, nentries < nrefs ? nrefs : nentries);
	for (size_t i = 0; i < tags.n; i++)
		free(tags.v[i]);
	free(tags.v);
	free(index);
	free(dcopy);
	free(bcopy);
	return rc;
}

/* ---------------------------------------------------------------- import */

struct dir_source {
	int blobs_fd;
};

static int dir_open_blob(struct dir_source *src, const uint8_t sha[ST_SHA256_LEN], int *fd, char *why, size_t whylen)
{
	char hex[65];
	int rc;

	hex_of(sha, hex);
	rc = st_sys_openat(src->blobs_fd, hex, O_RDONLY, 0);
	if (rc == -ENOENT)
		return st_why(why, whylen, -ENOENT, "blob sha256:%s is not in the layout", hex);
	if (rc < 0)
		return rc;
	*fd = rc;
	return 0;
}

static int dir_manifest_get(void *ctx, const char *ref, char **json, size_t *len, char *why, size_t whylen)
{
	uint8_t sha[ST_SHA256_LEN];
	struct stat sb;
	char *buf;
	int fd = -1, rc;

	if (st_digest_parse(ref, sha) < 0)
		return st_why(why, whylen, -EINVAL, "'%s' is not a digest", ref);
	if ((rc = dir_open_blob(ctx, sha, &fd, why, whylen)) < 0)
		return rc;
	if ((rc = st_sys_fstat(fd, &sb)) < 0)
		goto out_close;
	if (!S_ISREG(sb.st_mode) || (uint64_t)sb.st_size > ST_OCI_MANIFEST_MAX) {
		rc = st_why(why, whylen, ST_EFORMAT, "manifest %s is not a file of at most %u bytes", ref,
			    ST_OCI_MANIFEST_MAX);
		goto out_close;
	}
	if (!(buf = st_sys_malloc((size_t)sb.st_size + 1))) {
		rc = -ENOMEM;
		goto out_close;
	}
	ssize_t n = st_sys_pread(fd, buf, (size_t)sb.st_size, 0);
	if (n != sb.st_size) {
		free(buf);
		rc = n < 0 ? (int)n : -EIO;
		goto out_close;
	}
	buf[n] = '\0';
	*json = buf;
	*len = (size_t)n;
	rc = 0;
out_close:
	st_sys_close(fd);
	return rc;
}

static int dir_blob_get(void *ctx, const struct st_oci_desc *d, uint64_t offset, ix_oci_sink_fn sink, void *sctx,
			char *why, size_t whylen)
{
	uint8_t *buf;
	int fd = -1, rc;

	if ((rc = dir_open_blob(ctx, d->sha256, &fd, why, whylen)) < 0)
		return rc;
	if (!(buf = st_sys_malloc(LAYOUT_CHUNK))) {
		st_sys_close(fd);
		return -ENOMEM;
	}
	for (;;) {
		ssize_t n = st_sys_pread(fd, buf, LAYOUT_CHUNK, (off_t)offset);
		if (n <= 0) {
			rc = (int)n;
			break;
		}
		if ((rc = sink(sctx, buf, (size_t)n)) < 0)
			break;
		offset += (uint64_t)n;
	}
	free(buf);
	st_sys_close(fd);
	return rc;
}

static bool dir_not_found(int rc)
{
	return rc == -ENOENT;
}

int ix_oci_import(struct ix *ix, const char *dir, const char *tag, unsigned flags,
		  const struct ix_oci_progress *prog, struct ix_oci_stats *stats, st_id *out_id, char *why,
		  size_t whylen)
{
	struct ix_oci_stats st = { 0 };
	struct dir_source src = { -1 };
	struct st_oci_ref *refs = NULL;
	char path[4096], *json = NULL;
	size_t n = 0;
	int dfd, rc;

	if (why && whylen)
		why[0] = '\0';
	if ((dfd = st_sys_openat(AT_FDCWD, dir, O_PATH | O_DIRECTORY, 0)) < 0)
		return dfd;
	if ((src.blobs_fd = st_sys_openat(dfd, "blobs/sha256", O_PATH | O_DIRECTORY, 0)) < 0) {
		rc = st_why(why, whylen, ST_EFORMAT, "%s has no blobs/sha256 directory", dir);
		goto out_close;
	}
	snprintf(path, sizeof(path), "%s/index.json", dir);
	{
		int fd = st_sys_openat(dfd, "index.json", O_RDONLY, 0);
		struct stat sb;
		if (fd < 0) {
			rc = st_why(why, whylen, ST_EFORMAT, "%s has no index.json", dir);
			goto out_close;
		}
		rc = st_sys_fstat(fd, &sb);
		if (rc == 0 && (uint64_t)sb.st_size > ST_OCI_MANIFEST_MAX)
			rc = st_why(why, whylen, ST_EFORMAT, "%s is over %u bytes", path, ST_OCI_MANIFEST_MAX);
		if (rc == 0 && !(json = st_sys_malloc((size_t)sb.st_size + 1)))
			rc = -ENOMEM;
		if (rc == 0) {
			ssize_t r = st_sys_pread(fd, json, (size_t)sb.st_size, 0);
			rc = r == sb.st_size ? 0 : r < 0 ? (int)r : -EIO;
		}
		st_sys_close(fd);
		if (rc < 0)
			goto out_close;
		rc = st_oci_index_parse(json, (size_t)sb.st_size, &refs, &n, why, whylen);
		if (rc < 0)
			goto out_close;
	}
	if (n == 0) {
		rc = st_why(why, whylen, ST_EFORMAT, "%s lists no manifest", path);
		goto out_close;
	}
	if (tag && n != 1) {
		rc = st_why(why, whylen, -EINVAL, "the layout lists %zu manifests; --tag needs exactly one", n);
		goto out_close;
	}
	for (size_t i = 0; i < n; i++)
		if (!refs[i].ours) {
			rc = st_why(why, whylen, ST_EFORMAT, "index.json manifests[%zu]%s%s%s is not a strata snapshot", i,
				    refs[i].name ? " (" : "", refs[i].name ? refs[i].name : "", refs[i].name ? ")" : "");
			goto out_close;
		}
	struct ix_oci_source source = { &src, dir_manifest_get, dir_blob_get, dir_not_found, NULL, false, NULL };
	for (size_t i = 0; i < n; i++) {
		struct ix_oci_stats one;
		char dg[ST_DIGEST_LEN + 1];
		const char *t = tag ? tag : refs[i].name && st_name_valid(refs[i].name) ? refs[i].name : NULL;

		st_digest_format(refs[i].sha256, dg);
		rc = ix_oci_pull(ix, &source, dg, t, flags & ~IX_OCI_KEEP_PARTIAL, prog, &one, out_id, why, whylen);
		if (rc < 0)
			goto out_close;
		st.snapshots += one.snapshots;
		st.blobs_moved += one.blobs_moved;
		st.blobs_skipped += one.blobs_skipped;
		st.bytes_moved += one.bytes_moved;
		st.bytes_skipped += one.bytes_skipped;
		st.existed = one.existed;
	}
	if (stats)
		*stats = st;
out_close:
	if (src.blobs_fd >= 0)
		st_sys_close(src.blobs_fd);
	st_sys_close(dfd);
	st_oci_refs_free(refs, n);
	free(json);
	return rc;
}
