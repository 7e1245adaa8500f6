/* tiers.c -- kamepool.large tests of the large tiers and their
   recycle cache: full-span integrity up to 256 MiB, live blocks that
   never overlap, a double free of a cached block, no over-serving
   after a huge free, cache reuse, cap tightening, statistics that step
   by exactly one allocation, RSS that drops after large frees, and
   realloc growing a mapping in place when the space after it is free
   and moving it when it is not.  Misuse is reported and ignored here
   (the default, abort, is tested in kamepool.misuse).
   kptest-env: KAME_POOL_ON_MISUSE=report

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

/* kptest-timeout: 600 */

#define _GNU_SOURCE 1

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>

#include "kame_pool.h"
#include "kptest.h"
#include "kptest-pool.h"

#define KiB ((size_t) 1 << 10)
#define MiB ((size_t) 1 << 20)
#define UNIT (256 * KiB)

/* Start with an empty cache (the C library may have freed a large
   block already) and a cap of CAP.  */
static void
empty_cache (size_t cap)
{
  kame_pool_free (kame_pool_malloc (1));
  kame_pool_set_large_cache_cap (0);
  kame_pool_set_large_cache_cap (cap);
}

static inline unsigned char
paint_byte (const void *base, size_t i)
{
  return (unsigned char) ((i * 2654435761u + (uintptr_t) base) >> 7);
}

/* Paint every byte of [P, P + N), or one byte in every 64 beyond
   64 MiB to keep the run short; then check.  */
static bool
paint_and_check (unsigned char *p, size_t n)
{
  if (n == 0)
    return false;
  size_t step = n > 64 * MiB ? 64 : 1;
  for (size_t i = 0; i < n; i += step)
    p[i] = paint_byte (p, i);
  p[n - 1] = paint_byte (p, n - 1);
  for (size_t i = 0; i < n; i += step)
    if (p[i] != paint_byte (p, i))
      {
        printf ("%p: byte %zu of %zu changed\n", (void *) p, i, n);
        return false;
      }
  return p[n - 1] == paint_byte (p, n - 1);
}

/* The usable size of a mapping of its own for N bytes: the block is
   one page into the mapping, which is rounded to pages.  */
static size_t
mapping_usable (size_t n)
{
  return (KT_PAGE + n + KT_PAGE - 1) / KT_PAGE * KT_PAGE - KT_PAGE;
}

/* The bytes a freed block of N bytes adds to cache_bytes: its chunk's
   units, or its mapping with the header page.  */
static size_t
cached_for (size_t n)
{
  return n <= 4 * MiB ? kt_usable_for (n) : kt_usable_for (n) + KT_PAGE;
}

static const size_t span_sizes[] = {
  32 * KiB + 1, 40 * KiB, 255 * KiB, 256 * KiB + 1, MiB, 4 * MiB - 1,
  4 * MiB, 4 * MiB + 1, 5 * MiB, 31 * MiB, 32 * MiB - 4 * KiB, 32 * MiB,
  33 * MiB, 64 * MiB, 100 * MiB + 3, 256 * MiB
};
#define NSPAN (sizeof span_sizes / sizeof span_sizes[0])

/* Every block, from a mid class to 256 MiB, has the usable size of its
   tier and, painted over all of it, keeps its bytes while the others
   are painted.  The cache is emptied first, so that no cached mapping
   serves a request whole.  */
KT_TEST (large_blocks_keep_every_byte_of_their_exact_usable_size)
{
  empty_cache (128 * MiB);
  unsigned char *p[NSPAN];
  for (size_t i = 0; i < NSPAN; i++)
    {
      p[i] = kame_pool_malloc (span_sizes[i]);
      KT_CHECK (p[i] != NULL);
      size_t usable = kame_pool_malloc_usable_size (p[i]);
      KT_CHECK_EQ (usable, kt_usable_for (span_sizes[i]));
      KT_CHECK (paint_and_check (p[i], usable));
    }
  for (size_t i = 0; i < NSPAN; i++)
    {
      size_t usable = kame_pool_malloc_usable_size (p[i]);
      size_t step = usable > 64 * MiB ? 64 : 1;
      for (size_t k = 0; k < usable; k += step)
        if (p[i][k] != paint_byte (p[i], k))
          KT_FAILF ("block %zu byte %zu overwritten", i, k);
      kame_pool_free (p[i]);
    }
}

