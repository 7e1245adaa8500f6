/* malloc.c -- kamepool.api tests of kame_pool_malloc, kame_pool_calloc,
   kame_pool_realloc, kame_pool_free and kame_pool_malloc_usable_size
   against the contract: unique zero-size blocks, alignment, the exact
   usable size of every tier, errno, ENOMEM, zeroing, overflow and the
   in-place rules of realloc.

   Guarded sampling is off: these tests assert where the pool places
   blocks and what it counts, and a guarded block is not the pool's.
   kptest-env: KAME_POOL_GUARD_SAMPLE=0

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <errno.h>
#include <stdint.h>

#include "kame_pool.h"
#include "kptest.h"
#include "kptest-pool.h"

#define KIB ((size_t) 1024)
#define MIB (KIB * KIB)
#define UNIT (256 * KIB)
#define REGION (32 * MIB)

static bool
all_zero (const void *p, size_t n)
{
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    if (b[i] != 0)
      return false;
  return true;
}

static int
cmp_ptr (const void *a, const void *b)
{
  uintptr_t x = (uintptr_t) *(void *const *) a;
  uintptr_t y = (uintptr_t) *(void *const *) b;
  return x < y ? -1 : x > y;
}

/* Sizes the compiler cannot see, so that the huge ones draw no
   -Walloc-size-larger-than warning.  */
static volatile size_t size_max = SIZE_MAX;
static volatile size_t ptrdiff_max = PTRDIFF_MAX;

KT_TEST (malloc_zero_returns_unique_pointers)
{
  enum { N = 2000 };
  static void *p[N];
  for (int i = 0; i < N; i++)
    {
      p[i] = kame_pool_malloc (0);
      KT_CHECK (p[i] != NULL);
      KT_CHECK_EQ ((uintptr_t) p[i] % 16, 0);
      KT_CHECK_EQ (kame_pool_malloc_usable_size (p[i]), 16);
    }
  qsort (p, N, sizeof p[0], cmp_ptr);
  for (int i = 1; i < N; i++)
    KT_CHECK (p[i - 1] != p[i]);
  for (int i = 0; i < N; i++)
    kame_pool_free (p[i]);
}

/* Every size 1..4096 and a sweep above, all live at once and painted
   over their whole usable size, so that an overlap shows.  */
KT_TEST (every_size_is_16_byte_aligned_with_its_class_usable_size)
{
  enum { SMALL = 4096, STEP = 97 };
  size_t sizes[SMALL + 32768 / STEP + 64];
  size_t count = 0;
  for (size_t n = 1; n <= SMALL; n++)
    sizes[count++] = n;
  for (size_t n = SMALL + 1; n <= 32768; n += STEP)
    sizes[count++] = n;
  for (size_t n = 32769; n <= KT_SMALL_MAX; n += 3 * KIB + 5)
    sizes[count++] = n;
  for (size_t n = KT_SMALL_MAX + 1; n <= 4 * MIB; n += 331 * KIB + 5)
    sizes[count++] = n;
  void **p = kame_pool_calloc (count, sizeof *p);
  KT_CHECK (p != NULL);
  for (size_t i = 0; i < count; i++)
    {
      p[i] = kame_pool_malloc (sizes[i]);
      if (p[i] == NULL)
        KT_FAILF ("malloc (%zu) returned NULL", sizes[i]);
      if ((uintptr_t) p[i] % 16 != 0)
        KT_FAILF ("malloc (%zu) = %p, not 16-byte aligned", sizes[i], p[i]);
      size_t u = kame_pool_malloc_usable_size (p[i]);
      if (u != kt_usable_for (sizes[i]))
        KT_FAILF ("usable_size (malloc (%zu)) = %zu, expected %zu",
                  sizes[i], u, kt_usable_for (sizes[i]));
      kt_paint (p[i], u, (unsigned) i);
    }
  for (size_t i = 0; i < count; i++)
    if (!kt_painted (p[i], kame_pool_malloc_usable_size (p[i]), (unsigned) i))
      KT_FAILF ("block of malloc (%zu) at %p was overwritten", sizes[i],
                p[i]);
  for (size_t i = 0; i < count; i++)
    kame_pool_free (p[i]);
  kame_pool_free (p);
}

