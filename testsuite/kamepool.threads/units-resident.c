/* units-resident.c -- kamepool.threads tests of what the free units'
   budget counts: the pages a released chunk touched, not its whole
   units, so that the chunks of short-lived threads that used a page
   each stay resident for the next threads.
   Guarded sampling is off: these tests assert where the pool places
   blocks and what it counts, and a guarded block is not the pool's.
   kptest-env: KAME_POOL_DECAY_MS=off KAME_POOL_HUGEPAGE=never KAME_POOL_GUARD_SAMPLE=0

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <pthread.h>
#include <stdint.h>

#include "kame_pool.h"
#include "kptest.h"
#include "kptest-pool.h"

#define UNIT ((size_t) 256 << 10)
#define SIZE ((size_t) 64)      /* a chunk carves a page of them at once */
/* More one-unit chunks than the 8 whole units that make the 2 MiB
   budget.  */
#define THREADS 12

static pthread_barrier_t all_allocated;
static void *units[THREADS];

/* One block, kept until every thread has one, so that each thread's
   chunk is a unit of its own; then freed, and the chunk released at the
   thread's exit.  */
static void *
one_block_together (void *arg)
{
  size_t i = (size_t) (uintptr_t) arg;
  void *p = kame_pool_malloc (SIZE);
  if (p == NULL)
    return "malloc failed";
  units[i] = (void *) ((uintptr_t) p & ~(uintptr_t) (UNIT - 1));
  pthread_barrier_wait (&all_allocated);
  kame_pool_free (p);
  return NULL;
}

static bool
run_threads_together (void)
{
  pthread_t t[THREADS];
  bool ok = true;
  if (pthread_barrier_init (&all_allocated, NULL, THREADS) != 0)
    return false;
  for (size_t i = 0; i < THREADS; i++)
    if (pthread_create (&t[i], NULL, one_block_together,
                        (void *) (uintptr_t) i) != 0)
      return false;             /* the others wait at the barrier */
  for (size_t i = 0; i < THREADS; i++)
    {
      void *ret;
      if (pthread_join (t[i], &ret) != 0 || ret != NULL)
        ok = false;
    }
  pthread_barrier_destroy (&all_allocated);
  return ok;
}

/* Twelve threads, one block each: twelve chunks that carved a page
   each.  Released at the threads' exits, all twelve stay resident and
   count a page each; counted by whole units, the budget took eight
   and gave the other four back.  The trim then gives them all back.  */
KT_TEST (released_chunks_count_the_pages_they_touched_in_the_budget)
{
  KT_CHECK (kame_pool_trim (0) >= 0);
  KT_CHECK_EQ (kt_pool_stats ().dirty_bytes, 0);
  KT_CHECK (run_threads_together ());
  void *sorted[THREADS];
  memcpy (sorted, units, sizeof sorted);
  qsort (sorted, THREADS, sizeof sorted[0], kt_cmp_uintptr);
  for (size_t i = 1; i < THREADS; i++)
    if (sorted[i] == sorted[i - 1])
      KT_FAILF ("two threads' blocks share the unit %p", sorted[i]);
  KT_CHECK_EQ (kt_pool_stats ().dirty_bytes, THREADS * KT_PAGE);
  for (size_t i = 0; i < THREADS; i++)
    {
      size_t n = kt_resident_count (units[i], UNIT);
      if (n != 1)
        KT_FAILF ("unit %zu: %zu pages resident, not 1", i, n);
    }
  KT_CHECK_EQ (kame_pool_trim (0), 1);
  KT_CHECK_EQ (kt_pool_stats ().dirty_bytes, 0);
  for (size_t i = 0; i < THREADS; i++)
    KT_CHECK_EQ (kt_resident_count (units[i], UNIT), 0);
}

/* The next generation takes those units back, resident: after the
   same twelve threads again, the same twelve units are the free ones
   kept, a page each.  */
KT_TEST (the_next_threads_take_the_touched_units_back)
{
  KT_CHECK (kame_pool_trim (0) >= 0);
  KT_CHECK (run_threads_together ());
  void *first[THREADS];
  memcpy (first, units, sizeof first);
  qsort (first, THREADS, sizeof first[0], kt_cmp_uintptr);
  KT_CHECK (run_threads_together ());
  KT_CHECK_EQ (kt_pool_stats ().dirty_bytes, THREADS * KT_PAGE);
  qsort (units, THREADS, sizeof units[0], kt_cmp_uintptr);
  for (size_t i = 0; i < THREADS; i++)
    if (units[i] != first[i])
      KT_FAILF ("unit %zu of the second generation is %p, not %p", i,
                units[i], first[i]);
  kame_pool_trim (0);
}

