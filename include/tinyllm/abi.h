/* tinyllm/abi.h -- the tinyllm runtime support layer of libckarena:
   status codes, the thread-local error slot, the replaceable
   allocation hooks and the interface version.  Every other tinyllm
   header builds on this one.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#ifndef TINYLLM_ABI_H
#define TINYLLM_ABI_H 1

#include <stddef.h>

#ifndef TL_API
# if defined __GNUC__
#  define TL_API __attribute__ ((visibility ("default")))
# else
#  define TL_API
# endif
#endif

#if defined __GNUC__
# define TL_PRINTF_LIKE(f, a) __attribute__ ((format (printf, f, a)))
#else
# define TL_PRINTF_LIKE(f, a)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the tinyllm interface these headers declare.  It
   changes whenever a type, a constant or a function's contract
   changes, so a test binary can check that the library it runs
   against was built from the same headers (tl_abi_version).  */
#define TL_ABI_VERSION 1u

/* Status of a tinyllm call.  The values are part of the ABI: a code
   is never renumbered, new codes are added at the end.  */
typedef enum
{
  TL_OK = 0,         /* Success.  */
  TL_EINVAL = 1,     /* An argument is invalid (NULL, zero, bad
                        alignment, an inconsistent hook).  */
  TL_ENOMEM = 2,     /* The allocation hook returned NULL.  */
  TL_ERANGE = 3,     /* A size or index is outside what the call can
                        represent (an overflowing product, say).  */
  TL_EIO = 4,        /* Reading or writing a file failed.  */
  TL_EINTERNAL = 5   /* A broken invariant: a bug in the caller's hook
                        or in the library.  */
} tl_status;

/* The stable name of STATUS ("TL_OK", "TL_EINVAL", ...), or
   "TL_UNKNOWN" for any other value.  Never NULL.  */
TL_API const char *tl_status_str (int status);

/* Size of the thread-local error slot, terminating null included:
   longer messages are truncated to TL_LAST_ERROR_SIZE - 1 bytes.  */
#define TL_LAST_ERROR_SIZE 256

/* Format a message into the calling thread's error slot, as snprintf
   would; the slot keeps a copy, so the arguments may go away.  A NULL
   FMT clears the slot.  */
TL_API void tl_set_last_error (const char *fmt, ...) TL_PRINTF_LIKE (1, 2);

/* The calling thread's last error message, "" if none.  The string
   stays valid until the thread's next tl_* call.  */
TL_API const char *tl_last_error (void);

/* Empty the calling thread's error slot.  */
TL_API void tl_clear_last_error (void);

/* Allocation hooks.  ALLOC is called with N > 0 and ALIGN a power of
   two and returns N bytes aligned to ALIGN, or NULL; FREE releases what
   ALLOC returned and is never called with NULL.  CTX is passed to
   both.  */
typedef struct tl_allocator
{
  void *(*alloc) (void *ctx, size_t n, size_t align);
  void (*free) (void *ctx, void *p);
  void *ctx;
} tl_allocator;

/* Install the hooks *HOOKS (copied), or the default ones
   (posix_memalign and free) if HOOKS is NULL.  A struct with only one
   of ALLOC and FREE set is rejected with TL_EINVAL and changes nothing.
   Not thread-safe: install the hooks before other threads allocate.  */
TL_API tl_status tl_set_allocator (const tl_allocator *hooks);

/* Copy the installed hooks into *OUT.  */
TL_API tl_status tl_get_allocator (tl_allocator *out);

/* N bytes aligned to ALIGN (a power of two) from the installed hook.
   NULL with the error slot set if N is 0, ALIGN is not a power of two
   (the hook is not called) or the hook fails.  */
TL_API void *tl_alloc (size_t n, size_t align);

/* Give P, from tl_alloc, back to the installed hook; NULL does
   nothing.  */
TL_API void tl_free (void *p);

/* TL_ABI_VERSION as the library was compiled.  */
TL_API unsigned tl_abi_version (void);

#ifdef __cplusplus
}
#endif

#endif /* TINYLLM_ABI_H */
