/* options.c -- every setting of libkamepool in one place: its key in
   KAME_POOL_CONF, its own environment variable, its forms, its default,
   its setter and its man page; the reading and checking of the
   environment; the verbose list of the settings in effect.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   The settings are the rows of kp_option_table below; kamepool(7)
   documents each key and variable.  A row names its key, its variable,
   its kind (a switch, words and/or a number, a size, a path), the
   setting it writes and the forms it accepts.  Adding a setting is
   adding a row (and its kp_*_setting_t, its ENVIRONMENT entry and a
   test).  Settings with a setter (kame_pool_set_max_bytes(3) ...)
   write the same kp_*_setting_t, and a setter called before the first
   allocation wins over the environment (KP_FROM_PROGRAM).

   The package's other environment variables: libckarena's
   CK_BUMP_FORCE_MIXED and CK_BUMP_DISABLE_MIXED (ckernel_alloc.c, the
   same words through lib/env-flag.h), kamepool-run's KAMEPOOL_LIBRARY
   and KAMEPOOL_CXX_LIBRARY, and the test suite's KAME_POOL_STRESS_LONG
   and KAME_POOL_STRESS_SECONDS: kp_option_others lists those under our
   prefixes, so that they are not reported as unknown.

   Every setter returns 0, or an errno value (EINVAL) when it refuses
   the value and leaves the setting as it was; no setter sets errno.

   The environment is read once, by the first call of kp_options_read:
   kp_process_init's, or, for a process that never allocated, that of
   the report at exit or of a getter.  This runs inside malloc's first
   call, so nothing here allocates: getenv and environ, fixed buffers,
   write(2).  The settings are written by that reading (before it
   publishes kp_options_state, release) and by their setters at any
   time; every reader loads them relaxed, each on its own: no setting
   orders any other memory.  The path of stats_file is a plain array,
   written before the release and read after an acquire.  */

#include <config.h>

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kp_internal.h"
#include "env-flag.h"

kp_int_setting_t kp_decay_ms = { 500, KP_FROM_DEFAULT };
kp_int_setting_t kp_background_purge = { 1, KP_FROM_DEFAULT };
kp_int_setting_t kp_misuse_abort = { 1, KP_FROM_DEFAULT };
kp_int_setting_t kp_stats_at_exit;
kp_int_setting_t kp_stats_format;
kp_int_setting_t kp_verbose;
kp_int_setting_t kp_cap_strict;
kp_size_setting_t kp_max_bytes;
kp_size_setting_t kp_cache_cap = { KP_CACHE_CAP_DEFAULT, KP_FROM_DEFAULT };
kp_int_setting_t kp_thread_exit_reclaim = { 1, KP_FROM_DEFAULT };
kp_int_setting_t kp_thp_env = { KP_HUGEPAGE_DEFAULT ? KAME_POOL_THP_ALWAYS
                                                    : KAME_POOL_THP_SMALL,
                               KP_FROM_DEFAULT };
kp_int_setting_t kp_numa_mode;
kp_int_setting_t kp_test_nodes;
static char kp_stats_path[KP_PATH_MAX];
kp_int_setting_t kp_prof_sample_bytes = { KP_PROF_SAMPLE_DEFAULT,
                                          KP_FROM_DEFAULT };
static char kp_prof_prefix[KP_PATH_MAX];
kp_int_setting_t kp_guard_sample_bytes = { KP_GUARD_SAMPLE_DEFAULT,
                                           KP_FROM_DEFAULT };
kp_int_setting_t kp_guard_slot_count = { KP_GUARD_SLOTS_DEFAULT,
                                         KP_FROM_DEFAULT };

/* ---- The table ----------------------------------------------------------- */

typedef enum kp_option_kind
{
  KP_OPT_SWITCH,                /* env-flag.h's words; an int 0 or 1 */
  KP_OPT_INT,                   /* WORDS, or a number in [MIN, MAX] */
  KP_OPT_SIZE,                  /* bytes, or K, M, G; a size_t */
  KP_OPT_PATH                   /* a file name, %p for the pid */
} kp_option_kind_t;

