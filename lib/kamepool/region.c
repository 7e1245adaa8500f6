/* region.c -- 32 MiB regions and the claiming of unit runs in them.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   A region is mapped once, 32 MiB-aligned, and never unmapped.  Unit 0
   holds the kp_region_t; units 1..127 are data.  Each region belongs
   to a NUMA node (numa.c; node 0 when placement is off) and sits on two
   push-only lists: the list of all regions, which the statistics and
   the adoption of abandoned chunks walk, and its node's list, which the
   claim walks.  No removal, hence no ABA and no reclamation.

   The claim protocol (model: testsuite/kamepool.model/claim.pml):
     claim    load claim[w] relaxed; pick a free run at a position that
              is a multiple of its length; CAS it in with acquire (so the
              winner sees the previous releaser's metadata reset); ONLY
              THEN write back[base + i] = i, relaxed.  Writing the
              back-offsets before the CAS let a loser with another stride
              overwrite a winner's entries: the historical
              double-allocation race of the design notes (§6).
     release  reset the descriptor and back[] (relaxed), return the
              pages, then clear the claim bits with a release fetch_and:
              that is the point from which the units may be claimed
              again, and it publishes the reset to the next claimer.  */

#include <config.h>

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "kp_internal.h"

static kp_region_t *_Atomic kp_regions;         /* list head: release push, acquire walk */
/* Per-node list heads, same orders.  */
static kp_region_t *_Atomic kp_node_regions[KP_MAX_NODES];
/* Regions mapped or being mapped: a reservation counter.  A creator
   reserves its region with a fetch_add (relaxed) before it maps it, so
   that racing creators cannot pass the cap together, and gives the
   reservation back (fetch_sub) when the cap or the kernel says no.
   Read relaxed by the statistics and the cap check.  */
static _Atomic (size_t) kp_nregions;

/* The bytes of resident pages that released units hold, over all
   regions: the sum of the dirty units' rpages, in bytes.  A chunk
   released and soon claimed again (a producer/consumer pair, a loop
   over a dedicated size, the next generation of short-lived threads)
   then costs no madvise and no page faults; past the budget, released
   pages go back to the kernel at once.  Of those kept, the ones that
   stay free for a whole decay period go back too, down to
   KP_DIRTY_KEEP (kp_units_decay).  The budget counts the pages a
   small chunk carved blocks into, not its whole units: a short-lived
   thread's chunks are mostly untouched, and counted whole they filled
   the budget with a few pages each, so that the next thread faulted
   every page in again.  Relaxed: an approximate count is enough for a
   budget.  */
static _Atomic (size_t) kp_dirty_count;

/* The units claimed now (kp_claim_won adds a claim's, kp_units_release
   takes a release's away), and their recent peak: raised by a claim
   that passes it, brought down by every tick of kp_units_decay by an
   eighth of the way to the units claimed then.  The dirty budget is
   the peak less the units claimed (kp_dirty_budget): a program that
   frees a working set it had a moment ago keeps its pages for the next
   one, and the units claimed plus the free ones kept never pass the
   recent peak.  Relaxed, and the peak's update a load and a store (a
   lost update only moves a budget).  */
static _Atomic (size_t) kp_claimed_units;
static _Atomic (size_t) kp_claimed_peak;

/* The footprint: the units claimed (KP_UNIT_SIZE bytes each) and the
   bytes of the live large mappings (kp_footprint_add, from large.c).
   Its highest value ever, raised with a CAS loop by the claim or the
   mapping that passes it; and the bytes claimed or mapped since the
   last measure of the live bytes, which kp_peak_live_hook (stats.c)
   takes each time they pass a sixty-fourth of the footprint and a MiB:
   the measures, each a walk of the descriptors, stay few, and the
   peak of the live bytes is sought wherever the pool takes memory,
   whatever it gave back in between.  Relaxed: statistics.  */
static _Atomic (size_t) kp_large_mapped;
static _Atomic (size_t) kp_footprint_peak;
static _Atomic (size_t) kp_grown;
void (*_Atomic kp_peak_live_hook) (void);

/* CLAIMED units are claimed now, and GREW bytes more were claimed or
   mapped just now.  */
static void
kp_footprint_note (size_t claimed, size_t grew)
{
  size_t fp = (claimed << KP_UNIT_SHIFT)
              + atomic_load_explicit (&kp_large_mapped, memory_order_relaxed);
  size_t peak = atomic_load_explicit (&kp_footprint_peak,
                                      memory_order_relaxed);
  while (fp > peak
         && !atomic_compare_exchange_weak_explicit (&kp_footprint_peak, &peak,
                                                    fp, memory_order_relaxed,
                                                    memory_order_relaxed))
    ;
  size_t step = fp / 64 + ((size_t) 1 << 20);
  if (atomic_fetch_add_explicit (&kp_grown, grew, memory_order_relaxed)
      + grew < step)
    return;
  /* One of the threads that see the step passed measures.  */
  size_t got = atomic_exchange_explicit (&kp_grown, 0, memory_order_relaxed);
  if (got < step)
    {
      atomic_fetch_add_explicit (&kp_grown, got, memory_order_relaxed);
      return;
    }
  void (*hook) (void) = atomic_load_explicit (&kp_peak_live_hook,
                                              memory_order_relaxed);
  if (hook != NULL)
    hook ();
}

void
kp_footprint_add (size_t bytes)
{
  atomic_fetch_add_explicit (&kp_large_mapped, bytes, memory_order_relaxed);
  if ((ptrdiff_t) bytes > 0)
    kp_footprint_note (atomic_load_explicit (&kp_claimed_units,
                                             memory_order_relaxed), bytes);
}

size_t
kp_footprint_peak_bytes (void)
{
  return atomic_load_explicit (&kp_footprint_peak, memory_order_relaxed);
}

/* Free units claimed again whose pages a discard had given back
   (DISCARDED in the region; kp_claim_won counts them): each faults its
   pages in again.  Relaxed, read by the statistics.  */
static _Atomic (size_t) kp_refault_units;

/* The bytes of free units claimed again within a delay of their
   release whose pages had been given back (by a release past the
   budget, the budget's purge, a teardown or a trim: the decay gives
   back only units free for a delay): each faulted its pages in again.
   The dirty budget's floor grows by them (kp_dirty_budget, up to a
   quarter of the units claimed), and every tick of kp_units_decay
   takes an eighth of them away: a program whose units go round at its
   peak keeps them, and one that stops soon gets the floor back.
   Relaxed, and the tick's update a load and a store, as the peak's.  */
