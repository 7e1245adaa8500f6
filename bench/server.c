/* server.c -- a server-like workload: a large table of keys whose
   values have mixed sizes, most small with a long tail, taken through
   the phases of a cache server's life: fill, replace, delete a part,
   refill, replace again, and shrink to a tenth.  A second thread frees
   part of the old values, as a server's background ("lazy free") thread
   does, so some frees are remote.  Prints table operations per second,
   the peak RSS, and after every phase the resident set against the
   bytes the program asked for: what size classes, fragmentation and
   memory not given back cost a long-running process.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static const char *prog;

/* The hand-off to the freeing thread: a bounded single-producer,
   single-consumer ring.  head is written by the main thread only, tail
   by the freer only; each publishes with release and reads the other's
   index with acquire, so a slot is read only once it was filled, and
   refilled only once it was emptied.  */
struct ring
{
  _Alignas (64) _Atomic size_t head;
  _Alignas (64) _Atomic size_t tail;
  _Alignas (64) _Atomic int done;
  size_t mask;
  char **slot;
};

/* Two cores are shared with other work: spin a little, then yield, and
   when there has been nothing to do for a while sleep briefly, so an
   idle freer does not hold a CPU through the phases that send it
   nothing.  */
static void
backoff (unsigned *spins)
{
  ++*spins;
  if (*spins >= 4096)
    {
      struct timespec nap = { 0, 20000 };
      nanosleep (&nap, NULL);
    }
  else if (*spins % 64 == 0)
    sched_yield ();
}

static void *
freer (void *arg)
{
  struct ring *r = arg;
  size_t head = 0, tail = 0;
  unsigned spins = 0;

  for (;;)
    {
      if (tail == head)
        {
          /* Read done before head: once done is seen, head is final.  */
          int done = atomic_load_explicit (&r->done, memory_order_acquire);
          head = atomic_load_explicit (&r->head, memory_order_acquire);
          if (tail == head)
            {
              if (done)
                break;
              backoff (&spins);
              continue;
            }
        }
      spins = 0;
      free (r->slot[tail & r->mask]);
      atomic_store_explicit (&r->tail, ++tail, memory_order_release);
    }
  return NULL;
}

struct table
{
  char **val;
  uint32_t *len;                /* requested size; 0: empty slot */
  size_t nslots, lo, hi, remote_every, nremote, count;
  unsigned long long live;      /* sum of len[] */
  uint64_t rng;
  struct ring *ring;
  size_t head;                  /* the main thread's copy of ring->head */
};

static void
hand_off (struct table *t, char *p)
{
  struct ring *r = t->ring;
  unsigned spins = 0;

  while (t->head - atomic_load_explicit (&r->tail, memory_order_acquire)
         > r->mask)
    backoff (&spins);
  r->slot[t->head & r->mask] = p;
  atomic_store_explicit (&r->head, ++t->head, memory_order_release);
}

/* Frees the value of slot J: every remote_every-th one goes to the
   freeing thread, the others are freed here.  */
static void
drop (struct table *t, size_t j)
{
  t->live -= t->len[j];
  t->len[j] = 0;
  t->count--;
  if (t->remote_every != 0 && ++t->nremote == t->remote_every)
    {
      t->nremote = 0;
      hand_off (t, t->val[j]);
    }
  else
    free (t->val[j]);
  t->val[j] = NULL;
}

/* Stores a new value in the empty slot J and writes all of it, as a
   server copies a value in; that also makes its pages resident.  The
   sizes follow kb_pareto: with the defaults (16 B..4 KiB) half the
   values are 16..31 bytes, one in 4 is over 64 bytes, one in 17 over
   256 and one in 85 over 1 KiB; the mean is about 89 bytes, and the
   values over 256 bytes hold half of them: mostly small values with a
   long tail of big ones, as in the caches this imitates.  */