typedef struct kp_option_word
{
  const char *word;             /* any case */
  int value;
} kp_option_word_t;

typedef struct kp_option
{
  const char *key;              /* in KAME_POOL_CONF */
  const char *env;              /* its own variable */
  kp_option_kind_t kind;
  void *setting;                /* kp_int_setting_t, kp_size_setting_t,
                                   or a char[KP_PATH_MAX] (PATH) */
  const char *forms;            /* what the reports say it accepts */
  const kp_option_word_t *words; /* INT: NULL-terminated; the first word
                                   of a value names it in the reports */
  long min, max;                /* INT: the numbers (none if min > max) */
  bool configure;               /* the default is configure's choice */
} kp_option_t;

static const kp_option_word_t kp_decay_words[] =
  { { "off", -1 }, { "never", -1 }, { NULL, 0 } };
static const kp_option_word_t kp_misuse_words[] =
  { { "abort", 1 }, { "report", 0 }, { NULL, 0 } };
static const kp_option_word_t kp_format_words[] =
  { { "text", KP_STATS_TEXT }, { "json", KP_STATS_JSON }, { NULL, 0 } };
static const kp_option_word_t kp_thp_words[] =
  {
    { "always", KAME_POOL_THP_ALWAYS }, { "system", KAME_POOL_THP_SYSTEM },
    { "never", KAME_POOL_THP_NEVER }, { "small", KAME_POOL_THP_SMALL },
    { "1", KAME_POOL_THP_ALWAYS }, { "yes", KAME_POOL_THP_ALWAYS },
    { "true", KAME_POOL_THP_ALWAYS }, { "on", KAME_POOL_THP_ALWAYS },
    { "0", KAME_POOL_THP_SYSTEM }, { "no", KAME_POOL_THP_SYSTEM },
    { "false", KAME_POOL_THP_SYSTEM }, { "off", KAME_POOL_THP_SYSTEM },
    { NULL, 0 }
  };
static const kp_option_word_t kp_off_words[] =
  { { "off", 0 }, { NULL, 0 } };
static const kp_option_word_t kp_numa_words[] =
  { { "auto", 0 }, { "off", -1 }, { "on", 1 }, { NULL, 0 } };

#define KP_SIZE_FORMS "a number of bytes, or of K, M or G (KiB, MiB, GiB)"

/* The rows, with their defaults, setters and pages:

   key                  setting                 default    setter (page)
   stats                kp_stats_at_exit        off        -  (kamepool(7))
   stats_file           kp_stats_path           stderr     -  (kamepool(7))
   stats_format         kp_stats_format         text       -  (kamepool(7))
   verbose              kp_verbose              off        -  (kamepool(7))
   decay_ms             kp_decay_ms             500        -  (kamepool(7))
   background_purge     kp_background_purge     on         -  (kamepool(7); purge.c)
   on_misuse            kp_misuse_abort         abort      mallopt M_CHECK_ACTION
                                                           (kamepool_mallopt(3))
   strict_cap           kp_cap_strict           off        kame_pool_set_cap_policy(3)
   max_bytes            kp_max_bytes            no cap     kame_pool_set_max_bytes(3)
   large_cache_cap      kp_cache_cap            128 MiB    kame_pool_set_large_cache_cap(3),
                                                           mallopt M_TRIM_THRESHOLD
   thread_exit_reclaim  kp_thread_exit_reclaim  on         kame_pool_set_thread_exit_reclaim(3)
   hugepage             kp_thp_env              configure  kame_pool_set_thp_policy(3)
                        (the policy itself is policy.c's, which reads
                        this through kp_option_thp)
   numa                 kp_numa_mode            auto       -  (kamepool(7); numa.c)
   test_nodes           kp_test_nodes           0          -  (kame_pool_get_numa_stats(3))
   prof                 kp_prof_prefix          off        -  (kamepool(7); prof.c)
   prof_sample          kp_prof_sample_bytes    524288     -  (kamepool(7); prof.c)
   guard_sample         kp_guard_sample_bytes   128 MiB    -  (kamepool(7); guard.c)
   guard_slots          kp_guard_slot_count     128        -  (kamepool(7); guard.c)  */
