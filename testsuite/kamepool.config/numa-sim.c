/* numa-sim.c -- the per-node region lists, on two simulated nodes
   (KAME_POOL_TEST_NODES=2: CPU c is on node c % 2, nothing is bound):
   a thread on node 1 never takes a unit of a node-0 region while its
   own node can have units, and takes one only when the cap stops a new
   node-1 region.
   kptest-requires: numa
   kptest-env: KAME_POOL_TEST_NODES=2

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#define _GNU_SOURCE 1  /* getcpu, CPU_SET, RTLD_NOLOAD */

#include <stdint.h>
#include <string.h>

#include "kame_pool.h"
#include "kptest.h"
#include "numa.h"

#define REGION ((uintptr_t) 32 << 20)
#define ONE_UNIT 240000         /* a dedicated chunk of one unit */
#define NB 300                  /* node-1 blocks: more than two regions */

static uintptr_t
region_of (const void *p)
{
  return (uintptr_t) p & ~(REGION - 1);
}

static size_t
regions_on (unsigned node)
{
  size_t per[2];
  if (kame_pool_get_numa_stats (per, 2) != 2)
    return SIZE_MAX;
  return per[node];
}

static uintptr_t r0;            /* a node-0 region node 0 just mapped */
static void *b[NB];
static bool ok_a, ok_b, ok_c;

/* On node 0: allocate until node 0 maps a region, note it.  */
static void *
node0_first (void *arg)
{
  (void) arg;
  for (int i = 0; i < 127 * 8; i++)
    {
      size_t before = regions_on (0);
      void *p = kame_pool_malloc (ONE_UNIT);
      if (p == NULL)
        return NULL;
      if (regions_on (0) == before + 1)
        {
          r0 = region_of (p);
          ok_a = true;
          return NULL;
        }
    }
  return NULL;
}

/* On node 1: NB one-unit blocks, none of them in R0.  */
static void *
node1_fill (void *arg)
{
  (void) arg;
  ok_b = true;
  for (int i = 0; i < NB; i++)
    {
      b[i] = kame_pool_malloc (ONE_UNIT);
      if (b[i] == NULL || region_of (b[i]) == r0)
        ok_b = false;
    }
  return NULL;
}

/* On node 0 again: the 126 units left in R0 are all still there;
   take 100 of them.  */
static void *
node0_rest (void *arg)
{
  (void) arg;
  ok_c = true;
  for (int i = 0; i < 100; i++)
    {
      void *p = kame_pool_malloc (ONE_UNIT);
      if (p == NULL || region_of (p) != r0)
        ok_c = false;
    }
  return NULL;
}

static void *fallback;

/* On node 1 with the cap reached: fill node 1, then one more.  */
static void *
node1_capped (void *arg)
{
  (void) arg;
  for (int i = 0; i < 127 * 4; i++)
    {
      void *p = kame_pool_malloc (ONE_UNIT);
      if (p == NULL || kame_pool_malloc_usable_size (p) != 262144)
        return NULL;
      bool mine = false;
      for (int k = 0; k < NB; k++)
        mine |= region_of (b[k]) == region_of (p);
      if (!mine)
        {
          fallback = p;
          return NULL;
        }
    }
  return NULL;
}

KT_TEST (numa_sim_node1_never_takes_node0)
{
  if (!kpc_cpu_allowed (0) || !kpc_cpu_allowed (1))
    KT_UNSUPPORTED ("needs CPUs 0 and 1");
  KT_CHECK_EQ (kame_pool_get_numa_stats (NULL, 0), 2);
  KT_CHECK (kpc_run_on_cpu (0, node0_first, NULL));
  KT_CHECK (ok_a);
  size_t n0 = regions_on (0), n1 = regions_on (1);
  KT_CHECK (kpc_run_on_cpu (1, node1_fill, NULL));
  KT_CHECK (ok_b);
  /* 300 units need three node-1 regions; node 0 got none.  */
  KT_CHECK_EQ (regions_on (0), n0);
  KT_CHECK (regions_on (1) >= n1 + 2);
  KT_CHECK (kpc_run_on_cpu (0, node0_rest, NULL));
  KT_CHECK (ok_c);
  KT_CHECK_EQ (regions_on (0), n0);

  /* No new region allowed: node 1 now borrows from node 0, from R0,
     the first node-0 region with free units.  */
  size_t regions = kame_pool_reserved_bytes () / REGION;
  kame_pool_set_max_bytes (kame_pool_reserved_bytes ());
  KT_CHECK (kpc_run_on_cpu (1, node1_capped, NULL));
  KT_CHECK (fallback != NULL);
  KT_CHECK (region_of (fallback) == r0);
  KT_CHECK_EQ (kame_pool_reserved_bytes () / REGION, regions);
  KT_CHECK_EQ (regions_on (0) + regions_on (1), regions);
}

KT_MAIN (KT_CASE (numa_sim_node1_never_takes_node0))
