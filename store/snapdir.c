/* snapdir.c: the portable snapshot directory: read, verify and export. */
#include <errno.h>

#include "store/store_int.h"

int st_snapdir_read(const char *dir, struct st_manifest **out, char *why, size_t whylen) { (void)dir; (void)out; return st_why(why, whylen, -ENOSYS, "not implemented"); }
int st_snapdir_layer_open(const char *dir, const st_id *id, int *fd) { (void)dir; (void)id; (void)fd; return -ENOSYS; }
int st_snapdir_verify(const char *dir, const struct st_manifest *m, char *why, size_t whylen) { (void)dir; (void)m; return st_why(why, whylen, -ENOSYS, "not implemented"); }
int st_snapdir_export(struct st_store *s, const struct st_manifest *m, const char *dir, char *why, size_t whylen) { (void)s; (void)m; (void)dir; return st_why(why, whylen, -ENOSYS, "not implemented"); }
