/* test_oci.c: resumable blob puts, sha256 digests, and the OCI manifest / index.json codecs. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store.h"
#include "tests/store/helpers.h"

TestSuite(oci, .init = th_setup_store, .fini = th_teardown);

static void feed(void *ctx, const void *buf, size_t len)
{
	*(size_t *)ctx += len;
}

Test(oci, a_suspended_put_resumes_with_its_prefix_and_publishes_once_whole)
{
	static char data[3 * 4096];
	struct st_blob_writer *w, *w2;
	size_t seen = 0;
	st_id want, got;
	bool dedup;

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)(i * 7 + 3);
	st_id_hash(data, sizeof(data), &want);
	cr_assert_eq(st_blob_writer_resume(th_store, "pull-x", feed, &seen, &w), 0);
	cr_assert_eq(st_blob_writer_size(w), 0);
	cr_assert_eq(st_blob_writer_resume(th_store, "pull-x", NULL, NULL, &w2), -EBUSY, "one writer per name");
	cr_assert_eq(st_blob_writer_write(w, data, 5000), 0);
	cr_assert_eq(st_blob_writer_suspend(w), 0);
	cr_assert_not(st_blob_has(th_store, &want), "nothing is published before commit");

	cr_assert_eq(st_blob_writer_resume(th_store, "pull-x", feed, &seen, &w), 0);
	cr_assert_eq(st_blob_writer_size(w), 5000);
	cr_assert_eq(seen, 5000, "the prefix is handed to the caller's digest");
	cr_assert_eq(st_blob_writer_write(w, data + 5000, sizeof(data) - 5000), 0);
	cr_assert_eq(st_blob_writer_commit(w, &want, &got, &dedup), 0);
	cr_assert(st_id_equal(&want, &got));
	cr_assert_not(dedup);
	cr_assert_eq(st_blob_verify(th_store, &want), 0);
	cr_assert_eq(access(th_path("store/tmp/part.pull-x"), F_OK), -1, "the part file became the blob");
}

Test(oci, a_resumed_put_with_wrong_bytes_is_refused_and_its_part_removed)
{
	struct st_blob_writer *w;
	st_id want;

	st_id_hash("right", 5, &want);
	cr_assert_eq(st_blob_writer_resume(th_store, "pull-y", NULL, NULL, &w), 0);
	cr_assert_eq(st_blob_writer_write(w, "wrong", 5), 0);
	cr_assert_eq(st_blob_writer_commit(w, &want, NULL, NULL), ST_ECORRUPT);
	cr_assert_eq(access(th_path("store/tmp/part.pull-y"), F_OK), -1);
	cr_assert_eq(st_blob_writer_resume(th_store, "../escape", NULL, NULL, &w), -EINVAL, "names follow the name rule");
}

Test(oci, digests_have_one_spelling)
{
	uint8_t sha[ST_SHA256_LEN];
	char dg[ST_DIGEST_LEN + 1];

	st_sha256_hash("abc", 3, sha);
	st_digest_format(sha, dg);
	cr_assert_str_eq(dg, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	cr_assert_eq(st_digest_parse(dg, sha), 0);
	cr_assert_eq(st_digest_parse("sha256:BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD", sha),
		     ST_EBADID);
	cr_assert_eq(st_digest_parse("sha512:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", sha),
		     ST_EBADID);
	cr_assert_eq(st_digest_parse("sha256:ba78", sha), ST_EBADID);
}

static struct st_oci_manifest *sample(void)
{
	struct st_oci_manifest *om = calloc(1, sizeof(*om));

	om->config.size = 100;
	om->config.has_id = true;
	st_id_hash("config", 6, &om->config.id);
	st_sha256_hash("config", 6, om->config.sha256);
	om->nlayers = 2;
	om->layers = calloc(2, sizeof(*om->layers));
	for (int i = 0; i < 2; i++) {
		om->layers[i].size = 4096u * (unsigned)(i + 1);
		om->layers[i].has_id = true;
		st_id_hash(&i, sizeof(i), &om->layers[i].id);
		st_sha256_hash(&i, sizeof(i), om->layers[i].sha256);
	}
	om->has_subject = true;
	om->subject.size = 7;
	st_sha256_hash("parent", 6, om->subject.sha256);
	return om;
}

Test(oci, a_manifest_round_trips_and_encodes_deterministically)
{
	struct st_oci_manifest *om = sample(), *back;
	char *a, *b, why[ST_WHY_LEN];
	size_t la, lb;

	cr_assert_eq(st_oci_manifest_encode(om, &a, &la), 0);
	cr_assert_eq(st_oci_manifest_parse(a, la, &back, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(back->nlayers, 2);
	cr_assert(back->has_subject);
	cr_assert_eq(memcmp(back->layers[1].sha256, om->layers[1].sha256, ST_SHA256_LEN), 0);
	cr_assert(st_id_equal(&back->layers[1].id, &om->layers[1].id));
	cr_assert_eq(st_oci_manifest_encode(back, &b, &lb), 0);
	cr_assert_eq(la, lb);
	cr_assert_eq(memcmp(a, b, la), 0, "equal content, equal bytes, equal digest");
	free(a);
	free(b);
	st_oci_manifest_free(om);
	st_oci_manifest_free(back);
}

/* Parse text that must be refused, with a reason containing want. */
static void refused(const char *json, const char *want)
{
	struct st_oci_manifest *om;
	char why[ST_WHY_LEN] = "";

	cr_assert_eq(st_oci_manifest_parse(json, strlen(json), &om, why, sizeof(why)), ST_EFORMAT, "accepted: %s", json);
	cr_assert(strstr(why, want), "reason '%s' lacks '%s'", why, want);
}

