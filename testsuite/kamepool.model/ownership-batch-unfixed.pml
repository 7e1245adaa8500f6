/* ownership-batch-unfixed.pml: negative control of the batch of remote
   frees in ownership.pml, a flush that ignores the owned bit it found.
   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   Same model as ownership.pml (kp_rbatch_flush publishes the batch
   with one CAS that sets KP_TF_OWNED, in lib/kamepool/chunk.c), except
   that a flush that finds the bit clear, because the owner abandoned
   the chunk while the batch waited, does not take the chunk over
   (kp_abandoned_collect is left out).  The chunk then holds the bit
   with no owner: no adopter can take it, nobody collects the batch,
   and the chunk is never released once its last block is free: Spin
   must report "assertion violated (released&&(releases==1))" when the
   threads have quit.  The test suite fails if it finds no error
   here.  */

#define FLUSH_IGNORES_ABANDONED 1
#include "ownership.pml"
