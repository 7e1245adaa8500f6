/* shared.c -- kamepool.threads tests of the shared classes (33 KiB to
   204 KiB): their chunks belong to no thread, so a block one thread
   frees serves another thread's malloc; each thread keeps the blocks
   of a class it freed on a list for its next mallocs, counted free,
   up to its share of 8 MiB (4 MiB alone, 512 KiB among sixteen) in
   all its classes, and
   gives them back when it exits; a class keeps two emptied chunks and
   releases the others at once, and those kept, the pages of those
   released and the free pages of a partly used chunk go back after
   the decay's delay with no allocation at all (mincore), or at once
   on kame_pool_trim; and a fork while another thread allocates and
   frees in a class leaves the child a class it can use.  Exact counts
   through kame_pool_get_stats, with no other thread running when they
   are read.

   Each test uses a class of its own, which no other allocation of the
   program uses, so the counts start from none.  The delay is a second
   (as purge.c's); guarded sampling is off: a guarded block is not the
   pool's.
   kptest-env: KAME_POOL_DECAY_MS=1000 KAME_POOL_GUARD_SAMPLE=0

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kame_pool.h"
#include "kptest.h"
#include "kptest-pool.h"

#define KIB ((size_t) 1024)
#define CHUNK (1024 * KIB)      /* a shared class's chunk: 4 units */
#define KEEP (1024 * KIB)       /* what the free units' decay keeps */
/* How long a test waits for the decay at most: many delays, for a
   loaded machine or a sanitizer's build.  Not a bound on speed.  */
#define WAIT_MS 10000

/* Block sizes of shared classes, one for each test (1 MiB / M rounded
   down to 1 KiB: M blocks to a chunk).  */
#define SIZE_REUSE ((size_t) 65536)     /* 16 a chunk */
#define SIZE_LOOP ((size_t) 52224)      /* 20 */
#define SIZE_EXIT ((size_t) 87040)      /* 12 */
#define SIZE_DECAY ((size_t) 74752)     /* 14 */
#define SIZE_PAGES ((size_t) 104448)    /* 10 */
#define SIZE_FORK ((size_t) 43008)      /* 24 */
#define SIZE_ALONE ((size_t) 208896)    /* 5 */
#define SIZE_CROWD ((size_t) 174080)    /* 6 */
#define SIZE_NOHEAP ((size_t) 149504)   /* 7 */
#define MAXPER 42

static void *blocks[MAXPER];
static size_t nblocks, bsize;

static void
sleep_ms (long ms)
{
  struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
  while (nanosleep (&ts, &ts) != 0)
    ;
}

/* The row of the statistics for SIZE, whose class has no chunk yet
   (every test starts from none); else SIZE_MAX.  */
static size_t
fresh_class (size_t size)
{
  kame_pool_stats_t s = kt_pool_stats ();
  size_t k = kt_pool_class (&s, size);
  return k != SIZE_MAX && s.classes[k].chunks == 0 ? k : SIZE_MAX;
}

/* Allocate NBLOCKS blocks of BSIZE into BLOCKS, each painted.  */
static void *
alloc_blocks (void *arg)
{
  (void) arg;
  for (size_t i = 0; i < nblocks; i++)
    {
      if ((blocks[i] = kame_pool_malloc (bsize)) == NULL)
        return "malloc failed";
      kt_paint (blocks[i], bsize, i);
    }
  return NULL;
}

/* Free the blocks of BLOCKS, from NBLOCKS - 1 down to FREE_DOWN_TO, in
   a thread with a heap of its own (its first malloc makes it): the
   first of them waits in its slot until it exits.  */
static size_t free_down_to;
static void *
free_blocks (void *arg)
{
  (void) arg;
  kame_pool_free (kame_pool_malloc (16));
  for (size_t i = nblocks; i-- > free_down_to;)
    {
      if (!kt_painted (blocks[i], bsize, i))
        return "a block changed while it was live";
      kame_pool_free (blocks[i]);
    }
  return NULL;
}

