/* Guarded sampling (KAME_POOL_GUARD_SAMPLE): each misuse of a guarded
   block is caught at the faulting instruction or call, and the report
   says its kind, the offset, the block's size, both stacks and the
   threads; correct use reports nothing; the pool is reused oldest
   first; the program's own SIGSEGV handler still gets the faults that
   are not ours; bad settings are warned about; the statistics count
   exactly.  Each case runs in this program run again with
   KP_GUARD_CHILD naming it and every allocation sampled
   (KAME_POOL_GUARD_SAMPLE=1); the test reads its output.
   Copyright (C) 2026 The kamepool authors; LGPL-2.1+.  */
/* kptest-options: -fno-optimize-sibling-calls -fno-inline -fno-ipa-icf -g -rdynamic */

#define _GNU_SOURCE 1

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kame_pool.h"
#include "kptest.h"
#include "kptest-pool.h"
#include "kptest-sampled.h"

/* ---- The cases, in the child -------------------------------------------- */

/* Call sites with names of their own in the dynamic symbol table
   (-rdynamic, not static), never inlined nor tail calls, so that the
   report's stacks can name them.  */
__attribute__ ((noinline, noclone)) void *
guard_site_alloc (size_t n)
{
  return kame_pool_malloc (n);
}

__attribute__ ((noinline, noclone)) void
guard_site_free (void *p)
{
  kame_pool_free (p);
}

static int
tid (void)
{
  return (int) syscall (SYS_gettid);
}

/* A guarded block of N bytes whose end is against the guard page (END)
   or whose start is (!END): one in four blocks is placed at the start
   of its slot.  */
static char *
placed (size_t n, bool end)
{
  size_t page = KT_PAGE;
  for (int i = 0; i < 8; i++)
    {
      char *p = guard_site_alloc (n);
      size_t u = kame_pool_malloc_usable_size (p);
      bool at_end = ((uintptr_t) (p + u) & (page - 1)) == 0;
      bool at_start = ((uintptr_t) p & (page - 1)) == 0;
      if (end ? at_end && !at_start : at_start)
        return p;
    }
  printf ("no block placed as asked\n");
  _exit (1);
}

static void *
free_it (void *p)
{
  guard_site_free (p);
  printf ("freer %d\n", tid ());
  return NULL;
}

/* The process's resident anonymous KiB, counted page by page from its
   page tables (/proc/self/smaps_rollup; statm's counters lag by up to
   64 pages a CPU), read with no malloc: with every allocation
   sampled, a malloc here would take a guarded slot of its own.  */
static long
anon_kib (void)
{
  char buf[2048];
  int fd = open ("/proc/self/smaps_rollup", O_RDONLY);
  if (fd < 0)
    return -1;
  ssize_t n = read (fd, buf, sizeof buf - 1);
  close (fd);
  if (n <= 0)
    return -1;
  buf[n] = '\0';
  const char *anon = strstr (buf, "\nAnonymous:");
  return anon != NULL ? strtol (anon + 11, NULL, 10) : -1;
}

/* A thread's first guarded block and its free: what they add to the
   resident set, when another thread has sampled before (the unwinder's
   tables and code already read).  */
static void *
first_sample_in_thread (void *arg)
{
  long *grew = arg;
  long before = anon_kib ();
  guard_site_free (guard_site_alloc (64));
  long after = anon_kib ();
  *grew = before < 0 || after < 0 ? -1 : after - before;
  return NULL;
}

static void
own_handler (int sig, siginfo_t *si, void *uc)
{
  (void) uc;
  char buf[64];
  int n = snprintf (buf, sizeof buf, "own handler: signal %d at %p\n", sig,
                    si->si_addr);
  if (write (1, buf, (size_t) n) < 0)
    _exit (3);
  _exit (42);
}

static void
install_own_handler (void)
{
  struct sigaction sa;
  memset (&sa, 0, sizeof sa);
  sa.sa_sigaction = own_handler;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset (&sa.sa_mask);
  sigaction (SIGSEGV, &sa, NULL);
}

