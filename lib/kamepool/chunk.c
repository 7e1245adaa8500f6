/* chunk.c -- small chunks: carving, remote frees, the owned bit that
   moves a chunk between threads, and the moves between its owner's
   lists that a free makes (unfull, displace, retire).

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   Ownership protocol (model: testsuite/kamepool.model/ownership.pml).
   A chunk's xthread_free word is a list of remotely freed blocks with
   the OWNED bit in its low bit.  Whoever sets that bit owns the chunk
   and alone may touch its line-0 fields (free, used, bump) or release
   it, so a chunk is released exactly once, by the holder of the bit.

     kp_free_remote       into the thread's batch (plain stores; inline
                          in kp_internal.h, kp_free_remote_slow here); the
     kp_rbatch_flush      batch, or a lone block, is pushed with one
                          CAS (acq_rel) that always sets OWNED; a
                          pusher that found the bit clear has just taken
                          an ABANDONED chunk and runs kp_abandoned_collect.
                          A block in a batch still counts in used, so
                          its chunk is not released before the flush.
     kp_rbatch_take       the thread's own malloc, once it has a chunk of
                          the class, takes a block back out of its
                          batch (plain): the block never left used, so
                          the chunk is not told.
     kp_chunk_collect     the owner swaps the list out, keeping OWNED
                          (exchange, acquire: the blocks' next fields
                          and each pushed list's header).
     kp_chunk_abandon     the owner clears `owner', then CASes OWNED -> 0
                          (release: its line-0 writes go to the next owner).
                          The CAS fails when frees arrived; it then keeps
                          the chunk.
     kp_chunk_adopt       a refill CASes OWNED into an abandoned chunk
                          (acquire) found through the region's hint bits.
     kp_chunk_release     owner with used == 0: owner = NULL, xthread_free
                          = OWNED (DEAD, so a stale hint can never take
                          it), then the units are released.  */

#include <config.h>

#include "kp_internal.h"

/* The divmagic of the blocks of small chunk C (kp_chunk_t), from its
   class's table: no division.  */
static inline uint64_t
kp_chunk_divmagic (const kp_chunk_t *c)
{
  return kp_class_divmagic[atomic_load_explicit (&c->cls,
                                                 memory_order_relaxed)];
}

/* The divmagic an owner's free tests, for a chunk of class CLS with no
   page given back: 0 under KAME_POOL_ON_MISUSE=report, so that every
   free is checked when it is made and a misuse leaves the heap as it
   was.  */
static inline uint64_t
kp_divmagic_fast (unsigned cls)
{
  return kp_setting (&kp_misuse_abort) ? kp_class_divmagic[cls] : 0;
}

/* Set up C, whose UNITS units the caller has just claimed, as a chunk
   of KIND (class CLS, blocks of SIZE bytes) owned by H (NULL: none):
   the fields that every chunk starts with, KIND last.  The caller has
   set the fields of its kind's own (used, capacity, bump, limit).  */
void
kp_chunk_setup (kp_chunk_t *c, enum kp_chunk_kind kind, unsigned cls,
                unsigned units, uint32_t size, kp_heap_t *h)
{
  c->free = NULL;
  c->next = c->prev = NULL;
  c->fostered = false;
  c->shed = false;
  c->full = false;
  c->orig_heap = h;
  for (unsigned w = 0; w < KP_PURGE_WORDS; w++)
    c->purged[w] = 0;
  c->npurged = 0;
  c->idle_since = 0;
  c->decayed = false;
  atomic_store_explicit (&c->shared_magic,
                         h == &kp_heap_shared ? kp_class_divmagic[cls] : 0,
                         memory_order_relaxed);
  atomic_store_explicit (&c->block_size, size, memory_order_relaxed);
  atomic_store_explicit (&c->cls, (uint8_t) cls, memory_order_relaxed);
  atomic_store_explicit (&c->units, (uint8_t) units, memory_order_relaxed);
  c->group_tail = kind == KP_KIND_SMALL && kp_units_in_group (c);
  atomic_store_explicit (&c->xthread_free, KP_TF_OWNED, memory_order_relaxed);
  atomic_store_explicit (&c->owner, h, memory_order_relaxed);
  atomic_store_explicit (&c->kind, kind, memory_order_relaxed);
}

void
kp_chunk_init_small (kp_chunk_t *c, unsigned cls, unsigned units,
                     kp_heap_t *h)
{
  uint32_t size = kp_class_size[cls];
  char *data = kp_chunk_data (c);
  c->used = 0;
  c->pops = 0;
  c->capacity = (uint32_t) (((size_t) units << KP_UNIT_SHIFT) / size);
  c->divmagic = kp_divmagic_fast (cls);
  c->bump = data;
  c->limit = data + (size_t) c->capacity * size;
  kp_chunk_setup (c, KP_KIND_SMALL, cls, units, size, h);
}

bool
kp_chunk_block_start (const kp_chunk_t *c, uintptr_t off)
{
  uint64_t m = kp_chunk_divmagic (c);
  return off * m < m;
}

/* The expensive check (--enable-debug=expensive) of C, a small chunk
   this thread owns: every block on its free list is a block of C below
   the carving point, marked free in a hardened build, and the list
   holds at most the blocks that are not handed out.  It touches every
   free block, so it runs only when a refill takes C into use.  */
bool
kp_chunk_list_ok (const kp_chunk_t *c)
{
  const char *data = kp_chunk_data (c);
  uint32_t n = 0;
  for (const kp_block_t *b = c->free; b != NULL; b = kp_block_next (b))
    {
      const char *p = (const char *) b;
      if (p < data || p >= c->bump
          || !kp_chunk_block_start (c, (uintptr_t) (p - data))
          || (KP_HARDEN && !kp_block_marked_free (b))
          || ++n > c->capacity - kp_chunk_used (c))
        return false;
    }
  return true;
}

/* One page of C less is given back; with none left, the owner's free
   takes its fast path again.  */
static inline void
kp_chunk_unpurged_one (kp_chunk_t *c)
{
  if (--c->npurged == 0)
    c->divmagic = kp_divmagic_fast (atomic_load_explicit
                                    (&c->cls, memory_order_relaxed));
}

static inline bool
kp_chunk_page_purged (const kp_chunk_t *c, size_t page)
{
  return (c->purged[page / 64] >> (page % 64)) & 1;
}

bool
kp_chunk_block_purged (const kp_chunk_t *c, const void *b)
{
  size_t off = (size_t) ((const char *) b - kp_chunk_data (c));
  return c->npurged != 0 && kp_chunk_page_purged (c, off >> kp_page_shift ());
}

/* Link again the blocks that start in the lowest page the decay gave
   back (their link words were lost with the page); true when it
   linked any.  A page that holds no block start (inside a block
   larger than a page) is only unmarked.  Out of line, so that
   kp_chunk_carve, on every refill's path, saves no registers for it.  */
