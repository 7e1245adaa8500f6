/* prof.c -- the heap profile: which call sites hold the heap, sampled
   so that it can stay on in production, written in the heap-profile
   text format of gperftools, which google-pprof and Go's pprof read.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   Sampling.  Each thread counts down the bytes it allocates
   (kp_tc.prof_left); the malloc that takes the count below zero is
   sampled, and a new gap is drawn from the exponential distribution
   of mean KAME_POOL_PROF_SAMPLE.  The gaps are memoryless, so a block
   of S bytes is sampled with probability 1 - exp (-S / RATE) whatever
   came before it, and a sample stands for 1 / (1 - exp (-S / RATE))
   blocks: the profile holds these weighted counts, an unbiased
   estimate for every size.  The countdown is malloc's whether the
   profile is on or not (kp_sample_state, kp_internal.h): a profiled
   process runs the same fast path as any other.

   Sampled blocks.  A sampled block has a run of pages of its own, in
   regions whose radix entry is KP_RADIX_PROF, with a header in the 64
   bytes before the block.  free's fast path sends every pointer whose
   region is not a pool region to kp_free_cold, which finds these by
   the radix entry: an unsampled free pays nothing.  The runs come from
   the current region's bump pointer, or from free lists of runs of
   the same length, whose pages stay resident up to KP_PROF_KEEP_PAGES
   in all (beyond, a freed run's pages past its header go back to the
   kernel); a run of more than KP_PROF_REGION_RUN pages has a mapping
   of its own, unmapped at its free.

   Stacks.  libunwind's unw_backtrace (when configure finds libunwind,
   --with-libunwind), else libgcc's _Unwind_Backtrace, walks the
   caller's stack through the .eh_frame tables, so it works in programs
   built without frame pointers (doc/kamepool-design.md says why these
   unwinders, and what each costs); guarded sampling's walks go a frame
   at a time with unw_step, which keeps no cache per thread.  Either
   may call malloc on its first use; kp_tc.prof_busy makes such calls,
   and any other malloc made while the thread is in here, unsampled.
   The frames of this library (and of its caller's malloc) are dropped
   from the top.  Identical stacks share one record: an open-addressing
   table of indices into an array of records, both mapped at start-up
   from the OS (never from the heap it profiles), bounded by
   KP_PROF_STACKS; when the table is 7/8 full, a new stack is recorded
   by its innermost frame only (counted in kp_prof_short), and a
   sample that finds no room at all is not taken (counted in
   kp_prof_dropped).

   Locking.  Everything here but the countdown is under kp_prof_lock:
   the stack records and their counts, the runs, the headers of the
   sampled blocks.  Sampled mallocs and frees are rare (one per
   RATE bytes), so one mutex costs nothing that matters, and it makes
   the dump a consistent snapshot.  The unwinding happens before the
   lock is taken.  Before a fork the forking thread takes the lock
   (kp_prof_atfork_prepare), so the child inherits a consistent table
   and goes on from the parent's state; unless the fork comes from a
   signal handler that interrupted this thread inside the lock, which
   would wait for itself: the lock is then left alone, and the
   interrupted call finishes in both processes, while a malloc of that
   handler, or of the child, takes no sample.  The lock is a
   kp_sample_lock_t, as guarded sampling's is, whose word names its
   holder (below): a mark beside a mutex, set after the mutex is taken
   and cleared before it is given back, would leave two windows in
   which a handler would not know, and a fork from one would wait for
   itself.  */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#if KP_HAVE_LIBUNWIND
# define UNW_LOCAL_ONLY 1
# include <libunwind.h>
#else
# include <unwind.h>
#endif

#include "kp_internal.h"

_Atomic (unsigned) kp_sample_state;

/* Frames kept per stack, and the records of the stack table.  */
#define KP_PROF_DEPTH 64
#define KP_PROF_STACKS 16384
#define KP_PROF_SLOTS (KP_PROF_STACKS * 2)      /* a power of two */
/* The header of a sampled block, before it.  */
#define KP_PROF_HEADER 64
/* Runs longer than this many pages get a mapping of their own.  */
#define KP_PROF_REGION_RUN (KP_REGION_SIZE / KP_PAGE / 4)
/* Free lists of runs: one per length up to KP_PROF_LISTS pages, and
   one for the longer runs.  */
#define KP_PROF_LISTS 64
/* The pages past their headers that the free runs may keep resident,
   all lists together; a run freed beyond it gives them back.  */
#define KP_PROF_KEEP_PAGES 256

typedef struct kp_prof_stack
{
  uint64_t hash;
  uint32_t depth;
  /* The weighted counts: blocks and bytes live, blocks and bytes ever
     allocated.  */
  double live_n, live_b, alloc_n, alloc_b;
  uintptr_t pc[KP_PROF_DEPTH];
} kp_prof_stack_t;

