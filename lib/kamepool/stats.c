/* stats.c -- kame_pool_get_stats: a walk over the regions plus the
   large-tier counters; the report at exit (KAME_POOL_STATS), as text
   or JSON, to stderr or a file.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.

   The walk reads claim bits and descriptor kinds with relaxed loads
   while other threads claim and release: each number is exact when no
   other thread allocates, and a close approximation otherwise.  */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kp_internal.h"

_Static_assert (KAME_POOL_STATS_CLASSES >= KP_NCLASS,
                "a row of kame_pool_stats_t.classes for every class");
/* Rows of CLASSES in the version 3 layout.  */
#define KP_STATS_CLASSES_V3 64

/* Blocks handed out ever and their bytes, and the blocks live now
   (the totals of version 6), as kp_stats_small sums them.  */
typedef struct kp_stats_totals
{
  uint64_t blocks, bytes, live_blocks;
} kp_stats_totals_t;

/* The version 3 fields, with ROWS rows of CLASSES (the caller's
   layout's; the totals count every class), and the small blocks'
   part of version 6's in *TOTALS.  The owner-private fields of the
   descriptors (used, pops, bump, purged) are read without
   synchronisation, through relaxed atomic loads of plain objects:
   while other threads allocate the figures are a close approximation,
   and ThreadSanitizer is told not to instrument this reader, whose
   races are deliberate.  With no other thread allocating they are
   exact.  */
__attribute__ ((__no_sanitize__ ("thread")))
static void
kp_stats_small (kame_pool_stats_t *s, unsigned rows,
                kp_stats_totals_t *totals)
{
  size_t page = kp_os_page_size ();
  kame_pool_class_stats_t k[KP_NCLASS];
  memset (k, 0, sizeof k);
  size_t used[KP_NCLASS] = { 0 };
  uint64_t pops[KP_NCLASS] = { 0 };
  size_t abandoned = 0, abandoned_bytes = 0, purged = 0;
  KP_FOR_EACH_REGION (r)
    KP_FOR_EACH_CHUNK_UNIT (r, u)
      {
        kp_chunk_t *c = &r->desc[u];
        if (atomic_load_explicit (&c->kind, memory_order_relaxed)
            != KP_KIND_SMALL)
          continue;
        unsigned cls = atomic_load_explicit (&c->cls, memory_order_relaxed);
        size_t size = atomic_load_explicit (&c->block_size,
                                            memory_order_relaxed);
        if (cls >= KP_NCLASS || size == 0)
          continue;             /* being claimed right now */
        char *data = kp_chunk_data (c);
        char *bump = __atomic_load_n (&c->bump, __ATOMIC_RELAXED);
        size_t carved_bytes = bump > data ? (size_t) (bump - data) : 0;
        size_t n_used = __atomic_load_n (&c->used, __ATOMIC_RELAXED)
                        & ~KP_USED_ACTIVE;
        pops[cls] += __atomic_load_n (&c->pops, __ATOMIC_RELAXED);
        size_t carved = carved_bytes / size;
        size_t pages = (carved_bytes + page - 1) / page;
        size_t gone = 0;
        for (unsigned w = 0; w < KP_PURGE_WORDS; w++)
          gone += (size_t) __builtin_popcountll
            (__atomic_load_n (&c->purged[w], __ATOMIC_RELAXED));
        /* The pages below the bump pointer, less those given back.  */
        size_t resident = (pages > gone ? pages - gone : 0) * page;
        k[cls].chunks++;
        used[cls] += n_used;
        k[cls].free_blocks += carved > n_used ? carved - n_used : 0;
        k[cls].resident_bytes += resident;
        purged += gone * page;
        if (atomic_load_explicit (&c->owner, memory_order_relaxed) == NULL
            && !(atomic_load_explicit (&c->xthread_free, memory_order_relaxed)
                 & KP_TF_OWNED))
          {
            abandoned++;
            abandoned_bytes += resident;
          }
      }
  s->small_live_bytes = s->small_resident_bytes = s->remote_pending = 0;
  size_t pend[KP_NCLASS], slots[KP_NCLASS] = { 0 };
  kp_remote_pending (pend);
  kp_shared_slot_blocks (slots);
  for (unsigned cls = 0; cls < KP_NCLASS; cls++)
    {
      size_t pending = pend[cls];
      if (pending > used[cls])
        pending = used[cls];    /* counted while a free was under way */
      size_t slot = slots[cls];
      if (slot > used[cls] - pending)
        slot = used[cls] - pending;
      k[cls].block_size = kp_class_size[cls];
      k[cls].live_blocks = used[cls] - pending - slot;
      k[cls].free_blocks += pending + slot;
      s->remote_pending += pending;
      s->small_live_bytes += k[cls].live_blocks * kp_class_size[cls];
      s->small_resident_bytes += k[cls].resident_bytes;
    }
  s->small_free_bytes = s->small_resident_bytes > s->small_live_bytes
                        ? s->small_resident_bytes - s->small_live_bytes : 0;
  for (unsigned cls = 0; cls < KP_NCLASS; cls++)
    {
      uint64_t n = pops[cls] + atomic_load_explicit (&kp_small_pops[cls],
                                                     memory_order_relaxed);
      totals->blocks += n;
      totals->bytes += n * kp_class_size[cls];
      totals->live_blocks += k[cls].live_blocks;
    }
  s->purged_bytes = purged;
  s->dirty_bytes = kp_dirty_bytes ();
  s->abandoned_chunks = abandoned;
  s->abandoned_bytes = abandoned_bytes;
  s->purge_calls = s->purge_pages = 0;
  for (kp_heap_t *h = kp_heap_list (); h != NULL; h = h->pool_next)
    {
      s->purge_calls += atomic_load_explicit (&h->purge_calls,
                                              memory_order_relaxed);
      s->purge_pages += atomic_load_explicit (&h->purge_pages,
                                              memory_order_relaxed);
    }
  /* The background purge's calls are the decay's too.  */
  kp_purge_stats_t bg;
  kp_purge_counts_read (&bg);
  s->purge_calls += bg.calls;
  s->purge_pages += bg.pages;
  s->nclasses = KP_NCLASS < rows ? KP_NCLASS : rows;
  memset (s->classes, 0, rows * sizeof s->classes[0]);
  memcpy (s->classes, k, s->nclasses * sizeof k[0]);
}

