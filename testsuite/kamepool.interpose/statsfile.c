/* statsfile.c -- kamepool.interpose: the exit report reaches a file.
   KAME_POOL_CONF=stats:1,stats_file:DIR/s.%p on ls, sort and python3
   (which close stderr before they exit) leaves a complete text report
   in DIR/s.PID; stats_format:json leaves one JSON object that a real
   JSON parser (python3's json, else jq) reads with every member
   kame_pool_get_stats(3) and kamepool(7) list; kamepool-run --stats=FILE
   does the same; a file that cannot be opened is said on stderr, and
   the report goes there.  A program that is not installed makes its
   test UNSUPPORTED.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

/* kptest-requires: interpose */

#define _GNU_SOURCE 1

#include <fcntl.h>
#include <libgen.h>
#include <sys/stat.h>

#include "kame_pool.h"
#include "kptest.h"
#define KT_WORKDIR_TEMPLATE "/tmp/kptest-statsfile-XXXXXX"
#include "kptest-programs.h"

/* In the process run again (KSF_CHILD set): allocate from the pool,
   exit.  */
__attribute__ ((__constructor__)) static void
ksf_child (void)
{
  if (getenv ("KSF_CHILD") == NULL)
    return;
  kame_pool_free (kame_pool_malloc (100));
  exit (0);
}

/* Run ARGV with this process's environment minus LD_PRELOAD and our
   variables, plus EXTRA (NULL-terminated) and, when PRELOAD, the
   library in LD_PRELOAD; stdin from IN (or /dev/null), stdout to
   /dev/null, stderr into ERR.  Its pid in *PID; false unless it
   exited 0.  */
static bool
run_env (char *const argv[], const char *const extra[], bool preload,
         const char *in, pid_t *pid, char *err, size_t esize)
{
  static const char *const drop[] = { "LD_PRELOAD=", "KAME_POOL_",
                                      "KAMEPOOL_", NULL };
  size_t k;
  char **env = env_without (drop, 8, &k);
  if (env == NULL)
    return false;
  static char preload_var[4200];
  snprintf (preload_var, sizeof preload_var, "LD_PRELOAD=%s", library);
  if (preload)
    env[k++] = preload_var;
  for (size_t i = 0; extra[i] != NULL && i < 6; i++)
    env[k++] = (char *) extra[i];
  env[k] = NULL;
  int ep[2];
  if (pipe (ep) != 0)
    {
      free (env);
      return false;
    }
  fflush (stdout);
  *pid = fork ();
  if (*pid < 0)
    {
      free (env);
      return false;
    }
  if (*pid == 0)
    {
      int fi = open (in != NULL ? in : "/dev/null", O_RDONLY);
      int fo = open ("/dev/null", O_WRONLY);
      if (fi < 0 || fo < 0)
        _exit (126);
      dup2 (fi, 0);
      dup2 (fo, 1);
      dup2 (ep[1], 2);
      execve (argv[0], argv, env);
      _exit (127);
    }
  free (env);
  close (ep[1]);
  kt_read_all (ep[0], err, esize);
  int status;
  return kt_wait (*pid, &status) && WIFEXITED (status)
         && WEXITSTATUS (status) == 0;
}

/* Read the file PATH into BUF (SIZE); false if it cannot.  */
static bool
read_file (const char *path, char *buf, size_t size)
{
  int fd = open (path, O_RDONLY);
  if (fd < 0)
    return false;
  kt_read_all (fd, buf, size);
  return true;
}

/* TEXT is a whole text report: the five summary lines (the totals'
   adding up: live blocks are those allocated less those freed, the
   peak footprint holds at least the units live; then guarded
   sampling's), the table's head, at
   least one row and only rows after it, each of six numbers and of a
   class in increasing order, and a newline at the end; the rows'
   chunks add up to at most chunks_live.  NULL, or what is wrong.  */
