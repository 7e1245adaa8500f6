/* thp-small.c -- KAME_POOL_HUGEPAGE=small (the default without
   configure --enable-hugepage): the chunks of a class that a
   thread fills densely (sixteen full chunks of it) go to 2 MiB groups
   advised MADV_HUGEPAGE and holding only small chunks; its first chunks
   do not, a dedicated chunk takes no unit of a group, a purge that
   gives back part of a group takes its advice away, a thread freeing a
   working set gives back the pages a group brought in past its chunks'
   carving, a steady cycle is steady, and in the kernel's "never" mode
   (a file bound over its switch in a mount namespace of the test's
   own) no group starts.  Seen through the "hg" and
   "nh" VmFlags of /proc/self/smaps, mincore, getrusage and the
   statistics.
   kptest-env: KAME_POOL_HUGEPAGE=small KAME_POOL_GUARD_SAMPLE=0 KAME_POOL_DECAY_MS=off
   kptest-options: -D_GNU_SOURCE

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <unistd.h>

#include "kame_pool.h"
#include "kptest.h"
#include "kptest-pool.h"
#include "smaps.h"

#define UNIT ((size_t) 256 << 10)
#define GROUP ((size_t) 2 << 20)
#define SIZE 1024               /* a class of one-unit chunks */
#define PER (UNIT / SIZE)       /* blocks a chunk holds */
#define DENSE 16        /* full chunks before a group (KP_HUGE_DENSE) */
#define INGROUP ((int) (GROUP / UNIT))  /* this class's chunks a group holds */
#define NCHUNK (DENSE + 2 * INGROUP + 1)
#define PAGE 4096

static char *blk[NCHUNK * PER];

/* Allocate and write the blocks of the first N chunks' worth, in
   order.  */
static bool
fill (int n)
{
  for (size_t i = 0; i < (size_t) n * PER; i++)
    {
      blk[i] = kame_pool_malloc (SIZE);
      if (blk[i] == NULL)
        return false;
      memset (blk[i], 0x5a, SIZE);
    }
  return true;
}

/* The first block of chunk I.  */
static char *
chunk (int i)
{
  return blk[(size_t) i * PER];
}

static uintptr_t
group_of (const void *p)
{
  return (uintptr_t) p & ~(uintptr_t) (GROUP - 1);
}

/* No THP in this kernel, or its "never" mode: no group starts (the
   last case).  */
#define NEED_THP(mode)                                                  \
  do {                                                                  \
    if (!kpc_thp_mode (mode, sizeof mode))                              \
      KT_UNSUPPORTED ("no transparent hugepages in this kernel");      \
    if (strcmp (mode, "never") == 0)                                    \
      KT_UNSUPPORTED ("transparent hugepages are [never]");            \
  } while (0)

KT_TEST (the_environment_sets_the_small_policy)
{
  KT_CHECK_EQ (kame_pool_get_thp_policy (), KAME_POOL_THP_SMALL);
  errno = EDOM;
  KT_CHECK_EQ (kame_pool_set_thp_policy (KAME_POOL_THP_SMALL), 0);
  KT_CHECK_EQ (errno, EDOM);
  KT_CHECK_EQ (kame_pool_get_thp_policy (), KAME_POOL_THP_SMALL);
}

/* The first DENSE chunks of the class lie in no advised mapping; the
   next INGROUP fill one 2 MiB group, advised, which a kernel in the
   "madvise" or "always" mode backs with a huge page.  */
KT_TEST (the_chunks_of_a_dense_class_fill_advised_groups)
{
  char mode[32];
  NEED_THP (mode);
  KT_CHECK (fill (DENSE + INGROUP));
  struct kpc_vma v;
  for (int i = 0; i < DENSE; i++)
    {
      KT_CHECK (kpc_vma_of (chunk (i), &v));
      if (kpc_has_flag (&v, "hg"))
        KT_FAILF ("chunk %d: VmFlags%s", i, v.flags);
    }
  for (int i = DENSE; i < DENSE + INGROUP; i++)
    {
      KT_CHECK_EQ (group_of (chunk (i)), group_of (chunk (DENSE)));
      KT_CHECK (kpc_vma_of (chunk (i), &v));
      if (!kpc_has_flag (&v, "hg") || kpc_has_flag (&v, "nh"))
        KT_FAILF ("chunk %d: VmFlags%s", i, v.flags);
    }
  /* The group is advised as a whole (the advice splits the region's
     mapping); the reads of smaps allocate a 1 KiB buffer, which may
     have started the next group, merged into the same mapping.  */
  KT_CHECK (v.start <= group_of (chunk (DENSE)));
  KT_CHECK (v.end >= group_of (chunk (DENSE)) + GROUP);
  KT_CHECK (v.anon_huge_kb >= GROUP / 1024);
}

