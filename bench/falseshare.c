/* falseshare.c -- false sharing caused by the allocator.  The main
   thread allocates one small object per worker, back to back.  In the
   default passive mode each worker frees the object it was handed and
   then repeatedly allocates one of the same size and writes it hard: an
   allocator that gives the remotely freed block back to the worker keeps
   the workers on one cache line.  With --active the workers write the
   objects they were handed, which shows the cost of sharing a line
   whatever the allocator does, and --apart is the control without
   sharing: the objects get a 128-byte line pair each.  Prints the time
   taken.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

struct worker
{
  char *given;
  size_t size, rounds, writes;
  int active;
  pthread_barrier_t *start;
};

static void
hammer (volatile char *p, size_t size, size_t writes)
{
  size_t i;
  for (i = 0; i < writes; i++)
    p[i % size]++;
}

static void *
work (void *arg)
{
  struct worker *w = arg;
  size_t r;

  pthread_barrier_wait (w->start);
  if (w->active)
    {
      for (r = 0; r < w->rounds; r++)
        hammer (w->given, w->size, w->writes);
      return NULL;
    }
  free (w->given);
  for (r = 0; r < w->rounds; r++)
    {
      char *p = malloc (w->size);
      if (p == NULL)
        {
          fputs ("falseshare: malloc failed\n", stderr);
          exit (1);
        }
      hammer (p, w->size, w->writes);
      free (p);
    }
  return NULL;
}

int
main (int argc, char **argv)
{
  size_t threads = 2, size = 8, rounds = 100, writes = 1000000, i;
  int quick = 0, active = 0, apart = 0;
  double t0, elapsed;
  struct worker *w;
  pthread_t *tid;
  pthread_barrier_t start;
  const struct kb_opt opts[] = {
    { "threads", KB_SIZE, &threads, "writer threads (default 2)" },
    { "size", KB_SIZE, &size, "object size (default 8)" },
    { "rounds", KB_SIZE, &rounds, "malloc/write/free rounds (default 100)" },
    { "writes", KB_SIZE, &writes, "writes per round (default 1000000)" },
    { "active", KB_FLAG, &active, "write the handed-over objects directly" },
    { "apart", KB_FLAG, &apart, "like --active, objects 128 bytes apart" },
    { "quick", KB_FLAG, &quick, "smoke run: 10 rounds" },
    { NULL, KB_FLAG, NULL, NULL }
  };

  kb_parse (argc, argv, "Allocator-induced false sharing; prints seconds.",
            opts);
  if (quick)
    rounds = 10;
  kb_require (argv[0], threads >= 1 && threads <= 1024,
              "--threads must be between 1 and 1024");
  kb_require (argv[0], size >= 1 && size <= 4096,
              "--size must be between 1 and 4096");
  kb_require (argv[0], rounds >= 1 && writes >= 1,
              "--rounds and --writes must be at least 1");
  kb_require (argv[0], !(active && apart),
              "--active and --apart exclude each other");
  /* Adjacent lines can share a prefetched pair, so apart means 128.  */
  if (apart)
    active = 1;

  w = kb_xcalloc (argv[0], threads, sizeof *w);
  tid = kb_xcalloc (argv[0], threads, sizeof *tid);
  if (pthread_barrier_init (&start, NULL, (unsigned) threads + 1) != 0)
    kb_die (argv[0], "pthread_barrier_init failed");
  /* Allocated back to back by one thread: most allocators put them on
     the same cache line, which is the starting point of the test.  */
  for (i = 0; i < threads; i++)
    {
      w[i].given = apart ? aligned_alloc (128, (size + 127) & ~(size_t) 127)
                         : malloc (size);
      if (w[i].given == NULL)
        kb_die (argv[0], "malloc failed");
      w[i].given[0] = 0;
      w[i].size = size;
      w[i].rounds = rounds;
      w[i].writes = writes;
      w[i].active = active;
      w[i].start = &start;
    }
  for (i = 0; i < threads; i++)
    if (pthread_create (&tid[i], NULL, work, &w[i]) != 0)
      kb_die (argv[0], "pthread_create failed");
  pthread_barrier_wait (&start);
  t0 = kb_now ();
  for (i = 0; i < threads; i++)
    pthread_join (tid[i], NULL);
  elapsed = kb_now () - t0;

  for (i = 0; active && i < threads; i++)
    free (w[i].given);
  pthread_barrier_destroy (&start);
  free (w);
  free (tid);
  printf ("RESULT bench=falseshare mode=%s threads=%zu size=%zu rounds=%zu"
          " writes=%zu seconds=%.4g\n",
          apart ? "apart" : active ? "active" : "passive",
          threads, size, rounds, writes, elapsed);
  return 0;
}