static KP_NOINLINE bool
kp_chunk_unpurge (kp_chunk_t *c)
{
  unsigned sh = kp_page_shift ();
  size_t size = atomic_load_explicit (&c->block_size, memory_order_relaxed);
  char *data = kp_chunk_data (c);
  for (unsigned w = 0; w < KP_PURGE_WORDS; w++)
    while (c->purged[w] != 0)
      {
        size_t page = w * 64 + (size_t) __builtin_ctzll (c->purged[w]);
        c->purged[w] &= c->purged[w] - 1;
        kp_chunk_unpurged_one (c);
        size_t lo = page << sh, hi = lo + ((size_t) 1 << sh);
        size_t i = (lo + size - 1) / size;
        if (i * size >= hi)
          continue;
        /* Link the page's blocks in address order, the last one first,
           and publish the head last (a fork from a signal handler).  */
        size_t last = (hi - 1) / size;
        kp_block_t *head = c->free;
        for (size_t j = last + 1; j-- > i;)
          {
            kp_block_t *b = (kp_block_t *) (data + j * size);
            kp_block_link (b, head);
            kp_block_mark_free (b);
            head = b;
          }
        /* Pages inside the last block, with no start of their own,
           hold no purged block any more.  */
        size_t end = (last + 1) * size;
        for (size_t q = page + 1; (q << sh) < end; q++)
          if (((q << sh) + size - 1) / size * size >= (q + 1) << sh
              && kp_chunk_page_purged (c, q))
            {
              c->purged[q / 64] &= ~((uint64_t) 1 << (q % 64));
              kp_chunk_unpurged_one (c);
            }
        atomic_signal_fence (memory_order_release);
        c->free = head;
        return true;
      }
  return false;
}

/* Link the blocks of a page the decay gave back, if there is one, so
   that the chunk stays as compact as it was; otherwise carve about a
   page of never-used blocks onto the free list, so that pages are
   touched only when they are about to be used.  */
bool
kp_chunk_carve (kp_chunk_t *c)
{
  if (kp_unlikely (c->npurged != 0) && kp_chunk_unpurge (c))
    return true;
  char *p = c->bump;
  if (p >= c->limit)
    return false;
  size_t size = atomic_load_explicit (&c->block_size, memory_order_relaxed);
  size_t n = KP_PAGE / size;
  if (n == 0)
    n = 1;
  size_t left = (size_t) (c->limit - p) / size;
  if (n > left)
    n = left;
  /* Link the run first and publish it last, so that a fork from a
     signal handler mid-carve leaves a consistent list.  */
  kp_block_t *head = (kp_block_t *) p;
  kp_block_t *b = head;
  for (size_t i = 1; i < n; i++)
    {
      kp_block_t *nx = (kp_block_t *) ((char *) b + size);
      kp_block_link (b, nx);
      kp_block_mark_free (b);
      b = nx;
    }
  kp_block_link (b, c->free);
  kp_block_mark_free (b);
  c->bump = p + n * size;
  /* No instruction: it keeps the compiler from moving the stores of
     the links below the store that publishes them.  */
  atomic_signal_fence (memory_order_release);
  c->free = head;
  return true;
}

/* What a walk of a list of small chunk C checks each link against:
   C's first block, the length of its data and the divisibility magic
   of its class (not C's own divmagic, which is 0 while pages are given
   back, or under KAME_POOL_ON_MISUSE=report).  */
typedef struct kp_link_bounds
{
  const char *data;
  uintptr_t span;
  uint64_t magic;
} kp_link_bounds_t;

static inline kp_link_bounds_t
kp_link_bounds (const kp_chunk_t *c)
{
  kp_link_bounds_t lb = { kp_chunk_data (c),
                          (uintptr_t) (c->limit - kp_chunk_data (c)), 0 };
  if (KP_HARDEN)
    lb.magic = kp_chunk_divmagic (c);
  return lb;
}

/* Whether NEXT, a decoded link of a list of the chunk of LB, is the
   end of the list or a block of that chunk: a link changed by a write
   into a freed block is neither (in hardened builds; plain links are
   trusted).  */
static inline bool
kp_link_ok (const kp_link_bounds_t *lb, const kp_block_t *next)
{
  if (!KP_HARDEN || next == NULL)
    return true;
  /* Below DATA, the offset wraps round to above SPAN.  */
  uintptr_t off = (uintptr_t) next - (uintptr_t) lb->data;
  return off < lb->span && off * lb->magic < lb->magic;
}

/* B's link, in a list of C's, was changed while B was free: report it
   and end the list at B (the blocks after it are lost, none of them is
   handed out twice).  */
static void
kp_list_cut (kp_block_t *b)
{
  kp_misuse ("free", "corrupted free list (a freed block was written to) "
             "at", b);
  kp_block_link (b, NULL);
}

/* B, on the list of C's remote frees, lost the remote tag: the owner
   freed it again after another thread did (the owner's free does not
   read the tag, kp_free_owned), and its link now leads into the
   owner's list, or it was handed out since.  Report the double free;
   the walk ends before B (the blocks after it are lost, none of them
   is handed out twice).  */
static void
kp_collect_double (kp_block_t *b)
{
  kp_misuse ("free", "double free of", b);
}

/* The head block of every list kp_remote_push publishes (a batch, or
   a lone block) carries, after its link and tag, the list's length and
   its last block (encoded as a link is), so that kp_chunk_collect
   splices the lists it takes without walking them.  Blocks of 32 bytes
   and up have room for it; a chunk of 16-byte blocks is walked.  */
typedef struct kp_push_head
{
  kp_block_t block;
  uintptr_t count;
  uintptr_t tail;
} kp_push_head_t;

static inline bool
kp_chunk_headed (const kp_chunk_t *c)
{
  return atomic_load_explicit (&c->block_size, memory_order_relaxed)
         >= sizeof (kp_push_head_t);
}

/* HEAD, with OWNED clear, is what C's remote list held: lists that
   kp_remote_push published, one after the other.  The number of their
   blocks, read from their heads alone, and in *TAIL the last block of
   the last list; 0 when a head fails a check (hardened), and the
   caller walks the whole list block by block.  Each list's head and
   last block must carry the remote tag, and their links lead into C or
   end the whole list; its length must fit in C's used count with the
   lists before it; a list of one block ends at its head.  A block
   inside a list is not looked at: the pop checks it as it checks the
   owner's own frees (kp_chunk_pop).  */
static inline uint32_t
kp_collect_headed (const kp_chunk_t *c, kp_block_t *head, kp_block_t **tail)
{
  kp_link_bounds_t lb = kp_link_bounds (c);
  uint32_t n = 0;
  for (kp_block_t *b = head;;)
    {
      const kp_push_head_t *ph = (const kp_push_head_t *) b;
      kp_block_t *t = (kp_block_t *) (ph->tail ^ kp_link_key (b));
      uintptr_t k = ph->count;
      if (KP_HARDEN)
        {
          kp_block_t *second = kp_block_next (b);
          if (!kp_block_marked_remote (b) || !kp_link_ok (&lb, second)
              || t == NULL || !kp_link_ok (&lb, t)
              || !kp_block_marked_remote (t)
              || k == 0 || k > (uintptr_t) (kp_chunk_used (c) - n)
              || (k == 1) != (t == b) || (second == NULL) != (t == b))
            return 0;
        }
      kp_block_t *next = kp_block_next (t);
      if (!kp_link_ok (&lb, next))
        return 0;
      n += (uint32_t) k;
      if (next == NULL)
        {
          *tail = t;
          return n;
        }
      b = next;
    }
}

