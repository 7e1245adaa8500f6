/* ckernel_alloc.c -- the ckernel bump arena of libckarena: 2 MiB-aligned
   huge-page blocks tracked by address (ck_huge_alloc, ck_huge_free), and
   the bump arena built on one of them or on a private mapping of the
   weights file (ck_bump_alloc_*).

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckernel_alloc.h"
#include "env-flag.h"

/* The PMD huge page of x86-64 and of arm64 with 4 KiB pages; blocks are
   aligned to it so that THP can back them from the first byte.  */
#define CK_HUGE_PAGE_SIZE ((size_t) 2 << 20)

/* Round N up to a multiple of ALIGN, a power of two; 0 on overflow.  */
static size_t
ck_align_up (size_t n, size_t align)
{
  if (n > SIZE_MAX - (align - 1))
    return 0;
  return (n + align - 1) & ~(align - 1);
}

static size_t
ck_page_size (void)
{
  long page = sysconf (_SC_PAGESIZE);
  return page > 0 ? (size_t) page : 4096;
}

/* The table of live ck_huge_alloc blocks, keyed by address.

   Open addressing with linear probing in a power-of-two array; addr 0
   marks an empty slot, and removal shifts the rest of the run back
   instead of leaving a tombstone, so probes stay short however much
   the table churns.  Every field below is read and written with
   ck_track_lock held, and the lock is never held across malloc or
   free: a full table is replaced by allocating the bigger array with
   the lock released, then rehashing and swapping under the lock, then
   freeing the old array after unlocking.  Other threads thus wait at
   most for an O(n) rehash, never for the system allocator.  The table
   never shrinks.  */
struct ck_track_slot
{
  uintptr_t addr;
  size_t len;
};

static pthread_mutex_t ck_track_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ck_track_slot *ck_track_slots;
static size_t ck_track_cap;      /* 0 or a power of two >= 64.  */
static unsigned ck_track_shift;  /* 64 - log2 (ck_track_cap).  */
static size_t ck_track_live;

#define CK_TRACK_MIN_CAP 64

/* A child of fork must find the lock free even if another thread held
   it at the time: hold it across the fork, as the C library does for
   malloc.  Safe because no thread takes another lock while holding
   this one.  */
static pthread_once_t ck_track_once = PTHREAD_ONCE_INIT;

static void
ck_track_lock_for_fork (void)
{
  pthread_mutex_lock (&ck_track_lock);
}

static void
ck_track_unlock_after_fork (void)
{
  pthread_mutex_unlock (&ck_track_lock);
}

static void
ck_track_register_fork_handlers (void)
{
  pthread_atfork (ck_track_lock_for_fork, ck_track_unlock_after_fork,
                  ck_track_unlock_after_fork);
}

/* Fibonacci hashing: the blocks are 2 MiB aligned, so the low bits
   of an address carry nothing and the multiply spreads the rest.  */
static size_t
ck_track_home (uintptr_t addr, unsigned shift)
{
  return (size_t) (((uint64_t) addr * UINT64_C (0x9E3779B97F4A7C15))
                   >> shift);
}

static unsigned
ck_track_shift_for (size_t cap)
{
  unsigned bits = 0;
  while (((size_t) 1 << bits) < cap)
    bits++;
  return 64 - bits;
}

static void
ck_track_put (struct ck_track_slot *slots, size_t cap, unsigned shift,
              uintptr_t addr, size_t len)
{
  size_t mask = cap - 1;
  size_t i = ck_track_home (addr, shift);
  while (slots[i].addr != 0)
    i = (i + 1) & mask;
  slots[i].addr = addr;
  slots[i].len = len;
}

/* Keep the load at most one half, so that a miss ends quickly.  */
static bool
ck_track_has_room (void)
{
  return ck_track_cap != 0 && (ck_track_live + 1) * 2 <= ck_track_cap;
}

/* Remember that PTR starts a block of LEN bytes.  False if the table
   cannot grow (errno ENOMEM).  */
static bool
ck_track_insert (void *ptr, size_t len)
{
  pthread_once (&ck_track_once, ck_track_register_fork_handlers);
  pthread_mutex_lock (&ck_track_lock);
  while (!ck_track_has_room ())
    {
      size_t want = ck_track_cap != 0 ? ck_track_cap * 2 : CK_TRACK_MIN_CAP;
      pthread_mutex_unlock (&ck_track_lock);
      struct ck_track_slot *fresh = calloc (want, sizeof *fresh);
      if (fresh == NULL)
        {
          errno = ENOMEM;
          return false;
        }
      struct ck_track_slot *unused = fresh;
      pthread_mutex_lock (&ck_track_lock);
      /* Another thread may have grown the table meanwhile; then FRESH
         is not needed.  */
      if (ck_track_cap < want)
        {
          unsigned shift = ck_track_shift_for (want);
          for (size_t i = 0; i < ck_track_cap; i++)
            if (ck_track_slots[i].addr != 0)
              ck_track_put (fresh, want, shift, ck_track_slots[i].addr,
                            ck_track_slots[i].len);
          unused = ck_track_slots;
          ck_track_slots = fresh;
          ck_track_cap = want;
          ck_track_shift = shift;
        }
      pthread_mutex_unlock (&ck_track_lock);
      free (unused);
      pthread_mutex_lock (&ck_track_lock);
    }
  ck_track_put (ck_track_slots, ck_track_cap, ck_track_shift,
                (uintptr_t) ptr, len);
  ck_track_live++;
  pthread_mutex_unlock (&ck_track_lock);
  return true;
}

