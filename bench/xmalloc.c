/* xmalloc.c -- threads in pairs, each allocating blocks for its partner
   and freeing the blocks its partner allocated for it: a thread fills a
   batch of pointers, hands the whole batch over through a bounded
   single-producer single-consumer queue of batches, and frees the
   batches that come the other way.  Every free is remote, and every
   thread both allocates and frees, the pattern of the xmalloc-test
   workload.  Prints frees per second, all threads together.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

/* One direction of a pair: a ring of QLEN batches of BATCH pointers.
   head is written by the sending thread only, tail by the receiving
   thread only; each publishes its index with release and reads the
   other's with acquire, so a batch is read only after the stores that
   filled it are visible, and refilled only after it was emptied.  done
   is set by the sender after its last batch.  The indices have cache
   lines of their own.  */
struct queue
{
  _Alignas (64) _Atomic size_t head;
  _Alignas (64) _Atomic size_t tail;
  _Alignas (64) _Atomic int done;
  size_t mask;
  char **slot;                  /* QLEN * BATCH pointers */
};

struct shared
{
  size_t min, max, batch;
  double seconds;
  pthread_barrier_t start;
};

struct worker
{
  struct shared *s;
  struct queue *out, *in;
  uint64_t rng;
  unsigned long long mallocs, frees;
};

static void *
work (void *arg)
{
  struct worker *w = arg;
  struct shared *s = w->s;
  struct queue *out = w->out, *in = w->in;
  size_t batch = s->batch, span = s->max - s->min + 1;
  size_t out_head = 0, out_tail = 0, in_head = 0, in_tail = 0;
  unsigned long long mallocs = 0, frees = 0;
  unsigned spins = 0;
  int sending = 1, in_done = 0;
  double t0;

  pthread_barrier_wait (&s->start);
  t0 = kb_now ();
  for (;;)
    {
      int progress = 0;

      /* Send: fill the next batch in place and publish it, if the
         partner has left room.  */
      if (sending)
        {
          if (out_head - out_tail > out->mask)
            out_tail = atomic_load_explicit (&out->tail,
                                             memory_order_acquire);
          if (out_head - out_tail <= out->mask)
            {
              char **slot = out->slot + (out_head & out->mask) * batch;
              size_t i;
              for (i = 0; i < batch; i++)
                {
                  size_t len = span == 1 ? s->min
                    : s->min + (size_t) kb_below (&w->rng, span);
                  char *p = malloc (len);
                  if (p == NULL)
                    {
                      fputs ("xmalloc: malloc failed\n", stderr);
                      exit (1);
                    }
                  p[0] = (char) i;
                  slot[i] = p;
                }
              atomic_store_explicit (&out->head, ++out_head,
                                     memory_order_release);
              mallocs += batch;
              progress = 1;
              if (kb_now () - t0 >= s->seconds)
                {
                  sending = 0;
                  atomic_store_explicit (&out->done, 1,
                                         memory_order_release);
                }
            }
        }

      /* Receive: free every block of the oldest batch the partner
         sent, then give its place back.  */
      if (in_tail == in_head)
        {
          /* Read done before head: if done is set, head is final.  */
          in_done = atomic_load_explicit (&in->done, memory_order_acquire);
          in_head = atomic_load_explicit (&in->head, memory_order_acquire);
        }
      if (in_tail != in_head)
        {
          char **slot = in->slot + (in_tail & in->mask) * batch;
          size_t i;
          for (i = 0; i < batch; i++)
            free (slot[i]);
          atomic_store_explicit (&in->tail, ++in_tail, memory_order_release);
          frees += batch;
          progress = 1;
        }
      else if (!sending && in_done)
        break;

      if (progress)
        spins = 0;
      else
        kb_backoff (&spins);
    }
  w->mallocs = mallocs;
  w->frees = frees;
  return NULL;
}

