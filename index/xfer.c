/* xfer.c: snapshot directories in and out of the store: import (verify, dedup, one commit) and export. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "index/index_int.h"

/* How often an import re-stores its layers when gc removed a deduplicated
 * (then unreferenced) blob between the put and the commit. */
#define IMPORT_RETRIES 3

static void set_why(char *why, size_t len, const char *fmt, const char *hex, unsigned long long a,
		    unsigned long long b)
{
	if (why && len)
		snprintf(why, len, fmt, hex, a, b);
}

struct rollback_ctx {
	const st_id *ids;
	size_t n;
};

/* Remove blobs this import added, unless a snapshot references them by now
 * (checked inside a write txn so it serialises with commits). */
static int rollback_fn(struct ix *ix, MDB_txn *txn, void *arg)
{
	struct rollback_ctx *c = arg;

	for (size_t i = 0; i < c->n; i++) {
		struct ix_blob_rec r;
		int rc = ix_blob_rec_get(ix, txn, &c->ids[i], &r);

		if (rc == IX_ENOTFOUND)
			st_blob_del(ix->s, &c->ids[i]);
		else if (rc < 0)
			return rc;
	}
	return IX_NOCHANGE;
}

void ix_blobs_rollback(struct ix *ix, const st_id *ids, size_t n)
{
	struct rollback_ctx rb = { .ids = ids, .n = n };

	ix_write(ix, rollback_fn, &rb); /* best effort: leftovers are orphans gc reclaims */
}

/* Store every layer of m from dir (fds already open), re-hashing each
 * against its name. Ids newly stored are appended to added. */
static int put_layers(struct ix *ix, const struct st_manifest *m, const int *fds, st_id *added,
		      uint32_t *nadded, struct ix_import_stats *st, char *why, size_t whylen)
{
	for (uint32_t i = 0; i < m->nlayers; i++) {
		char hex[ST_ID_HEX_LEN + 1];
		bool dedup;
		int rc;

		off_t at = st_sys_lseek(fds[i], 0, SEEK_SET);
		if (at < 0)
			return (int)at;
		rc = st_blob_put_fd(ix->s, fds[i], &m->layers[i].id, NULL, &dedup);
		if (rc < 0) {
			st_id_format(&m->layers[i].id, hex);
			if (rc == ST_ECORRUPT)
				set_why(why, whylen, "layer %s: its bytes do not hash to its name", hex, 0, 0);
			return rc;
		}
		st->bytes_read += m->layers[i].pages * ST_PAGE_SIZE;
		if (!dedup) {
			added[(*nadded)++] = m->layers[i].id;
			st->layers_added++;
			st->bytes_added += m->layers[i].pages * ST_PAGE_SIZE;
		}
	}
	return 0;
}

/* The snapshot is already in the index: store each of its layers whose
 * blob file is missing from dir (already verified whole). A blob file that
 * is present is left alone, even if damaged: fsck --repair moves it aside
 * first. The index's records already reference these blobs, so gc cannot
 * take them between the put and the end of this call. */
static int heal_layers(struct ix *ix, const char *dir, const struct st_manifest *m, struct ix_import_stats *st)
{
	for (uint32_t i = 0; i < m->nlayers; i++) {
		const st_id *lid = &m->layers[i].id;
		bool dedup = true;
		int fd, rc;

		if (st_blob_has(ix->s, lid))
			continue;
		if ((rc = st_snapdir_layer_open(dir, lid, &fd)) < 0)
			return rc;
		rc = st_blob_put_fd(ix->s, fd, lid, NULL, &dedup);
		(void)st_sys_close(fd);
		if (rc < 0)
			return rc;
		if (!dedup) { /* a layer listed twice is stored once */
			st->layers_healed++;
			st->layers_added++;
			st->bytes_added += m->layers[i].pages * ST_PAGE_SIZE;
		}
	}
	return 0;
}

