/* numa-auto.c -- with KAME_POOL_NUMA unset (auto), regions are bound
   only when the machine has more than one node; without NUMA support
   the variable is ignored and there is one node.
   kptest-env: KAME_POOL_NUMA=

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#define _GNU_SOURCE 1  /* getcpu, CPU_SET, RTLD_NOLOAD */

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "kame_pool.h"
#include "kptest.h"
#include "numa.h"

/* Highest node in /sys/devices/system/node/online, plus one.  */
static size_t
online_nodes (void)
{
  FILE *f = fopen ("/sys/devices/system/node/online", "r");
  if (f == NULL)
    return 1;
  char buf[256];
  size_t max = 0;
  if (fgets (buf, sizeof buf, f) != NULL)
    for (char *s = buf; *s != '\0';)
      {
        char *end;
        unsigned long v = strtoul (s, &end, 10);
        if (end == s)
          s++;
        else
          {
            if (v > max)
              max = v;
            s = end;
          }
      }
  fclose (f);
  return max + 1;
}

KT_TEST (numa_auto_binds_only_multi_node)
{
  char *p = kame_pool_malloc ((size_t) 1 << 20);
  KT_CHECK (p != NULL);
  memset (p, 1, 4096);
  size_t nodes = kame_pool_get_numa_stats (NULL, 0);
#if KP_HAVE_NUMA
  size_t want = online_nodes ();
  KT_CHECK_EQ (nodes, want > 16 ? 16 : want);
#else
  (void) online_nodes;
  KT_CHECK_EQ (nodes, 1);
#endif
  unsigned long mask;
  int mode = kpc_policy_of (p, &mask);
  KT_CHECK_EQ (mode, nodes > 1 ? 1 /* MPOL_PREFERRED */ : 0);
  size_t one;
  KT_CHECK_EQ (kame_pool_get_numa_stats (&one, 1), nodes);
  if (nodes == 1)
    KT_CHECK_EQ (one, kame_pool_reserved_bytes () >> 25);
  kame_pool_free (p);
}

KT_MAIN (KT_CASE (numa_auto_binds_only_multi_node))
