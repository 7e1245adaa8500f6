/* misuse-report.c -- kamepool.misuse: the cases of misuse-abort.c with
   KAME_POOL_ON_MISUSE=report.  Each misuse is reported with the same
   line, the misused call does nothing (realloc fails with EINVAL), the
   program goes on, and its heap is as it was: the blocks it holds keep
   their contents, and no block is handed out twice afterwards.
   Guarded sampling is off: these tests assert where the pool places
   blocks and what it counts, and a guarded block is not the pool's.
   kptest-env: KAME_POOL_ON_MISUSE=report KAME_POOL_GUARD_SAMPLE=0

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#define KM_REPORT 1
#include "misuse-cases.h"
