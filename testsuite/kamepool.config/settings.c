/* settings.c -- kamepool.config: the settings from the environment.
   KAME_POOL_CONF and the KAME_POOL_* variables set every setting of
   options.c's table; every bad value, unknown key and misspelled
   variable of the table below is reported with its exact line and
   none is taken; a variable wins over the string; a setter called
   before the first allocation wins over both; verbose lists them all.

   Each case runs this program again, from the start, with exactly the
   environment given (nothing else of ours), and compares the process's
   whole stderr and the settings it then reads with the getters.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#define _GNU_SOURCE 1

#include "config.h"

#include <errno.h>
#include <stdint.h>

#include "kame_pool.h"
#include "kptest.h"

/* In the process run again (KS_CHILD set): start the pool (after the
   setter when KS_CHILD=setter), print the settings, exit.  */
__attribute__ ((__constructor__)) static void
ks_child (void)
{
  const char *mode = getenv ("KS_CHILD");
  if (mode == NULL)
    return;
  if (strcmp (mode, "setter") == 0)
    {
      /* A library's constructor may have allocated already (libnuma's
         does): then the environment has been read.  */
      kame_pool_stats_t s = { .version = 1 };
      kame_pool_get_stats (&s);
      if (s.regions_populated != 0)
        {
          printf ("allocated before main\n");
          fflush (stdout);
          _exit (0);
        }
      kame_pool_set_max_bytes ((size_t) 64 << 20);
    }
  kame_pool_free (kame_pool_malloc (1));
  printf ("max_bytes=%zu cache_cap=%zu strict=%d reclaim=%d thp=%d\n",
          kame_pool_get_max_bytes (), kame_pool_get_large_cache_cap (),
          kame_pool_get_cap_policy () == KAME_POOL_CAP_STRICT,
          kame_pool_get_thread_exit_reclaim (), kame_pool_get_thp_policy ());
  fflush (stdout);
  _exit (0);
}

/* Run this program again with the NULL-terminated ENV alone (plus
   KS_CHILD=MODE); its stderr in ERR and stdout in OUT; true when it
   exited with 0.  */
static bool
run_with (const char *const env[], const char *mode, char *err,
          size_t esize, char *out, size_t osize)
{
  static char child[32];
  const char *e[32];
  size_t n = 0;
  for (; env[n] != NULL && n < 30; n++)
    e[n] = env[n];
  snprintf (child, sizeof child, "KS_CHILD=%s", mode);
  e[n++] = child;
  e[n] = NULL;
  int status;
  return kt_run_self (e, true, NULL, out, osize, err, esize, &status, NULL)
         && WIFEXITED (status) && WEXITSTATUS (status) == 0;
}

#define MIB ((size_t) 1 << 20)
#define SWITCH "1, yes, true, on, 0, no, false or off (any case)"

/* The hugepage setting a build starts with, and its name.  */
#define THP_DEFAULT (KP_HUGEPAGE_DEFAULT ? KAME_POOL_THP_ALWAYS \
                                         : KAME_POOL_THP_SMALL)
#define THP_DEFAULT_WORD (KP_HUGEPAGE_DEFAULT ? "always" : "small")

/* The getters' line of a process with the defaults, but for the
   settings given.  */
static void
settings_line (char *buf, size_t size, size_t max_bytes, size_t cache_cap,
               int strict, int reclaim, int thp)
{
  snprintf (buf, size,
            "max_bytes=%zu cache_cap=%zu strict=%d reclaim=%d thp=%d\n",
            max_bytes, cache_cap, strict, reclaim, thp);
}

/* Run with ENV; stderr must be WANT_ERR and the settings the
   defaults.  */
#define EXPECT_DEFAULTS(want_err, ...)                                  \
  do {                                                                  \
    static char err_[8192], out_[512], line_[512];                      \
    static const char *const env_[] = { __VA_ARGS__, NULL };            \
    KT_CHECK (run_with (env_, "1", err_, sizeof err_, out_,             \
                        sizeof out_));                                  \
    KT_CHECK_STR_EQ (err_, (want_err));                                 \
    settings_line (line_, sizeof line_, SIZE_MAX, 128 * MIB, 0, 1,      \
                   THP_DEFAULT);                                        \
    KT_CHECK_STR_EQ (out_, line_);                                      \
  } while (0)

