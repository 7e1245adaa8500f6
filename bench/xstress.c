/* xstress.c -- blocks of 1 byte to 1 MiB kept live in many threads and
   handed between them, for a fixed time.  Each thread allocates blocks
   of log-uniform sizes (every octave the same share of requests, so
   most of the bytes are in the large ones) and puts each one either in
   a slot of its own, freeing the block that was there, or, half of
   the time, in a random slot of an array shared by all threads,
   swapped atomically, freeing the block it takes out, which another
   thread allocated most of the time.  Every block is written and
   checked at free: its first 64 bytes, one word in each 4 KiB page and
   its last word, so that every page is faulted in as a program that
   uses the block would fault it, without turning the run into a test
   of memset.

   Large blocks across many threads are where kamepool spent most of
   its time in the kernel (issue 36: 16 threads at 1 MiB, 4 threads at
   256 KiB).  Prints malloc/free pairs per second, user and system time
   and minor faults (getrusage) of the timed part, and the peak RSS.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "bench.h"

#define DENSE 64

struct shared
{
  /* Each slot is swapped atomically, so exactly one thread gets the
     old block and frees it; stop is set once by main (relaxed: it only
     ends the loop, it publishes nothing).  */
  _Atomic kb_handle *slot;
  size_t nslots, local, max;
  size_t ops_each;              /* with --ops: each thread's count */
  _Atomic int stop;
  pthread_barrier_t start;
};

struct worker
{
  struct shared *s;
  const char *prog;
  uint64_t rng;
  size_t first, last;           /* the shared slots it fills first */
  unsigned long long ops;
};

static void *
stress (void *arg)
{
  struct worker *w = arg;
  struct shared *s = w->s;
  const char *prog = w->prog;
  kb_handle *own = calloc (s->local, sizeof *own);
  unsigned long long n = 0;
  size_t i;

  if (own == NULL)
    kb_die (prog, "out of memory for a thread's slots");
  /* Fill this thread's slots and its share of the shared ones before
     the clock starts: the timed part is the steady state, not the
     first faults of an empty heap, which would be most of a short
     run.  */
  for (i = 0; i < s->local; i++)
    own[i] = kb_block_new (prog, kb_log_uniform (&w->rng, 1, s->max), DENSE);
  for (i = w->first; i < w->last; i++)
    atomic_store_explicit (&s->slot[i],
                           kb_block_new (prog,
                                         kb_log_uniform (&w->rng, 1, s->max),
                                         DENSE), memory_order_relaxed);
  pthread_barrier_wait (&s->start);
  while (!atomic_load_explicit (&s->stop, memory_order_relaxed)
         && (s->ops_each == 0 || n < s->ops_each))
    {
      int b;
      for (b = 0; b < 64; b++)
        {
          size_t len = kb_log_uniform (&w->rng, 1, s->max);
          kb_handle h = kb_block_new (prog, len, DENSE), old;
          if (kb_below (&w->rng, 2) == 0)
            {
              size_t j = (size_t) kb_below (&w->rng, s->local);
              old = own[j];
              own[j] = h;
            }
          else
            old = atomic_exchange_explicit
                    (&s->slot[kb_below (&w->rng, s->nslots)], h,
                     memory_order_acq_rel);
          if (old != 0)
            kb_block_free (prog, old, DENSE, s->max);
        }
      n += 64;
    }
  /* The thread's own blocks end with it, checked; the shared ones
     outlive it and are checked by main.  */
  for (i = 0; i < s->local; i++)
    if (own[i] != 0)
      kb_block_free (prog, own[i], DENSE, s->max);
  free (own);
  w->ops = n;
  return NULL;
}

static double
tv_seconds (struct timeval tv)
{
  return (double) tv.tv_sec + (double) tv.tv_usec * 1e-6;
}

