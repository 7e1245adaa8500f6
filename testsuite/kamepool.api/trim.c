/* trim.c -- kamepool.api tests of kame_pool_trim: it gives back the
   pages of the calling thread's free blocks, the large cache and the
   free resident units, keeps what PAD covers, says whether it gave
   anything back, and is safe while another thread allocates and frees.
   The decay is off, so that only the trim gives pages back.
   Guarded sampling is off: these tests assert where the pool places
   blocks and what it counts, and a guarded block is not the pool's.
   kptest-env: KAME_POOL_DECAY_MS=off KAME_POOL_GUARD_SAMPLE=0

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>

#include "kame_pool.h"
#include "kptest.h"
#include "kptest-pool.h"


/* The distinct pages that the N blocks of SIZE bytes at BLK touch, in
   PAGES (room for 2 N), sorted; their number.  */
static size_t
kt_pages_of (char *const *blk, size_t n, size_t size, uintptr_t *pages)
{
  size_t np = 0;
  for (size_t i = 0; i < n; i++)
    for (uintptr_t p = (uintptr_t) blk[i] & ~(KT_PAGE - 1);
         p < (uintptr_t) blk[i] + size; p += KT_PAGE)
      pages[np++] = p;
  qsort (pages, np, sizeof *pages, kt_cmp_uintptr);
  size_t out = 0;
  for (size_t i = 0; i < np; i++)
    if (out == 0 || pages[out - 1] != pages[i])
      pages[out++] = pages[i];
  return out;
}

/* How many of the NP PAGES are resident (mincore); SIZE_MAX if one is
   not mapped.  */
static size_t
kt_resident (const uintptr_t *pages, size_t np)
{
  size_t n = 0;
  for (size_t i = 0; i < np; i++)
    {
      unsigned char v = 0;
      if (mincore ((void *) pages[i], KT_PAGE, &v) != 0)
        return SIZE_MAX;
      n += v & 1;
    }
  return n;
}

/* ---- 200,000 blocks of 200 bytes, the example of the issue ---------- */

#define NBLK 200000
#define SIZE ((size_t) 200)

static char *blk[NBLK];
static uintptr_t pages[2 * NBLK];
static char msg[512];

static void *
kt_trim_after_free (void *arg)
{
  (void) arg;
  for (size_t i = 0; i < NBLK; i++)
    {
      blk[i] = kame_pool_malloc (SIZE);
      if (blk[i] == NULL)
        return "malloc failed";
      memset (blk[i], (int) (i & 0xff), SIZE);
    }
  size_t np = kt_pages_of (blk, NBLK, SIZE, pages);
  size_t live = kt_resident (pages, np);
  for (size_t i = 0; i < NBLK; i++)
    kame_pool_free (blk[i]);
  size_t freed = kt_resident (pages, np);
  kame_pool_stats_t s0 = kt_pool_stats ();
  int errno_before = errno = 12345;
  int r1 = kame_pool_trim (0);
  if (errno != errno_before)
    return "kame_pool_trim changed errno";
  size_t trimmed = kt_resident (pages, np);
  kame_pool_stats_t s1 = kt_pool_stats ();
  int r2 = kame_pool_trim (0);
  kame_pool_stats_t s2 = kt_pool_stats ();
  size_t k = kt_pool_class (&s1, 208);
  printf ("%zu pages of blocks: %zu resident live, %zu freed, %zu trimmed; "
          "dirty %zu -> %zu KiB, purged %zu pages\n", np, live, freed,
          trimmed, s0.dirty_bytes >> 10, s1.dirty_bytes >> 10,
          s1.purge_pages - s0.purge_pages);
  if (live != np)
    return "the pages of the live blocks are not all resident";
  if (r1 != 1 || r2 != 0)
    {
      snprintf (msg, sizeof msg, "kame_pool_trim returned %d, then %d "
                "(1, then 0)", r1, r2);
      return msg;
    }
  /* Freed in order, the blocks turn the chunks partial one after the
     other with no malloc between: the thread sheds them (kp_chunk_shed),
     the active chunk too, and the emptied chunks go back to their
     regions as free units whose pages stay resident, within the dirty
     budget.  The trim gives back every one of those pages (and those
     of the free units that were there before): none of the blocks'
     pages stays, the class has no chunk left, and the free units'
     bytes go from at least the blocks' pages to 0.  */
  if (k == SIZE_MAX || trimmed != 0 || s1.classes[k].resident_bytes != 0)
    {
      snprintf (msg, sizeof msg, "after the trim %zu pages of the blocks "
                "are resident, the class counts %zu bytes", trimmed,
                k == SIZE_MAX ? 0 : s1.classes[k].resident_bytes);
      return msg;
    }
  if (s0.classes[k].chunks != 0 || s1.classes[k].chunks != 0
      || s1.classes[k].live_blocks != 0
      || s0.dirty_bytes < np * KT_PAGE || s1.dirty_bytes != 0
      || s1.discard_pages - s0.discard_pages < s0.dirty_bytes / KT_PAGE)
    return "the statistics after the trim are off";
  if (s2.purge_pages != s1.purge_pages || s2.purge_calls != s1.purge_calls
      || s2.discard_pages != s1.discard_pages)
    return "the second trim gave pages back";
  /* The blocks in the pages given back serve requests again.  */
  for (size_t i = 0; i < NBLK; i++)
    {
      blk[i] = kame_pool_malloc (SIZE);
      if (blk[i] == NULL)
        return "malloc failed after the trim";
      memset (blk[i], (int) (i & 0xff), SIZE);
    }
  for (size_t i = 0; i < NBLK; i++)
    {
      for (size_t j = 0; j < SIZE; j++)
        if ((unsigned char) blk[i][j] != (i & 0xff))
          return "a block lost its contents";
      kame_pool_free (blk[i]);
    }
  return NULL;
}

