/* large.c -- blocks above the size classes: dedicated chunks of whole
   units up to 4 MiB, and mappings of their own above that (or for
   alignments a dedicated chunk cannot give).

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   This is the simple, replaceable version: every free of a mapping
   returns the memory to the kernel; a recycle cache comes with the
   large-tier work.  A mapping starts 32 MiB-aligned with a header
   page; the block is at offset max(page, alignment), inside the first
   32 MiB, whose radix entry says LARGE.  A block aligned to 32 MiB or
   more starts a region itself; its header is the page before it.  A mapping smaller than 32 MiB does not own
   the rest of its 32 MiB slot, so every lookup checks the header and
   the exact block address before it trusts the entry.  */

#include <config.h>

#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>

#include "kp_internal.h"

#define KP_LARGE_MAGIC UINT64_C (0x6b616d656c617267) /* "kamelarg" */
#define KP_LARGE_CACHED UINT64_C (0x6b616d6563616368) /* "kamecach" */

typedef struct kp_large_header
{
  uint64_t magic;
  size_t size;                  /* requested bytes */
  char *map_base;               /* the mapping */
  size_t map_size;
  char *block;                  /* the block handed out */
  bool recycled;                /* from the cache: not zero-filled */
} kp_large_header_t;

/* Live mappings and their bytes, for kame_pool_get_stats: the sum of
   these and of every heap record's large_count and large_bytes.  A
   thread with a heap counts in its record (relaxed load and store, no
   read-modify-write); a thread without one here.  The parts may wrap
   below zero (a block freed by another thread than its maker's); the
   sum, modulo SIZE_MAX + 1, is exact.  */
static _Atomic (size_t) kp_stat_large_count;
static _Atomic (size_t) kp_stat_large_bytes;

static inline void
kp_large_stat (size_t count, size_t bytes)
{
  kp_heap_t *h = kp_tc.heap;
  if (kp_likely (kp_heap_live (h)))
    {
      kp_owner_add (&h->large.count, count);
      kp_owner_add (&h->large.bytes, bytes);
      return;
    }
  atomic_fetch_add_explicit (&kp_stat_large_count, count,
                             memory_order_relaxed);
  atomic_fetch_add_explicit (&kp_stat_large_bytes, bytes,
                             memory_order_relaxed);
}

void
kp_large_stats (size_t *count, size_t *bytes)
{
  size_t c = atomic_load_explicit (&kp_stat_large_count,
                                   memory_order_relaxed);
  size_t b = atomic_load_explicit (&kp_stat_large_bytes,
                                   memory_order_relaxed);
  for (kp_heap_t *h = kp_heap_list (); h != NULL; h = h->pool_next)
    {
      c += atomic_load_explicit (&h->large.count, memory_order_relaxed);
      b += atomic_load_explicit (&h->large.bytes, memory_order_relaxed);
    }
  *count = c;
  *bytes = b;
}
static inline size_t
kp_round_up (size_t n, size_t to)
{
  return (n + to - 1) & ~(to - 1);
}

static void *
kp_dedicated_alloc (size_t n)
{
  unsigned units = (unsigned) ((n + KP_UNIT_SIZE - 1) >> KP_UNIT_SHIFT);
  if (units == 0)
    units = 1;
  /* A cached chunk keeps every field of its last use.  */
  kp_chunk_t *c = kp_cache_take_chunk (units);
  if (c != NULL)
    return kp_chunk_data (c);
  c = kp_units_claim_retry (units, true);
  if (c == NULL)
    return NULL;
  c->used = 1;
  c->capacity = 1;
  c->bump = c->limit = NULL;
  kp_chunk_setup (c, KP_KIND_DEDICATED, 0, units,
                  (uint32_t) units << KP_UNIT_SHIFT, NULL);
  return kp_chunk_data (c);
}

/* C is a cached dedicated chunk, held by this thread alone: keep its
   first UNITS units and make the others a cached chunk of their own,
   returned, so that a bigger cached chunk serves a smaller request
   without holding more than it asked for.  A run never crosses a claim
   word, so the tail's eventual release clears bits of one word, as any
   release does.  */
