/* shared.c -- the chunks of the mid classes, shared by the threads.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   Blocks of the mid classes, above KP_OWNED_MAX (34816 to 208896
   bytes, the last KP_NSHARED classes) are few and large, and each thread asks for any one class seldom.  In chunks of
   their own per thread, as the smaller classes are, every thread held
   a chunk of up to 1 MiB of every such class it had used, with as many free blocks in it as its last use left, and
   only the owner could reuse them: sixteen threads that hand such
   blocks around held ten times the live bytes.  So their chunks belong
   to no thread (their owner is the sentinel kp_heap_shared): each class
   has one set of chunks under a lock, from which every thread
   allocates and into which every thread frees; and each thread keeps
   blocks of each class that it freed on a list of its heap (its slot,
   at most KP_SHARED_SLOT_MAX blocks, kp_shared_slot_cap bytes for all
   classes: its share of KP_SHARED_LISTS_BYTES), for its next mallocs
   of the class, so that a malloc/free
   loop takes no lock, and a malloc that finds the list empty and a
   free that finds it full move several blocks under one lock.

   The lock is a kp_sample_lock_t (prof.c): its word names the holder,
   so a signal handler that interrupts its own thread inside the lock
   does not wait for itself (its malloc falls back as at the cap, its
   free goes to the chunk's remote list, which the next holder
   collects), and a fork from such a handler leaves the lock to the
   child's thread, as for the samplers.  A normal fork takes every
   class's lock first (pthread_atfork, registered at the first chunk).
   While a thread holds a class's lock, the owner-private fields of
   the class's chunks are its own, as an owner's are (kp_chunk_t), and
   the chunk functions of chunk.c serve it as they serve an owner: the
   carving, the collection of remote frees, the purge of free pages,
   the release.  Nothing here is lock-free: the chunks' remote lists
   are pushed and collected by the protocol of
   kamepool.model/ownership.pml, whose owner is the lock's holder and
   whose OWNED bit never clears.

   An empty chunk is released at once, its pages kept within the dirty
   budget (kp_units_release), where the class's next claim finds them
   and the free units' decay gives them back otherwise.  The decay of
   the others: a chunk neither allocated from nor freed into for the
   decay time has the pages of its free blocks given back
   (kp_chunk_purge); by the background purge's passes
   (kp_purge_register), which take a class's lock only when it is
   free, and by the heaps' passes.  */

#include <config.h>

#include <pthread.h>

#include "kp_internal.h"

typedef struct kp_shared_class
{
  /* Everything below is the holder's, and so are the owner-private
     fields of the class's chunks.  */
  _Alignas (64) kp_sample_lock_t lock;
  /* The chunks that can hand out a block, the next to take from at
     the head; those that cannot (their FULL set).  */
  kp_clist_t partial, full;
  /* The empty chunks on PARTIAL: those kp_shared_put keeps (at most
     KP_SHARED_SPARES, at the tail), one just claimed, and those a
     collect emptied.  */
  unsigned spares;
  /* Set (relaxed) by a free that found the lock held by its own
     thread, whose block went to its chunk's remote list; cleared by
     the holder that collects every chunk.  */
  _Atomic (bool) deferred;
  /* The chunks the decay is to look at (DECAYED clear: they held
     KP_SHARED_DECAY_MIN free or more when last used, and the decay has
     not given their free pages back since; a full one is settled):
     written by the holder, read relaxed by kp_shared_held.  */
  _Atomic (size_t) undecayed;
} kp_shared_class_t;

static kp_shared_class_t kp_shared[KP_NSHARED];

/* The emptied chunks a class keeps for its next mallocs, till the
   decay.  */
#define KP_SHARED_SPARES 2

static kp_shared_class_t *
kp_shared_class (unsigned cls)
{
  KP_ASSERT (cls >= KP_SHARED_FIRST && cls < KP_NCLASS);
  return &kp_shared[cls - KP_SHARED_FIRST];
}

static void
kp_shared_count (kp_shared_class_t *s, int d)
{
  atomic_store_explicit (&s->undecayed,
                         atomic_load_explicit (&s->undecayed,
                                               memory_order_relaxed) + d,
                         memory_order_relaxed);
}

