/* totals.c -- kamepool.api: the totals and peaks of kame_pool_get_stats
   (version 6): blocks and bytes allocated and freed since start, each
   step exact on every path a block takes (a pop from a chunk, a block
   taken back out of the batch of remote frees, a dedicated chunk, a
   mapping, a growth in place), the peak of the live bytes and the
   peak footprint.

   Guarded sampling is off: these tests assert where the pool places
   blocks and what it counts, and a guarded block is not the pool's.
   kptest-env: KAME_POOL_GUARD_SAMPLE=0

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>

#include "kame_pool.h"
#include "kptest.h"
#include "kptest-pool.h"

#define KIB ((size_t) 1024)
#define MIB (KIB * KIB)
#define UNIT (256 * KIB)

/* What a test looks at: the totals, a snapshot apart.  */
typedef struct
{
  size_t an, ab, fn, fb, ln, lb;
} totals_t;

static totals_t
totals (void)
{
  kame_pool_stats_t s = kt_pool_stats ();
  totals_t t = { s.allocated_blocks, s.allocated_bytes, s.freed_blocks,
                 s.freed_bytes, s.live_blocks, s.live_bytes };
  return t;
}

/* AFTER differs from BEFORE by exactly AN blocks and AB bytes
   allocated, FN and FB freed.  */
#define CHECK_STEP(before, after, an_, ab_, fn_, fb_)       \
  do                                                        \
    {                                                       \
      KT_CHECK_EQ ((after).an - (before).an, (size_t) (an_)); \
      KT_CHECK_EQ ((after).ab - (before).ab, (size_t) (ab_)); \
      KT_CHECK_EQ ((after).fn - (before).fn, (size_t) (fn_)); \
      KT_CHECK_EQ ((after).fb - (before).fb, (size_t) (fb_)); \
      KT_CHECK_EQ ((after).ln, (after).an - (after).fn);    \
      KT_CHECK_EQ ((after).lb, (after).ab - (after).fb);    \
    }                                                       \
  while (0)

#define N 1000
static void *blocks[N];

KT_TEST (small_blocks_count_by_their_class_size)
{
  kame_pool_free (kame_pool_malloc (100));
  totals_t t0 = totals ();
  for (size_t i = 0; i < N; i++)
    KT_CHECK ((blocks[i] = kame_pool_malloc (100)) != NULL);
  size_t size = kame_pool_malloc_usable_size (blocks[0]);
  KT_CHECK_EQ (size, 112);
  totals_t t1 = totals ();
  CHECK_STEP (t0, t1, N, N * size, 0, 0);
  for (size_t i = 0; i < 600; i++)
    kame_pool_free (blocks[i]);
  totals_t t2 = totals ();
  CHECK_STEP (t1, t2, 0, 0, 600, 600 * size);
  /* A malloc/free loop on one block: every pair counts.  */
  for (size_t i = 0; i < 5000; i++)
    kame_pool_free (kame_pool_malloc (100));
  totals_t t3 = totals ();
  CHECK_STEP (t2, t3, 5000, 5000 * size, 5000, 5000 * size);
  for (size_t i = 600; i < N; i++)
    kame_pool_free (blocks[i]);
}

KT_TEST (large_blocks_count_their_units_and_mappings)
{
  totals_t t0 = totals ();
  /* 300 KiB: a dedicated chunk of two units.  */
  void *d = kame_pool_malloc (300 * KIB);
  KT_CHECK (d != NULL);
  totals_t t1 = totals ();
  CHECK_STEP (t0, t1, 1, 2 * UNIT, 0, 0);
  /* Grown in place to three units: the unit more is allocated.  */
  void *g = kame_pool_realloc (d, 700 * KIB);
  KT_CHECK (g != NULL);
  totals_t t2 = totals ();
  if (g == d)
    CHECK_STEP (t1, t2, 0, UNIT, 0, 0);
  else
    CHECK_STEP (t1, t2, 1, 3 * UNIT, 1, 2 * UNIT);
  kame_pool_free (g);
  totals_t t3 = totals ();
  CHECK_STEP (t2, t3, 0, 0, 1, 3 * UNIT);
  /* 8 MiB: a mapping of its own, a page of header in front.  */
  size_t page = (size_t) sysconf (_SC_PAGESIZE);
  void *m = kame_pool_malloc (8 * MIB);
  KT_CHECK (m != NULL);
  totals_t t4 = totals ();
  CHECK_STEP (t3, t4, 1, 8 * MIB + page, 0, 0);
  kame_pool_free (m);
  totals_t t5 = totals ();
  CHECK_STEP (t4, t5, 0, 0, 1, 8 * MIB + page);
}

/* Blocks a thread allocates and the main thread frees: remote frees,
   which the main thread's own mallocs then take back out of its batch;
   every step is counted once.  The thread is made before the first
   snapshot and waits for the last one before it exits, so that what
   the C library allocates for a thread is in none of the steps.  */
static sem_t go, done, finish;

