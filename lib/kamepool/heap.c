/* heap.c -- thread heaps: the permanent heap records, thread start and
   exit, the partial lists, and the malloc slow path (refill).

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <config.h>

#include <errno.h>
#include <pthread.h>

#include "kp_internal.h"

#define KP_EMPTY_ACTIVE_1 &kp_empty_chunk
#define KP_EMPTY_ACTIVE_5 KP_EMPTY_ACTIVE_1, KP_EMPTY_ACTIVE_1, \
  KP_EMPTY_ACTIVE_1, KP_EMPTY_ACTIVE_1, KP_EMPTY_ACTIVE_1
#define KP_EMPTY_ACTIVE_25 KP_EMPTY_ACTIVE_5, KP_EMPTY_ACTIVE_5, \
  KP_EMPTY_ACTIVE_5, KP_EMPTY_ACTIVE_5, KP_EMPTY_ACTIVE_5

_Static_assert (KP_NCLASS == 50, "the initialiser below lists 50 classes");

/* The thread cache.  It starts pointing at sentinels, so neither path
   tests for "not initialised": the first malloc finds an empty free
   list, the first free finds no owner, and both reach a slow path.  */
__thread kp_tcache_t kp_tc KP_TLS_ATTR = {
  .heap = &kp_heap_none,
  .active = { KP_EMPTY_ACTIVE_25, KP_EMPTY_ACTIVE_25 }
};

kp_heap_t kp_heap_none;         /* this thread has no heap yet */
kp_heap_t kp_heap_dead;         /* this thread's heap is gone (exiting) */

_Atomic (int) kp_thread_exit_reclaim = 1;

/* Every heap record ever made, push-only.  A record is free for a new
   thread when in_use is 0: taken with an acquire CAS, given back with a
   release store, so a dead thread's last writes happen before the next
   thread's first.  */
static kp_heap_t *_Atomic kp_heaps;
static pthread_key_t kp_thread_key;

#define KP_HEAP_SLAB (64 * 1024)

static kp_heap_t *
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
  kp_heap_t *slab = kp_os_map_aligned (KP_HEAP_SLAB, kp_os_page_size ());
  if (slab == NULL)
    return NULL;
  size_t n = KP_HEAP_SLAB / sizeof (kp_heap_t);
  /* Keep the first record; link the slab and publish it in one CAS.  */
  atomic_init (&slab[0].in_use, 1);
  for (size_t i = 0; i + 1 < n; i++)
    slab[i].pool_next = &slab[i + 1];
  kp_heap_t *head = atomic_load_explicit (&kp_heaps, memory_order_relaxed);
  do
    slab[n - 1].pool_next = head;
  while (!atomic_compare_exchange_weak_explicit (&kp_heaps, &head, slab,
                                                 memory_order_release,
                                                 memory_order_relaxed));
  return &slab[0];
}

kp_heap_t *
kp_heap_list (void)
{
  return atomic_load_explicit (&kp_heaps, memory_order_acquire);
}

void
kp_partial_push (kp_heap_t *h, kp_chunk_t *c)
{
  unsigned cls = atomic_load_explicit (&c->cls, memory_order_relaxed);
  c->next = NULL;
  c->prev = h->partial_tail[cls];
  if (c->prev != NULL)
    c->prev->next = c;
  else
    h->partial[cls] = c;
  h->partial_tail[cls] = c;
}

void
kp_partial_remove (kp_heap_t *h, kp_chunk_t *c)
{
  unsigned cls = atomic_load_explicit (&c->cls, memory_order_relaxed);
  if (c->prev != NULL)
    c->prev->next = c->next;
  else
    {
      KP_ASSERT (h->partial[cls] == c);
      h->partial[cls] = c->next;
    }
  if (c->next != NULL)
    c->next->prev = c->prev;
  else
    {
      KP_ASSERT (h->partial_tail[cls] == c);
      h->partial_tail[cls] = c->prev;
    }
  c->next = c->prev = NULL;
  if (c->fostered)
    {
      c->fostered = false;
      h->fostered--;
    }
}

static kp_chunk_t *
kp_partial_pop (kp_heap_t *h, unsigned cls)
{
  kp_chunk_t *c = h->partial[cls];
  if (c != NULL)
    kp_partial_remove (h, c);
  return c;
}

/* Collect the remote frees of every partial chunk of class CLS and
   release those that are empty.  A chunk whose blocks other threads
   free waits on the list with its frees uncollected; without this pass
   a thread that takes over chunks faster than it refills from them
   would keep them all.  */