KT_TEST (usable_size_at_every_class_boundary)
{
  for (size_t i = 0; i < KT_NCLASSES; i++)
    {
      size_t s = kt_classes[i];
      size_t probe[3] = { s - 1, s, s + 1 };
      size_t want[3] = { s, s, i + 1 < KT_NCLASSES ? kt_classes[i + 1] : UNIT };
      for (int k = 0; k < 3; k++)
        {
          void *p = kame_pool_malloc (probe[k]);
          KT_CHECK (p != NULL);
          size_t u = kame_pool_malloc_usable_size (p);
          if (u != want[k])
            KT_FAILF ("usable_size (malloc (%zu)) = %zu, expected %zu",
                      probe[k], u, want[k]);
          /* The class's natural alignment: its lowest set bit.  */
          size_t natural = u & -u;
          if ((uintptr_t) p % natural != 0)
            KT_FAILF ("malloc (%zu) = %p, not aligned to %zu", probe[k], p,
                      natural);
          kame_pool_free (p);
        }
    }
  KT_CHECK_EQ (kame_pool_malloc_usable_size (NULL), 0);
}

KT_TEST (dedicated_sizes_are_whole_units_and_unit_aligned)
{
  static const size_t sizes[] = {
    KT_SMALL_MAX + 1, UNIT - 1, UNIT, UNIT + 1, MIB - 1, MIB, MIB + 1,
    3 * MIB + 7, 4 * MIB - 1, 4 * MIB
  };
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    {
      kame_pool_stats_t before = kt_pool_stats ();
      unsigned char *p = kame_pool_malloc (sizes[i]);
      KT_CHECK (p != NULL);
      size_t units = (sizes[i] + UNIT - 1) / UNIT;
      KT_CHECK_EQ (kame_pool_malloc_usable_size (p), units * UNIT);
      KT_CHECK_EQ ((uintptr_t) p % UNIT, 0);
      kame_pool_stats_t during = kt_pool_stats ();
      KT_CHECK_EQ (during.dedicated_chunk_bytes
                   - before.dedicated_chunk_bytes, units * UNIT);
      p[0] = 1;
      p[units * UNIT - 1] = 2;
      kame_pool_free (p);
      kame_pool_stats_t after = kt_pool_stats ();
      KT_CHECK_EQ (after.dedicated_chunk_bytes, before.dedicated_chunk_bytes);
    }
}

KT_TEST (large_sizes_are_page_rounded_one_page_into_a_mapping)
{
  const size_t sizes[] = {
    4 * MIB + 1, 5 * MIB, 5 * MIB + KT_PAGE - 1, 5 * MIB + KT_PAGE + 1,
    33 * MIB, 64 * MIB + 123
  };
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    {
      unsigned char *p = kame_pool_malloc (sizes[i]);
      KT_CHECK (p != NULL);
      size_t u = kame_pool_malloc_usable_size (p);
      if (u != kt_usable_for (sizes[i]))
        KT_FAILF ("usable_size (malloc (%zu)) = %zu, expected %zu",
                  sizes[i], u, kt_usable_for (sizes[i]));
      KT_CHECK_EQ ((uintptr_t) p % REGION, KT_PAGE);
      p[0] = 1;
      p[u - 1] = 2;
      kame_pool_free (p);
    }
}

KT_TEST (successful_calls_leave_errno_unchanged)
{
  static const size_t sizes[] = { 0, 1, 24, 4096, 40000, 2 * MIB,
                                  6 * MIB };
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    {
      size_t n = sizes[i];
      errno = EDOM;
      void *p = kame_pool_malloc (n);
      KT_CHECK (p != NULL);
      KT_CHECK_EQ (errno, EDOM);
      void *q = kame_pool_calloc (1, n);
      KT_CHECK (q != NULL);
      KT_CHECK_EQ (errno, EDOM);
      p = kame_pool_realloc (p, n + 100);
      KT_CHECK (p != NULL);
      KT_CHECK_EQ (errno, EDOM);
      void *r = kame_pool_aligned_alloc (64, n);
      KT_CHECK (r != NULL);
      KT_CHECK_EQ (errno, EDOM);
      void *s = NULL;
      KT_CHECK_EQ (kame_pool_posix_memalign (&s, 256, n), 0);
      KT_CHECK_EQ (errno, EDOM);
      KT_CHECK (kame_pool_malloc_usable_size (s) >= n);
      KT_CHECK_EQ (errno, EDOM);
      kame_pool_free (q);
      kame_pool_free (r);
      kame_pool_free (s);
      KT_CHECK_EQ (errno, EDOM);
      KT_CHECK (kame_pool_realloc (p, 0) == NULL);
      KT_CHECK_EQ (errno, EDOM);
      kame_pool_free (NULL);
      kame_pool_stats_t st = kt_pool_stats ();
      (void) st;
      KT_CHECK_EQ (errno, EDOM);
    }
}

