/* guard.c -- guarded sampling: a few sampled blocks placed against an
   inaccessible page and kept inaccessible for a while after their
   free, so that a use after free, an overflow or an underflow of one
   of them faults at the instruction that makes it, and a report with
   the stacks that allocated and freed the block says what happened.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   The slot pool.  KAME_POOL_GUARD_SLOTS slots, reserved once at the
   first guarded sample in whole regions of radix kind KP_RADIX_GUARD
   (free, realloc and malloc_usable_size find them on the cold path
   that already tells the kinds apart: an unsampled free pays nothing).
   Every page of the reservation is PROT_NONE but those of live
   guarded blocks.  Slot I is KP_GUARD_MAX bytes (rounded up to pages)
   after a guard page; the guard page after it is the next slot's:

     guard | slot 0 | guard | slot 1 | guard | ... | slot N-1 | guard

   A block is placed with its end against the following guard page
   (its usable size is the request rounded up to 16 bytes, or to its
   alignment, so the first byte past it faults), except every fourth,
   which starts at the slot's first byte, against the preceding guard
   page (so that an underflow faults).  A free makes the block's pages
   PROT_NONE again (their memory stays: a madvise, and the page fault
   at the slot's next use, doubled a sample's kernel time) and puts
   the slot at the tail of the quarantine; a sample takes a slot never
   used, else the head of the quarantine (the oldest freed); with every
   slot holding a live block it is not taken.

   The slots' records (kp_guard_slot_t) are in a mapping of their own,
   out of reach of an overflow.  They are written under kp_guard_lock
   by the guarded malloc and free; kp_guard_lo, kp_guard_hi and the
   address of the records are written once, under the lock, before
   the release store of kp_guard_ready.  The fault handler reads
   kp_guard_ready with acquire, then the records without the lock (a
   thread that faults on a slot's page made the access that the
   slot's last malloc or free under the lock allowed or forbade; the
   record can only be changing if another thread is reusing that very
   slot, and then the report may mix two blocks' details, which it
   says nothing to prevent).  The counters are relaxed atomics.

   The handler.  SIGSEGV and SIGBUS, installed with the pool; the
   handlers they replace are kept and called for every fault outside
   the pool, as they were installed (SA_SIGINFO or not; SIG_DFL by
   restoring it and returning, so that the access faults again and the
   default action happens).  A program that installs its own handler
   later replaces ours: its faults in the pool are then its own to
   handle (kamepool(7)).  The handler neither allocates nor takes a
   lock: it reads the records, writes the report with write(2), names
   the frames with dladdr (which takes only the dynamic linker's
   recursive lock of its object list, never held by a thread while it
   runs code that can fault or wait), and then aborts, or with
   KAME_POOL_ON_MISUSE=report makes the page accessible, retires the
   slot (it is never used again) and returns.

   Sampling.  Guarded sampling shares malloc's countdown with the heap
   profile (KP_SAMPLE_GUARD; alloc.c's kp_malloc_sample_shared keeps
   each sampler's own count): kp_guard_sample draws the exponential
   gaps of mean KAME_POOL_GUARD_SAMPLE bytes from a random state of
   its own and takes the block.

   Stacks.  prof.c's stepwise unwinder (kp_prof_unwind_stepwise, which
   keeps no cache per thread), at the guarded malloc and free, before
   the lock; kp_tc.prof_busy makes any malloc made inside it
   unsampled.

   Fork.  The lock is a kp_sample_lock_t (prof.c), whose word names its
   holder: a fork from a signal handler that interrupted this thread
   inside the lock leaves the lock alone (kp_guard_atfork_prepare), and
   the interrupted operation finishes in both processes; a malloc of
   that handler, or of the child, takes no guarded sample
   (kp_guard_sample).  */

#include <config.h>

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "kp_internal.h"

/* Frames kept per stack.  */
#define KP_GUARD_DEPTH 24

enum
{
  KP_GUARD_UNUSED,              /* never held a block */
  KP_GUARD_LIVE,                /* holds a live block */
  KP_GUARD_FREED                /* its block was freed: quarantined */
};

