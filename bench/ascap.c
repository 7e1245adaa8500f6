/* ascap.c -- address-space capacity: how much can a process malloc when
   its address space is limited (ulimit -v, RLIMIT_AS, as some batch
   systems and containers set it)?  A child process lowers RLIMIT_AS to
   200 MiB and allocates blocks of one size (68 KiB by default) until
   malloc returns NULL.  An allocator that reserves address space far
   ahead of its use, aligns big blocks to big boundaries, or keeps
   guard gaps gets less of the limit as memory.  Prints the bytes it
   got (higher is better); an allocator that aborts instead of
   returning NULL makes the run fail, with the bytes in the message.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "bench.h"

/* What the child tells the parent, in a shared page, kept up to date
   as it goes: if the allocator kills the process, the count so far is
   still there.  */
struct tally
{
  volatile unsigned long long blocks;
  volatile long vmsize_kib;     /* when the limit was set */
  volatile int done;            /* malloc returned NULL */
};

static void
fill (struct tally *t, size_t size, size_t limit)
{
  struct rlimit rl;
  unsigned long long cap = (unsigned long long) limit / size + 1;

  rl.rlim_cur = rl.rlim_max = limit;
  if (setrlimit (RLIMIT_AS, &rl) != 0)
    {
      perror ("ascap: setrlimit");
      _exit (2);
    }
  t->vmsize_kib = kb_status_kib ("ascap", "VmSize");
  /* Never runs for long: the limit bounds the count (cap is only a
     guard against an allocator that hands out more than it maps).  */
  alarm (60);
  while (t->blocks < cap)
    {
      char *p = malloc (size);
      if (p == NULL)
        {
          t->done = 1;
          _exit (0);
        }
      /* Written, so the block is real; one byte, so that this measures
         address space and not the machine's memory.  */
      p[0] = 1;
      t->blocks++;
    }
  fputs ("ascap: malloc gave more than the limit allows\n", stderr);
  _exit (1);
}

int
main (int argc, char **argv)
{
  size_t size = (size_t) 68 << 10, limit = (size_t) 200 << 20;
  int quick = 0, status;
  struct tally *t;
  pid_t pid;
  double bytes;
  const struct kb_opt opts[] = {
    { "size", KB_SIZE, &size, "block size (default 68k)" },
    { "limit", KB_SIZE, &limit, "RLIMIT_AS of the child (default 200m)" },
    { "quick", KB_FLAG, &quick, "accepted for the driver; as fast as is" },
    { NULL, KB_FLAG, NULL, NULL }
  };

  kb_parse (argc, argv, "Bytes malloc gives under RLIMIT_AS;"
            " prints capacity_mib.", opts);
  kb_require (argv[0], size >= 1 && size <= limit,
              "need 1 <= --size <= --limit");
  kb_require (argv[0], limit >= ((size_t) 16 << 20)
              && limit <= ((size_t) 1 << 40),
              "--limit must be between 16m and 1 TiB");

  /* Mapped before the fork, so it does not count against the child's
     limit after it.  */
  t = mmap (NULL, sizeof *t, PROT_READ | PROT_WRITE,
            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (t == MAP_FAILED)
    kb_die (argv[0], "mmap of the shared page failed");
  fflush (stdout);
  pid = fork ();
  if (pid < 0)
    kb_die (argv[0], "fork failed");
  if (pid == 0)
    fill (t, size, limit);
  if (waitpid (pid, &status, 0) != pid)
    kb_die (argv[0], "waitpid failed");
  bytes = (double) t->blocks * (double) size;
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0 || !t->done)
    {
      fprintf (stderr, "%s: the child ", argv[0]);
      if (WIFSIGNALED (status))
        fprintf (stderr, "was killed by signal %d (%s)",
                 WTERMSIG (status), strsignal (WTERMSIG (status)));
      else
        fprintf (stderr, "exited with status %d",
                 WIFEXITED (status) ? WEXITSTATUS (status) : -1);
      fprintf (stderr, " after %llu blocks (%.1f MiB) instead of seeing"
               " malloc return NULL\n", t->blocks, bytes / 1048576.0);
      return 1;
    }
  printf ("RESULT bench=ascap size=%zu limit=%zu vmsize_kib=%ld"
          " blocks=%llu bytes=%.0f capacity_mib=%.1f\n", size, limit,
          t->vmsize_kib, t->blocks, bytes, bytes / 1048576.0);
  return 0;
}
