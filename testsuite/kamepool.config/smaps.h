/* smaps.h -- helpers of the kamepool.config tests: the kernel's
   transparent-hugepage mode and the /proc/self/smaps entry of the
   mapping that holds an address.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#ifndef KP_CONFIG_SMAPS_H
#define KP_CONFIG_SMAPS_H 1

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The bracketed word of /sys/kernel/mm/transparent_hugepage/enabled
   ("always", "madvise" or "never") into MODE; false when the kernel has
   no THP at all.  */
static __attribute__ ((__unused__)) bool
kpc_thp_mode (char *mode, size_t size)
{
  FILE *f = fopen ("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (f == NULL)
    return false;
  char line[256];
  bool ok = fgets (line, sizeof line, f) != NULL;
  fclose (f);
  char *l = ok ? strchr (line, '[') : NULL;
  char *r = l != NULL ? strchr (l, ']') : NULL;
  if (r == NULL || (size_t) (r - l - 1) >= size)
    return false;
  memcpy (mode, l + 1, (size_t) (r - l - 1));
  mode[r - l - 1] = '\0';
  return true;
}

struct kpc_vma
{
  uintptr_t start, end;
  char flags[400];              /* the VmFlags line, " hg nh ..." */
  unsigned long anon_huge_kb;   /* AnonHugePages */
};

/* Fill *V with the smaps entry of the mapping that holds P.  */
static bool
kpc_vma_of (const void *p, struct kpc_vma *v)
{
  FILE *f = fopen ("/proc/self/smaps", "r");
  if (f == NULL)
    return false;
  char line[400];
  bool in = false, found = false;
  uintptr_t a = (uintptr_t) p;
  while (fgets (line, sizeof line, f) != NULL)
    {
      unsigned long s, e;
      unsigned long kb;
      char c;
      /* A mapping's first line; no field line has "hex-hex ".  */
      if (sscanf (line, "%lx-%lx %c", &s, &e, &c) == 3)
        {
          if (found)
            break;
          in = a >= s && a < e;
          if (in)
            {
              found = true;
              v->start = s;
              v->end = e;
              v->flags[0] = '\0';
              v->anon_huge_kb = 0;
            }
        }
      else if (in && sscanf (line, "AnonHugePages: %lu kB", &kb) == 1)
        v->anon_huge_kb = kb;
      else if (in && strncmp (line, "VmFlags:", 8) == 0)
        {
          memcpy (v->flags, line + 8, strlen (line + 8) + 1);
        }
    }
  fclose (f);
  return found;
}

/* Whether the VmFlags of V hold the two-letter flag FLAG.  */
static bool
kpc_has_flag (const struct kpc_vma *v, const char *flag)
{
  for (const char *s = v->flags; (s = strstr (s, flag)) != NULL; s += 2)
    if ((s == v->flags || s[-1] == ' ')
        && (s[2] == ' ' || s[2] == '\n' || s[2] == '\0'))
      return true;
  return false;
}

#endif /* KP_CONFIG_SMAPS_H */