KT_TEST (trim_gives_back_the_pages_of_the_freed_blocks_once)
{
  kt_in_a_thread (kt_trim_after_free);
}

/* ---- A partial chunk emptied by remote frees ---------------------------- */

/* A class that neither the C library nor the other tests use; a carve
   links 3 blocks of it, so the active chunk keeps free blocks after
   its first malloc.  */
enum { SWEEP_CLASS = 1280 };
static char *sweep_blk[4096];
static size_t sweep_n;

/* Free SWEEP_BLK[1 .. SWEEP_N - 1]: remote frees, published when this
   thread exits.  */
static void *
kt_free_the_rest (void *arg)
{
  (void) arg;
  for (size_t i = 1; i < sweep_n; i++)
    kame_pool_free (sweep_blk[i]);
  return NULL;
}

/* A chunk on the partial list whose blocks another thread freed holds
   them uncollected; the trim collects the remote frees of every
   partial chunk and releases the chunk they emptied.  The chunk is put
   there: the main thread fills chunk A of the class and takes a block
   of chunk B, its next active one; a free of A's first block by the
   owner moves A from the full list to the partial list (B still has
   free blocks), and another thread frees the rest.  */
KT_TEST (trim_releases_a_partial_chunk_emptied_by_remote_frees)
{
  /* The trim below also gives back the block of each shared class the
     thread freed last (the C library's start-up frees one of 32 KiB),
     which releases its chunk: none is left before the counts.  */
  kame_pool_trim (0);
  kame_pool_stats_t s0 = kt_pool_stats ();
  size_t k = kt_pool_class (&s0, SWEEP_CLASS);
  KT_CHECK (k != SIZE_MAX);
  KT_CHECK_EQ (s0.classes[k].chunks, 0);
  /* Fill A: allocate until the class has a second chunk.  */
  for (sweep_n = 0;; sweep_n++)
    {
      KT_CHECK (sweep_n < sizeof sweep_blk / sizeof sweep_blk[0]);
      sweep_blk[sweep_n] = kame_pool_malloc (SWEEP_CLASS);
      KT_CHECK (sweep_blk[sweep_n] != NULL);
      if (kt_pool_stats ().classes[k].chunks == 2)
        break;
    }
  char *in_b = sweep_blk[sweep_n];
  KT_CHECK (sweep_n > 1);
  kame_pool_free (sweep_blk[0]);
  pthread_t t;
  KT_CHECK_EQ (pthread_create (&t, NULL, kt_free_the_rest, NULL), 0);
  KT_CHECK_EQ (pthread_join (t, NULL), 0);
  kame_pool_stats_t s1 = kt_pool_stats ();
  KT_CHECK_EQ (s1.classes[k].chunks, 2);
  KT_CHECK_EQ (s1.classes[k].live_blocks, 1);

  kame_pool_trim (0);
  kame_pool_stats_t s2 = kt_pool_stats ();
  KT_CHECK_EQ (s2.classes[k].chunks, 1);
  KT_CHECK_EQ (s2.chunks_live, s1.chunks_live - 1);
  KT_CHECK_EQ (s2.classes[k].live_blocks, 1);
  KT_CHECK_EQ (s2.remote_pending + (sweep_n - 1), s1.remote_pending);
  kame_pool_free (in_b);
}

