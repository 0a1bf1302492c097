/* ns.c: the namespace: each request on a node through its kind's row (kinds.c), the attributes every node shares, xattrs. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/kinds.h"
#include "index/dist/dist.h"
#include "store/mountabi.h"
#include "store/sys.h"

struct stage_init {
	struct fs_stage *stage;
	struct fs_sfile *sfile;
};

static void init_stage_node(struct fs_node *n, void *ctx)
{
	struct stage_init *si = ctx;

	n->stage = fs_stage_ref(si->stage);
	n->sfile = si->sfile;
}

int fs_ns_acquire(struct fs *fs, const struct fs_key *key, struct fs_node **out)
{
	return fs_itable_acquire(fs->itable, key, NULL, NULL, out);
}

int fs_ns_acquire_stage(struct fs *fs, enum fs_kind kind, struct fs_stage *s, struct fs_sfile *f,
			 struct fs_node **out)
{
	struct fs_key k;
	struct stage_init si = { s, f };

	fs_key_serial(&k, kind, f ? fs_sfile_serial(f) : fs_stage_serial(s));
	return fs_itable_acquire(fs->itable, &k, init_stage_node, &si, out);
}

bool fs_ns_stage_place(const struct fs_node *n, bool *in_layers, struct fs_sfile **dir)
{
	const struct fs_kind_ops *k = fs_kind(n->kind);

	return k->place && k->place(n, in_layers, dir);
}

int fs_ns_lookup(struct fs *fs, struct fs_node *dir, const char *name, struct fs_node **out)
{
	const struct fs_kind_ops *k = fs_kind(dir->kind);
	int rc = fs_name_check(name);

	if (rc < 0)
		return rc;
	return k->lookup ? k->lookup(fs, dir, name, out) : -ENOTDIR;
}

double fs_node_timeout(struct fs *fs, const struct fs_node *n)
{
	const struct fs_kind_ops *k = fs_kind(n->kind);

	return k->timeout ? k->timeout(fs, n) : fs->entry_timeout;
}

void fs_attr_time(struct stat *st, int64_t ns)
{
	if (ns < 0)
		ns = 0;
	st->st_mtim.tv_sec = ns / 1000000000ll;
	st->st_mtim.tv_nsec = ns % 1000000000ll;
	st->st_atim = st->st_mtim;
	st->st_ctim = st->st_mtim;
}

void fs_attr_dir(struct stat *st, mode_t perm, nlink_t nlink)
{
	st->st_mode = S_IFDIR | perm;
	st->st_nlink = nlink;
	st->st_size = 4096;
	st->st_blocks = 8;
}

int fs_ns_attr(struct fs *fs, struct fs_node *n, struct stat *st)
{
	const struct fs_kind_ops *k = fs_kind(n->kind);

	memset(st, 0, sizeof(*st));
	st->st_ino = n->st_ino;
	st->st_uid = getuid();
	st->st_gid = getgid();
	st->st_blksize = FS_MAX_REQUEST; /* cp and friends size their buffers by it */
	fs_attr_time(st, fs->start_ns);
	return k->attr ? k->attr(fs, n, st) : -EIO;
}

int fs_ns_list(struct fs *fs, struct fs_node *dir, struct fs_dirlist **out)
{
	const struct fs_kind_ops *k = fs_kind(dir->kind);

	return k->list ? k->list(fs, dir, out) : -ENOTDIR;
}

static int put_value(const char *v, size_t len, char *buf, size_t size)
{
	if (size == 0)
		return (int)len;
	if (size < len)
		return -ERANGE;
	memcpy(buf, v, len);
	return (int)len;
}

/* The id a node carries in user.strata.id, if any. */
static bool node_id(struct fs_node *n, st_id *id)
{
	const struct fs_kind_ops *k = fs_kind(n->kind);

	return k->id && k->id(n, id);
}

/*
 * user.strata.restore of a committed snapshot directory (store/mountabi.h):
 * manifest.json's bytes and every layer's backing blob, so a VMM restoring
 * from the mount gets everything it needs in one request instead of an
 * open, a release and a getxattr per layer. Larger than an xattr may be:
 * E2BIG, and the reader uses the files.
 */
static int restore_value(struct fs *fs, struct fs_node *n, char *buf, size_t size)
{
	const struct fs_snap *snap;
	struct st_restore_enc e;
	char path[4096];
	int rc;

	if (n->rm) /* an `rm -r` is taking it apart */
		return -ENODATA;
	if ((rc = fs_snap_get(fs, &n->id, &snap)) < 0)
		return rc;
	st_restore_enc_begin(&e, buf, size, snap->raw, snap->rawlen);
	for (uint32_t i = 0; i < snap->m->nlayers && e.len <= ST_XATTR_VALUE_MAX; i++) {
		const st_id *lid = &snap->m->layers[i].id;
		struct ix_lazy_info li;
		if (!st_blob_has(fs->store, lid) && ix_lazy_layer_info(fs->lazy, lid, &li) == 1) {
			st_restore_enc_layer(&e, ST_RESTORE_FILE, "");
			continue;
		}
		if ((rc = st_blob_path(fs->store, lid, path, sizeof(path))) < 0)
			return rc;
		st_restore_enc_layer(&e, ST_RESTORE_BLOB, path);
	}
	return st_restore_enc_end(&e);
}

int fs_ns_getxattr(struct fs *fs, struct fs_node *n, const char *name, char *buf, size_t size)
{
	st_id id;
	char hex[ST_ID_HEX_LEN + 1], path[4096];

	/* Only user.strata.* exist. Saying the security, trusted and system
	 * (POSIX ACL) namespaces are not supported, rather than empty, lets
	 * `ls -l` stop asking for them after the first file of the mount: one
	 * round trip per listing instead of one per file (docs/fs.md). */
	if (strncmp(name, "security.", 9) == 0 || strncmp(name, "trusted.", 8) == 0 ||
	    strncmp(name, "system.", 7) == 0)
		return -EOPNOTSUPP;
	if (!node_id(n, &id))
		return -ENODATA;
	if (strcmp(name, ST_XATTR_ID) == 0) {
		st_id_format(&id, hex);
		return put_value(hex, ST_ID_HEX_LEN, buf, size);
	}
	if (strcmp(name, ST_XATTR_RESTORE) == 0 && n->kind == FS_K_SNAPDIR)
		return restore_value(fs, n, buf, size);
	if (strcmp(name, ST_XATTR_BLOB_PATH) == 0 && (n->kind == FS_K_BLOB || n->kind == FS_K_STAGEFILE)) {
		struct ix_lazy_info li;
		if (n->kind == FS_K_BLOB && !st_blob_has(fs->store, &id) && ix_lazy_layer_info(fs->lazy, &id, &li) == 1)
			return -ENODATA; /* no complete backing blob yet */
		int rc = st_blob_path(fs->store, &id, path, sizeof(path));
		if (rc < 0)
			return rc;
		return put_value(path, strlen(path), buf, size);
	}
	return -ENODATA;
}

int fs_ns_listxattr(struct fs *fs, struct fs_node *n, char *buf, size_t size)
{
	static const char both[] = ST_XATTR_ID "\0" ST_XATTR_BLOB_PATH;
	st_id id;

	if (!node_id(n, &id))
		return put_value("", 0, buf, size);
	if (n->kind == FS_K_BLOB || n->kind == FS_K_STAGEFILE)
		return put_value(both, sizeof(both), buf, size);
	return put_value(ST_XATTR_ID, sizeof(ST_XATTR_ID), buf, size);
}
