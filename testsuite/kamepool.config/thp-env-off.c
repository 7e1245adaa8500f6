/* thp-env-off.c -- KAME_POOL_HUGEPAGE=0 gives no advice, also in an
   --enable-hugepage build.
   kptest-env: KAME_POOL_HUGEPAGE=0

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <string.h>

#include "kame_pool.h"
#include "kptest.h"
#include "smaps.h"

KT_TEST (thp_env_0_no_advice)
{
  KT_CHECK_EQ (kame_pool_get_thp_policy (), KAME_POOL_THP_SYSTEM);
  char *p = kame_pool_malloc ((size_t) 4 << 20);
  KT_CHECK (p != NULL);
  memset (p, 1, (size_t) 4 << 20);
  struct kpc_vma v;
  KT_CHECK (kpc_vma_of (p, &v));
  if (kpc_has_flag (&v, "hg") || kpc_has_flag (&v, "nh"))
    KT_FAILF ("VmFlags%s", v.flags);
  char mode[32];
  if (kpc_thp_mode (mode, sizeof mode) && strcmp (mode, "madvise") == 0)
    KT_CHECK_EQ (v.anon_huge_kb, 0);
  kame_pool_free (p);
}

KT_MAIN (KT_CASE (thp_env_0_no_advice))