typedef struct kp_prof_block
{
  uintptr_t magic;              /* kp_prof_magic (B) while live */
  size_t size;                  /* asked for */
  size_t pages;                 /* of its run */
  kp_prof_stack_t *stack;
  double weight;                /* blocks this sample stands for */
  struct kp_prof_block *next;   /* on a free list */
  bool own_mapping;
} kp_prof_block_t;
_Static_assert (sizeof (kp_prof_block_t) <= KP_PROF_HEADER,
                "the header fits before the block");

/* All of the following under kp_prof_lock, except kp_prof_rate, the
   table's addresses and the text range, written by kp_prof_init before
   its release store of kp_sample_state, and read only after an acquire
   load of it (kp_malloc_sample) or the lock.  */
static kp_sample_lock_t kp_prof_lock = KP_SAMPLE_LOCK_INIT;
static double kp_prof_rate;
static uintptr_t kp_prof_text_lo, kp_prof_text_hi;
static uint32_t *kp_prof_index;          /* KP_PROF_SLOTS, 0: empty */
static kp_prof_stack_t *kp_prof_stacks;  /* record I + 1 of the index */
static uint32_t kp_prof_nstacks;
static size_t kp_prof_dropped;          /* samples not recorded */
static size_t kp_prof_short;            /* recorded by innermost frame */
static char *kp_prof_bump, *kp_prof_end;
/* The free runs by length: [0] those whose pages are resident, taken
   first, [1] those that gave them back.  */
static kp_prof_block_t *kp_prof_runs[2][KP_PROF_LISTS + 1];
static size_t kp_prof_kept;     /* pages past the headers in [0] */
/* The sampled blocks handed out ever and live now, with their usable
   bytes: written under the lock, read relaxed by the statistics
   (kp_prof_blocks), which take no lock.  */
static _Atomic (size_t) kp_prof_out_n, kp_prof_out_b;
static _Atomic (size_t) kp_prof_live_n, kp_prof_live_b;

static void
kp_prof_count (_Atomic (size_t) *c, size_t d)
{
  atomic_store_explicit (c, atomic_load_explicit (c, memory_order_relaxed)
                            + d, memory_order_relaxed);
}

void
kp_prof_blocks (size_t *allocs, size_t *alloc_bytes, size_t *live,
                size_t *live_bytes)
{
  *allocs = atomic_load_explicit (&kp_prof_out_n, memory_order_relaxed);
  *alloc_bytes = atomic_load_explicit (&kp_prof_out_b, memory_order_relaxed);
  *live = atomic_load_explicit (&kp_prof_live_n, memory_order_relaxed);
  *live_bytes = atomic_load_explicit (&kp_prof_live_b, memory_order_relaxed);
}

static uintptr_t
kp_prof_magic (const kp_prof_block_t *b)
{
  return ((uintptr_t) b ^ kp_secret) | 1;
}

/* ---- Start-up ---------------------------------------------------------- */

/* The executable segment of the object that holds this code, unless
   that object is the program itself (a static link): its frames are
   then the program's, and none is dropped.  */
static int
kp_prof_find_text (struct dl_phdr_info *info, size_t size, void *arg)
{
  (void) size;
  uintptr_t self = (uintptr_t) arg;
  for (int i = 0; i < info->dlpi_phnum; i++)
    {
      const ElfW (Phdr) *ph = &info->dlpi_phdr[i];
      if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
        continue;
      uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
      uintptr_t hi = lo + ph->p_memsz;
      if (self >= lo && self < hi)
        {
          if (info->dlpi_name != NULL && info->dlpi_name[0] != '\0')
            {
              kp_prof_text_lo = lo;
              kp_prof_text_hi = hi;
            }
          return 1;
        }
    }
  return 0;
}

/* The text range of this library, which kp_prof_unwind drops from the
   stacks it returns: by kp_prof_init, and by guard.c's initialisation
   when guarded sampling is on (both in kp_process_init, before any
   thread can unwind).  */
void
kp_prof_unwind_init (void)
{
  if (kp_prof_text_lo == 0)
    dl_iterate_phdr (kp_prof_find_text, (void *) (uintptr_t) kp_prof_init);
}