/* Forget the block that starts at PTR and store its length in *LEN.
   False if no tracked block starts at PTR.  */
static bool
ck_track_remove (void *ptr, size_t *len)
{
  uintptr_t addr = (uintptr_t) ptr;
  bool found = false;

  pthread_once (&ck_track_once, ck_track_register_fork_handlers);
  pthread_mutex_lock (&ck_track_lock);
  if (ck_track_cap != 0)
    {
      size_t mask = ck_track_cap - 1;
      size_t hole = ck_track_home (addr, ck_track_shift);
      while (ck_track_slots[hole].addr != 0
             && ck_track_slots[hole].addr != addr)
        hole = (hole + 1) & mask;
      if (ck_track_slots[hole].addr == addr)
        {
          found = true;
          *len = ck_track_slots[hole].len;
          /* An entry further along the run may move back into the hole
             only if the hole lies between its home slot and where it
             sits now; otherwise a lookup would stop before reaching
             it.  */
          for (size_t j = (hole + 1) & mask; ck_track_slots[j].addr != 0;
               j = (j + 1) & mask)
            {
              size_t home = ck_track_home (ck_track_slots[j].addr,
                                           ck_track_shift);
              if (((j - home) & mask) >= ((j - hole) & mask))
                {
                  ck_track_slots[hole] = ck_track_slots[j];
                  hole = j;
                }
            }
          ck_track_slots[hole].addr = 0;
          ck_track_slots[hole].len = 0;
          ck_track_live--;
        }
    }
  pthread_mutex_unlock (&ck_track_lock);
  return found;
}

/* Explicit huge pages, if the administrator reserved some.  The 2 MiB
   size is asked for explicitly: with a 1 GiB default huge page size
   the mapping would otherwise be bigger than the caller's length.  */
static void *
ck_map_hugetlb (size_t len)
{
#if HAVE_DECL_MAP_HUGETLB && defined MAP_HUGE_SHIFT
  void *p = mmap (NULL, len, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB
                  | (21 << MAP_HUGE_SHIFT), -1, 0);
  if (p != MAP_FAILED)
    return p;
#else
  (void) len;
#endif
  return NULL;
}

/* LEN bytes (a multiple of the page size) of anonymous memory starting
   on a 2 MiB boundary, advised MADV_HUGEPAGE.  mmap only promises page
   alignment, so map 2 MiB more than needed and unmap the ends.  NULL
   with errno set on failure, with nothing left mapped.  */
static void *
ck_map_aligned (size_t len)
{
  if (len > SIZE_MAX - CK_HUGE_PAGE_SIZE)
    {
      errno = ENOMEM;
      return NULL;
    }
  size_t over = len + CK_HUGE_PAGE_SIZE;
  uint8_t *raw = mmap (NULL, over, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED)
    return NULL;
  uintptr_t start = ((uintptr_t) raw + CK_HUGE_PAGE_SIZE - 1)
                    & ~(uintptr_t) (CK_HUGE_PAGE_SIZE - 1);
  uint8_t *p = (uint8_t *) start;
  size_t head = (size_t) (p - raw);
  size_t tail = over - head - len;
  if (head != 0)
    munmap (raw, head);
  if (tail != 0)
    munmap (p + len, tail);
#if HAVE_DECL_MADV_HUGEPAGE
  /* Only a hint: THP may be disabled, and the memory works anyway.  */
  (void) madvise (p, len, MADV_HUGEPAGE);
#endif
  return p;
}

CK_API void *
ck_huge_alloc (size_t bytes)
{
  int saved_errno = errno;

  if (bytes == 0)
    {
      errno = EINVAL;
      return NULL;
    }
  size_t len = ck_align_up (bytes, CK_HUGE_PAGE_SIZE);
  if (len == 0)
    {
      errno = ENOMEM;
      return NULL;
    }
  void *p = ck_map_hugetlb (len);
  if (p == NULL)
    p = ck_map_aligned (len);
  if (p == NULL)
    return NULL;
  if (!ck_track_insert (p, len))
    {
      munmap (p, len);
      errno = ENOMEM;
      return NULL;
    }
  errno = saved_errno;
  return p;
}