KT_TEST (huge_sizes_fail_with_enomem)
{
  const size_t sizes[] = {
    size_max, size_max - 1, size_max - KT_PAGE, size_max - 32768,
    ptrdiff_max + 1, ptrdiff_max,
    /* Within PTRDIFF_MAX but beyond any address space: the OS refuses.  */
    (size_t) 1 << 50, (size_t) 1 << 47
  };
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    {
      errno = 0;
      void *p = kame_pool_malloc (sizes[i]);
      if (p != NULL)
        KT_FAILF ("malloc (%zu) returned %p", sizes[i], p);
      if (errno != ENOMEM)
        KT_FAILF ("malloc (%zu): errno %d, not ENOMEM", sizes[i], errno);
    }
  /* The failures left the pool working.  */
  void *p = kame_pool_malloc (100);
  KT_CHECK (p != NULL);
  kame_pool_free (p);
}

KT_TEST (calloc_zeroes_reused_dirty_blocks)
{
  static const size_t sizes[] = { 1, 16, 100, 1000, 4096, 32768, 40000,
                                  UNIT, 3 * MIB, 5 * MIB };
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    {
      size_t n = sizes[i];
      for (int round = 0; round < 3; round++)
        {
          unsigned char *p = kame_pool_malloc (n);
          KT_CHECK (p != NULL);
          memset (p, 0xa5, kame_pool_malloc_usable_size (p));
          kame_pool_free (p);
          unsigned char *q = kame_pool_calloc (1, n);
          KT_CHECK (q != NULL);
          if (!all_zero (q, n))
            KT_FAILF ("calloc (1, %zu) returned dirty memory", n);
          kame_pool_free (q);
          q = kame_pool_calloc (n, 1);
          KT_CHECK (q != NULL);
          if (!all_zero (q, n))
            KT_FAILF ("calloc (%zu, 1) returned dirty memory", n);
          kame_pool_free (q);
        }
    }
}

KT_TEST (calloc_overflow_fails_with_enomem)
{
  const size_t half = size_max / 2 + 1;
  const size_t pairs[][2] = {
    { half, 2 }, { 2, half }, { (size_t) 1 << 32, (size_t) 1 << 32 },
    { size_max, size_max }, { size_max, 2 }, { 65537, size_max / 65536 }
  };
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
    {
      errno = 0;
      void *p = kame_pool_calloc (pairs[i][0], pairs[i][1]);
      if (p != NULL)
        KT_FAILF ("calloc (%zu, %zu) returned %p", pairs[i][0], pairs[i][1],
                  p);
      KT_CHECK_EQ (errno, ENOMEM);
    }
}

KT_TEST (calloc_zero_returns_unique_pointers)
{
  void *a = kame_pool_calloc (0, 5);
  void *b = kame_pool_calloc (5, 0);
  void *c = kame_pool_calloc (0, 0);
  void *d = kame_pool_calloc (0, size_max);
  KT_CHECK (a != NULL && b != NULL && c != NULL && d != NULL);
  KT_CHECK (a != b && a != c && b != c && d != a && d != b && d != c);
  KT_CHECK_EQ (kame_pool_malloc_usable_size (a), 16);
  kame_pool_free (a);
  kame_pool_free (b);
  kame_pool_free (c);
  kame_pool_free (d);
}

KT_TEST (realloc_null_acts_as_malloc)
{
  static const size_t sizes[] = { 0, 1, 100, 5000, 40000, MIB, 5 * MIB };
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    {
      errno = EDOM;
      void *p = kame_pool_realloc (NULL, sizes[i]);
      KT_CHECK (p != NULL);
      KT_CHECK_EQ (errno, EDOM);
      KT_CHECK_EQ (kame_pool_malloc_usable_size (p),
                   kt_usable_for (sizes[i]));
      kame_pool_free (p);
    }
}

/* The block is really released: a dedicated chunk's bytes leave the
   statistics, and a large mapping leaves the count.  */
