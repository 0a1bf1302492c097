/* stage.c: importing a snapshot that file tools copy into snapshots/NAME/ (mkdir, write, rename, flush). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs_int.h"

/* How long a committed import keeps answering for its directory, so the
 * copy tool's last chmod/utimes calls land on it (idle seconds). */
#define STAGE_LINGER_NS (2ll * 1000000000ll)
#define ZERO_CHUNK 65536

enum sf_state { SF_WRITING, SF_CLOSED, SF_DONE, SF_FAILED }; /* CLOSED: a temp-named layer, all bytes in, awaiting its rename */
enum stg_state { STG_OPEN, STG_COMMITTED, STG_DEAD };

struct fs_sfile {
	uint64_t serial;
	char *name;
	bool in_layers;
	bool gone;                 /* unlinked or replaced by a rename */
	enum sf_state state;
	int err;                   /* SF_FAILED: what the flush returned */
	struct st_blob_writer *w;  /* layer bytes streaming into the store */
	struct st_hasher *h;       /* layer already stored: only hash to check it */
	st_id expect;              /* the name's id, when the name is an id */
	bool has_expect;
	uint64_t size;
	st_id id;                  /* SF_DONE layer: what its bytes hash to */
	char *buf;                 /* files outside layers/: the bytes (manifest.json is small) */
	size_t cap;
	int64_t mtime_ns;
	struct fs_sfile *next;
};

struct fs_stage {
	pthread_mutex_t lock;
	unsigned refs;             /* under fs->stage_lock */
	uint64_t serial;
	char *name;
	enum stg_state state;
	bool layers_dir;
	struct fs_sfile *files;
	struct st_manifest *m;     /* from a complete, valid manifest.json */
	st_id snap_id;
	int64_t created_ns, last_ns;
	struct fs_stage *next;     /* fs->stages, while not dead */
};

int fs_errno(int rc)
{
	if (rc >= 0 || rc > -1000)
		return rc;
	switch (rc) {
	case ST_ECORRUPT: return -EBADMSG;
	case ST_EREADONLY: return -EROFS;
	case ST_EFORMAT: case ST_EVERSION: case ST_ELAYOUT: case ST_EBADNAME: case ST_EBADID: return -EINVAL;
	case IX_ENOTFOUND: return -ENOENT;
	case IX_EEXIST: return -EEXIST;
	case IX_EBUSY: return -EBUSY;
	default: return -EIO;
	}
}

uint64_t fs_stage_serial(const struct fs_stage *s) { return s->serial; }
uint64_t fs_sfile_serial(const struct fs_sfile *f) { return f->serial; }

bool fs_stage_has_layers(const struct fs_stage *s)
{
	return s->layers_dir;
}

bool fs_stage_alive(const struct fs_stage *s)
{
	return s->state != STG_DEAD;
}

struct fs_stage *fs_stage_ref(struct fs_stage *s)
{
	/* callers hold a reference already or fs->stage_lock; refs is only
	 * touched with atomics so both are fine */
	__atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
	return s;
}

static void sfile_reset(struct fs_sfile *f)
{
	st_blob_writer_abort(f->w);
	f->w = NULL;
	st_hasher_free(f->h);
	f->h = NULL;
	free(f->buf);
	f->buf = NULL;
	f->cap = 0;
	f->size = 0;
}

static void stage_free(struct fs_stage *s)
{
	struct fs_sfile *f, *next;

	for (f = s->files; f; f = next) {
		next = f->next;
		sfile_reset(f);
		free(f->name);
		free(f);
	}
	st_manifest_free(s->m);
	free(s->name);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

void fs_stage_unref(struct fs *fs, struct fs_stage *s)
{
	if (s && __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) == 0)
		stage_free(s);
}

static void touch(struct fs_stage *s)
{
	s->last_ns = fs_now_ns();
}

/* Is a tag or a live import already using name? */
static bool name_taken(struct fs *fs, const char *name)
{
	struct fs_tags *t = fs_tags_get(fs);
	bool taken = fs_tags_find(t, name) != NULL;

	fs_tags_put(fs, t);
	for (struct fs_stage *s = fs->stages; s && !taken; s = s->next)
		taken = strcmp(s->name, name) == 0;
	return taken;
}

