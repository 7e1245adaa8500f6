/* stats.c -- kamepool.api tests of kame_pool_get_stats, the address
   space cap (kame_pool_set_max_bytes and friends) and the
   thread-exit-reclaim switch: version handling, and every counter
   stepping by exactly what one claim, dedicated block or mapping adds.

   Guarded sampling is off: these tests assert where the pool places
   blocks and what it counts, and a guarded block is not the pool's.
   kptest-env: KAME_POOL_GUARD_SAMPLE=0

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <errno.h>
#include <pthread.h>
#include <stdint.h>

#include "kame_pool.h"
#include "kptest.h"
#include "kptest-pool.h"

#define KIB ((size_t) 1024)
#define MIB (KIB * KIB)
#define UNIT (256 * KIB)
#define REGION (32 * MIB)

/* A field the library must not have written.  */
#define UNTOUCHED ((size_t) 0xabababababababab)

KT_TEST (stats_fill_only_the_fields_of_the_callers_version)
{
  void *p = kame_pool_malloc (64);
  KT_CHECK (p != NULL);
  kame_pool_get_stats (NULL);

  for (unsigned v = 0; v <= 8; v++)
    {
      kame_pool_stats_t s;
      memset (&s, 0xab, sizeof s);
      s.version = v;
      kame_pool_get_stats (&s);
      KT_CHECK_EQ (s.version, v);
      KT_CHECK_EQ (s.version_supported, 8);
      if (v == 0)
        {
          KT_CHECK_EQ (s.regions_populated, UNTOUCHED);
          KT_CHECK_EQ (s.bytes_reserved, UNTOUCHED);
          KT_CHECK_EQ (s.chunks_live, UNTOUCHED);
          KT_CHECK_EQ (s.units_live, UNTOUCHED);
        }
      else
        {
          KT_CHECK (s.regions_populated >= 1);
          KT_CHECK_EQ (s.bytes_reserved, s.regions_populated * REGION);
          KT_CHECK (s.chunks_live >= 1);
          KT_CHECK (s.units_live >= s.chunks_live);
          KT_CHECK (s.units_live < s.regions_populated * 128);
        }
      if (v < 2)
        {
          KT_CHECK_EQ (s.cache_bytes, UNTOUCHED);
          KT_CHECK_EQ (s.dedicated_chunk_bytes, UNTOUCHED);
          KT_CHECK_EQ (s.large_alloc_count, UNTOUCHED);
          KT_CHECK_EQ (s.large_alloc_bytes, UNTOUCHED);
        }
      else
        {
          /* Large blocks freed at start-up (by the C library) may sit
             in the recycle cache.  */
          KT_CHECK (s.cache_bytes <= kame_pool_get_large_cache_cap ());
          KT_CHECK (s.dedicated_chunk_bytes <= s.units_live * UNIT);
          KT_CHECK_EQ (s.large_alloc_count, 0);
          KT_CHECK_EQ (s.large_alloc_bytes, 0);
        }
      if (v < 3)
        {
          KT_CHECK_EQ (s.small_live_bytes, UNTOUCHED);
          KT_CHECK_EQ (s.purge_calls, UNTOUCHED);
          KT_CHECK_EQ (s.nclasses, UNTOUCHED);
          KT_CHECK_EQ (s.classes[0].block_size, UNTOUCHED);
        }
      else if (v == 3)
        {
          /* The version 3 layout has 64 rows: the first 64 classes,
             and nothing written past them.  */
          KT_CHECK_EQ (s.nclasses, 64);
          KT_CHECK_EQ (s.classes[0].block_size, 16);
          KT_CHECK_EQ (s.classes[61].block_size, 10304);
          KT_CHECK_EQ (s.classes[63].block_size, 14400);
          KT_CHECK_EQ (s.classes[64].block_size, UNTOUCHED);
        }
      else
        {
          KT_CHECK_EQ (s.nclasses, 89);
          KT_CHECK_EQ (s.classes[0].block_size, 16);
          KT_CHECK_EQ (s.classes[69].block_size, 32768);
          KT_CHECK_EQ (s.classes[70].block_size, 34816);
          KT_CHECK_EQ (s.classes[88].block_size, 208896);
          KT_CHECK_EQ (s.classes[89].block_size, 0);
          KT_CHECK (s.small_live_bytes >= 64);
          KT_CHECK_EQ (s.small_free_bytes,
                       s.small_resident_bytes - s.small_live_bytes);
        }
      if (v < 5)
        {
          KT_CHECK_EQ (s.discard_calls, UNTOUCHED);
          KT_CHECK_EQ (s.background_running, UNTOUCHED);
        }
      else
        {
          /* Nothing was freed yet: nothing given back, no thread.  */
          KT_CHECK_EQ (s.discard_calls, 0);
          KT_CHECK_EQ (s.discard_pages, 0);
          KT_CHECK_EQ (s.refault_units, 0);
          KT_CHECK_EQ (s.background_passes, 0);
          KT_CHECK_EQ (s.background_pages, 0);
          KT_CHECK_EQ (s.background_starts, 0);
          KT_CHECK_EQ (s.background_running, 0);
        }
      if (v < 6)
        {
          KT_CHECK_EQ (s.allocated_blocks, UNTOUCHED);
          KT_CHECK_EQ (s.peak_resident_bytes, UNTOUCHED);
        }
      else
        {
          KT_CHECK (s.allocated_blocks >= s.live_blocks
                    && s.live_blocks >= 1);
          KT_CHECK_EQ (s.freed_blocks, s.allocated_blocks - s.live_blocks);
          KT_CHECK_EQ (s.freed_bytes, s.allocated_bytes - s.live_bytes);
          KT_CHECK (s.live_bytes >= s.small_live_bytes
                    && s.small_live_bytes >= 64);
          KT_CHECK (s.peak_live_bytes >= s.live_bytes);
          KT_CHECK (s.peak_resident_bytes >= s.units_live * UNIT);
          /* No heap profile here.  */
          KT_CHECK_EQ (s.prof_stacks, 0);
          KT_CHECK_EQ (s.prof_table_bytes, 0);
          KT_CHECK_EQ (s.prof_shortened, 0);
          KT_CHECK_EQ (s.prof_dropped, 0);
        }
      if (v < 8)
        {
          KT_CHECK_EQ (s.lent_blocks, UNTOUCHED);
          KT_CHECK_EQ (s.lent_bytes, UNTOUCHED);
        }
      else
        {
          /* No large block here, so no loan.  */
          KT_CHECK_EQ (s.lent_blocks, 0);
          KT_CHECK_EQ (s.lent_bytes, 0);
        }
    }
  kame_pool_free (p);
}