/* ---- PAD ------------------------------------------------------------- */

#define BIG ((size_t) 1 << 20)          /* a dedicated chunk of 4 units */

static void *
kt_trim_pad (void *arg)
{
  (void) arg;
  /* A heap for this thread (a thread without one caches nothing), in
     a class whose chunk has nothing to purge: one page carved.  */
  kame_pool_free (kame_pool_malloc (16));
  kame_pool_stats_t s0 = kt_pool_stats ();
  char *p = kame_pool_malloc (BIG);
  if (p == NULL)
    return "malloc failed";
  memset (p, 1, BIG);
  kame_pool_free (p);
  kame_pool_stats_t s1 = kt_pool_stats ();
  if (s1.cache_bytes != s0.cache_bytes + BIG)
    return "the freed block is not cached";
  uintptr_t pg[BIG / KT_PAGE];
  for (size_t i = 0; i < BIG / KT_PAGE; i++)
    pg[i] = (uintptr_t) p + i * KT_PAGE;

  /* PAD covers the cache and the free resident units: nothing goes.  */
  size_t keep = s1.cache_bytes + s1.dirty_bytes;
  int r = kame_pool_trim (keep);
  kame_pool_stats_t s2 = kt_pool_stats ();
  if (r != 0 || s2.cache_bytes != s1.cache_bytes
      || s2.dirty_bytes != s1.dirty_bytes
      || kt_resident (pg, BIG / KT_PAGE) != BIG / KT_PAGE)
    {
      snprintf (msg, sizeof msg, "kame_pool_trim (%zu) returned %d; cache "
                "%zu -> %zu, free units %zu -> %zu bytes", keep, r,
                s1.cache_bytes, s2.cache_bytes, s1.dirty_bytes,
                s2.dirty_bytes);
      return msg;
    }
  /* So does a PAD of SIZE_MAX.  */
  if (kame_pool_trim (SIZE_MAX) != 0
      || kt_pool_stats ().cache_bytes != s1.cache_bytes)
    return "kame_pool_trim (SIZE_MAX) gave something back";

  /* One byte less: the cache does not fit, and goes whole; its chunk
     joins the free resident units, which do not fit either.  */
  r = kame_pool_trim (keep - 1);
  kame_pool_stats_t s3 = kt_pool_stats ();
  size_t res = kt_resident (pg, BIG / KT_PAGE);
  if (r != 1 || s3.cache_bytes != 0 || s3.dirty_bytes != 0 || res != 0)
    {
      snprintf (msg, sizeof msg, "kame_pool_trim (%zu) returned %d; cache "
                "%zu bytes, free units %zu bytes, %zu pages of the block "
                "resident", keep - 1, r, s3.cache_bytes, s3.dirty_bytes,
                res);
      return msg;
    }
  if (kame_pool_trim (0) != 0)
    return "a trim after everything went returned 1";
  return NULL;
}

KT_TEST (trim_keeps_the_cache_and_free_units_that_pad_covers)
{
  /* Start from an empty cache and no free resident units.  */
  kame_pool_trim (0);
  kt_in_a_thread (kt_trim_pad);
}