void
kp_prof_init (void)
{
  if (kp_option_prof_prefix ()[0] == '\0')
    return;
  size_t index_bytes = kp_round_up (KP_PROF_SLOTS * sizeof (uint32_t),
                                    KP_PAGE);
  size_t stack_bytes = kp_round_up (KP_PROF_STACKS * sizeof (kp_prof_stack_t),
                                    KP_PAGE);
  char *m = kp_os_map_aligned (index_bytes + stack_bytes, KP_PAGE);
  if (m == NULL)
    {
      kp_os_write_stderr ("kamepool: KAME_POOL_PROF: no memory for the "
                          "stack table; profiling is off\n");
      return;
    }
  kp_prof_index = (uint32_t *) m;
  kp_prof_stacks = (kp_prof_stack_t *) (m + index_bytes);
  kp_prof_rate = kp_setting (&kp_prof_sample_bytes);
  kp_prof_unwind_init ();
  /* The unwinder's first walk sets it up, which may allocate: now,
     while the initialisation serves such calls from the C library,
     rather than inside the first sampled malloc.  */
  uintptr_t pc[4];
  kp_tc.prof_busy = true;
  kp_prof_unwind (pc, 4);
  kp_tc.prof_busy = false;
  atomic_fetch_or_explicit (&kp_sample_state, KP_SAMPLE_PROF,
                            memory_order_release);
}

void
kp_sample_decide (void)
{
  atomic_fetch_or_explicit (&kp_sample_state, KP_SAMPLE_DECIDED,
                            memory_order_release);
}

/* ---- The countdown --------------------------------------------------- */

/* A gap of the exponential distribution of mean kp_prof_rate, in bytes
   (at least 1).  */
static uint64_t
kp_prof_gap (kp_tcache_t *tc)
{
  return kp_exp_gap (&tc->prof_rng, kp_prof_rate);
}

/* 1 - exp (-X) for X >= 0, within a few parts in 10^14, without libm
   (kp_neg_log says why): the series up to X^14 below 1/2, where it
   has no cancellation; above, exp (-X) = 2^-K exp (-R) with R = X - K
   ln 2 in [0, ln 2), and exp (-R) from its series to R^16.  */
static double
kp_one_minus_exp_neg (double x)
{
  if (x < 0.5)
    {
      double sum = 0.0, term = -1.0;
      for (int k = 1; k <= 14; k++)
        {
          term *= -x / k;
          sum += term;
        }
      return sum;
    }
  if (x > 700.0)
    return 1.0;
  int k = (int) (x / 0.69314718055994530942);
  double r = x - k * 0.69314718055994530942, e = 1.0, term = 1.0;
  for (int i = 1; i <= 16; i++)
    {
      term *= -r / i;
      e += term;
    }
  /* 2^-K, K at most 1010: a normal double, built from its bits.  */
  uint64_t bits = (uint64_t) (1023 - k) << 52;
  double scale;
  __builtin_memcpy (&scale, &bits, sizeof scale);
  return 1.0 - e * scale;
}

/* ---- Stacks ------------------------------------------------------------ */

#if !KP_HAVE_LIBUNWIND
typedef struct kp_prof_walk
{
  uintptr_t *pc;
  size_t n, max;
} kp_prof_walk_t;

static _Unwind_Reason_Code
kp_prof_frame (struct _Unwind_Context *ctx, void *arg)
{
  kp_prof_walk_t *w = arg;
  uintptr_t ip = _Unwind_GetIP (ctx);
  if (ip == 0)
    return _URC_END_OF_STACK;
  w->pc[w->n++] = ip;
  return w->n == w->max ? _URC_END_OF_STACK : _URC_NO_REASON;
}
#endif

/* Drop the leading frames of PC[0..N) that are in this library,
   moving the rest to the front; the number left.  A stack whose every
   frame is in it is kept whole.  */
static size_t
kp_prof_drop_own (uintptr_t *pc, size_t n)
{
  size_t skip = 0;
  while (skip < n && pc[skip] >= kp_prof_text_lo
         && pc[skip] < kp_prof_text_hi)
    skip++;
  if (skip == n)
    skip = 0;
  memmove (pc, pc + skip, (n - skip) * sizeof *pc);
  return n - skip;
}

/* The return addresses of the calling thread's stack, innermost first,
   without the frames in this library; their number.  The heap
   profile's: libunwind's fast trace, with its cache of 256 KiB per
   thread.  */
size_t
kp_prof_unwind (uintptr_t *pc, size_t max)
{
#if KP_HAVE_LIBUNWIND
  int got = unw_backtrace ((void **) pc, (int) max);
  size_t n = got > 0 ? (size_t) got : 0;
#else
  kp_prof_walk_t w = { pc, 0, max };
  _Unwind_Backtrace (kp_prof_frame, &w);
  size_t n = w.n;
#endif
  return kp_prof_drop_own (pc, n);
}

/* The same stack, walked a frame at a time through the DWARF tables
   (unw_step) with no per-thread state: guarded sampling's (guard.c),
   whose samples are too rare for the fast trace's cache to pay back
   its 256 KiB in every thread that samples.  */