/* Blocks of a class nobody has used yet: the chunk's capacity is
   exactly floor (units * 256 KiB / class), so block capacity + 1 claims
   the second chunk.  */
KT_TEST (a_new_small_chunk_steps_chunks_and_units)
{
  static const size_t cls[] = { 7232, 12352, 28736, 69632, 208896 };
  static const size_t units[] = { 1, 2, 4, 4, 4 };
  for (size_t k = 0; k < 5; k++)
    {
      size_t cap = units[k] * UNIT / cls[k];
      void **p = kame_pool_malloc ((cap + 1) * sizeof *p);
      KT_CHECK (p != NULL);
      kame_pool_stats_t before = kt_pool_stats ();
      for (size_t i = 0; i < cap; i++)
        {
          p[i] = kame_pool_malloc (cls[k] - 8);
          KT_CHECK (p[i] != NULL);
          KT_CHECK_EQ (kame_pool_malloc_usable_size (p[i]), cls[k]);
        }
      kame_pool_stats_t one = kt_pool_stats ();
      KT_CHECK_EQ (one.chunks_live - before.chunks_live, 1);
      KT_CHECK_EQ (one.units_live - before.units_live, units[k]);
      /* Every block lies in the one chunk, at a multiple of the class
         from its 256 KiB-aligned base.  */
      uintptr_t base = (uintptr_t) p[0] & ~(uintptr_t) (UNIT - 1);
      for (size_t i = 0; i < cap; i++)
        {
          uintptr_t off = (uintptr_t) p[i] - base;
          if (off >= units[k] * UNIT || off % cls[k] != 0)
            KT_FAILF ("block %zu of class %zu at %p is not in the chunk at "
                      "%#jx", i, cls[k], p[i], (uintmax_t) base);
        }
      p[cap] = kame_pool_malloc (cls[k]);
      KT_CHECK (p[cap] != NULL);
      kame_pool_stats_t two = kt_pool_stats ();
      KT_CHECK_EQ (two.chunks_live - before.chunks_live, 2);
      KT_CHECK_EQ (two.units_live - before.units_live, 2 * units[k]);
      KT_CHECK_EQ (two.dedicated_chunk_bytes, before.dedicated_chunk_bytes);
      for (size_t i = 0; i <= cap; i++)
        kame_pool_free (p[i]);
      kame_pool_free (p);
    }
}