static void *
kt_trim_no_heap (void *arg)
{
  (void) arg;
  return (void *) (intptr_t) (kame_pool_trim (0) + 10);
}

KT_TEST (trim_in_a_thread_that_never_allocated_gives_back_the_shared_memory)
{
  pthread_t t;
  void *ret;
  /* A freed dedicated block of this thread goes to its own cache,
     which only it can drain; a mapping pushed out of it goes to the
     shared level.  So fill this thread's first level (four entries)
     and one more; a thread with no heap yet would cache nothing of
     its own, so it gets one first.  */
  kame_pool_free (kame_pool_malloc (16));
  kame_pool_trim (0);
  char *p[5];
  for (int i = 0; i < 5; i++)
    {
      p[i] = kame_pool_malloc ((size_t) (5 + i) << 20);
      KT_CHECK (p[i] != NULL);
      memset (p[i], 1, (size_t) (5 + i) << 20);
    }
  for (int i = 0; i < 5; i++)
    kame_pool_free (p[i]);
  kame_pool_stats_t s0 = kt_pool_stats ();
  KT_CHECK (s0.cache_bytes != 0);
  KT_CHECK (pthread_create (&t, NULL, kt_trim_no_heap, NULL) == 0);
  KT_CHECK (pthread_join (t, &ret) == 0);
  kame_pool_stats_t s1 = kt_pool_stats ();
  /* The other thread drained the shared level, not this thread's.  */
  KT_CHECK_EQ ((intptr_t) ret, 11);
  KT_CHECK (s1.cache_bytes < s0.cache_bytes && s1.cache_bytes != 0);
  KT_CHECK_EQ (kame_pool_trim (0), 1);
  KT_CHECK_EQ (kt_pool_stats ().cache_bytes, 0);
  KT_CHECK_EQ (kame_pool_trim (0), 0);
}

/* ---- Concurrency ------------------------------------------------------ */

#define ROUNDS 3000
#define SLOTS 64
#define WINDOW 256

static _Atomic (char *) handoff[SLOTS];
static _Atomic (int) stop;
static _Atomic (size_t) remote_freed, corrupt;

static size_t
kt_size (uint32_t x)
{
  /* Mostly small, some dedicated, a few mappings.  */
  switch (x % 16)
    {
    case 0:
      return 32768 + (x >> 8) % (1 << 20);
    case 1:
      return (x >> 8) % 64 == 0 ? ((size_t) 5 << 20) : 4096 + (x >> 8) % 8192;
    default:
      return 1 + (x >> 8) % 2048;
    }
}

/* A block of N bytes painted with SEED: the size and the seed in its
   first words, the pattern after them.  */
static char *
kt_new (size_t n, uintptr_t seed)
{
  if (n < 2 * sizeof (size_t))
    n = 2 * sizeof (size_t);
  char *p = kame_pool_malloc (n);
  if (p == NULL)
    return NULL;
  memcpy (p, &n, sizeof n);
  memcpy (p + sizeof n, &seed, sizeof seed);
  kt_paint (p + 2 * sizeof n, n - 2 * sizeof n < 512
                              ? n - 2 * sizeof n : 512, seed);
  return p;
}

static bool
kt_intact (const char *p)
{
  size_t n;
  uintptr_t seed;
  memcpy (&n, p, sizeof n);
  memcpy (&seed, p + sizeof n, sizeof seed);
  return kt_painted (p + 2 * sizeof n, n - 2 * sizeof n < 512
                                       ? n - 2 * sizeof n : 512, seed);
}

/* The other thread: allocates, checks and frees a window of its own
   blocks, and frees the blocks the trimming thread hands it.  */
