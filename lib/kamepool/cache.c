/* cache.c -- the recycle cache of large blocks: freed dedicated chunks
   (up to 4 MiB) and freed mappings (above 4 MiB) kept for reuse, first
   in the freeing thread's heap record, then, for mappings, in one
   process-wide array.  A dedicated chunk pushed out of the thread's
   record goes back to its region with its pages resident (region.c's
   dirty budget), where its units coalesce with the free units around
   them and serve a request of any size: a chunk kept whole serves
   only its own size or, split for good, a smaller one.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   An entry is one word: the block's base (a dedicated chunk's data,
   256 KiB-aligned, or a mapping, 32 MiB-aligned) with its size in the
   low bits that the alignment leaves free.  So an entry says what it
   is without touching the memory, which another thread may have
   unmapped.

     first level   KP_L1_SLOTS words in the thread's heap record, relaxed
                   loads and stores (plain moves): only the owning
                   thread writes them, kame_pool_get_stats reads them.
     second level  KP_L2_SLOTS _Atomic words, mappings only, 0 when
                   empty; a put is one CAS from 0 to the entry (release:
                   the block's reset metadata goes with it), a take one
                   CAS from the entry to 0 (acquire).  A word that comes
                   back with the same value after an ABA is the same
                   block with the same size, so whoever wins it may use
                   it.
     decay of the  kp_l2_takes, relaxed fetch_add on every take from
     second level  the second level; kp_l2_tick, the time of the last
                   tick of its decay, moved on by one CAS (relaxed) by
                   whichever pass comes first once the delay has gone
                   by; kp_l2_seen[] and kp_l2_takes_seen, what that
                   tick saw, written by the thread that won it only
                   and read by the next winner (relaxed: a stale value
                   only makes a tick release nothing, or release a
                   block that is as good as any to give back, since
                   every release is a CAS of the word to 0).
     byte counts   kp_l2_total, relaxed fetch_add/fetch_sub on
                   second-level puts and takes only.  A first level has
                   no count: its bytes are the sum of its entries'
                   sizes, which kame_pool_get_stats adds up.

   The cap is not checked on every put.  A put that takes the long way
   (kp_cache_put), the long way of a large allocation, a drain and a
   change of the cap work out the heap's l1_room: the cap less the
   second level's bytes as they are then, less the first level's, and
   no more than the cap less the free streak.  A put into the first
   level costs only that budget (and the streak the same bytes); a take
   from it gives its bytes back to the budget and ends the streak.  So
   the first level plus the second level as this thread last saw it
   stay under the cap, and so does the streak; what other threads put
   in the second level meanwhile is the slack.  kp_cache_gen counts
   the changes of the cap: a heap whose l1_gen is behind takes the long
   way at its next put.  The put of a freed dedicated chunk into the
   first level is inline in kp_free_pool (kp_internal.h,
   kp_cache_free_dedicated_fast), and must stay the same as
   kp_l1_put_fast.

   A cached dedicated chunk keeps its units claimed with kind
   KP_KIND_CACHED, and a cached mapping keeps its radix entry with the
   header's magic changed: a second free of either is reported as an
   invalid free and leaves the cache alone.  Lowering the cap evicts
   the second level and the calling thread's first level at once;
   other threads trim their first level at their next put, and drain
   it when they exit, so until then each other thread may hold up to
   KP_L1_SLOTS blocks beyond the cap.  Likewise, with the budgets
   above, the cache as a whole holds at most the cap plus the first
   levels of the threads other than the last one to put a mapping in
   the second level.  A huge mapping (above 32 MiB) is reused only for
   a request of exactly its size, so a huge block is never held by a
   smaller request; a smaller mapping serves any request it holds
   (below).

   When the cap is reached, older second-level entries are evicted for
   the new one.  A thread that frees more than the cap's worth of large
   blocks with no large allocation in between, by itself or by the
   others, is tearing a working set down: the cache is drained and its
   blocks go back to the OS (kp_cache_streak_over), so the RSS comes
   back down instead of staying at the cap.  */

#include <config.h>

#include "kp_internal.h"

/* A cached mapping of up to 32 MiB serves any smaller request whole,
   without being cut down: a mapping cut with mremap loses its resident
   tail, so that a later bigger request finds nothing and faults in a
   new mapping, and with blocks of random sizes that happens at nearly
   every step.  The smallest mapping that fits is taken, and a request
   for a mapping is above 4 MiB, so the usable size (the whole mapping)
   is less than 8 times the request.  (A dedicated chunk is always cut
   to the units asked for: its usable size is part of the contract.)  */

static _Atomic (uintptr_t) kp_l2[KP_L2_SLOTS];
static _Atomic (size_t) kp_l2_total;
/* The decay of the second level (kp_l2_decay): takes from it, ever;
   the time of its last tick; and the entries and the takes then.  */