static void
run (void *(*fn) (void *), size_t n, size_t size, size_t down_to)
{
  nblocks = n, bsize = size, free_down_to = down_to;
  kt_in_a_thread (fn);
}

/* One thread fills a chunk and exits, a second frees every block but
   the first and exits; the main thread's malloc then gets exactly the
   blocks freed, from the one chunk.  (Owned by the first thread, as
   the classes below are, the chunk would have waited for an adopter
   with the blocks freed into it, and the main thread claimed a chunk
   of its own.)  */
KT_TEST (a_block_one_thread_frees_serves_another_thread_s_malloc)
{
  size_t k = fresh_class (SIZE_REUSE);
  KT_CHECK (k != SIZE_MAX);
  size_t per = CHUNK / SIZE_REUSE;
  run (alloc_blocks, per, SIZE_REUSE, 1);
  kame_pool_stats_t s = kt_pool_stats ();
  KT_CHECK_EQ (s.classes[k].chunks, 1);
  KT_CHECK_EQ (s.classes[k].live_blocks, per);
  uintptr_t first[MAXPER], again[MAXPER];
  for (size_t i = 1; i < per; i++)
    first[i - 1] = (uintptr_t) blocks[i];
  run (free_blocks, per, SIZE_REUSE, 1);
  s = kt_pool_stats ();
  KT_CHECK_EQ (s.classes[k].live_blocks, 1);
  KT_CHECK_EQ (s.classes[k].chunks, 1);
  KT_CHECK_EQ (s.remote_pending, 0);
  for (size_t i = 1; i < per; i++)
    {
      void *p = kame_pool_malloc (SIZE_REUSE);
      KT_CHECK (p != NULL);
      again[i - 1] = (uintptr_t) p;
    }
  s = kt_pool_stats ();
  KT_CHECK_EQ (s.classes[k].chunks, 1);
  KT_CHECK_EQ (s.classes[k].live_blocks, per);
  qsort (first, per - 1, sizeof first[0], kt_cmp_uintptr);
  qsort (again, per - 1, sizeof again[0], kt_cmp_uintptr);
  for (size_t i = 0; i + 1 < per; i++)
    KT_CHECK_EQ (again[i], first[i]);
  for (size_t i = 0; i + 1 < per; i++)
    kame_pool_free ((void *) again[i]);
  kame_pool_free (blocks[0]);
}

/* A malloc/free loop gets the block it freed last every time, and the
   statistics count it free while it waits for the next malloc, with
   the block the first malloc took for the thread's next ones (128 KiB
   of blocks of 52224 bytes: 2, one of them handed out).  */
KT_TEST (a_malloc_free_loop_gets_its_block_back_and_it_counts_free)
{
  size_t k = fresh_class (SIZE_LOOP);
  KT_CHECK (k != SIZE_MAX);
  void *p = kame_pool_malloc (SIZE_LOOP);
  KT_CHECK (p != NULL);
  kame_pool_free (p);
  kame_pool_stats_t s0 = kt_pool_stats ();
  for (int i = 0; i < 1000; i++)
    {
      void *q = kame_pool_malloc (SIZE_LOOP);
      KT_CHECK_PTR_EQ (q, p);
      kt_paint (q, SIZE_LOOP, (uintptr_t) i);
      KT_CHECK (kt_painted (q, SIZE_LOOP, (uintptr_t) i));
      kame_pool_free (q);
    }
  kame_pool_stats_t s = kt_pool_stats ();
  KT_CHECK_EQ (s.classes[k].chunks, 1);
  KT_CHECK_EQ (s.classes[k].live_blocks, 0);
  KT_CHECK_EQ (s.classes[k].free_blocks, 2);
  /* Every malloc counts in the totals, the slot's too.  */
  KT_CHECK_EQ (s.allocated_blocks - s0.allocated_blocks, 1000);
  KT_CHECK_EQ (s.allocated_bytes - s0.allocated_bytes, 1000 * SIZE_LOOP);
  KT_CHECK_EQ (s.freed_blocks - s0.freed_blocks, 1000);
}

