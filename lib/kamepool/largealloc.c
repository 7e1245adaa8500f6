/* largealloc.c -- the allocation and free of blocks above the size
   classes: the thread's own cache first, on the short paths that
   malloc tail-calls, then the long way (kp_malloc_large), which looks
   in both levels of the cache and else claims units or maps anew.  It
   sits above the cache (cache.c), which holds what large.c's
   mechanics make, and above the heaps (heap.c), since a thread whose
   first allocation is large gets its heap here.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <config.h>

#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>

#include "kp_internal.h"

/* ---- The short paths -------------------------------------------------- */

/* malloc of N bytes above the small classes, up to 4 MiB: a dedicated
   chunk of exactly the units N needs from the thread's own cache, the
   case of a loop over one large size, with no further call and no
   atomic read-modify-write; else the long way, kp_malloc_large.  */
void *
kp_malloc_dedicated (size_t n)
{
  /* No test that the heap is live: the sentinels' first levels stay
     empty, l1_top 0 (kp_cache_heap never hands them out, and their
     budget is 0), and WANT is never zero, nor the low bits of a
     mapping's entry, which are odd.  */
  kp_heap_t *h = kp_tc.heap;
  KP_ASSERT (n > KP_SMALL_MAX && n <= KP_DEDICATED_MAX);
  uintptr_t want = ((n + KP_UNIT_SIZE - 1) >> KP_UNIT_SHIFT) << 1;
  /* Newest first: the last put, where a loop's one block always is,
     in straight-line code; then the older ones.  */
  size_t i = h->cache.l1_top - 1;
  uintptr_t e;
  if (kp_likely (i < KP_L1_SLOTS)
      && kp_likely (((e = atomic_load_explicit (&h->cache.l1[i],
                                                memory_order_relaxed))
                     & (KP_UNIT_SIZE - 1)) == want))
    h->cache.l1_top = i;
  else
    {
      if (i >= KP_L1_SLOTS)
        return kp_malloc_large (n, 0);  /* empty */
      do
        if (i-- == 0)
          return kp_malloc_large (n, 0);
      while (((e = kp_l1_get (h, i)) & (KP_UNIT_SIZE - 1)) != want);
    }
  /* A chunk's entry: kp_l1_take and kp_entry_base without their test
     for a mapping.  */
  atomic_store_explicit (&h->cache.l1[i], 0, memory_order_relaxed);
  kp_l1_take_fast (h, (size_t) want << (KP_UNIT_SHIFT - 1));
  void *base = (void *) (e - want);
  atomic_store_explicit (&kp_entry_chunk_desc (base)->kind,
                         KP_KIND_DEDICATED, memory_order_relaxed);
  kp_large_note (1, (size_t) want << (KP_UNIT_SHIFT - 1));
  return base;
}

/* malloc of N bytes above 4 MiB: the smallest mapping in the thread's
   own cache that fits, reused whole, with no further search and no
   atomic read-modify-write; else the long way, kp_malloc_large, which
   looks in both levels.  */
void *
kp_malloc_mapping (size_t n)
{
  kp_heap_t *h = kp_tc.heap;
  size_t page = kp_os_page_size ();
  if (n > KP_REGION_SIZE - 2 * page)
    return kp_malloc_large (n, 0);
  size_t need = (n + 2 * page - 1) & ~(page - 1);       /* header page */
  /* An exact fit in the newest entry first, the loop's case, by the
     entry's low bits alone (its size and flag), in straight-line code;
     as in kp_malloc_dedicated, a sentinel's empty first level
     needs no test.  Else the best fit.  */
  uintptr_t want = kp_entry_mapping (NULL, need);
  size_t top = h->cache.l1_top, i = top - 1;
  uintptr_t e;
  if (kp_likely (i < KP_L1_SLOTS)
      && kp_likely (((e = kp_l1_get (h, i)) & KP_REGION_MASK) == want))
    {
      kp_l1_set (h, i, 0);
      h->cache.l1_top = i;
      kp_l1_take_fast (h, need);
      return kp_mapping_recycle ((void *) (e - want), need, n);
    }
  unsigned fit = top;
  do
    if (fit-- == 0)
      {
        fit = KP_L1_SLOTS;
        break;
      }
  while ((kp_l1_get (h, fit) & KP_REGION_MASK) != want);
  if (fit == KP_L1_SLOTS)
    {
      if (!kp_heap_live (h)
          || (fit = kp_l1_fit_call (h, need)) == KP_L1_SLOTS)
        return kp_malloc_large (n, 0);
    }
  e = kp_l1_take (h, fit);
  h->cache.free_streak = 0;
  return kp_mapping_recycle (kp_entry_base (e), kp_entry_bytes (e), n);
}

