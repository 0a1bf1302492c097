/* manifest.c: the snapshot manifest: strict JSON parsing, validation, canonical encoding and id. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_int.h"

int st_manifest_new(struct st_manifest **out)
{
	struct st_manifest *m = st_sys_calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	m->version = ST_MANIFEST_VERSION;
	*out = m;
	return 0;
}

void st_manifest_free(struct st_manifest *m)
{
	if (!m)
		return;
	free(m->layers);
	free(m->ranges);
	free(m->guest);
	free(m->vcpu);
	for (size_t i = 0; i < m->nlabels; i++) {
		free(m->labels[i].key);
		free(m->labels[i].value);
	}
	free(m->labels);
	free(m);
}

int st_manifest_dup(const struct st_manifest *m, struct st_manifest **out) { (void)m; (void)out; return -ENOSYS; }
int st_manifest_validate(const struct st_manifest *m, char *why, size_t whylen) { (void)m; return st_why(why, whylen, -ENOSYS, "not implemented"); }
int st_manifest_parse(const char *json, size_t len, struct st_manifest **out, char *why, size_t whylen) { (void)json; (void)len; (void)out; return st_why(why, whylen, -ENOSYS, "not implemented"); }
int st_manifest_encode(const struct st_manifest *m, char **json, size_t *len, char *why, size_t whylen) { (void)m; (void)json; (void)len; return st_why(why, whylen, -ENOSYS, "not implemented"); }
int st_manifest_id(const struct st_manifest *m, st_id *id, char *why, size_t whylen) { (void)m; (void)id; return st_why(why, whylen, -ENOSYS, "not implemented"); }
uint64_t st_manifest_layer_pages(const struct st_manifest *m) { uint64_t n = 0; for (uint32_t i = 0; i < m->nlayers; i++) n += m->layers[i].pages; return n; }
int st_manifest_lookup(const struct st_manifest *m, uint64_t gpage, uint32_t *layer, uint64_t *lpage) { (void)m; (void)gpage; (void)layer; (void)lpage; return -ENOSYS; }
