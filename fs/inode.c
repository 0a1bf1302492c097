/* inode.c: the node table: FUSE node ids, stable inode numbers, lookup counting. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fs/kinds.h"
#include "store/sys.h"

#define ITABLE_MIN_BUCKETS 1024

struct fs_itable {
	pthread_mutex_t lock;
	struct fs_node **by_ino, **by_key; /* protected by lock (and every node's chains and nlookup) */
	size_t nbuckets, count;            /* protected by lock */
	uint64_t next_ino;                 /* protected by lock */
	void (*release)(struct fs_node *n, void *ctx); /* fixed; called outside lock */
	void *release_ctx;                 /* fixed */
};

static uint64_t key_hash(const struct fs_key *k)
{
	unsigned char buf[1 + sizeof(st_id) + FS_NAME_MAX + 1];
	size_t len = 0, nl = k->name ? strnlen(k->name, FS_NAME_MAX) : 0;
	st_id h;
	uint64_t v;

	buf[len++] = (unsigned char)k->kind;
	memcpy(buf + len, k->id.b, sizeof(k->id.b));
	len += sizeof(k->id.b);
	memcpy(buf + len, k->name ? k->name : "", nl);
	len += nl;
	st_id_hash(buf, len, &h);
	memcpy(&v, h.b, sizeof(v));
	return v;
}

void fs_key_serial(struct fs_key *k, enum fs_kind kind, uint64_t serial)
{
	memset(k, 0, sizeof(*k));
	k->kind = kind;
	memcpy(k->id.b, &serial, sizeof(serial));
}

uint64_t fs_ino_stable(const struct fs_key *key)
{
	uint64_t fixed = fs_kind(key->kind)->fixed_ino;

	if (fixed)
		return fixed;
	uint64_t v = key_hash(key) & ((1ull << 63) - 1);
	return v < FS_INO_FIRST_DYNAMIC ? v + FS_INO_FIRST_DYNAMIC : v;
}

static bool key_equal(const struct fs_node *n, const struct fs_key *k)
{
	if (n->kind != k->kind || !st_id_equal(&n->id, &k->id))
		return false;
	if (!n->name || !k->name)
		return !n->name && !k->name;
	return strcmp(n->name, k->name) == 0;
}

int fs_itable_new(void (*release)(struct fs_node *n, void *ctx), void *ctx, struct fs_itable **out)
{
	struct fs_itable *t = st_sys_calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->nbuckets = ITABLE_MIN_BUCKETS;
	t->by_ino = st_sys_calloc(t->nbuckets, sizeof(*t->by_ino));
	t->by_key = st_sys_calloc(t->nbuckets, sizeof(*t->by_key));
	if (!t->by_ino || !t->by_key) {
		free(t->by_ino);
		free(t->by_key);
		free(t);
		return -ENOMEM;
	}
	pthread_mutex_init(&t->lock, NULL);
	t->next_ino = FS_INO_FIRST_DYNAMIC;
	t->release = release;
	t->release_ctx = ctx;
	*out = t;
	return 0;
}

static void node_free(struct fs_node *n)
{
	free(n->name);
	if (n->rm)
		free(n->rm->layer);
	free(n->rm);
	free(n);
}

void fs_itable_free(struct fs_itable *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nbuckets; i++) {
		struct fs_node *n = t->by_ino[i], *next;
		for (; n; n = next) {
			next = n->next_ino;
			if (t->release)
				t->release(n, t->release_ctx);
			node_free(n);
		}
	}
	free(t->by_ino);
	free(t->by_key);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

static size_t ino_bucket(const struct fs_itable *t, uint64_t ino)
{
	return (size_t)((ino * 0x9e3779b97f4a7c15ull) >> 20) & (t->nbuckets - 1);
}

/* Double the buckets when the load passes 1; keeps lookups O(1) for the
 * hundred thousand nodes an `ls -lR` over thousands of snapshots creates. */
