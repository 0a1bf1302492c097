/* test_perms.c: who can read a store: private and group-shared modes whatever the umask, exports, the exposure check. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store.h"
#include "tests/store/helpers.h"

/* A group the test may give a store to: root may use any, nogroup exists
 * on every Debian machine; anyone else uses their own. */
static gid_t test_group(void)
{
	return getuid() == 0 ? 65534 : getgid();
}

static mode_t mode_of(const char *rel)
{
	struct stat st;

	cr_assert_eq(lstat(th_path(rel), &st), 0, "%s: %s", rel, strerror(errno));
	return st.st_mode & 07777;
}

static gid_t gid_of(const char *rel)
{
	struct stat st;

	cr_assert_eq(lstat(th_path(rel), &st), 0, "%s: %s", rel, strerror(errno));
	return st.st_gid;
}

/* Make a store at th_dir/rel under umask mask, put one blob; *blob gets the
 * blob's path relative to th_dir. */
static struct st_store *store_with_blob(const char *rel, const struct st_store_opts *o, mode_t mask, char *blob,
					size_t len)
{
	struct st_store *s;
	char path[600];
	st_id id;
	mode_t old = umask(mask);
	int rc = st_store_init(th_path(rel), o);

	cr_assert_eq(rc, 0, "init: %s", st_strerror(rc));
	cr_assert_eq(st_store_open(th_path(rel), 0, &s), 0);
	cr_assert_eq(st_blob_put(s, "a layer: a sandbox's memory", 27, &id, NULL), 0);
	umask(old);
	cr_assert_eq(st_blob_path(s, &id, path, sizeof(path)), 0);
	snprintf(blob, len, "%s", path + strlen(th_dir) + 1);
	return s;
}

TestSuite(perms, .init = th_setup, .fini = th_teardown);

Test(perms, a_store_made_under_umask_022_is_its_owners_only)
{
	char blob[600], fan[600];
	struct st_store *s = store_with_blob("p", NULL, 022, blob, sizeof(blob));

	snprintf(fan, sizeof(fan), "%.*s", (int)(strrchr(blob, '/') - blob), blob);
	cr_assert_eq(mode_of("p"), 0700, "the store directory");
	cr_assert_eq(mode_of("p/blobs"), 0700);
	cr_assert_eq(mode_of(fan), 0700, "a fan-out directory");
	cr_assert_eq(mode_of("p/tmp"), 0700);
	cr_assert_eq(mode_of("p/format"), 0400);
	cr_assert_eq(mode_of(blob), 0400, "a blob: read-only, and its owner's only");
	cr_assert(!st_store_shared(s, NULL));
	st_store_close(s);
}

Test(perms, init_makes_a_directory_made_beforehand_private)
{
	mkdir(th_path("pre"), 0755);
	chmod(th_path("pre"), 0755);
	cr_assert_eq(st_store_init(th_path("pre"), NULL), 0);
	cr_assert_eq(mode_of("pre"), 0700);
}

Test(perms, a_shared_store_is_its_groups_to_read_whatever_the_umask)
{
	struct st_store_opts o = { .shared = true, .group = test_group() };
	char blob[600], fan[600];
	gid_t g = 0;
	/* umask 077 would take the group's bits away from anything created
	 * with a mode and not set after. */
	struct st_store *s = store_with_blob("g", &o, 077, blob, sizeof(blob));

	snprintf(fan, sizeof(fan), "%.*s", (int)(strrchr(blob, '/') - blob), blob);
	cr_assert_eq(mode_of("g"), 02750);
	cr_assert_eq(mode_of("g/blobs"), 02750);
	cr_assert_eq(mode_of(fan), 02750);
	cr_assert_eq(mode_of("g/tmp"), 02700, "staging stays the owner's");
	cr_assert_eq(mode_of("g/format"), 0440);
	cr_assert_eq(mode_of(blob), 0440);
	cr_assert_eq(gid_of("g"), o.group);
	cr_assert_eq(gid_of(fan), o.group);
	cr_assert_eq(gid_of(blob), o.group, "a blob staged in tmp/ has the store's group");
	cr_assert(st_store_shared(s, &g));
	cr_assert_eq(g, o.group);
	st_store_close(s);
	/* Reopened, the store still knows (STORE/format records it). */
	cr_assert_eq(st_store_open(th_path("g"), ST_OPEN_RDONLY, &s), 0);
	cr_assert(st_store_shared(s, &g));
	cr_assert_eq(st_store_perm(s, ST_PERM_RO), 0440);
	st_store_close(s);
}

Test(perms, init_shared_of_an_existing_private_store_is_refused)
{
	struct st_store_opts o = { .shared = true, .group = test_group() };

	cr_assert_eq(st_store_init(th_path("p"), NULL), 0);
	cr_assert_eq(st_store_init(th_path("p"), &o), -EEXIST);
	cr_assert_eq(st_store_init(th_path("p"), NULL), 0, "a plain init still changes nothing");
	cr_assert_eq(mode_of("p"), 0700);
}

Test(perms, a_format_file_with_a_bad_shared_line_is_refused)
{
	static const char *const bad[] = {
		"strata-store 1\nsync full\nshared\n",
		"strata-store 1\nsync full\nshared x\n",
		"strata-store 1\nsync full\nshared 12 \n",
		"strata-store 1\nsync full\nshared 12\nmore\n",
		"strata-store 1\nsync full\nprivate\n",
	};
	struct st_store *s;

	cr_assert_eq(st_store_init(th_path("p"), NULL), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		chmod(th_path("p/format"), 0600);
		cr_assert_eq(th_write_file(th_path("p/format"), bad[i], strlen(bad[i])), 0);
		cr_assert_eq(st_store_open(th_path("p"), 0, &s), ST_EFORMAT, "case %zu", i);
	}
}

