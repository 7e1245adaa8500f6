/* mixed.c -- the mixed, file-backed mode of the ckernel bump arena,
   forced with CK_BUMP_FORCE_MIXED: the weights appear at their offset
   without a copy, writes stay private, the rest is zeroed anonymous
   memory.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include "kptest.h"
#include "ckernel-test.h"

static size_t
page_size (void)
{
  return (size_t) sysconf (_SC_PAGESIZE);
}

static void
force_mixed (void)
{
  setenv ("CK_BUMP_FORCE_MIXED", "1", 1);
  unsetenv ("CK_BUMP_DISABLE_MIXED");
}

/* Check a mixed arena over a file of FILE_SIZE bytes at WEIGHTS_BASE,
   whose weights end at ACTIVATIONS_BASE and whose region ends at
   TOTAL.  */
static bool
check_mixed_layout (size_t file_size, size_t weights_base,
                    size_t activations_base, size_t total)
{
  char path[64];
  ck_bump_alloc_t a;
  size_t page = page_size ();

  force_mixed ();
  if (!ckt_make_weights (path, file_size))
    return false;
  int rc = ck_bump_alloc_init (&a, path, total, weights_base,
                               activations_base);
  unlink (path);
  if (rc != 0)
    {
      printf ("note: init failed: %s\n", strerror (errno));
      return false;
    }
  bool ok = a.mode == CK_BUMP_MODE_MIXED_FILE_BACKED
            && ck_bump_alloc_needs_weight_materialization (&a) == 0
            && a.total_size == total && a.weights_base == weights_base
            && a.activations_base == activations_base
            && a.weights_file_size == file_size
            && a.mapped_len == (total + page - 1) / page * page
            && (uintptr_t) a.base % CKT_HUGE == 0;
  if (!ok)
    printf ("note: mode %d, fields do not match\n", (int) a.mode);
  ok = ok && ckt_is_zero (a.base, weights_base)
       && ckt_is_weights (a.base + weights_base,
                          activations_base - weights_base)
       && ckt_is_zero (a.base + activations_base,
                       a.mapped_len - activations_base);
  /* All of it is writable, the weights included.  */
  if (ok)
    memset (a.base, 0x5a, a.mapped_len);
  ck_bump_alloc_free (&a);
  return ok && ckt_is_reset (&a);
}

KT_TEST (mixed_mode_maps_weights_at_offset_zero)
{
  size_t page = page_size ();
  size_t span = 3 * page + 123;
  KT_CHECK (check_mixed_layout (span, 0, span, span + 5 * CKT_MIB));
}

KT_TEST (mixed_mode_maps_weights_at_a_page_aligned_offset)
{
  size_t page = page_size ();
  size_t span = 4 * page + 100;
  /* The file is longer than the weights: the bytes after them in the
     last page must not show in the activations.  */
  KT_CHECK (check_mixed_layout (span + 3000, 5 * page, 5 * page + span,
                                5 * page + span + CKT_MIB + 17));
}

KT_TEST (mixed_mode_with_weights_ending_the_region)
{
  size_t page = page_size ();
  KT_CHECK (check_mixed_layout (6 * page, 2 * page, 8 * page, 8 * page));
}

KT_TEST (mixed_mode_with_no_weights_is_all_zero)
{
  size_t page = page_size ();
  KT_CHECK (check_mixed_layout (10, page, page, 3 * page));
}

KT_TEST (writing_the_weights_does_not_change_the_file)
{
  char path[64];
  unsigned char back[16384];
  ck_bump_alloc_t a;
  size_t page = page_size ();
  size_t span = 2 * page + 77;

  force_mixed ();
  KT_CHECK (ckt_make_weights (path, span));
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  int rc = ck_bump_alloc_init (&a, path, 4 * CKT_MIB, page, page + span);
  unlink (path);
  KT_CHECK (fd >= 0);
  KT_CHECK_EQ (rc, 0);
  KT_CHECK_EQ (a.mode, CK_BUMP_MODE_MIXED_FILE_BACKED);
  memset (a.base + page, 0xee, span);
  KT_CHECK_EQ (a.base[page], 0xee);
  KT_CHECK_EQ (a.base[page + span - 1], 0xee);
  KT_CHECK (span <= sizeof back);
  KT_CHECK_EQ (pread (fd, back, span, 0), (ssize_t) span);
  KT_CHECK (ckt_is_weights (back, span));
  ck_bump_alloc_free (&a);
  /* Still unchanged once the private pages are gone.  */
  KT_CHECK_EQ (pread (fd, back, span, 0), (ssize_t) span);
  KT_CHECK (ckt_is_weights (back, span));
  close (fd);
}

KT_TEST (mixed_mode_free_unmaps_everything)
{
  char path[64];
  struct ckt_vm before, after;
  ck_bump_alloc_t a;
  size_t page = page_size ();
  int fds;

  force_mixed ();
  KT_CHECK (ckt_make_weights (path, 3 * page));
  fds = ckt_open_fds ();
  KT_CHECK (ckt_vm_usage (&before));
  int rc = ck_bump_alloc_init (&a, path, 2 * CKT_MIB, 0, 3 * page);
  unlink (path);
  KT_CHECK_EQ (rc, 0);
  KT_CHECK_EQ (ckt_open_fds (), fds);
  ck_bump_alloc_free (&a);
  KT_CHECK (ckt_is_reset (&a));
  KT_CHECK (ckt_vm_usage (&after));
  KT_CHECK (ckt_vm_equal (&before, &after));
  ck_bump_alloc_free (&a);
  KT_CHECK (ckt_is_reset (&a));
}

KT_MAIN (KT_CASE (mixed_mode_maps_weights_at_offset_zero),
         KT_CASE (mixed_mode_maps_weights_at_a_page_aligned_offset),
         KT_CASE (mixed_mode_with_weights_ending_the_region),
         KT_CASE (mixed_mode_with_no_weights_is_all_zero),
         KT_CASE (writing_the_weights_does_not_change_the_file),
         KT_CASE (mixed_mode_free_unmaps_everything))
