/* stats.c -- kame_pool_get_stats: a walk over the regions plus the
   large-tier counters.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   The walk reads claim bits and descriptor kinds with relaxed loads
   while other threads claim and release: each number is exact when no
   other thread allocates, and a close approximation otherwise.  */

#include <config.h>

#include "kp_internal.h"

void
kame_pool_get_stats (kame_pool_stats_t *s)
{
  if (s == NULL)
    return;
  unsigned want = s->version;
  s->version_supported = KAME_POOL_STATS_VERSION;
  if (want < 1)
    return;
  size_t regions = 0, chunks = 0, units = 0, dedicated = 0;
  for (kp_region_t *r = kp_region_first (); r != NULL;
       r = atomic_load_explicit (&r->next, memory_order_acquire))
    {
      regions++;
      for (unsigned w = 0; w < KP_CLAIM_WORDS; w++)
        units += (size_t) __builtin_popcountll
          (atomic_load_explicit (&r->claim[w], memory_order_relaxed));
      units--;                  /* unit 0, the metadata */
      for (unsigned u = 1; u < KP_UNITS; u++)
        {
          unsigned kind = atomic_load_explicit (&r->desc[u].kind,
                                                memory_order_relaxed);
          if (kind == KP_KIND_NONE)
            continue;
          if (kind == KP_KIND_CACHED)
            {
              /* Claimed, but free memory the cache holds.  */
              units -= atomic_load_explicit (&r->desc[u].units,
                                             memory_order_relaxed);
              continue;
            }
          chunks++;
          if (kind == KP_KIND_DEDICATED)
            dedicated += (size_t) atomic_load_explicit (&r->desc[u].units,
                                                        memory_order_relaxed)
                         << KP_UNIT_SHIFT;
        }
    }
  s->regions_populated = regions;
  s->bytes_reserved = regions * KP_REGION_SIZE;
  s->chunks_live = chunks;
  s->units_live = units;
  if (want < 2)
    return;
  s->cache_bytes = kp_cache_bytes ();
  s->dedicated_chunk_bytes = dedicated;
  kp_large_stats (&s->large_alloc_count, &s->large_alloc_bytes);
}
