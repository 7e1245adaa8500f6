/* purge-huge.c -- kamepool.threads tests of the decay with huge page
   advice on (KAME_POOL_HUGEPAGE=1): the free units go back only as
   whole huge pages (2 MiB, 8 units), each in one call, so that no huge
   page is split by the decay; a huge page that holds a unit in use
   keeps its free units; kame_pool_trim gives back everything, split or
   not.  The large cache is off, so that a freed block's units are free
   units at once.
   kptest-env: KAME_POOL_DECAY_MS=1000 KAME_POOL_HUGEPAGE=1 KAME_POOL_LARGE_CACHE_CAP=0

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "kame_pool.h"
#include "kptest.h"
#include "kptest-pool.h"

#define KIB ((size_t) 1024)
#define MIB (KIB * KIB)
#define UNIT (256 * KIB)
#define HUGE (2 * MIB)
#define BLOCK (4 * MIB)         /* a dedicated chunk of 16 units */
/* How long a test waits for the decay at most: many delays, for a
   loaded machine or a sanitizer's build; never a bound on speed.  */
#define WAIT_MS 10000

static void
sleep_ms (long ms)
{
  struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
  while (nanosleep (&ts, &ts) != 0)
    ;
}

static char *block;

/* Allocate the block, write every page, free it, from a thread of its
   own, so that the main thread's heap holds nothing of it.  */
static void *
fill_and_free (void *arg)
{
  (void) arg;
  block = kame_pool_malloc (BLOCK);
  if (block == NULL)
    return "malloc failed";
  memset (block, 0x5a, BLOCK);
  kame_pool_free (block);
  return NULL;
}

/* Wait until the background purge has stopped (its passes over, its
   thread gone); false after WAIT_MS.  */
static bool
wait_for_quiet (void)
{
  for (long t = 0; t < WAIT_MS; t += 10)
    {
      kame_pool_stats_t s = kt_pool_stats ();
      if (s.background_starts > 0 && !s.background_running)
        return true;
      sleep_ms (10);
    }
  return false;
}

/* The 2 MiB-aligned huge pages that the block covers: each is all
   resident or all given back, its part of the block at least; those
   wholly inside the block all went back; each of the decay's calls gave
   back a huge page at most (the first of a region, whose first unit is
   the metadata and never advised, less that unit).  */
KT_TEST (the_decay_gives_back_whole_huge_pages_only)
{
  KT_CHECK_EQ (kame_pool_get_thp_policy (), KAME_POOL_THP_ALWAYS);
  KT_CHECK (kame_pool_trim (0) >= 0);
  kame_pool_stats_t s0 = kt_pool_stats ();
  pthread_t t;
  void *ret;
  KT_CHECK (pthread_create (&t, NULL, fill_and_free, NULL) == 0);
  KT_CHECK (pthread_join (t, &ret) == 0 && ret == NULL);
  KT_CHECK_EQ ((uintptr_t) block % UNIT, 0);
  KT_CHECK_EQ (kt_pool_stats ().dirty_bytes - s0.dirty_bytes, BLOCK);
  KT_CHECK (wait_for_quiet ());
  kame_pool_stats_t s1 = kt_pool_stats ();
  size_t calls = s1.discard_calls - s0.discard_calls;
  size_t pages = s1.discard_pages - s0.discard_pages;
  KT_CHECK (calls >= 1);
  KT_CHECK (pages <= calls * (HUGE / KT_PAGE));
  KT_CHECK (pages > (calls - 1) * (HUGE / KT_PAGE));
  size_t inside = 0, gone = 0;
  for (uintptr_t h = (uintptr_t) block & ~(uintptr_t) (HUGE - 1);
       h < (uintptr_t) block + BLOCK; h += HUGE)
    {
      uintptr_t lo = h < (uintptr_t) block ? (uintptr_t) block : h;
      uintptr_t hi = h + HUGE > (uintptr_t) block + BLOCK
                     ? (uintptr_t) block + BLOCK : h + HUGE;
      size_t n = kt_resident_count ((void *) lo, hi - lo);
      if (n != 0 && n != (hi - lo) / KT_PAGE)
        KT_FAILF ("the huge page at %#lx is split: %zu of its %zu pages "
                  "in the block resident", (unsigned long) h, n,
                  (size_t) ((hi - lo) / KT_PAGE));
      gone += n == 0;
      if (lo == h && hi == h + HUGE)
        {
          inside++;
          if (n != 0)
            KT_FAILF ("the free huge page at %#lx stayed", (unsigned long) h);
        }
    }
  KT_CHECK (inside >= 1);
  KT_CHECK (gone >= inside);
}