/* The most live bytes measured: by every snapshot of version 6 or
   more, and by kp_stats_peak_measure each time the units claimed and
   the bytes mapped since the last measure pass a sixty-fourth of the
   footprint and a MiB (region.c).  Relaxed, raised with a CAS loop.  */
static _Atomic (size_t) kp_peak_live;

static void
kp_peak_live_raise (size_t live)
{
  size_t peak = atomic_load_explicit (&kp_peak_live, memory_order_relaxed);
  while (live > peak
         && !atomic_compare_exchange_weak_explicit (&kp_peak_live, &peak, live,
                                                    memory_order_relaxed,
                                                    memory_order_relaxed))
    ;
}

/* The live bytes now, the way kame_pool_get_stats counts them, for
   the peak: a walk of the descriptors without the per-class detail.
   Called where the footprint grows (a claim of units, a new mapping),
   so it takes no lock and allocates nothing.  A deliberate racy
   snapshot, as kp_stats_small's.  */
__attribute__ ((__no_sanitize__ ("thread")))
static void
kp_stats_peak_measure (void)
{
  size_t live = 0;
  size_t used[KP_NCLASS] = { 0 };
  KP_FOR_EACH_REGION (r)
    KP_FOR_EACH_CHUNK_UNIT (r, u)
      {
        kp_chunk_t *c = &r->desc[u];
        unsigned kind = atomic_load_explicit (&c->kind, memory_order_relaxed);
        if (kind == KP_KIND_DEDICATED)
          live += (size_t) atomic_load_explicit (&c->units,
                                                 memory_order_relaxed)
                  << KP_UNIT_SHIFT;
        else if (kind == KP_KIND_SMALL)
          {
            unsigned cls = atomic_load_explicit (&c->cls,
                                                 memory_order_relaxed);
            if (cls < KP_NCLASS)
              used[cls] += __atomic_load_n (&c->used, __ATOMIC_RELAXED)
                           & ~KP_USED_ACTIVE;
          }
      }
  size_t pend[KP_NCLASS];
  kp_remote_pending (pend);
  kp_shared_slot_blocks (pend);
  for (unsigned cls = 0; cls < KP_NCLASS; cls++)
    if (used[cls] > pend[cls])
      live += (used[cls] - pend[cls]) * kp_class_size[cls];
  size_t n, b, pn, pb, pln, plb;
  kp_large_stats (&n, &b);
  kp_prof_blocks (&pn, &pb, &pln, &plb);
  kp_peak_live_raise (live + b + plb);
}