static void *
churn (void *arg)
{
  void **mine = arg;
  for (int i = 0; i < 200; i++)
    {
      char *p = kame_pool_malloc (1 + i * 37 % 5000);
      p[0] = 1;
      /* Free the other thread's block of the previous round.  */
      void *q = atomic_exchange ((_Atomic (void *) *) mine, p);
      kame_pool_free (q);
    }
  return NULL;
}

static void
correct_use (void)
{
  kame_pool_stats_t s0 = kt_pool_stats ();
  kt_sampled_family (1000);
  /* Blocks above the largest guarded size come from the pool.  */
  void *big = kame_pool_malloc (40000);
  memset (big, 1, 40000);
  kame_pool_free (big);
  kame_pool_stats_t s1 = kt_pool_stats ();
  printf ("guarded %zu, in use %zu\n", s1.guard_allocs - s0.guard_allocs,
          s1.guard_slots_used - s0.guard_slots_used);
  /* Threads that free each other's blocks.  */
  void *slot = NULL;
  pthread_t t[4];
  for (int i = 0; i < 4; i++)
    pthread_create (&t[i], NULL, churn, &slot);
  for (int i = 0; i < 4; i++)
    pthread_join (t[i], NULL);
  kame_pool_free (slot);
  /* A forked child allocates and frees guarded blocks too.  */
  char *kept = guard_site_alloc (100);
  pid_t pid = fork ();
  if (pid == 0)
    {
      guard_site_free (kept);
      for (int i = 0; i < 300; i++)
        guard_site_free (guard_site_alloc (64));
      _exit (0);
    }
  int status;
  waitpid (pid, &status, 0);
  kept[99] = 1;
  guard_site_free (kept);
  printf ("fork child %d\n", WIFEXITED (status) ? WEXITSTATUS (status) : 256);
}

/* The chaining cases install their handler before any library's
   constructor can allocate (libnuma's does, and with every allocation
   sampled its block makes the pool and installs the pool's handler):
   the executable's preinit functions run before every constructor.  */
static void
guard_preinit (int argc, char **argv, char **envp)
{
  (void) argc;
  (void) argv;
  for (char **e = envp; *e != NULL; e++)
    if (strcmp (*e, "KP_GUARD_CHILD=chain") == 0
        || strcmp (*e, "KP_GUARD_CHILD=chain_ours") == 0)
      install_own_handler ();
}
__attribute__ ((section (".preinit_array"), used))
static void (*const guard_preinit_p) (int, char **, char **) = guard_preinit;

/* The end of the slot of the guarded block P of USABLE bytes: P is at
   the start of a slot of 32768 bytes (the largest guarded block, with
   pages of at most 32 KiB), or ends at its end.  */
static uintptr_t
slot_end (const char *p, size_t usable)
{
  uintptr_t end = (uintptr_t) p + usable;
  return (end & (KT_PAGE - 1)) == 0 ? end : (uintptr_t) p + 32768;
}

/* Allocate blocks of 64 bytes into LIVE until every slot holds one;
   their number.  */
static size_t
fill_pool (char **live)
{
  kame_pool_stats_t s = kt_pool_stats ();
  size_t k = 0;
  while (s.guard_slots_used < s.guard_slots && k < 4096)
    {
      live[k++] = guard_site_alloc (64);
      s = kt_pool_stats ();
    }
  return k;
}