/* A huge page that holds a unit in use keeps its free units past the
   delay; kame_pool_trim gives them back.  A dedicated chunk of one
   unit, then two of 7 units, from a thread's first allocations: placed
   from the bottom of a region up, the middle one shares its huge pages
   with the first and with the last, which stay live.  */
static char *filler, *held;

static void *
fill_two_and_free_one (void *arg)
{
  (void) arg;
  filler = kame_pool_malloc (UNIT);
  block = kame_pool_malloc (7 * UNIT);
  held = kame_pool_malloc (7 * UNIT);
  if (filler == NULL || block == NULL || held == NULL)
    return "malloc failed";
  memset (block, 0x5a, 7 * UNIT);
  memset (held, 0x5a, 7 * UNIT);
  kame_pool_free (block);
  return NULL;
}

/* Does the huge page at H hold a unit in use, FILLER's or HELD's?  */
static bool
in_use (uintptr_t h)
{
  uintptr_t f = (uintptr_t) filler, hs = (uintptr_t) held;
  return (h + HUGE > f && h < f + UNIT)
         || (h + HUGE > hs && h < hs + 7 * UNIT);
}

KT_TEST (a_huge_page_in_use_keeps_its_free_units_until_a_trim)
{
  KT_CHECK (kame_pool_trim (0) >= 0);
  kame_pool_stats_t s0 = kt_pool_stats ();
  pthread_t t;
  void *ret;
  KT_CHECK (pthread_create (&t, NULL, fill_two_and_free_one, NULL) == 0);
  KT_CHECK (pthread_join (t, &ret) == 0 && ret == NULL);
  KT_CHECK_EQ (kt_pool_stats ().dirty_bytes - s0.dirty_bytes, 7 * UNIT);
  /* Several delays with nothing allocated: the decay runs.  */
  sleep_ms (3000);
  size_t kept = 0;
  uintptr_t b = (uintptr_t) block, e = b + 7 * UNIT;
  for (uintptr_t h = b & ~(uintptr_t) (HUGE - 1); h < e; h += HUGE)
    {
      uintptr_t lo = h < b ? b : h, hi = h + HUGE > e ? e : h + HUGE;
      size_t n = kt_resident_count ((void *) lo, hi - lo);
      if (in_use (h))
        {
          if (n != (hi - lo) / KT_PAGE)
            KT_FAILF ("the huge page at %#lx, in use, lost %zu pages",
                      (unsigned long) h, (hi - lo) / KT_PAGE - n);
          kept++;
        }
    }
  if (kept == 0)
    KT_FAILF ("the blocks at %p and %p share no huge page in use: the "
              "placement this test relies on changed", (void *) block,
              (void *) held);
  /* The trim gives them back, split or not.  */
  KT_CHECK_EQ (kame_pool_trim (0), 1);
  KT_CHECK_EQ (kt_resident_count (block, 7 * UNIT), 0);
  KT_CHECK_EQ (kt_resident_count (held, 7 * UNIT), 7 * UNIT / KT_PAGE);
  kame_pool_free (held);
  kame_pool_free (filler);
}

KT_MAIN (KT_CASE (the_decay_gives_back_whole_huge_pages_only),
         KT_CASE (a_huge_page_in_use_keeps_its_free_units_until_a_trim))
