/* dirlist.c: directory listings as readdir replies from them, built by the namespace and by imports. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs_int.h"
#include "store/array.h"
#include "store/sys.h"

int fs_dirlist_add(struct fs_dirlist *l, const char *name, const struct fs_key *key, mode_t type)
{
	if (ST_ARRAY_RESERVE(l->v, l->cap, l->n + 1) < 0)
		return -ENOMEM;
	struct fs_dirent *e = &l->v[l->n];
	memset(e, 0, sizeof(*e));
	if (!(e->name = st_sys_strdup(name)))
		return -ENOMEM;
	e->key = *key;
	if (key->name && !(e->keyname = st_sys_strdup(key->name))) {
		free(e->name);
		return -ENOMEM;
	}
	e->key.name = e->keyname;
	e->st_ino = fs_ino_stable(key);
	e->type = type;
	l->n++;
	return 0;
}

void fs_dirlist_free(struct fs_dirlist *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].name);
		free(l->v[i].keyname);
	}
	free(l->v);
	free(l);
}

/* An empty listing to fill. */
int fs_dirlist_new(struct fs_dirlist **out)
{
	return (*out = st_sys_calloc(1, sizeof(**out))) ? 0 : -ENOMEM;
}

/* Hand l out, or free it on failure. */
int fs_dirlist_done(struct fs_dirlist *l, int rc, struct fs_dirlist **out)
{
	if (rc < 0) {
		fs_dirlist_free(l);
		return rc;
	}
	*out = l;
	return 0;
}