int
main (int argc, char **argv)
{
  size_t threads = 2, size = 0, batch = 64, qlen = 16, i;
  double seconds = 0.5, t0, elapsed;
  int quick = 0;
  unsigned long long mallocs = 0, frees = 0;
  struct shared s;
  struct queue *q;
  struct worker *w;
  pthread_t *tid;
  const struct kb_opt opts[] = {
    { "threads", KB_SIZE, &threads, "threads, an even number (default 2)" },
    { "size", KB_SIZE, &size, "one block size (default 16..1024, uniform)" },
    { "batch", KB_SIZE, &batch, "blocks handed over at once (default 64)" },
    { "queue", KB_SIZE, &qlen, "batches in flight per direction, a power"
      " of two (16)" },
    { "seconds", KB_DOUBLE, &seconds, "time to run (default 0.5)" },
    { "quick", KB_FLAG, &quick, "smoke run: 0.05 seconds" },
    { NULL, KB_FLAG, NULL, NULL }
  };

  kb_parse (argc, argv, "Threads in pairs allocate for each other and free"
            " what the other\nallocated, in batches; prints frees/s.", opts);
  if (quick)
    seconds = 0.05;
  kb_require (argv[0], threads >= 2 && threads <= 1024 && threads % 2 == 0,
              "--threads must be even, between 2 and 1024");
  kb_require (argv[0], size <= ((size_t) 1 << 30),
              "--size must be between 1 and 1 GiB");
  kb_require (argv[0], batch >= 1 && batch <= 65536,
              "--batch must be between 1 and 65536");
  kb_require (argv[0], qlen >= 1 && qlen <= 65536
              && (qlen & (qlen - 1)) == 0,
              "--queue must be a power of two between 1 and 65536");

  s.min = size != 0 ? size : 16;
  s.max = size != 0 ? size : 1024;
  s.batch = batch;
  s.seconds = seconds;
  if (pthread_barrier_init (&s.start, NULL, (unsigned) threads + 1) != 0)
    kb_die (argv[0], "pthread_barrier_init failed");

  /* Queue 2k carries blocks from thread 2k to thread 2k+1, queue 2k+1
     the other way.  */
  q = aligned_alloc (64, threads * sizeof *q);
  if (q == NULL)
    kb_die (argv[0], "out of memory for the benchmark's own tables");
  w = kb_xcalloc (argv[0], threads, sizeof *w);
  tid = kb_xcalloc (argv[0], threads, sizeof *tid);
  for (i = 0; i < threads; i++)
    {
      atomic_init (&q[i].head, 0);
      atomic_init (&q[i].tail, 0);
      atomic_init (&q[i].done, 0);
      q[i].mask = qlen - 1;
      q[i].slot = kb_xcalloc (argv[0], qlen * batch, sizeof *q[i].slot);
      w[i].s = &s;
      w[i].out = &q[i];
      w[i].in = &q[i ^ 1];
      w[i].rng = 0x9e3779b97f4a7c15u * (i + 1);
    }

  for (i = 0; i < threads; i++)
    if (pthread_create (&tid[i], NULL, work, &w[i]) != 0)
      kb_die (argv[0], "pthread_create failed");
  pthread_barrier_wait (&s.start);
  t0 = kb_now ();
  for (i = 0; i < threads; i++)
    pthread_join (tid[i], NULL);
  elapsed = kb_now () - t0;

  for (i = 0; i < threads; i++)
    {
      mallocs += w[i].mallocs;
      frees += w[i].frees;
      free (q[i].slot);
    }
  free (q);
  free (w);
  free (tid);
  pthread_barrier_destroy (&s.start);

  if (frees != mallocs)
    kb_die (argv[0], "the threads freed a different number of blocks");
  printf ("RESULT bench=xmalloc threads=%zu min=%zu max=%zu batch=%zu"
          " queue=%zu frees=%llu seconds=%.3f frees_per_sec=%.4g\n",
          threads, s.min, s.max, batch, qlen, frees, elapsed,
          (double) frees / elapsed);
  return 0;
}
