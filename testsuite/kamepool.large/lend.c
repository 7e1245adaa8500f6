/* lend.c -- kamepool.large tests of the loans of cached blocks to small
   chunks (kp_cache_lend): a block of 1 MiB that waits in the thread's
   large cache while the thread's small blocks grow past it is lent to
   them, and its units, whose pages it wrote, hold the next small
   chunks; a block that the thread takes back between its small chunks
   stays cached.
   The decay runs its passes every 100 ms (half its delay); the
   background purge, which would tick the free units, is off; guarded
   sampling is off: these tests assert where the pool places blocks,
   and a guarded block is not the pool's.
   kptest-env: KAME_POOL_DECAY_MS=200 KAME_POOL_BACKGROUND_PURGE=0 KAME_POOL_GUARD_SAMPLE=0

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "kame_pool.h"
#include "kptest.h"
#include "kptest-pool.h"

#define MiB ((size_t) 1 << 20)
#define UNIT ((size_t) 256 << 10)
/* Blocks of the class 6976, 37 to a chunk of one unit, which nothing
   else in the process uses.  */
#define SIZE ((size_t) 6900)
#define CLASS ((size_t) 6976)
#define PER_CHUNK (UNIT / CLASS)
/* More chunks than the 8 refills that may pass before the decay's
   next pass, the 4 units claimed after it and the 4 of the loan.  */
#define CHUNKS 64
#define NBLK (CHUNKS * PER_CHUNK)

static char *blk[NBLK];

static size_t
cached (void)
{
  return kt_pool_stats ().cache_bytes;
}

/* A block of 1 MiB (a dedicated chunk of 4 units), written whole and
   freed into the calling thread's cache, which held nothing before,
   in *A (NULL when that failed: the failure is reported); then a wait
   past the decay's delay, so that the next refill that looks at the
   clock runs a pass.  */
static void
cache_a_block (char **a)
{
  *a = NULL;
  kame_pool_free (kame_pool_malloc (1));        /* the thread's heap */
  KT_CHECK_EQ (cached (), 0);
  char *p = kame_pool_malloc (MiB);
  KT_CHECK (p != NULL);
  memset (p, 1, MiB);
  kame_pool_free (p);
  KT_CHECK_EQ (cached (), MiB);
  usleep (250 * 1000);
  *a = p;
}

/* How many of the blocks lie in the MiB at A.  */
static size_t
inside (const char *a)
{
  size_t n = 0;
  for (size_t i = 0; i < NBLK; i++)
    if (blk[i] >= a && blk[i] < a + MiB)
      n++;
  return n;
}

/* The pass sees the block; four refills later the thread has claimed
   as many units not resident as the block has, and the next refill
   lends it: four chunks of the class fill its units, every block of
   them.  With no loan no block lies there (the cache keeps its
   units), and the cache still holds 1 MiB.  */
KT_TEST (a_cached_block_left_unused_is_lent_to_the_small_chunks_that_grow)
{
  char *a;
  cache_a_block (&a);
  KT_CHECK (a != NULL);
  for (size_t i = 0; i < NBLK; i++)
    KT_CHECK ((blk[i] = kame_pool_malloc (SIZE)) != NULL);
  kame_pool_stats_t s = kt_pool_stats ();
  KT_CHECK_EQ (s.cache_bytes, 0);
  KT_CHECK_EQ (s.lent_blocks, 1);
  KT_CHECK_EQ (s.lent_bytes, MiB);
  KT_CHECK_EQ (inside (a), 4 * PER_CHUNK);
  /* Each unit of A holds the start of a chunk's first block.  */
  for (size_t u = 0; u < 4; u++)
    {
      size_t starts = 0;
      for (size_t i = 0; i < NBLK; i++)
        starts += blk[i] == a + u * UNIT;
      KT_CHECK_EQ (starts, 1);
    }
  for (size_t i = 0; i < NBLK; i++)
    kame_pool_free (blk[i]);
}

/* The thread takes its block back after every chunk's worth of small
   blocks: each large allocation ends what the decay's pass saw, so
   the block is never lent, and every malloc of 1 MiB gets it back.  A
   loan that did not wait for a pass with no large allocation since
   would lend it at the first refill past four units.  */
KT_TEST (a_cached_block_the_thread_takes_back_is_not_lent)
{
  char *a;
  cache_a_block (&a);
  KT_CHECK (a != NULL);
  for (size_t i = 0; i < NBLK; i++)
    {
      KT_CHECK ((blk[i] = kame_pool_malloc (SIZE)) != NULL);
      if (i % PER_CHUNK == 0)
        {
          char *b = kame_pool_malloc (MiB);
          KT_CHECK_PTR_EQ (b, a);
          kame_pool_free (b);
        }
    }
  kame_pool_stats_t s = kt_pool_stats ();
  KT_CHECK_EQ (s.cache_bytes, MiB);
  KT_CHECK_EQ (s.lent_blocks, 0);
  KT_CHECK_EQ (inside (a), 0);
  for (size_t i = 0; i < NBLK; i++)
    kame_pool_free (blk[i]);
}

KT_MAIN (KT_CASE (a_cached_block_left_unused_is_lent_to_the_small_chunks_that_grow),
         KT_CASE (a_cached_block_the_thread_takes_back_is_not_lent))
