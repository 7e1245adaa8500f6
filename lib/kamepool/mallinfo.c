/* mallinfo.c -- glibc's malloc extensions as the pool implements them:
   malloc_trim, mallinfo2, mallinfo, malloc_stats, malloc_info and
   mallopt.
   Built with interpose.c (not in a --disable-interpose build): a
   program that replaces malloc with the pool and asks glibc's calls
   about its heap must hear about the pool's, not about the C
   library's heap, which then holds next to nothing.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   Every figure comes from one snapshot of kame_pool_get_stats
   (the newest version) through kp_mallinfo_read, so that the four
   reports agree with each other and with the statistics; kamepool_mallinfo(3) gives
   the mapping field by field.  The pool has no arenas: it reports one,
   "heap 0", for its regions, and its mappings above 4 MiB as glibc's
   mmapped chunks.  Blocks that the C library served (see kamepool(7))
   are in none of the figures.  Like the rest of the family these
   definitions have no symbol version (see libkamepool.map).  */

#include <config.h>

#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>

#include "kp_internal.h"

#define KP_EXPORT __attribute__ ((__visibility__ ("default")))

#if !(defined __GLIBC_PREREQ && __GLIBC_PREREQ (2, 33))
/* glibc before 2.33 has no mallinfo2; its layout, for programs built
   against a newer one.  */
struct mallinfo2
{
  size_t arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks;
  size_t uordblks, fordblks, keepcost;
};
struct mallinfo2 mallinfo2 (void);
#endif

/* Take a snapshot of the statistics into *S and derive glibc's fields
   from it.  */
static struct mallinfo2
kp_mallinfo_read (kame_pool_stats_t *s)
{
  s->version = KAME_POOL_STATS_VERSION;
  kame_pool_get_stats (s);
  size_t free_blocks = 0;
  for (size_t i = 0; i < s->nclasses; i++)
    free_blocks += s->classes[i].free_blocks;
  struct mallinfo2 m = {
    /* The units of the live chunks, small and dedicated: the pool's
       counterpart of glibc's arena.  */
    .arena = s->units_live * KP_UNIT_SIZE,
    /* Free small blocks, the remote frees not collected included.  */
    .ordblks = free_blocks,
    .smblks = 0,                /* no fastbins */
    .hblks = s->large_alloc_count,
    .hblkhd = s->large_alloc_bytes,
    /* glibc's field of old, the most ever held (arena + hblkhd at
       their highest): the largest footprint.  */
    .usmblks = s->peak_resident_bytes,
    .fsmblks = 0,
    .uordblks = s->small_live_bytes + s->dedicated_chunk_bytes
                + s->large_alloc_bytes,
    .fordblks = s->small_free_bytes + s->cache_bytes + s->dirty_bytes,
    /* What kame_pool_trim (0) gives back whichever thread calls it,
       other threads' own cached blocks aside: the cache and the free
       resident units.  The free pages of the small chunks (in
       fordblks) go back only from their owner's trim, and only those
       that no live block touches.  */
    .keepcost = s->cache_bytes + s->dirty_bytes,
  };
  return m;
}

KP_EXPORT int
malloc_trim (size_t pad)
{
  return kame_pool_trim (pad);
}

KP_EXPORT struct mallinfo2
mallinfo2 (void)
{
  kame_pool_stats_t s;
  return kp_mallinfo_read (&s);
}

/* glibc's mallinfo truncates each field to int, so that a field above
   2 GiB comes out negative or small; ours stops at INT_MAX, which a
   caller can at least recognise.  */
static int
kp_saturate (size_t v)
{
  return v > (size_t) INT_MAX ? INT_MAX : (int) v;
}

KP_EXPORT struct mallinfo
mallinfo (void)
{
  struct mallinfo2 m2 = mallinfo2 ();
  struct mallinfo m = {
    .arena = kp_saturate (m2.arena),
    .ordblks = kp_saturate (m2.ordblks),
    .smblks = kp_saturate (m2.smblks),
    .hblks = kp_saturate (m2.hblks),
    .hblkhd = kp_saturate (m2.hblkhd),
    .usmblks = kp_saturate (m2.usmblks),
    .fsmblks = kp_saturate (m2.fsmblks),
    .uordblks = kp_saturate (m2.uordblks),
    .fordblks = kp_saturate (m2.fordblks),
    .keepcost = kp_saturate (m2.keepcost),
  };
  return m;
}

/* glibc's report on stderr, in its layout, for the one arena.  It must
   not allocate (a program may call it to find out why malloc fails):
   snprintf with these conversions does not, and write(2) does not.
   The pool keeps no peak of its mappings: the "max" lines say what is
   mapped now.  */
KP_EXPORT void
malloc_stats (void)
{
  kame_pool_stats_t s;
  struct mallinfo2 m = kp_mallinfo_read (&s);
  int saved = errno;
  char buf[512];
  snprintf (buf, sizeof buf,
            "Arena 0:\n"
            "system bytes     = %10zu\n"
            "in use bytes     = %10zu\n"
            "Total (incl. mmap):\n"
            "system bytes     = %10zu\n"
            "in use bytes     = %10zu\n"
            "max mmap regions = %10zu\n"
            "max mmap bytes   = %10zu\n",
            m.arena, m.uordblks - m.hblkhd, m.arena + m.hblkhd,
            m.uordblks, m.hblks, m.hblkhd);
  /* Whatever the program left in a buffered stderr comes first.  */
  fflush (stderr);
  kp_os_write_stderr (buf);
  errno = saved;
}