static const kp_option_t kp_option_table[] =
  {
    { "stats", "KAME_POOL_STATS", KP_OPT_SWITCH, &kp_stats_at_exit,
      ENV_FLAG_FORMS, NULL, 1, 0, false },
    { "stats_file", "KAME_POOL_STATS_FILE", KP_OPT_PATH, kp_stats_path,
      "a file name of at most 255 bytes, %p for the pid, %% for %",
      NULL, 1, 0, false },
    { "stats_format", "KAME_POOL_STATS_FORMAT", KP_OPT_INT, &kp_stats_format,
      "text or json", kp_format_words, 1, 0, false },
    { "verbose", "KAME_POOL_VERBOSE", KP_OPT_SWITCH, &kp_verbose,
      ENV_FLAG_FORMS, NULL, 1, 0, false },
    { "decay_ms", "KAME_POOL_DECAY_MS", KP_OPT_INT, &kp_decay_ms,
      "a number of milliseconds from 0 to 3600000, off or never",
      kp_decay_words, 0, 3600000, false },
    { "background_purge", "KAME_POOL_BACKGROUND_PURGE", KP_OPT_SWITCH,
      &kp_background_purge, ENV_FLAG_FORMS, NULL, 1, 0, false },
    { "on_misuse", "KAME_POOL_ON_MISUSE", KP_OPT_INT, &kp_misuse_abort,
      "abort or report", kp_misuse_words, 1, 0, false },
    { "strict_cap", "KAME_POOL_STRICT_CAP", KP_OPT_SWITCH, &kp_cap_strict,
      ENV_FLAG_FORMS, NULL, 1, 0, false },
    { "max_bytes", "KAME_POOL_MAX_BYTES", KP_OPT_SIZE, &kp_max_bytes,
      KP_SIZE_FORMS ", 0 for no cap", NULL, 1, 0, false },
    { "large_cache_cap", "KAME_POOL_LARGE_CACHE_CAP", KP_OPT_SIZE,
      &kp_cache_cap, KP_SIZE_FORMS, NULL, 1, 0, false },
    { "thread_exit_reclaim", "KAME_POOL_THREAD_EXIT_RECLAIM", KP_OPT_SWITCH,
      &kp_thread_exit_reclaim, ENV_FLAG_FORMS, NULL, 1, 0, false },
    { "hugepage", "KAME_POOL_HUGEPAGE", KP_OPT_INT, &kp_thp_env,
      "always, small, system, never, or " ENV_FLAG_FORMS,
      kp_thp_words, 1, 0, true },
    { "numa", "KAME_POOL_NUMA", KP_OPT_INT, &kp_numa_mode,
      "auto, off or on", kp_numa_words, 1, 0, false },
    { "test_nodes", "KAME_POOL_TEST_NODES", KP_OPT_INT, &kp_test_nodes,
      "a number of simulated NUMA nodes from 0 to 16 (0 and 1: none)",
      NULL, 0, 16, false },
    { "prof", "KAME_POOL_PROF", KP_OPT_PATH, kp_prof_prefix,
      "a file name prefix of at most 255 bytes (empty: off)",
      NULL, 1, 0, false },
    { "prof_sample", "KAME_POOL_PROF_SAMPLE", KP_OPT_INT,
      &kp_prof_sample_bytes,
      "a number of bytes from 1 to 1073741824", NULL, 1, 1 << 30, false },
    { "guard_sample", "KAME_POOL_GUARD_SAMPLE", KP_OPT_INT,
      &kp_guard_sample_bytes,
      "a number of bytes from 0 (off) to 1073741824, or off",
      kp_off_words, 0, 1 << 30, false },
    { "guard_slots", "KAME_POOL_GUARD_SLOTS", KP_OPT_INT,
      &kp_guard_slot_count, "a number of slots from 1 to 4096",
      NULL, 1, KP_GUARD_SLOTS_MAX, false },
  };
