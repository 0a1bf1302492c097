/* kinds.c: the table of node kinds: one row per kind, saying what each operation does there (kinds.h). */
#include <errno.h>

#include "fs/kinds.h"

/* Unsized: the rows given set its size, which the assert below holds to the enum. */
const struct fs_kind_ops fs_kinds[] = {
	[FS_K_ROOT] = {
		.name = "/", .fixed_ino = FS_INO_ROOT, .refuse = -EPERM, .listing = FS_LIST_KEEP,
		.attr = fs_root_attr, .lookup = fs_root_lookup, .list = fs_root_list,
	},
	[FS_K_SNAPSHOTS] = {
		.name = "snapshots/", .fixed_ino = FS_INO_SNAPSHOTS, .flags = FS_KF_TAGGED, .refuse = -EPERM,
		.listing = FS_LIST_TAGS,
		.attr = fs_snapshots_attr, .timeout = fs_listing_timeout, .lookup = fs_tagdir_lookup,
		.list = fs_tagdir_list, .mkdir = fs_snapshots_mkdir, .rmdir = fs_snapshots_rmdir,
	},
	[FS_K_BLOBS] = {
		.name = "blobs/", .fixed_ino = FS_INO_BLOBS, .refuse = -EROFS, .listing = FS_LIST_FRESH,
		.attr = fs_plaindir_attr, .timeout = fs_listing_timeout, .lookup = fs_blobs_lookup,
		.list = fs_blobs_list,
	},
	[FS_K_MEMORY] = {
		.name = "memory/", .fixed_ino = FS_INO_MEMORY, .flags = FS_KF_TAGGED, .refuse = -EROFS,
		.listing = FS_LIST_TAGS,
		.attr = fs_plaindir_attr, .timeout = fs_listing_timeout, .lookup = fs_tagdir_lookup,
		.list = fs_tagdir_list,
	},
	[FS_K_SNAPDIR] = {
		.name = "a committed snapshot", .flags = FS_KF_SNAPSHOT | FS_KF_NEG_CACHE, .refuse = -EROFS,
		.listing = FS_LIST_UNLESS_RM,
		.attr = fs_snap_attr, .timeout = fs_snapdir_timeout, .lookup = fs_snapdir_lookup,
		.list = fs_snapdir_list, .id = fs_snap_id, .unlink = fs_committed_unlink, .rmdir = fs_snapdir_rmdir,
	},
	[FS_K_LAYERS] = {
		.name = "a committed snapshot's layers/", .flags = FS_KF_SNAPSHOT | FS_KF_NEG_CACHE, .refuse = -EROFS,
		.listing = FS_LIST_KEEP,
		.attr = fs_snap_attr, .lookup = fs_layers_lookup, .list = fs_layers_list, .id = fs_snap_id,
		.unlink = fs_committed_unlink,
	},
	[FS_K_MANIFEST] = {
		.name = "a committed manifest.json", .flags = FS_KF_SNAPSHOT, .refuse = -EROFS,
		.open = FS_OPEN_MANIFEST,
		.attr = fs_snap_attr, .id = fs_snap_id,
	},
	[FS_K_BLOB] = {
		.name = "a blob", .flags = FS_KF_SNAPSHOT, .refuse = -EROFS, .open = FS_OPEN_BLOB,
		.attr = fs_blob_attr, .id = fs_snap_id,
	},
	[FS_K_MEMFILE] = {
		.name = "a memory file", .refuse = -EROFS, .open = FS_OPEN_MEMORY,
		.attr = fs_snap_attr, .id = fs_snap_id,
	},
	[FS_K_STAGEDIR] = {
		.name = "an import", .flags = FS_KF_STAGE, .refuse = -EROFS,
		.attr = fs_stage_node_attr, .timeout = fs_no_timeout, .lookup = fs_stageplace_lookup,
		.list = fs_stageplace_list, .id = fs_stagedir_id, .place = fs_stagedir_place,
		.mkdir = fs_stageplace_mkdir, .unlink = fs_stageplace_unlink, .rmdir = fs_stageplace_rmdir,
	},
	[FS_K_STAGELAYERS] = {
		.name = "an import", .flags = FS_KF_STAGE, .refuse = -EROFS,
		.attr = fs_stage_node_attr, .timeout = fs_no_timeout, .lookup = fs_stageplace_lookup,
		.list = fs_stageplace_list, .place = fs_stagedir_place,
		.mkdir = fs_stageplace_mkdir, .unlink = fs_stageplace_unlink, .rmdir = fs_stageplace_rmdir,
	},
	[FS_K_STAGEFILE] = {
		.name = "an import", .flags = FS_KF_STAGE, .refuse = -EROFS, .open = FS_OPEN_STAGE,
		.attr = fs_stage_node_attr, .timeout = fs_no_timeout, .lookup = fs_stageplace_lookup,
		.list = fs_stageplace_list, .id = fs_stagefile_id, .place = fs_stagefile_place,
		.mkdir = fs_stageplace_mkdir, .unlink = fs_stageplace_unlink, .rmdir = fs_stageplace_rmdir,
	},
	[FS_K_IMPORTS] = {
		.name = "imports/", .fixed_ino = FS_INO_IMPORTS, .refuse = -EPERM,
		.attr = fs_plaindir_attr, .timeout = fs_no_timeout, .lookup = fs_imports_lookup,
		.list = fs_imports_list, .unlink = fs_imports_unlink,
	},
	[FS_K_IMPORTFILE] = {
		.name = "an import's status file", .refuse = -EROFS, .open = FS_OPEN_STATUS,
		.attr = fs_importfile_attr, .timeout = fs_no_timeout,
	},
};

_Static_assert(sizeof(fs_kinds) / sizeof(fs_kinds[0]) == FS_K_COUNT, "every enum fs_kind has a row in fs_kinds");
