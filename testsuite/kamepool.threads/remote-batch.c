/* remote-batch.c -- kamepool.threads tests of the batch of remote
   frees: a thread's frees into chunks it does not own wait in its
   batch, counted as free (remote_pending), until it publishes them: at
   its exit, before a fork, in kame_pool_trim.  Exact counts through
   kame_pool_get_stats, with no other thread running when they are
   read.

   Guarded sampling is off: these tests assert where the pool places
   blocks and what it counts, and a guarded block is not the pool's.
   kptest-env: KAME_POOL_GUARD_SAMPLE=0

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"             /* KP_HARDEN */
#include "kame_pool.h"
#include "kptest.h"
#include "kptest-pool.h"

/* A class no other allocation of these tests uses, whose batch bound
   (16 KiB of blocks, at most 128) is 44 blocks: N blocks fit in one
   batch, and in one chunk.  */
#define SIZE ((size_t) 368)
#define N 40

static void *blk[N];
static pthread_barrier_t bar, bar2;
/* The barriers of free_all_and_wait: the blocks are freed; the main
   thread has looked.  */
static pthread_barrier_t *freed_bar, *looked_bar;

static bool
all_painted (void)
{
  for (size_t i = 0; i < N; i++)
    if (!kt_painted (blk[i], SIZE, i))
      return false;
  return true;
}

static bool
alloc_all (void)
{
  for (size_t i = 0; i < N; i++)
    {
      blk[i] = kame_pool_malloc (SIZE);
      if (blk[i] == NULL)
        return false;
      kt_paint (blk[i], SIZE, i);
    }
  return true;
}

/* Allocate the N blocks, with the statistics before (*S0) and after
   (*S1) and the row *K of their class: true when they count N more
   live blocks there.  */
static bool
alloc_all_counted (kame_pool_stats_t *s0, kame_pool_stats_t *s1, size_t *k)
{
  *s0 = kt_pool_stats ();
  *k = kt_pool_class (s0, SIZE);
  if (*k == SIZE_MAX || !alloc_all ())
    return false;
  *s1 = kt_pool_stats ();
  return s1->classes[*k].live_blocks - s0->classes[*k].live_blocks == N;
}

/* Free the N blocks, wait for the main thread to look, and exit with
   them still in the batch.  */
static void *
free_all_and_wait (void *arg)
{
  (void) arg;
  if (!all_painted ())
    return "block corrupted";
  for (size_t i = 0; i < N; i++)
    kame_pool_free (blk[i]);
  pthread_barrier_wait (freed_bar);
  pthread_barrier_wait (looked_bar);
  return NULL;
}

/* Start a thread that runs free_all_and_wait with BAR for both of its
   waits, and wait until it has freed the blocks.  */
static bool
start_free_all (pthread_t *t)
{
  if (pthread_barrier_init (&bar, NULL, 2) != 0)
    return false;
  freed_bar = looked_bar = &bar;
  if (pthread_create (t, NULL, free_all_and_wait, NULL) != 0)
    return false;
  pthread_barrier_wait (&bar);
  return true;
}

/* Let thread T of start_free_all exit; true if it did without a
   complaint.  */
static bool
join_free_all (pthread_t t)
{
  void *ret;
  pthread_barrier_wait (&bar);
  return pthread_join (t, &ret) == 0 && ret == NULL;
}

/* The trim collects what the exited thread published: nothing pending,
   every block free in the owner's chunk, which the trim released (its
   only blocks were the N).  S0 and S1 are alloc_all_counted's.  */
static void
check_trim_collects_all (const kame_pool_stats_t *s0,
                         const kame_pool_stats_t *s1, size_t k)
{
  kame_pool_trim (0);
  kame_pool_stats_t s = kt_pool_stats ();
  KT_CHECK_EQ (s.remote_pending, s0->remote_pending);
  KT_CHECK_EQ (s.classes[k].live_blocks, s0->classes[k].live_blocks);
  KT_CHECK_EQ (s.classes[k].chunks, s1->classes[k].chunks);
}

