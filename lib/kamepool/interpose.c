/* interpose.c -- the malloc family, exported so that LD_PRELOAD or
   -lkamepool replaces the C library's allocator.  Built unless
   configure --disable-interpose (the default in address and thread
   sanitizer builds, whose runtimes own malloc).

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   The set is all or nothing: a program that got malloc from us and
   memalign from libc would hand our blocks to libc's free.  Pointers
   that are not ours (allocated before we were loaded, or through
   __libc_malloc) are recognised by the radix map and given back to the
   C library.  glibc's extensions that trim and describe the heap
   (malloc_trim, mallinfo2, ...) go with the set, in mallinfo.c.  */

#include <config.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <malloc.h>

#include "kp_internal.h"

#define KP_EXPORT __attribute__ ((__visibility__ ("default")))

KP_EXPORT KP_HOT_ENTRY void *
malloc (size_t size)
{
  return kp_malloc (size);
}

KP_EXPORT KP_HOT_ENTRY void
free (void *ptr)
{
  kp_free (ptr);
}

/* C23's sized frees (glibc 2.43 has them too): checked, then freed as
   free does (kp_free_sized).  Declared here for an older <stdlib.h>.  */
void free_sized (void *ptr, size_t size);
void free_aligned_sized (void *ptr, size_t alignment, size_t size);

KP_EXPORT void
free_sized (void *ptr, size_t size)
{
  kp_free_sized ("free_sized", ptr, 0, size);
}

KP_EXPORT void
free_aligned_sized (void *ptr, size_t alignment, size_t size)
{
  kp_free_sized ("free_aligned_sized", ptr, alignment, size);
}

KP_EXPORT void *
calloc (size_t nmemb, size_t size)
{
  return kp_calloc (nmemb, size);
}

KP_EXPORT void *
realloc (void *ptr, size_t size)
{
  return kp_realloc (ptr, size);
}

KP_EXPORT void *
reallocarray (void *ptr, size_t nmemb, size_t size)
{
  size_t total;
  if (__builtin_mul_overflow (nmemb, size, &total))
    {
      errno = ENOMEM;
      return NULL;
    }
  return kp_realloc (ptr, total);
}

KP_EXPORT int
posix_memalign (void **memptr, size_t alignment, size_t size)
{
  return kame_pool_posix_memalign (memptr, alignment, size);
}

KP_EXPORT void *
aligned_alloc (size_t alignment, size_t size)
{
  return kame_pool_aligned_alloc (alignment, size);
}

/* glibc's memalign rounds a non-power-of-two alignment up; we reject
   it with EINVAL, as POSIX allows and the manual documents.  */
KP_EXPORT void *
memalign (size_t alignment, size_t size)
{
  return kame_pool_aligned_alloc (alignment, size);
}

KP_EXPORT void *
valloc (size_t size)
{
  return kp_memalign (kp_os_page_size (), size);
}

KP_EXPORT void *
pvalloc (size_t size)
{
  size_t page = kp_os_page_size ();
  if (size > SIZE_MAX - (page - 1))
    {
      errno = ENOMEM;
      return NULL;
    }
  size_t rounded = (size + page - 1) & ~(page - 1);
  return kp_memalign (page, rounded == 0 ? page : rounded);
}

/* malloc_usable_size of PTR, not NULL, whose region's radix entry
   KIND is not POOL.  A large or sampled block's size is 0 only when
   PTR is not the block of a live mapping or sample of ours; an address
   of the guarded slot pool is never the C library's.  */
static KP_NOINLINE size_t
kp_usable_size_cold (void *ptr, int kind)
{
  if (kind != KP_RADIX_NONE)
    {
      size_t n = kind == KP_RADIX_PROF ? kp_prof_usable (ptr)
                 : kind == KP_RADIX_GUARD ? kp_guard_usable (ptr)
                 : kp_large_usable (ptr, kind);
      if (n != 0 || kind == KP_RADIX_GUARD)
        return n;
    }
  return kp_foreign_ok ("malloc_usable_size", ptr)
         ? kp_libc_usable_size (ptr) : 0;
}

/* One lookup of the radix map, where kp_owns and kp_usable_size would
   take two: programs that count their memory (redis) call this on
   every malloc and free.  */
KP_EXPORT size_t
malloc_usable_size (void *ptr)
{
  if (ptr == NULL)
    return 0;
  int kind = kp_radix_lookup ((uintptr_t) ptr);
  if (kp_likely (kind == KP_RADIX_POOL))
    return kp_pool_usable_size (ptr);
  return kp_usable_size_cold (ptr, kind);
}
