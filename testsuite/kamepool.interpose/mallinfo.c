/* mallinfo.c -- kamepool.interpose tests of glibc's malloc extensions
   as the pool implements them, in a program linked with -lkamepool:
   malloc_trim gives back the pool's free memory, mallinfo2 and mallinfo
   count the pool's blocks exactly, malloc_stats and malloc_info report
   in glibc's layout.  (programs.c checks that a program built against
   glibc, with the pool preloaded, reaches them through its versioned
   references.)  The decay is off, so that nothing but
   the calls under test changes the figures.
   Guarded sampling is off: these tests assert where the pool places
   blocks and what it counts, and a guarded block is not the pool's.
   kptest-env: KAME_POOL_DECAY_MS=off KAME_POOL_GUARD_SAMPLE=0

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

/* kptest-requires: interpose */
/* kptest-options: -fno-builtin -Wno-deprecated-declarations */

#define _GNU_SOURCE 1

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "kame_pool.h"
#include "kptest.h"
#include "kptest-pool.h"

#define UNIT ((size_t) 256 << 10)

static char msg[512];

/* ---- malloc_trim ------------------------------------------------------ */

#define NBLK 200000
#define SIZE ((size_t) 200)

static char *blk[NBLK];
static unsigned char vec[NBLK];

/* Resident pages of the range [LO, HI), page-aligned.  */
static size_t
resident (uintptr_t lo, uintptr_t hi)
{
  size_t n = 0;
  for (uintptr_t p = lo; p < hi; p += 256 * KT_PAGE)
    {
      size_t len = hi - p < 256 * KT_PAGE ? hi - p : 256 * KT_PAGE;
      if (mincore ((void *) p, len, vec) != 0)
        return SIZE_MAX;
      for (size_t i = 0; i < len / KT_PAGE; i++)
        n += vec[i] & 1;
    }
  return n;
}

/* Resident pages of the blocks' chunks: BLK is in address order within
   each chunk, and the chunks of one size class do not overlap other
   data, so the pages from each run's first block to its last are
   exactly the blocks' pages.  */
static size_t
blocks_resident (void)
{
  size_t n = 0;
  uintptr_t lo = (uintptr_t) blk[0] & ~(KT_PAGE - 1), hi = 0;
  for (size_t i = 0; i < NBLK; i++)
    {
      uintptr_t b = (uintptr_t) blk[i];
      if (i > 0 && b != (uintptr_t) blk[i - 1] + 208)
        {
          n += resident (lo, hi);
          lo = b & ~(KT_PAGE - 1);
        }
      hi = (b + SIZE + KT_PAGE - 1) & ~(KT_PAGE - 1);
    }
  return n + resident (lo, hi);
}

static void *
trim_thread (void *arg)
{
  (void) arg;
  for (size_t i = 0; i < NBLK; i++)
    {
      blk[i] = malloc (SIZE);
      if (blk[i] == NULL)
        return "malloc failed";
      memset (blk[i], 0x5a, SIZE);
    }
  size_t live = blocks_resident ();
  struct mallinfo2 m = mallinfo2 ();
  for (size_t i = 0; i < NBLK; i++)
    free (blk[i]);
  size_t freed = blocks_resident ();
  struct mallinfo2 mf = mallinfo2 ();
  int r1 = malloc_trim (0);
  size_t trimmed = blocks_resident ();
  struct mallinfo2 mt = mallinfo2 ();
  int r2 = malloc_trim (0);
  printf ("200000 x 200 B: resident %zu KiB live, %zu KiB freed, %zu KiB "
          "trimmed; mallinfo2 live: arena %zu uordblks %zu fordblks %zu "
          "keepcost %zu; freed: fordblks %zu keepcost %zu; trimmed: "
          "fordblks %zu keepcost %zu\n", live * 4, freed * 4, trimmed * 4,
          m.arena, m.uordblks, m.fordblks, m.keepcost, mf.fordblks,
          mf.keepcost, mt.fordblks, mt.keepcost);
  if (r1 != 1 || r2 != 0)
    {
      snprintf (msg, sizeof msg, "malloc_trim returned %d, then %d", r1, r2);
      return msg;
    }
  if (live == SIZE_MAX || freed == SIZE_MAX || trimmed == SIZE_MAX)
    return "mincore failed";
  /* All that stays is the page that the bump pointer of the class's
     active chunk ends in.  */
  if (trimmed > 1 || freed <= trimmed || mt.keepcost != 0)
    {
      snprintf (msg, sizeof msg, "resident pages: %zu freed, %zu trimmed; "
                "keepcost %zu", freed, trimmed, mt.keepcost);
      return msg;
    }
  return NULL;
}

KT_TEST (malloc_trim_gives_back_the_pages_of_the_freed_blocks)
{
  /* A block this thread freed may wait in its own first level of the
     large cache, which only this thread's trim gives back.  */
  malloc_trim (0);
  kt_in_a_thread (trim_thread);
}

