/* envflags.c -- the spellings of CK_BUMP_FORCE_MIXED and
   CK_BUMP_DISABLE_MIXED, the switch words of lib/env-flag.h shared with
   libkamepool: unset, empty, 0, no, false and off (any case) are off;
   1, yes, true and on are on; any other word is refused with one line
   on stderr and leaves the switch off.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include "kptest.h"
#include "ckernel-test.h"

static const char *const off_spellings[] =
  { "", "0", "false", "no", "off", "FALSE", "No", "fAlSe", "NO", "Off" };
static const char *const on_spellings[] =
  { "1", "yes", "true", "on", "TRUE", "Yes", "ON" };
static const char *const refused_spellings[] =
  { "2", "off!", "00", "enable", "none", "flase" };

#define COUNT(a) (sizeof (a) / sizeof (a)[0])

/* The mode that ck_bump_alloc_init picks with the flags as they are
   now, or -1 with errno set.  */
static int
mode_now (const char *path)
{
  ck_bump_alloc_t a;

  if (ck_bump_alloc_init (&a, path, 2 * CKT_MIB, 0, 4096) != 0)
    return -1;
  int mode = (int) a.mode;
  ck_bump_alloc_free (&a);
  return mode;
}

KT_TEST (force_mixed_off_spellings_keep_anonymous_mode)
{
  char path[64];
  int modes[COUNT (off_spellings) + 1];

  unsetenv ("CK_BUMP_DISABLE_MIXED");
  KT_CHECK (ckt_make_weights (path, 4096));
  unsetenv ("CK_BUMP_FORCE_MIXED");
  modes[0] = mode_now (path);
  for (size_t i = 0; i < COUNT (off_spellings); i++)
    {
      setenv ("CK_BUMP_FORCE_MIXED", off_spellings[i], 1);
      modes[i + 1] = mode_now (path);
    }
  unlink (path);
  for (size_t i = 0; i < COUNT (modes); i++)
    if (modes[i] != CK_BUMP_MODE_ANON)
      KT_FAILF ("CK_BUMP_FORCE_MIXED=\"%s\" gave mode %d",
                i == 0 ? "(unset)" : off_spellings[i - 1], modes[i]);
}

KT_TEST (force_mixed_on_spellings_select_mixed_mode)
{
  char path[64];
  int modes[COUNT (on_spellings)];

  unsetenv ("CK_BUMP_DISABLE_MIXED");
  KT_CHECK (ckt_make_weights (path, 4096));
  for (size_t i = 0; i < COUNT (on_spellings); i++)
    {
      setenv ("CK_BUMP_FORCE_MIXED", on_spellings[i], 1);
      modes[i] = mode_now (path);
    }
  unlink (path);
  for (size_t i = 0; i < COUNT (modes); i++)
    if (modes[i] != CK_BUMP_MODE_MIXED_FILE_BACKED)
      KT_FAILF ("CK_BUMP_FORCE_MIXED=\"%s\" gave mode %d",
                on_spellings[i], modes[i]);
}

/* With the mixed mode forced, an "on" CK_BUMP_DISABLE_MIXED conflicts
   (EINVAL) and an "off" one changes nothing: that shows how it reads
   its value.  */
KT_TEST (disable_mixed_spellings)
{
  char path[64];
  int off[COUNT (off_spellings)], on[COUNT (on_spellings)];
  int on_errno[COUNT (on_spellings)];

  KT_CHECK (ckt_make_weights (path, 4096));
  setenv ("CK_BUMP_FORCE_MIXED", "1", 1);
  for (size_t i = 0; i < COUNT (off_spellings); i++)
    {
      setenv ("CK_BUMP_DISABLE_MIXED", off_spellings[i], 1);
      off[i] = mode_now (path);
    }
  for (size_t i = 0; i < COUNT (on_spellings); i++)
    {
      setenv ("CK_BUMP_DISABLE_MIXED", on_spellings[i], 1);
      errno = 0;
      on[i] = mode_now (path);
      on_errno[i] = errno;
    }
  unlink (path);
  for (size_t i = 0; i < COUNT (off); i++)
    if (off[i] != CK_BUMP_MODE_MIXED_FILE_BACKED)
      KT_FAILF ("CK_BUMP_DISABLE_MIXED=\"%s\" gave mode %d",
                off_spellings[i], off[i]);
  for (size_t i = 0; i < COUNT (on); i++)
    if (on[i] != -1 || on_errno[i] != EINVAL)
      KT_FAILF ("CK_BUMP_DISABLE_MIXED=\"%s\" gave mode %d, errno %d",
                on_spellings[i], on[i], on_errno[i]);
}

/* Each refused word: one line on stderr, and the anonymous mode.  */
KT_TEST (refused_spellings_are_reported_and_leave_the_switch_off)
{
  char path[64], tmp[] = "/tmp/ckt-envflags-XXXXXX";

  unsetenv ("CK_BUMP_DISABLE_MIXED");
  KT_CHECK (ckt_make_weights (path, 4096));
  int fd = mkstemp (tmp);
  KT_CHECK (fd >= 0);
  unlink (tmp);
  for (size_t i = 0; i < COUNT (refused_spellings); i++)
    {
      char err[1024], want[512];
      setenv ("CK_BUMP_FORCE_MIXED", refused_spellings[i], 1);
      KT_CHECK (ftruncate (fd, 0) == 0 && lseek (fd, 0, SEEK_SET) == 0);
      fflush (stderr);
      int saved = dup (2);
      dup2 (fd, 2);
      int mode = mode_now (path);
      fflush (stderr);
      dup2 (saved, 2);
      close (saved);
      ssize_t n = pread (fd, err, sizeof err - 1, 0);
      err[n > 0 ? n : 0] = '\0';
      snprintf (want, sizeof want, "ck_bump_alloc_init: "
                "CK_BUMP_FORCE_MIXED=%s: expected 1, yes, true, on, 0, no, "
                "false or off (any case); keeping off\n",
                refused_spellings[i]);
      if (mode != CK_BUMP_MODE_ANON)
        {
          unlink (path);
          KT_FAILF ("CK_BUMP_FORCE_MIXED=\"%s\" gave mode %d",
                    refused_spellings[i], mode);
        }
      if (strcmp (err, want) != 0)
        {
          unlink (path);
          KT_FAILF ("stderr \"%s\", not \"%s\"", err, want);
        }
    }
  close (fd);
  unlink (path);
}

KT_MAIN (KT_CASE (force_mixed_off_spellings_keep_anonymous_mode),
         KT_CASE (refused_spellings_are_reported_and_leave_the_switch_off),
         KT_CASE (force_mixed_on_spellings_select_mixed_mode),
         KT_CASE (disable_mixed_spellings))