static _Atomic (size_t) kp_refault_room;
#define KP_REFAULT_ROOM_SHARE 4         /* of the units claimed */
#define KP_REFAULT_ROOM_DECAY 8         /* a tick takes 1/8 */

/* Releases and purges of units that gave pages back to the kernel
   (kp_units_release, kp_units_purge_where).  Relaxed, read by
   kame_pool_trim only.  */
static _Atomic (size_t) kp_discard_count;

size_t
kp_dirty_bytes (void)
{
  return atomic_load_explicit (&kp_dirty_count, memory_order_relaxed);
}

/* A walk of the dirty bits: a moment's picture, as every count of the
   statistics.  */
size_t
kp_dirty_units (void)
{
  size_t n = 0;
  KP_FOR_EACH_REGION (r)
    for (unsigned w = 0; w < KP_CLAIM_WORDS; w++)
      n += (size_t) __builtin_popcountll
             (atomic_load_explicit (&r->dirty[w], memory_order_relaxed));
  return n;
}

size_t
kp_units_refaulted (void)
{
  return atomic_load_explicit (&kp_refault_units, memory_order_relaxed);
}

size_t
kp_units_discards (void)
{
  return atomic_load_explicit (&kp_discard_count, memory_order_relaxed);
}

static inline uint64_t
kp_run_mask (unsigned units)
{
  return units >= 64 ? ~(uint64_t) 0 : (((uint64_t) 1 << units) - 1);
}

/* Groups made small chunks' groups, and groups split, ever (the
   report); relaxed statistics.  */
static _Atomic (size_t) kp_group_count;
static _Atomic (size_t) kp_group_splits;

size_t
kp_groups_started (void)
{
  return atomic_load_explicit (&kp_group_count, memory_order_relaxed);
}

size_t
kp_groups_split (void)
{
  return atomic_load_explicit (&kp_group_splits, memory_order_relaxed);
}

/* madvise ADVICE on the group of KP_HUGE_UNITS units at unit FIRST of
   R; a kernel without transparent huge pages refuses, which changes
   nothing.  */
static void
kp_group_advise (kp_region_t *r, unsigned first, int advice)
{
  int saved = errno;
  madvise ((char *) r + ((size_t) first << KP_UNIT_SHIFT),
           (size_t) KP_HUGE_UNITS << KP_UNIT_SHIFT, advice);
  errno = saved;
}
#if !(HAVE_DECL_MADV_HUGEPAGE && HAVE_DECL_MADV_NOHUGEPAGE)
# define MADV_HUGEPAGE 0        /* never used: no group starts */
# define MADV_NOHUGEPAGE 0
#endif

/* With KAME_POOL_THP_SMALL, part of the huge group (KP_HUGE_UNITS
   units, 2 MiB) of unit U of R is about to go back to the kernel,
   which splits its huge page: the group is a small chunks' group no
   more (its HUGE bits cleared), and loses the advice (MADV_NOHUGEPAGE),
   so that khugepaged does not make it a huge page again with the
   pages given back faulted in.  Any thread, at any time: the bits are
   a hint for the claims and the purges, and of two splitters only the
   one that clears them advises.  */
void
kp_group_split (kp_region_t *r, unsigned u)
{
  const uint64_t g = ((uint64_t) 1 << KP_HUGE_UNITS) - 1;
  unsigned first = u & ~(unsigned) (KP_HUGE_UNITS - 1);
  uint64_t gm = g << (first % 64);
  if ((atomic_load_explicit (&r->huge[u / 64], memory_order_relaxed) & gm)
      == 0
      || (atomic_fetch_and_explicit (&r->huge[u / 64], ~gm,
                                     memory_order_relaxed) & gm) == 0)
    return;
  atomic_fetch_add_explicit (&kp_group_splits, 1, memory_order_relaxed);
  kp_group_advise (r, first, MADV_NOHUGEPAGE);
}

/* Give the pages of the UNITS units at unit BASE of R back to the
   kernel; the caller holds their claim bits.  */
static void
kp_units_discard (kp_region_t *r, unsigned base, unsigned units)
{
  for (unsigned u = base & ~(unsigned) (KP_HUGE_UNITS - 1); u < base + units;
       u += KP_HUGE_UNITS)
    kp_group_split (r, u);
  kp_os_discard ((char *) r + ((size_t) base << KP_UNIT_SHIFT),
                 (size_t) units << KP_UNIT_SHIFT);
  memset (&r->rpages[base], 0, units);
  atomic_fetch_or_explicit (&r->discarded[base / 64],
                            kp_run_mask (units) << (base % 64),
                            memory_order_relaxed);
  atomic_fetch_add_explicit (&kp_discard_count, 1, memory_order_relaxed);
}

/* Give back the huge page of the units GM of claim word W of R, whose
   claim bits the caller holds, in one call; GONE are those of them that
   were resident (their dirty bits, cleared by the caller): they leave
   the free units' count and are marked given back.  Their pages.  */
static size_t
kp_units_discard_huge (kp_region_t *r, unsigned w, uint64_t gm,
                       uint64_t gone)
{
  unsigned base = w * 64 + (unsigned) __builtin_ctzll (gm);
  unsigned units = (unsigned) __builtin_popcountll (gm);
  size_t pages = 0;
  for (uint64_t m = gone; m != 0; m &= m - 1)
    {
      unsigned u = w * 64 + (unsigned) __builtin_ctzll (m);
      pages += r->rpages[u];
      r->rpages[u] = 0;
    }
  atomic_fetch_sub_explicit (&kp_dirty_count, pages << kp_page_shift (),
                             memory_order_relaxed);
  kp_os_discard ((char *) r + ((size_t) base << KP_UNIT_SHIFT),
                 (size_t) units << KP_UNIT_SHIFT);
  atomic_fetch_or_explicit (&r->discarded[w], gone, memory_order_relaxed);
  atomic_fetch_add_explicit (&kp_discard_count, 1, memory_order_relaxed);
  return pages;
}

kp_region_t *
kp_region_first (void)
{
  return atomic_load_explicit (&kp_regions, memory_order_acquire);
}

size_t
kp_region_count (void)
{
  return atomic_load_explicit (&kp_nregions, memory_order_relaxed);
}

/* Map and publish a new region of node NODE; NULL when the cap is
   reached or the kernel refuses.  Several threads may create regions
   at once: each then claims from whichever region it finds first.  */
