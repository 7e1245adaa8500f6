/* The heap profile (KAME_POOL_PROF): the sampling's statistics, the
   dump read back by google-pprof, the accuracy on a known workload,
   kame_pool_prof_dump's answers, threads, fork, and a program that
   closes stderr.  Each workload runs in this program run again with
   the profile's variables set (KP_PROF_CHILD names the workload); the
   test reads what it wrote.  Copyright (C) 2026 The kamepool authors;
   LGPL-2.1+.  */
/* kptest-options: -fno-optimize-sibling-calls -fno-inline -fno-ipa-icf -g -Wno-unused-function */
/* kptest-libs: -lm */

#define _GNU_SOURCE 1

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "kame_pool.h"
#include "kptest.h"
#include "kptest-pool.h"
#include "kptest-sampled.h"
#define KT_WORKDIR_TEMPLATE "/tmp/kptest-prof-XXXXXX"
#include "kptest-programs.h"

/* Make the scratch directory of the test, and remove it when the test
   returns, whichever way (a failed check returns early).  */
static void
workdir_cleanup (int *unused)
{
  (void) unused;
  remove_workdir ();
}
#define SCRATCH_DIR()                                                   \
  KT_CHECK (setup ());                                                  \
  __attribute__ ((cleanup (workdir_cleanup))) int scratch_ = 0;         \
  (void) scratch_

/* ---- The workloads, in the child ---------------------------------------- */

#define MIB ((size_t) 1 << 20)
static void *kept[200000];
static size_t nkept;

static void
keep (void *p)
{
  if (p == NULL)
    {
      printf ("out of memory\n");
      _exit (1);
    }
  kept[nkept++] = p;
}

/* Each call site is a function of its own, never inlined, merged with
   its identical twins nor a tail call (kptest-options above), so that
   its frame is on the stack.  */
static __attribute__ ((noinline, noclone)) void *
site_small (size_t n)
{
  return kame_pool_malloc (n);
}

static __attribute__ ((noinline, noclone)) void *
site_big (size_t n)
{
  return kame_pool_malloc (n);
}

/* Make a block of N bytes at SITE, write its last byte and free it,
   TIMES times: the madvise calls that gave pages back meanwhile.  */
static size_t
cycle_discards (void *(*site) (size_t), size_t n, int times)
{
  size_t c0 = kt_pool_stats ().discard_calls;
  for (int i = 0; i < times; i++)
    {
      char *q = site (n);
      if (q == NULL)
        _exit (1);
      q[n - 1] = 1;
      kame_pool_free (q);
    }
  return kt_pool_stats ().discard_calls - c0;
}

static __attribute__ ((noinline, noclone)) void *
site_churn (size_t n)
{
  return kame_pool_malloc (n);
}

/* The target: 48 MiB in 1000-byte blocks and 24 MiB in 96 KiB
   blocks kept, 480 MiB of 2000-byte blocks allocated and freed.  */
static void
work_three_sites (void)
{
  for (size_t b = 0; b < 48 * MIB; b += 1000)
    keep (site_small (1000));
  for (size_t b = 0; b < 24 * MIB; b += 96 * 1024)
    keep (site_big (96 * 1024));
  for (size_t b = 0; b < 480 * MIB; b += 2000)
    kame_pool_free (site_churn (2000));
}

/* The statistics: 100000 blocks of 64 bytes and 2000 of 16 KiB.  */
static void
work_two_sizes (void)
{
  for (int i = 0; i < 100000; i++)
    keep (site_small (64));
  for (int i = 0; i < 2000; i++)
    keep (site_big (16384));
}

/* The full table.  A binary recursion 15 calls deep, through deep_a or
   deep_b at each level, reaches site_deep by 32768 distinct stacks (the
   options above keep the two from being merged or their calls from
   being jumps); 4096 functions leaf_N call malloc from as many
   distinct places.  */
static __attribute__ ((noinline, noclone)) void *
site_deep (size_t n)
{
  return kame_pool_malloc (n);
}

static void dump_or_say (const char *path);
static void deep_a (int level, unsigned path);
static void deep_b (int level, unsigned path);

static __attribute__ ((noinline, noclone)) void
deep_next (int level, unsigned path)
{
  if (level == 0)
    {
      char *p = site_deep (3001);
      if (p == NULL)
        _exit (1);
      p[3000] = 1;
      kame_pool_free (p);
    }
  else if (path & 1)
    deep_a (level - 1, path >> 1);
  else
    deep_b (level - 1, path >> 1);
}

static __attribute__ ((noinline, noclone)) void
deep_a (int level, unsigned path)
{
  deep_next (level, path);
}

static __attribute__ ((noinline, noclone)) void
deep_b (int level, unsigned path)
{
  deep_next (level, path);
}

#define LEAF(i)                                                         \
  static __attribute__ ((noinline, noclone)) void *                     \
  leaf_##i (size_t n)                                                   \
  {                                                                     \
    return kame_pool_malloc (n);                                        \
  }