/* HEAD is the list of C's remote frees, and the decay gave pages of C
   back.  A block that starts in such a page was free already (its mark
   went with the page): report the double free and leave the block out.
   The list without them.  */
static kp_block_t *
kp_collect_purged (kp_chunk_t *c, kp_block_t *head)
{
  char *data = kp_chunk_data (c);
  unsigned sh = kp_page_shift ();
  kp_link_bounds_t lb = kp_link_bounds (c);
  kp_block_t *keep = NULL, *next;
  size_t dropped = 0;
  for (kp_block_t *b = head; b != NULL; b = next)
    {
      if (kp_unlikely (!kp_block_marked_remote (b)))
        {
          kp_collect_double (b);
          break;
        }
      next = kp_block_next (b);
      if (!kp_link_ok (&lb, next))
        {
          kp_list_cut (b);
          next = NULL;
        }
      if (kp_chunk_page_purged (c, (size_t) ((char *) b - data) >> sh))
        {
          kp_misuse ("free", "double free of", b);
          dropped++;
          continue;
        }
      kp_block_link (b, keep);
      keep = b;
    }
  /* Their frees were counted as remote frees, and each was counted in
     used when it was first handed out, not this time.  */
  if (dropped != 0)
    kp_remote_count (kp_tc.heap, true,
                     atomic_load_explicit (&c->cls, memory_order_relaxed),
                     dropped);
  return keep;
}

/* HEAD is what C's remote list held: the same as kp_collect_headed,
   block by block, requiring the remote tag of every block and a link
   into C.  A block without the tag is a double free, reported, and the
   list ends before it; a link that leads out of C is reported, and the
   list ends at its block.  *HEAD becomes NULL when its first block is
   refused.  */
static uint32_t
kp_collect_walk (const kp_chunk_t *c, kp_block_t **head, kp_block_t **tail)
{
  kp_link_bounds_t lb = kp_link_bounds (c);
  uint32_t n = 0;
  kp_block_t *next;
  *tail = NULL;
  for (kp_block_t *b = *head; b != NULL; b = next)
    {
      if (kp_unlikely (!kp_block_marked_remote (b)))
        {
          kp_collect_double (b);
          if (*tail != NULL)
            kp_block_link (*tail, NULL);
          else
            *head = NULL;
          break;
        }
      next = kp_block_next (b);
      if (kp_unlikely (!kp_link_ok (&lb, next)))
        {
          kp_list_cut (b);
          next = NULL;
        }
      *tail = b;
      n++;
    }
  return n;
}

/* Move the remotely freed blocks onto the owner's list; their count.
   The lists' headers tell the count and the last block, except in a
   chunk of 16-byte blocks, when pages of the chunk were given back,
   or when a header fails its checks: then a walk.  */
uint32_t
kp_chunk_collect (kp_chunk_t *c)
{
  uintptr_t tf = atomic_load_explicit (&c->xthread_free, memory_order_relaxed);
  if ((tf & ~KP_TF_OWNED) == 0)
    return 0;
  tf = atomic_exchange_explicit (&c->xthread_free, KP_TF_OWNED,
                                 memory_order_acquire);
  kp_block_t *head = (kp_block_t *) (tf & ~KP_TF_OWNED);
  if (head == NULL)
    return 0;
  uint32_t n = 0;
  kp_block_t *tail = NULL;
  if (KP_HARDEN && kp_unlikely (c->npurged != 0))
    head = kp_collect_purged (c, head);
  else if (kp_chunk_headed (c))
    n = kp_collect_headed (c, head, &tail);
  if (n == 0)
    n = kp_collect_walk (c, &head, &tail);
  if (n == 0)
    return 0;
  kp_block_link (tail, c->free);
  c->free = head;
  KP_ASSERT (kp_chunk_used (c) >= n);
  c->used -= n;
  kp_remote_count (kp_tc.heap, true,
                   atomic_load_explicit (&c->cls, memory_order_relaxed), n);
  return n;
}

/* The blocks handed out by the small chunks released so far, per class
   (kp_chunk_release adds a chunk's pops): with the pops of the chunks
   in use, the blocks ever allocated.  Relaxed: statistics.  */
_Atomic (uint64_t) kp_small_pops[KP_NCLASS];

/* Remote frees pushed and collected by threads with no heap (before
   their first malloc, or after their exit), per class: few, so a
   read-modify-write each.  Relaxed: statistics.  */
static _Atomic (size_t) kp_remote_out_nobody[KP_NCLASS];
static _Atomic (size_t) kp_remote_in_nobody[KP_NCLASS];

/* Count N blocks of class CLS freed into another thread's chunk (IN
   false) or collected from a chunk's remote list (IN true) by the
   calling thread, whose heap is H.  */
void
kp_remote_count (kp_heap_t *h, bool in, unsigned cls, size_t n)
{
  if (kp_likely (kp_heap_live (h)))
    {
      kp_owner_add (in ? &h->remote_in[cls] : &h->remote_out[cls], n);
    }
  else
    atomic_fetch_add_explicit (in ? &kp_remote_in_nobody[cls]
                               : &kp_remote_out_nobody[cls], n,
                               memory_order_relaxed);
}

/* Blocks freed remotely and not yet collected, per class, over all
   threads, into PENDING: those published (remote_out less remote_in)
   and those waiting in a batch (exact when no other thread allocates
   or frees).  */
void
kp_remote_pending (size_t pending[KP_NCLASS])
{
  for (unsigned cls = 0; cls < KP_NCLASS; cls++)
    pending[cls] = atomic_load_explicit (&kp_remote_out_nobody[cls],
                                         memory_order_relaxed)
                   - atomic_load_explicit (&kp_remote_in_nobody[cls],
                                           memory_order_relaxed);
  for (kp_heap_t *h = kp_heap_list (); h != NULL; h = h->pool_next)
    {
      for (unsigned cls = 0; cls < KP_NCLASS; cls++)
        pending[cls] += atomic_load_explicit (&h->remote_out[cls],
                                              memory_order_relaxed)
                        - atomic_load_explicit (&h->remote_in[cls],
                                                memory_order_relaxed);
      for (unsigned i = 0; i < KP_RBATCH_SLOTS; i++)
        pending[atomic_load_explicit (&h->rbatch[i].cls,
                                      memory_order_relaxed)]
          += atomic_load_explicit (&h->rbatch[i].count, memory_order_relaxed);
    }
}

/* The largest chunk of the small classes, in blocks: one unit of the
   smallest class (the classes of chunks of several units are 10 KiB
   and up).  The free-block map of kp_chunk_purge has one bit per
   block.  */