static kp_region_t *
kp_region_new (unsigned node)
{
  size_t cap = kp_setting (&kp_max_bytes);
  size_t n = atomic_fetch_add_explicit (&kp_nregions, 1, memory_order_relaxed);
  if (cap != 0 && (n + 1) > cap / KP_REGION_SIZE)
    {
      atomic_fetch_sub_explicit (&kp_nregions, 1, memory_order_relaxed);
      return NULL;
    }
  kp_region_t *r = kp_os_map_aligned (KP_REGION_SIZE, KP_REGION_SIZE);
  if (r == NULL)
    {
      atomic_fetch_sub_explicit (&kp_nregions, 1, memory_order_relaxed);
      return NULL;
    }
  /* Before the first touch: a memory policy places only the pages
     faulted in after it, and the metadata is written just below.  */
  kp_numa_bind (r, KP_REGION_SIZE, node);
  /* The mapping is zero-filled: back[], abandoned[] and the descriptor
     fields start at 0, and unit 0 is claimed for the metadata.  A
     descriptor's xthread_free is 0 until its first chunk is set up
     (kp_chunk_setup stores OWNED before the kind): nothing reads it
     before, as no hint bit names a unit that never started a chunk,
     and a free finds no chunk of kind SMALL there.  Left untouched,
     the descriptors' pages are faulted in only as chunks use them, not
     the eight of them at the creation of every region.  */
  atomic_init (&r->claim[0], 1);
  atomic_init (&r->has_free, 1);
  r->numa_node = (uint8_t) node;
  int thp = kp_thp_policy_now ();
  kp_thp_advise_region (r, thp);
  /* The radix entry first, then the lists: a thread that finds the
     region on a list may hand out blocks whose free needs the entry.  */
  kp_radix_set ((uintptr_t) r, KP_RADIX_POOL);
  kp_region_t *head = atomic_load_explicit (&kp_regions, memory_order_relaxed);
  do
    atomic_store_explicit (&r->next, head, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit (&kp_regions, &head, r,
                                                 memory_order_release,
                                                 memory_order_relaxed));
  head = atomic_load_explicit (&kp_node_regions[node], memory_order_relaxed);
  do
    atomic_store_explicit (&r->node_next, head, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit (&kp_node_regions[node],
                                                 &head, r,
                                                 memory_order_release,
                                                 memory_order_relaxed));
  /* A kame_pool_set_thp_policy that ran meanwhile may have walked the
     list before R was on it: with its seq_cst store and this fence,
     either it advised R or this load sees its policy.  */
  atomic_thread_fence (memory_order_seq_cst);
  int now = kp_thp_policy_now ();
  if (now != thp)
    kp_thp_advise_region (r, now);
  return r;
}

/* The units of word W of R that are free and still resident; the claim
   word read in *CLAIM.  */
static inline uint64_t
kp_free_dirty (kp_region_t *r, unsigned w, uint64_t *claim)
{
  *claim = atomic_load_explicit (&r->claim[w], memory_order_relaxed);
  return atomic_load_explicit (&r->dirty[w], memory_order_relaxed) & ~*claim;
}

size_t
kp_dirty_bytes_to_give (void)
{
  size_t all = kp_dirty_bytes ();
  if (all <= KP_DIRTY_KEEP || kp_thp_policy_now () != KAME_POOL_THP_ALWAYS)
    return all;
  /* Whole huge pages only: the free units resident in those that hold
     no claimed unit, a unit's worth each (an upper bound).  */
  const uint64_t g = ((uint64_t) 1 << KP_HUGE_UNITS) - 1;
  size_t units = 0;
  KP_FOR_EACH_REGION (r)
    for (unsigned w = 0; w < KP_CLAIM_WORDS; w++)
      {
        uint64_t claim, d = kp_free_dirty (r, w, &claim);
        if (w == 0)
          claim &= ~(uint64_t) 1;       /* see kp_huge_group_free */
        for (unsigned k = 0; d != 0 && k < 64; k += KP_HUGE_UNITS)
          if ((claim & (g << k)) == 0)
            units += (size_t) __builtin_popcountll (d & (g << k));
      }
  return units << KP_UNIT_SHIFT;
}

/* Set the claim bits BITS of word W of R with one CAS (acquire),
   retried while none of them is taken; false once one is.  */
static bool
kp_claim_bits (kp_region_t *r, unsigned w, uint64_t bits)
{
  uint64_t v = atomic_load_explicit (&r->claim[w], memory_order_relaxed);
  do
    if ((v & bits) != 0)
      return false;
  while (!atomic_compare_exchange_weak_explicit (&r->claim[w], &v, v | bits,
                                                 memory_order_acquire,
                                                 memory_order_relaxed));
  return true;
}

/* Count the units REFAULT (bits of the claim word whose first unit is
   W0 in R) claimed again after a discard, and add to kp_refault_room
   those released less than a delay ago.  */
static void
kp_refaults_note (kp_region_t *r, unsigned w0, uint64_t refault)
{
  atomic_fetch_add_explicit (&kp_refault_units,
                             (size_t) __builtin_popcountll (refault),
                             memory_order_relaxed);
  int delay = kp_setting (&kp_decay_ms);
  if (delay <= 0)
    return;
  uint32_t now = kp_clock_ms ();
  size_t recent = 0;
  for (uint64_t m = refault; m != 0; m &= m - 1)
    {
      unsigned u = w0 + (unsigned) __builtin_ctzll (m);
      uint32_t at = atomic_load_explicit (&r->freed_at[u],
                                          memory_order_relaxed);
      if ((int32_t) (now - at) < delay)
        recent++;
    }
  if (recent != 0)
    atomic_fetch_add_explicit (&kp_refault_room, recent << KP_UNIT_SHIFT,
                               memory_order_relaxed);
}

/* The claim of the run of UNITS units at unit BASE of R was won (its
   CAS set the claim bits BITS of word BASE / 64): now, and only now,
   publish the back-offsets; then the run's pages are no longer free
   resident ones.  Its descriptor.  */
static kp_chunk_t *
kp_claim_won (kp_region_t *r, unsigned base, unsigned units, uint64_t bits)
{
  for (unsigned i = 0; i < units; i++)
    atomic_store_explicit (&r->back[base + i], (uint8_t) i,
                           memory_order_relaxed);
  uint64_t was = atomic_fetch_and_explicit (&r->dirty[base / 64], ~bits,
                                            memory_order_relaxed);
  /* The resident pages of the units that were free leave the count;
     rpages stays, the pages with it.  */
  size_t pages = 0;
  for (uint64_t m = was & bits; m != 0; m &= m - 1)
    pages += r->rpages[base / 64 * 64 + (unsigned) __builtin_ctzll (m)];
  if (pages != 0)
    atomic_fetch_sub_explicit (&kp_dirty_count, pages << kp_page_shift (),
                               memory_order_relaxed);
  uint64_t refault = atomic_fetch_and_explicit (&r->discarded[base / 64],
                                                ~bits, memory_order_relaxed)
                     & bits;
  if (refault != 0)
    kp_refaults_note (r, base / 64 * 64, refault);
  size_t n = (size_t) __builtin_popcountll (bits);
  size_t claimed = atomic_fetch_add_explicit (&kp_claimed_units, n,
                                              memory_order_relaxed) + n;
  if (claimed > atomic_load_explicit (&kp_claimed_peak, memory_order_relaxed))
    atomic_store_explicit (&kp_claimed_peak, claimed, memory_order_relaxed);
  kp_footprint_note (claimed, n << KP_UNIT_SHIFT);
  return &r->desc[base];
}