int
main (int argc, char **argv)
{
  size_t threads = 16, slots = 1024, local = 16, max = (size_t) 1 << 20;
  size_t seed = 1, ops = 0, i;
  double seconds = 3, t0, elapsed;
  int quick = 0;
  unsigned long long total = 0, live = 0;
  long peak_kib;
  struct rusage ru0, ru1;
  struct shared s;
  struct worker *w;
  pthread_t *tid;
  uint64_t rng;
  const struct kb_opt opts[] = {
    { "threads", KB_SIZE, &threads, "threads (default 16)" },
    { "max", KB_SIZE, &max, "largest block (default 1m); the smallest is 1" },
    { "slots", KB_SIZE, &slots, "shared slots (default 1024)" },
    { "local", KB_SIZE, &local, "slots of each thread (default 16)" },
    { "seconds", KB_DOUBLE, &seconds, "time to run (default 3)" },
    { "ops", KB_SIZE, &ops, "with it, a fixed count of malloc/free pairs"
      " per thread\n                 (rounded up to 64) instead of"
      " --seconds" },
    { "seed", KB_SIZE, &seed, "random seed (default 1)" },
    { "quick", KB_FLAG, &quick, "smoke run: 0.3 seconds" },
    { NULL, KB_FLAG, NULL, NULL }
  };

  kb_parse (argc, argv, "Blocks of 1 byte to --max handed between threads,"
            " checked;\nprints ops_per_sec, sys_seconds and minflt.", opts);
  if (quick)
    seconds = 0.3;
  kb_require (argv[0], threads >= 1 && threads <= 1024,
              "--threads must be between 1 and 1024");
  kb_require (argv[0], slots >= 1 && slots <= ((size_t) 1 << 24),
              "--slots must be between 1 and 16777216");
  kb_require (argv[0], local >= 1 && local <= ((size_t) 1 << 20),
              "--local must be between 1 and 1048576");
  kb_require (argv[0], max >= 1 && max <= ((size_t) 1 << 30),
              "--max must be between 1 and 1g");
  kb_require (argv[0], seconds > 0 && seconds <= 3600,
              "--seconds must be above 0 and at most 3600");
  kb_require (argv[0], ops <= ((size_t) 1 << 32),
              "--ops must be at most 4g");

  s.slot = kb_xcalloc (argv[0], slots, sizeof *s.slot);
  for (i = 0; i < slots; i++)
    atomic_init (&s.slot[i], 0);
  s.nslots = slots;
  s.local = local;
  s.max = max;
  s.ops_each = ops;
  atomic_init (&s.stop, 0);
  if (pthread_barrier_init (&s.start, NULL, (unsigned) threads + 1) != 0)
    kb_die (argv[0], "pthread_barrier_init failed");
  w = kb_xcalloc (argv[0], threads, sizeof *w);
  tid = kb_xcalloc (argv[0], threads, sizeof *tid);
  rng = seed;
  for (i = 0; i < threads; i++)
    {
      w[i].s = &s;
      w[i].prog = argv[0];
      w[i].rng = kb_rand (&rng);
      w[i].first = slots * i / threads;
      w[i].last = slots * (i + 1) / threads;
      if (pthread_create (&tid[i], NULL, stress, &w[i]) != 0)
        kb_die (argv[0], "pthread_create failed");
    }

  pthread_barrier_wait (&s.start);
  getrusage (RUSAGE_SELF, &ru0);
  t0 = kb_now ();
  /* With --ops the threads stop by themselves, and the time is what
     they took.  */
  if (ops == 0)
    {
      kb_sleep (seconds);
      atomic_store_explicit (&s.stop, 1, memory_order_relaxed);
    }
  for (i = 0; i < threads; i++)
    {
      pthread_join (tid[i], NULL);
      total += w[i].ops;
    }
  elapsed = kb_now () - t0;
  getrusage (RUSAGE_SELF, &ru1);
  peak_kib = kb_status_kib (argv[0], "VmHWM");

  for (i = 0; i < slots; i++)
    {
      kb_handle h = atomic_load_explicit (&s.slot[i], memory_order_relaxed);
      if (h != 0)
        live += kb_block_free (argv[0], h, DENSE, max);
    }
  pthread_barrier_destroy (&s.start);
  free (s.slot);
  free (w);
  free (tid);
  printf ("RESULT bench=xstress threads=%zu max=%zu slots=%zu local=%zu"
          " ops=%llu seconds=%.3f ops_per_sec=%.4g user_seconds=%.3f"
          " sys_seconds=%.3f minflt=%ld peak_mib=%.1f shared_live_mib=%.1f\n",
          threads, max, slots, local, total, elapsed,
          (double) total / elapsed,
          tv_seconds (ru1.ru_utime) - tv_seconds (ru0.ru_utime),
          tv_seconds (ru1.ru_stime) - tv_seconds (ru0.ru_stime),
          ru1.ru_minflt - ru0.ru_minflt, peak_kib / 1024.0,
          (double) live / 1048576.0);
  return 0;
}
