/* budget.c -- kamepool.large tests of the large cache's bound, which
   a thread checks at its long-way frees only (the first-level budget
   of cache.c): one thread alone never has more than the cap cached;
   with two threads the cache may hold the cap plus the other thread's
   first level, and no more; a cap lowered by another thread holds at
   this thread's next free, and one lowered by this thread trims its
   cache at once.  Blocks of 1 MiB are dedicated chunks of 4
   units; a 5 MiB mapping is above every cap used here, so that its
   malloc and free end the free streak and work out the budget anew
   without caching anything.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#define _GNU_SOURCE 1

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "kame_pool.h"
#include "kptest.h"
#include "kptest-pool.h"

#define KiB ((size_t) 1 << 10)
#define MiB ((size_t) 1 << 20)

/* Start with an empty cache (the C library may have freed a large
   block already) and a cap of CAP.  */
static void
empty_cache (size_t cap)
{
  kame_pool_free (kame_pool_malloc (1));
  KT_CHECK_EQ (kame_pool_set_large_cache_cap (0), 0);
  KT_CHECK_EQ (kame_pool_set_large_cache_cap (cap), 0);
}

static size_t
cached (void)
{
  return kt_pool_stats ().cache_bytes;
}

/* A large allocation that the cache cannot serve nor keep: it ends
   the calling thread's free streak.  */
static void
end_streak (void)
{
  kame_pool_free (kame_pool_malloc (5 * MiB));
}

/* One thread, cap 2.5 MiB: two frees fill the budget to 2 MiB; the
   third, with only 0.5 MiB of budget left, takes the long way, which
   gives the oldest block back to keep the cache at 2 MiB.  A first
   level that ignored the cap would hold 3 MiB.  */
KT_TEST (large_one_thread_never_caches_more_than_the_cap)
{
  const size_t cap = 2 * MiB + 512 * KiB;
  empty_cache (cap);
  KT_CHECK_EQ (cached (), 0);
  void *a = kame_pool_malloc (MiB), *b = kame_pool_malloc (MiB);
  void *c = kame_pool_malloc (MiB);
  KT_CHECK (a != NULL && b != NULL && c != NULL);
  kame_pool_free (a);
  KT_CHECK_EQ (cached (), MiB);
  kame_pool_free (b);
  KT_CHECK_EQ (cached (), 2 * MiB);
  end_streak ();
  KT_CHECK_EQ (cached (), 2 * MiB);
  kame_pool_free (c);
  KT_CHECK_EQ (cached (), 2 * MiB);
  /* The newest two are kept: B, then C, come back.  */
  KT_CHECK_PTR_EQ (kame_pool_malloc (MiB), c);
  KT_CHECK_PTR_EQ (kame_pool_malloc (MiB), b);
  KT_CHECK_EQ (cached (), 0);
  kame_pool_free (b);
  kame_pool_free (c);
  kame_pool_set_large_cache_cap (0);
  KT_CHECK_EQ (cached (), 0);
  kame_pool_set_large_cache_cap (128 * MiB);
}

/* The other thread: it frees HELD_N of its blocks, then waits at the
   barrier while the main thread works, then frees one more, and waits
   again before it exits (which empties its first level).  */
enum { HELD_N = 2 };
static pthread_barrier_t bar;
static void *held[HELD_N + 1];

static void *
holder (void *arg)
{
  (void) arg;
  for (int i = 0; i < HELD_N + 1; i++)
    if ((held[i] = kame_pool_malloc (MiB)) == NULL)
      return "malloc failed";
  for (int i = 0; i < HELD_N; i++)
    kame_pool_free (held[i]);
  pthread_barrier_wait (&bar);
  pthread_barrier_wait (&bar);
  kame_pool_free (held[HELD_N]);
  pthread_barrier_wait (&bar);
  pthread_barrier_wait (&bar);
  return NULL;
}

/* Two threads, cap 4 MiB.  The holder keeps 2 MiB in its first level;
   this thread, which does not count them, fills its own to the cap:
   6 MiB in all, the cap plus the other thread's first level, which is
   the documented slack.  One more free here takes the long way and
   keeps this thread's share at the cap.  */