#define KP_PURGE_MAX_BLOCKS (KP_UNIT_SIZE / 16)

/* Set in FREEMAP the bit of every block on C's free list (one bit per
   block below C's bump pointer, which the list's blocks all are).  A
   block met twice is on the list twice: a double free that the owner's
   free let through (kp_free_owned), which the walk reports, ending the
   list before the second meeting: true then.  */
static bool
kp_chunk_map_free (kp_chunk_t *c, uint64_t *freemap)
{
  size_t size = atomic_load_explicit (&c->block_size, memory_order_relaxed);
  char *data = kp_chunk_data (c);
  size_t carved = (size_t) (c->bump - data) / size;
  KP_ASSERT (carved <= KP_PURGE_MAX_BLOCKS);
  for (size_t i = 0; i < (carved + 63) / 64; i++)
    freemap[i] = 0;
  kp_link_bounds_t lb = kp_link_bounds (c);
  kp_block_t *prev = NULL;
  for (kp_block_t *b = c->free; b != NULL; prev = b, b = kp_block_next (b))
    {
      size_t i = (size_t) ((char *) b - data) / size;
      uint64_t bit = (uint64_t) 1 << (i % 64);
      if (kp_unlikely (freemap[i / 64] & bit))
        {
          kp_misuse ("free", "double free of", b);
          if (prev != NULL)
            kp_block_link (prev, NULL);
          else
            c->free = NULL;
          return true;
        }
      freemap[i / 64] |= bit;
      if (!kp_link_ok (&lb, kp_block_next (b)))
        kp_list_cut (b);
    }
  return false;
}

/* Give back the pages past the bump pointer of C, owned by the calling
   thread, that may be resident (its units' rpages), when C was set up
   in a small chunks' group (GROUP_TAIL), once: a huge page brought
   them in, where a chunk on 4 KiB pages faults in only the pages it
   carves.  Carving faults them in again, one at a time (the group is
   split).  The units' rpages come down to the carving, so that the
   next chunk there, which carves as far, gives nothing back.  The
   pages given back; *CALLS counts the call.  */
static size_t
kp_chunk_tail_give (kp_chunk_t *c, size_t *calls)
{
  if (!c->group_tail)
    return 0;
  c->group_tail = false;
  kp_region_t *r = kp_region_of (c);
  unsigned base = kp_chunk_base_unit (c);
  unsigned units = atomic_load_explicit (&c->units, memory_order_relaxed);
  unsigned sh = kp_page_shift ();
  char *data = kp_chunk_data (c);
  uintptr_t pg = ((uintptr_t) 1 << sh) - 1;
  char *from = (char *) (((uintptr_t) c->bump + pg) & ~pg), *end = from;
  for (unsigned i = 0; i < units; i++)
    {
      char *start = data + ((size_t) i << KP_UNIT_SHIFT);
      char *held = start + ((size_t) r->rpages[base + i] << sh);
      if (held > end)
        end = held;
      if (held > from)
        r->rpages[base + i] = (uint8_t) (from > start
                                         ? (size_t) (from - start) >> sh
                                         : 0);
    }
  if (from >= end)
    return 0;
  kp_group_split (r, base);
  kp_os_discard (from, (size_t) (end - from));
  ++*calls;
  return (size_t) (end - from) >> sh;
}

/* The decay: give back to the kernel every page below C's bump pointer
   that no live block touches, and take the blocks that start in those
   pages off the free list (kp_chunk_carve links them again when the
   chunk needs them).  C is owned by the calling thread; its remote
   frees are collected first.  The number of pages given
   back; the madvise calls it made (one per run of pages) are added to
   *CALLS.  */
size_t
kp_chunk_purge (kp_chunk_t *c, size_t *calls)
{
  kp_chunk_collect (c);
  unsigned sh = kp_page_shift ();
  size_t size = atomic_load_explicit (&c->block_size, memory_order_relaxed);
  char *data = kp_chunk_data (c);
  size_t tail = kp_chunk_tail_give (c, calls);
  size_t carved = (size_t) (c->bump - data) / size;
  size_t npages = (size_t) (c->bump - data) >> sh;
  if (npages == 0
      || carved - kp_chunk_used (c) < ((size_t) 1 << sh) / size + 1
      || npages > KP_PURGE_WORDS * 64 || carved > KP_PURGE_MAX_BLOCKS)
    return tail;
  uint64_t freemap[KP_PURGE_MAX_BLOCKS / 64];
  kp_chunk_map_free (c, freemap);
  /* A page is busy when a live block overlaps it.  A block that starts
     in a page given back earlier is free, off the list.  */
  uint64_t busy[KP_PURGE_WORDS] = { 0 };
  for (size_t i = 0; i < carved; i++)
    {
      size_t start = i * size;
      if (((freemap[i / 64] >> (i % 64)) & 1)
          || kp_chunk_page_purged (c, start >> sh))
        continue;
      for (size_t q = start >> sh; q <= (start + size - 1) >> sh; q++)
        busy[q / 64] |= (uint64_t) 1 << (q % 64);
    }
  size_t given = 0;
  size_t run = 0, runlen = 0;
  for (size_t q = 0; q <= npages; q++)
    {
      bool take = q < npages
                  && !((busy[q / 64] >> (q % 64)) & 1)
                  && !kp_chunk_page_purged (c, q);
      if (take)
        {
          if (runlen++ == 0)
            run = q;
          continue;
        }
      if (runlen == 0)
        continue;
      if (given == 0)
        kp_group_split (kp_region_of (c), kp_chunk_base_unit (c));
      kp_os_discard (data + (run << sh), runlen << sh);
      ++*calls;
      for (size_t r = run; r < run + runlen; r++)
        c->purged[r / 64] |= (uint64_t) 1 << (r % 64);
      c->npurged += (uint16_t) runlen;
      c->divmagic = 0;          /* kp_free_owned: every free is checked */
      given += runlen;
      runlen = 0;
    }
  if (given == 0)
    return tail;
  /* The free list again, in address order, without the blocks that
     start in a page given back.  */
  kp_block_t *head = NULL;
  for (size_t i = carved; i-- > 0;)
    if (((freemap[i / 64] >> (i % 64)) & 1)
        && !kp_chunk_page_purged (c, (i * size) >> sh))
      {
        kp_block_t *b = (kp_block_t *) (data + i * size);
        kp_block_link (b, head);
        head = b;
      }
  c->free = head;
  return given + tail;
}

static void
kp_hint_set (kp_chunk_t *c)
{
  kp_region_t *r = kp_region_of (c);
  unsigned u = kp_chunk_base_unit (c);
  atomic_fetch_or_explicit (&r->abandoned[u / 64], (uint64_t) 1 << (u % 64),
                            memory_order_release);
}

/* Clear C's hint bit; true if it was set.  */
static bool
kp_hint_take (kp_chunk_t *c)
{
  kp_region_t *r = kp_region_of (c);
  unsigned u = kp_chunk_base_unit (c);
  uint64_t bit = (uint64_t) 1 << (u % 64);
  if ((atomic_load_explicit (&r->abandoned[u / 64], memory_order_relaxed)
       & bit) == 0)
    return false;
  return (atomic_fetch_and_explicit (&r->abandoned[u / 64], ~bit,
                                     memory_order_acquire) & bit) != 0;
}