int ix_import_dir(struct ix *ix, const char *dir, const char *tag, unsigned flags,
		  st_id *out_id, struct ix_import_stats *stats, char *why, size_t whylen)
{
	struct ix_import_stats st = { 0 };
	struct st_manifest *m = NULL;
	struct ix_txn *t;
	st_id id, *added = NULL;
	uint32_t nadded = 0, nopen = 0;
	int *fds = NULL;
	int rc;

	if (why && whylen)
		why[0] = '\0';
	if (ix->rdonly)
		return ST_EREADONLY;
	if (tag && !st_name_valid(tag))
		return ST_EBADNAME;
	if ((rc = st_snapdir_read(dir, &m, why, whylen)) < 0) {
		if (rc == -ENOENT && why && whylen)
			snprintf(why, whylen, "%s/manifest.json does not exist", dir);
		return rc;
	}
	if ((rc = st_manifest_id(m, &id, why, whylen)) < 0)
		goto out_free;
	st.layers = m->nlayers;

	/* Already here: only the tag may change, and layers a repair moved
	 * aside come back from this copy. */
	if ((rc = ix_txn_begin(ix, &t)) < 0)
		goto out_free;
	st.existed = ix_snap_has(t, &id);
	ix_txn_end(t);
	if (st.existed) {
		/* Still check what was handed in: a damaged copy is an error
		 * even when the store already holds a good one. */
		if ((rc = st_snapdir_verify(dir, m, why, whylen)) < 0)
			goto out_free;
		if ((rc = heal_layers(ix, dir, m, &st)) < 0)
			goto out_free;
		rc = ix_snap_commit(ix, m, tag, flags, NULL);
		goto out_done;
	}

	/* Every layer present with the size the manifest says, before any byte
	 * is stored: a missing or truncated layer leaves the store untouched. */
	fds = st_sys_calloc(m->nlayers ? m->nlayers : 1, sizeof(*fds));
	added = st_sys_calloc(m->nlayers ? (size_t)m->nlayers * IMPORT_RETRIES : 1, sizeof(*added));
	if (!fds || !added) {
		rc = -ENOMEM;
		goto out_free;
	}
	for (; nopen < m->nlayers; nopen++) {
		char hex[ST_ID_HEX_LEN + 1];
		uint64_t want = m->layers[nopen].pages * ST_PAGE_SIZE;
		struct stat sb;

		st_id_format(&m->layers[nopen].id, hex);
		rc = st_snapdir_layer_open_why(dir, &m->layers[nopen].id, &fds[nopen], why, whylen);
		if (rc < 0) {
			if (rc == -ENOENT)
				set_why(why, whylen, "layer %s is missing", hex, 0, 0);
			goto out_close;
		}
		if ((rc = st_sys_fstat(fds[nopen], &sb)) < 0) {
			nopen++;
			goto out_close;
		}
		if (!S_ISREG(sb.st_mode) || (uint64_t)sb.st_size != want) {
			set_why(why, whylen, "layer %s is %llu bytes, the manifest says %llu", hex,
				(unsigned long long)sb.st_size, (unsigned long long)want);
			rc = ST_ELAYOUT;
			nopen++;
			goto out_close;
		}
	}

	for (int attempt = 0;; attempt++) {
		rc = put_layers(ix, m, fds, added, &nadded, &st, why, whylen);
		if (rc < 0)
			break;
		rc = ix_snap_commit(ix, m, tag, flags, NULL);
		if (rc != IX_EMISSING || attempt + 1 >= IMPORT_RETRIES)
			break;
		st.bytes_read = 0;
	}
	if (rc < 0 && nadded) {
		ix_blobs_rollback(ix, added, nadded);
	}
out_close:
	for (uint32_t i = 0; i < nopen; i++)
		(void)st_sys_close(fds[i]);
out_done:
	if (rc == 0) {
		if (out_id)
			*out_id = id;
		if (stats)
			*stats = st;
	}
out_free:
	free(fds);
	free(added);
	st_manifest_free(m);
	return rc;
}

int ix_export(struct ix *ix, const char *ref, const char *dir)
{
	struct st_manifest *m;
	struct ix_txn *t;
	st_id id;
	int rc;

	if ((rc = ix_txn_begin(ix, &t)) < 0)
		return rc;
	rc = ix_resolve(t, ref, &id);
	if (rc == 0)
		rc = ix_snap_get(t, &id, &m);
	ix_txn_end(t);
	if (rc < 0)
		return rc;
	rc = st_snapdir_export(ix->s, m, dir, NULL, 0);
	st_manifest_free(m);
	return rc;
}
