/* init.c -- process start-up, fork, the C library fallback and the
   statistics report at exit.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   Initialisation is lazy: the first allocation of the process runs it,
   through the refill slow path.  A thread that finds another thread in
   the middle of it waits, yielding, for at most KP_INIT_WAIT_MS; the
   initialising thread itself, re-entered through a library call that
   allocates, is served by the C library at once, and those blocks are
   later recognised as foreign and given back to it.  No lock is taken,
   so fork or a signal cannot leave one held.  */

#include <config.h>

#include <dlfcn.h>
#include <malloc.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "kp_internal.h"

#if KP_INTERPOSE
/* We are malloc: the fallback is the C library's own allocator, under
   its internal names.  */
# ifndef HAVE___LIBC_MALLOC
#  error "the malloc interposition needs glibc's __libc_malloc family; configure --disable-interpose"
# endif
extern void *__libc_malloc (size_t);
extern void *__libc_calloc (size_t, size_t);
extern void *__libc_realloc (void *, size_t);
extern void *__libc_memalign (size_t, size_t);
extern void __libc_free (void *);
# define KP_LIBC(name) __libc_##name
#else
/* Not interposing (a sanitizer build, say): malloc is whoever provides
   it, and its free must see every fallback block.  */
# define KP_LIBC(name) name
static void *
memalign_via_posix (size_t align, size_t n)
{
  void *p;
  int err = posix_memalign (&p, align < sizeof (void *) ? sizeof (void *)
                                                         : align, n);
  if (err != 0)
    {
      errno = err;
      return NULL;
    }
  return p;
}
#endif

_Atomic (int) kp_init_state;

void *
kp_libc_malloc (size_t n)
{
  return KP_LIBC (malloc) (n);
}

void *
kp_libc_realloc (void *p, size_t n)
{
  return KP_LIBC (realloc) (p, n);
}

void *
kp_libc_memalign (size_t align, size_t n)
{
#if KP_INTERPOSE
  return __libc_memalign (align, n);
#else
  return memalign_via_posix (align, n);
#endif
}

void
kp_libc_free (void *p)
{
  KP_LIBC (free) (p);
}

void *
kp_units_fallback (size_t n, size_t align)
{
  if (kp_setting (&kp_cap_strict))
    {
      errno = ENOMEM;
      return NULL;
    }
  return align > KP_MIN_ALIGN ? kp_libc_memalign (align, n)
                              : kp_libc_malloc (n);
}

/* glibc has no __libc_malloc_usable_size; find the next definition of
   malloc_usable_size once (dlsym may allocate, which is fine here).  */
size_t
kp_libc_usable_size (void *p)
{
#if !KP_INTERPOSE
  return malloc_usable_size (p);
#endif
  typedef size_t (*usable_fn) (void *);
  static _Atomic (usable_fn) next;
  usable_fn f = atomic_load_explicit (&next, memory_order_acquire);
  if (f == NULL)
    {
      f = (usable_fn) dlsym (RTLD_NEXT, "malloc_usable_size");
      if (f == NULL)
        return 0;
      atomic_store_explicit (&next, f, memory_order_release);
    }
  return f (p);
}

/* Before a fork, the forking thread publishes its batch of remote
   frees: the owners in the parent get them now, and the child starts
   with an empty batch.  Not when the fork comes from a signal handler
   that interrupted a take from the batch (kp_malloc_refill): the
   block being taken would go with the others.  The batch then stays
   as it is, and the child inherits it, consistent too: the slots are
   the thread's own memory, copied with the rest, and the take goes on
   in both processes.  */
static void
kp_atfork_prepare (void)
{
  kp_heap_t *h = kp_tc.heap;
  if (kp_heap_live (h) && !h->rbatch_taking)
    kp_rbatch_flush_all (h);
  kp_purge_atfork_prepare ();
  kp_prof_atfork_prepare ();
  kp_guard_atfork_prepare ();
}

static void
kp_atfork_parent (void)
{
  kp_guard_atfork_parent ();
  kp_prof_atfork_parent ();
  kp_purge_atfork_parent ();
}

/* In the child of a fork, an initialisation that another thread of the
   parent had begun will never finish: start over.  */
static void
kp_atfork_child (void)
{
  kp_guard_atfork_child ();
  kp_prof_atfork_child ();
  kp_purge_atfork_child ();
  kp_heaps_after_fork ();
  int running = KP_INIT_RUNNING;
  atomic_compare_exchange_strong_explicit (&kp_init_state, &running,
                                           KP_INIT_NONE,
                                           memory_order_relaxed,
                                           memory_order_relaxed);
}

/* This thread is running kp_process_init.  */
static __thread bool kp_initialising KP_TLS_ATTR;

/* Initialise the process once.  A thread that arrives while another
   initialises waits for it (at most KP_INIT_WAIT_MS).  False when it is
   re-entered by the thread running it, or when the wait ran out: the
   caller then uses the C library.  (The pthread key of the heaps is
   heap.c's, made by the first kp_thread_init, so that this file
   reaches nothing above it.)  */
bool
kp_process_init (void)
{
  int state = atomic_load_explicit (&kp_init_state, memory_order_acquire);
  if (state == KP_INIT_DONE)
    return true;
  if (kp_initialising)
    return false;
  uint32_t start = 0;
  bool waited = false;
  while (state != KP_INIT_NONE
         || !atomic_compare_exchange_strong_explicit (&kp_init_state, &state,
                                                      KP_INIT_RUNNING,
                                                      memory_order_acquire,
                                                      memory_order_acquire))
    {
      if (state == KP_INIT_DONE)
        return true;
      if (state == KP_INIT_NONE)
        continue;               /* a fork's child started over: retry */
      uint32_t now = kp_clock_ms ();
      if (!waited)
        {
          start = now;
          waited = true;
        }
      else if (now - start > KP_INIT_WAIT_MS)
        return false;
      sched_yield ();
      state = atomic_load_explicit (&kp_init_state, memory_order_acquire);
    }
  kp_initialising = true;
  int saved = errno;
#if KP_DEBUG >= 1
  kp_sizeclass_check ();
#endif
  kp_os_page_size ();
  kp_options_init ();
  kp_misuse_init ();
  kp_prof_init ();
  kp_guard_init ();
  kp_sample_decide ();
  /* Without the handlers (no memory for them) a fork still works: the
     child only loses the restart of an initialisation in progress.  */
  pthread_atfork (kp_atfork_prepare, kp_atfork_parent,
                  kp_atfork_child);
  errno = saved;
  kp_initialising = false;
  atomic_store_explicit (&kp_init_state, KP_INIT_DONE, memory_order_release);
  return true;
}
