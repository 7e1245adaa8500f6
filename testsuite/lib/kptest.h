/* kptest.h -- the C side of kamepool's DejaGnu test driver.

   A test program defines its tests with KT_TEST and lists them in a
   KT_MAIN table:

     KT_TEST (hand_example) { KT_CHECK_EQ (f (1), 2); }
     KT_MAIN (KT_CASE (hand_example), KT_CASE (other_test))

   Run with --list, it prints the names; run with no argument, it runs
   every test in a child process of its own (so that a crash or a leak
   in one test cannot hide or fake the result of another) and prints
   "PASS: name" or "FAIL: name: file:line: what".  With a test name as
   argument only that test runs, in the same process, which is handy in
   a debugger.  KT_TIMEOUT in the environment overrides the per-test
   alarm (seconds, default 240).

   The checks abort the current test at the first failure.  Helpers
   that are not the test function itself return bool and are wrapped in
   KT_CHECK.  Copyright (C) 2026 The kamepool authors; LGPL-2.1+.  */

#ifndef KPTEST_H
#define KPTEST_H 1

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct kt_case
{
  const char *name;
  void (*fn) (void);
};

static const char *kt_current;
static int kt_failed;

#define KT_TEST(name) static void name (void)
#define KT_CASE(name) { #name, name }

static __attribute__ ((__unused__)) void
kt_report_failure (const char *file, int line, const char *what)
{
  if (!kt_failed)
    printf ("FAIL: %s: %s:%d: %s\n", kt_current, file, line, what);
  fflush (stdout);
  kt_failed = 1;
}

/* Stop the current test with FAIL; FMT describes what went wrong.  */
#define KT_FAILF(...)                                                   \
  do {                                                                  \
    char kt_msg_[512];                                                  \
    snprintf (kt_msg_, sizeof kt_msg_, __VA_ARGS__);                    \
    kt_report_failure (__FILE__, __LINE__, kt_msg_);                    \
    return;                                                             \
  } while (0)

