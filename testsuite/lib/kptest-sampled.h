/* kptest-sampled.h -- the workloads that the tests of both samplers,
   the heap profile (kamepool.prof) and guarded sampling
   (kamepool.guard), run on sampled blocks, each in its program run
   again with every block sampled.  Include after kame_pool.h, kptest.h
   and kptest-pool.h.  Copyright (C) 2026 The kamepool authors;
   LGPL-2.1+.  */

#ifndef KPTEST_SAMPLED_H
#define KPTEST_SAMPLED_H 1

#include <malloc.h>
#include <signal.h>
#include <sys/time.h>
#include <sys/wait.h>

/* ---- Every call of the malloc family on sampled blocks ---------------- */

/* With every block sampled: a block of N bytes (its usable size U is N
   rounded up to 16), its usable size from kame_pool_malloc_usable_size
   and, where malloc is the pool's, from malloc_usable_size; realloc in
   place to 50 bytes, then out of place to 5555 bytes (the contents
   kept, the usable size 5568, a byte written past 5555); free_sized;
   calloc's zeros; aligned_alloc and posix_memalign.  What it prints
   when all is well:

     usable U
     malloc_usable_size U
     shrunk in place 1
     grown 1, kept 1, usable 5568
     calloc zero 1
     aligned 1 1

   Where malloc is not the pool's (a sanitizer build), the second line
   repeats the pool's figure.  */
static __attribute__ ((__unused__)) void
kt_sampled_family (size_t n)
{
  char *p = kame_pool_malloc (n);
  if (p == NULL)
    {
      printf ("malloc failed\n");
      return;
    }
  memset (p, 7, n);
  size_t usable = kame_pool_malloc_usable_size (p);
  printf ("usable %zu\n", usable);
  printf ("malloc_usable_size %zu\n",
          kt_pool_interposes () ? malloc_usable_size (p) : usable);
  printf ("shrunk in place %d\n", kame_pool_realloc (p, 50) == p);
  char *q = kame_pool_realloc (p, 5555);
  if (q == NULL)
    {
      printf ("realloc failed\n");
      return;
    }
  printf ("grown %d, kept %d, usable %zu\n", q != p,
          q[0] == 7 && q[49] == 7, kame_pool_malloc_usable_size (q));
  char *volatile within = q + 5555;
  *within = 1;                  /* within the usable size, 5568 */
  kame_pool_free_sized (q, 5555);
  int *z = kame_pool_calloc (1000, sizeof *z);
  int sum = z == NULL;
  for (int i = 0; z != NULL && i < 1000; i++)
    sum += z[i];
  printf ("calloc zero %d\n", sum == 0);
  kame_pool_free (z);
  void *a = kame_pool_aligned_alloc (4096, 4096);
  void *b = NULL;
  int rc = kame_pool_posix_memalign (&b, 256, 700);
  printf ("aligned %d %d\n", a != NULL && ((uintptr_t) a & 4095) == 0,
          rc == 0 && ((uintptr_t) b & 255) == 0);
  if (a != NULL)
    memset (a, 1, 4096);
  if (b != NULL)
    memset (b, 1, 700);
  kame_pool_free (a);
  kame_pool_free (b);
}

/* ---- A fork from a signal handler that interrupted a sampled call ---- */

/* With every block sampled, a call of kt_sampled_fork_in_handler's
   loop spends much of its time holding its sampler's lock.  A CPU-time
   timer interrupts it; the handler forks, the child allocates and
   frees, and the handler waits for it.  The fork must not wait for the
   lock that the interrupted call holds: a process or a child that
   hangs is killed by its alarm.  The loop stops after
   KT_FORKS_IN_CALL forks that interrupted a call, or KT_HANDLER_FORKS
   forks in all, and prints "children failed F, forks in a call N".  */
enum
{
  KT_HANDLER_FORKS = 200, KT_FORKS_IN_CALL = 20,
  KT_PROCESS_SECONDS = 60, KT_CHILD_SECONDS = 20
};
static volatile sig_atomic_t kt_in_call __attribute__ ((__unused__));
static volatile sig_atomic_t kt_forks_done __attribute__ ((__unused__));
static volatile sig_atomic_t kt_forks_in_call __attribute__ ((__unused__));
static volatile sig_atomic_t kt_fork_failures __attribute__ ((__unused__));

