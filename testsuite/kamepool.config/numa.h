/* numa.h -- helpers of the kamepool.config NUMA tests: run a function
   in a thread pinned to one CPU, and the memory policy of an address.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#ifndef KP_CONFIG_NUMA_H
#define KP_CONFIG_NUMA_H 1

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Run FN (ARG) in a new thread bound to CPU; false when the CPU is not
   ours to use or the thread cannot start.  */
static __attribute__ ((__unused__)) bool
kpc_run_on_cpu (int cpu, void *(*fn) (void *), void *arg)
{
  pthread_attr_t attr;
  cpu_set_t set;
  CPU_ZERO (&set);
  CPU_SET (cpu, &set);
  pthread_t t;
  if (pthread_attr_init (&attr) != 0)
    return false;
  bool ok = pthread_attr_setaffinity_np (&attr, sizeof set, &set) == 0
            && pthread_create (&t, &attr, fn, arg) == 0;
  pthread_attr_destroy (&attr);
  return ok && pthread_join (t, NULL) == 0;
}

/* Whether this process may run on CPU.  */
static __attribute__ ((__unused__)) bool
kpc_cpu_allowed (int cpu)
{
  cpu_set_t set;
  return sched_getaffinity (0, sizeof set, &set) == 0
         && CPU_ISSET (cpu, &set);
}

/* The policy of the page at P (get_mempolicy with MPOL_F_ADDR, as a
   raw system call so that no libnuma is needed) and, in *MASK, its
   nodes 0..63; -1 on error.  The kernel wants room for every possible
   node (up to 1024 of them), not just the first 64.  */
static __attribute__ ((__unused__)) int
kpc_policy_of (const void *p, unsigned long *mask)
{
  unsigned long nodes[1024 / (8 * sizeof (unsigned long))];
  int mode = -1;
  memset (nodes, 0, sizeof nodes);
  if (syscall (SYS_get_mempolicy, &mode, nodes, sizeof nodes * 8, p,
               2 /* MPOL_F_ADDR */) != 0)
    return -1;
  *mask = nodes[0];
  return mode;
}

#endif /* KP_CONFIG_NUMA_H */
