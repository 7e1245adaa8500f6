/* sized.c -- kamepool.api: kame_pool_free_sized and
   kame_pool_free_aligned_sized free a block given the size it was
   allocated with, or a smaller one (realloc shrinks in place), and the
   alignment it was allocated with; NULL is nothing.  Their misuse is in
   kamepool.misuse.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include "kame_pool.h"
#include "kptest.h"

/* The live bytes of the small classes (exact: one thread).  */
static size_t
live_small (void)
{
  kame_pool_stats_t s = { .version = KAME_POOL_STATS_VERSION };
  kame_pool_get_stats (&s);
  return s.small_live_bytes;
}

KT_TEST (sized_frees_of_the_right_size_free)
{
  kame_pool_free (kame_pool_malloc (100));
  size_t before = live_small ();
  char *p = kame_pool_malloc (100);
  size_t usable = kame_pool_malloc_usable_size (p);
  KT_CHECK_EQ (live_small (), before + usable);
  kame_pool_free_sized (p, 100);
  KT_CHECK_EQ (live_small (), before);
  p = kame_pool_malloc (100);
  kame_pool_free_sized (p, usable);     /* the whole block is fine too */
  KT_CHECK_EQ (live_small (), before);
  p = kame_pool_malloc (1000);
  char *q = kame_pool_realloc (p, 10);
  KT_CHECK (q == p);                    /* shrunk in place */
  kame_pool_free_sized (q, 10);
  KT_CHECK_EQ (live_small (), before);
  p = kame_pool_aligned_alloc (256, 300);
  KT_CHECK (p != NULL && ((uintptr_t) p & 255) == 0);
  kame_pool_free_aligned_sized (p, 256, 300);
  KT_CHECK_EQ (live_small (), before);
  kame_pool_free_sized (NULL, 5);
  kame_pool_free_aligned_sized (NULL, 3, 5);
  KT_CHECK_EQ (live_small (), before);
}

KT_TEST (sized_frees_of_large_blocks_free)
{
  kame_pool_stats_t s = { .version = KAME_POOL_STATS_VERSION };
  kame_pool_get_stats (&s);
  size_t count = s.large_alloc_count;
  char *p = kame_pool_aligned_alloc (1 << 20, 9 << 20);
  KT_CHECK (p != NULL);
  kame_pool_get_stats (&s);
  KT_CHECK_EQ (s.large_alloc_count, count + 1);
  kame_pool_free_aligned_sized (p, 1 << 20, 9 << 20);
  kame_pool_get_stats (&s);
  KT_CHECK_EQ (s.large_alloc_count, count);
}

KT_MAIN (KT_CASE (sized_frees_of_the_right_size_free),
         KT_CASE (sized_frees_of_large_blocks_free))
