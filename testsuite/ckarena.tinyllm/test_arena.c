/* test_arena.c -- tests of the tinyllm arena with marks: the worked
   example, alignment, marks, block reuse, the boundaries, a random
   model check and every hook failure.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */
/* kptest-env: ASAN_OPTIONS=allocator_may_return_null=1 */

#include <tinyllm/arena.h>
#include "kptest.h"
#include "counting_alloc.h"

static tl_arena_stats
stats_of (const tl_arena *a)
{
  tl_arena_stats s;
  tl_arena_stats_get (a, &s);
  return s;
}

static bool
stats_equal (tl_arena_stats x, tl_arena_stats y)
{
  return x.bytes_used == y.bytes_used && x.bytes_reserved == y.bytes_reserved
         && x.high_water == y.high_water && x.n_blocks == y.n_blocks;
}

static bool
marks_equal (tl_arena_mark x, tl_arena_mark y)
{
  return x.block == y.block && x.offset == y.offset;
}

static bool
filled_with (const unsigned char *p, size_t n, unsigned char c)
{
  for (size_t i = 0; i < n; i++)
    if (p[i] != c)
      return false;
  return true;
}

static uintptr_t
align_up (uintptr_t x, size_t a)
{
  return (x + a - 1) & ~(uintptr_t) (a - 1);
}

KT_TEST (hand_example)
{
  KT_CHECK (ca_install ());
  tl_arena *a;
  KT_CHECK_EQ (tl_arena_create (256, &a), TL_OK);
  KT_CHECK_EQ (stats_of (a).n_blocks, 0);

  unsigned char *p0 = tl_arena_alloc (a, 10, 0);
  KT_CHECK (p0 != NULL);
  KT_CHECK_EQ (ca.last_n, 256);
  KT_CHECK_EQ (ca.last_align, 64);
  size_t u0 = stats_of (a).bytes_used;
  KT_CHECK_EQ (u0, 10);

  unsigned char *p1 = tl_arena_alloc (a, 4, 64);
  KT_CHECK_EQ (p1 - p0, 64);
  size_t u1 = stats_of (a).bytes_used;
  KT_CHECK_EQ (u1 - u0, 58);

  tl_arena_mark m = tl_arena_mark_get (a);
  KT_CHECK_EQ (m.block, 0);
  KT_CHECK_EQ (m.offset, 68);

  unsigned char *p2 = tl_arena_alloc (a, 100, 8);
  KT_CHECK_EQ (p2 - p0, 72);
  size_t u2 = stats_of (a).bytes_used;
  KT_CHECK_EQ (u2 - u1, 104);

  tl_arena_reset_to (a, m);
  KT_CHECK_EQ (stats_of (a).bytes_used, u1);
  unsigned char *p3 = tl_arena_alloc (a, 100, 8);
  KT_CHECK_PTR_EQ (p3, p2);
  KT_CHECK_EQ (stats_of (a).bytes_used, u2);

  tl_arena_stats s = stats_of (a);
  KT_CHECK_EQ (s.n_blocks, 1);
  KT_CHECK_EQ (s.bytes_reserved, 256);
  KT_CHECK_EQ (s.high_water, 172);
  KT_CHECK_EQ (ca.alloc_calls, 3);   /* Arena, list, block.  */
  tl_arena_destroy (a);
  CA_CHECK_NO_LEAK ();
}