CK_API void
ck_huge_free (void *ptr, size_t bytes)
{
  size_t len;

  if (ptr == NULL)
    return;
  if (!ck_track_remove (ptr, &len))
    {
      /* Unmapping or freeing an unknown pointer could destroy memory
         that someone else owns; refusing is the only safe answer.  */
      fprintf (stderr, "ck_huge_free: %p was not returned by "
               "ck_huge_alloc or is already freed; ignored\n", ptr);
      errno = EINVAL;
      return;
    }
  if (bytes != 0 && ck_align_up (bytes, CK_HUGE_PAGE_SIZE) != len)
    fprintf (stderr, "ck_huge_free: %p was allocated with %zu bytes "
             "(rounded), not %zu; unmapping %zu\n", ptr, len, bytes, len);
  int saved_errno = errno;
  munmap (ptr, len);
  errno = saved_errno;
}

static void
ck_bump_alloc_reset (ck_bump_alloc_t *alloc)
{
  memset (alloc, 0, sizeof *alloc);
  alloc->mode = CK_BUMP_MODE_UNINITIALIZED;
}

static void ck_bump_report (const char *context, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));

/* Print one "ck_bump_alloc_init: " line on stderr, keeping errno:
   CONTEXT (what failed before, or "") and then the message.  A call
   that fails prints one line only, whatever it tried.  */
static void
ck_bump_report (const char *context, const char *fmt, ...)
{
  int saved_errno = errno;
  char line[512];
  va_list ap;

  /* One write, so that lines from several threads do not mix.  */
  va_start (ap, fmt);
  vsnprintf (line, sizeof line, fmt, ap);
  va_end (ap);
  fprintf (stderr, "ck_bump_alloc_init: %s%s\n", context, line);
  errno = saved_errno;
}

/* A switch of env-flag.h's words; unset and empty are off.  Any other
   word is refused with one line on stderr, and the switch stays off:
   a typo must not pick a mode.  */
static bool
ck_env_flag (const char *name)
{
  const char *v = getenv (name);
  if (v != NULL && *v != '\0' && env_flag_parse (v) < 0)
    ck_bump_report ("", "%s=%.200s: expected " ENV_FLAG_FORMS
                    "; keeping off", name, v);
  return env_flag_value (v, false);
}

/* Map the weights file privately over [weights_base, activations_base)
   of a fresh anonymous region; the private mapping shares the page
   cache, so the weights are never copied, and writes stay in this
   process.  On failure, print why after CONTEXT (what failed before,
   or ""), set errno, return -1 and leave nothing mapped or open; ALLOC
   is then untouched.  */
static int
ck_bump_alloc_try_mixed (ck_bump_alloc_t *alloc, const char *path,
                         size_t total_size, size_t weights_base,
                         size_t activations_base, const char *context)
{
  size_t page = ck_page_size ();
  size_t span = activations_base - weights_base;
  struct stat st;

  if (path == NULL)
    {
      ck_bump_report (context, "mixed mode needs a weights file, "
                      "but weights_path is NULL");
      errno = EINVAL;
      return -1;
    }
  if (weights_base % page != 0)
    {
      ck_bump_report (context, "weights_base %zu is not a multiple of "
                      "the page size %zu, so %s cannot be mapped there",
                      weights_base, page, path);
      errno = EINVAL;
      return -1;
    }
  size_t len = ck_align_up (total_size, page);
  if (len == 0)
    {
      ck_bump_report (context, "total_size %zu is too large", total_size);
      errno = ENOMEM;
      return -1;
    }

  /* O_NONBLOCK so that a FIFO is refused instead of waiting for a
     writer; it changes nothing for a regular file.  */
  int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0)
    {
      ck_bump_report (context, "cannot open weights file %s: %s", path,
                      strerror (errno));
      return -1;
    }
  int err = 0;
  if (fstat (fd, &st) != 0)
    {
      err = errno;
      ck_bump_report (context, "cannot stat weights file %s: %s", path,
                      strerror (err));
    }
  else if (S_ISDIR (st.st_mode))
    {
      err = EISDIR;
      ck_bump_report (context, "weights file %s is a directory", path);
    }
  else if (!S_ISREG (st.st_mode))
    {
      err = EINVAL;
      ck_bump_report (context, "weights file %s is not a regular file", path);
    }
  else if ((uintmax_t) st.st_size < (uintmax_t) span)
    {
      err = EINVAL;
      ck_bump_report (context, "weights file %s has %jd bytes, fewer "
                      "than the %zu from weights_base %zu to "
                      "activations_base %zu",
                      path, (intmax_t) st.st_size, span, weights_base,
                      activations_base);
    }
  if (err != 0)
    {
      close (fd);
      errno = err;
      return -1;
    }

  uint8_t *base = ck_map_aligned (len);
  if (base == NULL)
    {
      err = errno;
      ck_bump_report (context, "cannot map %zu bytes: %s", len,
                      strerror (err));
      close (fd);
      errno = err;
      return -1;
    }
  if (span != 0)
    {
      /* Cannot overflow: it is activations_base rounded up, and that is
         at most LEN.  */
      size_t file_len = ck_align_up (span, page);
      void *w = mmap (base + weights_base, file_len, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_FIXED, fd, 0);
      if (w == MAP_FAILED)
        {
          err = errno;
          ck_bump_report (context, "cannot map weights file %s: %s", path,
                          strerror (err));
          munmap (base, len);
          close (fd);
          errno = err;
          return -1;
        }
      /* The last file page may reach past activations_base; the
         activations must start zeroed like the rest of the region.  */
      size_t past = weights_base + file_len - activations_base;
      if (past != 0)
        memset (base + activations_base, 0, past);
    }
  close (fd);

  alloc->base = base;
  alloc->total_size = total_size;
  alloc->weights_base = weights_base;
  alloc->activations_base = activations_base;
  alloc->mapped_len = len;
  alloc->weights_file_size = (size_t) st.st_size;
  alloc->mode = CK_BUMP_MODE_MIXED_FILE_BACKED;
  return 0;
}

