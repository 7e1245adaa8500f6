/* threads.c -- ck_huge_alloc and ck_huge_free from 8 threads at once:
   every block is aligned, writable and disjoint from every other live
   block, and all the memory goes back.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

/* kptest-options: -pthread */

#include "kptest.h"
#include "ckernel-test.h"

#include <pthread.h>

#define THREADS 8
#define ROUNDS 300
#define KEEP 4          /* live blocks per thread */

/* Every live block of every thread, to prove them disjoint exactly.  */
struct live
{
  uintptr_t lo, hi;
};
static struct live live_blocks[THREADS * KEEP];
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int overlaps, misaligned, corrupted, failed_allocs;

static bool
live_add (size_t slot, void *p, size_t size)
{
  uintptr_t lo = (uintptr_t) p, hi = lo + size;
  bool ok = true;

  pthread_mutex_lock (&live_lock);
  for (size_t i = 0; i < THREADS * KEEP; i++)
    if (live_blocks[i].hi != 0 && lo < live_blocks[i].hi
        && live_blocks[i].lo < hi)
      ok = false;
  live_blocks[slot].lo = lo;
  live_blocks[slot].hi = hi;
  pthread_mutex_unlock (&live_lock);
  return ok;
}

static void
live_remove (size_t slot)
{
  pthread_mutex_lock (&live_lock);
  live_blocks[slot].lo = live_blocks[slot].hi = 0;
  pthread_mutex_unlock (&live_lock);
}

static size_t
pick_size (unsigned *seed)
{
  static const size_t edges[] =
    { 1, 4095, 4096, 2 * CKT_MIB - 1, 2 * CKT_MIB, 2 * CKT_MIB + 1,
      8 * CKT_MIB };
  unsigned r = (unsigned) rand_r (seed);
  if (r % 4 == 0)
    return edges[(r / 4) % (sizeof edges / sizeof edges[0])];
  return 1 + (size_t) rand_r (seed) % (8 * CKT_MIB);
}

struct held
{
  unsigned char *p;
  size_t size;
  unsigned char tag;
};

static void
release (size_t slot, struct held *h)
{
  if (h->p[0] != h->tag || h->p[h->size - 1] != h->tag
      || h->p[h->size / 2] != h->tag)
    corrupted++;
  live_remove (slot);
  ck_huge_free (h->p, h->size);
  h->p = NULL;
}

static void *
worker (void *arg)
{
  size_t id = (size_t) (uintptr_t) arg;
  unsigned seed = 12345u + (unsigned) id * 7919u;
  struct held held[KEEP] = { { NULL, 0, 0 } };

  for (int round = 0; round < ROUNDS; round++)
    {
      size_t k = (size_t) round % KEEP;
      size_t slot = id * KEEP + k;
      if (held[k].p != NULL)
        release (slot, &held[k]);
      size_t size = pick_size (&seed);
      unsigned char *p = ck_huge_alloc (size);
      if (p == NULL)
        {
          failed_allocs++;
          continue;
        }
      if ((uintptr_t) p % CKT_HUGE != 0)
        misaligned++;
      if (!live_add (slot, p, size))
        overlaps++;
      held[k].p = p;
      held[k].size = size;
      held[k].tag = (unsigned char) (id * 31 + (size_t) round + 1);
      p[0] = p[size / 2] = p[size - 1] = held[k].tag;
    }
  for (size_t k = 0; k < KEEP; k++)
    if (held[k].p != NULL)
      release (id * KEEP + k, &held[k]);
  return NULL;
}

static void *
idle (void *arg)
{
  return arg;
}

/* Run FN in THREADS threads with small stacks and wait for them.  */
static bool
run_threads (void *(*fn) (void *))
{
  pthread_t t[THREADS];
  pthread_attr_t attr;
  bool ok = true;

  if (pthread_attr_init (&attr) != 0
      || pthread_attr_setstacksize (&attr, 256 * 1024) != 0)
    return false;
  for (size_t i = 0; i < THREADS; i++)
    if (pthread_create (&t[i], &attr, fn, (void *) (uintptr_t) i) != 0)
      ok = false;
  for (size_t i = 0; i < THREADS; i++)
    if (pthread_join (t[i], NULL) != 0)
      ok = false;
  pthread_attr_destroy (&attr);
  return ok;
}

KT_TEST (eight_threads_allocate_and_free_disjoint_blocks)
{
  struct ckt_vm before, after;

  /* Let the tracking table and the cache of thread stacks exist before
     counting.  */
  ck_huge_free (ck_huge_alloc (1), 1);
  KT_CHECK (run_threads (idle));
  KT_CHECK (ckt_vm_usage (&before));
  KT_CHECK (run_threads (worker));
  KT_CHECK_EQ (failed_allocs, 0);
  KT_CHECK_EQ (misaligned, 0);
  KT_CHECK_EQ (overlaps, 0);
  KT_CHECK_EQ (corrupted, 0);
  /* Every block is unmapped again: one left over would be 2 MiB.  */
  KT_CHECK (ckt_vm_usage (&after));
  if (after.bytes >= before.bytes + CKT_MIB)
    KT_FAILF ("%zu bytes mapped before, %zu after", before.bytes,
              after.bytes);
}

KT_MAIN (KT_CASE (eight_threads_allocate_and_free_disjoint_blocks))
