/* dl.c: load a shared library on first use from its absolute build-time path (store/dl.h). */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "store/dl.h"

static pthread_mutex_t dl_lock = PTHREAD_MUTEX_INITIALIZER;

static int dl_open(struct st_dl *dl)
{
	void *h;

	if (dl->path[0] != '/') {
		snprintf(dl->why, sizeof(dl->why), "%s: not an absolute path", dl->path);
		return -ELIBACC;
	}
	if (!(h = dlopen(dl->path, RTLD_NOW | RTLD_LOCAL))) {
		snprintf(dl->why, sizeof(dl->why), "%s", dlerror());
		return -ELIBACC;
	}
	for (size_t i = 0; i < dl->n; i++) {
		void *f = dlsym(h, dl->syms[i]);

		if (!f) {
			snprintf(dl->why, sizeof(dl->why), "%s: no symbol %s", dl->path, dl->syms[i]);
			return -ELIBACC; /* h stays open: a later call reports the same reason */
		}
		memcpy((char *)dl->fns + i * sizeof(f), &f, sizeof(f));
	}
	return 0;
}

int st_dl_load(struct st_dl *dl)
{
	if (__atomic_load_n(&dl->done, __ATOMIC_ACQUIRE))
		return dl->rc;
	pthread_mutex_lock(&dl_lock);
	if (!dl->done) {
		dl->rc = dl_open(dl);
		__atomic_store_n(&dl->done, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&dl_lock);
	return dl->rc;
}