/* The free blocks of C below its bump pointer, in bytes.  */
static size_t
kp_shared_free_bytes (const kp_chunk_t *c)
{
  size_t size = atomic_load_explicit (&c->block_size, memory_order_relaxed);
  size_t carved = (size_t) (c->bump - kp_chunk_data (c)) / size;
  return (carved - kp_chunk_used (c)) * size;
}

/* What a chunk holds free before the decay looks at it, and before a
   free starts the background purge for it: a program's odd free of a
   block of these classes is no memory worth a pass or a thread.  */
#define KP_SHARED_DECAY_MIN (KP_DIRTY_KEEP / 4)

/* C is in use at NOW: the decay waits for it again, if it holds enough
   to give back.  */
static void
kp_shared_touch (kp_shared_class_t *s, kp_chunk_t *c, uint32_t now)
{
  c->idle_since = now;
  if (c->decayed && kp_shared_free_bytes (c) >= KP_SHARED_DECAY_MIN)
    {
      c->decayed = false;
      kp_shared_count (s, 1);
    }
}

/* The decay has nothing to give back of C (full, or decayed).  */
static void
kp_shared_settle (kp_shared_class_t *s, kp_chunk_t *c)
{
  if (!c->decayed)
    {
      c->decayed = true;
      kp_shared_count (s, -1);
    }
}

/* Publish whether C has pages the decay gave back (its owner-private
   NPURGED, the lock held), in its SHARED_MAGIC: 0 while it has, which
   sends kp_shared_free's every free of C's blocks to the lock, where
   kp_shared_put looks at the block's page; its class's divmagic
   otherwise.  */
static void
kp_shared_mark_purged (kp_chunk_t *c)
{
  unsigned cls = atomic_load_explicit (&c->cls, memory_order_relaxed);
  uint64_t magic = c->npurged != 0 ? 0 : kp_class_divmagic[cls];
  if (atomic_load_explicit (&c->shared_magic, memory_order_relaxed)
      != magic)
    atomic_store_explicit (&c->shared_magic, magic, memory_order_relaxed);
}

/* ---- fork and the background purge --------------------------------- */

static void
kp_shared_atfork_prepare (void)
{
  for (unsigned i = 0; i < KP_NSHARED; i++)
    kp_sample_lock_prepare (&kp_shared[i].lock);
}

static void
kp_shared_atfork_parent (void)
{
  for (unsigned i = KP_NSHARED; i-- > 0;)
    kp_sample_lock_after_fork (&kp_shared[i].lock, false);
}

static void
kp_shared_atfork_child (void)
{
  for (unsigned i = KP_NSHARED; i-- > 0;)
    kp_sample_lock_after_fork (&kp_shared[i].lock, true);
}

/* The chunks the decay has still to look at (the purge thread parks
   when there are none).  */
static size_t
kp_shared_held (void)
{
  size_t n = 0;
  for (unsigned i = 0; i < KP_NSHARED; i++)
    n += atomic_load_explicit (&kp_shared[i].undecayed, memory_order_relaxed);
  return n;
}

static pthread_once_t kp_shared_once = PTHREAD_ONCE_INIT;

static void
kp_shared_register (void)
{
  static const kp_purge_upper_t upper = { kp_shared_decay, kp_shared_held };
  kp_purge_register (KP_PURGE_UPPER_SHARED, &upper);
  /* Without the handlers (no memory for them), a fork while another
     thread holds a class's lock leaves the child a lock it never gets.
     Registered after kp_process_init's, these prepare handlers run
     before those (the purge's lock, the samplers'): no thread takes a
     class's lock while it holds one of those but the purge thread,
     which only tries it (kp_shared_decay), and gives it up at once.  */
  pthread_atfork (kp_shared_atfork_prepare, kp_shared_atfork_parent,
                  kp_shared_atfork_child);
}

/* ---- The class's chunks (the lock held) ------------------------------ */

/* Collect C's remote frees (the lock held): a chunk that the collect
   empties counts among S's empty chunks.  */
static uint32_t
kp_shared_collect (kp_shared_class_t *s, kp_chunk_t *c)
{
  bool was_empty = kp_chunk_used (c) == 0;
  uint32_t n = kp_chunk_collect (c);
  if (n != 0 && !was_empty && kp_chunk_used (c) == 0)
    s->spares++;
  return n;
}

