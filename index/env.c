/* env.c: the index's LMDB environment: open, meta records, transactions, map growth. */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "index/index_int.h"
#include "store/sys.h"

/* The first map. LMDB files grow with their data, not with the map, so this
 * costs address space only; it is large enough that ordinary stores never
 * grow it, and small enough to leave address space for many mappings. */
#define IX_MAP_DEFAULT (64ull << 20)
/* Growth doubles the map, up to this bound (then MDB_MAP_FULL is an error). */
#define IX_MAP_MAX (1ull << 40)
#define IX_MAX_READERS 510
#define IX_MAX_DBS 16

static const char KEY_VERSION[] = "version";
static const char KEY_UUID[] = "uuid";
static const char KEY_GENERATION[] = "generation";

static void put_u64le(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_u64le(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static void blob_rec_decode(const MDB_val *v, struct ix_blob_rec *r)
{
	r->size = get_u64le(v->mv_data);
	r->refs = get_u64le((const uint8_t *)v->mv_data + 8);
}

int ix_blob_rec_get(struct ix *ix, MDB_txn *txn, const st_id *id, struct ix_blob_rec *out)
{
	MDB_val k = ix_val(id->b, sizeof(id->b)), v;
	int rc = ix_mdb(mdb_get(txn, ix->blobs, &k, &v));

	if (rc == MDB_NOTFOUND)
		return IX_ENOTFOUND;
	if (rc < 0)
		return rc;
	if (v.mv_size != IX_BLOB_REC_LEN)
		return IX_ECORRUPT;
	blob_rec_decode(&v, out);
	return 0;
}

int ix_blob_rec_put(struct ix *ix, MDB_txn *txn, const st_id *id, const struct ix_blob_rec *r)
{
	uint8_t buf[IX_BLOB_REC_LEN];
	MDB_val k = ix_val(id->b, sizeof(id->b)), v = ix_val(buf, sizeof(buf));

	if (r->refs == 0)
		return ix_mdb(mdb_del(txn, ix->blobs, &k, NULL)); /* a record exists iff referenced */
	put_u64le(buf, r->size);
	put_u64le(buf + 8, r->refs);
	return ix_mdb(mdb_put(txn, ix->blobs, &k, &v, 0));
}

/* Another process grew the map: adopt its size. Takes the lock exclusive. */
static int map_adopt(struct ix *ix)
{
	pthread_rwlock_wrlock(&ix->resize);
	int rc = ix_mdb(mdb_env_set_mapsize(ix->env, 0));
	pthread_rwlock_unlock(&ix->resize);
	return rc;
}

/* Our write did not fit: double the map. */
static int map_grow(struct ix *ix)
{
	MDB_envinfo info;
	int rc;

	pthread_rwlock_wrlock(&ix->resize);
	rc = ix_mdb(mdb_env_info(ix->env, &info));
	if (rc == 0) {
		uint64_t cur = info.me_mapsize;
		if (cur >= IX_MAP_MAX)
			rc = -ENOSPC;
		else
			rc = ix_mdb(mdb_env_set_mapsize(ix->env, cur * 2));
	}
	pthread_rwlock_unlock(&ix->resize);
	return rc;
}

static int gen_bump(struct ix *ix, MDB_txn *txn)
{
	MDB_val k = ix_val(KEY_GENERATION, sizeof(KEY_GENERATION) - 1), v;
	uint8_t buf[8];
	uint64_t gen = 0;
	int rc = ix_mdb(mdb_get(txn, ix->meta, &k, &v));

	if (rc == 0 && v.mv_size == 8)
		gen = get_u64le(v.mv_data);
	else if (rc == 0 || rc != MDB_NOTFOUND)
		return rc == 0 ? IX_ECORRUPT : rc;
	put_u64le(buf, gen + 1);
	v = ix_val(buf, sizeof(buf));
	return ix_mdb(mdb_put(txn, ix->meta, &k, &v, 0));
}

int ix_write(struct ix *ix, ix_write_fn fn, void *ctx)
{
	int rc;

	if (ix->rdonly)
		return ST_EREADONLY;
	for (int attempt = 0; attempt < 64; attempt++) {
		MDB_txn *txn;

		pthread_rwlock_rdlock(&ix->resize);
		rc = ix_mdb(mdb_txn_begin(ix->env, NULL, 0, &txn));
		if (rc == MDB_MAP_RESIZED) {
			pthread_rwlock_unlock(&ix->resize);
			if ((rc = map_adopt(ix)) < 0)
				return ix_err(rc);
			continue;
		}
		if (rc < 0) {
			pthread_rwlock_unlock(&ix->resize);
			return ix_err(rc);
		}
		rc = fn(ix, txn, ctx);
		if (rc == 0)
			rc = gen_bump(ix, txn);
		if (rc == 0) {
			rc = ix_mdb(mdb_txn_commit(txn));
		} else {
			mdb_txn_abort(txn);
			if (rc == IX_NOCHANGE)
				rc = 0;
		}
		pthread_rwlock_unlock(&ix->resize);
		if (rc == MDB_MAP_FULL) {
			if ((rc = map_grow(ix)) < 0)
				return ix_err(rc);
			continue;
		}
		if (rc == -EACCES || rc == -EROFS || rc == -EPERM)
			return ST_EREADONLY;
		return ix_err(rc);
	}
	return IX_EBUSY;
}

int ix_txn_begin(struct ix *ix, struct ix_txn **out)
{
	struct ix_txn *t = st_sys_calloc(1, sizeof(*t));
	int rc;

	if (!t)
		return -ENOMEM;
	t->ix = ix;
	for (;;) {
		pthread_rwlock_rdlock(&ix->resize);
		rc = ix_mdb(mdb_txn_begin(ix->env, NULL, MDB_RDONLY, &t->txn));
		if (rc == 0)
			break;
		pthread_rwlock_unlock(&ix->resize);
		if (rc != MDB_MAP_RESIZED || (rc = map_adopt(ix)) < 0) {
			free(t);
			return ix_err(rc);
		}
	}
	*out = t;
	return 0;
}

void ix_txn_end(struct ix_txn *t)
{
	if (!t)
		return;
	mdb_txn_abort(t->txn);
	pthread_rwlock_unlock(&t->ix->resize);
	while (t->owned) {
		struct ix_owned *o = t->owned;
		t->owned = o->next;
		free(o);
	}
	free(t);
}

int ix_txn_generation(struct ix_txn *t, uint64_t *out)
{
	MDB_val k = ix_val(KEY_GENERATION, sizeof(KEY_GENERATION) - 1), v;
	int rc = ix_mdb(mdb_get(t->txn, t->ix->meta, &k, &v));

	if (rc == MDB_NOTFOUND) {
		*out = 0;
		return 0;
	}
	if (rc < 0)
		return ix_err(rc);
	if (v.mv_size != 8)
		return IX_ECORRUPT;
	*out = get_u64le(v.mv_data);
	return 0;
}

int ix_generation(struct ix *ix, uint64_t *out)
{
	struct ix_txn *t;
	int rc = ix_txn_begin(ix, &t);

	if (rc < 0)
		return rc;
	rc = ix_txn_generation(t, out);
	ix_txn_end(t);
	return rc;
}

void ix_uuid(const struct ix *ix, uint8_t uuid[16])
{
	memcpy(uuid, ix->uuid, 16);
}

/* Open the named databases (creating them if create) and read or write the meta records. */
static int open_dbs(struct ix *ix, bool create)
{
	unsigned f = create ? MDB_CREATE : 0;
	MDB_txn *txn;
	MDB_val k, v;
	int rc = ix_mdb(mdb_txn_begin(ix->env, NULL, create ? 0 : MDB_RDONLY, &txn));

	if (rc < 0)
		return rc;
	if ((rc = ix_mdb(mdb_dbi_open(txn, "meta", f, &ix->meta))) < 0 ||
	    (rc = ix_mdb(mdb_dbi_open(txn, "blobs", f, &ix->blobs))) < 0 ||
	    (rc = ix_mdb(mdb_dbi_open(txn, "snapshots", f, &ix->snaps))) < 0 ||
	    (rc = ix_mdb(mdb_dbi_open(txn, "tags", f, &ix->tags))) < 0 ||
	    (rc = ix_mdb(mdb_dbi_open(txn, "children", f | MDB_DUPSORT | MDB_DUPFIXED, &ix->children))) < 0)
		goto out_abort;
	/* Added after format 1 shipped, and only a cache of facts about blob
	 * contents: an index without it is still version 1. A writer creates
	 * it; a read-only open of an older index goes on without it. */
	rc = ix_mdb(mdb_dbi_open(txn, "sha256", f, &ix->sha256));
	ix->has_sha256 = rc == 0;
	if (rc < 0 && !(rc == MDB_NOTFOUND && ix->rdonly))
		goto out_abort;
	/* Lazy layers (lazy.c) came later still: the same rule. */
	rc = ix_mdb(mdb_dbi_open(txn, "lazy", f, &ix->lazy));
	ix->has_lazy = rc == 0;
	if (rc < 0 && !(rc == MDB_NOTFOUND && ix->rdonly))
		goto out_abort;
	/* Working-set links (workingset.c): added the same way. */
	rc = ix_mdb(mdb_dbi_open(txn, "workingsets", f, &ix->ws));
	ix->has_ws = rc == 0;
	if (rc < 0 && !(rc == MDB_NOTFOUND && ix->rdonly))
		goto out_abort;

	k = ix_val(KEY_VERSION, sizeof(KEY_VERSION) - 1);
	rc = ix_mdb(mdb_get(txn, ix->meta, &k, &v));
	if (rc == MDB_NOTFOUND && create) {
		uint8_t ver[4] = { IX_FORMAT_VERSION, 0, 0, 0 };
		uint8_t gen[8] = { 0 };
		if (getrandom(ix->uuid, sizeof(ix->uuid), 0) != (ssize_t)sizeof(ix->uuid)) {
			rc = -errno;
			goto out_abort;
		}
		ix->uuid[6] = (uint8_t)((ix->uuid[6] & 0x0f) | 0x40); /* RFC 4122 version 4 */
		ix->uuid[8] = (uint8_t)((ix->uuid[8] & 0x3f) | 0x80);
		v = ix_val(ver, sizeof(ver));
		if ((rc = ix_mdb(mdb_put(txn, ix->meta, &k, &v, 0))) < 0)
			goto out_abort;
		k = ix_val(KEY_UUID, sizeof(KEY_UUID) - 1);
		v = ix_val(ix->uuid, sizeof(ix->uuid));
		if ((rc = ix_mdb(mdb_put(txn, ix->meta, &k, &v, 0))) < 0)
			goto out_abort;
		k = ix_val(KEY_GENERATION, sizeof(KEY_GENERATION) - 1);
		v = ix_val(gen, sizeof(gen));
		if ((rc = ix_mdb(mdb_put(txn, ix->meta, &k, &v, 0))) < 0)
			goto out_abort;
		return ix_mdb(mdb_txn_commit(txn));
	}
	if (rc < 0)
		goto out_abort;
	if (v.mv_size != 4) {
		rc = IX_ECORRUPT;
		goto out_abort;
	}
	const uint8_t *p = v.mv_data;
	uint32_t ver = p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
	if (ver < IX_FORMAT_VERSION_MIN || ver > IX_FORMAT_VERSION) {
		rc = IX_EVERSION;
		goto out_abort;
	}
	/* Version 1 holds whole records only; a writer may add deltas, which a
	 * strata of version 1 would take for damage (and fsck --repair would
	 * move away): mark the index version 2 before anything is written. */
	if (ver < IX_FORMAT_VERSION && !create && !ix->rdonly) {
		rc = MDB_NOTFOUND; /* the caller opens again writing (below) */
		goto out_abort;
	}
	if (ver < IX_FORMAT_VERSION && create) {
		uint8_t nv[4] = { IX_FORMAT_VERSION, 0, 0, 0 };
		v = ix_val(nv, sizeof(nv));
		if ((rc = ix_mdb(mdb_put(txn, ix->meta, &k, &v, 0))) < 0)
			goto out_abort;
	}
	k = ix_val(KEY_UUID, sizeof(KEY_UUID) - 1);
	if ((rc = ix_mdb(mdb_get(txn, ix->meta, &k, &v))) < 0)
		goto out_abort;
	if (v.mv_size != sizeof(ix->uuid)) {
		rc = IX_ECORRUPT;
		goto out_abort;
	}
	memcpy(ix->uuid, v.mv_data, sizeof(ix->uuid));
	/* Committing (even a read txn) keeps the dbi handles for the env. */
	return ix_mdb(mdb_txn_commit(txn));
out_abort:
	mdb_txn_abort(txn);
	return rc;
}

/* LMDB creates data.mdb and lock.mdb with its mode less the umask: give
 * the ones this open created (made[]) the store's modes exactly. Readers
 * of a shared store write the lock file (their reader slots), never the
 * data. */
static int env_modes(struct ix *ix, const bool made[2])
{
	static const char *const file[2] = { "index/data.mdb", "index/lock.mdb" };
	const enum st_perm kind[2] = { ST_PERM_RW, ST_PERM_LOCK };

	for (int i = 0; i < 2; i++) {
		int fd, rc;
		if (!made[i])
			continue;
		if ((fd = st_sys_openat(st_store_dirfd(ix->s), file[i], O_RDONLY | O_NOFOLLOW, 0)) < 0)
			return fd;
		rc = st_store_fchmod(ix->s, fd, kind[i]);
		st_sys_close(fd);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int env_open(struct ix *ix, const char *path, uint64_t map, unsigned flags)
{
	struct stat sb;
	bool made[2] = {
		!(flags & MDB_RDONLY) && st_sys_fstatat(st_store_dirfd(ix->s), "index/data.mdb", &sb, 0) == -ENOENT,
		!(flags & MDB_RDONLY) && st_sys_fstatat(st_store_dirfd(ix->s), "index/lock.mdb", &sb, 0) == -ENOENT,
	};
	int rc;

	if ((rc = ix_mdb(mdb_env_create(&ix->env))) < 0)
		return rc;
	if ((rc = ix_mdb(mdb_env_set_maxdbs(ix->env, IX_MAX_DBS))) < 0 ||
	    (rc = ix_mdb(mdb_env_set_maxreaders(ix->env, IX_MAX_READERS))) < 0 ||
	    (rc = ix_mdb(mdb_env_set_mapsize(ix->env, map))) < 0 ||
	    (rc = ix_mdb(mdb_env_open(ix->env, path, flags, st_store_perm(ix->s, ST_PERM_RW)))) < 0 ||
	    (rc = env_modes(ix, made)) < 0) {
		mdb_env_close(ix->env);
		ix->env = NULL;
		return rc;
	}
	return 0;
}

int ix_open(struct st_store *s, const struct ix_opts *opts, struct ix **out)
{
	unsigned oflags = opts ? opts->flags : 0;
	uint64_t map = opts && opts->map_initial ? opts->map_initial : IX_MAP_DEFAULT;
	unsigned envf = MDB_NOTLS;
	char path[4096];
	struct ix *ix;
	int rc, dead;

	if (snprintf(path, sizeof(path), "%s/index", st_store_path(s)) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	ix = st_sys_calloc(1, sizeof(*ix));
	if (!ix)
		return -ENOMEM;
	ix->s = s;
	if ((rc = pthread_rwlock_init(&ix->resize, NULL)) != 0) {
		free(ix);
		return -rc;
	}
	if ((rc = pthread_mutex_init(&ix->cache_lock, NULL)) != 0) {
		pthread_rwlock_destroy(&ix->resize);
		free(ix);
		return -rc;
	}
	ix->rdonly = (oflags & IX_OPEN_RDONLY) || st_store_rdonly(s);
	if ((oflags & IX_OPEN_NOSYNC) || st_store_sync(s) == ST_SYNC_NONE)
		envf |= MDB_NOSYNC;

	if (!ix->rdonly && (rc = st_store_mkdirat(s, st_store_dirfd(s), "index", ST_PERM_DIR)) < 0 && rc != -EEXIST) {
		if (rc == -EROFS || rc == -EACCES || rc == -EPERM)
			ix->rdonly = true;
		else
			goto out_free;
	}
	rc = -EROFS;
	if (!ix->rdonly)
		rc = env_open(ix, path, map, envf);
	if (rc == -EROFS || rc == -EACCES || rc == -EPERM) {
		/* A read-only filesystem or store: read, never write. */
		ix->rdonly = true;
		rc = env_open(ix, path, map, envf | MDB_RDONLY);
		/* LMDB writes its lock file even to read; a store another
		 * user made readable (not writable) for us has one we may not
		 * write: read without it. Such a reader holds no reader slot,
		 * so a commit by the owner at the same moment may reuse the
		 * pages it reads: it then reads garbage that the checks refuse
		 * (IX_ECORRUPT), never a wrong snapshot (records are named by
		 * their hash), and running it again reads the new state. */
		if (rc == -EACCES || rc == -EPERM)
			rc = env_open(ix, path, map, envf | MDB_RDONLY | MDB_NOLOCK);
	}
	if (rc < 0)
		goto out_free;
	/* Reader slots left by processes that died (kill -9) pin old pages. */
	mdb_reader_check(ix->env, &dead);

	/* A new index, or one of an older format to mark (open_dbs): again, writing. */
	rc = open_dbs(ix, false);
	if (rc == MDB_NOTFOUND && !ix->rdonly)
		rc = open_dbs(ix, true);
	else if (rc == MDB_NOTFOUND)
		rc = -ENOENT; /* a read-only store whose index was never created */
	if (rc == MDB_MAP_RESIZED) {
		if ((rc = ix_mdb(mdb_env_set_mapsize(ix->env, 0))) == 0)
			rc = open_dbs(ix, false);
	}
	if (rc < 0)
		goto out_close_env;
	*out = ix;
	return 0;
out_close_env:
	mdb_env_close(ix->env);
out_free:
	pthread_mutex_destroy(&ix->cache_lock);
	pthread_rwlock_destroy(&ix->resize);
	free(ix);
	return ix_err(rc);
}

void ix_close(struct ix *ix)
{
	if (!ix)
		return;
	mdb_env_close(ix->env);
	st_manifest_free(ix->cache_m);
	pthread_mutex_destroy(&ix->cache_lock);
	pthread_rwlock_destroy(&ix->resize);
	free(ix);
}