/* Clear the OWNED bit of C, which the caller holds and whose owner it
   has set to NULL, with the release CAS that publishes C's state to the
   next owner; false when remote frees arrived meanwhile (the caller
   still holds C).  A chunk with room is then advertised to adopters; a
   full one waits for the first free into it, which takes it over.  */
static bool
kp_chunk_let_go (kp_chunk_t *c)
{
  bool space = kp_chunk_has_space (c);
  uintptr_t expected = KP_TF_OWNED;
  if (!atomic_compare_exchange_strong_explicit (&c->xthread_free, &expected,
                                                0, memory_order_release,
                                                memory_order_relaxed))
    return false;
  if (space)
    kp_hint_set (c);
  return true;
}

static void kp_abandoned_note (void);

/* Give up ownership of C, which H owns.  True when C is abandoned;
   false when remote frees arrived first: H then still owns C and has
   collected them.  */
bool
kp_chunk_abandon (kp_chunk_t *c, kp_heap_t *h)
{
  atomic_store_explicit (&c->owner, NULL, memory_order_relaxed);
  /* The background purge gives its free pages back once it has waited
     the delay unadopted (kp_abandoned_decay).  */
  c->idle_since = kp_clock_ms ();
  c->decayed = false;
  if (kp_chunk_let_go (c))
    {
      kp_abandoned_note ();
      return true;
    }
  atomic_store_explicit (&c->owner, h, memory_order_relaxed);
  kp_chunk_collect (c);
  return false;
}

/* The background purge of abandoned chunks.  kp_abandoned_waiting
   counts the abandonments the purge has not seen pass the delay: added
   to (relaxed) by every abandonment, and set by each walk, through an
   add of its difference, to the chunks it found too young, so that
   abandonments during the walk still count.  A hint: a chunk adopted
   meanwhile only makes the next walk find nothing.  */
static _Atomic (size_t) kp_abandoned_waiting;

static size_t
kp_abandoned_held (void)
{
  return atomic_load_explicit (&kp_abandoned_waiting, memory_order_relaxed);
}

/* Take abandoned chunk C, whose hint the caller took, as an adopter
   does, for the background purge: give its free pages back if at NOW
   it has waited DELAY since its abandonment, release it if it is
   empty, and let it go again.  The pages given back; *YOUNG is set
   when C must wait longer.  */
static size_t
kp_abandoned_purge (kp_chunk_t *c, uint32_t now, uint32_t delay,
                    size_t *calls, bool *young)
{
  uintptr_t tf = atomic_load_explicit (&c->xthread_free,
                                       memory_order_relaxed);
  do
    if (tf & KP_TF_OWNED)
      return 0;                 /* an adopter has it */
  while (!atomic_compare_exchange_weak_explicit (&c->xthread_free, &tf,
                                                 tf | KP_TF_OWNED,
                                                 memory_order_acquire,
                                                 memory_order_relaxed));
  size_t pages = 0;
  if (atomic_load_explicit (&c->kind, memory_order_relaxed) == KP_KIND_SMALL
      && c->used != 0 && !c->decayed)
    {
      kp_chunk_collect (c);
      if (c->used != 0)
        {
          if (now - c->idle_since >= delay)
            {
              pages = kp_chunk_purge (c, calls);
              c->decayed = true;
            }
          else
            *young = true;
        }
    }
  for (;;)
    {
      kp_chunk_collect (c);
      if (c->used == 0)
        {
          kp_chunk_release (c, KP_PAGES_LAZY);
          return pages;
        }
      if (kp_chunk_let_go (c))
        return pages;
    }
}

static size_t
kp_abandoned_decay (uint32_t now, uint32_t delay, size_t *calls)
{
  size_t seen = atomic_load_explicit (&kp_abandoned_waiting,
                                      memory_order_relaxed);
  size_t pages = 0, young = 0;
  KP_FOR_EACH_REGION (r)
    for (unsigned w = 0; w < KP_CLAIM_WORDS; w++)
      {
        uint64_t bits = atomic_load_explicit (&r->abandoned[w],
                                              memory_order_relaxed);
        for (; bits != 0; bits &= bits - 1)
          {
            kp_chunk_t *c = &r->desc[w * 64
                                     + (unsigned) __builtin_ctzll (bits)];
            if (!kp_hint_take (c))
              continue;
            bool wait = false;
            pages += kp_abandoned_purge (c, now, delay, calls, &wait);
            young += wait;
          }
      }
  atomic_fetch_add_explicit (&kp_abandoned_waiting, young - seen,
                             memory_order_relaxed);
  return pages;
}

/* A chunk was abandoned: the background purge has one more to wait
   for.  */
static void
kp_abandoned_note (void)
{
  static const kp_purge_upper_t upper = { kp_abandoned_decay,
                                          kp_abandoned_held };
  static _Atomic (bool) registered;
  if (!atomic_load_explicit (&registered, memory_order_relaxed))
    {
      kp_purge_register (KP_PURGE_UPPER_CHUNKS, &upper);
      atomic_store_explicit (&registered, true, memory_order_relaxed);
    }
  atomic_fetch_add_explicit (&kp_abandoned_waiting, 1, memory_order_relaxed);
}

void
kp_chunk_hand_over (kp_heap_t *h, kp_chunk_t *c, enum kp_release_pages pages)
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

/* The first block of small chunk C below its bump pointer, outside the
   pages the decay gave back, that carries no free tag; NULL when every
   one does.  A sequential read of the chunk, which the prefetchers
   follow, once per release, where a tag read on every free would miss
   the cache once per free (kp_free_owned).  */
static kp_block_t *
kp_chunk_live_block (const kp_chunk_t *c)
{
  size_t size = atomic_load_explicit (&c->block_size, memory_order_relaxed);
  char *data = kp_chunk_data (c);
  unsigned sh = kp_page_shift ();
  for (char *p = data; p < c->bump; p += size)
    if (!kp_block_marked_free ((const kp_block_t *) p)
        && !(c->npurged != 0
             && kp_chunk_page_purged (c, (size_t) (p - data) >> sh)))
      return (kp_block_t *) p;
  return NULL;
}

/* C's used count is 0 but it holds a live block: an owner's double
   free brought the count down.  Report it (the block on the list twice
   when the walk finds it), and leave C to nobody, never released: its
   owner is NULL while the OWNED bit stays set, so later frees wait on
   its remote list and no refill or adopter takes it.  */
static KP_NOINLINE void
kp_chunk_release_refused (kp_chunk_t *c, kp_block_t *live)
{
  uint64_t freemap[KP_PURGE_MAX_BLOCKS / 64];
  if (!kp_chunk_map_free (c, freemap))
    kp_misuse ("free", "double free (a block is still in use in its "
               "emptied chunk) at", live);
  atomic_store_explicit (&c->owner, NULL, memory_order_relaxed);
}