int fs_stage_mkdir(struct fs *fs, const char *name, struct fs_stage **out)
{
	int rc = fs_name_check(name);

	if (rc < 0)
		return rc;
	if (!st_name_valid(name)) {
		fs_log(fs, FS_LOG_WARNING, "mkdir snapshots/%s: refused: not a valid tag name "
		       "([A-Za-z0-9_][A-Za-z0-9._-]{0,127})", name);
		return -EINVAL;
	}
	struct fs_stage *s = calloc(1, sizeof(*s));
	if (!s || !(s->name = strdup(name))) {
		free(s);
		return -ENOMEM;
	}
	pthread_mutex_init(&s->lock, NULL);
	s->refs = 2; /* the list's and the caller's */
	s->created_ns = s->last_ns = fs_now_ns();
	pthread_mutex_lock(&fs->stage_lock);
	if (name_taken(fs, name)) {
		pthread_mutex_unlock(&fs->stage_lock);
		stage_free(s);
		return -EEXIST;
	}
	s->serial = __atomic_add_fetch(&fs->next_serial, 1, __ATOMIC_RELAXED);
	s->next = fs->stages;
	fs->stages = s;
	pthread_mutex_unlock(&fs->stage_lock);
	fs_log(fs, FS_LOG_INFO, "import %s: started", name);
	*out = s;
	return 0;
}

struct fs_stage *fs_stage_find(struct fs *fs, const char *name)
{
	struct fs_stage *s;

	pthread_mutex_lock(&fs->stage_lock);
	for (s = fs->stages; s; s = s->next)
		if (strcmp(s->name, name) == 0)
			break;
	if (s)
		fs_stage_ref(s);
	pthread_mutex_unlock(&fs->stage_lock);
	return s;
}

/* Take s off the list (once); the list's reference is dropped. */
static void stage_detach(struct fs *fs, struct fs_stage *s)
{
	bool found = false;

	pthread_mutex_lock(&fs->stage_lock);
	for (struct fs_stage **p = &fs->stages; *p; p = &(*p)->next) {
		if (*p == s) {
			*p = s->next;
			found = true;
			break;
		}
	}
	pthread_mutex_unlock(&fs->stage_lock);
	/* Staged entries have a zero entry timeout, so the kernel asks again
	 * and finds the committed snapshot (or nothing): no invalidation. */
	if (found)
		fs_stage_unref(fs, s);
}