size_t
kp_prof_unwind_stepwise (uintptr_t *pc, size_t max)
{
#if KP_HAVE_LIBUNWIND
  unw_context_t uc;
  unw_cursor_t cursor;
  size_t n = 0;
  if (unw_getcontext (&uc) == 0 && unw_init_local (&cursor, &uc) == 0)
    while (n < max && unw_step (&cursor) > 0)
      {
        unw_word_t ip;
        if (unw_get_reg (&cursor, UNW_REG_IP, &ip) < 0 || ip == 0)
          break;
        pc[n++] = (uintptr_t) ip;
      }
  return kp_prof_drop_own (pc, n);
#else
  return kp_prof_unwind (pc, max);
#endif
}

static uint64_t
kp_prof_hash (const uintptr_t *pc, size_t n)
{
  uint64_t h = 0xcbf29ce484222325ULL ^ n;
  for (size_t i = 0; i < n; i++)
    h = (h ^ pc[i]) * 0x100000001b3ULL;
  return h ^ (h >> 29);
}

/* The record of the stack PC[0..N), made if it is new and INSERT says
   so; NULL when there is none and none is made (or the table has no
   room).  Under the lock.  */
static kp_prof_stack_t *
kp_prof_stack_find (const uintptr_t *pc, size_t n, bool insert)
{
  uint64_t h = kp_prof_hash (pc, n);
  size_t i = h & (KP_PROF_SLOTS - 1);
  for (;;)
    {
      uint32_t k = kp_prof_index[i];
      if (k == 0)
        break;
      kp_prof_stack_t *s = &kp_prof_stacks[k - 1];
      if (s->hash == h && s->depth == n
          && memcmp (s->pc, pc, n * sizeof *pc) == 0)
        return s;
      i = (i + 1) & (KP_PROF_SLOTS - 1);
    }
  if (!insert || kp_prof_nstacks == KP_PROF_STACKS)
    return NULL;
  kp_prof_stack_t *s = &kp_prof_stacks[kp_prof_nstacks++];
  s->hash = h;
  s->depth = (uint32_t) n;
  memcpy (s->pc, pc, n * sizeof *pc);
  kp_prof_index[i] = kp_prof_nstacks;
  return s;
}

/* ---- Runs of pages for the sampled blocks ------------------------------ */

/* A run of PAGES pages, its header's fields but MAGIC set; NULL when
   the kernel refuses memory.  Under the lock.  */
static kp_prof_block_t *
kp_prof_run_take (size_t pages)
{
  size_t bytes = pages * KP_PAGE;
  kp_prof_block_t *b;
  if (pages > KP_PROF_REGION_RUN)
    {
      size_t map = kp_round_up (bytes, KP_REGION_SIZE);
      b = kp_os_map_committed (map, KP_REGION_SIZE);
      if (b == NULL)
        return NULL;
      for (size_t off = 0; off < map; off += KP_REGION_SIZE)
        kp_radix_set ((uintptr_t) b + off, KP_RADIX_PROF);
      b->pages = map / KP_PAGE;
      b->own_mapping = true;
      return b;
    }
  /* The exact length from its list; a long run from the long runs'
     list when it has one of at most twice the length (no splitting:
     the long runs are the rare large samples).  */
  size_t l = pages <= KP_PROF_LISTS ? pages : 0;
  for (int k = 0; k < 2; k++)
    for (kp_prof_block_t **pp = &kp_prof_runs[k][l]; *pp != NULL;
         pp = &(*pp)->next)
      if ((*pp)->pages >= pages && (*pp)->pages <= 2 * pages)
        {
          b = *pp;
          *pp = b->next;
          if (k == 0)
            kp_prof_kept -= b->pages - 1;
          return b;
        }
  if (kp_prof_bump == NULL || (size_t) (kp_prof_end - kp_prof_bump) < bytes)
    {
      /* The rest of the old region is given up: at most a quarter of
         a region, with no pages touched.  */
      char *r = kp_os_map_aligned (KP_REGION_SIZE, KP_REGION_SIZE);
      if (r == NULL)
        return NULL;
      kp_radix_set ((uintptr_t) r, KP_RADIX_PROF);
      kp_prof_bump = r;
      kp_prof_end = r + KP_REGION_SIZE;
    }
  b = (kp_prof_block_t *) kp_prof_bump;
  kp_prof_bump += bytes;
  b->pages = pages;
  b->own_mapping = false;
  return b;
}