/* C's owner, with used == 0, releases it.  Hardened, only after a look
   at every block: see kp_chunk_live_block.  */
void
kp_chunk_release (kp_chunk_t *c, enum kp_release_pages pages)
{
  KP_ASSERT (c->used == 0);
  if (KP_HARDEN)
    {
      kp_block_t *live = kp_chunk_live_block (c);
      if (kp_unlikely (live != NULL))
        {
          kp_chunk_release_refused (c, live);
          return;
        }
    }
  atomic_fetch_add_explicit (&kp_small_pops[kp_chunk_cls (c)], c->pops,
                             memory_order_relaxed);
  atomic_store_explicit (&c->owner, NULL, memory_order_relaxed);
  atomic_store_explicit (&c->xthread_free, KP_TF_OWNED, memory_order_relaxed);
  kp_hint_take (c);
  kp_units_release (c, pages);
}

/* A, the active chunk of its class in H, gives its place up: release
   it if empty, else put it on the partial list (at the head when HEAD,
   for a chunk whose blocks are still in the cache), or on the full list
   when it has no room.  Out of line: kp_chunk_unfull's own path saves
   no registers for it.  */
KP_NOINLINE void
kp_chunk_displace (kp_heap_t *h, kp_chunk_t *a, bool head)
{
  kp_chunk_set_active (a, false);
  if (a->used == 0)
    kp_chunk_release (a, KP_PAGES_LAZY);
  else if (!kp_chunk_has_space (a))
    kp_full_push (h, a);
  else if (head)
    {
      kp_chunk_idle (h, a);
      kp_clist_push_head (&h->partial[kp_chunk_cls (a)], a);
    }
  else
    kp_partial_push (h, a);
}

/* H, the calling thread's live heap, is tearing a working set down
   (kp_chunk_shed): at least STREAK of its full chunks turned partial
   with no refill between, and the background purge is on to give back
   what it sheds.  */
static inline bool
kp_heap_shedding (const kp_heap_t *h, uint32_t streak)
{
  return h->unfull_streak >= streak && kp_setting (&kp_background_purge);
}

/* Hand chunk C of H over as shed (kp_chunk_shed), after giving back,
   with TAILS, the pages past its bump pointer that a huge page brought
   in (KAME_POOL_THP_SMALL), which CALLS and PAGES count.  */
static void
kp_chunk_shed_one (kp_heap_t *h, kp_chunk_t *c, bool tails, size_t *calls,
                   size_t *pages)
{
  if (tails)
    *pages += kp_chunk_tail_give (c, calls);
  c->shed = true;
  c->orig_heap = h;
  kp_chunk_hand_over (h, c, KP_PAGES_LAZY);
}

/* H is freeing a working set (KP_SHED_STREAK full chunks turned
   partial and no refill): hand over every chunk of class CLS it does
   not keep full, the active one included, so that the thread keeps of
   the class only chunks with no free block.  Abandoned, their free
   pages go back once they have waited the delay, by the background
   purge (kp_abandoned_decay), where kept by the owner only its next
   refill would have given them back; and a later refill of any
   thread adopts them again, this one's first.  Until the streak ends
   (a refill), kp_chunk_unfull puts each chunk that a free turns
   partial on the list, and the shed hands it over too: the active
   chunk and the newest partial one, which stayed, held the pages of
   their freed blocks for as long as the thread then waited.  The
   thread's frees into a chunk it shed take it back
   (kp_abandoned_collect), so the chunk it freed into last stays with
   it: letting such chunks go again would make each such free a
   take-over, a collect and a let-go, which a teardown in random order
   pays on most of its frees (bench/README, issue 36, tenth sitting).
   Not with the background purge off: the owner's own passes purge its
   partial chunks, and no one would purge the abandoned ones.  The end
   of a free: the thread may be made.  */
static KP_NOINLINE void
kp_chunk_shed (kp_heap_t *h, unsigned cls)
{
  /* With KAME_POOL_THP_SMALL, chunks may hold pages past their bump
     pointer that a huge page brought in: those handed over here, and
     at the first shed of a streak those of every other class, whose
     frees may never shed.  (No chunk has any with another policy.)  */
  bool tails = kp_thp_policy_now () == KAME_POOL_THP_SMALL;
  size_t calls = 0, pages = 0;
  kp_chunk_t *c;
  while ((c = h->partial[cls].head) != NULL)
    {
      kp_partial_remove (h, c);
      kp_chunk_shed_one (h, c, tails, &calls, &pages);
    }
  if ((c = kp_tc.active[cls]) != &kp_empty_chunk)
    {
      kp_tc.active[cls] = &kp_empty_chunk;
      kp_chunk_set_active (c, false);
      kp_chunk_shed_one (h, c, tails, &calls, &pages);
    }
  if (tails && h->unfull_streak == KP_SHED_STREAK + 1)
    for (unsigned k = 0; k < KP_NCLASS; k++)
      if (k != cls)
        {
          if (h->partial[k].tail != NULL)
            pages += kp_chunk_tail_give (h->partial[k].tail, &calls);
          if (kp_tc.active[k] != &kp_empty_chunk)
            pages += kp_chunk_tail_give (kp_tc.active[k], &calls);
        }
  if (calls != 0)
    {
      kp_owner_add (&h->purge_calls, calls);
      kp_owner_add (&h->purge_pages, pages);
    }
  if (atomic_load_explicit (&kp_purge_state, memory_order_relaxed)
      == KP_PURGE_NONE)
    kp_purge_start ();
}

/* The owner freed a block into C, which is on its full list (the block
   is already on C's free list, and used not yet decremented).  While
   the active chunk of the class has free blocks, C goes to the tail of
   the partial list, where the frees of the blocks around it gather
   while it waits: making it active with its one block would cost a
   refill at almost every malloc under a large live set freed at
   random.  When the active chunk has none, C becomes the active
   chunk, and the one it replaces is released when it is empty, and
   otherwise goes to the head of the partial list, or back to the full
   list when it has no room.
   (On the partial list an empty chunk would wait until its class is
   next refilled, which may be never: a list emptied in order would
   leave every chunk of its nodes' class behind.)  The next malloc then
   returns the block just freed, whose line is still in the cache,
   instead of one freed a whole chunk ago: on a ring of live 8 KiB
   blocks, whose heads fall in the same cache set, that matters.
   Past KP_SHED_STREAK such moves with no refill, the thread is
   freeing a working set: C goes to the partial list whatever the
   active chunk holds, and the class's chunks with free blocks are
   handed over (kp_chunk_shed), C and the active chunk with them.  */
void
kp_chunk_unfull (kp_chunk_t *c)
{
  kp_heap_t *h = kp_tc.heap;
  unsigned cls = kp_chunk_cls (c);
  kp_full_remove (h, c);
  c->used--;
  kp_chunk_t *a = kp_tc.active[cls];
  if (a->free != NULL || kp_heap_shedding (h, KP_SHED_STREAK))
    {
      kp_partial_push (h, c);
      ++h->unfull_streak;
      if (kp_unlikely (kp_heap_shedding (h, KP_SHED_STREAK + 1)))
        kp_chunk_shed (h, cls);
      return;
    }
  kp_tc.active[cls] = c;
  kp_chunk_set_active (c, true);
  if (a != &kp_empty_chunk)
    kp_chunk_displace (h, a, true);
}

