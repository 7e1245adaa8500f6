/* kamepool_demo.c -- a small tour of libkamepool: blocks from the pool,
   a free from another thread, and the statistics.  Build it against
   the installed library with
     cc kamepool_demo.c $(pkg-config --cflags --libs kamepool) -pthread
   Linking -lkamepool also makes plain malloc and free the pool's.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <kame_pool.h>

#define N 100000

static void *blocks[N];

/* Free, in another thread, what the main thread allocated.  */
static void *
free_them (void *arg)
{
  (void) arg;
  for (int i = 0; i < N; i++)
    kame_pool_free (blocks[i]);
  return NULL;
}

int
main (void)
{
  for (int i = 0; i < N; i++)
    {
      blocks[i] = kame_pool_malloc (16 + i % 500);
      if (blocks[i] == NULL)
        return EXIT_FAILURE;
      memset (blocks[i], 0xa5, 16 + i % 500);
    }
  void *page = kame_pool_aligned_alloc (4096, 4096);
  void *big = kame_pool_malloc (1 << 20);
  printf ("4096-byte block at %p (page-aligned: %s), usable %zu\n", page,
          ((unsigned long) page & 4095) == 0 ? "yes" : "no",
          kame_pool_malloc_usable_size (page));
  printf ("1 MiB block: usable %zu\n", kame_pool_malloc_usable_size (big));
  void *plain = malloc (100);
  printf ("plain malloc served by the pool: %s\n",
          kame_pool_malloc_usable_size (plain) != 0 ? "yes" : "no");
  free (plain);

  kame_pool_stats_t s = { .version = KAME_POOL_STATS_VERSION };
  kame_pool_get_stats (&s);
  printf ("after %d allocations: %zu chunks live, %zu units, "
          "%zu MiB reserved\n", N, s.chunks_live, s.units_live,
          s.bytes_reserved >> 20);

  pthread_t t;
  if (pthread_create (&t, NULL, free_them, NULL) != 0)
    return EXIT_FAILURE;
  pthread_join (t, NULL);
  kame_pool_free (page);
  kame_pool_free (big);
  kame_pool_get_stats (&s);
  printf ("after freeing them in another thread: %zu chunks live\n",
          s.chunks_live);
  return EXIT_SUCCESS;
}
