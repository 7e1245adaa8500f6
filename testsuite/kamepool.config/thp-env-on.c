/* thp-env-on.c -- KAME_POOL_HUGEPAGE=1 advises the pool's regions
   MADV_HUGEPAGE in every configuration.
   kptest-env: KAME_POOL_HUGEPAGE=1

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <string.h>

#include "kame_pool.h"
#include "kptest.h"
#include "smaps.h"

KT_TEST (thp_env_1_advises)
{
  KT_CHECK_EQ (kame_pool_get_thp_policy (), KAME_POOL_THP_ALWAYS);
  char *p = kame_pool_malloc ((size_t) 4 << 20);
  KT_CHECK (p != NULL);
  memset (p, 1, (size_t) 4 << 20);
  struct kpc_vma v;
  KT_CHECK (kpc_vma_of (p, &v));
  if (!kpc_has_flag (&v, "hg"))
    KT_FAILF ("VmFlags%s", v.flags);
  kame_pool_free (p);
}

KT_MAIN (KT_CASE (thp_env_1_advises))
