/* family.c -- kamepool.interpose tests run inside a program linked
   with -lkamepool: the whole malloc family, and the C library's own
   allocating functions, are served by the pool; pointers from glibc's
   __libc_malloc still work with free, realloc and malloc_usable_size;
   the edge cases fail with the right errno.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

/* kptest-requires: interpose */
/* kptest-options: -fno-builtin */

#define _GNU_SOURCE 1

#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kame_pool.h"
#include "kptest.h"
#include "kptest-pool.h"

extern void *__libc_malloc (size_t);
extern void *__libc_calloc (size_t, size_t);
extern void *__libc_memalign (size_t, size_t);
extern void __libc_free (void *);

static volatile size_t size_max = SIZE_MAX;

/* P came from the pool, and malloc_usable_size agrees with it.  */
static bool
pool_block (const void *p, size_t n)
{
  if (p == NULL)
    {
      printf ("NULL for a %zu-byte request\n", n);
      return false;
    }
  size_t u = kame_pool_malloc_usable_size (p);
  if (u < n || u == 0 || malloc_usable_size ((void *) p) != u)
    {
      printf ("%p (%zu bytes): pool usable %zu, malloc_usable_size %zu\n",
              p, n, u, malloc_usable_size ((void *) p));
      return false;
    }
  return true;
}

KT_TEST (malloc_family_is_served_by_the_pool)
{
  static const size_t sizes[] = { 0, 1, 100, 4096, 40000, 3 << 20,
                                  6 << 20 };
  size_t page = KT_PAGE;
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    {
      size_t n = sizes[i];
      void *p = malloc (n);
      KT_CHECK (pool_block (p, n));
      p = realloc (p, n + 1000);
      KT_CHECK (pool_block (p, n + 1000));
      free (p);
      p = calloc (n, 1);
      KT_CHECK (pool_block (p, n));
      free (p);
      p = reallocarray (NULL, n, 2);
      KT_CHECK (pool_block (p, n * 2));
      free (p);
      p = NULL;
      KT_CHECK_EQ (posix_memalign (&p, 256, n), 0);
      KT_CHECK (pool_block (p, n));
      KT_CHECK_EQ ((uintptr_t) p % 256, 0);
      free (p);
      p = aligned_alloc (1024, n);
      KT_CHECK (pool_block (p, n));
      KT_CHECK_EQ ((uintptr_t) p % 1024, 0);
      free (p);
      p = memalign (4096, n);
      KT_CHECK (pool_block (p, n));
      KT_CHECK_EQ ((uintptr_t) p % 4096, 0);
      free (p);
      p = valloc (n);
      KT_CHECK (pool_block (p, n));
      KT_CHECK_EQ ((uintptr_t) p % page, 0);
      free (p);
      p = pvalloc (n);
      /* pvalloc rounds the size up to whole pages.  */
      size_t whole = (n + page - 1) / page * page;
      KT_CHECK (pool_block (p, whole));
      KT_CHECK_EQ ((uintptr_t) p % page, 0);
      free (p);
    }
}

KT_TEST (libc_allocating_functions_return_pool_blocks)
{
  char *s = strdup ("a string for strdup");
  KT_CHECK (pool_block (s, 20));
  s = realloc (s, 5000);
  KT_CHECK (pool_block (s, 5000));
  KT_CHECK_STR_EQ (s, "a string for strdup");
  free (s);

  s = strndup ("0123456789", 4);
  KT_CHECK (pool_block (s, 5));
  KT_CHECK_STR_EQ (s, "0123");
  free (s);

  char *a = NULL;
  KT_CHECK (asprintf (&a, "%d-%s", 42, "x") == 4);
  KT_CHECK (pool_block (a, 5));
  KT_CHECK_STR_EQ (a, "42-x");
  a = realloc (a, 100000);
  KT_CHECK (pool_block (a, 100000));
  free (a);

  char *r = realpath ("/", NULL);
  KT_CHECK (pool_block (r, 2));
  KT_CHECK_STR_EQ (r, "/");
  free (r);

  char *buf = NULL;
  size_t size = 0;
  FILE *f = open_memstream (&buf, &size);
  KT_CHECK (f != NULL);
  for (int i = 0; i < 5000; i++)
    fprintf (f, "line %d\n", i);
  KT_CHECK_EQ (fclose (f), 0);
  KT_CHECK (pool_block (buf, size + 1));
  KT_CHECK (strncmp (buf, "line 0\nline 1\n", 14) == 0);
  free (buf);

  /* getline grows its buffer with realloc.  */
  char *text = NULL;
  KT_CHECK (asprintf (&text, "%0*d\nshort\n", 3000, 7) > 0);
  f = fmemopen (text, strlen (text), "r");
  KT_CHECK (f != NULL);
  char *line = NULL;
  size_t cap = 0;
  KT_CHECK_EQ (getline (&line, &cap, f), 3001);
  KT_CHECK (pool_block (line, 3002));
  KT_CHECK_EQ (getline (&line, &cap, f), 6);
  KT_CHECK_STR_EQ (line, "short\n");
  fclose (f);
  free (line);
  free (text);
}

