/* mixed_large.c -- small objects mixed with large buffers: a ring of
   live slots where each step replaces a random slot, now and then with a
   buffer of 64 KiB..8 MiB (log-uniform) whose every page is written, as
   a program would use it.  Shows whether large buffers are reused or go
   back to the kernel and fault in again.  Prints ops per second.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

int
main (int argc, char **argv)
{
  size_t live = 256, every = 16, small_max = 1024, large_min = 65536;
  size_t large_max = (size_t) 8 << 20, seed = 1, i, max_ops = 0;
  size_t *len, live_bytes = 0, peak_live = 0;
  double seconds = 0.5, t0, t1, elapsed;
  int quick = 0;
  unsigned long long ops = 0, large = 0;
  char **slot;
  uint64_t rng;
  const struct kb_opt opts[] = {
    { "live", KB_SIZE, &live, "live slots (default 256)" },
    { "every", KB_SIZE, &every, "one step in EVERY is large (default 16)" },
    { "small-max", KB_SIZE, &small_max, "largest small object (1024)" },
    { "large-min", KB_SIZE, &large_min, "smallest large buffer (64k)" },
    { "large-max", KB_SIZE, &large_max, "largest large buffer (8m)" },
    { "seed", KB_SIZE, &seed, "random seed (default 1)" },
    { "seconds", KB_DOUBLE, &seconds, "time to run (default 0.5)" },
    { "ops", KB_SIZE, &max_ops,
      "stop after OPS steps instead (a multiple of 64), so that every"
      " allocator does the same work" },
    { "quick", KB_FLAG, &quick, "smoke run: 0.05 seconds" },
    { NULL, KB_FLAG, NULL, NULL }
  };

  kb_parse (argc, argv, "Small objects mixed with large buffers;"
            " prints ops_per_sec.", opts);
  if (quick)
    seconds = 0.05;
  kb_require (argv[0], live >= 1 && live <= ((size_t) 1 << 20),
              "--live must be between 1 and 1048576");
  kb_require (argv[0], every >= 1, "--every must be at least 1");
  kb_require (argv[0], small_max >= 16, "--small-max must be at least 16");
  kb_require (argv[0], large_min >= 1 && large_min <= large_max
              && large_max <= ((size_t) 1 << 30),
              "need 1 <= --large-min <= --large-max <= 1 GiB");

  kb_require (argv[0], max_ops % 64 == 0, "--ops must be a multiple of 64");
  slot = kb_xcalloc (argv[0], live, sizeof *slot);
  len = kb_xcalloc (argv[0], live, sizeof *len);
  rng = seed;
  t0 = kb_now ();
  do
    {
      int b;
      for (b = 0; b < 64; b++)
        {
          size_t j = (size_t) kb_below (&rng, live), n, k;
          int is_large = kb_below (&rng, every) == 0;
          n = is_large ? kb_log_uniform (&rng, large_min, large_max)
                       : kb_log_uniform (&rng, 16, small_max);
          free (slot[j]);
          live_bytes -= len[j];
          slot[j] = malloc (n);
          len[j] = n;
          live_bytes += n;
          if (live_bytes > peak_live)
            peak_live = live_bytes;
          if (slot[j] == NULL)
            kb_die (argv[0], "malloc failed");
          for (k = 0; k < n; k += 4096)
            slot[j][k] = (char) k;
          slot[j][n - 1] = 1;
          large += (unsigned long long) is_large;
        }
      ops += 64;
      t1 = kb_now ();
    }
  while (max_ops != 0 ? ops < max_ops : t1 - t0 < seconds);
  elapsed = t1 - t0;

  for (i = 0; i < live; i++)
    free (slot[i]);
  free (slot);
  free (len);
  printf ("RESULT bench=mixed_large live=%zu every=%zu ops=%llu large=%llu"
          " seconds=%.3f ops_per_sec=%.4g peak_live_mib=%.1f\n", live,
          every, ops, large, elapsed, (double) ops / elapsed,
          (double) peak_live / 1048576);
  return 0;
}