static _Atomic (size_t) kp_l2_takes;
static _Atomic (uint32_t) kp_l2_tick;
static _Atomic (uintptr_t) kp_l2_seen[KP_L2_SLOTS];
static _Atomic (size_t) kp_l2_takes_seen;
/* The generation of the cap: bumped (fetch_add, release, after the
   cap's store) by every kame_pool_set_large_cache_cap; starts at 1 so
   that a zeroed heap record is behind it.  Read with acquire by
   kp_l1_room_update, which then reads the new cap, and relaxed by the
   owner's puts (kp_l1_put_fast, kp_cache_free_dedicated_fast), for
   which a stale value only delays the long way to the next put.  */
_Atomic (unsigned) kp_cache_gen = 1;

/* ---- Entries ------------------------------------------------------------ */

/* Does entry E serve a request of kind MAPPING for NEED bytes?  A
   chunk must have exactly the units asked for, and a huge mapping
   (above 32 MiB) serves and is served only by its own size; a smaller
   mapping serves any request it holds, whole.  */
static inline bool
kp_entry_fits (uintptr_t e, bool mapping, size_t need)
{
  if (e == 0 || kp_entry_is_mapping (e) != mapping)
    return false;
  size_t have = kp_entry_bytes (e);
  if (!mapping || need > KP_REGION_SIZE || have > KP_REGION_SIZE)
    return have == need;
  return have >= need;
}

/* Could E serve the request once trimmed: same kind, bigger?  Huge
   mappings serve and are served by exact fits only.  */
static inline bool
kp_entry_bigger (uintptr_t e, bool mapping, size_t need)
{
  return e != 0 && kp_entry_is_mapping (e) == mapping
         && kp_entry_bytes (e) > need
         && (!mapping || kp_entry_bytes (e) <= KP_REGION_SIZE);
}

/* Give E's memory back for good: a mapping is unmapped, a chunk's
   units go back to their region, their pages as PAGES says.  */
static void
kp_entry_release_pages (uintptr_t e, enum kp_release_pages pages)
{
  if (kp_entry_is_mapping (e))
    kp_mapping_release (kp_entry_base (e));
  else
    kp_units_release (kp_entry_chunk_desc (kp_entry_base (e)), pages);
}

/* The same, a chunk's pages kept resident within the large tier's
   dirty budget.  */
static void
kp_entry_release (uintptr_t e)
{
  kp_entry_release_pages (e, KP_PAGES_LAZY_LARGE);
}

/* ---- Levels -------------------------------------------------------------- */

static inline kp_heap_t *
kp_cache_heap (void)
{
  kp_heap_t *h = kp_tc.heap;
  return kp_heap_live (h) ? h : NULL;
}

static inline size_t
kp_l2_bytes (void)
{
  return atomic_load_explicit (&kp_l2_total, memory_order_relaxed);
}

/* The bytes of H's free streak, without the decay's and the loans'
   marks.  */
static inline size_t
kp_streak_bytes (const kp_heap_t *h)
{
  return h->cache.free_streak & ~(KP_STREAK_MARK | KP_LEND_MARK);
}

/* The bytes H's first level holds.  */
static inline size_t
kp_l1_bytes (const kp_heap_t *h)
{
  size_t sum = 0;
  for (unsigned i = 0; i < KP_L1_SLOTS; i++)
    sum += kp_entry_bytes (kp_l1_get (h, i));
  return sum;
}

/* Work out H's budget for puts into its first level (see the top of
   the file), for the cap as it is now.  */
static void
kp_l1_room_update (kp_heap_t *h)
{
  unsigned gen = atomic_load_explicit (&kp_cache_gen, memory_order_acquire);
  size_t cap = kp_setting (&kp_cache_cap);
  size_t held = kp_l1_bytes (h) + kp_l2_bytes ();
  size_t room = held < cap ? cap - held : 0;
  size_t streak = kp_streak_bytes (h);
  size_t unstreaked = streak < cap ? cap - streak : 0;
  h->cache.l1_room = room < unstreaked ? room : unstreaked;
  h->cache.l1_gen = gen;
}

/* The best fits among the N entries of SLOTS (a first level or the
   second level) for a request of kind MAPPING for NEED bytes: in *FIT
   the slot of the smallest entry that fits and is smaller than BELOW,
   and, with BIGGER, in *BIG the slot of the smallest entry that could
   serve once cut down; N when there is none.  *FIT_E and *BIG_E are
   the entries as the scan saw them, for the CAS that takes one from the
   second level.  The scan starts at the first slot, where a put
   appends, so a loop's one block is found at once, and stops at an
   exact fit.  Relaxed loads: the caller takes the entry with a plain
   store (its own first level) or a CAS from the value seen.  */