KT_TEST (bad_switch_words_are_refused_and_the_report_stays_off)
{
  static const char *const words[] = { "flase", "disable", "none", "2",
                                       "enabled", "of" };
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
    {
      char var[64], want[512];
      static char err[8192], out[512];
      snprintf (var, sizeof var, "KAME_POOL_STATS=%s", words[i]);
      const char *env[] = { var, NULL };
      KT_CHECK (run_with (env, "1", err, sizeof err, out, sizeof out));
      snprintf (want, sizeof want, "kamepool: KAME_POOL_STATS=%s: "
                "expected " SWITCH "; keeping off\n", words[i]);
      KT_CHECK_STR_EQ (err, want);
    }
}

KT_TEST (bad_values_of_every_variable_are_refused)
{
  static char want[4096];
  snprintf (want, sizeof want,
            "kamepool: KAME_POOL_STATS_FILE=/tmp/s.%%d: expected a file "
            "name of at most 255 bytes, %%p for the pid, %%%% for %%; "
            "keeping \n"
            "kamepool: KAME_POOL_STATS_FORMAT=xml: expected text or json; "
            "keeping text\n"
            "kamepool: KAME_POOL_VERBOSE=2: expected " SWITCH
            "; keeping off\n"
            "kamepool: KAME_POOL_DECAY_MS=100ms: expected a number of "
            "milliseconds from 0 to 3600000, off or never; keeping 500\n"
            "kamepool: KAME_POOL_BACKGROUND_PURGE=maybe: expected " SWITCH
            "; keeping on\n"
            "kamepool: KAME_POOL_ON_MISUSE=reprot: expected abort or "
            "report; keeping abort\n"
            "kamepool: KAME_POOL_STRICT_CAP=maybe: expected " SWITCH
            "; keeping off\n"
            "kamepool: KAME_POOL_MAX_BYTES=1T: expected a number of bytes, "
            "or of K, M or G (KiB, MiB, GiB), 0 for no cap; keeping 0\n"
            "kamepool: KAME_POOL_LARGE_CACHE_CAP=-1: expected a number of "
            "bytes, or of K, M or G (KiB, MiB, GiB); keeping 134217728\n"
            "kamepool: KAME_POOL_THREAD_EXIT_RECLAIM=nope: expected "
            SWITCH "; keeping on\n"
            "kamepool: KAME_POOL_HUGEPAGE=maybe: expected always, small, "
            "system, never, or " SWITCH "; keeping %s\n"
            "kamepool: KAME_POOL_NUMA=of: expected auto, off or on; "
            "keeping auto\n"
            "kamepool: KAME_POOL_TEST_NODES=17: expected a number of "
            "simulated NUMA nodes from 0 to 16 (0 and 1: none); "
            "keeping 0\n"
            "kamepool: KAME_POOL_PROF_SAMPLE=0: expected a number of "
            "bytes from 1 to 1073741824; keeping 524288\n",
            THP_DEFAULT_WORD);
  EXPECT_DEFAULTS (want,
                   "KAME_POOL_STATS_FILE=/tmp/s.%d",
                   "KAME_POOL_STATS_FORMAT=xml", "KAME_POOL_VERBOSE=2",
                   "KAME_POOL_DECAY_MS=100ms",
                   "KAME_POOL_BACKGROUND_PURGE=maybe",
                   "KAME_POOL_ON_MISUSE=reprot",
                   "KAME_POOL_STRICT_CAP=maybe", "KAME_POOL_MAX_BYTES=1T",
                   "KAME_POOL_LARGE_CACHE_CAP=-1",
                   "KAME_POOL_THREAD_EXIT_RECLAIM=nope",
                   "KAME_POOL_HUGEPAGE=maybe", "KAME_POOL_NUMA=of",
                   "KAME_POOL_TEST_NODES=17", "KAME_POOL_PROF_SAMPLE=0");
}

