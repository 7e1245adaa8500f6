/* ckernel-test.h -- helpers shared by the ckernel bump arena tests:
   the process's mappings and descriptors (to prove that nothing
   leaks), a weights file with a known pattern, and VmFlags lookup.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#ifndef CKERNEL_TEST_H
#define CKERNEL_TEST_H 1

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckernel_alloc.h"

#define CKT_MIB ((size_t) 1 << 20)
#define CKT_HUGE (2 * CKT_MIB)

/* What the process has mapped: the number of lines of /proc/self/maps
   and the bytes they cover.  The bytes catch a leaked mapping even when
   the kernel merged it into a neighbour.  Read with read(2) and parsed
   with sscanf, so that counting allocates nothing.  */
struct ckt_vm
{
  size_t count;
  size_t bytes;
};

static inline bool
ckt_vm_usage (struct ckt_vm *vm)
{
  char buf[4096], head[80];
  size_t hlen = 0;
  ssize_t n;
  int fd = open ("/proc/self/maps", O_RDONLY | O_CLOEXEC);

  if (fd < 0)
    return false;
  vm->count = 0;
  vm->bytes = 0;
  while ((n = read (fd, buf, sizeof buf)) > 0)
    for (ssize_t i = 0; i < n; i++)
      if (buf[i] == '\n')
        {
          unsigned long lo, hi;
          head[hlen] = '\0';
          if (sscanf (head, "%lx-%lx", &lo, &hi) == 2)
            {
              vm->count++;
              vm->bytes += hi - lo;
            }
          hlen = 0;
        }
      else if (hlen < sizeof head - 1)
        head[hlen++] = buf[i];
  close (fd);
  return n == 0;
}

static inline bool
ckt_vm_equal (const struct ckt_vm *a, const struct ckt_vm *b)
{
  if (a->count == b->count && a->bytes == b->bytes)
    return true;
  printf ("note: mappings %zu -> %zu, bytes %zu -> %zu\n", a->count,
          b->count, a->bytes, b->bytes);
  return false;
}

/* The number of open descriptors, or -1.  */
static inline int
ckt_open_fds (void)
{
  DIR *dir = opendir ("/proc/self/fd");
  struct dirent *d;
  int n = 0;

  if (dir == NULL)
    return -1;
  while ((d = readdir (dir)) != NULL)
    if (d->d_name[0] != '.')
      n++;
  closedir (dir);
  return n;
}

/* Byte I of every weights file: varies within a page and from page to
   page, so a mapping at the wrong offset shows.  */
static inline unsigned char
ckt_weight_byte (size_t i)
{
  return (unsigned char) (i * 131 + 7 + (i >> 12) * 29);
}

/* Create a temporary file of SIZE pattern bytes; store its name in
   PATH (at least 64 bytes).  The caller unlinks it.  */
static inline bool
ckt_make_weights (char *path, size_t size)
{
  unsigned char chunk[8192];
  const char *dir = getenv ("TMPDIR");

  if (dir == NULL || dir[0] == '\0' || strlen (dir) > 32)
    dir = "/tmp";
  snprintf (path, 64, "%s/ckernel-weights-XXXXXX", dir);
  int fd = mkstemp (path);
  if (fd < 0)
    return false;
  for (size_t done = 0; done < size;)
    {
      size_t n = size - done < sizeof chunk ? size - done : sizeof chunk;
      for (size_t i = 0; i < n; i++)
        chunk[i] = ckt_weight_byte (done + i);
      if (write (fd, chunk, n) != (ssize_t) n)
        {
          close (fd);
          unlink (path);
          return false;
        }
      done += n;
    }
  return close (fd) == 0;
}

/* Whether SIZE bytes at P are the weights pattern from file offset 0.  */
static inline bool
ckt_is_weights (const unsigned char *p, size_t size)
{
  for (size_t i = 0; i < size; i++)
    if (p[i] != ckt_weight_byte (i))
      {
        printf ("note: byte %zu is %u, not %u\n", i, p[i],
                ckt_weight_byte (i));
        return false;
      }
  return true;
}

static inline bool
ckt_is_zero (const unsigned char *p, size_t size)
{
  for (size_t i = 0; i < size; i++)
    if (p[i] != 0)
      {
        printf ("note: byte %zu is %u, not 0\n", i, p[i]);
        return false;
      }
  return true;
}

/* Whether *A is what ck_bump_alloc_init leaves after a failure.  */
static inline bool
ckt_is_reset (const ck_bump_alloc_t *a)
{
  return a->base == NULL && a->total_size == 0 && a->weights_base == 0
         && a->activations_base == 0 && a->mapped_len == 0
         && a->weights_file_size == 0
         && a->mode == CK_BUMP_MODE_UNINITIALIZED;
}

/* Whether the mapping that contains ADDR has FLAG (like "hg") among the
   VmFlags of /proc/self/smaps.  */
static inline bool
ckt_vm_has_flag (const void *addr, const char *flag)
{
  FILE *f = fopen ("/proc/self/smaps", "r");
  char line[512];
  bool inside = false, found = false;
  uintptr_t a = (uintptr_t) addr;

  if (f == NULL)
    return false;
  while (fgets (line, sizeof line, f) != NULL)
    {
      unsigned long lo, hi;
      char dash;
      if (sscanf (line, "%lx%c%lx ", &lo, &dash, &hi) == 3 && dash == '-')
        inside = lo <= a && a < hi;
      else if (inside && strncmp (line, "VmFlags:", 8) == 0)
        {
          for (char *tok = strtok (line + 8, " \n"); tok != NULL;
               tok = strtok (NULL, " \n"))
            if (strcmp (tok, flag) == 0)
              found = true;
          break;
        }
    }
  fclose (f);
  return found;
}

#endif /* CKERNEL_TEST_H */