/* The main thread owns the blocks; another thread frees them all and
   exits: its exit publishes them, and the owner's collect (here the
   trim's) takes them back.  */
KT_TEST (frees_in_the_batch_of_an_exiting_thread_reach_their_owner)
{
  kame_pool_stats_t s0, s1;
  size_t k;
  pthread_t t;
  KT_CHECK (alloc_all_counted (&s0, &s1, &k));
  KT_CHECK (start_free_all (&t));
  /* In the other thread's batch: free, pending, not yet the owner's.  */
  kame_pool_stats_t s2 = kt_pool_stats ();
  KT_CHECK_EQ (s2.classes[k].live_blocks, s0.classes[k].live_blocks);
  KT_CHECK_EQ (s2.classes[k].free_blocks - s1.classes[k].free_blocks, N);
  KT_CHECK_EQ (s2.remote_pending - s1.remote_pending, N);
  KT_CHECK_EQ (s2.classes[k].chunks, s1.classes[k].chunks);
  KT_CHECK (join_free_all (t));

  /* Published at the exit, on the owner's remote list.  */
  kame_pool_stats_t s3 = kt_pool_stats ();
  KT_CHECK_EQ (s3.classes[k].live_blocks, s0.classes[k].live_blocks);
  KT_CHECK_EQ (s3.remote_pending - s1.remote_pending, N);
  check_trim_collects_all (&s0, &s1, k);
  pthread_barrier_destroy (&bar);
}

/* A write into the head of a published batch (the block its thread
   freed last) past its link and tag, where the push wrote the batch's
   length and last block: the owner's collect finds the header wrong
   and walks the batch block by block, which takes all N back, as
   exactly as the first test does.  Hardened only: a plain build trusts
   the header.  */
KT_TEST (a_batch_whose_header_was_written_to_is_collected_whole)
{
#if !KP_HARDEN
  KT_UNSUPPORTED ("built with --disable-hardening");
#else
  kame_pool_stats_t s0, s1;
  size_t k;
  pthread_t t;
  KT_CHECK (alloc_all_counted (&s0, &s1, &k));
  KT_CHECK (start_free_all (&t));
  KT_CHECK (join_free_all (t));
  kame_pool_stats_t s2 = kt_pool_stats ();
  KT_CHECK_EQ (s2.remote_pending - s1.remote_pending, N);
  char *volatile head = blk[N - 1];
  memset (head + 16, 0xa5, 16);
  check_trim_collects_all (&s0, &s1, k);
  pthread_barrier_destroy (&bar);
#endif
}

/* Blocks of the class that a thread's first malloc of it leaves on
   its new chunk's list: kp_chunk_carve links a page of blocks (4096 /
   368 = 11) and the malloc takes one.  */
#define CARVED_LEFT (4096 / SIZE - 1)

/* Allocate one block of the class first when OWN_FIRST, then free the
   N blocks; then allocate blocks of their class into TAKEN, OWN_FIRST
   ? CARVED_LEFT + N : N of them, and free those.  The main thread
   looks at each of the three steps.  */
static bool own_first;
static void *taken[CARVED_LEFT + N];

static void *
free_take_and_free (void *arg)
{
  (void) arg;
  void *own = NULL;
  if (own_first && (own = kame_pool_malloc (SIZE)) == NULL)
    return "malloc failed";
  if (!all_painted ())
    return "block corrupted";
  for (size_t i = 0; i < N; i++)
    kame_pool_free (blk[i]);
  pthread_barrier_wait (&bar);          /* freed */
  pthread_barrier_wait (&bar);          /* looked */
  size_t m = own_first ? CARVED_LEFT + N : N;
  for (size_t i = 0; i < m; i++)
    if ((taken[i] = kame_pool_malloc (SIZE)) == NULL)
      return "malloc failed";
  pthread_barrier_wait (&bar);          /* taken */
  pthread_barrier_wait (&bar);          /* looked */
  for (size_t i = 0; i < m; i++)
    kame_pool_free (taken[i]);
  kame_pool_free (own);
  return NULL;
}

