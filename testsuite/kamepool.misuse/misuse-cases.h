/* misuse-cases.h -- the misuse cases of misuse-abort.c (the default:
   report, then abort) and misuse-report.c (KAME_POOL_ON_MISUSE=report:
   report, leave the heap as it was, go on).  Each test runs one
   scenario in a child (misuse.h) and names the exact line the pool
   must write.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <semaphore.h>

#include "misuse.h"

#include <dlfcn.h>

/* Enough 64-byte blocks to use up the chunk the misuse was in (4096
   blocks a chunk) and carve another two.  */
#define N64 (3 * 4096)

/* ---- Double frees ------------------------------------------------------ */

static void
sc_double_free_64 (void)
{
  void *p = km_block (64, 1);
  kame_pool_free (p);
  km_misusing (p);
  kame_pool_free (p);
  km_no_block_twice (64, N64, NULL, 0);
}

KM_TEST (double_free_of_a_64_b_block)
{
  KM_NEEDS_HARDENING;
  KM_EXPECT (sc_double_free_64, "free", "double free of");
}

/* Free a 64-byte block P, then another, then P again.  */
static void
km_free_twice_with_one_between (void)
{
  void *p = km_block (64, 1);
  void *q = km_block (64, 2);
  kame_pool_free (p);
  kame_pool_free (q);
  km_misusing (p);
  kame_pool_free (p);
}

static void
sc_double_free_64_between (void)
{
  km_free_twice_with_one_between ();
  km_no_block_twice (64, N64, NULL, 0);
}

KM_TEST (double_free_of_a_64_b_block_with_a_free_in_between)
{
  KM_NEEDS_HARDENING;
  KM_EXPECT (sc_double_free_64_between, "free", "double free of");
}

/* Take 64-byte blocks one at a time and fail at once when one of them
   is a block handed out before (in OUT, N of them) or one of LIVE: the
   double free must be reported before its block has a second owner,
   not only once the heap is looked at as a whole.  */
static void
km_no_second_owner (void **out, size_t n, void *const *live, size_t nlive)
{
  for (size_t i = 0; i < n; i++)
    {
      out[i] = kame_pool_malloc (64);
      if (out[i] == NULL)
        KM_FAIL ("malloc (64) #%zu failed", i);
      for (size_t j = 0; j < i; j++)
        if (out[j] == out[i])
          KM_FAIL ("malloc (64) #%zu and #%zu both returned %p", j, i,
                   out[i]);
      for (size_t j = 0; j < nlive; j++)
        if (live[j] == out[i])
          KM_FAIL ("malloc (64) #%zu returned the live block %p", i,
                   out[i]);
    }
}

/* The owner's second free of P, with Q freed in between, puts P on the
   list twice: the first malloc that comes to P again reports it.  */
static void
sc_double_free_64_second_owner (void)
{
  void *keep = km_block (64, 3);
  km_free_twice_with_one_between ();
  void *out[64];
  km_no_second_owner (out, 64, &keep, 1);
  km_intact (keep, 64, 3);
}

KM_TEST (double_free_of_a_64_b_block_is_found_before_a_second_owner)
{
  KM_NEEDS_HARDENING;
  KM_EXPECT (sc_double_free_64_second_owner, "free", "double free of");
}

/* Blocks of 64 bytes, 4096 a chunk (one unit).  */
#define KM_UNIT ((uintptr_t) 256 * 1024)

/* The owner's second free of P makes P's chunk look empty while L, a
   block of it, is live: the chunk must not be released (nor its blocks
   handed out again), and the walk of its list names P.  The chunk is
   one whose 4096 blocks are all the scenario's, not the active one (a
   later chunk has free blocks), so that its last free releases it.  */
static void
sc_double_free_empties_chunk (void)
{
  size_t n = 3 * 4096 + 16;
  void **blk = km_scratch (n * sizeof *blk);
  for (size_t i = 0; i < n; i++)
    blk[i] = km_block (64, i);
  uintptr_t unit = 0;
  for (size_t i = 0; i < n && unit == 0; i++)
    {
      uintptr_t u = (uintptr_t) blk[i] & ~(KM_UNIT - 1);
      size_t in = 0;
      for (size_t j = 0; j < n; j++)
        in += ((uintptr_t) blk[j] & ~(KM_UNIT - 1)) == u;
      if (in == 4096)
        unit = u;
    }
  if (unit == 0)
    KM_FAIL ("no chunk holds 4096 of the %zu blocks", n);
  void *l = NULL, *p = NULL, *q = NULL;
  for (size_t i = 0; i < n; i++)
    {
      if (((uintptr_t) blk[i] & ~(KM_UNIT - 1)) != unit)
        continue;
      if (l == NULL)
        l = blk[i];
      else if (p == NULL)
        p = blk[i];
      else if (q == NULL)
        q = blk[i];
      else
        kame_pool_free (blk[i]);
    }
  kame_pool_free (p);
  kame_pool_free (q);
  km_misusing (p);
  kame_pool_free (p);
  size_t li = 0;
  while (blk[li] != l)
    li++;
  km_intact (l, 64, li);
  void *out[64];
  km_no_second_owner (out, 64, &l, 1);
  km_intact (l, 64, li);
}

