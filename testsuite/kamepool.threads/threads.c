/* threads.c -- kamepool.threads tests: what happens to a thread's
   chunks when it exits (released, abandoned, given back to the OS),
   frees from key destructors and from other threads, and a
   producer/consumer pair.  Only the kame_pool_* API is used, so these
   run in the sanitizer builds too.

   Guarded sampling is off: these tests assert where the pool places
   blocks and what it counts, and a guarded block is not the pool's.
   kptest-env: KAME_POOL_GUARD_SAMPLE=0

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>

#include "kame_pool.h"
#include "kptest.h"
#include "kptest-pool.h"

#define KIB ((size_t) 1024)
#define MIB (KIB * KIB)
#define UNIT (256 * KIB)


static bool
run_thread (void *(*fn) (void *), void *arg)
{
  pthread_t t;
  void *ret;
  if (pthread_create (&t, NULL, fn, arg) != 0)
    return false;
  if (pthread_join (t, &ret) != 0)
    return false;
  return ret == NULL;
}

static void *
idle_thread (void *arg)
{
  return arg;
}

/* The C library allocates for its own thread machinery (with the pool,
   when it is interposed) the first time a thread is created: run idle
   threads before taking a baseline, so that it only counts the pool's
   own doing.  And the main thread keeps the block of each shared class
   it freed last (the C library's start-up frees one of 32 KiB), which
   keeps its chunk: the trim gives them back, as the trims of the tests
   would.  */
static bool
settle_thread_machinery (void)
{
  bool ok = run_thread (idle_thread, NULL) && run_thread (idle_thread, NULL);
  kame_pool_trim (0);
  return ok;
}

/* ---- Plateau over spawn/join cycles ---------------------------------- */

enum { KEEP = 24, MIX = 300, CYCLES = 200, WARM = 20 };

struct block
{
  void *p;
  size_t n;
};

/* The blocks the last thread left behind for the next one.  */
static struct block leftover[KEEP];

static size_t
mix_size (unsigned i)
{
  if (i % 97 == 0)
    return 240 * KIB + i * 1000;        /* dedicated */
  if (i % 13 == 0)
    return 5000 + i * 37;               /* medium classes */
  return 1 + i * 7 % 1200;              /* small classes */
}

static void *
cycle_thread (void *arg)
{
  unsigned cycle = (unsigned) (uintptr_t) arg;
  for (int k = 0; k < KEEP; k++)
    if (leftover[k].p != NULL)
      {
        if (!kt_painted (leftover[k].p, leftover[k].n, (uintptr_t) k))
          return "leftover block corrupted";
        kame_pool_free (leftover[k].p);
        leftover[k].p = NULL;
      }
  struct block mine[MIX];
  for (unsigned i = 0; i < MIX; i++)
    {
      mine[i].n = mix_size (i + cycle % 7);
      mine[i].p = kame_pool_malloc (mine[i].n);
      if (mine[i].p == NULL)
        return "malloc failed";
      kt_paint (mine[i].p, mine[i].n, i);
    }
  for (unsigned i = 0; i < MIX; i++)
    {
      if (!kt_painted (mine[i].p, mine[i].n, i))
        return "block corrupted";
      /* Every 12th block survives the thread, the others are freed.  */
      if (i % 12 == 5 && i / 12 < KEEP)
        {
          int k = (int) (i / 12);
          kt_paint (mine[i].p, mine[i].n, (uintptr_t) k);
          leftover[k] = mine[i];
        }
      else
        kame_pool_free (mine[i].p);
    }
  return NULL;
}

static bool
free_leftovers_here (void)
{
  for (int k = 0; k < KEEP; k++)
    if (leftover[k].p != NULL)
      {
        if (!kt_painted (leftover[k].p, leftover[k].n, (uintptr_t) k))
          return false;
        kame_pool_free (leftover[k].p);
        leftover[k].p = NULL;
      }
  return true;
}

static void *
free_leftovers_thread (void *arg)
{
  (void) arg;
  return free_leftovers_here () ? NULL : "leftover block corrupted";
}

/* Free the leftovers in a thread of their own: its frees wait in its
   batch of remote frees until it exits, which publishes them (the main
   thread's batch would hold them, and their chunks, until its next
   refill).  */
static bool
free_leftovers (void)
{
  return run_thread (free_leftovers_thread, NULL);
}