#define LEAF4(i) LEAF (i##0) LEAF (i##1) LEAF (i##2) LEAF (i##3)
#define LEAF16(i) LEAF4 (i##0) LEAF4 (i##1) LEAF4 (i##2) LEAF4 (i##3)
#define LEAF64(i) LEAF16 (i##0) LEAF16 (i##1) LEAF16 (i##2) LEAF16 (i##3)
#define LEAF256(i) LEAF64 (i##0) LEAF64 (i##1) LEAF64 (i##2) LEAF64 (i##3)
#define LEAF1K(i) LEAF256 (i##0) LEAF256 (i##1) LEAF256 (i##2) LEAF256 (i##3)
LEAF1K (0) LEAF1K (1) LEAF1K (2) LEAF1K (3)
#define NAME(i) leaf_##i,
#define NAME4(i) NAME (i##0) NAME (i##1) NAME (i##2) NAME (i##3)
#define NAME16(i) NAME4 (i##0) NAME4 (i##1) NAME4 (i##2) NAME4 (i##3)
#define NAME64(i) NAME16 (i##0) NAME16 (i##1) NAME16 (i##2) NAME16 (i##3)
#define NAME256(i) NAME64 (i##0) NAME64 (i##1) NAME64 (i##2) NAME64 (i##3)
#define NAME1K(i) NAME256 (i##0) NAME256 (i##1) NAME256 (i##2) NAME256 (i##3)
static void *(*const leaves[4096]) (size_t) = {
  NAME1K (0) NAME1K (1) NAME1K (2) NAME1K (3)
};

static void
work_full_table (void)
{
  dump_or_say ("before.heap");
  for (unsigned path = 0; path < 32768; path++)
    deep_next (15, path);
  for (int i = 0; i < 4096; i++)
    {
      char *p = leaves[i] (3002);
      if (p == NULL)
        _exit (1);
      p[3001] = 1;
      kame_pool_free (p);
    }
  dump_or_say ("after.heap");
  kame_pool_stats_t s = { .version = KAME_POOL_STATS_VERSION };
  kame_pool_get_stats (&s);
  printf ("stats %zu %zu %zu %zu\n", s.prof_stacks, s.prof_table_bytes,
          s.prof_shortened, s.prof_dropped);
}

static void *
thread_work (void *arg)
{
  (void) arg;
  void *p[1000];
  for (int i = 0; i < 1000; i++)
    p[i] = site_small (333);
  for (int i = 0; i < 1000; i += 2)
    kame_pool_free (p[i]);
  return NULL;
}

static _Atomic int churning = 1;

static void *
thread_churn (void *arg)
{
  (void) arg;
  while (atomic_load (&churning))
    kame_pool_free (site_churn (2000));
  return NULL;
}

static void
dump_or_say (const char *path)
{
  int err = kame_pool_prof_dump (path);
  if (err != 0)
    printf ("dump %s: %s\n", path, strerror (err));
}

