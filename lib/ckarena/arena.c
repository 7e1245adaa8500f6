/* arena.c -- the tinyllm arena with marks (include/tinyllm/arena.h):
   bump allocation in a list of blocks, rewinding to a mark, keeping
   and reusing the blocks after a rewind.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <config.h>

#include <stdalign.h>
#include <stdint.h>
#include <string.h>

#include <tinyllm/arena.h>

#define TL_ARENA_DEFAULT_BLOCK ((size_t) 1 << 20)
#define TL_ARENA_DEFAULT_ALIGN ((size_t) 64)
#define TL_ARENA_MAX_ALIGN ((size_t) 4096)
/* Blocks start on a cache line, and oversized ones are a whole number
   of cache lines.  */
#define TL_ARENA_BLOCK_ALIGN ((size_t) 64)

struct tl_arena_block
{
  unsigned char *base;
  size_t size;
  /* bytes_used when the arena moved into this block, that is, the sum
     of the offsets reached in the blocks before it.  Valid for the
     blocks up to the current one only.  */
  size_t used_before;
};

/* The position is (cur, off).  Blocks 0..cur-1 are full up to where
   the arena left them, block cur is in use up to off, and the blocks
   after cur are free: marks nest, so nothing in them is live, and
   their order may change.  With no block at all the position is
   (0, 0).  */
struct tl_arena
{
  /* The hooks installed at creation; every block goes back to the
     allocator it came from even if tl_set_allocator runs meanwhile.  */
  tl_allocator hooks;
  size_t block_bytes;
  struct tl_arena_block *blocks;
  size_t n_blocks;
  size_t capacity;
  size_t cur;
  size_t off;
  size_t high_water;
  size_t reserved;
  /* Copies of blocks[cur]'s base, size and used_before (NULL, 0, 0 with
     no block), kept by tl_arena_set_cur, so that the bump path loads
     them from the arena itself instead of through the block list.  */
  unsigned char *cur_base;
  size_t cur_size;
  size_t cur_used_before;
};

/* Make block I the current one.  */
static void
tl_arena_set_cur (tl_arena *a, size_t i)
{
  a->cur = i;
  a->cur_base = a->blocks[i].base;
  a->cur_size = a->blocks[i].size;
  a->cur_used_before = a->blocks[i].used_before;
}

static size_t
tl_arena_pad (const unsigned char *p, size_t align)
{
  return (size_t) -(uintptr_t) p & (align - 1);
}

static size_t
tl_arena_used (const tl_arena *a)
{
  return a->cur_used_before + a->off;
}

/* Whether N bytes aligned to ALIGN fit in block B from offset OFF;
   the offset of the allocation in *AT if so.  */
static int
tl_arena_fits (const struct tl_arena_block *b, size_t off, size_t n,
               size_t align, size_t *at)
{
  size_t pad = tl_arena_pad (b->base + off, align);
  size_t room = b->size - off;
  if (pad > room || n > room - pad)
    return 0;
  *at = off + pad;
  return 1;
}

tl_status
tl_arena_create (size_t block_bytes, tl_arena **out)
{
  if (out == NULL)
    {
      tl_set_last_error ("tl_arena_create: out is NULL");
      return TL_EINVAL;
    }
  *out = NULL;
  tl_allocator hooks;
  tl_get_allocator (&hooks);
  tl_arena *a = hooks.alloc (hooks.ctx, sizeof *a, alignof (tl_arena));
  if (a == NULL)
    {
      tl_set_last_error ("tl_arena_create: the allocation hook failed");
      return TL_ENOMEM;
    }
  memset (a, 0, sizeof *a);
  a->hooks = hooks;
  a->block_bytes = block_bytes != 0 ? block_bytes : TL_ARENA_DEFAULT_BLOCK;
  *out = a;
  return TL_OK;
}

/* The request did not fit in the current block: move to the next
   position, reusing a free block that is large enough or else a new
   one from the hook.  Nothing changes until both hook calls (the block
   and, when full, a larger list) have succeeded.  Kept out of line, so
   that the bump path of tl_arena_alloc saves no registers.  */