#define KP_NOPTIONS (sizeof kp_option_table / sizeof kp_option_table[0])

/* The package's variables under our prefixes that are not settings.  */
static const char *const kp_option_others[] =
  {
    "KAME_POOL_CONF", "KAMEPOOL_LIBRARY", "KAMEPOOL_CXX_LIBRARY",
    "KAME_POOL_STRESS_LONG", "KAME_POOL_STRESS_SECONDS", NULL
  };

/* Where each setting's value came from (verbose), and whether a
   setter set it: the setter's value then stays.  */
static const char *const kp_from_names[] =
  { "default", "configure", "KAME_POOL_CONF", "variable", "program" };
static unsigned char kp_option_from[KP_NOPTIONS];

/* A value as the user wrote it, at most 200 bytes of it: the line
   stays one line of a readable length.  */
static void
kp_line_value (kp_line_t *l, const char *s, size_t n)
{
  if (n > 200)
    {
      kp_line_addn (l, s, 200);
      kp_line_add (l, "...");
    }
  else
    kp_line_addn (l, s, n);
}

/* ---- Parsing ------------------------------------------------------------- */

/* S[0..N) equals WORD, in any case.  */
static bool
kp_word_is (const char *s, size_t n, const char *word)
{
  return strlen (word) == n && strncasecmp (s, word, n) == 0;
}

/* A decimal number without sign or spaces, at most MAX; false for
   anything else.  */
static bool
kp_parse_number (const char *s, size_t n, unsigned long long max,
                 unsigned long long *out)
{
  if (n == 0)
    return false;
  unsigned long long v = 0;
  for (size_t i = 0; i < n; i++)
    {
      if (s[i] < '0' || s[i] > '9')
        return false;
      unsigned d = (unsigned) (s[i] - '0');
      if (v > (max - d) / 10)
        return false;
      v = v * 10 + d;
    }
  *out = v;
  return true;
}

/* Bytes, or a number of K, M or G (1024, 1048576, 1073741824), in
   either case; at most SIZE_MAX.  */
static bool
kp_parse_size (const char *s, size_t n, size_t *out)
{
  unsigned shift = 0;
  if (n > 1)
    switch (s[n - 1])
      {
      case 'k': case 'K': shift = 10; break;
      case 'm': case 'M': shift = 20; break;
      case 'g': case 'G': shift = 30; break;
      default: break;
      }
  unsigned long long v;
  if (!kp_parse_number (s, shift != 0 ? n - 1 : n, SIZE_MAX >> shift, &v))
    return false;
  *out = (size_t) v << shift;
  return true;
}

/* A stats_file name: shorter than KP_PATH_MAX, and every % followed by
   p or %.  */
static bool
kp_parse_path (const char *s, size_t n)
{
  if (n >= KP_PATH_MAX)
    return false;
  for (size_t i = 0; i < n; i++)
    if (s[i] == '%')
      {
        if (i + 1 == n || (s[i + 1] != 'p' && s[i + 1] != '%'))
          return false;
        i++;
      }
  return true;
}

/* Append the value of row O in effect to L, in a form its key takes.  */
static void
kp_option_format (kp_line_t *l, const kp_option_t *o)
{
  switch (o->kind)
    {
    case KP_OPT_SWITCH:
      kp_line_add (l, kp_setting ((kp_int_setting_t *) o->setting)
                      ? "on" : "off");
      return;
    case KP_OPT_INT:
      {
        int v = kp_setting ((kp_int_setting_t *) o->setting);
        for (const kp_option_word_t *w = o->words; w && w->word; w++)
          if (w->value == v)
            {
              kp_line_add (l, w->word);
              return;
            }
        kp_line_num (l, (unsigned long long) v);
        return;
      }
    case KP_OPT_SIZE:
      kp_line_num (l, kp_setting ((kp_size_setting_t *) o->setting));
      return;
    case KP_OPT_PATH:
      kp_line_add (l, (const char *) o->setting);
      return;
    }
}

