/* api.c -- the kame_pool_* entry points: libc's semantics and errno
   rules on top of the allocator's internal calls.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <config.h>

#include <errno.h>
#include <stdint.h>

#include "kp_internal.h"

KP_HOT_ENTRY void *
kame_pool_malloc (size_t size)
{
  return kp_malloc (size);
}

void *
kame_pool_calloc (size_t nmemb, size_t size)
{
  return kp_calloc (nmemb, size);
}

void *
kame_pool_realloc (void *ptr, size_t size)
{
  return kp_realloc (ptr, size);
}

KP_HOT_ENTRY void
kame_pool_free (void *ptr)
{
  kp_free (ptr);
}

void
kame_pool_free_sized (void *ptr, size_t size)
{
  kp_free_sized ("kame_pool_free_sized", ptr, 0, size);
}

void
kame_pool_free_aligned_sized (void *ptr, size_t alignment, size_t size)
{
  kp_free_sized ("kame_pool_free_aligned_sized", ptr, alignment, size);
}

static inline bool
kp_power_of_two (size_t a)
{
  return a != 0 && (a & (a - 1)) == 0;
}

void *
kame_pool_aligned_alloc (size_t alignment, size_t size)
{
  if (!kp_power_of_two (alignment))
    {
      errno = EINVAL;
      return NULL;
    }
  return kp_memalign (alignment, size);
}

int
kame_pool_posix_memalign (void **memptr, size_t alignment, size_t size)
{
  if (memptr == NULL || !kp_power_of_two (alignment)
      || alignment < sizeof (void *))
    return EINVAL;
  void *p = kp_memalign (alignment, size);
  if (p == NULL)
    {
      /* As glibc's: errno too (its tst-malloc-thread-fail checks).  */
      errno = ENOMEM;
      return ENOMEM;
    }
  *memptr = p;
  return 0;
}

size_t
kame_pool_malloc_usable_size (const void *ptr)
{
  return kp_usable_size (ptr);
}

int
kame_pool_set_max_bytes (size_t bytes)
{
  kp_setting_set (&kp_max_bytes, kp_max_bytes_round (bytes));
  return 0;
}

int
kame_pool_set_cap_policy (int policy)
{
  if (policy != KAME_POOL_CAP_FALLBACK && policy != KAME_POOL_CAP_STRICT)
    return EINVAL;
  kp_setting_set (&kp_cap_strict, policy == KAME_POOL_CAP_STRICT);
  return 0;
}

int
kame_pool_get_cap_policy (void)
{
  return kp_setting (&kp_cap_strict)
         ? KAME_POOL_CAP_STRICT : KAME_POOL_CAP_FALLBACK;
}

size_t
kame_pool_get_max_bytes (void)
{
  size_t cap = kp_setting (&kp_max_bytes);
  return cap == 0 ? SIZE_MAX : cap;
}

size_t
kame_pool_reserved_bytes (void)
{
  return kp_region_count () * KP_REGION_SIZE;
}

int
kame_pool_set_thread_exit_reclaim (int on)
{
  kp_setting_set (&kp_thread_exit_reclaim, on != 0);
  return 0;
}

int
kame_pool_get_thread_exit_reclaim (void)
{
  return kp_setting (&kp_thread_exit_reclaim);
}

int
kame_pool_set_thp_policy (int policy)
{
  if (!kp_thp_policy_set (policy))
    return EINVAL;
  /* The policy's store and fence come first (kp_thp_policy_set): a
     region created meanwhile is either on the list below or advised
     by its creator with the new policy (kp_region_new).  */
  if (policy != KAME_POOL_THP_SYSTEM)
    KP_FOR_EACH_REGION (r)
      kp_thp_advise_region (r, policy);
  return 0;
}

int
kame_pool_get_thp_policy (void)
{
  return kp_thp_policy_now ();
}

int
kame_pool_prof_dump (const char *path)
{
  /* A process that has not allocated yet has not read KAME_POOL_PROF
     either.  */
  kp_ready ();
  return kp_prof_dump (path);
}