KM_TEST (double_free_that_empties_a_chunk_while_a_block_is_live)
{
  KM_NEEDS_HARDENING;
  KM_EXPECT (sc_double_free_empties_chunk, "free", "double free of");
}

/* The size of the block of sc_double_free, and how many blocks of that
   size km_no_block_twice takes afterwards.  */
static size_t km_size, km_count;

static void
sc_double_free (void)
{
  void *keep = km_block (km_size, 7);
  void *p = km_block (km_size, 8);
  kame_pool_free (p);
  km_misusing (p);
  kame_pool_free (p);
  km_intact (keep, km_size, 7);
  km_no_block_twice (km_size, km_count, &keep, 1);
}

/* A small class with chunks of several blocks: the owner's free.  */
KM_TEST (double_free_of_a_4_kib_block)
{
  KM_NEEDS_HARDENING;
  km_size = 4 * KIB, km_count = 512;
  KM_EXPECT (sc_double_free, "free", "double free of");
}

/* A class of 1 MiB chunks of 16 blocks.  */
KM_TEST (double_free_of_a_64_kib_block)
{
  KM_NEEDS_HARDENING;
  km_size = 64 * KIB, km_count = 48;
  KM_EXPECT (sc_double_free, "free", "double free of");
}

static void
sc_double_free_second_remote_64k (void)
{
  void *keep = km_block (64 * KIB, 7);
  void *p = km_block (64 * KIB, 8);
  kame_pool_free (p);
  km_misusing (p);
  km_in_thread (km_free_thread, p);
  km_intact (keep, 64 * KIB, 7);
  km_no_block_twice (64 * KIB, 48, &keep, 1);
}

/* The owner's free put the block on its chunk's list; another
   thread's free finds its tag.  */
KM_TEST (double_free_of_a_64_kib_block_the_second_by_another_thread)
{
  KM_NEEDS_HARDENING;
  KM_EXPECT (sc_double_free_second_remote_64k, "free", "double free of");
}

/* A block of a shared class: Q waits in the thread's slot, so P goes
   back to its chunk under the class's lock, and the second free of P
   finds its tag there.  */
static void
sc_double_free_64k_past_the_slot (void)
{
  void *keep = km_block (64 * KIB, 7);
  void *q = km_block (64 * KIB, 8);
  void *p = km_block (64 * KIB, 9);
  kame_pool_free (q);
  kame_pool_free (p);
  km_misusing (p);
  kame_pool_free (p);
  km_intact (keep, 64 * KIB, 7);
  km_no_block_twice (64 * KIB, 48, &keep, 1);
}

KM_TEST (double_free_of_a_64_kib_block_past_the_thread_s_slot)
{
  KM_NEEDS_HARDENING;
  KM_EXPECT (sc_double_free_64k_past_the_slot, "free", "double free of");
}

/* A block of a shared class freed into a page that kame_pool_trim then
   gave back, with its tag: the second free finds the page.  (Two
   blocks stay live, so that the chunk stays.)  */
static void
sc_double_free_64k_purged (void)
{
  void *p[16];
  for (int i = 0; i < 16; i++)
    p[i] = km_block (64 * KIB, (uintptr_t) i);
  for (int i = 2; i < 16; i++)
    kame_pool_free (p[i]);
  kame_pool_trim (0);
  km_misusing (p[5]);
  kame_pool_free (p[5]);
  km_intact (p[0], 64 * KIB, 0);
  km_intact (p[1], 64 * KIB, 1);
  km_no_block_twice (64 * KIB, 48, p, 2);
}

KM_TEST (double_free_of_a_64_kib_block_in_a_page_given_back)
{
  KM_NEEDS_HARDENING;
  KM_EXPECT (sc_double_free_64k_purged, "free", "double free of");
}

/* A block of a shared class waits in the thread's slot for its next
   malloc, which finds its tag overwritten: reported, and the block is
   not handed out.  */
static void
sc_write_into_a_kept_64k_block (void)
{
  void *keep = km_block (64 * KIB, 7);
  char *p = km_block (64 * KIB, 8);
  kame_pool_free (p);
  KM_OPAQUE (p);
  memset (p, 'A', 16);          /* the link and the tag */
  KM_OPAQUE (p);
  km_misusing (p);
  void *q = kame_pool_malloc (64 * KIB);
  if (q == NULL || q == p)
    KM_FAIL ("malloc (64 KiB) after the write: %p", q);
  void *live[2] = { keep, q };
  km_no_block_twice (64 * KIB, 48, live, 2);
}

KM_TEST (write_into_a_64_kib_block_kept_for_the_next_malloc)
{
  KM_NEEDS_HARDENING;
  KM_EXPECT (sc_write_into_a_kept_64k_block, "malloc",
             "corrupted free block (written to after it was freed) at");
}

