/* thp.c -- kame_pool_set_thp_policy and kame_pool_get_thp_policy, seen
   through /proc/self/smaps: the "hg" and "nh" VmFlags of the mapping
   that holds a pool block, and its AnonHugePages.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "config.h"
#include "kame_pool.h"
#include "kptest.h"
#include "smaps.h"

#define REGION ((size_t) 32 << 20)
#define UNIT ((size_t) 256 << 10)
#define BIG ((size_t) 4 << 20)  /* a 16-unit dedicated chunk, 4 MiB-aligned */
#define NBIG 8                  /* more than one region holds (7) */

static void *big[NBIG];

/* Allocate and touch NBIG dedicated 4 MiB blocks: at least one lands in
   a region mapped after the current policy was set.  */
static bool
fill (void)
{
  for (int i = 0; i < NBIG; i++)
    {
      big[i] = kame_pool_malloc (BIG);
      if (big[i] == NULL || kame_pool_malloc_usable_size (big[i]) != BIG)
        return false;
      memset (big[i], 0x5a, BIG);
    }
  return true;
}

/* The process's AnonHugePages in KiB, from /proc/self/smaps_rollup, or
   -1 when it cannot be read.  */
static long
process_anon_huge_kb (void)
{
  FILE *f = fopen ("/proc/self/smaps_rollup", "r");
  if (f == NULL)
    return -1;
  char line[256];
  long kb = -1;
  while (fgets (line, sizeof line, f) != NULL)
    if (sscanf (line, "AnonHugePages: %ld kB", &kb) == 1)
      break;
  fclose (f);
  return kb;
}

/* The THP mode of the kernel, or UNSUPPORTED when it is "never".  */
#define NEED_THP(mode)                                                  \
  do {                                                                  \
    if (!kpc_thp_mode (mode, sizeof mode))                              \
      KT_UNSUPPORTED ("no transparent hugepages in this kernel");      \
    if (strcmp (mode, "never") == 0)                                    \
      KT_UNSUPPORTED ("transparent hugepages are [never]");            \
  } while (0)

KT_TEST (thp_default_from_configure)
{
  KT_CHECK_EQ (kame_pool_get_thp_policy (),
               KP_HUGEPAGE_DEFAULT ? KAME_POOL_THP_ALWAYS : KAME_POOL_THP_SMALL);
}

KT_TEST (thp_bad_policy_einval_errno_untouched)
{
  int before = kame_pool_get_thp_policy ();
  errno = EDOM;
  KT_CHECK_EQ (kame_pool_set_thp_policy (4), EINVAL);
  KT_CHECK_EQ (kame_pool_set_thp_policy (-1), EINVAL);
  KT_CHECK_EQ (errno, EDOM);
  KT_CHECK_EQ (kame_pool_get_thp_policy (), before);
}

KT_TEST (thp_always_hg_and_hugepages)
{
  char mode[32];
  NEED_THP (mode);
  kame_pool_set_thp_policy (KAME_POOL_THP_ALWAYS);
  KT_CHECK_EQ (kame_pool_get_thp_policy (), KAME_POOL_THP_ALWAYS);
  KT_CHECK (fill ());
  unsigned long huge = 0;
  for (int i = 0; i < NBIG; i++)
    {
      struct kpc_vma v;
      KT_CHECK (kpc_vma_of (big[i], &v));
      if (!kpc_has_flag (&v, "hg") || kpc_has_flag (&v, "nh"))
        KT_FAILF ("block %d: VmFlags%s", i, v.flags);
      huge += v.anon_huge_kb;
    }
  /* Each block is two whole, aligned 2 MiB pages just touched: the
     kernel in "madvise" or "always" mode backs at least one of them
     with a huge page (the VMAs may overlap, so this is a lower bound
     on what they hold, not a sum).  */
  KT_CHECK (huge >= 2048);
}

KT_TEST (thp_metadata_never_advised)
{
  kame_pool_set_thp_policy (KAME_POOL_THP_ALWAYS);
  void *p = kame_pool_malloc (64);
  KT_CHECK (p != NULL);
  struct kpc_vma v;
  void *meta = (void *) ((uintptr_t) p & ~(uintptr_t) (REGION - 1));
  KT_CHECK (kpc_vma_of (meta, &v));
  if (kpc_has_flag (&v, "hg") || kpc_has_flag (&v, "nh"))
    KT_FAILF ("metadata unit VmFlags%s", v.flags);
  KT_CHECK (kpc_vma_of ((char *) meta + UNIT, &v));
  KT_CHECK (kpc_has_flag (&v, "hg"));
  kame_pool_free (p);
}

