## bench/local.mk: the benchmark programs and "make bench" (included by
## the top-level Makefile.am).  The programs are EXTRA_PROGRAMS, so
## neither "make" nor "make check" builds them; "make bench" builds them
## and runs bench/run-bench, which preloads each allocator in turn.

BENCH_PROGS = \
	bench/kprun \
	bench/arena_step \
	bench/loop \
	bench/prodcons \
	bench/xmalloc \
	bench/larson \
	bench/xmix \
	bench/falseshare \
	bench/tlbchase \
	bench/mixed_large \
	bench/rss_return \
	bench/server \
	bench/altest \
	bench/generations \
	bench/large_random \
	bench/ascap \
	bench/churn \
	bench/xstress \
	bench/idle \
	bench/guard_detect
EXTRA_PROGRAMS += $(BENCH_PROGS)
CLEANFILES += $(BENCH_PROGS)

## No sanitizers: a sanitizer runtime and a preloaded malloc fight over
## the same symbols.  Plain malloc/free, so no visibility flags either.
BENCH_CFLAGS = $(WARN_CFLAGS) -pthread
BENCH_LDADD = $(PTHREAD_LIBS)

bench_kprun_SOURCES = bench/kprun.c bench/bench.h
bench_kprun_CFLAGS = $(BENCH_CFLAGS)
bench_arena_step_SOURCES = bench/arena_step.c bench/bench.h
bench_arena_step_CFLAGS = $(BENCH_CFLAGS)
bench_arena_step_LDADD = libckarena.la $(BENCH_LDADD)
## A real executable, not a libtool wrapper script, so the preload and
## the peak RSS are those of the benchmark alone.
bench_arena_step_LDFLAGS = -no-install
bench_guard_detect_SOURCES = bench/guard_detect.c bench/bench.h
bench_guard_detect_CFLAGS = $(BENCH_CFLAGS)
bench_guard_detect_LDADD = $(BENCH_LDADD) -lm
bench_loop_SOURCES = bench/loop.c bench/bench.h
bench_loop_CFLAGS = $(BENCH_CFLAGS)
bench_loop_LDADD = $(BENCH_LDADD)
bench_prodcons_SOURCES = bench/prodcons.c bench/bench.h
bench_prodcons_CFLAGS = $(BENCH_CFLAGS)
bench_prodcons_LDADD = $(BENCH_LDADD)
bench_xmalloc_SOURCES = bench/xmalloc.c bench/bench.h
bench_xmalloc_CFLAGS = $(BENCH_CFLAGS)
bench_xmalloc_LDADD = $(BENCH_LDADD)
bench_larson_SOURCES = bench/larson.c bench/bench.h
bench_larson_CFLAGS = $(BENCH_CFLAGS)
bench_larson_LDADD = $(BENCH_LDADD)
bench_xmix_SOURCES = bench/xmix.c bench/bench.h
bench_xmix_CFLAGS = $(BENCH_CFLAGS)
bench_xmix_LDADD = $(BENCH_LDADD)
bench_falseshare_SOURCES = bench/falseshare.c bench/bench.h
bench_falseshare_CFLAGS = $(BENCH_CFLAGS)
bench_falseshare_LDADD = $(BENCH_LDADD)
bench_tlbchase_SOURCES = bench/tlbchase.c bench/bench.h
bench_tlbchase_CFLAGS = $(BENCH_CFLAGS)
bench_tlbchase_LDADD = $(BENCH_LDADD)
bench_mixed_large_SOURCES = bench/mixed_large.c bench/bench.h
bench_mixed_large_CFLAGS = $(BENCH_CFLAGS)
bench_mixed_large_LDADD = $(BENCH_LDADD)
bench_rss_return_SOURCES = bench/rss_return.c bench/bench.h
bench_rss_return_CFLAGS = $(BENCH_CFLAGS)
bench_rss_return_LDADD = $(BENCH_LDADD)
bench_server_SOURCES = bench/server.c bench/bench.h
bench_server_CFLAGS = $(BENCH_CFLAGS)
bench_server_LDADD = $(BENCH_LDADD)
bench_altest_SOURCES = bench/altest.c bench/bench.h
bench_altest_CFLAGS = $(BENCH_CFLAGS)
bench_altest_LDADD = $(BENCH_LDADD)
bench_generations_SOURCES = bench/generations.c bench/bench.h
bench_generations_CFLAGS = $(BENCH_CFLAGS)
bench_generations_LDADD = $(BENCH_LDADD)
bench_large_random_SOURCES = bench/large_random.c bench/bench.h
bench_large_random_CFLAGS = $(BENCH_CFLAGS)
bench_large_random_LDADD = $(BENCH_LDADD)
bench_ascap_SOURCES = bench/ascap.c bench/bench.h
bench_ascap_CFLAGS = $(BENCH_CFLAGS)
bench_ascap_LDADD = $(BENCH_LDADD)
bench_churn_SOURCES = bench/churn.c bench/bench.h
bench_churn_CFLAGS = $(BENCH_CFLAGS)
bench_churn_LDADD = $(BENCH_LDADD)
bench_xstress_SOURCES = bench/xstress.c bench/bench.h
bench_xstress_CFLAGS = $(BENCH_CFLAGS)
bench_xstress_LDADD = $(BENCH_LDADD)
bench_idle_SOURCES = bench/idle.c bench/bench.h
bench_idle_CFLAGS = $(BENCH_CFLAGS)
bench_idle_LDADD = $(BENCH_LDADD)

