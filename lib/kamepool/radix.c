/* radix.c -- the map from a 32 MiB region number to what it holds
   (nothing of ours, a pool region, or the head of a large mapping).

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   The study proposed a two-level radix tree with lazily installed
   leaves.  A flat byte array indexed by the region number does the
   same with one load and no install race: 47 bits of user address
   space are 2^22 regions, so the map is 4 MiB of zero-initialised
   .bss, of which the kernel backs only the pages that hold a non-zero
   entry (in practice one or two).  Addresses above 2^47 are never
   ours.

   Entries are written with release (after the region's metadata or
   the large block's header is complete) and read with acquire, except
   on free's fast path (kp_internal.h), which reads relaxed: a block
   being freed was handed to the freeing thread after its region was
   published, and that hand-over orders the entry before the read.  A
   region's entry is written once; a large mapping's entry is cleared
   before the mapping is unmapped, so a double free of it finds
   nothing and goes to libc rather than to a stale header.  */

#include <config.h>

#include "kp_internal.h"

_Atomic (uint8_t) kp_radix[KP_RADIX_ENTRIES];

void
kp_radix_set (uintptr_t region_base, int kind)
{
  uintptr_t i = region_base >> KP_REGION_SHIFT;
  KP_CHECK (i < KP_RADIX_ENTRIES);
  atomic_store_explicit (&kp_radix[i], (uint8_t) kind, memory_order_release);
}