__attribute__ ((__constructor__)) static void
guard_child (void)
{
  const char *mode = getenv ("KP_GUARD_CHILD");
  if (mode == NULL)
    return;
  setvbuf (stdout, NULL, _IONBF, 0);
  /* The pool's first allocation sets the process up and is never
     sampled; in a build that does not replace malloc (a sanitizer's),
     it is this program's first kame_pool_malloc.  */
  kame_pool_free (kame_pool_malloc (1));
  size_t n;
  char access;
  if (sscanf (mode, "uaf_%c_%zu", &access, &n) == 2)
    {
      char *p = guard_site_alloc (n);
      memset (p, 1, n);
      printf ("block %p thread %d\n", (void *) p, tid ());
      guard_site_free (p);
      if (access == 'w')
        p[n / 2] = 2;
      else
        printf ("read %d\n", ((volatile char *) p)[n / 2]);
    }
  else if (strcmp (mode, "overflow") == 0)
    {
      char *p = placed (1000, true);
      printf ("block %p thread %d\n", (void *) p, tid ());
      p[1007] = 1;              /* the last usable byte */
      p[1008] = 1;              /* one granule past the rounded size */
    }
  else if (strcmp (mode, "underflow") == 0)
    {
      char *p = placed (1000, false);
      printf ("block %p thread %d\n", (void *) p, tid ());
      printf ("read %d\n", ((volatile char *) p)[-1]);
    }
  else if (strcmp (mode, "double_free") == 0)
    {
      char *p = guard_site_alloc (100);
      printf ("block %p thread %d\n", (void *) p, tid ());
      guard_site_free (p);
      guard_site_free (p);
    }
  else if (strcmp (mode, "invalid_free") == 0)
    {
      char *p = guard_site_alloc (100);
      printf ("block %p thread %d\n", (void *) p, tid ());
      guard_site_free (p + 16);
    }
  else if (strcmp (mode, "uaf_thread") == 0)
    {
      char *p = guard_site_alloc (64);
      printf ("block %p thread %d\n", (void *) p, tid ());
      pthread_t t;
      pthread_create (&t, NULL, free_it, p);
      pthread_join (t, NULL);
      p[3] = 1;
    }
  else if (strcmp (mode, "oldest_first") == 0)
    {
      /* Fill the pool, free A then B: the next block takes A's slot,
         and B's stays inaccessible.  */
      static char *live[4096];
      size_t k = fill_pool (live);
      kame_pool_stats_t s = kt_pool_stats ();
      size_t allocs = s.guard_allocs;
      char *extra = guard_site_alloc (64);
      s = kt_pool_stats ();
      printf ("full: unguarded %d\n", s.guard_allocs == allocs);
      kame_pool_free (extra);
      char *a = live[k - 2], *b = live[k - 1];
      guard_site_free (a);
      guard_site_free (b);
      char *c = guard_site_alloc (64);
      printf ("reused a %d, b %d\n", slot_end (c, 64) == slot_end (a, 64),
              slot_end (c, 64) == slot_end (b, 64));
      printf ("block %p thread %d\n", (void *) b, tid ());
      b[0] = 1;
    }
  else if (strcmp (mode, "stats") == 0)
    {
      kame_pool_stats_t s0 = kt_pool_stats ();
      void *p[5];
      for (int i = 0; i < 5; i++)
        p[i] = guard_site_alloc (100 + i);
      for (int i = 0; i < 3; i++)
        guard_site_free (p[i]);
      kame_pool_stats_t s1 = kt_pool_stats ();
      printf ("slots %zu, in use %zu, allocs %zu, reports %zu\n",
              s1.guard_slots, s1.guard_slots_used - s0.guard_slots_used,
              s1.guard_allocs - s0.guard_allocs,
              s1.guard_reports - s0.guard_reports);
      guard_site_free (p[3]);
      guard_site_free (p[3]);   /* reported, then ignored */
      s1 = kt_pool_stats ();
      printf ("reports %zu\n", s1.guard_reports - s0.guard_reports);
    }
  else if (strcmp (mode, "report_fault") == 0)
    {
      /* KAME_POOL_ON_MISUSE=report: the access is made, the slot is
         never used again, and the program goes on.  The pool is filled
         first, so that the misused block takes the one slot freed.  */
      static char *live[4096];
      size_t k = fill_pool (live);
      guard_site_free (live[--k]);
      kame_pool_stats_t s0 = kt_pool_stats ();
      char *p = guard_site_alloc (100);
      guard_site_free (p);
      p[5] = 9;
      printf ("went on, read back %d\n", p[5]);
      kame_pool_stats_t s1 = kt_pool_stats ();
      printf ("reports %zu, guarded %zu\n",
              s1.guard_reports - s0.guard_reports,
              s1.guard_allocs - s0.guard_allocs);
      for (size_t i = 0; i < k; i++)
        guard_site_free (live[i]);
      size_t in_retired = 0;
      for (size_t i = 0; i < k + 1; i++)
        {
          live[i] = guard_site_alloc (100);
          in_retired += slot_end (live[i], 112) == slot_end (p, 112);
        }
      kame_pool_stats_t s2 = kt_pool_stats ();
      printf ("then guarded %zu of %zu, in the retired slot %zu\n",
              s2.guard_allocs - s1.guard_allocs, k + 1, in_retired);
    }
  else if (strcmp (mode, "chain") == 0)
    {
      /* The pool's handler, installed with the pool after this one,
         keeps it for the faults that are not its own.  */
      guard_site_free (guard_site_alloc (100));
      printf ("fault\n");
      *(volatile int *) (uintptr_t) atoi ("16") = 1;
    }
  else if (strcmp (mode, "chain_ours") == 0)
    {
      char *p = guard_site_alloc (100);
      guard_site_free (p);
      p[0] = 1;
    }
  else if (strcmp (mode, "replaced") == 0)
    {
      char *p = guard_site_alloc (100);
      guard_site_free (p);
      install_own_handler ();
      p[0] = 1;
    }
  else if (strcmp (mode, "default") == 0)
    {
      guard_site_free (guard_site_alloc (100));
      *(volatile int *) (uintptr_t) atoi ("16") = 1;
    }
  else if (strcmp (mode, "with_profile") == 0)
    {
      /* Every block is guarded but those the heap profile samples
         (its sampled blocks start 64 bytes past a page boundary).  */
      kame_pool_stats_t s0 = kt_pool_stats ();
      size_t profiled = 0;
      for (int i = 0; i < 1000; i++)
        {
          char *p = guard_site_alloc (100);
          profiled += ((uintptr_t) p & (KT_PAGE - 1)) == 64;
          guard_site_free (p);
        }
      kame_pool_stats_t s1 = kt_pool_stats ();
      size_t guarded = s1.guard_allocs - s0.guard_allocs;
      printf ("all sampled %d, both %d\n", guarded + profiled == 1000,
              guarded > 0 && profiled > 0);
      /* No profile written at exit.  */
      _exit (0);
    }
  else if (strcmp (mode, "thread_rss") == 0)
    {
      guard_site_free (guard_site_alloc (64));
      long grew;
      pthread_t t;
      pthread_create (&t, NULL, first_sample_in_thread, &grew);
      pthread_join (t, NULL);
      if (grew >= 0 && grew < 64)
        printf ("first sample of a thread: under 64 KiB\n");
      else
        printf ("first sample of a thread: %ld KiB\n", grew);
    }
  else if (strcmp (mode, "correct") == 0)
    correct_use ();
  else if (strcmp (mode, "fork_in_handler") == 0)
    kt_sampled_fork_in_handler ();
  else if (strcmp (mode, "off") == 0)
    {
      guard_site_free (guard_site_alloc (100));
      kame_pool_stats_t s = kt_pool_stats ();
      printf ("slots %zu\n", s.guard_slots);
      if (s.guard_slots == 0)
        printf ("allocs %zu\n", s.guard_allocs);
    }
  exit (0);
}

