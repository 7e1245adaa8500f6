/* large.c -- the mechanics of blocks above the size classes:
   dedicated chunks of whole units up to 4 MiB, and mappings of their
   own above that (or for alignments a dedicated chunk cannot give).
   Their headers, their publication and lookup, trimming, growing in
   place and unmapping.  Which block a request gets, the cache first or
   a new one, is largealloc.c's, above the cache.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   A mapping starts 32 MiB-aligned with a header page; the block is at
   offset max(page, alignment), inside the first 32 MiB, whose radix
   entry says LARGE.  A block aligned to 32 MiB or more starts a region
   itself; its header is the page before it (LARGE_PREV).  A mapping
   smaller than 32 MiB does not own the rest of its 32 MiB slot, so
   every lookup checks the header and the exact block address before
   it trusts the entry.  A freed mapping kept by the cache (cache.c)
   keeps its radix entry and its header, with the magic
   KP_LARGE_CACHED.  */

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

/* The large tier's counts (kp_heap_large_t) of the threads without a
   heap; the figures are the sums of these and of every heap record's.
   A thread with a heap counts in its record (relaxed load and store,
   no read-modify-write); a thread without one here.  The live parts
   may wrap below zero (a block freed by another thread than its
   maker's); the sum, modulo SIZE_MAX + 1, is exact.  */
static kp_heap_large_t kp_large_nobody;

/* N more blocks and BYTES more bytes in the count WHICH of the calling
   thread (either may be a negative change, wrapped).  */
static void
kp_large_add (unsigned which, size_t n, size_t bytes)
{
  kp_heap_t *h = kp_tc.heap;
  if (kp_likely (kp_heap_live (h)))
    {
      kp_owner_add (&h->large.pair[which].n, n);
      kp_owner_add (&h->large.pair[which].bytes, bytes);
      return;
    }
  atomic_fetch_add_explicit (&kp_large_nobody.pair[which].n, n,
                             memory_order_relaxed);
  atomic_fetch_add_explicit (&kp_large_nobody.pair[which].bytes, bytes,
                             memory_order_relaxed);
}

/* The count WHICH over every thread, into *N and *BYTES.  */
static void
kp_large_sum (unsigned which, size_t *n, size_t *bytes)
{
  size_t c = atomic_load_explicit (&kp_large_nobody.pair[which].n,
                                   memory_order_relaxed);
  size_t b = atomic_load_explicit (&kp_large_nobody.pair[which].bytes,
                                   memory_order_relaxed);
  for (kp_heap_t *h = kp_heap_list (); h != NULL; h = h->pool_next)
    {
      c += atomic_load_explicit (&h->large.pair[which].n,
                                 memory_order_relaxed);
      b += atomic_load_explicit (&h->large.pair[which].bytes,
                                 memory_order_relaxed);
    }
  *n = c;
  *bytes = b;
}

void
kp_large_note (size_t blocks, size_t bytes)
{
  kp_large_add (KP_LARGE_OUT, blocks, bytes);
}

void
kp_large_totals (size_t *allocs, size_t *bytes)
{
  kp_large_sum (KP_LARGE_OUT, allocs, bytes);
}

/* COUNT more live mappings and BYTES more of their bytes (either may
   be a negative change, wrapped); what is more is also handed out
   (kp_large_note), and changes the footprint.  */
static inline void
kp_large_stat (size_t count, size_t bytes)
{
  kp_footprint_add (bytes);
  if ((ptrdiff_t) bytes > 0)
    kp_large_note ((ptrdiff_t) count > 0 ? count : 0, bytes);
  kp_large_add (KP_LARGE_LIVE, count, bytes);
}

void
kp_large_stats (size_t *count, size_t *bytes)
{
  kp_large_sum (KP_LARGE_LIVE, count, bytes);
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

void *
kp_mapping_publish (void *head, size_t n, char *map_base, size_t map_size,
                    char *block, int kind)
{
  kp_mapping_header ((kp_large_header_t *) head, n, map_base, map_size,
                     block, false);
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

/* The free of P, whose region's radix entry KIND is LARGE or
   LARGE_PREV.  When P is the block of a live mapping that the cache
   can hold (32 MiB-aligned, the block after the header page, at most
   KP_ENTRY_MAPPING_MAX bytes), the mapping leaves the stats, is marked
   cached, and its cache entry is returned: the caller puts it in the
   cache or releases it (kp_cache_free_mapping).  Otherwise P is dealt
   with here and 0 returned: a live mapping is unmapped, a cached one
   or a pointer inside one is reported, and anything else in that
   32 MiB slot is not ours but libc's.  */
uintptr_t
kp_mapping_free (void *p, int kind)
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
      return 0;
    }
  if (hdr->magic == KP_LARGE_CACHED)
    {
      kp_misuse ("free", "double free of", p);
      return 0;
    }
  size_t map_size = hdr->map_size;
  char *map_base = hdr->map_base;
  kp_large_stat ((size_t) -1, (size_t) 0 - map_size);
  /* Marked before the caller's put: once in the cache, another thread
     may take it and write the header.  */
  if (kind == KP_RADIX_LARGE && hdr->block == map_base + kp_os_page_size ()
      && map_size <= KP_ENTRY_MAPPING_MAX)
    {
      hdr->magic = KP_LARGE_CACHED;
      return kp_entry_mapping (map_base, map_size);
    }
  kp_mapping_unmap (hdr);
  return 0;
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
  unsigned had = atomic_load_explicit (&c->units, memory_order_relaxed);
  if (!kp_units_extend (c, units))
    return false;
  if (units > had)
    kp_large_note (0, (size_t) (units - had) << KP_UNIT_SHIFT);
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
