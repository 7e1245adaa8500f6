/* purge.c -- kamepool.threads tests of the background purge: the
   memory a program frees goes back to the kernel once it has stayed
   unused for the decay's delay, with no allocation at all after the
   frees (the free units of released chunks, and the free pages of the
   chunks a thread sheds when it frees a working set); a steady cycle
   over a working set gives back nothing and faults nothing after its
   first round; the thread is gone once there is nothing left, is made
   again in a forked child, and a process that cannot make threads
   goes on without it.  The delay is a second, so that what the tests
   see before it (the units kept at a release, a steady cycle's rounds)
   does not depend on how fast a loaded machine or a sanitizer's build
   runs them.  Guarded sampling is off: a guarded block faults its
   pages in at its malloc and gives them back at its free, which a
   steady cycle that samples one would count.
   kptest-env: KAME_POOL_DECAY_MS=1000 KAME_POOL_GUARD_SAMPLE=0

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#ifdef __linux__
# include <linux/filter.h>
# include <linux/seccomp.h>
# include <sys/prctl.h>
# include <sys/syscall.h>
#endif

#include "kame_pool.h"
#include "kptest.h"
#include "kptest-pool.h"

#define KIB ((size_t) 1024)
#define UNIT (256 * KIB)
#define KEEP (1024 * KIB)       /* what the free units' decay keeps */
#define SIZE ((size_t) 4096)    /* 64 blocks to a one-unit chunk */
#define PER_UNIT (UNIT / SIZE)
#define UNITS 16
/* How long a test waits for the purge at most: many delays, for a
   loaded machine or a sanitizer's build.  Not a bound on speed: the
   tests assert what was given back, never how fast.  */
#define WAIT_MS 10000

static void *units[UNITS];

static void
sleep_ms (long ms)
{
  struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
  while (nanosleep (&ts, &ts) != 0)
    ;
}

/* The purge threads of this process: those named kamepool-purge in
   /proc/self/task (a sanitizer's own threads do not count).  Read with
   system calls into buffers on the stack: opendir's buffer is a block
   of 32 KiB, whose malloc may take a refill, which starts the purge
   thread when free units wait, and the count would see the thread its
   own reading made.  */
static long
purge_threads (void)
{
  int d = open ("/proc/self/task", O_RDONLY | O_DIRECTORY);
  if (d < 0)
    return -1;
  long n = 0;
  char buf[4096];
  long got;
  while ((got = syscall (SYS_getdents64, d, buf, sizeof buf)) > 0)
    for (long off = 0; off < got;)
      {
        struct linux_dirent64
        {
          uint64_t ino;
          int64_t off;
          unsigned short reclen;
          unsigned char type;
          char name[];
        } *e = (struct linux_dirent64 *) (buf + off);
        off += e->reclen;
        char path[300], name[32] = "";
        if (e->name[0] == '.')
          continue;
        snprintf (path, sizeof path, "/proc/self/task/%s/comm", e->name);
        int f = open (path, O_RDONLY);
        if (f < 0)
          continue;
        ssize_t len = read (f, name, sizeof name - 1);
        close (f);
        if (len <= 0)
          continue;
        name[len] = '\0';
        if (strcmp (name, "kamepool-purge\n") == 0)
          n++;
      }
  close (d);
  return n;
}

/* Wait until N purge threads run (the thread names itself as it
   starts); false after WAIT_MS.  */
static bool
wait_for_purge_threads (long n)
{
  for (long t = 0; t < WAIT_MS; t += 10)
    {
      if (purge_threads () == n)
        return true;
      sleep_ms (10);
    }
  return false;
}

/* Fill UNITS one-unit chunks, write every page, free it all and exit:
   the chunks are released as they empty, and at the exit.  */
static void *
fill_and_free (void *arg)
{
  static void *p[UNITS * PER_UNIT];
  (void) arg;
  for (size_t i = 0; i < UNITS * PER_UNIT; i++)
    {
      if ((p[i] = kame_pool_malloc (SIZE)) == NULL)
        return "malloc failed";
      memset (p[i], 0x3c, SIZE);
    }
  for (size_t u = 0; u < UNITS; u++)
    units[u] = (void *) ((uintptr_t) p[u * PER_UNIT]
                         & ~(uintptr_t) (UNIT - 1));
  for (size_t i = 0; i < UNITS * PER_UNIT; i++)
    kame_pool_free (p[i]);
  return NULL;
}