/* ---- mallinfo2 -------------------------------------------------------- */

/* The field mapping, against a statistics snapshot taken with nothing
   allocated in between.  */
static bool
maps_the_stats (const struct mallinfo2 *m, const kame_pool_stats_t *s)
{
  size_t free_blocks = 0;
  for (size_t i = 0; i < s->nclasses; i++)
    free_blocks += s->classes[i].free_blocks;
  if (m->arena == s->units_live * UNIT && m->ordblks == free_blocks
      && m->smblks == 0 && m->hblks == s->large_alloc_count
      && m->hblkhd == s->large_alloc_bytes
      && m->usmblks == s->peak_resident_bytes
      && m->fsmblks == 0
      && m->uordblks == s->small_live_bytes + s->dedicated_chunk_bytes
                        + s->large_alloc_bytes
      && m->fordblks == s->small_free_bytes + s->cache_bytes + s->dirty_bytes
      && m->keepcost == s->cache_bytes + s->dirty_bytes)
    return true;
  printf ("mallinfo2 does not map the statistics: arena %zu ordblks %zu "
          "hblks %zu hblkhd %zu uordblks %zu fordblks %zu keepcost %zu\n",
          m->arena, m->ordblks, m->hblks, m->hblkhd, m->uordblks,
          m->fordblks, m->keepcost);
  return false;
}

#define N3584 1000

static void *
counting_thread (void *arg)
{
  (void) arg;
  static char *p[N3584];
  /* This thread's heap, and the active chunk of the class (73 blocks
     of 3584 bytes in one unit), empty.  */
  free (malloc (3584));
  struct mallinfo2 m0 = mallinfo2 ();
  for (size_t i = 0; i < N3584; i++)
    if ((p[i] = malloc (3584)) == NULL)
      return "malloc failed";
  struct mallinfo2 m1 = mallinfo2 ();
  kame_pool_stats_t s1 = kt_pool_stats ();
  if (!maps_the_stats (&m1, &s1))
    return "the fields do not map the statistics";
  /* 73 blocks in the chunk it had, 927 in 13 new chunks.  */
  if (m1.uordblks - m0.uordblks != (size_t) N3584 * 3584
      || m1.arena - m0.arena != 13 * UNIT
      || m1.hblks != m0.hblks || m1.hblkhd != m0.hblkhd)
    {
      snprintf (msg, sizeof msg, "1000 blocks of 3584 bytes: uordblks "
                "+%zu, arena +%zu, hblks +%zu, hblkhd +%zu",
                m1.uordblks - m0.uordblks, m1.arena - m0.arena,
                m1.hblks - m0.hblks, m1.hblkhd - m0.hblkhd);
      return msg;
    }

  /* One mapping: 8 MiB and the header page.  */
  size_t map = ((size_t) 8 << 20) + KT_PAGE;
  char *big = malloc ((size_t) 8 << 20);
  if (big == NULL)
    return "malloc (8 MiB) failed";
  struct mallinfo2 m2 = mallinfo2 ();
  if (m2.hblks != m1.hblks + 1 || m2.hblkhd != m1.hblkhd + map
      || m2.uordblks != m1.uordblks + map || m2.arena != m1.arena)
    {
      snprintf (msg, sizeof msg, "8 MiB: hblks +%zu, hblkhd +%zu, uordblks "
                "+%zu, arena +%zu", m2.hblks - m1.hblks,
                m2.hblkhd - m1.hblkhd, m2.uordblks - m1.uordblks,
                m2.arena - m1.arena);
      return msg;
    }
  /* Freed, it goes to the thread's cache: free, and what a trim gives
     back.  */
  free (big);
  struct mallinfo2 m3 = mallinfo2 ();
  if (m3.hblks != m1.hblks || m3.hblkhd != m1.hblkhd
      || m3.uordblks != m1.uordblks || m3.fordblks != m1.fordblks + map
      || m3.keepcost != m1.keepcost + map)
    return "the freed mapping is not counted as cached";
  if (malloc_trim (0) != 1)
    return "malloc_trim found nothing to give back";
  struct mallinfo2 m4 = mallinfo2 ();
  kame_pool_stats_t s4 = kt_pool_stats ();
  if (m4.keepcost != 0 || !maps_the_stats (&m4, &s4))
    return "keepcost is not 0 after malloc_trim";

  for (size_t i = 0; i < N3584; i++)
    free (p[i]);
  struct mallinfo2 m5 = mallinfo2 ();
  if (m5.uordblks != m0.uordblks)
    return "uordblks did not come back down";
  return NULL;
}

KT_TEST (mallinfo2_counts_known_allocations_exactly)
{
  malloc_trim (0);              /* see above */
  kt_in_a_thread (counting_thread);
}

