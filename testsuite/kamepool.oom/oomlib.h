/* oomlib.h -- helpers of the kamepool.oom tests: a small RLIMIT_AS
   above what the process already maps, and address-space exhaustion
   with raw mappings that are not the allocator's.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#ifndef OOMLIB_H
#define OOMLIB_H 1

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

/* The process's mapped bytes (VmSize), or 0.  */
static size_t
oom_vm_size (void)
{
  return kt_proc_status_kib ("VmSize") * 1024;
}

/* Limit the address space to what is mapped now plus HEADROOM bytes.
   Prints something first, so that stdout's buffer exists before memory
   runs out.  */
static bool
oom_limit (size_t headroom)
{
  printf ("limiting the address space\n");
  size_t now = oom_vm_size ();
  if (now == 0)
    return false;
  struct rlimit rl = { now + headroom, now + headroom };
  return setrlimit (RLIMIT_AS, &rl) == 0;
}

#define OOM_MAX_MAPS 8192
static struct { void *p; size_t n; } oom_maps[OOM_MAX_MAPS];
static size_t oom_nmaps;

/* Fill what is left of the address space with plain mappings,
   from 64 MiB down to a page; the number of mappings.  */
static __attribute__ ((__unused__)) size_t
oom_exhaust (void)
{
  static const size_t sizes[] = { (size_t) 64 << 20, (size_t) 8 << 20,
                                  (size_t) 1 << 20, (size_t) 64 << 10,
                                  4096 };
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    while (oom_nmaps < OOM_MAX_MAPS)
      {
        void *p = mmap (NULL, sizes[i], PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
          break;
        oom_maps[oom_nmaps].p = p;
        oom_maps[oom_nmaps++].n = sizes[i];
      }
  return oom_nmaps;
}

static __attribute__ ((__unused__)) void
oom_release (void)
{
  while (oom_nmaps > 0)
    {
      oom_nmaps--;
      munmap (oom_maps[oom_nmaps].p, oom_maps[oom_nmaps].n);
    }
}

#endif /* OOMLIB_H */
