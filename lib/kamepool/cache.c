/* cache.c -- the recycle cache of large blocks: freed dedicated chunks
   (up to 4 MiB) and freed mappings (above 4 MiB, up to 32 MiB) kept
   for reuse, first in the freeing thread's heap record, then in one
   process-wide array.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   An entry is one word: the block's base (a dedicated chunk's data,
   256 KiB-aligned, or a mapping, 32 MiB-aligned) with its size in the
   low bits that the alignment leaves free.  So an entry says what it
   is without touching the memory, which another thread may have
   unmapped.

     first level   KP_L1_SLOTS words in the thread's heap record, plain
                   loads and stores: only the owning thread touches them.
     second level  KP_L2_SLOTS _Atomic words, 0 when empty; a put is one
                   CAS from 0 to the entry (release: the block's reset
                   metadata goes with it), a take one CAS from the entry
                   to 0 (acquire).  A word that comes back with the same
                   value after an ABA is the same block with the same
                   size, so whoever wins it may use it.
     byte count    kp_cache_total, relaxed fetch_add/fetch_sub on every
                   put and take, so that the cap holds for the sum of
                   both levels; it is what the statistics report.

   A cached dedicated chunk keeps its units claimed with kind
   KP_KIND_CACHED, and a cached mapping keeps its radix entry with the
   header's magic changed: a second free of either is reported as an
   invalid free and leaves the cache alone.  Lowering the cap evicts
   the second level and the calling thread's first level at once;
   other threads trim their first level at their next put, and drain
   it when they exit.  Huge mappings (above 32 MiB) never enter the
   cache, so a request is never served from a much bigger block.  */

#include <config.h>

#include "kp_internal.h"

#define KP_L2_SLOTS 64
/* A mapping is reused for a request that needs at least this share of
   it: more would pin memory the program did not ask for.  */
#define KP_CACHE_SLACK_SHIFT 3          /* 1/8 */

static _Atomic (uintptr_t) kp_l2[KP_L2_SLOTS];
static _Atomic (size_t) kp_cache_total;
static _Atomic (size_t) kp_cache_cap = KP_CACHE_CAP_DEFAULT;

/* ---- Entries ------------------------------------------------------------ */

#define KP_ENTRY_MAPPING ((uintptr_t) 1)

static inline uintptr_t
kp_entry_chunk (const kp_chunk_t *c)
{
  unsigned units = atomic_load_explicit (&c->units, memory_order_relaxed);
  return (uintptr_t) kp_chunk_data (c) | (uintptr_t) units << 1;
}

static inline uintptr_t
kp_entry_mapping (void *base, size_t map_size)
{
  return (uintptr_t) base | (uintptr_t) (map_size >> 12) << 1
         | KP_ENTRY_MAPPING;
}

static inline bool
kp_entry_is_mapping (uintptr_t e)
{
  return (e & KP_ENTRY_MAPPING) != 0;
}

static inline size_t
kp_entry_bytes (uintptr_t e)
{
  if (kp_entry_is_mapping (e))
    return (size_t) ((e & KP_REGION_MASK) >> 1) << 12;
  return (size_t) ((e & (KP_UNIT_SIZE - 1)) >> 1) << KP_UNIT_SHIFT;
}

static inline void *
kp_entry_base (uintptr_t e)
{
  return (void *) (e & ~(kp_entry_is_mapping (e) ? KP_REGION_MASK
                                                 : KP_UNIT_SIZE - 1));
}

/* Does entry E serve a request of kind MAPPING for NEED bytes?  A
   chunk must have exactly the units asked for; a mapping may be up to
   1/8 bigger.  */
static inline bool
kp_entry_fits (uintptr_t e, bool mapping, size_t need)
{
  if (e == 0 || kp_entry_is_mapping (e) != mapping)
    return false;
  size_t have = kp_entry_bytes (e);
  if (!mapping)
    return have == need;
  return have >= need && have - need <= need >> KP_CACHE_SLACK_SHIFT;
}

