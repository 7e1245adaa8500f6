/* misuse.h -- the harness of the kamepool.misuse programs: each misuse
   runs in a child of its own whose stderr is a pipe; the parent checks
   what the child wrote there, byte for byte, and how it ended.

   The programs that include this define KM_REPORT first: 0 when
   KAME_POOL_ON_MISUSE is unset (the child must die of SIGABRT right
   after the report), 1 when it is "report" (the child must go on, and
   its heap must be as it was: no block handed out twice afterwards).
   The same scenario serves both: it tells the parent which pointer it
   is about to misuse (through a shared page), misuses it, and then
   checks the heap, which an aborting child never reaches.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#ifndef KAMEPOOL_MISUSE_H
#define KAMEPOOL_MISUSE_H 1

#ifndef _GNU_SOURCE
# define _GNU_SOURCE 1
#endif

#include <alloca.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include "config.h"             /* KP_HARDEN, KP_INTERPOSE */
#include "kame_pool.h"
#include "kptest.h"
#include "kptest-pool.h"

#ifndef KM_REPORT
# error "define KM_REPORT (0: abort, 1: KAME_POOL_ON_MISUSE=report) first"
#endif

/* A test's name says what the mode expects: NAME_aborts, or
   NAME_is_reported_and_ignored.  */
#if KM_REPORT
# define KM_NAME(n) n##_is_reported_and_ignored
#else
# define KM_NAME(n) n##_aborts
#endif
#define KM_TEST(n) KT_TEST (KM_NAME (n))
#define KM_CASE_(n) KT_CASE (n)
#define KM_CASE(n) KM_CASE_ (KM_NAME (n))
#ifndef KP_HARDEN
# define KP_HARDEN 1            /* a config.h older than --disable-hardening */
#endif
#ifdef KP_INTERPOSE             /* defined (to 1) or not */
# define KM_INTERPOSE 1
#else
# define KM_INTERPOSE 0
#endif

#define KIB ((size_t) 1024)
#define MIB (KIB * KIB)
#define REGION (32 * MIB)

/* What the child tells the parent: the pointer it misuses, and, when
   it exits with status KM_BROKEN, why.  A page shared across the fork,
   so that neither side needs the allocator under test to talk.  */
struct km_shared
{
  volatile uintptr_t ptr;
  volatile int misused;         /* the misusing call was made */
  char why[400];
};

static struct km_shared *km;

#define KM_BROKEN 10

/* Not every program uses every helper.  */
#define KM_UNUSED __attribute__ ((__unused__))

/* In the child: the heap is not as it should be; stop with KM_BROKEN.  */
#define KM_FAIL(...)                                                    \
  do {                                                                  \
    snprintf (km->why, sizeof km->why, __VA_ARGS__);                    \
    _exit (KM_BROKEN);                                                  \
  } while (0)

/* In the child, just before the misusing call: P is the pointer the
   report must name.  */
static KM_UNUSED inline void
km_misusing (const void *p)
{
  km->ptr = (uintptr_t) p;
  km->misused = 1;
}

/* Keep the compiler from reasoning about the contents of P (the blocks
   come from functions declared malloc-like).  */
#define KM_OPAQUE(p) __asm__ volatile ("" : "+r" (p) : : "memory")

/* Run FN in a child whose stderr is a pipe and which dumps no core.
   Its wait status in *STATUS, what it wrote to stderr in ERR.  */