__attribute__ ((__constructor__)) static void
kp_stats_peak_hook (void)
{
  atomic_store_explicit (&kp_peak_live_hook, kp_stats_peak_measure,
                         memory_order_relaxed);
}

void
kame_pool_get_stats (kame_pool_stats_t *s)
{
  if (s == NULL)
    return;
  unsigned want = s->version;
  s->version_supported = KAME_POOL_STATS_VERSION;
  if (want < 1)
    return;
  size_t regions = 0, chunks = 0, units = 0, dedicated = 0, dedicated_n = 0;
  KP_FOR_EACH_REGION (r)
    {
      regions++;
      for (unsigned w = 0; w < KP_CLAIM_WORDS; w++)
        units += (size_t) __builtin_popcountll
          (atomic_load_explicit (&r->claim[w], memory_order_relaxed));
      units--;                  /* unit 0, the metadata */
      KP_FOR_EACH_CHUNK_UNIT (r, u)
        {
          unsigned kind = atomic_load_explicit (&r->desc[u].kind,
                                                memory_order_relaxed);
          if (kind == KP_KIND_NONE)
            continue;
          if (kind == KP_KIND_CACHED)
            {
              /* Claimed, but free memory the cache holds.  */
              units -= atomic_load_explicit (&r->desc[u].units,
                                             memory_order_relaxed);
              continue;
            }
          chunks++;
          if (kind == KP_KIND_DEDICATED)
            {
              dedicated_n++;
              dedicated += (size_t) atomic_load_explicit (&r->desc[u].units,
                                                          memory_order_relaxed)
                           << KP_UNIT_SHIFT;
            }
        }
    }
  s->regions_populated = regions;
  s->bytes_reserved = regions * KP_REGION_SIZE;
  s->chunks_live = chunks;
  s->units_live = units;
  if (want < 2)
    return;
  s->cache_bytes = kp_cache_bytes ();
  s->dedicated_chunk_bytes = dedicated;
  kp_large_stats (&s->large_alloc_count, &s->large_alloc_bytes);
  if (want < 3)
    return;
  kp_stats_totals_t t = { 0, 0, 0 };
  kp_stats_small (s, want == 3 ? KP_STATS_CLASSES_V3
                               : KAME_POOL_STATS_CLASSES, &t);
  if (want < 5)
    return;
  s->discard_calls = atomic_load_explicit (&kp_os_discards.calls,
                                           memory_order_relaxed);
  s->discard_pages = atomic_load_explicit (&kp_os_discards.pages,
                                           memory_order_relaxed);
  s->refault_units = kp_units_refaulted ();
  kp_purge_stats_t p;
  kp_purge_counts_read (&p);
  s->background_passes = p.passes;
  s->background_pages = p.pages;
  s->background_starts = p.starts;
  s->background_running = p.running;
  if (want < 6)
    return;
  /* Handed out: the chunks' pops, the blocks taken back out of the
     batches of remote frees, the large blocks, the sampled and the
     guarded blocks.  */
  size_t taken_n = 0, taken_b = 0;
  for (kp_heap_t *h = kp_heap_list (); h != NULL; h = h->pool_next)
    {
      taken_n += atomic_load_explicit (&h->taken_blocks, memory_order_relaxed);
      taken_b += atomic_load_explicit (&h->taken_bytes, memory_order_relaxed);
    }
  size_t shared_n, shared_b;
  kp_shared_taken (&shared_n, &shared_b);
  taken_n += shared_n;
  taken_b += shared_b;
  size_t large_n, large_b, prof_n, prof_b, prof_live_n, prof_live_b;
  kp_large_totals (&large_n, &large_b);
  kp_prof_blocks (&prof_n, &prof_b, &prof_live_n, &prof_live_b);
  size_t guard_n, guard_b, guard_live_n, guard_live_b;
  kp_guard_blocks (&guard_n, &guard_b, &guard_live_n, &guard_live_b);
  s->allocated_blocks = (size_t) t.blocks + taken_n + large_n + prof_n
                        + guard_n;
  s->allocated_bytes = (size_t) t.bytes + taken_b + large_b + prof_b
                       + guard_b;
  s->live_blocks = (size_t) t.live_blocks + dedicated_n
                   + s->large_alloc_count + prof_live_n + guard_live_n;
  s->live_bytes = s->small_live_bytes + dedicated + s->large_alloc_bytes
                  + prof_live_b + guard_live_b;
  /* Counted at different moments while other threads run: never
     below zero.  */
  s->freed_blocks = s->allocated_blocks > s->live_blocks
                    ? s->allocated_blocks - s->live_blocks : 0;
  s->freed_bytes = s->allocated_bytes > s->live_bytes
                   ? s->allocated_bytes - s->live_bytes : 0;
  kp_peak_live_raise (s->live_bytes);
  s->peak_live_bytes = atomic_load_explicit (&kp_peak_live,
                                             memory_order_relaxed);
  s->peak_resident_bytes = kp_footprint_peak_bytes ();
  s->prof_table_bytes = kp_prof_table_bytes (&s->prof_stacks,
                                             &s->prof_shortened,
                                             &s->prof_dropped);
  if (want < 7)
    return;
  kp_guard_stats (&s->guard_slots, &s->guard_slots_used, &s->guard_allocs,
                  &s->guard_reports);
  if (want < 8)
    return;
  kp_cache_lent (&s->lent_blocks, &s->lent_bytes);
}

