/* kame_pool.h -- the public interface of libkamepool, a lock-free
   per-thread pool allocator.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   Every function here is thread-safe and may be called before any
   other (the allocator initialises itself on first use).  Memory from
   any kame_pool_* allocation call may be released with kame_pool_free
   or, when the library is preloaded or linked, with free(3).  See
   kamepool(7) and the page of each function.  */

#ifndef KAME_POOL_H
#define KAME_POOL_H 1

#include <stddef.h>

#if defined __GNUC__ && __GNUC__ >= 4
# define KAME_POOL_API __attribute__ ((__visibility__ ("default")))
# define KAME_POOL_MALLOC_ATTR(...) \
  __attribute__ ((__malloc__, __warn_unused_result__, __VA_ARGS__))
#else
# define KAME_POOL_API
# define KAME_POOL_MALLOC_ATTR(...)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The newest layout of kame_pool_stats_t this header describes.  */
#define KAME_POOL_STATS_VERSION 8u
/* Rows of kame_pool_stats_t.classes: at least the number of size
   classes; NCLASSES says how many are filled.  (Version 3 had 64 rows,
   and a caller of that version gets the first 64 classes.)  */
#define KAME_POOL_STATS_CLASSES 96

/* One size class of the small tier (blocks up to 208896 bytes).  */
typedef struct kame_pool_class_stats
{
  size_t block_size;            /* bytes per block of the class */
  size_t chunks;                /* chunks of the class */
  size_t live_blocks;           /* blocks allocated and not freed */
  size_t free_blocks;           /* blocks touched once and free now, with
                                   the remote frees not yet collected */
  size_t resident_bytes;        /* pages of the chunks touched and not
                                   given back */
} kame_pool_class_stats_t;

/* A statistics snapshot.  The caller sets VERSION to the layout it was
   compiled with; the library fills the fields of that version (and no
   more) and sets VERSION_SUPPORTED to the newest it knows.  New fields
   are only ever appended.  */
typedef struct kame_pool_stats
{
  unsigned version;             /* in: the caller's layout */
  unsigned version_supported;   /* out: the library's newest layout */
  /* Version 1.  */
  size_t regions_populated;     /* 32 MiB pool regions mapped so far */
  size_t bytes_reserved;        /* their address space, in bytes */
  size_t chunks_live;           /* claimed chunks (small and dedicated) */
  size_t units_live;            /* 256 KiB units those chunks hold */
  /* Version 2.  */
  size_t cache_bytes;           /* bytes held by the large recycle cache */
  size_t dedicated_chunk_bytes; /* bytes in live dedicated chunks */
  size_t large_alloc_count;     /* live mappings above 4 MiB */
  size_t large_alloc_bytes;     /* their mapped bytes */
  /* Version 3: where the resident memory goes.  */
  size_t small_live_bytes;      /* bytes of live blocks of the classes */
  size_t small_resident_bytes;  /* resident_bytes over all classes */
  size_t small_free_bytes;      /* of those, not in a live block */
  size_t purged_bytes;          /* pages of small chunks given back now */
  size_t dirty_bytes;           /* free units whose pages stay resident */
  size_t remote_pending;        /* remote frees not yet collected */
  size_t abandoned_chunks;      /* chunks of exited threads, not empty */
  size_t abandoned_bytes;       /* their resident bytes */
  size_t purge_calls;           /* madvise/munmap calls of the decay, ever */
  size_t purge_pages;           /* pages those calls gave back, ever */
  size_t nclasses;              /* rows of CLASSES filled */
  /* Version 4: more rows (the classes above 32 KiB).  */
  kame_pool_class_stats_t classes[KAME_POOL_STATS_CLASSES];
  /* Version 5: memory given back and taken again.  */
  size_t discard_calls;         /* madvise calls that gave pages back, ever */
  size_t discard_pages;         /* pages they gave back, ever */
  size_t refault_units;         /* free units reused after that, ever */
  size_t background_passes;     /* ticks of the background purge, ever */
  size_t background_pages;      /* pages it gave back, ever */
  size_t background_starts;     /* times its thread was started, ever */
  size_t background_running;    /* 1 while its thread runs */
  /* Version 6: totals since start, and peaks.  */
  size_t allocated_blocks;      /* blocks handed out, ever */
  size_t allocated_bytes;       /* their bytes (block sizes; whole units
                                   and mappings for the large blocks) */
  size_t freed_blocks;          /* of those, freed: allocated less live */
  size_t freed_bytes;           /* their bytes */
  size_t live_blocks;           /* blocks live now, every tier */
  size_t live_bytes;            /* their bytes */
  size_t peak_live_bytes;       /* the most LIVE_BYTES measured, ever */
  size_t peak_resident_bytes;   /* the largest footprint, ever: units
                                   claimed and large mappings */
  size_t prof_stacks;           /* stacks in the heap profile's table */
  size_t prof_table_bytes;      /* the table's bytes in use */
  size_t prof_shortened;        /* samples kept by their innermost frame */
  size_t prof_dropped;          /* samples not recorded */
  /* Version 7: guarded sampling.  */
  size_t guard_slots;           /* slots of the guarded pool, 0: off */
  size_t guard_slots_used;      /* of those, holding a live block */
  size_t guard_allocs;          /* guarded blocks allocated, ever */
  size_t guard_reports;         /* misuse of them reported, ever */
  /* Version 8: loans of the large cache to the small chunks.  */
  size_t lent_blocks;           /* cached blocks lent, ever */
  size_t lent_bytes;            /* their bytes */
} kame_pool_stats_t;