KT_TEST (thp_never_nh_no_hugepages)
{
  char mode[32];
  NEED_THP (mode);
  kame_pool_set_thp_policy (KAME_POOL_THP_NEVER);
  KT_CHECK_EQ (kame_pool_get_thp_policy (), KAME_POOL_THP_NEVER);
  /* Huge pages made before the call stay (the kernel does not split
     them on MADV_NOHUGEPAGE), and the re-advised region's mapping may
     merge with the new ones: so what is checked is that the new blocks
     add no huge page to the process.  The count may go down: this
     process is a fork of the test driver, and a huge page it shares
     with its parent is split when a new block that overlaps it (a
     dedicated chunk takes the first free run) is written.  */
  long before = process_anon_huge_kb ();
  KT_CHECK (before >= 0);
  KT_CHECK (fill ());
  for (int i = 0; i < NBIG; i++)
    {
      struct kpc_vma v;
      KT_CHECK (kpc_vma_of (big[i], &v));
      if (kpc_has_flag (&v, "hg") || !kpc_has_flag (&v, "nh"))
        KT_FAILF ("block %d: VmFlags%s", i, v.flags);
    }
  long after = process_anon_huge_kb ();
  if (after > before)
    KT_FAILF ("AnonHugePages went from %ld to %ld kB", before, after);
}

/* KAME_POOL_THP_SYSTEM gives new regions no advice: in the kernel's
   "madvise" mode they get no huge page.  */
KT_TEST (thp_system_no_advice)
{
  char mode[32];
  NEED_THP (mode);
  kame_pool_set_thp_policy (KAME_POOL_THP_SYSTEM);
  KT_CHECK (fill ());
  /* The last block is in a region mapped after the call.  */
  struct kpc_vma v;
  KT_CHECK (kpc_vma_of (big[NBIG - 1], &v));
  if (kpc_has_flag (&v, "hg") || kpc_has_flag (&v, "nh"))
    KT_FAILF ("VmFlags%s", v.flags);
  if (strcmp (mode, "madvise") == 0)
    KT_CHECK_EQ (v.anon_huge_kb, 0);
}

/* Every block's data unit has flag FLAG and not flag NOT in its
   VmFlags; the first block that does not, or -1.  */
static int
blocks_flagged (const char *flag, const char *not)
{
  for (int i = 0; i < NBIG; i++)
    {
      struct kpc_vma v;
      if (!kpc_vma_of (big[i], &v) || !kpc_has_flag (&v, flag)
          || kpc_has_flag (&v, not))
        return i;
    }
  return -1;
}

/* Setting a policy re-advises the data of every region mapped so far:
   the blocks of all the regions that FILL spread over (at least two)
   carry the new advice.  */
KT_TEST (thp_set_readvises_existing)
{
  KT_CHECK_EQ (kame_pool_set_thp_policy (KAME_POOL_THP_SYSTEM), 0);
  KT_CHECK (fill ());
  KT_CHECK (kame_pool_reserved_bytes () / REGION >= 2);
  KT_CHECK_EQ (kame_pool_set_thp_policy (KAME_POOL_THP_ALWAYS), 0);
  KT_CHECK_EQ (blocks_flagged ("hg", "nh"), -1);
  KT_CHECK_EQ (kame_pool_set_thp_policy (KAME_POOL_THP_NEVER), 0);
  KT_CHECK_EQ (blocks_flagged ("nh", "hg"), -1);
  /* No call withdraws advice: SYSTEM leaves existing regions alone.  */
  KT_CHECK_EQ (kame_pool_set_thp_policy (KAME_POOL_THP_SYSTEM), 0);
  KT_CHECK_EQ (blocks_flagged ("nh", "hg"), -1);
  KT_CHECK_EQ (kame_pool_get_thp_policy (), KAME_POOL_THP_SYSTEM);
}

KT_MAIN (KT_CASE (thp_default_from_configure),
         KT_CASE (thp_bad_policy_einval_errno_untouched),
         KT_CASE (thp_always_hg_and_hugepages),
         KT_CASE (thp_metadata_never_advised),
         KT_CASE (thp_never_nh_no_hugepages),
         KT_CASE (thp_system_no_advice),
         KT_CASE (thp_set_readvises_existing))