static bool
run_thread (void *(*fn) (void *))
{
  pthread_t t;
  void *ret;
  return pthread_create (&t, NULL, fn, NULL) == 0
         && pthread_join (t, &ret) == 0 && ret == NULL;
}

/* How many of the UNITS units still have a resident page.  */
static size_t
resident_units (void)
{
  size_t n = 0;
  for (size_t u = 0; u < UNITS; u++)
    n += kt_resident_count (units[u], UNIT) != 0;
  return n;
}

/* Wait, allocating nothing, until the free units are down to what the
   decay keeps; false after WAIT_MS.  */
static bool
wait_for_free_units (size_t bytes)
{
  for (long t = 0; t < WAIT_MS; t += 10)
    {
      if (kt_pool_stats ().dirty_bytes <= bytes)
        return true;
      sleep_ms (10);
    }
  return false;
}

/* The bytes of free units the decay leaves, DIRTY, are what it keeps:
   1 MiB, KEEP; with huge page advice on (configure --enable-hugepage,
   KAME_POOL_HUGEPAGE=1) it gives back only whole huge pages with no
   unit claimed, so it leaves at most that, and none or more when the
   units' huge pages hold claimed units of other chunks or not (the
   layout of the start-up's chunks decides).  */
static bool
kept_as_the_decay_keeps (size_t dirty)
{
  if (kame_pool_get_thp_policy () == KAME_POOL_THP_ALWAYS)
    return dirty <= KEEP;
  return dirty == KEEP;
}

/* The 16 units an exited thread released stay resident, counted among
   the free units; with no allocation at all from then on, the
   background purge gives 12 of them back, down to the 1 MiB that the
   decay keeps.  */
KT_TEST (free_units_go_back_after_the_delay_with_no_allocation)
{
  KT_CHECK (kame_pool_trim (0) >= 0);
  KT_CHECK_EQ (kt_pool_stats ().dirty_bytes, 0);
  kame_pool_stats_t before = kt_pool_stats ();
  KT_CHECK (run_thread (fill_and_free));
  KT_CHECK_EQ (kt_pool_stats ().dirty_bytes, UNITS * UNIT);
  if (!wait_for_free_units (KEEP))
    KT_FAILF ("%zu bytes of free units still resident",
              kt_pool_stats ().dirty_bytes);
  /* Its last pass over, the thread leaves: its counts are final.  */
  for (long t = 0; t < WAIT_MS && kt_pool_stats ().background_running;
       t += 10)
    sleep_ms (10);
  kame_pool_stats_t after = kt_pool_stats ();
  KT_CHECK_EQ (after.background_running, 0);
  KT_CHECK (kept_as_the_decay_keeps (after.dirty_bytes));
  KT_CHECK_EQ (resident_units (), after.dirty_bytes / UNIT);
  KT_CHECK (after.background_starts > before.background_starts);
  KT_CHECK (after.background_passes > before.background_passes);
  KT_CHECK (after.background_pages - before.background_pages
            >= (UNITS - KEEP / UNIT) * PER_UNIT);
  KT_CHECK (after.discard_pages - before.discard_pages
            >= (UNITS - KEEP / UNIT) * PER_UNIT);
}

/* Once nothing is left to give back, the thread exits: the process has
   one thread again.  */
KT_TEST (the_purge_thread_exits_when_nothing_is_left)
{
  KT_CHECK (kame_pool_trim (0) >= 0);
  KT_CHECK (run_thread (fill_and_free));
  KT_CHECK_EQ (kt_pool_stats ().background_running, 1);
  long t = 0;
  KT_CHECK (wait_for_purge_threads (1));
  while (t < WAIT_MS && (kt_pool_stats ().background_running != 0
                         || purge_threads () != 0))
    {
      sleep_ms (10);
      t += 10;
    }
  KT_CHECK_EQ (kt_pool_stats ().background_running, 0);
  KT_CHECK_EQ (purge_threads (), 0);
  KT_CHECK (kept_as_the_decay_keeps (kt_pool_stats ().dirty_bytes));
}