/* Collect the remote lists of every chunk of S at NOW: the frees that
   found the lock held by their own thread.  */
static void
kp_shared_collect_all (kp_shared_class_t *s, uint32_t now)
{
  atomic_store_explicit (&s->deferred, false, memory_order_relaxed);
  kp_chunk_t *c, *next;
  for (c = s->full.head; c != NULL; c = next)
    {
      next = c->next;
      if (kp_shared_collect (s, c) != 0 && kp_chunk_has_space (c))
        {
          kp_clist_remove (&s->full, c);
          c->full = false;
          kp_clist_push_head (&s->partial, c);
          kp_shared_touch (s, c, now);
        }
    }
  for (c = s->partial.head; c != NULL; c = c->next)
    kp_shared_collect (s, c);
}

/* A new chunk of class CLS, on S's partial list; NULL at the cap or
   out of memory.  At the cap, a shorter chunk, down to one block (as
   kp_malloc_refill_chunk).  */
static kp_chunk_t *
kp_shared_claim (kp_shared_class_t *s, unsigned cls)
{
  unsigned units = kp_class_units[cls];
  kp_chunk_t *c = kp_units_claim_retry (units, cls, false);
  while (c == NULL && units > 1
         && ((size_t) (units - 1) << KP_UNIT_SHIFT) >= kp_class_size[cls])
    c = kp_units_claim (--units, cls);
  if (c == NULL)
    return NULL;
  kp_chunk_init_small (c, cls, units, &kp_heap_shared);
  /* Nothing to give back yet (kp_shared_touch); empty, till its first
     block goes.  */
  c->decayed = true;
  s->spares++;
  kp_clist_push_head (&s->partial, c);
  return c;
}

/* A block of C, which has room; NULL when its free list was found
   written to (reported; the list is dropped, and no block of it is
   handed out twice).  */
static kp_block_t *
kp_shared_pop (kp_chunk_t *c)
{
  if (c->free == NULL && !kp_chunk_carve (c))
    return NULL;
  kp_block_t *b = c->free;
  kp_block_t *next = kp_block_next (b);
  if (KP_HARDEN
      && kp_unlikely (!kp_block_marked_free (b)
                      || (next != NULL && kp_link_suspect (b, next))))
    {
      kp_misuse ("malloc", "corrupted free list (a freed block was "
                 "written to) at", b);
      c->free = NULL;
      if (!kp_block_marked_free (b))
        return NULL;
      next = NULL;
    }
  c->free = next;
  c->used++;
  c->pops++;
  kp_block_mark_live (b);
  return b;
}

/* A block of class CLS from S's chunks at NOW (read once a hold of the
   lock), a new chunk if none has room and CLAIM; NULL at the cap.  */
static kp_block_t *
kp_shared_take (kp_shared_class_t *s, unsigned cls, bool claim,
                uint32_t now)
{
  if (atomic_load_explicit (&s->deferred, memory_order_relaxed))
    kp_shared_collect_all (s, now);
  for (;;)
    {
      kp_chunk_t *c = s->partial.head;
      if (c == NULL && (!claim || (c = kp_shared_claim (s, cls)) == NULL))
        return NULL;
      if (kp_chunk_used (c) == 0 && s->spares != 0)
        s->spares--;
      kp_block_t *b = kp_shared_pop (c);
      kp_shared_mark_purged (c);
      kp_shared_touch (s, c, now);
      if (!kp_chunk_has_space (c))
        {
          kp_clist_remove (&s->partial, c);
          c->full = true;
          kp_clist_push (&s->full, c);
          kp_shared_settle (s, c);
        }
      if (b != NULL)
        return b;
    }
}

/* What kp_shared_put did with the chunk.  */
enum kp_shared_put_result
{
  KP_SHARED_KEPT,               /* on a list, little free in it */
  KP_SHARED_FREEING,            /* KP_SHARED_DECAY_MIN free or more */
  KP_SHARED_RELEASED            /* emptied, and released */
};

