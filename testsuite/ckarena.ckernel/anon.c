/* anon.c -- the anonymous mode of the ckernel bump arena: alignment,
   size, huge-page advice, and freeing (also of empty arenas).

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include "kptest.h"
#include "ckernel-test.h"

/* The anonymous path is the default; a stray variable in the caller's
   environment must not change it.  */
static void
anonymous_defaults (void)
{
  unsetenv ("CK_BUMP_FORCE_MIXED");
  unsetenv ("CK_BUMP_DISABLE_MIXED");
}

KT_TEST (anonymous_arena_is_2mib_aligned_zeroed_and_writable)
{
  ck_bump_alloc_t a;
  size_t total = 5 * CKT_MIB + 123;

  anonymous_defaults ();
  memset (&a, 0xab, sizeof a);
  KT_CHECK_EQ (ck_bump_alloc_init (&a, NULL, total, 0, CKT_MIB), 0);
  KT_CHECK_EQ (a.mode, CK_BUMP_MODE_ANON);
  KT_CHECK (a.base != NULL);
  KT_CHECK_EQ ((uintptr_t) a.base % CKT_HUGE, 0);
  KT_CHECK_EQ (a.total_size, total);
  KT_CHECK_EQ (a.weights_base, 0);
  KT_CHECK_EQ (a.activations_base, CKT_MIB);
  KT_CHECK_EQ (a.mapped_len, 3 * CKT_HUGE);
  KT_CHECK_EQ (a.weights_file_size, 0);
  KT_CHECK_EQ (ck_bump_alloc_needs_weight_materialization (&a), 1);
  KT_CHECK (ckt_is_zero (a.base, a.mapped_len));
  for (size_t i = 0; i < a.mapped_len; i++)
    a.base[i] = (unsigned char) (i ^ (i >> 11));
  for (size_t i = 0; i < a.mapped_len; i++)
    KT_CHECK_EQ (a.base[i], (unsigned char) (i ^ (i >> 11)));
  ck_bump_alloc_free (&a);
  KT_CHECK (ckt_is_reset (&a));
}

KT_TEST (anonymous_arena_carries_huge_page_advice)
{
  char mode[128] = "";
  ck_bump_alloc_t a = { 0 };
  FILE *f = fopen ("/sys/kernel/mm/transparent_hugepage/enabled", "r");

  if (f == NULL)
    KT_UNSUPPORTED ("no transparent huge pages in this kernel");
  if (fgets (mode, sizeof mode, f) == NULL)
    mode[0] = '\0';
  fclose (f);
  if (strstr (mode, "[never]") != NULL)
    KT_UNSUPPORTED ("transparent huge pages are [never]");
  KT_CHECK (strstr (mode, "[always]") != NULL
            || strstr (mode, "[madvise]") != NULL);

  anonymous_defaults ();
  KT_CHECK_EQ (ck_bump_alloc_init (&a, NULL, 4 * CKT_MIB, 0, 0), 0);
  KT_CHECK_EQ (a.mode, CK_BUMP_MODE_ANON);
  if (ckt_vm_has_flag (a.base, "ht"))
    printf ("note: the arena got explicit huge pages (MAP_HUGETLB)\n");
  else
    KT_CHECK (ckt_vm_has_flag (a.base, "hg"));
  /* And the last byte lies in the same advised mapping.  */
  KT_CHECK (ckt_vm_has_flag (a.base + a.total_size - 1, "hg")
            || ckt_vm_has_flag (a.base + a.total_size - 1, "ht"));
  ck_bump_alloc_free (&a);
}

KT_TEST (anonymous_mode_does_not_need_the_weights_file)
{
  ck_bump_alloc_t a;

  anonymous_defaults ();
  KT_CHECK_EQ (ck_bump_alloc_init (&a, "/nonexistent/ckernel/weights",
                                   CKT_MIB, 4096, 8192), 0);
  KT_CHECK_EQ (a.mode, CK_BUMP_MODE_ANON);
  KT_CHECK_EQ (a.weights_base, 4096);
  ck_bump_alloc_free (&a);
}

KT_TEST (free_returns_every_mapping_and_twice_is_safe)
{
  struct ckt_vm before, during, after, again;
  ck_bump_alloc_t a;

  anonymous_defaults ();
  /* Let the tracking table exist before counting.  */
  ck_huge_free (ck_huge_alloc (1), 1);
  KT_CHECK (ckt_vm_usage (&before));
  KT_CHECK_EQ (ck_bump_alloc_init (&a, NULL, 7 * CKT_MIB, 0, 0), 0);
  KT_CHECK (ckt_vm_usage (&during));
  KT_CHECK_EQ (during.bytes - before.bytes, 8 * CKT_MIB);
  errno = 1234;
  ck_bump_alloc_free (&a);
  KT_CHECK_EQ (errno, 1234);
  KT_CHECK (ckt_is_reset (&a));
  KT_CHECK (ckt_vm_usage (&after));
  KT_CHECK (ckt_vm_equal (&before, &after));
  ck_bump_alloc_free (&a);
  KT_CHECK (ckt_is_reset (&a));
  KT_CHECK (ckt_vm_usage (&again));
  KT_CHECK (ckt_vm_equal (&before, &again));
}

KT_TEST (free_of_a_zeroed_arena_and_of_null_does_nothing)
{
  struct ckt_vm before, after;
  ck_bump_alloc_t a;

  memset (&a, 0, sizeof a);
  KT_CHECK (ckt_vm_usage (&before));
  errno = 0;
  ck_bump_alloc_free (&a);
  ck_bump_alloc_free (NULL);
  KT_CHECK_EQ (errno, 0);
  KT_CHECK (ckt_is_reset (&a));
  KT_CHECK (ckt_vm_usage (&after));
  KT_CHECK (ckt_vm_equal (&before, &after));
}

KT_TEST (empty_or_missing_arena_needs_materialization)
{
  ck_bump_alloc_t a = { 0 };

  KT_CHECK_EQ (ck_bump_alloc_needs_weight_materialization (NULL), 1);
  KT_CHECK_EQ (ck_bump_alloc_needs_weight_materialization (&a), 1);
}

KT_MAIN (KT_CASE (anonymous_arena_is_2mib_aligned_zeroed_and_writable),
         KT_CASE (anonymous_arena_carries_huge_page_advice),
         KT_CASE (anonymous_mode_does_not_need_the_weights_file),
         KT_CASE (free_returns_every_mapping_and_twice_is_safe),
         KT_CASE (free_of_a_zeroed_arena_and_of_null_does_nothing),
         KT_CASE (empty_or_missing_arena_needs_materialization))
