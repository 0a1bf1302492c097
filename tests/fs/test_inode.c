/* test_inode.c: the node table: stable inode numbers, unique node ids, lookup counting. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "fs/fs_int.h"

static st_id make_id(unsigned char v)
{
	st_id id;

	memset(id.b, v, sizeof(id.b));
	return id;
}

Test(fs, top_dirs_have_fixed_inodes)
{
	struct fs_key k = { .kind = FS_K_ROOT };

	cr_assert_eq(fs_ino_stable(&k), FS_INO_ROOT);
	k.kind = FS_K_SNAPSHOTS;
	cr_assert_eq(fs_ino_stable(&k), FS_INO_SNAPSHOTS);
	k.kind = FS_K_BLOBS;
	cr_assert_eq(fs_ino_stable(&k), FS_INO_BLOBS);
	k.kind = FS_K_MEMORY;
	cr_assert_eq(fs_ino_stable(&k), FS_INO_MEMORY);
}

Test(fs, stable_inode_depends_on_kind_id_and_name_only)
{
	struct fs_key a = { .kind = FS_K_BLOB, .id = make_id(1) };
	struct fs_key b = a;
	struct fs_key c = { .kind = FS_K_MANIFEST, .id = make_id(1) };
	struct fs_key d = { .kind = FS_K_SNAPDIR, .id = make_id(1), .name = "x" };
	struct fs_key e = { .kind = FS_K_SNAPDIR, .id = make_id(1), .name = "y" };

	cr_assert_eq(fs_ino_stable(&a), fs_ino_stable(&b));
	cr_assert_neq(fs_ino_stable(&a), fs_ino_stable(&c));
	cr_assert_neq(fs_ino_stable(&d), fs_ino_stable(&e));
	cr_assert_geq(fs_ino_stable(&a), FS_INO_FIRST_DYNAMIC);
}

Test(fs, acquire_same_key_returns_same_node_and_counts)
{
	struct fs_itable *t;
	struct fs_node *n1, *n2;
	struct fs_key k = { .kind = FS_K_BLOB, .id = make_id(7) };

	cr_assert_eq(fs_itable_new(NULL, NULL, &t), 0);
	cr_assert_eq(fs_itable_acquire(t, &k, NULL, NULL, &n1), 0);
	cr_assert_eq(fs_itable_acquire(t, &k, NULL, NULL, &n2), 0);
	cr_assert_eq(n1, n2);
	cr_assert_eq(n1->nlookup, 2);
	cr_assert_eq(fs_itable_get(t, n1->ino), n1);
	uint64_t ino = n1->ino;
	fs_itable_forget(t, ino, 1);
	cr_assert_eq(fs_itable_get(t, ino), n1);
	fs_itable_forget(t, ino, 1);
	cr_assert_null(fs_itable_get(t, ino));
	cr_assert_eq(fs_itable_count(t), 0);
	fs_itable_free(t);
}

Test(fs, node_ids_are_never_reused)
{
	struct fs_itable *t;
	struct fs_node *n;
	struct fs_key k = { .kind = FS_K_BLOB, .id = make_id(9) };

	cr_assert_eq(fs_itable_new(NULL, NULL, &t), 0);
	cr_assert_eq(fs_itable_acquire(t, &k, NULL, NULL, &n), 0);
	uint64_t first = n->ino;
	fs_itable_forget(t, first, 1);
	cr_assert_eq(fs_itable_acquire(t, &k, NULL, NULL, &n), 0);
	cr_assert_neq(n->ino, first);
	cr_assert_eq(n->st_ino, fs_ino_stable(&k)); /* what stat shows stays the same */
	fs_itable_free(t);
}

Test(fs, pinned_top_dirs_survive_forget)
{
	struct fs_itable *t;
	struct fs_node *n;
	struct fs_key k = { .kind = FS_K_ROOT };

	cr_assert_eq(fs_itable_new(NULL, NULL, &t), 0);
	cr_assert_eq(fs_itable_acquire(t, &k, NULL, NULL, &n), 0);
	cr_assert_eq(n->ino, FS_INO_ROOT);
	fs_itable_forget(t, FS_INO_ROOT, 100);
	cr_assert_eq(fs_itable_get(t, FS_INO_ROOT), n);
	fs_itable_free(t);
}

static void count_release(struct fs_node *n, void *ctx)
{
	(*(int *)ctx)++;
}

Test(fs, table_grows_past_many_nodes_and_releases_each)
{
	struct fs_itable *t;
	int released = 0;
	enum { N = 5000 };
	uint64_t inos[N];

	cr_assert_eq(fs_itable_new(count_release, &released, &t), 0);
	for (int i = 0; i < N; i++) {
		struct fs_key k = { .kind = FS_K_BLOB };
		struct fs_node *n;
		memcpy(k.id.b, &i, sizeof(i));
		cr_assert_eq(fs_itable_acquire(t, &k, NULL, NULL, &n), 0);
		inos[i] = n->ino;
	}
	cr_assert_eq(fs_itable_count(t), N);
	for (int i = 0; i < N; i++)
		cr_assert_not_null(fs_itable_get(t, inos[i]));
	for (int i = 0; i < N / 2; i++)
		fs_itable_forget(t, inos[i], 1);
	cr_assert_eq(released, N / 2);
	fs_itable_free(t);
	cr_assert_eq(released, N);
}