static void grow(struct fs_itable *t)
{
	size_t nb = t->nbuckets * 2;
	struct fs_node **bi = st_sys_calloc(nb, sizeof(*bi)), **bk = st_sys_calloc(nb, sizeof(*bk));

	if (!bi || !bk) {
		free(bi);
		free(bk);
		return; /* stay slower, still correct */
	}
	size_t old = t->nbuckets;
	struct fs_node **oi = t->by_ino;
	t->nbuckets = nb;
	for (size_t i = 0; i < old; i++) {
		struct fs_node *n = oi[i], *next;
		for (; n; n = next) {
			next = n->next_ino;
			size_t b = ino_bucket(t, n->ino);
			n->next_ino = bi[b];
			bi[b] = n;
			struct fs_key k = { n->kind, n->id, n->name };
			size_t kb = (size_t)key_hash(&k) & (nb - 1);
			n->next_key = bk[kb];
			bk[kb] = n;
		}
	}
	free(oi);
	free(t->by_key);
	t->by_ino = bi;
	t->by_key = bk;
}

struct fs_node *fs_itable_get(struct fs_itable *t, uint64_t ino)
{
	pthread_mutex_lock(&t->lock);
	struct fs_node *n = t->by_ino[ino_bucket(t, ino)];
	while (n && n->ino != ino)
		n = n->next_ino;
	pthread_mutex_unlock(&t->lock);
	return n;
}

int fs_itable_acquire(struct fs_itable *t, const struct fs_key *key,
		      void (*init)(struct fs_node *n, void *ctx), void *ctx, struct fs_node **out)
{
	uint64_t h = key_hash(key);

	pthread_mutex_lock(&t->lock);
	struct fs_node *n = t->by_key[h & (t->nbuckets - 1)];
	while (n && !key_equal(n, key))
		n = n->next_key;
	if (n) {
		n->nlookup++;
		pthread_mutex_unlock(&t->lock);
		*out = n;
		return 0;
	}
	n = st_sys_calloc(1, sizeof(*n));
	if (!n || (key->name && !(n->name = st_sys_strdup(key->name)))) {
		free(n);
		pthread_mutex_unlock(&t->lock);
		return -ENOMEM;
	}
	n->kind = key->kind;
	n->id = key->id;
	n->st_ino = fs_ino_stable(key);
	/* the top dirs have fixed numbers and are never freed */
	n->ino = fs_kind(key->kind)->fixed_ino;
	n->pinned = n->ino != 0;
	if (!n->pinned)
		n->ino = t->next_ino++;
	n->nlookup = 1;
	if (init)
		init(n, ctx);
	if (t->count >= t->nbuckets)
		grow(t);
	size_t b = ino_bucket(t, n->ino);
	n->next_ino = t->by_ino[b];
	t->by_ino[b] = n;
	size_t kb = h & (t->nbuckets - 1);
	n->next_key = t->by_key[kb];
	t->by_key[kb] = n;
	t->count++;
	pthread_mutex_unlock(&t->lock);
	*out = n;
	return 0;
}

static void unlink_chains(struct fs_itable *t, struct fs_node *n)
{
	struct fs_node **p = &t->by_ino[ino_bucket(t, n->ino)];
	while (*p && *p != n)
		p = &(*p)->next_ino;
	if (*p)
		*p = n->next_ino;
	struct fs_key k = { n->kind, n->id, n->name };
	p = &t->by_key[key_hash(&k) & (t->nbuckets - 1)];
	while (*p && *p != n)
		p = &(*p)->next_key;
	if (*p)
		*p = n->next_key;
	t->count--;
}

/* Unhooks the node when its last lookup goes; the caller frees it outside the lock. */
static struct fs_node *forget_locked(struct fs_itable *t, uint64_t ino, uint64_t cnt)
{
	struct fs_node *n = t->by_ino[ino_bucket(t, ino)];
	while (n && n->ino != ino)
		n = n->next_ino;
	if (!n)
		return NULL;
	n->nlookup = cnt >= n->nlookup ? 0 : n->nlookup - cnt;
	if (n->nlookup || n->pinned)
		return NULL;
	unlink_chains(t, n);
	return n;
}

void fs_itable_forget(struct fs_itable *t, uint64_t ino, uint64_t n)
{
	pthread_mutex_lock(&t->lock);
	struct fs_node *gone = forget_locked(t, ino, n);
	pthread_mutex_unlock(&t->lock);
	if (gone) {
		if (t->release)
			t->release(gone, t->release_ctx);
		node_free(gone);
	}
}

size_t fs_itable_count(struct fs_itable *t)
{
	pthread_mutex_lock(&t->lock);
	size_t c = t->count;
	pthread_mutex_unlock(&t->lock);
	return c;
}
