/* kp_internal.h -- libkamepool's shared definitions: geometry, the
   region, chunk and heap structures, the thread cache, and the inline
   fast paths of malloc and free.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   The allocator in one paragraph (doc/kamepool-design.md has the long
   form).  Memory comes in 32 MiB regions, aligned to 32 MiB and never
   unmapped, each cut into 128 units of 256 KiB.  Unit 0 of a region
   holds its metadata (kp_region_t): a claim bitmap with one bit per
   unit, a back-offset byte per unit and one chunk descriptor per unit.
   A chunk is a run of 1..16 units claimed with one CAS.  A small chunk
   serves one size class (up to 204.8 KiB); a dedicated chunk serves
   one block above that.  Each thread owns a heap with one active
   chunk per class up to 32 KiB; the owner allocates and frees with
   plain loads and stores, other threads gather their frees in a
   per-thread batch and push each batch with one CAS onto the chunk's
   remote list, whose low bit is the chunk's "owned" bit.  The chunks
   of the 19 mid classes above 32 KiB belong to no thread (shared.c):
   one set per class under a lock, from which every thread allocates
   and into which every thread frees, and a short list per class in
   each heap of blocks the thread freed, which its next mallocs of the
   class take back without the lock.  Blocks above 4 MiB are mappings
   of their own.  A flat radix map from region number to kind tells pool
   memory, large mappings and foreign (libc) pointers apart.  Free
   lists are safe-linked and freed blocks tagged, so that double,
   interior and wild frees and writes into freed blocks are reported
   (misuse.c; --disable-hardening takes the fast-path checks out).

   Memory-order contract.  Every field read or written by more than one
   thread is _Atomic and says, at its declaration, who writes it, who
   reads it and with which order.  The summary:

     region.claim[w]        CAS acquire to claim; fetch_and release to
                            free (after the metadata reset).
     region.back[]          written relaxed by the claim winner after
                            its CAS (and by a trim of a dedicated chunk
                            it holds alone).
     desc kind/cls/units/   written relaxed by whoever holds the chunk
     block_size             alone: the claim winner after its CAS, the
                            cache and the large tier while a dedicated
                            chunk is theirs, the release before its
                            fetch_and (see the fields).  Readers get
                            happens-before from the hand-over of the
                            pointer they free, or from the owned bit's
                            acquire.
     desc.xthread_free      remote push (a block or a batch) CAS acq_rel; owner collect
                            exchange acquire; unown CAS release.
     desc.owner             relaxed: a thread only ever compares it with
                            its own heap, which it wrote itself, or
                            with kp_heap_shared, which a shared
                            chunk's setup wrote before any of its
                            blocks was handed out.
     region list, radix     release on publish, acquire on walk.
     counters, hints        relaxed, approximate by design.
     heap.rbatch, rbatch_*  the heap's thread only: plain (with signal
                            fences for a fork from a signal handler).
     kp_sample_state        release stores by kp_process_init only;
                            acquire by kp_malloc_sample, relaxed by
                            the others.
     heap profile records   under prof.c's kp_sample_lock_t, whose
                            word, the holder's id, is taken by an
                            acquire CAS and given back by a release
                            exchange; kp_tc.prof_* the thread's own.
     shared classes         under the class's lock, a kp_sample_lock_t
     (shared.c): partial,   (acquire CAS, release exchange; the decay's
     full, and the owner-   trylock is the same CAS without the wait):
     private fields of      the holder is the chunks' owner.
     their chunks
     shared class deferred  relaxed: set after a push onto a chunk's
                            remote list (acq_rel CAS), cleared before
                            the collect (exchange acquire) that takes
                            the blocks; undecayed relaxed, a hint.
     heap.shared[] (lists   the heap's thread only: plain (a signal
     of the shared classes) fence orders a block's link and tag
     and shared_lim_bytes   before the list's head); kame_pool_get_stats
                            reads their lim, room and takes with
                            relaxed atomic loads.
     owner-private fields   plain; kame_pool_get_stats reads used, bump
                            and purged with relaxed atomic loads, a
                            deliberate racy snapshot (stats.c).  */

#ifndef KP_INTERNAL_H
#define KP_INTERNAL_H 1

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "kame_pool.h"

/* make bench builds a second copy of the library with the TLS model
   the build did not choose (bench/local.mk), to show the hot-path cost
   of both side by side.  */
#ifdef KP_TLS_MODEL_OVERRIDE
# undef KP_TLS_ATTR
# define KP_TLS_ATTR __attribute__ ((tls_model (KP_TLS_MODEL_OVERRIDE)))
# undef KP_TLS_MODEL_NAME
# define KP_TLS_MODEL_NAME KP_TLS_MODEL_OVERRIDE
#endif

#define KP_HIDDEN __attribute__ ((__visibility__ ("hidden")))
#define KP_NOINLINE __attribute__ ((__noinline__))
#define KP_INLINE static inline __attribute__ ((__always_inline__))
/* The entry points that a malloc/free loop runs (malloc, free,
   kame_pool_malloc, kame_pool_free: the C++ operators call the last
   two) start a cache line.  Aligned only to 16 bytes, where they fall
   depends on the size of the code before them, and so does the speed
   of a malloc/free loop, with the same instructions (bench/README,
   "Issue 36, seventh sitting").  */
#define KP_HOT_ENTRY __attribute__ ((__aligned__ (64)))
#define kp_likely(x) __builtin_expect (!!(x), 1)
#define kp_unlikely(x) __builtin_expect (!!(x), 0)

/* ---- Geometry --------------------------------------------------------- */

#define KP_REGION_SHIFT 25                      /* 32 MiB regions */
#define KP_REGION_SIZE ((size_t) 1 << KP_REGION_SHIFT)
#define KP_REGION_MASK (KP_REGION_SIZE - 1)
#define KP_UNIT_SHIFT 18                        /* 256 KiB units */
#define KP_UNIT_SIZE ((size_t) 1 << KP_UNIT_SHIFT)
#define KP_UNITS 128                            /* units per region */
#define KP_CLAIM_WORDS (KP_UNITS / 64)
/* Units per transparent huge page (2 MiB on x86-64): with huge page
   advice on, the decay gives free units back only as whole ones
   (region.c).  */
#define KP_HUGE_UNITS 8
/* With KAME_POOL_THP_SMALL, a thread's new chunk of a class goes to a
   small chunks' group once the thread has this many full chunks of the
   class (heap.c): 4 MiB of blocks of that class in use at least, a
   class it fills densely.  With 2, a program whose threads come and go
   zeroed a 2 MiB page for each group that a short-lived thread's
   chunks started (bench/README, issue 36, ninth sitting); with 8, a
   server whose classes hold a few MiB each kept the free part of a
   group or two at its peak (thirteenth sitting).  */
#define KP_HUGE_DENSE 16
#define KP_MAX_UNITS 16                         /* dedicated chunks <= 4 MiB */
#define KP_DEDICATED_MAX (KP_MAX_UNITS * KP_UNIT_SIZE)
#define KP_SMALL_MAX 208896                     /* largest size class */
#define KP_LUT_MAX 32768                        /* largest in kp_class_lut */
#define KP_NCLASS 89
/* The classes above KP_OWNED_MAX, whose chunks the threads share
   (shared.c): the last KP_NSHARED classes, the mid classes, from
   34816 bytes up.  */
#define KP_OWNED_MAX 32768
#define KP_NSHARED 19
#define KP_SHARED_FIRST (KP_NCLASS - KP_NSHARED)
/* What a thread may keep of freed blocks of those classes without
   taking their class's lock: at most KP_SHARED_SLOT_MAX blocks of a
   class, and kp_shared_slot_cap bytes in all: KP_SHARED_LISTS_BYTES
   for all the threads with a heap, split evenly, but at least
   KP_SHARED_SLOT_MIN and at most KP_SHARED_SLOT_CAP each.  */
#define KP_SHARED_LISTS_BYTES ((size_t) 8 << 20)
#define KP_SHARED_SLOT_MIN ((size_t) 512 << 10)
#define KP_SHARED_SLOT_CAP ((size_t) 4 << 20)
#define KP_SHARED_SLOT_MAX 16
#define KP_CLS_DEDICATED 255    /* kp_units_claim's class of a dedicated chunk */
#define KP_CLS_ANY 254          /* any small class's (region.c) */
#define KP_LUT_SIZE ((KP_LUT_MAX >> 4) + 1)
#define KP_MID_LUT_SIZE ((KP_SMALL_MAX >> 10) - (KP_LUT_MAX >> 10))
#define KP_PAGE 4096                            /* metadata page granularity */
#define KP_MIN_ALIGN 16
/* Pages per small chunk the decay can give back: 4 units of 4 KiB
   pages (chunk.c; a larger page size needs fewer bits).  */
#define KP_PURGE_WORDS 4

/* N rounded up to TO, a power of two.  */
static inline size_t
kp_round_up (size_t n, size_t to)
{
  return (n + to - 1) & ~(to - 1);
}

/* ---- Tunables ---------------------------------------------------------

   The compile-time choices of the policies, in one place; the settings
   that a program or the environment changes are in options.c.  */

/* The resident pages of free units that a release keeps (region.c),
   and how many of them stay once they have been free for a decay
   period, in bytes of pages.  */
#define KP_DIRTY_BUDGET ((size_t) 2 << 20)
#define KP_DIRTY_KEEP ((size_t) 1 << 20)
/* The ticks of the free units' decay in one delay: a unit goes back
   between DELAY and DELAY * (1 + 1 / KP_DECAY_STEPS) ms after its
   release (region.c, purge.c).  */
#define KP_DECAY_STEPS 4
/* How many chunks of classes it does not allocate from a heap may take
   over through frees (chunk.c).  Keeping such a chunk makes this
   thread's later frees into it plain owner frees (a consumer freeing
   what a producer filled); the bound caps what an idle thread can hold
   on to.  */
#define KP_FOSTER_MAX 8
/* Regions an adoption scans before it gives up (chunk.c): adoption is
   an optimisation, not a duty.  */
#define KP_ADOPT_REGIONS 32
/* Full chunks a thread's frees move to its partial lists with no
   refill in between, past which it sheds every chunk of the class with
   free blocks, its active chunk included (chunk.c, kp_chunk_shed): a
   thread that frees that much and allocates nothing is tearing a
   working set down.  */
#define KP_SHED_STREAK 16
/* The large recycle cache (cache.c): blocks in a thread's first level,
   mappings in the shared second level, and the default cap.  */
#define KP_L1_SLOTS 4
#define KP_L2_SLOTS 64
#define KP_CACHE_CAP_DEFAULT ((size_t) 128 << 20)
/* Allocations between two look-ups of a thread's NUMA node (numa.c):
   it may have migrated.  */
#define KP_NUMA_RECHECK 64
/* How long a thread waits for another thread's initialisation before
   it makes do with the C library (init.c).  The initialisation is a
   few system calls; the bound only matters if the initialising thread
   is stuck behind a lock that the waiting thread holds (a fork whose
   prepare handler allocates while another thread's pthread_atfork
   waits for the fork).  */
#define KP_INIT_WAIT_MS 2000

/* ---- Owner-only counters -----------------------------------------------

   A statistic of a heap record that only the heap's thread adds to, and
   that kame_pool_get_stats and the cache's streak read from any thread:
   the owner's relaxed load and store, no read-modify-write (nobody else
   writes it), and the readers' relaxed loads see some recent value.  */
#define kp_owner_add(ctr, n)                                            \
  atomic_store_explicit ((ctr), atomic_load_explicit ((ctr),            \
                                                      memory_order_relaxed) \
                         + (n), memory_order_relaxed)

/* ---- Assertions and reports (os.c; they never call malloc) ------------ */

KP_HIDDEN _Noreturn void kp_fatal (const char *file, int line,
                                   const char *what);