int fs_stage_mkdir_layers(struct fs *fs, struct fs_stage *s)
{
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	if (s->state == STG_DEAD)
		rc = -ENOENT;
	else if (s->layers_dir)
		rc = -EEXIST;
	else
		s->layers_dir = true;
	touch(s);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

static struct fs_sfile *find_locked(struct fs_stage *s, bool in_layers, const char *name)
{
	for (struct fs_sfile *f = s->files; f; f = f->next)
		if (!f->gone && f->in_layers == in_layers && strcmp(f->name, name) == 0)
			return f;
	return NULL;
}

struct fs_sfile *fs_stage_file_find(struct fs_stage *s, bool in_layers, const char *name)
{
	pthread_mutex_lock(&s->lock);
	struct fs_sfile *f = find_locked(s, in_layers, name);
	pthread_mutex_unlock(&s->lock);
	return f;
}

struct fs_sfile *fs_stage_file_by_serial(struct fs_stage *s, uint64_t serial)
{
	pthread_mutex_lock(&s->lock);
	struct fs_sfile *f = s->files;
	while (f && f->serial != serial)
		f = f->next;
	pthread_mutex_unlock(&s->lock);
	return f;
}

static int manifest_layer(const struct st_manifest *m, const st_id *id)
{
	for (uint32_t i = 0; i < m->nlayers; i++)
		if (st_id_equal(&m->layers[i].id, id))
			return (int)i;
	return -1;
}

/* Start (or restart) receiving bytes into f. */
static int sfile_begin(struct fs *fs, struct fs_stage *s, struct fs_sfile *f)
{
	sfile_reset(f);
	f->state = SF_WRITING;
	f->err = 0;
	f->mtime_ns = fs_now_ns();
	if (!f->in_layers)
		return 0;
	f->has_expect = st_id_parse(f->name, &f->expect) == 0;
	/* A layer the store already has is only hashed, never stored twice. */
	if (f->has_expect && st_blob_has(fs->store, &f->expect))
		return st_hasher_new(&f->h);
	return fs_errno(st_blob_writer_new(fs->store, &f->w));
}

int fs_stage_create(struct fs *fs, struct fs_stage *s, bool in_layers, const char *name, bool excl,
		    struct fs_sfile **out)
{
	enum fs_stage_slot slot = fs_stage_slot(in_layers, name);
	int rc = fs_name_check(name);

	if (rc < 0)
		return rc;
	if (slot == FS_SLOT_BAD) {
		fs_log(fs, FS_LOG_WARNING, "import %s: refused file %s%s: a snapshot directory holds "
		       "only manifest.json and layers/<32-hex id>", s->name, in_layers ? "layers/" : "", name);
		return -EINVAL;
	}
	pthread_mutex_lock(&s->lock);
	touch(s);
	if (s->state == STG_DEAD || (in_layers && !s->layers_dir)) {
		rc = -ENOENT;
		goto out_unlock;
	}
	if (slot == FS_SLOT_LAYER && s->m) {
		st_id id;
		st_id_parse(name, &id);
		if (manifest_layer(s->m, &id) < 0) {
			fs_log(fs, FS_LOG_WARNING, "import %s: refused layers/%s: the manifest does not name it",
			       s->name, name);
			rc = -EINVAL;
			goto out_unlock;
		}
	}
	struct fs_sfile *f = find_locked(s, in_layers, name);
	if (f && excl) {
		rc = -EEXIST;
		goto out_unlock;
	}
	if (!f) {
		f = calloc(1, sizeof(*f));
		if (!f || !(f->name = strdup(name))) {
			free(f);
			rc = -ENOMEM;
			goto out_unlock;
		}
		f->in_layers = in_layers;
		/* atomic, not fs->stage_lock: that lock is taken before s->lock */
		f->serial = __atomic_add_fetch(&fs->next_serial, 1, __ATOMIC_RELAXED);
		f->next = s->files;
		s->files = f;
	}
	rc = sfile_begin(fs, s, f);
	if (rc < 0) {
		f->state = SF_FAILED;
		f->err = rc;
		fs_log(fs, FS_LOG_ERR, "import %s: cannot stage %s: %s", s->name, name, fs_strerror(rc));
		goto out_unlock;
	}
	*out = f;
out_unlock:
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int fs_stage_open_write(struct fs *fs, struct fs_stage *s, struct fs_sfile *f, bool trunc)
{
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	touch(s);
	if (f->gone || s->state == STG_DEAD)
		rc = -ENOENT;
	else if (trunc || f->state != SF_WRITING)
		rc = sfile_begin(fs, s, f);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

static int layer_append(struct fs_sfile *f, const void *buf, size_t len)
{
	int rc = 0;

	if (f->h)
		st_hasher_update(f->h, buf, len);
	else
		rc = st_blob_writer_write(f->w, buf, len);
	if (rc >= 0)
		f->size += len;
	return fs_errno(rc);
}

/* Bytes between the end so far and a write further on are a hole: zeros. */
static int layer_fill(struct fs_sfile *f, uint64_t to)
{
	static const char zero[ZERO_CHUNK];
	int rc = 0;

	while (f->size < to && rc >= 0) {
		uint64_t n = to - f->size;
		rc = layer_append(f, zero, n > ZERO_CHUNK ? ZERO_CHUNK : (size_t)n);
	}
	return rc;
}

static int buf_write(struct fs_sfile *f, uint64_t off, const void *buf, size_t len)
{
	if (off + len > FS_MANIFEST_MAX)
		return -EFBIG;
	if (off + len > f->cap) {
		size_t cap = f->cap ? f->cap : 4096;
		while (cap < off + len)
			cap *= 2;
		char *nb = realloc(f->buf, cap);
		if (!nb)
			return -ENOMEM;
		memset(nb + f->cap, 0, cap - f->cap);
		f->buf = nb;
		f->cap = cap;
	}
	memcpy(f->buf + off, buf, len);
	if (off + len > f->size)
		f->size = off + len;
	return 0;
}

int fs_stage_write(struct fs *fs, struct fs_stage *s, struct fs_sfile *f, uint64_t off, const void *buf, size_t len)
{
	int rc;

	pthread_mutex_lock(&s->lock);
	touch(s);
	f->mtime_ns = s->last_ns;
	if (f->state != SF_WRITING) {
		fs_log(fs, FS_LOG_WARNING, "import %s: write to %s after it was closed: refused "
		       "(reopen with O_TRUNC to rewrite it)", s->name, f->name);
		rc = -EINVAL;
	} else if (!f->in_layers) {
		rc = buf_write(f, off, buf, len);
		if (rc == -EFBIG)
			fs_log(fs, FS_LOG_WARNING, "import %s: %s larger than %u bytes: refused",
			       s->name, f->name, FS_MANIFEST_MAX);
	} else if (off < f->size) {
		fs_log(fs, FS_LOG_WARNING, "import %s: layers/%s: write at %llu after %llu bytes: layers "
		       "are hashed as they arrive and must be written in order", s->name, f->name,
		       (unsigned long long)off, (unsigned long long)f->size);
		rc = -EINVAL;
	} else {
		rc = layer_fill(f, off);
		if (rc >= 0)
			rc = layer_append(f, buf, len);
		if (rc < 0) {
			fs_log(fs, FS_LOG_ERR, "import %s: layers/%s: cannot store: %s", s->name, f->name,
			       fs_strerror(rc));
			sfile_reset(f);
			f->state = SF_FAILED;
			f->err = rc;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return rc < 0 ? rc : (int)len;
}

int fs_stage_truncate(struct fs *fs, struct fs_stage *s, struct fs_sfile *f, uint64_t size)
{
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	touch(s);
	if (size == f->size && f->state != SF_FAILED) {
		rc = 0;
	} else if (size == 0) {
		rc = sfile_begin(fs, s, f);
	} else if (f->state == SF_WRITING && size > f->size) {
		rc = f->in_layers ? layer_fill(f, size) : buf_write(f, size - 1, "", 1);
	} else {
		fs_log(fs, FS_LOG_WARNING, "import %s: %s: truncate to %llu refused (only growing a file "
		       "being written, or emptying it)", s->name, f->name, (unsigned long long)size);
		rc = -EINVAL;
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* Finish a layer's bytes: compare the hash with the name when the name is an id. */
static int finish_layer(struct fs *fs, struct fs_stage *s, struct fs_sfile *f)
{
	int rc = 0;
	char got[ST_ID_HEX_LEN + 1];

	if (f->size % ST_PAGE_SIZE) {
		fs_log(fs, FS_LOG_WARNING, "import %s: layers/%s: %llu bytes is not a whole number of "
		       "4096-byte pages: refused", s->name, f->name, (unsigned long long)f->size);
		sfile_reset(f);
		return -EINVAL;
	}
	if (f->h) {
		st_hasher_final(f->h, &f->id);
		st_hasher_free(f->h);
		f->h = NULL;
		if (!st_id_equal(&f->id, &f->expect))
			rc = ST_ECORRUPT;
	} else {
		rc = st_blob_writer_commit(f->w, f->has_expect ? &f->expect : NULL, &f->id, NULL);
		f->w = NULL;
	}
	if (rc == ST_ECORRUPT) {
		fs_log(fs, FS_LOG_WARNING, "import %s: layers/%s: bytes do not hash to the name "
		       "(corrupt or truncated copy): refused", s->name, f->name);
		return -EBADMSG;
	}
	if (rc < 0) {
		fs_log(fs, FS_LOG_ERR, "import %s: layers/%s: cannot store: %s", s->name, f->name,
		       fs_strerror(rc));
		return fs_errno(rc);
	}
	if (!f->has_expect)
		return 0; /* a temp name: checked at rename */
	if (s->m) {
		int li = manifest_layer(s->m, &f->id);
		if (li < 0) {
			fs_log(fs, FS_LOG_WARNING, "import %s: layers/%s: the manifest does not name it",
			       s->name, f->name);
			return -EINVAL;
		}
		if (s->m->layers[li].pages * ST_PAGE_SIZE != f->size) {
			fs_log(fs, FS_LOG_WARNING, "import %s: layers/%s: %llu bytes, the manifest says %llu pages",
			       s->name, f->name, (unsigned long long)f->size,
			       (unsigned long long)s->m->layers[li].pages);
			return -EINVAL;
		}
	}
	(void)got;
	return 0;
}

/* Parse a complete manifest.json; on success the stage knows its layers. */
static int finish_manifest(struct fs *fs, struct fs_stage *s, struct fs_sfile *f)
{
	char why[ST_WHY_LEN] = "";
	struct st_manifest *m;
	int rc = st_manifest_parse(f->buf ? f->buf : "", f->size, &m, why, sizeof(why));

	if (rc < 0) {
		fs_log(fs, FS_LOG_WARNING, "import %s: manifest.json refused: %s%s%s", s->name,
		       st_strerror(rc), why[0] ? ": " : "", why);
		return -EINVAL;
	}
	/* Layers already staged must be ones it names, of the right size. */
	for (struct fs_sfile *l = s->files; l; l = l->next) {
		if (l->gone || !l->in_layers || l->state != SF_DONE || !l->has_expect)
			continue;
		int li = manifest_layer(m, &l->id);
		if (li < 0 || m->layers[li].pages * ST_PAGE_SIZE != l->size) {
			fs_log(fs, FS_LOG_WARNING, "import %s: manifest.json refused: layers/%s %s", s->name,
			       l->name, li < 0 ? "is not named by it" : "has another size than it says");
			st_manifest_free(m);
			return -EINVAL;
		}
	}
	st_manifest_free(s->m);
	s->m = m;
	return 0;
}

static bool layer_present(struct fs *fs, struct fs_stage *s, const struct st_layer_ref *ref)
{
	char hex[ST_ID_HEX_LEN + 1];

	/* Every layer must arrive and verify, even one the store already
	 * holds (then it is only hashed): a corrupt copy is never accepted. */
	st_id_format(&ref->id, hex);
	struct fs_sfile *f = find_locked(s, true, hex);
	return f && f->state == SF_DONE && st_id_equal(&f->id, &ref->id) && f->size == ref->pages * ST_PAGE_SIZE;
}

/* Commit when the manifest and every layer it names are present. */
static int try_commit(struct fs *fs, struct fs_stage *s)
{
	struct fs_tags *old = NULL;
	char hex[ST_ID_HEX_LEN + 1];
	int rc;

	if (s->state != STG_OPEN || !s->m)
		return 0;
	for (uint32_t i = 0; i < s->m->nlayers; i++)
		if (!layer_present(fs, s, &s->m->layers[i]))
			return 0;
	rc = ix_snap_commit(fs->ix, s->m, s->name, 0, &s->snap_id);
	if (rc < 0) {
		fs_log(fs, FS_LOG_ERR, "import %s: commit refused: %s", s->name, ix_strerror(rc));
		return fs_errno(rc);
	}
	s->state = STG_COMMITTED;
	st_id_format(&s->snap_id, hex);
	fs_log(fs, FS_LOG_INFO, "import %s: committed snapshot %s (%u layers)", s->name, hex, s->m->nlayers);
	if (fs_view_refresh(fs, true, &old) >= 0)
		fs_tags_put(fs, old);
	return 0;
}

int fs_stage_flush(struct fs *fs, struct fs_stage *s, struct fs_sfile *f)
{
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	touch(s);
	if (f->state == SF_FAILED) {
		rc = f->err;
		goto out_unlock;
	}
	if (f->state == SF_DONE || f->state == SF_CLOSED || f->gone)
		goto out_unlock;
	if (f->in_layers && !f->has_expect) {
		/* A temp name (rsync): the bytes are hashed; they are published
		 * when the rename gives them their name, never before, so an
		 * interrupted copy leaves no blob behind. */
		f->state = SF_CLOSED;
		goto out_unlock;
	}
	if (f->in_layers)
		rc = finish_layer(fs, s, f);
	else if (strcmp(f->name, "manifest.json") == 0)
		rc = finish_manifest(fs, s, f);
	else
		goto out_unlock; /* a temp name outside layers/: parsed when renamed */
	if (rc < 0) {
		sfile_reset(f);
		f->state = SF_FAILED;
		f->err = rc;
		goto out_unlock;
	}
	f->state = SF_DONE;
	rc = try_commit(fs, s);
out_unlock:
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int fs_stage_rename(struct fs *fs, struct fs_stage *s, bool from_layers, const char *from, bool to_layers,
		    const char *to)
{
	enum fs_stage_slot slot = fs_stage_slot(to_layers, to);
	int rc = fs_name_check(to);

	if (rc < 0)
		return rc;
	if (slot == FS_SLOT_BAD || (slot == FS_SLOT_LAYER) != (to_layers && !fs_name_is_temp(to))) {
		fs_log(fs, FS_LOG_WARNING, "import %s: rename to %s%s refused: not a snapshot file name",
		       s->name, to_layers ? "layers/" : "", to);
		return -EINVAL;
	}
	pthread_mutex_lock(&s->lock);
	touch(s);
	struct fs_sfile *f = find_locked(s, from_layers, from);
	if (!f) {
		rc = -ENOENT;
		goto out_unlock;
	}
	if (from_layers != to_layers) {
		fs_log(fs, FS_LOG_WARNING, "import %s: rename of %s across layers/ refused", s->name, from);
		rc = -EINVAL;
		goto out_unlock;
	}
	char *nn = strdup(to);
	if (!nn) {
		rc = -ENOMEM;
		goto out_unlock;
	}
	struct fs_sfile *old = find_locked(s, to_layers, to);
	if (old && old != f) {
		old->gone = true;
		sfile_reset(old);
	}
	free(f->name);
	f->name = nn;
	if (f->state == SF_FAILED)
		goto out_unlock;
	if (slot == FS_SLOT_LAYER) {
		st_id want;
		st_id_parse(to, &want);
		f->has_expect = true;
		f->expect = want;
		if (f->state == SF_CLOSED) {
			rc = finish_layer(fs, s, f);
			if (rc < 0) {
				sfile_reset(f);
				f->state = SF_FAILED;
				f->err = rc;
				f->gone = true;
				goto out_unlock;
			}
			f->state = SF_DONE;
		} else if (f->state == SF_DONE) {
			if (!st_id_equal(&f->id, &want)) {
				fs_log(fs, FS_LOG_WARNING, "import %s: layers/%s: bytes do not hash to the name "
				       "(corrupt, truncated or misnamed): refused", s->name, to);
				f->gone = true;
				rc = -EBADMSG;
				goto out_unlock;
			}
			if (s->m) {
				int li = manifest_layer(s->m, &want);
				if (li < 0 || s->m->layers[li].pages * ST_PAGE_SIZE != f->size) {
					fs_log(fs, FS_LOG_WARNING, "import %s: layers/%s: %s", s->name, to,
					       li < 0 ? "the manifest does not name it" : "wrong size for the manifest");
					f->gone = true;
					rc = -EINVAL;
					goto out_unlock;
				}
			}
		}
	} else if (slot == FS_SLOT_MANIFEST && f->state == SF_WRITING) {
		/* rsync closed the temp file before renaming it: its bytes are final. */
		rc = finish_manifest(fs, s, f);
		if (rc < 0) {
			f->gone = true;
			goto out_unlock;
		}
		f->state = SF_DONE;
	}
	rc = try_commit(fs, s);
out_unlock:
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int fs_stage_unlink(struct fs *fs, struct fs_stage *s, bool in_layers, const char *name)
{
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	touch(s);
	struct fs_sfile *f = find_locked(s, in_layers, name);
	if (!f) {
		rc = -ENOENT;
	} else {
		f->gone = true;
		sfile_reset(f);
		if (!in_layers && strcmp(name, "manifest.json") == 0 && s->state == STG_OPEN) {
			st_manifest_free(s->m);
			s->m = NULL;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int fs_stage_rmdir_layers(struct fs *fs, struct fs_stage *s)
{
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	touch(s);
	if (!s->layers_dir)
		rc = -ENOENT;
	for (struct fs_sfile *f = s->files; f && rc == 0; f = f->next)
		if (!f->gone && f->in_layers)
			rc = -ENOTEMPTY;
	if (rc == 0)
		s->layers_dir = false;
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* Abandon: drop the bytes, never publish. */
static void stage_kill(struct fs *fs, struct fs_stage *s)
{
	pthread_mutex_lock(&s->lock);
	s->state = STG_DEAD;
	for (struct fs_sfile *f = s->files; f; f = f->next)
		sfile_reset(f);
	pthread_mutex_unlock(&s->lock);
	stage_detach(fs, s);
}

int fs_stage_rmdir(struct fs *fs, struct fs_stage *s)
{
	pthread_mutex_lock(&s->lock);
	bool committed = s->state == STG_COMMITTED;
	bool busy = s->layers_dir;
	for (struct fs_sfile *f = s->files; f && !busy; f = f->next)
		busy = !f->gone;
	pthread_mutex_unlock(&s->lock);
	if (busy)
		return -ENOTEMPTY;
	if (committed) {
		/* `rm -r` right after the copy: remove the tag as for any snapshot */
		int rc = ix_tag_del(fs->ix, s->name, IX_TAG_PRUNE, NULL);
		if (rc < 0 && rc != IX_ENOTFOUND)
			return fs_errno(rc);
		struct fs_tags *old;
		if (fs_view_refresh(fs, true, &old) >= 0)
			fs_tags_put(fs, old);
	} else {
		fs_log(fs, FS_LOG_INFO, "import %s: removed before it was complete", s->name);
	}
	stage_kill(fs, s);
	return 0;
}

int fs_stage_rename_dir(struct fs *fs, struct fs_stage *s, const char *to)
{
	int rc = fs_name_check(to);

	if (rc < 0)
		return rc;
	if (!st_name_valid(to))
		return -EINVAL;
	pthread_mutex_lock(&fs->stage_lock);
	if (name_taken(fs, to)) {
		rc = -EEXIST;
	} else if (s->state != STG_OPEN) {
		rc = -EBUSY;
	} else {
		char *nn = strdup(to);
		if (!nn) {
			rc = -ENOMEM;
		} else {
			pthread_mutex_lock(&s->lock);
			free(s->name);
			s->name = nn;
			touch(s);
			pthread_mutex_unlock(&s->lock);
		}
	}
	pthread_mutex_unlock(&fs->stage_lock);
	return rc;
}

void fs_stage_attr(struct fs_stage *s, struct fs_sfile *f, bool layers_dir, struct stat *st)
{
	int64_t t;

	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&s->lock);
	t = f ? f->mtime_ns : s->last_ns;
	st->st_blksize = FS_MAX_REQUEST; /* cp and friends size their buffers by it */
	if (f) {
		/* a finished layer or manifest reads like a committed one */
		st->st_mode = S_IFREG | (f->state == SF_DONE ? 0444 : 0644);
		st->st_nlink = f->gone ? 0 : 1;
		st->st_size = (off_t)f->size;
		st->st_blocks = (blkcnt_t)((f->size + 511) / 512);
	} else {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = layers_dir || !s->layers_dir ? 2 : 3;
		st->st_size = 4096;
	}
	pthread_mutex_unlock(&s->lock);
	st->st_mtim.tv_sec = t / 1000000000ll;
	st->st_mtim.tv_nsec = t % 1000000000ll;
	st->st_atim = st->st_ctim = st->st_mtim;
}

int fs_stage_list(struct fs_stage *s, bool in_layers, struct fs_dirlist **out)
{
	struct fs_dirlist *l = calloc(1, sizeof(*l));
	size_t cap = 0, n = 0;
	int rc = 0;

	if (!l)
		return -ENOMEM;
	pthread_mutex_lock(&s->lock);
	n = (!in_layers && s->layers_dir) ? 1 : 0;
	for (struct fs_sfile *f = s->files; f; f = f->next)
		n += !f->gone && f->in_layers == in_layers;
	cap = n ? n : 1;
	l->v = calloc(cap, sizeof(*l->v));
	if (!l->v) {
		rc = -ENOMEM;
		goto out_unlock;
	}
	if (!in_layers && s->layers_dir) {
		struct fs_dirent *e = &l->v[l->n++];
		e->name = strdup("layers");
		e->key.kind = FS_K_STAGELAYERS;
		memcpy(e->key.id.b, &s->serial, sizeof(s->serial));
		e->st_ino = fs_ino_stable(&e->key);
		e->type = S_IFDIR;
		if (!e->name)
			rc = -ENOMEM;
	}
	for (struct fs_sfile *f = s->files; f && rc >= 0; f = f->next) {
		if (f->gone || f->in_layers != in_layers)
			continue;
		struct fs_dirent *e = &l->v[l->n++];
		e->name = strdup(f->name);
		e->key.kind = FS_K_STAGEFILE;
		memcpy(e->key.id.b, &f->serial, sizeof(f->serial));
		e->st_ino = fs_ino_stable(&e->key);
		e->type = S_IFREG;
		if (!e->name)
			rc = -ENOMEM;
	}
out_unlock:
	pthread_mutex_unlock(&s->lock);
	if (rc < 0) {
		fs_dirlist_free(l);
		return rc;
	}
	*out = l;
	return 0;
}

int fs_sfile_blob(struct fs_stage *s, struct fs_sfile *f, st_id *id, const char **buf, size_t *len)
{
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	if (f->gone)
		rc = -ENOENT;
	else if ((f->in_layers && f->state != SF_DONE) || f->state == SF_FAILED)
		rc = -EBUSY;
	else if (f->in_layers) {
		*id = f->id;
		*buf = NULL;
		*len = f->size;
	} else {
		*buf = f->buf ? f->buf : "";
		*len = f->size;
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* Why an import is incomplete, for the log line when it is dropped. */
static void describe_missing(struct fs *fs, struct fs_stage *s, char *out, size_t len)
{
	char hex[ST_ID_HEX_LEN + 1];

	if (!s->m) {
		snprintf(out, len, "no valid manifest.json");
		return;
	}
	for (uint32_t i = 0; i < s->m->nlayers; i++) {
		if (!layer_present(fs, s, &s->m->layers[i])) {
			st_id_format(&s->m->layers[i].id, hex);
			snprintf(out, len, "layer %s never arrived complete and valid", hex);
			return;
		}
	}
	snprintf(out, len, "incomplete");
}

unsigned fs_stage_sweep(struct fs *fs, bool all)
{
	int64_t now = fs_now_ns();
	int64_t timeout = (int64_t)(fs->cfg->stage_timeout_s ? fs->cfg->stage_timeout_s : 600) * 1000000000ll;
	unsigned dropped = 0;

	for (;;) {
		struct fs_stage *victim = NULL;
		pthread_mutex_lock(&fs->stage_lock);
		for (struct fs_stage *s = fs->stages; s && !victim; s = s->next) {
			pthread_mutex_lock(&s->lock);
			int64_t idle = now - s->last_ns;
			if (all || (s->state == STG_COMMITTED && idle > STAGE_LINGER_NS) ||
			    (s->state == STG_OPEN && idle > timeout))
				victim = fs_stage_ref(s);
			pthread_mutex_unlock(&s->lock);
		}
		pthread_mutex_unlock(&fs->stage_lock);
		if (!victim)
			break;
		pthread_mutex_lock(&victim->lock);
		bool open = victim->state == STG_OPEN;
		char why[200];
		if (open)
			describe_missing(fs, victim, why, sizeof(why));
		pthread_mutex_unlock(&victim->lock);
		if (open) {
			fs_log(fs, FS_LOG_WARNING, "import %s: abandoned (%s); nothing was published",
			       victim->name, why);
			stage_kill(fs, victim);
		} else {
			stage_detach(fs, victim);
		}
		fs_stage_unref(fs, victim);
		dropped++;
	}
	return dropped;
}
