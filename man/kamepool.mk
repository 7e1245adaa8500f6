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
dist_man_MANS += man/man7/kamepool.7
dist_man_MANS += man/man1/kamepool-run.1

## "make check-man-examples": build and run the first EXAMPLES block of
## each libkamepool page against the library just built, so that the
## examples users copy keep compiling (without warnings) and running.
KAMEPOOL_MAN_EXAMPLES = \
	man/man3/kame_pool_malloc.3 \
	man/man3/kame_pool_aligned_alloc.3 \
	man/man3/kame_pool_malloc_usable_size.3 \
	man/man3/kame_pool_set_max_bytes.3 \
	man/man3/kame_pool_set_thread_exit_reclaim.3 \
	man/man3/kame_pool_get_stats.3 \
	man/man3/kame_pool_trim.3 \
	man/man3/kamepool_mallinfo.3 \
	man/man3/kame_pool_free_sized.3 \
	man/man3/kame_pool_set_cap_policy.3 \
	man/man3/kame_pool_set_large_cache_cap.3 \
	man/man3/kame_pool_set_thp_policy.3 \
	man/man3/kame_pool_get_numa_stats.3 \
	man/man7/kamepool.7
check-man-examples: libkamepool.la
	@fail=0; for m in $(KAMEPOOL_MAN_EXAMPLES); do \
	  b=man-example-`basename $$m | tr . -`; \
	  awk '/^\.Sh EXAMPLES/ { e = 1; next } /^\.Sh / { e = 0 } \
	       e && !done && /^\.Bd -literal/ { l = 1; next } \
	       l && /^\.Ed/ { l = 0; done = 1; next } l { print }' \
	    $(srcdir)/$$m | sed -e 's/\\e/\\/g' -e 's/\\&//g' > $$b.c; \
	  if out=`$(LIBTOOL) --quiet --mode=link $(CC) -std=c11 -Wall -Wextra \
	      -I$(top_srcdir)/include $(PTHREAD_LIBS) -o $$b $$b.c \
	      libkamepool.la 2>&1` && test -z "$$out" \
	     && $(LIBTOOL) --mode=execute ./$$b >/dev/null; then :; \
	  else echo "$$m: example failed $$out"; fail=1; fi; \
	  rm -f $$b $$b.c; rm -rf .libs/$$b .libs/lt-$$b; \
	done; test $$fail = 0 && echo "man examples: all build and run"
.PHONY: check-man-examples
