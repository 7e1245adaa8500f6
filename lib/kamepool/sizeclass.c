/* sizeclass.c -- the 89 fixed size classes and the size -> class tables.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   16-byte steps up to 368, then 384, 448, 512, then four classes per
   octave with a power of two at each octave boundary (sixteen from
   4096 to 8192: 4160, 4368, then 256 bytes apart from 4672), one more
   64 bytes above each power of two from 512 to 16384, 16 bytes above
   512 and 1024, and 272 above 4096.  Every class is a multiple of 16
   and chunk data starts on a 256 KiB boundary, so a block's natural
   alignment is the lowest set bit of its class size: 4096, 8192,
   16384 and 32768 are exact and page-aligned.  Above 368 bytes the
   internal waste is under 20 %.

   Why the classes 64 bytes above a power of two (576, 1088, 2112,
   4160, 8256, 16448): a request of a power of two and a small header
   (a length word, a link, an allocator of the program's own on top of
   ours) is common, and the next class of the four per octave wasted a
   fifth of it.  Why sixteen classes from 4096 to 8192: a page and a
   header larger than 64 bytes (a database's page cache: sqlite's 4368
   bytes) took 5184 with four, 4672 with eight, 4416 with sixteen
   256 bytes apart, and has its own class.  Why 528 and 1040: a power
   of two and a header of 8 or 16 bytes (sqlite adds 8 to every
   request, and 1032 is its commonest size) took 576 and 1088, a tenth
   and a twentieth more (the measurements: doc/kamepool-design.md,
   section 2, and bench/README, issue 36).  Each class may cost an
   idle thread the pages of a chunk it keeps: one, since a thread that
   frees a working set of a class hands its other chunks over
   (kp_chunk_shed), which keeps the idle program of issue 36 under its
   bound with these classes.

   Why 4368 and not 4416: sqlite's page cache holds tens of thousands
   of such blocks at its peak, and 4416 wasted 48 bytes of each
   (bench/README, issue 36, twelfth sitting).  It is a multiple of 16
   but not of 64, so 32 of its blocks start at 20 line offsets in a
   page, not 32; still far from the one to four below.

   The other classes between 4 KiB and 32 KiB are odd multiples of 64
   bytes (5184, not 5120; 4672, not 4608): the first lines of the
   blocks of a chunk, which malloc and free read and write, then fall
   at as many different offsets in a page as the chunk has blocks (up
   to 64), and so in as many sets of a cache indexed by the address,
   instead of the same one to four (a 12288-byte class put every
   block's first line in the sets that hold a page's first line).

   Above 32 KiB, the mid classes: 1 MiB / M rounded down to 1 KiB for
   M = 30, 28, ... 18 and 16, 15, ... 5, in chunks of 4 units (1 MiB)
   that they fill to within 1.6 %.  The step from one to the next is 6
   to 20 %, so a block of 33 KiB to 200 KiB takes little more than its
   size, where a unit of its own (256 KiB) took up to 8 times it;
   69632 holds 68 KiB, 208896 holds 200 KB.  Being multiples of 1 KiB,
   they are found with one load (kp_mid_class).  */

#include <config.h>

#include "kp_internal.h"

/* The classes' sizes, listed once: kp_class_size and the tables
   worked out from it by the compiler.  */
#define KP_CLASS_SIZES(X) \
  X (16) X (32) X (48) X (64) X (80) X (96) X (112) X (128) X (144) X (160) \
  X (176) X (192) X (208) X (224) X (240) X (256) X (272) X (288) X (304) \
  X (320) X (336) X (352) X (368) X (384) X (448) X (512) X (528) X (576) \
  X (640) X (768) X (896) X (1024) X (1040) X (1088) X (1280) X (1536) \
  X (1792) X (2048) X (2112) X (2560) X (3072) X (3584) X (4096) X (4160) \
  X (4368) \
  X (4672) X (4928) X (5184) X (5440) X (5696) X (5952) X (6208) X (6464) \
  X (6720) X (6976) X (7232) X (7488) X (7744) X (8000) X (8192) X (8256) \
  X (10304) \
  X (12352) X (14400) X (16384) \
  X (16448) X (20544) X (24640) X (28736) X (32768) X (34816) \
  X (36864) X (39936) X (43008) X (47104) X (52224) X (57344) X (65536) \
  X (69632) X (74752) X (79872) X (87040) X (95232) X (104448) X (115712) \
  X (131072) X (149504) X (174080) X (208896)