static void
kp_partial_sweep (kp_heap_t *h, unsigned cls)
{
  kp_chunk_t *next;
  for (kp_chunk_t *c = h->partial[cls]; c != NULL; c = next)
    {
      next = c->next;
      kp_chunk_collect (c);
      if (c->used == 0)
        {
          kp_partial_remove (h, c);
          kp_chunk_release (c, KP_PAGES_LAZY);
        }
    }
}

/* Hand over or release chunk C of an exiting thread.  */
static void
kp_thread_exit_chunk (kp_heap_t *h, kp_chunk_t *c, enum kp_release_pages pages)
{
  for (;;)
    {
      kp_chunk_collect (c);
      if (c->used == 0)
        {
          kp_chunk_release (c, pages);
          return;
        }
      if (kp_chunk_abandon (c, h))
        return;
    }
}

/* The pthread key destructor: release the thread's empty chunks and
   abandon the others for adoption.  Frees that come later (from other
   key destructors) take the remote path, and mallocs go to libc.  */
static void
kp_thread_exit (void *arg)
{
  kp_heap_t *h = arg;
  if (h != kp_tc.heap || !kp_heap_live (h))
    return;
  enum kp_release_pages pages
    = atomic_load_explicit (&kp_thread_exit_reclaim, memory_order_relaxed)
      ? KP_PAGES_DISCARD : KP_PAGES_KEEP;
  for (unsigned cls = 0; cls < KP_NCLASS; cls++)
    {
      kp_chunk_t *c = kp_tc.active[cls];
      kp_tc.active[cls] = &kp_empty_chunk;
      if (c != &kp_empty_chunk)
        {
          c->active = false;
          kp_thread_exit_chunk (h, c, pages);
        }
      while ((c = kp_partial_pop (h, cls)) != NULL)
        kp_thread_exit_chunk (h, c, pages);
    }
  kp_cache_thread_exit (h);
  kp_tc.heap = &kp_heap_dead;
  atomic_store_explicit (&h->in_use, 0, memory_order_release);
}

bool
kp_heap_process_init (void)
{
  return pthread_key_create (&kp_thread_key, kp_thread_exit) == 0;
}

/* Give this thread a heap.  The TLS pointer is set before
   pthread_setspecific, which may itself allocate.  */
static bool
kp_thread_init (void)
{
  if (atomic_load_explicit (&kp_init_state, memory_order_acquire) != 2
      && !kp_process_init ())
    return false;
  kp_heap_t *h = kp_heap_acquire ();
  if (h == NULL)
    return false;
  kp_tc.heap = h;
  int saved = errno;
  pthread_setspecific (kp_thread_key, h);
  errno = saved;
  return true;
}

/* malloc's slow path: the thread has no heap yet, or the active chunk
   of the class ran dry, or N is above the small classes.  */
void *
kp_malloc_refill (size_t n)
{
  if (n > KP_SMALL_MAX)
    return kp_malloc_large (n, 0);
  kp_heap_t *h = kp_tc.heap;
  if (kp_unlikely (!kp_heap_live (h)))
    {
      if (h == &kp_heap_dead || !kp_thread_init ())
        return kp_libc_malloc (n);
      h = kp_tc.heap;
    }
  unsigned cls = kp_size_class (n);
  kp_chunk_t *c = kp_tc.active[cls];
  if (c != &kp_empty_chunk)
    {
      if (c->free != NULL || kp_chunk_collect (c) || kp_chunk_carve (c))
        goto pop;
      kp_tc.active[cls] = &kp_empty_chunk;
      c->active = false;
      if (!kp_chunk_abandon (c, h))
        goto use;               /* remote frees arrived meanwhile */
    }
  kp_partial_sweep (h, cls);
  while ((c = kp_partial_pop (h, cls)) != NULL)
    {
      if (c->free != NULL || kp_chunk_collect (c) || kp_chunk_carve (c))
        goto use;
      if (!kp_chunk_abandon (c, h))
        goto use;
    }
  c = kp_chunk_adopt (h, cls);
  if (c == NULL)
    {
      c = kp_units_claim_retry (kp_class_units[cls]);
      if (c == NULL)
        return kp_units_fallback (n, 0);        /* cap reached, or no memory */
      kp_chunk_init_small (c, cls, h);
    }
  if (c->free == NULL)
    kp_chunk_carve (c);
use:
  kp_tc.active[cls] = c;
  c->active = true;
pop:
  {
    kp_block_t *b = c->free;
    KP_ASSERT (b != NULL);
    c->free = b->next;
    c->used++;
    return b;
  }
}