/* ---- The long way ----------------------------------------------------- */

static void *
kp_dedicated_alloc (size_t n)
{
  unsigned units = (unsigned) ((n + KP_UNIT_SIZE - 1) >> KP_UNIT_SHIFT);
  if (units == 0)
    units = 1;
  /* A cached chunk keeps every field of its last use.  */
  kp_chunk_t *c = kp_cache_take_chunk (units);
  if (c == NULL)
    {
      c = kp_units_claim_retry (units, KP_CLS_DEDICATED, false);
      if (c == NULL)
        return NULL;
      c->used = 1;
      c->capacity = 1;
      c->bump = c->limit = NULL;
      kp_chunk_setup (c, KP_KIND_DEDICATED, 0, units,
                      (uint32_t) units << KP_UNIT_SHIFT, NULL);
    }
  kp_large_note (1, (size_t) units << KP_UNIT_SHIFT);
  return kp_chunk_data (c);
}

/* Under a tight RLIMIT_AS the over-sized mapping with which
   kp_os_map_aligned finds an aligned range may not fit where SIZE
   itself does.  Probe the aligned addresses below and above the place
   the kernel picks for SIZE, which is often a hole between other
   aligned mappings: a few dozen failed probes are cheap next to an
   out-of-memory failure.  The last resort of kp_large_map.  */
#define KP_TIGHT_PROBES 64

static void *
kp_map_aligned_tight (size_t size, size_t align)
{
#ifdef MAP_FIXED_NOREPLACE
  int saved = errno;
  int prot = PROT_READ | PROT_WRITE;
  /* Committed, as kp_os_map_committed's.  */
  int flags = MAP_PRIVATE | MAP_ANONYMOUS;
  char *p = mmap (NULL, size, prot, flags, -1, 0);
  if (p == MAP_FAILED)
    return NULL;
  munmap (p, size);
  uintptr_t down = (uintptr_t) p & ~(uintptr_t) (align - 1);
  for (unsigned i = 0; i < 2 * KP_TIGHT_PROBES; i++)
    {
      /* down, down + align, down - align, down + 2 align, ...  */
      uintptr_t step = (uintptr_t) ((i + 1) / 2) * align;
      uintptr_t at = i % 2 == 0 ? down - step : down + step;
      if (i % 2 == 0 ? step > down : at < down)
        continue;               /* wrapped around */
      char *q = mmap ((void *) at, size, prot, flags | MAP_FIXED_NOREPLACE,
                      -1, 0);
      if (q == (char *) at)
        {
          errno = saved;
          return q;
        }
      /* A kernel without MAP_FIXED_NOREPLACE takes it as a hint.  */
      if (q != MAP_FAILED)
        munmap (q, size);
    }
  errno = saved;
#else
  (void) size;
  (void) align;
#endif
  return NULL;
}

/* Map SIZE bytes aligned to ALIGN for a large block, committed (the
   kernel's overcommit policy decides at the call).  When the kernel
   refuses, the cache gives its mappings back and the map is tried
   once more, with the tight placement as the last resort.  */
static void *
kp_large_map (size_t size, size_t align)
{
  void *p = kp_os_map_committed (size, align);
  if (kp_likely (p != NULL))
    return p;
  if (kp_cache_drain ())
    p = kp_os_map_committed (size, align);
  if (p == NULL)
    p = kp_map_aligned_tight (size, align);
  if (p == NULL)
    errno = ENOMEM;
  return p;
}