/* Whether the free resident run of UNITS units at unit BASE of R was
   left by small chunks of class CLS, or with KP_CLS_ANY by small chunks
   of any class: not by a dedicated chunk (RCLS).  */
static bool
kp_run_left_by (const kp_region_t *r, unsigned base, unsigned units,
                unsigned cls)
{
  for (unsigned i = 0; i < units; i++)
    {
      unsigned left = atomic_load_explicit (&r->rcls[base + i],
                                            memory_order_relaxed);
      if (cls == KP_CLS_ANY ? left == KP_CLS_DEDICATED : left != cls)
        return false;
    }
  return true;
}

/* Try to claim UNITS units in R for a dedicated chunk when LARGE, else
   a small chunk; the descriptor of the run, or NULL.  A small chunk's
   run starts at a multiple of UNITS, so that they tile the words; a
   dedicated chunk's anywhere, the first fit, so that it reuses the
   holes that freed chunks of other sizes left.  A dedicated chunk
   takes the lowest such run; a small chunk the highest one of the
   first claim word that has one.  So the small chunks, which stay for
   long, gather at the top of the first word and do not cut up the
   free runs that dedicated chunks come and go in; the first word has
   63 units (unit 0 is the header), so they use the 15 that three
   4 MiB chunks leave and the second word keeps room for four; and a
   dedicated chunk can still grow in place upwards (kp_units_extend).
   With DIRTY (small chunks only), only runs whose pages are all still
   resident qualify, and that small chunks of class CLS left, or of
   any class with KP_CLS_ANY (kp_run_left_by).  */
static kp_chunk_t *
kp_region_try_claim (kp_region_t *r, unsigned units, bool large,
                     bool dirty, unsigned cls, bool skip_groups)
{
  uint64_t run = kp_run_mask (units);
  unsigned step = large ? 1 : units;
  for (unsigned w = 0; w < KP_CLAIM_WORDS; w++)
    {
      uint64_t v = atomic_load_explicit (&r->claim[w], memory_order_relaxed);
      uint64_t hm = skip_groups ? atomic_load_explicit (&r->huge[w],
                                                        memory_order_relaxed)
                                : 0;
    rescan:
      if ((v | hm) == ~(uint64_t) 0)
        continue;
      uint64_t d = dirty ? atomic_load_explicit (&r->dirty[w],
                                                 memory_order_relaxed)
                         : ~(uint64_t) 0;
      if (dirty && (d & ~v) == 0)
        continue;
      for (unsigned j = 0; j + units <= 64; j += step)
        {
          unsigned k = large ? j : 64 - units - j;
          if ((((v | hm) >> k) & run) == 0 && ((d >> k) & run) == run
              && (!dirty || kp_run_left_by (r, w * 64 + k, units, cls)))
            {
              if (!atomic_compare_exchange_strong_explicit
                  (&r->claim[w], &v, v | (run << k),
                   memory_order_acquire, memory_order_relaxed))
                goto rescan;    /* v now holds the current word */
              return kp_claim_won (r, w * 64 + k, units, run << k);
            }
        }
    }
  return NULL;
}

/* Is every unit of R claimed?  The hint HAS_FREE may be cleared only
   then: a region where a long run failed may still have a short one.  */
static bool
kp_region_full (kp_region_t *r)
{
  for (unsigned w = 0; w < KP_CLAIM_WORDS; w++)
    if (atomic_load_explicit (&r->claim[w], memory_order_relaxed)
        != ~(uint64_t) 0)
      return false;
  return true;
}

/* The walk of node NODE's region list (acquire loads: the pushes are
   release CASes).  */
static inline kp_region_t *
kp_node_first (unsigned node)
{
  return atomic_load_explicit (&kp_node_regions[node], memory_order_acquire);
}

static inline kp_region_t *
kp_node_next (const kp_region_t *r)
{
  return atomic_load_explicit (&r->node_next, memory_order_acquire);
}

/* Claim a run of UNITS units from a region of node NODE's list (DIRTY
   and CLS as for kp_region_try_claim and kp_run_left_by).  */
static kp_chunk_t *
kp_node_try_claim (unsigned node, unsigned units, bool large, bool dirty,
                   unsigned cls, bool skip_groups)
{
  for (kp_region_t *r = kp_node_first (node); r != NULL; r = kp_node_next (r))
    {
      if (!atomic_load_explicit (&r->has_free, memory_order_relaxed))
        continue;
      kp_chunk_t *c = kp_region_try_claim (r, units, large, dirty, cls,
                                           skip_groups);
      if (c != NULL)
        return c;
      if (dirty || !kp_region_full (r))
        continue;               /* no hint to fix; or a shorter run fits */
      /* Clear the hint, then look once more, so that a release
         racing with this scan cannot leave a region with free
         units marked full forever.  */
      atomic_store_explicit (&r->has_free, 0, memory_order_relaxed);
      atomic_thread_fence (memory_order_seq_cst);
      if (!kp_region_full (r))
        atomic_store_explicit (&r->has_free, 1, memory_order_relaxed);
    }
  return NULL;
}

/* Claim, among the free runs of UNITS units (at any position) in the
   regions of node NODE, the one with the most units whose pages are
   still resident (the first found all resident ends the scan), if it
   has any; NULL otherwise or when another thread takes it first (the
   caller then claims the plain way).  The scan is a few hundred word
   operations, against a page fault for each unit's page that is not
   resident.  */