/* Live blocks of every tier never overlap, round after round, and each
   has the usable size of its tier.  A round frees more than the cap
   with no large allocation in between, a free streak that empties the
   cache, so no block of the next round is a cached mapping taken
   whole.  */
KT_TEST (large_live_blocks_never_overlap)
{
  enum { N = 48 };
  empty_cache (128 * MiB);
  unsigned char *p[N];
  size_t u[N];
  for (int round = 0; round < 3; round++)
    {
      for (int i = 0; i < N; i++)
        {
          size_t n = (i % 3 == 0 ? 5 * MiB + (size_t) i * 300 * KiB
                      : 33 * KiB + (size_t) i * 80 * KiB);
          p[i] = kame_pool_malloc (n);
          KT_CHECK (p[i] != NULL);
          u[i] = kame_pool_malloc_usable_size (p[i]);
          KT_CHECK_EQ (u[i], kt_usable_for (n));
          p[i][0] = (unsigned char) i;
          p[i][u[i] - 1] = (unsigned char) i;
        }
      for (int i = 0; i < N; i++)
        for (int k = i + 1; k < N; k++)
          if (p[i] < p[k] + u[k] && p[k] < p[i] + u[i])
            KT_FAILF ("blocks %d and %d overlap", i, k);
      for (int i = 0; i < N; i++)
        {
          KT_CHECK (p[i][0] == i && p[i][u[i] - 1] == i);
          /* Free every other one, then the rest: another order each
             round.  */
          if ((i + round) % 2 == 0)
            kame_pool_free (p[i]);
        }
      for (int i = 0; i < N; i++)
        if ((i + round) % 2 != 0)
          kame_pool_free (p[i]);
      KT_CHECK_EQ (kt_pool_stats ().cache_bytes, 0);
    }
}

/* Run FN with stderr in a file; what it wrote, in BUF.  */
static bool
capture_stderr (void (*fn) (void *), void *arg, char *buf, size_t size)
{
  char path[] = "/tmp/kptest-large-XXXXXX";
  int fd = mkstemp (path);
  if (fd < 0)
    return false;
  unlink (path);
  fflush (stderr);
  int saved = dup (2);
  dup2 (fd, 2);
  fn (arg);
  fflush (stderr);
  dup2 (saved, 2);
  close (saved);
  ssize_t n = pread (fd, buf, size - 1, 0);
  close (fd);
  buf[n > 0 ? n : 0] = '\0';
  return true;
}

static void
free_it (void *p)
{
  kame_pool_free (p);
}

/* A second free of a block the cache holds is reported, and the cache
   still hands the block out once only.  */
KT_TEST (large_double_free_cached)
{
  empty_cache (64 * MiB);
  static const size_t sizes[] = { 240 * KiB, MiB, 4 * MiB, 5 * MiB,
                                  20 * MiB };
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    {
      kame_pool_free (kame_pool_malloc (1));
      size_t before = kt_pool_stats ().cache_bytes;
      void *p = kame_pool_malloc (sizes[i]);
      KT_CHECK (p != NULL);
      kame_pool_free (p);
      KT_CHECK_EQ (kt_pool_stats ().cache_bytes,
                   before + cached_for (sizes[i]));
      char err[256];
      KT_CHECK (capture_stderr (free_it, p, err, sizeof err));
      if (strstr (err, "kamepool: free(): double free of") == NULL)
        KT_FAILF ("double free of a %zu-byte block: stderr \"%.200s\"",
                  sizes[i], err);
      KT_CHECK_EQ (kame_pool_malloc_usable_size (p), 0);
      void *q = kame_pool_malloc (sizes[i]);
      void *r = kame_pool_malloc (sizes[i]);
      KT_CHECK_PTR_EQ (q, p);
      KT_CHECK (r != NULL && r != q);
      KT_CHECK_EQ (kt_pool_stats ().cache_bytes, before);
      kame_pool_free (r);
      kame_pool_free (q);
      kame_pool_set_large_cache_cap (0);
      KT_CHECK_EQ (kt_pool_stats ().cache_bytes, 0);
      kame_pool_set_large_cache_cap (64 * MiB);
    }
}

/* A huge block (above 32 MiB) is cached only for a request of exactly
   its size; a cached mapping of up to 32 MiB serves any smaller
   mapping request whole, and a cached dedicated chunk serves a smaller
   request only once cut down to its size.  */
