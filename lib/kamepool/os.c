/* os.c -- the operating-system layer: aligned address-space
   reservation, returning pages, environment flags and diagnostics.
   Nothing here calls malloc.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kp_internal.h"

/* The last 32 MiB-aligned address given back by kp_os_unmap: the next
   aligned mapping asks for it first.  Relaxed: only a hint to mmap.  */
static _Atomic (uintptr_t) kp_os_hint;

_Atomic (size_t) kp_page_size;

/* Map SIZE bytes of fresh zeroed memory aligned to ALIGN (a power of
   two, at least a page), with FLAGS added to the mapping's (0 or
   MAP_NORESERVE): over-map, then trim both ends.  Returns NULL with
   errno ENOMEM when the kernel refuses.  */
static void *
kp_os_map_aligned_flags (size_t size, size_t align, int flags)
{
  int saved = errno;
  if (size > SIZE_MAX - align)
    {
      errno = ENOMEM;
      return NULL;
    }
  /* Try the exact size first, at the last aligned address that was
   unmapped (a hint, never MAP_FIXED: the kernel uses it only when the
   range is free), else where the kernel likes: it often places a
   mapping right after the previous one, which is aligned when the
   previous was.  So a 32 MiB block allocated and freed in a loop
   costs one mmap and one munmap, without the over-map and trim
   below.  Only a mapping aligned to a region takes the hint: a page
   of metadata (a heap record, the profile's tables) placed there
   would send the next region-aligned mapping the long way.  */
  uintptr_t hint = atomic_load_explicit (&kp_os_hint, memory_order_relaxed);
  if (align < KP_REGION_SIZE || (hint & (align - 1)) != 0)
    hint = 0;
  char *p = mmap ((void *) hint, size, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
  if (p == MAP_FAILED)
    {
      errno = ENOMEM;
      return NULL;
    }
  if (((uintptr_t) p & (align - 1)) == 0)
    {
      errno = saved;
      return p;
    }
  munmap (p, size);
  p = mmap (NULL, size + align, PROT_READ | PROT_WRITE,
            MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
  if (p == MAP_FAILED)
    {
      errno = ENOMEM;
      return NULL;
    }
  uintptr_t start = ((uintptr_t) p + align - 1) & ~(uintptr_t) (align - 1);
  size_t head = start - (uintptr_t) p;
  size_t tail = align - head;
  if (head != 0)
    munmap (p, head);
  if (tail != 0)
    munmap ((char *) start + size, tail);
  errno = saved;
  return (void *) start;
}

/* Address space that the pool commits page by page as it uses it (the
   regions, the heap records): MAP_NORESERVE, so that the kernel's
   overcommit accounting (vm.overcommit_memory=0) does not charge the
   whole reservation.  */
void *
kp_os_map_aligned (size_t size, size_t align)
{
  return kp_os_map_aligned_flags (size, align, MAP_NORESERVE);
}

/* A block's own mapping (above 4 MiB), all of it the caller's: without
   MAP_NORESERVE, so that the kernel applies its overcommit policy at
   the call, as it does to glibc's malloc.  A request no policy would
   let through (1 TiB on a machine with 24 GiB under
   vm.overcommit_memory=0, or more than the commit limit under 2) then
   fails here with ENOMEM, instead of succeeding and killing the
   program when it touches the memory; vm.overcommit_memory=1 still
   lets it through.  */
void *
kp_os_map_committed (size_t size, size_t align)
{
  return kp_os_map_aligned_flags (size, align, 0);
}

void
kp_os_unmap (void *p, size_t size)
{
  int saved = errno;
  if (munmap (p, size) == 0 && ((uintptr_t) p & KP_REGION_MASK) == 0)
    atomic_store_explicit (&kp_os_hint, (uintptr_t) p, memory_order_relaxed);
  errno = saved;
}

/* Give the pages of [P, P + SIZE) back to the kernel; the range stays
   mapped and reads as zeros afterwards.  */
void
kp_os_discard (void *p, size_t size)
{
  int saved = errno;
  madvise (p, size, MADV_DONTNEED);
  errno = saved;
  atomic_fetch_add_explicit (&kp_os_discards.calls, 1, memory_order_relaxed);
  atomic_fetch_add_explicit (&kp_os_discards.pages, size >> kp_page_shift (),
                             memory_order_relaxed);
}

/* Every kp_os_discard, ever: its madvise calls and the pages they gave
   back.  Relaxed adds by any thread, relaxed loads by the statistics;
   each call is a system call already.  */
kp_os_discards_t kp_os_discards;

size_t
kp_os_page_size_slow (void)
{
  long v = sysconf (_SC_PAGESIZE);
  size_t page = v > 0 ? (size_t) v : 4096;
  atomic_store_explicit (&kp_page_size, page, memory_order_relaxed);
  return page;
}

void
kp_os_write_stderr (const char *s)
{
  int saved = errno;
  size_t len = strlen (s);
  while (len > 0)
    {
      ssize_t w = write (2, s, len);
      if (w <= 0)
        break;
      s += w;
      len -= (size_t) w;
    }
  errno = saved;
}

/* Write out L's bytes (to L->fd; stderr when it is -1) and empty it.  */
void
kp_line_flush (kp_line_t *l)
{
  int saved = errno;
  const char *s = l->buf;
  size_t len = l->len;
  while (len > 0)
    {
      ssize_t w = write (l->fd < 0 ? 2 : l->fd, s, len);
      if (w <= 0)
        break;
      s += w;
      len -= (size_t) w;
    }
  l->len = 0;
  errno = saved;
}

void
kp_line_addn (kp_line_t *l, const char *s, size_t n)
{
  for (size_t i = 0; i < n; i++)
    {
      /* A full buffer goes out when it is a file's; a line for stderr
         is cut instead, so that it stays one write.  */
      if (l->len + 1 >= l->cap)
        {
          if (l->fd < 0)
            break;
          kp_line_flush (l);
        }
      l->buf[l->len++] = s[i];
    }
}

void
kp_line_add (kp_line_t *l, const char *s)
{
  kp_line_addn (l, s, strlen (s));
}

void
kp_line_num (kp_line_t *l, unsigned long long v)
{
  char tmp[24];
  int n = 0;
  do
    {
      tmp[n++] = (char) ('0' + v % 10);
      v /= 10;
    }
  while (v != 0);
  char out[24];
  for (int i = 0; i < n; i++)
    out[i] = tmp[n - 1 - i];
  kp_line_addn (l, out, (size_t) n);
}

/* S[0..N) as a JSON string, quotes included: " and \\ escaped, control
   bytes as \\u00XX.  */
void
kp_line_json_string (kp_line_t *l, const char *s, size_t n)
{
  kp_line_add (l, "\"");
  for (size_t i = 0; i < n; i++)
    {
      unsigned char c = (unsigned char) s[i];
      if (c == '"' || c == '\\')
        {
          char e[2] = { '\\', (char) c };
          kp_line_addn (l, e, 2);
        }
      else if (c < 0x20)
        {
          char e[6] = { '\\', 'u', '0', '0', "0123456789abcdef"[c >> 4],
                        "0123456789abcdef"[c & 15] };
          kp_line_addn (l, e, 6);
        }
      else
        kp_line_addn (l, (const char *) &s[i], 1);
    }
  kp_line_add (l, "\"");
}

/* Format P as 0x... into BUF (at least 19 bytes) without stdio.  */
static void
kp_format_pointer (char *buf, const void *p)
{
  uintptr_t v = (uintptr_t) p;
  char tmp[17];
  int n = 0;
  do
    {
      tmp[n++] = "0123456789abcdef"[v & 15];
      v >>= 4;
    }
  while (v != 0);
  buf[0] = '0';
  buf[1] = 'x';
  for (int i = 0; i < n; i++)
    buf[2 + i] = tmp[n - 1 - i];
  buf[2 + n] = '\0';
}

void
kp_line_hex (kp_line_t *l, uintptr_t v)
{
  char buf[20];
  kp_format_pointer (buf, (const void *) v);
  kp_line_add (l, buf);
}

/* One write for the whole line, so that the reports of two threads do
   not interleave.  */
void
kp_report (const char *call, const char *what, const void *p)
{
  char line[256], ptr[20];
  kp_format_pointer (ptr, p);
  const char *parts[] = { "kamepool: ", call, "(): ", what, " ", ptr, "\n" };
  size_t n = 0;
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
    for (const char *s = parts[i]; *s != '\0' && n + 1 < sizeof line; s++)
      line[n++] = *s;
  line[n] = '\0';
  kp_os_write_stderr (line);
}

_Noreturn void
kp_fatal (const char *file, int line, const char *what)
{
  char num[12];
  int n = 0;
  char tmp[12];
  unsigned v = (unsigned) line;
  do
    {
      tmp[n++] = (char) ('0' + v % 10);
      v /= 10;
    }
  while (v != 0);
  for (int i = 0; i < n; i++)
    num[i] = tmp[n - 1 - i];
  num[n] = '\0';
  kp_os_write_stderr ("kamepool: internal error at ");
  kp_os_write_stderr (file);
  kp_os_write_stderr (":");
  kp_os_write_stderr (num);
  kp_os_write_stderr (": ");
  kp_os_write_stderr (what);
  kp_os_write_stderr ("\n");
  abort ();
}
