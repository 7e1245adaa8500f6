/* abi.c -- kamepool.abi: what the built libraries export.

   The exported symbols are read with nm -D from the libraries this
   program is linked with (found with dladdr); the expected sets are
   the functions declared in the public headers, plus the malloc family
   with glibc's extensions (malloc_trim, mallinfo2, ...) and the C++
   operators in an interposing build.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */
/* kptest-options: -D_GNU_SOURCE */
/* kptest-libs: -lckarena */

#include <dlfcn.h>
#include <libgen.h>
#include <regex.h>

#include "kame_pool.h"
#include "tinyllm/abi.h"
#include "kptest.h"
#include "kptest-pool.h"

#define MAX_SYMS 512

struct symset
{
  char *name[MAX_SYMS];
  size_t n;
};

static bool
set_has (const struct symset *s, const char *name)
{
  for (size_t i = 0; i < s->n; i++)
    if (strcmp (s->name[i], name) == 0)
      return true;
  return false;
}

static void
set_add (struct symset *s, const char *name)
{
  if (s->n < MAX_SYMS && !set_has (s, name))
    s->name[s->n++] = strdup (name);
}

/* The defined dynamic symbols of LIB, without their version.  */
static bool
exported (const char *lib, struct symset *out)
{
  char cmd[4096];
  snprintf (cmd, sizeof cmd, "nm -D --defined-only '%s'", lib);
  FILE *f = popen (cmd, "r");
  if (f == NULL)
    return false;
  char line[1024];
  while (fgets (line, sizeof line, f) != NULL)
    {
      char addr[64], type[8], name[900];
      if (sscanf (line, "%63s %7s %899s", addr, type, name) != 3)
        continue;
      if (strcmp (type, "A") == 0)
        continue;                       /* version node names */
      char *at = strchr (name, '@');
      if (at != NULL)
        *at = '\0';
      set_add (out, name);
    }
  return pclose (f) == 0;
}

/* Every NAME in "NAME (" of the header PATH that starts with one of
   the PREFIXES: the functions it declares.  */
static bool
declared (const char *path, const char *const *prefixes, struct symset *out)
{
  FILE *f = fopen (path, "r");
  if (f == NULL)
    return false;
  char line[1024];
  regex_t re;
  if (regcomp (&re, "([a-z_][a-z0-9_]*) \\(", REG_EXTENDED) != 0)
    return false;
  while (fgets (line, sizeof line, f) != NULL)
    {
      regmatch_t m[2];
      const char *p = line;
      while (regexec (&re, p, 2, m, 0) == 0)
        {
          char name[256];
          int len = (int) (m[1].rm_eo - m[1].rm_so);
          snprintf (name, sizeof name, "%.*s", len, p + m[1].rm_so);
          for (const char *const *q = prefixes; *q != NULL; q++)
            if (strncmp (name, *q, strlen (*q)) == 0)
              set_add (out, name);
          p += m[0].rm_eo;
        }
    }
  regfree (&re);
  fclose (f);
  return true;
}

static const char *
include_dir (void)
{
  static char dir[4096];
  char file[4000];
  snprintf (file, sizeof file, "%s", __FILE__);
  snprintf (dir, sizeof dir, "%s/../../include", dirname (file));
  return dir;
}

/* The malloc family with C23's sized frees, and glibc's extensions
   (mallinfo.c).  */
static const char *const malloc_family[] = {
  "malloc", "free", "calloc", "realloc", "reallocarray", "posix_memalign",
  "aligned_alloc", "memalign", "valloc", "pvalloc", "malloc_usable_size",
  "malloc_trim", "mallinfo2", "mallinfo", "malloc_stats", "malloc_info",
  "mallopt", "free_sized", "free_aligned_sized",
  NULL
};

KT_TEST (libkamepool_exports_exactly_its_interface)
{
  const char *lib = kt_object_of ((void *) kame_pool_malloc);
  KT_CHECK (lib != NULL);
  struct symset got = { .n = 0 }, want = { .n = 0 };
  KT_CHECK (exported (lib, &got));
  char header[4200];
  snprintf (header, sizeof header, "%s/kame_pool.h", include_dir ());
  static const char *const prefixes[] = { "kame_pool_", NULL };
  KT_CHECK (declared (header, prefixes, &want));
  KT_CHECK (want.n >= 13);
  bool interpose = kt_pool_interposes ();
  for (size_t i = 0; i < want.n; i++)
    if (!set_has (&got, want.name[i]))
      KT_FAILF ("%s declares %s but %s does not export it", header,
                want.name[i], lib);
  for (const char *const *m = malloc_family; *m != NULL; m++)
    if (set_has (&got, *m) != interpose)
      KT_FAILF ("%s %s %s", lib, interpose ? "does not export" : "exports",
                *m);
  for (size_t i = 0; i < got.n; i++)
    {
      const char *s = got.name[i];
      bool ok = set_has (&want, s);
      for (const char *const *m = malloc_family; *m != NULL && !ok; m++)
        ok = strcmp (s, *m) == 0;
      /* operator new and delete: _Znwm, _ZdlPv, ... */
      ok = ok || strncmp (s, "_Znw", 4) == 0 || strncmp (s, "_Zna", 4) == 0
           || strncmp (s, "_Zdl", 4) == 0 || strncmp (s, "_Zda", 4) == 0;
      if (!ok)
        KT_FAILF ("%s exports %s, which no public header declares", lib, s);
    }
}

