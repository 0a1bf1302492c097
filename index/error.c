/* error.c: the index's codes (index.h, index/dist/dist.h) in one table, and LMDB's codes mapped onto them. */
#include <errno.h>

#include "index/index_int.h"
#include "index/dist/dist.h"
#include "store/error.h"

static const struct st_errcode index_codes[] = {
	{IX_ENOTFOUND, "IX_ENOTFOUND", "not found in the index"},
	{IX_EEXIST, "IX_EEXIST", "the tag already names another snapshot"},
	{IX_EMISSING, "IX_EMISSING", "a layer blob the snapshot needs is missing from the store"},
	{IX_EVERSION, "IX_EVERSION", "the index was written by an unknown version of strata"},
	{IX_ECORRUPT, "IX_ECORRUPT", "the index database is damaged"},
	{IX_EBUSY, "IX_EBUSY", "the index has too many readers"},
	{IX_ELMDB, "IX_ELMDB", "the index database failed"},
	{IX_EAMBIGUOUS, "IX_EAMBIGUOUS", "more than one snapshot id starts with that prefix"},
	/* the registry client, -1150..-1159 */
	{IX_EREF, "IX_EREF", "not a registry reference (REGISTRY/REPOSITORY[:TAG|@sha256:DIGEST])"},
	{IX_ENET, "IX_ENET", "network error"},
	{IX_ETLS, "IX_ETLS", "TLS error"},
	{IX_EAUTH, "IX_EAUTH", "authentication failed"},
	{IX_EREMOTE_MISSING, "IX_EREMOTE_MISSING", "not found in the registry"},
	{IX_EHTTP, "IX_EHTTP", "unexpected answer from the registry"},
	{IX_EDEADLINE, "IX_EDEADLINE", "the deadline passed"},
	/* lazy layers, -1160..-1169 */
	{IX_ELAZY_BADCHUNK, "IX_ELAZY_BADCHUNK", "a chunk does not match the chunk index"},
	{IX_ELAZY_OFFLINE, "IX_ELAZY_OFFLINE", "the registry could not be reached"},
	{IX_ELAZY_NOINDEX, "IX_ELAZY_NOINDEX",
	 "the snapshot was pushed without chunk indexes (push it again to pull it lazily)"},
};

static const struct st_errtable index_table = {
	-1100, index_codes, sizeof(index_codes) / sizeof(index_codes[0]),
};

__attribute__((constructor)) static void index_errors_add(void)
{
	st_errtable_add(&index_table);
}

/* The names of the public headers, kept: each is st_strerror. */
const char *ix_strerror(int err)
{
	return st_strerror(err);
}

const char *ix_registry_strerror(int err)
{
	return st_strerror(err);
}

const char *ix_lazy_strerror(int err)
{
	return st_strerror(err);
}

/* Every LMDB call's result passes through here, so linking any of the index links its table. */
int ix_err(int rc)
{
	if (rc < MDB_KEYEXIST || rc > MDB_LAST_ERRCODE)
		return rc; /* not an LMDB code (LMDB's range is -30799..-30780) */
	switch (rc) {
	case MDB_NOTFOUND: return IX_ENOTFOUND;
	case MDB_CORRUPTED:
	case MDB_PAGE_NOTFOUND:
	case MDB_INVALID:
	case MDB_BAD_DBI:
	case MDB_INCOMPATIBLE:
		return IX_ECORRUPT;
	case MDB_VERSION_MISMATCH: return IX_EVERSION;
	case MDB_READERS_FULL:
	case MDB_TLS_FULL:
	case MDB_TXN_FULL:
		return IX_EBUSY;
	case MDB_MAP_FULL: return -ENOSPC;
	default: return IX_ELMDB;
	}
}