#define KP_CHECK(cond)                                                  \
  do { if (kp_unlikely (!(cond))) kp_fatal (__FILE__, __LINE__, #cond); } \
  while (0)
#if KP_DEBUG >= 1
# define KP_ASSERT(cond) KP_CHECK (cond)
#else
# define KP_ASSERT(cond) ((void) 0)
#endif
#if KP_DEBUG >= 2
# define KP_EXPENSIVE_ASSERT(cond) KP_CHECK (cond)
#else
# define KP_EXPENSIVE_ASSERT(cond) ((void) 0)
#endif
/* Write "kamepool: CALL(): WHAT 0x..." on stderr without allocating.  */
KP_HIDDEN void kp_report (const char *call, const char *what, const void *p);

/* ---- Heap misuse (misuse.c) -------------------------------------------- */

#ifndef KP_HARDEN
# define KP_HARDEN 1
#endif
/* The secrets of the encoded free-list links and of the free-block tag:
   random and independent (a tag read through a dangling pointer tells
   nothing of the links' key), stored once by kp_process_init before it
   publishes the end of initialisation (release); every thread that
   allocates or frees a pool block has acquired that since, so plain
   loads see them.  They have a cache line of their own: every malloc
   and free reads them, and a variable written next to them (the large
   cache's shared level was) took the line from the other cores at each
   write.  */
typedef struct kp_keys
{
  _Alignas (64) uintptr_t secret;
  uintptr_t free_key;
} kp_keys_t;
KP_HIDDEN extern kp_keys_t kp_keys;
#define kp_secret (kp_keys.secret)
#define kp_free_key (kp_keys.free_key)
KP_HIDDEN void kp_misuse_init (void);
/* Misuse by the caller of CALL ("free", "malloc", ...): writes
   "kamepool: CALL(): WHAT 0x..." on stderr without allocating, then
   aborts, unless KAME_POOL_ON_MISUSE=report: then the caller leaves the
   heap as it was and returns.  */
KP_HIDDEN void kp_misuse (const char *call, const char *what, const void *p);
/* free, realloc and malloc_usable_size of a pointer that is not the
   pool's: true when the C library could have allocated it (then it is
   handed to the C library); false after reporting misuse.  */
KP_HIDDEN bool kp_foreign_ok (const char *call, const void *p);

/* ---- Blocks, chunks, regions ------------------------------------------ */

/* A free block: its first word links it to the next free block, its
   second marks it free (hardening; every block has 16 bytes at least).
   Both are encoded with the block's address and a per-process secret
   (see kp_block_next below), so neither reads as a plain pointer.  */
typedef struct kp_block
{
  uintptr_t link;
  uintptr_t tag;
} kp_block_t;
typedef struct kp_heap kp_heap_t;

/* The encoding of a free block's words (hardening): the link is stored
   XORed with the block's address shifted right by 12 and a secret (as
   glibc's safe-linking does, plus the secret), so that a stray write
   into a freed block leaves a link that points outside the block's
   region; the tag is a second secret, which a live block holds only if
   its owner writes exactly that (as glibc's tcache key).  */
KP_INLINE uintptr_t
kp_link_key (const kp_block_t *b)
{
#if KP_HARDEN
  return ((uintptr_t) b >> 12) ^ kp_secret;
#else
  (void) b;
  return 0;
#endif
}

KP_INLINE kp_block_t *
kp_block_next (const kp_block_t *b)
{
  return (kp_block_t *) (b->link ^ kp_link_key (b));
}

KP_INLINE void
kp_block_link (kp_block_t *b, const kp_block_t *next)
{
  b->link = (uintptr_t) next ^ kp_link_key (b);
}

/* The tag of a block its chunk's owner freed (kp_free_key, whose low
   bit is 0), or that another thread freed (kp_free_key | 1): the
   collection of remote frees tells a block that the owner freed again
   meanwhile from its own by the low bit.  */
KP_INLINE void
kp_block_mark_free (kp_block_t *b)
{
#if KP_HARDEN
  b->tag = kp_free_key;
#else
  (void) b;
#endif
}

KP_INLINE void
kp_block_mark_remote (kp_block_t *b)
{
#if KP_HARDEN
  b->tag = kp_free_key | 1;
#else
  (void) b;
#endif
}

/* B is handed out from now on.  */
KP_INLINE void
kp_block_mark_live (kp_block_t *b)
{
#if KP_HARDEN
  b->tag = 0;
#else
  (void) b;
#endif
}

/* B carries either tag: freed by the owner or by another thread.  */
KP_INLINE bool
kp_block_marked_free (const kp_block_t *b)
{
#if KP_HARDEN
  return (b->tag ^ kp_free_key) <= 1;
#else
  (void) b;
  return false;
#endif
}

KP_INLINE bool
kp_block_marked_remote (const kp_block_t *b)
{
#if KP_HARDEN
  return b->tag == (kp_free_key | 1);
#else
  (void) b;
  return true;
#endif
}

/* NEXT, the decoded link of B, is not in B's region: the end of the list
   (NULL), or a link overwritten while B was free.  */
KP_INLINE bool
kp_link_suspect (const kp_block_t *b, const kp_block_t *next)
{
  return (((uintptr_t) b ^ (uintptr_t) next) >> KP_REGION_SHIFT) != 0;
}

enum kp_chunk_kind
{
  KP_KIND_NONE = 0,             /* unclaimed, or a continuation unit */
  KP_KIND_SMALL = 1,            /* blocks of one size class */
  KP_KIND_DEDICATED = 2,        /* one block of 1..16 whole units */
  KP_KIND_CACHED = 3            /* a freed dedicated chunk in the cache */
};

/* Low bit of xthread_free: whoever sets it owns the chunk.  */
#define KP_TF_OWNED ((uintptr_t) 1)

/* A chunk descriptor.  It lives in unit 0 of its region, at the index
   of the chunk's first unit, so the chunk's data is exactly its units
   and slot 0 is 256 KiB-aligned.

   States (owner, xthread_free):
     DEAD       (NULL, NULL|OWNED)   unclaimed or released: the OWNED bit
                                     makes it impossible to claim through
                                     a stale list (see kp_free_remote).
     OWNED      (H,    list|OWNED)   H's thread allocates from it.
     ABANDONED  (NULL, list|0)       the first thread to CAS the bit to 1
                                     (a remote freer or an adopter) owns it.
   Model: testsuite/kamepool.model/ownership.pml.  */
typedef struct kp_chunk
{
  /* Bytes 0 to 127 (cache lines 0 and 1): owner-private fields, plain
     loads and stores, used only by the thread that holds the OWNED bit
     (and read racily by the statistics walk), except OWNER.  Line 0
     holds what the owner's malloc and free write: FREE and USED, and
     with them what they and the list moves read.  Line 1 holds OWNER
     and fields written only at the claim and by the decay: another
     thread's free reads OWNER, and a read of line 0 would take the
     line away from an owner that is allocating from the chunk (every
     producer/consumer free would pay a transfer of the line there and
     another back at the owner's next malloc).  The owner's free reads
     both lines.  */
  /* 256 bytes a descriptor (the struct's alignment): the free path
     finds a descriptor with a shift, where 192 needed a multiply.  */
  _Alignas (256) kp_block_t *free; /* owner LIFO free list (encoded links) */
  /* The blocks handed out and not yet back on FREE, in the low bits
     (kp_chunk_used), plus KP_USED_ACTIVE while the chunk is the
     owner's active chunk of its class: the owner's free then tells an
     empty chunk that is not the active one by USED alone
     (kp_free_push).  */
  uint32_t used;
  uint16_t npurged;             /* bits set in purged (the decay) */
  bool full;                    /* on the owner heap's full list */
  /* SMALL: 1 + UINT64_MAX / block size, so that an offset OFF into the
     chunk starts a block exactly when OFF * divmagic < divmagic
     (Lemire's divisibility test: no division on the free path); 0
     while the decay holds pages of the chunk given back, which sends
     every owner's free to kp_free_owned_check.  */
  uint64_t divmagic;
  char *bump;                   /* next never-used byte (lazy carving) */
  /* SMALL: blocks handed out since the chunk was set up, ever; added
     to kp_small_pops at its release (the totals of the statistics).  */
  uint64_t pops;
  struct kp_chunk *next, *prev; /* the owner heap's partial or full list */
  uint32_t idle_since;          /* decay clock when it joined that list */
  bool fostered;                /* taken over by a free, class not in use */
  bool decayed;                 /* purged since it joined a partial list */
  /* Handed over by its owner's kp_chunk_shed, not kept since: written
     by the owner, and by whoever keeps or adopts it, while it holds
     OWNED (the hand-over's release CAS publishes it to the next).  */
  bool shed;

  /* Line 1 (byte 64).  */
  /* Written relaxed by the thread that takes ownership (itself or NULL);
     read relaxed by any freer, who only compares it with its own heap.  */
  _Alignas (64) _Atomic (kp_heap_t *) owner;
  kp_heap_t *orig_heap;         /* heap that claimed or shed it last; a hint */
  uint32_t capacity;            /* blocks in the chunk */
  char *limit;                  /* end of the chunk's data (the carving) */
  /* The decay (chunk.c, kp_chunk_purge): pages below BUMP given back to
     the kernel, one bit per page; every block that starts in such a
     page is free and off the free list until kp_chunk_carve links it
     again.  Owner-private; the statistics walk reads it racily.  */
  uint64_t purged[KP_PURGE_WORDS];

  /* Line 2 (byte 128): the remote-free word, and the fields fixed while
     claimed, away from the owner's lines.  */
  /* Remote frees push here (CAS acq_rel); the owner collects with an
     acquire exchange; giving up ownership is a release CAS.  */
  _Alignas (64) _Atomic (uintptr_t) xthread_free;
  /* Written relaxed by whoever holds the chunk exclusively: the claim
     winner after its CAS (kp_chunk_setup in chunk.c, for a small chunk
     and for a dedicated one), the cache when it takes in or hands out a
     dedicated chunk (KIND CACHED and back, cache.c), the growth and
     trim of a dedicated chunk (UNITS, region.c and large.c), and the
     release before the claim bits are cleared (KIND NONE, region.c).
     Read relaxed by freers and the statistics, who are ordered after
     the write by the hand-over of the block they free (or, for the
     statistics, tolerate a stale value).  KIND CACHED and back is also
     written by the inline put in kp_free_pool
     (kp_cache_free_dedicated_fast) and by kp_malloc_dedicated
     (largealloc.c).  */
  _Atomic (uint32_t) block_size; /* SMALL: class size; DEDICATED: bytes */
  _Atomic (uint8_t) kind;       /* enum kp_chunk_kind */
  _Atomic (uint8_t) cls;        /* SMALL: size class */
  _Atomic (uint8_t) units;      /* chunk length in units */
  /* A chunk of a shared class: the divmagic of its class, or 0 while
     the decay holds pages of it given back, which sends every free of
     its blocks to the class's lock, where kp_shared_put looks at the
     block's page (0 in any other chunk).  Written relaxed by
     kp_chunk_setup and by the class's lock holder (shared.c), read
     relaxed by kp_shared_free without the lock.  */
  _Atomic (uint64_t) shared_magic;
  /* Line 3 (byte 192).  SMALL: set up in a small chunks' group
     (kp_units_in_group), so that its pages past BUMP may be resident
     as far as its units' rpages say (the group's huge page brought
     them in); cleared when the owner gives them back
     (kp_chunk_tail_give).  Owner-private.  */
  _Alignas (64) bool group_tail;
} kp_chunk_t;
_Static_assert (sizeof (kp_chunk_t) == 256, "kp_free_pool scales by 256");
_Static_assert (offsetof (kp_chunk_t, shed) < 64
                && offsetof (kp_chunk_t, owner) == 64
                && offsetof (kp_chunk_t, purged)
                   + KP_PURGE_WORDS * sizeof (uint64_t) <= 128,
                "malloc and free write line 0; another thread's free "
                "reads line 1");
_Static_assert (offsetof (kp_chunk_t, xthread_free) == 128,
                "the remote-free word starts line 2");

/* The bit of kp_chunk_t.used that marks the active chunk: above any
   count of blocks.  */
#define KP_USED_ACTIVE ((uint32_t) 1 << 31)
_Static_assert (((size_t) KP_UNITS << KP_UNIT_SHIFT) / 16 < KP_USED_ACTIVE,
                "a chunk's count of blocks stays below the bit");

/* The blocks of C handed out and not yet back on its free list.  */
KP_INLINE uint32_t
kp_chunk_used (const kp_chunk_t *c)
{
  return c->used & ~KP_USED_ACTIVE;
}

KP_INLINE void
kp_chunk_set_active (kp_chunk_t *c, bool on)
{
  c->used = on ? c->used | KP_USED_ACTIVE : c->used & ~KP_USED_ACTIVE;
}

typedef struct kp_region
{
  /* One bit per unit; bit 0 of word 0 is unit 0, the metadata, always
     set.  Claimers CAS (acquire); releasers fetch_and (release) after
     resetting the descriptors.  Model: kamepool.model/claim.pml.  */
  _Atomic (uint64_t) claim[KP_CLAIM_WORDS];
  /* Hint: base unit u holds an ABANDONED small chunk with free slots.
     Set by fetch_or (release) when abandoning, cleared by the adopter's
     CAS (acquire); correctness comes from the owned bit alone.  */
  _Atomic (uint64_t) abandoned[KP_CLAIM_WORDS];
  /* Free units whose pages were kept resident (see kp_units_release):
     set by fetch_or before the release of the claim bits, cleared by
     the claim winner's fetch_and.  Relaxed; the count is a budget.  */
  _Atomic (uint64_t) dirty[KP_CLAIM_WORDS];
  /* Free units whose pages a discard gave back since their last use:
     set by the discarder (relaxed fetch_or, while it holds the claim
     bits), cleared by the claim winner (relaxed fetch_and), which
     counts the units it takes so (kp_units_refaulted).  Statistics
     only.  */
  _Atomic (uint64_t) discarded[KP_CLAIM_WORDS];
  /* Distance from unit u back to its chunk's first unit.  Written
     relaxed ONLY after the claim CAS is won (writing them before the
     CAS was the historical double-allocation race).  */
  _Atomic (uint8_t) back[KP_UNITS];
  /* Push-only list of all regions (release push, acquire walk).  */
  struct kp_region *_Atomic next;
  /* Push-only list of the regions of node numa_node, same orders; the
     claim walks it (region.c).  */
  struct kp_region *_Atomic node_next;
  /* Hint: a claim may succeed here.  Set (relaxed store of 1) by the
     region's creator and by every release of units, after a seq_cst
     fence; cleared (relaxed store of 0) by a claimer that found the
     region full, which then fences (seq_cst) and looks again, setting
     it back if units came free: so a release racing with the clearing
     cannot leave free units behind a 0.  Read relaxed by claimers.  */
  _Atomic (uint8_t) has_free;
  /* The node whose list holds the region: written once by its creator
     before the release push on the lists, read by
     kame_pool_get_numa_stats after the acquire walk.  Plain.  */
  uint8_t numa_node;
  kp_chunk_t desc[KP_UNITS];     /* 256-byte aligned, as the type */
  /* How many pages of unit u, from its start, may be resident: set by
     the releaser of a run kept resident (the pages its chunk carved
     blocks into, or every page of a dedicated chunk's, and those an
     earlier chunk left past them),
     and to 0 by whoever gives the unit's pages back (a release or a
     purge), in both cases while holding the unit's claim bit, before
     its release fetch_and; the claimer of a free resident unit reads
     it after its acquire CAS, and keeps it while the unit is in use,
     since the pages stay.  Plain: the claim bits order every access.
     After desc, so that the free path's offsets into the record
     stay.  */
  uint8_t rpages[KP_UNITS];
  /* The class of the small chunk that last released unit u keeping its
     pages, KP_CLS_DEDICATED for a dedicated chunk, KP_CLS_ANY for a
     cached block lent to small chunks: written by that releaser
     (relaxed, before its release fetch_and), read relaxed by the claim
     of a small chunk among the dirty units, which takes a unit its own
     class left first and never one a dedicated chunk left, leaving
     those runs whole to dedicated chunks (kp_units_claim_resident).
     A hint: a stale value only moves a chunk to other units.  */
  _Atomic (uint8_t) rcls[KP_UNITS];
  /* The decay clock (kp_clock_ms) when unit u was last released
     keeping its pages: written by that releaser (relaxed, before its
     release fetch_and), read relaxed by the decay, which gives the
     unit's pages back once it has been free that long
     (kp_units_decay); the decay claims the unit before it discards,
     so a stale value only delays or hastens one purge.  */
  _Atomic (uint32_t) freed_at[KP_UNITS];
  /* With KAME_POOL_THP_SMALL, the units of the small chunks' groups
     (region.c, kp_node_claim_huge): eight bits at a time, one group
     of KP_HUGE_UNITS units advised MADV_HUGEPAGE.  Set by the group's
     starter (relaxed fetch_or, while it holds the group's claim bits),
     cleared by whoever splits it (relaxed fetch_and, kp_group_split);
     read relaxed by the claims, the purge and the chunk setup: a hint,
     whose stale value only places a chunk or a purge elsewhere.  At
     the end, so that the offsets of the fields before stay.  */
  _Atomic (uint64_t) huge[KP_CLAIM_WORDS];
} kp_region_t;

/* The batch of remote frees (chunk.c): a thread's frees into chunks
   it does not own wait in a slot of its heap, one chunk per slot, and
   go to the chunk's remote list together, with one CAS, unless the
   thread's own malloc takes them back first (kp_rbatch_take).  A slot
   holds at most KP_RBATCH_BLOCKS blocks and KP_RBATCH_BYTES bytes of
   blocks (a class whose blocks are larger than half of that is not
   batched).  A thread that allocates blocks of the class itself (it
   has an active chunk of the class) takes them back, and its slots of
   the class hold up to KP_RBATCH_REUSE_BYTES bytes (row 1 of
   kp_class_rbatch_limit): a bound at or below the number of blocks it
   frees between two mallocs of the class would send them back to
   their owner every time.  So a thread holds at most KP_RBATCH_SLOTS
   * KP_RBATCH_REUSE_BYTES bytes of blocks it freed and their owners
   cannot reuse yet, and at most KP_RBATCH_SLOTS * KP_RBATCH_BYTES in
   the classes it does not allocate.  */
#define KP_RBATCH_SLOTS 32
#define KP_RBATCH_BLOCKS 128
#define KP_RBATCH_BYTES ((size_t) 16 * 1024)
#define KP_RBATCH_REUSE_BYTES ((size_t) 64 * 1024)
/* The bound of a slot for blocks of S bytes, in blocks: 0 when their
   class is not batched; and the bound for a thread that allocates
   blocks of the class too, 0 for the same classes.  Rows 0 and 1 of
   kp_class_rbatch_limit; both fit its 8 bits.  */
#define KP_RBATCH_MIN(a, b) ((a) < (b) ? (a) : (b))
#define KP_RBATCH_LIMIT(s)                                              \
  (KP_RBATCH_MIN (KP_RBATCH_BYTES / (s), KP_RBATCH_BLOCKS) >= 2         \
   ? KP_RBATCH_MIN (KP_RBATCH_BYTES / (s), KP_RBATCH_BLOCKS) : 0)
#define KP_RBATCH_REUSE(s)                                              \
  (KP_RBATCH_LIMIT (s) != 0                                             \
   ? KP_RBATCH_MIN (KP_RBATCH_REUSE_BYTES / (s), KP_RBATCH_BLOCKS) : 0)
_Static_assert (KP_RBATCH_BLOCKS <= 255, "the bounds are kept in 8 bits");
_Static_assert (KP_RBATCH_REUSE_BYTES >= KP_RBATCH_BYTES,
                "the bound of a class the thread reuses is the larger");

/* One slot.  Only the heap's thread writes its fields; the statistics
   read COUNT and CLS (kp_remote_pending), relaxed; the others are
   plain.
   The blocks are linked (encoded links, tagged free) from HEAD to
   TAIL, whose link is NULL until the flush.  */
typedef struct kp_rbatch
{
  /* 64 bytes a slot (the alignment): the slot of a chunk is found with
     a shift, and lies in one cache line.  */
  _Alignas (64) kp_chunk_t *chunk; /* NULL: the slot is empty */
  kp_block_t *head, *tail;
  char *data;                   /* the chunk's first block */
  uint64_t divmagic;            /* of the chunk's block size */
  _Atomic (uint32_t) count;     /* blocks held */
  uint32_t limit;               /* the flush comes at this count */
  _Atomic (uint8_t) cls;
} kp_rbatch_t;

/* A doubly linked list of one heap's chunks, oldest first (the inline
   kp_clist_* below).  */
typedef struct kp_clist { kp_chunk_t *head, *tail; } kp_clist_t;

/* A thread's part of the large recycle cache (cache.c), in its heap
   record.  */
typedef struct kp_heap_cache
{
  /* The first level: entries, oldest first, 0 when empty.  Written by
     the owner alone, with relaxed stores; kame_pool_get_stats sums
     them with relaxed loads.  */
  _Atomic (uintptr_t) l1[KP_L1_SLOTS];
  /* Owner-only: the bytes the first level may still take with no look
     at the cap, and the cap's generation when that was worked out; the
     slots from l1_top up are empty.  */
  size_t l1_room, l1_top;
  unsigned l1_gen;
  /* Bytes of large blocks this thread has allocated other than from
     its own first level, ever (an owner-only counter, kp_owner_add:
     relaxed loads by others); and, owner-only, the bytes of large
     blocks it freed since its last large allocation or since it last
     saw the others allocate, with the sum of every heap's
     large_allocated when it last looked (the free streak).  */
  _Atomic (size_t) large_allocated;
  size_t free_streak, streak_seen;
  /* Owner-only: the first level as the last decay pass saw it, and
     the time of that pass (kp_cache_decay); the pass also sets
     KP_STREAK_MARK in free_streak.  */
  uintptr_t l1_seen[KP_L1_SLOTS];
  uint32_t l1_seen_at;
  /* Owner-only: the units this thread claimed for small chunks with
     their pages not resident, ever (kp_units_claim_retry); and each
     entry of the first level as the loans last noted it, with that
     count then (kp_cache_lend; KP_LEND_MARK in free_streak).  */
  size_t fresh_units;
  uintptr_t lend_seen[KP_L1_SLOTS];
  size_t lend_fresh[KP_L1_SLOTS];
  /* The blocks of the first level lent to small chunks, ever, and
     their bytes (kp_cache_lend): owner-only counters (kp_owner_add),
     read relaxed by kame_pool_get_stats.  */
  _Atomic (size_t) lent_blocks, lent_bytes;
} kp_heap_cache_t;

/* The top bit of a heap's free_streak: set by the owner's decay pass,
   cleared by every large allocation, which zeroes the streak (the
   short paths' takes from the first level themselves, the long way,
   kp_malloc_large, through kp_cache_note_alloc before it looks in the
   cache), and by a put the long way.  So
   the takes need no work of their own to tell the decay that the
   first level was used (kp_cache_decay); every reader of the streak's
   bytes masks it (kp_streak_bytes).  */
#define KP_STREAK_MARK ((size_t) 1 << (sizeof (size_t) * 8 - 1))
/* The next bit: set by kp_cache_lend when it notes the first level,
   cleared as KP_STREAK_MARK is (a large allocation ends every loan's
   wait).  */
#define KP_LEND_MARK ((size_t) 1 << (sizeof (size_t) * 8 - 2))

/* A thread's counts of the large tier (large.c), each a number of
   blocks and their bytes: KP_LARGE_LIVE, its mappings, made minus freed;
   KP_LARGE_OUT, the large blocks it handed out ever (dedicated chunks
   and mappings: whole units, whole mappings, and the growth of a block
   where it lies), the totals of the statistics.  Owner-only counters
   (kp_owner_add), read relaxed by kame_pool_get_stats.  */
enum { KP_LARGE_LIVE, KP_LARGE_OUT };
typedef struct kp_heap_large
{
  struct
  {
    _Atomic (size_t) n, bytes;
  } pair[2];
} kp_heap_large_t;

/* A thread's list of freed blocks of one shared class, which its
   next mallocs of the class take back without the class's lock
   (shared.c): safe-linked from HEAD, as a chunk's free list, at most
   LIM blocks long and ROOM blocks short of it (its length is LIM -
   ROOM, so that a push and a pop each count once).  The limit is set
   on the slow paths (kp_shared_slot_limit): at most
   KP_SHARED_SLOT_MAX, and the limits' bytes within
   kp_shared_slot_cap.  A sentinel heap's are all 0: its frees never
   push.  TAKES counts the mallocs the list served, ever (added to the
   statistics' totals, kp_shared_taken), SEEN its value at the decay's
   last pass: a list that served none in between goes back to its
   chunks (kp_shared_slot_decay).  The fields a malloc and a free touch
   share a cache line.  Owner-only; kame_pool_get_stats reads LIM,
   ROOM and TAKES racily (relaxed loads of plain objects), as it reads
   the descriptors.  */
typedef struct kp_slist
{
  _Alignas (32) kp_block_t *head;
  uint16_t lim, room;
  size_t takes, seen;
} kp_slist_t;
_Static_assert (sizeof (kp_slist_t) == 32, "a list's fields share a line");

/* A heap: one per live thread.  Heap records are permanent (never
   unmapped) and recycled for new threads, so a stale pointer to one is
   harmless: it is only ever compared.  */
struct kp_heap
{
  /* Owned chunks that are not active, oldest first: refills take from
     the head, so a chunk whose blocks other threads free is collected
     in turn rather than sinking under newer ones.  */
  kp_clist_t partial[KP_NCLASS];
  /* Owned chunks that ran dry while active (heap.c): an owner free
     moves one to the partial list; a refill that is about to claim
     collects their remote frees once the list has grown by an eighth
     since the last such sweep (full_new counts the pushes since).  */
  kp_clist_t full[KP_NCLASS];
  uint32_t full_count[KP_NCLASS], full_new[KP_NCLASS];
  unsigned fostered;            /* fostered chunks on the partial lists */
  _Atomic (int) in_use;         /* CAS acquire to take, store release to give */
  struct kp_heap *pool_next;    /* immutable once published */
  kp_heap_cache_t cache;        /* the large cache's (cache.c) */
  kp_heap_large_t large;        /* the large tier's (large.c) */
  /* Statistics, written by the owner with relaxed stores (never a
     read-modify-write), summed relaxed by kame_pool_get_stats: blocks
     this thread freed into chunks of other threads, and blocks it
     collected from its own chunks' remote lists, per class (their
     difference over all heaps is what waits to be collected); the
     decay's madvise calls and the pages they gave back.  */
  _Atomic (size_t) remote_out[KP_NCLASS], remote_in[KP_NCLASS];
  _Atomic (size_t) purge_calls, purge_pages;
  /* Blocks this thread took back out of its batch of remote frees
     (kp_malloc_refill), and their bytes: handed out again without a
     pop from their chunk, so the chunks' pops do not count them.  */
  _Atomic (size_t) taken_blocks, taken_bytes;
  /* The batch of remote frees (chunk.c): the slots, and a bit per
     slot that holds blocks.  Owner-only.  */
  kp_rbatch_t rbatch[KP_RBATCH_SLOTS];
  unsigned rbatch_mask;
  /* The same bits by class: a refill of class CLS, in a thread that
     has an active chunk of the class, takes a block back out of a slot
     of rbatch_cls[CLS] (kp_rbatch_take).  */
  uint32_t rbatch_cls[KP_NCLASS];
  /* True while the thread takes a block out of its batch: a fork from
     a signal handler then leaves the batch alone (kp_atfork_prepare),
     and the child finishes the take on its copy.  */
  bool rbatch_taking;
  /* The decay (heap.c): the coarse clock at the last pass, in ms.
     Owner-only.  */
  uint32_t decay_now, decay_last, decay_ticks;
  /* Full chunks that frees moved to the partial lists since the last
     refill (kp_chunk_unfull): past KP_SHED_STREAK the thread is
     freeing a working set, and hands its chunks with free blocks over
     (kp_chunk_shed).  Owner-only.  */
  uint32_t unfull_streak;
  /* What each class's active chunk looked like at the last pass: the
     same at the next one means the class went unused in between.  */
  uintptr_t decay_seen[KP_NCLASS];
  /* The blocks of the shared classes this thread freed and keeps for
     its next mallocs of their class (kp_slist_t), and the bytes the
     lists' limits allow, within kp_shared_slot_cap.  */
  kp_slist_t shared[KP_NSHARED];
  size_t shared_lim_bytes;
};

/* The per-thread cache: the only thread-local state on the hot paths.
   Its TLS model is chosen by configure --with-tls-model.  */
typedef struct kp_tcache
{
  kp_heap_t *heap;              /* &kp_heap_none before init, &kp_heap_dead after exit */
  kp_chunk_t *active[KP_NCLASS]; /* &kp_empty_chunk when none */
  /* The sampling countdown (kp_sample_state), the thread's own: the
     bytes left to allocate before the next sample (0 at the thread's
     start: its first malloc comes to kp_malloc_sample), the state of
     its random numbers, and whether the thread is inside the profiler
     (its unwinder may call malloc: those calls are served unsampled).
     Here rather than in a TLS variable of prof.c: the countdown is
     inline in malloc, which already has this one's address, in every
     TLS model.  Every malloc writes PROF_LEFT; the rest only the
     sampled ones.  */
  uint64_t prof_left;
  uint64_t prof_rng;
  bool prof_busy;
  /* With guarded sampling on (alloc.c, kp_malloc_sample_shared): what
     the countdown was armed with, and the bytes left before each
     sampler's next sample; guarded sampling's random numbers (0: no
     gap drawn yet).  The thread's own.  */
  int64_t sample_armed, prof_rem, guard_rem;
  uint64_t guard_rng;
  /* The thread's id, for the samplers' locks and guarded sampling's
     reports (prof.c, kp_sample_tid; 0: not asked yet, and again in the
     child of a fork).  The thread's own.  */
  int32_t sample_tid;
} kp_tcache_t;

/* ---- The thread's heap and the heap records (thread.c) ----------------- */

extern __thread kp_tcache_t kp_tc KP_TLS_ATTR KP_HIDDEN;
KP_HIDDEN kp_heap_t *kp_heap_list (void);      /* every heap record */
/* The count of threads with a heap: a thread took its heap (D = 1) or
   gave it back (D = -1) (heap.c); in the child of a fork, only the
   forking thread's counts (init.c).  It sets kp_shared_slot_cap.  */
KP_HIDDEN void kp_heaps_live_add (int d);
KP_HIDDEN void kp_heaps_after_fork (void);
/* A free heap record for the calling thread (in_use set), or NULL.  */
KP_HIDDEN kp_heap_t *kp_heap_acquire (void);
extern kp_chunk_t kp_empty_chunk KP_HIDDEN;
extern kp_heap_t kp_heap_none KP_HIDDEN;
extern kp_heap_t kp_heap_dead KP_HIDDEN;
/* The owner of every chunk of the shared classes (shared.c).  */
extern kp_heap_t kp_heap_shared KP_HIDDEN;

KP_INLINE bool
kp_heap_live (const kp_heap_t *h)
{
  return h != &kp_heap_none && h != &kp_heap_dead;
}

/* The calling thread allocates blocks of class CLS: it has an active
   chunk of the class (a thread with no heap, or past its exit, has
   none).  */
KP_INLINE bool
kp_thread_uses_class (unsigned cls)
{
  return kp_tc.active[cls] != &kp_empty_chunk;
}

/* ---- A heap's lists of chunks (inline: the chunk layer moves chunks
   between them, the heap layer takes chunks from them).  Only the
   heap's thread reads or writes them.  */

KP_INLINE void
kp_clist_push (kp_clist_t *l, kp_chunk_t *c)
{
  c->next = NULL;
  c->prev = l->tail;
  if (c->prev != NULL)
    c->prev->next = c;
  else
    l->head = c;
  l->tail = c;
}

KP_INLINE void
kp_clist_push_head (kp_clist_t *l, kp_chunk_t *c)
{
  c->prev = NULL;
  c->next = l->head;
  if (c->next != NULL)
    c->next->prev = c;
  else
    l->tail = c;
  l->head = c;
}

KP_INLINE void
kp_clist_remove (kp_clist_t *l, kp_chunk_t *c)
{
  if (c->prev != NULL)
    c->prev->next = c->next;
  else
    {
      KP_ASSERT (l->head == c);
      l->head = c->next;
    }
  if (c->next != NULL)
    c->next->prev = c->prev;
  else
    {
      KP_ASSERT (l->tail == c);
      l->tail = c->prev;
    }
  c->next = c->prev = NULL;
}

KP_INLINE unsigned
kp_chunk_cls (const kp_chunk_t *c)
{
  return atomic_load_explicit (&c->cls, memory_order_relaxed);
}

/* C joins a partial list of H: from now on it is idle, and the decay
   may give back its free pages once it has been idle for the delay.  */
KP_INLINE void
kp_chunk_idle (kp_heap_t *h, kp_chunk_t *c)
{
  c->idle_since = h->decay_now;
  c->decayed = false;
}

KP_INLINE void
kp_partial_push (kp_heap_t *h, kp_chunk_t *c)
{
  kp_chunk_idle (h, c);
  kp_clist_push (&h->partial[kp_chunk_cls (c)], c);
}

KP_INLINE void
kp_partial_remove (kp_heap_t *h, kp_chunk_t *c)
{
  kp_clist_remove (&h->partial[kp_chunk_cls (c)], c);
  if (c->fostered)
    {
      c->fostered = false;
      h->fostered--;
    }
}

KP_INLINE kp_chunk_t *
kp_partial_pop (kp_heap_t *h, unsigned cls)
{
  kp_chunk_t *c = h->partial[cls].head;
  if (c != NULL)
    kp_partial_remove (h, c);
  return c;
}

/* C, owned by H, has no free block and nothing left to carve: keep it
   on the full list instead of abandoning it, so that the owner's next
   free into it is a plain push (kp_chunk_unfull), not a take-over
   through the remote path with three atomics.  */
KP_INLINE void
kp_full_push (kp_heap_t *h, kp_chunk_t *c)
{
  unsigned cls = kp_chunk_cls (c);
  kp_clist_push (&h->full[cls], c);
  c->full = true;
  h->full_count[cls]++;
  h->full_new[cls]++;
}

KP_INLINE void
kp_full_remove (kp_heap_t *h, kp_chunk_t *c)
{
  unsigned cls = kp_chunk_cls (c);
  kp_clist_remove (&h->full[cls], c);
  c->full = false;
  h->full_count[cls]--;
}

/* ---- Size classes (sizeclass.c) --------------------------------------- */

extern const uint8_t kp_class_lut[KP_LUT_SIZE] KP_HIDDEN;
extern const uint8_t kp_mid_lut[KP_MID_LUT_SIZE] KP_HIDDEN;
extern const uint32_t kp_class_size[KP_NCLASS] KP_HIDDEN;
extern const uint8_t kp_class_units[KP_NCLASS] KP_HIDDEN;
extern const uint64_t kp_class_divmagic[KP_NCLASS] KP_HIDDEN;
/* [kp_thread_uses_class (cls)][cls]: KP_RBATCH_LIMIT and
   KP_RBATCH_REUSE of the class's size.  */
extern const uint8_t kp_class_rbatch_limit[2][KP_NCLASS] KP_HIDDEN;
KP_HIDDEN void kp_sizeclass_check (void);
KP_HIDDEN int kp_class_for_aligned (size_t n, size_t align);

/* The class of N, KP_LUT_MAX < N <= KP_SMALL_MAX: the mid classes are
   multiples of 1 KiB, so N in KiB, rounded up, tells it.  */
KP_INLINE unsigned
kp_mid_class (size_t n)
{
  return kp_mid_lut[((n + 1023) >> 10) - (KP_LUT_MAX >> 10) - 1];
}

/* The class of N, N <= KP_SMALL_MAX.  */
KP_INLINE unsigned
kp_size_class (size_t n)
{
  return kp_likely (n <= KP_LUT_MAX) ? kp_class_lut[(n + 15) >> 4]
                                     : kp_mid_class (n);
}

/* ---- Radix map: region number -> kind (radix.c) ------------------------ */

enum kp_radix_kind
{
  KP_RADIX_NONE = 0,            /* not ours: libc, stack, bootstrap */
  KP_RADIX_POOL = 1,            /* a pool region */
  KP_RADIX_LARGE = 2,           /* the head of a large or huge mapping */
  KP_RADIX_LARGE_PREV = 3,      /* a block aligned to 32 MiB or more starts
                                   here; its header is the page before */
  KP_RADIX_PROF = 4,            /* a region of sampled blocks (prof.c) */
  KP_RADIX_GUARD = 5            /* the slot pool of guarded sampling
                                   (guard.c) */
};
#define KP_VA_BITS 47
#define KP_RADIX_ENTRIES ((size_t) 1 << (KP_VA_BITS - KP_REGION_SHIFT))
/* Written with release by the publisher of a region or mapping; read
   with acquire by kp_radix_lookup and relaxed by free's fast path.  */
extern _Atomic (uint8_t) kp_radix[KP_RADIX_ENTRIES] KP_HIDDEN;
/* The radix entry of ADDR's region (KP_RADIX_NONE beyond the map).  */
KP_INLINE int
kp_radix_lookup (uintptr_t addr)
{
  uintptr_t i = addr >> KP_REGION_SHIFT;
  if (kp_unlikely (i >= KP_RADIX_ENTRIES))
    return KP_RADIX_NONE;
  return atomic_load_explicit (&kp_radix[i], memory_order_acquire);
}
KP_HIDDEN void kp_radix_set (uintptr_t region_base, int kind);

/* ---- Sampling and the heap profile (prof.c) ----------------------------

   Every malloc counts its bytes down in the calling thread's
   kp_tc.prof_left; the one that takes it below zero (its sign bit
   set) calls kp_malloc_sample (alloc.c), which looks at
   kp_sample_state.  Before the process has read its settings (no
   DECIDED bit), it initialises the process first, and when it cannot
   yet (a malloc made by the initialisation) it leaves the countdown
   at 0, so that the thread's next malloc comes back; with no sampling
   on (DECIDED alone), it sets the countdown to KP_SAMPLE_NEVER; with
   the heap profile on (PROF), the profiler draws the next gap and
   takes the sample.  malloc thus runs the same instructions whether
   sampling is on or off: one subtraction from a thread-local and a
   branch on the sign of the result.  kp_sample_state is written by
   kp_process_init alone, with release (kp_prof_init, then
   kp_sample_decide), after what the samplers read; read with acquire
   by kp_malloc_sample, relaxed by the callers that only ask whether
   the profile is on.  */
#define KP_SAMPLE_DECIDED 1u    /* the settings are read */
#define KP_SAMPLE_PROF 2u       /* the heap profile is on */
#define KP_SAMPLE_GUARD 4u      /* guarded sampling is on (guard.c) */
#define KP_SAMPLE_NEVER ((uint64_t) INT64_MAX)
/* The next number of xorshift64* on *STATE (not 0): the samplers'
   gaps need no more than a fast, well-spread source.  */
KP_INLINE uint64_t
kp_random (uint64_t *state)
{
  uint64_t x = *state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *state = x;
  return x * 0x2545F4914F6CDD1DULL;
}

/* -ln (U) for U in [2^-53, 1], within a few parts in 10^9, without
   libm: its log would fault in a hundred KiB of the library's pages in
   every process, guarded sampling being on by default.  U is M 2^E
   with M in [2^-1/2, 2^1/2), and ln M = 2 atanh (S) with
   S = (M - 1) / (M + 1) within 0.172: five terms of the series, and no
   cancellation for U near 1.  */
KP_INLINE double
kp_neg_log (double u)
{
  uint64_t bits;
  __builtin_memcpy (&bits, &u, sizeof bits);
  int e = (int) ((bits >> 52) & 0x7ff) - 1023;
  bits = (bits & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL;
  double m;
  __builtin_memcpy (&m, &bits, sizeof m);
  if (m > 1.41421356237309505)
    {
      m *= 0.5;
      e++;
    }
  double sq = (m - 1.0) / (m + 1.0), s2 = sq * sq;
  double ln_m = 2.0 * sq * (1.0 + s2 * (1.0 / 3 + s2 * (1.0 / 5
                                      + s2 * (1.0 / 7 + s2 / 9))));
  return -((double) e * 0.69314718055994530942 + ln_m);
}

/* A gap of the exponential distribution of mean RATE bytes, from the
   numbers of *STATE (kp_random): at least 1, at most 2^62.  The
   samplers' gaps (prof.c, guard.c), memoryless: a block of S bytes is
   a sample with probability 1 - exp (-S / RATE) whatever came
   before.  */
KP_INLINE uint64_t
kp_exp_gap (uint64_t *state, double rate)
{
  /* U uniform in (0, 1]: 53 random bits, plus one.  */
  double u = ((double) (kp_random (state) >> 11) + 1.0) * 0x1p-53;
  double g = kp_neg_log (u) * rate;
  return g < 1.0 ? 1 : g > 0x1p62 ? (uint64_t) 1 << 62 : (uint64_t) g;
}
KP_HIDDEN extern _Atomic (unsigned) kp_sample_state;
KP_INLINE bool
kp_prof_on (void)
{
  return (atomic_load_explicit (&kp_sample_state, memory_order_relaxed)
          & KP_SAMPLE_PROF) != 0;
}
/* Set profiling up, when KAME_POOL_PROF asks for it (kp_process_init,
   after the settings).  */
KP_HIDDEN void kp_prof_init (void);
/* The samplers are set up: kp_malloc_sample may act on the state
   (kp_process_init, after them).  */
KP_HIDDEN void kp_sample_decide (void);
/* A malloc of N bytes, profiling on, that took the calling thread's
   countdown (kp_tc.prof_left) below zero: the sampled block (served from
   a region of the profiler's own), or NULL for the pool's usual path
   (a malloc made from inside the profiler, or no memory for the
   sample).  Draws the next gap either way.  */
KP_HIDDEN void *kp_prof_sample (size_t n);
/* free, usable size and realloc's size of P, a pointer in a region of
   kind KP_RADIX_PROF; kp_prof_usable returns 0 for a pointer that does
   not start a live sampled block.  */
KP_HIDDEN void kp_prof_free (void *p);
KP_HIDDEN size_t kp_prof_usable (const void *p);
/* Write the profile to PATH: 0 or an errno value.  */
KP_HIDDEN int kp_prof_dump (const char *path);
/* The bytes of the stack table in use (0 when profiling is off); the
   stacks it holds, the samples recorded by their innermost frame only
   (the table past 7/8 full) and the samples not recorded (the table
   full, no stack, or no memory for the block).  */
KP_HIDDEN size_t kp_prof_table_bytes (size_t *stacks, size_t *shortened,
                                      size_t *dropped);
/* The return addresses of the calling thread's stack, innermost first,
   without this library's frames (known once kp_prof_unwind_init ran):
   at most MAX in PC, their number.  May call malloc on its first use.
   kp_prof_unwind is the heap profile's (libunwind's fast trace, which
   keeps a cache of 256 KiB in each thread that walks);
   kp_prof_unwind_stepwise guarded sampling's (a step at a time, no
   per-thread state).  */
KP_HIDDEN size_t kp_prof_unwind (uintptr_t *pc, size_t max);
KP_HIDDEN size_t kp_prof_unwind_stepwise (uintptr_t *pc, size_t max);
KP_HIDDEN void kp_prof_unwind_init (void);
/* The sampled blocks handed out ever and their bytes, and those live
   now: no lock, a snapshot of the counts (prof.c).  */
KP_HIDDEN void kp_prof_blocks (size_t *allocs, size_t *alloc_bytes,
                               size_t *live, size_t *live_bytes);
KP_HIDDEN void kp_prof_atfork_prepare (void);
KP_HIDDEN void kp_prof_atfork_parent (void);
KP_HIDDEN void kp_prof_atfork_child (void);

/* The lock of a sampler (the heap profile's, guarded sampling's).  Its
   word holds the holder's thread id, set and cleared by one atomic
   operation each, so that a thread, even in a signal handler that
   interrupted it anywhere, knows whether it holds the lock
   (kp_sample_lock_mine): a fork from such a handler leaves the lock
   alone instead of waiting for itself (kp_sample_lock_prepare), and a
   malloc of such a handler takes no sample of that sampler.  prof.c.  */
typedef struct kp_sample_lock
{
  /* 0: free; else the holder's kp_sample_tid, with
     KP_SAMPLE_LOCK_WAITERS when a thread may sleep on the word
     (futex).  Acquire CAS to take it, release exchange to give it
     back.  */
  _Atomic (uint32_t) word;
  /* Set by kp_sample_lock_prepare, cleared by the handlers after the
     fork, when the forking thread held the lock: written and read by
     the holder only.  */
  bool fork_skipped;
} kp_sample_lock_t;
#define KP_SAMPLE_LOCK_WAITERS 0x80000000u
#define KP_SAMPLE_LOCK_INIT { 0, false }
/* The calling thread's id (gettid, asked once per thread).  */
KP_HIDDEN int32_t kp_sample_tid (void);
KP_HIDDEN void kp_sample_lock (kp_sample_lock_t *l);
KP_HIDDEN void kp_sample_unlock (kp_sample_lock_t *l);
KP_HIDDEN bool kp_sample_trylock (kp_sample_lock_t *l);
/* Whether the calling thread holds L.  */
KP_HIDDEN bool kp_sample_lock_mine (kp_sample_lock_t *l);
/* The atfork handlers' part: take L before the fork, unless the
   forking thread holds it; give it back after (in the parent, and in
   the child, IN_CHILD), unless it was left alone, which in the child
   makes the lock the child's thread's.  */
KP_HIDDEN void kp_sample_lock_prepare (kp_sample_lock_t *l);
KP_HIDDEN void kp_sample_lock_after_fork (kp_sample_lock_t *l,
                                          bool in_child);

/* ---- Guarded sampling (guard.c) -----------------------------------------

   With KAME_POOL_GUARD_SAMPLE on, one malloc in every that many bytes
   on average (exponential gaps) gets a slot of the guarded pool: the
   block against an inaccessible page, made inaccessible at its free.
   It shares the sampling countdown with the heap profile
   (kp_sample_state, KP_SAMPLE_GUARD; alloc.c's kp_malloc_sample).  */
/* The largest guarded block.  */
#define KP_GUARD_MAX 32768
/* Read the settings and set KP_SAMPLE_GUARD when sampling is on
   (kp_process_init, after kp_prof_init, before kp_sample_decide).  */
KP_HIDDEN void kp_guard_init (void);
/* The calling thread's count to its next guarded sample
   (kp_tc.guard_rem) went below zero on a malloc of N bytes aligned to
   ALIGN: the next gap is drawn and, if TAKE says the block is not
   another sampler's, the guarded block, or NULL (the thread's first
   gap, a malloc from inside the unwinder, too big, no free slot).  */
KP_HIDDEN void *kp_guard_sample (size_t n, size_t align, bool take);
/* A guarded block of N bytes (at most KP_GUARD_MAX) aligned to ALIGN
   (at most a page), or NULL when no slot is free.  */
KP_HIDDEN void *kp_guard_malloc (size_t n, size_t align);
/* free (or CALL, such as realloc) of P, an address of kind
   KP_RADIX_GUARD: a double or invalid free is reported (with
   KAME_POOL_ON_MISUSE=report the call then does nothing).  */
KP_HIDDEN void kp_guard_free (const char *call, void *p);
/* The usable size of P, or 0 if P is not a live guarded block.  */
KP_HIDDEN size_t kp_guard_usable (const void *p);
/* Report CALL on P, not a live guarded block, as kp_guard_free does.  */
KP_HIDDEN void kp_guard_misuse (const char *call, void *p);
KP_HIDDEN void kp_guard_stats (size_t *slots, size_t *used, size_t *allocs,
                               size_t *reports);
/* The guarded blocks handed out ever and their usable bytes, and those
   live now (relaxed counters, kame_pool_get_stats's totals).  */
KP_HIDDEN void kp_guard_blocks (size_t *allocs, size_t *alloc_bytes,
                                size_t *live, size_t *live_bytes);
KP_HIDDEN void kp_guard_atfork_prepare (void);
KP_HIDDEN void kp_guard_atfork_parent (void);
KP_HIDDEN void kp_guard_atfork_child (void);

/* ---- OS layer (os.c) --------------------------------------------------- */

/* Reserved address space (MAP_NORESERVE), or a block's own mapping,
   committed at the call (the kernel's overcommit policy applies).  */
KP_HIDDEN void *kp_os_map_aligned (size_t size, size_t align);
KP_HIDDEN void *kp_os_map_committed (size_t size, size_t align);
KP_HIDDEN void kp_os_unmap (void *p, size_t size);
KP_HIDDEN void kp_os_discard (void *p, size_t size);
typedef struct
{
  _Atomic (size_t) calls, pages;
} kp_os_discards_t;
KP_HIDDEN extern kp_os_discards_t kp_os_discards;
KP_HIDDEN size_t kp_os_page_size_slow (void);
/* The page size: set once by the first kp_os_page_size_slow (any
   thread may race to store the same value; relaxed).  */
KP_HIDDEN extern _Atomic (size_t) kp_page_size;
KP_INLINE size_t
kp_os_page_size (void)
{
  size_t page = atomic_load_explicit (&kp_page_size, memory_order_relaxed);
  return kp_likely (page != 0) ? page : kp_os_page_size_slow ();
}

KP_INLINE unsigned
kp_page_shift (void)
{
  return (unsigned) __builtin_ctzl (kp_os_page_size ());
}
/* The decay clock: milliseconds of CLOCK_MONOTONIC_COARSE, wrapping.  */
KP_INLINE uint32_t
kp_clock_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC_COARSE, &ts);
  return (uint32_t) ts.tv_sec * 1000u + (uint32_t) (ts.tv_nsec / 1000000);
}
/* Whether the calling thread makes the tick of a shared decay clock
   TICK (the time of the last tick) at NOW, with DELAY between ticks:
   one is due, and this thread's CAS moved TICK on to NOW first
   (relaxed: any order of ticks is correct).  */
KP_INLINE bool
kp_tick_due (_Atomic (uint32_t) *tick, uint32_t now, uint32_t delay)
{
  uint32_t last = atomic_load_explicit (tick, memory_order_relaxed);
  return now - last >= delay
         && atomic_compare_exchange_strong_explicit (tick, &last, now,
                                                     memory_order_relaxed,
                                                     memory_order_relaxed);
}
KP_HIDDEN void kp_os_write_stderr (const char *s);

/* Text built in a caller's buffer without malloc (os.c): a line for
   stderr (FD -1), cut when it does not fit, so that it goes out in one
   write; or a report for a file (FD), written out whenever the buffer
   fills.  */
typedef struct kp_line
{
  char *buf;
  size_t cap, len;
  int fd;
} kp_line_t;
#define KP_LINE(array, fd) { (array), sizeof (array), 0, (fd) }
KP_HIDDEN void kp_line_add (kp_line_t *l, const char *s);
KP_HIDDEN void kp_line_addn (kp_line_t *l, const char *s, size_t n);
KP_HIDDEN void kp_line_num (kp_line_t *l, unsigned long long v);
/* V as 0x and lowercase hexadecimal digits.  */
KP_HIDDEN void kp_line_hex (kp_line_t *l, uintptr_t v);
KP_HIDDEN void kp_line_flush (kp_line_t *l);
KP_HIDDEN void kp_line_json_string (kp_line_t *l, const char *s, size_t n);

/* ---- Settings (options.c) ---------------------------------------------- */

/* Every setting, with its environment variable, default, setter and
   man page, is in the table at the top of options.c.  Writers: the
   setter named there, and kp_options_init once in kp_process_init.
   Readers: any thread.  Every access is relaxed and stands alone: no
   setting orders other memory.  The value sits in a struct so that it
   is reached only through the helpers below, never by a plain
   (sequentially consistent) access.  */
#define KP_SETTING(type)                                                \
  struct { _Atomic (type) value; _Atomic (unsigned char) from; }
typedef KP_SETTING (int) kp_int_setting_t;
typedef KP_SETTING (size_t) kp_size_setting_t;
/* Where a setting's value came from: FROM is KP_FROM_PROGRAM once a
   setter wrote it, which the reading of the environment then leaves
   alone (options.c keeps the other sources itself).  */
enum
{
  KP_FROM_DEFAULT, KP_FROM_CONFIGURE, KP_FROM_CONF, KP_FROM_VARIABLE,
  KP_FROM_PROGRAM
};
#define kp_setting(s) atomic_load_explicit (&(s)->value, memory_order_relaxed)
/* A setter's store.  */
#define kp_setting_set(s, v)                                            \
  (atomic_store_explicit (&(s)->value, (v), memory_order_relaxed),      \
   atomic_store_explicit (&(s)->from, KP_FROM_PROGRAM, memory_order_relaxed))
#define kp_setting_swap(s, v)                                           \
  (atomic_store_explicit (&(s)->from, KP_FROM_PROGRAM, memory_order_relaxed), \
   atomic_exchange_explicit (&(s)->value, (v), memory_order_relaxed))
/* The environment's store (options.c).  */
#define kp_setting_put(s, v)                                            \
  atomic_store_explicit (&(s)->value, (v), memory_order_relaxed)

/* The stats_file name's room, its NUL included.  */
#define KP_PATH_MAX 256
/* stats_format.  */
#define KP_STATS_TEXT 0
#define KP_STATS_JSON 1

KP_HIDDEN extern kp_int_setting_t kp_decay_ms;  /* ms; -1: never */
KP_HIDDEN extern kp_int_setting_t kp_background_purge;  /* purge.c's thread */
KP_HIDDEN extern kp_int_setting_t kp_misuse_abort; /* 1 abort, 0 report */
KP_HIDDEN extern kp_int_setting_t kp_stats_at_exit;
KP_HIDDEN extern kp_int_setting_t kp_stats_format; /* KP_STATS_* */
KP_HIDDEN extern kp_int_setting_t kp_verbose;
KP_HIDDEN extern kp_int_setting_t kp_cap_strict; /* 1: NULL at the cap */
KP_HIDDEN extern kp_size_setting_t kp_max_bytes; /* region cap; 0 = none */
KP_HIDDEN extern kp_size_setting_t kp_cache_cap; /* large cache's cap */
KP_HIDDEN extern kp_int_setting_t kp_thread_exit_reclaim;
KP_HIDDEN extern kp_int_setting_t kp_thp_env; /* KAME_POOL_THP_* */
KP_HIDDEN extern kp_int_setting_t kp_numa_mode; /* -1 off, 0 auto, 1 on */
KP_HIDDEN extern kp_int_setting_t kp_test_nodes;
/* The heap profile's mean gap between samples, in bytes (prof.c).  */
#define KP_PROF_SAMPLE_DEFAULT 524288
KP_HIDDEN extern kp_int_setting_t kp_prof_sample_bytes;
/* Guarded sampling's mean gap in bytes (0: off) and its slots
   (guard.c).  */
#define KP_GUARD_SAMPLE_DEFAULT 134217728
#define KP_GUARD_SLOTS_DEFAULT 128
#define KP_GUARD_SLOTS_MAX 4096
KP_HIDDEN extern kp_int_setting_t kp_guard_sample_bytes;
KP_HIDDEN extern kp_int_setting_t kp_guard_slot_count;
/* KAME_POOL_PROF's prefix; "" when profiling is off.  */
KP_HIDDEN const char *kp_option_prof_prefix (void);
/* Read and check the environment, once (every getter below calls it
   first).  */
KP_HIDDEN void kp_options_read (void);
KP_HIDDEN void kp_options_init (void);
KP_HIDDEN bool kp_option_misuse_aborts (void);
KP_HIDDEN int kp_option_thp (void);
KP_HIDDEN int kp_option_numa_mode (void);
KP_HIDDEN unsigned kp_option_test_nodes (unsigned max);
/* stats_file, "" when the report goes to stderr.  */
KP_HIDDEN const char *kp_option_stats_path (void);
/* The settings as the members of a JSON object (the exit report).  */
KP_HIDDEN void kp_options_json (kp_line_t *l);
/* The cap kame_pool_set_max_bytes sets for BYTES: whole regions.  */
KP_HIDDEN size_t kp_max_bytes_round (size_t bytes);

KP_INLINE size_t
kp_cache_cap_now (void)
{
  return kp_setting (&kp_cache_cap);
}

/* ---- Regions and unit claims (region.c) -------------------------------- */

KP_INLINE kp_region_t *
kp_region_of (const void *p)
{
  return (kp_region_t *) ((uintptr_t) p & ~(uintptr_t) KP_REGION_MASK);
}

KP_INLINE unsigned
kp_chunk_base_unit (const kp_chunk_t *c)
{
  return (unsigned) (c - kp_region_of (c)->desc);
}

KP_INLINE char *
kp_chunk_data (const kp_chunk_t *c)
{
  return (char *) kp_region_of (c) + ((size_t) kp_chunk_base_unit (c)
                                      << KP_UNIT_SHIFT);
}

/* The descriptor of the chunk that holds P, P in a pool region.  */
KP_INLINE kp_chunk_t *
kp_chunk_of (const void *p)
{
  kp_region_t *r = kp_region_of (p);
  unsigned u = (unsigned) (((uintptr_t) p & KP_REGION_MASK) >> KP_UNIT_SHIFT);
  unsigned back = atomic_load_explicit (&r->back[u], memory_order_relaxed);
  return &r->desc[u - back];
}

/* What kp_units_release does with the pages of the released units.  */
enum kp_release_pages
{
  KP_PAGES_KEEP,                /* keep them resident */
  KP_PAGES_LAZY,                /* keep them while the dirty budget allows */
  KP_PAGES_LAZY_LARGE,          /* same, with the large tier's budget */
  KP_PAGES_LAZY_SMALL,          /* LAZY, and any small chunk may take them
                                   (a cached block lent, kp_cache_lend) */
  KP_PAGES_DISCARD              /* return them to the kernel now */
};
/* Claim UNITS units for a small chunk of class CLS, or a dedicated
   chunk (CLS is KP_CLS_DEDICATED): resident ones first.  The same in
   two steps: only units whose pages are all resident (small chunks),
   and units anywhere.  */
KP_HIDDEN kp_chunk_t *kp_units_claim (unsigned units, unsigned cls);
KP_HIDDEN bool kp_units_in_group (const kp_chunk_t *c);
KP_HIDDEN void kp_group_split (kp_region_t *r, unsigned u);
KP_HIDDEN size_t kp_groups_started (void);
KP_HIDDEN size_t kp_groups_split (void);
KP_HIDDEN kp_chunk_t *kp_units_claim_resident (unsigned units, unsigned cls);
KP_HIDDEN kp_chunk_t *kp_units_claim_any (unsigned units, unsigned cls,
                                          bool dense);
KP_HIDDEN void kp_units_purge_dirty (void);
/* The decay of the free units kept resident: at most every DELAY / 4
   ms (KP_DECAY_STEPS), those that have stayed free and resident for
   DELAY ms go back to the kernel while more than KP_DIRTY_KEEP bytes
   of them are resident.  NOW is the decay clock (kp_clock_ms).  The
   pages given back; *CALLS counts the madvise calls.  */
KP_HIDDEN size_t kp_units_decay (uint32_t now, uint32_t delay,
                                 size_t *calls);
/* Free units claimed again after their pages were given back, ever.  */
KP_HIDDEN size_t kp_units_refaulted (void);
/* The footprint (region.c): BYTES more of live large mappings (a
   negative change wraps); the highest footprint ever, the units
   claimed and the live mappings together; and the function that
   measures the live bytes when the footprint has grown (stats.c sets
   it at start-up).  */
KP_HIDDEN void kp_footprint_add (size_t bytes);
KP_HIDDEN size_t kp_footprint_peak_bytes (void);
KP_HIDDEN extern void (*_Atomic kp_peak_live_hook) (void);
KP_HIDDEN bool kp_units_extend (kp_chunk_t *c, unsigned units);
KP_HIDDEN void kp_units_release (kp_chunk_t *c, enum kp_release_pages pages);
/* The bytes of resident pages that the free units hold, and how many
   free units hold them (region.c).  */
KP_HIDDEN size_t kp_dirty_bytes (void);
/* Of those, the bytes the decay may give back: all of them, but with
   huge page advice on only those of huge pages with no unit claimed
   (counted by whole units).  */
KP_HIDDEN size_t kp_dirty_bytes_to_give (void);
KP_HIDDEN size_t kp_dirty_units (void);
/* How many times a release or a purge of units has given pages back
   to the kernel (region.c; kame_pool_trim tells from it whether its
   releases did).  */
KP_HIDDEN size_t kp_units_discards (void);
KP_HIDDEN kp_region_t *kp_region_first (void);
/* The region after R on the list of all regions (acquire: a region on
   the list is initialised).  */
KP_INLINE kp_region_t *
kp_region_next (const kp_region_t *r)
{
  return atomic_load_explicit (&r->next, memory_order_acquire);
}
/* Every region, newest first.  */
#define KP_FOR_EACH_REGION(r)                                           \
  for (kp_region_t *r = kp_region_first (); r != NULL;                  \
       r = kp_region_next (r))
/* The first unit of R from U on that may hold a chunk's descriptor:
   claimed, and the first unit of its run (back-offset 0); KP_UNITS
   when none.  The walks of the statistics go from one to the next
   (KP_FOR_EACH_CHUNK_UNIT), skipping the free units a claim word at a
   time, and read no other descriptor: one that no chunk has used lies
   on a page that nothing wrote (kp_region_new), which a read would
   fault in.  */
KP_INLINE unsigned
kp_chunk_unit_next (const kp_region_t *r, unsigned u)
{
  while (u < KP_UNITS)
    {
      uint64_t w = atomic_load_explicit (&r->claim[u / 64],
                                         memory_order_relaxed) >> (u % 64);
      if (w == 0)
        {
          u = (u / 64 + 1) * 64;
          continue;
        }
      u += (unsigned) __builtin_ctzll (w);
      if (atomic_load_explicit (&r->back[u], memory_order_relaxed) == 0)
        return u;
      u++;
    }
  return KP_UNITS;
}
/* Every unit U of R past the metadata's that starts a claimed run.  */
#define KP_FOR_EACH_CHUNK_UNIT(r, u)                                    \
  for (unsigned u = kp_chunk_unit_next ((r), 1); u < KP_UNITS;          \
       u = kp_chunk_unit_next ((r), u + 1))
KP_HIDDEN size_t kp_region_count (void);

/* ---- The background purge (purge.c) ------------------------------------ */

enum
{
  KP_PURGE_NONE,                /* no thread */
  KP_PURGE_RUNNING,             /* the thread runs, or is being made */
  KP_PURGE_OFF                  /* the setting or the decay is off */
};
/* Written by the pollers' CAS and the thread (purge.c says how); read
   relaxed by kp_purge_poll.  */
KP_HIDDEN extern _Atomic (int) kp_purge_state;
/* The decay of a layer above the regions that the thread runs on its
   ticks (the large cache's shared level): DECAY as kp_units_decay,
   HELD the bytes it holds now.  */
typedef struct
{
  size_t (*decay) (uint32_t now, uint32_t delay, size_t *calls);
  size_t (*held) (void);
} kp_purge_upper_t;
enum
{
  KP_PURGE_UPPER_CHUNKS,        /* chunk.c: the abandoned chunks */
  KP_PURGE_UPPER_CACHE,         /* cache.c: the shared level */
  KP_PURGE_UPPER_SHARED,        /* shared.c: the shared classes */
  KP_PURGE_UPPERS
};
KP_HIDDEN void kp_purge_register (unsigned slot,
                                  const kp_purge_upper_t *upper);
/* Make the thread, if the setting allows and there is work.  */
KP_HIDDEN void kp_purge_start (void);
/* The thread's work, ever, and whether it runs now.  */
typedef struct
{
  size_t passes, calls, pages, starts;
  bool running;
} kp_purge_stats_t;
KP_HIDDEN void kp_purge_counts_read (kp_purge_stats_t *out);
KP_HIDDEN void kp_purge_atfork_prepare (void);
KP_HIDDEN void kp_purge_atfork_parent (void);
KP_HIDDEN void kp_purge_atfork_child (void);

/* A point where the calling thread's heap is consistent, so that the
   allocations of pthread_create may run: make the thread when there is
   none and free units wait to be given back.  A load and a compare
   when the thread runs, or when there is nothing.  */
KP_INLINE void
kp_purge_poll (void)
{
  if (kp_unlikely (atomic_load_explicit (&kp_purge_state,
                                         memory_order_relaxed)
                   == KP_PURGE_NONE)
      && kp_dirty_bytes () > KP_DIRTY_KEEP)
    kp_purge_start ();
}

/* ---- Transparent-hugepage advice (policy.c) ---------------------------- */

KP_HIDDEN int kp_thp_policy_now (void);         /* a KAME_POOL_THP_* value */
KP_HIDDEN bool kp_thp_policy_set (int policy);
KP_HIDDEN void kp_thp_advise_region (kp_region_t *r, int policy);
KP_HIDDEN bool kp_thp_kernel_madvise (void);

/* ---- NUMA placement (numa.c) ------------------------------------------- */

#define KP_MAX_NODES 16                 /* region lists; more nodes fold */
KP_HIDDEN unsigned kp_numa_nodes (void);        /* lists in use, >= 1 */
KP_HIDDEN unsigned kp_numa_thread_node (void);  /* < kp_numa_nodes () */
KP_HIDDEN void kp_numa_bind (void *p, size_t len, unsigned node);

/* ---- Chunks (chunk.c) -------------------------------------------------- */

KP_HIDDEN void kp_chunk_init_small (kp_chunk_t *c, unsigned cls,
                                    unsigned units, kp_heap_t *h);
KP_HIDDEN bool kp_chunk_carve (kp_chunk_t *c);
KP_HIDDEN size_t kp_chunk_purge (kp_chunk_t *c, size_t *calls);
KP_HIDDEN void kp_remote_count (kp_heap_t *h, bool in, unsigned cls, size_t n);
/* The blocks handed out by the small chunks released so far, per class
   (chunk.c).  */
KP_HIDDEN extern _Atomic (uint64_t) kp_small_pops[KP_NCLASS];
KP_HIDDEN void kp_remote_pending (size_t pending[KP_NCLASS]);
KP_HIDDEN uint32_t kp_chunk_collect (kp_chunk_t *c);
KP_HIDDEN bool kp_chunk_abandon (kp_chunk_t *c, kp_heap_t *h);
/* Release chunk C, which H owns and has taken off its lists, if it is
   empty, else abandon it for adoption (collecting what arrives
   meanwhile).  PAGES as kp_units_release.  */
KP_HIDDEN void kp_chunk_hand_over (kp_heap_t *h, kp_chunk_t *c,
                                   enum kp_release_pages pages);
KP_HIDDEN void kp_chunk_release (kp_chunk_t *c, enum kp_release_pages pages);
KP_HIDDEN void kp_chunk_retire (kp_chunk_t *c);
/* The owner freed a block into C, on its full list / A, the active
   chunk of its class in H, gives its place up.  */
KP_HIDDEN void kp_chunk_unfull (kp_chunk_t *c);
KP_HIDDEN void kp_chunk_displace (kp_heap_t *h, kp_chunk_t *a, bool head);
KP_HIDDEN kp_chunk_t *kp_chunk_adopt (kp_heap_t *h, unsigned cls);
/* Free P, a block of small chunk C that another thread owns (or no
   thread, or a pointer into a dedicated chunk that does not start
   it), the long way: its checks, and a new slot of the batch of H,
   the calling thread's heap, kp_tc.heap (chunk.c; kp_free_remote
   below is the way in).  */
KP_HIDDEN void kp_free_remote_slow (void *p, kp_chunk_t *c, kp_heap_t *h);
/* The free of P, in small chunk C of class CLS, by a thread that does
   not own C: P starts a block (the class's tables, not a division by
   the block size), else reported, false.  */
KP_INLINE bool
kp_free_block_start_ok (const kp_chunk_t *c, unsigned cls, const void *p)
{
  uint64_t magic = kp_class_divmagic[cls];
  uint64_t off = (uint64_t) ((const char *) p - kp_chunk_data (c));
  if (kp_likely (off * magic < magic))
    return true;
  kp_misuse ("free", "invalid pointer (not the start of a block):", p);
  return false;
}
/* Push B, a block of small chunk C whose OWNED bit is set, on C's
   remote list (shared.c: a free inside the lock's own thread).  */
KP_HIDDEN void kp_remote_push_one (kp_chunk_t *c, kp_block_t *b);
/* Publish slot S of H, which holds blocks (chunk.c).  */
KP_HIDDEN void kp_rbatch_flush (kp_heap_t *h, kp_rbatch_t *s);
/* Publish every batch of remote frees H, the calling thread's live
   heap, holds (chunk.c).  */
KP_HIDDEN void kp_rbatch_flush_all (kp_heap_t *h);
KP_HIDDEN void *kp_rbatch_take_bad (kp_heap_t *h, kp_rbatch_t *s);

/* Empty slot I of H.  */
KP_INLINE void
kp_rbatch_clear_at (kp_heap_t *h, unsigned i)
{
  uint32_t keep = ~(1u << i);
  kp_rbatch_t *s = &h->rbatch[i];
  s->chunk = NULL;
  atomic_store_explicit (&s->count, 0, memory_order_relaxed);
  h->rbatch_mask &= keep;
  h->rbatch_cls[atomic_load_explicit (&s->cls, memory_order_relaxed)]
    &= keep;
}

/* A thread's malloc takes a block of its own batch back (the refill,
   kp_malloc_refill): the head B of a slot S, the block it freed last,
   whose decoded link is NEXT.  True when B may be handed out:
   hardened, it carries the remote tag, and its link leads to a block of
   its own region or ends the list exactly when the slot's count says,
   as kp_chunk_pop checks an owner's list (kp_rbatch_take_bad
   otherwise).  */
KP_INLINE bool
kp_rbatch_head_ok (const kp_rbatch_t *s, const kp_block_t *b,
                   const kp_block_t *next)
{
  uint32_t n = atomic_load_explicit (&s->count, memory_order_relaxed);
  return !KP_HARDEN
         || (kp_block_marked_remote (b)
             && (next == NULL ? n == 1
                 : n != 1 && !kp_link_suspect (b, next)));
}

/* Take B, the head of slot I of H, with link NEXT.  B never left its
   chunk's used count, so the chunk needs no word of it: it is simply
   live again, and leaves the slot's count (the statistics count the
   slot's blocks as remote frees not yet collected).  */
KP_INLINE void
kp_rbatch_take (kp_heap_t *h, unsigned i, kp_block_t *b, kp_block_t *next)
{
  kp_rbatch_t *s = &h->rbatch[i];
  uint32_t n = atomic_load_explicit (&s->count, memory_order_relaxed) - 1;
  atomic_store_explicit (&s->count, n, memory_order_relaxed);
  if (n == 0)
    kp_rbatch_clear_at (h, i);
  else
    s->head = next;
  kp_block_mark_live (b);
}
/* The owner's free of B at offset OFF into C when the fast test saw
   something to look at: report misuse, or free B.  */
KP_HIDDEN void kp_free_owned_check (kp_chunk_t *c, kp_block_t *b,
                                    uintptr_t off);
/* Whether OFF, an offset into small chunk C, starts a block.  */
KP_HIDDEN bool kp_chunk_block_start (const kp_chunk_t *c, uintptr_t off);
KP_HIDDEN void kp_chunk_setup (kp_chunk_t *c, enum kp_chunk_kind kind,
                               unsigned cls, unsigned units, uint32_t size,
                               kp_heap_t *h);
KP_HIDDEN bool kp_chunk_list_ok (const kp_chunk_t *c);
/* B, a block of small chunk C (owned by the caller), starts in a page
   the decay gave back: it was free then.  */
KP_HIDDEN bool kp_chunk_block_purged (const kp_chunk_t *c, const void *b);

/* C, owned by the caller, can hand out a block: from its free list, by
   carving, or from a page the decay gave back.  */
KP_INLINE bool
kp_chunk_has_space (const kp_chunk_t *c)
{
  return c->free != NULL || c->bump < c->limit || c->npurged != 0;
}

/* ---- The shared classes (shared.c) -------------------------------------

   The chunks of the classes above KP_OWNED_MAX belong to no thread:
   each class has one set of chunks under a lock, and each thread
   keeps a short list of freed blocks of each class
   (kp_heap_t.shared).  */

/* NEXT, the decoded link of a block on a thread's list of a shared
   class, is NULL or in a pool region: the list's blocks come from
   chunks in any region, so the test of a chunk's free list, the same
   region (kp_link_suspect), does not hold.  */
KP_INLINE bool
kp_shared_link_ok (const kp_block_t *next)
{
  uintptr_t r = (uintptr_t) next >> KP_REGION_SHIFT;
  return next == NULL
         || (r < KP_RADIX_ENTRIES
             && atomic_load_explicit (&kp_radix[r], memory_order_relaxed)
                == KP_RADIX_POOL);
}

/* malloc of N bytes, of shared class CLS, by the thread whose heap is
   H (live), past kp_malloc_shared, which found its list empty or its
   head written to (reported here, the list dropped): a block of the
   class's chunks, and more for the list; the C library's block beyond
   the cap, or NULL.  */
KP_HIDDEN void *kp_shared_malloc (kp_heap_t *h, unsigned cls, size_t n);
/* Push B on list L, which has room for it.  */
KP_INLINE void
kp_shared_slot_push (kp_slist_t *l, kp_block_t *b)
{
  kp_block_link (b, l->head);
  kp_block_mark_free (b);
  /* The link and the tag before the head (a fork from a signal handler
     sees a whole list); no instruction.  */
  atomic_signal_fence (memory_order_release);
  l->head = b;
  l->room--;
}

/* kp_shared_free past the list's fast path (shared.c).  */
KP_HIDDEN void kp_shared_free_slow (void *p, kp_chunk_t *c, kp_heap_t *h,
                                    uintptr_t off);
/* free of P, at offset OFF of the data of chunk C of a shared class,
   by the thread whose heap is H (any: live, none or dead).  */
KP_INLINE void
kp_shared_free (void *p, kp_chunk_t *c, kp_heap_t *h, uintptr_t off)
{
  /* The start of a block of a chunk with no page given back, not
     marked free, and room on the list (a sentinel heap has none): a
     push.  Anything else, the slow path's checks.  */
  uint64_t magic = atomic_load_explicit (&c->shared_magic,
                                         memory_order_relaxed);
  kp_block_t *b = p;
  if (kp_likely (off * magic < magic && !kp_block_marked_free (b)))
    {
      kp_slist_t *l = &h->shared[atomic_load_explicit (&c->cls,
                                                       memory_order_relaxed)
                                  - KP_SHARED_FIRST];
      if (kp_likely (l->room != 0))
        {
          kp_shared_slot_push (l, b);
          return;
        }
    }
  kp_shared_free_slow (p, c, h, off);
}

/* The blocks and bytes the threads' lists handed out, ever (added to
   the statistics' totals).  */
KP_HIDDEN void kp_shared_taken (size_t *blocks, size_t *bytes);
/* The bytes a thread's lists may hold (see KP_SHARED_LISTS_BYTES),
   worked out in thread.c from the count of threads with a heap.  */
extern _Atomic (size_t) kp_shared_slot_cap KP_HIDDEN;
/* Add to FREE[CLS] the blocks of each shared class CLS that wait on the
   threads' lists: free, though their chunks count them handed out (a
   racy read of the lengths, exact when no other thread runs).  */
KP_HIDDEN void kp_shared_slot_blocks (size_t free[KP_NCLASS]);
/* The decay's pass of H: the slots that served no malloc since the
   last pass go back to their chunks.  */
KP_HIDDEN void kp_shared_slot_decay (kp_heap_t *h);
/* H's thread exits: its slots go back to their chunks.  */
KP_HIDDEN void kp_shared_thread_exit (kp_heap_t *h);
/* Give back now the free pages of the shared classes' chunks and the
   empty chunks, after the calling thread's slots: the pages given
   back, and the madvise calls made added to *CALLS.  */
KP_HIDDEN size_t kp_shared_trim (size_t *calls);
/* The decay of the shared classes' chunks unused since NOW - DELAY,
   as kp_units_decay (also the background purge's).  */
KP_HIDDEN size_t kp_shared_decay (uint32_t now, uint32_t delay,
                                  size_t *calls);

/* ---- Heaps and threads (heap.c) ---------------------------------------- */

KP_HIDDEN void *kp_malloc_refill (size_t n);
/* The pop of B, the head of C's free list, that is not marked free (a
   double free the owner's free let through, see kp_free_owned) or
   whose link was overwritten while B was free.  */
KP_HIDDEN void *kp_malloc_pop_bad (kp_chunk_t *c, kp_block_t *b);
KP_HIDDEN void kp_heap_decay (kp_heap_t *h);
KP_HIDDEN size_t kp_heap_trim (void);
KP_HIDDEN bool kp_thread_init (void);

/* ---- Process init, libc fallback (init.c) ------------------------------ */

KP_HIDDEN bool kp_process_init (void);
/* The process's initialisation: KP_INIT_NONE -> KP_INIT_RUNNING by the
   CAS (acquire) of the thread that runs it, -> KP_INIT_DONE by that
   thread's release store, RUNNING -> NONE by the atfork child handler
   (relaxed: the child is single-threaded).
   Read with acquire by every allocating thread (kp_ready): the settings
   and secrets written before the DONE store are then visible.  */
enum { KP_INIT_NONE, KP_INIT_RUNNING, KP_INIT_DONE };
KP_HIDDEN extern _Atomic (int) kp_init_state;

/* The process is initialised, or the calling thread has initialised it
   now; false when the caller must make do with the C library.  */
KP_INLINE bool
kp_ready (void)
{
  return atomic_load_explicit (&kp_init_state, memory_order_acquire)
         == KP_INIT_DONE || kp_process_init ();
}
KP_HIDDEN void *kp_libc_malloc (size_t n);
KP_HIDDEN void *kp_libc_realloc (void *p, size_t n);
KP_HIDDEN void *kp_libc_memalign (size_t align, size_t n);
KP_HIDDEN void kp_libc_free (void *p);
KP_HIDDEN size_t kp_libc_usable_size (void *p);
/* What a small or dedicated request gets when no units are left: the
   C library's block, or NULL and ENOMEM in the strict cap policy.  */
KP_HIDDEN void *kp_units_fallback (size_t n, size_t align);

/* ---- Large blocks (large.c) -------------------------------------------- */

KP_HIDDEN size_t kp_large_usable (const void *p, int kind);
KP_HIDDEN bool kp_large_owns (const void *p, int kind);
KP_HIDDEN bool kp_large_grow (void *p, size_t n);
KP_HIDDEN bool kp_dedicated_grow (void *p, size_t n);
KP_HIDDEN bool kp_large_fresh (const void *p);
KP_HIDDEN void kp_large_stats (size_t *count, size_t *bytes);
/* BLOCKS large blocks handed out, and BYTES (large.c); their totals
   since start.  */
KP_HIDDEN void kp_large_note (size_t blocks, size_t bytes);
KP_HIDDEN void kp_large_totals (size_t *allocs, size_t *bytes);
/* Write the header at HEAD of a new mapping of MAP_SIZE bytes at
   MAP_BASE whose block BLOCK serves N bytes, and set the radix entry
   of BLOCK's region to KIND; BLOCK.  */
KP_HIDDEN void *kp_mapping_publish (void *head, size_t n, char *map_base,
                                    size_t map_size, char *block, int kind);
/* The cached mapping at BASE (GOT bytes) made the block of a live
   mapping of N bytes; the block.  */
KP_HIDDEN void *kp_mapping_recycle (char *base, size_t got, size_t n);
/* The free of a large block P: its mapping's cache entry, for the
   cache, or 0 when large.c has dealt with P (see there).  */
KP_HIDDEN uintptr_t kp_mapping_free (void *p, int kind);
/* Unmap a mapping the cache held; cut a cached mapping or dedicated
   chunk down to what a request needs.  */
KP_HIDDEN void kp_mapping_release (void *base);
KP_HIDDEN size_t kp_mapping_trim (void *base, size_t have, size_t want);
KP_HIDDEN kp_chunk_t *kp_dedicated_trim (kp_chunk_t *c, unsigned units);

/* ---- Large recycle cache (cache.c) ------------------------------------- */

/* An entry of the large cache is one word: the block's base (a
   dedicated chunk's data, 256 KiB-aligned, or a mapping, 32
   MiB-aligned) with its size in the low bits that the alignment leaves
   free (cache.c says more).  The entries and the owner's operations on
   its first level are inline here for the cache and for the short
   paths of large allocation above it (largealloc.c).  */

#define KP_ENTRY_MAPPING ((uintptr_t) 1)
/* The biggest mapping an entry can describe: its pages in the 24 bits
   above the flag.  */
#define KP_ENTRY_MAPPING_MAX ((((size_t) 1 << 24) - 1) << 12)

/* The entry of a chunk of UNITS units whose data starts at BASE.  */
static inline uintptr_t
kp_entry_chunk_at (const void *base, unsigned units)
{
  return (uintptr_t) base | (uintptr_t) units << 1;
}

static inline uintptr_t
kp_entry_chunk (const kp_chunk_t *c)
{
  return kp_entry_chunk_at (kp_chunk_data (c),
                            atomic_load_explicit (&c->units,
                                                  memory_order_relaxed));
}

static inline uintptr_t
kp_entry_mapping (void *base, size_t map_size)
{
  return (uintptr_t) base | (uintptr_t) (map_size >> 12) << 1
         | KP_ENTRY_MAPPING;
}

static inline bool
kp_entry_is_mapping (uintptr_t e)
{
  return (e & KP_ENTRY_MAPPING) != 0;
}

/* The bytes of E, a mapping's entry.  */
static inline size_t
kp_entry_mapping_bytes (uintptr_t e)
{
  return (size_t) ((e & KP_REGION_MASK) >> 1) << 12;
}

static inline size_t
kp_entry_bytes (uintptr_t e)
{
  if (kp_entry_is_mapping (e))
    return kp_entry_mapping_bytes (e);
  return (size_t) ((e & (KP_UNIT_SIZE - 1)) >> 1) << KP_UNIT_SHIFT;
}

/* The descriptor of the cached chunk whose data starts at BASE: the
   descriptor of BASE's own unit, with no back-offset to read.  */
static inline kp_chunk_t *
kp_entry_chunk_desc (void *base)
{
  kp_region_t *r = kp_region_of (base);
  return &r->desc[((uintptr_t) base & KP_REGION_MASK) >> KP_UNIT_SHIFT];
}

static inline void *
kp_entry_base (uintptr_t e)
{
  return (void *) (e & ~(kp_entry_is_mapping (e) ? KP_REGION_MASK
                                                 : KP_UNIT_SIZE - 1));
}

/* H's first-level entry I, and its update by the owner: relaxed, so
   plain moves, for kame_pool_get_stats reads them from other
   threads.  */
KP_INLINE uintptr_t
kp_l1_get (const kp_heap_t *h, size_t i)
{
  return atomic_load_explicit (&h->cache.l1[i], memory_order_relaxed);
}

KP_INLINE void
kp_l1_set (kp_heap_t *h, size_t i, uintptr_t e)
{
  atomic_store_explicit (&h->cache.l1[i], e, memory_order_relaxed);
}

/* The owner took BYTES out of its first level for a request: they go
   back to the budget, and the free streak ends (see the top of the
   file).  */
KP_INLINE void
kp_l1_take_fast (kp_heap_t *h, size_t bytes)
{
  h->cache.l1_room += bytes;
  h->cache.free_streak = 0;
}

/* Take H's first-level entry I out; its bytes go back to the budget.  */
static inline uintptr_t
kp_l1_take (kp_heap_t *h, unsigned i)
{
  uintptr_t e = kp_l1_get (h, i);
  kp_l1_set (h, i, 0);
  if (i + 1 == h->cache.l1_top)
    h->cache.l1_top = i;
  h->cache.l1_room += kp_entry_bytes (e);
  return e;
}


/* Release what the calling thread's cache and the global cache hold;
   true when anything was released.  */
KP_HIDDEN bool kp_cache_drain (void);
/* kp_units_claim, which for a small chunk lends the thread's idle
   cached blocks to small chunks before it claims units not resident
   (kp_cache_lend); out of units (the cap, or the kernel refused a
   region), it drains the large cache and claims once more.  DENSE: a
   small chunk of a class its thread fills densely, for a small chunks'
   group (kp_units_claim_any).  */
KP_HIDDEN kp_chunk_t *kp_units_claim_retry (unsigned units, unsigned cls,
                                            bool dense);
KP_HIDDEN void kp_cache_note_alloc (size_t bytes);
KP_HIDDEN bool kp_cache_tearing_down (void);
KP_HIDDEN void kp_cache_thread_exit (kp_heap_t *h);
/* The decay of H's first level, at time NOW with delay DELAY: give
   back its blocks when H's thread has made no large allocation for
   the delay; and, when its tick is due, of the second level: give
   back its blocks when no thread took one from it for the delay.
   Their count is added to *CALLS and their pages are returned.  */
KP_HIDDEN size_t kp_cache_decay (kp_heap_t *h, uint32_t now, uint32_t delay,
                                 size_t *calls);
KP_HIDDEN size_t kp_cache_bytes (void);
/* The cached blocks lent to small chunks ever, and their bytes.  */
KP_HIDDEN void kp_cache_lent (size_t *blocks, size_t *bytes);
/* A cached dedicated chunk of exactly UNITS units, kind DEDICATED
   again, or NULL.  */
KP_HIDDEN kp_chunk_t *kp_cache_take_chunk (unsigned units);
/* Free P, the block of dedicated chunk C, the long way.  */
KP_HIDDEN void kp_cache_free_dedicated (kp_chunk_t *c, void *p);
/* The generation of the large cache's cap (cache.c).  */
extern _Atomic (unsigned) kp_cache_gen KP_HIDDEN;
/* A cached mapping of MAP_SIZE to twice MAP_SIZE bytes, or a bigger
   one cut down to MAP_SIZE (its size in *GOT), or NULL.  */
KP_HIDDEN void *kp_cache_take_mapping (size_t map_size, size_t *got);
/* Keep the mapping of entry E, which large.c has marked cached, if
   the cap allows; else unmap it.  */
KP_HIDDEN void kp_cache_free_mapping (uintptr_t e);
KP_HIDDEN void *kp_cache_take_mapping_smaller (size_t map_size, size_t *got);

/* The first fit in H's first level for a mapping of NEED bytes, out
   of line for the short path (kp_malloc_mapping); KP_L1_SLOTS when
   none fits.  */
KP_HIDDEN unsigned kp_l1_fit_call (kp_heap_t *h, size_t need);

/* ---- Large allocation (largealloc.c) ----------------------------------- */

/* malloc of N bytes above the small classes, up to 4 MiB (dedicated)
   or above (mapping): from the thread's own cache when it has a fit,
   else the long way, kp_malloc_large.  */
KP_HIDDEN void *kp_malloc_dedicated (size_t n);
KP_HIDDEN void *kp_malloc_mapping (size_t n);
/* N bytes above the small classes aligned to ALIGN (0 or a power of
   two), from the cache or new; NULL and ENOMEM when there is none.  */
KP_HIDDEN void *kp_malloc_large (size_t n, size_t align);

/* Free P, whose region's radix entry KIND is LARGE or LARGE_PREV:
   into the cache when large.c says it may go there and the cap allows,
   else unmapped.  */
KP_INLINE void
kp_large_free (void *p, int kind)
{
  uintptr_t e = kp_mapping_free (p, kind);
  if (e != 0)
    kp_cache_free_mapping (e);
}

/* ---- Allocation entry points (alloc.c) --------------------------------- */

KP_HIDDEN void kp_free_cold (void *p);
/* The usable size of P, in a pool region: its class's size, a
   dedicated chunk's bytes, or 0 for a pointer into a dedicated chunk
   past its start or into units no chunk in use holds.  */
KP_INLINE size_t
kp_pool_usable_size (const void *p)
{
  kp_chunk_t *c = kp_chunk_of (p);
  switch (atomic_load_explicit (&c->kind, memory_order_relaxed))
    {
    case KP_KIND_SMALL:
      return atomic_load_explicit (&c->block_size, memory_order_relaxed);
    case KP_KIND_DEDICATED:
      return p == kp_chunk_data (c)
             ? atomic_load_explicit (&c->block_size, memory_order_relaxed)
             : 0;
    default:
      return 0;
    }
}
/* kp_free_remote for a thread that has no heap yet (alloc.c).  */
KP_HIDDEN void kp_free_remote_first (void *p, kp_chunk_t *c);
KP_HIDDEN bool kp_owns (const void *p);
KP_HIDDEN size_t kp_usable_size (const void *p);
/* free_sized and free_aligned_sized (ALIGN 0 for the former), CALL
   naming the caller in misuse reports (alloc.c).  */
KP_HIDDEN void kp_free_sized (const char *call, void *p, size_t align,
                              size_t size);
KP_HIDDEN void *kp_memalign (size_t align, size_t n);
KP_HIDDEN void *kp_realloc (void *p, size_t n);
KP_HIDDEN void *kp_calloc (size_t n, size_t m);


/* Hand out B, the head of the free list of C, a chunk this thread
   owns.  Hardened, B must carry a free tag: a block that is on the
   list twice (an owner's double free) lost it when it was handed out
   the first time, so it is caught here, before its second owner gets
   it.  The tag shares B's cache line with the link.
   The new head's line is fetched now, for the next malloc of the
   class, whose first load is its link: a block that another thread
   freed, or that was freed long ago, is rarely in this core's cache
   (a prefetch never faults: a NULL link is harmless).  */
KP_INLINE void *
kp_chunk_pop (kp_chunk_t *c, kp_block_t *b)
{
  kp_block_t *next = kp_block_next (b);
  if (KP_HARDEN
      && kp_unlikely (!kp_block_marked_free (b)
                      || (kp_link_suspect (b, next) && next != NULL)))
    return kp_malloc_pop_bad (c, b);
  c->free = next;
  __builtin_prefetch (next);
  c->used++;
  c->pops++;
  kp_block_mark_live (b);
  return b;
}

/* The pop of a block of class CLS for a request of N bytes: a list pop
   from the thread's active chunk, else kp_malloc_refill.  */
KP_INLINE void *
kp_malloc_class (unsigned cls, size_t n)
{
  kp_chunk_t *c = kp_tc.active[cls];
  kp_block_t *b = c->free;
  if (kp_likely (b != NULL))
    return kp_chunk_pop (c, b);
  return kp_malloc_refill (n);
}

/* The head of the thread's list of kept blocks of N's shared class,
   else the refill (whose kp_malloc_refill_chunk goes to
   kp_shared_malloc, which looks at the list again: a block written to
   while it waited there is reported there).  A sentinel heap's lists
   are all empty.  */
_Static_assert (KP_OWNED_MAX == KP_LUT_MAX,
                "kp_malloc_shared takes the class from kp_mid_lut");
KP_INLINE void *
kp_malloc_shared (size_t n)
{
  /* N is above KP_OWNED_MAX, which is KP_LUT_MAX: a mid class.  */
  unsigned cls = kp_mid_class (n);
  unsigned i = cls - KP_SHARED_FIRST;
  kp_slist_t *l = &kp_tc.heap->shared[i];
  kp_block_t *b = l->head;
  if (kp_likely (b != NULL))
    {
      kp_block_t *next = kp_block_next (b);
      /* The next block in B's region (the usual case, one test), or
         the end of the list or in another of the pool's regions.  */
      if (kp_likely (!KP_HARDEN
                     || (kp_block_marked_free (b)
                         && (!kp_link_suspect (b, next)
                             || kp_shared_link_ok (next)))))
        {
          /* TAKES is also the totals of the statistics
             (kp_shared_taken).  */
          l->takes++;
          l->room++;
          l->head = next;
          kp_block_mark_live (b);
          return b;
        }
    }
  return kp_malloc_refill (n);
}

/* malloc without the heap profile: the size's class, or the large
   tiers.  */
KP_INLINE void *
kp_malloc_unsampled (size_t n)
{
  if (kp_likely (n <= KP_OWNED_MAX))
    return kp_malloc_class (kp_class_lut[(n + 15) >> 4], n);
  if (n <= KP_SMALL_MAX)
    return kp_malloc_shared (n);
  return n <= KP_DEDICATED_MAX ? kp_malloc_dedicated (n)
                               : kp_malloc_mapping (n);
}

/* malloc of N bytes that took the sampling countdown below zero (see
   kp_sample_state): a sampled block, or the pool's (alloc.c; out of
   line, so that malloc makes no frame for it).  */
KP_HIDDEN void *kp_malloc_sample (size_t n);

/* malloc's fast path: the sampling countdown (a subtraction from a
   thread-local and a branch on its borrow), one table lookup, one TLS
   load, a list pop.  */
KP_INLINE void *
kp_malloc (size_t n)
{
  /* The sign of the count, not a borrow: x86 then subtracts from the
     thread-local in place and branches on the sign, two instructions.
     A gap is below 2^62, KP_SAMPLE_NEVER 2^63 - 1.  */
  kp_tc.prof_left -= n;
  if (kp_unlikely ((int64_t) kp_tc.prof_left < 0))
    return kp_malloc_sample (n);
  return kp_malloc_unsampled (n);
}

/* Push B on the free list of C, a chunk this thread owns, unchecked.  */
KP_INLINE void
kp_free_push (kp_chunk_t *c, kp_block_t *b)
{
  kp_block_link (b, c->free);
  kp_block_mark_free (b);
  /* The link before the head (a fork from a signal handler sees a
     whole list); no instruction.  */
  atomic_signal_fence (memory_order_release);
  c->free = b;
  /* A full chunk becomes the active one (kp_chunk_unfull); an empty
     chunk leaves, unless it is the active one (KP_USED_ACTIVE keeps
     its count above 0): a malloc/free loop must not call out on every
     free.  */
  if (kp_unlikely (c->full))
    kp_chunk_unfull (c);
  else if (kp_unlikely (--c->used == 0))
    kp_chunk_retire (c);
}

/* Free P, at offset OFF into C, a chunk this thread owns.  Hardened,
   two tests on C's first cache line tell the common case from those
   that need a look (kp_free_owned_check): P is not the start of a
   block, or the decay gave pages of C back, or KAME_POOL_ON_MISUSE is
   report (divmagic is 0 then: every free is checked); or P is the head
   of C's free list.  The fast path does not read P's tag: in a large
   live set P's line is cold, and a load miss would stall the free
   where the stores to P wait in the store buffer.  A double free that
   gets through is caught later, before the block could have two
   owners: by the pop (kp_chunk_pop), by the collection of remote frees
   (kp_chunk_collect), or by the count before C is released
   (kp_chunk_release).  */
KP_INLINE void
kp_free_owned (kp_chunk_t *c, void *p, uintptr_t off)
{
  kp_block_t *b = p;
#if KP_HARDEN
  uint64_t m = c->divmagic;
  if (kp_unlikely (off * m >= m) || kp_unlikely (b == c->free))
    {
      kp_free_owned_check (c, b, off);
      return;
    }
#else
  (void) off;
#endif
  kp_free_push (c, b);
}

/* Free P, the block of dedicated chunk C, for the thread whose heap is
   H (kp_tc.heap, live or not): after the newest entry of H's first
   level of the large cache when its budget has room and the cap has
   not changed since (cache.c; a sentinel's budget is 0), else the long
   way, kp_cache_free_dedicated.  */
KP_INLINE void
kp_cache_free_dedicated_fast (kp_chunk_t *c, void *p, kp_heap_t *h)
{
  unsigned units = atomic_load_explicit (&c->units, memory_order_relaxed);
  size_t bytes = (size_t) units << KP_UNIT_SHIFT;
  size_t n = h->cache.l1_top;
  unsigned gen = atomic_load_explicit (&kp_cache_gen, memory_order_relaxed);
  if (kp_likely (bytes <= h->cache.l1_room) && kp_likely (n < KP_L1_SLOTS)
      && kp_likely (h->cache.l1_gen == gen))
    {
      atomic_store_explicit (&c->kind, KP_KIND_CACHED, memory_order_relaxed);
      h->cache.l1_top = n + 1;
      h->cache.l1_room -= bytes;
      h->cache.free_streak += bytes;
      atomic_store_explicit (&h->cache.l1[n],
                             (uintptr_t) p | (uintptr_t) units << 1,
                             memory_order_relaxed);
      return;
    }
  kp_cache_free_dedicated (c, p);
}

/* The slot of H's batch that chunk C uses: a descriptor's address
   over its 256 bytes is its unit's index, so neighbouring chunks get
   different slots; the region's number spreads the regions.  */
KP_INLINE kp_rbatch_t *
kp_rbatch_slot (kp_heap_t *h, const kp_chunk_t *c)
{
  uintptr_t a = (uintptr_t) c;
  return &h->rbatch[((a / sizeof *c) ^ (a >> KP_REGION_SHIFT))
                    & (KP_RBATCH_SLOTS - 1)];
}

/* Free P, a block of chunk C, which the calling thread, whose heap is
   H, does not own: into the slot of the thread's batch that holds
   blocks of C, with plain stores, when there is one.  Its blocks keep
   C claimed and SMALL (they count in its used), so the slot's copies
   of C's data address and block size are C's.  Otherwise the long
   way: kp_free_remote_slow, or kp_free_remote_first for a thread that
   has no heap yet.  Inline at the end of kp_free_pool, which has sent
   the blocks of dedicated chunks and of the shared classes elsewhere.  */
KP_INLINE void
kp_free_remote (void *p, kp_chunk_t *c, kp_heap_t *h)
{
  kp_rbatch_t *s = kp_rbatch_slot (h, c);
  /* The sentinel heaps' slots are all empty.  */
  if (kp_likely (s->chunk == c))
    {
      kp_block_t *b = p;
      uintptr_t off = (uintptr_t) p - (uintptr_t) s->data;
      if (kp_unlikely (off * s->divmagic >= s->divmagic))
        {
          kp_misuse ("free", "invalid pointer (not the start of a block):",
                     p);
          return;
        }
      if (kp_unlikely (kp_block_marked_free (b)))
        {
          kp_misuse ("free", "double free of", p);
          return;
        }
      kp_block_link (b, s->head);
      kp_block_mark_remote (b);
      s->head = b;
      /* The flush counts the slot's blocks in remote_out; till then
         the statistics count them in the slot.  */
      uint32_t n = atomic_load_explicit (&s->count, memory_order_relaxed) + 1;
      atomic_store_explicit (&s->count, n, memory_order_relaxed);
      if (kp_unlikely (n >= s->limit))
        kp_rbatch_flush (h, s);
      return;
    }
  /* kp_free_pool sent the blocks of the shared classes to
     kp_shared_free: C is never a shared chunk here.  */
  KP_ASSERT (atomic_load_explicit (&c->owner, memory_order_relaxed)
             != &kp_heap_shared);
  if (kp_unlikely (h == &kp_heap_none))
    kp_free_remote_first (p, c);
  else
    kp_free_remote_slow (p, c, h);
}

/* Free P, a block in a pool region: a plain push when this thread owns
   its chunk, the cache for a dedicated chunk, a remote free otherwise.  */
KP_INLINE void
kp_free_pool (void *p)
{
  /* Try the descriptor of P's own unit first: its owner is this heap
     only if that unit starts a chunk this thread owns (a continuation
     unit's descriptor and a released one have no owner, and only the
     owner writes its own heap there), which is always so for the
     one-unit chunks of the classes up to 8 KiB.  That saves the load
     of the back-offset from the free path's chain of dependent loads.
     Any other owner there is another thread's, and P is in the first
     unit of that thread's chunk: straight to the batch.  */
  kp_region_t *r = kp_region_of (p);
  /* The index of P's unit, scaled by the descriptor's 256 bytes.  */
  uintptr_t u256 = ((uintptr_t) p >> (KP_UNIT_SHIFT - 8))
                   & ((uintptr_t) (KP_UNITS - 1) << 8);
  kp_chunk_t *c = (kp_chunk_t *) ((char *) r->desc + u256);
  kp_heap_t *h = kp_tc.heap;
  kp_heap_t *o = atomic_load_explicit (&c->owner, memory_order_relaxed);
  if (kp_likely (o == h))
    {
      kp_free_owned (c, p, (uintptr_t) p & (KP_UNIT_SIZE - 1));
      return;
    }
  /* A block in the first unit of a chunk of the shared classes.  */
  if (o == &kp_heap_shared)
    {
      kp_shared_free (p, c, h, (uintptr_t) p & (KP_UNIT_SIZE - 1));
      return;
    }
  if (o == NULL)
    {
      /* A dedicated chunk's block starts its first unit, whose
         descriptor alone has the kind DEDICATED (a continuation
         unit's is NONE), and it has no owner.  */
      if (((uintptr_t) p & (KP_UNIT_SIZE - 1)) == 0
          && atomic_load_explicit (&c->kind, memory_order_relaxed)
             == KP_KIND_DEDICATED)
        {
          kp_cache_free_dedicated_fast (c, p, h);
          return;
        }
      /* P's unit continues a chunk (of a class above 8 KiB): the
         owner's free when that chunk is this thread's, the shared
         classes' free when it is theirs.  C is P's chunk from here
         on.  */
      unsigned back = atomic_load_explicit (&r->back[u256 >> 8],
                                            memory_order_relaxed);
      if (back != 0)
        {
          c -= back;
          uintptr_t off = ((uintptr_t) p & (KP_UNIT_SIZE - 1))
                          + ((uintptr_t) back << KP_UNIT_SHIFT);
          o = atomic_load_explicit (&c->owner, memory_order_relaxed);
          if (o == h)
            {
              kp_free_owned (c, p, off);
              return;
            }
          if (o == &kp_heap_shared)
            {
              kp_shared_free (p, c, h, off);
              return;
            }
        }
    }
  /* Another thread's block, or an abandoned chunk's, or a bad
     pointer.  A thread with no heap is never a chunk's owner, and its
     batch is empty.  */
  kp_free_remote (p, c, h);
}

/* free's fast path: one load of the radix map tells a pool block from
   everything else (NULL, large blocks, foreign pointers), which goes to
   kp_free_cold.  */
KP_INLINE void
kp_free (void *p)
{
  uintptr_t i = (uintptr_t) p >> KP_REGION_SHIFT;
  if (kp_likely (i < KP_RADIX_ENTRIES
                 && atomic_load_explicit (&kp_radix[i], memory_order_relaxed)
                    == KP_RADIX_POOL))
    kp_free_pool (p);
  else
    kp_free_cold (p);
}

#endif /* KP_INTERNAL_H */