KP_INLINE void
kp_slots_fit (_Atomic (uintptr_t) *slots, unsigned n, bool mapping,
              size_t need, size_t below, bool bigger, unsigned *fit,
              uintptr_t *fit_e, unsigned *big, uintptr_t *big_e)
{
  *fit = *big = n;
  *fit_e = *big_e = 0;
  for (unsigned i = 0; i < n; i++)
    {
      uintptr_t e = atomic_load_explicit (&slots[i], memory_order_relaxed);
      size_t bytes = kp_entry_bytes (e);
      if (kp_entry_fits (e, mapping, need))
        {
          if (bytes < below && (*fit == n || bytes < kp_entry_bytes (*fit_e)))
            {
              *fit = i;
              *fit_e = e;
              if (bytes == need)
                break;
            }
        }
      else if (bigger && kp_entry_bigger (e, mapping, need)
               && (*big == n || bytes < kp_entry_bytes (*big_e)))
        {
          *big = i;
          *big_e = e;
        }
    }
}

/* The slot of the biggest mapping among the N entries of SLOTS that is
   smaller than BELOW and at least FLOOR, or N; the entry as seen in
   *SEEN.  */
static unsigned
kp_slots_biggest_below (_Atomic (uintptr_t) *slots, unsigned n,
                        size_t floor, size_t below, uintptr_t *seen)
{
  unsigned best = n;
  *seen = 0;
  for (unsigned i = 0; i < n; i++)
    {
      uintptr_t v = atomic_load_explicit (&slots[i], memory_order_relaxed);
      if (v != 0 && kp_entry_is_mapping (v) && kp_entry_bytes (v) < below
          && kp_entry_bytes (v) >= floor
          && (best == n || kp_entry_bytes (v) > kp_entry_bytes (*seen)))
        {
          best = i;
          *seen = v;
        }
    }
  return best;
}

/* The slot of H's smallest first-level entry that fits a request of
   kind MAPPING for NEED bytes, or KP_L1_SLOTS; with BIGGER, *BIGGER as
   in kp_slots_fit.  */
static inline unsigned
kp_l1_fit (kp_heap_t *h, bool mapping, size_t need, unsigned *bigger)
{
  unsigned fit, big;
  uintptr_t fit_e, big_e;
  kp_slots_fit (h->cache.l1, KP_L1_SLOTS, mapping, need, SIZE_MAX,
                bigger != NULL, &fit, &fit_e, &big, &big_e);
  if (bigger != NULL)
    *bigger = big;
  return fit;
}

/* kp_l1_fit out of line, for the loop's fast path (kp_malloc_mapping),
   which must not carry the scan's registers.  */
KP_NOINLINE unsigned
kp_l1_fit_call (kp_heap_t *h, size_t need)
{
  return kp_l1_fit (h, true, need, NULL);
}

/* Empty second-level word I if it still holds E: E, or 0 when another
   thread emptied it first.  */
static inline uintptr_t
kp_l2_clear_slot (unsigned i, uintptr_t e)
{
  if (!atomic_compare_exchange_strong_explicit (&kp_l2[i], &e, 0,
                                                memory_order_acquire,
                                                memory_order_relaxed))
    return 0;
  atomic_fetch_sub_explicit (&kp_l2_total, kp_entry_bytes (e),
                             memory_order_relaxed);
  return e;
}

/* The same for a request: counted in kp_l2_takes (kp_l2_decay).  */
static inline uintptr_t
kp_l2_take_slot (unsigned i, uintptr_t e)
{
  e = kp_l2_clear_slot (i, e);
  if (e != 0)
    atomic_fetch_add_explicit (&kp_l2_takes, 1, memory_order_relaxed);
  return e;
}

/* The smallest second-level mapping that fits a request for NEED
   bytes and is smaller than BELOW, or else, when BIGGER, the smallest
   one that is bigger; 0 when there is none or another thread takes it
   first.  */
static uintptr_t
kp_l2_take (size_t need, size_t below, bool bigger)
{
  if (kp_l2_bytes () == 0)
    return 0;
  unsigned fit, big;
  uintptr_t fit_e, big_e;
  kp_slots_fit (kp_l2, KP_L2_SLOTS, true, need, below, bigger, &fit, &fit_e,
                &big, &big_e);
  if (fit_e != 0)
    return kp_l2_take_slot (fit, fit_e);
  return big_e != 0 ? kp_l2_take_slot (big, big_e) : 0;
}

/* The background purge ticks the second level's decay too, once the
   level has held a block (purge.c).  */
static size_t kp_l2_decay (uint32_t now, uint32_t delay, size_t *calls);

static void
kp_l2_purge_register (void)
{
  static const kp_purge_upper_t upper = { kp_l2_decay, kp_l2_bytes };
  static _Atomic (bool) registered;
  if (!atomic_load_explicit (&registered, memory_order_relaxed))
    {
      kp_purge_register (KP_PURGE_UPPER_CACHE, &upper);
      atomic_store_explicit (&registered, true, memory_order_relaxed);
    }
}

/* Put E in the second level if it fits under CAP with RESERVED bytes
   held elsewhere (the caller's first level); false otherwise.  */