/* An owner free brought C's used count to 0.  The active chunk of a
   class stays, so a malloc/free loop does not claim and release a
   chunk each time; any other empty chunk goes back to the region.  */
void
kp_chunk_retire (kp_chunk_t *c)
{
  unsigned cls = atomic_load_explicit (&c->cls, memory_order_relaxed);
  if (kp_tc.active[cls] == c)
    return;
  kp_partial_remove (kp_tc.heap, c);
  kp_chunk_release (c, KP_PAGES_LAZY);
  /* The end of a free: the heap is whole again.  */
  kp_purge_poll ();
}

/* We have just set the OWNED bit of C, which had no owner.  Collect,
   then release it if empty, keep it if this thread's heap set it up
   (a chunk the thread itself handed over, kp_chunk_shed) or if the
   thread uses the class and has no partial chunk of it, or foster it
   if it may foster one more, unless a thread that still lives shed it,
   or abandon it again.  A thread that has partial chunks of the class
   has room for its mallocs already: kept as its own, another thread's
   chunk would wait behind them with its other blocks' remote frees
   uncollected, for as long as the thread lives; fostered, the refills
   sweep it and release it when its last block comes back; let go, any
   thread's refill may adopt it.  A chunk that its thread shed goes
   back to that thread, whose refills adopt it again: fostered by a
   thread that does not allocate the class (a server's lazy-free
   thread), it kept the shedding thread's frees into it for good, and
   that thread claimed fresh chunks beside it.  */
static void
kp_abandoned_collect (kp_chunk_t *c)
{
  kp_heap_t *h = kp_tc.heap;
  for (;;)
    {
      kp_chunk_collect (c);
      if (c->used == 0)
        {
          kp_chunk_release (c, KP_PAGES_LAZY);
          return;
        }
      unsigned cls = atomic_load_explicit (&c->cls, memory_order_relaxed);
      if (kp_heap_live (h))
        {
          bool uses = c->orig_heap == h
                      || (kp_thread_uses_class (cls)
                          && h->partial[cls].head == NULL);
          bool theirs = c->shed
                        && atomic_load_explicit (&c->orig_heap->in_use,
                                                 memory_order_relaxed) != 0;
          if (uses || (!theirs && h->fostered < KP_FOSTER_MAX))
            {
              c->shed = false;
              atomic_store_explicit (&c->owner, h, memory_order_relaxed);
              kp_partial_push (h, c);
              if (!uses)
                {
                  c->fostered = true;
                  h->fostered++;
                }
              return;
            }
        }
      if (kp_chunk_let_go (c))
        return;
      /* More frees arrived while we held it: take them too.  */
    }
}

/* Push the list HEAD .. TAIL of N blocks of small chunk C, which the
   calling thread does not own, onto C's remote list with one CAS
   (acq_rel) that always sets OWNED; when OWNED was clear (C is
   abandoned), the caller has just taken C over and collects it.  After
   a push that found OWNED set, C is never touched again: its owner may
   collect the blocks and release it at once.  HEAD gets the list's
   header first (kp_push_head_t), when its blocks have room.  */
static void
kp_remote_push (kp_chunk_t *c, kp_block_t *head, kp_block_t *tail,
                uint32_t n)
{
  if (kp_chunk_headed (c))
    {
      kp_push_head_t *ph = (kp_push_head_t *) head;
      ph->count = n;
      ph->tail = (uintptr_t) tail ^ kp_link_key (head);
    }
  uintptr_t old = atomic_load_explicit (&c->xthread_free, memory_order_relaxed);
  do
    kp_block_link (tail, (kp_block_t *) (old & ~KP_TF_OWNED));
  while (!atomic_compare_exchange_weak_explicit (&c->xthread_free, &old,
                                                 (uintptr_t) head
                                                 | KP_TF_OWNED,
                                                 memory_order_acq_rel,
                                                 memory_order_relaxed));
  if (old & KP_TF_OWNED)
    return;                     /* the owner will collect; never touch c again */
  kp_abandoned_collect (c);
}

void
kp_remote_push_one (kp_chunk_t *c, kp_block_t *b)
{
  kp_remote_push (c, b, b, 1);
}

_Static_assert ((KP_RBATCH_SLOTS & (KP_RBATCH_SLOTS - 1)) == 0
                && KP_RBATCH_SLOTS <= 32,
                "a power of two, with a bit of rbatch_mask per slot");

/* The blocks of slot S of H leave it for the chunk's remote list (or
   are dropped): the statistics now count them in H's remote_out.  */
static inline void
kp_rbatch_count_out (kp_heap_t *h, kp_rbatch_t *s)
{
  kp_owner_add (&h->remote_out[atomic_load_explicit (&s->cls,
                                                     memory_order_relaxed)],
                atomic_load_explicit (&s->count, memory_order_relaxed));
}

static inline void
kp_rbatch_clear (kp_heap_t *h, kp_rbatch_t *s)
{
  kp_rbatch_clear_at (h, (unsigned) (s - h->rbatch));
}

/* Publish slot S of H, which holds blocks.  The slot is emptied before
   the push: the blocks belong to the chunk's list from then on, and the
   chunk may be gone once they are there.  Each block still counts in
   the chunk's used (only the collect lowers it), so the chunk could not
   be released while they waited in the slot.  Out of line: the batch's
   own path saves no registers for it.  */
KP_NOINLINE void
kp_rbatch_flush (kp_heap_t *h, kp_rbatch_t *s)
{
  kp_chunk_t *c = s->chunk;
  kp_block_t *head = s->head, *tail = s->tail;
  uint32_t n = atomic_load_explicit (&s->count, memory_order_relaxed);
  kp_rbatch_count_out (h, s);
  kp_rbatch_clear (h, s);
  kp_remote_push (c, head, tail, n);
}

void
kp_rbatch_flush_all (kp_heap_t *h)
{
  while (h->rbatch_mask != 0)
    kp_rbatch_flush (h, &h->rbatch[__builtin_ctz (h->rbatch_mask)]);
}

/* Free P the long way, P in chunk C, which the calling thread, whose
   heap is H, does not own: check P, then put it in a slot of the batch
   (publishing the slot's blocks of another chunk first), or push it
   alone when the thread has no heap any more or the class is not
   batched.  A dedicated chunk's block never comes here: kp_free_pool
   hands it to the cache from its own unit's descriptor, so P is inside
   one.  */