KT_TEST (realloc_to_zero_frees_and_returns_null)
{
  kame_pool_stats_t before = kt_pool_stats ();
  void *p = kame_pool_malloc (300 * KIB);
  KT_CHECK (p != NULL);
  KT_CHECK_EQ (kt_pool_stats ().dedicated_chunk_bytes,
               before.dedicated_chunk_bytes + 2 * UNIT);
  errno = EDOM;
  KT_CHECK (kame_pool_realloc (p, 0) == NULL);
  KT_CHECK_EQ (errno, EDOM);
  KT_CHECK_EQ (kt_pool_stats ().dedicated_chunk_bytes,
               before.dedicated_chunk_bytes);

  p = kame_pool_malloc (6 * MIB);
  KT_CHECK (p != NULL);
  KT_CHECK_EQ (kt_pool_stats ().large_alloc_count, before.large_alloc_count + 1);
  KT_CHECK (kame_pool_realloc (p, 0) == NULL);
  KT_CHECK_EQ (kt_pool_stats ().large_alloc_count, before.large_alloc_count);

  p = kame_pool_malloc (50);
  KT_CHECK (p != NULL);
  KT_CHECK (kame_pool_realloc (p, 0) == NULL);
}

KT_TEST (realloc_shrink_stays_in_place)
{
  static const size_t pairs[][2] = {
    { 1000, 10 }, { 1000, 1 }, { 32768, 16 }, { 100 * KIB, 100 },
    { 3 * MIB, 300 * KIB }, { 3 * MIB, 1 }, { 8 * MIB, 5 * MIB },
    { 8 * MIB, 10 }
  };
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
    {
      size_t from = pairs[i][0], to = pairs[i][1];
      void *p = kame_pool_malloc (from);
      KT_CHECK (p != NULL);
      kt_paint (p, to, (unsigned) i);
      void *q = kame_pool_realloc (p, to);
      if (q != p)
        KT_FAILF ("realloc (%zu -> %zu) moved %p to %p", from, to, p, q);
      KT_CHECK (kt_painted (q, to, (unsigned) i));
      KT_CHECK (kame_pool_malloc_usable_size (q) >= to);
      kame_pool_free (q);
    }
}

KT_TEST (realloc_grow_within_usable_stays_in_place)
{
  const size_t pairs[][2] = {
    { 1000, 1024 }, { 1, 16 }, { 370, 384 }, { 20000, 20544 },
    { 100 * KIB, 104448 }, { 33 * KIB, 34816 }, { 300 * KIB, 2 * UNIT },
    { MIB + 1, 5 * UNIT }, { 5 * MIB + 1, 5 * MIB + KT_PAGE }
  };
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
    {
      size_t from = pairs[i][0], to = pairs[i][1];
      void *p = kame_pool_malloc (from);
      KT_CHECK (p != NULL);
      KT_CHECK (kame_pool_malloc_usable_size (p) >= to);
      kt_paint (p, from, (unsigned) i);
      void *q = kame_pool_realloc (p, to);
      if (q != p)
        KT_FAILF ("realloc (%zu -> %zu) moved %p to %p", from, to, p, q);
      KT_CHECK (kt_painted (q, from, (unsigned) i));
      kame_pool_free (q);
    }
}

/* Growing past the usable size gives a new block of the new size's
   tier with the old bytes, and the old block is released (visible for
   dedicated chunks and mappings in the statistics).  */
KT_TEST (realloc_grow_beyond_usable_moves_copies_and_frees)
{
  static const size_t steps[] = {
    1, 17, 100, 200, 5000, 40000, 300 * KIB, 3 * MIB, 10 * MIB, 40 * MIB
  };
  kame_pool_stats_t base = kt_pool_stats ();
  size_t n = steps[0];
  unsigned char *p = kame_pool_malloc (n);
  KT_CHECK (p != NULL);
  kt_paint (p, n, 9);
  for (size_t i = 1; i < sizeof steps / sizeof steps[0]; i++)
    {
      size_t to = steps[i];
      KT_CHECK (kame_pool_malloc_usable_size (p) < to);
      unsigned char *q = kame_pool_realloc (p, to);
      KT_CHECK (q != NULL);
      if (!kt_painted (q, n, 9))
        KT_FAILF ("realloc (%zu -> %zu) lost the contents", n, to);
      KT_CHECK_EQ (kame_pool_malloc_usable_size (q), kt_usable_for (to));
      kame_pool_stats_t s = kt_pool_stats ();
      size_t ded = to > KT_SMALL_MAX && to <= 4 * MIB ? kt_usable_for (to) : 0;
      KT_CHECK_EQ (s.dedicated_chunk_bytes - base.dedicated_chunk_bytes, ded);
      KT_CHECK_EQ (s.large_alloc_count - base.large_alloc_count,
                   to > 4 * MIB ? 1 : 0);
      kt_paint (q, to, 9);
      p = q;
      n = to;
    }
  kame_pool_free (p);
  kame_pool_stats_t s = kt_pool_stats ();
  KT_CHECK_EQ (s.large_alloc_count, base.large_alloc_count);
  KT_CHECK_EQ (s.dedicated_chunk_bytes, base.dedicated_chunk_bytes);
}