/* Is P one of the N blocks?  */
static bool
is_blk (const void *p)
{
  for (size_t i = 0; i < N; i++)
    if (p == blk[i])
      return true;
  return false;
}

/* Allocate the N blocks (statistics before in *S0, after in *S1, the
   class's row in *K) and run free_take_and_free with OWN, checking the
   batch after the frees; in *S3 the statistics after the takes, for
   the caller to check with TAKEN.  The thread has exited on return.  */
static void
run_free_take_and_free (bool own, kame_pool_stats_t *s0,
                        kame_pool_stats_t *s1, kame_pool_stats_t *s3,
                        size_t *k)
{
  KT_CHECK (alloc_all_counted (s0, s1, k));
  own_first = own;
  KT_CHECK (pthread_barrier_init (&bar, NULL, 2) == 0);
  pthread_t t;
  KT_CHECK (pthread_create (&t, NULL, free_take_and_free, NULL) == 0);
  pthread_barrier_wait (&bar);          /* freed */
  kame_pool_stats_t s2 = kt_pool_stats ();
  KT_CHECK_EQ (s2.remote_pending - s1->remote_pending, N);
  KT_CHECK_EQ (s2.classes[*k].live_blocks,
               s0->classes[*k].live_blocks + (own ? 1 : 0));
  pthread_barrier_wait (&bar);          /* looked */
  pthread_barrier_wait (&bar);          /* taken */
  *s3 = kt_pool_stats ();
  pthread_barrier_wait (&bar);          /* looked */
  void *ret;
  KT_CHECK (pthread_join (t, &ret) == 0);
  KT_CHECK (ret == NULL);
  pthread_barrier_destroy (&bar);
}

/* A thread that frees the main thread's blocks and then allocates
   blocks of their class, with a chunk of that class of its own whose
   list runs dry, gets those very blocks back from its batch, the one
   it freed last first: no further chunk is claimed, nothing is
   published, and the blocks count as live again.  Freed again, they
   wait in the batch until the thread exits, and the trim collects
   them.  */
KT_TEST (a_thread_s_malloc_takes_back_the_blocks_in_its_batch)
{
  kame_pool_stats_t s0, s1, s3;
  size_t k;
  run_free_take_and_free (true, &s0, &s1, &s3, &k);
  for (size_t i = 0; i < CARVED_LEFT; i++)
    if (is_blk (taken[i]))
      KT_FAILF ("malloc %zu gave %p from the batch before the thread's"
                " own chunk ran dry", i, taken[i]);
  for (size_t i = 0; i < N; i++)
    if (taken[CARVED_LEFT + i] != blk[N - 1 - i])
      KT_FAILF ("malloc %zu gave %p, not %p from the batch",
                CARVED_LEFT + i, taken[CARVED_LEFT + i], blk[N - 1 - i]);
  KT_CHECK_EQ (s3.remote_pending, s1.remote_pending);
  KT_CHECK_EQ (s3.classes[k].live_blocks - s0.classes[k].live_blocks,
               1 + CARVED_LEFT + N);
  KT_CHECK_EQ (s3.classes[k].chunks, s1.classes[k].chunks + 1);
  /* Freed into the batch again, published at the exit.  */
  kame_pool_stats_t s4 = kt_pool_stats ();
  KT_CHECK_EQ (s4.remote_pending - s1.remote_pending, N);
  KT_CHECK_EQ (s4.classes[k].live_blocks, s0.classes[k].live_blocks);
  check_trim_collects_all (&s0, &s1, k);
}