KT_TEST (every_power_of_two_alignment)
{
  /* First with blocks 16 bytes past a 4096-byte boundary, where only
     padding computed from the address gives aligned pointers, then
     with the 64-aligned blocks the hook is asked for.  */
  for (int sloppy = 1; sloppy >= 0; sloppy--)
    {
      KT_CHECK (ca_install ());
      ca.sloppy = sloppy;
      tl_arena *a;
      KT_CHECK_EQ (tl_arena_create (65536, &a), TL_OK);
      unsigned char *end = NULL;
      size_t n = 3;
      for (size_t align = 1; align <= 8192; align *= 2, n += 2)
        {
          size_t asked = align == 8192 ? 0 : align;
          size_t want = asked == 0 ? 64 : asked;
          unsigned char *p = tl_arena_alloc (a, n, asked);
          if (p == NULL)
            KT_FAILF ("alloc (%zu, %zu): %s", n, asked, tl_last_error ());
          if ((uintptr_t) p % want != 0)
            KT_FAILF ("alloc (%zu, %zu) = %p, sloppy %d", n, asked,
                      (void *) p, sloppy);
          KT_CHECK (end == NULL || p >= end);
          if (sloppy)
            KT_CHECK_EQ ((uintptr_t) ca_block_of (p)->user % 64, 16);
          memset (p, 0x3c, n);
          end = p + n;
        }
      KT_CHECK_EQ (stats_of (a).n_blocks, 1);
      tl_arena_destroy (a);
      CA_CHECK_NO_LEAK ();
    }

  /* A block made for a 4096-aligned request is asked for with that
     alignment.  */
  KT_CHECK (ca_install ());
  tl_arena *a;
  KT_CHECK_EQ (tl_arena_create (128, &a), TL_OK);
  KT_CHECK (tl_arena_alloc (a, 1, 1) != NULL);
  unsigned char *p = tl_arena_alloc (a, 1, 4096);
  KT_CHECK (p != NULL);
  KT_CHECK_EQ ((uintptr_t) p % 4096, 0);
  KT_CHECK_EQ (ca.last_align, 4096);
  KT_CHECK_EQ (stats_of (a).n_blocks, 2);
  tl_arena_destroy (a);
  CA_CHECK_NO_LEAK ();
}

KT_TEST (bad_requests_change_nothing)
{
  KT_CHECK (ca_install ());
  tl_arena *a;
  tl_clear_last_error ();
  KT_CHECK_EQ (tl_arena_create (128, NULL), TL_EINVAL);
  KT_CHECK (tl_last_error ()[0] != '\0');
  KT_CHECK_EQ (ca.alloc_calls, 0);

  KT_CHECK_EQ (tl_arena_create (256, &a), TL_OK);
  unsigned char *p0 = tl_arena_alloc (a, 10, 0);
  KT_CHECK (p0 != NULL);
  KT_CHECK (tl_arena_alloc (a, 20, 8) != NULL);
  tl_arena_stats s0 = stats_of (a);
  tl_arena_mark m0 = tl_arena_mark_get (a);
  size_t calls = ca.alloc_calls;

  static const struct { size_t n, align; } bad[] = {
    { 0, 8 }, { 0, 0 }, { 8, 3 }, { 8, 6 }, { 8, 8192 }, { 8, 1 << 20 },
    { 8, SIZE_MAX }, { SIZE_MAX, 8 }, { SIZE_MAX - 10, 0 },
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
      tl_clear_last_error ();
      if (tl_arena_alloc (a, bad[i].n, bad[i].align) != NULL)
        KT_FAILF ("alloc (%zu, %zu) succeeded", bad[i].n, bad[i].align);
      KT_CHECK (tl_last_error ()[0] != '\0');
      KT_CHECK (stats_equal (stats_of (a), s0));
      KT_CHECK (marks_equal (tl_arena_mark_get (a), m0));
      KT_CHECK_EQ (ca.alloc_calls, calls);
    }

  /* The next good request lands where it would have anyway.  */
  unsigned char *p = tl_arena_alloc (a, 30, 8);
  KT_CHECK_EQ (p - p0, 40);
  KT_CHECK_EQ (stats_of (a).bytes_used, 70);

  tl_clear_last_error ();
  KT_CHECK (tl_arena_alloc (NULL, 8, 8) == NULL);
  KT_CHECK (tl_last_error ()[0] != '\0');
  tl_arena_mark mn = tl_arena_mark_get (NULL);
  KT_CHECK (mn.block == 0 && mn.offset == 0);
  tl_arena_reset_to (NULL, m0);
  tl_arena_stats sn;
  memset (&sn, 0xff, sizeof sn);
  tl_clear_last_error ();
  tl_arena_stats_get (NULL, &sn);
  KT_CHECK (tl_last_error ()[0] != '\0');
  KT_CHECK (sn.bytes_used == 0 && sn.bytes_reserved == 0
            && sn.high_water == 0 && sn.n_blocks == 0);
  tl_arena_stats_get (a, NULL);
  tl_arena_destroy (NULL);
  KT_CHECK_EQ (ca.alloc_calls, calls);
  tl_arena_destroy (a);

  /* A block size of 0 means 1 MiB.  */
  KT_CHECK_EQ (tl_arena_create (0, &a), TL_OK);
  KT_CHECK (tl_arena_alloc (a, 1, 0) != NULL);
  KT_CHECK_EQ (ca.last_n, (size_t) 1 << 20);
  KT_CHECK_EQ (stats_of (a).bytes_reserved, (size_t) 1 << 20);
  tl_arena_destroy (a);
  CA_CHECK_NO_LEAK ();
}