/* ---- The tests ---------------------------------------------------------- */

static char out[1 << 16], err[1 << 16];

/* Run this program again with case MODE and the environment ENV (a
   NULL-terminated list; KAME_POOL_GUARD_SAMPLE=1 unless it says
   otherwise); its stdout in OUT, stderr in ERR, its wait status.  */
static int
run_child (const char *mode, const char *const *env)
{
  static char m[64];
  const char *e[32] = { m, "KAME_POOL_GUARD_SAMPLE=1" };
  size_t n = 2;
  snprintf (m, sizeof m, "KP_GUARD_CHILD=%s", mode);
  for (size_t i = 0; env != NULL && env[i] != NULL && n < 31; i++)
    e[n++] = env[i];
  e[n] = NULL;
  int status;
  if (!kt_run_self (e, false, NULL, out, sizeof out, err, sizeof err,
                    &status, NULL))
    return -1;
  return status;
}

/* A guarded block's usable size: N rounded up to 16.  */
static size_t
round16 (size_t n)
{
  return (n + 15) & ~(size_t) 15;
}

static bool
aborted (int status)
{
  return WIFSIGNALED (status) && WTERMSIG (status) == SIGABRT;
}

/* The line of TEXT that starts with PREFIX, copied into LINE (without
   its newline); false when there is none.  */
