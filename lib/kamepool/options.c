/* options.c -- every setting of libkamepool in one place: its variable,
   its environment variable, its default, its setter and its man page.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   setting                 environment            default   setter (page)
   kp_decay_ms             KAME_POOL_DECAY_MS     500 ms    -  (kamepool(7))
   kp_background_purge     KAME_POOL_BACKGROUND_PURGE  on   -  (kamepool(7))
   kp_misuse_abort         KAME_POOL_ON_MISUSE    abort     -  (kamepool(7))
   kp_stats_at_exit        KAME_POOL_STATS        off       -  (kamepool(7))
   kp_cap_strict           KAME_POOL_STRICT_CAP   off       kame_pool_set_cap_policy(3)
   kp_max_bytes            -                      no cap    kame_pool_set_max_bytes(3)
   kp_cache_cap            -                      128 MiB   kame_pool_set_large_cache_cap(3)
   kp_thread_exit_reclaim  -                      on        kame_pool_set_thread_exit_reclaim(3)
   hugepage policy         KAME_POOL_HUGEPAGE     configure kame_pool_set_thp_policy(3)
                           (kp_option_thp; the policy itself is policy.c's)
   NUMA                    KAME_POOL_NUMA         auto      -  (kamepool(7))
                           KAME_POOL_TEST_NODES   unset     -  (kame_pool_get_numa_stats(3))
                           (kp_option_numa_mode, kp_option_test_nodes;
                           numa.c resolves them)

   The package's other environment variables are libckarena's:
   CK_BUMP_FORCE_MIXED and CK_BUMP_DISABLE_MIXED, off by default, no
   setter (ck_bump_alloc_init(3)), read by ckernel_alloc.c with the
   same parser as kp_option_flag (lib/env-flag.h).

   Every setter returns 0, or an errno value (EINVAL) when it refuses
   the value and leaves the setting as it was; no setter sets errno.

   The settings are written by kp_options_init, once, in kp_process_init
   before it publishes the end of initialisation, and by their setters
   at any time; every reader loads them relaxed, each on its own: no
   setting orders any other memory.  A setter's value is seen by the
   other threads "soon", which is all a setting promises.  The
   environment is read with getenv, which does not allocate.  */

#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <strings.h>

#include "kp_internal.h"
#include "env-flag.h"

kp_int_setting_t kp_decay_ms = { 500 };
kp_int_setting_t kp_background_purge = { 1 };
kp_int_setting_t kp_misuse_abort = { 1 };
kp_int_setting_t kp_stats_at_exit;
kp_int_setting_t kp_cap_strict;
kp_size_setting_t kp_max_bytes;
kp_size_setting_t kp_cache_cap = { KP_CACHE_CAP_DEFAULT };
kp_int_setting_t kp_thread_exit_reclaim = { 1 };

/* kp_options_init has run: written once by it (release), read by
   kp_option_misuse_aborts (acquire), which then trusts the settings.  */
static _Atomic (bool) kp_options_done;

bool
kp_option_flag (const char *name, bool dflt)
{
  return env_flag_value (getenv (name), dflt);
}

/* KAME_POOL_DECAY_MS: the decay's delay in milliseconds, 0 to 3600000;
   "off" (or "never") disables it.  Anything else keeps the default and
   says so on stderr.  */
static void
kp_option_decay (void)
{
  const char *v = getenv ("KAME_POOL_DECAY_MS");
  if (v == NULL || *v == '\0')
    return;
  if (strcasecmp (v, "off") == 0 || strcasecmp (v, "never") == 0)
    {
      kp_setting_set (&kp_decay_ms, -1);
      return;
    }
  char *end;
  int saved = errno;
  errno = 0;
  long ms = strtol (v, &end, 10);
  bool bad = errno != 0 || end == v || *end != '\0' || ms < 0
             || ms > 3600000;
  errno = saved;
  if (bad)
    {
      kp_os_write_stderr ("kamepool: KAME_POOL_DECAY_MS must be a number of "
                          "milliseconds from 0 to 3600000, or off; "
                          "keeping the default\n");
      return;
    }
  kp_setting_set (&kp_decay_ms, (int) ms);
}

