/* sizeclass.c -- the 50 fixed size classes and the size -> class table.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   16-byte steps up to 368, then 384, 448, 512, then four classes per
   octave with a power of two at each octave boundary.  Every class is
   a multiple of 16 and chunk data starts on a 256 KiB boundary, so a
   block's natural alignment is the lowest set bit of its class size:
   4096, 8192, 16384 and 32768 are exact and page-aligned.  Above 368
   bytes the internal waste is under 20 %.  */

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
  20480, 24576, 28672, 32768
};

/* Units per chunk: at least 32 blocks per chunk, at most 4 units.  */
const uint8_t kp_class_units[KP_NCLASS] = {
  1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
  1, 1, 1,
  1, 1, 1, 1,
  1, 1, 1, 1,
  1, 1, 1, 1,
  1, 1, 1, 1,
  2, 2, 2, 2,
  4, 4, 4, 4
};

#include "sizeclass-lut.h"

/* The table is constant data (above), so a thread may read it before
   the process is initialised, with no race.  */

/* Check the generated table against kp_class_size (debug builds).  */
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
