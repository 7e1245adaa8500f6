/* fork.c -- kamepool.fork tests: a child forked while other threads
   allocate, or from a signal handler that interrupted an allocation,
   can allocate and free.  Only the kame_pool_* API is used, so these
   run in the sanitizer builds too.
   The children of the forks from a signal handler run inside it and
   allocate there, which is what the last case tests, and a child forked
   while its thread had set the dead heap (kp_purge_start, around
   pthread_create) is served by the C library's malloc, as is the
   start of ThreadSanitizer's own thread in a child: ThreadSanitizer
   reports each such call as unsafe in a signal handler and ends the
   child with status 66, so those reports are off; its other reports
   stay on.
   kptest-env: TSAN_OPTIONS=report_signal_unsafe=0

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/time.h>
#include <time.h>

#include "kame_pool.h"
#include "kptest.h"

#define KIB ((size_t) 1024)

/* A child that does not finish in this many seconds is hung.  */
enum { CHILD_SECONDS = 20 };


static uint64_t
next_random (uint64_t *s)
{
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* Allocate, check and free N blocks of mixed sizes; the child's whole
   job.  Returns an exit status: 0 for success.  */
static int
child_work (unsigned n, uint64_t seed)
{
  enum { WINDOW = 256 };
  void *p[WINDOW] = { 0 };
  size_t len[WINDOW] = { 0 };
  for (unsigned i = 0; i < n; i++)
    {
      unsigned k = i % WINDOW;
      if (p[k] != NULL)
        {
          if (!kt_painted (p[k], len[k], k))
            return 3;
          kame_pool_free (p[k]);
        }
      uint64_t r = next_random (&seed);
      len[k] = r % 64 == 0 ? 40 * KIB + r % (200 * KIB) : 1 + r % 3000;
      p[k] = kame_pool_malloc (len[k]);
      if (p[k] == NULL)
        return 2;
      kt_paint (p[k], len[k], k);
    }
  for (unsigned k = 0; k < WINDOW; k++)
    if (p[k] != NULL)
      {
        if (!kt_painted (p[k], len[k], k))
          return 3;
        kame_pool_free (p[k]);
      }
  return 0;
}

/* Wait for PID at most CHILD_SECONDS; kill it if it hangs.  Only
   async-signal-safe calls: it also runs in a signal handler.  Returns
   the wait status, or -1 if the child hung.  */
static int
wait_child (pid_t pid)
{
  struct timespec tick = { 0, 1000000 };
  for (long waited = 0; waited < CHILD_SECONDS * 1000L; waited++)
    {
      int status;
      pid_t r = waitpid (pid, &status, WNOHANG);
      if (r == pid)
        return status;
      if (r < 0 && errno != EINTR)
        return -2;
      nanosleep (&tick, NULL);
    }
  kill (pid, SIGKILL);
  waitpid (pid, NULL, 0);
  return -1;
}

/* ---- Fork while two threads allocate ---------------------------------- */

static atomic_int stop_allocating;
static atomic_long allocations;

static void *
allocator_thread (void *arg)
{
  uint64_t seed = 0x9e3779b97f4a7c15u + (uintptr_t) arg;
  enum { WINDOW = 128 };
  void *p[WINDOW] = { 0 };
  size_t len[WINDOW] = { 0 };
  for (unsigned i = 0; !atomic_load_explicit (&stop_allocating,
                                              memory_order_relaxed); i++)
    {
      unsigned k = i % WINDOW;
      if (p[k] != NULL)
        {
          if (!kt_painted (p[k], len[k] < 32 ? len[k] : 32, k))
            return "block corrupted";
          kame_pool_free (p[k]);
        }
      uint64_t r = next_random (&seed);
      len[k] = r % 128 == 0 ? 40 * KIB + r % (1024 * KIB) : 1 + r % 5000;
      p[k] = kame_pool_malloc (len[k]);
      if (p[k] == NULL)
        return "malloc failed";
      kt_paint (p[k], len[k] < 32 ? len[k] : 32, k);
      atomic_fetch_add_explicit (&allocations, 1, memory_order_relaxed);
    }
  for (unsigned k = 0; k < WINDOW; k++)
    kame_pool_free (p[k]);
  return NULL;
}

KT_TEST (fork_while_2_threads_allocate_leaves_working_children)
{
  pthread_t t[2];
  for (uintptr_t i = 0; i < 2; i++)
    KT_CHECK_EQ (pthread_create (&t[i], NULL, allocator_thread,
                                 (void *) i), 0);
  int failed = 0, status = 0;
  for (int f = 0; f < 50 && !failed; f++)
    {
      /* Let the threads get going, so that the fork lands mid-call.  */
      long seen = atomic_load (&allocations);
      while (atomic_load (&allocations) < seen + 2000)
        sched_yield ();
      pid_t pid = fork ();
      if (pid < 0)
        {
          failed = errno;
          break;
        }
      if (pid == 0)
        _exit (child_work (10000, (uint64_t) f + 1));
      status = wait_child (pid);
      if (status < 0 || !WIFEXITED (status) || WEXITSTATUS (status) != 0)
        failed = f + 1;
    }
  atomic_store (&stop_allocating, 1);
  void *ret[2];
  for (int i = 0; i < 2; i++)
    KT_CHECK_EQ (pthread_join (t[i], &ret[i]), 0);
  if (failed)
    KT_FAILF ("fork %d: child status %#x (-1: hung, 2: malloc failed, "
              "3: corruption)", failed, (unsigned) status);
  KT_CHECK (ret[0] == NULL && ret[1] == NULL);
}

/* ---- The forking thread's own blocks ----------------------------------- */

KT_TEST (child_frees_and_reuses_blocks_allocated_before_fork)
{
  enum { N = 2000 };
  static void *p[N];
  for (unsigned i = 0; i < N; i++)
    {
      size_t n = 1 + i * 37 % 9000;
      p[i] = kame_pool_malloc (n);
      KT_CHECK (p[i] != NULL);
      kt_paint (p[i], n, i);
    }
  pid_t pid = fork ();
  KT_CHECK (pid >= 0);
  if (pid == 0)
    {
      for (unsigned i = 0; i < N; i++)
        {
          size_t n = 1 + i * 37 % 9000;
          if (!kt_painted (p[i], n, i))
            _exit (3);
          kame_pool_free (p[i]);
        }
      _exit (child_work (10000, 7));
    }
  int status = wait_child (pid);
  if (status < 0 || !WIFEXITED (status) || WEXITSTATUS (status) != 0)
    KT_FAILF ("child status %#x (-1: hung, 2: malloc failed, 3: "
              "corruption)", (unsigned) status);
  /* The parent's copies are untouched by the child.  */
  for (unsigned i = 0; i < N; i++)
    {
      KT_CHECK (kt_painted (p[i], 1 + i * 37 % 9000, i));
      kame_pool_free (p[i]);
    }
}

/* ---- Fork from a signal handler ---------------------------------------- */

enum { HANDLER_FORKS = 200, IN_MALLOC_WANTED = 10 };
static volatile sig_atomic_t in_malloc;
static volatile sig_atomic_t forks_done, forks_in_malloc, fork_failures;
static volatile sig_atomic_t last_bad_status;

static void
fork_in_handler (int sig)
{
  (void) sig;
  int saved = errno;
  if (forks_done >= HANDLER_FORKS || forks_in_malloc >= IN_MALLOC_WANTED)
    {
      errno = saved;
      return;
    }
  int interrupted = in_malloc;
  pid_t pid = fork ();
  if (pid == 0)
    _exit (child_work (2000, (uint64_t) forks_done + 11));
  forks_done++;
  int status = pid < 0 ? -3 : wait_child (pid);
  if (status < 0 || !WIFEXITED (status) || WEXITSTATUS (status) != 0)
    {
      fork_failures++;
      last_bad_status = status;
    }
  else if (interrupted)
    forks_in_malloc++;
  errno = saved;
}

KT_TEST (fork_in_handler_interrupting_malloc_leaves_working_child)
{
  struct sigaction sa;
  memset (&sa, 0, sizeof sa);
  sa.sa_handler = fork_in_handler;
  sigemptyset (&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  KT_CHECK_EQ (sigaction (SIGPROF, &sa, NULL), 0);
  /* CPU-time timer: it fires while this thread computes, which is
     mostly inside kame_pool_malloc and kame_pool_free below.  */
  struct itimerval it = { { 0, 1000 }, { 0, 1000 } };
  KT_CHECK_EQ (setitimer (ITIMER_PROF, &it, NULL), 0);

  enum { WINDOW = 64 };
  void *p[WINDOW] = { 0 };
  size_t len[WINDOW] = { 0 };
  uint64_t seed = 12345;
  time_t start = time (NULL);
  for (unsigned i = 0;
       forks_done < HANDLER_FORKS && forks_in_malloc < IN_MALLOC_WANTED
       && time (NULL) - start < 60; i++)
    {
      unsigned k = i % WINDOW;
      if (p[k] != NULL)
        {
          KT_CHECK (kt_painted (p[k], len[k] < 8 ? len[k] : 8, k));
          in_malloc = 1;
          kame_pool_free (p[k]);
          in_malloc = 0;
        }
      uint64_t r = next_random (&seed);
      len[k] = r % 256 == 0 ? 40 * KIB + r % (300 * KIB) : 1 + r % 2000;
      in_malloc = 1;
      p[k] = kame_pool_malloc (len[k]);
      in_malloc = 0;
      KT_CHECK (p[k] != NULL);
      kt_paint (p[k], len[k] < 8 ? len[k] : 8, k);
    }
  struct itimerval off = { { 0, 0 }, { 0, 0 } };
  setitimer (ITIMER_PROF, &off, NULL);
  for (unsigned k = 0; k < WINDOW; k++)
    kame_pool_free (p[k]);
  if (fork_failures != 0)
    KT_FAILF ("%d of %d children failed; last status %#x (-1: hung, 2: "
              "malloc failed, 3: corruption)", (int) fork_failures,
              (int) forks_done, (unsigned) last_bad_status);
  if (forks_in_malloc < IN_MALLOC_WANTED)
    KT_FAILF ("only %d of %d forks interrupted an allocation",
              (int) forks_in_malloc, (int) forks_done);
}

KT_MAIN (KT_CASE (fork_while_2_threads_allocate_leaves_working_children),
         KT_CASE (child_frees_and_reuses_blocks_allocated_before_fork),
         KT_CASE (fork_in_handler_interrupting_malloc_leaves_working_child))
