/* xmix.c -- a random-size mix (log-uniform 16 B..64 KiB) with frees
   across N threads: each thread swaps its new block into a random slot
   of one shared array and frees what it took out, which another thread
   allocated (N-1)/N of the time.  Prints replacements per second.

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
  /* Each slot is exchanged atomically, so exactly one thread gets the
     old block and frees it; stop is set once by main (relaxed: it only
     ends the loop, it publishes nothing).  */
  _Atomic (char *) *slot;
  size_t nslots, min, max;
  _Atomic int stop;
  pthread_barrier_t start;
};

struct worker
{
  struct shared *s;
  uint64_t rng;
  unsigned long long ops;
};

static void *
mix (void *arg)
{
  struct worker *w = arg;
  struct shared *s = w->s;
  unsigned long long n = 0;

  pthread_barrier_wait (&s->start);
  while (!atomic_load_explicit (&s->stop, memory_order_relaxed))
    {
      int b;
      for (b = 0; b < 256; b++)
        {
          size_t len = kb_log_uniform (&w->rng, s->min, s->max);
          size_t j = (size_t) kb_below (&w->rng, s->nslots);
          char *p = malloc (len), *old;
          if (p == NULL)
            {
              fputs ("xmix: malloc failed\n", stderr);
              exit (1);
            }
          p[0] = (char) b;
          p[len - 1] = (char) b;
          old = atomic_exchange_explicit (&s->slot[j], p,
                                          memory_order_acq_rel);
          free (old);
        }
      n += 256;
    }
  w->ops = n;
  return NULL;
}

int
main (int argc, char **argv)
{
  size_t threads = 2, slots = 4096, min = 16, max = 65536, seed = 1, i;
  double seconds = 0.5, t0, elapsed;
  int quick = 0;
  unsigned long long total = 0;
  struct shared s;
  struct worker *w;
  pthread_t *tid;
  uint64_t rng;
  struct timespec nap;
  const struct kb_opt opts[] = {
    { "threads", KB_SIZE, &threads, "threads (default 2)" },
    { "slots", KB_SIZE, &slots, "shared slots (default 4096)" },
    { "min", KB_SIZE, &min, "smallest block (default 16)" },
    { "max", KB_SIZE, &max, "largest block (default 64k)" },
    { "seed", KB_SIZE, &seed, "random seed (default 1)" },
    { "seconds", KB_DOUBLE, &seconds, "time to run (default 0.5)" },
    { "quick", KB_FLAG, &quick, "smoke run: 0.05 seconds" },
    { NULL, KB_FLAG, NULL, NULL }
  };

  kb_parse (argc, argv, "Random sizes with cross-thread frees;"
            " prints ops_per_sec.", opts);
  if (quick)
    seconds = 0.05;
  kb_require (argv[0], threads >= 1 && threads <= 1024,
              "--threads must be between 1 and 1024");
  kb_require (argv[0], slots >= 1 && slots <= ((size_t) 1 << 24),
              "--slots must be between 1 and 16777216");
  kb_require (argv[0], min >= 1 && min <= max && max <= ((size_t) 1 << 30),
              "need 1 <= --min <= --max <= 1 GiB");

  s.slot = kb_xcalloc (argv[0], slots, sizeof *s.slot);
  for (i = 0; i < slots; i++)
    atomic_init (&s.slot[i], NULL);
  s.nslots = slots;
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
      if (pthread_create (&tid[i], NULL, mix, &w[i]) != 0)
        kb_die (argv[0], "pthread_create failed");
    }

  pthread_barrier_wait (&s.start);
  t0 = kb_now ();
  nap.tv_sec = (time_t) seconds;
  nap.tv_nsec = (long) ((seconds - (double) nap.tv_sec) * 1e9);
  while (nanosleep (&nap, &nap) != 0)
    continue;
  atomic_store_explicit (&s.stop, 1, memory_order_relaxed);
  for (i = 0; i < threads; i++)
    {
      pthread_join (tid[i], NULL);
      total += w[i].ops;
    }
  elapsed = kb_now () - t0;

  for (i = 0; i < slots; i++)
    free (atomic_load_explicit (&s.slot[i], memory_order_relaxed));
  pthread_barrier_destroy (&s.start);
  free (s.slot);
  free (w);
  free (tid);
  printf ("RESULT bench=xmix threads=%zu slots=%zu min=%zu max=%zu"
          " ops=%llu seconds=%.3f ops_per_sec=%.4g\n", threads, slots, min,
          max, total, elapsed, (double) total / elapsed);
  return 0;
}
