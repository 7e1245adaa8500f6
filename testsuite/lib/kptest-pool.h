/* kptest-pool.h -- helpers shared by the kamepool.* test programs (the
   ckarena ones do not link the pool).  Include after kame_pool.h and
   kptest.h.  Copyright (C) 2026 The kamepool authors; LGPL-2.1+.  */

#ifndef KPTEST_POOL_H
#define KPTEST_POOL_H 1

/* A snapshot of the pool's statistics, the newest version.  */
static inline kame_pool_stats_t
kt_pool_stats (void)
{
  kame_pool_stats_t s;
  memset (&s, 0, sizeof s);
  s.version = KAME_POOL_STATS_VERSION;
  kame_pool_get_stats (&s);
  return s;
}

/* The row of kame_pool_stats_t.classes whose blocks have SIZE bytes,
   or SIZE_MAX.  */
static inline size_t
kt_pool_class (const kame_pool_stats_t *s, size_t size)
{
  for (size_t i = 0; i < s->nclasses; i++)
    if (s->classes[i].block_size == size)
      return i;
  return SIZE_MAX;
}

/* qsort's comparison of two uintptr_t (or pointers).  */
static inline int
kt_cmp_uintptr (const void *a, const void *b)
{
  uintptr_t x = *(const uintptr_t *) a, y = *(const uintptr_t *) b;
  return x < y ? -1 : x > y;
}

/* Whether plain malloc is the pool's (an interposing build) or not (a
   sanitizer build, where the sanitizer owns malloc and the pool's
   foreign pointers come from and go back to that malloc).  */
static inline bool
kt_pool_interposes (void)
{
  char *p = malloc (1);
  if (p == NULL)
    return false;
  *p = 0;
  bool ours = kame_pool_malloc_usable_size (p) != 0;
  free (p);
  return ours;
}

#ifdef RTLD_DEFAULT             /* <dlfcn.h> with _GNU_SOURCE */
/* The path of the shared object that defines ADDR, or NULL.  */
static inline const char *
kt_object_of (const void *addr)
{
  Dl_info info;
  if (dladdr (addr, &info) == 0 || info.dli_fname == NULL)
    return NULL;
  return info.dli_fname;
}
#endif

#endif /* KPTEST_POOL_H */
