/* generations.c -- threads that live for one generation: each builds a
   list of blocks of skewed sizes, frees the part it does not pass on,
   hands the rest to a thread of the next generation and exits; that
   thread frees what it inherited once it has built its own list.  So
   half the blocks outlive the thread that allocated them and are freed
   by one that did not exist yet: the allocator must take blocks back
   into the heap of a dead thread, or adopt that heap, without keeping
   the memory of every departed thread.  Fixed work; prints the seconds
   of the whole run (the driver adds the peak RSS).

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

/* A block of the list: the link, then its payload.  */
struct node
{
  struct node *next;
  size_t len;
};

struct worker
{
  struct node *inherited;       /* from the previous generation */
  struct node *passed;          /* to the next one */
  size_t nodes, min, max, pass;
  uint64_t rng;
};

static void *
live_one_generation (void *arg)
{
  struct worker *w = arg;
  struct node *head = NULL, *p, *next, **tail;
  size_t i;
  unsigned long long sum = 0;

  for (i = 0; i < w->nodes; i++)
    {
      size_t n = kb_pareto (&w->rng, w->min, w->max);
      p = malloc (n);
      if (p == NULL)
        {
          fputs ("generations: malloc failed\n", stderr);
          exit (1);
        }
      p->len = n;
      ((char *) p)[n - 1] = (char) i;
      p->next = head;
      head = p;
    }
  /* The inheritance is read, as a consumer of the data would, and
     freed: remote frees of blocks whose thread is gone.  */
  for (p = w->inherited; p != NULL; p = next)
    {
      next = p->next;
      sum += p->len;
      free (p);
    }
  kb_escape (&sum);
  w->inherited = NULL;
  /* Pass a random share on, free the rest here, in list order.  */
  tail = &w->passed;
  for (p = head; p != NULL; p = next)
    {
      next = p->next;
      if (kb_below (&w->rng, 100) < w->pass)
        {
          *tail = p;
          tail = &p->next;
        }
      else
        free (p);
    }
  *tail = NULL;
  return NULL;
}

int
main (int argc, char **argv)
{
  size_t threads = 2, generations = 200, nodes = 20000, min = 16;
  size_t max = 1024, pass = 50, seed = 1, g, i;
  int quick = 0;
  double t0, elapsed;
  unsigned long long mallocs;
  struct worker *w;
  struct node **baton;
  pthread_t *tid;
  uint64_t rng;
  const struct kb_opt opts[] = {
    { "threads", KB_SIZE, &threads, "threads per generation (default 2)" },
    { "generations", KB_SIZE, &generations, "generations (default 200)" },
    { "nodes", KB_SIZE, &nodes,
      "blocks per generation, split among its threads (20000)" },
    { "min", KB_SIZE, &min, "smallest block (default 16)" },
    { "max", KB_SIZE, &max, "largest block (default 1k)" },
    { "pass", KB_SIZE, &pass, "percent passed on (default 50)" },
    { "seed", KB_SIZE, &seed, "random seed (default 1)" },
    { "quick", KB_FLAG, &quick, "smoke run: 20 generations of 4000" },
    { NULL, KB_FLAG, NULL, NULL }
  };

  kb_parse (argc, argv, "Generations of threads that pass blocks on and"
            " exit; prints seconds.", opts);
  if (quick)
    {
      generations = 20;
      nodes = 4000;
    }
  kb_require (argv[0], threads >= 1 && threads <= 1024,
              "--threads must be between 1 and 1024");
  kb_require (argv[0], generations >= 1, "--generations must be >= 1");
  kb_require (argv[0], nodes >= threads && nodes <= ((size_t) 1 << 26),
              "--nodes must be between --threads and 67108864");
  kb_require (argv[0], min >= sizeof (struct node) && min <= max
              && max <= ((size_t) 1 << 30),
              "need 16 <= --min <= --max <= 1 GiB");
  kb_require (argv[0], pass <= 100, "--pass must be at most 100");

  w = kb_xcalloc (argv[0], threads, sizeof *w);
  baton = kb_xcalloc (argv[0], threads, sizeof *baton);
  tid = kb_xcalloc (argv[0], threads, sizeof *tid);
  rng = seed;
  t0 = kb_now ();
  for (g = 0; g < generations; g++)
    {
      for (i = 0; i < threads; i++)
        {
          /* Thread i inherits from thread i + 1 of the generation
             before, so with two or more threads no list stays within
             one slot.  The joins order everything: no atomics.  */
          w[i].inherited = baton[(i + 1) % threads];
          w[i].passed = NULL;
          /* The same work whatever the number of threads: more threads
             are more, shorter lives.  */
          w[i].nodes = nodes / threads;
          w[i].min = min;
          w[i].max = max;
          w[i].pass = pass;
          w[i].rng = kb_rand (&rng);
        }
      for (i = 0; i < threads; i++)
        if (pthread_create (&tid[i], NULL, live_one_generation, &w[i]) != 0)
          kb_die (argv[0], "pthread_create failed");
      for (i = 0; i < threads; i++)
        pthread_join (tid[i], NULL);
      for (i = 0; i < threads; i++)
        baton[i] = w[i].passed;
    }
  elapsed = kb_now () - t0;
  mallocs = (unsigned long long) generations * threads * (nodes / threads);

  for (i = 0; i < threads; i++)
    {
      struct node *p, *next;
      for (p = baton[i]; p != NULL; p = next)
        {
          next = p->next;
          free (p);
        }
    }
  free (w);
  free (baton);
  free (tid);
  printf ("RESULT bench=generations threads=%zu generations=%zu nodes=%zu"
          " min=%zu max=%zu pass=%zu mallocs=%llu seconds=%.3f"
          " mallocs_per_sec=%.4g hwm_kib=%ld\n", threads, generations, nodes,
          min, max, pass, mallocs, elapsed, (double) mallocs / elapsed,
          kb_status_kib (argv[0], "VmHWM"));
  return 0;
}