/* The same with no chunk of the class of its own: the thread's first
   malloc of the class gets it a chunk instead, and publishes the
   batch, so that the blocks' owner collects them.  A block handed to a
   thread shares its lines with its neighbours, which other threads may
   hold: taken back and written to, it would put both threads on one
   line (bench/falseshare, passive).  */
KT_TEST (a_thread_with_no_chunk_of_the_class_allocates_from_a_new_one)
{
  kame_pool_stats_t s0, s1, s3;
  size_t k;
  run_free_take_and_free (false, &s0, &s1, &s3, &k);
  for (size_t i = 0; i < N; i++)
    {
      if (is_blk (taken[i]))
        KT_FAILF ("malloc %zu gave %p from the batch", i, taken[i]);
      KT_CHECK_EQ ((uintptr_t) taken[i] >> 18, (uintptr_t) taken[0] >> 18);
    }
  KT_CHECK ((uintptr_t) taken[0] >> 18 != (uintptr_t) blk[0] >> 18);
  /* Published onto the main thread's chunk, still to be collected.  */
  KT_CHECK_EQ (s3.remote_pending - s1.remote_pending, N);
  KT_CHECK_EQ (s3.classes[k].live_blocks - s0.classes[k].live_blocks, N);
  KT_CHECK_EQ (s3.classes[k].chunks, s1.classes[k].chunks + 1);
  check_trim_collects_all (&s0, &s1, k);
}

/* Allocate the N blocks, wait until another thread has freed them into
   its batch, and exit: the chunk is abandoned with N blocks in use.  */
static void *
alloc_and_exit (void *arg)
{
  (void) arg;
  if (!alloc_all ())
    return "malloc failed";
  pthread_barrier_wait (&bar2);         /* allocated */
  pthread_barrier_wait (&bar);          /* freed */
  return NULL;
}

static void *
idle_at_barrier (void *arg)
{
  pthread_barrier_wait (arg);
  return NULL;
}

/* The C library allocates for its own thread machinery (with the pool,
   when it is interposed: a thread's TLS vector, in a global-dynamic
   build) and keeps it with the stacks it caches: run two threads at
   once before taking a baseline, so that the test's two find theirs.  */
static bool
settle_two_threads (void)
{
  pthread_barrier_t b;
  pthread_t t[2];
  if (pthread_barrier_init (&b, NULL, 2) != 0
      || pthread_create (&t[0], NULL, idle_at_barrier, &b) != 0
      || pthread_create (&t[1], NULL, idle_at_barrier, &b) != 0)
    return false;
  bool ok = pthread_join (t[0], NULL) == 0 && pthread_join (t[1], NULL) == 0;
  pthread_barrier_destroy (&b);
  return ok;
}

/* A thread frees the blocks of another into its batch, and their owner
   exits before the batch is published: the publish finds the chunk
   abandoned, takes it over, and releases it.  */