/* A thread frees two blocks, the first of which waits in its slot, and
   exits: both are back in their chunk, which that empties, and which
   the class keeps as its one empty chunk; kame_pool_trim then releases
   it and gives its pages back.  */
KT_TEST (a_thread_s_kept_block_goes_back_when_it_exits)
{
  size_t k = fresh_class (SIZE_EXIT);
  KT_CHECK (k != SIZE_MAX);
  run (alloc_blocks, 2, SIZE_EXIT, 0);
  void *p = blocks[0];
  run (free_blocks, 2, SIZE_EXIT, 0);
  kame_pool_stats_t s = kt_pool_stats ();
  KT_CHECK_EQ (s.classes[k].chunks, 1);
  KT_CHECK_EQ (s.classes[k].live_blocks, 0);
  KT_CHECK_EQ (s.classes[k].free_blocks, 2);
  kame_pool_trim (0);
  s = kt_pool_stats ();
  KT_CHECK_EQ (s.classes[k].chunks, 0);
  KT_CHECK_EQ (kt_resident_count (p, 2 * SIZE_EXIT), 0);
}

/* The resident pages of the NBLOCKS blocks of BLOCKS, which fill
   chunks of PER blocks one after the other in address order (each
   chunk's first block starts a unit).  */
static size_t
blocks_resident (size_t per)
{
  uintptr_t pg = KT_PAGE;
  size_t n = 0;
  for (size_t i = 0; i < nblocks; i += per)
    {
      uintptr_t a = (uintptr_t) blocks[i];
      uintptr_t e = ((uintptr_t) blocks[i + per - 1] + bsize + pg - 1)
                    & ~(pg - 1);
      n += kt_resident_count ((void *) a, e - a);
    }
  return n;
}

/* Of three chunks emptied by another thread, the class keeps two
   (KT_SHARED_SPARES) and releases the third at once; after the delay,
   with no allocation at all after the frees, those kept are released
   too, and the pages of all three go back, but the megabyte of free
   units the decay keeps (KEEP, as in purge.c).  */
KT_TEST (emptied_chunks_go_back_and_their_pages_after_the_delay)
{
  size_t k = fresh_class (SIZE_DECAY);
  KT_CHECK (k != SIZE_MAX);
  size_t per = CHUNK / SIZE_DECAY;
  run (alloc_blocks, 3 * per, SIZE_DECAY, 0);
  size_t touched = blocks_resident (per);
  KT_CHECK (touched >= 3 * per * SIZE_DECAY / KT_PAGE);
  run (free_blocks, 3 * per, SIZE_DECAY, 0);
  kame_pool_stats_t s = kt_pool_stats ();
  KT_CHECK_EQ (s.classes[k].chunks, KT_SHARED_SPARES);
  KT_CHECK_EQ (s.classes[k].live_blocks, 0);
  size_t left = SIZE_MAX;
  for (long ms = 0; ms < WAIT_MS; ms += 20)
    {
      s = kt_pool_stats ();
      left = blocks_resident (per);
      if (s.classes[k].chunks == 0 && left <= KEEP / KT_PAGE
          && s.dirty_bytes <= KEEP)
        break;
      sleep_ms (20);
    }
  KT_CHECK_EQ (s.classes[k].chunks, 0);
  KT_CHECK (left <= KEEP / KT_PAGE);
  KT_CHECK (s.dirty_bytes <= KEEP);
}

/* The pages of the blocks after the first of a chunk of SIZE_PAGES
   blocks, but the one they share with it: FROM, and their length.  */
static char *
pages_after_first (size_t *len)
{
  uintptr_t pg = KT_PAGE;
  char *from = (char *) (((uintptr_t) blocks[1] + pg) & ~(pg - 1));
  *len = (size_t) ((char *) blocks[nblocks - 1] + bsize - from) & ~(pg - 1);
  return from;
}

/* The first block of the chunk kept its contents, the chunk is the
   class's only one, and the next malloc of the class gets a block of it
   again, whose pages come back.  */