KT_TEST (a_dedicated_block_steps_chunks_units_and_bytes_by_its_units)
{
  static const size_t sizes[] = { KT_SMALL_MAX + 1, UNIT, UNIT + 1, MIB + 1,
                                  4 * MIB };
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    {
      size_t n = (sizes[i] + UNIT - 1) / UNIT;
      kame_pool_stats_t before = kt_pool_stats ();
      void *p = kame_pool_malloc (sizes[i]);
      KT_CHECK (p != NULL);
      kame_pool_stats_t during = kt_pool_stats ();
      KT_CHECK_EQ (during.chunks_live - before.chunks_live, 1);
      KT_CHECK_EQ (during.units_live - before.units_live, n);
      KT_CHECK_EQ (during.dedicated_chunk_bytes
                   - before.dedicated_chunk_bytes, n * UNIT);
      KT_CHECK_EQ (during.large_alloc_count, before.large_alloc_count);
      kame_pool_free (p);
      kame_pool_stats_t after = kt_pool_stats ();
      KT_CHECK_EQ (after.chunks_live, before.chunks_live);
      KT_CHECK_EQ (after.units_live, before.units_live);
      KT_CHECK_EQ (after.dedicated_chunk_bytes, before.dedicated_chunk_bytes);
    }
}

KT_TEST (a_large_block_steps_the_mapping_count_and_bytes)
{
  static const size_t sizes[] = { 4 * MIB + 1, 6 * MIB, 6 * MIB + 100,
                                  40 * MIB };
  kame_pool_stats_t before = kt_pool_stats ();
  void *p[4];
  size_t mapped = 0;
  for (size_t i = 0; i < 4; i++)
    {
      p[i] = kame_pool_malloc (sizes[i]);
      KT_CHECK (p[i] != NULL);
      /* The mapping: the block, rounded to pages, after the header
         page.  */
      mapped += (sizes[i] + KT_PAGE - 1) / KT_PAGE * KT_PAGE + KT_PAGE;
      kame_pool_stats_t s = kt_pool_stats ();
      KT_CHECK_EQ (s.large_alloc_count - before.large_alloc_count, i + 1);
      KT_CHECK_EQ (s.large_alloc_bytes - before.large_alloc_bytes, mapped);
      KT_CHECK_EQ (s.chunks_live, before.chunks_live);
      KT_CHECK_EQ (s.units_live, before.units_live);
    }
  for (size_t i = 0; i < 4; i++)
    {
      mapped -= (sizes[i] + KT_PAGE - 1) / KT_PAGE * KT_PAGE + KT_PAGE;
      kame_pool_free (p[i]);
      kame_pool_stats_t s = kt_pool_stats ();
      KT_CHECK_EQ (s.large_alloc_count - before.large_alloc_count, 3 - i);
      KT_CHECK_EQ (s.large_alloc_bytes - before.large_alloc_bytes, mapped);
    }
}

/* A region has 127 data units, room for 7 blocks of 16 units, so 40
   such blocks need at least 5 new regions; regions are never given
   back.  */
KT_TEST (regions_reserved_bytes_and_reserved_bytes_agree)
{
  enum { N = 40 };
  void *p[N];
  kame_pool_stats_t before = kt_pool_stats ();
  KT_CHECK_EQ (before.bytes_reserved, before.regions_populated * REGION);
  KT_CHECK_EQ (kame_pool_reserved_bytes (), before.bytes_reserved);
  for (int i = 0; i < N; i++)
    {
      p[i] = kame_pool_malloc (4 * MIB);
      KT_CHECK (p[i] != NULL);
      kame_pool_stats_t s = kt_pool_stats ();
      KT_CHECK_EQ (s.bytes_reserved, s.regions_populated * REGION);
      KT_CHECK_EQ (kame_pool_reserved_bytes (), s.bytes_reserved);
    }
  kame_pool_stats_t during = kt_pool_stats ();
  KT_CHECK (during.regions_populated >= before.regions_populated + 5);
  for (int i = 0; i < N; i++)
    kame_pool_free (p[i]);
  kame_pool_stats_t after = kt_pool_stats ();
  KT_CHECK_EQ (after.regions_populated, during.regions_populated);
  KT_CHECK_EQ (kame_pool_reserved_bytes (), during.bytes_reserved);
}