static kp_chunk_t *
kp_node_claim_most_dirty (unsigned node, unsigned units)
{
  uint64_t run = kp_run_mask (units);
  kp_region_t *best_r = NULL;
  unsigned best_w = 0, best_k = 0, best_n = 0;
  for (kp_region_t *r = kp_node_first (node); r != NULL; r = kp_node_next (r))
    {
      if (!atomic_load_explicit (&r->has_free, memory_order_relaxed))
        continue;
      for (unsigned w = 0; w < KP_CLAIM_WORDS; w++)
        {
          uint64_t v, d = kp_free_dirty (r, w, &v);
          v |= atomic_load_explicit (&r->huge[w], memory_order_relaxed);
          d &= ~v;
          if (d == 0)
            continue;
          for (unsigned k = 0; k + units <= 64; k++)
            if (((v >> k) & run) == 0)
              {
                unsigned n = (unsigned) __builtin_popcountll ((d >> k) & run);
                if (n > best_n)
                  {
                    best_r = r;
                    best_w = w;
                    best_k = k;
                    best_n = n;
                    if (n == units)
                      goto found;
                  }
              }
        }
    }
found:
  if (best_r == NULL)
    return NULL;
  if (!kp_claim_bits (best_r, best_w, run << best_k))
    return NULL;
  return kp_claim_won (best_r, best_w * 64 + best_k, units, run << best_k);
}

/* The run all resident at its stride that a small chunk of class CLS
   claims before any other: one that a small chunk of its class left,
   else one that any small chunk left or a cached block lent to them
   (KP_PAGES_LAZY_SMALL); NULL when there is none.  Not a dedicated
   chunk's run: that would cut up the run that the next dedicated
   chunk of that size could have had whole.  Its own class's chunk
   carved about as far as it will, so neither faults pages in nor
   leaves resident pages unused past its last block.  */
kp_chunk_t *
kp_units_claim_resident (unsigned units, unsigned cls)
{
  KP_ASSERT (units >= 1 && units <= KP_MAX_UNITS && cls < KP_NCLASS);
  if (atomic_load_explicit (&kp_dirty_count, memory_order_relaxed) == 0)
    return NULL;
  unsigned home = kp_numa_thread_node ();
  kp_chunk_t *c = kp_node_try_claim (home, units, false, true, cls, false);
  if (c == NULL)
    c = kp_node_try_claim (home, units, false, true, KP_CLS_ANY, false);
  return c;
}

/* Clear the claim bits BITS of word W of R, which the caller set for a
   moment, as kp_units_release does: a claimer that found the region
   full meanwhile may have cleared its hint.  */
static void
kp_group_unclaim (kp_region_t *r, unsigned w, uint64_t bits)
{
  atomic_fetch_and_explicit (&r->claim[w], ~bits, memory_order_release);
  atomic_thread_fence (memory_order_seq_cst);
  atomic_store_explicit (&r->has_free, 1, memory_order_relaxed);
}

/* Make the group of units K..K+KP_HUGE_UNITS-1 of word W of R, whose
   claim bits the caller holds and which was never used, a small
   chunks' group; claim its top UNITS units for a small chunk and let
   the others go as free resident units.  Every unit of the group gets
   its rpages full: the huge page brings all of them in at the chunk's
   first touch.  The run's descriptor.  */
static kp_chunk_t *
kp_group_start (kp_region_t *r, unsigned w, unsigned k, unsigned units)
{
  const uint64_t g = ((uint64_t) 1 << KP_HUGE_UNITS) - 1;
  uint64_t gm = g << k;
  unsigned base = w * 64 + k + KP_HUGE_UNITS - units;
  uint64_t bits = kp_run_mask (units) << (base % 64), rest = gm & ~bits;
  atomic_fetch_or_explicit (&r->huge[w], gm, memory_order_relaxed);
  atomic_fetch_add_explicit (&kp_group_count, 1, memory_order_relaxed);
  kp_group_advise (r, w * 64 + k, MADV_HUGEPAGE);
  uint8_t per = (uint8_t) (KP_UNIT_SIZE >> kp_page_shift ());
  uint32_t now = kp_clock_ms ();
  memset (&r->rpages[w * 64 + k], per, KP_HUGE_UNITS);
  for (uint64_t m = rest; m != 0; m &= m - 1)
    {
      unsigned u = w * 64 + (unsigned) __builtin_ctzll (m);
      atomic_store_explicit (&r->rcls[u], KP_CLS_ANY, memory_order_relaxed);
      atomic_store_explicit (&r->freed_at[u], now, memory_order_relaxed);
    }
  atomic_fetch_add_explicit (&kp_dirty_count,
                             ((size_t) __builtin_popcountll (rest) * per)
                             << kp_page_shift (), memory_order_relaxed);
  atomic_fetch_or_explicit (&r->dirty[w], rest, memory_order_relaxed);
  kp_chunk_t *c = kp_claim_won (r, base, units, bits);
  /* The recent peak counts them as held, as the units claimed: the
     dirty budget (kp_dirty_budget) is the peak less the units claimed,
     and without them a steady cycle's releases went past it and gave
     their pages back, to fault them in at the next round.  */
  size_t held = atomic_load_explicit (&kp_claimed_units, memory_order_relaxed)
                + (size_t) __builtin_popcountll (rest);
  if (held > atomic_load_explicit (&kp_claimed_peak, memory_order_relaxed))
    atomic_store_explicit (&kp_claimed_peak, held, memory_order_relaxed);
  kp_group_unclaim (r, w, rest);
  return c;
}

/* The small chunks' groups (KAME_POOL_THP_SMALL).  A small chunk of a
   class that its thread uses densely (kp_units_claim_retry) claims its
   run in a group of KP_HUGE_UNITS units (2 MiB, a huge page) that
   holds only small chunks, advised MADV_HUGEPAGE: a free run in such a
   group first, the top one of its word, so that a group fills before
   the next; else a group that is all free and was never used (no unit
   claimed, resident or given back since the region was mapped: a page
   table made for 4 KiB pages there would keep the group on them),
   which becomes one (kp_group_start).  Its other units come in with
   the huge page at the chunk's first touch, so they join the free
   resident units at once (rpages full, left by KP_CLS_ANY, freed
   now), claimed with the run for that moment and released as
   kp_units_release does.  Unit 0's group is never one
   (kp_thp_advise_region).  NULL when no group has room.  */
