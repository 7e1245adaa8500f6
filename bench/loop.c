/* loop.c -- the single-thread malloc/free loop: one size, a ring of
   LIVE blocks where each step frees the oldest and allocates a new one,
   touching one byte of it.  With --live 1 it is the tight loop of the
   size sweep.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

int
main (int argc, char **argv)
{
  size_t size = 64, live = 1, i, batch;
  double seconds = 0.5, t0, t1, elapsed;
  int quick = 0;
  unsigned long long ops = 0;
  char **ring;
  const struct kb_opt opts[] = {
    { "size", KB_SIZE, &size, "block size in bytes (default 64; k/m/g)" },
    { "live", KB_SIZE, &live, "blocks kept alive in the ring (default 1)" },
    { "seconds", KB_DOUBLE, &seconds, "time to run (default 0.5)" },
    { "quick", KB_FLAG, &quick, "smoke run: 0.05 seconds" },
    { NULL, KB_FLAG, NULL, NULL }
  };

  kb_parse (argc, argv, "Tight malloc/free loop; prints ops_per_sec.", opts);
  if (quick)
    seconds = 0.05;
  kb_require (argv[0], size > 0, "--size must be at least 1");
  kb_require (argv[0], live > 0 && live <= ((size_t) 1 << 24),
              "--live must be between 1 and 16777216");
  kb_require (argv[0], size <= ((size_t) 4 << 30) / live,
              "--size times --live must stay under 4 GiB");

  ring = kb_xcalloc (argv[0], live, sizeof *ring);
  for (i = 0; i < live; i++)
    {
      ring[i] = malloc (size);
      if (ring[i] == NULL)
        kb_die (argv[0], "malloc failed while filling the ring");
      ring[i][0] = 1;
    }

  /* Read the clock about every millisecond, whatever the size costs.  */
  batch = size >= ((size_t) 1 << 20) ? 4 : size >= 65536 ? 64 : 1024;
  i = 0;
  t0 = kb_now ();
  do
    {
      size_t b;
      for (b = 0; b < batch; b++)
        {
          free (ring[i]);
          ring[i] = malloc (size);
          if (ring[i] == NULL)
            kb_die (argv[0], "malloc failed");
          ring[i][0] = (char) b;
          kb_escape (ring[i]);
          if (++i == live)
            i = 0;
        }
      ops += batch;
      t1 = kb_now ();
    }
  while (t1 - t0 < seconds);
  elapsed = t1 - t0;

  for (i = 0; i < live; i++)
    free (ring[i]);
  free (ring);
  printf ("RESULT bench=loop size=%zu live=%zu ops=%llu seconds=%.3f"
          " ops_per_sec=%.4g ns_per_op=%.4g\n", size, live, ops, elapsed,
          (double) ops / elapsed, elapsed * 1e9 / (double) ops);
  return 0;
}