typedef struct kp_guard_slot
{
  uintptr_t block;              /* the block's address */
  size_t size;                  /* asked for */
  size_t usable;
  uint32_t state;               /* KP_GUARD_* */
  uint32_t next;                /* in the quarantine, slot index + 1 */
  int32_t alloc_tid, free_tid;
  uint32_t alloc_depth, free_depth;
  /* Set by a report of KAME_POOL_ON_MISUSE=report: the slot's pages
     stay as the handler left them and it is never used again.  The
     handler's relaxed store, the sampler's relaxed load under the
     lock.  */
  _Atomic (bool) retired;
  uintptr_t alloc_pc[KP_GUARD_DEPTH];
  uintptr_t free_pc[KP_GUARD_DEPTH];
} kp_guard_slot_t;

/* Written by kp_guard_init (in kp_process_init, before it publishes the
   end of initialisation) and read after it.  */
static double kp_guard_rate;          /* mean gap in bytes; 0: off */
static size_t kp_guard_nslots;

/* Under kp_guard_lock, but the fields published by kp_guard_ready
   (see the top).  */
static kp_sample_lock_t kp_guard_lock = KP_SAMPLE_LOCK_INIT;
static _Atomic (bool) kp_guard_ready;
static bool kp_guard_failed;          /* no memory for the pool */
static uintptr_t kp_guard_lo, kp_guard_hi;      /* the reservation */
static size_t kp_guard_page, kp_guard_stride;
static kp_guard_slot_t *kp_guard_slots;
static size_t kp_guard_fresh;         /* slots never used: from here */
static uint32_t kp_guard_qhead, kp_guard_qtail; /* index + 1, 0: none */
static size_t kp_guard_placed;        /* blocks ever: every 4th left */
static struct sigaction kp_guard_old_segv, kp_guard_old_bus;

/* Relaxed counters: any thread adds, the statistics read.  */
static _Atomic (size_t) kp_guard_live, kp_guard_allocs, kp_guard_reports;
static _Atomic (size_t) kp_guard_live_bytes, kp_guard_alloc_bytes;

void
kp_guard_init (void)
{
  int rate = kp_setting (&kp_guard_sample_bytes);
  if (rate <= 0)
    return;
  kp_guard_rate = rate;
  kp_guard_nslots = (size_t) kp_setting (&kp_guard_slot_count);
  /* The unwinder is set up by its first walk, in the first guarded
     malloc, not here as the heap profile does: a process that never
     samples does not pay the pages it touches (half a MiB with
     libunwind).  A malloc it makes is served unsampled
     (kp_tc.prof_busy).  */
  kp_prof_unwind_init ();
  atomic_fetch_or_explicit (&kp_sample_state, KP_SAMPLE_GUARD,
                            memory_order_release);
}

/* ---- The countdown --------------------------------------------------- */

/* A gap of the exponential distribution of mean kp_guard_rate bytes,
   at least 1 (memoryless: a block of S bytes is sampled with
   probability 1 - exp (-S / rate), whatever came before it).  */
static int64_t
kp_guard_gap (kp_tcache_t *tc)
{
  return (int64_t) kp_exp_gap (&tc->guard_rng, kp_guard_rate);
}

void *
kp_guard_sample (size_t n, size_t align, bool take)
{
  kp_tcache_t *tc = &kp_tc;
  if (tc->guard_rng == 0)
    {
      /* The thread's first count: seed its numbers (any value but 0
         does) and draw its first gap, which this malloc may already
         cross.  */
      uint64_t seed = ((uintptr_t) tc * 0x9e3779b97f4a7c15u)
                      ^ ((uint64_t) getpid () << 32)
                      ^ ((uint64_t) kp_clock_ms () << 16) ^ n;
      tc->guard_rng = seed != 0 ? seed : 1;
      int64_t left = kp_guard_gap (tc);
      if ((uint64_t) left >= n)
        {
          tc->guard_rem = left - (int64_t) n;
          return NULL;
        }
    }
  if (tc->prof_busy || kp_sample_lock_mine (&kp_guard_lock))
    {
      /* A malloc of the unwinder's, or of a signal handler that
         interrupted this thread inside the lock: the next malloc comes
         back.  */
      tc->guard_rem = 0;
      return NULL;
    }
  tc->guard_rem = kp_guard_gap (tc);
  return take ? kp_guard_malloc (n, align) : NULL;
}

/* ---- The slot pool ----------------------------------------------------- */