/* The value V[0..N) for row O, from FROM (KP_FROM_CONF or
   KP_FROM_VARIABLE): store it, or write one line saying what was
   wrong and what stays.  */
static void
kp_option_take (const kp_option_t *o, const char *v, size_t n, int from)
{
  unsigned idx = (unsigned) (o - kp_option_table);
  if (kp_option_from[idx] == KP_FROM_PROGRAM)
    return;                     /* a setter got in first */
  bool ok = false;
  switch (o->kind)
    {
    case KP_OPT_SWITCH:
      {
        char word[8];
        if (n < sizeof word)
          {
            memcpy (word, v, n);
            word[n] = '\0';
            int f = env_flag_parse (word);
            if (f >= 0)
              {
                kp_setting_put ((kp_int_setting_t *) o->setting, f);
                ok = true;
              }
          }
        break;
      }
    case KP_OPT_INT:
      {
        for (const kp_option_word_t *w = o->words; w && w->word && !ok; w++)
          if (kp_word_is (v, n, w->word))
            {
              kp_setting_put ((kp_int_setting_t *) o->setting, w->value);
              ok = true;
            }
        unsigned long long num;
        if (!ok && o->min <= o->max
            && kp_parse_number (v, n, (unsigned long long) o->max, &num)
            && num >= (unsigned long long) o->min)
          {
            kp_setting_put ((kp_int_setting_t *) o->setting, (int) num);
            ok = true;
          }
        break;
      }
    case KP_OPT_SIZE:
      {
        size_t size;
        if (kp_parse_size (v, n, &size))
          {
            if (o->setting == (void *) &kp_max_bytes)
              size = kp_max_bytes_round (size);
            kp_setting_put ((kp_size_setting_t *) o->setting, size);
            ok = true;
          }
        break;
      }
    case KP_OPT_PATH:
      /* Only stats_file expands %p; the profile's prefix is taken as
         it is (prof.c appends the pid itself).  */
      if (o->setting == (void *) kp_stats_path ? kp_parse_path (v, n)
          : n < KP_PATH_MAX)
        {
          memcpy (o->setting, v, n);
          ((char *) o->setting)[n] = '\0';
          ok = true;
        }
      break;
    }
  if (ok)
    {
      kp_option_from[idx] = (unsigned char) from;
      return;
    }
  char buf[512];
  kp_line_t l = KP_LINE (buf, -1);
  kp_line_add (&l, "kamepool: ");
  if (from == KP_FROM_CONF)
    {
      kp_line_add (&l, "KAME_POOL_CONF: ");
      kp_line_add (&l, o->key);
      kp_line_add (&l, ":");
    }
  else
    {
      kp_line_add (&l, o->env);
      kp_line_add (&l, "=");
    }
  kp_line_value (&l, v, n);
  kp_line_add (&l, ": expected ");
  kp_line_add (&l, o->forms);
  kp_line_add (&l, "; keeping ");
  kp_option_format (&l, o);
  kp_line_add (&l, "\n");
  kp_line_flush (&l);
}

/* ---- Names that are not ours ----------------------------------------------- */

/* The edit distance of A[0..N) and B (insertions, deletions and
   substitutions; names are short, longer ones count as far).  */
