/* tracking.c -- ck_huge_alloc's table of live blocks: thousands at
   once, freed in random order; pointers it never returned are refused;
   a wrong size given to ck_huge_free does not matter.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include "kptest.h"
#include "ckernel-test.h"

#include <time.h>

#define MANY 5000

static double
now (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + ts.tv_nsec / 1e9;
}

static int
compare_pointers (const void *a, const void *b)
{
  uintptr_t x = (uintptr_t) *(void *const *) a;
  uintptr_t y = (uintptr_t) *(void *const *) b;
  return x < y ? -1 : x > y;
}

/* Warm up: the table and stderr exist before anything is counted.  */
static void
warm_up (void)
{
  int dummy;
  ck_huge_free (ck_huge_alloc (1), 1);
  ck_huge_free (&dummy, 1);
}

KT_TEST (thousands_of_live_blocks_freed_in_random_order)
{
  static void *blocks[MANY], *sorted[MANY];
  static size_t sizes[MANY];
  struct ckt_vm before, full, half, after;
  unsigned seed = 2026;
  size_t total = 0;

  /* Grow the table to its final size first, so that it does not
     count in the mapped bytes.  */
  for (size_t i = 0; i < MANY; i++)
    blocks[i] = ck_huge_alloc (1);
  for (size_t i = 0; i < MANY; i++)
    ck_huge_free (blocks[i], 1);
  warm_up ();
  KT_CHECK (ckt_vm_usage (&before));
  double t0 = now ();
  /* Blocks of 1 to 3 huge pages, so that the addresses are irregular
     and the hash table sees collisions.  */
  for (size_t i = 0; i < MANY; i++)
    {
      sizes[i] = 1 + (size_t) rand_r (&seed) % (3 * CKT_HUGE);
      blocks[i] = ck_huge_alloc (sizes[i]);
      if (blocks[i] == NULL)
        KT_FAILF ("allocation %zu failed: %s", i, strerror (errno));
      total += (sizes[i] + CKT_HUGE - 1) / CKT_HUGE * CKT_HUGE;
    }
  double t1 = now ();
  KT_CHECK (ckt_vm_usage (&full));
  KT_CHECK_EQ (full.bytes - before.bytes, total);

  memcpy (sorted, blocks, sizeof blocks);
  qsort (sorted, MANY, sizeof sorted[0], compare_pointers);
  for (size_t i = 0; i < MANY; i++)
    {
      KT_CHECK_EQ ((uintptr_t) sorted[i] % CKT_HUGE, 0);
      if (i > 0)
        KT_CHECK ((uintptr_t) sorted[i] - (uintptr_t) sorted[i - 1]
                  >= CKT_HUGE);
    }
  /* Touch a few: each touch may cost a whole huge page.  */
  for (size_t i = 0; i < MANY; i += 500)
    ((unsigned char *) blocks[i])[sizes[i] - 1] = 1;

  for (size_t i = MANY - 1; i > 0; i--)
    {
      size_t j = (size_t) rand_r (&seed) % (i + 1);
      void *t = blocks[i];
      size_t size = sizes[i];
      blocks[i] = blocks[j];
      sizes[i] = sizes[j];
      blocks[j] = t;
      sizes[j] = size;
    }
  double t2 = now ();
  size_t freed = 0;
  for (size_t i = 0; i < MANY / 2; i++)
    {
      ck_huge_free (blocks[i], sizes[i]);
      freed += (sizes[i] + CKT_HUGE - 1) / CKT_HUGE * CKT_HUGE;
    }
  KT_CHECK (ckt_vm_usage (&half));
  KT_CHECK_EQ (full.bytes - half.bytes, freed);
  for (size_t i = MANY / 2; i < MANY; i++)
    ck_huge_free (blocks[i], sizes[i]);
  double t3 = now ();
  KT_CHECK (ckt_vm_usage (&after));
  KT_CHECK_EQ (after.bytes, before.bytes);
  printf ("note: %d ck_huge_alloc in %.1f ms, %d ck_huge_free in %.1f ms\n",
          MANY, (t1 - t0) * 1e3, MANY, (t3 - t2) * 1e3);

  /* All forgotten: a second free of any of them is refused.  */
  errno = 0;
  ck_huge_free (blocks[MANY / 3], 1);
  KT_CHECK_EQ (errno, EINVAL);
}

KT_TEST (free_of_a_stack_address_is_refused)
{
  struct ckt_vm before, after;
  char local[64] = "intact";

  warm_up ();
  KT_CHECK (ckt_vm_usage (&before));
  errno = 0;
  ck_huge_free (local, sizeof local);
  KT_CHECK_EQ (errno, EINVAL);
  KT_CHECK_STR_EQ (local, "intact");
  KT_CHECK (ckt_vm_usage (&after));
  KT_CHECK (ckt_vm_equal (&before, &after));
}

