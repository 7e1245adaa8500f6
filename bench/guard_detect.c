/* guard_detect.c -- how often guarded sampling catches one use after
   free: runs a program (this one, with --child) that makes --allocs
   allocations of 16 to 256 bytes, 64 of them in a ring of live blocks,
   and once, half-way, frees a 64-byte block and reads it after 1000
   more allocations; --runs times, under the allocator preloaded in the
   environment.  Prints the runs, those that ended in kamepool's report
   of the use after free, and those that ended otherwise.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define RING 64

/* The program with the bug.  */
static int
child (size_t allocs, uint64_t seed)
{
  char *ring[RING] = { NULL };
  char *victim = NULL;
  size_t at = allocs / 2;
  int sum = 0;
  for (size_t i = 0; i < allocs; i++)
    {
      size_t n = i == at ? 64 : 16 + kb_below (&seed, 241);
      char *p = malloc (n);
      if (p == NULL)
        kb_die ("guard_detect", "malloc failed");
      p[0] = (char) i;
      if (i == at)
        {
          victim = p;
          free (victim);
          continue;
        }
      size_t k = i % RING;
      free (ring[k]);
      ring[k] = p;
      if (i == at + 1000)
        sum += *(volatile char *) victim;   /* the use after free */
    }
  for (size_t k = 0; k < RING; k++)
    free (ring[k]);
  return sum == 12345;
}

int
main (int argc, char **argv)
{
  size_t runs = 100, allocs = 10000000, child_seed = 0;
  int is_child = 0;
  const struct kb_opt opts[] = {
    { "runs", KB_SIZE, &runs, "runs of the program (default 100)" },
    { "allocs", KB_SIZE, &allocs,
      "allocations per run (default 10000000)" },
    { "child", KB_FLAG, &is_child, "be the program with the bug" },
    { "seed", KB_SIZE, &child_seed, "the child's sizes (set by the parent)" },
    { NULL, KB_FLAG, NULL, NULL }
  };
  kb_parse (argc, argv, "Share of runs in which guarded sampling catches "
            "one use after free of a 64-byte block.", opts);
  kb_require (argv[0], allocs >= 2002, "--allocs must be at least 2002");
  if (is_child)
    return child (allocs, child_seed * 0x9e3779b97f4a7c15u + 1);

  size_t caught = 0, other = 0;
  double t0 = kb_now ();
  for (size_t r = 0; r < runs; r++)
    {
      int ep[2];
      if (pipe (ep) != 0)
        kb_die (argv[0], "pipe failed");
      pid_t pid = fork ();
      if (pid < 0)
        kb_die (argv[0], "fork failed");
      if (pid == 0)
        {
          dup2 (ep[1], 2);
          close (ep[0]);
          char a[32], s[32];
          snprintf (a, sizeof a, "%zu", allocs);
          snprintf (s, sizeof s, "%zu", r);
          execl ("/proc/self/exe", argv[0], "--child", "--allocs", a,
                 "--seed", s, (char *) NULL);
          _exit (127);
        }
      close (ep[1]);
      static char err[65536];
      size_t len = 0;
      ssize_t got;
      while ((got = read (ep[0], err + len, sizeof err - 1 - len)) > 0)
        len += (size_t) got;
      err[len] = '\0';
      close (ep[0]);
      int status;
      waitpid (pid, &status, 0);
      if (strstr (err, "guarded block: use after free (read)") != NULL
          && WIFSIGNALED (status) && WTERMSIG (status) == SIGABRT)
        caught++;
      else if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
        other++;
    }
  printf ("runs %zu caught %zu other_endings %zu seconds %.1f\n", runs,
          caught, other, kb_now () - t0);
  return 0;
}
