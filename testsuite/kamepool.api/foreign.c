/* foreign.c -- kamepool.api tests of pointers the pool does not own:
   blocks from the C library's own allocator handed to kame_pool_free,
   kame_pool_realloc and kame_pool_malloc_usable_size, and invalid
   frees into pool memory that is not allocated, which are reported
   and ignored here (the default, abort, is tested in kamepool.misuse).
   kptest-env: KAME_POOL_ON_MISUSE=report

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#define _GNU_SOURCE 1

#include <dlfcn.h>
#include <errno.h>
#include <gnu/lib-names.h>
#include <malloc.h>
#include <stdint.h>

#include "kame_pool.h"
#include "kptest.h"
#include "kptest-pool.h"

#define KIB ((size_t) 1024)
#define MIB (KIB * KIB)
#define UNIT (256 * KIB)
#define REGION (32 * MIB)

/* glibc's own allocator, which the pool never interposes.  */
extern void *__libc_malloc (size_t);
extern void *__libc_memalign (size_t, size_t);
extern void __libc_free (void *);

/* The allocator the pool calls foreign: glibc's own when the pool is
   malloc, malloc itself otherwise.  */
static void *
foreign_malloc (size_t n)
{
  return kt_pool_interposes () ? __libc_malloc (n) : malloc (n);
}

static void *
foreign_memalign (size_t align, size_t n)
{
  return kt_pool_interposes () ? __libc_memalign (align, n)
                            : memalign (align, n);
}

static void
foreign_free (void *p)
{
  if (kt_pool_interposes ())
    __libc_free (p);
  else
    free (p);
}

/* Bytes in use in glibc's arenas, from glibc's own mallinfo2 (an
   interposing pool exports its own, about the pool): the witness that
   a block really went back to libc.  glibc counts blocks parked in its
   per-thread cache (up to 1032 bytes) as in use, so the blocks here
   are bigger, and the cache itself is set up first.  A sanitizer's
   malloc keeps no such count; there the witness is the sanitizer itself, which aborts on a free it did not expect,
   and this returns 0 so that the checks below hold trivially.  */
static size_t
libc_in_use (void)
{
  if (!kt_pool_interposes ())
    return 0;
  /* dlsym in the C library's handle searches it and its dependencies
     only, never the pool.  */
  static struct mallinfo2 (*libc_mallinfo2) (void);
  if (libc_mallinfo2 == NULL)
    {
      void *libc = dlopen (LIBC_SO, RTLD_LAZY | RTLD_NOLOAD);
      if (libc != NULL)
        *(void **) &libc_mallinfo2 = dlsym (libc, "mallinfo2");
      if (libc_mallinfo2 == NULL)
        {
          printf ("glibc's mallinfo2 not found: %s\n", dlerror ());
          return 0;
        }
    }
  __libc_free (__libc_malloc (1));
  struct mallinfo2 m = libc_mallinfo2 ();
  return m.uordblks + m.hblkhd;
}


/* Run FN in a child whose stderr is a pipe; return its wait status and
   leave what it wrote to stderr in BUF.  */
static int
run_capturing_stderr (void (*fn) (void), char *buf, size_t size)
{
  int fd[2];
  if (pipe (fd) != 0)
    return -1;
  fflush (stdout);
  pid_t pid = fork ();
  if (pid < 0)
    return -1;
  if (pid == 0)
    {
      close (fd[0]);
      dup2 (fd[1], 2);
      close (fd[1]);
      fn ();
      _exit (0);
    }
  close (fd[1]);
  kt_read_all (fd[0], buf, size);
  int status;
  return kt_wait (pid, &status) ? status : -1;
}

/* After a bad free the pool must still allocate and free normally.  */
static void
exercise_pool (void)
{
  void *p[100];
  for (int i = 0; i < 100; i++)
    {
      p[i] = kame_pool_malloc ((size_t) i * 97 + 1);
      if (p[i] == NULL)
        _exit (3);
      memset (p[i], i, (size_t) i * 97 + 1);
    }
  for (int i = 0; i < 100; i++)
    kame_pool_free (p[i]);
  void *d = kame_pool_malloc (300 * KIB);
  if (d == NULL || kame_pool_malloc_usable_size (d) != 2 * UNIT)
    _exit (4);
  kame_pool_free (d);
}

