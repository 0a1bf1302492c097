/* test_hostile_vec.c: the hostile guest's vector-register channels (vmm/guest/hostile_vec.c) on each backend. */
#include <criterion/criterion.h>

#include "helpers.h"