static void
put (struct table *t, size_t j)
{
  size_t n = kb_pareto (&t->rng, t->lo, t->hi);
  char *p = malloc (n);
  if (p == NULL)
    kb_die (prog, "malloc failed");
  memset (p, (int) (j & 0x7f), n);
  t->val[j] = p;
  t->len[j] = (uint32_t) n;
  t->live += n;
  t->count++;
}

/* Waits until the freer has freed everything it was handed, so that at
   a phase end the heap holds exactly the table.  */
static void
drain (struct table *t)
{
  unsigned spins = 0;
  while (atomic_load_explicit (&t->ring->tail, memory_order_acquire)
         != t->head)
    backoff (&spins);
}

/* A random occupied slot.  The deletes leave at least a tenth of the
   table, so this takes ten tries on average at the very worst.  */
static size_t
occupied_slot (struct table *t)
{
  for (;;)
    {
      size_t j = (size_t) kb_below (&t->rng, t->nslots);
      if (t->len[j] != 0)
        return j;
    }
}

/* The phases, in order.  A replace phase makes REPLACE times as many
   replacements as there are slots; a delete phase deletes a share (in
   percent, from the options) of the keys there are.  */
enum phase_kind { FILL, REPLACE, DELETE };

struct phase
{
  const char *name;
  enum phase_kind kind;
  const size_t *pct;            /* DELETE: the option giving the share */
};

#define NPHASES 6

