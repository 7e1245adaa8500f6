/* lend-nopass.c -- kamepool.large tests of the loans of cached blocks
   to small chunks (kp_cache_lend) with no decay pass at all: the delay
   is ten minutes, so that no pass runs while a test does.  A loan
   waits for the thread's small chunks to fault in as many units as
   the block has since the loans noted it, not for a pass, and a block
   freed after the loans noted the others waits for its own count
   (sqlite's last table, freed after the tables of its earlier steps,
   was lent or not as the passes fell).  The background purge is off;
   guarded sampling is off: these tests assert where the pool places
   blocks, and a guarded block is not the pool's.
   kptest-env: KAME_POOL_DECAY_MS=600000 KAME_POOL_BACKGROUND_PURGE=0 KAME_POOL_GUARD_SAMPLE=0

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
#define PER_CHUNK (UNIT / 6976)
#define CHUNKS 32
#define NBLK (CHUNKS * PER_CHUNK)

static char *blk[NBLK];

/* A block of BYTES, written whole and freed into the calling thread's
   cache, in *P (NULL when the malloc failed: reported).  */
static void
cache_a_block (char **p, size_t bytes)
{
  *p = kame_pool_malloc (bytes);
  KT_CHECK (*p != NULL);
  memset (*p, 1, bytes);
  kame_pool_free (*p);
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
   thread has faulted in four units, and the next claim lends the
   block, whose four units hold the next four chunks.  Before, a loan
   waited for the decay's pass to note the block, and with no pass the
   block stayed in the cache while every chunk faulted anew.  */
KT_TEST (a_cached_block_is_lent_with_no_decay_pass)
{
  kame_pool_free (kame_pool_malloc (1));        /* the thread's heap */
  KT_CHECK_EQ (kt_pool_stats ().cache_bytes, 0);
  char *a;
  cache_a_block (&a, MiB);
  KT_CHECK (a != NULL);
  KT_CHECK_EQ (kt_pool_stats ().cache_bytes, MiB);
  for (size_t i = 0; i < NBLK; i++)
    KT_CHECK ((blk[i] = kame_pool_malloc (SIZE)) != NULL);
  kame_pool_stats_t s = kt_pool_stats ();
  KT_CHECK_EQ (s.cache_bytes, 0);
  KT_CHECK_EQ (s.lent_blocks, 1);
  KT_CHECK_EQ (s.lent_bytes, MiB);
  KT_CHECK_EQ (inside (a, MiB, 0, NBLK), 4 * PER_CHUNK);
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
  KT_CHECK_EQ (kt_pool_stats ().cache_bytes, MiB / 2);
  size_t half = NBLK / 2;
  for (size_t i = 0; i < half; i++)
    KT_CHECK ((blk[i] = kame_pool_malloc (SIZE)) != NULL);
  kame_pool_stats_t s = kt_pool_stats ();
  KT_CHECK_EQ (s.cache_bytes, 0);
  KT_CHECK_EQ (s.lent_blocks - s0.lent_blocks, 1);
  KT_CHECK_EQ (s.lent_bytes - s0.lent_bytes, MiB / 2);
  KT_CHECK_EQ (inside (a, MiB / 2, 0, half), 2 * PER_CHUNK);
  kame_pool_free (b);
  KT_CHECK_EQ (kt_pool_stats ().cache_bytes, MiB);
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

KT_MAIN (KT_CASE (a_cached_block_is_lent_with_no_decay_pass),
         KT_CASE (a_block_freed_after_the_loans_noted_the_others_is_lent_too))
