/* stage.c: importing a snapshot that file tools copy into snapshots/NAME/ (mkdir, write, rename, flush). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/array.h"
#include "fs/fs_int.h"
#include "store/mountabi.h"
#include "store/sys.h"

/* How long a committed import keeps answering for its directory, so the
 * copy tool's last chmod/utimes calls land on it (idle seconds); an
 * unfinished import idle this long with nothing open is set aside. */
#define STAGE_LINGER_NS (2ll * 1000000000ll)
#define ZERO_CHUNK 65536
#define WHY_LEN 200
/* What one file entry of an import holds in memory, charged to the stage
 * budget whatever its name (an upper bound: a rename never re-charges). */
#define ENTRY_BYTES (sizeof(struct fs_sfile) + FS_NAME_MAX + 1)
/* What a layer arriving holds in memory beside its entry: the blob
 * writer's gather buffer (store/blob.c, 64 KiB) and a hash state. */
#define LAYER_IO_BYTES ((size_t)(68u << 10))
/* An import itself (its struct and name). */
#define STAGE_BYTES (sizeof(struct fs_stage) + FS_NAME_MAX + 1)

/* WRITING: accepting bytes, not (yet) valid. CLOSED: unused (kept for the
 * order of states). DONE: finished and verified. FAILED: can never become
 * valid (err says why); rewriting it with O_TRUNC starts it again.
 * REMOVED: its name was removed (unlink, a rename onto it) or its import
 * was (rm -r, rm imports/NAME, the timeout, a replacing copy): it holds
 * nothing and takes nothing more; its open descriptors get ESTALE. */
enum sf_state { SF_WRITING, SF_CLOSED, SF_DONE, SF_FAILED, SF_REMOVED };
enum stg_state { STG_OPEN, STG_COMMITTED, STG_DEAD };

/*
 * A file (or extra directory) of an import. serial, in_layers, dir and
 * is_dir are fixed when it is made, before its import's lock is dropped
 * (read without a lock after, by nodes that point at it); every other
 * field is protected by its import's lock (struct fs_stage.lock).
 */
struct fs_sfile {
	uint64_t serial;
	char *name;
	bool in_layers;
	struct fs_sfile *dir;      /* the extra directory holding it, or NULL */
	bool is_dir;               /* an extra directory (ignored, like all it holds) */
	bool extra;                /* not part of the snapshot format: accepted, not kept */
	bool gone;                 /* unlinked or replaced by a rename */
	enum sf_state state;
	int err;                   /* SF_FAILED: what the flush returned */
	unsigned handles;          /* open handles (FUSE open/create until release) */
	struct st_blob_writer *w;  /* layer bytes streaming into the store */
	struct st_hasher *h;       /* layer already stored: only hash to check it */
	st_id expect;              /* the name's id, when the name is an id */
	bool has_expect;
	uint64_t size;
	st_id id;                  /* SF_DONE layer: what its bytes hash to */
	char *buf;                 /* files outside layers/: the bytes (manifest.json is small) */
	size_t cap;
	size_t held_io;            /* budget charged for w or h (LAYER_IO_BYTES, or 0) */
	int64_t mtime_ns;
	char why[WHY_LEN];                 /* not done: what is wrong or missing (imports/NAME) */
	struct fs_sfile *next;
};

/*
 * An import. fs, serial and created_ns are fixed at fs_stage_mkdir; refs
 * is atomic; next is protected by fs->stage_lock; name is written under
 * both fs->stage_lock and lock (read under either); every other field is
 * protected by lock. fs_stage_has_layers and fs_stage_alive read
 * layers_dir and state without it, as hints for a lookup the kernel
 * re-asks (a later change is seen by the next request).
 */