static bool
kp_l2_put (uintptr_t e, size_t cap, size_t reserved)
{
  size_t bytes = kp_entry_bytes (e);
  size_t total = atomic_fetch_add_explicit (&kp_l2_total, bytes,
                                            memory_order_relaxed) + bytes;
  if (total <= cap && reserved <= cap - total)
    for (unsigned i = 0; i < KP_L2_SLOTS; i++)
      {
        uintptr_t empty = 0;
        if (atomic_load_explicit (&kp_l2[i], memory_order_relaxed) == 0
            && atomic_compare_exchange_strong_explicit (&kp_l2[i], &empty, e,
                                                        memory_order_release,
                                                        memory_order_relaxed))
          {
            kp_l2_purge_register ();
            return true;
          }
      }
  atomic_fetch_sub_explicit (&kp_l2_total, bytes, memory_order_relaxed);
  return false;
}

/* A large free that took the long way ends here: the heap is whole,
   and the thread may be made (kp_purge_poll) for what the free left to
   give back, in the free units or the second level.  */
static void
kp_cache_purge_poll (void)
{
  if (atomic_load_explicit (&kp_purge_state, memory_order_relaxed)
      == KP_PURGE_NONE)
    kp_purge_start ();
}

/* Where the next eviction starts: puts fill the lowest empty slot, so
   a hand that moves on round the array releases entries roughly in
   the order they came.  Relaxed: any start is correct.  */
static _Atomic (unsigned) kp_l2_hand;

/* Release second-level entries (mappings, see the top of the file)
   until it holds at most KEEP bytes; true when any was released.  */
static bool
kp_l2_evict (size_t keep)
{
  bool any = false;
  unsigned hand = atomic_load_explicit (&kp_l2_hand, memory_order_relaxed);
  for (unsigned k = 0; k < KP_L2_SLOTS && kp_l2_bytes () > keep; k++)
    {
      unsigned i = (hand + k) % KP_L2_SLOTS;
      uintptr_t e = atomic_load_explicit (&kp_l2[i], memory_order_relaxed);
      if (e == 0)
        continue;
      atomic_store_explicit (&kp_l2_hand, (i + 1) % KP_L2_SLOTS,
                             memory_order_relaxed);
      e = atomic_exchange_explicit (&kp_l2[i], 0, memory_order_acquire);
      if (e == 0)
        continue;
      atomic_fetch_sub_explicit (&kp_l2_total, kp_entry_bytes (e),
                                 memory_order_relaxed);
      kp_entry_release (e);
      any = true;
    }
  return any;
}

/* Release H's first-level entries, oldest first, until it holds at
   most KEEP bytes; true when any was released.  */
static bool
kp_l1_evict (kp_heap_t *h, size_t keep)
{
  bool any = false;
  for (unsigned i = 0; i < KP_L1_SLOTS && kp_l1_bytes (h) > keep; i++)
    {
      if (kp_l1_get (h, i) == 0)
        continue;
      kp_entry_release (kp_l1_take (h, i));
      any = true;
    }
  return any;
}

/* Take a cached block for a request: a dedicated chunk of NEED bytes
   of units, or a mapping of NEED bytes.  The smallest that fits is
   best, so that a big mapping stays for a big request; else the
   smallest bigger one, which the caller trims to size.  Chunks are in
   the first level only.  */
KP_INLINE uintptr_t
kp_cache_take (bool mapping, size_t need)
{
  kp_heap_t *h = kp_cache_heap ();
  unsigned fit = KP_L1_SLOTS, bigger = KP_L1_SLOTS;
  if (h != NULL)
    fit = kp_l1_fit (h, mapping, need, &bigger);
  size_t fit_bytes = fit != KP_L1_SLOTS
                     ? kp_entry_bytes (kp_l1_get (h, fit)) : SIZE_MAX;
  if (mapping && fit_bytes != need)
    {
      uintptr_t e = kp_l2_take (need, fit_bytes,
                                fit == KP_L1_SLOTS && bigger == KP_L1_SLOTS);
      if (e != 0)
        return e;
    }
  unsigned i = fit != KP_L1_SLOTS ? fit : bigger;
  return i != KP_L1_SLOTS ? kp_l1_take (h, i) : 0;
}

/* The sum of the large_allocated of every heap but SELF.  */
static size_t
kp_large_allocated_others (const kp_heap_t *self)
{
  size_t sum = 0;
  for (kp_heap_t *h = kp_heap_list (); h != NULL; h = h->pool_next)
    if (h != self)
      sum += atomic_load_explicit (&h->cache.large_allocated,
                                   memory_order_relaxed);
  return sum;
}

/* H frees BYTES of a large block.  True when the block should go back
   to the OS rather than into the cache: H has freed more than one
   block and more than the cap since it last allocated a large block,
   net of what the other threads allocated meanwhile.  That is a
   working set being torn down, not recycled, and the cache is
   drained: what it holds would stay resident for nothing.  A consumer
   that frees what a producer allocates sees the producer's
   allocations and keeps caching.  The sum over the heaps is taken
   once the streak passes the threshold, so it costs nothing on the
   loops the cache is for; a loop over one block of any size never
   gets there.  (A lower threshold, half the cap say, is passed now
   and then by the runs of frees of a steady workload whose large
   blocks come and go at random, and each drain costs more page faults
   than it saves.)  */
