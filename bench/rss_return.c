/* rss_return.c -- does freed large memory go back to the kernel?
   Allocates a working set of large blocks (log-uniform sizes between
   --min and --max, every page written), frees all of it, and reads the
   resident set size (VmRSS) before the first round, at the last
   round's peak and after its frees.  Prints what is still resident
   above the first baseline, in percent of the working set: what the
   allocator keeps for itself.  Several rounds, so that what an earlier
   round left in a cache counts.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* VmRSS of this process in KiB, from /proc/self/status (read with
   stdio, which allocates only at the first open: the baseline is taken
   after that).  */
static long
rss_kib (const char *prog)
{
  char line[256];
  long kib = -1;
  FILE *f = fopen ("/proc/self/status", "r");
  if (f == NULL)
    kb_die (prog, "cannot open /proc/self/status");
  while (fgets (line, sizeof line, f) != NULL)
    if (strncmp (line, "VmRSS:", 6) == 0)
      kib = strtol (line + 6, NULL, 10);
  fclose (f);
  if (kib < 0)
    kb_die (prog, "no VmRSS line in /proc/self/status");
  return kib;
}

int
main (int argc, char **argv)
{
  size_t total = (size_t) 256 << 20, lo = 65536, hi = (size_t) 8 << 20;
  size_t rounds = 3, seed = 1, max_blocks, n = 0, r;
  int quick = 0;
  long before = 0, peak = 0, after = 0;
  char **block;
  uint64_t rng;
  const struct kb_opt opts[] = {
    { "total", KB_SIZE, &total, "working set per round (default 256m)" },
    { "min", KB_SIZE, &lo, "smallest block (default 64k)" },
    { "max", KB_SIZE, &hi, "largest block (default 8m)" },
    { "rounds", KB_SIZE, &rounds, "allocate/free rounds (default 3)" },
    { "seed", KB_SIZE, &seed, "random seed (default 1)" },
    { "quick", KB_FLAG, &quick, "smoke run: 32 MiB, 1 round" },
    { NULL, KB_FLAG, NULL, NULL }
  };

  kb_parse (argc, argv, "RSS left after freeing a large working set;"
            " prints retained_pct.", opts);
  if (quick)
    {
      total = (size_t) 32 << 20;
      rounds = 1;
    }
  kb_require (argv[0], lo >= 1 && lo <= hi && hi <= total,
              "need 1 <= --min <= --max <= --total");
  kb_require (argv[0], total <= ((size_t) 16 << 30),
              "--total must be at most 16 GiB");
  kb_require (argv[0], rounds >= 1, "--rounds must be at least 1");
  max_blocks = total / lo + 1;
  block = kb_xcalloc (argv[0], max_blocks, sizeof *block);
  rss_kib (argv[0]);
  before = rss_kib (argv[0]);
  rng = seed;
  for (r = 0; r < rounds; r++)
    {
      size_t sum = 0, i, k;
      for (n = 0; sum < total && n < max_blocks; n++)
        {
          size_t len = kb_log_uniform (&rng, lo, hi);
          if (len > total - sum)
            len = total - sum < lo ? lo : total - sum;
          block[n] = malloc (len);
          if (block[n] == NULL)
            kb_die (argv[0], "malloc failed");
          for (k = 0; k < len; k += 4096)
            block[n][k] = (char) k;
          block[n][len - 1] = 1;
          sum += len;
        }
      peak = rss_kib (argv[0]);
      for (i = 0; i < n; i++)
        free (block[i]);
      after = rss_kib (argv[0]);
    }
  free (block);
  printf ("RESULT bench=rss_return total=%zu blocks=%zu before_kib=%ld"
          " peak_kib=%ld after_kib=%ld retained_pct=%.3g\n", total, n,
          before, peak, after,
          peak > before ? 100.0 * (double) (after > before ? after - before : 0)
                          / (double) (peak - before) : 0.0);
  return 0;
}
