/* path.c: which names the mount accepts, and what a name inside an import is. */
#include <errno.h>
#include <string.h>

#include "fs/fs_int.h"

int fs_name_check(const char *name)
{
	size_t len = strnlen(name, FS_NAME_MAX + 1);

	if (len == 0 || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return -EINVAL;
	if (len > FS_NAME_MAX)
		return -ENAMETOOLONG;
	return 0;
}

bool fs_name_is_temp(const char *name)
{
	return name[0] == '.' && fs_name_check(name) == 0;
}

enum fs_stage_slot fs_stage_slot(bool in_layers, const char *name)
{
	st_id id;

	if (fs_name_check(name) < 0)
		return FS_SLOT_BAD;
	if (fs_name_is_temp(name))
		return FS_SLOT_TEMP;
	if (!in_layers)
		return strcmp(name, "manifest.json") == 0 ? FS_SLOT_MANIFEST : FS_SLOT_BAD;
	return st_id_parse(name, &id) == 0 ? FS_SLOT_LAYER : FS_SLOT_BAD;
}