/* Give E's memory back for good.  */
static void
kp_entry_release (uintptr_t e)
{
  if (kp_entry_is_mapping (e))
    kp_mapping_release (kp_entry_base (e));
  else
    kp_units_release (kp_chunk_of (kp_entry_base (e)), KP_PAGES_LAZY);
}

/* ---- Levels -------------------------------------------------------------- */

static inline kp_heap_t *
kp_cache_heap (void)
{
  kp_heap_t *h = kp_tc.heap;
  return kp_heap_live (h) ? h : NULL;
}

static uintptr_t
kp_l2_take (bool mapping, size_t need)
{
  for (unsigned i = 0; i < KP_L2_SLOTS; i++)
    {
      uintptr_t e = atomic_load_explicit (&kp_l2[i], memory_order_relaxed);
      if (kp_entry_fits (e, mapping, need)
          && atomic_compare_exchange_strong_explicit (&kp_l2[i], &e, 0,
                                                      memory_order_acquire,
                                                      memory_order_relaxed))
        return e;
    }
  return 0;
}

static bool
kp_l2_put (uintptr_t e)
{
  for (unsigned i = 0; i < KP_L2_SLOTS; i++)
    {
      uintptr_t empty = 0;
      if (atomic_load_explicit (&kp_l2[i], memory_order_relaxed) == 0
          && atomic_compare_exchange_strong_explicit (&kp_l2[i], &empty, e,
                                                      memory_order_release,
                                                      memory_order_relaxed))
        return true;
    }
  return false;
}

/* Release second-level entries until the total is within CAP (all of
   them for CAP 0); true when any was released.  */
static bool
kp_l2_evict (size_t cap)
{
  bool any = false;
  for (unsigned i = 0; i < KP_L2_SLOTS; i++)
    {
      if (atomic_load_explicit (&kp_cache_total, memory_order_relaxed) <= cap
          && cap != 0)
        break;
      uintptr_t e = atomic_exchange_explicit (&kp_l2[i], 0,
                                              memory_order_acquire);
      if (e == 0)
        continue;
      atomic_fetch_sub_explicit (&kp_cache_total, kp_entry_bytes (e),
                                 memory_order_relaxed);
      kp_entry_release (e);
      any = true;
    }
  return any;
}

/* Release first-level entries of H, oldest first, until the total is
   within CAP; true when any was released.  */
static bool
kp_l1_evict (kp_heap_t *h, size_t cap)
{
  bool any = false;
  for (unsigned i = 0; i < KP_L1_SLOTS; i++)
    {
      if (cap != 0
          && atomic_load_explicit (&kp_cache_total, memory_order_relaxed)
             <= cap)
        break;
      uintptr_t e = h->l1[i];
      if (e == 0)
        continue;
      h->l1[i] = 0;
      atomic_fetch_sub_explicit (&kp_cache_total, kp_entry_bytes (e),
                                 memory_order_relaxed);
      kp_entry_release (e);
      any = true;
    }
  return any;
}

/* Take a cached block for a request: a dedicated chunk of exactly NEED
   bytes of units, or a mapping of at least NEED bytes.  */
static uintptr_t
kp_cache_take (bool mapping, size_t need)
{
  if (atomic_load_explicit (&kp_cache_total, memory_order_relaxed) == 0)
    return 0;
  uintptr_t e = 0;
  kp_heap_t *h = kp_cache_heap ();
  if (h != NULL)
    for (unsigned i = KP_L1_SLOTS; i-- > 0;)
      if (kp_entry_fits (h->l1[i], mapping, need))
        {
          e = h->l1[i];
          h->l1[i] = 0;
          break;
        }
  if (e == 0)
    e = kp_l2_take (mapping, need);
  if (e != 0)
    atomic_fetch_sub_explicit (&kp_cache_total, kp_entry_bytes (e),
                               memory_order_relaxed);
  return e;
}