/* A dedicated chunk in the large cache.  */
KM_TEST (double_free_of_a_240_kib_block)
{
  km_size = 240 * KIB, km_count = 24;
  KM_EXPECT (sc_double_free, "free", "double free of");
}

KM_TEST (double_free_of_a_1_mib_block)
{
  km_size = MIB, km_count = 8;
  KM_EXPECT (sc_double_free, "free", "double free of");
}

/* A mapping of its own, in the cache.  */
KM_TEST (double_free_of_an_8_mib_block)
{
  km_size = 8 * MIB, km_count = 4;
  KM_EXPECT (sc_double_free, "free", "double free of");
}

/* A huge mapping (above a region), in the cache.  */
KM_TEST (double_free_of_a_64_mib_block)
{
  km_size = 64 * MIB, km_count = 3;
  KM_EXPECT (sc_double_free, "free", "double free of");
}

static void
sc_double_free_uncached (void)
{
  kame_pool_set_large_cache_cap (0);
  sc_double_free ();
}

/* With no cache the first free unmaps the block: the second finds
   nothing there.  */
KM_TEST (double_free_of_an_unmapped_8_mib_block)
{
  km_size = 8 * MIB, km_count = 4;
  KM_EXPECT (sc_double_free_uncached, "free", "invalid pointer (unmapped):");
}

static void
sc_double_free_second_remote (void)
{
  void *p = km_block (64, 1);
  kame_pool_free (p);
  km_misusing (p);
  km_in_thread (km_free_thread, p);
  km_no_block_twice (64, N64, NULL, 0);
}

/* The remote free trusts the tag the owner's free wrote.  */
KM_TEST (double_free_of_a_64_b_block_the_second_by_another_thread)
{
  KM_NEEDS_HARDENING;
  KM_EXPECT (sc_double_free_second_remote, "free", "double free of");
}

static void
sc_double_free_first_remote (void)
{
  void *p = km_block (64, 1);
  km_in_thread (km_free_thread, p);
  km_misusing (p);
  kame_pool_free (p);
  km_no_block_twice (64, N64, NULL, 0);
}

/* The owner finds the block on the chunk's remote list.  */
KM_TEST (double_free_of_a_64_b_block_the_first_by_another_thread)
{
  KM_NEEDS_HARDENING;
  KM_EXPECT (sc_double_free_first_remote, "free", "double free of");
}

static void *
km_free_twice_thread (void *p)
{
  kame_pool_free (p);
  km_misusing (p);
  kame_pool_free (p);
  return NULL;
}

static void
sc_double_free_both_remote (void)
{
  void *p = km_block (64, 1);
  km_in_thread (km_free_twice_thread, p);
  km_no_block_twice (64, N64, NULL, 0);
}

KM_TEST (double_free_of_a_64_b_block_both_by_another_thread)
{
  KM_NEEDS_HARDENING;
  KM_EXPECT (sc_double_free_both_remote, "free", "double free of");
}

static sem_t km_batched, km_looked;

/* Free P into this thread's batch of remote frees, and keep it there
   until the main thread has freed it again.  */
static void *
km_batch_thread (void *p)
{
  kame_pool_free (p);
  sem_post (&km_batched);
  while (sem_wait (&km_looked) != 0)
    ;
  return NULL;
}

static void
sc_double_free_in_a_batch (void)
{
  void *p = km_block (64, 1);
  pthread_t t;
  if (sem_init (&km_batched, 0, 0) != 0 || sem_init (&km_looked, 0, 0) != 0
      || pthread_create (&t, NULL, km_batch_thread, p) != 0)
    KM_FAIL ("sem_init or pthread_create failed");
  while (sem_wait (&km_batched) != 0)
    ;
  km_misusing (p);
  kame_pool_free (p);
  sem_post (&km_looked);
  if (pthread_join (t, NULL) != 0)
    KM_FAIL ("pthread_join failed");
  km_no_block_twice (64, N64, NULL, 0);
}

/* The first free waits in another thread's batch, on no list the owner
   can walk: the owner trusts the tag.  */
KM_TEST (double_free_of_a_64_b_block_waiting_in_another_thread_s_batch)
{
  KM_NEEDS_HARDENING;
  KM_EXPECT (sc_double_free_in_a_batch, "free", "double free of");
}

static void *km_taken;

/* Blocks of 64 bytes that a thread's first malloc of the class leaves
   on its new chunk's list: kp_chunk_carve links a page of them (4096 /
   64) and the malloc takes one.  */
#define KM_CARVED_LEFT (4096 / 64 - 1)

/* Allocate a block of 64 bytes, so that this thread has a chunk of
   that class; free P into its batch of remote frees, wait until the
   main thread has freed it again, then allocate blocks of its class
   until its own chunk's list runs dry: the next malloc takes the
   batch's blocks back first.  */