/* Put B, a live block of C, back at NOW.  */
static enum kp_shared_put_result
kp_shared_put (kp_shared_class_t *s, kp_chunk_t *c, kp_block_t *b,
               uint32_t now)
{
  /* Two threads that free B at once both passed the test of
     kp_shared_free, and the second finds the tag here.  A block that
     starts in a page the decay gave back was free then, and its tag
     went with the page.  */
  if (kp_unlikely (kp_block_marked_free (b))
      || (kp_unlikely (c->npurged != 0)
          && kp_chunk_block_purged (c, b)))
    {
      kp_misuse ("free", "double free of", b);
      return KP_SHARED_KEPT;
    }
  kp_block_link (b, c->free);
  kp_block_mark_free (b);
  c->free = b;
  KP_ASSERT (kp_chunk_used (c) > 0);
  c->used--;
  kp_shared_touch (s, c, now);
  if (c->full)
    {
      /* Nearly full: taken from first, so that the emptier chunks
         empty.  */
      kp_clist_remove (&s->full, c);
      c->full = false;
      kp_clist_push_head (&s->partial, c);
    }
  enum kp_shared_put_result r = !c->decayed ? KP_SHARED_FREEING
                                             : KP_SHARED_KEPT;
  if (c->used != 0)
    return r;
  /* The class keeps KP_SHARED_SPARES empty chunks, at the tail, where
     the mallocs come to them last and the decay releases them once
     they have stayed unused for the delay: a class whose few blocks
     come and go would otherwise release a chunk and claim it again,
     and whenever the dirty budget is short, give its pages back and
     fault them in again.  With a delay of 0, none is kept.  Another
     empty chunk goes back to its region at once, its pages kept within
     the dirty budget (the class's next claim takes them back first,
     the free units' decay gives them back if none does).  */
  kp_clist_remove (&s->partial, c);
  if (s->spares < KP_SHARED_SPARES && kp_setting (&kp_decay_ms) > 0)
    {
      kp_clist_push (&s->partial, c);
      s->spares++;
      return r;
    }
  kp_shared_settle (s, c);
  kp_chunk_release (c, KP_PAGES_LAZY);
  return KP_SHARED_RELEASED;
}

/* ---- malloc and free ------------------------------------------------- */

/* The blocks a malloc that found its list empty takes from the chunks
   for it, under one lock: about KP_SHARED_BATCH_BYTES, at least one,
   at most half a list.  */
#define KP_SHARED_BATCH_BYTES ((size_t) 128 << 10)

/* Drop H's list of class I, whose head B failed its checks (a write
   after free): reported, its blocks lost (they stay counted in their
   chunks, which are then never released), none handed out twice.  */
static void
kp_shared_slot_drop (kp_heap_t *h, unsigned i, kp_block_t *b,
                     const char *call)
{
  /* A tag of 0 is the live mark: B was freed twice, and is on the list
     a second time after a malloc took it the first time (unless both
     words are 0: a freed block cleared).  */
  if (KP_HARDEN && b->tag == 0 && b->link != 0)
    kp_misuse ("free", "double free of", b);
  else
    kp_misuse (call, "corrupted free block (written to after it was "
               "freed) at", b);
  h->shared[i].room = h->shared[i].lim;
  h->shared[i].head = NULL;
}

/* Set the limit of H's list of class I (a slow path's, the list's
   first push or its refill, or a push that found no room) from the
   thread's share of the lists' bytes, kp_shared_slot_cap: as many
   blocks as the share holds beside the other lists' limits, at most
   KP_SHARED_SLOT_MAX, and never fewer than the list holds (a cap that
   fell since: the caller puts half the list back).  A limit reserves
   bytes only while its list uses them: when the others' leave this
   one short, their room is taken back first, so that a thread that
   moves from one class to another takes its share along.  */