static void
first_block_and_reuse (void)
{
  KT_CHECK (kt_painted (blocks[0], SIZE_PAGES, 0));
  kame_pool_stats_t s = kt_pool_stats ();
  size_t k = kt_pool_class (&s, SIZE_PAGES);
  KT_CHECK_EQ (s.classes[k].chunks, 1);
  KT_CHECK_EQ (s.classes[k].live_blocks, 1);
  void *p = kame_pool_malloc (SIZE_PAGES);
  KT_CHECK (p != NULL);
  KT_CHECK ((char *) p > (char *) blocks[0]
            && (char *) p < (char *) blocks[0] + CHUNK);
  kt_paint (p, SIZE_PAGES, 7);
  KT_CHECK (kt_painted (p, SIZE_PAGES, 7));
  kame_pool_free (p);
  kame_pool_free (blocks[0]);
}

/* One thread fills a chunk of SIZE_PAGES blocks, another frees all but
   the first: the pages of the free blocks (FROM, *LEN bytes), resident
   still; NULL if the class was used already.  */
static char *
partly_used_chunk (size_t *len)
{
  if (fresh_class (SIZE_PAGES) == SIZE_MAX)
    return NULL;
  size_t per = CHUNK / SIZE_PAGES;
  run (alloc_blocks, per, SIZE_PAGES, 1);
  run (free_blocks, per, SIZE_PAGES, 1);
  return pages_after_first (len);
}

/* Another thread frees all but the first block of a chunk: after the
   delay, with no allocation, the pages of the free blocks are given
   back and the live block's stay.  */
KT_TEST (the_free_pages_of_a_partly_used_chunk_go_back_after_the_delay)
{
  size_t len;
  char *from = partly_used_chunk (&len);
  KT_CHECK (from != NULL);
  KT_CHECK (kt_resident_count (from, len) != 0);
  size_t left = SIZE_MAX;
  for (long ms = 0; ms < WAIT_MS; ms += 20)
    {
      left = kt_resident_count (from, len);
      if (left == 0)
        break;
      sleep_ms (20);
    }
  KT_CHECK_EQ (left, 0);
  first_block_and_reuse ();
}

/* kame_pool_trim gives back at once what the decay would after the
   delay.  */
KT_TEST (trim_gives_back_the_free_pages_of_a_partly_used_chunk_at_once)
{
  size_t len;
  char *from = partly_used_chunk (&len);
  KT_CHECK (from != NULL);
  KT_CHECK (kt_resident_count (from, len) != 0);
  kame_pool_trim (0);
  KT_CHECK_EQ (kt_resident_count (from, len), 0);
  first_block_and_reuse ();
}

/* ---- fork ------------------------------------------------------------- */

static atomic_bool fork_stop;
static atomic_ulong fork_rounds;

/* Two blocks at a time, so that one of each pair goes through the
   class's lock (the slot holds one).  */
static void *
churn (void *arg)
{
  (void) arg;
  while (!atomic_load (&fork_stop))
    {
      void *a = kame_pool_malloc (SIZE_FORK);
      void *b = kame_pool_malloc (SIZE_FORK);
      if (a == NULL || b == NULL)
        return "malloc failed";
      kame_pool_free (a);
      kame_pool_free (b);
      atomic_fetch_add (&fork_rounds, 1);
    }
  return NULL;
}

/* The child allocates and frees in the class the other thread was
   using, through the lock, within 30 s (an alarm ends a child left a
   lock nobody gives back).  */
KT_TEST (a_fork_while_another_thread_uses_a_class_leaves_the_child_the_class)
{
  KT_CHECK (fresh_class (SIZE_FORK) != SIZE_MAX);
  pthread_t t;
  KT_CHECK (pthread_create (&t, NULL, churn, NULL) == 0);
  while (atomic_load (&fork_rounds) < 100)
    sched_yield ();
  for (int i = 0; i < 50; i++)
    {
      pid_t pid = fork ();
      KT_CHECK (pid >= 0);
      if (pid == 0)
        {
          alarm (30);
          void *p[3];
          for (int j = 0; j < 3; j++)
            if ((p[j] = kame_pool_malloc (SIZE_FORK)) == NULL)
              _exit (2);
          for (int j = 0; j < 3; j++)
            kame_pool_free (p[j]);
          _exit (0);
        }
      int status;
      KT_CHECK (kt_wait (pid, &status));
      KT_CHECK (WIFEXITED (status) && WEXITSTATUS (status) == 0);
    }
  atomic_store (&fork_stop, true);
  void *err;
  KT_CHECK (pthread_join (t, &err) == 0);
  KT_CHECK (err == NULL);
}