KT_TEST (large_cache_reuses_huge_blocks_only_at_their_size_and_cuts_chunks)
{
  empty_cache (256 * MiB);
  KT_CHECK_EQ (kt_pool_stats ().cache_bytes, 0);
  void *h = kame_pool_malloc (64 * MiB);
  KT_CHECK (h != NULL);
  size_t huge_map = kame_pool_malloc_usable_size (h) + KT_PAGE;
  KT_CHECK_EQ (huge_map, 64 * MiB + KT_PAGE);
  kame_pool_free (h);
  KT_CHECK_EQ (kt_pool_stats ().cache_bytes, huge_map);
  KT_CHECK_EQ (kt_pool_stats ().large_alloc_count, 0);
  void *q = kame_pool_malloc (8 * MiB);
  KT_CHECK (q != NULL);
  KT_CHECK_EQ (kame_pool_malloc_usable_size (q), 8 * MiB);
  KT_CHECK_EQ (kt_pool_stats ().cache_bytes, huge_map);
  kame_pool_free (q);
  void *q2 = kame_pool_malloc (48 * MiB);
  KT_CHECK (q2 != NULL && q2 != h);
  KT_CHECK_EQ (kame_pool_malloc_usable_size (q2), 48 * MiB);
  kame_pool_free (q2);
  void *h2 = kame_pool_malloc (64 * MiB);
  KT_CHECK_PTR_EQ (h2, h);
  kame_pool_free (h2);
  /* Nor is a huge block served to a mapping's request within twice
     its size.  */
  void *g = kame_pool_malloc (40 * MiB);
  KT_CHECK (g != NULL);
  kame_pool_free (g);
  void *l = kame_pool_malloc (24 * MiB);
  KT_CHECK (l != NULL && l != g);
  KT_CHECK_EQ (kame_pool_malloc_usable_size (l), 24 * MiB);
  kame_pool_free (l);
  kame_pool_set_large_cache_cap (0);
  KT_CHECK_EQ (kt_pool_stats ().cache_bytes, 0);
  kame_pool_set_large_cache_cap (256 * MiB);
  /* Now a 30 MiB mapping in the cache: a 5 MiB request takes it
     whole, with its resident pages, rather than cut it down.  */
  void *b = kame_pool_malloc (30 * MiB);
  KT_CHECK (b != NULL);
  kame_pool_free (b);
  kame_pool_stats_t before = kt_pool_stats ();
  KT_CHECK_EQ (before.cache_bytes, 30 * MiB + KT_PAGE);
  void *s = kame_pool_malloc (5 * MiB);
  KT_CHECK_PTR_EQ (s, b);
  size_t map = kame_pool_malloc_usable_size (s) + KT_PAGE;
  KT_CHECK_EQ (map, 30 * MiB + KT_PAGE);
  kame_pool_stats_t after = kt_pool_stats ();
  KT_CHECK_EQ (after.large_alloc_bytes, before.large_alloc_bytes + map);
  KT_CHECK_EQ (after.cache_bytes, 0);
  /* Nor a dedicated chunk of 16 units for a request of 1 unit.  */
  void *d = kame_pool_malloc (4 * MiB);
  kame_pool_free (d);
  before = kt_pool_stats ();
  void *e = kame_pool_malloc (240 * KiB);
  KT_CHECK_EQ (kame_pool_malloc_usable_size (e), UNIT);
  after = kt_pool_stats ();
  KT_CHECK_EQ (after.dedicated_chunk_bytes,
               before.dedicated_chunk_bytes + UNIT);
  /* Cut from the front of the cached chunk, whose other 15 units stay
     cached.  */
  KT_CHECK_PTR_EQ (e, d);
  KT_CHECK_EQ (after.cache_bytes, before.cache_bytes - UNIT);
  KT_CHECK_EQ (after.units_live, before.units_live + 1);
  kame_pool_free (e);
  kame_pool_free (s);
  kame_pool_set_large_cache_cap (0);
  KT_CHECK_EQ (kt_pool_stats ().cache_bytes, 0);
}

/* The statistics step by exactly one allocation: a dedicated chunk
   moves between dedicated_chunk_bytes and cache_bytes, a mapping
   between large_alloc_* and cache_bytes.  */
