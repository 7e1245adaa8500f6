/* refill.c -- kamepool.api tests of where a thread's next block comes
   from once blocks are freed into chunks other than the active one: a
   chunk that was full waits on the partial list, in the order of the
   frees, while the active chunk has free blocks; and those blocks go
   before blocks the active chunk has never handed out.

   Guarded sampling is off: these tests assert where the pool places
   blocks and what it counts, and a guarded block is not the pool's.
   kptest-env: KAME_POOL_GUARD_SAMPLE=0

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <pthread.h>
#include <stdint.h>

#include "kame_pool.h"
#include "kptest.h"
#include "kptest-pool.h"

#define KIB ((size_t) 1024)
#define UNIT (256 * KIB)
#define SIZE ((size_t) 4096)    /* 64 blocks to a one-unit chunk */
#define PER_CHUNK (UNIT / SIZE)

static const char *why;
static size_t chunks_seen;

#define EXPECT(cond)                                                    \
  do { if (!(cond)) { why = #cond; return (void *) 1; } } while (0)

static uintptr_t
chunk_of (const void *p)
{
  return (uintptr_t) p & ~(uintptr_t) (UNIT - 1);
}

/* In a thread of its own, so that its heap starts with no chunk of the
   class: fill chunks A, B and C, take one block of D and free it, so
   that D is active with one free block; then free a block of A and one
   of B, which were full.  */
static void *
order_of_reuse (void *arg)
{
  (void) arg;
  static void *full[3 * PER_CHUNK];
  for (size_t i = 0; i < 3 * PER_CHUNK; i++)
    {
      full[i] = kame_pool_malloc (SIZE);
      EXPECT (full[i] != NULL);
    }
  void *a = full[5], *b = full[PER_CHUNK + 7];
  EXPECT (chunk_of (a) == chunk_of (full[0]));
  EXPECT (chunk_of (b) == chunk_of (full[PER_CHUNK]));
  EXPECT (chunk_of (a) != chunk_of (b));
  void *d = kame_pool_malloc (SIZE);
  EXPECT (d != NULL);
  EXPECT (chunk_of (d) != chunk_of (a) && chunk_of (d) != chunk_of (b)
          && chunk_of (d) != chunk_of (full[2 * PER_CHUNK]));
  kame_pool_free (d);
  kame_pool_free (a);
  kame_pool_free (b);
  /* D, the active chunk, still has a free block: it comes first.  */
  void *p1 = kame_pool_malloc (SIZE);
  EXPECT (p1 == d);
  /* Then A's and B's, in the order they were freed, before D carves
     a block it has never used.  */
  void *p2 = kame_pool_malloc (SIZE);
  EXPECT (p2 == a);
  void *p3 = kame_pool_malloc (SIZE);
  EXPECT (p3 == b);
  void *p4 = kame_pool_malloc (SIZE);
  EXPECT (chunk_of (p4) == chunk_of (d) && p4 != d);
  kame_pool_stats_t s = kt_pool_stats ();
  size_t row = kt_pool_class (&s, SIZE);
  EXPECT (row != SIZE_MAX);
  chunks_seen = s.classes[row].chunks;
  for (size_t i = 0; i < 3 * PER_CHUNK; i++)
    if (full[i] != a && full[i] != b)
      kame_pool_free (full[i]);
  kame_pool_free (p1);
  kame_pool_free (p2);
  kame_pool_free (p3);
  kame_pool_free (p4);
  return NULL;
}

KT_TEST (freed_blocks_of_full_chunks_go_before_never_used_ones)
{
  kame_pool_stats_t s = kt_pool_stats ();
  size_t row = kt_pool_class (&s, SIZE);
  KT_CHECK (row != SIZE_MAX);
  size_t before = s.classes[row].chunks;
  pthread_t t;
  void *ret;
  KT_CHECK_EQ (pthread_create (&t, NULL, order_of_reuse, NULL), 0);
  KT_CHECK_EQ (pthread_join (t, &ret), 0);
  if (ret != NULL)
    KT_FAILF ("%s", why);
  /* Four chunks in all: no fifth for the blocks freed.  */
  KT_CHECK_EQ (chunks_seen, before + 4);
}

KT_MAIN (KT_CASE (freed_blocks_of_full_chunks_go_before_never_used_ones))