KT_TEST (max_bytes_rounds_up_to_regions_and_zero_removes_the_cap)
{
  KT_CHECK_EQ (kame_pool_get_max_bytes (), SIZE_MAX);
  static const size_t set[][2] = {
    { 1, REGION }, { REGION - 1, REGION }, { REGION, REGION },
    { REGION + 1, 2 * REGION }, { 100 * MIB, 4 * REGION },
    { 1000 * REGION, 1000 * REGION }, { 0, SIZE_MAX }
  };
  for (size_t i = 0; i < sizeof set / sizeof set[0]; i++)
    {
      errno = EDOM;
      KT_CHECK_EQ (kame_pool_set_max_bytes (set[i][0]), 0);
      KT_CHECK_EQ (errno, EDOM);
      if (kame_pool_get_max_bytes () != set[i][1])
        KT_FAILF ("set_max_bytes (%zu): get_max_bytes () = %zu, not %zu",
                  set[i][0], kame_pool_get_max_bytes (), set[i][1]);
    }
}

/* Beyond the cap the pool hands out the C library's memory (usable
   size 0 to the pool), which kame_pool_free and kame_pool_realloc still
   take; the regions already mapped stay.  */
KT_TEST (allocations_beyond_max_bytes_fall_back_to_libc)
{
  void *keep = kame_pool_malloc (16);
  KT_CHECK (keep != NULL);
  size_t reserved = kame_pool_reserved_bytes ();
  KT_CHECK (reserved >= REGION);
  kame_pool_set_max_bytes (reserved);
  KT_CHECK_EQ (kame_pool_get_max_bytes (), reserved);

  /* At most 31 blocks of 4 units fit in a region: N overflows them.  */
  size_t fit = reserved / REGION * 31;
  if (fit > 400)
    KT_UNSUPPORTED ("%zu regions already mapped", reserved / REGION);
  const int N = (int) fit + 40;
  void *p[440];
  int foreign = 0;
  for (int i = 0; i < N; i++)
    {
      p[i] = kame_pool_malloc (MIB);
      KT_CHECK (p[i] != NULL);
      memset (p[i], i, MIB);
      if (kame_pool_malloc_usable_size (p[i]) == 0)
        foreign++;
    }
  KT_CHECK (foreign >= N - (int) fit);
  KT_CHECK_EQ (kame_pool_reserved_bytes (), reserved);

  /* The runs of fewer than 4 free units left in the regions (each
     region's first unit is its header) take one-unit blocks, one per
     free unit, and then those fall back too.  */
  kame_pool_stats_t before = kt_pool_stats ();
  int free_units = (int) (before.regions_populated * (REGION / UNIT - 1)
                          - before.units_live);
  void *one[128];
  KT_CHECK (free_units >= 0 && free_units < 128);
  int none = 0;
  for (;;)
    {
      KT_CHECK (none <= free_units);
      one[none] = kame_pool_malloc (UNIT);
      KT_CHECK (one[none] != NULL);
      if (kame_pool_malloc_usable_size (one[none++]) == 0)
        break;
    }
  KT_CHECK_EQ (none - 1, free_units);

  /* Small classes too, once the regions are full.  */
  void *s = kame_pool_malloc (3000);
  KT_CHECK (s != NULL);
  memset (s, 1, 3000);
  KT_CHECK_EQ (kame_pool_malloc_usable_size (s), 0);
  s = kame_pool_realloc (s, 5000);
  KT_CHECK (s != NULL);
  kame_pool_free (s);

  for (int i = 0; i < N; i++)
    kame_pool_free (p[i]);
  for (int i = 0; i < none; i++)
    kame_pool_free (one[i]);
  KT_CHECK_EQ (kame_pool_reserved_bytes (), reserved);

  kame_pool_set_max_bytes (0);
  KT_CHECK_EQ (kame_pool_get_max_bytes (), SIZE_MAX);
  for (int i = 0; i < N; i++)
    {
      p[i] = kame_pool_malloc (MIB);
      KT_CHECK (p[i] != NULL);
      KT_CHECK_EQ (kame_pool_malloc_usable_size (p[i]), 4 * UNIT);
    }
  KT_CHECK (kame_pool_reserved_bytes () > reserved);
  for (int i = 0; i < N; i++)
    kame_pool_free (p[i]);
  kame_pool_free (keep);
}

