/* fuzz_snapdir.c: fuzz target 2, a snapshot directory: the store's verify, the VMM's verified open and import agree. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "index/index.h"
#include "store/store.h"
#include "tests/fuzz/fuzz.h"
#include "vmm/vmm.h"

/* One directory and one store per process, made at the first input. */
static char root[64], dir[96], store_dir[96];
static struct st_store *store;
static struct ix *ix;

static int rm_one(const char *p, const struct stat *s, int flag, struct FTW *f)
{
	(void)s;
	(void)f;
	return flag == FTW_DP ? rmdir(p) : unlink(p);
}

static void cleanup(void)
{
	ix_close(ix);
	st_store_close(store);
	nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void setup(void)
{
	const char *tmp = getenv("TMPDIR");
	struct st_store_opts o = { .sync = ST_SYNC_NONE };

	snprintf(root, sizeof(root), "%.40s/strata-fuzz.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	FUZZ_CHECK(mkdtemp(root), "mkdtemp: %s", strerror(errno));
	snprintf(dir, sizeof(dir), "%s/snap", root);
	snprintf(store_dir, sizeof(store_dir), "%s/store", root);
	FUZZ_CHECK(mkdir(store_dir, 0700) == 0 && st_store_init(store_dir, &o) == 0, "store");
	FUZZ_CHECK(st_store_open(store_dir, 0, &store) == 0 && ix_open(store, NULL, &ix) == 0, "open");
	atexit(cleanup);
}

static void put_file(const char *path, const uint8_t *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	FUZZ_CHECK(fd >= 0, "%s: %s", path, strerror(errno));
	FUZZ_CHECK(len == 0 || write(fd, data, len) == (ssize_t)len, "write %s", path);
	close(fd);
}

/*
 * The input is manifest.json's bytes, a NUL, then the layers' bytes in
 * manifest order (each layer takes the next pages × 4096 bytes; what is
 * short makes a short file). The seeds are real exports, so mutations
 * start from directories that verify.
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *sep = memchr(data, '\0', size);
	size_t mlen = sep ? (size_t)(sep - data) : size;
	const uint8_t *rest = sep ? sep + 1 : data + size, *end = data + size;
	struct st_manifest *m = NULL;
	char why[ST_WHY_LEN] = "", path[160];

	if (!root[0])
		setup();
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	FUZZ_CHECK(mkdir(dir, 0755) == 0, "mkdir");
	snprintf(path, sizeof(path), "%s/layers", dir);
	FUZZ_CHECK(mkdir(path, 0755) == 0, "mkdir layers");
	snprintf(path, sizeof(path), "%s/manifest.json", dir);
	put_file(path, data, mlen);
	/* Lay the layers out as the manifest names them, if it parses. */
	if (st_manifest_parse((const char *)data, mlen, &m, why, sizeof(why)) == 0) {
		for (uint32_t i = 0; i < m->nlayers; i++) {
			char hex[ST_ID_HEX_LEN + 1];
			uint64_t want = m->layers[i].pages * ST_PAGE_SIZE;
			size_t have = (size_t)(end - rest) < want ? (size_t)(end - rest) : (size_t)want;
			st_id_format(&m->layers[i].id, hex);
			snprintf(path, sizeof(path), "%s/layers/%s", dir, hex);
			put_file(path, rest, have);
			rest += have;
		}
	}
	/* The store's verdict. */
	struct st_manifest *sm = NULL;
	why[0] = '\0';
	int store_rc = st_snapdir_read(dir, &sm, why, sizeof(why));
	if (store_rc == 0)
		store_rc = st_snapdir_verify(dir, sm, why, sizeof(why));
	/* The VMM's verified open (no KVM needed: no sandbox is made). */
	struct vmm_snapdir *d = NULL;
	struct vmm_error err = { 0 };
	int vmm_rc = vmm_snapdir_open(NULL, dir, VMM_SNAPDIR_VERIFY, &d, &err);
	/* Import into the store, then take it out again. */
	st_id id;
	int ix_rc = ix_import_dir(ix, dir, NULL, 0, &id, NULL, why, sizeof(why));
	FUZZ_CHECK((store_rc == 0) == (vmm_rc == 0), "store verify %d, VMM verified open %d (%s)", store_rc, vmm_rc,
		   err.message);
	FUZZ_CHECK((store_rc == 0) == (ix_rc == 0), "store verify %d, import %d", store_rc, ix_rc);
	if (store_rc == 0) {
		st_id sid;
		FUZZ_CHECK(st_manifest_id(sm, &sid, why, sizeof(why)) == 0 && st_id_equal(&sid, &id),
			   "import committed another id");
		const struct st_manifest *vm = vmm_snapdir_manifest(d);
		FUZZ_CHECK(st_manifest_id(vm, &sid, why, sizeof(why)) == 0 && st_id_equal(&sid, &id),
			   "the VMM opened another manifest");
		FUZZ_CHECK(ix_snap_del(ix, &id) == 0, "delete");
		FUZZ_CHECK(ix_gc(ix, 0, NULL) == 0, "gc");
	}
	vmm_snapdir_close(d);
	vmm_snapdir_caches_drop(NULL);
	st_manifest_free(sm);
	st_manifest_free(m);
	return 0;
}