/* With one chunk in a new group and its seven other units free and
   resident, a dedicated block of two units goes elsewhere, and the
   class's next chunk takes a unit of the group.  */
KT_TEST (a_dedicated_chunk_takes_no_unit_of_a_group)
{
  char mode[32];
  NEED_THP (mode);
  KT_CHECK (fill (DENSE + 1));
  char *d = kame_pool_malloc (2 * UNIT);
  KT_CHECK (d != NULL);
  memset (d, 1, 2 * UNIT);
  KT_CHECK (group_of (d) != group_of (chunk (DENSE)));
  KT_CHECK (group_of (d + 2 * UNIT - 1) != group_of (chunk (DENSE)));
  struct kpc_vma v;
  KT_CHECK (kpc_vma_of (d, &v));
  if (kpc_has_flag (&v, "hg"))
    KT_FAILF ("dedicated block: VmFlags%s", v.flags);
  char *more[PER];
  for (size_t i = 0; i < PER; i++)
    KT_CHECK ((more[i] = kame_pool_malloc (SIZE)) != NULL);
  KT_CHECK_EQ (group_of (more[0]), group_of (chunk (DENSE)));
  for (size_t i = 0; i < PER; i++)
    kame_pool_free (more[i]);
  kame_pool_free (d);
}

/* Freeing all but one block of the group's chunk and trimming gives
   back part of the group: its huge page is split, and the advice is
   taken away (MADV_NOHUGEPAGE), so that khugepaged does not collapse
   it again with the pages given back faulted in.  */
KT_TEST (a_purge_that_splits_a_group_takes_its_advice_away)
{
  char mode[32];
  NEED_THP (mode);
  KT_CHECK (fill (DENSE + 1));
  struct kpc_vma v;
  KT_CHECK (kpc_vma_of (chunk (DENSE), &v));
  KT_CHECK (kpc_has_flag (&v, "hg"));
  for (size_t i = 0; i < (DENSE + 1) * PER; i++)
    if (i != DENSE * PER)
      kame_pool_free (blk[i]);
  KT_CHECK (kame_pool_trim (0) > 0);
  KT_CHECK (kpc_vma_of (chunk (DENSE), &v));
  if (kpc_has_flag (&v, "hg") || !kpc_has_flag (&v, "nh"))
    KT_FAILF ("VmFlags%s", v.flags);
  KT_CHECK_EQ (v.anon_huge_kb, 0);
  /* The block that stayed still holds what was written.  */
  KT_CHECK_EQ (blk[DENSE * PER][SIZE - 1], 0x5a);
  kame_pool_free (blk[DENSE * PER]);
}

/* How many of the pages FROM..TO-1 of the unit of P are resident.  */
static int
resident (const char *p, size_t from, size_t to)
{
  char *unit = (char *) ((uintptr_t) p & ~(uintptr_t) (UNIT - 1));
  unsigned char vec[UNIT / PAGE];
  if (mincore (unit, UNIT, vec) != 0)
    return -1;
  int n = 0;
  for (size_t i = from; i < to; i++)
    n += vec[i] & 1;
  return n;
}

/* A thread that frees a working set (a free into more than 16 full
   chunks in a row, KP_SHED_STREAK) gives back the pages past the last
   block carved of its chunks that a huge page brought in: here those of
   the class's active chunk, the first of a new group, which carved a
   few pages of its 64 for its ten blocks.  */