KT_TEST (misspelled_variables_are_named_with_the_nearest_real_one)
{
  EXPECT_DEFAULTS ("kamepool: KAMEPOOL_STATS is not a kamepool variable "
                   "(did you mean KAME_POOL_STATS?); ignoring it\n"
                   "kamepool: KAME_POOL_DECAY is not a kamepool variable "
                   "(did you mean KAME_POOL_DECAY_MS?); ignoring it\n"
                   "kamepool: KAME_POOL_MAXBYTES is not a kamepool variable "
                   "(did you mean KAME_POOL_MAX_BYTES?); ignoring it\n"
                   "kamepool: KAMEPOOL_CONF is not a kamepool variable "
                   "(did you mean KAME_POOL_CONF?); ignoring it\n"
                   "kamepool: KAME_POOL_FROBNICATE is not a kamepool "
                   "variable; ignoring it\n",
                   "KAMEPOOL_STATS=1", "KAME_POOL_DECAY=5",
                   "KAME_POOL_MAXBYTES=1M", "KAMEPOOL_CONF=stats:1",
                   "KAME_POOL_FROBNICATE=1");
}

KT_TEST (the_packages_other_variables_are_not_reported)
{
  EXPECT_DEFAULTS ("", "KAMEPOOL_LIBRARY=/nowhere/libkamepool.so",
                   "KAMEPOOL_CXX_LIBRARY=/nowhere/libkamepool-cxx.so",
                   "KAME_POOL_STRESS_LONG=1", "KAME_POOL_STRESS_SECONDS=2",
                   "KAME_POOL_CONF=", "KAME_POOL_STATS=");
}

KT_TEST (unknown_keys_and_bad_pairs_of_the_string_are_refused)
{
  EXPECT_DEFAULTS ("kamepool: KAME_POOL_CONF: unknown key stats_prnt "
                   "(did you mean stats?); ignoring stats_prnt:true\n"
                   "kamepool: KAME_POOL_CONF: decay_ms: expected key:value; "
                   "ignoring it\n"
                   "kamepool: KAME_POOL_CONF: unknown key max_byte (did you "
                   "mean max_bytes?); ignoring max_byte:1M\n"
                   "kamepool: KAME_POOL_CONF: unknown key colour; ignoring "
                   "colour:red\n"
                   "kamepool: KAME_POOL_CONF: strict_cap:sure: expected "
                   SWITCH "; keeping off\n"
                   "kamepool: KAME_POOL_CONF: large_cache_cap:12Q: "
                   "expected a number of bytes, or of K, M or G (KiB, MiB, "
                   "GiB); keeping 134217728\n"
                   "kamepool: KAME_POOL_CONF: max_bytes:99999999999999999999G: "
                   "expected a number of bytes, or of K, M or G (KiB, MiB, "
                   "GiB), 0 for no cap; keeping 0\n",
                   "KAME_POOL_CONF=stats_prnt:true,decay_ms,,max_byte:1M,"
                   "colour:red,strict_cap:sure,large_cache_cap:12Q,"
                   "max_bytes:99999999999999999999G,");
}

KT_TEST (the_string_sets_every_kind_of_setting)
{
  static char err[4096], out[512], want[512];
  const char *env[] = { "KAME_POOL_CONF=max_bytes:40M,large_cache_cap:512k,"
                        "strict_cap:YES,thread_exit_reclaim:off,"
                        "hugepage:never,on_misuse:report,decay_ms:off,"
                        "numa:off,stats_format:text", NULL };
  KT_CHECK (run_with (env, "1", err, sizeof err, out, sizeof out));
  KT_CHECK_STR_EQ (err, "");
  /* max_bytes rounds up to whole 32 MiB regions, as the setter does.  */
  settings_line (want, sizeof want, 64 * MIB, 512 << 10, 1, 0,
                 KAME_POOL_THP_NEVER);
  KT_CHECK_STR_EQ (out, want);
}

