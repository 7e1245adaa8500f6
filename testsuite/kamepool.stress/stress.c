/* stress.c -- kamepool.stress: many threads on few cores allocate,
   reallocate and free random sizes through the kame_pool_* API (so it
   runs in the sanitizer builds too), hand blocks to each other through
   shared exchange slots, and come and go while others work.  Every
   byte of every block carries a per-block pattern, checked before the
   block is reallocated or freed; the numbers of allocations and frees
   must match at the end, and the exited threads' chunks must all be
   released once their blocks are freed.

   Length.  By default the two tests run 35 and 20 seconds.  Set
   KAME_POOL_STRESS_LONG=1 for a long run (30 times longer: about 27
   minutes), or KAME_POOL_STRESS_SECONDS=N to run each test N seconds;
   raise the per-test alarm with KT_TIMEOUT, for example

     KAME_POOL_STRESS_LONG=1 KT_TIMEOUT=4000 ./stress.exe

   in the build's testsuite directory after a "make check".

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "kame_pool.h"
#include "kptest.h"
#include "kptest-pool.h"

#define KIB ((size_t) 1024)
#define MIB (KIB * KIB)

enum
{
  WORKERS = 8,          /* live at any time, on however many cores */
  SLOTS = 64            /* exchange slots shared by all workers */
};

struct block
{
  unsigned char *p;
  size_t n;
  uint64_t seed;
};

/* ---- Patterns ---------------------------------------------------------- */

