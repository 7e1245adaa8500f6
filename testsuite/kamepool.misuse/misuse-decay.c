/* misuse-decay.c -- kamepool.misuse: a double free of a block in a page
   the decay gave back is reported, and the process dies of SIGABRT
   (the default KAME_POOL_ON_MISUSE).  The cases are in misuse-decay.h.
   kptest-env: KAME_POOL_DECAY_MS=0 KAME_POOL_BACKGROUND_PURGE=0

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#define KM_REPORT 0
#include "misuse-decay.h"
