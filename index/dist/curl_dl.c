/* curl_dl.c: libcurl loaded on the first registry call (index/dist/curl_dl.h). */
#include "index/dist/curl_dl.h"
#include "store/dl.h"

struct ix_curl ix_curl;

/* in the order of struct ix_curl's members */
static const char *const curl_syms[] = {
	"curl_global_init", "curl_easy_init", "curl_easy_cleanup", "curl_easy_reset", "curl_easy_setopt",
	"curl_easy_getinfo", "curl_easy_perform", "curl_easy_strerror", "curl_easy_escape", "curl_free",
	"curl_slist_append", "curl_slist_free_all", "curl_share_init", "curl_share_setopt", "curl_share_cleanup",
};
_Static_assert(sizeof(curl_syms) / sizeof(curl_syms[0]) * sizeof(void *) == sizeof(struct ix_curl),
	"curl_syms names every member of struct ix_curl");

/* STRATA_LIBCURL: libcurl's absolute path, found when strata was configured (index/meson.build) */
static struct st_dl curl_dl = ST_DL_INIT(STRATA_LIBCURL, curl_syms, &ix_curl,
	sizeof(curl_syms) / sizeof(curl_syms[0]));

int ix_curl_load(void)
{
	return st_dl_load(&curl_dl);
}

const char *ix_curl_why(void)
{
	return curl_dl.why;
}