#define KT_CHECK(cond)                                                  \
  do {                                                                  \
    if (!(cond))                                                        \
      KT_FAILF ("%s", #cond);                                           \
  } while (0)

#define KT_CHECK_EQ(a, b)                                               \
  do {                                                                  \
    uintmax_t kt_a_ = (uintmax_t) (a), kt_b_ = (uintmax_t) (b);         \
    if (kt_a_ != kt_b_)                                                 \
      KT_FAILF ("%s == %s (%" PRIuMAX " != %" PRIuMAX ")", #a, #b,      \
                kt_a_, kt_b_);                                          \
  } while (0)

#define KT_CHECK_PTR_EQ(a, b)                                           \
  do {                                                                  \
    const void *kt_a_ = (const void *) (a), *kt_b_ = (const void *) (b); \
    if (kt_a_ != kt_b_)                                                 \
      KT_FAILF ("%s == %s (%p != %p)", #a, #b, kt_a_, kt_b_);           \
  } while (0)

#define KT_CHECK_STR_EQ(a, b)                                           \
  do {                                                                  \
    const char *kt_a_ = (a), *kt_b_ = (b);                              \
    if (kt_a_ == NULL || kt_b_ == NULL || strcmp (kt_a_, kt_b_) != 0)   \
      KT_FAILF ("%s == %s (\"%s\" != \"%s\")", #a, #b,                  \
                kt_a_ ? kt_a_ : "(null)", kt_b_ ? kt_b_ : "(null)");    \
  } while (0)

/* Run FN (NULL) in a thread of its own and wait for it; FN returns
   NULL, or a message that fails the current test.  Tests that need a
   fresh heap (an empty first level of the large cache, no chunks of
   their own yet) run their body this way.  */
static __attribute__ ((__unused__)) void
kt_in_a_thread (void *(*fn) (void *))
{
  pthread_t t;
  void *err;
  KT_CHECK (pthread_create (&t, NULL, fn, NULL) == 0);
  KT_CHECK (pthread_join (t, &err) == 0);
  if (err != NULL)
    KT_FAILF ("%s", (const char *) err);
}

/* Mark the current test UNSUPPORTED (for example, no THP in the
   kernel) and stop it.  */
#define KT_UNSUPPORTED(...)                                             \
  do {                                                                  \
    printf ("UNSUPPORTED: %s: ", kt_current);                           \
    printf (__VA_ARGS__);                                               \
    printf ("\n");                                                      \
    fflush (stdout);                                                    \
    kt_failed = -1;                                                     \
    return;                                                             \
  } while (0)

/* Fill N bytes at P with a pattern that depends on SEED and on the
   offset, so that a block overwritten by another, or moved without its
   contents, is caught by kt_painted.  */
static __attribute__ ((__unused__)) void
kt_paint (void *p, size_t n, uintptr_t seed)
{
  unsigned char *b = (unsigned char *) p;
  for (size_t i = 0; i < n; i++)
    b[i] = (unsigned char) (seed + i * 29u);
}

static __attribute__ ((__unused__)) bool
kt_painted (const void *p, size_t n, uintptr_t seed)
{
  const unsigned char *b = (const unsigned char *) p;
  for (size_t i = 0; i < n; i++)
    if (b[i] != (unsigned char) (seed + i * 29u))
      return false;
  return true;
}

/* The value, in KiB, of FIELD ("VmRSS", "VmSize", ...) in
   /proc/self/status, or 0 when it cannot be read.  */
static __attribute__ ((__unused__)) size_t
kt_proc_status_kib (const char *field)
{
  FILE *f = fopen ("/proc/self/status", "r");
  if (f == NULL)
    return 0;
  char line[256];
  size_t len = strlen (field), kib = 0;
  while (fgets (line, sizeof line, f) != NULL)
    if (strncmp (line, field, len) == 0 && line[len] == ':')
      kib = (size_t) strtoull (line + len + 1, NULL, 10);
  fclose (f);
  return kib;
}

/* Read FD to its end into BUF (SIZE bytes, the terminating NUL
   included) and close it: a child's stderr.  */
static __attribute__ ((__unused__)) void
kt_read_all (int fd, char *buf, size_t size)
{
  size_t len = 0;
  ssize_t r;
  while ((r = read (fd, buf + len, size - 1 - len)) > 0
         || (r < 0 && errno == EINTR))
    if (r > 0)
      len += (size_t) r;
  buf[len] = '\0';
  close (fd);
}

/* Wait for child PID, its status in *STATUS; false on an error.  */
static __attribute__ ((__unused__)) bool
kt_wait (pid_t pid, int *status)
{
  while (waitpid (pid, status, 0) < 0)
    if (errno != EINTR)
      return false;
  return true;
}

/* Run this test program again (/proc/self/exe) in a child: with only
   the variables of ENV (a NULL-terminated list of NAME=VALUE) when
   CLEAN, else with them added to this one's; in DIR when it is not
   NULL.  Its standard output into OUT and its standard error into ERR
   (kt_read_all), its wait status in *STATUS and its pid in *PID (PID
   may be NULL).  False when the child could not be made or waited
   for.  */
static __attribute__ ((__unused__)) bool
kt_run_self (const char *const env[], bool clean, const char *dir,
             char *out, size_t osize, char *err, size_t esize, int *status,
             pid_t *pid)
{
  int op[2], ep[2];
  if (pipe (op) != 0 || pipe (ep) != 0)
    return false;
  fflush (stdout);
  pid_t child = fork ();
  if (child < 0)
    return false;
  if (child == 0)
    {
      dup2 (op[1], 1);
      dup2 (ep[1], 2);
      close (op[0]);
      close (ep[0]);
      if (dir != NULL && chdir (dir) != 0)
        _exit (126);
      if (clean)
        clearenv ();
      for (size_t i = 0; env != NULL && env[i] != NULL; i++)
        putenv ((char *) env[i]);
      execl ("/proc/self/exe", "kptest-child", (char *) NULL);
      _exit (127);
    }
  close (op[1]);
  close (ep[1]);
  kt_read_all (op[0], out, osize);
  kt_read_all (ep[0], err, esize);
  if (pid != NULL)
    *pid = child;
  return kt_wait (child, status);
}

/* Run one test in this process and print its result.  */
static int
kt_run_here (const struct kt_case *c)
{
  kt_current = c->name;
  kt_failed = 0;
  c->fn ();
  if (kt_failed == 0)
    printf ("PASS: %s\n", c->name);
  fflush (stdout);
  return kt_failed > 0;
}

static int
kt_main (int argc, char **argv, const struct kt_case *cases, size_t n)
{
  setvbuf (stdout, NULL, _IOLBF, 0);
  if (argc > 1 && strcmp (argv[1], "--list") == 0)
    {
      for (size_t i = 0; i < n; i++)
        printf ("%s\n", cases[i].name);
      return 0;
    }
  if (argc > 1)
    {
      for (size_t i = 0; i < n; i++)
        if (strcmp (argv[1], cases[i].name) == 0)
          return kt_run_here (&cases[i]);
      fprintf (stderr, "%s: no test named %s\n", argv[0], argv[1]);
      return 2;
    }

  unsigned timeout = 240;
  const char *t = getenv ("KT_TIMEOUT");
  if (t != NULL && atoi (t) > 0)
    timeout = (unsigned) atoi (t);

  int failures = 0;
  for (size_t i = 0; i < n; i++)
    {
      fflush (stdout);
      fflush (stderr);
      pid_t pid = fork ();
      if (pid < 0)
        {
          printf ("FAIL: %s: fork failed\n", cases[i].name);
          failures++;
          continue;
        }
      if (pid == 0)
        {
          alarm (timeout);
          _exit (kt_run_here (&cases[i]));
        }
      int status;
      while (waitpid (pid, &status, 0) < 0)
        ;
      if (WIFSIGNALED (status))
        {
          printf ("FAIL: %s: killed by signal %d%s\n", cases[i].name,
                  WTERMSIG (status),
                  WTERMSIG (status) == SIGALRM ? " (timeout)" : "");
          failures++;
        }
      else if (WEXITSTATUS (status) != 0)
        failures++;
    }
  return failures != 0;
}

#define KT_MAIN(...)                                                    \
  int                                                                   \
  main (int argc, char **argv)                                          \
  {                                                                     \
    static const struct kt_case kt_cases_[] = { __VA_ARGS__ };          \
    return kt_main (argc, argv, kt_cases_,                              \
                    sizeof kt_cases_ / sizeof kt_cases_[0]);            \
  }

#endif /* KPTEST_H */