KT_TEST (large_two_threads_exceed_the_cap_by_one_first_level_only)
{
  const size_t cap = 4 * MiB;
  empty_cache (cap);
  KT_CHECK_EQ (pthread_barrier_init (&bar, NULL, 2), 0);
  pthread_t t;
  KT_CHECK_EQ (pthread_create (&t, NULL, holder, NULL), 0);
  pthread_barrier_wait (&bar);
  KT_CHECK_EQ (cached (), HELD_N * MiB);
  void *m[5];
  for (int i = 0; i < 5; i++)
    KT_CHECK ((m[i] = kame_pool_malloc (MiB)) != NULL);
  for (int i = 0; i < 4; i++)
    kame_pool_free (m[i]);
  KT_CHECK_EQ (cached (), cap + HELD_N * MiB);
  end_streak ();
  kame_pool_free (m[4]);
  KT_CHECK_EQ (cached (), cap + HELD_N * MiB);
  pthread_barrier_wait (&bar);
  /* The holder's third free: its budget, worked out before this
     thread cached anything, still has 2 MiB.  That is within the
     documented bound, the cap plus the holder's first level (at most 4
     blocks of 1 MiB).  */
  pthread_barrier_wait (&bar);
  KT_CHECK_EQ (cached (), cap + (HELD_N + 1) * MiB);
  pthread_barrier_wait (&bar);
  void *ret;
  KT_CHECK_EQ (pthread_join (t, &ret), 0);
  KT_CHECK (ret == NULL);
  KT_CHECK_EQ (cached (), cap);
  kame_pool_set_large_cache_cap (0);
  KT_CHECK_EQ (cached (), 0);
  kame_pool_set_large_cache_cap (128 * MiB);
  pthread_barrier_destroy (&bar);
}

/* The cap lowered by this thread while the holder keeps 2 MiB with a
   budget worked out for the old cap: the holder's blocks stay until
   its next free, which takes the long way.  There the holder has freed
   3 MiB since its last large allocation, more than the new cap of
   1 MiB, with no large allocation by this thread meanwhile: a free
   streak, which empties the cache.  A budget that missed the change
   would let that free through: 3 MiB.  */
KT_TEST (large_cap_lowered_holds_at_the_other_threads_next_free)
{
  empty_cache (64 * MiB);
  KT_CHECK_EQ (pthread_barrier_init (&bar, NULL, 2), 0);
  pthread_t t;
  KT_CHECK_EQ (pthread_create (&t, NULL, holder, NULL), 0);
  pthread_barrier_wait (&bar);
  KT_CHECK_EQ (cached (), HELD_N * MiB);
  kame_pool_set_large_cache_cap (MiB);
  KT_CHECK_EQ (cached (), HELD_N * MiB);
  pthread_barrier_wait (&bar);
  pthread_barrier_wait (&bar);
  KT_CHECK_EQ (cached (), 0);
  pthread_barrier_wait (&bar);
  void *ret;
  KT_CHECK_EQ (pthread_join (t, &ret), 0);
  KT_CHECK (ret == NULL);
  KT_CHECK_EQ (cached (), 0);
  kame_pool_set_large_cache_cap (128 * MiB);
  pthread_barrier_destroy (&bar);
}

/* The cap lowered by the thread that holds the cache: its first level
   is trimmed at once, oldest first, down to the new cap, and the pages
   of what goes are given back (the free units the large tier keeps
   resident are purged when the cap goes down).  Four 1 MiB blocks
   cached, cap lowered to 2.5 MiB: the two oldest go, the two newest
   stay and serve the next two requests.  */
KT_TEST (large_cap_lowered_trims_the_callers_cache_oldest_first)
{
  empty_cache (64 * MiB);
  char *p[4];
  for (int i = 0; i < 4; i++)
    {
      p[i] = kame_pool_malloc (MiB);
      KT_CHECK (p[i] != NULL);
      memset (p[i], 0x5a, MiB);
    }
  for (int i = 0; i < 4; i++)
    kame_pool_free (p[i]);
  KT_CHECK_EQ (cached (), 4 * MiB);
  KT_CHECK_EQ (kame_pool_set_large_cache_cap (5 * MiB / 2), 0);
  KT_CHECK_EQ (cached (), 2 * MiB);
  KT_CHECK_EQ (kt_resident_count (p[0], MiB), 0);
  KT_CHECK_EQ (kt_resident_count (p[1], MiB), 0);
  char *q0 = kame_pool_malloc (MiB), *q1 = kame_pool_malloc (MiB);
  KT_CHECK ((q0 == p[2] && q1 == p[3]) || (q0 == p[3] && q1 == p[2]));
  KT_CHECK_EQ (cached (), 0);
  KT_CHECK_EQ ((unsigned char) q0[MiB - 1], 0x5a);
  KT_CHECK_EQ ((unsigned char) q1[MiB - 1], 0x5a);
  kame_pool_free (q0);
  kame_pool_free (q1);
  kame_pool_set_large_cache_cap (128 * MiB);
}

KT_MAIN (KT_CASE (large_one_thread_never_caches_more_than_the_cap),
         KT_CASE (large_cap_lowered_trims_the_callers_cache_oldest_first),
         KT_CASE (large_two_threads_exceed_the_cap_by_one_first_level_only),
         KT_CASE (large_cap_lowered_holds_at_the_other_threads_next_free))
