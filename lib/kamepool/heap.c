/* heap.c -- thread heaps: thread start and exit, the malloc slow path
   (refill) and the decay.  The heap records themselves and the
   thread's pointer to its heap are thread.c's, the operations on a
   heap's lists of chunks are inline in kp_internal.h, and the moves
   between those lists that a free makes are chunk.c's.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "kp_internal.h"

static pthread_key_t kp_thread_key;

/* Collect the remote frees of H's full chunks of class CLS: those that
   got some move to the partial list, the empty ones are released.
   Run by a refill that found no partial chunk, before it adopts or
   claims one, and only once the full list has grown by an eighth since
   the last sweep, so that a heap with many full chunks pays a bounded
   share of a descriptor load per chunk it fills.  Without it a thread
   whose blocks another thread frees (a producer) would never see those
   frees and would claim chunk after chunk.  */
static void
kp_full_sweep (kp_heap_t *h, unsigned cls, bool force)
{
  if (!force)
    {
      if (h->full_new[cls] < 1 + (h->full_count[cls] >> 3))
        return;
      h->full_new[cls] = 0;
    }
  kp_chunk_t *next;
  for (kp_chunk_t *c = h->full[cls].head; c != NULL; c = next)
    {
      next = c->next;
      if (kp_chunk_collect (c) == 0)
        continue;
      kp_full_remove (h, c);
      if (c->used == 0)
        kp_chunk_release (c, KP_PAGES_LAZY);
      else
        kp_partial_push (h, c);
    }
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
  for (kp_chunk_t *c = h->partial[cls].head; c != NULL; c = next)
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

/* ---- The decay ---------------------------------------------------------

   A chunk that waits on a partial list holds resident pages of free
   blocks.  Once it has waited there for the delay (KAME_POOL_DECAY_MS,
   100 ms by default) without being taken back into use, a pass of its
   owner gives back the pages that no live block touches
   (kp_chunk_purge).  The passes run on the owner's slow path, every
   8th refill that finds the active chunk dry, at most twice per delay,
   and also collect the remote frees of every partial chunk and release
   the chunks that are empty.  (Not those of the full chunks: moved to
   the partial list early, chunks with a few remote frees would spread
   the refills over more chunks and so grow the resident set.)  A
   chunk is purged at most once per stay on a partial list, so a
   steady workload, whose chunks go back into use well within the
   delay, never pays for a purge.  */

/* The active chunk of class CLS of H goes to the partial list when it
   has not changed since the last pass: the class went unused for half
   the delay at least, and its chunk may decay like any other.  */
static void
kp_heap_decay_active (kp_heap_t *h, unsigned cls)
{
  kp_chunk_t *a = kp_tc.active[cls];
  if (a == &kp_empty_chunk)
    return;
  uintptr_t seen = (uintptr_t) a ^ (uintptr_t) a->free
                   ^ ((uintptr_t) kp_chunk_used (a) << 40);
  if (h->decay_seen[cls] != seen)
    {
      h->decay_seen[cls] = seen;
      return;
    }
  h->decay_seen[cls] = 0;
  kp_tc.active[cls] = &kp_empty_chunk;
  kp_chunk_collect (a);
  kp_chunk_displace (h, a, false);
}

/* Add CALLS madvise calls and PAGES pages to H's statistics.  */
static void
kp_heap_count_purges (kp_heap_t *h, size_t calls, size_t pages)
{
  kp_owner_add (&h->purge_calls, calls);
  kp_owner_add (&h->purge_pages, pages);
}

/* One decay pass over H's lists, at time NOW with delay DELAY.  */
static void
kp_heap_decay_pass (kp_heap_t *h, uint32_t now, uint32_t delay)
{
  size_t calls = 0, pages = 0;
  kp_shared_slot_decay (h);
  for (unsigned cls = 0; cls < KP_NCLASS; cls++)
    {
      kp_heap_decay_active (h, cls);
      if (h->partial[cls].head == NULL)
        continue;
      kp_partial_sweep (h, cls);
      for (kp_chunk_t *c = h->partial[cls].head; c != NULL; c = c->next)
        if (!c->decayed && now - c->idle_since >= delay)
          {
            pages += kp_chunk_purge (c, &calls);
            c->decayed = true;
          }
    }
  if (calls != 0)
    kp_heap_count_purges (h, calls, pages);
}

/* Called on H's slow paths: read the clock, and run a pass when half
   the delay has gone by since the last one.  Out of line, so that its
   callers save no registers for it on their own paths.  */
KP_NOINLINE void
kp_heap_decay (kp_heap_t *h)
{
  int delay = kp_setting (&kp_decay_ms);
  if (delay < 0)
    return;
  uint32_t now = kp_clock_ms ();
  h->decay_now = now;
  if (now - h->decay_last < (uint32_t) delay / 2)
    return;
  h->decay_last = now;
  kp_heap_decay_pass (h, now, (uint32_t) delay);
  size_t calls = 0, pages = kp_cache_decay (h, now, (uint32_t) delay, &calls);
  pages += kp_shared_decay (now, (uint32_t) delay, &calls);
  pages += kp_units_decay (now, (uint32_t) delay, &calls);
  if (calls != 0)
    kp_heap_count_purges (h, calls, pages);
}

/* Give back now what the calling thread's heap holds free, without
   waiting for the delay: collect every chunk's remote frees, release
   the empty chunks, and purge every partly used chunk, the active ones
   included (the caller owns them all); then the same for the shared
   classes' chunks, the thread's slots first (shared.c).  The pages
   given back.  */
size_t
kp_heap_trim (void)
{
  kp_heap_t *h = kp_tc.heap;
  size_t calls = 0, pages = 0;
  if (!kp_heap_live (h))
    return kp_shared_trim (&calls);
  kp_rbatch_flush_all (h);
  pages += kp_shared_trim (&calls);
  for (unsigned cls = 0; cls < KP_NCLASS; cls++)
    {
      if (h->full[cls].head != NULL)
        kp_full_sweep (h, cls, true);
      kp_partial_sweep (h, cls);
      for (kp_chunk_t *c = h->partial[cls].head; c != NULL; c = c->next)
        pages += kp_chunk_purge (c, &calls);
      kp_chunk_t *a = kp_tc.active[cls];
      if (a != &kp_empty_chunk)
        pages += kp_chunk_purge (a, &calls);
    }
  if (calls != 0)
    kp_heap_count_purges (h, calls, pages);
  return pages;
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
  /* The batch first: publishing it may take chunks over, which the
     loop below then hands on like the others.  */
  kp_rbatch_flush_all (h);
  enum kp_release_pages pages
    = kp_setting (&kp_thread_exit_reclaim) ? KP_PAGES_LAZY : KP_PAGES_KEEP;
  for (unsigned cls = 0; cls < KP_NCLASS; cls++)
    {
      kp_chunk_t *c = kp_tc.active[cls];
      kp_tc.active[cls] = &kp_empty_chunk;
      if (c != &kp_empty_chunk)
        {
          kp_chunk_set_active (c, false);
          kp_chunk_hand_over (h, c, pages);
        }
      while ((c = kp_partial_pop (h, cls)) != NULL)
        kp_chunk_hand_over (h, c, pages);
      while ((c = h->full[cls].head) != NULL)
        {
          kp_full_remove (h, c);
          kp_chunk_hand_over (h, c, pages);
        }
      h->full_new[cls] = 0;
    }
  kp_shared_thread_exit (h);
  kp_cache_thread_exit (h);
  h->cache.free_streak = h->cache.streak_seen = 0;
  for (unsigned cls = 0; cls < KP_NCLASS; cls++)
    h->decay_seen[cls] = 0;
  kp_tc.heap = &kp_heap_dead;
  kp_heaps_live_add (-1);
  atomic_store_explicit (&h->in_use, 0, memory_order_release);
  /* The thread's mallocs go to the C library from here on.  */
  kp_purge_poll ();
}

/* The key whose destructor is kp_thread_exit, made by the first
   kp_thread_init of the process (pthread_once, which is fork-safe and
   does not allocate); false in kp_thread_key_made when the system had
   no key left, and then no thread gets a heap: the C library serves
   their small blocks.  */
static pthread_once_t kp_thread_key_once = PTHREAD_ONCE_INIT;
static bool kp_thread_key_made;

static void
kp_thread_key_make (void)
{
  kp_thread_key_made = pthread_key_create (&kp_thread_key,
                                           kp_thread_exit) == 0;
}

/* Give this thread a heap.  The TLS pointer is set before
   pthread_setspecific, which may itself allocate.  */
bool
kp_thread_init (void)
{
  if (!kp_ready ())
    return false;
  pthread_once (&kp_thread_key_once, kp_thread_key_make);
  if (!kp_thread_key_made)
    return false;
  kp_heap_t *h = kp_heap_acquire ();
  if (h == NULL)
    return false;
  kp_tc.heap = h;
  kp_heaps_live_add (1);
  h->decay_now = h->decay_last = kp_clock_ms ();
  int saved = errno;
  pthread_setspecific (kp_thread_key, h);
  errno = saved;
  return true;
}

/* The refill proper, past the thread's batch: the thread has no heap
   yet, or the active chunk of class CLS (of N's size) ran dry.  */
static KP_NOINLINE void *
kp_malloc_refill_chunk (unsigned cls, size_t n)
{
  kp_heap_t *h = kp_tc.heap;
  if (kp_unlikely (!kp_heap_live (h)))
    {
      if (h == &kp_heap_dead || !kp_thread_init ())
        return kp_libc_malloc (n);
      h = kp_tc.heap;
    }
  /* Before anything of the heap moves: pthread_create may allocate.  */
  kp_purge_poll ();
  if (cls >= KP_SHARED_FIRST)
    {
      if ((++h->decay_ticks & 7) == 0)
        kp_heap_decay (h);
      return kp_shared_malloc (h, cls, n);
    }
  h->unfull_streak = 0;
  kp_chunk_t *c = kp_tc.active[cls];
  if (c != &kp_empty_chunk)
    {
      /* Blocks freed into other chunks go before blocks never used.  */
      if (c->free != NULL || kp_chunk_collect (c)
          || (h->partial[cls].head == NULL && kp_chunk_carve (c)))
        goto pop;
      kp_tc.active[cls] = &kp_empty_chunk;
      kp_chunk_displace (h, c, false);
    }
  /* The slow path proper, past the active chunk, publishes the thread's
     batch of remote frees: a thread that frees others' blocks and
     allocates holds them back no longer than it takes to use up a
     chunk, and it never adopts a chunk while blocks of it wait in its
     own batch.  (Not on every call: a refill that only links the next
     page of the active chunk comes every page of blocks, and flushing
     there would cut the batches short.)  */
  if (h->rbatch_mask != 0)
    kp_rbatch_flush_all (h);
  /* The clock every 8th time the active chunk runs dry.  */
  if ((++h->decay_ticks & 7) == 0)
    kp_heap_decay (h);
  /* Chunks taken over by frees fill up with remote frees on the list;
     the others' are collected as they are popped, and by the decay.  */
  if (h->fostered != 0)
    kp_partial_sweep (h, cls);
  for (int pass = 0; pass < 2; pass++)
    {
      while ((c = kp_partial_pop (h, cls)) != NULL)
        {
          if (c->free != NULL || kp_chunk_collect (c) || kp_chunk_carve (c))
            goto use;
          kp_full_push (h, c);
        }
      if (pass == 0)
        kp_full_sweep (h, cls, false);
    }
  c = kp_chunk_adopt (h, cls);
  if (c == NULL)
    {
      unsigned units = kp_class_units[cls];
      c = kp_units_claim_retry (units, cls,
                                h->full_count[cls] >= KP_HUGE_DENSE);
      /* At the cap or out of address space, a class of big blocks
         makes do with a shorter chunk, down to one block: the runs of
         free units left at the ends of the regions are used up.  */
      while (c == NULL && units > 1
             && ((size_t) (units - 1) << KP_UNIT_SHIFT) >= kp_class_size[cls])
        c = kp_units_claim (--units, cls);
      if (c == NULL)
        return kp_units_fallback (n, 0);        /* cap reached, or no memory */
      kp_chunk_init_small (c, cls, units, h);
    }
  if (c->free == NULL)
    kp_chunk_carve (c);
use:
  KP_EXPENSIVE_ASSERT (kp_chunk_list_ok (c));
  kp_tc.active[cls] = c;
  kp_chunk_set_active (c, true);
pop:
  KP_ASSERT (c->free != NULL);
  return kp_chunk_pop (c, c->free);
}

/* The refill found the head of slot I of its batch damaged.  */
static KP_NOINLINE void *
kp_malloc_refill_bad (kp_heap_t *h, unsigned i, unsigned cls, size_t n)
{
  void *p = kp_rbatch_take_bad (h, &h->rbatch[i]);
  atomic_signal_fence (memory_order_release);
  h->rbatch_taking = false;
  return p != NULL ? p : kp_malloc_refill_chunk (cls, n);
}

/* malloc's slow path for N in the small classes: the thread has no
   heap yet, or the active chunk of the class has no block on its list
   (every caller has just seen it empty).  (kp_malloc sends larger N to
   the cache's short paths, which go to kp_malloc_large themselves.)
   Blocks of other threads that this thread freed and has not published
   go first: nobody else could use them before the flush, and their
   lines are in this thread's cache.  But only once the thread has a
   chunk of the class of its own: a thread that first frees a block
   handed over to it and then allocates its class (mimalloc-bench's
   cache-scratch) would otherwise keep writing beside the block's
   neighbours, which other threads hold (bench/falseshare, passive).
   The sentinel heaps' batches are empty.  The class is worked out
   again here: passed from the fast path, it cost that path an
   instruction, the move of the argument, which the compiler hoists
   above the list's test.  */
void *
kp_malloc_refill (size_t n)
{
  KP_ASSERT (n <= KP_SMALL_MAX);
  unsigned cls = kp_size_class (n);
  KP_ASSERT (kp_tc.active[cls]->free == NULL);
  kp_heap_t *h = kp_tc.heap;
  uint32_t m = h->rbatch_cls[cls];
  if (m != 0 && kp_thread_uses_class (cls))
    {
      unsigned i = (unsigned) __builtin_ctz (m);
      h->rbatch_taking = true;
      atomic_signal_fence (memory_order_acquire);
      kp_block_t *b = h->rbatch[i].head;
      kp_block_t *next = kp_block_next (b);
      if (kp_unlikely (!kp_rbatch_head_ok (&h->rbatch[i], b, next)))
        return kp_malloc_refill_bad (h, i, cls, n);
      kp_rbatch_take (h, i, b, next);
      atomic_signal_fence (memory_order_release);
      h->rbatch_taking = false;
      kp_owner_add (&h->taken_blocks, 1);
      kp_owner_add (&h->taken_bytes, kp_class_size[cls]);
      return b;
    }
  return kp_malloc_refill_chunk (cls, n);
}

/* Pop B, the head of C's free list, that carries no free tag, or whose
   decoded link is neither NULL nor in B's region.  A tag of 0 is the
   live mark of kp_chunk_pop: B was freed twice and is on the list a
   second time after its first pop (kp_free_owned does not look), so its
   owner has it now and may have written over the link (unless both
   words are 0: a freed block cleared).  Any other tag, or a bad link
   under a free tag, is a write into the freed block (a use after free,
   or an overflow from the block before).
   The rest of the list is dropped: its blocks are lost, but none of
   them is handed out twice.  B itself is handed out only when its tag
   says it is free.  */
void *
kp_malloc_pop_bad (kp_chunk_t *c, kp_block_t *b)
{
  unsigned cls = kp_chunk_cls (c);
  KP_ASSERT (c == kp_tc.active[cls]);
  if (b->tag == 0 && b->link != 0)
    {
      kp_misuse ("free", "double free of", b);
      /* The second free counted B back; it is still handed out.  */
      c->used++;
      c->free = NULL;
      return kp_malloc_refill (kp_class_size[cls]);
    }
  kp_misuse ("malloc", "corrupted free list (a freed block was written "
             "to) at", b);
  c->free = NULL;
  if (!kp_block_marked_free (b))
    return kp_malloc_refill (kp_class_size[cls]);
  c->used++;
  c->pops++;
  kp_block_mark_live (b);
  return b;
}
