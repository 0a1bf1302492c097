/* error.c: the mount's error codes (fs.h) in words, falling back to the index's and the store's. */
#include "fs/fs.h"
#include "index/index.h"

const char *fs_strerror(int err)
{
	switch (err) {
	case FS_ESTALE_MOUNT:
		return "mountpoint is a stale FUSE mount whose daemon is gone (Transport endpoint is not connected)";
	case FS_EMOUNTED: return "something is already mounted there";
	case FS_EMOUNT: return "the kernel refused the mount";
	case FS_ENOTMOUNT: return "nothing is mounted there";
	case FS_EOPTION: return "invalid mount option";
	default: return ix_strerror(err);
	}
}
