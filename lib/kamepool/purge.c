/* purge.c -- the background purge: a thread that gives back the free
   memory that has stayed unused for the decay's delay when no thread of
   the program calls malloc or free, started only while there is such
   memory to give back, and gone when there is none.
   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   The decay's ticks (kp_units_decay, and the second level of the large
   cache) ride on the heaps' passes, which run in the refills: a
   process that stops allocating kept what it had freed for good.  The
   thread makes the same ticks on a clock.  What it gives back is the
   free units kept resident (region.c) and the shared level of the
   large cache and the abandoned chunks, whose free pages it gives back
   once they have waited the delay (registered by cache.c and chunk.c,
   the layers above, through kp_purge_register); the blocks in the
   chunks a thread owns stay its own to purge (heap.c), since no other
   thread may touch them, but a thread that frees a working set hands
   those chunks over (kp_chunk_shed).

   Starting a thread from inside malloc must not re-enter the
   allocator in the middle of an operation (pthread_create allocates),
   so the layers only poll (kp_purge_poll) at points where the calling
   thread's heap is consistent: the top of a refill, the end of a free
   that released a chunk, the end of a thread's exit, the end of a
   large free.  The thread is made with every signal blocked, so that
   it never runs a handler of the program's, and exits once the free
   units resident are down to KP_DIRTY_KEEP and the shared level is
   empty: a program that needs to be single-threaded for a moment
   (unshare, some sandboxes) is so again once it is idle, and one that
   never frees much never has the thread at all.

   kp_purge_state: KP_PURGE_NONE (no thread), KP_PURGE_RUNNING (one
   thread, or one being made), KP_PURGE_OFF (the setting or the decay
   is off).  Written by a CAS from NONE to RUNNING by the poller that
   makes the thread, and by the thread itself when it leaves (seq_cst
   store, then a seq_cst look at the work: a poller that added work
   after that look sees NONE, and one that added it before is seen by
   the look); read relaxed by the pollers.  The counters are written by
   the thread only (relaxed), read by the statistics.  kp_purge_lock is
   held by the thread for each pass and by fork's prepare handler, so
   that a child is never forked in the middle of a pass (a unit the pass
   holds claimed for the moment would stay claimed in the child).  */

#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "kp_internal.h"

_Atomic (int) kp_purge_state;

static _Atomic (const kp_purge_upper_t *) kp_purge_upper[KP_PURGE_UPPERS];
static pthread_mutex_t kp_purge_lock = PTHREAD_MUTEX_INITIALIZER;
/* The decay clock before which a failed start is not tried again.  */
static _Atomic (uint32_t) kp_purge_retry;
static _Atomic (bool) kp_purge_failed;
static struct
{
  _Atomic (size_t) passes, calls, pages, starts;
} kp_purge_counts;

/* The shortest period of the thread, for a decay delay of 0.  */
#define KP_PURGE_MIN_MS 10
/* How long after a failed start the next poll may try again.  */
#define KP_PURGE_RETRY_MS 1000

void
kp_purge_register (unsigned slot, const kp_purge_upper_t *upper)
{
  atomic_store_explicit (&kp_purge_upper[slot], upper, memory_order_release);
}

/* Whether there is memory that a tick may give back.  */
static bool
kp_purge_has_work (void)
{
  if (kp_dirty_bytes_to_give () > KP_DIRTY_KEEP)
    return true;
  for (unsigned i = 0; i < KP_PURGE_UPPERS; i++)
    {
      const kp_purge_upper_t *u = atomic_load_explicit (&kp_purge_upper[i],
                                                        memory_order_acquire);
      if (u != NULL && u->held () != 0)
        return true;
    }
  return false;
}

static void
kp_purge_add (_Atomic (size_t) *counter, size_t n)
{
  atomic_store_explicit (counter,
                         atomic_load_explicit (counter, memory_order_relaxed)
                         + n, memory_order_relaxed);
}

/* One tick: the decays, as a heap's pass makes them.  */
static void
kp_purge_pass (uint32_t delay)
{
  pthread_mutex_lock (&kp_purge_lock);
  uint32_t now = kp_clock_ms ();
  size_t calls = 0, pages = 0;
  /* The chunks first: an empty one they release joins the free units,
     whose decay comes next.  */
  for (unsigned i = 0; i < KP_PURGE_UPPERS; i++)
    {
      const kp_purge_upper_t *u = atomic_load_explicit (&kp_purge_upper[i],
                                                        memory_order_acquire);
      if (u != NULL)
        pages += u->decay (now, delay, &calls);
    }
  pages += kp_units_decay (now, delay, &calls);
  pthread_mutex_unlock (&kp_purge_lock);
  kp_purge_add (&kp_purge_counts.passes, 1);
  kp_purge_add (&kp_purge_counts.calls, calls);
  kp_purge_add (&kp_purge_counts.pages, pages);
}

