/* policy.c -- the transparent-hugepage policy of the pool's regions:
   KAME_POOL_HUGEPAGE, kame_pool_set_thp_policy and
   kame_pool_get_thp_policy, and the madvise of a region's data.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   KAME_POOL_THP_SMALL advises no region: the small chunks' groups are
   advised one at a time as they start (region.c, kp_node_claim_huge).
   The advice of a region covers units 1..127, never unit 0: the
   metadata is touched a few pages at a time, and a 2 MiB page there
   would make every region cost 2 MiB of memory however little it
   serves.  Linux has no call that withdraws MADV_HUGEPAGE or
   MADV_NOHUGEPAGE from a range without unmapping it, so
   KAME_POOL_THP_SYSTEM only stops advising new regions; the others keep
   the advice they had.  */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kp_internal.h"

/* -1 until the environment has been read (lazily, so that a setter
   called before the first allocation is not overwritten by it).
   Stored seq_cst and paired with the fence in kp_region_new: either a
   setter's walk finds a new region, or the region's creator sees the
   new policy.  */
static _Atomic (int) kp_thp_policy = -1;

static bool
kp_thp_valid (int policy)
{
  return policy == KAME_POOL_THP_SYSTEM || policy == KAME_POOL_THP_ALWAYS
         || policy == KAME_POOL_THP_NEVER || policy == KAME_POOL_THP_SMALL;
}

int
kp_thp_policy_now (void)
{
  int p = atomic_load_explicit (&kp_thp_policy, memory_order_seq_cst);
  if (kp_likely (p >= 0))
    return p;
  int want = kp_option_thp ();
  /* A setter that got in first wins; P then holds its value.  */
  if (atomic_compare_exchange_strong_explicit (&kp_thp_policy, &p, want,
                                               memory_order_seq_cst,
                                               memory_order_seq_cst))
    return want;
  return p;
}

/* Advise the data units of R for POLICY (nothing for
   KAME_POOL_THP_SYSTEM and KAME_POOL_THP_SMALL).  A kernel without
   transparent huge pages refuses the advice, which changes nothing, so
   a refusal is ignored.  */
void
kp_thp_advise_region (kp_region_t *r, int policy)
{
#if HAVE_DECL_MADV_HUGEPAGE && HAVE_DECL_MADV_NOHUGEPAGE
  if (policy == KAME_POOL_THP_SYSTEM || policy == KAME_POOL_THP_SMALL)
    return;
  int saved = errno;
  madvise ((char *) r + KP_UNIT_SIZE, KP_REGION_SIZE - KP_UNIT_SIZE,
           policy == KAME_POOL_THP_ALWAYS ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  errno = saved;
#else
  (void) r;
  (void) policy;
#endif
}

/* Whether the kernel backs memory advised MADV_HUGEPAGE with huge
   pages: its mode in /sys/kernel/mm/transparent_hugepage/enabled is
   "always" or "madvise".  Read once, at the first dense claim of
   KAME_POOL_THP_SMALL, with open and read (no allocation: a claim may
   come from malloc); a file that cannot be read (no THP in the kernel,
   no /sys in a sandbox) counts as "never".  -1 until read; two threads
   that read it at once store the same answer (relaxed: it publishes
   nothing else).  *Why*: a group's free units count as resident from
   its start (kp_group_start), which only a huge page makes true; in
   the "never" mode they would be counted and kept for nothing.  */
static _Atomic (int) kp_thp_kernel = -1;

bool
kp_thp_kernel_madvise (void)
{
  int k = atomic_load_explicit (&kp_thp_kernel, memory_order_relaxed);
  if (kp_likely (k >= 0))
    return k != 0;
  int saved = errno;
  char buf[128];
  ssize_t n = -1;
  int fd = open ("/sys/kernel/mm/transparent_hugepage/enabled",
                 O_RDONLY | O_CLOEXEC);
  if (fd >= 0)
    {
      n = read (fd, buf, sizeof buf - 1);
      close (fd);
    }
  errno = saved;
  buf[n > 0 ? n : 0] = '\0';
  k = strstr (buf, "[always]") != NULL || strstr (buf, "[madvise]") != NULL;
  atomic_store_explicit (&kp_thp_kernel, k, memory_order_relaxed);
  return k != 0;
}

/* Make POLICY the policy of the regions created from now on; false
   when it is not a KAME_POOL_THP_* value.  The caller then advises the
   regions that exist (kame_pool_set_thp_policy, api.c).  */
bool
kp_thp_policy_set (int policy)
{
  if (!kp_thp_valid (policy))
    return false;
  atomic_store_explicit (&kp_thp_policy, policy, memory_order_seq_cst);
  atomic_thread_fence (memory_order_seq_cst);
  return true;
}
