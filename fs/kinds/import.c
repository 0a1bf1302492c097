/* kinds/import.c: an import being copied in (its directory, layers/, files) and imports/ with its status files. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/kinds.h"

bool fs_stagedir_place(const struct fs_node *n, bool *in_layers, struct fs_sfile **dir)
{
	*in_layers = n->kind == FS_K_STAGELAYERS;
	*dir = NULL;
	return true;
}

bool fs_stagefile_place(const struct fs_node *n, bool *in_layers, struct fs_sfile **dir)
{
	if (!fs_sfile_is_dir(n->sfile))
		return false;
	*in_layers = fs_sfile_in_layers(n->sfile);
	*dir = n->sfile;
	return true;
}

int fs_imports_lookup(struct fs *fs, struct fs_node *dir, const char *name, struct fs_node **out)
{
	struct fs_stage *s = fs_stage_find_any(fs, name);
	int rc;

	if (!s)
		return -ENOENT;
	rc = fs_ns_acquire_stage(fs, FS_K_IMPORTFILE, s, NULL, out);
	fs_stage_unref(fs, s);
	return rc;
}

/* An import's directory, its layers/ or an extra directory in it. */
int fs_stageplace_lookup(struct fs *fs, struct fs_node *dir, const char *name, struct fs_node **out)
{
	bool in_layers;
	struct fs_sfile *sdir;

	if (!fs_ns_stage_place(dir, &in_layers, &sdir))
		return -ENOTDIR;
	if (dir->kind == FS_K_STAGEDIR && strcmp(name, "layers") == 0) {
		if (!fs_stage_has_layers(dir->stage))
			return -ENOENT;
		return fs_ns_acquire_stage(fs, FS_K_STAGELAYERS, dir->stage, NULL, out);
	}
	struct fs_sfile *f = fs_stage_file_find(dir->stage, in_layers, sdir, name);
	if (!f)
		return -ENOENT;
	return fs_ns_acquire_stage(fs, FS_K_STAGEFILE, dir->stage, f, out);
}

double fs_no_timeout(struct fs *fs, const struct fs_node *n)
{
	return 0;
}

int fs_importfile_attr(struct fs *fs, struct fs_node *n, struct stat *st)
{
	char *text;
	size_t len;
	int rc;

	if ((rc = fs_stage_status(fs, n->stage, &text, &len)) < 0)
		return rc;
	free(text);
	st->st_mode = S_IFREG | 0444;
	st->st_nlink = 1;
	st->st_size = (off_t)len;
	st->st_blocks = (blkcnt_t)((len + 511) / 512);
	fs_attr_time(st, fs_now_ns());
	return 0;
}

int fs_stage_node_attr(struct fs *fs, struct fs_node *n, struct stat *st)
{
	fs_stage_attr(n->stage, n->sfile, n->kind == FS_K_STAGELAYERS, st);
	st->st_ino = n->st_ino;
	st->st_uid = getuid();
	st->st_gid = getgid();
	return 0;
}

int fs_imports_list(struct fs *fs, struct fs_node *dir, struct fs_dirlist **out)
{
	return fs_stage_list_imports(fs, out);
}

int fs_stageplace_list(struct fs *fs, struct fs_node *dir, struct fs_dirlist **out)
{
	bool in_layers;
	struct fs_sfile *sdir;

	if (!fs_ns_stage_place(dir, &in_layers, &sdir))
		return -ENOTDIR;
	return fs_stage_list(dir->stage, in_layers, sdir, out);
}

bool fs_stagefile_id(struct fs_node *n, st_id *id)
{
	const char *buf;
	size_t len;

	return fs_sfile_blob(n->stage, n->sfile, id, &buf, &len) == 0 && !buf;
}

bool fs_stagedir_id(struct fs_node *n, st_id *id)
{
	return fs_stage_committed_id(n->stage, id);
}

int fs_stageplace_mkdir(struct fs *fs, struct fs_node *dir, const char *name, struct fs_node **out)
{
	bool in_layers;
	struct fs_sfile *sdir, *f;
	int rc;

	if (!fs_ns_stage_place(dir, &in_layers, &sdir))
		return -ENOTDIR;
	if (dir->kind == FS_K_STAGEDIR && strcmp(name, "layers") == 0)
		rc = fs_stage_mkdir_layers(fs, dir->stage);
	else
		rc = fs_stage_mkdir_extra(fs, dir->stage, in_layers, sdir, name, &f);
	if (rc < 0)
		return rc;
	return fs_ns_lookup(fs, dir, name, out);
}

int fs_stageplace_unlink(struct fs *fs, struct fs_node *dir, const char *name)
{
	bool in_layers;
	struct fs_sfile *sdir;

	if (!fs_ns_stage_place(dir, &in_layers, &sdir))
		return -ENOTDIR;
	return fs_stage_unlink(fs, dir->stage, in_layers, sdir, name);
}

/* rm imports/NAME drops an unfinished import at once */
int fs_imports_unlink(struct fs *fs, struct fs_node *dir, const char *name)
{
	struct fs_stage *s = fs_stage_find_any(fs, name);

	if (!s)
		return -ENOENT;
	fs_stage_drop(fs, s);
	fs_stage_unref(fs, s);
	return 0;
}

int fs_stageplace_rmdir(struct fs *fs, struct fs_node *dir, const char *name)
{
	bool in_layers;
	struct fs_sfile *sdir;

	if (!fs_ns_stage_place(dir, &in_layers, &sdir))
		return -ENOTDIR;
	if (dir->kind == FS_K_STAGEDIR && strcmp(name, "layers") == 0)
		return fs_stage_rmdir_layers(fs, dir->stage);
	return fs_stage_rmdir_extra(fs, dir->stage, in_layers, sdir, name);
}