/* glibc's XML report, with one <size> element per size class that has
   chunks.  It may allocate: it writes to FP with fprintf, as glibc's
   does, after the snapshot.  */
KP_EXPORT int
malloc_info (int options, FILE *fp)
{
  if (options != 0 || fp == NULL)
    {
      errno = EINVAL;
      return -1;
    }
  kame_pool_stats_t s;
  struct mallinfo2 m = kp_mallinfo_read (&s);
  size_t free_bytes = 0;
  fputs ("<malloc version=\"1\">\n<heap nr=\"0\">\n<sizes>\n", fp);
  for (size_t i = 0; i < s.nclasses; i++)
    {
      const kame_pool_class_stats_t *k = &s.classes[i];
      size_t from = i == 0 ? 0 : s.classes[i - 1].block_size + 1;
      if (k->chunks == 0)
        continue;
      free_bytes += k->free_blocks * k->block_size;
      fprintf (fp, "  <size from=\"%zu\" to=\"%zu\" total=\"%zu\" "
               "count=\"%zu\" chunks=\"%zu\" live=\"%zu\" free=\"%zu\" "
               "resident=\"%zu\"/>\n",
               from, k->block_size, k->free_blocks * k->block_size,
               k->free_blocks, k->chunks, k->live_blocks, k->free_blocks,
               k->resident_bytes);
    }
  fprintf (fp, "</sizes>\n"
           "<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
           "<total type=\"rest\" count=\"%zu\" size=\"%zu\"/>\n"
           "<system type=\"current\" size=\"%zu\"/>\n"
           "<system type=\"max\" size=\"%zu\"/>\n"
           "<aspace type=\"total\" size=\"%zu\"/>\n"
           "<aspace type=\"mprotect\" size=\"%zu\"/>\n"
           "</heap>\n",
           m.ordblks, free_bytes, m.arena, m.usmblks, s.bytes_reserved,
           s.bytes_reserved);
  fprintf (fp, "<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
           "<total type=\"rest\" count=\"%zu\" size=\"%zu\"/>\n"
           "<total type=\"mmap\" count=\"%zu\" size=\"%zu\"/>\n"
           "<total type=\"cache\" size=\"%zu\"/>\n"
           "<total type=\"free-units\" count=\"%zu\" size=\"%zu\"/>\n"
           "<system type=\"current\" size=\"%zu\"/>\n"
           "<system type=\"max\" size=\"%zu\"/>\n"
           "<aspace type=\"total\" size=\"%zu\"/>\n"
           "<aspace type=\"mprotect\" size=\"%zu\"/>\n"
           "</malloc>\n",
           m.ordblks, free_bytes, m.hblks, m.hblkhd, s.cache_bytes,
           kp_dirty_units (), s.dirty_bytes, m.arena, m.usmblks,
           s.bytes_reserved, s.bytes_reserved);
  return 0;
}

/* mallopt: glibc's parameters mapped to the pool's settings where one
   fits, accepted without effect where the pool's design already does
   what the parameter is for, refused (0) where the pool cannot do what
   it asks; kamepool_mallopt(3) lists each.  *Why* not glibc's: its
   mallopt would tune a heap that holds next to nothing, and answer 1
   for changes that never happen.  */
KP_EXPORT int
mallopt (int param, int value)
{
  switch (param)
    {
    case M_TRIM_THRESHOLD:
      /* The free memory kept for reuse before it goes back: the large
         recycle cache's cap (which bounds the free units kept resident
         too).  */
      if (value < 0)
        return 0;
      kame_pool_set_large_cache_cap ((size_t) value);
      return 1;
    case M_CHECK_ACTION:
      /* Bit 2 (value 2) is glibc's abort; the pool always reports.  */
      kp_setting_set (&kp_misuse_abort, (value & 2) != 0);
      return 1;
    case M_PERTURB:
      /* The pool does not fill blocks: only "no perturbation" holds.  */
      return value == 0;
    case M_MMAP_MAX:
      /* The pool always maps blocks above 4 MiB on their own: it
         cannot do without mappings (0).  */
      return value > 0;
    case M_MMAP_THRESHOLD:
      /* Fixed at 4 MiB in the pool; glibc's range is accepted.  */
      return value >= 0 && value <= (32 << 20);
    case M_TOP_PAD:
      /* No heap top to pad: regions are reserved whole.  */
      return value >= 0;
    case M_ARENA_MAX:
    case M_ARENA_TEST:
      /* No arenas: each thread has its own heap.  */
      return value > 0;
    case M_MXFAST:
      /* No fastbins: every class has a thread cache.  glibc's range.  */
      return value >= 0 && value <= (int) (80 * sizeof (size_t) / 4);
    default:
      return 0;
    }
}
