/* aligned.c -- kamepool.api tests of kame_pool_aligned_alloc and
   kame_pool_posix_memalign: every power-of-two alignment from 8 bytes
   to 16 MiB crossed with sizes around it, the exact block each tier
   gives, and the EINVAL and ENOMEM answers.

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

enum tier { SMALL, DEDICATED, LARGE };

/* The tier and usable size the contract gives aligned_alloc (A, N):
   the smallest class that is big enough and whose natural alignment
   (its lowest set bit) is at least A; else a dedicated chunk; else a
   mapping with the block at a page-multiple offset.  */
static enum tier
expected_block (size_t a, size_t n, size_t *usable)
{
  if (a < 16)
    a = 16;
  for (size_t i = 0; i < KT_NCLASSES; i++)
    if (kt_classes[i] >= n && (kt_classes[i] & -kt_classes[i]) >= a)
      {
        *usable = kt_classes[i];
        return SMALL;
      }
  if (a <= UNIT && n <= 4 * MIB)
    {
      size_t units = n == 0 ? 1 : (n + UNIT - 1) / UNIT;
      *usable = units * UNIT;
      return DEDICATED;
    }
  /* Even a zero-byte block owns a byte of its mapping: a pointer at
     the mapping's end would be nobody's.  */
  *usable = (n == 0 ? KT_PAGE : (n + KT_PAGE - 1) / KT_PAGE * KT_PAGE);
  return LARGE;
}

static volatile size_t size_max = SIZE_MAX;
static volatile size_t ptrdiff_max = PTRDIFF_MAX;
/* Writing the usable bytes of a zero-byte request is allowed; this
   hides the zero from -Warray-bounds.  */
static volatile size_t zero = 0;

/* Why the last check_block failed.  */
static char why[256];

/* Check P = an aligned allocation of N bytes at alignment A, and touch
   its first and last bytes.  */
static bool
check_block (const char *how, size_t a, size_t n, void *p)
{
  size_t want;
  enum tier t = expected_block (a, n, &want);
  if (p == NULL)
    {
      snprintf (why, sizeof why, "%s (%zu, %zu) returned NULL (errno %d)",
                how, a, n, errno);
      return false;
    }
  size_t u = kame_pool_malloc_usable_size (p);
  uintptr_t need = a < 16 ? 16 : a;
  if ((uintptr_t) p % need != 0 || u != want
      || (t == DEDICATED && (uintptr_t) p % UNIT != 0))
    {
      snprintf (why, sizeof why, "%s (%zu, %zu) = %p, usable %zu; expected "
                "alignment %zu, usable %zu", how, a, n, p, u, (size_t) need,
                want);
      return false;
    }
  unsigned char *b = p;
  b[0] = 0x5a;
  b[u - 1] = 0xa5;
  return true;
}

/* The sizes the sweep tries at alignment A.  */
static size_t
sweep_sizes (size_t a, size_t out[7])
{
  out[0] = 0;
  out[1] = 1;
  out[2] = a - 1;
  out[3] = a;
  out[4] = a + 1;
  out[5] = 4 * KIB;
  out[6] = MIB;
  return 7;
}

KT_TEST (aligned_alloc_8_b_to_16_mib_gives_the_contract_block)
{
  for (size_t a = 8; a <= 16 * MIB; a *= 2)
    {
      size_t sizes[7];
      size_t count = sweep_sizes (a, sizes);
      void *p[7];
      for (size_t i = 0; i < count; i++)
        {
          errno = EDOM;
          p[i] = kame_pool_aligned_alloc (a, sizes[i]);
          KT_CHECK_EQ (errno, EDOM);
          if (!check_block ("aligned_alloc", a, sizes[i], p[i]))
            KT_FAILF ("%s", why);
        }
      /* All live at once: distinct.  */
      for (size_t i = 0; i < count; i++)
        for (size_t j = i + 1; j < count; j++)
          KT_CHECK (p[i] != p[j]);
      for (size_t i = 0; i < count; i++)
        kame_pool_free (p[i]);
    }
}

KT_TEST (posix_memalign_8_b_to_16_mib_gives_the_contract_block)
{
  for (size_t a = 8; a <= 16 * MIB; a *= 2)
    {
      size_t sizes[7];
      size_t count = sweep_sizes (a, sizes);
      for (size_t i = 0; i < count; i++)
        {
          void *p = NULL;
          errno = EDOM;
          KT_CHECK_EQ (kame_pool_posix_memalign (&p, a, sizes[i]), 0);
          KT_CHECK_EQ (errno, EDOM);
          if (!check_block ("posix_memalign", a, sizes[i], p))
            KT_FAILF ("%s", why);
          kame_pool_free (p);
        }
    }
}