static kp_chunk_t *
kp_node_claim_huge (unsigned node, unsigned units)
{
  uint64_t run = kp_run_mask (units);
  for (kp_region_t *r = kp_node_first (node); r != NULL; r = kp_node_next (r))
    {
      if (!atomic_load_explicit (&r->has_free, memory_order_relaxed))
        continue;
      for (unsigned w = 0; w < KP_CLAIM_WORDS; w++)
        {
          uint64_t hm = atomic_load_explicit (&r->huge[w],
                                              memory_order_relaxed);
          uint64_t v = atomic_load_explicit (&r->claim[w],
                                             memory_order_relaxed);
        rescan:
          if ((hm & ~v) == 0)
            continue;
          for (unsigned j = 0; j + units <= 64; j += units)
            {
              unsigned k = 64 - units - j;
              if (((hm >> k) & run) == run && ((v >> k) & run) == 0)
                {
                  if (!atomic_compare_exchange_strong_explicit
                      (&r->claim[w], &v, v | (run << k),
                       memory_order_acquire, memory_order_relaxed))
                    goto rescan;        /* v now holds the current word */
                  return kp_claim_won (r, w * 64 + k, units, run << k);
                }
            }
        }
    }
  const uint64_t g = ((uint64_t) 1 << KP_HUGE_UNITS) - 1;
  for (kp_region_t *r = kp_node_first (node); r != NULL; r = kp_node_next (r))
    {
      if (!atomic_load_explicit (&r->has_free, memory_order_relaxed))
        continue;
      for (unsigned w = 0; w < KP_CLAIM_WORDS; w++)
        {
          uint64_t used
            = atomic_load_explicit (&r->claim[w], memory_order_relaxed)
              | atomic_load_explicit (&r->dirty[w], memory_order_relaxed)
              | atomic_load_explicit (&r->discarded[w], memory_order_relaxed)
              | atomic_load_explicit (&r->huge[w], memory_order_relaxed);
          for (unsigned k = 64; k > 0;)
            {
              k -= KP_HUGE_UNITS;
              uint64_t gm = g << k;
              if ((used & gm) != 0 || (w == 0 && k == 0)
                  || !kp_claim_bits (r, w, gm))
                continue;
              /* Used meanwhile (claimed and released between the loads
                 and the claim): not never used any more.  */
              if (((atomic_load_explicit (&r->dirty[w], memory_order_relaxed)
                    | atomic_load_explicit (&r->discarded[w],
                                            memory_order_relaxed)) & gm) != 0)
                {
                  kp_group_unclaim (r, w, gm);
                  continue;
                }
              return kp_group_start (r, w, k, units);
            }
        }
    }
  return NULL;
}

/* Whether chunk C's first unit lies in a small chunks' group.  */
bool
kp_units_in_group (const kp_chunk_t *c)
{
  const kp_region_t *r = kp_region_of (c);
  unsigned u = kp_chunk_base_unit (c);
  return (atomic_load_explicit (&r->huge[u / 64], memory_order_relaxed)
          >> (u % 64)) & 1;
}

/* Claim a run of UNITS (1..KP_MAX_UNITS) units for a small chunk of
   class CLS or a dedicated chunk (KP_CLS_DEDICATED) from free units
   wherever their pages are: from a region of the calling thread's
   node, else from a new region of that node, so that a thread's memory
   stays on its node.  Only when no region can be mapped (the cap, or
   no memory) do the other nodes' regions serve.  When a crowd of
   threads swarms a fresh region and takes it all, a thread maps
   another and retries instead of failing.  A small chunk of a class
   its thread fills densely (DENSE), with KAME_POOL_THP_SMALL, takes a
   run in a small chunks' group when one has room or a never used one
   is left (kp_node_claim_huge); a dedicated chunk takes none in those
   groups while a region can be mapped.  NULL only when the cap is
   reached or the kernel refuses memory, and no node has a free
   run.  */
kp_chunk_t *
kp_units_claim_any (unsigned units, unsigned cls, bool dense)
{
  KP_ASSERT (units >= 1 && units <= KP_MAX_UNITS);
  bool large = cls == KP_CLS_DEDICATED;
  unsigned home = kp_numa_thread_node ();
#if HAVE_DECL_MADV_HUGEPAGE && HAVE_DECL_MADV_NOHUGEPAGE
  dense = dense && !large
          && kp_thp_policy_now () == KAME_POOL_THP_SMALL
          && kp_thp_kernel_madvise ();
#else
  dense = false;
#endif
  for (;;)
    {
      kp_chunk_t *c;
      if (dense && (c = kp_node_claim_huge (home, units)) != NULL)
        return c;
      c = kp_node_try_claim (home, units, large, false, KP_CLS_ANY, large);
      if (c != NULL)
        return c;
      if (kp_region_new (home) != NULL)
        continue;
      /* A dedicated chunk then takes the free units of the small
         chunks' groups too, first on its own node.  */
      unsigned nodes = kp_numa_nodes ();
      for (unsigned i = large ? 0 : 1; i < nodes; i++)
        if ((c = kp_node_try_claim ((home + i) % nodes, units, large, false,
                                    KP_CLS_ANY, false))
            != NULL)
          return c;
      return NULL;
    }
}

/* Claim a run of UNITS units for a small chunk of class CLS or a
   dedicated chunk (KP_CLS_DEDICATED): first a run whose pages are
   still resident, so that no page faults in again (a dedicated chunk
   the run with the most resident units, since every other unit of it
   faults in anew; a small chunk kp_units_claim_resident's), then
   kp_units_claim_any's.  */
kp_chunk_t *
kp_units_claim (unsigned units, unsigned cls)
{
  kp_chunk_t *c;
  if (cls != KP_CLS_DEDICATED)
    c = kp_units_claim_resident (units, cls);
  else
    c = atomic_load_explicit (&kp_dirty_count, memory_order_relaxed) != 0
        ? kp_node_claim_most_dirty (kp_numa_thread_node (), units) : NULL;
  return c != NULL ? c : kp_units_claim_any (units, cls, false);
}

/* Extend chunk C, which the caller holds exclusively (the block of a
   dedicated chunk), to UNITS units by claiming the units right after it
   in the same claim word; false when one of them is taken or the run
   would cross the word.  The same order as a claim: the CAS first, the
   back-offsets after it is won.  */
bool
kp_units_extend (kp_chunk_t *c, unsigned units)
{
  kp_region_t *r = kp_region_of (c);
  unsigned base = kp_chunk_base_unit (c);
  unsigned have = atomic_load_explicit (&c->units, memory_order_relaxed);
  KP_ASSERT (units > have && units <= KP_MAX_UNITS);
  unsigned from = base + have, w = base / 64, k = from % 64;
  /* A run never crosses a claim word (kp_units_release clears bits of
     one word).  */
  if (base + units > KP_UNITS || (base + units - 1) / 64 != w)
    return false;
  uint64_t more = kp_run_mask (units - have) << k;
  if (!kp_claim_bits (r, w, more))
    return false;
  /* Rewrites the offsets of the units C had with the same values.  */
  kp_claim_won (r, base, units, more);
  atomic_store_explicit (&c->units, (uint8_t) units, memory_order_relaxed);
  return true;
}

/* With huge page advice on, in the bits M of free units of claim word
   W of R that are resident and old enough (of ALL, those resident), the
   first group of KP_HUGE_UNITS units (a huge page) with no unit claimed
   (CLAIM) and no resident one too young: its mask, or 0.  Unit 0, the
   metadata, is not advised (kp_thp_advise_region), so the first huge
   page of a region is never one: its claim does not count, and the
   group's mask leaves it out.  */