static void *
kp_purge_main (void *arg)
{
  (void) arg;
  /* Its name in ps -L, top -H and /proc/PID/task/TID/comm.  */
  prctl (PR_SET_NAME, "kamepool-purge", 0, 0, 0);
  for (;;)
    {
      int delay = kp_setting (&kp_decay_ms);
      if (delay < 0)
        break;
      /* The free units' decay ticks KP_DECAY_STEPS times a delay.  */
      uint32_t period = (uint32_t) delay / KP_DECAY_STEPS;
      if (period < KP_PURGE_MIN_MS)
        period = KP_PURGE_MIN_MS;
      struct timespec ts = { period / 1000, (long) (period % 1000) * 1000000 };
      while (nanosleep (&ts, &ts) != 0 && errno == EINTR)
        ;
      kp_purge_pass ((uint32_t) delay);
      if (kp_purge_has_work ())
        continue;
      atomic_store_explicit (&kp_purge_state, KP_PURGE_NONE,
                             memory_order_seq_cst);
      int none = KP_PURGE_NONE;
      if (!kp_purge_has_work ()
          || !atomic_compare_exchange_strong_explicit
                (&kp_purge_state, &none, KP_PURGE_RUNNING,
                 memory_order_seq_cst, memory_order_relaxed))
        return NULL;
    }
  atomic_store_explicit (&kp_purge_state, KP_PURGE_OFF, memory_order_seq_cst);
  return NULL;
}

void
kp_purge_start (void)
{
  if (!kp_setting (&kp_background_purge) || kp_setting (&kp_decay_ms) < 0)
    {
      atomic_store_explicit (&kp_purge_state, KP_PURGE_OFF,
                             memory_order_relaxed);
      return;
    }
  if (!kp_purge_has_work ())
    return;
  uint32_t now = kp_clock_ms ();
  if (atomic_load_explicit (&kp_purge_failed, memory_order_relaxed)
      && (int32_t) (now - atomic_load_explicit (&kp_purge_retry,
                                                memory_order_relaxed)) < 0)
    return;
  int none = KP_PURGE_NONE;
  if (!atomic_compare_exchange_strong_explicit (&kp_purge_state, &none,
                                                KP_PURGE_RUNNING,
                                                memory_order_seq_cst,
                                                memory_order_relaxed))
    return;
  int saved = errno;
  /* What pthread_create allocates for the new thread (its TLS vector)
     comes from the C library, not from this thread's chunks: with the
     dead heap and no active chunk, every malloc of this thread goes
     there until the heap is put back.  A block of ours would keep a
     chunk of this thread's live after its exit, for as long as the C
     library keeps the purge thread's stack.  */
  kp_heap_t *heap = kp_tc.heap;
  kp_chunk_t *active[KP_NCLASS];
  memcpy (active, kp_tc.active, sizeof active);
  for (unsigned i = 0; i < KP_NCLASS; i++)
    kp_tc.active[i] = &kp_empty_chunk;
  kp_tc.heap = &kp_heap_dead;
  pthread_attr_t attr;
  pthread_t t;
  sigset_t all, old;
  sigfillset (&all);
  int err = pthread_attr_init (&attr);
  if (err == 0)
    {
      pthread_attr_setdetachstate (&attr, PTHREAD_CREATE_DETACHED);
      pthread_sigmask (SIG_SETMASK, &all, &old);
      err = pthread_create (&t, &attr, kp_purge_main, NULL);
      pthread_sigmask (SIG_SETMASK, &old, NULL);
      pthread_attr_destroy (&attr);
    }
  memcpy (kp_tc.active, active, sizeof active);
  kp_tc.heap = heap;
  if (err == 0)
    {
      atomic_store_explicit (&kp_purge_failed, false, memory_order_relaxed);
      kp_purge_add (&kp_purge_counts.starts, 1);
    }
  else
    {
      /* Quietly: the heaps' own passes still make the ticks.  */
      atomic_store_explicit (&kp_purge_retry, now + KP_PURGE_RETRY_MS,
                             memory_order_relaxed);
      atomic_store_explicit (&kp_purge_failed, true, memory_order_relaxed);
      atomic_store_explicit (&kp_purge_state, KP_PURGE_NONE,
                             memory_order_seq_cst);
    }
  errno = saved;
}

void
kp_purge_counts_read (kp_purge_stats_t *out)
{
  out->passes = atomic_load_explicit (&kp_purge_counts.passes,
                                      memory_order_relaxed);
  out->calls = atomic_load_explicit (&kp_purge_counts.calls,
                                     memory_order_relaxed);
  out->pages = atomic_load_explicit (&kp_purge_counts.pages,
                                     memory_order_relaxed);
  out->starts = atomic_load_explicit (&kp_purge_counts.starts,
                                      memory_order_relaxed);
  out->running = atomic_load_explicit (&kp_purge_state, memory_order_relaxed)
                 == KP_PURGE_RUNNING;
}

void
kp_purge_atfork_prepare (void)
{
  pthread_mutex_lock (&kp_purge_lock);
}

void
kp_purge_atfork_parent (void)
{
  pthread_mutex_unlock (&kp_purge_lock);
}

/* The child has no purge thread, whatever the parent had: the next
   poll makes one if there is work.  (Not under ThreadSanitizer, which
   cannot make threads in a child forked from a process with threads:
   there the child's heaps make the ticks, as with the setting off.)  */
void
kp_purge_atfork_child (void)
{
  pthread_mutex_unlock (&kp_purge_lock);
#ifdef __SANITIZE_THREAD__
  atomic_store_explicit (&kp_purge_state, KP_PURGE_OFF, memory_order_relaxed);
#else
  int state = atomic_load_explicit (&kp_purge_state, memory_order_relaxed);
  if (state == KP_PURGE_RUNNING)
    atomic_store_explicit (&kp_purge_state, KP_PURGE_NONE,
                           memory_order_relaxed);
#endif
}
