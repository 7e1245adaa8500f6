/* tls-dlopen.c -- a global-dynamic (or local-dynamic) build can be
   dlopen'ed after start-up and used through the kame_pool_* API, from
   several threads.  This program is not linked with libkamepool (it
   names none of its symbols, and --as-needed drops the -lkamepool of
   the test driver); it loads ../.libs/libkamepool.so next to itself.
   kptest-requires: tls-dynamic
   kptest-options: -Wl,--as-needed

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#define _GNU_SOURCE 1  /* getcpu, CPU_SET, RTLD_NOLOAD */

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "kptest.h"

static void *(*pmalloc) (size_t);
static void (*pfree) (void *);
static size_t (*pusable) (const void *);

static bool
library_path (char *buf, size_t size)
{
  char exe[PATH_MAX];
  ssize_t n = readlink ("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0)
    return false;
  exe[n] = '\0';
  char *slash = strrchr (exe, '/');
  if (slash == NULL)
    return false;
  *slash = '\0';
  return (size_t) snprintf (buf, size, "%s/../.libs/libkamepool.so", exe)
         < size;
}

#define NT 4
#define NB 2000
static void *blocks[NT][NB];

static void *
thread_alloc (void *arg)
{
  void **mine = arg;
  for (int i = 0; i < NB; i++)
    {
      size_t n = 16 + (size_t) (i % 97) * 24;
      mine[i] = pmalloc (n);
      if (mine[i] == NULL || pusable (mine[i]) < n)
        return arg;
      memset (mine[i], i & 0xff, n);
    }
  return NULL;
}

KT_TEST (tls_dynamic_dlopen_after_start)
{
  char path[PATH_MAX + 32];
  KT_CHECK (library_path (path, sizeof path));
  /* Not loaded at start-up.  */
  KT_CHECK (dlopen (path, RTLD_NOW | RTLD_NOLOAD) == NULL);
  void *h = dlopen (path, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL)
    KT_FAILF ("dlopen: %s", dlerror ());
  *(void **) &pmalloc = dlsym (h, "kame_pool_malloc");
  *(void **) &pfree = dlsym (h, "kame_pool_free");
  *(void **) &pusable = dlsym (h, "kame_pool_malloc_usable_size");
  KT_CHECK (pmalloc != NULL && pfree != NULL && pusable != NULL);

  void *p = pmalloc (100);
  KT_CHECK (p != NULL);
  KT_CHECK_EQ (pusable (p), 112);
  pthread_t t[NT];
  for (int i = 0; i < NT; i++)
    KT_CHECK_EQ (pthread_create (&t[i], NULL, thread_alloc, blocks[i]), 0);
  for (int i = 0; i < NT; i++)
    {
      void *ret;
      KT_CHECK_EQ (pthread_join (t[i], &ret), 0);
      KT_CHECK (ret == NULL);
    }
  /* Free the threads' blocks here, after they exited: the remote path.  */
  for (int i = 0; i < NT; i++)
    for (int k = 0; k < NB; k++)
      {
        size_t n = 16 + (size_t) (k % 97) * 24;
        KT_CHECK (pusable (blocks[i][k]) >= n);
        KT_CHECK_EQ (((unsigned char *) blocks[i][k])[n - 1], k & 0xff);
        pfree (blocks[i][k]);
      }
  pfree (p);
  /* A pointer that is not the pool's: usable size 0.  */
  int local;
  KT_CHECK_EQ (pusable (&local), 0);
}

KT_MAIN (KT_CASE (tls_dynamic_dlopen_after_start))