Test(oci, manifests_that_are_not_strata_snapshots_are_refused_with_a_reason)
{
	struct st_oci_manifest *om = sample();
	char *a, *p;
	size_t la;

	cr_assert_eq(st_oci_manifest_encode(om, &a, &la), 0);
	refused("[]", "not a JSON object");
	refused("{\"schemaVersion\":1}", "schemaVersion");
	refused("{\"schemaVersion\":2,\"artifactType\":\"application/x\"}", "not a strata snapshot");
	refused("{\"schemaVersion\":2,\"config\":{}}", "not a strata snapshot");
	p = strdup(a);
	memcpy(strstr(p, "vnd.strata.layer"), "vnd.strata.LAYER", 16);
	refused(p, "media type");
	free(p);
	p = strdup(a);
	memcpy(strstr(p, ST_OCI_ANN_ID), "dev.strata.xx", 13);
	refused(p, "annotation");
	free(p);
	p = strdup(a);
	*strstr(p, "sha256:") = 'S';
	refused(p, "digest");
	free(p);
	free(a);
	st_oci_manifest_free(om);
}

Test(oci, the_config_must_match_the_oci_layers)
{
	struct st_oci_manifest *om = sample();
	struct st_manifest *m;
	char why[ST_WHY_LEN] = "";
	st_id id;

	cr_assert_eq(st_manifest_new(&m), 0);
	m->mem_size = 4 * 4096;
	m->nlayers = 1;
	m->layers = calloc(1, sizeof(*m->layers));
	m->layers[0].id = om->layers[0].id;
	m->layers[0].pages = 1;
	m->nranges = 1;
	m->ranges = calloc(1, sizeof(*m->ranges));
	m->ranges[0] = (struct st_range){ 0, 1, 0, 0 };
	cr_assert_eq(st_manifest_id(m, &id, why, sizeof(why)), 0, "%s", why);
	om->config.id = id;
	cr_assert_eq(st_oci_manifest_check(om, m, why, sizeof(why)), ST_EFORMAT);
	cr_assert(strstr(why, "carries 2 layer(s)"), "%s", why);
	om->nlayers = 1;
	cr_assert_eq(st_oci_manifest_check(om, m, why, sizeof(why)), 0, "%s", why);
	om->layers[0].size = 8192;
	cr_assert_eq(st_oci_manifest_check(om, m, why, sizeof(why)), ST_EFORMAT);
	om->layers[0].size = 4096;
	st_id_hash("x", 1, &om->config.id);
	cr_assert_eq(st_oci_manifest_check(om, m, why, sizeof(why)), ST_EFORMAT);
	om->nlayers = 2;
	st_oci_manifest_free(om);
	st_manifest_free(m);
}

Test(oci, index_json_round_trips_names_and_types)
{
	struct st_oci_ref in[2] = { 0 }, *out;
	char *json, why[ST_WHY_LEN];
	size_t len, n;

	st_sha256_hash("a", 1, in[0].sha256);
	in[0].size = 10;
	in[0].name = "v1";
	st_sha256_hash("b", 1, in[1].sha256);
	in[1].size = 20;
	cr_assert_eq(st_oci_index_encode(in, 2, &json, &len), 0);
	cr_assert_eq(st_oci_index_parse(json, len, &out, &n, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(n, 2);
	cr_assert_str_eq(out[0].name, "v1");
	cr_assert_null(out[1].name);
	cr_assert(out[0].ours && out[1].ours);
	cr_assert_eq(out[1].size, 20);
	st_oci_refs_free(out, n);
	free(json);
	const char *other = "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
			    "\"artifactType\":\"application/x\",\"digest\":\"sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\",\"size\":1}]}";
	cr_assert_eq(st_oci_index_parse(other, strlen(other), &out, &n, why, sizeof(why)), 0);
	cr_assert_not(out[0].ours);
	st_oci_refs_free(out, n);
}
