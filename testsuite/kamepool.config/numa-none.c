/* numa-none.c -- a build without NUMA support ignores KAME_POOL_NUMA:
   one node, no binding.
   kptest-requires: no-numa
   kptest-env: KAME_POOL_NUMA=on KAME_POOL_TEST_NODES=2

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#define _GNU_SOURCE 1  /* getcpu, CPU_SET, RTLD_NOLOAD */

#include <string.h>

#include "kame_pool.h"
#include "kptest.h"
#include "numa.h"

KT_TEST (numa_none_ignores_env)
{
  char *p = kame_pool_malloc ((size_t) 1 << 20);
  KT_CHECK (p != NULL);
  memset (p, 1, 4096);
  unsigned long mask;
  KT_CHECK_EQ (kpc_policy_of (p, &mask), 0 /* MPOL_DEFAULT */);
  size_t per[2] = { 5, 5 };
  KT_CHECK_EQ (kame_pool_get_numa_stats (per, 2), 1);
  KT_CHECK_EQ (per[0], kame_pool_reserved_bytes () >> 25);
  KT_CHECK_EQ (per[1], 0);
  kame_pool_free (p);
}

KT_MAIN (KT_CASE (numa_none_ignores_env))
