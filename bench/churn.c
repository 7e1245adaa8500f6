/* churn.c -- threads that come and go, then a program gone quiet.
   Rounds of N threads are created and joined; each thread replaces
   random slots of its own array with blocks of log-uniform sizes 16
   bytes..8 KiB, one time in 200 a block of 64 KiB..4 MiB, swaps one
   new block in four into a random slot of an exchange array shared by
   all threads and all rounds (so blocks are freed by another thread,
   often of a later round, than the one that allocated them), and
   grows an array of its own with realloc.  Every block is written
   whole and checked at free.  After the last round the program sleeps
   with no allocation at all, the exchange array still holding its
   blocks, and reads its RSS again: what the allocator gives back once
   a busy program goes idle.

   The pattern is that of mimalloc-bench's mstress (an idea, not its
   code), where kamepool gave pages back while the program was busy
   and faulted them in again (issue 36).  Prints the busy phase's
   seconds, user and system time and minor faults (getrusage), the
   peak RSS (VmHWM), and the RSS at the end of the busy phase and
   after the idle one (VmRSS).

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

/* Everything is written: these are the sizes a program uses whole.  */
#define DENSE SIZE_MAX

struct shared
{
  /* Each exchange slot is swapped atomically, so exactly one thread
     gets the old block.  */
  _Atomic kb_handle *xchg;
  size_t nxchg, slots, steps, large_max;
};

struct worker
{
  struct shared *s;
  uint64_t rng;
  const char *prog;
};

/* The element I of a thread's growing array.  */
static inline uint64_t
grow_value (uint64_t key, size_t i)
{
  return kb_mix (key ^ (uint64_t) i);
}

static void
grow_check (const char *prog, const uint64_t *a, uint64_t key, size_t i)
{
  if (a[i] != grow_value (key, i))
    {
      fprintf (stderr, "%s: the realloc'ed array %p is corrupt at element"
               " %zu\n", prog, (const void *) a, i);
      abort ();
    }
}

static void *
live (void *arg)
{
  struct worker *w = arg;
  struct shared *s = w->s;
  const char *prog = w->prog;
  kb_handle *local = calloc (s->slots, sizeof *local);
  uint64_t *grow = NULL, key = kb_rand (&w->rng);
  size_t len = 0, i, step;

  if (local == NULL)
    kb_die (prog, "out of memory for a thread's slots");
  for (step = 0; step < s->steps; step++)
    {
      size_t j = (size_t) kb_below (&w->rng, s->slots), n;
      kb_handle h;

      if (local[j] != 0)
        kb_block_free (prog, local[j], DENSE, s->large_max);
      if (kb_below (&w->rng, 200) == 0)
        n = kb_log_uniform (&w->rng, 65536, s->large_max);
      else
        n = kb_log_uniform (&w->rng, 16, 8192);
      h = kb_block_new (prog, n, DENSE);
      /* One block in four migrates: this thread keeps whatever the
         exchange held, which another thread (maybe long gone) made.  */
      if (kb_below (&w->rng, 4) == 0)
        h = atomic_exchange_explicit (&s->xchg[kb_below (&w->rng, s->nxchg)],
                                      h, memory_order_acq_rel);
      local[j] = h;

      /* The growing array: a few more elements every 16 steps, at the
         exact length (no doubling here: how realloc grows is the
         allocator's business).  The old part is spot-checked at each
         move and checked whole at the end.  */
      if (step % 16 == 15)
        {
          size_t add = 1 + (size_t) kb_below (&w->rng, 64);
          uint64_t *a = realloc (grow, (len + add) * sizeof *a);
          if (a == NULL)
            kb_die (prog, "realloc failed");
          grow = a;
          if (len != 0)
            {
              grow_check (prog, grow, key, 0);
              grow_check (prog, grow, key, len - 1);
              grow_check (prog, grow, key,
                          (size_t) kb_below (&w->rng, len));
            }
          for (i = len; i < len + add; i++)
            grow[i] = grow_value (key, i);
          len += add;
        }
    }
  for (i = 0; i < len; i++)
    grow_check (prog, grow, key, i);
  free (grow);
  for (i = 0; i < s->slots; i++)
    if (local[i] != 0)
      kb_block_free (prog, local[i], DENSE, s->large_max);
  free (local);
  return NULL;
}

static void
usage_now (struct rusage *ru)
{
  getrusage (RUSAGE_SELF, ru);
}

static double
tv_seconds (struct timeval tv)
{
  return (double) tv.tv_sec + (double) tv.tv_usec * 1e-6;
}

