/* counting_alloc.h -- a test allocator for the tinyllm tests, installed
   through tl_set_allocator: it counts hook calls and live blocks (a
   test that ends with a live block fails as a leak), can fail chosen
   calls, and can hand out blocks that are only 16-aligned.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#ifndef COUNTING_ALLOC_H
#define COUNTING_ALLOC_H 1

#include <stdint.h>
#include <stdlib.h>
#include <tinyllm/abi.h>
#include "kptest.h"

#define CA_MAX_LIVE 8192

struct ca_block
{
  void *raw;            /* What posix_memalign returned.  */
  unsigned char *user;  /* What the hook returned.  */
  size_t n;
  size_t align;
};

static struct
{
  struct ca_block live[CA_MAX_LIVE];
  size_t n_live;
  size_t live_bytes;
  size_t alloc_calls;   /* Every call of the alloc hook, failed too.  */
  size_t free_calls;
  size_t injected;      /* Failures injected so far.  */
  size_t fail_at;       /* Fail the alloc call with this index...  */
  size_t fail_from;     /* ...and every call from this index on.  */
  int sloppy;           /* Hand out blocks 16 bytes past a 4096-byte
                           boundary, whatever the requested alignment.  */
  int misuse;           /* A wrong CTX, a free of a pointer never
                           handed out, or a full table.  */
  size_t last_n, last_align;
} ca;

static const int ca_ctx_tag;

static inline void *
ca_alloc (void *ctx, size_t n, size_t align)
{
  size_t call = ca.alloc_calls++;
  if (ctx != &ca_ctx_tag)
    ca.misuse = 1;
  ca.last_n = n;
  ca.last_align = align;
  if (ca.n_live == CA_MAX_LIVE)
    {
      ca.misuse = 1;
      return NULL;
    }
  if (call == ca.fail_at || call >= ca.fail_from)
    {
      ca.injected++;
      return NULL;
    }
  size_t a = align < 64 ? 64 : align;
  size_t shift = 0;
  if (ca.sloppy)
    {
      a = 4096;
      shift = 16;
    }
  void *raw;
  if (posix_memalign (&raw, a, n + shift) != 0)
    return NULL;
  struct ca_block *b = &ca.live[ca.n_live++];
  b->raw = raw;
  b->user = (unsigned char *) raw + shift;
  b->n = n;
  b->align = align;
  ca.live_bytes += n;
  return b->user;
}

static inline void
ca_free (void *ctx, void *p)
{
  ca.free_calls++;
  if (ctx != &ca_ctx_tag)
    ca.misuse = 1;
  for (size_t i = 0; i < ca.n_live; i++)
    if (ca.live[i].user == p)
      {
        free (ca.live[i].raw);
        ca.live_bytes -= ca.live[i].n;
        ca.live[i] = ca.live[--ca.n_live];
        return;
      }
  ca.misuse = 1;
}

/* Reset the counters and install the counting hooks; nothing fails
   until ca_fail_call or ca_fail_all_from says so.  */
static inline bool
ca_install (void)
{
  memset (&ca, 0, sizeof ca);
  ca.fail_at = SIZE_MAX;
  ca.fail_from = SIZE_MAX;
  tl_allocator h = { ca_alloc, ca_free, (void *) &ca_ctx_tag };
  return tl_set_allocator (&h) == TL_OK;
}

/* Make the alloc call K calls from now fail (0: the next one).  */
static inline void
ca_fail_call (size_t k)
{
  ca.fail_at = ca.alloc_calls + k;
}

/* Make every alloc call from now on fail.  */
static inline void
ca_fail_all_from_now (void)
{
  ca.fail_from = ca.alloc_calls;
}

static inline void
ca_fail_none (void)
{
  ca.fail_at = SIZE_MAX;
  ca.fail_from = SIZE_MAX;
}

/* The live hook block that holds address P, or NULL.  */
static inline const struct ca_block *
ca_block_of (const void *p)
{
  const unsigned char *q = p;
  for (size_t i = 0; i < ca.n_live; i++)
    if (q >= ca.live[i].user && q < ca.live[i].user + ca.live[i].n)
      return &ca.live[i];
  return NULL;
}

/* End a test: no block may be live and every free must have matched
   an allocation.  */
#define CA_CHECK_NO_LEAK()                                              \
  do {                                                                  \
    KT_CHECK_EQ (ca.misuse, 0);                                         \
    if (ca.n_live != 0)                                                 \
      KT_FAILF ("leak: %zu hook blocks (%zu bytes) still live",         \
                ca.n_live, ca.live_bytes);                              \
  } while (0)

#endif /* COUNTING_ALLOC_H */