static void *
km_batch_take_thread (void *p)
{
  void *own[1 + KM_CARVED_LEFT];
  if ((own[0] = kame_pool_malloc (64)) == NULL)
    return "malloc failed";
  kame_pool_free (p);
  sem_post (&km_batched);
  while (sem_wait (&km_looked) != 0)
    ;
  for (size_t i = 1; i <= KM_CARVED_LEFT; i++)
    if ((own[i] = kame_pool_malloc (64)) == NULL)
      return "malloc failed";
  km_taken = kame_pool_malloc (64);
  for (size_t i = 0; i <= KM_CARVED_LEFT; i++)
    kame_pool_free (own[i]);
  return km_taken != NULL ? NULL : "malloc failed";
}

static void
sc_double_free_taken_back (void)
{
  void *p = km_block (64, 1);
  pthread_t t;
  void *ret;
  if (sem_init (&km_batched, 0, 0) != 0 || sem_init (&km_looked, 0, 0) != 0
      || pthread_create (&t, NULL, km_batch_take_thread, p) != 0)
    KM_FAIL ("sem_init or pthread_create failed");
  while (sem_wait (&km_batched) != 0)
    ;
  km_misusing (p);
  kame_pool_free (p);
  /* The owner's list hands P out again (it was freed last).  */
  void *live[2] = { km_block (64, 2), NULL };
  sem_post (&km_looked);
  if (pthread_join (t, &ret) != 0 || ret != NULL)
    KM_FAIL ("the thread: %s", ret != NULL ? (char *) ret : "join failed");
  live[1] = km_taken;
  if (live[0] == live[1])
    KM_FAIL ("%p handed out twice", live[0]);
  /* Reported at the owner's free, which left P in the batch: the
     thread took it back, and holds it.  */
  if (KM_REPORT && km_taken != p)
    KM_FAIL ("the thread's malloc gave %p, not %p from its batch",
             km_taken, p);
  km_no_block_twice (64, N64, live, 2);
}

/* The first free waits in another thread's batch, the owner's malloc
   hands the block out again, and then the first thread's malloc would
   take it back: it finds the live mark, not the remote tag, and hands
   out another block.  */
KM_TEST (double_free_of_a_64_b_block_its_freer_then_takes_back)
{
  KM_NEEDS_HARDENING;
  KM_EXPECT (sc_double_free_taken_back, "free", "double free of");
}

/* Free the three blocks of ARG into this thread's batch, in order,
   and keep them there until the main thread has looked.  */
static void *
km_batch_three_thread (void *arg)
{
  void **b = arg;
  for (int i = 0; i < 3; i++)
    kame_pool_free (b[i]);
  sem_post (&km_batched);
  while (sem_wait (&km_looked) != 0)
    ;
  return NULL;
}

static void
sc_double_free_inside_a_batch (void)
{
  void *b[3] = { km_block (64, 1), km_block (64, 2), km_block (64, 3) };
  pthread_t t;
  if (sem_init (&km_batched, 0, 0) != 0 || sem_init (&km_looked, 0, 0) != 0
      || pthread_create (&t, NULL, km_batch_three_thread, b) != 0)
    KM_FAIL ("sem_init or pthread_create failed");
  while (sem_wait (&km_batched) != 0)
    ;
  km_misusing (b[1]);
  kame_pool_free (b[1]);
  /* The owner's list hands the block out again (it was freed last).  */
  void *live[1] = { km_block (64, 4) };
  sem_post (&km_looked);
  if (pthread_join (t, NULL) != 0)
    KM_FAIL ("pthread_join failed");
  km_no_block_twice (64, N64, live, 1);
}

/* The first free waits inside another thread's batch, neither its head
   nor its last block, which are all the collect looks at.  Reported at
   the owner's free when every free is checked; otherwise the owner's
   malloc hands the block out again, and its new owner writes it,
   before the batch comes: the pop that meets it in the batch finds
   neither tag, and drops the rest of the list.  */
KM_TEST (double_free_of_a_64_b_block_inside_another_thread_s_batch)
{
  KM_NEEDS_HARDENING;
  KM_EXPECT (sc_double_free_inside_a_batch, KM_REPORT ? "free" : "malloc",
             KM_REPORT ? "double free of"
             : "corrupted free list (a freed block was written to) at");
}

static void *km_kept, *km_freed;

static void *
km_alloc_free_exit_thread (void *arg)
{
  (void) arg;
  km_kept = kame_pool_malloc (64);
  km_freed = kame_pool_malloc (64);
  if (km_kept == NULL || km_freed == NULL)
    return "malloc failed";
  kame_pool_free (km_freed);
  return NULL;
}

static void
sc_double_free_after_exit (void)
{
  /* The thread exits with one block live: its chunk is abandoned, not
     released.  */
  km_in_thread (km_alloc_free_exit_thread, NULL);
  km_misusing (km_freed);
  kame_pool_free (km_freed);
  km_no_block_twice (64, N64, &km_kept, 1);
}

KM_TEST (double_free_of_a_64_b_block_after_its_thread_exited)
{
  KM_NEEDS_HARDENING;
  KM_EXPECT (sc_double_free_after_exit, "free", "double free of");
}