KT_TEST (chunks_and_units_plateau_over_200_spawn_join_cycles)
{
  /* The first cycles let the main thread's own allocations (thread
     creation, stdio) settle.  */
  for (unsigned c = 0; c < 5; c++)
    KT_CHECK (run_thread (cycle_thread, (void *) (uintptr_t) c));
  KT_CHECK (free_leftovers ());
  kame_pool_stats_t base = kt_pool_stats ();

  size_t chunks[CYCLES], units[CYCLES];
  for (unsigned c = 0; c < CYCLES; c++)
    {
      KT_CHECK (run_thread (cycle_thread, (void *) (uintptr_t) c));
      kame_pool_stats_t s = kt_pool_stats ();
      chunks[c] = s.chunks_live;
      units[c] = s.units_live;
    }
  size_t early_chunks = 0, early_units = 0;
  size_t late_chunks = 0, late_units = 0;
  for (unsigned c = WARM; c < CYCLES; c++)
    {
      size_t *mc = c < CYCLES / 2 ? &early_chunks : &late_chunks;
      size_t *mu = c < CYCLES / 2 ? &early_units : &late_units;
      if (chunks[c] > *mc)
        *mc = chunks[c];
      if (units[c] > *mu)
        *mu = units[c];
    }
  if (late_chunks > early_chunks || late_units > early_units)
    KT_FAILF ("no plateau: cycles %d..%d peak at %zu chunks, %zu units; "
              "cycles %d..%d at %zu chunks, %zu units", WARM,
              CYCLES / 2 - 1, early_chunks, early_units, CYCLES / 2,
              CYCLES - 1, late_chunks, late_units);
  /* The leftovers hold at most one chunk per block.  */
  KT_CHECK (late_chunks <= base.chunks_live + KEEP);

  /* Once the last blocks are freed, the exited threads' chunks are all
     released.  */
  KT_CHECK (free_leftovers ());
  kame_pool_stats_t end = kt_pool_stats ();
  KT_CHECK_EQ (end.chunks_live, base.chunks_live);
  KT_CHECK_EQ (end.units_live, base.units_live);
  KT_CHECK_EQ (end.dedicated_chunk_bytes, base.dedicated_chunk_bytes);
}

/* ---- A free in a key destructor --------------------------------------- */

static pthread_key_t late_key;
static atomic_int destructor_ran;

struct key_blocks
{
  void *small;
  void *dedicated;
  void *large;
};

static void
late_destructor (void *v)
{
  struct key_blocks *kb = v;
  if (kt_painted (kb->small, 3000, 1) && kt_painted (kb->dedicated, 300 * KIB, 2)
      && kt_painted (kb->large, 5 * MIB, 3))
    atomic_store (&destructor_ran, 1);
  else
    atomic_store (&destructor_ran, -1);
  kame_pool_free (kb->small);
  kame_pool_free (kb->dedicated);
  kame_pool_free (kb->large);
  kame_pool_free (kb);
}

static void *
key_thread (void *arg)
{
  (void) arg;
  struct key_blocks *kb = kame_pool_malloc (sizeof *kb);
  if (kb == NULL)
    return "malloc failed";
  kb->small = kame_pool_malloc (3000);
  kb->dedicated = kame_pool_malloc (300 * KIB);
  kb->large = kame_pool_malloc (5 * MIB);
  if (kb->small == NULL || kb->dedicated == NULL || kb->large == NULL)
    return "malloc failed";
  kt_paint (kb->small, 3000, 1);
  kt_paint (kb->dedicated, 300 * KIB, 2);
  kt_paint (kb->large, 5 * MIB, 3);
  pthread_setspecific (late_key, kb);
  return NULL;
}

KT_TEST (free_in_a_key_destructor_after_the_heap_is_gone)
{
  /* The library's own key exists once the process has allocated; a key
     created after it has its destructor run after the library's.  */
  void *first = kame_pool_malloc (16);
  KT_CHECK (first != NULL);
  KT_CHECK_EQ (pthread_key_create (&late_key, late_destructor), 0);
  KT_CHECK (settle_thread_machinery ());
  kame_pool_stats_t before = kt_pool_stats ();
  for (int round = 0; round < 20; round++)
    {
      atomic_store (&destructor_ran, 0);
      KT_CHECK (run_thread (key_thread, NULL));
      KT_CHECK_EQ (atomic_load (&destructor_ran), 1);
      kame_pool_stats_t s = kt_pool_stats ();
      KT_CHECK_EQ (s.chunks_live, before.chunks_live);
      KT_CHECK_EQ (s.units_live, before.units_live);
      KT_CHECK_EQ (s.dedicated_chunk_bytes, before.dedicated_chunk_bytes);
      KT_CHECK_EQ (s.large_alloc_count, before.large_alloc_count);
    }
  kame_pool_free (first);
}