/* What a thread's lists may hold: 8 MiB (KP_SHARED_LISTS_BYTES)
   split among the threads with a heap, at least 512 KiB and at most
   4 MiB each.  */
#define LISTS (8192 * KIB)
#define LIST_MAX (4096 * KIB)
#define LIST_MIN (512 * KIB)

/* Free the N blocks of P in order, then malloc N blocks of SIZE: true
   when they come back last freed first, as from the thread's list
   alone.  */
static bool
back_from_the_list (void **p, size_t n, size_t size)
{
  for (size_t i = 0; i < n; i++)
    kame_pool_free (p[i]);
  bool lifo = true;
  for (size_t i = n; i-- > 0;)
    {
      void *q = kame_pool_malloc (size);
      lifo &= q == p[i];
      p[i] = q;
    }
  return lifo;
}

/* The only thread with a heap keeps up to 4 MiB of blocks on its lists
   (and at most 16 of a class): 16 blocks of 204 KiB (3.2 MiB) freed
   come back from the list, last freed first.  (With the 1 MiB of
   earlier versions, the sixth free put blocks back into their chunks,
   and the mallocs took them from there.)  */
KT_TEST (a_thread_alone_keeps_up_to_4_mib_on_its_lists)
{
  KT_CHECK (fresh_class (SIZE_ALONE) != SIZE_MAX);
  KT_CHECK (16 * SIZE_ALONE <= LIST_MAX);
  /* The lists empty (a mid block of the start-up's, if any).  */
  kame_pool_trim (0);
  void *p[16];
  for (size_t i = 0; i < 16; i++)
    KT_CHECK ((p[i] = kame_pool_malloc (SIZE_ALONE)) != NULL);
  KT_CHECK (back_from_the_list (p, 16, SIZE_ALONE));
  for (size_t i = 0; i < 16; i++)
    kame_pool_free (p[i]);
}

/* Threads that took a heap and wait, so that sixteen threads have
   one.  */
static pthread_barrier_t crowd_in, crowd_out;
static void *
crowd (void *arg)
{
  (void) arg;
  void *p = kame_pool_malloc (16);
  if (p == NULL)
    return "malloc failed";
  kame_pool_free (p);
  pthread_barrier_wait (&crowd_in);
  pthread_barrier_wait (&crowd_out);
  return NULL;
}

/* Fifteen threads besides the caller, each with a heap, in T, waiting
   till crowd_end.  */
enum { OTHERS = 15 };
static void
crowd_start (pthread_t t[OTHERS])
{
  KT_CHECK (pthread_barrier_init (&crowd_in, NULL, OTHERS + 1) == 0);
  KT_CHECK (pthread_barrier_init (&crowd_out, NULL, OTHERS + 1) == 0);
  for (int i = 0; i < OTHERS; i++)
    KT_CHECK (pthread_create (&t[i], NULL, crowd, NULL) == 0);
  pthread_barrier_wait (&crowd_in);
}

static void
crowd_end (pthread_t t[OTHERS])
{
  pthread_barrier_wait (&crowd_out);
  for (int i = 0; i < OTHERS; i++)
    {
      void *err;
      KT_CHECK (pthread_join (t[i], &err) == 0);
      KT_CHECK (err == NULL);
    }
  KT_CHECK (pthread_barrier_destroy (&crowd_in) == 0);
  KT_CHECK (pthread_barrier_destroy (&crowd_out) == 0);
}