static bool
line_starting (const char *text, const char *prefix, char *line, size_t size)
{
  for (const char *l = text; l != NULL && *l != '\0';)
    {
      const char *end = strchr (l, '\n');
      size_t n = end != NULL ? (size_t) (end - l) : strlen (l);
      if (strncmp (l, prefix, strlen (prefix)) == 0)
        {
          snprintf (line, size, "%.*s", (int) n, l);
          return true;
        }
      l = end != NULL ? end + 1 : NULL;
    }
  return false;
}

/* The stack after the line HEAD of the report: its frames' lines up to
   the next line that is not a frame; whether one names FUNCTION.  */
static bool
stack_names (const char *head, const char *function)
{
  const char *at = strstr (err, head);
  if (at == NULL)
    return false;
  at = strchr (at, '\n');
  char want[128];
  snprintf (want, sizeof want, " %s+0x", function);
  while (at != NULL && strncmp (at + 1, "kamepool:     #", 15) == 0)
    {
      const char *end = strchr (at + 1, '\n');
      size_t n = end != NULL ? (size_t) (end - at) : strlen (at);
      if (memmem (at, n, want, strlen (want)) != NULL)
        return true;
      at = end;
    }
  return false;
}

/* The child's block and thread, from its line "block P thread T".  */
static void
child_block (uintptr_t *block, int *thread)
{
  char line[256];
  void *p = NULL;
  *block = 0;
  *thread = -1;
  if (line_starting (out, "block ", line, sizeof line)
      && sscanf (line, "block %p thread %d", &p, thread) == 2)
    *block = (uintptr_t) p;
}

/* Check the report of a misuse of KIND on the child's block: the first
   line, the block's line with OFFSET, SIZE and USABLE, and the stacks
   (the free's when FREED) naming the sites, in the threads of the
   child (FREER: the thread that freed, if not the block's).  */
static void
check_report (const char *call, const char *kind, long offset, size_t size,
              size_t usable, bool freed, int freer)
{
  uintptr_t block;
  int thread;
  child_block (&block, &thread);
  KT_CHECK (block != 0);
  char want[512], line[512];
  uintptr_t addr = block + offset;
  snprintf (want, sizeof want, "kamepool: %s%sguarded block: %s at 0x%"
            PRIxPTR " in thread %d", call != NULL ? call : "",
            call != NULL ? "(): " : "", kind, addr, thread);
  KT_CHECK (line_starting (err, "kamepool: ", line, sizeof line));
  KT_CHECK_STR_EQ (line, want);
  snprintf (want, sizeof want, "kamepool:   offset %ld of a block of %zu "
            "bytes (%zu usable) at 0x%" PRIxPTR ", %s", offset, size,
            usable, block, freed ? "freed" : "live");
  KT_CHECK (line_starting (err, "kamepool:   offset", line, sizeof line));
  KT_CHECK_STR_EQ (line, want);
  snprintf (want, sizeof want, "kamepool:   allocated by thread %d:",
            thread);
  KT_CHECK (line_starting (err, "kamepool:   allocated", line, sizeof line));
  KT_CHECK_STR_EQ (line, want);
  KT_CHECK (stack_names ("kamepool:   allocated", "guard_site_alloc"));
  if (freed)
    {
      snprintf (want, sizeof want, "kamepool:   freed by thread %d:",
                freer >= 0 ? freer : thread);
      KT_CHECK (line_starting (err, "kamepool:   freed", line, sizeof line));
      KT_CHECK_STR_EQ (line, want);
      KT_CHECK (stack_names ("kamepool:   freed", "guard_site_free"));
    }
  else
    KT_CHECK (strstr (err, "kamepool:   freed") == NULL);
}

