/* idle.c -- a server after a burst: allocates 200 MB of blocks of
   64..4096 bytes (uniform sizes, a fixed seed, every block written),
   frees all but every 64th, then waits 1.5 s without allocating
   anything, and reads its RSS again.  What is resident after the wait
   and above the 1/64 still live is what the allocator kept of freed
   memory while nothing asked it for anything: an allocator that gives
   pages back only when a thread calls malloc or free keeps all of it.
   With --warm, one other thread keeps a malloc/free loop of one small
   block going during the wait, as a process whose other threads are
   idle does; the main thread still only sleeps.

   Issue 36's idle program.  Prints the RSS at the end of the free
   phase (freed_rss_mib), after the wait (idle_rss_mib), the peak
   (peak_mib, VmHWM) and the bytes still live (live_mib), in MiB.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

struct warm
{
  _Atomic int stop;
  unsigned long long loops;
};

/* One small block, allocated, written and freed in a loop: a thread
   that is busy but needs no new memory.  */
static void *
warm_loop (void *arg)
{
  struct warm *wm = arg;
  unsigned long long n = 0;

  while (!atomic_load_explicit (&wm->stop, memory_order_relaxed))
    {
      char *p = malloc (64);
      if (p == NULL)
        {
          fputs ("idle: malloc failed\n", stderr);
          exit (1);
        }
      p[0] = (char) n;
      p[63] = (char) n;
      kb_escape (p);
      free (p);
      n++;
    }
  wm->loops = n;
  return NULL;
}

int
main (int argc, char **argv)
{
  size_t total = 200000000, min = 64, max = 4096, keep = 64, seed = 1;
  size_t nmax, n, i, sum = 0;
  unsigned long long live = 0;
  double wait = 1.5;
  int quick = 0, warm = 0;
  long base_kib, full_kib, freed_kib, idle_kib, hwm_kib;
  unsigned char **block;
  size_t *len;
  uint64_t rng;
  struct warm wm;
  pthread_t tid;
  const struct kb_opt opts[] = {
    { "total", KB_SIZE, &total, "bytes to allocate (default 200000000)" },
    { "min", KB_SIZE, &min, "smallest block (default 64)" },
    { "max", KB_SIZE, &max, "largest block (default 4096)" },
    { "keep", KB_SIZE, &keep, "keep every KEEPth block live (default 64)" },
    { "wait", KB_DOUBLE, &wait, "seconds of idleness (default 1.5)" },
    { "warm", KB_FLAG, &warm,
      "one other thread in a malloc/free loop during the wait" },
    { "seed", KB_SIZE, &seed, "random seed (default 1)" },
    { "quick", KB_FLAG, &quick, "smoke run: 32 MB, wait 0.3 s" },
    { NULL, KB_FLAG, NULL, NULL }
  };

  kb_parse (argc, argv, "RSS of freed small blocks after a wait with no"
            " allocation;\nprints idle_rss_mib.", opts);
  if (quick)
    {
      total = 32000000;
      wait = 0.3;
    }
  kb_require (argv[0], min >= 1 && min <= max && max <= total,
              "need 1 <= --min <= --max <= --total");
  kb_require (argv[0], total <= ((size_t) 16 << 30),
              "--total must be at most 16 GiB");
  kb_require (argv[0], keep >= 1, "--keep must be at least 1");
  kb_require (argv[0], wait <= 3600, "--wait must be at most 3600");

  /* Count the blocks first, with the same draws as below, so that the
     tables are no larger than they need to be: they are in the RSS.  */
  rng = seed;
  for (nmax = 0; sum < total; nmax++)
    sum += min + (size_t) kb_below (&rng, max - min + 1);
  sum = 0;
  block = kb_xcalloc (argv[0], nmax, sizeof *block);
  len = kb_xcalloc (argv[0], nmax, sizeof *len);
  kb_touch (block, nmax * sizeof *block);
  kb_touch (len, nmax * sizeof *len);
  base_kib = kb_status_kib (argv[0], "VmRSS");

  rng = seed;
  for (n = 0; n < nmax; n++)
    {
      len[n] = min + (size_t) kb_below (&rng, max - min + 1);
      block[n] = malloc (len[n]);
      if (block[n] == NULL)
        kb_die (argv[0], "malloc failed");
      memset (block[n], (int) (n & 0xff), len[n]);
      sum += len[n];
    }
  full_kib = kb_status_kib (argv[0], "VmRSS");
  for (i = 0; i < n; i++)
    if (i % keep != 0)
      {
        free (block[i]);
        block[i] = NULL;
      }
    else
      live += len[i];
  freed_kib = kb_status_kib (argv[0], "VmRSS");

  /* The wait: this thread sleeps; the warm one, if any, loops.  */
  if (warm)
    {
      atomic_init (&wm.stop, 0);
      wm.loops = 0;
      if (pthread_create (&tid, NULL, warm_loop, &wm) != 0)
        kb_die (argv[0], "pthread_create failed");
    }
  kb_sleep (wait);
  idle_kib = kb_status_kib (argv[0], "VmRSS");
  hwm_kib = kb_status_kib (argv[0], "VmHWM");
  if (warm)
    {
      atomic_store_explicit (&wm.stop, 1, memory_order_relaxed);
      pthread_join (tid, NULL);
    }

  /* The survivors must be intact: giving back memory that is in use
     would make the figure above good and the program wrong.  */
  for (i = 0; i < n; i += keep)
    {
      size_t k;
      for (k = 0; k < len[i]; k++)
        if (block[i][k] != (unsigned char) (i & 0xff))
          {
            fprintf (stderr, "%s: block %zu of %zu bytes is corrupt at"
                     " offset %zu\n", argv[0], i, len[i], k);
            abort ();
          }
      free (block[i]);
    }
  free (block);
  free (len);
  printf ("RESULT bench=idle total=%zu min=%zu max=%zu keep=%zu wait=%.3g"
          " warm=%d blocks=%zu warm_loops=%llu base_rss_mib=%.1f"
          " full_rss_mib=%.1f freed_rss_mib=%.1f idle_rss_mib=%.1f"
          " peak_mib=%.1f live_mib=%.1f\n", total, min, max, keep, wait,
          warm, n, warm ? wm.loops : 0ULL, base_kib / 1024.0,
          full_kib / 1024.0, freed_kib / 1024.0, idle_kib / 1024.0,
          hwm_kib / 1024.0, (double) live / 1048576.0);
  return 0;
}