static bool
kp_cache_streak_over (kp_heap_t *h, size_t bytes, size_t cap)
{
  h->cache.free_streak = kp_streak_bytes (h) + bytes;
  if (kp_likely (h->cache.free_streak <= cap || h->cache.free_streak == bytes))
    return false;
  /* What the others allocated since the last look pays the streak
     down: those frees fed a consumer, not a teardown.  */
  size_t others = kp_large_allocated_others (h);
  size_t paid = others - h->cache.streak_seen;
  h->cache.streak_seen = others;
  size_t streak = h->cache.free_streak;
  h->cache.free_streak = streak > paid ? streak - paid : 0;
  if (h->cache.free_streak <= cap)
    return false;
  kp_cache_drain ();
  kp_units_purge_dirty ();
  return true;
}

/* Is this thread tearing a working set down (see above)?  Then what
   the cache does not take goes straight back to the kernel.  */
bool
kp_cache_tearing_down (void)
{
  kp_heap_t *h = kp_cache_heap ();
  return h != NULL && kp_streak_bytes (h) > kp_cache_cap_now ();
}

/* A large allocation of BYTES by the calling thread, other than from
   its own first level: it ends the thread's free streak, and it counts
   for the others' (owner's load and store, relaxed).  One from the
   first level ends the streak too (kp_l1_take_fast) but does not count
   for the others: it takes nothing they freed.  */
void
kp_cache_note_alloc (size_t bytes)
{
  kp_heap_t *h = kp_cache_heap ();
  if (h == NULL)
    return;
  kp_owner_add (&h->cache.large_allocated, bytes);
  h->cache.free_streak = 0;
  kp_l1_room_update (h);
}

/* The loop's put of a freed block, with no call: E (BYTES) goes in the
   first level of H (kp_tc.heap) when its budget has room for BYTES
   (a sentinel's is 0), the cap has not changed since the budget was
   worked out, and there is a free slot at the end; false when the
   caller must take the long way, kp_cache_put.  */
KP_INLINE bool
kp_l1_put_fast (kp_heap_t *h, uintptr_t e, size_t bytes)
{
  unsigned gen = atomic_load_explicit (&kp_cache_gen, memory_order_relaxed);
  if (kp_unlikely (bytes > h->cache.l1_room)
      || kp_unlikely (h->cache.l1_gen != gen))
    return false;
  /* After the newest entry, so that the entries stay oldest first
     (but for the gaps that takes leave).  */
  size_t n = h->cache.l1_top;
  if (kp_unlikely (n == KP_L1_SLOTS))
    return false;
  h->cache.l1_top = n + 1;
  h->cache.l1_room -= bytes;
  h->cache.free_streak += bytes;
  kp_l1_set (h, n, e);
  return true;
}

/* Keep E if the cap allows; false when the caller must release it.
   The cap bounds the second level plus the calling thread's first.
   FREED says E is a block the program freed, which counts in the free
   streak; the rest of a cut-down block does not.  The loop's case,
   kp_l1_put_fast, is the caller's to try first.  H is the calling
   thread's live heap or NULL; kp_cache_put works out its budget
   afterwards.  */
static bool
kp_cache_put_long (kp_heap_t *h, uintptr_t e, bool freed)
{
  size_t bytes = kp_entry_bytes (e);
  size_t cap = kp_setting (&kp_cache_cap);
  if (bytes > cap)
    return false;
  bool mapping = kp_entry_is_mapping (e);
  if (h == NULL)
    return mapping && kp_l2_put (e, cap, 0);
  if (freed && kp_cache_streak_over (h, bytes, cap))
    return false;
  /* Make room: the oldest entry moves to the second level when the
     first is full, and entries are released while over the cap.  */
  unsigned held = 0;
  for (unsigned k = 0; k < KP_L1_SLOTS; k++)
    held += kp_l1_get (h, k) != 0;
  if (held == KP_L1_SLOTS)
    {
      uintptr_t old = kp_l1_take (h, 0);
      size_t ob = kp_entry_bytes (old);
      /* A chunk's units go back to their region, resident (see the
         top of the file).  Room in the second level for a mapping is
         made by eviction rather than by dropping this entry.  */
      size_t reserved = kp_l1_bytes (h) + bytes;
      if (!kp_entry_is_mapping (old)
          || (!kp_l2_put (old, cap, reserved)
              && !(reserved <= cap - ob
                   && kp_l2_evict (cap - ob - reserved)
                   && kp_l2_put (old, cap, reserved))))
        kp_entry_release (old);
    }
  size_t l2 = kp_l2_bytes ();
  if (l2 > cap - bytes)
    {
      /* Full: the newest block is the likeliest to be asked for
         again, so older ones make room for it.  */
      kp_l2_evict (cap - bytes);
      l2 = kp_l2_bytes ();
      if (l2 > cap - bytes)
        return false;
    }
  if (kp_l1_bytes (h) > cap - bytes - l2)
    kp_l1_evict (h, cap - bytes - l2);
  /* Oldest first: close the gaps, keeping the order, then append.  */
  unsigned n = 0;
  for (unsigned k = 0; k < KP_L1_SLOTS; k++)
    {
      uintptr_t v = kp_l1_get (h, k);
      if (v != 0)
        {
          kp_l1_set (h, k, 0);
          kp_l1_set (h, n++, v);
        }
    }
  KP_ASSERT (n < KP_L1_SLOTS);
  kp_l1_set (h, n, e);
  h->cache.l1_top = n + 1;
  return true;
}