__attribute__ ((__constructor__)) static void
prof_child (void)
{
  const char *mode = getenv ("KP_PROF_CHILD");
  if (mode == NULL)
    return;
  setvbuf (stdout, NULL, _IONBF, 0);
  if (strcmp (mode, "three_sites") == 0)
    work_three_sites ();
  else if (strcmp (mode, "two_sizes") == 0)
    work_two_sizes ();
  else if (strcmp (mode, "full_table") == 0)
    work_full_table ();
  else if (strcmp (mode, "fork_in_handler") == 0)
    kt_sampled_fork_in_handler ();
  else if (strcmp (mode, "errors") == 0)
    {
      int e = errno = 1234;
      printf ("nonexistent %d\n", kame_pool_prof_dump ("/nonexistent/p"));
      printf ("directory %d\n", kame_pool_prof_dump ("/"));
      printf ("full %d\n", kame_pool_prof_dump ("/dev/full"));
      printf ("null %d\n", kame_pool_prof_dump (NULL));
      printf ("errno kept %d\n", errno == e);
    }
  else if (strcmp (mode, "calls") == 0)
    {
      /* Every block sampled (KAME_POOL_PROF_SAMPLE=1): each call of
         the family on a sampled block.  */
      kt_sampled_family (1234);
      dump_or_say ("now.heap");
    }
  else if (strcmp (mode, "threads") == 0)
    {
      pthread_t t[4];
      for (int i = 0; i < 4; i++)
        pthread_create (&t[i], NULL, thread_work, NULL);
      for (int i = 0; i < 4; i++)
        pthread_join (t[i], NULL);
      dump_or_say ("now.heap");
    }
  else if (strcmp (mode, "fork") == 0)
    {
      for (int i = 0; i < 10; i++)
        keep (site_small (777));
      pthread_t t;
      pthread_create (&t, NULL, thread_churn, NULL);
      pid_t pid = fork ();
      if (pid == 0)
        {
          for (int i = 0; i < 5; i++)
            keep (site_big (1555));
          dump_or_say ("child.heap");
          _exit (0);
        }
      int status;
      waitpid (pid, &status, 0);
      printf ("child exit %d\n", WIFEXITED (status) ? WEXITSTATUS (status)
                                                    : 256);
      atomic_store (&churning, 0);
      pthread_join (t, NULL);
      for (int i = 0; i < 3; i++)
        keep (site_big (1555));
      dump_or_say ("parent.heap");
    }
  else if (strcmp (mode, "reuse") == 0)
    {
      /* Every block sampled (KAME_POOL_PROF_SAMPLE=1).  300 blocks of
         5000 bytes, each a run of 2 pages (the header's and one more),
         freed: the free runs then keep 256 pages past their headers,
         whatever they kept before.  Then a block of 5000 bytes made
         and freed 1000 times, and one of 64 KiB (a run of 17 pages)
         100 times.  */
      static void *p[300];
      for (int i = 0; i < 300; i++)
        if ((p[i] = site_small (5000)) == NULL)
          _exit (1);
      for (int i = 0; i < 300; i++)
        kame_pool_free (p[i]);
      size_t small = cycle_discards (site_small, 5000, 1000);
      size_t big = cycle_discards (site_big, 65536, 100);
      printf ("given back %zu, then %zu\n", small, big);
    }
  else if (strcmp (mode, "closed_stderr") == 0)
    {
      close (2);
      for (int i = 0; i < 10; i++)
        keep (site_small (777));
    }
  else if (strcmp (mode, "exit") == 0)
    for (int i = 0; i < 10; i++)
      keep (site_small (777));
  else if (strcmp (mode, "exit_churn") == 0)
    {
      for (int i = 0; i < 10; i++)
        keep (site_small (777));
      for (int i = 0; i < 5; i++)
        kame_pool_free (site_churn (2000));
    }
  exit (0);
}

/* ---- The tests ---------------------------------------------------------- */

/* Run this program again in the scratch directory with workload MODE,
   KAME_POOL_PROF=p (unless PROF is false) and KAME_POOL_PROF_SAMPLE=
   SAMPLE; its stdout in OUT, its stderr in ERR, its pid in *PID.  */
static bool
run_child (const char *mode, bool prof, const char *sample, char *out,
           size_t osize, char *err, size_t esize, pid_t *pid_out)
{
  static char m[64], r[64];
  snprintf (m, sizeof m, "KP_PROF_CHILD=%s", mode);
  snprintf (r, sizeof r, "KAME_POOL_PROF_SAMPLE=%s", sample);
  const char *env[] = { m, r, prof ? "KAME_POOL_PROF=p" : NULL, NULL };
  int status;
  return kt_run_self (env, false, workdir, out, osize, err, esize, &status,
                      pid_out)
         && WIFEXITED (status) && WEXITSTATUS (status) == 0;
}

/* A stack line of a profile: its four counts.  */
typedef struct counts
{
  unsigned long long live_n, live_b, alloc_n, alloc_b;
} counts_t;

/* The totals of the stacks of PATH whose blocks have SIZE bytes (their
   allocated bytes over their allocated blocks: within 1 %, as each
   count is rounded on its own), and in *ALL the header's totals; false
   if PATH is not a profile.  */
static bool
read_profile (const char *path, size_t size, counts_t *sum, counts_t *all)
{
  FILE *f = fopen (path, "r");
  if (f == NULL)
    return false;
  char line[8192];
  memset (sum, 0, sizeof *sum);
  bool ok = fgets (line, sizeof line, f) != NULL
            && sscanf (line, "heap profile: %llu: %llu [%llu: %llu] @ "
                       "heapprofile", &all->live_n, &all->live_b,
                       &all->alloc_n, &all->alloc_b) == 4;
  bool maps = false;
  while (ok && fgets (line, sizeof line, f) != NULL)
    {
      if (strcmp (line, "\n") == 0)
        {
          maps = fgets (line, sizeof line, f) != NULL
                 && strcmp (line, "MAPPED_LIBRARIES:\n") == 0;
          break;
        }
      counts_t c;
      if (sscanf (line, "%llu: %llu [%llu: %llu] @ 0x", &c.live_n,
                  &c.live_b, &c.alloc_n, &c.alloc_b) != 4)
        ok = false;
      else if (c.alloc_n != 0
               && fabs ((double) c.alloc_b / c.alloc_n - size)
                  <= size / 100.0)
        {
          sum->live_n += c.live_n;
          sum->live_b += c.live_b;
          sum->alloc_n += c.alloc_n;
          sum->alloc_b += c.alloc_b;
        }
    }
  fclose (f);
  return ok && maps;
}

static char out[1 << 16], err[1 << 16];