/* ---- A thread's chunks of given classes ------------------------------ */

/* What a thread of run_blocks allocates: COUNT blocks of SIZE, then a
   block of SIZE2 when that is not 0, all freed before it exits; the
   units of its first and last block.  */
struct blocks
{
  size_t size, count, size2;
  void *unit, *unit2;
};

static void *
blocks_thread (void *arg)
{
  struct blocks *b = arg;
  void *p[64], *q = NULL;
  if (b->count > 64)
    return "too many blocks";
  for (size_t i = 0; i < b->count; i++)
    if ((p[i] = kame_pool_malloc (b->size)) == NULL)
      return "malloc failed";
  if (b->size2 != 0 && (q = kame_pool_malloc (b->size2)) == NULL)
    return "malloc failed";
  b->unit = (void *) ((uintptr_t) p[0] & ~(uintptr_t) (UNIT - 1));
  b->unit2 = (void *) ((uintptr_t) q & ~(uintptr_t) (UNIT - 1));
  for (size_t i = 0; i < b->count; i++)
    kame_pool_free (p[i]);
  kame_pool_free (q);
  return NULL;
}

static bool
run_blocks (struct blocks *b)
{
  pthread_t t;
  void *ret;
  return pthread_create (&t, NULL, blocks_thread, b) == 0
         && pthread_join (t, &ret) == 0 && ret == NULL;
}

/* A thread leaves two units resident, a page each: the first its chunk
   of 64-byte blocks took (the higher: small chunks are placed from the
   top down), then its chunk of 4 KiB blocks.  The next thread's chunk
   of 4 KiB blocks takes the unit its class left, not the higher one.  */
KT_TEST (a_chunk_takes_the_unit_that_its_class_left)
{
  KT_CHECK (kame_pool_trim (0) >= 0);
  struct blocks first = { 64, 1, 4096, NULL, NULL };
  KT_CHECK (run_blocks (&first));
  KT_CHECK (first.unit != first.unit2);
  KT_CHECK_EQ (kt_pool_stats ().dirty_bytes, 2 * KT_PAGE);
  struct blocks next = { 4096, 1, 0, NULL, NULL };
  KT_CHECK (run_blocks (&next));
  if (next.unit != first.unit2)
    KT_FAILF ("the chunk of 4 KiB blocks took %p, not %p (the 64-byte "
              "blocks' unit was %p)", next.unit, first.unit2, first.unit);
  kame_pool_trim (0);
}

/* A unit keeps the pages an earlier chunk touched past the last one's:
   they are free pages like the others, and go back with the unit once
   it has been free for the decay's delay, not at the release.  8
   blocks of 4 KiB (8 pages), then 1 (8 kept), then 64 (the whole
   unit), then 1 (64 kept).  */
KT_TEST (a_released_chunk_keeps_the_pages_an_earlier_chunk_touched)
{
  if (KT_PAGE != 4096)
    KT_UNSUPPORTED ("pages of %zu bytes, not 4 KiB", KT_PAGE);
  KT_CHECK (kame_pool_trim (0) >= 0);
  static const size_t counts[] = { 8, 1, 64, 1 };
  static const size_t kept[] = { 8, 8, 64, 64 };
  void *unit = NULL;
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
    {
      struct blocks b = { 4096, counts[i], 0, NULL, NULL };
      KT_CHECK (run_blocks (&b));
      if (i == 0)
        unit = b.unit;
      else if (b.unit != unit)
        KT_FAILF ("thread %zu took unit %p, not %p", i, b.unit, unit);
      size_t dirty = kt_pool_stats ().dirty_bytes;
      size_t resident = kt_resident_count (unit, UNIT);
      if (dirty != kept[i] * KT_PAGE || resident != kept[i])
        KT_FAILF ("after %zu blocks: %zu bytes counted and %zu pages "
                  "resident, not %zu pages", counts[i], dirty, resident,
                  kept[i]);
    }
  kame_pool_trim (0);
}

KT_MAIN (KT_CASE (released_chunks_count_the_pages_they_touched_in_the_budget),
         KT_CASE (the_next_threads_take_the_touched_units_back),
         KT_CASE (a_chunk_takes_the_unit_that_its_class_left),
         KT_CASE (a_released_chunk_keeps_the_pages_an_earlier_chunk_touched))
