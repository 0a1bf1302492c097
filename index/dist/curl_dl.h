/* curl_dl.h: libcurl through a table of its functions, loaded on the first registry call (store/dl.h). */
#ifndef STRATA_INDEX_DIST_CURL_DL_H
#define STRATA_INDEX_DIST_CURL_DL_H

/* the table holds plain function pointers: curl's type-checking macros would
 * wrap calls made through it in the same names */
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>

/*
 * registry.c includes this instead of <curl/curl.h> and calls curl by its own
 * names: each is a macro calling through ix_curl. curl_global_init, which every
 * registry user calls first (ix_registry_global_init), loads the table; when
 * libcurl cannot be loaded it returns CURLE_FAILED_INIT and ix_curl_why()
 * says why. Nothing else here runs before the table is loaded.
 */
struct ix_curl {
	__typeof__(curl_global_init) *global_init;
	__typeof__(curl_easy_init) *easy_init;
	__typeof__(curl_easy_cleanup) *easy_cleanup;
	__typeof__(curl_easy_reset) *easy_reset;
	__typeof__(curl_easy_setopt) *easy_setopt;
	__typeof__(curl_easy_getinfo) *easy_getinfo;
	__typeof__(curl_easy_perform) *easy_perform;
	__typeof__(curl_easy_strerror) *easy_strerror;
	__typeof__(curl_easy_escape) *easy_escape;
	__typeof__(curl_free) *free;
	__typeof__(curl_slist_append) *slist_append;
	__typeof__(curl_slist_free_all) *slist_free_all;
	__typeof__(curl_share_init) *share_init;
	__typeof__(curl_share_setopt) *share_setopt;
	__typeof__(curl_share_cleanup) *share_cleanup;
};
extern struct ix_curl ix_curl;

/* 0 when the table is loaded, else -ELIBACC. */
int ix_curl_load(void);
const char *ix_curl_why(void);

#define curl_global_init(flags) (ix_curl_load() < 0 ? CURLE_FAILED_INIT : ix_curl.global_init(flags))
#define curl_easy_init() ix_curl.easy_init()
#define curl_easy_cleanup(h) ix_curl.easy_cleanup(h)
#define curl_easy_reset(h) ix_curl.easy_reset(h)
/* curl.h defines these two as macros of themselves */
#undef curl_easy_setopt
#undef curl_easy_getinfo
#define curl_easy_setopt(...) ix_curl.easy_setopt(__VA_ARGS__)
#define curl_easy_getinfo(...) ix_curl.easy_getinfo(__VA_ARGS__)
#define curl_easy_perform(h) ix_curl.easy_perform(h)
#define curl_easy_strerror(c) ix_curl.easy_strerror(c)
#define curl_easy_escape(h, s, n) ix_curl.easy_escape(h, s, n)
#define curl_free(p) ix_curl.free(p)
#define curl_slist_append(l, s) ix_curl.slist_append(l, s)
#define curl_slist_free_all(l) ix_curl.slist_free_all(l)
#define curl_share_init() ix_curl.share_init()
#undef curl_share_setopt
#define curl_share_setopt(...) ix_curl.share_setopt(__VA_ARGS__)
#define curl_share_cleanup(s) ix_curl.share_cleanup(s)

#endif