/* ---- Blocks outliving their thread ------------------------------------ */

enum { ORPHANS = 3000 };
static struct block orphan[ORPHANS];

static size_t
orphan_size (unsigned i)
{
  if (i % 500 == 0)
    return 6 * MIB + i;                 /* large */
  if (i % 50 == 0)
    return 240 * KIB + i * 100;         /* dedicated */
  return 1 + i * 11 % 20000;
}

static void *
orphan_maker (void *arg)
{
  (void) arg;
  for (unsigned i = 0; i < ORPHANS; i++)
    {
      orphan[i].n = orphan_size (i);
      orphan[i].p = kame_pool_malloc (orphan[i].n);
      if (orphan[i].p == NULL)
        return "malloc failed";
      kt_paint (orphan[i].p, orphan[i].n, i);
    }
  return NULL;
}

static void *
orphan_freer (void *arg)
{
  (void) arg;
  for (unsigned i = 0; i < ORPHANS; i++)
    {
      if (!kt_painted (orphan[i].p, orphan[i].n, i))
        return "orphan block corrupted";
      kame_pool_free (orphan[i].p);
    }
  return NULL;
}

KT_TEST (blocks_of_an_exited_thread_are_freed_by_another)
{
  void *first = kame_pool_malloc (16);
  KT_CHECK (first != NULL);
  KT_CHECK (settle_thread_machinery ());
  kame_pool_stats_t before = kt_pool_stats ();
  KT_CHECK (run_thread (orphan_maker, NULL));
  kame_pool_stats_t orphaned = kt_pool_stats ();
  /* The exited thread's chunks still hold live blocks: abandoned, not
     released.  */
  KT_CHECK (orphaned.chunks_live > before.chunks_live);
  KT_CHECK_EQ (orphaned.large_alloc_count - before.large_alloc_count,
               ORPHANS / 500);
  KT_CHECK (run_thread (orphan_freer, NULL));
  kame_pool_stats_t after = kt_pool_stats ();
  /* Less the emptied chunks the shared classes keep till the decay.  */
  size_t kc0, ku0, kc1, ku1;
  KT_CHECK (kt_shared_kept (&before, &kc0, &ku0));
  KT_CHECK (kt_shared_kept (&after, &kc1, &ku1));
  KT_CHECK_EQ (after.chunks_live - kc1, before.chunks_live - kc0);
  KT_CHECK_EQ (after.units_live - ku1, before.units_live - ku0);
  KT_CHECK_EQ (after.dedicated_chunk_bytes, before.dedicated_chunk_bytes);
  KT_CHECK_EQ (after.large_alloc_count, before.large_alloc_count);

  /* The same blocks freed by the main thread, which owns a heap.  */
  KT_CHECK (run_thread (orphan_maker, NULL));
  for (unsigned i = 0; i < ORPHANS; i++)
    {
      KT_CHECK (kt_painted (orphan[i].p, orphan[i].n, i));
      kame_pool_free (orphan[i].p);
    }
  /* The main thread's frees wait in its batch of remote frees: the
     trim publishes them.  */
  kame_pool_trim (0);
  after = kt_pool_stats ();
  KT_CHECK_EQ (after.chunks_live, before.chunks_live);
  KT_CHECK_EQ (after.units_live, before.units_live);
  kame_pool_free (first);
}

/* ---- Producer and consumer -------------------------------------------- */

enum { RING = 1024, HANDED = 400000 };
static struct block ring[RING];
static atomic_size_t ring_head, ring_tail;   /* head: produced, tail: taken */
static atomic_size_t produced, consumed;

static void *
producer (void *arg)
{
  (void) arg;
  for (size_t i = 0; i < HANDED; i++)
    {
      size_t n = i % 1000 == 0 ? 50 * KIB + i % 7 : 1 + i * 31 % 2000;
      void *p = kame_pool_malloc (n);
      if (p == NULL)
        return "malloc failed";
      kt_paint (p, n < 64 ? n : 64, i);
      while (atomic_load_explicit (&ring_head, memory_order_relaxed)
             - atomic_load_explicit (&ring_tail, memory_order_acquire)
             == RING)
        sched_yield ();
      size_t h = atomic_load_explicit (&ring_head, memory_order_relaxed);
      ring[h % RING].p = p;
      ring[h % RING].n = n;
      atomic_store_explicit (&ring_head, h + 1, memory_order_release);
      atomic_fetch_add (&produced, 1);
    }
  return NULL;
}

