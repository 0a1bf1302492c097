/* workingset.c: each snapshot's working-set record: checked against its snapshot, stored as a blob and linked (wslink.c), loaded back. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "index/index_int.h"

/* The manifest of snapshot id, from a read transaction. */
static int manifest_of(struct ix *ix, const st_id *id, struct st_manifest **m)
{
	struct ix_txn *t;
	int rc = ix_txn_begin(ix, &t);

	if (rc < 0)
		return rc;
	rc = ix_snap_get(t, id, m);
	ix_txn_end(t);
	return rc;
}

int ix_ws_put(struct ix *ix, const st_id *snap, const void *buf, size_t len, st_id *out, char *why, size_t whylen)
{
	struct st_manifest *m = NULL;
	struct st_ws *ws = NULL;
	st_id blob;
	int rc;

	if (ix->rdonly || !ix->has_ws)
		return ST_EREADONLY;
	if ((rc = manifest_of(ix, snap, &m)) < 0)
		return rc;
	if ((rc = st_ws_parse(buf, len, &ws, why, whylen)) < 0 || (rc = st_ws_check(ws, m, snap, why, whylen)) < 0)
		goto out_free;
	if ((rc = st_blob_put(ix->s, buf, len, &blob, NULL)) < 0)
		goto out_free;
	/* On failure the blob stays unreferenced: gc reclaims it. */
	if ((rc = ix_ws_link(ix, snap, &blob, len)) < 0)
		goto out_free;
	if (out)
		*out = blob;
out_free:
	st_ws_free(ws);
	st_manifest_free(m);
	return rc;
}

int ix_ws_load(struct ix *ix, const st_id *snap, struct st_ws **out, st_id *blob_out, char *why, size_t whylen)
{
	struct st_manifest *m = NULL;
	struct ix_txn *t;
	uint8_t *buf = NULL;
	uint64_t size;
	st_id blob;
	size_t got = 0;
	int fd = -1, rc;

	if ((rc = ix_txn_begin(ix, &t)) < 0)
		return rc;
	if ((rc = ix_ws_get(t, snap, &blob, &size)) == 0)
		rc = ix_snap_get(t, snap, &m);
	ix_txn_end(t);
	if (rc < 0)
		return rc;
	if (size > 48 + (uint64_t)ST_WS_MAX_LAYERS * 24 + (uint64_t)ST_WS_MAX_RUNS * 8) {
		rc = IX_ECORRUPT;
		goto out_free;
	}
	if ((rc = st_blob_open(ix->s, &blob, &fd)) < 0) {
		rc = rc == -ENOENT ? IX_EMISSING : rc;
		goto out_free;
	}
	if (!(buf = st_sys_malloc(size ? size : 1))) {
		rc = -ENOMEM;
		goto out_close;
	}
	while (got < size) {
		ssize_t r = st_sys_pread(fd, buf + got, size - got, (off_t)got);
		if (r <= 0) {
			rc = r < 0 ? (int)r : IX_EMISSING;
			goto out_close;
		}
		got += (size_t)r;
	}
	struct st_ws *ws;
	if ((rc = st_ws_parse(buf, size, &ws, why, whylen)) < 0)
		goto out_close;
	if ((rc = st_ws_check(ws, m, snap, why, whylen)) < 0) {
		st_ws_free(ws);
		goto out_close;
	}
	*out = ws;
	if (blob_out)
		*blob_out = blob;
out_close:
	(void)st_sys_close(fd);
out_free:
	free(buf);
	st_manifest_free(m);
	return rc;
}