KT_TEST (libc_malloc_pointers_mix_with_free_realloc_and_usable_size)
{
  for (size_t n = 1; n < 300000; n = n * 3 + 1)
    {
      char *q = __libc_malloc (n);
      KT_CHECK (q != NULL);
      memset (q, 'q', n);
      KT_CHECK_EQ (kame_pool_malloc_usable_size (q), 0);
      /* malloc_usable_size hands it to glibc, which knows it.  */
      KT_CHECK (malloc_usable_size (q) >= n);
      q = realloc (q, n * 2);
      KT_CHECK (q != NULL);
      for (size_t i = 0; i < n; i++)
        if (q[i] != 'q')
          KT_FAILF ("realloc of a %zu-byte libc block lost byte %zu", n, i);
      free (q);
      q = __libc_calloc (n, 1);
      KT_CHECK (q != NULL);
      free (q);
      q = __libc_memalign (64, n);
      KT_CHECK (q != NULL);
      free (q);
    }
}

KT_TEST (near_size_max_the_family_fails_with_enomem)
{
  const size_t huge[] = { size_max, size_max - 1, size_max - 4095,
                          size_max - 65536 };
  for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++)
    {
      size_t n = huge[i];
      void *p;
#define EXPECT_ENOMEM(call)                                             \
      errno = 0;                                                        \
      p = (call);                                                       \
      if (p != NULL || errno != ENOMEM)                                 \
        KT_FAILF ("%s with n = %zu: %p, errno %d", #call, n, p, errno)
      EXPECT_ENOMEM (malloc (n));
      EXPECT_ENOMEM (calloc (n, 1));
      EXPECT_ENOMEM (memalign (64, n));
      EXPECT_ENOMEM (memalign (4096, n));
      EXPECT_ENOMEM (memalign (1 << 20, n));
      EXPECT_ENOMEM (valloc (n));
      EXPECT_ENOMEM (pvalloc (n));
      EXPECT_ENOMEM (aligned_alloc (64, n));
      EXPECT_ENOMEM (aligned_alloc (4096, n));
      EXPECT_ENOMEM (reallocarray (NULL, n, 1));
#undef EXPECT_ENOMEM
      void *q = &p;
      KT_CHECK_EQ (posix_memalign (&q, 4096, n), ENOMEM);
      KT_CHECK_PTR_EQ (q, &p);
    }
}

KT_TEST (bad_alignments_fail_with_einval)
{
  static const size_t bad[] = { 0, 3, 24, 48, 100, 4097 };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
      errno = 0;
      void *p = aligned_alloc (bad[i], 64);
      if (p != NULL || errno != EINVAL)
        KT_FAILF ("aligned_alloc (%zu, 64): %p, errno %d", bad[i], p, errno);
      if (bad[i] == 0)
        continue;
      errno = 0;
      p = memalign (bad[i], 64);
      if (p != NULL || errno != EINVAL)
        KT_FAILF ("memalign (%zu, 64): %p, errno %d", bad[i], p, errno);
      void *q = &p;
      KT_CHECK_EQ (posix_memalign (&q, bad[i], 64), EINVAL);
      KT_CHECK_PTR_EQ (q, &p);
    }
}

KT_TEST (reallocarray_overflow_fails_with_enomem_and_keeps_the_block)
{
  char *p = malloc (100);
  KT_CHECK (p != NULL);
  memset (p, 'r', 100);
  const size_t pairs[][2] = { { size_max / 2 + 1, 2 }, { 2, size_max },
                              { (size_t) 1 << 33, (size_t) 1 << 33 } };
  for (size_t i = 0; i < 3; i++)
    {
      errno = 0;
      void *q = reallocarray (p, pairs[i][0], pairs[i][1]);
      KT_CHECK (q == NULL);
      KT_CHECK_EQ (errno, ENOMEM);
      errno = 0;
      q = reallocarray (NULL, pairs[i][0], pairs[i][1]);
      KT_CHECK (q == NULL);
      KT_CHECK_EQ (errno, ENOMEM);
    }
  for (int i = 0; i < 100; i++)
    KT_CHECK (p[i] == 'r');
  p = reallocarray (p, 100, 3);
  KT_CHECK (pool_block (p, 300));
  KT_CHECK (p[99] == 'r');
  free (p);
}

KT_TEST (malloc_zero_and_free_null_behave)
{
  void *a = malloc (0), *b = malloc (0);
  KT_CHECK (a != NULL && b != NULL && a != b);
  KT_CHECK (pool_block (a, 0));
  errno = EDOM;
  free (NULL);
  free (a);
  free (b);
  KT_CHECK_EQ (errno, EDOM);
}

KT_MAIN (KT_CASE (malloc_family_is_served_by_the_pool),
         KT_CASE (libc_allocating_functions_return_pool_blocks),
         KT_CASE (libc_malloc_pointers_mix_with_free_realloc_and_usable_size),
         KT_CASE (near_size_max_the_family_fails_with_enomem),
         KT_CASE (bad_alignments_fail_with_einval),
         KT_CASE (reallocarray_overflow_fails_with_enomem_and_keeps_the_block),
         KT_CASE (malloc_zero_and_free_null_behave))
