/* view.c: the daemon's cached picture of the index: tags by name, parsed manifests by id. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/array.h"
#include "fs/fs_int.h"
#include "store/sys.h"

void fs_log(struct fs *fs, int prio, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (fs->cfg && fs->cfg->log)
		fs->cfg->log(fs->cfg->log_ctx, prio, msg);
}

int64_t fs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void tags_free(struct fs_tags *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++)
		free(t->v[i].name);
	free(t->v);
	free(t);
}

struct fs_tags *fs_tags_get(struct fs *fs)
{
	pthread_mutex_lock(&fs->view_lock);
	struct fs_tags *t = fs->tags;
	t->refs++;
	pthread_mutex_unlock(&fs->view_lock);
	return t;
}

void fs_tags_put(struct fs *fs, struct fs_tags *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&fs->view_lock);
	bool last = --t->refs == 0;
	pthread_mutex_unlock(&fs->view_lock);
	if (last)
		tags_free(t);
}

const struct fs_tag *fs_tags_find(const struct fs_tags *t, const char *name)
{
	size_t lo = 0, hi = t->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(t->v[mid].name, name);
		if (c == 0)
			return &t->v[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

struct tag_collect {
	struct fs_tags *t;
	size_t cap;
};

static int collect_tag(const char *name, const st_id *id, void *ctx)
{
	struct tag_collect *c = ctx;

	if (ST_ARRAY_RESERVE(c->t->v, c->cap, c->t->n + 1) < 0)
		return -ENOMEM;
	char *dup = st_sys_strdup(name);
	if (!dup)
		return -ENOMEM;
	c->t->v[c->t->n].name = dup;
	c->t->v[c->t->n].id = *id;
	c->t->n++;
	return 0;
}

static int tag_cmp(const void *a, const void *b)
{
	return strcmp(((const struct fs_tag *)a)->name, ((const struct fs_tag *)b)->name);
}

/* Read every tag in one read transaction. */
static int load_tags(struct fs *fs, struct fs_tags **out)
{
	struct tag_collect c = { 0 };
	struct ix_txn *txn;
	int rc;

	c.t = st_sys_calloc(1, sizeof(*c.t));
	if (!c.t)
		return -ENOMEM;
	c.t->refs = 1;
	rc = ix_txn_begin(fs->ix, &txn);
	if (rc < 0)
		goto out_free;
	rc = ix_txn_generation(txn, &c.t->gen);
	if (rc >= 0)
		rc = ix_tag_foreach(txn, collect_tag, &c);
	ix_txn_end(txn);
	if (rc < 0)
		goto out_free;
	/* ix_tag_foreach gives name order already; sort anyway so lookups
	 * never depend on the index's key comparison. */
	if (c.t->n)
		qsort(c.t->v, c.t->n, sizeof(*c.t->v), tag_cmp);
	*out = c.t;
	return 0;
out_free:
	tags_free(c.t);
	return rc;
}

int fs_view_init(struct fs *fs)
{
	pthread_mutex_init(&fs->view_lock, NULL);
	fs->nsnapbuckets = 4096;
	fs->snaps = st_sys_calloc(fs->nsnapbuckets, sizeof(*fs->snaps));
	if (!fs->snaps)
		return -ENOMEM;
	return load_tags(fs, &fs->tags);
}

static void snap_free(struct fs_snap *s)
{
	if (!s)
		return;
	free(s->raw);
	st_manifest_free(s->m);
	free(s);
}

void fs_view_handed(struct fs *fs, const char *name, const st_id *id)
{
	pthread_mutex_lock(&fs->view_lock);
	for (size_t i = 0; i < fs->nhanded; i++) {
		if (strcmp(fs->handed[i].name, name) == 0) {
			fs->handed[i].id = *id;
			pthread_mutex_unlock(&fs->view_lock);
			return;
		}
	}
	if (ST_ARRAY_RESERVE(fs->handed, fs->caphanded, fs->nhanded + 1) < 0)
		goto out_unlock; /* then the poller's diff of the tag sets is all it has */
	char *dup = st_sys_strdup(name);
	if (dup) {
		fs->handed[fs->nhanded].name = dup;
		fs->handed[fs->nhanded].id = *id;
		fs->nhanded++;
	}
out_unlock:
	pthread_mutex_unlock(&fs->view_lock);
}

