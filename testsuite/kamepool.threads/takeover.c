/* takeover.c -- kamepool.threads tests of a chunk that a free takes
   over.  From an exited thread, a thread that already has a partial
   chunk of the class fosters it, so that its next refill collects the
   remote frees that emptied it and releases it, instead of keeping it
   behind its own partial chunks with those frees uncollected; the
   chunks a thread shed itself, it takes back; and a chunk that a live
   thread shed, another thread gives back, so that the shedding
   thread's frees reach it again (one that an exited thread shed, it
   fosters).  Exact counts through
   kame_pool_get_stats, with no other thread allocating or freeing
   when they are read.

   Guarded sampling is off: the test asserts where the pool places
   blocks, and a guarded block is not the pool's.
   kptest-env: KAME_POOL_GUARD_SAMPLE=0

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <pthread.h>
#include <stdint.h>

#include "kame_pool.h"
#include "kptest.h"
#include "kptest-pool.h"

/* A class above the batches of remote frees (8 KiB), so that every
   free of another thread's block is pushed at once, and that no other
   allocation of the test uses: 50 blocks to a chunk of two units.  */
#define SIZE ((size_t) 10304)
#define PER ((size_t) (512 * 1024) / SIZE)
#define LEFT 3                  /* blocks the exited thread leaves */

static void *mine[2 * PER + 1];
static void *left[LEFT];

/* The row of S's statistics for blocks of exactly SIZE bytes, if no
   chunk of their class is live yet; else SIZE_MAX.  */
static size_t
unused_class (const kame_pool_stats_t *s, size_t size)
{
  size_t k = kt_pool_class (s, size);
  return k != SIZE_MAX && s->classes[k].block_size == size
         && s->classes[k].chunks == 0 ? k : SIZE_MAX;
}

static void *
alloc_left (void *arg)
{
  (void) arg;
  for (size_t i = 0; i < LEFT; i++)
    if ((left[i] = kame_pool_malloc (SIZE)) == NULL)
      return "malloc failed";
  return NULL;
}

static void *
free_left (void *arg)
{
  (void) arg;
  for (size_t i = 1; i < LEFT; i++)
    kame_pool_free (left[i]);
  return NULL;
}

/* The main thread fills a chunk and starts a second one, and frees a
   block of the first: it has a partial chunk of the class.  A thread
   allocates LEFT blocks in a chunk of its own and exits: the chunk is
   abandoned.  The main thread frees one of them, which takes the chunk
   over; another thread frees the others into it and exits.  The main
   thread then allocates a chunk's worth of blocks, which refills at
   least once: the chunk taken over is empty by then, and is released,
   so the main thread's blocks fill its own two chunks and no third.
   (Kept as the main thread's own, the chunk waited on its partial list
   with the two frees uncollected, and the blocks spread over three.)  */
KT_TEST (a_chunk_taken_over_beside_a_partial_one_is_released_when_emptied)
{
  kame_pool_stats_t s0 = kt_pool_stats ();
  size_t k = unused_class (&s0, SIZE);
  KT_CHECK (k != SIZE_MAX);
  for (size_t i = 0; i <= PER; i++)
    KT_CHECK ((mine[i] = kame_pool_malloc (SIZE)) != NULL);
  kame_pool_free (mine[0]);
  kt_in_a_thread (alloc_left);
  kame_pool_stats_t s1 = kt_pool_stats ();
  KT_CHECK_EQ (s1.classes[k].chunks, 3);
  KT_CHECK_EQ (s1.abandoned_chunks, 1);
  KT_CHECK_EQ (s1.classes[k].live_blocks, PER + LEFT);
  kame_pool_free (left[0]);
  kame_pool_stats_t s2 = kt_pool_stats ();
  KT_CHECK_EQ (s2.abandoned_chunks, 0);
  KT_CHECK_EQ (s2.classes[k].live_blocks, PER + LEFT - 1);
  kt_in_a_thread (free_left);
  kame_pool_stats_t s3 = kt_pool_stats ();
  KT_CHECK_EQ (s3.classes[k].chunks, 3);
  KT_CHECK_EQ (s3.classes[k].live_blocks, PER);
  KT_CHECK_EQ (s3.remote_pending, LEFT - 1);
  for (size_t i = PER + 1; i < 2 * PER + 1; i++)
    KT_CHECK ((mine[i] = kame_pool_malloc (SIZE)) != NULL);
  kame_pool_stats_t s4 = kt_pool_stats ();
  KT_CHECK_EQ (s4.remote_pending, 0);
  KT_CHECK_EQ (s4.classes[k].live_blocks, 2 * PER);
  KT_CHECK_EQ (s4.classes[k].chunks, 2);
  KT_CHECK_EQ (s4.classes[k].free_blocks, 0);
  for (size_t i = 1; i < 2 * PER + 1; i++)
    kame_pool_free (mine[i]);
}