static void kp_guard_handler (int sig, siginfo_t *si, void *uc);

/* Reserve the pool, map the records and install the handler.  Under the
   lock; false when the kernel refuses (guarded sampling then stays off
   for good).  */
static bool
kp_guard_reserve (void)
{
  size_t page = kp_os_page_size ();
  size_t area = kp_round_up (KP_GUARD_MAX, page);
  size_t stride = area + page;
  size_t bytes = kp_round_up (page + kp_guard_nslots * stride,
                              KP_REGION_SIZE);
  size_t rec = kp_round_up (kp_guard_nslots * sizeof (kp_guard_slot_t), page);
  char *m = kp_os_map_aligned (bytes, KP_REGION_SIZE);
  if (m == NULL)
    return false;
  kp_guard_slots = kp_os_map_aligned (rec, page);
  if (kp_guard_slots == NULL || mprotect (m, bytes, PROT_NONE) != 0)
    {
      kp_os_unmap (m, bytes);
      if (kp_guard_slots != NULL)
        kp_os_unmap (kp_guard_slots, rec);
      return false;
    }
  kp_guard_page = page;
  kp_guard_stride = stride;
  kp_guard_lo = (uintptr_t) m;
  kp_guard_hi = (uintptr_t) m + bytes;
  struct sigaction sa;
  memset (&sa, 0, sizeof sa);
  sa.sa_sigaction = kp_guard_handler;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  sigemptyset (&sa.sa_mask);
  sigaction (SIGSEGV, &sa, &kp_guard_old_segv);
  sigaction (SIGBUS, &sa, &kp_guard_old_bus);
  for (size_t off = 0; off < bytes; off += KP_REGION_SIZE)
    kp_radix_set ((uintptr_t) m + off, KP_RADIX_GUARD);
  atomic_store_explicit (&kp_guard_ready, true, memory_order_release);
  return true;
}

/* The first byte of slot I's pages.  */
static uintptr_t
kp_guard_area (size_t i)
{
  return kp_guard_lo + kp_guard_page + i * kp_guard_stride;
}

static size_t
kp_guard_area_size (void)
{
  return kp_guard_stride - kp_guard_page;
}

/* A slot for a new block: one never used, else the oldest freed one.
   Under the lock; -1 when every slot holds a live block.  */
static ptrdiff_t
kp_guard_slot_take (void)
{
  while (kp_guard_fresh < kp_guard_nslots)
    {
      size_t i = kp_guard_fresh++;
      if (!atomic_load_explicit (&kp_guard_slots[i].retired,
                                 memory_order_relaxed))
        return (ptrdiff_t) i;
    }
  while (kp_guard_qhead != 0)
    {
      size_t i = kp_guard_qhead - 1;
      kp_guard_qhead = kp_guard_slots[i].next;
      if (kp_guard_qhead == 0)
        kp_guard_qtail = 0;
      if (!atomic_load_explicit (&kp_guard_slots[i].retired,
                                 memory_order_relaxed))
        return (ptrdiff_t) i;
    }
  return -1;
}

/* Put slot I at the tail of the quarantine.  Under the lock.  */
static void
kp_guard_quarantine (size_t i)
{
  kp_guard_slots[i].next = 0;
  if (kp_guard_qtail != 0)
    kp_guard_slots[kp_guard_qtail - 1].next = (uint32_t) i + 1;
  else
    kp_guard_qhead = (uint32_t) i + 1;
  kp_guard_qtail = (uint32_t) i + 1;
}

