/* kprun.c -- the benchmark driver's runner: starts one benchmark with a
   chosen allocator preloaded and reports the child's peak RSS and exit
   status, so the shell driver needs no GNU time and no /proc parsing.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

static volatile sig_atomic_t timed_out;

static void
on_alarm (int sig)
{
  (void) sig;
  timed_out = 1;
}

static void
usage (FILE *f)
{
  fputs ("Usage: kprun [--preload LIB] [--env NAME=VALUE]... "
         "[--timeout SECONDS] -- PROGRAM [ARG]...\n"
         "Runs PROGRAM with LIB in LD_PRELOAD (none: LD_PRELOAD removed)\n"
         "and prints 'RUSAGE maxrss_kib=N wall=S user=S sys=S minflt=N\n"
         "status=...' when it ends.\n"
         "Exits 0 only if PROGRAM exited 0.\n", f);
}

int
main (int argc, char **argv)
{
  const char *preload = NULL;
  unsigned timeout = 600;
  int i, status;
  pid_t pid, w;
  struct rusage ru;
  struct sigaction sa;
  double t0, t1;
  char how[64];

  for (i = 1; i < argc; i++)
    {
      if (strcmp (argv[i], "--") == 0)
        {
          i++;
          break;
        }
      else if (strcmp (argv[i], "--help") == 0)
        {
          usage (stdout);
          return 0;
        }
      else if (strcmp (argv[i], "--preload") == 0 && i + 1 < argc)
        preload = argv[++i];
      else if (strcmp (argv[i], "--env") == 0 && i + 1 < argc)
        {
          char *eq = strchr (argv[++i], '=');
          if (eq == NULL || eq == argv[i])
            {
              fprintf (stderr, "kprun: --env wants NAME=VALUE, not '%s'\n",
                       argv[i]);
              return 2;
            }
          *eq = '\0';
          if (setenv (argv[i], eq + 1, 1) != 0)
            {
              perror ("kprun: setenv");
              return 2;
            }
        }
      else if (strcmp (argv[i], "--timeout") == 0 && i + 1 < argc)
        {
          size_t t;
          if (kb_parse_size (argv[++i], &t) != 0 || t == 0 || t > 86400)
            {
              fprintf (stderr, "kprun: bad --timeout '%s'\n", argv[i]);
              return 2;
            }
          timeout = (unsigned) t;
        }
      else
        {
          usage (stderr);
          return 2;
        }
    }
  if (i >= argc)
    {
      usage (stderr);
      return 2;
    }

  memset (&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sigemptyset (&sa.sa_mask);
  sigaction (SIGALRM, &sa, NULL);

  fflush (stdout);
  t0 = kb_now ();
  pid = fork ();
  if (pid < 0)
    {
      perror ("kprun: fork");
      return 2;
    }
  if (pid == 0)
    {
      /* Only the child gets the allocator, so the runner's own heap
         never counts, and glibc runs see no inherited preload.  */
      if (preload != NULL && *preload != '\0')
        setenv ("LD_PRELOAD", preload, 1);
      else
        unsetenv ("LD_PRELOAD");
      execv (argv[i], argv + i);
      fprintf (stderr, "kprun: cannot run %s: %s\n", argv[i],
               strerror (errno));
      _exit (127);
    }

  alarm (timeout);
  for (;;)
    {
      w = wait4 (pid, &status, 0, &ru);
      if (w == pid)
        break;
      if (w < 0 && errno == EINTR && timed_out)
        {
          kill (pid, SIGKILL);
          timed_out = 0;
          continue;
        }
      if (w < 0 && errno != EINTR)
        {
          perror ("kprun: wait4");
          return 2;
        }
    }
  alarm (0);
  t1 = kb_now ();

  if (WIFEXITED (status))
    snprintf (how, sizeof how, "exit:%d", WEXITSTATUS (status));
  else if (WIFSIGNALED (status))
    snprintf (how, sizeof how, "signal:%d%s", WTERMSIG (status),
              WTERMSIG (status) == SIGKILL ? "(timeout?)" : "");
  else
    snprintf (how, sizeof how, "unknown");
  /* ru_maxrss is in KiB on Linux.  The minor faults are the child's
     (and its threads'), for programs that do not count their own, such
     as mimalloc-bench's (KP_BENCH_MIBENCH in run-bench).  status comes
     last: the driver takes the rest of the line as the reason.  */
  printf ("RUSAGE maxrss_kib=%ld wall=%.3f user=%.3f sys=%.3f minflt=%ld"
          " status=%s\n", ru.ru_maxrss, t1 - t0,
          (double) ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6,
          (double) ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6,
          ru.ru_minflt, how);
  return WIFEXITED (status) && WEXITSTATUS (status) == 0 ? 0 : 1;
}
