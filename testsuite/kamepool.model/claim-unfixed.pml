/* claim-unfixed.pml: negative control of claim.pml, the claim protocol
   as it was before the back-offset fix.
   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   Same model as claim.pml (kp_units_claim, kp_units_release and the
   kp_free lookup of lib/kamepool/region.c; claim CAS acquire, release
   fetch_and release, back[] and desc fields relaxed), except that
   kp_units_claim stores back[base + i] = i BEFORE its CAS, as the
   original allocator did.  A claimer that loses the CAS may already
   have overwritten the back-offsets of a chunk another claimer won, so
   the search must end in an INV2 counterexample: a lookup resolves a
   unit to the wrong descriptor.  Only the 2-unit and the 4-unit
   claimers run, as in the minimal model of the design notes, and the
   failure is reported by the lookup that goes wrong rather than by the
   monitor, which would notice the overwrite a little earlier.
   doc/kamepool-model.md walks through the trail.  The test suite
   fails if Spin finds no error here.  */

#define UNFIXED 1
#define TWO_STRIDES 1
#define NO_MONITOR 1
#include "claim.pml"