/* Many live blocks of one small alignment class do not overlap and all
   keep the alignment (not just the first of a chunk).  */
KT_TEST (aligned_alloc_many_live_blocks_keep_alignment)
{
  static const size_t aligns[] = { 32, 64, 256, 1024, 4096, 8192, 32768 };
  enum { N = 300 };
  for (size_t k = 0; k < sizeof aligns / sizeof aligns[0]; k++)
    {
      size_t a = aligns[k];
      static unsigned char *p[N];
      for (int i = 0; i < N; i++)
        {
          size_t n = 1 + (size_t) i * 7 % a;
          p[i] = kame_pool_aligned_alloc (a, n);
          if (!check_block ("aligned_alloc", a, n, p[i]))
            KT_FAILF ("%s", why);
          memset (p[i], i & 0xff, n);
        }
      for (int i = 0; i < N; i++)
        {
          size_t n = 1 + (size_t) i * 7 % a;
          for (size_t j = 0; j < n; j++)
            if (p[i][j] != (unsigned char) (i & 0xff))
              KT_FAILF ("block %d (aligned_alloc (%zu, %zu)) overwritten", i,
                        a, n);
          kame_pool_free (p[i]);
        }
    }
}

/* The alignments above a unit go to a mapping of their own; a
   zero-byte request there must still get a byte of its own.  */
KT_TEST (zero_size_with_alignment_above_a_unit_gets_a_usable_block)
{
  for (size_t a = 2 * UNIT; a <= 16 * MIB; a *= 2)
    {
      unsigned char *p = kame_pool_aligned_alloc (a, zero);
      KT_CHECK (p != NULL);
      KT_CHECK_EQ ((uintptr_t) p % a, 0);
      if (kame_pool_malloc_usable_size (p) == 0)
        KT_FAILF ("aligned_alloc (%zu, 0) = %p has usable size 0", a,
                  (void *) p);
      p[0] = 1;
      kame_pool_free (p);
      void *q = NULL;
      KT_CHECK_EQ (kame_pool_posix_memalign (&q, a, 0), 0);
      KT_CHECK (kame_pool_malloc_usable_size (q) >= 1);
      kame_pool_free (q);
    }
}

/* No alignment is too big for the pool: above the sweep too the block
   is the pool's own mapping (usable size not 0), not the C library's.  */
KT_TEST (alignment_of_32_mib_and_more_gets_a_pool_mapping)
{
  for (size_t a = 32 * MIB; a <= 256 * MIB; a *= 2)
    {
      unsigned char *p = kame_pool_aligned_alloc (a, 100);
      KT_CHECK (p != NULL);
      KT_CHECK_EQ ((uintptr_t) p % a, 0);
      size_t u = kame_pool_malloc_usable_size (p);
      if (u < 100)
        KT_FAILF ("aligned_alloc (%zu, 100) = %p has usable size %zu", a,
                  (void *) p, u);
      p[0] = 1;
      p[99] = 2;
      kame_pool_free (p);
    }
}

KT_TEST (aligned_alloc_rejects_a_non_power_of_two_with_einval)
{
  const size_t bad[] = { 0, 3, 5, 24, 48, 100, 4097, 3 * MIB,
                         size_max, size_max / 2 + 2 };
  const size_t sizes[] = { 0, 1, 100, 5 * MIB };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
      {
        errno = 0;
        void *p = kame_pool_aligned_alloc (bad[i], sizes[k]);
        if (p != NULL)
          KT_FAILF ("aligned_alloc (%zu, %zu) returned %p", bad[i],
                    sizes[k], p);
        if (errno != EINVAL)
          KT_FAILF ("aligned_alloc (%zu, %zu): errno %d, not EINVAL",
                    bad[i], sizes[k], errno);
      }
}

/* A size near SIZE_MAX must not wrap around to a small block when the
   allocator rounds it up to the alignment.  */
KT_TEST (aligned_alloc_near_size_max_fails_with_enomem)
{
  const size_t aligns[] = { 8, 16, 32, 64, 4096, 65536, UNIT, MIB,
                            32 * MIB };
  for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; i++)
    {
      size_t a = aligns[i];
      const size_t sizes[] = { size_max, size_max - a + 1, size_max - a,
                               size_max - KT_PAGE, size_max - 32 * MIB,
                               ptrdiff_max + 1, (size_t) 1 << 50 };
      for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        {
          errno = 0;
          void *p = kame_pool_aligned_alloc (a, sizes[k]);
          if (p != NULL)
            KT_FAILF ("aligned_alloc (%zu, %zu) returned %p", a, sizes[k],
                      p);
          if (errno != ENOMEM)
            KT_FAILF ("aligned_alloc (%zu, %zu): errno %d, not ENOMEM", a,
                      sizes[k], errno);
        }
    }
}

