/* cache.c -- the recycle cache of large blocks: freed dedicated chunks
   and mappings kept for reuse, per thread first and then process-wide.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   This first version keeps nothing: draining it releases nothing.  */

#include <config.h>

#include "kp_internal.h"

bool
kp_cache_drain (void)
{
  return false;
}
