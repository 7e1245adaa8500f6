/* decay-now.c -- kamepool.api tests of the decay with no delay: the
   pages of a working set that is half freed in a scattered pattern go
   back to the kernel, every page that holds no live block, and the
   blocks in them serve later requests with no new chunk; a block that
   waits in the large cache goes back once a pass finds it untaken
   since the last, and stays while the thread keeps taking it; a
   mapping in the cache's shared level goes back once no thread has
   taken from that level between two passes, and stays while threads
   keep taking it.
   Guarded sampling is off: these tests assert where the pool places
   blocks and what it counts, and a guarded block is not the pool's.
   kptest-env: KAME_POOL_DECAY_MS=0 KAME_POOL_BACKGROUND_PURGE=0 KAME_POOL_GUARD_SAMPLE=0

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>

#include "kame_pool.h"
#include "kptest.h"
#include "kptest-pool.h"

#define NBLK 8192               /* 32 one-unit chunks of 1 KiB blocks */
#define SIZE ((size_t) 1024)

static char *blk[NBLK];
static bool live[NBLK];

static bool
kt_resident (uintptr_t page)
{
  unsigned char v = 0;
  if (mincore ((void *) page, KT_PAGE, &v) != 0)
    return true;                /* not mapped: cannot say; fail below */
  return v & 1;
}

/* No live block overlaps the page at PAGE.  */
static bool
kt_page_free (uintptr_t page)
{
  for (size_t i = 0; i < NBLK; i++)
    if (live[i] && (uintptr_t) blk[i] < page + KT_PAGE
        && (uintptr_t) blk[i] + SIZE > page)
      return false;
  return true;
}

/* The 1 KiB class's row before the test: the main thread may hold a
   chunk of it, which stays as it is while the main thread waits.  */
static kame_pool_class_stats_t before;

