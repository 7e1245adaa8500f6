/* overcommit.c -- kamepool.oom: a request the kernel's overcommit
   policy refuses fails at the call, with NULL and ENOMEM, as glibc's
   malloc does: 1 TiB to 64 TiB under vm.overcommit_memory=0 on a
   machine with less memory and swap than that, or above the commit
   limit under 2; under 1 every one is served.  The policy is read from
   /proc/sys/vm/overcommit_memory (a test does not change it), and for
   each size the pool must answer as the C library's own malloc
   (__libc_malloc) answers, and as the policy says.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#define _GNU_SOURCE 1

#include <errno.h>
#include <malloc.h>
#include <sys/resource.h>

#include "kame_pool.h"
#include "kptest.h"

extern void *__libc_malloc (size_t);
extern void __libc_free (void *);

/* The first number of the line of /proc/FILE that starts with KEY,
   times MUL; 0 when there is none.  */
static unsigned long long
proc_number (const char *file, const char *key, unsigned long long mul)
{
  FILE *f = fopen (file, "r");
  if (f == NULL)
    return 0;
  char line[256];
  unsigned long long v = 0;
  while (fgets (line, sizeof line, f) != NULL)
    if (strncmp (line, key, strlen (key)) == 0)
      {
        v = strtoull (line + strlen (key), NULL, 10) * mul;
        break;
      }
  fclose (f);
  return v;
}

/* Whether the kernel's policy refuses a committed mapping of SIZE
   bytes: -1 when the test cannot tell (a size close to the limit).  */
static int
policy_refuses (int mode, unsigned long long size)
{
  if (mode == 1)
    return 0;
  if (mode == 0)
    {
      /* The heuristic refuses a single request above RAM plus swap.  */
      unsigned long long total
        = proc_number ("/proc/meminfo", "MemTotal:", 1024)
          + proc_number ("/proc/meminfo", "SwapTotal:", 1024);
      return size > 2 * total ? 1 : size < total / 2 ? 0 : -1;
    }
  /* 2: the commit limit, less what is committed already.  */
  unsigned long long limit
    = proc_number ("/proc/meminfo", "CommitLimit:", 1024);
  return size > 2 * limit ? 1 : -1;
}

KT_TEST (requests_of_1_to_64_tib_fail_as_the_overcommit_policy_says)
{
  int mode = (int) proc_number ("/proc/sys/vm/overcommit_memory", "", 1);
  struct rlimit as;
  if (getrlimit (RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY)
    KT_UNSUPPORTED ("RLIMIT_AS is set: the address space, not the "
                    "policy, would decide");
  int checked = 0;
  for (int n = 40; n <= 46; n++)
    {
      size_t size = (size_t) 1 << n;
      int refuses = policy_refuses (mode, size);
      errno = 0;
      void *libc = __libc_malloc (size);
      int libc_errno = errno;
      __libc_free (libc);
      errno = 0;
      void *pool = kame_pool_malloc (size);
      int pool_errno = errno;
      kame_pool_free (pool);
      if ((pool == NULL) != (libc == NULL))
        KT_FAILF ("overcommit_memory=%d: malloc (1 << %d): the pool %s, "
                  "the C library %s", mode, n, pool ? "served it" : "failed",
                  libc ? "served it" : "failed");
      if (pool == NULL && pool_errno != ENOMEM)
        KT_FAILF ("malloc (1 << %d) failed with errno %d, not ENOMEM", n,
                  pool_errno);
      if (libc == NULL && libc_errno != ENOMEM)
        KT_FAILF ("__libc_malloc (1 << %d) failed with errno %d", n,
                  libc_errno);
      if (refuses >= 0)
        {
          if ((pool == NULL) != (refuses == 1))
            KT_FAILF ("overcommit_memory=%d: malloc (1 << %d) %s", mode, n,
                      pool ? "was served" : "failed");
          checked++;
        }
    }
  printf ("overcommit_memory=%d: %d of 7 sizes checked against the "
          "policy\n", mode, checked);
}

KT_MAIN (KT_CASE (requests_of_1_to_64_tib_fail_as_the_overcommit_policy_says))