static const char *
text_report_incomplete (const char *text)
{
  size_t regions, mib, chunks_live, units;
  if (sscanf (text, "kamepool: %zu regions (%zu MiB reserved); %zu chunks "
              "live holding %zu units", &regions, &mib, &chunks_live,
              &units) != 4 || regions == 0)
    return "first line";
  const char *l2 = strchr (text, '\n');
  if (l2 == NULL || strncmp (l2 + 1, "kamepool: small blocks: ", 24) != 0)
    return "second line";
  const char *l3 = strchr (l2 + 1, '\n');
  if (l3 == NULL || strncmp (l3 + 1, "kamepool: given back: ", 22) != 0)
    return "third line";
  const char *l4 = strchr (l3 + 1, '\n');
  size_t alloc_n, alloc_k, freed_n, freed_k, live_n, live_k, peak_k, fp_k;
  if (l4 == NULL
      || sscanf (l4 + 1, "kamepool: since start: %zu blocks (%zu KiB) "
                 "allocated, %zu (%zu KiB) freed; live now %zu blocks "
                 "(%zu KiB); peak live %zu KiB, peak footprint %zu KiB",
                 &alloc_n, &alloc_k, &freed_n, &freed_k, &live_n, &live_k,
                 &peak_k, &fp_k) != 8)
    return "fourth line";
  if (live_n != alloc_n - freed_n || alloc_n == 0 || peak_k < live_k
      || fp_k < units * 256)
    return "the totals";
  l3 = strchr (l4 + 1, '\n');
  if (l3 == NULL
      || strncmp (l3 + 1, "kamepool: guarded sampling: ", 28) != 0)
    return "the guarded sampling's line";
  l3 = strchr (l3 + 1, '\n');
  static const char head[] = "kamepool: class    size  chunks  "
    "live-blocks  free-blocks  resident-KiB\n";
  if (l3 == NULL || strncmp (l3 + 1, head, sizeof head - 1) != 0)
    return "the table's head";
  const char *row = l3 + 1 + sizeof head - 1;
  size_t rows = 0, sum = 0;
  long last = -1;
  while (*row != '\0')
    {
      size_t c, size, chunks, live, freeb, kib;
      int used = 0;
      if (sscanf (row, "kamepool: %zu %zu %zu %zu %zu %zu\n%n", &c, &size,
                  &chunks, &live, &freeb, &kib, &used) != 6 || used == 0
          || row[used - 1] != '\n' || (long) c <= last || chunks == 0)
        return "a row";
      last = (long) c;
      sum += chunks;
      rows++;
      row += used;
    }
  if (rows == 0)
    return "no rows";
  if (sum > chunks_live)
    return "the rows' chunks";
  return NULL;
}

/* Read the report in FILE into TEXT (SIZE bytes), then remove the
   scratch directory; NULL when it is a whole text report, else what is
   wrong with it.  */
static const char *
take_text_report (const char *file, char *text, size_t size)
{
  bool read = read_file (file, text, size);
  remove_workdir ();
  if (!read)
    return "no report";
  return text_report_incomplete (text);
}

/* Run PROG (ARGS after it) with the report in a file; the file must
   hold a complete text report, and stderr be empty.  */
static void
text_report_of (const char *prog, const char *arg1, const char *arg2,
                const char *in)
{
  NEED_PROGRAM (path, prog);
  KT_CHECK (setup ());
  static char conf[4200], file[4200], err[4096], text[65536];
  snprintf (conf, sizeof conf, "KAME_POOL_CONF=stats:1,stats_file:%s/s.%%p",
            workdir);
  const char *extra[] = { conf, NULL };
  char *argv[] = { path, (char *) arg1, (char *) arg2, NULL };
  pid_t pid;
  char input[4200];
  if (in != NULL)
    {
      snprintf (input, sizeof input, "%s/in", workdir);
      KT_CHECK (write_sort_input (input, 20000));
    }
  bool ok = run_env (argv, extra, true, in != NULL ? input : NULL, &pid, err,
                     sizeof err);
  snprintf (file, sizeof file, "%s/s.%d", workdir, (int) pid);
  const char *what = take_text_report (file, text, sizeof text);
  KT_CHECK (ok);
  KT_CHECK_STR_EQ (err, "");
  if (what != NULL)
    KT_FAILF ("%s: %s: \"%.300s\"", file, what, text);
}

KT_TEST (stats_file_of_ls_holds_a_complete_report)
{
  text_report_of ("ls", "-l", "/", NULL);
}

KT_TEST (stats_file_of_sort_holds_a_complete_report)
{
  text_report_of ("sort", NULL, NULL, "in");
}

KT_TEST (stats_file_of_python3_holds_a_complete_report)
{
  text_report_of ("python3", "-c", "import json; print(json.dumps({}))",
                  NULL);
}

/* The checker of the JSON report: every member, with the types and
   the values that this run makes exact.  */
