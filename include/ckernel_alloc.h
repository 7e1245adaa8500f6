/* ckernel_alloc.h -- public interface of the ckernel bump arena of
   libckarena: one contiguous region for a model's weights and
   activations, and the 2 MiB-aligned huge-page allocations behind it.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#ifndef CKERNEL_ALLOC_H
#define CKERNEL_ALLOC_H 1

#include <stddef.h>
#include <stdint.h>

#if defined __GNUC__
# define CK_API __attribute__ ((visibility ("default")))
#else
# define CK_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* How the region of a ck_bump_alloc_t is backed.  */
typedef enum
{
  CK_BUMP_MODE_UNINITIALIZED = 0,  /* Zeroed, failed or freed.  */
  CK_BUMP_MODE_ANON = 1,           /* Anonymous memory, huge pages if
                                      the kernel allows; the caller
                                      copies the weights in.  */
  CK_BUMP_MODE_MIXED_FILE_BACKED = 2 /* The weights file is mapped
                                        privately over [weights_base,
                                        activations_base); anonymous
                                        memory elsewhere.  */
} ck_bump_mode_t;

/* One bump arena.  Fill it with ck_bump_alloc_init, release it with
   ck_bump_alloc_free; a zeroed struct is a valid empty arena.  The
   fields are read-only for the caller.  */
typedef struct
{
  uint8_t *base;              /* Start of the region; NULL if empty.  */
  size_t total_size;          /* Usable bytes from base.  */
  size_t weights_base;        /* Offset of the weights.  */
  size_t activations_base;    /* Offset of the activations.  */
  size_t mapped_len;          /* Bytes actually mapped from base.  */
  size_t weights_file_size;   /* st_size of the weights file in mixed
                                 mode, 0 otherwise.  */
  ck_bump_mode_t mode;
} ck_bump_alloc_t;

CK_API int ck_bump_alloc_init (ck_bump_alloc_t *alloc,
                               const char *weights_path,
                               size_t total_size, size_t weights_base,
                               size_t activations_base);
CK_API void ck_bump_alloc_free (ck_bump_alloc_t *alloc);
CK_API int
ck_bump_alloc_needs_weight_materialization (const ck_bump_alloc_t *alloc);

CK_API void *ck_huge_alloc (size_t bytes);
CK_API void ck_huge_free (void *ptr, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif /* CKERNEL_ALLOC_H */