static void
kp_shared_slot_limit (kp_heap_t *h, unsigned i)
{
  size_t cap = atomic_load_explicit (&kp_shared_slot_cap,
                                     memory_order_relaxed);
  size_t size = kp_class_size[KP_SHARED_FIRST + i];
  unsigned n = (unsigned) (h->shared[i].lim - h->shared[i].room);
  size_t others = h->shared_lim_bytes - h->shared[i].lim * size;
  if (others + KP_SHARED_SLOT_MAX * size > cap)
    for (unsigned j = 0; j < KP_NSHARED; j++)
      if (j != i && h->shared[j].room != 0)
        {
          others -= h->shared[j].room * kp_class_size[KP_SHARED_FIRST + j];
          h->shared[j].lim = (uint16_t) (h->shared[j].lim
                                         - h->shared[j].room);
          h->shared[j].room = 0;
        }
  size_t lim = others < cap ? (cap - others) / size : 0;
  if (lim > KP_SHARED_SLOT_MAX)
    lim = KP_SHARED_SLOT_MAX;
  if (lim < n)
    lim = n;
  h->shared[i].lim = (uint16_t) lim;
  h->shared[i].room = (uint16_t) (lim - n);
  h->shared_lim_bytes = others + lim * size;
}

/* H's list of class I, empty, gives up its limit.  */
static void
kp_shared_slot_unlimit (kp_heap_t *h, unsigned i)
{
  KP_ASSERT (h->shared[i].head == NULL);
  h->shared_lim_bytes -= h->shared[i].lim
                         * kp_class_size[KP_SHARED_FIRST + i];
  h->shared[i].lim = h->shared[i].room = 0;
}

/* Pop the head of H's list of class I for the chunks (the lock held):
   NULL when the list is empty, or when its head failed its checks
   (reported by the caller's CALL, the list dropped).  The block is
   live again, for kp_shared_put's test.  */
static kp_block_t *
kp_shared_slot_pop (kp_heap_t *h, unsigned i, const char *call)
{
  kp_block_t *b = h->shared[i].head;
  if (b == NULL)
    return NULL;
  kp_block_t *next = kp_block_next (b);
  if (KP_HARDEN && (!kp_block_marked_free (b) || !kp_shared_link_ok (next)))
    {
      kp_shared_slot_drop (h, i, b, call);
      return NULL;
    }
  h->shared[i].head = next;
  h->shared[i].room++;
  kp_block_mark_live (b);
  return b;
}

/* Start or poll the purge after puts that answered R (outside the
   lock: making the thread allocates).  */
static void
kp_shared_after_put (bool released, bool freeing)
{
  if (released)
    kp_purge_poll ();
  else if (freeing
           && kp_unlikely (atomic_load_explicit (&kp_purge_state,
                                                 memory_order_relaxed)
                           == KP_PURGE_NONE))
    kp_purge_start ();
}

void *
kp_shared_malloc (kp_heap_t *h, unsigned cls, size_t n)
{
  KP_ASSERT (kp_heap_live (h));
  unsigned i = cls - KP_SHARED_FIRST;
  kp_block_t *b = h->shared[i].head;
  if (b != NULL)
    {
      /* kp_malloc_shared refused it.  */
      kp_shared_slot_drop (h, i, b, "malloc");
    }
  kp_shared_class_t *s = kp_shared_class (cls);
  pthread_once (&kp_shared_once, kp_shared_register);
  /* A signal handler inside this thread's own call of the class.  */
  if (kp_unlikely (kp_sample_lock_mine (&s->lock)))
    return kp_units_fallback (n, 0);
  size_t size = kp_class_size[cls];
  size_t more = KP_SHARED_BATCH_BYTES / size;
  if (more > KP_SHARED_SLOT_MAX / 2)
    more = KP_SHARED_SLOT_MAX / 2;
  kp_shared_slot_limit (h, i);
  if (more > (size_t) h->shared[i].room + 1)
    more = (size_t) h->shared[i].room + 1;
  kp_block_t *extra[KP_SHARED_SLOT_MAX / 2];
  size_t got = 0;
  kp_sample_lock (&s->lock);
  uint32_t now = kp_clock_ms ();
  b = kp_shared_take (s, cls, true, now);
  /* Blocks for the next mallocs too, from the chunks that have room
     (no chunk claimed for them).  */
  while (b != NULL && got + 1 < more
         && (extra[got] = kp_shared_take (s, cls, false, now)) != NULL)
    got++;
  kp_sample_unlock (&s->lock);
  /* Onto the list last first, so that the mallocs take them in the
     order the chunks gave them.  */
  while (got > 0)
    kp_shared_slot_push (&h->shared[i], extra[--got]);
  return b != NULL ? b : kp_units_fallback (n, 0);
}

