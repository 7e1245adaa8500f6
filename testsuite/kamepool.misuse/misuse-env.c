/* misuse-env.c -- kamepool.misuse: the values of KAME_POOL_ON_MISUSE,
   which the pool reads once, when it starts.  Each test runs this
   program again, from the start, with the variable set, and the new
   process frees a misaligned pointer (a check of every build, hardened
   or not, interposing or not): "abort" and an unset variable abort
   after the report, "report" only reports, and any other value is
   refused with a warning and aborts.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#define _GNU_SOURCE 1

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include "kame_pool.h"
#include "kptest.h"

static _Alignas (64) char buf[256];

/* In the process run again (KM_ENV_CHILD set): start the pool, write
   the pointer it is about to free to fd 3, free it, exit 0.  Before
   main, so that no test runs there.  */
__attribute__ ((__constructor__)) static void
km_env_child (void)
{
  if (getenv ("KM_ENV_CHILD") == NULL)
    return;
  /* No core for the abort (a pipe in core_pattern ignores the
     RLIMIT_CORE the parent set; exec made this process dumpable).  */
  prctl (PR_SET_DUMPABLE, 0, 0, 0, 0);
  kame_pool_free (kame_pool_malloc (1));
  char *p = buf + 8;
  __asm__ volatile ("" : "+r" (p));
  uintptr_t v = (uintptr_t) p;
  if (write (3, &v, sizeof v) != (ssize_t) sizeof v)
    _exit (3);
  close (3);
  kame_pool_free (p);
  _exit (0);
}

/* Run this program again with KAME_POOL_ON_MISUSE=VALUE (unset when
   NULL); its wait status in *STATUS, its stderr in ERR, the pointer it
   freed in *PTR.  */
static bool
run_with (const char *value, int *status, char *err, size_t size,
          uintptr_t *ptr)
{
  int ep[2], pp[2];
  if (pipe (ep) != 0 || pipe (pp) != 0)
    return false;
  fflush (stdout);
  pid_t pid = fork ();
  if (pid < 0)
    return false;
  if (pid == 0)
    {
      dup2 (ep[1], 2);
      dup2 (pp[1], 3);
      struct rlimit no_core = { 0, 0 };
      setrlimit (RLIMIT_CORE, &no_core);
      prctl (PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
      if (value != NULL)
        setenv ("KAME_POOL_ON_MISUSE", value, 1);
      else
        unsetenv ("KAME_POOL_ON_MISUSE");
      setenv ("KM_ENV_CHILD", "1", 1);
      execl ("/proc/self/exe", "misuse-env", (char *) NULL);
      _exit (127);
    }
  close (ep[1]);
  close (pp[1]);
  kt_read_all (ep[0], err, size);
  *ptr = 0;
  if (read (pp[0], ptr, sizeof *ptr) != (ssize_t) sizeof *ptr)
    *ptr = 0;
  close (pp[0]);
  return kt_wait (pid, status);
}

/* With KAME_POOL_ON_MISUSE=VALUE: stderr is WARNING (or nothing) then
   the report of the misaligned free, and the process dies of SIGABRT
   (ABORTS) or exits 0.  */
#define EXPECT(value, warning, aborts)                                  \
  do {                                                                  \
    static char err_[4096];                                             \
    char want_[512];                                                    \
    int st_;                                                            \
    uintptr_t p_;                                                       \
    KT_CHECK (run_with (value, &st_, err_, sizeof err_, &p_));          \
    if (p_ == 0)                                                        \
      KT_FAILF ("the process run again did not get to its free "        \
                "(status %#x): \"%s\"", (unsigned) st_, err_);          \
    snprintf (want_, sizeof want_, "%skamepool: free(): invalid pointer " \
              "(misaligned; no allocator's block): 0x%" PRIxPTR "\n",   \
              warning, p_);                                             \
    KT_CHECK_STR_EQ (err_, want_);                                      \
    if (aborts)                                                         \
      KT_CHECK (WIFSIGNALED (st_) && WTERMSIG (st_) == SIGABRT);        \
    else                                                                \
      KT_CHECK (WIFEXITED (st_) && WEXITSTATUS (st_) == 0);             \
  } while (0)

#define REFUSED "kamepool: KAME_POOL_ON_MISUSE=ignore: expected abort or " \
  "report; keeping abort\n"

KT_TEST (on_misuse_unset_aborts)
{
  EXPECT (NULL, "", true);
}

KT_TEST (on_misuse_abort_aborts)
{
  EXPECT ("abort", "", true);
}

KT_TEST (on_misuse_report_reports_and_goes_on)
{
  EXPECT ("report", "", false);
}

KT_TEST (on_misuse_unknown_value_is_refused_and_aborts)
{
  EXPECT ("ignore", REFUSED, true);
}

KT_MAIN (KT_CASE (on_misuse_unset_aborts),
         KT_CASE (on_misuse_abort_aborts),
         KT_CASE (on_misuse_report_reports_and_goes_on),
         KT_CASE (on_misuse_unknown_value_is_refused_and_aborts))