KT_TEST (mallinfo_saturates_at_int_max)
{
  /* A huge mapping of 3 GiB, never touched.  */
  char *p = malloc ((size_t) 3 << 30);
  if (p == NULL)
    KT_UNSUPPORTED ("no 3 GiB of address space");
  struct mallinfo2 m2 = mallinfo2 ();
  struct mallinfo m = mallinfo ();
  free (p);
  KT_CHECK (m2.hblkhd > (size_t) 3 << 30);
  KT_CHECK (m2.uordblks > (size_t) 3 << 30);
  KT_CHECK_EQ (m.hblkhd, INT_MAX);
  KT_CHECK_EQ (m.uordblks, INT_MAX);
  /* The others fit and are copied.  */
  KT_CHECK (m2.arena < INT_MAX && m2.fordblks < INT_MAX);
  KT_CHECK_EQ (m.arena, m2.arena);
  KT_CHECK_EQ (m.ordblks, m2.ordblks);
  KT_CHECK_EQ (m.hblks, m2.hblks);
  KT_CHECK_EQ (m.fordblks, m2.fordblks);
  KT_CHECK_EQ (m.keepcost, m2.keepcost);
  KT_CHECK_EQ (m.smblks, 0);
  /* The footprint's peak holds the mapping too.  */
  KT_CHECK (m2.usmblks > (size_t) 3 << 30);
  KT_CHECK_EQ (m.usmblks, INT_MAX);
  KT_CHECK_EQ (m.fsmblks, 0);
}

/* ---- malloc_stats and malloc_info -------------------------------------- */

/* Read the whole of FD from its start into BUF (SIZE bytes, NUL-ended).  */
static bool
read_back (int fd, char *buf, size_t size)
{
  if (lseek (fd, 0, SEEK_SET) != 0)
    return false;
  size_t n = 0;
  ssize_t r;
  while (n + 1 < size && (r = read (fd, buf + n, size - 1 - n)) > 0)
    n += (size_t) r;
  buf[n] = '\0';
  return n + 1 < size;
}

KT_TEST (malloc_stats_writes_glibcs_layout_without_allocating)
{
  char *big = malloc ((size_t) 6 << 20);
  KT_CHECK (big != NULL);
  char path[] = "/tmp/kptest-malloc-stats-XXXXXX";
  int fd = mkstemp (path);
  KT_CHECK (fd >= 0);
  unlink (path);
  int saved = dup (2);
  KT_CHECK (saved >= 0);
  /* Nothing allocates from here to the report.  */
  struct mallinfo2 m = mallinfo2 ();
  kame_pool_stats_t s0 = kt_pool_stats ();
  dup2 (fd, 2);
  malloc_stats ();
  dup2 (saved, 2);
  kame_pool_stats_t s1 = kt_pool_stats ();
  close (saved);
  static char out[4096];
  KT_CHECK (read_back (fd, out, sizeof out));
  close (fd);
  free (big);
  /* It allocated nothing: the same live blocks, chunks and mappings.  */
  KT_CHECK_EQ (s1.small_live_bytes, s0.small_live_bytes);
  KT_CHECK_EQ (s1.chunks_live, s0.chunks_live);
  KT_CHECK_EQ (s1.large_alloc_count, s0.large_alloc_count);
  char want[1024];
  snprintf (want, sizeof want,
            "Arena 0:\n"
            "system bytes     = %10zu\n"
            "in use bytes     = %10zu\n"
            "Total (incl. mmap):\n"
            "system bytes     = %10zu\n"
            "in use bytes     = %10zu\n"
            "max mmap regions = %10zu\n"
            "max mmap bytes   = %10zu\n",
            m.arena, m.uordblks - m.hblkhd, m.arena + m.hblkhd, m.uordblks,
            m.hblks, m.hblkhd);
  KT_CHECK_STR_EQ (out, want);
  KT_CHECK (m.hblks >= 1 && m.hblkhd > (size_t) 6 << 20);
}

/* The value of attribute NAME in LINE, or SIZE_MAX.  */
static size_t
attr (const char *line, const char *name)
{
  char key[64];
  snprintf (key, sizeof key, " %s=\"", name);
  const char *p = strstr (line, key);
  if (p == NULL)
    return SIZE_MAX;
  return (size_t) strtoull (p + strlen (key), NULL, 10);
}