KT_TEST (a_batch_for_an_owner_that_has_exited_is_reclaimed)
{
  KT_CHECK (settle_two_threads ());
  kame_pool_stats_t s0 = kt_pool_stats ();
  size_t k = kt_pool_class (&s0, SIZE);
  KT_CHECK (k != SIZE_MAX);
  KT_CHECK (pthread_barrier_init (&bar, NULL, 3) == 0
            && pthread_barrier_init (&bar2, NULL, 2) == 0);
  freed_bar = &bar;
  looked_bar = &bar2;
  pthread_t owner, freer;
  KT_CHECK (pthread_create (&owner, NULL, alloc_and_exit, NULL) == 0);
  pthread_barrier_wait (&bar2);         /* allocated */
  KT_CHECK (pthread_create (&freer, NULL, free_all_and_wait, NULL) == 0);
  pthread_barrier_wait (&bar);          /* in the freer's batch */
  void *ret;
  KT_CHECK (pthread_join (owner, &ret) == 0);
  KT_CHECK (ret == NULL);

  /* The owner is gone, its chunk abandoned with N blocks in use, all
     of them free and pending in the freer's batch.  */
  kame_pool_stats_t s1 = kt_pool_stats ();
  KT_CHECK_EQ (s1.classes[k].chunks - s0.classes[k].chunks, 1);
  KT_CHECK_EQ (s1.classes[k].live_blocks, s0.classes[k].live_blocks);
  KT_CHECK_EQ (s1.remote_pending - s0.remote_pending, N);
  KT_CHECK_EQ (s1.abandoned_chunks - s0.abandoned_chunks, 1);

  pthread_barrier_wait (&bar2);         /* looked */
  KT_CHECK (pthread_join (freer, &ret) == 0);
  KT_CHECK (ret == NULL);
  /* Its exit published the batch onto the abandoned chunk: taken over,
     collected and released.  */
  kame_pool_stats_t s2 = kt_pool_stats ();
  KT_CHECK_EQ (s2.classes[k].chunks, s0.classes[k].chunks);
  KT_CHECK_EQ (s2.classes[k].live_blocks, s0.classes[k].live_blocks);
  KT_CHECK_EQ (s2.remote_pending, s0.remote_pending);
  KT_CHECK_EQ (s2.abandoned_chunks, s0.abandoned_chunks);
  KT_CHECK_EQ (s2.chunks_live, s0.chunks_live);
  KT_CHECK_EQ (s2.units_live, s0.units_live);
  pthread_barrier_destroy (&bar);
  pthread_barrier_destroy (&bar2);
}

/* Allocate the N blocks and keep them until barrier 1; then trim (the
   collect of what the main thread freed) and wait for barrier 2.  */
static void *
alloc_and_wait (void *arg)
{
  (void) arg;
  if (!alloc_all ())
    return "malloc failed";
  pthread_barrier_wait (&bar);          /* 0: allocated */
  pthread_barrier_wait (&bar);          /* 1: forked */
  kame_pool_trim (0);
  pthread_barrier_wait (&bar);          /* 2: collected */
  return NULL;
}

/* The child's checks; its exit status: 0, or the number of the first
   that failed.  */
static int
child_checks (const kame_pool_stats_t *before, size_t k)
{
  kame_pool_stats_t s = kt_pool_stats ();
  /* The half the parent freed is pending on the chunk of a thread the
     child does not have; the other half is live.  */
  if (s.remote_pending - before->remote_pending != N / 2)
    return 1;
  if (before->classes[k].live_blocks - s.classes[k].live_blocks != N / 2)
    return 2;
  for (size_t i = N / 2; i < N; i++)
    if (!kt_painted (blk[i], SIZE, i))
      return 3;
  /* The child allocates and frees in its own chunks...  */
  enum { M = 3000 };
  static void *mine[M];
  for (size_t i = 0; i < M; i++)
    {
      mine[i] = kame_pool_malloc (i % 2 ? SIZE : 64);
      if (mine[i] == NULL)
        return 4;
      kt_paint (mine[i], i % 2 ? SIZE : 64, i);
    }
  for (size_t i = 0; i < M; i++)
    if (!kt_painted (mine[i], i % 2 ? SIZE : 64, i))
      return 5;
  kame_pool_stats_t m = kt_pool_stats ();
  if (m.classes[k].live_blocks - s.classes[k].live_blocks != M / 2)
    return 6;
  for (size_t i = 0; i < M; i++)
    kame_pool_free (mine[i]);
  /* ... and frees the rest of the parent thread's blocks, which wait
     in its batch, then on that chunk's list: all free.  */
  for (size_t i = N / 2; i < N; i++)
    kame_pool_free (blk[i]);
  kame_pool_trim (0);
  kame_pool_stats_t e = kt_pool_stats ();
  if (before->classes[k].live_blocks - e.classes[k].live_blocks != N)
    return 7;
  if (e.remote_pending - before->remote_pending != N)
    return 8;
  return 0;
}

