/* kptest-pool.h -- helpers shared by the kamepool.* test programs (the
   ckarena ones do not link the pool).  Include after kame_pool.h and
   kptest.h.  Copyright (C) 2026 The kamepool authors; LGPL-2.1+.  */

#ifndef KPTEST_POOL_H
#define KPTEST_POOL_H 1

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* The 89 size classes of the contract, and the largest: above 32768,
   1 MiB / M rounded down to 1 KiB, for M = 30, 28, ... 18, 16, 15,
   ... 5.  */
static const size_t kt_classes[] = {
  16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240,
  256, 272, 288, 304, 320, 336, 352, 368, 384, 448, 512, 528, 576, 640,
  768, 896, 1024, 1040, 1088, 1280, 1536, 1792, 2048, 2112, 2560, 3072, 3584, 4096,
  4160, 4368, 4672, 4928, 5184, 5440, 5696, 5952, 6208, 6464, 6720, 6976,
  7232, 7488, 7744, 8000, 8192, 8256, 10304, 12352, 14400, 16384, 16448,
  20544, 24640, 28736, 32768,
  34816, 36864, 39936, 43008, 47104, 52224, 57344, 65536, 69632, 74752,
  79872, 87040, 95232, 104448, 115712, 131072, 149504, 174080, 208896
};
#define KT_NCLASSES (sizeof kt_classes / sizeof kt_classes[0])
#define KT_SMALL_MAX ((size_t) 208896)
/* The largest class whose chunks are a thread's own: the chunks of the
   classes above it are the threads' together, and each such class
   keeps up to KT_SHARED_SPARES emptied chunks of 4 units for its next
   mallocs, until the decay (kamepool(7), The shared classes).  */
#define KT_OWNED_MAX ((size_t) 32768)
#define KT_SHARED_SPARES 2

/* The chunks that the shared classes of S keep with no live block:
   into *UNITS their units (4 a chunk), and false when a class keeps
   more than KT_SHARED_SPARES.  Tests that compare the chunks live
   before and after a run that freed everything leave these out.  */
static inline bool
kt_shared_kept (const kame_pool_stats_t *s, size_t *chunks, size_t *units)
{
  bool ok = true;
  *chunks = *units = 0;
  for (size_t i = 0; i < s->nclasses; i++)
    if (s->classes[i].block_size > KT_OWNED_MAX
        && s->classes[i].live_blocks == 0)
      {
        ok &= s->classes[i].chunks <= KT_SHARED_SPARES;
        *chunks += s->classes[i].chunks;
        *units += 4 * s->classes[i].chunks;
      }
  return ok;
}

/* The page size of the system, which the pool rounds large blocks
   and mappings to and gives a mapping's header: what every test uses
   for a page.  */
static inline size_t
kt_page_size (void)
{
  long v = sysconf (_SC_PAGESIZE);
  return v > 0 ? (size_t) v : 4096;
}
#define KT_PAGE (kt_page_size ())

/* The usable size kame_pool_malloc (N) gives (kame_pool_malloc(3)),
   unless it takes a bigger cached mapping whole: the smallest class
   that holds N up to 208896 bytes, whole units of 256 KiB up to 4 MiB,
   then, in a mapping of its own with the block one page in, N rounded
   up to pages.  */
static inline size_t
kt_usable_for (size_t n)
{
  const size_t unit = (size_t) 256 << 10;
  if (n <= KT_SMALL_MAX)
    for (size_t i = 0; i < KT_NCLASSES; i++)
      if (kt_classes[i] >= n)
        return kt_classes[i];
  if (n <= 16 * unit)
    return (n + unit - 1) / unit * unit;
  return (n + KT_PAGE - 1) / KT_PAGE * KT_PAGE;
}

/* A snapshot of the pool's statistics, the newest version.  */
static inline kame_pool_stats_t
kt_pool_stats (void)
{
  kame_pool_stats_t s;
  memset (&s, 0, sizeof s);
  s.version = KAME_POOL_STATS_VERSION;
  kame_pool_get_stats (&s);
  return s;
}