#define KP_SIZE(s) s,
const uint32_t kp_class_size[KP_NCLASS] = { KP_CLASS_SIZES (KP_SIZE) };

/* 1 + UINT64_MAX / size: an offset OFF starts a block of the class
   exactly when OFF * magic < magic (kp_chunk_t's divmagic).  */
#define KP_MAGIC(s) (UINT64_MAX / (s) + 1),
const uint64_t kp_class_divmagic[KP_NCLASS] = { KP_CLASS_SIZES (KP_MAGIC) };

/* How many blocks of the class a slot of the batch of remote frees
   holds: 0 when the class is not batched (KP_RBATCH_LIMIT); in row 1,
   for a thread that allocates blocks of the class too
   (KP_RBATCH_REUSE).  */
#define KP_LIMIT(s) KP_RBATCH_LIMIT (s),
#define KP_REUSE(s) KP_RBATCH_REUSE (s),
const uint8_t kp_class_rbatch_limit[2][KP_NCLASS] = {
  { KP_CLASS_SIZES (KP_LIMIT) }, { KP_CLASS_SIZES (KP_REUSE) }
};

/* Units per chunk: at least 32 blocks per chunk up to 32 KiB, at most
   4 units (the decay's page bitmap covers 4).  */
const uint8_t kp_class_units[KP_NCLASS] = {
  1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
  1, 1, 1, 1, 1,
  1, 1, 1, 1, 1,
  1, 1, 1, 1, 1,
  1, 1, 1, 1, 1,
  1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
  2, 2, 2, 2, 2,
  4, 4, 4, 4, 4,
  4, 4, 4, 4, 4, 4, 4,
  4, 4, 4, 4, 4, 4, 4, 4,
  4, 4, 4, 4
};

#include "sizeclass-lut.h"

/* The table is constant data (above), so a thread may read it before
   the process is initialised, with no race.  */

/* Check the generated tables against kp_class_size (debug builds).  */
void
kp_sizeclass_check (void)
{
  unsigned cls = 0;
  for (size_t i = 0; i < KP_LUT_SIZE; i++)
    {
      while (kp_class_size[cls] < (i << 4))
        cls++;
      KP_CHECK (kp_class_lut[i] == cls);
    }
  for (size_t n = KP_LUT_MAX + 1; n <= KP_SMALL_MAX; n++)
    {
      cls = kp_size_class (n);
      KP_CHECK (kp_class_size[cls] >= n && kp_class_size[cls - 1] < n);
    }
  /* The shared classes are those above KP_OWNED_MAX (shared.c).  */
  KP_CHECK (kp_class_size[KP_SHARED_FIRST - 1] == KP_OWNED_MAX
            && kp_class_size[KP_SHARED_FIRST] > KP_OWNED_MAX);
  for (cls = 0; cls < KP_NCLASS; cls++)
    KP_CHECK (kp_class_size[cls] % (kp_class_size[cls] > KP_LUT_MAX
                                    ? 1024 : 16) == 0
              && kp_class_units[cls] <= 4
              && ((size_t) kp_class_units[cls] << KP_UNIT_SHIFT)
                 / kp_class_size[cls] >= 5);
}

/* The smallest class that holds N bytes at alignment ALIGN (a power of
   two above 16), or -1 when none does.  */
int
kp_class_for_aligned (size_t n, size_t align)
{
  if (n > KP_SMALL_MAX || align > KP_SMALL_MAX)
    return -1;
  for (unsigned cls = kp_size_class (n); cls < KP_NCLASS; cls++)
    {
      uint32_t s = kp_class_size[cls];
      if ((s & -s) >= align)
        return (int) cls;
    }
  return -1;
}