static uint64_t
kp_huge_group_free (unsigned w, uint64_t m, uint64_t all, uint64_t claim)
{
  if (w == 0)
    claim &= ~(uint64_t) 1;
  const uint64_t g = ((uint64_t) 1 << KP_HUGE_UNITS) - 1;
  for (unsigned k = 0; k < 64; k += KP_HUGE_UNITS)
    {
      uint64_t gm = g << k;
      if ((m & gm) != 0 && (claim & gm) == 0 && (all & gm & ~m) == 0)
        return w == 0 && k == 0 ? gm & ~(uint64_t) 1 : gm;
    }
  return 0;
}

/* Give the pages of free, resident units back to the kernel (with
   AGE, only those released at least AGE ms before NOW) until at most
   KEEP bytes of them remain.  Each unit is claimed for
   the moment (so no one else can take it while its pages go),
   discarded and released.  With huge page advice on and an AGE (the
   decay's and a release's purges, not a trim's), only whole huge
   pages go, each in one call, where all its units are free and those
   resident old enough: giving back part of a huge page splits it, and
   the units left in it are as likely to be claimed again as to go.
   With KAME_POOL_THP_SMALL and an AGE, a small chunks' group that is
   all free and old enough goes the same way, whole, and the units
   outside the groups go before those in them, which go one at a time
   too (kp_group_split): a group with a unit in use keeps its free ones
   only as long as the other free units last, or an idle program would
   keep them all.  The pages given back; *CALLS counts the discards.  */
static size_t
kp_units_purge_where (uint32_t now, uint32_t age, size_t keep,
                      size_t *calls)
{
  size_t pages = 0;
  int thp = kp_thp_policy_now ();
  bool whole = age != 0 && thp == KAME_POOL_THP_ALWAYS;
  bool groups = age != 0 && thp == KAME_POOL_THP_SMALL;
  KP_FOR_EACH_REGION (r)
    for (unsigned w = 0; w < KP_CLAIM_WORDS; w++)
      for (;;)
        {
          if (atomic_load_explicit (&kp_dirty_count, memory_order_relaxed)
              <= keep)
            return pages;
          uint64_t v, d = kp_free_dirty (r, w, &v), all = d;
          if (age != 0)
            for (uint64_t m = d; m != 0; m &= m - 1)
              {
                unsigned u = w * 64 + (unsigned) __builtin_ctzll (m);
                if (now - atomic_load_explicit (&r->freed_at[u],
                                                memory_order_relaxed) < age)
                  d &= ~(m & -m);
              }
          uint64_t hm = groups ? atomic_load_explicit (&r->huge[w],
                                                        memory_order_relaxed)
                               : 0;
          if ((whole && d != 0) || (d & hm) != 0)
            {
              uint64_t gm = kp_huge_group_free (w, whole ? d : d & hm, all,
                                                v);
              if (gm == 0 && whole)
                break;
              if (gm == 0)
                goto single;
              if (!kp_claim_bits (r, w, gm))
                continue;
              uint64_t gone = atomic_fetch_and_explicit (&r->dirty[w], ~gm,
                                                         memory_order_relaxed)
                              & gm;
              pages += kp_units_discard_huge (r, w, gm, gone);
              ++*calls;
              atomic_fetch_and_explicit (&r->claim[w], ~gm,
                                         memory_order_release);
              continue;
            }
        single:
          if (d == 0)
            break;
          uint64_t bit = (d & ~hm) != 0 ? (d & ~hm) & -(d & ~hm) : d & -d;
          if (!kp_claim_bits (r, w, bit))
            continue;           /* taken meanwhile: look again */
          unsigned u = w * 64 + (unsigned) __builtin_ctzll (bit);
          if (atomic_fetch_and_explicit (&r->dirty[w], ~bit,
                                         memory_order_relaxed) & bit)
            {
              atomic_fetch_sub_explicit (&kp_dirty_count,
                                         (size_t) r->rpages[u]
                                         << kp_page_shift (),
                                         memory_order_relaxed);
              pages += r->rpages[u];
              ++*calls;
              kp_units_discard (r, u, 1);
            }
          atomic_fetch_and_explicit (&r->claim[w], ~bit,
                                     memory_order_release);
        }
  return pages;
}

/* All of them: a working set was torn down, the large cache's cap was
   lowered, or the program asked (kame_pool_trim).  */
void
kp_units_purge_dirty (void)
{
  size_t calls = 0;
  kp_units_purge_where (0, 0, 0, &calls);
}

/* The decay clock of the last tick (kp_tick_due).  */
static _Atomic (uint32_t) kp_dirty_tick;

size_t
kp_units_decay (uint32_t now, uint32_t delay, size_t *calls)
{
  if (!kp_tick_due (&kp_dirty_tick, now, delay / KP_DECAY_STEPS))
    return 0;
  /* With no delay, every free unit is old enough.  */
  size_t pages = kp_units_purge_where (now, delay, KP_DIRTY_KEEP, calls);
  /* The recent peak comes down towards what is claimed now, by a
     128th of the way a tick: by half in about 22 delays.  */
  size_t claimed = atomic_load_explicit (&kp_claimed_units,
                                         memory_order_relaxed);
  size_t peak = atomic_load_explicit (&kp_claimed_peak, memory_order_relaxed);
  if (peak > claimed)
    atomic_store_explicit (&kp_claimed_peak,
                           peak - (peak - claimed + 127) / 128,
                           memory_order_relaxed);
  size_t room = atomic_load_explicit (&kp_refault_room, memory_order_relaxed);
  if (room != 0)
    atomic_store_explicit (&kp_refault_room,
                           room - (room + KP_REFAULT_ROOM_DECAY - 1)
                                  / KP_REFAULT_ROOM_DECAY,
                           memory_order_relaxed);
  return pages;
}

/* A tick of kp_units_decay when one is due, for a release that keeps
   pages resident: the free units also decay in a process that has
   stopped refilling (kp_heap_decay) but still frees.  */
static void
kp_units_decay_tick (void)
{
  int delay = kp_setting (&kp_decay_ms);
  size_t calls = 0;
  if (delay >= 0)
    kp_units_decay (kp_clock_ms (), (uint32_t) delay, &calls);
}

/* The bytes of resident pages that a release of UNITS units may keep
   among the free units: the recent peak of the units claimed less
   those claimed without the release's, and at least KP_DIRTY_BUDGET
   and the room that recent refaults made (kp_refault_room, up to a
   quarter of the units claimed), plus the large cache's cap for the
   large tier (LARGE).  */
