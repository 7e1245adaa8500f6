/* units-decay.c -- kamepool.threads tests of the free units' decay as
   the threads' own releases tick it (the background purge is off
   here; purge.c tests it): the units of the chunks that exiting
   threads release stay resident for the next threads, and those that
   stay unused for the decay's delay go back to the kernel, down to
   1 MiB, a unit at a time: without huge page advice (with it they go
   back as whole huge pages: purge-huge.c).
   Guarded sampling is off: these tests assert where the pool places
   blocks and what it counts, and a guarded block is not the pool's.
   kptest-env: KAME_POOL_DECAY_MS=30 KAME_POOL_BACKGROUND_PURGE=0 KAME_POOL_HUGEPAGE=0 KAME_POOL_GUARD_SAMPLE=0

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <time.h>

#include "kame_pool.h"
#include "kptest.h"
#include "kptest-pool.h"

#define KIB ((size_t) 1024)
#define UNIT (256 * KIB)
#define SIZE ((size_t) 4096)    /* 64 blocks to a one-unit chunk */
#define PER_UNIT (UNIT / SIZE)
#define UNITS 7                 /* within the budget of 8 */
#define KEEP_UNITS 4            /* what the decay leaves resident */

static void *units[UNITS];

/* Fill UNITS one-unit chunks, write every page, free it all, and exit:
   every chunk is released at the exit.  */
static void *
fill_and_free (void *arg)
{
  static void *p[UNITS * PER_UNIT];
  (void) arg;
  for (size_t i = 0; i < UNITS * PER_UNIT; i++)
    {
      p[i] = kame_pool_malloc (SIZE);
      if (p[i] == NULL)
        return "malloc failed";
      memset (p[i], 0x3c, SIZE);
    }
  for (size_t u = 0; u < UNITS; u++)
    units[u] = (void *) ((uintptr_t) p[u * PER_UNIT] & ~(uintptr_t) (UNIT - 1));
  for (size_t i = 0; i < UNITS * PER_UNIT; i++)
    kame_pool_free (p[i]);
  return NULL;
}

/* One block, freed: the thread's one chunk is released at its exit,
   which makes a tick of the decay when one is due.  */
static void *
one_block (void *arg)
{
  (void) arg;
  void *p = kame_pool_malloc (SIZE);
  if (p == NULL)
    return "malloc failed";
  kame_pool_free (p);
  return NULL;
}

static bool
run_thread (void *(*fn) (void *))
{
  pthread_t t;
  void *ret;
  return pthread_create (&t, NULL, fn, NULL) == 0
         && pthread_join (t, &ret) == 0 && ret == NULL;
}

static void
sleep_ms (long ms)
{
  struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
  while (nanosleep (&ts, &ts) != 0)
    ;
}

static size_t
resident_units (void)
{
  size_t n = 0;
  for (size_t u = 0; u < UNITS; u++)
    {
      unsigned char vec[UNIT / KT_PAGE];
      if (mincore (units[u], UNIT, vec) != 0)
        return SIZE_MAX;
      for (size_t i = 0; i < UNIT / KT_PAGE; i++)
        if (vec[i] & 1)
          {
            n++;
            break;
          }
    }
  return n;
}

/* 7 units released at a thread's exit stay resident and counted; three
   decay periods later, with a release after each (the ticks), the units
   unused for the delay have gone back, to the 1 MiB the decay keeps,
   plus the unit of the last release, whose tick comes before it adds
   its own unit: its chunk took a unit that a chunk of its class left,
   with its 64 pages, and kept them, as a release keeps the pages an
   earlier chunk touched.  */
KT_TEST (free_units_unused_for_a_decay_period_go_back_down_to_1_mib)
{
  KT_CHECK_EQ (kame_pool_get_thread_exit_reclaim (), 1);
  KT_CHECK (run_thread (one_block));
  kame_pool_trim (0);
  KT_CHECK_EQ (kt_pool_stats ().dirty_bytes, 0);
  KT_CHECK (run_thread (fill_and_free));
  KT_CHECK_EQ (kt_pool_stats ().dirty_bytes, UNITS * UNIT);
  KT_CHECK_EQ (resident_units (), UNITS);
  for (int tick = 0; tick < 3; tick++)
    {
      sleep_ms (70);
      KT_CHECK (run_thread (one_block));
    }
  KT_CHECK_EQ (kt_pool_stats ().dirty_bytes, (KEEP_UNITS + 1) * UNIT);
  size_t left = resident_units ();
  if (left != KEEP_UNITS + 1)
    KT_FAILF ("%zu of the %d units are still resident", left, UNITS);
}

/* The next thread takes the units the last one released, resident:
   the same 7 units, so the free units' count is 7 again after its
   exit, where 7 new ones would have made it 8, the budget.  */
KT_TEST (a_new_thread_claims_the_resident_units_first)
{
  KT_CHECK (run_thread (one_block));
  kame_pool_trim (0);
  KT_CHECK (run_thread (fill_and_free));
  KT_CHECK_EQ (kt_pool_stats ().dirty_bytes, UNITS * UNIT);
  void *first[UNITS];
  memcpy (first, units, sizeof first);
  qsort (first, UNITS, sizeof first[0], kt_cmp_uintptr);
  KT_CHECK (run_thread (fill_and_free));
  KT_CHECK_EQ (kt_pool_stats ().dirty_bytes, UNITS * UNIT);
  qsort (units, UNITS, sizeof units[0], kt_cmp_uintptr);
  for (size_t u = 0; u < UNITS; u++)
    if (units[u] != first[u])
      KT_FAILF ("unit %zu of the second thread is %p, not %p", u, units[u],
                first[u]);
  KT_CHECK_EQ (resident_units (), UNITS);
}

KT_MAIN (KT_CASE (free_units_unused_for_a_decay_period_go_back_down_to_1_mib),
         KT_CASE (a_new_thread_claims_the_resident_units_first))