KT_TEST (large_stats_move_each_block_between_live_and_cached_bytes)
{
  empty_cache (64 * MiB);
  kame_pool_stats_t s0 = kt_pool_stats ();
  void *d = kame_pool_malloc (300 * KiB);        /* 2 units */
  kame_pool_stats_t s1 = kt_pool_stats ();
  KT_CHECK_EQ (s1.dedicated_chunk_bytes, s0.dedicated_chunk_bytes + 2 * UNIT);
  KT_CHECK_EQ (s1.chunks_live, s0.chunks_live + 1);
  KT_CHECK_EQ (s1.units_live, s0.units_live + 2);
  KT_CHECK_EQ (s1.cache_bytes, s0.cache_bytes);
  kame_pool_free (d);
  kame_pool_stats_t s2 = kt_pool_stats ();
  KT_CHECK_EQ (s2.dedicated_chunk_bytes, s0.dedicated_chunk_bytes);
  KT_CHECK_EQ (s2.chunks_live, s0.chunks_live);
  KT_CHECK_EQ (s2.units_live, s0.units_live);
  KT_CHECK_EQ (s2.cache_bytes, s0.cache_bytes + 2 * UNIT);
  void *d2 = kame_pool_malloc (400 * KiB);
  KT_CHECK_PTR_EQ (d2, d);
  kame_pool_stats_t s3 = kt_pool_stats ();
  KT_CHECK_EQ (s3.dedicated_chunk_bytes, s1.dedicated_chunk_bytes);
  KT_CHECK_EQ (s3.cache_bytes, s0.cache_bytes);

  void *m = kame_pool_malloc (5 * MiB);
  size_t map = kame_pool_malloc_usable_size (m) + KT_PAGE;
  kame_pool_stats_t s4 = kt_pool_stats ();
  KT_CHECK_EQ (s4.large_alloc_count, s3.large_alloc_count + 1);
  KT_CHECK_EQ (s4.large_alloc_bytes, s3.large_alloc_bytes + map);
  kame_pool_free (m);
  kame_pool_stats_t s5 = kt_pool_stats ();
  KT_CHECK_EQ (s5.large_alloc_count, s3.large_alloc_count);
  KT_CHECK_EQ (s5.large_alloc_bytes, s3.large_alloc_bytes);
  KT_CHECK_EQ (s5.cache_bytes, s3.cache_bytes + map);
  void *m2 = kame_pool_malloc (5 * MiB);
  KT_CHECK_PTR_EQ (m2, m);
  kame_pool_stats_t s6 = kt_pool_stats ();
  KT_CHECK_EQ (s6.large_alloc_count, s4.large_alloc_count);
  KT_CHECK_EQ (s6.large_alloc_bytes, s4.large_alloc_bytes);
  KT_CHECK_EQ (s6.cache_bytes, s3.cache_bytes);
  kame_pool_free (m2);
  kame_pool_free (d2);
  kame_pool_set_large_cache_cap (0);
  kame_pool_stats_t s7 = kt_pool_stats ();
  KT_CHECK_EQ (s7.cache_bytes, 0);
  KT_CHECK_EQ (s7.dedicated_chunk_bytes, s0.dedicated_chunk_bytes);
  KT_CHECK_EQ (s7.units_live, s0.units_live);
  KT_CHECK_EQ (s7.large_alloc_count, s0.large_alloc_count);
}

/* Reuse and the cap: blocks come back from the cache; a lower cap
   evicts at once; a block bigger than the cap is not kept.  The
   thread's first level keeps the last 4 blocks freed; the two chunks
   it lets go stay resident as free units, and come back too.  */