/* ---- A working set freed but for every 64th block ------------------- */

#define BLK ((size_t) 1024)     /* 4 blocks to a page, 256 to a chunk */
#define NBLK (32 * 256)

/* This thread, which stays alive and idle, frees all but every 64th of
   8192 blocks in the order it allocated them: past 16 chunks freed into
   with no refill it hands over every chunk of the class with free
   blocks, its active chunk and the chunks it frees into later
   included, and the background purge gives back every page of theirs
   that holds no live block.  One chunk keeps all its pages: the last
   one, which the thread's frees into it took back (kp_chunk_shed says
   why it does).  Two did when the thread kept its active chunk and
   the newest on its partial list.  */
KT_TEST (a_freed_working_set_goes_back_but_its_live_pages)
{
  static char *p[NBLK];
  for (size_t i = 0; i < NBLK; i++)
    {
      if ((p[i] = kame_pool_malloc (BLK)) == NULL)
        KT_FAILF ("malloc %zu failed", i);
      memset (p[i], 0x5a, BLK);
    }
  for (size_t i = 0; i < NBLK; i++)
    if (i % 64 != 0)
      kame_pool_free (p[i]);
  /* The chunks, and the pages of each that hold a live block.  */
  enum { CHUNKS = 40 };
  uintptr_t base[CHUNKS];
  size_t live_pages[CHUNKS], nchunks = 0;
  for (size_t i = 0; i < NBLK; i++)
    {
      uintptr_t b = (uintptr_t) p[i] & ~(uintptr_t) (UNIT - 1);
      size_t k = 0;
      while (k < nchunks && base[k] != b)
        k++;
      if (k == nchunks)
        {
          if (nchunks == CHUNKS)
            KT_FAILF ("more than %d chunks", CHUNKS);
          base[nchunks] = b;
          live_pages[nchunks++] = 0;
        }
      if (i % 64 == 0)
        live_pages[k]++;        /* 64 blocks apart: never one page */
    }
  size_t whole = 0, purged = 0;
  for (long t = 0; t < WAIT_MS; t += 10)
    {
      whole = purged = 0;
      for (size_t k = 0; k < nchunks; k++)
        {
          size_t r = kt_resident_count ((void *) base[k], UNIT);
          if (r == live_pages[k])
            purged++;
          else
            whole++;
        }
      if (whole <= 1)
        break;
      sleep_ms (10);
    }
  if (whole != 1)
    KT_FAILF ("%zu of %zu chunks keep pages with no live block", whole,
              nchunks);
  KT_CHECK_EQ (purged, nchunks - 1);
  for (size_t i = 0; i < NBLK; i += 64)
    for (size_t j = 0; j < BLK; j++)
      if (p[i][j] != 0x5a)
        KT_FAILF ("block %zu changed at byte %zu", i, j);
  for (size_t i = 0; i < NBLK; i += 64)
    kame_pool_free (p[i]);
}

/* ---- A steady workload ------------------------------------------------- */

/* Round after round, allocate a working set of blocks of 64 to 4096
   bytes and free it all: from the third round on, nothing is given
   back and no page is faulted in, in any thread, the purge's included
   (the faults where they can be counted: see count_faults).
   (The second round still faults a few pages in: a chunk that takes a
   free unit another class left may carve further than that class did;
   the unit keeps those pages from then on.)  */
KT_TEST (a_steady_cycle_gives_back_nothing_and_faults_nothing)
{
  static void *p[4096];
  /* Faults are counted only where the process makes them all: not
     under a sanitizer, whose runtime faults its shadow memory in, nor
     with huge page advice, where the kernel's compaction and khugepaged
     unmap and fault pages on their own.  */
  bool count_faults = kt_pool_interposes ()
                      && kame_pool_get_thp_policy () != KAME_POOL_THP_ALWAYS;
  kt_steady_cycle (p, 4096, 10, 2, count_faults);
}

/* ---- fork ------------------------------------------------------------- */

/* A child forked while the parent's purge thread runs has no purge
   thread, and makes its own for what it frees; the parent's goes on.  */