/* kp_shared_free of P, at offset OFF of chunk C, past the list: a
   pointer that starts no block or a block freed already is reported;
   a block of a chunk with pages given back goes to the chunk under the
   class's lock; the others go onto the list after all if its limit, set
   again, leaves room; else back into C under the lock, with half the
   list.  Out of line, so that the list's path saves no registers.  */
KP_NOINLINE void
kp_shared_free_slow (void *p, kp_chunk_t *c, kp_heap_t *h, uintptr_t off)
{
  unsigned cls = atomic_load_explicit (&c->cls, memory_order_relaxed);
  uint64_t magic = kp_class_divmagic[cls];
  if (off * magic >= magic)
    {
      kp_misuse ("free", "invalid pointer (not the start of a block):", p);
      return;
    }
  kp_block_t *b = p;
  /* Its tag: the free itself reports a second free, whether the first
     put B on the thread's list or back in its chunk (without the look,
     larson at 1 to 40 KiB ran no faster).  */
  if (kp_block_marked_free (b))
    {
      kp_misuse ("free", "double free of", p);
      return;
    }
  unsigned i = cls - KP_SHARED_FIRST;
  bool live = kp_heap_live (h);
  if (live && atomic_load_explicit (&c->shared_magic, memory_order_relaxed))
    {
      kp_shared_slot_limit (h, i);
      if (h->shared[i].room != 0)
        {
          kp_shared_slot_push (&h->shared[i], b);
          return;
        }
    }
  kp_shared_class_t *s = kp_shared_class (cls);
  if (kp_unlikely (kp_sample_lock_mine (&s->lock)))
    {
      kp_block_mark_remote (b);
      kp_remote_count (h, false, cls, 1);
      kp_remote_push_one (c, b);
      atomic_store_explicit (&s->deferred, true, memory_order_relaxed);
      return;
    }
  kp_sample_lock (&s->lock);
  uint32_t now = kp_clock_ms ();
  enum kp_shared_put_result r = kp_shared_put (s, c, b, now);
  /* The thread's list has no room: half of it goes back with B, under
     the same lock.  */
  bool released = r == KP_SHARED_RELEASED, freeing = r == KP_SHARED_FREEING;
  if (live && h->shared[i].room == 0)
    {
      /* With no room, the list's length is its limit.  */
      for (unsigned k = h->shared[i].lim / 2u; k > 0; k--)
        {
          kp_block_t *x = kp_shared_slot_pop (h, i, "free");
          if (x == NULL)
            break;
          r = kp_shared_put (s, kp_chunk_of (x), x, now);
          released |= r == KP_SHARED_RELEASED;
          freeing |= r == KP_SHARED_FREEING;
        }
    }
  kp_sample_unlock (&s->lock);
  kp_shared_after_put (released, freeing);
}

__attribute__ ((__no_sanitize__ ("thread")))
void
kp_shared_slot_blocks (size_t free[KP_NCLASS])
{
  for (kp_heap_t *h = kp_heap_list (); h != NULL; h = h->pool_next)
    for (unsigned i = 0; i < KP_NSHARED; i++)
      {
        /* Read racily, the limit may have moved under the room.  */
        unsigned lim = __atomic_load_n (&h->shared[i].lim, __ATOMIC_RELAXED);
        unsigned room = __atomic_load_n (&h->shared[i].room,
                                         __ATOMIC_RELAXED);
        free[KP_SHARED_FIRST + i] += lim > room ? lim - room : 0;
      }
}

__attribute__ ((__no_sanitize__ ("thread")))
void
kp_shared_taken (size_t *blocks, size_t *bytes)
{
  *blocks = *bytes = 0;
  for (kp_heap_t *h = kp_heap_list (); h != NULL; h = h->pool_next)
    for (unsigned i = 0; i < KP_NSHARED; i++)
      {
        size_t n = __atomic_load_n (&h->shared[i].takes, __ATOMIC_RELAXED);
        *blocks += n;
        *bytes += n * kp_class_size[KP_SHARED_FIRST + i];
      }
}

/* Put H's list of class I back into its chunks, under one lock, and
   its limit to 0.  */