static void
use_after_free (const char *mode, const char *kind, size_t n)
{
  int status = run_child (mode, NULL);
  KT_CHECK (aborted (status));
  KT_CHECK (strstr (out, "\nread ") == NULL);
  check_report (NULL, kind, (long) (n / 2), n, round16 (n), true, -1);
}

KT_TEST (use_after_free_read_of_16_bytes_is_caught_with_both_stacks)
{
  use_after_free ("uaf_r_16", "use after free (read)", 16);
}

KT_TEST (use_after_free_write_of_16_bytes_is_caught_with_both_stacks)
{
  use_after_free ("uaf_w_16", "use after free (write)", 16);
}

KT_TEST (use_after_free_read_of_1000_bytes_is_caught_with_both_stacks)
{
  use_after_free ("uaf_r_1000", "use after free (read)", 1000);
}

KT_TEST (use_after_free_write_of_1000_bytes_is_caught_with_both_stacks)
{
  use_after_free ("uaf_w_1000", "use after free (write)", 1000);
}

KT_TEST (use_after_free_read_of_8_kib_is_caught_with_both_stacks)
{
  use_after_free ("uaf_r_8192", "use after free (read)", 8192);
}

KT_TEST (use_after_free_write_of_8_kib_is_caught_with_both_stacks)
{
  use_after_free ("uaf_w_8192", "use after free (write)", 8192);
}

KT_TEST (overflow_by_one_granule_past_the_rounded_size_is_caught)
{
  int status = run_child ("overflow", NULL);
  KT_CHECK (aborted (status));
  check_report (NULL, "overflow (write)", 1008, 1000, 1008, false, -1);
}

KT_TEST (underflow_of_a_block_at_the_start_of_its_slot_is_caught)
{
  int status = run_child ("underflow", NULL);
  KT_CHECK (aborted (status));
  KT_CHECK (strstr (out, "\nread ") == NULL);
  check_report (NULL, "underflow (read)", -1, 1000, 1008, false, -1);
}

KT_TEST (double_free_of_a_guarded_block_is_reported_with_both_stacks)
{
  int status = run_child ("double_free", NULL);
  KT_CHECK (aborted (status));
  check_report ("free", "double free", 0, 100, 112, true, -1);
}

KT_TEST (invalid_free_inside_a_guarded_block_is_reported)
{
  int status = run_child ("invalid_free", NULL);
  KT_CHECK (aborted (status));
  check_report ("free", "invalid free (not the start of a live block)", 16,
                100, 112, false, -1);
}

KT_TEST (use_after_free_in_another_thread_than_the_freer_names_both)
{
  int status = run_child ("uaf_thread", NULL);
  KT_CHECK (aborted (status));
  char line[64];
  int freer = -1, thread = -1;
  uintptr_t block;
  KT_CHECK (line_starting (out, "freer ", line, sizeof line));
  KT_CHECK (sscanf (line, "freer %d", &freer) == 1);
  child_block (&block, &thread);
  KT_CHECK (freer != thread && freer > 0);
  check_report (NULL, "use after free (write)", 3, 64, 64, true, freer);
}

KT_TEST (a_full_pool_serves_from_the_pool_and_reuses_the_oldest_slot)
{
  static const char *const env[] = { "KAME_POOL_GUARD_SLOTS=16", NULL };
  int status = run_child ("oldest_first", env);
  KT_CHECK (aborted (status));
  KT_CHECK (strstr (out, "full: unguarded 1\nreused a 1, b 0\n") != NULL);
  check_report (NULL, "use after free (write)", 0, 64, 64, true, -1);
}

