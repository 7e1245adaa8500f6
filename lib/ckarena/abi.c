/* abi.c -- the tinyllm runtime support layer: status names, the
   thread-local error slot, the replaceable allocation hooks and the
   interface version (include/tinyllm/abi.h).

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <config.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <tinyllm/abi.h>

const char *
tl_status_str (int status)
{
  switch (status)
    {
    case TL_OK:
      return "TL_OK";
    case TL_EINVAL:
      return "TL_EINVAL";
    case TL_ENOMEM:
      return "TL_ENOMEM";
    case TL_ERANGE:
      return "TL_ERANGE";
    case TL_EIO:
      return "TL_EIO";
    case TL_EINTERNAL:
      return "TL_EINTERNAL";
    default:
      return "TL_UNKNOWN";
    }
}

/* One slot per thread, so that a kernel failing in one worker cannot
   overwrite the message another worker is about to read.  */
static _Thread_local char tl_error_slot[TL_LAST_ERROR_SIZE];

void
tl_set_last_error (const char *fmt, ...)
{
  if (fmt == NULL)
    {
      tl_error_slot[0] = '\0';
      return;
    }
  va_list ap;
  va_start (ap, fmt);
  /* vsnprintf truncates and always terminates; a format error leaves
     a negative count and possibly garbage, so fall back to FMT.  */
  if (vsnprintf (tl_error_slot, sizeof tl_error_slot, fmt, ap) < 0)
    snprintf (tl_error_slot, sizeof tl_error_slot, "%s", fmt);
  va_end (ap);
}

const char *
tl_last_error (void)
{
  return tl_error_slot;
}

void
tl_clear_last_error (void)
{
  tl_error_slot[0] = '\0';
}

static void *
tl_default_alloc (void *ctx, size_t n, size_t align)
{
  (void) ctx;
  void *p;
  /* posix_memalign wants a multiple of sizeof (void *); unlike C11
     aligned_alloc it does not need N to be a multiple of ALIGN.  */
  if (align < sizeof (void *))
    align = sizeof (void *);
  return posix_memalign (&p, align, n) == 0 ? p : NULL;
}

static void
tl_default_free (void *ctx, void *p)
{
  (void) ctx;
  free (p);
}

static const tl_allocator tl_default_hooks =
  { tl_default_alloc, tl_default_free, NULL };

/* The installed hooks.  Written only by tl_set_allocator, which the
   contract keeps out of concurrent use, so no atomics.  */
static tl_allocator tl_hooks = { tl_default_alloc, tl_default_free, NULL };

tl_status
tl_set_allocator (const tl_allocator *hooks)
{
  if (hooks == NULL)
    {
      tl_hooks = tl_default_hooks;
      return TL_OK;
    }
  if (hooks->alloc == NULL || hooks->free == NULL)
    {
      tl_set_last_error ("tl_set_allocator: alloc and free must both be "
                         "set (pass NULL for the default hooks)");
      return TL_EINVAL;
    }
  tl_hooks = *hooks;
  return TL_OK;
}

tl_status
tl_get_allocator (tl_allocator *out)
{
  if (out == NULL)
    {
      tl_set_last_error ("tl_get_allocator: out is NULL");
      return TL_EINVAL;
    }
  *out = tl_hooks;
  return TL_OK;
}

void *
tl_alloc (size_t n, size_t align)
{
  if (n == 0)
    {
      tl_set_last_error ("tl_alloc: size 0");
      return NULL;
    }
  if (align == 0 || (align & (align - 1)) != 0)
    {
      tl_set_last_error ("tl_alloc: alignment %zu is not a power of two",
                         align);
      return NULL;
    }
  void *p = tl_hooks.alloc (tl_hooks.ctx, n, align);
  if (p == NULL)
    tl_set_last_error ("tl_alloc: the allocation hook failed for %zu bytes "
                       "aligned to %zu", n, align);
  return p;
}

void
tl_free (void *p)
{
  if (p != NULL)
    tl_hooks.free (tl_hooks.ctx, p);
}

unsigned
tl_abi_version (void)
{
  return TL_ABI_VERSION;
}
