/* fastpath.c -- kamepool.abi: the malloc and free fast paths are
   inlined into the entry points (kp_malloc and kp_free are
   always_inline) and contain no atomic read-modify-write
   (the owner's allocation and free are plain loads and stores).  Read
   with objdump -d from the library this program is linked with.  A
   sanitizer build instruments every access, so it is left out.  The
   scan knows the x86-64 forms of an atomic read-modify-write only; on
   another architecture the test is UNSUPPORTED.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */
/* kptest-options: -D_GNU_SOURCE */
/* kptest-requires: no-sanitizer */

#include <dlfcn.h>

#include "kame_pool.h"
#include "kptest.h"
#include "kptest-pool.h"

#ifdef __x86_64__
/* The body of FN in the disassembly of LIB, up to the next symbol;
   true if it was found, with *LOCKED set when it holds a lock prefix
   or an xchg with memory (an atomic read-modify-write).  */
static bool
scan_function (const char *lib, const char *fn, bool *locked, int *insns)
{
  char cmd[4200];
  snprintf (cmd, sizeof cmd, "objdump -d --no-show-raw-insn '%s'", lib);
  FILE *f = popen (cmd, "r");
  if (f == NULL)
    return false;
  char want[300], line[1024];
  snprintf (want, sizeof want, "<%s>:", fn);
  bool in = false, found = false;
  *locked = false;
  *insns = 0;
  while (fgets (line, sizeof line, f) != NULL)
    {
      if (strstr (line, ">:") != NULL)
        {
          in = strstr (line, want) != NULL;
          found |= in;
          continue;
        }
      if (!in || strchr (line, ':') == NULL)
        continue;
      (*insns)++;
      /* A lock prefix, or an xchg with memory (implicitly locked);
         "xchg %ax,%ax" is only padding.  */
      const char *x = strstr (line, "xchg");
      if (strstr (line, "lock ") != NULL
          || (x != NULL && strchr (x, '(') != NULL))
        *locked = true;
    }
  pclose (f);
  return found;
}
#endif

KT_TEST (malloc_and_free_fast_paths_have_no_atomic_rmw)
{
#ifndef __x86_64__
  KT_UNSUPPORTED ("the scan knows only x86-64's atomic instructions");
#else
  const char *lib = kt_object_of ((void *) kame_pool_malloc);
  KT_CHECK (lib != NULL);
  static const char *const fns[] = { "kame_pool_malloc", "kame_pool_free" };
  for (size_t i = 0; i < 2; i++)
    {
      bool locked;
      int insns;
      if (!scan_function (lib, fns[i], &locked, &insns))
        KT_FAILF ("%s not found in the disassembly of %s", fns[i], lib);
      if (locked)
        KT_FAILF ("%s has an atomic read-modify-write instruction", fns[i]);
      /* A function that only jumps elsewhere would pass the check
         above vacuously.  */
      if (insns < 8)
        KT_FAILF ("%s has %d instructions: the fast path is not in it",
                  fns[i], insns);
    }
#endif
}

KT_MAIN (KT_CASE (malloc_and_free_fast_paths_have_no_atomic_rmw))