/* The main thread frees half of another thread's blocks into its
   batch and forks: the child starts consistent (the batch was
   published before the fork), allocates and frees, and its statistics
   add up; the parent's owner collects the half as usual.  */
KT_TEST (fork_with_a_non_empty_batch_leaves_the_child_consistent)
{
  kame_pool_stats_t s0 = kt_pool_stats ();
  size_t k = kt_pool_class (&s0, SIZE);
  KT_CHECK (k != SIZE_MAX);
  KT_CHECK (pthread_barrier_init (&bar, NULL, 2) == 0);
  pthread_t owner;
  KT_CHECK (pthread_create (&owner, NULL, alloc_and_wait, NULL) == 0);
  pthread_barrier_wait (&bar);          /* 0 */
  kame_pool_stats_t s1 = kt_pool_stats ();
  for (size_t i = 0; i < N / 2; i++)
    kame_pool_free (blk[i]);
  kame_pool_stats_t s2 = kt_pool_stats ();
  KT_CHECK_EQ (s2.remote_pending - s1.remote_pending, N / 2);

  pid_t pid = fork ();
  KT_CHECK (pid >= 0);
  if (pid == 0)
    _exit (child_checks (&s1, k));
  int status;
  KT_CHECK (waitpid (pid, &status, 0) == pid);
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    KT_FAILF ("child: status %d, exit %d", status,
              WIFEXITED (status) ? WEXITSTATUS (status) : -1);

  /* The parent: the half is pending until the owner collects it.  */
  kame_pool_stats_t s3 = kt_pool_stats ();
  KT_CHECK_EQ (s3.remote_pending - s1.remote_pending, N / 2);
  pthread_barrier_wait (&bar);          /* 1 */
  pthread_barrier_wait (&bar);          /* 2 */
  kame_pool_stats_t s4 = kt_pool_stats ();
  KT_CHECK_EQ (s4.remote_pending, s1.remote_pending);
  KT_CHECK_EQ (s4.classes[k].live_blocks - s0.classes[k].live_blocks, N / 2);
  void *ret;
  KT_CHECK (pthread_join (owner, &ret) == 0);
  KT_CHECK (ret == NULL);
  for (size_t i = N / 2; i < N; i++)
    {
      KT_CHECK (kt_painted (blk[i], SIZE, i));
      kame_pool_free (blk[i]);
    }
  kame_pool_trim (0);
  kame_pool_stats_t s5 = kt_pool_stats ();
  KT_CHECK_EQ (s5.classes[k].live_blocks, s0.classes[k].live_blocks);
  KT_CHECK_EQ (s5.remote_pending, s0.remote_pending);
  KT_CHECK_EQ (s5.classes[k].chunks, s0.classes[k].chunks);
  pthread_barrier_destroy (&bar);
}

/* The bound of a slot, for blocks of BOUND_SIZE bytes freed BOUND_N at
   a time (set by each test).  Two classes no other test uses: 352
   bytes, whose slots hold 46 blocks (16 KiB) in a thread that only
   frees, and 128 in a thread that allocates blocks of the class too
   (the 64 KiB would be 186); and 112 bytes, whose slots hold 128
   blocks either way (16 KiB would be 146).  */
#define BOUND_MAX 200

static size_t bound_size, bound_n;
static void *bound_blk[BOUND_MAX];

/* Free the bound_n blocks of the main thread, after allocating a block
   of their class first when ARG is not NULL; wait at BAR for the main
   thread to look.  */
static void *
free_into_one_slot (void *arg)
{
  void *own = NULL;
  if (arg != NULL && (own = kame_pool_malloc (bound_size)) == NULL)
    return "malloc failed";
  for (size_t i = 0; i < bound_n; i++)
    kame_pool_free (bound_blk[i]);
  pthread_barrier_wait (&bar);          /* freed */
  pthread_barrier_wait (&bar);          /* looked */
  kame_pool_free (own);
  return NULL;
}

