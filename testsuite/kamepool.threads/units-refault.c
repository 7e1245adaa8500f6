/* units-refault.c -- kamepool.threads test of the room that refaults
   make in the free units' budget: units that a program releases and
   claims again at its peak, which the budget gave back at each release
   and the next claim faulted in again, are kept once they have come
   back a first time.
   No decay pass runs (a delay of ten minutes, and no background
   purge), so that nothing but the budget gives pages back and the
   counts are exact.  Guarded sampling is off: a guarded block is not
   the pool's.
   kptest-env: KAME_POOL_DECAY_MS=600000 KAME_POOL_BACKGROUND_PURGE=0 KAME_POOL_HUGEPAGE=never KAME_POOL_GUARD_SAMPLE=0

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <stdint.h>

#include "kame_pool.h"
#include "kptest.h"
#include "kptest-pool.h"

#define MIB ((size_t) 1 << 20)
#define UNIT_BYTES ((size_t) 256 << 10)
/* Chunks of the working set, each a chunk of 4 units of a shared
   class: 10 blocks of 104448 bytes, or 9 of 115712.  */
#define CHUNKS 32
#define ROUNDS 8

static void *blocks[2][CHUNKS * 10];

static void *
filled (size_t n, int byte)
{
  char *p = kame_pool_malloc (n);
  if (p != NULL)
    memset (p, byte, n);
  return p;
}

/* The working set moves from one class to the other a chunk at a time
   (a chunk's blocks freed, then a chunk of the other class allocated),
   at the program's peak, beside free units that a small chunk cannot
   take (those of four dedicated chunks).  Each released chunk finds
   the budget full (the peak less the units claimed is the chunk
   itself, and the dedicated chunks' units fill the 2 MiB floor), so
   its pages go back, and the next chunk of the other class faults
   them in again: 108 units a round without the room.  With it, the
   first round's refaults raise the floor, and from the second round
   on nothing goes back, and what is faulted in again is only what the
   first round gave back.  */
KT_TEST (units_released_and_claimed_again_at_the_peak_are_kept)
{
  static const size_t size[2] = { 104448, 115712 };
  static const size_t per[2] = { 10, 9 };
  KT_CHECK (kame_pool_trim (0) >= 0);
  /* Eight blocks of 1 MiB, freed: four stay in the thread's large
     cache, four are released and keep their pages as free units.  */
  void *d[8];
  for (size_t i = 0; i < 8; i++)
    KT_CHECK ((d[i] = filled (MIB, 1)) != NULL);
  for (size_t i = 0; i < CHUNKS * per[0]; i++)
    KT_CHECK ((blocks[0][i] = filled (size[0], 1)) != NULL);
  for (size_t i = 0; i < 8; i++)
    kame_pool_free (d[i]);
  /* Back to the peak, with chunks of a third class.  */
  void *z[44];
  for (size_t i = 0; i < 44; i++)
    KT_CHECK ((z[i] = filled (95232, 1)) != NULL);
  KT_CHECK (kt_pool_stats ().dirty_bytes >= 4 * MIB);
  size_t from = 0, first_discarded = 0, later_refaults = 0;
  for (int r = 1; r <= ROUNDS; r++)
    {
      size_t to = 1 - from;
      kame_pool_stats_t s0 = kt_pool_stats ();
      for (size_t c = 0; c < CHUNKS; c++)
        {
          for (size_t i = 0; i < per[from]; i++)
            kame_pool_free (blocks[from][c * per[from] + i]);
          for (size_t i = 0; i < per[to]; i++)
            KT_CHECK ((blocks[to][c * per[to] + i]
                       = filled (size[to], r)) != NULL);
        }
      kame_pool_stats_t s1 = kt_pool_stats ();
      size_t refaults = s1.refault_units - s0.refault_units;
      size_t discarded = s1.discard_pages - s0.discard_pages;
      if (r == 1 && refaults == 0)
        KT_FAILF ("round 1 refaulted nothing: the budget kept every "
                  "released chunk, and the test shows nothing");
      if (r == 1)
        first_discarded = discarded;
      else if (discarded != 0)
        KT_FAILF ("round %d: %zu units refaulted, %zu pages given back",
                  r, refaults, discarded);
      else
        later_refaults += refaults;
      from = to;
    }
  /* What the later rounds fault in again is what the first round gave
     back, and only once.  */
  if (later_refaults * (UNIT_BYTES / KT_PAGE) > first_discarded)
    KT_FAILF ("%zu units refaulted after round 1, which gave back %zu "
              "pages", later_refaults, first_discarded);
  for (size_t i = 0; i < CHUNKS * per[from]; i++)
    kame_pool_free (blocks[from][i]);
  for (size_t i = 0; i < 44; i++)
    kame_pool_free (z[i]);
}

KT_MAIN (KT_CASE (units_released_and_claimed_again_at_the_peak_are_kept))