Test(perms, an_export_is_as_private_as_its_store)
{
	char blob[600], why[ST_WHY_LEN];
	struct st_store_opts o = { .shared = true, .group = test_group() };
	struct st_manifest *m;
	static uint8_t img[4 * ST_PAGE_SIZE];

	th_fill(img, sizeof(img), 5);
	mkdir(th_path("out"), 0777);
	chmod(th_path("out"), 0777);
	for (int shared = 0; shared < 2; shared++) {
		struct st_store *s = store_with_blob(shared ? "g" : "p", shared ? &o : NULL, 022, blob, sizeof(blob));
		const char *dir = shared ? "out/g" : "out/p";
		char layers[64], layer[128], hex[ST_ID_HEX_LEN + 1];
		mode_t old = umask(shared ? 077 : 022);
		int rc;

		cr_assert_eq(st_ingest_image(s, img, sizeof(img), NULL, &m, NULL), 0);
		rc = st_snapdir_export(s, m, th_path(dir), why, sizeof(why));
		umask(old);
		cr_assert_eq(rc, 0, "%s", why);
		snprintf(layers, sizeof(layers), "%s/layers", dir);
		st_id_format(&m->layers[0].id, hex);
		snprintf(layer, sizeof(layer), "%s/%s", layers, hex);
		char manifest[64];
		snprintf(manifest, sizeof(manifest), "%s/manifest.json", dir);
		cr_assert_eq(mode_of(dir), shared ? 02750 : 0700);
		cr_assert_eq(mode_of(layers), shared ? 02750 : 0700);
		cr_assert_eq(mode_of(layer), shared ? 0440 : 0400);
		cr_assert_eq(mode_of(manifest), shared ? 0440 : 0400);
		if (shared)
			cr_assert_eq(gid_of(layer), o.group, "the export is the store's group's, not the caller's");
		st_manifest_free(m);
		st_store_close(s);
	}
}

struct seen {
	int n;
	char path[8][64];
	mode_t want[8];
};

static int note(const struct st_exposed *e, void *arg)
{
	struct seen *s = arg;

	if (s->n < 8) {
		snprintf(s->path[s->n], sizeof(s->path[0]), "%s", e->path);
		s->want[s->n] = e->want;
	}
	s->n++;
	return 0;
}

Test(perms, the_check_names_what_an_older_strata_left_readable_and_repair_sets_it)
{
	char blob[600];
	struct st_store *s = store_with_blob("p", NULL, 022, blob, sizeof(blob));
	struct seen seen = { 0 };
	uint64_t n = 99;

	cr_assert_eq(st_store_perm_check(s, 0, note, &seen, &n), 0);
	cr_assert_eq(n, 0, "a new store exposes nothing");
	/* What strata before this check made under umask 022. */
	chmod(th_path("p"), 0755);
	chmod(th_path("p/blobs"), 0755);
	chmod(th_path(blob), 0444);
	cr_assert_eq(st_store_perm_check(s, ST_PERM_CHECK_DIRS, note, &seen, &n), 0);
	cr_assert_eq(n, 2, "directories only: the store and blobs/");
	cr_assert_str_eq(seen.path[0], ".");
	cr_assert_eq(seen.want[0], 0700);
	cr_assert_str_eq(seen.path[1], "blobs");
	memset(&seen, 0, sizeof(seen));
	cr_assert_eq(st_store_perm_check(s, 0, note, &seen, &n), 0);
	cr_assert_eq(n, 3);
	cr_assert_str_eq(seen.path[2], blob + 2, "the blob, by its path in the store");
	cr_assert_eq(seen.want[2], 0400);
	cr_assert_eq(mode_of("p/blobs"), 0755, "checking changes nothing");
	cr_assert_eq(st_store_perm_check(s, ST_PERM_CHECK_FIX, note, &seen, &n), 0);
	cr_assert_eq(n, 3);
	cr_assert_eq(mode_of("p"), 0700);
	cr_assert_eq(mode_of(blob), 0400);
	cr_assert_eq(st_store_perm_check(s, 0, note, &seen, &n), 0);
	cr_assert_eq(n, 0, "repaired");
	st_store_close(s);
}

Test(perms, in_a_shared_store_the_check_allows_group_read_and_nothing_more)
{
	struct st_store_opts o = { .shared = true, .group = test_group() };
	char blob[600];
	struct st_store *s = store_with_blob("g", &o, 022, blob, sizeof(blob));
	struct seen seen = { 0 };
	uint64_t n = 99;

	cr_assert_eq(st_store_perm_check(s, 0, note, &seen, &n), 0);
	cr_assert_eq(n, 0);
	chmod(th_path(blob), 0444); /* others may read */
	chmod(th_path("g/blobs"), 02770); /* the group may write */
	cr_assert_eq(st_store_perm_check(s, 0, note, &seen, &n), 0);
	cr_assert_eq(n, 2);
	cr_assert_eq(seen.want[0], 02750);
	cr_assert_eq(seen.want[1], 0440);
	st_store_close(s);
}