size_t
kame_pool_get_numa_stats (size_t *regions_per_node, size_t n)
{
  size_t nodes = kp_numa_nodes ();
  if (regions_per_node == NULL)
    return nodes;
  for (size_t i = 0; i < n; i++)
    regions_per_node[i] = 0;
  KP_FOR_EACH_REGION (r)
    if (r->numa_node < n)
      regions_per_node[r->numa_node]++;
  return nodes;
}

/* The text report, to L.  */
static void
kp_stats_text (kp_line_t *l, const kame_pool_stats_t *s)
{
  char buf[512], thp[64];
  int policy = kp_thp_policy_now ();
  if (policy == KAME_POOL_THP_SMALL)
    snprintf (thp, sizeof thp, "small (%zu groups, %zu split)",
              kp_groups_started (), kp_groups_split ());
  else
    snprintf (thp, sizeof thp, "%s",
              policy == KAME_POOL_THP_ALWAYS ? "on"
              : policy == KAME_POOL_THP_NEVER ? "never" : "off");
  /* snprintf with these conversions does not allocate in glibc.  */
  snprintf (buf, sizeof buf,
            "kamepool: %zu regions (%zu MiB reserved); %zu chunks live "
            "holding %zu units (%zu MiB); dedicated %zu KiB; "
            "%zu large mappings (%zu KiB); cache %zu KiB; "
            "tls model %s, hugepage advice %s\n",
            s->regions_populated, s->bytes_reserved >> 20, s->chunks_live,
            s->units_live, (s->units_live * KP_UNIT_SIZE) >> 20,
            s->dedicated_chunk_bytes >> 10, s->large_alloc_count,
            s->large_alloc_bytes >> 10, s->cache_bytes >> 10,
            KP_TLS_MODEL_NAME, thp);
  kp_line_add (l, buf);
  snprintf (buf, sizeof buf,
            "kamepool: small blocks: %zu KiB live in %zu KiB resident "
            "(%zu KiB free); given back by the decay: %zu KiB now, "
            "%zu pages in %zu calls ever; free units resident %zu KiB; "
            "remote frees pending %zu; abandoned %zu chunks (%zu KiB)\n",
            s->small_live_bytes >> 10, s->small_resident_bytes >> 10,
            s->small_free_bytes >> 10, s->purged_bytes >> 10, s->purge_pages,
            s->purge_calls, s->dirty_bytes >> 10, s->remote_pending,
            s->abandoned_chunks, s->abandoned_bytes >> 10);
  kp_line_add (l, buf);
  snprintf (buf, sizeof buf,
            "kamepool: given back: %zu pages in %zu madvise calls ever; "
            "free units reused after that: %zu; cached blocks lent to "
            "small chunks: %zu (%zu KiB); background purge: %zu "
            "passes, %zu pages, started %zu times, %s\n",
            s->discard_pages, s->discard_calls, s->refault_units,
            s->lent_blocks, s->lent_bytes >> 10,
            s->background_passes, s->background_pages, s->background_starts,
            s->background_running ? "running" : "not running");
  kp_line_add (l, buf);
  snprintf (buf, sizeof buf,
            "kamepool: since start: %zu blocks (%zu KiB) allocated, %zu "
            "(%zu KiB) freed; live now %zu blocks (%zu KiB); peak live "
            "%zu KiB, peak footprint %zu KiB\n",
            s->allocated_blocks, s->allocated_bytes >> 10, s->freed_blocks,
            s->freed_bytes >> 10, s->live_blocks, s->live_bytes >> 10,
            s->peak_live_bytes >> 10, s->peak_resident_bytes >> 10);
  kp_line_add (l, buf);
  snprintf (buf, sizeof buf,
            "kamepool: guarded sampling: %zu slots, %zu in use; %zu guarded "
            "blocks and %zu reports ever\n",
            s->guard_slots, s->guard_slots_used, s->guard_allocs,
            s->guard_reports);
  kp_line_add (l, buf);
  if (s->prof_table_bytes != 0)
    {
      snprintf (buf, sizeof buf, "kamepool: heap profile: %zu stacks in "
                "%zu KiB of stack table; %zu samples by their innermost "
                "frame only, %zu not recorded\n", s->prof_stacks,
                s->prof_table_bytes >> 10, s->prof_shortened,
                s->prof_dropped);
      kp_line_add (l, buf);
    }
  kp_line_add (l, "kamepool: class    size  chunks  live-blocks  "
               "free-blocks  resident-KiB\n");
  for (size_t i = 0; i < s->nclasses; i++)
    {
      const kame_pool_class_stats_t *k = &s->classes[i];
      if (k->chunks == 0)
        continue;
      snprintf (buf, sizeof buf,
                "kamepool: %5zu %7zu %7zu %12zu %12zu %13zu\n",
                i, k->block_size, k->chunks, k->live_blocks, k->free_blocks,
                k->resident_bytes >> 10);
      kp_line_add (l, buf);
    }
}

