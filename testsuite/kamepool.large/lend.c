/* lend.c -- kamepool.large tests of the loans of cached blocks to small
   chunks (kp_cache_lend): a block of 1 MiB that waits in the thread's
   large cache while the thread's small blocks grow past it is lent to
   them, and its units, whose pages it wrote, hold the next small
   chunks; a block freed after the loans noted the others waits for its
   own count and is lent too; a block that the thread takes back
   between its small chunks stays cached.
   The decay's delay is ten minutes, so that no pass runs while a test
   does: a loan waits for the thread's small chunks to fault in as many
   units as the block has since they first found it, not for a pass.
   The background purge, which would tick the free units, is off;
   guarded sampling is off: these tests assert where the pool places
   blocks, and a guarded block is not the pool's; so is the huge page
   advice, whose default puts a class's chunks past its sixteenth in
   2 MiB groups (their free units, which a huge page brought in, serve
   the next chunks before a loan, so the loans come later).
   kptest-env: KAME_POOL_DECAY_MS=600000 KAME_POOL_BACKGROUND_PURGE=0 KAME_POOL_GUARD_SAMPLE=0 KAME_POOL_HUGEPAGE=0

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <stdint.h>
#include <string.h>

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
/* More chunks than the one whose claim notes the block, the 4 units
   claimed after it and the 4 of the loan.  */
#define CHUNKS 64
#define NBLK (CHUNKS * PER_CHUNK)

static char *blk[NBLK];

static size_t
cached (void)
{
  return kt_pool_stats ().cache_bytes;
}

/* A block of BYTES, written whole and freed into the calling thread's
   cache, which held nothing before, in *A (NULL when that failed: the
   failure is reported).  */
static void
cache_a_block (char **a, size_t bytes)
{
  *a = NULL;
  kame_pool_free (kame_pool_malloc (1));        /* the thread's heap */
  KT_CHECK_EQ (cached (), 0);
  char *p = kame_pool_malloc (bytes);
  KT_CHECK (p != NULL);
  memset (p, 1, bytes);
  kame_pool_free (p);
  KT_CHECK_EQ (cached (), bytes);
  *a = p;
}

/* How many of blocks FROM to TO - 1 lie in the BYTES at A.  */
static size_t
inside (const char *a, size_t bytes, size_t from, size_t to)
{
  size_t n = 0;
  for (size_t i = from; i < to; i++)
    if (blk[i] >= a && blk[i] < a + bytes)
      n++;
  return n;
}

/* The first chunk's claim notes the block; four claims later the
   thread has faulted in as many units as the block has, and the next
   claim lends it: four chunks of the class fill its units, every
   block of them.  With no loan no block lies there (the cache keeps
   its units), and the cache still holds 1 MiB; so it was when a loan
   waited for the decay's pass to note the block, which never ran.  */
KT_TEST (a_cached_block_left_unused_is_lent_to_the_small_chunks_that_grow)
{
  char *a;
  cache_a_block (&a, MiB);
  KT_CHECK (a != NULL);
  for (size_t i = 0; i < NBLK; i++)
    KT_CHECK ((blk[i] = kame_pool_malloc (SIZE)) != NULL);
  kame_pool_stats_t s = kt_pool_stats ();
  KT_CHECK_EQ (s.cache_bytes, 0);
  KT_CHECK_EQ (s.lent_blocks, 1);
  KT_CHECK_EQ (s.lent_bytes, MiB);
  KT_CHECK_EQ (inside (a, MiB, 0, NBLK), 4 * PER_CHUNK);
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

/* A block of 1 MiB stays live while one of 512 KiB is cached, noted
   by the next claim and lent two claims later; then the block of 1
   MiB is freed, with no large allocation since the note, is noted at
   the next claim and lent four claims later, its units holding four
   chunks of the blocks allocated after its free.  A loan that noted
   the level once, until the next large allocation, never saw it.  */
KT_TEST (a_block_freed_after_the_loans_noted_the_others_is_lent_too)
{
  kame_pool_stats_t s0 = kt_pool_stats ();
  char *b = kame_pool_malloc (MiB);
  KT_CHECK (b != NULL);
  memset (b, 2, MiB);
  char *a;
  cache_a_block (&a, MiB / 2);
  KT_CHECK (a != NULL);
  size_t half = NBLK / 2;
  for (size_t i = 0; i < half; i++)
    KT_CHECK ((blk[i] = kame_pool_malloc (SIZE)) != NULL);
  kame_pool_stats_t s = kt_pool_stats ();
  KT_CHECK_EQ (s.cache_bytes, 0);
  KT_CHECK_EQ (s.lent_blocks - s0.lent_blocks, 1);
  KT_CHECK_EQ (s.lent_bytes - s0.lent_bytes, MiB / 2);
  KT_CHECK_EQ (inside (a, MiB / 2, 0, half), 2 * PER_CHUNK);
  kame_pool_free (b);
  KT_CHECK_EQ (cached (), MiB);
  for (size_t i = half; i < NBLK; i++)
    KT_CHECK ((blk[i] = kame_pool_malloc (SIZE)) != NULL);
  s = kt_pool_stats ();
  KT_CHECK_EQ (s.cache_bytes, 0);
  KT_CHECK_EQ (s.lent_blocks - s0.lent_blocks, 2);
  KT_CHECK_EQ (s.lent_bytes - s0.lent_bytes, MiB / 2 + MiB);
  KT_CHECK_EQ (inside (b, MiB, half, NBLK), 4 * PER_CHUNK);
  for (size_t i = 0; i < NBLK; i++)
    kame_pool_free (blk[i]);
}

/* The thread takes its block back after every chunk's worth of small
   blocks: each large allocation ends the loans' notes, so the block
   is never lent, and every malloc of 1 MiB gets it back.  A loan that
   did not wait with no large allocation since would lend it at the
   first claim past four units.  */
KT_TEST (a_cached_block_the_thread_takes_back_is_not_lent)
{
  char *a;
  cache_a_block (&a, MiB);
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
  KT_CHECK_EQ (inside (a, MiB, 0, NBLK), 0);
  for (size_t i = 0; i < NBLK; i++)
    kame_pool_free (blk[i]);
}

KT_MAIN (KT_CASE (a_cached_block_left_unused_is_lent_to_the_small_chunks_that_grow),
         KT_CASE (a_block_freed_after_the_loans_noted_the_others_is_lent_too),
         KT_CASE (a_cached_block_the_thread_takes_back_is_not_lent))
