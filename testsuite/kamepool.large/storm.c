/* storm.c -- kamepool.large: threads allocate large blocks of every
   tier, hand them to each other through a shared table and free what
   they receive; every block keeps its contents, and once the threads
   have exited the statistics are back where they started, apart from
   what the process-wide cache holds within its cap.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

/* kptest-timeout: 600 */

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "kame_pool.h"
#include "kptest.h"
#include "kptest-pool.h"

#define MiB ((size_t) 1 << 20)
#define UNIT ((size_t) 256 << 10)
#define THREADS 4
#define ROUNDS 1500
#define SLOTS 64

static _Atomic (uintptr_t) table[SLOTS];
static _Atomic (int) bad;

static size_t
pick_size (unsigned *seed)
{
  *seed = *seed * 1103515245u + 12345u;
  unsigned r = *seed >> 8;
  switch (r % 8)
    {
    case 0: case 1: case 2:
      return 33 * 1024 + r % (1024 * 1024);           /* dedicated */
    case 3: case 4:
      return MiB + r % (3 * MiB);                    /* dedicated */
    case 5: case 6:
      return 4 * MiB + 1 + r % (20 * MiB);           /* mapping */
    default:
      return r % 64 == 0 ? 33 * MiB + r % MiB : 300 * 1024; /* huge */
    }
}

/* Whether P, a block of N bytes (above 32768), has the usable size of
   its tier (kame_pool_malloc(3)): its class's size up to 208896 bytes,
   whole 256 KiB units up to 4 MiB, N rounded up to pages above.  A
   request for a mapping of up to 32 MiB may also take a bigger cached
   one whole, and which one depends on how the threads interleave, so
   for those the usable size is only bounded: at least its own, at most
   a 32 MiB mapping's.  */
static bool
usable_ok (const void *p, size_t n)
{
  size_t u = kame_pool_malloc_usable_size (p);
  if (n <= KT_SMALL_MAX)
    {
      for (size_t i = 0; i < KT_NCLASSES; i++)
        if (kt_classes[i] >= n)
          return u == kt_classes[i];
      return false;
    }
  if (n <= 4 * MiB)
    return u == (n + UNIT - 1) / UNIT * UNIT;
  size_t own = (KT_PAGE + n + KT_PAGE - 1) / KT_PAGE * KT_PAGE - KT_PAGE;
  if (own + KT_PAGE > 32 * MiB)
    return u == own;            /* huge: cached ones serve their size only */
  return u >= own && u <= 32 * MiB - KT_PAGE;
}

/* A block starts with its size and the tag of its maker, and ends with
   the tag.  */
static void
check_and_free (uintptr_t v)
{
  unsigned char *p = (unsigned char *) v;
  size_t n;
  memcpy (&n, p, sizeof n);
  unsigned char tag = p[sizeof n];
  if (!usable_ok (p, n) || p[n - 1] != tag)
    atomic_fetch_add (&bad, 1);
  kame_pool_free (p);
}

static void *
worker (void *arg)
{
  unsigned seed = (unsigned) (uintptr_t) arg * 7919u + 1;
  for (int i = 0; i < ROUNDS; i++)
    {
      size_t n = pick_size (&seed);
      unsigned char *p = kame_pool_malloc (n);
      if (p == NULL)
        {
          atomic_fetch_add (&bad, 1);
          continue;
        }
      unsigned char tag = (unsigned char) (seed >> 3);
      memcpy (p, &n, sizeof n);
      p[sizeof n] = tag;
      p[n - 1] = tag;
      uintptr_t old = atomic_exchange (&table[(seed >> 12) % SLOTS],
                                       (uintptr_t) p);
      if (old != 0)
        check_and_free (old);
    }
  return NULL;
}

KT_TEST (large_thread_handoffs_keep_contents_and_balance_the_stats)
{
  kame_pool_free (kame_pool_malloc (1));
  kame_pool_set_large_cache_cap (0);
  kame_pool_set_large_cache_cap (64 * MiB);
  kame_pool_stats_t s0 = kt_pool_stats ();
  pthread_t t[THREADS];
  for (uintptr_t i = 0; i < THREADS; i++)
    KT_CHECK (pthread_create (&t[i], NULL, worker, (void *) i) == 0);
  for (int i = 0; i < THREADS; i++)
    KT_CHECK (pthread_join (t[i], NULL) == 0);
  for (int i = 0; i < SLOTS; i++)
    {
      uintptr_t v = atomic_exchange (&table[i], 0);
      if (v != 0)
        check_and_free (v);
    }
  KT_CHECK_EQ (atomic_load (&bad), 0);
  kame_pool_stats_t s1 = kt_pool_stats ();
  printf ("after the storm: cache %zu KiB, dedicated %zu KiB, %zu mappings\n",
          s1.cache_bytes >> 10, s1.dedicated_chunk_bytes >> 10,
          s1.large_alloc_count);
  /* A bound: what the cache kept depends on how the threads
     interleaved.  */
  KT_CHECK (s1.cache_bytes <= 64 * MiB);
  KT_CHECK_EQ (s1.dedicated_chunk_bytes, s0.dedicated_chunk_bytes);
  KT_CHECK_EQ (s1.large_alloc_count, s0.large_alloc_count);
  KT_CHECK_EQ (s1.large_alloc_bytes, s0.large_alloc_bytes);
  kame_pool_set_large_cache_cap (0);
  /* The main thread keeps the block of each shared class it freed last
     (above, and the C library's start-up), which keeps its chunk: the
     trim gives them back.  */
  kame_pool_trim (0);
  kame_pool_stats_t s2 = kt_pool_stats ();
  KT_CHECK_EQ (s2.cache_bytes, 0);
  /* No cached chunk holds units now; a few small chunks may hold what
     the C library kept of the threads.  */
  KT_CHECK_EQ (s2.dedicated_chunk_bytes, s0.dedicated_chunk_bytes);
  KT_CHECK (s2.units_live <= s0.units_live + 4);
}

KT_MAIN (KT_CASE (large_thread_handoffs_keep_contents_and_balance_the_stats))