/* The number of samples K of N blocks of S bytes at rate R is binomial
   with p = 1 - exp (-S / R); the estimate of the count, K / p, has the
   standard deviation sqrt (N (1 - p) / p).  Both totals must be within
   five standard deviations (a false failure once in 1.7 million runs),
   and K itself, found from the estimate, is the mean gap's check: N S
   bytes over K samples is R on average.  */
static void
check_estimate (const char *what, counts_t c, double n, double s, double r)
{
  double p = -expm1 (-s / r);
  double sd = sqrt (n * (1 - p) / p);
  double k = (double) c.alloc_n * p;
  printf ("%s: %llu blocks for %.0f (bound %.0f), %.0f samples for %.0f\n",
          what, c.alloc_n, n, 5 * sd, k, n * p);
  if (fabs ((double) c.alloc_n - n) > 5 * sd
      || fabs ((double) c.alloc_b - n * s) > 5 * sd * s + s)
    kt_report_failure (__FILE__, __LINE__, what);
}

KT_TEST (samples_are_unbiased_for_every_size_and_gaps_have_the_mean)
{
  SCRATCH_DIR ();
  pid_t pid;
  KT_CHECK (run_child ("two_sizes", true, "4096", out, sizeof out, err,
                       sizeof err, &pid));
  char path[64];
  snprintf (path, sizeof path, "%s/p.%d.heap", workdir, (int) pid);
  counts_t small, big, all;
  KT_CHECK (read_profile (path, 64, &small, &all));
  KT_CHECK (read_profile (path, 16384, &big, &all));
  check_estimate ("64-byte blocks", small, 100000, 64, 4096);
  check_estimate ("16 KiB blocks", big, 2000, 16384, 4096);
  /* Nothing was freed: what was allocated is live.  */
  KT_CHECK_EQ (small.live_b, small.alloc_b);
  KT_CHECK_EQ (big.live_n, big.alloc_n);
}

/* The flat column of FUNCTION in google-pprof's --text output OUT, in
   MB; 0 when it is not listed.  */
static double
pprof_flat (const char *text, const char *function)
{
  char name[128];
  snprintf (name, sizeof name, "%% %s\n", function);
  const char *at = strstr (text, name);
  if (at == NULL)
    return 0;
  while (at > text && at[-1] != '\n')
    at--;
  return strtod (at, NULL);
}

/* The path of this program in EXE, which holds SIZE bytes: the
   binary the profile readers symbolise.  */
static bool
self_exe (char *exe, size_t size)
{
  ssize_t n = readlink ("/proc/self/exe", exe, size - 1);
  if (n <= 0)
    return false;
  exe[n] = '\0';
  return true;
}

static bool
run_pprof (const char *pprof, const char *flag, const char *profile,
           char *text, size_t size)
{
  char cmd[8192], exe[4096];
  if (!self_exe (exe, sizeof exe))
    return false;
  snprintf (cmd, sizeof cmd, "'%s' --text %s '%s' '%s' 2>/dev/null", pprof,
            flag, exe, profile);
  FILE *f = popen (cmd, "r");
  if (f == NULL)
    return false;
  size_t len = fread (text, 1, size - 1, f);
  text[len] = '\0';
  return pclose (f) == 0 && len > 0;
}

/* One profile of the three sites, read back by google-pprof (PPROF):
   true when every site's figure is within 10 % of the truth and the
   churning site holds nothing; the figures are printed.  */
static bool
three_sites_within_ten_percent (const char *pprof)
{
  pid_t pid;
  if (!run_child ("three_sites", true, "65536", out, sizeof out, err,
                  sizeof err, &pid))
    return false;
  char path[64];
  snprintf (path, sizeof path, "%s/p.%d.heap", workdir, (int) pid);
  static char inuse[1 << 16], alloc[1 << 16];
  if (!run_pprof (pprof, "--inuse_space", path, inuse, sizeof inuse)
      || !run_pprof (pprof, "--alloc_space", path, alloc, sizeof alloc))
    return false;
  /* google-pprof's MB are MiB.  */
  double small_in = pprof_flat (inuse, "site_small");
  double big_in = pprof_flat (inuse, "site_big");
  double churn_in = pprof_flat (inuse, "site_churn");
  double small_all = pprof_flat (alloc, "site_small");
  double big_all = pprof_flat (alloc, "site_big");
  double churn_all = pprof_flat (alloc, "site_churn");
  printf ("in use: %.1f %.1f %.1f MiB; allocated %.1f %.1f %.1f MiB\n",
          small_in, big_in, churn_in, small_all, big_all, churn_all);
  /* The truth: blocks of 1000 bytes up to 48 MiB, of 96 KiB up to 24
     MiB, of 2000 bytes up to 480 MiB.  */
  double small = ceil (48 * MIB / 1000.0) * 1000 / MIB;
  double big = 24, churn = ceil (480 * MIB / 2000.0) * 2000 / MIB;
  return fabs (small_in - small) <= 0.1 * small
         && fabs (big_in - big) <= 0.1 * big
         && fabs (small_all - small) <= 0.1 * small
         && fabs (big_all - big) <= 0.1 * big
         && fabs (churn_all - churn) <= 0.1 * churn
         /* Everything the churning site allocated was freed.  */
         && churn_in == 0;
}

