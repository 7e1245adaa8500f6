/* strictenv.c -- kamepool.oom: KAME_POOL_STRICT_CAP=1 in the
   environment selects the strict cap policy at start-up.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

/* kptest-env: KAME_POOL_STRICT_CAP=1 */

#include <errno.h>

#include "kame_pool.h"
#include "kptest.h"

KT_TEST (oom_cap_strict_env)
{
  kame_pool_free (kame_pool_malloc (1));
  KT_CHECK_EQ (kame_pool_get_cap_policy (), KAME_POOL_CAP_STRICT);
  kame_pool_set_max_bytes (kame_pool_reserved_bytes ());
  void *b[200];
  size_t n = 0;
  errno = 0;
  while (n < 200 && (b[n] = kame_pool_malloc ((size_t) 1 << 20)) != NULL)
    {
      KT_CHECK (kame_pool_malloc_usable_size (b[n]) != 0);
      n++;
    }
  KT_CHECK (n < 200);
  KT_CHECK_EQ (errno, ENOMEM);
  while (n > 0)
    kame_pool_free (b[--n]);
}

KT_MAIN (KT_CASE (oom_cap_strict_env))
