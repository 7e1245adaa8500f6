/* bench.h -- helpers shared by the benchmark programs: the clock, a
   seeded generator, size distributions, command-line parsing, the
   barrier that keeps the compiler from deleting malloc/free pairs, and
   reading the RSS from /proc.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#ifndef KP_BENCH_H
#define KP_BENCH_H

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Everything here is static: each program is one translation unit plus
   this header, so there is no library to keep in step.  */

static inline double
kb_now (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

/* Wait for another thread: on two cores the partner may be waiting for
   the CPU we spin on, so yield after a short spin instead of burning
   the time slice.  */
static inline void
kb_backoff (unsigned *spins)
{
  if (++*spins >= 64)
    {
      sched_yield ();
      *spins = 0;
    }
}

/* GCC removes a malloc whose block is freed unused; telling it that the
   pointer escapes into memory it cannot see keeps every call real.  */
static inline void
kb_escape (void *p)
{
  __asm__ volatile ("" : : "r" (p) : "memory");
}

/* splitmix64: tiny, fast, and good enough to pick sizes and slots.  */
static inline uint64_t
kb_rand (uint64_t *state)
{
  uint64_t z = (*state += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

/* Uniform in [0, n), n > 0.  The modulo bias is far below the noise.  */
static inline uint64_t
kb_below (uint64_t *state, uint64_t n)
{
  return kb_rand (state) % n;
}

static inline unsigned
kb_log2 (size_t n)
{
  unsigned l = 0;
  while (n >>= 1)
    l++;
  return l;
}

/* Log-uniform in [lo, hi]: every octave gets the same share of requests,
   so small and large blocks both matter, as in real programs.  */
static inline size_t
kb_log_uniform (uint64_t *state, size_t lo, size_t hi)
{
  unsigned elo = kb_log2 (lo), ehi = kb_log2 (hi);
  unsigned e = elo + (unsigned) kb_below (state, ehi - elo + 1);
  size_t base = (size_t) 1 << e;
  size_t n = base + (size_t) kb_below (state, base);
  return n < lo ? lo : n > hi ? hi : n;
}

/* A Pareto law of shape 1 truncated to [lo, hi]: P(size > s) = lo / s,
   so half the requests are below 2 lo, one in 16 above 16 lo, and a
   long tail holds much of the bytes -- the skew of the values in a
   cache or of the nodes of a program's data.  Drawn as lo / u with u
   uniform in (0, 1], and drawn again above hi, so that the tail does
   not pile up at the cap.  */
static inline size_t
kb_pareto (uint64_t *state, size_t lo, size_t hi)
{
  for (;;)
    {
      double u = (double) ((kb_rand (state) >> 11) + 1) * 0x1p-53;
      double s = (double) lo / u;
      if (s < (double) hi + 1.0)
        return (size_t) s;
    }
}

static inline void
kb_die (const char *prog, const char *msg)
{
  fprintf (stderr, "%s: %s\n", prog, msg);
  exit (1);
}

static inline void *
kb_xcalloc (const char *prog, size_t n, size_t size)
{
  void *p = calloc (n, size);
  if (p == NULL)
    kb_die (prog, "out of memory for the benchmark's own tables");
  return p;
}

/* Command-line options: --name=VALUE or --name VALUE.  Sizes take a
   binary suffix (k, m, g); a bad value is an error, never a guess.  */
enum kb_opt_kind
{
  KB_SIZE,                      /* size_t, suffixes k m g */
  KB_DOUBLE,                    /* double */
  KB_FLAG                       /* int set to 1, takes no value */
};

struct kb_opt
{
  const char *name;
  enum kb_opt_kind kind;
  void *dst;
  const char *help;
};

static inline int
kb_parse_size (const char *s, size_t *out)
{
  char *end;
  unsigned long long v;
  unsigned shift = 0;

  if (*s == '\0' || *s == '-')
    return -1;
  errno = 0;
  v = strtoull (s, &end, 10);
  if (errno != 0 || end == s)
    return -1;
  switch (*end)
    {
    case '\0':
      break;
    case 'k': case 'K':
      shift = 10;
      end++;
      break;
    case 'm': case 'M':
      shift = 20;
      end++;
      break;
    case 'g': case 'G':
      shift = 30;
      end++;
      break;
    default:
      return -1;
    }
  if (*end != '\0' || v > (SIZE_MAX >> shift))
    return -1;
  *out = (size_t) v << shift;
  return 0;
}

static inline void
kb_usage (FILE *f, const char *prog, const char *what,
          const struct kb_opt *opts)
{
  fprintf (f, "Usage: %s [OPTION]...\n%s\n\n", prog, what);
  for (; opts->name != NULL; opts++)
    fprintf (f, "  --%-12s %s\n", opts->name, opts->help);
  fprintf (f, "  --%-12s %s\n", "help", "print this help and exit");
}

/* Parses argv into OPTS (terminated by a null name); exits 2 with a
   message on anything it does not understand.  */
static inline void
kb_parse (int argc, char **argv, const char *what, const struct kb_opt *opts)
{
  const char *prog = argv[0];
  int i;

  for (i = 1; i < argc; i++)
    {
      const char *arg = argv[i], *val = NULL, *eq;
      const struct kb_opt *o;
      size_t len;

      if (strcmp (arg, "--help") == 0)
        {
          kb_usage (stdout, prog, what, opts);
          exit (0);
        }
      if (strncmp (arg, "--", 2) != 0)
        {
          fprintf (stderr, "%s: unexpected argument '%s'\n", prog, arg);
          exit (2);
        }
      arg += 2;
      eq = strchr (arg, '=');
      len = eq != NULL ? (size_t) (eq - arg) : strlen (arg);
      for (o = opts; o->name != NULL; o++)
        if (strlen (o->name) == len && strncmp (o->name, arg, len) == 0)
          break;
      if (o->name == NULL)
        {
          fprintf (stderr, "%s: unknown option '--%.*s' (try --help)\n",
                   prog, (int) len, arg);
          exit (2);
        }
      if (o->kind == KB_FLAG)
        {
          if (eq != NULL)
            {
              fprintf (stderr, "%s: --%s takes no value\n", prog, o->name);
              exit (2);
            }
          *(int *) o->dst = 1;
          continue;
        }
      if (eq != NULL)
        val = eq + 1;
      else if (i + 1 < argc)
        val = argv[++i];
      else
        {
          fprintf (stderr, "%s: --%s needs a value\n", prog, o->name);
          exit (2);
        }
      if (o->kind == KB_SIZE)
        {
          if (kb_parse_size (val, (size_t *) o->dst) != 0)
            {
              fprintf (stderr, "%s: --%s: '%s' is not a size\n",
                       prog, o->name, val);
              exit (2);
            }
        }
      else
        {
          char *end;
          double d;
          errno = 0;
          d = strtod (val, &end);
          if (errno != 0 || end == val || *end != '\0' || !(d >= 0))
            {
              fprintf (stderr, "%s: --%s: '%s' is not a number >= 0\n",
                       prog, o->name, val);
              exit (2);
            }
          *(double *) o->dst = d;
        }
    }
}

/* Fails with a message when a parameter is outside what the program can
   run; the driver shows the message instead of a made-up number.  */
static inline void
kb_require (const char *prog, int ok, const char *what)
{
  if (!ok)
    {
      fprintf (stderr, "%s: %s\n", prog, what);
      exit (2);
    }
}

/* A field of /proc/self/status in KiB ("VmRSS", "VmHWM", "VmSize").
   Read with plain read(2) into a stack buffer: stdio would malloc, and
   the point is to see the heap, not to disturb it.  */
static inline long
kb_status_kib (const char *prog, const char *field)
{
  char buf[4096], *p;
  size_t len = strlen (field), got = 0;
  ssize_t n;
  int fd = open ("/proc/self/status", O_RDONLY);

  if (fd < 0)
    kb_die (prog, "cannot open /proc/self/status");
  while (got < sizeof buf - 1
         && (n = read (fd, buf + got, sizeof buf - 1 - got)) > 0)
    got += (size_t) n;
  close (fd);
  buf[got] = '\0';
  for (p = buf; p != NULL && *p != '\0'; p = strchr (p, '\n'))
    {
      if (*p == '\n')
        p++;
      if (strncmp (p, field, len) == 0 && p[len] == ':')
        return strtol (p + len + 1, NULL, 10);
    }
  kb_die (prog, "a field is missing from /proc/self/status");
  return -1;
}

/* calloc may hand out zero pages not yet resident, and GCC drops a
   memset of zeros after calloc: this writes each page of [P, P + N)
   through a volatile pointer, so that a program's own tables are in a
   baseline RSS taken next, and not counted as heap later when the
   benchmark first touches them.  */
static inline void
kb_touch (void *p, size_t n)
{
  volatile char *c = p;
  size_t off;
  for (off = 0; off < n; off += 4096)
    c[off] = 0;
  if (n != 0)
    c[n - 1] = 0;
}

/* Sleeps SECONDS, through signals.  */
static inline void
kb_sleep (double seconds)
{
  struct timespec nap;
  nap.tv_sec = (time_t) seconds;
  nap.tv_nsec = (long) ((seconds - (double) nap.tv_sec) * 1e9);
  while (nanosleep (&nap, &nap) != 0)
    continue;
}

/* Blocks whose contents are checked at free, for the programs that
   hand blocks between threads (churn, xstress): a block lost, handed
   out twice or overwritten must stop the run, not make it fast.

   A block of N >= 8 bytes at address P starts with N ^ kb_mix (P), so
   the thread that frees it needs only the pointer; the other bytes
   follow a pattern of P and N.  A block of 1 to 7 bytes has no room
   for its length: the handle carries it in the top byte of the
   pointer, which no x86-64 or AArch64 user address uses.  DENSE bytes
   from the start are all written; past them one word per 4 KiB page,
   and the last word, so that a large block is faulted in as a program
   that uses it would be, without making the run a test of memset.  */
typedef uintptr_t kb_handle;

static inline uint64_t
kb_mix (uint64_t x)
{
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
  return x ^ (x >> 31);
}

/* The word of the pattern at offset OFF of a block keyed by KEY.  */
static inline uint64_t
kb_word (uint64_t key, size_t off)
{
  return key + (uint64_t) off * 0x9e3779b97f4a7c15u;
}

/* Runs BODY for each checked piece of a block of N bytes, with OFF its
   offset and WIDTH its width: every byte of a block under 8 bytes;
   otherwise the words from offset 8 up to DENSE, one word per page
   after that, and the last word.  A macro, so that fill and check walk
   the same offsets and both stay as fast as an open-coded loop.  */
#define KB_WALK(n, dense, off, width, body)                             \
  do                                                                    \
    {                                                                   \
      size_t kb_n_ = (n), kb_d_ = (dense) < kb_n_ ? (dense) : kb_n_;    \
      size_t off, width;                                                \
      if (kb_n_ < 8)                                                    \
        {                                                               \
          width = 1;                                                    \
          for (off = 0; off < kb_n_; off++)                             \
            body;                                                       \
          break;                                                        \
        }                                                               \
      width = 8;                                                        \
      for (off = 8; off + 8 <= kb_d_; off += 8)                         \
        body;                                                           \
      for (off = (off + 4095) & ~(size_t) 4095; off + 16 <= kb_n_;      \
           off += 4096)                                                 \
        body;                                                           \
      if (kb_n_ >= 16 && kb_n_ - 8 >= kb_d_)                            \
        {                                                               \
          off = kb_n_ - 8;                                              \
          body;                                                         \
        }                                                               \
    }                                                                   \
  while (0)

/* Allocates N >= 1 bytes, writes them, and returns the handle.  */
static inline kb_handle
kb_block_new (const char *prog, size_t n, size_t dense)
{
  unsigned char *p = malloc (n);
  uint64_t key;

  if (p == NULL)
    kb_die (prog, "malloc failed");
  if ((uintptr_t) p >> 56 != 0)
    kb_die (prog, "malloc returned an address above 2^56; cannot tag it");
  key = kb_mix ((uintptr_t) p ^ ((uint64_t) n << 40));
  if (n >= 8)
    {
      uint64_t h = (uint64_t) n ^ kb_mix ((uintptr_t) p);
      memcpy (p, &h, 8);
    }
  KB_WALK (n, dense, off, width,
           {
             uint64_t v = kb_word (key, off);
             memcpy (p + off, &v, width);
           });
  return (uintptr_t) p | (n < 8 ? (uintptr_t) n << 56 : 0);
}

/* Checks the block of handle H, made with the same DENSE, and frees
   it; reports the first bad byte and aborts on corruption.  Returns
   the block's size.  */
static inline size_t
kb_block_free (const char *prog, kb_handle h, size_t dense, size_t max)
{
  unsigned char *p = (unsigned char *) (h & (((uintptr_t) 1 << 56) - 1));
  size_t n = (size_t) (h >> 56);
  uint64_t key;

  if (n == 0)
    {
      uint64_t w;
      memcpy (&w, p, 8);
      w ^= kb_mix ((uintptr_t) p);
      if (w < 8 || w > max)
        {
          fprintf (stderr, "%s: block %p: its length word is corrupt"
                   " (%#llx)\n", prog, (void *) p, (unsigned long long) w);
          abort ();
        }
      n = (size_t) w;
    }
  key = kb_mix ((uintptr_t) p ^ ((uint64_t) n << 40));
  KB_WALK (n, dense, off, width,
           {
             uint64_t v = kb_word (key, off);
             uint64_t got = 0;
             memcpy (&got, p + off, width);
             if (width == 1 ? (unsigned char) got != (unsigned char) v
                 : got != v)
               {
                 fprintf (stderr, "%s: block %p of %zu bytes is corrupt"
                          " at offset %zu\n", prog, (void *) p, n, off);
                 abort ();
               }
           });
  free (p);
  return n;
}

#endif /* KP_BENCH_H */