/* The target.  The estimate's standard deviation is that of
   check_estimate: 3.6 % for the 1000-byte site (50332 blocks, p =
   0.0151) and 3.4 % for the 96 KiB one (256 blocks, p = 0.777), so
   10 % is 2.8 and 2.9 of them: one profile misses in about one run in
   a hundred and twenty by chance alone (make distcheck's hugepage
   build met one).  A second, independent profile is taken when the
   first misses: the test then fails by chance once in about 14,000
   runs, while a biased estimate, which misses every time, fails it.  */
KT_TEST (google_pprof_finds_each_sites_bytes_within_ten_percent)
{
  NEED_PROGRAM (pprof, "google-pprof");
  SCRATCH_DIR ();
  KT_CHECK (three_sites_within_ten_percent (pprof)
            || three_sites_within_ten_percent (pprof));
}

/* The output of COMMAND, whose words are ARGV (none quoted: the test's
   own paths), in TEXT; false unless it exits with 0 and says
   something.  */
static bool
run_reader (const char *const argv[], char *text, size_t size)
{
  char cmd[8192];
  size_t len = 0;
  for (int i = 0; argv[i] != NULL; i++)
    len += (size_t) snprintf (cmd + len, sizeof cmd - len, "'%s' ",
                              argv[i]);
  snprintf (cmd + len, sizeof cmd - len, "2>/dev/null");
  FILE *f = popen (cmd, "r");
  if (f == NULL)
    return false;
  size_t n = fread (text, 1, size - 1, f);
  text[n] = '\0';
  return pclose (f) == 0 && n > 0;
}

/* The exit profile of workload MODE, every block sampled, in PATH:
   "exit" keeps the 10 blocks of 777 bytes that site_small makes,
   "exit_churn" also makes and frees 5 of 2000 bytes at site_churn.  */
static bool
exit_profile (const char *mode, char *path, size_t size)
{
  pid_t pid;
  if (!run_child (mode, true, "1", out, sizeof out, err, sizeof err,
                  &pid))
    return false;
  snprintf (path, size, "%s/p.%d.heap", workdir, (int) pid);
  return true;
}

/* google-pprof draws the call graph (with graphviz's dot) and names the
   allocating function in it.  */
KT_TEST (google_pprof_draws_the_profile_as_svg)
{
  NEED_PROGRAM (pprof, "google-pprof");
  NEED_PROGRAM (dot, "dot");
  SCRATCH_DIR ();
  char path[4200], exe[4096];
  KT_CHECK (exit_profile ("exit", path, sizeof path));
  KT_CHECK (self_exe (exe, sizeof exe));
  static char svg[1 << 20];
  const char *argv[] = { pprof, "--svg", exe, path, NULL };
  KT_CHECK (run_reader (argv, svg, sizeof svg));
  KT_CHECK (strstr (svg, "<svg") != NULL);
  KT_CHECK (strstr (svg, "</svg>") != NULL);
  KT_CHECK (strstr (svg, ">site_small<") != NULL);
}

/* The flat bytes of FUNCTION in the output TEXT of go tool pprof -text
   -unit=B (a line "  7770B 91.52% 91.52%  7770B 91.52%  site_small");
   -1 when it is not listed.  */
static long long
go_pprof_flat (const char *text, const char *function)
{
  char name[128];
  snprintf (name, sizeof name, "  %s\n", function);
  const char *at = strstr (text, name);
  if (at == NULL)
    return -1;
  while (at > text && at[-1] != '\n')
    at--;
  char *end;
  long long v = strtoll (at, &end, 10);
  return *end == 'B' ? v : -1;
}

/* Go's pprof reads gperftools' heap profile too: the functions and
   their bytes, in use and allocated, to the byte (every block
   sampled).  Go's reader offers the allocated counts only when they
   differ from those in use: site_churn frees what it makes.  */
KT_TEST (go_pprof_reads_the_function_and_its_bytes)
{
  NEED_PROGRAM (go, "go");
  SCRATCH_DIR ();
  char path[4200], exe[4096];
  KT_CHECK (exit_profile ("exit_churn", path, sizeof path));
  KT_CHECK (self_exe (exe, sizeof exe));
  static char text[1 << 16];
  const char *inuse[] = { go, "tool", "pprof", "-text", "-unit=B",
                          "-sample_index=inuse_space", exe, path, NULL };
  KT_CHECK (run_reader (inuse, text, sizeof text));
  KT_CHECK_EQ (go_pprof_flat (text, "site_small"), 7770);
  KT_CHECK_EQ (go_pprof_flat (text, "site_churn"), -1);
  const char *alloc[] = { go, "tool", "pprof", "-text", "-unit=B",
                          "-sample_index=alloc_space", exe, path, NULL };
  KT_CHECK (run_reader (alloc, text, sizeof text));
  KT_CHECK_EQ (go_pprof_flat (text, "site_small"), 7770);
  KT_CHECK_EQ (go_pprof_flat (text, "site_churn"), 10000);
}

