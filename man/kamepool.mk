## man/kamepool.mk: the man pages of libkamepool and kamepool-run
## (included by the top-level Makefile.am).  One full page per function
## family; the other names of a family are ".so" alias pages.

dist_man_MANS += \
	man/man3/kame_pool_malloc.3 \
	man/man3/kame_pool_calloc.3 \
	man/man3/kame_pool_realloc.3 \
	man/man3/kame_pool_free.3
dist_man_MANS += \
	man/man3/kame_pool_aligned_alloc.3 \
	man/man3/kame_pool_posix_memalign.3 \
	man/man3/kame_pool_malloc_usable_size.3 \
	man/man3/kame_pool_set_max_bytes.3 \
	man/man3/kame_pool_get_max_bytes.3 \
	man/man3/kame_pool_reserved_bytes.3 \
	man/man3/kame_pool_set_thread_exit_reclaim.3 \
	man/man3/kame_pool_get_thread_exit_reclaim.3 \
	man/man3/kame_pool_get_stats.3 \
	man/man3/kame_pool_trim.3 \
	man/man3/kamepool_mallinfo.3 \
	man/man3/kamepool_mallopt.3 \
	man/man3/kame_pool_free_sized.3 \
	man/man3/kame_pool_free_aligned_sized.3
dist_man_MANS += \
	man/man3/kame_pool_set_cap_policy.3 \
	man/man3/kame_pool_get_cap_policy.3 \
	man/man3/kame_pool_set_large_cache_cap.3 \
	man/man3/kame_pool_get_large_cache_cap.3
dist_man_MANS += \
	man/man3/kame_pool_set_thp_policy.3 \
	man/man3/kame_pool_get_thp_policy.3 \
	man/man3/kame_pool_get_numa_stats.3
dist_man_MANS += man/man3/kame_pool_prof_dump.3
dist_man_MANS += man/man7/kamepool.7
dist_man_MANS += man/man1/kamepool-run.1