kp_chunk_t *
kp_dedicated_trim (kp_chunk_t *c, unsigned units)
{
  kp_region_t *r = kp_region_of (c);
  unsigned base = kp_chunk_base_unit (c);
  unsigned total = atomic_load_explicit (&c->units, memory_order_relaxed);
  KP_ASSERT (units >= 1 && units < total);
  unsigned rest = total - units;
  kp_chunk_t *t = &r->desc[base + units];
  /* We hold every unit of the run, so the back-offsets are ours to
     rewrite (region.c writes them only after winning the claim).  */
  for (unsigned i = 0; i < rest; i++)
    atomic_store_explicit (&r->back[base + units + i], (uint8_t) i,
                           memory_order_relaxed);
  atomic_store_explicit (&t->units, (uint8_t) rest, memory_order_relaxed);
  atomic_store_explicit (&t->kind, KP_KIND_CACHED, memory_order_relaxed);
  atomic_store_explicit (&c->units, (uint8_t) units, memory_order_relaxed);
  atomic_store_explicit (&c->block_size, (uint32_t) units << KP_UNIT_SHIFT,
                         memory_order_relaxed);
  atomic_store_explicit (&t->block_size, (uint32_t) rest << KP_UNIT_SHIFT,
                         memory_order_relaxed);
  atomic_store_explicit (&t->xthread_free, KP_TF_OWNED, memory_order_relaxed);
  atomic_store_explicit (&t->owner, NULL, memory_order_relaxed);
  return t;
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
  int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
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

/* Map SIZE bytes aligned to ALIGN for a large block.  When the kernel
   refuses, the cache gives its mappings back and the map is tried
   once more, with the tight placement as the last resort.  */
static void *
kp_large_map (size_t size, size_t align)
{
  void *p = kp_os_map_aligned (size, align);
  if (kp_likely (p != NULL))
    return p;
  if (kp_cache_drain ())
    p = kp_os_map_aligned (size, align);
  if (p == NULL)
    p = kp_map_aligned_tight (size, align);
  if (p == NULL)
    errno = ENOMEM;
  return p;
}

/* Write the header of a mapping handed out: N bytes asked for, at
   BLOCK in MAP_SIZE bytes from MAP_BASE; RECYCLED when it came from
   the cache (not zero-filled).  Magic last.  */
static inline void
kp_mapping_header (kp_large_header_t *hdr, size_t n, char *map_base,
                   size_t map_size, char *block, bool recycled)
{
  hdr->size = n;
  hdr->map_base = map_base;
  hdr->map_size = map_size;
  hdr->block = block;
  hdr->recycled = recycled;
  atomic_signal_fence (memory_order_release);
  hdr->magic = KP_LARGE_MAGIC;
  kp_large_stat (1, map_size);
}

static void *
kp_mapping_publish (kp_large_header_t *hdr, size_t n, char *map_base,
                    size_t map_size, char *block, int kind)
{
  kp_mapping_header (hdr, n, map_base, map_size, block, false);
  kp_radix_set ((uintptr_t) kp_region_of (block), kind);
  return block;
}

/* Hand out the cached mapping at BASE, GOT bytes, for a request of N
   bytes: its radix entry has stayed all along (see cache.c), so only
   its header changes.  */
void *
kp_mapping_recycle (char *base, size_t got, size_t n)
{
  char *block = base + kp_os_page_size ();
  kp_mapping_header ((kp_large_header_t *) base, n, base, got, block, true);
  return block;
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
              if (!kp_cache_put_mapping (cached, got))
                kp_mapping_release (cached);
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
  return kp_mapping_publish ((kp_large_header_t *) base, n, base, map_size,
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
  return kp_mapping_publish ((kp_large_header_t *) head, n, head, map_size,
                             block, KP_RADIX_LARGE_PREV);
}

/* The header of the mapping whose block is or was P (live or in the
   cache), or NULL.  KIND is P's radix entry.  */
static inline kp_large_header_t *
kp_large_header_any (const void *p, int kind)
{
  char *region = (char *) kp_region_of (p);
  kp_large_header_t *hdr = (kp_large_header_t *)
    (kind == KP_RADIX_LARGE_PREV ? region - kp_os_page_size () : region);
  if ((hdr->magic != KP_LARGE_MAGIC && hdr->magic != KP_LARGE_CACHED)
      || hdr->block != (const char *) p)
    return NULL;
  return hdr;
}

/* The header of the live mapping whose block is P, or NULL.  */
static kp_large_header_t *
kp_large_header (const void *p, int kind)
{
  kp_large_header_t *hdr = kp_large_header_any (p, kind);
  return hdr != NULL && hdr->magic == KP_LARGE_MAGIC ? hdr : NULL;
}

/* Unmap the mapping at BASE, whose header says how big it is.  */
static void
kp_mapping_unmap (kp_large_header_t *hdr)
{
  char *map_base = hdr->map_base;
  size_t map_size = hdr->map_size;
  hdr->magic = 0;
  /* The entry goes first, so a double free finds nothing of ours.  */
  kp_radix_set ((uintptr_t) kp_region_of (hdr->block), KP_RADIX_NONE);
  kp_os_unmap (map_base, map_size);
}

size_t
kp_mapping_trim (void *base, size_t have, size_t want)
{
  int saved = errno;
  /* Shrinking in place cannot fail on Linux; if it does, keep it all.  */
  void *q = mremap (base, have, want, 0);
  errno = saved;
  return q == base ? want : have;
}

void
kp_mapping_release (void *base)
{
  kp_mapping_unmap ((kp_large_header_t *) base);
}

/* Allocate N bytes above the small classes, aligned to ALIGN (0 or a
   power of two): malloc's slow path, and memalign's for what the
   small classes cannot serve.  */
void *
kp_malloc_large (size_t n, size_t align)
{
  /* kp_malloc has looked in the thread's own cache for an exact fit
     already (kp_cache_malloc_dedicated); kp_dedicated_alloc below looks
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

/* Free P, whose region's radix entry is LARGE.  Anything else that
   happens to lie in that 32 MiB slot is not ours: libc's.  */
void
kp_large_free (void *p, int kind)
{
  kp_large_header_t *hdr = kp_large_header_any (p, kind);
  if (hdr == NULL)
    {
      /* Inside one of our mappings (its header is mapped while the
         radix entry is set), or the C library's, in the same slot.  */
      char *region = (char *) kp_region_of (p);
      const kp_large_header_t *h = (const kp_large_header_t *)
        (kind == KP_RADIX_LARGE_PREV ? region - kp_os_page_size () : region);
      if ((h->magic == KP_LARGE_MAGIC || h->magic == KP_LARGE_CACHED)
          && (const char *) p >= h->map_base
          && (const char *) p < h->map_base + h->map_size)
        kp_misuse ("free", "invalid pointer (inside a large block):", p);
      else if (kp_foreign_ok ("free", p))
        kp_libc_free (p);
      return;
    }
  if (hdr->magic == KP_LARGE_CACHED)
    {
      kp_misuse ("free", "double free of", p);
      return;
    }
  size_t map_size = hdr->map_size;
  char *map_base = hdr->map_base;
  kp_large_stat ((size_t) -1, (size_t) 0 - map_size);
  /* Marked before the put: once in the cache, another thread may take
     it and write the header.  */
  if (kind == KP_RADIX_LARGE && hdr->block == map_base + kp_os_page_size ())
    {
      hdr->magic = KP_LARGE_CACHED;
      if (kp_cache_put_mapping (map_base, map_size))
        return;
    }
  kp_mapping_unmap (hdr);
}

/* Grow P, the block of a live dedicated chunk, to N bytes (at most
   4 MiB) where it lies, by claiming the free units that follow it.  */
bool
kp_dedicated_grow (void *p, size_t n)
{
  if (n > KP_DEDICATED_MAX
      || kp_radix_lookup ((uintptr_t) p) != KP_RADIX_POOL)
    return false;
  kp_chunk_t *c = kp_chunk_of (p);
  if (atomic_load_explicit (&c->kind, memory_order_relaxed)
      != KP_KIND_DEDICATED || p != kp_chunk_data (c))
    return false;
  unsigned units = (unsigned) ((n + KP_UNIT_SIZE - 1) >> KP_UNIT_SHIFT);
  if (!kp_units_extend (c, units))
    return false;
  atomic_store_explicit (&c->block_size, (uint32_t) units << KP_UNIT_SHIFT,
                         memory_order_relaxed);
  return true;
}

/* Grow P, a live large mapping, to N bytes where it lies, with mremap
   and no move (the block must stay where its radix entry is).  */
bool
kp_large_grow (void *p, size_t n)
{
#ifdef MREMAP_FIXED
  int kind = kp_radix_lookup ((uintptr_t) p);
  if (kind != KP_RADIX_LARGE)
    return false;
  kp_large_header_t *hdr = kp_large_header (p, kind);
  if (hdr == NULL)
    return false;
  size_t page = kp_os_page_size ();
  size_t offset = (size_t) (hdr->block - hdr->map_base);
  if (n > PTRDIFF_MAX - offset - page)
    return false;
  size_t want = kp_round_up (offset + n, page);
  if (want <= hdr->map_size)
    return true;
  int saved = errno;
  void *q = mremap (hdr->map_base, hdr->map_size, want, 0);
  errno = saved;
  if (q != hdr->map_base)
    return false;
  kp_large_stat (0, want - hdr->map_size);
  hdr->map_size = want;
  hdr->size = n;
  return true;
#else
  (void) p;
  (void) n;
  return false;
#endif
}

/* Usable bytes of P, 0 when P is not the block of a large mapping.  */
size_t
kp_large_usable (const void *p, int kind)
{
  kp_large_header_t *hdr = kp_large_header (p, kind);
  return hdr != NULL ? (size_t) (hdr->map_base + hdr->map_size - hdr->block)
                     : 0;
}

/* True when P is a fresh (zero-filled) large mapping.  */
bool
kp_large_fresh (const void *p)
{
  int kind = kp_radix_lookup ((uintptr_t) p);
  if (kind != KP_RADIX_LARGE && kind != KP_RADIX_LARGE_PREV)
    return false;
  kp_large_header_t *hdr = kp_large_header (p, kind);
  return hdr != NULL && !hdr->recycled;
}

bool
kp_large_owns (const void *p, int kind)
{
  return kp_large_header (p, kind) != NULL;
}
