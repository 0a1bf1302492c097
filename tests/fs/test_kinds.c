/* test_kinds.c: fs/kinds.c's table: every kind has a whole row, and an op a row leaves out gives its defined error. */
#include <criterion/criterion.h>
#include <errno.h>

#include "fs/kinds.h"

Test(fs_kinds, every_kind_has_a_whole_row)
{
	for (int k = FS_K_ROOT; k < FS_K_COUNT; k++) {
		const struct fs_kind_ops *o = fs_kind((enum fs_kind)k);
		cr_assert_not_null(o->name, "kind %d has no row (no name)", k);
		cr_assert_not_null(o->attr, "kind %d (%s) has no attr", k, o->name);
		cr_assert(o->refuse == -EPERM || o->refuse == -EROFS, "kind %d (%s): refuse is %d", k, o->name,
			  o->refuse);
		/* a node is a file, a directory or (an import's file) either */
		cr_assert(o->open != FS_OPEN_NONE || (o->lookup && o->list), "kind %d (%s) is neither file nor directory",
			  k, o->name);
		cr_assert_eq(!o->lookup, !o->list, "kind %d (%s): a directory looks up and lists", k, o->name);
		cr_assert(!o->place || (o->flags & FS_KF_STAGE), "kind %d (%s): places are in imports", k, o->name);
	}
}

Test(fs_kinds, fixed_inodes_are_the_top_dirs_each_once)
{
	bool seen[FS_INO_FIRST_DYNAMIC] = { false };
	int fixed = 0;

	for (int k = FS_K_ROOT; k < FS_K_COUNT; k++) {
		uint64_t ino = fs_kind((enum fs_kind)k)->fixed_ino;
		if (!ino)
			continue;
		cr_assert_lt(ino, FS_INO_FIRST_DYNAMIC);
		cr_assert_not(seen[ino], "inode %llu given twice", (unsigned long long)ino);
		seen[ino] = true;
		fixed++;
		struct fs_key key = { .kind = (enum fs_kind)k };
		cr_assert_eq(fs_ino_stable(&key), ino);
	}
	cr_assert_eq(fixed, 5, "/, snapshots/, blobs/, memory/, imports/");
	cr_assert(seen[FS_INO_ROOT], "the root is FUSE_ROOT_ID");
}

/* A node of each kind without the op: the dispatchers give the documented error (no store needed:
 * they answer before touching it). */
Test(fs_kinds, an_op_a_kind_leaves_out_gives_its_defined_error)
{
	struct fs fs = { .entry_timeout = 86400 };
	struct fs_dirlist *l;
	struct fs_node *out;

	for (int k = FS_K_ROOT; k < FS_K_COUNT; k++) {
		const struct fs_kind_ops *o = fs_kind((enum fs_kind)k);
		struct fs_node n = { .kind = (enum fs_kind)k };
		bool in_layers;
		struct fs_sfile *dir;
		if (!o->lookup)
			cr_assert_eq(fs_ns_lookup(&fs, &n, "x", &out), -ENOTDIR, "lookup in %s", o->name);
		if (!o->list)
			cr_assert_eq(fs_ns_list(&fs, &n, &l), -ENOTDIR, "list of %s", o->name);
		if (!o->id) {
			cr_assert_eq(fs_ns_getxattr(&fs, &n, "user.strata.id", NULL, 0), -ENODATA, "id of %s", o->name);
			cr_assert_eq(fs_ns_listxattr(&fs, &n, NULL, 0), 0, "xattrs of %s", o->name);
		}
		if (!o->place)
			cr_assert_not(fs_ns_stage_place(&n, &in_layers, &dir), "place of %s", o->name);
		if (!o->timeout)
			cr_assert_eq(fs_node_timeout(&fs, &n), 86400, "timeout of %s", o->name);
	}
}