static void *
kt_half_free (void *arg)
{
  (void) arg;
  for (size_t i = 0; i < NBLK; i++)
    {
      blk[i] = kame_pool_malloc (SIZE);
      if (blk[i] == NULL)
        return "malloc failed";
      memset (blk[i], (int) (i & 0xff), SIZE);
    }
  kame_pool_stats_t s0 = kt_pool_stats ();
  uint32_t x = 12345;
  size_t nlive = 0;
  for (size_t i = 0; i < NBLK; i++)
    {
      x ^= x << 13, x ^= x >> 17, x ^= x << 5;
      live[i] = x & 1;
      if (live[i])
        nlive++;
      else
        kame_pool_free (blk[i]);
    }
  /* Decay passes run every 8th time a refill finds its active chunk
     dry: 40 chunks of 5000 B blocks (51 a chunk) make 5 of them.  The
     first pass sees the 1 KiB class's active chunk, the next finds it
     unchanged and lets it decay.  */
  static char *more[51 * 40];
  for (size_t i = 0; i < 51 * 40; i++)
    if ((more[i] = kame_pool_malloc (5000)) == NULL)
      return "malloc failed";
  for (size_t i = 0; i < 51 * 40; i++)
    kame_pool_free (more[i]);
  kame_pool_stats_t s1 = kt_pool_stats ();

  /* Every page of the working set with no live block is gone.  */
  static uintptr_t pages[NBLK * 2];
  size_t np = 0;
  for (size_t i = 0; i < NBLK; i++)
    {
      uintptr_t a = (uintptr_t) blk[i] & ~(KT_PAGE - 1);
      uintptr_t b = ((uintptr_t) blk[i] + SIZE - 1) & ~(KT_PAGE - 1);
      pages[np++] = a;
      if (b != a)
        pages[np++] = b;
    }
  qsort (pages, np, sizeof *pages, kt_cmp_uintptr);
  size_t nfree = 0, kept = 0;
  for (size_t i = 0; i < np; i++)
    {
      if (i > 0 && pages[i] == pages[i - 1])
        continue;
      if (!kt_page_free (pages[i]))
        continue;
      nfree++;
      if (kt_resident (pages[i]))
        kept++;
    }
  static char msg[256];
  if (nfree < 50 || kept != 0)
    {
      snprintf (msg, sizeof msg, "%zu pages hold no live block, %zu of "
                "them still resident", nfree, kept);
      return msg;
    }
  if (s1.purge_pages - s0.purge_pages < nfree
      || s1.purge_calls == s0.purge_calls)
    {
      snprintf (msg, sizeof msg, "purge_pages grew by %zu (calls by %zu) "
                "for %zu free pages", s1.purge_pages - s0.purge_pages,
                s1.purge_calls - s0.purge_calls, nfree);
      return msg;
    }
  size_t k = kt_pool_class (&s1, SIZE);
  if (k == SIZE_MAX)
    return "no 1 KiB class";
  size_t live1 = s1.classes[k].live_blocks - before.live_blocks;
  size_t free1 = s1.classes[k].free_blocks - before.free_blocks;
  size_t res1 = s1.classes[k].resident_bytes - before.resident_bytes;
  if (live1 != nlive || free1 != NBLK - nlive
      || res1 > (size_t) (NBLK * SIZE) - nfree * KT_PAGE)
    {
      snprintf (msg, sizeof msg, "1 KiB class: %zu live (want %zu), %zu free "
                "(want %zu), %zu resident (at most %zu)", live1, nlive,
                free1, NBLK - nlive, res1,
                (size_t) (NBLK * SIZE) - nfree * KT_PAGE);
      return msg;
    }

  /* The live blocks kept their contents.  */
  for (size_t i = 0; i < NBLK; i++)
    if (live[i])
      for (size_t j = 0; j < SIZE; j++)
        if ((unsigned char) blk[i][j] != (i & 0xff))
          return "a live block lost its contents";

  /* The free blocks, those in the pages given back included, serve the
     same number of requests with no new chunk.  */
  size_t chunks = s1.classes[k].chunks;
  size_t free0 = before.free_blocks, live0 = before.live_blocks;
  for (size_t i = 0; i < NBLK; i++)
    if (!live[i])
      {
        blk[i] = kame_pool_malloc (SIZE);
        if (blk[i] == NULL)
          return "malloc failed";
        memset (blk[i], (int) (i & 0xff), SIZE);
        live[i] = true;
      }
  kame_pool_stats_t s2 = kt_pool_stats ();
  if (s2.classes[k].chunks != chunks
      || s2.classes[k].live_blocks - live0 != NBLK
      || s2.classes[k].free_blocks != free0)
    {
      snprintf (msg, sizeof msg, "refilled: %zu chunks (was %zu), %zu live, "
                "%zu free", s2.classes[k].chunks, chunks,
                s2.classes[k].live_blocks - live0,
                s2.classes[k].free_blocks - free0);
      return msg;
    }
  qsort (blk, NBLK, sizeof *blk, kt_cmp_uintptr);
  for (size_t i = 1; i < NBLK; i++)
    if (blk[i] == blk[i - 1])
      return "one block handed out twice";
  for (size_t i = 0; i < NBLK; i++)
    kame_pool_free (blk[i]);
  return NULL;
}

KT_TEST (decay_gives_back_the_pages_with_no_live_block)
{
  kame_pool_stats_t s = kt_pool_stats ();
  size_t k = kt_pool_class (&s, SIZE);
  KT_CHECK (k != SIZE_MAX);
  before = s.classes[k];
  kt_in_a_thread (kt_half_free);
}

/* ---- The first level of the large cache -------------------------------

   A freed dedicated block waits in its thread's first level of the
   large cache.  A decay pass notes it; a later pass that finds it not
   taken in between gives it back to the kernel.  */

/* A dedicated chunk of 16 units: more than the thread's small chunks
   claim between two passes (8 of one unit), so that they never borrow
   it (kp_cache_lend); the decay alone takes it.  */
#define BIG ((size_t) 4 << 20)

/* Make PASSES decay passes on the calling thread: a pass runs every
   8th time a refill finds its active chunk dry (and, with the delay
   at 0, every time it is due); 51 blocks of 5000 B fill a chunk.  */
static const char *
kt_decay_passes (int passes)
{
  enum { PER_CHUNK = 51 };
  static char *fill[PER_CHUNK * 8 * 4 + PER_CHUNK];
  size_t n = PER_CHUNK * 8 * (size_t) passes + PER_CHUNK;
  if (n > sizeof fill / sizeof *fill)
    return "too many passes";
  for (size_t i = 0; i < n; i++)
    if ((fill[i] = kame_pool_malloc (5000)) == NULL)
      return "malloc failed";
  for (size_t i = 0; i < n; i++)
    kame_pool_free (fill[i]);
  return NULL;
}

/* A block of N bytes with every byte 0xa5, or NULL.  */
static char *
kt_filled_block (size_t n)
{
  char *p = kame_pool_malloc (n);
  if (p != NULL)
    memset (p, 0xa5, n);
  return p;
}