static void
kp_shared_slot_flush (kp_heap_t *h, unsigned i)
{
  kp_shared_class_t *s = kp_shared_class (KP_SHARED_FIRST + i);
  if (h->shared[i].head == NULL)
    {
      kp_shared_slot_unlimit (h, i);
      return;
    }
  if (kp_sample_lock_mine (&s->lock))
    return;                     /* a signal handler inside the lock */
  bool released = false, freeing = false;
  kp_sample_lock (&s->lock);
  uint32_t now = kp_clock_ms ();
  kp_block_t *b;
  while ((b = kp_shared_slot_pop (h, i, "free")) != NULL)
    {
      enum kp_shared_put_result r = kp_shared_put (s, kp_chunk_of (b), b,
                                                   now);
      released |= r == KP_SHARED_RELEASED;
      freeing |= r == KP_SHARED_FREEING;
    }
  kp_sample_unlock (&s->lock);
  kp_shared_slot_unlimit (h, i);
  kp_shared_after_put (released, freeing);
}

void
kp_shared_slot_decay (kp_heap_t *h)
{
  for (unsigned i = 0; i < KP_NSHARED; i++)
    {
      if (h->shared[i].takes == h->shared[i].seen)
        kp_shared_slot_flush (h, i);
      h->shared[i].seen = h->shared[i].takes;
    }
}

void
kp_shared_thread_exit (kp_heap_t *h)
{
  for (unsigned i = 0; i < KP_NSHARED; i++)
    kp_shared_slot_flush (h, i);
}

/* ---- The decay, and trim --------------------------------------------- */

/* Give back what S's chunks hold free: with ALL, every empty chunk and
   the free pages of every chunk with room (trim); otherwise only those
   of chunks unused since NOW - DELAY.  The pages given back.  */
static size_t
kp_shared_give_back (kp_shared_class_t *s, bool all, uint32_t now,
                     uint32_t delay, size_t *calls)
{
  if (atomic_load_explicit (&s->deferred, memory_order_relaxed))
    kp_shared_collect_all (s, now);
  size_t pages = 0;
  kp_chunk_t *c, *next;
  for (c = s->partial.head; c != NULL; c = next)
    {
      next = c->next;
      if (!all && (c->decayed || now - c->idle_since < delay))
        continue;
      kp_shared_collect (s, c);
      if (kp_chunk_used (c) == 0)
        {
          if (s->spares != 0)
            s->spares--;
          kp_clist_remove (&s->partial, c);
          kp_shared_settle (s, c);
          size_t carved = (size_t) (c->bump - kp_chunk_data (c));
          size_t resident = (carved >> kp_page_shift ()) - c->npurged;
          kp_chunk_release (c, KP_PAGES_DISCARD);
          pages += resident;
          ++*calls;
          continue;
        }
      pages += kp_chunk_purge (c, calls);
      kp_shared_mark_purged (c);
      kp_shared_settle (s, c);
    }
  return pages;
}

/* The decay's pass: the classes whose lock is free (one that is held
   is in use).  */
size_t
kp_shared_decay (uint32_t now, uint32_t delay, size_t *calls)
{
  size_t pages = 0;
  for (unsigned i = 0; i < KP_NSHARED; i++)
    {
      kp_shared_class_t *s = &kp_shared[i];
      if (atomic_load_explicit (&s->undecayed, memory_order_relaxed) == 0
          && !atomic_load_explicit (&s->deferred, memory_order_relaxed))
        continue;
      if (!kp_sample_trylock (&s->lock))
        continue;
      pages += kp_shared_give_back (s, false, now, delay, calls);
      kp_sample_unlock (&s->lock);
    }
  return pages;
}

size_t
kp_shared_trim (size_t *calls)
{
  /* It takes the locks: the fork handlers first.  */
  pthread_once (&kp_shared_once, kp_shared_register);
  kp_heap_t *h = kp_tc.heap;
  if (kp_heap_live (h))
    kp_shared_thread_exit (h);
  size_t pages = 0;
  uint32_t now = kp_clock_ms ();
  for (unsigned i = 0; i < KP_NSHARED; i++)
    {
      kp_shared_class_t *s = &kp_shared[i];
      if (kp_sample_lock_mine (&s->lock))
        continue;
      kp_sample_lock (&s->lock);
      pages += kp_shared_give_back (s, true, now, 0, calls);
      kp_sample_unlock (&s->lock);
    }
  return pages;
}
