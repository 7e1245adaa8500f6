/* hand_example.c -- the worked example of the tinyllm arena with
   marks, as a program built against the installed headers only:
     cc hand_example.c $(pkg-config --cflags --libs ckarena)
   It prints the offsets, the steps of bytes_used, whether the rewind
   gave the same address back, and the counters.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <stdio.h>
#include <stdlib.h>
#include <tinyllm/arena.h>

static size_t
used (const tl_arena *a)
{
  tl_arena_stats s;
  tl_arena_stats_get (a, &s);
  return s.bytes_used;
}

int
main (void)
{
  if (tl_abi_version () != TL_ABI_VERSION)
    {
      fprintf (stderr, "built for tinyllm ABI %u, running with %u\n",
               TL_ABI_VERSION, tl_abi_version ());
      return EXIT_FAILURE;
    }
  tl_arena *a;
  tl_status st = tl_arena_create (256, &a);
  if (st != TL_OK)
    {
      fprintf (stderr, "tl_arena_create: %s: %s\n", tl_status_str (st),
               tl_last_error ());
      return EXIT_FAILURE;
    }

  char *p0 = tl_arena_alloc (a, 10, 0);
  size_t u0 = used (a);
  char *p1 = tl_arena_alloc (a, 4, 64);
  size_t u1 = used (a);
  tl_arena_mark m = tl_arena_mark_get (a);
  char *p2 = tl_arena_alloc (a, 100, 8);
  size_t u2 = used (a);
  tl_arena_reset_to (a, m);
  size_t u_rewound = used (a);
  char *p3 = tl_arena_alloc (a, 100, 8);
  if (p0 == NULL || p1 == NULL || p2 == NULL || p3 == NULL)
    {
      fprintf (stderr, "tl_arena_alloc: %s\n", tl_last_error ());
      tl_arena_destroy (a);
      return EXIT_FAILURE;
    }

  tl_arena_stats s;
  tl_arena_stats_get (a, &s);
  printf ("offsets: %td %td %td\n", p0 - p0, p1 - p0, p2 - p0);
  printf ("bytes_used: %zu, +%zu, +%zu; %zu after the rewind\n", u0,
          u1 - u0, u2 - u1, u_rewound);
  printf ("same address after the rewind: %s\n", p3 == p2 ? "yes" : "no");
  printf ("n_blocks %zu, bytes_reserved %zu, high_water %zu\n",
          s.n_blocks, s.bytes_reserved, s.high_water);
  tl_arena_destroy (a);
  return EXIT_SUCCESS;
}