static bool
kp_cache_put (uintptr_t e, bool freed)
{
  kp_heap_t *h = kp_cache_heap ();
  bool kept = kp_cache_put_long (h, e, freed);
  if (h != NULL)
    kp_l1_room_update (h);
  return kept;
}

/* ---- The tiers' interface ----------------------------------------------- */

/* Free P, the block of dedicated chunk C, the long way: kp_free_pool
   has found no room for it in the first level (its inline put,
   kp_cache_free_dedicated_fast, tests what kp_l1_put_fast tests, so
   that put is not tried again).  Into the cache, else C's units are
   released.  Out of line, so that free saves no registers for it.  */
KP_NOINLINE void
kp_cache_free_dedicated (kp_chunk_t *c, void *p)
{
  KP_ASSERT (p == kp_chunk_data (c));
  atomic_store_explicit (&c->kind, KP_KIND_CACHED, memory_order_relaxed);
  unsigned units = atomic_load_explicit (&c->units, memory_order_relaxed);
  if (!kp_cache_put (kp_entry_chunk_at (p, units), true))
    {
      atomic_store_explicit (&c->kind, KP_KIND_DEDICATED,
                             memory_order_relaxed);
      kp_units_release (c, kp_cache_tearing_down () ? KP_PAGES_DISCARD
                                                     : KP_PAGES_LAZY_LARGE);
    }
  kp_cache_purge_poll ();
}

kp_chunk_t *
kp_cache_take_chunk (unsigned units)
{
  uintptr_t e = kp_cache_take (false, (size_t) units << KP_UNIT_SHIFT);
  if (e == 0)
    return NULL;
  kp_chunk_t *c = kp_entry_chunk_desc (kp_entry_base (e));
  if (kp_entry_bytes (e) >> KP_UNIT_SHIFT > units)
    {
      /* The rest stays resident in the cache while the cap allows.  */
      kp_chunk_t *t = kp_dedicated_trim (c, units);
      if (!kp_cache_put (kp_entry_chunk (t), false))
        kp_units_release (t, KP_PAGES_LAZY_LARGE);
    }
  atomic_store_explicit (&c->kind, KP_KIND_DEDICATED, memory_order_relaxed);
  return c;
}

void *
kp_cache_take_mapping (size_t map_size, size_t *got)
{
  if (map_size > KP_ENTRY_MAPPING_MAX)
    return NULL;
  uintptr_t e = kp_cache_take (true, map_size);
  if (e == 0)
    return NULL;
  *got = kp_entry_bytes (e);
  if (!kp_entry_fits (e, true, map_size))
    *got = kp_mapping_trim (kp_entry_base (e), *got, map_size);
  return kp_entry_base (e);
}

/* The biggest cached mapping smaller than MAP_SIZE but at least half
   of it (its size in *GOT), for the caller to grow in place, or NULL.
   Growing faults in only the difference, where a new mapping would
   fault in all of it.  */
void *
kp_cache_take_mapping_smaller (size_t map_size, size_t *got)
{
  size_t floor = map_size / 2;
  if (map_size > KP_REGION_SIZE)
    return NULL;                /* huge: exact fits only */
  kp_heap_t *h = kp_cache_heap ();
  uintptr_t e = 0;
  if (h != NULL)
    {
      uintptr_t seen;
      unsigned best = kp_slots_biggest_below (h->cache.l1, KP_L1_SLOTS, floor,
                                              map_size, &seen);
      if (best != KP_L1_SLOTS)
        e = kp_l1_take (h, best);
    }
  if (e == 0 && kp_l2_bytes () != 0)
    {
      uintptr_t seen;
      unsigned best = kp_slots_biggest_below (kp_l2, KP_L2_SLOTS, floor,
                                              map_size, &seen);
      if (best != KP_L2_SLOTS)
        e = kp_l2_take_slot (best, seen);
    }
  if (e == 0)
    return NULL;
  *got = kp_entry_bytes (e);
  return kp_entry_base (e);
}

/* The long way of kp_cache_free_mapping.  */
static KP_NOINLINE void
kp_cache_free_mapping_long (uintptr_t e)
{
  if (!kp_cache_put (e, true))
    kp_mapping_release (kp_entry_base (e));
  kp_cache_purge_poll ();
}

void
kp_cache_free_mapping (uintptr_t e)
{
  KP_ASSERT (kp_entry_is_mapping (e));
  if (!kp_l1_put_fast (kp_tc.heap, e, kp_entry_mapping_bytes (e)))
    kp_cache_free_mapping_long (e);
}

