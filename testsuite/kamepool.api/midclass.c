/* midclass.c -- the size classes above 32 KiB: blocks of 1 MiB / M
   bytes (rounded down to 1 KiB) packed M to a chunk of 4 units, freed by
   other threads, reallocated across the tiers' boundaries, and the
   address space they leave for data under RLIMIT_AS.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <pthread.h>
#include <stdint.h>
#include <sys/resource.h>

#include "kame_pool.h"
#include "kptest.h"
#include "kptest-pool.h"

#define KIB ((size_t) 1024)
#define MIB (KIB * KIB)
#define UNIT (256 * KIB)
#define FIRST_MID 70            /* kt_classes[70] = 34816 */

/* Every mid class: the first class above 32768 is row 68, the blocks of
   one new chunk are 1 MiB / M of them, at multiples of the class from
   the chunk's unit-aligned base, each aligned to the class's lowest set
   bit, and one more block starts a second chunk.  (A class whose chunk
   the start-up made is left out: its first chunk is not a new one.)  */
KT_TEST (each_mid_class_packs_m_blocks_into_one_mib)
{
  KT_CHECK_EQ (kt_classes[FIRST_MID - 1], 32768);
  size_t checked = 0;
  for (size_t k = FIRST_MID; k < KT_NCLASSES; k++)
    {
      size_t size = kt_classes[k];
      size_t m = MIB / size;
      KT_CHECK (MIB - m * size < MIB / 62);      /* under 1.6 % */
      void *p[32];
      KT_CHECK (m + 1 <= 32);
      kame_pool_stats_t before = kt_pool_stats ();
      size_t row = kt_pool_class (&before, size);
      KT_CHECK_EQ (row, k);
      size_t chunks0 = before.classes[row].chunks;
      if (chunks0 != 0)
        continue;               /* the C library's start-up used it */
      checked++;
      for (size_t i = 0; i < m; i++)
        {
          p[i] = kame_pool_malloc (size - 8 * i);
          KT_CHECK (p[i] != NULL);
          KT_CHECK_EQ (kame_pool_malloc_usable_size (p[i]), size);
          KT_CHECK_EQ ((uintptr_t) p[i] % (size & -size), 0);
        }
      uintptr_t base = (uintptr_t) p[0] & ~(uintptr_t) (UNIT - 1);
      for (size_t i = 0; i < m; i++)
        if ((uintptr_t) p[i] - base != i * size)
          KT_FAILF ("block %zu of class %zu at %p, chunk at %#jx", i, size,
                    p[i], (uintmax_t) base);
      kame_pool_stats_t one = kt_pool_stats ();
      KT_CHECK_EQ (one.classes[row].chunks, chunks0 + 1);
      KT_CHECK_EQ (one.classes[row].live_blocks, m);
      KT_CHECK_EQ (one.units_live - before.units_live, 4);
      p[m] = kame_pool_malloc (size);
      KT_CHECK (p[m] != NULL);
      kame_pool_stats_t two = kt_pool_stats ();
      KT_CHECK_EQ (two.classes[row].chunks, chunks0 + 2);
      KT_CHECK_EQ (two.units_live - before.units_live, 8);
      KT_CHECK_EQ (two.dedicated_chunk_bytes, before.dedicated_chunk_bytes);
      for (size_t i = 0; i <= m; i++)
        kame_pool_free (p[i]);
      kame_pool_stats_t after = kt_pool_stats ();
      KT_CHECK_EQ (after.classes[row].live_blocks, 0);
    }
  KT_CHECK (checked + 2 >= KT_NCLASSES - FIRST_MID);
}

enum { NREMOTE = 40 };
static void *handed[NREMOTE];

static void *
free_handed (void *arg)
{
  (void) arg;
  for (int i = 0; i < NREMOTE; i++)
    kame_pool_free (handed[i]);
  return NULL;
}

/* Blocks of 68 KiB (class 69632) freed by another thread: back in their
   chunks at once (the chunks of the mid classes are the threads'
   together), no remote free waits, and the next blocks come from the
   same chunks, with no new chunk.  */
KT_TEST (mid_blocks_freed_by_another_thread_go_back_to_their_chunks_at_once)
{
  const size_t size = 68 * KIB;
  kame_pool_stats_t s0 = kt_pool_stats ();
  size_t row = kt_pool_class (&s0, 69632);
  KT_CHECK (row != SIZE_MAX);
  for (int i = 0; i < NREMOTE; i++)
    {
      handed[i] = kame_pool_malloc (size);
      KT_CHECK (handed[i] != NULL);
      kt_paint (handed[i], size, (uintptr_t) i);
    }
  kame_pool_stats_t s1 = kt_pool_stats ();
  KT_CHECK_EQ (s1.classes[row].live_blocks, NREMOTE);
  size_t chunks = s1.classes[row].chunks;
  KT_CHECK_EQ (chunks, (NREMOTE + 14) / 15);
  pthread_t t;
  KT_CHECK_EQ (pthread_create (&t, NULL, free_handed, NULL), 0);
  KT_CHECK_EQ (pthread_join (t, NULL), 0);
  kame_pool_stats_t s2 = kt_pool_stats ();
  KT_CHECK_EQ (s2.classes[row].live_blocks, 0);
  KT_CHECK_EQ (s2.remote_pending, s1.remote_pending);
  void *again[NREMOTE];
  for (int i = 0; i < NREMOTE; i++)
    {
      again[i] = kame_pool_malloc (size);
      KT_CHECK (again[i] != NULL);
      kt_paint (again[i], size, (uintptr_t) i + 100);
    }
  kame_pool_stats_t s3 = kt_pool_stats ();
  KT_CHECK_EQ (s3.classes[row].chunks, chunks);
  KT_CHECK_EQ (s3.classes[row].live_blocks, NREMOTE);
  for (int i = 0; i < NREMOTE; i++)
    {
      KT_CHECK (kt_painted (again[i], size, (uintptr_t) i + 100));
      kame_pool_free (again[i]);
    }
}

