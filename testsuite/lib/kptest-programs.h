/* kptest-programs.h -- helpers of the tests that run other programs
   with the library in LD_PRELOAD.  Include after kame_pool.h and
   kptest.h; the including file defines KT_WORKDIR_TEMPLATE, a mkdtemp
   template such as "/tmp/kptest-misuse-XXXXXX".  Copyright (C) 2026
   The kamepool authors; LGPL-2.1+.  */

#ifndef KPTEST_PROGRAMS_H
#define KPTEST_PROGRAMS_H 1

#include <dlfcn.h>

extern char **environ;

static char workdir[] = KT_WORKDIR_TEMPLATE;
static char library[4096];

/* Find the library (this program is linked against the built one) and
   make the scratch directory; false if either fails.  */
static bool
setup (void)
{
  Dl_info info;
  if (dladdr ((void *) kame_pool_malloc, &info) == 0
      || info.dli_fname == NULL || info.dli_fname[0] != '/'
      || strlen (info.dli_fname) >= sizeof library)
    return false;
  strcpy (library, info.dli_fname);
  return mkdtemp (workdir) != NULL;
}

static void
remove_workdir (void)
{
  char cmd[256];
  snprintf (cmd, sizeof cmd, "rm -rf '%s'", workdir);
  if (system (cmd) != 0)
    printf ("could not remove %s\n", workdir);
}

/* The full path of PROG, or NULL: the distribution's binaries first
   (/usr/bin, /bin), since a wrapper script such as a pyenv shim would
   hide which program runs, then PATH.  */
static const char *
find_program (const char *prog)
{
  static char path[4096];
  const char *dirs = getenv ("PATH");
  char all[8192];
  snprintf (all, sizeof all, "/usr/bin:/bin:%s", dirs != NULL ? dirs : "");
  for (char *save = NULL, *d = strtok_r (all, ":", &save); d != NULL;
       d = strtok_r (NULL, ":", &save))
    {
      snprintf (path, sizeof path, "%s/%s", d, prog);
      if (access (path, X_OK) == 0)
        return path;
    }
  return NULL;
}

/* This process's environment without the variables that start with one
   of the NULL-terminated DROP prefixes, with room for ROOM more entries
   and their NULL; the count kept in *K.  Free it (not its strings).  */
static char **
env_without (const char *const drop[], size_t room, size_t *k)
{
  size_t n = 0;
  while (environ[n] != NULL)
    n++;
  char **env = calloc (n + room + 1, sizeof *env);
  if (env == NULL)
    return NULL;
  *k = 0;
  for (size_t i = 0; i < n; i++)
    {
      bool keep = true;
      for (size_t d = 0; drop[d] != NULL && keep; d++)
        keep = strncmp (environ[i], drop[d], strlen (drop[d])) != 0;
      if (keep)
        env[(*k)++] = environ[i];
    }
  return env;
}

/* Skip the test (UNSUPPORTED) unless NAME is installed; VAR is then a
   char array holding its path.  */
#define NEED_PROGRAM(var, name)                                         \
  const char *var##_found = find_program (name);                        \
  if (var##_found == NULL)                                              \
    KT_UNSUPPORTED ("%s is not installed", name);                       \
  char var[4096];                                                       \
  snprintf (var, sizeof var, "%s", var##_found)

/* Write LINES lines of pseudo-random keys, numbers and text of 0 to 59
   bytes into PATH, for sort; false if it cannot.  */
static bool
write_sort_input (const char *path, int lines)
{
  FILE *f = fopen (path, "w");
  if (f == NULL)
    return false;
  uint64_t x = 88172645463325252u;
  for (int i = 0; i < lines; i++)
    {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      fprintf (f, "%016jx %d %.*s\n", (uintmax_t) x, i, (int) (x % 60),
               "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
               "0123456789");
    }
  return fclose (f) == 0;
}

#endif /* KPTEST_PROGRAMS_H */
