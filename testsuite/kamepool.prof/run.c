/* kamepool-run --prof: the profile of an unchanged program.
   Copyright (C) 2026 The kamepool authors; LGPL-2.1+.  */
/* kptest-requires: interpose */
/* kptest-options: -Wno-unused-function */

#define _GNU_SOURCE 1

#include <errno.h>
#include <libgen.h>
#include <stdint.h>
#include <sys/wait.h>

#include "kame_pool.h"
#include "kptest.h"
#define KT_WORKDIR_TEMPLATE "/tmp/kptest-profrun-XXXXXX"
#include "kptest-programs.h"

/* The program run by kamepool-run: ten blocks of 777 bytes, kept.  */
__attribute__ ((__constructor__)) static void
run_child (void)
{
  if (getenv ("KPR_CHILD") == NULL)
    return;
  static void *kept[10];
  for (int i = 0; i < 10; i++)
    kept[i] = malloc (777);
  exit (kept[9] != NULL ? 0 : 1);
}

/* Run "sh kamepool-run ARGS... [this program]" with KPR_CHILD set; its
   stderr in ERR, its pid in *PID; its exit status.  */
static int
run_kamepool_run (const char *opt, const char *prefix, bool program,
                  char *err, size_t esize, pid_t *pid_out)
{
  static char lib[4200], run[4200], exe[4096];
  snprintf (lib, sizeof lib, "%s", library);
  /* kamepool-run is made in the build directory, above .libs.  */
  snprintf (run, sizeof run, "%s/kamepool-run", dirname (dirname (lib)));
  ssize_t n = readlink ("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0)
    return -1;
  exe[n] = '\0';
  int ep[2];
  if (pipe (ep) != 0)
    return -1;
  fflush (stdout);
  pid_t pid = fork ();
  if (pid < 0)
    return -1;
  if (pid == 0)
    {
      dup2 (ep[1], 2);
      close (ep[0]);
      setenv ("KAMEPOOL_LIBRARY", library, 1);
      setenv ("KPR_CHILD", "1", 1);
      unsetenv ("KAME_POOL_PROF");
      if (chdir (workdir) != 0)
        _exit (126);
      if (program)
        execl ("/bin/sh", "sh", run, opt, prefix, exe, (char *) NULL);
      else
        execl ("/bin/sh", "sh", run, opt, (char *) NULL);
      _exit (127);
    }
  close (ep[1]);
  kt_read_all (ep[0], err, esize);
  int status;
  if (!kt_wait (pid, &status))
    return -1;
  *pid_out = pid;
  return WIFEXITED (status) ? WEXITSTATUS (status) : 256;
}

KT_TEST (kamepool_run_prof_writes_the_profile_of_an_unchanged_program)
{
  KT_CHECK (setup ());
  static char err[4096], path[4200], line[8192];
  pid_t pid;
  int status = run_kamepool_run ("--prof", "q", true, err, sizeof err, &pid);
  snprintf (path, sizeof path, "%s/q.%d.heap", workdir, (int) pid);
  FILE *f = fopen (path, "r");
  bool header = f != NULL && fgets (line, sizeof line, f) != NULL
                && strncmp (line, "heap profile: ", 14) == 0;
  if (f != NULL)
    fclose (f);
  remove_workdir ();
  KT_CHECK_EQ (status, 0);
  KT_CHECK (header);
  char want[256];
  snprintf (want, sizeof want, "kamepool: heap profile q.%d.heap: ",
            (int) pid);
  KT_CHECK (strncmp (err, want, strlen (want)) == 0);
}

KT_TEST (kamepool_run_prof_without_a_prefix_is_refused)
{
  KT_CHECK (setup ());
  static char err[4096];
  pid_t pid;
  int status = run_kamepool_run ("--prof", NULL, false, err, sizeof err,
                                 &pid);
  remove_workdir ();
  KT_CHECK_EQ (status, 2);
  KT_CHECK (strncmp (err, "kamepool-run: --prof needs a file name prefix\n",
                     46) == 0);
}

KT_MAIN (KT_CASE (kamepool_run_prof_writes_the_profile_of_an_unchanged_program),
         KT_CASE (kamepool_run_prof_without_a_prefix_is_refused))
