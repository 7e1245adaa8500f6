/* tlbchase.c -- a random pointer chase through a large working set of
   small malloc'd nodes (512 MiB of 64-byte nodes by default).  Each hop
   is a cache miss and, with 4 KiB pages, a TLB miss, so ns per hop shows
   how densely the allocator packs nodes and whether its memory is backed
   by huge pages (compare KAME_POOL_HUGEPAGE=1 and 0).

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

struct node
{
  struct node *next;
};

int
main (int argc, char **argv)
{
  size_t bytes = (size_t) 512 << 20, node_size = 64, hops = 5000000;
  size_t seed = 1, n, i;
  int quick = 0;
  double t0, t_alloc, elapsed;
  struct node **node, *p;
  uint32_t *order;
  uint64_t rng;
  const struct kb_opt opts[] = {
    { "bytes", KB_SIZE, &bytes, "working set (default 512m)" },
    { "node", KB_SIZE, &node_size, "node size (default 64)" },
    { "hops", KB_SIZE, &hops, "hops to time (default 5000000)" },
    { "seed", KB_SIZE, &seed, "random seed (default 1)" },
    { "quick", KB_FLAG, &quick, "smoke run: 16 MiB, 1000000 hops" },
    { NULL, KB_FLAG, NULL, NULL }
  };

  kb_parse (argc, argv, "Random pointer chase over malloc'd nodes;"
            " prints ns_per_hop.", opts);
  if (quick)
    {
      bytes = (size_t) 16 << 20;
      hops = 1000000;
    }
  kb_require (argv[0], node_size >= sizeof (struct node)
              && node_size <= 65536,
              "--node must be between 8 and 65536");
  n = bytes / node_size;
  kb_require (argv[0], n >= 2 && n <= UINT32_MAX,
              "--bytes must hold between 2 and 2^32-1 nodes");
  kb_require (argv[0], hops >= 1, "--hops must be at least 1");

  node = kb_xcalloc (argv[0], n, sizeof *node);
  order = kb_xcalloc (argv[0], n, sizeof *order);
  t0 = kb_now ();
  for (i = 0; i < n; i++)
    {
      node[i] = malloc (node_size);
      if (node[i] == NULL)
        kb_die (argv[0], "malloc failed while building the working set");
      node[i]->next = NULL;
    }
  t_alloc = kb_now () - t0;

  /* Sattolo's shuffle gives a single cycle through every node, so the
     chase never settles into a short loop that fits in the cache.  */
  rng = seed;
  for (i = 0; i < n; i++)
    order[i] = (uint32_t) i;
  for (i = n - 1; i > 0; i--)
    {
      size_t j = (size_t) kb_below (&rng, i);
      uint32_t t = order[i];
      order[i] = order[j];
      order[j] = t;
    }
  for (i = 0; i < n; i++)
    node[order[i]]->next = node[order[(i + 1) % n]];
  free (order);

  p = node[0];
  for (i = 0; i < n && i < 100000; i++)
    p = p->next;
  t0 = kb_now ();
  for (i = 0; i < hops; i++)
    p = p->next;
  elapsed = kb_now () - t0;
  kb_escape (p);

  for (i = 0; i < n; i++)
    free (node[i]);
  free (node);
  printf ("RESULT bench=tlbchase bytes=%zu node=%zu nodes=%zu hops=%zu"
          " alloc_seconds=%.3f seconds=%.3f ns_per_hop=%.4g\n", bytes,
          node_size, n, hops, t_alloc, elapsed, elapsed * 1e9 / (double) hops);
  return 0;
}