/* The free of a block of 68 KiB past its chunk's first unit (a unit
   offset that is not a multiple of the class: only the first unit's 4
   blocks have one) by the thread that allocated it puts it back at
   once: no remote free waits for a collect, and the class's live
   blocks are what they were.  */
KT_TEST (a_free_past_a_chunks_first_unit_is_no_remote_free)
{
  const size_t size = 68 * KIB;
  enum { N = 15 };
  void *p[N];
  kame_pool_stats_t s0 = kt_pool_stats ();
  size_t row = kt_pool_class (&s0, 69632);
  KT_CHECK (row != SIZE_MAX);
  size_t past = 0;
  for (int i = 0; i < N; i++)
    {
      p[i] = kame_pool_malloc (size);
      KT_CHECK (p[i] != NULL);
      if ((uintptr_t) p[i] % UNIT % 69632 != 0)
        past++;
    }
  KT_CHECK (past > 0);
  for (int i = 0; i < N; i++)
    kame_pool_free (p[i]);
  kame_pool_stats_t s1 = kt_pool_stats ();
  KT_CHECK_EQ (s1.remote_pending, s0.remote_pending);
  KT_CHECK_EQ (s1.classes[row].live_blocks, s0.classes[row].live_blocks);
}

/* realloc over the boundaries of the mid classes: up from the last
   class of the lookup table, up from the biggest class to a dedicated
   chunk, and down again, which stays in place.  */
KT_TEST (realloc_across_the_mid_class_boundaries)
{
  static const size_t steps[][3] = {
    /* from, to, usable after */
    { 32768, 32769, 34816 },
    { 34816, 34945, 36864 },
    { 200000, 208896, 208896 },
    { 208896, 209713, UNIT },
    { 209713, 300 * KIB, 2 * UNIT },
    { 2 * UNIT, 40000, 2 * UNIT },
    { 69632, 100, 69632 },
  };
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
    {
      size_t from = steps[i][0], to = steps[i][1];
      unsigned char *p = kame_pool_malloc (from);
      KT_CHECK (p != NULL);
      kt_paint (p, from, (uintptr_t) i);
      unsigned char *q = kame_pool_realloc (p, to);
      KT_CHECK (q != NULL);
      size_t kept = from < to ? from : to;
      if (!kt_painted (q, kept, (uintptr_t) i))
        KT_FAILF ("realloc (%zu -> %zu) lost the contents", from, to);
      KT_CHECK_EQ (kame_pool_malloc_usable_size (q), steps[i][2]);
      if (to <= kame_pool_malloc_usable_size (p) || to < from)
        KT_CHECK (q == p);
      kame_pool_free (q);
    }
}

/* Blocks of SIZE bytes allocated until malloc fails under an address-
   space limit of 200 MiB above what the process has mapped now.  The
   ideal is every byte of that margin, plus the units of the pool's
   regions that are mapped already and free, given to blocks: the
   bytes obtained must be at least 9/10 of it.  (A block of 68 KiB in
   a unit of 256 KiB of its own got 1/4 of it.)  */
static void
fill_under_rlimit_as (size_t size)
{
#if defined __SANITIZE_ADDRESS__ || defined __SANITIZE_THREAD__
  (void) size;
  KT_UNSUPPORTED ("the sanitizer's shadow memory is address space too");
#else
  kame_pool_stats_t s = kt_pool_stats ();
  size_t vm = (size_t) kt_proc_status_kib ("VmSize") * KIB;
  size_t margin = 200 * MIB;
  /* Unit 0 of each region is its metadata, claimed for good.  */
  size_t spare = s.bytes_reserved - s.units_live * UNIT
                 - s.regions_populated * UNIT - s.cache_bytes;
  struct rlimit rl = { vm + margin, vm + margin };
  KT_CHECK_EQ (setrlimit (RLIMIT_AS, &rl), 0);
  size_t got = 0;
  void *p;
  while ((p = kame_pool_malloc (size)) != NULL)
    {
      *(volatile char *) p = 1;
      got += size;
    }
  size_t ideal = margin + spare;
  printf ("%zu-byte blocks: %zu of %zu bytes (%.3f)\n", size, got, ideal,
          (double) got / (double) ideal);
  if (got * 10 < ideal * 9)
    KT_FAILF ("%zu-byte blocks got %zu bytes, under 9/10 of %zu", size,
              got, ideal);
#endif
}

KT_TEST (blocks_of_68_kib_use_nine_tenths_of_an_address_space_limit)
{
  fill_under_rlimit_as (68 * KIB);
}

KT_TEST (blocks_of_200_kb_use_nine_tenths_of_an_address_space_limit)
{
  fill_under_rlimit_as (200000);
}

KT_MAIN (KT_CASE (each_mid_class_packs_m_blocks_into_one_mib),
         KT_CASE (mid_blocks_freed_by_another_thread_go_back_to_their_chunks_at_once),
         KT_CASE (a_free_past_a_chunks_first_unit_is_no_remote_free),
         KT_CASE (realloc_across_the_mid_class_boundaries),
         KT_CASE (blocks_of_68_kib_use_nine_tenths_of_an_address_space_limit),
         KT_CASE (blocks_of_200_kb_use_nine_tenths_of_an_address_space_limit))
