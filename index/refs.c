/* refs.c: what a snapshot record references (its layers, its parent), as sortable id pairs: what fsck checks and repair rebuilds. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "index/index_int.h"
#include "store/array.h"

int ix_pairs_add(struct ix_pairs *p, const st_id *a, const st_id *b, uint64_t n)
{
	if (ST_ARRAY_RESERVE(p->v, p->cap, p->n + 1) < 0)
		return -ENOMEM;
	p->v[p->n++] = (struct ix_pair){ .a = *a, .b = *b, .n = n };
	return 0;
}

int ix_pair_cmp(const void *x, const void *y)
{
	const struct ix_pair *p = x, *q = y;
	int c = st_id_cmp(&p->a, &q->a);

	return c ? c : st_id_cmp(&p->b, &q->b);
}

void ix_pairs_sort(struct ix_pairs *p)
{
	if (p->n)
		qsort(p->v, p->n, sizeof(*p->v), ix_pair_cmp);
}

int ix_snap_rec_check(struct ix *ix, MDB_txn *txn, const MDB_val *k, const MDB_val *v, st_id *id,
		      struct st_manifest **m, char *why, size_t whylen)
{
	char pwhy[ST_WHY_LEN];
	st_id h, did, dparent;

	if (k->mv_size != sizeof(id->b)) {
		snprintf(why, whylen, "a snapshot key is %zu bytes, not 16", k->mv_size);
		return IX_ECORRUPT;
	}
	memcpy(id->b, k->mv_data, sizeof(id->b));
	/* A delta record names its id; it is rebuilt from its parent's and the
	 * result checked against that id (docs/formats.md, "Manifest deltas"). */
	if (st_manifest_delta_peek(v->mv_data, v->mv_size, &did, &dparent, NULL, 0) == 0) {
		if (!st_id_equal(&did, id)) {
			snprintf(why, whylen, "the stored manifest delta names another snapshot");
			return IX_ECORRUPT;
		}
		int rc = ix_snap_load_check(ix, txn, id, m, pwhy, sizeof(pwhy));
		if (rc < 0) {
			snprintf(why, whylen, "the stored manifest delta does not rebuild the snapshot: %s", pwhy);
			return rc == -ENOMEM ? rc : IX_ECORRUPT;
		}
		return 0;
	}
	st_id_hash(v->mv_data, v->mv_size, &h);
	if (!st_id_equal(&h, id)) {
		snprintf(why, whylen, "the stored manifest does not hash to the snapshot's id");
		return IX_ECORRUPT;
	}
	if (st_manifest_parse(v->mv_data, v->mv_size, m, pwhy, sizeof(pwhy)) < 0) {
		snprintf(why, whylen, "the stored manifest does not parse: %s", pwhy);
		return IX_ECORRUPT;
	}
	return 0;
}

int ix_refs_add(struct ix_pairs *refs, struct ix_pairs *edges, const st_id *id,
		const struct st_manifest *m)
{
	int rc = 0;

	for (uint32_t i = 0; i < m->nlayers && rc == 0; i++) {
		bool dup = false;
		for (uint32_t j = 0; j < i && !dup; j++)
			dup = st_id_equal(&m->layers[j].id, &m->layers[i].id);
		if (!dup)
			rc = ix_pairs_add(refs, &m->layers[i].id, id, m->layers[i].pages * ST_PAGE_SIZE);
	}
	if (rc == 0 && m->has_parent)
		rc = ix_pairs_add(edges, &m->parent, id, 0);
	return rc;
}