static uint64_t
next_random (uint64_t *s)
{
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static uint64_t
pattern_word (uint64_t seed, size_t i)
{
  return (seed ^ (i * 0x9e3779b97f4a7c15u)) * 0xff51afd7ed558ccdu;
}

static void
paint (const struct block *b)
{
  size_t words = b->n / 8;
  uint64_t *w = (uint64_t *) b->p;   /* blocks are 16-byte aligned */
  for (size_t i = 0; i < words; i++)
    w[i] = pattern_word (b->seed, i);
  uint64_t last = pattern_word (b->seed, words);
  memcpy (b->p + words * 8, &last, b->n % 8);
}

/* The first byte that differs from the pattern, or N if none.  */
static size_t
first_bad_byte (const struct block *b, size_t n)
{
  size_t words = n / 8;
  const uint64_t *w = (const uint64_t *) b->p;
  size_t i = 0;
  while (i < words && w[i] == pattern_word (b->seed, i))
    i++;
  for (size_t at = i * 8; at < n; at++)
    {
      uint64_t want = pattern_word (b->seed, at / 8);
      if (b->p[at] != ((const unsigned char *) &want)[at % 8])
        return at;
    }
  return n;
}

/* ---- Shared state ------------------------------------------------------ */

static struct
{
  pthread_mutex_t lock;
  struct block b;
} slot[SLOTS];

static atomic_long allocs, frees, reallocs, handovers;
static atomic_int stop, corrupt;
static pthread_mutex_t why_lock = PTHREAD_MUTEX_INITIALIZER;
static char why[256];

static void
report (const char *what, const struct block *b, size_t at)
{
  pthread_mutex_lock (&why_lock);
  if (atomic_fetch_add (&corrupt, 1) == 0)
    snprintf (why, sizeof why, "%s: block %p of %zu bytes, byte %zu",
              what, (void *) b->p, b->n, at);
  pthread_mutex_unlock (&why_lock);
}

static bool
check (const struct block *b, size_t n, const char *what)
{
  size_t at = first_bad_byte (b, n);
  if (at == n)
    return true;
  report (what, b, at);
  return false;
}

static void
release (struct block *b)
{
  if (b->p == NULL)
    return;
  check (b, b->n, "corrupted before free");
  kame_pool_free (b->p);
  atomic_fetch_add_explicit (&frees, 1, memory_order_relaxed);
  b->p = NULL;
}

/* ---- Size profiles ----------------------------------------------------- */

/* Mostly small, some up to 1 MiB.  */
static size_t
size_mixed (uint64_t r)
{
  unsigned pick = (unsigned) (r >> 40) % 1000;
  if (pick < 900)
    return 1 + r % 512;
  if (pick < 990)
    return 513 + r % (32 * KIB - 512);
  return 32 * KIB + 1 + r % (MIB - 32 * KIB);
}

/* The upper tiers: dedicated chunks and mappings of their own.  */
static size_t
size_big (uint64_t r)
{
  unsigned pick = (unsigned) (r >> 40) % 100;
  if (pick < 40)
    return 1 + r % (32 * KIB);
  if (pick < 90)
    return 32 * KIB + 1 + r % (MIB - 32 * KIB);
  if (pick < 95)
    return MIB + 1 + r % (3 * MIB);
  return 4 * MIB + 1 + r % MIB;
}

/* What a run allocates: its sizes, how many blocks a worker holds and
   how many operations a worker lives for.  */
struct profile
{
  size_t (*size) (uint64_t);
  unsigned local;
  long min_ops, max_ops;
};

static const struct profile mixed = { size_mixed, 256, 1000, 40000 };
static const struct profile big = { size_big, 8, 50, 400 };

struct worker
{
  pthread_t thread;
  atomic_int done;
  bool live;
  uint64_t seed;
  long ops;
  const struct profile *profile;
};

/* ---- One worker -------------------------------------------------------- */

static bool
allocate (struct block *b, uint64_t *rs, size_t (*size) (uint64_t))
{
  uint64_t r = next_random (rs);
  size_t n = size (next_random (rs));
  unsigned how = (unsigned) (r % 20);
  void *p;
  if (how < 13)
    p = kame_pool_malloc (n);
  else if (how < 16)
    {
      p = kame_pool_calloc (1, n);
      if (p != NULL)
        for (size_t i = 0; i < n; i++)
          if (((unsigned char *) p)[i] != 0)
            {
              struct block z = { p, n, 0 };
              report ("calloc block not zeroed", &z, i);
              break;
            }
    }
  else if (how < 19)
    {
      size_t align = (size_t) 16 << (r >> 32) % 9;
      p = kame_pool_aligned_alloc (align, n);
      if (p != NULL && (uintptr_t) p % align != 0)
        {
          struct block z = { p, n, 0 };
          report ("aligned_alloc block misaligned", &z, align);
        }
    }
  else if (kame_pool_posix_memalign (&p, 64, n) != 0)
    p = NULL;
  if (p == NULL)
    {
      struct block z = { NULL, n, 0 };
      report ("allocation failed", &z, 0);
      return false;
    }
  if (kame_pool_malloc_usable_size (p) < n)
    {
      struct block z = { p, n, 0 };
      report ("usable size below the request", &z,
              kame_pool_malloc_usable_size (p));
    }
  atomic_fetch_add_explicit (&allocs, 1, memory_order_relaxed);
  b->p = p;
  b->n = n;
  b->seed = next_random (rs);
  paint (b);
  return true;
}

static void
reallocate (struct block *b, uint64_t *rs, size_t (*size) (uint64_t))
{
  size_t n = size (next_random (rs));
  size_t keep = n < b->n ? n : b->n;
  if (!check (b, b->n, "corrupted before realloc"))
    return;
  unsigned char *q = kame_pool_realloc (b->p, n);
  if (q == NULL)
    {
      report ("realloc failed", b, n);
      return;
    }
  b->p = q;
  check (b, keep, "realloc lost the contents");
  b->n = n;
  b->seed = next_random (rs);
  paint (b);
  atomic_fetch_add_explicit (&reallocs, 1, memory_order_relaxed);
}

/* Swap B with a random exchange slot: the block may have been made by
   any thread, live or gone.  */
static void
exchange (struct block *b, uint64_t *rs)
{
  unsigned s = (unsigned) (next_random (rs) % SLOTS);
  pthread_mutex_lock (&slot[s].lock);
  struct block t = slot[s].b;
  slot[s].b = *b;
  pthread_mutex_unlock (&slot[s].lock);
  *b = t;
  atomic_fetch_add_explicit (&handovers, 1, memory_order_relaxed);
}

static void *
worker_main (void *arg)
{
  struct worker *w = arg;
  uint64_t rs = w->seed;
  size_t (*size) (uint64_t) = w->profile->size;
  unsigned local = w->profile->local;
  struct block *mine = kame_pool_calloc (local, sizeof *mine);
  if (mine == NULL)
    {
      struct block z = { NULL, local * sizeof *mine, 0 };
      report ("allocation failed", &z, 0);
      atomic_store (&w->done, 1);
      return NULL;
    }
  atomic_fetch_add_explicit (&allocs, 1, memory_order_relaxed);
  for (long op = 0; op < w->ops; op++)
    {
      if (atomic_load_explicit (&stop, memory_order_relaxed)
          || atomic_load_explicit (&corrupt, memory_order_relaxed))
        break;
      uint64_t r = next_random (&rs);
      struct block *b = &mine[r % local];
      unsigned what = (unsigned) (r >> 32) % 100;
      if (b->p == NULL)
        allocate (b, &rs, size);
      else if (what < 40)
        release (b);
      else if (what < 65)
        reallocate (b, &rs, size);
      else if (what < 80)
        exchange (b, &rs);
      else if (!check (b, b->n, "corrupted while held"))
        break;
    }
  /* Leave some blocks to outlive this thread; free the rest.  */
  for (unsigned i = 0; i < local; i++)
    {
      if (mine[i].p != NULL && i % 3 == 0)
        exchange (&mine[i], &rs);
      release (&mine[i]);
    }
  kame_pool_free (mine);
  atomic_fetch_add_explicit (&frees, 1, memory_order_relaxed);
  atomic_store (&w->done, 1);
  return NULL;
}

/* ---- The driver -------------------------------------------------------- */

static double
now (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

static double
duration (double dflt)
{
  const char *s = getenv ("KAME_POOL_STRESS_SECONDS");
  if (s != NULL && atof (s) > 0)
    return atof (s);
  s = getenv ("KAME_POOL_STRESS_LONG");
  if (s != NULL && *s != '\0' && strcmp (s, "0") != 0)
    return dflt * 30;
  return dflt;
}

static void *
idle_thread (void *arg)
{
  return arg;
}

static long spawned;

static bool
spawn (struct worker *w, uint64_t *rs, const struct profile *profile)
{
  atomic_store (&w->done, 0);
  w->seed = next_random (rs) | 1;
  w->ops = profile->min_ops
           + (long) (next_random (rs)
                     % (uint64_t) (profile->max_ops - profile->min_ops));
  w->profile = profile;
  w->live = pthread_create (&w->thread, NULL, worker_main, w) == 0;
  spawned += w->live;
  return w->live;
}

/* Run WORKERS rolling workers for SECONDS; return NULL or what failed.  */
static void *
release_slots (void *arg)
{
  (void) arg;
  for (int s = 0; s < SLOTS; s++)
    release (&slot[s].b);
  return NULL;
}

static const char *
run_stress (double seconds, const struct profile *profile)
{
  static struct worker w[WORKERS];
  for (int s = 0; s < SLOTS; s++)
    pthread_mutex_init (&slot[s].lock, NULL);
  /* The C library allocates for its thread machinery (from the pool,
     when it is interposed) as the number of threads grows: let it do so
     before the baseline.  */
  for (int i = 0; i < WORKERS; i++)
    if (pthread_create (&w[i].thread, NULL, idle_thread, NULL) != 0)
      return "pthread_create failed";
  for (int i = 0; i < WORKERS; i++)
    pthread_join (w[i].thread, NULL);
  kame_pool_stats_t before = kt_pool_stats ();

  uint64_t rs = 0x2545f4914f6cdd1du;
  double end = now () + seconds;
  for (int i = 0; i < WORKERS; i++)
    if (!spawn (&w[i], &rs, profile))
      return "pthread_create failed";
  while (now () < end && !atomic_load (&corrupt))
    {
      for (int i = 0; i < WORKERS; i++)
        if (atomic_load (&w[i].done))
          {
            pthread_join (w[i].thread, NULL);
            if (!spawn (&w[i], &rs, profile))
              return "pthread_create failed";
          }
      struct timespec ms = { 0, 2000000 };
      nanosleep (&ms, NULL);
    }
  atomic_store (&stop, 1);
  for (int i = 0; i < WORKERS; i++)
    pthread_join (w[i].thread, NULL);
  /* The last blocks are freed by a thread of their own: its exit
     publishes its batch of remote frees, which this thread's would
     hold, and their chunks with them, until its next refill.  */
  pthread_t last;
  if (pthread_create (&last, NULL, release_slots, NULL) != 0)
    return "pthread_create failed";
  pthread_join (last, NULL);
  /* Before the printf, whose stdout buffer may be this process's first
     and claim a chunk.  */
  kame_pool_stats_t after = kt_pool_stats ();
  printf ("%ld threads, %ld allocations, %ld frees, %ld reallocs, "
          "%ld handovers in %.0f s\n", spawned, atomic_load (&allocs),
          atomic_load (&frees), atomic_load (&reallocs),
          atomic_load (&handovers), seconds);
  if (atomic_load (&corrupt))
    return why;
  if (atomic_load (&allocs) != atomic_load (&frees))
    {
      snprintf (why, sizeof why, "%ld allocations but %ld frees",
                atomic_load (&allocs), atomic_load (&frees));
      return why;
    }
  if (spawned < 3 * WORKERS)
    return "too few threads came and went";
  /* Less the emptied chunks the shared classes keep till the decay.  */
  size_t kc0, ku0, kc1, ku1;
  bool kept_ok = kt_shared_kept (&before, &kc0, &ku0)
                 & kt_shared_kept (&after, &kc1, &ku1);
  if (!kept_ok || after.chunks_live - kc1 != before.chunks_live - kc0
      || after.units_live - ku1 != before.units_live - ku0
      || after.large_alloc_count != before.large_alloc_count)
    {
      snprintf (why, sizeof why, "pool not back to its start: chunks %zu -> "
                "%zu, units %zu -> %zu (kept empty by the shared classes: "
                "%zu -> %zu chunks), mappings %zu -> %zu",
                before.chunks_live, after.chunks_live, before.units_live,
                after.units_live, kc0, kc1, before.large_alloc_count,
                after.large_alloc_count);
      return why;
    }
  return NULL;
}

KT_TEST (rolling_threads_mixed_sizes_cross_frees_no_corruption)
{
  const char *err = run_stress (duration (35), &mixed);
  if (err != NULL)
    KT_FAILF ("%s", err);
}

KT_TEST (rolling_threads_dedicated_and_large_blocks_no_corruption)
{
  const char *err = run_stress (duration (20), &big);
  if (err != NULL)
    KT_FAILF ("%s", err);
}

KT_MAIN (KT_CASE (rolling_threads_mixed_sizes_cross_frees_no_corruption),
         KT_CASE (rolling_threads_dedicated_and_large_blocks_no_corruption))