void *
kp_guard_malloc (size_t n, size_t align)
{
  if (n == 0 || n > KP_GUARD_MAX || align > kp_os_page_size ())
    return NULL;
  kp_tcache_t *tc = &kp_tc;
  tc->prof_busy = true;
  uintptr_t pc[KP_GUARD_DEPTH];
  size_t depth = kp_prof_unwind_stepwise (pc, KP_GUARD_DEPTH);
  void *p = NULL;
  kp_sample_lock (&kp_guard_lock);
  if (!atomic_load_explicit (&kp_guard_ready, memory_order_relaxed)
      && !kp_guard_failed && !kp_guard_reserve ())
    {
      kp_guard_failed = true;
      kp_os_write_stderr ("kamepool: KAME_POOL_GUARD_SAMPLE: no memory for "
                          "the slot pool; guarded sampling is off\n");
    }
  ptrdiff_t i = kp_guard_failed ? -1 : kp_guard_slot_take ();
  if (i >= 0)
    {
      kp_guard_slot_t *s = &kp_guard_slots[i];
      uintptr_t area = kp_guard_area ((size_t) i);
      uintptr_t end = area + kp_guard_area_size ();
      size_t usable = kp_round_up (n, align);
      uintptr_t block;
      if ((kp_guard_placed++ & 3) == 3)
        block = area;           /* against the preceding guard page */
      else
        {
          block = end - usable;
          usable = end - block;
        }
      uintptr_t first = block & ~(kp_guard_page - 1);
      uintptr_t last = kp_round_up (block + usable, kp_guard_page);
      if (mprotect ((void *) first, last - first,
                    PROT_READ | PROT_WRITE) == 0)
        {
          s->block = block;
          s->size = n;
          s->usable = usable;
          s->state = KP_GUARD_LIVE;
          s->next = 0;
          s->alloc_tid = kp_sample_tid ();
          s->alloc_depth = (uint32_t) depth;
          memcpy (s->alloc_pc, pc, depth * sizeof *pc);
          s->free_depth = 0;
          s->free_tid = 0;
          p = (void *) block;
          atomic_fetch_add_explicit (&kp_guard_live, 1, memory_order_relaxed);
          atomic_fetch_add_explicit (&kp_guard_allocs, 1,
                                     memory_order_relaxed);
          atomic_fetch_add_explicit (&kp_guard_live_bytes, usable,
                                     memory_order_relaxed);
          atomic_fetch_add_explicit (&kp_guard_alloc_bytes, usable,
                                     memory_order_relaxed);
        }
      else
        {
          /* No memory for the page tables: the slot stays unused.  */
          s->state = KP_GUARD_UNUSED;
          kp_guard_quarantine ((size_t) i);
        }
    }
  kp_sample_unlock (&kp_guard_lock);
  tc->prof_busy = false;
  return p;
}

/* The slot whose pages hold ADDR (an address of the pool), or -1 for a
   guard page.  */
static ptrdiff_t
kp_guard_slot_at (uintptr_t addr)
{
  if (addr < kp_guard_lo + kp_guard_page)
    return -1;
  size_t off = addr - kp_guard_lo - kp_guard_page;
  size_t i = off / kp_guard_stride;
  if (i >= kp_guard_nslots || off % kp_guard_stride >= kp_guard_area_size ())
    return -1;
  return (ptrdiff_t) i;
}

/* ---- The report -------------------------------------------------------- */

/* "kamepool:   WHO by thread TID:" and a line per frame of PC[0..N):
   "kamepool:     #I 0xADDR FUNCTION+0xOFF (OBJECT+0xOFF)", the function
   and the object from dladdr when it names them (the object's offset
   is the one addr2line -e OBJECT takes).  */
static void
kp_guard_stack (const char *who, int32_t tid, const uintptr_t *pc,
                uint32_t n)
{
  char buf[512];
  kp_line_t l = KP_LINE (buf, -1);
  kp_line_add (&l, "kamepool:   ");
  kp_line_add (&l, who);
  kp_line_add (&l, " by thread ");
  kp_line_num (&l, (unsigned long long) tid);
  kp_line_add (&l, n > 0 ? ":\n" : ": no stack\n");
  kp_line_flush (&l);
  for (uint32_t i = 0; i < n && i < KP_GUARD_DEPTH; i++)
    {
      kp_line_t f = KP_LINE (buf, -1);
      kp_line_add (&f, "kamepool:     #");
      kp_line_num (&f, i);
      kp_line_add (&f, " ");
      kp_line_hex (&f, pc[i]);
      Dl_info info;
      /* A return address: the call is the byte before it.  */
      if (dladdr ((void *) (pc[i] - 1), &info) != 0)
        {
          if (info.dli_sname != NULL && info.dli_saddr != NULL)
            {
              kp_line_add (&f, " ");
              kp_line_add (&f, info.dli_sname);
              kp_line_add (&f, "+");
              kp_line_hex (&f, pc[i] - (uintptr_t) info.dli_saddr);
            }
          if (info.dli_fname != NULL && info.dli_fname[0] != '\0')
            {
              kp_line_add (&f, " (");
              kp_line_add (&f, info.dli_fname);
              kp_line_add (&f, "+");
              kp_line_hex (&f, pc[i] - (uintptr_t) info.dli_fbase);
              kp_line_add (&f, ")");
            }
        }
      kp_line_add (&f, "\n");
      kp_line_flush (&f);
    }
}