## A copy of libkamepool with the TLS model the build did not choose,
## so that the tables show the hot-path cost of both models side by
## side (kamepool-gd or kamepool-ie in run-bench).  Not installed.
if KP_TLS_INITIAL_EXEC
BENCH_OTHER_TLS = global-dynamic
else
BENCH_OTHER_TLS = initial-exec
endif
if KP_INTERPOSE
EXTRA_LTLIBRARIES += bench/libkamepool-tls.la
BENCH_TLS_LIB = bench/libkamepool-tls.la
endif
bench_libkamepool_tls_la_SOURCES = $(libkamepool_la_SOURCES)
bench_libkamepool_tls_la_CPPFLAGS = $(libkamepool_la_CPPFLAGS) \
	-DKP_TLS_MODEL_OVERRIDE='"$(BENCH_OTHER_TLS)"'
bench_libkamepool_tls_la_CFLAGS = $(AM_CFLAGS) -fno-semantic-interposition \
	-fno-tree-slp-vectorize
bench_libkamepool_tls_la_LIBADD = $(libkamepool_la_LIBADD)
bench_libkamepool_tls_la_LDFLAGS = $(AM_LDFLAGS) -no-undefined -avoid-version \
	-rpath $(abs_builddir)/bench
if HAVE_LD_VERSION_SCRIPT
bench_libkamepool_tls_la_LDFLAGS += \
	-Wl,--version-script=$(srcdir)/lib/kamepool/libkamepool.map
endif
CLEANFILES += bench/libkamepool-tls.la

EXTRA_DIST += bench/run-bench bench/README doc/bench-size-sweep.svg

## The libraries come first: the driver preloads .libs/libkamepool.so.
## Results go to bench/results in the build tree; the size-sweep chart
## to doc/ in the source tree (see bench/README for the variables).
bench: $(lib_LTLIBRARIES) $(BENCH_TLS_LIB) $(BENCH_PROGS)
	KP_BENCH_OTHER_TLS=$(BENCH_OTHER_TLS) \
	  $(SHELL) $(srcdir)/bench/run-bench $(top_builddir) $(top_srcdir)
clean-local: clean-bench
clean-bench:
	-rm -rf bench/results
.PHONY: bench clean-bench
