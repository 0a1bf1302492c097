/* error.c: the mount's codes (fs.h) in one table. */
#include "fs/fs.h"
#include "store/error.h"
#include "store/store.h"

static const struct st_errcode fs_codes[] = {
	{FS_ESTALE_MOUNT, "FS_ESTALE_MOUNT",
	 "mountpoint is a stale FUSE mount whose daemon is gone (Transport endpoint is not connected)"},
	{FS_EMOUNTED, "FS_EMOUNTED", "something is already mounted there"},
	{FS_EMOUNT, "FS_EMOUNT", "the kernel refused the mount"},
	{FS_ENOTMOUNT, "FS_ENOTMOUNT", "nothing is mounted there"},
	{FS_EOPTION, "FS_EOPTION", "invalid mount option"},
};

static const struct st_errtable fs_table = {
	-1300, fs_codes, sizeof(fs_codes) / sizeof(fs_codes[0]),
};

__attribute__((constructor)) static void fs_errors_add(void)
{
	st_errtable_add(&fs_table);
}

/* st_strerror under the mount's name: it names the registry's and lazy
 * layers' codes a lazy read ends in as well as the mount's own. session.c
 * (fs_serve, fs_umount) calls it, so linking the mount links its table. */
const char *fs_strerror(int err)
{
	return st_strerror(err);
}