/* A mapping of its own, 32 MiB-aligned, header page first, the block
   at offset max(page, ALIGN) with ALIGN below 32 MiB.  */
static void *
kp_mapping_alloc (size_t n, size_t align)
{
  size_t page = kp_os_page_size ();
  size_t offset = align > page ? align : page;
  if (n == 0)
    n = 1;                      /* a unique block needs at least a byte */
  if (n > PTRDIFF_MAX - offset - page)
    {
      errno = ENOMEM;
      return NULL;
    }
  size_t map_size = kp_round_up (offset + n, page);
  if (offset == page)
    {
      size_t got;
      char *cached = kp_cache_take_mapping (map_size, &got);
      if (cached == NULL
          && (cached = kp_cache_take_mapping_smaller (map_size, &got))
             != NULL)
        {
          int saved = errno;
          void *q = mremap (cached, got, map_size, 0);
          errno = saved;
          if (q == cached)
            got = map_size;
          else
            {
              /* Something lies after it: back to the cache.  */
              kp_cache_free_mapping (kp_entry_mapping (cached, got));
              cached = NULL;
            }
        }
      if (cached != NULL)
        return kp_mapping_recycle (cached, got, n);
    }
  char *base = kp_large_map (map_size, KP_REGION_SIZE);
  if (base == NULL)
    {
      errno = ENOMEM;
      return NULL;
    }
  return kp_mapping_publish (base, n, base, map_size,
                             base + offset, KP_RADIX_LARGE);
}

/* A block aligned to ALIGN >= 32 MiB: it starts a region of its own,
   so its header is the page just before it, and the region's radix
   entry says so (KP_RADIX_LARGE_PREV).  */
static void *
kp_mapping_alloc_huge_align (size_t n, size_t align)
{
  size_t page = kp_os_page_size ();
  if (n == 0)
    n = 1;
  if (n > PTRDIFF_MAX - page || align > PTRDIFF_MAX - page - n)
    {
      errno = ENOMEM;
      return NULL;
    }
  size_t map_size = page + kp_round_up (n, page);
  /* Map the header page and the block at an ALIGN boundary, plus
     slack, then trim the slack.  */
  char *base = kp_large_map (map_size + align, page);
  if (base == NULL)
    {
      errno = ENOMEM;
      return NULL;
    }
  char *block = (char *) kp_round_up ((uintptr_t) base + page, align);
  char *head = block - page;
  if (head > base)
    kp_os_unmap (base, (size_t) (head - base));
  char *end = base + map_size + align;
  if (end > head + map_size)
    kp_os_unmap (head + map_size, (size_t) (end - (head + map_size)));
  return kp_mapping_publish (head, n, head, map_size,
                             block, KP_RADIX_LARGE_PREV);
}

/* Allocate N bytes above the small classes, aligned to ALIGN (0 or a
   power of two): malloc's slow path, and memalign's for what the
   small classes cannot serve.  */
void *
kp_malloc_large (size_t n, size_t align)
{
  /* kp_malloc has looked in the thread's own cache for an exact fit
     already (kp_malloc_dedicated); kp_dedicated_alloc below looks
     in both levels.  */
  if (kp_unlikely (n > PTRDIFF_MAX))
    {
      errno = ENOMEM;
      return NULL;
    }
  if (!kp_ready ())
    return align > KP_MIN_ALIGN ? kp_libc_memalign (align, n)
                                : kp_libc_malloc (n);
  /* A thread whose first allocation is large gets its heap here, for
     its first-level cache and its free streak.  */
  if (kp_unlikely (!kp_heap_live (kp_tc.heap)) && kp_tc.heap != &kp_heap_dead)
    kp_thread_init ();
  kp_cache_note_alloc (n);
  if (n <= KP_DEDICATED_MAX && align <= KP_UNIT_SIZE)
    {
      void *p = kp_dedicated_alloc (n);
      if (p != NULL)
        return p;
      /* Beyond the region cap, or no region to be had.  */
      return kp_units_fallback (n, align);
    }
  if (align >= KP_REGION_SIZE)
    return kp_mapping_alloc_huge_align (n, align);
  return kp_mapping_alloc (n, align);
}
