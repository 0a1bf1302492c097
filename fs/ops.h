/* ops.h: the FUSE operation table and cache invalidation, for session.c (both include fuse_lowlevel.h). */
#ifndef STRATA_FS_OPS_H
#define STRATA_FS_OPS_H

#include "fs/fs_int.h"

struct fuse_lowlevel_ops;
/* The operation table; userdata is the struct fs. */
const struct fuse_lowlevel_ops *fs_ops(void);
/* Tell the kernel which snapshots/NAME and memory/NAME entries changed
 * between two tag sets (call from a thread that serves no requests). */
void fs_ops_invalidate_tags(struct fs *fs, const struct fs_tags *old, const struct fs_tags *cur);
/* Drop the kernel's entries snapshots/NAME and memory/NAME for each name. */
void fs_ops_invalidate_names(struct fs *fs, char **names, size_t n);

#endif