/* The report on the block of slot S: WHAT (the kind) in a call of
   CALL (NULL: a fault), the access's address ADDR and its offset from
   the block, then the block and its stacks.  Without allocating or locking (the fault handler's).  */
static void
kp_guard_report (const char *call, const char *what, uintptr_t addr,
                 const kp_guard_slot_t *s)
{
  atomic_fetch_add_explicit (&kp_guard_reports, 1, memory_order_relaxed);
  char buf[512];
  kp_line_t l = KP_LINE (buf, -1);
  kp_line_add (&l, "kamepool: ");
  if (call != NULL)
    {
      kp_line_add (&l, call);
      kp_line_add (&l, "(): ");
    }
  kp_line_add (&l, "guarded block: ");
  kp_line_add (&l, what);
  kp_line_add (&l, " at ");
  kp_line_hex (&l, addr);
  kp_line_add (&l, " in thread ");
  /* Asked of the kernel: the handler touches no thread-local (a
     thread's first access to one can allocate in the global-dynamic
     model).  */
  kp_line_num (&l, (unsigned long long) syscall (SYS_gettid));
  kp_line_add (&l, "\n");
  kp_line_flush (&l);
  if (s->state == KP_GUARD_UNUSED)
    return;
  l = (kp_line_t) KP_LINE (buf, -1);
  kp_line_add (&l, "kamepool:   offset ");
  if (addr < s->block)
    {
      kp_line_add (&l, "-");
      kp_line_num (&l, s->block - addr);
    }
  else
    kp_line_num (&l, addr - s->block);
  kp_line_add (&l, " of a block of ");
  kp_line_num (&l, s->size);
  kp_line_add (&l, " bytes (");
  kp_line_num (&l, s->usable);
  kp_line_add (&l, " usable) at ");
  kp_line_hex (&l, s->block);
  kp_line_add (&l, s->state == KP_GUARD_FREED ? ", freed\n" : ", live\n");
  kp_line_flush (&l);
  kp_guard_stack ("allocated", s->alloc_tid, s->alloc_pc, s->alloc_depth);
  if (s->state == KP_GUARD_FREED)
    kp_guard_stack ("freed", s->free_tid, s->free_pc, s->free_depth);
}

/* ---- free and usable size ---------------------------------------------- */

/* The slot of the live block P, or -1.  Under the lock.  */
static ptrdiff_t
kp_guard_live_slot (const void *p)
{
  if (!atomic_load_explicit (&kp_guard_ready, memory_order_relaxed))
    return -1;
  ptrdiff_t i = kp_guard_slot_at ((uintptr_t) p);
  if (i < 0 || kp_guard_slots[i].state != KP_GUARD_LIVE
      || kp_guard_slots[i].block != (uintptr_t) p)
    return -1;
  return i;
}

/* Report the free (or realloc ...: CALL) of P, which is not a live
   guarded block, then abort, or return with
   KAME_POOL_ON_MISUSE=report.  Under the lock, which it releases.  */
static void
kp_guard_bad_free (const char *call, void *p)
{
  ptrdiff_t i = atomic_load_explicit (&kp_guard_ready, memory_order_relaxed)
                ? kp_guard_slot_at ((uintptr_t) p) : -1;
  kp_guard_slot_t copy;
  const char *what;
  if (i >= 0 && kp_guard_slots[i].state == KP_GUARD_FREED
      && kp_guard_slots[i].block == (uintptr_t) p)
    what = "double free";
  else
    what = "invalid free (not the start of a live block)";
  if (i >= 0)
    copy = kp_guard_slots[i];
  else
    memset (&copy, 0, sizeof copy);
  kp_sample_unlock (&kp_guard_lock);
  kp_guard_report (call, what, (uintptr_t) p, &copy);
  if (kp_option_misuse_aborts ())
    abort ();
}