KT_TEST (a_thread_freeing_its_working_set_gives_back_the_uncarved_pages)
{
  char mode[32];
  NEED_THP (mode);
  if (sysconf (_SC_PAGESIZE) != PAGE)
    KT_UNSUPPORTED ("pages of %ld bytes", sysconf (_SC_PAGESIZE));
  KT_CHECK (fill (NCHUNK - 1));
  char *last[10];
  for (int i = 0; i < 10; i++)
    {
      KT_CHECK ((last[i] = kame_pool_malloc (SIZE)) != NULL);
      memset (last[i], i, SIZE);
    }
  struct kpc_vma v;
  KT_CHECK (kpc_vma_of (last[0], &v));
  KT_CHECK (kpc_has_flag (&v, "hg"));
  if (resident (last[0], 16, UNIT / PAGE) != UNIT / PAGE - 16)
    KT_UNSUPPORTED ("the kernel gave the new group no huge page");
  for (int i = 0; i < NCHUNK - 1; i++)
    kame_pool_free (chunk (i));
  KT_CHECK_EQ (resident (last[0], 16, UNIT / PAGE), 0);
  for (int i = 0; i < 10; i++)
    KT_CHECK_EQ (last[i][SIZE - 1], i);
}

/* Round after round, allocate a working set of blocks of 64 to 4096
   bytes (16 MiB, so that its classes fill groups) and free it all:
   from the fourth round on, nothing is given back and no page is
   faulted in (where the process makes them all: with the pool in
   place of malloc).  The third may still give back a unit that a group
   brought in and no chunk took, which the release of a chunk past the
   dirty budget finds oldest (purge.c's steady cycle, under
   KAME_POOL_HUGEPAGE=small: one madvise call in its third round).  */
KT_TEST (a_steady_cycle_is_steady_from_its_fourth_round)
{
  static void *p[8192];
  kt_steady_cycle (p, 8192, 8, 3, kt_pool_interposes ());
}

/* Where the kernel backs no advised memory with huge pages, a group's
   free units would be counted resident for nothing: the library reads
   the kernel's mode once, at its first dense claim, and in the "never"
   mode no group starts.  The mode is faked for this process alone: a
   file bound over the switch in a mount namespace of its own (made
   private first, so that nothing reaches the system's), which root or
   an unprivileged user namespace allows; UNSUPPORTED where neither
   does.  */
KT_TEST (in_the_kernels_never_mode_no_group_starts)
{
  static const char path[] = "/sys/kernel/mm/transparent_hugepage/enabled";
  char fake[] = "/tmp/kptest-thp-XXXXXX";
  int fd = mkstemp (fake);
  KT_CHECK (fd >= 0);
  static const char never[] = "always madvise [never]\n";
  KT_CHECK_EQ (write (fd, never, sizeof never - 1),
               (ssize_t) sizeof never - 1);
  close (fd);
  if (access (path, F_OK) != 0)
    {
      unlink (fake);
      KT_UNSUPPORTED ("no %s", path);
    }
  if (unshare (CLONE_NEWNS) != 0
      && unshare (CLONE_NEWUSER | CLONE_NEWNS) != 0)
    {
      unlink (fake);
      KT_UNSUPPORTED ("no mount namespace of our own: %s", strerror (errno));
    }
  if (mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0
      || mount (fake, path, NULL, MS_BIND, NULL) != 0)
    {
      int e = errno;
      unlink (fake);
      KT_UNSUPPORTED ("cannot bind a file over the switch: %s", strerror (e));
    }
  unlink (fake);
  char mode[32];
  KT_CHECK (kpc_thp_mode (mode, sizeof mode));
  KT_CHECK_STR_EQ (mode, "never");
  KT_CHECK (fill (DENSE + 1));
  struct kpc_vma v;
  for (int i = 0; i <= DENSE; i++)
    {
      KT_CHECK (kpc_vma_of (chunk (i), &v));
      if (kpc_has_flag (&v, "hg"))
        KT_FAILF ("chunk %d: VmFlags%s", i, v.flags);
    }
  /* A group would have counted its seven other units free and resident
     (1792 KiB); nothing was released, so no unit is.  */
  kame_pool_stats_t st;
  memset (&st, 0, sizeof st);
  st.version = KAME_POOL_STATS_VERSION;
  kame_pool_get_stats (&st);
  KT_CHECK_EQ (st.dirty_bytes, 0);
}

KT_MAIN (KT_CASE (the_environment_sets_the_small_policy),
         KT_CASE (the_chunks_of_a_dense_class_fill_advised_groups),
         KT_CASE (a_dedicated_chunk_takes_no_unit_of_a_group),
         KT_CASE (a_purge_that_splits_a_group_takes_its_advice_away),
         KT_CASE (a_thread_freeing_its_working_set_gives_back_the_uncarved_pages),
         KT_CASE (a_steady_cycle_is_steady_from_its_fourth_round),
         KT_CASE (in_the_kernels_never_mode_no_group_starts))