/* Keep E if the cap allows; false when the caller must release it.  */
static bool
kp_cache_put (uintptr_t e)
{
  size_t bytes = kp_entry_bytes (e);
  size_t cap = atomic_load_explicit (&kp_cache_cap, memory_order_relaxed);
  if (bytes > cap)
    return false;
  size_t total = atomic_fetch_add_explicit (&kp_cache_total, bytes,
                                            memory_order_relaxed) + bytes;
  kp_heap_t *h = kp_cache_heap ();
  if (total > cap && h != NULL)
    {
      kp_l1_evict (h, cap);
      total = atomic_load_explicit (&kp_cache_total, memory_order_relaxed);
    }
  if (total > cap)
    {
      atomic_fetch_sub_explicit (&kp_cache_total, bytes, memory_order_relaxed);
      return false;
    }
  if (h != NULL)
    {
      /* Newest last; a full first level pushes its oldest to the
         second.  */
      if (h->l1[0] != 0)
        {
          uintptr_t old = h->l1[0];
          if (!kp_l2_put (old))
            {
              atomic_fetch_sub_explicit (&kp_cache_total,
                                         kp_entry_bytes (old),
                                         memory_order_relaxed);
              kp_entry_release (old);
            }
        }
      for (unsigned i = 0; i + 1 < KP_L1_SLOTS; i++)
        h->l1[i] = h->l1[i + 1];
      h->l1[KP_L1_SLOTS - 1] = e;
      return true;
    }
  if (kp_l2_put (e))
    return true;
  atomic_fetch_sub_explicit (&kp_cache_total, bytes, memory_order_relaxed);
  return false;
}

/* ---- The tiers' interface ----------------------------------------------- */

kp_chunk_t *
kp_cache_take_chunk (unsigned units)
{
  uintptr_t e = kp_cache_take (false, (size_t) units << KP_UNIT_SHIFT);
  if (e == 0)
    return NULL;
  kp_chunk_t *c = kp_chunk_of (kp_entry_base (e));
  atomic_store_explicit (&c->kind, KP_KIND_DEDICATED, memory_order_relaxed);
  return c;
}

bool
kp_cache_put_chunk (kp_chunk_t *c)
{
  atomic_store_explicit (&c->kind, KP_KIND_CACHED, memory_order_relaxed);
  if (kp_cache_put (kp_entry_chunk (c)))
    return true;
  atomic_store_explicit (&c->kind, KP_KIND_DEDICATED, memory_order_relaxed);
  return false;
}

void *
kp_cache_take_mapping (size_t map_size, size_t *got)
{
  if (map_size > KP_REGION_SIZE)
    return NULL;
  uintptr_t e = kp_cache_take (true, map_size);
  if (e == 0)
    return NULL;
  *got = kp_entry_bytes (e);
  return kp_entry_base (e);
}

bool
kp_cache_put_mapping (void *base, size_t map_size)
{
  if (map_size > KP_REGION_SIZE || ((uintptr_t) base & KP_REGION_MASK) != 0
      || (map_size & 4095) != 0)
    return false;
  return kp_cache_put (kp_entry_mapping (base, map_size));
}

bool
kp_cache_drain (void)
{
  bool any = kp_l2_evict (0);
  kp_heap_t *h = kp_cache_heap ();
  if (h != NULL && kp_l1_evict (h, 0))
    any = true;
  return any;
}

void
kp_cache_thread_exit (kp_heap_t *h)
{
  kp_l1_evict (h, 0);
}

size_t
kp_cache_bytes (void)
{
  return atomic_load_explicit (&kp_cache_total, memory_order_relaxed);
}

/* ---- Public calls ------------------------------------------------------- */

void
kame_pool_set_large_cache_cap (size_t bytes)
{
  atomic_store_explicit (&kp_cache_cap, bytes, memory_order_relaxed);
  if (atomic_load_explicit (&kp_cache_total, memory_order_relaxed) <= bytes)
    return;
  kp_l2_evict (bytes);
  kp_heap_t *h = kp_cache_heap ();
  if (h != NULL)
    kp_l1_evict (h, bytes);
}

size_t
kame_pool_get_large_cache_cap (void)
{
  return atomic_load_explicit (&kp_cache_cap, memory_order_relaxed);
}