int
main (int argc, char **argv)
{
  size_t slots = 200000, lo = 16, hi = 4096, replace = 8, del = 50;
  size_t shrink = 90, remote_every = 4, ring_len = 1024, seed = 1, i, k;
  int quick = 0;
  unsigned long long ops = 0;
  double busy = 0, ratio[NPHASES];
  long base_kib, rss = 0;
  struct table t;
  struct ring r;
  pthread_t tid;
  const struct phase phases[NPHASES] = {
    { "fill", FILL, NULL },
    { "replace", REPLACE, NULL },
    { "delete", DELETE, &del },
    { "refill", FILL, NULL },
    { "replace2", REPLACE, NULL },
    { "shrink", DELETE, &shrink }
  };
  const struct kb_opt opts[] = {
    { "slots", KB_SIZE, &slots, "keys in the table (default 200000)" },
    { "min", KB_SIZE, &lo, "smallest value (default 16)" },
    { "max", KB_SIZE, &hi, "largest value (default 4k)" },
    { "replace", KB_SIZE, &replace,
      "replacements per phase, times slots (8)" },
    { "delete", KB_SIZE, &del, "percent of keys deleted (default 50)" },
    { "shrink", KB_SIZE, &shrink, "percent deleted at the end (90)" },
    { "remote-every", KB_SIZE, &remote_every,
      "every Nth free is remote, 0: none (4)" },
    { "ring", KB_SIZE, &ring_len, "hand-off slots, a power of two (1024)" },
    { "seed", KB_SIZE, &seed, "random seed (default 1)" },
    { "quick", KB_FLAG, &quick, "smoke run: 20000 slots" },
    { NULL, KB_FLAG, NULL, NULL }
  };

  prog = argv[0];
  kb_parse (argc, argv, "A server-like table of mixed-size values in"
            " phases, with a freeing thread;\nprints ops_per_sec and RSS"
            " per live byte (rss_per_live, shrunk_rss_per_live).", opts);
  if (quick)
    slots = 20000;
  kb_require (prog, slots >= 100 && slots <= ((size_t) 1 << 26),
              "--slots must be between 100 and 67108864");
  kb_require (prog, lo >= 1 && lo <= hi && hi <= UINT32_MAX,
              "need 1 <= --min <= --max < 4 GiB");
  kb_require (prog, replace <= 1000, "--replace must be at most 1000");
  kb_require (prog, del <= 90 && shrink <= 90,
              "--delete and --shrink must be at most 90 percent");
  kb_require (prog, ring_len >= 2 && ring_len <= ((size_t) 1 << 24)
              && (ring_len & (ring_len - 1)) == 0,
              "--ring must be a power of two between 2 and 16777216");

  memset (&t, 0, sizeof t);
  t.val = kb_xcalloc (prog, slots, sizeof *t.val);
  t.len = kb_xcalloc (prog, slots, sizeof *t.len);
  kb_touch (t.val, slots * sizeof *t.val);
  kb_touch (t.len, slots * sizeof *t.len);
  t.nslots = slots;
  t.lo = lo;
  t.hi = hi;
  t.remote_every = remote_every;
  t.rng = seed;
  t.ring = &r;
  atomic_init (&r.head, 0);
  atomic_init (&r.tail, 0);
  atomic_init (&r.done, 0);
  r.mask = ring_len - 1;
  r.slot = kb_xcalloc (prog, ring_len, sizeof *r.slot);
  kb_touch (r.slot, ring_len * sizeof *r.slot);
  if (pthread_create (&tid, NULL, freer, &r) != 0)
    kb_die (prog, "pthread_create failed");
  /* The baseline: program, libraries, the allocator's start-up, the
     freer's stack and the tables; what grows beyond it is the heap.  */
  base_kib = kb_status_kib (prog, "VmRSS");

  for (k = 0; k < NPHASES; k++)
    {
      const struct phase *ph = &phases[k];
      unsigned long long n = 0, usable = 0;
      double t0 = kb_now (), dt;

      switch (ph->kind)
        {
        case FILL:
          for (i = 0; i < slots; i++)
            if (t.len[i] == 0)
              {
                put (&t, i);
                n++;
              }
          break;
        case REPLACE:
          for (n = 0; n < (unsigned long long) replace * slots; n++)
            {
              size_t j = (size_t) kb_below (&t.rng, slots);
              if (t.len[j] != 0)
                drop (&t, j);
              put (&t, j);
            }
          break;
        case DELETE:
          {
            /* A share of what is there now, picked at random, so the
               holes are spread over the whole heap.  */
            size_t goal = t.count * *ph->pct / 100;
            for (n = 0; n < goal; n++)
              drop (&t, occupied_slot (&t));
          }
          break;
        }
      drain (&t);
      dt = kb_now () - t0;
      busy += dt;
      ops += n;

      /* Outside the timed part: the RSS and what the allocator really
         gave for the sizes asked (its size classes' rounding).  */
      rss = kb_status_kib (prog, "VmRSS");
      for (i = 0; i < slots; i++)
        if (t.val[i] != NULL)
          usable += malloc_usable_size (t.val[i]);
      ratio[k] = t.live != 0 && rss > base_kib
                 ? (double) (rss - base_kib) * 1024.0 / (double) t.live : 0;
      printf ("PHASE %-8s ops=%llu seconds=%.3f keys=%zu live_kib=%llu"
              " usable_kib=%llu heap_rss_kib=%ld rss_per_live=%.3f"
              " usable_per_live=%.3f\n", ph->name, n, dt,
              t.count, t.live >> 10, usable >> 10, rss - base_kib,
              ratio[k], t.live != 0 ? (double) usable / (double) t.live : 0);
    }

  atomic_store_explicit (&r.done, 1, memory_order_release);
  pthread_join (tid, NULL);
  for (i = 0; i < slots; i++)
    free (t.val[i]);
  free (t.val);
  free (t.len);
  free (r.slot);
  /* rss_per_live is the full table after the churn of replace2, the
     steady state; shrunk_rss_per_live is after the last deletes, what
     a server that lost most of its keys still holds.  */
  printf ("RESULT bench=server slots=%zu min=%zu max=%zu remote_every=%zu"
          " ops=%llu seconds=%.3f ops_per_sec=%.4g base_kib=%ld"
          " hwm_kib=%ld fill_rss_per_live=%.4g delete_rss_per_live=%.4g"
          " rss_per_live=%.4g shrunk_rss_per_live=%.4g\n", slots, lo, hi,
          remote_every, ops, busy, (double) ops / busy, base_kib,
          kb_status_kib (prog, "VmHWM"), ratio[0], ratio[2], ratio[4],
          ratio[5]);
  return 0;
}