KT_TEST (malloc_info_writes_one_size_element_per_class_with_chunks)
{
  char *big = malloc ((size_t) 6 << 20);
  KT_CHECK (big != NULL);
  errno = 0;
  KT_CHECK_EQ (malloc_info (1, stdout), -1);
  KT_CHECK_EQ (errno, EINVAL);
  FILE *fp = tmpfile ();
  KT_CHECK (fp != NULL);
  /* A buffer of its own, so that the report's writes allocate none.  */
  static char fbuf[1 << 16];
  KT_CHECK_EQ (setvbuf (fp, fbuf, _IOFBF, sizeof fbuf), 0);
  kame_pool_stats_t s = kt_pool_stats ();
  struct mallinfo2 m = mallinfo2 ();
  KT_CHECK_EQ (malloc_info (0, fp), 0);
  KT_CHECK_EQ (fflush (fp), 0);
  static char out[1 << 16];
  KT_CHECK (read_back (fileno (fp), out, sizeof out));
  fclose (fp);
  free (big);

  KT_CHECK (strncmp (out, "<malloc version=\"1\">\n<heap nr=\"0\">\n<sizes>\n",
                     42) == 0);
  size_t len = strlen (out);
  KT_CHECK (len > 10 && strcmp (out + len - 10, "</malloc>\n") == 0);
  size_t classes = 0, row = 0, sizes = 0, count = 0, total = 0;
  for (size_t i = 0; i < s.nclasses; i++)
    classes += s.classes[i].chunks != 0;
  int open = 0;
  bool heap_done = false;
  size_t rest_seen = 0;
  for (char *line = strtok (out, "\n"); line != NULL;
       line = strtok (NULL, "\n"))
    {
      /* Every element is one line: an opening or closing tag of
         malloc, heap and sizes, or an empty element.  */
      size_t l = strlen (line);
      if (strstr (line, "<size ") != NULL)
        {
          while (row < s.nclasses && s.classes[row].chunks == 0)
            row++;
          KT_CHECK (row < s.nclasses);
          const kame_pool_class_stats_t *k = &s.classes[row];
          KT_CHECK_EQ (attr (line, "from"),
                       row == 0 ? 0 : s.classes[row - 1].block_size + 1);
          KT_CHECK_EQ (attr (line, "to"), k->block_size);
          KT_CHECK_EQ (attr (line, "count"), k->free_blocks);
          KT_CHECK_EQ (attr (line, "total"), k->free_blocks * k->block_size);
          KT_CHECK_EQ (attr (line, "chunks"), k->chunks);
          KT_CHECK_EQ (attr (line, "live"), k->live_blocks);
          KT_CHECK_EQ (attr (line, "free"), k->free_blocks);
          KT_CHECK_EQ (attr (line, "resident"), k->resident_bytes);
          count += attr (line, "count");
          total += attr (line, "total");
          sizes++;
          row++;
        }
      else if (strstr (line, "<total type=\"rest\"") != NULL)
        {
          KT_CHECK_EQ (attr (line, "count"), m.ordblks);
          KT_CHECK_EQ (attr (line, "size"), total);
          rest_seen++;
        }
      else if (strstr (line, "<total type=\"mmap\"") != NULL)
        {
          KT_CHECK (heap_done);
          KT_CHECK_EQ (attr (line, "count"), m.hblks);
          KT_CHECK_EQ (attr (line, "size"), m.hblkhd);
        }
      else if (strstr (line, "<total type=\"cache\"") != NULL)
        KT_CHECK_EQ (attr (line, "size"), s.cache_bytes);
      else if (strstr (line, "<total type=\"free-units\"") != NULL)
        KT_CHECK_EQ (attr (line, "size"), s.dirty_bytes);
      else if (strstr (line, "<system type=\"current\"") != NULL)
        KT_CHECK_EQ (attr (line, "size"), m.arena);
      else if (strstr (line, "<system type=\"max\"") != NULL)
        KT_CHECK_EQ (attr (line, "size"), m.usmblks);
      else if (strstr (line, "<aspace type=\"total\"") != NULL)
        KT_CHECK_EQ (attr (line, "size"), s.bytes_reserved);
      else if (strcmp (line, "</heap>") == 0)
        heap_done = true;
      if (line[0] != '<' && strncmp (line, "  <size ", 8) != 0)
        KT_FAILF ("not an element: %s", line);
      if (line[l - 1] != '>')
        KT_FAILF ("not one element per line: %s", line);
      if (line[1] == '/')
        open--;
      else if (line[l - 2] != '/')
        open++;
      KT_CHECK (open >= 0);
    }
  KT_CHECK_EQ (open, 0);
  KT_CHECK_EQ (sizes, classes);
  KT_CHECK_EQ (count, m.ordblks);
  KT_CHECK_EQ (rest_seen, 2);
}

KT_MAIN (KT_CASE (malloc_trim_gives_back_the_pages_of_the_freed_blocks),
         KT_CASE (mallinfo2_counts_known_allocations_exactly),
         KT_CASE (mallinfo_saturates_at_int_max),
         KT_CASE (malloc_stats_writes_glibcs_layout_without_allocating),
         KT_CASE (malloc_info_writes_one_size_element_per_class_with_chunks))
