/* refused.c -- every layout and weights file that ck_bump_alloc_init
   refuses: -1, the documented errno, the arena reset, and no mapping
   or descriptor left behind.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include "kptest.h"
#include "ckernel-test.h"

#include <sys/stat.h>

static size_t
page_size (void)
{
  return (size_t) sysconf (_SC_PAGESIZE);
}

static void
set_mixed (bool force)
{
  if (force)
    setenv ("CK_BUMP_FORCE_MIXED", "1", 1);
  else
    unsetenv ("CK_BUMP_FORCE_MIXED");
  unsetenv ("CK_BUMP_DISABLE_MIXED");
}

/* Whether ck_bump_alloc_init (ALLOC, PATH, TOTAL, WB, AB) fails with
   ERR, resets the arena and leaks nothing.  A first call warms up stdio
   and the allocators, so that their own mappings do not count.  */
static bool
refused_with (const char *path, size_t total, size_t wb, size_t ab, int err)
{
  ck_bump_alloc_t a;
  struct ckt_vm before, after;

  if (ck_bump_alloc_init (&a, path, total, wb, ab) == 0)
    {
      ck_bump_alloc_free (&a);
      printf ("note: the warm-up call succeeded\n");
      return false;
    }
  int fds = ckt_open_fds ();
  if (fds < 0 || !ckt_vm_usage (&before))
    return false;
  memset (&a, 0xab, sizeof a);
  errno = 0;
  int rc = ck_bump_alloc_init (&a, path, total, wb, ab);
  int e = errno;
  if (!ckt_vm_usage (&after))
    return false;
  if (rc != -1 || e != err)
    {
      printf ("note: returned %d, errno %d (%s), expected -1, errno %d "
              "(%s)\n", rc, e, strerror (e), err, strerror (err));
      return false;
    }
  if (!ckt_is_reset (&a))
    {
      printf ("note: the arena is not reset\n");
      return false;
    }
  if (ckt_open_fds () != fds)
    {
      printf ("note: %d descriptors before, %d after\n", fds,
              ckt_open_fds ());
      return false;
    }
  return ckt_vm_equal (&before, &after);
}

KT_TEST (null_arena_is_refused)
{
  errno = 0;
  KT_CHECK_EQ (ck_bump_alloc_init (NULL, NULL, CKT_MIB, 0, 0), -1);
  KT_CHECK_EQ (errno, EINVAL);
}

KT_TEST (zero_total_size_is_refused)
{
  set_mixed (false);
  KT_CHECK (refused_with (NULL, 0, 0, 0, EINVAL));
  set_mixed (true);
  KT_CHECK (refused_with ("/dev/zero", 0, 0, 0, EINVAL));
}

KT_TEST (weights_after_activations_is_refused)
{
  set_mixed (false);
  KT_CHECK (refused_with (NULL, CKT_MIB, 8192, 4096, EINVAL));
}

KT_TEST (activations_past_total_size_is_refused)
{
  set_mixed (false);
  KT_CHECK (refused_with (NULL, CKT_MIB, 0, CKT_MIB + 1, EINVAL));
  KT_CHECK (refused_with (NULL, CKT_MIB, CKT_MIB + 1, CKT_MIB + 1,
                          EINVAL));
}

KT_TEST (unmappable_size_is_refused_with_enomem)
{
  set_mixed (false);
  KT_CHECK (refused_with (NULL, SIZE_MAX, 0, 0, ENOMEM));
  KT_CHECK (refused_with (NULL, (size_t) 1 << 60, 0, 0, ENOMEM));
  set_mixed (true);
  KT_CHECK (refused_with ("/dev/zero", SIZE_MAX, 0, 0, ENOMEM));
}

KT_TEST (failed_anonymous_then_failed_mixed_leaves_nothing)
{
  char path[64];

  set_mixed (false);
  KT_CHECK (ckt_make_weights (path, 4096));
  bool ok = refused_with (path, (size_t) 1 << 60, 0, 4096, ENOMEM);
  unlink (path);
  KT_CHECK (ok);
}

/* What ck_bump_alloc_init (&a, PATH, TOTAL, 0, 0) writes to stderr,
   in BUF, when it fails; false if it succeeds or stderr cannot be
   caught.  */
static bool
refusal_text (const char *path, size_t total, char *buf, size_t size)
{
  FILE *tmp = tmpfile ();
  int saved = dup (2);
  if (tmp == NULL || saved < 0)
    return false;
  fflush (stderr);
  dup2 (fileno (tmp), 2);
  ck_bump_alloc_t a;
  int rc = ck_bump_alloc_init (&a, path, total, 0, 0);
  fflush (stderr);
  dup2 (saved, 2);
  close (saved);
  rewind (tmp);
  size_t n = fread (buf, 1, size - 1, tmp);
  buf[n] = '\0';
  fclose (tmp);
  if (rc == 0)
    {
      ck_bump_alloc_free (&a);
      printf ("note: ck_bump_alloc_init succeeded\n");
      return false;
    }
  return true;
}

/* ck_bump_alloc_init(3): one line on failure, also when the anonymous
   region and then the mixed mode failed.  */