static KM_UNUSED bool
km_run (void (*fn) (void), int *status, char *err, size_t size)
{
  if (km == NULL)
    {
      void *m = mmap (NULL, sizeof *km, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
      if (m == MAP_FAILED)
        return false;
      km = m;
    }
  memset (km, 0, sizeof *km);
  int fd[2];
  if (pipe (fd) != 0)
    return false;
  fflush (stdout);
  fflush (stderr);
  pid_t parent = getpid ();
  pid_t pid = fork ();
  if (pid < 0)
    {
      close (fd[0]);
      close (fd[1]);
      return false;
    }
  if (pid == 0)
    {
      close (fd[0]);
      dup2 (fd[1], 2);
      close (fd[1]);
      /* abort () is expected: no core file (a pipe in core_pattern
         ignores RLIMIT_CORE, the dumpable flag it does not).  */
      struct rlimit no_core = { 0, 0 };
      setrlimit (RLIMIT_CORE, &no_core);
      prctl (PR_SET_DUMPABLE, 0, 0, 0, 0);
      /* A scenario that hangs (a free list that loops) goes with the
         test when the test's alarm kills it.  */
      prctl (PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
      if (getppid () != parent)
        _exit (KM_BROKEN);
      /* The pool reads KAME_POOL_ON_MISUSE when it starts, at its first
         allocation: where malloc is not the pool's (a sanitizer build)
         a scenario's misuse could otherwise come first.  */
      kame_pool_free (kame_pool_malloc (1));
      fn ();
      _exit (0);
    }
  close (fd[1]);
  kt_read_all (fd[0], err, size);
  return kt_wait (pid, status);
}

/* Describe wait status S in BUF.  */
static KM_UNUSED const char *
km_status (int s, char *buf, size_t size)
{
  if (WIFSIGNALED (s))
    snprintf (buf, size, "killed by signal %d (%s)", WTERMSIG (s),
              strsignal (WTERMSIG (s)));
  else if (WIFEXITED (s) && WEXITSTATUS (s) == KM_BROKEN)
    snprintf (buf, size, "exited: %s", km->why);
  else
    snprintf (buf, size, "exited with status %d", WEXITSTATUS (s));
  return buf;
}

/* Run scenario FN in a child; its misuse must be reported with exactly
   the line "kamepool: CALL(): WHAT 0x<the pointer misused>" and nothing
   else on stderr; then (KM_REPORT 0) the child must die of SIGABRT, or
   (KM_REPORT 1) finish its checks of the heap and exit 0.  False, with
   the reason in MSG, otherwise.  */
static KM_UNUSED bool
km_expect (void (*fn) (void), const char *call, const char *what,
           char *msg, size_t size)
{
  static char err[4096];
  char st[512];
  int status;
  if (!km_run (fn, &status, err, sizeof err))
    {
      snprintf (msg, size, "fork or pipe failed: %s", strerror (errno));
      return false;
    }
  if (!km->misused)
    {
      snprintf (msg, size, "the child %s before its misuse; stderr \"%s\"",
                km_status (status, st, sizeof st), err);
      return false;
    }
  char want[256];
  snprintf (want, sizeof want, "kamepool: %s(): %s 0x%" PRIxPTR "\n", call,
            what, km->ptr);
  if (strcmp (err, want) != 0)
    {
      snprintf (msg, size, "stderr \"%s\", not \"%s\" (the child %s)", err,
                want, km_status (status, st, sizeof st));
      return false;
    }
  bool ok = KM_REPORT ? WIFEXITED (status) && WEXITSTATUS (status) == 0
                      : WIFSIGNALED (status) && WTERMSIG (status) == SIGABRT;
  if (!ok)
    {
      snprintf (msg, size, "the child %s, not %s",
                km_status (status, st, sizeof st),
                KM_REPORT ? "exited with status 0 (report only)"
                          : "killed by SIGABRT");
      return false;
    }
  return true;
}

/* Whether KAME_POOL_ON_MISUSE, read once at the pool's start, says
   what this program expects.  */
static KM_UNUSED bool
km_mode_as_expected (void)
{
  const char *v = getenv ("KAME_POOL_ON_MISUSE");
  if (KM_REPORT)
    return v != NULL && strcmp (v, "report") == 0;
  return v == NULL || *v == '\0' || strcmp (v, "abort") == 0;
}

/* The body of a test: scenario FN must report "CALL(): WHAT 0x...".  */
#define KM_EXPECT(fn, call, what)                                       \
  do {                                                                  \
    char km_msg_[1024];                                                 \
    if (!km_mode_as_expected ())                                        \
      KT_FAILF ("KAME_POOL_ON_MISUSE=%s in the environment",            \
                getenv ("KAME_POOL_ON_MISUSE"));                        \
    if (!km_expect (fn, call, what, km_msg_, sizeof km_msg_))           \
      KT_FAILF ("%s", km_msg_);                                         \
  } while (0)

/* The case is one of the checks on the fast paths, which configure
   --disable-hardening removes.  */
#define KM_NEEDS_HARDENING                                              \
  do {                                                                  \
    if (!KP_HARDEN)                                                     \
      KT_UNSUPPORTED ("a fast-path check, off in this build "           \
                      "(configure --disable-hardening)");               \
  } while (0)

/* The pool hands a pointer it cannot prove misused to the C library's
   free (or realloc, or malloc_usable_size): in a build that does not
   interpose malloc (a sanitizer build), that is the sanitizer's, whose
   runtime intercepts the misuse and has its own report.  */
#define KM_NEEDS_INTERPOSE(what)                                        \
  do {                                                                  \
    if (!KM_INTERPOSE || !kt_pool_interposes ())                        \
      KT_UNSUPPORTED ("malloc is not the pool's in this build: %s goes " \
                      "to the sanitizer's (or the C library's) "        \
                      "allocator, which reports it itself", what);      \
  } while (0)

/* ---- In the child ---------------------------------------------------- */

/* Run FN (ARG) in a thread of its own and wait for it.  */
static KM_UNUSED void
km_in_thread (void *(*fn) (void *), void *arg)
{
  pthread_t t;
  void *ret;
  if (pthread_create (&t, NULL, fn, arg) != 0)
    KM_FAIL ("pthread_create failed");
  if (pthread_join (t, &ret) != 0)
    KM_FAIL ("pthread_join failed");
  if (ret != NULL)
    KM_FAIL ("%s", (const char *) ret);
}

static KM_UNUSED void *
km_free_thread (void *p)
{
  kame_pool_free (p);
  return NULL;
}

struct km_range
{
  uintptr_t lo, hi;
};

static KM_UNUSED int
km_range_cmp (const void *a, const void *b)
{
  const struct km_range *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Memory the checks below keep their books in, from the kernel rather
   than the allocator under test.  */
static KM_UNUSED void *
km_scratch (size_t bytes)
{
  void *m = mmap (NULL, bytes, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED)
    KM_FAIL ("mmap of %zu scratch bytes failed", bytes);
  return m;
}

/* After a misuse was reported and ignored: N new blocks of SIZE bytes
   are writable, and none of them overlaps another or any of the NLIVE
   blocks in LIVE, which the scenario still holds.  A block handed out
   twice (a double free that got through, a free list that loops)
   fails this.  The new blocks are freed again.  */
static KM_UNUSED void
km_no_block_twice (size_t size, size_t n, void *const *live, size_t nlive)
{
  size_t total = n + nlive;
  struct km_range *r = km_scratch (total * sizeof *r);
  uintptr_t **blk = km_scratch (n * sizeof *blk);
  size_t words = size / sizeof (uintptr_t);
  for (size_t i = 0; i < n; i++)
    {
      blk[i] = kame_pool_malloc (size);
      if (blk[i] == NULL)
        KM_FAIL ("malloc (%zu) #%zu of %zu failed", size, i, n);
      size_t u = kame_pool_malloc_usable_size (blk[i]);
      if (u < size)
        KM_FAIL ("malloc (%zu) gave %p with %zu usable bytes", size,
                 (void *) blk[i], u);
      r[i].lo = (uintptr_t) blk[i];
      r[i].hi = (uintptr_t) blk[i] + u;
      /* Its first, middle and last words.  */
      blk[i][0] = ~(uintptr_t) i;
      blk[i][words / 2] = i * 3;
      blk[i][words - 1] = i;
    }
  for (size_t j = 0; j < nlive; j++)
    {
      size_t u = kame_pool_malloc_usable_size (live[j]);
      if (u == 0)
        KM_FAIL ("the live block %p has no usable size", live[j]);
      r[n + j].lo = (uintptr_t) live[j];
      r[n + j].hi = (uintptr_t) live[j] + u;
    }
  qsort (r, total, sizeof *r, km_range_cmp);
  for (size_t k = 1; k < total; k++)
    if (r[k].lo < r[k - 1].hi)
      KM_FAIL ("blocks overlap: [%#" PRIxPTR ", %#" PRIxPTR ") and [%#"
               PRIxPTR ", %#" PRIxPTR ")%s", r[k - 1].lo, r[k - 1].hi,
               r[k].lo, r[k].hi, r[k].lo == r[k - 1].lo
               ? ": one block handed out twice" : "");
  for (size_t i = 0; i < n; i++)
    if (blk[i][0] != ~(uintptr_t) i || blk[i][words / 2] != i * 3
        || blk[i][words - 1] != i)
      KM_FAIL ("block %zu of %zu (%p) was overwritten", i, n,
               (void *) blk[i]);
  for (size_t i = 0; i < n; i++)
    kame_pool_free (blk[i]);
  munmap (r, total * sizeof *r);
  munmap (blk, n * sizeof *blk);
}

/* A block of SIZE bytes, filled with a pattern of SEED.  */
static KM_UNUSED void *
km_block (size_t size, uintptr_t seed)
{
  void *p = kame_pool_malloc (size);
  if (p == NULL)
    KM_FAIL ("malloc (%zu) failed", size);
  kt_paint (p, size, seed);
  return p;
}

/* P, a live block of SIZE bytes painted with SEED, is unchanged.  */
static KM_UNUSED void
km_intact (const void *p, size_t size, uintptr_t seed)
{
  if (kame_pool_malloc_usable_size (p) < size)
    KM_FAIL ("the live block %p lost its usable size (%zu)", p,
             kame_pool_malloc_usable_size (p));
  if (!kt_painted (p, size, seed))
    KM_FAIL ("the live block %p was changed", p);
}

#endif /* KAMEPOOL_MISUSE_H */