KT_TEST (large_cache_reuses_blocks_and_evicts_down_to_a_lowered_cap)
{
  KT_CHECK_EQ (kame_pool_get_large_cache_cap (), 128 * MiB);
  empty_cache (64 * MiB);
  void *p[6], *got[6];
  for (int i = 0; i < 6; i++)
    p[i] = kame_pool_malloc (i < 4 ? 4 * MiB : 6 * MiB);
  for (int i = 0; i < 6; i++)
    kame_pool_free (p[i]);
  size_t full = kt_pool_stats ().cache_bytes;
  KT_CHECK_EQ (full, 2 * 4 * MiB + 2 * (6 * MiB + KT_PAGE));
  for (int i = 5; i >= 0; i--)
    {
      void *q = kame_pool_malloc (i < 4 ? 4 * MiB : 6 * MiB);
      bool cached = false;
      for (int k = 0; k < 6; k++)
        cached |= q == p[k];
      KT_CHECK (cached);
      got[i] = q;
    }
  KT_CHECK_EQ (kt_pool_stats ().cache_bytes, 0);
  for (int i = 0; i < 6; i++)
    kame_pool_free (got[i]);
  KT_CHECK_EQ (kt_pool_stats ().cache_bytes, full);
  /* The first level holds, oldest first, 4 MiB, 4 MiB, 6 MiB and a
     page, 6 MiB and a page; a lower cap evicts oldest first, so under
     10 MiB only the newest mapping stays, and under 2 MiB nothing.  */
  kame_pool_set_large_cache_cap (10 * MiB);
  KT_CHECK_EQ (kame_pool_get_large_cache_cap (), 10 * MiB);
  KT_CHECK_EQ (kt_pool_stats ().cache_bytes, 6 * MiB + KT_PAGE);
  kame_pool_set_large_cache_cap (2 * MiB);
  KT_CHECK_EQ (kt_pool_stats ().cache_bytes, 0);
  void *big = kame_pool_malloc (3 * MiB);
  size_t before = kt_pool_stats ().cache_bytes;
  kame_pool_free (big);
  KT_CHECK_EQ (kt_pool_stats ().cache_bytes, before);
  kame_pool_set_large_cache_cap (0);
  KT_CHECK_EQ (kame_pool_get_large_cache_cap (), 0);
  KT_CHECK_EQ (kt_pool_stats ().cache_bytes, 0);
  void *small = kame_pool_malloc (40 * KiB);
  kame_pool_free (small);
  KT_CHECK_EQ (kt_pool_stats ().cache_bytes, 0);
  kame_pool_set_large_cache_cap (64 * MiB);
}

static size_t
rss_bytes (void)
{
  return kt_proc_status_kib ("VmRSS") * KiB;
}

/* Touch 256 MiB of large blocks of each tier, free them: the RSS comes
   back to within a tenth of the working set of where it was (freeing
   more than the cache cap with no allocation in between drains the
   cache and returns the free units' pages).  */
KT_TEST (large_rss_comes_back_down_after_256_mib_is_freed)
{
#ifdef __SANITIZE_THREAD__
  /* The sanitizer's shadow memory grows with every byte touched and is
     part of the RSS this test reads.  */
  KT_UNSUPPORTED ("ThreadSanitizer's shadow memory counts in the RSS");
#endif
#ifdef __SANITIZE_ADDRESS__
  /* Every store into the blocks reads the shadow byte of its address:
     256 MiB touched reads 32 MiB of shadow, which stays mapped and
     counts in the RSS (seen with Debian 12's kernel and gcc 12).  */
  KT_UNSUPPORTED ("AddressSanitizer's shadow reads count in the RSS");
#endif
  static const size_t sizes[] = { 4 * MiB, 8 * MiB, 256 * KiB, 40 * MiB };
  kame_pool_free (kame_pool_malloc (1));
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
    {
      size_t n = 256 * MiB / sizes[k];
      static void *p[1024];
      size_t before = rss_bytes ();
      KT_CHECK (before != 0);
      for (size_t i = 0; i < n; i++)
        {
          p[i] = kame_pool_malloc (sizes[k]);
          KT_CHECK (p[i] != NULL);
          memset (p[i], 1, sizes[k]);
        }
      size_t peak = rss_bytes ();
      for (size_t i = 0; i < n; i++)
        kame_pool_free (p[i]);
      size_t after = rss_bytes ();
      printf ("%zu x %zu KiB: RSS %zu MiB, %zu MiB, %zu MiB\n", n,
              sizes[k] / KiB, before / MiB, peak / MiB, after / MiB);
      /* Here and below, bounds rather than values: what is resident is
         up to the kernel (huge pages, page tables, the C library's own
         pages).  */
      KT_CHECK (peak >= before + n * sizes[k] / 2);
      KT_CHECK (after <= before + n * sizes[k] / 10);
      kame_pool_set_large_cache_cap (0);
      size_t drained = rss_bytes ();
      KT_CHECK (drained <= before + 8 * MiB + 16 * MiB);
      kame_pool_set_large_cache_cap (64 * MiB);
    }
}