KT_TEST (realloc_failure_returns_null_and_keeps_the_block)
{
  static const size_t sizes[] = { 100, 50000, 5 * MIB };
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    {
      size_t n = sizes[i];
      void *p = kame_pool_malloc (n);
      KT_CHECK (p != NULL);
      kt_paint (p, n, 3);
      const size_t bad[] = { size_max, ptrdiff_max + 1, (size_t) 1 << 50 };
      for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        {
          errno = 0;
          void *q = kame_pool_realloc (p, bad[k]);
          if (q != NULL)
            KT_FAILF ("realloc (%zu -> %zu) returned %p", n, bad[k], q);
          KT_CHECK_EQ (errno, ENOMEM);
          KT_CHECK (kt_painted (p, n, 3));
          KT_CHECK_EQ (kame_pool_malloc_usable_size (p), kt_usable_for (n));
        }
      kame_pool_free (p);
    }
}

KT_TEST (free_null_does_nothing)
{
  kame_pool_stats_t before = kt_pool_stats ();
  errno = EDOM;
  for (int i = 0; i < 1000; i++)
    kame_pool_free (NULL);
  KT_CHECK_EQ (errno, EDOM);
  kame_pool_stats_t after = kt_pool_stats ();
  KT_CHECK_EQ (after.chunks_live, before.chunks_live);
  KT_CHECK_EQ (after.units_live, before.units_live);
}

/* Freed small blocks are reused: a long malloc/free loop on one size
   stays in one chunk instead of claiming new ones.  */
KT_TEST (freed_blocks_are_reused)
{
  void *first = kame_pool_malloc (208);
  KT_CHECK (first != NULL);
  kame_pool_stats_t before = kt_pool_stats ();
  for (int i = 0; i < 100000; i++)
    {
      void *p = kame_pool_malloc (200);
      KT_CHECK (p != NULL);
      kame_pool_free (p);
    }
  kame_pool_stats_t after = kt_pool_stats ();
  KT_CHECK_EQ (after.chunks_live, before.chunks_live);
  KT_CHECK_EQ (after.units_live, before.units_live);
  kame_pool_free (first);
}

/* The owner's free into a chunk it filled hands that block out next:
   the chunk becomes the class's active one (its line is still in the
   cache).  32 blocks of 8 KiB fill one unit; the 33rd opens a second
   chunk, whose next block comes once the first is dry again.  */
KT_TEST (a_free_into_a_full_chunk_is_the_next_block_handed_out)
{
  enum { PER_CHUNK = 32, N = PER_CHUNK + 1 };
  char *p[N];
  for (int i = 0; i < N; i++)
    {
      p[i] = kame_pool_malloc (8 * KIB);
      KT_CHECK (p[i] != NULL);
    }
  for (int i = 1; i < PER_CHUNK; i++)
    KT_CHECK_EQ ((uintptr_t) p[i] / UNIT, (uintptr_t) p[0] / UNIT);
  KT_CHECK ((uintptr_t) p[PER_CHUNK] / UNIT != (uintptr_t) p[0] / UNIT);
  kame_pool_free (p[5]);
  char *q = kame_pool_malloc (8 * KIB);
  KT_CHECK_EQ ((uintptr_t) q, (uintptr_t) p[5]);
  char *r = kame_pool_malloc (8 * KIB);
  KT_CHECK_EQ ((uintptr_t) r, (uintptr_t) (p[PER_CHUNK] + 8 * KIB));
  kame_pool_free (q);
  kame_pool_free (r);
  for (int i = 0; i < N; i++)
    if (i != 5)
      kame_pool_free (p[i]);
}

/* A list of 8 KiB blocks freed in the order it was allocated: each
   free into a full chunk makes that chunk the active one, and the
   chunk it replaces, which the frees before it emptied, goes back to
   its region.  Only the last chunk, the active one, stays.  (Before,
   every such chunk waited on the partial list for the next refill of
   its class: under redis, the 8 KiB nodes of a list emptied by LPOP
   left 60 MB of empty chunks behind.)  */