static __attribute__ ((__unused__)) void
kt_fork_in_handler (int sig)
{
  (void) sig;
  int saved = errno;
  if (kt_forks_done < KT_HANDLER_FORKS
      && kt_forks_in_call < KT_FORKS_IN_CALL)
    {
      int interrupted = kt_in_call;
      pid_t pid = fork ();
      if (pid == 0)
        {
          alarm (KT_CHILD_SECONDS);
          for (int i = 0; i < 100; i++)
            {
              char *p = kame_pool_malloc (100 + (size_t) i);
              if (p == NULL)
                _exit (2);
              p[99] = 1;
              kame_pool_free (p);
            }
          _exit (0);
        }
      int status = 0;
      pid_t got = -1;
      if (pid > 0)
        while ((got = waitpid (pid, &status, 0)) < 0 && errno == EINTR)
          continue;
      kt_forks_done++;
      if (got != pid || !WIFEXITED (status) || WEXITSTATUS (status) != 0)
        kt_fork_failures++;
      else if (interrupted)
        kt_forks_in_call++;
    }
  errno = saved;
}

static __attribute__ ((__unused__)) void
kt_sampled_fork_in_handler (void)
{
  alarm (KT_PROCESS_SECONDS);
  struct sigaction sa;
  memset (&sa, 0, sizeof sa);
  sa.sa_handler = kt_fork_in_handler;
  sigemptyset (&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction (SIGPROF, &sa, NULL);
  /* It fires while this thread computes, mostly in the calls below.  */
  struct itimerval it = { { 0, 1000 }, { 0, 1000 } };
  setitimer (ITIMER_PROF, &it, NULL);
  static void *p[64];
  for (unsigned i = 0; kt_forks_done < KT_HANDLER_FORKS
                       && kt_forks_in_call < KT_FORKS_IN_CALL; i++)
    {
      unsigned k = i % 64;
      kt_in_call = 1;
      kame_pool_free (p[k]);
      p[k] = kame_pool_malloc (100 + i % 2000);
      kt_in_call = 0;
      if (p[k] == NULL)
        _exit (1);
    }
  struct itimerval off = { { 0, 0 }, { 0, 0 } };
  setitimer (ITIMER_PROF, &off, NULL);
  for (unsigned k = 0; k < 64; k++)
    kame_pool_free (p[k]);
  printf ("children failed %d, forks in a call %d\n", (int) kt_fork_failures,
          (int) kt_forks_in_call);
}

/* The last entry of the environment of kt_sampled_fork_in_handler's
   run, or NULL.  ThreadSanitizer's own handler of a fork's child
   starts its background thread, whose allocation it then reports as a
   call unsafe in the signal handler, and a child that writes such
   reports fills the pipe of the run's stderr, which kt_run_self reads
   after its stdout: TSAN_OPTIONS keeps those reports off, the options
   already set kept.  */
static __attribute__ ((__unused__)) const char *
kt_sampled_fork_env (void)
{
#ifdef __SANITIZE_THREAD__
  static char env[1024];
  const char *old = getenv ("TSAN_OPTIONS");
  snprintf (env, sizeof env, "TSAN_OPTIONS=%s%sreport_signal_unsafe=0",
            old != NULL ? old : "", old != NULL && *old != '\0' ? ":" : "");
  return env;
#else
  return NULL;
#endif
}

/* What is wrong with a run of kt_sampled_fork_in_handler that ended
   with STATUS and printed OUT, in WHY (SIZE bytes); false when
   nothing is.  */
static __attribute__ ((__unused__)) bool
kt_sampled_fork_failed (int status, const char *out, char *why, size_t size)
{
  char want[64];
  snprintf (want, sizeof want, "children failed 0, forks in a call %d\n",
            KT_FORKS_IN_CALL);
  if (WIFSIGNALED (status) && WTERMSIG (status) == SIGALRM)
    snprintf (why, size, "the process hung (killed by its alarm)");
  else if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    snprintf (why, size, "the process ended with status %#x",
              (unsigned) status);
  else if (strcmp (out, want) != 0)
    snprintf (why, size, "it printed \"%s\"", out);
  else
    return false;
  return true;
}

#endif /* KPTEST_SAMPLED_H */