void
kp_guard_free (const char *call, void *p)
{
  kp_tcache_t *tc = &kp_tc;
  bool busy = tc->prof_busy;
  tc->prof_busy = true;
  uintptr_t pc[KP_GUARD_DEPTH];
  size_t depth = kp_prof_unwind_stepwise (pc, KP_GUARD_DEPTH);
  tc->prof_busy = busy;
  kp_sample_lock (&kp_guard_lock);
  ptrdiff_t i = kp_guard_live_slot (p);
  if (i < 0)
    {
      kp_guard_bad_free (call, p);
      return;
    }
  kp_guard_slot_t *s = &kp_guard_slots[i];
  uintptr_t first = s->block & ~(kp_guard_page - 1);
  uintptr_t last = kp_round_up (s->block + s->usable, kp_guard_page);
  int saved = errno;
  mprotect ((void *) first, last - first, PROT_NONE);
  errno = saved;
  s->state = KP_GUARD_FREED;
  s->free_tid = kp_sample_tid ();
  s->free_depth = (uint32_t) depth;
  memcpy (s->free_pc, pc, depth * sizeof *pc);
  kp_guard_quarantine ((size_t) i);
  atomic_fetch_sub_explicit (&kp_guard_live, 1, memory_order_relaxed);
  atomic_fetch_sub_explicit (&kp_guard_live_bytes, s->usable,
                             memory_order_relaxed);
  kp_sample_unlock (&kp_guard_lock);
}

size_t
kp_guard_usable (const void *p)
{
  kp_sample_lock (&kp_guard_lock);
  ptrdiff_t i = kp_guard_live_slot (p);
  size_t n = i >= 0 ? kp_guard_slots[i].usable : 0;
  kp_sample_unlock (&kp_guard_lock);
  return n;
}

void
kp_guard_misuse (const char *call, void *p)
{
  kp_sample_lock (&kp_guard_lock);
  kp_guard_bad_free (call, p);
}

/* ---- The fault handler ------------------------------------------------- */

/* Call the handler that ours replaced, as it was installed.  */
static void
kp_guard_chain (int sig, siginfo_t *si, void *uc)
{
  const struct sigaction *old = sig == SIGBUS ? &kp_guard_old_bus
                                              : &kp_guard_old_segv;
  if (old->sa_flags & SA_SIGINFO)
    {
      if (old->sa_sigaction != NULL)
        {
          old->sa_sigaction (sig, si, uc);
          return;
        }
    }
  else if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN)
    {
      old->sa_handler (sig);
      return;
    }
  /* The default action (a fault cannot be ignored): the access faults
     again when the handler returns, with the default disposition.  A
     signal sent by kill(2) is sent again.  */
  struct sigaction dfl;
  memset (&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset (&dfl.sa_mask);
  sigaction (sig, &dfl, NULL);
  if (si->si_code <= 0)
    raise (sig);
}

/* "read", "write", or "access" when the machine does not say.  */
static const char *
kp_guard_access (void *uc)
{
#if defined __x86_64__ && defined REG_ERR
  const ucontext_t *u = uc;
  return (u->uc_mcontext.gregs[REG_ERR] & 2) ? "write" : "read";
#else
  (void) uc;
  return "access";
#endif
}

/* The slot an access at ADDR, a fault in the pool, is about: the slot
   whose pages hold it, else the nearer of the two slots beside the
   guard page, by their blocks' distance (a slot that never held a
   block is never the nearer).  */
static ptrdiff_t
kp_guard_fault_slot (uintptr_t addr)
{
  ptrdiff_t i = kp_guard_slot_at (addr);
  if (i >= 0)
    return i;
  ptrdiff_t before = -1, after = -1;
  if (addr >= kp_guard_lo + kp_guard_page)
    before = (ptrdiff_t) ((addr - kp_guard_lo - kp_guard_page)
                          / kp_guard_stride);
  if ((size_t) (before + 1) < kp_guard_nslots)
    after = before + 1;
  uintptr_t db = UINTPTR_MAX, da = UINTPTR_MAX;
  if (before >= 0 && kp_guard_slots[before].state != KP_GUARD_UNUSED)
    db = addr - (kp_guard_slots[before].block
                 + kp_guard_slots[before].usable);
  if (after >= 0 && kp_guard_slots[after].state != KP_GUARD_UNUSED)
    da = kp_guard_slots[after].block - addr;
  if (db == UINTPTR_MAX && da == UINTPTR_MAX)
    return -1;
  return db <= da ? before : after;
}

