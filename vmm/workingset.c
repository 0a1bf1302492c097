/* workingset.c: a snapshot's working set, read from the page tables of a sandbox freshly made from it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store/sys.h"
#include "vmm/snap_int.h"

int vmm_sandbox_working_set(struct vmm_sandbox *sb, struct st_ws **out, uint64_t *mapped)
{
	struct vmm_runs r = { 0 };
	struct st_ws_run *g = NULL;
	uint64_t n = 0;
	int rc;

	if (!sb->ws_fresh || !sb->snap || !sb->snap->m || !sb->snap->has_id)
		return VMM_E_NO_SNAPSHOT;
	if (!sb->be->touched_scan)
		return VMM_E_NO_PAGEMAP;
	if ((rc = sb->be->touched_scan(sb, &r)) < 0)
		goto out_free;
	if (r.n && !(g = st_sys_calloc(r.n, sizeof(*g)))) {
		rc = -ENOMEM;
		goto out_free;
	}
	for (size_t i = 0; i < r.n; i++) {
		g[i] = (struct st_ws_run){ r.v[i].gpage, r.v[i].npages };
		n += r.v[i].npages;
	}
	if ((rc = st_ws_build(sb->snap->m, &sb->snap->id, g, r.n, out)) < 0)
		goto out_free;
	if (mapped)
		*mapped = n;
out_free:
	free(g);
	vmm_runs_free(&r);
	return rc;
}