KT_TEST (free_of_a_libc_pointer_goes_to_libc_free)
{
  static const size_t sizes[] = { 1100, 5000, 100 * KIB, MIB };
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    {
      size_t before = libc_in_use ();
      void *q = foreign_malloc (sizes[i]);
      KT_CHECK (q != NULL);
      /* A bound: glibc adds its own header and rounding to the block.  */
      KT_CHECK (!kt_pool_interposes () || libc_in_use () >= before + sizes[i]);
      KT_CHECK_EQ (kame_pool_malloc_usable_size (q), 0);
      errno = EDOM;
      kame_pool_free (q);
      KT_CHECK_EQ (errno, EDOM);
      if (libc_in_use () != before)
        KT_FAILF ("libc still holds %zu bytes after freeing a %zu-byte "
                  "block", libc_in_use () - before, sizes[i]);
    }
  size_t before = libc_in_use ();
  void *q = foreign_memalign (4096, 64 * MIB);
  KT_CHECK (q != NULL);
  kame_pool_free (q);
  KT_CHECK_EQ (libc_in_use (), before);
}

KT_TEST (realloc_of_a_libc_pointer_goes_to_libc_realloc)
{
  static const size_t sizes[][2] = {
    { 1100, 5000 }, { 5000, 1100 }, { 1100, 200 * KIB }, { 2000, 5 * MIB }
  };
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    {
      size_t before = libc_in_use ();
      void *q = foreign_malloc (sizes[i][0]);
      KT_CHECK (q != NULL);
      kt_paint (q, sizes[i][0], 7);
      errno = EDOM;
      void *r = kame_pool_realloc (q, sizes[i][1]);
      KT_CHECK (r != NULL);
      KT_CHECK_EQ (errno, EDOM);
      size_t kept = sizes[i][0] < sizes[i][1] ? sizes[i][0] : sizes[i][1];
      KT_CHECK (kt_painted (r, kept, 7));
      /* Still libc's block.  */
      KT_CHECK_EQ (kame_pool_malloc_usable_size (r), 0);
      /* A bound, as above.  */
      KT_CHECK (!kt_pool_interposes ()
                || libc_in_use () >= before + sizes[i][1]);
      kame_pool_free (r);
      KT_CHECK_EQ (libc_in_use (), before);
    }
}

KT_TEST (usable_size_is_zero_for_pointers_not_from_the_pool)
{
  static char static_buf[64];
  char stack_buf[64];
  void *q = foreign_malloc (64);
  KT_CHECK (q != NULL);
  KT_CHECK_EQ (kame_pool_malloc_usable_size (NULL), 0);
  KT_CHECK_EQ (kame_pool_malloc_usable_size (q), 0);
  KT_CHECK_EQ (kame_pool_malloc_usable_size (static_buf), 0);
  KT_CHECK_EQ (kame_pool_malloc_usable_size (stack_buf), 0);
  foreign_free (q);
}

/* Run FN in a child: it must exit 0 and say "kamepool: free(): " and
   WHAT on stderr.  Fails the current test otherwise.  */
static void
expect_report (void (*fn) (void), const char *what)
{
  static char err[4096];
  int status = run_capturing_stderr (fn, err, sizeof err);
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    KT_FAILF ("child died (status %#x), stderr: %.300s", status, err);
  char want[128];
  snprintf (want, sizeof want, "kamepool: free(): %s", what);
  if (strstr (err, want) == NULL)
    KT_FAILF ("no \"%s\" on stderr: \"%.300s\"", want, err);
}