static const char json_check[] =
  "import json, sys\n"
  "d = json.load(open(sys.argv[1]))\n"
  "top = ['kamepool', 'pid', 'version', 'regions_populated',\n"
  "  'bytes_reserved', 'chunks_live', 'units_live', 'cache_bytes',\n"
  "  'dedicated_chunk_bytes', 'large_alloc_count', 'large_alloc_bytes',\n"
  "  'small_live_bytes', 'small_resident_bytes', 'small_free_bytes',\n"
  "  'purged_bytes', 'dirty_bytes', 'remote_pending', 'abandoned_chunks',\n"
  "  'abandoned_bytes', 'purge_calls', 'purge_pages', 'discard_calls',\n"
  "  'discard_pages', 'refault_units', 'background_passes',\n"
  "  'background_pages', 'background_starts', 'background_running',\n"
  "  'allocated_blocks', 'allocated_bytes', 'freed_blocks', 'freed_bytes',\n"
  "  'live_blocks', 'live_bytes', 'peak_live_bytes', 'peak_resident_bytes',\n"
  "  'prof_stacks', 'prof_table_bytes', 'prof_shortened', 'prof_dropped',\n"
  "  'guard_slots', 'guard_slots_used', 'guard_allocs', 'guard_reports',\n"
  "  'lent_blocks', 'lent_bytes', 'nclasses', 'tls_model', 'classes',\n"
  "  'settings']\n"
  "assert list(d) == top, list(d)\n"
  "assert d['pid'] == int(sys.argv[2]), d['pid']\n"
  "assert d['version'] == int(sys.argv[3]), d['version']\n"
  "assert d['nclasses'] == len(d['classes']) == 89, d['nclasses']\n"
  "row = ['class', 'block_size', 'chunks', 'live_blocks', 'free_blocks',\n"
  "  'resident_bytes']\n"
  "for i, c in enumerate(d['classes']):\n"
  "  assert list(c) == row and c['class'] == i, c\n"
  "assert d['classes'][0]['block_size'] == 16\n"
  "assert sum(c['chunks'] for c in d['classes']) <= d['chunks_live']\n"
  "assert d['regions_populated'] >= 1\n"
  "assert d['bytes_reserved'] == d['regions_populated'] * 33554432\n"
  "for k in top[1:47]:\n"
  "  assert type(d[k]) is int and d[k] >= 0, k\n"
  "for w in ('blocks', 'bytes'):\n"
  "  assert d['live_' + w] == d['allocated_' + w] - d['freed_' + w], w\n"
  "assert d['allocated_blocks'] > 0\n"
  "assert d['peak_live_bytes'] >= d['live_bytes'] > 0\n"
  "assert d['peak_resident_bytes'] >= d['units_live'] * 262144\n"
  "assert d['prof_stacks'] == d['prof_table_bytes'] == 0\n"
  "s = d['settings']\n"
  "assert s['stats'] == 'on' and s['stats_format'] == 'json', s\n"
  "assert s['stats_file'] == sys.argv[4], s\n"
  "assert s['decay_ms'] == 'off' and s['max_bytes'] == '0', s\n"
  "assert list(s)[:4] == ['stats', 'stats_file', 'stats_format',\n"
  "  'verbose'], list(s)\n"
  "print('ok')\n";

