/* guard_detect.c -- how often guarded sampling catches a use after
   free: runs a program (this one, with --child) that makes --allocs
   allocations of 16 to 256 bytes, 64 of them in a ring of live blocks,
   and, at --victims points spread over them (one by default,
   half-way), frees a 64-byte block and reads it after 1000 more
   allocations; --runs times, under the allocator preloaded in the
   environment.  Prints the runs, those that ended in kamepool's report
   of the use after free, and those that ended otherwise; then the
   victims read (a run ends at its first catch: the child stores the
   number of the victim it is about to read where the parent finds it)
   and the share of them caught, with its 95 % Wilson interval.

   With sampling by bytes and exponential gaps, whether one block is
   guarded does not depend on the blocks before it, so each victim is
   a trial of its own, and the share caught per victim is the share of
   runs in which a program with one such use after free is caught:
   many victims a run measure a chance too small for one a run to
   show.  Reading a freed block that is not guarded is harmless here.
   When KAME_POOL_GUARD_SAMPLE is set to a number of bytes, the model,
   1 - exp (-64 / rate), is printed beside the share.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#define _GNU_SOURCE 1

#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define RING 64
/* Allocations between a victim's free and its read.  */
#define LATER 1000
/* Victims freed and not yet read, at most: LATER + 1 with a victim at
   every allocation.  */
#define PENDING 2048

/* The allocation at which victim V of N is freed: half a spacing in,
   then every (ALLOCS - LATER) / N allocations, so that the last one is
   read before the end (one victim: half-way).  */
static size_t
victim_at (size_t allocs, size_t n, size_t v)
{
  unsigned __int128 x = (unsigned __int128) 2 * v * (allocs - LATER);
  return (size_t) ((x + allocs) / (2 * (unsigned __int128) n));
}

static volatile int sink;

/* The program with the bug.  Before each read of a freed victim, its
   number goes to *READING.  */
static int
child (size_t allocs, size_t victims, uint64_t seed,
       volatile size_t *reading)
{
  char *ring[RING] = { NULL };
  static char *pending[PENDING];
  size_t freed = 0, read = 0;   /* victims freed and read so far */
  size_t free_at = victim_at (allocs, victims, 0);
  size_t read_at = free_at + LATER;
  int sum = 0;
  for (size_t i = 0; i < allocs; i++)
    {
      size_t n = i == free_at ? 64 : 16 + kb_below (&seed, 241);
      char *p = malloc (n);
      if (p == NULL)
        kb_die ("guard_detect", "malloc failed");
      p[0] = (char) i;
      if (i == free_at)
        {
          pending[freed % PENDING] = p;
          free (p);
          freed++;
          free_at = freed < victims ? victim_at (allocs, victims, freed)
                                    : SIZE_MAX;
        }
      else
        {
          size_t k = i % RING;
          free (ring[k]);
          ring[k] = p;
        }
      if (i == read_at)
        {
          *reading = read;
          /* The use after free.  */
          sum += *(volatile char *) pending[read % PENDING];
          read++;
          read_at = read < victims ? victim_at (allocs, victims, read) + LATER
                                   : SIZE_MAX;
        }
    }
  for (size_t k = 0; k < RING; k++)
    free (ring[k]);
  sink = sum;
  return 0;
}

/* The 95 % Wilson score interval of a share of K in N.  */
static void
wilson (double k, double n, double *lo, double *hi)
{
  const double z = 1.959963984540054;
  double z2 = z * z;
  double mid = (k + z2 / 2) / (n + z2);
  double half = z / (n + z2) * sqrt (k * (n - k) / n + z2 / 4);
  *lo = k > 0 ? mid - half : 0;
  *hi = mid + half;
}

