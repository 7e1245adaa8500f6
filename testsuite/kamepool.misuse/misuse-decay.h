/* misuse-decay.h -- double frees of blocks in pages the decay gave back
   to the kernel (KAME_POOL_DECAY_MS=0), for misuse-decay.c (abort) and
   misuse-decay-report.c (KAME_POOL_ON_MISUSE=report).  A freed block
   in such a page lost its free tag with the page, and is on no list:
   the owner's free finds the page's bit; a free by another thread goes
   on the chunk's remote list, and the owner drops it with the report
   when it collects that list.  With the background purge off
   (KAME_POOL_BACKGROUND_PURGE=0): the scattered frees turn the chunks
   partial with no malloc between, and with the purge on the thread
   would hand them over (kp_chunk_shed); the purge thread's walk of
   their free lists would then race with the double free itself,
   which ThreadSanitizer reports.  Off, the chunks stay with their
   thread, whose decay gives their pages back, as the cases need.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <semaphore.h>

#include "misuse.h"

#define NBLK 8192               /* 32 one-unit chunks of 1 KiB blocks */
#define SIZE ((size_t) 1024)

static char *blk[NBLK];
static bool live[NBLK];
static void *live_blocks[NBLK];
static size_t nlive;

/* The page at PAGE is mapped and not resident.  */
static bool
km_given_back (uintptr_t page)
{
  unsigned char v = 1;
  return mincore ((void *) page, KT_PAGE, &v) == 0 && (v & 1) == 0;
}

/* In the owner thread: allocate NBLK blocks of 1 KiB, free a scattered
   half, and run refills until the decay has given back the pages with
   no live block in them (as kamepool.api/decay-now.c).  The index of a
   freed block whose page went back.  */
static size_t
km_half_free_and_decay (void)
{
  for (size_t i = 0; i < NBLK; i++)
    {
      blk[i] = kame_pool_malloc (SIZE);
      if (blk[i] == NULL)
        KM_FAIL ("malloc (1 KiB) failed");
      memset (blk[i], (int) (i & 0xff), SIZE);
    }
  uint32_t x = 12345;
  nlive = 0;
  for (size_t i = 0; i < NBLK; i++)
    {
      x ^= x << 13, x ^= x >> 17, x ^= x << 5;
      live[i] = x & 1;
      if (live[i])
        live_blocks[nlive++] = blk[i];
      else
        kame_pool_free (blk[i]);
    }
  /* A decay pass runs every 8th time a refill finds its active chunk
     dry: 40 chunks of 5000 B blocks (51 a chunk) make 5 of them.  */
  static char *more[51 * 40];
  for (size_t i = 0; i < 51 * 40; i++)
    if ((more[i] = kame_pool_malloc (5000)) == NULL)
      KM_FAIL ("malloc (5000) failed");
  for (size_t i = 0; i < 51 * 40; i++)
    kame_pool_free (more[i]);
  /* A freed block whose page (4 blocks, none live) is not resident.  */
  for (size_t i = 0; i < NBLK; i++)
    {
      uintptr_t page = (uintptr_t) blk[i] & ~(KT_PAGE - 1);
      if (live[i] || !km_given_back (page))
        continue;
      bool empty = true;
      for (size_t j = 0; j < NBLK; j++)
        if (live[j] && ((uintptr_t) blk[j] & ~(KT_PAGE - 1)) == page)
          empty = false;
      if (empty)
        return i;
    }
  KM_FAIL ("the decay gave back no page of the freed 1 KiB blocks");
}

static void *
km_owner_frees_again (void *arg)
{
  (void) arg;
  size_t i = km_half_free_and_decay ();
  km_misusing (blk[i]);
  kame_pool_free (blk[i]);
  km_no_block_twice (SIZE, 2 * NBLK, live_blocks, nlive);
  return NULL;
}

static void
sc_owner (void)
{
  km_in_thread (km_owner_frees_again, NULL);
}

KM_TEST (double_free_in_a_page_the_decay_gave_back)
{
  KM_NEEDS_HARDENING;
  KM_EXPECT (sc_owner, "free", "double free of");
}

static sem_t km_ready, km_freed;
static size_t km_index;

static void *
km_owner_collects (void *arg)
{
  (void) arg;
  km_index = km_half_free_and_decay ();
  sem_post (&km_ready);
  while (sem_wait (&km_freed) != 0)
    ;
  /* The owner's next collect of that chunk's remote list, in a refill
     or a free, finds the block in a page given back.  */
  km_no_block_twice (SIZE, 2 * NBLK, live_blocks, nlive);
  return NULL;
}

static void
sc_remote (void)
{
  pthread_t t;
  void *ret;
  if (sem_init (&km_ready, 0, 0) != 0 || sem_init (&km_freed, 0, 0) != 0
      || pthread_create (&t, NULL, km_owner_collects, NULL) != 0)
    KM_FAIL ("sem_init or pthread_create failed");
  while (sem_wait (&km_ready) != 0)
    ;
  km_misusing (blk[km_index]);
  kame_pool_free (blk[km_index]);
  /* The free waits in this thread's batch of remote frees, which no
     look at the block can tell from a live one: publish it, so that the
     owner's collect finds it while the page is still given back.  */
  kame_pool_trim (0);
  sem_post (&km_freed);
  if (pthread_join (t, &ret) != 0)
    KM_FAIL ("pthread_join failed");
}

KM_TEST (double_free_in_a_page_the_decay_gave_back_by_another_thread)
{
  KM_NEEDS_HARDENING;
  KM_EXPECT (sc_remote, "free", "double free of");
}

KT_MAIN (KM_CASE (double_free_in_a_page_the_decay_gave_back),
         KM_CASE (double_free_in_a_page_the_decay_gave_back_by_another_thread))