KT_TEST (stats_format_json_is_one_object_a_json_parser_reads)
{
  NEED_PROGRAM (ls, "ls");
  const char *py = find_program ("python3");
  KT_CHECK (setup ());
  static char conf[4200], file[4200], spec[4200], err[4096], out[4096];
  static char version[16], pidbuf[16], script[4200];
  snprintf (spec, sizeof spec, "%s/s.%%p", workdir);
  snprintf (conf, sizeof conf, "KAME_POOL_CONF=stats:1,stats_file:%s,"
            "stats_format:json,decay_ms:off", spec);
  const char *extra[] = { conf, NULL };
  char *argv[] = { ls, (char *) "/", NULL };
  pid_t pid;
  bool ok = run_env (argv, extra, true, NULL, &pid, err, sizeof err);
  snprintf (file, sizeof file, "%s/s.%d", workdir, (int) pid);
  snprintf (pidbuf, sizeof pidbuf, "%d", (int) pid);
  snprintf (version, sizeof version, "%d", KAME_POOL_STATS_VERSION);
  bool parsed = false;
  const char *checker = "none";
  if (ok && py != NULL)
    {
      char pypath[4096];
      snprintf (pypath, sizeof pypath, "%s", py);
      snprintf (script, sizeof script, "%s/check.py", workdir);
      FILE *f = fopen (script, "w");
      KT_CHECK (f != NULL && fputs (json_check, f) >= 0 && fclose (f) == 0);
      /* Not preloaded, so that the checker's own report cannot mix in;
         its output is its stderr here.  */
      char *cargv[] = { pypath, script, file, pidbuf, version, spec, NULL };
      static const char *const none[] = { NULL };
      pid_t cpid;
      parsed = run_env (cargv, none, false, NULL, &cpid, out, sizeof out);
      checker = "python3";
    }
  else if (ok && find_program ("jq") != NULL)
    {
      char jq[4096];
      snprintf (jq, sizeof jq, "%s", find_program ("jq"));
      char expr[256];
      snprintf (expr, sizeof expr, "(.pid == %s) and (.nclasses == 89) and "
                "(.classes | length == 89) and (.settings.stats == \"on\")",
                pidbuf);
      char *cargv[] = { jq, (char *) "-e", expr, file, NULL };
      static const char *const none[] = { NULL };
      pid_t cpid;
      parsed = run_env (cargv, none, false, NULL, &cpid, out, sizeof out);
      checker = "jq";
    }
  remove_workdir ();
  KT_CHECK (ok);
  KT_CHECK_STR_EQ (err, "");
  if (strcmp (checker, "none") == 0)
    KT_UNSUPPORTED ("neither python3 nor jq is installed");
  if (!parsed)
    KT_FAILF ("%s refused the report: %s", checker, out);
}

KT_TEST (kamepool_run_stats_file_writes_the_report_there)
{
  NEED_PROGRAM (sort, "sort");
  NEED_PROGRAM (sh, "sh");
  KT_CHECK (setup ());
  static char lib[4200], run[4200], libvar[4300], opt[4200], file[4200];
  static char input[4200], err[4096], text[65536];
  snprintf (lib, sizeof lib, "%s", library);
  /* kamepool-run is made in the build directory, above .libs.  */
  snprintf (run, sizeof run, "%s/kamepool-run", dirname (dirname (lib)));
  snprintf (libvar, sizeof libvar, "KAMEPOOL_LIBRARY=%s", library);
  snprintf (opt, sizeof opt, "--stats=%s/r.%%p", workdir);
  snprintf (input, sizeof input, "%s/in", workdir);
  KT_CHECK (write_sort_input (input, 5000));
  const char *extra[] = { libvar, NULL };
  char *argv[] = { sh, run, opt, sort, NULL };
  pid_t pid;
  bool ok = run_env (argv, extra, false, input, &pid, err, sizeof err);
  snprintf (file, sizeof file, "%s/r.%d", workdir, (int) pid);
  const char *what = take_text_report (file, text, sizeof text);
  KT_CHECK (ok);
  KT_CHECK_STR_EQ (err, "");
  if (what != NULL)
    KT_FAILF ("%s: %s: \"%.300s\"", file, what, text);
}

KT_TEST (a_file_that_cannot_be_opened_is_said_and_the_report_goes_to_stderr)
{
  static char err[65536];
  const char *extra[] = { "KAME_POOL_CONF=stats:1,"
                          "stats_file:/nonexistent-kamepool-dir/s.%p",
                          "KSF_CHILD=1", NULL };
  char *argv[] = { (char *) "/proc/self/exe", NULL };
  pid_t pid;
  KT_CHECK (run_env (argv, extra, false, NULL, &pid, err, sizeof err));
  char want[256];
  snprintf (want, sizeof want, "kamepool: stats_file "
            "/nonexistent-kamepool-dir/s.%d: cannot open it (errno 2); "
            "the report goes to stderr\n", (int) pid);
  if (strncmp (err, want, strlen (want)) != 0)
    KT_FAILF ("stderr \"%.300s\", not \"%s...\"", err, want);
  const char *what = text_report_incomplete (err + strlen (want));
  if (what != NULL)
    KT_FAILF ("%s of the report is wrong: \"%.300s\"", what, err);
}

KT_MAIN (KT_CASE (stats_file_of_ls_holds_a_complete_report),
         KT_CASE (stats_file_of_sort_holds_a_complete_report),
         KT_CASE (stats_file_of_python3_holds_a_complete_report),
         KT_CASE (stats_format_json_is_one_object_a_json_parser_reads),
         KT_CASE (kamepool_run_stats_file_writes_the_report_there),
         KT_CASE (a_file_that_cannot_be_opened_is_said_and_the_report_goes_to_stderr))