int
main (int argc, char **argv)
{
  size_t runs = 100, allocs = 10000000, victims = 1, child_seed = 0;
  size_t index_fd = 0;
  int is_child = 0;
  const struct kb_opt opts[] = {
    { "runs", KB_SIZE, &runs, "runs of the program (default 100)" },
    { "allocs", KB_SIZE, &allocs,
      "allocations per run (default 10000000)" },
    { "victims", KB_SIZE, &victims,
      "uses after free per run, each of a 64-byte block read 1000 "
      "allocations after its free, spread over the run (default 1, "
      "half-way)" },
    { "child", KB_FLAG, &is_child, "be the program with the bug" },
    { "seed", KB_SIZE, &child_seed, "the child's sizes (set by the parent)" },
    { "index-fd", KB_SIZE, &index_fd,
      "where the child says which victim it reads (set by the parent)" },
    { NULL, KB_FLAG, NULL, NULL }
  };
  kb_parse (argc, argv, "Share of runs in which guarded sampling catches "
            "a use after free of a 64-byte block.", opts);
  kb_require (argv[0], allocs >= 2002, "--allocs must be at least 2002");
  kb_require (argv[0], victims >= 1 && victims <= allocs - LATER,
              "--victims must be from 1 to --allocs minus 1000");
  size_t page = (size_t) sysconf (_SC_PAGESIZE);
  if (is_child)
    {
      volatile size_t *reading = mmap (NULL, page, PROT_READ | PROT_WRITE,
                                       MAP_SHARED, (int) index_fd, 0);
      if (reading == MAP_FAILED)
        kb_die (argv[0], "cannot map --index-fd");
      return child (allocs, victims, child_seed * 0x9e3779b97f4a7c15u + 1,
                    reading);
    }

  int shared = memfd_create ("guard_detect", 0);
  if (shared < 0 || ftruncate (shared, (off_t) page) != 0)
    kb_die (argv[0], "cannot make the shared page");
  volatile size_t *reading = mmap (NULL, page, PROT_READ | PROT_WRITE,
                                   MAP_SHARED, shared, 0);
  if (reading == MAP_FAILED)
    kb_die (argv[0], "cannot map the shared page");
  size_t caught = 0, other = 0, exposed = 0;
  double t0 = kb_now ();
  for (size_t r = 0; r < runs; r++)
    {
      *reading = SIZE_MAX;
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
          char a[32], v[32], s[32], f[32];
          snprintf (a, sizeof a, "%zu", allocs);
          snprintf (v, sizeof v, "%zu", victims);
          snprintf (s, sizeof s, "%zu", r);
          snprintf (f, sizeof f, "%d", shared);
          execl ("/proc/self/exe", argv[0], "--child", "--allocs", a,
                 "--victims", v, "--seed", s, "--index-fd", f,
                 (char *) NULL);
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
      size_t last = *reading;
      if (strstr (err, "guarded block: use after free (read)") != NULL
          && WIFSIGNALED (status) && WTERMSIG (status) == SIGABRT
          && last != SIZE_MAX)
        {
          caught++;
          exposed += last + 1;
        }
      else if (!WIFEXITED (status) || WEXITSTATUS (status) != 0
               || last != victims - 1)
        other++;
      else
        exposed += victims;
    }
  printf ("runs %zu caught %zu other_endings %zu seconds %.1f\n", runs,
          caught, other, kb_now () - t0);
  double lo = 0, hi = 1;
  if (exposed > 0)
    wilson ((double) caught, (double) exposed, &lo, &hi);
  printf ("victims per run %zu, read %zu, caught %zu: %.3g per victim "
          "(95 %% interval %.3g to %.3g)", victims, exposed, caught,
          exposed > 0 ? (double) caught / (double) exposed : 0.0, lo, hi);
  /* The rate as kamepool reads it: a number of bytes, no suffix.  */
  const char *rate = getenv ("KAME_POOL_GUARD_SAMPLE");
  size_t bytes;
  if (rate != NULL && rate[strspn (rate, "0123456789")] == '\0'
      && kb_parse_size (rate, &bytes) == 0 && bytes > 0)
    printf (", model 1 - exp (-64 / %zu) = %.3g", bytes,
            -expm1 (-64.0 / (double) bytes));
  printf ("\n");
  return 0;
}