/* ---- Frees of pointers that start no block ----------------------------- */

static void
sc_interior_64 (void)
{
  char *p = km_block (64, 3);
  km_misusing (p + 16);
  kame_pool_free (p + 16);
  km_intact (p, 64, 3);
  void *live = p;
  km_no_block_twice (64, N64, &live, 1);
}

KM_TEST (free_16_bytes_into_a_64_b_block)
{
  KM_NEEDS_HARDENING;
  KM_EXPECT (sc_interior_64, "free",
             "invalid pointer (not the start of a block):");
}

static void
sc_interior_64_remote (void)
{
  char *p = km_block (64, 3);
  km_misusing (p + 16);
  km_in_thread (km_free_thread, p + 16);
  km_intact (p, 64, 3);
  void *live = p;
  km_no_block_twice (64, N64, &live, 1);
}

/* The remote free tests the offset with its class's magic number in
   every build: no hardening needed.  */
KM_TEST (free_16_bytes_into_a_64_b_block_from_another_thread)
{
  KM_EXPECT (sc_interior_64_remote, "free",
             "invalid pointer (not the start of a block):");
}

/* A block of KM_SIZE bytes freed at 100 KiB into it.  */
static void
sc_interior_100k (void)
{
  char *p = km_block (km_size, 4);
  km_misusing (p + 100 * KIB);
  kame_pool_free (p + 100 * KIB);
  km_intact (p, km_size, 4);
  void *live = p;
  km_no_block_twice (km_size, 16, &live, 1);
}

/* The biggest class (208896 bytes), 5 blocks a chunk.  */
KM_TEST (free_inside_a_200_kb_block)
{
  KM_NEEDS_HARDENING;
  km_size = 200 * KIB;
  KM_EXPECT (sc_interior_100k, "free",
             "invalid pointer (not the start of a block):");
}

/* A dedicated chunk.  */
KM_TEST (free_inside_a_240_kib_block)
{
  km_size = 240 * KIB;
  KM_EXPECT (sc_interior_100k, "free",
             "invalid pointer (inside a large block):");
}

static void
sc_interior_8m (void)
{
  char *p = kame_pool_malloc (8 * MIB);
  if (p == NULL)
    KM_FAIL ("malloc (8 MiB) failed");
  p[0] = 9;
  km_misusing (p + MIB);
  kame_pool_free (p + MIB);
  if (p[0] != 9 || kame_pool_malloc_usable_size (p) < 8 * MIB)
    KM_FAIL ("the 8 MiB block changed");
  void *live = p;
  km_no_block_twice (8 * MIB, 4, &live, 1);
}

/* Inside a mapping of its own: the mapping's header, at the start of
   its region, tells the pool's interior pointer from one of the C
   library's in the same 32 MiB slot.  */
KM_TEST (free_inside_an_8_mib_block)
{
  KM_EXPECT (sc_interior_8m, "free",
             "invalid pointer (inside a large block):");
}

static void
sc_metadata (void)
{
  void *p = km_block (64, 5);
  char *region = (char *) ((uintptr_t) p & ~(uintptr_t) (REGION - 1));
  /* Unit 0 of a region holds its metadata, never a block.  */
  km_misusing (region + 64);
  kame_pool_free (region + 64);
  km_intact (p, 64, 5);
  km_no_block_twice (64, N64, &p, 1);
}

KM_TEST (free_into_region_metadata)
{
  KM_EXPECT (sc_metadata, "free",
             "invalid pointer (not an allocated block):");
}

/* ---- Pointers that are nobody's ---------------------------------------- */

static void
sc_stack (void)
{
  /* A dynamic alloca is on the thread's own stack even where the
     address sanitizer moves fixed-size locals to a fake stack.  */
  char *buf = alloca (64);
  KM_OPAQUE (buf);
  kt_paint (buf, 64, 6);
  km_misusing (buf);
  kame_pool_free (buf);
  if (!kt_painted (buf, 64, 6))
    KM_FAIL ("the stack buffer was changed");
  km_no_block_twice (64, N64, NULL, 0);
}

KM_TEST (free_of_a_stack_address)
{
  KM_EXPECT (sc_stack, "free", "invalid pointer (on the stack):");
}

static void *
km_stack_thread (void *arg)
{
  (void) arg;
  char *buf = alloca (64);
  KM_OPAQUE (buf);
  km_misusing (buf);
  kame_pool_free (buf);
  return NULL;
}

static void
sc_thread_stack (void)
{
  km_in_thread (km_stack_thread, NULL);
  km_no_block_twice (64, N64, NULL, 0);
}

KM_TEST (free_of_a_stack_address_in_another_thread)
{
  KM_EXPECT (sc_thread_stack, "free", "invalid pointer (on the stack):");
}

static void
sc_unmapped (void)
{
  char *m = mmap (NULL, 4096, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED || munmap (m, 4096) != 0)
    KM_FAIL ("mmap or munmap failed");
  km_misusing (m + 64);
  kame_pool_free (m + 64);
  km_no_block_twice (64, N64, NULL, 0);
}

