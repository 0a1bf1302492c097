/* test_path.c: name rules of the mount and of files inside an import. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "fs/fs_int.h"

Test(fs, name_check_refuses_slash_dots_and_empty)
{
	cr_assert_eq(fs_name_check("a/b"), -EINVAL);
	cr_assert_eq(fs_name_check("."), -EINVAL);
	cr_assert_eq(fs_name_check(".."), -EINVAL);
	cr_assert_eq(fs_name_check(""), -EINVAL);
	cr_assert_eq(fs_name_check("ok.name"), 0);
}

Test(fs, name_check_refuses_over_255_bytes)
{
	char name[300];

	memset(name, 'a', sizeof(name));
	name[255] = '\0';
	cr_assert_eq(fs_name_check(name), 0);
	name[255] = 'a';
	name[256] = '\0';
	cr_assert_eq(fs_name_check(name), -ENAMETOOLONG);
}

Test(fs, temp_names_are_dot_names)
{
	cr_assert(fs_name_is_temp(".manifest.json.AbC123"));
	cr_assert(!fs_name_is_temp("manifest.json"));
	cr_assert(!fs_name_is_temp(".."));
}

Test(fs, stage_slot_knows_manifest_layers_and_temps)
{
	cr_assert_eq(fs_stage_slot(false, "manifest.json"), FS_SLOT_MANIFEST);
	cr_assert_eq(fs_stage_slot(false, "README"), FS_SLOT_BAD);
	cr_assert_eq(fs_stage_slot(false, "0123456789abcdef0123456789abcdef"), FS_SLOT_BAD);
	cr_assert_eq(fs_stage_slot(true, "0123456789abcdef0123456789abcdef"), FS_SLOT_LAYER);
	cr_assert_eq(fs_stage_slot(true, "0123456789ABCDEF0123456789abcdef"), FS_SLOT_BAD);
	cr_assert_eq(fs_stage_slot(true, "0123456789abcdef"), FS_SLOT_BAD);
	cr_assert_eq(fs_stage_slot(true, ".0123456789abcdef0123456789abcdef.x1Y2z3"), FS_SLOT_TEMP);
	cr_assert_eq(fs_stage_slot(true, "manifest.json"), FS_SLOT_BAD);
	cr_assert_eq(fs_stage_slot(false, "a/b"), FS_SLOT_BAD);
}