KT_TEST (nested_marks)
{
  KT_CHECK (ca_install ());
  tl_arena *a;
  KT_CHECK_EQ (tl_arena_create (128, &a), TL_OK);
  unsigned char *keep = tl_arena_alloc (a, 40, 8);
  KT_CHECK (keep != NULL);
  memset (keep, 0x11, 40);

  tl_arena_mark outer = tl_arena_mark_get (a);
  size_t u_outer = stats_of (a).bytes_used;
  unsigned char *x1 = tl_arena_alloc (a, 60, 8);
  unsigned char *x2 = tl_arena_alloc (a, 100, 8);
  KT_CHECK (x1 != NULL && x2 != NULL);
  memset (x1, 0x22, 60);
  memset (x2, 0x33, 100);

  tl_arena_mark inner = tl_arena_mark_get (a);
  size_t u_inner = stats_of (a).bytes_used;
  unsigned char *y1 = tl_arena_alloc (a, 100, 8);
  unsigned char *y2 = tl_arena_alloc (a, 20, 8);
  KT_CHECK (y1 != NULL && y2 != NULL);
  KT_CHECK_EQ (outer.block, 0);
  KT_CHECK_EQ (inner.block, 1);
  KT_CHECK_EQ (tl_arena_mark_get (a).block, 2);
  KT_CHECK_EQ (stats_of (a).n_blocks, 3);
  size_t calls = ca.alloc_calls;

  for (int round = 0; round < 2; round++)
    {
      tl_arena_reset_to (a, inner);
      KT_CHECK (marks_equal (tl_arena_mark_get (a), inner));
      KT_CHECK_EQ (stats_of (a).bytes_used, u_inner);
      KT_CHECK_PTR_EQ (tl_arena_alloc (a, 100, 8), y1);
      KT_CHECK_PTR_EQ (tl_arena_alloc (a, 20, 8), y2);
      KT_CHECK (filled_with (x2, 100, 0x33));

      tl_arena_reset_to (a, inner);
      tl_arena_reset_to (a, outer);
      KT_CHECK (marks_equal (tl_arena_mark_get (a), outer));
      KT_CHECK_EQ (stats_of (a).bytes_used, u_outer);
      KT_CHECK_PTR_EQ (tl_arena_alloc (a, 60, 8), x1);
      KT_CHECK_PTR_EQ (tl_arena_alloc (a, 100, 8), x2);
      KT_CHECK (marks_equal (tl_arena_mark_get (a), inner));
      KT_CHECK_PTR_EQ (tl_arena_alloc (a, 100, 8), y1);
    }
  KT_CHECK (filled_with (keep, 40, 0x11));
  KT_CHECK_EQ (ca.alloc_calls, calls);
  KT_CHECK_EQ (stats_of (a).n_blocks, 3);
  tl_arena_destroy (a);
  CA_CHECK_NO_LEAK ();
}

