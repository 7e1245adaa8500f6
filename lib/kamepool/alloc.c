/* alloc.c -- the allocation entry points shared by the kame_pool_* API
   and the malloc interposition: the cold half of free, usable size,
   aligned allocation, realloc and calloc.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <config.h>

#include <errno.h>
#include <string.h>

#include "kp_internal.h"

/* The countdown went below zero on a malloc of N bytes aligned to
   ALIGN, with guarded sampling on (STATE, and the heap profile too if
   it says so).  Each sampler keeps the bytes left before its own next
   sample (kp_tc.prof_rem, guard_rem); the countdown is armed with the
   smaller (sample_armed), so what it counted since is SAMPLE_ARMED less
   what is left of it.  The sampler whose count went below zero takes
   the block (the profile first, when both do: the guarded sample is
   then skipped, its next gap drawn) and draws its next gap.  A block
   aligned to more than 16 bytes is never the profile's (kp_memalign
   counts those down only without it).  */
static KP_NOINLINE void *
kp_malloc_sample_shared (size_t n, size_t align, unsigned state)
{
  kp_tcache_t *tc = &kp_tc;
  int64_t counted = tc->sample_armed - (int64_t) tc->prof_left;
  void *p = NULL;
  if (state & KP_SAMPLE_PROF)
    {
      tc->prof_rem -= counted;
      if (tc->prof_rem < 0)
        {
          /* kp_prof_sample leaves the bytes to its next sample in
             prof_left.  */
          p = kp_prof_sample (n);
          tc->prof_rem = (int64_t) tc->prof_left;
        }
    }
  else
    tc->prof_rem = INT64_MAX;
  tc->guard_rem -= counted;
  if (tc->guard_rem < 0)
    {
      void *g = kp_guard_sample (n, align, p == NULL);
      if (g != NULL)
        p = g;
    }
  int64_t armed = tc->prof_rem < tc->guard_rem ? tc->prof_rem
                                               : tc->guard_rem;
  if (armed < 0)
    armed = 0;
  tc->sample_armed = armed;
  tc->prof_left = (uint64_t) armed;
  if (p != NULL)
    return p;
  return align > KP_MIN_ALIGN ? NULL : kp_malloc_unsampled (n);
}

void *
kp_malloc_sample (size_t n)
{
  /* The acquire pairs with kp_process_init's release: the samplers'
     settings are visible when their bits are.  */
  unsigned state = atomic_load_explicit (&kp_sample_state,
                                         memory_order_acquire);
  /* The process's first malloc, or one that raced with its
     initialisation: initialise, so that the block can be sampled (a
     malloc made by the initialisation itself is not).  */
  if (!(state & KP_SAMPLE_DECIDED) && kp_ready ())
    state = atomic_load_explicit (&kp_sample_state, memory_order_acquire);
  if (state & KP_SAMPLE_GUARD)
    return kp_malloc_sample_shared (n, KP_MIN_ALIGN, state);
  if (state & KP_SAMPLE_PROF)
    {
      void *p = kp_prof_sample (n);
      if (p != NULL)
        return p;
    }
  else
    /* Before the settings are read, the next malloc comes back here;
       after, with no sampler on, none does.  */
    kp_tc.prof_left = state & KP_SAMPLE_DECIDED ? KP_SAMPLE_NEVER : 0;
  return kp_malloc_unsampled (n);
}

/* kp_free_pool out of line: kp_free_cold's frame then has no room to
   make for it on the large blocks' path.  */
static KP_NOINLINE void
kp_free_pool_call (void *p)
{
  kp_free_pool (p);
}

/* free of anything but a pool block: NULL, a large block, a pointer
   that is not ours.  */