KM_TEST (free_of_an_unmapped_address)
{
  KM_EXPECT (sc_unmapped, "free", "invalid pointer (unmapped):");
}

static _Alignas (64) char km_static[256];

static void
sc_misaligned (void)
{
  char *p = km_static + 72;
  KM_OPAQUE (p);
  km_misusing (p);
  kame_pool_free (p);
  km_no_block_twice (64, N64, NULL, 0);
}

KM_TEST (free_of_a_misaligned_pointer)
{
  KM_EXPECT (sc_misaligned, "free",
             "invalid pointer (misaligned; no allocator's block):");
}

static void
sc_static (void)
{
  char *p = km_static + 64;
  KM_OPAQUE (p);
  km_misusing (p);
  kame_pool_free (p);
  km_no_block_twice (64, N64, NULL, 0);
}

/* The zeros before it are no C library's block header.  */
KM_TEST (free_of_a_static_buffer)
{
  KM_NEEDS_INTERPOSE ("free of a static buffer");
  KM_EXPECT (sc_static, "free",
             "invalid pointer (not allocated by the pool or the C "
             "library):");
}

/* ---- realloc ----------------------------------------------------------- */

/* realloc (P, N) was refused: NULL and EINVAL.  */
static void
km_realloc_refused (void *p, size_t n)
{
  errno = 0;
  void *q = kame_pool_realloc (p, n);
  if (q != NULL || errno != EINVAL)
    KM_FAIL ("realloc (%p, %zu) gave %p, errno %d, not NULL and EINVAL",
             p, n, q, errno);
}

static void
sc_realloc_interior (void)
{
  char *p = km_block (64, 3);
  km_misusing (p + 16);
  km_realloc_refused (p + 16, 200);
  km_intact (p, 64, 3);
  void *live = p;
  km_no_block_twice (64, N64, &live, 1);
}

KM_TEST (realloc_of_a_pointer_16_bytes_into_a_64_b_block)
{
  KM_NEEDS_HARDENING;
  KM_EXPECT (sc_realloc_interior, "realloc",
             "invalid pointer (not the start of a block):");
}

static void
sc_realloc_interior_100k (void)
{
  char *p = km_block (km_size, 4);
  km_misusing (p + 100 * KIB);
  km_realloc_refused (p + 100 * KIB, 300 * KIB);
  km_intact (p, km_size, 4);
  void *live = p;
  km_no_block_twice (km_size, 16, &live, 1);
}

KM_TEST (realloc_inside_a_200_kb_block)
{
  km_size = 200 * KIB;
  KM_EXPECT (sc_realloc_interior_100k, "realloc",
             "invalid pointer (not the start of a block):");
}

KM_TEST (realloc_inside_a_240_kib_block)
{
  km_size = 240 * KIB;
  KM_EXPECT (sc_realloc_interior_100k, "realloc",
             "invalid pointer (not an allocated block):");
}

static void
sc_realloc_freed (void)
{
  void *p = km_block (64, 3);
  kame_pool_free (p);
  km_misusing (p);
  km_realloc_refused (p, 200);
  km_no_block_twice (64, N64, NULL, 0);
}

KM_TEST (realloc_of_a_freed_64_b_block)
{
  KM_NEEDS_HARDENING;
  KM_EXPECT (sc_realloc_freed, "realloc",
             "invalid pointer (freed already):");
}

static void
sc_realloc_freed_300k (void)
{
  void *p = km_block (300 * KIB, 3);
  kame_pool_free (p);
  km_misusing (p);
  km_realloc_refused (p, 400 * KIB);
  km_no_block_twice (300 * KIB, 24, NULL, 0);
}

/* Its chunk waits in the large cache.  */
KM_TEST (realloc_of_a_freed_300_kib_block)
{
  KM_EXPECT (sc_realloc_freed_300k, "realloc",
             "invalid pointer (not an allocated block):");
}

static void
sc_realloc_stack (void)
{
  char *buf = alloca (64);
  KM_OPAQUE (buf);
  kt_paint (buf, 64, 6);
  km_misusing (buf);
  km_realloc_refused (buf, 100);
  if (!kt_painted (buf, 64, 6))
    KM_FAIL ("the stack buffer was changed");
}

KM_TEST (realloc_of_a_stack_address)
{
  KM_EXPECT (sc_realloc_stack, "realloc", "invalid pointer (on the stack):");
}

/* ---- A freed block written to ------------------------------------------ */