/* The row of kame_pool_stats_t.classes whose blocks have SIZE bytes,
   or SIZE_MAX.  */
static inline size_t
kt_pool_class (const kame_pool_stats_t *s, size_t size)
{
  for (size_t i = 0; i < s->nclasses; i++)
    if (s->classes[i].block_size == size)
      return i;
  return SIZE_MAX;
}

/* qsort's comparison of two uintptr_t (or pointers).  */
static inline int
kt_cmp_uintptr (const void *a, const void *b)
{
  uintptr_t x = *(const uintptr_t *) a, y = *(const uintptr_t *) b;
  return x < y ? -1 : x > y;
}

/* Whether plain malloc is the pool's (an interposing build) or not (a
   sanitizer build, where the sanitizer owns malloc and the pool's
   foreign pointers come from and go back to that malloc).  */
static inline bool
kt_pool_interposes (void)
{
  char *p = malloc (1);
  if (p == NULL)
    return false;
  *p = 0;
  bool ours = kame_pool_malloc_usable_size (p) != 0;
  free (p);
  return ours;
}

/* How many of the pages of the LEN bytes at P (page-aligned) are
   resident, by mincore; SIZE_MAX when mincore fails (not mapped).  */
static inline size_t
kt_resident_count (const void *p, size_t len)
{
  size_t n = 0;
  for (size_t off = 0; off < len; off += KT_PAGE)
    {
      unsigned char v = 0;
      if (mincore ((char *) p + off, KT_PAGE, &v) != 0)
        return SIZE_MAX;
      n += v & 1;
    }
  return n;
}

#ifdef RTLD_DEFAULT             /* <dlfcn.h> with _GNU_SOURCE */
/* The path of the shared object that defines ADDR, or NULL.  */
static inline const char *
kt_object_of (const void *addr)
{
  Dl_info info;
  if (dladdr (addr, &info) == 0 || info.dli_fname == NULL)
    return NULL;
  return info.dli_fname;
}
#endif

/* A steady workload: ROUNDS times, allocate N blocks of 64 to 4096
   bytes into P, write them and free them all; from round FROM on (0 is
   the first), fail when a round gave anything back (a madvise call of
   the pool's, discard_calls) or faulted a page in (getrusage; only when
   COUNT_FAULTS: where the process makes them all).  The purge thread
   that the first rounds' frees started faults its own stack in when
   it first runs, which on a loaded machine may come late: before round
   FROM, it is let make its first pass.  */
static inline void
kt_steady_cycle (void **p, size_t n, int rounds, int from, bool count_faults)
{
  long faults = 0;
  size_t calls = 0;
  for (int round = 0; round < rounds; round++)
    {
      for (size_t i = 0; i < n; i++)
        {
          size_t size = 64 + (i * 97) % 4033;
          if ((p[i] = kame_pool_malloc (size)) == NULL)
            KT_FAILF ("round %d: malloc failed", round);
          memset (p[i], round, size);
        }
      for (size_t i = 0; i < n; i++)
        kame_pool_free (p[i]);
      struct rusage ru;
      getrusage (RUSAGE_SELF, &ru);
      long f = count_faults ? ru.ru_minflt : 0;
      size_t c = kt_pool_stats ().discard_calls;
      if (round >= from && (f != faults || c != calls))
        KT_FAILF ("round %d: %ld page faults and %zu madvise calls more",
                  round, f - faults, c - calls);
      for (int ms = 0; round == from - 1 && ms < 5000; ms += 10)
        {
          kame_pool_stats_t s = kt_pool_stats ();
          if (!s.background_running || s.background_passes > 0)
            break;
          struct timespec ts = { 0, 10 * 1000000 };
          nanosleep (&ts, NULL);
        }
      getrusage (RUSAGE_SELF, &ru);
      faults = count_faults ? ru.ru_minflt : 0;
      calls = kt_pool_stats ().discard_calls;
    }
}

#endif /* KPTEST_POOL_H */