/* Give B's run back.  Under the lock.  */
static void
kp_prof_run_give (kp_prof_block_t *b)
{
  b->magic = 0;
  if (b->own_mapping)
    {
      size_t map = b->pages * KP_PAGE;
      for (size_t off = 0; off < map; off += KP_REGION_SIZE)
        kp_radix_set ((uintptr_t) b + off, KP_RADIX_NONE);
      kp_os_unmap (b, map);
      return;
    }
  /* The pages past the header stay, while the free runs keep at most
     KP_PROF_KEEP_PAGES, for the next sample of this length: a program
     that allocates and frees blocks of one size then makes no system
     call and takes no fault for its samples.  Past that they go back
     to the kernel: a freed run may wait long for a sample of its
     length.  */
  size_t rest = b->pages - 1;
  int k = rest > KP_PROF_KEEP_PAGES - kp_prof_kept;
  if (k == 0)
    kp_prof_kept += rest;
  else
    kp_os_discard ((char *) b + KP_PAGE, rest * KP_PAGE);
  size_t l = b->pages <= KP_PROF_LISTS ? b->pages : 0;
  b->next = kp_prof_runs[k][l];
  kp_prof_runs[k][l] = b;
}

/* ---- malloc and free ----------------------------------------------------- */

void *
kp_prof_sample (size_t n)
{
  kp_tcache_t *tc = &kp_tc;
  if (tc->prof_busy || kp_sample_lock_mine (&kp_prof_lock))
    {
      /* A malloc of the unwinder's, or of a signal handler that
         interrupted this thread inside the lock: the next malloc comes
         back.  */
      tc->prof_left = 0;
      return NULL;
    }
  if (tc->prof_rng == 0)
    {
      /* The thread's first profiled malloc: seed its numbers (any
         value but 0 does) and draw its first gap.  */
      uint64_t seed = (uintptr_t) tc ^ ((uint64_t) getpid () << 32)
                      ^ ((uint64_t) kp_clock_ms () << 16) ^ n;
      tc->prof_rng = seed != 0 ? seed : 1;
      uint64_t left = kp_prof_gap (tc);
      if (n <= left)
        {
          tc->prof_left = left - n;
          return NULL;
        }
    }
  tc->prof_left = kp_prof_gap (tc);
  if (n == 0 || n > PTRDIFF_MAX - KP_PROF_HEADER - KP_REGION_SIZE)
    return NULL;
  /* 1 / (1 - exp (-n / rate)), without the cancellation of small
     ratios.  */
  double weight = 1.0 / kp_one_minus_exp_neg ((double) n / kp_prof_rate);
  tc->prof_busy = true;
  uintptr_t pc[KP_PROF_DEPTH];
  size_t depth = kp_prof_unwind (pc, KP_PROF_DEPTH);
  void *p = NULL;
  kp_sample_lock (&kp_prof_lock);
  kp_prof_stack_t *s = NULL;
  if (depth > 0)
    {
      /* Past 7/8 of the records, a new stack is kept by its innermost
         frame, so that the last records go to the sites themselves.  */
      s = kp_prof_stack_find (pc, depth,
                              kp_prof_nstacks < KP_PROF_STACKS / 8 * 7);
      if (s == NULL)
        {
          s = kp_prof_stack_find (pc, 1, true);
          kp_prof_short += s != NULL && depth > 1;
        }
    }
  kp_prof_block_t *b = NULL;
  if (s != NULL)
    b = kp_prof_run_take ((n + KP_PROF_HEADER + KP_PAGE - 1) / KP_PAGE);
  if (b != NULL)
    {
      b->magic = kp_prof_magic (b);
      b->size = n;
      b->stack = s;
      b->weight = weight;
      s->live_n += weight;
      s->live_b += weight * (double) n;
      s->alloc_n += weight;
      s->alloc_b += weight * (double) n;
      p = (char *) b + KP_PROF_HEADER;
      size_t usable = kp_round_up (n, KP_MIN_ALIGN);
      kp_prof_count (&kp_prof_out_n, 1);
      kp_prof_count (&kp_prof_out_b, usable);
      kp_prof_count (&kp_prof_live_n, 1);
      kp_prof_count (&kp_prof_live_b, usable);
    }
  else
    kp_prof_dropped++;
  kp_sample_unlock (&kp_prof_lock);
  tc->prof_busy = false;
  return p;
}

/* The header of P, when P starts a live sampled block; else NULL.  P
   is in a region of kind KP_RADIX_PROF, so its page is mapped.  */
static kp_prof_block_t *
kp_prof_block_of (const void *p)
{
  if (((uintptr_t) p & (KP_PAGE - 1)) != KP_PROF_HEADER)
    return NULL;
  kp_prof_block_t *b = (kp_prof_block_t *) ((char *) p - KP_PROF_HEADER);
  return b->magic == kp_prof_magic (b) ? b : NULL;
}