int fs_view_take_stale(struct fs *fs, char ***names, size_t *n)
{
	char **out = NULL;
	size_t k = 0, cap = 0;
	int rc = 0;

	pthread_mutex_lock(&fs->view_lock);
	for (size_t i = 0; i < fs->nhanded;) {
		const struct fs_tag *t = fs_tags_find(fs->tags, fs->handed[i].name);
		if (t && st_id_equal(&t->id, &fs->handed[i].id)) {
			i++;
			continue;
		}
		if (ST_ARRAY_RESERVE(out, cap, k + 1) < 0) {
			rc = -ENOMEM;
			break;
		}
		out[k++] = fs->handed[i].name;
		fs->handed[i] = fs->handed[--fs->nhanded];
	}
	pthread_mutex_unlock(&fs->view_lock);
	*names = out;
	*n = k;
	return rc;
}

void fs_view_fini(struct fs *fs)
{
	for (size_t i = 0; i < fs->nremoving; i++)
		free(fs->removing[i].name);
	free(fs->removing);
	fs->removing = NULL;
	fs->nremoving = fs->capremoving = 0;
	for (size_t i = 0; i < fs->nhanded; i++)
		free(fs->handed[i].name);
	free(fs->handed);
	fs->handed = NULL;
	fs->nhanded = fs->caphanded = 0;
	if (fs->snaps) {
		for (size_t i = 0; i < fs->nsnapbuckets; i++) {
			struct fs_snap *s = fs->snaps[i], *next;
			for (; s; s = next) {
				next = s->next;
				snap_free(s);
			}
		}
	}
	free(fs->snaps);
	fs->snaps = NULL;
	tags_free(fs->tags);
	fs->tags = NULL;
	pthread_mutex_destroy(&fs->view_lock);
}

int fs_view_refresh(struct fs *fs, bool force, struct fs_tags **old)
{
	uint64_t gen;
	int rc = ix_generation(fs->ix, &gen);

	*old = NULL;
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&fs->view_lock);
	bool same = fs->tags->gen == gen;
	pthread_mutex_unlock(&fs->view_lock);
	if (same && !force)
		return 0;
	struct fs_tags *t;
	rc = load_tags(fs, &t);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&fs->view_lock);
	*old = fs->tags; /* our reference moves to the caller */
	fs->tags = t;
	pthread_mutex_unlock(&fs->view_lock);
	return 1;
}

static size_t snap_bucket(const struct fs *fs, const st_id *id)
{
	uint64_t v;

	memcpy(&v, id->b, sizeof(v));
	return (size_t)v & (fs->nsnapbuckets - 1);
}

int fs_snap_get(struct fs *fs, const st_id *id, const struct fs_snap **out)
{
	size_t b = snap_bucket(fs, id);
	struct ix_txn *txn;
	const void *raw;
	size_t len;
	int rc;

	pthread_mutex_lock(&fs->view_lock);
	for (struct fs_snap *s = fs->snaps[b]; s; s = s->next) {
		if (st_id_equal(&s->id, id)) {
			pthread_mutex_unlock(&fs->view_lock);
			*out = s;
			return 0;
		}
	}
	pthread_mutex_unlock(&fs->view_lock);

	struct fs_snap *s = st_sys_calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->id = *id;
	rc = ix_txn_begin(fs->ix, &txn);
	if (rc < 0)
		goto out_free;
	rc = ix_snap_get_raw(txn, id, &raw, &len);
	if (rc >= 0 && !(s->raw = st_sys_malloc(len + 1)))
		rc = -ENOMEM;
	if (rc >= 0) {
		memcpy(s->raw, raw, len);
		s->raw[len] = '\n';
		s->rawlen = len + 1;
	}
	ix_txn_end(txn);
	if (rc < 0) {
		if (rc == IX_ENOTFOUND)
			rc = -ENOENT;
		goto out_free;
	}
	char why[ST_WHY_LEN] = "";
	rc = st_manifest_parse(s->raw, s->rawlen - 1, &s->m, why, sizeof(why));
	if (rc < 0) {
		fs_log(fs, FS_LOG_ERR, "index: snapshot record unreadable: %s", why);
		rc = -EIO;
		goto out_free;
	}
	s->data_pages = fs_mem_data_pages(s->m);

	pthread_mutex_lock(&fs->view_lock);
	for (struct fs_snap *o = fs->snaps[b]; o; o = o->next) {
		if (st_id_equal(&o->id, id)) { /* another thread won the race */
			pthread_mutex_unlock(&fs->view_lock);
			snap_free(s);
			*out = o;
			return 0;
		}
	}
	s->next = fs->snaps[b];
	fs->snaps[b] = s;
	pthread_mutex_unlock(&fs->view_lock);
	*out = s;
	return 0;
out_free:
	snap_free(s);
	return rc;
}
