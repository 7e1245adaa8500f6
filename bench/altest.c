/* altest.c -- random replacement in a big live set: every thread owns
   a table of many slots (256 Ki by default) filled with blocks of
   skewed sizes up to 1 KiB, and each step frees a random slot's block
   and allocates one of a new size there.  The live set stays the same
   size while its layout is stirred for a long time, which is where an
   allocator's free lists lose their order and its memory fragments.
   With several threads each has its own table: no frees are remote,
   what is measured is the scaling of the thread-local paths.  Fixed
   work, so every allocator stirs its heap as long; prints replacements
   per second, and the peak RSS above the baseline against the live
   bytes.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

struct worker
{
  char **slot;
  uint32_t *len;
  size_t slots, min, max;
  unsigned long long ops, live;
  uint64_t rng;
  pthread_barrier_t *filled;
};

static void *
stir (void *arg)
{
  struct worker *w = arg;
  char **slot = w->slot;
  uint32_t *len = w->len;
  unsigned long long i, live = 0;
  /* The thread fills its own table, so its blocks come from its own
     heap or cache, as a thread building its data would get them.  */
  for (i = 0; i < w->slots; i++)
    {
      size_t n = kb_pareto (&w->rng, w->min, w->max);
      slot[i] = malloc (n);
      if (slot[i] == NULL)
        {
          fputs ("altest: malloc failed while filling\n", stderr);
          exit (1);
        }
      slot[i][0] = (char) i;
      slot[i][n - 1] = (char) i;
      len[i] = (uint32_t) n;
      live += n;
    }
  /* Everyone starts stirring together, after every table is full.  */
  pthread_barrier_wait (w->filled);
  for (i = 0; i < w->ops; i++)
    {
      size_t j = (size_t) kb_below (&w->rng, w->slots);
      size_t n = kb_pareto (&w->rng, w->min, w->max);
      free (slot[j]);
      live -= len[j];
      slot[j] = malloc (n);
      if (slot[j] == NULL)
        {
          fputs ("altest: malloc failed\n", stderr);
          exit (1);
        }
      slot[j][0] = (char) i;
      slot[j][n - 1] = (char) i;
      len[j] = (uint32_t) n;
      live += n;
    }
  /* The live bytes at the end, when the heap is as stirred as it gets;
     the main thread compares the peak RSS with them.  */
  w->live = live;
  for (i = 0; i < w->slots; i++)
    free (slot[i]);
  return NULL;
}

int
main (int argc, char **argv)
{
  size_t threads = 1, slots = (size_t) 256 << 10, min = 16, max = 1024;
  size_t ops = 16, seed = 1, i;
  int quick = 0;
  double t0, elapsed;
  unsigned long long total = 0, live = 0;
  long base, hwm;
  struct worker *w;
  pthread_t *tid;
  pthread_barrier_t filled;
  uint64_t rng;
  const struct kb_opt opts[] = {
    { "threads", KB_SIZE, &threads, "threads, each with a table (1)" },
    { "slots", KB_SIZE, &slots, "slots per thread (default 256k)" },
    { "min", KB_SIZE, &min, "smallest block (default 16)" },
    { "max", KB_SIZE, &max, "largest block (default 1k)" },
    { "ops", KB_SIZE, &ops, "replacements per thread, times slots (16)" },
    { "seed", KB_SIZE, &seed, "random seed (default 1)" },
    { "quick", KB_FLAG, &quick, "smoke run: 32k slots, 4 x slots" },
    { NULL, KB_FLAG, NULL, NULL }
  };

  kb_parse (argc, argv, "Random replacement in a big live set, a table"
            " per thread;\nprints ops_per_sec and rss_per_live (peak RSS"
            " over live bytes).", opts);
  if (quick)
    {
      slots = (size_t) 32 << 10;
      ops = 4;
    }
  kb_require (argv[0], threads >= 1 && threads <= 1024,
              "--threads must be between 1 and 1024");
  kb_require (argv[0], slots >= 1 && slots <= ((size_t) 1 << 26),
              "--slots must be between 1 and 67108864");
  kb_require (argv[0], min >= 1 && min <= max && max <= UINT32_MAX,
              "need 1 <= --min <= --max < 4 GiB");
  kb_require (argv[0], ops >= 1 && ops <= 10000,
              "--ops must be between 1 and 10000");

  w = kb_xcalloc (argv[0], threads, sizeof *w);
  tid = kb_xcalloc (argv[0], threads, sizeof *tid);
  if (pthread_barrier_init (&filled, NULL, (unsigned) threads + 1) != 0)
    kb_die (argv[0], "pthread_barrier_init failed");
  /* The tables are the program's, not the heap's: allocated and made
     resident here, before the baseline.  */
  for (i = 0; i < threads; i++)
    {
      w[i].slot = kb_xcalloc (argv[0], slots, sizeof *w[i].slot);
      w[i].len = kb_xcalloc (argv[0], slots, sizeof *w[i].len);
      kb_touch (w[i].slot, slots * sizeof *w[i].slot);
      kb_touch (w[i].len, slots * sizeof *w[i].len);
    }
  base = kb_status_kib (argv[0], "VmRSS");
  rng = seed;
  for (i = 0; i < threads; i++)
    {
      w[i].slots = slots;
      w[i].min = min;
      w[i].max = max;
      w[i].ops = (unsigned long long) ops * slots;
      w[i].rng = kb_rand (&rng);
      w[i].filled = &filled;
      if (pthread_create (&tid[i], NULL, stir, &w[i]) != 0)
        kb_die (argv[0], "pthread_create failed");
    }
  pthread_barrier_wait (&filled);
  t0 = kb_now ();
  for (i = 0; i < threads; i++)
    {
      pthread_join (tid[i], NULL);
      total += w[i].ops;
      live += w[i].live;
      free (w[i].slot);
      free (w[i].len);
    }
  /* From the common start to the last thread's end (its frees of the
     table included: a small part, and the same for everyone).  */
  elapsed = kb_now () - t0;
  hwm = kb_status_kib (argv[0], "VmHWM");
  pthread_barrier_destroy (&filled);
  free (w);
  free (tid);
  /* The peak above the baseline against the live bytes: the share the
     allocator needs on top of what was asked for, at its worst.  */
  printf ("RESULT bench=altest threads=%zu slots=%zu min=%zu max=%zu"
          " ops=%llu seconds=%.3f ops_per_sec=%.4g live_kib=%llu"
          " base_kib=%ld hwm_kib=%ld rss_per_live=%.4g\n", threads, slots,
          min, max, total, elapsed, (double) total / elapsed, live >> 10,
          base, hwm, hwm > base ? (double) (hwm - base) * 1024.0
                                  / (double) live : 0.0);
  return 0;
}