static __attribute__ ((__noinline__)) void *
tl_arena_alloc_slow (tl_arena *a, size_t n, size_t align)
{
  size_t next = a->n_blocks == 0 ? 0 : a->cur + 1;
  size_t at;

  for (size_t i = next; i < a->n_blocks; i++)
    if (tl_arena_fits (&a->blocks[i], 0, n, align, &at))
      {
        struct tl_arena_block t = a->blocks[i];
        a->blocks[i] = a->blocks[next];
        a->blocks[next] = t;
        goto move;
      }

  size_t size = a->block_bytes;
  if (n > size)
    {
      if (n > SIZE_MAX - (TL_ARENA_BLOCK_ALIGN - 1))
        {
          tl_set_last_error ("tl_arena_alloc: %zu bytes is too large", n);
          return NULL;
        }
      size = (n + TL_ARENA_BLOCK_ALIGN - 1) & ~(TL_ARENA_BLOCK_ALIGN - 1);
    }

  struct tl_arena_block *list = NULL;
  size_t capacity = a->capacity;
  if (a->n_blocks == a->capacity)
    {
      capacity = a->capacity == 0 ? 4 : 2 * a->capacity;
      if (capacity > SIZE_MAX / sizeof *list)
        {
          tl_set_last_error ("tl_arena_alloc: too many blocks");
          return NULL;
        }
      list = a->hooks.alloc (a->hooks.ctx, capacity * sizeof *list,
                             alignof (struct tl_arena_block));
      if (list == NULL)
        {
          tl_set_last_error ("tl_arena_alloc: the allocation hook failed "
                             "to grow the block list");
          return NULL;
        }
    }

  size_t block_align = align > TL_ARENA_BLOCK_ALIGN ? align
                                                    : TL_ARENA_BLOCK_ALIGN;
  struct tl_arena_block fresh =
    { a->hooks.alloc (a->hooks.ctx, size, block_align), size, 0 };
  if (fresh.base == NULL
      || !tl_arena_fits (&fresh, 0, n, align, &at))
    {
      if (fresh.base == NULL)
        tl_set_last_error ("tl_arena_alloc: the allocation hook failed for "
                           "a block of %zu bytes", size);
      else
        {
          /* Only a hook that ignores the alignment gets here.  */
          tl_set_last_error ("tl_arena_alloc: the allocation hook returned "
                             "a block not aligned to %zu", block_align);
          a->hooks.free (a->hooks.ctx, fresh.base);
        }
      if (list != NULL)
        a->hooks.free (a->hooks.ctx, list);
      return NULL;
    }

  if (list != NULL)
    {
      if (a->n_blocks != 0)
        memcpy (list, a->blocks, a->n_blocks * sizeof *list);
      if (a->blocks != NULL)
        a->hooks.free (a->hooks.ctx, a->blocks);
      a->blocks = list;
      a->capacity = capacity;
    }
  /* The free blocks are unordered, so the one at NEXT goes to the end
     instead of shifting them all.  */
  if (next < a->n_blocks)
    a->blocks[a->n_blocks] = a->blocks[next];
  a->blocks[next] = fresh;
  a->n_blocks++;
  a->reserved += size;

move:
  a->blocks[next].used_before = next == 0 ? 0 : tl_arena_used (a);
  tl_arena_set_cur (a, next);
  a->off = at + n;
  size_t used = tl_arena_used (a);
  if (used > a->high_water)
    a->high_water = used;
  return a->blocks[next].base + at;
}

/* The refusals of tl_arena_alloc, out of line: NULL, with the reason
   in the error slot.  */
static __attribute__ ((__noinline__, __cold__)) void *
tl_arena_alloc_refuse (const tl_arena *a, size_t n, size_t align)
{
  if (a == NULL)
    tl_set_last_error ("tl_arena_alloc: arena is NULL");
  else if (n == 0)
    tl_set_last_error ("tl_arena_alloc: size 0");
  else
    tl_set_last_error ("tl_arena_alloc: alignment %zu is not a power of "
                       "two up to %zu", align, TL_ARENA_MAX_ALIGN);
  return NULL;
}

void *
tl_arena_alloc (tl_arena *a, size_t n, size_t align)
{
  if (align == 0)
    align = TL_ARENA_DEFAULT_ALIGN;
  if (a == NULL || n == 0 || align > TL_ARENA_MAX_ALIGN
      || (align & (align - 1)) != 0)
    return tl_arena_alloc_refuse (a, n, align);

  /* With no block, cur_size is 0 and nothing fits.  */
  size_t off = a->off;
  size_t pad = tl_arena_pad (a->cur_base + off, align);
  size_t room = a->cur_size - off;
  if (pad <= room && n <= room - pad)
    {
      size_t at = off + pad;
      a->off = at + n;
      size_t used = a->cur_used_before + at + n;
      if (used > a->high_water)
        a->high_water = used;
      return a->cur_base + at;
    }
  return tl_arena_alloc_slow (a, n, align);
}

tl_arena_mark
tl_arena_mark_get (const tl_arena *a)
{
  tl_arena_mark m = { 0, 0 };
  if (a == NULL)
    {
      tl_set_last_error ("tl_arena_mark_get: arena is NULL");
      return m;
    }
  m.block = a->cur;
  m.offset = a->off;
  return m;
}

void
tl_arena_reset_to (tl_arena *a, tl_arena_mark m)
{
  if (a == NULL)
    {
      tl_set_last_error ("tl_arena_reset_to: arena is NULL");
      return;
    }
  /* A mark in an earlier block must lie within what was used there,
     which is the difference of two used_before values.  */
  size_t reached;
  if (m.block < a->cur)
    reached = a->blocks[m.block + 1].used_before
              - a->blocks[m.block].used_before;
  else if (m.block == a->cur)
    reached = a->off;
  else
    reached = 0;
  if (m.block > a->cur || m.offset > reached)
    {
      tl_set_last_error ("tl_arena_reset_to: mark (%zu, %zu) is later than "
                         "the position (%zu, %zu); ignored",
                         m.block, m.offset, a->cur, a->off);
      return;
    }
  if (a->n_blocks != 0)
    tl_arena_set_cur (a, m.block);
  a->off = m.offset;
}

void
tl_arena_stats_get (const tl_arena *a, tl_arena_stats *out)
{
  if (out == NULL)
    {
      tl_set_last_error ("tl_arena_stats_get: out is NULL");
      return;
    }
  memset (out, 0, sizeof *out);
  if (a == NULL)
    {
      tl_set_last_error ("tl_arena_stats_get: arena is NULL");
      return;
    }
  out->bytes_used = tl_arena_used (a);
  out->bytes_reserved = a->reserved;
  out->high_water = a->high_water;
  out->n_blocks = a->n_blocks;
}

void
tl_arena_destroy (tl_arena *a)
{
  if (a == NULL)
    return;
  tl_allocator hooks = a->hooks;
  for (size_t i = 0; i < a->n_blocks; i++)
    hooks.free (hooks.ctx, a->blocks[i].base);
  if (a->blocks != NULL)
    hooks.free (hooks.ctx, a->blocks);
  hooks.free (hooks.ctx, a);
}
