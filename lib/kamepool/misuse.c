/* misuse.c -- heap misuse: the secret of the encoded free lists, the
   report (and abort) on misuse, and the checks on pointers that are not
   the pool's before they go to the C library.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   The checks on the pool's own blocks are on the fast paths
   (kp_internal.h: the encoded links and the free tag of kp_block_t,
   kp_free_owned's one-branch test) and in chunk.c
   (kp_free_owned_check, kp_free_remote, kp_collect_purged).  */

#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "kp_internal.h"

kp_keys_t kp_keys;

/* The secret: 8 bytes from getrandom, or, when it fails (an old kernel,
   a seccomp filter), from the 16 random bytes the kernel gives every
   process (AT_RANDOM) mixed with the clock and an address.  Never 0:
   a tag of 0 would match every zeroed block.  */
static uintptr_t
kp_secret_new (void)
{
  uintptr_t v = 0;
  if (getrandom (&v, sizeof v, GRND_NONBLOCK) != (ssize_t) sizeof v)
    {
      const unsigned char *r = (const unsigned char *) getauxval (AT_RANDOM);
      static _Atomic (unsigned) calls;
      unsigned k = atomic_fetch_add_explicit (&calls, 1,
                                              memory_order_relaxed) & 1;
      if (r != NULL)
        memcpy (&v, r + 8 * k, sizeof v);
      struct timespec ts;
      clock_gettime (CLOCK_MONOTONIC, &ts);
      v ^= (uintptr_t) ts.tv_nsec * 0x9e3779b97f4a7c15u
           ^ (uintptr_t) &ts ^ ((uintptr_t) ts.tv_sec << 32);
    }
  return v != 0 ? v : 0x5bd1e9955bd1e995u;
}

/* Called by kp_process_init before it publishes the end of
   initialisation: no block can have been freed to the pool before.  */
void
kp_misuse_init (void)
{
  kp_secret = kp_secret_new ();
  /* The low bit tells the remote tag (kp_block_mark_remote); with it
     clear the key is still never 0.  */
  kp_free_key = kp_secret_new () & ~(uintptr_t) 1;
  if (kp_free_key == 0)
    kp_free_key = 0x5bd1e9955bd1e994u;
}

void
kp_misuse (const char *call, const char *what, const void *p)
{
  kp_report (call, what, p);
  if (kp_option_misuse_aborts ())
    abort ();
}

/* Whether the page that holds ADDR is mapped (mincore fails with ENOMEM
   on an unmapped range, and never faults).  */
static bool
kp_mapped (uintptr_t addr)
{
  size_t page = kp_os_page_size ();
  unsigned char vec;
  int saved = errno;
  bool ok = mincore ((void *) (addr & ~(page - 1)), 1, &vec) == 0;
  errno = saved;
  return ok;
}

/* The calling thread's stack, found the first time it frees a pointer
   that is not the pool's (pthread_getattr_np allocates, and for the main
   thread reads /proc/self/maps; a free from inside it finds LOOKING set
   and skips the check).  */
static __thread struct
{
  uintptr_t lo, hi;
  bool looking;
} kp_stack KP_TLS_ATTR;

/* Whether P is on the calling thread's stack.  */
static bool
kp_on_own_stack (const void *p)
{
  if (kp_stack.hi == 0)
    {
      if (kp_stack.looking)
        return false;
      kp_stack.looking = true;
      pthread_attr_t attr;
      void *addr = NULL;
      size_t size = 0;
      int saved = errno;
      if (pthread_getattr_np (pthread_self (), &attr) == 0)
        {
          if (pthread_attr_getstack (&attr, &addr, &size) != 0)
            size = 0;
          pthread_attr_destroy (&attr);
        }
      errno = saved;
      kp_stack.looking = false;
      if (size == 0)
        return false;
      kp_stack.lo = (uintptr_t) addr;
      kp_stack.hi = (uintptr_t) addr + size;
    }
  return (uintptr_t) p >= kp_stack.lo && (uintptr_t) p < kp_stack.hi;
}

/* The C library's block header on x86_64 and the other 64-bit targets
   of glibc: the size word just before the block, its low bits flags
   (1: the chunk before is in use; 2: mapped on its own), sizes a
   multiple of 16 and at least 32.  A block in its heaps has a next
   chunk whose "before is in use" bit is set while the block lives.  */
#define KP_GLIBC_ALIGN 16
#define KP_GLIBC_MINSIZE 32
#define KP_GLIBC_MMAPPED 2

bool
kp_foreign_ok (const char *call, const void *p)
{
  uintptr_t a = (uintptr_t) p;
  if (a % KP_GLIBC_ALIGN != 0)
    {
      kp_misuse (call, "invalid pointer (misaligned; no allocator's "
                 "block):", p);
      return false;
    }
  if (!kp_mapped (a - 2 * sizeof (size_t)) || !kp_mapped (a))
    {
      kp_misuse (call, "invalid pointer (unmapped):", p);
      return false;
    }
  if (kp_on_own_stack (p))
    {
      kp_misuse (call, "invalid pointer (on the stack):", p);
      return false;
    }
#if !KP_INTERPOSE
  /* A sanitizer (or another malloc) owns malloc: its blocks have their
     own headers.  */
  return true;
#endif
  size_t word = ((const size_t *) p)[-1];
  size_t size = word & ~(size_t) 7;
  bool ok = size >= KP_GLIBC_MINSIZE && size % KP_GLIBC_ALIGN == 0
            && size <= (size_t) PTRDIFF_MAX;
  if (ok && (word & KP_GLIBC_MMAPPED))
    ok = (a - 2 * sizeof (size_t)) % kp_os_page_size () == 0
         || ((a - 2 * sizeof (size_t) - ((const size_t *) p)[-2])
             % kp_os_page_size ()) == 0;
  else if (ok)
    {
      uintptr_t next = a - 2 * sizeof (size_t) + size;
      ok = next > a && kp_mapped (next + sizeof (size_t))
           && (((const size_t *) next)[1] & 1) != 0;
    }
  if (!ok)
    {
      kp_misuse (call, "invalid pointer (not allocated by the pool or the "
                 "C library):", p);
      return false;
    }
  return true;
}