static void *
kt_worker (void *arg)
{
  (void) arg;
  static char *own[WINDOW];
  uint32_t x = 777;
  for (uintptr_t round = 0; !atomic_load (&stop); round++)
    {
      x ^= x << 13, x ^= x >> 17, x ^= x << 5;
      size_t i = x % WINDOW;
      if (own[i] != NULL)
        {
          if (!kt_intact (own[i]))
            atomic_fetch_add (&corrupt, 1);
          kame_pool_free (own[i]);
        }
      own[i] = kt_new (kt_size (x), round);
      if (own[i] == NULL)
        return "the worker's malloc failed";
      char *q = atomic_exchange (&handoff[round % SLOTS], NULL);
      if (q != NULL)
        {
          if (!kt_intact (q))
            atomic_fetch_add (&corrupt, 1);
          kame_pool_free (q);
          atomic_fetch_add (&remote_freed, 1);
        }
    }
  for (size_t i = 0; i < WINDOW; i++)
    if (own[i] != NULL)
      {
        if (!kt_intact (own[i]))
          atomic_fetch_add (&corrupt, 1);
        kame_pool_free (own[i]);
      }
  return NULL;
}

KT_TEST (trim_is_safe_while_another_thread_allocates_and_frees)
{
  pthread_t t;
  void *err;
  static char *mine[WINDOW];
  size_t handed = 0, trims = 0;
  KT_CHECK (pthread_create (&t, NULL, kt_worker, NULL) == 0);
  uint32_t x = 4242;
  for (uintptr_t round = 1; round <= ROUNDS; round++)
    {
      /* Replace a few of this thread's live blocks, hand some to the
         worker (its frees are remote frees into this thread's chunks,
         which the trim collects), and trim.  */
      for (int j = 0; j < 8; j++)
        {
          x ^= x << 13, x ^= x >> 17, x ^= x << 5;
          size_t i = x % WINDOW;
          if (mine[i] != NULL)
            {
              if (!kt_intact (mine[i]))
                atomic_fetch_add (&corrupt, 1);
              kame_pool_free (mine[i]);
            }
          mine[i] = kt_new (kt_size (x), round * 8 + (uintptr_t) j);
          KT_CHECK (mine[i] != NULL);
        }
      char *h = kt_new (1 + x % 4000, ~round);
      KT_CHECK (h != NULL);
      char *old = atomic_exchange (&handoff[round % SLOTS], h);
      handed++;
      if (old != NULL)
        {
          if (!kt_intact (old))
            atomic_fetch_add (&corrupt, 1);
          kame_pool_free (old);
          handed--;
        }
      kame_pool_trim (round % 4 == 0 ? (size_t) 1 << 20 : 0);
      trims++;
    }
  atomic_store (&stop, 1);
  KT_CHECK (pthread_join (t, &err) == 0);
  if (err != NULL)
    KT_FAILF ("%s", (const char *) err);
  for (size_t i = 0; i < SLOTS; i++)
    {
      char *q = atomic_exchange (&handoff[i], NULL);
      if (q != NULL)
        {
          if (!kt_intact (q))
            atomic_fetch_add (&corrupt, 1);
          kame_pool_free (q);
          handed--;
        }
    }
  for (size_t i = 0; i < WINDOW; i++)
    if (mine[i] != NULL)
      {
        if (!kt_intact (mine[i]))
          atomic_fetch_add (&corrupt, 1);
        kame_pool_free (mine[i]);
      }
  KT_CHECK_EQ (atomic_load (&corrupt), 0);
  KT_CHECK_EQ (trims, ROUNDS);
  KT_CHECK_EQ (atomic_load (&remote_freed), handed);
  /* Everything is free; the remote frees into this thread's chunks
     are collected by its trim.  */
  kame_pool_trim (0);
  kame_pool_stats_t s = kt_pool_stats ();
  KT_CHECK_EQ (s.remote_pending, 0);
  KT_CHECK_EQ (s.large_alloc_count, 0);
  KT_CHECK_EQ (s.dedicated_chunk_bytes, 0);
}

KT_MAIN (KT_CASE (trim_gives_back_the_pages_of_the_freed_blocks_once),
         KT_CASE (trim_releases_a_partial_chunk_emptied_by_remote_frees),
         KT_CASE (trim_keeps_the_cache_and_free_units_that_pad_covers),
         KT_CASE (trim_in_a_thread_that_never_allocated_gives_back_the_shared_memory),
         KT_CASE (trim_is_safe_while_another_thread_allocates_and_frees))