static unsigned
kp_distance (const char *a, size_t n, const char *b)
{
  size_t m = strlen (b);
  if (n > 63 || m > 63)
    return UINT_MAX;
  unsigned row[64];
  for (size_t j = 0; j <= m; j++)
    row[j] = (unsigned) j;
  for (size_t i = 1; i <= n; i++)
    {
      unsigned diag = row[0];
      row[0] = (unsigned) i;
      for (size_t j = 1; j <= m; j++)
        {
          unsigned up = row[j];
          unsigned best = diag + (a[i - 1] != b[j - 1]);
          if (up + 1 < best)
            best = up + 1;
          if (row[j - 1] + 1 < best)
            best = row[j - 1] + 1;
          row[j] = best;
          diag = up;
        }
    }
  return row[m];
}

/* Keep CAND in *BEST if it is nearer to S[0..N) than *BEST: at most two
   edits away, or the one a prefix of the other (KAME_POOL_DECAY for
   KAME_POOL_DECAY_MS).  SKIP leading bytes (the prefix) do not count
   for the latter.  */
static void
kp_nearer (const char *s, size_t n, size_t skip, const char *cand,
           const char **best, unsigned *best_d)
{
  unsigned d = kp_distance (s, n, cand);
  size_t m = strlen (cand);
  size_t k = n < m ? n : m;
  bool prefix = k >= skip + 3 && strncmp (s, cand, k) == 0;
  if ((d <= 2 || prefix) && d < *best_d)
    {
      *best = cand;
      *best_d = d;
    }
}

/* One line for a variable NAME[0..N) under our prefixes that is not
   ours, with the nearest real name.  */
static void
kp_option_unknown_variable (const char *name, size_t n)
{
  const char *best = NULL;
  unsigned best_d = UINT_MAX;
  size_t skip = strncmp (name, "KAMEPOOL_", 9) == 0 ? 9 : 10;
  for (size_t i = 0; i < KP_NOPTIONS; i++)
    kp_nearer (name, n, skip, kp_option_table[i].env, &best, &best_d);
  for (size_t i = 0; kp_option_others[i] != NULL; i++)
    kp_nearer (name, n, skip, kp_option_others[i], &best, &best_d);
  /* KAMEPOOL_X for KAME_POOL_X: the wrapper's variables are spelled
     without the underscore, so the slip is likely.  */
  if (skip == 9 && best == NULL)
    for (size_t i = 0; i < KP_NOPTIONS; i++)
      if (strlen (kp_option_table[i].env) == n + 1
          && strncmp (kp_option_table[i].env + 10, name + 9, n - 9) == 0)
        best = kp_option_table[i].env;
  char buf[512];
  kp_line_t l = KP_LINE (buf, -1);
  kp_line_add (&l, "kamepool: ");
  kp_line_value (&l, name, n);
  kp_line_add (&l, " is not a kamepool variable");
  if (best != NULL)
    {
      kp_line_add (&l, " (did you mean ");
      kp_line_add (&l, best);
      kp_line_add (&l, "?)");
    }
  kp_line_add (&l, "; ignoring it\n");
  kp_line_flush (&l);
}

static void
kp_option_check_names (void)
{
  extern char **environ;
  for (char **e = environ; e != NULL && *e != NULL; e++)
    {
      const char *s = *e;
      if (strncmp (s, "KAME_POOL_", 10) != 0 && strncmp (s, "KAMEPOOL_", 9) != 0)
        continue;
      const char *eq = strchr (s, '=');
      size_t n = eq != NULL ? (size_t) (eq - s) : strlen (s);
      bool known = false;
      for (size_t i = 0; i < KP_NOPTIONS && !known; i++)
        known = kp_word_is (s, n, kp_option_table[i].env)
                && strncmp (s, kp_option_table[i].env, n) == 0;
      for (size_t i = 0; kp_option_others[i] != NULL && !known; i++)
        known = strlen (kp_option_others[i]) == n
                && strncmp (s, kp_option_others[i], n) == 0;
      if (!known)
        kp_option_unknown_variable (s, n);
    }
}

/* ---- KAME_POOL_CONF --------------------------------------------------------- */