KT_TEST (dump_answers_einval_when_off_and_the_errors_of_the_file)
{
  SCRATCH_DIR ();
  /* This process runs without KAME_POOL_PROF.  */
  errno = 4321;
  KT_CHECK_EQ (kame_pool_prof_dump ("/tmp/never-written.heap"), EINVAL);
  KT_CHECK_EQ (kame_pool_prof_dump (NULL), EINVAL);
  KT_CHECK_EQ (errno, 4321);
  KT_CHECK (access ("/tmp/never-written.heap", F_OK) != 0);
  KT_CHECK (run_child ("errors", true, "524288", out, sizeof out, err,
                       sizeof err, NULL));
  char want[256];
  snprintf (want, sizeof want,
            "nonexistent %d\ndirectory %d\nfull %d\nnull %d\n"
            "errno kept 1\n", ENOENT, EISDIR, ENOSPC, EINVAL);
  KT_CHECK_STR_EQ (out, want);
}

KT_TEST (sampled_blocks_answer_every_call_of_the_family)
{
  SCRATCH_DIR ();
  KT_CHECK (run_child ("calls", true, "1", out, sizeof out, err,
                       sizeof err, NULL));
  KT_CHECK_STR_EQ (out, "usable 1248\nmalloc_usable_size 1248\n"
                   "shrunk in place 1\ngrown 1, kept 1, usable 5568\n"
                   "calloc zero 1\naligned 1 1\n");
  char path[4200];
  snprintf (path, sizeof path, "%s/now.heap", workdir);
  counts_t c, all;
  /* The 1234-byte block and the 5555-byte one, both freed.  */
  KT_CHECK (read_profile (path, 1234, &c, &all));
  KT_CHECK_EQ (c.alloc_n, 1);
  KT_CHECK_EQ (c.live_n, 0);
  KT_CHECK (read_profile (path, 5555, &c, &all));
  KT_CHECK_EQ (c.alloc_n, 1);
  KT_CHECK_EQ (c.live_n, 0);
}

KT_TEST (threads_sample_at_once_and_every_block_is_counted)
{
  SCRATCH_DIR ();
  /* A rate of 1 byte samples every block: the counts are exact.  */
  KT_CHECK (run_child ("threads", true, "1", out, sizeof out, err,
                       sizeof err, NULL));
  KT_CHECK_STR_EQ (out, "");
  char path[4200];
  snprintf (path, sizeof path, "%s/now.heap", workdir);
  counts_t c, all;
  KT_CHECK (read_profile (path, 333, &c, &all));
  KT_CHECK_EQ (c.alloc_n, 4000);
  KT_CHECK_EQ (c.alloc_b, 4000 * 333);
  KT_CHECK_EQ (c.live_n, 2000);
  KT_CHECK_EQ (c.live_b, 2000 * 333);
}

KT_TEST (a_forked_child_goes_on_from_the_parents_profile)
{
  SCRATCH_DIR ();
  KT_CHECK (run_child ("fork", true, "1", out, sizeof out, err, sizeof err,
                       NULL));
  KT_CHECK_STR_EQ (out, "child exit 0\n");
  char path[4200];
  counts_t kept_n, child_n, all;
  /* The child: the parent's ten blocks, and its own five.  */
  snprintf (path, sizeof path, "%s/child.heap", workdir);
  KT_CHECK (read_profile (path, 777, &kept_n, &all));
  KT_CHECK (read_profile (path, 1555, &child_n, &all));
  KT_CHECK_EQ (kept_n.live_n, 10);
  KT_CHECK_EQ (child_n.live_n, 5);
  /* The parent: its ten and its three, none of the child's.  */
  snprintf (path, sizeof path, "%s/parent.heap", workdir);
  KT_CHECK (read_profile (path, 777, &kept_n, &all));
  KT_CHECK (read_profile (path, 1555, &child_n, &all));
  KT_CHECK_EQ (kept_n.live_n, 10);
  KT_CHECK_EQ (child_n.live_n, 3);
  KT_CHECK_EQ (child_n.alloc_n, 3);
}

/* A fork from a signal handler that interrupted a sampled call, which
   held the profile's lock: neither the process nor its children hang,
   and the children work (kt_sampled_fork_in_handler).  */
KT_TEST (a_fork_from_a_handler_inside_a_sampled_call_does_not_hang)
{
  SCRATCH_DIR ();
  const char *const env[] = { "KP_PROF_CHILD=fork_in_handler",
                              "KAME_POOL_PROF=p", "KAME_POOL_PROF_SAMPLE=1",
                              kt_sampled_fork_env (), NULL };
  int status;
  KT_CHECK (kt_run_self (env, false, workdir, out, sizeof out, err,
                         sizeof err, &status, NULL));
  char why[256];
  if (kt_sampled_fork_failed (status, out, why, sizeof why))
    KT_FAILF ("%s", why);
}