bool
kp_cache_drain (void)
{
  bool any = kp_l2_evict (0);
  kp_heap_t *h = kp_cache_heap ();
  if (h != NULL)
    {
      if (kp_l1_evict (h, 0))
        any = true;
      kp_l1_room_update (h);
    }
  return any;
}

void
kp_cache_thread_exit (kp_heap_t *h)
{
  kp_l1_evict (h, 0);
  /* The record's next thread starts with no budget: its first put
     takes the long way.  */
  h->cache.l1_room = 0;
  h->cache.l1_top = 0;
}

/* Give back E, an entry the decay took out of the cache, with its
   pages; its pages, and one more call in *CALLS.  */
static size_t
kp_entry_decay (uintptr_t e, size_t *calls)
{
  ++*calls;
  kp_entry_release_pages (e, KP_PAGES_DISCARD);
  return kp_entry_bytes (e) / KP_PAGE;
}

/* The decay of the second level, at time NOW with delay DELAY: the
   tick of it that is due, if any, and the pages of the mappings it
   gave back (their count is added to *CALLS).  A tick gives back every
   entry it finds where the last tick found it, when no thread has
   taken from the level since, and notes what is there for the next.
   Each give-back is a CAS of the word to 0, as a take is, so it never
   races with a take for the same block.  An entry whose block was
   taken and put back in the same word in between looks the same, and
   that is what the count of takes tells apart: a level that serves
   requests keeps everything, a level that has not served one for a
   whole delay gives everything back that was there for the delay.  */
static size_t
kp_l2_decay (uint32_t now, uint32_t delay, size_t *calls)
{
  if (!kp_tick_due (&kp_l2_tick, now, delay))
    return 0;
  size_t takes = atomic_load_explicit (&kp_l2_takes, memory_order_relaxed);
  bool idle = takes == atomic_load_explicit (&kp_l2_takes_seen,
                                             memory_order_relaxed);
  size_t pages = 0;
  for (unsigned i = 0; i < KP_L2_SLOTS; i++)
    {
      uintptr_t e = atomic_load_explicit (&kp_l2[i], memory_order_relaxed);
      if (idle && e != 0
          && e == atomic_load_explicit (&kp_l2_seen[i], memory_order_relaxed)
          && kp_l2_clear_slot (i, e) != 0)
        {
          pages += kp_entry_decay (e, calls);
          e = 0;
        }
      atomic_store_explicit (&kp_l2_seen[i], e, memory_order_relaxed);
    }
  atomic_store_explicit (&kp_l2_takes_seen, takes, memory_order_relaxed);
  return pages;
}

/* The decay of the first level.  A block waits there for the owner's
   next large request of its size; when the owner makes no large
   request for the decay's delay, the blocks go back to the kernel, so
   that a thread done with its large blocks does not keep them
   resident for good (nor in the free units' budget, which would keep
   them a period longer).  The allocations do nothing of their own for
   it: a pass notes the entries and sets KP_STREAK_MARK, and every
   large allocation zeroes the streak already (the short paths' takes
   themselves, the long way through kp_cache_note_alloc).  A pass at
   least the delay later that finds the mark still set knows that the
   thread made no large allocation in between, and gives back the
   entries still in the slots where it noted them.  A loop that takes
   its block between two passes keeps it.  The pass also makes the
   second level's tick when one is due (kp_l2_decay).  */
size_t
kp_cache_decay (kp_heap_t *h, uint32_t now, uint32_t delay, size_t *calls)
{
  size_t pages = 0;
  if (h->cache.free_streak & KP_STREAK_MARK)
    {
      if (now - h->cache.l1_seen_at < delay)
        return kp_l2_decay (now, delay, calls);
      for (unsigned i = 0; i < KP_L1_SLOTS; i++)
        {
          uintptr_t e = kp_l1_get (h, i);
          if (e != 0 && e == h->cache.l1_seen[i])
            pages += kp_entry_decay (kp_l1_take (h, i), calls);
        }
      if (pages != 0)
        kp_l1_room_update (h);
    }
  for (unsigned i = 0; i < KP_L1_SLOTS; i++)
    h->cache.l1_seen[i] = kp_l1_get (h, i);
  h->cache.l1_seen_at = now;
  h->cache.free_streak |= KP_STREAK_MARK;
  return pages + kp_l2_decay (now, delay, calls);
}

void
kp_cache_lent (size_t *blocks, size_t *bytes)
{
  *blocks = *bytes = 0;
  for (kp_heap_t *h = kp_heap_list (); h != NULL; h = h->pool_next)
    {
      *blocks += atomic_load_explicit (&h->cache.lent_blocks,
                                       memory_order_relaxed);
      *bytes += atomic_load_explicit (&h->cache.lent_bytes,
                                      memory_order_relaxed);
    }
}

