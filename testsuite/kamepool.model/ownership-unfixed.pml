/* ownership-unfixed.pml: negative control of ownership.pml, a release
   that leaves the chunk's remote-free list claimable.
   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   Same model as ownership.pml (kp_free_remote CAS acq_rel,
   kp_chunk_collect exchange acquire, kp_chunk_abandon and
   kp_abandoned_collect CAS release, kp_chunk_adopt CAS acquire, in
   lib/kamepool/chunk.c), except that kp_chunk_release stores
   xthread_free = 0 instead of KP_TF_OWNED.  The released descriptor
   then looks abandoned, and an adopter acting on a
   stale hint owns a chunk whose units may already belong to someone
   else: Spin must report "assertion violated !(released)".  The test
   suite fails if it finds no error here.  */

#define RELEASE_NOT_DEAD 1
#include "ownership.pml"