KT_TEST (a_later_mark_is_ignored)
{
  KT_CHECK (ca_install ());
  tl_arena *a;
  KT_CHECK_EQ (tl_arena_create (128, &a), TL_OK);

  /* An empty arena accepts only its start.  */
  tl_arena_mark start = tl_arena_mark_get (a);
  tl_arena_reset_to (a, start);
  tl_clear_last_error ();
  tl_arena_reset_to (a, (tl_arena_mark) { 1, 0 });
  KT_CHECK (tl_last_error ()[0] != '\0');
  KT_CHECK (marks_equal (tl_arena_mark_get (a), start));

  KT_CHECK (tl_arena_alloc (a, 50, 8) != NULL);
  tl_arena_mark m1 = tl_arena_mark_get (a);
  unsigned char *p1 = tl_arena_alloc (a, 50, 8);
  tl_arena_mark m2 = tl_arena_mark_get (a);
  KT_CHECK (tl_arena_alloc (a, 100, 8) != NULL);
  tl_arena_mark m3 = tl_arena_mark_get (a);
  KT_CHECK_EQ (m3.block, 1);

  tl_arena_reset_to (a, m1);
  tl_arena_stats s1 = stats_of (a);
  tl_arena_mark later[] = {
    m2, m3, { m1.offset + 1, m1.block }, { 0, 5 }, { SIZE_MAX, 0 },
    { 0, SIZE_MAX },
  };
  for (size_t i = 0; i < sizeof later / sizeof later[0]; i++)
    {
      tl_clear_last_error ();
      tl_arena_reset_to (a, later[i]);
      if (tl_last_error ()[0] == '\0')
        KT_FAILF ("mark (%zu, %zu) accepted at (%zu, %zu)", later[i].block,
                  later[i].offset, m1.block, m1.offset);
      KT_CHECK (marks_equal (tl_arena_mark_get (a), m1));
      KT_CHECK (stats_equal (stats_of (a), s1));
    }
  /* The bytes after m1 are handed out once, to the next request.  */
  KT_CHECK_PTR_EQ (tl_arena_alloc (a, 50, 8), p1);

  /* In block 1 again: a mark in block 0 past what was used there was
     taken after a point since rewound past.  */
  KT_CHECK (tl_arena_alloc (a, 100, 8) != NULL);
  KT_CHECK_EQ (tl_arena_mark_get (a).block, 1);
  tl_arena_mark now = tl_arena_mark_get (a);
  tl_clear_last_error ();
  tl_arena_reset_to (a, (tl_arena_mark) { 127, 0 });
  KT_CHECK (tl_last_error ()[0] != '\0');
  KT_CHECK (marks_equal (tl_arena_mark_get (a), now));
  tl_arena_reset_to (a, m2);
  KT_CHECK (marks_equal (tl_arena_mark_get (a), m2));
  tl_arena_destroy (a);
  CA_CHECK_NO_LEAK ();
}

KT_TEST (blocks_are_kept_and_reused)
{
  KT_CHECK (ca_install ());
  tl_arena *a;
  KT_CHECK_EQ (tl_arena_create (128, &a), TL_OK);
  tl_arena_mark m = tl_arena_mark_get (a);
  unsigned char *p1 = tl_arena_alloc (a, 100, 8);
  unsigned char *p2 = tl_arena_alloc (a, 100, 8);
  KT_CHECK (p1 != NULL && p2 != NULL);
  KT_CHECK_EQ (stats_of (a).n_blocks, 2);
  size_t calls = ca.alloc_calls;

  for (int round = 0; round < 3; round++)
    {
      tl_arena_reset_to (a, m);
      KT_CHECK_EQ (stats_of (a).bytes_used, 0);
      KT_CHECK_PTR_EQ (tl_arena_alloc (a, 100, 8), p1);
      KT_CHECK_PTR_EQ (tl_arena_alloc (a, 100, 8), p2);
    }
  KT_CHECK_EQ (ca.alloc_calls, calls);
  KT_CHECK_EQ (ca.free_calls, 0);
  KT_CHECK_EQ (stats_of (a).n_blocks, 2);
  KT_CHECK_EQ (stats_of (a).bytes_reserved, 256);

  /* Blocks [small, small, big]: a request that does not fit the next
     block takes the big one, swapped forward, and the small one is
     still there for the request after.  */
  KT_CHECK (tl_arena_alloc (a, 1000, 8) != NULL);
  KT_CHECK_EQ (stats_of (a).n_blocks, 3);
  calls = ca.alloc_calls;
  tl_arena_reset_to (a, m);
  KT_CHECK_PTR_EQ (tl_arena_alloc (a, 100, 8), p1);
  unsigned char *big = tl_arena_alloc (a, 1000, 8);
  KT_CHECK (big != NULL);
  KT_CHECK_EQ (ca_block_of (big)->n, 1024);
  KT_CHECK_PTR_EQ (tl_arena_alloc (a, 100, 8), p2);
  KT_CHECK_EQ (ca.alloc_calls, calls);
  KT_CHECK_EQ (stats_of (a).bytes_used, 1200);
  KT_CHECK_EQ (stats_of (a).n_blocks, 3);
  KT_CHECK_EQ (ca.free_calls, 0);
  tl_arena_destroy (a);
  CA_CHECK_NO_LEAK ();
}

