/* misuse-decay-report.c -- kamepool.misuse: the cases of
   misuse-decay.c with KAME_POOL_ON_MISUSE=report: the double free is
   reported and dropped, and once the pages are in use again no block
   is handed out twice.
   kptest-env: KAME_POOL_DECAY_MS=0 KAME_POOL_ON_MISUSE=report
   kptest-env: KAME_POOL_BACKGROUND_PURGE=0

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#define KM_REPORT 1
#include "misuse-decay.h"
