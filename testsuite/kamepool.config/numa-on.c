/* numa-on.c -- KAME_POOL_NUMA=on binds every fresh region to the node
   of the thread that maps it (MPOL_PREFERRED), even on one node.
   kptest-requires: numa
   kptest-env: KAME_POOL_NUMA=on
   kptest-options: -Wl,--no-as-needed -lnuma

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#define _GNU_SOURCE 1  /* getcpu, CPU_SET, RTLD_NOLOAD */

#include <numaif.h>
#include <string.h>

#include "kame_pool.h"
#include "kptest.h"
#include "numa.h"

struct job
{
  unsigned node;                /* getcpu's node in the thread */
  void *p[9];
};

static void *
alloc_job (void *arg)
{
  struct job *j = arg;
  unsigned cpu;
  if (getcpu (&cpu, &j->node) != 0)
    j->node = 999;
  /* Nine dedicated 4 MiB blocks: more than a region holds, so one is
     in a region this thread mapped itself.  */
  for (int i = 0; i < 9; i++)
    {
      j->p[i] = kame_pool_malloc ((size_t) 4 << 20);
      if (j->p[i] != NULL)
        memset (j->p[i], 1, 4096);
    }
  return NULL;
}

KT_TEST (numa_on_binds_to_thread_node)
{
  struct job j;
  memset (&j, 0, sizeof j);
  KT_CHECK (kpc_run_on_cpu (sched_getcpu (), alloc_job, &j));
  KT_CHECK (j.node < 64);
  for (int i = 0; i < 9; i++)
    {
      unsigned long mask[1024 / (8 * sizeof (unsigned long))];
      KT_CHECK (j.p[i] != NULL);
      int mode;
      /* The libnuma wrapper, as a user would call it.  */
      KT_CHECK_EQ (get_mempolicy (&mode, mask, sizeof mask * 8, j.p[i],
                                  MPOL_F_ADDR), 0);
      KT_CHECK_EQ (mode, MPOL_PREFERRED);
      KT_CHECK_EQ (mask[0], 1UL << j.node);
      KT_CHECK_EQ (kpc_policy_of (j.p[i], mask), MPOL_PREFERRED);
    }
  size_t per[16];
  size_t nodes = kame_pool_get_numa_stats (per, 16);
  KT_CHECK (nodes >= 1 && nodes <= 16);
  KT_CHECK (j.node < nodes);
  size_t sum = 0;
  for (size_t i = 0; i < nodes; i++)
    sum += per[i];
  KT_CHECK_EQ (sum, kame_pool_reserved_bytes () >> 25);
  KT_CHECK (per[j.node] >= 2);
}

KT_MAIN (KT_CASE (numa_on_binds_to_thread_node))