static void *
consumer (void *arg)
{
  (void) arg;
  for (size_t i = 0; i < HANDED; i++)
    {
      while (atomic_load_explicit (&ring_head, memory_order_acquire)
             == atomic_load_explicit (&ring_tail, memory_order_relaxed))
        sched_yield ();
      size_t t = atomic_load_explicit (&ring_tail, memory_order_relaxed);
      struct block b = ring[t % RING];
      atomic_store_explicit (&ring_tail, t + 1, memory_order_release);
      if (!kt_painted (b.p, b.n < 64 ? b.n : 64, i))
        return "handed block corrupted";
      kame_pool_free (b.p);
      atomic_fetch_add (&consumed, 1);
    }
  return NULL;
}

KT_TEST (producer_consumer_pair_hands_over_400000_blocks)
{
  void *first = kame_pool_malloc (16);
  KT_CHECK (first != NULL);
  KT_CHECK (settle_thread_machinery ());
  kame_pool_stats_t before = kt_pool_stats ();
  pthread_t pt, ct;
  void *pr, *cr;
  KT_CHECK_EQ (pthread_create (&ct, NULL, consumer, NULL), 0);
  KT_CHECK_EQ (pthread_create (&pt, NULL, producer, NULL), 0);
  KT_CHECK_EQ (pthread_join (pt, &pr), 0);
  KT_CHECK_EQ (pthread_join (ct, &cr), 0);
  if (pr != NULL || cr != NULL)
    KT_FAILF ("producer: %s; consumer: %s", pr ? (char *) pr : "ok",
              cr ? (char *) cr : "ok");
  KT_CHECK_EQ (atomic_load (&produced), HANDED);
  KT_CHECK_EQ (atomic_load (&consumed), HANDED);
  kame_pool_stats_t after = kt_pool_stats ();
  /* The 50 KiB blocks' class is a shared one, which keeps its emptied
     chunks till the decay; nothing else stays.  */
  size_t kc0, ku0, kc1, ku1;
  KT_CHECK (kt_shared_kept (&before, &kc0, &ku0));
  KT_CHECK (kt_shared_kept (&after, &kc1, &ku1));
  KT_CHECK_EQ (after.chunks_live - kc1, before.chunks_live - kc0);
  KT_CHECK_EQ (after.units_live - ku1, before.units_live - ku0);
  kame_pool_free (first);
}

/* A thread keeps the chunks it filled; another thread frees every
   block of them (remote frees into owned, full chunks).  When the first
   thread allocates as many blocks again, it must find those frees
   before it claims (the empty ones are released and claimed again):
   the chunk and unit counts do not move.  */
enum { FILL_CHUNKS = 8, FILL_BLOCKS = FILL_CHUNKS * 32 };  /* 8 KiB class */
static void *fill[FILL_BLOCKS];

static void *
free_the_fill (void *arg)
{
  (void) arg;
  for (int i = 0; i < FILL_BLOCKS; i++)
    kame_pool_free (fill[i]);
  return NULL;
}

KT_TEST (remote_frees_into_full_chunks_are_collected_before_a_claim)
{
  KT_CHECK (settle_thread_machinery ());
  kame_pool_stats_t before = kt_pool_stats ();
  for (int i = 0; i < FILL_BLOCKS; i++)
    {
      fill[i] = kame_pool_malloc (8 * KIB);
      KT_CHECK (fill[i] != NULL);
    }
  kame_pool_stats_t filled = kt_pool_stats ();
  KT_CHECK_EQ (filled.chunks_live - before.chunks_live, FILL_CHUNKS);
  KT_CHECK (run_thread (free_the_fill, NULL));
  for (int i = 0; i < FILL_BLOCKS; i++)
    {
      fill[i] = kame_pool_malloc (8 * KIB);
      KT_CHECK (fill[i] != NULL);
    }
  kame_pool_stats_t again = kt_pool_stats ();
  KT_CHECK_EQ (again.chunks_live, filled.chunks_live);
  KT_CHECK_EQ (again.units_live, filled.units_live);
  for (int i = 0; i < FILL_BLOCKS; i++)
    kame_pool_free (fill[i]);
}

/* ---- Adoption of an abandoned chunk ------------------------------------ */

/* A class that neither the C library nor the other tests use.  */
enum { ADOPT_CLASS = 1280, ADOPT_BLOCKS = 5 };
static void *adopt_left[ADOPT_BLOCKS];