size_t
kp_cache_bytes (void)
{
  size_t total = kp_l2_bytes ();
  for (kp_heap_t *h = kp_heap_list (); h != NULL; h = h->pool_next)
    total += kp_l1_bytes (h);
  return total;
}

/* Lend H's idle cached blocks to small chunks: release to the free
   units, resident and for any small chunk to claim (KP_PAGES_LAZY_SMALL),
   each dedicated chunk of H's first level that an earlier call noted
   there, with no large allocation by H since (KP_LEND_MARK), when H
   has since claimed at least as many units not resident for its small
   chunks as the block has; and note the entries not noted yet.  A
   program that grows its small blocks past a large one it freed (a
   hash table grown by realloc leaves the old table) then uses those
   pages instead of faulting in new ones, as it would in an allocator
   that reuses a freed block's memory for any size; a block that the
   next large request of its size would take waits first, and the
   units no small chunk takes still serve a dedicated chunk
   (kp_units_claim).  The notes are the loans' own, one an entry, not
   the decay pass's of the whole level: a loan that waited for a pass,
   every half delay, came or not depending on when the program grew,
   and a block freed after the pass waited for the next one
   (bench/README, issue 36, eleventh sitting).  Mappings are not lent:
   they are not units.  True when one was lent.  */
static bool
kp_cache_lend (kp_heap_t *h)
{
  if (!(h->cache.free_streak & KP_LEND_MARK))
    {
      for (unsigned i = 0; i < KP_L1_SLOTS; i++)
        h->cache.lend_seen[i] = 0;
      h->cache.free_streak |= KP_LEND_MARK;
    }
  size_t fresh = h->cache.fresh_units;
  bool lent = false;
  for (unsigned i = 0; i < KP_L1_SLOTS; i++)
    {
      uintptr_t e = kp_l1_get (h, i);
      if (e == 0 || kp_entry_is_mapping (e))
        continue;
      if (e != h->cache.lend_seen[i])
        {
          h->cache.lend_seen[i] = e;
          h->cache.lend_fresh[i] = fresh;
        }
      else if (fresh - h->cache.lend_fresh[i]
               >= kp_entry_bytes (e) >> KP_UNIT_SHIFT)
        {
          kp_l1_take (h, i);
          h->cache.lend_seen[i] = 0;
          kp_owner_add (&h->cache.lent_blocks, 1);
          kp_owner_add (&h->cache.lent_bytes, kp_entry_bytes (e));
          kp_units_release (kp_entry_chunk_desc (kp_entry_base (e)),
                            KP_PAGES_LAZY_SMALL);
          lent = true;
        }
    }
  if (lent)
    kp_l1_room_update (h);
  return lent;
}

/* A claim of UNITS units for a small chunk of class CLS or a dedicated
   one (KP_CLS_DEDICATED).  A small chunk that finds no resident run
   has the thread's idle cached blocks lent (kp_cache_lend) and looks
   again before it claims units not resident, which it counts for the
   next loans.  When no unit is left (the cap, or the kernel refused a
   region), the cache is drained and the claim tried once more.  A
   small chunk of a class that the thread fills densely (DENSE) claims
   its units not resident in a small chunks' group when the huge page
   policy is KAME_POOL_THP_SMALL (kp_units_claim_any).  Here, not in
   region.c, because the cache sits above the regions.  */
kp_chunk_t *
kp_units_claim_retry (unsigned units, unsigned cls, bool dense)
{
  kp_chunk_t *c;
  if (cls == KP_CLS_DEDICATED)
    c = kp_units_claim (units, cls);
  else if ((c = kp_units_claim_resident (units, cls)) == NULL)
    {
      kp_heap_t *h = kp_cache_heap ();
      if (h != NULL && h->cache.l1_top != 0 && kp_cache_lend (h))
        c = kp_units_claim_resident (units, cls);
      if (c == NULL)
        {
          if (h != NULL)
            h->cache.fresh_units += units;
          c = kp_units_claim_any (units, cls, dense);
        }
    }
  if (kp_unlikely (c == NULL) && kp_cache_drain ())
    c = kp_units_claim (units, cls);
  return c;
}

/* ---- Public calls ------------------------------------------------------- */

int
kame_pool_set_large_cache_cap (size_t bytes)
{
  size_t old = kp_setting_swap (&kp_cache_cap, bytes);
  /* Every heap's budget is out of date: its next put takes the long
     way, which evicts down to the new cap.  */
  atomic_fetch_add_explicit (&kp_cache_gen, 1, memory_order_release);
  kp_l2_evict (bytes);
  kp_heap_t *h = kp_cache_heap ();
  size_t l2 = kp_l2_bytes ();
  if (h != NULL)
    {
      kp_l1_evict (h, l2 < bytes ? bytes - l2 : 0);
      kp_l1_room_update (h);
    }
  /* The free units the large tier keeps resident are bounded by the
     cap too (region.c).  */
  if (bytes < old)
    kp_units_purge_dirty ();
  return 0;
}

size_t
kame_pool_get_large_cache_cap (void)
{
  return kp_setting (&kp_cache_cap);
}
