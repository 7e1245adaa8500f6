/* purge-off.c -- kamepool.threads test of KAME_POOL_BACKGROUND_PURGE=0:
   no purge thread is ever made, and memory freed by a program that then
   allocates nothing stays resident, as before the thread existed.
   Guarded sampling is off: these tests assert where the pool places
   blocks and what it counts, and a guarded block is not the pool's.
   kptest-env: KAME_POOL_DECAY_MS=20 KAME_POOL_BACKGROUND_PURGE=0 KAME_POOL_GUARD_SAMPLE=0

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <pthread.h>
#include <time.h>

#include "kame_pool.h"
#include "kptest.h"
#include "kptest-pool.h"

#define UNIT ((size_t) 256 << 10)
#define SIZE ((size_t) 4096)
#define N (16 * UNIT / SIZE)    /* 16 one-unit chunks */

static void *
fill_and_free (void *arg)
{
  static void *p[N];
  (void) arg;
  for (size_t i = 0; i < N; i++)
    {
      if ((p[i] = kame_pool_malloc (SIZE)) == NULL)
        return "malloc failed";
      memset (p[i], 1, SIZE);
    }
  for (size_t i = 0; i < N; i++)
    kame_pool_free (p[i]);
  return NULL;
}

/* 16 units freed by an exited thread, then ten delays with no
   allocation: all still resident, and no thread was made.  */
KT_TEST (with_the_background_purge_off_freed_units_stay)
{
  KT_CHECK (kame_pool_trim (0) >= 0);
  pthread_t t;
  void *ret;
  KT_CHECK (pthread_create (&t, NULL, fill_and_free, NULL) == 0);
  KT_CHECK (pthread_join (t, &ret) == 0 && ret == NULL);
  KT_CHECK_EQ (kt_pool_stats ().dirty_bytes, 16 * UNIT);
  struct timespec ts = { 0, 200 * 1000000 };
  while (nanosleep (&ts, &ts) != 0)
    ;
  kame_pool_stats_t s = kt_pool_stats ();
  KT_CHECK_EQ (s.dirty_bytes, 16 * UNIT);
  KT_CHECK_EQ (s.background_starts, 0);
  KT_CHECK_EQ (s.background_passes, 0);
  KT_CHECK_EQ (s.background_running, 0);
}

KT_MAIN (KT_CASE (with_the_background_purge_off_freed_units_stay))