/* Freed runs keep their pages, up to 256 pages past their headers in
   all: with the free runs at that bound, a block made and freed again
   and again takes a kept run of its length and keeps it again, with no
   system call; a block whose run would go past the bound gives its
   pages back at its free, with one madvise.  */
KT_TEST (freed_sampled_runs_keep_their_pages_up_to_a_bound)
{
  SCRATCH_DIR ();
  /* No purge of the pool's own pages in between (there are none to
     purge: every block is sampled).  */
  setenv ("KAME_POOL_BACKGROUND_PURGE", "0", 1);
  bool ran = run_child ("reuse", true, "1", out, sizeof out, err,
                        sizeof err, NULL);
  unsetenv ("KAME_POOL_BACKGROUND_PURGE");
  KT_CHECK (ran);
  KT_CHECK_STR_EQ (out, "given back 0, then 100\n");
}

/* The stack lines of a profile: how many, and of those whose blocks
   have SIZE bytes, how many have one frame, how many more, and their
   allocated blocks.  */
typedef struct table_scan
{
  unsigned long lines, one_frame, deeper;
  unsigned long long alloc_n;
} table_scan_t;

static bool
scan_table (const char *path, unsigned long long size, table_scan_t *t)
{
  FILE *f = fopen (path, "r");
  if (f == NULL)
    return false;
  static char line[8192];
  memset (t, 0, sizeof *t);
  bool ok = fgets (line, sizeof line, f) != NULL
            && strncmp (line, "heap profile: ", 14) == 0;
  while (ok && fgets (line, sizeof line, f) != NULL
         && strcmp (line, "\n") != 0)
    {
      counts_t c;
      if (sscanf (line, "%llu: %llu [%llu: %llu] @ 0x", &c.live_n,
                  &c.live_b, &c.alloc_n, &c.alloc_b) != 4)
        {
          ok = false;
          break;
        }
      t->lines++;
      if (c.alloc_n == 0 || c.alloc_b != c.alloc_n * size)
        continue;
      int frames = 0;
      for (const char *at = line; (at = strstr (at, " 0x")) != NULL; at++)
        frames++;
      if (frames == 1)
        t->one_frame++;
      else
        t->deeper++;
      t->alloc_n += c.alloc_n;
    }
  fclose (f);
  return ok;
}

/* A program with more stacks than the table holds (16384 records)
   goes on, and its profile says what was kept.  Every block sampled;
   B records are in use before the workload.  Its 32768 stacks of
   site_deep take the records up to 7/8 of the table (14336): 14336 - B
   of them are recorded whole, the others by their innermost frame,
   one record for them all.  Then its 4096 leaves each need a record
   of their own, by their innermost frame: the 2047 left are taken,
   and the 2049 other samples are not recorded (the blocks are served
   unsampled).  The table's size is the index (32768 slots of 4 bytes)
   and the records in use (16384 of 560 bytes): 9088 KiB.  */
KT_TEST (a_full_stack_table_keeps_the_program_going_and_says_so)
{
  SCRATCH_DIR ();
  setenv ("KAME_POOL_STATS", "1", 1);
  bool ran = run_child ("full_table", true, "1", out, sizeof out, err,
                        sizeof err, NULL);
  unsetenv ("KAME_POOL_STATS");
  KT_CHECK (ran);
  char path[4200];
  table_scan_t before, deep, leaf;
  snprintf (path, sizeof path, "%s/before.heap", workdir);
  KT_CHECK (scan_table (path, 3001, &before));
  unsigned long b = before.lines;
  KT_CHECK (b < 14336);
  snprintf (path, sizeof path, "%s/after.heap", workdir);
  KT_CHECK (scan_table (path, 3001, &deep));
  KT_CHECK (scan_table (path, 3002, &leaf));
  KT_CHECK_EQ (deep.lines, 16384);
  KT_CHECK_EQ (deep.deeper, 14336 - b);
  KT_CHECK_EQ (deep.one_frame, 1);
  KT_CHECK_EQ (deep.alloc_n, 32768);
  KT_CHECK_EQ (leaf.deeper, 0);
  KT_CHECK_EQ (leaf.one_frame, 2047);
  KT_CHECK_EQ (leaf.alloc_n, 2047);
  char want[256];
  snprintf (want, sizeof want, "\nkamepool: heap profile: 16384 stacks in "
            "9088 KiB of stack table; %lu samples by their innermost "
            "frame only, 2049 not recorded\n",
            32768 - (14336 - b) + 2047);
  KT_CHECK (strstr (err, want) != NULL);
  /* kame_pool_get_stats says the same.  */
  snprintf (want, sizeof want, "stats 16384 %lu %lu 2049\n",
            (unsigned long) 9088 << 10, 32768 - (14336 - b) + 2047);
  KT_CHECK_STR_EQ (out, want);
  /* The profile of a full table reads as any other: site_deep's
     32768 blocks of 3001 bytes, 93.8 MiB (where google-pprof is
     installed).  */
  const char *found = find_program ("google-pprof");
  if (found != NULL)
    {
      static char alloc[1 << 20];
      char pprof[4096];
      snprintf (pprof, sizeof pprof, "%s", found);
      KT_CHECK (run_pprof (pprof, "--alloc_space", path, alloc,
                           sizeof alloc));
      KT_CHECK (fabs (pprof_flat (alloc, "site_deep") - 93.8) < 0.01);
    }
}