KT_TEST (exact_fit_uses_the_last_byte)
{
  KT_CHECK (ca_install ());
  tl_arena *a;
  KT_CHECK_EQ (tl_arena_create (128, &a), TL_OK);
  unsigned char *p1 = tl_arena_alloc (a, 64, 64);
  unsigned char *p2 = tl_arena_alloc (a, 64, 64);
  KT_CHECK (p1 != NULL);
  KT_CHECK_EQ (p2 - p1, 64);
  tl_arena_stats s = stats_of (a);
  KT_CHECK_EQ (s.n_blocks, 1);
  KT_CHECK_EQ (s.bytes_used, 128);
  KT_CHECK_EQ (s.bytes_reserved, 128);

  /* With padding: 1 + 63 of padding + 63 + 1 is 128 again.  */
  tl_arena_reset_to (a, (tl_arena_mark) { 0, 0 });
  KT_CHECK_PTR_EQ (tl_arena_alloc (a, 1, 1), p1);
  KT_CHECK_PTR_EQ (tl_arena_alloc (a, 63, 64), p2);
  KT_CHECK_PTR_EQ (tl_arena_alloc (a, 1, 1), p2 + 63);
  KT_CHECK_EQ (stats_of (a).n_blocks, 1);
  KT_CHECK_EQ (stats_of (a).bytes_used, 128);

  /* One byte more does not fit.  */
  unsigned char *p3 = tl_arena_alloc (a, 1, 1);
  KT_CHECK (p3 != NULL);
  KT_CHECK (ca_block_of (p3) != ca_block_of (p1));
  KT_CHECK_EQ (stats_of (a).n_blocks, 2);
  tl_arena_destroy (a);
  CA_CHECK_NO_LEAK ();
}

KT_TEST (oversized_request_gets_its_own_block)
{
  KT_CHECK (ca_install ());
  tl_arena *a;
  KT_CHECK_EQ (tl_arena_create (128, &a), TL_OK);
  unsigned char *small = tl_arena_alloc (a, 10, 0);
  KT_CHECK (small != NULL);
  memset (small, 0x44, 10);
  unsigned char *big = tl_arena_alloc (a, 1000, 64);
  KT_CHECK (big != NULL);
  KT_CHECK_EQ ((uintptr_t) big % 64, 0);
  /* Under ASan a block too small for the request fails right here.  */
  memset (big, 0x55, 1000);
  KT_CHECK_EQ (ca.last_n, 1024);
  const struct ca_block *bb = ca_block_of (big);
  KT_CHECK (bb != NULL && bb != ca_block_of (small));
  KT_CHECK (big + 1000 <= bb->user + bb->n);
  KT_CHECK (filled_with (small, 10, 0x44));
  tl_arena_stats s = stats_of (a);
  KT_CHECK_EQ (s.n_blocks, 2);
  KT_CHECK_EQ (s.bytes_reserved, 128 + 1024);
  KT_CHECK_EQ (s.bytes_used, 1010);

  /* Just over the block size, and over it with a large alignment.  */
  unsigned char *p = tl_arena_alloc (a, 129, 8);
  KT_CHECK (p != NULL);
  KT_CHECK_EQ (ca.last_n, 192);
  memset (p, 0x66, 129);
  p = tl_arena_alloc (a, 5000, 4096);
  KT_CHECK (p != NULL);
  KT_CHECK_EQ ((uintptr_t) p % 4096, 0);
  KT_CHECK_EQ (ca.last_n, 5056);
  KT_CHECK_EQ (ca.last_align, 4096);
  memset (p, 0x77, 5000);
  KT_CHECK (filled_with (big, 1000, 0x55));
  KT_CHECK_EQ (stats_of (a).bytes_reserved, 128 + 1024 + 192 + 5056);
  tl_arena_destroy (a);
  CA_CHECK_NO_LEAK ();
}

