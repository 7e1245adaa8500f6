/* large_random.c -- big buffers of random sizes: every thread keeps a
   few live blocks of 5..25 MiB (uniform, to the byte, so hardly ever a
   multiple of a page) and replaces a random one each step, writing
   every page of the new block as a program filling a buffer would.
   Shows whether big blocks are reused (and how much of the old pages
   that keeps resident), or unmapped and faulted in again each time,
   and whether two threads doing it serialize on one lock.  Prints
   replacements per second (the driver adds the peak RSS).

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

struct shared
{
  size_t live, min, max;
  _Atomic int stop;             /* relaxed: it only ends the loops */
  pthread_barrier_t start;
};

struct worker
{
  struct shared *s;
  uint64_t rng;
  unsigned long long ops;
  double end;                   /* when the last step ended */
};

static void *
replace (void *arg)
{
  struct worker *w = arg;
  struct shared *s = w->s;
  char **slot = calloc (s->live, sizeof *slot);
  unsigned long long n = 0;
  size_t i;

  if (slot == NULL)
    {
      fputs ("large_random: out of memory for the slots\n", stderr);
      exit (1);
    }
  pthread_barrier_wait (&s->start);
  while (!atomic_load_explicit (&s->stop, memory_order_relaxed))
    {
      size_t j = (size_t) kb_below (&w->rng, s->live);
      size_t len = s->min + (size_t) kb_below (&w->rng, s->max - s->min + 1);
      size_t k;
      free (slot[j]);
      slot[j] = malloc (len);
      if (slot[j] == NULL)
        {
          fputs ("large_random: malloc failed\n", stderr);
          exit (1);
        }
      for (k = 0; k < len; k += 4096)
        slot[j][k] = (char) n;
      slot[j][len - 1] = (char) n;
      n++;
    }
  w->ops = n;
  w->end = kb_now ();
  for (i = 0; i < s->live; i++)
    free (slot[i]);
  free (slot);
  return NULL;
}

int
main (int argc, char **argv)
{
  size_t threads = 2, live = 4, min = (size_t) 5 << 20;
  size_t max = (size_t) 25 << 20, seed = 1, i;
  double seconds = 1.0, t0, end = 0;
  int quick = 0;
  unsigned long long total = 0;
  struct shared s;
  struct worker *w;
  pthread_t *tid;
  uint64_t rng;
  struct timespec nap;
  const struct kb_opt opts[] = {
    { "threads", KB_SIZE, &threads, "threads (default 2)" },
    { "live", KB_SIZE, &live, "live blocks per thread (default 4)" },
    { "min", KB_SIZE, &min, "smallest block (default 5m)" },
    { "max", KB_SIZE, &max, "largest block (default 25m)" },
    { "seed", KB_SIZE, &seed, "random seed (default 1)" },
    { "seconds", KB_DOUBLE, &seconds, "time to run (default 1)" },
    { "quick", KB_FLAG, &quick, "smoke run: 0.1 seconds" },
    { NULL, KB_FLAG, NULL, NULL }
  };

  kb_parse (argc, argv, "Random big blocks, every page written, a few"
            " per thread;\nprints ops_per_sec.", opts);
  if (quick)
    seconds = 0.1;
  kb_require (argv[0], threads >= 1 && threads <= 64,
              "--threads must be between 1 and 64");
  kb_require (argv[0], live >= 1 && live <= 1024,
              "--live must be between 1 and 1024");
  kb_require (argv[0], min >= 1 && min <= max && max <= ((size_t) 1 << 32),
              "need 1 <= --min <= --max <= 4 GiB");

  s.live = live;
  s.min = min;
  s.max = max;
  atomic_init (&s.stop, 0);
  if (pthread_barrier_init (&s.start, NULL, (unsigned) threads + 1) != 0)
    kb_die (argv[0], "pthread_barrier_init failed");
  w = kb_xcalloc (argv[0], threads, sizeof *w);
  tid = kb_xcalloc (argv[0], threads, sizeof *tid);
  rng = seed;
  for (i = 0; i < threads; i++)
    {
      w[i].s = &s;
      w[i].rng = kb_rand (&rng);
      if (pthread_create (&tid[i], NULL, replace, &w[i]) != 0)
        kb_die (argv[0], "pthread_create failed");
    }

  pthread_barrier_wait (&s.start);
  t0 = kb_now ();
  nap.tv_sec = (time_t) seconds;
  nap.tv_nsec = (long) ((seconds - (double) nap.tv_sec) * 1e9);
  while (nanosleep (&nap, &nap) != 0)
    continue;
  atomic_store_explicit (&s.stop, 1, memory_order_relaxed);
  /* Each thread ends its step and then frees its blocks: the time is
     up to the last step's end, without those frees.  */
  for (i = 0; i < threads; i++)
    {
      pthread_join (tid[i], NULL);
      total += w[i].ops;
      if (w[i].end > end)
        end = w[i].end;
    }

  pthread_barrier_destroy (&s.start);
  free (w);
  free (tid);
  printf ("RESULT bench=large_random threads=%zu live=%zu min=%zu max=%zu"
          " ops=%llu seconds=%.3f ops_per_sec=%.4g hwm_kib=%ld\n", threads,
          live, min, max, total, end - t0, (double) total / (end - t0),
          kb_status_kib (argv[0], "VmHWM"));
  return 0;
}