KT_TEST (failed_anonymous_then_failed_mixed_writes_one_line)
{
  char text[1024];

  set_mixed (false);
  KT_CHECK (refusal_text ("/dev/zero", SIZE_MAX, text, sizeof text));
  KT_CHECK_STR_EQ (text, "ck_bump_alloc_init: cannot allocate "
                   "18446744073709551615 bytes of anonymous memory "
                   "(Cannot allocate memory); mapping /dev/zero instead: "
                   "total_size 18446744073709551615 is too large\n");
  KT_CHECK (refusal_text ("/nonexistent/weights.bin", (size_t) 1 << 60,
                          text, sizeof text));
  KT_CHECK_STR_EQ (text, "ck_bump_alloc_init: cannot allocate "
                   "1152921504606846976 bytes of anonymous memory "
                   "(Cannot allocate memory); mapping "
                   "/nonexistent/weights.bin instead: cannot open weights "
                   "file /nonexistent/weights.bin: No such file or "
                   "directory\n");
}

KT_TEST (both_environment_flags_are_refused)
{
  setenv ("CK_BUMP_FORCE_MIXED", "1", 1);
  setenv ("CK_BUMP_DISABLE_MIXED", "1", 1);
  KT_CHECK (refused_with (NULL, CKT_MIB, 0, 0, EINVAL));
}

KT_TEST (forced_mixed_without_a_path_is_refused)
{
  set_mixed (true);
  KT_CHECK (refused_with (NULL, CKT_MIB, 0, 0, EINVAL));
}

KT_TEST (unaligned_weights_base_is_refused_in_mixed_mode)
{
  char path[64];

  set_mixed (true);
  KT_CHECK (ckt_make_weights (path, 8192));
  bool ok = refused_with (path, CKT_MIB, page_size () + 8,
                          page_size () + 8 + 4096, EINVAL);
  unlink (path);
  KT_CHECK (ok);
}

KT_TEST (missing_weights_file_is_refused)
{
  char path[64];

  set_mixed (true);
  KT_CHECK (ckt_make_weights (path, 0));
  KT_CHECK_EQ (unlink (path), 0);
  KT_CHECK (refused_with (path, CKT_MIB, 0, 4096, ENOENT));
}

KT_TEST (short_weights_file_is_refused)
{
  char path[64];

  set_mixed (true);
  KT_CHECK (ckt_make_weights (path, 3 * 4096 - 1));
  bool ok = refused_with (path, CKT_MIB, 0, 3 * 4096, EINVAL);
  /* One byte more is enough.  */
  ck_bump_alloc_t a;
  int rc = ck_bump_alloc_init (&a, path, CKT_MIB, 0, 3 * 4096 - 1);
  unlink (path);
  KT_CHECK (ok);
  KT_CHECK_EQ (rc, 0);
  KT_CHECK_EQ (a.mode, CK_BUMP_MODE_MIXED_FILE_BACKED);
  ck_bump_alloc_free (&a);
}

KT_TEST (directory_as_weights_file_is_refused)
{
  char dir[] = "/tmp/ckernel-dir-XXXXXX";

  set_mixed (true);
  KT_CHECK (mkdtemp (dir) != NULL);
  bool ok = refused_with (dir, CKT_MIB, 0, 0, EISDIR);
  rmdir (dir);
  KT_CHECK (ok);
}

KT_TEST (fifo_as_weights_file_is_refused_without_blocking)
{
  char path[64];

  set_mixed (true);
  KT_CHECK (ckt_make_weights (path, 0));
  KT_CHECK_EQ (unlink (path), 0);
  KT_CHECK_EQ (mkfifo (path, 0600), 0);
  bool ok = refused_with (path, CKT_MIB, 0, 0, EINVAL);
  unlink (path);
  KT_CHECK (ok);
}

KT_TEST (device_as_weights_file_is_refused)
{
  set_mixed (true);
  KT_CHECK (refused_with ("/dev/null", CKT_MIB, 0, 0, EINVAL));
  KT_CHECK (refused_with ("/dev/zero", CKT_MIB, 0, 4096, EINVAL));
}

KT_MAIN (KT_CASE (null_arena_is_refused),
         KT_CASE (zero_total_size_is_refused),
         KT_CASE (weights_after_activations_is_refused),
         KT_CASE (activations_past_total_size_is_refused),
         KT_CASE (unmappable_size_is_refused_with_enomem),
         KT_CASE (failed_anonymous_then_failed_mixed_leaves_nothing),
         KT_CASE (failed_anonymous_then_failed_mixed_writes_one_line),
         KT_CASE (both_environment_flags_are_refused),
         KT_CASE (forced_mixed_without_a_path_is_refused),
         KT_CASE (unaligned_weights_base_is_refused_in_mixed_mode),
         KT_CASE (missing_weights_file_is_refused),
         KT_CASE (short_weights_file_is_refused),
         KT_CASE (directory_as_weights_file_is_refused),
         KT_CASE (fifo_as_weights_file_is_refused_without_blocking),
         KT_CASE (device_as_weights_file_is_refused))
