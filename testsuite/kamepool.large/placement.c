/* placement.c -- kamepool.large tests of where chunks go in a region:
   small chunks from the top of a claim word down, dedicated chunks
   from the region's bottom up, and a small chunk does not take the
   resident free units that a dedicated chunk left, which the next
   dedicated chunk of that size takes back whole.  Blocks of 1 MiB are
   dedicated chunks of 4 units of 256 KiB; blocks of 12352 bytes (a
   size class) come from small chunks of two units.

   Guarded sampling is off: these tests assert where the pool places
   blocks and what it counts, and a guarded block is not the pool's.
   kptest-env: KAME_POOL_GUARD_SAMPLE=0

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#define _GNU_SOURCE 1

#include <stdint.h>
#include <string.h>

#include "kame_pool.h"
#include "kptest.h"
#include "kptest-pool.h"

#define KiB ((size_t) 1 << 10)
#define MiB ((size_t) 1 << 20)
#define UNIT ((uintptr_t) 256 * KiB)
#define REGION ((uintptr_t) 32 * MiB)
#define SMALL ((size_t) 12352)

/* The unit of its region that P lies in, 0 to 127.  */
static unsigned
unit_of (const void *p)
{
  return (unsigned) (((uintptr_t) p & (REGION - 1)) / UNIT);
}

static size_t
dirty (void)
{
  return kt_pool_stats ().dirty_bytes;
}

/* In this process only small chunks were claimed before (the test
   harness's and the C library's blocks, a dozen units at the top of
   the region's first claim word): the first dedicated chunk takes the
   lowest free run, right after the region's header unit, and the
   first small chunk of a class nobody used yet the highest free unit
   of that word, in its upper half, below the others.  */
KT_TEST (dedicated_chunks_fill_a_region_from_the_bottom_small_from_the_top)
{
  kame_pool_stats_t s = kt_pool_stats ();
  size_t k = kt_pool_class (&s, SMALL);
  KT_CHECK (k != SIZE_MAX);
  KT_CHECK_EQ (s.classes[k].chunks, 0);
  KT_CHECK_EQ (s.dedicated_chunk_bytes, 0);
  char *d = kame_pool_malloc (1 * MiB);
  char *b = kame_pool_malloc (SMALL);
  KT_CHECK (d != NULL && b != NULL);
  KT_CHECK_EQ ((uintptr_t) d / REGION, (uintptr_t) b / REGION);
  KT_CHECK_EQ (unit_of (d), 1);
  KT_CHECK (unit_of (b) >= 32 && unit_of (b) < 64);
  kame_pool_free (b);
  kame_pool_free (d);
}

/* A freed dedicated chunk that the cache does not keep (cap 0) goes
   back to its region with its pages resident.  A new small chunk then
   claims other units, not these: the dirty bytes stay 1 MiB; and the
   next dedicated block of 1 MiB gets the same four units back, with
   their pages, so none is left dirty.  Were the small chunk to take
   the first of them, the second dedicated chunk would fault in four
   new units and 768 KiB would stay dirty.  */
KT_TEST (a_small_chunk_leaves_the_resident_units_a_dedicated_chunk_left)
{
  size_t cap = kame_pool_get_large_cache_cap ();
  kame_pool_stats_t s = kt_pool_stats ();
  size_t k = kt_pool_class (&s, SMALL);
  KT_CHECK (k != SIZE_MAX);
  KT_CHECK_EQ (s.classes[k].chunks, 0);
  KT_CHECK_EQ (kame_pool_set_large_cache_cap (0), 0);
  kame_pool_trim (0);
  KT_CHECK_EQ (dirty (), 0);

  char *d = kame_pool_malloc (1 * MiB);
  KT_CHECK (d != NULL);
  memset (d, 1, 1 * MiB);
  kame_pool_free (d);
  KT_CHECK_EQ (dirty (), 1 * MiB);

  char *b = kame_pool_malloc (SMALL);
  KT_CHECK (b != NULL);
  KT_CHECK ((uintptr_t) b - (uintptr_t) d >= 1 * MiB);
  KT_CHECK_EQ (kt_pool_stats ().classes[k].chunks, 1);
  KT_CHECK_EQ (dirty (), 1 * MiB);

  char *d2 = kame_pool_malloc (1 * MiB);
  KT_CHECK_PTR_EQ (d2, d);
  KT_CHECK_EQ (dirty (), 0);
  kame_pool_free (d2);
  kame_pool_free (b);
  KT_CHECK_EQ (kame_pool_set_large_cache_cap (cap), 0);
}

KT_MAIN (KT_CASE (dedicated_chunks_fill_a_region_from_the_bottom_small_from_the_top),
         KT_CASE (a_small_chunk_leaves_the_resident_units_a_dedicated_chunk_left))
