/* misuse-programs.c -- kamepool.misuse: no false alarms.  sort and
   python3, with the built libkamepool.so in LD_PRELOAD and the default
   KAME_POOL_ON_MISUSE (abort), work through generated input, with
   threads and blocks freed by other threads, once with the default
   decay and once with KAME_POOL_DECAY_MS=0 (pages given back all the
   time); each must exit 0 with nothing on stderr.  The witness that a
   report would be seen: python3 freeing a 256 KiB block twice through
   ctypes gets the report on its stderr.  The block is a dedicated
   chunk's, whose checks are off the fast paths, so that every build
   makes them (--disable-hardening leaves a pool block's double free
   undetected).  A program that is not installed makes its test
   UNSUPPORTED.
   kptest-requires: interpose

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#define _GNU_SOURCE 1

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>

#include "kame_pool.h"
#include "kptest.h"
#define KT_WORKDIR_TEMPLATE "/tmp/kptest-misuse-XXXXXX"
#include "kptest-programs.h"

/* Run ARGV with the library in LD_PRELOAD, this environment without
   LD_PRELOAD and KAME_POOL_*, plus EXTRA (a KAME_POOL_ setting, or
   NULL); stdin from IN, stdout to /dev/null, stderr into ERR.  The
   wait status, or -1.  */
static int
run_preloaded (char *const argv[], const char *extra, const char *in,
               char *err, size_t size)
{
  static const char *const drop[] = { "LD_PRELOAD=", "KAME_POOL_", NULL };
  size_t k;
  char **env = env_without (drop, 2, &k);
  if (env == NULL)
    return -1;
  char preload[4200];
  snprintf (preload, sizeof preload, "LD_PRELOAD=%s", library);
  env[k++] = preload;
  if (extra != NULL)
    env[k++] = (char *) extra;
  env[k] = NULL;
  int fd[2];
  if (pipe (fd) != 0)
    {
      free (env);
      return -1;
    }
  fflush (stdout);
  pid_t pid = fork ();
  if (pid == 0)
    {
      int fi = open (in != NULL ? in : "/dev/null", O_RDONLY);
      int fo = open ("/dev/null", O_WRONLY);
      if (fi < 0 || fo < 0)
        _exit (126);
      dup2 (fi, 0);
      dup2 (fo, 1);
      dup2 (fd[1], 2);
      close (fd[0]);
      execve (argv[0], argv, env);
      _exit (127);
    }
  free (env);
  close (fd[1]);
  if (pid < 0)
    {
      close (fd[0]);
      return -1;
    }
  kt_read_all (fd[0], err, size);
  int status;
  return kt_wait (pid, &status) ? status : -1;
}

/* ARGV exits 0 and is silent on stderr, with the default decay and
   with none; false after printing why.  */
static bool
clean_run (char *const argv[], const char *in)
{
  static const char *const decay[] = { NULL, "KAME_POOL_DECAY_MS=0" };
  static char err[8192];
  for (size_t i = 0; i < 2; i++)
    {
      int status = run_preloaded (argv, decay[i], in, err, sizeof err);
      if (status == -1 || !WIFEXITED (status) || WEXITSTATUS (status) != 0
          || err[0] != '\0')
        {
          printf ("%s%s%s: status %#x, stderr \"%.1000s\"\n", argv[0],
                  decay[i] != NULL ? " with " : "",
                  decay[i] != NULL ? decay[i] : "", (unsigned) status,
                  err);
          return false;
        }
    }
  return true;
}

KT_TEST (sort_under_the_pool_reports_no_misuse)
{
  NEED_PROGRAM (sort, "sort");
  KT_CHECK (setup ());
  char input[512];
  snprintf (input, sizeof input, "%s/lines", workdir);
  KT_CHECK (write_sort_input (input, 300000));
  /* Small buffers, temporary files and two threads: many blocks of
     every size, merged and freed across threads.  */
  char buffer[] = "-S2M", parallel[] = "--parallel=2", key[] = "-k2,2n";
  char tmp[600];
  snprintf (tmp, sizeof tmp, "-T%s", workdir);
  char *argv[] = { sort, buffer, parallel, tmp, key, NULL };
  bool ok = clean_run (argv, input);
  remove_workdir ();
  KT_CHECK (ok);
}

KT_TEST (python3_under_the_pool_reports_no_misuse)
{
  NEED_PROGRAM (python, "python3");
  KT_CHECK (setup ());
  char *argv[] = {
    python, "-c",
    "import json, collections, threading, queue, re\n"
    "d = {str(i): [i * j for j in range(i % 50)] for i in range(30000)}\n"
    "s = json.dumps(d, sort_keys=True)\n"
    "c = collections.Counter(re.findall(r'\\d+', s))\n"
    "q = queue.Queue()\n"
    "def make(n):\n"
    "    for k in range(20000):\n"
    "        q.put(bytearray(k % 3000) + str(n).encode())\n"
    "def take():\n"
    "    for k in range(4 * 20000):\n"
    "        q.get()\n"
    "ts = [threading.Thread(target=make, args=(i,)) for i in range(4)]\n"
    "ts.append(threading.Thread(target=take))\n"
    "for t in ts: t.start()\n"
    "for t in ts: t.join()\n"
    "big = bytearray(6 << 20)\n"
    "big[::4093] = b'x' * len(big[::4093])\n"
    "print(len(s), len(c), big.count(b'x'))\n",
    NULL
  };
  bool ok = clean_run (argv, NULL);
  remove_workdir ();
  KT_CHECK (ok);
}

/* The other side: the same set-up does see a report.  */
KT_TEST (python3_double_free_under_the_pool_is_reported)
{
  NEED_PROGRAM (python, "python3");
  KT_CHECK (setup ());
  char *argv[] = {
    python, "-c",
    "import ctypes\n"
    "libc = ctypes.CDLL(None)\n"
    "libc.malloc.restype = ctypes.c_void_p\n"
    "libc.free.argtypes = [ctypes.c_void_p]\n"
    "p = libc.malloc(262144)\n"
    "libc.free(p)\n"
    "libc.free(p)\n",
    NULL
  };
  static char err[8192];
  int status = run_preloaded (argv, "KAME_POOL_ON_MISUSE=report", NULL, err,
                              sizeof err);
  remove_workdir ();
  if (status == -1 || !WIFEXITED (status) || WEXITSTATUS (status) != 0
      || strncmp (err, "kamepool: free(): double free of 0x", 35) != 0
      || strchr (err, '\n') != err + strlen (err) - 1)
    KT_FAILF ("status %#x, stderr \"%.300s\"", (unsigned) status, err);
}

KT_MAIN (KT_CASE (sort_under_the_pool_reports_no_misuse),
         KT_CASE (python3_under_the_pool_reports_no_misuse),
         KT_CASE (python3_double_free_under_the_pool_is_reported))