static void
free_into_region_metadata (void)
{
  void *p = kame_pool_malloc (16);
  if (p == NULL)
    _exit (2);
  char *region = (char *) ((uintptr_t) p & ~(uintptr_t) (REGION - 1));
  /* Unit 0 of a region is its metadata, never a block.  */
  kame_pool_free (region + 64);
  kame_pool_free (region + 100 * KIB);
  exercise_pool ();
  kame_pool_free (p);
}

KT_TEST (invalid_free_into_metadata_is_reported_and_ignored)
{
  expect_report (free_into_region_metadata, "invalid pointer");
}

static void
free_a_released_dedicated_chunk (void)
{
  void *p = kame_pool_malloc (300 * KIB);
  if (p == NULL)
    _exit (2);
  kame_pool_free (p);
  kame_pool_free (p);
  exercise_pool ();
}

KT_TEST (free_into_a_released_chunk_is_reported_and_ignored)
{
  expect_report (free_a_released_dedicated_chunk, "double free of 0x");
}

/* A free at INSIDE_OFFSET in a live 1 MiB dedicated block is reported,
   and the block stays live, whole and unchanged.  */
static size_t inside_offset;

static void
free_inside_a_dedicated_block (void)
{
  size_t size = 1024 * KIB;
  unsigned char *p = kame_pool_malloc (size);
  if (p == NULL || kame_pool_malloc_usable_size (p) != size)
    _exit (2);
  size_t cached = kt_pool_stats ().cache_bytes;
  memset (p, 0x5a, size);
  kame_pool_free (p + inside_offset);
  if (kame_pool_malloc_usable_size (p) != size)
    _exit (3);
  for (size_t i = 0; i < size; i += KT_PAGE)
    if (p[i] != 0x5a)
      _exit (4);
  /* Nothing went in the cache: it holds the same bytes, and a new block
     of the same size is another one.  */
  if (kt_pool_stats ().cache_bytes != cached)
    _exit (5);
  void *q = kame_pool_malloc (size);
  if (q == NULL || q == p)
    _exit (5);
  kame_pool_free (q);
  kame_pool_free (p);
  exercise_pool ();
}

/* At the start of its second unit: a continuation unit, whose
   descriptor has no kind (the free path's shortcut for a dedicated
   block's own unit must not take it).  */
KT_TEST (free_at_a_unit_inside_a_dedicated_block_is_reported_and_ignored)
{
  inside_offset = UNIT;
  expect_report (free_inside_a_dedicated_block, "invalid pointer");
}

KT_TEST (free_at_a_page_inside_a_dedicated_block_is_reported_and_ignored)
{
  inside_offset = KT_PAGE;
  expect_report (free_inside_a_dedicated_block, "invalid pointer");
}

static void
free_libc_and_pool_blocks (void)
{
  for (int i = 0; i < 100; i++)
    {
      kame_pool_free (foreign_malloc ((size_t) i * 50 + 1));
      kame_pool_free (kame_pool_malloc ((size_t) i * 50 + 1));
    }
  exercise_pool ();
}

/* The other side: correct frees, foreign ones included, say nothing.  */
KT_TEST (valid_frees_print_nothing)
{
  static char err[4096];
  int status = run_capturing_stderr (free_libc_and_pool_blocks, err,
                                     sizeof err);
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    KT_FAILF ("child died (status %#x), stderr: %.300s", status, err);
  if (err[0] != '\0')
    KT_FAILF ("stderr: \"%.300s\"", err);
}

KT_MAIN (KT_CASE (free_of_a_libc_pointer_goes_to_libc_free),
         KT_CASE (realloc_of_a_libc_pointer_goes_to_libc_realloc),
         KT_CASE (usable_size_is_zero_for_pointers_not_from_the_pool),
         KT_CASE (invalid_free_into_metadata_is_reported_and_ignored),
         KT_CASE (free_into_a_released_chunk_is_reported_and_ignored),
         KT_CASE (free_at_a_unit_inside_a_dedicated_block_is_reported_and_ignored),
         KT_CASE (free_at_a_page_inside_a_dedicated_block_is_reported_and_ignored),
         KT_CASE (valid_frees_print_nothing))