extern KAME_POOL_API void *kame_pool_malloc (size_t size)
  KAME_POOL_MALLOC_ATTR (__alloc_size__ (1));
extern KAME_POOL_API void *kame_pool_calloc (size_t nmemb, size_t size)
  KAME_POOL_MALLOC_ATTR (__alloc_size__ (1, 2));
extern KAME_POOL_API void *kame_pool_realloc (void *ptr, size_t size)
#if defined __GNUC__ && __GNUC__ >= 4
  __attribute__ ((__warn_unused_result__, __alloc_size__ (2)))
#endif
  ;
extern KAME_POOL_API void kame_pool_free (void *ptr);
/* kame_pool_free of a block allocated with SIZE bytes (and ALIGNMENT),
   as C23's free_sized and free_aligned_sized: a SIZE larger than the
   block, or an ALIGNMENT the block does not have, is misuse.  */
extern KAME_POOL_API void kame_pool_free_sized (void *ptr, size_t size);
extern KAME_POOL_API void kame_pool_free_aligned_sized (void *ptr,
                                                        size_t alignment,
                                                        size_t size);
extern KAME_POOL_API void *kame_pool_aligned_alloc (size_t alignment,
                                                    size_t size)
  KAME_POOL_MALLOC_ATTR (__alloc_size__ (2), __alloc_align__ (1));
extern KAME_POOL_API int kame_pool_posix_memalign (void **memptr,
                                                   size_t alignment,
                                                   size_t size);
extern KAME_POOL_API size_t kame_pool_malloc_usable_size (const void *ptr);

/* The settings.  Every kame_pool_set_* returns 0, or an errno value
   (EINVAL) when it refuses the value, which leaves the setting as it
   was; none of them sets errno.  */
extern KAME_POOL_API int kame_pool_set_max_bytes (size_t bytes);
extern KAME_POOL_API size_t kame_pool_get_max_bytes (void);
extern KAME_POOL_API size_t kame_pool_reserved_bytes (void);

extern KAME_POOL_API int kame_pool_set_thread_exit_reclaim (int on);
extern KAME_POOL_API int kame_pool_get_thread_exit_reclaim (void);

extern KAME_POOL_API void kame_pool_get_stats (kame_pool_stats_t *stats);

/* Give back to the kernel the free memory the pool can without moving
   a live block: the free pages of the calling thread's chunks, the
   large recycle cache and the free units whose pages are resident,
   leaving at most PAD bytes of the last two (see kame_pool_trim(3)).
   Returns 1 if any memory was given back, 0 otherwise.  Other threads'
   chunks are left to their own decay.  malloc_trim when the library
   replaces malloc.  */
extern KAME_POOL_API int kame_pool_trim (size_t pad);

/* Write the heap profile (KAME_POOL_PROF) to PATH now, in the text
   format google-pprof reads: 0, or EINVAL when profiling is off or
   PATH is NULL, or the errno value of the failed open or write (see
   kame_pool_prof_dump(3)).  */
extern KAME_POOL_API int kame_pool_prof_dump (const char *path);

/* Transparent-hugepage advice for the data of the pool's regions:
   leave it to the kernel's mode, MADV_HUGEPAGE, MADV_NOHUGEPAGE, or
   MADV_HUGEPAGE on the 2 MiB groups of the small blocks of the classes
   a thread fills densely (see kame_pool_set_thp_policy(3)).  */
#define KAME_POOL_THP_SYSTEM 0
#define KAME_POOL_THP_ALWAYS 1
#define KAME_POOL_THP_NEVER 2
#define KAME_POOL_THP_SMALL 3
/* The names before 0.1.0, kept for the programs that use them.  */
#define KAME_THP_SYSTEM KAME_POOL_THP_SYSTEM
#define KAME_THP_ALWAYS KAME_POOL_THP_ALWAYS
#define KAME_THP_NEVER KAME_POOL_THP_NEVER
extern KAME_POOL_API int kame_pool_set_thp_policy (int policy);
extern KAME_POOL_API int kame_pool_get_thp_policy (void);

/* Regions per NUMA node: fills REGIONS_PER_NODE[0..N-1], returns the
   number of nodes the pool tells apart (1 without NUMA placement).  */
extern KAME_POOL_API size_t kame_pool_get_numa_stats (size_t *regions_per_node,
                                                      size_t n);

/* What a small or dedicated (up to 4 MiB) request gets when the pool
   has no unit left under its cap, or the kernel refuses a region: the
   C library's malloc (FALLBACK, the default) or NULL with errno ENOMEM
   (STRICT; also KAME_POOL_STRICT_CAP=1 in the environment).  Returns 0,
   or EINVAL for an unknown policy.  */
#define KAME_POOL_CAP_FALLBACK 0
#define KAME_POOL_CAP_STRICT 1
extern KAME_POOL_API int kame_pool_set_cap_policy (int policy);
extern KAME_POOL_API int kame_pool_get_cap_policy (void);

/* The byte cap of the recycle cache of freed large blocks (dedicated
   chunks up to 4 MiB and mappings up to 32 MiB); 0 disables it.
   Lowering it gives cached blocks back at once.  */
extern KAME_POOL_API int kame_pool_set_large_cache_cap (size_t bytes);
extern KAME_POOL_API size_t kame_pool_get_large_cache_cap (void);

#ifdef __cplusplus
}
#endif

#endif /* KAME_POOL_H */