KT_TEST (correct_use_reports_nothing)
{
  int status = run_child ("correct", NULL);
  KT_CHECK_STR_EQ (err, "");
  KT_CHECK (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  KT_CHECK_STR_EQ (out, "usable 1008\nmalloc_usable_size 1008\n"
                   "shrunk in place 1\ngrown 1, kept 1, usable 5568\n"
                   "calloc zero 1\naligned 1 1\nguarded 5, in use 0\n"
                   "fork child 0\n");
}

/* A thread's first guarded sample keeps no unwinder state of its own:
   libunwind's fast trace, which the heap profile uses, maps and fills
   a cache of 256 KiB in each thread at its first walk; guarded
   sampling walks a step at a time instead.  Anonymous memory only:
   the walk through the new thread's first frames reads unwind tables
   of the C library that no walk read before, and the kernel maps
   those file pages 64 KiB at a time.  */
KT_TEST (a_threads_first_guarded_sample_adds_no_unwinder_cache)
{
  int status = run_child ("thread_rss", NULL);
  KT_CHECK (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  KT_CHECK_STR_EQ (out, "first sample of a thread: under 64 KiB\n");
  KT_CHECK_STR_EQ (err, "");
}

/* A fork from a signal handler that interrupted a guarded malloc or
   free, which held the pool's lock: neither the process nor its
   children hang, and the children work (kt_sampled_fork_in_handler).  */
KT_TEST (a_fork_from_a_handler_inside_a_guarded_call_does_not_hang)
{
  const char *const env[] = { kt_sampled_fork_env (), NULL };
  int status = run_child ("fork_in_handler", env);
  char why[256];
  if (kt_sampled_fork_failed (status, out, why, sizeof why))
    KT_FAILF ("%s", why);
  KT_CHECK_STR_EQ (err, "");
}

KT_TEST (stats_count_slots_blocks_and_reports_exactly)
{
  static const char *const env[] = { "KAME_POOL_GUARD_SLOTS=64",
                                     "KAME_POOL_ON_MISUSE=report", NULL };
  int status = run_child ("stats", env);
  KT_CHECK (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  KT_CHECK_STR_EQ (out, "slots 64, in use 2, allocs 5, reports 0\n"
                   "reports 1\n");
  KT_CHECK (strstr (err, "kamepool: free(): guarded block: double free at ")
            != NULL);
}

/* The heap profile at one sample per 4 KiB and guarded sampling at
   every block share the countdown: of 1000 blocks of 100 bytes, the
   profile takes about 24 (none with a chance of e^-24) and guarded
   sampling every other.  */
KT_TEST (guarded_sampling_and_the_heap_profile_run_together)
{
  static const char *const env[] = { "KAME_POOL_PROF=/nonexistent/p",
                                     "KAME_POOL_PROF_SAMPLE=4096", NULL };
  int status = run_child ("with_profile", env);
  KT_CHECK (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  KT_CHECK_STR_EQ (out, "all sampled 1, both 1\n");
  KT_CHECK_STR_EQ (err, "");
}

KT_TEST (with_on_misuse_report_a_fault_is_reported_and_the_program_goes_on)
{
  static const char *const env[] = { "KAME_POOL_ON_MISUSE=report",
                                     "KAME_POOL_GUARD_SLOTS=16", NULL };
  int status = run_child ("report_fault", env);
  KT_CHECK (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  /* Of the 16 slots, those the fill took (all but the ones that live
     blocks of the start-up hold) come back but the retired one.  */
  unsigned long got, of;
  KT_CHECK (sscanf (out, "went on, read back 9\nreports 1, guarded 1\n"
                    "then guarded %lu of %lu, in the retired slot 0\n",
                    &got, &of) == 2);
  KT_CHECK_EQ (got + 1, of);
  KT_CHECK (strncmp (err, "kamepool: guarded block: use after free (write) "
                     "at 0x", 50) == 0);
}

KT_TEST (sampling_off_guards_nothing)
{
  static const char *const env[] = { "KAME_POOL_GUARD_SAMPLE=0", NULL };
  int status = run_child ("off", env);
  KT_CHECK (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  KT_CHECK_STR_EQ (out, "slots 0\nallocs 0\n");
  KT_CHECK_STR_EQ (err, "");
}

KT_TEST (a_fault_not_ours_goes_to_the_programs_own_handler)
{
  int status = run_child ("chain", NULL);
  KT_CHECK (WIFEXITED (status) && WEXITSTATUS (status) == 42);
  KT_CHECK_STR_EQ (out, "fault\nown handler: signal 11 at 0x10\n");
  KT_CHECK_STR_EQ (err, "");
}

KT_TEST (a_fault_of_ours_is_reported_before_the_programs_handler)
{
  int status = run_child ("chain_ours", NULL);
  KT_CHECK (aborted (status));
  KT_CHECK_STR_EQ (out, "");
  KT_CHECK (strncmp (err, "kamepool: guarded block: use after free (write) "
                     "at 0x", 50) == 0);
}

KT_TEST (a_handler_installed_after_the_pool_gets_its_faults)
{
  int status = run_child ("replaced", NULL);
  KT_CHECK (WIFEXITED (status) && WEXITSTATUS (status) == 42);
  KT_CHECK (strncmp (out, "own handler: signal 11 at 0x", 28) == 0);
  KT_CHECK_STR_EQ (err, "");
}

KT_TEST (a_fault_not_ours_without_a_handler_kills_as_before)
{
#if defined __SANITIZE_ADDRESS__ || defined __SANITIZE_THREAD__
  KT_UNSUPPORTED ("a sanitizer's runtime reports the fault itself");
#endif
  int status = run_child ("default", NULL);
  KT_CHECK (WIFSIGNALED (status) && WTERMSIG (status) == SIGSEGV);
  KT_CHECK_STR_EQ (err, "");
}

KT_TEST (bad_settings_are_warned_about_and_the_defaults_kept)
{
  static const char *const env[] = { "KAME_POOL_GUARD_SAMPLE=-1",
                                     "KAME_POOL_GUARD_SLOTS=5000", NULL };
  int status = run_child ("off", env);
  KT_CHECK (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  KT_CHECK_STR_EQ (out, "slots 128\n");
  KT_CHECK_STR_EQ (err, "kamepool: KAME_POOL_GUARD_SAMPLE=-1: expected a "
                   "number of bytes from 0 (off) to 1073741824, or off; "
                   "keeping 134217728\n"
                   "kamepool: KAME_POOL_GUARD_SLOTS=5000: expected a number "
                   "of slots from 1 to 4096; keeping 128\n");
}

KT_MAIN (KT_CASE (use_after_free_read_of_16_bytes_is_caught_with_both_stacks),
         KT_CASE (use_after_free_write_of_16_bytes_is_caught_with_both_stacks),
         KT_CASE (use_after_free_read_of_1000_bytes_is_caught_with_both_stacks),
         KT_CASE (use_after_free_write_of_1000_bytes_is_caught_with_both_stacks),
         KT_CASE (use_after_free_read_of_8_kib_is_caught_with_both_stacks),
         KT_CASE (use_after_free_write_of_8_kib_is_caught_with_both_stacks),
         KT_CASE (overflow_by_one_granule_past_the_rounded_size_is_caught),
         KT_CASE (underflow_of_a_block_at_the_start_of_its_slot_is_caught),
         KT_CASE (double_free_of_a_guarded_block_is_reported_with_both_stacks),
         KT_CASE (invalid_free_inside_a_guarded_block_is_reported),
         KT_CASE (use_after_free_in_another_thread_than_the_freer_names_both),
         KT_CASE (a_full_pool_serves_from_the_pool_and_reuses_the_oldest_slot),
         KT_CASE (correct_use_reports_nothing),
         KT_CASE (a_threads_first_guarded_sample_adds_no_unwinder_cache),
         KT_CASE (a_fork_from_a_handler_inside_a_guarded_call_does_not_hang),
         KT_CASE (stats_count_slots_blocks_and_reports_exactly),
         KT_CASE (guarded_sampling_and_the_heap_profile_run_together),
         KT_CASE (with_on_misuse_report_a_fault_is_reported_and_the_program_goes_on),
         KT_CASE (sampling_off_guards_nothing),
         KT_CASE (a_fault_not_ours_goes_to_the_programs_own_handler),
         KT_CASE (a_fault_of_ours_is_reported_before_the_programs_handler),
         KT_CASE (a_handler_installed_after_the_pool_gets_its_faults),
         KT_CASE (a_fault_not_ours_without_a_handler_kills_as_before),
         KT_CASE (bad_settings_are_warned_about_and_the_defaults_kept))