void
kp_prof_free (void *p)
{
  kp_sample_lock (&kp_prof_lock);
  kp_prof_block_t *b = kp_prof_block_of (p);
  if (b == NULL)
    {
      kp_sample_unlock (&kp_prof_lock);
      kp_misuse ("free", "invalid pointer (not an allocated block):", p);
      return;
    }
  kp_prof_stack_t *s = b->stack;
  s->live_n -= b->weight;
  s->live_b -= b->weight * (double) b->size;
  kp_prof_count (&kp_prof_live_n, (size_t) -1);
  kp_prof_count (&kp_prof_live_b, 0 - kp_round_up (b->size, KP_MIN_ALIGN));
  kp_prof_run_give (b);
  kp_sample_unlock (&kp_prof_lock);
}

size_t
kp_prof_usable (const void *p)
{
  kp_sample_lock (&kp_prof_lock);
  kp_prof_block_t *b = kp_prof_block_of (p);
  size_t n = b != NULL ? kp_round_up (b->size, KP_MIN_ALIGN) : 0;
  kp_sample_unlock (&kp_prof_lock);
  return n;
}

/* ---- The profile --------------------------------------------------------- */

/* Output to a file descriptor through a buffer, without malloc; the
   first write error is kept.  */
typedef struct kp_prof_out
{
  int fd, err;
  size_t len;
  char buf[8192];
} kp_prof_out_t;

static void
kp_prof_flush (kp_prof_out_t *o)
{
  const char *s = o->buf;
  while (o->len > 0 && o->err == 0)
    {
      ssize_t w = write (o->fd, s, o->len);
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0)
        {
          o->err = w < 0 ? errno : EIO;
          break;
        }
      s += w;
      o->len -= (size_t) w;
    }
  o->len = 0;
}

static void
kp_prof_put (kp_prof_out_t *o, const char *s, size_t n)
{
  while (n > 0)
    {
      if (o->len == sizeof o->buf)
        kp_prof_flush (o);
      size_t k = sizeof o->buf - o->len;
      if (k > n)
        k = n;
      memcpy (o->buf + o->len, s, k);
      o->len += k;
      s += k;
      n -= k;
    }
}

static void
kp_prof_puts (kp_prof_out_t *o, const char *s)
{
  kp_prof_put (o, s, strlen (s));
}

/* V in decimal, right-aligned in WIDTH columns.  */
static void
kp_prof_num (kp_prof_out_t *o, unsigned long long v, int width)
{
  char tmp[24];
  int n = 0;
  do
    {
      tmp[sizeof tmp - 1 - n++] = (char) ('0' + v % 10);
      v /= 10;
    }
  while (v != 0);
  while (n < width && n < (int) sizeof tmp)
    tmp[sizeof tmp - 1 - n++] = ' ';
  kp_prof_put (o, tmp + sizeof tmp - n, (size_t) n);
}

static void
kp_prof_hex (kp_prof_out_t *o, uintptr_t v)
{
  char tmp[2 + 16];
  int n = 0;
  do
    {
      tmp[sizeof tmp - 1 - n++] = "0123456789abcdef"[v & 15];
      v >>= 4;
    }
  while (v != 0);
  tmp[sizeof tmp - 1 - n++] = 'x';
  tmp[sizeof tmp - 1 - n++] = '0';
  kp_prof_put (o, tmp + sizeof tmp - n, (size_t) n);
}

/* A weighted count, rounded; the floating sums of a count that went
   back to zero can come out a hair below it.  */
static unsigned long long
kp_prof_round (double v)
{
  return v < 0.5 ? 0 : (unsigned long long) (v + 0.5);
}

/* "LIVE_N: LIVE_B [ALLOC_N: ALLOC_B] @", as gperftools writes it.  */
static void
kp_prof_counts (kp_prof_out_t *o, unsigned long long c[4])
{
  kp_prof_num (o, c[0], 6);
  kp_prof_puts (o, ": ");
  kp_prof_num (o, c[1], 8);
  kp_prof_puts (o, " [");
  kp_prof_num (o, c[2], 6);
  kp_prof_puts (o, ": ");
  kp_prof_num (o, c[3], 8);
  kp_prof_puts (o, "] @");
}

static void
kp_prof_stack_counts (const kp_prof_stack_t *s, unsigned long long c[4])
{
  c[0] = kp_prof_round (s->live_n);
  c[1] = kp_prof_round (s->live_b);
  c[2] = kp_prof_round (s->alloc_n);
  c[3] = kp_prof_round (s->alloc_b);
  /* Rounded separately, bytes could be left with no block.  */
  if (c[0] == 0)
    c[1] = 0;
}

/* Write the profile to FD (under the lock): the totals line, a line per
   stack, then /proc/self/maps, which the readers need to find the
   functions of the addresses.  Returns 0 or an errno value.  */
