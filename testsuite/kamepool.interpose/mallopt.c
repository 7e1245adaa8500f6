/* mallopt.c -- kamepool.interpose: mallopt answers 1 or 0 for each of
   glibc's parameters exactly as kamepool_mallopt(3) says, and the two
   that map to settings change them: M_TRIM_THRESHOLD the large cache's
   cap, M_CHECK_ACTION what misuse does.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

/* kptest-requires: interpose */

#define _GNU_SOURCE 1

#include <malloc.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include "kame_pool.h"
#include "kptest.h"

KT_TEST (mallopt_answers_each_parameter_as_documented)
{
  static const struct
  {
    int param, value, want;
  } t[] = {
    { M_TRIM_THRESHOLD, 0, 1 }, { M_TRIM_THRESHOLD, 1 << 20, 1 },
    { M_TRIM_THRESHOLD, -1, 0 },
    { M_CHECK_ACTION, 3, 1 }, { M_CHECK_ACTION, 0, 1 },
    { M_PERTURB, 0, 1 }, { M_PERTURB, 0xa5, 0 },
    { M_MMAP_MAX, 0, 0 }, { M_MMAP_MAX, 65536, 1 }, { M_MMAP_MAX, -1, 0 },
    { M_MMAP_THRESHOLD, 0, 1 }, { M_MMAP_THRESHOLD, 32 << 20, 1 },
    { M_MMAP_THRESHOLD, (32 << 20) + 1, 0 }, { M_MMAP_THRESHOLD, -1, 0 },
    { M_TOP_PAD, 0, 1 }, { M_TOP_PAD, 1 << 20, 1 }, { M_TOP_PAD, -1, 0 },
    { M_ARENA_MAX, 1, 1 }, { M_ARENA_MAX, 0, 0 },
    { M_ARENA_TEST, 8, 1 }, { M_ARENA_TEST, 0, 0 },
    { M_MXFAST, 0, 1 }, { M_MXFAST, 160, 1 }, { M_MXFAST, 161, 0 },
    { 2, 1, 0 }, { 12345, 1, 0 }, { -9, 1, 0 }, { -1000, 0, 0 },
  };
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    {
      int got = mallopt (t[i].param, t[i].value);
      if (got != t[i].want)
        KT_FAILF ("mallopt (%d, %d) = %d, not %d", t[i].param, t[i].value,
                  got, t[i].want);
    }
}

KT_TEST (m_trim_threshold_sets_the_large_cache_cap)
{
  KT_CHECK_EQ (mallopt (M_TRIM_THRESHOLD, 3 << 20), 1);
  KT_CHECK_EQ (kame_pool_get_large_cache_cap (), (size_t) 3 << 20);
  KT_CHECK_EQ (mallopt (M_TRIM_THRESHOLD, 0), 1);
  KT_CHECK_EQ (kame_pool_get_large_cache_cap (), 0);
  KT_CHECK_EQ (mallopt (M_TRIM_THRESHOLD, -5), 0);
  KT_CHECK_EQ (kame_pool_get_large_cache_cap (), 0);
}

static _Alignas (64) char buf[64];

/* In a child: set M_CHECK_ACTION to ACTION, free a misaligned pointer,
   exit 0.  Its wait status.  */
static int
free_misaligned_after (int action)
{
  int fd[2];
  if (pipe (fd) != 0)
    return -1;
  fflush (stdout);
  pid_t pid = fork ();
  if (pid == 0)
    {
      dup2 (fd[1], 2);
      struct rlimit no_core = { 0, 0 };
      setrlimit (RLIMIT_CORE, &no_core);
      prctl (PR_SET_DUMPABLE, 0, 0, 0, 0);
      if (mallopt (M_CHECK_ACTION, action) != 1)
        _exit (3);
      char *p = buf + 8;
      __asm__ volatile ("" : "+r" (p));
      free (p);
      _exit (0);
    }
  close (fd[1]);
  char err[1024];
  kt_read_all (fd[0], err, sizeof err);
  int status;
  if (pid < 0 || !kt_wait (pid, &status))
    return -1;
  return strncmp (err, "kamepool: free(): invalid pointer (misaligned; ",
                  47) == 0 ? status : -2;
}

KT_TEST (m_check_action_chooses_between_abort_and_report)
{
  int s = free_misaligned_after (1);
  KT_CHECK (s >= 0 && WIFEXITED (s) && WEXITSTATUS (s) == 0);
  s = free_misaligned_after (3);
  KT_CHECK (s >= 0 && WIFSIGNALED (s) && WTERMSIG (s) == SIGABRT);
  s = free_misaligned_after (2);
  KT_CHECK (s >= 0 && WIFSIGNALED (s) && WTERMSIG (s) == SIGABRT);
}

KT_MAIN (KT_CASE (mallopt_answers_each_parameter_as_documented),
         KT_CASE (m_trim_threshold_sets_the_large_cache_cap),
         KT_CASE (m_check_action_chooses_between_abort_and_report))
