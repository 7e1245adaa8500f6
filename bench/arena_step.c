/* arena_step.c -- one step of a compute kernel's scratch memory: take a
   mark, make K allocations of mixed sizes (8..4096 bytes) and alignments,
   rewind.  The same K requests then go through malloc/aligned_alloc and
   free, so the run reports the cost per allocation of both; the malloc
   half is what changes under each preloaded allocator.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <tinyllm/arena.h>

#include "bench.h"

/* Kernels mostly want natural or SIMD alignment, now and then a cache
   line; these weights give 8, 16, 32 and 64 in the ratio 3:3:1:1.  */
static const size_t align_choice[8] = { 8, 8, 8, 16, 16, 16, 32, 64 };

static double
run_arena (const char *prog, tl_arena *a, const size_t *size,
           const size_t *align, size_t k, double seconds,
           unsigned long long *steps_out)
{
  unsigned long long steps = 0;
  double t0, t1;

  t0 = kb_now ();
  do
    {
      int s;
      for (s = 0; s < 64; s++)
        {
          tl_arena_mark m = tl_arena_mark_get (a);
          size_t i;
          for (i = 0; i < k; i++)
            {
              char *p = tl_arena_alloc (a, size[i], align[i]);
              if (p == NULL || ((uintptr_t) p & (align[i] - 1)) != 0)
                kb_die (prog, "tl_arena_alloc failed or misaligned");
              p[0] = (char) i;
              kb_escape (p);
            }
          tl_arena_reset_to (a, m);
        }
      steps += 64;
      t1 = kb_now ();
    }
  while (t1 - t0 < seconds);
  *steps_out = steps;
  return t1 - t0;
}

static double
run_malloc (const char *prog, char **ptr, const size_t *size,
            const size_t *align, size_t k, double seconds,
            unsigned long long *steps_out)
{
  unsigned long long steps = 0;
  double t0, t1;

  t0 = kb_now ();
  do
    {
      int s;
      for (s = 0; s < 64; s++)
        {
          size_t i;
          for (i = 0; i < k; i++)
            {
              /* malloc aligns a block of at least 16 bytes to 16 (a
                 smaller one only as far as its size needs); C11
                 aligned_alloc wants the size to be a multiple of the
                 alignment.  */
              if (align[i] <= 8 || (align[i] == 16 && size[i] >= 16))
                ptr[i] = malloc (size[i]);
              else
                ptr[i] = aligned_alloc (align[i], (size[i] + align[i] - 1)
                                                  & ~(align[i] - 1));
              if (ptr[i] == NULL
                  || ((uintptr_t) ptr[i] & (align[i] - 1)) != 0)
                kb_die (prog, "malloc failed or misaligned");
              ptr[i][0] = (char) i;
              kb_escape (ptr[i]);
            }
          for (i = 0; i < k; i++)
            free (ptr[i]);
        }
      steps += 64;
      t1 = kb_now ();
    }
  while (t1 - t0 < seconds);
  *steps_out = steps;
  return t1 - t0;
}

int
main (int argc, char **argv)
{
  size_t k = 256, block = 0, seed = 1, i;
  double seconds = 0.5, ta, tm;
  int quick = 0;
  unsigned long long sa, sm;
  size_t *size, *align;
  char **ptr;
  tl_arena *a = NULL;
  const struct kb_opt opts[] = {
    { "k", KB_SIZE, &k, "allocations per step (default 256)" },
    { "block", KB_SIZE, &block, "arena block bytes (default 0: 1 MiB)" },
    { "seed", KB_SIZE, &seed, "seed of the size sequence (default 1)" },
    { "seconds", KB_DOUBLE, &seconds, "time for each half (default 0.5)" },
    { "quick", KB_FLAG, &quick, "smoke run: 0.05 seconds each" },
    { NULL, KB_FLAG, NULL, NULL }
  };

  kb_parse (argc, argv, "Arena mark/alloc/rewind step against malloc/free;"
            " prints ns per allocation of both.", opts);
  if (quick)
    seconds = 0.05;
  kb_require (argv[0], k > 0 && k <= 1000000,
              "--k must be between 1 and 1000000");

  size = kb_xcalloc (argv[0], k, sizeof *size);
  align = kb_xcalloc (argv[0], k, sizeof *align);
  ptr = kb_xcalloc (argv[0], k, sizeof *ptr);
  {
    uint64_t rng = seed;
    for (i = 0; i < k; i++)
      {
        size[i] = kb_log_uniform (&rng, 8, 4096);
        align[i] = align_choice[kb_below (&rng, 8)];
      }
  }

  if (tl_arena_create (block, &a) != TL_OK || a == NULL)
    kb_die (argv[0], "tl_arena_create failed");

  /* One untimed step each, so the arena has its blocks and the
     allocator its caches before the clock starts.  */
  run_arena (argv[0], a, size, align, k, 0, &sa);
  run_malloc (argv[0], ptr, size, align, k, 0, &sm);
  ta = run_arena (argv[0], a, size, align, k, seconds, &sa);
  tm = run_malloc (argv[0], ptr, size, align, k, seconds, &sm);
  tl_arena_destroy (a);

  {
    double arena_ns = ta * 1e9 / ((double) sa * (double) k);
    double malloc_ns = tm * 1e9 / ((double) sm * (double) k);
    printf ("RESULT bench=arena_step k=%zu arena_ns_per_alloc=%.4g"
            " malloc_ns_per_alloc=%.4g arena_speedup=%.3g\n",
            k, arena_ns, malloc_ns, malloc_ns / arena_ns);
  }
  free (size);
  free (align);
  free (ptr);
  return 0;
}