/* The random test's reference model.  It knows nothing of the arena's
   internals, only the hook blocks (from the counting allocator) and
   the definition: a request goes at the first aligned address of the
   current block if it fits, else at the first aligned address of
   another block; bytes_used grows by the padding and the size.  */
struct model_alloc
{
  unsigned char *p;
  size_t n;
  unsigned char fill;
};

struct model_mark
{
  tl_arena_mark m;
  size_t used;
  size_t n_live;
  unsigned char *end;
};

#define MODEL_OPS 160
#define MODEL_MARKS 12

static uint64_t
next_random (uint64_t *s)
{
  uint64_t z = (*s += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

static void
model_run (uint64_t seed)
{
  static const size_t block_sizes[] = { 64, 128, 200, 256, 1024, 4096 };
  uint64_t rng = seed;
  size_t bsize = block_sizes[next_random (&rng) % 6];
  struct model_alloc live[MODEL_OPS];
  size_t n_live = 0;
  struct model_mark marks[MODEL_MARKS];
  size_t n_marks = 0;
  const unsigned char *blocks[MODEL_OPS];
  size_t n_blocks = 0, reserved = 0, used = 0, high = 0;
  unsigned char *end = NULL;

  tl_arena *a;
  KT_CHECK_EQ (tl_arena_create (bsize, &a), TL_OK);
  for (int op = 0; op < MODEL_OPS; op++)
    {
      uint64_t r = next_random (&rng);
      int kind = (int) (r % 10);
      r /= 10;
      if (kind <= 5)
        {
          size_t n, align;
          switch (r % 10)
            {
            case 0: n = bsize + 1 + (r / 10) % (2 * bsize); break;
            case 1: case 2: n = 65 + (r / 10) % bsize; break;
            default: n = 1 + (r / 10) % 64; break;
            }
          r /= 10 * 4096;
          int k = (int) (r % 16);
          align = k >= 13 ? 0 : (size_t) 1 << (k % 2 == 0 ? k : k / 4);
          size_t want = align == 0 ? 64 : align;

          unsigned char *p = tl_arena_alloc (a, n, align);
          if (p == NULL)
            KT_FAILF ("seed %" PRIu64 " op %d: alloc (%zu, %zu): %s", seed,
                      op, n, align, tl_last_error ());
          if ((uintptr_t) p % want != 0)
            KT_FAILF ("seed %" PRIu64 " op %d: %p not aligned to %zu",
                      seed, op, (void *) p, want);
          const struct ca_block *b = ca_block_of (p);
          KT_CHECK (b != NULL && p + n <= b->user + b->n);
          const struct ca_block *cur = end ? ca_block_of (end - 1) : NULL;
          if (b == cur)
            {
              KT_CHECK_EQ ((uintptr_t) p, align_up ((uintptr_t) end, want));
              used += (size_t) (p - end) + n;
            }
          else
            {
              if (cur != NULL
                  && align_up ((uintptr_t) end, want) + n
                     <= (uintptr_t) (cur->user + cur->n))
                KT_FAILF ("seed %" PRIu64 " op %d: left a block where "
                          "%zu bytes fit", seed, op, n);
              KT_CHECK_EQ ((uintptr_t) p,
                           align_up ((uintptr_t) b->user, want));
              used += (size_t) (p - b->user) + n;
              bool seen = false;
              for (size_t i = 0; i < n_blocks; i++)
                seen |= blocks[i] == b->user;
              if (!seen)
                {
                  blocks[n_blocks++] = b->user;
                  reserved += b->n;
                }
            }
          for (size_t i = 0; i < n_live; i++)
            if (p < live[i].p + live[i].n && live[i].p < p + n)
              KT_FAILF ("seed %" PRIu64 " op %d: [%p, +%zu) overlaps "
                        "[%p, +%zu)", seed, op, (void *) p, n,
                        (void *) live[i].p, live[i].n);
          unsigned char fill = (unsigned char) (op * 37 + 1);
          memset (p, fill, n);
          live[n_live++] = (struct model_alloc) { p, n, fill };
          end = p + n;
          if (used > high)
            high = used;
        }
      else if (kind <= 7 && n_marks < MODEL_MARKS)
        {
          marks[n_marks++] = (struct model_mark) {
            tl_arena_mark_get (a), used, n_live, end };
        }
      else if (n_marks > 0)
        {
          /* Rewind to the top mark, or to a deeper one.  */
          size_t level = kind == 9 ? (size_t) (r % n_marks) : n_marks - 1;
          struct model_mark *m = &marks[level];
          tl_arena_reset_to (a, m->m);
          KT_CHECK (marks_equal (tl_arena_mark_get (a), m->m));
          used = m->used;
          n_live = m->n_live;
          end = m->end;
          n_marks = (r / 16) % 2 ? level + 1 : level;
          for (size_t i = 0; i < n_live; i++)
            if (!filled_with (live[i].p, live[i].n, live[i].fill))
              KT_FAILF ("seed %" PRIu64 " op %d: allocation %zu changed",
                        seed, op, i);
        }
      tl_arena_stats s = stats_of (a);
      if (s.bytes_used != used || s.high_water != high
          || s.n_blocks != n_blocks || s.bytes_reserved != reserved)
        KT_FAILF ("seed %" PRIu64 " op %d: stats (%zu, %zu, %zu, %zu), "
                  "model (%zu, %zu, %zu, %zu)", seed, op, s.bytes_used,
                  s.high_water, s.n_blocks, s.bytes_reserved, used, high,
                  n_blocks, reserved);
    }
  for (size_t i = 0; i < n_live; i++)
    KT_CHECK (filled_with (live[i].p, live[i].n, live[i].fill));
  tl_arena_destroy (a);
}

KT_TEST (random_operations_against_a_model)
{
  for (uint64_t seed = 1; seed <= 300; seed++)
    {
      KT_CHECK (ca_install ());
      model_run (seed);
      if (kt_failed)
        return;
      CA_CHECK_NO_LEAK ();
    }
}

/* One engine step: a mark, a few requests, a rewind.  The two shapes
   ask in different orders, so reuse must pick blocks by size.  */
static bool
engine_step (tl_arena *a, int shape)
{
  static const size_t sizes[2][4] = { { 3000, 3000, 5000, 100 },
                                      { 100, 5000, 3000, 3000 } };
  tl_arena_mark m = tl_arena_mark_get (a);
  size_t u = stats_of (a).bytes_used;
  for (int i = 0; i < 4; i++)
    {
      unsigned char *p = tl_arena_alloc (a, sizes[shape][i], 0);
      if (p == NULL)
        return false;
      memset (p, i, sizes[shape][i]);
    }
  tl_arena_reset_to (a, m);
  return stats_of (a).bytes_used == u;
}

KT_TEST (zero_hook_calls_after_warmup)
{
  KT_CHECK (ca_install ());
  tl_arena *a;
  KT_CHECK_EQ (tl_arena_create (4096, &a), TL_OK);
  KT_CHECK (tl_arena_alloc (a, 64, 0) != NULL);
  for (int i = 0; i < 3; i++)
    KT_CHECK (engine_step (a, i % 2));
  tl_arena_stats warm = stats_of (a);
  size_t calls = ca.alloc_calls, frees = ca.free_calls;
  ca_fail_all_from_now ();
  for (int i = 0; i < 1000; i++)
    if (!engine_step (a, i % 2))
      KT_FAILF ("step %d failed: %s", i, tl_last_error ());
  KT_CHECK_EQ (ca.alloc_calls, calls);
  KT_CHECK_EQ (ca.free_calls, frees);
  KT_CHECK (stats_equal (stats_of (a), warm));
  ca_fail_none ();
  tl_arena_destroy (a);
  CA_CHECK_NO_LEAK ();
}

/* tl_arena_alloc that, when the injected failure hits it, checks that
   nothing changed and tries again.  */
static void *
alloc_or_check_unchanged (tl_arena *a, size_t n, size_t align)
{
  tl_arena_stats before = stats_of (a);
  tl_arena_mark mark = tl_arena_mark_get (a);
  size_t injected = ca.injected;
  tl_clear_last_error ();
  void *p = tl_arena_alloc (a, n, align);
  if (p != NULL)
    return p;
  if (ca.injected != injected + 1 || tl_last_error ()[0] == '\0'
      || !stats_equal (stats_of (a), before)
      || !marks_equal (tl_arena_mark_get (a), mark))
    return NULL;
  return tl_arena_alloc (a, n, align);
}

/* A script that grows the block list several times and makes normal,
   oversized and reused blocks; its final stats in *OUT.  */
static void
failure_script (tl_arena_stats *out)
{
  tl_arena *a = NULL;
  tl_status st = tl_arena_create (128, &a);
  if (st != TL_OK)
    {
      KT_CHECK_EQ (st, TL_ENOMEM);
      KT_CHECK (a == NULL);
      KT_CHECK_EQ (ca.injected, 1);
      KT_CHECK (tl_last_error ()[0] != '\0');
      KT_CHECK_EQ (ca.n_live, 0);
      KT_CHECK_EQ (tl_arena_create (128, &a), TL_OK);
    }
  tl_arena_mark m0 = tl_arena_mark_get (a);
  for (int i = 0; i < 30; i++)
    if (alloc_or_check_unchanged (a, 100, 8) == NULL)
      KT_FAILF ("small request %d", i);
  tl_arena_mark m1 = tl_arena_mark_get (a);
  for (int i = 0; i < 3; i++)
    if (alloc_or_check_unchanged (a, 1000, 64) == NULL)
      KT_FAILF ("oversized request %d", i);
  tl_arena_reset_to (a, m1);
  KT_CHECK (alloc_or_check_unchanged (a, 100, 64) != NULL);
  tl_arena_reset_to (a, m0);
  for (int i = 0; i < 62; i++)
    if (alloc_or_check_unchanged (a, 100, 8) == NULL)
      KT_FAILF ("small request %d after the rewind", i);
  tl_arena_stats_get (a, out);
  tl_arena_destroy (a);
}

KT_TEST (hook_failure_leaves_the_arena_usable)
{
  KT_CHECK (ca_install ());
  tl_arena_stats expect;
  failure_script (&expect);
  if (kt_failed)
    return;
  KT_CHECK (ca.alloc_calls > 42);
  CA_CHECK_NO_LEAK ();
  for (size_t k = 0; k < 40; k++)
    {
      KT_CHECK (ca_install ());
      ca_fail_call (k);
      tl_arena_stats got;
      failure_script (&got);
      if (kt_failed)
        KT_FAILF ("with hook call %zu failing", k);
      if (ca.injected != 1)
        KT_FAILF ("hook call %zu: %zu failures injected", k, ca.injected);
      if (!stats_equal (got, expect))
        KT_FAILF ("hook call %zu failing: different final stats", k);
      if (ca.n_live != 0)
        KT_FAILF ("hook call %zu failing: %zu blocks leaked", k, ca.n_live);
      CA_CHECK_NO_LEAK ();
    }
}

KT_MAIN (KT_CASE (hand_example),
         KT_CASE (every_power_of_two_alignment),
         KT_CASE (bad_requests_change_nothing),
         KT_CASE (nested_marks),
         KT_CASE (a_later_mark_is_ignored),
         KT_CASE (blocks_are_kept_and_reused),
         KT_CASE (exact_fit_uses_the_last_byte),
         KT_CASE (oversized_request_gets_its_own_block),
         KT_CASE (random_operations_against_a_model),
         KT_CASE (zero_hook_calls_after_warmup),
         KT_CASE (hook_failure_leaves_the_arena_usable))
