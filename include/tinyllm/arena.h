/* tinyllm/arena.h -- the tinyllm arena with marks: scratch memory for
   compute kernels, handed out by bumping an offset and released all
   at once by rewinding to a mark.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#ifndef TINYLLM_ARENA_H
#define TINYLLM_ARENA_H 1

#include <stddef.h>
#include <tinyllm/abi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* An arena owns a list of blocks from the allocation hooks installed
   when it was created.  It is not thread-safe: use one arena per
   thread, or lock around every call.  */
typedef struct tl_arena tl_arena;

/* A position: the index of the current block and the offset of its
   first free byte.  Positions compare by block, then offset.  */
typedef struct { size_t offset; size_t block; } tl_arena_mark;

/* bytes_used counts the bytes handed out, padding included, up to the
   current position; high_water is its largest value so far;
   bytes_reserved is the sum of the block sizes.  */
typedef struct { size_t bytes_used, bytes_reserved, high_water, n_blocks; }
  tl_arena_stats;

/* A new arena of BLOCK_BYTES-byte blocks (0 means 1 MiB) in *OUT; no
   block is reserved yet.  TL_EINVAL if OUT is NULL, TL_ENOMEM if the
   hook fails (*OUT is then NULL).  */
TL_API tl_status tl_arena_create (size_t block_bytes, tl_arena **out);

/* N bytes whose address is a multiple of ALIGN, a power of two up to
   4096 (0 means 64).  NULL with the error slot set, and the arena
   unchanged, if N is 0, ALIGN is bad or the hook fails.  */
TL_API void *tl_arena_alloc (tl_arena *a, size_t n, size_t align);

/* The current position.  */
TL_API tl_arena_mark tl_arena_mark_get (const tl_arena *a);

/* Release everything allocated after M.  A mark later than the
   current position is ignored and sets the error slot.  */
TL_API void tl_arena_reset_to (tl_arena *a, tl_arena_mark m);

/* Fill *OUT with the arena's counters.  */
TL_API void tl_arena_stats_get (const tl_arena *a, tl_arena_stats *out);

/* Free every block, the block list and the arena; NULL does
   nothing.  */
TL_API void tl_arena_destroy (tl_arena *a);

#ifdef __cplusplus
}
#endif

#endif /* TINYLLM_ARENA_H */