int
main (int argc, char **argv)
{
  size_t threads = 4, rounds = 25, scale = 50, exchange = 1000;
  size_t large_max = (size_t) 4 << 20, seed = 1, r, i;
  double idle = 1.5, t0, busy;
  int quick = 0;
  long base_kib, busy_kib, idle_kib, hwm_kib;
  unsigned long long live_bytes = 0;
  struct rusage ru0, ru1, ru2;
  struct shared s;
  struct worker *w;
  pthread_t *tid;
  uint64_t rng;
  const struct kb_opt opts[] = {
    { "threads", KB_SIZE, &threads, "threads per round (default 4)" },
    { "rounds", KB_SIZE, &rounds, "rounds of threads (default 25)" },
    { "scale", KB_SIZE, &scale,
      "work: 40 x SCALE slots, 100 x SCALE steps per thread (default 50)" },
    { "exchange", KB_SIZE, &exchange, "shared exchange slots (default 1000)" },
    { "large", KB_SIZE, &large_max, "largest block (default 4m)" },
    { "idle", KB_DOUBLE, &idle, "seconds of idleness at the end (1.5)" },
    { "seed", KB_SIZE, &seed, "random seed (default 1)" },
    { "quick", KB_FLAG, &quick, "smoke run: 4 rounds, scale 10, idle 0.3" },
    { NULL, KB_FLAG, NULL, NULL }
  };

  kb_parse (argc, argv, "Threads that come and go with migrating blocks,"
            " then idleness;\nprints seconds, sys_seconds, minflt and"
            " idle_rss_mib.", opts);
  if (quick)
    {
      rounds = 4;
      scale = 10;
      idle = 0.3;
    }
  kb_require (argv[0], threads >= 1 && threads <= 1024,
              "--threads must be between 1 and 1024");
  kb_require (argv[0], rounds >= 1, "--rounds must be at least 1");
  kb_require (argv[0], scale >= 1 && scale <= 100000,
              "--scale must be between 1 and 100000");
  kb_require (argv[0], exchange >= 1 && exchange <= ((size_t) 1 << 24),
              "--exchange must be between 1 and 16777216");
  kb_require (argv[0], large_max >= 65536 && large_max <= ((size_t) 1 << 30),
              "--large must be between 64k and 1g");
  kb_require (argv[0], idle <= 3600, "--idle must be at most 3600");

  s.xchg = kb_xcalloc (argv[0], exchange, sizeof *s.xchg);
  for (i = 0; i < exchange; i++)
    atomic_init (&s.xchg[i], 0);
  s.nxchg = exchange;
  s.slots = 40 * scale;
  s.steps = 100 * scale;
  s.large_max = large_max;
  w = kb_xcalloc (argv[0], threads, sizeof *w);
  tid = kb_xcalloc (argv[0], threads, sizeof *tid);
  kb_touch (s.xchg, exchange * sizeof *s.xchg);
  base_kib = kb_status_kib (argv[0], "VmRSS");
  rng = seed;

  usage_now (&ru0);
  t0 = kb_now ();
  for (r = 0; r < rounds; r++)
    {
      for (i = 0; i < threads; i++)
        {
          w[i].s = &s;
          w[i].rng = kb_rand (&rng);
          w[i].prog = argv[0];
          if (pthread_create (&tid[i], NULL, live, &w[i]) != 0)
            kb_die (argv[0], "pthread_create failed");
        }
      for (i = 0; i < threads; i++)
        pthread_join (tid[i], NULL);
    }
  busy = kb_now () - t0;
  usage_now (&ru1);
  busy_kib = kb_status_kib (argv[0], "VmRSS");

  /* Idle: no thread but this one, which only sleeps.  The blocks left
     in the exchange stay live, as a quiet server keeps its data.  */
  kb_sleep (idle);
  idle_kib = kb_status_kib (argv[0], "VmRSS");
  hwm_kib = kb_status_kib (argv[0], "VmHWM");
  usage_now (&ru2);

  for (i = 0; i < exchange; i++)
    {
      kb_handle h = atomic_load_explicit (&s.xchg[i], memory_order_relaxed);
      if (h != 0)
        live_bytes += kb_block_free (argv[0], h, DENSE, large_max);
    }
  free (s.xchg);
  free (w);
  free (tid);
  printf ("RESULT bench=churn threads=%zu rounds=%zu scale=%zu exchange=%zu"
          " large=%zu idle=%.3g seconds=%.3f user_seconds=%.3f"
          " sys_seconds=%.3f minflt=%ld base_rss_mib=%.1f peak_mib=%.1f"
          " busy_rss_mib=%.1f idle_live_mib=%.1f idle_rss_mib=%.1f"
          " idle_sys_seconds=%.3f idle_minflt=%ld\n",
          threads, rounds, scale, exchange, large_max, idle, busy,
          tv_seconds (ru1.ru_utime) - tv_seconds (ru0.ru_utime),
          tv_seconds (ru1.ru_stime) - tv_seconds (ru0.ru_stime),
          ru1.ru_minflt - ru0.ru_minflt, base_kib / 1024.0,
          hwm_kib / 1024.0, busy_kib / 1024.0,
          (double) live_bytes / 1048576.0, idle_kib / 1024.0,
          tv_seconds (ru2.ru_stime) - tv_seconds (ru1.ru_stime),
          ru2.ru_minflt - ru1.ru_minflt);
  return 0;
}
