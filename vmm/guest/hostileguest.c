/* hostileguest.c: a guest that tries to keep state across a restore or reach past its memory, one function per channel (tests/vmm/test_hostile.c). */
#include <stdint.h>

#include "include/strata_guest.h"

/*
 * Each channel function follows one convention: it reads the state it
 * hides, adds one, writes it back and returns the new value. A restore
 * that gives back nothing but the snapshot makes every such call after a
 * restore return 1 (or fail with a reason, where the channel is closed by
 * refusing the operation outright); 2 means state survived.
 *
 * The vector-register channels live in hostile_vec.c.
 */

/* The control case: a counter in guest memory, which a restore resets. */
static int64_t memory_counter;

STRATA_FUNCTION(memory_next, "i()")
{
	return strata_ret_i64(c, ++memory_counter);
}
