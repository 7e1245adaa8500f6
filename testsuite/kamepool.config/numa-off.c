/* numa-off.c -- KAME_POOL_NUMA=off: one region list, no binding.
   kptest-requires: numa
   kptest-env: KAME_POOL_NUMA=off

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#define _GNU_SOURCE 1  /* getcpu, CPU_SET, RTLD_NOLOAD */

#include <string.h>

#include "kame_pool.h"
#include "kptest.h"
#include "numa.h"

KT_TEST (numa_off_no_policy)
{
  char *p = kame_pool_malloc ((size_t) 1 << 20);
  KT_CHECK (p != NULL);
  memset (p, 1, 4096);
  unsigned long mask;
  KT_CHECK_EQ (kpc_policy_of (p, &mask), 0 /* MPOL_DEFAULT */);
  size_t per[4] = { 7, 7, 7, 7 };
  KT_CHECK_EQ (kame_pool_get_numa_stats (per, 4), 1);
  KT_CHECK_EQ (per[0], kame_pool_reserved_bytes () >> 25);
  KT_CHECK_EQ (per[1], 0);
  KT_CHECK_EQ (per[3], 0);
  KT_CHECK_EQ (kame_pool_get_numa_stats (NULL, 4), 1);
  kame_pool_free (p);
}

KT_MAIN (KT_CASE (numa_off_no_policy))