/* A class of its own for the test below: 42 blocks to a chunk of two
   units.  */
#define SHED_SIZE ((size_t) 12352)
#define SHED_PER ((size_t) (512 * 1024) / SHED_SIZE)
#define SHED_CHUNKS 20
#define TAKEN 10

static void *shed_blk[SHED_CHUNKS * SHED_PER];

/* The calling thread fills SHED_CHUNKS chunks of SIZE-byte blocks, PER
   to a chunk, in a class of which no chunk is live (*K: its row of the
   statistics, SIZE_MAX until all went well), and then frees the first
   block of each: past 16 such frees with no malloc in between it is
   tearing a working set down, and hands its chunks with free blocks
   over (kp_chunk_shed), TAKEN of them at least.  *S2: the statistics
   after.  */
static void
fill_and_shed (void **blk, size_t size, size_t per, size_t *k,
               kame_pool_stats_t *s2)
{
  *k = SIZE_MAX;
  kame_pool_stats_t s0 = kt_pool_stats ();
  size_t row = unused_class (&s0, size);
  KT_CHECK (row != SIZE_MAX);
  for (size_t i = 0; i < SHED_CHUNKS * per; i++)
    KT_CHECK ((blk[i] = kame_pool_malloc (size)) != NULL);
  kame_pool_stats_t s1 = kt_pool_stats ();
  KT_CHECK_EQ (s1.classes[row].chunks, SHED_CHUNKS);
  KT_CHECK_EQ (s1.abandoned_chunks, s0.abandoned_chunks);
  for (size_t c = 0; c < SHED_CHUNKS; c++)
    {
      kame_pool_free (blk[c * per]);
      blk[c * per] = NULL;
    }
  *s2 = kt_pool_stats ();
  KT_CHECK (s2->abandoned_chunks >= s0.abandoned_chunks + TAKEN);
  *k = row;
}

/* The main thread sheds its chunks (fill_and_shed).  It then frees a
   block of TAKEN of those: each free takes its chunk over, and the
   thread keeps it as its own although it has a partial chunk of the
   class, since it set the chunk up.  (The rule for other threads'
   chunks would foster 8 of them and leave the others abandoned.)  */
KT_TEST (a_thread_takes_back_the_chunks_it_shed)
{
  kame_pool_stats_t s2;
  size_t k;
  fill_and_shed (shed_blk, SHED_SIZE, SHED_PER, &k, &s2);
  KT_CHECK (k != SIZE_MAX);
  /* Chunk 0 took the active chunk's place at the first free (which
     had no free block); the shed chunks are those after it, and chunk
     0 too.  */
  for (size_t c = 1; c <= TAKEN; c++)
    {
      kame_pool_free (shed_blk[c * SHED_PER + 1]);
      shed_blk[c * SHED_PER + 1] = NULL;
    }
  kame_pool_stats_t s3 = kt_pool_stats ();
  KT_CHECK_EQ (s2.abandoned_chunks - s3.abandoned_chunks, TAKEN);
  KT_CHECK_EQ (s3.classes[k].chunks, SHED_CHUNKS);
  KT_CHECK_EQ (s3.classes[k].live_blocks,
               SHED_CHUNKS * SHED_PER - SHED_CHUNKS - TAKEN);
  for (size_t i = 0; i < SHED_CHUNKS * SHED_PER; i++)
    kame_pool_free (shed_blk[i]);
}

/* Another class of its own: 36 blocks to a chunk of two units.  */
#define LAZY_SIZE ((size_t) 14400)
#define LAZY_PER ((size_t) (512 * 1024) / LAZY_SIZE)

static void *lazy_blk[SHED_CHUNKS * LAZY_PER + SHED_CHUNKS + TAKEN];
static pthread_barrier_t lazy_freed, lazy_done;

/* A thread that frees and allocates nothing, as a server's lazy-free
   thread: a block of each of TAKEN chunks the main thread shed, then
   it waits, alive, until the main thread is done.  */
static void *
lazy_free (void *arg)
{
  (void) arg;
  for (size_t c = 1; c <= TAKEN; c++)
    {
      kame_pool_free (lazy_blk[c * LAZY_PER + 1]);
      lazy_blk[c * LAZY_PER + 1] = NULL;
    }
  pthread_barrier_wait (&lazy_freed);
  pthread_barrier_wait (&lazy_done);
  return NULL;
}

/* The main thread sheds its chunks of a class (fill_and_shed).  A
   thread that allocates nothing frees a block of TAKEN of them, taking
   each over, and gives each back, since the main thread lives: the
   shed chunks stay abandoned, and the main thread's mallocs then fill
   the holes of all its chunks, its own frees' and the other thread's,
   adopting the shed chunks back, with no chunk more.  (When the other
   thread fostered up to 8 of them, they stayed away from the main
   thread, whose frees into them waited there, and which claimed a
   chunk more beside them, while the other thread lived.)  */