/* One KEY:VALUE pair of KAME_POOL_CONF, P[0..N).  */
static void
kp_option_pair (const char *p, size_t n)
{
  const char *colon = memchr (p, ':', n);
  char buf[512];
  kp_line_t l = KP_LINE (buf, -1);
  if (colon == NULL)
    {
      kp_line_add (&l, "kamepool: KAME_POOL_CONF: ");
      kp_line_value (&l, p, n);
      kp_line_add (&l, ": expected key:value; ignoring it\n");
      kp_line_flush (&l);
      return;
    }
  size_t klen = (size_t) (colon - p);
  for (size_t i = 0; i < KP_NOPTIONS; i++)
    if (strlen (kp_option_table[i].key) == klen
        && strncmp (p, kp_option_table[i].key, klen) == 0)
      {
        if (klen + 1 < n)       /* empty: the default stays */
          kp_option_take (&kp_option_table[i], colon + 1, n - klen - 1,
                          KP_FROM_CONF);
        return;
      }
  const char *best = NULL;
  unsigned best_d = UINT_MAX;
  for (size_t i = 0; i < KP_NOPTIONS; i++)
    kp_nearer (p, klen, 0, kp_option_table[i].key, &best, &best_d);
  kp_line_add (&l, "kamepool: KAME_POOL_CONF: unknown key ");
  kp_line_value (&l, p, klen);
  if (best != NULL)
    {
      kp_line_add (&l, " (did you mean ");
      kp_line_add (&l, best);
      kp_line_add (&l, "?)");
    }
  kp_line_add (&l, "; ignoring ");
  kp_line_value (&l, p, n);
  kp_line_add (&l, "\n");
  kp_line_flush (&l);
}

static void
kp_option_conf (void)
{
  const char *s = getenv ("KAME_POOL_CONF");
  if (s == NULL)
    return;
  while (*s != '\0')
    {
      const char *comma = strchr (s, ',');
      size_t n = comma != NULL ? (size_t) (comma - s) : strlen (s);
      if (n > 0)                /* "a:1,,b:2" and a trailing comma */
        kp_option_pair (s, n);
      s += n;
      if (*s == ',')
        s++;
    }
}

/* ---- verbose ------------------------------------------------------------- */

static void
kp_option_print (void)
{
  /* One write for the block, so that nothing comes between its lines;
     static, for it is larger than a stack frame should be in malloc.
     Only the one reader of the environment gets here.  */
  static char buf[4096];
  kp_line_t l = KP_LINE (buf, -1);
  kp_line_add (&l, "kamepool: " PACKAGE_STRING "; configure: "
               KP_CONFIGURE_SUMMARY "\n");
  for (size_t i = 0; i < KP_NOPTIONS; i++)
    {
      const kp_option_t *o = &kp_option_table[i];
      kp_line_add (&l, "kamepool:   ");
      kp_line_add (&l, o->key);
      kp_line_add (&l, ":");
      kp_option_format (&l, o);
      kp_line_add (&l, " (");
      int from = kp_option_from[i];
      if (from == KP_FROM_DEFAULT && o->configure)
        from = KP_FROM_CONFIGURE;
      kp_line_add (&l, from == KP_FROM_VARIABLE ? o->env
                                                : kp_from_names[from]);
      kp_line_add (&l, ")\n");
    }
  kp_line_flush (&l);
}

/* The settings in effect as the members of a JSON object, "key":
   "value" (every value a string, as the key takes it), to L.  */
void
kp_options_json (kp_line_t *l)
{
  for (size_t i = 0; i < KP_NOPTIONS; i++)
    {
      char buf[KP_PATH_MAX + 16];
      kp_line_t v = KP_LINE (buf, -1);
      kp_option_format (&v, &kp_option_table[i]);
      kp_line_add (l, i == 0 ? "\"" : ", \"");
      kp_line_add (l, kp_option_table[i].key);
      kp_line_add (l, "\": ");
      kp_line_json_string (l, v.buf, v.len);
    }
}

/* ---- Reading it all, once ------------------------------------------------- */