static size_t
kp_dirty_budget (unsigned units, bool large)
{
  size_t claimed = atomic_load_explicit (&kp_claimed_units,
                                         memory_order_relaxed);
  size_t peak = atomic_load_explicit (&kp_claimed_peak, memory_order_relaxed);
  size_t room = atomic_load_explicit (&kp_refault_room, memory_order_relaxed);
  size_t share = (claimed << KP_UNIT_SHIFT) / KP_REFAULT_ROOM_SHARE;
  claimed = claimed > units ? claimed - units : 0;
  size_t budget = peak > claimed ? (peak - claimed) << KP_UNIT_SHIFT : 0;
  size_t floor = KP_DIRTY_BUDGET + (room < share ? room : share)
                 + (large ? kp_cache_cap_now () : 0);
  return budget > floor ? budget : floor;
}

/* The pages of unit U of R that chunk C, of kind KIND, touched: a
   small chunk those it carved blocks into (up to its bump); a block of
   a dedicated or cached chunk may have touched them all.  (The pages
   that a small chunks' group's huge page brought in past the bump are
   in the unit's rpages: kp_group_start.)  */
static unsigned
kp_unit_touched_pages (const kp_region_t *r, const kp_chunk_t *c,
                       enum kp_chunk_kind kind, unsigned u)
{
  unsigned sh = kp_page_shift ();
  size_t per = KP_UNIT_SIZE >> sh;
  if (kind != KP_KIND_SMALL)
    return (unsigned) per;
  char *start = (char *) r + ((size_t) u << KP_UNIT_SHIFT);
  size_t carved = c->bump > start ? (size_t) (c->bump - start) : 0;
  size_t touched = (carved + ((size_t) 1 << sh) - 1) >> sh;
  return (unsigned) (touched < per ? touched : per);
}

/* Release chunk C's units.  The caller holds C exclusively (its owned
   bit, or the only block of a dedicated chunk).  PAGES says whether the
   data pages go back to the kernel first; kept, they count in the
   budget by the pages that may be resident (rpages).  */
void
kp_units_release (kp_chunk_t *c, enum kp_release_pages pages)
{
  kp_region_t *r = kp_region_of (c);
  unsigned base = kp_chunk_base_unit (c);
  unsigned units = atomic_load_explicit (&c->units, memory_order_relaxed);
  KP_ASSERT (base >= 1 && units >= 1 && base + units <= KP_UNITS);
  /* The run's bits in its claim word (a run never crosses one).  */
  unsigned w = base / 64;
  uint64_t bits = kp_run_mask (units) << (base % 64);
  enum kp_chunk_kind kind = atomic_load_explicit (&c->kind,
                                                  memory_order_relaxed);
  atomic_store_explicit (&c->kind, KP_KIND_NONE, memory_order_relaxed);
  for (unsigned i = 0; i < units; i++)
    atomic_store_explicit (&r->back[base + i], 0, memory_order_relaxed);
  /* The pages each unit keeps: those C touched, and those an earlier
     chunk left past them, which age with the unit (the decay).  */
  unsigned sh = kp_page_shift ();
  uint8_t kept[KP_MAX_UNITS];
  size_t bytes = 0;
  if (pages != KP_PAGES_DISCARD)
    {
      for (unsigned i = 0; i < units; i++)
        {
          unsigned t = kp_unit_touched_pages (r, c, kind, base + i);
          unsigned old = r->rpages[base + i];
          kept[i] = (uint8_t) (old <= t ? t : old);
          bytes += kept[i];
        }
      bytes <<= sh;
    }
  if (pages != KP_PAGES_KEEP && pages != KP_PAGES_DISCARD)
    {
      /* The large tier's budget is the large cache's cap: freed
         dedicated chunks past the thread's first-level cache come
         here, not to a second cache level, and the free runs they
         leave coalesce and serve any size (kp_units_claim).  */
      size_t budget = kp_dirty_budget (units,
                                       pages == KP_PAGES_LAZY_LARGE);
      if (atomic_load_explicit (&kp_dirty_count, memory_order_relaxed)
          + bytes > budget)
        {
          /* Over the budget: the free units that have waited longest
             for a claim go first (those free for a tick of the decay
             at least), not this release's, which the next claim is
             the likeliest to take.  */
          int delay = kp_setting (&kp_decay_ms);
          size_t calls = 0;
          if (budget > bytes && delay >= 0)
            kp_units_purge_where (kp_clock_ms (),
                                  (uint32_t) delay / KP_DECAY_STEPS + 1,
                                  budget - bytes, &calls);
          if (atomic_load_explicit (&kp_dirty_count, memory_order_relaxed)
              + bytes > budget)
            pages = KP_PAGES_DISCARD;
        }
    }
  if (pages == KP_PAGES_DISCARD)
    {
      kp_units_discard (r, base, units);
      /* Dated, so that a claim soon after counts as a refault.  */
      uint32_t now = kp_clock_ms ();
      for (unsigned i = 0; i < units; i++)
        atomic_store_explicit (&r->freed_at[base + i], now,
                               memory_order_relaxed);
    }
  else
    {
      kp_units_decay_tick ();
      memcpy (&r->rpages[base], kept, units);
      uint8_t cls = kind == KP_KIND_SMALL
                    ? atomic_load_explicit (&c->cls, memory_order_relaxed)
                    : pages == KP_PAGES_LAZY_SMALL ? KP_CLS_ANY
                    : KP_CLS_DEDICATED;
      for (unsigned i = 0; i < units; i++)
        atomic_store_explicit (&r->rcls[base + i], cls,
                               memory_order_relaxed);
      uint32_t now = kp_clock_ms ();
      for (unsigned i = 0; i < units; i++)
        atomic_store_explicit (&r->freed_at[base + i], now,
                               memory_order_relaxed);
      atomic_fetch_add_explicit (&kp_dirty_count, bytes, memory_order_relaxed);
      atomic_fetch_or_explicit (&r->dirty[w], bits, memory_order_relaxed);
    }
  atomic_fetch_sub_explicit (&kp_claimed_units, units, memory_order_relaxed);
  /* Last: from here on the units may be claimed again.  */
  atomic_fetch_and_explicit (&r->claim[w], ~bits, memory_order_release);
  /* Pairs with the fence of a claimer that clears the hint (see
     kp_node_try_claim): either it sees these units free, or this store
     comes after its clearing one.  */
  atomic_thread_fence (memory_order_seq_cst);
  atomic_store_explicit (&r->has_free, 1, memory_order_relaxed);
}