/* V, the value of KAME_POOL_ON_MISUSE (NULL when unset), asks for
   report.  */
static bool
kp_option_misuse_report (const char *v)
{
  return v != NULL && strcasecmp (v, "report") == 0;
}

/* Whether misuse aborts: the setting, or, before the settings are read
   (a bad kame_pool_free before the first allocation), the environment
   itself.  */
bool
kp_option_misuse_aborts (void)
{
  if (atomic_load_explicit (&kp_options_done, memory_order_acquire))
    return kp_setting (&kp_misuse_abort);
  return !kp_option_misuse_report (getenv ("KAME_POOL_ON_MISUSE"));
}

/* KAME_POOL_ON_MISUSE: abort (the default) or report.  */
static void
kp_option_misuse (void)
{
  const char *v = getenv ("KAME_POOL_ON_MISUSE");
  if (v == NULL || *v == '\0' || strcasecmp (v, "abort") == 0)
    return;
  if (kp_option_misuse_report (v))
    kp_setting_set (&kp_misuse_abort, 0);
  else
    kp_os_write_stderr ("kamepool: KAME_POOL_ON_MISUSE must be abort or "
                        "report; keeping abort\n");
}

void
kp_options_init (void)
{
  kp_setting_set (&kp_stats_at_exit,
                  kp_option_flag ("KAME_POOL_STATS", false));
  kp_option_decay ();
  kp_setting_set (&kp_background_purge,
                  kp_option_flag ("KAME_POOL_BACKGROUND_PURGE", true));
  kp_option_misuse ();
  /* Only ever switches it on: a program that set the policy before its
     first allocation keeps its choice.  */
  if (kp_option_flag ("KAME_POOL_STRICT_CAP", false))
    kp_setting_set (&kp_cap_strict, 1);
  atomic_store_explicit (&kp_options_done, true, memory_order_release);
}

/* KAME_POOL_HUGEPAGE: 1 (or yes, on, true, always) advises,
   0 (or no, off, false, system) leaves it to the kernel, "never"
   forbids; unset or empty keeps the configure default.  */
int
kp_option_thp (void)
{
  int dflt = KP_HUGEPAGE_DEFAULT ? KAME_POOL_THP_ALWAYS : KAME_POOL_THP_SYSTEM;
  const char *v = getenv ("KAME_POOL_HUGEPAGE");
  if (v == NULL || *v == '\0')
    return dflt;
  if (strcasecmp (v, "never") == 0)
    return KAME_POOL_THP_NEVER;
  if (strcasecmp (v, "system") == 0)
    return KAME_POOL_THP_SYSTEM;
  if (strcasecmp (v, "always") == 0)
    return KAME_POOL_THP_ALWAYS;
  return env_flag_value (v, true) ? KAME_POOL_THP_ALWAYS : KAME_POOL_THP_SYSTEM;
}

/* KAME_POOL_NUMA: "off" (-1), "on" (1), or unset or anything else for
   the default, binding only when the machine has several nodes (0).  */
int
kp_option_numa_mode (void)
{
  const char *v = getenv ("KAME_POOL_NUMA");
  if (v != NULL && strcasecmp (v, "off") == 0)
    return -1;
  return v != NULL && strcasecmp (v, "on") == 0;
}

/* KAME_POOL_TEST_NODES: simulate that many nodes (2 to MAX) on a
   machine with one, for the tests; 0 when unset or out of range.  */
unsigned
kp_option_test_nodes (unsigned max)
{
  const char *v = getenv ("KAME_POOL_TEST_NODES");
  if (v == NULL || *v == '\0')
    return 0;
  long n = strtol (v, NULL, 10);
  return n >= 2 && n <= (long) max ? (unsigned) n : 0;
}