/* "NAME": V, to L (FIRST: no comma before it).  */
static void
kp_json_field (kp_line_t *l, const char *name, size_t v, bool first)
{
  kp_line_add (l, first ? "\"" : ", \"");
  kp_line_add (l, name);
  kp_line_add (l, "\": ");
  kp_line_num (l, v);
}

/* The JSON report, one object on one line, to L: every field of
   kame_pool_stats_t under its own name, the classes as an array of
   objects (every class, those without chunks too), and the settings
   in effect.  kame_pool_get_stats(3) and kamepool(7) list the
   members.  */
static void
kp_stats_json (kp_line_t *l, const kame_pool_stats_t *s)
{
  kp_line_add (l, "{\"kamepool\": ");
  kp_line_json_string (l, PACKAGE_VERSION, strlen (PACKAGE_VERSION));
  kp_json_field (l, "pid", (size_t) getpid (), false);
  kp_json_field (l, "version", s->version, false);
#define KP_JSON(f) kp_json_field (l, #f, s->f, false)
  KP_JSON (regions_populated);
  KP_JSON (bytes_reserved);
  KP_JSON (chunks_live);
  KP_JSON (units_live);
  KP_JSON (cache_bytes);
  KP_JSON (dedicated_chunk_bytes);
  KP_JSON (large_alloc_count);
  KP_JSON (large_alloc_bytes);
  KP_JSON (small_live_bytes);
  KP_JSON (small_resident_bytes);
  KP_JSON (small_free_bytes);
  KP_JSON (purged_bytes);
  KP_JSON (dirty_bytes);
  KP_JSON (remote_pending);
  KP_JSON (abandoned_chunks);
  KP_JSON (abandoned_bytes);
  KP_JSON (purge_calls);
  KP_JSON (purge_pages);
  KP_JSON (discard_calls);
  KP_JSON (discard_pages);
  KP_JSON (refault_units);
  KP_JSON (background_passes);
  KP_JSON (background_pages);
  KP_JSON (background_starts);
  KP_JSON (background_running);
  KP_JSON (allocated_blocks);
  KP_JSON (allocated_bytes);
  KP_JSON (freed_blocks);
  KP_JSON (freed_bytes);
  KP_JSON (live_blocks);
  KP_JSON (live_bytes);
  KP_JSON (peak_live_bytes);
  KP_JSON (peak_resident_bytes);
  KP_JSON (prof_stacks);
  KP_JSON (prof_table_bytes);
  KP_JSON (prof_shortened);
  KP_JSON (prof_dropped);
  KP_JSON (guard_slots);
  KP_JSON (guard_slots_used);
  KP_JSON (guard_allocs);
  KP_JSON (guard_reports);
  KP_JSON (lent_blocks);
  KP_JSON (lent_bytes);
  KP_JSON (nclasses);
#undef KP_JSON
  kp_line_add (l, ", \"tls_model\": \"" KP_TLS_MODEL_NAME "\", \"classes\": [");
  for (size_t i = 0; i < s->nclasses; i++)
    {
      const kame_pool_class_stats_t *k = &s->classes[i];
      kp_line_add (l, i == 0 ? "{" : ", {");
      kp_json_field (l, "class", i, true);
      kp_json_field (l, "block_size", k->block_size, false);
      kp_json_field (l, "chunks", k->chunks, false);
      kp_json_field (l, "live_blocks", k->live_blocks, false);
      kp_json_field (l, "free_blocks", k->free_blocks, false);
      kp_json_field (l, "resident_bytes", k->resident_bytes, false);
      kp_line_add (l, "}");
    }
  kp_line_add (l, "], \"settings\": {");
  kp_options_json (l);
  kp_line_add (l, "}}\n");
}