struct fs_stage {
	struct fs *fs;             /* the mount whose stage budget its memory is charged to */
	pthread_mutex_t lock;
	unsigned refs;             /* atomic: counted references (nodes, handles, lookups) */
	uint64_t serial;
	char *name;
	enum stg_state state;
	bool layers_dir;
	unsigned handles;          /* open handles on its files */
	struct fs_sfile *files;
	struct st_manifest *m;     /* from a complete, valid manifest.json */
	size_t m_held;             /* budget charged for m */
	int err;                   /* the index refused the commit (the tag names another
	                            * snapshot): every later close and fsync of its files */
	bool retired;              /* committed and no longer answering: each file's memory
	                            * goes back to the budget at its last release */
	st_id snap_id;
	int64_t created_ns, last_ns;
	struct fs_stage *next;     /* fs->stages, while not dead (fs->stage_lock) */
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
bool fs_sfile_is_dir(const struct fs_sfile *f) { return f->is_dir; }
bool fs_sfile_in_layers(const struct fs_sfile *f) { return f->in_layers; }

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

/*
 * The stage budget (docs/fs.md, "Memory"): every byte imports hold in the
 * daemon's memory (file entries, manifest buffers, parsed manifests, layer
 * writers) is charged to fs->stage_mem before it is allocated and given
 * back when it is freed, so no number of copies, however large their
 * manifests, takes the daemon past fs->stage_mem_max. Atomic: stages have
 * locks of their own and fs->stage_lock comes before them.
 */
static int mem_charge(struct fs *fs, size_t n)
{
	uint64_t cur = __atomic_load_n(&fs->stage_mem, __ATOMIC_RELAXED);

	do {
		if (n > fs->stage_mem_max || cur > fs->stage_mem_max - n)
			return -ENOSPC;
	} while (!__atomic_compare_exchange_n(&fs->stage_mem, &cur, cur + n, true, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	return 0;
}

static void mem_uncharge(struct fs *fs, size_t n)
{
	__atomic_sub_fetch(&fs->stage_mem, n, __ATOMIC_RELAXED);
}

/* The layer's writer or hasher is gone (published or dropped). */
static void sfile_io_done(struct fs *fs, struct fs_sfile *f)
{
	mem_uncharge(fs, f->held_io);
	f->held_io = 0;
}

static void sfile_reset(struct fs *fs, struct fs_sfile *f)
{
	st_blob_writer_abort(f->w);
	f->w = NULL;
	st_hasher_free(f->h);
	f->h = NULL;
	sfile_io_done(fs, f);
	free(f->buf);
	mem_uncharge(fs, f->cap);
	f->buf = NULL;
	f->cap = 0;
	f->size = 0;
}

/* f's name or its import is gone: drop what it holds; from now on its open
 * descriptors get ESTALE (a write would have nowhere to go). */
static void sfile_remove(struct fs *fs, struct fs_sfile *f)
{
	sfile_reset(fs, f);
	f->gone = true;
	f->state = SF_REMOVED;
	f->err = -ESTALE;
}

/* An estimate of what a parsed manifest holds (its arrays and strings). */
static size_t manifest_bytes(const struct st_manifest *m)
{
	size_t n = sizeof(*m) + m->nlayers * sizeof(*m->layers) + (size_t)m->nranges * sizeof(*m->ranges) +
		   m->nlabels * sizeof(*m->labels);

	n += m->guest ? strlen(m->guest) + 1 : 0;
	n += m->vcpu ? strlen(m->vcpu) + 1 : 0;
	for (size_t i = 0; i < m->nlabels; i++)
		n += strlen(m->labels[i].key) + strlen(m->labels[i].value) + 2;
	return n;
}

/* Replace the stage's parsed manifest by m (may be NULL), with its charge. */
static void stage_set_manifest(struct fs_stage *s, struct st_manifest *m, size_t held)
{
	st_manifest_free(s->m);
	mem_uncharge(s->fs, s->m_held);
	s->m = m;
	s->m_held = held;
}

static void stage_free(struct fs_stage *s)
{
	struct fs *fs = s->fs;
	struct fs_sfile *f, *next;

	for (f = s->files; f; f = next) {
		next = f->next;
		sfile_reset(fs, f);
		free(f->name);
		free(f);
		mem_uncharge(fs, ENTRY_BYTES);
	}
	stage_set_manifest(s, NULL, 0);
	mem_uncharge(fs, STAGE_BYTES);
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

/*
 * An unfinished import is set aside when nothing holds a file of it open,
 * nothing touched it for STAGE_LINGER_NS and it holds at least one file: a
 * copy ran and stopped short. It then no longer answers for snapshots/NAME,
 * so `cp -r SRC snapshots/NAME` again makes a new import instead of copying
 * into the old one, and its state stays readable in imports/NAME until it is
 * replaced or dropped. Caller holds s->lock.
 */
static bool stale_locked(const struct fs_stage *s, int64_t now)
{
	if (s->state == STG_OPEN && s->err)
		return true; /* its commit was refused: it can never take the name */
	if (s->state != STG_OPEN || s->handles || now - s->last_ns <= STAGE_LINGER_NS)
		return false;
	for (const struct fs_sfile *f = s->files; f; f = f->next)
		if (!f->gone)
			return true;
	return false;
}

static bool stage_stale(struct fs_stage *s, int64_t now)
{
	pthread_mutex_lock(&s->lock);
	bool stale = stale_locked(s, now);
	pthread_mutex_unlock(&s->lock);
	return stale;
}

static void stage_kill(struct fs *fs, struct fs_stage *s);
static bool commit_current(struct fs *fs, struct fs_stage *s);
static void describe_missing(struct fs *fs, struct fs_stage *s, char *out, size_t len);

/* Is a tag or a live import already using name? A stale import of that
 * name is returned (referenced) in *stale for the caller to replace. */
static bool name_taken(struct fs *fs, const char *name, struct fs_stage **stale)
{
	struct fs_tags *t = fs_tags_get(fs);
	bool taken = fs_tags_find(t, name) != NULL;
	int64_t now = fs_now_ns();

	fs_tags_put(fs, t);
	for (struct fs_stage *s = fs->stages; s && !taken; s = s->next) {
		if (strcmp(s->name, name) != 0 || !commit_current(fs, s))
			continue;
		if (stale && stage_stale(s, now))
			*stale = fs_stage_ref(s);
		else
			taken = true;
	}
	return taken;
}

int fs_stage_mkdir(struct fs *fs, const char *name, struct fs_stage **out)
{
	struct fs_stage *stale = NULL;
	int rc = fs_name_check(name);

	if (rc < 0)
		return rc;
	if (!st_name_valid(name)) {
		fs_log(fs, FS_LOG_WARNING, "mkdir snapshots/%s: refused: not a valid tag name "
		       "([A-Za-z0-9_][A-Za-z0-9._-]{0,127})", name);
		return -EINVAL;
	}
	if ((rc = mem_charge(fs, STAGE_BYTES)) < 0) {
		fs_log(fs, FS_LOG_WARNING, "mkdir snapshots/%s: refused: unfinished imports hold the whole "
		       "stage budget (%llu bytes, --stage-memory)", name, (unsigned long long)fs->stage_mem_max);
		return rc;
	}
	struct fs_stage *s = st_sys_calloc(1, sizeof(*s));
	if (!s || !(s->name = st_sys_strdup(name))) {
		free(s);
		mem_uncharge(fs, STAGE_BYTES);
		return -ENOMEM;
	}
	s->fs = fs;
	pthread_mutex_init(&s->lock, NULL);
	s->refs = 2; /* the list's and the caller's */
	s->created_ns = s->last_ns = fs_now_ns();
	pthread_mutex_lock(&fs->stage_lock);
	if (name_taken(fs, name, &stale)) {
		pthread_mutex_unlock(&fs->stage_lock);
		fs_stage_unref(fs, stale);
		stage_free(s);
		return -EEXIST;
	}
	s->serial = __atomic_add_fetch(&fs->next_serial, 1, __ATOMIC_RELAXED);
	s->next = fs->stages;
	fs->stages = s;
	pthread_mutex_unlock(&fs->stage_lock);
	if (stale) {
		char why[2 * WHY_LEN];
		pthread_mutex_lock(&stale->lock);
		describe_missing(fs, stale, why, sizeof(why));
		pthread_mutex_unlock(&stale->lock);
		fs_log(fs, FS_LOG_WARNING, "import %s: the earlier unfinished copy (%s) is dropped; a new "
		       "import takes the name; nothing of the earlier one was published as a snapshot", name, why);
		stage_kill(fs, stale);
		fs_stage_unref(fs, stale);
	}
	fs_log(fs, FS_LOG_INFO, "import %s: started", name);
	*out = s;
	return 0;
}

/* A committed import answers for its name only while the tag still names
 * its snapshot: `strata rm NAME` or `strata tag -f` elsewhere end it. */
static bool commit_current(struct fs *fs, struct fs_stage *s)
{
	struct fs_tags *old = NULL;

	pthread_mutex_lock(&s->lock);
	bool committed = s->state == STG_COMMITTED;
	st_id id = s->snap_id;
	pthread_mutex_unlock(&s->lock);
	if (!committed)
		return true;
	if (fs_view_refresh(fs, false, &old) >= 0)
		fs_tags_put(fs, old);
	struct fs_tags *t = fs_tags_get(fs);
	const struct fs_tag *tag = fs_tags_find(t, s->name);
	bool cur = tag && st_id_equal(&tag->id, &id);
	fs_tags_put(fs, t);
	return cur;
}

static struct fs_stage *find_stage(struct fs *fs, const char *name, bool any)
{
	struct fs_stage *s;
	int64_t now = fs_now_ns();

	pthread_mutex_lock(&fs->stage_lock);
	for (s = fs->stages; s; s = s->next)
		if (strcmp(s->name, name) == 0 && (any || (!stage_stale(s, now) && commit_current(fs, s))))
			break;
	if (s && any && s->state != STG_OPEN)
		s = NULL;
	if (s)
		fs_stage_ref(s);
	pthread_mutex_unlock(&fs->stage_lock);
	return s;
}

struct fs_stage *fs_stage_find(struct fs *fs, const char *name)
{
	return find_stage(fs, name, false);
}

struct fs_stage *fs_stage_find_any(struct fs *fs, const char *name)
{
	return find_stage(fs, name, true);
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

static struct fs_sfile *find_locked(struct fs_stage *s, bool in_layers, struct fs_sfile *dir, const char *name)
{
	for (struct fs_sfile *f = s->files; f; f = f->next)
		if (!f->gone && f->in_layers == in_layers && f->dir == dir && strcmp(f->name, name) == 0)
			return f;
	return NULL;
}

struct fs_sfile *fs_stage_file_find(struct fs_stage *s, bool in_layers, struct fs_sfile *dir, const char *name)
{
	pthread_mutex_lock(&s->lock);
	struct fs_sfile *f = find_locked(s, in_layers, dir, name);
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

/* f can never become valid: drop its bytes; its closes return rc. */
static void fail(struct fs *fs, struct fs_sfile *f, int rc)
{
	sfile_reset(fs, f);
	f->state = SF_FAILED;
	f->err = rc;
}

/* Start (or restart) receiving bytes into f. On failure f is FAILED with
 * the error, never WRITING without a writer (every descriptor open on it
 * would write into nothing). */
static int sfile_begin(struct fs *fs, struct fs_stage *s, struct fs_sfile *f)
{
	int rc;

	sfile_reset(fs, f);
	f->state = SF_WRITING;
	f->err = 0;
	f->why[0] = '\0';
	f->mtime_ns = fs_now_ns();
	if (!f->in_layers || f->extra || f->is_dir)
		return 0;
	f->has_expect = st_id_parse(f->name, &f->expect) == 0;
	if ((rc = mem_charge(fs, LAYER_IO_BYTES)) < 0)
		goto out_fail;
	f->held_io = LAYER_IO_BYTES;
	/* A layer the store already has is only hashed, never stored twice;
	 * touching the blob keeps `strata gc` from taking it (it may be
	 * unreferenced and old) until the import commits. */
	if (f->has_expect && st_blob_touch(fs->store, &f->expect) == 0)
		rc = st_hasher_new(&f->h);
	else
		rc = fs_errno(st_blob_writer_new(fs->store, &f->w));
	if (rc >= 0)
		return rc;
out_fail:
	fail(fs, f, rc);
	return rc;
}

/* A new entry in the stage's list (caller holds s->lock). */
static int sfile_add(struct fs *fs, struct fs_stage *s, bool in_layers, struct fs_sfile *dir, const char *name,
		     struct fs_sfile **out)
{
	int rc = mem_charge(fs, ENTRY_BYTES);

	if (rc < 0)
		return rc;
	struct fs_sfile *f = st_sys_calloc(1, sizeof(*f));
	if (!f || !(f->name = st_sys_strdup(name))) {
		free(f);
		mem_uncharge(fs, ENTRY_BYTES);
		return -ENOMEM;
	}
	f->in_layers = in_layers;
	f->dir = dir;
	f->mtime_ns = fs_now_ns();
	/* atomic, not fs->stage_lock: that lock is taken before s->lock */
	f->serial = __atomic_add_fetch(&fs->next_serial, 1, __ATOMIC_RELAXED);
	f->next = s->files;
	s->files = f;
	*out = f;
	return 0;
}

/* What a name inside an import is: part of the snapshot, or an extra. */
static bool is_extra(bool in_layers, struct fs_sfile *dir, const char *name)
{
	return dir || fs_stage_slot(in_layers, name) == FS_SLOT_BAD;
}

int fs_stage_create(struct fs *fs, struct fs_stage *s, bool in_layers, struct fs_sfile *dir, const char *name,
		    bool excl, struct fs_sfile **out)
{
	enum fs_stage_slot slot = fs_stage_slot(in_layers, name);
	int rc = fs_name_check(name);

	if (rc < 0)
		return rc;
	pthread_mutex_lock(&s->lock);
	touch(s);
	if (s->state == STG_DEAD || (in_layers && !dir && !s->layers_dir)) {
		rc = -ENOENT;
		goto out_unlock;
	}
	if (!dir && slot == FS_SLOT_LAYER && s->m) {
		st_id id;
		st_id_parse(name, &id);
		if (manifest_layer(s->m, &id) < 0) {
			fs_log(fs, FS_LOG_WARNING, "import %s: refused layers/%s: the manifest does not name it",
			       s->name, name);
			rc = -EINVAL;
			goto out_unlock;
		}
	}
	struct fs_sfile *f = find_locked(s, in_layers, dir, name);
	if (f && excl) {
		rc = -EEXIST;
		goto out_unlock;
	}
	if (f && f->is_dir) {
		rc = -EISDIR;
		goto out_unlock;
	}
	if (!f) {
		if ((rc = sfile_add(fs, s, in_layers, dir, name, &f)) < 0) {
			fs_log(fs, FS_LOG_ERR, "import %s: cannot stage %s: %s", s->name, name, fs_strerror(rc));
			goto out_unlock;
		}
		f->extra = is_extra(in_layers, dir, name);
		if (f->extra)
			fs_log(fs, FS_LOG_INFO, "import %s: %s%s%s: not part of a snapshot (manifest.json and "
			       "layers/<32-hex id>): accepted and ignored", s->name, in_layers ? "layers/" : "",
			       dir ? ".../" : "", name);
	}
	rc = sfile_begin(fs, s, f);
	if (rc < 0) {
		fs_log(fs, FS_LOG_ERR, "import %s: cannot stage %s: %s", s->name, name, fs_strerror(rc));
		goto out_unlock;
	}
	*out = f;
out_unlock:
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int fs_stage_mkdir_extra(struct fs *fs, struct fs_stage *s, bool in_layers, struct fs_sfile *dir, const char *name,
			 struct fs_sfile **out)
{
	int rc = fs_name_check(name);
	struct fs_sfile *f;

	if (rc < 0)
		return rc;
	pthread_mutex_lock(&s->lock);
	touch(s);
	if (s->state == STG_DEAD) {
		rc = -ENOENT;
	} else if (find_locked(s, in_layers, dir, name)) {
		rc = -EEXIST;
	} else if ((rc = sfile_add(fs, s, in_layers, dir, name, &f)) >= 0) {
		f->is_dir = f->extra = true;
		f->state = SF_DONE;
		fs_log(fs, FS_LOG_INFO, "import %s: directory %s%s%s: not part of a snapshot: accepted and "
		       "ignored with all it holds", s->name, in_layers ? "layers/" : "", dir ? ".../" : "", name);
		*out = f;
	}
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
	else if (f->is_dir)
		rc = -EISDIR;
	/* Reopened without O_TRUNC, a file being written keeps its bytes (a
	 * `>>` append continues it) and a finished one stays finished; only
	 * a failed one starts again. */
	else if (trunc || f->state == SF_FAILED || f->state == SF_CLOSED)
		rc = sfile_begin(fs, s, f);
	if (rc >= 0) {
		f->handles++;
		s->handles++;
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int fs_stage_open_read(struct fs_stage *s, struct fs_sfile *f)
{
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	touch(s);
	if (f->gone || s->state == STG_DEAD) {
		rc = -ENOENT;
	} else {
		f->handles++;
		s->handles++;
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* A descriptor of a removed file used: it has nowhere to put anything. */
static int removed(struct fs *fs, struct fs_stage *s, struct fs_sfile *f, const char *what)
{
	fs_log(fs, FS_LOG_WARNING, "import %s: %s %s%s after it was removed%s: ESTALE", s->name, what,
	       f->in_layers ? "layers/" : "", f->name, s->state == STG_DEAD ? " with its import" : "");
	return -ESTALE;
}

/* A write past the stage budget: the file's bytes so far go (as on a full
 * disk), its close says ENOSPC too, and rewriting it starts it again. */
static void over_budget(struct fs *fs, struct fs_stage *s, struct fs_sfile *f)
{
	fs_log(fs, FS_LOG_WARNING, "import %s: %s: refused (ENOSPC): unfinished imports hold the whole "
	       "stage budget (%llu bytes, --stage-memory); finish or remove one (imports/)", s->name, f->name,
	       (unsigned long long)fs->stage_mem_max);
	fail(fs, f, -ENOSPC);
	snprintf(f->why, sizeof(f->why), "refused: the stage budget was full (%llu bytes)",
		 (unsigned long long)fs->stage_mem_max);
}

static int layer_append(struct fs_sfile *f, const void *buf, size_t len)
{
	int rc = 0;

	/* Every state that drops the writer leaves WRITING; should one not,
	 * the import fails, never the daemon. */
	if (!f->h && !f->w)
		return -EIO;
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

/* Bytes of a file held in memory (manifest.json, its temp names): each
 * growth doubles the buffer (at most FS_MANIFEST_MAX), charged to the stage
 * budget first: -EFBIG past one manifest's limit, -ENOSPC past the budget. */
static int buf_write(struct fs *fs, struct fs_sfile *f, uint64_t off, const void *buf, size_t len)
{
	if (off + len > FS_MANIFEST_MAX)
		return -EFBIG;
	if (off + len > f->cap) {
		size_t old = f->cap, cap = old ? old : 4096;
		while (cap < off + len)
			cap *= 2;
		if (cap > FS_MANIFEST_MAX)
			cap = FS_MANIFEST_MAX;
		int rc = mem_charge(fs, cap - old);
		if (rc < 0)
			return rc;
		char *nb = st_sys_realloc(f->buf, cap);
		if (!nb) {
			mem_uncharge(fs, cap - old);
			return -ENOMEM;
		}
		memset(nb + old, 0, cap - old);
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
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	touch(s);
	f->mtime_ns = s->last_ns;
	if (f->state == SF_REMOVED) {
		rc = removed(fs, s, f, "write to");
	} else if (f->extra) {
		if (off + len > f->size) /* an extra's bytes are not kept: only its size */
			f->size = off + len;
	} else if (f->state != SF_WRITING) {
		fs_log(fs, FS_LOG_WARNING, "import %s: write to %s%s after it was %s: refused "
		       "(rewrite it with O_TRUNC to start again)", s->name, f->in_layers ? "layers/" : "",
		       f->name, f->state == SF_DONE ? "complete and verified" : "refused");
		rc = -EINVAL;
	} else if (!f->in_layers) {
		rc = buf_write(fs, f, off, buf, len);
		if (rc == -EFBIG)
			fs_log(fs, FS_LOG_WARNING, "import %s: %s larger than %u bytes: refused",
			       s->name, f->name, FS_MANIFEST_MAX);
		else if (rc == -ENOSPC)
			over_budget(fs, s, f);
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
			fail(fs, f, rc);
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
	f->mtime_ns = s->last_ns; /* a truncate changes mtime and ctime, even to the same size */
	if (f->state == SF_REMOVED) {
		rc = removed(fs, s, f, "truncate of");
	} else if (f->is_dir) {
		rc = -EISDIR;
	} else if (f->extra) {
		f->size = size;
	} else if (size == f->size && f->state != SF_FAILED) {
		rc = 0;
	} else if (size == 0) {
		rc = sfile_begin(fs, s, f);
	} else if (f->state == SF_WRITING && !f->in_layers && size <= FS_MANIFEST_MAX) {
		/* the manifest is held in memory: it can shrink or grow */
		if (size > f->size)
			rc = buf_write(fs, f, size - 1, "", 1);
		else
			f->size = size;
		if (rc == -ENOSPC)
			over_budget(fs, s, f);
	} else if (f->state == SF_WRITING && size > f->size) {
		if ((rc = layer_fill(f, size)) < 0) {
			fs_log(fs, FS_LOG_ERR, "import %s: layers/%s: cannot store: %s", s->name, f->name,
			       fs_strerror(rc));
			fail(fs, f, rc);
		}
	} else {
		fs_log(fs, FS_LOG_WARNING, "import %s: %s: truncate to %llu refused (a layer is hashed as "
		       "it arrives: it can grow or be emptied, not shrink)", s->name, f->name,
		       (unsigned long long)size);
		rc = -EINVAL;
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* The id of a layer's bytes so far. */
static void layer_digest(struct fs_sfile *f, st_id *out)
{
	if (f->h)
		st_hasher_final(f->h, out);
	else if (f->w)
		st_blob_writer_digest(f->w, out);
	else
		st_id_hash("", 0, out);
}

/* Publish a layer whose bytes hash to want (its name). */
static int publish_layer(struct fs *fs, struct fs_stage *s, struct fs_sfile *f, const st_id *want)
{
	int rc = 0;

	if (f->h) {
		st_hasher_final(f->h, &f->id);
		st_hasher_free(f->h);
		f->h = NULL;
		sfile_io_done(fs, f);
		if (!st_id_equal(&f->id, want))
			rc = ST_ECORRUPT;
		else if (st_blob_touch(fs->store, want) == -ENOENT) {
			/* gc removed the store's copy after it was matched: the
			 * bytes were only hashed, so this copy must come again */
			fs_log(fs, FS_LOG_WARNING, "import %s: layers/%s: the store's copy it matched was "
			       "removed (strata gc) while it arrived: copy it again", s->name, f->name);
			return -EAGAIN;
		}
	} else {
		rc = st_blob_writer_commit(f->w, want, &f->id, NULL);
		f->w = NULL;
		sfile_io_done(fs, f);
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
	return 0;
}

/*
 * A layer named by its id at a close: finished when its bytes hash to the
 * name; failed when they never can (the manifest says how long it is and
 * there are that many bytes or more, or the manifest does not name it);
 * else still arriving. 1: finished, 0: still arriving, < 0: failed.
 */
static int settle_layer(struct fs *fs, struct fs_stage *s, struct fs_sfile *f)
{
	st_id got;
	int li = s->m ? manifest_layer(s->m, &f->expect) : -1;
	uint64_t want = li >= 0 ? s->m->layers[li].pages * ST_PAGE_SIZE : 0;

	layer_digest(f, &got);
	if (f->size > 0 && f->size % ST_PAGE_SIZE == 0 && st_id_equal(&got, &f->expect)) {
		int rc = publish_layer(fs, s, f, &f->expect);
		return rc < 0 ? rc : 1;
	}
	if (s->m && li < 0) {
		fs_log(fs, FS_LOG_WARNING, "import %s: layers/%s: the manifest does not name it",
		       s->name, f->name);
		return -EINVAL;
	}
	if (s->m && f->size >= want) {
		fs_log(fs, FS_LOG_WARNING, "import %s: layers/%s: bytes do not hash to the name "
		       "(corrupt or truncated copy): refused", s->name, f->name);
		return -EBADMSG;
	}
	if (s->m)
		snprintf(f->why, sizeof(f->why), "%llu of %llu bytes so far", (unsigned long long)f->size,
			 (unsigned long long)want);
	else
		snprintf(f->why, sizeof(f->why), "%llu bytes so far, not (yet) hashing to its name",
			 (unsigned long long)f->size);
	return 0;
}

/* True when buf holds one complete JSON object (balanced outside strings):
 * a manifest that does not parse then is wrong, not unfinished. */
static bool json_closed(const char *buf, size_t len)
{
	int depth = 0;
	bool in_str = false, esc = false, opened = false;

	for (size_t i = 0; i < len; i++) {
		char c = buf[i];
		if (in_str) {
			if (esc)
				esc = false;
			else if (c == '\\')
				esc = true;
			else if (c == '"')
				in_str = false;
		} else if (c == '"') {
			in_str = true;
		} else if (c == '{' || c == '[') {
			depth++;
			opened = true;
		} else if (c == '}' || c == ']') {
			depth--;
		}
	}
	return opened && depth <= 0 && !in_str;
}

/*
 * Parse manifest.json at a close. 1: valid (the stage knows its layers),
 * 0: not a whole JSON object yet (more may come), < 0: refused. Layers
 * already staged must be ones it names, of the right size.
 */
static int settle_manifest(struct fs *fs, struct fs_stage *s, struct fs_sfile *f, bool final, int *layer_err)
{
	char why[ST_WHY_LEN] = "";
	struct st_manifest *m;

	/* Only a whole JSON object can parse: a cut-off one is not parsed at
	 * every close (a parse of a large one takes memory outside the stage
	 * budget, docs/fs.md "Memory"). */
	if (!final && !json_closed(f->buf ? f->buf : "", f->size)) {
		snprintf(f->why, sizeof(f->why), "%llu bytes so far, not yet a whole JSON object",
			 (unsigned long long)f->size);
		return 0;
	}
	int rc = st_manifest_parse(f->buf ? f->buf : "", f->size, &m, why, sizeof(why));
	if (rc == -ENOMEM) {
		/* Not the manifest's fault: say so, never "refused". */
		fs_log(fs, FS_LOG_ERR, "import %s: manifest.json could not be read: %s", s->name, strerror(-rc));
		snprintf(f->why, sizeof(f->why), "could not be read: %s", strerror(-rc));
		return rc;
	}
	if (rc < 0) {
		fs_log(fs, FS_LOG_WARNING, "import %s: manifest.json refused: %s%s%s", s->name,
		       st_strerror(rc), why[0] ? ": " : "", why);
		snprintf(f->why, sizeof(f->why), "refused: %s%s%s", st_strerror(rc), why[0] ? ": " : "", why);
		return -EINVAL;
	}
	for (struct fs_sfile *l = s->files; l; l = l->next) {
		if (l->gone || !l->in_layers || l->extra || !l->has_expect || l->state == SF_FAILED)
			continue;
		int li = manifest_layer(m, l->state == SF_DONE ? &l->id : &l->expect);
		if (l->state == SF_DONE && (li < 0 || m->layers[li].pages * ST_PAGE_SIZE != l->size)) {
			fs_log(fs, FS_LOG_WARNING, "import %s: manifest.json refused: layers/%s %s", s->name,
			       l->name, li < 0 ? "is not named by it" : "has another size than it says");
			snprintf(f->why, sizeof(f->why), "refused: layers/%s %s", l->name,
				 li < 0 ? "is not named by it" : "has another size than it says");
			st_manifest_free(m);
			return -EINVAL;
		}
	}
	size_t held = manifest_bytes(m);
	if ((rc = mem_charge(fs, held)) < 0) {
		over_budget(fs, s, f);
		st_manifest_free(m);
		return rc;
	}
	stage_set_manifest(s, m, held);
	f->why[0] = '\0';
	/* Layers still being written that can now never become valid fail,
	 * and this close says so: the import cannot complete as it is. */
	for (struct fs_sfile *l = s->files; l; l = l->next) {
		if (l->gone || !l->in_layers || l->extra || !l->has_expect || l->state != SF_WRITING)
			continue;
		int lr = settle_layer(fs, s, l);
		if (lr < 0) {
			fail(fs, l, lr);
			snprintf(l->why, sizeof(l->why), "refused: %s", strerror(-lr));
			*layer_err = lr;
		} else if (lr == 1) {
			l->state = SF_DONE;
		}
	}
	return 1;
}

static bool layer_present(struct fs *fs, struct fs_stage *s, const struct st_layer_ref *ref)
{
	char hex[ST_ID_HEX_LEN + 1];

	/* Every layer must arrive and verify, even one the store already
	 * holds (then it is only hashed): a corrupt copy is never accepted. */
	st_id_format(&ref->id, hex);
	struct fs_sfile *f = find_locked(s, true, NULL, hex);
	return f && f->state == SF_DONE && st_id_equal(&f->id, &ref->id) && f->size == ref->pages * ST_PAGE_SIZE;
}

/* Commit when the manifest and every layer it names are present. */
static int try_commit(struct fs *fs, struct fs_stage *s)
{
	struct fs_tags *old = NULL;
	char hex[ST_ID_HEX_LEN + 1];
	int rc;

	if (s->err)
		return s->err;
	if (s->state != STG_OPEN || !s->m)
		return 0;
	for (uint32_t i = 0; i < s->m->nlayers; i++)
		if (!layer_present(fs, s, &s->m->layers[i]))
			return 0;
	rc = ix_snap_commit(fs->ix, s->m, s->name, 0, &s->snap_id);
	if (rc == IX_EMISSING) {
		/* A layer matched against the store's copy lost it to gc between
		 * its check and this commit: that layer has to come again. */
		for (uint32_t i = 0; i < s->m->nlayers; i++) {
			if (st_blob_has(fs->store, &s->m->layers[i].id))
				continue;
			st_id_format(&s->m->layers[i].id, hex);
			struct fs_sfile *f = find_locked(s, true, NULL, hex);
			if (f) {
				fail(fs, f, -EAGAIN);
				snprintf(f->why, sizeof(f->why), "removed from the store by gc during the import: "
					 "copy it again");
			}
		}
		fs_log(fs, FS_LOG_WARNING, "import %s: a layer was removed by strata gc during the import; "
		       "copy it again (imports/%s says which)", s->name, s->name);
		return -EAGAIN;
	}
	if (rc == IX_EEXIST) {
		/* The CLI (or another mount) tagged another snapshot with this
		 * name while the copy ran. Nothing the copy can still write
		 * changes that: the import is set aside at once (snapshots/NAME
		 * shows the tag's snapshot again), and every later close or
		 * fsync of its files says so too, so the copying tool exits
		 * non-zero whichever of its files it closes last. */
		s->err = -EEXIST;
		fs_log(fs, FS_LOG_ERR, "import %s: commit refused: %s (tagged elsewhere during the copy); "
		       "nothing was published under this name (imports/%s keeps what arrived)", s->name,
		       ix_strerror(rc), s->name);
		if (fs_view_refresh(fs, true, &old) >= 0)
			fs_tags_put(fs, old);
		return s->err;
	}
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

/* Check f at a close (or at the rename that names it when final). */
static int settle(struct fs *fs, struct fs_stage *s, struct fs_sfile *f, bool final)
{
	int rc, layer_err = 0;

	if (f->in_layers)
		rc = settle_layer(fs, s, f);
	else
		rc = settle_manifest(fs, s, f, final, &layer_err);
	if (rc < 0) {
		fail(fs, f, rc);
		if (!f->why[0] || (strncmp(f->why, "refused", 7) != 0 && strncmp(f->why, "could not", 9) != 0))
			snprintf(f->why, sizeof(f->why), "refused: %s", strerror(-rc));
		return rc;
	}
	if (rc == 0)
		return 0;
	f->state = SF_DONE;
	rc = try_commit(fs, s);
	return rc < 0 ? rc : layer_err;
}

int fs_stage_flush(struct fs *fs, struct fs_stage *s, struct fs_sfile *f)
{
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	touch(s);
	if (f->state == SF_FAILED || f->state == SF_REMOVED) {
		rc = f->err;
		goto out_unlock;
	}
	if (s->err) {
		rc = s->err;
		goto out_unlock;
	}
	if (f->state != SF_WRITING || f->gone || f->extra)
		goto out_unlock;
	/* A temp name (rsync) is finished by the rename that gives it its
	 * name, never before, so an interrupted copy publishes nothing. */
	if (f->in_layers ? !f->has_expect : strcmp(f->name, "manifest.json") != 0)
		goto out_unlock;
	rc = settle(fs, s, f, false);
out_unlock:
	pthread_mutex_unlock(&s->lock);
	return rc;
}

void fs_stage_release(struct fs *fs, struct fs_stage *s, struct fs_sfile *f, bool writing)
{
	pthread_mutex_lock(&s->lock);
	touch(s);
	if (f->handles)
		f->handles--;
	if (s->handles)
		s->handles--;
	if (s->retired && !f->handles)
		sfile_remove(fs, f);
	if (writing && !f->handles && !f->gone && !f->extra && f->state == SF_WRITING && f->why[0] &&
	    s->state == STG_OPEN)
		fs_log(fs, FS_LOG_INFO, "import %s: %s%s closed unfinished (%s): waiting for the rest "
		       "(imports/%s says what the import lacks)", s->name, f->in_layers ? "layers/" : "",
		       f->name, f->why, s->name);
	pthread_mutex_unlock(&s->lock);
}

int fs_stage_rename(struct fs *fs, struct fs_stage *s, bool from_layers, struct fs_sfile *from_dir, const char *from,
		    bool to_layers, struct fs_sfile *to_dir, const char *to)
{
	int rc = fs_name_check(to);

	if (rc < 0)
		return rc;
	pthread_mutex_lock(&s->lock);
	touch(s);
	struct fs_sfile *f = find_locked(s, from_layers, from_dir, from);
	if (!f) {
		rc = -ENOENT;
		goto out_unlock;
	}
	if (from_layers != to_layers || from_dir != to_dir) {
		fs_log(fs, FS_LOG_WARNING, "import %s: rename of %s to another directory refused: files move "
		       "only within one directory of an import", s->name, from);
		rc = -EINVAL;
		goto out_unlock;
	}
	struct fs_sfile *old = find_locked(s, to_layers, to_dir, to);
	if (old && old != f && (old->is_dir || f->is_dir)) {
		rc = old->is_dir ? -EISDIR : -ENOTDIR;
		goto out_unlock;
	}
	char *nn = st_sys_strdup(to);
	if (!nn) {
		rc = -ENOMEM;
		goto out_unlock;
	}
	if (old && old != f)
		sfile_remove(fs, old);
	free(f->name);
	f->name = nn;
	bool was_extra = f->extra;
	f->extra = f->is_dir || is_extra(to_layers, to_dir, to);
	if (f->extra || f->state == SF_FAILED || fs_name_is_temp(to))
		goto out_unlock;
	if (was_extra) {
		/* an extra's bytes were not kept: it cannot become a snapshot file */
		fs_log(fs, FS_LOG_WARNING, "import %s: rename to %s%s refused: its bytes arrived under a name "
		       "that is not part of a snapshot and were not kept", s->name, to_layers ? "layers/" : "", to);
		f->gone = true;
		rc = -EINVAL;
		goto out_unlock;
	}
	if (to_layers) {
		st_id want;
		st_id_parse(to, &want);
		f->has_expect = true;
		f->expect = want;
		if (f->state == SF_DONE) {
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
		} else {
			/* A rename gives a temp file its final name: its bytes are final. */
			st_id got;
			layer_digest(f, &got);
			if (f->size % ST_PAGE_SIZE || !st_id_equal(&got, &want)) {
				fs_log(fs, FS_LOG_WARNING, "import %s: layers/%s: bytes do not hash to the name "
				       "(corrupt or truncated copy): refused", s->name, to);
				rc = f->size % ST_PAGE_SIZE ? -EINVAL : -EBADMSG;
			} else {
				rc = publish_layer(fs, s, f, &want);
			}
			if (rc < 0) {
				fail(fs, f, rc);
				f->gone = true;
				goto out_unlock;
			}
			f->state = SF_DONE;
		}
	} else if (f->state == SF_WRITING) {
		/* rsync closed the temp file before renaming it: its bytes are final. */
		rc = settle(fs, s, f, true);
		if (rc < 0) {
			f->gone = true;
			goto out_unlock;
		}
	}
	rc = try_commit(fs, s);
out_unlock:
	pthread_mutex_unlock(&s->lock);
	return rc;
}

static bool dir_has_entries(struct fs_stage *s, struct fs_sfile *dir)
{
	for (struct fs_sfile *f = s->files; f; f = f->next)
		if (!f->gone && f->dir == dir)
			return true;
	return false;
}

int fs_stage_unlink(struct fs *fs, struct fs_stage *s, bool in_layers, struct fs_sfile *dir, const char *name)
{
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	touch(s);
	struct fs_sfile *f = find_locked(s, in_layers, dir, name);
	if (!f) {
		rc = -ENOENT;
	} else if (f->is_dir) {
		rc = -EISDIR;
	} else {
		sfile_remove(fs, f);
		if (!in_layers && !dir && strcmp(name, "manifest.json") == 0 && s->state == STG_OPEN)
			stage_set_manifest(s, NULL, 0);
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int fs_stage_rmdir_extra(struct fs *fs, struct fs_stage *s, bool in_layers, struct fs_sfile *dir, const char *name)
{
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	touch(s);
	struct fs_sfile *f = find_locked(s, in_layers, dir, name);
	if (!f)
		rc = -ENOENT;
	else if (!f->is_dir)
		rc = -ENOTDIR;
	else if (dir_has_entries(s, f))
		rc = -ENOTEMPTY;
	else
		f->gone = true;
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
		if (!f->gone && f->in_layers && !f->dir)
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
		sfile_remove(fs, f);
	pthread_mutex_unlock(&s->lock);
	stage_detach(fs, s);
}

void fs_stage_drop(struct fs *fs, struct fs_stage *s)
{
	pthread_mutex_lock(&s->lock); /* s->name: a rename of the import swaps it under this lock */
	fs_log(fs, FS_LOG_INFO, "import %s: dropped unfinished (rm imports/%s); nothing was published",
	       s->name, s->name);
	pthread_mutex_unlock(&s->lock);
	stage_kill(fs, s);
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
		pthread_mutex_lock(&s->lock);
		fs_log(fs, FS_LOG_INFO, "import %s: removed before it was complete", s->name);
		pthread_mutex_unlock(&s->lock);
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
	if (name_taken(fs, to, NULL)) {
		rc = -EEXIST;
	} else if (s->state != STG_OPEN) {
		rc = -EBUSY;
	} else {
		char *nn = st_sys_strdup(to);
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
	if (f && f->is_dir) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = f->gone ? 0 : 2;
		st->st_size = 4096;
	} else if (f) {
		/* a finished layer or manifest reads like a committed one */
		st->st_mode = S_IFREG | (f->state == SF_DONE && !f->extra ? 0444 : 0644);
		st->st_nlink = f->gone ? 0 : 1;
		st->st_size = (off_t)f->size;
		st->st_blocks = f->extra ? 0 : (blkcnt_t)((f->size + 511) / 512);
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

static int dirent_add(struct fs_dirlist *l, const char *name, enum fs_kind kind, uint64_t serial, mode_t type)
{
	struct fs_key k;

	fs_key_serial(&k, kind, serial);
	return fs_dirlist_add(l, name, &k, type);
}

int fs_stage_list(struct fs_stage *s, bool in_layers, struct fs_sfile *dir, struct fs_dirlist **out)
{
	struct fs_dirlist *l = st_sys_calloc(1, sizeof(*l));
	int rc = 0;

	if (!l)
		return -ENOMEM;
	pthread_mutex_lock(&s->lock);
	bool with_layers = !in_layers && !dir && s->layers_dir;
	if (with_layers)
		rc = dirent_add(l, "layers", FS_K_STAGELAYERS, s->serial, S_IFDIR);
	for (struct fs_sfile *f = s->files; f && rc >= 0; f = f->next) {
		if (f->gone || f->in_layers != in_layers || f->dir != dir)
			continue;
		rc = dirent_add(l, f->name, FS_K_STAGEFILE, f->serial, f->is_dir ? S_IFDIR : S_IFREG);
	}
	pthread_mutex_unlock(&s->lock);
	if (rc < 0) {
		fs_dirlist_free(l);
		return rc;
	}
	*out = l;
	return 0;
}

int fs_stage_list_imports(struct fs *fs, struct fs_dirlist **out)
{
	struct fs_dirlist *l = st_sys_calloc(1, sizeof(*l));
	int rc = 0;

	if (!l)
		return -ENOMEM;
	pthread_mutex_lock(&fs->stage_lock);
	for (struct fs_stage *s = fs->stages; s && rc >= 0; s = s->next)
		if (s->state == STG_OPEN)
			rc = dirent_add(l, s->name, FS_K_IMPORTFILE, s->serial, S_IFREG);
	pthread_mutex_unlock(&fs->stage_lock);
	if (rc < 0) {
		fs_dirlist_free(l);
		return rc;
	}
	*out = l;
	return 0;
}

/* Can a staged file be read at all? (under s->lock) */
static int sfile_readable(const struct fs_sfile *f)
{
	if (f->state == SF_REMOVED)
		return -ESTALE;
	if (f->gone)
		return -ENOENT;
	if (f->is_dir)
		return -EISDIR;
	if (f->extra)
		return -ENODATA;
	return f->state == SF_FAILED ? -EBUSY : 0;
}

int fs_sfile_blob(struct fs_stage *s, struct fs_sfile *f, st_id *id, const char **buf, size_t *len)
{
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	if ((rc = sfile_readable(f)) < 0)
		;
	else if (f->in_layers && f->state != SF_DONE)
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

int fs_sfile_copy(struct fs_stage *s, struct fs_sfile *f, uint64_t off, size_t size, char **out, size_t *len)
{
	int rc = 0;
	char *copy = NULL;
	size_t n = 0;

	pthread_mutex_lock(&s->lock);
	if ((rc = sfile_readable(f)) < 0)
		;
	else if (f->in_layers)
		rc = -EAGAIN;
	else {
		n = off < f->size ? (size_t)(f->size - off) : 0;
		n = n < size ? n : size;
		if (!(copy = st_sys_malloc(n ? n : 1)))
			rc = -ENOMEM;
		else if (n)
			memcpy(copy, f->buf + off, n);
	}
	pthread_mutex_unlock(&s->lock);
	if (rc == 0) {
		*out = copy;
		*len = n;
	}
	return rc;
}

bool fs_stage_committed_id(struct fs_stage *s, st_id *id)
{
	pthread_mutex_lock(&s->lock);
	bool committed = s->state == STG_COMMITTED;
	if (committed)
		*id = s->snap_id;
	pthread_mutex_unlock(&s->lock);
	return committed;
}

int fs_stage_setxattr(struct fs *fs, struct fs_stage *s, const char *name)
{
	/* The names strata exports describe the snapshot the import becomes,
	 * computed from its bytes: a copy carrying them back is accepted and
	 * they are not kept. */
	if (strncmp(name, ST_XATTR_PREFIX, strlen(ST_XATTR_PREFIX)) == 0)
		return 0;
	return -ENOTSUP;
}

/* Why an import is incomplete, in one line (caller holds s->lock). */
static void describe_missing(struct fs *fs, struct fs_stage *s, char *out, size_t len)
{
	char hex[ST_ID_HEX_LEN + 1];

	if (s->err) {
		snprintf(out, len, "its commit was refused: %s", s->err == -EEXIST ? "the tag was set to "
			 "another snapshot elsewhere during the copy" : strerror(-s->err));
		return;
	}
	if (!s->m) {
		struct fs_sfile *mf = find_locked(s, false, NULL, "manifest.json");
		snprintf(out, len, "no valid manifest.json%s%.150s%s", mf && mf->why[0] ? " (" : "",
			 mf && mf->why[0] ? mf->why : "", mf && mf->why[0] ? ")" : "");
		return;
	}
	for (uint32_t i = 0; i < s->m->nlayers; i++) {
		if (!layer_present(fs, s, &s->m->layers[i])) {
			st_id_format(&s->m->layers[i].id, hex);
			struct fs_sfile *lf = find_locked(s, true, NULL, hex);
			if (lf && lf->why[0])
				snprintf(out, len, "layer %s never arrived complete and valid: %.150s", hex, lf->why);
			else
				snprintf(out, len, "layer %s never arrived complete and valid", hex);
			return;
		}
	}
	snprintf(out, len, "incomplete");
}

/* Append to a growing text buffer. */
static int textf(char **buf, size_t *len, size_t *cap, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int textf(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
{
	va_list ap;
	char line[512];

	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	if ((size_t)n >= sizeof(line))
		n = sizeof(line) - 1;
	if (ST_ARRAY_RESERVE(*buf, *cap, *len + (size_t)n + 1) < 0)
		return -ENOMEM;
	memcpy(*buf + *len, line, (size_t)n + 1);
	*len += (size_t)n;
	return 0;
}

static const char *file_state(const struct fs_sfile *f)
{
	if (f->state == SF_DONE)
		return "complete and verified";
	if (f->state == SF_FAILED)
		return f->why[0] ? f->why : "refused";
	return f->why[0] ? f->why : "being written";
}

int fs_stage_status(struct fs *fs, struct fs_stage *s, char **out, size_t *outlen)
{
	char *buf = NULL, hex[ST_ID_HEX_LEN + 1], why[2 * WHY_LEN];
	size_t len = 0, cap = 0;
	int64_t now = fs_now_ns();
	int rc;

	pthread_mutex_lock(&s->lock);
	describe_missing(fs, s, why, sizeof(why));
	bool stale = stale_locked(s, now);
	rc = textf(&buf, &len, &cap, "import %s: %s\nlacks: %s\nidle: %lld s; files open: %u\n", s->name,
		   s->state == STG_OPEN ? (stale ? "unfinished, set aside (a new copy under this name "
						  "replaces it)" : "unfinished") : "committed",
		   why, (long long)((now - s->last_ns) / 1000000000ll), s->handles);
	struct fs_sfile *mf = find_locked(s, false, NULL, "manifest.json");
	if (rc >= 0)
		rc = textf(&buf, &len, &cap, "manifest.json: %s\n",
			   !mf ? "missing" : s->m ? "complete and valid" : file_state(mf));
	for (uint32_t i = 0; s->m && i < s->m->nlayers && rc >= 0; i++) {
		st_id_format(&s->m->layers[i].id, hex);
		struct fs_sfile *lf = find_locked(s, true, NULL, hex);
		rc = textf(&buf, &len, &cap, "layers/%s: %s\n", hex, lf ? file_state(lf) : "missing");
	}
	for (struct fs_sfile *f = s->files; f && rc >= 0; f = f->next) {
		if (f->gone)
			continue;
		if (f->extra)
			rc = textf(&buf, &len, &cap, "%s%s%s: ignored (not part of a snapshot)\n",
				   f->in_layers ? "layers/" : "", f->dir ? ".../" : "", f->name);
		else if (f->in_layers && (!s->m || (f->has_expect && manifest_layer(s->m, &f->expect) < 0) ||
					  !f->has_expect))
			rc = textf(&buf, &len, &cap, "layers/%s: %s\n", f->name, file_state(f));
	}
	if (rc >= 0)
		rc = textf(&buf, &len, &cap, "(docs/fs.md, \"Unfinished imports\")\n");
	pthread_mutex_unlock(&s->lock);
	if (rc < 0) {
		free(buf);
		return rc;
	}
	*out = buf;
	*outlen = len;
	return 0;
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
		char why[2 * WHY_LEN];
		if (open) {
			describe_missing(fs, victim, why, sizeof(why));
			fs_log(fs, FS_LOG_WARNING, "import %s: abandoned (%s); nothing was published",
			       victim->name, why);
		}
		pthread_mutex_unlock(&victim->lock);
		if (open) {
			stage_kill(fs, victim);
		} else {
			stage_detach(fs, victim);
			/* Committed and done answering (no longer found by
			 * name): what it holds in memory goes back to the budget
			 * now, not when the kernel forgets its nodes (which may
			 * be much later). A file still open keeps its bytes
			 * until its release. */
			pthread_mutex_lock(&victim->lock);
			victim->retired = true;
			for (struct fs_sfile *f = victim->files; f; f = f->next)
				if (!f->handles)
					sfile_remove(fs, f);
			pthread_mutex_unlock(&victim->lock);
		}
		fs_stage_unref(fs, victim);
		dropped++;
	}
	return dropped;
}