KT_TEST (a_list_freed_in_order_keeps_only_the_active_chunk)
{
  enum { PER_CHUNK = 32, CHUNKS = 8 };  /* 8 KiB blocks, one unit */
  static void *b[PER_CHUNK * CHUNKS];
  /* The block of a shared class the C library's start-up freed waits
     in this thread's slot, which a decay pass among the mallocs below
     may give back with its chunk: the trim does it before the
     counts.  */
  kame_pool_trim (0);
  kame_pool_stats_t s0 = kt_pool_stats ();
  for (size_t i = 0; i < PER_CHUNK * CHUNKS; i++)
    KT_CHECK ((b[i] = kame_pool_malloc (8192)) != NULL);
  kame_pool_stats_t s1 = kt_pool_stats ();
  KT_CHECK (s1.chunks_live - s0.chunks_live >= CHUNKS);
  for (size_t i = 0; i < PER_CHUNK * CHUNKS; i++)
    kame_pool_free (b[i]);
  kame_pool_stats_t s2 = kt_pool_stats ();
  KT_CHECK (s2.chunks_live <= s0.chunks_live + 1);
}

/* The classes between 4 KiB and 32 KiB that are not powers of two are
   odd multiples of 64 bytes (64 more than a multiple of 128), so that
   their blocks' first lines fall at different offsets in a page (and
   so in different sets of the caches): 32 blocks of a class nobody
   used yet, all in its first chunk, start at 32 different line
   offsets.  One exception, 4368 (a page and the 272 bytes of header
   of sqlite's page cache entries, a multiple of 16): its 32 first
   blocks start at 20 line offsets, as many as the offsets of
   K * 4368 modulo a page give.  The powers of two keep their natural
   alignment: every block starts a page.  */
KT_TEST (blocks_from_4_to_32_kib_start_at_many_line_offsets_in_a_page)
{
  enum { N = 32 };
  for (size_t c = 0; c < KT_NCLASSES; c++)
    {
      size_t size = kt_classes[c];
      if (size <= 4096 || size > 32768)
        continue;
      bool pow2 = (size & (size - 1)) == 0;
      if (!pow2 && size % 128 != 64 && size != 4368)
        KT_FAILF ("class %zu is not an odd multiple of 64 bytes", size);
      size_t want = pow2 ? 1 : size == 4368 ? 20 : N;
      void *p[N];
      bool seen[64] = { false };
      size_t offsets = 0;
      for (size_t i = 0; i < N; i++)
        {
          p[i] = kame_pool_malloc (size);
          KT_CHECK (p[i] != NULL);
          KT_CHECK_EQ (kame_pool_malloc_usable_size (p[i]), size);
          size_t line = ((uintptr_t) p[i] & 4095) >> 6;
          if (!seen[line])
            offsets++;
          seen[line] = true;
        }
      if (offsets != want || (pow2 && !seen[0]))
        KT_FAILF ("%zu blocks of class %zu start at %zu line offsets in "
                  "their pages", (size_t) N, size, offsets);
      for (size_t i = 0; i < N; i++)
        kame_pool_free (p[i]);
    }
}

KT_MAIN (KT_CASE (malloc_zero_returns_unique_pointers),
         KT_CASE (every_size_is_16_byte_aligned_with_its_class_usable_size),
         KT_CASE (usable_size_at_every_class_boundary),
         KT_CASE (dedicated_sizes_are_whole_units_and_unit_aligned),
         KT_CASE (large_sizes_are_page_rounded_one_page_into_a_mapping),
         KT_CASE (successful_calls_leave_errno_unchanged),
         KT_CASE (huge_sizes_fail_with_enomem),
         KT_CASE (calloc_zeroes_reused_dirty_blocks),
         KT_CASE (calloc_overflow_fails_with_enomem),
         KT_CASE (calloc_zero_returns_unique_pointers),
         KT_CASE (realloc_null_acts_as_malloc),
         KT_CASE (realloc_to_zero_frees_and_returns_null),
         KT_CASE (realloc_shrink_stays_in_place),
         KT_CASE (realloc_grow_within_usable_stays_in_place),
         KT_CASE (realloc_grow_beyond_usable_moves_copies_and_frees),
         KT_CASE (realloc_failure_returns_null_and_keeps_the_block),
         KT_CASE (free_null_does_nothing),
         KT_CASE (freed_blocks_are_reused),
         KT_CASE (a_free_into_a_full_chunk_is_the_next_block_handed_out),
         KT_CASE (a_list_freed_in_order_keeps_only_the_active_chunk),
         KT_CASE (blocks_from_4_to_32_kib_start_at_many_line_offsets_in_a_page))