/* The offset of the first page of the N bytes at Q that no longer
   holds 0xa5 (given back: it reads as zeros), or N.  */
static size_t
kt_first_page_lost (const char *q, size_t n)
{
  size_t off = 0;
  while (off < n && (unsigned char) q[off] == 0xa5)
    off += KT_PAGE;
  return off < n ? off : n;
}

static void *
kt_cached_block_untaken (void *arg)
{
  (void) arg;
  static char msg[256];
  /* No free units with resident pages (the start-up's block of a
     shared class, released by the main thread's pass): the block's
     chunk takes the lowest free run, not the units among the small
     chunks that the passes below claim and touch.  */
  kame_pool_trim (0);
  char *p = kt_filled_block (BIG);
  if (p == NULL)
    return "malloc failed";
  kame_pool_stats_t s0 = kt_pool_stats ();
  kame_pool_free (p);
  kame_pool_stats_t s1 = kt_pool_stats ();
  if (s1.cache_bytes - s0.cache_bytes != BIG
      || kt_resident_count (p, BIG) != BIG / KT_PAGE)
    {
      snprintf (msg, sizeof msg, "freed: the cache grew by %zu bytes, %zu "
                "pages resident", s1.cache_bytes - s0.cache_bytes,
                kt_resident_count (p, BIG));
      return msg;
    }
  const char *err = kt_decay_passes (3);
  if (err != NULL)
    return (void *) err;
  kame_pool_stats_t s2 = kt_pool_stats ();
  if (s2.cache_bytes != s0.cache_bytes || kt_resident_count (p, BIG) != 0
      || s2.purge_pages - s1.purge_pages < BIG / KT_PAGE)
    {
      snprintf (msg, sizeof msg, "after 3 passes: the cache holds %zu bytes "
                "more than before, %zu pages resident, purge_pages grew by "
                "%zu", s2.cache_bytes - s0.cache_bytes,
                kt_resident_count (p, BIG), s2.purge_pages - s1.purge_pages);
      return msg;
    }
  return NULL;
}

KT_TEST (decay_gives_back_a_cached_block_no_request_took)
{
  kt_in_a_thread (kt_cached_block_untaken);
}

/* A block the thread takes from its cache between every two passes is
   never given back: it comes back at the same address with the bytes
   it was freed with (pages given back would read as zeros).  */
static void *
kt_cached_block_in_use (void *arg)
{
  (void) arg;
  static char msg[256];
  char *p = kt_filled_block (BIG);
  if (p == NULL)
    return "malloc failed";
  kame_pool_free (p);
  for (int round = 0; round < 6; round++)
    {
      const char *err = kt_decay_passes (1);
      if (err != NULL)
        return (void *) err;
      char *q = kame_pool_malloc (BIG);
      if (q != p)
        {
          snprintf (msg, sizeof msg, "round %d: got %p, not the cached %p",
                    round, (void *) q, (void *) p);
          return msg;
        }
      size_t off = kt_first_page_lost (q, BIG);
      if (off != BIG)
        {
          snprintf (msg, sizeof msg, "round %d: the page at +%zu was "
                    "given back", round, off);
          return msg;
        }
      kame_pool_free (q);
    }
  return NULL;
}

KT_TEST (decay_leaves_a_cached_block_in_use_alone)
{
  kt_in_a_thread (kt_cached_block_in_use);
}

/* The second level of the cache, shared by the threads, holds
   mappings (above 4 MiB): a thread's fifth freed mapping pushes its
   oldest there, and its exit releases the four left in its first
   level.  */
#define MAP ((size_t) 8 << 20)

/* Join a new thread that runs FN (ARG); its answer.  */
static const char *
kt_thread_answer (void *(*fn) (void *), void *arg)
{
  pthread_t t;
  void *ret;
  if (pthread_create (&t, NULL, fn, arg) != 0 || pthread_join (t, &ret) != 0)
    return "pthread_create or pthread_join failed";
  return ret;
}

/* Free five mappings of MAP bytes, every byte 0xa5, the first of them
   first, and exit; *ARG is the first.  */
static void *
kt_five_mappings_freed (void *arg)
{
  char *p[5];
  for (int i = 0; i < 5; i++)
    if ((p[i] = kt_filled_block (MAP)) == NULL)
      return "malloc failed";
  for (int i = 0; i < 5; i++)
    kame_pool_free (p[i]);
  *(char **) arg = p[0];
  return NULL;
}