/* 0: not read; 1: being read; 2: read.  The reader's CAS takes it,
   its release store publishes the settings; a thread that finds 1
   waits for 2 (the reading is a few getenv calls and writes).  */
static _Atomic (int) kp_options_state;

static void
kp_options_parse (void)
{
  int saved = errno;
  /* A setter that ran before: its value stays (kp_setting_set marked
     it).  */
  for (size_t i = 0; i < KP_NOPTIONS; i++)
    {
      const kp_option_t *o = &kp_option_table[i];
      if (o->kind == KP_OPT_PATH)
        continue;
      kp_option_from[i]
        = o->kind == KP_OPT_SIZE
          ? atomic_load_explicit (&((kp_size_setting_t *) o->setting)->from,
                                  memory_order_relaxed)
          : atomic_load_explicit (&((kp_int_setting_t *) o->setting)->from,
                                  memory_order_relaxed);
    }
  /* The string first, then the variables: a variable wins over the
     same key in KAME_POOL_CONF, so that a wrapper (kamepool-run
     --stats) or a one-off override beats a standing string.  */
  kp_option_conf ();
  for (size_t i = 0; i < KP_NOPTIONS; i++)
    {
      const char *v = getenv (kp_option_table[i].env);
      if (v != NULL && *v != '\0')
        kp_option_take (&kp_option_table[i], v, strlen (v),
                        KP_FROM_VARIABLE);
    }
  kp_option_check_names ();
  if (kp_setting (&kp_verbose))
    kp_option_print ();
  errno = saved;
}

void
kp_options_read (void)
{
  int st = atomic_load_explicit (&kp_options_state, memory_order_acquire);
  if (kp_likely (st == 2))
    return;
  if (st == 0
      && atomic_compare_exchange_strong_explicit (&kp_options_state, &st, 1,
                                                  memory_order_acquire,
                                                  memory_order_acquire))
    {
      kp_options_parse ();
      atomic_store_explicit (&kp_options_state, 2, memory_order_release);
      return;
    }
  /* A reading that does not end within KP_INIT_WAIT_MS never will: a
     fork copied this process while another thread was reading, or a
     signal handler of the reading thread allocates.  Read here then
     (the reports may come twice).  */
  uint32_t start = kp_clock_ms ();
  while (atomic_load_explicit (&kp_options_state, memory_order_acquire) != 2)
    {
      if (kp_clock_ms () - start > KP_INIT_WAIT_MS)
        {
          kp_options_parse ();
          atomic_store_explicit (&kp_options_state, 2, memory_order_release);
          return;
        }
      sched_yield ();
    }
}

void
kp_options_init (void)
{
  kp_options_read ();
}

bool
kp_option_misuse_aborts (void)
{
  kp_options_read ();
  return kp_setting (&kp_misuse_abort);
}

int
kp_option_thp (void)
{
  kp_options_read ();
  return kp_setting (&kp_thp_env);
}

int
kp_option_numa_mode (void)
{
  kp_options_read ();
  return kp_setting (&kp_numa_mode);
}

unsigned
kp_option_test_nodes (unsigned max)
{
  kp_options_read ();
  int n = kp_setting (&kp_test_nodes);
  return n >= 2 && (unsigned) n <= max ? (unsigned) n : 0;
}

const char *
kp_option_stats_path (void)
{
  kp_options_read ();
  return kp_stats_path;
}

const char *
kp_option_prof_prefix (void)
{
  kp_options_read ();
  return kp_prof_prefix;
}

/* kame_pool_set_max_bytes's rounding, up to whole regions, shared with
   max_bytes.  */
size_t
kp_max_bytes_round (size_t bytes)
{
  if (bytes == 0)
    return 0;
  return bytes > SIZE_MAX - KP_REGION_MASK
         ? SIZE_MAX & ~KP_REGION_MASK
         : (bytes + KP_REGION_MASK) & ~KP_REGION_MASK;
}