/* Allocate ADOPT_BLOCKS blocks of ADOPT_CLASS and exit with them live:
   the chunk, which has room for more, is abandoned with its hint
   set.  */
static void *
leave_a_chunk_with_room (void *arg)
{
  (void) arg;
  for (int i = 0; i < ADOPT_BLOCKS; i++)
    if ((adopt_left[i] = kame_pool_malloc (ADOPT_CLASS)) == NULL)
      return "malloc failed";
  return NULL;
}

/* The chunk that an exiting thread abandoned with room in it is found
   through the hint bits and adopted by the next refill of its class in
   another thread, instead of a chunk claimed anew: the number of
   chunks of the class stays 1, and the abandoned chunk is owned
   again.  */
KT_TEST (a_refill_adopts_the_chunk_an_exited_thread_abandoned)
{
  KT_CHECK (settle_thread_machinery ());
  kame_pool_stats_t s0 = kt_pool_stats ();
  size_t k = kt_pool_class (&s0, ADOPT_CLASS);
  KT_CHECK (k != SIZE_MAX);
  KT_CHECK_EQ (s0.classes[k].chunks, 0);
  KT_CHECK (run_thread (leave_a_chunk_with_room, NULL));
  kame_pool_stats_t s1 = kt_pool_stats ();
  KT_CHECK_EQ (s1.classes[k].chunks, 1);
  KT_CHECK_EQ (s1.classes[k].live_blocks, ADOPT_BLOCKS);
  KT_CHECK (s1.abandoned_chunks >= 1);

  void *p = kame_pool_malloc (ADOPT_CLASS);
  KT_CHECK (p != NULL);
  kame_pool_stats_t s2 = kt_pool_stats ();
  KT_CHECK_EQ (s2.classes[k].chunks, 1);
  KT_CHECK_EQ (s2.classes[k].live_blocks, ADOPT_BLOCKS + 1);
  KT_CHECK_EQ (s2.chunks_live, s1.chunks_live);
  KT_CHECK_EQ (s2.abandoned_chunks, s1.abandoned_chunks - 1);

  /* The adopter owns the chunk, now its active chunk of the class: its
     frees into it are owner frees, none waits to be collected, and the
     chunk stays.  */
  kame_pool_free (p);
  for (int i = 0; i < ADOPT_BLOCKS; i++)
    kame_pool_free (adopt_left[i]);
  kame_pool_stats_t s3 = kt_pool_stats ();
  KT_CHECK_EQ (s3.classes[k].chunks, 1);
  KT_CHECK_EQ (s3.classes[k].live_blocks, 0);
  KT_CHECK_EQ (s3.remote_pending, s2.remote_pending);
  KT_CHECK_EQ (s3.abandoned_chunks, s2.abandoned_chunks);
}

/* ---- Thread-exit reclaim ---------------------------------------------- */

/* 73 blocks of the 3584 class fill one unit (73 * 3584 <= 256 KiB).  */
enum { RECLAIM_CLASS = 3584, RECLAIM_BLOCKS = 73 };
static void *reclaim_first;

static void *
touch_and_free_one_chunk (void *arg)
{
  (void) arg;
  void *p[RECLAIM_BLOCKS];
  for (int i = 0; i < RECLAIM_BLOCKS; i++)
    {
      p[i] = kame_pool_malloc (RECLAIM_CLASS);
      if (p[i] == NULL)
        return "malloc failed";
      memset (p[i], 0x77, RECLAIM_CLASS);
    }
  reclaim_first = p[0];
  for (int i = 0; i < RECLAIM_BLOCKS; i++)
    kame_pool_free (p[i]);
  return NULL;
}

/* Resident pages of the unit that holds P.  */
static long
resident_pages_of_unit (const void *p)
{
  uintptr_t base = (uintptr_t) p & ~(uintptr_t) (UNIT - 1);
  size_t n = UNIT / KT_PAGE;
  unsigned char vec[UNIT / KT_PAGE];
  if (mincore ((void *) base, UNIT, vec) != 0)
    return -1;
  long count = 0;
  for (size_t i = 0; i < n; i++)
    count += vec[i] & 1;
  return count;
}