static int
kp_prof_write (int fd, unsigned long long total[4], size_t *live_stacks)
{
  static kp_prof_out_t o;       /* too big for a destructor's frame */
  o.fd = fd;
  o.err = 0;
  o.len = 0;
  unsigned long long c[4];
  total[0] = total[1] = total[2] = total[3] = 0;
  *live_stacks = 0;
  for (uint32_t i = 0; i < kp_prof_nstacks; i++)
    {
      kp_prof_stack_counts (&kp_prof_stacks[i], c);
      for (int k = 0; k < 4; k++)
        total[k] += c[k];
      *live_stacks += c[0] != 0;
    }
  kp_prof_puts (&o, "heap profile: ");
  kp_prof_counts (&o, total);
  kp_prof_puts (&o, " heapprofile\n");
  for (uint32_t i = 0; i < kp_prof_nstacks; i++)
    {
      const kp_prof_stack_t *s = &kp_prof_stacks[i];
      kp_prof_stack_counts (s, c);
      kp_prof_counts (&o, c);
      for (uint32_t d = 0; d < s->depth; d++)
        {
          kp_prof_puts (&o, " ");
          kp_prof_hex (&o, s->pc[d]);
        }
      kp_prof_puts (&o, "\n");
    }
  kp_prof_puts (&o, "\nMAPPED_LIBRARIES:\n");
  int maps = open ("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (maps >= 0)
    {
      for (;;)
        {
          if (o.len == sizeof o.buf)
            kp_prof_flush (&o);
          ssize_t r = read (maps, o.buf + o.len, sizeof o.buf - o.len);
          if (r < 0 && errno == EINTR)
            continue;
          if (r <= 0)
            break;
          o.len += (size_t) r;
        }
      close (maps);
    }
  kp_prof_flush (&o);
  return o.err;
}

static int
kp_prof_dump_counts (const char *path, unsigned long long total[4],
                     size_t *live_stacks)
{
  int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return errno;
  kp_sample_lock (&kp_prof_lock);
  int err = kp_prof_write (fd, total, live_stacks);
  kp_sample_unlock (&kp_prof_lock);
  if (close (fd) != 0 && err == 0)
    err = errno;
  return err;
}

int
kp_prof_dump (const char *path)
{
  if (path == NULL || !kp_prof_on ())
    return EINVAL;
  int saved = errno;
  unsigned long long total[4];
  size_t live_stacks;
  int err = kp_prof_dump_counts (path, total, &live_stacks);
  errno = saved;
  return err;
}

size_t
kp_prof_table_bytes (size_t *stacks, size_t *shortened, size_t *dropped)
{
  if (!kp_prof_on ())
    {
      *stacks = *shortened = *dropped = 0;
      return 0;
    }
  kp_sample_lock (&kp_prof_lock);
  *stacks = kp_prof_nstacks;
  *shortened = kp_prof_short;
  *dropped = kp_prof_dropped;
  size_t bytes = kp_round_up (KP_PROF_SLOTS * sizeof (uint32_t), KP_PAGE)
                 + kp_round_up (kp_prof_nstacks * sizeof (kp_prof_stack_t),
                                KP_PAGE);
  kp_sample_unlock (&kp_prof_lock);
  return bytes;
}

/* At exit, PREFIX.PID.heap, whose in-use part is then what the program
   did not free, and one line on stderr that says what it holds.  The
   line goes out after the file is closed: a program that closed
   stderr may have given descriptor 2 to the profile.  */
__attribute__ ((__destructor__)) static void
kp_prof_at_exit (void)
{
  if (!kp_prof_on ())
    return;
  int saved = errno;
  char name[KP_PATH_MAX + 32];
  char lbuf[KP_PATH_MAX + 256];
  kp_line_t l = KP_LINE (name, -1);
  l.cap--;                      /* room for the NUL */
  kp_line_add (&l, kp_option_prof_prefix ());
  kp_line_add (&l, ".");
  kp_line_num (&l, (unsigned long long) getpid ());
  kp_line_add (&l, ".heap");
  name[l.len] = '\0';
  unsigned long long total[4];
  size_t live_stacks;
  int err = kp_prof_dump_counts (name, total, &live_stacks);
  kp_line_t m = KP_LINE (lbuf, -1);
  kp_line_add (&m, "kamepool: heap profile ");
  kp_line_add (&m, name);
  if (err != 0)
    {
      kp_line_add (&m, ": cannot write it (errno ");
      kp_line_num (&m, (unsigned long long) err);
      kp_line_add (&m, ")\n");
    }
  else
    {
      kp_line_add (&m, ": ");
      kp_line_num (&m, total[1]);
      kp_line_add (&m, " bytes in ");
      kp_line_num (&m, total[0]);
      kp_line_add (&m, " blocks still live, held by ");
      kp_line_num (&m, live_stacks);
      kp_line_add (&m, live_stacks == 1 ? " stack\n" : " stacks\n");
    }
  kp_line_flush (&m);
  errno = saved;
}

/* ---- The samplers' locks, and fork ------------------------------------- */

int32_t
kp_sample_tid (void)
{
  kp_tcache_t *tc = &kp_tc;
  if (tc->sample_tid == 0)
    tc->sample_tid = (int32_t) syscall (SYS_gettid);
  return tc->sample_tid;
}

static void
kp_futex (_Atomic (uint32_t) *word, int op, uint32_t val)
{
  syscall (SYS_futex, word, op, val, NULL, NULL, 0);
}

/* Take L: a CAS from 0 to the caller's id, else wait on the word,
   with the waiters' bit set, until it is 0.  A thread that took it
   after a wait keeps the bit, as others may still sleep.  */
void
kp_sample_lock (kp_sample_lock_t *l)
{
  uint32_t me = (uint32_t) kp_sample_tid ();
  uint32_t v = 0;
  while (!atomic_compare_exchange_weak_explicit (&l->word, &v, me,
                                                 memory_order_acquire,
                                                 memory_order_relaxed))
    if (v != 0)
      break;
  if (v == 0)
    return;
  for (;;)
    {
      if (v == 0)
        {
          if (atomic_compare_exchange_weak_explicit
                (&l->word, &v, me | KP_SAMPLE_LOCK_WAITERS,
                 memory_order_acquire, memory_order_relaxed))
            return;
          continue;
        }
      if (!(v & KP_SAMPLE_LOCK_WAITERS))
        {
          if (!atomic_compare_exchange_weak_explicit
                (&l->word, &v, v | KP_SAMPLE_LOCK_WAITERS,
                 memory_order_relaxed, memory_order_relaxed))
            continue;
          v |= KP_SAMPLE_LOCK_WAITERS;
        }
      int saved = errno;
      kp_futex (&l->word, FUTEX_WAIT_PRIVATE, v);
      errno = saved;
      v = atomic_load_explicit (&l->word, memory_order_relaxed);
    }
}

/* Take L if it is free, without waiting: false when another thread
   (or this one) holds it.  */
bool
kp_sample_trylock (kp_sample_lock_t *l)
{
  uint32_t v = 0;
  return atomic_compare_exchange_strong_explicit (&l->word, &v,
                                                  (uint32_t) kp_sample_tid (),
                                                  memory_order_acquire,
                                                  memory_order_relaxed);
}

void
kp_sample_unlock (kp_sample_lock_t *l)
{
  uint32_t v = atomic_exchange_explicit (&l->word, 0, memory_order_release);
  if (v & KP_SAMPLE_LOCK_WAITERS)
    {
      int saved = errno;
      kp_futex (&l->word, FUTEX_WAKE_PRIVATE, 1);
      errno = saved;
    }
}

/* Only this thread writes its own id into the word, and clears it: the
   word names this thread exactly from the instruction that took the
   lock to the one that gave it back, which is what a signal handler
   that interrupted it sees.  */
bool
kp_sample_lock_mine (kp_sample_lock_t *l)
{
  return (atomic_load_explicit (&l->word, memory_order_relaxed)
          & ~KP_SAMPLE_LOCK_WAITERS) == (uint32_t) kp_sample_tid ();
}

/* The forking thread runs the three atfork handlers: what the prepare
   handler did is in the lock, which it then holds either way.  */
void
kp_sample_lock_prepare (kp_sample_lock_t *l)
{
  if (kp_sample_lock_mine (l))
    {
      /* A fork from a signal handler that interrupted this thread
         inside the lock: the interrupted call goes on in both
         processes.  */
      l->fork_skipped = true;
      return;
    }
  kp_sample_lock (l);
}

void
kp_sample_lock_after_fork (kp_sample_lock_t *l, bool in_child)
{
  if (in_child)
    kp_tc.sample_tid = 0;       /* the child's thread has an id of its own */
  if (!l->fork_skipped)
    kp_sample_unlock (l);
  else
    {
      l->fork_skipped = false;
      /* In the child, the lock is its thread's, the only one, and no
         one sleeps on it.  */
      if (in_child)
        atomic_store_explicit (&l->word, (uint32_t) kp_sample_tid (),
                               memory_order_relaxed);
    }
}

void
kp_prof_atfork_prepare (void)
{
  kp_sample_lock_prepare (&kp_prof_lock);
}

void
kp_prof_atfork_parent (void)
{
  kp_sample_lock_after_fork (&kp_prof_lock, false);
}

void
kp_prof_atfork_child (void)
{
  kp_sample_lock_after_fork (&kp_prof_lock, true);
}
