/* numa.c -- NUMA placement: the node count, the calling thread's node,
   the binding of fresh regions (KAME_POOL_NUMA), and
   kame_pool_get_numa_stats.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   Nothing here may call malloc: it runs inside the claim of a unit run,
   which malloc itself reaches.  So the node count comes from a raw
   open/read of /sys/devices/system/node/online (opendir would allocate
   and recurse), the thread's node from getcpu(2), and the binding from
   libnuma's mbind, a bare system-call wrapper.  Built without libnuma
   (configure --disable-numa, or no libnuma found) there is one list,
   no binding, and the environment is ignored.

   KAME_POOL_TEST_NODES=N (2..16), NUMA builds only, is a testing aid:
   it pretends the machine has N nodes, CPU c being on node c % N, so
   that the per-node lists can be tested on any machine with two CPUs.
   Simulated nodes are never bound (they need not exist).  */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#if KP_HAVE_NUMA
# include <numaif.h>
#endif

#include "kp_internal.h"

/* The resolved configuration, packed so that one atomic publishes it:
   bits 0..7 the node count (lists in use), bit 8 "bind regions",
   bit 9 "simulated nodes".  -1 until resolved; every resolver computes
   the same value, so a race only repeats the work.  */
static _Atomic (int) kp_numa_conf = -1;
#define KP_NUMA_BIND 0x100
#define KP_NUMA_SIM 0x200

#if KP_HAVE_NUMA
/* The highest node number in /sys/devices/system/node/online ("0",
   "0-3", "0,2-5"), plus one; 1 when the file cannot be read.  */
static unsigned
kp_numa_online_count (void)
{
  char buf[256];
  int saved = errno;
  int fd = open ("/sys/devices/system/node/online", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    {
      errno = saved;
      return 1;
    }
  ssize_t len = read (fd, buf, sizeof buf - 1);
  close (fd);
  errno = saved;
  if (len <= 0)
    return 1;
  buf[len] = '\0';
  unsigned max = 0, v = 0;
  bool digits = false;
  for (const char *s = buf; ; s++)
    if (*s >= '0' && *s <= '9')
      {
        v = v * 10 + (unsigned) (*s - '0');
        digits = true;
        if (v > 4096)
          v = 4096;
      }
    else
      {
        if (digits && v > max)
          max = v;
        v = 0;
        digits = false;
        if (*s == '\0')
          break;
      }
  return max + 1;
}

static int
kp_numa_resolve (void)
{
  unsigned sim = kp_option_test_nodes (KP_MAX_NODES);
  if (sim != 0)
    return (int) sim | KP_NUMA_SIM;
  int mode = kp_option_numa_mode ();
  if (mode < 0)
    return 1;
  unsigned nodes = kp_numa_online_count ();
  if (nodes > KP_MAX_NODES)
    nodes = KP_MAX_NODES;
  return (int) nodes | (mode > 0 || nodes > 1 ? KP_NUMA_BIND : 0);
}
#else
static int
kp_numa_resolve (void)
{
  return 1;
}
#endif

static int
kp_numa_config (void)
{
  int conf = atomic_load_explicit (&kp_numa_conf, memory_order_relaxed);
  if (kp_likely (conf >= 0))
    return conf;
  conf = kp_numa_resolve ();
  atomic_store_explicit (&kp_numa_conf, conf, memory_order_relaxed);
  return conf;
}

unsigned
kp_numa_nodes (void)
{
  return (unsigned) kp_numa_config () & 0xff;
}

/* The node, plus one (0: not looked up yet), and the claims since.  */
static __thread unsigned kp_numa_tnode KP_TLS_ATTR;
static __thread unsigned kp_numa_tclaims KP_TLS_ATTR;

unsigned
kp_numa_thread_node (void)
{
  int conf = kp_numa_config ();
  unsigned nodes = (unsigned) conf & 0xff;
  if (nodes <= 1)
    return 0;
  if (kp_numa_tnode != 0 && ++kp_numa_tclaims % KP_NUMA_RECHECK != 0)
    return kp_numa_tnode - 1;
  unsigned cpu = 0, node = 0;
  int saved = errno;
  if (getcpu (&cpu, &node) != 0)
    cpu = node = 0;
  errno = saved;
  if (conf & KP_NUMA_SIM)
    node = cpu % nodes;
  else if (node >= nodes)
    node %= nodes;
  kp_numa_tnode = node + 1;
  return node;
}

/* Prefer NODE for the pages of [P, P + LEN), when binding is on.
   MPOL_PREFERRED rather than MPOL_BIND: a full node then spills to
   another instead of failing the allocation.  Before the first touch:
   the policy only places pages faulted in after it.  */
void
kp_numa_bind (void *p, size_t len, unsigned node)
{
#if KP_HAVE_NUMA
  if (!(kp_numa_config () & KP_NUMA_BIND))
    return;
  unsigned long mask = 1UL << node;
  int saved = errno;
  mbind (p, len, MPOL_PREFERRED, &mask, sizeof mask * 8, 0);
  errno = saved;
#else
  (void) p;
  (void) len;
  (void) node;
#endif
}
