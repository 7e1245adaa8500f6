/* sizeclass.c -- the 69 fixed size classes and the size -> class tables.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   16-byte steps up to 368, then 384, 448, 512, then four classes per
   octave with a power of two at each octave boundary.  Every class is
   a multiple of 16 and chunk data starts on a 256 KiB boundary, so a
   block's natural alignment is the lowest set bit of its class size:
   4096, 8192, 16384 and 32768 are exact and page-aligned.  Above 368
   bytes the internal waste is under 20 %.

   Above 32 KiB, the mid classes: 1 MiB / M rounded down to 1 KiB for
   M = 30, 28, ... 18 and 16, 15, ... 5, in chunks of 4 units (1 MiB)
   that they fill to within 1.6 %.  The step from one to the next is 6
   to 20 %, so a block of 33 KiB to 200 KiB takes little more than its
   size, where a unit of its own (256 KiB) took up to 8 times it;
   69632 holds 68 KiB, 208896 holds 200 KB.  Being multiples of 1 KiB,
   they are found with one load (kp_mid_class).  */

#include <config.h>

#include "kp_internal.h"

const uint32_t kp_class_size[KP_NCLASS] = {
  16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240,
  256, 272, 288, 304, 320, 336, 352, 368,
  384, 448, 512,
  640, 768, 896, 1024,
  1280, 1536, 1792, 2048,
  2560, 3072, 3584, 4096,
  5120, 6144, 7168, 8192,
  10240, 12288, 14336, 16384,
  20480, 24576, 28672, 32768,
  34816, 36864, 39936, 43008, 47104, 52224, 57344,
  65536, 69632, 74752, 79872, 87040, 95232, 104448, 115712,
  131072, 149504, 174080, 208896
};

/* Units per chunk: at least 32 blocks per chunk up to 32 KiB, at most
   4 units (the decay's page bitmap covers 4).  */
const uint8_t kp_class_units[KP_NCLASS] = {
  1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
  1, 1, 1,
  1, 1, 1, 1,
  1, 1, 1, 1,
  1, 1, 1, 1,
  1, 1, 1, 1,
  2, 2, 2, 2,
  4, 4, 4, 4,
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