/* With sixteen threads with a heap, a thread's lists hold 512 KiB: of
   four blocks of 170 KiB freed, the fourth finds the list full (three
   take 510 KiB) and goes back with the list's first half (the third
   block), so the mallocs get the second and the first from the list,
   then the third and fourth from the chunk.  A child forked then has
   one thread, whose list holds 16 blocks of 204 KiB again (3.2 MiB);
   and once the other threads have exited, the parent's list holds all
   four.  */
KT_TEST (sixteen_threads_keep_512_kib_each_and_a_forked_child_4_mib)
{
  KT_CHECK (fresh_class (SIZE_CROWD) != SIZE_MAX);
  KT_CHECK (LISTS / (OTHERS + 1) == LIST_MIN);
  KT_CHECK (3 * SIZE_CROWD <= LIST_MIN && 4 * SIZE_CROWD > LIST_MIN
            && 4 * SIZE_CROWD <= LIST_MAX);
  kame_pool_trim (0);
  pthread_t t[OTHERS];
  crowd_start (t);
  void *p[4];
  for (size_t i = 0; i < 4; i++)
    KT_CHECK ((p[i] = kame_pool_malloc (SIZE_CROWD)) != NULL);
  void *a = p[0], *b = p[1], *c = p[2], *d = p[3];
  for (size_t i = 0; i < 4; i++)
    kame_pool_free (p[i]);
  void *q[4];
  for (size_t i = 0; i < 4; i++)
    KT_CHECK ((q[i] = kame_pool_malloc (SIZE_CROWD)) != NULL);
  KT_CHECK_PTR_EQ (q[0], b);
  KT_CHECK_PTR_EQ (q[1], a);
  KT_CHECK ((q[2] == c && q[3] == d) || (q[2] == d && q[3] == c));
  KT_CHECK (fresh_class (SIZE_ALONE) != SIZE_MAX);
  pid_t pid = fork ();
  KT_CHECK (pid >= 0);
  if (pid == 0)
    {
      void *r[16];
      for (size_t i = 0; i < 16; i++)
        if ((r[i] = kame_pool_malloc (SIZE_ALONE)) == NULL)
          _exit (2);
      _exit (back_from_the_list (r, 16, SIZE_ALONE) ? 0 : 1);
    }
  int status;
  KT_CHECK (kt_wait (pid, &status));
  KT_CHECK (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  crowd_end (t);
  KT_CHECK (back_from_the_list (q, 4, SIZE_CROWD));
  for (size_t i = 0; i < 4; i++)
    kame_pool_free (q[i]);
}

/* Sizes of two more classes: four blocks of each fit in 512 KiB.  */
#define SIZE_MOVE_A ((size_t) 131072)
#define SIZE_MOVE_B ((size_t) 115712)

/* In a thread with a heap of its own: a block of each of the classes
   of SIZE_MOVE_A and SIZE_MOVE_B, which must be the first of BLOCKS
   and none of BLOCKS[1] on (the blocks of the second class).  */
static void *
take_one_of_each (void *arg)
{
  (void) arg;
  void *a = kame_pool_malloc (SIZE_MOVE_A);
  void *b = kame_pool_malloc (SIZE_MOVE_B);
  const char *err = NULL;
  if (a == NULL || b == NULL)
    err = "malloc failed";
  else if (a != blocks[0])
    err = "the freed block of the first class was not in its chunk";
  for (size_t i = 1; err == NULL && i < nblocks; i++)
    if (b == blocks[i])
      err = "a block on the main thread's list served another thread";
  kame_pool_free (a);
  kame_pool_free (b);
  return (void *) err;
}

/* A thread's lists hold its share in all, whichever classes hold it:
   with sixteen threads, four blocks of 128 KiB fill the share (512
   KiB) on one class's list, and once the mallocs have taken them back,
   four blocks of 113 KiB of another class freed all go onto that
   class's list (the first class's room given up), where no other
   thread finds them; the first class's blocks freed then find no
   room (the second's list holds 452 KiB) and go back to their chunk,
   where another thread's malloc finds the last one freed.  */
KT_TEST (a_thread_s_share_moves_with_it_from_class_to_class)
{
  enum { N = 4 };
  KT_CHECK (fresh_class (SIZE_MOVE_A) != SIZE_MAX);
  KT_CHECK (fresh_class (SIZE_MOVE_B) != SIZE_MAX);
  KT_CHECK (N * SIZE_MOVE_A <= LIST_MIN && N * SIZE_MOVE_B <= LIST_MIN
            && (N * SIZE_MOVE_B + SIZE_MOVE_A) > LIST_MIN);
  kame_pool_trim (0);
  pthread_t t[OTHERS];
  crowd_start (t);
  void *a[N], *b[N];
  for (size_t i = 0; i < N; i++)
    {
      KT_CHECK ((a[i] = kame_pool_malloc (SIZE_MOVE_A)) != NULL);
      KT_CHECK ((b[i] = kame_pool_malloc (SIZE_MOVE_B)) != NULL);
    }
  KT_CHECK (back_from_the_list (a, N, SIZE_MOVE_A));
  for (size_t i = 0; i < N; i++)
    kame_pool_free (b[i]);
  for (size_t i = 0; i < N; i++)
    kame_pool_free (a[i]);
  blocks[0] = a[N - 1];
  for (size_t i = 0; i < N; i++)
    blocks[1 + i] = b[i];
  nblocks = 1 + N;
  kt_in_a_thread (take_one_of_each);
  bool lifo = true;
  for (size_t i = N; i-- > 0;)
    {
      void *q = kame_pool_malloc (SIZE_MOVE_B);
      lifo &= q == b[i];
      b[i] = q;
    }
  KT_CHECK (lifo);
  crowd_end (t);
  for (size_t i = 0; i < N; i++)
    kame_pool_free (b[i]);
}

/* Free the block of BLOCKS[0] in a thread that never allocated (it
   has no heap, so no list): straight back to its chunk.  */
static void *
free_only (void *arg)
{
  (void) arg;
  if (!kt_painted (blocks[0], bsize, 0))
    return "the block changed while it was live";
  kame_pool_free (blocks[0]);
  return NULL;
}

/* A thread with no heap frees a block of a shared class: the block is
   back in its chunk at once (not live, not pending), and the main
   thread's next malloc of the class, with its own list empty, gets it
   from there.  */
KT_TEST (a_thread_with_no_heap_frees_into_the_chunk)
{
  size_t k = fresh_class (SIZE_NOHEAP);
  KT_CHECK (k != SIZE_MAX);
  KT_CHECK ((blocks[0] = kame_pool_malloc (SIZE_NOHEAP)) != NULL);
  bsize = SIZE_NOHEAP;
  kt_paint (blocks[0], bsize, 0);
  kt_in_a_thread (free_only);
  kame_pool_stats_t s = kt_pool_stats ();
  KT_CHECK_EQ (s.classes[k].live_blocks, 0);
  KT_CHECK_EQ (s.classes[k].free_blocks, 1);
  KT_CHECK_EQ (s.remote_pending, 0);
  void *p = kame_pool_malloc (SIZE_NOHEAP);
  KT_CHECK_PTR_EQ (p, blocks[0]);
  kame_pool_free (p);
}

KT_MAIN (KT_CASE (a_block_one_thread_frees_serves_another_thread_s_malloc),
         KT_CASE (a_malloc_free_loop_gets_its_block_back_and_it_counts_free),
         KT_CASE (a_thread_s_kept_block_goes_back_when_it_exits),
         KT_CASE (emptied_chunks_go_back_and_their_pages_after_the_delay),
         KT_CASE (the_free_pages_of_a_partly_used_chunk_go_back_after_the_delay),
         KT_CASE (trim_gives_back_the_free_pages_of_a_partly_used_chunk_at_once),
         KT_CASE (a_fork_while_another_thread_uses_a_class_leaves_the_child_the_class),
         KT_CASE (a_thread_alone_keeps_up_to_4_mib_on_its_lists),
         KT_CASE (sixteen_threads_keep_512_kib_each_and_a_forked_child_4_mib),
         KT_CASE (a_thread_with_no_heap_frees_into_the_chunk),
         KT_CASE (a_thread_s_share_moves_with_it_from_class_to_class))
