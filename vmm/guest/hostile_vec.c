/* hostile_vec.c: the hostile guest's vector-register channels (x87/SSE/AVX/AVX-512 state outside guest memory). */
#include <stdint.h>

#include "include/strata_guest.h"