CK_API int
ck_bump_alloc_init (ck_bump_alloc_t *alloc, const char *weights_path,
                    size_t total_size, size_t weights_base,
                    size_t activations_base)
{
  if (alloc == NULL)
    {
      ck_bump_report ("", "alloc is NULL");
      errno = EINVAL;
      return -1;
    }
  ck_bump_alloc_reset (alloc);
  if (total_size == 0
      || weights_base > activations_base || activations_base > total_size)
    {
      ck_bump_report ("", "invalid layout weights_base=%zu "
                      "activations_base=%zu total_size=%zu (need "
                      "weights_base <= activations_base <= total_size, "
                      "total_size > 0)",
                      weights_base, activations_base, total_size);
      errno = EINVAL;
      return -1;
    }

  bool force_mixed = ck_env_flag ("CK_BUMP_FORCE_MIXED");
  bool disable_mixed = ck_env_flag ("CK_BUMP_DISABLE_MIXED");
  if (force_mixed && disable_mixed)
    {
      ck_bump_report ("", "CK_BUMP_FORCE_MIXED and CK_BUMP_DISABLE_MIXED "
                      "are both set");
      errno = EINVAL;
      return -1;
    }

  if (!force_mixed)
    {
      void *p = ck_huge_alloc (total_size);
      if (p != NULL)
        {
          alloc->base = p;
          alloc->total_size = total_size;
          alloc->weights_base = weights_base;
          alloc->activations_base = activations_base;
          alloc->mapped_len = ck_align_up (total_size, CK_HUGE_PAGE_SIZE);
          alloc->mode = CK_BUMP_MODE_ANON;
          return 0;
        }
      if (disable_mixed || weights_path == NULL)
        {
          ck_bump_report ("", "cannot allocate %zu bytes (%.2f MiB): %s",
                          total_size, total_size / (1024.0 * 1024.0),
                          strerror (errno));
          return -1;
        }
      /* The fallback says so in one line, whether it works or not.  */
      char context[320];
      snprintf (context, sizeof context, "cannot allocate %zu bytes of "
                "anonymous memory (%s); mapping %s instead: ", total_size,
                strerror (errno), weights_path);
      if (ck_bump_alloc_try_mixed (alloc, weights_path, total_size,
                                   weights_base, activations_base,
                                   context) != 0)
        return -1;
      ck_bump_report ("", "%sdone", context);
      return 0;
    }
  return ck_bump_alloc_try_mixed (alloc, weights_path, total_size,
                                  weights_base, activations_base, "");
}

CK_API void
ck_bump_alloc_free (ck_bump_alloc_t *alloc)
{
  if (alloc == NULL)
    return;
  int saved_errno = errno;
  if (alloc->base != NULL)
    {
      if (alloc->mode == CK_BUMP_MODE_MIXED_FILE_BACKED)
        munmap (alloc->base, alloc->mapped_len);
      else if (alloc->mode == CK_BUMP_MODE_ANON)
        ck_huge_free (alloc->base, alloc->mapped_len);
    }
  ck_bump_alloc_reset (alloc);
  errno = saved_errno;
}

CK_API int
ck_bump_alloc_needs_weight_materialization (const ck_bump_alloc_t *alloc)
{
  return alloc == NULL || alloc->mode != CK_BUMP_MODE_MIXED_FILE_BACKED;
}
