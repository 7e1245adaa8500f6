/* larson.c -- larson-style churn with thread turnover: threads replace
   random slots of a shared array with new blocks of random sizes, and
   every epoch the threads are joined and fresh ones take over the slots
   of others, so the newcomers free what the departed allocated.  Prints
   replacements per second.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

struct worker
{
  char **slot;                  /* this epoch's range of the array */
  size_t nslots, min, max, ops;
  uint64_t rng;
};

static void *
churn (void *arg)
{
  struct worker *w = arg;
  size_t i;

  for (i = 0; i < w->ops; i++)
    {
      size_t j = (size_t) kb_below (&w->rng, w->nslots);
      size_t n = w->min + (size_t) kb_below (&w->rng, w->max - w->min + 1);
      free (w->slot[j]);
      w->slot[j] = malloc (n);
      if (w->slot[j] == NULL)
        {
          fputs ("larson: malloc failed\n", stderr);
          exit (1);
        }
      w->slot[j][0] = (char) i;
    }
  return NULL;
}

int
main (int argc, char **argv)
{
  size_t threads = 2, slots = 1000, min = 8, max = 1000, ops = 20000;
  size_t seed = 1, i, epoch = 0;
  double seconds = 0.5, t0, elapsed;
  int quick = 0;
  unsigned long long total = 0;
  char **array;
  struct worker *w;
  pthread_t *tid;
  uint64_t rng;
  const struct kb_opt opts[] = {
    { "threads", KB_SIZE, &threads, "threads per epoch (default 2)" },
    { "slots", KB_SIZE, &slots, "slots per thread (default 1000)" },
    { "min", KB_SIZE, &min, "smallest block (default 8)" },
    { "max", KB_SIZE, &max, "largest block (default 1000)" },
    { "ops", KB_SIZE, &ops, "replacements per thread per epoch (20000)" },
    { "seed", KB_SIZE, &seed, "random seed (default 1)" },
    { "seconds", KB_DOUBLE, &seconds, "time to run (default 0.5)" },
    { "quick", KB_FLAG, &quick, "smoke run: 0.05 seconds" },
    { NULL, KB_FLAG, NULL, NULL }
  };

  kb_parse (argc, argv, "Larson-style churn with thread turnover;"
            " prints ops_per_sec.", opts);
  if (quick)
    seconds = 0.05;
  kb_require (argv[0], threads >= 1 && threads <= 1024,
              "--threads must be between 1 and 1024");
  kb_require (argv[0], slots >= 1 && slots <= ((size_t) 1 << 24),
              "--slots must be between 1 and 16777216");
  kb_require (argv[0], min >= 1 && min <= max && max <= ((size_t) 1 << 30),
              "need 1 <= --min <= --max <= 1 GiB");
  kb_require (argv[0], ops >= 1, "--ops must be at least 1");

  array = kb_xcalloc (argv[0], threads * slots, sizeof *array);
  w = kb_xcalloc (argv[0], threads, sizeof *w);
  tid = kb_xcalloc (argv[0], threads, sizeof *tid);
  rng = seed;
  /* The main thread fills the array, so the first epoch's frees are
     remote too.  */
  for (i = 0; i < threads * slots; i++)
    {
      array[i] = malloc (min + (size_t) kb_below (&rng, max - min + 1));
      if (array[i] == NULL)
        kb_die (argv[0], "malloc failed while filling the array");
    }

  t0 = kb_now ();
  do
    {
      for (i = 0; i < threads; i++)
        {
          /* Rotate ranges: thread i of epoch e takes the range thread
             i + 1 had in epoch e - 1.  */
          w[i].slot = array + ((i + epoch) % threads) * slots;
          w[i].nslots = slots;
          w[i].min = min;
          w[i].max = max;
          w[i].ops = ops;
          w[i].rng = kb_rand (&rng);
          if (pthread_create (&tid[i], NULL, churn, &w[i]) != 0)
            kb_die (argv[0], "pthread_create failed");
        }
      for (i = 0; i < threads; i++)
        pthread_join (tid[i], NULL);
      total += (unsigned long long) ops * threads;
      epoch++;
      elapsed = kb_now () - t0;
    }
  while (elapsed < seconds);

  for (i = 0; i < threads * slots; i++)
    free (array[i]);
  free (array);
  free (w);
  free (tid);
  printf ("RESULT bench=larson threads=%zu slots=%zu min=%zu max=%zu"
          " epochs=%zu ops=%llu seconds=%.3f ops_per_sec=%.4g\n",
          threads, slots, min, max, epoch, total, elapsed,
          (double) total / elapsed);
  return 0;
}