static void
sc_overflow (void)
{
  /* Two neighbours A and B (the chunk carves in address order).  */
  static void *spare[256];
  size_t nspare = 0;
  char *a = NULL, *b = NULL;
  while (nspare < 256)
    {
      char *x = km_block (64, 1);
      char *y = km_block (64, 2);
      if (y == x + 64)
        {
          a = x, b = y;
          break;
        }
      spare[nspare++] = x;
      spare[nspare++] = y;
    }
  if (a == NULL)
    KM_FAIL ("no two 64-byte blocks next to each other");
  kame_pool_free (b);
  /* 16 bytes too many: B's link and tag.  */
  char *w = a;
  KM_OPAQUE (w);
  memset (w, 'A', 64 + 16);
  KM_OPAQUE (w);
  km_misusing (b);
  void *c1 = kame_pool_malloc (64);
  void *c2 = kame_pool_malloc (64);
  if (c1 == NULL || c2 == NULL || c1 == c2)
    KM_FAIL ("malloc (64) twice after the overflow: %p and %p", c1, c2);
  void *live[258] = { a, c1, c2 };
  memcpy (live + 3, spare, nspare * sizeof *spare);
  km_no_block_twice (64, N64, live, 3 + nspare);
}

/* The next malloc pops B, decodes garbage, reports it and drops the
   rest of the list (a leak, never a block handed out twice).  */
KM_TEST (overflow_into_a_freed_neighbour)
{
  KM_NEEDS_HARDENING;
  KM_EXPECT (sc_overflow, "malloc",
             "corrupted free list (a freed block was written to) at");
}

static void *
km_free_two_thread (void *arg)
{
  void **pq = arg;
  kame_pool_free (pq[1]);
  kame_pool_free (pq[0]);
  return NULL;
}

static void
sc_write_into_a_remote_freed_block (void)
{
  void *pq[2] = { km_block (64, 1), km_block (64, 2) };
  /* Freed by a thread that exits: its batch, P then Q, goes onto the
     chunk's list of remote frees.  */
  km_in_thread (km_free_two_thread, pq);
  char *w = pq[0];
  KM_OPAQUE (w);
  memset (w, 'A', 8);           /* P's link */
  KM_OPAQUE (w);
  km_misusing (pq[0]);
  km_no_block_twice (64, N64, NULL, 0);
}

/* The owner's collect of the remote frees decodes garbage in P's link,
   reports it and drops the rest of the list.  */
KM_TEST (write_into_a_block_on_a_remote_list)
{
  KM_NEEDS_HARDENING;
  KM_EXPECT (sc_write_into_a_remote_freed_block, "free",
             "corrupted free list (a freed block was written to) at");
}

/* ---- malloc_usable_size ------------------------------------------------ */

static void
sc_usable_size_stack (void)
{
  char *buf = alloca (64);
  KM_OPAQUE (buf);
  km_misusing (buf);
  size_t u = malloc_usable_size (buf);
  if (u != 0)
    KM_FAIL ("malloc_usable_size of a stack address: %zu", u);
}

/* Only the interposed malloc_usable_size checks: the pool's own
   kame_pool_malloc_usable_size answers 0 for any pointer it does not
   own, as documented.  */
KM_TEST (malloc_usable_size_of_a_stack_address)
{
  KM_NEEDS_INTERPOSE ("malloc_usable_size of a stack address");
  KM_EXPECT (sc_usable_size_stack, "malloc_usable_size",
             "invalid pointer (on the stack):");
}


/* free_sized as the program sees it (dlsym: this glibc's <stdlib.h> may
   not declare it); kame_pool_free_sized where nothing exports it.  */
static KM_UNUSED void
free_sized_of (void *p, size_t size)
{
  void (*f) (void *, size_t)
    = (void (*) (void *, size_t)) dlsym (RTLD_DEFAULT, "free_sized");
  if (f == NULL)
    KM_FAIL ("no free_sized");
  f (p, size);
}

/* C23's sized frees: a size larger than the block, or an alignment it
   does not have, is misuse; the block stays allocated with report.
   kame_pool_free_sized and kame_pool_free_aligned_sized, in every
   build; free_sized and free_aligned_sized where the pool interposes
   (see sized_frees_of_the_right_size_free in kamepool.api).  */
static void
sc_free_sized_too_large (void)
{
  char *p = km_block (100, 5);
  km_misusing (p);
  kame_pool_free_sized (p, kame_pool_malloc_usable_size (p) + 1);
  km_intact (p, 100, 5);
  void *live = p;
  km_no_block_twice (100, N64, &live, 1);
  kame_pool_free_sized (p, 100);
}

KM_TEST (free_sized_with_a_size_larger_than_the_block)
{
  KM_EXPECT (sc_free_sized_too_large, "kame_pool_free_sized",
             "invalid size (larger than the block):");
}

static void
sc_free_aligned_sized_misaligned (void)
{
  /* Blocks of the 48-byte class follow each other 48 bytes apart: of
     two in a row, one is not 32-byte aligned.  */
  char *p = kame_pool_malloc (48), *q = kame_pool_malloc (48);
  if (p == NULL || q == NULL)
    KM_FAIL ("malloc (48) failed");
  char *odd = ((uintptr_t) p & 31) != 0 ? p : q;
  if (((uintptr_t) odd & 31) == 0)
    KM_FAIL ("two 48-byte blocks %p and %p both 32-byte aligned", p, q);
  kame_pool_free (odd == p ? q : p);
  kt_paint (odd, 48, 6);
  km_misusing (odd);
  kame_pool_free_aligned_sized (odd, 32, 48);
  km_intact (odd, 48, 6);
  kame_pool_free_aligned_sized (odd, 16, 48);
}