KT_TEST (thread_exit_reclaim_defaults_on_and_reads_back_as_0_or_1)
{
  KT_CHECK_EQ (kame_pool_get_thread_exit_reclaim (), 1);
  errno = EDOM;
  KT_CHECK_EQ (kame_pool_set_thread_exit_reclaim (0), 0);
  KT_CHECK_EQ (kame_pool_get_thread_exit_reclaim (), 0);
  KT_CHECK_EQ (kame_pool_set_thread_exit_reclaim (1), 0);
  KT_CHECK_EQ (kame_pool_get_thread_exit_reclaim (), 1);
  kame_pool_set_thread_exit_reclaim (0);
  KT_CHECK_EQ (kame_pool_set_thread_exit_reclaim (7), 0);
  KT_CHECK_EQ (kame_pool_get_thread_exit_reclaim (), 1);
  kame_pool_set_thread_exit_reclaim (0);
  KT_CHECK_EQ (kame_pool_set_thread_exit_reclaim (-1), 0);
  KT_CHECK_EQ (kame_pool_get_thread_exit_reclaim (), 1);
  KT_CHECK_EQ (errno, EDOM);
}

/* ---- Version 3: where the memory goes -------------------------------- */

#define BD_SIZE ((size_t) 3584)  /* one block per page-sized carve */
#define BD_N 60                 /* of 73 in a one-unit chunk */
static char *bd_blk[BD_N];
static pthread_barrier_t bd_bar;

static void *
kt_breakdown_owner (void *arg)
{
  (void) arg;
  for (size_t i = 0; i < BD_N; i++)
    bd_blk[i] = kame_pool_malloc (BD_SIZE);
  pthread_barrier_wait (&bd_bar);       /* 1: allocated */
  pthread_barrier_wait (&bd_bar);       /* 2: 10 freed remotely */
  for (size_t i = 10; i < 30; i++)
    kame_pool_free (bd_blk[i]);
  pthread_barrier_wait (&bd_bar);       /* 3: 20 freed by the owner */
  pthread_barrier_wait (&bd_bar);       /* 4: exit */
  return NULL;
}

/* A class's row and the totals step by exactly what the test does: a
   thread allocates 60 blocks of 3584 B (one chunk, 53 pages carved),
   another thread frees 10 (remote, not yet collected), the owner frees
   20, the owner exits (its chunk is abandoned with 30 live blocks, the
   remote frees it was sent collected; 2 wait in the other thread's
   batch), the other thread frees the rest (its batch reaches its bound
   of 4 blocks of 3584 B and is published, which takes the chunk over;
   the last free releases it).  */
KT_TEST (stats_break_down_a_class_exactly)
{
  kame_pool_stats_t s0 = kt_pool_stats ();
  size_t k = kt_pool_class (&s0, BD_SIZE);
  KT_CHECK (k != SIZE_MAX);
  KT_CHECK_EQ (s0.classes[k].chunks, 0);
  const size_t resident = (BD_N * BD_SIZE + KT_PAGE - 1) / KT_PAGE * KT_PAGE;
  KT_CHECK (pthread_barrier_init (&bd_bar, NULL, 2) == 0);
  pthread_t t;
  KT_CHECK (pthread_create (&t, NULL, kt_breakdown_owner, NULL) == 0);
  pthread_barrier_wait (&bd_bar);
  kame_pool_stats_t s1 = kt_pool_stats ();
  KT_CHECK_EQ (s1.classes[k].chunks, 1);
  KT_CHECK_EQ (s1.classes[k].live_blocks, BD_N);
  KT_CHECK_EQ (s1.classes[k].free_blocks, 0);
  KT_CHECK_EQ (s1.classes[k].resident_bytes, resident);
  /* The totals are the sums of the rows (pthread_create allocated in
     other classes meanwhile).  */
  size_t live = 0, res = 0;
  for (size_t i = 0; i < s1.nclasses; i++)
    {
      live += s1.classes[i].live_blocks * s1.classes[i].block_size;
      res += s1.classes[i].resident_bytes;
    }
  KT_CHECK_EQ (s1.small_live_bytes, live);
  KT_CHECK_EQ (s1.small_resident_bytes, res);
  KT_CHECK_EQ (s1.small_free_bytes, res - live);

  for (size_t i = 0; i < 10; i++)
    kame_pool_free (bd_blk[i]);
  kame_pool_stats_t s2 = kt_pool_stats ();
  KT_CHECK_EQ (s2.classes[k].live_blocks, BD_N - 10);
  KT_CHECK_EQ (s2.classes[k].free_blocks, 10);
  KT_CHECK_EQ (s2.remote_pending - s1.remote_pending, 10);
  KT_CHECK_EQ (s2.small_free_bytes - s1.small_free_bytes, 10 * BD_SIZE);
  pthread_barrier_wait (&bd_bar);
  pthread_barrier_wait (&bd_bar);

  kame_pool_stats_t s3 = kt_pool_stats ();
  KT_CHECK_EQ (s3.classes[k].live_blocks, 30);
  KT_CHECK_EQ (s3.classes[k].free_blocks, 30);
  KT_CHECK_EQ (s3.remote_pending - s1.remote_pending, 10);
  KT_CHECK_EQ (s3.classes[k].resident_bytes, resident);
  pthread_barrier_wait (&bd_bar);
  KT_CHECK (pthread_join (t, NULL) == 0);

  kame_pool_stats_t s4 = kt_pool_stats ();
  KT_CHECK_EQ (s4.classes[k].chunks, 1);
  KT_CHECK_EQ (s4.classes[k].live_blocks, 30);
  KT_CHECK_EQ (s4.classes[k].free_blocks, 30);
  /* This thread's batch holds 4 blocks of 3584 B (16 KiB): of its 10
     frees, two full batches went to the owner, which collected them
     at its exit; 2 still wait in the batch, free and pending.  */
  KT_CHECK_EQ (s4.remote_pending - s1.remote_pending, 2);
  KT_CHECK_EQ (s4.abandoned_chunks - s0.abandoned_chunks, 1);
  KT_CHECK_EQ (s4.abandoned_bytes - s0.abandoned_bytes, resident);

  for (size_t i = 30; i < BD_N; i++)
    kame_pool_free (bd_blk[i]);
  kame_pool_stats_t s5 = kt_pool_stats ();
  KT_CHECK_EQ (s5.classes[k].chunks, 0);
  KT_CHECK_EQ (s5.classes[k].live_blocks, 0);
  KT_CHECK_EQ (s5.classes[k].resident_bytes, 0);
  KT_CHECK_EQ (s5.abandoned_chunks, s0.abandoned_chunks);
  pthread_barrier_destroy (&bd_bar);
}