/* PATH with %p replaced by the pid and %% by %, into OUT (KP_PATH_MAX
   + 16 bytes: a pid has at most 10 digits, and the checked name holds
   few %p).  */
static void
kp_stats_path_expand (const char *path, char *out, size_t size)
{
  kp_line_t l = { out, size, 0, -1 };
  for (const char *c = path; *c != '\0'; c++)
    if (c[0] == '%' && c[1] == 'p')
      {
        kp_line_num (&l, (unsigned long long) getpid ());
        c++;
      }
    else if (c[0] == '%' && c[1] == '%')
      {
        kp_line_add (&l, "%");
        c++;
      }
    else
      kp_line_addn (&l, c, 1);
  out[l.len] = '\0';
}

/* The report of KAME_POOL_STATS, written without allocating: to
   stats_file when it is set, else to stderr.  A file is opened at exit
   with open(2) (not kept open: the program may close every descriptor,
   as daemons do), created or truncated; when it cannot be, one line
   says so and the report goes to stderr.  */
static void
kp_print_stats (void)
{
  int saved = errno;
  kame_pool_stats_t s = { .version = KAME_POOL_STATS_VERSION };
  kame_pool_get_stats (&s);
  int fd = -1;
  const char *path = kp_option_stats_path ();
  if (path[0] != '\0')
    {
      char name[KP_PATH_MAX * 4];
      kp_stats_path_expand (path, name, sizeof name);
      fd = open (name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0)
        {
          char lbuf[KP_PATH_MAX * 4 + 128];
          kp_line_t m = KP_LINE (lbuf, -1);
          kp_line_add (&m, "kamepool: stats_file ");
          kp_line_add (&m, name);
          kp_line_add (&m, ": cannot open it (errno ");
          kp_line_num (&m, (unsigned long long) errno);
          kp_line_add (&m, "); the report goes to stderr\n");
          kp_line_flush (&m);
        }
    }
  /* Written out whenever the buffer fills; static, as it is larger
     than a destructor's frame should be.  */
  static char buf[8192];
  kp_line_t l = KP_LINE (buf, fd >= 0 ? fd : 2);
  if (kp_setting (&kp_stats_format) == KP_STATS_JSON)
    kp_stats_json (&l, &s);
  else
    kp_stats_text (&l, &s);
  kp_line_flush (&l);
  if (fd >= 0)
    close (fd);
  errno = saved;
}

__attribute__ ((__destructor__)) static void
kp_at_exit (void)
{
  /* A program that never allocated never ran the initialisation: read
     the environment now.  */
  kp_options_read ();
  if (kp_setting (&kp_stats_at_exit))
    kp_print_stats ();
}
