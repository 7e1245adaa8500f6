/* thread.c -- the thread's pointer to its heap, the sentinels it
   starts with, and the permanent heap records.  Below the chunks, the
   large tier and the cache, which all find the calling thread's heap
   here; heap.c gives threads their heaps and takes them back.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <config.h>

#include "kp_internal.h"

/* The sentinel every empty slot of the thread cache points at: its
   free list is always empty, so the fast path falls into the refill.  */
kp_chunk_t kp_empty_chunk;

#define KP_EMPTY_ACTIVE_1 &kp_empty_chunk
#define KP_EMPTY_ACTIVE_5 KP_EMPTY_ACTIVE_1, KP_EMPTY_ACTIVE_1, \
  KP_EMPTY_ACTIVE_1, KP_EMPTY_ACTIVE_1, KP_EMPTY_ACTIVE_1
#define KP_EMPTY_ACTIVE_23 KP_EMPTY_ACTIVE_5, KP_EMPTY_ACTIVE_5, \
  KP_EMPTY_ACTIVE_5, KP_EMPTY_ACTIVE_5, KP_EMPTY_ACTIVE_1, \
  KP_EMPTY_ACTIVE_1, KP_EMPTY_ACTIVE_1

_Static_assert (KP_NCLASS == 89, "the initialiser below lists 89 classes");

/* The thread cache.  It starts pointing at sentinels, so neither path
   tests for "not initialised": the first malloc finds an empty free
   list, the first free finds no owner, and both reach a slow path.  */
__thread kp_tcache_t kp_tc KP_TLS_ATTR = {
  .heap = &kp_heap_none,
  .active = { KP_EMPTY_ACTIVE_23, KP_EMPTY_ACTIVE_23, KP_EMPTY_ACTIVE_23,
  KP_EMPTY_ACTIVE_5, KP_EMPTY_ACTIVE_5, KP_EMPTY_ACTIVE_5,
  KP_EMPTY_ACTIVE_1, KP_EMPTY_ACTIVE_1, KP_EMPTY_ACTIVE_1,
  KP_EMPTY_ACTIVE_1, KP_EMPTY_ACTIVE_1 }
};

/* The sentinel heaps stay all zero: nothing is ever stored in them
   (kp_cache_heap and kp_heap_live keep them out), and
   kp_malloc_dedicated relies on their empty first level.  */
kp_heap_t kp_heap_none;         /* this thread has no heap yet */
kp_heap_t kp_heap_dead;         /* this thread's heap is gone (exiting) */
kp_heap_t kp_heap_shared;       /* owns the shared classes' chunks */

/* Every heap record ever made, push-only.  A record is free for a new
   thread when in_use is 0: taken with an acquire CAS, given back with a
   release store, so a dead thread's last writes happen before the next
   thread's first.  A new record is mapped alone, in whole pages: a
   slab of several records linked at once wrote a page of each, and
   every walk of the list (the statistics, the peak's measure) read
   them, which a process with one thread paid in page faults.  */
static kp_heap_t *_Atomic kp_heaps;

kp_heap_t *
kp_heap_acquire (void)
{
  for (kp_heap_t *h = atomic_load_explicit (&kp_heaps, memory_order_acquire);
       h != NULL; h = h->pool_next)
    {
      int expected = 0;
      if (atomic_load_explicit (&h->in_use, memory_order_relaxed) == 0
          && atomic_compare_exchange_strong_explicit (&h->in_use, &expected,
                                                      1, memory_order_acquire,
                                                      memory_order_relaxed))
        return h;
    }
  size_t page = kp_os_page_size ();
  kp_heap_t *h = kp_os_map_aligned (kp_round_up (sizeof *h, page), page);
  if (h == NULL)
    return NULL;
  /* Taken by this thread before it is published.  */
  atomic_init (&h->in_use, 1);
  kp_heap_t *head = atomic_load_explicit (&kp_heaps, memory_order_relaxed);
  do
    h->pool_next = head;
  while (!atomic_compare_exchange_weak_explicit (&kp_heaps, &head, h,
                                                 memory_order_release,
                                                 memory_order_relaxed));
  return h;
}

kp_heap_t *
kp_heap_list (void)
{
  return atomic_load_explicit (&kp_heaps, memory_order_acquire);
}

/* The threads with a heap (kp_heaps_live_add from heap.c when a thread
   takes its heap and when it gives it back, relaxed read-modify-writes;
   kp_heaps_after_fork in the child of a fork, a relaxed store), and
   the bytes each thread's lists of the shared classes may hold, worked
   out from it by the same calls: KP_SHARED_LISTS_BYTES split evenly,
   within KP_SHARED_SLOT_MIN and KP_SHARED_SLOT_CAP (a relaxed store;
   shared.c reads it relaxed when it sets a list's limit, on the lists'
   slow paths: a stale value moves a bound on a cache for a moment, and
   a list's limit follows a new cap at the list's next slow path).  */
static _Atomic (size_t) kp_heaps_live;
_Atomic (size_t) kp_shared_slot_cap = KP_SHARED_SLOT_CAP;

static void
kp_shared_cap_for (size_t n)
{
  size_t cap = n != 0 ? KP_SHARED_LISTS_BYTES / n : KP_SHARED_SLOT_CAP;
  if (cap < KP_SHARED_SLOT_MIN)
    cap = KP_SHARED_SLOT_MIN;
  if (cap > KP_SHARED_SLOT_CAP)
    cap = KP_SHARED_SLOT_CAP;
  atomic_store_explicit (&kp_shared_slot_cap, cap, memory_order_relaxed);
}

void
kp_heaps_live_add (int d)
{
  kp_shared_cap_for (atomic_fetch_add_explicit (&kp_heaps_live, (size_t) d,
                                                memory_order_relaxed)
                     + (size_t) d);
}

void
kp_heaps_after_fork (void)
{
  /* The other threads of the parent are gone, their heaps with them
     (never given back: their records stay taken).  */
  size_t n = kp_heap_live (kp_tc.heap) ? 1 : 0;
  atomic_store_explicit (&kp_heaps_live, n, memory_order_relaxed);
  kp_shared_cap_for (n);
}