static void
kp_guard_handler (int sig, siginfo_t *si, void *uc)
{
  int saved = errno;
  uintptr_t addr = (uintptr_t) si->si_addr;
  if (si->si_code <= 0
      || !atomic_load_explicit (&kp_guard_ready, memory_order_acquire)
      || addr < kp_guard_lo || addr >= kp_guard_hi)
    {
      kp_guard_chain (sig, si, uc);
      errno = saved;
      return;
    }
  ptrdiff_t i = kp_guard_fault_slot (addr);
  kp_guard_slot_t none;
  memset (&none, 0, sizeof none);
  const kp_guard_slot_t *s = i >= 0 ? &kp_guard_slots[i] : &none;
  const char *access = kp_guard_access (uc);
  char what[64];
  kp_line_t w = KP_LINE (what, -1);
  if (s->state == KP_GUARD_FREED)
    kp_line_add (&w, "use after free");
  else if (s->state == KP_GUARD_UNUSED)
    kp_line_add (&w, "wild access to the slot pool");
  else if (addr < s->block)
    kp_line_add (&w, "underflow");
  else
    kp_line_add (&w, "overflow");
  kp_line_add (&w, " (");
  kp_line_add (&w, access);
  kp_line_add (&w, ")");
  what[w.len < sizeof what ? w.len : sizeof what - 1] = '\0';
  kp_guard_report (NULL, what, addr, s);
  if (kp_option_misuse_aborts ())
    {
      /* abort, not the fault again: the report's "Aborted" is that of
         every misuse.  */
      abort ();
    }
  /* KAME_POOL_ON_MISUSE=report: the page becomes accessible and the
     access is made; the slot, and a neighbour that shares the page,
     are never used again.  */
  uintptr_t page = addr & ~(kp_guard_page - 1);
  if (i >= 0)
    atomic_store_explicit (&kp_guard_slots[i].retired, true,
                           memory_order_relaxed);
  ptrdiff_t j = kp_guard_slot_at (addr);
  if (j < 0)
    {
      ptrdiff_t before = addr >= kp_guard_lo + kp_guard_page
        ? (ptrdiff_t) ((addr - kp_guard_lo - kp_guard_page) / kp_guard_stride)
        : -1;
      if (before >= 0)
        atomic_store_explicit (&kp_guard_slots[before].retired, true,
                               memory_order_relaxed);
      if ((size_t) (before + 1) < kp_guard_nslots)
        atomic_store_explicit (&kp_guard_slots[before + 1].retired, true,
                               memory_order_relaxed);
    }
  mprotect ((void *) page, kp_guard_page, PROT_READ | PROT_WRITE);
  errno = saved;
}

/* ---- Statistics and fork ----------------------------------------------- */

void
kp_guard_stats (size_t *slots, size_t *used, size_t *allocs, size_t *reports)
{
  *slots = kp_guard_rate > 0 ? kp_guard_nslots : 0;
  *used = atomic_load_explicit (&kp_guard_live, memory_order_relaxed);
  *allocs = atomic_load_explicit (&kp_guard_allocs, memory_order_relaxed);
  *reports = atomic_load_explicit (&kp_guard_reports, memory_order_relaxed);
}

void
kp_guard_blocks (size_t *allocs, size_t *alloc_bytes, size_t *live,
                 size_t *live_bytes)
{
  *allocs = atomic_load_explicit (&kp_guard_allocs, memory_order_relaxed);
  *alloc_bytes = atomic_load_explicit (&kp_guard_alloc_bytes,
                                       memory_order_relaxed);
  *live = atomic_load_explicit (&kp_guard_live, memory_order_relaxed);
  *live_bytes = atomic_load_explicit (&kp_guard_live_bytes,
                                      memory_order_relaxed);
}

void
kp_guard_atfork_prepare (void)
{
  kp_sample_lock_prepare (&kp_guard_lock);
}

void
kp_guard_atfork_parent (void)
{
  kp_sample_lock_after_fork (&kp_guard_lock, false);
}

void
kp_guard_atfork_child (void)
{
  kp_sample_lock_after_fork (&kp_guard_lock, true);
}
