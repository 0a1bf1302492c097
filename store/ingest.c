/* ingest.c: build a layer and manifest from a raw memory image, storing only changed non-zero pages. */
#include <errno.h>

#include "store/store_int.h"

int st_ingest_image(struct st_store *s, const void *image, uint64_t size, const struct st_manifest *parent,
		    struct st_manifest **out, struct st_ingest_stats *stats) { (void)s; (void)image; (void)size; (void)parent; (void)out; (void)stats; return -ENOSYS; }
int st_ingest_file(struct st_store *s, const char *path, const struct st_manifest *parent,
		   struct st_manifest **out, struct st_ingest_stats *stats) { (void)s; (void)path; (void)parent; (void)out; (void)stats; return -ENOSYS; }