KT_TEST (chunks_a_thread_shed_go_back_to_it_not_to_a_thread_that_frees_into_them)
{
  kame_pool_stats_t s2;
  size_t k;
  fill_and_shed (lazy_blk, LAZY_SIZE, LAZY_PER, &k, &s2);
  KT_CHECK (k != SIZE_MAX);
  pthread_t t;
  KT_CHECK (pthread_barrier_init (&lazy_freed, NULL, 2) == 0);
  KT_CHECK (pthread_barrier_init (&lazy_done, NULL, 2) == 0);
  KT_CHECK (pthread_create (&t, NULL, lazy_free, NULL) == 0);
  pthread_barrier_wait (&lazy_freed);
  kame_pool_stats_t s3 = kt_pool_stats ();
  KT_CHECK_EQ (s3.abandoned_chunks, s2.abandoned_chunks);
  KT_CHECK_EQ (s3.remote_pending, 0);
  KT_CHECK_EQ (s3.classes[k].live_blocks,
               SHED_CHUNKS * LAZY_PER - SHED_CHUNKS - TAKEN);
  for (size_t i = SHED_CHUNKS * LAZY_PER;
       i < SHED_CHUNKS * LAZY_PER + SHED_CHUNKS + TAKEN; i++)
    KT_CHECK ((lazy_blk[i] = kame_pool_malloc (LAZY_SIZE)) != NULL);
  kame_pool_stats_t s4 = kt_pool_stats ();
  KT_CHECK_EQ (s4.classes[k].chunks, SHED_CHUNKS);
  KT_CHECK_EQ (s4.classes[k].live_blocks, SHED_CHUNKS * LAZY_PER);
  KT_CHECK_EQ (s4.classes[k].free_blocks, 0);
  pthread_barrier_wait (&lazy_done);
  KT_CHECK (pthread_join (t, NULL) == 0);
  pthread_barrier_destroy (&lazy_freed);
  pthread_barrier_destroy (&lazy_done);
  for (size_t i = 0; i < sizeof lazy_blk / sizeof lazy_blk[0]; i++)
    kame_pool_free (lazy_blk[i]);
}

/* A third class of its own: 63 blocks to a chunk of two units.  */
#define GONE_SIZE ((size_t) 8256)
#define GONE_PER ((size_t) (512 * 1024) / GONE_SIZE)

static void *gone_blk[SHED_CHUNKS * GONE_PER];
static size_t gone_class = SIZE_MAX;

static void *
shed_and_exit (void *arg)
{
  (void) arg;
  kame_pool_stats_t s2;
  fill_and_shed (gone_blk, GONE_SIZE, GONE_PER, &gone_class, &s2);
  return gone_class == SIZE_MAX ? "the thread did not shed its chunks" : NULL;
}

/* A thread sheds its chunks (fill_and_shed) and exits, abandoning the
   others.  The main thread, which has no chunk of the class, frees a
   block of TAKEN of the shed ones: the thread that shed them is gone,
   so the main thread fosters 8 of them, as any chunk an exited thread
   left, and gives the others back.  (Had it given back every shed
   chunk, none would be fostered.)  */
KT_TEST (chunks_a_thread_shed_before_it_exited_are_fostered)
{
  /* The main thread takes its heap first (in a build that does not
     replace malloc it may have none yet): the record that the other
     thread gives back at its exit would go to the next thread that
     takes one, and the chunks shed with it would be that thread's own
     again.  */
  kame_pool_free (kame_pool_malloc (16));
  kt_in_a_thread (shed_and_exit);
  KT_CHECK (gone_class != SIZE_MAX);
  size_t k = gone_class;
  kame_pool_stats_t s2 = kt_pool_stats ();
  for (size_t c = 1; c <= TAKEN; c++)
    {
      kame_pool_free (gone_blk[c * GONE_PER + 1]);
      gone_blk[c * GONE_PER + 1] = NULL;
    }
  kame_pool_stats_t s3 = kt_pool_stats ();
  KT_CHECK_EQ (s2.abandoned_chunks - s3.abandoned_chunks, 8);
  KT_CHECK_EQ (s3.classes[k].live_blocks,
               SHED_CHUNKS * GONE_PER - SHED_CHUNKS - TAKEN);
  for (size_t i = 0; i < SHED_CHUNKS * GONE_PER; i++)
    kame_pool_free (gone_blk[i]);
}

KT_MAIN (KT_CASE (a_chunk_taken_over_beside_a_partial_one_is_released_when_emptied),
         KT_CASE (a_thread_takes_back_the_chunks_it_shed),
         KT_CASE (chunks_a_thread_shed_go_back_to_it_not_to_a_thread_that_frees_into_them),
         KT_CASE (chunks_a_thread_shed_before_it_exited_are_fostered))