/* The main thread allocates N blocks of SIZE bytes, all in one chunk;
   another thread, which allocates blocks of the class itself when
   ALLOCATES, frees them all into one slot of its batch.  Every time
   the slot reaches its bound it is published, and the owner's trim
   collects what was: what stays pending is what the slot still holds,
   HELD.  */
static void
check_slot_bound (size_t size, size_t n, bool allocates, size_t held)
{
  KT_CHECK (n <= BOUND_MAX);
  bound_size = size;
  bound_n = n;
  kame_pool_stats_t s0 = kt_pool_stats ();
  size_t k = kt_pool_class (&s0, size);
  KT_CHECK (k != SIZE_MAX);
  /* All in one chunk of one 256 KiB unit: one slot takes them all.  */
  for (size_t i = 0; i < n; i++)
    {
      KT_CHECK ((bound_blk[i] = kame_pool_malloc (size)) != NULL);
      KT_CHECK_EQ ((uintptr_t) bound_blk[i] >> 18,
                   (uintptr_t) bound_blk[0] >> 18);
    }
  kame_pool_stats_t s1 = kt_pool_stats ();
  KT_CHECK (pthread_barrier_init (&bar, NULL, 2) == 0);
  pthread_t t;
  KT_CHECK (pthread_create (&t, NULL, free_into_one_slot,
                            allocates ? "allocates" : NULL) == 0);
  pthread_barrier_wait (&bar);          /* freed */
  kame_pool_stats_t s2 = kt_pool_stats ();
  KT_CHECK_EQ (s2.remote_pending - s1.remote_pending, n);
  kame_pool_trim (0);
  kame_pool_stats_t s3 = kt_pool_stats ();
  KT_CHECK_EQ (s3.remote_pending - s1.remote_pending, held);
  KT_CHECK_EQ (s3.classes[k].live_blocks - s0.classes[k].live_blocks,
               (allocates ? 1 : 0));
  pthread_barrier_wait (&bar);          /* looked */
  void *ret;
  KT_CHECK (pthread_join (t, &ret) == 0);
  KT_CHECK (ret == NULL);
  /* The exit published the rest; the other thread's chunk went with
     it, the main thread's stays as its active chunk of the class.  */
  check_trim_collects_all (&s0, &s1, k);
  pthread_barrier_destroy (&bar);
}

/* 130 = 2 x 46 + 38.  */
KT_TEST (a_slot_of_a_thread_that_only_frees_holds_16_kib)
{
  check_slot_bound (352, 130, false, 130 - 2 * (16384 / 352));
}

/* 130 = 128 + 2.  */
KT_TEST (a_slot_of_a_thread_that_allocates_the_class_holds_128_blocks)
{
  check_slot_bound (352, 130, true, 130 - 128);
}

/* 200 = 128 + 72 (a bound of 64 blocks would leave 8).  */
KT_TEST (a_slot_of_small_blocks_holds_128_in_a_thread_that_only_frees)
{
  check_slot_bound (112, 200, false, 200 - 128);
}

KT_MAIN (KT_CASE (frees_in_the_batch_of_an_exiting_thread_reach_their_owner),
         KT_CASE (a_batch_whose_header_was_written_to_is_collected_whole),
         KT_CASE (a_thread_s_malloc_takes_back_the_blocks_in_its_batch),
         KT_CASE (a_thread_with_no_chunk_of_the_class_allocates_from_a_new_one),
         KT_CASE (a_batch_for_an_owner_that_has_exited_is_reclaimed),
         KT_CASE (fork_with_a_non_empty_batch_leaves_the_child_consistent),
         KT_CASE (a_slot_of_a_thread_that_only_frees_holds_16_kib),
         KT_CASE (a_slot_of_a_thread_that_allocates_the_class_holds_128_blocks),
         KT_CASE (a_slot_of_small_blocks_holds_128_in_a_thread_that_only_frees))
