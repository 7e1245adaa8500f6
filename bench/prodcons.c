/* prodcons.c -- a producer and a consumer thread joined by a bounded
   single-producer single-consumer ring of pointers: the producer
   mallocs, the consumer frees, so every free is remote.  Prints the
   consumer's frees per second.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

/* head is written by the producer only, tail by the consumer only; each
   publishes with release and reads the other's index with acquire, so a
   slot is read only after the store that filled it is visible.  The
   indices live on their own cache lines so the two threads share only
   the slots themselves.  */
struct ring
{
  _Alignas (64) _Atomic size_t head;
  _Alignas (64) _Atomic size_t tail;
  _Alignas (64) _Atomic int done;
  size_t mask;
  char **slot;
};

struct args
{
  struct ring *r;
  size_t size;
  double seconds;
  unsigned long long count;
};

static void *
producer (void *arg)
{
  struct args *p = arg;
  struct ring *r = p->r;
  size_t head = 0, tail = 0;
  unsigned long long n = 0;
  double t0 = kb_now ();

  for (;;)
    {
      int b;
      for (b = 0; b < 256; b++)
        {
          char *blk = malloc (p->size);
          unsigned spins = 0;
          if (blk == NULL)
            {
              fputs ("prodcons: malloc failed\n", stderr);
              exit (1);
            }
          blk[0] = (char) b;
          while (head - tail > r->mask)
            {
              tail = atomic_load_explicit (&r->tail, memory_order_acquire);
              if (head - tail > r->mask)
                kb_backoff (&spins);
            }
          r->slot[head & r->mask] = blk;
          atomic_store_explicit (&r->head, ++head, memory_order_release);
        }
      n += 256;
      if (kb_now () - t0 >= p->seconds)
        break;
    }
  p->count = n;
  atomic_store_explicit (&r->done, 1, memory_order_release);
  return NULL;
}

static void *
consumer (void *arg)
{
  struct args *c = arg;
  struct ring *r = c->r;
  size_t head = 0, tail = 0;
  unsigned long long n = 0;
  unsigned spins = 0;

  for (;;)
    {
      if (tail == head)
        {
          /* Read done before head: if done is set, head is final.  */
          int done = atomic_load_explicit (&r->done, memory_order_acquire);
          head = atomic_load_explicit (&r->head, memory_order_acquire);
          if (tail == head)
            {
              if (done)
                break;
              kb_backoff (&spins);
              continue;
            }
        }
      free (r->slot[tail & r->mask]);
      atomic_store_explicit (&r->tail, ++tail, memory_order_release);
      n++;
    }
  c->count = n;
  return NULL;
}

int
main (int argc, char **argv)
{
  size_t size = 64, ring_len = 1024;
  double seconds = 0.5, t0, elapsed;
  int quick = 0;
  struct ring r;
  struct args pa, ca;
  pthread_t tp, tc;
  const struct kb_opt opts[] = {
    { "size", KB_SIZE, &size, "block size in bytes (default 64)" },
    { "ring", KB_SIZE, &ring_len, "ring slots, a power of two (1024)" },
    { "seconds", KB_DOUBLE, &seconds, "time to run (default 0.5)" },
    { "quick", KB_FLAG, &quick, "smoke run: 0.05 seconds" },
    { NULL, KB_FLAG, NULL, NULL }
  };

  kb_parse (argc, argv, "Producer mallocs, consumer frees; prints frees/s.",
            opts);
  if (quick)
    seconds = 0.05;
  kb_require (argv[0], size > 0 && size <= ((size_t) 1 << 30),
              "--size must be between 1 and 1 GiB");
  kb_require (argv[0], ring_len >= 2 && ring_len <= ((size_t) 1 << 24)
              && (ring_len & (ring_len - 1)) == 0,
              "--ring must be a power of two between 2 and 16777216");

  atomic_init (&r.head, 0);
  atomic_init (&r.tail, 0);
  atomic_init (&r.done, 0);
  r.mask = ring_len - 1;
  r.slot = kb_xcalloc (argv[0], ring_len, sizeof *r.slot);
  pa.r = ca.r = &r;
  pa.size = ca.size = size;
  pa.seconds = ca.seconds = seconds;
  pa.count = ca.count = 0;

  t0 = kb_now ();
  if (pthread_create (&tc, NULL, consumer, &ca) != 0
      || pthread_create (&tp, NULL, producer, &pa) != 0)
    kb_die (argv[0], "pthread_create failed");
  pthread_join (tp, NULL);
  pthread_join (tc, NULL);
  elapsed = kb_now () - t0;
  free (r.slot);

  if (ca.count != pa.count)
    kb_die (argv[0], "the consumer freed a different number of blocks");
  printf ("RESULT bench=prodcons size=%zu ring=%zu frees=%llu seconds=%.3f"
          " frees_per_sec=%.4g\n", size, ring_len, ca.count, elapsed,
          (double) ca.count / elapsed);
  return 0;
}