KT_TEST (posix_memalign_einval_leaves_memptr_and_errno)
{
  const size_t bad[] = { 0, 1, 2, 4, 3, 12, 24, 48, 100, 4097,
                         size_max, size_max / 2 + 2 };
  int sentinel;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
      void *p = &sentinel;
      errno = EDOM;
      int rc = kame_pool_posix_memalign (&p, bad[i], 64);
      if (rc != EINVAL)
        KT_FAILF ("posix_memalign (%zu, 64) returned %d, not EINVAL",
                  bad[i], rc);
      KT_CHECK_PTR_EQ (p, &sentinel);
      KT_CHECK_EQ (errno, EDOM);
    }
  void **volatile no_memptr = NULL;
  errno = EDOM;
  KT_CHECK_EQ (kame_pool_posix_memalign (no_memptr, 64, 64), EINVAL);
  KT_CHECK_EQ (errno, EDOM);
}

KT_TEST (posix_memalign_enomem_leaves_memptr_and_sets_errno)
{
  const size_t aligns[] = { 8, 16, 64, 4096, MIB };
  int sentinel;
  for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; i++)
    {
      const size_t sizes[] = { size_max, size_max - aligns[i] + 1,
                               ptrdiff_max + 1, (size_t) 1 << 50 };
      for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        {
          void *p = &sentinel;
          errno = EDOM;
          int rc = kame_pool_posix_memalign (&p, aligns[i], sizes[k]);
          if (rc != ENOMEM)
            KT_FAILF ("posix_memalign (%zu, %zu) returned %d, not ENOMEM",
                      aligns[i], sizes[k], rc);
          KT_CHECK_PTR_EQ (p, &sentinel);
          KT_CHECK_EQ (errno, ENOMEM);  /* as glibc's */
        }
    }
}

KT_TEST (posix_memalign_zero_size_returns_unique_pointers)
{
  static const size_t aligns[] = { 8, 64, 4096 };
  enum { N = 200 };
  void *p[3][N];
  for (size_t k = 0; k < 3; k++)
    for (int i = 0; i < N; i++)
      {
        p[k][i] = NULL;
        KT_CHECK_EQ (kame_pool_posix_memalign (&p[k][i], aligns[k], 0), 0);
        KT_CHECK (p[k][i] != NULL);
        KT_CHECK_EQ ((uintptr_t) p[k][i] % aligns[k], 0);
      }
  for (size_t k = 0; k < 3; k++)
    for (int i = 0; i < N; i++)
      for (size_t l = k; l < 3; l++)
        for (int j = l == k ? i + 1 : 0; j < N; j++)
          KT_CHECK (p[k][i] != p[l][j]);
  for (size_t k = 0; k < 3; k++)
    for (int i = 0; i < N; i++)
      kame_pool_free (p[k][i]);
}

/* The examples of kame_pool_aligned_alloc(3), literally.  */
KT_TEST (aligned_alloc_gives_the_blocks_its_man_page_names)
{
  static const struct { size_t a, n, usable; } ex[] = {
    { 4096, 100, 4096 },
    { 4096, 5000, 8192 },
    { 4096, 40000, 57344 },
    { 65536, 100, 65536 },
    { 131072, 131072, 131072 },
    { 32768, 150000, 262144 },        /* no class: a dedicated chunk */
  };
  for (size_t i = 0; i < sizeof ex / sizeof ex[0]; i++)
    {
      void *p = kame_pool_aligned_alloc (ex[i].a, ex[i].n);
      KT_CHECK (p != NULL);
      KT_CHECK_EQ ((uintptr_t) p % ex[i].a, 0);
      KT_CHECK_EQ (kame_pool_malloc_usable_size (p), ex[i].usable);
      kame_pool_free (p);
    }
}

KT_MAIN (KT_CASE (aligned_alloc_8_b_to_16_mib_gives_the_contract_block),
         KT_CASE (aligned_alloc_gives_the_blocks_its_man_page_names),
         KT_CASE (posix_memalign_8_b_to_16_mib_gives_the_contract_block),
         KT_CASE (aligned_alloc_many_live_blocks_keep_alignment),
         KT_CASE (zero_size_with_alignment_above_a_unit_gets_a_usable_block),
         KT_CASE (alignment_of_32_mib_and_more_gets_a_pool_mapping),
         KT_CASE (aligned_alloc_rejects_a_non_power_of_two_with_einval),
         KT_CASE (aligned_alloc_near_size_max_fails_with_enomem),
         KT_CASE (posix_memalign_einval_leaves_memptr_and_errno),
         KT_CASE (posix_memalign_enomem_leaves_memptr_and_sets_errno),
         KT_CASE (posix_memalign_zero_size_returns_unique_pointers))
