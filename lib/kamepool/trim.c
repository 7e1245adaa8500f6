/* trim.c -- kame_pool_trim: give back now the free memory that the
   pool would otherwise keep resident, as glibc's malloc_trim does for
   its heap (mallinfo.c exports it under that name).

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   Three stores of free memory, each with the call that empties it:

     the calling thread's chunks   kp_heap_trim (heap.c): collect the
                                   remote frees, release the empty
                                   chunks, purge the free pages of the
                                   others, the active ones included;
                                   and the shared classes' chunks
                                   likewise, under their locks
                                   (kp_shared_trim), after the
                                   caller's slots;
     the large recycle cache       kp_cache_drain (cache.c): the
                                   caller's first level and the shared
                                   second level;
     the free units kept resident  kp_units_purge_dirty (region.c).

   Other threads' chunks are theirs alone (their lists and free lists
   are plain fields), so they are not touched: their free pages go
   with their decay, on their own slow paths.  Everything here is safe
   while other threads allocate and free: the first store is the
   caller's own, the other two are shared through atomics already.

   PAD bounds what stays of the last two, the memory kept ready for
   the next claims without a system call (glibc's pad is the free space
   left at the top of its heap, which serves the same purpose): the
   cache is left whole if it holds at most PAD bytes, and drained
   otherwise (the caller's blocks and the shared ones: each other
   thread keeps its own first level); then the free units likewise,
   against what is left of PAD.  The cache's own calls only empty it,
   and a partial drain would need cache.c's eviction by size, so it is
   all or nothing.

   The answer says whether memory went back to the kernel, counted
   where it happens: pages purged in the caller's chunks; units of the
   caller's chunks released and not kept resident (region.c counts the
   releases that discard pages); bytes drained from the cache and not
   kept resident (a mapping is unmapped, a dedicated chunk's units go
   back to their region, where their pages are discarded or join the
   free resident units, whose count then grows by less than the bytes
   drained); and free resident units that the last step gave back,
   those just added included.  With no other thread allocating or
   freeing it is exact; otherwise another thread's claim, release or
   discard can move these counts under us.  */

#include <config.h>

#include <errno.h>

#include "kp_internal.h"

int
kame_pool_trim (size_t pad)
{
  int saved = errno;
  bool released = false;

  /* The calling thread's chunks.  A chunk released here goes back to
     its region: its pages are given back at once, or kept resident
     within the dirty budget, and then the last step decides.  */
  size_t discards = kp_units_discards ();
  if (kp_heap_trim () != 0 || kp_units_discards () != discards)
    released = true;

  /* The large recycle cache, kept whole if it fits in PAD.  */
  size_t keep = pad;
  size_t cached = kp_cache_bytes ();
  if (cached <= keep)
    keep -= cached;
  else
    {
      size_t dirty = kp_dirty_bytes ();
      kp_cache_drain ();
      size_t left = kp_cache_bytes ();
      size_t now = kp_dirty_bytes ();
      size_t drained = cached > left ? cached - left : 0;
      size_t kept = now > dirty ? now - dirty : 0;
      if (drained > kept)
        released = true;
    }

  /* The free units whose pages are resident, those that the first two
     steps released included, kept if they fit in what is left.  */
  size_t dirty = kp_dirty_bytes ();
  if (dirty != 0 && dirty > keep)
    {
      kp_units_purge_dirty ();
      if (kp_dirty_bytes () < dirty)
        released = true;
    }
  errno = saved;
  return released;
}