KT_TEST (thread_exit_reclaim_keeps_pages_for_the_trim_and_decay)
{
  void *first = kame_pool_malloc (16);
  KT_CHECK (first != NULL);
  long all = (long) (UNIT / KT_PAGE);
  KT_CHECK (settle_thread_machinery ());
  kame_pool_stats_t before = kt_pool_stats ();

  kame_pool_set_thread_exit_reclaim (0);
  KT_CHECK (run_thread (touch_and_free_one_chunk, NULL));
  KT_CHECK_EQ (kt_pool_stats ().chunks_live, before.chunks_live);
  long kept = resident_pages_of_unit (reclaim_first);
  if (kept != all)
    KT_FAILF ("reclaim off: %ld of %ld pages resident after exit", kept,
              all);

  /* On: the unit is one of the free units kept resident, which
     kame_pool_trim gives back.  */
  kame_pool_set_thread_exit_reclaim (1);
  kame_pool_trim (0);
  size_t dirty = kt_pool_stats ().dirty_bytes;
  KT_CHECK (run_thread (touch_and_free_one_chunk, NULL));
  kame_pool_stats_t after = kt_pool_stats ();
  KT_CHECK_EQ (after.chunks_live, before.chunks_live);
  KT_CHECK_EQ (after.dirty_bytes, dirty + UNIT);
  KT_CHECK_EQ (resident_pages_of_unit (reclaim_first), all);
  kame_pool_trim (0);
  KT_CHECK_EQ (kt_pool_stats ().dirty_bytes, 0);
  long left = resident_pages_of_unit (reclaim_first);
  if (left != 0)
    KT_FAILF ("reclaim on: %ld of %ld pages resident after the trim", left,
              all);
  kame_pool_free (first);
}

/* ---- Threads that race for the first allocation ---------------------- */

enum { RACERS = 8, RACES = 40 };

static pthread_barrier_t race_start;

/* Each racer asks for a small block, a dedicated one and an aligned
   one at once, right after the barrier; a block of the C library (the
   pool not ready yet) has usable size 0.  */
static void *
racer (void *arg)
{
  static const size_t sizes[] = { 48, 100 * KIB, 3000 };
  void *bad = NULL;
  pthread_barrier_wait (&race_start);
  for (int k = 0; k < 3; k++)
    {
      void *p = k == 2 ? kame_pool_aligned_alloc (256, sizes[k])
                       : kame_pool_malloc (sizes[k]);
      if (p == NULL || kame_pool_malloc_usable_size (p) < sizes[k])
        bad = arg;
      kame_pool_free (p);
    }
  return bad;
}

/* One race, in a child process of its own, whose pool is not
   initialised yet (unless the C library's start-up allocated through
   it, when the pool interposes malloc): 0 when every racer got pool
   blocks.  */
static int
race_once (void)
{
  static const char name[RACERS];
  pthread_t t[RACERS];
  if (pthread_barrier_init (&race_start, NULL, RACERS) != 0)
    return 2;
  for (int i = 0; i < RACERS; i++)
    if (pthread_create (&t[i], NULL, racer, (void *) &name[i]) != 0)
      return 2;
  int status = 0;
  for (int i = 0; i < RACERS; i++)
    {
      void *ret;
      if (pthread_join (t[i], &ret) != 0)
        return 2;
      if (ret != NULL)
        status = 1;
    }
  return status;
}

KT_TEST (threads_racing_for_the_first_allocation_all_get_pool_blocks)
{
  for (int race = 0; race < RACES; race++)
    {
      fflush (stdout);
      pid_t pid = fork ();
      if (pid < 0)
        KT_FAILF ("race %d: fork failed", race);
      if (pid == 0)
        _exit (race_once ());
      int status;
      if (!kt_wait (pid, &status))
        KT_FAILF ("race %d: waitpid failed", race);
      if (!WIFEXITED (status) || WEXITSTATUS (status) == 2)
        KT_FAILF ("race %d: the child could not run its threads", race);
      if (WEXITSTATUS (status) != 0)
        KT_FAILF ("race %d: a thread got a block of the C library while "
                  "another initialised the pool", race);
    }
}

KT_MAIN (KT_CASE (chunks_and_units_plateau_over_200_spawn_join_cycles),
         KT_CASE (free_in_a_key_destructor_after_the_heap_is_gone),
         KT_CASE (blocks_of_an_exited_thread_are_freed_by_another),
         KT_CASE (producer_consumer_pair_hands_over_400000_blocks),
         KT_CASE (remote_frees_into_full_chunks_are_collected_before_a_claim),
         KT_CASE (a_refill_adopts_the_chunk_an_exited_thread_abandoned),
         KT_CASE (thread_exit_reclaim_keeps_pages_for_the_trim_and_decay),
         KT_CASE (threads_racing_for_the_first_allocation_all_get_pool_blocks))