static void *
kt_shared_block_untaken (void *arg)
{
  (void) arg;
  static char msg[256];
  /* Whatever the level held before goes first.  */
  const char *err = kt_decay_passes (3);
  if (err != NULL)
    return (void *) err;
  kame_pool_stats_t s0 = kt_pool_stats ();
  char *first;
  if ((err = kt_thread_answer (kt_five_mappings_freed, &first)) != NULL)
    return (void *) err;
  kame_pool_stats_t s1 = kt_pool_stats ();
  size_t held = s1.cache_bytes - s0.cache_bytes;
  if (held < MAP || held >= 2 * MAP)
    {
      snprintf (msg, sizeof msg, "the cache holds %zu bytes more, not one "
                "mapping of %zu", held, MAP);
      return msg;
    }
  if ((err = kt_decay_passes (3)) != NULL)
    return (void *) err;
  kame_pool_stats_t s2 = kt_pool_stats ();
  if (s2.cache_bytes != s0.cache_bytes
      || s2.purge_pages - s1.purge_pages < held / KT_PAGE)
    {
      snprintf (msg, sizeof msg, "after 3 passes: the cache holds %zu bytes "
                "more than before, purge_pages grew by %zu",
                s2.cache_bytes - s0.cache_bytes,
                s2.purge_pages - s1.purge_pages);
      return msg;
    }
  return NULL;
}

/* A mapping that waits in the second level goes back once no thread
   has taken a block from that level for the delay.  */
KT_TEST (decay_gives_back_a_block_of_the_shared_level_no_request_took)
{
  kt_in_a_thread (kt_shared_block_untaken);
}

/* Take ARG, the first of kt_five_mappings_freed's mappings, back from
   the second level, check its bytes, and put it back there (four new
   mappings freed after it push it out of the first level).  */
static void *
kt_take_and_put_back (void *arg)
{
  static char msg[256];
  char *q = kame_pool_malloc (MAP);
  if (q != arg)
    {
      snprintf (msg, sizeof msg, "got %p, not the cached %p", (void *) q,
                arg);
      return msg;
    }
  size_t off = kt_first_page_lost (q, MAP);
  if (off != MAP)
    {
      snprintf (msg, sizeof msg, "the page at +%zu was given back", off);
      return msg;
    }
  char *r[4];
  for (int i = 0; i < 4; i++)
    if ((r[i] = kame_pool_malloc (MAP)) == NULL)
      return "malloc failed";
  kame_pool_free (q);
  for (int i = 0; i < 4; i++)
    kame_pool_free (r[i]);
  return NULL;
}

/* A mapping that some thread takes from the second level between every
   two refills of this one that find the active chunk dry (the decay
   runs at most once between two takes) is never given back, though it
   is put back in the same word each time.  */
static void *
kt_shared_block_in_use (void *arg)
{
  (void) arg;
  enum { ROUNDS = 24, PER_CHUNK = 51 };
  static char *fill[ROUNDS * (PER_CHUNK + 1)];
  static char msg[256];
  const char *err = kt_decay_passes (3);
  if (err != NULL)
    return (void *) err;
  char *first;
  if ((err = kt_thread_answer (kt_five_mappings_freed, &first)) != NULL)
    return (void *) err;
  size_t n = 0;
  for (int round = 0; round < ROUNDS && err == NULL; round++)
    {
      for (int i = 0; i < PER_CHUNK + 1; i++)
        if ((fill[n++] = kame_pool_malloc (5000)) == NULL)
          return "malloc failed";
      if ((err = kt_thread_answer (kt_take_and_put_back, first)) != NULL)
        snprintf (msg, sizeof msg, "round %d: %s", round, err);
    }
  for (size_t i = 0; i < n; i++)
    kame_pool_free (fill[i]);
  return err != NULL ? msg : NULL;
}

KT_TEST (decay_leaves_a_block_of_the_shared_level_in_use_alone)
{
  kt_in_a_thread (kt_shared_block_in_use);
}

KT_MAIN (KT_CASE (decay_gives_back_the_pages_with_no_live_block),
         KT_CASE (decay_gives_back_a_cached_block_no_request_took),
         KT_CASE (decay_leaves_a_cached_block_in_use_alone),
         KT_CASE (decay_gives_back_a_block_of_the_shared_level_no_request_took),
         KT_CASE (decay_leaves_a_block_of_the_shared_level_in_use_alone))