static void *
make_blocks (void *arg)
{
  (void) arg;
  while (sem_wait (&go) != 0)
    ;
  const char *err = NULL;
  for (size_t i = 0; i < N; i++)
    if ((blocks[i] = kame_pool_malloc (48)) == NULL)
      err = "malloc failed";
  sem_post (&done);
  while (sem_wait (&finish) != 0)
    ;
  return (void *) err;
}

KT_TEST (remote_frees_and_blocks_taken_back_count_once)
{
  void *mine = kame_pool_malloc (48);   /* the class in use here */
  KT_CHECK (mine != NULL);
  KT_CHECK (sem_init (&go, 0, 0) == 0 && sem_init (&done, 0, 0) == 0
            && sem_init (&finish, 0, 0) == 0);
  pthread_t t;
  KT_CHECK (pthread_create (&t, NULL, make_blocks, NULL) == 0);
  totals_t t0 = totals ();
  sem_post (&go);
  while (sem_wait (&done) != 0)
    ;
  totals_t t1 = totals ();
  CHECK_STEP (t0, t1, N, N * 48, 0, 0);
  for (size_t i = 0; i < N; i++)
    kame_pool_free (blocks[i]);
  totals_t t2 = totals ();
  CHECK_STEP (t1, t2, 0, 0, N, N * 48);
  for (size_t i = 0; i < N; i++)
    KT_CHECK ((blocks[i] = kame_pool_malloc (48)) != NULL);
  totals_t t3 = totals ();
  CHECK_STEP (t2, t3, N, N * 48, 0, 0);
  for (size_t i = 0; i < N; i++)
    kame_pool_free (blocks[i]);
  kame_pool_free (mine);
  totals_t t4 = totals ();
  CHECK_STEP (t3, t4, 0, 0, N + 1, (N + 1) * 48);
  sem_post (&finish);
  void *ret;
  KT_CHECK (pthread_join (t, &ret) == 0 && ret == NULL);
}

/* 64 MiB of 1000-byte blocks (1024 bytes each), then all freed: the
   peak of the live bytes is measured each time the units claimed since
   the last measure pass a sixty-fourth of the footprint and a MiB, so
   a peak reached while the pool claims units is at most that (and a
   chunk) below the true peak, and never above it; the peak footprint
   holds the units the blocks took.  */
#define BIG (64 * 1024)
static void *big[BIG];

KT_TEST (the_peaks_outlive_the_memory_and_stay_within_their_bound)
{
  kame_pool_stats_t s0 = kt_pool_stats ();
  size_t base = s0.live_bytes;
  for (size_t i = 0; i < BIG; i++)
    KT_CHECK ((big[i] = kame_pool_malloc (1000)) != NULL);
  size_t size = kame_pool_malloc_usable_size (big[0]);
  KT_CHECK_EQ (size, 1024);
  size_t peak = base + BIG * size;
  kame_pool_stats_t top = kt_pool_stats ();
  size_t footprint = top.units_live * UNIT;
  for (size_t i = 0; i < BIG; i++)
    kame_pool_free (big[i]);
  kame_pool_stats_t s1 = kt_pool_stats ();
  KT_CHECK_EQ (s1.live_bytes, base);
  /* The snapshot at the top measured the peak itself.  */
  KT_CHECK_EQ (s1.peak_live_bytes, peak);
  KT_CHECK (s1.peak_resident_bytes >= footprint);
  KT_CHECK (s1.peak_resident_bytes >= s0.peak_resident_bytes);
}

KT_TEST (the_peak_of_the_live_bytes_is_found_without_a_snapshot)
{
  kame_pool_stats_t s0 = kt_pool_stats ();
  size_t base = s0.live_bytes;
  for (size_t i = 0; i < BIG; i++)
    KT_CHECK ((big[i] = kame_pool_malloc (1000)) != NULL);
  size_t peak = base + BIG * (size_t) 1024;
  for (size_t i = 0; i < BIG; i++)
    kame_pool_free (big[i]);
  kame_pool_stats_t s1 = kt_pool_stats ();
  /* The last measure came at most a sixty-fourth of the footprint and
     a MiB of claims before the top, and the chunk being filled then
     held a unit more at most (the footprint is at most a twentieth
     above the live bytes here, with the chunks' tails).  */
  size_t slack = peak / 64 * 21 / 20 + MIB + UNIT;
  if (s1.peak_live_bytes > peak || s1.peak_live_bytes + slack < peak)
    KT_FAILF ("peak_live_bytes %zu, the true peak %zu (allowed %zu below)",
              s1.peak_live_bytes, peak, slack);
}

KT_MAIN (KT_CASE (small_blocks_count_by_their_class_size),
         KT_CASE (large_blocks_count_their_units_and_mappings),
         KT_CASE (remote_frees_and_blocks_taken_back_count_once),
         KT_CASE (the_peaks_outlive_the_memory_and_stay_within_their_bound),
         KT_CASE (the_peak_of_the_live_bytes_is_found_without_a_snapshot))