KM_TEST (free_aligned_sized_with_an_alignment_the_block_does_not_have)
{
  KM_EXPECT (sc_free_aligned_sized_misaligned, "kame_pool_free_aligned_sized",
             "invalid alignment (the block does not have it):");
}

static void
sc_free_aligned_sized_not_power (void)
{
  char *p = km_block (48, 7);
  km_misusing (p);
  kame_pool_free_aligned_sized (p, 24, 48);
  km_intact (p, 48, 7);
  kame_pool_free_aligned_sized (p, 16, 48);
}

KM_TEST (free_aligned_sized_with_an_alignment_not_a_power_of_two)
{
  KM_EXPECT (sc_free_aligned_sized_not_power, "kame_pool_free_aligned_sized",
             "invalid alignment (not a power of two):");
}

static void
sc_free_sized_large (void)
{
  char *p = km_block (8 * MIB, 8);
  km_misusing (p);
  free_sized_of (p, 64 * MIB);
  km_intact (p, 8 * MIB, 8);
  free_sized_of (p, 8 * MIB);
}

/* The interposed name, where there is one.  */
KM_TEST (free_sized_of_an_8_mib_block_with_64_mib)
{
  KM_NEEDS_INTERPOSE ("free_sized");
  KM_EXPECT (sc_free_sized_large, "free_sized",
             "invalid size (larger than the block):");
}

KT_MAIN (KM_CASE (double_free_of_a_64_b_block),
         KM_CASE (double_free_of_a_64_b_block_with_a_free_in_between),
         KM_CASE (double_free_of_a_64_b_block_is_found_before_a_second_owner),
         KM_CASE (double_free_that_empties_a_chunk_while_a_block_is_live),
         KM_CASE (double_free_of_a_4_kib_block),
         KM_CASE (double_free_of_a_64_kib_block),
         KM_CASE (double_free_of_a_64_kib_block_the_second_by_another_thread),
         KM_CASE (double_free_of_a_64_kib_block_past_the_thread_s_slot),
         KM_CASE (write_into_a_64_kib_block_kept_for_the_next_malloc),
         KM_CASE (double_free_of_a_64_kib_block_in_a_page_given_back),
         KM_CASE (double_free_of_a_240_kib_block),
         KM_CASE (double_free_of_a_1_mib_block),
         KM_CASE (double_free_of_an_8_mib_block),
         KM_CASE (double_free_of_a_64_mib_block),
         KM_CASE (double_free_of_an_unmapped_8_mib_block),
         KM_CASE (double_free_of_a_64_b_block_the_second_by_another_thread),
         KM_CASE (double_free_of_a_64_b_block_the_first_by_another_thread),
         KM_CASE (double_free_of_a_64_b_block_waiting_in_another_thread_s_batch),
         KM_CASE (double_free_of_a_64_b_block_its_freer_then_takes_back),
         KM_CASE (double_free_of_a_64_b_block_inside_another_thread_s_batch),
         KM_CASE (double_free_of_a_64_b_block_both_by_another_thread),
         KM_CASE (double_free_of_a_64_b_block_after_its_thread_exited),
         KM_CASE (free_16_bytes_into_a_64_b_block),
         KM_CASE (free_16_bytes_into_a_64_b_block_from_another_thread),
         KM_CASE (free_inside_a_200_kb_block),
         KM_CASE (free_inside_a_240_kib_block),
         KM_CASE (free_inside_an_8_mib_block),
         KM_CASE (free_into_region_metadata),
         KM_CASE (free_of_a_stack_address),
         KM_CASE (free_of_a_stack_address_in_another_thread),
         KM_CASE (free_of_an_unmapped_address),
         KM_CASE (free_of_a_misaligned_pointer),
         KM_CASE (free_of_a_static_buffer),
         KM_CASE (realloc_of_a_pointer_16_bytes_into_a_64_b_block),
         KM_CASE (realloc_inside_a_200_kb_block),
         KM_CASE (realloc_inside_a_240_kib_block),
         KM_CASE (realloc_of_a_freed_64_b_block),
         KM_CASE (realloc_of_a_freed_300_kib_block),
         KM_CASE (realloc_of_a_stack_address),
         KM_CASE (overflow_into_a_freed_neighbour),
         KM_CASE (write_into_a_block_on_a_remote_list),
         KM_CASE (malloc_usable_size_of_a_stack_address),
         KM_CASE (free_sized_with_a_size_larger_than_the_block),
         KM_CASE (free_aligned_sized_with_an_alignment_the_block_does_not_have),
         KM_CASE (free_aligned_sized_with_an_alignment_not_a_power_of_two),
         KM_CASE (free_sized_of_an_8_mib_block_with_64_mib))