/* Map the LEN bytes at AT, which must be free, or return NULL.  */
static void *
map_exactly (void *at, size_t len)
{
#ifdef MAP_FIXED_NOREPLACE
  void *q = mmap (at, len, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (q == MAP_FAILED)
    return NULL;
  if (q != at)
    {
      /* A kernel older than 4.17 takes the address as a hint.  */
      munmap (q, len);
      return NULL;
    }
  return q;
#else
  (void) at;
  (void) len;
  return NULL;
#endif
}

/* realloc grows a mapping where it lies (mremap without a move) when
   the address space after it is free.  The layout is made known: with
   the cache off, a 30 MiB mapping is freed, so its pages are unmapped
   and its address is the next mapping's hint; the 5 MiB block takes
   it, and the rest of the 30 MiB is free after it.  Every one of 20
   grows, up to 25 MiB, then stays in place, and the statistics grow
   by exactly the pages added.  */
KT_TEST (large_realloc_grows_mapping_in_place_into_free_space)
{
  empty_cache (0);
  unsigned char *x = kame_pool_malloc (30 * MiB);
  KT_CHECK (x != NULL);
  kame_pool_free (x);
  KT_CHECK_EQ (kt_pool_stats ().cache_bytes, 0);
  unsigned char *p = kame_pool_malloc (5 * MiB);
  KT_CHECK_PTR_EQ (p, x);
  size_t usable = kame_pool_malloc_usable_size (p);
  KT_CHECK_EQ (usable, mapping_usable (5 * MiB));
  /* Nothing lies between the block and the end of X's mapping.  */
  size_t tail = 30 * MiB - usable;
  void *probe = map_exactly (p + usable, tail);
  if (probe == NULL)
    KT_FAILF ("the %zu bytes after the block are not free", tail);
  munmap (probe, tail);

  for (size_t i = 0; i < 5 * MiB; i += KT_PAGE)
    p[i] = (unsigned char) (i / KT_PAGE);
  size_t n = 5 * MiB;
  for (int step = 0; step < 20; step++)
    {
      kame_pool_stats_t before = kt_pool_stats ();
      n += MiB + 1000;
      unsigned char *q = kame_pool_realloc (p, n);
      if (q != p)
        KT_FAILF ("grow %d, to %zu bytes, moved the block", step, n);
      size_t grown = kame_pool_malloc_usable_size (q);
      KT_CHECK_EQ (grown, mapping_usable (n));
      kame_pool_stats_t after = kt_pool_stats ();
      KT_CHECK_EQ (after.large_alloc_count, before.large_alloc_count);
      KT_CHECK_EQ (after.large_alloc_bytes,
                   before.large_alloc_bytes + grown - usable);
      usable = grown;
      q[n - 1] = 1;
    }
  for (size_t i = 0; i < 5 * MiB; i += KT_PAGE)
    if (p[i] != (unsigned char) (i / KT_PAGE))
      KT_FAILF ("byte %zu changed", i);
  /* A shrink stays in place.  */
  KT_CHECK_PTR_EQ (kame_pool_realloc (p, 6 * MiB), p);
  kame_pool_free (p);
  kame_pool_set_large_cache_cap (64 * MiB);
}

/* When the page after a mapping is taken, realloc cannot grow it
   where it lies: the block moves, with its contents.  */
KT_TEST (large_realloc_moves_mapping_when_the_next_page_is_taken)
{
  empty_cache (0);
  unsigned char *p = kame_pool_malloc (5 * MiB);
  KT_CHECK (p != NULL);
  size_t usable = kame_pool_malloc_usable_size (p);
  KT_CHECK_EQ (usable, mapping_usable (5 * MiB));
  void *wall = map_exactly (p + usable, KT_PAGE);
  if (wall == NULL)
    KT_FAILF ("the page after the block is not free");
  kt_paint (p, usable, 7);
  unsigned char *q = kame_pool_realloc (p, usable + 1);
  KT_CHECK (q != NULL && q != p);
  KT_CHECK_EQ (kame_pool_malloc_usable_size (q), mapping_usable (usable + 1));
  KT_CHECK (kt_painted (q, usable, 7));
  kame_pool_free (q);
  munmap (wall, KT_PAGE);
  kame_pool_set_large_cache_cap (64 * MiB);
}

/* calloc of a block the cache held gives zeros all the same.  */
KT_TEST (large_calloc_zeroes_a_block_reused_from_the_cache)
{
  empty_cache (64 * MiB);
  static const size_t sizes[] = { 240 * KiB, MiB, 4 * MiB, 5 * MiB,
                                  20 * MiB };
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    {
      unsigned char *p = kame_pool_malloc (sizes[i]);
      KT_CHECK (p != NULL);
      memset (p, 0xa5, sizes[i]);
      kame_pool_free (p);
      unsigned char *q = kame_pool_calloc (1, sizes[i]);
      KT_CHECK_PTR_EQ (q, p);
      for (size_t k = 0; k < sizes[i]; k++)
        if (q[k] != 0)
          KT_FAILF ("byte %zu of %zu not zero", k, sizes[i]);
      kame_pool_free (q);
    }
}

/* A cached mapping smaller than a request, but at least half of it,
   is grown in place (the rest of its 32 MiB slot is free in this
   small process), so only the difference faults in.  */
KT_TEST (large_cached_mapping_of_half_the_request_is_grown_in_place)
{
  empty_cache (64 * MiB);
  unsigned char *p = kame_pool_malloc (5 * MiB);
  KT_CHECK (p != NULL);
  memset (p, 0x5a, 5 * MiB);
  kame_pool_free (p);
  kame_pool_stats_t before = kt_pool_stats ();
  KT_CHECK_EQ (before.cache_bytes, 5 * MiB + KT_PAGE);
  unsigned char *q = kame_pool_malloc (8 * MiB);
  KT_CHECK_PTR_EQ (q, p);
  size_t usable = kame_pool_malloc_usable_size (q);
  KT_CHECK_EQ (usable, mapping_usable (8 * MiB));
  kame_pool_stats_t after = kt_pool_stats ();
  KT_CHECK_EQ (after.cache_bytes + 5 * MiB + KT_PAGE, before.cache_bytes);
  KT_CHECK_EQ (after.large_alloc_bytes,
               before.large_alloc_bytes + usable + KT_PAGE);
  KT_CHECK (paint_and_check (q, usable));
  /* Less than half: a mapping of its own.  */
  kame_pool_free (q);
  unsigned char *r = kame_pool_malloc (20 * MiB);
  KT_CHECK (r != NULL && r != q);
  kame_pool_free (r);
}

/* realloc grows a dedicated chunk where it lies by claiming the free
   units after it: same block, the new units counted as live, usable
   size the whole new run.  When the next unit is taken, the block
   moves, with its contents.  The layout is made known: with the cache
   off (which also gives back every resident free unit), a 4-unit chunk
   A is freed and its units stay resident; a new dedicated chunk takes
   resident units first, so the 2-unit block starts where A did, with
   A's other two units free after it.  */
KT_TEST (large_realloc_grows_dedicated_in_place)
{
  empty_cache (0);
  void *a = kame_pool_malloc (4 * UNIT);
  KT_CHECK (a != NULL);
  kame_pool_free (a);
  unsigned char *p = kame_pool_malloc (300 * KiB);       /* 2 units */
  KT_CHECK_PTR_EQ (p, a);
  KT_CHECK_EQ (kame_pool_malloc_usable_size (p), 2 * UNIT);
  memset (p, 0x5a, 300 * KiB);
  kame_pool_stats_t before = kt_pool_stats ();
  unsigned char *q = kame_pool_realloc (p, 700 * KiB);  /* 3 units */
  KT_CHECK_PTR_EQ (q, p);
  KT_CHECK_EQ (kame_pool_malloc_usable_size (q), 3 * UNIT);
  kame_pool_stats_t after = kt_pool_stats ();
  KT_CHECK_EQ (after.units_live, before.units_live + 1);
  KT_CHECK_EQ (after.chunks_live, before.chunks_live);
  KT_CHECK_EQ (after.dedicated_chunk_bytes, before.dedicated_chunk_bytes + UNIT);
  for (size_t i = 0; i < 300 * KiB; i++)
    if (q[i] != 0x5a)
      KT_FAILF ("byte %zu changed", i);
  memset (q, 0x6b, 700 * KiB);

  /* Now block the unit after it: the next grow must move.  */
  unsigned char *wall = kame_pool_malloc (UNIT);
  KT_CHECK_PTR_EQ (wall, q + 3 * UNIT);
  unsigned char *r = kame_pool_realloc (q, 900 * KiB);   /* 4 units */
  KT_CHECK (r != NULL && r != q);
  KT_CHECK_EQ (kame_pool_malloc_usable_size (r), 4 * UNIT);
  for (size_t i = 0; i < 700 * KiB; i++)
    if (r[i] != 0x6b)
      KT_FAILF ("byte %zu not copied", i);
  kame_pool_free (r);
  kame_pool_free (wall);
  KT_CHECK_EQ (kt_pool_stats ().dedicated_chunk_bytes, 0);
  kame_pool_set_large_cache_cap (64 * MiB);
}

/* The free streak.  80 blocks of 1 MiB (dedicated, 4 units), then 20
   of 5 MiB (mappings), freed in a row by the thread that allocated
   them are a working set torn down: once more than the 64 MiB cap is
   freed the cache is drained and the rest goes back to the kernel, so
   nothing is left cached.  The same blocks allocated by another thread
   and freed here are a pipeline: the cache keeps what it can, the 4
   chunks of the first level (the others stay resident as free units),
   or the 12 mappings of 5 MiB and a page that fit under the cap.  */
enum { STREAK_MAX = 80 };
static void *streak_block[STREAK_MAX];
static size_t streak_size, streak_count;

static void *
streak_alloc (void *arg)
{
  (void) arg;
  for (size_t i = 0; i < streak_count; i++)
    if ((streak_block[i] = kame_pool_malloc (streak_size)) == NULL)
      return "malloc failed";
  return NULL;
}

KT_TEST (large_teardown_drains_the_cache_but_a_pipeline_keeps_it)
{
  const struct { size_t size, count, kept; } run[] = {
    { MiB, 80, 4 * MiB },
    { 5 * MiB, 20, 12 * (5 * MiB + KT_PAGE) },
  };
  for (size_t k = 0; k < sizeof run / sizeof run[0]; k++)
    {
      streak_size = run[k].size;
      streak_count = run[k].count;
      empty_cache (64 * MiB);
      KT_CHECK_EQ (kt_pool_stats ().cache_bytes, 0);
      KT_CHECK (streak_alloc (NULL) == NULL);
      for (size_t i = 0; i < streak_count; i++)
        kame_pool_free (streak_block[i]);
      KT_CHECK_EQ (kt_pool_stats ().cache_bytes, 0);
      KT_CHECK_EQ (kt_pool_stats ().dedicated_chunk_bytes, 0);
      KT_CHECK_EQ (kt_pool_stats ().large_alloc_bytes, 0);

      /* A large allocation of this thread's own ends its streak.  */
      kame_pool_free (kame_pool_malloc (streak_size));
      empty_cache (64 * MiB);
      pthread_t t;
      void *ret;
      KT_CHECK_EQ (pthread_create (&t, NULL, streak_alloc, NULL), 0);
      KT_CHECK_EQ (pthread_join (t, &ret), 0);
      KT_CHECK (ret == NULL);
      for (size_t i = 0; i < streak_count; i++)
        kame_pool_free (streak_block[i]);
      KT_CHECK_EQ (kt_pool_stats ().cache_bytes, run[k].kept);
      kame_pool_set_large_cache_cap (0);
      KT_CHECK_EQ (kt_pool_stats ().cache_bytes, 0);
    }
  kame_pool_set_large_cache_cap (64 * MiB);
}

KT_MAIN (KT_CASE (large_cached_mapping_of_half_the_request_is_grown_in_place),
         KT_CASE (large_calloc_zeroes_a_block_reused_from_the_cache),
         KT_CASE (large_blocks_keep_every_byte_of_their_exact_usable_size),
         KT_CASE (large_live_blocks_never_overlap),
         KT_CASE (large_double_free_cached),
         KT_CASE
           (large_cache_reuses_huge_blocks_only_at_their_size_and_cuts_chunks),
         KT_CASE (large_stats_move_each_block_between_live_and_cached_bytes),
         KT_CASE (large_cache_reuses_blocks_and_evicts_down_to_a_lowered_cap),
         KT_CASE (large_rss_comes_back_down_after_256_mib_is_freed),
         KT_CASE (large_realloc_grows_mapping_in_place_into_free_space),
         KT_CASE (large_realloc_moves_mapping_when_the_next_page_is_taken),
         KT_CASE (large_teardown_drains_the_cache_but_a_pipeline_keeps_it),
         KT_CASE (large_realloc_grows_dedicated_in_place))