/* The version of each symbol LIB exports, "" for none: NAME@@VERSION
   in nm -D's output.  */
static const char *
version_of (const char *lib, const char *name)
{
  static char version[128];
  char cmd[4096];
  snprintf (cmd, sizeof cmd, "nm -D --defined-only '%s'", lib);
  FILE *f = popen (cmd, "r");
  if (f == NULL)
    return NULL;
  char line[1024];
  const char *found = NULL;
  while (fgets (line, sizeof line, f) != NULL)
    {
      char addr[64], type[8], sym[900];
      if (sscanf (line, "%63s %7s %899s", addr, type, sym) != 3)
        continue;
      char *at = strchr (sym, '@');
      if (at != NULL)
        *at = '\0';
      if (strcmp (sym, name) != 0)
        continue;
      snprintf (version, sizeof version, "%s",
                at == NULL ? "" : at + 1 + (at[1] == '@'));
      found = version;
    }
  pclose (f);
  return found;
}

/* The version script's nodes: the first release's functions in
   KAMEPOOL_0.1, the sized frees in the new node KAMEPOOL_0.2,
   kame_pool_prof_dump in KAMEPOOL_0.3, and the
   malloc family, mallopt and the C23 frees without a version, which
   the dynamic linker needs to bind a program's malloc@GLIBC_2.2.5 (or
   mallopt@GLIBC_2.2.5, free_sized@GLIBC_2.43) to them.  */
KT_TEST (libkamepool_symbol_versions_are_exact)
{
  const char *lib = kt_object_of ((void *) kame_pool_malloc);
  KT_CHECK (lib != NULL);
  const char *v = version_of (lib, "kame_pool_malloc");
  KT_CHECK (v != NULL);
  if (*v == '\0')
    KT_UNSUPPORTED ("built without a version script");
  struct symset want = { .n = 0 };
  char header[4200];
  snprintf (header, sizeof header, "%s/kame_pool.h", include_dir ());
  static const char *const prefixes[] = { "kame_pool_", NULL };
  KT_CHECK (declared (header, prefixes, &want));
  for (size_t i = 0; i < want.n; i++)
    {
      const char *name = want.name[i];
      const char *node = strcmp (name, "kame_pool_free_sized") == 0
                         || strcmp (name, "kame_pool_free_aligned_sized") == 0
                         ? "KAMEPOOL_0.2"
                         : strcmp (name, "kame_pool_prof_dump") == 0
                         ? "KAMEPOOL_0.3" : "KAMEPOOL_0.1";
      v = version_of (lib, name);
      if (v == NULL || strcmp (v, node) != 0)
        KT_FAILF ("%s has version \"%s\", not %s", name,
                  v != NULL ? v : "(missing)", node);
    }
  if (kt_pool_interposes ())
    for (const char *const *m = malloc_family; *m != NULL; m++)
      {
        v = version_of (lib, *m);
        if (v == NULL || *v != '\0')
          KT_FAILF ("%s has version \"%s\", not none", *m,
                    v != NULL ? v : "(missing)");
      }
}

KT_TEST (libckarena_exports_exactly_its_interface)
{
  const char *lib = kt_object_of ((void *) tl_status_str);
  KT_CHECK (lib != NULL);
  struct symset got = { .n = 0 }, want = { .n = 0 };
  KT_CHECK (exported (lib, &got));
  static const char *const prefixes[] = { "tl_", "ck_", NULL };
  static const char *const headers[] = {
    "tinyllm/abi.h", "tinyllm/arena.h", "ckernel_alloc.h"
  };
  for (size_t i = 0; i < 3; i++)
    {
      char path[4300];
      snprintf (path, sizeof path, "%s/%s", include_dir (), headers[i]);
      KT_CHECK (declared (path, prefixes, &want));
    }
  KT_CHECK (want.n >= 20);
  for (size_t i = 0; i < want.n; i++)
    if (!set_has (&got, want.name[i]))
      KT_FAILF ("%s does not export the declared %s", lib, want.name[i]);
  for (size_t i = 0; i < got.n; i++)
    if (!set_has (&want, got.name[i]))
      KT_FAILF ("%s exports %s, which no public header declares", lib,
                got.name[i]);
}

KT_MAIN (KT_CASE (libkamepool_exports_exactly_its_interface),
         KT_CASE (libkamepool_symbol_versions_are_exact),
         KT_CASE (libckarena_exports_exactly_its_interface))