/* The line at exit says what the file holds.  */
KT_TEST (the_exit_profile_and_its_line_on_stderr_agree)
{
  SCRATCH_DIR ();
  pid_t pid;
  KT_CHECK (run_child ("exit", true, "1", out, sizeof out, err, sizeof err,
                       &pid));
  char path[4200], want[4400];
  snprintf (path, sizeof path, "%s/p.%d.heap", workdir, (int) pid);
  counts_t c, all;
  KT_CHECK (read_profile (path, 777, &c, &all));
  KT_CHECK_EQ (c.live_n, 10);
  KT_CHECK_EQ (c.live_b, 7770);
  unsigned long long bytes, blocks, stacks;
  KT_CHECK (sscanf (err, "kamepool: heap profile p.%*d.heap: %llu bytes in "
                    "%llu blocks still live, held by %llu stack",
                    &bytes, &blocks, &stacks) == 3);
  KT_CHECK_EQ (bytes, all.live_b);
  KT_CHECK_EQ (blocks, all.live_n);
  snprintf (want, sizeof want, "kamepool: heap profile p.%d.heap: %llu "
            "bytes in %llu blocks still live, held by %llu %s\n", (int) pid,
            bytes, blocks, stacks, stacks == 1 ? "stack" : "stacks");
  KT_CHECK_STR_EQ (err, want);
}

/* A program that closed stderr: the profile may get descriptor 2, and
   the line at exit must not land in it.  */
KT_TEST (a_program_that_closed_stderr_gets_a_clean_profile)
{
  SCRATCH_DIR ();
  pid_t pid;
  KT_CHECK (run_child ("closed_stderr", true, "1", out, sizeof out, err,
                       sizeof err, &pid));
  KT_CHECK_STR_EQ (err, "");
  char path[4200];
  snprintf (path, sizeof path, "%s/p.%d.heap", workdir, (int) pid);
  counts_t c, all;
  KT_CHECK (read_profile (path, 777, &c, &all));
  KT_CHECK_EQ (c.live_n, 10);
  FILE *f = fopen (path, "r");
  KT_CHECK (f != NULL);
  char line[8192];
  bool stray = false;
  while (fgets (line, sizeof line, f) != NULL)
    stray |= strstr (line, "kamepool:") != NULL;
  fclose (f);
  KT_CHECK (!stray);
}

/* Without KAME_POOL_PROF nothing is written.  */
KT_TEST (without_the_variable_no_profile_is_written)
{
  SCRATCH_DIR ();
  KT_CHECK (run_child ("exit", false, "1", out, sizeof out, err, sizeof err,
                       NULL));
  KT_CHECK_STR_EQ (err, "");
  DIR *d = opendir (workdir);
  KT_CHECK (d != NULL);
  int files = 0;
  for (struct dirent *e; (e = readdir (d)) != NULL;)
    files += e->d_name[0] != '.';
  closedir (d);
  KT_CHECK_EQ (files, 0);
}

KT_MAIN (KT_CASE (samples_are_unbiased_for_every_size_and_gaps_have_the_mean),
         KT_CASE (google_pprof_finds_each_sites_bytes_within_ten_percent),
         KT_CASE (google_pprof_draws_the_profile_as_svg),
         KT_CASE (go_pprof_reads_the_function_and_its_bytes),
         KT_CASE (dump_answers_einval_when_off_and_the_errors_of_the_file),
         KT_CASE (sampled_blocks_answer_every_call_of_the_family),
         KT_CASE (threads_sample_at_once_and_every_block_is_counted),
         KT_CASE (a_forked_child_goes_on_from_the_parents_profile),
         KT_CASE (a_fork_from_a_handler_inside_a_sampled_call_does_not_hang),
         KT_CASE (freed_sampled_runs_keep_their_pages_up_to_a_bound),
         KT_CASE (a_full_stack_table_keeps_the_program_going_and_says_so),
         KT_CASE (the_exit_profile_and_its_line_on_stderr_agree),
         KT_CASE (a_program_that_closed_stderr_gets_a_clean_profile),
         KT_CASE (without_the_variable_no_profile_is_written))