KT_TEST (a_forked_child_makes_its_own_purge_thread)
{
#ifdef __SANITIZE_THREAD__
  KT_UNSUPPORTED ("ThreadSanitizer cannot make threads in a child forked "
                  "from a process with threads");
#endif
  KT_CHECK (kame_pool_trim (0) >= 0);
  KT_CHECK (run_thread (fill_and_free));
  KT_CHECK_EQ (kt_pool_stats ().background_running, 1);
  KT_CHECK (wait_for_purge_threads (1));
  pid_t pid = fork ();
  KT_CHECK (pid >= 0);
  if (pid == 0)
    {
      kame_pool_stats_t s = kt_pool_stats ();
      int bad = s.background_running != 0 || purge_threads () != 0;
      /* The units the parent freed are free in the child too: the
         child's next release makes its own thread for them.  */
      bad |= !run_thread (fill_and_free);
      bad |= !wait_for_free_units (KEEP) << 1;
      bad |= (kt_pool_stats ().background_starts <= s.background_starts) << 2;
      _exit (bad);
    }
  int status;
  KT_CHECK_EQ (waitpid (pid, &status, 0), pid);
  KT_CHECK (WIFEXITED (status));
  KT_CHECK_EQ (WEXITSTATUS (status), 0);
  if (!wait_for_free_units (KEEP))
    KT_FAILF ("%zu bytes of free units still resident in the parent",
              kt_pool_stats ().dirty_bytes);
}

/* ---- No threads -------------------------------------------------------- */

#ifdef __linux__
/* Forbid clone and clone3 (EAGAIN) to this process from now on.  */
static bool
forbid_threads (void)
{
  struct sock_filter filter[] = {
    BPF_STMT (BPF_LD | BPF_W | BPF_ABS, offsetof (struct seccomp_data, nr)),
    BPF_JUMP (BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 2, 0),
#ifdef __NR_clone3
    BPF_JUMP (BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 1, 0),
#else
    BPF_JUMP (BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 1, 0),
#endif
    BPF_STMT (BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    BPF_STMT (BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EAGAIN),
  };
  struct sock_fprog prog = { sizeof filter / sizeof filter[0], filter };
  return prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
         && prctl (PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}
#endif

/* A process that may not make threads (a sandbox) frees a working set:
   the purge thread cannot be made, and the process goes on as before,
   with nothing on stderr; the memory stays usable.  */
KT_TEST (a_process_that_cannot_make_threads_goes_on_without_the_purge)
{
#ifdef __linux__
  if (!forbid_threads ())
    KT_UNSUPPORTED ("no seccomp filter: %s", strerror (errno));
#else
  KT_UNSUPPORTED ("no seccomp on this system");
#endif
  int err[2];
  KT_CHECK (pipe (err) == 0);
  int saved = dup (2);
  KT_CHECK (dup2 (err[1], 2) == 2);
  static void *p[UNITS * PER_UNIT];
  for (int round = 0; round < 3; round++)
    {
      for (size_t i = 0; i < UNITS * PER_UNIT; i++)
        if ((p[i] = kame_pool_malloc (SIZE)) == NULL)
          KT_FAILF ("round %d: malloc failed", round);
      for (size_t i = 0; i < UNITS * PER_UNIT; i++)
        kame_pool_free (p[i]);
      sleep_ms (50);
    }
  dup2 (saved, 2);
  close (err[1]);
  char buf[256];
  ssize_t n = read (err[0], buf, sizeof buf - 1);
  if (n > 0)
    {
      buf[n] = '\0';
      KT_FAILF ("stderr: %s", buf);
    }
  kame_pool_stats_t s = kt_pool_stats ();
  KT_CHECK_EQ (s.background_starts, 0);
  KT_CHECK_EQ (s.background_running, 0);
  KT_CHECK_EQ (purge_threads (), 0);
}

KT_MAIN (KT_CASE (free_units_go_back_after_the_delay_with_no_allocation),
         KT_CASE (the_purge_thread_exits_when_nothing_is_left),
         KT_CASE (a_freed_working_set_goes_back_but_its_live_pages),
         KT_CASE (a_steady_cycle_gives_back_nothing_and_faults_nothing),
         KT_CASE (a_forked_child_makes_its_own_purge_thread),
         KT_CASE (a_process_that_cannot_make_threads_goes_on_without_the_purge))