KT_TEST (free_of_a_malloc_pointer_is_refused)
{
  char *p = malloc (100);

  KT_CHECK (p != NULL);
  strcpy (p, "still mine");
  errno = 0;
  ck_huge_free (p, 100);
  KT_CHECK_EQ (errno, EINVAL);
  /* Not handed to free: with a sanitizer, a double free would abort.  */
  KT_CHECK_STR_EQ (p, "still mine");
  free (p);
}

KT_TEST (free_inside_a_block_is_refused_and_keeps_it)
{
  unsigned char *p = ck_huge_alloc (3 * 4096);

  KT_CHECK (p != NULL);
  errno = 0;
  ck_huge_free (p + 4096, 4096);
  KT_CHECK_EQ (errno, EINVAL);
  p[4096] = 7;
  KT_CHECK_EQ (p[4096], 7);
  ck_huge_free (p, 3 * 4096);
}

KT_TEST (second_free_is_refused)
{
  struct ckt_vm before, after;
  void *p;

  warm_up ();
  p = ck_huge_alloc (100);
  KT_CHECK (p != NULL);
  ck_huge_free (p, 100);
  KT_CHECK (ckt_vm_usage (&before));
  errno = 0;
  ck_huge_free (p, 100);
  KT_CHECK_EQ (errno, EINVAL);
  KT_CHECK (ckt_vm_usage (&after));
  KT_CHECK (ckt_vm_equal (&before, &after));
}

KT_TEST (free_of_null_does_nothing)
{
  struct ckt_vm before, after;

  warm_up ();
  KT_CHECK (ckt_vm_usage (&before));
  errno = 0;
  ck_huge_free (NULL, 0);
  ck_huge_free (NULL, 12345);
  KT_CHECK_EQ (errno, 0);
  KT_CHECK (ckt_vm_usage (&after));
  KT_CHECK (ckt_vm_equal (&before, &after));
}

/* The tracked length is unmapped whatever size the caller passes.  */
KT_TEST (free_with_a_wrong_size_unmaps_the_tracked_length)
{
  static const size_t wrong[] = { 0, 1, 2 * CKT_MIB, 64 * CKT_MIB };
  struct ckt_vm before, during, after;

  warm_up ();
  for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++)
    {
      KT_CHECK (ckt_vm_usage (&before));
      void *p = ck_huge_alloc (5 * CKT_MIB);
      KT_CHECK (p != NULL);
      KT_CHECK (ckt_vm_usage (&during));
      KT_CHECK_EQ (during.bytes - before.bytes, 6 * CKT_MIB);
      ck_huge_free (p, wrong[i]);
      KT_CHECK (ckt_vm_usage (&after));
      KT_CHECK (ckt_vm_equal (&before, &after));
    }
}

KT_TEST (huge_alloc_rounds_to_2mib_and_refuses_zero_and_overflow)
{
  struct ckt_vm before, during;

  warm_up ();
  errno = 0;
  KT_CHECK (ck_huge_alloc (0) == NULL);
  KT_CHECK_EQ (errno, EINVAL);
  errno = 0;
  KT_CHECK (ck_huge_alloc (SIZE_MAX) == NULL);
  KT_CHECK_EQ (errno, ENOMEM);
  errno = 0;
  KT_CHECK (ck_huge_alloc (SIZE_MAX - 3 * CKT_MIB) == NULL);
  KT_CHECK_EQ (errno, ENOMEM);

  KT_CHECK (ckt_vm_usage (&before));
  errno = 4321;
  unsigned char *p = ck_huge_alloc (2 * CKT_MIB + 1);
  KT_CHECK (p != NULL);
  KT_CHECK_EQ (errno, 4321);
  KT_CHECK_EQ ((uintptr_t) p % CKT_HUGE, 0);
  KT_CHECK (ckt_vm_usage (&during));
  KT_CHECK_EQ (during.bytes - before.bytes, 4 * CKT_MIB);
  KT_CHECK (ckt_is_zero (p, 4 * CKT_MIB));
  memset (p, 0xff, 4 * CKT_MIB);
  ck_huge_free (p, 2 * CKT_MIB + 1);
}

KT_MAIN (KT_CASE (thousands_of_live_blocks_freed_in_random_order),
         KT_CASE (free_of_a_stack_address_is_refused),
         KT_CASE (free_of_a_malloc_pointer_is_refused),
         KT_CASE (free_inside_a_block_is_refused_and_keeps_it),
         KT_CASE (second_free_is_refused),
         KT_CASE (free_of_null_does_nothing),
         KT_CASE (free_with_a_wrong_size_unmaps_the_tracked_length),
         KT_CASE (huge_alloc_rounds_to_2mib_and_refuses_zero_and_overflow))