/* The decay leaves a steady workload alone: a live set whose scattered
   half is freed and allocated again, round after round, has its chunks
   back in use well within the delay (100 ms by default), so they are
   never purged while it runs.  With KAME_POOL_DECAY_MS=0 the same loop
   purges hundreds of times.  */
KT_TEST (the_decay_leaves_a_steady_workload_alone)
{
  enum { N = 4096, ROUNDS = 200 };
  static char *b[N];
  uint32_t x = 777;
  for (size_t i = 0; i < N; i++)
    {
      x ^= x << 13, x ^= x >> 17, x ^= x << 5;
      b[i] = kame_pool_malloc (64 + x % 1985);
      KT_CHECK (b[i] != NULL);
      memset (b[i], 1, 64);
    }
  kame_pool_stats_t s0 = kt_pool_stats ();
  for (int r = 0; r < ROUNDS; r++)
    {
      for (size_t i = r & 1; i < N; i += 2)
        kame_pool_free (b[i]);
      for (size_t i = r & 1; i < N; i += 2)
        {
          x ^= x << 13, x ^= x >> 17, x ^= x << 5;
          b[i] = kame_pool_malloc (64 + x % 1985);
          KT_CHECK (b[i] != NULL);
          memset (b[i], 1, 64);
        }
    }
  kame_pool_stats_t s1 = kt_pool_stats ();
  /* At most one purge per chunk, even if this machine stalled the loop
     for longer than the delay.  */
  if (s1.purge_calls - s0.purge_calls > s1.chunks_live)
    KT_FAILF ("%zu purges in %d rounds over %zu chunks",
              s1.purge_calls - s0.purge_calls, ROUNDS, s1.chunks_live);
  for (size_t i = 0; i < N; i++)
    kame_pool_free (b[i]);
}

KT_MAIN (KT_CASE (stats_fill_only_the_fields_of_the_callers_version),
         KT_CASE (a_new_small_chunk_steps_chunks_and_units),
         KT_CASE (a_dedicated_block_steps_chunks_units_and_bytes_by_its_units),
         KT_CASE (a_large_block_steps_the_mapping_count_and_bytes),
         KT_CASE (regions_reserved_bytes_and_reserved_bytes_agree),
         KT_CASE (max_bytes_rounds_up_to_regions_and_zero_removes_the_cap),
         KT_CASE (allocations_beyond_max_bytes_fall_back_to_libc),
         KT_CASE (thread_exit_reclaim_defaults_on_and_reads_back_as_0_or_1),
         KT_CASE (stats_break_down_a_class_exactly),
         KT_CASE (the_decay_leaves_a_steady_workload_alone))
