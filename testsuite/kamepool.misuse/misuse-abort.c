/* misuse-abort.c -- kamepool.misuse: heap misuse with the default
   KAME_POOL_ON_MISUSE (abort).  Every double free, invalid free or
   realloc, and freed block written to is reported with one exact line
   on stderr naming the pointer, and the process dies of SIGABRT.  The
   checks on the fast paths are UNSUPPORTED in a build configured with
   --disable-hardening, and the pointers that go to the C library's
   allocator in a build that does not interpose malloc.  The cases are
   in misuse-cases.h, shared with misuse-report.c.

   Guarded sampling is off: these tests assert where the pool places
   blocks and what it counts, and a guarded block is not the pool's.
   kptest-env: KAME_POOL_GUARD_SAMPLE=0

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#define KM_REPORT 0
#include "misuse-cases.h"
