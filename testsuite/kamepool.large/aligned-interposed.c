/* aligned-interposed.c -- kamepool.large: every power-of-two
   alignment from 8 bytes to 16 MiB, crossed with the sizes 1, A-1, A,
   A+1, 4 KiB, 1 MiB and 5 MiB, through posix_memalign, aligned_alloc,
   memalign and the kame_pool_* forms: each block is the pool's,
   aligned, of the usable size of its tier, writable over its whole
   request, and freed by plain free.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

/* kptest-requires: interpose */
/* kptest-options: -fno-builtin */

#define _GNU_SOURCE 1

#include <errno.h>
#include <malloc.h>
#include <stdint.h>

#include "kame_pool.h"
#include "kptest.h"
#include "kptest-pool.h"

#define MiB ((size_t) 1 << 20)
#define UNIT ((size_t) 256 << 10)

/* The usable size of a block of N bytes aligned to A, a power of two
   (kame_pool_aligned_alloc(3)): the smallest class that holds N and
   whose natural alignment is at least A; else, for up to 4 MiB aligned
   to at most 256 KiB, whole units of 256 KiB; else N rounded up to
   pages, in a mapping of its own.  Each block here is freed before the
   next is asked for, and the only mappings the cache keeps (those with
   the block one page in) are for 5 MiB, so none serves a request with
   a bigger mapping taken whole.  */
static size_t
aligned_usable (size_t a, size_t n)
{
  if (n <= KT_SMALL_MAX)
    for (size_t i = 0; i < KT_NCLASSES; i++)
      if (kt_classes[i] >= n && (kt_classes[i] & -kt_classes[i]) >= a)
        return kt_classes[i];
  if (n <= 4 * MiB && a <= UNIT)
    return (n + UNIT - 1) / UNIT * UNIT;
  return (n + KT_PAGE - 1) / KT_PAGE * KT_PAGE;
}

static bool
good (void *p, size_t a, size_t n, const char *how)
{
  if (p == NULL || ((uintptr_t) p & (a - 1)) != 0
      || kame_pool_malloc_usable_size (p) != aligned_usable (a, n)
      || malloc_usable_size (p) != kame_pool_malloc_usable_size (p))
    {
      printf ("%s (%zu, %zu): %p, usable %zu, not %zu\n", how, a, n, p,
              p != NULL ? kame_pool_malloc_usable_size (p) : 0,
              aligned_usable (a, n));
      return false;
    }
  if (n != 0)
    {
      ((unsigned char *) p)[0] = 1;
      ((unsigned char *) p)[n - 1] = 2;
    }
  return true;
}

KT_TEST (large_alignments_up_to_16_mib_give_aligned_blocks_of_exact_size)
{
  /* No mapping cached from before.  */
  kame_pool_free (kame_pool_malloc (1));
  kame_pool_set_large_cache_cap (0);
  kame_pool_set_large_cache_cap (128 * MiB);
  for (size_t a = 8; a <= ((size_t) 16 << 20); a <<= 1)
    {
      size_t sizes[] = { 1, a - 1, a, a + 1, 4096, (size_t) 1 << 20,
                         (size_t) 5 << 20 };
      for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        {
          size_t n = sizes[i];
          void *p = NULL;
          int saved = errno;
          KT_CHECK_EQ (posix_memalign (&p, a, n), 0);
          KT_CHECK_EQ (errno, saved);
          KT_CHECK (good (p, a, n, "posix_memalign"));
          free (p);
          p = aligned_alloc (a, n);
          KT_CHECK (good (p, a, n, "aligned_alloc"));
          free (p);
          p = memalign (a, n);
          KT_CHECK (good (p, a, n, "memalign"));
          free (p);
          p = kame_pool_aligned_alloc (a, n);
          KT_CHECK (good (p, a, n, "kame_pool_aligned_alloc"));
          kame_pool_free (p);
          KT_CHECK_EQ (kame_pool_posix_memalign (&p, a, n), 0);
          KT_CHECK (good (p, a, n, "kame_pool_posix_memalign"));
          free (p);
        }
    }
  void *p = valloc ((size_t) 5 << 20);
  KT_CHECK (good (p, KT_PAGE, (size_t) 5 << 20, "valloc"));
  free (p);
  /* pvalloc rounds the size up to pages.  */
  p = pvalloc (300000);
  KT_CHECK (good (p, KT_PAGE, (300000 + KT_PAGE - 1) / KT_PAGE * KT_PAGE,
                  "pvalloc"));
  free (p);
  /* Bad alignments.  */
  errno = 0;
  KT_CHECK (aligned_alloc (48, 100) == NULL && errno == EINVAL);
  KT_CHECK_EQ (posix_memalign (&p, 4, 100), EINVAL);
  KT_CHECK_EQ (posix_memalign (&p, 24, 100), EINVAL);
}

KT_MAIN (KT_CASE
           (large_alignments_up_to_16_mib_give_aligned_blocks_of_exact_size))