void
kp_free_cold (void *p)
{
  if (p == NULL)
    return;
  int kind = kp_radix_lookup ((uintptr_t) p);
  switch (kind)
    {
    case KP_RADIX_POOL:
      kp_free_pool_call (p);
      return;
    case KP_RADIX_LARGE:
    case KP_RADIX_LARGE_PREV:
      kp_large_free (p, kind);
      return;
    case KP_RADIX_PROF:
      kp_prof_free (p);
      return;
    case KP_RADIX_GUARD:
      kp_guard_free ("free", p);
      return;
    default:
      /* Not ours: the C library's, or misuse.  */
      if (kp_foreign_ok ("free", p))
        kp_libc_free (p);
      return;
    }
}

size_t
kp_usable_size (const void *p)
{
  if (p == NULL)
    return 0;
  int kind = kp_radix_lookup ((uintptr_t) p);
  switch (kind)
    {
    case KP_RADIX_POOL:
      return kp_pool_usable_size (p);
    case KP_RADIX_LARGE:
    case KP_RADIX_LARGE_PREV:
      return kp_large_usable (p, kind);
    case KP_RADIX_PROF:
      return kp_prof_usable (p);
    case KP_RADIX_GUARD:
      return kp_guard_usable (p);
    default:
      return 0;
    }
}

bool
kp_owns (const void *p)
{
  int kind = kp_radix_lookup ((uintptr_t) p);
  switch (kind)
    {
    case KP_RADIX_POOL:
    case KP_RADIX_PROF:
    case KP_RADIX_GUARD:
      return true;
    case KP_RADIX_LARGE:
    case KP_RADIX_LARGE_PREV:
      return kp_large_owns (p, kind);
    default:
      return false;
    }
}

/* N bytes aligned to ALIGN, a power of two.  Small classes serve it
   when one has the size and the natural alignment; then a dedicated
   chunk (256 KiB-aligned); then a mapping at an aligned offset.  The
   heap profile samples the calls of the default alignment only: a
   sampled block is 64 bytes past a page boundary.  Guarded sampling
   takes alignments up to a page (guard.c).  */
void *
kp_memalign (size_t align, size_t n)
{
  if (align <= KP_MIN_ALIGN)
    return kp_malloc (n);
  if (n > PTRDIFF_MAX)
    {
      errno = ENOMEM;
      return NULL;
    }
  if (!kp_ready ())
    return kp_libc_memalign (align, n);
  /* With guarded sampling on and the profile off, the countdown counts
     aligned blocks too.  */
  unsigned state = atomic_load_explicit (&kp_sample_state,
                                         memory_order_acquire);
  if (kp_unlikely ((state & (KP_SAMPLE_GUARD | KP_SAMPLE_PROF))
                   == KP_SAMPLE_GUARD))
    {
      kp_tc.prof_left -= n;
      if ((int64_t) kp_tc.prof_left < 0)
        {
          void *g = kp_malloc_sample_shared (n, align, state);
          if (g != NULL)
            return g;
        }
    }
  int cls = kp_class_for_aligned (n, align);
  if (cls < 0)
    return kp_malloc_large (n, align);
  void *p = kp_malloc_unsampled (kp_class_size[cls]);
  if (kp_unlikely (p == NULL))
    return NULL;
  if (kp_unlikely (((uintptr_t) p & (align - 1)) != 0))
    {
      /* Beyond the region cap the class fell back to libc's malloc,
         which knows nothing of the alignment.  */
      kp_free (p);
      return kp_libc_memalign (align, n);
    }
  return p;
}

/* A thread that frees before it ever allocated gets its heap now
   (heap.c): its frees are then counted in it without a
   read-modify-write, it batches them, and it can foster the chunks it
   takes over.  Its batch is empty: the long way, which also takes a
   heap that the init could not make (the push of a lone block).  */
void
kp_free_remote_first (void *p, kp_chunk_t *c)
{
  kp_thread_init ();
  kp_free_remote_slow (p, c, kp_tc.heap);
}

/* P is in a small chunk: true if it starts a block that is not marked
   free; false after reporting misuse by the caller of CALL.  */