KP_NOINLINE void
kp_free_remote_slow (void *p, kp_chunk_t *c, kp_heap_t *h)
{
  unsigned kind = atomic_load_explicit (&c->kind, memory_order_relaxed);
  if (kind == KP_KIND_DEDICATED)
    {
      kp_misuse ("free", "invalid pointer (inside a large block):", p);
      return;
    }
  if (kind == KP_KIND_CACHED && p == kp_chunk_data (c))
    {
      kp_misuse ("free", "double free of", p);  /* a block in the cache */
      return;
    }
  if (kp_unlikely (kind != KP_KIND_SMALL))
    {
      kp_misuse ("free", "invalid pointer (not an allocated block):", p);
      return;
    }
  /* The class before the push: once the block is on the list, the
     owner may release the chunk and anyone claim it again.  Its
     tables, not a division by the block size.  */
  unsigned cls = atomic_load_explicit (&c->cls, memory_order_relaxed);
  if (kp_unlikely (!kp_free_block_start_ok (c, cls, p)))
    return;
  uint64_t magic = kp_class_divmagic[cls];
  kp_block_t *b = p;
  /* Freed already: on the owner's list, on this remote list or in a
     batch.  No look at any of them is possible from here; the tag,
     with its 64 bits of secret, is the proof.  */
  if (kp_unlikely (kp_block_marked_free (b)))
    {
      kp_misuse ("free", "double free of", p);
      return;
    }
  kp_block_mark_remote (b);
  /* A thread that allocates blocks of the class takes these back: a
     bound at or below what it frees between two of its mallocs would
     hand them to their owner every time.  A thread that is tearing a
     working set down (kp_heap_shedding) does not batch: its remote frees
     are mostly into the chunks it shed, whose pages the background
     purge gives back, and a batch would hold their blocks for as long
     as the thread then waits.  */
  uint32_t limit = kp_class_rbatch_limit[kp_thread_uses_class (cls)][cls];
  if (kp_unlikely (!kp_heap_live (h)) || limit == 0
      || kp_heap_shedding (h, KP_SHED_STREAK + 1))
    {
      kp_remote_count (h, false, cls, 1);
      kp_remote_push (c, b, b, 1);
      return;
    }
  kp_rbatch_t *s = kp_rbatch_slot (h, c);
  if (s->chunk != NULL)
    kp_rbatch_flush (h, s);
  /* A consistent slot at every step (a fork from a signal handler):
     the block is linked before the slot names it.  */
  kp_block_link (b, NULL);
  atomic_signal_fence (memory_order_release);
  s->head = s->tail = b;
  atomic_store_explicit (&s->count, 1, memory_order_relaxed);
  s->limit = limit;
  s->data = kp_chunk_data (c);
  s->divmagic = magic;
  atomic_store_explicit (&s->cls, (uint8_t) cls, memory_order_relaxed);
  atomic_signal_fence (memory_order_release);
  s->chunk = c;
  uint32_t bit = 1u << (s - h->rbatch);
  h->rbatch_mask |= bit;
  h->rbatch_cls[cls] |= bit;
}

/* The head B of slot S of H, which kp_rbatch_head_ok refused.  B lost
   the remote tag: its owner freed it too (a double free; the owner's
   list has it now), or it was handed out since.  Or B's link leads out
   of B's region, or ends the list before the slot's count says: B was
   written to while free.  The slot is dropped: its other blocks are
   lost, none is handed out twice.  B itself is handed out when it still
   carries the remote tag; otherwise NULL.  */
void *
kp_rbatch_take_bad (kp_heap_t *h, kp_rbatch_t *s)
{
  kp_block_t *b = s->head;
  unsigned cls = atomic_load_explicit (&s->cls, memory_order_relaxed);
  kp_rbatch_count_out (h, s);
  kp_rbatch_clear (h, s);
  if (!kp_block_marked_remote (b))
    {
      kp_misuse ("free", "double free of", b);
      return NULL;
    }
  kp_list_cut (b);
  kp_owner_add (&h->remote_in[cls], 1);
  /* Back in its chunk's used, from which the remote_in above takes it
     for the statistics: handed out by no pop.  */
  kp_owner_add (&h->taken_blocks, 1);
  kp_owner_add (&h->taken_bytes, kp_class_size[cls]);
  kp_block_mark_live (b);
  return b;
}

/* Find an abandoned chunk of class CLS with room, take it over for H.
   The scan is bounded: adoption is an optimisation, not a duty.  */
kp_chunk_t *
kp_chunk_adopt (kp_heap_t *h, unsigned cls)
{
  unsigned budget = KP_ADOPT_REGIONS;
  for (kp_region_t *r = kp_region_first (); r != NULL && budget > 0;
       r = kp_region_next (r), budget--)
    for (unsigned w = 0; w < KP_CLAIM_WORDS; w++)
      {
        uint64_t bits = atomic_load_explicit (&r->abandoned[w],
                                              memory_order_relaxed);
        while (bits != 0)
          {
            unsigned u = w * 64 + (unsigned) __builtin_ctzll (bits);
            bits &= bits - 1;
            kp_chunk_t *c = &r->desc[u];
            if (atomic_load_explicit (&c->cls, memory_order_relaxed) != cls
                || atomic_load_explicit (&c->kind, memory_order_relaxed)
                   != KP_KIND_SMALL
                || !kp_hint_take (c))
              continue;
            uintptr_t tf = atomic_load_explicit (&c->xthread_free,
                                                 memory_order_relaxed);
            while ((tf & KP_TF_OWNED) == 0)
              if (atomic_compare_exchange_weak_explicit
                  (&c->xthread_free, &tf, tf | KP_TF_OWNED,
                   memory_order_acquire, memory_order_relaxed))
                {
                  /* Owned.  The descriptor may have been released and
                     claimed again since the hint was read: check.  */
                  if (atomic_load_explicit (&c->kind, memory_order_relaxed)
                      != KP_KIND_SMALL
                      || atomic_load_explicit (&c->cls, memory_order_relaxed)
                         != cls)
                    {
                      kp_abandoned_collect (c);
                      break;
                    }
                  atomic_store_explicit (&c->owner, h, memory_order_relaxed);
                  c->shed = false;
                  kp_chunk_collect (c);
                  if (kp_chunk_has_space (c))
                    return c;
                  if (!kp_chunk_abandon (c, h))
                    return c;   /* frees arrived: it has room now */
                  break;
                }
          }
      }
  return NULL;
}

void
kp_free_owned_check (kp_chunk_t *c, kp_block_t *b, uintptr_t off)
{
  if (!kp_chunk_block_start (c, off))
    {
      kp_misuse ("free", "invalid pointer (not the start of a block):", b);
      return;
    }
  /* A block that starts in a page the decay gave back is free (only
     kp_chunk_carve hands it out again, and clears the page's bit
     first); any other block is free when it has the tag: on C's free
     list, on its remote list, or waiting in another thread's batch of
     remote frees, where no list walk could find it.  (A live block
     holds the tag only if the program copied it out of a freed one.)  */
  if ((c->npurged != 0
       && kp_chunk_page_purged (c, off >> kp_page_shift ()))
      || kp_block_marked_free (b))
    {
      kp_misuse ("free", "double free of", b);
      return;
    }
  kp_free_push (c, b);
}