KT_TEST (a_variable_wins_over_the_string)
{
  static char err[4096], out[512], want[512];
  const char *env[] = { "KAME_POOL_CONF=max_bytes:32M,large_cache_cap:1G",
                        "KAME_POOL_MAX_BYTES=96M", NULL };
  KT_CHECK (run_with (env, "1", err, sizeof err, out, sizeof out));
  KT_CHECK_STR_EQ (err, "");
  settings_line (want, sizeof want, 96 * MIB, 1024 * MIB, 0, 1,
                 THP_DEFAULT);
  KT_CHECK_STR_EQ (out, want);
}

KT_TEST (a_setter_before_the_first_allocation_wins)
{
  static char err[4096], out[512], want[512];
  const char *env[] = { "KAME_POOL_CONF=max_bytes:32M",
                        "KAME_POOL_MAX_BYTES=96M", NULL };
  KT_CHECK (run_with (env, "setter", err, sizeof err, out, sizeof out));
  if (strcmp (out, "allocated before main\n") == 0)
    KT_UNSUPPORTED ("a library of this build allocates before main");
  KT_CHECK_STR_EQ (err, "");
  settings_line (want, sizeof want, 64 * MIB, 128 * MIB, 0, 1,
                 THP_DEFAULT);
  KT_CHECK_STR_EQ (out, want);
}

KT_TEST (verbose_lists_every_setting_and_where_it_came_from)
{
  static char err[8192], out[512], want[4096];
  const char *env[] = { "KAME_POOL_CONF=verbose:1,decay_ms:off,"
                        "stats_file:/nonexistent/s.%p",
                        "KAME_POOL_ON_MISUSE=report",
                        "KAME_POOL_LARGE_CACHE_CAP=1M", NULL };
  KT_CHECK (run_with (env, "1", err, sizeof err, out, sizeof out));
  snprintf (want, sizeof want,
            "kamepool: " PACKAGE_STRING "; configure: "
            KP_CONFIGURE_SUMMARY "\n"
            "kamepool:   stats:off (default)\n"
            "kamepool:   stats_file:/nonexistent/s.%%p (KAME_POOL_CONF)\n"
            "kamepool:   stats_format:text (default)\n"
            "kamepool:   verbose:on (KAME_POOL_CONF)\n"
            "kamepool:   decay_ms:off (KAME_POOL_CONF)\n"
            "kamepool:   background_purge:on (default)\n"
            "kamepool:   on_misuse:report (KAME_POOL_ON_MISUSE)\n"
            "kamepool:   strict_cap:off (default)\n"
            "kamepool:   max_bytes:0 (default)\n"
            "kamepool:   large_cache_cap:1048576 (KAME_POOL_LARGE_CACHE_CAP)\n"
            "kamepool:   thread_exit_reclaim:on (default)\n"
            "kamepool:   hugepage:%s (configure)\n"
            "kamepool:   numa:auto (default)\n"
            "kamepool:   test_nodes:0 (default)\n"
            "kamepool:   prof: (default)\n"
            "kamepool:   prof_sample:524288 (default)\n"
            "kamepool:   guard_sample:134217728 (default)\n"
            "kamepool:   guard_slots:128 (default)\n", THP_DEFAULT_WORD);
  KT_CHECK_STR_EQ (err, want);
}

KT_MAIN (KT_CASE (bad_switch_words_are_refused_and_the_report_stays_off),
         KT_CASE (bad_values_of_every_variable_are_refused),
         KT_CASE (misspelled_variables_are_named_with_the_nearest_real_one),
         KT_CASE (the_packages_other_variables_are_not_reported),
         KT_CASE (unknown_keys_and_bad_pairs_of_the_string_are_refused),
         KT_CASE (the_string_sets_every_kind_of_setting),
         KT_CASE (a_variable_wins_over_the_string),
         KT_CASE (a_setter_before_the_first_allocation_wins),
         KT_CASE (verbose_lists_every_setting_and_where_it_came_from))