static bool
kp_small_block_live (const char *call, void *p)
{
  kp_chunk_t *c = kp_chunk_of (p);
  uintptr_t off = (uintptr_t) p - (uintptr_t) kp_chunk_data (c);
  if (!kp_chunk_block_start (c, off))
    {
      kp_misuse (call, "invalid pointer (not the start of a block):", p);
      return false;
    }
  if (kp_block_marked_free (p))
    {
      kp_misuse (call, "invalid pointer (freed already):", p);
      return false;
    }
  return true;
}

void *
kp_realloc (void *p, size_t n)
{
  if (p == NULL)
    return kp_malloc (n);
  if (n == 0)
    {
      kp_free (p);
      return NULL;
    }
  if (!kp_owns (p))
    {
      if (kp_foreign_ok ("realloc", p))
        return kp_libc_realloc (p, n);
      errno = EINVAL;
      return NULL;
    }
  size_t usable = kp_usable_size (p);
  int kind = kp_radix_lookup ((uintptr_t) p);
  if (usable == 0 && kind == KP_RADIX_GUARD)
    {
      kp_guard_misuse ("realloc", p);
      errno = EINVAL;
      return NULL;
    }
  if (usable == 0)
    {
      kp_misuse ("realloc", "invalid pointer (not an allocated block):", p);
      errno = EINVAL;
      return NULL;
    }
  /* A sampled or guarded block stays where it is when it shrinks, and
     moves when it grows.  */
  bool sampled = kind == KP_RADIX_PROF || kind == KP_RADIX_GUARD;
  if (!sampled && usable <= KP_SMALL_MAX
      && !kp_small_block_live ("realloc", p))
    {
      errno = EINVAL;
      return NULL;
    }
  if (n <= usable)
    return p;
  if (!sampled
      && (usable > KP_DEDICATED_MAX ? kp_large_grow (p, n)
          : usable > KP_SMALL_MAX && kp_dedicated_grow (p, n)))
    return p;
  void *q = kp_malloc (n);
  if (q == NULL)
    return NULL;
  memcpy (q, p, usable);
  kp_free (p);
  return q;
}

void *
kp_calloc (size_t n, size_t m)
{
  size_t total;
  if (__builtin_mul_overflow (n, m, &total))
    {
      errno = ENOMEM;
      return NULL;
    }
  void *p = kp_malloc (total);
  /* A fresh mapping is already zero; touching it would only fault in
     pages the program may never use.  */
  if (p != NULL && !(total > KP_DEDICATED_MAX && kp_large_fresh (p)))
    memset (p, 0, total);
  return p;
}

/* free_sized and free_aligned_sized (C23), and their kame_pool_
   names: free P, allocated with SIZE bytes aligned to ALIGN (0: the
   default alignment), after checking what can be checked without a
   record of the size asked for.  A SIZE above the block's usable size
   is certainly wrong; a smaller one is not, since realloc shrinks in
   place and aligned or class-rounded blocks are larger than asked for.
   An alignment that is not a power of two, or that P does not have, is
   wrong too.  Misuse is reported as for free (kp_misuse), naming CALL,
   and with KAME_POOL_ON_MISUSE=report the block stays allocated.
   Pointers that are not the pool's (usable size 0) go to kp_free,
   which checks them as free does.  */
void
kp_free_sized (const char *call, void *p, size_t align, size_t size)
{
  if (p == NULL)
    return;
  if (align != 0 && (align & (align - 1)) != 0)
    {
      kp_misuse (call, "invalid alignment (not a power of two):", p);
      return;
    }
  if (align != 0 && ((uintptr_t) p & (align - 1)) != 0)
    {
      kp_misuse (call, "invalid alignment (the block does not have it):", p);
      return;
    }
  size_t usable = kp_usable_size (p);
  if (usable != 0 && size > usable)
    {
      kp_misuse (call, "invalid size (larger than the block):", p);
      return;
    }
  kp_free (p);
}
